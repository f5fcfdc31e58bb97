//! Prometheus metrics (issue #5), black-box: `warden run --metrics-file` writes the text file
//! at the end of the run, `--metrics-addr` (alias `--metrics-listen`) serves `/metrics` and
//! `/healthz` while the command runs, and the counts come from the same records as
//! `--violations` (kernel records as root, the proxy's decisions and bytes always). Kernel
//! records need root and auditing is `required` where they are expected, so a machine where
//! the programs do not load fails instead of passing without counts; a missing prerequisite
//! skips loudly, and under CI=true it fails. The network tests use the namespace harness of
//! `warden_tests::netns` (root, iproute2, python3, openssl) and curl.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use warden_tests::netns::TestNet;
use warden_tests::{have, is_root, ready_unless, Output, TestEnv};

fn ready(test: &str, missing: Option<&str>) -> bool {
    ready_unless(test, missing.map(str::to_string))
}

fn run(env: &TestEnv, args: &[&str], script: &str) -> Output {
    let out = run_command(env, args, script).output().unwrap();
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn run_command(env: &TestEnv, args: &[&str], script: &str) -> Command {
    let runs = env.root().join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let mut cmd = env.command();
    cmd.arg("run")
        .args(args)
        .args(["--", "sh", "-c", script])
        .env("TMPDIR", &runs)
        .stdin(Stdio::null());
    cmd
}

/// The value of the sample `series` (name and labels exactly as exposed, e.g.
/// `warden_violations_total{kind="file-write",operation="open",layer="mount"}`) in `text`.
fn sample(text: &str, series: &str) -> Option<f64> {
    let found: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .collect();
    assert!(found.len() <= 1, "more than one {series}: {text}");
    found.first().map(|v| v.parse().unwrap())
}

/// Every sample of `text` whose series starts with `prefix`.
fn samples_of<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.starts_with(prefix)).collect()
}

#[test]
fn the_metrics_file_counts_violations_by_kind_and_layer() {
    let test = "the_metrics_file_counts_violations_by_kind_and_layer";
    if !ready(
        test,
        (!is_root()).then_some("not running as root (loading eBPF programs needs root)"),
    ) {
        return;
    }
    let env = TestEnv::new();
    let settings = env
        .write_settings(
            "audit.json",
            r#"{ "warden": { "audit": { "required": true } } }"#,
        )
        .display()
        .to_string();
    let secret = env.root().join("secret.txt");
    std::fs::write(&secret, "top secret\n").unwrap();
    let outside = format!("/etc/warden-metrics-test-{}", std::process::id());
    let dir = env.root().join("textfile");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("warden.prom");
    let out = run(
        &env,
        &[
            "--settings",
            &settings,
            "--metrics-file",
            file.to_str().unwrap(),
            "--deny-read",
            secret.to_str().unwrap(),
        ],
        &format!(
            "echo x > {outside}; cat {secret}; /bin/true; exit 3",
            secret = secret.display()
        ),
    );
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(!Path::new(&outside).exists());
    let text = std::fs::read_to_string(&file).unwrap();
    // The denied write (sh's open of the file, refused by the read-only mount) and the masked
    // read, by kind, operation and layer.
    for series in [
        r#"warden_violations_total{kind="file-write",operation="open",layer="mount"}"#,
        r#"warden_violations_total{kind="file-read",operation="open",layer="mount"}"#,
    ] {
        assert_eq!(sample(&text, series), Some(1.0), "{series}\n{text}");
    }
    // sh, cat and true at least, each an exec event of the programs.
    assert!(
        sample(&text, "warden_execs_total").unwrap() >= 3.0,
        "{text}"
    );
    assert!(
        sample(&text, "warden_bpf_events_total").unwrap() >= 5.0,
        "{text}"
    );
    assert_eq!(
        sample(&text, "warden_sandboxes_active"),
        Some(0.0),
        "{text}"
    );
    // One start, and its time.
    assert_eq!(
        sample(&text, r#"warden_sandbox_starts_total{result="ok"}"#),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, r#"warden_sandbox_starts_total{result="error"}"#),
        Some(0.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "warden_sandbox_start_seconds_count"),
        Some(1.0),
        "{text}"
    );
    let secs = sample(&text, "warden_sandbox_start_seconds_sum").unwrap();
    assert!(secs > 0.0 && secs < 30.0, "{text}");
    assert_eq!(
        sample(&text, r#"warden_sandbox_start_seconds_bucket{le="+Inf"}"#),
        Some(1.0),
        "{text}"
    );
    // Every program of warden.bpf.c, attached for the run.
    for program in [
        "sys_enter",
        "sys_exit",
        "sched_exec",
        "connect4",
        "connect6",
        "sendmsg4",
        "sendmsg6",
        "connect_unix",
        "sendmsg_unix",
    ] {
        let series = format!(r#"warden_bpf_programs_loaded{{program="{program}"}}"#);
        assert_eq!(sample(&text, &series), Some(1.0), "{series}\n{text}");
    }
    assert_eq!(
        samples_of(&text, "warden_bpf_programs_loaded{").len(),
        9,
        "{text}"
    );
    for reason in ["ring-buffer-full", "pending-map-full", "undecodable"] {
        let series = format!(r#"warden_bpf_events_dropped_total{{reason="{reason}"}}"#);
        assert_eq!(sample(&text, &series), Some(0.0), "{series}\n{text}");
    }
    // No path, pid or sandbox name is a label.
    assert!(!text.contains(&outside), "{text}");
    assert!(!text.contains("secret.txt"), "{text}");
    assert!(!text.contains("sandbox="), "{text}");
    // The textfile collector's format: counters typed by their `_total` name, no `# EOF`.
    assert!(
        text.contains("# TYPE warden_violations_total counter\n"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE warden_sandboxes_active gauge\n"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE warden_sandbox_start_seconds histogram\n"),
        "{text}"
    );
    assert!(!text.contains("# EOF"), "{text}");
    // Written atomically: only the file itself is in its directory.
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["warden.prom"]);
}

/// A raw HTTP GET of `path`, `None` when nothing answers yet.
fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn metrics_and_healthz_are_served_on_loopback_while_the_command_runs() {
    let env = TestEnv::new();
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let listen = addr.to_string();
    let mut child = run_command(&env, &["--metrics-addr", &listen], "sleep 2")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut scraped = None;
    while Instant::now() < deadline {
        if let Some(resp) = http_get(addr, "/metrics") {
            if sample(&resp, "warden_sandboxes_active") == Some(1.0) {
                scraped = Some(resp);
                break;
            }
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let health = http_get(addr, "/healthz");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let resp = scraped.unwrap_or_else(|| panic!("never scraped active=1; stderr: {stderr}"));
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(
        resp.contains("content-type: application/openmetrics-text"),
        "{resp}"
    );
    assert!(
        resp.contains("# TYPE warden_sandboxes_active gauge"),
        "{resp}"
    );
    // The start is counted before the endpoint serves.
    assert_eq!(
        sample(&resp, r#"warden_sandbox_starts_total{result="ok"}"#),
        Some(1.0),
        "{resp}"
    );
    assert_eq!(
        sample(&resp, "warden_sandbox_start_seconds_count"),
        Some(1.0),
        "{resp}"
    );
    assert!(resp.trim_end().ends_with("# EOF"), "{resp}");
    let health = health.unwrap_or_else(|| panic!("/healthz did not answer; stderr: {stderr}"));
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    assert!(health.ends_with("\r\n\r\nok\n"), "{health}");
    // The run is over: nothing listens any more.
    assert!(http_get(addr, "/metrics").is_none());
}

/// Any local user can connect to a loopback port: connections that trickle their request a
/// byte at a time must not keep a scraper out (200 of them once did, for as long as they
/// lasted).
#[test]
fn slow_connections_cannot_keep_a_scrape_out() {
    let env = TestEnv::new();
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut child = run_command(&env, &["--metrics-addr", &addr.to_string()], "sleep 8")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while http_get(addr, "/healthz").is_none() {
        assert!(Instant::now() < deadline, "the endpoint never served");
        std::thread::sleep(Duration::from_millis(50));
    }
    // 200 connections, each having sent one byte of a request, held open.
    let mut slow = Vec::new();
    for _ in 0..200 {
        if let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) {
            let _ = s.write_all(b"G");
            slow.push(s);
        }
    }
    std::thread::sleep(Duration::from_millis(800));
    let mut scraped = false;
    let deadline = Instant::now() + Duration::from_secs(4);
    while Instant::now() < deadline {
        if http_get(addr, "/metrics").is_some_and(|r| r.starts_with("HTTP/1.1 200")) {
            scraped = true;
            break;
        }
        // The slow clients keep trickling.
        for s in &mut slow {
            let _ = s.write_all(b"E");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(slow);
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = child.wait();
    assert!(scraped, "no scrape got through the slow connections");
}

#[test]
fn a_remote_listen_address_needs_allow_remote() {
    let env = TestEnv::new();
    // `--metrics-listen` is the older name of `--metrics-addr`.
    let out = run(&env, &["--metrics-listen", "0.0.0.0:9464"], "exit 0");
    assert_eq!(out.code, 125, "{}", out.stderr);
    assert!(out.stderr.contains("allowRemote"), "{}", out.stderr);
    let settings = env
        .write_settings(
            "remote.json",
            r#"{ "warden": { "metrics": { "allowRemote": true } } }"#,
        )
        .display()
        .to_string();
    let out = run(
        &env,
        &["--settings", &settings, "--metrics-addr", "0.0.0.0:0"],
        "exit 4",
    );
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(
        out.stderr.contains("warden: metrics on http://0.0.0.0:"),
        "{}",
        out.stderr
    );
}

#[test]
fn proxy_denials_are_counted_as_network_requests() {
    let test = "proxy_denials_are_counted_as_network_requests";
    if !ready(test, (!have("curl")).then_some("curl is not installed")) {
        return;
    }
    let env = TestEnv::new();
    let file = env.root().join("m.prom");
    let out = run(
        &env,
        &[
            "--allow-domain",
            "allowed.invalid",
            "--metrics-file",
            file.to_str().unwrap(),
        ],
        "curl -sS -o /dev/null -w '%{http_code}' -x \"$HTTP_PROXY\" http://denied.invalid/; exit 0",
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "403", "{}", out.stderr);
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        sample(
            &text,
            r#"warden_network_requests_total{decision="deny",protocol="http"}"#
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"warden_violations_total{kind="network",operation="http",layer="proxy"}"#
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"warden_network_requests_total{decision="allow",protocol="http"}"#
        ),
        None,
        "{text}"
    );
    // A host in no list is left to approval, and with nobody to ask (no `--approvals`, stdin
    // not a terminal) that is a decision of its own.
    assert_eq!(
        sample(
            &text,
            r#"warden_approvals_total{kind="network",decision="no-approver"}"#
        ),
        Some(1.0),
        "{text}"
    );
    assert!(!text.contains("denied.invalid"), "{text}");
}

// ---------------------------------------------------------------------------------------------
// Through the network harness: bytes and approvals.

/// Proxy variables of the caller's environment, removed so only warden's reach the command.
const PROXY_VARS: [&str; 8] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

/// `warden run ARGS -- sh -c SCRIPT` with the caller's proxy variables removed.
fn run_networked(env: &TestEnv, args: &[String], script: &str) -> Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = run_command(env, &args, script);
    for var in PROXY_VARS {
        cmd.env_remove(var);
    }
    let out = cmd.output().unwrap();
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn proxied_transfers_count_their_bytes_per_direction_as_they_move() {
    let test = "proxied_transfers_count_their_bytes_per_direction_as_they_move";
    if !ready(test, (!have("curl")).then_some("curl is not installed")) {
        return;
    }
    let Some(net) = TestNet::or_skip(test) else {
        return;
    };
    let zone = format!("m{}.test", std::process::id());
    let host = format!("download.{zone}");
    let _name = net.host_name(&host);
    let _http = net.http_server();
    let _https = net.https_server(&[&host]);
    let env = TestEnv::new();
    let ca = env.project().join("ca.pem");
    std::fs::copy(net.ca_cert(), &ca).unwrap();
    let file = env.root().join("m.prom");
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    const N: u64 = 3 * 1024 * 1024;
    const SLOW: u64 = 1024 * 1024;
    let args = [
        "--allow-domain".to_string(),
        host.clone(),
        "--metrics-file".into(),
        file.display().to_string(),
        "--metrics-addr".into(),
        addr.to_string(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // Two downloads (forwarded, tunnelled), an upload, then a slow tunnelled upload (curl
    // sends 1 MiB at 512 KiB/s) that the scrapes below catch halfway. (A slow download
    // would not do: the proxy moves it into the client's socket buffer at once.)
    let mut cmd = run_command(
        &env,
        &args,
        &format!(
            "set -e; head -c 100000 /dev/zero > up.bin; head -c {SLOW} /dev/zero > slow.bin; \
             curl -sS --max-time 60 -o /dev/null -w '%{{size_download}}\\n' http://{host}/bytes/{N}; \
             curl -sS --max-time 60 --cacert {ca} -o /dev/null -w '%{{size_download}}\\n' https://{host}/bytes/{N}; \
             curl -sS --max-time 60 -o /dev/null -T up.bin http://{host}/upload; \
             curl -sS --max-time 60 --limit-rate 512k --cacert {ca} -o /dev/null -w '%{{size_upload}}\\n' -T slow.bin https://{host}/upload",
            ca = ca.display()
        ),
    );
    for var in PROXY_VARS {
        cmd.env_remove(var);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        if let Some(v) = http_get(addr, "/metrics")
            .and_then(|r| sample(&r, r#"warden_network_bytes_total{direction="up"}"#))
        {
            seen.push(v);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let out = Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, format!("{N}\n{N}\n{SLOW}\n"), "{out:?}");
    let text = std::fs::read_to_string(&file).unwrap();
    // Both bodies came down: the forwarded one exactly (bodies are counted), the tunnelled
    // one with its TLS records.
    let down = sample(&text, r#"warden_network_bytes_total{direction="down"}"#).unwrap();
    let want = (2 * N) as f64;
    assert!(down >= want, "{down} < {want}\n{text}");
    assert!(down < want * 1.1, "{down}\n{text}");
    // The uploads' bodies (and the TLS handshakes) went up.
    let up = sample(&text, r#"warden_network_bytes_total{direction="up"}"#).unwrap();
    let want = (100_000 + SLOW) as f64;
    assert!(up >= want, "{up} < {want}\n{text}");
    assert!(up < want * 1.1, "{up}\n{text}");
    // Counted as the bytes move: a scrape during the slow tunnel saw part of it.
    assert!(
        seen.iter().any(|v| *v > 300_000.0 && *v < up - 100_000.0),
        "no scrape saw the slow upload halfway: {seen:?} (final {up})"
    );
    for series in [
        r#"warden_network_requests_total{decision="allow",protocol="http"}"#,
        r#"warden_network_requests_total{decision="allow",protocol="connect"}"#,
    ] {
        assert!(sample(&text, series).unwrap() >= 1.0, "{series}\n{text}");
    }
    assert!(!text.contains(&zone), "a host became a label: {text}");
}

#[test]
fn approvals_are_counted_by_kind_and_decision() {
    let test = "approvals_are_counted_by_kind_and_decision";
    if !ready(test, (!have("curl")).then_some("curl is not installed")) {
        return;
    }
    let Some(net) = TestNet::or_skip(test) else {
        return;
    };
    let zone = format!("a{}.test", std::process::id());
    let once = format!("once.{zone}");
    let denied = format!("denied.{zone}");
    let _names = [net.host_name(&once), net.host_name(&denied)];
    let _http = net.http_server();
    let env = TestEnv::new();
    let file = env.root().join("m.prom");
    let sock = env.root().join("approvals.sock");
    let _ = warden_tests::warden_bin(); // built before the client's clock starts
    let asked = warden_tests::answer_requests(sock.clone(), vec!["allow-once", "deny"]);
    let out = run_networked(
        &env,
        &[
            "--approvals".into(),
            format!("unix:{}", sock.display()),
            "--metrics-file".into(),
            file.display().to_string(),
            "--session".into(),
            "m-1".into(),
        ],
        &format!(
            "curl -sS --max-time 30 -o /dev/null -w '%{{http_code}}\\n' http://{once}/a; \
             curl -sS --max-time 30 -o /dev/null -w '%{{http_code}}\\n' http://{once}/b; \
             curl -sS --max-time 30 -o /dev/null -w '%{{http_code}}\\n' http://{denied}/c"
        ),
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "200\n200\n403\n", "{out:?}");
    assert_eq!(asked.join().unwrap().len(), 2);
    let text = std::fs::read_to_string(&file).unwrap();
    // One question per host: the second request to `once` used the session's approval and
    // is no decision of its own.
    for (decision, n) in [("allow-once", Some(1.0)), ("deny", Some(1.0))] {
        let series = format!(r#"warden_approvals_total{{kind="network",decision="{decision}"}}"#);
        assert_eq!(sample(&text, &series), n, "{series}\n{text}");
    }
    assert_eq!(
        samples_of(&text, "warden_approvals_total{").len(),
        2,
        "{text}"
    );
    // The session's approval outlives the run: `warden check` in the session and the
    // session's next sandbox (with nobody to ask) both honour it; nothing else does.
    let later = env.run(["check", "--domain", &once, "--session", "m-1"]);
    assert_eq!(later.code, 0, "{later:?}");
    assert!(later.stdout.contains("session"), "{later:?}");
    assert_eq!(env.run(["check", "--domain", &once]).code, 2);
    assert_eq!(
        env.run(["check", "--domain", &denied, "--session", "m-1"])
            .code,
        2
    );
    let next = run_networked(
        &env,
        &["--session".into(), "m-1".into(), "--non-interactive".into()],
        &format!(
            "curl -sS --max-time 30 -o /dev/null -w '%{{http_code}}\\n' http://{once}/d; \
             curl -sS --max-time 30 -o /dev/null -w '%{{http_code}}\\n' http://{denied}/e"
        ),
    );
    assert_eq!(next.stdout, "200\n403\n", "{next:?}");
}

/// The metrics file is written at the end of the run, often into the writable working
/// directory: a command that swaps its directory for a symlink must not make warden write
/// there (0644, a file name the user chose) — warden writes into the directory it opened at
/// the start.
#[test]
fn the_metrics_file_is_not_written_through_a_directory_the_command_swapped() {
    let env = TestEnv::new();
    let other = env.root().join("elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::create_dir_all(env.project().join("m")).unwrap();
    let file = env.project().join("m/warden.prom");
    let out = run(
        &env,
        &["--metrics-file", file.to_str().unwrap()],
        &format!(
            "if mv m m.old 2>/dev/null && ln -s {} m; then echo swapped; else echo refused; fi",
            other.display()
        ),
    );
    // The file is protected for the run, so its directory is pinned: the swap itself fails
    // (EBUSY). Had it succeeded, warden would still write into the directory it opened.
    assert!(out.stdout.contains("refused"), "{out:?}");
    assert!(
        !other.join("warden.prom").exists(),
        "written through the symlink"
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("warden_sandbox_starts_total"), "{text}");
}

//! Prometheus metrics (issue #5), black-box: `warden run --metrics-file` writes the text file
//! at the end of the run, `--metrics-listen` serves `/metrics` while the command runs, and the
//! counts come from the same records as `--violations` (kernel records as root, the proxy's
//! decisions always). Kernel records need root and auditing is `required` where they are
//! expected, so a machine where the programs do not load fails instead of passing without
//! counts; a missing prerequisite skips loudly, and under CI=true it fails.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use warden_tests::{Output, TestEnv};

fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| v == "true")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `true` when `missing` is `None`; otherwise panics under CI=true, or prints a loud skip.
fn ready(test: &str, missing: Option<&str>) -> bool {
    let Some(what) = missing else {
        return true;
    };
    assert!(!in_ci(), "{test}: CI=true but {what}");
    eprintln!("\n*** SKIPPED {test}: {what} ***\n");
    false
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

/// The value of the one sample line of `text` that starts with `prefix` (the metric name and
/// the labels before `sandbox`) and names a `warden-<pid>` sandbox.
fn sample(text: &str, prefix: &str) -> Option<u64> {
    let found: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(prefix) && l[prefix.len()..].starts_with("sandbox=\"warden-"))
        .collect();
    assert!(found.len() <= 1, "more than one {prefix}: {text}");
    let line = found.first()?;
    let (_, value) = line.rsplit_once("} ")?;
    Some(value.parse().unwrap())
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
    assert_eq!(
        sample(
            &text,
            r#"warden_violations_total{kind="file-write",layer="mount","#
        ),
        Some(1),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"warden_violations_total{kind="file-read",layer="mount","#
        ),
        Some(1),
        "{text}"
    );
    // sh, cat and true at least.
    assert!(sample(&text, "warden_execs_total{").unwrap() >= 3, "{text}");
    assert_eq!(sample(&text, "warden_sandbox_running{"), Some(0), "{text}");
    for reason in ["ring-buffer-full", "pending-map-full", "undecodable"] {
        let line = text
            .lines()
            .find(|l| {
                l.starts_with("warden_audit_events_dropped_total{")
                    && l.contains(&format!("reason=\"{reason}\""))
            })
            .unwrap_or_else(|| panic!("no drop counter for {reason}: {text}"));
        assert!(line.ends_with(" 0"), "{line}");
    }
    // The textfile collector's format: counters typed by their `_total` name, no `# EOF`.
    assert!(
        text.contains("# TYPE warden_violations_total counter\n"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE warden_sandbox_running gauge\n"),
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
fn metrics_are_served_on_loopback_while_the_command_runs() {
    let env = TestEnv::new();
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let listen = addr.to_string();
    let mut child = run_command(&env, &["--metrics-listen", &listen], "sleep 2")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut scraped = None;
    while Instant::now() < deadline {
        if let Some(resp) = http_get(addr, "/metrics") {
            if sample(&resp, "warden_sandbox_running{") == Some(1) {
                scraped = Some(resp);
                break;
            }
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let resp = scraped.unwrap_or_else(|| panic!("never scraped running=1; stderr: {stderr}"));
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(
        resp.contains("content-type: application/openmetrics-text"),
        "{resp}"
    );
    assert!(
        resp.contains("# TYPE warden_sandbox_running gauge"),
        "{resp}"
    );
    assert!(resp.trim_end().ends_with("# EOF"), "{resp}");
    // The run is over: nothing listens any more.
    assert!(http_get(addr, "/metrics").is_none());
}

#[test]
fn a_remote_listen_address_needs_allow_remote() {
    let env = TestEnv::new();
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
        &["--settings", &settings, "--metrics-listen", "0.0.0.0:0"],
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
            r#"warden_network_requests_total{decision="deny",protocol="http","#
        ),
        Some(1),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"warden_violations_total{kind="network",layer="proxy","#
        ),
        Some(1),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"warden_network_requests_total{decision="allow",protocol="http","#
        ),
        None,
        "{text}"
    );
}

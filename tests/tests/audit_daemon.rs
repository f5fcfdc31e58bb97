//! The node audit daemon (`warden audit`, issue #5), black-box: a daemon on a temporary
//! socket (`--socket`, `WARDEN_AUDIT_SOCKET` for `warden run`), sandboxes that register with
//! it, and what it writes, serves and cleans up. As root only: without root the tests skip
//! loudly, and under CI=true they fail; as root, a daemon whose programs do not load fails
//! the test. Every test stops its daemon (SIGTERM, then SIGKILL) and its runs, also when it
//! panics; sockets and files live in the test's temporary directory.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use warden_tests::{compile_c, have, root_or_skip, TestEnv};

/// `true` when the tests can run here (root); otherwise panics under CI=true, or skips loudly.
fn ready(test: &str) -> bool {
    root_or_skip(test, "the audit daemon loads eBPF programs")
}

/// A running `warden audit`, stopped (SIGTERM, then SIGKILL) when dropped.
struct Daemon {
    child: Option<Child>,
    socket: PathBuf,
    violations: PathBuf,
    metrics: SocketAddr,
    stderr: Arc<Mutex<String>>,
}

impl Daemon {
    fn start(env: &TestEnv, dir: &Path) -> Daemon {
        std::fs::create_dir_all(dir).unwrap();
        let socket = dir.join("audit.sock");
        let violations = dir.join("node.jsonl");
        let mut child = env
            .command()
            .args(["audit", "--socket"])
            .arg(&socket)
            .arg("--violations")
            .arg(&violations)
            .args(["--metrics-addr", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        let mut daemon = Daemon {
            child: Some(child),
            socket,
            violations,
            metrics: "127.0.0.1:1".parse().unwrap(),
            stderr,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let text = daemon.stderr();
            let addr = text.lines().find_map(|l| {
                l.strip_prefix("warden audit: metrics on http://")?
                    .strip_suffix("/metrics")?
                    .parse()
                    .ok()
            });
            if let (Some(addr), true) = (addr, text.contains("warden audit: listening on")) {
                daemon.metrics = addr;
                break;
            }
            if let Some(status) = daemon.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "the audit daemon exited ({status}) before listening (eBPF programs not \
                     loadable here?):\n{text}"
                );
            }
            assert!(
                Instant::now() < deadline,
                "the daemon did not start:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        daemon
    }

    fn pid(&self) -> i32 {
        i32::try_from(self.child.as_ref().unwrap().id()).unwrap()
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    fn scrape(&self) -> String {
        http_get(self.metrics, "/metrics")
    }

    /// Polls `/metrics` until `series` has `value`.
    fn wait_for(&self, series: &str, value: f64) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = self.scrape();
            if sample(&text, series) == Some(value) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{series} never became {value}:\n{text}\ndaemon:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM, and the exit status (SIGKILL after 20 s).
    fn stop(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().unwrap();
        signal(child.id(), nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let status = child.wait().unwrap();
                panic!(
                    "the daemon did not stop on SIGTERM ({status}):\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(child.id(), nix::sys::signal::Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(10);
            while child.try_wait().ok().flatten().is_none() {
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// A `warden run` that is killed (SIGKILL) if the test ends before it.
struct Run(Option<Child>);

impl Run {
    /// The exit code (-1 for a signal) and stderr.
    fn wait(self) -> (i32, String) {
        let out = self.output();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn output(mut self) -> std::process::Output {
        self.0.take().unwrap().wait_with_output().unwrap()
    }

    fn id(&self) -> u32 {
        self.0.as_ref().unwrap().id()
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()), sig);
}

/// Settings that make auditing required: a run that got no kernel records fails.
fn required(env: &TestEnv) -> String {
    env.write_settings(
        "audit.json",
        r#"{ "warden": { "audit": { "required": true } } }"#,
    )
    .display()
    .to_string()
}

/// Starts `warden run ARGS -- sh -c SCRIPT` registered with `daemon`.
fn start_run(env: &TestEnv, daemon: &Daemon, args: &[&str], script: &str) -> Run {
    let runs = env.root().join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let child = env
        .command()
        .arg("run")
        .args(args)
        .args(["--", "sh", "-c", script])
        .env("TMPDIR", &runs)
        .env("WARDEN_AUDIT_SOCKET", &daemon.socket)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Run(Some(child))
}

fn http_get(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// The value of the sample `series` (name and labels exactly as exposed) in `text`.
fn sample(text: &str, series: &str) -> Option<f64> {
    let found: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .collect();
    assert!(found.len() <= 1, "more than one {series}: {text}");
    found.first().map(|v| v.parse().unwrap())
}

fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

fn writes_to<'a>(recs: &'a [Value], target: &str) -> Vec<&'a Value> {
    recs.iter()
        .filter(|r| r["kind"] == "file-write" && r["target"] == target)
        .collect()
}

/// The ids of the bpf links process `pid` holds (from /proc/PID/fdinfo).
fn link_ids(pid: i32) -> Vec<u64> {
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .unwrap()
        .flatten()
    {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        if let Some(id) = text
            .lines()
            .find_map(|l| l.strip_prefix("link_id:"))
            .and_then(|v| v.trim().parse().ok())
        {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    ids
}

/// The ids of every bpf link on the machine (bpftool).
fn all_link_ids() -> Vec<u64> {
    let out = Command::new("bpftool")
        .args(["-j", "link", "show"])
        .output()
        .unwrap();
    assert!(out.status.success(), "bpftool link show failed");
    let links: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Array(Vec::new()));
    links
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["id"].as_u64())
        .collect()
}

/// The milliseconds the daemon logged for each registration.
fn registration_ms(stderr: &str) -> Vec<f64> {
    stderr
        .lines()
        .filter(|l| l.starts_with("warden audit: registered "))
        .filter_map(|l| l.rsplit_once(" in ")?.1.strip_suffix(" ms)")?.parse().ok())
        .collect()
}

#[test]
fn two_labelled_sandboxes_report_to_the_daemon_and_their_own_files() {
    if !ready("two_labelled_sandboxes_report_to_the_daemon_and_their_own_files") {
        return;
    }
    let env = TestEnv::new();
    let daemon = Daemon::start(&env, &env.root().join("daemon"));
    let settings = required(&env);
    let tag = std::process::id();
    let target_a = format!("/etc/warden-daemon-test-{tag}-a");
    let target_b = format!("/etc/warden-daemon-test-{tag}-b");
    let file_a = env.root().join("a.jsonl");
    let file_b = env.root().join("b.jsonl");
    // One textfile-collector directory for both runs: their series differ by label.
    let textfile = env.root().join("textfile");
    std::fs::create_dir_all(&textfile).unwrap();
    let prom_a = textfile.join("a.prom");
    let prom_b = textfile.join("b.prom");
    let script = |t: &str| format!("echo x > {t}; sleep 0.5; exit 0");
    let started = Instant::now();
    let run_a = start_run(
        &env,
        &daemon,
        &[
            "--settings",
            &settings,
            "--label",
            "team=alpha",
            "--label",
            "agent=a1",
            "--violations",
            file_a.to_str().unwrap(),
            "--metrics-file",
            prom_a.to_str().unwrap(),
        ],
        &script(&target_a),
    );
    let run_b = start_run(
        &env,
        &daemon,
        &[
            "--settings",
            &settings,
            "--label",
            "team=beta",
            "--violations",
            file_b.to_str().unwrap(),
            "--metrics-file",
            prom_b.to_str().unwrap(),
        ],
        &script(&target_b),
    );
    let (sandbox_a, sandbox_b) = (
        format!("warden-{}", run_a.id()),
        format!("warden-{}", run_b.id()),
    );
    let (code_a, err_a) = run_a.wait();
    let (code_b, err_b) = run_b.wait();
    let elapsed = started.elapsed();
    assert_eq!(code_a, 0, "{err_a}");
    assert_eq!(code_b, 0, "{err_b}");
    for err in [&err_a, &err_b] {
        assert!(
            !err.contains("own eBPF programs"),
            "the run loaded its own programs:\n{err}"
        );
        assert!(!err.contains("warning"), "{err}");
    }
    let log = daemon.stderr();
    assert!(log.contains(&format!("registered {sandbox_a} ")), "{log}");
    assert!(log.contains(&format!("registered {sandbox_b} ")), "{log}");

    // The daemon's file: one record each, with its sandbox id and labels.
    daemon.wait_for("warden_sandboxes_registered", 0.0);
    let node = records(&daemon.violations);
    for (target, sandbox, labels) in [
        (
            &target_a,
            &sandbox_a,
            serde_json::json!({"agent": "a1", "team": "alpha"}),
        ),
        (&target_b, &sandbox_b, serde_json::json!({"team": "beta"})),
    ] {
        let found = writes_to(&node, target);
        assert_eq!(found.len(), 1, "{target}: {node:#?}");
        let r = found[0];
        assert_eq!(r["sandbox"], sandbox.as_str(), "{r:#}");
        assert_eq!(r["labels"], labels, "{r:#}");
        assert_eq!(r["errno"]["name"], "EROFS", "{r:#}");
        assert_eq!(r["layer"], "mount", "{r:#}");
        assert_eq!(r["source"], "ebpf", "{r:#}");
        // Classified with the sandbox's view, as the run's own classifier would.
        assert!(
            r["reason"]
                .as_str()
                .unwrap()
                .contains("outside the writable roots"),
            "{r:#}"
        );
    }
    // Each run's own file: its own record (labelled), not the other's.
    for (file, own, other, sandbox) in [
        (&file_a, &target_a, &target_b, &sandbox_a),
        (&file_b, &target_b, &target_a, &sandbox_b),
    ] {
        let recs = records(file);
        let found = writes_to(&recs, own);
        assert_eq!(found.len(), 1, "{}: {recs:#?}", file.display());
        assert_eq!(found[0]["sandbox"], sandbox.as_str());
        assert!(writes_to(&recs, other).is_empty(), "{recs:#?}");
        let node_rec = writes_to(&node, own)[0];
        for key in [
            "labels",
            "kind",
            "operation",
            "target",
            "errno",
            "layer",
            "reason",
            "pid",
        ] {
            assert_eq!(
                found[0][key], node_rec[key],
                "{key}: {:#} vs {node_rec:#}",
                found[0]
            );
        }
    }

    // The daemon's metrics: counts per label set; nothing registered any more.
    let text = daemon.scrape();
    for (labels, value) in [(r#"agent="a1",team="alpha""#, 1.0), (r#"team="beta""#, 1.0)] {
        let series = format!(
            r#"warden_violations_total{{{labels},kind="file-write",operation="open",layer="mount"}}"#
        );
        assert_eq!(sample(&text, &series), Some(value), "{series}\n{text}");
        let active = format!("warden_sandboxes_active{{{labels}}}");
        assert_eq!(sample(&text, &active), Some(0.0), "{active}\n{text}");
    }
    assert_eq!(
        sample(&text, "warden_sandboxes_registered"),
        Some(0.0),
        "{text}"
    );
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert_eq!(
        text.matches("# TYPE warden_violations counter").count(),
        1,
        "{text}"
    );
    // The runs' own metrics files carry their labels on every series.
    let prom = std::fs::read_to_string(&prom_a).unwrap();
    assert!(
        prom.contains(r#"warden_violations_total{agent="a1",team="alpha",kind="file-write",operation="open",layer="mount"} 1"#),
        "{prom}"
    );
    assert!(
        prom.contains(r#"warden_sandboxes_active{agent="a1",team="alpha"} 0"#),
        "{prom}"
    );
    let prom = std::fs::read_to_string(&prom_b).unwrap();
    assert!(
        prom.contains(r#"warden_sandbox_starts_total{team="beta",result="ok"} 1"#),
        "{prom}"
    );

    let ms = registration_ms(&log);
    assert_eq!(ms.len(), 2, "{log}");
    eprintln!(
        "registration took {ms:?} ms in the daemon; both runs together {} ms",
        elapsed.as_millis()
    );
}

#[test]
fn a_sigkilled_run_is_unregistered() {
    if !ready("a_sigkilled_run_is_unregistered") {
        return;
    }
    let env = TestEnv::new();
    let daemon = Daemon::start(&env, &env.root().join("daemon"));
    let settings = required(&env);
    let run = start_run(
        &env,
        &daemon,
        &["--settings", &settings, "--label", "team=killed"],
        "sleep 60",
    );
    let pid = run.id();
    daemon.wait_for("warden_sandboxes_registered", 1.0);
    daemon.wait_for(r#"warden_sandboxes_active{team="killed"}"#, 1.0);
    signal(pid, nix::sys::signal::Signal::SIGKILL);
    let (code, _) = run.wait();
    assert_eq!(code, -1, "killed by a signal");
    // The connection closed with the process: the cgroup id left the kernel's map.
    daemon.wait_for("warden_sandboxes_registered", 0.0);
    daemon.wait_for(r#"warden_sandboxes_active{team="killed"}"#, 0.0);
    assert!(
        daemon
            .stderr()
            .contains(&format!("unregistered warden-{pid}")),
        "{}",
        daemon.stderr()
    );
    // The janitor takes the sandbox down; nothing of it is left.
    let cgroup_gone = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        !Path::new(&format!("/sys/fs/cgroup/warden-{pid}")).exists()
    });
    assert!(cgroup_gone, "the sandbox's cgroup is still there");
}

/// Fails `open(O_WRONLY|O_CREAT)` on `argv[1]` (read-only in the sandbox) for `argv[2]`
/// seconds, as fast as it can, or every `argv[3]` microseconds `argv[4]` times.
const FLOOD_C: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc == 3) {
        time_t end = time(0) + atoi(argv[2]);
        unsigned long n = 0;
        while (time(0) < end)
            for (int i = 0; i < 1000; i++, n++)
                if (open(argv[1], O_WRONLY | O_CREAT, 0644) >= 0) return 3;
        return 0;
    }
    for (int i = 0; i < atoi(argv[4]); i++) {
        if (open(argv[1], O_WRONLY | O_CREAT, 0644) >= 0) return 3;
        usleep(atoi(argv[3]));
    }
    return 0;
}
"#;

/// The sum of the `count`s of `records`' writes to `target`.
fn write_count(recs: &[Value], target: &str) -> u64 {
    writes_to(recs, target)
        .iter()
        .map(|r| r["count"].as_u64().unwrap())
        .sum()
}

#[test]
fn one_sandboxs_flood_does_not_cost_another_its_records() {
    if !ready("one_sandboxs_flood_does_not_cost_another_its_records") {
        return;
    }
    let env = TestEnv::new();
    compile_c(&env, "flood", FLOOD_C);
    let daemon = Daemon::start(&env, &env.root().join("daemon"));
    let settings = required(&env);
    let tag = std::process::id();
    let flooded = format!("/etc/warden-flood-{tag}");
    let quiet = format!("/etc/warden-quiet-{tag}");
    let (file_a, file_b) = (env.root().join("a.jsonl"), env.root().join("b.jsonl"));
    let flood = env.project().join("flood").display().to_string();
    // A: refused opens as fast as one core makes them (several hundred thousand a second,
    // more than the daemon reads: the ring buffer fills) for 4 s.
    let run_a = start_run(
        &env,
        &daemon,
        &[
            "--settings",
            &settings,
            "--label",
            "role=flood",
            "--violations",
            file_a.to_str().unwrap(),
        ],
        &format!("{flood} {flooded} 4"),
    );
    daemon.wait_for(r#"warden_sandboxes_active{role="flood"}"#, 1.0);
    std::thread::sleep(Duration::from_millis(500));
    // B, meanwhile: 500 refused opens, one every 2 ms (500 a second).
    const QUIET: u64 = 500;
    let run_b = start_run(
        &env,
        &daemon,
        &[
            "--settings",
            &settings,
            "--label",
            "role=quiet",
            "--violations",
            file_b.to_str().unwrap(),
        ],
        &format!("{flood} {quiet} 0 2000 {QUIET}"),
    );
    let (code_b, err_b) = run_b.wait();
    let (code_a, err_a) = run_a.wait();
    assert_eq!(code_a, 0, "{err_a}");
    assert_eq!(code_b, 0, "{err_b}");
    // B lost nothing and says so; every one of its refusals is in its file and the node's.
    assert!(!err_b.contains("lost"), "{err_b}");
    assert_eq!(write_count(&records(&file_b), &quiet), QUIET, "{err_b}");
    daemon.wait_for("warden_sandboxes_registered", 0.0);
    let node = records(&daemon.violations);
    assert_eq!(write_count(&node, &quiet), QUIET, "{}", daemon.stderr());
    let text = daemon.scrape();
    assert_eq!(
        sample(
            &text,
            r#"warden_violations_total{role="quiet",kind="file-write",operation="open",layer="mount"}"#
        ),
        Some(QUIET as f64),
        "{text}"
    );
    // A was held to its share, and both it and the node's metrics say how much it lost.
    let limited: u64 = err_a
        .lines()
        .find_map(|l| l.split("over its share of the node's ring buffer: ").nth(1))
        .and_then(|rest| {
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("A does not report its rate-limited events:\n{err_a}"));
    assert!(limited > 0, "{err_a}");
    // The node's drop counters are read about once a second.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = daemon.scrape();
        let dropped = sample(
            &text,
            r#"warden_bpf_events_dropped_total{reason="rate-limited"}"#,
        )
        .unwrap_or_else(|| panic!("no rate-limited series:\n{text}"));
        if dropped >= limited as f64 {
            break;
        }
        assert!(Instant::now() < deadline, "{dropped} < {limited}\n{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let seen = write_count(&records(&file_a), &flooded);
    assert!(seen > 0, "{err_a}");
    eprintln!("flood: {seen} recorded, {limited} rate-limited; quiet: {QUIET} of {QUIET}\n{err_a}");
}

const PYTHON_REGISTER: &str = r#"
import json, os, socket, sys
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
except OSError as e:
    print("connect:", e.strerror)
    sys.exit(0)
try:
    s.sendall((json.dumps({"type": "register", "sandbox": "warden-x", "cgroup_id": 1,
                           "cgroup": "/sys/fs/cgroup", "labels": {}, "pid": os.getpid()}) + "\n").encode())
except (BrokenPipeError, ConnectionResetError):
    # The daemon may refuse the peer (SO_PEERCRED) and close before the request is sent:
    # its answer is still waiting to be read.
    pass
s.settimeout(10)
print("reply:", s.recv(4096).decode().strip())
"#;

#[test]
fn a_non_root_peer_is_refused() {
    if !ready("a_non_root_peer_is_refused") {
        return;
    }
    assert!(have("setpriv"), "setpriv (util-linux) is needed");
    let env = TestEnv::new();
    // Reachable for uid 65534 up to the socket itself.
    let dir = env.root().join("open");
    std::fs::create_dir_all(&dir).unwrap();
    use std::os::unix::fs::PermissionsExt;
    for d in [env.root(), dir.as_path()] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let daemon = Daemon::start(&env, &dir);
    let script = env.root().join("register.py");
    std::fs::write(&script, PYTHON_REGISTER).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    let nobody = || {
        let out = Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "/usr/bin/python3",
            ])
            .arg(&script)
            .arg(&daemon.socket)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The socket is 0600: another user cannot even connect.
    let mode = std::fs::metadata(&daemon.socket)
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let out = nobody();
    assert!(out.contains("connect: Permission denied"), "{out}");
    // Opened up by mistake, SO_PEERCRED still refuses the peer.
    std::fs::set_permissions(&daemon.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = nobody();
    assert!(
        out.contains(r#"reply: {"ok":false,"error":"uid 65534 may not register"#),
        "{out}"
    );
    assert!(
        daemon.stderr().contains("refused pid"),
        "{}",
        daemon.stderr()
    );
    assert_eq!(
        sample(&daemon.scrape(), "warden_sandboxes_registered"),
        Some(0.0)
    );
}

#[test]
fn a_sandboxed_command_cannot_register() {
    if !ready("a_sandboxed_command_cannot_register") {
        return;
    }
    let env = TestEnv::new();
    let daemon = Daemon::start(&env, &env.root().join("daemon"));
    let script = env.root().join("register.py");
    std::fs::write(&script, PYTHON_REGISTER).unwrap();
    let line = format!(
        "/usr/bin/python3 {} {}",
        script.display(),
        daemon.socket.display()
    );
    // By default the sandbox's seccomp filter refuses AF_UNIX sockets.
    let out = start_run(&env, &daemon, &[], &line).output();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("connect: Operation not permitted"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains("reply:"), "{stdout}");
    // With every unix socket allowed, the daemon refuses it: another user namespace.
    let open = env
        .write_settings(
            "unix.json",
            r#"{ "network": { "allowAllUnixSockets": true } }"#,
        )
        .display()
        .to_string();
    let out = start_run(&env, &daemon, &["--settings", &open], &line).output();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(r#"reply: {"ok":false,"error":"the peer runs in another user namespace"#),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    daemon.wait_for("warden_sandboxes_registered", 0.0);
}

#[test]
fn sigterm_removes_the_socket_and_detaches_every_link() {
    if !ready("sigterm_removes_the_socket_and_detaches_every_link") {
        return;
    }
    let env = TestEnv::new();
    let mut daemon = Daemon::start(&env, &env.root().join("daemon"));
    let settings = required(&env);
    let idle = link_ids(daemon.pid());
    assert!(idle.len() >= 3, "the tracepoints' links: {idle:?}");
    // A finished run leaves nothing attached (its cgroup programs are detached).
    let (code, err) = start_run(&env, &daemon, &["--settings", &settings], "true").wait();
    assert_eq!(code, 0, "{err}");
    daemon.wait_for("warden_sandboxes_registered", 0.0);
    assert_eq!(link_ids(daemon.pid()), idle);
    // A run still registered when the daemon stops.
    let run = start_run(&env, &daemon, &["--settings", &settings], "sleep 2; exit 4");
    daemon.wait_for("warden_sandboxes_registered", 1.0);
    let held = link_ids(daemon.pid());
    assert_eq!(
        held.len(),
        idle.len() + 6,
        "six cgroup programs (connect4, connect6, sendmsg4, sendmsg6, connect_unix, \
         sendmsg_unix): {held:?}"
    );
    let status = daemon.stop();
    assert!(status.success(), "{status}\n{}", daemon.stderr());
    assert!(!daemon.socket.exists(), "the socket is left behind");
    let log = daemon.stderr();
    assert!(log.contains("stopping"), "{log}");
    assert!(
        log.contains("stopped (0 sandboxes left registered"),
        "{log}"
    );
    if have("bpftool") {
        let now = all_link_ids();
        let left: Vec<&u64> = held.iter().filter(|id| now.contains(id)).collect();
        assert!(left.is_empty(), "links of the daemon left: {left:?}");
    }
    // The run goes on without the daemon, and says so.
    let (code, err) = run.wait();
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("may be incomplete"), "{err}");
}

#[test]
fn enforce_never_leans_on_the_daemon_and_fails_closed_without_bpf_lsm() {
    if !ready("enforce_never_leans_on_the_daemon_and_fails_closed_without_bpf_lsm") {
        return;
    }
    let env = TestEnv::new();
    let daemon = Daemon::start(&env, &env.root().join("daemon"));
    let enforce = env
        .write_settings(
            "enforce.json",
            r#"{ "warden": { "audit": { "required": true, "enforce": true } } }"#,
        )
        .display()
        .to_string();
    let fallback = env
        .write_settings(
            "fallback.json",
            r#"{ "warden": { "audit": { "required": true, "enforce": true,
                 "enforceFallback": "tracepoints" } } }"#,
        )
        .display()
        .to_string();
    // This machine refuses BPF LSM programs (the daemon says so at start); the guest of
    // vm-tests is where they load.
    assert!(
        daemon.stderr().contains("no BPF LSM programs"),
        "{}",
        daemon.stderr()
    );
    let marker = env.project().join("ran");
    let (code, stderr) = start_run(&env, &daemon, &["--settings", &enforce], "touch ran").wait();
    // Enforcement cannot be had: refused before the command starts.
    assert_eq!(code, 125, "{stderr}");
    assert!(
        stderr.contains("warden.audit.enforce") && stderr.contains("BPF LSM"),
        "{stderr}"
    );
    assert!(
        !marker.exists(),
        "the command ran without the enforcement it asked for"
    );
    // With the tracepoint fallback allowed, it runs and says it runs weaker.
    let (code, stderr) = start_run(&env, &daemon, &["--settings", &fallback], "touch ran").wait();
    assert_eq!(code, 0, "{stderr}");
    assert!(marker.exists());
    assert!(stderr.contains("enforceFallback"), "{stderr}");
    // Neither run registered with the daemon: enforce runs load their own programs, whose
    // maps the LSM layer shares.
    assert!(
        !daemon.stderr().contains("unregistered warden-"),
        "{}",
        daemon.stderr()
    );
}

//! The library API (`warden::api`) against the real binary, blocking and tokio: output
//! captured, the exit code passed through, warden's own failure told apart, and a write outside
//! the project refused with the host file untouched and the refusal among the run's violations.
//! The builder's `publish`, `metrics_addr`, `session` and `command_text` are checked from the
//! outside: a published server answers on the host, the metrics endpoint serves while the
//! command runs, the `beforeCommand` hook is told the session, a gated line runs sandboxed or
//! is refused with 126.
//! Every run is isolated like the black-box tests' `TestEnv`: a private HOME, XDG_CONFIG_HOME
//! and managed-settings path, so a developer's own settings never leak in. Kernel records need
//! root (eBPF): without it the violation assertions skip loudly, and under CI=true they fail.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use warden::api::{Error, Kind, Policy, Sandbox, SandboxBuilder};

/// A temporary root: `home/`, `project/` (the sandbox's working directory) and `outside/`
/// (read-only in the sandbox, like the rest of the host).
struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::Builder::new()
            .prefix("warden-api-")
            .tempdir()
            .unwrap();
        for sub in ["home/.config", "project", "outside"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        Env { dir }
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    /// Settings for every run: as root, auditing is required, so a machine where the eBPF
    /// programs do not load fails the run (exit 125) instead of passing without records.
    fn settings(&self) -> PathBuf {
        let path = self.path("settings.json");
        let text = if is_root() {
            r#"{ "warden": { "audit": { "required": true } } }"#
        } else {
            "{}"
        };
        std::fs::write(&path, text).unwrap();
        path
    }

    fn sandbox(&self) -> Sandbox {
        self.sandbox_with(|b| b)
    }

    /// [`Env::sandbox`]'s settings, adjusted by `f`.
    fn sandbox_with(&self, f: impl FnOnce(SandboxBuilder) -> SandboxBuilder) -> Sandbox {
        f(Sandbox::builder()
            .warden_binary(env!("CARGO_BIN_EXE_warden"))
            .settings(self.settings())
            .cwd(self.path("project"))
            .non_interactive())
        .build()
    }

    /// A sandboxed `sh -c script`, isolated from the caller's settings.
    fn sh(&self, script: &str) -> warden::api::Command {
        let mut cmd = self.sandbox().command("sh");
        cmd.arg("-c").arg(script);
        self.isolate(&mut cmd);
        cmd
    }

    fn isolate(&self, cmd: &mut warden::api::Command) {
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("WARDEN_") {
                cmd.env_remove(name);
            }
        }
        cmd.env("HOME", self.path("home"))
            .env("XDG_CONFIG_HOME", self.path("home/.config"))
            .env(
                "WARDEN_MANAGED_SETTINGS",
                self.path("managed-settings.json"),
            );
    }
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Whether kernel records can be expected; otherwise a loud skip, or a failure under CI=true.
fn audit_ready(test: &str) -> bool {
    if is_root() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none_or(|v| v != "true"),
        "{test}: CI=true but not running as root (kernel violation records need root)"
    );
    eprintln!("\n*** SKIPPED part of {test}: not root (kernel violation records need root) ***\n");
    false
}

/// Whether a prerequisite is there; otherwise a loud skip, or a failure under CI=true.
fn ready_unless(test: &str, missing: Option<&str>) -> bool {
    let Some(what) = missing else {
        return true;
    };
    assert!(
        std::env::var_os("CI").is_none_or(|v| v != "true"),
        "{test}: CI=true but {what}"
    );
    eprintln!("\n*** SKIPPED {test}: {what} ***\n");
    false
}

const HOST_CONTENT: &str = "host data\n";

fn host_file(env: &Env) -> PathBuf {
    let host = env.path("outside/host.txt");
    std::fs::write(&host, HOST_CONTENT).unwrap();
    host
}

/// The refused write is a file-write violation on `host`, and the host file is untouched.
fn assert_denied_write(test: &str, out: &warden::api::Output, host: &Path) {
    assert_eq!(std::fs::read_to_string(host).unwrap(), HOST_CONTENT);
    assert_ne!(out.code(), Some(0), "the write should fail in the sandbox");
    if !audit_ready(test) {
        return;
    }
    let target = host.display().to_string();
    let v = out
        .violations
        .iter()
        .find(|v| v.kind == Kind::FileWrite && v.target == target)
        .unwrap_or_else(|| panic!("no file-write violation on {target}: {:#?}", out.violations));
    assert!(v.violation);
    // `sh -c` of a command, `bash -c` of a `--command-text` line.
    assert!(matches!(v.comm.as_deref(), Some("sh" | "bash")), "{v:?}");
    assert!(v.errno.is_some(), "{v:?}");
    // The block may hold other refusals too (a shell's NSS lookup of the user tries a unix
    // socket on some machines); the write is one of its lines.
    let annotated = out.annotated_stderr();
    let block = annotated
        .split_once("<sandbox_violations>\n")
        .map(|(_, block)| block)
        .unwrap_or_else(|| panic!("no violation block: {annotated}"));
    assert!(
        block
            .lines()
            .take_while(|l| *l != "</sandbox_violations>")
            .any(|l| l.starts_with(&format!("file-write open {target} ("))),
        "{annotated}"
    );
}

#[test]
fn output_captures_stdout_and_stderr_and_passes_the_exit_code_through() {
    let env = Env::new();
    let out = env.sh("echo out; echo err >&2; exit 7").output().unwrap();
    assert_eq!(
        out.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"out\n");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("err\n"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.violations.is_empty(), "{:#?}", out.violations);
    assert_eq!(out.annotation(), "");
}

#[test]
fn a_write_outside_the_project_is_refused_and_reported() {
    let env = Env::new();
    let host = host_file(&env);
    let out = env
        .sh(&format!("echo pwned > '{}'", host.display()))
        .output()
        .unwrap();
    assert_denied_write(
        "a_write_outside_the_project_is_refused_and_reported",
        &out,
        &host,
    );
    // The project itself is writable.
    let out = env.sh("echo ok > inside.txt").output().unwrap();
    assert_eq!(
        out.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(env.path("project/inside.txt")).unwrap(),
        "ok\n"
    );
}

#[test]
fn status_and_spawn_with_piped_stdin() {
    let env = Env::new();
    let status = env
        .sh("exit 3")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(3));

    let mut child = env
        .sh("read line; echo \"got $line\"; exit 4")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"got hello\n");
}

#[test]
fn wardens_own_failure_is_an_error_and_the_commands_125_is_not() {
    let env = Env::new();
    let bad = env.path("bad.json");
    std::fs::write(&bad, r#"{ "filesystem": { "allowWrit": [] } }"#).unwrap();
    let mut cmd = Sandbox::builder()
        .warden_binary(env!("CARGO_BIN_EXE_warden"))
        .settings(&bad)
        .cwd(env.path("project"))
        .command("true");
    env.isolate(&mut cmd);
    match cmd.output() {
        Err(Error::Warden { stderr }) => {
            assert!(stderr.starts_with("warden: error:"), "{stderr}");
            assert!(stderr.contains("allowWrit"), "{stderr}");
        }
        other => panic!("expected Error::Warden, got {other:?}"),
    }

    let out = env.sh("exit 125").output().unwrap();
    assert_eq!(out.code(), Some(125));
}

#[test]
fn a_signal_ends_the_command_with_128_plus_n() {
    let env = Env::new();
    let out = env.sh("kill -9 $$").output().unwrap();
    assert_eq!(out.code(), Some(137));
}

#[test]
fn policy_answers_without_running_anything() {
    let env = Env::new();
    let settings = env.path("policy.json");
    std::fs::write(
        &settings,
        r#"{ "network": { "allowedDomains": ["github.com"], "deniedDomains": ["evil.example"] } }"#,
    )
    .unwrap();
    let policy = Policy::load([&settings], env.path("project")).unwrap();
    use warden::api::Decision;
    assert_eq!(
        policy.check_write(env.path("project/src/main.rs")).decision,
        Decision::Allow
    );
    assert_ne!(
        policy.check_write(env.path("outside/host.txt")).decision,
        Decision::Allow
    );
    assert_eq!(
        policy.check_domain("github.com:443").decision,
        Decision::Allow
    );
    assert_eq!(policy.check_domain("evil.example").decision, Decision::Deny);
    assert_eq!(policy.check_domain("no such host").decision, Decision::Deny);
    assert_ne!(
        policy.check_command("sudo rm -rf /").verdict.decision,
        Decision::Allow
    );
    let missing = Policy::load([env.path("missing.json")], env.path("project")).unwrap_err();
    assert!(matches!(missing, Error::Policy(_)), "{missing:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_output_and_violations_from_a_multithreaded_runtime() {
    let env = Env::new();
    let host = host_file(&env);
    let script = format!("echo hello; echo pwned > '{}'; exit 7", host.display());
    let (a, b) = tokio::join!(async { env.sh(&script).output_async().await }, async {
        env.sh("echo second").output_async().await
    },);
    let out = a.unwrap();
    assert_eq!(
        out.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"hello\n");
    assert_denied_write(
        "tokio_output_and_violations_from_a_multithreaded_runtime",
        &out,
        &host,
    );
    let second = b.unwrap();
    assert_eq!(second.code(), Some(0));
    assert_eq!(second.stdout, b"second\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_spawn_and_status() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let env = Env::new();
    let status = env
        .sh("exit 5")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status_async()
        .await
        .unwrap();
    assert_eq!(status.code(), Some(5));

    let mut child = env
        .sh("read line; echo \"got $line\"")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn_async()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"async\n").await.unwrap();
    drop(stdin);
    let mut text = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .await
        .unwrap();
    let status = child.wait().await.unwrap();
    assert_eq!(status.code(), Some(0));
    assert_eq!(text, "got async\n");
}

#[test]
fn labels_given_to_the_builder_are_on_the_runs_violations() {
    let env = Env::new();
    let host = host_file(&env);
    let sandbox = Sandbox::builder()
        .warden_binary(env!("CARGO_BIN_EXE_warden"))
        .settings(env.settings())
        .cwd(env.path("project"))
        .non_interactive()
        .label("team", "infra")
        .build();
    let mut cmd = sandbox.command("sh");
    cmd.arg("-c")
        .arg(format!("echo pwned > '{}'", host.display()));
    env.isolate(&mut cmd);
    let out = cmd.output().unwrap();
    assert_denied_write(
        "labels_given_to_the_builder_are_on_the_runs_violations",
        &out,
        &host,
    );
    if !audit_ready("labels_given_to_the_builder_are_on_the_runs_violations") {
        return;
    }
    let target = host.display().to_string();
    let v = out
        .violations
        .iter()
        .find(|v| v.target == target)
        .unwrap_or_else(|| panic!("no violation on {target}: {:#?}", out.violations));
    assert_eq!(
        v.labels.get("team").map(String::as_str),
        Some("infra"),
        "{v:?}"
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A plain HTTP GET of `path` on 127.0.0.1:`port`: the whole response, `None` when
/// nothing answers.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    (!out.is_empty()).then_some(out)
}

/// Polls `get` every 100 ms until it returns something, the child ends, or 15 s pass.
fn poll(child: &mut warden::api::Child, mut get: impl FnMut() -> Option<String>) -> Option<String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if let Some(found) = get() {
            return Some(found);
        }
        if child.try_wait().unwrap().is_some() {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

/// SIGTERM to warden (forwarded to the command), then its output: the command died of it.
fn stop(child: warden::api::Child) -> warden::api::Output {
    child.terminate().unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.code(),
        Some(128 + 15),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn metrics_addr_serves_the_runs_metrics_while_the_command_runs() {
    let env = Env::new();
    let port = free_port();
    let sandbox = env.sandbox_with(|b| {
        b.metrics_addr(format!("127.0.0.1:{port}"))
            .label("team", "infra")
    });
    let mut cmd = sandbox.command("sleep");
    cmd.arg("30");
    env.isolate(&mut cmd);
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let active = r#"warden_sandboxes_active{team="infra"} 1"#;
    let scraped = poll(&mut child, || {
        http_get(port, "/metrics").filter(|r| r.lines().any(|l| l == active))
    });
    let out = stop(child);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let resp = scraped.unwrap_or_else(|| panic!("never scraped {active}; stderr: {stderr}"));
    assert!(
        resp.starts_with("HTTP/1.1 200") || resp.starts_with("HTTP/1.0 200"),
        "{resp}"
    );
    assert!(
        resp.contains("# TYPE warden_sandboxes_active gauge"),
        "{resp}"
    );
    assert!(
        resp.contains(r#"warden_sandbox_starts_total{team="infra",result="ok"} 1"#),
        "{resp}"
    );
    // Gone with the run.
    assert!(http_get(port, "/metrics").is_none());

    // A non-loopback address fails the run before the command starts.
    let marker = env.path("project/ran");
    let mut cmd = env
        .sandbox_with(|b| b.metrics_addr("0.0.0.0:0"))
        .command("touch");
    cmd.arg(&marker);
    env.isolate(&mut cmd);
    match cmd.output() {
        Err(Error::Warden { stderr }) => assert!(stderr.contains("allowRemote"), "{stderr}"),
        other => panic!("expected Error::Warden, got {other:?}"),
    }
    assert!(!marker.exists(), "the command ran");
}

/// `/usr/bin/python3`, else the interpreter `python3` on PATH runs (a shim such as pyenv's
/// is resolved to the real binary); `None` without one.
fn python3() -> Option<PathBuf> {
    let usr = Path::new("/usr/bin/python3");
    if usr.exists() {
        return Some(usr.to_path_buf());
    }
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .ok()?;
    let path = String::from_utf8(out.stdout).ok()?;
    let path = PathBuf::from(path.trim());
    (out.status.success() && path.is_absolute()).then_some(path)
}

#[test]
fn publish_makes_a_server_in_the_sandbox_reachable_from_the_host() {
    let test = "publish_makes_a_server_in_the_sandbox_reachable_from_the_host";
    let env = Env::new();
    let python = python3();
    if !ready_unless(test, python.is_none().then_some("no python3 (the server)")) {
        return;
    }
    std::fs::write(env.path("project/index.txt"), "served from the sandbox\n").unwrap();
    let host_port = free_port();
    let mut cmd = env
        .sandbox_with(|b| b.publish(format!("{host_port}:8080")))
        .command(python.unwrap());
    cmd.args(["-m", "http.server", "8080", "--bind", "127.0.0.1"]);
    env.isolate(&mut cmd);
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let got = poll(&mut child, || http_get(host_port, "/index.txt"));
    let out = stop(child);
    let log = String::from_utf8_lossy(&out.stderr);
    let resp = got.unwrap_or_else(|| panic!("the published server never answered: {log}"));
    assert!(
        resp.ends_with("\r\n\r\nserved from the sandbox\n"),
        "{resp}"
    );
    assert!(log.contains("\"GET /index.txt HTTP/1.1\" 200"), "{log}");
    // Gone with the sandbox.
    assert!(TcpStream::connect(("127.0.0.1", host_port)).is_err());

    // A malformed spec and a taken host port fail the run before the command starts.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = format!("{}:8080", busy.local_addr().unwrap().port());
    let marker = env.path("project/ran");
    for spec in ["8080", "0:80", &taken] {
        let mut cmd = env.sandbox_with(|b| b.publish(spec)).command("touch");
        cmd.arg(&marker);
        env.isolate(&mut cmd);
        match cmd.output() {
            Err(Error::Warden { stderr }) => {
                assert!(stderr.contains("--publish"), "{spec}: {stderr}")
            }
            other => panic!("{spec}: expected Error::Warden, got {other:?}"),
        }
        assert!(!marker.exists(), "{spec}: the command ran");
    }
}

#[test]
fn command_text_runs_the_line_sandboxed() {
    let env = Env::new();
    let host = host_file(&env);
    let mut cmd = env.sandbox().command_text(format!(
        "echo made > made.txt; echo pwned > '{}'",
        host.display()
    ));
    env.isolate(&mut cmd);
    let out = cmd.output().unwrap();
    assert_denied_write("command_text_runs_the_line_sandboxed", &out, &host);
    assert_eq!(
        std::fs::read_to_string(env.path("project/made.txt")).unwrap(),
        "made\n"
    );
    // The line's own exit code and output pass through.
    let mut cmd = env.sandbox().command_text("echo hi; exit 9");
    env.isolate(&mut cmd);
    let out = cmd.output().unwrap();
    assert_eq!(
        out.code(),
        Some(9),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"hi\n");
}

#[test]
fn a_command_text_line_the_policy_refuses_exits_126_without_running() {
    let env = Env::new();
    let marker = env.path("project/ran");
    // `sudo` always requires approval, and nobody answers (non_interactive).
    let mut cmd = env
        .sandbox()
        .command_text(format!("sudo touch '{}'", marker.display()));
    env.isolate(&mut cmd);
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.code(), Some(126), "{stderr}");
    assert!(stderr.contains("warden: command refused:"), "{stderr}");
    assert!(stderr.contains("non-interactive"), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(out.violations.is_empty(), "{:#?}", out.violations);
    assert!(!marker.exists(), "the refused line ran");

    // Arguments on a line are an error, and nothing starts.
    let mut cmd = env
        .sandbox()
        .command_text(format!("touch '{}'", marker.display()));
    cmd.arg("extra");
    env.isolate(&mut cmd);
    match cmd.output() {
        Err(Error::CommandTextArgs { line, args }) => {
            assert!(line.starts_with("touch "), "{line}");
            assert_eq!(args, ["extra"]);
        }
        other => panic!("expected Error::CommandTextArgs, got {other:?}"),
    }
    assert!(!marker.exists(), "the line ran");
}

#[test]
fn session_reaches_the_before_command_hook() {
    let env = Env::new();
    let seen = env.path("seen.json");
    let hook = env.path("hook.sh");
    std::fs::write(
        &hook,
        format!("#!/bin/sh\ncat > '{}'\necho allow\n", seen.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let hook_settings = env.path("hook.json");
    std::fs::write(
        &hook_settings,
        serde_json::json!({ "warden": { "hooks": { "beforeCommand": hook } } }).to_string(),
    )
    .unwrap();
    // What the hook read for one gated line of `sandbox`; `setup` adjusts the command.
    let session_seen = |sandbox: Sandbox, setup: &dyn Fn(&mut warden::api::Command)| {
        let _ = std::fs::remove_file(&seen);
        let mut cmd = sandbox.command_text("true");
        env.isolate(&mut cmd);
        // Where a warden that keeps a session's approvals keeps them: the test's own.
        cmd.env("WARDEN_SESSION_DIR", env.path("sessions"));
        setup(&mut cmd);
        let out = cmd.output().unwrap();
        assert_eq!(
            out.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&seen).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"));
        assert_eq!(v["command"], "true", "{text}");
        v["session"].as_str().unwrap().to_string()
    };
    let with = env.sandbox_with(|b| b.settings(&hook_settings).session("agent-7"));
    assert_eq!(session_seen(with.clone(), &|_| {}), "agent-7");
    // The builder's session wins over the command's own environment.
    assert_eq!(
        session_seen(with, &|c| {
            c.env("WARDEN_SESSION", "other");
        }),
        "agent-7"
    );
    let without = env.sandbox_with(|b| b.settings(&hook_settings));
    assert_eq!(session_seen(without, &|_| {}), "default");
}

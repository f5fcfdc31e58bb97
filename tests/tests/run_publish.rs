//! `warden run --publish HOSTPORT:PORT`: a server inside the sandbox (on its own loopback) is
//! reachable from the host only through a published port, and only while the sandbox runs.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use warden_tests::TestEnv;

fn python3() -> &'static str {
    if std::path::Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET `path` from 127.0.0.1:`port`; the body, or `None` if nothing answered.
fn get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.split_once("\r\n\r\n").map(|(_, body)| body.to_string())
}

/// Starts `warden run ARGS -- python3 -m http.server 8080` serving the project directory.
fn server(env: &TestEnv, args: &[&str]) -> Child {
    std::fs::write(env.project().join("index.txt"), "served from the sandbox\n").unwrap();
    env.command()
        .arg("run")
        .args(args)
        .args([
            "--",
            python3(),
            "-m",
            "http.server",
            "8080",
            "--bind",
            "127.0.0.1",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn stop(mut child: Child) -> (i32, String) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.code().unwrap_or(-1), err)
}

#[test]
fn a_published_port_reaches_the_sandboxs_server_and_only_while_it_runs() {
    let env = TestEnv::new();
    let host_port = free_port();
    let child = server(&env, &["--publish", &format!("{host_port}:8080")]);
    let deadline = Instant::now() + Duration::from_secs(15);
    let body = loop {
        if let Some(b) = get(host_port, "/index.txt") {
            break b;
        }
        assert!(
            Instant::now() < deadline,
            "the published server never answered"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(body, "served from the sandbox\n");
    let (code, log) = stop(child);
    // SIGTERM reached python inside, which died of it.
    assert_eq!(code, 128 + 15, "{log}");
    assert!(log.contains("\"GET /index.txt HTTP/1.0\" 200"), "{log}");
    // Gone with the sandbox.
    assert!(TcpStream::connect(("127.0.0.1", host_port)).is_err());
}

#[test]
fn an_unpublished_server_is_unreachable_from_the_host() {
    let env = TestEnv::new();
    let host_port = free_port();
    // Published to a port where nothing listens inside; the real server is unpublished.
    let child = server(&env, &["--publish", &format!("{host_port}:9")]);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(get(host_port, "/index.txt").unwrap_or_default(), "");
    // The sandbox's 127.0.0.1:8080 is not the host's.
    assert!(get(8080, "/index.txt").is_none_or(|b| !b.contains("served from the sandbox")));
    let (_, log) = stop(child);
    assert!(!log.contains("GET /index.txt"), "{log}");
}

#[test]
fn a_busy_host_port_fails_the_run_before_it_starts() {
    let env = TestEnv::new();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let marker = env.project().join("ran");
    let out = env.run([
        "run",
        "--publish",
        &format!("{port}:8080"),
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 125, "{out:?}");
    assert!(out.stderr.contains("--publish"), "{out:?}");
    assert!(!marker.exists(), "the command ran");
    for bad in ["8080", "0:80", "80:x", "70000:80"] {
        let out = env.run(["run", "--publish", bad, "--", "true"]);
        assert_eq!(out.code, 125, "{bad}: {out:?}");
    }
    let free = free_port();
    let out = env.run([
        "run",
        "--publish",
        &format!("{free}:8000"),
        "--publish",
        &format!("{free}:8001"),
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 125, "{out:?}");
    assert!(out.stderr.contains("given twice"), "{out:?}");
    assert!(!marker.exists(), "the command ran");
}

/// The command owns the listener a published port reaches: one that never accepts (its
/// accept queue kept full) must not stall pid 1, which meanwhile guards the sandbox. Here the
/// command writes `.git/commondir` (a pointer the host's git follows to another config) while
/// a host client's connection is pending: pid 1 still ends the sandbox at once.
#[test]
fn a_listener_that_never_accepts_does_not_stall_pid_1() {
    let env = TestEnv::new();
    let project = env.project();
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&project)
        .output()
        .unwrap();
    assert!(git.status.success(), "{git:?}");
    let script = r#"
import socket, time, os
l = socket.socket(); l.bind(('127.0.0.1', 8000)); l.listen(0)
fill = []
for i in range(8):
    c = socket.socket(); c.setblocking(False)
    try: c.connect(('127.0.0.1', 8000))
    except BlockingIOError: pass
    fill.append(c)
open('ready', 'w').close()
while not os.path.exists('go'): time.sleep(0.05)
time.sleep(1)
open('.git/commondir', 'w').write('/tmp/elsewhere\n')
print('wrote commondir', flush=True)
time.sleep(15)
print('survived', flush=True)
"#;
    let host_port = free_port();
    let child = env
        .command()
        .current_dir(&project)
        .args(["run", "--publish", &format!("{host_port}:8000"), "--"])
        .args([python3(), "-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !project.join("ready").exists() {
        assert!(Instant::now() < deadline, "the command never got ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A host client of the published port: its connection waits on the full queue.
    let client = std::thread::spawn(move || {
        let s = TcpStream::connect(("127.0.0.1", host_port));
        if let Ok(mut s) = s {
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut b = [0u8; 1];
            let _ = s.read(&mut b);
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(project.join("go"), "").unwrap();
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    let elapsed = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stdout.contains("survived"), "{stdout}\n{stderr}");
    assert!(stderr.contains("commondir"), "{stderr}");
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}: {stderr}");
    assert!(!project.join(".git/commondir").exists());
    client.join().unwrap();
}

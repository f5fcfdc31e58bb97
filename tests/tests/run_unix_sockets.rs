//! Unix sockets seen from outside: without a setting the command cannot create any; with
//! `allowAllUnixSockets` it reaches filesystem sockets, but never the host's abstract sockets
//! (they belong to the host's network namespace). Needs python3 (as the rest of the suite).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test
use std::os::unix::net::UnixListener;
use std::sync::{Arc, Mutex};
use warden_tests::TestEnv;

/// A host-side listener on `addr` (filesystem path or abstract name) that records what each
/// client sends and answers `pong`.
fn serve(listener: UnixListener) -> Arc<Mutex<Vec<String>>> {
    use std::io::{Read, Write};
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let mut buf = [0u8; 64];
            let n = s.read(&mut buf).unwrap_or(0);
            log.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&buf[..n]).into_owned());
            let _ = s.write_all(b"pong");
        }
    });
    seen
}

/// A python client inside the sandbox: connects to ADDR (a path, or `@name` for abstract) and
/// prints `connected pong` or `error ERRNO-NAME`.
const CLIENT: &str = r#"
import socket, sys, errno
addr = sys.argv[1]
if addr.startswith("@"):
    addr = "\0" + addr[1:]
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(addr)
    s.sendall(b"ping-from-sandbox")
    print("connected", s.recv(16).decode())
except OSError as e:
    print("error", errno.errorcode.get(e.errno, e.errno))
"#;

fn python3() -> &'static str {
    // A pyenv shim breaks under TestEnv's HOME; Debian's python3 does not.
    if std::path::Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

fn run_client(env: &TestEnv, settings: Option<&str>, addr: &str) -> warden_tests::Output {
    std::fs::write(env.project().join("client.py"), CLIENT).unwrap();
    let mut args: Vec<String> = vec!["run".into()];
    if let Some(json) = settings {
        let path = env.write_settings("unix.json", json);
        args.extend(["--settings".into(), path.display().to_string()]);
    }
    args.extend([
        "--".into(),
        python3().into(),
        "client.py".into(),
        addr.into(),
    ]);
    env.run(&args)
}

#[test]
fn without_a_setting_no_unix_socket_can_be_created() {
    let env = TestEnv::new();
    let path = env.root().join("host.sock");
    let seen = serve(UnixListener::bind(&path).unwrap());
    let out = run_client(&env, None, path.to_str().unwrap());
    assert!(out.stdout.contains("error"), "{out:?}");
    assert!(
        seen.lock().unwrap().is_empty(),
        "the host socket was reached"
    );
}

/// A datagram socket need not come from `socket()`: one of a `socketpair` can `sendto` any
/// path, and `connect` to a new peer. Without a setting, neither reaches a host datagram
/// socket (/dev/log, journald, sd_notify are such sockets).
#[test]
fn without_a_setting_no_datagram_reaches_a_host_socket_through_a_socketpair() {
    use std::os::unix::net::UnixDatagram;
    let env = TestEnv::new();
    let path = env.root().join("host-dgram.sock");
    let server = UnixDatagram::bind(&path).unwrap();
    server
        .set_read_timeout(Some(std::time::Duration::from_millis(500)))
        .unwrap();
    let script = format!(
        r#"
import socket, errno
# SOCK_RAW too: the kernel makes it a datagram socket for AF_UNIX.
for kind, ty in (("dgram", socket.SOCK_DGRAM), ("raw", socket.SOCK_RAW)):
    try:
        a, b = socket.socketpair(socket.AF_UNIX, ty)
    except OSError as e:
        print(kind, "socketpair", errno.errorcode.get(e.errno, e.errno))
        continue
    for what, f in (("sendto", lambda: a.sendto(b"by-sendto", {p:?})),
                    ("connect", lambda: (b.connect({p:?}), b.send(b"by-connect")))):
        try:
            f()
            print(kind, what, "sent")
        except OSError as e:
            print(kind, what, errno.errorcode.get(e.errno, e.errno))
# Stream pairs stay usable (python's multiprocessing and many others use them).
x, y = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
x.sendall(b"ok")
print("stream pair", y.recv(2).decode())
"#,
        p = path.display().to_string()
    );
    std::fs::write(env.project().join("dgram.py"), script).unwrap();
    let out = env.run(["run", "--", python3(), "dgram.py"]);
    assert!(out.stdout.contains("dgram socketpair EPERM"), "{out:?}");
    assert!(out.stdout.contains("raw socketpair EPERM"), "{out:?}");
    assert!(out.stdout.contains("stream pair ok"), "{out:?}");
    let mut buf = [0u8; 64];
    assert!(
        server.recv(&mut buf).is_err(),
        "the host datagram socket received {:?}",
        String::from_utf8_lossy(&buf)
    );
}

#[test]
fn all_unix_sockets_reach_filesystem_sockets_but_never_the_hosts_abstract_ones() {
    use std::os::linux::net::SocketAddrExt;
    let env = TestEnv::new();
    let settings = r#"{ "network": { "allowAllUnixSockets": true } }"#;

    let path = env.root().join("host.sock");
    let fs_seen = serve(UnixListener::bind(&path).unwrap());
    let out = run_client(&env, Some(settings), path.to_str().unwrap());
    assert!(out.stdout.contains("connected pong"), "{out:?}");
    assert_eq!(*fs_seen.lock().unwrap(), ["ping-from-sandbox"]);

    let name = format!("warden-test-abstract-{}", std::process::id());
    let abs = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let abs_seen = serve(UnixListener::bind_addr(&abs).unwrap());
    // Control: the abstract socket works on the host.
    {
        use std::io::{Read, Write};
        let mut c = std::os::unix::net::UnixStream::connect_addr(&abs).unwrap();
        c.write_all(b"host-control").unwrap();
        let mut buf = [0u8; 4];
        c.read_exact(&mut buf).unwrap();
    }
    let out = run_client(&env, Some(settings), &format!("@{name}"));
    assert!(out.stdout.contains("error ECONNREFUSED"), "{out:?}");
    assert_eq!(
        *abs_seen.lock().unwrap(),
        ["host-control"],
        "the sandbox reached the host's abstract socket"
    );
}

#[test]
fn allow_unix_sockets_reaches_exactly_the_listed_sockets() {
    // Enforced by the cgroup/connect_unix eBPF program: root only (CI runs as root).
    if !nix::unistd::geteuid().is_root() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "allowUnixSockets enforcement needs root, and CI must run it"
        );
        eprintln!(
            "\n*** SKIPPED allow_unix_sockets_reaches_exactly_the_listed_sockets: not root ***\n"
        );
        return;
    }
    let env = TestEnv::new();
    let allowed = env.root().join("allowed.sock");
    let other = env.root().join("other.sock");
    let allowed_seen = serve(UnixListener::bind(&allowed).unwrap());
    let other_seen = serve(UnixListener::bind(&other).unwrap());
    let settings = format!(
        r#"{{ "network": {{ "allowUnixSockets": ["{}"] }} }}"#,
        allowed.display()
    );
    let out = run_client(&env, Some(&settings), allowed.to_str().unwrap());
    assert!(out.stdout.contains("connected pong"), "{out:?}");
    let out = run_client(&env, Some(&settings), other.to_str().unwrap());
    assert!(out.stdout.contains("error EPERM"), "{out:?}");
    // Another spelling of the allowed path is not the allowed path.
    let dotted = format!("{}/./allowed.sock", env.root().display());
    let out = run_client(&env, Some(&settings), &dotted);
    assert!(out.stdout.contains("error EPERM"), "{out:?}");
    assert_eq!(*allowed_seen.lock().unwrap(), ["ping-from-sandbox"]);
    assert!(
        other_seen.lock().unwrap().is_empty(),
        "an unlisted socket was reached"
    );
}

#[test]
fn an_allowed_socket_the_sandbox_could_replace_is_not_honoured() {
    if !nix::unistd::geteuid().is_root() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "needs root under CI"
        );
        eprintln!(
            "\n*** SKIPPED an_allowed_socket_the_sandbox_could_replace_is_not_honoured: not root ***\n"
        );
        return;
    }
    let env = TestEnv::new();
    // In the working directory: writable, so the command could swap the socket for a link.
    let inside = env.project().join("project.sock");
    let seen = serve(UnixListener::bind(&inside).unwrap());
    let settings = format!(
        r#"{{ "network": {{ "allowUnixSockets": ["{}"] }} }}"#,
        inside.display()
    );
    let out = run_client(&env, Some(&settings), inside.to_str().unwrap());
    assert!(out.stdout.contains("error EPERM"), "{out:?}");
    assert!(out.stderr.contains("is ignored"), "{out:?}");
    assert!(seen.lock().unwrap().is_empty());
}

fn root_or_skip_here(test: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{test} needs root under CI"
    );
    eprintln!("\n*** SKIPPED {test}: not root ***\n");
    false
}

/// Sends one datagram to ARGV[1] from an unconnected socket (no connect(2) at all) and prints
/// `sent N` or `error ERRNO-NAME`.
const DGRAM_CLIENT: &str = r#"
import socket, sys, errno
try:
    d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    print("sent", d.sendto(b"datagram-from-sandbox", sys.argv[1]))
except OSError as e:
    print("error", errno.errorcode.get(e.errno, e.errno))
"#;

#[test]
fn a_datagram_sent_to_an_unlisted_socket_is_refused_and_recorded() {
    if !root_or_skip_here("a_datagram_sent_to_an_unlisted_socket_is_refused_and_recorded") {
        return;
    }
    let env = TestEnv::new();
    let allowed = env.root().join("allowed.sock");
    let _allowed_seen = serve(UnixListener::bind(&allowed).unwrap());
    let dgram_path = env.root().join("host-dgram.sock");
    let host = std::os::unix::net::UnixDatagram::bind(&dgram_path).unwrap();
    host.set_nonblocking(true).unwrap();
    let settings = env.write_settings(
        "unix.json",
        &format!(
            r#"{{ "network": {{ "allowUnixSockets": ["{}"] }} }}"#,
            allowed.display()
        ),
    );
    std::fs::write(env.project().join("dgram.py"), DGRAM_CLIENT).unwrap();
    let violations = env.root().join("v.jsonl");
    let out = env.run([
        "run",
        "--settings",
        settings.to_str().unwrap(),
        "--violations",
        violations.to_str().unwrap(),
        "--",
        python3(),
        "dgram.py",
        dgram_path.to_str().unwrap(),
    ]);
    assert!(out.stdout.contains("error EPERM"), "{out:?}");
    let mut buf = [0u8; 64];
    assert!(
        host.recv(&mut buf).is_err(),
        "the host's datagram socket received {:?}",
        String::from_utf8_lossy(&buf)
    );
    let records = std::fs::read_to_string(&violations).unwrap_or_default();
    let hit = records.lines().any(|l| {
        l.contains("\"unix-socket\"")
            && l.contains("sendmsg")
            && l.contains(dgram_path.to_str().unwrap())
    });
    assert!(hit, "no unix-socket sendmsg record: {records}");
}

#[test]
fn an_allowed_socket_behind_a_symlink_the_sandbox_could_repoint_is_not_honoured() {
    if !root_or_skip_here(
        "an_allowed_socket_behind_a_symlink_the_sandbox_could_repoint_is_not_honoured",
    ) {
        return;
    }
    let env = TestEnv::new();
    let good = env.root().join("good");
    let secret = env.root().join("secret");
    std::fs::create_dir_all(&good).unwrap();
    std::fs::create_dir_all(&secret).unwrap();
    let _good_seen = serve(UnixListener::bind(good.join("ok.sock")).unwrap());
    let secret_seen = serve(UnixListener::bind(secret.join("ok.sock")).unwrap());
    // The link lives in the writable working directory: the command can repoint it.
    let link = env.project().join("link");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    let listed = link.join("ok.sock");
    let settings = format!(
        r#"{{ "network": {{ "allowUnixSockets": ["{}"] }} }}"#,
        listed.display()
    );
    std::fs::write(env.project().join("client.py"), CLIENT).unwrap();
    let path = env.write_settings("unix.json", &settings);
    let out = env.run([
        "run",
        "--settings",
        path.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &format!(
            "rm link && ln -s {} link && {} client.py {}",
            secret.display(),
            python3(),
            listed.display()
        ),
    ]);
    assert!(out.stdout.contains("error EPERM"), "{out:?}");
    assert!(out.stderr.contains("is ignored"), "{out:?}");
    assert!(
        secret_seen.lock().unwrap().is_empty(),
        "the repointed link reached another socket"
    );
}

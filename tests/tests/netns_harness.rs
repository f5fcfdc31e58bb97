//! Self-test of the network harness (`warden_tests::netns`): servers in a namespace reachable
//! by name from the host, and nothing left behind after drop: no namespace, no veth, no server
//! process, `/etc/hosts` unchanged byte for byte (and the same inode). Needs root, iproute2,
//! python3 and openssl; skips loudly without them, fails under CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::fs::MetadataExt;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;
use warden_tests::netns::{
    self, bytes_sha256, link_names, loopback_http_server, netns_names, HostsEntry, HttpOptions,
    TestNet, HOSTS_FILE,
};

/// Tests here compare /etc/hosts and the link list before and after; they must not overlap
/// each other (other test binaries only add and remove their own lines).
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// `/etc/hosts` content and inode.
fn hosts_snapshot() -> (Vec<u8>, u64) {
    (
        std::fs::read(HOSTS_FILE).unwrap(),
        std::fs::metadata(HOSTS_FILE).unwrap().ino(),
    )
}

/// `/etc/hosts` without the lines other test processes add meanwhile (ours are gone or not).
fn hosts_without_others(bytes: &[u8]) -> String {
    let me = format!("# warden-tests {} ", std::process::id());
    String::from_utf8_lossy(bytes)
        .split_inclusive('\n')
        .filter(|l| !l.contains("# warden-tests ") || l.contains(&me))
        .collect()
}

fn alive(pid: u32) -> bool {
    // A reaped child has no /proc entry; a zombie would still show its state as Z.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

/// A raw HTTP/1.1 request from the host; the whole response as text.
fn http_get(addr: SocketAddr, host: &str, path: &str) -> String {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nX-Harness: yes\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn curl(args: &[&str]) -> (bool, String, String) {
    let out = Command::new("curl")
        .args(["-sS", "--noproxy", "*", "--max-time", "20"])
        .args(args)
        .output()
        .expect("curl runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn unique_name(tag: &str) -> String {
    format!("{tag}-{}.harness.test", std::process::id())
}

#[test]
fn servers_are_reachable_by_name_and_everything_is_gone_after_drop() {
    if !netns::ready_or_skip("servers_are_reachable_by_name_and_everything_is_gone_after_drop") {
        return;
    }
    let _serial = serial();
    let (hosts_before, inode_before) = hosts_snapshot();
    let net = TestNet::new();
    let (ns_name, host_if, ns_if) = (
        net.name().to_string(),
        net.host_if().to_string(),
        net.ns_if().to_string(),
    );
    assert!(netns_names().contains(&ns_name), "{ns_name} not listed");
    assert!(link_names().contains(&host_if), "{host_if} not on the host");
    assert!(
        !link_names().contains(&ns_if),
        "{ns_if} must live in the namespace only"
    );
    assert_ne!(net.ns_v4(), net.host_v4());

    let name = unique_name("web");
    let http = net.http_server();
    let https = net.https_server(&[&name]);
    let tcp = net.tcp_echo_server();
    let udp = net.udp_echo_server();
    let entry = net.host_name(&name);
    assert_eq!(entry.addr(), IpAddr::V4(net.ns_v4()));
    assert!(std::fs::read_to_string(HOSTS_FILE)
        .unwrap()
        .contains(entry.line()));

    // The host resolves the name through /etc/hosts to the namespace.
    let resolved: Vec<SocketAddr> = (name.as_str(), 80).to_socket_addrs().unwrap().collect();
    assert!(
        resolved.contains(&SocketAddr::new(IpAddr::V4(net.ns_v4()), 80)),
        "{name} resolved to {resolved:?}"
    );

    // HTTP by name, and the server logs what arrived (the probe is not logged).
    let reply = http_get(resolved[0], &name, "/hello");
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(
        reply.contains(&format!("hello from warden-tests host={name} path=/hello")),
        "{reply}"
    );
    let (ok, body, err) = curl(&["-H", "X-Test: 42", &http.url(&name, "/echo")]);
    assert!(ok, "{err}");
    let echo: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(echo["headers"].to_string().contains("X-Test"), "{body}");
    let reqs = http.requests();
    assert_eq!(reqs.len(), 2, "{reqs:#?}");
    assert_eq!(reqs[0].path, "/hello");
    assert_eq!(reqs[0].header("x-harness"), Some("yes"));
    assert_eq!(reqs[1].header("X-Test"), Some("42"));
    assert_eq!(reqs[1].client, net.host_v4().to_string());
    assert!(!reqs[1].tls);

    // Uploads come back as their SHA-256; /bytes/N is deterministic and carries its hash.
    let upload = net.dir().join("upload");
    std::fs::write(&upload, b"hello upload\n").unwrap();
    let (ok, body, err) = curl(&["-T", upload.to_str().unwrap(), &http.url(&name, "/up")]);
    assert!(ok, "{err}");
    let expected = String::from_utf8(
        Command::new("sha256sum")
            .arg(&upload)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .split_whitespace()
    .next()
    .unwrap()
    .to_string();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["sha256"], expected.as_str(), "{body}");
    assert_eq!(v["length"], 13);
    let put = http.requests().pop().unwrap();
    assert_eq!(put.method, "PUT");
    assert_eq!(put.body_sha256.as_deref(), Some(expected.as_str()));

    let download = net.dir().join("download");
    let n = 3 * 1024 * 1024 + 7;
    let (ok, headers, err) = curl(&[
        "-D",
        "-",
        "-o",
        download.to_str().unwrap(),
        &http.url(&name, &format!("/bytes/{n}")),
    ]);
    assert!(ok, "{err}");
    let got = String::from_utf8(
        Command::new("sha256sum")
            .arg(&download)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let want = bytes_sha256(n);
    assert!(got.starts_with(&want), "{got} vs {want}");
    assert!(
        headers
            .to_lowercase()
            .contains(&format!("x-sha256: {want}")),
        "{headers}"
    );
    let sent = http.requests().pop().unwrap();
    assert_eq!((sent.sent, sent.complete), (Some(n), Some(true)));

    // HTTPS verifies against the net's CA.
    let ca = net.ca_cert();
    let (ok, body, err) = curl(&["--cacert", ca.to_str().unwrap(), &https.url(&name, "/tls")]);
    assert!(ok, "{err}");
    assert!(body.contains("path=/tls"), "{body}");
    let (ok, _, _) = curl(&[&https.url(&name, "/tls")]);
    assert!(!ok, "the test CA must not be trusted by default");
    assert!(https.requests().iter().any(|r| r.path == "/tls" && r.tls));

    // Echo servers, logged without the readiness probes.
    assert_eq!(
        tcp.roundtrip(b"ping tcp").as_deref(),
        Some(&b"ping tcp"[..])
    );
    assert_eq!(
        udp.roundtrip(b"ping udp").as_deref(),
        Some(&b"ping udp"[..])
    );
    let tcp_events = netns::wait_for(Duration::from_secs(5), || {
        let e = tcp.events();
        (!e.is_empty()).then_some(e)
    })
    .unwrap();
    assert_eq!(tcp_events.len(), 1, "{tcp_events:?}");
    assert_eq!(tcp_events[0].head, "ping tcp");
    let udp_events = udp.events();
    assert_eq!(udp_events.len(), 1, "{udp_events:?}");
    assert_eq!(udp_events[0].bytes, 8);

    // IPv6 on the pair when the host has it.
    if let Some(v6) = net.ns_v6() {
        let reply = http_get(SocketAddr::new(IpAddr::V6(v6), 80), "v6", "/v6");
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    } else {
        eprintln!("note: no IPv6 on the veth pair here");
    }

    let pids = [http.pid(), https.pid(), tcp.pid(), udp.pid()];
    drop((http, https, tcp, udp, entry));
    drop(net);

    assert!(!netns_names().contains(&ns_name), "{ns_name} still listed");
    let links = link_names();
    assert!(
        !links.contains(&host_if) && !links.contains(&ns_if),
        "{links:?}"
    );
    for pid in pids {
        assert!(!alive(pid), "server {pid} survived");
    }
    let (hosts_after, inode_after) = hosts_snapshot();
    assert_eq!(
        inode_after, inode_before,
        "{HOSTS_FILE} was replaced, not edited"
    );
    assert_eq!(
        hosts_without_others(&hosts_after),
        hosts_without_others(&hosts_before),
        "{HOSTS_FILE} changed"
    );
}

#[test]
fn two_nets_at_once_and_concurrent_setup() {
    if !netns::ready_or_skip("two_nets_at_once_and_concurrent_setup") {
        return;
    }
    let _serial = serial();
    let (hosts_before, _) = hosts_snapshot();

    let nets: Vec<TestNet> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4).map(|_| s.spawn(TestNet::new)).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut addrs: Vec<_> = nets.iter().map(|n| n.ns_v4()).collect();
    addrs.sort();
    addrs.dedup();
    assert_eq!(addrs.len(), 4, "subnets collide");
    let ifs: Vec<_> = nets.iter().map(|n| n.host_if().to_string()).collect();
    let mut names: Vec<_> = nets.iter().map(|n| n.name().to_string()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 4);

    let (a, b) = (&nets[0], &nets[1]);
    let (name_a, name_b) = (unique_name("a"), unique_name("b"));
    let (http_a, http_b) = (a.http_server(), b.http_server());
    let (_ea, _eb) = (a.host_name(&name_a), b.host_name(&name_b));
    let (ok, body, err) = curl(&[&http_a.url(&name_a, "/a")]);
    assert!(ok && body.contains("path=/a"), "{err}");
    let (ok, body, err) = curl(&[&http_b.url(&name_b, "/b")]);
    assert!(ok && body.contains("path=/b"), "{err}");
    assert_eq!(http_a.requests().len(), 1);
    assert_eq!(http_b.requests().len(), 1);
    assert_eq!(http_a.requests()[0].path, "/a");
    assert_eq!(http_b.requests()[0].path, "/b");

    // The namespaces are separate: a's namespace has no route to b's.
    let out = a
        .command(netns::python3())
        .args([
            "-c",
            &format!(
                "import socket; socket.create_connection(('{}', 80), timeout=2)",
                b.ns_v4()
            ),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success(), "namespace a reached namespace b");

    drop((http_a, http_b, _ea, _eb));
    drop(nets);
    for name in &names {
        assert!(!netns_names().contains(name), "{name} left behind");
    }
    let links = link_names();
    assert!(
        ifs.iter().all(|i| !links.contains(i)),
        "{links:?} still has one of {ifs:?}"
    );
    let (hosts_after, _) = hosts_snapshot();
    assert_eq!(
        hosts_without_others(&hosts_after),
        hosts_without_others(&hosts_before)
    );
}

#[test]
fn servers_die_with_the_net_and_host_side_servers_work() {
    if !netns::ready_or_skip("servers_die_with_the_net_and_host_side_servers_work") {
        return;
    }
    let net = TestNet::new();
    let http = net.http_server();
    let static_dir = net.dir().join("static");
    std::fs::create_dir_all(static_dir.join("sub")).unwrap();
    std::fs::write(static_dir.join("sub/file.txt"), "static content\n").unwrap();
    let files = net.http_server_with(HttpOptions {
        port: Some(8080),
        static_dir: Some(static_dir),
        ..Default::default()
    });
    let (ok, body, err) = curl(&[&files.url(&net.ns_v4().to_string(), "/static/sub/file.txt")]);
    assert!(ok, "{err}");
    assert_eq!(body, "static content\n");
    let (_, code, _) = curl(&[
        "--path-as-is",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &files.url(&net.ns_v4().to_string(), "/static/../../etc/passwd"),
    ]);
    assert_ne!(code, "200");

    // Host-side servers listen on the host's veth address and loopback, on free ports.
    let host_http = net.host_side_http_server();
    assert_eq!(host_http.addr().ip(), IpAddr::V4(net.host_v4()));
    let reply = http_get(host_http.addr(), "x", "/host-side");
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let lo = loopback_http_server();
    assert!(lo.addr().ip().is_loopback());
    assert!(http_get(lo.addr(), "lo", "/lo").starts_with("HTTP/1.1 200"));
    assert_eq!(lo.requests().len(), 1);
    let tcp = net.host_side_tcp_echo_server();
    assert_eq!(tcp.roundtrip(b"x").as_deref(), Some(&b"x"[..]));
    let udp = net.host_side_udp_echo_server();
    assert_eq!(udp.roundtrip(b"y").as_deref(), Some(&b"y"[..]));

    // Dropping the net first kills the servers inside it; dropping them afterwards is fine.
    let pids = [http.pid(), files.pid()];
    let name = net.name().to_string();
    drop(net);
    for pid in pids {
        assert!(
            netns::wait_for(Duration::from_secs(5), || (!alive(pid)).then_some(())).is_some(),
            "server {pid} survived its namespace"
        );
    }
    assert!(!netns_names().contains(&name));
    drop((http, files));
    // Host-side servers are not in the namespace; they live until their own drop.
    assert!(alive(host_http.pid()));
    let pid = host_http.pid();
    drop(host_http);
    assert!(!alive(pid));
}

#[test]
fn hosts_entries_are_removed_exactly_in_any_order() {
    if !netns::ready_or_skip("hosts_entries_are_removed_exactly_in_any_order") {
        return;
    }
    let _serial = serial();
    let (before, inode) = hosts_snapshot();
    let a = HostsEntry::add("10.213.255.1".parse().unwrap(), &unique_name("first"));
    let b = HostsEntry::add("fd57:7764::2".parse().unwrap(), &unique_name("second"));
    let c = HostsEntry::add("10.213.255.3".parse().unwrap(), &unique_name("third"));
    let during = std::fs::read_to_string(HOSTS_FILE).unwrap();
    let pos = |e: &HostsEntry| during.find(e.line()).unwrap();
    assert!(pos(&a) < pos(&b) && pos(&b) < pos(&c), "{during}");
    assert!(during.starts_with(&hosts_without_others(&before)) || during.len() > before.len());
    drop(b); // from the middle
    let mid = std::fs::read_to_string(HOSTS_FILE).unwrap();
    assert!(mid.contains(a.line()) && mid.contains(c.line()));
    assert!(!mid.contains(&unique_name("second")));
    drop(c); // the last line
    drop(a);
    let (after, inode_after) = hosts_snapshot();
    assert_eq!(inode_after, inode);
    assert_eq!(hosts_without_others(&after), hosts_without_others(&before));
}

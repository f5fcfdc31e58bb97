//! The proxy against a tiny upstream on loopback (explicitly allowed to the guard, as a
//! setting would), names from a hosts file.

use super::*;
use crate::net::event::MemorySink;
use crate::net::guard::GuardConfig;
use crate::policy::settings::{NetworkSettings, SandboxSettings};
use std::io::Write;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

struct Setup {
    proxy: Arc<Proxy>,
    events: Arc<MemorySink>,
    upstream_port: u16,
    /// Requests the upstream received (head bytes).
    seen: Arc<std::sync::Mutex<Vec<String>>>,
    _hosts: tempfile::NamedTempFile,
}

async fn setup(allowed: &[&str], loopback_allowed: bool, token: Option<&str>) -> Setup {
    let mut hosts = tempfile::NamedTempFile::new().unwrap();
    writeln!(hosts, "127.0.0.1 allowed.test denied.test other.test").unwrap();
    let resolver = Resolver::with_nameservers(vec![], Some(hosts.path())).unwrap();
    let policy = crate::policy::merge::test_policy(SandboxSettings {
        network: Some(NetworkSettings {
            allowed_domains: Some(allowed.iter().map(|s| s.to_string()).collect()),
            denied_domains: Some(vec!["denied.test".into()]),
            ..Default::default()
        }),
        ..Default::default()
    })
    .unwrap();
    let guard = AddressGuard::new(GuardConfig {
        allowed: if loopback_allowed {
            vec!["127.0.0.0/8".parse().unwrap()]
        } else {
            vec![]
        },
        deny_private: false,
        host_addresses: vec![],
        ..GuardConfig::default()
    });
    let events = MemorySink::new();
    let proxy = Proxy::new(ProxyConfig {
        policy: crate::policy::live::LivePolicy::new(Arc::new(policy)),
        resolver,
        guard,
        events: events.clone(),
        token: token.map(str::to_string),
        parent: None,
        approvals: None,
    });
    let (upstream_port, seen) = upstream().await;
    Setup {
        proxy,
        events,
        upstream_port,
        seen,
        _hosts: hosts,
    }
}

/// An upstream that answers every HTTP request with `hello` and echoes raw bytes after a
/// line `ECHO\n`.
async fn upstream() -> (u16, Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let mut acc = Vec::new();
                loop {
                    let n = match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    acc.extend_from_slice(&buf[..n]);
                    if acc.starts_with(b"ECHO\n") {
                        let rest = acc.split_off(5);
                        s.write_all(&rest).await.unwrap();
                        acc = b"ECHO\n".to_vec();
                        continue;
                    }
                    while let Some(end) = acc.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head: Vec<u8> = acc.drain(..end + 4).collect();
                        log.lock()
                            .unwrap()
                            .push(String::from_utf8_lossy(&head).into_owned());
                        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
                            .await
                            .unwrap();
                    }
                }
            });
        }
    });
    (port, seen)
}

async fn start_http(proxy: Arc<Proxy>) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(http::serve(proxy, l));
    port
}

async fn start_socks(proxy: Arc<Proxy>) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(socks::serve(proxy, l));
    port
}

/// Sends `request` to the HTTP proxy and reads one response head plus `body_len` bytes.
async fn roundtrip(port: u16, request: &str) -> (String, tokio::net::TcpStream) {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let head = read_head(&mut s).await;
    (head, s)
}

async fn read_head(s: &mut tokio::net::TcpStream) -> String {
    let mut acc = Vec::new();
    let mut b = [0u8; 1];
    while !acc.ends_with(b"\r\n\r\n") {
        if s.read(&mut b).await.unwrap() == 0 {
            break;
        }
        acc.push(b[0]);
    }
    String::from_utf8_lossy(&acc).into_owned()
}

async fn read_n(s: &mut tokio::net::TcpStream, n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    s.read_exact(&mut buf).await.unwrap();
    buf
}

#[tokio::test]
async fn forwards_an_allowed_absolute_form_request_in_origin_form() {
    let st = setup(&["allowed.test"], true, None).await;
    let port = start_http(st.proxy.clone()).await;
    let up = st.upstream_port;
    let req = format!(
        "GET http://allowed.test:{up}/x?y=1 HTTP/1.1\r\nHost: allowed.test:{up}\r\nProxy-Connection: keep-alive\r\n\r\n"
    );
    let (head, mut s) = roundtrip(port, &req).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(read_n(&mut s, 5).await, b"hello");
    // Keep-alive: a second request on the same client connection.
    s.write_all(req.as_bytes()).await.unwrap();
    let head2 = read_head(&mut s).await;
    assert!(head2.starts_with("HTTP/1.1 200"), "{head2}");
    let seen = st.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert!(
        seen[0].starts_with("GET /x?y=1 HTTP/1.1\r\n"),
        "{}",
        seen[0]
    );
    assert!(!seen[0].to_ascii_lowercase().contains("proxy-connection"));
    drop(s);
    for _ in 0..100 {
        if st.events.events().len() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let events = st.events.events();
    assert_eq!(events.len(), 2);
    assert!(events.iter().all(|e| e.decision == Decision::Allow));
    assert_eq!(events[0].address, Some("127.0.0.1".parse().unwrap()));
    // The response body's bytes are counted (the body is `hello`), also live for the metrics.
    assert_eq!(events[0].bytes_down, 5, "{events:?}");
    assert_eq!(st.events.transferred_bytes(), (0, 10));
}

/// Polls the sink's live byte counts until they are `want` (the proxy counts a chunk right
/// after writing it, so the client may see the bytes a moment before they are counted).
async fn transferred(events: &MemorySink, want: (u64, u64)) -> (u64, u64) {
    for _ in 0..200 {
        if events.transferred_bytes() == want {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    events.transferred_bytes()
}

#[tokio::test]
async fn a_denied_host_gets_403_with_the_header_the_reason_and_the_rule() {
    let st = setup(&["allowed.test", "denied.test"], true, None).await;
    let port = start_http(st.proxy.clone()).await;
    let up = st.upstream_port;
    let (head, mut s) = roundtrip(
        port,
        &format!("GET http://denied.test:{up}/ HTTP/1.1\r\nHost: denied.test:{up}\r\n\r\n"),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert!(head
        .to_ascii_lowercase()
        .contains("x-proxy-error: blocked-by-allowlist"));
    let len: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length: ")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap();
    let body = String::from_utf8(read_n(&mut s, len).await).unwrap();
    assert!(body.contains("denied.test"), "{body}");
    assert!(body.contains("deniedDomains"), "{body}");
    assert!(
        st.seen.lock().unwrap().is_empty(),
        "the upstream was reached"
    );
    let denied = st.events.denied();
    assert_eq!(denied.len(), 1);
    assert_eq!(denied[0].host, "denied.test");
}

#[tokio::test]
async fn connect_tunnels_bytes_both_ways_and_counts_them() {
    let st = setup(&["allowed.test"], true, None).await;
    let port = start_http(st.proxy.clone()).await;
    let up = st.upstream_port;
    let (head, mut s) = roundtrip(
        port,
        &format!("CONNECT allowed.test:{up} HTTP/1.1\r\nHost: allowed.test:{up}\r\n\r\n"),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    s.write_all(b"ECHO\nping").await.unwrap();
    assert_eq!(read_n(&mut s, 4).await, b"ping");
    // Counted live, while the tunnel is still open (its event comes at the end).
    assert_eq!(transferred(&st.events, (9, 4)).await, (9, 4));
    assert!(st.events.events().is_empty());
    drop(s);
    for _ in 0..100 {
        if !st.events.events().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let e = st.events.events();
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].bytes_up, 9);
    assert_eq!(e[0].bytes_down, 4);
}

#[tokio::test]
async fn connect_with_a_disagreeing_host_header_is_refused() {
    let st = setup(&["allowed.test", "other.test"], true, None).await;
    let port = start_http(st.proxy.clone()).await;
    let up = st.upstream_port;
    let (head, _s) = roundtrip(
        port,
        &format!("CONNECT allowed.test:{up} HTTP/1.1\r\nHost: other.test:{up}\r\n\r\n"),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    assert!(st.seen.lock().unwrap().is_empty());
}

/// Red-team round 22: a forwarded request's Host without a port names port 80, not the
/// target's port; a CONNECT's port-less Host (it reaches no server) still passes.
#[tokio::test]
async fn a_port_less_host_header_means_port_80_for_a_forwarded_request() {
    let st = setup(&["allowed.test"], true, None).await;
    let port = start_http(st.proxy.clone()).await;
    let up = st.upstream_port;
    let (head, _s) = roundtrip(
        port,
        &format!("GET http://allowed.test:{up}/x HTTP/1.1\r\nHost: allowed.test\r\n\r\n"),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    assert!(st.seen.lock().unwrap().is_empty());
    let denied = st.events.denied();
    assert!(denied[0].reason.contains("disagrees"), "{denied:?}");
    let (head, _s) = roundtrip(
        port,
        &format!("CONNECT allowed.test:{up} HTTP/1.1\r\nHost: allowed.test\r\n\r\n"),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
}

#[tokio::test]
async fn an_allowed_name_resolving_to_loopback_is_refused_by_the_guard() {
    let st = setup(&["allowed.test"], false, None).await;
    let port = start_http(st.proxy.clone()).await;
    let up = st.upstream_port;
    let (head, _s) = roundtrip(
        port,
        &format!("CONNECT allowed.test:{up} HTTP/1.1\r\nHost: allowed.test:{up}\r\n\r\n"),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let denied = st.events.denied();
    assert_eq!(denied[0].stage, Stage::Guard, "{denied:?}");
    assert!(
        denied[0].reason.contains("loopback"),
        "{}",
        denied[0].reason
    );
}

#[tokio::test]
async fn origin_form_and_https_absolute_form_are_not_proxied() {
    let st = setup(&["allowed.test"], true, None).await;
    let port = start_http(st.proxy.clone()).await;
    for req in [
        "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
        "GET https://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
    ] {
        let (head, _s) = roundtrip(port, req).await;
        assert!(head.starts_with("HTTP/1.1 400"), "{req}: {head}");
    }
    assert!(st.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn with_a_token_requests_without_it_get_407_and_with_it_pass() {
    use base64::Engine;
    let st = setup(&["allowed.test"], true, Some("s3cret")).await;
    let port = start_http(st.proxy.clone()).await;
    let up = st.upstream_port;
    let (head, _s) = roundtrip(
        port,
        &format!("GET http://allowed.test:{up}/ HTTP/1.1\r\nHost: allowed.test:{up}\r\n\r\n"),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 407"), "{head}");
    let cred = base64::engine::general_purpose::STANDARD.encode("any:s3cret");
    let (head, _s) = roundtrip(
        port,
        &format!("GET http://allowed.test:{up}/ HTTP/1.1\r\nHost: allowed.test:{up}\r\nProxy-Authorization: Basic {cred}\r\n\r\n"),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let seen = st.seen.lock().unwrap().clone();
    assert!(
        !seen[0].to_ascii_lowercase().contains("proxy-authorization"),
        "the token leaked upstream"
    );
}

/// A SOCKS5 CONNECT by domain name; returns the reply code.
async fn socks_connect(port: u16, host: &str, dport: u16) -> (u8, tokio::net::TcpStream) {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(&[5, 1, 0]).await.unwrap();
    assert_eq!(read_n(&mut s, 2).await, [5, 0]);
    let mut req = vec![5, 1, 0, 3, host.len() as u8];
    req.extend_from_slice(host.as_bytes());
    req.extend_from_slice(&dport.to_be_bytes());
    s.write_all(&req).await.unwrap();
    let head = read_n(&mut s, 4).await;
    let rest = match head[3] {
        1 => 6,
        4 => 18,
        _ => panic!("reply address type {}", head[3]),
    };
    read_n(&mut s, rest).await;
    (head[1], s)
}

#[tokio::test]
async fn socks5_connects_allowed_names_and_refuses_others_with_0x02() {
    let st = setup(&["allowed.test"], true, None).await;
    let port = start_socks(st.proxy.clone()).await;
    let up = st.upstream_port;
    let (code, mut s) = socks_connect(port, "allowed.test", up).await;
    assert_eq!(code, 0);
    s.write_all(b"ECHO\nsocks").await.unwrap();
    assert_eq!(read_n(&mut s, 5).await, b"socks");
    assert_eq!(transferred(&st.events, (10, 5)).await, (10, 5));
    let (code, _s) = socks_connect(port, "denied.test", up).await;
    assert_eq!(code, 2);
    let (code, _s) = socks_connect(port, "nowhere.test", up).await;
    assert_eq!(
        code, 2,
        "a name in no list is refused by policy before any lookup"
    );
    let denied = st.events.denied();
    assert_eq!(denied.len(), 2);
    assert!(denied.iter().all(|e| e.protocol == Protocol::Socks5));
}

/// Red-team round 22: requests refused before they name a target — SOCKS4, a SOCKS5 command
/// or address type that does not exist, HTTP that hyper cannot parse — are recorded; a
/// client that only connects and leaves is not.
#[tokio::test]
async fn requests_refused_while_parsing_are_recorded() {
    let st = setup(&["allowed.test"], true, None).await;
    let socks = start_socks(st.proxy.clone()).await;
    // SOCKS4 CONNECT to 127.0.0.1:80.
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", socks))
        .await
        .unwrap();
    s.write_all(&[4, 1, 0, 80, 127, 0, 0, 1, b'u', 0])
        .await
        .unwrap();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest).await;
    // SOCKS5 with command 4.
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", socks))
        .await
        .unwrap();
    s.write_all(&[5, 1, 0]).await.unwrap();
    assert_eq!(read_n(&mut s, 2).await, [5, 0]);
    s.write_all(&[5, 4, 0, 1, 127, 0, 0, 1, 0, 80])
        .await
        .unwrap();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest).await;
    // Connected and gone: nothing.
    drop(
        tokio::net::TcpStream::connect(("127.0.0.1", socks))
            .await
            .unwrap(),
    );
    // HTTP with two Content-Lengths.
    let http = start_http(st.proxy.clone()).await;
    let (head, _s) = roundtrip(
        http,
        "POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\
         Content-Length: 1\r\nContent-Length: 2\r\n\r\nab",
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    let mut denied = Vec::new();
    for _ in 0..100 {
        denied = st.events.denied();
        if denied.len() >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let denied = if st.events.denied().len() > denied.len() {
        st.events.denied()
    } else {
        denied
    };
    assert_eq!(denied.len(), 3, "{denied:#?}");
    assert!(
        denied.iter().all(|e| e.stage == Stage::Request),
        "{denied:#?}"
    );
    assert!(denied[0].reason.contains("version"), "{denied:#?}");
    assert!(denied[1].reason.contains("command"), "{denied:#?}");
    assert!(denied[2].reason.contains("malformed HTTP"), "{denied:#?}");
    assert!(st.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn with_a_token_a_socks_client_without_it_is_refused_and_one_with_it_connects() {
    let st = setup(&["allowed.test"], true, Some("s3cret")).await;
    let port = start_socks(st.proxy.clone()).await;
    let up = st.upstream_port;
    // No credentials offered: the server accepts no method (0xFF).
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(&[5, 1, 0]).await.unwrap();
    assert_eq!(read_n(&mut s, 2).await, [5, 0xff]);
    // Wrong password: the sub-negotiation fails (status != 0).
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(&[5, 1, 2]).await.unwrap();
    assert_eq!(read_n(&mut s, 2).await, [5, 2]);
    s.write_all(&[1, 1, b'u', 5, b'w', b'r', b'o', b'n', b'g'])
        .await
        .unwrap();
    let reply = read_n(&mut s, 2).await;
    assert_eq!(reply[0], 1);
    assert_ne!(reply[1], 0);
    // The token: CONNECT works.
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(&[5, 1, 2]).await.unwrap();
    assert_eq!(read_n(&mut s, 2).await, [5, 2]);
    s.write_all(&[1, 1, b'u', 6, b's', b'3', b'c', b'r', b'e', b't'])
        .await
        .unwrap();
    assert_eq!(read_n(&mut s, 2).await, [1, 0]);
    let mut req = vec![5, 1, 0, 3, 12];
    req.extend_from_slice(b"allowed.test");
    req.extend_from_slice(&up.to_be_bytes());
    s.write_all(&req).await.unwrap();
    let head = read_n(&mut s, 4).await;
    assert_eq!(head[1], 0, "{head:?}");
    read_n(&mut s, 6).await;
    s.write_all(b"ECHO\ntok").await.unwrap();
    assert_eq!(read_n(&mut s, 3).await, b"tok");
}

#[test]
fn a_written_port_that_is_not_valid_is_refused_not_defaulted() {
    use super::http::authority;
    let a = |s: &str| authority(&s.parse::<hyper::Uri>().unwrap(), Some(80));
    assert_eq!(a("http://h.test/x"), Some(("h.test".into(), 80)));
    assert_eq!(a("http://h.test:8080/x"), Some(("h.test".into(), 8080)));
    assert_eq!(a("http://[::1]/x"), Some(("[::1]".into(), 80)));
    assert_eq!(a("http://[::1]:81/x"), Some(("[::1]".into(), 81)));
    assert_eq!(a("http://h.test:65536/x"), None);
    assert_eq!(a("http://h.test:0/x"), None);
    assert_eq!(a("http://[::1]:0/x"), None);
}

#[test]
fn the_connection_budget_follows_the_memory_limit() {
    assert_eq!(connection_budget(None), (2 * http::MAX_CONNECTIONS, None));
    assert_eq!(
        connection_budget(Some(64 << 20)),
        (16, Some(LIMITED_RCVBUF))
    );
    assert_eq!(connection_budget(Some(1 << 20)), (16, Some(LIMITED_RCVBUF)));
    assert_eq!(connection_budget(Some(4 << 30)).0, 1024);
    assert_eq!(
        connection_budget(Some(u64::MAX)).0,
        2 * http::MAX_CONNECTIONS
    );
}

fn refused_event(host: &str) -> crate::net::event::NetEvent {
    crate::net::event::NetEvent {
        time_ms: 0,
        protocol: Protocol::Connect,
        host: host.to_string(),
        port: Some(443),
        decision: crate::policy::decision::Decision::Deny,
        stage: crate::net::event::Stage::Policy,
        kind: crate::policy::decision::ReasonKind::DomainNotAllowed,
        reason: "not in allowedDomains".into(),
        rule: None,
        address: None,
        bytes_up: 0,
        bytes_down: 0,
        duration_ms: 0,
    }
}

/// A command decides how many refusals it causes: the end-of-run summary stays short, and
/// the host names it chose print as text, not terminal controls.
#[test]
fn the_blocked_summary_is_bounded_and_printable() {
    use crate::net::service::{blocked_summary, SUMMARY_LINES};
    let mut events: Vec<_> = (0..20_000)
        .map(|i| refused_event(&format!("h{i}.test")))
        .collect();
    events.push(refused_event("h0.test"));
    let started = std::time::Instant::now();
    let lines = blocked_summary(&events);
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    assert_eq!(lines.len(), SUMMARY_LINES + 1);
    assert!(lines[0].contains("h0.test:443 (2×)"), "{}", lines[0]);
    assert!(lines.last().unwrap().contains("19950 more"), "{lines:?}");
    let odd = blocked_summary(&[refused_event("\u{1b}]0;pwned\u{7}x.test")]);
    assert!(!odd[0].contains('\u{1b}'), "{odd:?}");
    // Unparsed requests: one line per reason, each with its own count.
    let unparsed = |reason: &str| {
        let mut e = refused_event(http::UNPARSED);
        e.port = None;
        e.reason = reason.into();
        e
    };
    let lines = blocked_summary(&[
        unparsed("HTTP/2 preface"),
        unparsed("SOCKS4 request"),
        unparsed("SOCKS4 request"),
    ]);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].ends_with("HTTP/2 preface"), "{lines:?}");
    assert!(lines[1].contains("(2×): SOCKS4 request"), "{lines:?}");
}

use super::*;
use crate::policy::domain::canonical_host;
use tokio::net::TcpListener;

#[test]
fn parent_urls_parse_with_credentials_and_default_ports() {
    let p = ParentUrl::parse("http", "http://u%40corp:p%3Ass@proxy.corp:8080").unwrap();
    assert_eq!((p.host.as_str(), p.port), ("proxy.corp", 8080));
    let expected = base64::engine::general_purpose::STANDARD.encode("u@corp:p:ss");
    assert_eq!(p.authorization, Some(format!("Basic {expected}")));
    let p = ParentUrl::parse("http", "http://[fd00::1]").unwrap();
    assert_eq!(
        (p.host.as_str(), p.port, p.authorization),
        ("fd00::1", 80, None)
    );
    assert!(ParentUrl::parse("https", "https://proxy.corp:443").is_err());
    assert!(ParentUrl::parse("http", "proxy.corp:8080").is_err());
}

fn parent(no_proxy: &[&str]) -> ParentProxy {
    ParentProxy {
        http: Some(ParentUrl::parse("http", "http://h:1").unwrap()),
        https: Some(ParentUrl::parse("https", "http://s:2").unwrap()),
        no_proxy: no_proxy.iter().map(|s| s.to_string()).collect(),
    }
}

#[test]
fn tunnels_use_the_https_parent_plain_http_the_http_parent_and_no_proxy_goes_direct() {
    let p = parent(&["internal.corp", ".example.org", "10.0.0.0/8", "::1"]);
    let host = |h: &str| canonical_host(h).unwrap();
    assert_eq!(p.route(&host("github.com"), true).map(|u| u.port), Some(2));
    assert_eq!(p.route(&host("github.com"), false).map(|u| u.port), Some(1));
    for direct in [
        "internal.corp",
        "a.b.internal.corp",
        "example.org",
        "x.example.org",
        "10.1.2.3",
        "::1",
    ] {
        assert!(p.route(&host(direct), true).is_none(), "{direct}");
    }
    for via in ["notinternal.corp", "internal.corp.evil.test", "11.0.0.1"] {
        assert!(p.route(&host(via), true).is_some(), "{via}");
    }
    assert!(parent(&["*"]).route(&host("github.com"), true).is_none());
}

/// A parent proxy that answers CONNECT with `status`, then echoes; returns its address and
/// the heads it received.
async fn fake_parent(status: u16) -> (SocketAddr, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = heads.clone();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            let log = log.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if s.read(&mut b).await.unwrap() == 0 {
                        return;
                    }
                    head.push(b[0]);
                }
                log.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&head).into_owned());
                s.write_all(format!("HTTP/1.1 {status} X\r\n\r\n").as_bytes())
                    .await
                    .unwrap();
                let mut buf = [0u8; 1024];
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => s.write_all(&buf[..n]).await.unwrap(),
                    }
                }
            });
        }
    });
    (addr, heads)
}

#[tokio::test]
async fn connect_via_sends_connect_with_credentials_and_returns_the_tunnel() {
    let (addr, heads) = fake_parent(200).await;
    let p = ParentUrl::parse("http", &format!("http://u:p@127.0.0.1:{}", addr.port())).unwrap();
    let mut s = connect_via(&p, addr, "only-the-parent-knows.test:443")
        .await
        .unwrap();
    s.write_all(b"hello").await.unwrap();
    let mut buf = [0u8; 5];
    s.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"hello");
    let head = heads.lock().unwrap()[0].clone();
    assert!(
        head.starts_with("CONNECT only-the-parent-knows.test:443 HTTP/1.1\r\n"),
        "{head}"
    );
    assert!(
        head.contains("Proxy-Authorization: Basic dTpw\r\n"),
        "{head}"
    );
}

#[tokio::test]
async fn a_parent_refusal_is_an_error() {
    let (addr, _) = fake_parent(403).await;
    let p = ParentUrl::parse("http", &format!("http://127.0.0.1:{}", addr.port())).unwrap();
    let err = connect_via(&p, addr, "x.test:443").await.unwrap_err();
    assert!(err.to_string().contains("403"), "{err}");
}

#[tokio::test]
async fn the_proxy_hands_allowed_tunnels_to_the_parent_without_resolving_the_name() {
    use crate::net::event::{MemorySink, Protocol};
    use crate::net::guard::{AddressGuard, GuardConfig};
    use crate::net::proxy::{Proxy, ProxyConfig};
    use crate::policy::settings::{NetworkSettings, SandboxSettings};
    let (addr, heads) = fake_parent(200).await;
    let policy = crate::policy::merge::test_policy(SandboxSettings {
        network: Some(NetworkSettings {
            allowed_domains: Some(vec!["*.corp-only.test".into()]),
            ..Default::default()
        }),
        ..Default::default()
    })
    .unwrap();
    let events = MemorySink::new();
    let proxy = Proxy::new(ProxyConfig {
        policy: crate::policy::live::LivePolicy::new(std::sync::Arc::new(policy)),
        // No nameserver, no hosts file: only the parent can know the name.
        resolver: crate::net::resolve::Resolver::with_nameservers(vec![], None).unwrap(),
        guard: AddressGuard::new(GuardConfig::default()),
        events: events.clone(),
        token: None,
        parent: Some(ParentProxy {
            http: None,
            https: Some(
                ParentUrl::parse("https", &format!("http://127.0.0.1:{}", addr.port())).unwrap(),
            ),
            no_proxy: vec![],
        }),
        approvals: None,
    });
    let mut opened = proxy
        .open(Protocol::Connect, "api.corp-only.test", 443)
        .await
        .map_err(|r| r.event.reason)
        .unwrap();
    opened.stream.write_all(b"ping").await.unwrap();
    let mut buf = [0u8; 4];
    opened.stream.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"ping");
    assert!(heads.lock().unwrap()[0].starts_with("CONNECT api.corp-only.test:443 "));
    // The policy still decides first: a name outside the list never reaches the parent.
    assert!(proxy
        .open(Protocol::Connect, "github.com", 443)
        .await
        .is_err());
    assert_eq!(heads.lock().unwrap().len(), 1);
}

#[test]
fn credentials_in_proxy_urls_are_redacted() {
    for (text, shown) in [
        ("http://u:s3cret@proxy:8080", "http://***@proxy:8080"),
        ("http://u@proxy", "http://***@proxy"),
        ("http://a@b:p@w@proxy/x@y", "http://***@proxy/x@y"),
        ("http://proxy:8080/a@b", "http://proxy:8080/a@b"),
        ("u:s3cret@proxy:99999", "***@proxy:99999"),
        ("http://proxy", "http://proxy"),
    ] {
        assert_eq!(redact_userinfo(text), shown, "{text}");
        assert_eq!(has_userinfo(text), text != shown, "{text}");
    }
    let err = ParentUrl::parse("http", "http://u:s3cret@proxy:99999").unwrap_err();
    assert!(!err.to_string().contains("s3cret"), "{err}");
}

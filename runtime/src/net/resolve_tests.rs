use super::*;
use hickory_resolver::proto::op::{Message, OpCode, ResponseCode};
use hickory_resolver::proto::rr::rdata::{A, AAAA};
use hickory_resolver::proto::rr::{RData, Record};
use std::io::Write;
use std::net::Ipv6Addr;

fn hosts_file(text: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(text.as_bytes()).unwrap();
    file.flush().unwrap();
    file
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

const HOSTS: &str = "\
# comment
127.0.0.1 localhost
192.0.2.1   both.test Alias.Test
2001:db8::1 both.test
192.0.2.1 both.test
192.0.2.2 v4only.test
2001:db8::3 v6only.test
";

#[tokio::test]
async fn hosts_file_names_resolve_ipv4_first_without_duplicates() {
    let file = hosts_file(HOSTS);
    let r = Resolver::with_nameservers(vec![], Some(file.path())).unwrap();
    assert_eq!(
        r.lookup("both.test").await.unwrap(),
        [ip("192.0.2.1"), ip("2001:db8::1")]
    );
    assert_eq!(r.lookup("ALIAS.test.").await.unwrap(), [ip("192.0.2.1")]);
    assert_eq!(r.lookup("v4only.test").await.unwrap(), [ip("192.0.2.2")]);
    assert_eq!(r.lookup("v6only.test").await.unwrap(), [ip("2001:db8::3")]);
    assert_eq!(
        r.lookup_family("both.test", Family::V6).await.unwrap(),
        [ip("2001:db8::1")]
    );
    // A listed name is answered from the file alone: the missing family has no records.
    assert_eq!(
        r.lookup_family("v4only.test", Family::V6).await,
        Err(ResolveError::NoRecords {
            name: "v4only.test".into(),
            family: Family::V6
        })
    );
}

#[tokio::test]
async fn hosts_file_changes_are_picked_up() {
    let mut file = hosts_file("192.0.2.1 one.test\n");
    let r = Resolver::with_nameservers(vec![], Some(file.path())).unwrap();
    assert_eq!(r.lookup("one.test").await.unwrap(), [ip("192.0.2.1")]);
    assert!(r.lookup("two.test").await.is_err());
    file.write_all(b"192.0.2.22 two.test\n").unwrap();
    file.flush().unwrap();
    assert_eq!(r.lookup("two.test").await.unwrap(), [ip("192.0.2.22")]);
}

#[tokio::test]
async fn ip_literals_are_returned_without_a_query() {
    let r = Resolver::with_nameservers(vec![], None).unwrap();
    assert_eq!(r.lookup("192.0.2.9").await.unwrap(), [ip("192.0.2.9")]);
    assert_eq!(r.lookup("127.1").await.unwrap(), [ip("127.0.0.1")]);
    assert_eq!(
        r.lookup("[2001:db8::9]").await.unwrap(),
        [ip("2001:db8::9")]
    );
    assert_eq!(r.lookup("::1").await.unwrap(), [ip("::1")]);
    assert!(matches!(
        r.lookup_family("192.0.2.9", Family::V6).await,
        Err(ResolveError::NoRecords { .. })
    ));
}

#[tokio::test]
async fn unknown_and_invalid_names_are_errors() {
    let file = hosts_file(HOSTS);
    let r = Resolver::with_nameservers(vec![], Some(file.path())).unwrap();
    let err = r.lookup("does-not-exist.invalid").await.unwrap_err();
    assert_eq!(
        err,
        ResolveError::NotFound {
            name: "does-not-exist.invalid".into()
        }
    );
    assert!(err.is_negative());
    for bad in ["", "a b", "x\0y", "bad..name", &"a".repeat(300)] {
        assert!(
            matches!(r.lookup(bad).await, Err(ResolveError::InvalidName { .. })),
            "{bad:?}"
        );
    }
}

#[test]
fn construction_works_outside_and_inside_a_current_thread_runtime() {
    let file = hosts_file(HOSTS);
    let outside = Resolver::with_nameservers(vec!["127.0.0.1:9".parse().unwrap()], None).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let inside =
            Resolver::with_nameservers(vec!["127.0.0.1:9".parse().unwrap()], Some(file.path()))
                .unwrap();
        assert_eq!(
            inside.lookup("v4only.test").await.unwrap(),
            [ip("192.0.2.2")]
        );
        let system = Resolver::from_system().unwrap();
        assert_eq!(system.lookup("192.0.2.5").await.unwrap(), [ip("192.0.2.5")]);
        assert_eq!(
            outside.lookup("192.0.2.5").await.unwrap(),
            [ip("192.0.2.5")]
        );
    });
}

#[tokio::test]
async fn a_missing_resolv_conf_falls_back_and_keeps_hosts_names() {
    let dir = tempfile::tempdir().unwrap();
    let file = hosts_file(HOSTS);
    let empty = dir.path().join("empty.conf");
    std::fs::write(&empty, "# no nameserver\noptions ndots:2\n").unwrap();
    for conf in [dir.path().join("missing.conf"), empty] {
        let r = Resolver::from_files(&conf, Some(file.path())).unwrap();
        assert_eq!(r.lookup("v4only.test").await.unwrap(), [ip("192.0.2.2")]);
    }
}

/// A tiny authoritative server: `www.test.` has A 192.0.2.7 and AAAA 2001:db8::7,
/// `v4.test.` only A 192.0.2.8 (AAAA: NOERROR, no answers), every other name NXDOMAIN.
async fn tiny_dns_server() -> SocketAddr {
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 1500];
        loop {
            let Ok((n, peer)) = socket.recv_from(&mut buf).await else {
                return;
            };
            let Ok(query) = Message::from_vec(&buf[..n]) else {
                continue;
            };
            let mut reply = Message::response(query.metadata.id, OpCode::Query);
            reply.metadata.recursion_desired = query.metadata.recursion_desired;
            reply.metadata.recursion_available = true;
            reply.add_queries(query.queries.clone());
            let Some(q) = query.queries.first() else {
                continue;
            };
            let name = q.name().to_ascii().to_ascii_lowercase();
            match (name.as_str(), q.query_type()) {
                ("www.test.", RecordType::A) => {
                    reply.add_answer(Record::from_rdata(
                        q.name().clone(),
                        60,
                        RData::A(A::from(Ipv4Addr::new(192, 0, 2, 7))),
                    ));
                }
                ("www.test.", RecordType::AAAA) => {
                    reply.add_answer(Record::from_rdata(
                        q.name().clone(),
                        60,
                        RData::AAAA(AAAA::from("2001:db8::7".parse::<Ipv6Addr>().unwrap())),
                    ));
                }
                ("v4.test.", RecordType::A) => {
                    reply.add_answer(Record::from_rdata(
                        q.name().clone(),
                        60,
                        RData::A(A::from(Ipv4Addr::new(192, 0, 2, 8))),
                    ));
                }
                ("v4.test.", _) => {}
                _ => reply.metadata.response_code = ResponseCode::NXDomain,
            }
            let bytes = reply.to_vec().unwrap();
            let _ = socket.send_to(&bytes, peer).await;
        }
    });
    addr
}

#[tokio::test]
async fn the_nameserver_path_answers_and_reports_nxdomain() {
    let server = tiny_dns_server().await;
    let r = Resolver::with_nameservers(vec![server], None).unwrap();
    assert_eq!(
        r.lookup("www.test").await.unwrap(),
        [ip("192.0.2.7"), ip("2001:db8::7")]
    );
    assert_eq!(r.lookup("V4.Test.").await.unwrap(), [ip("192.0.2.8")]);
    assert!(matches!(
        r.lookup_family("v4.test", Family::V6).await,
        Err(ResolveError::NoRecords { .. })
    ));
    assert_eq!(
        r.lookup("nope.test").await,
        Err(ResolveError::NotFound {
            name: "nope.test".into()
        })
    );
}

#[tokio::test]
async fn the_hosts_file_wins_over_the_nameserver() {
    let server = tiny_dns_server().await;
    let file = hosts_file("198.51.100.1 www.test\n");
    let r = Resolver::with_nameservers(vec![server], Some(file.path())).unwrap();
    assert_eq!(r.lookup("www.test").await.unwrap(), [ip("198.51.100.1")]);
    assert_eq!(r.lookup("v4.test").await.unwrap(), [ip("192.0.2.8")]);
}

#[tokio::test]
async fn a_silent_nameserver_times_out_within_the_limit() {
    // A bound socket that never answers.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let r = Resolver::with_nameservers(vec![silent.local_addr().unwrap()], None).unwrap();
    let started = std::time::Instant::now();
    let err = r.lookup("www.test").await.unwrap_err();
    assert!(started.elapsed() <= LOOKUP_TIMEOUT + Duration::from_secs(1));
    assert!(!err.is_negative(), "{err}");
}

#[test]
fn combining_prefers_addresses_then_nxdomain_then_failures() {
    let nx = || ResolveError::NotFound { name: "n".into() };
    let nodata = |family| ResolveError::NoRecords {
        name: "n".into(),
        family,
    };
    let failed = || ResolveError::Failed {
        name: "n".into(),
        message: "x".into(),
    };
    assert_eq!(
        combine("n", Ok(vec![ip("192.0.2.1")]), Err(failed())),
        Ok(vec![ip("192.0.2.1")])
    );
    assert_eq!(combine("n", Err(failed()), Err(nx())), Err(nx()));
    assert_eq!(
        combine("n", Err(nodata(Family::V4)), Err(failed())),
        Err(failed())
    );
    assert_eq!(
        combine("n", Err(nodata(Family::V4)), Err(nodata(Family::V6))),
        Err(nodata(Family::Any))
    );
}

use super::*;
use crate::net::event::MemorySink;
use crate::net::guard::GuardConfig;
use hickory_proto::rr::Name;
use std::io::Write;
use std::net::{Ipv4Addr, Ipv6Addr};

fn query_message(name: &str, record_type: RecordType) -> Message {
    let mut m = Message::query();
    m.metadata.id = 0x1234;
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), record_type));
    m
}

fn query(name: &str, record_type: RecordType) -> Vec<u8> {
    query_message(name, record_type).to_vec().unwrap()
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn allow_example(name: &str) -> bool {
    name == "example.com" || name.ends_with(".example.com")
}

fn resolved(name: &str, record_type: RecordType) -> Option<Vec<IpAddr>> {
    match (name, record_type) {
        ("example.com", RecordType::A) => Some(vec![ip("93.184.215.14"), ip("2001:db8::1")]),
        ("example.com", RecordType::AAAA) => Some(vec![ip("2001:db8::1")]),
        ("v4.example.com", RecordType::AAAA) => Some(vec![]),
        _ => None,
    }
}

fn reply(packet: &[u8]) -> Message {
    Message::from_vec(&answer(packet, &allow_example, &resolved).unwrap()).unwrap()
}

fn addresses(m: &Message) -> Vec<IpAddr> {
    m.answers.iter().filter_map(|r| r.data.ip_addr()).collect()
}

#[test]
fn a_name_the_policy_does_not_allow_is_refused() {
    let m = reply(&query("evil.test.", RecordType::A));
    assert_eq!(m.metadata.response_code, ResponseCode::Refused);
    assert!(m.answers.is_empty());
    assert_eq!(m.metadata.message_type, MessageType::Response);
}

#[test]
fn allowed_names_get_the_resolved_addresses_of_their_type() {
    let m = reply(&query("example.com.", RecordType::A));
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert_eq!(addresses(&m), [ip("93.184.215.14")]);
    assert!(m.answers.iter().all(|r| r.ttl == ANSWER_TTL));
    let m = reply(&query("example.com.", RecordType::AAAA));
    assert_eq!(addresses(&m), [ip("2001:db8::1")]);
}

#[test]
fn other_types_of_allowed_names_get_no_answers() {
    for rt in [
        RecordType::MX,
        RecordType::TXT,
        RecordType::HTTPS,
        RecordType::ANY,
    ] {
        let m = reply(&query("example.com.", rt));
        assert_eq!(m.metadata.response_code, ResponseCode::NoError, "{rt}");
        assert!(m.answers.is_empty(), "{rt}");
    }
    let m = reply(&query("evil.test.", RecordType::TXT));
    assert_eq!(m.metadata.response_code, ResponseCode::Refused);
}

#[test]
fn unknown_allowed_names_get_nxdomain_and_empty_families_nodata() {
    let m = reply(&query("nope.example.com.", RecordType::A));
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    let m = reply(&query("v4.example.com.", RecordType::AAAA));
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert!(m.answers.is_empty());
}

#[test]
fn id_question_and_rd_are_preserved_and_ra_is_set() {
    let mut q = query_message("WWW.Example.COM.", RecordType::A);
    q.metadata.id = 0xbeef;
    for rd in [true, false] {
        q.metadata.recursion_desired = rd;
        let m = reply(&q.to_vec().unwrap());
        assert_eq!(m.metadata.id, 0xbeef);
        assert_eq!(m.metadata.recursion_desired, rd);
        assert!(m.metadata.recursion_available);
        assert_eq!(m.queries, q.queries);
        // Case preserved as asked (0x20 clients compare it).
        assert_eq!(m.queries[0].name().to_ascii(), "WWW.Example.COM.");
        // The policy saw the canonical name: allowed, but nothing resolves it.
        assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    }
}

#[test]
fn the_policy_sees_lower_case_names_without_the_trailing_dot() {
    let seen = std::sync::Mutex::new(Vec::new());
    let decide = |name: &str| {
        seen.lock().unwrap().push(name.to_string());
        false
    };
    for name in ["Example.COM.", "example.com", "A.B.example.com."] {
        answer(&query(name, RecordType::A), &decide, &resolved).unwrap();
    }
    assert_eq!(
        *seen.lock().unwrap(),
        ["example.com", "example.com", "a.b.example.com"]
    );
}

#[test]
fn garbage_gets_formerr_when_the_header_is_readable_and_is_dropped_otherwise() {
    assert_eq!(answer(b"", &allow_example, &resolved), None);
    assert_eq!(answer(b"\x12\x34\x01", &allow_example, &resolved), None);
    // A header claiming one question, then garbage.
    let mut packet = vec![0xab, 0xcd, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    packet.extend_from_slice(b"\x07example\xff\xff");
    let m = Message::from_vec(&answer(&packet, &allow_example, &resolved).unwrap()).unwrap();
    assert_eq!(m.metadata.id, 0xabcd);
    assert_eq!(m.metadata.response_code, ResponseCode::FormErr);
    assert!(m.metadata.recursion_desired);
    // Responses are never answered.
    let mut response = query_message("example.com.", RecordType::A);
    response.metadata.message_type = MessageType::Response;
    assert_eq!(
        answer(&response.to_vec().unwrap(), &allow_example, &resolved),
        None
    );
}

#[test]
fn no_question_or_two_questions_is_formerr_and_other_opcodes_notimp() {
    let mut none = query_message("example.com.", RecordType::A);
    none.queries.clear();
    assert_eq!(
        reply(&none.to_vec().unwrap()).metadata.response_code,
        ResponseCode::FormErr
    );
    let mut two = query_message("example.com.", RecordType::A);
    two.add_query(Query::query(
        Name::from_ascii("example.com.").unwrap(),
        RecordType::AAAA,
    ));
    assert_eq!(
        reply(&two.to_vec().unwrap()).metadata.response_code,
        ResponseCode::FormErr
    );
    let mut status = query_message("example.com.", RecordType::A);
    status.metadata.op_code = OpCode::Status;
    assert_eq!(
        reply(&status.to_vec().unwrap()).metadata.response_code,
        ResponseCode::NotImp
    );
    let mut chaos = query_message("version.bind.", RecordType::TXT);
    chaos.queries[0].set_query_class(DNSClass::CH);
    assert_eq!(
        reply(&chaos.to_vec().unwrap()).metadata.response_code,
        ResponseCode::NotImp
    );
}

#[test]
fn large_udp_replies_are_truncated_unless_edns_allows_them() {
    let many: Vec<IpAddr> = (1..=60)
        .map(|i| IpAddr::V4(Ipv4Addr::new(192, 0, 2, i)))
        .collect();
    let resolved_many = |_: &str, _: RecordType| Some(many.clone());
    let plain = query("example.com.", RecordType::A);
    let m = Message::from_vec(&answer(&plain, &allow_example, &resolved_many).unwrap()).unwrap();
    assert!(m.metadata.truncation);
    assert!(m.answers.is_empty());
    assert_eq!(m.queries.len(), 1);

    let mut with_edns = query_message("example.com.", RecordType::A);
    let mut edns = Edns::new();
    edns.set_max_payload(4096);
    with_edns.set_edns(edns);
    let bytes = answer(&with_edns.to_vec().unwrap(), &allow_example, &resolved_many).unwrap();
    assert!(bytes.len() > CLASSIC_UDP_REPLY);
    let m = Message::from_vec(&bytes).unwrap();
    assert!(!m.metadata.truncation);
    assert_eq!(m.answers.len(), 60);
    assert_eq!(m.edns.as_ref().map(|e| e.max_payload()), Some(EDNS_PAYLOAD));

    // The same answer over TCP is not truncated.
    let Parsed::Question(q) = parse(&plain) else {
        panic!("not a question")
    };
    let bytes = q
        .respond(&Outcome::Answer(many.clone()), Transport::Tcp)
        .unwrap();
    assert_eq!(Message::from_vec(&bytes).unwrap().answers.len(), 60);
}

#[test]
fn an_unknown_edns_version_gets_badvers() {
    let mut q = query_message("example.com.", RecordType::A);
    let mut edns = Edns::new();
    edns.set_version(1);
    q.set_edns(edns);
    let m = reply(&q.to_vec().unwrap());
    // BADVERS and BADSIG share the value 16.
    assert_eq!(u16::from(m.metadata.response_code), 16);
    assert!(m.edns.is_some());
}

#[test]
fn servfail_is_encoded() {
    let Parsed::Question(q) = parse(&query("example.com.", RecordType::A)) else {
        panic!("not a question")
    };
    let m = Message::from_vec(&q.respond(&Outcome::ServFail, Transport::Udp).unwrap()).unwrap();
    assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
    assert_eq!(m.metadata.id, 0x1234);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn arbitrary_packets_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = answer(&bytes, &allow_example, &resolved);
        }

        #[test]
        fn mutated_queries_never_panic(index: usize, value: u8) {
            let mut packet = query("www.example.com.", RecordType::AAAA);
            let i = index % packet.len();
            packet[i] = value;
            let _ = answer(&packet, &allow_example, &resolved);
        }
    }
}

// ---- the async server ----

const HOSTS: &str = "\
192.0.2.10 www.allowed.test
2001:db8::10 www.allowed.test
127.0.0.1 rebind.allowed.test
192.0.2.11 mixed.allowed.test
169.254.169.254 mixed.allowed.test
192.0.2.12 blocked.test
";

fn decide(name: &str) -> Verdict {
    if name == "allowed.test" || name.ends_with(".allowed.test") {
        Verdict::allow(
            ReasonKind::DomainAllowed,
            format!("{name} is in allowedDomains"),
        )
    } else {
        Verdict::deny(
            ReasonKind::DomainNotAllowed,
            format!("{name} is not in allowedDomains"),
        )
    }
}

struct Server {
    addr: std::net::SocketAddr,
    tcp: std::net::SocketAddr,
    sink: Arc<MemorySink>,
    _hosts: tempfile::NamedTempFile,
}

async fn start_server() -> Server {
    let mut hosts = tempfile::NamedTempFile::new().unwrap();
    hosts.write_all(HOSTS.as_bytes()).unwrap();
    hosts.flush().unwrap();
    let resolver = Resolver::with_nameservers(vec![], Some(hosts.path())).unwrap();
    let guard = AddressGuard::new(GuardConfig::default());
    let sink = MemorySink::new();
    let handler = Arc::new(DnsHandler::new(
        Box::new(decide),
        resolver,
        guard,
        sink.clone(),
    ));
    let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = udp.local_addr().unwrap();
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let tcp_addr = tcp.local_addr().unwrap();
    tokio::spawn(serve_udp(udp, handler.clone()));
    tokio::spawn(serve_tcp(tcp, handler));
    Server {
        addr,
        tcp: tcp_addr,
        sink,
        _hosts: hosts,
    }
}

async fn ask_udp(server: std::net::SocketAddr, name: &str, record_type: RecordType) -> Message {
    let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    client
        .send_to(&query(name, record_type), server)
        .await
        .unwrap();
    let mut buf = [0u8; 4096];
    let (n, _) = tokio::time::timeout(Duration::from_secs(10), client.recv_from(&mut buf))
        .await
        .expect("no reply")
        .unwrap();
    Message::from_vec(&buf[..n]).unwrap()
}

#[tokio::test]
async fn the_udp_server_answers_allowed_names_and_records_events() {
    let server = start_server().await;

    let m = ask_udp(server.addr, "www.allowed.test.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert_eq!(m.metadata.id, 0x1234);
    assert_eq!(addresses(&m), [ip("192.0.2.10")]);

    let m = ask_udp(server.addr, "WWW.allowed.test.", RecordType::AAAA).await;
    assert_eq!(
        addresses(&m),
        [IpAddr::V6(Ipv6Addr::new(
            0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x10
        ))]
    );

    let m = ask_udp(server.addr, "blocked.test.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::Refused);

    let m = ask_udp(server.addr, "missing.allowed.test.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);

    // The guard: only refused addresses → REFUSED; refused ones are left out otherwise.
    let m = ask_udp(server.addr, "rebind.allowed.test.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::Refused);
    let m = ask_udp(server.addr, "mixed.allowed.test.", RecordType::A).await;
    assert_eq!(addresses(&m), [ip("192.0.2.11")]);

    let events = server.sink.events();
    let summary: Vec<(String, Decision, Stage)> = events
        .iter()
        .map(|e| (e.host.clone(), e.decision, e.stage))
        .collect();
    assert_eq!(
        summary,
        [
            (
                "www.allowed.test".to_string(),
                Decision::Allow,
                Stage::Policy
            ),
            (
                "www.allowed.test".to_string(),
                Decision::Allow,
                Stage::Policy
            ),
            ("blocked.test".to_string(), Decision::Deny, Stage::Policy),
            (
                "missing.allowed.test".to_string(),
                Decision::Deny,
                Stage::Upstream
            ),
            (
                "rebind.allowed.test".to_string(),
                Decision::Deny,
                Stage::Guard
            ),
            (
                "mixed.allowed.test".to_string(),
                Decision::Allow,
                Stage::Policy
            ),
        ]
    );
    assert!(events
        .iter()
        .all(|e| e.protocol == Protocol::Dns && e.port.is_none()));
    assert_eq!(events[0].address, Some(ip("192.0.2.10")));
    assert_eq!(events[2].kind, ReasonKind::DomainNotAllowed);
    assert!(
        events[4].reason.contains("127.0.0.1 is a loopback address"),
        "{}",
        events[4].reason
    );
    assert_eq!(server.sink.denied().len(), 3);
}

#[tokio::test]
async fn the_udp_server_survives_garbage() {
    let server = start_server().await;
    let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    client.send_to(b"\x00", server.addr).await.unwrap();
    client.send_to(&[0xff; 40], server.addr).await.unwrap();
    let m = ask_udp(server.addr, "www.allowed.test.", RecordType::A).await;
    assert_eq!(addresses(&m), [ip("192.0.2.10")]);
    // Garbage records no event.
    assert_eq!(server.sink.events().len(), 1);
}

#[tokio::test]
async fn the_tcp_server_answers_several_queries_per_connection() {
    let server = start_server().await;
    let mut stream = TcpStream::connect(server.tcp).await.unwrap();
    for (name, want) in [
        ("www.allowed.test.", ResponseCode::NoError),
        ("blocked.test.", ResponseCode::Refused),
        ("www.allowed.test.", ResponseCode::NoError),
    ] {
        let q = query(name, RecordType::A);
        let mut framed = (q.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&q);
        stream.write_all(&framed).await.unwrap();
        let mut prefix = [0u8; 2];
        stream.read_exact(&mut prefix).await.unwrap();
        let mut body = vec![0u8; usize::from(u16::from_be_bytes(prefix))];
        stream.read_exact(&mut body).await.unwrap();
        let m = Message::from_vec(&body).unwrap();
        assert_eq!(m.metadata.response_code, want, "{name}");
    }
    assert_eq!(server.sink.events().len(), 3);
}

use super::*;
use proptest::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn guard(allowed: &[&str], deny_private: bool, host: &[&str]) -> AddressGuard {
    AddressGuard::new(GuardConfig {
        allowed: allowed.iter().map(|n| n.parse().unwrap()).collect(),
        deny_private,
        host_addresses: host.iter().map(|h| ip(h)).collect(),
        ..GuardConfig::default()
    })
}

fn default_guard() -> AddressGuard {
    guard(&[], false, &[])
}

fn class_of(g: &AddressGuard, text: &str) -> Option<AddressClass> {
    g.check(ip(text)).err().map(|r| r.class)
}

fn class_of_on(g: &AddressGuard, text: &str, port: u16) -> Option<AddressClass> {
    g.check_port(ip(text), Some(port)).err().map(|r| r.class)
}

/// A `deniedDomains` entry for `net`, on `port` if given, named as it would be written.
fn denied_entry(net: &str, port: Option<u16>) -> DeniedNetwork {
    DeniedNetwork {
        net: net.parse().unwrap(),
        port,
        entry: match port {
            Some(port) => format!("{net}:{port}"),
            None => net.to_string(),
        },
        reason: None,
    }
}

/// Host addresses the test changes at will, counting how often the guard reads them.
struct FakeHost {
    addresses: Arc<Mutex<Vec<IpAddr>>>,
    reads: Arc<AtomicUsize>,
}

impl FakeHost {
    fn new(initial: &[&str]) -> FakeHost {
        FakeHost {
            addresses: Arc::new(Mutex::new(initial.iter().map(|a| ip(a)).collect())),
            reads: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn set(&self, now: &[&str]) {
        *self.addresses.lock().unwrap() = now.iter().map(|a| ip(a)).collect();
    }

    fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }

    /// A guard whose first reading is the current list, re-read after `refresh`.
    fn guard(&self, refresh: Duration) -> AddressGuard {
        let addresses = Arc::clone(&self.addresses);
        let reads = Arc::clone(&self.reads);
        let source = HostAddressSource::new(
            move || {
                reads.fetch_add(1, Ordering::SeqCst);
                addresses.lock().unwrap().clone()
            },
            refresh,
        );
        AddressGuard::new(GuardConfig {
            host_addresses: self.addresses.lock().unwrap().clone(),
            host_source: Some(source),
            ..GuardConfig::default()
        })
    }
}

fn mapped(v4: Ipv4Addr) -> Ipv6Addr {
    v4.to_ipv6_mapped()
}

fn compatible(v4: Ipv4Addr) -> Ipv6Addr {
    Ipv6Addr::from(u128::from(u32::from(v4)))
}

fn nat64(v4: Ipv4Addr) -> Ipv6Addr {
    Ipv6Addr::from((0x0064_ff9b_u128 << 96) | u128::from(u32::from(v4)))
}

fn nat64_local(v4: Ipv4Addr) -> Ipv6Addr {
    Ipv6Addr::from((0x0064_ff9b_0001_u128 << 80) | u128::from(u32::from(v4)))
}

fn six_to_four(v4: Ipv4Addr) -> Ipv6Addr {
    Ipv6Addr::from((0x2002_u128 << 112) | (u128::from(u32::from(v4)) << 80) | 1)
}

fn teredo(v4: Ipv4Addr) -> Ipv6Addr {
    // Server 65.54.227.120, flags 0x8000, port 0xf227.
    Ipv6Addr::from(
        (0x2001_0000_u128 << 96)
            | (0x4136_e378_u128 << 64)
            | (0x8000_u128 << 48)
            | (0xf227_u128 << 32)
            | u128::from(u32::from(v4) ^ 0xffff_ffff),
    )
}

#[test]
fn every_class_is_refused_by_default() {
    let g = guard(&[], false, &["192.0.2.10", "2001:db8::10"]);
    let cases = [
        ("127.0.0.1", AddressClass::Loopback),
        ("127.255.0.9", AddressClass::Loopback),
        ("::1", AddressClass::Loopback),
        ("0.0.0.0", AddressClass::Unspecified),
        ("0.1.2.3", AddressClass::Unspecified),
        ("::", AddressClass::Unspecified),
        ("169.254.1.1", AddressClass::LinkLocal),
        ("fe80::1", AddressClass::LinkLocal),
        ("febf::1", AddressClass::LinkLocal),
        ("169.254.169.254", AddressClass::CloudMetadata),
        ("169.254.170.2", AddressClass::CloudMetadata),
        ("fd00:ec2::254", AddressClass::CloudMetadata),
        ("100.100.100.200", AddressClass::CloudMetadata),
        ("168.63.129.16", AddressClass::CloudMetadata),
        ("224.0.0.1", AddressClass::Multicast),
        ("239.255.255.250", AddressClass::Multicast),
        ("ff02::1", AddressClass::Multicast),
        ("255.255.255.255", AddressClass::Broadcast),
        ("192.0.2.10", AddressClass::HostAddress),
        ("2001:db8::10", AddressClass::HostAddress),
        ("::ffff:192.0.2.10", AddressClass::HostAddress),
    ];
    for (text, class) in cases {
        assert_eq!(class_of(&g, text), Some(class), "{text}");
    }
}

#[test]
fn public_addresses_pass() {
    let g = guard(&[], true, &["192.0.2.10"]);
    for text in [
        "1.1.1.1",
        "8.8.8.8",
        "93.184.215.14",
        "172.32.0.1",
        "100.128.0.1",
        "192.0.2.11",
        "2606:4700:4700::1111",
        "2a00:1450:4001::200e",
        "::ffff:8.8.8.8",
        "64:ff9b::8.8.8.8",
    ] {
        assert_eq!(g.check(ip(text)), Ok(()), "{text}");
    }
}

#[test]
fn private_ranges_are_allowed_by_default_and_refused_with_deny_private() {
    let private = [
        "10.0.0.1",
        "10.255.255.255",
        "172.16.0.1",
        "172.31.255.1",
        "192.168.1.1",
        "100.64.0.1",
        "100.127.255.254",
        "fc00::1",
        "fd12:3456::1",
        "fec0::1",
        "::ffff:10.1.2.3",
        "64:ff9b::192.168.0.1",
    ];
    let open = default_guard();
    let strict = guard(&[], true, &[]);
    for text in private {
        assert_eq!(open.check(ip(text)), Ok(()), "{text}");
        assert_eq!(
            class_of(&strict, text),
            Some(AddressClass::Private),
            "{text}"
        );
    }
}

#[test]
fn a_private_host_address_is_refused_as_a_host_address_even_without_deny_private() {
    let g = guard(&[], false, &["10.0.0.5", "fd00::5"]);
    assert_eq!(class_of(&g, "10.0.0.5"), Some(AddressClass::HostAddress));
    assert_eq!(class_of(&g, "fd00::5"), Some(AddressClass::HostAddress));
    assert_eq!(g.check(ip("10.0.0.6")), Ok(()));
}

#[test]
fn every_spelling_of_loopback_and_metadata_is_refused() {
    let g = default_guard();
    for (v4, class) in [
        (Ipv4Addr::new(127, 0, 0, 1), AddressClass::Loopback),
        (
            Ipv4Addr::new(169, 254, 169, 254),
            AddressClass::CloudMetadata,
        ),
    ] {
        let spellings = [
            mapped(v4),
            compatible(v4),
            nat64(v4),
            nat64_local(v4),
            six_to_four(v4),
            teredo(v4),
            Ipv6Addr::from((0xffff_u128 << 48) | u128::from(u32::from(v4))),
        ];
        for v6 in spellings {
            assert_eq!(embedded_ipv4(v6), Some(v4), "{v6}");
            let refusal = g.check(IpAddr::V6(v6)).unwrap_err();
            assert_eq!(refusal.class, class, "{v6}");
            assert_eq!(refusal.address, IpAddr::V4(v4));
            assert_eq!(refusal.via, Some(IpAddr::V6(v6)));
        }
    }
}

#[test]
fn written_spellings_decode_as_documented() {
    let cases = [
        ("::ffff:127.0.0.1", "127.0.0.1"),
        ("::127.0.0.1", "127.0.0.1"),
        ("64:ff9b::7f00:1", "127.0.0.1"),
        ("64:ff9b:1::a9fe:a9fe", "169.254.169.254"),
        ("2002:7f00:1::", "127.0.0.1"),
        ("2002:a9fe:a9fe:1::1", "169.254.169.254"),
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", "127.0.0.1"),
    ];
    for (v6, v4) in cases {
        let v6: Ipv6Addr = v6.parse().unwrap();
        assert_eq!(embedded_ipv4(v6), Some(v4.parse().unwrap()), "{v6}");
    }
    for plain in [
        "::",
        "::1",
        "2001:db8::1",
        "2606:4700::1",
        "fe80::1",
        "2001:1::1",
    ] {
        assert_eq!(embedded_ipv4(plain.parse().unwrap()), None, "{plain}");
    }
}

#[test]
fn refusal_messages_name_the_class_and_the_spelling() {
    let g = default_guard();
    let r = g.check(ip("::ffff:127.0.0.1")).unwrap_err();
    assert_eq!(
        r.to_string(),
        "127.0.0.1 is a loopback address (via ::ffff:127.0.0.1)"
    );
    assert_eq!(
        g.check(ip("169.254.169.254")).unwrap_err().to_string(),
        "169.254.169.254 is a cloud metadata address"
    );
    assert_eq!(
        g.check(ip("::")).unwrap_err().to_string(),
        ":: is an unspecified address"
    );
    assert_eq!(
        serde_json::to_value(AddressClass::CloudMetadata).unwrap(),
        "cloud-metadata"
    );
    assert_eq!(AddressClass::HostAddress.to_string(), "host-address");
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["class"], "loopback");
    assert_eq!(json["via"], "::ffff:127.0.0.1");
}

#[test]
fn an_explicit_allow_lets_an_address_or_range_through() {
    let g = guard(
        &["127.0.0.1/32", "169.254.0.0/16", "::1/128", "10.0.0.0/8"],
        true,
        &["192.0.2.10"],
    );
    assert_eq!(g.check(ip("127.0.0.1")), Ok(()));
    assert_eq!(class_of(&g, "127.0.0.2"), Some(AddressClass::Loopback));
    assert_eq!(g.check(ip("169.254.169.254")), Ok(()));
    assert_eq!(g.check(ip("::1")), Ok(()));
    assert_eq!(g.check(ip("10.9.8.7")), Ok(()));
    assert_eq!(class_of(&g, "192.168.0.1"), Some(AddressClass::Private));
    // The embedded IPv4 is allowed in any spelling.
    assert_eq!(g.check(IpAddr::V6(mapped(Ipv4Addr::LOCALHOST))), Ok(()));
    assert_eq!(
        g.check(IpAddr::V6(six_to_four(Ipv4Addr::LOCALHOST))),
        Ok(())
    );
    assert_eq!(g.check(ip("64:ff9b::10.1.1.1")), Ok(()));
}

#[test]
fn an_allowed_host_address_passes() {
    let g = guard(&["192.0.2.10/32"], false, &["192.0.2.10"]);
    assert_eq!(g.check(ip("192.0.2.10")), Ok(()));
}

#[test]
fn an_ipv6_range_covering_mapped_addresses_allows_the_ipv4() {
    let g = guard(&["::ffff:127.0.0.0/104"], false, &[]);
    assert_eq!(g.check(ip("127.0.0.1")), Ok(()));
    assert_eq!(g.check(ip("::ffff:127.0.0.1")), Ok(()));
}

#[test]
fn a_broad_ipv6_allow_does_not_open_embedded_ipv4_spellings() {
    let g = guard(&["2000::/3", "fd00::/8"], false, &[]);
    assert_eq!(g.check(ip("2606:4700::1")), Ok(()));
    assert_eq!(g.check(ip("fd00:ec2::254")), Ok(()));
    assert_eq!(class_of(&g, "2002:7f00:1::"), Some(AddressClass::Loopback));
    assert_eq!(
        class_of(&g, "2001:0:4136:e378:8000:63bf:80ff:fffe"),
        Some(AddressClass::Loopback)
    );
    // Naming the exact address is an explicit allow of it.
    let exact = guard(&["2002:7f00:1::/128"], false, &[]);
    assert_eq!(exact.check(ip("2002:7f00:1::")), Ok(()));
}

#[test]
fn from_policy_takes_ip_entries_and_the_setting() {
    use crate::policy::decision::{Layer, Provenance};
    use crate::policy::fsview::MemFs;
    use crate::policy::merge::{Context, LayerInput, Policy};
    use crate::policy::settings::SandboxSettings;

    let settings: SandboxSettings = serde_json::from_str(
        r#"{
            "network": {"allowedDomains": ["example.com", "*.example.org", "127.0.0.1:8080",
                                           "10.0.0.0/8", "[::1]", "[fd00::/8]:443"]},
            "warden": {"network": {"denyPrivateAddresses": true}}
        }"#,
    )
    .unwrap();
    let layer = LayerInput {
        provenance: Provenance::new(Layer::User, 0, "test.json"),
        settings,
    };
    let context = Context {
        cwd: "/work".into(),
        home: "/home/u".into(),
        tmpdir: None,
        approver_attached: false,
        protected: Vec::new(),
    };
    let policy = Policy::build(&[layer], context, &MemFs::new()).unwrap();
    let config = GuardConfig::from_policy(&policy);
    let mut allowed: Vec<String> = config.allowed.iter().map(|n| n.to_string()).collect();
    allowed.sort();
    assert_eq!(allowed, ["10.0.0.0/8", "::1/128"]);
    let mut on_port: Vec<String> = config
        .allowed_on_port
        .iter()
        .map(|(n, p)| format!("{n} {p}"))
        .collect();
    on_port.sort();
    assert_eq!(on_port, ["127.0.0.1/32 8080", "fd00::/8 443"]);
    assert!(config.denied.is_empty());
    assert!(config.deny_private);
    let source = config.host_source.as_ref().unwrap();
    assert_eq!(source.refresh(), HostAddressSource::SYSTEM_REFRESH);
    let g = AddressGuard::new(GuardConfig {
        host_addresses: vec![],
        host_source: None,
        ..config
    });
    assert_eq!(g.check(ip("127.0.0.1")), Ok(()));
    assert_eq!(g.check_port(ip("127.0.0.1"), Some(8080)), Ok(()));
    assert_eq!(
        class_of_on(&g, "127.0.0.1", 80),
        Some(AddressClass::Loopback)
    );
    assert_eq!(class_of(&g, "192.168.1.1"), Some(AddressClass::Private));
}

#[test]
fn host_addresses_include_loopback() {
    let addresses = host_addresses();
    // Every Linux network namespace has `lo`; it may be down (no address) in a fresh one.
    if !addresses.is_empty() {
        assert!(addresses.iter().all(|a| match a {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().is_none(),
            IpAddr::V4(_) => true,
        }));
    }
    let mut dedup = addresses.clone();
    dedup.dedup();
    assert_eq!(dedup.len(), addresses.len());
}

#[test]
fn a_denied_range_refuses_resolved_addresses_that_would_pass() {
    let g = AddressGuard::new(GuardConfig {
        denied: vec![
            denied_entry("10.250.0.0/16", None),
            denied_entry("93.184.215.0/24", None),
        ],
        ..GuardConfig::default()
    });
    let refusal = g.check(ip("10.250.0.2")).unwrap_err();
    assert_eq!(refusal.class, AddressClass::Denied);
    assert_eq!(refusal.address, ip("10.250.0.2"));
    assert_eq!(refusal.via, None);
    assert_eq!(refusal.entry.as_deref(), Some("10.250.0.0/16"));
    assert_eq!(class_of(&g, "93.184.215.14"), Some(AddressClass::Denied));
    // Outside the entries, private and public addresses pass as before.
    assert_eq!(g.check(ip("10.251.0.2")), Ok(()));
    assert_eq!(g.check(ip("93.184.216.34")), Ok(()));
}

#[test]
fn a_denied_entry_beats_every_allow_entry() {
    let g = AddressGuard::new(GuardConfig {
        allowed: vec![
            "10.250.0.0/24".parse().unwrap(),
            "fd00::5/128".parse().unwrap(),
            "127.0.0.0/8".parse().unwrap(),
        ],
        allowed_on_port: vec![("10.250.0.2/32".parse().unwrap(), 443)],
        denied: vec![
            denied_entry("10.250.0.0/16", None),
            denied_entry("fd00::/8", None),
            denied_entry("127.0.0.1/32", None),
        ],
        ..GuardConfig::default()
    });
    assert_eq!(class_of(&g, "10.250.0.2"), Some(AddressClass::Denied));
    assert_eq!(
        class_of_on(&g, "10.250.0.2", 443),
        Some(AddressClass::Denied)
    );
    assert_eq!(class_of(&g, "fd00::5"), Some(AddressClass::Denied));
    assert_eq!(class_of(&g, "127.0.0.1"), Some(AddressClass::Denied));
    // The allow entries still lift the guard outside the denied entries.
    assert_eq!(g.check(ip("127.0.0.2")), Ok(()));
}

#[test]
fn every_spelling_of_a_denied_ipv4_is_refused() {
    let g = AddressGuard::new(GuardConfig {
        allowed: vec!["10.0.0.0/8".parse().unwrap()],
        denied: vec![denied_entry("10.250.0.0/16", None)],
        ..GuardConfig::default()
    });
    let v4 = Ipv4Addr::new(10, 250, 0, 2);
    for v6 in [
        mapped(v4),
        compatible(v4),
        nat64(v4),
        nat64_local(v4),
        six_to_four(v4),
        teredo(v4),
    ] {
        let refusal = g.check(IpAddr::V6(v6)).unwrap_err();
        assert_eq!(refusal.class, AddressClass::Denied, "{v6}");
        assert_eq!(refusal.address, IpAddr::V4(v4), "{v6}");
        assert_eq!(refusal.via, Some(IpAddr::V6(v6)), "{v6}");
    }
    // An IPv6 range over IPv4-mapped addresses denies the IPv4, as the policy matches it.
    let over_mapped = AddressGuard::new(GuardConfig {
        denied: vec![denied_entry("::ffff:10.250.0.0/112", None)],
        ..GuardConfig::default()
    });
    assert_eq!(
        class_of(&over_mapped, "10.250.0.2"),
        Some(AddressClass::Denied)
    );
    assert_eq!(over_mapped.check(ip("10.251.0.2")), Ok(()));
}

#[test]
fn a_denied_refusal_names_the_entry_and_its_reason() {
    let g = AddressGuard::new(GuardConfig {
        denied: vec![DeniedNetwork {
            reason: Some("lab network".into()),
            ..denied_entry("10.250.0.0/16", None)
        }],
        ..GuardConfig::default()
    });
    assert_eq!(
        g.check(ip("10.250.0.2")).unwrap_err().to_string(),
        r#"10.250.0.2 is in deniedDomains (entry "10.250.0.0/16"): lab network"#
    );
    let r = g.check(ip("::ffff:10.250.0.2")).unwrap_err();
    assert_eq!(
        r.to_string(),
        r#"10.250.0.2 is in deniedDomains (entry "10.250.0.0/16") (via ::ffff:10.250.0.2): lab network"#
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["class"], "denied");
    assert_eq!(json["entry"], "10.250.0.0/16");
    assert_eq!(json["reason"], "lab network");
    assert_eq!(AddressClass::Denied.to_string(), "denied");
    // Refusals by class carry neither.
    let plain = serde_json::to_value(default_guard().check(ip("127.0.0.1")).unwrap_err()).unwrap();
    assert!(plain.get("entry").is_none(), "{plain}");
    assert!(plain.get("reason").is_none(), "{plain}");
    assert_eq!(
        DeniedNetwork::new("10.0.0.0/8".parse().unwrap()).entry,
        "10.0.0.0/8"
    );
}

#[test]
fn a_port_scoped_deny_refuses_on_its_port_and_when_the_port_is_unknown() {
    let g = AddressGuard::new(GuardConfig {
        denied: vec![denied_entry("10.250.0.0/16", Some(25))],
        ..GuardConfig::default()
    });
    assert_eq!(
        class_of_on(&g, "10.250.0.2", 25),
        Some(AddressClass::Denied)
    );
    assert_eq!(g.check_port(ip("10.250.0.2"), Some(443)), Ok(()));
    let unknown = g.check(ip("10.250.0.2")).unwrap_err();
    assert_eq!(unknown.class, AddressClass::Denied);
    assert_eq!(unknown.entry.as_deref(), Some("10.250.0.0/16:25"));
}

#[test]
fn a_port_scoped_ip_allow_lifts_the_guard_only_on_its_port() {
    let g = AddressGuard::new(GuardConfig {
        allowed_on_port: vec![
            ("127.0.0.1/32".parse().unwrap(), 8080),
            ("2002:7f00:1::/128".parse().unwrap(), 443),
        ],
        ..GuardConfig::default()
    });
    assert_eq!(g.check_port(ip("127.0.0.1"), Some(8080)), Ok(()));
    assert_eq!(
        class_of_on(&g, "127.0.0.1", 22),
        Some(AddressClass::Loopback)
    );
    assert_eq!(g.check_port(ip("::ffff:127.0.0.1"), Some(8080)), Ok(()));
    assert_eq!(
        class_of_on(&g, "::ffff:127.0.0.1", 5432),
        Some(AddressClass::Loopback)
    );
    // The port unknown (the DNS stub): the entry lifts the guard, as before.
    assert_eq!(g.check(ip("127.0.0.1")), Ok(()));
    // An exact IPv6 entry with a port opens the IPv4 it carries on that port only.
    assert_eq!(g.check_port(ip("2002:7f00:1::"), Some(443)), Ok(()));
    assert_eq!(
        class_of_on(&g, "2002:7f00:1::", 80),
        Some(AddressClass::Loopback)
    );
}

#[test]
fn from_policy_denies_resolved_addresses_in_denied_ip_entries() {
    use crate::policy::settings::SandboxSettings;

    let settings: SandboxSettings = serde_json::from_str(
        r#"{
            "network": {
                "allowedDomains": ["*.rt.test", "10.250.0.0/24"],
                "deniedDomains": ["10.250.0.0/16", "[fd00::/8]:443", "evil.test"],
                "deniedDomainReasons": {"10.250.0.0/16": "lab network"}
            }
        }"#,
    )
    .unwrap();
    let policy = crate::policy::merge::test_policy(settings).unwrap();
    let config = GuardConfig::from_policy(&policy);
    let mut denied: Vec<(String, Option<u16>, String)> = config
        .denied
        .iter()
        .map(|d| (d.net.to_string(), d.port, d.entry.clone()))
        .collect();
    denied.sort();
    assert_eq!(
        denied,
        [
            (
                "10.250.0.0/16".to_string(),
                None,
                "10.250.0.0/16".to_string()
            ),
            (
                "fd00::/8".to_string(),
                Some(443_u16),
                "[fd00::/8]:443".to_string()
            ),
        ]
    );
    let g = AddressGuard::new(GuardConfig {
        host_addresses: vec![],
        host_source: None,
        ..config
    });
    // allowed.rt.test resolving to 10.250.0.2 is refused, whatever allows the address.
    let refusal = g.check_port(ip("10.250.0.2"), Some(80)).unwrap_err();
    assert_eq!(refusal.class, AddressClass::Denied);
    assert_eq!(
        refusal.to_string(),
        r#"10.250.0.2 is in deniedDomains (entry "10.250.0.0/16"): lab network"#
    );
    assert_eq!(class_of_on(&g, "fd00::1", 443), Some(AddressClass::Denied));
    assert_eq!(g.check_port(ip("fd00::1"), Some(80)), Ok(()));
    assert_eq!(g.check(ip("10.251.0.1")), Ok(()));
}

#[test]
fn an_address_the_host_gains_is_refused_after_the_refresh_interval() {
    let host = FakeHost::new(&["192.0.2.10"]);
    let g = host.guard(Duration::from_millis(20));
    assert_eq!(class_of(&g, "192.0.2.10"), Some(AddressClass::HostAddress));
    assert_eq!(g.check(ip("198.51.100.7")), Ok(()));
    // A VPN comes up and the old address goes away; one address is read IPv4-mapped.
    host.set(&["198.51.100.7", "::ffff:203.0.113.9"]);
    std::thread::sleep(Duration::from_millis(40));
    assert_eq!(
        class_of(&g, "198.51.100.7"),
        Some(AddressClass::HostAddress)
    );
    assert_eq!(class_of(&g, "203.0.113.9"), Some(AddressClass::HostAddress));
    assert_eq!(g.check(ip("192.0.2.10")), Ok(()));
    assert!(host.reads() >= 1);
    // Clones see the same addresses.
    assert!(g
        .clone()
        .current_host_addresses()
        .contains(&ip("203.0.113.9")));
}

#[test]
fn a_reading_is_reused_within_the_refresh_interval() {
    let host = FakeHost::new(&["192.0.2.10"]);
    let g = host.guard(Duration::from_secs(3600));
    host.set(&["198.51.100.7"]);
    for _ in 0..100 {
        assert_eq!(g.check(ip("198.51.100.7")), Ok(()));
    }
    assert_eq!(class_of(&g, "192.0.2.10"), Some(AddressClass::HostAddress));
    // The first reading is the configuration's; the source was never read.
    assert_eq!(host.reads(), 0);
}

#[test]
fn a_zero_refresh_interval_reads_the_host_on_every_decision() {
    let host = FakeHost::new(&[]);
    let g = host.guard(Duration::ZERO);
    assert_eq!(g.check(ip("198.51.100.7")), Ok(()));
    host.set(&["198.51.100.7"]);
    assert_eq!(
        class_of(&g, "198.51.100.7"),
        Some(AddressClass::HostAddress)
    );
    assert_eq!(host.reads(), 2);
    // A denied entry refuses without reading the host.
    let denied = AddressGuard::new(GuardConfig {
        denied: vec![denied_entry("198.51.100.0/24", None)],
        ..g.config().clone()
    });
    let before = host.reads();
    assert_eq!(
        class_of(&denied, "198.51.100.7"),
        Some(AddressClass::Denied)
    );
    assert_eq!(host.reads(), before);
}

/// Out of descriptors, `getifaddrs` fails: an unreadable moment must not count as "this host
/// has no addresses" (a red-team round reached a host-only service that way).
#[test]
fn an_unreadable_moment_keeps_the_last_reading_of_the_hosts_addresses() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let failing = Arc::new(AtomicBool::new(false));
    let f = failing.clone();
    let source = HostAddressSource::fallible(
        move || (!f.load(Ordering::SeqCst)).then(|| vec![ip("198.51.100.7")]),
        Duration::ZERO,
    );
    let g = AddressGuard::new(GuardConfig {
        host_addresses: vec![ip("198.51.100.7")],
        host_source: Some(source),
        ..GuardConfig::default()
    });
    assert_eq!(
        class_of(&g, "198.51.100.7"),
        Some(AddressClass::HostAddress)
    );
    failing.store(true, Ordering::SeqCst);
    for _ in 0..3 {
        assert_eq!(
            class_of(&g, "198.51.100.7"),
            Some(AddressClass::HostAddress)
        );
    }
}

#[test]
fn a_guard_without_a_source_keeps_its_host_addresses() {
    fn shared<T: Send + Sync>(_: &T) {}
    let g = guard(&[], false, &["192.0.2.10", "::ffff:192.0.2.11"]);
    shared(&g);
    assert_eq!(
        &*g.current_host_addresses(),
        &[ip("192.0.2.10"), ip("192.0.2.11")]
    );
    assert_eq!(g.config().host_source, None);
}

fn verdict(g: &AddressGuard, ip: IpAddr) -> Result<(), (IpAddr, AddressClass)> {
    g.check(ip).map_err(|r| (r.address, r.class))
}

proptest! {
    #[test]
    fn ipv6_spellings_get_the_verdict_of_the_ipv4_they_carry(
        raw: u32,
        deny_private: bool,
        allow_ten: bool,
    ) {
        let v4 = Ipv4Addr::from(raw);
        let allowed: &[&str] = if allow_ten { &["10.0.0.0/8", "127.0.0.0/8"] } else { &[] };
        let g = guard(allowed, deny_private, &["192.0.2.10", "10.0.0.5"]);
        let plain = verdict(&g, IpAddr::V4(v4));
        for v6 in [mapped(v4), nat64(v4), nat64_local(v4), six_to_four(v4), teredo(v4)] {
            prop_assert_eq!(embedded_ipv4(v6), Some(v4));
            prop_assert_eq!(verdict(&g, IpAddr::V6(v6)), plain, "{}", v6);
        }
    }

    #[test]
    fn check_never_panics(raw: u128, deny_private: bool) {
        let g = guard(&["2000::/3"], deny_private, &["::1"]);
        let _ = g.check(IpAddr::V6(Ipv6Addr::from(raw)));
        let _ = embedded_ipv4(Ipv6Addr::from(raw));
    }
}

#[test]
fn a_live_guard_follows_settings_changed_during_the_run() {
    use crate::policy::settings::SandboxSettings;
    let policy = |json: &str| {
        let settings: SandboxSettings = serde_json::from_str(json).unwrap();
        crate::policy::merge::test_policy(settings).unwrap()
    };
    let first = policy(r#"{"network": {"allowedDomains": ["*.rt.test"]}}"#);
    let config = GuardConfig {
        host_addresses: vec!["192.0.2.1".parse().unwrap()],
        host_source: None,
        ..GuardConfig::from_policy_rules(&first)
    };
    let live = crate::policy::live::LivePolicy::new(Arc::new(first));
    let guard = LiveGuard::following(AddressGuard::new(config), live.clone());
    let lab: IpAddr = "10.250.0.2".parse().unwrap();
    let lo: IpAddr = "127.0.0.1".parse().unwrap();
    assert!(guard.get().check_port(lab, Some(80)).is_ok());
    assert!(guard.get().check_port(lo, Some(80)).is_err());
    live.replace(policy(
        r#"{"network": {"allowedDomains": ["*.rt.test", "127.0.0.1"], "deniedDomains": ["10.250.0.0/16"]}}"#,
    ));
    let refusal = guard.get().check_port(lab, Some(80)).unwrap_err();
    assert_eq!(refusal.class, AddressClass::Denied);
    assert!(guard.get().check_port(lo, Some(80)).is_ok());
    // The host's addresses are still the guard's own reading.
    assert!(guard
        .get()
        .check_port("192.0.2.1".parse().unwrap(), Some(80))
        .is_err());
    // A fixed guard never changes.
    let fixed = LiveGuard::fixed(AddressGuard::new(GuardConfig::default()));
    assert!(fixed.get().check_port(lab, None).is_ok());
}

use super::*;
use proptest::prelude::*;

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

use super::*;
use crate::policy::decision::{Decision, Layer, RuleRef};
use crate::policy::settings::NetworkSettings;
use proptest::prelude::*;

fn name(s: &str) -> Host {
    Host::Name(s.to_string())
}

fn v4(s: &str) -> Host {
    Host::Ip(IpAddr::V4(s.parse().unwrap()))
}

fn v6(s: &str) -> Host {
    Host::Ip(IpAddr::V6(s.parse().unwrap()))
}

fn host(s: &str) -> Host {
    canonical_host(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

fn host_err(s: &str) -> HostError {
    match canonical_host(s) {
        Ok(h) => panic!("{s:?} unexpectedly canonicalised to {h:?}"),
        Err(e) => e,
    }
}

fn allow(text: &str) -> DomainPattern {
    DomainPattern::parse(text, ListKind::Allow).unwrap_or_else(|e| panic!("{e}"))
}

fn deny(text: &str) -> DomainPattern {
    DomainPattern::parse(text, ListKind::Deny).unwrap_or_else(|e| panic!("{e}"))
}

fn allow_err(text: &str) -> String {
    match DomainPattern::parse(text, ListKind::Allow) {
        Ok(p) => panic!("{text:?} unexpectedly parsed as {p:?}"),
        Err(e) => e.to_string(),
    }
}

fn deny_err(text: &str) -> String {
    match DomainPattern::parse(text, ListKind::Deny) {
        Ok(p) => panic!("{text:?} unexpectedly parsed as {p:?}"),
        Err(e) => e.to_string(),
    }
}

fn hits(pattern: &DomainPattern, h: &str, port: Option<u16>) -> bool {
    pattern.matches(&host(h), port)
}

fn prov() -> Provenance {
    Provenance::new(Layer::Project, 0, "/work/.warden/settings.json")
}

fn rules(denied: &[&str], allowed: &[&str]) -> DomainRules {
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    DomainRules {
        denied: parse_rules(&strings(denied), ListKind::Deny, &prov()).unwrap(),
        allowed: parse_rules(&strings(allowed), ListKind::Allow, &prov()).unwrap(),
        ..DomainRules::default()
    }
}

const SPELLINGS_127: &[&str] = &[
    "127.0.0.1",
    "127.1",
    "127.0.1",
    "2130706433",
    "0x7f.0.0.1",
    "0X7F.0.0.1",
    "0177.0.0.1",
    "0x7f000001",
    "0x7F000001",
    "017700000001",
    "127.0.0.1.",
    "127.000.000.001",
    "[::ffff:127.0.0.1]",
    "::ffff:127.0.0.1",
    "[::ffff:7f00:1]",
    "::FFFF:7F00:1",
    "[0:0:0:0:0:ffff:7f00:1]",
    "１２７.０.０.１",
];

const SPELLINGS_METADATA: &[&str] = &[
    "169.254.169.254",
    "169.254.43518",
    "2852039166",
    "0xa9fea9fe",
    "0xa9.0xfe.0xa9.0xfe",
    "0251.0376.0251.0376",
    "169.16689662",
    "169.254.169.254.",
    "[::ffff:169.254.169.254]",
    "[::ffff:a9fe:a9fe]",
    "::ffff:a9fe:a9fe",
];

// ---------------------------------------------------------------- canonical_host

#[test]
fn names_are_lowercased_and_lose_one_trailing_dot() {
    assert_eq!(host("Example.COM"), name("example.com"));
    assert_eq!(host("example.com."), name("example.com"));
    assert_eq!(host("EXAMPLE.com."), name("example.com"));
    assert_eq!(host("localhost"), name("localhost"));
    assert_eq!(host("_dmarc.example.com"), name("_dmarc.example.com"));
    assert_eq!(host("a-b.example.com"), name("a-b.example.com"));
    assert_eq!(host_err("example.com.."), HostError::EmptyLabel);
    assert_eq!(host_err(".example.com"), HostError::EmptyLabel);
    assert_eq!(host_err("a..example.com"), HostError::EmptyLabel);
    assert_eq!(host_err("."), HostError::Empty);
}

#[test]
fn idna_names_become_punycode() {
    assert_eq!(host("bücher.example"), name("xn--bcher-kva.example"));
    assert_eq!(host("BÜCHER.example"), name("xn--bcher-kva.example"));
    assert_eq!(host("xn--bcher-kva.example"), name("xn--bcher-kva.example"));
    assert_eq!(host("XN--BCHER-KVA.example"), name("xn--bcher-kva.example"));
    assert_eq!(host("bücher.example."), name("xn--bcher-kva.example"));
    // Full-width dots are mapped by UTS #46.
    assert_eq!(host("bücher。example"), name("xn--bcher-kva.example"));
}

#[test]
fn invalid_idna_is_refused() {
    assert_eq!(host_err("xn--a.example"), HostError::Idna);
    // Punycode that decodes to something UTS #46 disallows, or does not decode at all.
    for s in [
        "xn--.example",
        "xn--zz-.example",
        "xn--55qx5d\u{200d}.example",
        "a\u{0338}.xn--ls8h\u{FFFF}",
    ] {
        assert!(canonical_host(s).is_err(), "{s:?}");
    }
    assert_eq!(
        host_err("xn--a.example").to_string(),
        "host is not a valid internationalized domain name"
    );
}

#[test]
fn refusals_have_clear_messages() {
    let cases: &[(&str, HostError, &str)] = &[
        ("", HostError::Empty, "host is empty"),
        ("exa\0mple.com", HostError::Nul, "host contains a NUL byte"),
        (
            "example.com\r\n",
            HostError::LineBreak,
            "host contains a line break (CR or LF)",
        ),
        (
            "example.com\n",
            HostError::LineBreak,
            "host contains a line break (CR or LF)",
        ),
        (
            "exa%6dple.com",
            HostError::Percent,
            "host contains `%` (percent-encoding and IPv6 zone ids are not accepted)",
        ),
        (
            "[fe80::1%eth0]",
            HostError::Percent,
            "host contains `%` (percent-encoding and IPv6 zone ids are not accepted)",
        ),
        (
            "%31%32%37.0.0.1",
            HostError::Percent,
            "host contains `%` (percent-encoding and IPv6 zone ids are not accepted)",
        ),
        (
            "exa mple.com",
            HostError::Whitespace,
            "host contains whitespace",
        ),
        (
            "example.com\t",
            HostError::Whitespace,
            "host contains whitespace",
        ),
        (
            "example\u{3000}com",
            HostError::Whitespace,
            "host contains whitespace",
        ),
        (
            "user@example.com",
            HostError::Userinfo,
            "host contains `@` (user info is not accepted)",
        ),
        (
            "example.com/x",
            HostError::Slash,
            "host contains `/` (a URL or path is not a host)",
        ),
        (
            "example.com:443",
            HostError::UnexpectedPort,
            "host contains `:` (a port is not accepted here)",
        ),
        (
            "exa#mple.com",
            HostError::InvalidChar('#'),
            "host contains '#', which is not allowed in a host name",
        ),
        (
            "exa*mple.com",
            HostError::InvalidChar('*'),
            "host contains '*', which is not allowed in a host name",
        ),
        (
            "a\u{1}b",
            HostError::InvalidChar('\u{1}'),
            "host contains '\\u{1}', which is not allowed in a host name",
        ),
        (
            "[::1",
            HostError::Brackets,
            "brackets are only accepted around a whole IPv6 address",
        ),
        (
            "a[b]c",
            HostError::Brackets,
            "brackets are only accepted around a whole IPv6 address",
        ),
        (
            "[127.0.0.1]",
            HostError::InvalidIpv6,
            "host is not a valid IPv6 address",
        ),
        (
            "1::2::3",
            HostError::InvalidIpv6,
            "host is not a valid IPv6 address",
        ),
        (
            "256.0.0.1",
            HostError::InvalidIpv4,
            "host looks like an IPv4 address but is not a valid one",
        ),
        (
            "1.2.3.4.5",
            HostError::InvalidIpv4,
            "host looks like an IPv4 address but is not a valid one",
        ),
        (
            "example.123",
            HostError::InvalidIpv4,
            "host looks like an IPv4 address but is not a valid one",
        ),
        (
            "4294967296",
            HostError::InvalidIpv4,
            "host looks like an IPv4 address but is not a valid one",
        ),
    ];
    for (input, error, message) in cases {
        let got = host_err(input);
        assert_eq!(&got, error, "{input:?}");
        assert_eq!(got.to_string(), *message, "{input:?}");
    }
}

#[test]
fn unicode_lookalikes_of_forbidden_characters_are_refused() {
    // Full-width `@`, `/`, `%`, `:` and `#` map to their ASCII forms under UTS #46.
    for s in [
        "user\u{FF20}example.com",
        "example.com\u{FF0F}x",
        "exa\u{FF05}6dple.com",
        "example.com\u{FF1A}443",
        "exa\u{FF03}mple.com",
    ] {
        assert!(canonical_host(s).is_err(), "{s:?}");
    }
}

#[test]
fn length_limits() {
    let label63 = "a".repeat(63);
    let ok253 = format!("{label63}.{label63}.{label63}.{}", "b".repeat(61));
    assert_eq!(ok253.len(), 253);
    assert_eq!(host(&ok253), name(&ok253));
    assert_eq!(host(&format!("{ok253}.")), name(&ok253));
    let too_long = format!("{ok253}c");
    assert_eq!(host_err(&too_long), HostError::TooLong(254));
    assert_eq!(
        host_err(&too_long).to_string(),
        "host is 254 bytes long; the limit is 253"
    );
    assert_eq!(host_err(&format!("{too_long}.")), HostError::TooLong(254));
    assert_eq!(
        host(&format!("{label63}.com")),
        name(&format!("{label63}.com"))
    );
    let label64 = "a".repeat(64);
    assert_eq!(
        host_err(&format!("{label64}.com")),
        HostError::LabelTooLong(64)
    );
    assert_eq!(
        host_err(&format!("{label64}.com")).to_string(),
        "host has a label of 64 bytes; the limit is 63"
    );
    // Uppercase and IDNA inputs go through the slow path and are checked the same way.
    assert_eq!(
        host_err(&format!("A{label63}.com")),
        HostError::LabelTooLong(64)
    );
    // A label that only becomes too long once punycoded.
    let unicode = "ü".repeat(60);
    assert!(matches!(
        host_err(&format!("{unicode}.com")),
        HostError::LabelTooLong(_)
    ));
    // Huge inputs are refused before any IDNA work.
    assert_eq!(host_err(&"ü".repeat(1000)), HostError::TooLong(2000));
}

#[test]
fn every_ipv4_spelling_is_an_ip() {
    for s in SPELLINGS_127 {
        assert_eq!(host(s), v4("127.0.0.1"), "{s}");
    }
    for s in SPELLINGS_METADATA {
        assert_eq!(host(s), v4("169.254.169.254"), "{s}");
    }
    assert_eq!(host("0"), v4("0.0.0.0"));
    assert_eq!(host("10.1"), v4("10.0.0.1"));
    assert_eq!(host("255.255.255.255"), v4("255.255.255.255"));
}

#[test]
fn ipv6_forms() {
    assert_eq!(host("[::1]"), v6("::1"));
    assert_eq!(host("::1"), v6("::1"));
    assert_eq!(host("[0:0:0:0:0:0:0:1]"), v6("::1"));
    assert_eq!(host("[FD00::AB]"), v6("fd00::ab"));
    assert_eq!(host("fd00::ab").to_string(), "[fd00::ab]");
    assert_eq!(host("[::ffff:7f00:1]").to_string(), "127.0.0.1");
    // v4-compatible (deprecated) and NAT64 addresses are not v4-mapped: they stay IPv6.
    assert_eq!(host("::127.0.0.1"), v6("::7f00:1"));
}

#[test]
fn display_forms() {
    assert_eq!(name("example.com").to_string(), "example.com");
    assert_eq!(v4("10.0.0.1").to_string(), "10.0.0.1");
    assert_eq!(v6("::1").to_string(), "[::1]");
    assert_eq!(
        Host::from(IpAddr::V6("::ffff:1.2.3.4".parse().unwrap())),
        v4("1.2.3.4")
    );
    assert_eq!("Example.com".parse::<Host>().unwrap(), name("example.com"));
    assert_eq!(serde_json::to_string(&v6("::1")).unwrap(), "\"[::1]\"");
    assert_eq!(host("[::1]").as_name(), None);
    assert_eq!(host("a.b").as_name(), Some("a.b"));
    assert_eq!(host("[::1]").ip(), Some("::1".parse().unwrap()));
}

#[test]
fn fast_path_only_takes_canonical_names() {
    assert_eq!(fast_name("example.com"), Some("example.com"));
    assert_eq!(fast_name("example.com."), Some("example.com"));
    assert_eq!(fast_name("a1-b_c.d9"), Some("a1-b_c.d9"));
    for s in [
        "Example.com",
        "example.com..",
        "1.2.3.4",
        "example.0x1",
        "example.1",
        "xn--bcher-kva.example",
        "a.xn--p1ai",
        "bücher.example",
        "",
        ".",
        "a..b",
        "a b",
    ] {
        assert_eq!(fast_name(s), None, "{s:?}");
    }
}

// ---------------------------------------------------------------- parse_target

#[test]
fn targets() {
    assert_eq!(
        parse_target("example.com").unwrap(),
        (name("example.com"), None)
    );
    assert_eq!(
        parse_target("Example.com:443").unwrap(),
        (name("example.com"), Some(443))
    );
    assert_eq!(parse_target("[::1]:443").unwrap(), (v6("::1"), Some(443)));
    assert_eq!(parse_target("[::1]").unwrap(), (v6("::1"), None));
    assert_eq!(parse_target("::1").unwrap(), (v6("::1"), None));
    assert_eq!(
        parse_target("fd00::1:443").unwrap(),
        (v6("fd00::1:443"), None)
    );
    assert_eq!(
        parse_target("127.1:80").unwrap(),
        (v4("127.0.0.1"), Some(80))
    );
    assert_eq!(
        parse_target("[::ffff:127.0.0.1]:22").unwrap(),
        (v4("127.0.0.1"), Some(22))
    );
    assert_eq!(
        parse_target("example.com.:8080").unwrap(),
        (name("example.com"), Some(8080))
    );

    let err = |s: &str| parse_target(s).unwrap_err();
    assert_eq!(err("example.com:"), HostError::InvalidPort(String::new()));
    assert_eq!(err("example.com:0"), HostError::InvalidPort("0".into()));
    assert_eq!(
        err("example.com:65536"),
        HostError::InvalidPort("65536".into())
    );
    assert_eq!(err("example.com:+80"), HostError::InvalidPort("+80".into()));
    assert_eq!(
        err("example.com:http"),
        HostError::InvalidPort("http".into())
    );
    assert_eq!(
        err("example.com:http").to_string(),
        "invalid port \"http\": a port is a number from 1 to 65535"
    );
    assert_eq!(err("[::1]x"), HostError::Brackets);
    assert_eq!(err("[::1"), HostError::Brackets);
    assert_eq!(err("[example.com]:80"), HostError::InvalidIpv6);
    assert_eq!(err("user@example.com:80"), HostError::Userinfo);
    assert_eq!(err("example.com:80/path"), HostError::Slash);
    assert_eq!(err("[fe80::1%25eth0]:80"), HostError::Percent);
    assert_eq!(err(""), HostError::Empty);
    assert_eq!(err(":80"), HostError::Empty);
}

// ---------------------------------------------------------------- patterns

#[test]
fn exact_patterns_match_only_that_host() {
    let p = allow("example.com");
    assert!(hits(&p, "example.com", None));
    assert!(hits(&p, "EXAMPLE.com.", Some(443)));
    assert!(!hits(&p, "www.example.com", None));
    assert!(!hits(&p, "example.com.evil.test", None));
    assert!(!hits(&p, "notexample.com", None));
    assert!(!hits(&p, "example.co", None));
    assert_eq!(allow("Example.COM."), p);
}

#[test]
fn wildcard_patterns_match_subdomains_at_any_depth_not_the_apex() {
    let p = allow("*.example.com");
    assert!(hits(&p, "a.example.com", None));
    assert!(hits(&p, "a.b.c.example.com", Some(80)));
    assert!(hits(&p, "A.Example.Com.", None));
    assert!(!hits(&p, "example.com", None));
    assert!(!hits(&p, "badexample.com", None));
    assert!(!hits(&p, "a.example.com.evil.test", None));
    assert!(p.is_wildcard());
    assert!(!p.is_any());
    assert_eq!(allow("*.EXAMPLE.com."), p);
}

#[test]
fn ports_restrict_patterns() {
    let p = allow("example.com:443");
    assert!(hits(&p, "example.com", Some(443)));
    assert!(!hits(&p, "example.com", Some(80)));
    // Unknown port: an allow pattern with a port does not match...
    assert!(!hits(&p, "example.com", None));
    assert_eq!(p.port(), Some(443));
    let w = allow("*.example.com:8443");
    assert!(hits(&w, "api.example.com", Some(8443)));
    assert!(!hits(&w, "api.example.com", Some(443)));
    // ...a deny pattern with a port does.
    let d = deny("example.com:443");
    assert!(hits(&d, "example.com", None));
    assert!(hits(&d, "example.com", Some(443)));
    assert!(!hits(&d, "example.com", Some(80)));
    // No port: any port.
    assert!(hits(&allow("example.com"), "example.com", Some(1)));
    let v6p = allow("[::1]:8080");
    assert!(hits(&v6p, "[::1]", Some(8080)));
    assert!(hits(&v6p, "::1", Some(8080)));
    assert!(!hits(&v6p, "::1", Some(8081)));
    assert!(hits(&allow("127.0.0.1:22"), "0x7f.1", Some(22)));
}

#[test]
fn ip_literal_patterns_in_any_spelling() {
    for spelling in SPELLINGS_127 {
        let p = deny(spelling);
        for h in SPELLINGS_127 {
            assert!(hits(&p, h, Some(80)), "{spelling} vs {h}");
        }
        assert!(!hits(&p, "127.0.0.2", None));
        assert!(!hits(&p, "localhost", None));
    }
    let p = allow("[::1]");
    assert!(hits(&p, "::1", None));
    assert!(hits(&p, "[0::1]", None));
    assert!(!hits(&p, "127.0.0.1", None));
    assert_eq!(allow("::1"), p);
}

#[test]
fn cidr_patterns() {
    let p = deny("127.0.0.0/8");
    for h in SPELLINGS_127 {
        assert!(hits(&p, h, None), "{h}");
    }
    assert!(hits(&p, "127.255.255.255", None));
    assert!(!hits(&p, "128.0.0.1", None));
    assert!(!hits(&p, "::1", None));
    assert!(!hits(&p, "example.com", None));

    let p = deny("169.254.0.0/16");
    for h in SPELLINGS_METADATA {
        assert!(hits(&p, h, None), "{h}");
    }

    let p = allow("10.0.0.0/8:443");
    assert!(hits(&p, "10.1.2.3", Some(443)));
    assert!(!hits(&p, "10.1.2.3", Some(80)));

    let p = allow("fd00::/8");
    assert!(hits(&p, "[fd12::1]", None));
    assert!(!hits(&p, "[fe80::1]", None));
    assert_eq!(allow("[fd00::/8]"), p);
    let p = allow("[fd00::/8]:443");
    assert!(hits(&p, "fd00::1", Some(443)));
    assert!(!hits(&p, "fd00::1", Some(444)));

    // A v6 range over the v4-mapped space matches the (normalised) v4 hosts.
    let p = deny("::ffff:0:0/96");
    assert!(hits(&p, "127.0.0.1", None));
    assert!(hits(&p, "[::ffff:10.0.0.1]", None));
    assert_eq!(p.to_string(), "0.0.0.0/0");
    let p = deny("[::ffff:7f00:0/104]");
    assert_eq!(p.to_string(), "127.0.0.0/8");
    assert!(hits(&p, "127.1", None));
    let p = deny("::/0");
    assert!(hits(&p, "1.2.3.4", None));
    assert!(hits(&p, "::1", None));
    // Other spellings of the network address are canonicalised too.
    assert_eq!(deny("0x0a.0.0.0/8"), deny("10.0.0.0/8"));
}

#[test]
fn cidr_errors() {
    assert_eq!(
        deny_err("10.0.0.1/8"),
        "\"10.0.0.1/8\" in deniedDomains is not a valid CIDR range: the address has bits set past the /8 prefix (the range is 10.0.0.0/8)"
    );
    assert_eq!(
        deny_err("10/8"),
        "\"10/8\" in deniedDomains is not a valid CIDR range: the address has bits set past the /8 prefix (the range is 0.0.0.0/8)"
    );
    assert_eq!(
        deny_err("10.0.0.0/33"),
        "\"10.0.0.0/33\" in deniedDomains is not a valid CIDR range: prefix length 33 exceeds 32"
    );
    assert_eq!(
        deny_err("fd00::/129"),
        "\"fd00::/129\" in deniedDomains is not a valid CIDR range: prefix length 129 exceeds 128"
    );
    assert_eq!(
        deny_err("10.0.0.0/x"),
        "\"10.0.0.0/x\" in deniedDomains is not a valid CIDR range: \"x\" is not a prefix length"
    );
    assert_eq!(
        deny_err("10.0.0.0/"),
        "\"10.0.0.0/\" in deniedDomains is not a valid CIDR range: \"\" is not a prefix length"
    );
    assert_eq!(
        deny_err("example.com/8"),
        "\"example.com/8\" in deniedDomains is not a valid CIDR range: \"example.com\" is not an IP address"
    );
    assert_eq!(
        allow_err("0.0.0.0/0"),
        "\"0.0.0.0/0\" in allowedDomains matches every address; a /0 range is only accepted in deniedDomains"
    );
    assert!(allow_err("::/0").contains("matches every address"));
    assert_eq!(deny("0.0.0.0/0").to_string(), "0.0.0.0/0");
    // A port on an unbracketed v6 range cannot be written.
    assert!(deny_err("fd00::/8:443").contains("not a valid CIDR range"));
}

#[test]
fn wildcards_never_match_ip_literals() {
    // `*.0.1` would be "every name ending in .0.1", but `0.1` is an IPv4 address.
    assert!(deny_err("*.0.1").contains("puts a wildcard in front of an IP address"));
    let p = deny("*.a0.1a");
    assert!(!p.matches(&v4("127.0.0.1"), None));
    assert!(!p.matches(&v6("::1"), None));
    assert!(deny_err("*.127.0.0.1").contains("puts a wildcard in front of an IP address"));
    assert!(deny_err("*.1").contains("puts a wildcard in front of an IP address"));
    assert!(deny_err("*.[::1]").contains("wildcard"));
}

#[test]
fn star_is_deny_only_and_matches_everything() {
    let p = deny("*");
    assert!(p.is_any());
    for h in ["example.com", "127.0.0.1", "[::1]", "xn--bcher-kva.example"] {
        assert!(hits(&p, h, None), "{h}");
    }
    assert_eq!(
        allow_err("*"),
        "\"*\" in allowedDomains matches every host; `*` alone is only accepted in deniedDomains"
    );
    let p = deny("*:25");
    assert!(hits(&p, "mail.example.com", Some(25)));
    assert!(!hits(&p, "mail.example.com", Some(587)));
}

#[test]
fn misplaced_stars_are_refused() {
    for text in [
        "ex*ample.com",
        "*example.com",
        "example.*",
        "*.*.example.com",
        "**.example.com",
        "www.*.com",
    ] {
        let message = "uses `*` other than as a leading `*.`";
        assert_eq!(
            allow_err(text),
            format!("{text:?} in allowedDomains {message}")
        );
        assert_eq!(
            deny_err(text),
            format!("{text:?} in deniedDomains {message}")
        );
    }
}

#[test]
fn public_suffix_wildcards_are_refused_in_allowed_domains() {
    for text in [
        "*.com",
        "*.co.uk",
        "*.COM.",
        "*.com:443",
        "*.arpa",
        "*.home.arpa",
        "*.foo.kawasaki.jp",
    ] {
        assert_eq!(
            allow_err(text),
            format!("{text:?} in allowedDomains matches a whole public suffix")
        );
    }
    assert_eq!(
        allow_err("*.com"),
        "\"*.com\" in allowedDomains matches a whole public suffix"
    );
    // Fine in the deny list.
    assert!(hits(&deny("*.com"), "evil.com", None));
    assert!(hits(&deny("*.co.uk"), "evil.co.uk", None));
    // Not ICANN suffixes.
    allow("*.example.com");
    allow("*.bbc.co.uk");
    allow("*.npmjs.org");
    allow("*.internal");
    allow("*.allowed.test");
    // Private-section suffixes are accepted on purpose (see DomainPattern's documentation).
    assert!(hits(&allow("*.github.io"), "octocat.github.io", None));
    allow("*.githubusercontent.com");
    allow("*.googleapis.com");

    assert!(is_icann_suffix("com"));
    assert!(is_icann_suffix("co.uk"));
    assert!(!is_icann_suffix("github.io"));
    assert!(!is_icann_suffix("example.com"));
    assert!(is_public_suffix("com"));
    assert!(is_public_suffix("co.uk"));
    assert!(is_public_suffix("github.io"));
    assert!(is_public_suffix("githubusercontent.com"));
    assert!(!is_public_suffix("example.com"));
    assert!(!is_public_suffix("internal"));
    assert!(!is_public_suffix("a.b.co.uk"));
}

#[test]
fn other_pattern_errors() {
    assert_eq!(allow_err(""), "\"\" in allowedDomains is empty");
    assert_eq!(
        allow_err("example.com:0"),
        "\"example.com:0\" in allowedDomains has an invalid port \"0\" (a port is a number from 1 to 65535)"
    );
    assert!(allow_err("example.com:").contains("invalid port \"\""));
    assert!(allow_err("example.com:99999").contains("invalid port"));
    assert_eq!(
        allow_err("exa mple.com"),
        "\"exa mple.com\" in allowedDomains is not a valid host: host contains whitespace"
    );
    assert_eq!(
        allow_err("https://example.com"),
        "\"https://example.com\" in allowedDomains has an invalid port \"//example.com\" (a port is a number from 1 to 65535)"
    );
    assert_eq!(
        allow_err("[::1"),
        "\"[::1\" in allowedDomains has unbalanced brackets (brackets go around a whole IPv6 address or range)"
    );
    assert!(allow_err("[::1]443").contains("unbalanced brackets"));
    assert!(allow_err("[example.com]").contains("not a valid IPv6 address"));
    assert!(allow_err("xn--a.example").contains("not a valid internationalized domain name"));
    assert!(allow_err("user@example.com").contains("user info"));
    assert!(allow_err("example.com\n").contains("line break"));
    let e = DomainPattern::parse("*.com", ListKind::Allow).unwrap_err();
    assert_eq!(e.entry, "*.com");
    assert_eq!(e.list, ListKind::Allow);
    assert_eq!(e.problem, PatternProblem::PublicSuffix);
}

#[test]
fn idna_patterns_match_unicode_and_punycode_hosts() {
    for pattern in ["bücher.example", "xn--bcher-kva.example", "BÜCHER.example."] {
        let p = allow(pattern);
        assert!(hits(&p, "bücher.example", None), "{pattern}");
        assert!(hits(&p, "xn--bcher-kva.example", None), "{pattern}");
        assert!(hits(&p, "XN--BCHER-KVA.EXAMPLE", None), "{pattern}");
        assert!(!hits(&p, "bucher.example", None), "{pattern}");
    }
    let w = allow("*.bücher.example");
    assert!(hits(&w, "www.xn--bcher-kva.example", None));
    assert!(hits(&w, "www.bücher.example", None));
    assert_eq!(w.to_string(), "*.xn--bcher-kva.example");
}

#[test]
fn patterns_display_canonically_and_round_trip() {
    let cases = [
        ("Example.com.", "example.com"),
        ("*.Example.com:8443", "*.example.com:8443"),
        ("0x7f.1", "127.0.0.1"),
        ("0x7f.1:80", "127.0.0.1:80"),
        ("::1", "[::1]"),
        ("[::1]:8080", "[::1]:8080"),
        ("[::ffff:127.0.0.1]", "127.0.0.1"),
        ("10.0.0.0/8", "10.0.0.0/8"),
        ("10.0.0.0/8:443", "10.0.0.0/8:443"),
        ("FD00::/8", "[fd00::/8]"),
        ("[fd00::/8]:443", "[fd00::/8]:443"),
    ];
    for (input, display) in cases {
        let p = allow(input);
        assert_eq!(p.to_string(), display, "{input}");
        assert_eq!(allow(&p.to_string()), p, "{input}");
        assert_eq!(p.list(), ListKind::Allow);
    }
    assert_eq!(deny("*").to_string(), "*");
    assert_eq!(deny("*:443").to_string(), "*:443");
}

// ---------------------------------------------------------------- decide

#[test]
fn invalid_hosts_are_denied_and_not_approvable() {
    let r = DomainRules {
        unrestricted: true,
        ..rules(&[], &["*.example.com"])
    };
    let v = r.decide("exa mple.com", Some(443), true);
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.kind, ReasonKind::InvalidHost);
    assert_eq!(
        v.reason,
        "invalid host \"exa mple.com\": host contains whitespace"
    );
    assert_eq!(v.rule, None);
    let v = r.decide("a.example.com\r\nX-Evil: 1", None, true);
    assert_eq!(
        v.reason,
        "invalid host \"a.example.com\\r\\nX-Evil: 1\": host contains a line break (CR or LF)"
    );
    let v = r.decide(&format!("{}.example.com", "a".repeat(300)), None, true);
    assert_eq!(v.kind, ReasonKind::InvalidHost);
    assert_eq!(
        v.reason,
        format!(
            "invalid host \"{}…\": host is 312 bytes long; the limit is 253",
            "a".repeat(64)
        )
    );
    assert_eq!(
        r.decide("", None, true).reason,
        "invalid host \"\": host is empty"
    );
}

#[test]
fn denied_wins_with_its_reason_text() {
    let mut r = rules(
        &["*.bad.allowed.test", "evil.test"],
        &["*.allowed.test", "evil.test"],
    );
    r.denied_reasons.insert(
        "*.bad.allowed.test".into(),
        "known exfiltration endpoint".into(),
    );
    let v = r.decide("x.bad.allowed.test", Some(443), true);
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.kind, ReasonKind::DomainDenied);
    assert_eq!(
        v.reason,
        "x.bad.allowed.test:443 is in deniedDomains: known exfiltration endpoint"
    );
    assert_eq!(
        v.rule,
        Some(RuleRef {
            list: "network.deniedDomains".into(),
            entry: "*.bad.allowed.test".into(),
            provenance: prov(),
        })
    );
    let v = r.decide("EVIL.test.", None, true);
    assert_eq!(v.kind, ReasonKind::DomainDenied);
    assert_eq!(v.reason, "evil.test is in deniedDomains");
    assert_eq!(&*v.rule.unwrap().entry, "evil.test");
    // The sibling is still allowed.
    let v = r.decide("ok.allowed.test", Some(443), true);
    assert_eq!(v.decision, Decision::Allow);
    assert_eq!(v.kind, ReasonKind::DomainAllowed);
    assert_eq!(v.reason, "ok.allowed.test:443 is in allowedDomains");
    assert_eq!(
        v.rule,
        Some(RuleRef {
            list: "network.allowedDomains".into(),
            entry: "*.allowed.test".into(),
            provenance: prov(),
        })
    );
    // The apex of a denied wildcard is not denied by it.
    let v = r.decide("bad.allowed.test", None, true);
    assert_eq!(v.kind, ReasonKind::DomainAllowed);
}

#[test]
fn first_matching_rule_is_reported() {
    let r = rules(
        &["*.example.com", "a.example.com"],
        &["a.example.com", "*.example.com"],
    );
    assert_eq!(
        &*r.decide("a.example.com", None, false).rule.unwrap().entry,
        "*.example.com"
    );
    let r = rules(&[], &["a.example.com", "*.example.com"]);
    assert_eq!(
        &*r.decide("a.example.com", None, false).rule.unwrap().entry,
        "a.example.com"
    );
}

#[test]
fn fallthrough_order_unrestricted_ask_deny() {
    let base = rules(&["evil.test"], &["good.test"]);

    let unrestricted = DomainRules {
        unrestricted: true,
        strict_allowlist: true,
        ..base.clone()
    };
    let v = unrestricted.decide("example.org", Some(80), false);
    assert_eq!(v.decision, Decision::Allow);
    assert_eq!(v.kind, ReasonKind::NetworkUnrestricted);
    assert_eq!(v.reason, "example.org:80: network access is unrestricted");
    assert_eq!(v.rule, None);
    assert_eq!(
        unrestricted.decide("evil.test", None, false).kind,
        ReasonKind::DomainDenied
    );
    assert_eq!(
        unrestricted.decide("good.test", None, false).kind,
        ReasonKind::DomainAllowed
    );

    let v = base.decide("example.org", None, true);
    assert_eq!(v.decision, Decision::RequiresApproval);
    assert_eq!(v.kind, ReasonKind::DomainAsk);
    assert_eq!(
        v.reason,
        "example.org is not in allowedDomains; approval required"
    );
    assert_eq!(v.rule, None);

    let v = base.decide("example.org", None, false);
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.kind, ReasonKind::DomainNotAllowed);
    assert_eq!(v.reason, "example.org is not in allowedDomains");

    let strict = DomainRules {
        strict_allowlist: true,
        ..base.clone()
    };
    for approver in [true, false] {
        let v = strict.decide("example.org", None, approver);
        assert_eq!(v.decision, Decision::Deny);
        assert_eq!(v.kind, ReasonKind::DomainNotAllowed);
        assert_eq!(
            v.reason,
            "example.org is not in allowedDomains (strictAllowlist)"
        );
    }
    let v = strict.decide("[::1]", Some(8080), false);
    assert_eq!(
        v.reason,
        "[::1]:8080 is not in allowedDomains (strictAllowlist)"
    );
    let v = strict.decide("0x7f.1", None, false);
    assert_eq!(
        v.reason,
        "127.0.0.1 is not in allowedDomains (strictAllowlist)"
    );
    let v = strict.decide("bücher.example", None, false);
    assert_eq!(
        v.reason,
        "xn--bcher-kva.example is not in allowedDomains (strictAllowlist)"
    );
}

#[test]
fn empty_rules() {
    let r = DomainRules::default();
    assert_eq!(
        r.decide("example.com", None, true).kind,
        ReasonKind::DomainAsk
    );
    assert_eq!(
        r.decide("example.com", None, false).kind,
        ReasonKind::DomainNotAllowed
    );
}

#[test]
fn suffix_confusion() {
    let r = rules(&[], &["allowed.test"]);
    assert_eq!(
        r.decide("allowed.test", None, false).decision,
        Decision::Allow
    );
    for h in [
        "evilallowed.test",
        "allowed.test.evil.test",
        "allowed.testx",
        "x.allowed.test",
        "allowed.tes",
        "allowed-test",
        "allowed.test..",
    ] {
        assert_ne!(r.decide(h, None, false).decision, Decision::Allow, "{h}");
    }
    for h in ["ALLOWED.TEST", "allowed.test.", "Allowed.Test."] {
        let v = r.decide(h, Some(443), false);
        assert_eq!(v.decision, Decision::Allow, "{h}");
        assert_eq!(v.reason, "allowed.test:443 is in allowedDomains");
    }

    let r = rules(&[], &["*.allowed.test"]);
    assert_eq!(
        r.decide("a.allowed.test", None, false).decision,
        Decision::Allow
    );
    for h in [
        "allowed.test",
        "evilallowed.test",
        "a.allowed.test.evil.test",
        "aallowed.test",
    ] {
        assert_ne!(r.decide(h, None, false).decision, Decision::Allow, "{h}");
    }

    let r = rules(&["*.bad.allowed.test"], &["*.allowed.test"]);
    assert_eq!(
        r.decide("x.bad.allowed.test", None, false).decision,
        Decision::Deny
    );
    assert_eq!(
        r.decide("X.BAD.allowed.test.", Some(443), false).decision,
        Decision::Deny
    );
    assert_eq!(
        r.decide("x.y.bad.allowed.test", Some(443), false).decision,
        Decision::Deny
    );
    assert_eq!(
        r.decide("x.notbad.allowed.test", None, false).decision,
        Decision::Allow
    );

    // Port-limited allow entries.
    let r = rules(&["allowed.test:25"], &["allowed.test:443"]);
    assert_eq!(
        r.decide("allowed.test", Some(443), false).decision,
        Decision::Allow
    );
    assert_eq!(
        r.decide("allowed.test", Some(80), false).decision,
        Decision::Deny
    );
    assert_eq!(
        r.decide("allowed.test", None, false).kind,
        ReasonKind::DomainDenied
    );
    assert_eq!(
        r.decide("allowed.test", Some(25), false).kind,
        ReasonKind::DomainDenied
    );
}

#[test]
fn loopback_and_metadata_denied_in_every_spelling() {
    let r = rules(
        &["127.0.0.1", "169.254.169.254", "[::1]"],
        &["*.example.com"],
    );
    for h in SPELLINGS_127.iter().chain(SPELLINGS_METADATA) {
        let v = r.decide(h, Some(80), true);
        assert_eq!(v.decision, Decision::Deny, "{h}");
        assert_eq!(v.kind, ReasonKind::DomainDenied, "{h}");
    }
    for h in ["[::1]", "::1", "[0:0::1]"] {
        assert_eq!(
            r.decide(h, None, true).kind,
            ReasonKind::DomainDenied,
            "{h}"
        );
    }
    let r = rules(&["127.0.0.0/8", "169.254.0.0/16"], &[]);
    for h in SPELLINGS_127.iter().chain(SPELLINGS_METADATA) {
        assert_eq!(
            r.decide(h, None, true).kind,
            ReasonKind::DomainDenied,
            "{h}"
        );
    }
    assert_eq!(
        r.decide("127.255.0.9", None, true).kind,
        ReasonKind::DomainDenied
    );
    assert_eq!(
        r.decide("126.0.0.1", None, true).kind,
        ReasonKind::DomainAsk
    );
}

#[test]
fn decide_host_agrees_with_decide() {
    let r = rules(&["*.bad.test", "10.0.0.0/8"], &["*.test", "[::1]:80"]);
    for (h, port) in [
        ("x.bad.test", None),
        ("ok.test", Some(1)),
        ("10.2.3.4", None),
        ("::1", Some(80)),
        ("::1", Some(81)),
        ("other.example", None),
    ] {
        assert_eq!(
            r.decide(h, port, true),
            r.decide_host(&host(h), port, true),
            "{h}"
        );
    }
    // A hand-built v4-mapped host is still treated as IPv4.
    let mapped = Host::Ip(IpAddr::V6("::ffff:10.0.0.1".parse().unwrap()));
    assert_eq!(
        r.decide_host(&mapped, None, true).kind,
        ReasonKind::DomainDenied
    );
}

#[test]
fn decide_target_splits_the_port() {
    let r = rules(&["[::1]:22"], &["example.com:443"]);
    let v = r.decide_target("Example.com:443", false);
    assert_eq!(v.kind, ReasonKind::DomainAllowed);
    assert_eq!(v.reason, "example.com:443 is in allowedDomains");
    assert_eq!(
        r.decide_target("example.com", false).kind,
        ReasonKind::DomainNotAllowed
    );
    assert_eq!(
        r.decide_target("[::1]:22", true).kind,
        ReasonKind::DomainDenied
    );
    assert_eq!(r.decide_target("::1", true).kind, ReasonKind::DomainDenied);
    let v = r.decide_target("example.com:http", true);
    assert_eq!(v.kind, ReasonKind::InvalidHost);
    assert_eq!(
        v.reason,
        "invalid host \"example.com:http\": invalid port \"http\": a port is a number from 1 to 65535"
    );
}

/// The network block through the real construction path (layer merge + Policy::build).
fn rules_of(network: NetworkSettings) -> Result<DomainRules, String> {
    let settings = crate::policy::settings::SandboxSettings {
        network: Some(network),
        ..Default::default()
    };
    crate::policy::merge::test_policy(settings)
        .map(|p| p.domains)
        .map_err(|e| e.to_string())
}

#[test]
fn settings_network_block_builds_domain_rules() {
    let settings = NetworkSettings {
        allowed_domains: Some(vec!["*.npmjs.org".into(), "github.com".into()]),
        denied_domains: Some(vec!["evil.npmjs.org".into()]),
        denied_domain_reasons: Some(BTreeMap::from([(
            "evil.npmjs.org".to_string(),
            "typosquat mirror".to_string(),
        )])),
        strict_allowlist: Some(true),
        ..NetworkSettings::default()
    };
    let r = rules_of(settings).unwrap();
    assert_eq!(r.allowed.len(), 2);
    assert!(r.strict_allowlist);
    assert!(!r.unrestricted);
    assert_eq!(
        r.decide("evil.npmjs.org", Some(443), true).reason,
        "evil.npmjs.org:443 is in deniedDomains: typosquat mirror"
    );
    assert_eq!(
        r.decide("registry.npmjs.org", None, true).kind,
        ReasonKind::DomainAllowed
    );
    assert_eq!(
        r.decide("example.com", None, true).kind,
        ReasonKind::DomainNotAllowed
    );

    let bad = NetworkSettings {
        allowed_domains: Some(vec!["github.com".into(), "*.com".into()]),
        ..NetworkSettings::default()
    };
    let e = rules_of(bad).unwrap_err();
    assert!(
        e.ends_with("\"*.com\" in allowedDomains matches a whole public suffix"),
        "{e}"
    );
    assert_eq!(ListKind::Deny.rule_list(), "network.deniedDomains");
    assert_eq!(ListKind::Allow.to_string(), "allowedDomains");
}

// ---------------------------------------------------------------- persist_pattern

#[test]
fn persisted_patterns() {
    let cases = [
        ("registry.npmjs.org", "*.npmjs.org"),
        ("a.b.registry.npmjs.org", "*.b.registry.npmjs.org"),
        ("npmjs.org", "npmjs.org"),
        ("localhost", "localhost"),
        ("x.co.uk", "x.co.uk"),
        ("www.bbc.co.uk", "*.bbc.co.uk"),
        ("octocat.github.io", "octocat.github.io"),
        ("api.octocat.github.io", "*.octocat.github.io"),
        ("raw.githubusercontent.com", "raw.githubusercontent.com"),
        ("storage.googleapis.com", "storage.googleapis.com"),
        ("a.b.storage.googleapis.com", "*.b.storage.googleapis.com"),
        ("registry.npmjs.org.", "*.npmjs.org"),
        ("Registry.NPMJS.org", "*.npmjs.org"),
        ("a.b.internal", "*.b.internal"),
        ("www.bücher.example", "*.xn--bcher-kva.example"),
        ("0x7f.1", "127.0.0.1"),
        ("::1", "[::1]"),
        ("[::ffff:1.2.3.4]", "1.2.3.4"),
    ];
    for (input, want) in cases {
        let h = host(input);
        let persisted = persist_pattern(&h);
        assert_eq!(persisted, want, "{input}");
        // Always a valid allow entry that matches the host it came from.
        let p = allow(&persisted);
        assert!(p.matches(&h, Some(443)), "{input}");
    }
}

// ---------------------------------------------------------------- properties

fn host_inputs() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9._-]{0,40}",
        "[a-z0-9-]{1,12}(\\.[a-z0-9_-]{1,12}){0,4}\\.?",
        "(xn--)?[a-z0-9-]{1,10}\\.[a-z]{2,5}",
        "[0-9xXa-fA-F.]{1,24}",
        "(0x[0-9a-f]{1,8}|0[0-7]{1,11}|[0-9]{1,10})(\\.(0x[0-9a-f]{1,3}|0[0-7]{1,4}|[0-9]{1,3})){0,3}\\.?",
        "\\[?[0-9a-fA-F:.]{2,40}\\]?",
        "::ffff:[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}",
        "[a-zäöüßéç\u{4e2d}\u{6587}\u{0430}-\u{044f}.-]{1,20}",
        "\\PC{0,30}",
        any::<String>(),
    ]
}

fn labels() -> impl Strategy<Value = String> {
    "[a-z0-9][a-z0-9-]{0,8}(\\.[a-z0-9][a-z0-9-]{0,8}){0,3}"
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn canonicalisation_is_idempotent(input in host_inputs()) {
        if let Ok(h) = canonical_host(&input) {
            let again = canonical_host(&h.to_string());
            prop_assert_eq!(again.as_ref(), Ok(&h), "{:?} -> {}", input, h);
        }
    }

    #[test]
    fn fast_paths_agree_with_the_slow_path(input in host_inputs()) {
        let fast = canonical_host(&input);
        let slow = canonical_slow(&input).map(Canon::into_host);
        prop_assert_eq!(fast, slow, "{:?}", input);
    }

    #[test]
    fn fast_name_agrees_with_the_slow_path(input in "[a-z0-9._-]{1,30}") {
        if let Some(n) = fast_name(&input) {
            let slow = canonical_slow(&input).map(Canon::into_host);
            prop_assert_eq!(slow, Ok(Host::Name(n.to_string())), "{:?}", input);
        }
    }

    #[test]
    fn wildcards_never_match_ips(base in labels(), ip in any::<IpAddr>(), port in proptest::option::of(1u16..)) {
        for list in [ListKind::Allow, ListKind::Deny] {
            if let Ok(p) = DomainPattern::parse(&format!("*.{base}"), list) {
                prop_assert!(!p.matches(&Host::from(ip), port));
                prop_assert!(!p.matches(&Host::Ip(ip), port));
            }
        }
    }

    #[test]
    fn deny_beats_allow_for_the_same_entry(
        base in labels(),
        sub in "[a-z0-9]{1,6}",
        wildcard in any::<bool>(),
        port in proptest::option::of(1u16..),
        approver in any::<bool>(),
        unrestricted in any::<bool>(),
    ) {
        let entry = if wildcard { format!("*.{base}") } else { base.clone() };
        let target = if wildcard { format!("{sub}.{base}") } else { base.clone() };
        let allowed = DomainPattern::parse(&entry, ListKind::Allow);
        if allowed.is_err() {
            // `*.1.2` (a wildcard over an IP address) or `*.com` (a public suffix).
            return Ok(());
        }
        let denied = DomainPattern::parse(&entry, ListKind::Deny);
        prop_assert!(denied.is_ok());
        let r = DomainRules {
            unrestricted,
            ..rules(&[&entry], &[&entry, "*.allowed.test"])
        };
        let v = r.decide(&target, port, approver);
        if canonical_host(&target).is_ok() {
            prop_assert_eq!(v.decision, Decision::Deny);
            prop_assert_eq!(v.kind, ReasonKind::DomainDenied);
        } else {
            prop_assert_eq!(v.kind, ReasonKind::InvalidHost);
        }
    }

    #[test]
    fn persisted_patterns_are_valid_allow_entries(input in labels(), sub in "[a-z0-9]{1,8}") {
        for text in [input.clone(), format!("{sub}.{input}")] {
            if let Ok(h) = canonical_host(&text) {
                let persisted = persist_pattern(&h);
                let p = DomainPattern::parse(&persisted, ListKind::Allow);
                prop_assert!(p.is_ok(), "{} -> {}: {:?}", text, persisted, p);
                prop_assert!(p.unwrap().matches(&h, Some(443)), "{} -> {}", text, persisted);
            }
        }
    }

    #[test]
    fn allowed_ip_spellings_agree(n in any::<u32>()) {
        let ip = Ipv4Addr::from(n);
        let r = rules(&[], &[&ip.to_string()]);
        for spelling in [n.to_string(), format!("0x{n:x}"), format!("0{n:o}"), format!("[::ffff:{ip}]")] {
            prop_assert_eq!(r.decide(&spelling, None, false).kind, ReasonKind::DomainAllowed, "{}", spelling);
        }
    }

    #[test]
    fn patterns_round_trip_through_display(input in host_inputs(), port in proptest::option::of(1u16..)) {
        let text = match port { Some(p) if !input.contains(':') => format!("{input}:{p}"), _ => input.clone() };
        for list in [ListKind::Allow, ListKind::Deny] {
            if let Ok(p) = DomainPattern::parse(&text, list) {
                prop_assert_eq!(DomainPattern::parse(&p.to_string(), list), Ok(p.clone()), "{:?}", text);
            }
        }
    }
}

// ---------------------------------------------------------------- speed

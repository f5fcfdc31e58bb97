//! Domain decisions for the network proxy: `deniedDomains` first, then `allowedDomains`, then
//! [`Decision::RequiresApproval`](super::decision::Decision::RequiresApproval) when an approver is
//! attached and `strictAllowlist` is off, else a denial.
//!
//! Everything here is pure. Hosts are canonicalised once ([`canonical_host`]): refused when they
//! carry anything a host never needs (NUL, line breaks, `%`, whitespace, `@`, `/`), lower-cased,
//! stripped of one trailing dot, converted to ASCII with IDNA, and every IPv4 spelling (`127.1`,
//! `0x7f.0.0.1`, `2130706433`, ...) as well as IPv4-mapped IPv6 addresses becomes one
//! [`Host::Ip`]. Patterns are canonicalised the same way when they are parsed, so matching is a
//! plain comparison on canonical forms.

use super::decision::{Provenance, ReasonKind, Rule, Verdict};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// Longest host name accepted, in bytes (without a trailing dot).
pub const MAX_HOST_LEN: usize = 253;
/// Longest label accepted, in bytes.
pub const MAX_LABEL_LEN: usize = 63;

/// The settings key of the denied list, as used in [`RuleRef::list`](super::decision::RuleRef).
pub const DENIED_LIST: &str = "network.deniedDomains";
/// The settings key of the allowed list, as used in [`RuleRef::list`](super::decision::RuleRef).
pub const ALLOWED_LIST: &str = "network.allowedDomains";

/// A canonical host: an ASCII (punycode) lower-case name without a trailing dot, or an IP
/// address (IPv4-mapped IPv6 addresses are stored as IPv4).
///
/// Build it with [`canonical_host`] (or `str::parse`); a hand-built value that is not canonical
/// will not match patterns reliably.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Host {
    Name(String),
    Ip(IpAddr),
}

impl Host {
    /// The host name, if this is a name.
    pub fn as_name(&self) -> Option<&str> {
        match self {
            Host::Name(name) => Some(name),
            Host::Ip(_) => None,
        }
    }

    /// The address, if this is an IP literal.
    pub fn ip(&self) -> Option<IpAddr> {
        match self {
            Host::Name(_) => None,
            Host::Ip(ip) => Some(*ip),
        }
    }

    fn view(&self) -> HostRef<'_> {
        match self {
            Host::Name(name) => HostRef::Name(name),
            Host::Ip(ip) => HostRef::Ip(normalize_ip(*ip)),
        }
    }
}

impl fmt::Display for Host {
    /// A name as is, IPv4 dotted, IPv6 in brackets: the output parses back to the same host.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.view().fmt(f)
    }
}

impl FromStr for Host {
    type Err = HostError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        canonical_host(s)
    }
}

impl From<IpAddr> for Host {
    fn from(ip: IpAddr) -> Self {
        Host::Ip(normalize_ip(ip))
    }
}

impl Serialize for Host {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Why a host was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    #[error("host is empty")]
    Empty,
    #[error("host contains a NUL byte")]
    Nul,
    #[error("host contains a line break (CR or LF)")]
    LineBreak,
    #[error("host contains `%` (percent-encoding and IPv6 zone ids are not accepted)")]
    Percent,
    #[error("host contains whitespace")]
    Whitespace,
    #[error("host contains `@` (user info is not accepted)")]
    Userinfo,
    #[error("host contains `/` (a URL or path is not a host)")]
    Slash,
    #[error("host is {0} bytes long; the limit is 253")]
    TooLong(usize),
    #[error("host has a label of {0} bytes; the limit is 63")]
    LabelTooLong(usize),
    #[error("host has an empty label")]
    EmptyLabel,
    #[error("host contains {0:?}, which is not allowed in a host name")]
    InvalidChar(char),
    #[error("host contains a character that is not allowed in a host name")]
    ForbiddenCharacter,
    #[error("host is not a valid internationalized domain name")]
    Idna,
    #[error("host looks like an IPv4 address but is not a valid one")]
    InvalidIpv4,
    #[error("host is not a valid IPv6 address")]
    InvalidIpv6,
    #[error("brackets are only accepted around a whole IPv6 address")]
    Brackets,
    #[error("host contains `:` (a port is not accepted here)")]
    UnexpectedPort,
    #[error("invalid port {0:?}: a port is a number from 1 to 65535")]
    InvalidPort(String),
}

/// A borrowed canonical host, so that `decide` need not allocate for hosts that are already
/// canonical.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HostRef<'a> {
    Name(&'a str),
    Ip(IpAddr),
}

impl fmt::Display for HostRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostRef::Name(name) => f.write_str(name),
            HostRef::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
            HostRef::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
        }
    }
}

/// The result of canonicalising: borrowed when the input was already canonical.
enum Canon<'a> {
    Borrowed(&'a str),
    Ip(IpAddr),
    Owned(String),
}

impl Canon<'_> {
    fn view(&self) -> HostRef<'_> {
        match self {
            Canon::Borrowed(name) => HostRef::Name(name),
            Canon::Ip(ip) => HostRef::Ip(*ip),
            Canon::Owned(name) => HostRef::Name(name),
        }
    }

    fn into_host(self) -> Host {
        match self {
            Canon::Borrowed(name) => Host::Name(name.to_owned()),
            Canon::Ip(ip) => Host::Ip(ip),
            Canon::Owned(name) => Host::Name(name),
        }
    }
}

fn normalize_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

/// Canonicalise a host (no port; brackets are accepted around an IPv6 address).
///
/// Refuses NUL, CR, LF, `%`, whitespace, `@`, `/`, empty hosts and labels, hosts over 253 bytes
/// (measured both as given and after IDNA) and labels over 63 bytes; names may only consist of
/// ASCII letters, digits, `-` and `_` once converted to ASCII. Then lower-cases, strips one
/// trailing dot, applies IDNA (UTS #46, as browsers do), and parses every IPv4 spelling the
/// WHATWG URL standard knows. IPv4-mapped IPv6 addresses become IPv4. The result's `Display`
/// parses back to the same host.
pub fn canonical_host(input: &str) -> Result<Host, HostError> {
    canonical_view(input).map(Canon::into_host)
}

/// Split `HOST[:PORT]` (`[v6]:443`; an IPv6 address without brackets is a host without port)
/// and canonicalise the host.
pub fn parse_target(input: &str) -> Result<(Host, Option<u16>), HostError> {
    precheck(input)?;
    if input.is_empty() {
        return Err(HostError::Empty);
    }
    if let Some(rest) = input.strip_prefix('[') {
        let close = rest.find(']').ok_or(HostError::Brackets)?;
        let host = parse_v6(&rest[..close])?;
        let after = &rest[close + 1..];
        if after.is_empty() {
            return Ok((host, None));
        }
        let port = after.strip_prefix(':').ok_or(HostError::Brackets)?;
        return Ok((host, Some(parse_port(port)?)));
    }
    match input.split_once(':') {
        Some((host, port)) if !port.contains(':') => {
            Ok((canonical_host(host)?, Some(parse_port(port)?)))
        }
        _ => Ok((canonical_host(input)?, None)),
    }
}

fn parse_port(text: &str) -> Result<u16, HostError> {
    let invalid = || HostError::InvalidPort(text.to_string());
    if text.is_empty() || text.len() > 5 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    match text.parse::<u16>() {
        Ok(0) | Err(_) => Err(invalid()),
        Ok(port) => Ok(port),
    }
}

/// Canonicalise with the fast paths: an already canonical ASCII name is borrowed, a plain dotted
/// quad is parsed without the URL machinery.
fn canonical_view(input: &str) -> Result<Canon<'_>, HostError> {
    if let Some(name) = fast_name(input) {
        return Ok(Canon::Borrowed(name));
    }
    // Upper-case ASCII names: lower-case them and try again (UTS #46 maps A-Z to a-z only).
    if input.len() <= MAX_HOST_LEN + 1
        && input.bytes().any(|b| b.is_ascii_uppercase())
        && input
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        let lower = input.to_ascii_lowercase();
        if let Some(name) = fast_name(&lower) {
            let len = name.len();
            let mut lower = lower;
            lower.truncate(len);
            return Ok(Canon::Owned(lower));
        }
    }
    // std only accepts four decimal parts without leading zeros, which mean the same in WHATWG.
    if let Ok(v4) = input.parse::<Ipv4Addr>() {
        return Ok(Canon::Ip(IpAddr::V4(v4)));
    }
    canonical_slow(input)
}

/// `Some(name without its trailing dot)` when `input` is a canonical ASCII name already:
/// lowercase letters, digits, `-`, `_` and `.` only, no empty or over-long label, no punycode
/// label (which needs validating), and a last label starting with a letter (so it cannot be an
/// IPv4 number in any spelling).
fn fast_name(input: &str) -> Option<&str> {
    let name = input.strip_suffix('.').unwrap_or(input);
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() > MAX_HOST_LEN {
        return None;
    }
    let label_ok = |label: &[u8]| {
        !label.is_empty() && label.len() <= MAX_LABEL_LEN && !label.starts_with(b"xn--")
    };
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' => {}
            b'.' => {
                if !label_ok(&bytes[start..i]) {
                    return None;
                }
                start = i + 1;
            }
            _ => return None,
        }
    }
    let last = &bytes[start..];
    if !label_ok(last) || !last[0].is_ascii_lowercase() {
        return None;
    }
    Some(name)
}

/// The refusals that come before any parsing (the URL parser would percent-decode).
fn precheck(input: &str) -> Result<(), HostError> {
    for c in input.chars() {
        match c {
            '\0' => return Err(HostError::Nul),
            '\r' | '\n' => return Err(HostError::LineBreak),
            '%' => return Err(HostError::Percent),
            '@' => return Err(HostError::Userinfo),
            '/' => return Err(HostError::Slash),
            c if c.is_whitespace() => return Err(HostError::Whitespace),
            _ => {}
        }
    }
    Ok(())
}

fn parse_v6(inner: &str) -> Result<Host, HostError> {
    inner
        .parse::<Ipv6Addr>()
        .map(|ip| Host::Ip(normalize_ip(IpAddr::V6(ip))))
        .map_err(|_| HostError::InvalidIpv6)
}

/// The full canonicalisation, without fast paths.
fn canonical_slow(input: &str) -> Result<Canon<'_>, HostError> {
    precheck(input)?;
    if input.is_empty() {
        return Err(HostError::Empty);
    }
    if let Some(rest) = input.strip_prefix('[') {
        let inner = rest.strip_suffix(']').ok_or(HostError::Brackets)?;
        return parse_v6(inner).map(|host| match host {
            Host::Ip(ip) => Canon::Ip(ip),
            Host::Name(name) => Canon::Owned(name),
        });
    }
    if input.contains(['[', ']']) {
        return Err(HostError::Brackets);
    }
    match input.bytes().filter(|&b| b == b':').count() {
        0 => {}
        1 => return Err(HostError::UnexpectedPort),
        _ => {
            return parse_v6(input).map(|host| match host {
                Host::Ip(ip) => Canon::Ip(ip),
                Host::Name(name) => Canon::Owned(name),
            })
        }
    }
    let trimmed = input.strip_suffix('.').unwrap_or(input);
    if trimmed.len() > MAX_HOST_LEN {
        return Err(HostError::TooLong(trimmed.len()));
    }
    if let Some(c) = input
        .chars()
        .find(|&c| c.is_ascii() && !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(HostError::InvalidChar(c));
    }
    match url::Host::parse(input) {
        Ok(url::Host::Domain(name)) => finish_name(name).map(Canon::Owned),
        Ok(url::Host::Ipv4(ip)) => Ok(Canon::Ip(IpAddr::V4(ip))),
        Ok(url::Host::Ipv6(ip)) => Ok(Canon::Ip(normalize_ip(IpAddr::V6(ip)))),
        Err(url::ParseError::EmptyHost) => Err(HostError::Empty),
        Err(url::ParseError::InvalidIpv4Address) => Err(HostError::InvalidIpv4),
        Err(url::ParseError::InvalidIpv6Address) => Err(HostError::InvalidIpv6),
        Err(url::ParseError::InvalidDomainCharacter) => Err(HostError::ForbiddenCharacter),
        Err(_) => Err(HostError::Idna),
    }
}

/// Checks on the ASCII form the URL parser produced.
fn finish_name(mut name: String) -> Result<String, HostError> {
    if name.ends_with('.') {
        name.pop();
    }
    if name.is_empty() {
        return Err(HostError::Empty);
    }
    if name.len() > MAX_HOST_LEN {
        return Err(HostError::TooLong(name.len()));
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err(HostError::EmptyLabel);
        }
        if label.len() > MAX_LABEL_LEN {
            return Err(HostError::LabelTooLong(label.len()));
        }
    }
    if let Some(c) = name
        .chars()
        .find(|&c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.')))
    {
        return Err(HostError::InvalidChar(c));
    }
    Ok(name)
}

/// Whether `name` (canonical ASCII) is itself a public suffix: an entry, explicit or through a
/// wildcard rule, of the ICANN *or* the private section of the Public Suffix List. So `com`,
/// `co.uk`, `github.io` and `githubusercontent.com` are suffixes; a name under a top-level
/// domain the list does not know (`internal`, `test`, `corp`) is not. [`persist_pattern`] uses
/// this (never widen an approval to everyone's `*.github.io`).
pub fn is_public_suffix(name: &str) -> bool {
    psl_suffix_type(name).is_some()
}

/// Whether `name` is itself a suffix of the ICANN section of the Public Suffix List (`com`,
/// `co.uk`, `arpa`), the registries' own suffixes. `*.X` is refused in `allowedDomains` for
/// these.
pub fn is_icann_suffix(name: &str) -> bool {
    psl_suffix_type(name) == Some(psl::Type::Icann)
}

fn psl_suffix_type(name: &str) -> Option<psl::Type> {
    let suffix = psl::suffix(name.as_bytes())?;
    if suffix.trim().as_bytes() == name.as_bytes() {
        suffix.typ()
    } else {
        None
    }
}

/// Which settings list a pattern belongs to; the allow list is stricter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ListKind {
    Allow,
    Deny,
}

impl ListKind {
    /// The settings key: `allowedDomains` or `deniedDomains`.
    pub fn settings_key(self) -> &'static str {
        match self {
            ListKind::Allow => "allowedDomains",
            ListKind::Deny => "deniedDomains",
        }
    }

    /// The list name used in rule references: `network.allowedDomains` / `network.deniedDomains`.
    pub fn rule_list(self) -> &'static str {
        match self {
            ListKind::Allow => ALLOWED_LIST,
            ListKind::Deny => DENIED_LIST,
        }
    }
}

impl fmt::Display for ListKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.settings_key())
    }
}

/// A refused `allowedDomains` / `deniedDomains` entry: names the entry, the list and the reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{entry:?} in {list} {problem}")]
pub struct PatternError {
    /// The entry as written.
    pub entry: String,
    pub list: ListKind,
    pub problem: PatternProblem,
}

/// Why a pattern was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PatternProblem {
    #[error("is empty")]
    Empty,
    #[error("matches every host; `*` alone is only accepted in deniedDomains")]
    MatchesEverything,
    #[error("uses `*` other than as a leading `*.`")]
    BadWildcard,
    #[error("matches a whole public suffix")]
    PublicSuffix,
    #[error("puts a wildcard in front of an IP address (wildcards only match names)")]
    WildcardIp,
    #[error("is not a valid host: {0}")]
    Host(HostError),
    #[error("has an invalid port {0:?} (a port is a number from 1 to 65535)")]
    Port(String),
    #[error("is not a valid CIDR range: {0}")]
    Cidr(String),
    #[error("matches every address; a /0 range is only accepted in deniedDomains")]
    CidrEverything,
    #[error("has unbalanced brackets (brackets go around a whole IPv6 address or range)")]
    Brackets,
}

/// A canonical name (or `.suffix`) with its first eight bytes preloaded, so that a mismatch is
/// usually found with one integer comparison instead of a `memcmp` call.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Needle {
    text: String,
    /// The first eight bytes of `text` as an integer (0 when it is shorter).
    head: u64,
}

impl Needle {
    fn new(text: String) -> Needle {
        let head = head8(text.as_bytes()).unwrap_or(0);
        Needle { text, head }
    }

    /// `host == text`.
    #[inline]
    fn equals(&self, host: &str) -> bool {
        host.len() == self.text.len() && self.tail_matches(host.as_bytes(), 0)
    }

    /// `host` ends with `text` and is longer.
    #[inline]
    fn strict_suffix_of(&self, host: &str) -> bool {
        host.len() > self.text.len()
            && self.tail_matches(host.as_bytes(), host.len() - self.text.len())
    }

    /// `host[at..] == text`, given that the lengths agree.
    #[inline]
    fn tail_matches(&self, host: &[u8], at: usize) -> bool {
        let rest = &host[at..];
        if self.text.len() >= 8 && head8(rest) != Some(self.head) {
            return false;
        }
        rest == self.text.as_bytes()
    }
}

#[inline]
fn head8(bytes: &[u8]) -> Option<u64> {
    bytes
        .first_chunk::<8>()
        .map(|chunk| u64::from_ne_bytes(*chunk))
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Matcher {
    /// `*`: every host, names and addresses (deny list only).
    Any,
    /// An exact canonical name.
    Exact(Needle),
    /// `*.example.com`, stored as `.example.com`: any subdomain at any depth, not the apex.
    Subdomains(Needle),
    /// An IP literal (IPv4-mapped IPv6 stored as IPv4).
    Ip(IpAddr),
    /// A CIDR range, truncated; IPv6 ranges covering `::ffff:0:0/96` also match IPv4 hosts.
    Net(IpNet),
}

/// One parsed `allowedDomains` / `deniedDomains` entry.
///
/// Forms: `example.com` (that host only), `*.example.com` (every subdomain at any depth, not
/// `example.com` itself), an IPv4/IPv6 literal in any spelling (`127.1`, `[::1]`, `::1`), a CIDR
/// range (`10.0.0.0/8`, `fd00::/8`, `[fd00::/8]`), each with an optional `:PORT` (`example.com:443`,
/// `*.example.com:8443`, `[::1]:8080`, `10.0.0.0/8:443`, `[fd00::/8]:443`); without a port any
/// port matches. `*` alone (every host) is accepted only in `deniedDomains`.
///
/// In `allowedDomains`, `*`, a `/0` range, and `*.X` where `X` is a public suffix of the ICANN
/// section of the Public Suffix List ([`is_icann_suffix`]: `*.com`, `*.co.uk`, `*.arpa`) are
/// refused. Suffixes of the list's private section (`*.github.io`, `*.googleapis.com`,
/// `*.githubusercontent.com`) are deliberately accepted: they are common, intended allowlist
/// entries, and one refused entry makes the whole settings file fail to load; a name under a
/// top-level domain the list does not know (`*.internal`, `*.test`) is accepted too. In both lists `*` anywhere but a leading
/// `*.` is refused, as is a CIDR range with bits set past its prefix (`10.0.0.1/8`), because
/// such entries would silently not mean what they say.
///
/// When the port of a request is unknown, a pattern with a port matches in `deniedDomains` (to
/// stay on the safe side) and does not in `allowedDomains`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DomainPattern {
    matcher: Matcher,
    port: Option<u16>,
    list: ListKind,
}

impl DomainPattern {
    /// Parse one entry of the given list.
    pub fn parse(text: &str, list: ListKind) -> Result<DomainPattern, PatternError> {
        parse_pattern(text, list).map_err(|problem| PatternError {
            entry: text.to_string(),
            list,
            problem,
        })
    }

    /// Whether this pattern matches `host` (which should come from [`canonical_host`]) on
    /// `port` (`None`: unknown), with the port semantics of the list it was parsed for.
    pub fn matches(&self, host: &Host, port: Option<u16>) -> bool {
        self.matches_in(host.view(), port, self.list)
    }

    /// The port this pattern is limited to, if any.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// The list this pattern was parsed for.
    pub fn list(&self) -> ListKind {
        self.list
    }

    /// Whether this is `*` (every host).
    pub fn is_any(&self) -> bool {
        matches!(self.matcher, Matcher::Any)
    }

    /// Whether this is a `*.name` pattern.
    pub fn is_wildcard(&self) -> bool {
        matches!(self.matcher, Matcher::Subdomains(_))
    }

    /// The addresses this pattern names explicitly: an IP literal as a single-address network
    /// (`/32`, `/128`), a CIDR range as itself; `None` for names, wildcards and `*`. The port,
    /// if any, is ignored.
    pub fn ip_network(&self) -> Option<IpNet> {
        match &self.matcher {
            Matcher::Ip(ip) => Some(IpNet::from(*ip)),
            Matcher::Net(net) => Some(*net),
            Matcher::Any | Matcher::Exact(_) | Matcher::Subdomains(_) => None,
        }
    }

    #[inline]
    fn matches_in(&self, host: HostRef<'_>, port: Option<u16>, list: ListKind) -> bool {
        if let Some(want) = self.port {
            match port {
                Some(got) if got != want => return false,
                None if list == ListKind::Allow => return false,
                _ => {}
            }
        }
        match &self.matcher {
            Matcher::Subdomains(suffix) => match host {
                HostRef::Name(host) => suffix.strict_suffix_of(host),
                HostRef::Ip(_) => false,
            },
            Matcher::Exact(name) => match host {
                HostRef::Name(host) => name.equals(host),
                HostRef::Ip(_) => false,
            },
            Matcher::Any => true,
            Matcher::Ip(ip) => host == HostRef::Ip(*ip),
            Matcher::Net(net) => match (net, host) {
                (IpNet::V4(net), HostRef::Ip(IpAddr::V4(host))) => net.contains(&host),
                (IpNet::V6(net), HostRef::Ip(IpAddr::V6(host))) => net.contains(&host),
                (IpNet::V6(net), HostRef::Ip(IpAddr::V4(host))) => {
                    net.contains(&host.to_ipv6_mapped())
                }
                _ => false,
            },
        }
    }
}

impl fmt::Display for DomainPattern {
    /// The canonical form of the pattern; it parses back to the same pattern.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.matcher {
            Matcher::Any => f.write_str("*")?,
            Matcher::Exact(name) => f.write_str(&name.text)?,
            Matcher::Subdomains(suffix) => write!(f, "*{}", suffix.text)?,
            Matcher::Ip(ip) => HostRef::Ip(*ip).fmt(f)?,
            Matcher::Net(IpNet::V4(net)) => write!(f, "{net}")?,
            Matcher::Net(IpNet::V6(net)) => write!(f, "[{net}]")?,
        }
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        Ok(())
    }
}

fn parse_pattern_port(text: &str) -> Result<u16, PatternProblem> {
    parse_port(text).map_err(|_| PatternProblem::Port(text.to_string()))
}

fn parse_pattern(text: &str, list: ListKind) -> Result<DomainPattern, PatternProblem> {
    if text.is_empty() {
        return Err(PatternProblem::Empty);
    }
    let pattern = |matcher, port| DomainPattern {
        matcher,
        port,
        list,
    };

    // `[v6]`, `[v6]:port`, `[v6/len]`, `[v6/len]:port`.
    if let Some(rest) = text.strip_prefix('[') {
        let close = rest.find(']').ok_or(PatternProblem::Brackets)?;
        let inner = &rest[..close];
        let after = &rest[close + 1..];
        let port = if after.is_empty() {
            None
        } else {
            let port = after.strip_prefix(':').ok_or(PatternProblem::Brackets)?;
            Some(parse_pattern_port(port)?)
        };
        if inner.contains(['[', ']']) {
            return Err(PatternProblem::Brackets);
        }
        let matcher = match inner.split_once('/') {
            Some((addr, len)) => Matcher::Net(parse_cidr(addr, len, true, list)?),
            None => match parse_v6(inner).map_err(PatternProblem::Host)? {
                Host::Ip(ip) => Matcher::Ip(ip),
                Host::Name(_) => return Err(PatternProblem::Host(HostError::InvalidIpv6)),
            },
        };
        return Ok(pattern(matcher, port));
    }

    // One colon: `host:port`; two or more: a bare IPv6 address or range without port.
    let (host, port) = match text.split_once(':') {
        Some((host, port)) if !port.contains(':') => (host, Some(parse_pattern_port(port)?)),
        _ => (text, None),
    };

    if host == "*" {
        return match list {
            ListKind::Deny => Ok(pattern(Matcher::Any, port)),
            ListKind::Allow => Err(PatternProblem::MatchesEverything),
        };
    }
    if host.contains('*') {
        let base = host.strip_prefix("*.").ok_or(PatternProblem::BadWildcard)?;
        if base.contains('*') {
            return Err(PatternProblem::BadWildcard);
        }
        let base = match canonical_host(base).map_err(PatternProblem::Host)? {
            Host::Name(name) => name,
            Host::Ip(_) => return Err(PatternProblem::WildcardIp),
        };
        if list == ListKind::Allow && is_icann_suffix(&base) {
            return Err(PatternProblem::PublicSuffix);
        }
        return Ok(pattern(
            Matcher::Subdomains(Needle::new(format!(".{base}"))),
            port,
        ));
    }
    if let Some((addr, len)) = host.split_once('/') {
        return Ok(pattern(
            Matcher::Net(parse_cidr(addr, len, false, list)?),
            port,
        ));
    }
    let matcher = match canonical_host(host).map_err(PatternProblem::Host)? {
        Host::Name(name) => Matcher::Exact(Needle::new(name)),
        Host::Ip(ip) => Matcher::Ip(ip),
    };
    Ok(pattern(matcher, port))
}

fn parse_cidr(
    addr: &str,
    len: &str,
    bracketed: bool,
    list: ListKind,
) -> Result<IpNet, PatternProblem> {
    let ip = if bracketed {
        parse_v6(addr)
    } else {
        canonical_host(addr)
    }
    .map_err(|e| PatternProblem::Cidr(format!("{addr:?} is not an IP address ({e})")))?;
    let ip = match ip {
        Host::Ip(ip) => ip,
        Host::Name(_) => {
            return Err(PatternProblem::Cidr(format!(
                "{addr:?} is not an IP address"
            )))
        }
    };
    if len.is_empty() || len.len() > 3 || !len.bytes().all(|b| b.is_ascii_digit()) {
        return Err(PatternProblem::Cidr(format!(
            "{len:?} is not a prefix length"
        )));
    }
    let prefix: u8 = len
        .parse()
        .map_err(|_| PatternProblem::Cidr(format!("{len:?} is not a prefix length")))?;
    let written_as_v6 = bracketed || addr.contains(':');
    let too_long = |max: u8| PatternProblem::Cidr(format!("prefix length {prefix} exceeds {max}"));
    let net = match ip {
        IpAddr::V4(v4) if written_as_v6 => {
            IpNet::V6(Ipv6Net::new(v4.to_ipv6_mapped(), prefix).map_err(|_| too_long(128))?)
        }
        IpAddr::V4(v4) => IpNet::V4(Ipv4Net::new(v4, prefix).map_err(|_| too_long(32))?),
        IpAddr::V6(v6) => IpNet::V6(Ipv6Net::new(v6, prefix).map_err(|_| too_long(128))?),
    };
    let truncated = net.trunc();
    if truncated != net {
        return Err(PatternProblem::Cidr(format!(
            "the address has bits set past the /{prefix} prefix (the range is {truncated})"
        )));
    }
    // A range inside ::ffff:0:0/96 is an IPv4 range: hosts are normalised to IPv4.
    let net = match net {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.network().to_ipv4_mapped() {
            Some(v4) => match Ipv4Net::new(v4, v6.prefix_len() - 96) {
                Ok(v4net) => IpNet::V4(v4net),
                Err(_) => net,
            },
            None => net,
        },
        other => other,
    };
    if net.prefix_len() == 0 && list == ListKind::Allow {
        return Err(PatternProblem::CidrEverything);
    }
    Ok(net)
}

/// Parse every entry of one list, with one provenance.
pub fn parse_rules(
    entries: &[String],
    list: ListKind,
    provenance: &Provenance,
) -> Result<Vec<Rule<DomainPattern>>, PatternError> {
    entries
        .iter()
        .map(|text| {
            Ok(Rule {
                pattern: DomainPattern::parse(text, list)?,
                text: text.as_str().into(),
                provenance: provenance.clone(),
            })
        })
        .collect()
}

/// The effective domain rules of a policy.
#[derive(Clone, Debug, Default)]
pub struct DomainRules {
    pub denied: Vec<Rule<DomainPattern>>,
    pub allowed: Vec<Rule<DomainPattern>>,
    /// `deniedDomainReasons`: denied entry text (as written) -> reason shown with the denial.
    pub denied_reasons: BTreeMap<String, String>,
    /// Never ask: a host in no list is denied.
    pub strict_allowlist: bool,
    /// No filtering: everything not denied is allowed.
    pub unrestricted: bool,
}

/// `host[:port]` followed by `parts`, built without the formatting machinery (this is on the
/// proxy's hot path).
fn reason(host: HostRef<'_>, port: Option<u16>, parts: &[&str]) -> String {
    let extra: usize = parts.iter().map(|p| p.len()).sum();
    let mut out = String::with_capacity(host_len_hint(host) + 6 + extra);
    match host {
        HostRef::Name(name) => out.push_str(name),
        ip => {
            use fmt::Write;
            let _ = write!(out, "{ip}");
        }
    }
    if let Some(port) = port {
        out.push(':');
        push_decimal(&mut out, port);
    }
    for part in parts {
        out.push_str(part);
    }
    out
}

fn host_len_hint(host: HostRef<'_>) -> usize {
    match host {
        HostRef::Name(name) => name.len(),
        HostRef::Ip(IpAddr::V4(_)) => 15,
        HostRef::Ip(IpAddr::V6(_)) => 41,
    }
}

fn push_decimal(out: &mut String, n: u16) {
    let mut digits = [0u8; 5];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &digits[i..] {
        out.push(char::from(d));
    }
}

impl DomainRules {
    /// The ports `allowedDomains` entries are scoped to (`host:443`), for decisions that must
    /// ask "allowed on some port?" (the stub DNS server).
    pub fn allowed_ports(&self) -> std::collections::BTreeSet<u16> {
        self.allowed
            .iter()
            .filter_map(|rule| rule.pattern.port())
            .collect()
    }

    /// Decide a connection to `host` (as the client sent it; canonicalised here) on `port`
    /// (`None`: unknown). An invalid host is denied, never approvable.
    pub fn decide(&self, host: &str, port: Option<u16>, approver_attached: bool) -> Verdict {
        match canonical_view(host) {
            Ok(canon) => self.decide_ref(canon.view(), port, approver_attached),
            Err(error) => Verdict::deny(
                ReasonKind::InvalidHost,
                format!("invalid host {}: {error}", quote_for_reason(host)),
            ),
        }
    }

    /// Decide a `HOST[:PORT]` target as written by a user (`warden check`): see [`parse_target`].
    pub fn decide_target(&self, target: &str, approver_attached: bool) -> Verdict {
        match parse_target(target) {
            Ok((host, port)) => self.decide_host(&host, port, approver_attached),
            Err(error) => Verdict::deny(
                ReasonKind::InvalidHost,
                format!("invalid host {}: {error}", quote_for_reason(target)),
            ),
        }
    }

    /// Decide a connection to an already canonical host.
    pub fn decide_host(&self, host: &Host, port: Option<u16>, approver_attached: bool) -> Verdict {
        self.decide_ref(host.view(), port, approver_attached)
    }

    fn decide_ref(&self, host: HostRef<'_>, port: Option<u16>, approver_attached: bool) -> Verdict {
        if let Some(rule) = self
            .denied
            .iter()
            .find(|rule| rule.pattern.matches_in(host, port, ListKind::Deny))
        {
            let reason = match self.denied_reasons.get(&*rule.text) {
                Some(why) => reason(host, port, &[" is in deniedDomains: ", why]),
                None => reason(host, port, &[" is in deniedDomains"]),
            };
            return Verdict::deny(ReasonKind::DomainDenied, reason)
                .with_rule(rule.to_ref(DENIED_LIST));
        }
        if let Some(rule) = self
            .allowed
            .iter()
            .find(|rule| rule.pattern.matches_in(host, port, ListKind::Allow))
        {
            return Verdict::allow(
                ReasonKind::DomainAllowed,
                reason(host, port, &[" is in allowedDomains"]),
            )
            .with_rule(rule.to_ref(ALLOWED_LIST));
        }
        if self.unrestricted {
            return Verdict::allow(
                ReasonKind::NetworkUnrestricted,
                reason(host, port, &[": network access is unrestricted"]),
            );
        }
        if approver_attached && !self.strict_allowlist {
            return Verdict::ask(
                ReasonKind::DomainAsk,
                reason(
                    host,
                    port,
                    &[" is not in allowedDomains; approval required"],
                ),
            );
        }
        let text = if self.strict_allowlist {
            " is not in allowedDomains (strictAllowlist)"
        } else {
            " is not in allowedDomains"
        };
        Verdict::deny(ReasonKind::DomainNotAllowed, reason(host, port, &[text]))
    }
}

/// Quote untrusted input for a reason: escaped, and cut to 64 characters.
fn quote_for_reason(input: &str) -> String {
    const MAX: usize = 64;
    match input.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{:?}", format!("{}…", &input[..cut])),
        None => format!("{input:?}"),
    }
}

/// The pattern that "allow always" persists for `host`: a name with three or more labels
/// persists `*.parent` (`registry.npmjs.org` -> `*.npmjs.org`) unless the parent is itself a
/// public suffix of either section of the list ([`is_public_suffix`]; `x.co.uk` -> `x.co.uk`,
/// `octocat.github.io` -> `octocat.github.io`), any other name persists itself,
/// and IP addresses persist as literals (IPv6 in brackets). The result always parses as an
/// `allowedDomains` entry.
pub fn persist_pattern(host: &Host) -> String {
    match host {
        Host::Ip(_) => host.to_string(),
        Host::Name(name) => match name.split_once('.') {
            Some((_, parent)) if parent.contains('.') && !is_public_suffix(parent) => {
                format!("*.{parent}")
            }
            _ => name.clone(),
        },
    }
}

#[cfg(test)]
#[path = "domain_tests.rs"]
mod tests;

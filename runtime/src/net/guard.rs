//! The DNS-rebinding guard: which resolved address a proxied connection (or a stub DNS answer)
//! may go to.
//!
//! The policy decides on names; a name can resolve to anything, including the host's loopback
//! or the cloud metadata service. [`AddressGuard::check`] refuses, unless the address is
//! explicitly allowed by an IP or CIDR entry of `allowedDomains` ([`GuardConfig::allowed`]):
//!
//! | class | addresses |
//! | --- | --- |
//! | [`CloudMetadata`](AddressClass::CloudMetadata) | [`CLOUD_METADATA`]: `169.254.169.254` (AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean, ...), `169.254.170.2` (AWS ECS task metadata), `fd00:ec2::254` (AWS IMDS over IPv6), `100.100.100.200` (Alibaba Cloud), `168.63.129.16` (Azure WireServer) |
//! | [`Loopback`](AddressClass::Loopback) | `127.0.0.0/8`, `::1` |
//! | [`Unspecified`](AddressClass::Unspecified) | `0.0.0.0/8` ("this network"; `0.0.0.0` reaches the host), `::` |
//! | [`LinkLocal`](AddressClass::LinkLocal) | `169.254.0.0/16`, `fe80::/10` |
//! | [`Multicast`](AddressClass::Multicast) | `224.0.0.0/4`, `ff00::/8` |
//! | [`Broadcast`](AddressClass::Broadcast) | `255.255.255.255` |
//! | [`HostAddress`](AddressClass::HostAddress) | every address of the host's interfaces ([`host_addresses`]), re-read at most once per [`HostAddressSource::SYSTEM_REFRESH`] when a decision needs them |
//! | [`Private`](AddressClass::Private) | only with [`GuardConfig::deny_private`]: `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16`, `100.64.0.0/10`, `fc00::/7`, `fec0::/10` |
//!
//! Before any of that, an address inside an IP or CIDR entry of `deniedDomains`
//! ([`GuardConfig::denied`]) is refused as [`Denied`](AddressClass::Denied), naming the entry:
//! the policy applies those entries to the host the client named, the guard to the addresses
//! a name resolves to. No `allowedDomains` entry lifts that refusal.
//!
//! Ports: [`AddressGuard::check_port`] takes the destination port when the caller knows it. A
//! port-scoped deny entry (`10.0.0.0/8:25`) then refuses only on its port, and a port-scoped
//! allow entry (`127.0.0.1:8080`, [`GuardConfig::allowed_on_port`]) lifts a refusal only on its
//! port. When the port is unknown ([`AddressGuard::check`]), port-scoped deny entries refuse on
//! every port and port-scoped allow entries lift on every port.
//!
//! `100.64.0.0/10` (RFC 6598 shared address space: carrier-grade NAT, and Tailscale's tailnet
//! addresses) is treated as private: it is not reachable from the internet, so a public name
//! resolving into it points at the operator's or the user's own network. `fec0::/10` (deprecated
//! site-local) is private for the same reason. Private ranges are allowed by default because
//! corporate and home setups routinely resolve allowed names to them.
//!
//! IPv6 spellings of an IPv4 address are judged as that IPv4 address too ([`embedded_ipv4`]):
//! IPv4-mapped `::ffff:a.b.c.d`, IPv4-translated `::ffff:0:a.b.c.d`, IPv4-compatible
//! `::a.b.c.d`, NAT64 `64:ff9b::/96` and the local-use `64:ff9b:1::/48` (RFC 8215; decoded as a
//! /96 network-specific prefix, the IPv4 in the last 32 bits), 6to4 `2002::/16` and Teredo
//! `2001::/32`. An address is refused when the address itself or the IPv4 it carries is in a
//! refused class or a denied entry. An allow entry lifts a refusal of the address it contains:
//! an entry containing the IPv4 lifts a refusal of the IPv4 (in any spelling); an entry
//! containing the IPv6 address lifts a refusal of the IPv6 address's own class, and of its IPv4
//! only when the entry is that single address (so allowing `2000::/3` does not open
//! `2002:7f00:1::`, a 6to4 spelling of `127.0.0.1`).
//!
//! The host's addresses change while a sandbox runs (a VPN comes up, a container bridge is
//! created, DHCP hands out a new lease). A guard built by [`GuardConfig::from_policy`] therefore
//! re-reads them ([`HostAddressSource::system`]) when its last reading is older than a second
//! and a decision needs them; the reading is shared by every clone of the guard, behind a lock
//! that is never held while the interfaces are read. A guard without a source
//! ([`GuardConfig::host_source`] `None`, as in tests) keeps [`GuardConfig::host_addresses`].

use ipnet::IpNet;
use serde::Serialize;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The cloud metadata endpoints: always refused unless explicitly allowed.
///
/// - `169.254.169.254`: AWS, GCP, Azure, OpenStack, Oracle Cloud, DigitalOcean, Hetzner, ...
/// - `169.254.170.2`: AWS ECS task metadata and credentials.
/// - `fd00:ec2::254`: AWS instance metadata over IPv6 (Nitro).
/// - `100.100.100.200`: Alibaba Cloud.
/// - `168.63.129.16`: Azure WireServer (extension configuration, health probes).
pub const CLOUD_METADATA: [IpAddr; 5] = [
    IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)),
    IpAddr::V4(Ipv4Addr::new(169, 254, 170, 2)),
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254)),
    IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)),
    IpAddr::V4(Ipv4Addr::new(168, 63, 129, 16)),
];

/// Why an address was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AddressClass {
    /// A cloud metadata endpoint ([`CLOUD_METADATA`]).
    CloudMetadata,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `0.0.0.0/8`, `::`.
    Unspecified,
    /// `169.254.0.0/16`, `fe80::/10`.
    LinkLocal,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// One of the host's own interface addresses.
    HostAddress,
    /// RFC 1918, RFC 6598 (CGNAT), unique-local and site-local addresses (refused only with
    /// `warden.network.denyPrivateAddresses`).
    Private,
    /// Inside an IP or CIDR entry of `deniedDomains` ([`GuardConfig::denied`]); never lifted
    /// by an allow entry.
    Denied,
}

impl AddressClass {
    pub fn as_str(self) -> &'static str {
        match self {
            AddressClass::CloudMetadata => "cloud-metadata",
            AddressClass::Loopback => "loopback",
            AddressClass::Unspecified => "unspecified",
            AddressClass::LinkLocal => "link-local",
            AddressClass::Multicast => "multicast",
            AddressClass::Broadcast => "broadcast",
            AddressClass::HostAddress => "host-address",
            AddressClass::Private => "private",
            AddressClass::Denied => "denied",
        }
    }

    /// The class in a sentence: "a loopback address".
    fn describe(self) -> &'static str {
        match self {
            AddressClass::CloudMetadata => "a cloud metadata address",
            AddressClass::Loopback => "a loopback address",
            AddressClass::Unspecified => "an unspecified address",
            AddressClass::LinkLocal => "a link-local address",
            AddressClass::Multicast => "a multicast address",
            AddressClass::Broadcast => "the broadcast address",
            AddressClass::HostAddress => "an address of this host",
            AddressClass::Private => "a private address",
            AddressClass::Denied => "in deniedDomains",
        }
    }
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refused address: "127.0.0.1 is a loopback address (via ::ffff:127.0.0.1)", or
/// "10.250.0.2 is in deniedDomains (entry "10.250.0.0/16"): lab network".
#[derive(Clone, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
pub struct Refusal {
    /// The address that is in the refused class: the IPv4 address when the refusal comes from
    /// the IPv4 an IPv6 address carries.
    pub address: IpAddr,
    pub class: AddressClass,
    /// The address as it was given, when it differs from `address` (an IPv6 spelling).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<IpAddr>,
    /// For [`AddressClass::Denied`]: the `deniedDomains` entry as written in the settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    /// For [`AddressClass::Denied`]: the entry's `deniedDomainReasons` text, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Refusal {
    /// A refusal by a fixed class (no entry, no reason).
    fn of_class(address: IpAddr, class: AddressClass, via: Option<IpAddr>) -> Refusal {
        Refusal {
            address,
            class,
            via,
            entry: None,
            reason: None,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is {}", self.address, self.class.describe())?;
        if let Some(entry) = &self.entry {
            write!(f, " (entry {entry:?})")?;
        }
        if let Some(via) = self.via {
            write!(f, " (via {via})")?;
        }
        if let Some(reason) = &self.reason {
            write!(f, ": {reason}")?;
        }
        Ok(())
    }
}

/// An IP or CIDR entry of `deniedDomains`, applied by the guard to resolved addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeniedNetwork {
    /// The addresses the entry names (an IP literal as `/32` or `/128`).
    pub net: IpNet,
    /// The port the entry is limited to (`10.0.0.0/8:25`); `None`: every port.
    pub port: Option<u16>,
    /// The entry as written in the settings, named in the refusal.
    pub entry: String,
    /// The entry's `deniedDomainReasons` text, if any.
    pub reason: Option<String>,
}

impl DeniedNetwork {
    /// An entry for `net` on every port, without a reason, named as the network is displayed.
    pub fn new(net: IpNet) -> DeniedNetwork {
        DeniedNetwork {
            net,
            port: None,
            entry: net.to_string(),
            reason: None,
        }
    }

    /// Whether the entry refuses `ip` on `port` (`None`: unknown, where a port-scoped entry
    /// refuses too).
    fn covers(&self, ip: IpAddr, port: Option<u16>) -> bool {
        port_matches(self.port, port) && net_contains(&self.net, ip)
    }

    fn refusal(&self, address: IpAddr, via: Option<IpAddr>) -> Refusal {
        Refusal {
            address,
            class: AddressClass::Denied,
            via,
            entry: Some(self.entry.clone()),
            reason: self.reason.clone(),
        }
    }
}

/// The signature of a host address reader ([`HostAddressSource::new`]).
/// `None`: the addresses could not be read (the reading in use is kept; never an empty list
/// taken for the truth — out of descriptors, `getifaddrs` fails, and an empty list would let
/// the host's own addresses through).
type ReadAddresses = dyn Fn() -> Option<Vec<IpAddr>> + Send + Sync;

/// Where the guard re-reads the host's own addresses from, and for how long one reading is
/// trusted. Compared by identity (two sources are equal when they share the reader).
#[derive(Clone)]
pub struct HostAddressSource {
    read: Arc<ReadAddresses>,
    refresh: Duration,
}

impl HostAddressSource {
    /// How long a reading of the system's addresses is trusted: an address the host gains is
    /// refused from the first decision after this much time at the latest.
    pub const SYSTEM_REFRESH: Duration = Duration::from_secs(1);

    /// The host's interfaces ([`host_addresses`], `getifaddrs`), re-read after
    /// [`SYSTEM_REFRESH`](Self::SYSTEM_REFRESH).
    pub fn system() -> HostAddressSource {
        HostAddressSource {
            read: Arc::new(read_host_addresses),
            refresh: Self::SYSTEM_REFRESH,
        }
    }

    /// Any reader (tests inject a fixed or changing list), re-read when the last reading is
    /// `refresh` old or older (`Duration::ZERO`: on every decision).
    pub fn new<F>(read: F, refresh: Duration) -> HostAddressSource
    where
        F: Fn() -> Vec<IpAddr> + Send + Sync + 'static,
    {
        HostAddressSource {
            read: Arc::new(move || Some(read())),
            refresh,
        }
    }

    /// A reader that can fail (`None`), re-read like [`new`](Self::new)'s.
    pub fn fallible<F>(read: F, refresh: Duration) -> HostAddressSource
    where
        F: Fn() -> Option<Vec<IpAddr>> + Send + Sync + 'static,
    {
        HostAddressSource {
            read: Arc::new(read),
            refresh,
        }
    }

    /// How long one reading is trusted.
    pub fn refresh(&self) -> Duration {
        self.refresh
    }

    /// Read the addresses now (`None`: they could not be read).
    pub fn read(&self) -> Option<Vec<IpAddr>> {
        (self.read)()
    }
}

impl fmt::Debug for HostAddressSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostAddressSource")
            .field("refresh", &self.refresh)
            .finish_non_exhaustive()
    }
}

impl PartialEq for HostAddressSource {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.read, &other.read) && self.refresh == other.refresh
    }
}

impl Eq for HostAddressSource {}

/// What the guard lets through besides public addresses, and what it refuses besides the
/// fixed classes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GuardConfig {
    /// Addresses explicitly allowed by the settings on every port (IP and CIDR entries of
    /// `allowedDomains` without a port).
    pub allowed: Vec<IpNet>,
    /// Addresses explicitly allowed on one port (IP and CIDR entries of `allowedDomains` with a
    /// port, `127.0.0.1:8080`): they lift a refusal only for that port when the port is known
    /// ([`AddressGuard::check_port`]), and for any port when it is not.
    pub allowed_on_port: Vec<(IpNet, u16)>,
    /// IP and CIDR entries of `deniedDomains`: refused whatever else allows them.
    pub denied: Vec<DeniedNetwork>,
    /// Refuse private addresses too (`warden.network.denyPrivateAddresses`).
    pub deny_private: bool,
    /// The host's own addresses, always refused unless allowed: the first reading when
    /// `host_source` is set, the fixed set otherwise.
    pub host_addresses: Vec<IpAddr>,
    /// Where to re-read the host's addresses once the reading is stale; `None`: never, keep
    /// `host_addresses` (tests).
    pub host_source: Option<HostAddressSource>,
}

impl GuardConfig {
    /// The guard configuration of a policy: the IP and CIDR entries of the effective
    /// `network.allowedDomains` (port-scoped ones in [`allowed_on_port`](Self::allowed_on_port))
    /// and `network.deniedDomains` (with their ports and `deniedDomainReasons`),
    /// `warden.network.denyPrivateAddresses` (default false), and this host's addresses,
    /// re-read from the system ([`HostAddressSource::system`]).
    pub fn from_policy(policy: &crate::policy::merge::Policy) -> GuardConfig {
        GuardConfig {
            host_addresses: host_addresses(),
            host_source: Some(HostAddressSource::system()),
            ..GuardConfig::from_policy_rules(policy)
        }
    }

    /// [`from_policy`](Self::from_policy) without the host's addresses (none, never re-read).
    pub fn from_policy_rules(policy: &crate::policy::merge::Policy) -> GuardConfig {
        let domains = &policy.domains;
        let mut allowed = Vec::new();
        let mut allowed_on_port = Vec::new();
        for rule in &domains.allowed {
            if let Some(net) = rule.pattern.ip_network() {
                match rule.pattern.port() {
                    Some(port) => allowed_on_port.push((net, port)),
                    None => allowed.push(net),
                }
            }
        }
        let denied = domains
            .denied
            .iter()
            .filter_map(|rule| {
                Some(DeniedNetwork {
                    net: rule.pattern.ip_network()?,
                    port: rule.pattern.port(),
                    entry: rule.text.to_string(),
                    reason: domains.denied_reasons.get(&*rule.text).cloned(),
                })
            })
            .collect();
        GuardConfig {
            allowed,
            allowed_on_port,
            denied,
            deny_private: policy
                .effective
                .bool("warden.network.denyPrivateAddresses")
                .unwrap_or(false),
            host_addresses: Vec::new(),
            host_source: None,
        }
    }
}

/// The DNS-rebinding guard; see the module documentation. Clones share the reading of the
/// host's addresses.
#[derive(Clone, Debug)]
pub struct AddressGuard {
    config: GuardConfig,
    hosts: Arc<HostAddresses>,
}

/// The host's addresses as the guard knows them.
#[derive(Debug)]
enum HostAddresses {
    /// Never re-read.
    Fixed(Arc<[IpAddr]>),
    /// Re-read from `source` when `reading` is stale.
    Live {
        source: HostAddressSource,
        reading: Mutex<Reading>,
    },
}

/// One reading of the host's addresses (canonical: IPv4-mapped ones as IPv4).
#[derive(Debug)]
struct Reading {
    addresses: Arc<[IpAddr]>,
    at: Instant,
}

impl HostAddresses {
    /// The current addresses: the last reading, or a new one when the last is
    /// `source.refresh` old. The lock is held only to look at or replace the reading, never
    /// while the source is read (`getifaddrs` is a netlink round trip); two callers that find
    /// the reading stale at once may both read, and the later reading is kept.
    fn current(&self) -> Arc<[IpAddr]> {
        match self {
            HostAddresses::Fixed(addresses) => Arc::clone(addresses),
            HostAddresses::Live { source, reading } => {
                let now = Instant::now();
                {
                    let last = reading.lock().unwrap_or_else(PoisonError::into_inner);
                    if now.saturating_duration_since(last.at) < source.refresh {
                        return Arc::clone(&last.addresses);
                    }
                }
                let Some(read) = source.read() else {
                    // Unreadable now: keep trusting the last good reading (and try again on
                    // the next decision).
                    let last = reading.lock().unwrap_or_else(PoisonError::into_inner);
                    return Arc::clone(&last.addresses);
                };
                let fresh = canonical_addresses(read);
                let mut last = reading.lock().unwrap_or_else(PoisonError::into_inner);
                if last.at <= now {
                    *last = Reading {
                        addresses: Arc::clone(&fresh),
                        at: now,
                    };
                }
                fresh
            }
        }
    }
}

/// The addresses with IPv4-mapped ones as IPv4.
fn canonical_addresses(addresses: Vec<IpAddr>) -> Arc<[IpAddr]> {
    addresses.into_iter().map(|ip| ip.to_canonical()).collect()
}

/// Whether an entry limited to `entry` (`None`: every port) applies on `port` (`None`:
/// unknown, where every entry applies).
fn port_matches(entry: Option<u16>, port: Option<u16>) -> bool {
    match (entry, port) {
        (Some(want), Some(got)) => want == got,
        _ => true,
    }
}

/// Whether `net` contains `ip` (an IPv4 address also against IPv6 ranges, as
/// `::ffff:a.b.c.d`, the way the policy matches it).
fn net_contains(net: &IpNet, ip: IpAddr) -> bool {
    match (net, ip) {
        (IpNet::V4(net), IpAddr::V4(v4)) => net.contains(&v4),
        (IpNet::V6(net), IpAddr::V6(v6)) => net.contains(&v6),
        (IpNet::V6(net), IpAddr::V4(v4)) => net.contains(&v4.to_ipv6_mapped()),
        (IpNet::V4(_), IpAddr::V6(_)) => false,
    }
}

impl AddressGuard {
    pub fn new(config: GuardConfig) -> AddressGuard {
        let mut config = config;
        config.host_addresses = config
            .host_addresses
            .iter()
            .map(|ip| ip.to_canonical())
            .collect();
        let first: Arc<[IpAddr]> = Arc::from(config.host_addresses.as_slice());
        let hosts = match &config.host_source {
            None => HostAddresses::Fixed(first),
            Some(source) => HostAddresses::Live {
                source: source.clone(),
                reading: Mutex::new(Reading {
                    addresses: first,
                    at: Instant::now(),
                }),
            },
        };
        AddressGuard {
            config,
            hosts: Arc::new(hosts),
        }
    }

    /// The configuration the guard was built with (`host_addresses` is the first reading;
    /// see [`current_host_addresses`](Self::current_host_addresses)).
    pub fn config(&self) -> &GuardConfig {
        &self.config
    }

    /// This guard with the address rules of `policy` (the allow and deny entries and
    /// `denyPrivateAddresses`, after a settings change), sharing the reading of the host's
    /// addresses.
    pub fn with_rules_of(&self, policy: &crate::policy::merge::Policy) -> AddressGuard {
        let fresh = GuardConfig::from_policy_rules(policy);
        let mut config = self.config.clone();
        config.allowed = fresh.allowed;
        config.allowed_on_port = fresh.allowed_on_port;
        config.denied = fresh.denied;
        config.deny_private = fresh.deny_private;
        AddressGuard {
            config,
            hosts: self.hosts.clone(),
        }
    }

    /// The host addresses decisions use now (re-read first if the reading is stale).
    pub fn current_host_addresses(&self) -> Arc<[IpAddr]> {
        self.hosts.current()
    }

    /// `Ok` when a connection to `ip` may be made on a port the caller does not know;
    /// otherwise why not. See [`check_port`](Self::check_port).
    pub fn check(&self, ip: IpAddr) -> Result<(), Refusal> {
        self.check_port(ip, None)
    }

    /// `Ok` when a connection to `ip` on `port` (`None`: unknown) may be made; otherwise why
    /// not. A `deniedDomains` entry containing the address (or the IPv4 it carries) refuses
    /// first, and nothing lifts that; then the classes of the module documentation, lifted by
    /// `allowedDomains` entries. Port-scoped entries apply only on their port when `port` is
    /// known, and always when it is not.
    pub fn check_port(&self, ip: IpAddr, port: Option<u16>) -> Result<(), Refusal> {
        if let Some(refusal) = self.denied(ip, port) {
            return Err(refusal);
        }
        let hosts = self.hosts.current();
        match ip {
            IpAddr::V4(v4) => match self.refused(ipv4_class(v4), ip, &hosts) {
                Some(class) if !self.allows(ip, port) => Err(Refusal::of_class(ip, class, None)),
                _ => Ok(()),
            },
            IpAddr::V6(v6) => {
                let exact = self.allows_exactly(v6, port);
                if let Some(class) = self.refused(ipv6_class(v6), ip, &hosts) {
                    if !exact && !self.allows(ip, port) {
                        return Err(Refusal::of_class(ip, class, None));
                    }
                }
                if let Some(v4) = embedded_ipv4(v6) {
                    let carried = IpAddr::V4(v4);
                    if let Some(class) = self.refused(ipv4_class(v4), carried, &hosts) {
                        if !exact && !self.allows(carried, port) {
                            return Err(Refusal::of_class(carried, class, Some(ip)));
                        }
                    }
                }
                Ok(())
            }
        }
    }

    /// The refusal by a `deniedDomains` entry containing `ip`, or else the IPv4 it carries.
    fn denied(&self, ip: IpAddr, port: Option<u16>) -> Option<Refusal> {
        if let Some(entry) = self.denied_entry(ip, port) {
            return Some(entry.refusal(ip, None));
        }
        let IpAddr::V6(v6) = ip else {
            return None;
        };
        let carried = IpAddr::V4(embedded_ipv4(v6)?);
        self.denied_entry(carried, port)
            .map(|entry| entry.refusal(carried, Some(ip)))
    }

    fn denied_entry(&self, ip: IpAddr, port: Option<u16>) -> Option<&DeniedNetwork> {
        self.config
            .denied
            .iter()
            .find(|entry| entry.covers(ip, port))
    }

    /// The allow entries that apply on `port`: every-port ones, and port-scoped ones for that
    /// port (all of them when the port is unknown).
    fn allow_entries(&self, port: Option<u16>) -> impl Iterator<Item = &IpNet> + '_ {
        let scoped = self
            .config
            .allowed_on_port
            .iter()
            .filter(move |(_, want)| port_matches(Some(*want), port))
            .map(|(net, _)| net);
        self.config.allowed.iter().chain(scoped)
    }

    /// Whether an allow entry that applies on `port` contains `ip`.
    fn allows(&self, ip: IpAddr, port: Option<u16>) -> bool {
        self.allow_entries(port).any(|net| net_contains(net, ip))
    }

    /// Whether `ip` itself is an allow entry that applies on `port` (an IPv6 literal, `/128`).
    fn allows_exactly(&self, ip: Ipv6Addr, port: Option<u16>) -> bool {
        self.allow_entries(port)
            .any(|net| matches!(net, IpNet::V6(net) if net.prefix_len() == 128 && net.addr() == ip))
    }

    /// The refusing class of `ip`, given its fixed class: a host address is reported as
    /// such rather than as private, and private ones count only with `deny_private`.
    fn refused(
        &self,
        class: Option<AddressClass>,
        ip: IpAddr,
        hosts: &[IpAddr],
    ) -> Option<AddressClass> {
        let host = hosts.contains(&ip);
        match class {
            Some(AddressClass::Private) if host => Some(AddressClass::HostAddress),
            Some(AddressClass::Private) => {
                self.config.deny_private.then_some(AddressClass::Private)
            }
            Some(other) => Some(other),
            None => host.then_some(AddressClass::HostAddress),
        }
    }
}

/// The class of an IPv4 address that is refused by default or, for [`AddressClass::Private`],
/// with `deny_private`; `None` for ordinary addresses. Host addresses are not considered here.
pub fn ipv4_class(ip: Ipv4Addr) -> Option<AddressClass> {
    let o = ip.octets();
    if CLOUD_METADATA.contains(&IpAddr::V4(ip)) {
        Some(AddressClass::CloudMetadata)
    } else if o[0] == 127 {
        Some(AddressClass::Loopback)
    } else if o[0] == 0 {
        Some(AddressClass::Unspecified)
    } else if o[0] == 169 && o[1] == 254 {
        Some(AddressClass::LinkLocal)
    } else if (224..=239).contains(&o[0]) {
        Some(AddressClass::Multicast)
    } else if ip == Ipv4Addr::BROADCAST {
        Some(AddressClass::Broadcast)
    } else if o[0] == 10
        || (o[0] == 172 && (16..=31).contains(&o[1]))
        || (o[0] == 192 && o[1] == 168)
        || (o[0] == 100 && (64..=127).contains(&o[1]))
    {
        Some(AddressClass::Private)
    } else {
        None
    }
}

/// The class of an IPv6 address itself (not of an IPv4 address it carries), as
/// [`ipv4_class`].
pub fn ipv6_class(ip: Ipv6Addr) -> Option<AddressClass> {
    let s = ip.segments();
    if CLOUD_METADATA.contains(&IpAddr::V6(ip)) {
        Some(AddressClass::CloudMetadata)
    } else if ip == Ipv6Addr::LOCALHOST {
        Some(AddressClass::Loopback)
    } else if ip == Ipv6Addr::UNSPECIFIED {
        Some(AddressClass::Unspecified)
    } else if s[0] & 0xffc0 == 0xfe80 {
        Some(AddressClass::LinkLocal)
    } else if s[0] & 0xff00 == 0xff00 {
        Some(AddressClass::Multicast)
    } else if s[0] & 0xfe00 == 0xfc00 || s[0] & 0xffc0 == 0xfec0 {
        Some(AddressClass::Private)
    } else {
        None
    }
}

/// The IPv4 address an IPv6 address spells, if it is one of these forms:
///
/// - IPv4-mapped `::ffff:a.b.c.d` and IPv4-translated `::ffff:0:a.b.c.d`: the last 32 bits;
/// - IPv4-compatible `::a.b.c.d` (deprecated): the last 32 bits, except for `::` and `::1`,
///   which are IPv6's own unspecified and loopback addresses;
/// - NAT64 `64:ff9b::/96` (RFC 6052) and `64:ff9b:1::/48` (RFC 8215, assumed to hold a /96
///   network-specific prefix): the last 32 bits;
/// - 6to4 `2002:AABB:CCDD::/48`: bits 16..48;
/// - Teredo `2001:0::/32`: the client address, the last 32 bits inverted.
pub fn embedded_ipv4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let bits = u128::from(ip);
    let last32 = Ipv4Addr::from((bits & 0xffff_ffff) as u32);
    match s {
        // ::ffff:a.b.c.d
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(last32),
        // ::ffff:0:a.b.c.d
        [0, 0, 0, 0, 0xffff, 0, _, _] => Some(last32),
        // ::a.b.c.d, but not :: or ::1
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => None,
        [0, 0, 0, 0, 0, 0, _, _] => Some(last32),
        // 64:ff9b::/96
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(last32),
        // 64:ff9b:1::/48 with a /96 prefix inside it
        [0x64, 0xff9b, 1, _, _, _, _, _] => Some(last32),
        // 2002:AABB:CCDD::/48
        [0x2002, hi, lo, _, _, _, _, _] => {
            Some(Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo)))
        }
        // 2001:0:SERVER:FLAGS:PORT:CLIENT
        [0x2001, 0, _, _, _, _, _, _] => {
            Some(Ipv4Addr::from(((bits & 0xffff_ffff) as u32) ^ 0xffff_ffff))
        }
        _ => None,
    }
}

/// Every address of every interface of this host (`getifaddrs`), IPv4-mapped ones as IPv4,
/// without duplicates. Errors give an empty list (see [`read_host_addresses`]).
pub fn host_addresses() -> Vec<IpAddr> {
    read_host_addresses().unwrap_or_default()
}

/// [`host_addresses`], `None` when they cannot be read (out of descriptors, say) — retried a
/// few times first.
pub fn read_host_addresses() -> Option<Vec<IpAddr>> {
    let interfaces = (0..3).find_map(|i| {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        nix::ifaddrs::getifaddrs().ok()
    })?;
    let mut out: Vec<IpAddr> = Vec::new();
    for interface in interfaces {
        let Some(address) = interface.address else {
            continue;
        };
        let ip = if let Some(v4) = address.as_sockaddr_in() {
            IpAddr::V4(v4.ip())
        } else if let Some(v6) = address.as_sockaddr_in6() {
            IpAddr::V6(v6.ip()).to_canonical()
        } else {
            continue;
        };
        if !out.contains(&ip) {
            out.push(ip);
        }
    }
    Some(out)
}

#[cfg(test)]
#[path = "guard_tests.rs"]
mod tests;

/// An [`AddressGuard`] that follows the live policy: when the settings change during a run
/// (a new generation of the [`LivePolicy`](crate::policy::live::LivePolicy)), the next
/// decision uses the new allow and deny entries.
#[derive(Debug)]
pub struct LiveGuard {
    live: Option<Arc<crate::policy::live::LivePolicy>>,
    current: Mutex<(u64, Arc<AddressGuard>)>,
}

impl LiveGuard {
    /// A guard that never changes.
    pub fn fixed(guard: AddressGuard) -> LiveGuard {
        LiveGuard {
            live: None,
            current: Mutex::new((0, Arc::new(guard))),
        }
    }

    /// `guard` (built from `live`'s current policy), rebuilt when `live` changes.
    pub fn following(guard: AddressGuard, live: Arc<crate::policy::live::LivePolicy>) -> LiveGuard {
        let generation = live.generation();
        LiveGuard {
            live: Some(live),
            current: Mutex::new((generation, Arc::new(guard))),
        }
    }

    /// The guard for the next decision.
    pub fn get(&self) -> Arc<AddressGuard> {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(live) = &self.live {
            let generation = live.generation();
            if generation != current.0 {
                let next = current.1.with_rules_of(&live.get());
                *current = (generation, Arc::new(next));
            }
        }
        current.1.clone()
    }
}

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
//! | [`HostAddress`](AddressClass::HostAddress) | every address of the host's interfaces ([`host_addresses`]) |
//! | [`Private`](AddressClass::Private) | only with [`GuardConfig::deny_private`]: `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16`, `100.64.0.0/10`, `fc00::/7`, `fec0::/10` |
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
//! refused class. An allow entry lifts a refusal of the address it contains: an entry
//! containing the IPv4 lifts a refusal of the IPv4 (in any spelling); an entry containing the
//! IPv6 address lifts a refusal of the IPv6 address's own class, and of its IPv4 only when the
//! entry is that single address (so allowing `2000::/3` does not open `2002:7f00:1::`, a 6to4
//! spelling of `127.0.0.1`).

use ipnet::IpNet;
use serde::Serialize;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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
        }
    }
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refused address: "127.0.0.1 is a loopback address (via ::ffff:127.0.0.1)".
#[derive(Clone, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
pub struct Refusal {
    /// The address that is in the refused class: the IPv4 address when the refusal comes from
    /// the IPv4 an IPv6 address carries.
    pub address: IpAddr,
    pub class: AddressClass,
    /// The address as it was given, when it differs from `address` (an IPv6 spelling).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<IpAddr>,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is {}", self.address, self.class.describe())?;
        if let Some(via) = self.via {
            write!(f, " (via {via})")?;
        }
        Ok(())
    }
}

/// What the guard lets through besides public addresses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GuardConfig {
    /// Addresses explicitly allowed by the settings (IP and CIDR entries of `allowedDomains`).
    pub allowed: Vec<IpNet>,
    /// Refuse private addresses too (`warden.network.denyPrivateAddresses`).
    pub deny_private: bool,
    /// The host's own addresses, always refused unless allowed.
    pub host_addresses: Vec<IpAddr>,
}

impl GuardConfig {
    /// The guard configuration of a policy: the IP and CIDR entries of the effective
    /// `network.allowedDomains` (port-scoped ones included: the port is the policy's check),
    /// `warden.network.denyPrivateAddresses` (default false) and this host's addresses.
    pub fn from_policy(policy: &crate::policy::merge::Policy) -> GuardConfig {
        GuardConfig {
            allowed: policy.domains.allowed_networks(),
            deny_private: policy
                .effective
                .bool("warden.network.denyPrivateAddresses")
                .unwrap_or(false),
            host_addresses: host_addresses(),
        }
    }
}

/// The DNS-rebinding guard; see the module documentation.
#[derive(Clone, Debug)]
pub struct AddressGuard {
    config: GuardConfig,
}

impl AddressGuard {
    pub fn new(config: GuardConfig) -> AddressGuard {
        let mut config = config;
        config.host_addresses = config
            .host_addresses
            .iter()
            .map(|ip| ip.to_canonical())
            .collect();
        AddressGuard { config }
    }

    pub fn config(&self) -> &GuardConfig {
        &self.config
    }

    /// `Ok` when a connection to `ip` may be made; otherwise the class that refuses it.
    pub fn check(&self, ip: IpAddr) -> Result<(), Refusal> {
        match ip {
            IpAddr::V4(v4) => match self.refused_v4(v4) {
                Some(class) if !self.allows(IpAddr::V4(v4)) => Err(Refusal {
                    address: ip,
                    class,
                    via: None,
                }),
                _ => Ok(()),
            },
            IpAddr::V6(v6) => {
                let exact = self.allows_exactly(v6);
                if let Some(class) = self.refused_v6(v6) {
                    if !exact && !self.allows(ip) {
                        return Err(Refusal {
                            address: ip,
                            class,
                            via: None,
                        });
                    }
                }
                if let Some(v4) = embedded_ipv4(v6) {
                    if let Some(class) = self.refused_v4(v4) {
                        if !exact && !self.allows(IpAddr::V4(v4)) {
                            return Err(Refusal {
                                address: IpAddr::V4(v4),
                                class,
                                via: Some(ip),
                            });
                        }
                    }
                }
                Ok(())
            }
        }
    }

    /// Whether an allowed entry contains `ip` (an IPv4 address also against IPv6 ranges, as
    /// `::ffff:a.b.c.d`, the way the policy matches it).
    fn allows(&self, ip: IpAddr) -> bool {
        self.config.allowed.iter().any(|net| match (net, ip) {
            (IpNet::V4(net), IpAddr::V4(v4)) => net.contains(&v4),
            (IpNet::V6(net), IpAddr::V6(v6)) => net.contains(&v6),
            (IpNet::V6(net), IpAddr::V4(v4)) => net.contains(&v4.to_ipv6_mapped()),
            (IpNet::V4(_), IpAddr::V6(_)) => false,
        })
    }

    /// Whether `ip` itself is an allowed entry (an IPv6 literal, `/128`).
    fn allows_exactly(&self, ip: Ipv6Addr) -> bool {
        self.config
            .allowed
            .iter()
            .any(|net| matches!(net, IpNet::V6(net) if net.prefix_len() == 128 && net.addr() == ip))
    }

    fn is_host(&self, ip: IpAddr) -> bool {
        self.config.host_addresses.contains(&ip)
    }

    fn refused_v4(&self, ip: Ipv4Addr) -> Option<AddressClass> {
        self.refused(ipv4_class(ip), IpAddr::V4(ip))
    }

    fn refused_v6(&self, ip: Ipv6Addr) -> Option<AddressClass> {
        self.refused(ipv6_class(ip), IpAddr::V6(ip))
    }

    /// The refusing class of `ip`, given its fixed class: a host address is reported as
    /// such rather than as private, and private ones count only with `deny_private`.
    fn refused(&self, class: Option<AddressClass>, ip: IpAddr) -> Option<AddressClass> {
        let host = self.is_host(ip);
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
/// without duplicates. Errors give an empty list: the fixed classes still hold.
pub fn host_addresses() -> Vec<IpAddr> {
    let Ok(interfaces) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
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
    out
}

#[cfg(test)]
#[path = "guard_tests.rs"]
mod tests;

//! Name resolution by warden: the proxy and the stub DNS server resolve every allowed name
//! here, so an address the sandbox resolved itself is never trusted for a name.
//!
//! [`Resolver`] wraps hickory's tokio resolver and a hosts file:
//!
//! - The hosts file (`/etc/hosts` for [`Resolver::from_system`]) is consulted first, like
//!   glibc's `hosts: files dns`: a name it lists is answered from it alone (a family it does
//!   not list has no records), without a query. It is re-read when its modification time or
//!   size changes, so entries added while warden runs are honoured.
//! - Other names go to the nameservers, as fully-qualified names: `search` and `domain` from
//!   resolv.conf are not applied, because the policy decided on the exact name and a search
//!   suffix would connect to a different host than the one decided.
//! - IP literals (any spelling the policy accepts, e.g. `127.1` or `[::1]`) are returned as
//!   they are, without a query.
//! - Every lookup gives up after [`LOOKUP_TIMEOUT`].
//!
//! When `/etc/resolv.conf` is missing, unreadable or names no nameserver,
//! [`Resolver::from_system`] uses `127.0.0.1:53`, the default glibc documents in resolv.conf(5);
//! hosts-file names resolve either way.

use crate::policy::domain::{canonical_host, Host};
use hickory_resolver::config::{
    ConnectionConfig, NameServerConfig, ResolveHosts, ResolverConfig, ResolverOpts,
};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::NetError;
use hickory_resolver::proto::op::Query;
use hickory_resolver::proto::rr::{Name, RecordType};
use hickory_resolver::{Hosts, TokioResolver};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// Upper bound on one lookup, both families together.
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);
/// Upper bound on one query to one nameserver (hickory retries within [`LOOKUP_TIMEOUT`]).
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);

pub const SYSTEM_RESOLV_CONF: &str = "/etc/resolv.conf";
pub const SYSTEM_HOSTS: &str = "/etc/hosts";

/// Why a name did not resolve.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error("{name:?} is not a valid host name: {reason}")]
    InvalidName { name: String, reason: String },
    /// NXDOMAIN, or a name outside the hosts file when no nameserver is configured.
    #[error("{name} does not exist")]
    NotFound { name: String },
    /// The name exists but has no records of the family asked for (NODATA).
    #[error("{name} has no {family} records")]
    NoRecords { name: String, family: Family },
    #[error("resolving {name} timed out")]
    Timeout { name: String },
    #[error("resolving {name} failed: {message}")]
    Failed { name: String, message: String },
    #[error("cannot build the resolver: {0}")]
    Config(String),
}

impl ResolveError {
    /// NXDOMAIN or NODATA: the name has no addresses, as opposed to a failure to find out.
    pub fn is_negative(&self) -> bool {
        matches!(
            self,
            ResolveError::NotFound { .. } | ResolveError::NoRecords { .. }
        )
    }
}

/// Which addresses a lookup asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// A records.
    V4,
    /// AAAA records.
    V6,
    /// Both.
    Any,
}

impl Family {
    fn record_type(self) -> Option<RecordType> {
        match self {
            Family::V4 => Some(RecordType::A),
            Family::V6 => Some(RecordType::AAAA),
            Family::Any => None,
        }
    }

    fn matches(self, ip: &IpAddr) -> bool {
        match self {
            Family::V4 => ip.is_ipv4(),
            Family::V6 => ip.is_ipv6(),
            Family::Any => true,
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::V4 => "A",
            Family::V6 => "AAAA",
            Family::Any => "address",
        })
    }
}

/// A hosts file, re-read when it changes.
struct HostsFile {
    path: PathBuf,
    state: Mutex<HostsState>,
}

struct HostsState {
    /// Modification time and size of the version loaded.
    stamp: Option<(SystemTime, u64)>,
    hosts: Arc<Hosts>,
}

impl HostsFile {
    fn new(path: &Path) -> HostsFile {
        let file = HostsFile {
            path: path.to_path_buf(),
            state: Mutex::new(HostsState {
                stamp: None,
                hosts: Arc::new(Hosts::default()),
            }),
        };
        file.current();
        file
    }

    fn stamp(&self) -> Option<(SystemTime, u64)> {
        let meta = std::fs::metadata(&self.path).ok()?;
        Some((meta.modified().ok()?, meta.len()))
    }

    /// The hosts as the file is now: reloaded when its stamp changed; a missing or unreadable
    /// file is an empty one.
    fn current(&self) -> Arc<Hosts> {
        let stamp = self.stamp();
        let Ok(mut state) = self.state.lock() else {
            return Arc::new(Hosts::default());
        };
        if state.stamp != stamp || stamp.is_none() {
            let mut hosts = Hosts::default();
            if let Ok(file) = std::fs::File::open(&self.path) {
                // A read error part-way keeps what was read so far.
                let _ = hosts.read_hosts_conf(std::io::BufReader::new(file));
            }
            state.hosts = Arc::new(hosts);
            state.stamp = stamp;
        }
        state.hosts.clone()
    }
}

/// Name resolution by warden; see the module documentation. Cheap to clone.
#[derive(Clone)]
pub struct Resolver {
    /// `None`: no nameserver, only the hosts file answers.
    dns: Option<TokioResolver>,
    hosts: Option<Arc<HostsFile>>,
}

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolver")
            .field("dns", &self.dns.is_some())
            .field("hosts", &self.hosts.as_ref().map(|h| h.path.clone()))
            .finish()
    }
}

impl Resolver {
    /// The host's configuration: the nameservers and options of `/etc/resolv.conf` (see the
    /// module documentation for the fallback) and `/etc/hosts`.
    pub fn from_system() -> Result<Resolver, ResolveError> {
        Self::from_files(Path::new(SYSTEM_RESOLV_CONF), Some(Path::new(SYSTEM_HOSTS)))
    }

    /// [`Resolver::from_system`] with other files.
    pub fn from_files(
        resolv_conf: &Path,
        hosts_file: Option<&Path>,
    ) -> Result<Resolver, ResolveError> {
        #[cfg(not(target_vendor = "apple"))]
        let parsed = std::fs::read(resolv_conf)
            .ok()
            .and_then(|data| hickory_resolver::system_conf::parse_resolv_conf(data).ok());
        // macOS: resolv.conf is informational there and hickory has no parser for it; the
        // resolver configuration comes from the SystemConfiguration framework instead.
        #[cfg(target_vendor = "apple")]
        let parsed = {
            let _ = resolv_conf;
            hickory_resolver::system_conf::read_system_conf().ok()
        };
        let (servers, mut options) = match parsed {
            Some((config, options)) => (config.name_servers, options),
            None => (
                vec![NameServerConfig::udp_and_tcp(IpAddr::V4(
                    Ipv4Addr::LOCALHOST,
                ))],
                ResolverOpts::default(),
            ),
        };
        options.timeout = options
            .timeout
            .clamp(Duration::from_millis(500), LOOKUP_TIMEOUT);
        options.attempts = options.attempts.clamp(1, 5);
        Self::build(servers, options, hosts_file)
    }

    /// Explicit nameservers (UDP, then TCP on truncation, at the given ports) and an optional
    /// hosts file. With no nameserver, only the hosts file answers and every other name is
    /// [`ResolveError::NotFound`].
    pub fn with_nameservers(
        servers: Vec<SocketAddr>,
        hosts_file: Option<&Path>,
    ) -> Result<Resolver, ResolveError> {
        let servers = servers
            .into_iter()
            .map(|addr| {
                let mut udp = ConnectionConfig::udp();
                udp.port = addr.port();
                let mut tcp = ConnectionConfig::tcp();
                tcp.port = addr.port();
                NameServerConfig::new(addr.ip(), true, vec![udp, tcp])
            })
            .collect();
        let mut options = ResolverOpts::default();
        options.timeout = QUERY_TIMEOUT;
        options.attempts = 2;
        Self::build(servers, options, hosts_file)
    }

    fn build(
        servers: Vec<NameServerConfig>,
        mut options: ResolverOpts,
        hosts_file: Option<&Path>,
    ) -> Result<Resolver, ResolveError> {
        // The hosts file is ours (re-read on change); hickory's would be read once.
        options.use_hosts_file = ResolveHosts::Never;
        let dns = if servers.is_empty() {
            None
        } else {
            let config = ResolverConfig::from_name_servers(servers);
            let resolver =
                TokioResolver::builder_with_config(config, TokioRuntimeProvider::default())
                    .with_options(options)
                    .build()
                    .map_err(|e| ResolveError::Config(e.to_string()))?;
            Some(resolver)
        };
        Ok(Resolver {
            dns,
            hosts: hosts_file.map(|p| Arc::new(HostsFile::new(p))),
        })
    }

    /// The IPv4 and IPv6 addresses of `name`: IPv4 first, without duplicates, never empty
    /// on success. An IP literal is returned as is. Succeeds when either family has addresses.
    pub async fn lookup(&self, name: &str) -> Result<Vec<IpAddr>, ResolveError> {
        self.lookup_family(name, Family::Any).await
    }

    /// The addresses of `name` of one family (`Family::V4`: A records, `Family::V6`: AAAA), or
    /// of both (`Family::Any`, as [`Resolver::lookup`]). An IP literal of another family is
    /// [`ResolveError::NoRecords`].
    pub async fn lookup_family(
        &self,
        name: &str,
        family: Family,
    ) -> Result<Vec<IpAddr>, ResolveError> {
        let canonical = match canonical_host(name) {
            Ok(Host::Ip(ip)) if family.matches(&ip) => return Ok(vec![ip]),
            Ok(Host::Ip(ip)) => {
                return Err(ResolveError::NoRecords {
                    name: ip.to_string(),
                    family,
                })
            }
            Ok(Host::Name(canonical)) => canonical,
            Err(e) => {
                return Err(ResolveError::InvalidName {
                    name: name.chars().take(256).collect(),
                    reason: e.to_string(),
                })
            }
        };
        let fqdn =
            Name::from_ascii(format!("{canonical}.")).map_err(|e| ResolveError::InvalidName {
                name: canonical.clone(),
                reason: e.to_string(),
            })?;
        let work = async {
            match family.record_type() {
                Some(record_type) => self.query(&canonical, &fqdn, record_type).await,
                None => {
                    let (v4, v6) = tokio::join!(
                        self.query(&canonical, &fqdn, RecordType::A),
                        self.query(&canonical, &fqdn, RecordType::AAAA)
                    );
                    combine(&canonical, v4, v6)
                }
            }
        };
        match tokio::time::timeout(LOOKUP_TIMEOUT, work).await {
            Ok(result) => result,
            Err(_) => Err(ResolveError::Timeout { name: canonical }),
        }
    }

    /// One record type of one canonical name: the hosts file, else DNS.
    async fn query(
        &self,
        name: &str,
        fqdn: &Name,
        record_type: RecordType,
    ) -> Result<Vec<IpAddr>, ResolveError> {
        let family = if record_type == RecordType::AAAA {
            Family::V6
        } else {
            Family::V4
        };
        let no_records = || ResolveError::NoRecords {
            name: name.to_string(),
            family,
        };
        if let Some(listed) = self.hosts_lookup(fqdn, record_type) {
            return if listed.is_empty() {
                Err(no_records())
            } else {
                Ok(listed)
            };
        }
        let Some(dns) = &self.dns else {
            return Err(ResolveError::NotFound {
                name: name.to_string(),
            });
        };
        match dns.lookup(fqdn.clone(), record_type).await {
            Ok(lookup) => {
                let mut out: Vec<IpAddr> = Vec::new();
                for ip in lookup.answers().iter().filter_map(|r| r.data.ip_addr()) {
                    if family.matches(&ip) && !out.contains(&ip) {
                        out.push(ip);
                    }
                }
                if out.is_empty() {
                    Err(no_records())
                } else {
                    Ok(out)
                }
            }
            Err(e) => Err(map_error(name, family, e)),
        }
    }

    /// `Some(addresses of record_type)` when the hosts file lists `fqdn` in either family.
    fn hosts_lookup(&self, fqdn: &Name, record_type: RecordType) -> Option<Vec<IpAddr>> {
        let hosts = self.hosts.as_ref()?.current();
        let addresses = |rt: RecordType| {
            hosts
                .lookup_static_host(&Query::query(fqdn.clone(), rt))
                .map(|lookup| {
                    lookup
                        .answers()
                        .iter()
                        .filter_map(|r| r.data.ip_addr())
                        .collect::<Vec<_>>()
                })
        };
        let (v4, v6) = (addresses(RecordType::A), addresses(RecordType::AAAA));
        if v4.is_none() && v6.is_none() {
            return None;
        }
        let wanted = if record_type == RecordType::AAAA {
            v6
        } else {
            v4
        };
        let mut out: Vec<IpAddr> = Vec::new();
        for ip in wanted.unwrap_or_default() {
            if !out.contains(&ip) {
                out.push(ip);
            }
        }
        Some(out)
    }
}

fn map_error(name: &str, family: Family, error: NetError) -> ResolveError {
    if error.is_nx_domain() {
        ResolveError::NotFound {
            name: name.to_string(),
        }
    } else if error.is_no_records_found() {
        ResolveError::NoRecords {
            name: name.to_string(),
            family,
        }
    } else if matches!(error, NetError::Timeout) {
        ResolveError::Timeout {
            name: name.to_string(),
        }
    } else {
        ResolveError::Failed {
            name: name.to_string(),
            message: error.to_string(),
        }
    }
}

/// Both families into one answer: IPv4 first, without duplicates; one family with addresses
/// is enough. Otherwise NXDOMAIN wins, then a failure, then "no addresses".
fn combine(
    name: &str,
    v4: Result<Vec<IpAddr>, ResolveError>,
    v6: Result<Vec<IpAddr>, ResolveError>,
) -> Result<Vec<IpAddr>, ResolveError> {
    match (v4, v6) {
        (Ok(a), Ok(b)) => {
            let mut out = a;
            for ip in b {
                if !out.contains(&ip) {
                    out.push(ip);
                }
            }
            Ok(out)
        }
        (Ok(a), Err(_)) => Ok(a),
        (Err(_), Ok(b)) => Ok(b),
        (Err(a), Err(b)) => {
            let nx = |e: &ResolveError| matches!(e, ResolveError::NotFound { .. });
            Err(if nx(&a) {
                a
            } else if nx(&b) {
                b
            } else if !a.is_negative() {
                a
            } else if !b.is_negative() {
                b
            } else {
                ResolveError::NoRecords {
                    name: name.to_string(),
                    family: Family::Any,
                }
            })
        }
    }
}

#[cfg(test)]
#[path = "resolve_tests.rs"]
mod tests;

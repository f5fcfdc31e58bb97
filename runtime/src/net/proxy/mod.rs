//! The filtering proxy, one per sandbox: HTTP/1.1 forward proxy and CONNECT tunnels
//! ([`http`]) and SOCKS5 ([`socks`]). Every request goes the same way through [`Proxy::open`]:
//!
//! 1. the host the client named is canonicalised (`policy::domain::canonical_host`);
//! 2. the policy engine decides (deny, then allow, then ask — asking is non-interactive deny
//!    until the approvals issue wires the prompt), port-scoped and CIDR rules included;
//! 3. warden resolves the name itself (an address the client resolved is never used for a
//!    name) and the [`AddressGuard`] drops loopback, link-local, metadata and the host's own
//!    addresses unless the settings allow them explicitly;
//! 4. warden connects, and every decision becomes a [`NetEvent`].
//!
//! On Linux the listeners live in the sandbox's network namespace (created there by its pid 1
//! and handed to the supervisor), so nothing outside the sandbox can reach the proxy and no
//! credentials are needed; a proxy listening on a host port (macOS, external use) requires a
//! per-sandbox token ([`ProxyConfig::token`]).

pub mod http;
pub mod socks;
pub mod splice;

use crate::net::event::{EventSink, NetEvent, Protocol, Stage};
use crate::net::guard::AddressGuard;
use crate::net::resolve::Resolver;
use crate::policy::decision::{Decision, ReasonKind, Verdict};
use crate::policy::domain::Host;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// Upper bound on one upstream connect attempt.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

pub struct ProxyConfig {
    /// The policy in force (replaced live when the settings change).
    pub policy: Arc<crate::policy::live::LivePolicy>,
    pub resolver: Resolver,
    pub guard: AddressGuard,
    pub events: Arc<dyn EventSink>,
    /// Credentials clients must present (HTTP `Proxy-Authorization: Basic`, any user name with
    /// this password; SOCKS5 username/password). `None`: the listener is reachable only from
    /// inside the sandbox, which is the authentication.
    pub token: Option<String>,
    /// `network.parentProxy`: allowed connections go through it (except `noProxy` hosts).
    pub parent: Option<crate::net::upstream::ParentProxy>,
    /// Who answers requests the policy leaves to approval; `None`: they are denied.
    pub approvals: Option<Arc<crate::approve::Approvals>>,
}

/// Why a request was not connected, and what the client is told.
#[derive(Debug)]
pub struct Refused {
    pub event: NetEvent,
    pub kind: RefusalKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalKind {
    /// The policy or the address guard refused: HTTP 403, SOCKS 0x02.
    Blocked,
    /// The name did not resolve: HTTP 502, SOCKS 0x04.
    Unresolvable,
    /// The upstream refused or timed out: HTTP 502, SOCKS 0x05.
    Unreachable,
    /// The request named an invalid host or was inconsistent: HTTP 400, SOCKS 0x02.
    BadRequest,
}

/// A connection warden opened for an allowed request; its event is recorded when the
/// transfer ends ([`Proxy::finish`]).
pub struct Opened {
    pub stream: TcpStream,
    pub event: NetEvent,
    pub started: Instant,
    /// Set when `stream` leads to a parent proxy that takes plain-HTTP requests in absolute
    /// form (with this `Proxy-Authorization`, if any) rather than to the destination.
    pub via_parent: Option<Option<String>>,
}

pub struct Proxy {
    pub config: ProxyConfig,
    /// `config.guard`, following the live policy's address rules.
    guard: crate::net::guard::LiveGuard,
    /// Client connections the sandbox may hold open at once, over both listeners.
    pub connections: Arc<tokio::sync::Semaphore>,
    /// The receive buffer of each upstream socket, when the sandbox has a memory limit.
    upstream_rcvbuf: Option<usize>,
}

/// Memory one proxied connection may take on the host when the sandbox has a memory limit:
/// the upstream socket's receive buffer ([`LIMITED_RCVBUF`], which the kernel doubles for its
/// bookkeeping), a splice pipe and the unix socket's buffers. Without a limit an upstream
/// socket's buffer grows with TCP autotuning (up to `net.ipv4.tcp_rmem`'s maximum, 32 MiB
/// here) while the command leaves it unread — outside the sandbox's cgroup.
pub const PER_CONNECTION_MEMORY: u64 = 4 << 20;
/// The upstream receive buffer under a memory limit: ~1 MiB of TCP window, ~170 Mbit/s per
/// connection at 50 ms of round trip.
pub const LIMITED_RCVBUF: usize = 1 << 20;

/// How many client connections the sandbox may hold open through the proxy, and the
/// upstream receive buffer: with `warden.limits.memoryMax`, as many as fit in it at
/// [`PER_CONNECTION_MEMORY`] each (at least 16), so the proxy's share of the host's memory
/// follows the limit the user set; without one, 2 × [`http::MAX_CONNECTIONS`] and autotuned
/// buffers (the command is not memory-limited either).
pub fn connection_budget(memory_max: Option<u64>) -> (usize, Option<usize>) {
    match memory_max {
        Some(m) => {
            let n = (m / PER_CONNECTION_MEMORY).clamp(16, 2 * http::MAX_CONNECTIONS as u64);
            (n as usize, Some(LIMITED_RCVBUF))
        }
        None => (2 * http::MAX_CONNECTIONS, None),
    }
}

impl Proxy {
    pub fn new(config: ProxyConfig) -> Arc<Proxy> {
        let guard =
            crate::net::guard::LiveGuard::following(config.guard.clone(), config.policy.clone());
        let (max, upstream_rcvbuf) =
            connection_budget(config.policy.get().effective.u64("warden.limits.memoryMax"));
        // A tunnel takes six descriptors (two sockets, two splice pipes): never more
        // connections than warden's own descriptor limit holds, so warden itself never runs
        // out (its resolver and the address guard's `getifaddrs` need descriptors too).
        let nofile = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
            .map_or(1024, |(soft, _)| soft);
        let max = max.min(
            usize::try_from(nofile.saturating_sub(256) / 6)
                .unwrap_or(max)
                .max(16),
        );
        Arc::new(Proxy {
            config,
            guard,
            connections: Arc::new(tokio::sync::Semaphore::new(max)),
            upstream_rcvbuf,
        })
    }

    /// A TCP connection to `addr` from the host, its receive buffer bounded under a memory
    /// limit ([`connection_budget`]).
    async fn connect_tcp(&self, addr: SocketAddr) -> std::io::Result<TcpStream> {
        let Some(size) = self.upstream_rcvbuf else {
            return TcpStream::connect(addr).await;
        };
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_recv_buffer_size(u32::try_from(size).unwrap_or(u32::MAX))?;
        socket.connect(addr).await
    }

    /// The policy's verdict for `host_text:port` as the client named it.
    pub fn decide(
        &self,
        protocol: Protocol,
        host_text: &str,
        port: u16,
    ) -> (Option<Host>, NetEvent) {
        match crate::policy::domain::canonical_host(host_text) {
            Ok(host) => {
                let v = self.config.policy.get().check_domain(&host, Some(port));
                let event = NetEvent::new(protocol, &host.to_string(), Some(port), &v);
                (Some(host), event)
            }
            Err(e) => {
                let v = Verdict::deny(
                    ReasonKind::InvalidHost,
                    format!("invalid host {:?}: {e}", truncate(host_text)),
                );
                let mut event = NetEvent::new(protocol, &truncate(host_text), Some(port), &v);
                event.stage = Stage::Request;
                (None, event)
            }
        }
    }

    /// Decide, resolve, guard and connect. A refusal is recorded here; an allowed connection is
    /// recorded by [`Proxy::finish`] once its transfer ends.
    pub async fn open(
        &self,
        protocol: Protocol,
        host_text: &str,
        port: u16,
    ) -> Result<Opened, Refused> {
        let started = Instant::now();
        let (host, mut event) = self.decide(protocol, host_text, port);
        let Some(host) = host else {
            return Err(self.refuse(event, RefusalKind::BadRequest));
        };
        if event.decision == Decision::RequiresApproval {
            // The one place a network request waits for a human (or the control channel).
            let outcome = match &self.config.approvals {
                Some(approvals) => {
                    let verdict = Verdict {
                        decision: event.decision,
                        kind: event.kind,
                        reason: event.reason.clone(),
                        rule: event.rule.clone(),
                    };
                    approvals.network(&host, port, &verdict).await
                }
                None => {
                    crate::metrics::count_unanswerable(crate::approve::RequestKind::Network);
                    crate::approve::Outcome {
                        allowed: false,
                        note: format!("{} (no approver is attached: denied)", event.reason),
                    }
                }
            };
            event.decision = if outcome.allowed {
                Decision::Allow
            } else {
                Decision::Deny
            };
            event.reason = outcome.note;
        }
        if event.decision != Decision::Allow {
            return Err(self.refuse(event, RefusalKind::Blocked));
        }
        let tunnel = protocol != Protocol::Http;
        if let Some(parent) = self
            .config
            .parent
            .as_ref()
            .and_then(|p| p.route(&host, tunnel))
        {
            return self
                .open_via_parent(parent, host, port, event, tunnel, started)
                .await;
        }
        let addresses = match &host {
            Host::Ip(ip) => vec![*ip],
            Host::Name(name) => match self.config.resolver.lookup(name).await {
                Ok(a) if !a.is_empty() => a,
                Ok(_) => {
                    let e = event.refused(
                        Stage::Upstream,
                        ReasonKind::InvalidHost,
                        format!("{name} has no address"),
                    );
                    return Err(self.refuse(e, RefusalKind::Unresolvable));
                }
                Err(err) => {
                    let e = event.refused(
                        Stage::Upstream,
                        ReasonKind::InvalidHost,
                        format!("{name} did not resolve: {err}"),
                    );
                    return Err(self.refuse(e, RefusalKind::Unresolvable));
                }
            },
        };
        let mut refusals = Vec::new();
        let allowed: Vec<IpAddr> = addresses
            .into_iter()
            .filter(|ip| match self.guard.get().check_port(*ip, Some(port)) {
                Ok(()) => true,
                Err(r) => {
                    refusals.push(r);
                    false
                }
            })
            .collect();
        if allowed.is_empty() {
            // A guard class can be lifted by naming the address in allowedDomains; a
            // deniedDomains entry cannot.
            let hint = if refusals
                .iter()
                .any(|r| r.class != crate::net::guard::AddressClass::Denied)
            {
                " (allow the address or range explicitly in allowedDomains to reach it)"
            } else {
                ""
            };
            let list: Vec<String> = refusals.iter().map(|r| r.to_string()).collect();
            let e = event.refused(
                Stage::Guard,
                ReasonKind::DomainDenied,
                format!(
                    "{host} resolves only to refused addresses: {}{hint}",
                    list.join("; ")
                ),
            );
            return Err(self.refuse(e, RefusalKind::Blocked));
        }
        let mut last_error = String::new();
        for ip in allowed {
            let addr = SocketAddr::new(ip, port);
            match tokio::time::timeout(CONNECT_TIMEOUT, self.connect_tcp(addr)).await {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    let mut event = event;
                    event.address = Some(ip);
                    return Ok(Opened {
                        stream,
                        event,
                        started,
                        via_parent: None,
                    });
                }
                Ok(Err(e)) => last_error = format!("{addr}: {e}"),
                Err(_) => last_error = format!("{addr}: timed out"),
            }
        }
        let e = event.refused(
            Stage::Upstream,
            ReasonKind::DomainAllowed,
            format!("cannot connect to {host}:{port}: {last_error}"),
        );
        Err(self.refuse(e, RefusalKind::Unreachable))
    }

    /// Through a parent proxy: the parent resolves names (warden cannot check the addresses
    /// it picks; IP literals are still checked by the guard), tunnels go through CONNECT.
    async fn open_via_parent(
        &self,
        parent: &crate::net::upstream::ParentUrl,
        host: Host,
        port: u16,
        event: NetEvent,
        tunnel: bool,
        started: Instant,
    ) -> Result<Opened, Refused> {
        if let Host::Ip(ip) = &host {
            if let Err(r) = self.guard.get().check_port(*ip, Some(port)) {
                let e = event.refused(Stage::Guard, ReasonKind::DomainDenied, r.to_string());
                return Err(self.refuse(e, RefusalKind::Blocked));
            }
        }
        let unreachable = |this: &Self, event: NetEvent, why: String| {
            let e = event.refused(Stage::Upstream, ReasonKind::DomainAllowed, why);
            this.refuse(e, RefusalKind::Unreachable)
        };
        let addrs = match self.config.resolver.lookup(&parent.host).await {
            Ok(a) => a,
            Err(e) => {
                let why = format!("parent proxy {} did not resolve: {e}", parent.host);
                return Err(unreachable(self, event, why));
            }
        };
        let target = match &host {
            Host::Ip(IpAddr::V6(v6)) => format!("[{v6}]:{port}"),
            _ => format!("{host}:{port}"),
        };
        let mut last = String::new();
        for ip in addrs {
            let addr = SocketAddr::new(ip, parent.port);
            let stream = if tunnel {
                crate::net::upstream::connect_via(parent, addr, &target).await
            } else {
                match tokio::time::timeout(CONNECT_TIMEOUT, self.connect_tcp(addr)).await {
                    Ok(r) => r,
                    Err(_) => Err(std::io::Error::other("timed out")),
                }
            };
            match stream {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    let mut event = event;
                    event.address = Some(ip);
                    event.reason = format!(
                        "{} (through parent proxy {}:{})",
                        event.reason, parent.host, parent.port
                    );
                    return Ok(Opened {
                        stream,
                        event,
                        started,
                        via_parent: (!tunnel).then(|| parent.authorization.clone()),
                    });
                }
                Err(e) => last = format!("{addr}: {e}"),
            }
        }
        Err(unreachable(
            self,
            event,
            format!("parent proxy for {target}: {last}"),
        ))
    }

    fn refuse(&self, event: NetEvent, kind: RefusalKind) -> Refused {
        self.config.events.record(event.clone());
        Refused { event, kind }
    }

    /// Bytes an allowed connection moved just now (up: towards the destination), for the
    /// live counters; called per splice or body frame.
    pub fn transferred(&self, up: u64, down: u64) {
        self.config.events.transferred(up, down);
    }

    /// Records an allowed connection's event with its byte counts and duration.
    pub fn finish(&self, mut event: NetEvent, started: Instant, up: u64, down: u64) {
        event.bytes_up = up;
        event.bytes_down = down;
        event.duration_ms = started.elapsed().as_millis() as u64;
        self.config.events.record(event);
    }
}

/// Client-supplied text cut for messages.
fn truncate(text: &str) -> String {
    text.chars().take(80).collect()
}

/// Raises this process's soft RLIMIT_NOFILE to its hard limit: each proxied connection holds
/// two descriptors, and the default soft limit (1024) would cap a sandbox at ~500 concurrent
/// connections.
pub fn raise_nofile_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
        }
    }
}

#[cfg(test)]
#[path = "proxy_tests.rs"]
mod tests;

//! The network service of one sandbox: the proxy and the stub DNS server on their own
//! threads (a tokio runtime), serving the listeners the sandbox handed over. Started after the
//! sandbox's pid 1 exists (the supervisor must be single-threaded until then).

use super::event::{EventSink, MemorySink, NetEvent};
use super::guard::{AddressGuard, GuardConfig};
use super::proxy::{Proxy, ProxyConfig};
use super::resolve::Resolver;
use crate::policy::decision::Decision;
use std::sync::Arc;

/// The listening sockets, already created where the sandbox can reach them.
pub struct Sockets {
    pub http: Option<std::net::TcpListener>,
    pub socks: Option<std::net::TcpListener>,
    pub dns_udp: Option<std::net::UdpSocket>,
    pub dns_tcp: Option<std::net::TcpListener>,
    /// The credentials clients must present. `None` where only the sandbox reaches the
    /// listeners (Linux: they live in its net namespace, behind the bridge); macOS serves on
    /// the host's loopback, where any local process could connect, so a per-sandbox token.
    pub token: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("starting the proxy's runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("setting up name resolution: {0}")]
    Resolver(String),
    #[error("network settings: {0}")]
    Config(String),
    #[error("the proxy thread ended before it was ready")]
    Vanished,
}

/// A running network service; it lives until the process exits.
pub struct Service {
    pub events: Arc<MemorySink>,
}

/// Forwards to the in-memory sink and to an optional extra sink (audit files, metrics).
struct Tee {
    memory: Arc<MemorySink>,
    extra: Option<Arc<dyn EventSink>>,
}

impl EventSink for Tee {
    fn record(&self, event: NetEvent) {
        if let Some(x) = &self.extra {
            x.record(event.clone());
        }
        self.memory.record(event);
    }

    fn transferred(&self, up: u64, down: u64) {
        if let Some(x) = &self.extra {
            x.transferred(up, down);
        }
        self.memory.transferred(up, down);
    }
}

/// Starts the proxy (and the stub DNS server when its sockets are there) for `policy`.
/// Returns once the service is ready, or the reason it could not start.
/// Who answers the network questions the policy leaves to approval.
pub enum ApproverSpec {
    /// `--approvals unix:PATH`: the control channel (docs/protocol.md).
    Channel(std::path::PathBuf),
    /// The controlling terminal (`/dev/tty`), when warden runs interactively.
    Tty(Arc<crate::approve::tty::TtyApprover>),
}

/// Connects to a port inside the sandbox (blocking; the sandbox's pid 1 does the connect, one
/// request at a time).
pub type Connect = Arc<dyn Fn(u16) -> std::io::Result<std::net::TcpStream> + Send + Sync>;

/// `--publish`: host listeners and the sandbox port each forwards to, and how to connect
/// there.
pub struct Publish {
    pub listeners: Vec<(std::net::TcpListener, u16)>,
    pub connect: Connect,
}

pub fn start(
    sockets: Sockets,
    live: Arc<crate::policy::live::LivePolicy>,
    extra_sink: Option<Arc<dyn EventSink>>,
    publish: Option<Publish>,
    approver: Option<ApproverSpec>,
    session: Option<crate::approve::store::SessionStore>,
) -> Result<Service, ServiceError> {
    // Read once at start: the parent proxy, external ports and the address guard; the
    // domain decisions read the live policy per request.
    let policy = live.get();
    let (published, connect) = match publish {
        Some(p) => (p.listeners, Some(p.connect)),
        None => (Vec::new(), None),
    };
    super::proxy::raise_nofile_limit();
    let parent = super::upstream::ParentProxy::from_policy(&policy)
        .map_err(|e| ServiceError::Config(e.to_string()))?;
    let port = |key: &str| -> Result<Option<u16>, ServiceError> {
        match policy.effective.u64(key) {
            None => Ok(None),
            Some(p) => u16::try_from(p)
                .ok()
                .filter(|p| *p != 0)
                .map(Some)
                .ok_or_else(|| ServiceError::Config(format!("{key} {p} is not a port"))),
        }
    };
    let user_settings = user_settings_file();
    let external_http = port("network.httpProxyPort")?;
    let external_socks = port("network.socksProxyPort")?;
    let token = sockets.token.clone();
    let memory = MemorySink::new();
    let sink: Arc<dyn EventSink> = Arc::new(Tee {
        memory: memory.clone(),
        extra: extra_sink,
    });
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), ServiceError>>();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("warden-proxy")
        .enable_all()
        .build()
        .map_err(ServiceError::Runtime)?;
    std::thread::Builder::new()
        .name("warden-net".into())
        .spawn(move || {
            runtime.block_on(async move {
                let setup = async {
                    let resolver = Resolver::from_system()
                        .map_err(|e| ServiceError::Resolver(e.to_string()))?;
                    let guard = AddressGuard::new(GuardConfig::from_policy(&policy));
                    let listen = |l: Option<std::net::TcpListener>| {
                        l.map(tokio::net::TcpListener::from_std)
                            .transpose()
                            .map_err(ServiceError::Runtime)
                    };
                    let http = listen(sockets.http)?;
                    let socks = listen(sockets.socks)?;
                    let published = published
                        .into_iter()
                        .map(|(l, port)| Ok((listen(Some(l))?, port)))
                        .collect::<Result<Vec<_>, ServiceError>>()?;
                    let dns_udp = match sockets.dns_udp {
                        Some(u) => Some(
                            tokio::net::UdpSocket::from_std(u).map_err(ServiceError::Runtime)?,
                        ),
                        None => None,
                    };
                    let dns_tcp = match sockets.dns_tcp {
                        Some(t) => Some(
                            tokio::net::TcpListener::from_std(t).map_err(ServiceError::Runtime)?,
                        ),
                        None => None,
                    };
                    // Built on the runtime: the channel's accept loop runs on it.
                    let approver: Option<Arc<dyn crate::approve::Approver>> = match approver {
                        Some(ApproverSpec::Channel(path)) => Some(
                            crate::approve::channel::ChannelApprover::bind(&path)
                                .map_err(|e| ServiceError::Config(e.to_string()))?,
                        ),
                        Some(ApproverSpec::Tty(tty)) => Some(tty),
                        None => None,
                    };
                    let approvals = approver.map(|a| {
                        let approvals = crate::approve::Approvals::new(
                            a,
                            policy.approvals.clone(),
                            user_settings,
                        )
                        .with_timeout(crate::approve::timeout(&policy));
                        Arc::new(match session {
                            Some(store) => approvals.with_store(store),
                            None => approvals,
                        })
                    });
                    let dns = super::dns::DnsHandler::new(
                        dns_decider(live.clone()),
                        resolver.clone(),
                        guard.clone(),
                        sink.clone(),
                    )
                    .following(live.clone());
                    let proxy = Proxy::new(ProxyConfig {
                        policy: live,
                        resolver,
                        guard,
                        events: sink,
                        token,
                        parent,
                        approvals,
                    });
                    Ok::<_, ServiceError>((proxy, http, socks, dns, dns_udp, dns_tcp, published))
                };
                match setup.await {
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                    Ok((proxy, http, socks, dns, dns_udp, dns_tcp, published)) => {
                        let dns = Arc::new(dns);
                        match (http, external_http) {
                            (Some(l), Some(p)) => drop(tokio::spawn(super::upstream::relay(l, p))),
                            (Some(l), None) => {
                                drop(tokio::spawn(super::proxy::http::serve(proxy.clone(), l)))
                            }
                            (None, _) => {}
                        }
                        match (socks, external_socks) {
                            (Some(l), Some(p)) => drop(tokio::spawn(super::upstream::relay(l, p))),
                            (Some(l), None) => {
                                drop(tokio::spawn(super::proxy::socks::serve(proxy, l)))
                            }
                            (None, _) => {}
                        }
                        if let Some(connect) = connect {
                            for (listener, port) in published {
                                if let Some(l) = listener {
                                    tokio::spawn(forward_published(l, port, connect.clone()));
                                }
                            }
                        }
                        if let Some(u) = dns_udp {
                            tokio::spawn(super::dns::serve_udp(u, dns.clone()));
                        }
                        if let Some(t) = dns_tcp {
                            tokio::spawn(super::dns::serve_tcp(t, dns));
                        }
                        let _ = ready_tx.send(Ok(()));
                        std::future::pending::<()>().await;
                    }
                }
            })
        })
        .map_err(ServiceError::Runtime)?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(Service { events: memory }),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(ServiceError::Vanished),
    }
}

/// How long a published connection may take to reach the listener inside.
const PUBLISH_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Forwards each connection accepted on the host's `listener` to `port` inside the sandbox.
async fn forward_published(listener: tokio::net::TcpListener, port: u16, connect: Connect) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            continue;
        };
        let connect = connect.clone();
        tokio::spawn(async move {
            let inside = tokio::task::spawn_blocking(move || connect(port)).await;
            let Ok(Ok(inside)) = inside else {
                return; // nothing listens there: the client sees the connection close
            };
            if inside.set_nonblocking(true).is_err() {
                return;
            }
            if let Ok(inside) = tokio::net::TcpStream::from_std(inside) {
                // The connect may still be in progress (pid 1 never waits for it): a
                // listener that does not accept within the deadline gets no connection.
                let ready = tokio::time::timeout(PUBLISH_CONNECT_TIMEOUT, inside.writable()).await;
                if !matches!(ready, Ok(Ok(()))) || !matches!(inside.take_error(), Ok(None)) {
                    return;
                }
                let _ = client.set_nodelay(true);
                let _ = inside.set_nodelay(true);
                let _ = super::proxy::splice::tunnel(&client, &inside).await;
            }
        });
    }
}

/// The DNS stub answers a name iff the proxy could connect to it on some port: the policy's
/// decision for the name without a port, or else on any port an `allowedDomains` entry is
/// scoped to (`example.com:443` makes `example.com` resolvable).
fn dns_decider(
    live: Arc<crate::policy::live::LivePolicy>,
) -> Box<dyn Fn(&str) -> crate::policy::decision::Verdict + Send + Sync> {
    Box::new(
        move |name: &str| match crate::policy::domain::canonical_host(name) {
            Ok(host) => {
                let policy = live.get();
                let ports = policy.domains.allowed_ports();
                let mut v = policy.check_domain(&host, None);
                if v.decision != Decision::Allow {
                    if let Some(allowed) = ports
                        .iter()
                        .map(|p| policy.check_domain(&host, Some(*p)))
                        .find(|v| v.decision == Decision::Allow)
                    {
                        v = allowed;
                    }
                }
                if v.decision == Decision::RequiresApproval {
                    v.decision = Decision::Deny;
                }
                v
            }
            Err(e) => crate::policy::decision::Verdict::deny(
                crate::policy::decision::ReasonKind::InvalidHost,
                format!("invalid name: {e}"),
            ),
        },
    )
}

/// One line per blocked destination (deduplicated, with a count), for the end of a run.
pub fn blocked_summary(events: &[NetEvent]) -> Vec<String> {
    // In order of first appearance, counted through a map (a command can make 100 000
    // distinct refusals), at most [`SUMMARY_LINES`] lines.
    let mut order: Vec<(String, String, String)> = Vec::new();
    let mut counts: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for e in events.iter().filter(|e| e.decision != Decision::Allow) {
        let target = match e.port {
            Some(p) => format!("{}:{p}", e.host),
            None => e.host.clone(),
        };
        // Requests that could not be parsed share one "host": each reason is a line of its
        // own (red-team round 23: four different refusals read as four of the first kind).
        let key = if e.host == crate::net::proxy::http::UNPARSED {
            format!("{target}\0{}", e.reason)
        } else {
            target.clone()
        };
        let n = counts.entry(key.clone()).or_insert(0);
        if *n == 0 {
            order.push((key, target, e.reason.clone()));
        }
        *n += 1;
    }
    let more = order.len().saturating_sub(SUMMARY_LINES);
    let mut lines: Vec<String> = order
        .into_iter()
        .take(SUMMARY_LINES)
        .map(|(key, target, reason)| {
            let n = counts.get(&key).copied().unwrap_or(1);
            let times = if n > 1 {
                format!(" ({n}×)")
            } else {
                String::new()
            };
            format!(
                "warden: network: blocked {}{times}: {}",
                crate::api::printable(&target),
                crate::api::printable(&reason)
            )
        })
        .collect();
    if more > 0 {
        lines.push(format!(
            "warden: network: … and {more} more blocked destinations (see --violations)"
        ));
    }
    lines
}

/// The most destinations the end-of-run summary names.
pub const SUMMARY_LINES: usize = 50;

/// The user settings file allow-always writes to.
pub fn user_settings_file() -> Option<std::path::PathBuf> {
    let home = std::env::home_dir()?;
    let cwd = std::env::current_dir().ok()?;
    let env = |k: &str| std::env::var(k).ok();
    Some(crate::policy::load::LayerPaths::discover(&home, &cwd, &env).user)
}

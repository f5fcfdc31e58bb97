//! Prometheus metrics of one `warden run` (issue #5): violations, network requests, execs,
//! audit losses and whether the sandbox runs, from the same records the audit layer writes.
//!
//! - [`Metrics`]: the registry (prometheus-client) and its counters; fed by the audit
//!   layer's choke points (`audit::Collector::push` for every record, `audit::ProxySink`
//!   for every proxy decision, `audit::finish` for losses).
//! - [`request`]: what `warden run` asks for (`--metrics-file`, `--metrics-listen`,
//!   `warden.metrics.*`), checked before the sandbox exists (a remote listen address is
//!   refused unless `warden.metrics.allowRemote`).
//! - [`Exporter`]: binds the listener before the sandbox exists, serves `GET /metrics` on
//!   its own thread once it runs, and writes the text file atomically at the end.
//!
//! Labels are bounded: kinds and layers are fixed sets, `sandbox` is one value per run
//! (`warden-<pid>`); no paths, hosts or pids become labels. docs/metrics.md lists them.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("metrics listen address {0:?}: expected IP:PORT, e.g. 127.0.0.1:9464")]
    Address(String),
    #[error("metrics listen address {0} is not a loopback address; set `warden.metrics.allowRemote: true` to serve metrics beyond this host")]
    NotLoopback(SocketAddr),
    #[error("metrics listen address {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the metrics file {}: {source}", path.display())]
    File {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("encoding metrics: {0}")]
    Encode(String),
    #[error("starting the metrics server: {0}")]
    Server(String),
}

/// The content type of [`Metrics::openmetrics`].
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ViolationLabels {
    kind: String,
    layer: String,
    sandbox: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    decision: String,
    protocol: String,
    sandbox: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SandboxLabels {
    sandbox: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DropLabels {
    sandbox: String,
    reason: String,
}

/// The registry of one run. Cheap to update from any thread.
pub struct Metrics {
    registry: Registry,
    sandbox: String,
    violations: Family<ViolationLabels, Counter>,
    requests: Family<RequestLabels, Counter>,
    execs: Family<SandboxLabels, Counter>,
    dropped: Family<DropLabels, Counter>,
    running: Family<SandboxLabels, Gauge>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("sandbox", &self.sandbox)
            .finish_non_exhaustive()
    }
}

/// Reasons of `warden_audit_events_dropped_total`.
pub const DROP_REASONS: [&str; 3] = ["ring-buffer-full", "pending-map-full", "undecodable"];

impl Metrics {
    /// An empty registry for `sandbox` (the label of the run's own series: `warden-<pid>`).
    /// The run's execs and the running gauge exist from the start, at 0.
    pub fn new(sandbox: impl Into<String>) -> Metrics {
        let sandbox = sandbox.into();
        let mut registry = Registry::default();
        let violations = Family::<ViolationLabels, Counter>::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let execs = Family::<SandboxLabels, Counter>::default();
        let dropped = Family::<DropLabels, Counter>::default();
        let running = Family::<SandboxLabels, Gauge>::default();
        // Counters get their `_total` suffix from the encoder.
        registry.register(
            "warden_violations",
            "What the sandbox refused, by kind of attempt and the layer that refused it",
            violations.clone(),
        );
        registry.register(
            "warden_network_requests",
            "Requests through warden's proxy and DNS stub, by decision and protocol",
            requests.clone(),
        );
        registry.register(
            "warden_execs",
            "Binaries executed in the sandbox (kernel exec records)",
            execs.clone(),
        );
        registry.register(
            "warden_audit_events_dropped",
            "Audit events lost (ring buffer full, per-thread map full, undecodable)",
            dropped.clone(),
        );
        registry.register(
            "warden_sandbox_running",
            "1 while the sandbox's command runs, 0 once it ended",
            running.clone(),
        );
        let m = Metrics {
            registry,
            sandbox,
            violations,
            requests,
            execs,
            dropped,
            running,
        };
        m.exec(&m.sandbox, 0);
        m.set_running(false);
        m
    }

    pub fn sandbox(&self) -> &str {
        &self.sandbox
    }

    fn own(&self) -> SandboxLabels {
        SandboxLabels {
            sandbox: self.sandbox.clone(),
        }
    }

    /// `count` violations of `kind` refused by `layer`.
    pub fn violation(&self, sandbox: &str, kind: &str, layer: &str, count: u64) {
        self.violations
            .get_or_create(&ViolationLabels {
                kind: kind.to_string(),
                layer: layer.to_string(),
                sandbox: sandbox.to_string(),
            })
            .inc_by(count);
    }

    /// `count` binaries executed.
    pub fn exec(&self, sandbox: &str, count: u64) {
        self.execs
            .get_or_create(&SandboxLabels {
                sandbox: sandbox.to_string(),
            })
            .inc_by(count);
    }

    /// One proxy or DNS decision (`allow` or `deny`) for a request of `protocol`.
    pub fn network_request(&self, sandbox: &str, decision: &str, protocol: &str) {
        self.requests
            .get_or_create(&RequestLabels {
                decision: decision.to_string(),
                protocol: protocol.to_string(),
                sandbox: sandbox.to_string(),
            })
            .inc();
    }

    /// `count` audit events lost for `reason` (one of [`DROP_REASONS`]); a count of 0 still
    /// creates the series, so `rate()` and alerts see it from the first scrape.
    pub fn dropped(&self, reason: &str, count: u64) {
        self.dropped
            .get_or_create(&DropLabels {
                sandbox: self.sandbox.clone(),
                reason: reason.to_string(),
            })
            .inc_by(count);
    }

    pub fn set_running(&self, running: bool) {
        self.running
            .get_or_create(&self.own())
            .set(i64::from(running));
    }

    /// The OpenMetrics text exposition (what `/metrics` serves), ending in `# EOF`.
    pub fn openmetrics(&self) -> Result<String, MetricsError> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .map_err(|e| MetricsError::Encode(e.to_string()))?;
        Ok(out)
    }

    /// The Prometheus text format (0.0.4) of the same samples, for node_exporter's textfile
    /// collector: a counter's `# HELP`/`# TYPE` name the `_total` series, and no `# EOF`.
    pub fn prometheus_text(&self) -> Result<String, MetricsError> {
        Ok(openmetrics_to_prometheus(&self.openmetrics()?))
    }

    /// Writes [`Metrics::prometheus_text`] to `path` atomically: a temporary file in the same
    /// directory, mode 0644 (node_exporter usually runs as another user), renamed over `path`.
    pub fn write_file(&self, path: &Path) -> Result<(), MetricsError> {
        let text = self.prometheus_text()?;
        let err = |source| MetricsError::File {
            path: path.to_path_buf(),
            source,
        };
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let mut tmp = tempfile::Builder::new()
            .prefix(".warden-metrics-")
            .tempfile_in(dir)
            .map_err(err)?;
        tmp.write_all(text.as_bytes()).map_err(err)?;
        tmp.as_file().sync_all().map_err(err)?;
        set_readable(tmp.as_file()).map_err(err)?;
        tmp.persist(path).map_err(|e| err(e.error))?;
        Ok(())
    }
}

#[cfg(unix)]
fn set_readable(f: &std::fs::File) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    f.set_permissions(std::fs::Permissions::from_mode(0o644))
}

#[cfg(not(unix))]
fn set_readable(_: &std::fs::File) -> std::io::Result<()> {
    Ok(())
}

/// OpenMetrics text → Prometheus text: `# TYPE x counter` becomes `# TYPE x_total counter`
/// (and its `# HELP` likewise), `# UNIT` and `# EOF` lines are dropped. Samples are unchanged.
pub fn openmetrics_to_prometheus(text: &str) -> String {
    let counters: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            counters
                .contains(&name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        match renamed {
            Some(l) => out.push_str(l.trim_end()),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// What `warden run` asks for: `--metrics-file` / `warden.metrics.file`, `--metrics-listen` /
/// `warden.metrics.listen`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetricsRequest {
    pub file: Option<PathBuf>,
    pub listen: Option<SocketAddr>,
}

/// The run's request, `None` when no output is asked for. A flag overrides its setting. The
/// listen address must be loopback unless `warden.metrics.allowRemote` is true.
pub fn request(
    policy: &crate::policy::merge::Policy,
    file: Option<PathBuf>,
    listen: Option<String>,
) -> Result<Option<MetricsRequest>, MetricsError> {
    let e = &policy.effective;
    let file = file.or_else(|| e.str("warden.metrics.file").map(PathBuf::from));
    let listen = listen.or_else(|| {
        e.str("warden.metrics.listen")
            .or_else(|| e.str("warden.metrics.addr"))
            .map(str::to_string)
    });
    let allow_remote = e.bool("warden.metrics.allowRemote").unwrap_or(false);
    let listen = listen.map(|l| listen_addr(&l, allow_remote)).transpose()?;
    Ok((file.is_some() || listen.is_some()).then_some(MetricsRequest { file, listen }))
}

/// `IP:PORT` (`[IPv6]:PORT`, or `localhost:PORT`), loopback unless `allow_remote`.
pub fn listen_addr(text: &str, allow_remote: bool) -> Result<SocketAddr, MetricsError> {
    let addr = match text.strip_prefix("localhost:") {
        Some(port) => port
            .parse::<u16>()
            .map(|p| SocketAddr::from((Ipv4Addr::LOCALHOST, p)))
            .map_err(|_| MetricsError::Address(text.to_string()))?,
        None => text
            .parse::<SocketAddr>()
            .map_err(|_| MetricsError::Address(text.to_string()))?,
    };
    if !allow_remote && !addr.ip().is_loopback() {
        return Err(MetricsError::NotLoopback(addr));
    }
    Ok(addr)
}

/// The run's metrics and their outputs.
pub struct Exporter {
    metrics: Arc<Metrics>,
    file: Option<PathBuf>,
    listener: Option<std::net::TcpListener>,
    server: Option<Server>,
}

struct Server {
    stop: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Exporter {
    /// Binds the listen address now (before the sandbox exists, so a taken port fails the
    /// run with exit 125); starts no thread.
    pub fn open(request: MetricsRequest, sandbox: &str) -> Result<Exporter, MetricsError> {
        let listener = match request.listen {
            Some(addr) => {
                let l = std::net::TcpListener::bind(addr)
                    .and_then(|l| l.set_nonblocking(true).map(|()| l))
                    .map_err(|source| MetricsError::Bind { addr, source })?;
                if addr.port() == 0 {
                    if let Ok(a) = l.local_addr() {
                        eprintln!("warden: metrics on http://{a}/metrics");
                    }
                }
                Some(l)
            }
            None => None,
        };
        Ok(Exporter {
            metrics: Arc::new(Metrics::new(sandbox)),
            file: request.file,
            listener,
            server: None,
        })
    }

    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// The bound listen address, if any.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The sandbox runs: sets the gauge and starts serving (threads are fine from here on).
    pub fn start(&mut self) -> Result<(), MetricsError> {
        self.metrics.set_running(true);
        if let Some(listener) = self.listener.take() {
            self.server = Some(serve(listener, self.metrics.clone())?);
        }
        Ok(())
    }

    /// The command ended (and the audit layer drained): clears the gauge, stops serving and
    /// writes the file.
    pub fn finish(mut self) -> Result<(), MetricsError> {
        self.metrics.set_running(false);
        if let Some(server) = self.server.take() {
            let _ = server.stop.send(());
            let _ = server.thread.join();
        }
        match &self.file {
            Some(path) => self.metrics.write_file(path),
            None => Ok(()),
        }
    }
}

/// Serves `GET /metrics` (and `/healthz`) on its own thread with a single-threaded runtime
/// until told to stop.
fn serve(listener: std::net::TcpListener, metrics: Arc<Metrics>) -> Result<Server, MetricsError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| MetricsError::Server(e.to_string()))?;
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("warden-metrics".into())
        .spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                    return;
                };
                loop {
                    tokio::select! {
                        _ = &mut stopped => break,
                        accepted = listener.accept() => {
                            let Ok((stream, _)) = accepted else { continue };
                            let metrics = metrics.clone();
                            tokio::spawn(async move {
                                let service = hyper::service::service_fn(move |req| {
                                    let resp = respond(&metrics, &req);
                                    async move { Ok::<_, std::convert::Infallible>(resp) }
                                });
                                let _ = hyper::server::conn::http1::Builder::new()
                                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                                    .await;
                            });
                        }
                    }
                }
            });
        })
        .map_err(|e| MetricsError::Server(e.to_string()))?;
    Ok(Server { stop, thread })
}

type Body = http_body_util::Full<bytes::Bytes>;

/// The response to one request: `GET /metrics` (OpenMetrics text), `GET /healthz`, else
/// 404 or 405.
pub fn respond<B>(metrics: &Metrics, req: &http::Request<B>) -> http::Response<Body> {
    let reply = |status: http::StatusCode, ctype: &str, body: String| {
        let mut resp = http::Response::new(Body::new(bytes::Bytes::from(body)));
        *resp.status_mut() = status;
        if let Ok(v) = http::HeaderValue::from_str(ctype) {
            resp.headers_mut().insert(http::header::CONTENT_TYPE, v);
        }
        resp
    };
    let text = "text/plain; charset=utf-8";
    if req.method() != http::Method::GET && req.method() != http::Method::HEAD {
        return reply(
            http::StatusCode::METHOD_NOT_ALLOWED,
            text,
            "only GET\n".into(),
        );
    }
    match req.uri().path() {
        "/metrics" => match metrics.openmetrics() {
            Ok(body) => reply(http::StatusCode::OK, OPENMETRICS_CONTENT_TYPE, body),
            Err(e) => reply(
                http::StatusCode::INTERNAL_SERVER_ERROR,
                text,
                format!("{e}\n"),
            ),
        },
        "/healthz" => reply(http::StatusCode::OK, text, "ok\n".into()),
        _ => reply(
            http::StatusCode::NOT_FOUND,
            text,
            "not found (try /metrics)\n".into(),
        ),
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;

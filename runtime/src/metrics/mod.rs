//! Prometheus metrics of one `warden run` (issue #5): violations, network requests and bytes,
//! the sandbox's start, the eBPF programs and their events, approvals.
//!
//! - [`Metrics`]: the registry (prometheus-client) and its series; fed at the choke points:
//!   `audit::Collector::push` (every record), `audit::ProxySink` (every proxy decision and
//!   the bytes tunnels and forwarded bodies move), the audit reader (eBPF events and drops),
//!   `audit::begin`/`watch` (programs attached), `approve::Approvals` (answers) through the
//!   process-wide [`installed`] registry, and [`Exporter::start`] (the start).
//! - [`request`]: what `warden run` asks for (`--metrics-file`, `--metrics-addr`,
//!   `warden.metrics.*`), checked before the sandbox exists (a remote listen address is
//!   refused unless `warden.metrics.allowRemote`).
//! - [`Exporter`]: binds the listener before the sandbox exists, serves `GET /metrics` and
//!   `/healthz` on its own thread once it runs, and writes the text file atomically at the end.
//!
//! - [`Labels`]: the operator's own labels (`warden run --label NAME=VALUE`): validated,
//!   at most [`MAX_LABELS`], values of at most [`MAX_LABEL_VALUE`] bytes; constant labels of
//!   the run's registry, and the key of a sandbox group in the audit daemon's
//!   [`NodeMetrics`].
//! - [`NodeMetrics`]: the metrics of `warden audit` (the node daemon): one registry for the
//!   node (eBPF programs, events, `warden_sandboxes_registered`) and one per label set of
//!   the registered sandboxes, exposed as one text ([`merge_openmetrics`]).
//!
//! Labels are bounded by construction: every label value is one of the `&'static str` sets
//! below ([`KINDS`], [`OPERATIONS`], ...), anything else becomes `other`; no paths, hosts,
//! sandbox names or pids become labels. The operator's [`Labels`] are the one exception, and
//! only what the operator names. docs/metrics.md lists them.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::Duration;

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

// ---------------------------------------------------------------------------------------------
// The bounded label values. A value outside its set is counted under the set's fallback.

/// `kind` of `warden_violations_total` (the records' kinds, Linux and macOS alike).
pub const KINDS: [&str; 9] = [
    "file-read",
    "file-write",
    "exec",
    "network",
    "unix-socket",
    "process",
    "mount",
    "syscall",
    "other",
];

/// `layer` of `warden_violations_total`: Linux's layers, macOS's `seatbelt`, and `unknown`
/// for a record that names none.
pub const LAYERS: [&str; 10] = [
    "mount", "landlock", "seccomp", "proxy", "netns", "dac", "ebpf", "lsm", "seatbelt", "unknown",
];

/// `operation` of `warden_violations_total`: the system calls the eBPF programs record, the
/// calls warden's seccomp filter refuses, the proxy's request types, and `other` for anything
/// else (an unknown call, Seatbelt's operation names).
pub const OPERATIONS: [&str; 101] = [
    // Files (the eBPF programs' file operations).
    "open",
    "creat",
    "unlink",
    "rename",
    "link",
    "symlink",
    "mkdir",
    "rmdir",
    "chmod",
    "chown",
    "truncate",
    "utimes",
    "setxattr",
    "removexattr",
    "mknod",
    "bind",
    // Sockets and exec.
    "connect",
    "socket",
    "sendmsg",
    "exec",
    // Calls warden's seccomp filter refuses.
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "pivot_root",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsmount",
    "fspick",
    "fsconfig",
    "mount_setattr",
    "unshare",
    "setns",
    "io_uring_setup",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "kexec_load",
    "init_module",
    "finit_module",
    "open_by_handle_at",
    "personality",
    "clone",
    "clone3",
    "ioctl",
    "socketpair",
    "seccomp",
    "io_uring_enter",
    "io_uring_register",
    "name_to_handle_at",
    "kexec_file_load",
    "delete_module",
    "reboot",
    "syslog",
    "acct",
    "swapon",
    "swapoff",
    "quotactl",
    "quotactl_fd",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "vhangup",
    "i386 syscall",
    "x32 syscall",
    // Calls toward other processes, or raising limits, that other layers refuse.
    "kill",
    "tkill",
    "tgkill",
    "rt_sigqueueinfo",
    "rt_tgsigqueueinfo",
    "pidfd_send_signal",
    "pidfd_getfd",
    "kcmp",
    "process_madvise",
    "migrate_pages",
    "move_pages",
    "setrlimit",
    "prlimit64",
    "setpriority",
    "sched_setscheduler",
    "sched_setparam",
    "sched_setattr",
    "ioprio_set",
    // Calls only a capability the sandbox dropped would allow.
    "chroot",
    "sethostname",
    "setdomainname",
    "fanotify_init",
    "setgroups",
    // The proxy's requests.
    "http",
    "connect-tunnel",
    "socks5",
    "dns",
    // Seatbelt's most common refusals.
    "file-read-data",
    "file-write-create",
    "other",
];

/// `protocol` of `warden_network_requests_total`.
pub const PROTOCOLS: [&str; 4] = ["http", "connect", "socks5", "dns"];

/// `direction` of `warden_network_bytes_total`: `up` from the sandbox to the destination,
/// `down` back.
pub const DIRECTIONS: [&str; 2] = ["up", "down"];

/// `reason` of `warden_bpf_events_dropped_total`.
pub const DROP_REASONS: [&str; 5] = [
    "ring-buffer-full",
    "pending-map-full",
    "undecodable",
    "rate-limited",
    "not-relayed",
];

/// `program` of `warden_bpf_programs_loaded`: the programs of `ebpf/warden.bpf.c`.
pub const PROGRAMS: [&str; 10] = [
    "sys_enter",
    "sys_exit",
    "sched_exec",
    "connect4",
    "connect6",
    "sendmsg4",
    "sendmsg6",
    "connect_unix",
    "sendmsg_unix",
    "other",
];

/// `kind` of `warden_approvals_total` (the control channel's request kinds).
pub const APPROVAL_KINDS: [&str; 4] = ["network", "filesystem-read", "filesystem-write", "command"];

/// `decision` of `warden_approvals_total`: the approver's answers, `timeout` (nobody
/// answered in time: denied) and `no-approver` (nobody to ask: denied at once).
pub const APPROVAL_DECISIONS: [&str; 5] = [
    "allow-once",
    "allow-always",
    "deny",
    "timeout",
    "no-approver",
];

/// Upper bounds (seconds) of `warden_sandbox_start_seconds`' buckets.
pub const START_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

// ---------------------------------------------------------------------------------------------
// The operator's labels (`warden run --label NAME=VALUE`).

/// At most this many `--label`s per run.
pub const MAX_LABELS: usize = 8;
/// A label value holds at most this many bytes.
pub const MAX_LABEL_VALUE: usize = 128;
/// Label names the operator may not use: warden's own label names (a series would carry the
/// name twice) and the labels Prometheus sets on every target.
pub const RESERVED_LABELS: [&str; 12] = [
    "kind",
    "operation",
    "layer",
    "decision",
    "protocol",
    "direction",
    "result",
    "reason",
    "program",
    "le",
    "instance",
    "job",
];

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    #[error("label {0:?}: expected NAME=VALUE")]
    Syntax(String),
    #[error("label name {0:?}: expected [a-zA-Z_][a-zA-Z0-9_]*, not starting with __")]
    Name(String),
    #[error("label name {0:?} is one of warden's or Prometheus' own label names")]
    Reserved(String),
    #[error(
        "label {0:?}: the value must be 1 to {MAX_LABEL_VALUE} bytes without control characters"
    )]
    Value(String),
    #[error("label {0:?} is given twice")]
    Duplicate(String),
    #[error("{0} labels: at most {MAX_LABELS} are allowed")]
    TooMany(usize),
}

/// Labels the operator put on a sandbox (`warden run --label team=infra`): on every series
/// of the run's metrics, on its violation records, and in the audit daemon's metrics and
/// records. Only validated names, at most [`MAX_LABELS`], values of 1 to
/// [`MAX_LABEL_VALUE`] bytes; ordered by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct Labels(BTreeMap<String, String>);

/// Whether `name` is a label name the operator may use.
pub fn valid_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') && !name.starts_with("__")
}

impl Labels {
    /// `NAME=VALUE` arguments, as `--label` takes them.
    pub fn parse(args: &[String]) -> Result<Labels, LabelError> {
        let mut map = BTreeMap::new();
        for arg in args {
            let (name, value) = arg
                .split_once('=')
                .ok_or_else(|| LabelError::Syntax(arg.clone()))?;
            if map.insert(name.to_string(), value.to_string()).is_some() {
                return Err(LabelError::Duplicate(name.to_string()));
            }
        }
        Labels::from_map(map)
    }

    /// Validates a map of labels (as the audit daemon receives them).
    pub fn from_map(map: BTreeMap<String, String>) -> Result<Labels, LabelError> {
        if map.len() > MAX_LABELS {
            return Err(LabelError::TooMany(map.len()));
        }
        for (name, value) in &map {
            if !valid_label_name(name) {
                return Err(LabelError::Name(name.clone()));
            }
            if RESERVED_LABELS.contains(&name.as_str()) {
                return Err(LabelError::Reserved(name.clone()));
            }
            if value.is_empty()
                || value.len() > MAX_LABEL_VALUE
                || value.chars().any(char::is_control)
            {
                return Err(LabelError::Value(name.clone()));
            }
        }
        Ok(Labels(map))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn as_map(&self) -> &BTreeMap<String, String> {
        &self.0
    }

    /// `name=value` pairs joined by commas (for log lines).
    pub fn display(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn const_labels(&self) -> impl Iterator<Item = (Cow<'static, str>, Cow<'static, str>)> + '_ {
        self.0
            .iter()
            .map(|(k, v)| (Cow::Owned(k.clone()), Cow::Owned(v.clone())))
    }
}

/// `value` if it is in `set`, else `fallback`: the one way a label value is chosen.
fn bounded(value: &str, set: &[&'static str], fallback: &'static str) -> &'static str {
    set.iter()
        .copied()
        .find(|s| *s == value)
        .unwrap_or(fallback)
}

// ---------------------------------------------------------------------------------------------
// Label sets: `&'static str` only, so nothing but the sets above can become a label.

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ViolationLabels {
    kind: &'static str,
    operation: &'static str,
    layer: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    decision: &'static str,
    protocol: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DirectionLabels {
    direction: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProgramLabels {
    program: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApprovalLabels {
    kind: &'static str,
    decision: &'static str,
}

/// Which series a registry exposes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    /// One `warden run`: everything but `warden_sandboxes_registered`.
    Run,
    /// The audit daemon's node-wide series: the eBPF programs, their events and losses, and
    /// `warden_sandboxes_registered`.
    Node,
    /// The audit daemon's series of the sandboxes of one label set: violations, network
    /// requests and bytes, execs, `warden_sandboxes_active`.
    Sandboxes,
}

/// The registry of one run. Cheap to update from any thread: every update is an atomic
/// add (plus, for families, a read lock and a hash lookup of `&'static str` labels).
pub struct Metrics {
    registry: Registry,
    violations: Family<ViolationLabels, Counter>,
    requests: Family<RequestLabels, Counter>,
    /// `warden_network_bytes_total{direction="up"}` and `"down"`, resolved once: the proxy
    /// adds to them on every splice.
    bytes_up: Counter,
    bytes_down: Counter,
    execs: Counter,
    active: Gauge,
    starts: Family<ResultLabels, Counter>,
    start_seconds: Histogram,
    bpf_events: Counter,
    bpf_dropped: Family<ReasonLabels, Counter>,
    programs: Family<ProgramLabels, Gauge>,
    approvals: Family<ApprovalLabels, Counter>,
    registered: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// An empty registry. Series with a small fixed label set exist from the start, at 0
    /// (`warden_sandboxes_active`, both `warden_sandbox_starts_total` results, both byte
    /// directions, the histogram, execs and eBPF events); the others appear with their first
    /// count.
    pub fn new() -> Metrics {
        Metrics::build(Scope::Run, &Labels::default())
    }

    /// [`Metrics::new`] with the operator's `labels` on every series (`warden run --label`).
    pub fn with_labels(labels: &Labels) -> Metrics {
        Metrics::build(Scope::Run, labels)
    }

    /// The audit daemon's node-wide registry ([`NodeMetrics`]).
    fn node() -> Metrics {
        Metrics::build(Scope::Node, &Labels::default())
    }

    /// The audit daemon's registry for the sandboxes labelled `labels` ([`NodeMetrics`]).
    fn sandboxes(labels: &Labels) -> Metrics {
        Metrics::build(Scope::Sandboxes, labels)
    }

    fn build(scope: Scope, labels: &Labels) -> Metrics {
        let mut registry = Registry::with_labels(labels.const_labels());
        let violations = Family::<ViolationLabels, Counter>::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let bytes = Family::<DirectionLabels, Counter>::default();
        let execs = Counter::default();
        let active = Gauge::default();
        let starts = Family::<ResultLabels, Counter>::default();
        let start_seconds = Histogram::new(START_BUCKETS);
        let bpf_events = Counter::default();
        let bpf_dropped = Family::<ReasonLabels, Counter>::default();
        let programs = Family::<ProgramLabels, Gauge>::default();
        let approvals = Family::<ApprovalLabels, Counter>::default();
        let registered = Gauge::default();
        let run = scope == Scope::Run;
        let node = scope == Scope::Node;
        let sandboxes = run || scope == Scope::Sandboxes;
        // Counters get their `_total` suffix from the encoder.
        if sandboxes {
            registry.register(
                "warden_violations",
                "What the sandbox refused: one per refused attempt, by kind, operation and the layer that refused it",
                violations.clone(),
            );
            registry.register(
                "warden_network_requests",
                "Requests through warden's proxy and DNS stub, by decision and protocol",
                requests.clone(),
            );
            registry.register(
                "warden_network_bytes",
                "Bytes warden's proxy moved for the sandbox (tunnels, forwarded bodies): up to the destination, down back",
                bytes.clone(),
            );
            registry.register(
                "warden_sandboxes_active",
                "Sandboxes running: 1 while the run's command runs, 0 before and after",
                active.clone(),
            );
        }
        if run {
            registry.register(
                "warden_sandbox_starts",
                "Sandbox starts, by result (ok: the command was started; error: the sandbox could not be created)",
                starts.clone(),
            );
            registry.register_with_unit(
                "warden_sandbox_start",
                "Time from warden's start to the sandbox running its command",
                Unit::Seconds,
                start_seconds.clone(),
            );
        }
        if sandboxes {
            registry.register(
                "warden_execs",
                "Binaries executed in the sandbox (kernel exec records; needs the eBPF programs)",
                execs.clone(),
            );
        }
        if run || node {
            registry.register(
                "warden_bpf_events",
                "Events the eBPF programs delivered through their ring buffer",
                bpf_events.clone(),
            );
            registry.register(
                "warden_bpf_events_dropped",
                "eBPF events lost, by reason (ring buffer full, per-thread map full, undecodable)",
                bpf_dropped.clone(),
            );
            registry.register(
                "warden_bpf_programs_loaded",
                "1 for each eBPF program warden attached for this run",
                programs.clone(),
            );
        }
        if run {
            registry.register(
                "warden_approvals",
                "Approval decisions, by kind of request and decision",
                approvals.clone(),
            );
        }
        if node {
            registry.register(
                "warden_sandboxes_registered",
                "Sandboxes registered with the audit daemon: the cgroup ids in its eBPF map",
                registered.clone(),
            );
        }
        for result in ["ok", "error"] {
            drop(starts.get_or_create_owned(&ResultLabels { result }));
        }
        let [up, down] = DIRECTIONS;
        let bytes_up = bytes.get_or_create_owned(&DirectionLabels { direction: up });
        let bytes_down = bytes.get_or_create_owned(&DirectionLabels { direction: down });
        Metrics {
            registry,
            violations,
            requests,
            bytes_up,
            bytes_down,
            execs,
            active,
            starts,
            start_seconds,
            bpf_events,
            bpf_dropped,
            programs,
            approvals,
            registered,
        }
    }

    /// `count` refusals of `kind` (a record's kind), `operation` (its system call or request)
    /// by `layer`; values outside [`KINDS`], [`OPERATIONS`], [`LAYERS`] count as `other`
    /// (`unknown` for the layer).
    pub fn violation(&self, kind: &str, operation: &str, layer: &str, count: u64) {
        self.violations
            .get_or_create(&ViolationLabels {
                kind: bounded(kind, &KINDS, "other"),
                operation: bounded(operation, &OPERATIONS, "other"),
                layer: bounded(layer, &LAYERS, "unknown"),
            })
            .inc_by(count);
    }

    /// `count` binaries executed.
    pub fn exec(&self, count: u64) {
        self.execs.inc_by(count);
    }

    /// One proxy or DNS decision (`allow`, anything else is `deny`) for a request of
    /// `protocol` (one of [`PROTOCOLS`]).
    pub fn network_request(&self, decision: &str, protocol: &str) {
        self.requests
            .get_or_create(&RequestLabels {
                decision: if decision == "allow" { "allow" } else { "deny" },
                protocol: bounded(protocol, &PROTOCOLS, "other"),
            })
            .inc();
    }

    /// Bytes the proxy moved: `up` towards the destination, `down` back to the sandbox.
    /// Two atomic adds; called on every splice of a tunnel.
    pub fn network_bytes(&self, up: u64, down: u64) {
        if up > 0 {
            self.bytes_up.inc_by(up);
        }
        if down > 0 {
            self.bytes_down.inc_by(down);
        }
    }

    /// The sandbox runs its command, `startup` after warden started.
    pub fn sandbox_started(&self, startup: Duration) {
        self.starts
            .get_or_create(&ResultLabels { result: "ok" })
            .inc();
        self.start_seconds.observe(startup.as_secs_f64());
    }

    /// The sandbox could not be created.
    pub fn sandbox_start_failed(&self) {
        self.starts
            .get_or_create(&ResultLabels { result: "error" })
            .inc();
    }

    pub fn set_active(&self, active: bool) {
        self.active.set(i64::from(active));
    }

    /// The audit daemon registered a sandbox of this group (`warden_sandboxes_active` + 1).
    pub fn sandbox_registered(&self) {
        self.active.inc();
    }

    /// The audit daemon unregistered a sandbox of this group.
    pub fn sandbox_unregistered(&self) {
        self.active.dec();
    }

    /// `warden_sandboxes_registered`: the cgroup ids in the audit daemon's eBPF map.
    pub fn set_registered(&self, n: usize) {
        self.registered.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// One event read from the eBPF programs' ring buffer.
    pub fn bpf_event(&self) {
        self.bpf_events.inc();
    }

    /// `n` events read from the eBPF programs' ring buffer.
    pub fn bpf_events(&self, n: u64) {
        self.bpf_events.inc_by(n);
    }

    /// The run's total of eBPF events lost for `reason` (one of [`DROP_REASONS`]) so far. The
    /// kernel's counters only grow, so the series is raised to `total` (a smaller value is
    /// ignored) and reading them again is harmless; a total of 0 still creates the series, so
    /// `rate()` and alerts see it from the first scrape.
    pub fn set_bpf_dropped(&self, reason: &str, total: u64) {
        let labels = ReasonLabels {
            reason: bounded(reason, &DROP_REASONS, "undecodable"),
        };
        self.bpf_dropped
            .get_or_create(&labels)
            .inner()
            .fetch_max(total, Ordering::Relaxed);
    }

    /// eBPF `program` (one of [`PROGRAMS`]) is attached for this run.
    pub fn program_loaded(&self, program: &str) {
        self.set_program(program, true);
    }

    /// eBPF `program` is attached (1) or not (0): the audit daemon's cgroup programs are
    /// attached while a sandbox is registered.
    pub fn set_program(&self, program: &str, attached: bool) {
        self.programs
            .get_or_create(&ProgramLabels {
                program: bounded(program, &PROGRAMS, "other"),
            })
            .set(i64::from(attached));
    }

    /// One approval decision: `kind` from [`APPROVAL_KINDS`], `decision` from
    /// [`APPROVAL_DECISIONS`].
    pub fn approval(&self, kind: &str, decision: &str) {
        self.approvals
            .get_or_create(&ApprovalLabels {
                kind: bounded(kind, &APPROVAL_KINDS, "network"),
                decision: bounded(decision, &APPROVAL_DECISIONS, "deny"),
            })
            .inc();
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
        let target = OutputFile::open(path)?;
        self.write_to(&target)
    }

    /// [`Metrics::write_file`] into a directory opened earlier ([`OutputFile::open`]): the
    /// file is often in the sandbox's writable working directory, and a command that swapped
    /// the directory for a symlink must not make warden write (0644) wherever it points.
    pub fn write_to(&self, target: &OutputFile) -> Result<(), MetricsError> {
        let text = self.prometheus_text()?;
        let err = |source| MetricsError::File {
            path: target.path.clone(),
            source,
        };
        let dir = &target.dir;
        let mut tmp_name = None;
        let mut file = None;
        for n in 0..100u32 {
            let name = format!(".warden-metrics-{}-{n}", std::process::id());
            match nix::fcntl::openat(
                dir,
                name.as_str(),
                nix::fcntl::OFlag::O_CREAT
                    | nix::fcntl::OFlag::O_EXCL
                    | nix::fcntl::OFlag::O_WRONLY
                    | nix::fcntl::OFlag::O_NOFOLLOW
                    | nix::fcntl::OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::from_bits_truncate(0o600),
            ) {
                Ok(fd) => {
                    file = Some(std::fs::File::from(fd));
                    tmp_name = Some(name);
                    break;
                }
                Err(nix::Error::EEXIST) => continue,
                Err(e) => return Err(err(e.into())),
            }
        }
        let (Some(mut f), Some(tmp)) = (file, tmp_name) else {
            return Err(err(std::io::Error::other("no free temporary name")));
        };
        let written = f
            .write_all(text.as_bytes())
            .and_then(|()| f.sync_all())
            .and_then(|()| set_readable(&f))
            .and_then(|()| {
                nix::fcntl::renameat(dir, tmp.as_str(), dir, target.name.as_os_str())
                    .map_err(std::io::Error::from)
            });
        if let Err(e) = written {
            let _ =
                nix::unistd::unlinkat(dir, tmp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
            return Err(err(e));
        }
        Ok(())
    }
}

/// Where the metrics file goes: its directory, opened when the run starts, and its name.
#[derive(Debug)]
pub struct OutputFile {
    path: PathBuf,
    dir: std::fs::File,
    name: std::ffi::OsString,
}

impl OutputFile {
    /// Opens `path`'s directory now (following symlinks the user wrote, before the sandbox
    /// exists).
    pub fn open(path: &Path) -> Result<OutputFile, MetricsError> {
        let err = |source| MetricsError::File {
            path: path.to_path_buf(),
            source,
        };
        // The directory as named, never through a link a command could have planted.
        let (dir, name) = crate::files::open_parent(path).map_err(err)?;
        let dir = std::fs::File::from(dir);
        Ok(OutputFile {
            path: path.to_path_buf(),
            dir,
            name,
        })
    }
}

/// What an endpoint serves: a registry, or the audit daemon's registries merged.
pub trait Exposition: Send + Sync {
    /// The OpenMetrics text exposition, ending in `# EOF`.
    fn openmetrics(&self) -> Result<String, MetricsError>;
}

impl Exposition for Metrics {
    fn openmetrics(&self) -> Result<String, MetricsError> {
        Metrics::openmetrics(self)
    }
}

// ---------------------------------------------------------------------------------------------
// The audit daemon's metrics (`warden audit`).

/// Distinct label sets the audit daemon keeps series for; the sandboxes of further label
/// sets are counted without labels (their records keep them), so a daemon that runs for
/// months cannot grow without bound.
pub const MAX_LABEL_SETS: usize = 256;

/// The metrics of `warden audit`: a node-wide registry and one registry per label set of the
/// registered sandboxes (the operator's [`Labels`] as constant labels), exposed as one text.
pub struct NodeMetrics {
    node: Arc<Metrics>,
    groups: RwLock<BTreeMap<Labels, Arc<Metrics>>>,
}

impl std::fmt::Debug for NodeMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeMetrics").finish_non_exhaustive()
    }
}

impl Default for NodeMetrics {
    fn default() -> Self {
        NodeMetrics::new()
    }
}

impl NodeMetrics {
    /// The node's registry, and the group of sandboxes without labels (so its series exist
    /// from the start).
    pub fn new() -> NodeMetrics {
        let mut groups = BTreeMap::new();
        groups.insert(
            Labels::default(),
            Arc::new(Metrics::sandboxes(&Labels::default())),
        );
        NodeMetrics {
            node: Arc::new(Metrics::node()),
            groups: RwLock::new(groups),
        }
    }

    /// The node-wide series: eBPF programs, events, losses, `warden_sandboxes_registered`.
    pub fn node(&self) -> Arc<Metrics> {
        self.node.clone()
    }

    /// The registry of the sandboxes labelled `labels`, created on first use; beyond
    /// [`MAX_LABEL_SETS`] label sets, the unlabelled one.
    pub fn group(&self, labels: &Labels) -> Arc<Metrics> {
        if let Some(m) = self.groups.read().ok().and_then(|g| g.get(labels).cloned()) {
            return m;
        }
        let Ok(mut groups) = self.groups.write() else {
            return Arc::new(Metrics::sandboxes(labels));
        };
        if let Some(m) = groups.get(labels) {
            return m.clone();
        }
        if groups.len() >= MAX_LABEL_SETS {
            if let Some(m) = groups.get(&Labels::default()) {
                return m.clone();
            }
        }
        let m = Arc::new(Metrics::sandboxes(labels));
        groups.insert(labels.clone(), m.clone());
        m
    }
}

impl Exposition for NodeMetrics {
    fn openmetrics(&self) -> Result<String, MetricsError> {
        let mut texts = vec![self.node.openmetrics()?];
        let groups: Vec<Arc<Metrics>> = self
            .groups
            .read()
            .map(|g| g.values().cloned().collect())
            .unwrap_or_default();
        for g in groups {
            texts.push(g.openmetrics()?);
        }
        Ok(merge_openmetrics(&texts))
    }
}

/// Several OpenMetrics texts with the same metric families (registries that differ in their
/// constant labels) as one: each family once, its metadata from the first text that has it,
/// its samples from all of them, in order; one `# EOF`.
pub fn merge_openmetrics(texts: &[String]) -> String {
    struct Merged<'a> {
        /// The text whose metadata (`# HELP`, `# TYPE`, `# UNIT`) is used.
        owner: usize,
        meta: Vec<&'a str>,
        samples: Vec<&'a str>,
    }
    let mut order: Vec<&str> = Vec::new();
    let mut families: std::collections::HashMap<&str, Merged> = std::collections::HashMap::new();
    for (i, text) in texts.iter().enumerate() {
        let mut current: Option<&str> = None;
        for line in text.lines() {
            if line == "# EOF" {
                continue;
            }
            if let Some(rest) = line.strip_prefix("# ") {
                let name = rest.split(' ').nth(1).unwrap_or_default();
                let family = families.entry(name).or_insert_with(|| {
                    order.push(name);
                    Merged {
                        owner: i,
                        meta: Vec::new(),
                        samples: Vec::new(),
                    }
                });
                if family.owner == i {
                    family.meta.push(line);
                }
                current = Some(name);
            } else if let Some(family) = current.and_then(|n| families.get_mut(n)) {
                family.samples.push(line);
            }
        }
    }
    let mut out = String::new();
    for family in order.iter().filter_map(|n| families.get(n)) {
        for line in family.meta.iter().chain(family.samples.iter()) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push_str("# EOF\n");
    out
}

// ---------------------------------------------------------------------------------------------
// The process-wide registry: one `warden run` is one process and one registry. Code that has
// no path to the run's `Arc<Metrics>` (the approval pipeline) counts through it.

static INSTALLED: RwLock<Option<Arc<Metrics>>> = RwLock::new(None);

/// Makes `metrics` the process's registry ([`Exporter::open`] does).
pub fn install(metrics: Arc<Metrics>) {
    if let Ok(mut slot) = INSTALLED.write() {
        *slot = Some(metrics);
    }
}

/// The process's registry, when metrics were asked for.
pub fn installed() -> Option<Arc<Metrics>> {
    INSTALLED.read().ok().and_then(|m| m.clone())
}

/// The kebab-case name of an approval request kind (as the control channel spells it).
pub fn approval_kind(kind: crate::approve::RequestKind) -> &'static str {
    use crate::approve::RequestKind;
    match kind {
        RequestKind::Network => "network",
        RequestKind::FilesystemRead => "filesystem-read",
        RequestKind::FilesystemWrite => "filesystem-write",
        RequestKind::Command => "command",
    }
}

/// The `decision` label of an approver's answer; `None` is a question nobody answered in
/// time.
pub fn approval_decision(answer: Option<crate::approve::Answer>) -> &'static str {
    use crate::approve::Answer;
    match answer {
        Some(Answer::AllowOnce) => "allow-once",
        Some(Answer::AllowAlways) => "allow-always",
        Some(Answer::RemoveFromDenyList) => "remove-from-deny-list",
        Some(Answer::Deny) => "deny",
        None => "timeout",
    }
}

/// An approver answered a question of `kind` (`None`: nobody answered in time); counted in
/// the process's registry, if any. The approval pipeline's one hook.
pub fn count_approval(kind: crate::approve::RequestKind, answer: Option<crate::approve::Answer>) {
    if let Some(m) = installed() {
        m.approval(approval_kind(kind), approval_decision(answer));
    }
}

/// A question of `kind` with nobody attached to ask: denied at once.
pub fn count_unanswerable(kind: crate::approve::RequestKind) {
    if let Some(m) = installed() {
        m.approval(approval_kind(kind), "no-approver");
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

/// What `warden run` asks for: `--metrics-file` / `warden.metrics.file`, `--metrics-addr`
/// (alias `--metrics-listen`) / `warden.metrics.listen` or `warden.metrics.addr`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetricsRequest {
    pub file: Option<PathBuf>,
    pub listen: Option<SocketAddr>,
    /// `--label NAME=VALUE`: constant labels on every series.
    pub labels: Labels,
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
    Ok(
        (file.is_some() || listen.is_some()).then_some(MetricsRequest {
            file,
            listen,
            labels: Labels::default(),
        }),
    )
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
    file: Option<OutputFile>,
    listener: Option<std::net::TcpListener>,
    server: Option<Server>,
}

/// `GET /metrics` and `/healthz` served on a thread of their own ([`Server::start`]) until
/// [`Server::stop`].
pub struct Server {
    stop: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Server {
    /// Serves `exposition` on `listener` (non-blocking, already bound) on its own thread.
    pub fn start(
        listener: std::net::TcpListener,
        exposition: Arc<dyn Exposition>,
    ) -> Result<Server, MetricsError> {
        serve(listener, exposition)
    }

    /// Stops serving and waits for the thread.
    pub fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

/// Binds `addr` for [`Server::start`] (non-blocking); port 0 picks a free port.
pub fn bind(addr: SocketAddr) -> Result<std::net::TcpListener, MetricsError> {
    std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|source| MetricsError::Bind { addr, source })
}

impl Exporter {
    /// Binds the listen address now (before the sandbox exists, so a taken port fails the
    /// run with exit 125); starts no thread.
    /// The registry is installed as the process's ([`install`]).
    pub fn open(request: MetricsRequest) -> Result<Exporter, MetricsError> {
        let listener = match request.listen {
            Some(addr) => {
                let l = bind(addr)?;
                if addr.port() == 0 {
                    if let Ok(a) = l.local_addr() {
                        eprintln!("warden: metrics on http://{a}/metrics");
                    }
                }
                Some(l)
            }
            None => None,
        };
        let file = request.file.as_deref().map(OutputFile::open).transpose()?;
        let metrics = Arc::new(Metrics::with_labels(&request.labels));
        install(metrics.clone());
        Ok(Exporter {
            metrics,
            file,
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

    /// The sandbox runs its command, `startup` after warden started: counts the start, sets
    /// the gauge and starts serving (threads are fine from here on).
    pub fn start(&mut self, startup: Duration) -> Result<(), MetricsError> {
        self.metrics.sandbox_started(startup);
        self.metrics.set_active(true);
        if let Some(listener) = self.listener.take() {
            self.server = Some(serve(listener, self.metrics.clone())?);
        }
        Ok(())
    }

    /// The command ended (and the audit layer drained): clears the gauge, stops serving and
    /// writes the file.
    pub fn finish(mut self) -> Result<(), MetricsError> {
        self.metrics.set_active(false);
        if let Some(server) = self.server.take() {
            server.stop();
        }
        match &self.file {
            Some(target) => self.metrics.write_to(target),
            None => Ok(()),
        }
    }

    /// The sandbox could not be created: counts the failure and writes the file (nothing
    /// was served).
    pub fn start_failed(self) -> Result<(), MetricsError> {
        self.metrics.sandbox_start_failed();
        self.finish()
    }
}

/// Serves `GET /metrics` (and `/healthz`) on its own thread with a single-threaded runtime
/// until told to stop.
fn serve(
    listener: std::net::TcpListener,
    metrics: Arc<dyn Exposition>,
) -> Result<Server, MetricsError> {
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
                // Scrapers are few: a bounded number of connections at once, each with a
                // deadline, and a pause after a failed accept (out of descriptors) instead of
                // a busy loop — local users can connect to a loopback port. When all are
                // taken, the oldest one that has lasted longer than a scrape does is closed
                // for the new one: connections that trickle a byte a second cannot hold
                // every slot (200 of them kept a scrape out for good).
                let mut active: std::collections::VecDeque<(
                    std::time::Instant,
                    tokio::task::AbortHandle,
                )> = std::collections::VecDeque::new();
                loop {
                    tokio::select! {
                        _ = &mut stopped => break,
                        accepted = listener.accept() => {
                            let Ok((stream, _)) = accepted else {
                                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                                continue;
                            };
                            active.retain(|(_, h)| !h.is_finished());
                            if active.len() >= SCRAPE_CONNECTIONS {
                                match active.front() {
                                    Some((since, h)) if since.elapsed() >= SCRAPE_EVICT_AFTER => {
                                        h.abort();
                                        active.pop_front();
                                    }
                                    // All busy and young: this one is turned away.
                                    _ => continue,
                                }
                            }
                            let metrics = metrics.clone();
                            let task = tokio::spawn(async move {
                                let service = hyper::service::service_fn(move |req| {
                                    let resp = respond(metrics.as_ref(), &req);
                                    async move { Ok::<_, std::convert::Infallible>(resp) }
                                });
                                let conn = hyper::server::conn::http1::Builder::new()
                                    .timer(hyper_util::rt::TokioTimer::new())
                                    .header_read_timeout(SCRAPE_TIMEOUT)
                                    .keep_alive(false)
                                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                                let _ = tokio::time::timeout(SCRAPE_TIMEOUT, conn).await;
                            });
                            active.push_back((std::time::Instant::now(), task.abort_handle()));
                        }
                    }
                }
            });
        })
        .map_err(|e| MetricsError::Server(e.to_string()))?;
    Ok(Server { stop, thread })
}

type Body = http_body_util::Full<bytes::Bytes>;

/// Connections the metrics endpoint serves at once.
pub const SCRAPE_CONNECTIONS: usize = 16;
/// A connection older than this may be closed for a new one when all are taken (a scrape
/// takes milliseconds).
pub const SCRAPE_EVICT_AFTER: std::time::Duration = std::time::Duration::from_millis(500);
/// How long one scrape connection may take, request and response.
pub const SCRAPE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The response to one request: `GET /metrics` (OpenMetrics text), `GET /healthz`, else
/// 404 or 405.
pub fn respond<B>(metrics: &dyn Exposition, req: &http::Request<B>) -> http::Response<Body> {
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

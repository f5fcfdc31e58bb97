//! Kernel-truth auditing (issue #5): what the sandbox tried and was refused, recorded by eBPF
//! programs scoped to the sandbox's cgroup, plus the network proxy's decisions, as one stream
//! of [`record::ViolationRecord`]s written as JSON lines (`--violations FILE`) and summarised
//! in a `<sandbox_violations>` block on stderr (`--annotate-stderr`).
//!
//! - [`bpf`]: the libbpf-rs skeleton of `ebpf/warden.bpf.c`: load, attach, watch a cgroup,
//!   drop counters.
//! - [`record`]: decoding of the ring buffer's events and their classification (kind,
//!   operation, errno, layer), proxy events as records; pure and unit-tested.
//! - [`protocol`], [`client`], [`daemon`]: the node daemon (`warden audit`) that loads the
//!   programs once for every sandbox of a machine, its line protocol, and `warden run`'s side
//!   of it (docs/audit-daemon.md, decisions/0003).
//! - this file: [`Auditor`] (programs + reader thread), [`Collector`] (coalescing, the file,
//!   the annotation) and the per-run session `warden run` drives.
//!
//! One `warden run` is one process, one sandbox and one audit session, so the session is a
//! process-wide value: `cli/run.rs` opens it ([`begin`]) before the sandbox exists, the Linux
//! backend calls [`watch`] once the cgroup exists (before the go byte: the command's first
//! syscall is covered), [`start_reader`] once the sandbox runs (threads are fine from then
//! on), hands [`proxy_sink`] to the proxy, and [`finish`] after the command ended. When an
//! audit daemon listens, [`begin`] connects to it instead of loading the programs, [`watch`]
//! registers the cgroup with it, and the records it streams back feed the same collector.

pub mod bpf;
pub mod client;
pub mod daemon;
pub mod lsm;
pub mod protocol;
pub mod record;

use crate::metrics::Metrics;
use crate::net::event::{EventSink, NetEvent};
use record::{Classifier, RawEvent, SandboxView, ViolationRecord};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error(
        "no tracefs with syscall events (mount it: `mount -t tracefs none /sys/kernel/tracing`)"
    )]
    NoTracefs,
    #[error("{0}")]
    Load(String),
    #[error("attaching {program}: {reason}")]
    Attach { program: String, reason: String },
    #[error("watching cgroup {}: {reason}", path.display())]
    Cgroup { path: PathBuf, reason: String },
    #[error("eBPF map: {0}")]
    Map(String),
    #[error("the violations file {}: {source}", path.display())]
    File {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("starting the audit reader: {0}")]
    Reader(String),
    #[error("auditing is required (warden.audit.required) but unavailable: {0}")]
    Required(Box<AuditError>),
    #[error("audit daemon: {0}")]
    Daemon(String),
    #[error("network.allowUnixSockets is enforced by warden's cgroup/connect_unix eBPF program, which is unavailable ({0}); warden will not open every unix socket instead (run as root, set `allowAllUnixSockets: true`, or remove the paths)")]
    UnixSockets(Box<AuditError>),
}

/// How often the reader wakes up without events (to notice the end of the run); records are
/// flushed to the file after every wake-up.
const POLL: Duration = Duration::from_millis(100);
/// Polls between two reads of the drop counters for the metrics (about a second).
const DROPS_EVERY: u32 = 10;
use crate::backend::ANNOTATE_MAX;

/// The eBPF programs of one `warden run`.
pub struct Auditor {
    programs: bpf::Programs,
    watched: Option<(u64, String)>,
}

impl Auditor {
    /// Loads and attaches the programs (as root). Must run while the process is still
    /// single-threaded if a fork follows; it starts no thread.
    pub fn load() -> Result<Auditor, AuditError> {
        Ok(Auditor {
            programs: bpf::Programs::load()?,
            watched: None,
        })
    }

    /// Limits the watched cgroup `id` to connecting to these unix socket paths.
    pub fn enforce_unix(&mut self, id: u64, paths: &[Vec<u8>]) -> Result<(), AuditError> {
        self.programs.enforce_unix(id, paths)
    }

    pub fn load_time(&self) -> Duration {
        self.programs.load_time
    }

    /// Programs attached globally (tracepoints).
    pub fn attached(&self) -> usize {
        self.programs.attached
    }

    /// The names of the programs attached globally (tracepoints), as in `warden.bpf.c`.
    pub fn attached_names(&self) -> &[String] {
        &self.programs.attached_names
    }

    /// Records everything the processes of cgroup `cgroup_dir` do from now on. Returns the
    /// cgroup id.
    pub fn watch(&mut self, cgroup_dir: &Path) -> Result<u64, AuditError> {
        self.watch_with(cgroup_dir, bpf::WatchFlags::UNKNOWN)
    }

    /// [`Auditor::watch`], with what the programs need to know of the view.
    pub fn watch_with(
        &mut self,
        cgroup_dir: &Path,
        flags: bpf::WatchFlags,
    ) -> Result<u64, AuditError> {
        let id = self.programs.watch_with(cgroup_dir, flags)?;
        let name = cgroup_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.watched = Some((id, name));
        Ok(id)
    }

    /// Starts the reader thread: every event becomes a record in `collector`. Call once the
    /// sandbox runs (the ring buffer is mapped here, after the sandbox's pid 1 was cloned).
    pub fn start(
        self,
        view: SandboxView,
        collector: Arc<Collector>,
    ) -> Result<Running, AuditError> {
        let handle = self.programs.events()?;
        let drops = self.programs.drops_handle()?;
        let metrics = collector.metrics.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let decode_errors = Arc::new(AtomicU64::new(0));
        let mut classifier = Classifier::new(view);
        let clock = WallClock::now();
        let sink = collector.clone();
        let errors = decode_errors.clone();
        let event_metrics = metrics.clone();
        let mut builder = libbpf_rs::RingBufferBuilder::new();
        builder
            .add(&handle, move |data: &[u8]| {
                if let Some(m) = &event_metrics {
                    m.bpf_event();
                }
                match RawEvent::decode(data) {
                    Ok(ev) => {
                        let cwd = relative(&ev).then(|| proc_cwd(ev.pid, ev.tid)).flatten();
                        let time = record::rfc3339_ms(clock.wall_ms(ev.ts_ns));
                        if let Some(rec) = classifier.classify(&ev, time, cwd.as_deref()) {
                            sink.push(rec);
                        }
                    }
                    Err(_) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                0
            })
            .map_err(|e| AuditError::Reader(e.to_string()))?;
        let ring = builder
            .build()
            .map_err(|e| AuditError::Reader(e.to_string()))?;
        let thread_stop = stop.clone();
        let thread_collector = collector.clone();
        let thread_errors = decode_errors.clone();
        let thread = std::thread::Builder::new()
            .name("warden-audit".into())
            .spawn(move || {
                // The handle's descriptor stays open as long as the ring buffer reads it.
                let _handle = handle;
                let mut polls = 0u32;
                while !thread_stop.load(Ordering::Acquire) {
                    let _ = ring.poll(POLL);
                    thread_collector.flush();
                    polls = polls.wrapping_add(1);
                    // The drop counters, live (a scrape during the run sees them).
                    if let Some(m) = metrics
                        .as_deref()
                        .filter(|_| polls.is_multiple_of(DROPS_EVERY))
                    {
                        if let Ok(counts) = bpf::read_drops(&drops) {
                            count_losses(
                                m,
                                &Losses::from_drops(counts, thread_errors.load(Ordering::Relaxed)),
                            );
                        }
                    }
                }
                let _ = ring.consume();
                thread_collector.flush();
            })
            .map_err(|e| AuditError::Reader(e.to_string()))?;
        Ok(Running {
            auditor: self,
            stop,
            thread: Some(thread),
            decode_errors,
        })
    }
}

/// A relative path whose working directory the kernel did not send (too deep, or the call
/// had a second path): userspace looks it up.
fn relative(ev: &RawEvent) -> bool {
    ev.kind == record::EV_FILE
        && !ev.path.is_empty()
        && ev.path.first() != Some(&b'/')
        && ev.flags & record::FL_CWD == 0
}

/// The working directory of thread `tid` of process `pid` (for relative paths), if it is
/// still alive: the thread's own, since a thread created without `CLONE_FS` has one of its
/// own (red-team round 18: the process's main thread sat elsewhere). Read after the call, so
/// the record is marked approximate.
fn proc_cwd(pid: u32, tid: u32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/task/{tid}/cwd")).ok()
}

/// Converts the programs' `bpf_ktime_get_boot_ns` to wall-clock time.
#[derive(Clone, Copy)]
struct WallClock {
    /// CLOCK_REALTIME − CLOCK_BOOTTIME, in nanoseconds.
    offset_ns: i128,
}

fn clock_ns(clock: libc::clockid_t) -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return 0;
    }
    i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec)
}

impl WallClock {
    fn now() -> WallClock {
        WallClock {
            offset_ns: clock_ns(libc::CLOCK_REALTIME) - clock_ns(libc::CLOCK_BOOTTIME),
        }
    }

    fn wall_ms(&self, boot_ns: u64) -> u64 {
        u64::try_from((i128::from(boot_ns) + self.offset_ns) / 1_000_000).unwrap_or(0)
    }
}

/// The reader of a running audit.
pub struct Running {
    auditor: Auditor,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    decode_errors: Arc<AtomicU64>,
}

/// What the end of a run reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Losses {
    /// Events lost because the ring buffer was full.
    pub ring_full: u64,
    /// Syscalls not observed because the per-thread map was full.
    pub pending_full: u64,
    /// Events warden could not decode.
    pub undecodable: u64,
    /// Events not sent because the sandbox was over its share of the node daemon's ring
    /// buffer while it was half full (ebpf/emit.bpf.h).
    pub rate_limited: u64,
    /// Records the node daemon had but could not pass on to the run (the run read them too
    /// slowly): in the daemon's file, not in the run's.
    pub not_relayed: u64,
}

impl Losses {
    pub fn total(&self) -> u64 {
        self.ring_full + self.pending_full + self.undecodable + self.rate_limited + self.not_relayed
    }

    /// From the `drops` counters ([`bpf::read_drops`]) and the decoding errors.
    pub fn from_drops(drops: [u64; bpf::DROP_SLOTS], undecodable: u64) -> Losses {
        let [ring_full, pending_full, rate_limited] = drops;
        Losses {
            ring_full,
            pending_full,
            undecodable,
            rate_limited,
            not_relayed: 0,
        }
    }
}

impl Running {
    /// Drains what is left, stops the reader, unwatches the cgroup and reports losses.
    pub fn finish(mut self) -> Losses {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let drops = self.auditor.programs.drops().unwrap_or_default();
        if let Some((id, _)) = self.auditor.watched.take() {
            self.auditor.programs.unwatch(id);
        }
        Losses::from_drops(drops, self.decode_errors.load(Ordering::Relaxed))
    }
}

/// Where records go: coalesced per batch, appended to the violations file as JSON lines, and
/// kept (coalesced over the run) for the stderr annotation.
pub struct Collector {
    inner: Mutex<Inner>,
    /// Counted as they arrive, before coalescing (`--metrics-*`).
    metrics: Option<Arc<Metrics>>,
    /// The audit daemon, when the run registered with one: the proxy's records go up too.
    uplink: std::sync::OnceLock<Arc<client::Uplink>>,
}

#[derive(Default)]
struct Inner {
    /// `ignoreViolations` paths that apply to this run's command: records whose target lies
    /// below one are dropped (not written, counted or shown).
    ignored: Vec<PathBuf>,
    /// The operator's labels (`--label`), put on records that carry none.
    labels: std::collections::BTreeMap<String, String>,
    file: Option<(PathBuf, std::fs::File)>,
    batch: Vec<ViolationRecord>,
    /// Violations over the whole run, by coalescing key, in first-seen order.
    kept: Vec<ViolationRecord>,
    kept_index: HashMap<String, usize>,
    more: u64,
    written: u64,
    write_error: Option<String>,
    /// Bytes this run appended to the file, and the records left out past the cap.
    file_bytes: u64,
    over_cap: u64,
    file_cap: u64,
    /// The audit daemon's node-wide file: each sandbox may fill at most this much of it (one
    /// sandbox's flood must not crowd out the others' records), and the file is rotated
    /// (`FILE.1`) when it reaches `file_cap` instead of stopping.
    per_sandbox_cap: Option<u64>,
    sandbox_bytes: HashMap<String, u64>,
}

/// Whether a violation record for `target` is dropped by `ignoreViolations`: it lies below
/// an ignored path as named ([`crate::policy::ignore::is_ignored`]) and still does with its
/// symlinks followed now — a link the command planted inside an ignored directory
/// (`ign/lnk` → `/etc/shadow`) names the ignored directory but the kernel wrote elsewhere
/// (red-team round 13). Only violations are dropped, and never an approximate one (a relative
/// path whose directory userspace read after the call: the command chose where it pointed;
/// round 18). The one test for every sink (a run's collector, the daemon).
pub(crate) fn is_dropped(rec: &record::ViolationRecord, ignored: &[PathBuf]) -> bool {
    let within =
        |p: &str| crate::policy::ignore::is_ignored(p, ignored) && resolves_within(p, ignored);
    // A rename's record names its source; its destination (`detail`) was refused just the
    // same, and must be ignored too (round 19: `mv /usr/share/x /root/y` was dropped).
    // A link's record names the new name; `detail` the file linked, refused just the same
    // (round 21: `ln /etc/shadow ign/hl` was dropped for its ignored new name).
    let destination = match (rec.operation.as_str(), &rec.detail) {
        ("rename" | "link", Some(d)) => within(d),
        _ => true,
    };
    rec.violation && !rec.approximate && within(&rec.target) && destination
}

fn resolves_within(target: &str, ignored: &[PathBuf]) -> bool {
    let real = crate::policy::fsview::resolve(
        &crate::policy::fsview::RealFs,
        Path::new("/"),
        Path::new(target),
    );
    match real {
        Ok(real) => real
            .to_str()
            .is_some_and(|r| crate::policy::ignore::is_ignored(r, ignored)),
        Err(_) => false,
    }
}

/// The most one run appends to the violations file (`warden.audit.maxFileBytes` is not a
/// setting yet): a command decides how many refusals it causes, and the file is on the
/// host's disk — a loop of refused opens wrote 19 MB/s. Past it, records still reach the
/// metrics, the `<sandbox_violations>` block and the audit daemon; the run's end says how
/// many the file did not get.
pub const FILE_CAP: u64 = 64 << 20;

/// Rotated generations of the audit daemon's file kept besides the current one.
const ROTATED_KEPT: usize = 4;

impl Collector {
    /// A collector appending to `file` (created if missing) when given.
    pub fn new(file: Option<&Path>) -> Result<Arc<Collector>, AuditError> {
        Collector::with_metrics(file, None)
    }

    /// [`Collector::new`], also counting every record in `metrics`.
    pub fn with_metrics(
        file: Option<&Path>,
        metrics: Option<Arc<Metrics>>,
    ) -> Result<Arc<Collector>, AuditError> {
        let file = match file {
            Some(p) => Some((
                p.to_path_buf(),
                crate::files::open_append(p).map_err(|source| AuditError::File {
                    path: p.to_path_buf(),
                    source,
                })?,
            )),
            None => None,
        };
        Ok(Arc::new(Collector {
            inner: Mutex::new(Inner {
                file,
                file_cap: FILE_CAP,
                ..Inner::default()
            }),
            metrics,
            uplink: std::sync::OnceLock::new(),
        }))
    }

    /// The audit daemon's collector: the node-wide file rotates at [`FILE_CAP`] (one older
    /// file kept, `FILE.1`) and each sandbox may write at most a quarter of that; past its
    /// share a sandbox's records are counted and reported, not written.
    pub fn for_daemon(file: Option<&Path>) -> Result<Arc<Collector>, AuditError> {
        let c = Collector::new(file)?;
        if let Ok(mut i) = c.inner.lock() {
            i.per_sandbox_cap = Some(FILE_CAP / 4);
        }
        Ok(c)
    }

    /// The one place every record passes (kernel and proxy): counted, then batched.
    pub fn push(&self, mut rec: ViolationRecord) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if rec.labels.is_empty() {
            rec.labels = inner.labels.clone();
        }
        if is_dropped(&rec, &inner.ignored) {
            return;
        }
        if let Some(m) = &self.metrics {
            count_record(m, &rec);
        }
        inner.batch.push(rec);
    }

    /// Sets the `ignoreViolations` paths of this run (see [`ignored_paths`]).
    pub fn set_ignored(&self, paths: Vec<PathBuf>) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.ignored = paths;
        }
    }

    /// The `ignoreViolations` paths of this run.
    pub fn ignored(&self) -> Vec<PathBuf> {
        self.inner
            .lock()
            .map(|i| i.ignored.clone())
            .unwrap_or_default()
    }

    /// The operator's labels (`--label`), put on every record that carries none.
    pub fn set_labels(&self, labels: &crate::metrics::Labels) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.labels = labels.as_map().clone();
        }
    }

    /// Where the proxy's records go besides this collector: the audit daemon.
    pub fn set_uplink(&self, uplink: Arc<client::Uplink>) {
        let _ = self.uplink.set(uplink);
    }

    /// Coalesces the batch (identical records become one with a count) and writes it.
    pub fn flush(&self) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if inner.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut inner.batch);
        let coalesced = coalesce(batch);
        let mut text = String::new();
        let mut shed = 0u64;
        for rec in &coalesced {
            if let Ok(line) = serde_json::to_string(rec) {
                if let Some(cap) = inner.per_sandbox_cap {
                    let used = inner.sandbox_bytes.entry(rec.sandbox.clone()).or_insert(0);
                    if *used + line.len() as u64 + 1 > cap {
                        if *used <= cap {
                            eprintln!(
                                "warden audit: sandbox {} reached its share of the violations \
                                 file ({} MiB); its further records are counted, not written",
                                crate::api::printable(&rec.sandbox),
                                cap >> 20
                            );
                            *used = cap + 1;
                        }
                        shed += 1;
                        continue;
                    }
                    *used += line.len() as u64 + 1;
                }
                text.push_str(&line);
                text.push('\n');
            }
        }
        inner.over_cap += shed;
        let mut error = None;
        // The daemon's file rotates rather than stops: it runs for as long as the node does.
        if inner.per_sandbox_cap.is_some()
            && inner.file_bytes + text.len() as u64 > inner.file_cap
            && inner.file.is_some()
        {
            if let Some((path, current)) = inner.file.take() {
                let generation = |n: usize| {
                    let mut g = path.clone().into_os_string();
                    g.push(format!(".{n}"));
                    PathBuf::from(g)
                };
                // FILE.1 … FILE.{ROTATED_KEPT}: older generations move down, the oldest goes.
                for n in (1..ROTATED_KEPT).rev() {
                    let _ = std::fs::rename(generation(n), generation(n + 1));
                }
                let reopened = std::fs::rename(&path, generation(1))
                    .and_then(|()| crate::files::open_append(&path));
                match reopened {
                    Ok(f) => {
                        inner.file = Some((path, f));
                        inner.file_bytes = 0;
                    }
                    Err(e) => {
                        error = Some(format!("{}: rotating: {e}", path.display()));
                        inner.file = Some((path, current));
                    }
                }
            }
        }
        let room = inner.file_cap.saturating_sub(inner.file_bytes);
        let over = inner.file.is_some() && text.len() as u64 > room;
        if over {
            inner.over_cap += coalesced.len() as u64 - shed;
        } else if let Some((path, f)) = &mut inner.file {
            if let Err(e) = f.write_all(text.as_bytes()) {
                error = Some(format!("{}: {e}", path.display()));
            }
        }
        if !over {
            inner.file_bytes += text.len() as u64;
        }
        if error.is_some() && inner.write_error.is_none() {
            inner.write_error = error;
        }
        inner.written += coalesced.len() as u64;
        for rec in coalesced.into_iter().filter(|r| r.violation) {
            let key = rec.coalesce_key();
            match inner.kept_index.get(&key).copied() {
                Some(i) => {
                    if let Some(k) = inner.kept.get_mut(i) {
                        k.count += rec.count;
                    }
                }
                None if inner.kept.len() < ANNOTATE_MAX => {
                    let i = inner.kept.len();
                    inner.kept_index.insert(key, i);
                    inner.kept.push(rec);
                }
                None => inner.more += rec.count,
            }
        }
    }

    /// The violations seen so far (coalesced), and how many more were not kept.
    pub fn violations(&self) -> (Vec<ViolationRecord>, u64) {
        self.flush();
        match self.inner.lock() {
            Ok(inner) => (inner.kept.clone(), inner.more),
            Err(_) => (Vec::new(), 0),
        }
    }

    pub fn write_error(&self) -> Option<String> {
        self.inner.lock().ok().and_then(|i| i.write_error.clone())
    }

    /// A smaller cap than [`FILE_CAP`] (tests).
    #[cfg(test)]
    pub(crate) fn set_file_cap(&self, cap: u64) {
        if let Ok(mut i) = self.inner.lock() {
            i.file_cap = cap;
        }
    }

    /// Records the file did not get because this run reached [`FILE_CAP`].
    pub fn over_cap(&self) -> u64 {
        self.inner.lock().map(|i| i.over_cap).unwrap_or(0)
    }
}

/// A record in the metrics: violations by kind, operation and layer, execs.
pub fn count_record(m: &Metrics, rec: &ViolationRecord) {
    if rec.violation {
        let layer = rec.layer.map_or("unknown", record::Layer::name);
        m.violation(rec.kind.name(), &rec.operation, layer, rec.count);
    } else if rec.kind == record::Kind::Exec {
        m.exec(rec.count);
    }
}

/// Identical records (everything but time and count) become the first of them with the sum
/// of their counts, in first-seen order.
pub fn coalesce(batch: Vec<ViolationRecord>) -> Vec<ViolationRecord> {
    let mut out: Vec<ViolationRecord> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for rec in batch {
        let key = rec.coalesce_key();
        match index.get(&key).and_then(|&i| out.get_mut(i)) {
            Some(first) => first.count += rec.count,
            None => {
                index.insert(key, out.len());
                out.push(rec);
            }
        }
    }
    out
}

/// The `<sandbox_violations>` block for stderr: one line per distinct violation; empty when
/// there were none and nothing was lost.
pub fn annotation(violations: &[ViolationRecord], more: u64, losses: &Losses) -> String {
    let lines: Vec<String> = violations.iter().map(|v| v.summary_line()).collect();
    let warning = (losses.total() > 0).then(|| losses_text(losses));
    crate::backend::annotation_block(&lines, more, warning.as_deref())
}

/// The run's losses so far in `warden_bpf_events_dropped_total`, by reason (totals: counting
/// the same losses again changes nothing; 0 creates the series).
pub fn count_losses(m: &Metrics, l: &Losses) {
    let [ring, pending, undecodable, limited, relay] = crate::metrics::DROP_REASONS;
    m.set_bpf_dropped(ring, l.ring_full);
    m.set_bpf_dropped(pending, l.pending_full);
    m.set_bpf_dropped(undecodable, l.undecodable);
    m.set_bpf_dropped(limited, l.rate_limited);
    m.set_bpf_dropped(relay, l.not_relayed);
}

fn losses_text(l: &Losses) -> String {
    let mut limited = match l.rate_limited {
        0 => String::new(),
        n => format!(", over its share of the node's ring buffer: {n}"),
    };
    if l.not_relayed > 0 {
        limited.push_str(&format!(
            ", in the audit daemon's records but not passed on to this run: {}",
            l.not_relayed
        ));
    }
    format!(
        "{} audit events lost (ring buffer full: {}{limited}, per-thread map full: {}, \
         undecodable: {})",
        l.total(),
        l.ring_full,
        l.pending_full,
        l.undecodable
    )
}

/// Proxy decisions into the same records (kind network, layer proxy).
pub struct ProxySink {
    pub sandbox: String,
    pub collector: Arc<Collector>,
}

impl EventSink for ProxySink {
    fn record(&self, event: NetEvent) {
        if let Some(m) = &self.collector.metrics {
            let decision = match event.decision {
                crate::policy::decision::Decision::Allow => "allow",
                _ => "deny",
            };
            let protocol = match event.protocol {
                crate::net::event::Protocol::Http => "http",
                crate::net::event::Protocol::Connect => "connect",
                crate::net::event::Protocol::Socks5 => "socks5",
                crate::net::event::Protocol::Dns => "dns",
            };
            m.network_request(decision, protocol);
        }
        // Bytes are not taken from the event: they were counted as they moved
        // (`transferred`), also for a tunnel that ended in an error.
        let rec = record::from_net_event(&self.sandbox, &event);
        if let Some(up) = self.collector.uplink.get() {
            up.record(&rec);
        }
        self.collector.push(rec);
        self.collector.flush();
    }

    fn transferred(&self, up: u64, down: u64) {
        if let Some(m) = &self.collector.metrics {
            m.network_bytes(up, down);
        }
        if let Some(u) = self.collector.uplink.get() {
            u.bytes(up, down);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The session of one `warden run`.

/// What the layer inference needs to know about a sandbox, from its plan.
pub fn view_of_plan(plan: &crate::linux::plan::Plan) -> SandboxView {
    use crate::linux::plan::MountOp;
    let mut view = SandboxView::default();
    // Writable inside every sandbox besides the plan's roots: the private /dev/shm (a move
    // between it and the project fails EXDEV, refusing nothing: round 19).
    view.writable.push(PathBuf::from("/dev/shm"));
    for m in &plan.mounts {
        match m {
            MountOp::Writable { path } => view.writable.push(path.clone()),
            MountOp::WritableAt { dst, .. } => view.writable.push(dst.clone()),
            MountOp::ReadOnly { path } => view.protected.push(path.clone()),
            MountOp::MaskDir { path } => {
                view.masked.push(path.clone());
                // allowRead paths inside make its root searchable: other names answer ENOENT.
                let exposes = plan.mounts.iter().any(|op| {
                    matches!(op, MountOp::Expose { path: inner, .. }
                        if inner.starts_with(path) && inner != path)
                });
                if exposes {
                    view.exposing_masks.push(path.clone());
                }
            }
            MountOp::Expose { path, .. } => view.exposed.push(path.clone()),
            MountOp::MaskFile { path } => {
                view.masked_files = true;
                view.masked.push(path.clone())
            }
            MountOp::MaskEmpty { path } => view.masked.push(path.clone()),
            _ => {}
        }
    }
    view
}

/// The request of `warden run`, or `None` when it asks for nothing (no sink, auditing neither
/// enabled nor required): then no session is opened and nothing is loaded.
///
/// `warden.audit.enabled` defaults to whether a sink is requested (`--violations`,
/// `--annotate-stderr`, `warden.audit.violationsFile`, metrics); `warden.audit.required: true`
/// implies it, so a lower layer's `enabled: false` cannot switch off a managed requirement.
/// With `metrics`, a session is opened even when auditing is off, so the proxy's decisions
/// are counted.
pub fn request(
    policy: &crate::policy::merge::Policy,
    violations: Option<PathBuf>,
    annotate: bool,
    metrics: Option<Arc<Metrics>>,
) -> Option<AuditRequest> {
    let e = &policy.effective;
    let file = violations.or_else(|| e.str("warden.audit.violationsFile").map(PathBuf::from));
    // warden.audit.enforce (the BPF LSM third layer, audit/lsm.rs) needs the programs too.
    let required = e.bool("warden.audit.required").unwrap_or(false)
        || e.bool("warden.audit.enforce").unwrap_or(false);
    let sinks = file.is_some() || annotate || metrics.is_some();
    let unix_sockets = unix_socket_paths(policy);
    let enabled =
        required || unix_sockets.is_some() || e.bool("warden.audit.enabled").unwrap_or(sinks);
    // An audit daemon on this machine sees every sandbox, also those that ask for nothing;
    // but the BPF LSM layer shares the maps of programs loaded in this process.
    let in_process = e.bool("warden.audit.enforce").unwrap_or(false);
    let node = !in_process
        && protocol::socket_path(std::env::var_os(protocol::SOCKET_ENV))
            .is_some_and(|p| p.exists());
    (enabled || sinks || node).then_some(AuditRequest {
        enabled,
        required,
        file,
        annotate,
        unix_sockets,
        metrics,
        node,
        in_process,
        labels: crate::metrics::Labels::default(),
    })
}

/// The `allowUnixSockets` paths to enforce (none under `allowAllUnixSockets`). A path the
/// sandbox could write is not honoured: the command could replace the socket with a link to
/// another one; nor is one with a symlink on the way that the sandbox could write.
fn unix_socket_paths(policy: &crate::policy::merge::Policy) -> Option<Vec<Vec<u8>>> {
    use crate::policy::decision::Decision;
    use std::os::unix::ffi::OsStrExt;
    if policy
        .effective
        .bool("network.allowAllUnixSockets")
        .unwrap_or(false)
        || policy.unix_sockets.is_empty()
    {
        return None;
    }
    let fs = crate::policy::fsview::RealFs;
    let paths = policy
        .unix_sockets
        .iter()
        .filter_map(|rule| {
            let path = &rule.pattern;
            let can_write = |p: &std::path::Path| {
                policy
                    .check_path(&fs, p, crate::policy::path::Access::Write)
                    .decision
                    == Decision::Allow
            };
            // The socket itself, or a symlink on the way to it that the sandbox could repoint
            // (the kernel follows links at connect time; the program compares the path).
            let writable = can_write(path)
                || path.ancestors().skip(1).any(|a| {
                    std::fs::symlink_metadata(a).is_ok_and(|m| m.file_type().is_symlink())
                        && a.parent().is_some_and(can_write)
                });
            if writable {
                eprintln!(
                    "warden: warning: allowUnixSockets {:?} is ignored: the sandbox can write there, so it could replace the socket",
                    &*rule.text
                );
                return None;
            }
            Some(path.as_os_str().as_bytes().to_vec())
        })
        .collect();
    // Enforced even when every path was dropped: then no unix socket is reachable.
    Some(paths)
}

/// What `warden run` asks for.
#[derive(Clone, Debug, Default)]
pub struct AuditRequest {
    /// Load the eBPF programs (`warden.audit.enabled`, default: when a sink is requested).
    pub enabled: bool,
    /// Refuse to run without them (`warden.audit.required`).
    pub required: bool,
    /// `--violations FILE` or `warden.audit.violationsFile`.
    pub file: Option<PathBuf>,
    /// `--annotate-stderr`.
    pub annotate: bool,
    /// `allowUnixSockets` paths the cgroup/connect_unix program enforces (`None`: no such
    /// rule); when set, auditing must load whatever `required` says (fail closed).
    pub unix_sockets: Option<Vec<Vec<u8>>>,
    /// `--metrics-file`, `--metrics-addr`: every record, proxy decision and byte the proxy
    /// moves is counted here, and the programs attached.
    pub metrics: Option<Arc<Metrics>>,
    /// An audit daemon's socket exists: register with it (also when nothing else is asked
    /// for; then its records are not streamed back).
    pub node: bool,
    /// The programs must be this process's own, never the audit daemon's
    /// (`warden.audit.enforce`: the BPF LSM layer shares their maps, audit/lsm.rs).
    pub in_process: bool,
    /// `--label NAME=VALUE`: on the run's records, and the daemon's records and metrics.
    pub labels: crate::metrics::Labels,
}

enum Stage {
    Loaded(Box<Auditor>),
    Running(Box<Running>),
    /// Connected to the audit daemon (registered once [`watch`] ran).
    Daemon(Box<client::Client>),
    /// Registered, its records read.
    DaemonRunning(Box<client::Running>),
    None,
}

struct Session {
    request: AuditRequest,
    collector: Arc<Collector>,
    stage: Stage,
    sandbox: String,
    cgroup_id: Option<u64>,
    /// The BPF LSM path asked of the audit daemon (`lsm::begin` in daemon mode).
    lsm: Option<lsm::LsmRequest>,
}

static SESSION: Mutex<Option<Session>> = Mutex::new(None);

/// Opens the run's audit session: opens the violations file and, when an audit daemon
/// listens, connects to it; else, when enabled, loads the programs. An error means the run
/// must not start (the file cannot be opened, or auditing is required and unavailable); when
/// auditing is merely enabled, a failure is one warning.
pub fn begin(request: AuditRequest) -> Result<(), AuditError> {
    let collector = Collector::with_metrics(request.file.as_deref(), request.metrics.clone())?;
    collector.set_labels(&request.labels);
    let daemon = if (request.enabled || request.node) && !request.in_process {
        client::Client::connect()
    } else {
        None
    };
    let stage = match daemon {
        Some(c) => Stage::Daemon(Box::new(c)),
        None if request.enabled => load(&request)?,
        None => Stage::None,
    };
    if let Ok(mut s) = SESSION.lock() {
        *s = Some(Session {
            request,
            collector,
            stage,
            sandbox: format!("warden-{}", std::process::id()),
            cgroup_id: None,
            lsm: None,
        });
    }
    Ok(())
}

/// Loads the run's own programs ([`begin`], or when the daemon did not take the sandbox).
fn load(request: &AuditRequest) -> Result<Stage, AuditError> {
    match Auditor::load() {
        Ok(a) => {
            if let Some(m) = &request.metrics {
                for name in a.attached_names() {
                    m.program_loaded(name);
                }
            }
            Ok(Stage::Loaded(Box::new(a)))
        }
        Err(e) if request.unix_sockets.is_some() => Err(AuditError::UnixSockets(Box::new(e))),
        Err(e) if request.required => Err(AuditError::Required(Box::new(e))),
        Err(e) => {
            eprintln!(
                "warden: warning: running without kernel audit records \
                 (warden.audit.required is false): {e}"
            );
            Ok(Stage::None)
        }
    }
}

/// Whether the eBPF programs are loaded for this run.
pub fn loaded() -> bool {
    SESSION.lock().is_ok_and(|s| {
        s.as_ref().is_some_and(|s| {
            matches!(
                s.stage,
                Stage::Loaded(_) | Stage::Daemon(_) | Stage::DaemonRunning(_)
            )
        })
    })
}

/// Whether a session is open (sinks requested or auditing enabled).
pub fn active() -> bool {
    SESSION.lock().is_ok_and(|s| s.is_some())
}

pub use crate::policy::ignore::ignored_paths;

/// Applies [`ignored_paths`] to the run's collector (a no-op without an audit session).
pub fn set_ignored(paths: Vec<PathBuf>) {
    if let Ok(guard) = SESSION.lock() {
        if let Some(s) = guard.as_ref() {
            s.collector.set_ignored(paths);
        }
    }
}

/// Watches the sandbox's cgroup: registers it with the audit daemon, or with the run's own
/// programs. `view` (the plan's mounts) is what the daemon's classifier needs. Errors only
/// when auditing is required.
pub fn watch(
    cgroup_dir: &Path,
    view: SandboxView,
    lsm_rules: Option<lsm::Rules>,
) -> Result<(), AuditError> {
    let Ok(mut guard) = SESSION.lock() else {
        return Ok(());
    };
    let Some(s) = guard.as_mut() else {
        return Ok(());
    };
    if let Some(name) = cgroup_dir.file_name() {
        s.sandbox = name.to_string_lossy().into_owned();
    }
    if let Stage::Daemon(_) = s.stage {
        let Stage::Daemon(mut client) = std::mem::replace(&mut s.stage, Stage::None) else {
            return Ok(());
        };
        let registered = registration(s, cgroup_dir, &view, lsm_rules.as_ref())
            .and_then(|(id, reg)| client.register(&reg).map(|status| (id, status)));
        match registered {
            Ok((id, status)) => {
                s.cgroup_id = Some(id);
                if let Some(m) = &s.request.metrics {
                    for name in &status.programs {
                        m.program_loaded(name);
                    }
                }
                if let Some(w) = &status.warning {
                    eprintln!("warden: warning: {w}");
                }
                s.stage = Stage::Daemon(client);
                return Ok(());
            }
            // Enforcement was asked of the daemon: without it, refuse (fail closed) rather
            // than run on this process's tracepoint programs alone.
            Err(e) if s.lsm.as_ref().is_some_and(|l| l.enforce) => {
                return Err(AuditError::Load(format!(
                    "the audit daemon did not take this sandbox with warden.audit.enforce: {e}"
                )));
            }
            Err(e) if !s.request.enabled => {
                eprintln!("warden: warning: the audit daemon did not take this sandbox: {e}");
                return Ok(());
            }
            Err(e) => {
                eprintln!(
                    "warden: warning: the audit daemon did not take this sandbox ({e}); \
                     loading warden's own eBPF programs"
                );
                s.stage = load(&s.request)?;
            }
        }
    }
    let Stage::Loaded(auditor) = &mut s.stage else {
        return Ok(());
    };
    let watched = auditor
        .watch_with(cgroup_dir, view.watch_flags())
        .and_then(|id| {
            if let Some(paths) = &s.request.unix_sockets {
                auditor
                    .enforce_unix(id, paths)
                    .map_err(|e| AuditError::UnixSockets(Box::new(e)))?;
            }
            Ok(id)
        });
    match watched {
        Ok(id) => {
            s.cgroup_id = Some(id);
            if let Some(m) = &s.request.metrics {
                for name in bpf::CGROUP_PROGRAMS {
                    m.program_loaded(name);
                }
            }
            Ok(())
        }
        Err(e @ AuditError::UnixSockets(_)) => Err(e),
        Err(e) if s.request.unix_sockets.is_some() => Err(AuditError::UnixSockets(Box::new(e))),
        Err(e) if s.request.required => Err(AuditError::Required(Box::new(e))),
        Err(e) => {
            eprintln!("warden: warning: running without kernel audit records: {e}");
            s.stage = Stage::None;
            Ok(())
        }
    }
}

/// The registration of the session's sandbox (cgroup `dir`, mounts `view`), and its cgroup
/// id.
fn registration(
    s: &Session,
    dir: &Path,
    view: &SandboxView,
    lsm_rules: Option<&lsm::Rules>,
) -> Result<(u64, protocol::Register), AuditError> {
    use std::os::unix::fs::MetadataExt;
    let cg_err = |reason: String| AuditError::Cgroup {
        path: dir.to_path_buf(),
        reason,
    };
    let id = std::fs::metadata(dir)
        .map_err(|e| cg_err(e.to_string()))?
        .ino();
    let cgroup = dir
        .to_str()
        .ok_or_else(|| cg_err("not UTF-8".into()))?
        .to_string();
    let text = |paths: &[PathBuf]| -> Vec<String> {
        paths
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect()
    };
    let unix_sockets = match &s.request.unix_sockets {
        Some(paths) => Some(
            paths
                .iter()
                .map(|p| String::from_utf8(p.clone()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| AuditError::Daemon("an allowUnixSockets path is not UTF-8".into()))?,
        ),
        None => None,
    };
    Ok((
        id,
        protocol::Register {
            sandbox: s.sandbox.clone(),
            cgroup_id: id,
            cgroup,
            labels: s.request.labels.as_map().clone(),
            pid: std::process::id(),
            view: protocol::View {
                writable: text(&view.writable),
                protected: text(&view.protected),
                masked: text(&view.masked),
                ignored: text(&s.collector.ignored()),
                exposing_masks: text(&view.exposing_masks),
                exposed: text(&view.exposed),
            },
            unix_sockets,
            stream: s.request.enabled,
            lsm: s.lsm.as_ref().map(|req| {
                let text = |v: &[PathBuf]| -> Vec<String> {
                    v.iter().map(|p| p.to_string_lossy().into_owned()).collect()
                };
                let rules = lsm_rules.cloned().unwrap_or_default();
                protocol::LsmScope {
                    enforce: req.enforce,
                    fallback: req.fallback.as_deref() == Some(lsm::FALLBACK_TRACEPOINTS),
                    writable: text(&rules.writable),
                    protected: text(&rules.protected),
                    deny_read: text(&rules.deny_read),
                    allow_read: text(&rules.allow_read),
                }
            }),
        },
    ))
}

/// The session failed to watch a cgroup because there is none (failIfUnavailable false).
pub fn no_cgroup() -> Result<(), AuditError> {
    let Ok(mut guard) = SESSION.lock() else {
        return Ok(());
    };
    let Some(s) = guard.as_mut() else {
        return Ok(());
    };
    if matches!(s.stage, Stage::Loaded(_)) {
        let e = AuditError::Cgroup {
            path: PathBuf::from("(none)"),
            reason: "the sandbox runs without a cgroup, which auditing is scoped to".into(),
        };
        if s.request.unix_sockets.is_some() {
            return Err(AuditError::UnixSockets(Box::new(e)));
        }
        if s.request.required {
            return Err(AuditError::Required(Box::new(e)));
        }
        eprintln!("warden: warning: running without kernel audit records: {e}");
        s.stage = Stage::None;
    }
    Ok(())
}

/// Starts reading once the sandbox runs. `view` describes its mounts for layer inference.
pub fn start_reader(view: SandboxView) {
    let Ok(mut guard) = SESSION.lock() else {
        return;
    };
    let Some(s) = guard.as_mut() else {
        return;
    };
    if s.cgroup_id.is_none() {
        return;
    }
    match std::mem::replace(&mut s.stage, Stage::None) {
        Stage::Loaded(auditor) => {
            let view = SandboxView {
                sandbox: s.sandbox.clone(),
                ..view
            };
            match auditor.start(view, s.collector.clone()) {
                Ok(r) => {
                    if let Some(m) = &s.request.metrics {
                        count_losses(m, &Losses::default());
                    }
                    s.stage = Stage::Running(Box::new(r))
                }
                Err(e) => eprintln!("warden: warning: kernel audit records stopped: {e}"),
            }
        }
        Stage::Daemon(client) => {
            match client.start(
                s.collector.clone(),
                view.policy.clone(),
                s.request.metrics.clone(),
            ) {
                Ok(r) => {
                    if let Some(m) = &s.request.metrics {
                        count_losses(m, &Losses::default());
                    }
                    s.stage = Stage::DaemonRunning(Box::new(r))
                }
                Err(e) => eprintln!("warden: warning: kernel audit records stopped: {e}"),
            }
        }
        other => s.stage = other,
    }
}

/// The sink the proxy hands its events to, when a session is open.
pub fn proxy_sink() -> Option<Arc<dyn EventSink>> {
    let guard = SESSION.lock().ok()?;
    let s = guard.as_ref()?;
    Some(Arc::new(ProxySink {
        sandbox: s.sandbox.clone(),
        collector: s.collector.clone(),
    }))
}

/// Ends the session after the command ended: drains the ring buffer, writes what is left,
/// reports losses and, with `--annotate-stderr`, prints the `<sandbox_violations>` block.
pub fn finish() {
    let session = SESSION.lock().ok().and_then(|mut s| s.take());
    let Some(s) = session else {
        return;
    };
    let losses = match s.stage {
        Stage::Running(r) => {
            let losses = r.finish();
            // Only when the programs ran: a run without them has no drop counters to report.
            if let Some(m) = &s.request.metrics {
                count_losses(m, &losses);
            }
            losses
        }
        Stage::DaemonRunning(r) => {
            let losses = r.finish();
            if let Some(m) = &s.request.metrics {
                count_losses(m, &losses);
            }
            // The run asked for no records of its own: the daemon's losses are its business.
            if s.request.enabled {
                losses
            } else {
                Losses::default()
            }
        }
        _ => Losses::default(),
    };
    s.collector.flush();
    if losses.total() > 0 {
        eprintln!("warden: warning: {}", losses_text(&losses));
    }
    if let Some(e) = s.collector.write_error() {
        eprintln!("warden: warning: writing violation records to {e}");
    }
    let over = s.collector.over_cap();
    if over > 0 {
        eprintln!(
            "warden: warning: {over} violation records were not written to the file: this run \
             reached its {} MiB (they are in the metrics and the summary)",
            FILE_CAP >> 20
        );
    }
    if s.request.annotate {
        let (violations, more) = s.collector.violations();
        eprint!("{}", annotation(&violations, more, &losses));
    }
}

#[cfg(test)]
#[path = "record_tests.rs"]
mod record_tests;

#[cfg(test)]
#[path = "mod_tests.rs"]
mod mod_tests;

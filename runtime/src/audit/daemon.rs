//! `warden audit`: the node daemon (issue #5; docs/audit-daemon.md, decisions/0003). It loads
//! the eBPF programs once, and the sandboxes `warden run` starts register their cgroup with
//! it over a unix socket. The daemon classifies every event of a registered cgroup itself
//! (with the sandbox's mount view from the registration), writes the records of every
//! sandbox, labelled, to its own violations file and metrics, and streams each sandbox's
//! records back to the `warden run` that registered it, which feeds its own sinks. A
//! sandbox is unregistered (its id removed from the in-kernel map, its cgroup programs
//! detached) when its connection closes, however its `warden run` ended.
//!
//! Who may register: a peer (SO_PEERCRED) that is root or the daemon's own user, in the
//! daemon's user namespace, not inside a registered sandbox's cgroup, registering from its
//! own pid; the socket itself is mode 0600.
//!
//! Threads: the main thread waits for SIGINT/SIGTERM; one accepts connections; one per
//! connection reads it and one writes to it (a bounded queue: a run that does not read
//! loses records, counted, instead of stalling the node); one polls the ring buffer; one
//! serves `/metrics`.

use super::bpf::{self, Programs};
use super::client::read_line;
use super::protocol::{self, Event, LossCounts, Registration, Request, Status};
use super::record::{Classifier, RawEvent, SandboxView};
use super::{count_losses, count_record, AuditError, Collector, Losses};
use crate::metrics::{Metrics, NodeMetrics};
use libbpf_rs::MapHandle;
use std::collections::{BTreeMap, HashMap};
use std::io::{BufReader, Write};
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the ring buffer reader wakes up without events (stop, drain requests, flushes).
const POLL: Duration = Duration::from_millis(50);
/// Polls between two reads of the drop counters (about a second).
const DROPS_EVERY: u32 = 20;
/// How often the accept loop looks for the stop flag.
const ACCEPT_POLL: Duration = Duration::from_millis(200);
/// How long a new connection may take to send its registration.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a write to a run may block before the connection is given up.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `finish` waits for the reader to drain the ring buffer.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
/// Lines queued per connection towards its run; beyond, records are dropped and counted.
const QUEUE: usize = 4096;
/// Each sandbox's share of the ring buffer: events per 100 ms it may send whatever the
/// buffer holds (about a seventh of the 2 MiB buffer's ~1 900 records); past it, only while
/// the buffer is less than half full (ebpf/emit.bpf.h).
const RING_SHARE: u64 = 256;
/// Connections at once (the in-kernel map holds 1024 cgroup ids).
const MAX_CONNECTIONS: usize = 1024;

/// What `warden audit` was asked for.
#[derive(Clone, Debug)]
pub struct DaemonConfig {
    /// The socket `warden run` registers on.
    pub socket: PathBuf,
    /// Append every registered sandbox's records here (JSON lines).
    pub violations: Option<PathBuf>,
    /// Serve `/metrics` and `/healthz` here.
    pub metrics_addr: Option<SocketAddr>,
}

/// A registered sandbox.
struct Entry {
    sandbox: String,
    labels: BTreeMap<String, String>,
    classifier: Classifier,
    ignored: Vec<PathBuf>,
    group: Arc<Metrics>,
    /// Lines towards the run; records only when it asked for them (`stream`).
    tx: SyncSender<String>,
    stream: bool,
    /// Ring buffer events of this sandbox.
    events: u64,
    /// Records dropped because the queue towards the run was full.
    relay_full: u64,
}

struct State {
    programs: Mutex<Programs>,
    /// The BPF LSM programs, sharing the tracepoint programs' maps, where the kernel allows
    /// them; else why not.
    lsm: Mutex<Result<super::lsm::LsmPrograms, String>>,
    sandboxes: Mutex<HashMap<u64, Entry>>,
    collector: Arc<Collector>,
    metrics: Arc<NodeMetrics>,
    node: Arc<Metrics>,
    drops: MapHandle,
    undecodable: AtomicU64,
    drain: Mutex<Sender<SyncSender<()>>>,
    /// The daemon's own uid: it (and root) may register.
    uid: u32,
    /// The daemon's user namespace (`/proc/self/ns/user`).
    userns: Option<PathBuf>,
    stopping: AtomicBool,
    /// Live connections, to shut down at stop.
    conns: Mutex<HashMap<u64, UnixStream>>,
    next_conn: AtomicU64,
}

fn err(what: &str, e: impl std::fmt::Display) -> AuditError {
    AuditError::Daemon(format!("{what}: {e}"))
}

/// Runs the daemon until SIGINT or SIGTERM; then unregisters every sandbox, detaches every
/// program and removes the socket.
pub fn run(config: &DaemonConfig) -> Result<(), AuditError> {
    // Before any thread exists, so every thread inherits the mask and only `wait` below
    // takes the signals.
    let mut signals = nix::sys::signal::SigSet::empty();
    signals.add(nix::sys::signal::Signal::SIGINT);
    signals.add(nix::sys::signal::Signal::SIGTERM);
    signals
        .thread_block()
        .map_err(|e| err("blocking SIGINT and SIGTERM", e))?;
    let metrics_listener = config
        .metrics_addr
        .map(crate::metrics::bind)
        .transpose()
        .map_err(|e| err("metrics", e))?;
    let collector = Collector::for_daemon(config.violations.as_deref())?;
    let file_collector = collector.clone();
    let programs = Programs::load()?;
    let lsm = super::lsm::LsmPrograms::load(Some(&programs.lsm_shared()));
    match &lsm {
        Ok(_) => eprintln!("warden audit: BPF LSM programs loaded (observe and enforce)"),
        Err(why) => eprintln!("warden audit: no BPF LSM programs ({why}): tracepoints only"),
    }
    let metrics = Arc::new(NodeMetrics::new());
    let node = metrics.node();
    for name in &programs.attached_names {
        node.program_loaded(name);
    }
    if lsm.is_ok() {
        for name in super::lsm::PROGRAMS {
            node.program_loaded(name);
        }
    }
    for name in bpf::CGROUP_PROGRAMS {
        node.set_program(name, false);
    }
    node.set_registered(programs.watched_count());
    count_losses(&node, &Losses::default());
    let events = programs.events()?;
    let drops = programs.drops_handle()?;
    let listener = bind_socket(&config.socket)?;
    let (drain_tx, drain_rx) = mpsc::channel();
    let state = Arc::new(State {
        programs: Mutex::new(programs),
        lsm: Mutex::new(lsm),
        sandboxes: Mutex::new(HashMap::new()),
        collector,
        metrics: metrics.clone(),
        node,
        drops,
        undecodable: AtomicU64::new(0),
        drain: Mutex::new(drain_tx),
        uid: nix::unistd::geteuid().as_raw(),
        userns: std::fs::read_link("/proc/self/ns/user").ok(),
        stopping: AtomicBool::new(false),
        conns: Mutex::new(HashMap::new()),
        next_conn: AtomicU64::new(0),
    });
    let started = (|| {
        let reader = start_reader(state.clone(), events, drain_rx)?;
        let server = match metrics_listener {
            Some(l) => {
                if let Ok(a) = l.local_addr() {
                    eprintln!("warden audit: metrics on http://{a}/metrics");
                }
                Some(
                    crate::metrics::Server::start(l, metrics.clone())
                        .map_err(|e| err("metrics", e))?,
                )
            }
            None => None,
        };
        Ok::<_, AuditError>((reader, server))
    })();
    let (reader, server) = match started {
        Ok(r) => r,
        Err(e) => {
            let _ = std::fs::remove_file(&config.socket);
            return Err(e);
        }
    };
    let handles: Arc<Mutex<Vec<std::thread::JoinHandle<()>>>> = Arc::default();
    let accept_state = state.clone();
    let accept_handles = handles.clone();
    let accepter = std::thread::Builder::new()
        .name("warden-audit-accept".into())
        .spawn(move || accept(&accept_state, &listener, &accept_handles))
        .map_err(|e| err("starting the accept thread", e));
    let accepter = match accepter {
        Ok(t) => t,
        Err(e) => {
            let _ = std::fs::remove_file(&config.socket);
            return Err(e);
        }
    };
    eprintln!(
        "warden audit: listening on {} ({} programs attached)",
        config.socket.display(),
        state
            .programs
            .lock()
            .map(|p| p.attached_names.join(", "))
            .unwrap_or_default()
    );
    let signal = signals.wait();
    eprintln!(
        "warden audit: {}: stopping",
        signal.map_or("signal".to_string(), |s| s.as_str().to_string())
    );

    // Stop: no new connections, the socket gone, every sandbox unregistered, the reader
    // drained, then every program detached (when `state` is dropped).
    state.stopping.store(true, Ordering::Release);
    let _ = accepter.join();
    let _ = std::fs::remove_file(&config.socket);
    if let Ok(conns) = state.conns.lock() {
        for c in conns.values() {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }
    let handles = handles
        .lock()
        .map(|mut h| std::mem::take(&mut *h))
        .unwrap_or_default();
    for h in handles {
        let _ = h.join();
    }
    reader.stop();
    if let Some(s) = server {
        s.stop();
    }
    state.collector.flush();
    if let Some(e) = state.collector.write_error() {
        eprintln!("warden audit: warning: writing violation records to {e}");
    }
    let left = state.programs.lock().map(|p| p.watching()).unwrap_or(0);
    drop(state);
    eprintln!("warden audit: stopped ({left} sandboxes left registered, programs detached)");
    let over = file_collector.over_cap();
    if over > 0 {
        eprintln!(
            "warden audit: {over} records were not written to the violations file (sandboxes \
             past their share of it); they were counted in the metrics"
        );
    }
    if let Some(e) = file_collector.write_error() {
        eprintln!("warden audit: warning: the violations file: {e}");
    }
    Ok(())
}

/// Binds the socket at `path`, mode 0600. A socket left by a daemon that died is replaced; one
/// another daemon listens on is an error, as is anything that is not a socket.
fn bind_socket(path: &Path) -> Result<UnixListener, AuditError> {
    let sock_err = |e: std::io::Error| err(&format!("the socket {}", path.display()), e);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(dir)
                .map_err(sock_err)?;
        }
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            if UnixStream::connect(path).is_ok() {
                return Err(AuditError::Daemon(format!(
                    "another audit daemon listens on {}",
                    path.display()
                )));
            }
            std::fs::remove_file(path).map_err(sock_err)?;
        }
        Ok(_) => {
            return Err(AuditError::Daemon(format!(
                "{} exists and is not a socket",
                path.display()
            )))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(sock_err(e)),
    }
    // Created 0600 (no moment with a wider mode); single-threaded here, so the umask change
    // affects nothing else.
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
    let bound = UnixListener::bind(path);
    nix::sys::stat::umask(old);
    let listener = bound.map_err(sock_err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(sock_err)?;
    listener.set_nonblocking(true).map_err(sock_err)?;
    Ok(listener)
}

fn accept(
    state: &Arc<State>,
    listener: &UnixListener,
    handles: &Arc<Mutex<Vec<std::thread::JoinHandle<()>>>>,
) {
    let timeout = u16::try_from(ACCEPT_POLL.as_millis()).unwrap_or(200);
    while !state.stopping.load(Ordering::Acquire) {
        let mut fds = [nix::poll::PollFd::new(
            listener.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        if nix::poll::poll(&mut fds, timeout).unwrap_or(0) == 0 {
            continue;
        }
        let Ok((stream, _)) = listener.accept() else {
            // Out of descriptors (a flood of connections): pause rather than spin on the
            // listener that stays readable.
            std::thread::sleep(std::time::Duration::from_millis(50));
            continue;
        };
        let _ = stream.set_nonblocking(false);
        if let Ok(mut h) = handles.lock() {
            h.retain(|t| !t.is_finished());
            if h.len() >= MAX_CONNECTIONS {
                let mut s = &stream;
                let _ = s
                    .write_all(protocol::line(&Status::refused("too many connections")).as_bytes());
                continue;
            }
        }
        let id = state.next_conn.fetch_add(1, Ordering::Relaxed);
        if let (Ok(mut conns), Ok(clone)) = (state.conns.lock(), stream.try_clone()) {
            conns.insert(id, clone);
        }
        let conn_state = state.clone();
        let spawned = std::thread::Builder::new()
            .name("warden-audit-conn".into())
            .spawn(move || {
                connection(&conn_state, stream);
                if let Ok(mut conns) = conn_state.conns.lock() {
                    conns.remove(&id);
                }
            });
        match spawned {
            Ok(t) => {
                if let Ok(mut h) = handles.lock() {
                    h.push(t);
                }
            }
            Err(_) => {
                if let Ok(mut conns) = state.conns.lock() {
                    conns.remove(&id);
                }
            }
        }
    }
}

/// Why a peer may not register, if it may not.
fn authorize(state: &State, uid: u32, pid: i32) -> Result<(), String> {
    if uid != 0 && uid != state.uid {
        return Err(format!(
            "uid {uid} may not register sandboxes (only root and uid {})",
            state.uid
        ));
    }
    let ns = std::fs::read_link(format!("/proc/{pid}/ns/user"))
        .map_err(|e| format!("the peer's user namespace: {e}"))?;
    if state.userns.as_ref() != Some(&ns) {
        return Err("the peer runs in another user namespace (inside a sandbox?)".into());
    }
    let cgroup = peer_cgroup(pid)?;
    let registered: Vec<u64> = state
        .sandboxes
        .lock()
        .map(|s| s.keys().copied().collect())
        .unwrap_or_default();
    let mount = crate::linux::cgroup::find_v2_mount().map_err(|e| e.to_string())?;
    for dir in cgroup.ancestors().take_while(|d| d.starts_with(&mount)) {
        if let Ok(m) = std::fs::metadata(dir) {
            if registered.contains(&m.ino()) {
                return Err("the peer runs inside a registered sandbox".into());
            }
        }
    }
    Ok(())
}

/// The cgroup v2 directory of process `pid`.
fn peer_cgroup(pid: i32) -> Result<PathBuf, String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .map_err(|e| format!("the peer's cgroup: {e}"))?;
    let rel = text
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("the peer is in no cgroup v2")?;
    let mount = crate::linux::cgroup::find_v2_mount().map_err(|e| e.to_string())?;
    Ok(mount.join(rel.trim_start_matches('/')))
}

/// Checks the registration against the peer and the system: its pid is the peer's, its
/// cgroup a cgroup v2 directory whose id is `cgroup_id`.
fn check(reg: &Registration, peer_pid: i32) -> Result<PathBuf, String> {
    if i64::from(reg.pid) != i64::from(peer_pid) {
        return Err(format!(
            "pid {} is not the connecting process ({peer_pid})",
            reg.pid
        ));
    }
    let mount = crate::linux::cgroup::find_v2_mount().map_err(|e| e.to_string())?;
    let dir = reg
        .cgroup
        .canonicalize()
        .map_err(|e| format!("cgroup {}: {e}", reg.cgroup.display()))?;
    if !dir.starts_with(&mount) || dir == mount {
        return Err(format!(
            "{} is not a cgroup below {}",
            dir.display(),
            mount.display()
        ));
    }
    let meta = std::fs::metadata(&dir).map_err(|e| format!("cgroup {}: {e}", dir.display()))?;
    if !meta.is_dir() || meta.ino() != reg.cgroup_id {
        return Err(format!(
            "cgroup {} has id {}, not {}",
            dir.display(),
            meta.ino(),
            reg.cgroup_id
        ));
    }
    Ok(dir)
}

fn reply(stream: &UnixStream, status: &Status) {
    let mut s = stream;
    let _ = s.write_all(protocol::line(status).as_bytes());
}

fn drops_now(state: &State) -> [u64; bpf::DROP_SLOTS] {
    bpf::read_drops(&state.drops).unwrap_or_default()
}

/// One connection: authorize, register, serve, unregister.
fn connection(state: &Arc<State>, stream: UnixStream) {
    let cred =
        match nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials) {
            Ok(c) => c,
            Err(e) => return reply(&stream, &Status::refused(format!("SO_PEERCRED: {e}"))),
        };
    if let Err(why) = authorize(state, cred.uid(), cred.pid()) {
        eprintln!(
            "warden audit: refused pid {} (uid {}): {why}",
            cred.pid(),
            cred.uid()
        );
        return reply(&stream, &Status::refused(why));
    }
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut buf = Vec::new();
    let _ = stream.set_read_timeout(Some(REGISTER_TIMEOUT));
    let first = match read_line(&mut reader, &mut buf) {
        Ok(true) => protocol::parse_request(&buf),
        Ok(false) => return,
        Err(e) => return reply(&stream, &Status::refused(format!("no registration: {e}"))),
    };
    let received = std::time::Instant::now();
    let reg = match first {
        Ok(Request::Register(r)) => r.validate(),
        Ok(_) => return reply(&stream, &Status::refused("expected a registration first")),
        Err(e) => return reply(&stream, &Status::refused(e.to_string())),
    };
    let reg = match reg
        .map_err(|e| e.to_string())
        .and_then(|r| check(&r, cred.pid()).map(|dir| (r, dir)))
    {
        Ok(r) => r,
        Err(why) => {
            eprintln!("warden audit: refused pid {}: {why}", cred.pid());
            return reply(&stream, &Status::refused(why));
        }
    };
    let (reg, dir) = reg;
    let baseline = drops_now(state);
    let undecodable_base = state.undecodable.load(Ordering::Relaxed);
    let (tx, rx) = mpsc::sync_channel::<String>(QUEUE);
    let group = state.metrics.group(&reg.labels);
    if let Err(why) = register(state, &reg, &dir, tx.clone(), group.clone()) {
        eprintln!("warden audit: refused {}: {why}", reg.sandbox);
        return reply(&stream, &Status::refused(why));
    }
    eprintln!(
        "warden audit: registered {} (cgroup {}, pid {}{}, in {:.2} ms)",
        reg.sandbox,
        reg.cgroup_id,
        reg.pid,
        if reg.labels.is_empty() {
            String::new()
        } else {
            format!(", labels {}", reg.labels.display())
        },
        received.elapsed().as_secs_f64() * 1000.0
    );
    let writer = stream.try_clone().ok().and_then(|w| {
        let _ = w.set_write_timeout(Some(WRITE_TIMEOUT));
        std::thread::Builder::new()
            .name("warden-audit-send".into())
            .spawn(move || send_lines(w, &rx))
            .ok()
    });
    let _ = stream.set_read_timeout(None);
    serve(
        state,
        &reg,
        &mut reader,
        &tx,
        &group,
        baseline,
        undecodable_base,
    );
    drop(tx);
    unregister(state, &reg, &group);
    // The run closed its end (or the daemon stops): nothing more will be read.
    let _ = stream.shutdown(std::net::Shutdown::Both);
    if let Some(w) = writer {
        let _ = w.join();
    }
}

fn send_lines(mut stream: UnixStream, rx: &Receiver<String>) {
    for line in rx {
        if stream.write_all(line.as_bytes()).is_err() {
            let _ = stream.shutdown(std::net::Shutdown::Both);
            return;
        }
    }
}

/// Adds the sandbox to the registry and the kernel's map, and queues `{"ok":true}` before
/// any of its records.
fn register(
    state: &State,
    reg: &Registration,
    dir: &Path,
    tx: SyncSender<String>,
    group: Arc<Metrics>,
) -> Result<(), String> {
    let mut sandboxes = state.sandboxes.lock().map_err(|_| "registry poisoned")?;
    if sandboxes.contains_key(&reg.cgroup_id) {
        return Err(format!("cgroup {} is already registered", reg.cgroup_id));
    }
    let paths = |v: &[String]| -> Vec<PathBuf> { v.iter().map(PathBuf::from).collect() };
    let view = SandboxView {
        sandbox: reg.sandbox.clone(),
        writable: paths(&reg.view.writable),
        protected: paths(&reg.view.protected),
        masked: paths(&reg.view.masked),
        exposing_masks: paths(&reg.view.exposing_masks),
        exposed: paths(&reg.view.exposed),
        // The registration does not say which masks are files: the programs keep looking at
        // every opened descriptor.
        masked_files: true,
        policy: None,
    };
    let mut programs = state.programs.lock().map_err(|_| "programs poisoned")?;
    let id = programs
        .watch_with(dir, view.watch_flags())
        .map_err(|e| e.to_string())?;
    if id != reg.cgroup_id {
        programs.unwatch(id);
        return Err(format!("cgroup id {id}, not {}", reg.cgroup_id));
    }
    if let Err(e) = programs.share_ring(id, RING_SHARE) {
        programs.unwatch(id);
        return Err(e.to_string());
    }
    if let Some(unix) = &reg.unix_sockets {
        if let Err(e) = programs.enforce_unix(id, unix) {
            programs.unwatch(id);
            return Err(e.to_string());
        }
    }
    let mut names = programs.attached_names.clone();
    names.extend(bpf::CGROUP_PROGRAMS.iter().map(|s| s.to_string()));
    let (lsm, warning) = match scope_lsm(state, id, reg.lsm.as_ref()) {
        Ok(r) => r,
        Err(e) => {
            programs.unwatch(id);
            return Err(e);
        }
    };
    if let Some(mode) = &lsm {
        names.extend(super::lsm::PROGRAMS.iter().map(|s| s.to_string()));
        eprintln!(
            "warden audit: {} judged by the BPF LSM programs ({mode})",
            reg.sandbox
        );
    }
    let status = Status {
        ok: true,
        error: None,
        programs: names,
        lsm,
        warning,
    };
    if tx.try_send(protocol::line(&status)).is_err() {
        unscope_lsm(state, id);
        programs.unwatch(id);
        return Err("the connection's queue".into());
    }
    state.node.set_registered(programs.watched_count());
    for name in bpf::CGROUP_PROGRAMS {
        state.node.set_program(name, true);
    }
    drop(programs);
    group.sandbox_registered();
    sandboxes.insert(
        reg.cgroup_id,
        Entry {
            sandbox: reg.sandbox.clone(),
            labels: reg.labels.as_map().clone(),
            classifier: Classifier::new(view),
            ignored: paths(&reg.view.ignored),
            group,
            tx,
            stream: reg.stream,
            events: 0,
            relay_full: 0,
        },
    );
    Ok(())
}

/// The BPF LSM path a registration asks for: `(mode scoped, warning for the run)`. Enforce
/// without LSM is refused (fail closed) unless the run allows the tracepoint fallback.
fn scope_lsm(
    state: &State,
    id: u64,
    scope: Option<&protocol::LsmScope>,
) -> Result<(Option<String>, Option<String>), String> {
    let Some(scope) = scope else {
        return Ok((None, None));
    };
    let mut lsm = state.lsm.lock().map_err(|_| "LSM programs poisoned")?;
    let paths = |v: &[String]| -> Vec<PathBuf> { v.iter().map(PathBuf::from).collect() };
    let rules = super::lsm::Rules {
        writable: paths(&scope.writable),
        protected: paths(&scope.protected),
        deny_read: paths(&scope.deny_read),
        allow_read: paths(&scope.allow_read),
    };
    let (mode, name) = if scope.enforce {
        (super::lsm::MODE_ENFORCE, "enforce")
    } else {
        (super::lsm::MODE_OBSERVE, "observe")
    };
    let unavailable = match lsm.as_mut() {
        Ok(programs) => match programs.scope(id, mode, &rules) {
            Ok(()) => return Ok((Some(name.to_string()), None)),
            Err(e) => format!("scoping them to the sandbox failed: {e}"),
        },
        Err(why) => why.clone(),
    };
    if scope.enforce && !scope.fallback {
        return Err(format!(
            "warden.audit.enforce: the audit daemon's BPF LSM programs are unavailable              ({unavailable}); set warden.audit.enforceFallback: \"{}\" to run on the              tracepoints",
            super::lsm::FALLBACK_TRACEPOINTS
        ));
    }
    let warning = scope.enforce.then(|| {
        format!(
            "warden.audit.enforce: the audit daemon's BPF LSM programs are unavailable              ({unavailable}); running on the tracepoints (enforceFallback)"
        )
    });
    Ok((None, warning))
}

fn unscope_lsm(state: &State, id: u64) {
    if let Ok(mut lsm) = state.lsm.lock() {
        if let Ok(programs) = lsm.as_mut() {
            programs.unscope(id);
        }
    }
}

/// Removes the sandbox from the kernel's map and the registry, detaches its programs.
fn unregister(state: &State, reg: &Registration, group: &Metrics) {
    let entry = state
        .sandboxes
        .lock()
        .ok()
        .and_then(|mut s| s.remove(&reg.cgroup_id));
    unscope_lsm(state, reg.cgroup_id);
    if let Ok(mut programs) = state.programs.lock() {
        programs.unwatch(reg.cgroup_id);
        state.node.set_registered(programs.watched_count());
        let attached = programs.watching() > 0;
        for name in bpf::CGROUP_PROGRAMS {
            state.node.set_program(name, attached);
        }
    }
    if entry.is_some() {
        group.sandbox_unregistered();
    }
    state.collector.flush();
    eprintln!("warden audit: unregistered {}", reg.sandbox);
}

/// Reads the run's lines until it closes the connection.
fn serve(
    state: &State,
    reg: &Registration,
    reader: &mut BufReader<UnixStream>,
    tx: &SyncSender<String>,
    group: &Metrics,
    baseline: [u64; bpf::DROP_SLOTS],
    undecodable_base: u64,
) {
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match read_line(reader, &mut buf) {
            Ok(true) => {}
            Ok(false) | Err(_) => return,
        }
        match protocol::parse_request(&buf) {
            Ok(Request::Record { record }) => {
                // The daemon alone makes kernel records; a run reports its proxy's.
                if record.source != "proxy" {
                    continue;
                }
                let mut rec = *record;
                rec.sandbox = reg.sandbox.clone();
                rec.labels = reg.labels.as_map().clone();
                group.network_request(
                    if rec.violation { "deny" } else { "allow" },
                    match rec.operation.as_str() {
                        "connect-tunnel" => "connect",
                        other => other,
                    },
                );
                count_record(group, &rec);
                state.collector.push(rec);
                state.collector.flush();
            }
            Ok(Request::Bytes { up, down }) => group.network_bytes(up, down),
            Ok(Request::Finish) => {
                let (ack_tx, ack_rx) = mpsc::sync_channel(1);
                let asked = state
                    .drain
                    .lock()
                    .map(|d| d.send(ack_tx).is_ok())
                    .unwrap_or(false);
                if asked {
                    let _ = ack_rx.recv_timeout(DRAIN_TIMEOUT);
                }
                let now = drops_now(state);
                let rate = state
                    .programs
                    .lock()
                    .ok()
                    .and_then(|p| p.rate(reg.cgroup_id))
                    .unwrap_or_default();
                let (events, relay_full) = state
                    .sandboxes
                    .lock()
                    .ok()
                    .and_then(|s| s.get(&reg.cgroup_id).map(|e| (e.events, e.relay_full)))
                    .unwrap_or_default();
                let done = Event::Done {
                    losses: LossCounts {
                        ring_full: rate.ring_full,
                        rate_limited: rate.limited,
                        pending_full: now[1].saturating_sub(baseline[1]),
                        undecodable: state
                            .undecodable
                            .load(Ordering::Relaxed)
                            .saturating_sub(undecodable_base),
                        relay_full,
                    },
                    events,
                };
                // After every record of the sandbox the reader queued.
                let _ = tx.send(protocol::line(&done));
            }
            Ok(Request::Register(_)) => {
                let _ = tx.send(protocol::line(&Status::refused("already registered")));
                return;
            }
            Err(e) => {
                let _ = tx.send(protocol::line(&Status::refused(e.to_string())));
                return;
            }
        }
    }
}

struct Reader {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Reader {
    fn stop(self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.thread.join();
    }
}

/// The ring buffer reader: every event of a registered cgroup becomes a record of its
/// sandbox (the daemon's file and metrics, and the queue towards its run).
fn start_reader(
    state: Arc<State>,
    events: MapHandle,
    drain: Receiver<SyncSender<()>>,
) -> Result<Reader, AuditError> {
    let cb_state = state.clone();
    let mut builder = libbpf_rs::RingBufferBuilder::new();
    builder
        .add(&events, move |data: &[u8]| {
            on_event(&cb_state, data);
            0
        })
        .map_err(|e| AuditError::Reader(e.to_string()))?;
    let ring = builder
        .build()
        .map_err(|e| AuditError::Reader(e.to_string()))?;
    let stop = Arc::new(AtomicBool::new(false));
    let thread_stop = stop.clone();
    let thread = std::thread::Builder::new()
        .name("warden-audit".into())
        .spawn(move || {
            let _events = events;
            let mut polls = 0u32;
            while !thread_stop.load(Ordering::Acquire) {
                let _ = ring.poll(POLL);
                let acks: Vec<SyncSender<()>> = drain.try_iter().collect();
                if !acks.is_empty() {
                    let _ = ring.consume();
                    for a in acks {
                        let _ = a.send(());
                    }
                }
                state.collector.flush();
                polls = polls.wrapping_add(1);
                if polls.is_multiple_of(DROPS_EVERY) {
                    if let Ok(counts) = bpf::read_drops(&state.drops) {
                        count_losses(
                            &state.node,
                            &Losses::from_drops(counts, state.undecodable.load(Ordering::Relaxed)),
                        );
                    }
                }
            }
            let _ = ring.consume();
            state.collector.flush();
        })
        .map_err(|e| AuditError::Reader(e.to_string()))?;
    Ok(Reader { stop, thread })
}

fn on_event(state: &State, data: &[u8]) {
    state.node.bpf_event();
    let ev = match RawEvent::decode(data) {
        Ok(ev) => ev,
        Err(_) => {
            state.undecodable.fetch_add(1, Ordering::Relaxed);
            return;
        }
    };
    let cwd = super::relative(&ev)
        .then(|| super::proc_cwd(ev.pid, ev.tid))
        .flatten();
    let time = super::record::rfc3339_ms(super::WallClock::now().wall_ms(ev.ts_ns));
    let Ok(mut sandboxes) = state.sandboxes.lock() else {
        return;
    };
    // Not (or no longer) registered: nothing to say about it.
    let Some(entry) = sandboxes.get_mut(&ev.cgroup_id) else {
        return;
    };
    entry.events += 1;
    let Some(mut rec) = entry.classifier.classify(&ev, time, cwd.as_deref()) else {
        return;
    };
    if super::is_dropped(&rec, &entry.ignored) {
        return;
    }
    rec.sandbox.clone_from(&entry.sandbox);
    rec.labels.clone_from(&entry.labels);
    count_record(&entry.group, &rec);
    if entry.stream {
        let line = protocol::line(&Event::Record {
            record: Box::new(rec.clone()),
        });
        if let Err(TrySendError::Full(_)) = entry.tx.try_send(line) {
            entry.relay_full += 1;
        }
    }
    drop(sandboxes);
    state.collector.push(rec);
}

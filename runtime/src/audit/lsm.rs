//! The BPF LSM path (issue #5): the programs of `ebpf/warden_lsm.bpf.c`, a separate libbpf-rs
//! skeleton, loaded next to the tracepoint programs when the kernel allows it
//! (docs/decisions/0004-lsm-path.md).
//!
//! - Observe mode (default, when BPF LSM loads): the programs judge what the sandbox's hardened
//!   processes do against its rules (denyRead, writable roots, protected paths, ptrace across
//!   the boundary) and mark the tracepoint's record of the call (`FL_LSM`), so one record per
//!   operation comes out, with layer `lsm` where only this layer objects.
//! - Enforce mode (`warden.audit.enforce: true`): the same programs refuse (EACCES; EPERM for
//!   ptrace), for the sandbox's cgroup only: a third layer under the mount view and Landlock.
//!   Without BPF LSM, warden refuses to run (exit 125) unless
//!   `warden.audit.enforceFallback: "tracepoints"` names the fallback.
//!
//! The session is process-wide like [`super`]'s: `cli/run.rs` calls [`begin`] after
//! [`super::begin`] (it borrows the tracepoint object's ring buffer, drop counters, watched
//! level and per-thread entries), the Linux backend calls [`scope`] after [`super::watch`]
//! (before the go byte) and [`finish`] after [`super::finish`].

use super::record::{self, Kind, Layer, RawEvent, ViolationRecord};
use super::AuditError;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[allow(
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used,
    clippy::expect_used,
    unsafe_op_in_unsafe_fn,
    unused_imports,
    missing_docs,
    dead_code
)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/warden_lsm.skel.rs"));
}

/// The programs of `warden_lsm.bpf.c` (their C names; the section is `lsm/<name>` or
/// `lsm.s/<name>`).
pub const PROGRAMS: [&str; 8] = [
    "file_open",
    "file_permission",
    "inode_create",
    "inode_unlink",
    "inode_rename",
    "bprm_check_security",
    "socket_connect",
    "ptrace_access_check",
];

/// `LSM_OBSERVE`, `LSM_ENFORCE` of warden.bpf.h.
pub const MODE_OBSERVE: u32 = 1;
pub const MODE_ENFORCE: u32 = 2;
/// `LSM_INO_*` of warden.bpf.h.
pub const INO_WRITABLE: u32 = 1;
pub const INO_PROTECTED: u32 = 2;
pub const INO_DENY_READ: u32 = 4;
pub const INO_ALLOW_READ: u32 = 8;
/// `EV_*`, `OP_*`, `FL_*` of warden.bpf.h that only these programs send.
pub const EV_PTRACE: u16 = 6;
pub const EV_SOCKET: u16 = 7;
pub const EV_LSM_FILE: u16 = 8;
pub const OP_CREAT: u16 = 3;
pub const OP_UNLINK: u16 = 6;
pub const OP_RENAME: u16 = 9;
pub const OP_EXEC: u16 = 42;
pub const OP_PTRACE: u16 = 43;
pub const OP_READ: u16 = 44;
pub const FL_LSM: u64 = 1 << 38;
pub const FL_LSM_DENIED: u64 = 1 << 39;

/// The one fallback `warden.audit.enforceFallback` knows.
pub const FALLBACK_TRACEPOINTS: &str = "tracepoints";
/// Where the kernel lists its active LSMs.
const LSM_LIST: &str = "/sys/kernel/security/lsm";

/// What the settings ask of the LSM path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LsmRequest {
    /// `warden.audit.enforce`.
    pub enforce: bool,
    /// `warden.audit.enforceFallback`.
    pub fallback: Option<String>,
}

impl LsmRequest {
    pub fn from_policy(policy: &crate::policy::merge::Policy) -> LsmRequest {
        let e = &policy.effective;
        LsmRequest {
            enforce: e.bool("warden.audit.enforce").unwrap_or(false),
            fallback: e.str("warden.audit.enforceFallback").map(str::to_string),
        }
    }
}

/// What a run does about the LSM path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Load the LSM programs and refuse (enforce mode).
    Enforce,
    /// Load the LSM programs and only record (observe mode).
    Observe,
    /// The tracepoint programs only; `warn`: say so on stderr (enforce was asked for).
    Tracepoints { reason: String, warn: bool },
    /// Do not run (exit 125).
    Refuse(String),
}

/// The choice for `req` given whether BPF LSM is available (`Err`: why not).
pub fn choose(req: &LsmRequest, available: Result<(), &str>) -> Choice {
    match (&req.fallback, req.enforce) {
        (Some(f), _) if f != FALLBACK_TRACEPOINTS => {
            return Choice::Refuse(format!(
                "warden.audit.enforceFallback {f:?} is not a known fallback (the one there is: \
                 \"{FALLBACK_TRACEPOINTS}\")"
            ))
        }
        _ => {}
    }
    match (available, req.enforce, req.fallback.is_some()) {
        (Ok(()), true, _) => Choice::Enforce,
        (Ok(()), false, _) => Choice::Observe,
        (Err(why), true, true) => Choice::Tracepoints {
            reason: format!(
                "warden.audit.enforce: BPF LSM is unavailable ({why}); running on the \
                 enforceFallback \"{FALLBACK_TRACEPOINTS}\": the mount view, Landlock and seccomp \
                 refuse, the tracepoint programs record, nothing is refused by an LSM program"
            ),
            warn: true,
        },
        (Err(why), true, false) => Choice::Refuse(format!(
            "warden.audit.enforce is set but BPF LSM is unavailable: {why}. warden will not run \
             without the third layer it was asked for (set warden.audit.enforceFallback: \
             \"{FALLBACK_TRACEPOINTS}\" to run with the other layers and tracepoint records only)"
        )),
        (Err(why), false, _) => Choice::Tracepoints {
            reason: why.to_string(),
            warn: false,
        },
    }
}

/// Whether `bpf` is among the active LSMs (`lockdown,capability,landlock,bpf`).
pub fn bpf_in_lsm_list(list: &str) -> bool {
    list.trim().split(',').any(|l| l == "bpf")
}

/// Why BPF LSM cannot work here before anything is loaded, if the kernel says so.
fn precheck() -> Result<(), String> {
    match std::fs::read_to_string(LSM_LIST) {
        Ok(list) if bpf_in_lsm_list(&list) => Ok(()),
        Ok(list) => Err(format!(
            "bpf is not among the active LSMs ({}); boot with lsm={},bpf",
            list.trim(),
            list.trim()
        )),
        // securityfs not mounted: the load attempt decides.
        Err(_) => Ok(()),
    }?;
    // A refusal found earlier since this boot (the probe below parses the kernel's BTF: tens
    // of milliseconds on every audited run otherwise).
    if let Some(reason) = cached_refusal() {
        return Err(reason);
    }
    // A trivial LSM program first: where the kernel refuses them all, the reason names that
    // plainly, and warden's object is not opened at all.
    crate::linux::probe::bpf_lsm_refused().map_err(|errno| {
        let reason = format!(
            "the kernel refuses BPF LSM programs ({errno} for a trivial one on \
             bpf_lsm_file_open{})",
            if nix::unistd::geteuid().is_root() {
                ", as root: no BPF trampolines, or a security policy; the tracepoint programs \
                 still work"
            } else {
                ": BPF LSM programs need root"
            }
        );
        if nix::unistd::geteuid().is_root() {
            remember_refusal(&reason);
        }
        reason
    })
}

/// Where a root run remembers, until the next boot, that the kernel refuses BPF LSM.
const REFUSAL_CACHE: &str = "/run/warden/bpf-lsm-refused";
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// The remembered refusal, if it is from this boot and only root could have written it (the
/// file and its directory owned by root, writable by nobody else: a user must not be able to
/// switch the LSM layer off).
fn cached_refusal() -> Option<String> {
    let path = Path::new(REFUSAL_CACHE);
    for p in [path, path.parent()?] {
        let m = std::fs::symlink_metadata(p).ok()?;
        if m.uid() != 0 || m.mode() & 0o022 != 0 || m.file_type().is_symlink() {
            return None;
        }
    }
    let boot = std::fs::read_to_string(BOOT_ID).ok()?;
    let text = std::fs::read_to_string(path).ok()?;
    let (id, reason) = text.split_once('\n')?;
    (id == boot.trim() && !reason.trim().is_empty()).then(|| reason.trim().to_string())
}

/// Remembers a refusal for later runs of this boot (best effort, atomic).
fn remember_refusal(reason: &str) {
    use std::os::unix::fs::DirBuilderExt;
    let Ok(boot) = std::fs::read_to_string(BOOT_ID) else {
        return;
    };
    let path = Path::new(REFUSAL_CACHE);
    let Some(dir) = path.parent() else {
        return;
    };
    let _ = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir);
    let tmp = dir.join(format!(".bpf-lsm-refused.{}", std::process::id()));
    if std::fs::write(&tmp, format!("{}\n{reason}\n", boot.trim())).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
    let _ = std::fs::remove_file(&tmp);
}

/// The descriptors of the tracepoint object's maps this object shares.
pub struct Shared<'a> {
    pub events: BorrowedFd<'a>,
    pub drops: BorrowedFd<'a>,
    pub watch_config: BorrowedFd<'a>,
    pub pending_files: BorrowedFd<'a>,
    pub rates: BorrowedFd<'a>,
}

/// The loaded and attached LSM programs.
pub struct LsmPrograms {
    skel: skel::WardenLsmSkel<'static>,
    _links: Vec<Link>,
    /// The `lsm_inodes` keys inserted per cgroup, to remove them again.
    keys: Vec<(u64, Vec<Vec<u8>>)>,
    pub load_time: Duration,
}

fn load_error(what: &str, e: &libbpf_rs::Error) -> String {
    let hint = match e.kind() {
        libbpf_rs::ErrorKind::PermissionDenied if nix::unistd::geteuid().is_root() => {
            " (EPERM as root: this kernel refuses BPF LSM programs — no BPF trampolines, or a \
             security policy; the tracepoint programs still work)"
        }
        libbpf_rs::ErrorKind::PermissionDenied => " (BPF LSM programs need root)",
        _ => "",
    };
    format!("{what}: {e}{hint}")
}

/// libbpf's messages while the LSM object loads: an expected refusal must not print libbpf's
/// lines on every run's stderr; a rejection of another kind carries their tail in its reason.
static LIBBPF_LOG: Mutex<String> = Mutex::new(String::new());

fn capture(_level: libbpf_rs::PrintLevel, msg: String) {
    if let Ok(mut log) = LIBBPF_LOG.lock() {
        if log.len() < 64 * 1024 {
            log.push_str(&msg);
        }
    }
}

/// Runs `f` with libbpf's messages captured instead of printed; returns them too.
fn quietly<T>(f: impl FnOnce() -> T) -> (T, String) {
    if let Ok(mut log) = LIBBPF_LOG.lock() {
        log.clear();
    }
    let previous = libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Warn, capture)));
    let out = f();
    libbpf_rs::set_print(previous);
    let log = LIBBPF_LOG
        .lock()
        .map(|mut l| std::mem::take(&mut *l))
        .unwrap_or_default();
    (out, log)
}

/// The last `n` non-empty lines of `log`, joined with `; `.
pub fn tail(log: &str, n: usize) -> String {
    let lines: Vec<&str> = log
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(n)..].join("; ")
}

impl LsmPrograms {
    /// Opens, loads (the verifier) and attaches the programs, sharing `shared`'s maps (none:
    /// the object's own, for a probe). Nothing is judged until [`LsmPrograms::scope`] names a
    /// cgroup. `Err` is the reason BPF LSM is unavailable.
    pub fn load(shared: Option<&Shared<'_>>) -> Result<LsmPrograms, String> {
        precheck()?;
        let (loaded, log) = quietly(|| LsmPrograms::load_quietly(shared));
        loaded.map_err(|e| {
            if e.contains("EPERM") || log.trim().is_empty() {
                e
            } else {
                format!("{e}; libbpf: {}", tail(&log, 4))
            }
        })
    }

    fn load_quietly(shared: Option<&Shared<'_>>) -> Result<LsmPrograms, String> {
        let start = Instant::now();
        // One object per `warden run` (or doctor), kept for the process's life: as in bpf.rs,
        // leaking the small box is the simple owner of the skeleton's storage.
        let storage = Box::leak(Box::new(std::mem::MaybeUninit::uninit()));
        let mut open = skel::WardenLsmSkelBuilder::default()
            .open(storage)
            .map_err(|e| load_error("opening the BPF LSM object", &e))?;
        if let Some(s) = shared {
            let maps = &mut open.maps;
            for (name, map, fd) in [
                ("events", &mut maps.events, s.events),
                ("drops", &mut maps.drops, s.drops),
                ("watch_config", &mut maps.watch_config, s.watch_config),
                ("pending_files", &mut maps.pending_files, s.pending_files),
                ("rates", &mut maps.rates, s.rates),
            ] {
                map.reuse_fd(fd)
                    .map_err(|e| load_error(&format!("sharing the map {name}"), &e))?;
            }
        }
        let mut skel = open
            .load()
            .map_err(|e| load_error("loading the BPF LSM programs", &e))?;
        let mut links = Vec::new();
        for prog in skel.object_mut().progs_mut() {
            let section = prog.section().to_string_lossy().into_owned();
            let link = prog
                .attach()
                .map_err(|e| load_error(&format!("attaching {section}"), &e))?;
            links.push(link);
        }
        Ok(LsmPrograms {
            skel,
            _links: links,
            keys: Vec::new(),
            load_time: start.elapsed(),
        })
    }

    /// Judges cgroup `id` (a watched cgroup) in `mode` by `rules`. Paths that do not exist
    /// have no inode and are skipped.
    pub fn scope(&mut self, id: u64, mode: u32, rules: &Rules) -> Result<(), AuditError> {
        let map_err = |what: &str, e: libbpf_rs::Error| AuditError::Map(format!("{what}: {e}"));
        let entries = inode_entries(id, rules, &|p| {
            std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
        });
        let mut keys = Vec::new();
        for (key, class) in entries {
            self.skel
                .maps
                .lsm_inodes
                .update(&key, &class.to_ne_bytes(), MapFlags::ANY)
                .map_err(|e| map_err("inserting an LSM rule", e))?;
            keys.push(key);
        }
        self.keys.push((id, keys));
        self.skel
            .maps
            .lsm_cgroups
            .update(&id.to_ne_bytes(), &mode.to_ne_bytes(), MapFlags::ANY)
            .map_err(|e| map_err("scoping the LSM programs to the sandbox's cgroup", e))
    }

    /// Stops judging cgroup `id` and removes its rules.
    pub fn unscope(&mut self, id: u64) {
        let _ = self.skel.maps.lsm_cgroups.delete(&id.to_ne_bytes());
        for (_, keys) in self.keys.iter().filter(|(w, _)| *w == id) {
            for key in keys {
                let _ = self.skel.maps.lsm_inodes.delete(key);
            }
        }
        self.keys.retain(|(w, _)| *w != id);
    }

    /// Cgroups judged, as the kernel holds them.
    pub fn scoped_count(&self) -> usize {
        self.skel.maps.lsm_cgroups.keys().count()
    }
}

/// What the LSM programs judge a sandbox by: paths as the host sees them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    /// Landlock's writable roots and the private TMPDIR's host directory.
    pub writable: Vec<PathBuf>,
    /// Bound read-only again inside them (denyWrite, mandatory protections).
    pub protected: Vec<PathBuf>,
    /// denyRead files and directories.
    pub deny_read: Vec<PathBuf>,
    /// allowRead inside those.
    pub allow_read: Vec<PathBuf>,
}

/// The rules of a sandbox's plan.
pub fn rules_of_plan(plan: &crate::linux::plan::Plan) -> Rules {
    use crate::linux::plan::MountOp;
    let mut r = Rules {
        writable: plan.hardening.landlock_writable.clone(),
        ..Rules::default()
    };
    for m in &plan.mounts {
        match m {
            MountOp::Writable { path } => r.writable.push(path.clone()),
            MountOp::WritableAt { src, .. } => r.writable.push(src.clone()),
            MountOp::ReadOnly { path } => r.protected.push(path.clone()),
            MountOp::MaskDir { path }
            | MountOp::MaskFile { path }
            | MountOp::MaskEmpty { path } => r.deny_read.push(path.clone()),
            MountOp::Expose { path, .. } => r.allow_read.push(path.clone()),
            _ => {}
        }
    }
    r
}

/// The kernel's `dev_t` of a superblock (`MKDEV(major, minor)`, 20 minor bits) from the
/// `st_dev` stat returns (glibc's encoding).
pub fn kernel_dev(st_dev: u64) -> u32 {
    let major = ((st_dev >> 8) & 0xfff) | ((st_dev >> 32) & !0xfff);
    let minor = (st_dev & 0xff) | ((st_dev >> 12) & !0xff);
    u32::try_from((major << 20) | (minor & 0xf_ffff)).unwrap_or(u32::MAX)
}

/// A `struct lsm_inode_key`: cgroup id, inode number, kernel dev, padding.
pub fn inode_key(cgroup: u64, dev: u32, ino: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(24);
    k.extend_from_slice(&cgroup.to_ne_bytes());
    k.extend_from_slice(&ino.to_ne_bytes());
    k.extend_from_slice(&dev.to_ne_bytes());
    k.extend_from_slice(&0u32.to_ne_bytes());
    k
}

/// The `lsm_inodes` entries for `rules`: one per inode, its classes ORed (the same directory
/// may be a writable root and a denyRead one). `stat` gives `(st_dev, st_ino)`, `None` for a
/// path that does not exist.
pub fn inode_entries(
    cgroup: u64,
    rules: &Rules,
    stat: &dyn Fn(&Path) -> Option<(u64, u64)>,
) -> Vec<(Vec<u8>, u32)> {
    let mut out: Vec<(Vec<u8>, u32)> = Vec::new();
    for (paths, class) in [
        (&rules.writable, INO_WRITABLE),
        (&rules.protected, INO_PROTECTED),
        (&rules.deny_read, INO_DENY_READ),
        (&rules.allow_read, INO_ALLOW_READ),
    ] {
        for p in paths {
            let Some((dev, ino)) = stat(p) else {
                continue;
            };
            let key = inode_key(cgroup, kernel_dev(dev), ino);
            match out.iter_mut().find(|(k, _)| *k == key) {
                Some((_, c)) => *c |= class,
                None => out.push((key, class)),
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Records

/// A file record the tracepoints emitted and an LSM program marked (`FL_LSM`): the layer when
/// the LSM decides it. `true` when it did (the caller names the rule and is done).
pub fn file_layer(ev: &RawEvent, rec: &mut ViolationRecord, write: bool) -> bool {
    if ev.flags & FL_LSM == 0 {
        return false;
    }
    let denied = ev.flags & FL_LSM_DENIED != 0 && matches!(-ev.ret, libc::EACCES | libc::EPERM);
    if denied {
        rec.layer = Some(Layer::Lsm);
        rec.reason = Some(denied_reason(write).to_string());
        return true;
    }
    if ev.ret >= 0 {
        // Observe mode: the call went through; the LSM says what enforce mode would refuse.
        rec.errno = None;
        rec.layer = Some(Layer::Lsm);
        rec.reason = Some(observed_reason(write));
        return true;
    }
    // Another layer refused first (EROFS, Landlock): its inference stands.
    false
}

fn denied_reason(write: bool) -> &'static str {
    if write {
        "outside the writable roots (or a protected path): refused by warden's BPF LSM \
         program, the third layer (warden.audit.enforce)"
    } else {
        "denyRead: refused by warden's BPF LSM program on the file itself, the third layer \
         (warden.audit.enforce); it holds for every name of the file, such as a hard link"
    }
}

fn observed_reason(write: bool) -> String {
    format!(
        "observe mode: warden's BPF LSM program would refuse this ({}); warden.audit.enforce \
         is off, so nothing beneath the mount view and Landlock refused it",
        if write {
            "outside the writable roots"
        } else {
            "denyRead"
        }
    )
}

/// The records only the LSM programs send (`EV_PTRACE`, `EV_SOCKET`, `EV_LSM_FILE`); `None`
/// for anything else. `policy` names the rule behind a file record.
pub fn classify(
    ev: &RawEvent,
    rec: &mut ViolationRecord,
    policy: Option<&crate::policy::merge::Policy>,
) -> Option<()> {
    let denied = ev.flags & FL_LSM_DENIED != 0;
    rec.errno = (ev.ret < 0).then(|| record::Errno::new(-ev.ret));
    match ev.kind {
        EV_PTRACE => {
            rec.kind = Kind::Process;
            rec.operation = "ptrace".into();
            let tracee = ev.flags & 0xffff_ffff;
            rec.target = format!("pid {tracee} ({})", super::record::shown(&ev.path).0);
            rec.violation = true;
            rec.layer = Some(Layer::Lsm);
            rec.reason = Some(if denied {
                "ptrace of a process outside the sandbox: refused by warden's BPF LSM program \
                 (warden.audit.enforce)"
                    .into()
            } else {
                "observe mode: ptrace of a process outside the sandbox; warden's BPF LSM \
                 program would refuse it"
                    .into()
            });
        }
        EV_SOCKET => {
            rec.kind = Kind::Network;
            rec.operation = "connect".into();
            rec.target = record::family_name(ev.family);
            rec.violation = false;
            rec.errno = None;
            rec.reason = Some(
                "a connect in a family the cgroup programs do not see, recorded by warden's \
                 BPF LSM program"
                    .into(),
            );
        }
        EV_LSM_FILE => {
            let write = match ev.op {
                OP_EXEC | OP_READ => false,
                OP_CREAT | OP_UNLINK | OP_RENAME => true,
                op => record::is_write(op, ev.flags & 0xffff_ffff),
            };
            rec.kind = if write {
                Kind::FileWrite
            } else {
                Kind::FileRead
            };
            rec.operation = match ev.op {
                OP_EXEC => "exec".into(),
                OP_READ => "read".into(),
                op => record::op_name(op).into(),
            };
            let (target, exact) = super::record::shown(&ev.path);
            rec.target = target;
            rec.approximate = !exact;
            rec.detail = (!ev.path2.is_empty()).then(|| super::record::shown(&ev.path2).0);
            rec.violation = true;
            rec.layer = Some(Layer::Lsm);
            rec.reason = Some(if denied {
                denied_reason(write).to_string()
            } else {
                observed_reason(write)
            });
            if let Some(p) = policy {
                let path = Path::new(std::ffi::OsStr::from_bytes(&ev.path));
                record::attach_rule(p, rec, path, write);
            }
        }
        _ => return None,
    }
    Some(())
}

// ---------------------------------------------------------------------------------------------
// The session of one `warden run`.

struct Session {
    programs: LsmPrograms,
    mode: u32,
    scoped: Option<u64>,
}

static SESSION: Mutex<Option<Session>> = Mutex::new(None);

/// Decides the LSM path of this run and loads its programs (after [`super::begin`], still
/// single-threaded). `Err`: the run must not start (enforce without BPF LSM and no fallback).
pub fn begin(req: &LsmRequest) -> Result<(), AuditError> {
    let (loaded, metrics) = {
        let mut guard = super::SESSION
            .lock()
            .map_err(|_| AuditError::Load("the audit session's lock is poisoned".into()))?;
        // With the audit daemon, the daemon's LSM programs judge the sandbox: the request
        // goes with the registration (`audit::watch`), which fails closed for enforce.
        if let Some(s) = guard.as_mut() {
            if matches!(s.stage, super::Stage::Daemon(_)) {
                s.lsm = Some(req.clone());
                return Ok(());
            }
        }
        let metrics = guard.as_ref().and_then(|s| s.request.metrics.clone());
        let loaded = match guard.as_ref().map(|s| &s.stage) {
            Some(super::Stage::Loaded(auditor)) => {
                LsmPrograms::load(Some(&auditor.programs.lsm_shared()))
            }
            _ if req.enforce => Err(
                "the tracepoint programs it shares maps with are not loaded in this process"
                    .to_string(),
            ),
            // Not auditing in-process: nothing to add to.
            _ => return Ok(()),
        };
        (loaded, metrics)
    };
    let available = loaded.as_ref().map(|_| ()).map_err(String::as_str);
    match choose(req, available) {
        Choice::Refuse(why) => Err(AuditError::Load(why)),
        Choice::Tracepoints { reason, warn } => {
            if warn {
                eprintln!("warden: warning: {reason}");
            }
            Ok(())
        }
        choice => {
            let mode = if choice == Choice::Enforce {
                MODE_ENFORCE
            } else {
                MODE_OBSERVE
            };
            if let (Some(m), Ok(_)) = (&metrics, &loaded) {
                for name in PROGRAMS {
                    m.program_loaded(name);
                }
            }
            if let (Ok(programs), Ok(mut s)) = (loaded, SESSION.lock()) {
                *s = Some(Session {
                    programs,
                    mode,
                    scoped: None,
                });
            }
            Ok(())
        }
    }
}

/// The mode of this run's LSM programs: `Some(MODE_OBSERVE | MODE_ENFORCE)` when loaded.
pub fn mode() -> Option<u32> {
    SESSION.lock().ok()?.as_ref().map(|s| s.mode)
}

/// Scopes the loaded programs to the sandbox's cgroup with its plan's rules (before the go
/// byte). An error in enforce mode stops the run; in observe mode it is a warning.
pub fn scope(cgroup_dir: &Path, plan: &crate::linux::plan::Plan) -> Result<(), AuditError> {
    let Ok(mut guard) = SESSION.lock() else {
        return Ok(());
    };
    let Some(s) = guard.as_mut() else {
        return Ok(());
    };
    let scoped = std::fs::metadata(cgroup_dir)
        .map_err(|e| AuditError::Cgroup {
            path: cgroup_dir.to_path_buf(),
            reason: e.to_string(),
        })
        .and_then(|m| {
            s.programs
                .scope(m.ino(), s.mode, &rules_of_plan(plan))
                .map(|()| m.ino())
        });
    match scoped {
        Ok(id) => {
            s.scoped = Some(id);
            Ok(())
        }
        Err(e) if s.mode == MODE_ENFORCE => Err(AuditError::Load(format!(
            "warden.audit.enforce: scoping the BPF LSM programs to the sandbox failed: {e}"
        ))),
        Err(e) => {
            eprintln!("warden: warning: running without the BPF LSM observe programs: {e}");
            *guard = None;
            Ok(())
        }
    }
}

/// Ends the LSM path of the run: the cgroup is no longer judged, the programs detach.
pub fn finish() {
    let session = SESSION.lock().ok().and_then(|mut s| s.take());
    if let Some(mut s) = session {
        if let Some(id) = s.scoped.take() {
            s.programs.unscope(id);
        }
    }
}

/// `warden doctor`'s probe: loads and attaches warden's own LSM object (its own maps; no
/// cgroup is scoped, so nothing is judged) and detaches it again.
pub fn doctor_probe() -> crate::linux::probe::Probe {
    const NAME: &str = "audit.lsm";
    match LsmPrograms::load(None) {
        Ok(p) => crate::linux::probe::Probe {
            name: NAME,
            ok: true,
            detail: format!(
                "warden's BPF LSM programs ({}) loaded and attached in {} ms: \
                 warden.audit.enforce can refuse, and audited runs add LSM observe records",
                PROGRAMS.join(", "),
                p.load_time.as_millis()
            ),
            fix: None,
        },
        Err(why) => crate::linux::probe::Probe {
            name: NAME,
            ok: false,
            detail: format!("warden's BPF LSM programs are unavailable: {why}"),
            fix: Some(format!(
                "audited runs use the tracepoint programs only; warden.audit.enforce: true \
                 refuses to run here unless warden.audit.enforceFallback: \
                 \"{FALLBACK_TRACEPOINTS}\""
            )),
        },
    }
}

/// The maps' descriptors, for [`super::bpf::Programs::lsm_shared`].
pub fn shared<'a>(
    events: &'a impl AsFd,
    drops: &'a impl AsFd,
    watch_config: &'a impl AsFd,
    pending_files: &'a impl AsFd,
    rates: &'a impl AsFd,
) -> Shared<'a> {
    Shared {
        events: events.as_fd(),
        drops: drops.as_fd(),
        watch_config: watch_config.as_fd(),
        pending_files: pending_files.as_fd(),
        rates: rates.as_fd(),
    }
}

#[cfg(test)]
#[path = "lsm_tests.rs"]
mod lsm_tests;

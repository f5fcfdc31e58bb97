//! The eBPF side of auditing: the libbpf-rs skeleton built from `ebpf/warden.bpf.c` by
//! `runtime/build.rs`, loaded once per `warden run`, its tracepoints attached globally (they
//! filter on the watched cgroups in the kernel), its cgroup programs attached to each
//! sandbox's cgroup directory, and the two maps userspace writes: `watch_config` (the cgroup
//! level) and `watched` (the cgroup ids).

use super::AuditError;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, MapHandle};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
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
    include!(concat!(env!("OUT_DIR"), "/warden.skel.rs"));
}

/// The cgroup programs: attached per sandbox, to its cgroup directory.
pub const CGROUP_PROGRAMS: [&str; 6] = [
    "connect4",
    "connect6",
    "sendmsg4",
    "sendmsg6",
    "connect_unix",
    "sendmsg_unix",
];

/// `UNIX_KEY_LEN` of warden.bpf.h, and the kernel's sun_path size.
const UNIX_KEY_LEN: usize = 128;
const UNIX_PATH_MAX: usize = 108;

/// Where tracefs may be mounted (libbpf resolves tracepoint ids through it).
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The loaded programs and their links.
pub struct Programs {
    skel: skel::WardenSkel<'static>,
    /// Tracepoint links: global, filtered by `watched` in the kernel.
    _links: Vec<Link>,
    watches: Vec<(u64, Vec<Link>)>,
    /// The `unix_allow` keys inserted for each watched cgroup ([`Programs::enforce_unix`]).
    unix_keys: Vec<(u64, Vec<Vec<u8>>)>,
    level: Option<u32>,
    /// How long open + load (the verifier) + attach took.
    pub load_time: Duration,
    /// Tracepoint programs attached.
    pub attached: usize,
    /// Their names (the C function names: `sys_enter`, `sys_exit`, `sched_exec`).
    pub attached_names: Vec<String>,
    /// Syscall tracepoints this kernel lacks (e.g. `open` on arm64): not loaded.
    pub missing: Vec<String>,
}

fn tracefs() -> Option<PathBuf> {
    TRACEFS
        .iter()
        .map(PathBuf::from)
        .find(|p| p.join("events/syscalls").is_dir())
}

/// `tracepoint/syscalls/sys_enter_openat` → whether tracefs lists that event.
fn tracepoint_exists(tracefs: &Path, section: &str) -> bool {
    match section.strip_prefix("tracepoint/") {
        Some(event) => tracefs.join("events").join(event).is_dir(),
        None => true,
    }
}

/// `watched` map values (ebpf/warden.bpf.h).
const W_WATCHED: u8 = 1;
const W_NO_MASKED_FILES: u8 = 2;
const W_MASK_ENOENT: u8 = 4;

/// What the programs need to know about a watched sandbox's view.
#[derive(Clone, Copy, Debug)]
pub struct WatchFlags {
    /// Some file is masked by /dev/null: successful opens are looked at.
    pub masked_files: bool,
    /// A denyRead directory has allowRead paths inside: ENOENT failures are reported too.
    pub mask_enoent: bool,
}

impl WatchFlags {
    /// What the programs assume when they do not know the view.
    pub const UNKNOWN: WatchFlags = WatchFlags {
        masked_files: true,
        mask_enoent: false,
    };

    fn value(self) -> u8 {
        let mut v = W_WATCHED;
        if !self.masked_files {
            v |= W_NO_MASKED_FILES;
        }
        if self.mask_enoent {
            v |= W_MASK_ENOENT;
        }
        v
    }
}

impl Programs {
    /// Opens, loads and attaches the tracepoints. Single-threaded (no reader yet), so it may
    /// run before the sandbox's pid 1 is cloned.
    pub fn load() -> Result<Programs, AuditError> {
        let start = Instant::now();
        let tracefs = tracefs().ok_or(AuditError::NoTracefs)?;
        // The skeleton borrows its object storage for its whole life; one per `warden run`,
        // kept until the process exits, so leaking the (small) box is the simple owner.
        let storage = Box::leak(Box::new(std::mem::MaybeUninit::uninit()));
        let mut open = skel::WardenSkelBuilder::default()
            .open(storage)
            .map_err(|e| AuditError::Load(format!("opening the eBPF object: {e}")))?;
        let mut missing = Vec::new();
        for mut prog in open.open_object_mut().progs_mut() {
            let section = prog.section().to_string_lossy().into_owned();
            if !tracepoint_exists(&tracefs, &section) {
                missing.push(section);
                prog.set_autoload(false);
            }
        }
        let mut skel = open.load().map_err(|e| {
            AuditError::Load(format!(
                "loading the eBPF programs: {e}{}",
                if nix::unistd::geteuid().is_root() {
                    ""
                } else {
                    " (auditing needs root: BPF is root-only on most kernels)"
                }
            ))
        })?;
        let mut links = Vec::new();
        let mut attached_names = Vec::new();
        for prog in skel.object_mut().progs_mut() {
            let name = prog.name().to_string_lossy().into_owned();
            let section = prog.section().to_string_lossy().into_owned();
            if CGROUP_PROGRAMS.contains(&name.as_str()) || missing.contains(&section) {
                continue;
            }
            let link = prog.attach().map_err(|e| AuditError::Attach {
                program: section.clone(),
                reason: e.to_string(),
            })?;
            links.push(link);
            attached_names.push(name);
        }
        let attached = links.len();
        Ok(Programs {
            skel,
            _links: links,
            watches: Vec::new(),
            unix_keys: Vec::new(),
            level: None,
            load_time: start.elapsed(),
            attached,
            attached_names,
            missing,
        })
    }

    /// Watches the cgroup at `dir` (a cgroup v2 directory): attaches the cgroup programs to it
    /// and inserts its id, so everything its processes do from now on is recorded. Returns
    /// the cgroup id.
    pub fn watch(&mut self, dir: &Path) -> Result<u64, AuditError> {
        self.watch_with(dir, WatchFlags::UNKNOWN)
    }

    /// [`Programs::watch`], with what the programs need to know of the sandbox's view
    /// ([`WatchFlags`]: without file masks, the programs skip looking at the descriptor of
    /// every successful open).
    pub fn watch_with(&mut self, dir: &Path, flags: WatchFlags) -> Result<u64, AuditError> {
        let cg_err = |reason: String| AuditError::Cgroup {
            path: dir.to_path_buf(),
            reason,
        };
        let meta = std::fs::metadata(dir).map_err(|e| cg_err(e.to_string()))?;
        let id = meta.ino();
        let level = cgroup_level(dir).map_err(cg_err)?;
        match self.level {
            Some(l) if l != level => {
                return Err(cg_err(format!(
                    "at cgroup level {level}, but this auditor watches level {l}"
                )))
            }
            _ => {}
        }
        let file = std::fs::File::open(dir).map_err(|e| cg_err(e.to_string()))?;
        let mut links = Vec::new();
        for prog in self.skel.object_mut().progs_mut() {
            let name = prog.name().to_string_lossy().into_owned();
            if !CGROUP_PROGRAMS.contains(&name.as_str()) {
                continue;
            }
            let link = prog
                .attach_cgroup(file.as_raw_fd())
                .map_err(|e| AuditError::Attach {
                    program: format!("cgroup/{name}"),
                    reason: e.to_string(),
                })?;
            links.push(link);
        }
        let map_err = |what: &str, e: libbpf_rs::Error| AuditError::Map(format!("{what}: {e}"));
        self.skel
            .maps
            .watch_config
            .update(&0u32.to_ne_bytes(), &level.to_ne_bytes(), MapFlags::ANY)
            .map_err(|e| map_err("setting the watched cgroup level", e))?;
        self.skel
            .maps
            .watched
            .update(&id.to_ne_bytes(), &[flags.value()], MapFlags::ANY)
            .map_err(|e| map_err("inserting the cgroup id", e))?;
        self.level = Some(level);
        self.watches.push((id, links));
        Ok(id)
    }

    /// `allowUnixSockets`: the watched cgroup `id` may connect only to these socket paths
    /// (exact bytes; abstract names never). Call after [`Programs::watch`], before the go byte.
    pub fn enforce_unix(&mut self, id: u64, paths: &[Vec<u8>]) -> Result<(), AuditError> {
        let map_err = |what: &str, e: libbpf_rs::Error| AuditError::Map(format!("{what}: {e}"));
        for path in paths {
            // sun_path holds 108 bytes including the terminating NUL.
            if path.is_empty() || path.len() > UNIX_PATH_MAX - 1 || path.contains(&0) {
                return Err(AuditError::Map(format!(
                    "allowUnixSockets entry {:?} is not a usable socket path (1 to {} bytes)",
                    String::from_utf8_lossy(path),
                    UNIX_PATH_MAX - 1
                )));
            }
            let mut key = id.to_ne_bytes().to_vec();
            key.extend_from_slice(path);
            key.resize(8 + UNIX_KEY_LEN, 0);
            self.skel
                .maps
                .unix_allow
                .update(&key, &[1u8], MapFlags::ANY)
                .map_err(|e| map_err("inserting an allowed unix socket", e))?;
            match self.unix_keys.iter_mut().find(|(w, _)| *w == id) {
                Some((_, keys)) => keys.push(key),
                None => self.unix_keys.push((id, vec![key])),
            }
        }
        self.skel
            .maps
            .unix_enforce
            .update(&id.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .map_err(|e| map_err("enforcing allowUnixSockets", e))
    }

    /// Gives the watched cgroup `id` a share of the ring buffer that other sandboxes use too
    /// (the node daemon's): `share` events per 100 ms are sent whatever the buffer holds,
    /// more only while it is less than half full (ebpf/emit.bpf.h). Without a share — a run's
    /// own programs — a sandbox may fill the whole buffer.
    pub fn share_ring(&mut self, id: u64, share: u64) -> Result<(), AuditError> {
        let rate = Rate {
            share,
            ..Rate::default()
        };
        self.skel
            .maps
            .rates
            .update(&id.to_ne_bytes(), &rate.to_bytes(), MapFlags::ANY)
            .map_err(|e| AuditError::Map(format!("setting the sandbox's ring buffer share: {e}")))
    }

    /// The counters of cgroup `id`'s share ([`Programs::share_ring`]); `None` without one.
    pub fn rate(&self, id: u64) -> Option<Rate> {
        let bytes = self
            .skel
            .maps
            .rates
            .lookup(&id.to_ne_bytes(), MapFlags::ANY)
            .ok()??;
        Rate::from_bytes(&bytes)
    }

    /// Stops recording cgroup `id`, detaches its cgroup programs and removes its
    /// `allowUnixSockets` entries. Once nothing is watched, a cgroup of another level may be.
    pub fn unwatch(&mut self, id: u64) {
        let _ = self.skel.maps.watched.delete(&id.to_ne_bytes());
        let _ = self.skel.maps.unix_enforce.delete(&id.to_ne_bytes());
        let _ = self.skel.maps.rates.delete(&id.to_ne_bytes());
        for (_, keys) in self.unix_keys.iter().filter(|(w, _)| *w == id) {
            for key in keys {
                let _ = self.skel.maps.unix_allow.delete(key);
            }
        }
        self.unix_keys.retain(|(w, _)| *w != id);
        self.watches.retain(|(w, _)| *w != id);
        if self.watches.is_empty() {
            self.level = None;
        }
    }

    /// The cgroup ids in the `watched` map, as the kernel holds them.
    pub fn watched_count(&self) -> usize {
        self.skel.maps.watched.keys().count()
    }

    /// Cgroups watched (with their cgroup programs attached).
    pub fn watching(&self) -> usize {
        self.watches.len()
    }

    /// The maps the BPF LSM object shares with this one (audit/lsm.rs): ring buffer, drop
    /// counters, watched level, per-thread entries.
    pub fn lsm_shared(&self) -> super::lsm::Shared<'_> {
        let m = &self.skel.maps;
        super::lsm::shared(
            &m.events,
            &m.drops,
            &m.watch_config,
            &m.pending_files,
            &m.rates,
        )
    }

    /// A handle on the ring buffer (a duplicated descriptor) for the reader.
    pub fn events(&self) -> Result<MapHandle, AuditError> {
        MapHandle::try_from(&self.skel.maps.events)
            .map_err(|e| AuditError::Map(format!("duplicating the ring buffer's descriptor: {e}")))
    }

    /// The drop counters summed over CPUs ([`read_drops`]).
    pub fn drops(&self) -> Result<[u64; DROP_SLOTS], AuditError> {
        read_drops(&self.skel.maps.drops)
    }

    /// A handle on the drop counters (a duplicated descriptor), for the reader thread to
    /// read them during the run ([`read_drops`]).
    pub fn drops_handle(&self) -> Result<MapHandle, AuditError> {
        MapHandle::try_from(&self.skel.maps.drops)
            .map_err(|e| AuditError::Map(format!("duplicating the drop counters' descriptor: {e}")))
    }
}

/// A `rates` value (ebpf/warden.bpf.h, `struct rate`): a sandbox's share of a shared ring
/// buffer and what it lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rate {
    pub window_ns: u64,
    pub sent: u64,
    /// Events per 100 ms window sent whatever the ring buffer holds.
    pub share: u64,
    /// Events not sent: over the share while the ring buffer was at least half full.
    pub limited: u64,
    /// Events of this sandbox the full ring buffer refused.
    pub ring_full: u64,
}

impl Rate {
    const LEN: usize = 40;

    pub fn to_bytes(self) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        let fields = [
            self.window_ns,
            self.sent,
            self.share,
            self.limited,
            self.ring_full,
        ];
        for (chunk, v) in out.chunks_exact_mut(8).zip(fields) {
            chunk.copy_from_slice(&v.to_ne_bytes());
        }
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Option<Rate> {
        if bytes.len() != Self::LEN {
            return None;
        }
        let mut v = bytes.chunks_exact(8).map(|c| {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            u64::from_ne_bytes(b)
        });
        Some(Rate {
            window_ns: v.next()?,
            sent: v.next()?,
            share: v.next()?,
            limited: v.next()?,
            ring_full: v.next()?,
        })
    }
}

/// The `drops` slots (ebpf/warden.bpf.h, `DROP_*`).
pub const DROP_SLOTS: usize = 3;

/// The drop counters of `map` (the `drops` map) summed over CPUs: `[ring buffer full,
/// per-thread map full, over a sandbox's share]`.
pub fn read_drops(map: &impl MapCore) -> Result<[u64; DROP_SLOTS], AuditError> {
    let mut out = [0u64; DROP_SLOTS];
    for (slot, total) in out.iter_mut().enumerate() {
        let key = u32::try_from(slot).unwrap_or(0).to_ne_bytes();
        let per_cpu = map
            .lookup_percpu(&key, MapFlags::ANY)
            .map_err(|e| AuditError::Map(format!("reading the drop counters: {e}")))?
            .unwrap_or_default();
        *total = per_cpu
            .iter()
            .map(|v| {
                let mut b = [0u8; 8];
                if let Some(src) = v.get(..8) {
                    b.copy_from_slice(src);
                }
                u64::from_ne_bytes(b)
            })
            .sum();
    }
    Ok(out)
}

/// The level of cgroup `dir` in the cgroup v2 hierarchy (the root is 0), which
/// `bpf_get_current_ancestor_cgroup_id` takes.
pub fn cgroup_level(dir: &Path) -> Result<u32, String> {
    let mount = crate::linux::cgroup::find_v2_mount().map_err(|e| e.to_string())?;
    let dir = dir
        .canonicalize()
        .map_err(|e| format!("resolving {}: {e}", dir.display()))?;
    let rel = dir.strip_prefix(&mount).map_err(|_| {
        format!(
            "{} is not below the cgroup v2 mount {}",
            dir.display(),
            mount.display()
        )
    })?;
    u32::try_from(rel.components().count()).map_err(|e| e.to_string())
}

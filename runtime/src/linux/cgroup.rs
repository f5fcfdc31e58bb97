//! One cgroup v2 leaf per sandbox: `<own cgroup>/warden-<name>`, plus cgroup v1 leaves for limits
//! the v2 hierarchy cannot enforce.
//!
//! The v2 leaf gives the sandbox a kernel identity (its cgroup id, the directory's inode, which
//! the eBPF audit layer matches on), resource limits (`pids.max`, `memory.max`, `cpu.max`) and a
//! reliable way to kill everything inside (`cgroup.kill`).
//!
//! Hybrid layouts keep `pids`, `memory` and `cpu` bound to cgroup v1, so the v2 hierarchy cannot
//! enforce them. For such a limit [`Cgroup::apply_limits`] falls back to the controller's v1
//! hierarchy: it creates `<own v1 cgroup>/warden-<name>` there (below this process's own cgroup
//! in that hierarchy, so limits of the caller still apply), writes the v1 limit file and from
//! then on places, kills and removes processes in every leaf. The v2 leaf stays the sandbox's
//! identity; the v1 leaves are extra. Limits still fail closed: when neither the v2 hierarchy
//! nor a writable v1 hierarchy offers a requested controller, [`Cgroup::apply_limits`] returns
//! [`CgroupError::ControllerUnavailable`] naming the controller instead of running unlimited.
//!
//! Nothing here hard-codes `/sys/fs/cgroup`: the mounts come from `/proc/self/mountinfo` and the
//! process's own cgroups from `/proc/self/cgroup` (the `0::` line for v2, `N:controllers:` lines
//! for v1).

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::{access, AccessFlags, Pid};
use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// How long [`Cgroup::remove`] waits for killed processes to leave before giving up.
const REMOVE_TIMEOUT: Duration = Duration::from_secs(2);
const POLL: Duration = Duration::from_millis(5);

/// The controllers warden's limits use, in the order they are checked.
pub const LIMIT_CONTROLLERS: [&str; 3] = ["pids", "memory", "cpu"];

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("{action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("no cgroup2 filesystem is mounted (no mount of type cgroup2 in /proc/self/mountinfo)")]
    NoV2Mount,
    #[error("this process is in no cgroup v2 hierarchy (no `0::` line in /proc/self/cgroup)")]
    NoV2Membership,
    #[error(
        "cgroup {} is not writable by this process (it is not delegated to this user): {source}",
        path.display()
    )]
    NotDelegated {
        path: PathBuf,
        #[source]
        source: Errno,
    },
    #[error(
        "invalid cgroup name {0:?}: use 1-200 characters from [A-Za-z0-9._-], not `.` or `..`"
    )]
    InvalidName(String),
    #[error("cgroup {} already exists (a leftover of an earlier sandbox?)", .0.display())]
    AlreadyExists(PathBuf),
    #[error(
        "cannot apply {limit}: the cgroup v2 controller `{controller}` is not available in {} \
         (available: {available}){}",
        parent.display(),
        v1_hint(.v1_mount.as_deref(), .v1_problem.as_deref())
    )]
    ControllerUnavailable {
        controller: &'static str,
        limit: &'static str,
        parent: PathBuf,
        /// The controllers the parent offers, space-separated, or `none`.
        available: String,
        /// Where the controller is bound to a cgroup v1 hierarchy instead, if it is.
        v1_mount: Option<PathBuf>,
        /// Why that v1 hierarchy cannot be used as a fallback (boxed: keeps the error small).
        v1_problem: Option<Box<str>>,
    },
    #[error(
        "cannot apply {limit}: enabling the cgroup v2 controller `{controller}` in {}/cgroup.subtree_control failed: {source}",
        parent.display()
    )]
    ControllerEnable {
        controller: &'static str,
        limit: &'static str,
        parent: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("invalid cpu.max value {0:?}: expected `max` or `QUOTA`, optionally followed by ` PERIOD` (microseconds)")]
    InvalidCpuMax(String),
    #[error("sending SIGKILL to process {pid} of cgroup {}: {source}", path.display())]
    Kill {
        pid: i32,
        path: PathBuf,
        #[source]
        source: Errno,
    },
    #[error("cgroup {} still holds processes {pids:?} after {waited:?}", path.display())]
    NotEmpty {
        path: PathBuf,
        pids: Vec<i32>,
        waited: Duration,
    },
    #[error("cgroup {} has no parent directory", .0.display())]
    NoParent(PathBuf),
    #[error("{} is not a warden cgroup (a `warden-*` directory on a cgroup filesystem)", .0.display())]
    NotACgroup(PathBuf),
}

fn v1_hint(v1_mount: Option<&Path>, v1_problem: Option<&str>) -> String {
    let Some(m) = v1_mount else {
        return String::new();
    };
    let problem = v1_problem
        .map(|p| format!(", which warden cannot use ({p})"))
        .unwrap_or_default();
    format!(
        "; it is bound to the cgroup v1 hierarchy at {} (a hybrid layout){problem}: boot with \
         systemd.unified_cgroup_hierarchy=1 or cgroup_no_v1=all to move it to cgroup v2",
        m.display()
    )
}

fn io_err<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> CgroupError + 'a {
    move |source| CgroupError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

fn read(path: &Path) -> Result<String, CgroupError> {
    fs::read_to_string(path).map_err(io_err("reading", path))
}

fn write(path: &Path, value: &str) -> Result<(), CgroupError> {
    fs::write(path, value).map_err(io_err("writing", path))
}

/// The cgroup limits of one sandbox; `None` leaves a limit unset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// `pids.max`: the most processes and threads alive at once.
    pub pids_max: Option<u64>,
    /// `memory.max` in bytes.
    pub memory_max: Option<u64>,
    /// `cpu.max` as the kernel spells it: `max` or `QUOTA [PERIOD]` in microseconds
    /// (`50000 100000` is half a CPU).
    pub cpu_max: Option<String>,
}

impl Limits {
    /// The controllers these limits need, with the name of the limit file each one writes.
    fn required(&self) -> Vec<(&'static str, &'static str)> {
        let mut out = Vec::new();
        if self.pids_max.is_some() {
            out.push(("pids", "pids.max"));
        }
        if self.memory_max.is_some() {
            out.push(("memory", "memory.max"));
        }
        if self.cpu_max.is_some() {
            out.push(("cpu", "cpu.max"));
        }
        out
    }
}

/// Unescapes the octal escapes (`\040` for a space, …) of a mountinfo field.
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if let (b'\\', Some(digits)) = (bytes[i], bytes.get(i + 1..i + 4)) {
            if digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                let v = digits
                    .iter()
                    .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                if let Ok(b) = u8::try_from(v) {
                    out.push(b);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One line of `/proc/self/mountinfo`, the fields warden uses.
#[derive(Debug, PartialEq, Eq)]
struct MountInfo {
    root: String,
    mount_point: PathBuf,
    fstype: String,
    super_options: String,
}

fn parse_mountinfo_line(line: &str) -> Option<MountInfo> {
    let (pre, post) = line.split_once(" - ")?;
    let pre: Vec<&str> = pre.split(' ').collect();
    let mut post = post.split(' ');
    let fstype = post.next()?.to_string();
    let _source = post.next()?;
    let super_options = post.next().unwrap_or_default().to_string();
    Some(MountInfo {
        root: unescape_mountinfo(pre.get(3)?),
        mount_point: PathBuf::from(unescape_mountinfo(pre.get(4)?)),
        fstype,
        super_options,
    })
}

/// The first cgroup2 mount in mountinfo text, with the hierarchy path mounted there.
fn v2_mount_in(mountinfo: &str) -> Option<(PathBuf, String)> {
    mountinfo
        .lines()
        .filter_map(parse_mountinfo_line)
        .find(|m| m.fstype == "cgroup2")
        .map(|m| (m.mount_point, m.root))
}

/// Where `controller` is bound to a cgroup v1 hierarchy, with the hierarchy path mounted there.
fn v1_hierarchy_in(mountinfo: &str, controller: &str) -> Option<(PathBuf, String)> {
    mountinfo
        .lines()
        .filter_map(parse_mountinfo_line)
        .find(|m| m.fstype == "cgroup" && m.super_options.split(',').any(|o| o == controller))
        .map(|m| (m.mount_point, m.root))
}

/// Where `controller` is bound to a cgroup v1 hierarchy, if it is.
fn v1_mount_in(mountinfo: &str, controller: &str) -> Option<PathBuf> {
    v1_hierarchy_in(mountinfo, controller).map(|(m, _)| m)
}

/// The cgroup path (`/a/b`) of the v1 hierarchy holding `controller` in `/proc/self/cgroup`
/// text (`4:memory:/a/b`).
fn v1_path_in(proc_cgroup: &str, controller: &str) -> Option<String> {
    proc_cgroup.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let id = parts.next()?;
        let controllers = parts.next()?;
        let path = parts.next()?;
        (id != "0" && controllers.split(',').any(|c| c == controller))
            .then(|| path.trim_end_matches(" (deleted)").to_string())
    })
}

/// The v2 cgroup path (`/a/b`) in `/proc/self/cgroup` text.
fn v2_path_in(proc_cgroup: &str) -> Option<String> {
    proc_cgroup.lines().find_map(|l| {
        l.strip_prefix("0::")
            .map(|p| p.trim_end_matches(" (deleted)").to_string())
    })
}

/// Joins a cgroup path from `/proc/self/cgroup` onto the mount of the hierarchy part `root`.
fn join_cgroup(mount: &Path, root: &str, cgroup: &str) -> PathBuf {
    let rel = match cgroup.strip_prefix(root) {
        Some(rest) if root != "/" && (rest.is_empty() || rest.starts_with('/')) => rest,
        _ => cgroup,
    };
    let rel = rel.trim_start_matches('/');
    if rel.is_empty() {
        mount.to_path_buf()
    } else {
        mount.join(rel)
    }
}

fn mountinfo() -> Result<String, CgroupError> {
    read(Path::new("/proc/self/mountinfo"))
}

/// The mount point of the cgroup v2 hierarchy (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified`
/// in a hybrid layout), from `/proc/self/mountinfo`.
pub fn find_v2_mount() -> Result<PathBuf, CgroupError> {
    v2_mount_in(&mountinfo()?)
        .map(|(m, _)| m)
        .ok_or(CgroupError::NoV2Mount)
}

/// The absolute path of this process's own cgroup v2 directory.
pub fn own_cgroup() -> Result<PathBuf, CgroupError> {
    let (mount, root) = v2_mount_in(&mountinfo()?).ok_or(CgroupError::NoV2Mount)?;
    let cgroup =
        v2_path_in(&read(Path::new("/proc/self/cgroup"))?).ok_or(CgroupError::NoV2Membership)?;
    Ok(join_cgroup(&mount, &root, &cgroup))
}

/// The controllers listed in `<dir>/cgroup.controllers` (what `dir` may enable for its children).
pub fn controllers(dir: &Path) -> Result<BTreeSet<String>, CgroupError> {
    Ok(read(&dir.join("cgroup.controllers"))?
        .split_whitespace()
        .map(str::to_string)
        .collect())
}

/// The controllers enabled for `dir`'s children (`<dir>/cgroup.subtree_control`).
pub fn subtree_control(dir: &Path) -> Result<BTreeSet<String>, CgroupError> {
    Ok(read(&dir.join("cgroup.subtree_control"))?
        .split_whitespace()
        .map(str::to_string)
        .collect())
}

/// Where `controller` is bound to a cgroup v1 hierarchy on this machine, if it is.
pub fn v1_mount_of(controller: &str) -> Option<PathBuf> {
    mountinfo().ok().and_then(|m| v1_mount_in(&m, controller))
}

/// Where a v1 fallback leaf for `controller` would be created: this process's own cgroup in the
/// v1 hierarchy `controller` is bound to, if there is one and this process may create cgroups
/// in it. `Err` says why there is none.
pub fn v1_fallback_parent(controller: &str) -> Result<PathBuf, String> {
    let mountinfo = mountinfo().map_err(|e| e.to_string())?;
    let (mount, root) = v1_hierarchy_in(&mountinfo, controller)
        .ok_or_else(|| format!("`{controller}` is bound to no cgroup v1 hierarchy"))?;
    let proc_cgroup = read(Path::new("/proc/self/cgroup")).map_err(|e| e.to_string())?;
    let own = v1_path_in(&proc_cgroup, controller).ok_or_else(|| {
        format!("/proc/self/cgroup has no line for the v1 hierarchy of `{controller}`")
    })?;
    let parent = join_cgroup(&mount, &root, &own);
    access(&parent, AccessFlags::W_OK)
        .map_err(|e| format!("{} is not writable: {e}", parent.display()))?;
    Ok(parent)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// `cpu.max` as the kernel accepts it: `max` or a quota, optionally followed by a period.
fn valid_cpu_max(value: &str) -> bool {
    let mut parts = value.split_whitespace();
    let quota_ok = match parts.next() {
        Some("max") => true,
        Some(q) => q.parse::<u64>().is_ok_and(|q| q > 0),
        None => false,
    };
    let period_ok = match parts.next() {
        Some(p) => p.parse::<u64>().is_ok_and(|p| p > 0),
        None => true,
    };
    quota_ok && period_ok && parts.next().is_none()
}

/// `cpu.max` (`max` or `QUOTA [PERIOD]`) as cgroup v1's `cpu.cfs_quota_us` (-1 for `max`) and
/// `cpu.cfs_period_us` (the v2 default, 100 ms, when no period is given).
fn v1_cpu(value: &str) -> Option<(i64, u64)> {
    if !valid_cpu_max(value) {
        return None;
    }
    let mut parts = value.split_whitespace();
    let quota = match parts.next()? {
        "max" => -1,
        q => q.parse::<i64>().ok()?,
    };
    let period = match parts.next() {
        Some(p) => p.parse().ok()?,
        None => 100_000,
    };
    Some((quota, period))
}

fn parse_pids(text: &str) -> Vec<i32> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

fn procs_of(dir: &Path) -> Result<Vec<i32>, CgroupError> {
    Ok(parse_pids(&read(&dir.join("cgroup.procs"))?))
}

/// Opens a pidfd for `pid` (which pins the process: a signal through it never reaches a
/// process that reused the pid).
fn pidfd_open(pid: i32) -> Result<OwnedFd, Errno> {
    // SAFETY: pidfd_open takes a pid and flags and passes no memory; it returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(Errno::last());
    }
    let fd = i32::try_from(fd).map_err(|_| Errno::EBADF)?;
    // SAFETY: the kernel just returned this fd to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn pidfd_kill(fd: &OwnedFd) -> Result<(), Errno> {
    // SAFETY: pidfd_send_signal with an fd we own, a signal number, a null siginfo (the kernel
    // fills in a default one) and no flags.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if r < 0 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

/// Sends SIGKILL to the processes listed in `<dir>/cgroup.procs` and returns the list. Each
/// pid is pinned with a pidfd and signalled only if a second listing still shows it, so a pid
/// reused meanwhile by a process outside the cgroup is never killed (plain `kill` on kernels
/// without pidfds).
fn kill_listed(dir: &Path) -> Result<Vec<i32>, CgroupError> {
    let pids = procs_of(dir)?;
    if pids.is_empty() {
        return Ok(pids);
    }
    let kill_err = |pid: i32, source: Errno| CgroupError::Kill {
        pid,
        path: dir.to_path_buf(),
        source,
    };
    let mut pinned = Vec::with_capacity(pids.len());
    let mut unpinned = Vec::new();
    for &pid in &pids {
        match pidfd_open(pid) {
            Ok(fd) => pinned.push((pid, fd)),
            Err(Errno::ESRCH) => {}
            Err(Errno::ENOSYS) => unpinned.push(pid),
            Err(e) => return Err(kill_err(pid, e)),
        }
    }
    let still: HashSet<i32> = procs_of(dir)?.into_iter().collect();
    for (pid, fd) in &pinned {
        if still.contains(pid) {
            match pidfd_kill(fd) {
                Ok(()) | Err(Errno::ESRCH) => {}
                Err(e) => return Err(kill_err(*pid, e)),
            }
        }
    }
    for pid in unpinned.into_iter().filter(|p| still.contains(p)) {
        match kill(Pid::from_raw(pid), Signal::SIGKILL) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => return Err(kill_err(pid, e)),
        }
    }
    Ok(pids)
}

/// Sends SIGKILL to every process in the cgroup `dir`: through `cgroup.kill` (cgroup v2, Linux
/// 5.14+), which also catches processes forked meanwhile, or else (cgroup v1, older kernels) by
/// killing each listed process until the list is empty (bounded). Does not wait for the
/// processes to be gone.
fn kill_procs(dir: &Path) -> Result<(), CgroupError> {
    let kill_file = dir.join("cgroup.kill");
    if kill_file.exists() {
        return write(&kill_file, "1");
    }
    until_empty(dir, REMOVE_TIMEOUT, kill_listed)
}

/// Waits until `<dir>/cgroup.procs` is empty, at most `timeout`.
fn wait_empty(dir: &Path, timeout: Duration) -> Result<(), CgroupError> {
    until_empty(dir, timeout, procs_of)
}

/// Repeats `step` (which returns the pids still listed) until none is left, at most `timeout`.
fn until_empty(
    dir: &Path,
    timeout: Duration,
    step: impl Fn(&Path) -> Result<Vec<i32>, CgroupError>,
) -> Result<(), CgroupError> {
    let deadline = Instant::now() + timeout;
    loop {
        let pids = step(dir)?;
        if pids.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(CgroupError::NotEmpty {
                path: dir.to_path_buf(),
                pids,
                waited: timeout,
            });
        }
        sleep(POLL);
    }
}

/// Kills everything in the cgroup `dir`, waits until it is empty (at most 2 s) and removes it.
/// A directory that does not exist is not an error.
fn kill_and_remove(dir: &Path) -> Result<(), CgroupError> {
    if !dir.exists() {
        return Ok(());
    }
    let start = Instant::now();
    kill_procs(dir)?;
    wait_empty(dir, REMOVE_TIMEOUT)?;
    // A process that just left may keep the directory busy for a moment.
    loop {
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && start.elapsed() < REMOVE_TIMEOUT => {
                sleep(POLL);
            }
            Err(e) => return Err(io_err("removing cgroup", dir)(e)),
        }
    }
}

/// Removes a sandbox cgroup left behind by a supervisor that is gone (the janitor's job): kills
/// what is inside and removes the directory. Refuses anything but a directory named
/// `warden-*` on a cgroup (v1 or v2) filesystem, so a wrong path can never make it signal the
/// pids listed in some ordinary file.
pub fn remove_leftover(dir: &Path) -> Result<(), CgroupError> {
    use nix::sys::statfs::{statfs, CGROUP2_SUPER_MAGIC, CGROUP_SUPER_MAGIC};
    let named_ours = dir
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("warden-"));
    if !named_ours {
        return Err(CgroupError::NotACgroup(dir.to_path_buf()));
    }
    match statfs(dir) {
        Ok(st) if st.filesystem_type() == CGROUP2_SUPER_MAGIC => {}
        Ok(st) if st.filesystem_type() == CGROUP_SUPER_MAGIC => {}
        Ok(_) => return Err(CgroupError::NotACgroup(dir.to_path_buf())),
        Err(Errno::ENOENT) => return Ok(()),
        Err(e) => return Err(io_err("inspecting", dir)(e.into())),
    }
    kill_and_remove(dir)
}

/// Where one requested limit is enforced.
enum Enforcer {
    /// In the v2 leaf, after enabling the controller in the parent's `cgroup.subtree_control`.
    V2,
    /// In a leaf below this v1 directory (the process's own cgroup in that hierarchy).
    V1(PathBuf),
}

/// One sandbox's cgroup v2 leaf, plus the cgroup v1 leaves of limits the v2 hierarchy cannot
/// enforce. Dropping it removes them all (best effort); [`Cgroup::remove`] does the same and
/// reports failures.
#[derive(Debug)]
pub struct Cgroup {
    path: PathBuf,
    id: u64,
    /// `warden-<name>` leaves in cgroup v1 hierarchies (see [`Cgroup::apply_limits`]).
    v1_leaves: Vec<PathBuf>,
    removed: bool,
}

impl Cgroup {
    /// A new leaf `<own cgroup>/warden-<name>`. The own cgroup must be writable by this process
    /// (delegated to the user, or root's); as root on a plain host it is the root of the v2
    /// mount, so the leaf is `<mount>/warden-<name>`.
    pub fn create(name: &str) -> Result<Cgroup, CgroupError> {
        let parent = own_cgroup()?;
        Cgroup::create_in(&parent, name)
    }

    /// A new leaf `<parent>/warden-<name>`; `parent` must be a writable cgroup v2 directory.
    pub fn create_in(parent: &Path, name: &str) -> Result<Cgroup, CgroupError> {
        if !valid_name(name) {
            return Err(CgroupError::InvalidName(name.to_string()));
        }
        let path = create_leaf(parent, name)?;
        let id = match fs::metadata(&path) {
            Ok(m) => m.ino(),
            Err(e) => {
                let _ = fs::remove_dir(&path);
                return Err(io_err("reading", &path)(e));
            }
        };
        Ok(Cgroup {
            path,
            id,
            v1_leaves: Vec::new(),
            removed: false,
        })
    }

    /// The v2 leaf's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The cgroup v1 leaves [`Cgroup::apply_limits`] created, in creation order.
    pub fn v1_leaves(&self) -> &[PathBuf] {
        &self.v1_leaves
    }

    /// The cgroup id: the inode of the leaf's directory, as `bpf_get_current_cgroup_id()` sees it.
    pub fn id(&self) -> u64 {
        self.id
    }

    fn parent(&self) -> Result<&Path, CgroupError> {
        self.path
            .parent()
            .ok_or_else(|| CgroupError::NoParent(self.path.clone()))
    }

    /// Moves process `pid` (with all its threads) into the v2 leaf and every v1 leaf.
    pub fn add_pid(&self, pid: i32) -> Result<(), CgroupError> {
        write(&self.path.join("cgroup.procs"), &format!("{pid}\n"))?;
        self.add_pid_to_v1_leaves(pid)
    }

    /// Moves process `pid` (with all its threads) into every v1 leaf, not the v2 leaf: for a
    /// process started directly in the v2 leaf (`CLONE_INTO_CGROUP` takes a v2 cgroup only).
    /// Call it before the process runs anything the limits must cover. No-op without v1
    /// leaves.
    pub fn add_pid_to_v1_leaves(&self, pid: i32) -> Result<(), CgroupError> {
        let line = format!("{pid}\n");
        for leaf in &self.v1_leaves {
            write(&leaf.join("cgroup.procs"), &line)?;
        }
        Ok(())
    }

    /// Applies every limit that is set. A limit whose controller the v2 parent offers is written
    /// in the v2 leaf, enabling the controller in the parent's `cgroup.subtree_control` when
    /// needed; otherwise, if the controller is bound to a cgroup v1 hierarchy in which this
    /// process's own cgroup is writable, in a `warden-<name>` leaf there (`pids.max`;
    /// `memory.limit_in_bytes` and, when swap accounting exists, `memory.memsw.limit_in_bytes`;
    /// `cpu.cfs_period_us` and `cpu.cfs_quota_us`), which [`Cgroup::add_pid`],
    /// [`Cgroup::kill_all`] and [`Cgroup::remove`] cover from then on. Call it before adding
    /// processes: processes already in the v2 leaf are not moved into new v1 leaves.
    ///
    /// Fails closed: if any requested controller can be enforced neither way, nothing is written
    /// and the error names it; a limit that cannot be written is an error too (the caller removes
    /// the cgroup and refuses to run).
    pub fn apply_limits(&mut self, limits: &Limits) -> Result<(), CgroupError> {
        let required = limits.required();
        if required.is_empty() {
            return Ok(());
        }
        let v1_cpu = match &limits.cpu_max {
            Some(cpu) => Some(v1_cpu(cpu).ok_or_else(|| CgroupError::InvalidCpuMax(cpu.clone()))?),
            None => None,
        };
        let parent = self.parent()?.to_path_buf();
        let available = controllers(&parent)?;
        // Decide where every limit goes before writing anything.
        let mut plan = Vec::with_capacity(required.len());
        for &(controller, limit) in &required {
            if available.contains(controller) {
                plan.push((controller, limit, Enforcer::V2));
                continue;
            }
            match v1_fallback_parent(controller) {
                Ok(v1_parent) => plan.push((controller, limit, Enforcer::V1(v1_parent))),
                Err(problem) => {
                    let available = if available.is_empty() {
                        "none".to_string()
                    } else {
                        available.iter().cloned().collect::<Vec<_>>().join(" ")
                    };
                    let v1_mount = v1_mount_of(controller);
                    return Err(CgroupError::ControllerUnavailable {
                        controller,
                        limit,
                        parent,
                        available,
                        v1_problem: v1_mount.as_ref().map(|_| problem.into_boxed_str()),
                        v1_mount,
                    });
                }
            }
        }
        let enabled = subtree_control(&parent)?;
        for (controller, limit, enforcer) in &plan {
            if matches!(enforcer, Enforcer::V2) && !enabled.contains(*controller) {
                let control = parent.join("cgroup.subtree_control");
                fs::write(&control, format!("+{controller}")).map_err(|source| {
                    CgroupError::ControllerEnable {
                        controller,
                        limit,
                        parent: parent.clone(),
                        source,
                    }
                })?;
            }
        }
        for (controller, _, enforcer) in plan {
            let dir = match enforcer {
                Enforcer::V2 => self.path.clone(),
                Enforcer::V1(v1_parent) => self.v1_leaf_in(&v1_parent)?,
            };
            let v1 = dir != self.path;
            match controller {
                "pids" => {
                    if let Some(n) = limits.pids_max {
                        // 0: no limit (also none of the default, backend::DEFAULT_PIDS_MAX).
                        let value = if n == 0 {
                            "max".to_string()
                        } else {
                            n.to_string()
                        };
                        write(&dir.join("pids.max"), &value)?;
                    }
                }
                "memory" => {
                    if let Some(n) = limits.memory_max {
                        if v1 {
                            write(&dir.join("memory.limit_in_bytes"), &n.to_string())?;
                            // Memory plus swap: without it swapping out escapes the limit. Absent
                            // when swap accounting is off, and then there is nothing to escape to.
                            let memsw = dir.join("memory.memsw.limit_in_bytes");
                            if memsw.exists() {
                                write(&memsw, &n.to_string())?;
                            }
                        } else {
                            write(&dir.join("memory.max"), &n.to_string())?;
                        }
                    }
                }
                "cpu" => {
                    if let (Some(cpu), Some((quota, period))) = (&limits.cpu_max, v1_cpu) {
                        if v1 {
                            // The period first, so the quota is checked against the final period.
                            write(&dir.join("cpu.cfs_period_us"), &period.to_string())?;
                            write(&dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
                        } else {
                            write(&dir.join("cpu.max"), cpu)?;
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// `pids.max` = `n` in the v2 leaf, when the v2 hierarchy offers the pids controller;
    /// otherwise nothing (best effort: the default limit of a run whose settings set none).
    /// Not through a v1 fallback: placing the sandbox in a v1 leaf writes `cgroup.procs`,
    /// which waits for an RCU grace period (~6 ms a run, measured).
    pub fn apply_v2_pids_max(&self, n: u64) {
        let Ok(parent) = self.parent().map(Path::to_path_buf) else {
            return;
        };
        if !controllers(&parent).is_ok_and(|c| c.contains("pids")) {
            return;
        }
        if !subtree_control(&parent).is_ok_and(|c| c.contains("pids")) {
            let _ = fs::write(parent.join("cgroup.subtree_control"), "+pids");
        }
        let _ = fs::write(self.path.join("pids.max"), n.to_string());
    }

    /// This cgroup's leaf below the v1 directory `v1_parent`, created on first use (several
    /// controllers may share one v1 hierarchy, and so one leaf).
    fn v1_leaf_in(&mut self, v1_parent: &Path) -> Result<PathBuf, CgroupError> {
        let name = self
            .path
            .file_name()
            .ok_or_else(|| CgroupError::NoParent(self.path.clone()))?;
        let leaf = v1_parent.join(name);
        if !self.v1_leaves.contains(&leaf) {
            match fs::create_dir(&leaf) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    return Err(CgroupError::AlreadyExists(leaf))
                }
                Err(e) => return Err(io_err("creating cgroup", &leaf)(e)),
            }
            // Owned from here on: removed with the rest even if a later write fails.
            self.v1_leaves.push(leaf.clone());
        }
        Ok(leaf)
    }

    /// The processes in the v2 leaf (`cgroup.procs`).
    pub fn pids(&self) -> Result<Vec<i32>, CgroupError> {
        procs_of(&self.path)
    }

    /// Sends SIGKILL to every process in the v2 leaf and in every v1 leaf: through
    /// `cgroup.kill` (Linux 5.14+), which also catches processes forked meanwhile, or else (v1
    /// leaves, older kernels) by killing each listed pid until the list is empty (bounded). Does
    /// not wait for the processes to be gone; see [`Cgroup::remove`]. Tries every leaf and
    /// reports the first failure.
    pub fn kill_all(&self) -> Result<(), CgroupError> {
        let mut result = kill_procs(&self.path);
        for leaf in &self.v1_leaves {
            let r = kill_procs(leaf);
            if result.is_ok() {
                result = r;
            }
        }
        result
    }

    fn destroy(&mut self) -> Result<(), CgroupError> {
        let mut result = Ok(());
        if !self.removed {
            // The v2 leaf first: `cgroup.kill` takes everything down at once, after which the
            // v1 leaves are empty.
            result = kill_and_remove(&self.path);
            self.removed = result.is_ok();
        }
        let mut kept = Vec::new();
        for leaf in std::mem::take(&mut self.v1_leaves) {
            if let Err(e) = kill_and_remove(&leaf) {
                kept.push(leaf);
                if result.is_ok() {
                    result = Err(e);
                }
            }
        }
        self.v1_leaves = kept;
        result
    }

    /// Kills everything inside, waits until every leaf is empty (at most 2 s each) and removes
    /// them all.
    pub fn remove(mut self) -> Result<(), CgroupError> {
        let result = self.destroy();
        // Reported to the caller: Drop does not try again.
        self.removed = true;
        self.v1_leaves.clear();
        result
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        if !self.removed || !self.v1_leaves.is_empty() {
            let _ = self.destroy();
        }
    }
}

/// Creates `<parent>/warden-<name>`, which must not exist yet.
fn create_leaf(parent: &Path, name: &str) -> Result<PathBuf, CgroupError> {
    access(parent, AccessFlags::W_OK).map_err(|source| CgroupError::NotDelegated {
        path: parent.to_path_buf(),
        source,
    })?;
    let path = parent.join(format!("warden-{name}"));
    match fs::create_dir(&path) {
        Ok(()) => Ok(path),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(CgroupError::AlreadyExists(path)),
        Err(e) => Err(io_err("creating cgroup", &path)(e)),
    }
}

#[cfg(test)]
#[path = "cgroup_tests.rs"]
mod tests;

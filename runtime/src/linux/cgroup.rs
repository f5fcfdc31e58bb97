//! One cgroup v2 leaf per sandbox: `<own cgroup>/warden-<name>`.
//!
//! The leaf gives the sandbox a kernel identity (its cgroup id, the directory's inode, which the
//! eBPF audit layer matches on), resource limits (`pids.max`, `memory.max`, `cpu.max`) and a
//! reliable way to kill everything inside (`cgroup.kill`). Limits fail closed: when settings ask
//! for a limit whose controller is not available in the v2 hierarchy (common in hybrid layouts,
//! where `pids`, `memory` and `cpu` stay bound to cgroup v1), [`Cgroup::apply_limits`] returns
//! [`CgroupError::ControllerUnavailable`] naming the controller instead of running unlimited.
//!
//! Nothing here hard-codes `/sys/fs/cgroup`: the v2 mount comes from `/proc/self/mountinfo` and
//! the process's own cgroup from the `0::` line of `/proc/self/cgroup`.

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::{access, AccessFlags, Pid};
use std::collections::BTreeSet;
use std::fs;
use std::io;
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
        v1_hint(.v1_mount.as_deref())
    )]
    ControllerUnavailable {
        controller: &'static str,
        limit: &'static str,
        parent: PathBuf,
        /// The controllers the parent offers, space-separated, or `none`.
        available: String,
        /// Where the controller is bound to a cgroup v1 hierarchy instead, if it is.
        v1_mount: Option<PathBuf>,
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
}

fn v1_hint(v1_mount: Option<&Path>) -> String {
    match v1_mount {
        Some(m) => format!(
            "; it is bound to the cgroup v1 hierarchy at {} (a hybrid layout): boot with \
             systemd.unified_cgroup_hierarchy=1 or cgroup_no_v1=all to move it to cgroup v2",
            m.display()
        ),
        None => String::new(),
    }
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

/// Where `controller` is bound to a cgroup v1 hierarchy, if it is.
fn v1_mount_in(mountinfo: &str, controller: &str) -> Option<PathBuf> {
    mountinfo
        .lines()
        .filter_map(parse_mountinfo_line)
        .find(|m| m.fstype == "cgroup" && m.super_options.split(',').any(|o| o == controller))
        .map(|m| m.mount_point)
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

fn parse_pids(text: &str) -> Vec<i32> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// One sandbox's cgroup v2 leaf. Dropping it removes it (best effort); [`Cgroup::remove`]
/// does the same and reports failures.
#[derive(Debug)]
pub struct Cgroup {
    path: PathBuf,
    id: u64,
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
        access(parent, AccessFlags::W_OK).map_err(|source| CgroupError::NotDelegated {
            path: parent.to_path_buf(),
            source,
        })?;
        let path = parent.join(format!("warden-{name}"));
        match fs::create_dir(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(CgroupError::AlreadyExists(path))
            }
            Err(e) => return Err(io_err("creating cgroup", &path)(e)),
        }
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
            removed: false,
        })
    }

    /// The leaf's directory.
    pub fn path(&self) -> &Path {
        &self.path
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

    /// Moves process `pid` (with all its threads) into the leaf.
    pub fn add_pid(&self, pid: i32) -> Result<(), CgroupError> {
        write(&self.path.join("cgroup.procs"), &format!("{pid}\n"))
    }

    /// Applies every limit that is set, enabling its controller in the parent's
    /// `cgroup.subtree_control` when needed. Fails closed: if any requested controller is not
    /// available, nothing is written and the error names it; a limit that cannot be written is an
    /// error too (the caller removes the leaf and refuses to run).
    pub fn apply_limits(&self, limits: &Limits) -> Result<(), CgroupError> {
        let required = limits.required();
        if required.is_empty() {
            return Ok(());
        }
        if let Some(cpu) = &limits.cpu_max {
            if !valid_cpu_max(cpu) {
                return Err(CgroupError::InvalidCpuMax(cpu.clone()));
            }
        }
        let parent = self.parent()?;
        let available = controllers(parent)?;
        for &(controller, limit) in &required {
            if !available.contains(controller) {
                let available = if available.is_empty() {
                    "none".to_string()
                } else {
                    available.iter().cloned().collect::<Vec<_>>().join(" ")
                };
                return Err(CgroupError::ControllerUnavailable {
                    controller,
                    limit,
                    parent: parent.to_path_buf(),
                    available,
                    v1_mount: v1_mount_of(controller),
                });
            }
        }
        let enabled = subtree_control(parent)?;
        for &(controller, limit) in &required {
            if !enabled.contains(controller) {
                let control = parent.join("cgroup.subtree_control");
                fs::write(&control, format!("+{controller}")).map_err(|source| {
                    CgroupError::ControllerEnable {
                        controller,
                        limit,
                        parent: parent.to_path_buf(),
                        source,
                    }
                })?;
            }
        }
        if let Some(n) = limits.pids_max {
            write(&self.path.join("pids.max"), &n.to_string())?;
        }
        if let Some(n) = limits.memory_max {
            write(&self.path.join("memory.max"), &n.to_string())?;
        }
        if let Some(cpu) = &limits.cpu_max {
            write(&self.path.join("cpu.max"), cpu)?;
        }
        Ok(())
    }

    /// The processes in the leaf (`cgroup.procs`).
    pub fn pids(&self) -> Result<Vec<i32>, CgroupError> {
        Ok(parse_pids(&read(&self.path.join("cgroup.procs"))?))
    }

    /// Sends SIGKILL to every process in the leaf: through `cgroup.kill` (Linux 5.14+), which
    /// also catches processes forked meanwhile, or else by killing each listed pid until the
    /// list is empty (bounded). Does not wait for the processes to be gone; see [`Cgroup::remove`].
    pub fn kill_all(&self) -> Result<(), CgroupError> {
        let kill_file = self.path.join("cgroup.kill");
        if kill_file.exists() {
            return write(&kill_file, "1");
        }
        let deadline = Instant::now() + REMOVE_TIMEOUT;
        loop {
            let pids = self.pids()?;
            if pids.is_empty() {
                return Ok(());
            }
            for &pid in &pids {
                match kill(Pid::from_raw(pid), Signal::SIGKILL) {
                    Ok(()) | Err(Errno::ESRCH) => {}
                    Err(source) => {
                        return Err(CgroupError::Kill {
                            pid,
                            path: self.path.clone(),
                            source,
                        })
                    }
                }
            }
            if Instant::now() >= deadline {
                return Err(CgroupError::NotEmpty {
                    path: self.path.clone(),
                    pids,
                    waited: REMOVE_TIMEOUT,
                });
            }
            sleep(POLL);
        }
    }

    /// Waits until `cgroup.procs` is empty, at most `timeout`.
    fn wait_empty(&self, timeout: Duration) -> Result<(), CgroupError> {
        let deadline = Instant::now() + timeout;
        loop {
            let pids = self.pids()?;
            if pids.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(CgroupError::NotEmpty {
                    path: self.path.clone(),
                    pids,
                    waited: timeout,
                });
            }
            sleep(POLL);
        }
    }

    fn destroy(&mut self) -> Result<(), CgroupError> {
        if self.removed || !self.path.exists() {
            self.removed = true;
            return Ok(());
        }
        let start = Instant::now();
        self.kill_all()?;
        self.wait_empty(REMOVE_TIMEOUT)?;
        // A process that just left may keep the directory busy for a moment.
        loop {
            match fs::remove_dir(&self.path) {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                Err(e)
                    if e.raw_os_error() == Some(libc::EBUSY)
                        && start.elapsed() < REMOVE_TIMEOUT =>
                {
                    sleep(POLL);
                }
                Err(e) => return Err(io_err("removing cgroup", &self.path)(e)),
            }
        }
        self.removed = true;
        Ok(())
    }

    /// Kills everything inside, waits until the leaf is empty (at most 2 s) and removes it.
    pub fn remove(mut self) -> Result<(), CgroupError> {
        let result = self.destroy();
        // Reported to the caller: Drop does not try again.
        self.removed = true;
        result
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        if !self.removed {
            let _ = self.destroy();
        }
    }
}

#[cfg(test)]
#[path = "cgroup_tests.rs"]
mod tests;

//! The supervisor side of `warden run`: a private run directory, the sandbox's cgroup, the
//! namespaces and uid/gid maps, the plan hand-over, signal forwarding, the exit status and
//! the teardown.
//!
//! The sandbox is a clone3 child of this still single-threaded process, created directly in
//! the sandbox's cgroup (`CLONE_INTO_CGROUP`), which then enters its namespaces itself (see
//! [`super::init`]); it waits for a go byte until its placement is complete, so the first
//! syscall of the command is already covered by anything keyed on the cgroup.

use super::cgroup::Cgroup;
use super::init::signal_set;
use super::plan::Plan;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("creating the run directory: {0}")]
    RunDir(#[source] std::io::Error),
    #[error("cgroup v2 is required for the sandbox (set `failIfUnavailable: false` to run without it): {0}")]
    Cgroup(#[source] super::cgroup::CgroupError),
    #[error("starting the sandbox: {0}")]
    Start(#[source] std::io::Error),
    #[error("handing the plan to the sandbox: {0}")]
    Handover(String),
}

/// A private 0700 directory for one sandbox: the new root is assembled in `root/`, `tmp/` is
/// the sandbox's TMPDIR. Removed on drop.
pub struct RunDir {
    dir: Option<tempfile::TempDir>,
}

impl RunDir {
    /// Creates the directory below the caller's TMPDIR (resolved: the mount code refuses
    /// symlinks on every path it mounts).
    pub fn create() -> Result<RunDir, SpawnError> {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::temp_dir()
            .canonicalize()
            .map_err(SpawnError::RunDir)?;
        let dir = tempfile::Builder::new()
            .prefix("warden-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(base)
            .map_err(SpawnError::RunDir)?;
        for sub in ["root", "tmp"] {
            std::fs::create_dir(dir.path().join(sub)).map_err(SpawnError::RunDir)?;
        }
        Ok(RunDir { dir: Some(dir) })
    }

    pub fn path(&self) -> &Path {
        self.dir
            .as_ref()
            .map_or(Path::new("/nonexistent"), |d| d.path())
    }

    pub fn root(&self) -> PathBuf {
        self.path().join("root")
    }

    pub fn tmpdir(&self) -> PathBuf {
        self.path().join("tmp")
    }

    /// Removes the directory now, reporting failures.
    pub fn remove(mut self) -> std::io::Result<()> {
        match self.dir.take() {
            Some(d) => {
                let path = d.keep();
                remove_tree(&path)
            }
            None => Ok(()),
        }
    }
}

/// Removes a run directory and everything the sandbox left in it — also directories it made
/// unsearchable (mode 000): as an unprivileged caller `remove_dir_all` fails on those and the
/// directory stayed behind. Each directory is opened without following symlinks and made
/// searchable through that descriptor, then emptied; symlinks are removed, never followed.
pub fn remove_tree(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(_) => {}
    }
    make_searchable(path, 0);
    std::fs::remove_dir_all(path)
}

/// Gives the owner rwx on `dir` and every directory below it (depth-limited), never through
/// a symlink.
fn make_searchable(dir: &Path, depth: usize) {
    use std::os::unix::fs::PermissionsExt;
    if depth > 64 {
        return;
    }
    let Ok(fd) = nix::fcntl::open(
        dir,
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_DIRECTORY,
        nix::sys::stat::Mode::empty(),
    ) else {
        return;
    };
    // O_PATH descriptors refuse fchmod; the /proc link names exactly the opened directory.
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let _ = std::fs::set_permissions(&link, std::fs::Permissions::from_mode(0o700));
    drop(fd);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            make_searchable(&entry.path(), depth + 1);
        }
    }
}

/// A running sandbox.
pub struct Sandbox {
    pid: nix::unistd::Pid,
    cgroup: Option<Cgroup>,
    /// The supervisor's end of the channel pid 1 sends the network listeners (and the
    /// terminal's master) on.
    pub net_channel: Option<std::os::fd::OwnedFd>,
}

/// Starts the sandbox for `plan`, directly inside `cgroup` when there is one. The child is a
/// fork of this process, not an exec: this process must still be single-threaded (no async
/// runtime yet), which also spares an exec and a plan round-trip. The child waits on a pipe
/// until the supervisor has finished placing it (cgroup v1 leaves of limits), so it runs
/// nothing unplaced. The forwarded signals must already be blocked in the calling thread, so
/// none is lost between start and wait.
pub fn start(plan: &Plan, cgroup: Option<Cgroup>) -> Result<Sandbox, SpawnError> {
    let (go_read, go_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| SpawnError::Start(e.into()))?;
    // The hand-over channel: the network listeners and the terminal's master come back on it.
    let (net_ours, net_theirs) = match plan.network.is_some() || plan.terminal.is_some() {
        true => {
            let (a, b) = super::net::channel().map_err(|e| SpawnError::Start(e.into()))?;
            (Some(a), Some(b))
        }
        false => (None, None),
    };
    let cgroup_dir = match &cgroup {
        Some(cg) => Some(std::fs::File::open(cg.path()).map_err(SpawnError::Start)?),
        None => None,
    };
    let namespaces = (libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWNET
        | libc::CLONE_NEWCGROUP) as u64;
    let (uid, gid) = (
        nix::unistd::getuid().as_raw(),
        nix::unistd::getgid().as_raw(),
    );
    // SAFETY: the supervisor is single-threaded here (documented precondition of `start`).
    let forked =
        unsafe { super::clone::fork_into(cgroup_dir.as_ref().map(|f| f.as_raw_fd()), namespaces) }
            .map_err(SpawnError::Start)?;
    let Some(pid) = forked else {
        // The child: pid 1 of the new namespaces. If the supervisor died before the
        // parent-death signal was armed, the go pipe reports EOF and the child exits.
        if super::harden::parent_death_signal(libc::SIGKILL).is_err() {
            std::process::exit(crate::cli::EXIT_WARDEN);
        }
        drop(go_write);
        drop(net_ours);
        super::init::run(plan, go_read, net_theirs)
    };
    drop(go_read);
    drop(net_theirs);
    let sandbox = Sandbox {
        pid: nix::unistd::Pid::from_raw(pid),
        cgroup,
        net_channel: net_ours,
    };
    // The child's user namespace maps exactly the caller's own uid and gid — which the kernel
    // lets the caller write for its child, root or not — so the sandbox never holds
    // capabilities in the host's user namespace.
    for (file, content) in [
        ("setgroups", "deny".to_string()),
        ("uid_map", format!("{uid} {uid} 1\n")),
        ("gid_map", format!("{gid} {gid} 1\n")),
    ] {
        std::fs::write(format!("/proc/{pid}/{file}"), content)
            .map_err(|e| SpawnError::Handover(format!("writing the sandbox's {file}: {e}")))?;
    }
    // CLONE_INTO_CGROUP takes the v2 leaf only: the cgroup v1 leaves of limits (hybrid
    // layouts) get the process now, before it is let go.
    if let Some(cg) = &sandbox.cgroup {
        cg.add_pid_to_v1_leaves(pid).map_err(SpawnError::Cgroup)?;
    }
    let mut go = std::fs::File::from(go_write);
    go.write_all(b"g")
        .map_err(|e| SpawnError::Handover(e.to_string()))?;
    Ok(sandbox)
}

impl Sandbox {
    /// Forwards signals and waits; returns the command's exit code.
    pub fn wait(self) -> i32 {
        self.wait_with(&mut |_| false).0
    }

    /// [`Sandbox::wait`], offering each signal to `handled` first: a signal it takes is not
    /// forwarded (SIGWINCH, when the command has its own terminal). Also says whether the
    /// cgroup is gone (false: the janitor must still look).
    pub fn wait_with(
        mut self,
        handled: &mut dyn FnMut(nix::sys::signal::Signal) -> bool,
    ) -> (i32, bool) {
        let set = signal_set();
        let code =
            super::init::supervise_with(self.pid, &set, Some(super::init::TERM_GRACE), handled);
        let removed = match self.cgroup.take() {
            Some(cg) => cg.remove().is_ok(),
            None => true,
        };
        (code, removed)
    }
}

//! Runtime feature probes for `warden doctor`: each one really tries the thing it reports on
//! (the way aya's `sys/feature_probe.rs` loads a program instead of reading a version number).
//!
//! Whatever changes process state — namespaces, uid maps, mounts, seccomp, Landlock — runs in a
//! forked child that exits right after, so the caller is left as it was. Children only make
//! raw system calls on data prepared before the fork (no allocation), so probing is safe from a
//! multi-threaded process such as the test harness. A failing child reports the step and the
//! errno through a pipe.
//!
//! [`REQUIRED`] names the probes warden's default mode depends on; the others (BPF program types,
//! cgroup controllers, sysctls, the active LSM list) are informational.

use crate::linux::cgroup::{self, Cgroup, LIMIT_CONTROLLERS};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::stat::Mode;
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{fork, getgid, getpid, getuid, pipe2, ForkResult, Pid};
use serde::Serialize;
use std::ffi::{CStr, CString};
use std::fs::{self, File};
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

/// The result of one probe.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Probe {
    /// A stable dotted name, e.g. `namespace.user`, `bpf.lsm`.
    pub name: &'static str,
    pub ok: bool,
    /// What was tried and what happened (errno on failure).
    pub detail: String,
    /// What to do about a failure.
    pub fix: Option<String>,
}

/// The probes warden's default mode needs; `warden doctor` fails when one of these does.
pub const REQUIRED: &[&str] = &[
    "namespace.user",
    "namespace.mount",
    "namespace.pid",
    "namespace.net",
    "namespace.uts",
    "namespace.ipc",
    "namespace.cgroup",
    "userns.uid_map",
    "userns.tmpfs_mount",
    "seccomp",
    "landlock",
    "cgroup.v2",
];

/// Numbers the probes' cgroup leaves and directories, so concurrent probes never collide.
static PROBE_SEQ: AtomicU32 = AtomicU32::new(0);

impl Probe {
    fn pass(name: &'static str, detail: impl Into<String>) -> Probe {
        Probe {
            name,
            ok: true,
            detail: detail.into(),
            fix: None,
        }
    }

    fn fail(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Probe {
        Probe {
            name,
            ok: false,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    /// Whether warden's default mode needs this probe to pass.
    pub fn required(&self) -> bool {
        REQUIRED.contains(&self.name)
    }
}

/// Runs every probe, in a stable order.
pub fn run_all() -> Vec<Probe> {
    let host = Host::read();
    let mut out = vec![kernel()];
    out.extend(namespaces(&host));
    out.push(uid_map(&host));
    out.push(userns_tmpfs(&host));
    out.push(seccomp());
    out.push(landlock(&host));
    out.push(cgroup_v2());
    out.extend(cgroup_controllers());
    out.extend(bpf_probes(&host));
    out.push(crate::audit::lsm::doctor_probe());
    out.push(lsm_list(&host));
    out.extend(sysctls(&host));
    out
}

// ---- host facts used by several probes' fixes ------------------------------------------------

/// Facts read once: who we are, the sysctls that gate user namespaces, the active LSMs.
struct Host {
    root: bool,
    max_user_namespaces: Option<u64>,
    unprivileged_userns_clone: Option<u64>,
    apparmor_restrict_userns: Option<u64>,
    unprivileged_bpf_disabled: Option<u64>,
    /// The active LSMs and where the list came from; `Err` says why it is unknown.
    lsms: Result<(Vec<String>, &'static str), String>,
}

fn read_sysctl(path: &str) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

const SYSCTL_MAX_USERNS: &str = "/proc/sys/user/max_user_namespaces";
const SYSCTL_USERNS_CLONE: &str = "/proc/sys/kernel/unprivileged_userns_clone";
const SYSCTL_APPARMOR_USERNS: &str = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns";
const SYSCTL_UNPRIV_BPF: &str = "/proc/sys/kernel/unprivileged_bpf_disabled";
const LSM_FILE: &str = "/sys/kernel/security/lsm";

impl Host {
    fn read() -> Host {
        let root = nix::unistd::geteuid().is_root();
        Host {
            root,
            max_user_namespaces: read_sysctl(SYSCTL_MAX_USERNS),
            unprivileged_userns_clone: read_sysctl(SYSCTL_USERNS_CLONE),
            apparmor_restrict_userns: read_sysctl(SYSCTL_APPARMOR_USERNS),
            unprivileged_bpf_disabled: read_sysctl(SYSCTL_UNPRIV_BPF),
            lsms: active_lsms(root),
        }
    }

    /// How to get user namespaces working, from what is known about this host.
    fn userns_fix(&self) -> String {
        if self.max_user_namespaces == Some(0) {
            return "enable user namespaces: sysctl -w user.max_user_namespaces=15000".into();
        }
        if !self.root && self.unprivileged_userns_clone == Some(0) {
            return "allow unprivileged user namespaces: sysctl -w kernel.unprivileged_userns_clone=1"
                .into();
        }
        if !self.root && self.apparmor_restrict_userns == Some(1) {
            return "AppArmor restricts unprivileged user namespaces: sysctl -w \
                    kernel.apparmor_restrict_unprivileged_userns=0, or install an AppArmor \
                    profile for warden that grants `userns`"
                .into();
        }
        "user namespaces are refused here: inside a container, allow unshare (e.g. docker \
         --security-opt seccomp=unconfined --cap-add SYS_ADMIN), or run warden on the host"
            .into()
    }

    fn lsm_list_text(&self) -> String {
        match &self.lsms {
            Ok((l, _)) => l.join(","),
            Err(_) => "<current list>".into(),
        }
    }

    /// `Some(true)` if `lsm` is active, `None` if the list is unknown.
    fn lsm_active(&self, lsm: &str) -> Option<bool> {
        self.lsms
            .as_ref()
            .ok()
            .map(|(l, _)| l.iter().any(|x| x == lsm))
    }
}

fn parse_lsm_list(text: &str) -> Vec<String> {
    text.trim_matches(|c: char| c.is_whitespace() || c == '\0')
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// The active LSMs from securityfs; as root, when securityfs is not mounted, from a securityfs
/// mounted in a private mount namespace of a child (the host's mounts stay untouched).
fn active_lsms(root: bool) -> Result<(Vec<String>, &'static str), String> {
    match fs::read_to_string(LSM_FILE) {
        Ok(text) => return Ok((parse_lsm_list(&text), LSM_FILE)),
        Err(e) if !root => {
            return Err(format!(
                "cannot read {LSM_FILE} ({e}); securityfs is not mounted and mounting it needs root"
            ))
        }
        Err(_) => {}
    }
    let mut buf = [0u8; 512];
    let res = in_child(|out| {
        unshare(CloneFlags::CLONE_NEWNS).step("unshare(CLONE_NEWNS)")?;
        mount(
            None::<&CStr>,
            c"/",
            None::<&CStr>,
            MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            None::<&CStr>,
        )
        .step("mount(/, MS_REC|MS_PRIVATE)")?;
        mount(
            Some(c"securityfs"),
            c"/sys/kernel/security",
            Some(c"securityfs"),
            MsFlags::empty(),
            None::<&CStr>,
        )
        .step("mount(securityfs)")?;
        let fd = nix::fcntl::open(c"/sys/kernel/security/lsm", OFlag::O_RDONLY, Mode::empty())
            .step("open(lsm)")?;
        let n = nix::unistd::read(&fd, &mut buf).step("read(lsm)")?;
        out.send(buf.get(..n).unwrap_or_default());
        Ok(())
    });
    match res {
        Outcome::Ok(bytes) => Ok((
            parse_lsm_list(&String::from_utf8_lossy(&bytes)),
            "securityfs mounted in a private mount namespace",
        )),
        other => Err(format!(
            "{LSM_FILE} is missing (securityfs not mounted) and mounting it privately failed: {}",
            other.describe()
        )),
    }
}

// ---- forked children -------------------------------------------------------------------------

/// A failed step in a probe child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StepError {
    step: &'static str,
    errno: Errno,
}

trait Step<T> {
    fn step(self, step: &'static str) -> Result<T, StepError>;
}

impl<T> Step<T> for nix::Result<T> {
    fn step(self, step: &'static str) -> Result<T, StepError> {
        self.map_err(|errno| StepError { step, errno })
    }
}

/// What a probe child can send back besides failure.
struct ChildOut<'a> {
    fd: BorrowedFd<'a>,
}

const MSG_OK: u8 = b'O';
const MSG_ERR: u8 = b'E';
/// Longest step name a child reports; longer ones are cut.
const MAX_STEP: usize = 96;

impl ChildOut<'_> {
    /// Sends `bytes` as the child's result (at most 4 KiB, written in one go; no allocation).
    fn send(&self, bytes: &[u8]) {
        let mut buf = [0u8; 4097];
        let n = bytes.len().min(4096);
        buf[0] = MSG_OK;
        buf[1..=n].copy_from_slice(&bytes[..n]);
        let _ = nix::unistd::write(self.fd, &buf[..=n]);
    }

    fn fail(&self, e: StepError) {
        let mut buf = [0u8; 5 + MAX_STEP];
        buf[0] = MSG_ERR;
        buf[1..5].copy_from_slice(&(e.errno as i32).to_ne_bytes());
        let step = e.step.as_bytes();
        let n = step.len().min(MAX_STEP);
        buf[5..5 + n].copy_from_slice(&step[..n]);
        let _ = nix::unistd::write(self.fd, &buf[..5 + n]);
    }
}

/// How a probe child ended.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Success, with whatever the child sent.
    Ok(Vec<u8>),
    /// A step failed with an errno.
    Failed { step: String, errno: Errno },
    /// The child could not run or ended abnormally.
    Broken(String),
}

impl Outcome {
    fn describe(&self) -> String {
        match self {
            Outcome::Ok(_) => "ok".into(),
            Outcome::Failed { step, errno } => format!("{step} failed: {errno}"),
            Outcome::Broken(why) => why.clone(),
        }
    }

    fn errno(&self) -> Option<Errno> {
        match self {
            Outcome::Failed { errno, .. } => Some(*errno),
            _ => None,
        }
    }
}

fn parse_child_message(bytes: &[u8]) -> Option<Outcome> {
    match bytes.split_first()? {
        (&MSG_OK, rest) => Some(Outcome::Ok(rest.to_vec())),
        (&MSG_ERR, rest) => {
            let errno = i32::from_ne_bytes(rest.get(..4)?.try_into().ok()?);
            let step = String::from_utf8_lossy(rest.get(4..)?).into_owned();
            Some(Outcome::Failed {
                step,
                errno: Errno::from_raw(errno),
            })
        }
        _ => None,
    }
}

/// Ends a child at once: no destructors, no atexit handlers, no stdio flush of the parent's
/// buffers.
fn child_exit(code: i32) -> ! {
    // SAFETY: _exit(2) is async-signal-safe and never returns; it is the only correct way to
    // leave a forked child without running state inherited from the parent.
    unsafe { libc::_exit(code) }
}

/// Waits for `pid`, retrying on EINTR.
fn wait_child(pid: Pid) -> Result<WaitStatus, Errno> {
    loop {
        match waitpid(pid, None) {
            Err(Errno::EINTR) => continue,
            other => return other,
        }
    }
}

/// Runs `f` in a forked child and reports how it went. `f` must only make system calls on
/// data prepared before the call (no allocation, no locks): the child of a multi-threaded
/// process may only call async-signal-safe functions.
fn in_child(f: impl FnOnce(&ChildOut<'_>) -> Result<(), StepError>) -> Outcome {
    let (rd, wr) = match pipe2(OFlag::O_CLOEXEC) {
        Ok(p) => p,
        Err(e) => return Outcome::Broken(format!("pipe2 failed: {e}")),
    };
    // SAFETY: the child runs only `f`, which by contract makes async-signal-safe system calls
    // on pre-built data, writes to the pipe and leaves through _exit(2); it never returns into
    // the caller's code. A panic in `f` is caught and also ends in _exit(2).
    match unsafe { fork() } {
        Err(e) => Outcome::Broken(format!("fork failed: {e}")),
        Ok(ForkResult::Child) => {
            drop(rd);
            let out = ChildOut { fd: wr.as_fd() };
            let code = match catch_unwind(AssertUnwindSafe(|| f(&out))) {
                Ok(Ok(())) => 0,
                Ok(Err(e)) => {
                    out.fail(e);
                    1
                }
                Err(_) => 2,
            };
            child_exit(code)
        }
        Ok(ForkResult::Parent { child }) => {
            drop(wr);
            let mut bytes = Vec::new();
            let read = File::from(rd).read_to_end(&mut bytes);
            let status = wait_child(child);
            match (status, read) {
                (Err(e), _) => Outcome::Broken(format!("waitpid failed: {e}")),
                (_, Err(e)) => Outcome::Broken(format!("reading the probe child's report: {e}")),
                (Ok(WaitStatus::Exited(_, 0)), Ok(_)) => match parse_child_message(&bytes) {
                    Some(o @ Outcome::Ok(_)) => o,
                    _ => Outcome::Ok(Vec::new()),
                },
                (Ok(WaitStatus::Exited(_, code)), Ok(_)) => parse_child_message(&bytes)
                    .unwrap_or_else(|| {
                        Outcome::Broken(format!("probe child exited with status {code}"))
                    }),
                (Ok(WaitStatus::Signaled(_, sig, _)), Ok(_)) => {
                    Outcome::Broken(format!("probe child was killed by {sig}"))
                }
                (Ok(other), Ok(_)) => Outcome::Broken(format!("probe child ended as {other:?}")),
            }
        }
    }
}

/// Writes `data` to `path` in one write(2) call, as /proc's map files require.
fn write_file(path: &CStr, data: &[u8], step: &'static str) -> Result<(), StepError> {
    let fd =
        nix::fcntl::open(path, OFlag::O_WRONLY | OFlag::O_CLOEXEC, Mode::empty()).step(step)?;
    let n = nix::unistd::write(&fd, data).step(step)?;
    if n != data.len() {
        return Err(StepError {
            step,
            errno: Errno::EIO,
        });
    }
    Ok(())
}

/// The uid and gid map lines of a user namespace that maps the caller's own ids.
struct IdMaps {
    uid: u32,
    gid: u32,
    uid_map: String,
    gid_map: String,
}

impl IdMaps {
    fn own() -> IdMaps {
        let uid = getuid().as_raw();
        let gid = getgid().as_raw();
        IdMaps {
            uid,
            gid,
            uid_map: format!("{uid} {uid} 1"),
            gid_map: format!("{gid} {gid} 1"),
        }
    }

    /// In a child that just entered a new user namespace: deny setgroups, write both maps and
    /// check the ids are mapped.
    fn write(&self) -> Result<(), StepError> {
        write_file(
            c"/proc/self/setgroups",
            b"deny",
            "write /proc/self/setgroups",
        )?;
        write_file(
            c"/proc/self/uid_map",
            self.uid_map.as_bytes(),
            "write /proc/self/uid_map",
        )?;
        write_file(
            c"/proc/self/gid_map",
            self.gid_map.as_bytes(),
            "write /proc/self/gid_map",
        )?;
        if getuid().as_raw() != self.uid || getgid().as_raw() != self.gid {
            return Err(StepError {
                step: "check the mapped ids (getuid/getgid)",
                errno: Errno::EINVAL,
            });
        }
        Ok(())
    }
}

// ---- the probes ------------------------------------------------------------------------------

fn kernel() -> Probe {
    match fs::read_to_string("/proc/sys/kernel/osrelease") {
        Ok(r) => Probe::pass("kernel", format!("Linux {}", r.trim())),
        Err(e) => Probe::fail(
            "kernel",
            format!("cannot read /proc/sys/kernel/osrelease: {e}"),
            "mount /proc",
        ),
    }
}

struct Namespace {
    name: &'static str,
    flag: CloneFlags,
    flag_name: &'static str,
    config: &'static str,
}

const NAMESPACES: [Namespace; 7] = [
    Namespace {
        name: "namespace.user",
        flag: CloneFlags::CLONE_NEWUSER,
        flag_name: "CLONE_NEWUSER",
        config: "CONFIG_USER_NS",
    },
    Namespace {
        name: "namespace.mount",
        flag: CloneFlags::CLONE_NEWNS,
        flag_name: "CLONE_NEWNS",
        config: "CONFIG_NAMESPACES",
    },
    Namespace {
        name: "namespace.pid",
        flag: CloneFlags::CLONE_NEWPID,
        flag_name: "CLONE_NEWPID",
        config: "CONFIG_PID_NS",
    },
    Namespace {
        name: "namespace.net",
        flag: CloneFlags::CLONE_NEWNET,
        flag_name: "CLONE_NEWNET",
        config: "CONFIG_NET_NS",
    },
    Namespace {
        name: "namespace.uts",
        flag: CloneFlags::CLONE_NEWUTS,
        flag_name: "CLONE_NEWUTS",
        config: "CONFIG_UTS_NS",
    },
    Namespace {
        name: "namespace.ipc",
        flag: CloneFlags::CLONE_NEWIPC,
        flag_name: "CLONE_NEWIPC",
        config: "CONFIG_IPC_NS",
    },
    Namespace {
        name: "namespace.cgroup",
        flag: CloneFlags::CLONE_NEWCGROUP,
        flag_name: "CLONE_NEWCGROUP",
        config: "CONFIG_CGROUPS",
    },
];

/// In a child: the new pid namespace really gives its first process pid 1.
fn check_pid_one() -> Result<(), StepError> {
    // SAFETY: the grandchild only calls getpid(2) and _exit(2).
    match unsafe { fork() }.step("fork into the new pid namespace")? {
        ForkResult::Child => child_exit(if getpid().as_raw() == 1 { 0 } else { 1 }),
        ForkResult::Parent { child } => match wait_child(child).step("waitpid")? {
            WaitStatus::Exited(_, 0) => Ok(()),
            _ => Err(StepError {
                step: "first process of the new pid namespace is not pid 1",
                errno: Errno::EINVAL,
            }),
        },
    }
}

/// In a child with a new mount namespace: make every mount private, as warden does first.
fn make_mounts_private() -> Result<(), StepError> {
    mount(
        None::<&CStr>,
        c"/",
        None::<&CStr>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&CStr>,
    )
    .step("mount(/, MS_REC|MS_PRIVATE)")
}

fn namespaces(host: &Host) -> Vec<Probe> {
    NAMESPACES
        .iter()
        .map(|ns| {
            // Root creates each namespace directly; anyone else through a user namespace, the
            // way warden's unprivileged mode does.
            let via_userns = !host.root && ns.flag != CloneFlags::CLONE_NEWUSER;
            let (flags, call) = if via_userns {
                (
                    CloneFlags::CLONE_NEWUSER | ns.flag,
                    format!("unshare(CLONE_NEWUSER|{})", ns.flag_name),
                )
            } else {
                (ns.flag, format!("unshare({})", ns.flag_name))
            };
            let flag = ns.flag;
            let outcome = in_child(|_| {
                unshare(flags).step("unshare")?;
                if flag == CloneFlags::CLONE_NEWPID {
                    check_pid_one()?;
                } else if flag == CloneFlags::CLONE_NEWNS {
                    make_mounts_private()?;
                }
                Ok(())
            });
            let extra = match ns.flag {
                CloneFlags::CLONE_NEWPID => " (first process is pid 1)",
                CloneFlags::CLONE_NEWNS => " (mounts made private)",
                _ => "",
            };
            match outcome {
                Outcome::Ok(_) => Probe::pass(ns.name, format!("{call} works{extra}")),
                other => {
                    let fix = match other.errno() {
                        Some(Errno::EINVAL) if ns.flag != CloneFlags::CLONE_NEWPID => format!(
                            "the kernel lacks this namespace: rebuild it with {}=y",
                            ns.config
                        ),
                        _ if ns.flag == CloneFlags::CLONE_NEWUSER || via_userns => {
                            host.userns_fix()
                        }
                        _ => "run warden as root, or with user namespaces enabled".into(),
                    };
                    Probe::fail(ns.name, format!("{call}: {}", other.describe()), fix)
                }
            }
        })
        .collect()
}

fn uid_map(host: &Host) -> Probe {
    let maps = IdMaps::own();
    let outcome = in_child(|_| {
        unshare(CloneFlags::CLONE_NEWUSER).step("unshare(CLONE_NEWUSER)")?;
        maps.write()
    });
    match outcome {
        Outcome::Ok(_) => Probe::pass(
            "userns.uid_map",
            format!(
                "new user namespace maps uid {} and gid {} to themselves (setgroups denied)",
                maps.uid, maps.gid
            ),
        ),
        other => Probe::fail("userns.uid_map", other.describe(), host.userns_fix()),
    }
}

fn userns_tmpfs(host: &Host) -> Probe {
    let maps = IdMaps::own();
    let (target, target_name): (&CStr, &str) = if Path::new("/tmp").is_dir() {
        (c"/tmp", "/tmp")
    } else {
        (c"/", "/")
    };
    let file: &CStr = if target_name == "/tmp" {
        c"/tmp/warden-probe"
    } else {
        c"/warden-probe"
    };
    let outcome = in_child(|_| {
        unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS)
            .step("unshare(CLONE_NEWUSER|CLONE_NEWNS)")?;
        maps.write()?;
        make_mounts_private()?;
        mount(
            Some(c"tmpfs"),
            target,
            Some(c"tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(c"size=64k,mode=0700"),
        )
        .step("mount(tmpfs)")?;
        let st = nix::sys::statfs::statfs(target).step("statfs")?;
        if st.filesystem_type() != nix::sys::statfs::TMPFS_MAGIC {
            return Err(StepError {
                step: "statfs: the mount is not a tmpfs",
                errno: Errno::EINVAL,
            });
        }
        nix::fcntl::open(
            file,
            OFlag::O_CREAT | OFlag::O_WRONLY | OFlag::O_CLOEXEC,
            Mode::S_IRUSR | Mode::S_IWUSR,
        )
        .step("create a file in the tmpfs")?;
        Ok(())
    });
    match outcome {
        Outcome::Ok(_) => Probe::pass(
            "userns.tmpfs_mount",
            format!(
                "tmpfs mounted on {target_name} and written in a new user+mount namespace \
                 (invisible to the host)"
            ),
        ),
        other => {
            let fix = match other.errno() {
                Some(Errno::EPERM | Errno::EACCES)
                    if other.describe().starts_with("mount(tmpfs)") =>
                {
                    "mounting in a user namespace is refused (an LSM or a container policy?): \
                     run warden on the host or allow mounts in user namespaces"
                        .into()
                }
                _ => host.userns_fix(),
            };
            Probe::fail("userns.tmpfs_mount", other.describe(), fix)
        }
    }
}

/// seccomp return actions worth reporting, as `SECCOMP_GET_ACTION_AVAIL` names them.
const SECCOMP_ACTIONS: [(u32, &str); 5] = [
    (libc::SECCOMP_RET_KILL_PROCESS, "kill_process"),
    (libc::SECCOMP_RET_ERRNO, "errno"),
    (libc::SECCOMP_RET_USER_NOTIF, "user_notif"),
    (libc::SECCOMP_RET_LOG, "log"),
    (libc::SECCOMP_RET_TRACE, "trace"),
];

fn seccomp_action_available(action: u32) -> bool {
    // SAFETY: SECCOMP_GET_ACTION_AVAIL reads one u32 through the pointer, which points to a
    // live local for the duration of the call; it changes no state.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_ACTION_AVAIL,
            0,
            &action as *const u32,
        )
    };
    r == 0
}

fn seccomp() -> Probe {
    let filter = [libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    }];
    let prog = libc::sock_fprog {
        len: 1,
        filter: filter.as_ptr().cast_mut(),
    };
    let outcome = in_child(|_| {
        nix::sys::prctl::set_no_new_privs().step("prctl(PR_SET_NO_NEW_PRIVS)")?;
        // SAFETY: `prog` points to a one-instruction filter that lives on the stack for the
        // whole call; the kernel copies it. The filter allows everything.
        let r = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0,
                &prog as *const libc::sock_fprog,
            )
        };
        Errno::result(r).step("seccomp(SECCOMP_SET_MODE_FILTER)")?;
        Ok(())
    });
    let actions: Vec<&str> = SECCOMP_ACTIONS
        .iter()
        .filter(|(a, _)| seccomp_action_available(*a))
        .map(|(_, n)| *n)
        .collect();
    match outcome {
        Outcome::Ok(_) => Probe::pass(
            "seccomp",
            format!(
                "allow-all filter loaded after no_new_privs; actions available: {}",
                actions.join(", ")
            ),
        ),
        other => {
            let fix = match other.errno() {
                Some(Errno::EINVAL | Errno::ENOSYS) => {
                    "the kernel lacks seccomp filters: rebuild it with CONFIG_SECCOMP_FILTER=y"
                }
                _ => {
                    "seccomp is refused here (a container runtime's own filter?): run warden \
                      on the host"
                }
            };
            Probe::fail("seccomp", other.describe(), fix)
        }
    }
}

const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
const LANDLOCK_ACCESS_FS_MAKE_DIR: u64 = 1 << 7;

/// `struct landlock_ruleset_attr` as of ABI 1 (the kernel accepts this shorter size).
#[repr(C)]
struct LandlockRulesetAttr {
    handled_access_fs: u64,
}

fn landlock_abi() -> Result<i64, Errno> {
    // SAFETY: with LANDLOCK_CREATE_RULESET_VERSION the attr pointer must be NULL and size 0;
    // the call only returns the ABI version.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<LandlockRulesetAttr>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    Errno::result(r)
}

fn landlock(host: &Host) -> Probe {
    let abi = match landlock_abi() {
        Ok(v) => v,
        Err(e) => {
            let fix = match e {
                Errno::EOPNOTSUPP => format!(
                    "Landlock is built in but not enabled: boot with lsm={},landlock",
                    host.lsm_list_text()
                ),
                Errno::ENOSYS => "the kernel lacks Landlock: use Linux 5.13+ with \
                                  CONFIG_SECURITY_LANDLOCK=y (and landlock in lsm=)"
                    .into(),
                _ => "Landlock is refused here (a container runtime's seccomp filter?)".into(),
            };
            return Probe::fail(
                "landlock",
                format!("landlock_create_ruleset(LANDLOCK_CREATE_RULESET_VERSION): {e}"),
                fix,
            );
        }
    };
    // Really restrict a child: a ruleset that handles directory creation with no rule allowing
    // it anywhere, so mkdir must then fail with EACCES. The same mkdir first succeeds (and is
    // undone) without the ruleset, so the EACCES is Landlock's and not the directory's mode.
    let probe_dir = CString::new(format!(
        "/tmp/warden-landlock-probe-{}-{}",
        std::process::id(),
        PROBE_SEQ.fetch_add(1, Ordering::Relaxed)
    ))
    .unwrap_or_default();
    let attr = LandlockRulesetAttr {
        handled_access_fs: LANDLOCK_ACCESS_FS_MAKE_DIR,
    };
    let outcome = in_child(|out| {
        let verifiable = nix::unistd::mkdir(probe_dir.as_c_str(), Mode::S_IRWXU).is_ok();
        if verifiable {
            // SAFETY: rmdir(2) on a NUL-terminated path that lives across the call.
            let r = unsafe { libc::rmdir(probe_dir.as_ptr()) };
            Errno::result(r).step("rmdir of the probe directory")?;
        }
        // SAFETY: `attr` is a live, initialised ABI-1 ruleset attr of the size passed.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &attr as *const LandlockRulesetAttr,
                std::mem::size_of::<LandlockRulesetAttr>(),
                0u32,
            )
        };
        let fd = Errno::result(fd).step("landlock_create_ruleset")?;
        let raw = i32::try_from(fd).map_err(|_| StepError {
            step: "landlock_create_ruleset returned a bad fd",
            errno: Errno::EBADF,
        })?;
        // SAFETY: the kernel just returned this fd and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        nix::sys::prctl::set_no_new_privs().step("prctl(PR_SET_NO_NEW_PRIVS)")?;
        // SAFETY: restrict_self takes a ruleset fd and flags (0); it only restricts this child.
        let r = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0u32) };
        Errno::result(r).step("landlock_restrict_self")?;
        if !verifiable {
            out.send(b"unverified");
            return Ok(());
        }
        match nix::unistd::mkdir(probe_dir.as_c_str(), Mode::S_IRWXU) {
            Err(Errno::EACCES) => Ok(()),
            Ok(()) => {
                // SAFETY: rmdir(2) on a NUL-terminated path that lives across the call.
                let _ = unsafe { libc::rmdir(probe_dir.as_ptr()) };
                Err(StepError {
                    step: "mkdir was allowed under a ruleset that denies it",
                    errno: Errno::EPERM,
                })
            }
            Err(e) => Err(StepError {
                step: "mkdir under the ruleset (expected EACCES)",
                errno: e,
            }),
        }
    });
    match outcome {
        Outcome::Ok(payload) if payload == b"unverified" => Probe::pass(
            "landlock",
            format!(
                "ABI {abi}; a child restricted itself (enforcement not verified: /tmp is not \
                 writable here)"
            ),
        ),
        Outcome::Ok(_) => Probe::pass(
            "landlock",
            format!("ABI {abi}; a ruleset restricted a child (mkdir denied with EACCES)"),
        ),
        other => Probe::fail(
            "landlock",
            format!("ABI {abi}, but enforcing failed: {}", other.describe()),
            "Landlock cannot be enforced here (a container runtime's seccomp filter?): run \
             warden on the host",
        ),
    }
}

/// Forks a child that waits on a pipe, hands its pid to `f`, then lets it exit and reaps it.
fn with_parked_child<R>(f: impl FnOnce(i32) -> R) -> Result<R, String> {
    let (rd, wr) = pipe2(OFlag::O_CLOEXEC).map_err(|e| format!("pipe2 failed: {e}"))?;
    // SAFETY: the child only reads from the pipe and leaves through _exit(2).
    match unsafe { fork() } {
        Err(e) => Err(format!("fork failed: {e}")),
        Ok(ForkResult::Child) => {
            drop(wr);
            let mut b = [0u8; 1];
            let _ = nix::unistd::read(&rd, &mut b);
            child_exit(0)
        }
        Ok(ForkResult::Parent { child }) => {
            drop(rd);
            let r = f(child.as_raw());
            drop(wr);
            wait_child(child).map_err(|e| format!("waitpid failed: {e}"))?;
            Ok(r)
        }
    }
}

fn cgroup_v2() -> Probe {
    const NAME: &str = "cgroup.v2";
    let mount = match cgroup::find_v2_mount() {
        Ok(m) => m,
        Err(e) => {
            return Probe::fail(
                NAME,
                e.to_string(),
                "mount cgroup v2: mount -t cgroup2 none /sys/fs/cgroup (or \
                 /sys/fs/cgroup/unified next to cgroup v1)",
            )
        }
    };
    let own = match cgroup::own_cgroup() {
        Ok(o) => o,
        Err(e) => {
            return Probe::fail(
                NAME,
                format!("v2 mounted at {}, but {e}", mount.display()),
                "boot with a kernel and init that use cgroup v2",
            )
        }
    };
    let delegate_fix = "run warden as root, or inside a delegated cgroup: systemd-run --user \
                        --scope -p Delegate=yes warden …";
    let cg = match Cgroup::create(&format!(
        "probe-{}-{}",
        std::process::id(),
        PROBE_SEQ.fetch_add(1, Ordering::Relaxed)
    )) {
        Ok(cg) => cg,
        Err(e) => {
            return Probe::fail(
                NAME,
                format!(
                    "v2 at {}, own cgroup {}: {e}",
                    mount.display(),
                    own.display()
                ),
                delegate_fix,
            )
        }
    };
    let leaf = cg.path().display().to_string();
    let id = cg.id();
    let moved = with_parked_child(|pid| {
        cg.add_pid(pid)?;
        cg.pids().map(|p| p.contains(&pid))
    });
    let removed = cg.remove();
    let detail = format!(
        "v2 at {}, own cgroup {}: created {leaf} (id {id})",
        mount.display(),
        own.display()
    );
    match (moved, removed) {
        (Ok(Ok(true)), Ok(())) => {
            Probe::pass(NAME, format!("{detail}, moved a process in, removed it"))
        }
        (Ok(Ok(false)), _) => Probe::fail(
            NAME,
            format!("{detail}, but a process written to cgroup.procs is not listed there"),
            delegate_fix,
        ),
        (Ok(Err(e)), _) => Probe::fail(NAME, format!("{detail}, but {e}"), delegate_fix),
        (Err(e), _) => Probe::fail(NAME, format!("{detail}, but {e}"), delegate_fix),
        (_, Err(e)) => Probe::fail(
            NAME,
            format!("{detail}, but removing it failed: {e}"),
            "remove the leftover leaf by hand (rmdir) once empty",
        ),
    }
}

fn controller_probe_name(controller: &str) -> &'static str {
    match controller {
        "pids" => "cgroup.controller.pids",
        "memory" => "cgroup.controller.memory",
        _ => "cgroup.controller.cpu",
    }
}

fn limit_setting(controller: &str) -> &'static str {
    match controller {
        "pids" => "warden.limits.pidsMax",
        "memory" => "warden.limits.memoryMax",
        _ => "warden.limits.cpuMax",
    }
}

fn cgroup_controllers() -> Vec<Probe> {
    let state = cgroup::own_cgroup().and_then(|own| {
        let available = cgroup::controllers(&own)?;
        let enabled = cgroup::subtree_control(&own).unwrap_or_default();
        Ok((own, available, enabled))
    });
    LIMIT_CONTROLLERS
        .iter()
        .map(|&c| {
            let name = controller_probe_name(c);
            let setting = limit_setting(c);
            let (own, available, enabled) = match &state {
                Ok(s) => s,
                Err(e) => {
                    return Probe::fail(
                        name,
                        format!("cgroup v2 unusable: {e}"),
                        format!(
                        "settings with {setting} are refused until cgroup v2 works (see cgroup.v2)"
                    ),
                    )
                }
            };
            let file = own.join("cgroup.controllers");
            if available.contains(c) {
                let state = if enabled.contains(c) {
                    "enabled for children"
                } else {
                    "enabled on demand"
                };
                return Probe::pass(name, format!("available in {} ({state})", file.display()));
            }
            let offered = if available.is_empty() {
                "none".to_string()
            } else {
                available.iter().cloned().collect::<Vec<_>>().join(" ")
            };
            let mut detail = format!("not available in {} (available: {offered})", file.display());
            let fix = match cgroup::v1_mount_of(c) {
                Some(v1) => {
                    detail.push_str(&format!("; bound to cgroup v1 at {}", v1.display()));
                    if let Ok(parent) = cgroup::v1_fallback_parent(c) {
                        detail.push_str(&format!(
                            "; {setting} is enforced there instead, in a leaf below {}",
                            parent.display()
                        ));
                        return Probe::pass(name, detail);
                    }
                    format!(
                        "settings with {setting} are refused until `{c}` is in cgroup v2 or its \
                         cgroup v1 hierarchy is writable: boot with \
                         systemd.unified_cgroup_hierarchy=1 (or cgroup_no_v1={c})"
                    )
                }
                None => format!(
                    "settings with {setting} are refused: enable `{c}` for {} in its parent's \
                     cgroup.subtree_control",
                    own.display()
                ),
            };
            Probe::fail(name, detail, fix)
        })
        .collect()
}

// ---- BPF -------------------------------------------------------------------------------------

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_RAW_TRACEPOINT_OPEN: libc::c_long = 17;

const BPF_PROG_TYPE_SOCKET_FILTER: u32 = 1;
const BPF_PROG_TYPE_TRACEPOINT: u32 = 5;
const BPF_PROG_TYPE_RAW_TRACEPOINT: u32 = 17;
const BPF_PROG_TYPE_CGROUP_SOCK_ADDR: u32 = 18;
const BPF_PROG_TYPE_TRACING: u32 = 26;
const BPF_PROG_TYPE_LSM: u32 = 29;
const BPF_CGROUP_INET4_CONNECT: u32 = 10;
const BPF_TRACE_FENTRY: u32 = 24;
const BPF_LSM_MAC: u32 = 27;
const BPF_MAP_TYPE_RINGBUF: u32 = 27;

/// The LSM hook the BPF LSM probe attaches to.
const LSM_PROBE_HOOK: &str = "bpf_lsm_file_open";

/// `struct bpf_insn`.
#[repr(C)]
#[derive(Clone, Copy)]
struct BpfInsn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

/// `r0 = 0; exit`.
const TRIVIAL_PROGRAM: [BpfInsn; 2] = [
    // BPF_ALU64 | BPF_MOV | BPF_K, dst r0
    BpfInsn {
        code: 0xb7,
        regs: 0,
        off: 0,
        imm: 0,
    },
    // BPF_JMP | BPF_EXIT
    BpfInsn {
        code: 0x95,
        regs: 0,
        off: 0,
        imm: 0,
    },
];

/// The `BPF_PROG_LOAD` part of `union bpf_attr`, up to `attach_btf_obj_fd`.
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
    prog_btf_fd: u32,
    func_info_rec_size: u32,
    func_info: u64,
    func_info_cnt: u32,
    line_info_rec_size: u32,
    line_info: u64,
    line_info_cnt: u32,
    attach_btf_id: u32,
    attach_btf_obj_fd: u32,
    core_relo_cnt: u32,
}

const _: () = assert!(std::mem::size_of::<ProgLoadAttr>() == 120);

/// The `BPF_MAP_CREATE` part of `union bpf_attr`, up to `map_flags`.
#[repr(C)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
}

/// The `BPF_RAW_TRACEPOINT_OPEN` part of `union bpf_attr`.
#[repr(C)]
struct RawTracepointOpenAttr {
    name: u64,
    prog_fd: u32,
    _pad: u32,
}

/// Calls bpf(2) with `attr`; returns the new fd.
fn sys_bpf<T>(cmd: libc::c_long, attr: &T) -> Result<OwnedFd, Errno> {
    // SAFETY: `attr` is a live, fully initialised `#[repr(C)]` prefix of `union bpf_attr` for
    // `cmd`, passed with its exact size; every pointer inside it points to data the caller keeps
    // alive across the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *const T,
            std::mem::size_of::<T>(),
        )
    };
    let fd = Errno::result(r)?;
    let fd = i32::try_from(fd).map_err(|_| Errno::EBADF)?;
    // SAFETY: bpf(2) just returned this new fd, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A failed program load: the errno and the verifier's last words, if any.
#[derive(Debug)]
struct LoadError {
    errno: Errno,
    log: Option<String>,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BPF_PROG_LOAD: {}", self.errno)?;
        if let Some(log) = &self.log {
            write!(f, " (verifier: {log})")?;
        }
        Ok(())
    }
}

/// The last non-empty line of a verifier log.
fn verifier_summary(log: &[u8]) -> Option<String> {
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    let text = String::from_utf8_lossy(log.get(..end).unwrap_or_default()).into_owned();
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
}

/// Loads `r0 = 0; exit` as `prog_type`.
fn load_trivial(
    prog_type: u32,
    expected_attach_type: u32,
    attach_btf_id: u32,
) -> Result<OwnedFd, LoadError> {
    let insns = TRIVIAL_PROGRAM;
    let license = c"GPL";
    let mut name = [0u8; 16];
    name[..12].copy_from_slice(b"warden_probe");
    let mut attr = ProgLoadAttr {
        prog_type,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name: name,
        expected_attach_type,
        attach_btf_id,
        ..ProgLoadAttr::default()
    };
    match sys_bpf(BPF_PROG_LOAD, &attr) {
        Ok(fd) => Ok(fd),
        Err(errno) => {
            // Once more with the verifier log, to say why.
            let mut log = vec![0u8; 16 * 1024];
            attr.log_level = 1;
            attr.log_size = log.len() as u32;
            attr.log_buf = log.as_mut_ptr() as u64;
            let _ = sys_bpf(BPF_PROG_LOAD, &attr);
            Err(LoadError {
                errno,
                log: verifier_summary(&log),
            })
        }
    }
}

fn bpf_fix(errno: Errno, host: &Host) -> String {
    match errno {
        Errno::EPERM | Errno::EACCES => match host.unprivileged_bpf_disabled {
            Some(v) if v != 0 && !host.root => format!(
                "bpf() needs root or CAP_BPF+CAP_PERFMON \
                 (kernel.unprivileged_bpf_disabled={v})"
            ),
            _ => "loading BPF programs is refused (lockdown, or a container without \
                  CAP_BPF/CAP_SYS_ADMIN?)"
                .into(),
        },
        Errno::EINVAL | Errno::EOPNOTSUPP => {
            "the kernel does not support this program type (CONFIG_BPF_SYSCALL and the \
             matching CONFIG_*)"
                .into()
        }
        _ => "see the errno".into(),
    }
}

fn bpf_load_probe(
    name: &'static str,
    what: &str,
    prog_type: u32,
    expected_attach_type: u32,
    host: &Host,
) -> Probe {
    match load_trivial(prog_type, expected_attach_type, 0) {
        Ok(_fd) => Probe::pass(name, format!("loaded a trivial {what} program")),
        Err(e) => Probe::fail(name, format!("{what}: {e}"), bpf_fix(e.errno, host)),
    }
}

fn bpf_ringbuf(host: &Host) -> Probe {
    let attr = MapCreateAttr {
        map_type: BPF_MAP_TYPE_RINGBUF,
        key_size: 0,
        value_size: 0,
        max_entries: 4096,
        map_flags: 0,
    };
    match sys_bpf(BPF_MAP_CREATE, &attr) {
        Ok(_fd) => Probe::pass("bpf.ringbuf", "created a 4 KiB BPF ring buffer map"),
        Err(e) => Probe::fail(
            "bpf.ringbuf",
            format!("BPF_MAP_CREATE(BPF_MAP_TYPE_RINGBUF): {e}"),
            bpf_fix(e, host),
        ),
    }
}

/// Reads a native-endian u32 at `off`.
fn u32_at(data: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(
        data.get(off..off.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// The type id of the `BTF_KIND_FUNC` named `wanted` in raw BTF (e.g. /sys/kernel/btf/vmlinux).
fn btf_func_id(btf: &[u8], wanted: &str) -> Result<u32, String> {
    const BTF_MAGIC: u16 = 0xeb9f;
    const KIND_FUNC: u32 = 12;
    let magic = btf
        .get(..2)
        .and_then(|b| b.try_into().ok())
        .map(u16::from_ne_bytes);
    if magic != Some(BTF_MAGIC) {
        return Err("not native-endian BTF (bad magic)".into());
    }
    let field = |off| u32_at(btf, off).ok_or_else(|| "truncated BTF header".to_string());
    let to_usize = |v: u32| usize::try_from(v).map_err(|_| "BTF offset overflow".to_string());
    let hdr_len = to_usize(field(4)?)?;
    let (type_off, type_len) = (to_usize(field(8)?)?, to_usize(field(12)?)?);
    let (str_off, str_len) = (to_usize(field(16)?)?, to_usize(field(20)?)?);
    let section = |off: usize, len: usize| {
        let start = hdr_len.checked_add(off);
        start
            .and_then(|s| btf.get(s..s.checked_add(len)?))
            .ok_or_else(|| "BTF section out of bounds".to_string())
    };
    let types = section(type_off, type_len)?;
    let strings = section(str_off, str_len)?;
    let name_at = |off: usize| -> Option<&[u8]> {
        let s = strings.get(off..)?;
        s.get(..s.iter().position(|&b| b == 0)?)
    };
    let mut off = 0usize;
    let mut id = 1u32;
    while off + 12 <= types.len() {
        let (Some(name_off), Some(info)) = (u32_at(types, off), u32_at(types, off + 4)) else {
            break;
        };
        let kind = (info >> 24) & 0x1f;
        let vlen = (info & 0xffff) as usize;
        if kind == KIND_FUNC && name_at(to_usize(name_off)?) == Some(wanted.as_bytes()) {
            return Ok(id);
        }
        let extra = match kind {
            1 | 14 | 17 => 4,     // INT, VAR, DECL_TAG
            3 => 12,              // ARRAY
            4 | 5 => 12 * vlen,   // STRUCT, UNION
            6 | 13 => 8 * vlen,   // ENUM, FUNC_PROTO
            15 | 19 => 12 * vlen, // DATASEC, ENUM64
            2 | 7..=12 | 16 | 18 => 0,
            k => return Err(format!("unknown BTF kind {k} at type {id}")),
        };
        off += 12 + extra;
        id += 1;
    }
    Err(format!("no function {wanted} in the kernel's BTF"))
}

/// Whether the kernel refuses BPF LSM programs outright: a trivial one on `bpf_lsm_file_open`
/// that fails with EPERM (no trampolines, or a policy), checked before warden's LSM object is
/// opened (audit/lsm.rs). `Ok(())` when it loads (or when the check cannot tell, e.g. no BTF:
/// the real load decides).
pub fn bpf_lsm_refused() -> Result<(), Errno> {
    let Ok(btf) = fs::read("/sys/kernel/btf/vmlinux") else {
        return Ok(());
    };
    let Ok(id) = btf_func_id(&btf, LSM_PROBE_HOOK) else {
        return Ok(());
    };
    match load_trivial(BPF_PROG_TYPE_LSM, BPF_LSM_MAC, id) {
        Err(e) if e.errno == Errno::EPERM => Err(e.errno),
        _ => Ok(()),
    }
}

fn bpf_lsm(host: &Host) -> Probe {
    const NAME: &str = "bpf.lsm";
    let active = host.lsm_active("bpf");
    let lsm_fix = format!("boot with lsm={},bpf", host.lsm_list_text());
    let btf = match fs::read("/sys/kernel/btf/vmlinux") {
        Ok(b) => b,
        Err(e) => {
            return Probe::fail(
                NAME,
                format!(
                    "LSM: probe needs a BTF id, and /sys/kernel/btf/vmlinux is unreadable: {e}"
                ),
                "use a kernel built with CONFIG_DEBUG_INFO_BTF=y and CONFIG_BPF_LSM=y",
            )
        }
    };
    let id = match btf_func_id(&btf, LSM_PROBE_HOOK) {
        Ok(id) => id,
        Err(e) => {
            return Probe::fail(
                NAME,
                format!("LSM: probe needs the BTF id of {LSM_PROBE_HOOK}: {e}"),
                "use a kernel built with CONFIG_BPF_LSM=y",
            )
        }
    };
    let prog = match load_trivial(BPF_PROG_TYPE_LSM, BPF_LSM_MAC, id) {
        Ok(fd) => fd,
        Err(e) => {
            // Is it LSM programs, or every BTF-attached program (trampolines)? fentry on the
            // same function tells.
            let fentry = load_trivial(BPF_PROG_TYPE_TRACING, BPF_TRACE_FENTRY, id);
            let fentry_text = match &fentry {
                Ok(_) => "fentry on the same function loads".to_string(),
                Err(f) => format!("fentry on the same function fails too: {}", f.errno),
            };
            let fix = if active == Some(false) {
                lsm_fix
            } else if e.errno == Errno::EPERM && host.root && fentry.is_err() {
                "this kernel refuses every BTF-attached BPF program (LSM, fentry) even to root, \
                 before the verifier runs: BPF LSM auditing cannot work on this machine; use a \
                 kernel that allows BPF trampolines"
                    .into()
            } else if e.errno == Errno::EPERM && host.root {
                "root may load other BPF programs but not BPF LSM ones: a security policy of \
                 this machine refuses them; BPF LSM auditing cannot work here"
                    .into()
            } else {
                bpf_fix(e.errno, host)
            };
            return Probe::fail(
                NAME,
                format!("LSM program on {LSM_PROBE_HOOK} (BTF id {id}): {e}; {fentry_text}"),
                fix,
            );
        }
    };
    // Attach for a moment: the program returns 0 (no objection), so nothing is denied.
    let attach = RawTracepointOpenAttr {
        name: 0,
        prog_fd: u32::try_from(prog.as_raw_fd()).unwrap_or_default(),
        _pad: 0,
    };
    let attached = sys_bpf(BPF_RAW_TRACEPOINT_OPEN, &attach);
    let detail = format!("LSM program on {LSM_PROBE_HOOK} (BTF id {id}) loaded");
    match (attached, active) {
        (Err(e), _) => Probe::fail(
            NAME,
            format!("{detail}, attaching failed: BPF_RAW_TRACEPOINT_OPEN: {e}"),
            if active == Some(false) {
                lsm_fix
            } else {
                "the kernel cannot attach BPF LSM programs (BPF trampolines missing?)".into()
            },
        ),
        (Ok(_link), Some(true)) => Probe::pass(
            NAME,
            format!("{detail} and attached; bpf is an active LSM"),
        ),
        (Ok(_link), Some(false)) => Probe::fail(
            NAME,
            format!(
                "{detail} and attached, but bpf is not among the active LSMs ({}): its hooks never run",
                host.lsm_list_text()
            ),
            lsm_fix,
        ),
        (Ok(_link), None) => Probe::pass(
            NAME,
            format!("{detail} and attached; whether bpf is an active LSM is unknown (see lsm.active)"),
        ),
    }
}

fn bpf_probes(host: &Host) -> Vec<Probe> {
    vec![
        bpf_load_probe(
            "bpf.socket_filter",
            "SOCKET_FILTER",
            BPF_PROG_TYPE_SOCKET_FILTER,
            0,
            host,
        ),
        bpf_load_probe(
            "bpf.tracepoint",
            "TRACEPOINT",
            BPF_PROG_TYPE_TRACEPOINT,
            0,
            host,
        ),
        bpf_load_probe(
            "bpf.raw_tracepoint",
            "RAW_TRACEPOINT",
            BPF_PROG_TYPE_RAW_TRACEPOINT,
            0,
            host,
        ),
        bpf_load_probe(
            "bpf.cgroup_sock_addr",
            "CGROUP_SOCK_ADDR (CGROUP_INET4_CONNECT)",
            BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
            BPF_CGROUP_INET4_CONNECT,
            host,
        ),
        bpf_ringbuf(host),
        bpf_lsm(host),
    ]
}

fn lsm_list(host: &Host) -> Probe {
    match &host.lsms {
        Ok((list, source)) => {
            Probe::pass("lsm.active", format!("{} (from {source})", list.join(",")))
        }
        Err(e) => Probe::fail(
            "lsm.active",
            e.clone(),
            "mount securityfs: mount -t securityfs securityfs /sys/kernel/security",
        ),
    }
}

fn sysctls(host: &Host) -> Vec<Probe> {
    let mut out = Vec::new();
    const MAXNS: &str = "sysctl.user.max_user_namespaces";
    out.push(match host.max_user_namespaces {
        Some(0) => Probe::fail(
            MAXNS,
            "0: user namespaces are disabled",
            "sysctl -w user.max_user_namespaces=15000",
        ),
        Some(v) => Probe::pass(MAXNS, v.to_string()),
        None => Probe::fail(
            MAXNS,
            format!("{SYSCTL_MAX_USERNS} is unreadable"),
            "use a kernel with CONFIG_USER_NS=y",
        ),
    });
    const CLONE: &str = "sysctl.kernel.unprivileged_userns_clone";
    out.push(match host.unprivileged_userns_clone {
        None => Probe::pass(CLONE, "not present on this kernel (no such restriction)"),
        Some(0) => Probe::fail(
            CLONE,
            "0: only root may create user namespaces",
            "sysctl -w kernel.unprivileged_userns_clone=1",
        ),
        Some(v) => Probe::pass(CLONE, v.to_string()),
    });
    const APPARMOR: &str = "sysctl.kernel.apparmor_restrict_unprivileged_userns";
    out.push(match host.apparmor_restrict_userns {
        None => Probe::pass(APPARMOR, "not present on this kernel (no such restriction)"),
        Some(0) => Probe::pass(APPARMOR, "0"),
        Some(v) => Probe::fail(
            APPARMOR,
            format!("{v}: AppArmor confines unprivileged user namespaces"),
            "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile \
             for warden that grants `userns`",
        ),
    });
    out
}

#[cfg(test)]
#[path = "probe_tests.rs"]
mod tests;

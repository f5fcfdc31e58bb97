//! fork + exec through `clone3(2)`, for the two things `std::process::Command` cannot do:
//! start the child directly inside a cgroup (`CLONE_INTO_CGROUP`: no migration afterwards,
//! which costs a cgroup-wide RCU grace period, 10–15 ms on our machines), and return before
//! the child has exec'd (Command's vfork makes the parent wait for the exec).
//!
//! Everything the child touches is prepared before the clone; between clone and execve the
//! child makes only raw, async-signal-safe syscalls, so this is safe even if the caller had
//! threads.

use std::ffi::{CStr, CString};
use std::os::fd::RawFd;

const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` up to `cgroup` (CLONE_ARGS_SIZE_VER2).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

pub struct Spawn<'a> {
    pub program: &'a CStr,
    pub argv: &'a [CString],
    pub env: &'a [CString],
    /// Start the child in this cgroup (a directory descriptor of a cgroup v2 leaf).
    pub cgroup: Option<RawFd>,
    /// A descriptor to keep open across the exec (its FD_CLOEXEC is cleared in the child).
    pub keep_fd: Option<RawFd>,
    /// Becomes the child's stdin.
    pub stdin: Option<RawFd>,
    /// Becomes the child's stdout and stderr (e.g. /dev/null).
    pub stdout_stderr: Option<RawFd>,
    /// SIGKILL the child when this thread exits.
    pub parent_death_signal: bool,
    /// Put the child in a new process group (terminal signals do not reach it).
    pub new_process_group: bool,
}

/// Starts the child; returns its pid.
pub fn spawn(s: &Spawn<'_>) -> std::io::Result<libc::pid_t> {
    let argv: Vec<*const libc::c_char> = s
        .argv
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp: Vec<*const libc::c_char> = s
        .env
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    // SAFETY: the child below makes only raw, async-signal-safe syscalls on data prepared
    // here, so fork_into's single-thread precondition (about running Rust code) is not needed.
    if let Some(pid) = unsafe { fork_into(s.cgroup, 0) }? {
        return Ok(pid);
    }
    // The child. SAFETY: only raw syscalls on data prepared before the clone; every path
    // ends in execve or _exit.
    unsafe {
        if s.parent_death_signal && libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0
        {
            libc::_exit(126);
        }
        if s.new_process_group && libc::setpgid(0, 0) != 0 {
            libc::_exit(126);
        }
        if let Some(fd) = s.stdin {
            if libc::dup2(fd, 0) < 0 {
                libc::_exit(126);
            }
        }
        if let Some(fd) = s.stdout_stderr {
            if libc::dup2(fd, 1) < 0 || libc::dup2(fd, 2) < 0 {
                libc::_exit(126);
            }
        }
        if let Some(fd) = s.keep_fd {
            if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                libc::_exit(126);
            }
        }
        libc::execve(s.program.as_ptr(), argv.as_ptr(), envp.as_ptr());
        libc::_exit(127)
    }
}

/// Forks with clone3, optionally straight into a cgroup and into new namespaces (`CLONE_NEW*`
/// flags in `namespaces`). Returns `Ok(None)` in the child.
///
/// # Safety
/// The calling process must be single-threaded: the child continues running ordinary Rust
/// code (allocating, locking) on a copy of this process.
pub unsafe fn fork_into(
    cgroup: Option<RawFd>,
    namespaces: u64,
) -> std::io::Result<Option<libc::pid_t>> {
    let mut args = CloneArgs {
        flags: namespaces,
        exit_signal: libc::SIGCHLD as u64,
        ..Default::default()
    };
    if let Some(fd) = cgroup {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = fd as u64;
    }
    // SAFETY: `args` is a valid clone_args of the size passed; without CLONE_VM the child gets
    // a copy of the address space; the caller guarantees a single-threaded process.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    match pid {
        p if p < 0 => Err(std::io::Error::last_os_error()),
        0 => Ok(None),
        p => Ok(Some(p as libc::pid_t)),
    }
}

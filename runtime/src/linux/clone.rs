//! The one fork of warden: `clone3(2)`, which can start the child directly inside a cgroup
//! (`CLONE_INTO_CGROUP`: no migration afterwards, which costs a cgroup-wide RCU grace period,
//! 10–15 ms on our machines) and in new namespaces at once.

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

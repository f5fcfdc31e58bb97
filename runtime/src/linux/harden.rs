//! Process-level hardening of the command: capabilities, securebits, `no_new_privs`,
//! dumpability and the parent-death signal.
//!
//! Every function here only makes system calls (no allocation, no locks), so all of them may
//! run in the child between `fork` and `execve`. The command's process calls, in this order:
//! [`crate::linux::landlock`]'s enforcement, [`drop_capabilities`], [`no_new_privs`], then
//! [`crate::linux::seccomp::install`].
//!
//! # The capability drop
//!
//! [`drop_capabilities`] works in the order the kernel requires, because the first two steps
//! need `CAP_SETPCAP` in the effective set and the last one removes it:
//!
//! 1. securebits, with `prctl(PR_SET_SECUREBITS)`: `SECBIT_NOROOT` (uid 0 gains no capabilities
//!    from `execve`), `SECBIT_NO_SETUID_FIXUP` (uid changes do not touch the capability sets),
//!    `SECBIT_NO_CAP_AMBIENT_RAISE` (the ambient set cannot be raised again), each with its
//!    `_LOCKED` bit, plus `SECBIT_KEEP_CAPS_LOCKED` with `SECBIT_KEEP_CAPS` cleared. Bits
//!    already set (for instance by an outer sandbox) are kept.
//! 2. the bounding set, with `PR_CAPBSET_DROP` for every capability the kernel knows: numbers
//!    are probed with `PR_CAPBSET_READ` from 0 until `EINVAL`, so capabilities newer than this
//!    code (or than the `libc`/`caps` crates' tables) are dropped too.
//! 3. the ambient set, with `PR_CAP_AMBIENT_CLEAR_ALL` (`EINVAL`, a kernel without ambient
//!    capabilities, counts as already empty).
//! 4. the effective, permitted and inheritable sets, with one `capset` to all zeroes;
//! 5. a `capget` to check that all three really are empty.
//!
//! This is done with raw `prctl`/`capget`/`capset` rather than the `caps` crate: `caps` builds
//! `HashSet`s (allocation after `fork` in a multi-threaded parent is not async-signal-safe),
//! knows capabilities only up to `CAP_CHECKPOINT_RESTORE` (40), and reports errors as strings.

use std::io;

/// The securebits [`drop_capabilities`] sets (all locked).
pub const SECUREBITS: libc::c_int = libc::SECBIT_NOROOT
    | libc::SECBIT_NOROOT_LOCKED
    | libc::SECBIT_NO_SETUID_FIXUP
    | libc::SECBIT_NO_SETUID_FIXUP_LOCKED
    | libc::SECBIT_KEEP_CAPS_LOCKED
    | libc::SECBIT_NO_CAP_AMBIENT_RAISE
    | libc::SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit capability sets, two `CapData` elements.
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Capability numbers are below 64 for as long as the sets are 64-bit.
const MAX_CAPABILITIES: libc::c_ulong = 64;

#[derive(Debug, thiserror::Error)]
pub enum HardenError {
    #[error("prctl({op}): {source}")]
    Prctl {
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("capget: {0}")]
    Capget(#[source] io::Error),
    #[error("capset: {0}")]
    Capset(#[source] io::Error),
    #[error("capabilities remain after dropping them (effective, permitted, inheritable: {effective:#x}, {permitted:#x}, {inheritable:#x})")]
    CapabilitiesRemain {
        effective: u64,
        permitted: u64,
        inheritable: u64,
    },
    #[error("invalid signal number {0}")]
    InvalidSignal(i32),
}

/// `prctl(PR_SET_NO_NEW_PRIVS, 1)`: `execve` can no longer grant privileges (setuid/setgid
/// bits, file capabilities), and seccomp filters can be installed without `CAP_SYS_ADMIN`.
/// Irreversible and inherited; setting it again is a no-op.
pub fn no_new_privs() -> Result<(), HardenError> {
    prctl("PR_SET_NO_NEW_PRIVS", libc::PR_SET_NO_NEW_PRIVS, 1, 0).map(drop)
}

/// Drops every capability from every set and locks the securebits that keep them dropped.
/// Requires `CAP_SETPCAP` in the effective set (the command's process has a full set in its
/// user namespace). See the module docs for the order.
pub fn drop_capabilities() -> Result<(), HardenError> {
    // 1. securebits: needs CAP_SETPCAP.
    let current = prctl("PR_GET_SECUREBITS", libc::PR_GET_SECUREBITS, 0, 0)?;
    let wanted = (current | SECUREBITS) & !libc::SECBIT_KEEP_CAPS;
    if wanted != current {
        prctl(
            "PR_SET_SECUREBITS",
            libc::PR_SET_SECUREBITS,
            wanted as libc::c_ulong,
            0,
        )?;
    }

    // 2. bounding set: needs CAP_SETPCAP.
    // Dropping one that is not in the set is a no-op, so no read first (one call per
    // capability instead of two).
    for cap in 0..MAX_CAPABILITIES {
        match prctl("PR_CAPBSET_DROP", libc::PR_CAPBSET_DROP, cap, 0) {
            Ok(_) => {}
            // Past the last capability the kernel knows.
            Err(HardenError::Prctl { source, .. })
                if source.raw_os_error() == Some(libc::EINVAL) =>
            {
                break
            }
            Err(e) => return Err(e),
        }
    }

    // 3. ambient set.
    match prctl(
        "PR_CAP_AMBIENT_CLEAR_ALL",
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
        0,
    ) {
        Err(HardenError::Prctl { source, .. }) if source.raw_os_error() == Some(libc::EINVAL) => {}
        other => {
            other?;
        }
    }

    // 4. effective, permitted, inheritable.
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let empty = [CapData::default(); 2];
    // SAFETY: `header` and `empty` are valid, properly laid out (`repr(C)`) version-3 capset
    // arguments; the kernel only reads `empty` and may write `header.version`.
    if unsafe { libc::syscall(libc::SYS_capset, &mut header, empty.as_ptr()) } != 0 {
        return Err(HardenError::Capset(io::Error::last_os_error()));
    }

    // 5. check.
    let (effective, permitted, inheritable) = capabilities()?;
    if effective | permitted | inheritable != 0 {
        return Err(HardenError::CapabilitiesRemain {
            effective,
            permitted,
            inheritable,
        });
    }
    Ok(())
}

/// `prctl(PR_SET_DUMPABLE)`: whether the process can be core-dumped and ptrace-attached by
/// processes of the same uid, and whether its `/proc/PID` files belong to its uid (rather than
/// root). Reset to the default on `execve` of a setuid program, otherwise kept across `execve`.
pub fn set_dumpable(on: bool) -> Result<(), HardenError> {
    prctl(
        "PR_SET_DUMPABLE",
        libc::PR_SET_DUMPABLE,
        libc::c_ulong::from(on),
        0,
    )
    .map(drop)
}

/// `prctl(PR_SET_PDEATHSIG, sig)`: the signal this process gets when the thread that forked it
/// dies (0 clears it). Kept across `execve` (of a non-setuid program), cleared by `fork`.
/// A caller should check `getppid()` afterwards: the parent may have died already.
pub fn parent_death_signal(sig: i32) -> Result<(), HardenError> {
    let arg = libc::c_ulong::try_from(sig).map_err(|_| HardenError::InvalidSignal(sig))?;
    match prctl("PR_SET_PDEATHSIG", libc::PR_SET_PDEATHSIG, arg, 0) {
        Err(HardenError::Prctl { source, .. }) if source.raw_os_error() == Some(libc::EINVAL) => {
            Err(HardenError::InvalidSignal(sig))
        }
        other => other.map(drop),
    }
}

/// The calling thread's (effective, permitted, inheritable) capability sets.
pub fn capabilities() -> Result<(u64, u64, u64), HardenError> {
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: `header` and `data` are valid, properly laid out version-3 capget arguments with
    // room for the two elements the kernel writes.
    if unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) } != 0 {
        return Err(HardenError::Capget(io::Error::last_os_error()));
    }
    let join = |lo: u32, hi: u32| u64::from(lo) | (u64::from(hi) << 32);
    Ok((
        join(data[0].effective, data[1].effective),
        join(data[0].permitted, data[1].permitted),
        join(data[0].inheritable, data[1].inheritable),
    ))
}

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `prctl(option, arg2, arg3, 0, 0)`, returning its non-negative result.
fn prctl(
    op: &'static str,
    option: libc::c_int,
    arg2: libc::c_ulong,
    arg3: libc::c_ulong,
) -> Result<libc::c_int, HardenError> {
    let zero: libc::c_ulong = 0;
    // SAFETY: every option used in this module takes integer arguments only; unused ones are
    // passed as zero, as the kernel requires for several options.
    let r = unsafe { libc::prctl(option, arg2, arg3, zero, zero) };
    if r < 0 {
        Err(HardenError::Prctl {
            op,
            source: io::Error::last_os_error(),
        })
    } else {
        Ok(r)
    }
}

#[cfg(test)]
#[path = "harden_tests.rs"]
mod tests;

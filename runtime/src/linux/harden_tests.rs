//! Hardening is irreversible, so everything is applied in forked children, which report raw
//! values and `/proc/self/status` back through a pipe. The children only make raw libc calls
//! (the test binary is multi-threaded); everything they need is prepared before the fork.

use super::*;
use crate::linux::child_probe::res;
use crate::linux::{landlock, seccomp};
use std::ffi::{CStr, CString};
use std::mem::size_of;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;

const EPERM: i64 = libc::EPERM as i64;
const HEADER: usize = 8;

fn ok<T, E>(r: Result<T, E>) -> i64 {
    i64::from(r.is_ok())
}

/// Writes all of `buf` to `fd` (async-signal-safe).
fn write_all(fd: libc::c_int, mut buf: &[u8]) {
    while !buf.is_empty() {
        // SAFETY: `buf` is a valid readable slice.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n <= 0 {
            return;
        }
        buf = &buf[n as usize..];
    }
}

/// Copies the file at `path` to `fd` through a stack buffer (async-signal-safe).
fn copy_file(path: &CStr, fd: libc::c_int) {
    // SAFETY: `path` is NUL-terminated; the buffer is owned by this frame.
    unsafe {
        let src = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if src < 0 {
            return;
        }
        let mut buf = [0u8; 1024];
        loop {
            let n = libc::read(src, buf.as_mut_ptr().cast(), buf.len());
            if n <= 0 {
                break;
            }
            write_all(fd, &buf[..n as usize]);
        }
        libc::close(src);
    }
}

/// Sends a fixed header of values, then `/proc/self/status`.
fn report(fd: libc::c_int, header: &[i64; HEADER]) {
    // SAFETY: viewing an `[i64; HEADER]` as its bytes.
    let bytes = unsafe {
        std::slice::from_raw_parts(header.as_ptr().cast::<u8>(), size_of::<[i64; HEADER]>())
    };
    write_all(fd, bytes);
    copy_file(c"/proc/self/status", fd);
}

/// Forks; the child runs `body` with the pipe's write end (async-signal-safe calls only) and
/// exits with what it returns. Returns the exit code and everything written to the pipe.
fn run_child(body: impl FnOnce(libc::c_int) -> i32) -> (i32, Vec<u8>) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let [rfd, wfd] = fds;
    // SAFETY: the child only makes raw system calls and leaves with `_exit` (or `execve`).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(wfd))).unwrap_or(101);
        // SAFETY: leaving the forked child without running the harness's destructors.
        unsafe { libc::_exit(code) };
    }
    // SAFETY: `wfd` is ours; the child has its own copy.
    unsafe { libc::close(wfd) };
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: reading into a buffer owned by this frame.
        let n = unsafe { libc::read(rfd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        out.extend_from_slice(&buf[..n as usize]);
    }
    let mut status = 0;
    // SAFETY: `rfd` is ours; `pid` is our child and `status` a valid out-pointer.
    unsafe {
        libc::close(rfd);
        assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
    }
    assert!(libc::WIFEXITED(status), "child status {status:#x}");
    (libc::WEXITSTATUS(status), out)
}

/// Runs `body` in a child that [`report`]s; returns the header and the status text.
fn run_and_report(body: impl FnOnce(&mut [i64; HEADER])) -> ([i64; HEADER], String) {
    let (code, out) = run_child(|fd| {
        let mut header = [0i64; HEADER];
        body(&mut header);
        report(fd, &header);
        0
    });
    assert_eq!(code, 0);
    let size = size_of::<[i64; HEADER]>();
    assert!(out.len() > size, "short report");
    let mut header = [0i64; HEADER];
    for (i, chunk) in out[..size].chunks_exact(8).enumerate() {
        header[i] = i64::from_ne_bytes(chunk.try_into().unwrap());
    }
    (header, String::from_utf8_lossy(&out[size..]).into_owned())
}

fn field<'a>(status: &'a str, name: &str) -> &'a str {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':')))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {name} in /proc/self/status:\n{status}"))
}

fn assert_no_capabilities(status: &str) {
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(field(status, set), "0000000000000000", "{set}");
    }
}

#[test]
fn drop_capabilities_empties_every_set_and_locks_securebits() {
    let (h, status) = run_and_report(|h| {
        h[0] = ok(drop_capabilities());
        h[1] = ok(no_new_privs());
        h[2] = ok(no_new_privs());
        // SAFETY: integer-only prctl and setuid calls in a short-lived child.
        unsafe {
            h[3] = res(libc::prctl(libc::PR_GET_SECUREBITS, 0, 0, 0, 0).into());
            h[4] = res(libc::setuid(1).into());
            h[5] = res(libc::prctl(libc::PR_SET_SECUREBITS, 0 as libc::c_ulong, 0, 0, 0).into());
            h[6] = res(libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_RAISE as libc::c_ulong,
                21 as libc::c_ulong, // CAP_SYS_ADMIN
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            )
            .into());
        }
        h[7] = match capabilities() {
            Ok((e, p, i)) => i64::from(e | p | i == 0),
            Err(_) => -1,
        };
    });
    assert_eq!(h[0], 1, "drop_capabilities");
    assert_eq!(h[1], 1, "no_new_privs");
    assert_eq!(h[2], 1, "no_new_privs again");
    let bits = h[3] as libc::c_int;
    assert_eq!(bits & SECUREBITS, SECUREBITS, "securebits {bits:#x}");
    assert_eq!(bits & libc::SECBIT_KEEP_CAPS, 0, "securebits {bits:#x}");
    assert_eq!(h[4], -EPERM, "setuid(1) without CAP_SETUID");
    assert_eq!(h[5], -EPERM, "clearing locked securebits");
    assert_eq!(h[6], -EPERM, "raising an ambient capability");
    assert_eq!(h[7], 1, "capget shows nothing");
    assert_no_capabilities(&status);
    assert_eq!(field(&status, "NoNewPrivs"), "1");
    assert_eq!(field(&status, "Seccomp"), "0");
}

#[test]
fn the_documented_sequence_applies_everything() {
    let writable = tempfile::tempdir().unwrap();
    let prepared = landlock::prepare(&landlock::LandlockPlan {
        writable: vec![writable.path().to_path_buf()],
        devices: landlock::LandlockPlan::default_devices(),
        scope_abstract_unix: true,
        scope_signals: true,
        read_hidden: Vec::new(),
    })
    .unwrap();
    let prog = seccomp::build(&seccomp::SeccompOptions::default()).unwrap();
    let (h, status) = run_and_report(|h| {
        h[0] = i64::from(matches!(
            prepared.enforce(),
            Ok(landlock::LandlockStatus::Enforced { .. })
        ));
        h[1] = ok(drop_capabilities());
        h[2] = ok(no_new_privs());
        h[3] = ok(seccomp::install(&prog));
        // SAFETY: an integer-only system call the filter denies.
        h[4] = res(unsafe { libc::syscall(libc::SYS_ptrace, libc::PTRACE_TRACEME, 0, 0, 0) });
    });
    assert_eq!(
        &h[..4],
        &[1, 1, 1, 1],
        "landlock, caps, no_new_privs, seccomp"
    );
    assert_eq!(h[4], -EPERM, "ptrace under the filter");
    assert_no_capabilities(&status);
    assert_eq!(field(&status, "NoNewPrivs"), "1");
    assert_eq!(field(&status, "Seccomp"), "2");
    assert_eq!(field(&status, "Seccomp_filters"), "1");
}

#[test]
fn dumpable_and_parent_death_signal() {
    let (h, _) = run_and_report(|h| {
        let mut sig: libc::c_int = -1;
        // SAFETY: integer-only prctl calls, and PR_GET_PDEATHSIG writing to a local int.
        unsafe {
            h[0] = ok(set_dumpable(false));
            h[1] = res(libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0).into());
            h[2] = ok(set_dumpable(true));
            h[3] = res(libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0).into());
            h[4] = ok(parent_death_signal(libc::SIGKILL));
            libc::prctl(
                libc::PR_GET_PDEATHSIG,
                &mut sig as *mut libc::c_int,
                0,
                0,
                0,
            );
            h[5] = i64::from(sig);
        }
        h[6] = i64::from(
            matches!(parent_death_signal(-1), Err(HardenError::InvalidSignal(-1)))
                && matches!(
                    parent_death_signal(1000),
                    Err(HardenError::InvalidSignal(1000))
                ),
        );
        h[7] = ok(parent_death_signal(0));
    });
    assert_eq!(
        &h[..4],
        &[1, 0, 1, 1],
        "set_dumpable(false), get, set_dumpable(true), get"
    );
    assert_eq!(h[4], 1, "parent_death_signal(SIGKILL)");
    assert_eq!(h[5], i64::from(libc::SIGKILL), "PR_GET_PDEATHSIG");
    assert_eq!(h[6], 1, "invalid signals are refused");
    assert_eq!(h[7], 1, "parent_death_signal(0)");
}

/// As uid 65534, executes a setuid-root copy of `id -u` after [`drop_capabilities`], with or
/// without [`no_new_privs`]; returns what it printed.
fn exec_setuid_id(id: &CStr, with_no_new_privs: bool) -> String {
    const NOBODY: libc::uid_t = 65534;
    let arg0 = c"id";
    let arg1 = c"-u";
    let argv = [arg0.as_ptr(), arg1.as_ptr(), std::ptr::null()];
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    let (code, out) = run_child(|fd| {
        // SAFETY: raw credential and capability system calls on locals, then execve with
        // NUL-terminated argument and environment arrays built before the fork.
        unsafe {
            // Become nobody but keep the permitted set, so the capability drop can still run.
            if libc::prctl(libc::PR_SET_KEEPCAPS, 1 as libc::c_ulong, 0, 0, 0) != 0
                || libc::setgroups(0, std::ptr::null()) != 0
                || libc::setresgid(NOBODY, NOBODY, NOBODY) != 0
                || libc::setresuid(NOBODY, NOBODY, NOBODY) != 0
            {
                return 10;
            }
            let Ok((_, permitted, _)) = capabilities() else {
                return 11;
            };
            let mut header = CapHeader {
                version: LINUX_CAPABILITY_VERSION_3,
                pid: 0,
            };
            let data = [
                CapData {
                    effective: permitted as u32,
                    permitted: permitted as u32,
                    inheritable: 0,
                },
                CapData {
                    effective: (permitted >> 32) as u32,
                    permitted: (permitted >> 32) as u32,
                    inheritable: 0,
                },
            ];
            if libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) != 0 {
                return 12;
            }
            if drop_capabilities().is_err() {
                return 13;
            }
            if with_no_new_privs && no_new_privs().is_err() {
                return 14;
            }
            if libc::dup2(fd, 1) != 1 {
                return 15;
            }
            // ETXTBSY: another test's fork, made while the copy was open for writing, can
            // hold that descriptor for a moment (the classic copy-then-exec race of
            // multi-threaded test binaries); try again shortly.
            for _ in 0..100 {
                libc::execve(id.as_ptr(), argv.as_ptr(), envp.as_ptr());
                if *libc::__errno_location() != libc::ETXTBSY {
                    break;
                }
                libc::usleep(10_000);
            }
            127
        }
    });
    assert_eq!(code, 0, "child failed (exit code {code})");
    String::from_utf8_lossy(&out).trim().to_string()
}

#[test]
fn a_setuid_binary_gains_nothing_under_no_new_privs() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but the tests are not running as root"
        );
        eprintln!("skipped: needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let id = dir.path().join("id");
    std::fs::copy("/usr/bin/id", &id).unwrap();
    std::fs::set_permissions(&id, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let id = CString::new(id.as_os_str().as_bytes()).unwrap();

    // Control: without no_new_privs the setuid bit works (unless the filesystem is nosuid or
    // the test does not run as root, in which case there is nothing to show).
    let control = exec_setuid_id(&id, false);
    if control != "0" {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but a setuid-root binary did not run as root (nosuid /tmp?)"
        );
        eprintln!("skipped: a setuid-root binary did not run as root here (euid {control})");
        return;
    }
    assert_eq!(exec_setuid_id(&id, true), "65534");
}

//! Landlock is enforced for real in forked children (it cannot be undone in the test process).
//! Rulesets are prepared in the parent; the children only make raw libc calls.

use super::*;
use crate::linux::child_probe::{fork_probe, res};
use std::ffi::CString;
use std::mem::size_of;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;

const EACCES: i64 = libc::EACCES as i64;
const EPERM: i64 = libc::EPERM as i64;
const EXDEV: i64 = libc::EXDEV as i64;

const ENFORCED: i64 = 1;
const PARTIAL: i64 = 2;
const NOT_ENFORCED: i64 = 3;

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// Forks; the child runs `probe` (async-signal-safe calls only) and sends back the `N` values
/// it recorded.
fn in_child<const N: usize>(probe: impl FnOnce(&mut [i64; N])) -> [i64; N] {
    fork_probe(|out| {
        probe(out);
        0
    })
    .expect("the child was killed by a signal")
}

fn status_code(s: Result<LandlockStatus, LandlockError>) -> i64 {
    match s {
        Ok(LandlockStatus::Enforced { .. }) => ENFORCED,
        Ok(LandlockStatus::PartiallyEnforced { .. }) => PARTIAL,
        Ok(LandlockStatus::NotEnforced) => NOT_ENFORCED,
        Err(_) => -1,
    }
}

#[test]
fn abi_version_is_known_on_this_machine() {
    let abi = abi_version();
    assert!(matches!(abi, Some(v) if v >= 1), "{abi:?}");
}

#[test]
fn writes_are_confined_to_the_writable_paths() {
    let writable = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let existing = outside.path().join("existing");
    std::fs::write(&existing, b"hello").unwrap();
    let wfile = writable.path().join("file");
    std::fs::write(&wfile, b"").unwrap();

    let new_inside = cpath(&writable.path().join("new"));
    let sub_inside = cpath(&writable.path().join("sub"));
    let new_outside = cpath(&outside.path().join("new"));
    let moved_outside = cpath(&outside.path().join("moved"));
    let existing_c = cpath(&existing);
    let wfile_c = cpath(&wfile);
    let outside_dir = cpath(outside.path());
    let devnull = c"/dev/null";

    let prepared = prepare(&LandlockPlan {
        writable: vec![writable.path().to_path_buf()],
        devices: LandlockPlan::default_devices(),
        scope_abstract_unix: false,
        scope_signals: false,
        read_hidden: Vec::new(),
    })
    .unwrap();
    let got = in_child::<12>(|out| {
        out[0] = status_code(prepared.enforce());
        let create = libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC;
        // SAFETY: raw system calls on NUL-terminated paths prepared before the fork and on
        // buffers owned by this child.
        unsafe {
            let fd = libc::open(new_inside.as_ptr(), create, 0o644);
            out[1] = res(fd.into());
            out[2] = res(libc::write(fd, b"x".as_ptr().cast(), 1) as i64);
            out[3] = res(libc::mkdir(sub_inside.as_ptr(), 0o755).into());
            out[4] = res(libc::open(new_outside.as_ptr(), create, 0o644).into()).min(0);
            let fd = libc::open(existing_c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            let mut buf = [0u8; 16];
            out[5] = res(libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) as i64);
            let o_dir = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
            out[6] = res(libc::open(outside_dir.as_ptr(), o_dir).into()).min(0);
            out[7] = res(libc::rename(new_inside.as_ptr(), moved_outside.as_ptr()).into());
            out[8] = res(libc::open(existing_c.as_ptr(), libc::O_WRONLY).into()).min(0);
            out[9] = res(libc::unlink(existing_c.as_ptr()).into());
            let fd = libc::open(devnull.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            out[10] = res(libc::write(fd, b"x".as_ptr().cast(), 1) as i64);
            out[11] = res(libc::truncate(wfile_c.as_ptr(), 0).into());
        }
    });
    assert_eq!(got[0], ENFORCED, "status");
    assert!(got[1] >= 0, "create inside: {}", got[1]);
    assert_eq!(got[2], 1, "write inside");
    assert_eq!(got[3], 0, "mkdir inside");
    assert_eq!(got[4], -EACCES, "create outside");
    assert_eq!(got[5], 5, "read outside");
    assert_eq!(got[6], 0, "open a directory outside");
    assert!(
        got[7] == -EXDEV || got[7] == -EACCES,
        "rename to outside: {}",
        got[7]
    );
    assert_eq!(got[8], -EACCES, "open outside for writing");
    assert_eq!(got[9], -EACCES, "unlink outside");
    assert_eq!(got[10], 1, "write /dev/null");
    assert_eq!(got[11], 0, "truncate inside");
    assert!(existing.exists());
    assert!(!outside.path().join("new").exists());
}

#[test]
fn a_writable_regular_file_gets_file_rights_only() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("history");
    std::fs::write(&file, b"old").unwrap();
    let file_c = cpath(&file);
    let sibling = cpath(&dir.path().join("sibling"));

    let prepared = prepare(&LandlockPlan {
        writable: vec![file.clone()],
        ..LandlockPlan::default()
    })
    .unwrap();
    assert!(prepared.skipped().is_empty());
    let got = in_child::<3>(|out| {
        out[0] = status_code(prepared.enforce());
        // SAFETY: raw system calls on paths prepared before the fork.
        unsafe {
            let flags = libc::O_WRONLY | libc::O_TRUNC | libc::O_CLOEXEC;
            out[1] = res(libc::open(file_c.as_ptr(), flags).into()).min(0);
            let create = libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC;
            out[2] = res(libc::open(sibling.as_ptr(), create, 0o644).into()).min(0);
        }
    });
    // Narrowing the rights ourselves keeps the status fully enforced.
    assert_eq!(got[0], ENFORCED, "status");
    assert_eq!(got[1], 0, "open the file for writing");
    assert_eq!(got[2], -EACCES, "create a sibling");
}

#[test]
fn missing_paths_are_skipped_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let below_a_file = dir.path().join("file/below");
    std::fs::write(dir.path().join("file"), b"").unwrap();
    let prepared = prepare(&LandlockPlan {
        writable: vec![dir.path().to_path_buf(), missing.clone()],
        devices: vec![below_a_file.clone()],
        ..LandlockPlan::default()
    })
    .unwrap();
    assert_eq!(prepared.skipped(), &[missing, below_a_file]);
}

#[test]
fn signal_scope_keeps_signals_inside_the_domain() {
    for scoped in [false, true] {
        let prepared = prepare(&LandlockPlan {
            scope_signals: scoped,
            ..LandlockPlan::default()
        })
        .unwrap();
        let got = in_child::<4>(|out| {
            out[0] = status_code(prepared.enforce());
            // SAFETY: signal 0 only checks permission; SIGCHLD is ignored by default, so even
            // if delivered to the test process it does nothing.
            unsafe {
                let parent = libc::getppid();
                out[1] = res(libc::kill(parent, 0).into());
                out[2] = res(libc::kill(parent, libc::SIGCHLD).into());
                out[3] = res(libc::kill(libc::getpid(), 0).into());
            }
        });
        assert_eq!(got[0], ENFORCED, "status (scoped: {scoped})");
        let want = if scoped { -EPERM } else { 0 };
        assert_eq!(got[1], want, "kill(parent, 0) (scoped: {scoped})");
        assert_eq!(got[2], want, "kill(parent, SIGCHLD) (scoped: {scoped})");
        assert_eq!(got[3], 0, "kill(self, 0) (scoped: {scoped})");
    }
}

#[test]
fn abstract_unix_scope_keeps_connections_inside_the_domain() {
    let name = format!("warden-landlock-test-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let _listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();

    // sockaddr_un for the abstract name, built before the fork.
    // SAFETY: sockaddr_un is plain old data; all-zeroes is a valid value.
    let mut sun: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    sun.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (dst, src) in sun.sun_path[1..].iter_mut().zip(name.as_bytes()) {
        *dst = *src as libc::c_char;
    }
    let sun_len = (size_of::<libc::sa_family_t>() + 1 + name.len()) as libc::socklen_t;

    for scoped in [false, true] {
        let prepared = prepare(&LandlockPlan {
            scope_abstract_unix: scoped,
            ..LandlockPlan::default()
        })
        .unwrap();
        let got = in_child::<2>(|out| {
            out[0] = status_code(prepared.enforce());
            // SAFETY: a socket owned by this child and an address built before the fork.
            unsafe {
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
                let addr = (&sun as *const libc::sockaddr_un).cast::<libc::sockaddr>();
                out[1] = res(libc::connect(fd, addr, sun_len).into());
            }
        });
        assert_eq!(got[0], ENFORCED, "status (scoped: {scoped})");
        let want = if scoped { -EPERM } else { 0 };
        assert_eq!(
            got[1], want,
            "connect to an outside abstract socket (scoped: {scoped})"
        );
    }
}

//! Test support: run a probe in a forked child (so process-wide restrictions such as
//! seccomp, Landlock or dropped capabilities do not touch the test runner) and read back the
//! numbers it recorded.

use std::io;
use std::mem::size_of;

/// The current errno as a number.
pub fn errno() -> i64 {
    i64::from(io::Error::last_os_error().raw_os_error().unwrap_or(0))
}

/// A raw syscall result: the value, or `-errno` when it failed.
pub fn res(ret: i64) -> i64 {
    if ret < 0 {
        -errno()
    } else {
        ret
    }
}

/// Forks; the child runs `probe`, which may only make async-signal-safe calls, fills `N`
/// values and returns 0 (or a non-zero code to fail before reporting). Returns the values, or
/// `None` if the child was killed by a signal. Panics if the child failed otherwise.
pub fn fork_probe<const N: usize>(probe: impl FnOnce(&mut [i64; N]) -> i32) -> Option<[i64; N]> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let [rfd, wfd] = fds;
    let len = size_of::<[i64; N]>();
    // SAFETY: the child only makes raw system calls (no allocation, no locks) and leaves with
    // `_exit`, so forking a multi-threaded test binary is sound.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut out = [0i64; N];
            let code = probe(&mut out);
            if code != 0 {
                return code;
            }
            // SAFETY: `out` is `len` readable bytes; `wfd` is the pipe's write end.
            let written = unsafe { libc::write(wfd, out.as_ptr().cast(), len) };
            if written == len as isize {
                0
            } else {
                4
            }
        }))
        .unwrap_or(5);
        // SAFETY: leaving the forked child without running the harness's destructors.
        unsafe { libc::_exit(code) };
    }
    // SAFETY: `wfd` is ours; the child has its own copy.
    unsafe { libc::close(wfd) };
    let mut out = [0i64; N];
    let mut got = 0usize;
    while got < len {
        // SAFETY: reading into the unfilled tail of `out`.
        let n = unsafe {
            libc::read(
                rfd,
                out.as_mut_ptr().cast::<u8>().add(got).cast(),
                len - got,
            )
        };
        if n <= 0 {
            break;
        }
        got += n as usize;
    }
    let mut status = 0;
    // SAFETY: `rfd` is ours; `pid` is our child and `status` a valid out-pointer.
    unsafe {
        libc::close(rfd);
        assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
    }
    if libc::WIFSIGNALED(status) {
        return None;
    }
    assert!(libc::WIFEXITED(status), "child status {status:#x}");
    assert_eq!(
        libc::WEXITSTATUS(status),
        0,
        "child failed before probing (exit code)"
    );
    assert_eq!(got, len, "short report from the child");
    Some(out)
}

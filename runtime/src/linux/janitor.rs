//! Cleanup however the supervisor ends, SIGKILL included.
//!
//! The janitor starts as the supervisor's very first step — before anything exists that would
//! need cleaning — and then only reads a pipe that only the supervisor can write to. The supervisor reports each thing it creates on the
//! host (the run directory, the cgroup leaves, the placeholders) right after creating it. On
//! EOF — the supervisor exited, normally or not — the janitor kills whatever is left in the
//! reported cgroups, removes them, the placeholders that are still empty (and held by no other
//! sandbox, see [`super::placeholder`]) and the run directory,
//! and exits. After a normal run the supervisor has removed all of it already and says so
//! (the done record): the janitor exits without looking.
//!
//! Two stages (see [`Janitor::start`]): a `CLONE_VM` child that shares the supervisor's
//! memory and only collects the records with raw system calls — cheaper than a fork (no page
//! tables copied, no copy-on-write faults in the supervisor; measured −0.15 ms per run, and
//! −0.4 ms with the `run` parser, docs/benchmarks.md) — and, only when there is something to
//! clean, an exec of `warden __janitor` that does the cleaning in ordinary Rust.

use super::plan::Placeholder;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// Record tags of the pipe protocol: one tag byte, the path, a NUL (paths cannot contain NUL).
const RUN_DIR: u8 = b'R';
const CGROUP: u8 = b'C';
const PLACEHOLDER_DIR: u8 = b'D';
const PLACEHOLDER_FILE: u8 = b'F';
const SOCKET: u8 = b'S';
/// A protected file missing when the sandbox started ([`super::plan::Plan::missing_protected`]):
/// one there after a run the supervisor could not finish (SIGKILL) is moved aside.
const MISSING_PROTECTED: u8 = b'M';
/// Everything reported was removed by the supervisor: nothing to sweep.
const DONE: u8 = b'X';

/// The supervisor's end: reports what to clean up. Dropping it (or the supervisor's death)
/// closes the pipe and lets the janitor run.
pub struct Janitor {
    pipe: std::fs::File,
    /// The inotify instance pid 1 watches the protected entries with ([`Janitor::watch_fd`]).
    watch: Option<std::os::fd::OwnedFd>,
}

impl Janitor {
    /// Starts the janitor, in two stages. The first is a process that shares this one's
    /// memory (`clone` with `CLONE_VM`, not a fork: no copy of the page tables, no
    /// copy-on-write faults in the supervisor afterwards, and the supervisor's exit leaves the
    /// address space's teardown to the janitor) and runs a loop of raw system calls on its
    /// own stack, touching nothing of the supervisor's but a buffer set aside for it: it
    /// collects the records until EOF. After a clean run (the [`Janitor::done`] record) it
    /// just exits; otherwise it execs `warden __janitor` (/proc/self/exe) with the records,
    /// which cleans up ([`exec_main`]).
    ///
    /// # Safety
    /// Call it before any other thread exists (as `warden run` does first thing): the child
    /// starts with this thread's signal dispositions and descriptor table.
    pub unsafe fn start() -> std::io::Result<Janitor> {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        // The inotify instance of pid 1's watches, made here so that the janitor holds a
        // reference too: the last close of an instance with watches waits for an SRCU grace
        // period (fsnotify_destroy_group: 6–16 ms measured here), and it must not be pid 1's
        // on its way out — the caller would wait for it on every run in a git repository.
        // The janitor's copy goes when it exits, after warden.
        // SAFETY: inotify_init1 takes flags only; a new descriptor is returned or -1.
        let watch = match unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) } {
            fd if fd >= 0 => {
                use std::os::fd::FromRawFd;
                // SAFETY: a fresh descriptor owned by nothing else.
                Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
            }
            _ => None,
        };
        let null = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")?;
        // The child's stack and record buffer: never unmapped (the child may outlive this
        // process's use of them), never touched by the supervisor.
        let stack = map(STACK_BYTES)?;
        let buf = map(BUF_BYTES)?;
        let args = Box::leak(Box::new(ChildArgs {
            read_fd: read.as_raw_fd(),
            null_fd: std::os::fd::AsRawFd::as_raw_fd(&null),
            keep_fd: watch.as_ref().map_or(-1, |w| w.as_raw_fd()),
            buf: buf.cast(),
            buf_len: BUF_BYTES,
            exe: c"/proc/self/exe".as_ptr(),
            exe_path: std::env::current_exe()
                .ok()
                .and_then(|p| std::ffi::CString::new(p.into_os_string().into_vec()).ok())
                .map_or(std::ptr::null(), |c| c.into_raw().cast_const()),
            argv: [c"warden".as_ptr(), c"__janitor".as_ptr(), std::ptr::null()],
            envp: [std::ptr::null()],
            memfd_name: c"warden-janitor".as_ptr(),
        }));
        // SAFETY: `stage_one` only makes raw system calls on `args` (leaked, so valid for the
        // child's life), its stack is the top of a fresh mapping, and without CLONE_FILES,
        // CLONE_SIGHAND and CLONE_THREAD the child gets its own descriptor table, signal
        // handlers and process; CLONE_VM shares the memory it does not write but for `buf`.
        let pid = unsafe {
            libc::clone(
                stage_one,
                stack.cast::<u8>().add(STACK_BYTES).cast(),
                libc::CLONE_VM | libc::SIGCHLD,
                std::ptr::from_mut(args).cast(),
            )
        };
        if pid < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // The read end and /dev/null are the child's now (dup'ed in its own table).
        drop(read);
        drop(null);
        Ok(Janitor {
            pipe: std::fs::File::from(write),
            watch,
        })
    }

    /// The inotify instance (close-on-exec) pid 1 inherits for its watches, shared with the
    /// janitor so that pid 1's exit is not the last close; `None` if none could be made.
    pub fn watch_fd(&self) -> Option<std::os::fd::RawFd> {
        self.watch.as_ref().map(|w| w.as_raw_fd())
    }

    /// Reports the run directory (removed recursively, if it is named `warden-*`).
    pub fn run_dir(&mut self, path: &Path) {
        self.send(RUN_DIR, path);
    }

    /// Reports a cgroup leaf (v2 or v1), to be emptied and removed.
    pub fn cgroup(&mut self, path: &Path) {
        self.send(CGROUP, path);
    }

    /// Reports placeholders this run may create, removed if still empty (and marked and
    /// unheld), in one write: each write wakes the janitor.
    /// The protected files missing at the start (`missing`) go in the same write: pid 1
    /// moves one the command makes aside, and the supervisor after the run, but when the
    /// supervisor was killed only the janitor is left to (red-team round 22b: a planted
    /// `.mcp.json` outlived a SIGKILL of warden and later runs took it for the user's).
    pub fn placeholders(&mut self, list: &[Placeholder], missing: &[PathBuf]) {
        let mut records = Vec::new();
        for path in missing {
            records.extend(record(MISSING_PROTECTED, path));
        }
        for ph in list {
            let tag = if ph.dir {
                PLACEHOLDER_DIR
            } else {
                PLACEHOLDER_FILE
            };
            records.extend(record(tag, &ph.path));
        }
        self.write(&records);
    }

    /// Reports a unix socket file this run binds (the approvals channel), removed if it is
    /// still a socket.
    pub fn socket(&mut self, path: &Path) {
        self.send(SOCKET, path);
    }

    /// Says that the supervisor removed everything it reported (a normal end), so the janitor
    /// exits without sweeping — work that would otherwise compete for the CPU with the
    /// caller as warden exits.
    pub fn done(mut self) {
        self.write(&[DONE, 0]);
    }

    fn send(&mut self, tag: u8, path: &Path) {
        self.write(&record(tag, path));
    }

    fn write(&mut self, bytes: &[u8]) {
        // A failed write (the janitor died) cannot be helped here; the supervisor still
        // cleans up after a normal exit.
        let _ = self.pipe.write_all(bytes);
    }
}

/// One record: the tag, the path, a NUL.
fn record(tag: u8, path: &Path) -> Vec<u8> {
    let mut record = Vec::with_capacity(path.as_os_str().len() + 2);
    record.push(tag);
    record.extend_from_slice(path.as_os_str().as_bytes());
    record.push(0);
    record
}

/// What the janitor was told, parsed from the pipe's bytes; a record cut short by the
/// supervisor's death is dropped.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Records {
    pub run_dirs: Vec<PathBuf>,
    pub cgroups: Vec<PathBuf>,
    pub placeholders: Vec<Placeholder>,
    pub sockets: Vec<PathBuf>,
    pub missing_protected: Vec<PathBuf>,
    /// The supervisor said it removed everything.
    pub done: bool,
}

pub(crate) fn parse(bytes: &[u8]) -> Records {
    let mut out = Records::default();
    let mut records: Vec<&[u8]> = bytes.split(|b| *b == 0).collect();
    // The part after the last NUL is incomplete (or empty).
    records.pop();
    for rec in records {
        let Some((&tag, path)) = rec.split_first() else {
            continue;
        };
        if tag == DONE && path.is_empty() {
            out.done = true;
            continue;
        }
        let path = PathBuf::from(std::ffi::OsStr::from_bytes(path));
        if !path.is_absolute() {
            continue;
        }
        match tag {
            RUN_DIR => out.run_dirs.push(path),
            CGROUP => out.cgroups.push(path),
            PLACEHOLDER_DIR => out.placeholders.push(Placeholder { path, dir: true }),
            PLACEHOLDER_FILE => out.placeholders.push(Placeholder { path, dir: false }),
            SOCKET => out.sockets.push(path),
            MISSING_PROTECTED => out.missing_protected.push(path),
            _ => {}
        }
    }
    out
}

/// The first stage's stack, and its record buffer (records are one path each: a run reports
/// a few dozen; a fuller buffer hands over early, the rest following on the pipe).
const STACK_BYTES: usize = 64 * 1024;
const BUF_BYTES: usize = 1 << 20;

/// An anonymous private mapping of `len` bytes, reserved lazily.
fn map(len: usize) -> std::io::Result<*mut libc::c_void> {
    // SAFETY: a fresh anonymous mapping; nothing else refers to that range.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(p)
}

/// What the first stage needs, prepared before the clone.
#[repr(C)]
struct ChildArgs {
    read_fd: i32,
    null_fd: i32,
    /// Kept open as descriptor 3 (close-on-exec) until the janitor exits, or -1.
    keep_fd: i32,
    buf: *mut u8,
    buf_len: usize,
    exe: *const libc::c_char,
    /// The binary's path at start, or null.
    exe_path: *const libc::c_char,
    argv: [*const libc::c_char; 3],
    envp: [*const libc::c_char; 1],
    memfd_name: *const libc::c_char,
}

use super::rawsys::syscall6 as sys;

/// The janitor's first stage (see [`Janitor::start`]). Raw system calls only: it runs in
/// the supervisor's memory, with the supervisor's thread pointer, so neither libc (errno,
/// locks) nor the allocator may be used, and nothing here may panic.
extern "C" fn stage_one(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the leaked ChildArgs of `Janitor::start`; every call below passes
    // descriptors of this process and pointers into that struct, its static strings, its
    // buffer or this stack.
    unsafe {
        let a = &*(arg as *const ChildArgs);
        // Only the pipe (as stdin) and /dev/null stay open: the janitor must not hold the
        // caller's terminal or pipes (a caller reading warden's output to EOF would wait
        // for it). Moved above 2 first, so no dup onto itself.
        let fd = |v: isize| v as usize;
        let r = sys(
            libc::SYS_fcntl,
            [a.read_fd as usize, libc::F_DUPFD as usize, 3, 0, 0, 0],
        );
        let n = sys(
            libc::SYS_fcntl,
            [a.null_fd as usize, libc::F_DUPFD as usize, 3, 0, 0, 0],
        );
        if r < 0 || n < 0 {
            sys(libc::SYS_exit_group, [1, 0, 0, 0, 0, 0]);
        }
        let k = if a.keep_fd >= 0 {
            sys(
                libc::SYS_fcntl,
                [
                    a.keep_fd as usize,
                    libc::F_DUPFD_CLOEXEC as usize,
                    3,
                    0,
                    0,
                    0,
                ],
            )
        } else {
            -1
        };
        sys(libc::SYS_dup3, [fd(r), 0, 0, 0, 0, 0]);
        sys(libc::SYS_dup3, [fd(n), 1, 0, 0, 0, 0]);
        sys(libc::SYS_dup3, [fd(n), 2, 0, 0, 0, 0]);
        // pid 1's inotify instance as descriptor 3 (its last close waits for a grace period:
        // here, after warden; replaced by the records' memfd before an exec).
        let mut first_closed = 3usize;
        if k >= 0 {
            if k != 3 {
                sys(
                    libc::SYS_dup3,
                    [fd(k), 3, libc::O_CLOEXEC as usize, 0, 0, 0],
                );
            }
            first_closed = 4;
        }
        sys(
            libc::SYS_close_range,
            [first_closed, u32::MAX as usize, 0, 0, 0, 0],
        );
        // Its own process group: terminal signals (^C) do not reach it; and it ignores the
        // rest of the usual ones.
        sys(libc::SYS_setpgid, [0, 0, 0, 0, 0, 0]);
        let ignore: [usize; 4] = [libc::SIG_IGN, 0, 0, 0];
        for sig in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGPIPE,
        ] {
            sys(
                libc::SYS_rt_sigaction,
                [sig as usize, ignore.as_ptr() as usize, 0, 8, 0, 0],
            );
        }
        // Collect until EOF: the supervisor is gone (or the buffer is full).
        let mut len = 0usize;
        while len < a.buf_len {
            let got = sys(
                libc::SYS_read,
                [0, a.buf.add(len) as usize, a.buf_len - len, 0, 0, 0],
            );
            if got == -(libc::EINTR as isize) {
                continue;
            }
            if got <= 0 {
                break;
            }
            len += got as usize;
        }
        // A clean run ends with the done record: nothing to do.
        if len >= 2
            && *a.buf.add(len - 1) == 0
            && *a.buf.add(len - 2) == DONE
            && (len == 2 || *a.buf.add(len - 3) == 0)
        {
            sys(libc::SYS_exit_group, [0, 0, 0, 0, 0, 0]);
        }
        // Otherwise the records go to `warden __janitor` on descriptor 3.
        let m = sys(
            libc::SYS_memfd_create,
            [a.memfd_name as usize, 0, 0, 0, 0, 0],
        );
        if m >= 0 {
            let mut off = 0usize;
            while off < len {
                let w = sys(
                    libc::SYS_write,
                    [fd(m), a.buf.add(off) as usize, len - off, 0, 0, 0],
                );
                if w == -(libc::EINTR as isize) {
                    continue;
                }
                if w <= 0 {
                    break;
                }
                off += w as usize;
            }
            sys(
                libc::SYS_lseek,
                [fd(m), 0, libc::SEEK_SET as usize, 0, 0, 0],
            );
            if m != 3 {
                sys(libc::SYS_dup3, [fd(m), 3, 0, 0, 0, 0]);
            }
        }
        // /proc/self/exe, else the path the binary had at start (no /proc mounted).
        for exe in [a.exe, a.exe_path] {
            if !exe.is_null() {
                sys(
                    libc::SYS_execve,
                    [
                        exe as usize,
                        a.argv.as_ptr() as usize,
                        a.envp.as_ptr() as usize,
                        0,
                        0,
                        0,
                    ],
                );
            }
        }
        sys(libc::SYS_exit_group, [1, 0, 0, 0, 0, 0]);
        1
    }
}

/// `warden __janitor`: the second stage, exec'd by the first when there is something to
/// clean up. Reads the records on descriptor 3 (what the first stage collected) and then on
/// stdin (the pipe, when the first stage handed over before EOF) until EOF, and cleans up.
pub fn exec_main() -> i32 {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let mut bytes = Vec::new();
    // SAFETY: F_GETFD only inspects descriptor 3.
    if unsafe { libc::fcntl(3, libc::F_GETFD) } >= 0 {
        // SAFETY: descriptor 3 is open (checked above) and owned by nothing else here.
        let mut collected = unsafe { std::fs::File::from_raw_fd(3) };
        let _ = collected.read_to_end(&mut bytes);
    }
    let _ = std::io::stdin().read_to_end(&mut bytes);
    let records = parse(&bytes);
    if !records.done {
        clean_up(&records);
    }
    0
}

/// Removes what the records name — only things named like warden creates them, never
/// anything a caller could point it at.
fn clean_up(records: &Records) {
    let is_ours = |p: &Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("warden-"))
    };
    // The v2 leaf first (`cgroup.kill` takes everything down), then the v1 leaves. Each is
    // checked again to be a `warden-*` directory on a cgroup filesystem before anything in it
    // is signalled.
    for cg in records.cgroups.iter().filter(|p| is_ours(p)) {
        let _ = super::cgroup::remove_leftover(cg);
    }
    super::placeholder::sweep(&records.placeholders);
    // The sandbox is gone (its cgroup killed above): a protected file it left is moved.
    super::watch::final_protected_check(&records.missing_protected);
    for sock in &records.sockets {
        remove_socket(sock);
    }
    for dir in records.run_dirs.iter().filter(|p| is_ours(p)) {
        let _ = super::spawn::remove_tree(dir);
    }
}

#[cfg(test)]
#[path = "janitor_tests.rs"]
mod tests;

/// Removes `path` if it is a unix socket (never anything else a path could name).
pub fn remove_socket(path: &Path) {
    use std::os::unix::fs::FileTypeExt;
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
        let _ = std::fs::remove_file(path);
    }
}

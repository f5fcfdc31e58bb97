//! Cleanup however the supervisor ends, SIGKILL included.
//!
//! The janitor is forked from the supervisor as its very first step — before anything exists
//! that would need cleaning, while the process is still small — and then only reads a pipe
//! that only the supervisor can write to. The supervisor reports each thing it creates on the
//! host (the run directory, the cgroup leaves, the placeholders) right after creating it. On
//! EOF — the supervisor exited, normally or not — the janitor kills whatever is left in the
//! reported cgroups, removes them, the placeholders that are still empty (and held by no other
//! sandbox, see [`super::placeholder`]) and the run directory,
//! and exits. After a normal run the supervisor has removed all of it already and the janitor
//! finds nothing to do.
//!
//! A fork, not an exec of warden: an exec costs a second dynamic load and relocation of the
//! binary, and forking before the policy and the plan exist keeps the copy-on-write faults
//! the fork causes in the supervisor few.

use super::plan::Placeholder;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Record tags of the pipe protocol: one tag byte, the path, a NUL (paths cannot contain NUL).
const RUN_DIR: u8 = b'R';
const CGROUP: u8 = b'C';
const PLACEHOLDER_DIR: u8 = b'D';
const PLACEHOLDER_FILE: u8 = b'F';
const SOCKET: u8 = b'S';
/// Everything reported was removed by the supervisor: nothing to sweep.
const DONE: u8 = b'X';

/// The supervisor's end: reports what to clean up. Dropping it (or the supervisor's death)
/// closes the pipe and lets the janitor run.
pub struct Janitor {
    pipe: std::fs::File,
}

impl Janitor {
    /// Forks the janitor.
    ///
    /// # Safety
    /// The calling process must be single-threaded: the child runs ordinary Rust code on its
    /// copy of the process.
    pub unsafe fn start() -> std::io::Result<Janitor> {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let null = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")?;
        // SAFETY: the caller guarantees a single-threaded process.
        let forked = unsafe { super::clone::fork_into(None, 0) }?;
        if forked.is_none() {
            drop(write);
            child(read, null.into())
        }
        Ok(Janitor {
            pipe: std::fs::File::from(write),
        })
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
    pub fn placeholders(&mut self, list: &[Placeholder]) {
        let mut records = Vec::new();
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
            _ => {}
        }
    }
    out
}

/// The janitor process. Never returns.
fn child(read: OwnedFd, null: OwnedFd) -> ! {
    use nix::sys::signal::{signal, SigHandler, Signal};
    // Only the pipe (as stdin) and /dev/null stay open: the janitor must not hold the
    // caller's terminal or pipes (a caller reading warden's output to EOF would wait for it).
    let _ = nix::unistd::dup2_stdin(&read);
    let _ = nix::unistd::dup2_stdout(&null);
    let _ = nix::unistd::dup2_stderr(&null);
    // SAFETY: close_range only closes descriptors; nothing below uses any fd >= 3.
    unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
    // Its own process group: terminal signals (^C) do not reach it.
    let _ = nix::unistd::setpgid(nix::unistd::Pid::from_raw(0), nix::unistd::Pid::from_raw(0));
    for sig in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
        Signal::SIGPIPE,
    ] {
        // SAFETY: setting a signal to SIG_IGN installs no handler code.
        let _ = unsafe { signal(sig, SigHandler::SigIgn) };
    }
    let mut bytes = Vec::new();
    // Returns on EOF: the supervisor is gone.
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes);
    let records = parse(&bytes);
    if !records.done {
        clean_up(&records);
    }
    // SAFETY: _exit ends this process without running exit handlers, which belong to the
    // supervisor whose address space this is a copy of.
    unsafe { libc::_exit(0) }
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
    for sock in &records.sockets {
        remove_socket(sock);
    }
    for dir in records.run_dirs.iter().filter(|p| is_ours(p)) {
        let _ = std::fs::remove_dir_all(dir);
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

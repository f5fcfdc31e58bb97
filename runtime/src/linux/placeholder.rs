//! Placeholders: the protected entries directly in a writable root (agent config directories,
//! `.git/hooks`, a writable home's rc files and `.ssh`) that warden guards whether or not they
//! exist, shared safely by concurrent sandboxes of one project.
//!
//! - A missing one is created empty and *marked* (`user.warden.placeholder` xattr) before it
//!   appears under its name: it is made under a temporary name, marked, locked and renamed with
//!   `RENAME_NOREPLACE`. So an entry carrying the mark is always a warden placeholder, and an
//!   unmarked one is the user's own and is never removed.
//! - Every sandbox holds a shared `flock` on each marked placeholder it protects for as long as
//!   it runs (including ones another sandbox created).
//! - Removal happens only under an exclusive `flock`, only of an entry still marked, still
//!   linked under its name and empty. So the last sandbox out removes it, and never one while
//!   another runs: a directory removed on the host while it is a mount point in another
//!   sandbox's mount namespace silently takes that sandbox's read-only mount with it, which
//!   would let that sandbox create the protected entry after all.
//!
//! Where the filesystem has no user xattrs the placeholder is created unmarked and left in
//! place afterwards (empty): leaving it is safe, removing it could unprotect a concurrent run.
//!
//! - A released placeholder is not removed but *kept* in a pool, a directory only this user
//!   can write in the account's home directory ([`crate::files::placeholder_pool`]), and the
//!   next run that needs a placeholder at the *same path* renames it back into place instead of
//!   creating one: a rename each way instead of allocating an inode and a block and freeing
//!   them (on a journal-less ext4 mounted with `discard`, as on our machines, a `mkdir` walks
//!   every recently freed inode and an `rmdir` waits for a synchronous discard). Same path
//!   only, because of what a pooled entry may carry: a sandbox whose writable root holds the
//!   placeholder below its top level (a parent directory of the project) can write into it and
//!   keep a descriptor to it (red-team: through the pool such a descriptor reached an unrelated
//!   project's `.claude`); back at its own path the entry is reachable by exactly the sandboxes
//!   that could write that path anyway. The entry's name in the pool carries SHA-256 of the
//!   path it was released from, and the mark's value names it (set by warden in the pool, which
//!   every sandbox sees read-only); an entry is taken only if both match, it is this user's and
//!   empty, and it is renamed into the directory opened without following symlinks.

use super::plan::Placeholder;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The extended attribute that marks a warden placeholder.
pub const MARK: &str = "user.warden.placeholder";
/// How long a sandbox waits for a shared lock (another warden holds the exclusive one for the
/// moment it takes to remove an empty entry; anything longer is someone else's lock).
const LOCK_WAIT: Duration = Duration::from_secs(5);
/// Attempts per entry when it keeps appearing and disappearing under us.
const ATTEMPTS: usize = 100;
/// Entries the pool keeps at most; giving one to a full pool first removes an entry kept for
/// another path (or the placeholder is removed instead, if none can be).
const POOL_MAX: usize = 512;

/// The placeholders a running sandbox holds; [`Held::release`] when it has ended.
#[derive(Debug, Default)]
pub struct Held {
    entries: Vec<Entry>,
    /// Placeholder paths where the user's own entry stood: pid 1 may have reserved one of
    /// them again during the run (the host removed the entry); swept at the end.
    others: Vec<Placeholder>,
    /// Where released placeholders go (opened or created when the first one is released).
    pool_path: Option<PathBuf>,
    pool: Option<Pool>,
}

/// The directory of empty, marked placeholders kept between runs.
#[derive(Debug)]
struct Pool {
    dir: OwnedFd,
    path: PathBuf,
    /// Entries listed when it was opened, not yet tried.
    names: Vec<std::ffi::OsString>,
    /// How many entries it holds (as listed, plus those given back since).
    count: usize,
    /// Directories a rename from the pool could not reach (another filesystem).
    elsewhere: Vec<PathBuf>,
}

/// What taking an entry from the pool for a placeholder path came to.
enum Taken {
    /// Renamed into place, locked shared.
    Placed(OwnedFd),
    /// Something else has the name now.
    Occupied,
    /// Nothing suitable in the pool (or it cannot reach the path): make one.
    Nothing,
}

#[derive(Debug)]
struct Entry {
    path: PathBuf,
    fd: OwnedFd,
}

/// What a candidate path names right now.
enum Found {
    Missing,
    /// A symlink, device, fifo, …, or an entry without the mark: not a placeholder.
    Foreign,
    /// A directory or regular file carrying the mark, opened.
    Marked(OwnedFd),
}

/// Creates the missing entries of `list` and takes a shared lock on every marked one.
/// `record` hears of each path before warden may create something there (for the janitor):
/// first every entry and its first temporary name in one batch (one message to the janitor
/// instead of two per entry; announcing an entry that exists is harmless, the janitor removes
/// only marked, empty, unheld placeholders), then each further temporary name a retry uses.
pub fn hold(
    list: &[Placeholder],
    pool: Option<&Path>,
    record: &mut dyn FnMut(&[Placeholder]),
) -> io::Result<Held> {
    let batch: Vec<Placeholder> = list
        .iter()
        .flat_map(|ph| {
            [
                Placeholder {
                    path: temp_name(&ph.path, 0),
                    dir: ph.dir,
                },
                ph.clone(),
            ]
        })
        .collect();
    record(&batch);
    let mut held = Held {
        entries: Vec::new(),
        others: Vec::new(),
        pool_path: pool.map(Path::to_path_buf),
        pool: pool.and_then(|p| Pool::open(p, false)),
    };
    for ph in list {
        match hold_one(ph, held.pool.as_mut(), record) {
            Ok(Some(fd)) => held.entries.push(Entry {
                path: ph.path.clone(),
                fd,
            }),
            Ok(None) => held.others.push(ph.clone()),
            Err(e) => {
                held.release();
                return Err(io::Error::new(
                    e.kind(),
                    format!("protected placeholder {}: {e}", ph.path.display()),
                ));
            }
        }
    }
    Ok(held)
}

fn hold_one(
    ph: &Placeholder,
    mut pool: Option<&mut Pool>,
    record: &mut dyn FnMut(&[Placeholder]),
) -> io::Result<Option<OwnedFd>> {
    for attempt in 0..ATTEMPTS {
        match find(&ph.path)? {
            Found::Foreign => return Ok(None),
            Found::Marked(fd) => {
                lock(&fd, libc::LOCK_SH, LOCK_WAIT)?;
                // Removed (or replaced) between the open and the lock: look again.
                if still_named(&fd, &ph.path)? {
                    return Ok(Some(fd));
                }
            }
            Found::Missing => {
                match pool.as_deref_mut().map_or(Taken::Nothing, |p| p.take(ph)) {
                    // Checked in place by `take`, through the directory's descriptor.
                    Taken::Placed(fd) => return Ok(Some(fd)),
                    Taken::Occupied => continue,
                    Taken::Nothing => {}
                }
                let temp = Placeholder {
                    path: temp_name(&ph.path, attempt),
                    dir: ph.dir,
                };
                if attempt > 0 {
                    record(std::slice::from_ref(&temp));
                }
                match create(ph, &temp.path) {
                    Ok(fd) => return Ok(fd),
                    // Someone else's appeared first: share it.
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Err(io::Error::other(
        "it kept changing while warden tried to hold it",
    ))
}

/// Makes the placeholder under `temp`, marks and locks it, and renames it into place without
/// replacing anything. `Ok(None)`: no xattrs here, created unmarked at its name (left behind).
///
/// Made and renamed inside the directory opened without following symlinks: the plan's paths
/// are resolved, so a link on the way was swapped in since, by a sandbox that may write an
/// ancestor, to have warden make placeholders in a directory of its choosing (red-team round
/// 23c).
fn create(ph: &Placeholder, temp: &Path) -> io::Result<Option<OwnedFd>> {
    let (parent, name) = parent_of(&ph.path).ok_or_else(|| {
        io::Error::other("its directory cannot be opened without following a symbolic link")
    })?;
    let temp = temp.file_name().unwrap_or_default();
    make_at(&parent, temp, ph.dir)?;
    let fd = match open_made_at(&parent, temp, ph.dir) {
        Ok(fd) => fd,
        Err(e) => {
            remove_at(&parent, temp, ph.dir);
            return Err(e);
        }
    };
    if let Err(e) = set_mark(&fd) {
        remove_at(&parent, temp, ph.dir);
        drop(fd);
        return match e.raw_os_error() {
            Some(libc::ENOTSUP) | Some(libc::EPERM) | Some(libc::EACCES) => {
                make_at(&parent, name, ph.dir).map(|()| None)
            }
            _ => Err(e),
        };
    }
    if let Err(e) = lock(&fd, libc::LOCK_SH, LOCK_WAIT) {
        remove_at(&parent, temp, ph.dir);
        return Err(e);
    }
    match nix::fcntl::renameat2(
        &parent,
        temp,
        &parent,
        name,
        nix::fcntl::RenameFlags::RENAME_NOREPLACE,
    ) {
        Ok(()) => Ok(Some(fd)),
        Err(e) => {
            remove_at(&parent, temp, ph.dir);
            Err(e.into())
        }
    }
}

fn make_at(parent: &OwnedFd, name: &std::ffi::OsStr, dir: bool) -> io::Result<()> {
    if dir {
        nix::sys::stat::mkdirat(
            parent,
            name,
            nix::sys::stat::Mode::from_bits_truncate(0o777),
        )?;
    } else {
        nix::fcntl::openat(
            parent,
            name,
            nix::fcntl::OFlag::O_WRONLY
                | nix::fcntl::OFlag::O_CREAT
                | nix::fcntl::OFlag::O_EXCL
                | nix::fcntl::OFlag::O_NOFOLLOW
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::from_bits_truncate(0o666),
        )?;
    }
    Ok(())
}

fn open_made_at(parent: &OwnedFd, name: &std::ffi::OsStr, dir: bool) -> io::Result<OwnedFd> {
    let mut flags = nix::fcntl::OFlag::O_RDONLY
        | nix::fcntl::OFlag::O_NOFOLLOW
        | nix::fcntl::OFlag::O_NONBLOCK
        | nix::fcntl::OFlag::O_CLOEXEC;
    if dir {
        flags |= nix::fcntl::OFlag::O_DIRECTORY;
    }
    Ok(nix::fcntl::openat(
        parent,
        name,
        flags,
        nix::sys::stat::Mode::empty(),
    )?)
}

fn remove_at(parent: &OwnedFd, name: &std::ffi::OsStr, dir: bool) {
    let flag = if dir {
        nix::unistd::UnlinkatFlags::RemoveDir
    } else {
        nix::unistd::UnlinkatFlags::NoRemoveDir
    };
    let _ = nix::unistd::unlinkat(parent, name, flag);
}

impl Held {
    /// Drops this sandbox's locks; each marked placeholder nobody else holds any more and that
    /// is still empty is removed — also one the sandbox's pid 1 made in its place when the
    /// host removed the first ([`make_marked`]).
    pub fn release(&mut self) {
        // Marked, empty and unused only: what pid 1 made in place of the user's own entry.
        sweep(&std::mem::take(&mut self.others));
        for entry in self.entries.drain(..).rev() {
            if lock(&entry.fd, libc::LOCK_EX, Duration::ZERO).is_ok() {
                if self.pool.is_none() {
                    self.pool = self.pool_path.take().and_then(|p| Pool::open(&p, true));
                }
                retire(&entry.path, &entry.fd, self.pool.as_mut());
            }
            if !still_named(&entry.fd, &entry.path).unwrap_or(true) {
                drop(entry.fd);
                sweep(std::slice::from_ref(&Placeholder {
                    path: entry.path,
                    dir: false,
                }));
            }
        }
    }
}

/// Whether the entry at `path` (not following a final symlink) carries the placeholder mark.
pub fn is_marked_path(path: &Path) -> bool {
    let (Ok(c), Ok(name)) = (cpath(path), CString::new(MARK)) else {
        return false;
    };
    // SAFETY: a size query (NULL buffer, size 0) on NUL-terminated strings; no memory written.
    unsafe { libc::lgetxattr(c.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) >= 0 }
}

/// A fresh marked placeholder at `path`, made under a temporary name and renamed into place
/// without replacing anything: its metadata, or `None` when something took the name first.
/// Used by the sandbox's pid 1 when the host removed a reserved entry during the run; no
/// lock is held (the supervisor removes it at the end like any unheld placeholder).
pub fn make_marked(path: &Path, dir: bool) -> io::Result<Option<std::fs::Metadata>> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let temp = path.with_file_name(format!("{name}.warden-r{nanos:09}"));
    make(&temp, dir)?;
    let fd = match open_made(&temp, dir).and_then(|fd| set_mark(&fd).map(|()| fd)) {
        Ok(fd) => fd,
        Err(e) => {
            remove(&temp, dir);
            return Err(e);
        }
    };
    match nix::fcntl::renameat2(
        nix::fcntl::AT_FDCWD,
        &temp,
        nix::fcntl::AT_FDCWD,
        path,
        nix::fcntl::RenameFlags::RENAME_NOREPLACE,
    ) {
        Ok(()) => Ok(Some(std::fs::File::from(fd).metadata()?)),
        Err(nix::Error::EEXIST) => {
            remove(&temp, dir);
            Ok(None)
        }
        Err(e) => {
            remove(&temp, dir);
            Err(e.into())
        }
    }
}

#[cfg(test)]
impl Held {
    /// Closes the descriptors without removing anything, as a killed supervisor does.
    pub(crate) fn abandon(mut self) {
        self.entries.clear();
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.release();
    }
}

/// After a supervisor's death (the janitor): removes those of `list` that are marked, empty
/// and held by no other sandbox.
pub fn sweep(list: &[Placeholder]) {
    for ph in list {
        if let Ok(Found::Marked(fd)) = find(&ph.path) {
            if lock(&fd, libc::LOCK_EX, Duration::ZERO).is_ok() {
                retire(&ph.path, &fd, None);
            }
        }
    }
}

/// With the exclusive lock held: gives `path` to the pool, or removes it, if it is still this
/// marked entry and empty.
///
/// The entry is reached through its directory opened without following symlinks: the plan's
/// paths are resolved, so a symlink on the way was swapped in since — by a sandbox that may
/// write an ancestor — and would lead the rename elsewhere (red-team round 23b).
fn retire(path: &Path, fd: &OwnedFd, pool: Option<&mut Pool>) {
    let Some((parent, name)) = parent_of(path) else {
        return;
    };
    if !is_marked(fd) || !names(&parent, name, fd) {
        return;
    }
    if let (Some(pool), Some(dir)) = (pool, reusable(fd)) {
        if pool.give(&parent, name, path, fd, dir) {
            return;
        }
    }
    let Ok(st) = nix::sys::stat::fstat(fd) else {
        return;
    };
    if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
        // Fails on a non-empty directory: what someone put there stays.
        let _ = nix::unistd::unlinkat(&parent, name, nix::unistd::UnlinkatFlags::RemoveDir);
    } else if st.st_size == 0 {
        let _ = nix::unistd::unlinkat(&parent, name, nix::unistd::UnlinkatFlags::NoRemoveDir);
    }
}

/// The directory `path` lies in, opened (`O_PATH`) without following any symlink on the way,
/// and the entry's name.
fn parent_of(path: &Path) -> Option<(OwnedFd, &std::ffi::OsStr)> {
    let name = path.file_name()?;
    let dir = super::mount::open_path_no_symlinks(path.parent()?, libc::O_DIRECTORY).ok()?;
    Some((dir, name))
}

/// Whether `name` in `parent` is the entry open at `fd` (still linked).
fn names(parent: &OwnedFd, name: &std::ffi::OsStr, fd: &OwnedFd) -> bool {
    let (Ok(st), Ok(now)) = (
        nix::sys::stat::fstat(fd),
        nix::sys::stat::fstatat(parent, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW),
    ) else {
        return false;
    };
    st.st_nlink > 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino
}

impl Pool {
    /// The pool at `path`, if it is a directory of this user's that nobody else can write;
    /// made first (mode 0700) when `create`.
    fn open(path: &Path, create: bool) -> Option<Pool> {
        let dir = match open_raw(path, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW) {
            Ok(fd) => fd,
            Err(e) if create && e.raw_os_error() == Some(libc::ENOENT) => {
                use std::os::unix::fs::DirBuilderExt;
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(path)
                    .ok()?;
                open_raw(path, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW).ok()?
            }
            Err(_) => return None,
        };
        let st = nix::sys::stat::fstat(&dir).ok()?;
        if st.st_uid != nix::unistd::geteuid().as_raw() || st.st_mode & 0o022 != 0 {
            return None;
        }
        let names: Vec<std::ffi::OsString> = std::fs::read_dir(path)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .collect();
        Some(Pool {
            dir,
            path: path.to_path_buf(),
            count: names.len(),
            names,
            elsewhere: Vec::new(),
        })
    }

    /// Renames a suitable entry to `ph.path` (never replacing anything), locked shared.
    fn take(&mut self, ph: &Placeholder) -> Taken {
        let parent = ph.path.parent().unwrap_or(Path::new("/"));
        if self.elsewhere.iter().any(|d| d == parent) {
            return Taken::Nothing;
        }
        let prefix = pool_prefix(&ph.path, ph.dir);
        if !self
            .names
            .iter()
            .any(|n| n.as_bytes().starts_with(prefix.as_bytes()))
        {
            return Taken::Nothing;
        }
        // Renamed into the directory opened without symlinks (see [`retire`]): an entry a
        // sandbox holds a writable descriptor to must not be led into another project.
        let Some((dirfd, base)) = parent_of(&ph.path) else {
            return Taken::Nothing;
        };
        while let Some(pos) = self
            .names
            .iter()
            .rposition(|n| n.as_bytes().starts_with(prefix.as_bytes()))
        {
            let name = self.names.swap_remove(pos);
            let flags = libc::O_RDONLY
                | libc::O_NOFOLLOW
                | libc::O_NONBLOCK
                | libc::O_CLOEXEC
                | if ph.dir { libc::O_DIRECTORY } else { 0 };
            let Ok(fd) = nix::fcntl::openat(
                &self.dir,
                name.as_os_str(),
                nix::fcntl::OFlag::from_bits_retain(flags),
                nix::sys::stat::Mode::empty(),
            ) else {
                continue;
            };
            if reusable(&fd) != Some(ph.dir)
                || !marked_for(&fd, &ph.path)
                || lock(&fd, libc::LOCK_SH, Duration::ZERO).is_err()
            {
                continue;
            }
            match nix::fcntl::renameat2(
                &self.dir,
                name.as_os_str(),
                &dirfd,
                base,
                nix::fcntl::RenameFlags::RENAME_NOREPLACE,
            ) {
                Ok(()) => {
                    self.count = self.count.saturating_sub(1);
                    if !names(&dirfd, base, &fd) {
                        return Taken::Occupied;
                    }
                    return Taken::Placed(fd);
                }
                Err(nix::Error::EEXIST) => return Taken::Occupied,
                // Another run took it first.
                Err(nix::Error::ENOENT) => continue,
                Err(_) => {
                    self.elsewhere.push(parent.to_path_buf());
                    return Taken::Nothing;
                }
            }
        }
        Taken::Nothing
    }

    /// Moves the released placeholder `name` in `parent` (open at `fd`; `path` as the plan
    /// names it) into the pool, marked for `path`; false: it stays where it is.
    fn give(
        &mut self,
        parent: &OwnedFd,
        name: &std::ffi::OsStr,
        path: &Path,
        fd: &OwnedFd,
        dir: bool,
    ) -> bool {
        let prefix = pool_prefix(path, dir);
        while self.count >= POOL_MAX {
            // The entry of another path released longest ago (its name says when).
            let Some(pos) = self
                .names
                .iter()
                .enumerate()
                .filter(|(_, n)| !n.as_bytes().starts_with(prefix.as_bytes()))
                .min_by_key(|(_, n)| released_at(n))
                .map(|(i, _)| i)
            else {
                return false;
            };
            let old = self.names.swap_remove(pos);
            // Empty ones only: what is in a filled entry may be someone's (see below); one a
            // sandbox filled through a descriptor it kept costs a slot, not more.
            let removed = if old.as_bytes().starts_with(b"d-") {
                nix::unistd::unlinkat(
                    &self.dir,
                    old.as_os_str(),
                    nix::unistd::UnlinkatFlags::RemoveDir,
                )
                .is_ok()
            } else {
                nix::sys::stat::fstatat(
                    &self.dir,
                    old.as_os_str(),
                    nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                )
                .is_ok_and(|st| st.st_size == 0)
                    && nix::unistd::unlinkat(
                        &self.dir,
                        old.as_os_str(),
                        nix::unistd::UnlinkatFlags::NoRemoveDir,
                    )
                    .is_ok()
            };
            if removed {
                self.count -= 1;
            }
        }
        // Emptiness, looked at again right before the move (the eviction above took time).
        if reusable(fd).is_none() || set_mark_value(fd, path.as_os_str().as_bytes()).is_err() {
            return false;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let kept = format!(
            "{prefix}{:x}-{:x}-{:x}-{}",
            now.as_secs(),
            now.subsec_nanos(),
            std::process::id(),
            self.count
        );
        let moved = nix::fcntl::renameat2(
            parent,
            name,
            &self.dir,
            kept.as_str(),
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        )
        .is_ok();
        if !moved {
            return false;
        }
        self.count += 1;
        // Written between the look and the move (by the user on the host, say): it goes back
        // where it was, or stays in the pool (never reused or evicted) if the name was taken
        // meanwhile — never lost (red-team round 23c).
        if reusable(fd).is_some() {
            return true;
        }
        if nix::fcntl::renameat2(
            &self.dir,
            kept.as_str(),
            parent,
            name,
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        )
        .is_ok()
        {
            self.count -= 1;
        } else {
            eprintln!(
                "warden: {} was written to while warden put it away; its contents are kept in {}",
                path.display(),
                self.path.join(&kept).display()
            );
        }
        true
    }
}

/// The names of the pool's entries kept for `path`: kind, then SHA-256 of the path (128 bits
/// of it). The name decides: only warden names entries in the pool, while the mark's value
/// (also compared) could be rewritten through a descriptor a sandbox kept to the entry, and a
/// weak hash would let a sandbox that names its own directories find one that collides with
/// another project's path (red-team round 23b).
fn pool_prefix(path: &Path, dir: bool) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(path.as_os_str().as_bytes());
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("{}-{hex}-", if dir { "d" } else { "f" })
}

/// When a pool entry was released, from its name (`KIND-HASH-SECS-…`); 0 if it does not say.
fn released_at(name: &std::ffi::OsStr) -> u64 {
    name.to_str()
        .and_then(|n| n.split('-').nth(2))
        .and_then(|secs| u64::from_str_radix(secs, 16).ok())
        .unwrap_or(0)
}

/// Whether the mark on `fd` names `path` (what [`Pool::give`] wrote).
fn marked_for(fd: &OwnedFd, path: &Path) -> bool {
    let want = path.as_os_str().as_bytes();
    let Ok(name) = CString::new(MARK) else {
        return false;
    };
    let mut buf = vec![0u8; want.len() + 1];
    // SAFETY: fgetxattr writes at most `buf.len()` bytes into `buf`, which we own.
    let n = unsafe {
        libc::fgetxattr(
            fd.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    usize::try_from(n).is_ok_and(|n| buf.get(..n) == Some(want))
}

/// Replaces the mark's value (the entry is marked already).
fn set_mark_value(fd: &OwnedFd, value: &[u8]) -> io::Result<()> {
    write_mark(fd, value, libc::XATTR_REPLACE)
}

/// Whether `fd` may be used (or kept) as a placeholder: marked, this user's, empty (a
/// directory without entries, or a file of no bytes and one name). `Some(is_dir)` if so.
fn reusable(fd: &impl AsRawFd) -> Option<bool> {
    // SAFETY: the descriptor stays open for the duration of these calls (borrowed).
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd.as_raw_fd()) };
    let st = nix::sys::stat::fstat(fd).ok()?;
    if st.st_uid != nix::unistd::geteuid().as_raw() || !is_marked_raw(fd.as_raw_fd()) {
        return None;
    }
    match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR if is_empty_dir(fd.as_raw_fd()) => Some(true),
        libc::S_IFREG if st.st_size == 0 && st.st_nlink == 1 => Some(false),
        _ => None,
    }
}

/// Whether the directory open at `fd` has no entries but `.` and `..` (false on any error).
fn is_empty_dir(fd: libc::c_int) -> bool {
    // Room for `.`, `..` and at least one more entry of the longest name.
    let mut buf = [0u8; 1024];
    // From the start, whatever read the descriptor before.
    // SAFETY: lseek on a descriptor the caller keeps open; no memory involved.
    if unsafe { libc::lseek(fd, 0, libc::SEEK_SET) } != 0 {
        return false;
    }
    // SAFETY: getdents64 writes at most `buf.len()` bytes into `buf`, which we own.
    let n = unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) };
    let Ok(n) = usize::try_from(n) else {
        return false;
    };
    // struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name (NUL-terminated).
    let mut off = 0;
    while off + 19 < n.min(buf.len()) {
        let reclen = usize::from(u16::from_ne_bytes([buf[off + 16], buf[off + 17]]));
        if reclen < 20 || off + reclen > n {
            return false;
        }
        let name = &buf[off + 19..off + reclen];
        let name = name.split(|b| *b == 0).next().unwrap_or_default();
        if name != b"." && name != b".." {
            return false;
        }
        off += reclen;
    }
    true
}

fn temp_name(path: &Path, attempt: usize) -> PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!("{name}.warden-{}-{attempt}", std::process::id()))
}

fn make(path: &Path, dir: bool) -> io::Result<()> {
    if dir {
        std::fs::create_dir(path)
    } else {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map(drop)
    }
}

fn remove(path: &Path, dir: bool) {
    let _ = if dir {
        std::fs::remove_dir(path)
    } else {
        std::fs::remove_file(path)
    };
}

fn cpath(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::other("NUL in path"))
}

fn open_raw(path: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    let c = cpath(path)?;
    // SAFETY: `c` is a valid NUL-terminated string; open returns a new descriptor or -1.
    let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by open and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens the entry warden itself just created (never following a symlink planted meanwhile).
fn open_made(path: &Path, dir: bool) -> io::Result<OwnedFd> {
    let extra = if dir { libc::O_DIRECTORY } else { 0 };
    open_raw(
        path,
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | extra,
    )
}

fn find(path: &Path) -> io::Result<Found> {
    // The mark first, by name (one call; most candidates are missing or the user's own).
    // Only a directory or a regular file can carry a user xattr, so a marked entry is safe
    // to open (never a fifo or a device).
    let c = cpath(path)?;
    let name = CString::new(MARK).map_err(io::Error::other)?;
    // SAFETY: size query (NULL buffer, size 0) on NUL-terminated strings; no memory written.
    let n = unsafe { libc::lgetxattr(c.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOENT) => Ok(Found::Missing),
            // Unmarked, a symlink, a component that is not a directory, no xattrs here.
            Some(libc::ENODATA | libc::ENOTDIR | libc::ELOOP | libc::ENOTSUP | libc::EPERM) => {
                Ok(Found::Foreign)
            }
            _ => Err(e),
        };
    }
    let fd = match open_raw(path, libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK) {
        Ok(fd) => fd,
        // Removed (or replaced by a symlink) since: look again.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(Found::Missing),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Ok(Found::Foreign),
        Err(e) => return Err(e),
    };
    // Still the marked entry (not a replacement made between the two calls)?
    Ok(if is_marked(&fd) {
        Found::Marked(fd)
    } else {
        Found::Foreign
    })
}

fn is_marked(fd: &OwnedFd) -> bool {
    is_marked_raw(fd.as_raw_fd())
}

fn is_marked_raw(fd: libc::c_int) -> bool {
    let Ok(name) = CString::new(MARK) else {
        return false;
    };
    // SAFETY: a size query (NULL buffer, size 0) on an open descriptor; no memory is written.
    let n = unsafe { libc::fgetxattr(fd, name.as_ptr(), std::ptr::null_mut(), 0) };
    n >= 0
}

fn set_mark(fd: &OwnedFd) -> io::Result<()> {
    write_mark(fd, b"1", libc::XATTR_CREATE)
}

fn write_mark(fd: &OwnedFd, value: &[u8], flags: libc::c_int) -> io::Result<()> {
    let name = CString::new(MARK).map_err(io::Error::other)?;
    // SAFETY: `name` is NUL-terminated and `value` is valid for its length.
    let r = unsafe {
        libc::fsetxattr(
            fd.as_raw_fd(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            flags,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `fd` is still linked and `path` still names it.
fn still_named(fd: &OwnedFd, path: &Path) -> io::Result<bool> {
    let st = nix::sys::stat::fstat(fd)?;
    if st.st_nlink == 0 {
        return Ok(false);
    }
    Ok(match nix::sys::stat::lstat(path) {
        Ok(now) => now.st_dev == st.st_dev && now.st_ino == st.st_ino,
        Err(_) => false,
    })
}

/// `flock(op)` without blocking the thread forever: retried until `wait` has passed.
fn lock(fd: &OwnedFd, op: libc::c_int, wait: Duration) -> io::Result<()> {
    let deadline = Instant::now() + wait;
    loop {
        // SAFETY: flock on a descriptor we own; no memory involved.
        if unsafe { libc::flock(fd.as_raw_fd(), op | libc::LOCK_NB) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(e);
        }
        if Instant::now() >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "another process holds a lock on it",
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
#[path = "placeholder_tests.rs"]
mod tests;

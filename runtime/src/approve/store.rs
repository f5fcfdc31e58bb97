//! The session store: one session's approvals on disk, shared by the prompt of a running
//! sandbox, `warden check --ask` and every later sandbox of the same session (`--session ID`
//! or `WARDEN_SESSION`). Without a session id approvals live only as long as the process.
//!
//! Where: `$WARDEN_SESSION_DIR`, else `$XDG_RUNTIME_DIR/warden/sessions`, else
//! `/run/warden/sessions` as root, else `$TMPDIR/warden-<uid>/sessions`; one `ID.json` per
//! session. The directory must belong to the caller and be writable by nobody else, or the
//! store is refused (an approval someone else could write is no approval). Sandboxes see it
//! read-only (it is outside their writable roots, and `warden run` masks it read-only if a
//! writable root contains it), so a sandboxed command cannot approve anything for itself.
//! Updates are read-modify-write under an exclusive `flock`, written atomically (temporary
//! file, rename).

use crate::policy::approvals::Snapshot;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("session id {0:?}: use 1 to 128 of A-Z a-z 0-9 . _ - (not starting with .)")]
    BadId(String),
    #[error("session store {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("session store {path}: {why}; refusing to trust approvals kept there")]
    Unsafe { path: PathBuf, why: String },
    #[error("session store {path}: not a session file ({source})")]
    Corrupt {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The directory sessions are kept in (see the module docs).
pub fn dir() -> PathBuf {
    if let Some(d) = std::env::var_os("WARDEN_SESSION_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return Path::new(&d).join("warden/sessions");
    }
    let uid = nix::unistd::geteuid();
    if uid.is_root() {
        return PathBuf::from("/run/warden/sessions");
    }
    std::env::temp_dir().join(format!("warden-{uid}/sessions"))
}

/// Whether `id` is usable as a session id (and so as a file name).
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[derive(Clone, Debug)]
pub struct SessionStore {
    file: PathBuf,
    lock: PathBuf,
}

impl SessionStore {
    /// The store of session `id` in [`dir`], creating the directory (mode 0700) if needed.
    pub fn open(id: &str) -> Result<SessionStore, StoreError> {
        Self::open_in(&dir(), id)
    }

    pub fn open_in(dir: &Path, id: &str) -> Result<SessionStore, StoreError> {
        if !valid_id(id) {
            return Err(StoreError::BadId(id.to_string()));
        }
        if !dir.is_absolute() {
            return Err(StoreError::Unsafe {
                path: dir.to_path_buf(),
                why: "not an absolute path".into(),
            });
        }
        match std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
        {
            Ok(()) => {}
            Err(e) => return Err(io(dir)(e)),
        }
        check_private(dir)?;
        Ok(SessionStore {
            file: dir.join(format!("{id}.json")),
            lock: dir.join(format!(".{id}.lock")),
        })
    }

    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The session's approvals (none yet: empty). The file must be this user's own regular
    /// file with one link, opened without following a symlink: a sandbox that once could
    /// write the store's directory could otherwise have left a link to a file it can still
    /// write (in its working directory) and grant itself approvals later.
    pub fn load(&self) -> Result<Snapshot, StoreError> {
        use std::io::Read;
        let mut file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&self.file)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Snapshot::default()),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(StoreError::Unsafe {
                    path: self.file.clone(),
                    why: "a symlink".to_string(),
                })
            }
            Err(e) => return Err(io(&self.file)(e)),
        };
        let meta = file.metadata().map_err(io(&self.file))?;
        let unsafe_because = |why: &str| StoreError::Unsafe {
            path: self.file.clone(),
            why: why.to_string(),
        };
        if !meta.is_file() {
            return Err(unsafe_because("not a regular file"));
        }
        if meta.nlink() != 1 {
            return Err(unsafe_because("it has other hard links"));
        }
        if meta.uid() != nix::unistd::geteuid().as_raw() {
            return Err(unsafe_because("owned by another user"));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(unsafe_because("writable by group or others"));
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io(&self.file))?;
        serde_json::from_slice(&bytes).map_err(|source| StoreError::Corrupt {
            path: self.file.clone(),
            source,
        })
    }

    /// Adds to the session's approvals: read, change, write atomically, under a lock.
    pub fn update(&self, change: impl FnOnce(&mut Snapshot)) -> Result<(), StoreError> {
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&self.lock)
            .map_err(io(&self.lock))?;
        let _guard = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| io(&self.lock)(e.into()))?;
        let mut snapshot = self.load()?;
        change(&mut snapshot);
        let dir = self.file.parent().unwrap_or(Path::new("/"));
        let mut tmp = tempfile::Builder::new()
            .prefix(".session-")
            .tempfile_in(dir)
            .map_err(io(dir))?;
        let text = serde_json::to_vec_pretty(&snapshot).map_err(std::io::Error::other);
        text.and_then(|t| tmp.write_all(&t))
            .and_then(|()| tmp.as_file().sync_all())
            .map_err(io(tmp.path()))?;
        tmp.persist(&self.file)
            .map_err(|e| io(&self.file)(e.error))?;
        Ok(())
    }
}

/// The directory belongs to this user and nobody else may write it.
fn check_private(dir: &Path) -> Result<(), StoreError> {
    let meta = std::fs::symlink_metadata(dir).map_err(io(dir))?;
    let unsafe_because = |why: &str| StoreError::Unsafe {
        path: dir.to_path_buf(),
        why: why.to_string(),
    };
    if !meta.is_dir() {
        return Err(unsafe_because("not a directory"));
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(unsafe_because("owned by another user"));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(unsafe_because("writable by group or others"));
    }
    Ok(())
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;

//! Files warden itself writes on the host, next to what the sandbox can change.

use std::path::Path;

/// Opens a record file for appending, created if missing — never through a symlink, and only
/// a regular file with one link. The file often lies in the sandbox's writable working
/// directory: a command could replace it with a symlink to `~/.bashrc` (or hard-link it
/// there), and the next run would append records that hold its own command lines to a file
/// the host's shell runs.
pub fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                std::io::Error::other("it is a symbolic link; refusing to write through it")
            } else {
                e
            }
        })?;
    let meta = f.metadata()?;
    if !meta.file_type().is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.nlink() != 1 {
        return Err(std::io::Error::other(format!(
            "it has {} hard links; refusing to append to a file linked elsewhere",
            meta.nlink()
        )));
    }
    Ok(f)
}

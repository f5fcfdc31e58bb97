//! Files warden itself writes on the host, next to what the sandbox can change.

use std::path::Path;

/// Opens a record file for appending, created if missing — never through a symlink, and only
/// a regular file with one link. The file often lies in the sandbox's writable working
/// directory: a command could replace it with a symlink to `~/.bashrc` (or hard-link it
/// there), and the next run would append records that hold its own command lines to a file
/// the host's shell runs.
pub fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    // A descriptor the caller handed over (`--violations /dev/fd/3`, the library's pipe):
    // the caller's own choice, never in the sandbox's reach.
    if is_inherited_descriptor(path) {
        return std::fs::OpenOptions::new().append(true).open(path);
    }
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

/// `/dev/fd/N`, `/proc/self/fd/N`: one of warden's own descriptors, by number.
fn is_inherited_descriptor(path: &Path) -> bool {
    let text = path.as_os_str().to_string_lossy();
    ["/dev/fd/", "/proc/self/fd/"].iter().any(|prefix| {
        text.strip_prefix(prefix)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_file_is_never_written_through_a_link_but_a_handed_over_descriptor_is() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("rc");
        std::fs::write(&target, "rc\n").unwrap();
        let link = dir.path().join("v.jsonl");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(open_append(&link).is_err());
        let hard = dir.path().join("h.jsonl");
        std::fs::hard_link(&target, &hard).unwrap();
        assert!(open_append(&hard).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "rc\n");
        assert!(open_append(&dir.path().join("new.jsonl")).is_ok());
        // A pipe handed over by number (the library's `--violations /dev/fd/N`).
        let (r, w) = nix::unistd::pipe().unwrap();
        let path = format!("/dev/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&w));
        assert!(open_append(Path::new(&path)).is_ok());
        drop((r, w));
        assert!(!is_inherited_descriptor(Path::new("/dev/fd/3x")));
        assert!(!is_inherited_descriptor(Path::new("/dev/fd/")));
    }
}

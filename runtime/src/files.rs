//! Files warden itself writes on the host, next to what the sandbox can change.

use std::path::Path;

/// Opens a record file for appending, created if missing — never through a symlink, and only
/// a regular file with one link. The file often lies in the sandbox's writable working
/// directory: a command could replace it with a symlink to `~/.bashrc` (or hard-link it
/// there), and the next run would append records that hold its own command lines to a file
/// the host's shell runs.
pub fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::MetadataExt;
    // A descriptor the caller handed over (`--violations /dev/fd/3`, the library's pipe):
    // the caller's own choice, never in the sandbox's reach.
    if is_inherited_descriptor(path) {
        return std::fs::OpenOptions::new().append(true).open(path);
    }
    let (dir, name) = open_parent(path)?;
    let fd = nix::fcntl::openat(
        &dir,
        name.as_os_str(),
        nix::fcntl::OFlag::O_WRONLY
            | nix::fcntl::OFlag::O_CREAT
            | nix::fcntl::OFlag::O_APPEND
            | nix::fcntl::OFlag::O_NOFOLLOW
            | nix::fcntl::OFlag::O_NONBLOCK
            | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .map_err(|e| {
        if e == nix::errno::Errno::ELOOP {
            std::io::Error::other("it is a symbolic link; refusing to write through it")
        } else {
            std::io::Error::from(e)
        }
    })?;
    let f = std::fs::File::from(fd);
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

/// The directory a file warden writes lies in, opened, and the file's name in it. The
/// directory must be the one the path names: a symlink on the way (other than the system's
/// own aliases such as `/var/run`) is refused, because a command with write access there
/// could have replaced the directory with a link, and the next run would create or replace
/// the file wherever it points. Checked on the opened descriptor, so nothing can be swapped
/// between the check and the use.
pub fn open_parent(path: &Path) -> std::io::Result<(std::os::fd::OwnedFd, std::ffi::OsString)> {
    use crate::policy::fsview::{escapes_entry, lexical, RealFs};
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("names no file"))?
        .to_os_string();
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = nix::fcntl::open(
        parent,
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?;
    // What the descriptor is (Linux); elsewhere the path resolved now (a narrow race).
    #[cfg(target_os = "linux")]
    let real = std::fs::read_link(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&dir)
    ))?;
    #[cfg(not(target_os = "linux"))]
    let real = std::fs::canonicalize(parent)?;
    let named = lexical(&std::env::current_dir()?, parent);
    if real != named && escapes_entry(&RealFs, &named, &real) {
        return Err(std::io::Error::other(format!(
            "its directory {} leads through a symbolic link to {}; name the real directory",
            named.display(),
            real.display()
        )));
    }
    Ok((dir, name))
}

/// `/dev/fd/N`, `/proc/self/fd/N`: one of warden's own descriptors, by number.
fn is_inherited_descriptor(path: &Path) -> bool {
    let text = path.as_os_str().to_string_lossy();
    ["/dev/fd/", "/proc/self/fd/"].iter().any(|prefix| {
        text.strip_prefix(prefix)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Where the Linux backend keeps released placeholders between runs
/// ([`crate::policy::mandatory::PLACEHOLDER_POOL`] in the home directory of the account warden
/// runs as, from the user database, not `$HOME`: a run with another `$HOME` — one inside some
/// sandbox's writable root — must not take entries from a pool that sandbox could plant).
/// `None` when the account has no home directory.
pub fn placeholder_pool() -> Option<std::path::PathBuf> {
    let user = nix::unistd::User::from_uid(nix::unistd::geteuid()).ok()??;
    if !user.dir.is_absolute() || user.dir == Path::new("/") {
        return None;
    }
    Some(user.dir.join(crate::policy::mandatory::PLACEHOLDER_POOL))
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

    /// A directory on the way replaced by a link (a command can do that in its writable
    /// working directory): the next run must not create the file where the link points.
    #[test]
    fn a_record_file_is_never_written_through_a_linked_directory() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let m = dir.path().join("m");
        std::os::unix::fs::symlink(&outside, &m).unwrap();
        let e = open_append(&m.join("v.jsonl")).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(!outside.join("v.jsonl").exists());
        assert!(open_parent(&m.join("x")).is_err());
        assert!(open_parent(&outside.join("x")).is_ok());
    }
}

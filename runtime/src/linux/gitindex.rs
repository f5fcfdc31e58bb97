//! The git index a sandboxed command writes, checked before the host's git trusts it. The
//! command may run `git add` and `git commit` (the index and objects are writable), but
//! an index is a list of paths that the host's `git checkout`/`restore`/`checkout-index`
//! write without checking them again: an entry named `../.bashrc` or `.git/hooks/post-checkout`
//! wrote outside every writable root (and ran), and an entry `../secret` made the host's next
//! `git commit -a` store a denyRead file where the sandbox could read it. git itself never
//! writes such entries, so one in an index is an attack.
//!
//! Parsed with gitoxide's `gix-index` (every index version and extension git writes, the split
//! index included); each path checked component by component with `gix-validate`, as git's
//! `verify_path` does, with the HFS+ and NTFS spellings of `.git` refused too.

use std::path::Path;

/// The largest index read (git's own for a repository of a million files is about 100 MiB);
/// a larger one is refused rather than read.
const MAX_INDEX_BYTES: u64 = 512 << 20;

/// What is wrong with the index at `path`, if anything: an unsafe entry, or an index that
/// cannot be read (a format the host's git might read differently is not trusted).
///
/// pid 1 calls this while it guards the sandbox, on a file the command controls, so nothing
/// here may block or fault: the file is opened non-blocking without following a symlink (a
/// FIFO swapped in after the check would block `open`), checked on the descriptor (regular,
/// one link, bounded size) and read into memory (a mapping of a file the command truncates
/// faults), and so is a split index's shared index.
pub fn problem(path: &Path) -> Option<String> {
    use gix_index::hash::Kind;
    let data = match read_index(path) {
        Ok(Some(data)) => data,
        // Gone again (git's own lock dance) is fine.
        Ok(None) => return None,
        Err(why) => return Some(why),
    };
    // SHA-1 repositories (gix-index is built without SHA-256 here; an index of a SHA-256
    // repository fails to parse and is refused: fail closed).
    let parse = |data: &[u8]| {
        gix_index::State::from_bytes(
            data,
            filetime::FileTime::zero(),
            Kind::Sha1,
            Default::default(),
        )
        .map(|(state, _)| state)
        .map_err(|_| "it cannot be read as a git index".to_string())
    };
    let state = match parse(&data) {
        Ok(state) => state,
        Err(why) => return Some(why),
    };
    let mut states = vec![state];
    // A split index lists only changes; the rest of its paths are in the shared index it
    // names, which the host's git merges in: check every path of both.
    if let Some(link) = states[0].link() {
        let shared = path.with_file_name(format!("sharedindex.{}", link.shared_index_checksum));
        match read_index(&shared) {
            Ok(Some(data)) => match parse(&data) {
                Ok(state) => states.push(state),
                Err(why) => return Some(format!("its shared index: {why}")),
            },
            Ok(None) => return Some("its shared index is missing".to_string()),
            Err(why) => return Some(format!("its shared index: {why}")),
        }
    }
    for state in &states {
        for entry in state.entries() {
            let name = entry.path(state);
            if let Some(why) = unsafe_path(name) {
                return Some(format!("it has an entry {name:?}: {why}"));
            }
        }
    }
    None
}

/// The bytes of the index file at `path`; `Ok(None)` when there is none.
fn read_index(path: &Path) -> Result<Option<Vec<u8>>, String> {
    use nix::fcntl::OFlag;
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY).bits())
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("it cannot be opened: {e}")),
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("it cannot be examined: {e}"))?;
    if !meta.is_file() {
        return Err("it is not a regular file".to_string());
    }
    // git never links its index anywhere: a second name lets the command write it where no
    // watch sees (and `ln poisoned .git/index` brings one in without a write at all).
    if meta.nlink() > 1 {
        return Err(format!("it has {} hard links", meta.nlink()));
    }
    if meta.len() > MAX_INDEX_BYTES {
        return Err(format!("it is larger than {} MiB", MAX_INDEX_BYTES >> 20));
    }
    let mut data = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(MAX_INDEX_BYTES + 1)
        .read_to_end(&mut data)
        .map_err(|e| format!("it cannot be read: {e}"))?;
    if data.len() as u64 > MAX_INDEX_BYTES {
        return Err(format!("it is larger than {} MiB", MAX_INDEX_BYTES >> 20));
    }
    Ok(Some(data))
}

/// Why the index path `name` must not be checked out, if it must not.
pub fn unsafe_path(name: &[u8]) -> Option<&'static str> {
    use gix_index::validate::path::component::{Mode, Options};
    let options = Options {
        protect_windows: false,
        protect_hfs: true,
        protect_ntfs: true,
    };
    let parts: Vec<&[u8]> = name.split(|b| *b == b'/').collect();
    let last = parts.len().saturating_sub(1);
    for (i, part) in parts.iter().enumerate() {
        // The leaf is checked as what it may be (a symlink's name has more rules).
        let mode = (i == last).then_some(Mode::Symlink);
        if gix_index::validate::path::component((*part).into(), mode, options).is_err() {
            return Some(if part.is_empty() {
                "an empty component or an absolute path"
            } else if *part == b".." || *part == b"." {
                "a `.` or `..` component"
            } else {
                "a component git refuses (`.git` in some spelling, or a reserved name)"
            });
        }
    }
    None
}

#[cfg(test)]
#[path = "gitindex_tests.rs"]
mod tests;

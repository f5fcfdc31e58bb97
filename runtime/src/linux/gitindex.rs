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

/// What is wrong with the index at `path`, if anything: an unsafe entry, or an index that
/// cannot be read (a format the host's git might read differently is not trusted).
pub fn problem(path: &Path) -> Option<String> {
    use gix_index::hash::Kind;
    use std::os::unix::fs::MetadataExt;
    // git never links its index anywhere: a second name lets the command write it where no
    // watch sees (and `ln poisoned .git/index` brings one in without a write at all).
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.is_file() {
            return Some("it is not a regular file".to_string());
        }
        if meta.nlink() > 1 {
            return Some(format!("it has {} hard links", meta.nlink()));
        }
    }
    // SHA-1 repositories (gix-index is built without SHA-256 here; an index of a SHA-256
    // repository fails to parse and is refused: fail closed).
    let file = gix_index::File::at(path, Kind::Sha1, true, Default::default()).ok();
    let Some(file) = file else {
        // Gone again (git's own lock dance) is fine; unreadable is not.
        return std::fs::symlink_metadata(path)
            .is_ok()
            .then(|| "it cannot be read as a git index".to_string());
    };
    for entry in file.entries() {
        let name = entry.path(&file);
        if let Some(why) = unsafe_path(name) {
            return Some(format!("it has an entry {name:?}: {why}"));
        }
    }
    None
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

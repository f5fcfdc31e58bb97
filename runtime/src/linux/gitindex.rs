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

use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

/// The largest index read (git's own for a repository of a million files is about 100 MiB);
/// a larger one is refused rather than read.
const MAX_INDEX_BYTES: u64 = 512 << 20;

/// The index `data` as gix-index reads it, `None` when it cannot. SHA-1 repositories only
/// (gix-index is built without SHA-256 here: such an index does not parse, and is refused
/// — fail closed). gix-index asserts on some inputs git reads fine (bytes after a tree
/// cache): a panic is an index it cannot read like any other (pid 1 must not die of it).
fn gix_state(data: &[u8]) -> Option<gix_index::State> {
    let parsed = std::panic::catch_unwind(|| {
        gix_index::State::from_bytes(
            data,
            filetime::FileTime::zero(),
            gix_index::hash::Kind::Sha1,
            Default::default(),
        )
    });
    match parsed {
        Ok(Ok((state, _))) => Some(state),
        _ => None,
    }
}

/// What is wrong with the index at `path`, if anything: an unsafe entry, or an index that
/// cannot be read (a format the host's git might read differently is not trusted).
///
/// pid 1 calls this while it guards the sandbox, on a file the command controls, so nothing
/// here may block or fault: the file is opened non-blocking without following a symlink (a
/// FIFO swapped in after the check would block `open`), checked on the descriptor (regular,
/// one link, bounded size) and read into memory (a mapping of a file the command truncates
/// faults), and so is a split index's shared index.
pub fn problem(path: &Path) -> Option<String> {
    let data = match read_index(path) {
        Ok(Some(data)) => data,
        // Gone again (git's own lock dance) is fine.
        Ok(None) => return None,
        Err(why) => return Some(why),
    };
    let parse = |data: &[u8]| {
        let state =
            gix_state(data).ok_or_else(|| "it cannot be read as a git index".to_string())?;
        // An extension gix-index could not decode is left out of its state, where git may
        // still read it: a tree cache git accepts and gix does not would go unchecked.
        let layout = layout(data)?;
        check_threaded_view(data, &layout)?;
        let has = |sig: &[u8; 4]| layout.extensions.iter().any(|(s, _)| s == sig);
        if has(b"TREE") && state.tree().is_none() {
            return Err("its tree cache cannot be read (fail closed)".to_string());
        }
        if has(b"link") && state.link().is_none() {
            return Err("its split-index link cannot be read (fail closed)".to_string());
        }
        Ok(state)
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
    let split = states.len() > 1;
    for (i, state) in states.iter().enumerate() {
        for entry in state.entries() {
            let name = entry.path(state);
            // A split index stores the entries it replaces in the shared one nameless.
            if split && i == 0 && name.is_empty() {
                continue;
            }
            if let Some(why) = unsafe_path(name, entry.mode == gix_index::entry::Mode::SYMLINK) {
                return Some(format!("it has an entry {name:?}: {why}"));
            }
        }
    }
    // The cache of tree ids (the `TREE` extension): `git commit` writes the cached root tree
    // as it is, without checking it against the entries, so a cache naming a tree with
    // `.claude/settings.json` in it put that file into the user's next commit while `git
    // status` showed nothing of it (red-team round 13). Every tree it claims valid must be the
    // tree the entries make.
    if let Some(tree) = states[0].tree() {
        if split {
            if cache_claims_anything(tree) {
                return Some(
                    "it is a split index with a tree cache, which is not checked (fail closed)"
                        .to_string(),
                );
            }
        } else if let Err(why) = check_cache_tree(&states[0], tree) {
            return Some(why);
        }
    }
    None
}

fn cache_claims_anything(tree: &gix_index::extension::Tree) -> bool {
    tree.num_entries.is_some() || tree.children.iter().any(cache_claims_anything)
}

/// One entry as a tree object lists it.
struct TreeItem<'a> {
    path: &'a [u8],
    mode: u32,
    id: gix_index::hash::ObjectId,
}

/// Checks every valid node of the tree cache against the tree the entries make.
fn check_cache_tree(
    state: &gix_index::State,
    tree: &gix_index::extension::Tree,
) -> Result<(), String> {
    use gix_index::entry::Flags;
    let mut items = Vec::with_capacity(state.entries().len());
    for entry in state.entries() {
        if entry.flags.stage_raw() != 0 {
            // A conflicted index cannot be committed; git keeps no valid cache over it.
            return if cache_claims_anything(tree) {
                Err("it has a tree cache over unmerged entries".to_string())
            } else {
                Ok(())
            };
        }
        if entry.flags.intersects(Flags::INTENT_TO_ADD | Flags::REMOVE) {
            continue;
        }
        items.push(TreeItem {
            path: entry.path(state).as_ref(),
            mode: entry.mode.bits(),
            id: entry.id,
        });
    }
    tree_id(&items, 0, Some(tree), b"").map(|_| ())
}

/// The id of the tree of `items` (sorted, all below the directory whose path ends at byte
/// `prefix` of theirs), checking `cache` (that directory's node) and the nodes below it.
fn tree_id(
    items: &[TreeItem<'_>],
    prefix: usize,
    cache: Option<&gix_index::extension::Tree>,
    dir: &[u8],
) -> Result<gix_index::hash::ObjectId, String> {
    let mut body: Vec<u8> = Vec::new();
    let mut i = 0;
    while i < items.len() {
        let mut rest = items[i].path.get(prefix..).unwrap_or_default();
        // A sparse index's directory entry (`dir/`, mode 040000) is a tree of its own.
        if items[i].mode == 0o040000 {
            rest = rest.strip_suffix(b"/").unwrap_or(rest);
        }
        let leaf = items[i].mode == 0o040000 && !rest.contains(&b'/');
        match rest.iter().position(|b| *b == b'/').filter(|_| !leaf) {
            None => {
                body.extend_from_slice(format!("{:o} ", items[i].mode).as_bytes());
                body.extend_from_slice(rest);
                body.push(0);
                body.extend_from_slice(items[i].id.as_bytes());
                i += 1;
            }
            Some(slash) => {
                let name = &rest[..slash];
                let start = i;
                while i < items.len()
                    && items[i]
                        .path
                        .get(prefix..prefix + slash + 1)
                        .is_some_and(|p| p[..slash] == *name && p[slash] == b'/')
                {
                    i += 1;
                }
                let child = cache.and_then(|c| c.children.iter().find(|t| t.name[..] == *name));
                let id = tree_id(
                    &items[start..i],
                    prefix + slash + 1,
                    child,
                    &items[start].path[..prefix + slash],
                )?;
                body.extend_from_slice(b"40000 ");
                body.extend_from_slice(name);
                body.push(0);
                body.extend_from_slice(id.as_bytes());
            }
        }
    }
    let mut hasher = gix_index::hash::hasher(gix_index::hash::Kind::Sha1);
    hasher.update(format!("tree {}\0", body.len()).as_bytes());
    hasher.update(&body);
    let id = hasher
        .try_finalize()
        .map_err(|e| format!("it cannot be hashed: {e}"))?;
    if let Some(node) = cache {
        if let Some(n) = node.num_entries {
            let shown = if dir.is_empty() {
                "the root".to_string()
            } else {
                format!("{:?}", String::from_utf8_lossy(dir))
            };
            // Only the id matters (git's entry count skips intent-to-add entries in ways
            // that are not worth mirroring): it is what a commit stores.
            let _ = n;
            if node.id != id {
                return Err(format!(
                    "its tree cache for {shown} does not match its entries (a commit would \
                     store other files than the index lists)"
                ));
            }
        }
    }
    Ok(id)
}

/// How the index `data` is laid out, found by walking its entries as git does in one pass
/// (versions 2 to 4) — independently of gix-index, whose state omits an extension it cannot
/// decode.
struct Layout {
    /// Where each entry starts.
    starts: Vec<usize>,
    /// Version 4: whether each entry's name keeps nothing of the previous entry's name.
    whole_names: Vec<bool>,
    /// Where the entries end and the extensions begin.
    entries_end: usize,
    /// Each extension's signature and the range of its payload.
    extensions: Vec<([u8; 4], std::ops::Range<usize>)>,
}

/// The index `data`'s [`Layout`]. An index whose extensions do not end exactly at its
/// checksum is refused.
fn layout(data: &[u8]) -> Result<Layout, String> {
    let bad = || "its layout cannot be followed (fail closed)".to_string();
    let u32_at = |at: usize| -> Option<u32> {
        data.get(at..at + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    if data.get(..4) != Some(b"DIRC") || data.len() < 32 {
        return Err(bad());
    }
    let version = u32_at(4).ok_or_else(bad)?;
    let count = u32_at(8).ok_or_else(bad)? as usize;
    let end = data.len() - 20;
    // Every entry takes at least 62 bytes: a count the file cannot hold is refused before
    // anything is allocated for it.
    if count > end / 62 {
        return Err(bad());
    }
    let mut starts = Vec::with_capacity(count);
    let mut whole_names = Vec::with_capacity(if version == 4 { count } else { 0 });
    let mut previous_len = 0usize;
    let mut at = 12usize;
    for _ in 0..count {
        starts.push(at);
        // ctime, mtime, dev, ino, mode, uid, gid, size (40 bytes), the object id (20), flags.
        let flags = data.get(at + 60..at + 62).ok_or_else(bad)?;
        let flags = u16::from_be_bytes([flags[0], flags[1]]);
        let mut path_at = at + 62;
        if version >= 3 && flags & 0x4000 != 0 {
            path_at += 2;
        }
        if version == 4 {
            // A varint (how much of the previous path to drop: git's offset encoding), then
            // the rest, NUL-ended.
            let mut p = path_at;
            let mut c = *data.get(p).ok_or_else(bad)?;
            let mut strip = u64::from(c & 0x7f);
            while c & 0x80 != 0 {
                p += 1;
                c = *data.get(p).ok_or_else(bad)?;
                strip = strip
                    .checked_add(1)
                    .and_then(|v| v.checked_mul(128))
                    .ok_or_else(bad)?
                    + u64::from(c & 0x7f);
            }
            p += 1;
            let nul = data
                .get(p..end)
                .and_then(|r| r.iter().position(|b| *b == 0))
                .ok_or_else(bad)?;
            let strip = usize::try_from(strip).map_err(|_| bad())?;
            let kept = previous_len.checked_sub(strip).ok_or_else(bad)?;
            whole_names.push(kept == 0);
            previous_len = kept + nul;
            at = p + nul + 1;
        } else {
            let nul = data
                .get(path_at..end)
                .and_then(|r| r.iter().position(|b| *b == 0))
                .ok_or_else(bad)?;
            // Padded with NULs to a multiple of 8 bytes (at least one NUL).
            let len = path_at - at + nul;
            at += (len + 8) & !7;
        }
        if at > end {
            return Err(bad());
        }
    }
    let entries_end = at;
    let mut extensions = Vec::new();
    while at < end {
        let sig = data.get(at..at + 4).ok_or_else(bad)?;
        let size = u32_at(at + 4).ok_or_else(bad)? as usize;
        let payload = at + 8..at.checked_add(8 + size).ok_or_else(bad)?;
        at = payload.end;
        extensions.push(([sig[0], sig[1], sig[2], sig[3]], payload));
    }
    if at != end {
        return Err(bad());
    }
    Ok(Layout {
        starts,
        whole_names,
        entries_end,
        extensions,
    })
}

/// The names of the gitlink entries of the index at `path`, its shared index's included (a
/// split index lists only changes: a gitlink kept in `sharedindex.*` went unseen — red-team
/// round 19). A nameless gitlink in a split index replaces a shared entry: then every shared
/// name is returned. None when the index is missing or unreadable ([`problem`] refuses an
/// index that cannot be read, and it is moved aside).
pub fn gitlinks(path: &Path) -> Vec<Vec<u8>> {
    use gix_index::entry::Mode;
    let Some(state) = read_index(path).ok().flatten().and_then(|d| gix_state(&d)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut nameless = false;
    for e in state.entries().iter().filter(|e| e.mode == Mode::COMMIT) {
        let name = e.path(&state);
        if name.is_empty() {
            nameless = true;
        } else {
            out.push(name.to_vec());
        }
    }
    if let Some(link) = state.link() {
        let shared = path.with_file_name(format!("sharedindex.{}", link.shared_index_checksum));
        if let Some(old) = read_index(&shared)
            .ok()
            .flatten()
            .and_then(|d| gix_state(&d))
        {
            for e in old.entries() {
                if nameless || e.mode == Mode::COMMIT {
                    out.push(e.path(&old).to_vec());
                }
            }
        }
    }
    out
}

/// The signatures of the extensions of the index `data` ([`layout`]).
#[cfg(test)]
fn extension_names(data: &[u8]) -> Result<Vec<[u8; 4]>, String> {
    Ok(layout(data)?
        .extensions
        .into_iter()
        .map(|(s, _)| s)
        .collect())
}

/// The host's git reads an index with `index.threads` (Scalar sets it) another way: the
/// extensions from where the `EOIE` record at the end says they start, and the entries in
/// blocks from where the `IEOT` table says each block starts. A normal reader skips an
/// `IEOT` payload unread, so a second set of entries or a second chain of extensions
/// (a tree cache) could hide inside one and be seen by threaded git only (red-team round
/// 15). Both records must therefore describe exactly what the one-pass walk found.
fn check_threaded_view(data: &[u8], layout: &Layout) -> Result<(), String> {
    let u32_at = |at: usize| -> Option<usize> {
        data.get(at..at + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let end = data.len() - 20;
    for sig in [b"EOIE", b"IEOT"] {
        if layout.extensions.iter().filter(|(s, _)| s == sig).count() > 1 {
            return Err(format!(
                "it has more than one {} extension (fail closed)",
                String::from_utf8_lossy(sig)
            ));
        }
    }
    // EOIE: git finds it by position — the last 32 bytes before the checksum — not by
    // walking; it must be the walk's last extension there, and name the walk's start of
    // the extensions.
    let tail = end.checked_sub(32).and_then(|at| data.get(at..at + 8));
    let positional = tail.is_some_and(|t| &t[..4] == b"EOIE" && u32_at(end - 28) == Some(24));
    let walked = layout.extensions.iter().find(|(s, _)| s == b"EOIE");
    match (positional, walked) {
        (false, None) => {}
        (true, Some((_, payload))) if payload.start == end - 24 && payload.end == end => {
            if u32_at(payload.start) != Some(layout.entries_end) {
                return Err(
                    "its end-of-entries record (EOIE) names another start of the extensions \
                     than its entries end at (fail closed)"
                        .to_string(),
                );
            }
        }
        _ => {
            return Err(
                "its end-of-entries record (EOIE) is not where git reads it (fail closed)"
                    .to_string(),
            )
        }
    }
    // IEOT: version 1, then (offset, count) per block; the blocks must start exactly at the
    // walk's entries, in order, and cover all of them; with version 4 names, a block's first
    // name must not lean on the previous entry's (git starts each block afresh).
    if let Some((_, payload)) = layout.extensions.iter().find(|(s, _)| s == b"IEOT") {
        let bad = |why: &str| Err(format!("its entry offset table (IEOT) {why} (fail closed)"));
        let table = &data[payload.clone()];
        if table.len() < 4
            || !(table.len() - 4).is_multiple_of(8)
            || u32_at(payload.start) != Some(1)
        {
            return bad("cannot be read");
        }
        let mut next = 0usize;
        for block in table[4..].chunks_exact(8) {
            let offset = u32::from_be_bytes([block[0], block[1], block[2], block[3]]) as usize;
            let n = u32::from_be_bytes([block[4], block[5], block[6], block[7]]) as usize;
            if layout.starts.get(next) != Some(&offset) {
                return bad("has a block that does not start at the next entry");
            }
            if layout.whole_names.get(next) == Some(&false) {
                return bad("has a block whose first name leans on the entry before");
            }
            next = next.saturating_add(n);
            if n == 0 || next > layout.starts.len() {
                return bad("has a block of entries the index does not hold");
            }
        }
        if next != layout.starts.len() {
            return bad("does not cover every entry");
        }
    }
    Ok(())
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

/// Why the index path `name` must not be checked out, if it must not. A `symlink` entry's
/// name has more rules (a link named `.gitmodules` is refused; a file of that name is every
/// repository with submodules — red-team round 19: every run in one lost its index).
pub fn unsafe_path(name: &[u8], symlink: bool) -> Option<&'static str> {
    use gix_index::validate::path::component::{Mode, Options};
    let options = Options {
        protect_windows: false,
        protect_hfs: true,
        protect_ntfs: true,
    };
    let parts: Vec<&[u8]> = name.split(|b| *b == b'/').collect();
    let last = parts.len().saturating_sub(1);
    for (i, part) in parts.iter().enumerate() {
        // The leaf is checked as what it is (a symlink's name has more rules).
        let mode = (i == last && symlink).then_some(Mode::Symlink);
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

/// Index entries that hide a change the command made to the work tree (red-team round 16):
/// `git status` and `git commit -a` trust an entry whose stat data (times, size, inode) match
/// the file — or which is marked assume-valid or skip-worktree — without reading the file,
/// so an entry the command wrote with the stat data of a file of other content hides that
/// content. For the files of `worktree` changed since `since` (their ctime, which nothing in
/// the sandbox can set back), whose entries git would trust, the file's blob id must be the
/// entry's. So must it for every trusted entry the run changed (a blob id or mark not in
/// `before`, the index as it was before the run: an entry pointing an untouched file at
/// another blob hid that blob from `git status` and the next `git commit -a` carried it;
/// round 18) — all trusted entries when `before` is unknown (`None`: the index was written in
/// place, or there was none). At most `budget` bytes are hashed; past that the index is
/// refused (fail closed).
pub fn hidden_change(
    index: &Path,
    worktree: &Path,
    since: std::time::SystemTime,
    budget: u64,
    before: Option<&[u8]>,
) -> Option<String> {
    use gix_index::entry::{Flags, Mode};
    use std::os::unix::fs::MetadataExt;
    let since = since
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs().saturating_sub(1))
        .unwrap_or(0);
    // An index nobody wrote during the run is the host's own: nothing to look at (and no
    // `lstat` of every tracked file at the end of every run).
    match std::fs::symlink_metadata(index) {
        Ok(m) if u64::try_from(m.ctime()).unwrap_or(0) >= since => {}
        _ => return None,
    }
    let data = match read_index(index) {
        Ok(Some(d)) => d,
        _ => return None,
    };
    let Some(state) = gix_state(&data) else {
        return None; // `problem` refuses what cannot be read
    };
    let marks = Flags::ASSUME_VALID | Flags::SKIP_WORKTREE;
    // The entries before the run: name → (blob id, marks). Unreadable counts as unknown.
    let before: Option<std::collections::HashMap<Vec<u8>, (gix_index::hash::ObjectId, Flags)>> =
        before.and_then(gix_state).map(|old| {
            old.entries()
                .iter()
                .filter(|e| e.stage_raw() == 0)
                .map(|e| (e.path(&old).to_vec(), (e.id, e.flags.intersection(marks))))
                .collect()
        });
    let mut hashed = 0u64;
    for entry in state.entries() {
        if entry.stage_raw() != 0
            || !matches!(
                entry.mode,
                Mode::FILE | Mode::FILE_EXECUTABLE | Mode::SYMLINK
            )
        {
            continue;
        }
        let name = entry.path(&state);
        if unsafe_path(name, entry.mode == Mode::SYMLINK).is_some() {
            continue;
        }
        let path = worktree.join(std::ffi::OsStr::from_bytes(name));
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let changed_by_run = before.as_ref().is_none_or(|b| {
            b.get::<[u8]>(name) != Some(&(entry.id, entry.flags.intersection(marks)))
        });
        if u64::try_from(meta.ctime()).unwrap_or(0) < since && !changed_by_run {
            continue;
        }
        // What the loosest git trusts unread: the seconds of the mtime and the size (git built
        // without USE_NSEC — Debian's — ignores nanoseconds, and `core.checkStat=minimal` or
        // `core.trustctime=false` leave out the ctime and the inode; an entry off by a
        // nanosecond passed an exact comparison: red-team round 19).
        let s = &entry.stat;
        let trusted = entry.flags.intersects(marks)
            || (i64::from(s.mtime.secs) == meta.mtime()
                && u64::from(s.size) == (meta.size() & 0xffff_ffff));
        if !trusted {
            continue;
        }
        hashed = hashed.saturating_add(meta.len());
        if hashed > budget {
            return Some(format!(
                "more work-tree files changed during the run than warden checks against it \
                 ({} MiB; fail closed)",
                budget >> 20
            ));
        }
        let content = if meta.file_type().is_symlink() {
            std::fs::read_link(&path)
                .map(|t| t.into_os_string().into_vec())
                .ok()
        } else {
            crate::policy::fsview::read_regular_file_nofollow(&path, budget).ok()
        };
        let Some(content) = content else { continue };
        let mut hasher = gix_index::hash::hasher(gix_index::hash::Kind::Sha1);
        hasher.update(format!("blob {}\0", content.len()).as_bytes());
        hasher.update(&content);
        let Ok(id) = hasher.try_finalize() else {
            continue;
        };
        if id != entry.id {
            return Some(format!(
                "its entry for {:?} says the file is unchanged (its stat data, or an \
                 assume-valid or skip-worktree mark), but the file holds other content: `git \
                 status` and `git commit -a` would not see the change",
                String::from_utf8_lossy(name)
            ));
        }
    }
    None
}

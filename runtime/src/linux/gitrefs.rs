//! What in a git dir changes what the host's git reads its objects as, without touching the
//! objects or the index: replace refs (`refs/replace/OID`, loose or in `packed-refs`: git
//! reads the replacement wherever it reads OID — `git show HEAD:f`, `git worktree add`,
//! `git checkout` — while `git status` compares the index with HEAD's recorded tree ids and
//! shows nothing), grafts (`info/grafts`) and alternates (`objects/info/alternates`,
//! `http-alternates`). git writes none of them in the course of normal work (`git replace`,
//! `git clone --reference` do, on request), so the sandbox's command must not leave one the
//! host's git did not have (red-team round 15: a replace ref made the user's next checkout of
//! HEAD write a backdoored file while `git status` stayed clean). Also `shallow` (it hides
//! history) and the object caches git reads instead of the objects — `commit-graph` (a commit's
//! tree and parents: red-team round 16 made the host commit a file the user never saw through
//! one), multi-pack indexes, bitmaps and reverse indexes — which are removed when changed (git
//! rebuilds them). Taken before the command starts — the user's own stay — and compared after
//! it ended.

use std::path::{Path, PathBuf};

/// One override in a git dir: a file (`info/grafts`, a loose `refs/replace/OID`), a replace
/// ref in `packed-refs`, or an object cache (compared by its inode, size and times).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Override {
    /// The git dir.
    pub dir: PathBuf,
    /// Relative to it: the file, or the ref's name (`refs/replace/OID`) — a ref is the same
    /// ref loose or packed (`git pack-refs` during the run moves the user's own into
    /// `packed-refs`).
    pub name: PathBuf,
    /// The file's bytes, the object id the ref names, or a cache's stamp.
    pub content: Vec<u8>,
    /// The `packed-refs` line it came from.
    pub line: Option<Vec<u8>>,
    /// An object cache: removed, not moved aside, when new or changed.
    pub cache: bool,
}

impl Override {
    fn same(&self, other: &Override) -> bool {
        self.dir == other.dir && self.name == other.name && self.content == other.content
    }
}

/// Entries looked at below `refs/replace` per git dir, directories included; past it the
/// whole directory is treated as the command's (no repository has that many replace refs).
const LIMIT: usize = 10_000;
/// The largest small file read whole (an alternates or grafts file, a replace ref, shallow).
const MAX_BYTES: u64 = 1 << 20;
/// The largest `packed-refs` read whole; a bigger one the command changed is moved aside.
const MAX_PACKED: u64 = 1 << 30;

/// The files git reads that change what objects mean, relative to a git dir — and
/// `config.worktree`, git config that takes effect the moment `extensions.worktreeConfig` is
/// turned on (`git sparse-checkout` turns it on: red-team round 21 had a planted one run its
/// `core.fsmonitor` then). An existing one is protected; a missing one is the command's to
/// create, so one that was not there is moved aside after the run. A linked worktree's
/// (`worktrees/NAME/config.worktree`) is looked at the same way.
const FILES: [&str; 5] = [
    "info/grafts",
    "shallow",
    "objects/info/alternates",
    "objects/info/http-alternates",
    CONFIG_WORKTREE,
];

const CONFIG_WORKTREE: &str = "config.worktree";

/// Linked worktrees looked at per git dir for their `config.worktree`.
const WORKTREES: usize = 256;

/// The overrides in `git_dirs` now.
pub fn snapshot(git_dirs: &[PathBuf]) -> Vec<Override> {
    let mut out = Vec::new();
    for dir in git_dirs {
        let mut files: Vec<PathBuf> = FILES.iter().map(PathBuf::from).collect();
        if let Ok(entries) = std::fs::read_dir(dir.join("worktrees")) {
            files.extend(entries.flatten().take(WORKTREES).map(|e| {
                Path::new("worktrees")
                    .join(e.file_name())
                    .join(CONFIG_WORKTREE)
            }));
        }
        let mut seen = 0usize;
        let mut stack = vec![PathBuf::from("refs/replace")];
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(dir.join(&d)) else {
                continue;
            };
            for e in entries.flatten() {
                seen += 1;
                if seen > LIMIT {
                    break;
                }
                let name = d.join(e.file_name());
                match e.file_type() {
                    Ok(t) if t.is_dir() => stack.push(name),
                    Ok(_) => files.push(name),
                    Err(_) => {}
                }
            }
            if seen > LIMIT {
                // Compared as one entry: a count no user reaches is the command's.
                out.push(Override {
                    dir: dir.clone(),
                    name: PathBuf::from("refs/replace"),
                    content: b"more entries than warden looks at".to_vec(),
                    line: None,
                    cache: false,
                });
                break;
            }
        }
        for name in files {
            if let Some(content) = read_file(&dir.join(&name), MAX_BYTES) {
                let content = if name.starts_with("refs") {
                    content.trim_ascii().to_vec()
                } else {
                    content
                };
                out.push(Override {
                    dir: dir.clone(),
                    name,
                    content,
                    line: None,
                    cache: false,
                });
            }
        }
        // Read whole (red-team round 16 hid a replace ref after the first MiB); one that is
        // not a regular file of at most MAX_PACKED bytes is compared as a whole instead.
        let packed = dir.join("packed-refs");
        match crate::policy::fsview::read_regular_file_nofollow(&packed, MAX_PACKED) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => out.extend(read_file(&packed, MAX_PACKED).map(|content| Override {
                dir: dir.clone(),
                name: PathBuf::from("packed-refs"),
                content,
                line: None,
                cache: false,
            })),
            Ok(text) => {
                for line in text.split(|b| *b == b'\n') {
                    let mut parts = line.splitn(2, |b| *b == b' ');
                    let (Some(id), Some(name)) = (parts.next(), parts.next()) else {
                        continue;
                    };
                    if name.starts_with(b"refs/replace/") {
                        out.push(Override {
                            dir: dir.clone(),
                            name: PathBuf::from(String::from_utf8_lossy(name).into_owned()),
                            content: id.to_vec(),
                            line: Some(line.to_vec()),
                            cache: false,
                        });
                    }
                }
            }
        }
        out.extend(caches(dir));
    }
    out
}

/// The object caches of `dir`, each with its stamp (inode, size, modification and change
/// times): `objects/info/commit-graph`, `objects/info/commit-graphs/*`, and in
/// `objects/pack` the multi-pack indexes (`multi-pack-index*`, also in `.d` directories),
/// bitmaps (`*.bitmap`) and reverse indexes (`*.rev`).
fn caches(dir: &Path) -> Vec<Override> {
    use std::os::unix::fs::MetadataExt;
    let mut names: Vec<PathBuf> = vec![PathBuf::from("objects/info/commit-graph")];
    let mut crowded = Vec::new();
    let mut listed = |sub: &str, keep: &dyn Fn(&str) -> bool| {
        if let Ok(entries) = std::fs::read_dir(dir.join(sub)) {
            // Every entry is looked at (the name filter first): a cache hidden behind junk
            // files passed a count taken before the filter (red-team round 17). More caches
            // than any repository has make the directory suspect as a whole.
            let mut found = 0usize;
            for e in entries.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if keep(&n) {
                    found += 1;
                    if found > LIMIT {
                        crowded.push(PathBuf::from(sub));
                        return;
                    }
                    names.push(Path::new(sub).join(n));
                }
            }
        }
    };
    listed("objects/info/commit-graphs", &|_| true);
    listed("objects/pack", &|n| {
        n.starts_with("multi-pack-index") || n.ends_with(".bitmap") || n.ends_with(".rev")
    });
    listed("objects/pack/multi-pack-index.d", &|_| true);
    let crowded: Vec<Override> = crowded
        .into_iter()
        .map(|name| Override {
            dir: dir.to_path_buf(),
            name,
            content: b"more caches than warden looks at".to_vec(),
            line: None,
            cache: true,
        })
        .collect();
    names
        .into_iter()
        .filter_map(|name| {
            let m = std::fs::symlink_metadata(dir.join(&name)).ok()?;
            let stamp = format!(
                "{} {} {} {} {} {}",
                m.ino(),
                m.size(),
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec()
            );
            Some(Override {
                dir: dir.to_path_buf(),
                name,
                content: stamp.into_bytes(),
                line: None,
                cache: true,
            })
        })
        .chain(crowded)
        .collect()
}

/// The bytes of the file at `path` — or, for anything git would read there that is not a
/// regular file of at most `max` bytes, a description of it, itself an override (git follows
/// a symbolic link: red-team round 17 pointed `objects/info/alternates` at a store of its own
/// that way); `None` when there is nothing.
fn read_file(path: &Path, max: u64) -> Option<Vec<u8>> {
    if let Ok(target) = std::fs::read_link(path) {
        return Some(format!("a symbolic link to {}", target.display()).into_bytes());
    }
    match crate::policy::fsview::read_regular_file_nofollow(path, max) {
        Ok(content) => Some(content),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => Some(format!("unreadable: {e}").into_bytes()),
    }
}

/// After the sandbox ended: overrides that were not there before (or changed) are removed —
/// a file moved aside, a `packed-refs` line taken out (the file rewritten without it) — and
/// reported. Returns whether one was.
pub fn final_check(git_dirs: &[PathBuf], before: &[Override]) -> bool {
    let now = snapshot(git_dirs);
    let mut blocked = false;
    let mut packed: Vec<(PathBuf, Vec<&[u8]>)> = Vec::new();
    for o in now.iter().filter(|o| !before.iter().any(|b| b.same(o))) {
        blocked = true;
        match &o.line {
            None if o.cache => {
                let path = o.dir.join(&o.name);
                let removed = if path.is_dir() {
                    // A directory crowded with caches: every cache in it goes.
                    remove_caches_in(&path)
                } else {
                    std::fs::remove_file(&path)
                };
                let what = match removed {
                    Ok(()) => "removed (git rebuilds it)".to_string(),
                    Err(e) => format!("could not remove it: {e}"),
                };
                eprintln!(
                    "warden: blocked: the command left {} changed in a protected git dir (git \
                     reads commits and objects through it); {what}",
                    path.display()
                );
            }
            None if o.name.starts_with("refs") && o.name != Path::new("refs/replace") => {
                // Anywhere below `refs/` it would still be a ref: removed (it only names an
                // object, given in the message).
                let path = o.dir.join(&o.name);
                let what = match std::fs::remove_file(&path) {
                    Ok(()) => "removed".to_string(),
                    Err(e) => format!("could not remove it: {e}"),
                };
                eprintln!(
                    "warden: blocked: the command left a replace ref {} -> {} in a protected \
                     git dir (the host's git would read that object instead); {what}",
                    o.name.display(),
                    String::from_utf8_lossy(&o.content)
                );
            }
            None if o.name.file_name() == Some(std::ffi::OsStr::new(CONFIG_WORKTREE)) => {
                // A linked worktree's is seen from the main git dir and its own: once.
                if std::fs::symlink_metadata(o.dir.join(&o.name)).is_err() {
                    continue;
                }
                let what = super::watch::move_aside(&o.dir.join(&o.name), true);
                eprintln!(
                    "warden: blocked: the command left {} in a protected git dir (git config \
                     the host's git reads once extensions.worktreeConfig is on, as `git \
                     sparse-checkout` turns it on); {what}",
                    o.dir.join(&o.name).display()
                );
            }
            None => {
                let what = super::watch::move_aside(&o.dir.join(&o.name), true);
                eprintln!(
                    "warden: blocked: the command left {} in a protected git dir (it changes \
                     what the host's git reads objects as); {what}",
                    o.dir.join(&o.name).display()
                );
            }
            Some(line) => {
                let path = o.dir.join("packed-refs");
                eprintln!(
                    "warden: blocked: the command left a replace ref in {} ({}): taken out",
                    path.display(),
                    String::from_utf8_lossy(line)
                );
                match packed.iter_mut().find(|(p, _)| *p == path) {
                    Some((_, lines)) => lines.push(line),
                    None => packed.push((path, vec![line])),
                }
            }
        }
    }
    for (path, lines) in packed {
        if let Err(e) = drop_lines(&path, &lines) {
            let aside = super::watch::move_aside(&path, false);
            eprintln!(
                "warden: could not rewrite {} without them ({e}): {aside}",
                path.display()
            );
        }
    }
    blocked
}

/// Removes the object caches in `dir` (all of `commit-graphs/`; multi-pack indexes, bitmaps
/// and reverse indexes of `pack/`), not the packs.
fn remove_caches_in(dir: &Path) -> std::io::Result<()> {
    let all = dir.ends_with("commit-graphs") || dir.ends_with("multi-pack-index.d");
    for e in std::fs::read_dir(dir)?.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        let cache = all
            || n.starts_with("multi-pack-index")
            || n.ends_with(".bitmap")
            || n.ends_with(".rev");
        if cache && e.file_type().is_ok_and(|t| !t.is_dir()) {
            std::fs::remove_file(e.path())?;
        }
    }
    Ok(())
}

/// Rewrites `packed-refs` at `path` without `lines` (a new file renamed over it).
fn drop_lines(path: &Path, lines: &[&[u8]]) -> std::io::Result<()> {
    let text = crate::policy::fsview::read_regular_file_nofollow(path, MAX_PACKED)?;
    let mut kept = Vec::with_capacity(text.len());
    let mut skip_peeled = false;
    for line in text.split_inclusive(|b| *b == b'\n') {
        let bare = line.strip_suffix(b"\n").unwrap_or(line);
        // A peeled line (`^OID`) belongs to the ref before it.
        if bare.starts_with(b"^") && skip_peeled {
            continue;
        }
        skip_peeled = lines.contains(&bare);
        if !skip_peeled {
            kept.extend_from_slice(line);
        }
    }
    // A fresh name, created exclusively: nothing the command planted there is followed.
    let tmp = path.with_file_name(format!(
        "packed-refs.warden-{:016x}",
        super::watch::random_u64()
    ));
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(&kept)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
#[path = "gitrefs_tests.rs"]
mod tests;

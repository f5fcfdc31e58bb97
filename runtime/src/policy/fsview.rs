//! The filesystem as the policy engine sees it: lstat, readlink and small reads, behind a trait
//! so decisions are unit-testable with an in-memory tree ([`MemFs`]) and benchmarkable without
//! syscalls. [`RealFs`] is the host's view. [`resolve`] follows symlinks like the kernel does
//! (`..` after a symlink applies to its target) and keeps going through missing components,
//! as `realpath -m` does, because policy must also answer for files that do not exist yet.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    Other,
}

pub trait FsView: Send + Sync {
    /// The kind of `path` without following a final symlink; `None` if it does not exist.
    fn kind(&self, path: &Path) -> Option<FileKind>;
    /// The target of the symlink at `path`.
    fn read_link(&self, path: &Path) -> Option<PathBuf>;
    /// A small text file's content (used for `.git` files of worktrees).
    fn read_to_string(&self, path: &Path) -> Option<String>;
    /// The names in a directory (empty if it is not one or cannot be read).
    fn read_dir(&self, path: &Path) -> Vec<OsString>;
}

/// Reads a regular file (following symlinks), at most `limit` bytes, without ever blocking:
/// the file is opened non-blocking and checked on the descriptor, so a FIFO, a device
/// (`/dev/zero`) or a socket planted where a settings file or `.git` is expected is refused
/// at once instead of hanging or filling memory. A longer file is an error too.
pub fn read_regular_file(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    read_regular(path, limit, 0)
}

/// [`read_regular_file`] without following a symbolic link at `path` (ELOOP): for files in
/// a directory the sandboxed command could write, where a link would lead the reader
/// elsewhere.
pub fn read_regular_file_nofollow(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    read_regular(path, limit, libc::O_NOFOLLOW)
}

fn read_regular(path: &Path, limit: u64, flags: libc::c_int) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | flags)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.len() > limit {
        return Err(std::io::Error::other(format!(
            "larger than {limit} bytes ({} bytes)",
            meta.len()
        )));
    }
    let mut buf = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(limit + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > limit {
        return Err(std::io::Error::other(format!("larger than {limit} bytes")));
    }
    Ok(buf)
}

/// The host filesystem.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFs;

impl FsView for RealFs {
    fn kind(&self, path: &Path) -> Option<FileKind> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        let ft = meta.file_type();
        Some(if ft.is_symlink() {
            FileKind::Symlink
        } else if ft.is_dir() {
            FileKind::Dir
        } else if ft.is_file() {
            FileKind::File
        } else {
            FileKind::Other
        })
    }

    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        std::fs::read_link(path).ok()
    }

    fn read_to_string(&self, path: &Path) -> Option<String> {
        String::from_utf8(read_regular_file(path, 64 * 1024).ok()?).ok()
    }

    fn read_dir(&self, path: &Path) -> Vec<OsString> {
        std::fs::read_dir(path)
            .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default()
    }
}

#[derive(Clone, Debug)]
enum MemEntry {
    Dir,
    File(String),
    Symlink(PathBuf),
}

/// An in-memory tree for tests and benchmarks. Parents are created implicitly.
#[derive(Clone, Debug, Default)]
pub struct MemFs {
    entries: BTreeMap<Vec<u8>, MemEntry>,
}

fn key(path: &Path) -> Vec<u8> {
    path.as_os_str().as_bytes().to_vec()
}

impl MemFs {
    pub fn new() -> Self {
        let mut fs = MemFs::default();
        fs.entries.insert(b"/".to_vec(), MemEntry::Dir);
        fs
    }

    fn add_parents(&mut self, path: &Path) {
        for anc in path.ancestors().skip(1) {
            self.entries.entry(key(anc)).or_insert(MemEntry::Dir);
        }
    }

    pub fn dir(&mut self, path: impl AsRef<Path>) -> &mut Self {
        let path = path.as_ref();
        self.add_parents(path);
        self.entries.insert(key(path), MemEntry::Dir);
        self
    }

    pub fn file(&mut self, path: impl AsRef<Path>, content: &str) -> &mut Self {
        let path = path.as_ref();
        self.add_parents(path);
        self.entries
            .insert(key(path), MemEntry::File(content.to_string()));
        self
    }

    pub fn symlink(&mut self, path: impl AsRef<Path>, target: impl AsRef<Path>) -> &mut Self {
        let path = path.as_ref();
        self.add_parents(path);
        self.entries
            .insert(key(path), MemEntry::Symlink(target.as_ref().to_path_buf()));
        self
    }
}

impl FsView for MemFs {
    fn kind(&self, path: &Path) -> Option<FileKind> {
        self.entries
            .get(path.as_os_str().as_bytes())
            .map(|e| match e {
                MemEntry::Dir => FileKind::Dir,
                MemEntry::File(_) => FileKind::File,
                MemEntry::Symlink(_) => FileKind::Symlink,
            })
    }

    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        match self.entries.get(path.as_os_str().as_bytes()) {
            Some(MemEntry::Symlink(t)) => Some(t.clone()),
            _ => None,
        }
    }

    fn read_to_string(&self, path: &Path) -> Option<String> {
        match self.entries.get(path.as_os_str().as_bytes()) {
            Some(MemEntry::File(c)) => Some(c.clone()),
            _ => None,
        }
    }

    fn read_dir(&self, path: &Path) -> Vec<OsString> {
        let mut prefix = key(path);
        if prefix != b"/" {
            prefix.push(b'/');
        }
        self.entries
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter_map(|(k, _)| {
                let rest = &k[prefix.len()..];
                (!rest.is_empty() && !rest.contains(&b'/'))
                    .then(|| OsString::from_vec(rest.to_vec()))
            })
            .collect()
    }
}

/// Too many symlinks (the kernel's ELOOP limit).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("too many levels of symbolic links resolving {0}")]
pub struct LoopError(pub PathBuf);

const MAX_LINKS: usize = 40;

/// Makes `path` absolute against `cwd` and normalises it lexically: `.` dropped, `..` pops,
/// repeated and trailing slashes removed. Symlinks are not consulted.
pub fn lexical(cwd: &Path, path: &Path) -> PathBuf {
    lexical_cow(cwd, path).into_owned()
}

/// [`lexical`], borrowing `path` when it is already absolute and clean (no empty, `.` or `..`
/// component), which is the common case and then costs no allocation.
pub fn lexical_cow<'a>(cwd: &Path, path: &'a Path) -> Cow<'a, Path> {
    let raw = path.as_os_str().as_bytes();
    if raw.len() > 1
        && raw[0] == b'/'
        && raw[1..]
            .split(|b| *b == b'/')
            .all(|c| !matches!(c, b"" | b"." | b".."))
    {
        return Cow::Borrowed(path);
    }
    let mut out: Vec<u8> = Vec::with_capacity(raw.len() + cwd.as_os_str().len() + 1);
    out.push(b'/');
    if raw.first() != Some(&b'/') {
        walk_lexical(&mut out, cwd.as_os_str().as_bytes());
    }
    walk_lexical(&mut out, raw);
    Cow::Owned(PathBuf::from(OsString::from_vec(out)))
}

fn walk_lexical(out: &mut Vec<u8>, raw: &[u8]) {
    for comp in raw.split(|b| *b == b'/') {
        match comp {
            b"" | b"." => {}
            b".." => pop_component(out),
            name => push_component(out, name),
        }
    }
}

/// Removes the last component of an absolute byte path (`/` stays `/`).
#[inline]
fn pop_component(out: &mut Vec<u8>) {
    if out.len() > 1 {
        let i = out.iter().rposition(|b| *b == b'/').unwrap_or(0);
        out.truncate(i.max(1));
    }
}

#[inline]
fn push_component(out: &mut Vec<u8>, name: &[u8]) {
    if out.len() > 1 {
        out.push(b'/');
    }
    out.extend_from_slice(name);
}

/// Whether `path` has a `..` component.
pub fn has_dotdot(path: &Path) -> bool {
    path.as_os_str()
        .as_bytes()
        .split(|b| *b == b'/')
        .any(|c| c == b"..")
}

/// Resolves `path` (absolute, or relative to `cwd`) the way the kernel would, following every
/// symlink, including a final one, and continuing lexically through components that do not
/// exist. Allocates only when it meets a symlink.
pub fn resolve(fs: &dyn FsView, cwd: &Path, path: &Path) -> Result<PathBuf, LoopError> {
    let raw = path.as_os_str().as_bytes();
    // The bytes still to walk; a symlink replaces them with its target followed by the rest.
    let mut rest: Cow<[u8]> = if raw.first() == Some(&b'/') {
        Cow::Borrowed(raw)
    } else {
        let mut v = Vec::with_capacity(raw.len() + cwd.as_os_str().len() + 1);
        v.extend_from_slice(cwd.as_os_str().as_bytes());
        v.push(b'/');
        v.extend_from_slice(raw);
        Cow::Owned(v)
    };
    let mut out: Vec<u8> = Vec::with_capacity(rest.len());
    out.push(b'/');
    let mut pos = 0usize;
    let mut links = 0usize;
    let mut exists = true;
    loop {
        while rest.get(pos) == Some(&b'/') {
            pos += 1;
        }
        if pos >= rest.len() {
            break;
        }
        let end = rest[pos..]
            .iter()
            .position(|b| *b == b'/')
            .map_or(rest.len(), |i| pos + i);
        let comp = &rest[pos..end];
        if comp == b"." {
            pos = end;
            continue;
        }
        if comp == b".." {
            pop_component(&mut out);
            // Going up from a missing component lands on something that may exist again.
            exists = fs.kind(bytes_path(&out)).is_some();
            pos = end;
            continue;
        }
        let mark = out.len();
        push_component(&mut out, comp);
        pos = end;
        if !exists {
            continue;
        }
        match fs.kind(bytes_path(&out)) {
            None => exists = false,
            Some(FileKind::Symlink) => {
                links += 1;
                if links > MAX_LINKS {
                    return Err(LoopError(PathBuf::from(OsStr::from_bytes(raw))));
                }
                let target = fs.read_link(bytes_path(&out)).unwrap_or_default();
                let target = target.as_os_str().as_bytes();
                out.truncate(mark.max(1));
                if target.first() == Some(&b'/') {
                    out.truncate(1);
                }
                let mut next = Vec::with_capacity(target.len() + 1 + rest.len() - pos);
                next.extend_from_slice(target);
                next.push(b'/');
                next.extend_from_slice(&rest[pos..]);
                rest = Cow::Owned(next);
                pos = 0;
            }
            Some(_) => {}
        }
    }
    Ok(PathBuf::from(OsString::from_vec(out)))
}

/// Symlinks the operating system itself places at the top of the tree: macOS `/var`, `/tmp`,
/// `/etc` (into `/private`), Linux `/var/run`, `/var/lock` and the merged-`/usr` links. An entry
/// named through one of them is the same place under another spelling, not an escape.
const SYSTEM_ALIASES: &[&str] = &[
    "/var",
    "/tmp",
    "/etc",
    "/var/run",
    "/var/lock",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
];

/// Whether `real` (what `lexical` resolves to) lies outside the entry as written, after the
/// system's own aliases are taken into account: `allowWrite: ["out"]` with `out` a symlink to
/// `~/.ssh` escapes; `/var/run/x` resolving to `/run/x` does not. Both the policy (which
/// then refuses writes there) and the Linux view (which refuses to start) use this one rule.
pub fn escapes_entry(fs: &dyn FsView, lexical: &Path, real: &Path) -> bool {
    if is_under(real.as_os_str().as_bytes(), lexical.as_os_str().as_bytes()) {
        return false;
    }
    let mut named = lexical.to_path_buf();
    // Each alias is replaced at most once (an alias target may hold another alias).
    for _ in 0..SYSTEM_ALIASES.len() {
        let alias = SYSTEM_ALIASES.iter().find(|a| {
            is_under(named.as_os_str().as_bytes(), a.as_bytes())
                && fs.kind(Path::new(a)) == Some(FileKind::Symlink)
        });
        let Some(alias) = alias else { break };
        let Ok(target) = resolve(fs, Path::new("/"), Path::new(alias)) else {
            return true;
        };
        let rest = named
            .strip_prefix(alias)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        named = if rest.as_os_str().is_empty() {
            target
        } else {
            target.join(rest)
        };
        if is_under(real.as_os_str().as_bytes(), named.as_os_str().as_bytes()) {
            return false;
        }
    }
    true
}

#[inline]
fn bytes_path(b: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(b))
}

/// `path` equals `base` or lies below it (component-wise, on bytes: `/a/bc` is not below `/a/b`).
#[inline]
pub fn is_under(path: &[u8], base: &[u8]) -> bool {
    if base == b"/" {
        return path.first() == Some(&b'/');
    }
    path.len() >= base.len()
        && &path[..base.len()] == base
        && (path.len() == base.len() || path[base.len()] == b'/')
}

#[cfg(test)]
#[path = "fsview_tests.rs"]
mod tests;

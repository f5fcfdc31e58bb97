//! The filesystem as the policy engine sees it: lstat, readlink and small reads, behind a trait
//! so decisions are unit-testable with an in-memory tree ([`MemFs`]) and benchmarkable without
//! syscalls. [`RealFs`] is the host's view. [`resolve`] follows symlinks like the kernel does
//! (`..` after a symlink applies to its target) and keeps going through missing components,
//! as `realpath -m` does, because policy must also answer for files that do not exist yet.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

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
        use std::io::Read;
        let mut buf = String::new();
        std::fs::File::open(path)
            .ok()?
            .take(64 * 1024)
            .read_to_string(&mut buf)
            .ok()?;
        Some(buf)
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
    entries: HashMap<PathBuf, MemEntry>,
}

impl MemFs {
    pub fn new() -> Self {
        let mut fs = MemFs::default();
        fs.entries.insert(PathBuf::from("/"), MemEntry::Dir);
        fs
    }

    fn add_parents(&mut self, path: &Path) {
        for anc in path.ancestors().skip(1) {
            self.entries
                .entry(anc.to_path_buf())
                .or_insert(MemEntry::Dir);
        }
    }

    pub fn dir(&mut self, path: impl AsRef<Path>) -> &mut Self {
        let path = path.as_ref();
        self.add_parents(path);
        self.entries.insert(path.to_path_buf(), MemEntry::Dir);
        self
    }

    pub fn file(&mut self, path: impl AsRef<Path>, content: &str) -> &mut Self {
        let path = path.as_ref();
        self.add_parents(path);
        self.entries
            .insert(path.to_path_buf(), MemEntry::File(content.to_string()));
        self
    }

    pub fn symlink(&mut self, path: impl AsRef<Path>, target: impl AsRef<Path>) -> &mut Self {
        let path = path.as_ref();
        self.add_parents(path);
        self.entries.insert(
            path.to_path_buf(),
            MemEntry::Symlink(target.as_ref().to_path_buf()),
        );
        self
    }
}

impl FsView for MemFs {
    fn kind(&self, path: &Path) -> Option<FileKind> {
        self.entries.get(path).map(|e| match e {
            MemEntry::Dir => FileKind::Dir,
            MemEntry::File(_) => FileKind::File,
            MemEntry::Symlink(_) => FileKind::Symlink,
        })
    }

    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        match self.entries.get(path) {
            Some(MemEntry::Symlink(t)) => Some(t.clone()),
            _ => None,
        }
    }

    fn read_to_string(&self, path: &Path) -> Option<String> {
        match self.entries.get(path) {
            Some(MemEntry::File(c)) => Some(c.clone()),
            _ => None,
        }
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
    let mut out = if path.is_absolute() {
        PathBuf::from("/")
    } else {
        lexical(Path::new("/"), cwd)
    };
    for c in path.components() {
        match c {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    out
}

/// Whether `path` has a `..` component.
pub fn has_dotdot(path: &Path) -> bool {
    path.components().any(|c| c == Component::ParentDir)
}

/// Resolves `path` (absolute, or relative to `cwd`) the way the kernel would, following every
/// symlink, including a final one, and continuing lexically through components that do not
/// exist.
pub fn resolve(fs: &dyn FsView, cwd: &Path, path: &Path) -> Result<PathBuf, LoopError> {
    let start = if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    };
    // Pending components, in reverse order so the next one is popped from the end.
    let mut pending: Vec<PathBuf> = Vec::new();
    push_reversed(&mut pending, &start);
    let mut out = PathBuf::from("/");
    let mut links = 0usize;
    let mut exists = true;
    while let Some(comp) = pending.pop() {
        let name: &OsStr = comp.as_os_str();
        match name.as_bytes() {
            b"" | b"." | b"/" => continue,
            b".." => {
                out.pop();
                // Going up from a missing component lands on something that may exist again.
                exists = fs.kind(&out).is_some();
                continue;
            }
            _ => {}
        }
        out.push(name);
        if !exists {
            continue;
        }
        match fs.kind(&out) {
            None => exists = false,
            Some(FileKind::Symlink) => {
                links += 1;
                if links > MAX_LINKS {
                    return Err(LoopError(start));
                }
                let target = fs.read_link(&out).unwrap_or_default();
                out.pop();
                if target.is_absolute() {
                    out = PathBuf::from("/");
                }
                push_reversed(&mut pending, &target);
            }
            Some(_) => {}
        }
    }
    Ok(out)
}

fn push_reversed(pending: &mut Vec<PathBuf>, path: &Path) {
    let comps: Vec<PathBuf> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(PathBuf::from(n)),
            Component::ParentDir => Some(PathBuf::from("..")),
            _ => None,
        })
        .collect();
    pending.extend(comps.into_iter().rev());
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

//! Policy → [`Plan`]: everything the sandbox needs, as plain data. Pure apart from a bounded
//! walk of the writable roots through [`FsView`] to find protected files that already exist;
//! unit-tested without root. The plan crosses into the sandbox's init as JSON over a pipe.

use crate::policy::decision::ReasonKind;
use crate::policy::fsview::{FileKind, FsView};
use crate::policy::mandatory::{PROTECTED_DIRS, PROTECTED_FILES};
use crate::policy::merge::Policy;
use crate::policy::path::{Access, PathPattern};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// One step of building the sandbox's filesystem view, in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum MountOp {
    /// The host's root, recursively, read-only.
    RootReadOnly,
    /// A host path at the same place, read-write.
    Writable { path: PathBuf },
    /// A host directory `src` shown at `dst`, read-write (the private TMPDIR).
    WritableAt { src: PathBuf, dst: PathBuf },
    /// A directory inside a writable root bound onto itself (read-write as before), so it is
    /// a mount point and cannot be renamed or removed: every directory between a writable
    /// root and a protected or masked entry below it is pinned, or renaming an ancestor aside
    /// would carry the protection away and free the name (the kernel refuses to rename a
    /// mount point, not its parents).
    Pin { path: PathBuf },
    /// A path made read-only again (denyWrite, mandatory protections).
    ReadOnly { path: PathBuf },
    /// A directory hidden behind an empty read-only tmpfs (denyRead).
    MaskDir { path: PathBuf },
    /// A file hidden behind /dev/null (denyRead).
    MaskFile { path: PathBuf },
    /// A placeholder file hidden behind an empty read-only regular file (a `denyRead` path
    /// missing at the start, reserved in a writable root): the host's tools may write into
    /// the placeholder, the sandbox sees nothing; a regular file, so `git add` and friends
    /// treat it as an ordinary empty file.
    MaskEmpty { path: PathBuf },
    /// A host path re-exposed read-only inside a masked directory (allowRead).
    Expose { path: PathBuf, dir: bool },
    /// A fresh /proc for the new pid namespace, with the dangerous parts read-only or masked.
    Proc,
    /// A minimal /dev: null, zero, full, random, urandom, tty, pts, ptmx, shm, fd links.
    Dev,
    /// A host file `src` shown read-only at `dst` (an existing file): the sandbox's
    /// resolv.conf.
    FileAt { src: PathBuf, dst: PathBuf },
}

/// What the command's own process applies before exec.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hardening {
    /// Landlock write access beneath these paths only.
    pub landlock_writable: Vec<PathBuf>,
    pub allow_unix_sockets: bool,
    pub allow_namespaces: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The command and its arguments (bytes: arguments need not be UTF-8).
    pub argv: Vec<Vec<u8>>,
    /// Environment of the command, `NAME=VALUE` bytes.
    pub env: Vec<Vec<u8>>,
    pub cwd: PathBuf,
    pub hostname: String,
    /// Host directory the new root is assembled in.
    pub root: PathBuf,
    pub mounts: Vec<MountOp>,
    pub hardening: Hardening,
    /// rlimits by name (`nofile`, …) applied to the command.
    pub rlimits: Vec<(String, u64)>,
    /// Protected entries directly in each writable root, existing or not (see
    /// [`super::placeholder`]): the supervisor creates a missing one as an empty, marked
    /// placeholder before the sandbox starts and holds a shared lock on every marked one while
    /// it runs; the view binds each read-only (so it can be neither written nor replaced); the
    /// last sandbox holding an empty placeholder removes it.
    pub placeholders: Vec<Placeholder>,
    /// Where released placeholders are kept for the next run instead of being removed
    /// ([`super::placeholder`]'s pool, [`crate::files::placeholder_pool`]; protected in every
    /// sandbox as configuration).
    #[serde(default)]
    pub placeholder_pool: Option<PathBuf>,
    /// The proxy's and DNS stub's listeners pid 1 creates in the sandbox's net namespace;
    /// `None`: no network at all (nothing could be allowed).
    pub network: Option<super::net::NetworkPlan>,
    /// The command's own pseudo-terminal, opened by pid 1 in the sandbox's devpts
    /// (whole-process mode or `--pty` on a terminal); `None`: the caller's streams as they are.
    #[serde(default)]
    pub terminal: Option<super::pty::TerminalPlan>,
    /// Entries that must not come into existence while the command runs but cannot be
    /// masked in advance: a git dir's missing `commondir` (git dies on an empty placeholder,
    /// and one the command writes makes the host's git take hooks and config from wherever
    /// it points). Pid 1 watches their directories and moves such an entry aside at once.
    #[serde(default)]
    pub forbidden: Vec<PathBuf>,
    /// Protected file names (`.mcp.json`, `.pre-commit-config.yaml`, …) directly in each
    /// writable root that are missing when the sandbox starts and get no placeholder (an empty
    /// file would break tools on the host that read it meanwhile, and show in `git status`):
    /// pid 1 watches the roots and moves such a file aside as soon as it appears, and the
    /// supervisor once more after the run, so the host's tools never take it as configuration.
    #[serde(default)]
    pub missing_protected: Vec<PathBuf>,
    /// The inotify instance pid 1 inherits for its watches (the supervisor's descriptor
    /// number; see [`super::janitor::Janitor::watch_fd`]); `None`: pid 1 makes its own.
    #[serde(default)]
    pub watch_fd: Option<i32>,
    /// The protected git dirs (a `.git`, a linked worktree's or submodule's git dir, a bare
    /// repository): pid 1 checks every `index` the command writes in them while it runs, and
    /// the supervisor each one once more after it ended ([`super::gitindex`]).
    #[serde(default)]
    pub git_dirs: Vec<PathBuf>,
    /// Literal `denyRead` paths missing when the sandbox starts: pid 1 watches their nearest
    /// existing ancestor and masks each as soon as it appears.
    #[serde(default)]
    pub mask_later: Vec<PathBuf>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placeholder {
    pub path: PathBuf,
    pub dir: bool,
}

/// Where the sandbox's private run directory is (created by the supervisor).
#[derive(Clone, Debug)]
pub struct RunDirs {
    /// Staging directory for the new root.
    pub root: PathBuf,
    /// The sandbox's private TMPDIR (host side, shown at the same path inside).
    pub tmpdir: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("allowWrite entry {entry:?} resolves to {real}, outside of what it names; refusing to make it writable")]
    WritableEscapes { entry: String, real: PathBuf },
    #[error("`{list}` glob {entry:?} matches too much to apply (over {limit} paths visited below {base}); name narrower paths")]
    GlobTooBroad {
        list: &'static str,
        entry: String,
        base: PathBuf,
        limit: usize,
    },
    #[error("denyRead entry {entry:?} leads through a symlink in a writable directory to {real}: the sandbox could repoint it; deny {real} itself or remove the link")]
    DenyReadThroughWritableLink { entry: String, real: PathBuf },
    #[error("the working directory {0} does not exist")]
    NoCwd(PathBuf),
    #[error("{0}")]
    Limits(String),
}

/// Agent and editor config directories masked by a placeholder when missing from a writable
/// root: each would let a command leave config that runs code outside the sandbox later
/// (Claude Code hooks, VS Code tasks, ...). Empty directories are harmless to every tool.
/// Every protected directory name (`mandatory::PROTECTED_DIRS`) but `.ssh` (guarded in the
/// home directory only) and macOS's `LaunchAgents`.
pub fn placeholder_dirs() -> impl Iterator<Item = &'static str> {
    PROTECTED_DIRS
        .iter()
        .copied()
        .filter(|n| !matches!(*n, ".ssh" | "LaunchAgents"))
}

/// Directories skipped by the protected-file search (large and never holding agent config).
const SEARCH_SKIP: &[&str] = &["node_modules", "target", ".cache", "vendor"];

pub struct PlanInput<'a> {
    pub policy: &'a Policy,
    pub argv: Vec<Vec<u8>>,
    pub env: Vec<Vec<u8>>,
    pub dirs: RunDirs,
    pub network: Option<NetworkInput>,
}

/// The network part of a plan: the listeners, and the host file that becomes the sandbox's
/// resolv.conf (pointing at the stub DNS server).
#[derive(Clone, Debug)]
pub struct NetworkInput {
    pub plan: super::net::NetworkPlan,
    pub resolv_conf: PathBuf,
}

pub fn build(input: PlanInput<'_>, fs: &dyn FsView) -> Result<Plan, PlanError> {
    let p = input.policy;
    let paths = &p.paths;
    let cwd = crate::policy::fsview::resolve(fs, Path::new("/"), &p.context.cwd)
        .unwrap_or_else(|_| p.context.cwd.clone());
    if fs.kind(&cwd).is_none() {
        return Err(PlanError::NoCwd(cwd));
    }
    let mut mounts = vec![MountOp::RootReadOnly, MountOp::Proc, MountOp::Dev];
    let mut writable: Vec<PathBuf> = Vec::new();
    if paths.read_only.is_none() && !paths.disabled {
        for root in &paths.writable {
            match (&root.rule.pattern, root.list) {
                (_, "TMPDIR") => {}
                (PathPattern::Literal { lexical, resolved }, _) => {
                    let real = resolved.clone().unwrap_or_else(|| lexical.clone());
                    // An allowWrite symlink must not widen the writable set beyond what the
                    // entry names: its real target must lie below the entry as written (the
                    // system's own aliases such as /var/run aside; the policy decides).
                    if root.escapes.is_some() && fs.kind(lexical).is_some() {
                        return Err(PlanError::WritableEscapes {
                            entry: root.rule.text.to_string(),
                            real,
                        });
                    }
                    if fs.kind(&real).is_some() {
                        writable.push(real);
                    }
                }
                // Existing matches become writable; a match that is a symlink does not (its
                // target is not what the entry names).
                (PathPattern::Glob(m), _) => {
                    for path in expand_glob(fs, m, "filesystem.allowWrite", &root.rule.text)? {
                        if !matches!(fs.kind(&path), Some(FileKind::Symlink) | None) {
                            writable.push(path);
                        }
                    }
                }
            }
        }
    }
    // Session approvals (`--session`): each approved path the policy now allows *because* of
    // the approval (never a managed or mandatory denial, which no approval changes). A write
    // approval outside every writable root becomes a writable root of its own; one inside a
    // root lifts the denyWrite entries it covers, or is made writable again inside the entry
    // that covers it; a read approval lifts the denyRead masks it covers or is exposed inside
    // the mask that covers it.
    let approved = |access: Access| -> Vec<PathBuf> {
        if paths.read_only.is_some() || paths.disabled {
            return Vec::new();
        }
        p.approvals
            .paths(access)
            .into_iter()
            .filter(|a| p.check_path(fs, a, access).kind == ReasonKind::SessionApproval)
            .filter_map(|a| crate::policy::fsview::resolve(fs, Path::new("/"), &a).ok())
            .filter(|a| fs.kind(a).is_some())
            .collect()
    };
    let approved_write = approved(Access::Write);
    let approved_read = approved(Access::Read);
    let mut rewritable = Vec::new();
    for a in &approved_write {
        if writable.iter().any(|w| a.starts_with(w)) {
            rewritable.push(a.clone());
        } else {
            writable.push(a.clone());
        }
    }
    writable.sort();
    writable.dedup();
    for w in &writable {
        mounts.push(MountOp::Writable { path: w.clone() });
    }
    let tmp_enabled = paths.read_only.is_none()
        && !paths.disabled
        && paths.writable.iter().any(|w| w.list == "TMPDIR");
    if tmp_enabled {
        mounts.push(MountOp::WritableAt {
            src: input.dirs.tmpdir.clone(),
            dst: input.dirs.tmpdir.clone(),
        });
    }

    // Read-only again inside the writable roots: denyWrite and existing protected paths.
    let mut read_only: BTreeSet<PathBuf> = BTreeSet::new();
    let mut placeholders = Vec::new();
    let lifted = |p: &Path| approved_write.iter().any(|a| p.starts_with(a));
    for rule in &paths.deny_write {
        match &rule.pattern {
            // Existing: read-only; missing: its first missing component becomes a placeholder,
            // so it cannot be created either.
            PathPattern::Literal { lexical, resolved } => {
                for p in [Some(lexical), resolved.as_ref()].into_iter().flatten() {
                    if !lifted(p) {
                        guard_path(fs, p, false, &writable, &mut read_only, &mut placeholders);
                    }
                }
            }
            // Existing matches only: a file created later under a denyWrite glob is refused by
            // the policy (`warden check`), not by the view (docs/isolation.md).
            PathPattern::Glob(m) => {
                for path in expand_glob(fs, m, "filesystem.denyWrite", &rule.text)? {
                    if writable.iter().any(|w| path.starts_with(w)) && !lifted(&path) {
                        read_only.insert(path);
                    }
                }
            }
        }
    }
    let depth = p
        .effective
        .u64("mandatoryDenySearchDepth")
        .map_or(3, |d| d.min(16) as usize);
    let mut search_roots = writable.clone();
    if tmp_enabled {
        search_roots.push(input.dirs.tmpdir.clone());
    }
    for root in &search_roots {
        find_protected(
            fs,
            root,
            depth,
            paths.mandatory.allow_git_config,
            &p.context.home,
            &mut read_only,
        );
    }
    // Configuration protected by absolute path (warden's settings, git's user config).
    for c in &paths.mandatory.config {
        guard_path(
            fs,
            &c.path,
            c.dir,
            &writable,
            &mut read_only,
            &mut placeholders,
        );
        // A writable root inside a protected directory (`--allow-write ~/.config/git/x`) is
        // read-only as a whole: mandatory protections cannot be allowed away.
        if c.dir {
            for root in writable
                .iter()
                .filter(|w| w.starts_with(&c.path) && **w != c.path)
            {
                read_only.insert(root.clone());
            }
        }
    }
    // The home directory as the roots name it (resolved): a home reached through a symlink
    // is still the home.
    let home_real = crate::policy::fsview::resolve(fs, Path::new("/"), &p.context.home)
        .unwrap_or_else(|_| p.context.home.clone());
    // Protected entries directly in each writable root: every one is a placeholder candidate
    // (another sandbox's placeholder exists already); a missing one is masked read-only too.
    for root in &writable {
        let mut missing = |path: PathBuf, dir: bool| {
            if placeholders.iter().any(|p: &Placeholder| p.path == path) {
                return;
            }
            if fs.kind(&path).is_none() {
                read_only.insert(path.clone());
            }
            placeholders.push(Placeholder { path, dir });
        };
        for name in placeholder_dirs() {
            missing(root.join(name), true);
        }
        // Missing hooks directories: the repository's, its submodules' (`git submodule
        // update` runs their hooks on the host), and those of a git dir the root is or lies
        // in.
        let mut gitdirs: Vec<PathBuf> = enclosing_git_dirs(fs, root)
            .into_iter()
            .map(|(g, _)| g)
            .collect();
        if fs.kind(&root.join(".git")) == Some(FileKind::Dir) {
            gitdirs.push(root.join(".git"));
        }
        for gitdir in gitdirs {
            let mut modules = Vec::new();
            module_git_dirs(fs, &gitdir.join("modules"), 0, &mut modules);
            let hooks = std::iter::once(gitdir)
                .chain(modules)
                .map(|g| g.join("hooks"));
            for h in hooks {
                if h.starts_with(root) {
                    missing(h, true);
                }
            }
        }
    }
    // A writable root that is a git dir or lies in one: that repository's protections inside
    // the root are read-only, and a root inside a protected entry (`--allow-write
    // .git/hooks`) is read-only as a whole — mandatory protections cannot be allowed away.
    for root in &writable {
        for (gitdir, worktree) in enclosing_git_dirs(fs, root) {
            let mut found = BTreeSet::new();
            protect_repository(
                fs,
                &gitdir,
                &worktree,
                paths.mandatory.allow_git_config,
                &p.context.home,
                &mut found,
            );
            for p in found {
                if p.starts_with(root) {
                    read_only.insert(p);
                } else if root.starts_with(&p) {
                    read_only.insert(root.clone());
                }
            }
        }
    }
    // Shell rc files, .ssh and .gitconfig only where they take effect: a writable home
    // directory — a writable root itself, or inside one.
    for home in [&home_real, &p.context.home] {
        if !writable.iter().any(|w| home.starts_with(w)) || fs.kind(home).is_none() {
            continue;
        }
        guard_path(
            fs,
            &home.join(".ssh"),
            true,
            &writable,
            &mut read_only,
            &mut placeholders,
        );
        for name in PROTECTED_FILES.iter().filter(|n| {
            n.starts_with(".bash")
                || n.starts_with(".z")
                || **n == ".profile"
                || **n == ".gitconfig"
        }) {
            guard_path(
                fs,
                &home.join(name),
                false,
                &writable,
                &mut read_only,
                &mut placeholders,
            );
        }
    }
    for gitdir in &paths.mandatory.extra_git_dirs {
        for name in ["hooks", "config", "config.worktree", "commondir", "gitdir"] {
            let p = gitdir.join(name);
            if (!name.starts_with("config") || !paths.mandatory.allow_git_config)
                && fs.kind(&p).is_some()
                && writable.iter().any(|w| p.starts_with(w))
            {
                read_only.insert(p);
            }
        }
    }
    // A write approval inside a read-only denyWrite entry: writable again, with the
    // protected entries below it read-only again on top.
    let rewritable: Vec<PathBuf> = rewritable
        .into_iter()
        .filter(|a| read_only.iter().any(|r| a.starts_with(r) && a != r))
        .collect();
    let mut reprotected = BTreeSet::new();
    for a in &rewritable {
        find_protected(
            fs,
            a,
            depth,
            paths.mandatory.allow_git_config,
            &p.context.home,
            &mut reprotected,
        );
    }
    // Git dirs among the protections (holding HEAD) without a `commondir`: pid 1 keeps one
    // from appearing (linked worktrees' own git dirs have one; they are not touched).
    let forbidden: Vec<PathBuf> = read_only
        .iter()
        .filter(|p| p.ends_with("hooks") || p.ends_with("config"))
        .filter_map(|p| p.parent())
        .filter(|g| fs.kind(&g.join("HEAD")).is_some() && fs.kind(&g.join("commondir")).is_none())
        .map(|g| g.join("commondir"))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let git_dirs: Vec<PathBuf> = read_only
        .iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n == "hooks" || n == "config" || n == "commondir" || n == "gitdir")
        })
        .filter_map(|p| p.parent())
        .filter(|g| fs.kind(&g.join("HEAD")) == Some(FileKind::File))
        .map(Path::to_path_buf)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut pin_roots = writable.clone();
    if tmp_enabled {
        pin_roots.push(input.dirs.tmpdir.clone());
    }
    let pin_at = mounts.len();
    let read_only_list: Vec<PathBuf> = read_only.iter().cloned().collect();
    let missing_protected = missing_protected_files(fs, &writable, &placeholders, &read_only);
    mounts.extend(read_only.into_iter().map(|path| MountOp::ReadOnly { path }));
    for a in &rewritable {
        mounts.push(MountOp::Writable { path: a.clone() });
    }
    let rewritable_pins = pins(reprotected.iter(), &rewritable, &reprotected);
    mounts.extend(
        rewritable_pins
            .into_iter()
            .map(|path| MountOp::Pin { path }),
    );
    mounts.extend(
        reprotected
            .into_iter()
            .map(|path| MountOp::ReadOnly { path }),
    );

    // denyRead: directories behind empty tmpfs, files behind /dev/null; then allowRead.
    let mut mask_later = Vec::new();
    for rule in &paths.deny_read {
        match &rule.pattern {
            PathPattern::Literal { lexical, resolved } => {
                let real = resolved.as_ref().unwrap_or(lexical);
                if approved_read.iter().any(|a| real.starts_with(a)) {
                    continue;
                }
                let root = writable
                    .iter()
                    .filter(|w| real.starts_with(w))
                    .max_by_key(|w| w.components().count());
                // A symlink on the way that the sandbox could repoint: the mask would guard
                // the old target while the name the user denied leads elsewhere.
                if real != lexical && writable.iter().any(|w| lexical.starts_with(w)) {
                    return Err(PlanError::DenyReadThroughWritableLink {
                        entry: rule.text.to_string(),
                        real: real.clone(),
                    });
                }
                // Inside another mask already (`.aws` and `.aws/credentials`).
                let covered = |p: &Path| {
                    mounts.iter().any(|m| {
                        matches!(m, MountOp::MaskDir { path } | MountOp::MaskFile { path } | MountOp::MaskEmpty { path } if p.starts_with(path))
                    })
                };
                if covered(real) {
                    continue;
                }
                let kind = fs.kind(real);
                // An existing one in a writable root may be another sandbox's placeholder:
                // held while this one runs, like the protected entries.
                if let (Some(r), Some(k @ (FileKind::Dir | FileKind::File))) = (root, kind) {
                    if real != r && !placeholders.iter().any(|p| p.path == *real) {
                        placeholders.push(Placeholder {
                            path: real.clone(),
                            dir: k == FileKind::Dir,
                        });
                    }
                }
                match kind {
                    Some(crate::policy::fsview::FileKind::Dir) => {
                        mounts.push(MountOp::MaskDir { path: real.clone() })
                    }
                    Some(_) => mounts.push(MountOp::MaskFile { path: real.clone() }),
                    None => {
                        // Missing inside a writable root: the command could make it first and
                        // keep a handle, so its first missing component becomes a placeholder,
                        // masked like the rest (the host's tools write into it; the sandbox
                        // never sees it). Elsewhere only the host can make it: pid 1 masks it
                        // as soon as it appears (`aws configure` while an agent runs).
                        match root.and_then(|r| first_missing(fs, real, r, false)) {
                            Some(ph) if covered(&ph.path) => {}
                            Some(ph) => {
                                mounts.push(if ph.dir {
                                    MountOp::MaskDir {
                                        path: ph.path.clone(),
                                    }
                                } else {
                                    MountOp::MaskEmpty {
                                        path: ph.path.clone(),
                                    }
                                });
                                if !placeholders.iter().any(|p| p.path == ph.path) {
                                    placeholders.push(ph);
                                }
                            }
                            None if root.is_none() => mask_later.push(real.clone()),
                            None => {}
                        }
                    }
                }
            }
            PathPattern::Glob(m) => {
                for path in expand_glob(fs, m, "filesystem.denyRead", &rule.text)? {
                    if approved_read.iter().any(|a| path.starts_with(a)) {
                        continue;
                    }
                    match fs.kind(&path) {
                        Some(FileKind::Dir) => mounts.push(MountOp::MaskDir { path }),
                        // A symlink's target is masked where it is (if it matches itself).
                        Some(FileKind::Symlink) | None => {}
                        Some(_) => mounts.push(MountOp::MaskFile { path }),
                    }
                }
            }
        }
    }
    for rule in &paths.allow_read {
        if let PathPattern::Literal { lexical, resolved } = &rule.pattern {
            let real = resolved.as_ref().unwrap_or(lexical);
            let masked = mounts.iter().any(|m| matches!(m, MountOp::MaskDir { path } if real.starts_with(path) && real != path));
            if masked {
                if let Some(kind) = fs.kind(real) {
                    mounts.push(MountOp::Expose {
                        path: real.clone(),
                        dir: kind == crate::policy::fsview::FileKind::Dir,
                    });
                }
            }
        }
    }

    for a in &approved_read {
        let masked = mounts.iter().any(
            |m| matches!(m, MountOp::MaskDir { path } | MountOp::MaskFile { path } | MountOp::MaskEmpty { path } if a.starts_with(path) && a != path),
        );
        if masked {
            mounts.push(MountOp::Expose {
                path: a.clone(),
                dir: fs.kind(a) == Some(FileKind::Dir),
            });
        }
    }

    // Pins for everything protected or masked inside a writable root, before the first
    // read-only mount (each later mount lands inside the pinned directories).
    let masked: Vec<PathBuf> = mounts
        .iter()
        .filter_map(|m| match m {
            MountOp::MaskDir { path }
            | MountOp::MaskFile { path }
            | MountOp::MaskEmpty { path } => Some(path.clone()),
            _ => None,
        })
        .collect();
    let ro_set: BTreeSet<PathBuf> = read_only_list.iter().cloned().collect();
    let pinned = pins(
        read_only_list.iter().chain(masked.iter()),
        &pin_roots,
        &ro_set,
    );
    let rest = mounts.split_off(pin_at);
    mounts.extend(pinned.into_iter().map(|path| MountOp::Pin { path }));
    mounts.extend(rest);

    // /etc/resolv.conf (or what its symlink points at) shows the stub resolver.
    if let Some(net) = input.network.as_ref().filter(|n| n.plan.dns) {
        let etc = Path::new("/etc/resolv.conf");
        if let Ok(real) = crate::policy::fsview::resolve(fs, Path::new("/"), etc) {
            if fs.kind(&real) == Some(crate::policy::fsview::FileKind::File) {
                mounts.push(MountOp::FileAt {
                    src: net.resolv_conf.clone(),
                    dst: real,
                });
            }
        }
    }

    let mut landlock_writable = writable.clone();
    if tmp_enabled {
        landlock_writable.push(input.dirs.tmpdir.clone());
    }
    let allow_all_unix = p
        .effective
        .bool("network.allowAllUnixSockets")
        .unwrap_or(false);
    // Checked here, so a misspelt name fails before anything starts.
    crate::policy::limits::rlimits(p).map_err(PlanError::Limits)?;
    let rlimits = p
        .effective
        .maps
        .get("warden.limits.rlimits")
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.value.as_u64().map(|n| (k.clone(), n)))
                .collect()
        })
        .unwrap_or_default();
    Ok(Plan {
        argv: input.argv,
        env: input.env,
        cwd,
        hostname: "warden".to_string(),
        root: input.dirs.root,
        mounts,
        hardening: Hardening {
            landlock_writable,
            // allowUnixSockets paths: seccomp lets AF_UNIX sockets be created and the
            // cgroup/connect_unix eBPF program limits connects to those paths (audit/).
            allow_unix_sockets: allow_all_unix || !p.unix_sockets.is_empty(),
            allow_namespaces: p
                .effective
                .bool("enableWeakerNestedSandbox")
                .unwrap_or(false),
        },
        rlimits,
        placeholders,
        placeholder_pool: p
            .context
            .protected
            .iter()
            .find(|c| c.what == crate::policy::mandatory::PLACEHOLDER_POOL_WHAT)
            .map(|c| c.path.clone()),
        network: input.network.map(|n| n.plan),
        terminal: None,
        forbidden,
        missing_protected,
        watch_fd: None,
        git_dirs,
        mask_later,
    })
}

/// The protected file names missing directly in each writable root, without a placeholder
/// and not inside a read-only entry ([`Plan::missing_protected`]).
fn missing_protected_files(
    fs: &dyn FsView,
    writable: &[PathBuf],
    placeholders: &[Placeholder],
    read_only: &BTreeSet<PathBuf>,
) -> Vec<PathBuf> {
    let mut out = BTreeSet::new();
    for root in writable {
        if read_only.iter().any(|r| root.starts_with(r)) {
            continue;
        }
        for name in PROTECTED_FILES {
            let path = root.join(name);
            if fs.kind(&path).is_none() && !placeholders.iter().any(|p| p.path == path) {
                out.insert(path);
            }
        }
    }
    out.into_iter().collect()
}

/// Entries visited at most while expanding one glob; more fails the run (a deny glob that
/// cannot be applied completely must not be applied partly).
const GLOB_VISIT_LIMIT: usize = 200_000;
/// Directory levels below the glob's literal prefix searched for `**`.
const GLOB_MAX_DEPTH: usize = 16;

/// Existing paths matching a settings glob: a walk from the glob's literal prefix (the
/// components before the first `*?[{`), never following symlinks, as deep as the pattern
/// reaches (`GLOB_MAX_DEPTH` for `**`).
fn expand_glob(
    fs: &dyn FsView,
    matcher: &globset::GlobMatcher,
    list: &'static str,
    entry: &str,
) -> Result<Vec<PathBuf>, PlanError> {
    let pattern = matcher.glob().glob();
    let mut base = PathBuf::from("/");
    let mut rest = 0usize;
    let mut recursive = false;
    let mut in_prefix = true;
    for comp in Path::new(pattern).components().skip(1) {
        let text = comp.as_os_str().to_string_lossy();
        if in_prefix && !text.contains(['*', '?', '[', '{']) {
            base.push(comp.as_os_str());
        } else {
            in_prefix = false;
            rest += 1;
            recursive |= text.contains("**");
        }
    }
    let max_depth = if recursive { GLOB_MAX_DEPTH } else { rest };
    let mut out = Vec::new();
    let mut visited = 0usize;
    let mut stack = vec![(base.clone(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        if depth >= max_depth {
            continue;
        }
        for name in fs.read_dir(&dir) {
            visited += 1;
            if visited > GLOB_VISIT_LIMIT {
                return Err(PlanError::GlobTooBroad {
                    list,
                    entry: entry.to_string(),
                    base,
                    limit: GLOB_VISIT_LIMIT,
                });
            }
            let path = dir.join(&name);
            let kind = fs.kind(&path);
            if matcher.is_match(&path) {
                out.push(path.clone());
            }
            if kind == Some(FileKind::Dir) {
                stack.push((path, depth + 1));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// A protected `path` inside a writable root (the deepest of `roots` holding it): read-only
/// if it exists; otherwise its first missing component becomes a placeholder — a directory,
/// or for the last component a file unless `dir` — masked read-only, so the path cannot be
/// created. Outside every writable root nothing is needed (the host is read-only there); a
/// symlink on the way is left alone (the policy protects what it resolves to).
fn guard_path(
    fs: &dyn FsView,
    path: &Path,
    dir: bool,
    roots: &[PathBuf],
    read_only: &mut BTreeSet<PathBuf>,
    placeholders: &mut Vec<Placeholder>,
) {
    let Some(root) = roots
        .iter()
        .filter(|w| path.starts_with(w))
        .max_by_key(|w| w.components().count())
    else {
        return;
    };
    if let Some(kind) = fs.kind(path) {
        read_only.insert(path.to_path_buf());
        // Existing ones are placeholder candidates too: another sandbox's placeholder looks
        // like the user's own entry to the plan, and must be held while this one runs.
        if path != root.as_path()
            && matches!(kind, FileKind::Dir | FileKind::File)
            && !placeholders.iter().any(|p| p.path == path)
        {
            placeholders.push(Placeholder {
                path: path.to_path_buf(),
                dir: kind == FileKind::Dir,
            });
        }
        return;
    }
    if let Some(ph) = first_missing(fs, path, root, dir) {
        read_only.insert(ph.path.clone());
        if !placeholders.iter().any(|p| p.path == ph.path) {
            placeholders.push(ph);
        }
    }
}

/// The placeholder for the first missing component of `path` below `root` (an existing
/// directory): a directory, or for the last component a file unless `dir`. `None` when a
/// component on the way is not a directory (a symlink: the policy judges what it points to).
fn first_missing(fs: &dyn FsView, path: &Path, root: &Path, dir: bool) -> Option<Placeholder> {
    let rel = path.strip_prefix(root).ok()?;
    let mut cur = root.to_path_buf();
    for comp in rel.components() {
        cur.push(comp);
        match fs.kind(&cur) {
            Some(FileKind::Dir) => {}
            Some(_) => return None,
            None => {
                let last = cur.as_path() == path;
                return Some(Placeholder {
                    path: cur,
                    dir: !last || dir,
                });
            }
        }
    }
    None
}

/// The directories to pin ([`MountOp::Pin`]) for `targets`: every directory strictly
/// between a target and the deepest of `roots` holding it, and on from that root to the next
/// root holding it, and so on (a root nested in another is a mount point, its parents in the
/// outer root are not) — except roots themselves and what lies at or below an entry of
/// `covered` (read-only already: nothing inside can be renamed).
fn pins<'a>(
    targets: impl Iterator<Item = &'a PathBuf>,
    roots: &'a [PathBuf],
    covered: &BTreeSet<PathBuf>,
) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    // A root nested in another needs its parents pinned like any protected entry.
    let nested: Vec<&PathBuf> = roots
        .iter()
        .filter(|r| roots.iter().any(|o| r.starts_with(o) && r != &o))
        .collect();
    for t in targets.chain(nested) {
        let mut cur: &Path = t;
        while let Some(root) = roots
            .iter()
            .filter(|w| cur.starts_with(w) && cur != w.as_path())
            .max_by_key(|w| w.components().count())
        {
            let mut a = cur.parent();
            while let Some(dir) = a {
                if dir == root.as_path() || !dir.starts_with(root) {
                    break;
                }
                if !covered.iter().any(|c| dir.starts_with(c)) && !roots.iter().any(|r| r == dir) {
                    out.insert(dir.to_path_buf());
                }
                a = dir.parent();
            }
            cur = root;
        }
    }
    out
}

/// Existing protected files and directories below `root`, at most `depth` levels down.
fn find_protected(
    fs: &dyn FsView,
    root: &Path,
    depth: usize,
    allow_git_config: bool,
    home: &Path,
    out: &mut BTreeSet<PathBuf>,
) {
    // The view says what each entry is (lstat), so symlinks are never followed out of the root.
    for name in fs.read_dir(root) {
        let Some(name) = name.to_str() else { continue };
        let path = root.join(name);
        let kind = fs.kind(&path);
        if PROTECTED_FILES.contains(&name) || PROTECTED_DIRS.contains(&name) {
            out.insert(path);
            continue;
        }
        // A `.git` file points at the git dir (worktrees, submodules): repointing it would
        // bring hooks and config of the command's choosing.
        if name == ".git" && kind == Some(FileKind::File) {
            out.insert(path);
            continue;
        }
        if name == ".git" && kind == Some(FileKind::Dir) {
            protect_repository(fs, &path, root, allow_git_config, home, out);
            continue;
        }
        // A bare repository (`remote.git` beside its clone): a host `git push` runs its hooks.
        if kind == Some(FileKind::Dir)
            && fs.kind(&path.join("HEAD")) == Some(FileKind::File)
            && crate::policy::mandatory::is_git_dir(fs, &path)
        {
            protect_repository(fs, &path, &path, allow_git_config, home, out);
            continue;
        }
        if depth > 1
            && kind == Some(crate::policy::fsview::FileKind::Dir)
            && !SEARCH_SKIP.contains(&name)
        {
            find_protected(fs, &path, depth - 1, allow_git_config, home, out);
        }
    }
}

/// Everything of the repository whose git dir is `gitdir` (a `.git` directory, or a bare
/// repository's directory) that decides what runs: its hooks and config, the hooks directory
/// and includes its config names, its submodules' and linked worktrees' git dirs and the
/// `.git` files pointing at them.
fn protect_repository(
    fs: &dyn FsView,
    gitdir: &Path,
    worktree: &Path,
    allow_git_config: bool,
    home: &Path,
    out: &mut BTreeSet<PathBuf>,
) {
    protect_git_dir(fs, gitdir, allow_git_config, out);
    protect_named_by_config(fs, gitdir, worktree, home, out);
    if fs.kind(&gitdir.join("modules")) == Some(FileKind::Dir) {
        submodule_git_dirs(fs, &gitdir.join("modules"), allow_git_config, home, out);
    }
    let worktrees = gitdir.join("worktrees");
    for wt in fs.read_dir(&worktrees) {
        let wt = worktrees.join(wt);
        if fs.kind(&wt) == Some(FileKind::Dir) {
            protect_git_dir(fs, &wt, allow_git_config, out);
            // The linked worktree's `.git` file, wherever the worktree lives.
            if let Some(dotgit) = fs
                .read_to_string(&wt.join("gitdir"))
                .and_then(|t| t.lines().next().map(|l| PathBuf::from(l.trim())))
                .filter(|p| p.is_absolute())
            {
                if fs.kind(&dotgit) == Some(FileKind::File) {
                    out.insert(dotgit);
                }
            }
        }
    }
}

/// The git dirs a writable root is, or lies in (`--allow-write repo/.git`, a bare repository,
/// `.git/modules/lib`), each with its worktree: the search below a root never sees them.
fn enclosing_git_dirs(fs: &dyn FsView, root: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    for dir in root.ancestors() {
        let dotgit = dir.file_name().is_some_and(|n| n == ".git");
        if (dotgit && fs.kind(dir) == Some(FileKind::Dir))
            || crate::policy::mandatory::is_git_dir(fs, dir)
        {
            let worktree = if dotgit {
                dir.parent().unwrap_or(dir).to_path_buf()
            } else {
                module_worktree(fs, dir).unwrap_or_else(|| dir.to_path_buf())
            };
            out.push((dir.to_path_buf(), worktree));
        }
    }
    out
}

/// The existing entries of a git dir that decide what runs: hooks, config (unless released)
/// and a linked worktree's pointers.
fn protect_git_dir(
    fs: &dyn FsView,
    gitdir: &Path,
    allow_git_config: bool,
    out: &mut BTreeSet<PathBuf>,
) {
    for sub in ["hooks", "config", "config.worktree", "commondir", "gitdir"] {
        let p = gitdir.join(sub);
        if (!sub.starts_with("config") || !allow_git_config) && fs.kind(&p).is_some() {
            out.insert(p);
        }
    }
}

/// The existing hooks directory and included config files the git config of `gitdir` (with
/// its worktree at `worktree`) names ([`crate::policy::mandatory::config_named_paths`]).
fn protect_named_by_config(
    fs: &dyn FsView,
    gitdir: &Path,
    worktree: &Path,
    home: &Path,
    out: &mut BTreeSet<PathBuf>,
) {
    for c in crate::policy::mandatory::config_named_paths(fs, gitdir, worktree, Some(home)) {
        if fs.kind(&c.path).is_some() {
            out.insert(c.path);
        }
    }
}

/// The checkout of a submodule's git dir: its config's `core.worktree`, relative to the git
/// dir.
pub(crate) fn module_worktree(fs: &dyn FsView, gitdir: &Path) -> Option<PathBuf> {
    let text = fs.read_to_string(&gitdir.join("config"))?;
    let value = text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("worktree")
            .then(|| v.trim().trim_matches('"').to_string())
    })?;
    Some(crate::policy::fsview::lexical(gitdir, Path::new(&value)))
}

/// Levels of `.git/modules` searched for submodule git dirs (a module's name may have
/// several components, and modules nest).
const MODULES_DEPTH: usize = 8;

/// The git dirs of submodules below `modules` (a git dir's `modules/`: a directory holding
/// `HEAD`; names may have several components, and modules nest).
fn module_git_dirs(fs: &dyn FsView, dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth >= MODULES_DEPTH {
        return;
    }
    for name in fs.read_dir(dir) {
        let p = dir.join(&name);
        if fs.kind(&p) != Some(FileKind::Dir) {
            continue;
        }
        if fs.kind(&p.join("HEAD")).is_some() {
            module_git_dirs(fs, &p.join("modules"), depth + 1, out);
            out.push(p);
        } else {
            module_git_dirs(fs, &p, depth + 1, out);
        }
    }
}

/// The submodule git dirs below `modules`, protected like the main one.
fn submodule_git_dirs(
    fs: &dyn FsView,
    modules: &Path,
    allow_git_config: bool,
    home: &Path,
    out: &mut BTreeSet<PathBuf>,
) {
    let mut found = Vec::new();
    module_git_dirs(fs, modules, 0, &mut found);
    for p in found {
        protect_git_dir(fs, &p, allow_git_config, out);
        // The checkout's `.git` file (`gitdir: …`), wherever the submodule lives (deeper than
        // the protected-file search reaches): `core.worktree` names the checkout.
        if let Some(checkout) = module_worktree(fs, &p) {
            let dotgit = checkout.join(".git");
            if fs.kind(&dotgit) == Some(FileKind::File) {
                out.insert(dotgit);
            }
            protect_named_by_config(fs, &p, &checkout, home, out);
        }
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;

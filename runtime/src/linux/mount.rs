//! The mount operations of a [`Plan`], applied inside the sandbox's user and mount
//! namespaces. This is the one module that calls mount syscalls.
//!
//! The view is assembled under `plan.root` and then made the root with pivot_root:
//! 1. the host root, bound recursively and made read-only, nosuid and nodev with
//!    `mount_setattr(AT_RECURSIVE)` — every submount included, in one call;
//! 2. a fresh /proc (before the old root is detached: the kernel refuses it afterwards) with
//!    /proc/sys and friends read-only or masked, and a minimal /dev;
//! 3. writable roots bound read-write; denyWrite and protected paths bound read-only on top;
//!    denyRead directories behind empty read-only tmpfs and files behind /dev/null;
//!    allowRead re-exposed inside them.

use super::plan::{MountOp, Plan};
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("{what} {path}: {source}")]
    Op {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: nix::Error,
    },
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn op<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(nix::Error) -> MountError + 'a {
    move |source| MountError::Op {
        what,
        path: path.to_path_buf(),
        source,
    }
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> MountError + 'a {
    move |source| MountError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `mount_setattr(2)` on `path` and every mount below it.
fn setattr_recursive(path: &Path, set: u64, clear: u64) -> Result<(), MountError> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| MountError::Op {
        what: "mount_setattr",
        path: path.to_path_buf(),
        source: nix::Error::EINVAL,
    })?;
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: `c` is a valid NUL-terminated path, `attr` a properly laid out `struct
    // mount_attr` that lives across the call, and its size is passed alongside.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c.as_ptr(),
            (libc::AT_RECURSIVE | libc::AT_NO_AUTOMOUNT) as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc != 0 {
        return Err(MountError::Op {
            what: "mount_setattr",
            path: path.to_path_buf(),
            source: nix::Error::last(),
        });
    }
    Ok(())
}

/// `path` (absolute, host view) under the new root.
fn under(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// An O_PATH descriptor for `path`, refusing every symlink on the way. The planner hands
/// over fully resolved paths, so a symlink here was planted after planning: fail, don't follow.
fn open_no_symlinks(path: &Path) -> Result<OwnedFd, MountError> {
    open_path_no_symlinks(path, 0).map_err(op("open (no symlinks)", path))
}

/// `openat2(path, O_PATH | O_CLOEXEC | extra, RESOLVE_NO_SYMLINKS)`: a descriptor for `path`
/// that no symlink on the way can have led elsewhere (also for the placeholders, which the
/// supervisor renames in and out of the writable roots).
pub(crate) fn open_path_no_symlinks(path: &Path, extra: libc::c_int) -> nix::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| nix::Error::EINVAL)?;
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_CLOEXEC | extra) as u64,
        mode: 0,
        resolve: libc::RESOLVE_NO_SYMLINKS,
    };
    // SAFETY: `c` is a valid NUL-terminated path and `how` a properly laid out `struct
    // open_how` that outlives the call; its size is passed alongside.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            c.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(nix::Error::last());
    }
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Binds `src` (with everything mounted below it) onto `dst` through descriptors:
/// `open_tree(OPEN_TREE_CLONE)` of a symlink-free `src`, `move_mount` onto a symlink-free
/// `dst`. Nothing can be swapped between resolving the paths and mounting.
fn bind(src: &Path, dst: &Path) -> Result<(), MountError> {
    const OPEN_TREE_CLONE: u32 = 1;
    const OPEN_TREE_CLOEXEC: u32 = libc::O_CLOEXEC as u32;
    const MOVE_MOUNT_F_EMPTY_PATH: u32 = 0x4;
    const MOVE_MOUNT_T_EMPTY_PATH: u32 = 0x40;
    let from = open_no_symlinks(src)?;
    let to = open_no_symlinks(dst)?;
    // SAFETY: `from` is a valid descriptor and the empty path is a valid C string; with
    // AT_EMPTY_PATH the kernel clones the mount tree `from` refers to.
    let tree = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            from.as_raw_fd(),
            c"".as_ptr(),
            OPEN_TREE_CLONE
                | OPEN_TREE_CLOEXEC
                | libc::AT_RECURSIVE as u32
                | libc::AT_EMPTY_PATH as u32,
        )
    };
    if tree < 0 {
        return Err(op("open_tree", src)(nix::Error::last()));
    }
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    let tree = unsafe { OwnedFd::from_raw_fd(tree as RawFd) };
    // SAFETY: both descriptors are valid and both paths are empty C strings, as the two
    // *_EMPTY_PATH flags require.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            to.as_raw_fd(),
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    if rc != 0 {
        return Err(op("move_mount", dst)(nix::Error::last()));
    }
    Ok(())
}

fn bind_ro(src: &Path, dst: &Path) -> Result<(), MountError> {
    bind(src, dst)?;
    setattr_recursive(
        dst,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        0,
    )
}

fn tmpfs(dst: &Path, options: &str) -> Result<(), MountError> {
    mount(
        Some("tmpfs"),
        dst,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(options),
    )
    .map_err(op("tmpfs", dst))
}

/// Creates `path` (inside a tmpfs we own) as an empty directory or file to mount on.
fn mountpoint(path: &Path, dir: bool) -> Result<(), MountError> {
    if dir {
        std::fs::create_dir_all(path).map_err(io("mkdir", path))
    } else {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io("mkdir", parent))?;
        }
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map(|_| ())
            .map_err(io("create", path))
    }
}

/// Builds the view and pivots into it. Runs in the sandbox's pid 1, inside its own user and
/// mount namespaces, before anything of the command exists.
pub fn apply(plan: &Plan) -> Result<(), MountError> {
    // Nothing we mount may propagate back to the host.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(op("make-rprivate", Path::new("/")))?;
    let root = &plan.root;
    let mut masks: Vec<PathBuf> = Vec::new();
    for step in &plan.mounts {
        match step {
            MountOp::RootReadOnly => {
                bind(Path::new("/"), root)?;
                setattr_recursive(
                    root,
                    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                    0,
                )?;
            }
            MountOp::Proc => proc(root)?,
            MountOp::Dev => dev(root)?,
            MountOp::Writable { path } => {
                let dst = under(root, path);
                bind(path, &dst)?;
                setattr_recursive(
                    &dst,
                    MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                    0, // only set flags: clearing one on a copied parent-namespace mount is EPERM unprivileged
                )?;
            }
            MountOp::WritableAt { src, dst } => {
                let dst = under(root, dst);
                bind(src, &dst)?;
                setattr_recursive(&dst, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0)?;
            }
            MountOp::Pin { path } => {
                let dst = under(root, path);
                bind(&dst, &dst)?;
            }
            MountOp::ReadOnly { path } => {
                let dst = under(root, path);
                bind_ro(&dst, &dst)?;
            }
            MountOp::MaskDir { path } => {
                let dst = under(root, path);
                tmpfs(&dst, "mode=0755,size=16k")?;
                masks.push(dst);
            }
            MountOp::MaskFile { path } => {
                bind_ro(Path::new("/dev/null"), &under(root, path))?;
            }
            MountOp::MaskEmpty { path } => {
                bind_ro(&root.join(EMPTY_IN_ROOT), &under(root, path))?;
            }
            MountOp::Expose { path, dir } => {
                let dst = under(root, path);
                mountpoint(&dst, *dir)?;
                bind_ro(path, &dst)?;
            }
            MountOp::FileAt { src, dst } => {
                bind_ro(src, &under(root, dst))?;
            }
        }
    }
    // Masks become read-only once their allowRead mount points exist. Their root is mode 000
    // — every access inside is EACCES, which the audit records as a denyRead refusal (an
    // empty directory would answer ENOENT, which looks like nothing happened) — or 111 where
    // an allowRead path inside must stay reachable (listing still refused).
    for m in masks {
        let exposes = plan.mounts.iter().any(|op| {
            matches!(op, MountOp::Expose { path, .. } if {
                let dst = under(root, path);
                dst.starts_with(&m) && dst != m
            })
        });
        let mode = if exposes { 0o111 } else { 0o000 };
        std::fs::set_permissions(&m, std::os::unix::fs::PermissionsExt::from_mode(mode))
            .map_err(io("chmod", &m))?;
        remount_mask_ro(&m)?;
    }
    pivot(root)?;
    std::env::set_current_dir(&plan.cwd).map_err(io("chdir", &plan.cwd))
}

/// A protection of the view (a read-only bind, a mask or a pin) that pid 1 keeps in place
/// while the command runs. A mount on a path lives on that directory entry: when the host
/// replaces the file or directory under it (`git config` and editors save through a
/// temporary file and a rename; `rm -rf` and `mkdir`), the kernel silently takes the mount
/// away in every other mount namespace, the sandbox's included, and the new entry would be
/// open to the command. Pid 1 watches its mount table and puts such a protection back.
#[derive(Debug)]
pub struct Guarded {
    op: MountOp,
    path: PathBuf,
    /// The id of the mount at `path` when the view was built (or last restored).
    mnt_id: u64,
    /// A failed restore was reported already (reported once until one succeeds).
    failed: bool,
    /// For an entry reserved by a placeholder (a path of the plan's `placeholders`): what
    /// stood there when the view was built.
    reserved: Option<Reserved>,
}

/// A placeholder path's entry when the view was built (see [`reserved_entries`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reserved {
    dev: u64,
    ino: u64,
    dir: bool,
    /// It was a warden placeholder (marked), not the user's own entry.
    placeholder: bool,
}

/// What [`restore`] did about one protection the host took away.
#[derive(Debug)]
pub enum Restored {
    /// Put back (onto what stands at the path now).
    Ok,
    /// The entry was gone; a fresh placeholder took its name before the command could, and
    /// the protection is back on it.
    Reserved,
    /// A warden placeholder or a protected directory was removed on the host and something
    /// else now has its name: the command may have made it (it races the restore), so the
    /// sandbox must end and the entry be moved aside.
    Suspect,
    /// Could not be put back (reported once; tried again later).
    Failed(MountError),
}

/// The entries at the plan's placeholder paths, read before the view is built (the paths
/// are the host's then): their identity, and whether each is a warden placeholder.
pub fn reserved_entries(plan: &Plan) -> Vec<(PathBuf, Reserved)> {
    use std::os::unix::fs::MetadataExt;
    plan.placeholders
        .iter()
        .filter_map(|ph| {
            let meta = std::fs::symlink_metadata(&ph.path).ok()?;
            Some((
                ph.path.clone(),
                Reserved {
                    dev: meta.dev(),
                    ino: meta.ino(),
                    dir: meta.is_dir(),
                    placeholder: super::placeholder::is_marked_path(&ph.path),
                },
            ))
        })
        .collect()
}

/// The mount id of what `path` resolves to without following a final symlink, if any.
fn mount_id(path: &Path) -> Option<u64> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: an all-zero `statx` is a valid value for the kernel to fill.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid C string and `st` a writable statx the kernel fills.
    let rc = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            c.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW | libc::AT_NO_AUTOMOUNT,
            libc::STATX_MNT_ID,
            &mut st,
        )
    };
    (rc == 0 && st.stx_mask & libc::STATX_MNT_ID != 0).then_some(st.stx_mnt_id)
}

/// The protections of `plan` to keep in place, with their mount ids now (after [`apply`]:
/// the paths are the sandbox's).
pub fn guarded(plan: &Plan, reserved: &[(PathBuf, Reserved)]) -> Vec<Guarded> {
    plan.mounts
        .iter()
        .filter_map(|op| {
            let path = match op {
                MountOp::ReadOnly { path }
                | MountOp::MaskFile { path }
                | MountOp::MaskEmpty { path }
                | MountOp::MaskDir { path }
                | MountOp::Pin { path } => path.clone(),
                _ => return None,
            };
            let mnt_id = mount_id(&path)?;
            let reserved = match op {
                MountOp::Pin { .. } => None,
                _ => reserved.iter().find(|(p, _)| *p == path).map(|(_, r)| *r),
            };
            Some(Guarded {
                op: op.clone(),
                path,
                mnt_id,
                failed: false,
                reserved,
            })
        })
        .collect()
}

/// Attempts at putting a protection back right away, and the pause between them: the host's
/// rename detaches the mount before the new entry is in place, and a restore at that moment
/// lands on the dying entry (ENOENT). A few hundred microseconds later it is there.
const RESTORE_ATTEMPTS: usize = 200;
const RESTORE_PAUSE: std::time::Duration = std::time::Duration::from_micros(50);

fn reapply(step: &MountOp) -> Option<Result<(), MountError>> {
    Some(match step {
        MountOp::ReadOnly { path } => bind_ro(path, path),
        MountOp::MaskFile { path } => bind_ro(Path::new("/dev/null"), path),
        MountOp::MaskEmpty { path } => bind_ro(&Path::new("/").join(EMPTY_IN_ROOT), path),
        MountOp::Pin { path } => bind(path, path),
        MountOp::MaskDir { path } => {
            tmpfs(path, "mode=0000,size=16k").and_then(|()| remount_mask_ro(path))
        }
        _ => return None,
    })
}

/// [`reapply`], tried again every [`RESTORE_PAUSE`] while it fails, [`RESTORE_ATTEMPTS`] times.
fn reapply_retrying(step: &MountOp) -> Option<Result<(), MountError>> {
    let mut result = reapply(step)?;
    for _ in 1..RESTORE_ATTEMPTS {
        if result.is_ok() {
            break;
        }
        std::thread::sleep(RESTORE_PAUSE);
        result = reapply(step)?;
    }
    Some(result)
}

/// Puts back every protection whose mount is gone (its path now shows another mount),
/// retrying each for a few milliseconds. Returns each path with the outcome: `Ok` restored,
/// `Err` why not (reported once; [`any_failed`] says to try again later — the entry may be
/// recreated on the host).
pub fn restore(list: &mut [Guarded]) -> Vec<(PathBuf, Restored)> {
    let mut out = Vec::new();
    // In plan order: pins before what lies inside them.
    for g in list.iter_mut() {
        if mount_id(&g.path) == Some(g.mnt_id) {
            continue;
        }
        let mut outcome = Restored::Ok;
        // The inode the protection must land on (a warden placeholder's).
        let mut expect = None;
        if let Some(r) = g.reserved {
            // A reserved name the host freed (`git clean -fd`, `rm -r`): the command could
            // put its own entry there, so pid 1 takes the name first; if something has it
            // already and the entry was warden's placeholder, nothing tells the host's from
            // the command's.
            // The fresh placeholder is of the other kind than the protected entry (a file for a
            // directory name, a directory for a file name): between its rename into place and
            // the bind the command can open it through its writable mount, and what it holds
            // must be useless — no entries can be made in a file, and a directory at a file's
            // name is read by nothing. Masks keep their kind (the mount needs it).
            let make_dir = match g.op {
                MountOp::ReadOnly { .. } => !r.dir,
                _ => r.dir,
            };
            match reserve_again(&g.path, make_dir, r.dir) {
                Ok(Some(now)) => {
                    g.reserved = Some(now);
                    expect = Some(now.ino);
                    outcome = Restored::Reserved;
                }
                // Something holds the name. A new entry in place of warden's placeholder, or
                // of a protected *directory* (`rm -rf .claude`, a checkout that drops
                // `.vscode`; hosts do not swap directories in one rename), may be the
                // command's: it races the restore. A protected file replaced by the host's
                // editor or `git` (write aside, rename over — no moment without the name) is
                // taken to be the host's.
                Ok(None) if r.placeholder || r.dir => {
                    if identity(&g.path) != Some((r.dev, r.ino)) {
                        out.push((g.path.clone(), Restored::Suspect));
                        continue;
                    }
                    expect = Some(r.ino);
                }
                Ok(None) | Err(_) => {}
            }
        }
        let Some(result) = reapply_retrying(&g.op) else {
            continue;
        };
        // Until it is a mount point again, the command can rename its own entry over an
        // empty placeholder: the entry now under the mount must be the placeholder.
        if result.is_ok() && expect.is_some() && covered_inode(&g.path) != expect {
            let _ = nix::mount::umount2(&g.path, nix::mount::MntFlags::MNT_DETACH);
            out.push((g.path.clone(), Restored::Suspect));
            continue;
        }
        match result {
            Ok(()) => {
                if let Some(id) = mount_id(&g.path) {
                    g.mnt_id = id;
                }
                g.failed = false;
                out.push((g.path.clone(), outcome));
            }
            Err(e) if !g.failed => {
                g.failed = true;
                out.push((g.path.clone(), Restored::Failed(e)));
            }
            Err(_) => {}
        }
    }
    out
}

/// The inode number of the directory entry at `path` — beneath a mount on it, as its parent's
/// listing shows it (a lookup would show the mount's root instead).
fn covered_inode(path: &Path) -> Option<u64> {
    use std::os::unix::fs::DirEntryExt;
    let (parent, name) = (path.parent()?, path.file_name()?);
    std::fs::read_dir(parent)
        .ok()?
        .flatten()
        .find(|e| e.file_name() == name)
        .map(|e| e.ino())
}

/// The identity of what `path` names (not following a final symlink).
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// If `path` is free (checked a few times: a host `rename` over it never frees it, but a
/// dying mount can make one lookup fail), a fresh marked placeholder takes it
/// (`RENAME_NOREPLACE`); its identity. `Ok(None)`: something holds the name.
fn reserve_again(path: &Path, make_dir: bool, dir: bool) -> std::io::Result<Option<Reserved>> {
    use std::os::unix::fs::MetadataExt;
    for _ in 0..3 {
        if std::fs::symlink_metadata(path).is_ok() {
            return Ok(None);
        }
        std::thread::sleep(std::time::Duration::from_micros(20));
    }
    match super::placeholder::make_marked(path, make_dir)? {
        // `dir` stays the protected entry's kind: later rounds make the same other kind.
        Some(meta) => Ok(Some(Reserved {
            dev: meta.dev(),
            ino: meta.ino(),
            dir,
            placeholder: true,
        })),
        None => Ok(None),
    }
}

/// Masks `path`, which appeared after the view was built (a `denyRead` path missing at the
/// start): a directory behind an empty mode-000 read-only tmpfs, anything else but a symlink
/// behind /dev/null. Returns the protection to keep in place from now on.
pub fn mask_late(path: &Path) -> Option<Result<Guarded, MountError>> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    let step = if meta.is_dir() {
        MountOp::MaskDir {
            path: path.to_path_buf(),
        }
    } else if meta.file_type().is_symlink() {
        return None;
    } else {
        MountOp::MaskFile {
            path: path.to_path_buf(),
        }
    };
    let result = reapply_retrying(&step)?;
    Some(result.map(|()| Guarded {
        mnt_id: mount_id(path).unwrap_or(0),
        path: path.to_path_buf(),
        op: step,
        failed: false,
        reserved: None,
    }))
}

/// Whether some protection could not be put back yet (pid 1 tries again periodically).
pub fn any_failed(list: &[Guarded]) -> bool {
    list.iter().any(|g| g.failed)
}

/// A mask's tmpfs made read-only (with nosuid and nodev), once what lies inside it exists.
fn remount_mask_ro(path: &Path) -> Result<(), MountError> {
    mount(
        None::<&str>,
        path,
        None::<&str>,
        MsFlags::MS_REMOUNT
            | MsFlags::MS_BIND
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV,
        None::<&str>,
    )
    .map_err(op("remount-ro", path))
}

/// Fresh /proc for the new pid namespace; kernel knobs read-only, leaks masked.
fn proc(root: &Path) -> Result<(), MountError> {
    let dst = root.join("proc");
    mount(
        Some("proc"),
        &dst,
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(op("proc", &dst))?;
    for sub in ["sys", "sysrq-trigger", "irq", "bus", "fs"] {
        let p = dst.join(sub);
        if p.exists() {
            bind_ro(&p, &p)?;
        }
    }
    mask_with_null(
        &dst,
        &[
            "kcore",
            "keys",
            "key-users",
            "timer_list",
            "sched_debug",
            "kallsyms",
            "kmsg",
        ],
    )?;
    // Files only the host's root may read (mode 0400), which the sandbox's uid 0 can when the
    // caller is root (red-team round 15: the physical page map is a side channel). For any
    // other caller the files' modes keep them out already.
    if nix::unistd::geteuid().is_root() {
        mask_with_null(
            &dst,
            &[
                "kpageflags",
                "kpagecount",
                "kpagecgroup",
                "slabinfo",
                "pagetypeinfo",
                "vmallocinfo",
                "iomem",
                "ioports",
            ],
        )?;
    }
    Ok(())
}

/// Binds /dev/null (read-only) over each of `names` below `dir` that exists.
fn mask_with_null(dir: &Path, names: &[&str]) -> Result<(), MountError> {
    for name in names {
        let p = dir.join(name);
        if p.exists() {
            bind_ro(Path::new("/dev/null"), &p)?;
        }
    }
    Ok(())
}

/// An empty regular file in the sandbox's /dev (read-only with it): what
/// [`MountOp::MaskEmpty`] binds.
const EMPTY_IN_ROOT: &str = "dev/.warden-empty";

/// A minimal /dev on a tmpfs: host device nodes bound in, a private devpts, a shm tmpfs.
fn dev(root: &Path) -> Result<(), MountError> {
    let dst = root.join("dev");
    tmpfs(&dst, "mode=0755,size=64k")?;
    mountpoint(&root.join(EMPTY_IN_ROOT), false)?;
    for node in ["null", "zero", "full", "random", "urandom", "tty"] {
        let target = dst.join(node);
        mountpoint(&target, false)?;
        bind(&Path::new("/dev").join(node), &target)?;
        setattr_recursive(&target, MOUNT_ATTR_NOSUID, 0)?;
    }
    let pts = dst.join("pts");
    mountpoint(&pts, true)?;
    mount(
        Some("devpts"),
        &pts,
        Some("devpts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    )
    .map_err(op("devpts", &pts))?;
    let shm = dst.join("shm");
    mountpoint(&shm, true)?;
    tmpfs(&shm, "mode=1777,size=64m")?;
    for (link, target) in [
        ("ptmx", "pts/ptmx"),
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        let l = dst.join(link);
        std::os::unix::fs::symlink(target, &l).map_err(io("symlink", &l))?;
    }
    mount(
        None::<&str>,
        &dst,
        None::<&str>,
        MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID,
        None::<&str>,
    )
    .map_err(op("remount-ro", &dst))
}

/// pivot_root into `root` and detach the old root (the `pivot_root(".", ".")` idiom).
fn pivot(root: &Path) -> Result<(), MountError> {
    std::env::set_current_dir(root).map_err(io("chdir", root))?;
    nix::unistd::pivot_root(".", ".").map_err(op("pivot_root", root))?;
    umount2(".", MntFlags::MNT_DETACH).map_err(op("detach old root", root))?;
    std::env::set_current_dir("/").map_err(io("chdir", Path::new("/")))
}

#[cfg(test)]
#[path = "mount_tests.rs"]
mod tests;

//! Landlock for the command: write-type access only beneath the writable paths.
//!
//! Reading and executing stay allowed everywhere (the mount view already decides what exists and
//! what is read-only); Landlock adds a second, mount-independent layer so that the command
//! cannot write outside its writable roots even through a mount it should not have, and can
//! optionally be kept from signalling or reaching abstract UNIX sockets outside its domain.
//!
//! # Access rights
//!
//! The ruleset *handles* only write-type rights: `WriteFile`, `RemoveDir`, `RemoveFile`,
//! `MakeChar`, `MakeDir`, `MakeReg`, `MakeSock`, `MakeFifo`, `MakeBlock`, `MakeSym`, `Refer`
//! (ABI 2), `Truncate` (ABI 3) and `IoctlDev` (ABI 5) — exactly `AccessFs::from_write(ABI::V5)`.
//! Everything not handled (read, read-dir, execute, and rights of later ABIs such as
//! `ResolveUnix`) stays allowed. It is best effort: a right the running kernel does not know is
//! dropped and the result is [`LandlockStatus::PartiallyEnforced`].
//!
//! - Beneath each [`LandlockPlan::writable`] path, all handled rights are granted (for a path
//!   that is a regular file rather than a directory, only the rights that make sense on a file:
//!   `WriteFile`, `Truncate`, `IoctlDev`).
//! - Beneath each [`LandlockPlan::devices`] path, only `WriteFile`, `Truncate` and `IoctlDev`:
//!   enough to write to `/dev/null` or a terminal and to use its ioctls, not to create, remove or
//!   rename anything. Note that POSIX shared memory (`shm_open`) *creates* files under
//!   `/dev/shm`: a sandbox that needs it must list `/dev/shm` in `writable` instead.
//!
//! Paths that do not exist (`ENOENT`, `ENOTDIR`) are skipped — they cannot be written to anyway,
//! and a path appearing later gets no access. They are reported by
//! [`PreparedLandlock::skipped`]; [`apply`] drops that report, so a caller that wants to log them
//! uses [`prepare`]. Any other failure to open a path is an error (fail closed).
//!
//! `Refer` being handled means a file can only be renamed or linked between directories that
//! both grant it: moving a file from a writable root to the outside fails with `EXDEV`.
//!
//! # Scopes (ABI 6)
//!
//! [`LandlockPlan::scope_abstract_unix`] keeps the command from connecting to abstract UNIX
//! sockets created outside its Landlock domain; [`LandlockPlan::scope_signals`] keeps it from
//! signalling processes outside it (`EPERM`). On an older kernel they are dropped (best effort,
//! `PartiallyEnforced`).
//!
//! # Where it runs
//!
//! [`prepare`] opens the paths and builds the ruleset (it allocates); call it before forking.
//! [`PreparedLandlock::enforce`] only makes system calls (`prctl`, `landlock_restrict_self`), so
//! it is fit for the child between `fork` and `execve`. [`apply`] does both, for callers that are
//! single-threaded at that point.
//!
//! Enforcing also sets `no_new_privs` (the landlock crate's default): the kernel requires it for
//! `landlock_restrict_self` unless the caller has `CAP_SYS_ADMIN` in its user namespace, and the
//! command's process sets it right after anyway ([`crate::linux::harden::no_new_privs`]).
//! Nothing in the capability drop that follows is affected by it.

use ::landlock::{
    AccessFs, BitFlags, PathBeneath, RestrictionStatus, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The `/dev` entries a sandbox needs to write to, for [`LandlockPlan::devices`].
pub const DEFAULT_DEVICES: [&str; 7] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/pts",
    "/dev/ptmx",
    "/dev/shm",
];

/// What Landlock lets the command write.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LandlockPlan {
    /// All write-type rights beneath these paths.
    pub writable: Vec<PathBuf>,
    /// `WriteFile`, `Truncate` and `IoctlDev` only, beneath these paths (device nodes and
    /// `/dev/pts`; see [`DEFAULT_DEVICES`]).
    pub devices: Vec<PathBuf>,
    /// Deny connecting to abstract UNIX sockets created outside the sandbox's domain.
    pub scope_abstract_unix: bool,
    /// Deny sending signals to processes outside the sandbox's domain.
    pub scope_signals: bool,
    /// Paths that do not exist yet and must not become readable when they appear (`denyRead`
    /// entries missing at the start; the view masks one once it appears, but a descriptor
    /// opened before the mask — on the directory it appears in, or on the file — would still
    /// read it: red-team round 23). With any, reading is handled too: see [`read_rules`].
    pub read_hidden: Vec<PathBuf>,
}

impl LandlockPlan {
    /// [`DEFAULT_DEVICES`] as paths.
    pub fn default_devices() -> Vec<PathBuf> {
        DEFAULT_DEVICES.iter().map(PathBuf::from).collect()
    }
}

/// The outcome of enforcing a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LandlockStatus {
    /// Every requested right and scope is enforced. `abi` is the kernel's Landlock ABI version.
    Enforced { abi: i32 },
    /// The kernel's ABI lacks some requested rights or scopes; the others are enforced.
    PartiallyEnforced { abi: i32 },
    /// Landlock is not available (not built in or not enabled at boot): nothing is enforced.
    NotEnforced,
}

#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    #[error("opening {path} for a Landlock rule: {source}")]
    Open { path: PathBuf, source: io::Error },
    #[error("Landlock: {0}")]
    Ruleset(#[from] ::landlock::RulesetError),
}

/// A ruleset built from a [`LandlockPlan`], not yet enforced. Holds the ruleset's file
/// descriptor (close-on-exec).
#[derive(Debug)]
pub struct PreparedLandlock {
    ruleset: RulesetCreated,
    skipped: Vec<PathBuf>,
    abi: Option<i32>,
}

impl PreparedLandlock {
    /// The plan's paths that did not exist and got no rule.
    pub fn skipped(&self) -> &[PathBuf] {
        &self.skipped
    }

    /// Restricts the calling thread (and what it executes) to the ruleset. Makes only system
    /// calls: fit for the child between `fork` and `execve`. Sets `no_new_privs`.
    pub fn enforce(self) -> Result<LandlockStatus, LandlockError> {
        let status = self.ruleset.restrict_self()?;
        Ok(status_of(&status, self.abi))
    }
}

/// The write-type rights the ruleset handles (see the module docs).
fn handled() -> BitFlags<AccessFs> {
    AccessFs::from_write(ABI::V5)
}

/// The rights granted beneath [`LandlockPlan::devices`], and beneath writable regular files.
fn file_rights() -> BitFlags<AccessFs> {
    AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev
}

/// Read rights, handled when [`LandlockPlan::read_hidden`] has paths.
fn read_rights() -> BitFlags<AccessFs> {
    AccessFs::ReadFile | AccessFs::ReadDir
}

/// The read rules that keep the paths `hidden` (missing now) unreadable whenever they appear,
/// everything else as readable as before. For each hidden path, its nearest existing ancestor
/// and that ancestor's own ancestors up to `/` are the *spine*: each spine directory gets
/// `ReadDir` (listing, beneath it too), and each existing entry of a spine directory that is not
/// itself on the spine gets every read right beneath it. An entry that appears later directly in
/// a spine directory — the hidden path's first missing component among them — is covered by no
/// rule granting `ReadFile`, so no file beneath it can be opened for reading, whatever
/// descriptor the opener holds. Symbolic links among the entries get no rule (what they lead to
/// is covered where it lies). `None` when a spine directory cannot be listed: then the rules
/// cannot be complete, and reading is not handled (the mount masks alone, as before).
fn read_rules(hidden: &[PathBuf]) -> Option<Vec<(PathBuf, BitFlags<AccessFs>)>> {
    use std::os::unix::fs::MetadataExt;
    let mut anchors: Vec<PathBuf> = Vec::new();
    for path in hidden {
        let existing = path
            .ancestors()
            .skip(1)
            .find(|a| std::fs::symlink_metadata(a).is_ok_and(|m| m.is_dir()))?;
        anchors.push(existing.to_path_buf());
    }
    // Rules belong to inodes, and Landlock decides by walking up the path used, across mount
    // points: a spine directory mounted a second time elsewhere (a bind of the home directory,
    // `/home` bound to `/var/home`) is another way down to the hidden path, and an entry above
    // that mount point with full read rights would grant it (red-team round 23b read the
    // secret through such a bind). So each such spelling of an anchor joins the spine.
    let mount_points = mount_points();
    let (spine, spine_inodes) = loop {
        let spine: std::collections::BTreeSet<PathBuf> = anchors
            .iter()
            .flat_map(|a| a.ancestors().map(Path::to_path_buf))
            .collect();
        let mut inodes: std::collections::BTreeMap<(u64, u64), Vec<PathBuf>> =
            std::collections::BTreeMap::new();
        for d in &spine {
            let m = std::fs::metadata(d).ok()?;
            inodes
                .entry((m.dev(), m.ino()))
                .or_default()
                .push(d.clone());
        }
        let mut more = Vec::new();
        for mp in &mount_points {
            let Ok(m) = std::fs::metadata(mp) else {
                continue;
            };
            for d in inodes.get(&(m.dev(), m.ino())).into_iter().flatten() {
                for a in &anchors {
                    if let Ok(rel) = a.strip_prefix(d) {
                        let alias = mp.join(rel);
                        if !anchors.contains(&alias) && !more.contains(&alias) {
                            more.push(alias);
                        }
                    }
                }
            }
        }
        // Aliases of aliases are found in the next round; a mount table that keeps producing
        // new spellings is not one rules can be complete for.
        if more.is_empty() {
            break (
                spine,
                inodes
                    .into_keys()
                    .collect::<std::collections::BTreeSet<_>>(),
            );
        }
        if anchors.len() + more.len() > 256 {
            return None;
        }
        anchors.extend(more);
    };
    let mut rules: Vec<(PathBuf, BitFlags<AccessFs>)> = Vec::new();
    for dir in &spine {
        rules.push((dir.clone(), AccessFs::ReadDir.into()));
        for entry in std::fs::read_dir(dir).ok()? {
            let entry = entry.ok()?;
            let path = entry.path();
            if spine.contains(&path) || entry.file_type().ok()?.is_symlink() {
                continue;
            }
            // As the rule would be attached: through any mount on the entry.
            match std::fs::metadata(&path) {
                Ok(m) if spine_inodes.contains(&(m.dev(), m.ino())) => continue,
                Ok(_) => {}
                // Gone since the listing, or not ours to look at: no rule, nothing granted.
                Err(_) => continue,
            }
            rules.push((path, read_rights()));
        }
    }
    Some(rules)
}

/// The mount points of this process's mount namespace (`/proc/self/mountinfo`, the kernel's
/// octal escapes undone).
fn mount_points() -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let Ok(text) = std::fs::read("/proc/self/mountinfo") else {
        return Vec::new();
    };
    text.split(|b| *b == b'\n')
        .filter_map(|line| line.split(|b| *b == b' ').nth(4))
        .map(|field| {
            let mut out = Vec::with_capacity(field.len());
            let mut i = 0;
            while i < field.len() {
                let octal = field
                    .get(i + 1..i + 4)
                    .filter(|d| field[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)))
                    .map(|d| {
                        d.iter()
                            .fold(0u8, |v, c| v.wrapping_mul(8).wrapping_add(c - b'0'))
                    });
                match octal {
                    Some(byte) => {
                        out.push(byte);
                        i += 4;
                    }
                    None => {
                        out.push(field[i]);
                        i += 1;
                    }
                }
            }
            PathBuf::from(std::ffi::OsString::from_vec(out))
        })
        .collect()
}

/// Opens the plan's paths and builds the ruleset. Allocates: call it before forking.
pub fn prepare(plan: &LandlockPlan) -> Result<PreparedLandlock, LandlockError> {
    let reads = if plan.read_hidden.is_empty() {
        None
    } else {
        read_rules(&plan.read_hidden)
    };
    let handled = if reads.is_some() {
        handled() | read_rights()
    } else {
        handled()
    };
    let mut ruleset = Ruleset::default().handle_access(handled)?;
    let mut scopes = BitFlags::<Scope>::empty();
    if plan.scope_abstract_unix {
        scopes |= Scope::AbstractUnixSocket;
    }
    if plan.scope_signals {
        scopes |= Scope::Signal;
    }
    if !scopes.is_empty() {
        ruleset = ruleset.scope(scopes)?;
    }
    let mut created = ruleset.create()?;
    let mut skipped = Vec::new();

    let reads = reads.unwrap_or_default();
    let grants = plan
        .writable
        .iter()
        .map(|p| (p, handled))
        .chain(plan.devices.iter().map(|p| (p, file_rights())))
        .chain(reads.iter().map(|(p, a)| (p, *a)));
    for (path, access) in grants {
        let Some(file) = open_path(path)? else {
            skipped.push(path.clone());
            continue;
        };
        let is_dir = file
            .metadata()
            .map_err(|source| LandlockError::Open {
                path: path.clone(),
                source,
            })?
            .is_dir();
        // Directory-only rights on a file would make the kernel refuse the rule (and the crate
        // report a partial enforcement): narrow them here.
        let access = if is_dir {
            access
        } else {
            access & (file_rights() | AccessFs::ReadFile)
        };
        created = created.add_rule(PathBeneath::new(file, access))?;
    }

    Ok(PreparedLandlock {
        ruleset: created,
        skipped,
        abi: abi_version(),
    })
}

/// [`prepare`] then [`PreparedLandlock::enforce`], in the calling process. Skipped paths are
/// not reported; see [`prepare`].
pub fn apply(plan: &LandlockPlan) -> Result<LandlockStatus, LandlockError> {
    prepare(plan)?.enforce()
}

/// The running kernel's Landlock ABI version, or `None` when Landlock is not available.
pub fn abi_version() -> Option<i32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag, the kernel reads no
    // memory and only returns the ABI version (or fails with ENOSYS/EOPNOTSUPP).
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v >= 1 {
        i32::try_from(v).ok()
    } else {
        None
    }
}

/// `O_PATH | O_CLOEXEC` descriptor of `path`, or `None` when it does not exist.
fn open_path(path: &Path) -> Result<Option<File>, LandlockError> {
    match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => Ok(None),
        Err(source) => Err(LandlockError::Open {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn status_of(status: &RestrictionStatus, abi: Option<i32>) -> LandlockStatus {
    match (&status.ruleset, abi) {
        (RulesetStatus::FullyEnforced, Some(abi)) => LandlockStatus::Enforced { abi },
        (RulesetStatus::PartiallyEnforced, Some(abi)) => LandlockStatus::PartiallyEnforced { abi },
        _ => LandlockStatus::NotEnforced,
    }
}

#[cfg(test)]
#[path = "landlock_tests.rs"]
mod tests;

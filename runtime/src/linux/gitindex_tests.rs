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
            unsafe_path(bad).is_some(),
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
    ] {
        assert_eq!(
            unsafe_path(good),
            None,
            "{:?} refused",
            String::from_utf8_lossy(good)
        );
    }
}

#[test]
fn an_index_git_wrote_passes_and_garbage_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .current_dir(dir.path())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
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

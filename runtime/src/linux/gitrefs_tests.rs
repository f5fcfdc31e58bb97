use super::*;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.email=t@t", "-c", "user.name=t"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A repository with two commits; returns the blob ids of `f` in each.
fn repo(dir: &Path) -> (String, String) {
    git(dir, &["init", "-q"]);
    std::fs::write(dir.join("f"), "good\n").unwrap();
    git(dir, &["add", "f"]);
    git(dir, &["commit", "-qm", "one"]);
    let good = git(dir, &["rev-parse", "HEAD:f"]);
    (good, blob(dir, "evil\n"))
}

/// Writes a blob with `text` into the repository at `dir`; its id.
fn blob(dir: &Path, text: &str) -> String {
    let file = dir.join(".blob");
    std::fs::write(&file, text).unwrap();
    let id = git(dir, &["hash-object", "-w", ".blob"]);
    std::fs::remove_file(&file).unwrap();
    id
}

#[test]
fn replace_refs_grafts_and_alternates_made_after_the_snapshot_are_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (good, evil) = repo(dir);
    // The user's own replace ref (made before) stays.
    let mine = blob(dir, "mine\n");
    git(dir, &["replace", &mine, &good]);
    let git_dirs = vec![dir.join(".git")];
    let before = snapshot(&git_dirs);
    assert_eq!(before.len(), 1, "{before:?}");
    // A loose replace ref, a packed one, grafts and alternates.
    git(dir, &["replace", &good, &evil]);
    assert_eq!(git(dir, &["cat-file", "-p", "HEAD:f"]), "evil");
    std::fs::write(dir.join(".git/info/grafts"), format!("{good}\n")).unwrap();
    std::fs::create_dir_all(dir.join(".git/objects/info")).unwrap();
    std::fs::write(dir.join(".git/objects/info/alternates"), "/tmp/evil\n").unwrap();
    assert!(final_check(&git_dirs, &before));
    assert_eq!(git(dir, &["cat-file", "-p", "HEAD:f"]), "good");
    assert!(!dir.join(".git/info/grafts").exists());
    assert!(!dir.join(".git/objects/info/alternates").exists());
    assert_eq!(
        git(
            dir,
            &["for-each-ref", "--format=%(refname)", "refs/replace"]
        ),
        format!("refs/replace/{mine}")
    );
    // Packed: taken out of packed-refs, the other refs kept.
    git(dir, &["replace", &good, &evil]);
    git(dir, &["tag", "-a", "-m", "t", "v1"]);
    git(dir, &["pack-refs", "--all"]);
    let packed = std::fs::read_to_string(dir.join(".git/packed-refs")).unwrap();
    assert!(packed.contains(&format!("refs/replace/{good}")), "{packed}");
    let before = snapshot(&git_dirs);
    assert!(
        !final_check(&git_dirs, &before),
        "nothing new: nothing done"
    );
    // As if the packed replace ref of `good` had been made during the run (the user's own,
    // packed during it as well, is the same ref as before and stays).
    let before_packing: Vec<Override> = before
        .into_iter()
        .filter(|o| o.name != Path::new(&format!("refs/replace/{good}")))
        .collect();
    assert!(final_check(&git_dirs, &before_packing));
    assert_eq!(git(dir, &["cat-file", "-p", "HEAD:f"]), "good");
    let packed = std::fs::read_to_string(dir.join(".git/packed-refs")).unwrap();
    assert!(
        !packed.contains(&format!("refs/replace/{good}")),
        "{packed}"
    );
    assert!(packed.contains("refs/tags/v1"), "{packed}");
    assert_eq!(git(dir, &["describe", "--tags"]), "v1");
}

/// Red-team round 16: a replace ref after the first MiB of `packed-refs` or behind 10 000
/// empty directories was not seen, and the rewrite of a `packed-refs` over 1 MiB cut it
/// short; a forged commit-graph and a new `shallow` went unnoticed.
#[test]
fn big_packed_refs_crowded_replace_dirs_commit_graphs_and_shallow() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (good, evil) = repo(dir);
    let git_dirs = vec![dir.join(".git")];
    // The user's 30 000 packed tags (over 1 MiB), before the run.
    let head = git(dir, &["rev-parse", "HEAD"]);
    let mut packed = String::from("# pack-refs with: peeled fully-peeled \n");
    for i in 0..30_000 {
        packed.push_str(&format!("{head} refs/tags/t{i:05}\n"));
    }
    std::fs::write(dir.join(".git/packed-refs"), &packed).unwrap();
    assert!(packed.len() > 1 << 20);
    git(dir, &["commit-graph", "write", "--reachable"]);
    let before = snapshot(&git_dirs);
    // The command: a replace ref at the end of packed-refs, a shallow file, the
    // commit-graph rewritten.
    let mut grown = packed.clone();
    grown.push_str(&format!("{evil} refs/replace/{good}\n"));
    std::fs::write(dir.join(".git/packed-refs"), &grown).unwrap();
    std::fs::write(dir.join(".git/shallow"), format!("{head}\n")).unwrap();
    std::fs::remove_file(dir.join(".git/objects/info/commit-graph")).unwrap();
    git(dir, &["commit-graph", "write", "--reachable"]);
    assert_eq!(git(dir, &["cat-file", "-p", "HEAD:f"]), "evil");
    assert!(final_check(&git_dirs, &before));
    assert_eq!(git(dir, &["cat-file", "-p", "HEAD:f"]), "good");
    assert_eq!(
        std::fs::read_to_string(dir.join(".git/packed-refs")).unwrap(),
        packed,
        "the user's packed-refs, whole"
    );
    assert!(!dir.join(".git/shallow").exists());
    assert!(!dir.join(".git/objects/info/commit-graph").exists());
    assert_eq!(git(dir, &["tag", "-l", "t29999"]), "t29999");
    // A loose replace ref behind more empty directories than are looked at: the whole
    // directory goes.
    let before = snapshot(&git_dirs);
    for i in 0..(LIMIT + 10) {
        std::fs::create_dir_all(dir.join(format!(".git/refs/replace/d{i}"))).unwrap();
    }
    git(dir, &["replace", &good, &evil]);
    assert!(final_check(&git_dirs, &before));
    assert_eq!(git(dir, &["cat-file", "-p", "HEAD:f"]), "good");
    assert!(!dir.join(".git/refs/replace").exists());
}

/// Red-team round 17: a symbolic link at `objects/info/alternates` was read as no file at
/// all, and a forged commit-graph behind 10 000 other files in `commit-graphs/` went
/// unseen.
#[test]
fn a_linked_alternates_file_and_a_crowded_cache_directory_are_overrides() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let _ = repo(dir);
    let git_dirs = vec![dir.join(".git")];
    let before = snapshot(&git_dirs);
    std::fs::create_dir_all(dir.join(".git/objects/info")).unwrap();
    std::os::unix::fs::symlink("../../alt", dir.join(".git/objects/info/alternates")).unwrap();
    let graphs = dir.join(".git/objects/info/commit-graphs");
    std::fs::create_dir_all(&graphs).unwrap();
    for i in 0..(LIMIT + 5) {
        std::fs::write(graphs.join(format!("z{i:05}")), "").unwrap();
    }
    std::fs::write(graphs.join("commit-graph-chain"), "forged\n").unwrap();
    assert!(final_check(&git_dirs, &before));
    assert!(std::fs::symlink_metadata(dir.join(".git/objects/info/alternates")).is_err());
    assert!(!graphs.join("commit-graph-chain").exists());
}

/// Red-team round 21: a `config.worktree` the command creates is inert until
/// `extensions.worktreeConfig` is turned on (`git sparse-checkout` does), then the host's git
/// runs what it names. One that was not there before is moved aside; the user's own stays.
#[test]
fn a_config_worktree_that_was_not_there_is_moved_aside_and_the_users_own_stays() {
    let tmp = tempfile::tempdir().unwrap();
    let main = tmp.path().join("main");
    std::fs::create_dir(&main).unwrap();
    repo(&main);
    git(&main, &["worktree", "add", "-q", "../wt"]);
    let gitdir = main.join(".git");
    let linked = gitdir.join("worktrees/wt");
    // The user's own, in the linked worktree's git dir, before the run.
    std::fs::write(linked.join("config.worktree"), "[user]\n\tname = mine\n").unwrap();
    let dirs = vec![gitdir.clone(), linked.clone()];
    let before = snapshot(&dirs);
    let planted = "[core]\n\tfsmonitor = \"touch pwned; false\"\n";
    std::fs::write(gitdir.join("config.worktree"), planted).unwrap();
    assert!(final_check(&dirs, &before));
    assert!(!gitdir.join("config.worktree").exists());
    assert_eq!(
        std::fs::read_to_string(linked.join("config.worktree")).unwrap(),
        "[user]\n\tname = mine\n"
    );
    // Turning the extension on now runs nothing the command chose.
    git(&main, &["config", "extensions.worktreeConfig", "true"]);
    git(&main, &["status"]);
    assert!(!main.join("pwned").exists());
    // Nothing new since: nothing to do.
    let before = snapshot(&dirs);
    assert!(!final_check(&dirs, &before));
}

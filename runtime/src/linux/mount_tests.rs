use super::*;

#[test]
fn paths_with_a_symlink_anywhere_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("real/sub")).unwrap();
    std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
    assert!(open_no_symlinks(&root.join("real/sub")).is_ok());
    for p in [root.join("link"), root.join("link/sub")] {
        let e = open_no_symlinks(&p).unwrap_err().to_string();
        assert!(e.contains("ELOOP"), "{p:?}: {e}");
    }
}

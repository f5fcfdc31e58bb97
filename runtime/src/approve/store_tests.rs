use super::*;
use crate::policy::path::Access;
use std::os::unix::fs::PermissionsExt;

#[test]
fn approvals_written_by_one_store_are_read_by_another() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("sessions");
    let a = SessionStore::open_in(&dir, "agent-1").unwrap();
    assert_eq!(a.load().unwrap(), Snapshot::default());
    a.update(|s| {
        s.paths.insert((Access::Write, "/data/out".into()));
    })
    .unwrap();
    a.update(|s| {
        s.domains.insert("example.com".into());
    })
    .unwrap();
    let b = SessionStore::open_in(&dir, "agent-1").unwrap();
    let snap = b.load().unwrap();
    assert!(snap.paths.contains(&(Access::Write, "/data/out".into())));
    assert!(snap.domains.contains("example.com"));
    // Another session sees nothing of it.
    let c = SessionStore::open_in(&dir, "agent-2").unwrap();
    assert_eq!(c.load().unwrap(), Snapshot::default());
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

#[test]
fn concurrent_updates_lose_nothing() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().to_path_buf();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let dir = dir.clone();
            std::thread::spawn(move || {
                let s = SessionStore::open_in(&dir, "s").unwrap();
                for j in 0..10 {
                    s.update(|snap| {
                        snap.domains.insert(format!("h{i}-{j}.test"));
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let snap = SessionStore::open_in(&dir, "s").unwrap().load().unwrap();
    assert_eq!(snap.domains.len(), 80);
}

#[test]
fn bad_ids_a_shared_directory_and_a_foreign_file_are_refused() {
    for id in ["", "../x", ".hidden", "a/b", "a b", &"x".repeat(129)] {
        assert!(
            matches!(
                SessionStore::open_in(Path::new("/tmp"), id),
                Err(StoreError::BadId(_))
            ),
            "{id:?}"
        );
    }
    let base = tempfile::tempdir().unwrap();
    let open = base.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = SessionStore::open_in(&open, "s").unwrap_err();
    assert!(
        err.to_string().contains("writable by group or others"),
        "{err}"
    );
    let ok = base.path().join("ok");
    let s = SessionStore::open_in(&ok, "s").unwrap();
    std::fs::write(s.file(), b"{\"everything\": true}").unwrap();
    assert!(matches!(s.load(), Err(StoreError::Corrupt { .. })));
    assert!(SessionStore::open_in(Path::new("relative"), "s").is_err());
}

#[test]
fn a_session_file_that_is_a_link_is_refused() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("sessions");
    let s = SessionStore::open_in(&dir, "agent-7").unwrap();
    // A file a sandbox can write, linked into the store by an earlier run.
    let planted = base.path().join("project-approvals.json");
    std::fs::write(
        &planted,
        r#"{"paths":[["write","/elsewhere"]],"domains":["evil.test"],"commands":[]}"#,
    )
    .unwrap();
    std::os::unix::fs::symlink(&planted, s.file()).unwrap();
    let err = s.load().unwrap_err();
    assert!(err.to_string().contains("symlink"), "{err}");
    assert!(
        s.update(|_| {}).is_err(),
        "an update must not go through it either"
    );
    std::fs::remove_file(s.file()).unwrap();
    std::fs::hard_link(&planted, s.file()).unwrap();
    let err = s.load().unwrap_err();
    assert!(err.to_string().contains("hard links"), "{err}");
    // The store's own file is fine.
    std::fs::remove_file(s.file()).unwrap();
    s.update(|snap| {
        snap.domains.insert("example.com".into());
    })
    .unwrap();
    assert!(s.load().unwrap().domains.contains("example.com"));
}

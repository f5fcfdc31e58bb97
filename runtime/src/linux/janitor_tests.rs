use super::*;

fn record(tag: u8, path: &[u8]) -> Vec<u8> {
    let mut r = vec![tag];
    r.extend_from_slice(path);
    r.push(0);
    r
}

#[test]
fn records_round_trip_in_order() {
    let mut bytes = record(RUN_DIR, b"/tmp/warden-abc");
    bytes.extend(record(CGROUP, b"/sys/fs/cgroup/warden-1"));
    bytes.extend(record(CGROUP, b"/sys/fs/cgroup/pids/warden-1"));
    bytes.extend(record(PLACEHOLDER_DIR, b"/p/.claude"));
    bytes.extend(record(PLACEHOLDER_FILE, b"/p/.bashrc"));
    let r = parse(&bytes);
    assert_eq!(r.run_dirs, [PathBuf::from("/tmp/warden-abc")]);
    assert_eq!(
        r.cgroups,
        [
            PathBuf::from("/sys/fs/cgroup/warden-1"),
            PathBuf::from("/sys/fs/cgroup/pids/warden-1")
        ]
    );
    assert_eq!(
        r.placeholders,
        [
            Placeholder {
                path: "/p/.claude".into(),
                dir: true
            },
            Placeholder {
                path: "/p/.bashrc".into(),
                dir: false
            }
        ]
    );
}

#[test]
fn a_record_cut_short_by_the_supervisors_death_is_dropped() {
    let mut bytes = record(RUN_DIR, b"/tmp/warden-abc");
    bytes.extend_from_slice(b"C/sys/fs/cgroup/warden-");
    let r = parse(&bytes);
    assert_eq!(r.run_dirs.len(), 1);
    assert!(r.cgroups.is_empty());
}

#[test]
fn paths_keep_every_byte_but_nul_and_relative_or_unknown_records_are_ignored() {
    let mut bytes = record(PLACEHOLDER_DIR, b"/p/new\nline\xff");
    bytes.extend(record(PLACEHOLDER_DIR, b"relative/.claude"));
    bytes.extend(record(b'X', b"/etc"));
    bytes.extend(record(RUN_DIR, b""));
    bytes.push(0);
    let r = parse(&bytes);
    assert_eq!(
        r.placeholders,
        [Placeholder {
            path: PathBuf::from(std::ffi::OsStr::from_bytes(b"/p/new\nline\xff")),
            dir: true
        }]
    );
    assert!(r.run_dirs.is_empty() && r.cgroups.is_empty());
}

#[test]
fn clean_up_touches_only_warden_named_directories_and_empty_placeholders() {
    let base = tempfile::tempdir().unwrap();
    let ours = base.path().join("warden-run");
    let theirs = base.path().join("precious");
    std::fs::create_dir_all(ours.join("root")).unwrap();
    std::fs::create_dir(&theirs).unwrap();
    let empty = base.path().join(".claude");
    let filled = base.path().join(".codex");
    let users = base.path().join(".vscode");
    std::fs::create_dir(&users).unwrap();
    std::fs::write(base.path().join(".mcp.json"), b"{\"mcpServers\":{}}").unwrap();
    // Placeholders a supervisor made and held when it died (its descriptors closed, so no
    // lock is left); one was filled meanwhile.
    let held = crate::linux::placeholder::hold(
        &[
            Placeholder {
                path: empty.clone(),
                dir: true,
            },
            Placeholder {
                path: filled.clone(),
                dir: true,
            },
        ],
        None,
        &mut |_| {},
    )
    .unwrap();
    std::fs::write(filled.join("keep"), b"x").unwrap();
    held.abandon();
    clean_up(&Records {
        run_dirs: vec![ours.clone(), theirs.clone()],
        cgroups: vec![base.path().join("not-a-cgroup")],
        placeholders: vec![
            Placeholder {
                path: empty.clone(),
                dir: true,
            },
            Placeholder {
                path: filled.clone(),
                dir: true,
            },
            Placeholder {
                path: users.clone(),
                dir: true,
            },
        ],
        sockets: vec![base.path().join("precious")],
        missing_protected: vec![
            base.path().join(".mcp.json"),
            base.path().join("crush.json"),
        ],
        done: false,
    });
    // A protected file missing at the start that the command left: moved aside.
    assert!(!base.path().join(".mcp.json").exists());
    let moved: Vec<_> = std::fs::read_dir(base.path())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".mcp.json.warden-blocked-")
        })
        .collect();
    assert_eq!(moved.len(), 1);
    assert!(moved[0].path().join(".mcp.json").is_file());
    assert!(!base.path().join("crush.json").exists());
    assert!(!ours.exists());
    assert!(
        theirs.exists(),
        "a directory not named warden-* is never removed"
    );
    assert!(!empty.exists());
    assert!(filled.join("keep").exists(), "a filled placeholder stays");
    assert!(
        users.is_dir(),
        "an unmarked (the user's own) empty directory stays"
    );
}

#[test]
fn the_done_record_is_seen_only_whole() {
    let mut bytes = b"R/tmp/warden-a\0".to_vec();
    assert!(!parse(&bytes).done);
    bytes.extend_from_slice(b"X");
    assert!(!parse(&bytes).done, "a cut-off record is dropped");
    bytes.push(0);
    let r = parse(&bytes);
    assert!(r.done);
    assert_eq!(r.run_dirs, [PathBuf::from("/tmp/warden-a")]);
    assert!(
        !parse(b"X/tmp/x\0").done,
        "a path after the tag is not the done record"
    );
}

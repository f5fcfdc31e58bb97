use super::*;
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

// ---- pure parsing ----------------------------------------------------------------------

const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

const UNIFIED: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
25 22 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
26 25 0:24 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

#[test]
fn v2_mount_is_found_in_hybrid_and_unified_layouts() {
    assert_eq!(
        v2_mount_in(HYBRID),
        Some((PathBuf::from("/sys/fs/cgroup/unified"), "/".to_string()))
    );
    assert_eq!(
        v2_mount_in(UNIFIED),
        Some((PathBuf::from("/sys/fs/cgroup"), "/".to_string()))
    );
    assert_eq!(v2_mount_in(&HYBRID.replace("cgroup2", "tmpfs")), None);
    assert_eq!(v2_mount_in(""), None);
}

#[test]
fn v1_bindings_are_found_by_controller_option() {
    assert_eq!(
        v1_mount_in(HYBRID, "pids"),
        Some(PathBuf::from("/sys/fs/cgroup/pids"))
    );
    assert_eq!(
        v1_mount_in(HYBRID, "cpu"),
        Some(PathBuf::from("/sys/fs/cgroup/cpu"))
    );
    assert_eq!(v1_mount_in(HYBRID, "hugetlb"), None);
    assert_eq!(v1_mount_in(UNIFIED, "pids"), None);
}

#[test]
fn mountinfo_escapes_and_optional_fields() {
    let line =
        r"50 22 0:40 /sub\040dir /mnt/with\040space\134x rw shared:7 master:2 - cgroup2 none rw";
    let m = parse_mountinfo_line(line).unwrap();
    assert_eq!(m.root, "/sub dir");
    assert_eq!(m.mount_point, PathBuf::from(r"/mnt/with space\x"));
    assert_eq!(m.fstype, "cgroup2");
    assert_eq!(unescape_mountinfo(r"a\04"), r"a\04");
    assert_eq!(unescape_mountinfo(r"\999"), r"\999");
    assert!(parse_mountinfo_line("garbage").is_none());
}

#[test]
fn own_cgroup_path_comes_from_the_0_line() {
    let text = "9:name=systemd:/\n4:memory:/x/y\n0::/user.slice/session-1.scope\n";
    assert_eq!(
        v2_path_in(text).as_deref(),
        Some("/user.slice/session-1.scope")
    );
    assert_eq!(v2_path_in("0::/gone (deleted)\n").as_deref(), Some("/gone"));
    assert_eq!(v2_path_in("4:memory:/x\n"), None);
    let mount = Path::new("/sys/fs/cgroup");
    assert_eq!(
        join_cgroup(mount, "/", "/"),
        PathBuf::from("/sys/fs/cgroup")
    );
    assert_eq!(
        join_cgroup(mount, "/", "/a/b"),
        PathBuf::from("/sys/fs/cgroup/a/b")
    );
    // A mount of a sub-hierarchy: the mount's root is stripped from the cgroup path.
    assert_eq!(
        join_cgroup(mount, "/a", "/a/b"),
        PathBuf::from("/sys/fs/cgroup/b")
    );
    assert_eq!(
        join_cgroup(mount, "/a", "/a"),
        PathBuf::from("/sys/fs/cgroup")
    );
    assert_eq!(
        join_cgroup(mount, "/a", "/ab"),
        PathBuf::from("/sys/fs/cgroup/ab")
    );
}

#[test]
fn names_and_cpu_max_are_validated() {
    for ok in ["abc", "sess-1.2_x", "0"] {
        assert!(valid_name(ok), "{ok}");
    }
    let long = "x".repeat(201);
    for bad in ["", ".", "..", "a/b", "a b", "a\0b", long.as_str()] {
        assert!(!valid_name(bad), "{bad:?}");
    }
    for ok in ["max", "50000", "50000 100000", "max 100000"] {
        assert!(valid_cpu_max(ok), "{ok}");
    }
    for bad in ["", "0", "-1", "half", "1 2 3", "50000 0", "1\n2 3"] {
        assert!(!valid_cpu_max(bad), "{bad:?}");
    }
    let err = Cgroup::create_in(Path::new("/nonexistent"), "a/b").unwrap_err();
    assert!(matches!(err, CgroupError::InvalidName(_)), "{err}");
}

#[test]
fn limits_name_the_controllers_they_need() {
    assert!(Limits::default().required().is_empty());
    let all = Limits {
        pids_max: Some(5),
        memory_max: Some(1 << 20),
        cpu_max: Some("max".into()),
    };
    let names: Vec<_> = all.required().into_iter().map(|(c, _)| c).collect();
    assert_eq!(names, LIMIT_CONTROLLERS);
    assert_eq!(parse_pids("12\n 34\n\nx\n"), vec![12, 34]);
}

#[test]
fn controller_unavailable_error_names_controller_and_v1_binding() {
    let e = CgroupError::ControllerUnavailable {
        controller: "pids",
        limit: "pids.max",
        parent: PathBuf::from("/sys/fs/cgroup/unified"),
        available: "hugetlb".into(),
        v1_mount: Some(PathBuf::from("/sys/fs/cgroup/pids")),
    };
    let msg = e.to_string();
    assert!(msg.contains("controller `pids` is not available"), "{msg}");
    assert!(msg.contains("(available: hugetlb)"), "{msg}");
    assert!(
        msg.contains("cgroup v1 hierarchy at /sys/fs/cgroup/pids"),
        "{msg}"
    );
}

// ---- against the real hierarchy (root; CI=true turns a missing prerequisite into a failure) --

fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| v == "true")
}

/// The process's own v2 cgroup when the tests can create leaves in it; `None` (skip) outside
/// CI when they cannot. Under CI=true a missing prerequisite panics with the reason.
fn writable_own_cgroup() -> Option<PathBuf> {
    let skip = |why: String| -> Option<PathBuf> {
        if in_ci() {
            panic!("CI=true but the cgroup tests cannot run: {why}");
        }
        eprintln!("skipped: {why}");
        None
    };
    if !nix::unistd::geteuid().is_root() {
        return skip("not running as root".into());
    }
    let mount = match find_v2_mount() {
        Ok(m) => m,
        Err(e) => return skip(format!("find_v2_mount: {e}")),
    };
    match own_cgroup() {
        Ok(own) if own.starts_with(&mount) => Some(own),
        Ok(own) => skip(format!(
            "own cgroup {} is not below the v2 mount {}",
            own.display(),
            mount.display()
        )),
        Err(e) => skip(format!("own_cgroup: {e}")),
    }
}

fn unique(tag: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "test-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Kills and reaps a child the test spawned, whatever state it is in.
fn reap(mut child: Child) -> std::process::ExitStatus {
    let _ = child.kill();
    child.wait().unwrap()
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        sleep(Duration::from_millis(10));
    }
}

#[test]
fn leaf_lifecycle_id_membership_kill_and_remove() {
    let Some(own) = writable_own_cgroup() else {
        return;
    };
    let name = unique("life");
    let cg = Cgroup::create(&name).unwrap();
    assert_eq!(cg.path(), own.join(format!("warden-{name}")));
    assert!(cg.path().is_dir());
    assert_eq!(cg.id(), fs::metadata(cg.path()).unwrap().ino());
    assert!(cg.pids().unwrap().is_empty());

    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = i32::try_from(child.id()).unwrap();
    cg.add_pid(pid).unwrap();
    assert_eq!(cg.pids().unwrap(), vec![pid]);
    let mount = find_v2_mount().unwrap();
    let rel = cg.path().strip_prefix(&mount).unwrap();
    let proc_cgroup = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    assert_eq!(
        v2_path_in(&proc_cgroup).map(PathBuf::from),
        Some(Path::new("/").join(rel)),
        "{proc_cgroup}"
    );

    cg.kill_all().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    wait_until("the leaf to be empty", || cg.pids().unwrap().is_empty());

    let path = cg.path().to_path_buf();
    cg.remove().unwrap();
    assert!(!path.exists(), "{} left behind", path.display());
}

#[test]
fn remove_kills_a_whole_process_tree() {
    if writable_own_cgroup().is_none() {
        return;
    }
    let cg = Cgroup::create(&unique("tree")).unwrap();
    let mut child = Command::new("sh")
        .args(["-c", "read x; sleep 30 & sleep 30 & wait"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    cg.add_pid(i32::try_from(child.id()).unwrap()).unwrap();
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    wait_until("three processes in the leaf", || {
        cg.pids().unwrap().len() == 3
    });
    let path = cg.path().to_path_buf();
    // `sh` is our child and not reaped yet: remove must not wait for its zombie.
    cg.remove().unwrap();
    assert!(!path.exists(), "{} left behind", path.display());
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
}

#[test]
fn drop_removes_the_leaf_and_its_processes() {
    if writable_own_cgroup().is_none() {
        return;
    }
    let cg = Cgroup::create(&unique("drop")).unwrap();
    let path = cg.path().to_path_buf();
    let child = Command::new("sleep").arg("30").spawn().unwrap();
    cg.add_pid(i32::try_from(child.id()).unwrap()).unwrap();
    drop(cg);
    assert!(!path.exists(), "{} left behind", path.display());
    assert_eq!(reap(child).signal(), Some(libc::SIGKILL));
}

#[test]
fn creating_an_existing_leaf_fails_and_keeps_it() {
    let Some(own) = writable_own_cgroup() else {
        return;
    };
    let name = unique("dup");
    let cg = Cgroup::create_in(&own, &name).unwrap();
    let err = Cgroup::create_in(&own, &name).unwrap_err();
    assert!(matches!(err, CgroupError::AlreadyExists(_)), "{err}");
    assert!(cg.path().is_dir());
    let path = cg.path().to_path_buf();
    cg.remove().unwrap();
    assert!(!path.exists());
    let err = Cgroup::create_in(&path, "x").unwrap_err();
    assert!(matches!(err, CgroupError::NotDelegated { .. }), "{err}");
}

#[test]
fn empty_limits_are_a_no_op_and_bad_cpu_max_is_refused() {
    if writable_own_cgroup().is_none() {
        return;
    }
    let cg = Cgroup::create(&unique("nolimit")).unwrap();
    cg.apply_limits(&Limits::default()).unwrap();
    let err = cg
        .apply_limits(&Limits {
            cpu_max: Some("half".into()),
            ..Limits::default()
        })
        .unwrap_err();
    assert!(matches!(err, CgroupError::InvalidCpuMax(_)), "{err}");
    cg.remove().unwrap();
}

/// Asserts `apply_limits` fails closed with `ControllerUnavailable` naming `controller`.
fn assert_unavailable(cg: &Cgroup, limits: &Limits, controller: &str) {
    let before =
        fs::read_to_string(cg.path().parent().unwrap().join("cgroup.subtree_control")).unwrap();
    let err = cg.apply_limits(limits).unwrap_err();
    let msg = err.to_string();
    match err {
        CgroupError::ControllerUnavailable { controller: c, .. } => assert_eq!(c, controller),
        other => panic!("expected ControllerUnavailable for {controller}, got {other}"),
    }
    assert!(msg.contains(&format!("`{controller}`")), "{msg}");
    let after =
        fs::read_to_string(cg.path().parent().unwrap().join("cgroup.subtree_control")).unwrap();
    assert_eq!(
        before, after,
        "a failed apply_limits changed subtree_control"
    );
}

#[test]
fn pids_limit_caps_a_fork_burst_or_fails_closed() {
    let Some(own) = writable_own_cgroup() else {
        return;
    };
    let cg = Cgroup::create(&unique("pids")).unwrap();
    let limits = Limits {
        pids_max: Some(5),
        ..Limits::default()
    };
    if !controllers(&own).unwrap().contains("pids") {
        eprintln!(
            "pids controller not available in {} (hybrid layout): checking the error",
            own.display()
        );
        assert_unavailable(&cg, &limits, "pids");
        cg.remove().unwrap();
        return;
    }
    cg.apply_limits(&limits).unwrap();
    assert_eq!(
        fs::read_to_string(cg.path().join("pids.max"))
            .unwrap()
            .trim(),
        "5"
    );
    let mut child = Command::new("sh")
        .args([
            "-c",
            "read x; for i in 1 2 3 4 5 6 7 8 9 10; do sleep 5 & done; wait",
        ])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    cg.add_pid(i32::try_from(child.id()).unwrap()).unwrap();
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    wait_until("the fork burst to hit pids.max", || {
        let events = fs::read_to_string(cg.path().join("pids.events")).unwrap();
        events
            .lines()
            .any(|l| l.strip_prefix("max ").is_some_and(|n| n != "0"))
    });
    let current: u64 = fs::read_to_string(cg.path().join("pids.current"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(current <= 5, "pids.current {current} > pids.max 5");
    cg.kill_all().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    child.wait().unwrap();
    assert!(!stderr.is_empty(), "no fork failed");
    let path = cg.path().to_path_buf();
    cg.remove().unwrap();
    assert!(!path.exists());
}

#[test]
fn memory_and_cpu_limits_apply_or_fail_closed() {
    let Some(own) = writable_own_cgroup() else {
        return;
    };
    let available = controllers(&own).unwrap();
    let cg = Cgroup::create(&unique("memcpu")).unwrap();
    let memory = Limits {
        memory_max: Some(64 << 20),
        ..Limits::default()
    };
    if available.contains("memory") {
        cg.apply_limits(&memory).unwrap();
        let v = fs::read_to_string(cg.path().join("memory.max")).unwrap();
        assert_eq!(v.trim(), (64u64 << 20).to_string());
    } else {
        assert_unavailable(&cg, &memory, "memory");
    }
    let cpu = Limits {
        cpu_max: Some("50000 100000".into()),
        ..Limits::default()
    };
    if available.contains("cpu") {
        cg.apply_limits(&cpu).unwrap();
        let v = fs::read_to_string(cg.path().join("cpu.max")).unwrap();
        assert_eq!(v.trim(), "50000 100000");
    } else {
        assert_unavailable(&cg, &cpu, "cpu");
    }
    // All three at once fail on the first missing controller and write nothing.
    let all = Limits {
        pids_max: Some(5),
        memory_max: Some(64 << 20),
        cpu_max: Some("max".into()),
    };
    if let Some(missing) = LIMIT_CONTROLLERS.iter().find(|c| !available.contains(**c)) {
        assert_unavailable(&cg, &all, missing);
    }
    let path = cg.path().to_path_buf();
    cg.remove().unwrap();
    assert!(!path.exists());
}

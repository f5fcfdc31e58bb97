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
        v1_problem: Some("/sys/fs/cgroup/pids is not writable: EROFS".into()),
    };
    let msg = e.to_string();
    assert!(msg.contains("controller `pids` is not available"), "{msg}");
    assert!(msg.contains("(available: hugetlb)"), "{msg}");
    assert!(
        msg.contains("cgroup v1 hierarchy at /sys/fs/cgroup/pids"),
        "{msg}"
    );
    assert!(
        msg.contains("which warden cannot use (/sys/fs/cgroup/pids is not writable: EROFS)"),
        "{msg}"
    );
}

#[test]
fn v1_membership_and_cpu_conversion() {
    let text = "9:name=systemd:/\n4:memory:/process_api/x\n2:cpu,cpuacct:/a\n0::/\n";
    assert_eq!(
        v1_path_in(text, "memory").as_deref(),
        Some("/process_api/x")
    );
    assert_eq!(v1_path_in(text, "cpu").as_deref(), Some("/a"));
    assert_eq!(v1_path_in(text, "cpuacct").as_deref(), Some("/a"));
    assert_eq!(v1_path_in(text, "pids"), None);
    // The v2 line never counts as a v1 hierarchy, whatever its (empty) controller list.
    assert_eq!(v1_path_in("0::/x\n", ""), None);
    assert_eq!(
        v1_hierarchy_in(HYBRID, "memory"),
        Some((PathBuf::from("/sys/fs/cgroup/memory"), "/".to_string()))
    );
    assert_eq!(v1_cpu("max"), Some((-1, 100_000)));
    assert_eq!(v1_cpu("50000"), Some((50_000, 100_000)));
    assert_eq!(v1_cpu("50000 200000"), Some((50_000, 200_000)));
    assert_eq!(v1_cpu("max 250000"), Some((-1, 250_000)));
    assert_eq!(v1_cpu("half"), None);
    assert_eq!(v1_cpu("0"), None);
    assert_eq!(v1_cpu("99999999999999999999"), None);
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
    let mut cg = Cgroup::create(&unique("nolimit")).unwrap();
    cg.apply_limits(&Limits::default()).unwrap();
    let err = cg
        .apply_limits(&Limits {
            cpu_max: Some("half".into()),
            ..Limits::default()
        })
        .unwrap_err();
    assert!(matches!(err, CgroupError::InvalidCpuMax(_)), "{err}");
    assert!(cg.v1_leaves().is_empty(), "{:?}", cg.v1_leaves());
    cg.remove().unwrap();
}

/// Asserts `apply_limits` fails closed with `ControllerUnavailable` naming `controller`, and
/// changes neither the parent's `subtree_control` nor the set of v1 leaves.
fn assert_unavailable(cg: &mut Cgroup, limits: &Limits, controller: &str) {
    let control = cg.path().parent().unwrap().join("cgroup.subtree_control");
    let before = fs::read_to_string(&control).unwrap();
    let leaves = cg.v1_leaves().to_vec();
    let err = cg.apply_limits(limits).unwrap_err();
    let msg = err.to_string();
    match err {
        CgroupError::ControllerUnavailable { controller: c, .. } => assert_eq!(c, controller),
        other => panic!("expected ControllerUnavailable for {controller}, got {other}"),
    }
    assert!(msg.contains(&format!("`{controller}`")), "{msg}");
    let after = fs::read_to_string(&control).unwrap();
    assert_eq!(
        before, after,
        "a failed apply_limits changed subtree_control"
    );
    assert_eq!(
        cg.v1_leaves(),
        leaves.as_slice(),
        "a failed apply_limits made v1 leaves"
    );
}

/// Where a limit on `controller` is enforced for leaves below `own`: `Some(true)` in the v2
/// leaf, `Some(false)` in a cgroup v1 leaf, `None` nowhere (then `apply_limits` must fail
/// closed). Under CI=true `None` is a failure: the reference machine (hybrid layout, root)
/// enforces every limit one way or the other.
fn enforcement(own: &Path, controller: &str) -> Option<bool> {
    if controllers(own).unwrap().contains(controller) {
        return Some(true);
    }
    match v1_fallback_parent(controller) {
        Ok(_) => Some(false),
        Err(why) => {
            assert!(
                !in_ci(),
                "CI=true but `{controller}` can be enforced neither in {} nor in cgroup v1: {why}",
                own.display()
            );
            eprintln!("`{controller}` cannot be enforced here ({why}): checking the error");
            None
        }
    }
}

/// The directory holding `controller`'s limit files for `cg`: the v2 leaf, or `cg`'s leaf in
/// the controller's v1 hierarchy (which must be one of `cg.v1_leaves()`).
fn limit_dir(cg: &Cgroup, controller: &str, in_v2: bool) -> PathBuf {
    if in_v2 {
        return cg.path().to_path_buf();
    }
    let leaf = v1_fallback_parent(controller)
        .unwrap()
        .join(cg.path().file_name().unwrap());
    assert!(
        cg.v1_leaves().contains(&leaf),
        "{} is not among the v1 leaves {:?}",
        leaf.display(),
        cg.v1_leaves()
    );
    assert!(leaf.is_dir(), "{}", leaf.display());
    leaf
}

fn read_trim(path: &Path) -> String {
    fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_string()
}

/// Every directory of `cg`: the v2 leaf and the v1 leaves.
fn all_dirs(cg: &Cgroup) -> Vec<PathBuf> {
    std::iter::once(cg.path().to_path_buf())
        .chain(cg.v1_leaves().iter().cloned())
        .collect()
}

fn assert_gone(dirs: &[PathBuf]) {
    for d in dirs {
        assert!(!d.exists(), "cgroup {} left behind", d.display());
    }
}

fn members(dir: &Path) -> BTreeSet<i32> {
    procs_of(dir).unwrap().into_iter().collect()
}

#[test]
fn pids_limit_caps_a_fork_burst_or_fails_closed() {
    let Some(own) = writable_own_cgroup() else {
        return;
    };
    let mut cg = Cgroup::create(&unique("pids")).unwrap();
    let limits = Limits {
        pids_max: Some(5),
        ..Limits::default()
    };
    let Some(in_v2) = enforcement(&own, "pids") else {
        assert_unavailable(&mut cg, &limits, "pids");
        cg.remove().unwrap();
        return;
    };
    cg.apply_limits(&limits).unwrap();
    let dir = limit_dir(&cg, "pids", in_v2);
    assert_eq!(read_trim(&dir.join("pids.max")), "5");
    let mut child = Command::new("sh")
        .args([
            "-c",
            "read x; for i in 1 2 3 4 5 6 7 8 9 10; do sleep 5 & done; wait",
        ])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = i32::try_from(child.id()).unwrap();
    cg.add_pid(pid).unwrap();
    for d in all_dirs(&cg) {
        assert_eq!(members(&d), BTreeSet::from([pid]), "{}", d.display());
    }
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut peak = 0u64;
    wait_until("the fork burst to hit pids.max", || {
        let current: u64 = read_trim(&dir.join("pids.current")).parse().unwrap();
        peak = peak.max(current);
        fs::read_to_string(dir.join("pids.events"))
            .unwrap()
            .lines()
            .any(|l| l.strip_prefix("max ").is_some_and(|n| n != "0"))
    });
    assert!(peak <= 5, "pids.current reached {peak} > pids.max 5");
    // The kernel's own high-water mark, where it has one (Linux 6.12+).
    if let Ok(p) = fs::read_to_string(dir.join("pids.peak")) {
        let p: u64 = p.trim().parse().unwrap();
        assert!(p <= 5, "pids.peak {p} > pids.max 5");
    }
    // The forked children are in every leaf, like the process that was placed.
    wait_until("the same processes in every leaf", || {
        let v2 = members(cg.path());
        cg.v1_leaves().iter().all(|l| members(l) == v2)
    });
    let inside = members(&dir);
    assert!(
        !inside.is_empty() && inside.len() <= 5,
        "{} holds {inside:?}",
        dir.display()
    );
    let dirs = all_dirs(&cg);
    cg.kill_all().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    child.wait().unwrap();
    assert!(stderr.contains("fork"), "no fork failed: {stderr:?}");
    cg.remove().unwrap();
    assert_gone(&dirs);
}

#[test]
fn memory_and_cpu_limits_apply_or_fail_closed() {
    let Some(own) = writable_own_cgroup() else {
        return;
    };
    let mut cg = Cgroup::create(&unique("memcpu")).unwrap();
    let bytes = 64u64 << 20;
    let memory = Limits {
        memory_max: Some(bytes),
        ..Limits::default()
    };
    let memory_where = enforcement(&own, "memory");
    match memory_where {
        Some(true) => {
            cg.apply_limits(&memory).unwrap();
            assert_eq!(read_trim(&cg.path().join("memory.max")), bytes.to_string());
        }
        Some(false) => {
            cg.apply_limits(&memory).unwrap();
            let dir = limit_dir(&cg, "memory", false);
            assert_eq!(
                read_trim(&dir.join("memory.limit_in_bytes")),
                bytes.to_string()
            );
            let memsw = dir.join("memory.memsw.limit_in_bytes");
            if memsw.exists() {
                assert_eq!(read_trim(&memsw), bytes.to_string());
            } else {
                eprintln!("no swap accounting here: memory.memsw.limit_in_bytes is absent");
            }
        }
        None => assert_unavailable(&mut cg, &memory, "memory"),
    }
    let cpu_where = enforcement(&own, "cpu");
    for (value, v2_reads, quota, period) in [
        ("50000 100000", "50000 100000", "50000", "100000"),
        ("max", "max 100000", "-1", "100000"),
        ("20000 50000", "20000 50000", "20000", "50000"),
    ] {
        let cpu = Limits {
            cpu_max: Some(value.into()),
            ..Limits::default()
        };
        match cpu_where {
            Some(true) => {
                cg.apply_limits(&cpu).unwrap();
                assert_eq!(read_trim(&cg.path().join("cpu.max")), v2_reads);
            }
            Some(false) => {
                cg.apply_limits(&cpu).unwrap();
                let dir = limit_dir(&cg, "cpu", false);
                assert_eq!(read_trim(&dir.join("cpu.cfs_quota_us")), quota, "{value}");
                assert_eq!(read_trim(&dir.join("cpu.cfs_period_us")), period, "{value}");
            }
            None => assert_unavailable(&mut cg, &cpu, "cpu"),
        }
    }
    // All three at once: applied where each can be, or refused on the first controller that
    // cannot be enforced, writing nothing.
    let all = Limits {
        pids_max: Some(5),
        memory_max: Some(bytes),
        cpu_max: Some("max".into()),
    };
    let missing = LIMIT_CONTROLLERS
        .iter()
        .find(|c| enforcement(&own, c).is_none());
    match missing {
        Some(missing) => assert_unavailable(&mut cg, &all, missing),
        None => {
            cg.apply_limits(&all).unwrap();
            // One leaf per v1 hierarchy in use, however often limits were applied.
            let mut parents: Vec<PathBuf> = LIMIT_CONTROLLERS
                .iter()
                .filter(|c| enforcement(&own, c) == Some(false))
                .map(|c| v1_fallback_parent(c).unwrap())
                .collect();
            parents.sort();
            parents.dedup();
            assert_eq!(cg.v1_leaves().len(), parents.len(), "{:?}", cg.v1_leaves());
        }
    }
    // Dropping removes every leaf.
    let dirs = all_dirs(&cg);
    drop(cg);
    assert_gone(&dirs);
}

/// Removes these cgroups when dropped, so a failed test leaves nothing behind.
struct LeftoverGuard(Vec<PathBuf>);

impl Drop for LeftoverGuard {
    fn drop(&mut self) {
        for d in &self.0 {
            let _ = remove_leftover(d);
        }
    }
}

#[test]
fn leftover_cgroups_are_removed_and_nothing_else_is_touched() {
    let Some(own) = writable_own_cgroup() else {
        return;
    };
    // Refused: a name warden does not use, and a `warden-*` directory that is no cgroup (the
    // pid listed in its `cgroup.procs` must survive).
    let bystander = Command::new("sleep").arg("30").spawn().unwrap();
    let fake = tempfile::Builder::new()
        .prefix("warden-")
        .tempdir()
        .unwrap();
    fs::write(
        fake.path().join("cgroup.procs"),
        format!("{}\n", bystander.id()),
    )
    .unwrap();
    for path in [fake.path().to_path_buf(), own.join("not-ours")] {
        let err = remove_leftover(&path).unwrap_err();
        assert!(matches!(err, CgroupError::NotACgroup(_)), "{err}");
    }
    assert!(fake.path().join("cgroup.procs").exists());
    sleep(Duration::from_millis(50));
    let mut bystander = bystander;
    assert!(
        bystander.try_wait().unwrap().is_none(),
        "the bystander was killed"
    );
    assert_eq!(reap(bystander).signal(), Some(libc::SIGKILL));

    // A sandbox cgroup whose supervisor is gone, with a v1 leaf for every limit that needs one.
    let mut cg = Cgroup::create(&unique("left")).unwrap();
    let limits = Limits {
        pids_max: enforcement(&own, "pids").map(|_| 100),
        memory_max: enforcement(&own, "memory").map(|_| 256 << 20),
        cpu_max: enforcement(&own, "cpu").map(|_| "max".to_string()),
    };
    cg.apply_limits(&limits).unwrap();
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    cg.add_pid(i32::try_from(child.id()).unwrap()).unwrap();
    let dirs = all_dirs(&cg);
    let v1 = cg.v1_leaves().to_vec();
    // What a SIGKILLed supervisor leaves: no Drop, no remove. The guard cleans up if an
    // assertion fails below.
    std::mem::forget(cg);
    let _guard = LeftoverGuard(dirs.clone());
    // The v1 leaves first: v1 has no cgroup.kill, so this takes the pidfd kill loop.
    for leaf in &v1 {
        remove_leftover(leaf).unwrap();
        assert!(!leaf.exists(), "{} left behind", leaf.display());
    }
    if !v1.is_empty() {
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    }
    remove_leftover(&dirs[0]).unwrap();
    assert_eq!(reap(child).signal(), Some(libc::SIGKILL));
    assert_gone(&dirs);
    // Gone already: nothing to do, no error.
    remove_leftover(&dirs[0]).unwrap();
}

use super::*;
use std::collections::BTreeSet;

fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| v == "true")
}

// ---- pure helpers --------------------------------------------------------------------------

#[test]
fn lsm_lists_are_split_on_commas() {
    assert_eq!(
        parse_lsm_list("lockdown,capability,landlock,bpf\n"),
        vec!["lockdown", "capability", "landlock", "bpf"]
    );
    assert_eq!(
        parse_lsm_list("capability,yama\0"),
        vec!["capability", "yama"]
    );
    assert!(parse_lsm_list("").is_empty());
}

#[test]
fn child_messages_round_trip() {
    assert_eq!(
        parse_child_message(b"Ohello"),
        Some(Outcome::Ok(b"hello".to_vec()))
    );
    let mut err = vec![MSG_ERR];
    err.extend_from_slice(&(Errno::EPERM as i32).to_ne_bytes());
    err.extend_from_slice(b"unshare");
    assert_eq!(
        parse_child_message(&err),
        Some(Outcome::Failed {
            step: "unshare".into(),
            errno: Errno::EPERM
        })
    );
    assert_eq!(parse_child_message(b""), None);
    assert_eq!(parse_child_message(b"E\x01"), None);
    assert_eq!(parse_child_message(b"?"), None);
}

#[test]
fn verifier_summary_is_the_last_line() {
    assert_eq!(
        verifier_summary(b"0: R1=ctx\nR0 !read_ok\n\n\0garbage"),
        Some("R0 !read_ok".into())
    );
    assert_eq!(verifier_summary(b"\0\0"), None);
}

/// A tiny BTF blob: INT, FUNC_PROTO(1 param), STRUCT(2 members), FUNC "bpf_lsm_file_open".
fn tiny_btf() -> Vec<u8> {
    let strings = b"\0int\0bpf_lsm_file_open\0x\0".to_vec();
    let mut types = Vec::new();
    let mut push = |words: &[u32]| {
        for w in words {
            types.extend_from_slice(&w.to_ne_bytes());
        }
    };
    push(&[1, 1 << 24, 4, 32]); // [1] INT "int", 4 bytes
    push(&[0, (13 << 24) | 1, 1, 23, 1]); // [2] FUNC_PROTO (x: int) -> int
    push(&[0, (4 << 24) | 2, 8, 23, 1, 0, 23, 1, 32]); // [3] STRUCT { x; x }
    push(&[5, 12 << 24, 2]); // [4] FUNC bpf_lsm_file_open
    let mut btf = Vec::new();
    btf.extend_from_slice(&0xeb9f_u16.to_ne_bytes());
    btf.extend_from_slice(&[1, 0]);
    for w in [
        24,
        0,
        types.len() as u32,
        types.len() as u32,
        strings.len() as u32,
    ] {
        btf.extend_from_slice(&w.to_ne_bytes());
    }
    btf.extend_from_slice(&types);
    btf.extend_from_slice(&strings);
    btf
}

#[test]
fn btf_funcs_are_found_by_name() {
    let btf = tiny_btf();
    assert_eq!(btf_func_id(&btf, "bpf_lsm_file_open"), Ok(4));
    // `int` is an INT, not a FUNC; `x` only names members.
    assert!(btf_func_id(&btf, "int").is_err());
    assert!(btf_func_id(&btf, "x").is_err());
    let mut bad = btf.clone();
    bad[0] ^= 0xff;
    assert!(btf_func_id(&bad, "bpf_lsm_file_open")
        .unwrap_err()
        .contains("magic"));
    assert!(btf_func_id(&btf[..30], "bpf_lsm_file_open").is_err());
    let mut unknown = btf;
    // Kind 31 for the first type.
    unknown[24 + 4..24 + 8].copy_from_slice(&(31u32 << 24).to_ne_bytes());
    assert!(btf_func_id(&unknown, "bpf_lsm_file_open")
        .unwrap_err()
        .contains("unknown BTF kind 31"));
}

#[test]
fn the_real_kernel_btf_has_the_lsm_hook() {
    match fs::read("/sys/kernel/btf/vmlinux") {
        Ok(btf) => {
            let id = btf_func_id(&btf, LSM_PROBE_HOOK).unwrap();
            assert!(id > 0);
        }
        Err(e) if in_ci() => panic!("CI=true but /sys/kernel/btf/vmlinux is unreadable: {e}"),
        Err(e) => eprintln!("skipped: /sys/kernel/btf/vmlinux: {e}"),
    }
}

// ---- forked children -------------------------------------------------------------------------

#[test]
fn children_report_success_payload_and_failed_steps() {
    assert_eq!(
        in_child(|out| {
            out.send(b"payload");
            Ok(())
        }),
        Outcome::Ok(b"payload".to_vec())
    );
    assert_eq!(in_child(|_| Ok(())), Outcome::Ok(Vec::new()));
    assert_eq!(
        in_child(|_| Err(StepError {
            step: "some step",
            errno: Errno::ENOENT
        })),
        Outcome::Failed {
            step: "some step".into(),
            errno: Errno::ENOENT
        }
    );
    let long_step = in_child(|_| {
        Err(StepError {
            step: "a step name that is much, much longer than the ninety-six bytes that a probe child may report back to its parent process",
            errno: Errno::EIO,
        })
    });
    match long_step {
        Outcome::Failed { step, errno } => {
            assert_eq!(errno, Errno::EIO);
            assert_eq!(step.len(), MAX_STEP);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_child_that_dies_is_reported_broken() {
    let o = in_child(|_| {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
        Ok(())
    });
    assert!(
        matches!(o, Outcome::Broken(ref s) if s.contains("SIGKILL")),
        "{o:?}"
    );
}

#[test]
fn probing_leaves_the_caller_untouched() {
    let ns = |n: &str| fs::read_link(format!("/proc/self/ns/{n}")).unwrap();
    let before: Vec<_> = ["user", "mnt", "net", "pid", "uts", "ipc", "cgroup"]
        .iter()
        .map(|n| ns(n))
        .collect();
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let field = |s: &str, k: &str| {
        s.lines()
            .find(|l| l.starts_with(k))
            .map(str::to_string)
            .unwrap_or_default()
    };
    let probes = run_all();
    assert!(!probes.is_empty());
    let after: Vec<_> = ["user", "mnt", "net", "pid", "uts", "ipc", "cgroup"]
        .iter()
        .map(|n| ns(n))
        .collect();
    assert_eq!(before, after);
    let status_after = fs::read_to_string("/proc/self/status").unwrap();
    for k in ["NoNewPrivs:", "Seccomp:", "Uid:"] {
        assert_eq!(field(&status, k), field(&status_after, k), "{k}");
    }
}

// ---- the probe list --------------------------------------------------------------------------

#[test]
fn names_are_unique_and_cover_every_required_probe() {
    let probes = run_all();
    let names: Vec<_> = probes.iter().map(|p| p.name).collect();
    let unique: BTreeSet<_> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "duplicate names: {names:?}");
    for r in REQUIRED {
        assert!(names.contains(r), "{r} missing from {names:?}");
    }
    for want in [
        "bpf.socket_filter",
        "bpf.tracepoint",
        "bpf.raw_tracepoint",
        "bpf.cgroup_sock_addr",
        "bpf.lsm",
        "lsm.active",
        "cgroup.controller.pids",
        "cgroup.controller.memory",
        "cgroup.controller.cpu",
        "sysctl.user.max_user_namespaces",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    for p in &probes {
        assert!(!p.detail.is_empty(), "{p:?}");
        assert_eq!(
            p.ok,
            p.fix.is_none(),
            "a failure needs a fix, a pass none: {p:?}"
        );
        assert_eq!(p.required(), REQUIRED.contains(&p.name));
    }
}

#[test]
fn required_probes_pass_as_root() {
    if !nix::unistd::geteuid().is_root() {
        assert!(!in_ci(), "CI=true but the tests are not running as root");
        eprintln!("skipped: not root");
        return;
    }
    let probes = run_all();
    let failed: Vec<_> = probes.iter().filter(|p| p.required() && !p.ok).collect();
    assert!(failed.is_empty(), "required probes failed: {failed:#?}");
    let landlock = probes.iter().find(|p| p.name == "landlock").unwrap();
    assert!(landlock.detail.starts_with("ABI "), "{landlock:?}");
    // Root loads the plain program types on any kernel warden supports.
    for name in ["bpf.socket_filter", "bpf.raw_tracepoint"] {
        let p = probes.iter().find(|p| p.name == name).unwrap();
        assert!(p.ok, "{p:?}");
    }
}

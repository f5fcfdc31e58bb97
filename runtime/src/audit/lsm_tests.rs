use super::*;
use crate::audit::record::{Classifier, SandboxView, EV_FILE};
use std::collections::HashMap;

fn req(enforce: bool, fallback: Option<&str>) -> LsmRequest {
    LsmRequest {
        enforce,
        fallback: fallback.map(str::to_string),
    }
}

#[test]
fn enforce_with_lsm_enforces_and_observe_is_the_default() {
    assert_eq!(choose(&req(true, None), Ok(())), Choice::Enforce);
    assert_eq!(choose(&req(false, None), Ok(())), Choice::Observe);
    assert_eq!(
        choose(&req(true, Some(FALLBACK_TRACEPOINTS)), Ok(())),
        Choice::Enforce
    );
}

#[test]
fn enforce_without_lsm_fails_closed_and_names_the_fallback() {
    let Choice::Refuse(why) = choose(&req(true, None), Err("EPERM")) else {
        panic!("enforce without BPF LSM must refuse");
    };
    assert!(why.contains("EPERM"), "{why}");
    assert!(why.contains("enforceFallback"), "{why}");
}

#[test]
fn enforce_without_lsm_runs_on_the_named_fallback_with_a_warning() {
    let c = choose(&req(true, Some("tracepoints")), Err("EPERM"));
    assert!(
        matches!(&c, Choice::Tracepoints { warn: true, reason } if reason.contains("EPERM")),
        "{c:?}"
    );
}

#[test]
fn an_unknown_fallback_refuses_even_where_lsm_works() {
    for avail in [Ok(()), Err("EPERM")] {
        let c = choose(&req(true, Some("landlock")), avail);
        assert!(
            matches!(&c, Choice::Refuse(why) if why.contains("\"landlock\"")),
            "{c:?}"
        );
    }
}

#[test]
fn without_enforce_a_missing_lsm_is_silent() {
    assert_eq!(
        choose(&req(false, None), Err("EPERM")),
        Choice::Tracepoints {
            reason: "EPERM".into(),
            warn: false
        }
    );
}

#[test]
fn the_lsm_list_is_read_exactly() {
    assert!(bpf_in_lsm_list("lockdown,capability,landlock,bpf\n"));
    assert!(bpf_in_lsm_list("bpf"));
    assert!(!bpf_in_lsm_list("lockdown,capability,landlock,bpffs"));
    assert!(!bpf_in_lsm_list(""));
}

/// glibc's `makedev`.
fn makedev(major: u64, minor: u64) -> u64 {
    ((major & 0xfff) << 8) | ((major & !0xfff) << 32) | (minor & 0xff) | ((minor & !0xff) << 12)
}

#[test]
fn st_dev_becomes_the_kernels_dev_t() {
    assert_eq!(kernel_dev(makedev(8, 1)), (8 << 20) | 1);
    assert_eq!(kernel_dev(makedev(0, 300)), 300);
    assert_eq!(kernel_dev(makedev(259, 70000)), (259 << 20) | 70000);
}

#[test]
fn the_inode_key_has_the_c_layout() {
    let k = inode_key(7, 0x0800_0001, 42);
    assert_eq!(k.len(), 24);
    assert_eq!(k[0..8], 7u64.to_ne_bytes());
    assert_eq!(k[8..16], 42u64.to_ne_bytes());
    assert_eq!(k[16..20], 0x0800_0001u32.to_ne_bytes());
    assert_eq!(k[20..24], [0; 4]);
}

#[test]
fn one_entry_per_inode_with_its_classes_and_missing_paths_skipped() {
    let rules = Rules {
        writable: vec!["/w".into(), "/w-again".into()],
        protected: vec!["/w/.git".into()],
        deny_read: vec!["/w".into(), "/missing".into()],
        allow_read: vec![],
    };
    let inodes: HashMap<&str, (u64, u64)> = [
        ("/w", (makedev(8, 1), 10)),
        ("/w-again", (makedev(8, 1), 10)), // a second name of /w
        ("/w/.git", (makedev(8, 1), 11)),
    ]
    .into_iter()
    .collect();
    let stat = |p: &Path| inodes.get(p.to_str().unwrap_or("")).copied();
    let e = inode_entries(5, &rules, &stat);
    assert_eq!(e.len(), 2);
    assert_eq!(e[0].0, inode_key(5, (8 << 20) | 1, 10));
    assert_eq!(e[0].1, INO_WRITABLE | INO_DENY_READ);
    assert_eq!(e[1].1, INO_PROTECTED);
}

fn raw(kind: u16, op: u16, flags: u64, ret: i32, path: &str) -> RawEvent {
    RawEvent {
        ts_ns: 0,
        cgroup_id: 9,
        pid: 100,
        tid: 100,
        ppid: 1,
        uid: 0,
        kind,
        op,
        ret,
        flags,
        family: 0,
        port: 0,
        addr: [0; 16],
        comm: "cat".into(),
        path: path.as_bytes().to_vec(),
        path2: Vec::new(),
    }
}

fn classify_one(ev: &RawEvent) -> Option<ViolationRecord> {
    let view = SandboxView {
        sandbox: "warden-1".into(),
        writable: vec!["/work".into()],
        masked: vec!["/secret".into()],
        ..SandboxView::default()
    };
    Classifier::new(view).classify(ev, "t".into(), None)
}

const OPENAT: u16 = 1;

#[test]
fn a_read_the_lsm_refused_is_layer_lsm() {
    // cat /work/link (a hard link to a denyRead file): openat's record, marked by file_open.
    let ev = raw(
        EV_FILE,
        OPENAT,
        FL_LSM | FL_LSM_DENIED,
        -libc::EACCES,
        "/work/link",
    );
    let rec = classify_one(&ev).expect("a record");
    assert_eq!(rec.layer, Some(Layer::Lsm));
    assert_eq!(rec.kind, Kind::FileRead);
    assert!(rec.violation);
    assert_eq!(rec.errno.map(|e| e.number), Some(libc::EACCES));
    assert!(rec.reason.unwrap_or_default().contains("denyRead"));
}

#[test]
fn observe_mode_records_what_enforce_would_refuse() {
    let ev = raw(EV_FILE, OPENAT, FL_LSM, 3, "/work/link");
    let rec = classify_one(&ev).expect("a record");
    assert_eq!(rec.layer, Some(Layer::Lsm));
    assert!(rec.violation);
    assert_eq!(rec.errno, None);
    assert!(rec.reason.unwrap_or_default().starts_with("observe mode"));
}

#[test]
fn a_layer_that_refused_first_keeps_its_name() {
    // Observe-marked, but the read-only mount refused the write before the LSM was asked.
    let ev = raw(EV_FILE, OPENAT, FL_LSM | 0o1, -libc::EROFS, "/etc/passwd");
    let rec = classify_one(&ev).expect("a record");
    assert_eq!(rec.layer, Some(Layer::Mount));
    // Unmarked records are untouched.
    let ev = raw(EV_FILE, OPENAT, 0, -libc::EACCES, "/secret");
    assert_eq!(classify_one(&ev).and_then(|r| r.layer), Some(Layer::Mount));
}

#[test]
fn the_lsm_programs_own_records() {
    let exec = raw(
        EV_LSM_FILE,
        OP_EXEC,
        FL_LSM | FL_LSM_DENIED,
        -libc::EACCES,
        "/secret/tool",
    );
    let rec = classify_one(&exec).expect("a record");
    assert_eq!((rec.kind, rec.operation.as_str()), (Kind::FileRead, "exec"));
    assert_eq!(rec.layer, Some(Layer::Lsm));

    let unlink = raw(EV_LSM_FILE, OP_UNLINK, FL_LSM, 0, "passwd");
    let rec = classify_one(&unlink).expect("a record");
    assert_eq!(
        (rec.kind, rec.operation.as_str()),
        (Kind::FileWrite, "unlink")
    );
    assert!(rec.reason.unwrap_or_default().starts_with("observe mode"));

    let ptrace = raw(
        EV_PTRACE,
        OP_PTRACE,
        FL_LSM | FL_LSM_DENIED | 4242,
        -libc::EPERM,
        "sshd",
    );
    let rec = classify_one(&ptrace).expect("a record");
    assert_eq!(rec.kind, Kind::Process);
    assert_eq!(rec.target, "pid 4242 (sshd)");
    assert_eq!(rec.errno.map(|e| e.number), Some(libc::EPERM));

    let mut vsock = raw(EV_SOCKET, 40, FL_LSM, 0, "");
    vsock.family = 40;
    let rec = classify_one(&vsock).expect("a record");
    assert_eq!(rec.kind, Kind::Network);
    assert!(!rec.violation);
}

/// On this machine BPF LSM is refused (EPERM) and must come back as a reason, never a panic
/// or a half-loaded object; where it loads, nothing is scoped and it detaches cleanly.
#[test]
fn loading_reports_unavailability_as_a_reason() {
    match LsmPrograms::load(None) {
        Ok(p) => assert_eq!(p.scoped_count(), 0),
        Err(why) => assert!(!why.is_empty()),
    }
    let probe = doctor_probe();
    assert_eq!(probe.name, "audit.lsm");
    assert_eq!(probe.ok, probe.fix.is_none());
}

#[test]
fn the_libbpf_tail_keeps_the_last_lines() {
    assert_eq!(tail("a\n\nb\nc\n", 2), "b; c");
    assert_eq!(tail("", 3), "");
}

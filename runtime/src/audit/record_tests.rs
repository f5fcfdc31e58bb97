//! Decoding of the ring buffer's events and their classification.

use super::record::*;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// An event laid out as `struct event` in ebpf/warden.bpf.h.
#[derive(Default)]
struct Ev {
    ts: u64,
    cgroup: u64,
    pid: u32,
    ppid: u32,
    kind: u16,
    op: u16,
    ret: i32,
    flags: u64,
    family: u16,
    port: u16,
    addr: [u8; 16],
    comm: &'static str,
    path: Vec<u8>,
    path2: Vec<u8>,
}

impl Ev {
    fn bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; EVENT_SIZE];
        b[0..8].copy_from_slice(&self.ts.to_ne_bytes());
        b[8..16].copy_from_slice(&self.cgroup.to_ne_bytes());
        b[16..20].copy_from_slice(&self.pid.to_ne_bytes());
        b[20..24].copy_from_slice(&self.pid.to_ne_bytes());
        b[24..28].copy_from_slice(&self.ppid.to_ne_bytes());
        b[32..34].copy_from_slice(&self.kind.to_ne_bytes());
        b[34..36].copy_from_slice(&self.op.to_ne_bytes());
        b[36..40].copy_from_slice(&self.ret.to_ne_bytes());
        b[40..48].copy_from_slice(&self.flags.to_ne_bytes());
        b[48..50].copy_from_slice(&self.family.to_ne_bytes());
        b[50..52].copy_from_slice(&self.port.to_ne_bytes());
        b[52..56].copy_from_slice(&EVENT_VERSION.to_ne_bytes());
        b[56..72].copy_from_slice(&self.addr);
        b[72..72 + self.comm.len()].copy_from_slice(self.comm.as_bytes());
        b[88..88 + self.path.len()].copy_from_slice(&self.path);
        b[88 + PATH_LEN..88 + PATH_LEN + self.path2.len()].copy_from_slice(&self.path2);
        b
    }
}

fn view() -> SandboxView {
    SandboxView {
        sandbox: "warden-1".into(),
        writable: vec![
            PathBuf::from("/home/u/project"),
            PathBuf::from("/tmp/w/tmp"),
        ],
        protected: vec![PathBuf::from("/home/u/project/.git/hooks")],
        masked: vec![PathBuf::from("/home/u/.ssh")],
        masked_files: false,
        exposing_masks: Vec::new(),
        exposed: Vec::new(),
        policy: None,
    }
}

fn classify(ev: &Ev) -> Option<ViolationRecord> {
    let raw = RawEvent::decode(&ev.bytes()).expect("decodes");
    Classifier::new(view()).classify(&raw, "T".into(), Some(Path::new("/home/u/project")))
}

fn file(op: u16, ret: i32, flags: u64, path: &str) -> Ev {
    Ev {
        kind: EV_FILE,
        op,
        ret,
        flags,
        pid: 42,
        ppid: 41,
        cgroup: 7,
        comm: "cat",
        path: path.as_bytes().to_vec(),
        ..Ev::default()
    }
}

#[test]
fn decode_reads_every_field_at_its_offset() {
    let ev = Ev {
        ts: 123,
        cgroup: 99,
        pid: 5,
        ppid: 4,
        kind: EV_CONNECT,
        op: 40,
        ret: -101,
        flags: 1,
        family: AF_INET,
        port: 80,
        addr: [10, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        comm: "python3",
        ..Ev::default()
    };
    let raw = RawEvent::decode(&ev.bytes()).unwrap();
    assert_eq!(raw.ts_ns, 123);
    assert_eq!(raw.cgroup_id, 99);
    assert_eq!((raw.pid, raw.tid, raw.ppid), (5, 5, 4));
    assert_eq!(
        (raw.kind, raw.op, raw.ret, raw.flags),
        (EV_CONNECT, 40, -101, 1)
    );
    assert_eq!(raw.ip(), Some("10.1.2.3".parse::<IpAddr>().unwrap()));
    assert_eq!(raw.port, 80);
    assert_eq!(raw.comm, "python3");
}

#[test]
fn decode_refuses_wrong_sizes_and_versions() {
    assert_eq!(RawEvent::decode(&[0u8; 10]), Err(DecodeError::Size(10)));
    assert_eq!(
        RawEvent::decode(&vec![0u8; EVENT_SIZE + 1]),
        Err(DecodeError::Size(EVENT_SIZE + 1))
    );
    let mut b = file(1, -13, 0, "/x").bytes();
    b[52..56].copy_from_slice(&7u32.to_ne_bytes());
    assert_eq!(RawEvent::decode(&b), Err(DecodeError::Version(7)));
}

#[test]
fn decode_never_panics_on_garbage() {
    // Every length up to a little past the event, random-ish content.
    for len in 0..EVENT_SIZE + 8 {
        let data: Vec<u8> = (0..len).map(|i| (i * 131 % 251) as u8).collect();
        let _ = RawEvent::decode(&data);
    }
    let mut b = vec![0xffu8; EVENT_SIZE];
    b[52..56].copy_from_slice(&EVENT_VERSION.to_ne_bytes());
    let raw = RawEvent::decode(&b).unwrap();
    let _ = Classifier::new(view()).classify(&raw, "T".into(), None);
}

#[test]
fn failed_reads_and_writes_get_kind_errno_and_layer() {
    // A write outside the writable roots: the read-only host mount.
    let r = classify(&file(1, -30, 0o1101, "/etc/passwd")).unwrap();
    assert_eq!(r.kind, Kind::FileWrite);
    assert_eq!(r.operation, "open");
    assert_eq!(r.target, "/etc/passwd");
    assert_eq!(
        r.errno,
        Some(Errno {
            name: "EROFS".into(),
            number: 30
        })
    );
    assert_eq!(r.layer, Some(Layer::Mount));
    assert!(r.violation);
    assert!(r.reason.unwrap().contains("outside the writable roots"));
    assert_eq!((r.pid, r.ppid, r.cgroup_id), (Some(42), Some(41), Some(7)));

    // A protected path inside the project.
    let r = classify(&file(5, -30, 0, "/home/u/project/.git/hooks/pre-commit")).unwrap();
    assert_eq!((r.kind, r.operation.as_str()), (Kind::FileWrite, "unlink"));
    assert!(r.reason.unwrap().contains("protected"));

    // EACCES on a read: file permissions.
    let r = classify(&file(1, -13, 0, "/etc/shadow")).unwrap();
    assert_eq!((r.kind, r.layer), (Kind::FileRead, Some(Layer::Dac)));

    // EACCES on a write outside the writable roots (a writable mount): Landlock.
    let r = classify(&file(1, -13, 0o101, "/dev/shm/x")).unwrap();
    assert_eq!((r.kind, r.layer), (Kind::FileWrite, Some(Layer::Landlock)));

    // EACCES on a write inside a writable root: Landlock allows it there, so permissions.
    let r = classify(&file(15, -13, 0, "/home/u/project/ro/x")).unwrap();
    assert_eq!((r.operation.as_str(), r.layer), ("mkdir", Some(Layer::Dac)));
}

#[test]
fn open_flags_decide_read_or_write() {
    assert!(!is_write(1, 0)); // O_RDONLY
    assert!(is_write(1, 1)); // O_WRONLY
    assert!(is_write(1, 2)); // O_RDWR
    assert!(is_write(1, 0o100)); // O_CREAT
    assert!(is_write(1, 0o1000)); // O_TRUNC
    assert!(!is_write(1, 0o2000000 | 0o400000)); // O_CLOEXEC | O_DIRECTORY
    assert!(is_write(5, 0)); // unlinkat
    assert!(is_write(7, 0)); // renameat2
}

#[test]
fn relative_paths_resolve_against_the_cwd_unless_relative_to_a_descriptor() {
    let r = classify(&file(1, -30, 1, "notes.txt")).unwrap();
    assert_eq!(r.target, "/home/u/project/notes.txt");
    let r = classify(&file(1, -30, 1 | FL_RELATIVE, "notes.txt")).unwrap();
    assert_eq!(r.target, "notes.txt");
}

#[test]
fn a_masked_read_is_a_mount_violation_without_errno() {
    let r = classify(&file(1, 3, FL_MASKED, "/home/u/.ssh/id_rsa")).unwrap();
    assert_eq!(r.kind, Kind::FileRead);
    assert_eq!(r.errno, None);
    assert_eq!(r.layer, Some(Layer::Mount));
    assert!(r.reason.unwrap().contains("denyRead"));
}

#[test]
fn rename_and_symlink_keep_their_second_path() {
    let mut ev = file(7, -30, 0, "/etc/a");
    ev.path2 = b"/etc/b".to_vec();
    let r = classify(&ev).unwrap();
    assert_eq!(
        (r.target.as_str(), r.detail.as_deref()),
        ("/etc/a", Some("/etc/b"))
    );
}

#[test]
fn exec_records_are_not_violations_and_name_the_exe_of_later_records() {
    let exec = Ev {
        kind: EV_EXEC,
        pid: 42,
        comm: "cat",
        path: b"/usr/bin/cat".to_vec(),
        path2: b"cat\0/etc/shadow\0".to_vec(),
        port: 16,
        ..Ev::default()
    };
    let mut c = Classifier::new(view());
    let raw = RawEvent::decode(&exec.bytes()).unwrap();
    let r = c.classify(&raw, "T".into(), None).unwrap();
    assert_eq!(r.kind, Kind::Exec);
    assert!(!r.violation);
    assert_eq!(r.target, "/usr/bin/cat");
    assert_eq!(r.detail.as_deref(), Some("cat /etc/shadow"));
    assert_eq!(r.errno, None);
    let raw = RawEvent::decode(&file(1, -13, 0, "/etc/shadow").bytes()).unwrap();
    let r = c.classify(&raw, "T".into(), None).unwrap();
    assert_eq!(r.exe.as_deref(), Some("/usr/bin/cat"));
}

fn connect(family: u16, addr: [u8; 16], port: u16, ret: i32) -> Option<ViolationRecord> {
    classify(&Ev {
        kind: EV_CONNECT,
        op: 40,
        family,
        addr,
        port,
        ret,
        comm: "curl",
        ..Ev::default()
    })
}

fn v4(a: [u8; 4]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..4].copy_from_slice(&a);
    out
}

#[test]
fn direct_connects_are_network_violations_but_the_proxy_listeners_are_not_reported() {
    let r = connect(AF_INET, v4([10, 1, 2, 3]), 80, -101).unwrap();
    assert_eq!(r.kind, Kind::Network);
    assert_eq!(r.target, "10.1.2.3:80");
    assert_eq!(r.errno.unwrap().name, "ENETUNREACH");
    assert_eq!(r.layer, Some(Layer::Netns));
    assert!(r.violation);

    let six: [u8; 16] = "2001:db8::1"
        .parse::<std::net::Ipv6Addr>()
        .unwrap()
        .octets();
    let r = connect(AF_INET6, six, 443, -101).unwrap();
    assert_eq!(r.target, "[2001:db8::1]:443");

    assert!(connect(AF_INET, v4([127, 0, 0, 1]), 3128, 0).is_none());
    assert!(connect(AF_INET, v4([127, 0, 0, 1]), 1080, -115).is_none());
    assert!(connect(AF_INET, v4([127, 0, 0, 53]), 53, 0).is_none());
    let mapped: [u8; 16] = "::ffff:127.0.0.1"
        .parse::<std::net::Ipv6Addr>()
        .unwrap()
        .octets();
    assert!(connect(AF_INET6, mapped, 3128, 0).is_none());

    // The sandbox's own loopback is recorded, but is no violation.
    let r = connect(AF_INET, v4([127, 0, 0, 1]), 8080, -111).unwrap();
    assert!(!r.violation);
    assert_eq!(r.layer, None);
}

#[test]
fn unix_connects_name_the_path_and_abstract_sockets_get_an_at() {
    let mut ev = Ev {
        kind: EV_UNIX,
        op: 40,
        family: AF_UNIX,
        ret: -2,
        comm: "nc",
        ..Ev::default()
    };
    let mut path = b"/run/docker.sock".to_vec();
    path.extend([0u8; 4]);
    ev.flags = path.len() as u64;
    ev.path = path;
    let r = classify(&ev).unwrap();
    assert_eq!(
        (r.kind, r.target.as_str()),
        (Kind::UnixSocket, "/run/docker.sock")
    );
    assert_eq!(r.errno.unwrap().name, "ENOENT");
    assert!(!r.violation);

    ev.path = b"\0dbus-abc".to_vec();
    ev.flags = 9;
    ev.ret = -1;
    let r = classify(&ev).unwrap();
    assert_eq!(r.target, "@dbus-abc");
    assert!(r.violation);
    assert_eq!(r.layer, Some(Layer::Landlock));
}

fn refused_call(nr: i64, arg0: u16) -> Option<ViolationRecord> {
    classify(&Ev {
        kind: EV_SYSCALL,
        flags: nr as u64,
        family: arg0,
        ret: -1,
        comm: "python3",
        ..Ev::default()
    })
}

#[test]
fn calls_refused_at_entry_are_seccomp_denials_of_the_filtered_calls_only() {
    let r = refused_call(libc::SYS_socket, AF_UNIX).unwrap();
    assert_eq!((r.kind, r.target.as_str()), (Kind::UnixSocket, "AF_UNIX"));
    assert_eq!(
        (r.operation.as_str(), r.layer),
        ("socket", Some(Layer::Seccomp))
    );
    assert!(r.reason.unwrap().contains("allowUnixSockets"));
    let r = refused_call(libc::SYS_socket, 17).unwrap();
    assert_eq!((r.kind, r.target.as_str()), (Kind::Syscall, "AF_PACKET"));
    let r = refused_call(libc::SYS_ptrace, 0).unwrap();
    assert_eq!((r.kind, r.operation.as_str()), (Kind::Process, "ptrace"));
    let r = refused_call(libc::SYS_unshare, 0).unwrap();
    assert_eq!(r.kind, Kind::Mount);
    // EPERM from a call no layer of the sandbox refuses (setpgid across sessions, ordinary
    // job control): not reported.
    assert!(refused_call(libc::SYS_setpgid, 0).is_none());
}

/// A call refused for want of ownership, a capability or ptrace access, with its first two
/// arguments whole as the kernel's record carries them.
fn refused_with(nr: i64, ret: i32, arg0: u64, arg1: u64) -> ViolationRecord {
    let mut addr = [0u8; 16];
    addr[..8].copy_from_slice(&arg0.to_ne_bytes());
    addr[8..].copy_from_slice(&arg1.to_ne_bytes());
    classify(&Ev {
        kind: EV_SYSCALL,
        flags: nr as u64,
        family: arg0 as u16,
        addr,
        ret,
        comm: "python3",
        ..Ev::default()
    })
    .unwrap_or_else(|| panic!("call {nr} not recorded"))
}

#[test]
fn refused_calls_name_what_they_aimed_at_from_whole_arguments() {
    // A pid past 65535 is no longer cut to its low 16 bits (70000 & 0xffff = 4464).
    let r = refused_with(libc::SYS_kill, -1, 70_000, 15);
    assert_eq!(r.target, "pid 70000");
    // prlimit64 on pid 65536 is another process (its low 16 bits are 0: "itself" before).
    let r = refused_with(libc::SYS_prlimit64, -1, 65_536, 7);
    assert_eq!(r.layer, Some(Layer::Seccomp));
    assert_eq!(r.target, "pid 65536");
    let r = refused_with(libc::SYS_kcmp, -1, 12, 1);
    assert_eq!(
        (r.kind, r.target.as_str()),
        (Kind::Process, "pids 12 and 1")
    );
    // setpriority: EACCES raising the caller's own priority, EPERM another owner's process.
    let r = refused_with(libc::SYS_setpriority, -13, 0, 0);
    assert_eq!(r.target, "its own process");
    assert!(r.reason.unwrap().contains("CAP_SYS_NICE"));
    let r = refused_with(libc::SYS_setpriority, -1, 1, 300);
    assert_eq!(r.target, "process group 300");
    assert!(r.reason.unwrap().contains("owner"));
    let r = refused_with(libc::SYS_sched_setaffinity, -1, 1, 128);
    assert_eq!((r.kind, r.target.as_str()), (Kind::Process, "pid 1"));
    let r = refused_with(libc::SYS_process_madvise, -13, 3, 0);
    assert_eq!((r.kind, r.target.as_str()), (Kind::Process, "pidfd 3"));
    // Round 21: prctl's privileged options, mbind, port I/O and identity changes.
    let r = refused_with(libc::SYS_prctl, -1, 35 /* PR_SET_MM */, 1);
    assert_eq!(
        (r.kind, r.target.as_str(), r.layer),
        (Kind::Syscall, "prctl option 35", Some(Layer::Dac))
    );
    for (nr, name) in [
        (libc::SYS_mbind, "mbind"),
        (libc::SYS_iopl, "iopl"),
        (libc::SYS_setresuid, "setresuid"),
    ] {
        assert_eq!(refused_with(nr, -1, 0, 0).target, name);
    }
    let r = refused_with(libc::SYS_capset, -1, 0x7fff_0000, 0x7fff_0010);
    assert_eq!(
        (r.kind, r.target.as_str(), r.layer),
        (Kind::Syscall, "capset", Some(Layer::Dac))
    );
}

#[test]
fn namespace_requests_name_the_namespaces_clone3_included() {
    let user_mount = (libc::CLONE_NEWUSER | libc::CLONE_NEWNS) as u64;
    // clone: the low byte is the exit signal (SIGCHLD), not CLONE_NEWTIME.
    let r = refused_with(libc::SYS_clone, -1, user_mount | 0x91, 0);
    assert_eq!(
        (r.kind, r.target.as_str(), r.layer),
        (
            Kind::Mount,
            "new user, mount namespaces",
            Some(Layer::Seccomp)
        )
    );
    assert!(!r.approximate);
    let r = refused_with(libc::SYS_unshare, -1, libc::CLONE_NEWNET as u64, 0);
    assert_eq!(r.target, "new network namespace");
    // clone3, refused ENOSYS whole: the flags read from its struct (size 88).
    let r = refused_with(
        libc::SYS_clone3,
        -libc::ENOSYS,
        0x80 | libc::CLONE_NEWPID as u64,
        88,
    );
    assert_eq!(
        (r.kind, r.operation.as_str(), r.target.as_str()),
        (Kind::Mount, "clone3", "new pid, time namespaces")
    );
    assert!(
        r.approximate,
        "flags read from the command's memory after the call"
    );
    assert!(r.reason.unwrap().contains("ENOSYS"));
}

#[test]
fn path_bytes_that_are_not_utf8_are_escaped_and_marked_approximate() {
    let mut ev = file(1, -13, 0, "");
    ev.path = b"/etc/x\xff".to_vec();
    let a = classify(&ev).unwrap();
    ev.path = b"/etc/x\xfe".to_vec();
    let b = classify(&ev).unwrap();
    assert_eq!(a.target, r"/etc/x\xff");
    assert_eq!(b.target, r"/etc/x\xfe");
    assert!(a.approximate && b.approximate);
    // UTF-8 is shown as is and stays exact.
    ev.path = "/etc/é".as_bytes().to_vec();
    let c = classify(&ev).unwrap();
    assert_eq!(c.target, "/etc/é");
    assert!(!c.approximate);
    assert_eq!(shown(b"a\xc3"), (r"a\xc3".to_string(), false));
}

#[test]
fn a_denied_read_of_a_masked_file_is_the_mount_layer() {
    let r = classify(&file(1, -13, 0, "/home/u/.ssh/id_rsa")).unwrap();
    assert_eq!((r.kind, r.layer), (Kind::FileRead, Some(Layer::Mount)));
    assert!(r.reason.unwrap().contains("denyRead"));
}

#[test]
fn records_serialise_as_one_json_object_with_kebab_case_kinds() {
    let r = classify(&file(1, -30, 1, "/etc/passwd")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(v["kind"], "file-write");
    assert_eq!(v["layer"], "mount");
    assert_eq!(v["errno"]["name"], "EROFS");
    assert_eq!(v["errno"]["number"], 30);
    assert_eq!(v["sandbox"], "warden-1");
    assert_eq!(v["source"], "ebpf");
    assert_eq!(v["count"], 1);
    assert_eq!(v["violation"], true);
}

#[test]
fn times_are_rfc3339_utc() {
    assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(rfc3339_ms(951_782_400_123), "2000-02-29T00:00:00.123Z");
    assert_eq!(rfc3339_ms(1_700_000_000_000), "2023-11-14T22:13:20.000Z");
}

#[test]
fn errno_names() {
    assert_eq!(errno_name(13), "EACCES");
    assert_eq!(errno_name(1), "EPERM");
    assert_eq!(errno_name(30), "EROFS");
    assert_eq!(errno_name(4242), "E4242");
}

#[test]
fn proxy_denials_become_network_records_of_layer_proxy() {
    use crate::net::event::{NetEvent, Protocol};
    use crate::policy::decision::{Decision, ReasonKind, Verdict};
    let verdict = Verdict {
        decision: Decision::Deny,
        kind: ReasonKind::DomainNotAllowed,
        reason: "evil.example is not in allowedDomains".into(),
        rule: None,
    };
    let ev = NetEvent::new(Protocol::Connect, "evil.example", Some(443), &verdict);
    let r = from_net_event("warden-9", &ev);
    assert_eq!(r.kind, Kind::Network);
    assert_eq!(r.target, "evil.example:443");
    assert_eq!(r.layer, Some(Layer::Proxy));
    assert_eq!(r.source, "proxy");
    assert!(r.violation);
    // IPv6 literals are bracketed once, with or without brackets in the event (round 22).
    for host in ["::1", "[::1]"] {
        let r = from_net_event(
            "warden-9",
            &NetEvent::new(Protocol::Socks5, host, Some(8997), &verdict),
        );
        assert_eq!(r.target, "[::1]:8997", "{host}");
    }
    let allowed = Verdict {
        decision: Decision::Allow,
        ..verdict
    };
    let r = from_net_event(
        "warden-9",
        &NetEvent::new(Protocol::Http, "github.com", Some(80), &allowed),
    );
    assert!(!r.violation);
    assert_eq!(r.layer, None);
}

#[test]
fn kind_and_layer_names_are_their_serde_names() {
    let kinds = [
        Kind::FileRead,
        Kind::FileWrite,
        Kind::Exec,
        Kind::Network,
        Kind::UnixSocket,
        Kind::Process,
        Kind::Mount,
        Kind::Syscall,
    ];
    for k in kinds {
        assert_eq!(serde_json::to_value(k).unwrap(), k.name());
    }
    let layers = [
        Layer::Mount,
        Layer::Landlock,
        Layer::Seccomp,
        Layer::Proxy,
        Layer::Lsm,
        Layer::Netns,
        Layer::Dac,
        Layer::Ebpf,
    ];
    for l in layers {
        assert_eq!(serde_json::to_value(l).unwrap(), l.name());
    }
}

#[test]
fn a_working_directory_sent_as_names_becomes_an_absolute_path() {
    assert_eq!(cwd_from_names(b"c\0b\0a\0\0\0", 3), b"/a/b/c".to_vec());
    assert_eq!(cwd_from_names(b"\0\0", 0), b"/".to_vec());
    // Only `count` names are taken, whatever follows.
    assert_eq!(cwd_from_names(b"x\0stale\0", 1), b"/x".to_vec());
}

#[test]
fn relative_paths_are_folded_lexically() {
    assert_eq!(lexical(Path::new("/w/a/b/../../x")), PathBuf::from("/w/x"));
    assert_eq!(lexical(Path::new("/w/./a/../../../..")), PathBuf::from("/"));
    assert_eq!(lexical(Path::new("/w/a")), PathBuf::from("/w/a"));
}

#[test]
fn an_enoent_is_a_violation_only_where_a_mask_hid_a_name_that_exists() {
    let host = tempfile::tempdir().unwrap();
    let mask = host.path().join("vault");
    std::fs::create_dir_all(&mask).unwrap();
    std::fs::write(mask.join("secret"), "s").unwrap();
    std::fs::write(mask.join("visible"), "v").unwrap();
    let mut v = view();
    v.masked.push(mask.clone());
    v.exposing_masks.push(mask.clone());
    v.exposed.push(mask.join("visible"));
    let classify = |path: &Path| {
        let ev = file(1, -libc::ENOENT, 0, path.to_str().unwrap());
        let raw = RawEvent::decode(&ev.bytes()).expect("decodes");
        Classifier::new(v.clone()).classify(&raw, "T".into(), None)
    };
    let r = classify(&mask.join("secret")).expect("hidden by the mask");
    assert_eq!(r.kind, Kind::FileRead);
    assert_eq!(r.layer, Some(Layer::Mount));
    assert_eq!(r.errno.as_ref().map(|e| e.name.as_str()), Some("ENOENT"));
    assert!(
        r.reason.as_deref().unwrap().contains("hidden by the mask"),
        "{r:?}"
    );
    // Missing on the host too, an exposed path, or outside every mask: no violation.
    assert!(classify(&mask.join("nothing-here")).is_none());
    assert!(classify(&mask.join("visible")).is_none());
    assert!(classify(&host.path().join("elsewhere")).is_none());
    std::fs::write(host.path().join("elsewhere"), "e").unwrap();
    assert!(classify(&host.path().join("elsewhere")).is_none());
}

/// Red-team rounds 18 and 19: a relative path whose `..` was folded away as text (after a
/// link it names another place) is approximate; a move or link between the sandbox's mounts
/// (EXDEV) is a violation only when a side it knows lies outside the writable roots.
#[test]
fn folded_parents_are_approximate_and_exdev_needs_a_refused_side() {
    // The kernel named the directory (FL_CWD: names innermost first); outside the writable
    // roots, where a refusal needs no link to explain it.
    let kernel = |path: &str| {
        let mut ev = file(1, -30, 1 | FL_CWD, path);
        ev.path2 = b"u\0home\0".to_vec();
        ev.port = 2;
        classify(&ev).unwrap()
    };
    let r = kernel("a/x");
    assert_eq!(r.target, "/home/u/a/x");
    assert!(!r.approximate, "{r:?}");
    let r = kernel("s/../../x");
    assert!(r.approximate, "{r:?}");
    // Read from /proc after the call: approximate whatever the path.
    assert!(classify(&file(1, -30, 1, "a/x")).unwrap().approximate);
    let exdev = |op: u16, from: &str, to: &str| {
        let mut ev = file(op, -libc::EXDEV, 0, from);
        ev.path2 = to.as_bytes().to_vec();
        classify(&ev)
    };
    // A host file into the project: refused by the read-only host mount.
    let r = exdev(9, "/etc/hostname", "stolen").expect("a violation");
    assert_eq!(
        (r.target.as_str(), r.layer),
        ("/etc/hostname", Some(Layer::Mount))
    );
    assert_eq!(r.errno.as_ref().map(|e| e.name.as_str()), Some("EXDEV"));
    // Between two writable roots, `mv` copies instead: nothing refused.
    assert!(exdev(9, "mine", "/tmp/w/tmp/moved").is_none());
    // renameat's second name may be relative to a descriptor: unknown, not the cwd's.
    assert!(exdev(8, "/tmp/w/tmp/x", "y").is_none());
    // The same name given to rename(2) is the cwd's (the project): still nothing refused.
    assert!(exdev(9, "/tmp/w/tmp/x", "y").is_none());
    // A host directory as the destination is.
    assert!(exdev(8, "/tmp/w/tmp/x", "/etc/y").is_some());
}

/// Red-team round 21: a write refused at a path in a writable root went where a symlink led;
/// the command can remove the link before the record is read, and the name then resolves
/// inside an ignored directory. Such records are approximate (never dropped); one at a
/// protected path or outside the writable roots is not.
#[test]
fn a_refusal_named_inside_a_writable_root_is_approximate_unless_a_protection_explains_it() {
    let r = classify(&file(1, -30, 1, "/home/u/project/build/lnk")).unwrap();
    assert!(r.approximate, "{r:?}");
    let r = classify(&file(1, -13, 0, "/tmp/w/tmp/x")).unwrap();
    assert!(r.approximate, "{r:?}");
    let r = classify(&file(1, -30, 1, "/home/u/project/.git/hooks/pre-commit")).unwrap();
    assert!(!r.approximate, "{r:?}");
    let r = classify(&file(1, -30, 1, "/etc/passwd")).unwrap();
    assert!(!r.approximate, "{r:?}");
}

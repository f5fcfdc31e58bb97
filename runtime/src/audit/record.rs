//! Violation records: the ring buffer's raw events decoded ([`RawEvent::decode`]), turned into
//! [`ViolationRecord`]s ([`Classifier::classify`]) with the kind, the operation, the errno and
//! the layer that refused, and proxy [`NetEvent`]s turned into the same records
//! ([`from_net_event`]). Pure code: every rule here is unit-tested (`record_tests.rs`).

use crate::net::event::{NetEvent, Stage};
use crate::policy::decision::Decision;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// `EVENT_VERSION` and the layout of `struct event` in `ebpf/warden.bpf.h`.
pub const EVENT_VERSION: u32 = 1;
pub const PATH_LEN: usize = 512;
pub const COMM_LEN: usize = 16;
pub const EVENT_SIZE: usize = 88 + 2 * PATH_LEN;

const OFF_TS: usize = 0;
const OFF_CGROUP: usize = 8;
const OFF_PID: usize = 16;
const OFF_TID: usize = 20;
const OFF_PPID: usize = 24;
const OFF_UID: usize = 28;
const OFF_KIND: usize = 32;
const OFF_OP: usize = 34;
const OFF_RET: usize = 36;
const OFF_FLAGS: usize = 40;
const OFF_FAMILY: usize = 48;
const OFF_PORT: usize = 50;
const OFF_VERSION: usize = 52;
const OFF_ADDR: usize = 56;
const OFF_COMM: usize = 72;
const OFF_PATH: usize = 88;
const OFF_PATH2: usize = 88 + PATH_LEN;

/// `EV_*` of warden.bpf.h.
pub const EV_FILE: u16 = 1;
pub const EV_EXEC: u16 = 2;
pub const EV_CONNECT: u16 = 3;
pub const EV_UNIX: u16 = 4;
pub const EV_SYSCALL: u16 = 5;

/// `FL_*` of warden.bpf.h.
pub const FL_MASKED: u64 = 1 << 32;
pub const FL_RELATIVE: u64 = 1 << 33;
pub const FL_PATH_LATE: u64 = 1 << 34;
pub const FL_TRUNCATED: u64 = 1 << 35;
pub const FL_UNIX_DENIED: u64 = 1 << 36;
/// A relative path's working directory, resolved in the kernel: `path2` holds `port` names,
/// innermost first (decoded into the absolute directory).
pub const FL_CWD: u64 = 1 << 37;
/// Another thread changed what the path was built from during the call: the path's bytes in
/// the caller's memory, or a working directory or descriptor table it shares.
pub const FL_RACED: u64 = 1 << 40;

pub const AF_UNIX: u16 = 1;
pub const AF_INET: u16 = 2;
pub const AF_INET6: u16 = 10;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("event of {0} bytes, expected {EVENT_SIZE}")]
    Size(usize),
    #[error("event version {0}, expected {EVENT_VERSION} (warden and its eBPF object disagree)")]
    Version(u32),
}

/// One event as the eBPF programs wrote it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawEvent {
    pub ts_ns: u64,
    pub cgroup_id: u64,
    pub pid: u32,
    pub tid: u32,
    pub ppid: u32,
    pub uid: u32,
    pub kind: u16,
    pub op: u16,
    pub ret: i32,
    pub flags: u64,
    pub family: u16,
    pub port: u16,
    pub addr: [u8; 16],
    pub comm: String,
    /// Raw bytes up to the first NUL (unix socket paths keep their leading NUL: see
    /// [`RawEvent::unix_path`]).
    pub path: Vec<u8>,
    pub path2: Vec<u8>,
}

/// `path` with `.` and `..` folded lexically (`/w/a/b/../x` → `/w/a/x`): how a relative path
/// resolved against the working directory is shown and matched against rules. (A `..` after a
/// symlink is folded as written, not as the kernel followed it.)
pub(crate) fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The absolute directory from `count` NUL-terminated names, innermost first (FL_CWD).
pub(crate) fn cwd_from_names(bytes: &[u8], count: u16) -> Vec<u8> {
    let names: Vec<&[u8]> = bytes.split(|b| *b == 0).take(usize::from(count)).collect();
    let mut out = Vec::new();
    for name in names.iter().rev() {
        out.push(b'/');
        out.extend_from_slice(name);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out
}

fn field<const N: usize>(data: &[u8], off: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(src) = data.get(off..off + N) {
        out.copy_from_slice(src);
    }
    out
}

fn cstr(data: &[u8]) -> Vec<u8> {
    let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    data[..end].to_vec()
}

impl RawEvent {
    /// Decodes one ring-buffer record (native byte order: the kernel is the same machine).
    pub fn decode(data: &[u8]) -> Result<RawEvent, DecodeError> {
        if data.len() != EVENT_SIZE {
            return Err(DecodeError::Size(data.len()));
        }
        let version = u32::from_ne_bytes(field(data, OFF_VERSION));
        if version != EVENT_VERSION {
            return Err(DecodeError::Version(version));
        }
        let kind = u16::from_ne_bytes(field(data, OFF_KIND));
        let flags = u64::from_ne_bytes(field(data, OFF_FLAGS));
        let path_bytes = &data[OFF_PATH..OFF_PATH + PATH_LEN];
        // A unix socket address is raw bytes with its length in `flags` (abstract names
        // start with NUL); everything else is a C string.
        let path = if kind == EV_UNIX {
            let len = usize::try_from(flags & 0xffff).unwrap_or(0).min(PATH_LEN);
            let raw = &path_bytes[..len];
            match raw.first() {
                Some(0) => raw.to_vec(),
                _ => cstr(raw),
            }
        } else {
            cstr(path_bytes)
        };
        let path2_bytes = &data[OFF_PATH2..OFF_PATH2 + PATH_LEN];
        let port = u16::from_ne_bytes(field(data, OFF_PORT));
        // exec: argv is NUL-separated with its byte length in `port`.
        let path2 = if kind == EV_EXEC {
            let len = usize::from(port).min(PATH_LEN);
            let mut argv = path2_bytes[..len].to_vec();
            while argv.last() == Some(&0) {
                argv.pop();
            }
            argv
        } else if kind == EV_FILE && flags & FL_CWD != 0 {
            cwd_from_names(path2_bytes, port)
        } else {
            cstr(path2_bytes)
        };
        Ok(RawEvent {
            ts_ns: u64::from_ne_bytes(field(data, OFF_TS)),
            cgroup_id: u64::from_ne_bytes(field(data, OFF_CGROUP)),
            pid: u32::from_ne_bytes(field(data, OFF_PID)),
            tid: u32::from_ne_bytes(field(data, OFF_TID)),
            ppid: u32::from_ne_bytes(field(data, OFF_PPID)),
            uid: u32::from_ne_bytes(field(data, OFF_UID)),
            kind,
            op: u16::from_ne_bytes(field(data, OFF_OP)),
            ret: i32::from_ne_bytes(field(data, OFF_RET)),
            flags,
            family: u16::from_ne_bytes(field(data, OFF_FAMILY)),
            port,
            addr: field(data, OFF_ADDR),
            comm: String::from_utf8_lossy(&cstr(&data[OFF_COMM..OFF_COMM + COMM_LEN])).into_owned(),
            path,
            path2,
        })
    }

    /// A refused call's first two arguments (EV_SYSCALL: the kernel's record carries them
    /// whole in `addr`).
    pub fn args(&self) -> (u64, u64) {
        let half = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&self.addr[i * 8..i * 8 + 8]);
            u64::from_ne_bytes(b)
        };
        (half(0), half(1))
    }

    /// The connect address (EV_CONNECT).
    pub fn ip(&self) -> Option<IpAddr> {
        match self.family {
            AF_INET => Some(IpAddr::V4(Ipv4Addr::new(
                self.addr[0],
                self.addr[1],
                self.addr[2],
                self.addr[3],
            ))),
            AF_INET6 => Some(IpAddr::V6(Ipv6Addr::from(self.addr))),
            _ => None,
        }
    }

    /// A unix socket address as people write it: a path, or `@name` for an abstract one.
    pub fn unix_path(&self) -> String {
        match self.path.split_first() {
            Some((0, name)) => format!("@{}", shown(&cstr_abstract(name)).0),
            Some(_) => shown(&self.path).0,
            None => "(unnamed)".to_string(),
        }
    }
}

/// An abstract name may hold NULs; trailing ones are padding.
fn cstr_abstract(name: &[u8]) -> Vec<u8> {
    let mut v = name.to_vec();
    while v.last() == Some(&0) {
        v.pop();
    }
    v
}

/// What kind of thing was attempted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    FileRead,
    FileWrite,
    Exec,
    Network,
    UnixSocket,
    Process,
    Mount,
    Syscall,
}

impl Kind {
    /// The name in records and metric labels (the serde name).
    pub fn name(self) -> &'static str {
        match self {
            Kind::FileRead => "file-read",
            Kind::FileWrite => "file-write",
            Kind::Exec => "exec",
            Kind::Network => "network",
            Kind::UnixSocket => "unix-socket",
            Kind::Process => "process",
            Kind::Mount => "mount",
            Kind::Syscall => "syscall",
        }
    }
}

/// The layer that refused (inferred for file errors: see [`Classifier`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layer {
    /// The mount view: read-only binds (EROFS) and denyRead masks.
    Mount,
    /// Landlock's write rules.
    Landlock,
    /// The seccomp filter (its denials fail with EPERM).
    Seccomp,
    /// warden's network proxy.
    Proxy,
    /// warden's BPF LSM programs (audit/lsm.rs): the third layer, `warden.audit.enforce`.
    Lsm,
    /// The sandbox's empty network namespace: a direct connection that bypassed the proxy.
    Netns,
    /// Unix permissions and capabilities (the sandbox drops every capability, so root's
    /// overrides do not apply inside).
    Dac,
    /// warden's cgroup eBPF programs (`allowUnixSockets` enforcement).
    Ebpf,
}

impl Layer {
    /// The name in records and metric labels (the serde name).
    pub fn name(self) -> &'static str {
        match self {
            Layer::Mount => "mount",
            Layer::Landlock => "landlock",
            Layer::Seccomp => "seccomp",
            Layer::Proxy => "proxy",
            Layer::Lsm => "lsm",
            Layer::Netns => "netns",
            Layer::Dac => "dac",
            Layer::Ebpf => "ebpf",
        }
    }
}

/// An errno with its name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Errno {
    pub name: String,
    pub number: i32,
}

impl Errno {
    pub fn new(number: i32) -> Errno {
        Errno {
            name: errno_name(number).to_string(),
            number,
        }
    }
}

/// One line of the violations file. Also read back (the audit daemon and `warden run` pass
/// records to each other as JSON: docs/audit-daemon.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ViolationRecord {
    /// RFC 3339, UTC, milliseconds.
    pub time: String,
    /// `warden-<pid>`: the sandbox's cgroup leaf name.
    pub sandbox: String,
    /// The operator's labels of the sandbox (`warden run --label NAME=VALUE`), if any.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Where the record came from: `ebpf` (the kernel) or `proxy`.
    #[serde(deserialize_with = "source_name")]
    pub source: Source,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup_id: Option<u64>,
    /// Process ids as the host sees them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ppid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
    /// The binary the process last executed (from the exec records), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exe: Option<String>,
    pub kind: Kind,
    /// Whether the sandbox refused something (exec records and allowed requests are not).
    pub violation: bool,
    /// The system call or request: `open`, `unlink`, `rename`, `connect`, `socket`, `exec`, …
    pub operation: String,
    /// A path, `host:port`, an address or a socket family.
    pub target: String,
    /// The second path of rename/link (destination), symlink (its content), or exec's argv.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<Errno>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layer: Option<Layer>,
    /// One sentence: why the layer refused, or what happened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The policy rule behind a file refusal (`filesystem.denyWrite: "~/.aws"`), when one
    /// decides: the policy engine's answer for the same path, asked when the record is made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Where that rule came from (settings file and layer; managed settings say so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<String>,
    /// Identical records coalesced into this one.
    pub count: u64,
    /// The target is a relative path whose directory the kernel did not name (the walk did
    /// not fit, or the call had two paths): userspace read the thread's working directory
    /// after the call, and a command that changed it meanwhile (or a thread with its own)
    /// makes the target name another place than the one the kernel refused. Such a record is
    /// never dropped by `ignoreViolations` (red-team round 18).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approximate: bool,
}

/// A record's `source`. (An alias: written as `&'static str` in the struct, serde's derive
/// would make every deserializer borrow for `'static`; it is read through [`SOURCES`].)
pub type Source = &'static str;

/// The sources a record names; anything else reads as `other`.
pub const SOURCES: [&str; 4] = ["ebpf", "proxy", "seatbelt", "other"];

fn source_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    let text = String::deserialize(d)?;
    Ok(SOURCES
        .iter()
        .copied()
        .find(|s| *s == text)
        .unwrap_or("other"))
}

impl ViolationRecord {
    /// What makes two records "identical" for coalescing: everything but time and count.
    pub fn coalesce_key(&self) -> String {
        format!(
            "{}|{:?}|{}|{}|{}|{:?}|{:?}|{:?}|{:?}|{}",
            self.sandbox,
            self.kind,
            self.operation,
            self.target,
            self.detail.as_deref().unwrap_or(""),
            self.errno.as_ref().map(|e| e.number),
            self.layer,
            self.comm,
            self.pid,
            self.violation
        )
    }

    /// One line for the `<sandbox_violations>` block.
    pub fn summary_line(&self) -> String {
        use crate::api::printable;
        let mut s = format!(
            "{} {} {}",
            self.kind.name(),
            self.operation,
            printable(&self.target)
        );
        if let Some(e) = &self.errno {
            s.push_str(&format!(" ({})", e.name));
        }
        if let Some(l) = self.layer {
            s.push_str(&format!(" [{}]", l.name()));
        }
        if let Some(c) = &self.comm {
            s.push_str(&format!(" by {}", printable(c)));
        }
        if self.count > 1 {
            s.push_str(&format!(" ×{}", self.count));
        }
        if self.approximate {
            s.push_str(" (path approximate)");
        }
        s
    }
}

/// The errno names warden's records use (the rest print as `E<number>`).
pub fn errno_name(n: i32) -> String {
    let name = match n {
        1 => "EPERM",
        2 => "ENOENT",
        4 => "EINTR",
        9 => "EBADF",
        11 => "EAGAIN",
        13 => "EACCES",
        16 => "EBUSY",
        17 => "EEXIST",
        18 => "EXDEV",
        20 => "ENOTDIR",
        21 => "EISDIR",
        22 => "EINVAL",
        30 => "EROFS",
        38 => "ENOSYS",
        97 => "EAFNOSUPPORT",
        98 => "EADDRINUSE",
        99 => "EADDRNOTAVAIL",
        101 => "ENETUNREACH",
        110 => "ETIMEDOUT",
        111 => "ECONNREFUSED",
        113 => "EHOSTUNREACH",
        114 => "EALREADY",
        115 => "EINPROGRESS",
        _ => return format!("E{n}"),
    };
    name.to_string()
}

/// The syscall name of `OP_*`.
pub fn op_name(op: u16) -> &'static str {
    match op {
        1 | 2 | 4 => "open",
        3 => "creat",
        5 | 6 => "unlink",
        7..=9 => "rename",
        10 | 11 => "link",
        12 | 13 => "symlink",
        14 | 15 => "mkdir",
        16 => "rmdir",
        17..=19 => "chmod",
        20..=22 => "chown",
        23 => "truncate",
        24 => "utimes",
        25 | 26 => "setxattr",
        27 | 28 => "mknod",
        29 => "chmod",
        30 => "chown",
        31 | 38 => "setxattr",
        32..=34 | 39 => "removexattr",
        35..=37 => "utimes",
        47 | 48 => "exec",
        49 => "bind",
        50 => "ioctl",
        40 => "connect",
        41 => "socket",
        46 => "sendmsg",
        _ => "unknown",
    }
}

const O_ACCMODE: u64 = 0o3;
const O_CREAT: u64 = 0o100;
const O_TRUNC: u64 = 0o1000;

/// The programs' operation number of a refused `ioctl` on a file (OP_IOCTL, warden.bpf.h).
pub const OP_IOCTL: u16 = 50;
/// `rename(2)` and `link(2)`: both names relative to the working directory (warden.bpf.h).
const OP_RENAME: u16 = 9;
const OP_LINK: u16 = 11;

/// Whether a file operation writes: opens by their flags, exec never, everything else writes.
pub fn is_write(op: u16, flags: u64) -> bool {
    match op {
        1 | 2 | 4 => flags & O_ACCMODE != 0 || flags & (O_CREAT | O_TRUNC) != 0,
        47 | 48 => false,
        _ => true,
    }
}

/// Whether a file operation is a refused `execve`/`execveat`.
pub fn is_exec(op: u16) -> bool {
    matches!(op, 47 | 48)
}

/// The name of a socket family.
/// The namespaces clone/clone3/unshare flags ask for (`new user, mount namespaces`), or
/// `None` when they ask for none.
pub fn namespace_target(flags: u64) -> Option<String> {
    const NAMES: [(libc::c_int, &str); 8] = [
        (libc::CLONE_NEWUSER, "user"),
        (libc::CLONE_NEWNS, "mount"),
        (libc::CLONE_NEWPID, "pid"),
        (libc::CLONE_NEWNET, "network"),
        (libc::CLONE_NEWIPC, "ipc"),
        (libc::CLONE_NEWUTS, "uts"),
        (libc::CLONE_NEWCGROUP, "cgroup"),
        (0x80, "time"),
    ];
    let names: Vec<&str> = NAMES
        .iter()
        .filter(|(flag, _)| flags & u64::from(*flag as u32) != 0)
        .map(|&(_, name)| name)
        .collect();
    match names.len() {
        0 => None,
        1 => Some(format!("new {} namespace", names[0])),
        _ => Some(format!("new {} namespaces", names.join(", "))),
    }
}

pub fn family_name(family: u16) -> String {
    match family {
        1 => "AF_UNIX".into(),
        2 => "AF_INET".into(),
        10 => "AF_INET6".into(),
        16 => "AF_NETLINK".into(),
        17 => "AF_PACKET".into(),
        40 => "AF_VSOCK".into(),
        n => format!("AF_{n}"),
    }
}

/// The proxy's own listeners inside the sandbox: connecting to them is the sanctioned way out.
pub fn is_proxy_endpoint(ip: IpAddr, port: u16) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    };
    matches!(
        (ip, port),
        (IpAddr::V4(a), 3128 | 1080) if a == Ipv4Addr::LOCALHOST
    ) || matches!((ip, port), (IpAddr::V4(a), 53) if a == Ipv4Addr::new(127, 0, 0, 53))
}

/// The calls warden's seccomp filter refuses with EPERM (linux/seccomp.rs), by number, with
/// the kind of record an EPERM from them makes. `None`: not one of them (an EPERM from
/// elsewhere, not reported).
/// The socket families warden's seccomp filter refuses (linux/seccomp.rs): AF_UNIX (unless
/// allowed), AF_NETLINK but route, AF_PACKET, AF_VSOCK.
const FILTERED_FAMILIES: [u16; 4] = [1, 16, 17, 40];

/// Why changing another process's scheduling or priority failed.
const OWNER: &str = "another process's scheduling can be changed only by its owner or with \
                     CAP_SYS_NICE, which the sandbox dropped";

/// Calls toward another process, or raising the sandbox's own limits, that fail with EPERM
/// for a reason other than warden's filter (red-team round 15: they went unrecorded):
/// `(name, layer, reason)`.
fn refused_elsewhere(nr: i64) -> Option<(&'static str, Layer, &'static str)> {
    const SIGNAL: &str = "Landlock lets the command signal only its own processes";
    const ACCESS: &str = "another process's memory, descriptors or state need ptrace access, \
                          which the sandbox's processes do not have over warden's (not \
                          dumpable, outside the Landlock domain)";
    const CAPS: &str = "raising a limit or a priority needs a capability (CAP_SYS_RESOURCE, \
                        CAP_SYS_NICE) the sandbox dropped";
    Some(match nr {
        libc::SYS_kill => ("kill", Layer::Landlock, SIGNAL),
        libc::SYS_tkill => ("tkill", Layer::Landlock, SIGNAL),
        libc::SYS_tgkill => ("tgkill", Layer::Landlock, SIGNAL),
        libc::SYS_rt_sigqueueinfo => ("rt_sigqueueinfo", Layer::Landlock, SIGNAL),
        libc::SYS_rt_tgsigqueueinfo => ("rt_tgsigqueueinfo", Layer::Landlock, SIGNAL),
        libc::SYS_pidfd_send_signal => ("pidfd_send_signal", Layer::Landlock, SIGNAL),
        libc::SYS_pidfd_getfd => ("pidfd_getfd", Layer::Dac, ACCESS),
        libc::SYS_kcmp => ("kcmp", Layer::Dac, ACCESS),
        libc::SYS_process_madvise => ("process_madvise", Layer::Dac, ACCESS),
        libc::SYS_migrate_pages => ("migrate_pages", Layer::Dac, ACCESS),
        libc::SYS_move_pages => ("move_pages", Layer::Dac, ACCESS),
        libc::SYS_setrlimit => ("setrlimit", Layer::Dac, CAPS),
        libc::SYS_prlimit64 => ("prlimit64", Layer::Dac, CAPS),
        libc::SYS_setpriority => ("setpriority", Layer::Dac, CAPS),
        libc::SYS_sched_setscheduler => ("sched_setscheduler", Layer::Dac, CAPS),
        libc::SYS_sched_setparam => ("sched_setparam", Layer::Dac, CAPS),
        libc::SYS_sched_setattr => ("sched_setattr", Layer::Dac, CAPS),
        libc::SYS_ioprio_set => ("ioprio_set", Layer::Dac, CAPS),
        libc::SYS_sched_setaffinity => ("sched_setaffinity", Layer::Dac, OWNER),
        _ => return None,
    })
}

/// Calls neither warden's filter nor Landlock refuses that fail with EPERM in the sandbox
/// because it holds no capability (red-team rounds 18 and 20: they went unrecorded), with
/// the reason.
fn needs_capability(nr: i64) -> Option<(&'static str, &'static str)> {
    const ADMIN: &str = "needs a capability (CAP_SYS_CHROOT, CAP_SYS_ADMIN, CAP_SETGID) the \
                         sandbox dropped";
    const IDS: &str = "taking another user or group id needs CAP_SETUID/CAP_SETGID, which the \
                       sandbox dropped";
    Some(match nr {
        libc::SYS_chroot => ("chroot", ADMIN),
        libc::SYS_sethostname => ("sethostname", ADMIN),
        libc::SYS_setdomainname => ("setdomainname", ADMIN),
        libc::SYS_fanotify_init => ("fanotify_init", ADMIN),
        libc::SYS_setgroups => ("setgroups", ADMIN),
        libc::SYS_capset => (
            "capset",
            "the sandbox's processes hold no capabilities to raise (all dropped, bounding set \
             emptied, no_new_privs)",
        ),
        // Round 21: prctl's PR_SET_MM, PR_CAPBSET_DROP, PR_SET_SECUREBITS; mbind moving
        // every page; port I/O; changing identity to an id the sandbox does not hold.
        libc::SYS_prctl => (
            "prctl",
            "needs a capability (CAP_SYS_RESOURCE, CAP_SETPCAP) the sandbox dropped",
        ),
        libc::SYS_mbind => ("mbind", "needs CAP_SYS_NICE, which the sandbox dropped"),
        libc::SYS_iopl => ("iopl", "needs CAP_SYS_RAWIO, which the sandbox dropped"),
        libc::SYS_ioperm => ("ioperm", "needs CAP_SYS_RAWIO, which the sandbox dropped"),
        libc::SYS_setuid => ("setuid", IDS),
        libc::SYS_setgid => ("setgid", IDS),
        libc::SYS_setreuid => ("setreuid", IDS),
        libc::SYS_setregid => ("setregid", IDS),
        libc::SYS_setresuid => ("setresuid", IDS),
        libc::SYS_setresgid => ("setresgid", IDS),
        _ => return None,
    })
}

/// What a [`refused_elsewhere`] call aimed at, from its first two arguments.
fn process_target(nr: i64, arg0: u64, arg1: u64) -> String {
    // Arguments are C ints: a pid or a descriptor is the low 32 bits.
    let (arg0, arg1) = (arg0 as u32 as i32, arg1 as u32 as i32);
    match nr {
        libc::SYS_pidfd_send_signal | libc::SYS_pidfd_getfd | libc::SYS_process_madvise => {
            format!("pidfd {arg0}")
        }
        libc::SYS_setrlimit => format!("resource {arg0}"),
        libc::SYS_prlimit64
        | libc::SYS_sched_setscheduler
        | libc::SYS_sched_setparam
        | libc::SYS_sched_setattr
        | libc::SYS_sched_setaffinity
            if arg0 == 0 =>
        {
            "itself".to_string()
        }
        // setpriority(which, who, prio), ioprio_set(which, who, prio): who 0 is the caller
        // (or its process group, or its user).
        libc::SYS_setpriority | libc::SYS_ioprio_set => {
            let which = match (nr, arg0) {
                (libc::SYS_setpriority, 0) | (libc::SYS_ioprio_set, 1) => "process",
                (libc::SYS_setpriority, 1) | (libc::SYS_ioprio_set, 2) => "process group",
                (libc::SYS_setpriority, 2) | (libc::SYS_ioprio_set, 3) => "user",
                _ => return format!("which {arg0} who {arg1}"),
            };
            if arg1 == 0 {
                format!("its own {which}")
            } else {
                format!("{which} {arg1}")
            }
        }
        // kcmp(pid1, pid2, type, idx1, idx2): the caller is usually one of the two.
        libc::SYS_kcmp => format!("pids {arg0} and {arg1}"),
        _ => format!("pid {arg0}"),
    }
}

pub fn seccomp_denied(nr: i64) -> Option<(&'static str, Kind)> {
    use Kind::{Mount, Process, Syscall};
    let table: &[(i64, &str, Kind)] = &[
        (libc::SYS_socket, "socket", Syscall),
        (libc::SYS_ptrace, "ptrace", Process),
        (libc::SYS_process_vm_readv, "process_vm_readv", Process),
        (libc::SYS_process_vm_writev, "process_vm_writev", Process),
        (libc::SYS_mount, "mount", Mount),
        (libc::SYS_umount2, "umount2", Mount),
        (libc::SYS_pivot_root, "pivot_root", Mount),
        (libc::SYS_open_tree, "open_tree", Mount),
        (libc::SYS_move_mount, "move_mount", Mount),
        (libc::SYS_fsopen, "fsopen", Mount),
        (libc::SYS_fsmount, "fsmount", Mount),
        (libc::SYS_fspick, "fspick", Mount),
        (libc::SYS_fsconfig, "fsconfig", Mount),
        (libc::SYS_mount_setattr, "mount_setattr", Mount),
        (libc::SYS_unshare, "unshare", Mount),
        (libc::SYS_setns, "setns", Mount),
        (libc::SYS_io_uring_setup, "io_uring_setup", Syscall),
        (libc::SYS_bpf, "bpf", Syscall),
        (libc::SYS_perf_event_open, "perf_event_open", Syscall),
        (libc::SYS_userfaultfd, "userfaultfd", Syscall),
        (libc::SYS_keyctl, "keyctl", Syscall),
        (libc::SYS_add_key, "add_key", Syscall),
        (libc::SYS_request_key, "request_key", Syscall),
        (libc::SYS_kexec_load, "kexec_load", Syscall),
        (libc::SYS_init_module, "init_module", Syscall),
        (libc::SYS_finit_module, "finit_module", Syscall),
        (libc::SYS_open_by_handle_at, "open_by_handle_at", Syscall),
        (libc::SYS_personality, "personality", Syscall),
        // The rest of what warden's filter refuses (linux/seccomp.rs): namespaces through
        // clone, terminal injection, the clock, modules, swap, the kernel log, io_uring.
        (libc::SYS_clone, "clone", Mount),
        (libc::SYS_clone3, "clone3", Mount),
        (libc::SYS_ioctl, "ioctl", Syscall),
        (libc::SYS_socketpair, "socketpair", Syscall),
        (libc::SYS_seccomp, "seccomp", Syscall),
        (libc::SYS_io_uring_enter, "io_uring_enter", Syscall),
        (libc::SYS_io_uring_register, "io_uring_register", Syscall),
        (libc::SYS_name_to_handle_at, "name_to_handle_at", Syscall),
        (libc::SYS_kexec_file_load, "kexec_file_load", Syscall),
        (libc::SYS_delete_module, "delete_module", Syscall),
        (libc::SYS_reboot, "reboot", Syscall),
        (libc::SYS_syslog, "syslog", Syscall),
        (libc::SYS_acct, "acct", Syscall),
        (libc::SYS_swapon, "swapon", Syscall),
        (libc::SYS_swapoff, "swapoff", Syscall),
        (libc::SYS_quotactl, "quotactl", Syscall),
        (libc::SYS_quotactl_fd, "quotactl_fd", Syscall),
        (libc::SYS_settimeofday, "settimeofday", Syscall),
        (libc::SYS_clock_settime, "clock_settime", Syscall),
        (libc::SYS_clock_adjtime, "clock_adjtime", Syscall),
        (libc::SYS_adjtimex, "adjtimex", Syscall),
        (libc::SYS_vhangup, "vhangup", Syscall),
    ];
    table
        .iter()
        .find(|(n, _, _)| *n == nr)
        .map(|&(_, name, kind)| (name, kind))
}

/// What the classifier knows about the sandbox (from its plan).
#[derive(Clone, Debug, Default)]
pub struct SandboxView {
    /// `warden-<pid>`.
    pub sandbox: String,
    /// The working directory and `allowWrite` entries, the private TMPDIR.
    pub writable: Vec<PathBuf>,
    /// Paths bound read-only again inside writable roots (denyWrite, mandatory protections).
    pub protected: Vec<PathBuf>,
    /// denyRead directories (behind an empty tmpfs) and files (behind /dev/null).
    pub masked: Vec<PathBuf>,
    /// Some file is masked by /dev/null (the programs then look at every opened descriptor).
    pub masked_files: bool,
    /// The masked directories with allowRead paths inside (searchable roots: other names in
    /// them answer ENOENT, which the programs then report).
    pub exposing_masks: Vec<PathBuf>,
    /// allowRead paths re-exposed inside masks.
    pub exposed: Vec<PathBuf>,
    /// The run's policy, to name the rule behind a file refusal.
    pub policy: Option<std::sync::Arc<crate::policy::merge::Policy>>,
}

impl SandboxView {
    /// What the eBPF programs need to know of this view.
    pub fn watch_flags(&self) -> super::bpf::WatchFlags {
        super::bpf::WatchFlags {
            masked_files: self.masked_files,
            mask_enoent: !self.exposing_masks.is_empty(),
        }
    }
}

fn under(path: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|r| path.starts_with(r))
}

/// Programs a [`Classifier`] remembers by pid (one name of at most 512 bytes each).
pub const EXES_MAX: usize = 4096;

/// Turns raw events into records. Holds the per-sandbox facts the layer inference needs and
/// the pid → executable table the exec records fill.
pub struct Classifier {
    pub view: SandboxView,
    exes: std::collections::HashMap<u32, String>,
    /// The policy's rule per (path, write), as found: a loop refused on the same path asks
    /// the policy engine (which looks at the filesystem) once, not per event.
    rules: std::cell::RefCell<RuleCache>,
}

/// (path, write) → the rule and its provenance, if one decided.
type RuleCache = std::collections::HashMap<(PathBuf, bool), Option<(String, String)>>;

/// Entries kept in [`Classifier::rules`] before it starts over.
const RULE_CACHE: usize = 4096;

impl Classifier {
    pub fn new(view: SandboxView) -> Classifier {
        Classifier {
            view,
            exes: std::collections::HashMap::new(),
            rules: std::cell::RefCell::new(std::collections::HashMap::new()),
        }
    }

    /// Notes the program `pid` now runs. The map is kept to live processes: past
    /// [`EXES_MAX`] entries the gone ones are forgotten, and if the live ones alone fill it,
    /// all (their records then carry no `exe`) — a command that execs in a loop used to grow
    /// it by a name per pid for the life of the sandbox (red-team round 18).
    fn remember_exe(&mut self, pid: u32, filename: String) {
        if self.exes.len() >= EXES_MAX && !self.exes.contains_key(&pid) {
            self.exes
                .retain(|p, _| Path::new(&format!("/proc/{p}")).exists());
            if self.exes.len() >= EXES_MAX {
                self.exes.clear();
            }
        }
        self.exes.insert(pid, filename);
    }

    /// The record for `ev`, or `None` for events that are not reported (connects to the
    /// proxy's listeners). `time` is the event's wall-clock time (RFC 3339); `cwd` resolves a
    /// relative path when the process's working directory is known.
    pub fn classify(
        &mut self,
        ev: &RawEvent,
        time: String,
        cwd: Option<&Path>,
    ) -> Option<ViolationRecord> {
        let mut rec = ViolationRecord {
            time,
            sandbox: self.view.sandbox.clone(),
            labels: BTreeMap::new(),
            source: "ebpf",
            cgroup_id: Some(ev.cgroup_id),
            pid: Some(ev.pid),
            ppid: Some(ev.ppid),
            comm: Some(ev.comm.clone()),
            exe: self.exes.get(&ev.pid).cloned(),
            kind: Kind::Syscall,
            violation: true,
            operation: op_name(ev.op).to_string(),
            target: String::new(),
            detail: None,
            errno: (ev.ret < 0).then(|| Errno::new(-ev.ret)),
            layer: None,
            reason: None,
            rule: None,
            provenance: None,
            count: 1,
            approximate: false,
        };
        match ev.kind {
            EV_EXEC => {
                let filename = shown(&ev.path).0;
                self.remember_exe(ev.pid, filename.clone());
                rec.exe = Some(filename.clone());
                rec.kind = Kind::Exec;
                rec.violation = false;
                rec.operation = "exec".into();
                rec.target = filename;
                let argv: Vec<String> = ev.path2.split(|&b| b == 0).map(|a| shown(a).0).collect();
                rec.detail = (!ev.path2.is_empty()).then(|| argv.join(" "));
                rec.errno = None;
            }
            EV_FILE => self.file(ev, &mut rec, cwd)?,
            // The BPF LSM programs' own records (audit/lsm.rs).
            super::lsm::EV_PTRACE | super::lsm::EV_SOCKET | super::lsm::EV_LSM_FILE => {
                super::lsm::classify(ev, &mut rec, self.view.policy.as_deref())?
            }
            EV_CONNECT => {
                let ip = ev.ip()?;
                if is_proxy_endpoint(ip, ev.port) {
                    return None;
                }
                rec.kind = Kind::Network;
                rec.target = match ip {
                    IpAddr::V6(v6) => format!("[{v6}]:{}", ev.port),
                    v4 => format!("{v4}:{}", ev.port),
                };
                // The sandbox's own loopback (a server inside it) is no way out.
                let loopback = ip.is_loopback()
                    || matches!(ip, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some_and(|a| a.is_loopback()));
                rec.violation = !loopback;
                if rec.violation {
                    rec.layer = Some(Layer::Netns);
                    rec.reason = Some(
                        "a direct connection, not through warden's proxy: the sandbox's network \
                         namespace has no route out"
                            .into(),
                    );
                }
            }
            EV_UNIX => {
                rec.kind = Kind::UnixSocket;
                rec.target = ev.unix_path();
                let refused = matches!(-ev.ret, libc::EPERM | libc::EACCES);
                rec.violation = refused;
                if refused && ev.flags & FL_UNIX_DENIED != 0 {
                    rec.layer = Some(Layer::Ebpf);
                    rec.reason = Some(
                        "not in network.allowUnixSockets (enforced by warden's cgroup/connect_unix and \
                         cgroup/sendmsg_unix programs)"
                            .into(),
                    );
                } else if refused {
                    rec.layer = Some(if rec.target.starts_with('@') {
                        Layer::Landlock
                    } else {
                        Layer::Dac
                    });
                    rec.reason = Some(if rec.target.starts_with('@') {
                        "abstract unix sockets outside the sandbox are out of Landlock's scope"
                            .into()
                    } else {
                        "permission denied on the socket file".into()
                    });
                }
            }
            EV_SYSCALL => {
                // flags: the call's number; family: its first argument; port: the ABI when
                // not the native one (1: x32, 2: i386), which warden's filter refuses whole.
                let nr = i64::try_from(ev.flags).unwrap_or(-1);
                if ev.port == 1 || ev.port == 2 {
                    let abi = if ev.port == 1 { "x32" } else { "i386" };
                    rec.operation = format!("{abi} syscall");
                    rec.kind = Kind::Syscall;
                    rec.target = format!("{abi} system call {}", nr & !0x4000_0000);
                    rec.layer = Some(Layer::Seccomp);
                    rec.reason = Some(format!(
                        "seccomp refuses every non-native system call ABI ({abi}) in the sandbox"
                    ));
                    return Some(rec);
                }
                if let Some((name, layer, reason)) = refused_elsewhere(nr) {
                    rec.operation = name.to_string();
                    rec.kind = Kind::Process;
                    let (arg0, arg1) = ev.args();
                    rec.target = process_target(nr, arg0, arg1);
                    rec.layer = Some(layer);
                    rec.reason = Some(reason.to_string());
                    // setpriority: EACCES is a raise, EPERM a process of another owner.
                    if nr == libc::SYS_setpriority && ev.ret == -libc::EPERM {
                        rec.reason = Some(OWNER.to_string());
                    }
                    // Another process's limits: warden's filter (linux/seccomp.rs).
                    if nr == libc::SYS_prlimit64 && arg0 as u32 != 0 {
                        rec.layer = Some(Layer::Seccomp);
                        rec.reason = Some(
                            "warden's filter refuses setting another process's limits (the \
                             sandbox's pid 1 runs as the command's user)"
                                .to_string(),
                        );
                    }
                    return Some(rec);
                }
                let Some((name, kind)) = seccomp_denied(nr) else {
                    let (name, reason) = needs_capability(nr)?;
                    rec.operation = name.to_string();
                    rec.kind = Kind::Syscall;
                    rec.target = if nr == libc::SYS_prctl {
                        format!("prctl option {}", ev.args().0 as u32 as i32)
                    } else {
                        name.to_string()
                    };
                    rec.layer = Some(Layer::Dac);
                    rec.reason = Some(reason.to_string());
                    return Some(rec);
                };
                // socket(): warden's filter refuses only some families; an EPERM for
                // another (AF_INET raw, AF_XDP) is the capability the sandbox dropped.
                if nr == libc::SYS_socket && !FILTERED_FAMILIES.contains(&ev.family) {
                    rec.operation = name.to_string();
                    rec.kind = Kind::Syscall;
                    rec.target = family_name(ev.family);
                    rec.layer = Some(Layer::Dac);
                    rec.reason = Some(
                        "this kind of socket needs a capability (CAP_NET_RAW, CAP_NET_ADMIN) \
                         the sandbox dropped"
                            .to_string(),
                    );
                    return Some(rec);
                }
                rec.operation = name.to_string();
                rec.kind = kind;
                rec.target = if nr == libc::SYS_socket {
                    rec.kind = if ev.family == AF_UNIX {
                        Kind::UnixSocket
                    } else {
                        Kind::Syscall
                    };
                    family_name(ev.family)
                } else if matches!(nr, libc::SYS_clone | libc::SYS_clone3 | libc::SYS_unshare) {
                    // clone's low byte is the exit signal; CLONE_NEWTIME (0x80) is clone3's
                    // and unshare's.
                    let flags = ev.args().0;
                    let flags = if nr == libc::SYS_clone {
                        flags & !0xff
                    } else {
                        flags
                    };
                    namespace_target(flags).unwrap_or_else(|| name.to_string())
                } else {
                    name.to_string()
                };
                rec.layer = Some(Layer::Seccomp);
                if nr == libc::SYS_clone3 {
                    // Refused whole (ENOSYS); the flags were read from the command's memory
                    // after the call, where another thread could have changed them.
                    rec.approximate = true;
                    rec.reason = Some(
                        "seccomp refuses clone3 in the sandbox, which cannot read its flags \
                         (ENOSYS: C libraries fall back to clone, whose namespace flags it \
                         refuses)"
                            .to_string(),
                    );
                    return Some(rec);
                }
                rec.reason = Some(if nr == libc::SYS_socket && ev.family == AF_UNIX {
                    "seccomp refuses AF_UNIX sockets in the sandbox (allowUnixSockets or \
                     allowAllUnixSockets permit them)"
                        .to_string()
                } else {
                    format!("seccomp refuses {name} in the sandbox")
                });
            }
            _ => return None,
        }
        Some(rec)
    }

    /// Fills in a file record; `None` when the event is no violation (an ENOENT no mask
    /// caused).
    fn file(&self, ev: &RawEvent, rec: &mut ViolationRecord, cwd: Option<&Path>) -> Option<()> {
        // The path's bytes as the kernel had them (not UTF-8 perhaps: round 20).
        let raw = Path::new(std::ffi::OsStr::from_bytes(&ev.path));
        let absolute_raw = ev.path.first() == Some(&b'/');
        let relative_to_fd = ev.flags & FL_RELATIVE != 0;
        // The kernel's own view of the working directory when it sent one; else what
        // userspace found (/proc/PID/cwd, while the process lived).
        let kernel_cwd =
            (ev.flags & FL_CWD != 0).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(&ev.path2)));
        let cwd = kernel_cwd.as_deref().or(cwd);
        let path = match cwd {
            // A call on a descriptor: the kernel named the descriptor's file itself.
            Some(c) if ev.path.is_empty() && kernel_cwd.is_some() => c.to_path_buf(),
            Some(c) if !absolute_raw && !relative_to_fd && !ev.path.is_empty() => {
                lexical(&c.join(raw))
            }
            _ => raw.to_path_buf(),
        };
        let (target, exact) = shown(path.as_os_str().as_bytes());
        rec.target = target;
        let absolute = path.is_absolute();
        // The directory was read after the call, or a `..` was folded away as text (after a
        // link, `s/../x` is not where `x` next to `s` is: round 19).
        // Or the path is not UTF-8 and is shown with escapes (`\xff`), which a name can
        // also spell.
        rec.approximate = ev.flags & FL_RACED != 0
            || !exact
            || !absolute_raw
                && (kernel_cwd.is_none()
                    || raw
                        .components()
                        .any(|c| c == std::path::Component::ParentDir));
        // Refused at a path in a writable root that no protection covers: the kernel refused
        // where a symlink on the way led (or the file's own mode did), and the command can
        // remove or repoint that link before the record is read, so that the name resolves
        // inside an ignored directory (round 21). Such a record is never dropped.
        if absolute
            && matches!(-ev.ret, libc::EROFS | libc::EACCES | libc::EPERM)
            && under(&path, &self.view.writable)
            && !under(&path, &self.view.protected)
            && !under(&path, &self.view.masked)
        {
            rec.approximate = true;
        }
        if ev.flags & FL_TRUNCATED != 0 {
            rec.target.push('…');
        }
        if !ev.path2.is_empty() && ev.flags & FL_CWD == 0 {
            rec.detail = Some(shown(&ev.path2).0);
        }
        if ev.op == OP_IOCTL {
            rec.detail = Some(format!("request {:#x}", ev.flags & 0xffff_ffff));
        }
        let write = is_write(ev.op, ev.flags & 0xffff_ffff);
        rec.kind = if is_exec(ev.op) {
            Kind::Exec
        } else if write {
            Kind::FileWrite
        } else {
            Kind::FileRead
        };
        if ev.flags & FL_MASKED != 0 {
            rec.errno = None;
            rec.layer = Some(Layer::Mount);
            rec.reason = Some(
                "denyRead: the file is masked by /dev/null in the sandbox (reads return nothing)"
                    .into(),
            );
            self.attach_rule(rec, &path, write);
            return Some(());
        }
        // Marked by a BPF LSM program (audit/lsm.rs): its layer when it decided.
        if super::lsm::file_layer(ev, rec, write) {
            self.attach_rule(rec, &path, write);
            return Some(());
        }
        let errno = -ev.ret;
        // A move or link between mounts: refused by the sandbox only when a side lies outside
        // the writable roots or is protected (between two writable mounts, say the project and
        // TMPDIR, `mv` copies instead and nothing was refused).
        if errno == libc::EXDEV {
            let second = Path::new(std::ffi::OsStr::from_bytes(&ev.path2));
            // Only `rename` and `link` take the second name relative to the working
            // directory; the `*at` calls may take it relative to a descriptor the record
            // does not name (unknown, then: round 19).
            let second = match cwd {
                Some(c)
                    if !ev.path2.is_empty()
                        && ev.path2.first() != Some(&b'/')
                        && matches!(ev.op, OP_RENAME | OP_LINK) =>
                {
                    lexical(&c.join(second))
                }
                _ => second.to_path_buf(),
            };
            // A relative name whose directory is unknown (the process is gone) says nothing:
            // `mv x "$TMPDIR"` by a short-lived `mv` must not read as a refusal.
            let refused = |p: &Path| {
                p.is_absolute()
                    && (!under(p, &self.view.writable) || under(p, &self.view.protected))
            };
            if !refused(&path) && !refused(&second) {
                return None;
            }
            rec.layer = Some(Layer::Mount);
            rec.reason = Some(
                "a move or link across the sandbox's mounts with a side outside the writable \
                 roots (the host is mounted read-only)"
                    .into(),
            );
            self.attach_rule(rec, &path, write);
            return Some(());
        }
        // Reported by the programs only where a denyRead directory has allowRead paths inside
        // (its root is searchable, so the other names answer ENOENT): kept when the name
        // exists on the host, i.e. the mask hid it.
        if errno == libc::ENOENT {
            let hidden = absolute
                && under(&path, &self.view.exposing_masks)
                && !under(&path, &self.view.exposed)
                && path.symlink_metadata().is_ok();
            if !hidden {
                return None;
            }
            rec.layer = Some(Layer::Mount);
            rec.reason =
                Some("denyRead: hidden by the mask (only its allowRead paths are visible)".into());
            self.attach_rule(rec, &path, write);
            return Some(());
        }
        let (layer, reason) = match errno {
            libc::EROFS => {
                let why = if absolute && under(&path, &self.view.protected) {
                    "a protected path (denyWrite or a mandatory protection), bound read-only"
                } else if absolute && under(&path, &self.view.masked) {
                    "a denyRead mask, mounted read-only"
                } else if absolute && !under(&path, &self.view.writable) {
                    "outside the writable roots: the host is mounted read-only"
                } else {
                    "a read-only mount"
                };
                (Layer::Mount, why.to_string())
            }
            // A denyRead file is /dev/null bound from a nodev mount: opening it is EACCES.
            libc::EACCES if absolute && under(&path, &self.view.masked) => (
                Layer::Mount,
                "denyRead: the path is masked in the sandbox".to_string(),
            ),
            libc::EACCES if write && absolute && !under(&path, &self.view.writable) => (
                Layer::Landlock,
                "outside Landlock's writable roots (a writable mount, but not \
                 a place the sandbox may write)"
                    .to_string(),
            ),
            libc::EACCES => (
                Layer::Dac,
                "file permissions (mode bits; capabilities are dropped in the sandbox)".to_string(),
            ),
            _ => (
                Layer::Dac,
                "not permitted without capabilities (the sandbox drops every capability)"
                    .to_string(),
            ),
        };
        rec.layer = Some(layer);
        rec.reason = Some(reason);
        self.attach_rule(rec, &path, write);
        Some(())
    }

    /// The rule the policy engine names for the same path and access, when one decides.
    fn attach_rule(&self, rec: &mut ViolationRecord, path: &Path, write: bool) {
        let Some(policy) = &self.view.policy else {
            return;
        };
        let key = (path.to_path_buf(), write);
        let cached = self.rules.borrow().get(&key).cloned();
        let found = match cached {
            Some(found) => found,
            None => {
                let found = rule_for(policy, path, write);
                let mut rules = self.rules.borrow_mut();
                if rules.len() >= RULE_CACHE {
                    rules.clear();
                }
                rules.insert(key, found.clone());
                found
            }
        };
        if let Some((rule, provenance)) = found {
            rec.rule = Some(rule);
            rec.provenance = Some(provenance);
        }
    }
}

/// The rule the policy engine names for `path` (read or `write`), when one decides, into
/// `rec.rule` and `rec.provenance`.
pub fn attach_rule(
    policy: &crate::policy::merge::Policy,
    rec: &mut ViolationRecord,
    path: &Path,
    write: bool,
) {
    if let Some((rule, provenance)) = rule_for(policy, path, write) {
        rec.rule = Some(rule);
        rec.provenance = Some(provenance);
    }
}

/// The rule (`list: "entry"`) and its provenance the policy engine names for `path`, if one
/// decides.
fn rule_for(
    policy: &crate::policy::merge::Policy,
    path: &Path,
    write: bool,
) -> Option<(String, String)> {
    if !path.is_absolute() {
        return None;
    }
    let access = if write {
        crate::policy::path::Access::Write
    } else {
        crate::policy::path::Access::Read
    };
    let rule = policy
        .check_path(&crate::policy::fsview::RealFs, path, access)
        .rule?;
    Some((
        format!("{}: {:?}", rule.list, &*rule.entry),
        rule.provenance.to_string(),
    ))
}

/// A proxy decision as a record: denied requests are violations (layer proxy), allowed ones
/// are recorded too, as non-violations.
pub fn from_net_event(sandbox: &str, ev: &NetEvent) -> ViolationRecord {
    // An IPv6 literal in brackets once, whether the event's host has them or not (round 22
    // found `[[::1]]:8997`); any other name as it came.
    let bare = ev
        .host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(&ev.host);
    let target = match ev.port {
        Some(p) if bare.parse::<std::net::Ipv6Addr>().is_ok() => format!("[{bare}]:{p}"),
        Some(p) => format!("{}:{p}", ev.host),
        None => ev.host.clone(),
    };
    let violation = ev.decision != Decision::Allow;
    let stage = match ev.stage {
        Stage::Policy => "policy",
        Stage::Guard => "guard",
        Stage::Upstream => "upstream",
        Stage::Request => "request",
    };
    ViolationRecord {
        time: rfc3339_ms(ev.time_ms),
        sandbox: sandbox.to_string(),
        labels: BTreeMap::new(),
        source: "proxy",
        cgroup_id: None,
        pid: None,
        ppid: None,
        comm: None,
        exe: None,
        kind: Kind::Network,
        violation,
        operation: match ev.protocol {
            crate::net::event::Protocol::Http => "http",
            crate::net::event::Protocol::Connect => "connect-tunnel",
            crate::net::event::Protocol::Socks5 => "socks5",
            crate::net::event::Protocol::Dns => "dns",
        }
        .to_string(),
        target,
        detail: Some(match &ev.rule {
            Some(r) => format!(
                "{stage}: {} entry {:?} ({})",
                r.list, &*r.entry, &*r.provenance.source
            ),
            None => stage.to_string(),
        }),
        errno: None,
        layer: violation.then_some(Layer::Proxy),
        reason: Some(ev.reason.clone()),
        rule: ev
            .rule
            .as_ref()
            .map(|r| format!("{}: {:?}", r.list, &*r.entry)),
        provenance: ev.rule.as_ref().map(|r| r.provenance.to_string()),
        count: 1,
        approximate: false,
    }
}

/// Path bytes for a record: UTF-8 as is, every byte that is not shown as `\xNN` (two paths
/// that differ only there no longer read the same, as U+FFFD made them: round 20). `false`
/// when something had to be escaped.
pub(crate) fn shown(bytes: &[u8]) -> (String, bool) {
    let mut out = String::with_capacity(bytes.len());
    let mut exact = true;
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
            exact = false;
        }
    }
    (out, exact)
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for milliseconds since the Unix epoch.
pub fn rfc3339_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

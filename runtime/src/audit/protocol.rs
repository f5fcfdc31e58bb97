//! The protocol between `warden run` and the audit daemon (`warden audit`) on its unix socket:
//! one JSON object per line, both ways (docs/audit-daemon.md).
//!
//! `warden run` → daemon: one [`Request::Register`] first (answered by a [`Status`]), then
//! the proxy's records ([`Request::Record`]), the proxy's byte counts ([`Request::Bytes`])
//! and, after the command ended, [`Request::Finish`]. Closing the connection unregisters the
//! sandbox.
//!
//! daemon → `warden run`: the [`Status`] of the registration, the sandbox's kernel records
//! ([`Event::Record`]) and, answering `finish` once every record of the sandbox was sent,
//! [`Event::Done`].
//!
//! Pure: parsing and validation only, unit-tested (`protocol_tests.rs`).

use super::record::ViolationRecord;
use crate::metrics::{LabelError, Labels};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Where the daemon listens unless told otherwise.
pub const DEFAULT_SOCKET: &str = "/run/warden/audit.sock";
/// Overrides [`DEFAULT_SOCKET`] for both sides; empty: `warden run` uses no daemon.
pub const SOCKET_ENV: &str = "WARDEN_AUDIT_SOCKET";
/// The longest line either side accepts.
pub const MAX_LINE: usize = 256 * 1024;
/// The longest sandbox id (`warden-<pid>`).
pub const MAX_SANDBOX_ID: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("not a valid message: {0}")]
    Json(String),
    #[error("a line longer than {MAX_LINE} bytes")]
    TooLong,
    #[error(transparent)]
    Labels(#[from] LabelError),
    #[error("sandbox id {0:?}: expected 1 to {MAX_SANDBOX_ID} of [A-Za-z0-9._-]")]
    Sandbox(String),
    #[error("cgroup_id must not be 0")]
    CgroupId,
    #[error("cgroup {0:?}: expected an absolute path")]
    CgroupPath(String),
    #[error("pid must not be 0")]
    Pid,
}

/// The socket both sides use: `$WARDEN_AUDIT_SOCKET`, else [`DEFAULT_SOCKET`]; `None` when
/// the variable is set but empty (no daemon).
pub fn socket_path(env: Option<std::ffi::OsString>) -> Option<PathBuf> {
    match env {
        Some(v) if v.is_empty() => None,
        Some(v) => Some(PathBuf::from(v)),
        None => Some(PathBuf::from(DEFAULT_SOCKET)),
    }
}

/// What the layer inference needs to know about the sandbox's mounts (from its plan), and
/// the `ignoreViolations` paths of its command. Paths as text (lossy for non-UTF-8 names).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct View {
    #[serde(default)]
    pub writable: Vec<String>,
    #[serde(default)]
    pub protected: Vec<String>,
    #[serde(default)]
    pub masked: Vec<String>,
    #[serde(default)]
    pub ignored: Vec<String>,
    /// denyRead directories with allowRead paths inside (sent only when there are any, so
    /// a daemon of an earlier version still accepts the registration of other sandboxes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exposing_masks: Vec<String>,
    /// The allowRead paths re-exposed inside masks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exposed: Vec<String>,
}

fn yes() -> bool {
    true
}

/// `{"type":"register", ...}`: watch this sandbox's cgroup.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Register {
    /// The sandbox id records carry (`warden-<pid>`, the cgroup leaf's name).
    pub sandbox: String,
    /// The cgroup v2 id (the inode of its directory).
    pub cgroup_id: u64,
    /// The cgroup's directory; the daemon checks that its inode is `cgroup_id`.
    pub cgroup: String,
    /// The operator's labels (`warden run --label`).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The registering `warden run` process; must be the peer's pid (SO_PEERCRED).
    pub pid: u32,
    #[serde(default)]
    pub view: View,
    /// `allowUnixSockets` paths the daemon's cgroup/connect_unix program must enforce.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unix_sockets: Option<Vec<String>>,
    /// Whether the daemon streams the sandbox's kernel records back (false when the run
    /// asked for no output of its own).
    #[serde(default = "yes")]
    pub stream: bool,
    /// The BPF LSM path the run asks for (`warden.audit.enforce`, or observe records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lsm: Option<LsmScope>,
}

/// What the daemon's BPF LSM programs judge a sandbox by (paths as the host sees them) and how.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LsmScope {
    /// Refuse (`warden.audit.enforce`); else observe.
    pub enforce: bool,
    /// `warden.audit.enforceFallback: "tracepoints"`: without BPF LSM, run on the tracepoints.
    #[serde(default)]
    pub fallback: bool,
    #[serde(default)]
    pub writable: Vec<String>,
    #[serde(default)]
    pub protected: Vec<String>,
    #[serde(default)]
    pub deny_read: Vec<String>,
    #[serde(default)]
    pub allow_read: Vec<String>,
}

/// A registration that passed [`Register::validate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    pub sandbox: String,
    pub cgroup_id: u64,
    pub cgroup: PathBuf,
    pub labels: Labels,
    pub pid: u32,
    pub view: View,
    pub unix_sockets: Option<Vec<Vec<u8>>>,
    pub stream: bool,
    pub lsm: Option<LsmScope>,
}

/// Whether `id` is a sandbox id the daemon accepts.
pub fn valid_sandbox_id(id: &str) -> bool {
    (1..=MAX_SANDBOX_ID).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl Register {
    /// Checks what can be checked without the system: the id, the labels, the cgroup path,
    /// the pid. (The daemon then checks the peer and the cgroup itself.)
    pub fn validate(self) -> Result<Registration, ProtocolError> {
        if !valid_sandbox_id(&self.sandbox) {
            return Err(ProtocolError::Sandbox(self.sandbox));
        }
        if self.cgroup_id == 0 {
            return Err(ProtocolError::CgroupId);
        }
        if !self.cgroup.starts_with('/') || self.cgroup.contains('\0') {
            return Err(ProtocolError::CgroupPath(self.cgroup));
        }
        if self.pid == 0 {
            return Err(ProtocolError::Pid);
        }
        let labels = Labels::from_map(self.labels)?;
        Ok(Registration {
            sandbox: self.sandbox,
            cgroup_id: self.cgroup_id,
            cgroup: PathBuf::from(self.cgroup),
            labels,
            pid: self.pid,
            view: self.view,
            unix_sockets: self
                .unix_sockets
                .map(|v| v.into_iter().map(String::into_bytes).collect()),
            stream: self.stream,
            lsm: self.lsm,
        })
    }
}

/// A line from `warden run` to the daemon.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Request {
    Register(Box<Register>),
    /// A record warden run made itself (the proxy's decisions).
    Record {
        record: Box<ViolationRecord>,
    },
    /// Bytes the proxy moved since the last `bytes` line.
    Bytes {
        up: u64,
        down: u64,
    },
    /// The command ended: send what is left, then `done`.
    Finish,
}

/// The daemon's answer to a registration: `{"ok":true}` or `{"ok":false,"error":"..."}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The eBPF programs attached for the sandbox (as `warden_bpf_programs_loaded` names
    /// them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub programs: Vec<String>,
    /// The BPF LSM mode the daemon scoped the sandbox with (`observe` or `enforce`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lsm: Option<String>,
    /// Something the run should tell its user (the LSM path is unavailable, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

impl Status {
    pub fn refused(error: impl Into<String>) -> Status {
        Status {
            ok: false,
            error: Some(error.into()),
            programs: Vec::new(),
            lsm: None,
            warning: None,
        }
    }
}

/// Events the daemon could not deliver or the kernel lost while the sandbox was registered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LossCounts {
    /// This sandbox's events the full ring buffer refused.
    pub ring_full: u64,
    /// This sandbox's events not sent: over its share of the node's ring buffer while the
    /// buffer was half full (ebpf/emit.bpf.h).
    #[serde(default)]
    pub rate_limited: u64,
    /// The per-thread map of calls in flight was full (node-wide).
    pub pending_full: u64,
    /// Events the daemon could not decode (node-wide).
    pub undecodable: u64,
    /// This sandbox's records the daemon dropped because the run did not read them fast
    /// enough.
    pub relay_full: u64,
}

/// A line from the daemon to `warden run` after the registration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Event {
    Record {
        record: Box<ViolationRecord>,
    },
    /// Every record of the sandbox was sent; `events`: the ring buffer's events of the
    /// sandbox (reported or not).
    Done {
        losses: LossCounts,
        events: u64,
    },
}

/// Any line the daemon sends.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Status(Status),
    Event(Event),
}

fn json_err(e: serde_json::Error) -> ProtocolError {
    ProtocolError::Json(e.to_string())
}

/// One line (without its newline) from `warden run`.
pub fn parse_request(line: &[u8]) -> Result<Request, ProtocolError> {
    if line.len() > MAX_LINE {
        return Err(ProtocolError::TooLong);
    }
    serde_json::from_slice(line).map_err(json_err)
}

/// One line (without its newline) from the daemon.
pub fn parse_reply(line: &[u8]) -> Result<Reply, ProtocolError> {
    if line.len() > MAX_LINE {
        return Err(ProtocolError::TooLong);
    }
    let value: serde_json::Value = serde_json::from_slice(line).map_err(json_err)?;
    if value.get("ok").is_some() {
        serde_json::from_value(value)
            .map(Reply::Status)
            .map_err(json_err)
    } else {
        serde_json::from_value(value)
            .map(Reply::Event)
            .map_err(json_err)
    }
}

/// A message as one line, newline included.
pub fn line<T: Serialize>(msg: &T) -> String {
    let mut s = serde_json::to_string(msg).unwrap_or_else(|_| "{}".to_string());
    s.push('\n');
    s
}

#[cfg(test)]
#[path = "protocol_tests.rs"]
mod protocol_tests;

//! The one interface `warden run` uses to run a sandboxed command. The Linux backend
//! (`linux/backend.rs`) builds the sandbox itself; the macOS Seatbelt backend (issue #7)
//! implements the same trait. Nothing outside the backends is `cfg(target_os)`-specific
//! except the choice of [`native`].

use crate::policy::merge::Policy;
use std::ffi::OsString;
use std::path::PathBuf;

/// What to run.
#[derive(Clone, Debug)]
pub struct SandboxCommand {
    pub argv: Vec<OsString>,
    /// The caller's environment, before `warden.env.deny` is applied.
    pub env: Vec<(OsString, OsString)>,
    /// `--publish HOSTPORT:PORT`: host loopback ports forwarded to ports inside the sandbox.
    pub publish: Vec<(u16, u16)>,
    /// `--approvals unix:PATH`: the control channel's socket, where requests the policy leaves
    /// to approval are asked.
    pub approvals: Option<std::path::PathBuf>,
    /// `--violations FILE` (backends whose records do not go through `audit/`: macOS).
    pub violations: Option<std::path::PathBuf>,
    /// `--annotate-stderr` (backends whose records do not go through `audit/`: macOS).
    pub annotate_stderr: bool,
    /// The run's metrics, when requested (backends that count themselves: macOS).
    pub metrics: Option<std::sync::Arc<crate::metrics::Metrics>>,
    /// Give the command its own terminal when warden runs on one (whole-process mode,
    /// `--pty`): job control inside, and approval prompts it cannot see or answer.
    pub terminal: bool,
    /// The policy the running services consult, replaced when the settings change
    /// (`crate::reload`); `None`: the policy given to `spawn`, fixed.
    pub live: Option<std::sync::Arc<crate::policy::live::LivePolicy>>,
    /// `--session ID`: the session's approvals on disk, shared with `warden check --ask` and
    /// the session's other sandboxes (`crate::approve::store`).
    pub session: Option<crate::approve::store::SessionStore>,
}

/// Resources a sandbox needs before its policy can be built: the private TMPDIR, which the
/// policy makes writable.
pub trait Workspace {
    fn tmpdir(&self) -> PathBuf;
}

/// A running sandbox.
pub trait Sandbox {
    /// Forwards signals until the command ends; returns its exit code (128+N for a signal)
    /// and tears everything down.
    fn wait(self) -> i32;

    /// Whether something in this sandbox's services reads the live policy (the network
    /// proxy): only then are settings edits watched while it runs.
    fn serves_network(&self) -> bool {
        true
    }
}

pub trait Backend {
    type Workspace: Workspace;
    type Sandbox: Sandbox;

    fn workspace(&self) -> Result<Self::Workspace, BackendError>;

    /// Turns the policy into the backend's plan, sets it up and starts the command.
    fn spawn(
        &self,
        workspace: Self::Workspace,
        policy: &Policy,
        command: &SandboxCommand,
    ) -> Result<Self::Sandbox, BackendError>;
}

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("sandbox.enabled is false in the settings: refusing to run a command unsandboxed")]
    Disabled,
    #[cfg(target_os = "linux")]
    #[error(transparent)]
    Plan(#[from] crate::linux::plan::PlanError),
    #[cfg(target_os = "linux")]
    #[error(transparent)]
    Spawn(#[from] crate::linux::spawn::SpawnError),
    #[cfg(target_os = "linux")]
    #[error("applying limits: {0}")]
    Limits(#[source] crate::linux::cgroup::CgroupError),
    #[cfg(target_os = "macos")]
    #[error(transparent)]
    Profile(#[from] crate::macos::profile::ProfileError),
    #[error("the network proxy could not start (network access fails closed): {0}")]
    Network(String),
    /// A setting this platform cannot enforce, refused rather than ignored.
    #[error("{0}")]
    Unenforceable(String),
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// Distinct violations a `<sandbox_violations>` block lists; the rest are counted.
pub const ANNOTATE_MAX: usize = 50;

/// The `<sandbox_violations>` block `--annotate-stderr` appends to the command's stderr, the
/// same on every backend: one line per distinct violation (at most [`ANNOTATE_MAX`]), how many
/// more there were, and a warning (records lost); empty when there is nothing to say.
pub fn annotation_block(lines: &[String], more: u64, warning: Option<&str>) -> String {
    if lines.is_empty() && more == 0 && warning.is_none() {
        return String::new();
    }
    let mut s = String::from("<sandbox_violations>\n");
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    if more > 0 {
        s.push_str(&format!("... and {more} more\n"));
    }
    if let Some(w) = warning {
        s.push_str(&format!("warning: {w}\n"));
    }
    s.push_str("</sandbox_violations>\n");
    s
}

/// The backend of the platform warden runs on.
#[cfg(target_os = "linux")]
pub fn native() -> crate::linux::backend::LinuxBackend {
    crate::linux::backend::LinuxBackend
}

/// The backend of the platform warden runs on.
#[cfg(target_os = "macos")]
pub fn native() -> crate::macos::MacosBackend {
    crate::macos::MacosBackend
}

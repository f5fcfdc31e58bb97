//! [`Backend`] for Linux: janitor, run directory, plan, cgroup, placeholders, start, wait,
//! teardown — in that order, each step undone if a later one fails, and each thing created on
//! the host reported to the janitor as soon as it exists.

use super::cgroup::{Cgroup, Limits};
use super::janitor::Janitor;
use super::plan::{self, PlanInput, RunDirs};
use super::spawn::{self, RunDir, SpawnError};
use crate::backend::{Backend, BackendError, Sandbox, SandboxCommand, Workspace};
use crate::policy::fsview::RealFs;
use crate::policy::merge::Policy;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

pub struct LinuxBackend;

pub struct LinuxWorkspace {
    run_dir: RunDir,
    janitor: Janitor,
}

impl Workspace for LinuxWorkspace {
    fn tmpdir(&self) -> PathBuf {
        self.run_dir.tmpdir()
    }
}

pub struct LinuxSandbox {
    inner: spawn::Sandbox,
    /// The command's own terminal joined to the caller's (whole-process mode).
    relay: Option<crate::term::Relay>,
    run_dir: RunDir,
    placeholders: super::placeholder::Held,
    network: Option<crate::net::service::Service>,
    approvals_socket: Option<PathBuf>,
    janitor: Janitor,
    /// The protected git dirs, whose indexes are checked once more at the end.
    git_dirs: Vec<PathBuf>,
    /// The symbolic links in them before the command started (the user's own).
    git_symlinks: Vec<(PathBuf, PathBuf)>,
    /// Their replace refs, grafts and alternates before the command started (the user's own).
    git_overrides: Vec<super::gitrefs::Override>,
    /// When the sandbox was set up: work-tree files changed since are checked against the
    /// index at the end.
    started: std::time::SystemTime,
    /// The main repositories' indexes and `HEAD`s as they were before the command started.
    indexes_before: super::watch::IndexesBefore,
    heads_before: Vec<(PathBuf, Vec<u8>)>,
    /// Protected files missing in the writable roots at the start: moved aside if the command
    /// left one.
    missing_protected: Vec<PathBuf>,
}

impl Backend for LinuxBackend {
    type Workspace = LinuxWorkspace;
    type Sandbox = LinuxSandbox;

    /// Must be called while the process is single-threaded (it starts the janitor), as
    /// `warden run` does first thing.
    fn workspace(&self) -> Result<LinuxWorkspace, BackendError> {
        // SAFETY: documented precondition: no thread has been started yet.
        let mut janitor = unsafe { Janitor::start() }.map_err(SpawnError::Start)?;
        let run_dir = RunDir::create()?;
        janitor.run_dir(run_dir.path());
        Ok(LinuxWorkspace { run_dir, janitor })
    }

    fn spawn(
        &self,
        ws: LinuxWorkspace,
        policy: &Policy,
        command: &SandboxCommand,
    ) -> Result<LinuxSandbox, BackendError> {
        if !policy.sandbox_enabled() {
            return Err(BackendError::Disabled);
        }
        let LinuxWorkspace {
            run_dir,
            mut janitor,
        } = ws;
        // Published host ports are bound first: a busy port fails the run before it starts.
        let mut published = Vec::new();
        for (host_port, port) in &command.publish {
            let l = std::net::TcpListener::bind(("127.0.0.1", *host_port))
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .map_err(|source| BackendError::Io {
                    what: "binding a --publish port on 127.0.0.1",
                    source,
                })?;
            published.push((l, *port));
        }
        // Who answers what the policy leaves to approval: the control channel, else the
        // terminal when warden runs interactively.
        // The command's own terminal, when asked for and warden runs on one.
        let terminal = command
            .terminal
            .then(super::pty::TerminalPlan::for_caller)
            .flatten();
        let console = std::sync::Arc::new(std::sync::OnceLock::new());
        let approver = match &command.approvals {
            Some(path) => Some(crate::net::service::ApproverSpec::Channel(path.clone())),
            None if policy.context.approver_attached && terminal.is_some() => {
                Some(crate::net::service::ApproverSpec::Tty(
                    crate::approve::tty::TtyApprover::relayed(console.clone()),
                ))
            }
            None if policy.context.approver_attached => {
                crate::approve::tty::TtyApprover::open().map(crate::net::service::ApproverSpec::Tty)
            }
            None => None,
        };
        let network = match network_plan(policy, !published.is_empty(), approver.is_some()) {
            Some(np) => {
                let resolv_conf = run_dir.path().join("resolv.conf");
                std::fs::write(&resolv_conf, super::net::resolv_conf()).map_err(|source| {
                    BackendError::Io {
                        what: "writing the sandbox's resolv.conf",
                        source,
                    }
                })?;
                Some(plan::NetworkInput {
                    plan: np,
                    resolv_conf,
                })
            }
            None => None,
        };
        let mut plan = plan::build(
            PlanInput {
                policy,
                argv: command.argv.iter().map(|a| a.clone().into_vec()).collect(),
                env: command_env(
                    policy,
                    command,
                    &run_dir,
                    network.as_ref().is_some_and(|n| n.plan.proxy),
                ),
                dirs: RunDirs {
                    root: run_dir.root(),
                    tmpdir: run_dir.tmpdir(),
                },
                network,
            },
            &RealFs,
        )?;
        plan.terminal = terminal;
        plan.watch_fd = janitor.watch_fd();
        let cgroup = match Cgroup::create(&format!("{}", std::process::id())) {
            Ok(mut cg) => {
                janitor.cgroup(cg.path());
                let limits = limits(policy);
                let applied = cg.apply_limits(&limits);
                // Without a pidsMax of the settings' own, a default one, best effort and in
                // cgroup v2 only: where v2 has no pids controller the sandbox runs as before
                // (an explicit one fails closed there, or goes through v1 at a cost).
                if applied.is_ok() && limits.pids_max.is_none() {
                    cg.apply_v2_pids_max(DEFAULT_PIDS_MAX);
                }
                for leaf in cg.v1_leaves() {
                    janitor.cgroup(leaf);
                }
                applied.map_err(BackendError::Limits)?;
                // Audit (#5): the cgroup id is watched before the go byte.
                crate::audit::watch(
                    cg.path(),
                    crate::audit::view_of_plan(&plan),
                    Some(crate::audit::lsm::rules_of_plan(&plan)),
                )
                .map_err(audit_error)?;
                crate::audit::lsm::scope(cg.path(), &plan).map_err(audit_error)?;
                Some(cg)
            }
            Err(e) if !policy.fail_if_unavailable() => {
                eprintln!(
                    "warden: warning: running without a cgroup (failIfUnavailable is false): {e}"
                );
                crate::audit::no_cgroup().map_err(audit_error)?;
                None
            }
            Err(e) => return Err(SpawnError::Cgroup(e).into()),
        };
        // The user's own symbolic links in the git dirs, before the command can make any.
        let git_symlinks_before = super::watch::git_symlinks(&plan.git_dirs);
        let git_overrides_before = super::gitrefs::snapshot(&plan.git_dirs);
        let indexes_before = super::watch::indexes_before(&plan.git_dirs);
        let heads_before = super::watch::heads_before(&plan.git_dirs);
        let started = std::time::SystemTime::now();
        // Blocked before the sandbox exists, so no forwarded signal is lost.
        super::init::signal_set()
            .thread_block()
            .map_err(|e| BackendError::Io {
                what: "blocking signals",
                source: e.into(),
            })?;
        let mut placeholders = super::placeholder::hold(
            &plan.placeholders,
            plan.placeholder_pool.as_deref(),
            &mut |list| janitor.placeholders(list, &plan.missing_protected),
        )
        .map_err(|source| BackendError::Io {
            what: "holding protected placeholders",
            source,
        })?;
        if let Some(sock) = &command.approvals {
            janitor.socket(sock);
        }
        match spawn::start(&plan, cgroup) {
            Ok(mut inner) => {
                crate::audit::start_reader({
                    let mut view = crate::audit::view_of_plan(&plan);
                    view.policy = Some(std::sync::Arc::new(policy.clone()));
                    view
                });
                // The sandbox exists: from here on threads are fine. Its pid 1 hands over the
                // terminal's master and the proxy's listeners before it starts the command.
                let relay = match (&inner.net_channel, &plan.terminal) {
                    (Some(chan), Some(_)) => {
                        let master = super::pty::receive_master(chan)
                            .and_then(crate::term::Relay::start)
                            .map_err(|source| BackendError::Io {
                                what: "joining the command's terminal",
                                source,
                            })?;
                        let _ = console.set(master.console());
                        Some(master)
                    }
                    _ => None,
                };
                let network = match (inner.net_channel.take(), &plan.network) {
                    (Some(chan), Some(np)) => {
                        let l =
                            super::net::receive(&chan, np).map_err(|source| BackendError::Io {
                                what: "receiving the sandbox's network sockets",
                                source,
                            })?;
                        let sockets = crate::net::service::Sockets {
                            http: l.http,
                            socks: l.socks,
                            dns_udp: l.dns_udp,
                            dns_tcp: l.dns_tcp,
                            token: None,
                        };
                        let publish = np.connector.then(|| {
                            let chan = std::sync::Mutex::new(chan);
                            let connect: crate::net::service::Connect =
                                std::sync::Arc::new(move |port| {
                                    let chan = chan
                                        .lock()
                                        .map_err(|_| std::io::Error::other("connector poisoned"))?;
                                    super::net::request_connect(&chan, port)
                                });
                            crate::net::service::Publish {
                                listeners: std::mem::take(&mut published),
                                connect,
                            }
                        });
                        Some(
                            crate::net::service::start(
                                sockets,
                                command.live.clone().unwrap_or_else(|| {
                                    crate::policy::live::LivePolicy::new(std::sync::Arc::new(
                                        policy.clone(),
                                    ))
                                }),
                                crate::audit::proxy_sink(),
                                publish,
                                approver,
                                command.session.clone(),
                            )
                            .map_err(|e| BackendError::Network(e.to_string()))?,
                        )
                    }
                    _ => None,
                };
                Ok(LinuxSandbox {
                    inner,
                    relay,
                    run_dir,
                    placeholders,
                    network,
                    approvals_socket: command.approvals.clone(),
                    janitor,
                    git_dirs: plan.git_dirs.clone(),
                    git_symlinks: git_symlinks_before,
                    git_overrides: git_overrides_before,
                    started,
                    indexes_before,
                    heads_before,
                    missing_protected: plan.missing_protected.clone(),
                })
            }
            Err(e) => {
                placeholders.release();
                Err(e.into())
            }
        }
    }
}

impl Sandbox for LinuxSandbox {
    fn serves_network(&self) -> bool {
        self.network.is_some()
    }

    fn wait(self) -> i32 {
        let relay = self.relay;
        let (code, cgroup_removed) = self.inner.wait_with(&mut |sig| match &relay {
            // The command's terminal follows the caller's window; the kernel signals it.
            Some(r) if sig == nix::sys::signal::Signal::SIGWINCH => {
                r.resize();
                true
            }
            _ => false,
        });
        // The rest of the command's output, then the caller's terminal back as it was, before
        // warden's own summary lines.
        if let Some(r) = relay {
            r.finish(std::time::Duration::from_millis(500));
        }
        // Every process of the sandbox is gone (its pid 1 waited for them): the indexes as
        // the host's git will read them.
        super::watch::final_symlink_check(&self.git_dirs, &self.git_symlinks);
        super::gitrefs::final_check(&self.git_dirs, &self.git_overrides);
        super::watch::final_protected_check(&self.missing_protected);
        super::watch::final_head_check(&self.heads_before);
        // Before an index may be moved aside (its gitlinks are what it names).
        super::watch::final_submodule_check(&self.git_dirs, self.started);
        super::watch::final_index_check(&self.git_dirs, self.started, &self.indexes_before);
        if let Some(net) = &self.network {
            for line in crate::net::service::blocked_summary(&net.events.events()) {
                eprintln!("{line}");
            }
            let dropped = net.events.dropped();
            if dropped > 0 {
                eprintln!(
                    "warden: network: {dropped} more network decisions are not in this summary \
                     (see --violations)"
                );
            }
        }
        // Audit (#5): drain the records, report losses, print the annotation last.
        crate::audit::finish();
        crate::audit::lsm::finish();
        let mut placeholders = self.placeholders;
        if let Some(sock) = &self.approvals_socket {
            super::janitor::remove_socket(sock);
        }
        placeholders.release();
        match self.run_dir.remove() {
            // Nothing reported to the janitor is left (placeholders still held by another
            // sandbox are that sandbox's to remove).
            Ok(()) if cgroup_removed => self.janitor.done(),
            Ok(()) => {}
            Err(e) => eprintln!("warden: warning: removing the run directory: {e}"),
        }
        code
    }
}

fn audit_error(e: crate::audit::AuditError) -> BackendError {
    BackendError::Io {
        what: "audit",
        source: std::io::Error::other(e),
    }
}

/// `pids.max` of a sandbox whose settings set no `warden.limits.pidsMax` (processes and
/// threads alive at once; `pidsMax: 0` lifts it): a fork bomb in the sandbox must not take
/// the host's whole pid space (red-team round 15).
pub const DEFAULT_PIDS_MAX: u64 = 4096;

fn limits(policy: &Policy) -> Limits {
    let e = &policy.effective;
    Limits {
        pids_max: e.u64("warden.limits.pidsMax"),
        memory_max: e.u64("warden.limits.memoryMax"),
        cpu_max: e.str("warden.limits.cpuMax").map(str::to_string),
    }
}

/// Listeners for the proxy when the policy wants one ([`Policy::wants_proxy`]), and pid 1's
/// connector for `--publish`.
fn network_plan(policy: &Policy, publish: bool, approver: bool) -> Option<super::net::NetworkPlan> {
    let proxy = policy.wants_proxy(approver);
    (proxy || publish).then(|| super::net::NetworkPlan {
        proxy,
        dns: proxy,
        connector: publish,
        ..Default::default()
    })
}

/// The caller's environment minus `warden.env.deny`, plus TMPDIR, the sandbox markers and,
/// with a network, the proxy variables (the caller's own proxy variables never pass).
fn command_env(
    policy: &Policy,
    command: &SandboxCommand,
    run_dir: &RunDir,
    network: bool,
) -> Vec<Vec<u8>> {
    let deny: Vec<globset::GlobMatcher> = policy
        .env_deny
        .iter()
        .filter_map(|r| {
            globset::Glob::new(&r.pattern)
                .ok()
                .map(|g| g.compile_matcher())
        })
        .collect();
    let mut env: Vec<Vec<u8>> = command
        .env
        .iter()
        .filter(|(k, _)| {
            let name = k.to_string_lossy();
            !matches!(name.as_ref(), "TMPDIR" | "IS_SANDBOX" | "WARDEN_SANDBOX")
                && !crate::net::env::NAMES.contains(&name.as_ref())
                && !deny.iter().any(|m| m.is_match(name.as_ref()))
        })
        .map(|(k, v)| {
            let mut b = k.clone().into_vec();
            b.push(b'=');
            b.extend(v.clone().into_vec());
            b
        })
        .collect();
    let mut tmp = b"TMPDIR=".to_vec();
    tmp.extend(run_dir.tmpdir().into_os_string().into_vec());
    env.push(tmp);
    if network {
        let java = command
            .env
            .iter()
            .find(|(k, _)| k == "JAVA_TOOL_OPTIONS")
            .map(|(_, v)| v.to_string_lossy().into_owned());
        for (k, v) in
            crate::net::env::proxy_env(crate::net::env::Endpoints::default(), java.as_deref())
        {
            env.push(format!("{k}={v}").into_bytes());
        }
    }
    env.push(b"IS_SANDBOX=1".to_vec());
    env.push(b"WARDEN_SANDBOX=1".to_vec());
    env
}

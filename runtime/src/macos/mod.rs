//! The macOS backend: Seatbelt (`sandbox-exec`) from the same effective policy as Linux.
//!
//! - [`profile`]: `Policy` → SBPL profile text and its `-D` parameters (pure; every OS).
//! - [`sbpl`]: the SBPL writer and the strict reader that checks each generated profile.
//! - [`glob`]: settings globs → Seatbelt regexes, translated from globset's own regex.
//! - [`logstream`]: Seatbelt denials from `log stream --style ndjson` → violation records.
//! - [`env`]: the command's environment (proxy URLs carry the per-sandbox token).
//! - [`MacosBackend`] (macOS only): the [`crate::backend::Backend`] that starts the proxy on
//!   localhost ports, the log monitor and `sandbox-exec -p PROFILE -D … -- COMMAND`.
//!
//! docs/macos.md describes the profile rule by rule and what is untested without a Mac.

pub mod env;
pub mod glob;
pub mod logstream;
pub mod profile;
pub mod sbpl;

#[cfg(target_os = "macos")]
pub use backend::{MacosBackend, MacosSandbox, MacosWorkspace};

/// Random lowercase hex from the kernel's generator: session tags and proxy tokens.
pub fn random_hex(bytes: usize) -> std::io::Result<String> {
    use std::io::Read;
    let mut buf = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// What the macOS backend enforces of `warden.limits`: the rlimits (setrlimit before exec),
/// and the cgroup limits it cannot (macOS has no cgroups) with the warning to print.
#[derive(Debug, PartialEq)]
pub struct Limits {
    pub rlimits: Vec<(crate::policy::limits::Rlimit, u64)>,
    /// Set when cgroup limits are asked for and `failIfUnavailable` is false.
    pub warning: Option<String>,
}

/// `warden.limits` for macOS. A cgroup limit (`pidsMax`, `memoryMax`, `cpuMax`) has no
/// macOS equivalent: refused (fail closed) unless `failIfUnavailable` is false, then run
/// without it and say so.
pub fn limits(policy: &crate::policy::merge::Policy) -> Result<Limits, String> {
    let rlimits = crate::policy::limits::rlimits(policy)?;
    let cgroup: Vec<&str> = crate::policy::limits::cgroup_limits(policy)
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    if cgroup.is_empty() {
        return Ok(Limits {
            rlimits,
            warning: None,
        });
    }
    let what = format!(
        "{} cannot be enforced on macOS (there are no cgroups; warden.limits.rlimits can be)",
        cgroup.join(", ")
    );
    if policy.fail_if_unavailable() {
        return Err(format!(
            "{what}: remove it, or set `failIfUnavailable: false` to run without it"
        ));
    }
    Ok(Limits {
        rlimits,
        warning: Some(format!(
            "warden: warning: running without {what} (failIfUnavailable is false)"
        )),
    })
}

/// macOS reports real paths (`/private/var/…` for `/var/…`, `/private/tmp`, `/private/etc`):
/// each ignored path with its resolved form too, so `ignoreViolations` entries written
/// either way match.
pub fn ignored_with_real_paths(paths: Vec<std::path::PathBuf>) -> Vec<std::path::PathBuf> {
    let mut out = Vec::with_capacity(paths.len() * 2);
    for p in paths {
        if let Ok(real) = std::fs::canonicalize(&p) {
            if real != p {
                out.push(real);
            }
        }
        out.push(p);
    }
    out
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;

#[cfg(target_os = "macos")]
mod backend {
    use super::logstream::{self, Violation};
    use super::profile::{self, Options, ProxyPorts};
    use crate::backend::{Backend, BackendError, Sandbox, SandboxCommand, Workspace};
    use crate::net::env::Endpoints;
    use crate::policy::fsview::RealFs;
    use crate::policy::merge::Policy;
    use nix::sys::signal::{SigSet, Signal};
    use nix::unistd::Pid;
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::CommandExt;
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";
    const LOG: &str = "/usr/bin/log";

    /// Signals warden passes on to the command's process group (the command runs in its own
    /// session, without the terminal as controlling terminal, so the terminal's signals reach
    /// warden only).
    const FORWARDED: &[Signal] = &[
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
        Signal::SIGUSR1,
        Signal::SIGUSR2,
    ];

    pub struct MacosBackend;

    /// The sandbox's private TMPDIR, removed when the sandbox ends.
    pub struct MacosWorkspace {
        /// Removed with the workspace.
        _dir: tempfile::TempDir,
        tmpdir: PathBuf,
    }

    impl Workspace for MacosWorkspace {
        fn tmpdir(&self) -> PathBuf {
            self.tmpdir.clone()
        }
    }

    pub struct MacosSandbox {
        child: Child,
        monitor: Option<LogMonitor>,
        network: Option<crate::net::service::Service>,
        violations_file: Option<PathBuf>,
        metrics: Option<std::sync::Arc<crate::metrics::Metrics>>,
        annotate_stderr: bool,
        /// `ignoreViolations` paths of this command (with their real paths).
        ignored: Vec<PathBuf>,
        _workspace: MacosWorkspace,
    }

    /// The macOS resource number of an rlimit.
    fn rlimit_resource(r: crate::policy::limits::Rlimit) -> libc::c_int {
        use crate::policy::limits::Rlimit;
        match r {
            Rlimit::Nofile => libc::RLIMIT_NOFILE,
            Rlimit::Nproc => libc::RLIMIT_NPROC,
            Rlimit::Core => libc::RLIMIT_CORE,
            Rlimit::Fsize => libc::RLIMIT_FSIZE,
            Rlimit::As => libc::RLIMIT_AS,
            Rlimit::Cpu => libc::RLIMIT_CPU,
            Rlimit::Stack => libc::RLIMIT_STACK,
        }
    }

    fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> BackendError {
        move |source| BackendError::Io { what, source }
    }

    impl Backend for MacosBackend {
        type Workspace = MacosWorkspace;
        type Sandbox = MacosSandbox;

        fn workspace(&self) -> Result<MacosWorkspace, BackendError> {
            let dir = tempfile::Builder::new()
                .prefix("warden-")
                .tempdir()
                .map_err(io("creating the sandbox's TMPDIR"))?;
            // Seatbelt sees real paths (/var is /private/var): give the policy the real one.
            let tmpdir =
                std::fs::canonicalize(dir.path()).map_err(io("resolving the sandbox's TMPDIR"))?;
            Ok(MacosWorkspace { _dir: dir, tmpdir })
        }

        fn spawn(
            &self,
            ws: MacosWorkspace,
            policy: &Policy,
            command: &SandboxCommand,
        ) -> Result<MacosSandbox, BackendError> {
            if !policy.sandbox_enabled() {
                return Err(BackendError::Disabled);
            }
            if !command.publish.is_empty() {
                return Err(BackendError::Io {
                    what: "--publish (on macOS the sandbox shares the host's loopback: set \
                           network.allowLocalBinding and use the port directly)",
                    source: std::io::ErrorKind::Unsupported.into(),
                });
            }
            if !Path::new(SANDBOX_EXEC).exists() {
                return Err(BackendError::Io {
                    what: "finding /usr/bin/sandbox-exec",
                    source: std::io::ErrorKind::NotFound.into(),
                });
            }
            // Blocked before any thread exists (proxy, log reader), so every thread inherits
            // the mask and only the forwarding thread takes these signals. The command's
            // mask is reset by std's spawn.
            let mut signals = SigSet::empty();
            for s in FORWARDED {
                signals.add(*s);
            }
            signals
                .thread_block()
                .map_err(|e| io("blocking signals")(e.into()))?;

            let limits = super::limits(policy).map_err(BackendError::Unenforceable)?;
            if let Some(w) = &limits.warning {
                eprintln!("{w}");
            }
            let rlimits: Vec<(libc::c_int, libc::rlim_t)> = limits
                .rlimits
                .iter()
                .map(|(r, v)| (rlimit_resource(*r), *v as libc::rlim_t))
                .collect();
            let line = command
                .argv
                .iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" ");
            let ignored =
                super::ignored_with_real_paths(crate::policy::ignore::ignored_paths(policy, &line));
            let tag = format!(
                "warden-{}",
                super::random_hex(8).map_err(io("reading /dev/urandom"))?
            );
            // Who answers what the policy leaves to approval: the control channel, else the
            // terminal when warden runs interactively (as on Linux).
            let approver = match &command.approvals {
                Some(path) => Some(crate::net::service::ApproverSpec::Channel(path.clone())),
                None if policy.context.approver_attached => {
                    crate::approve::tty::TtyApprover::open()
                        .map(crate::net::service::ApproverSpec::Tty)
                }
                None => None,
            };
            let (network, proxy) = if policy.wants_proxy(approver.is_some()) {
                let (svc, ports, token) = start_network(policy, command, approver)?;
                (Some(svc), Some((ports, token)))
            } else {
                (None, None)
            };
            let prof = profile::generate(
                policy,
                &RealFs,
                &Options {
                    proxy: proxy.as_ref().map(|(p, _)| *p),
                    tag: tag.clone(),
                },
            )?;
            let monitor = match LogMonitor::start(&tag) {
                Ok(m) => Some(m),
                Err(e) => {
                    if policy.effective.bool("warden.audit.required") == Some(true) {
                        return Err(io("starting `log stream` (warden.audit.required)")(e));
                    }
                    eprintln!("warden: warning: no violation records (`log stream`: {e})");
                    None
                }
            };
            let env = super::env::command_env(
                policy,
                &command.env,
                &ws.tmpdir,
                proxy.as_ref().map(|(p, token)| {
                    (
                        Endpoints {
                            http_port: p.http,
                            socks_port: p.socks,
                        },
                        token.as_str(),
                    )
                }),
            );
            let mut cmd = Command::new(SANDBOX_EXEC);
            cmd.args(prof.sandbox_exec_args())
                .arg("--")
                .args(&command.argv)
                .env_clear()
                .envs(env)
                .current_dir(&policy.context.cwd);
            // SAFETY: the closure runs in the child between fork and exec and calls only
            // setsid(2) and setrlimit(2), which are async-signal-safe, on data prepared before
            // the fork (no allocation). A new session has no controlling terminal, so the
            // command cannot push input into the caller's terminal (TIOCSTI).
            unsafe {
                cmd.pre_exec(move || {
                    nix::unistd::setsid().map_err(std::io::Error::from)?;
                    for (resource, value) in &rlimits {
                        let lim = libc::rlimit {
                            rlim_cur: *value,
                            rlim_max: *value,
                        };
                        // SAFETY: `lim` is a valid rlimit that outlives the call.
                        if libc::setrlimit(*resource, &lim) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    Ok(())
                });
            }
            let child = cmd.spawn().map_err(io("starting sandbox-exec"))?;
            let pgid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
            std::thread::Builder::new()
                .name("warden-signals".into())
                .spawn(move || {
                    while let Ok(sig) = signals.wait() {
                        let _ = nix::sys::signal::killpg(pgid, sig);
                    }
                })
                .map_err(io("starting the signal thread"))?;
            let violations_file = command.violations.clone().or_else(|| {
                policy
                    .effective
                    .str("warden.audit.violationsFile")
                    .map(|f| policy.context.cwd.join(f))
            });
            Ok(MacosSandbox {
                child,
                monitor,
                network,
                violations_file,
                metrics: command.metrics.clone(),
                annotate_stderr: command.annotate_stderr,
                ignored,
                _workspace: ws,
            })
        }
    }

    impl Sandbox for MacosSandbox {
        fn wait(mut self) -> i32 {
            let code = match self.child.wait() {
                Ok(status) => {
                    use std::os::unix::process::ExitStatusExt;
                    status
                        .code()
                        .or_else(|| status.signal().map(|s| 128 + s))
                        .unwrap_or(125)
                }
                Err(e) => {
                    eprintln!("warden: error: waiting for the command: {e}");
                    125
                }
            };
            // What the command left running in its process group ends with it.
            let pgid = Pid::from_raw(i32::try_from(self.child.id()).unwrap_or(i32::MAX));
            let _ = nix::sys::signal::killpg(pgid, Signal::SIGKILL);
            if let Some(net) = &self.network {
                let events = net.events.events();
                if let Some(metrics) = &self.metrics {
                    for e in &events {
                        let decision = if e.decision == crate::policy::decision::Decision::Allow {
                            "allow"
                        } else {
                            "deny"
                        };
                        let protocol = serde_json::to_value(e.protocol)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default();
                        metrics.network_request(decision, &protocol);
                        metrics.network_bytes(e.bytes_up, e.bytes_down);
                    }
                }
                for line in crate::net::service::blocked_summary(&events) {
                    eprintln!("{line}");
                }
            }
            if let Some(m) = self.monitor.take() {
                let records = logstream::drop_ignored(logstream::coalesce(m.stop()), &self.ignored);
                if let Some(metrics) = &self.metrics {
                    for r in &records {
                        metrics.violation(r.kind.name(), &r.operation, r.layer, r.count);
                    }
                }
                if self.annotate_stderr {
                    eprint!("{}", logstream::annotation(&records));
                } else {
                    for r in &records {
                        eprintln!("warden: violation: {}", r.summary_line());
                    }
                }
                if let Some(path) = &self.violations_file {
                    if let Err(e) = append_jsonl(path, &records) {
                        eprintln!("warden: warning: writing {}: {e}", path.display());
                    }
                }
            }
            code
        }
    }

    fn append_jsonl(path: &Path, records: &[Violation]) -> std::io::Result<()> {
        use std::io::Write;
        let mut f = crate::files::open_append(path)?;
        for r in records {
            let line = serde_json::to_string(r).map_err(std::io::Error::other)?;
            writeln!(f, "{line}")?;
        }
        Ok(())
    }

    /// The proxy on two ephemeral localhost ports, requiring a fresh token (any local process
    /// can reach these ports; on Linux the listeners live inside the sandbox instead). The
    /// same service as Linux's: live policy, approvals, session approvals, parent proxy.
    fn start_network(
        policy: &Policy,
        command: &SandboxCommand,
        approver: Option<crate::net::service::ApproverSpec>,
    ) -> Result<(crate::net::service::Service, ProxyPorts, String), BackendError> {
        let bind = || -> Result<std::net::TcpListener, BackendError> {
            let l = std::net::TcpListener::bind(("127.0.0.1", 0))
                .map_err(io("binding the proxy on localhost"))?;
            l.set_nonblocking(true)
                .map_err(io("binding the proxy on localhost"))?;
            Ok(l)
        };
        let (http, socks) = (bind()?, bind()?);
        let port = |l: &std::net::TcpListener| {
            l.local_addr()
                .map(|a| a.port())
                .map_err(io("reading the proxy's port"))
        };
        let ports = ProxyPorts {
            http: port(&http)?,
            socks: port(&socks)?,
        };
        let token = super::random_hex(16).map_err(io("reading /dev/urandom"))?;
        let service = crate::net::service::start(
            crate::net::service::Sockets {
                http: Some(http),
                socks: Some(socks),
                dns_udp: None,
                dns_tcp: None,
                token: Some(token.clone()),
            },
            command
                .live
                .clone()
                .unwrap_or_else(|| crate::policy::live::LivePolicy::new(Arc::new(policy.clone()))),
            None,
            None,
            approver,
            command.session.clone(),
        )
        .map_err(|e| BackendError::Network(e.to_string()))?;
        Ok((service, ports, token))
    }

    /// `log stream` for this sandbox's tag, read on a thread.
    struct LogMonitor {
        child: Child,
        reader: std::thread::JoinHandle<()>,
        records: Arc<Mutex<Vec<Violation>>>,
    }

    impl LogMonitor {
        fn start(tag: &str) -> std::io::Result<LogMonitor> {
            let mut child = Command::new(LOG)
                .args(logstream::log_stream_args(tag))
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()?;
            let stdout = child
                .stdout
                .take()
                .ok_or_else(|| std::io::Error::other("no stdout"))?;
            let records = Arc::new(Mutex::new(Vec::new()));
            let (ready_tx, ready_rx) = std::sync::mpsc::channel();
            let sink = records.clone();
            let tag = tag.to_string();
            let reader = std::thread::Builder::new()
                .name("warden-log".into())
                .spawn(move || {
                    let mut ready = Some(ready_tx);
                    for line in BufReader::new(stdout).lines() {
                        let Ok(line) = line else { break };
                        // The first line (a banner) means the stream is live.
                        if let Some(tx) = ready.take() {
                            let _ = tx.send(());
                        }
                        if let Some(v) = logstream::parse_line(&line, &tag) {
                            if let Ok(mut r) = sink.lock() {
                                r.push(v);
                            }
                        }
                    }
                })?;
            // Denials before the stream is live would be lost: wait for it, briefly.
            let _ = ready_rx.recv_timeout(Duration::from_secs(2));
            Ok(LogMonitor {
                child,
                reader,
                records,
            })
        }

        /// Lets late reports arrive, stops the stream and returns what it saw.
        fn stop(mut self) -> Vec<Violation> {
            std::thread::sleep(Duration::from_millis(300));
            let _ = self.child.kill();
            let _ = self.child.wait();
            let _ = self.reader.join();
            self.records
                .lock()
                .map(|mut r| std::mem::take(&mut *r))
                .unwrap_or_default()
        }
    }
}

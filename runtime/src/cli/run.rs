//! `warden run`: one command in a sandbox warden builds itself.

use super::PolicyArgs;
use crate::backend::{Backend, Sandbox, SandboxCommand, Workspace};
use crate::policy::decision::Layer;
use crate::policy::fsview::RealFs;
use crate::policy::merge::{layer, Policy};
use crate::policy::settings::{FilesystemSettings, Mode, NetworkSettings, SandboxSettings};
use clap::Args;
use std::ffi::OsString;

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Also writable (repeatable).
    #[arg(long = "allow-write", value_name = "PATH")]
    pub allow_write: Vec<String>,
    /// Not readable (repeatable).
    #[arg(long = "deny-read", value_name = "PATH")]
    pub deny_read: Vec<String>,
    /// Also reachable (repeatable; takes effect with the network proxy).
    #[arg(long = "allow-domain", value_name = "DOMAIN")]
    pub allow_domain: Vec<String>,
    /// No network at all, whatever the settings allow.
    #[arg(long)]
    pub no_network: bool,
    /// Forward 127.0.0.1:HOSTPORT on the host to PORT on the sandbox's own loopback (a dev
    /// server the command runs). Repeatable.
    #[arg(long, value_name = "HOSTPORT:PORT", value_parser = parse_publish)]
    pub publish: Vec<(u16, u16)>,
    /// Ask what the policy leaves to approval (hosts in no list) over a JSON-lines control
    /// channel on this unix socket (docs/protocol.md); without it such requests are denied.
    #[arg(long, value_name = "unix:PATH", value_parser = parse_approvals)]
    pub approvals: Option<std::path::PathBuf>,
    /// Append a JSON line per violation (and exec) the sandbox's command caused to FILE:
    /// kernel records from eBPF (as root) and the proxy's decisions.
    #[arg(long, value_name = "FILE")]
    pub violations: Option<std::path::PathBuf>,
    /// After the command ends, append a `<sandbox_violations>` block to stderr.
    #[arg(long)]
    pub annotate_stderr: bool,
    /// At the end of the run, write Prometheus metrics (violations, network requests, execs)
    /// to FILE atomically, for node_exporter's textfile collector (docs/metrics.md).
    #[arg(long, value_name = "FILE")]
    pub metrics_file: Option<std::path::PathBuf>,
    /// Serve OpenMetrics on http://ADDR/metrics while the command runs (loopback only unless
    /// `warden.metrics.allowRemote`), e.g. 127.0.0.1:9464; `/healthz` answers `ok`.
    #[arg(long = "metrics-addr", alias = "metrics-listen", value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// A label NAME=VALUE on the run's metrics (every series) and violation records, and on
    /// the audit daemon's (repeatable, at most 8; NAME: [a-zA-Z_][a-zA-Z0-9_]*, VALUE: at
    /// most 128 bytes). Use bounded values (team, project, agent), never a per-run id.
    #[arg(long = "label", value_name = "NAME=VALUE")]
    pub label: Vec<String>,
    /// `whole-process`: the command is a whole agent — on its own terminal (job control,
    /// approval prompts it can neither see nor answer), with a status line at start.
    /// Default: the settings' `mode`, else `per-command`.
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    pub mode: Option<Mode>,
    /// Give the command its own terminal when warden runs on one (always in whole-process
    /// mode).
    #[arg(long)]
    pub pty: bool,
    /// No status line at start in whole-process mode.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// The agent's shell line, instead of CMD: decided by the command policy and the
    /// `beforeCommand` hook (asking what they leave to approval), then run as `sh -c LINE`.
    /// A refused line exits 126 without running.
    #[arg(long, value_name = "LINE", conflicts_with = "command")]
    pub command_text: Option<String>,
    /// With --command-text: the agent asks to run the line outside the sandbox
    /// (dangerouslyDisableSandbox). Only where `allowUnsandboxedCommands` permits it, after
    /// approval, and never as root outside a sandbox.
    #[arg(long, requires = "command_text")]
    pub unsandboxed: bool,
    /// The agent session this run belongs to: approvals given in the session (at a prompt,
    /// or with `warden check --ask --session ID`) apply to this run, and what is approved
    /// here is shared with the session's later runs. Also the `beforeCommand` hook's
    /// `session`.
    #[arg(long, value_name = "ID", env = "WARDEN_SESSION")]
    pub session: Option<String>,
    /// The command and its arguments.
    #[arg(
        trailing_var_arg = true,
        required_unless_present = "command_text",
        value_name = "CMD"
    )]
    pub command: Vec<OsString>,
}

impl RunArgs {
    /// The command-line flags as a settings layer ranked above every file but managed.
    fn flags_layer(&self) -> Option<crate::policy::merge::LayerInput> {
        let list = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
        let mut s = SandboxSettings::default();
        if !self.allow_write.is_empty() || !self.deny_read.is_empty() {
            s.filesystem = Some(FilesystemSettings {
                allow_write: list(&self.allow_write),
                deny_read: list(&self.deny_read),
                ..Default::default()
            });
        }
        if !self.allow_domain.is_empty() || self.no_network {
            s.network = Some(NetworkSettings {
                allowed_domains: list(&self.allow_domain),
                denied_domains: self.no_network.then(|| vec!["*".to_string()]),
                ..Default::default()
            });
        }
        s.mode = self.mode;
        (s != SandboxSettings::default()).then(|| layer(Layer::Flags, 0, "command line", s))
    }
}

pub fn run(args: &RunArgs) -> anyhow::Result<i32> {
    // warden_sandbox_start_seconds (#5) measures from here to the sandbox running.
    let started = std::time::Instant::now();
    for (i, (host, _)) in args.publish.iter().enumerate() {
        if args.publish[..i].iter().any(|(h, _)| h == host) {
            anyhow::bail!("--publish: host port {host} is given twice");
        }
    }
    let backend = crate::backend::native();
    let workspace = backend.workspace()?;
    let (mut layers, mut context) = args.policy.layers()?;
    layers.extend(args.flags_layer());
    context.tmpdir = Some(workspace.tmpdir());
    let mut policy = Policy::build(&layers, context, &RealFs)?;
    // Where questions go: the flags, else `warden.approvals.mode`.
    let (approvals_socket, mut attended) =
        crate::approve::choose(&policy, args.approvals.clone(), args.policy.non_interactive)
            .map_err(anyhow::Error::msg)?;
    // Questions on the caller's terminal need the command on a terminal of its own (below),
    // which takes stdin and stdout both being terminals; otherwise the command would share
    // the one the question is asked on and could answer it (red-team round 14): nobody asks.
    {
        use std::io::IsTerminal;
        if attended
            && approvals_socket.is_none()
            && cfg!(target_os = "linux")
            && std::io::stdin().is_terminal()
            && !std::io::stdout().is_terminal()
        {
            attended = false;
            eprintln!(
                "warden: questions are denied in this run: stdout is not a terminal, so the \
                 command would share the terminal they are asked on (use --approvals unix:PATH \
                 to answer them elsewhere)"
            );
        }
    }
    policy.context.approver_attached = attended;
    // `--session`: what the session approved so far shapes this sandbox (its view and its
    // network), and what is approved during the run is recorded for the next one.
    let session = match &args.session {
        Some(id) => {
            let store = crate::approve::store::SessionStore::open(id)?;
            let dir = store.file().parent().unwrap_or(std::path::Path::new("/"));
            if policy
                .check_path(&RealFs, dir, crate::policy::path::Access::Write)
                .decision
                == crate::policy::decision::Decision::Allow
            {
                anyhow::bail!(
                    "the session store {} would be writable inside the sandbox (a command \
                     could approve things for itself); set WARDEN_SESSION_DIR outside every \
                     writable root",
                    dir.display()
                );
            }
            policy.approvals.merge(&store.load()?);
            // An approval may still cover it (allow once for a new file approves its
            // directory, which can hold the store): the store is read-only in every view,
            // whatever the writable roots (red-team round 15).
            protect_session_store(&mut policy, dir);
            Some(store)
        }
        None => None,
    };
    // `--command-text`: the line is gated first; nothing is set up for a refused one.
    let argv = match &args.command_text {
        None => args.command.clone(),
        Some(line) => match gate(&policy, args, line, session.as_ref())? {
            Gate::Refused(code) => return Ok(code),
            Gate::Unsandboxed => return run_unsandboxed(line),
            Gate::Sandboxed => [line_shell(), "-c", line.as_str()]
                .map(OsString::from)
                .to_vec(),
        },
    };
    // `--label` (#5): on the run's metrics and records, and the audit daemon's.
    let labels = crate::metrics::Labels::parse(&args.label)?;
    // Metrics (#5): the listener is bound now; it serves once the sandbox runs.
    let metrics_request = crate::metrics::request(
        &policy,
        args.metrics_file.clone(),
        args.metrics_listen.clone(),
    )?;
    // The files warden writes its records to: read-only in the sandbox (see below).
    #[cfg_attr(not(target_os = "linux"), allow(unused_mut))]
    let mut record_files: Vec<std::path::PathBuf> = metrics_request
        .as_ref()
        .and_then(|r| r.file.clone())
        .into_iter()
        .collect();
    let mut exporter = metrics_request
        .map(|r| {
            crate::metrics::Exporter::open(crate::metrics::MetricsRequest {
                labels: labels.clone(),
                ..r
            })
        })
        .transpose()?;
    // Audit (#5): loaded before the sandbox exists, still single-threaded.
    #[cfg(target_os = "linux")]
    if let Some(request) = crate::audit::request(
        &policy,
        args.violations.clone(),
        args.annotate_stderr,
        exporter.as_ref().map(|e| e.metrics()),
    ) {
        record_files.extend(request.file.clone());
        crate::audit::begin(crate::audit::AuditRequest {
            labels: labels.clone(),
            ..request
        })?;
        // The BPF LSM path (observe, or enforce: warden.audit.enforce), next to the tracepoints.
        crate::audit::lsm::begin(&crate::audit::lsm::LsmRequest::from_policy(&policy))?;
        let line = argv
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ");
        crate::audit::set_ignored(crate::audit::ignored_paths(&policy, &line));
    }
    // A record file in a writable directory (`--violations ./v.jsonl`) would be the command's
    // to truncate or forge: protected like warden's own settings.
    protect_record_files(&mut policy, &record_files);
    let live = crate::policy::live::LivePolicy::new(std::sync::Arc::new(policy.clone()));
    let whole = policy.mode == Mode::WholeProcess;
    if whole && !args.quiet {
        let metrics = args
            .metrics_listen
            .clone()
            .or_else(|| {
                policy
                    .effective
                    .str("warden.metrics.listen")
                    .map(str::to_string)
            })
            .or_else(|| {
                policy
                    .effective
                    .str("warden.metrics.addr")
                    .map(str::to_string)
            });
        eprintln!(
            "{}",
            status_line(&policy, audit_loaded(), metrics.as_deref())
        );
    }
    let own_terminal = attended && approvals_socket.is_none() && cfg!(target_os = "linux");
    let command = SandboxCommand {
        argv: argv.clone(),
        env: std::env::vars_os().collect(),
        publish: args.publish.clone(),
        approvals: approvals_socket,
        violations: args.violations.clone(),
        annotate_stderr: args.annotate_stderr,
        metrics: exporter.as_ref().map(|e| e.metrics()),
        // Questions asked on the caller's terminal: the command gets a terminal of its own
        // (as with --pty). On the shared one it could read the caller's input and make the
        // terminal type for it — a query whose reply ends in `y` answered "allow once" for it
        // (red-team round 13).
        terminal: args.pty || whole || own_terminal,
        live: Some(live.clone()),
        session,
    };
    let rebuild = rebuilder(args, workspace.tmpdir(), policy.approvals.clone(), attended);
    let sandbox = match backend.spawn(workspace, &policy, &command) {
        Ok(s) => s,
        Err(e) => {
            if let Some(Err(me)) = exporter.map(|x| x.start_failed()) {
                eprintln!("warden: warning: {me}");
            }
            return Err(e.into());
        }
    };
    if let Some(Err(e)) = exporter.as_mut().map(|e| e.start(started.elapsed())) {
        eprintln!("warden: warning: {e}");
    }
    // Settings edits apply to the running sandbox's network (started after the sandbox: the
    // backend forks, so no thread may exist before).
    // Only while a service reads the live policy: a run without network has nothing a
    // settings edit could change after it started (its view is fixed).
    let _reloader = if !sandbox.serves_network() {
        None
    } else {
        match crate::reload::watch(args.policy.files()?, live, rebuild, Box::new(notice)) {
            Ok(r) => Some(r),
            Err(e) => {
                notice(&format!(
                    "warden: warning: settings changes will not apply live: {e}"
                ));
                None
            }
        }
    };
    let code = sandbox.wait();
    if let Some(Err(e)) = exporter.map(|e| e.finish()) {
        eprintln!("warden: warning: {e}");
    }
    Ok(code)
}

/// `HOSTPORT:PORT`, both non-zero.
fn parse_publish(text: &str) -> Result<(u16, u16), String> {
    let (host, inside) = text
        .split_once(':')
        .ok_or_else(|| format!("{text:?}: expected HOSTPORT:PORT"))?;
    let port = |p: &str| {
        p.parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("{text:?}: {p:?} is not a port (1-65535)"))
    };
    Ok((port(host)?, port(inside)?))
}

fn parse_approvals(text: &str) -> Result<std::path::PathBuf, String> {
    crate::approve::channel::parse_spec(text).map_err(|e| e.to_string())
}

fn parse_mode(text: &str) -> Result<Mode, String> {
    match text {
        "per-command" => Ok(Mode::PerCommand),
        "whole-process" => Ok(Mode::WholeProcess),
        other => Err(format!(
            "{other:?}: expected `per-command` or `whole-process`"
        )),
    }
}

/// The SANDBOX indicator printed at start in whole-process mode: mode, writable roots,
/// network rules, audit, metrics.
pub(crate) fn status_line(policy: &Policy, audit: bool, metrics: Option<&str>) -> String {
    let p = &policy.paths;
    let writable = if p.disabled {
        "unrestricted".to_string()
    } else if p.read_only.is_some() {
        "none (read-only)".to_string()
    } else {
        let roots: Vec<String> = p
            .writable
            .iter()
            .map(|w| match w.list {
                "TMPDIR" => "$TMPDIR".to_string(),
                _ => w.rule.text.to_string(),
            })
            .collect();
        roots.join(", ")
    };
    let e = &policy.effective;
    let allowed = e.strings("network.allowedDomains").len();
    let denied = e.strings("network.deniedDomains").len();
    let network = if denied > 0
        && e.strings("network.deniedDomains")
            .iter()
            .any(|r| &*r.pattern == "*")
    {
        "none".to_string()
    } else {
        format!("{allowed} allowed, {denied} denied")
    };
    format!(
        "warden: SANDBOX whole-process | writable: {writable} | network: {network} | audit: {} | metrics: {}",
        if audit { "on" } else { "off" },
        metrics.unwrap_or("off")
    )
}

/// Whether the kernel audit records are on for this run.
fn audit_loaded() -> bool {
    #[cfg(target_os = "linux")]
    return crate::audit::loaded();
    #[cfg(not(target_os = "linux"))]
    false
}

/// Rebuilds the policy the way this run built it, from the files as they are now.
fn rebuilder(
    args: &RunArgs,
    tmpdir: std::path::PathBuf,
    approvals: std::sync::Arc<crate::policy::approvals::SessionApprovals>,
    attended: bool,
) -> crate::reload::Rebuild {
    let policy_args = args.policy.clone();
    let flags = args.flags_layer();
    Box::new(move || {
        let (mut layers, mut context) = policy_args.layers().map_err(|e| format!("{e:#}"))?;
        layers.extend(flags.clone());
        context.tmpdir = Some(tmpdir.clone());
        let mut policy = Policy::build(&layers, context, &RealFs).map_err(|e| e.to_string())?;
        // The session's approvals, and who answers questions, survive a settings edit.
        policy.approvals = approvals.clone();
        policy.context.approver_attached = attended;
        Ok(policy)
    })
}

/// One line from warden while the command runs; on a terminal (possibly raw, under the
/// whole-process relay) with its own carriage returns.
fn notice(message: &str) {
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        eprint!("\r{message}\r\n");
    } else {
        eprintln!("{message}");
    }
}

/// Exit code of a command line the policy or the hook refused (as a shell says "cannot
/// execute").
pub const EXIT_REFUSED: i32 = 126;

enum Gate {
    Sandboxed,
    Unsandboxed,
    Refused(i32),
}

/// `--command-text`: the command policy and the `beforeCommand` hook decide; what they leave
/// to approval is asked on the terminal (denied when nobody can answer).
fn gate(
    policy: &Policy,
    args: &RunArgs,
    line: &str,
    session: Option<&crate::approve::store::SessionStore>,
) -> anyhow::Result<Gate> {
    use crate::approve::{Answer, PermissionRequest, RequestKind};
    use crate::policy::command::Placement;
    use crate::policy::decision::Decision;
    let g = crate::hooks::gate_command(
        policy,
        line,
        &policy.context.cwd,
        !args.unsandboxed,
        args.session.as_deref().unwrap_or("default"),
    );
    let v = &g.verdict;
    let rule = v
        .rule
        .as_ref()
        .map(|r| format!(" (rule: {} \"{}\" from {})", r.list, r.entry, r.provenance))
        .unwrap_or_default();
    let allowed = match v.decision {
        Decision::Allow => true,
        Decision::Deny => false,
        Decision::RequiresApproval => {
            let approver = policy
                .context
                .approver_attached
                .then(crate::approve::tty::TtyApprover::open)
                .flatten();
            match approver {
                Some(a) => {
                    let answer = a.ask_blocking(&PermissionRequest {
                        id: 1,
                        kind: RequestKind::Command,
                        target: line.to_string(),
                        reason: v.reason.clone(),
                        rule: v
                            .rule
                            .as_ref()
                            .map(|r| format!("{}: \"{}\"", r.list, r.entry)),
                        provenance: v.rule.as_ref().map(|r| r.provenance.to_string()),
                        options: vec![Answer::AllowOnce, Answer::Deny],
                        timeout_seconds: crate::approve::timeout(policy).as_secs(),
                    });
                    let allowed = answer == Answer::AllowOnce;
                    if allowed {
                        let key = crate::policy::approvals::command_key(line, g.placement);
                        policy.approvals.approve_command(&key);
                        if let Some(store) = session {
                            if let Err(e) = store.update(|s| {
                                s.commands.insert(key.clone());
                            }) {
                                eprintln!("warden: warning: not shared with the session: {e}");
                            }
                        }
                    }
                    allowed
                }
                None => {
                    eprintln!(
                        "warden: command refused: {}{rule}; no approver (non-interactive)",
                        v.reason
                    );
                    return Ok(Gate::Refused(EXIT_REFUSED));
                }
            }
        }
    };
    if !allowed {
        eprintln!("warden: command refused: {}{rule}", v.reason);
        return Ok(Gate::Refused(EXIT_REFUSED));
    }
    Ok(match g.placement {
        Placement::Sandboxed => Gate::Sandboxed,
        // An excluded line (not a human-approved request to leave the sandbox, nor a disabled
        // sandbox) in a git repository whose config names programs — one the agent made can —
        // stays sandboxed: the host's git would run the filters, diff drivers and pager that
        // config names (red-team round 17).
        Placement::Unsandboxed => match (!args.unsandboxed && policy.commands.sandbox_enabled)
            .then(|| agents_repository(policy))
            .flatten()
        {
            Some(repo) => {
                eprintln!(
                    "warden: the line runs sandboxed: the git repository {} names programs in \
                     its config (filters, diff drivers, a pager…) that git would run on the host",
                    repo.display()
                );
                Gate::Sandboxed
            }
            None => Gate::Unsandboxed,
        },
    })
}

/// The git repository around the working directory when its config names programs git runs
/// (filter and diff drivers, pager, fsmonitor, editor, ssh command, includes, shell aliases,
/// helpers — a `git init` inside the sandbox lets the agent write them: red-team round 17), or
/// when its `.git` is not a plain directory (a `gitdir:` file points wherever its writer chose).
fn agents_repository(policy: &Policy) -> Option<std::path::PathBuf> {
    for dir in policy.context.cwd.ancestors() {
        let dot_git = dir.join(".git");
        let Ok(meta) = std::fs::symlink_metadata(&dot_git) else {
            continue;
        };
        if !meta.is_dir() {
            return Some(dir.to_path_buf());
        }
        let runs = ["config", "config.worktree"].iter().any(|f| {
            crate::policy::fsview::read_regular_file(&dot_git.join(f), 4 << 20)
                .is_ok_and(|text| config_runs_programs(&String::from_utf8_lossy(&text)))
        });
        return runs.then(|| dir.to_path_buf());
    }
    None
}

/// Whether git config text sets a key through which git runs a program.
fn config_runs_programs(text: &str) -> bool {
    const KEYS: [&str; 17] = [
        "clean",
        "smudge",
        "process",
        "textconv",
        "command",
        "pager",
        "fsmonitor",
        "sshcommand",
        "editor",
        "hookspath",
        "askpass",
        "path",
        "helper",
        "program",
        "driver",
        "uploadpack",
        "receivepack",
    ];
    let mut section = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line.to_ascii_lowercase();
            continue;
        }
        let (key, value) = line.split_once('=').unwrap_or((line, ""));
        let key = key.trim().to_ascii_lowercase();
        if KEYS.contains(&key.as_str())
            || (section.starts_with("[alias") && value.trim().trim_matches('"').starts_with('!'))
            || section.starts_with("[include")
        {
            return true;
        }
    }
    false
}

/// The shell a `--command-text` line runs in: bash, whose grammar the command policy reads
/// the line with (`policy::shell`), where there is one; `sh` otherwise. (Debian's `sh` is
/// dash, which reads some lines otherwise: `((sh<x))` is arithmetic to bash and two nested
/// subshells running `sh` to dash — red-team round 15.)
fn line_shell() -> &'static str {
    if std::path::Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "sh"
    }
}

/// Configuration every git an unsandboxed line starts takes over the project's: the project
/// is the sandbox's to write, and git reads more of it than the line names — the config of a
/// submodule the command made (`git status` descends into it and ran its `core.fsmonitor` on
/// the host: red-team round 16), hooks. (`GIT_CONFIG_COUNT` reaches every git process the
/// line starts, submodules' included, and wins over every config file.)
const UNSANDBOXED_GIT_CONFIG: [(&str, &str); 9] = [
    ("GIT_CONFIG_COUNT", "4"),
    ("GIT_CONFIG_KEY_0", "core.fsmonitor"),
    ("GIT_CONFIG_VALUE_0", "false"),
    ("GIT_CONFIG_KEY_1", "diff.ignoreSubmodules"),
    ("GIT_CONFIG_VALUE_1", "all"),
    ("GIT_CONFIG_KEY_2", "submodule.recurse"),
    ("GIT_CONFIG_VALUE_2", "false"),
    ("GIT_CONFIG_KEY_3", "core.hooksPath"),
    ("GIT_CONFIG_VALUE_3", "/dev/null"),
];

/// An approved request to run a line outside the sandbox. Never as root outside a sandbox:
/// root's unsandboxed command could undo every protection warden gives.
fn run_unsandboxed(line: &str) -> anyhow::Result<i32> {
    let inside = std::env::var("IS_SANDBOX").is_ok_and(|v| v == "1");
    if nix::unistd::geteuid().is_root() && !inside {
        anyhow::bail!(
            "refusing to run a command unsandboxed as root (outside a sandbox); run it as an \
             unprivileged user or sandboxed"
        );
    }
    eprintln!("warden: running unsandboxed (approved): {line}");
    let shell = line_shell();
    let status = std::process::Command::new(shell)
        .arg("-c")
        .arg(line)
        .envs(UNSANDBOXED_GIT_CONFIG.iter().copied())
        .status()
        .map_err(|e| anyhow::anyhow!("running {shell}: {e}"))?;
    use std::os::unix::process::ExitStatusExt;
    Ok(status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(crate::cli::EXIT_WARDEN))
}

/// The session store's directory: read-only on top of every writable root, as a mandatory
/// protection is (a sandboxed command that could write it would approve things for itself).
fn protect_session_store(policy: &mut Policy, dir: &std::path::Path) {
    let real = protect(policy, dir, true, "the session's approvals");
    // Unreadable too: the command has no business with the session's approvals, and a lock
    // it held on the store's lock file stalled every approval of the session (red-team round
    // 16).
    policy.paths.deny_read.push(crate::policy::decision::Rule {
        pattern: crate::policy::path::PathPattern::literal(dir.to_path_buf(), real),
        text: std::sync::Arc::from(dir.display().to_string()),
        provenance: crate::policy::decision::Provenance::new(
            crate::policy::decision::Layer::Default,
            0,
            "the session store",
        ),
    });
}

/// Adds warden's own record files (violations, metrics) to the protections: read-only in the
/// view, so the command cannot truncate, rewrite or forge the records of its own run. A
/// handed-over descriptor (`/dev/fd/N`) is not a path in the view.
fn protect_record_files(policy: &mut Policy, files: &[std::path::PathBuf]) {
    let Ok(cwd) = std::env::current_dir() else {
        return;
    };
    for file in files {
        let text = file.to_string_lossy();
        if text.starts_with("/dev/fd/") || text.starts_with("/proc/self/fd/") {
            continue;
        }
        let named = crate::policy::fsview::lexical(&cwd, file);
        protect(policy, &named, false, "warden's record file of this run");
    }
}

/// Makes `path` — as named and with its symlinks resolved — read-only on top of every
/// writable root, as the mandatory protections are; returns the resolved path.
fn protect(
    policy: &mut Policy,
    path: &std::path::Path,
    dir: bool,
    what: &'static str,
) -> std::path::PathBuf {
    let real = crate::policy::fsview::resolve(&RealFs, std::path::Path::new("/"), path)
        .unwrap_or_else(|_| path.to_path_buf());
    for p in [path.to_path_buf(), real.clone()] {
        let config = &mut policy.paths.mandatory.config;
        if !config.iter().any(|c| c.path == p) {
            config.push(crate::policy::mandatory::ConfigPath { path: p, dir, what });
        }
    }
    real
}

//! The library API for agent harnesses (per-command mode): build a policy from settings, run
//! one command in a sandbox with a `std::process`-like builder (blocking or tokio), and get
//! its exit status, its output and the violations of that run. docs/library.md has the guide.
//!
//! ```no_run
//! use warden::api::Sandbox;
//!
//! # fn main() -> Result<(), warden::api::Error> {
//! let out = Sandbox::builder()
//!     .cwd("/path/to/project")
//!     .no_network()
//!     .command("sh")
//!     .arg("-c")
//!     .arg("make test")
//!     .output()?;
//! println!("exit {:?}", out.code());
//! for v in &out.violations {
//!     println!("refused: {} {} {}", v.kind, v.operation, v.target);
//! }
//! eprint!("{}", out.annotated_stderr());
//! # Ok(())
//! # }
//! ```
//!
//! # Why the API runs the `warden` binary
//!
//! `warden run` forks a janitor and the sandbox from a single-threaded process (see
//! `linux/backend.rs`): forking a multi-threaded program (any tokio runtime) and then doing
//! more than async-signal-safe work in the child can deadlock on a lock another thread held.
//! A harness is multi-threaded, so this API never builds the sandbox in-process: it starts
//! `warden run --violations /dev/fd/N ... -- CMD` as a child with `std::process` or
//! `tokio::process` (fork + exec, safe from any thread) and reads the violation records from an
//! anonymous file afterwards. The command's exit code passes through; exit 125 is warden's own
//! failure ([`Error::Warden`]).

use crate::policy::fsview::RealFs;
use crate::policy::path::Access;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::{self, Read, Seek};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};

pub use crate::hooks::CommandGate;
pub use crate::policy::decision::{Decision, ReasonKind, RuleRef, Verdict};
pub use crate::policy::tool::ToolVerdict;

/// The exit code of warden's own failures (bad settings, a sandbox that cannot be built).
pub const EXIT_WARDEN: i32 = crate::cli::EXIT_WARDEN;

/// The environment variable naming the `warden` binary (second in [`Sandbox`]'s lookup).
pub const BINARY_ENV: &str = "WARDEN_BIN";

use crate::backend::ANNOTATE_MAX;

/// Everything that can go wrong. The command's own failures are not errors: they are its exit
/// status.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No `warden` binary: not given, not in `WARDEN_BIN`, not next to this program, not on
    /// `PATH`.
    #[error(
        "cannot find the warden binary: call .warden_binary(PATH), set {BINARY_ENV}, or put \
         `warden` next to this program or on PATH (looked for {})",
        display_paths(.searched)
    )]
    BinaryNotFound { searched: Vec<PathBuf> },
    /// The binary named explicitly (`from`: `.warden_binary()` or `WARDEN_BIN`) is not an
    /// executable file.
    #[error("the warden binary {} (from {from}) is not an executable file", path.display())]
    BinaryNotExecutable { path: PathBuf, from: &'static str },
    /// warden could not be started.
    #[error("cannot start {}: {source}", program.display())]
    Spawn {
        program: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Waiting for warden, or collecting its output, failed.
    #[error("waiting for warden: {0}")]
    Wait(#[source] io::Error),
    /// The private file the violation records go to could not be created or read.
    #[error("the violation records file: {0}")]
    Records(#[source] io::Error),
    /// A line of the violation records is not a record (warden and this library disagree).
    #[error("violation record on line {line}: {source}")]
    Record {
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    /// warden itself failed (exit 125): its `warden: error: …` lines when stderr was captured,
    /// empty when it went elsewhere.
    #[error("warden failed (exit 125){}", if stderr.is_empty() { String::new() } else { format!(": {stderr}") })]
    Warden { stderr: String },
    /// Loading the settings or building the policy failed ([`Policy::load`]).
    #[error("{0}")]
    Policy(String),
    /// A signal could not be sent to warden.
    #[error("signalling warden: {0}")]
    Signal(#[source] io::Error),
    /// Arguments were added ([`Command::arg`], [`Command::args`]) to a command made by
    /// [`Sandbox::command_text`], whose line is the whole command; nothing was started.
    #[error(
        "a --command-text command takes no arguments (the line is the whole command): \
         {line:?} was given {args:?}; put them in the line"
    )]
    CommandTextArgs { line: String, args: Vec<OsString> },
}

fn display_paths(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "nothing: PATH is empty".to_string();
    }
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

// ---------------------------------------------------------------------------------------------
// The sandbox: what `warden run` is told besides the command.

/// The sandbox settings for commands: settings files, working directory and the flags of
/// `warden run`. Cheap to clone; one `Sandbox` runs any number of commands, each in its own
/// sandbox. Build one with [`Sandbox::builder`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sandbox {
    binary: Option<PathBuf>,
    settings: Vec<PathBuf>,
    cwd: Option<PathBuf>,
    allow_write: Vec<OsString>,
    deny_read: Vec<OsString>,
    allow_domain: Vec<String>,
    no_network: bool,
    non_interactive: bool,
    approvals: Option<PathBuf>,
    labels: Vec<(String, String)>,
    publish: Vec<String>,
    metrics_addr: Option<String>,
    session: Option<String>,
    pty: bool,
    whole_process: bool,
}

/// Builds a [`Sandbox`]; [`SandboxBuilder::command`] goes straight to a command.
#[derive(Clone, Debug, Default)]
#[must_use]
pub struct SandboxBuilder {
    sandbox: Sandbox,
}

impl Sandbox {
    pub fn builder() -> SandboxBuilder {
        SandboxBuilder::default()
    }

    /// A command to run in a sandbox with these settings.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        self.new_command(Target::Program(program.as_ref().to_os_string()))
    }

    /// An agent's shell line to run in a sandbox with these settings, gated first
    /// (`warden run --command-text LINE`): the command policy and the `beforeCommand` hook
    /// decide, then the line runs as `bash -c LINE` in the sandbox. A refused line does not run:
    /// warden prints `warden: command refused: …` on stderr and the status is exit 126 (an
    /// ordinary status, not an [`Error`]). What the policy leaves to approval is asked on
    /// warden's terminal, and refused without one or with
    /// [`non_interactive`](SandboxBuilder::non_interactive). The hook is told the agent's
    /// [`session`](SandboxBuilder::session).
    ///
    /// The line is the whole command: [`arg`](Command::arg) and [`args`](Command::args) on the
    /// result make it fail to start with [`Error::CommandTextArgs`].
    pub fn command_text(&self, line: impl Into<String>) -> Command {
        self.new_command(Target::Line(line.into()))
    }

    fn new_command(&self, target: Target) -> Command {
        Command {
            sandbox: self.clone(),
            target,
            args: Vec::new(),
            env: Vec::new(),
            stdin: None,
            stdout: None,
            stderr: None,
        }
    }

    /// The `warden` binary this sandbox would run: [`SandboxBuilder::warden_binary`], else
    /// `$WARDEN_BIN`, else `warden` next to the current executable, else `warden` on `PATH`.
    pub fn warden_binary(&self) -> Result<PathBuf, Error> {
        discover(
            self.binary.as_deref(),
            std::env::var_os(BINARY_ENV),
            std::env::current_exe().ok(),
            std::env::var_os("PATH"),
        )
    }

    /// The arguments of `warden run` for one command (after the binary), with the violation
    /// records going to `records`.
    pub fn run_args(&self, records: &Path, program: &OsStr, args: &[OsString]) -> Vec<OsString> {
        let mut out = self.flag_args(records);
        out.push("--".into());
        out.push(program.to_os_string());
        out.extend(args.iter().cloned());
        out
    }

    /// The arguments of `warden run` for a gated shell line ([`Sandbox::command_text`]):
    /// the flags of [`run_args`](Sandbox::run_args), then `--command-text=LINE` (one word, so
    /// a line starting with `-` stays the value) and no `-- CMD`.
    pub fn command_text_args(&self, records: &Path, line: &str) -> Vec<OsString> {
        let mut out = self.flag_args(records);
        out.push(format!("--command-text={line}").into());
        out
    }

    /// `run --violations RECORDS` and the sandbox's flags, without the command.
    fn flag_args(&self, records: &Path) -> Vec<OsString> {
        let mut out: Vec<OsString> = vec!["run".into(), "--violations".into(), records.into()];
        let mut flag = |name: &str, value: &OsStr| {
            out.push(name.into());
            out.push(value.to_os_string());
        };
        for s in &self.settings {
            flag("--settings", s.as_os_str());
        }
        if let Some(cwd) = &self.cwd {
            flag("--cwd", cwd.as_os_str());
        }
        for p in &self.allow_write {
            flag("--allow-write", p);
        }
        for p in &self.deny_read {
            flag("--deny-read", p);
        }
        for d in &self.allow_domain {
            flag("--allow-domain", OsStr::new(d));
        }
        if let Some(socket) = &self.approvals {
            let mut spec = OsString::from("unix:");
            spec.push(socket);
            flag("--approvals", &spec);
        }
        for (k, v) in &self.labels {
            flag("--label", OsStr::new(&format!("{k}={v}")));
        }
        for spec in &self.publish {
            flag("--publish", OsStr::new(spec));
        }
        if let Some(addr) = &self.metrics_addr {
            flag("--metrics-addr", OsStr::new(addr));
        }
        if self.whole_process {
            flag("--mode", OsStr::new("whole-process"));
        }
        if self.no_network {
            out.push("--no-network".into());
        }
        if self.non_interactive {
            out.push("--non-interactive".into());
        }
        if self.pty {
            out.push("--pty".into());
        }
        out
    }

    /// The agent session's id given with [`SandboxBuilder::session`], which warden is told in
    /// its environment as `WARDEN_SESSION`.
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }
}

impl SandboxBuilder {
    /// The `warden` binary to run (skips the lookup of [`Sandbox::warden_binary`]).
    pub fn warden_binary(mut self, path: impl Into<PathBuf>) -> Self {
        self.sandbox.binary = Some(path.into());
        self
    }

    /// A settings file layered above the user and project settings (`--settings`,
    /// repeatable, in order).
    pub fn settings(mut self, path: impl Into<PathBuf>) -> Self {
        self.sandbox.settings.push(path.into());
        self
    }

    /// The working directory: the command runs there, it is writable, and its
    /// `.warden/settings.json` is the project layer (`--cwd`; default: the current one).
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.sandbox.cwd = Some(dir.into());
        self
    }

    /// Also writable (`--allow-write`, repeatable; settings syntax: `~/`, globs).
    pub fn allow_write(mut self, path: impl AsRef<OsStr>) -> Self {
        self.sandbox.allow_write.push(path.as_ref().to_os_string());
        self
    }

    /// Not readable (`--deny-read`, repeatable).
    pub fn deny_read(mut self, path: impl AsRef<OsStr>) -> Self {
        self.sandbox.deny_read.push(path.as_ref().to_os_string());
        self
    }

    /// Also reachable through warden's proxy (`--allow-domain`, repeatable:
    /// `example.com`, `*.example.com`, `host:port`).
    pub fn allow_domain(mut self, domain: impl Into<String>) -> Self {
        self.sandbox.allow_domain.push(domain.into());
        self
    }

    /// No network at all, whatever the settings allow (`--no-network`).
    pub fn no_network(mut self) -> Self {
        self.sandbox.no_network = true;
        self
    }

    /// Nobody answers approval requests: what would ask is denied (`--non-interactive`).
    /// Without it, a warden started on a terminal asks there about hosts in no list.
    pub fn non_interactive(mut self) -> Self {
        self.sandbox.non_interactive = true;
        self
    }

    /// Ask what the policy leaves to approval over the JSON-lines control channel on this unix
    /// socket (`--approvals unix:PATH`, docs/protocol.md).
    pub fn approvals(mut self, socket: impl Into<PathBuf>) -> Self {
        self.sandbox.approvals = Some(socket.into());
        self
    }

    /// An operator label on the run's records and metrics (`--label KEY=VALUE`, repeatable;
    /// warden validates names and bounds: docs/audit-daemon.md).
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.sandbox.labels.push((key.into(), value.into()));
        self
    }

    /// Publish a port of the sandbox (`--publish HOSTPORT:PORT`, repeatable): warden forwards
    /// `127.0.0.1:HOSTPORT` on the host to `PORT` on the sandbox's own loopback while the
    /// command runs, e.g. `"8000:8080"` for a dev server the command listens with on
    /// `127.0.0.1:8080`. Both ports are 1-65535. A malformed spec, or a host port already
    /// taken, fails the run before the command starts ([`Error::Warden`]).
    pub fn publish(mut self, spec: impl Into<String>) -> Self {
        self.sandbox.publish.push(spec.into());
        self
    }

    /// Serve the run's metrics (OpenMetrics: violations, network requests, execs, the
    /// sandbox's start) on `http://ADDR/metrics` while the command runs, and `ok` on
    /// `/healthz` (`--metrics-addr ADDR`: `IP:PORT`, `[IPv6]:PORT` or `localhost:PORT`;
    /// docs/metrics.md). Loopback only unless the settings say `warden.metrics.allowRemote`.
    /// Port 0 takes a free port, which warden prints on stderr
    /// (`warden: metrics on http://…/metrics`). A bad or taken address fails the run before
    /// the command starts ([`Error::Warden`]). [`label`](SandboxBuilder::label)s are on every
    /// series.
    pub fn metrics_addr(mut self, addr: impl Into<String>) -> Self {
        self.sandbox.metrics_addr = Some(addr.into());
        self
    }

    /// The agent session the commands belong to, passed to the `beforeCommand` hook that
    /// gates [`command_text`](Sandbox::command_text) lines (its `"session"`; `default`
    /// without one; docs/policy.md). It is given to warden as the environment variable
    /// `WARDEN_SESSION=ID` (which `warden run` reads), set after the command's own
    /// [`env`](Command::env) changes, so it survives [`env_clear`](Command::env_clear) and
    /// overrides a `WARDEN_SESSION` set there. `warden run` takes the variable as its
    /// `--session ID`, so where warden keeps a session's approvals across runs, they are
    /// this session's (keep the id to letters, digits, `.`, `_` and `-`). Like the rest of
    /// warden's environment, the sandboxed command sees it too (unless `warden.env.deny`
    /// names it).
    pub fn session(mut self, id: impl Into<String>) -> Self {
        self.sandbox.session = Some(id.into());
        self
    }

    /// The command on its own terminal when warden runs on one (`--pty`): job control, and
    /// approval prompts it can neither see nor answer.
    pub fn pty(mut self) -> Self {
        self.sandbox.pty = true;
        self
    }

    /// Whole-process mode (`--mode whole-process`): for a whole agent — its own terminal and
    /// a status line at start (docs/whole-process.md).
    pub fn whole_process(mut self) -> Self {
        self.sandbox.whole_process = true;
        self
    }

    pub fn build(self) -> Sandbox {
        self.sandbox
    }

    /// `self.build().command(program)`.
    pub fn command(self, program: impl AsRef<OsStr>) -> Command {
        self.sandbox.command(program)
    }

    /// `self.build().command_text(line)`: a gated shell line ([`Sandbox::command_text`]).
    pub fn command_text(self, line: impl Into<String>) -> Command {
        self.sandbox.command_text(line)
    }
}

/// Finds the `warden` binary: `explicit`, else `env` (`$WARDEN_BIN`), else `warden` next to
/// `exe`, else `warden` in a directory of `path` (`$PATH`). An explicit or `$WARDEN_BIN` path
/// must be an executable file; the others are skipped when they are not.
pub fn discover(
    explicit: Option<&Path>,
    env: Option<OsString>,
    exe: Option<PathBuf>,
    path: Option<OsString>,
) -> Result<PathBuf, Error> {
    let named = explicit
        .map(|p| (p.to_path_buf(), ".warden_binary()"))
        .or_else(|| {
            env.filter(|v| !v.is_empty())
                .map(|v| (PathBuf::from(v), BINARY_ENV))
        });
    if let Some((path, from)) = named {
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(Error::BinaryNotExecutable { path, from })
        };
    }
    let mut searched = Vec::new();
    if let Some(exe) = exe {
        searched.push(exe.with_file_name("warden"));
    }
    if let Some(path) = path {
        searched.extend(
            std::env::split_paths(&path)
                .filter(|d| !d.as_os_str().is_empty())
                .map(|d| d.join("warden")),
        );
    }
    match searched.iter().find(|p| is_executable(p)) {
        Some(found) => Ok(found.clone()),
        None => Err(Error::BinaryNotFound { searched }),
    }
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

// ---------------------------------------------------------------------------------------------
// One command.

/// One command to run in a sandbox, configured like [`std::process::Command`]: arguments,
/// environment and standard streams; then [`output`](Command::output),
/// [`status`](Command::status) or [`spawn`](Command::spawn), or their tokio forms
/// ([`output_async`](Command::output_async), ...).
///
/// The environment is warden's: warden passes it on to the command (minus
/// `warden.env.deny`), and reads `HOME`, `XDG_CONFIG_HOME` and `WARDEN_MANAGED_SETTINGS` itself
/// to find the settings layers, so [`env_clear`](Command::env_clear) must keep `HOME`.
///
/// A command can run more than once; the standard streams set on it apply to its next run
/// only (a `Stdio` is used up).
///
/// A command made by [`Sandbox::command_text`] is a whole shell line: it takes no arguments
/// (with any, running it is [`Error::CommandTextArgs`]).
#[derive(Debug)]
pub struct Command {
    sandbox: Sandbox,
    target: Target,
    args: Vec<OsString>,
    env: Vec<EnvOp>,
    stdin: Option<Stdio>,
    stdout: Option<Stdio>,
    stderr: Option<Stdio>,
}

/// What a [`Command`] runs: a program with arguments (`-- CMD ARGS`), or a gated shell line
/// (`--command-text LINE`).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Target {
    Program(OsString),
    Line(String),
}

#[derive(Clone, Debug)]
enum EnvOp {
    Set(OsString, OsString),
    Remove(OsString),
    Clear,
}

impl Command {
    /// An argument for the program. Not for a [`Sandbox::command_text`] line: running it then
    /// fails with [`Error::CommandTextArgs`].
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Self {
        self.args.push(arg.as_ref().to_os_string());
        self
    }

    /// Arguments for the program, as [`arg`](Command::arg).
    pub fn args<I, S>(&mut self, args: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Self {
        self.env.push(EnvOp::Set(
            key.as_ref().to_os_string(),
            value.as_ref().to_os_string(),
        ));
        self
    }

    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        for (k, v) in vars {
            self.env(k, v);
        }
        self
    }

    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Self {
        self.env.push(EnvOp::Remove(key.as_ref().to_os_string()));
        self
    }

    pub fn env_clear(&mut self) -> &mut Self {
        self.env.push(EnvOp::Clear);
        self
    }

    /// The command's stdin (warden passes its own on). Defaults as in `std::process`:
    /// inherited for `spawn`/`status`, null for `output`.
    pub fn stdin(&mut self, cfg: impl Into<Stdio>) -> &mut Self {
        self.stdin = Some(cfg.into());
        self
    }

    /// The command's stdout. Defaults: inherited for `spawn`/`status`, captured for `output`.
    pub fn stdout(&mut self, cfg: impl Into<Stdio>) -> &mut Self {
        self.stdout = Some(cfg.into());
        self
    }

    /// The command's stderr, which warden's own messages share (`warden: error: …`,
    /// `warden: network: blocked …`). Defaults: inherited for `spawn`/`status`, captured for
    /// `output`.
    pub fn stderr(&mut self, cfg: impl Into<Stdio>) -> &mut Self {
        self.stderr = Some(cfg.into());
        self
    }

    /// The sandbox this command runs in.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// The `warden run` process for this command, and the file its records go to. The
    /// standard streams set on `self` are moved into it.
    fn prepare(&mut self) -> Result<(std::process::Command, RecordsFile), Error> {
        if let Target::Line(line) = &self.target {
            if !self.args.is_empty() {
                return Err(Error::CommandTextArgs {
                    line: line.clone(),
                    args: self.args.clone(),
                });
            }
        }
        let binary = self.sandbox.warden_binary()?;
        let records = RecordsFile::create()?;
        let mut cmd = std::process::Command::new(&binary);
        cmd.args(match &self.target {
            Target::Program(program) => self.sandbox.run_args(&records.path(), program, &self.args),
            Target::Line(line) => self.sandbox.command_text_args(&records.path(), line),
        });
        for op in &self.env {
            match op {
                EnvOp::Set(k, v) => cmd.env(k, v),
                EnvOp::Remove(k) => cmd.env_remove(k),
                EnvOp::Clear => cmd.env_clear(),
            };
        }
        // Until `warden run --session` is everywhere: the variable `warden run` reads.
        if let Some(session) = &self.sandbox.session {
            cmd.env("WARDEN_SESSION", session);
        }
        if let Some(s) = self.stdin.take() {
            cmd.stdin(s);
        }
        if let Some(s) = self.stdout.take() {
            cmd.stdout(s);
        }
        if let Some(s) = self.stderr.take() {
            cmd.stderr(s);
        }
        records.pass_to(&mut cmd);
        Ok((cmd, records))
    }

    /// Runs the command to completion, capturing stdout and stderr (unless set otherwise),
    /// and returns them with its exit status and violations. Blocks. With stderr captured, a
    /// command's own exit 125 is told apart from warden's failure ([`warden_failure`]).
    pub fn output(&mut self) -> Result<Output, Error> {
        let captured = self.stderr.is_none();
        let (mut cmd, records) = self.prepare()?;
        let out = cmd.output().map_err(|source| Error::Spawn {
            program: PathBuf::from(cmd.get_program()),
            source,
        })?;
        let captured = captured || !out.stderr.is_empty();
        finish_output(out, captured, &records)
    }

    /// Runs the command to completion and returns its exit status and violations. Blocks.
    /// stderr is not captured, so an exit code of 125 is taken to be warden's own failure
    /// ([`Error::Warden`]); [`output`](Command::output) tells it apart from the command's.
    pub fn status(&mut self) -> Result<RunStatus, Error> {
        self.spawn()?.wait()
    }

    /// Starts the command and returns at once.
    pub fn spawn(&mut self) -> Result<Child, Error> {
        let (mut cmd, records) = self.prepare()?;
        let mut inner = cmd.spawn().map_err(|source| Error::Spawn {
            program: PathBuf::from(cmd.get_program()),
            source,
        })?;
        Ok(Child {
            stdin: inner.stdin.take(),
            stdout: inner.stdout.take(),
            stderr: inner.stderr.take(),
            inner,
            records,
        })
    }

    /// [`output`](Command::output) for tokio: the process is a `tokio::process::Child`.
    pub async fn output_async(&mut self) -> Result<Output, Error> {
        let captured = self.stderr.is_none();
        let (cmd, records) = self.prepare()?;
        let program = PathBuf::from(cmd.get_program());
        let out = tokio::process::Command::from(cmd)
            .output()
            .await
            .map_err(|source| Error::Spawn { program, source })?;
        let captured = captured || !out.stderr.is_empty();
        finish_output(out, captured, &records)
    }

    /// [`status`](Command::status) for tokio.
    pub async fn status_async(&mut self) -> Result<RunStatus, Error> {
        self.spawn_async()?.wait().await
    }

    /// [`spawn`](Command::spawn) for tokio; must be called within a tokio runtime.
    pub fn spawn_async(&mut self) -> Result<AsyncChild, Error> {
        let (cmd, records) = self.prepare()?;
        let program = PathBuf::from(cmd.get_program());
        let mut inner = tokio::process::Command::from(cmd)
            .spawn()
            .map_err(|source| Error::Spawn { program, source })?;
        Ok(AsyncChild {
            stdin: inner.stdin.take(),
            stdout: inner.stdout.take(),
            stderr: inner.stderr.take(),
            inner,
            records,
        })
    }
}

/// `captured`: whether `out.stderr` is warden's stderr (not redirected elsewhere by the caller,
/// nor read by it).
fn finish_output(
    out: std::process::Output,
    captured: bool,
    records: &RecordsFile,
) -> Result<Output, Error> {
    let stderr = captured.then_some(out.stderr.as_slice());
    if let Some(stderr) = warden_failure(&out.status, stderr) {
        return Err(Error::Warden { stderr });
    }
    Ok(Output {
        status: out.status,
        stdout: out.stdout,
        stderr: out.stderr,
        violations: records.violations()?,
    })
}

fn finish_status(status: ExitStatus, records: &RecordsFile) -> Result<RunStatus, Error> {
    if let Some(stderr) = warden_failure(&status, None) {
        return Err(Error::Warden { stderr });
    }
    Ok(RunStatus {
        status,
        violations: records.violations()?,
    })
}

/// Whether an exit status is warden's own failure rather than the command's, and then its
/// error lines. Exit 125 is warden's failure; when its stderr was captured, only if warden said
/// so there (a `warden: error:` line, or clap's usage error, which starts the output with
/// `error:`), so a command that itself exits 125 is told apart.
pub fn warden_failure(status: &ExitStatus, stderr: Option<&[u8]>) -> Option<String> {
    if status.code() != Some(EXIT_WARDEN) {
        return None;
    }
    let Some(stderr) = stderr else {
        return Some(String::new());
    };
    let text = String::from_utf8_lossy(stderr);
    if text.starts_with("error: ") {
        return Some(text.trim_end().to_string());
    }
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("warden: error:"))
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// The anonymous file `warden run --violations /dev/fd/N` appends records to: no path the
/// sandboxed command could reach (a temporary file under a writable root could be rewritten
/// from inside), gone when dropped.
#[derive(Debug)]
struct RecordsFile {
    file: std::fs::File,
}

impl RecordsFile {
    fn create() -> Result<RecordsFile, Error> {
        let file = tempfile::tempfile().map_err(Error::Records)?;
        // Descriptors 0-2 are remapped in the child: keep the file above them (a host that
        // closed its stdin would get descriptor 0 here). try_clone dups to 3 or higher.
        let file = if file.as_raw_fd() < 3 {
            file.try_clone().map_err(Error::Records)?
        } else {
            file
        };
        Ok(RecordsFile { file })
    }

    fn path(&self) -> PathBuf {
        PathBuf::from(format!("/dev/fd/{}", self.file.as_raw_fd()))
    }

    /// Makes the file's descriptor survive exec in warden only: it stays close-on-exec here,
    /// so processes other threads start do not inherit it.
    fn pass_to(&self, cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        let fd: RawFd = self.file.as_raw_fd();
        // SAFETY: the closure runs in the child between fork and exec, where only
        // async-signal-safe calls are allowed: it makes one fcntl call on a descriptor number
        // copied by value, and reads errno on failure. It allocates nothing and takes no lock.
        unsafe {
            cmd.pre_exec(move || {
                // SAFETY: fcntl(F_SETFD) on an open descriptor (the file is alive in the parent
                // until the child has exec'd, so it is open in the child) touches no memory.
                if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// The refused operations among the records written so far.
    fn violations(&self) -> Result<Vec<Violation>, Error> {
        let mut file = &self.file;
        file.rewind().map_err(Error::Records)?;
        let mut text = String::new();
        file.read_to_string(&mut text).map_err(Error::Records)?;
        let mut records = Violation::parse_lines(&text)?;
        records.retain(|r| r.violation);
        Ok(records)
    }
}

// ---------------------------------------------------------------------------------------------
// Results.

/// A finished command with its captured output ([`Command::output`]).
#[derive(Clone, Debug)]
pub struct Output {
    /// The command's exit status: its own code, or 128+N when a signal N ended it.
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    /// The command's stderr and warden's own messages.
    pub stderr: Vec<u8>,
    /// What the sandbox refused during the run (records with `violation: true`).
    pub violations: Vec<Violation>,
}

impl Output {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    pub fn success(&self) -> bool {
        self.status.success()
    }

    /// The `<sandbox_violations>` block `warden run --annotate-stderr` appends to stderr
    /// (empty when nothing was refused or lost).
    pub fn annotation(&self) -> String {
        annotation_with_losses(&self.violations, lost_events(&self.stderr).as_deref())
    }

    /// stderr followed by the `<sandbox_violations>` block, exactly as
    /// `warden run --annotate-stderr` prints it (stderr decoded lossily as UTF-8): what an
    /// agent's model should see.
    pub fn annotated_stderr(&self) -> String {
        annotate_stderr(&self.stderr, &self.violations)
    }
}

/// A finished command whose output went elsewhere ([`Command::status`], [`Child::wait`]).
#[derive(Clone, Debug)]
pub struct RunStatus {
    pub status: ExitStatus,
    pub violations: Vec<Violation>,
}

impl RunStatus {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    pub fn success(&self) -> bool {
        self.status.success()
    }

    /// The `<sandbox_violations>` block (without lost-event warnings, which are on stderr).
    pub fn annotation(&self) -> String {
        annotation(&self.violations)
    }
}

/// A running sandboxed command ([`Command::spawn`]). The process is `warden run`; signals
/// sent to it are forwarded to the command.
#[derive(Debug)]
pub struct Child {
    inner: std::process::Child,
    records: RecordsFile,
    pub stdin: Option<std::process::ChildStdin>,
    pub stdout: Option<std::process::ChildStdout>,
    pub stderr: Option<std::process::ChildStderr>,
}

impl Child {
    /// warden's process id (the command runs in its own pid namespace).
    pub fn id(&self) -> u32 {
        self.inner.id()
    }

    /// Waits for the command (closing stdin first, as `std` does) and reads its violations.
    /// Exit 125 is [`Error::Warden`].
    pub fn wait(&mut self) -> Result<RunStatus, Error> {
        drop(self.stdin.take());
        let status = self.inner.wait().map_err(Error::Wait)?;
        finish_status(status, &self.records)
    }

    /// [`wait`](Child::wait) without blocking: `None` while the command runs.
    pub fn try_wait(&mut self) -> Result<Option<RunStatus>, Error> {
        match self.inner.try_wait().map_err(Error::Wait)? {
            Some(status) => finish_status(status, &self.records).map(Some),
            None => Ok(None),
        }
    }

    /// Waits, collecting what is left of the piped stdout and stderr.
    pub fn wait_with_output(mut self) -> Result<Output, Error> {
        drop(self.stdin.take());
        let captured = self.stderr.is_some();
        self.inner.stdout = self.stdout.take();
        self.inner.stderr = self.stderr.take();
        let out = self.inner.wait_with_output().map_err(Error::Wait)?;
        finish_output(out, captured, &self.records)
    }

    /// SIGTERM to warden, which forwards it to the command and then tears the sandbox down.
    pub fn terminate(&self) -> Result<(), Error> {
        signal(self.inner.id(), nix::sys::signal::Signal::SIGTERM)
    }

    /// SIGKILL to warden: its janitor still removes everything the sandbox left on the host.
    pub fn kill(&mut self) -> Result<(), Error> {
        self.inner.kill().map_err(Error::Signal)
    }
}

fn signal(pid: u32, sig: nix::sys::signal::Signal) -> Result<(), Error> {
    let pid = i32::try_from(pid).map_err(|e| Error::Signal(io::Error::other(e)))?;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig)
        .map_err(|e| Error::Signal(io::Error::from(e)))
}

/// [`Child`] for tokio ([`Command::spawn_async`]).
#[derive(Debug)]
pub struct AsyncChild {
    inner: tokio::process::Child,
    records: RecordsFile,
    pub stdin: Option<tokio::process::ChildStdin>,
    pub stdout: Option<tokio::process::ChildStdout>,
    pub stderr: Option<tokio::process::ChildStderr>,
}

impl AsyncChild {
    /// warden's process id; `None` once it has been waited for.
    pub fn id(&self) -> Option<u32> {
        self.inner.id()
    }

    pub async fn wait(&mut self) -> Result<RunStatus, Error> {
        drop(self.stdin.take());
        let status = self.inner.wait().await.map_err(Error::Wait)?;
        finish_status(status, &self.records)
    }

    pub fn try_wait(&mut self) -> Result<Option<RunStatus>, Error> {
        match self.inner.try_wait().map_err(Error::Wait)? {
            Some(status) => finish_status(status, &self.records).map(Some),
            None => Ok(None),
        }
    }

    pub async fn wait_with_output(mut self) -> Result<Output, Error> {
        drop(self.stdin.take());
        let captured = self.stderr.is_some();
        self.inner.stdout = self.stdout.take();
        self.inner.stderr = self.stderr.take();
        let out = self.inner.wait_with_output().await.map_err(Error::Wait)?;
        finish_output(out, captured, &self.records)
    }

    /// SIGTERM to warden, which forwards it to the command.
    pub fn terminate(&self) -> Result<(), Error> {
        match self.inner.id() {
            Some(pid) => signal(pid, nix::sys::signal::Signal::SIGTERM),
            None => Ok(()),
        }
    }

    /// SIGKILL to warden, and waits for it.
    pub async fn kill(&mut self) -> Result<(), Error> {
        self.inner.kill().await.map_err(Error::Signal)
    }
}

// ---------------------------------------------------------------------------------------------
// Violation records.

/// One line of `warden run --violations FILE`: something the sandbox refused (or, with
/// `violation: false`, an exec or an allowed proxy request). Mirrors `audit::ViolationRecord`
/// (ebpf/README.md has every field); fields this version does not know are ignored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// RFC 3339, UTC, milliseconds.
    #[serde(default)]
    pub time: String,
    /// `warden-<pid>`: the sandbox's cgroup leaf name.
    #[serde(default)]
    pub sandbox: String,
    /// The operator's labels of the sandbox (`warden run --label NAME=VALUE`), if any.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Where the record came from: `ebpf` (the kernel) or `proxy`.
    #[serde(default)]
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_id: Option<u64>,
    /// Process ids as the host sees them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ppid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
    /// The binary the process last executed, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exe: Option<String>,
    pub kind: Kind,
    /// Whether the sandbox refused something.
    #[serde(default = "yes")]
    pub violation: bool,
    /// The system call or request: `open`, `unlink`, `rename`, `connect`, `socket`, `http`, …
    pub operation: String,
    /// A path, `host:port`, an address or a socket family.
    pub target: String,
    /// The second path of rename/link, a symlink's content, exec's argv, the proxy's stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<Errno>,
    /// The layer that refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<Layer>,
    /// One sentence: why the layer refused, or what happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The policy rule behind the refusal (`filesystem.denyRead: "~/.ssh"`), when one decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Where that rule came from (settings file and layer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<String>,
    /// Identical records coalesced into this one.
    #[serde(default = "one")]
    pub count: u64,
}

fn yes() -> bool {
    true
}

fn one() -> u64 {
    1
}

/// An errno with its name (`EROFS`, 30).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Errno {
    pub name: String,
    pub number: i32,
}

impl Violation {
    /// Every record of a violations file (JSON lines; blank lines skipped), refused or not.
    pub fn parse_lines(text: &str) -> Result<Vec<Violation>, Error> {
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                serde_json::from_str(l).map_err(|source| Error::Record {
                    line: i + 1,
                    source,
                })
            })
            .collect()
    }

    /// The record's line in the `<sandbox_violations>` block:
    /// `file-write open /etc/x (EROFS) [mount] by sh ×2`.
    pub fn summary_line(&self) -> String {
        let mut s = format!(
            "{} {} {}",
            self.kind,
            self.operation,
            printable(&self.target)
        );
        if let Some(e) = &self.errno {
            s.push_str(&format!(" ({})", e.name));
        }
        if let Some(l) = &self.layer {
            s.push_str(&format!(" [{l}]"));
        }
        if let Some(c) = &self.comm {
            s.push_str(&format!(" by {}", printable(c)));
        }
        if self.count > 1 {
            s.push_str(&format!(" ×{}", self.count));
        }
        s
    }

    /// What makes two records the same violation for the block: everything but time and
    /// count (`ViolationRecord::coalesce_key`).
    fn coalesce_key(&self) -> String {
        format!(
            "{}|{}|{}|{}|{}|{:?}|{:?}|{:?}|{:?}|{}",
            self.sandbox,
            self.kind,
            self.operation,
            self.target,
            self.detail.as_deref().unwrap_or(""),
            self.errno.as_ref().map(|e| e.number),
            self.layer.as_ref().map(Layer::as_str),
            self.comm,
            self.pid,
            self.violation
        )
    }
}

macro_rules! name_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal,)* }) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(from = "String", into = "String")]
        pub enum $name {
            $($(#[$vdoc])* $variant,)*
            /// A name this version does not know.
            Other(String),
        }

        impl $name {
            /// The name in records (`file-write`, `mount`, …).
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$variant => $text,)*
                    $name::Other(s) => s,
                }
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                match s.as_str() {
                    $($text => $name::$variant,)*
                    _ => $name::Other(s),
                }
            }
        }

        impl From<$name> for String {
            fn from(v: $name) -> String {
                v.as_str().to_string()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

name_enum! {
    /// What kind of thing was attempted.
    Kind {
        FileRead = "file-read",
        FileWrite = "file-write",
        Exec = "exec",
        Network = "network",
        UnixSocket = "unix-socket",
        Process = "process",
        Mount = "mount",
        Syscall = "syscall",
    }
}

name_enum! {
    /// The layer that refused.
    Layer {
        /// The mount view: the read-only host (EROFS) and denyRead masks.
        Mount = "mount",
        /// Landlock's write rules.
        Landlock = "landlock",
        /// The seccomp filter.
        Seccomp = "seccomp",
        /// warden's network proxy.
        Proxy = "proxy",
        /// BPF LSM programs.
        Lsm = "lsm",
        /// The sandbox's empty network namespace (a direct connection).
        Netns = "netns",
        /// Unix permissions and capabilities.
        Dac = "dac",
        /// warden's cgroup eBPF programs (`allowUnixSockets`).
        Ebpf = "ebpf",
    }
}

/// The `<sandbox_violations>` block for `violations` as `warden run --annotate-stderr` prints
/// it: one line per distinct refusal (coalesced over the run, first seen first, counts added),
/// at most 50 then `... and N more`; empty when nothing was refused. Records with
/// `violation: false` are left out.
pub fn annotation(violations: &[Violation]) -> String {
    annotation_with_losses(violations, None)
}

/// `stderr` followed by the block, as `warden run --annotate-stderr` prints them. A warning
/// about lost audit events that warden printed on `stderr` is repeated in the block, as warden
/// does.
pub fn annotate_stderr(stderr: &[u8], violations: &[Violation]) -> String {
    let mut s = String::from_utf8_lossy(stderr).into_owned();
    s.push_str(&annotation_with_losses(
        violations,
        lost_events(stderr).as_deref(),
    ));
    s
}

fn annotation_with_losses(violations: &[Violation], lost: Option<&str>) -> String {
    let mut kept: Vec<Violation> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut more = 0u64;
    for v in violations.iter().filter(|v| v.violation) {
        match index.get(&v.coalesce_key()).copied() {
            Some(i) => {
                if let Some(k) = kept.get_mut(i) {
                    k.count += v.count;
                }
            }
            None if kept.len() < ANNOTATE_MAX => {
                index.insert(v.coalesce_key(), kept.len());
                kept.push(v.clone());
            }
            None => more += v.count,
        }
    }
    let lines: Vec<String> = kept.iter().map(Violation::summary_line).collect();
    crate::backend::annotation_block(&lines, more, lost)
}

/// warden's warning about lost audit events on stderr (`warden: warning: N audit events lost
/// (…)`), without its prefix; the last one when there are several.
fn lost_events(stderr: &[u8]) -> Option<String> {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter_map(|l| l.strip_prefix("warden: warning: "))
        .rfind(|rest| rest.contains(" audit events lost ("))
        .map(str::to_string)
}

// ---------------------------------------------------------------------------------------------
// The policy without a sandbox.

/// The effective policy of some settings for a working directory, asked without running
/// anything: what `warden check` answers. Layers as for `warden run`: user, project (the
/// working directory's `.warden/settings.json`), the given files in order, managed.
#[derive(Debug)]
pub struct Policy {
    inner: crate::policy::merge::Policy,
}

impl Policy {
    /// Loads `settings` (each a `--settings` file) over the user and project layers, for
    /// `cwd`. Requests the policy leaves to approval answer `RequiresApproval`.
    pub fn load<I, P>(settings: I, cwd: impl AsRef<Path>) -> Result<Policy, Error>
    where
        I: IntoIterator<Item = P>,
        P: AsRef<Path>,
    {
        Policy::from_args(&crate::cli::PolicyArgs {
            settings: settings
                .into_iter()
                .map(|p| p.as_ref().to_path_buf())
                .collect(),
            cwd: Some(cwd.as_ref().to_path_buf()),
            ..Default::default()
        })
    }

    /// Loads the policy as the CLI does from its shared options (also `tmpdir` and
    /// `non_interactive`, under which what would ask is denied).
    pub fn from_args(args: &crate::cli::PolicyArgs) -> Result<Policy, Error> {
        args.load()
            .map(|inner| Policy { inner })
            .map_err(|e| Error::Policy(format!("{e:#}")))
    }

    /// The working directory the policy applies to (absolute).
    pub fn cwd(&self) -> &Path {
        &self.inner.context.cwd
    }

    /// May a sandboxed command read `path`? (`warden check --read`)
    pub fn check_read(&self, path: impl AsRef<Path>) -> Verdict {
        self.inner.check_path(&RealFs, path.as_ref(), Access::Read)
    }

    /// May a sandboxed command write `path`? (`warden check --write`)
    pub fn check_write(&self, path: impl AsRef<Path>) -> Verdict {
        self.inner.check_path(&RealFs, path.as_ref(), Access::Write)
    }

    /// May a sandboxed command reach `target` (`HOST`, `HOST:PORT`, `[IPv6]:PORT`) through
    /// the proxy? An invalid host is denied. (`warden check --domain`)
    pub fn check_domain(&self, target: &str) -> Verdict {
        match crate::policy::domain::parse_target(target) {
            Ok((host, port)) => self.inner.check_domain(&host, port),
            Err(e) => Verdict::deny(ReasonKind::InvalidHost, e.to_string()),
        }
    }

    /// May an agent run this shell line, sandboxed, in the policy's working directory?
    /// Consults the `beforeCommand` hook when one is configured (a blocking child process).
    /// (`warden check --command`)
    pub fn check_command(&self, line: &str) -> CommandGate {
        self.check_command_as(line, true, "default")
    }

    /// [`check_command`](Policy::check_command) for a line the agent asks to run outside the
    /// sandbox (`sandboxed: false`), in agent session `session` (passed to the hook).
    pub fn check_command_as(&self, line: &str, sandboxed: bool, session: &str) -> CommandGate {
        crate::hooks::gate_command(&self.inner, line, self.cwd(), sandboxed, session)
    }

    /// May an agent tool with these declared side effects run? (`warden check --tool`)
    pub fn check_tool<S: AsRef<str>>(&self, name: &str, effects: &[S]) -> ToolVerdict {
        self.inner.check_tool(name, effects)
    }

    /// The policy engine's own type, for everything else (`effective` settings with
    /// provenance, path and domain rules).
    pub fn inner(&self) -> &crate::policy::merge::Policy {
        &self.inner
    }
}

/// `text` safe to print on a line a human or an agent reads: control characters (newlines,
/// escape sequences, C1 controls) and `<`/`>` become `\xNN`, so a record's path or a process
/// name the sandboxed command chose cannot end the `<sandbox_violations>` block early, forge
/// lines after it or drive the terminal.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    // Controls, the block's own `<>`, line separators, and the bidirectional formatting
    // characters that reorder what a terminal shows (U+202E makes `txt.exe` read `exe.txt`).
    let bad = |c: char| {
        c.is_control()
            || matches!(
                c,
                '<' | '>'
                    | '\u{2028}'
                    | '\u{2029}'
                    | '\u{061c}'
                    | '\u{200e}'
                    | '\u{200f}'
                    | '\u{202a}'..='\u{202e}'
                    | '\u{2066}'..='\u{2069}'
            )
    };
    if !text.chars().any(bad) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if bad(c) {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod mod_tests;

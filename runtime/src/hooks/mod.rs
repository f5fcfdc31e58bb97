//! Running the `beforeCommand` hook: the I/O half of [`crate::policy::hook`].
//!
//! The hook is started in its own process group with the request as JSON on stdin; its stdout
//! is the answer. It has `warden.hooks.timeoutSeconds` (default 10 s) to exit and close its
//! output, after which its whole process group is killed. A missing executable, a failure to
//! start, a non-zero exit, a timeout or unreadable output all deny the line (fail closed).
//!
//! [`gate_command`] is the one entry point for callers: the command policy's verdict, the hook
//! consulted when one is configured, and the stricter of the two.

use crate::policy::command::{CommandRequest, Placement};
use crate::policy::decision::{Decision, RuleRef, Verdict};
use crate::policy::hook::{
    clean_reason, combine, parse_answer, HookAnswer, HookConfig, HookInput, HookOutcome, MAX_OUTPUT,
};
use crate::policy::merge::Policy;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde::Serialize;
use std::io::{self, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How often a running hook is polled for its exit.
const POLL: Duration = Duration::from_millis(5);
/// The longest stderr excerpt quoted in a failure.
const STDERR_EXCERPT: usize = 200;

/// Why a hook gave no answer. Every one of these denies the line.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("the setting is empty")]
    Empty,
    #[error("{} does not exist", .0.display())]
    Missing(PathBuf),
    #[error("{} cannot be run: {source}", path.display())]
    Spawn { path: PathBuf, source: io::Error },
    #[error("the request cannot be encoded: {0}")]
    Encode(#[from] serde_json::Error),
    #[error("it did not answer within {} and was killed", seconds(*.0))]
    Timeout(Duration),
    #[error("it exited with {status}{stderr}")]
    Exit { status: String, stderr: String },
    #[error("{0}")]
    Output(String),
    #[error("waiting for it failed: {0}")]
    Wait(io::Error),
}

fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

/// The hook's part in a [`CommandGate`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HookReport {
    /// The executable, as resolved.
    pub path: PathBuf,
    /// The settings entry that named it.
    pub rule: RuleRef,
    pub outcome: HookOutcome,
}

/// The answer to "may the agent run this line?": the command policy and the hook together.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CommandGate {
    /// The final decision: the stricter of the command policy's and the hook's.
    pub verdict: Verdict,
    /// Where the line runs (from the command policy).
    pub placement: Placement,
    /// Each simple command's text, in the order found.
    pub commands: Vec<String>,
    /// The command policy's own verdict, before the hook.
    pub policy: Verdict,
    /// The hook, when one is configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook: Option<HookReport>,
}

/// May an agent run `line` in `cwd`? `sandboxed: false` is the agent's request to run it
/// outside the sandbox (`dangerouslyDisableSandbox`); `session` identifies the agent session
/// for the hook. Runs the `beforeCommand` hook when one is configured and the command policy
/// does not already deny the line; the stricter answer wins, and a failing hook denies.
pub fn gate_command(
    policy: &Policy,
    line: &str,
    cwd: &Path,
    sandboxed: bool,
    session: &str,
) -> CommandGate {
    let mut gate = gate_command_unapproved(policy, line, cwd, sandboxed, session);
    // What would be asked was approved earlier in the session (the same line, to run in the
    // same place): allowed. A denial stays a denial.
    let key = crate::policy::approvals::command_key(line, gate.placement);
    if gate.verdict.decision == Decision::RequiresApproval && policy.approvals.covers_command(&key)
    {
        gate.verdict = Verdict::allow(
            crate::policy::decision::ReasonKind::SessionApproval,
            format!("`{line}` was approved for this session"),
        );
    }
    gate
}

fn gate_command_unapproved(
    policy: &Policy,
    line: &str,
    cwd: &Path,
    sandboxed: bool,
    session: &str,
) -> CommandGate {
    let cv = policy.check_command(&CommandRequest {
        line,
        dangerously_disable_sandbox: !sandboxed,
    });
    let Some(hook) = policy.before_command_hook() else {
        return CommandGate {
            verdict: cv.verdict.clone(),
            placement: cv.placement,
            commands: cv.commands,
            policy: cv.verdict,
            hook: None,
        };
    };
    let outcome = if cv.verdict.decision == Decision::Deny {
        HookOutcome::Skipped {
            why: "the command policy already denies the line".into(),
        }
    } else {
        run_hook(
            &hook,
            &HookInput {
                command: line.to_string(),
                cwd: cwd.to_string_lossy().into_owned(),
                sandboxed,
                session: session.to_string(),
                placement: cv.placement,
            },
        )
    };
    CommandGate {
        verdict: combine(&cv.verdict, &hook, &outcome),
        placement: cv.placement,
        commands: cv.commands,
        policy: cv.verdict,
        hook: Some(HookReport {
            path: hook.path.clone(),
            rule: hook.rule(),
            outcome,
        }),
    }
}

/// Runs the hook once with `input`; every failure becomes [`HookOutcome::Failed`].
pub fn run_hook(hook: &HookConfig, input: &HookInput) -> HookOutcome {
    match ask(hook, input) {
        Ok(answer) => HookOutcome::Answered(answer),
        Err(e) => HookOutcome::Failed {
            error: e.to_string(),
        },
    }
}

/// One stream of the hook, read to its end: at most `MAX_OUTPUT` bytes kept, the rest drained
/// (so the hook never blocks on a full pipe), and whether anything was dropped.
struct Captured {
    stdout: bool,
    bytes: Vec<u8>,
    truncated: bool,
}

fn capture(mut stream: impl Read + Send + 'static, stdout: bool, tx: mpsc::Sender<Captured>) {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let limit = u64::try_from(MAX_OUTPUT).unwrap_or(u64::MAX);
        let _ = (&mut stream).take(limit).read_to_end(&mut bytes);
        let rest = io::copy(&mut stream, &mut io::sink()).unwrap_or(0);
        let _ = tx.send(Captured {
            stdout,
            bytes,
            truncated: rest > 0,
        });
    });
}

/// Kills the hook's whole process group (it leads it: `process_group(0)`).
fn kill_group(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
    let _ = child.kill();
}

fn ask(hook: &HookConfig, input: &HookInput) -> Result<HookAnswer, HookError> {
    if hook.entry.trim().is_empty() {
        return Err(HookError::Empty);
    }
    // A path relative to a relative settings file is relative to warden's own directory.
    let path = std::path::absolute(&hook.path).unwrap_or_else(|_| hook.path.clone());
    let payload = serde_json::to_vec(input)?;

    let mut cmd = Command::new(&path);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let cwd = Path::new(&input.cwd);
    if cwd.is_dir() {
        cmd.current_dir(cwd);
    }
    let mut child = spawn(&mut cmd).map_err(|source| {
        if source.kind() == io::ErrorKind::NotFound && !path.exists() {
            HookError::Missing(path.clone())
        } else {
            HookError::Spawn {
                path: path.clone(),
                source,
            }
        }
    })?;
    let deadline = Instant::now() + hook.timeout;

    // The request is written from its own thread: a hook that never reads stdin must not
    // block warden. Errors (EPIPE from a hook that exits without reading) do not matter.
    if let Some(mut stdin) = child.stdin.take() {
        std::thread::spawn(move || {
            let _ = stdin.write_all(&payload);
        });
    }
    let (tx, rx) = mpsc::channel();
    if let Some(out) = child.stdout.take() {
        capture(out, true, tx.clone());
    }
    if let Some(err) = child.stderr.take() {
        capture(err, false, tx);
    }

    let status = wait_until(&mut child, deadline, hook.timeout)?;

    // The output ends when every process holding the pipes is gone; a background child of
    // the hook that keeps them open is part of the timeout.
    let mut stdout = None;
    let mut stderr = Vec::new();
    for _ in 0..2 {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(100));
        match rx.recv_timeout(left) {
            Ok(c) if c.stdout => stdout = Some(c),
            Ok(c) => stderr = c.bytes,
            Err(_) => {
                kill_group(&mut child);
                return Err(HookError::Timeout(hook.timeout));
            }
        }
    }

    if !status.success() {
        let status = match (status.code(), status.signal()) {
            (Some(code), _) => format!("status {code}"),
            (None, Some(sig)) => format!("signal {sig}"),
            (None, None) => status.to_string(),
        };
        let text = clean_reason(&String::from_utf8_lossy(&stderr));
        let stderr = if text.is_empty() {
            String::new()
        } else {
            let excerpt: String = text.chars().take(STDERR_EXCERPT).collect();
            format!(" ({excerpt})")
        };
        return Err(HookError::Exit { status, stderr });
    }
    let Some(stdout) = stdout else {
        return Err(HookError::Output("its output was lost".into()));
    };
    if stdout.truncated {
        return Err(HookError::Output(format!(
            "it printed more than {MAX_OUTPUT} bytes"
        )));
    }
    parse_answer(&stdout.bytes).map_err(HookError::Output)
}

/// Starts the hook. `ETXTBSY` (the executable is still open for writing somewhere, for a
/// moment, e.g. while it is being installed) is retried briefly before it counts as a failure.
fn spawn(cmd: &mut Command) -> io::Result<Child> {
    let mut tries = 0;
    loop {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 20 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

/// Waits for the hook to exit; at `deadline` kills its process group.
fn wait_until(
    child: &mut Child,
    deadline: Instant,
    timeout: Duration,
) -> Result<ExitStatus, HookError> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) => {
                let now = Instant::now();
                if now >= deadline {
                    // Not reaped yet, so the process group id is still the hook's.
                    kill_group(child);
                    let _ = child.wait();
                    return Err(HookError::Timeout(timeout));
                }
                std::thread::sleep(POLL.min(deadline - now));
            }
            Err(e) => {
                kill_group(child);
                let _ = child.wait();
                return Err(HookError::Wait(e));
            }
        }
    }
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;

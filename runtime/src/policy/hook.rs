//! The `beforeCommand` hook, its pure half: where the executable is, what it is told, how its
//! answer is read and how that answer combines with the command policy's verdict. Running it
//! (a process with a timeout) is `crate::hooks`.
//!
//! The combination rule: the stricter of the two wins (deny > requires approval > allow), so a
//! hook can only tighten the command policy, never relax it; in particular a managed
//! (organization) deny stays a deny whatever the hook answers. A hook that cannot be run, exits
//! non-zero, times out or prints something unreadable denies (hooks fail closed).

use super::command::Placement;
use super::decision::{Decision, Layer, Provenance, ReasonKind, RuleRef, Verdict};
use super::merge::{Effective, Policy};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The settings key naming the hook.
pub const LIST_HOOK: &str = "warden.hooks.beforeCommand";
/// The settings key of the hook's timeout in seconds.
pub const KEY_TIMEOUT: &str = "warden.hooks.timeoutSeconds";
/// How long a hook may take when the settings do not say.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of the hook's stdout that is read; longer output is unreadable (deny).
pub const MAX_OUTPUT: usize = 64 * 1024;
/// The longest reason quoted from a hook, in characters.
const MAX_REASON: usize = 500;

/// The configured hook: the executable and the settings entry that named it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookConfig {
    /// The executable, resolved (relative only if the settings file's own path was relative).
    pub path: PathBuf,
    /// The entry as written.
    pub entry: Arc<str>,
    pub provenance: Provenance,
    pub timeout: Duration,
}

impl HookConfig {
    /// The hook from the merged settings: the highest layer's `warden.hooks.beforeCommand`
    /// (so a managed hook cannot be replaced), `None` when no layer sets one.
    pub fn from_effective(eff: &Effective, cwd: &Path, home: &Path) -> Option<HookConfig> {
        let sourced = eff.scalar(LIST_HOOK)?;
        let entry = sourced.value.as_str()?;
        Some(HookConfig {
            path: resolve_path(entry, &sourced.provenance, cwd, home),
            entry: entry.into(),
            provenance: sourced.provenance.clone(),
            timeout: eff
                .u64(KEY_TIMEOUT)
                .map(Duration::from_secs)
                .unwrap_or(DEFAULT_TIMEOUT),
        })
    }

    /// The settings entry, for a verdict the hook decided.
    pub fn rule(&self) -> RuleRef {
        RuleRef {
            list: Cow::Borrowed(LIST_HOOK),
            entry: self.entry.clone(),
            provenance: self.provenance.clone(),
        }
    }
}

impl Policy {
    /// The configured `beforeCommand` hook, if any.
    pub fn before_command_hook(&self) -> Option<HookConfig> {
        HookConfig::from_effective(&self.effective, &self.context.cwd, &self.context.home)
    }
}

/// Where the hook named `entry` is: `~/…` below `home`, an absolute path as is, a relative path
/// against the directory of the settings file that named it (`provenance.source`), or against
/// `cwd` when no file did (command-line flags, built-in).
pub fn resolve_path(entry: &str, provenance: &Provenance, cwd: &Path, home: &Path) -> PathBuf {
    let joined = if entry == "~" {
        home.to_path_buf()
    } else if let Some(rest) = entry.strip_prefix("~/") {
        home.join(rest)
    } else if Path::new(entry).is_absolute() {
        PathBuf::from(entry)
    } else {
        match provenance.layer {
            Layer::User | Layer::Project | Layer::Cli | Layer::Managed => {
                let file = Path::new(&*provenance.source);
                file.parent().unwrap_or(Path::new("")).join(entry)
            }
            Layer::Default | Layer::Flags => cwd.join(entry),
        }
    };
    // Drop `.` components (`dir/./hook` → `dir/hook`); `..` stays, as the kernel resolves it.
    joined
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

/// What the hook reads on stdin, as one JSON object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HookInput {
    /// The shell line as the agent wrote it.
    pub command: String,
    /// The directory the line would run in.
    pub cwd: String,
    /// Whether the agent asked to run it sandboxed (false: `dangerouslyDisableSandbox`).
    pub sandboxed: bool,
    /// The agent session's id.
    pub session: String,
    /// Where the command policy places the line.
    pub placement: Placement,
}

/// The hook's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HookDecision {
    Allow,
    Deny,
    Ask,
}

impl HookDecision {
    pub fn parse(word: &str) -> Option<HookDecision> {
        match word {
            "allow" => Some(HookDecision::Allow),
            "deny" => Some(HookDecision::Deny),
            "ask" => Some(HookDecision::Ask),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            HookDecision::Allow => "allow",
            HookDecision::Deny => "deny",
            HookDecision::Ask => "ask",
        }
    }

    pub fn decision(self) -> Decision {
        match self {
            HookDecision::Allow => Decision::Allow,
            HookDecision::Deny => Decision::Deny,
            HookDecision::Ask => Decision::RequiresApproval,
        }
    }
}

/// A readable answer: the decision and, if given, the reason (one cleaned line).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HookAnswer {
    pub decision: HookDecision,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What became of asking the hook.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum HookOutcome {
    /// The hook ran and answered.
    Answered(HookAnswer),
    /// The hook could not be run or gave no readable answer: the line is denied.
    Failed { error: String },
    /// The hook was not run (the command policy already denies the line).
    Skipped { why: String },
}

/// Reads the hook's stdout: a JSON object `{"decision": …, "reason": …}` (other keys are
/// ignored) or one bare word, `allow`, `deny` or `ask`, surrounding whitespace ignored.
/// The error says why the output is unreadable.
pub fn parse_answer(stdout: &[u8]) -> Result<HookAnswer, String> {
    #[derive(Deserialize)]
    struct Raw {
        decision: String,
        #[serde(default)]
        reason: Option<String>,
    }
    let text = std::str::from_utf8(stdout).map_err(|_| "its output is not UTF-8".to_string())?;
    let text = text.trim();
    if text.is_empty() {
        return Err("it printed nothing (expected allow, deny or ask)".into());
    }
    if text.starts_with('{') {
        let raw: Raw = serde_json::from_str(text)
            .map_err(|e| format!("its output is not the expected JSON ({e})"))?;
        let decision = HookDecision::parse(&raw.decision).ok_or_else(|| {
            format!(
                "its \"decision\" is {:?}, not allow, deny or ask",
                clean_reason(&raw.decision)
            )
        })?;
        let reason = raw
            .reason
            .map(|r| clean_reason(&r))
            .filter(|r| !r.is_empty());
        return Ok(HookAnswer { decision, reason });
    }
    HookDecision::parse(text)
        .map(|decision| HookAnswer {
            decision,
            reason: None,
        })
        .ok_or_else(|| {
            format!(
                "its output {:?} is neither JSON nor allow, deny or ask",
                clean_reason(text)
            )
        })
}

/// One line of at most [`MAX_REASON`] characters: control characters become spaces, runs of
/// blanks one space.
pub fn clean_reason(text: &str) -> String {
    let spaced: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut out = spaced.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some((cut, _)) = out.char_indices().nth(MAX_REASON) {
        out.truncate(cut);
        out.push('…');
    }
    out
}

/// How strict a decision is: deny > requires approval > allow.
pub fn strictness(d: Decision) -> u8 {
    match d {
        Decision::Allow => 0,
        Decision::RequiresApproval => 1,
        Decision::Deny => 2,
    }
}

/// The final verdict: the stricter of the command policy's verdict and the hook's answer.
/// When the hook is stricter it decides (with its settings entry as the rule); otherwise the
/// policy's verdict stands and its reason notes what the hook answered.
pub fn combine(policy: &Verdict, hook: &HookConfig, outcome: &HookOutcome) -> Verdict {
    let who = format!("the beforeCommand hook {}", hook.path.display());
    match outcome {
        HookOutcome::Skipped { .. } => policy.clone(),
        HookOutcome::Failed { error } => {
            if policy.decision == Decision::Deny {
                let mut v = policy.clone();
                v.reason.push_str(&format!(" ({who} also failed: {error})"));
                return v;
            }
            Verdict::deny(
                ReasonKind::HookFailed,
                format!("{who} failed: {error}; hooks fail closed, so the line is denied"),
            )
            .with_rule(hook.rule())
        }
        HookOutcome::Answered(answer) => {
            let why = answer.reason.as_deref().unwrap_or("it gave no reason");
            let decision = answer.decision.decision();
            if strictness(decision) > strictness(policy.decision) {
                let (kind, what) = match answer.decision {
                    HookDecision::Deny => (ReasonKind::HookDenied, "denied the line"),
                    HookDecision::Ask => (ReasonKind::HookAsk, "asks for approval"),
                    HookDecision::Allow => (ReasonKind::HookAllowed, "allowed the line"),
                };
                Verdict {
                    decision,
                    kind,
                    reason: format!("{who} {what}: {why}"),
                    rule: Some(hook.rule()),
                }
            } else {
                let what = match answer.decision {
                    HookDecision::Allow => "allowed it",
                    HookDecision::Deny => "denied it too",
                    HookDecision::Ask => "asked for approval",
                };
                let mut v = policy.clone();
                v.reason.push_str(&format!(" ({who} {what}: {why})"));
                v
            }
        }
    }
}

#[cfg(test)]
#[path = "hook_tests.rs"]
mod tests;

//! The approval pipeline: whatever needs a human goes through one [`Approvals`], whose
//! [`Approver`] is the programmatic control channel ([`channel`]), the terminal warden kept
//! for itself ([`tty`]), or nobody (non-interactive: denied at once). Answers: allow once (this session), allow always (persisted to the user
//! settings file, [`edit`], and effective at once), deny (this session). A network question
//! that nobody answers within 60 s is denied.
//!
//! The sandbox cannot forge an answer: approvers live outside it (a socket on the host the
//! sandbox's view does not show; see docs/protocol.md).

pub mod channel;
pub mod edit;
pub mod store;
pub mod tty;

use crate::policy::approvals::{once_scope, persist_domain, persist_path, SessionApprovals};
use crate::policy::decision::{ReasonKind, Verdict};
use crate::policy::domain::Host;
use crate::policy::path::Access;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a question waits for an answer before it is denied, unless
/// `warden.approvals.timeoutSeconds` says otherwise.
pub const NETWORK_TIMEOUT: Duration = Duration::from_secs(60);

/// `warden.approvals.timeoutSeconds` (1 s to 1 day), else [`NETWORK_TIMEOUT`].
pub fn timeout(policy: &crate::policy::merge::Policy) -> Duration {
    policy
        .effective
        .u64("warden.approvals.timeoutSeconds")
        .map_or(NETWORK_TIMEOUT, |s| Duration::from_secs(s.clamp(1, 86_400)))
}

/// Where questions go, from the flags and `warden.approvals.mode`: the control channel's
/// socket, if any, and whether anyone is there to ask. The flags win — `--approvals
/// unix:PATH`, then `--non-interactive` — over the setting: `interactive` (the terminal;
/// the default), `deny` (nobody: what would ask is denied at once), `unix:PATH` (the
/// control channel).
pub fn choose(
    policy: &crate::policy::merge::Policy,
    flag: Option<PathBuf>,
    non_interactive: bool,
) -> Result<(Option<PathBuf>, bool), String> {
    if let Some(path) = flag {
        return Ok((Some(path), true));
    }
    if non_interactive {
        return Ok((None, false));
    }
    match policy.effective.str("warden.approvals.mode") {
        None | Some("interactive") => Ok((None, true)),
        Some("deny") => Ok((None, false)),
        Some(spec) if spec.starts_with("unix:") => channel::parse_spec(spec)
            .map(|p| (Some(p), true))
            .map_err(|e| format!("warden.approvals.mode: {e}")),
        Some(other) => Err(format!(
            "warden.approvals.mode {other:?}: expected interactive, deny or unix:PATH"
        )),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RequestKind {
    Network,
    FilesystemRead,
    FilesystemWrite,
    Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Answer {
    AllowOnce,
    AllowAlways,
    /// For a hit on a non-managed `denyRead`/`denyWrite` entry: remove that entry from the
    /// settings file that holds it (offered instead of allow-always).
    RemoveFromDenyList,
    Deny,
}

/// One question, as the control channel sends it (`"type": "permission_request"`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionRequest {
    pub id: u64,
    pub kind: RequestKind,
    /// What is asked for: `host:port`, a path, a command line.
    pub target: String,
    pub reason: String,
    /// The rule that decided, if one did (`network.allowedDomains: "*.npmjs.org"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Where the rule came from, `(organization policy)` for managed settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<String>,
    pub options: Vec<Answer>,
    /// Seconds until the request is denied unanswered.
    pub timeout_seconds: u64,
}

/// Asks a human (or an SDK acting for one).
pub trait Approver: Send + Sync {
    fn ask(&self, request: PermissionRequest) -> Pin<Box<dyn Future<Output = Answer> + Send + '_>>;

    /// Whether anyone is there to answer (false: every question is denied at once).
    fn attended(&self) -> bool {
        true
    }
}

/// Nobody to ask: every question is denied at once.
pub struct NonInteractive;

impl Approver for NonInteractive {
    fn ask(&self, _: PermissionRequest) -> Pin<Box<dyn Future<Output = Answer> + Send + '_>> {
        Box::pin(std::future::ready(Answer::Deny))
    }

    fn attended(&self) -> bool {
        false
    }
}

/// The outcome of a network question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub allowed: bool,
    /// A sentence for the event's reason: who decided and how.
    pub note: String,
}

/// The session's approval state around one [`Approver`].
pub struct Approvals {
    approver: Arc<dyn Approver>,
    session: Arc<SessionApprovals>,
    /// Where allow-always persists (the user settings file).
    user_settings: Option<PathBuf>,
    next_id: AtomicU64,
    denied: Mutex<HashSet<String>>,
    /// One question per host at a time: later requests wait for the first answer.
    asking: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    timeout: Duration,
    /// The session's approvals on disk, when the run belongs to a named session.
    store: Option<store::SessionStore>,
}

/// The outcome of a filesystem question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathOutcome {
    pub answer: Answer,
    pub allowed: bool,
    /// What was approved (the path, or for a new file its directory).
    pub scope: Option<PathBuf>,
    /// A sentence: who decided, what it applies to, what was saved where.
    pub note: String,
}

impl Approvals {
    pub fn new(
        approver: Arc<dyn Approver>,
        session: Arc<SessionApprovals>,
        user_settings: Option<PathBuf>,
    ) -> Approvals {
        Approvals {
            approver,
            session,
            user_settings,
            next_id: AtomicU64::new(1),
            denied: Mutex::new(HashSet::new()),
            asking: Mutex::new(HashMap::new()),
            timeout: NETWORK_TIMEOUT,
            store: None,
        }
    }

    /// Shares approvals with the other processes of a named session: what they approved is
    /// honoured before anyone is asked, and what is approved here is recorded there.
    pub fn with_store(mut self, store: store::SessionStore) -> Approvals {
        self.store = Some(store);
        self
    }

    /// Records an approved command line ([`crate::policy::approvals::command_key`]) for the
    /// session, and in its store; says what happened (for the note).
    pub fn approve_command(&self, key: &str) -> String {
        self.session.approve_command(key);
        self.share(|s| {
            s.commands.insert(key.to_string());
        })
    }

    /// Picks up what other processes of the session approved meanwhile.
    fn refresh(&self) {
        if let Some(store) = &self.store {
            if let Ok(snapshot) = store.load() {
                self.session.merge(&snapshot);
            }
        }
    }

    /// Records a session approval in the store; says what happened (for the note).
    fn share(&self, change: impl FnOnce(&mut crate::policy::approvals::Snapshot)) -> String {
        match &self.store {
            None => String::new(),
            Some(store) => match store.update(change) {
                Ok(()) => format!("; shared with the session ({})", store.file().display()),
                Err(e) => format!("; not shared with the session: {e}"),
            },
        }
    }

    /// Asks whether the sandbox may read or write `path`, which the policy left to approval
    /// (`verdict`). `exists`: whether the path exists now (a new file's directory is what a
    /// write approval covers). Allow once approves for the session; allow always also
    /// persists the settings edit; remove-from-deny-list removes a non-managed deny entry.
    pub async fn path(
        &self,
        access: Access,
        path: &std::path::Path,
        exists: bool,
        verdict: &Verdict,
    ) -> PathOutcome {
        let kind = match access {
            Access::Read => RequestKind::FilesystemRead,
            Access::Write => RequestKind::FilesystemWrite,
        };
        let scope = once_scope(path, access, exists);
        if !self.approver.attended() {
            crate::metrics::count_unanswerable(kind);
            return PathOutcome {
                answer: Answer::Deny,
                allowed: false,
                scope: None,
                note: format!(
                    "{}: denied: no approver (non-interactive): {}",
                    path.display(),
                    verdict.reason
                ),
            };
        }
        let deny_hit = matches!(verdict.kind, ReasonKind::DenyRead | ReasonKind::DenyWrite);
        let persist = persist_path(verdict, path, access);
        let mut options = vec![Answer::AllowOnce];
        match (&persist, deny_hit) {
            (Ok(_), true) => options.push(Answer::RemoveFromDenyList),
            (Ok(_), false) => options.push(Answer::AllowAlways),
            (Err(_), _) => {}
        }
        options.push(Answer::Deny);
        let mut reason = verdict.reason.clone();
        if access == Access::Write {
            // The view of a running sandbox is fixed when it starts (see docs/policy.md).
            reason.push_str(
                "; an approval applies to the next command of this session, not to one running now",
            );
        }
        let request = PermissionRequest {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            kind,
            target: scope.display().to_string(),
            reason,
            rule: verdict
                .rule
                .as_ref()
                .map(|r| format!("{}: {:?}", r.list, &*r.entry)),
            provenance: verdict.rule.as_ref().map(|r| r.provenance.to_string()),
            options: options.clone(),
            timeout_seconds: self.timeout.as_secs(),
        };
        let answer = tokio::time::timeout(self.timeout, self.approver.ask(request))
            .await
            .ok()
            // An answer that was not offered (a confused or hostile client) is a denial.
            .filter(|a| options.contains(a));
        crate::metrics::count_approval(kind, answer);
        let shown = scope.display().to_string();
        let approve = |scope: &std::path::Path| {
            self.session.approve_path(access, scope);
            self.share(|s| {
                s.paths.insert((access, scope.to_path_buf()));
            })
        };
        match (answer, persist) {
            (Some(Answer::AllowOnce), _) => {
                let shared = approve(&scope);
                PathOutcome {
                    answer: Answer::AllowOnce,
                    allowed: true,
                    note: format!("{shown} approved by the user for this session{shared}"),
                    scope: Some(scope),
                }
            }
            (Some(a @ (Answer::AllowAlways | Answer::RemoveFromDenyList)), Ok(edit)) => {
                let shared = approve(&scope);
                let persisted = self.persist(&edit);
                PathOutcome {
                    answer: a,
                    allowed: true,
                    note: format!("{shown} approved by the user, always ({persisted}){shared}"),
                    scope: Some(scope),
                }
            }
            (None, _) => PathOutcome {
                answer: Answer::Deny,
                allowed: false,
                note: format!(
                    "{shown}: nobody answered within {} s (or the answer was not offered): denied",
                    self.timeout.as_secs()
                ),
                scope: None,
            },
            _ => PathOutcome {
                answer: Answer::Deny,
                allowed: false,
                note: format!("{shown} denied by the user"),
                scope: None,
            },
        }
    }

    /// For tests: a shorter network timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Approvals {
        self.timeout = timeout;
        self
    }

    /// Asks whether the sandbox may reach `host:port`, which the policy left to approval.
    pub async fn network(&self, host: &Host, port: u16, verdict: &Verdict) -> Outcome {
        let key = host.to_string();
        let gate = {
            let mut asking = self.asking.lock().unwrap_or_else(|p| p.into_inner());
            asking.entry(key.clone()).or_default().clone()
        };
        let _turn = gate.lock().await;
        // Answered while this request waited its turn (here, or by another process of the
        // session)?
        self.refresh();
        if self.session.covers_domain(host) {
            return Outcome {
                allowed: true,
                note: format!("{key} was approved for this session"),
            };
        }
        if self.is_denied(&key) {
            return Outcome {
                allowed: false,
                note: format!("{key} was denied for this session"),
            };
        }
        let request = PermissionRequest {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            kind: RequestKind::Network,
            target: format!("{key}:{port}"),
            reason: verdict.reason.clone(),
            rule: verdict
                .rule
                .as_ref()
                .map(|r| format!("{}: {:?}", r.list, &*r.entry)),
            provenance: verdict.rule.as_ref().map(|r| r.provenance.to_string()),
            options: vec![Answer::AllowOnce, Answer::AllowAlways, Answer::Deny],
            timeout_seconds: self.timeout.as_secs(),
        };
        let answer = tokio::time::timeout(self.timeout, self.approver.ask(request))
            .await
            .ok();
        crate::metrics::count_approval(RequestKind::Network, answer);
        match answer {
            Some(Answer::AllowOnce) => {
                self.session.approve_domain(host);
                let shared = self.share(|s| {
                    s.domains.insert(key.clone());
                });
                Outcome {
                    allowed: true,
                    note: format!("{key} approved by the user for this session{shared}"),
                }
            }
            Some(Answer::AllowAlways) => {
                self.session.approve_domain(host);
                let shared = self.share(|s| {
                    s.domains.insert(key.clone());
                });
                let persisted = self.persist(&persist_domain(host));
                Outcome {
                    allowed: true,
                    note: format!("{key} approved by the user, always ({persisted}){shared}"),
                }
            }
            Some(Answer::Deny | Answer::RemoveFromDenyList) => {
                self.deny(key.clone());
                Outcome {
                    allowed: false,
                    note: format!("{key} denied by the user"),
                }
            }
            None => {
                self.deny(key.clone());
                Outcome {
                    allowed: false,
                    note: format!(
                        "{key}: nobody answered within {} s: denied",
                        self.timeout.as_secs()
                    ),
                }
            }
        }
    }

    fn is_denied(&self, key: &str) -> bool {
        self.denied.lock().map(|d| d.contains(key)).unwrap_or(true)
    }

    fn deny(&self, key: String) {
        if let Ok(mut d) = self.denied.lock() {
            d.insert(key);
        }
    }

    /// Applies an allow-always edit to the user settings file; says what happened.
    fn persist(&self, edit: &crate::policy::approvals::SettingsEdit) -> String {
        let Some(path) = &self.user_settings else {
            return "not saved: no user settings file".to_string();
        };
        match edit::apply(path, edit) {
            Ok(()) => format!("saved to {}", path.display()),
            Err(e) => format!("not saved: {e}"),
        }
    }
}

#[cfg(test)]
#[path = "approve_tests.rs"]
mod tests;

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
pub mod tty;

use crate::policy::approvals::{persist_domain, SessionApprovals};
use crate::policy::decision::Verdict;
use crate::policy::domain::Host;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a network request waits for an answer before it is denied.
pub const NETWORK_TIMEOUT: Duration = Duration::from_secs(60);

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
}

/// Nobody to ask: every question is denied at once.
pub struct NonInteractive;

impl Approver for NonInteractive {
    fn ask(&self, _: PermissionRequest) -> Pin<Box<dyn Future<Output = Answer> + Send + '_>> {
        Box::pin(std::future::ready(Answer::Deny))
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
        // Answered while this request waited its turn?
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
                Outcome {
                    allowed: true,
                    note: format!("{key} approved by the user for this session"),
                }
            }
            Some(Answer::AllowAlways) => {
                self.session.approve_domain(host);
                let persisted = self.persist(&persist_domain(host));
                Outcome {
                    allowed: true,
                    note: format!("{key} approved by the user, always ({persisted})"),
                }
            }
            Some(Answer::Deny) => {
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

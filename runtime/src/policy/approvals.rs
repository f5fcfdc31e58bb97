//! Session approvals and the allow-always persistence rules.
//!
//! A session approval is consulted by later decisions of the same session (the prompt,
//! `warden check` and the running sandbox share one set). Allow-always turns a decision into a
//! settings edit: a write outside the writable set appends its parent directory to the user
//! layer's `allowWrite`; a `denyWrite`/`denyRead` hit removes that entry from the user or project
//! layer that holds it; a domain appends its persist pattern to the user's `allowedDomains`.
//! Managed entries are never edited.

use super::decision::{Layer, ReasonKind, Verdict};
use super::domain::{persist_pattern, Host};
use super::path::Access;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::RwLock;

#[derive(Debug, Default)]
pub struct SessionApprovals {
    paths: RwLock<HashSet<(Access, PathBuf)>>,
    domains: RwLock<HashSet<String>>,
    /// Command lines, keyed by [`command_key`] (the line and where it runs).
    commands: RwLock<HashSet<String>>,
}

/// The session key of an approved command line: where it runs, a tab, the line.
pub fn command_key(line: &str, placement: super::command::Placement) -> String {
    let place = match placement {
        super::command::Placement::Sandboxed => "sandboxed",
        super::command::Placement::Unsandboxed => "unsandboxed",
    };
    format!("{place}\t{line}")
}

impl SessionApprovals {
    /// Approves `path` and everything below it for `access`.
    pub fn approve_path(&self, access: Access, path: &Path) {
        if let Ok(mut set) = self.paths.write() {
            set.insert((access, path.to_path_buf()));
        }
    }

    /// Whether `path` or one of its ancestors was approved for `access`.
    pub fn covers_path(&self, access: Access, path: &Path) -> bool {
        let Ok(set) = self.paths.read() else {
            return false;
        };
        if set.is_empty() {
            return false;
        }
        path.ancestors()
            .any(|a| set.contains(&(access, a.to_path_buf())))
    }

    /// Approves a host (canonical form) for the session.
    pub fn approve_domain(&self, host: &Host) {
        if let Ok(mut set) = self.domains.write() {
            set.insert(host.to_string());
        }
    }

    /// Whether any host was approved.
    pub fn has_domains(&self) -> bool {
        self.domains.read().map(|s| !s.is_empty()).unwrap_or(false)
    }

    pub fn covers_domain(&self, host: &Host) -> bool {
        self.domains
            .read()
            .map(|s| !s.is_empty() && s.contains(&host.to_string()))
            .unwrap_or(false)
    }

    /// Approves a command line (a [`command_key`]) for the session.
    pub fn approve_command(&self, key: &str) {
        if let Ok(mut set) = self.commands.write() {
            set.insert(key.to_string());
        }
    }

    pub fn covers_command(&self, key: &str) -> bool {
        self.commands
            .read()
            .map(|s| !s.is_empty() && s.contains(key))
            .unwrap_or(false)
    }

    /// Everything approved so far, in a stable order (what the session store keeps).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            paths: self
                .paths
                .read()
                .map(|s| s.iter().cloned().collect())
                .unwrap_or_default(),
            domains: self
                .domains
                .read()
                .map(|s| s.iter().cloned().collect())
                .unwrap_or_default(),
            commands: self
                .commands
                .read()
                .map(|s| s.iter().cloned().collect())
                .unwrap_or_default(),
        }
    }

    /// Adds what `snapshot` approves (approvals are only ever added within a session).
    pub fn merge(&self, snapshot: &Snapshot) {
        if let Ok(mut set) = self.paths.write() {
            set.extend(snapshot.paths.iter().cloned());
        }
        if let Ok(mut set) = self.domains.write() {
            set.extend(snapshot.domains.iter().cloned());
        }
        if let Ok(mut set) = self.commands.write() {
            set.extend(snapshot.commands.iter().cloned());
        }
    }

    /// The approved paths for `access`.
    pub fn paths(&self, access: Access) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self
            .paths
            .read()
            .map(|s| {
                s.iter()
                    .filter(|(a, _)| *a == access)
                    .map(|(_, p)| p.clone())
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }
}

/// A session's approvals as stored on disk (`approve::store`), shared by the prompt,
/// `warden check` and the sandboxes of that session.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    #[serde(default)]
    pub paths: BTreeSet<(Access, PathBuf)>,
    #[serde(default)]
    pub domains: BTreeSet<String>,
    /// Command lines approved to run ([`command_key`]: where, a tab, the line).
    #[serde(default)]
    pub commands: BTreeSet<String>,
}

/// What "allow once" approves for a path the policy left to approval: the path itself (and
/// everything below it) when it exists; for a write to a path that does not exist yet, its
/// parent directory, where it is to be created (the scope "allow always" persists too).
pub fn once_scope(path: &Path, access: Access, exists: bool) -> PathBuf {
    match (access, exists) {
        (Access::Write, false) => path.parent().unwrap_or(path).to_path_buf(),
        _ => path.to_path_buf(),
    }
}

/// A change to one settings layer that allow-always asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum SettingsEdit {
    Append {
        layer: Layer,
        key: String,
        value: String,
    },
    Remove {
        layer: Layer,
        /// The settings file holding the entry.
        file: String,
        key: String,
        value: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotPersistable {
    #[error("the decision was not a request for approval")]
    NotApprovable,
    #[error("`{0}` is organization policy (managed settings) and cannot be changed")]
    Managed(String),
    #[error("`{entry}` comes from {source_desc}, which allow-always does not edit")]
    NotAUserFile { entry: String, source_desc: String },
}

/// The settings edit that "allow always" makes for a path decision.
pub fn persist_path(
    verdict: &Verdict,
    path: &Path,
    access: Access,
) -> Result<SettingsEdit, NotPersistable> {
    if verdict.decision != super::decision::Decision::RequiresApproval {
        return Err(NotPersistable::NotApprovable);
    }
    match (verdict.kind, access) {
        (ReasonKind::OutsideWritable, Access::Write) => {
            let parent = path.parent().unwrap_or(path);
            Ok(SettingsEdit::Append {
                layer: Layer::User,
                key: "filesystem.allowWrite".to_string(),
                value: parent.display().to_string(),
            })
        }
        (ReasonKind::DenyWrite | ReasonKind::DenyRead, _) => {
            let rule = verdict.rule.as_ref().ok_or(NotPersistable::NotApprovable)?;
            match rule.provenance.layer {
                Layer::Managed => Err(NotPersistable::Managed(rule.entry.to_string())),
                Layer::User | Layer::Project => Ok(SettingsEdit::Remove {
                    layer: rule.provenance.layer,
                    file: rule.provenance.source.to_string(),
                    key: rule.list.to_string(),
                    value: rule.entry.to_string(),
                }),
                _ => Err(NotPersistable::NotAUserFile {
                    entry: rule.entry.to_string(),
                    source_desc: rule.provenance.to_string(),
                }),
            }
        }
        _ => Err(NotPersistable::NotApprovable),
    }
}

/// The settings edit that "allow always" makes for a domain.
pub fn persist_domain(host: &Host) -> SettingsEdit {
    SettingsEdit::Append {
        layer: Layer::User,
        key: "network.allowedDomains".to_string(),
        value: persist_pattern(host),
    }
}

#[cfg(test)]
#[path = "approvals_tests.rs"]
mod tests;

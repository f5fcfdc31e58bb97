//! Cursor's sandbox policy (`sandbox.json`), its security levels, and its mapping onto warden
//! settings.
//!
//! Cursor writes `{"type": "WORKSPACE_READWRITE", "network_access": false, …}`; missing fields
//! take their defaults (a read-write workspace without network, no extra paths, flags off) and
//! unknown fields are ignored, since Cursor may add some.
//!
//! Security levels, lower is more restrictive: read-only workspace 0, read-only with network
//! 5, read-write without network 10, read-write with network 20, no sandbox 30.

use super::settings::{FilesystemSettings, NetworkSettings, SandboxSettings, WardenSettings};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CursorPolicyType {
    /// No sandbox at all.
    InsecureNone,
    /// The workspace is writable.
    #[default]
    WorkspaceReadwrite,
    /// Nothing is writable.
    WorkspaceReadonly,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CursorSandboxPolicy {
    #[serde(rename = "type")]
    pub policy_type: CursorPolicyType,
    pub network_access: bool,
    /// Writable besides the workspace.
    pub additional_readwrite_paths: Vec<String>,
    /// Readable but never writable.
    pub additional_readonly_paths: Vec<String>,
    /// `.git` is not writable.
    pub block_git_writes: bool,
    /// The temporary directory is not writable.
    pub disable_tmp_write: bool,
}

impl CursorSandboxPolicy {
    /// 0 (read-only) < 5 (read-only + network) < 10 (no network) < 20 (network) < 30
    /// (unsandboxed).
    pub fn security_level(&self) -> u8 {
        match (self.policy_type, self.network_access) {
            (CursorPolicyType::WorkspaceReadonly, false) => 0,
            (CursorPolicyType::WorkspaceReadonly, true) => 5,
            (CursorPolicyType::WorkspaceReadwrite, false) => 10,
            (CursorPolicyType::WorkspaceReadwrite, true) => 20,
            (CursorPolicyType::InsecureNone, _) => 30,
        }
    }

    /// The warden settings block that enforces this policy.
    ///
    /// - `INSECURE_NONE` → `enabled: false`, nothing else.
    /// - `WORKSPACE_READWRITE` → the working directory stays writable (warden's default);
    ///   `additional_readwrite_paths` → `filesystem.allowWrite`.
    /// - `WORKSPACE_READONLY` → `warden.readOnly: true`; `additional_readwrite_paths` are *not*
    ///   mapped, since read-only means nothing is writable.
    /// - Both sandboxed types: `additional_readonly_paths` → `filesystem.denyWrite` (reads are
    ///   allowed everywhere in warden, so they stay readable), `block_git_writes` → `.git` in
    ///   `denyWrite`, `disable_tmp_write` → `warden.disableTmpWrite: true`;
    ///   `network_access: false` → `network.allowedDomains: []` with `strictAllowlist: true`,
    ///   `true` → `warden.unrestrictedNetwork: true`.
    pub fn to_settings(&self) -> SandboxSettings {
        if self.policy_type == CursorPolicyType::InsecureNone {
            return SandboxSettings {
                enabled: Some(false),
                ..SandboxSettings::default()
            };
        }
        let read_only = self.policy_type == CursorPolicyType::WorkspaceReadonly;

        let allow_write = if read_only {
            Vec::new()
        } else {
            dedup(self.additional_readwrite_paths.iter().cloned())
        };
        let mut deny_write: Vec<String> = self.additional_readonly_paths.clone();
        if self.block_git_writes {
            deny_write.push(".git".to_string());
        }
        let deny_write = dedup(deny_write.into_iter());
        let filesystem =
            (!allow_write.is_empty() || !deny_write.is_empty()).then(|| FilesystemSettings {
                allow_write: (!allow_write.is_empty()).then_some(allow_write),
                deny_write: (!deny_write.is_empty()).then_some(deny_write),
                ..FilesystemSettings::default()
            });

        let network = (!self.network_access).then(|| NetworkSettings {
            allowed_domains: Some(Vec::new()),
            strict_allowlist: Some(true),
            ..NetworkSettings::default()
        });

        let warden = WardenSettings {
            read_only: read_only.then_some(true),
            disable_tmp_write: self.disable_tmp_write.then_some(true),
            unrestricted_network: self.network_access.then_some(true),
            ..WardenSettings::default()
        };

        SandboxSettings {
            enabled: Some(true),
            network,
            filesystem,
            warden: Some(warden),
            ..SandboxSettings::default()
        }
    }
}

/// The more restrictive of two policies. The one with the lower [`security_level`] wins
/// (type and network access); on equal levels each field takes its stricter value: the
/// intersection of `additional_readwrite_paths`, AND of `network_access`. In every case the
/// result also takes the union of `additional_readonly_paths` and the OR of
/// `block_git_writes` and `disable_tmp_write`, which only ever restrict further. Path lists
/// come out sorted and free of duplicates, so the merge is commutative.
///
/// [`security_level`]: CursorSandboxPolicy::security_level
pub fn merge_restrictive(a: &CursorSandboxPolicy, b: &CursorSandboxPolicy) -> CursorSandboxPolicy {
    let (la, lb) = (a.security_level(), b.security_level());
    let (policy_type, network_access, readwrite) = if la < lb {
        (
            a.policy_type,
            a.network_access,
            dedup(a.additional_readwrite_paths.iter().cloned()),
        )
    } else if lb < la {
        (
            b.policy_type,
            b.network_access,
            dedup(b.additional_readwrite_paths.iter().cloned()),
        )
    } else {
        // Equal levels have the same type (and the same network access unless unsandboxed).
        let both = a
            .additional_readwrite_paths
            .iter()
            .filter(|p| b.additional_readwrite_paths.contains(p))
            .cloned();
        (
            a.policy_type,
            a.network_access && b.network_access,
            dedup(both),
        )
    };
    CursorSandboxPolicy {
        policy_type,
        network_access,
        additional_readwrite_paths: readwrite,
        additional_readonly_paths: dedup(
            a.additional_readonly_paths
                .iter()
                .chain(&b.additional_readonly_paths)
                .cloned(),
        ),
        block_git_writes: a.block_git_writes || b.block_git_writes,
        disable_tmp_write: a.disable_tmp_write || b.disable_tmp_write,
    }
}

fn dedup(paths: impl Iterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = paths.collect();
    v.sort();
    v.dedup();
    v
}

#[cfg(test)]
#[path = "cursor_tests.rs"]
mod tests;

//! What a project's own settings (`.warden/settings.json` in the working directory) may set
//! before the user trusts the project. A repository is written by whoever wrote it — cloning
//! one must not hand it the sandbox's keys: a project layer could otherwise name a
//! `beforeCommand` hook (run on the host, unsandboxed), point `violationsFile` at
//! `~/.bashrc` (records carry command lines the sandboxed command chose), allow writes
//! anywhere, release `.git/config`, turn auditing off or route traffic through a proxy of its
//! own. Untrusted, a project layer may narrow the sandbox and add `allowedDomains` (what
//! project settings exist for, as in Claude Code and srt) and writable paths inside the
//! project; anything else makes warden refuse to run (exit 125) and say how to trust the
//! project: its directory (or a parent) in `warden.trustedProjects` of the user, `--settings`
//! or managed settings — never of the project's own file. Pure: no I/O.

use super::decision::Layer;
use super::merge::LayerInput;
use serde_json::Value;
use std::path::{Component, Path, PathBuf};

/// The settings key listing trusted project directories.
pub const TRUSTED_PROJECTS: &str = "warden.trustedProjects";

/// Whether `project` (the working directory, absolute) is trusted by a layer other than the
/// project's own: it equals or lies below an entry of `warden.trustedProjects` (`~/…`
/// against `home`; relative entries are ignored).
pub fn is_trusted(layers: &[LayerInput], project: &Path, home: &Path) -> bool {
    layers
        .iter()
        .filter(|l| l.provenance.layer != Layer::Project)
        .filter_map(|l| l.settings.warden.as_ref())
        .filter_map(|w| w.trusted_projects.as_ref())
        .flatten()
        .any(|entry| {
            let dir = if entry == "~" {
                home.to_path_buf()
            } else if let Some(rest) = entry.strip_prefix("~/") {
                home.join(rest)
            } else {
                PathBuf::from(entry)
            };
            dir.is_absolute() && normalise(&dir).is_some_and(|d| project.starts_with(d))
        })
}

/// The keys (with the offending entry, if a list) an untrusted project layer sets that it
/// may not. `settings` is the layer as JSON (the sandbox block).
pub fn refused_keys(settings: &Value, project: &Path) -> Vec<String> {
    let mut out = Vec::new();
    walk("", settings, project, &mut out);
    out
}

fn walk(path: &str, value: &Value, project: &Path, out: &mut Vec<String>) {
    match value {
        Value::Null => {}
        Value::Object(map) if !is_leaf_map(path) => {
            for (k, v) in map {
                let sub = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                walk(&sub, v, project, out);
            }
        }
        _ => {
            if let Some(why) = refusal(path, value, project) {
                out.push(why);
            }
        }
    }
}

/// Keys whose value is a map of entries rather than more settings.
fn is_leaf_map(path: &str) -> bool {
    matches!(
        path,
        "ignoreViolations"
            | "network.deniedDomainReasons"
            | "warden.limits.rlimits"
            | "network.tlsTerminate"
            | "network.mitmProxy"
    )
}

/// Why `key` = `value` from an untrusted project is refused, if it is.
fn refusal(key: &str, value: &Value, project: &Path) -> Option<String> {
    let narrowing = matches!(
        key,
        "filesystem.denyRead"
            | "filesystem.denyWrite"
            | "network.deniedDomains"
            | "network.deniedDomainReasons"
            | "network.allowedDomains"
            | "warden.env.deny"
            | "warden.commands.block"
            | "warden.tools.deny"
    );
    if narrowing {
        return None;
    }
    // Switches that only tighten when true.
    let tightening_when_true = matches!(
        key,
        "warden.readOnly"
            | "warden.disableTmpWrite"
            | "network.strictAllowlist"
            | "warden.network.denyPrivateAddresses"
            | "warden.audit.required"
            | "warden.audit.enforce"
    );
    if tightening_when_true && value.as_bool() == Some(true) {
        return None;
    }
    if key == "failIfUnavailable" && value.as_bool() == Some(true) {
        return None;
    }
    if key == "filesystem.allowWrite" {
        let outside: Vec<&str> = value
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|e| !inside(project, e))
            .collect();
        return (!outside.is_empty()).then(|| {
            format!(
                "`filesystem.allowWrite` outside the project ({})",
                outside.join(", ")
            )
        });
    }
    Some(format!("`{key}`"))
}

/// Whether the allowWrite entry `entry` (relative to the project, or absolute) names the
/// project or something below it, lexically (`..` resolved; symlinks are the path engine's
/// to refuse).
fn inside(project: &Path, entry: &str) -> bool {
    if entry.starts_with('~') {
        return false;
    }
    let joined = project.join(entry);
    normalise(&joined).is_some_and(|p| p.starts_with(project))
}

/// `path` with `.` and `..` resolved lexically; `None` if `..` climbs above the root.
fn normalise(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Some(out)
}

#[cfg(test)]
#[path = "trust_tests.rs"]
mod tests;

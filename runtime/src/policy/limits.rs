//! Resource limits (`warden.limits`): which rlimits a command gets, by name, and which cgroup
//! limits the policy asks for. Both backends read them from here, so a misspelt rlimit is the
//! same error on Linux and macOS.

use super::merge::Policy;

/// The rlimits `warden.limits.rlimits` may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rlimit {
    Nofile,
    Nproc,
    Core,
    Fsize,
    As,
    Cpu,
    Stack,
}

impl Rlimit {
    /// The names, in the order the settings document them.
    pub const NAMES: [&'static str; 7] = ["nofile", "nproc", "core", "fsize", "as", "cpu", "stack"];

    pub fn from_name(name: &str) -> Option<Rlimit> {
        Some(match name {
            "nofile" => Rlimit::Nofile,
            "nproc" => Rlimit::Nproc,
            "core" => Rlimit::Core,
            "fsize" => Rlimit::Fsize,
            "as" => Rlimit::As,
            "cpu" => Rlimit::Cpu,
            "stack" => Rlimit::Stack,
            _ => return None,
        })
    }
}

/// The error for an rlimit name outside [`Rlimit::NAMES`].
pub fn unknown_rlimit(name: &str) -> String {
    format!(
        "unknown rlimit `{name}` in warden.limits.rlimits (known: {})",
        Rlimit::NAMES.join(", ")
    )
}

/// `warden.limits.rlimits` as (rlimit, value) pairs, soft and hard alike.
pub fn rlimits(policy: &Policy) -> Result<Vec<(Rlimit, u64)>, String> {
    let Some(map) = policy.effective.maps.get("warden.limits.rlimits") else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (name, v) in map {
        let value = v
            .value
            .as_u64()
            .ok_or_else(|| format!("warden.limits.rlimits.{name}: expected a number"))?;
        out.push((
            Rlimit::from_name(name).ok_or_else(|| unknown_rlimit(name))?,
            value,
        ));
    }
    Ok(out)
}

/// The cgroup limits the policy sets, as (setting key, value as written to the limit file).
pub fn cgroup_limits(policy: &Policy) -> Vec<(&'static str, String)> {
    let e = &policy.effective;
    let mut out = Vec::new();
    if let Some(n) = e.u64("warden.limits.pidsMax") {
        out.push(("warden.limits.pidsMax", n.to_string()));
    }
    if let Some(n) = e.u64("warden.limits.memoryMax") {
        out.push(("warden.limits.memoryMax", n.to_string()));
    }
    if let Some(s) = e.str("warden.limits.cpuMax") {
        out.push(("warden.limits.cpuMax", s.to_string()));
    }
    out
}

/// A policy with `limits` as warden's limits and `failIfUnavailable` as given (tests of both
/// backends).
#[cfg(test)]
pub(crate) fn test_policy_with(
    limits: crate::policy::settings::LimitsSettings,
    fail_if_unavailable: Option<bool>,
) -> Policy {
    use crate::policy::settings::{SandboxSettings, WardenSettings};
    crate::policy::merge::test_policy(SandboxSettings {
        fail_if_unavailable,
        warden: Some(WardenSettings {
            limits: Some(limits),
            ..Default::default()
        }),
        ..Default::default()
    })
    .expect("policy")
}

#[cfg(test)]
#[path = "limits_tests.rs"]
mod tests;

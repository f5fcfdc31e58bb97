//! Tool policy (Droid-style default deny): an agent tool may run only if every side effect it
//! declares is one warden enforces. Reading and writing files, the network and running
//! processes all happen inside the sandbox, under the path rules, the filtering proxy and the
//! command gate; `external-service` (MCP servers, connectors: anything that leaves through a
//! channel warden cannot filter) is enforced by nothing, so it is denied unless the tool is
//! listed in `warden.tools.allowExternal`. [`ToolRules::decide`] goes through these steps:
//!
//! 1. An empty tool name → deny (`tool-denied`).
//! 2. A name matching `warden.tools.deny` → deny (`tool-denied`), whatever it declares.
//! 3. No declared effect → deny (`tool-no-effects`): nothing declared, nothing enforceable.
//! 4. Each effect in the order declared: an unknown one → deny (`tool-unknown-effect`);
//!    `external-service` without a matching `warden.tools.allowExternal` entry → deny
//!    (`tool-external-service`).
//! 5. Otherwise → allow (`tool-allowed`).
//!
//! Denials here are never approvable: there is nothing to approve that warden could enforce.
//! Patterns are globs over the whole name (`mcp__github__*`), case-sensitive.

use super::decision::{ReasonKind, Rule, Verdict};
use super::merge::{Effective, PolicyError};
use globset::{Glob, GlobMatcher};
use serde::Serialize;

pub const LIST_ALLOW_EXTERNAL: &str = "warden.tools.allowExternal";
pub const LIST_DENY: &str = "warden.tools.deny";

/// A side effect a tool declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Effect {
    FilesystemRead,
    FilesystemWrite,
    Network,
    Process,
    ExternalService,
}

impl Effect {
    pub const ALL: [Effect; 5] = [
        Effect::FilesystemRead,
        Effect::FilesystemWrite,
        Effect::Network,
        Effect::Process,
        Effect::ExternalService,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Effect::FilesystemRead => "filesystem-read",
            Effect::FilesystemWrite => "filesystem-write",
            Effect::Network => "network",
            Effect::Process => "process",
            Effect::ExternalService => "external-service",
        }
    }

    /// An effect by its name, ASCII case ignored, surrounding blanks ignored.
    pub fn parse(name: &str) -> Option<Effect> {
        let name = name.trim();
        Effect::ALL
            .into_iter()
            .find(|e| e.name().eq_ignore_ascii_case(name))
    }

    /// What enforces the effect (a short id and a description); `None` if nothing does.
    pub fn handler(self) -> Option<(&'static str, &'static str)> {
        match self {
            Effect::FilesystemRead => Some((
                "path-rules",
                "the sandbox's read rules (filesystem.denyRead)",
            )),
            Effect::FilesystemWrite => Some((
                "path-rules",
                "the sandbox's write rules (working directory, TMPDIR, filesystem.allowWrite)",
            )),
            Effect::Network => Some((
                "network-proxy",
                "warden's filtering proxy (network.allowedDomains)",
            )),
            Effect::Process => Some((
                "sandbox",
                "the sandbox and the command gate (warden check --command)",
            )),
            Effect::ExternalService => None,
        }
    }
}

/// The tool settings, merged across layers (lists are unions).
#[derive(Clone, Debug, Default)]
pub struct ToolRules {
    /// `warden.tools.allowExternal`.
    pub allow_external: Vec<Rule<GlobMatcher>>,
    /// `warden.tools.deny`.
    pub deny: Vec<Rule<GlobMatcher>>,
}

/// One declared effect and what enforces it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EffectCheck {
    /// The effect as declared.
    pub effect: String,
    /// What enforces it (`path-rules`, `network-proxy`, `sandbox`, or
    /// `warden.tools.allowExternal` for an allowed external service).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handler: Option<&'static str>,
    pub enforceable: bool,
}

/// The tool gate's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ToolVerdict {
    pub verdict: Verdict,
    /// Each declared effect, in order (up to the one that denied).
    pub effects: Vec<EffectCheck>,
    /// The effect that nothing enforces, when one denied the tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unenforceable: Option<String>,
}

impl ToolRules {
    /// The typed rules; an entry that is not a valid glob is an error naming it.
    pub fn from_effective(eff: &Effective) -> Result<ToolRules, PolicyError> {
        let list = |key: &str| -> Result<Vec<Rule<GlobMatcher>>, PolicyError> {
            eff.strings(key)
                .into_iter()
                .map(|r| {
                    let error = |message: String| PolicyError::Entry {
                        key: key.to_string(),
                        entry: r.text.to_string(),
                        provenance: r.provenance.clone(),
                        message,
                    };
                    if r.text.trim().is_empty() {
                        return Err(error("an empty tool pattern".into()));
                    }
                    let glob = Glob::new(&r.text).map_err(|e| error(e.kind().to_string()))?;
                    Ok(Rule {
                        pattern: glob.compile_matcher(),
                        text: r.text,
                        provenance: r.provenance,
                    })
                })
                .collect()
        };
        Ok(ToolRules {
            allow_external: list(LIST_ALLOW_EXTERNAL)?,
            deny: list(LIST_DENY)?,
        })
    }

    /// May the tool `name`, declaring `effects`, run? See the module documentation.
    pub fn decide<S: AsRef<str>>(&self, name: &str, effects: &[S]) -> ToolVerdict {
        let done = |verdict: Verdict, effects: Vec<EffectCheck>, bad: Option<String>| ToolVerdict {
            verdict,
            effects,
            unenforceable: bad,
        };
        if name.trim().is_empty() {
            return done(
                Verdict::deny(ReasonKind::ToolDenied, "the tool has no name"),
                Vec::new(),
                None,
            );
        }
        if let Some(rule) = self.deny.iter().find(|r| r.pattern.is_match(name)) {
            let v = Verdict::deny(
                ReasonKind::ToolDenied,
                format!("the tool `{name}` matches the denied tool `{}`", rule.text),
            )
            .with_rule(rule.to_ref(LIST_DENY));
            return done(v, Vec::new(), None);
        }
        let declared: Vec<&str> = effects
            .iter()
            .map(|e| e.as_ref().trim())
            .filter(|e| !e.is_empty())
            .collect();
        if declared.is_empty() {
            return done(
                Verdict::deny(
                    ReasonKind::ToolNoEffects,
                    format!(
                        "the tool `{name}` declares no side effects, so nothing about it is \
                         enforceable (declare them with --effects)"
                    ),
                ),
                Vec::new(),
                None,
            );
        }

        let mut checks = Vec::new();
        let mut external_rule = None;
        for text in declared {
            let Some(effect) = Effect::parse(text) else {
                checks.push(EffectCheck {
                    effect: text.to_string(),
                    handler: None,
                    enforceable: false,
                });
                let v = Verdict::deny(
                    ReasonKind::ToolUnknownEffect,
                    format!(
                        "the tool `{name}` declares the side effect `{text}`, which warden does \
                         not know, so nothing enforces it (known: {})",
                        Effect::ALL.map(Effect::name).join(", ")
                    ),
                );
                return done(v, checks, Some(text.to_string()));
            };
            if let Some((id, _)) = effect.handler() {
                checks.push(EffectCheck {
                    effect: text.to_string(),
                    handler: Some(id),
                    enforceable: true,
                });
                continue;
            }
            match self
                .allow_external
                .iter()
                .find(|r| r.pattern.is_match(name))
            {
                Some(rule) => {
                    checks.push(EffectCheck {
                        effect: text.to_string(),
                        handler: Some(LIST_ALLOW_EXTERNAL),
                        enforceable: true,
                    });
                    external_rule.get_or_insert(rule);
                }
                None => {
                    checks.push(EffectCheck {
                        effect: text.to_string(),
                        handler: None,
                        enforceable: false,
                    });
                    let v = Verdict::deny(
                        ReasonKind::ToolExternalService,
                        format!(
                            "the tool `{name}` declares `external-service`: it reaches a \
                             service through a channel warden cannot filter, and no \
                             warden.tools.allowExternal entry matches it"
                        ),
                    );
                    return done(v, checks, Some(text.to_string()));
                }
            }
        }

        let mut handled: Vec<String> = Vec::new();
        for c in &checks {
            let desc = Effect::parse(&c.effect)
                .and_then(Effect::handler)
                .map(|(_, d)| d.to_string());
            let desc = match (desc, external_rule) {
                (Some(d), _) => d,
                (None, Some(rule)) => {
                    format!("allowed by warden.tools.allowExternal `{}`", rule.text)
                }
                (None, None) => continue,
            };
            let item = format!("{} ({desc})", c.effect);
            if !handled.contains(&item) {
                handled.push(item);
            }
        }
        let mut verdict = Verdict::allow(
            ReasonKind::ToolAllowed,
            format!(
                "every side effect of the tool `{name}` is enforced: {}",
                handled.join("; ")
            ),
        );
        if let Some(rule) = external_rule {
            verdict = verdict.with_rule(rule.to_ref(LIST_ALLOW_EXTERNAL));
        }
        done(verdict, checks, None)
    }
}

#[cfg(test)]
#[path = "tool_tests.rs"]
mod tests;

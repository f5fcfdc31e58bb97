//! Layering: user < project < each `--settings` < flags < managed. One generic merge over the
//! settings' JSON shape keeps the provenance of every value: scalars go to the highest layer
//! that sets them (so a managed value is never overridden), lists are the union of all layers
//! (so no layer removes a managed deny), map entries merge key by key. [`Policy::build`] then
//! turns the merged settings into typed, precomputed rules.

use super::approvals::SessionApprovals;
use super::command::CommandRules;
use super::decision::{Layer, Provenance, Rule};
use super::domain::{DomainPattern, DomainRules, ListKind};
use super::fsview::FsView;
use super::mandatory::Mandatory;
use super::path::{PathPattern, PathRules, WritableRoot};
use super::settings::{AutoRunMode, Mode, SandboxSettings};
use super::tool::ToolRules;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One loaded layer.
#[derive(Clone, Debug)]
pub struct LayerInput {
    pub provenance: Provenance,
    pub settings: SandboxSettings,
}

/// A value with the layer that set it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sourced<T> {
    pub value: T,
    pub provenance: Provenance,
}

/// Settings keys whose objects are maps of user-chosen keys, not nested settings.
const MAP_KEYS: &[&str] = &[
    "network.deniedDomainReasons",
    "warden.limits.rlimits",
    "ignoreViolations",
];
/// Settings keys kept whole as opaque values.
const OPAQUE_KEYS: &[&str] = &["network.tlsTerminate", "network.mitmProxy"];

/// The merged settings, every value with its provenance. Keys are dotted paths relative to the
/// sandbox block (`network.allowedDomains`); map entries are `path` → key → value.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Effective {
    pub scalars: BTreeMap<String, Sourced<Value>>,
    pub lists: BTreeMap<String, Vec<Sourced<Value>>>,
    pub maps: BTreeMap<String, BTreeMap<String, Sourced<Value>>>,
    /// ignoreViolations: command pattern → paths (unioned across layers).
    pub map_lists: BTreeMap<String, BTreeMap<String, Vec<Sourced<Value>>>>,
    /// The layers that were merged, lowest first.
    pub layers: Vec<Provenance>,
}

impl Effective {
    pub fn merge(layers: &[LayerInput]) -> Effective {
        let mut sorted: Vec<&LayerInput> = layers.iter().collect();
        sorted.sort_by_key(|l| l.provenance.rank());
        let mut eff = Effective::default();
        for layer in sorted {
            eff.layers.push(layer.provenance.clone());
            let value = serde_json::to_value(&layer.settings).unwrap_or(Value::Null);
            eff.absorb("", &value, &layer.provenance);
        }
        eff
    }

    fn absorb(&mut self, path: &str, value: &Value, prov: &Provenance) {
        let sourced = |v: &Value| Sourced {
            value: v.clone(),
            provenance: prov.clone(),
        };
        match value {
            Value::Object(map) if path == "ignoreViolations" => {
                for (k, v) in map {
                    let entry = self
                        .map_lists
                        .entry(path.to_string())
                        .or_default()
                        .entry(k.clone())
                        .or_default();
                    union_extend(entry, v.as_array().into_iter().flatten(), prov);
                }
            }
            Value::Object(map) if MAP_KEYS.contains(&path) => {
                let m = self.maps.entry(path.to_string()).or_default();
                for (k, v) in map {
                    m.insert(k.clone(), sourced(v));
                }
            }
            Value::Object(map) if !OPAQUE_KEYS.contains(&path) => {
                for (k, v) in map {
                    let sub = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    self.absorb(&sub, v, prov);
                }
            }
            Value::Array(items) => {
                let list = self.lists.entry(path.to_string()).or_default();
                union_extend(list, items.iter(), prov);
            }
            Value::Null => {}
            other => {
                self.scalars.insert(path.to_string(), sourced(other));
            }
        }
    }

    pub fn scalar(&self, key: &str) -> Option<&Sourced<Value>> {
        self.scalars.get(key)
    }

    pub fn bool(&self, key: &str) -> Option<bool> {
        self.scalar(key).and_then(|s| s.value.as_bool())
    }

    pub fn u64(&self, key: &str) -> Option<u64> {
        self.scalar(key).and_then(|s| s.value.as_u64())
    }

    pub fn str(&self, key: &str) -> Option<&str> {
        self.scalar(key).and_then(|s| s.value.as_str())
    }

    /// The string entries of a list with their provenance.
    pub fn strings(&self, key: &str) -> Vec<Rule<String>> {
        self.lists
            .get(key)
            .into_iter()
            .flatten()
            .filter_map(|s| {
                s.value.as_str().map(|v| Rule {
                    pattern: v.to_string(),
                    text: v.into(),
                    provenance: s.provenance.clone(),
                })
            })
            .collect()
    }

    /// Whether any layer set the list at all (an empty `allowedDomains` still counts).
    pub fn has_list(&self, key: &str) -> bool {
        self.lists.contains_key(key)
    }
}

/// Adds each of `items` unless an equal value is there; an equal value from a higher layer
/// takes over the provenance (a managed duplicate stays marked as organization policy).
/// Linear: equal values are found through their JSON text (a list of tens of thousands of
/// entries, compared pairwise, took seconds).
fn union_extend<'a>(
    list: &mut Vec<Sourced<Value>>,
    items: impl Iterator<Item = &'a Value>,
    prov: &Provenance,
) {
    let mut index: std::collections::HashMap<String, usize> = list
        .iter()
        .enumerate()
        .map(|(i, s)| (s.value.to_string(), i))
        .collect();
    for item in items {
        match index.get(&item.to_string()).copied() {
            Some(i) => {
                if let Some(existing) = list.get_mut(i) {
                    if prov.rank() >= existing.provenance.rank() {
                        existing.provenance = prov.clone();
                    }
                }
            }
            None => {
                index.insert(item.to_string(), list.len());
                list.push(Sourced {
                    value: item.clone(),
                    provenance: prov.clone(),
                });
            }
        }
    }
}

/// Where the policy applies.
#[derive(Clone, Debug)]
pub struct Context {
    pub cwd: PathBuf,
    pub home: PathBuf,
    /// The sandbox's private TMPDIR, if it has one.
    pub tmpdir: Option<PathBuf>,
    /// Whether something (a prompt, a control channel) can answer approval requests.
    pub approver_attached: bool,
    /// Configuration protected by absolute path: warden's settings files and the user's git
    /// configuration directory (the CLI fills it from where it found the layers).
    pub protected: Vec<super::mandatory::ConfigPath>,
}

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("`{key}` entry {entry:?} from {provenance}: {message}")]
    Entry {
        key: String,
        entry: String,
        provenance: Provenance,
        message: String,
    },
    #[error("working directory {0} must be an absolute path")]
    Cwd(PathBuf),
}

/// The effective policy: typed rules with provenance, and the session's approvals.
#[derive(Clone, Debug)]
pub struct Policy {
    pub effective: Effective,
    pub context: Context,
    pub paths: PathRules,
    pub domains: DomainRules,
    pub commands: CommandRules,
    pub unix_sockets: Vec<Rule<PathBuf>>,
    pub env_deny: Vec<Rule<String>>,
    /// `warden.tools`: which agent tools may run.
    pub tools: ToolRules,
    pub mode: Mode,
    pub approvals: Arc<SessionApprovals>,
}

impl Policy {
    pub fn build(
        layers: &[LayerInput],
        context: Context,
        fs: &dyn FsView,
    ) -> Result<Policy, PolicyError> {
        let effective = Effective::merge(layers);
        Self::from_effective(effective, context, fs)
    }

    pub fn from_effective(
        effective: Effective,
        context: Context,
        fs: &dyn FsView,
    ) -> Result<Policy, PolicyError> {
        if !context.cwd.is_absolute() {
            return Err(PolicyError::Cwd(context.cwd.clone()));
        }
        let eff = &effective;
        let expand = |key: &str| -> Result<Vec<Rule<PathPattern>>, PolicyError> {
            eff.strings(key)
                .into_iter()
                .map(|r| {
                    let pattern = PathPattern::parse(&r.text, &context.cwd, &context.home, fs)
                        .map_err(|message| PolicyError::Entry {
                            key: key.to_string(),
                            entry: r.text.to_string(),
                            provenance: r.provenance.clone(),
                            message,
                        })?;
                    Ok(Rule {
                        pattern,
                        text: r.text,
                        provenance: r.provenance,
                    })
                })
                .collect()
        };

        let cwd_real = super::fsview::resolve(fs, Path::new("/"), &context.cwd)
            .unwrap_or_else(|_| context.cwd.clone());
        let mut writable = vec![WritableRoot {
            list: "working directory",
            rule: Rule {
                pattern: PathPattern::literal(context.cwd.clone(), cwd_real.clone()),
                text: context.cwd.to_string_lossy().into(),
                provenance: Provenance::builtin(),
            },
            escapes: None,
        }];
        let disable_tmp = eff.bool("warden.disableTmpWrite").unwrap_or(false);
        if let (Some(tmp), false) = (&context.tmpdir, disable_tmp) {
            let real = super::fsview::resolve(fs, Path::new("/"), tmp).unwrap_or(tmp.clone());
            writable.push(WritableRoot {
                list: "TMPDIR",
                rule: Rule {
                    pattern: PathPattern::literal(tmp.clone(), real),
                    text: tmp.to_string_lossy().into(),
                    provenance: Provenance::builtin(),
                },
                escapes: None,
            });
        }
        for rule in expand("filesystem.allowWrite")? {
            let escapes = match &rule.pattern {
                PathPattern::Literal {
                    lexical,
                    resolved: Some(real),
                } if super::fsview::escapes_entry(fs, lexical, real) => Some(real.clone()),
                _ => None,
            };
            writable.push(WritableRoot {
                list: "filesystem.allowWrite",
                rule,
                escapes,
            });
        }
        let read_only = eff
            .scalar("warden.readOnly")
            .filter(|s| s.value.as_bool() == Some(true))
            .map(|s| s.provenance.clone());
        let mut mandatory = Mandatory::discover(
            fs,
            &cwd_real,
            Some(&context.home),
            eff.bool("filesystem.allowGitConfig").unwrap_or(false),
            protected_with_hook(fs, eff, &context),
        );
        // Bare repositories (and git dirs not named `.git`) a writable root is or lies in:
        // their hooks and config are protected like a `.git`'s.
        for w in &writable {
            if let PathPattern::Literal { lexical, resolved } = &w.rule.pattern {
                for root in [Some(lexical), resolved.as_ref()].into_iter().flatten() {
                    for g in super::mandatory::enclosing_git_dirs(fs, root) {
                        if !mandatory.extra_git_dirs.contains(&g) {
                            mandatory.extra_git_dirs.push(g);
                        }
                    }
                }
            }
        }
        let paths = PathRules {
            cwd: context.cwd.clone(),
            writable,
            deny_read: expand("filesystem.denyRead")?,
            allow_read: expand("filesystem.allowRead")?,
            deny_write: expand("filesystem.denyWrite")?,
            mandatory,
            read_only,
            disabled: eff.bool("filesystem.disabled").unwrap_or(false),
        };

        let domain_list = |key: &str,
                           kind: ListKind|
         -> Result<Vec<Rule<DomainPattern>>, PolicyError> {
            eff.strings(key)
                .into_iter()
                .map(|r| {
                    let pattern =
                        DomainPattern::parse(&r.text, kind).map_err(|e| PolicyError::Entry {
                            key: key.to_string(),
                            entry: r.text.to_string(),
                            provenance: r.provenance.clone(),
                            message: e.to_string(),
                        })?;
                    Ok(Rule {
                        pattern,
                        text: r.text,
                        provenance: r.provenance,
                    })
                })
                .collect()
        };
        let denied_reasons = eff
            .maps
            .get("network.deniedDomainReasons")
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.value.as_str().map(|s| (k.clone(), s.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let domains = DomainRules {
            denied: domain_list("network.deniedDomains", ListKind::Deny)?,
            allowed: domain_list("network.allowedDomains", ListKind::Allow)?,
            denied_reasons,
            strict_allowlist: eff.bool("network.strictAllowlist").unwrap_or(false),
            unrestricted: eff.bool("warden.unrestrictedNetwork").unwrap_or(false),
        };

        let auto_run = eff
            .str("warden.commands.autoRun")
            .and_then(|s| serde_json::from_value::<AutoRunMode>(Value::String(s.into())).ok());
        let commands = CommandRules {
            sandbox_enabled: eff.bool("enabled").unwrap_or(true),
            allow_unsandboxed: eff.bool("allowUnsandboxedCommands").unwrap_or(false),
            auto_allow_if_sandboxed: eff.bool("autoAllowBashIfSandboxed").unwrap_or(true),
            excluded: eff.strings("excludedCommands"),
            auto_run,
            allow: eff.strings("warden.commands.allow"),
            block: eff.strings("warden.commands.block"),
        };

        let unix_sockets = eff
            .strings("network.allowUnixSockets")
            .into_iter()
            .map(|r| Rule {
                pattern: super::path::expand_path(&r.text, &context.cwd, &context.home),
                text: r.text,
                provenance: r.provenance,
            })
            .collect();
        let mode = eff
            .str("mode")
            .and_then(|s| serde_json::from_value::<Mode>(Value::String(s.into())).ok())
            .unwrap_or(Mode::PerCommand);

        let tools = ToolRules::from_effective(eff)?;

        Ok(Policy {
            env_deny: eff.strings("warden.env.deny"),
            tools,
            paths,
            domains,
            commands,
            unix_sockets,
            mode,
            approvals: Arc::new(SessionApprovals::default()),
            effective,
            context,
        })
    }

    /// Whether commands run sandboxed at all (`sandbox.enabled`, default true).
    pub fn sandbox_enabled(&self) -> bool {
        self.effective.bool("enabled").unwrap_or(true)
    }

    /// Whether the sandbox gets a proxy (every backend asks here): something can be allowed —
    /// an `allowedDomains` entry, an external proxy port, a host the session approved, or,
    /// with someone to ask (`approver`, and `network.strictAllowlist` off), any host — and
    /// not everything is denied (`--no-network` denies `*`).
    pub fn wants_proxy(&self, approver: bool) -> bool {
        let e = &self.effective;
        let allowed = !e.strings("network.allowedDomains").is_empty()
            || e.u64("network.httpProxyPort").is_some()
            || e.u64("network.socksProxyPort").is_some()
            || self.approvals.has_domains();
        let all_denied = e
            .strings("network.deniedDomains")
            .iter()
            .any(|r| &*r.pattern == "*");
        let askable = approver
            && self.context.approver_attached
            && !e.bool("network.strictAllowlist").unwrap_or(false);
        (allowed || askable) && !all_denied
    }

    /// Refuse to run when isolation cannot be established (`failIfUnavailable`, default true).
    pub fn fail_if_unavailable(&self) -> bool {
        self.effective.bool("failIfUnavailable").unwrap_or(true)
    }
}

/// Convenience for tests and the CLI: a layer from settings.
pub fn layer(layer: Layer, order: u16, source: &str, settings: SandboxSettings) -> LayerInput {
    LayerInput {
        provenance: Provenance::new(layer, order, source),
        settings,
    }
}

/// A policy from one user-layer settings block, cwd `/w`, home `/h`, on an empty in-memory
/// filesystem: the real construction path, for tests of the typed rules.
/// The configuration protected by path, plus the `beforeCommand` hook's executable: warden
/// runs it on the host, unsandboxed, so a sandbox that could rewrite it (a hook kept in the
/// project) would run code outside. As named and, through symlinks, as resolved.
fn protected_with_hook(
    fs: &dyn FsView,
    eff: &Effective,
    context: &Context,
) -> Vec<super::mandatory::ConfigPath> {
    let mut out = context.protected.clone();
    if let Some(hook) = super::hook::HookConfig::from_effective(eff, &context.cwd, &context.home) {
        let named = if hook.path.is_absolute() {
            hook.path
        } else {
            context.cwd.join(hook.path)
        };
        let real = super::fsview::resolve(fs, Path::new("/"), &named).unwrap_or(named.clone());
        for path in [named, real] {
            if !out.iter().any(|c| c.path == path) {
                out.push(super::mandatory::ConfigPath {
                    path,
                    dir: false,
                    what: "beforeCommand hook",
                });
            }
        }
    }
    out
}

#[cfg(test)]
pub(crate) fn test_policy(settings: SandboxSettings) -> Result<Policy, PolicyError> {
    let ctx = Context {
        cwd: "/w".into(),
        home: "/h".into(),
        tmpdir: None,
        approver_attached: false,
        protected: Vec::new(),
    };
    Policy::build(
        &[layer(Layer::User, 0, "u.json", settings)],
        ctx,
        &super::fsview::MemFs::new(),
    )
}

#[cfg(test)]
#[path = "merge_tests.rs"]
mod tests;

impl Policy {
    /// May the sandbox read/write `path`? Session approvals apply.
    pub fn check_path(
        &self,
        fs: &dyn FsView,
        path: &Path,
        access: super::path::Access,
    ) -> super::decision::Verdict {
        self.paths.decide(fs, path, access, Some(&self.approvals))
    }

    /// May the sandbox reach `host` (on `port`)? Session approvals apply.
    pub fn check_domain(
        &self,
        host: &super::domain::Host,
        port: Option<u16>,
    ) -> super::decision::Verdict {
        let v = self
            .domains
            .decide_host(host, port, self.context.approver_attached);
        // What would be asked if someone were attached is allowed when the session approved
        // it already (also for a run with nobody to ask: the session's next sandbox).
        let approvable = |v: &super::decision::Verdict| {
            v.decision == super::decision::Decision::RequiresApproval
                || (v.decision == super::decision::Decision::Deny
                    && !self.context.approver_attached
                    && self.domains.decide_host(host, port, true).decision
                        == super::decision::Decision::RequiresApproval)
        };
        if self.approvals.covers_domain(host) && approvable(&v) {
            return super::decision::Verdict::allow(
                super::decision::ReasonKind::SessionApproval,
                format!("{host} was approved for this session"),
            );
        }
        v
    }

    /// May an agent run this shell line, and where?
    pub fn check_command(
        &self,
        req: &super::command::CommandRequest<'_>,
    ) -> super::command::CommandVerdict {
        self.commands.decide(req)
    }

    /// May an agent tool declaring these side effects run? Never requires approval.
    pub fn check_tool<S: AsRef<str>>(&self, name: &str, effects: &[S]) -> super::tool::ToolVerdict {
        self.tools.decide(name, effects)
    }
}

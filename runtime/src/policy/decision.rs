//! The one verdict type every decision (path, domain, command) returns, and the provenance
//! that ties a rule to the settings file and layer it came from.

use serde::Serialize;
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// Settings layers, lowest precedence first. `Ord` follows precedence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layer {
    /// Built into warden (mandatory protections, defaults).
    Default,
    /// `~/.config/warden/settings.json`.
    User,
    /// `.warden/settings.json` in the working directory.
    Project,
    /// A `--settings FILE` given on the command line (in order).
    Cli,
    /// Command-line flags such as `--allow-write` or `--allow-domain`.
    Flags,
    /// `/etc/warden/managed-settings.json`: the organization's policy.
    Managed,
}

impl Layer {
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Default => "default",
            Layer::User => "user",
            Layer::Project => "project",
            Layer::Cli => "cli",
            Layer::Flags => "flags",
            Layer::Managed => "managed",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a rule or a scalar value came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Provenance {
    pub layer: Layer,
    /// Position among layers of the same kind (the n-th `--settings` file); later wins.
    #[serde(skip)]
    pub order: u16,
    /// The settings file, or a description such as `built-in` or `--allow-write`.
    /// Shared, so attaching provenance to a verdict does not allocate.
    pub source: Arc<str>,
}

impl Provenance {
    pub fn builtin() -> Self {
        Provenance {
            layer: Layer::Default,
            order: 0,
            source: Arc::from("built-in"),
        }
    }

    pub fn new(layer: Layer, order: u16, source: impl AsRef<str>) -> Self {
        Provenance {
            layer,
            order,
            source: Arc::from(source.as_ref()),
        }
    }

    /// Precedence rank: a higher rank wins over a lower one.
    pub fn rank(&self) -> (Layer, u16) {
        (self.layer, self.order)
    }

    pub fn is_managed(&self) -> bool {
        self.layer == Layer::Managed
    }
}

impl fmt::Display for Provenance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.layer {
            Layer::Managed => write!(f, "{} (organization policy)", self.source),
            Layer::Default => f.write_str("built-in"),
            layer => write!(f, "{} ({} settings)", self.source, layer),
        }
    }
}

/// A rule (one entry of one list) with the text the user wrote and where it came from.
#[derive(Clone, Debug)]
pub struct Rule<T> {
    pub pattern: T,
    /// The entry as written in the settings file.
    pub text: Arc<str>,
    pub provenance: Provenance,
}

/// The three outcomes of every decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    Allow,
    Deny,
    RequiresApproval,
}

impl Decision {
    /// Exit code of `warden check`: 0 allow, 1 deny, 2 requires approval.
    pub fn exit_code(self) -> i32 {
        match self {
            Decision::Allow => 0,
            Decision::Deny => 1,
            Decision::RequiresApproval => 2,
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::RequiresApproval => "requires-approval",
        })
    }
}

/// Why a decision came out as it did, in machine-readable form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReasonKind {
    // paths
    ReadAllowed,
    AllowRead,
    DenyRead,
    Writable,
    OutsideWritable,
    DenyWrite,
    Mandatory,
    ReadOnlyMode,
    Traversal,
    SymlinkEscape,
    InvalidPath,
    SessionApproval,
    FilesystemDisabled,
    // domains
    DomainDenied,
    DomainAllowed,
    DomainNotAllowed,
    DomainAsk,
    InvalidHost,
    NetworkUnrestricted,
    // commands
    CommandAllowed,
    CommandBlocked,
    CommandAsk,
    CommandUnparsable,
    CommandProtected,
    CommandExcluded,
    CommandUnsandboxed,
    SandboxDisabled,
    // the beforeCommand hook
    HookAllowed,
    HookDenied,
    HookAsk,
    HookFailed,
    // tools
    ToolAllowed,
    ToolDenied,
    ToolNoEffects,
    ToolUnknownEffect,
    ToolExternalService,
}

/// A reference to the rule that decided.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RuleRef {
    /// The settings key of the list, e.g. `filesystem.denyRead`.
    pub list: Cow<'static, str>,
    /// The entry as written.
    pub entry: Arc<str>,
    pub provenance: Provenance,
}

impl<T> Rule<T> {
    pub fn to_ref(&self, list: &'static str) -> RuleRef {
        RuleRef {
            list: Cow::Borrowed(list),
            entry: self.text.clone(),
            provenance: self.provenance.clone(),
        }
    }
}

/// A decision with its reason. `hard` denials are never approvable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub decision: Decision,
    pub kind: ReasonKind,
    /// One human-readable sentence.
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<RuleRef>,
}

impl Verdict {
    pub fn allow(kind: ReasonKind, reason: impl Into<String>) -> Self {
        Verdict {
            decision: Decision::Allow,
            kind,
            reason: reason.into(),
            rule: None,
        }
    }

    pub fn deny(kind: ReasonKind, reason: impl Into<String>) -> Self {
        Verdict {
            decision: Decision::Deny,
            kind,
            reason: reason.into(),
            rule: None,
        }
    }

    pub fn ask(kind: ReasonKind, reason: impl Into<String>) -> Self {
        Verdict {
            decision: Decision::RequiresApproval,
            kind,
            reason: reason.into(),
            rule: None,
        }
    }

    pub fn with_rule(mut self, rule: RuleRef) -> Self {
        self.rule = Some(rule);
        self
    }

    pub fn is_allowed(&self) -> bool {
        self.decision == Decision::Allow
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.decision, self.reason)?;
        if let Some(rule) = &self.rule {
            write!(
                f,
                " [{} \"{}\" from {}]",
                rule.list, rule.entry, rule.provenance
            )?;
        }
        Ok(())
    }
}

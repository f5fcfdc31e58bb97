//! Path decisions for reads and writes.
//!
//! - Reads are allowed unless under `denyRead`; `allowRead` re-allows a subpath, but only
//!   against a deny from the same or a lower layer (a user cannot re-open a managed deny).
//! - Writes are denied unless under the working directory, the sandbox's TMPDIR or
//!   `allowWrite`; `denyWrite` beats `allowWrite`; mandatory protections beat everything.
//! - Hard denials, never approvable: read-only mode, a `..` traversal that leaves every
//!   writable root, a path whose symlinks lead out of the writable root it appears to be in,
//!   a NUL byte or a symlink loop, mandatory protections and managed deny entries.
//! - Soft (RequiresApproval): a write outside the writable set, a non-managed `denyWrite` or
//!   `denyRead` hit. Session approvals turn these into Allow.
//!
//! Every rule is checked against both the path as written (normalised lexically) and its real
//! target (symlinks followed through the [`FsView`]); a deny on either wins.

use super::approvals::SessionApprovals;
use super::decision::{Provenance, ReasonKind, Rule, RuleRef, Verdict};
use super::fsview::{has_dotdot, is_under, lexical, lexical_cow, resolve, FsView};
use super::mandatory::Mandatory;
use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    Read,
    Write,
}

/// A path rule: a directory or file (covering everything below it), or a glob.
#[derive(Clone, Debug)]
pub enum PathPattern {
    Literal {
        /// As written, made absolute and normalised.
        lexical: PathBuf,
        /// With symlinks resolved; `None` when it equals `lexical`.
        resolved: Option<PathBuf>,
    },
    Glob(GlobMatcher),
}

/// `~` → home, `~/x` → home/x, relative → against `cwd`; normalised lexically.
pub fn expand_path(text: &str, cwd: &Path, home: &Path) -> PathBuf {
    let p = if text == "~" {
        home.to_path_buf()
    } else if let Some(rest) = text.strip_prefix("~/") {
        home.join(rest)
    } else {
        PathBuf::from(text)
    };
    lexical(cwd, &p)
}

impl PathPattern {
    pub fn literal(lexical: PathBuf, resolved: PathBuf) -> Self {
        let resolved = (resolved != lexical).then_some(resolved);
        PathPattern::Literal { lexical, resolved }
    }

    /// Parses a settings entry. Globs (`*`, `?`, `[`) match a path or any of its ancestors.
    pub fn parse(text: &str, cwd: &Path, home: &Path, fs: &dyn FsView) -> Result<Self, String> {
        if text.is_empty() {
            return Err("empty path".to_string());
        }
        if text.contains('\0') {
            return Err("path contains a NUL byte".to_string());
        }
        if text.starts_with('~') && text != "~" && !text.starts_with("~/") {
            return Err("`~user` paths are not supported; write the absolute path".to_string());
        }
        if text.contains(['*', '?', '[']) {
            let base = if let Some(rest) = text.strip_prefix("~/") {
                format!("{}/{rest}", home.display())
            } else if text.starts_with('/') {
                text.to_string()
            } else {
                format!("{}/{text}", cwd.display())
            };
            let glob = GlobBuilder::new(&base)
                .literal_separator(true)
                .build()
                .map_err(|e| format!("invalid glob: {e}"))?;
            return Ok(PathPattern::Glob(glob.compile_matcher()));
        }
        let lex = expand_path(text, cwd, home);
        let resolved = resolve(fs, cwd, &lex).map_err(|e| e.to_string())?;
        Ok(PathPattern::literal(lex, resolved))
    }

    /// Whether `path` (absolute, normalised) is this entry or below it.
    #[inline]
    pub fn covers(&self, path: &[u8]) -> bool {
        match self {
            PathPattern::Literal { lexical, resolved } => {
                is_under(path, lexical.as_os_str().as_bytes())
                    || resolved
                        .as_ref()
                        .is_some_and(|r| is_under(path, r.as_os_str().as_bytes()))
            }
            PathPattern::Glob(m) => {
                if m.is_match(Path::new(std::ffi::OsStr::from_bytes(path))) {
                    return true;
                }
                path.iter()
                    .enumerate()
                    .filter(|(i, b)| **b == b'/' && *i > 0)
                    .any(|(i, _)| m.is_match(Path::new(std::ffi::OsStr::from_bytes(&path[..i]))))
            }
        }
    }

    /// The directory a literal entry names (for mounts and explanations).
    pub fn resolved(&self) -> Option<&Path> {
        match self {
            PathPattern::Literal { lexical, resolved } => {
                Some(resolved.as_ref().unwrap_or(lexical))
            }
            PathPattern::Glob(_) => None,
        }
    }
}

/// A root the sandbox may write below.
#[derive(Clone, Debug)]
pub struct WritableRoot {
    /// `working directory`, `TMPDIR` or `filesystem.allowWrite`.
    pub list: &'static str,
    pub rule: Rule<PathPattern>,
    /// Set to the real target when an `allowWrite` entry resolves outside itself through a
    /// symlink ([`super::fsview::escapes_entry`]): writes there are denied, and the Linux
    /// view refuses to start with such an entry.
    pub escapes: Option<PathBuf>,
}

#[derive(Clone, Debug)]
pub struct PathRules {
    pub cwd: PathBuf,
    pub writable: Vec<WritableRoot>,
    pub deny_read: Vec<Rule<PathPattern>>,
    pub allow_read: Vec<Rule<PathPattern>>,
    pub deny_write: Vec<Rule<PathPattern>>,
    pub mandatory: Mandatory,
    /// Set (with where it came from) when nothing is writable.
    pub read_only: Option<Provenance>,
    /// `filesystem.disabled`: no filesystem restrictions at all.
    pub disabled: bool,
}

impl PathRules {
    pub fn decide(
        &self,
        fs: &dyn FsView,
        path: &Path,
        access: Access,
        approvals: Option<&SessionApprovals>,
    ) -> Verdict {
        let raw = path.as_os_str().as_bytes();
        if raw.is_empty() {
            return Verdict::deny(ReasonKind::InvalidPath, "empty path");
        }
        if raw.contains(&0) {
            return Verdict::deny(ReasonKind::InvalidPath, "path contains a NUL byte");
        }
        let lex = lexical_cow(&self.cwd, path);
        let real = match resolve(fs, &self.cwd, path) {
            Ok(r) => r,
            Err(e) => return Verdict::deny(ReasonKind::InvalidPath, e.to_string()),
        };
        if self.disabled {
            return Verdict::allow(
                ReasonKind::FilesystemDisabled,
                "filesystem restrictions are disabled (filesystem.disabled)",
            );
        }
        // Reasons are built by concatenation: Path's Display and format! dominated the cost.
        let shown = match real.to_str() {
            Some(s) => std::borrow::Cow::Borrowed(s),
            None => real.to_string_lossy(),
        };
        let lex_b = lex.as_os_str().as_bytes();
        let real_b = real.as_os_str().as_bytes();
        // Usually no symlink is involved and both spellings are one: check deny rules once.
        let same = lex_b == real_b;
        let either = |p: &PathPattern| p.covers(real_b) || (!same && p.covers(lex_b));
        let approved = |access| approvals.is_some_and(|a| a.covers_path(access, &real));
        match access {
            Access::Read => {
                for deny in &self.deny_read {
                    if !either(&deny.pattern) {
                        continue;
                    }
                    if let Some(allow) = self.allow_read.iter().find(|a| {
                        a.provenance.rank() >= deny.provenance.rank() && a.pattern.covers(real_b)
                    }) {
                        return Verdict::allow(
                            ReasonKind::AllowRead,
                            [&shown, " is re-allowed inside a denyRead region"].concat(),
                        )
                        .with_rule(allow.to_ref("filesystem.allowRead"));
                    }
                    return self.soft(
                        deny,
                        "filesystem.denyRead",
                        ReasonKind::DenyRead,
                        ["reading ", &shown, " is denied"].concat(),
                        approved(Access::Read),
                    );
                }
                Verdict::allow(ReasonKind::ReadAllowed, [&shown, " is readable"].concat())
            }
            Access::Write => {
                if let Some(prov) = &self.read_only {
                    return Verdict::deny(
                        ReasonKind::ReadOnlyMode,
                        format!("writing {shown} is denied: the sandbox is read-only"),
                    )
                    .with_rule(RuleRef {
                        list: "warden.readOnly".into(),
                        entry: "true".into(),
                        provenance: prov.clone(),
                    });
                }
                let hit = match self.mandatory.check_with(fs, &real) {
                    None if !same => self.mandatory.check_with(fs, &lex),
                    hit => hit,
                };
                if let Some(hit) = hit {
                    return Verdict::deny(
                        ReasonKind::Mandatory,
                        format!(
                            "writing {shown} is denied: mandatory protection {}",
                            hit.entry
                        ),
                    )
                    .with_rule(RuleRef {
                        list: "mandatory".into(),
                        entry: hit.entry.into(),
                        provenance: Provenance::builtin(),
                    });
                }
                if let Some(deny) = self.deny_write.iter().find(|d| either(&d.pattern)) {
                    return self.soft(
                        deny,
                        "filesystem.denyWrite",
                        ReasonKind::DenyWrite,
                        ["writing ", &shown, " is denied"].concat(),
                        approved(Access::Write),
                    );
                }
                if let Some(root) = self
                    .writable
                    .iter()
                    .find(|w| w.escapes.is_none() && w.rule.pattern.covers(real_b))
                {
                    return Verdict::allow(
                        ReasonKind::Writable,
                        [&shown, " is inside a writable root (", root.list, ")"].concat(),
                    )
                    .with_rule(root.rule.to_ref(root.list));
                }
                if has_dotdot(path) {
                    return Verdict::deny(
                        ReasonKind::Traversal,
                        format!(
                            "writing {shown} is denied: `..` in {} leads out of every writable root",
                            path.display()
                        ),
                    );
                }
                if let Some(root) = self.writable.iter().find(|w| {
                    w.rule.pattern.covers(lex_b)
                        || (w.escapes.is_some() && w.rule.pattern.covers(real_b))
                }) {
                    return Verdict::deny(
                        ReasonKind::SymlinkEscape,
                        format!(
                            "writing {} is denied: a symlink leads out of the writable root ({}) to {shown}",
                            lex.display(),
                            root.list
                        ),
                    )
                    .with_rule(root.rule.to_ref(root.list));
                }
                if approved(Access::Write) {
                    return Verdict::allow(
                        ReasonKind::SessionApproval,
                        ["writing ", &shown, " was approved for this session"].concat(),
                    );
                }
                Verdict::ask(
                    ReasonKind::OutsideWritable,
                    ["writing ", &shown, " is outside the writable roots"].concat(),
                )
            }
        }
    }

    /// A deny-list hit: hard when the entry is managed, else approvable.
    fn soft(
        &self,
        rule: &Rule<PathPattern>,
        list: &'static str,
        kind: ReasonKind,
        reason: String,
        approved: bool,
    ) -> Verdict {
        let rref = rule.to_ref(list);
        if rule.provenance.is_managed() {
            return Verdict::deny(kind, format!("{reason} by organization policy")).with_rule(rref);
        }
        if approved {
            return Verdict::allow(
                ReasonKind::SessionApproval,
                format!("{reason} by {list}, but was approved for this session"),
            )
            .with_rule(rref);
        }
        Verdict::ask(kind, reason).with_rule(rref)
    }
}

#[cfg(test)]
#[path = "path_tests.rs"]
mod tests;

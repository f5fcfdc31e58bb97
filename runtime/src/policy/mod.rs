//! Pure decisions: no syscalls here. Everything the sandbox, the proxy, the approval pipeline and
//! the macOS backend decide is answered by this module. Symlink resolution goes through the
//! injected [`fsview::FsView`] so every rule is unit-testable.

pub mod approvals;
pub mod command;
pub mod cursor;
pub mod decision;
pub mod domain;
pub mod fsview;
pub mod hook;
pub mod ignore;
pub mod limits;
pub mod live;
pub mod load;
pub mod mandatory;
pub mod merge;
pub mod path;
pub mod settings;
pub mod shell;
pub mod tool;
pub mod trust;

pub use decision::{Decision, Layer, Provenance, ReasonKind, Rule, RuleRef, Verdict};
pub use settings::SandboxSettings;

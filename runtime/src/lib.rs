//! warden: a Linux-first sandbox runtime for AI coding agents and other untrusted processes.
//!
//! Data flows one way: settings files → [`policy::Settings`] (parse, validate, layer) →
//! [`policy::Policy`] (effective rules with provenance; pure decisions) → a backend that
//! builds the sandbox → events → sinks. See `docs/architecture.md`.

pub mod api;
pub mod approve;
#[cfg(target_os = "linux")]
pub mod audit;
pub mod backend;
pub mod cli;
#[cfg(unix)]
pub mod files;
pub mod hooks;
#[cfg(target_os = "linux")]
pub mod linux;
pub mod macos;
pub mod metrics;
pub mod net;
pub mod policy;
pub mod reload;
#[cfg(unix)]
pub mod term;

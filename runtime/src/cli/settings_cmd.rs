//! `warden settings show|validate` and `warden schema`.

use super::PolicyArgs;
use crate::policy::fsview::RealFs;
use crate::policy::load::load_file;
use crate::policy::merge::{layer, Context, Policy};
use crate::policy::settings::SandboxSettings;
use crate::policy::Layer;
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum SettingsCommand {
    /// Print the effective settings with the layer and file each value came from.
    Show(ShowArgs),
    /// Check settings files; exit 0 when all are valid, 125 otherwise.
    Validate {
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: &SettingsCommand) -> anyhow::Result<i32> {
    match cmd {
        SettingsCommand::Show(args) => show(args),
        SettingsCommand::Validate { files } => validate(files),
    }
}

fn show(args: &ShowArgs) -> anyhow::Result<i32> {
    let policy = args.policy.load()?;
    // A parent proxy's credential is not shown (an agent may read this output).
    let mut eff = policy.effective.clone();
    for (key, s) in eff.scalars.iter_mut() {
        if let (true, Some(text)) = (key.starts_with("network.parentProxy."), s.value.as_str()) {
            s.value = crate::net::upstream::redact_userinfo(text).into();
        }
    }
    let eff = &eff;
    if args.json {
        println!("{}", serde_json::to_string_pretty(eff)?);
        return Ok(0);
    }
    println!("layers (lowest first):");
    if eff.layers.is_empty() {
        println!("  (none: built-in defaults only)");
    }
    for l in &eff.layers {
        println!("  {:<8} {}", l.layer.as_str(), l.source);
    }
    for (key, s) in &eff.scalars {
        println!("{key} = {}    # {}", s.value, s.provenance);
    }
    for (key, items) in &eff.lists {
        println!("{key}:");
        if items.is_empty() {
            println!("  (empty)");
        }
        for s in items {
            println!("  - {}    # {}", s.value, s.provenance);
        }
    }
    for (key, map) in &eff.maps {
        println!("{key}:");
        for (k, s) in map {
            println!("  {k}: {}    # {}", s.value, s.provenance);
        }
    }
    for (key, map) in &eff.map_lists {
        println!("{key}:");
        for (k, items) in map {
            for s in items {
                println!("  {k}: {}    # {}", s.value, s.provenance);
            }
        }
    }
    println!(
        "mandatory protections (built-in): {}",
        policy.paths.mandatory.describe().join(", ")
    );
    Ok(0)
}

fn validate(files: &[PathBuf]) -> anyhow::Result<i32> {
    let mut ok = true;
    let cwd = std::env::current_dir()?;
    let home = std::env::home_dir().unwrap_or_else(|| PathBuf::from("/"));
    for f in files {
        let result = load_file(f)
            .map_err(anyhow::Error::from)
            .and_then(|parsed| {
                // Build a policy from this file alone so pattern errors surface too.
                let ctx = Context {
                    cwd: cwd.clone(),
                    home: home.clone(),
                    tmpdir: None,
                    approver_attached: false,
                    protected: Vec::new(),
                };
                let input = layer(Layer::Cli, 0, &f.display().to_string(), parsed.settings);
                let policy = Policy::build(&[input], ctx, &RealFs)?;
                runtime_checks(&policy)?;
                Ok(parsed.form)
            });
        match result {
            Ok(form) => println!(
                "{}: ok ({} form)",
                f.display(),
                match form {
                    crate::policy::load::Form::Srt => "srt",
                    crate::policy::load::Form::ClaudeCode => "Claude Code",
                }
            ),
            Err(e) => {
                ok = false;
                eprintln!("warden: error: {e:#}");
            }
        }
    }
    Ok(if ok { 0 } else { super::EXIT_WARDEN })
}

/// What `warden run` checks of the settings only when it starts, checked here too, so that
/// `validate` says ok only for settings a run accepts: the metrics address, rlimits, proxy
/// ports, `cpuMax`, and the hook's command.
fn runtime_checks(policy: &Policy) -> anyhow::Result<()> {
    crate::metrics::request(policy, None, None)?;
    crate::policy::limits::rlimits(policy).map_err(anyhow::Error::msg)?;
    for key in ["network.httpProxyPort", "network.socksProxyPort"] {
        if let Some(p) = policy.effective.u64(key) {
            if p == 0 || p > u64::from(u16::MAX) {
                anyhow::bail!("`{key}` {p} is not a port");
            }
        }
    }
    if let Some(cpu) = policy.effective.str("warden.limits.cpuMax") {
        let mut parts = cpu.split_whitespace();
        let quota_ok = parts
            .next()
            .is_some_and(|q| q == "max" || q.parse::<u64>().is_ok_and(|n| n > 0));
        let period_ok = parts
            .next()
            .is_none_or(|p| p.parse::<u64>().is_ok_and(|n| n > 0));
        if !quota_ok || !period_ok || parts.next().is_some() {
            anyhow::bail!(
                "`warden.limits.cpuMax` {cpu:?}: expected \"QUOTA [PERIOD]\" in microseconds \
                 or \"max\" (cgroup v2 cpu.max)"
            );
        }
    }
    if let Some(hook) = policy.effective.str("warden.hooks.beforeCommand") {
        if hook.contains('\0') || hook.trim().is_empty() {
            anyhow::bail!("`warden.hooks.beforeCommand` {hook:?} is not a command");
        }
    }
    Ok(())
}

/// The JSON Schema of a settings file (srt form; Claude Code's form nests it under `sandbox`).
pub fn schema_json() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(SandboxSettings)).unwrap_or_default()
}

pub fn schema() -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(&schema_json())?);
    Ok(())
}

//! `warden check`: one decision, printed with its reason and provenance.

use super::PolicyArgs;
use crate::hooks::gate_command;
use crate::policy::decision::{ReasonKind, Verdict};
use crate::policy::domain::parse_target;
use crate::policy::fsview::RealFs;
use crate::policy::hook::HookOutcome;
use crate::policy::path::Access;
use clap::{ArgGroup, Args};
use serde_json::json;
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("target").required(true).args(["read", "write", "domain", "command", "tool"])))]
pub struct CheckArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// May the sandbox read this path?
    #[arg(long, value_name = "PATH")]
    pub read: Option<PathBuf>,
    /// May the sandbox write this path?
    #[arg(long, value_name = "PATH")]
    pub write: Option<PathBuf>,
    /// May the sandbox reach this host (HOST, HOST:PORT, [IPv6]:PORT)?
    #[arg(long, value_name = "HOST[:PORT]")]
    pub domain: Option<String>,
    /// May an agent run this shell line, and sandboxed or not? Consults the
    /// warden.hooks.beforeCommand hook when one is configured.
    #[arg(long, value_name = "LINE")]
    pub command: Option<String>,
    /// With --command: the agent asks to run it outside the sandbox (dangerouslyDisableSandbox).
    #[arg(long, requires = "command")]
    pub unsandboxed: bool,
    /// With --command: the agent session's id, passed to the beforeCommand hook.
    #[arg(
        long,
        value_name = "ID",
        env = "WARDEN_SESSION",
        default_value = "default"
    )]
    pub session: String,
    /// May an agent tool run, given the side effects it declares (--effects)?
    /// Denials are never approvable.
    #[arg(long, value_name = "NAME")]
    pub tool: Option<String>,
    /// With --tool: its side effects, comma-separated: filesystem-read, filesystem-write,
    /// network, process, external-service.
    #[arg(
        long,
        value_name = "EFFECT,...",
        value_delimiter = ',',
        requires = "tool"
    )]
    pub effects: Vec<String>,
    /// Print JSON for programs.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &CheckArgs) -> anyhow::Result<i32> {
    let policy = args.policy.load()?;
    let mut hook_line = None;
    let (target, verdict, extra) = if let Some(p) = &args.read {
        let v = policy.check_path(&RealFs, p, Access::Read);
        (p.display().to_string(), v, json!({"access": "read"}))
    } else if let Some(p) = &args.write {
        let v = policy.check_path(&RealFs, p, Access::Write);
        (p.display().to_string(), v, json!({"access": "write"}))
    } else if let Some(d) = &args.domain {
        let v = match parse_target(d) {
            Ok((host, port)) => policy.check_domain(&host, port),
            Err(e) => Verdict::deny(ReasonKind::InvalidHost, e.to_string()),
        };
        (d.clone(), v, json!({"access": "network"}))
    } else if let Some(line) = &args.command {
        let cwd = policy.context.cwd.clone();
        let gate = gate_command(&policy, line, &cwd, !args.unsandboxed, &args.session);
        let mut extra = json!({
            "access": "command",
            "placement": gate.placement,
            "commands": gate.commands,
        });
        if let (Some(obj), Some(hook)) = (extra.as_object_mut(), &gate.hook) {
            obj.insert("policy".into(), serde_json::to_value(&gate.policy)?);
            obj.insert("hook".into(), serde_json::to_value(hook)?);
            hook_line = Some(format!(
                "  hook: {} {}",
                hook.path.display(),
                match &hook.outcome {
                    HookOutcome::Answered(a) => format!("answered {}", a.decision.as_str()),
                    HookOutcome::Failed { .. } => "failed".to_string(),
                    HookOutcome::Skipped { why } => format!("not run: {why}"),
                }
            ));
        }
        (line.clone(), gate.verdict, extra)
    } else if let Some(name) = &args.tool {
        let tv = policy.check_tool(name, &args.effects);
        let extra = json!({
            "access": "tool",
            "effects": tv.effects,
            "unenforceable": tv.unenforceable,
        });
        (name.clone(), tv.verdict, extra)
    } else {
        anyhow::bail!("nothing to check");
    };
    if args.json {
        let mut out = serde_json::to_value(&verdict)?;
        if let (Some(obj), Some(extra)) = (out.as_object_mut(), extra.as_object()) {
            obj.insert("target".into(), json!(target));
            obj.extend(extra.clone());
        }
        println!("{out}");
    } else {
        println!("{}: {}", verdict.decision, verdict.reason);
        if let Some(rule) = &verdict.rule {
            println!(
                "  rule: {} \"{}\" from {}",
                rule.list, rule.entry, rule.provenance
            );
        }
        if let Some(placement) = extra.get("placement") {
            println!("  runs: {}", placement.as_str().unwrap_or_default());
        }
        if let Some(line) = hook_line {
            println!("{line}");
        }
    }
    Ok(verdict.decision.exit_code())
}

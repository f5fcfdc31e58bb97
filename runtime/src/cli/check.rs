//! `warden check`: one decision, printed with its reason and provenance.

use super::PolicyArgs;
use crate::policy::command::CommandRequest;
use crate::policy::decision::{ReasonKind, Verdict};
use crate::policy::domain::parse_target;
use crate::policy::fsview::RealFs;
use crate::policy::path::Access;
use clap::{ArgGroup, Args};
use serde_json::json;
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("target").required(true).args(["read", "write", "domain", "command"])))]
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
    /// May an agent run this shell line, and sandboxed or not?
    #[arg(long, value_name = "LINE")]
    pub command: Option<String>,
    /// With --command: the agent asks to run it outside the sandbox (dangerouslyDisableSandbox).
    #[arg(long, requires = "command")]
    pub unsandboxed: bool,
    /// Print JSON for programs.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &CheckArgs) -> anyhow::Result<i32> {
    let policy = args.policy.load()?;
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
        let cv = policy.check_command(&CommandRequest {
            line,
            dangerously_disable_sandbox: args.unsandboxed,
        });
        let extra =
            json!({"access": "command", "placement": cv.placement, "commands": cv.commands});
        (line.clone(), cv.verdict, extra)
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
    }
    Ok(verdict.decision.exit_code())
}

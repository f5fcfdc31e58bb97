//! `warden check`: one decision, printed with its reason and provenance.

use super::PolicyArgs;
use crate::approve::PathOutcome;
use crate::hooks::gate_command;
use crate::policy::decision::{Decision, ReasonKind, Verdict};
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
    /// The agent session: its approvals (given at a prompt of one of its sandboxes or by
    /// `--ask`) apply to this decision, and an approval given here applies to its later
    /// sandboxes. Also the beforeCommand hook's `session`.
    #[arg(long, value_name = "ID", env = "WARDEN_SESSION")]
    pub session: Option<String>,
    /// What the policy leaves to approval is asked now, through the approval pipeline: on the
    /// terminal, on `--approvals unix:PATH`, or denied at once (`--non-interactive`, no
    /// terminal). Exit 0 when allowed, 1 when denied. Refused inside a sandbox.
    #[arg(long)]
    pub ask: bool,
    /// With --ask: ask on this control channel (docs/protocol.md) instead of the terminal.
    #[arg(long, value_name = "unix:PATH", requires = "ask", value_parser = parse_approvals)]
    pub approvals: Option<PathBuf>,
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

fn parse_approvals(text: &str) -> Result<PathBuf, String> {
    crate::approve::channel::parse_spec(text).map_err(|e| e.to_string())
}

pub fn run(args: &CheckArgs) -> anyhow::Result<i32> {
    let policy = args.policy.load()?;
    let store = match &args.session {
        Some(id) => {
            let store = crate::approve::store::SessionStore::open(id)?;
            policy.approvals.merge(&store.load()?);
            Some(store)
        }
        None => None,
    };
    let session = args.session.as_deref().unwrap_or("default");
    let mut hook_line = None;
    // Where a checked command line runs (what a session approval of it is keyed by).
    let mut placement = crate::policy::command::Placement::Sandboxed;
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
        let gate = gate_command(&policy, line, &cwd, !args.unsandboxed, session);
        placement = gate.placement;
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
    let (verdict, approval) = if args.ask && verdict.decision == Decision::RequiresApproval {
        let outcome = ask(args, &policy, store, &target, &verdict, placement)?;
        let mut v = verdict.clone();
        v.decision = if outcome.allowed {
            Decision::Allow
        } else {
            Decision::Deny
        };
        (v, Some(outcome))
    } else {
        (verdict, None)
    };
    if args.json {
        let mut out = serde_json::to_value(&verdict)?;
        if let (Some(obj), Some(extra)) = (out.as_object_mut(), extra.as_object()) {
            obj.insert("target".into(), json!(target));
            obj.extend(extra.clone());
            if let Some(a) = &approval {
                obj.insert(
                    "approval".into(),
                    json!({"answer": a.answer, "note": a.note, "scope": a.scope}),
                );
            }
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
        if let Some(a) = &approval {
            println!("  approval: {}", a.note);
        }
    }
    Ok(verdict.decision.exit_code())
}

/// `--ask`: the question goes through the approval pipeline (`crate::approve`).
fn ask(
    args: &CheckArgs,
    policy: &crate::policy::merge::Policy,
    store: Option<crate::approve::store::SessionStore>,
    target: &str,
    verdict: &Verdict,
    placement: crate::policy::command::Placement,
) -> anyhow::Result<PathOutcome> {
    use crate::approve::{Answer, Approvals, Approver, NonInteractive, PermissionRequest};
    use std::sync::Arc;
    if std::env::var_os("IS_SANDBOX").is_some_and(|v| v == "1") {
        anyhow::bail!(
            "--ask: approvals cannot be given from inside a sandbox; ask the warden that runs it"
        );
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let (channel, attended) =
            crate::approve::choose(policy, args.approvals.clone(), args.policy.non_interactive)
                .map_err(anyhow::Error::msg)?;
        let approver: Arc<dyn Approver> = match channel {
            Some(path) => crate::approve::channel::ChannelApprover::bind(&path)?,
            None if !attended => Arc::new(NonInteractive),
            None => match crate::approve::tty::TtyApprover::open() {
                Some(tty) => tty,
                None => Arc::new(NonInteractive),
            },
        };
        let user_settings = crate::net::service::user_settings_file();
        let wait = crate::approve::timeout(policy);
        let mut approvals =
            Approvals::new(approver.clone(), policy.approvals.clone(), user_settings)
                .with_timeout(wait);
        if let Some(store) = store {
            approvals = approvals.with_store(store);
        }
        if let Some(p) = args.read.as_ref().or(args.write.as_ref()) {
            let access = if args.read.is_some() {
                Access::Read
            } else {
                Access::Write
            };
            let real = crate::policy::fsview::resolve(&RealFs, &policy.context.cwd, p)
                .unwrap_or_else(|_| p.clone());
            let exists = real.symlink_metadata().is_ok();
            return Ok(approvals.path(access, &real, exists, verdict).await);
        }
        if let Some(d) = &args.domain {
            let (host, port) = parse_target(d)?;
            let o = approvals.network(&host, port.unwrap_or(443), verdict).await;
            return Ok(PathOutcome {
                answer: if o.allowed {
                    Answer::AllowOnce
                } else {
                    Answer::Deny
                },
                allowed: o.allowed,
                scope: None,
                note: o.note,
            });
        }
        // A command line (run unsandboxed, or what the hook left to a human): once or not.
        let question = approver.ask(PermissionRequest {
            id: 1,
            kind: crate::approve::RequestKind::Command,
            target: target.to_string(),
            reason: verdict.reason.clone(),
            rule: verdict
                .rule
                .as_ref()
                .map(|r| format!("{}: \"{}\"", r.list, r.entry)),
            provenance: verdict.rule.as_ref().map(|r| r.provenance.to_string()),
            options: vec![Answer::AllowOnce, Answer::Deny],
            timeout_seconds: wait.as_secs(),
        });
        let answer = tokio::time::timeout(wait, question)
            .await
            .unwrap_or(Answer::Deny);
        let allowed = answer == Answer::AllowOnce;
        let note = if allowed {
            let key = crate::policy::approvals::command_key(target, placement);
            format!(
                "approved by the user for this session{}",
                approvals.approve_command(&key)
            )
        } else if !approver.attended() {
            "denied: no approver (non-interactive)".to_string()
        } else {
            "denied by the user".to_string()
        };
        Ok(PathOutcome {
            answer: if allowed { answer } else { Answer::Deny },
            allowed,
            scope: None,
            note,
        })
    })
}

//! `warden explain`: the restrictions summary an agent puts into its model's system prompt.

use super::PolicyArgs;
use crate::policy::merge::Policy;
use crate::policy::path::PathPattern;
use crate::policy::Rule;
use clap::Args;
use serde::Serialize;

#[derive(Args, Debug)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Print JSON for programs.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
pub struct Explanation {
    pub mode: String,
    pub sandboxed: bool,
    pub readable: String,
    pub read_denied: Vec<String>,
    pub read_reallowed: Vec<String>,
    pub writable: Vec<String>,
    pub write_denied: Vec<String>,
    pub protected: Vec<String>,
    pub read_only: bool,
    pub tmpdir: Option<String>,
    pub network: NetworkExplanation,
    pub how_to_ask: String,
}

#[derive(Serialize)]
pub struct NetworkExplanation {
    pub unrestricted: bool,
    pub allowed: Vec<String>,
    pub denied: Vec<String>,
    pub other_hosts: String,
    pub proxy: String,
}

fn entries<T>(rules: &[Rule<T>]) -> Vec<String> {
    rules
        .iter()
        .map(|r| {
            if r.provenance.is_managed() {
                format!("{} (organization policy)", r.text)
            } else {
                r.text.to_string()
            }
        })
        .collect()
}

fn path_entries(rules: &[Rule<PathPattern>]) -> Vec<String> {
    entries(rules)
}

pub fn explanation(p: &Policy) -> Explanation {
    let paths = &p.paths;
    let writable = if paths.read_only.is_some() {
        Vec::new()
    } else {
        paths
            .writable
            .iter()
            .map(|w| match w.list {
                "filesystem.allowWrite" => w.rule.text.to_string(),
                label => format!("{} ({label})", w.rule.text),
            })
            .collect()
    };
    let d = &p.domains;
    let other_hosts = if d.unrestricted {
        "allowed (network is not filtered)".to_string()
    } else if d.strict_allowlist || !p.context.approver_attached {
        "denied".to_string()
    } else {
        "need the user's approval; the request waits for it (up to 60 s)".to_string()
    };
    Explanation {
        mode: match p.mode {
            crate::policy::settings::Mode::PerCommand => "per-command".into(),
            crate::policy::settings::Mode::WholeProcess => "whole-process".into(),
        },
        sandboxed: p.sandbox_enabled(),
        readable: "every path except the denied ones below".into(),
        read_denied: path_entries(&paths.deny_read),
        read_reallowed: path_entries(&paths.allow_read),
        writable,
        write_denied: path_entries(&paths.deny_write),
        protected: paths.mandatory.describe(),
        read_only: paths.read_only.is_some(),
        tmpdir: p
            .paths
            .writable
            .iter()
            .find(|w| w.list == "TMPDIR")
            .map(|w| w.rule.text.to_string()),
        network: NetworkExplanation {
            unrestricted: d.unrestricted,
            allowed: entries(&d.allowed),
            denied: entries(&d.denied),
            other_hosts,
            proxy: "only through warden's proxy, when $HTTPS_PROXY/$HTTP_PROXY (HTTP) or $ALL_PROXY (SOCKS5) are set; direct connections fail".into(),
        },
        how_to_ask: "Before touching a file, `warden check --write PATH` (or --read, --domain HOST, --command LINE) says allow (exit 0), deny (1) or requires approval (2). Denied actions fail with EACCES/EPERM/EROFS or HTTP 403; do not retry them another way. For what requires approval, ask the user to allow it; never try to work around the sandbox.".into(),
    }
}

fn list(out: &mut String, title: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    out.push_str(&format!("{title}: {}\n", items.join(", ")));
}

pub fn render(e: &Explanation) -> String {
    let mut out = String::new();
    if !e.sandboxed {
        out.push_str("Commands are NOT sandboxed (sandbox.enabled is false).\n");
        return out;
    }
    out.push_str(&format!(
        "You are running inside a warden sandbox ({} mode).\n",
        e.mode
    ));
    out.push_str(&format!("Readable: {}.\n", e.readable));
    list(&mut out, "Not readable", &e.read_denied);
    list(&mut out, "Readable again inside those", &e.read_reallowed);
    if e.read_only {
        out.push_str("Writable: nothing (read-only sandbox).\n");
    } else {
        list(&mut out, "Writable", &e.writable);
        list(&mut out, "Not writable even there", &e.write_denied);
        list(&mut out, "Never writable (protected)", &e.protected);
    }
    if let Some(t) = &e.tmpdir {
        out.push_str(&format!(
            "Scratch files: use $TMPDIR ({t}); /tmp outside it is not writable.\n"
        ));
    }
    let n = &e.network;
    if n.unrestricted {
        out.push_str("Network: not filtered");
        if !n.denied.is_empty() {
            out.push_str(&format!(" except {}", n.denied.join(", ")));
        }
        out.push_str(".\n");
    } else {
        if n.allowed.is_empty() {
            out.push_str("Reachable hosts: none listed.\n");
        } else {
            list(&mut out, "Reachable hosts", &n.allowed);
        }
        list(&mut out, "Blocked hosts", &n.denied);
        out.push_str(&format!("Other hosts: {}.\n", n.other_hosts));
        out.push_str(&format!("Network access: {}.\n", n.proxy));
    }
    out.push_str(&format!("How to ask: {}\n", e.how_to_ask));
    out
}

pub fn run(args: &ExplainArgs) -> anyhow::Result<i32> {
    let policy = args.policy.load()?;
    let e = explanation(&policy);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&e)?);
    } else {
        print!("{}", render(&e));
    }
    Ok(0)
}

//! `warden run`: one command in a sandbox warden builds itself.

use super::PolicyArgs;
use crate::linux::cgroup::{Cgroup, Limits};
use crate::linux::plan::{self, PlanInput, RunDirs};
use crate::linux::spawn::{self, RunDir};
use crate::policy::decision::Layer;
use crate::policy::fsview::RealFs;
use crate::policy::merge::{layer, Policy};
use crate::policy::settings::{FilesystemSettings, NetworkSettings, SandboxSettings};
use anyhow::{bail, Context as _};
use clap::Args;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Also writable (repeatable).
    #[arg(long = "allow-write", value_name = "PATH")]
    pub allow_write: Vec<String>,
    /// Not readable (repeatable).
    #[arg(long = "deny-read", value_name = "PATH")]
    pub deny_read: Vec<String>,
    /// Also reachable (repeatable; takes effect with the network proxy).
    #[arg(long = "allow-domain", value_name = "DOMAIN")]
    pub allow_domain: Vec<String>,
    /// No network at all, whatever the settings allow.
    #[arg(long)]
    pub no_network: bool,
    /// The command and its arguments.
    #[arg(trailing_var_arg = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

impl RunArgs {
    /// The command-line flags as a settings layer ranked above every file but managed.
    fn flags_layer(&self) -> Option<crate::policy::merge::LayerInput> {
        let list = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
        let mut s = SandboxSettings::default();
        if !self.allow_write.is_empty() || !self.deny_read.is_empty() {
            s.filesystem = Some(FilesystemSettings {
                allow_write: list(&self.allow_write),
                deny_read: list(&self.deny_read),
                ..Default::default()
            });
        }
        if !self.allow_domain.is_empty() || self.no_network {
            s.network = Some(NetworkSettings {
                allowed_domains: list(&self.allow_domain),
                denied_domains: self.no_network.then(|| vec!["*".to_string()]),
                ..Default::default()
            });
        }
        (s != SandboxSettings::default()).then(|| layer(Layer::Flags, 0, "command line", s))
    }
}

pub fn run(args: &RunArgs) -> anyhow::Result<i32> {
    let run_dir = RunDir::create()?;
    let (mut layers, mut context) = args.policy.layers()?;
    layers.extend(args.flags_layer());
    context.tmpdir = Some(run_dir.tmpdir());
    let policy = Policy::build(&layers, context, &RealFs)?;
    if !policy.sandbox_enabled() {
        bail!("sandbox.enabled is false in the settings: warden run refuses to run a command unsandboxed");
    }
    let plan = plan::build(
        PlanInput {
            policy: &policy,
            argv: args.command.iter().map(|a| a.clone().into_vec()).collect(),
            env: command_env(&policy, &run_dir),
            dirs: RunDirs {
                root: run_dir.root(),
                tmpdir: run_dir.tmpdir(),
            },
        },
        &RealFs,
    )?;
    let cgroup = match Cgroup::create(&format!("{}", std::process::id())) {
        Ok(cg) => {
            cg.apply_limits(&limits(&policy))?;
            Some(cg)
        }
        Err(e) if !policy.fail_if_unavailable() => {
            eprintln!(
                "warden: warning: running without a cgroup (failIfUnavailable is false): {e}"
            );
            None
        }
        Err(e) => return Err(spawn::SpawnError::Cgroup(e).into()),
    };
    let _janitor = spawn::Janitor::start(run_dir.path(), cgroup.as_ref().map(|c| c.path()))?;
    crate::linux::init::signal_set()
        .thread_block()
        .context("blocking signals")?;
    let placeholders =
        plan::create_placeholders(&plan).context("creating protected placeholders")?;
    // The janitor removes them too if this process dies.
    std::fs::write(
        run_dir.path().join(spawn::PLACEHOLDERS_FILE),
        serde_json::to_vec(&placeholders)?,
    )?;
    let started = spawn::start(&plan, cgroup);
    let code = match started {
        Ok(sandbox) => sandbox.wait(),
        Err(e) => {
            plan::remove_placeholders(&placeholders);
            return Err(e.into());
        }
    };
    plan::remove_placeholders(&placeholders);
    if let Err(e) = run_dir.remove() {
        eprintln!("warden: warning: removing the run directory: {e}");
    }
    Ok(code)
}

fn limits(policy: &Policy) -> Limits {
    let e = &policy.effective;
    Limits {
        pids_max: e.u64("warden.limits.pidsMax"),
        memory_max: e.u64("warden.limits.memoryMax"),
        cpu_max: e.str("warden.limits.cpuMax").map(str::to_string),
    }
}

/// The caller's environment minus `warden.env.deny`, plus TMPDIR and the sandbox markers.
fn command_env(policy: &Policy, run_dir: &RunDir) -> Vec<Vec<u8>> {
    let deny: Vec<globset::GlobMatcher> = policy
        .env_deny
        .iter()
        .filter_map(|r| {
            globset::Glob::new(&r.pattern)
                .ok()
                .map(|g| g.compile_matcher())
        })
        .collect();
    let mut env: Vec<Vec<u8>> = std::env::vars_os()
        .filter(|(k, _)| {
            let name = k.to_string_lossy();
            !matches!(name.as_ref(), "TMPDIR" | "IS_SANDBOX" | "WARDEN_SANDBOX")
                && !deny.iter().any(|m| m.is_match(name.as_ref()))
        })
        .map(|(k, v)| {
            let mut b = k.into_vec();
            b.push(b'=');
            b.extend(v.into_vec());
            b
        })
        .collect();
    let mut tmp = b"TMPDIR=".to_vec();
    tmp.extend(run_dir.tmpdir().into_os_string().into_vec());
    env.push(tmp);
    env.push(b"IS_SANDBOX=1".to_vec());
    env.push(b"WARDEN_SANDBOX=1".to_vec());
    env
}

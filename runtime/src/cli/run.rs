//! `warden run`: one command in a sandbox warden builds itself.

use super::PolicyArgs;
use crate::backend::{Backend, Sandbox, SandboxCommand, Workspace};
use crate::policy::decision::Layer;
use crate::policy::fsview::RealFs;
use crate::policy::merge::{layer, Policy};
use crate::policy::settings::{FilesystemSettings, NetworkSettings, SandboxSettings};
use clap::Args;
use std::ffi::OsString;

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
    let backend = crate::backend::native();
    let workspace = backend.workspace()?;
    let (mut layers, mut context) = args.policy.layers()?;
    layers.extend(args.flags_layer());
    context.tmpdir = Some(workspace.tmpdir());
    let policy = Policy::build(&layers, context, &RealFs)?;
    let command = SandboxCommand {
        argv: args.command.clone(),
        env: std::env::vars_os().collect(),
    };
    let sandbox = backend.spawn(workspace, &policy, &command)?;
    Ok(sandbox.wait())
}

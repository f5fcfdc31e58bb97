//! `warden profile --platform macos`: the sandbox profile a platform's backend would apply,
//! printed on any OS (the macOS Seatbelt profile and its `-D` parameters).

use super::PolicyArgs;
use crate::macos::profile::{generate, Options, ProxyPorts};
use crate::policy::fsview::RealFs;
use clap::{Args, ValueEnum};

#[derive(Args, Debug)]
pub struct ProfileArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// The platform whose profile to print.
    #[arg(long, value_enum)]
    pub platform: Platform,
    /// The HTTP proxy port in the printed profile (`warden run` picks a free port).
    #[arg(long, value_name = "PORT", default_value_t = 3128)]
    pub http_port: u16,
    /// The SOCKS5 proxy port in the printed profile (`warden run` picks a free port).
    #[arg(long, value_name = "PORT", default_value_t = 1080)]
    pub socks_port: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Platform {
    /// Seatbelt (`sandbox-exec`): the SBPL profile and its -D parameters.
    Macos,
}

pub fn run(args: &ProfileArgs) -> anyhow::Result<i32> {
    let policy = args.policy.load()?;
    match args.platform {
        Platform::Macos => {
            let proxy = policy.wants_proxy(false).then_some(ProxyPorts {
                http: args.http_port,
                socks: args.socks_port,
            });
            let profile = generate(
                &policy,
                &RealFs,
                &Options {
                    proxy,
                    tag: "warden-profile".into(),
                },
            )?;
            print!("{}", profile.display());
        }
    }
    Ok(0)
}

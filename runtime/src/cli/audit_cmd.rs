//! `warden audit [--socket PATH] [--violations FILE] [--metrics-addr ADDR]`: the node daemon
//! (docs/audit-daemon.md). It loads warden's eBPF programs once; every `warden run` on the
//! machine registers its sandbox with it over the socket instead of loading its own.

use crate::audit::daemon::{self, DaemonConfig};
use crate::audit::protocol;
use anyhow::Context;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct AuditArgs {
    /// The socket `warden run` registers on (default: $WARDEN_AUDIT_SOCKET, else
    /// /run/warden/audit.sock); created mode 0600, removed when the daemon stops.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Append a JSON line per record of every registered sandbox to FILE (each with its
    /// sandbox id and labels).
    #[arg(long, value_name = "FILE")]
    pub violations: Option<PathBuf>,
    /// Serve OpenMetrics on http://ADDR/metrics and `ok` on /healthz (loopback only unless
    /// --metrics-allow-remote); port 0 picks a free port and prints it.
    #[arg(long = "metrics-addr", value_name = "ADDR")]
    pub metrics_addr: Option<String>,
    /// Accept a non-loopback --metrics-addr (the endpoint has no authentication).
    #[arg(long)]
    pub metrics_allow_remote: bool,
}

pub fn run(args: &AuditArgs) -> anyhow::Result<i32> {
    let socket = match &args.socket {
        Some(s) => s.clone(),
        None => protocol::socket_path(std::env::var_os(protocol::SOCKET_ENV))
            .context("WARDEN_AUDIT_SOCKET is empty: pass --socket PATH or unset it")?,
    };
    let metrics_addr = args
        .metrics_addr
        .as_deref()
        .map(|a| crate::metrics::listen_addr(a, args.metrics_allow_remote))
        .transpose()?;
    daemon::run(&DaemonConfig {
        socket,
        violations: args.violations.clone(),
        metrics_addr,
    })?;
    Ok(0)
}

//! The settings schema: what users write. srt's settings file is accepted unchanged at the top
//! level; a Claude Code `settings.json` holds the same block under `sandbox`; warden's own
//! additions sit under `warden`. Every struct rejects unknown keys so a typo never silently
//! weakens the policy.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One settings file's sandbox block (the top level of an srt settings file, or the
/// `sandbox` object of a Claude Code settings file).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SandboxSettings {
    /// Claude Code: whether commands run sandboxed at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Claude Code: refuse to run when the sandbox cannot be established (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fail_if_unavailable: Option<bool>,
    /// Claude Code: honour `dangerouslyDisableSandbox` requests (each still needs approval).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_unsandboxed_commands: Option<bool>,
    /// Claude Code: sandboxed commands run without asking.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_allow_bash_if_sandboxed: Option<bool>,
    /// Claude Code: commands that run outside the sandbox: exact, `prefix ` or `prefix:*`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excluded_commands: Option<Vec<String>>,
    /// Droid: sandbox each command, or the whole agent process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkSettings>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filesystem: Option<FilesystemSettings>,
    /// Command pattern → paths whose violations are not reported (`*` for every command).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore_violations: Option<BTreeMap<String, Vec<String>>>,
    /// Run inside an unprivileged container that refuses some isolation layers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_weaker_nested_sandbox: Option<bool>,
    /// srt: macOS only (trustd for Go TLS); accepted for compatibility.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_weaker_network_isolation: Option<bool>,
    /// How deep below the working directory protected files are searched for (mounts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mandatory_deny_search_depth: Option<u32>,
    /// srt: allow pseudo-terminal access (macOS); accepted for compatibility.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_pty: Option<bool>,
    /// srt: path of bubblewrap. warden builds its sandbox itself; accepted and ignored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bwrap_path: Option<String>,
    /// srt: path of socat. warden has its own bridge; accepted and ignored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socat_path: Option<String>,
    /// warden's own settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warden: Option<WardenSettings>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    PerCommand,
    WholeProcess,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NetworkSettings {
    /// Hosts the sandbox may reach: `example.com`, `*.example.com`, `host:443`, `[::1]`, CIDR.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_domains: Option<Vec<String>>,
    /// Hosts the sandbox may never reach; checked before `allowedDomains`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub denied_domains: Option<Vec<String>>,
    /// Text shown with a refusal, by denied pattern.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub denied_domain_reasons: Option<BTreeMap<String, String>>,
    /// Never ask: a host in no list is denied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strict_allowlist: Option<bool>,
    /// Unix socket paths the sandbox may connect to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_unix_sockets: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_all_unix_sockets: Option<bool>,
    /// Servers inside the sandbox may bind on its loopback.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_local_binding: Option<bool>,
    /// Use an external HTTP filtering proxy on this port instead of warden's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_proxy_port: Option<u16>,
    /// Use an external SOCKS5 filtering proxy on this port instead of warden's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socks_proxy_port: Option<u16>,
    /// Upstream proxy for corporate networks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_proxy: Option<ParentProxy>,
    /// srt: TLS termination; accepted for compatibility, not supported by warden.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_terminate: Option<serde_json::Value>,
    /// srt: MITM proxy; accepted for compatibility, not supported by warden.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mitm_proxy: Option<serde_json::Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ParentProxy {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub https: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_proxy: Option<Vec<String>>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FilesystemSettings {
    /// Paths the sandbox may not read (directories cover everything below them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deny_read: Option<Vec<String>>,
    /// Paths re-allowed for reading inside a `denyRead` region.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_read: Option<Vec<String>>,
    /// Paths the sandbox may write besides the working directory and its TMPDIR.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_write: Option<Vec<String>>,
    /// Paths never writable, even inside `allowWrite`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deny_write: Option<Vec<String>>,
    /// Let the sandbox write `.git/config`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_git_config: Option<bool>,
    /// srt: turn filesystem restrictions off entirely.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
}

/// warden's own additions.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WardenSettings {
    /// Nothing is writable, not even the working directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// No private TMPDIR is writable (Cursor's `disable_tmp_write`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disable_tmp_write: Option<bool>,
    /// Network is not filtered at all (Cursor's `network_access` without a sandboxed proxy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unrestricted_network: Option<bool>,
    /// warden's own network settings (the proxy and DNS guard).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<WardenNetworkSettings>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitsSettings>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit: Option<AuditSettings>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<MetricsSettings>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approvals: Option<ApprovalSettings>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hooks: Option<HookSettings>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<EnvSettings>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commands: Option<CommandSettings>,
    /// Which agent tools may run, by the side effects they declare (`warden check --tool`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<ToolSettings>,
    /// Project directories (absolute or `~/…`; a directory trusts everything below it) whose
    /// own `.warden/settings.json` may widen the sandbox. Untrusted, a project's settings may
    /// only narrow it, add `allowedDomains` and writable paths inside the project
    /// (docs/policy.md). Read from the user, `--settings` and managed layers, never from the
    /// project's own file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trusted_projects: Option<Vec<String>>,
}

/// warden's network additions (`warden.network`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WardenNetworkSettings {
    /// Also refuse connections to private addresses (10/8, 172.16/12, 192.168/16, 100.64/10,
    /// fc00::/7, fec0::/10) that an allowed name resolves to, in every IPv6 spelling
    /// (default false). Loopback, link-local, cloud metadata and the host's own addresses are
    /// always refused; an IP or CIDR entry in `allowedDomains` lets its addresses through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deny_private_addresses: Option<bool>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LimitsSettings {
    /// cgroup `pids.max` (default 4096 where cgroup v2 offers the pids controller; 0: no limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids_max: Option<u64>,
    /// cgroup `memory.max` in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_max: Option<u64>,
    /// cgroup `cpu.max`, e.g. `"50000 100000"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_max: Option<String>,
    /// rlimits by name (`nofile`, `nproc`, `core`, `fsize`, `as`, `cpu`, `stack`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rlimits: Option<BTreeMap<String, u64>>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AuditSettings {
    /// Record what the sandbox was refused with eBPF programs scoped to its cgroup (needs
    /// root). Default: on when a sink is requested (`--violations`, `--annotate-stderr`,
    /// `violationsFile`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Refuse to start when the audit layer cannot be established (implies `enabled`);
    /// otherwise a failure to load is one warning and the run goes on without kernel records.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// With BPF LSM available, also deny in the kernel (a third layer). Without BPF LSM, warden
    /// refuses to run (exit 125) unless `enforceFallback` names a fallback.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enforce: Option<bool>,
    /// What `enforce: true` may run on when BPF LSM is unavailable: `"tracepoints"` (the mount
    /// view, Landlock and seccomp refuse; the tracepoint programs record; a warning says so).
    /// Unset: refuse to run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enforce_fallback: Option<String>,
    /// JSON-lines file the violation records are appended to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub violations_file: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MetricsSettings {
    /// Serve OpenMetrics on `http://LISTEN/metrics` while a run lasts, e.g. `127.0.0.1:9464`
    /// (`--metrics-listen`). Loopback addresses only, unless `allowRemote`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// Older name of `listen` (used when `listen` is not set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addr: Option<String>,
    /// Write the metrics to this file at the end of each run, atomically, in the Prometheus
    /// text format of node_exporter's textfile collector (`--metrics-file`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Allow a `listen` address that is not loopback (default false: such an address is
    /// refused).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_remote: Option<bool>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApprovalSettings {
    /// `interactive` (prompt on the terminal), `deny` (never ask), or `unix:PATH`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Seconds before an unanswered question (network, filesystem, command) is denied
    /// (default 60; 1 to 86400).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HookSettings {
    /// Executable consulted before a command runs; answers allow | deny | ask. A relative
    /// path is relative to the directory of the settings file that names it. It reads
    /// `{"command", "cwd", "sandboxed", "session"}` as JSON on stdin and prints
    /// `{"decision": "allow"|"deny"|"ask", "reason": "..."}` (or the bare word). It can only
    /// make a decision stricter; a failure, a timeout or unreadable output denies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before_command: Option<String>,
    /// Seconds the hook may take before it is killed and the command denied (default 10).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

/// Tool policy (`warden.tools`): a tool runs only if every side effect it declares is one the
/// sandbox enforces. `external-service` (MCP servers, connectors) leaves through channels
/// warden cannot filter and is denied unless the tool is listed in `allowExternal`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ToolSettings {
    /// Tool names (globs such as `mcp__github__*`) allowed the `external-service` effect.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_external: Option<Vec<String>>,
    /// Tool names (globs) that are always denied, whatever they declare.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deny: Option<Vec<String>>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EnvSettings {
    /// Environment variables (names or `PREFIX_*` globs) removed before the command starts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deny: Option<Vec<String>>,
}

/// Cursor-style auto-run policy for agent harnesses.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CommandSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_run: Option<AutoRunMode>,
    /// Commands that run without asking in `use_allowlist` mode (prefix-matched per command).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow: Option<Vec<String>>,
    /// Commands that are always refused (prefix-matched per command).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block: Option<Vec<String>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AutoRunMode {
    AskEveryTime,
    UseAllowlist,
    RunEverything,
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;

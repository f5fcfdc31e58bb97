//! Command-line interface: clap definitions and thin handlers over the policy engine.
//! This is the binary's edge: errors become one `warden: error: …` line and exit 125.

#[cfg(target_os = "linux")]
mod audit_cmd;
mod check;
#[cfg(target_os = "linux")]
mod doctor;
mod explain;
mod profile_cmd;
#[cfg(any(target_os = "linux", target_os = "macos"))]
mod run;
mod settings_cmd;
#[cfg(target_os = "linux")]
mod violations;

use crate::policy::decision::{Layer, Provenance};
use crate::policy::fsview::RealFs;
use crate::policy::load::{load_file, load_optional, LayerPaths};
use crate::policy::merge::{Context, LayerInput, Policy};
use anyhow::{bail, Context as _};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// Exit code for warden's own failures (bad input, missing settings, …).
pub const EXIT_WARDEN: i32 = 125;

#[derive(Parser, Debug)]
#[command(
    name = "warden",
    version,
    about = "A sandbox runtime for AI coding agents"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Decide one path, domain or command line under the effective policy.
    /// Exit code: 0 allow, 1 deny, 2 requires approval.
    Check(check::CheckArgs),
    /// Print the restrictions summary an agent puts into its system prompt.
    Explain(explain::ExplainArgs),
    /// Show or validate settings.
    #[command(subcommand)]
    Settings(settings_cmd::SettingsCommand),
    /// Print the JSON Schema of the settings file.
    Schema,
    /// Probe what this machine supports: namespaces, seccomp, Landlock, cgroups, BPF.
    /// Exit code: 0 when warden's default mode works here, 1 otherwise.
    #[cfg(target_os = "linux")]
    Doctor(doctor::DoctorArgs),
    /// Run a command in a sandbox: `warden run [OPTIONS] -- CMD ARGS...`.
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    Run(run::RunArgs),
    /// Query a violations file (`warden run --violations FILE`): by time, kind, or as it grows.
    #[cfg(target_os = "linux")]
    Violations(violations::ViolationsArgs),
    /// The node audit daemon: loads the eBPF programs once; every `warden run` on the machine
    /// registers its sandbox with it (docs/audit-daemon.md). Runs until SIGINT or SIGTERM.
    #[cfg(target_os = "linux")]
    Audit(audit_cmd::AuditArgs),
    /// Print the sandbox profile a platform's backend applies, on any OS:
    /// `warden profile --platform macos` prints the Seatbelt profile and its -D parameters.
    Profile(profile_cmd::ProfileArgs),
}

/// Options shared by every command that builds the effective policy.
#[derive(Args, Debug, Clone, Default)]
pub struct PolicyArgs {
    /// A settings file layered above user and project settings (repeatable, in order).
    #[arg(long = "settings", value_name = "FILE")]
    pub settings: Vec<PathBuf>,
    /// The working directory the policy applies to (default: the current one).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// The sandbox's private TMPDIR (default: $TMPDIR when running inside a sandbox).
    #[arg(long, value_name = "DIR")]
    pub tmpdir: Option<PathBuf>,
    /// Nobody can answer approval requests: what would ask is denied.
    #[arg(long)]
    pub non_interactive: bool,
}

impl PolicyArgs {
    /// The working directory, resolved (symlinks included) as the sandbox uses it: the
    /// project layer must be read from there at start and on every live reload — a `--cwd`
    /// through a link the command can repoint let it swap in a settings file of its own
    /// (red-team round 23).
    fn cwd_resolved(&self) -> anyhow::Result<PathBuf> {
        let cwd = match &self.cwd {
            Some(c) => std::path::absolute(c).context("resolving --cwd")?,
            None => std::env::current_dir().context("reading the current directory")?,
        };
        Ok(std::fs::canonicalize(&cwd).unwrap_or(cwd))
    }

    /// Every settings file the policy is built from, existing or not, in layer order.
    pub fn files(&self) -> anyhow::Result<Vec<PathBuf>> {
        let cwd = self.cwd_resolved()?;
        let Some(home) = std::env::home_dir() else {
            bail!("cannot determine the home directory (set HOME)");
        };
        let env = |k: &str| std::env::var(k).ok();
        let paths = LayerPaths::discover(&home, &cwd, &env);
        let mut files = vec![paths.user, paths.project];
        for f in &self.settings {
            files.push(std::path::absolute(f).unwrap_or_else(|_| f.clone()));
        }
        files.push(paths.managed);
        Ok(files)
    }

    /// Loads every layer and builds the policy.
    pub fn load(&self) -> anyhow::Result<Policy> {
        let (layers, context) = self.layers()?;
        Policy::build(&layers, context, &RealFs).map_err(anyhow::Error::from)
    }

    pub fn layers(&self) -> anyhow::Result<(Vec<LayerInput>, Context)> {
        let cwd = self.cwd_resolved()?;
        if !cwd.is_dir() {
            bail!("working directory {} is not a directory", cwd.display());
        }
        let Some(home) = std::env::home_dir() else {
            bail!("cannot determine the home directory (set HOME)");
        };
        let env = |k: &str| std::env::var(k).ok();
        let paths = LayerPaths::discover(&home, &cwd, &env);
        let mut layers = Vec::new();
        let mut push =
            |layer: Layer, order: u16, path: &PathBuf, required: bool| -> anyhow::Result<()> {
                let parsed = if required {
                    Some(load_file(path)?)
                } else {
                    load_optional(path)?
                };
                if let Some(mut parsed) = parsed {
                    hide_if_secret(&mut parsed.settings, path);
                    layers.push(LayerInput {
                        provenance: Provenance::new(layer, order, path.display().to_string()),
                        settings: parsed.settings,
                    });
                }
                Ok(())
            };
        push(Layer::User, 0, &paths.user, false)?;
        push(Layer::Project, 0, &paths.project, false)?;
        for (i, f) in self.settings.iter().enumerate() {
            push(Layer::Cli, u16::try_from(i).unwrap_or(u16::MAX), f, true)?;
        }
        push(Layer::Managed, 0, &paths.managed, false)?;
        untrusted_project_check(&layers, &paths.project, &cwd, &home, &paths.user)?;
        let tmpdir = self.tmpdir.clone().or_else(|| {
            (std::env::var_os("IS_SANDBOX").is_some_and(|v| v == "1"))
                .then(|| std::env::var_os("TMPDIR").map(PathBuf::from))
                .flatten()
        });
        let protected = protected_config(&paths, &self.settings, &home, &cwd);
        let context = Context {
            cwd,
            home,
            tmpdir,
            approver_attached: !self.non_interactive,
            protected,
        };
        Ok((layers, context))
    }
}

/// A settings file holding a credential (a parent proxy URL with user info) is masked from
/// reads in the sandbox, through its own layer's `denyRead` (as written and as resolved): the
/// command must not read the password and send it to an allowed domain (red-team round 23).
fn hide_if_secret(settings: &mut crate::policy::settings::SandboxSettings, path: &std::path::Path) {
    use crate::net::upstream::has_userinfo;
    let secret = settings
        .network
        .as_ref()
        .and_then(|n| n.parent_proxy.as_ref())
        .is_some_and(|p| {
            [&p.http, &p.https]
                .into_iter()
                .flatten()
                .any(|u| has_userinfo(u))
        });
    if !secret {
        return;
    }
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut hide = vec![path.display().to_string()];
    if let Ok(real) = std::fs::canonicalize(&path) {
        if real != path {
            hide.push(real.display().to_string());
        }
    }
    settings
        .filesystem
        .get_or_insert_with(Default::default)
        .deny_read
        .get_or_insert_with(Vec::new)
        .extend(hide);
}

/// Refuses (exit 125) a project layer that widens the sandbox while the project is not
/// trusted ([`crate::policy::trust`]).
fn untrusted_project_check(
    layers: &[LayerInput],
    project_file: &std::path::Path,
    cwd: &std::path::Path,
    home: &std::path::Path,
    user_file: &std::path::Path,
) -> anyhow::Result<()> {
    use crate::policy::trust;
    let Some(project) = layers.iter().find(|l| l.provenance.layer == Layer::Project) else {
        return Ok(());
    };
    let real = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    if trust::is_trusted(layers, cwd, home) || trust::is_trusted(layers, &real, home) {
        return Ok(());
    }
    let value = serde_json::to_value(&project.settings).unwrap_or_default();
    let refused = trust::refused_keys(&value, cwd);
    if refused.is_empty() {
        return Ok(());
    }
    bail!(
        "{file} sets {keys}: a project's own settings may only narrow the sandbox, add \
         `allowedDomains` and writable paths inside the project until you trust it (a \
         repository must not hand itself the sandbox's keys). Trust it by adding \
         \"{dir}\" to `{key}` in {user} (or --settings / managed settings), or move these \
         settings there",
        file = project_file.display(),
        keys = refused.join(", "),
        dir = cwd.display(),
        key = trust::TRUSTED_PROJECTS,
        user = user_file.display(),
    )
}

/// Configuration no sandbox may write, by absolute path: warden's user settings directory,
/// the user's git configuration directory, the managed settings file and every `--settings`
/// file (a sandbox that could edit one would widen the next run, or run code outside through
/// git). Each as written and, where a symlink leads elsewhere, as resolved.
fn protected_config(
    paths: &LayerPaths,
    settings: &[PathBuf],
    home: &std::path::Path,
    cwd: &std::path::Path,
) -> Vec<crate::policy::mandatory::ConfigPath> {
    use crate::policy::mandatory::ConfigPath;
    let mut out = Vec::new();
    let mut push = |path: PathBuf, dir: bool, what: &'static str| {
        let real = crate::policy::fsview::resolve(&RealFs, std::path::Path::new("/"), &path)
            .unwrap_or_else(|_| path.clone());
        if real != path {
            out.push(ConfigPath {
                path: real,
                dir,
                what,
            });
        }
        out.push(ConfigPath { path, dir, what });
    };
    if let Some(dir) = paths.user.parent() {
        push(dir.to_path_buf(), true, "warden user settings");
        if let Some(config) = dir.parent() {
            push(config.join("git"), true, "git user configuration");
        }
    }
    push(paths.managed.clone(), false, "warden managed settings");
    if let Some(pool) = crate::files::placeholder_pool() {
        push(pool, true, crate::policy::mandatory::PLACEHOLDER_POOL_WHAT);
    }
    // What the user's global git config names: its includes and an absolute or `~/`
    // hooks directory (the config files themselves are protected above and by name).
    if let Some(config) = paths.user.parent().and_then(|d| d.parent()) {
        let mut named = Vec::new();
        // A relative `core.hooksPath` in these applies in every repository, relative to its
        // worktree: the working directory's repository is the one the sandbox can write.
        let worktree = cwd
            .ancestors()
            .find(|d| d.join(".git").exists())
            .unwrap_or(cwd);
        for file in [
            std::path::PathBuf::from("/etc/gitconfig"),
            home.join(".gitconfig"),
            config.join("git").join("config"),
        ] {
            crate::policy::mandatory::config_file_paths(
                &RealFs,
                &file,
                Some(worktree),
                Some(home),
                0,
                &mut named,
            );
        }
        for c in named {
            push(c.path, c.dir, c.what);
        }
    }
    for f in settings {
        let f = std::path::absolute(f).unwrap_or_else(|_| f.clone());
        push(f, false, "warden settings file (--settings)");
    }
    // Start-up files in the home directory: resolved only where a symlink is on the way below
    // the home (dotfiles kept in a repository), one lstat per component otherwise.
    let home_real = crate::policy::fsview::resolve(&RealFs, std::path::Path::new("/"), home)
        .unwrap_or_else(|_| home.to_path_buf());
    let startup = crate::policy::mandatory::HOME_STARTUP_FILES
        .iter()
        .map(|n| (n, false, "start-up file in the home directory"))
        .chain(
            crate::policy::mandatory::HOME_STARTUP_DIRS
                .iter()
                .map(|n| (n, true, "start-up directory in the home directory")),
        );
    // Each directory on the way is listed once (its entries' types come with the listing)
    // instead of an lstat per name and component: ~130 calls per run otherwise.
    let mut listings: std::collections::HashMap<PathBuf, Option<Vec<(std::ffi::OsString, bool)>>> =
        std::collections::HashMap::new();
    let mut is_symlink = |dir: &std::path::Path, name: &std::ffi::OsStr| -> Option<bool> {
        let entries = listings.entry(dir.to_path_buf()).or_insert_with(|| {
            std::fs::read_dir(dir).ok().map(|d| {
                d.filter_map(|e| {
                    let e = e.ok()?;
                    let link = e.file_type().ok()?.is_symlink();
                    Some((e.file_name(), link))
                })
                .collect()
            })
        });
        match entries {
            Some(list) => list.iter().find(|(n, _)| n == name).map(|(_, l)| *l),
            // Not listable (no search permission, say): as the lstat did.
            None => std::fs::symlink_metadata(dir.join(name))
                .ok()
                .map(|m| m.file_type().is_symlink()),
        }
    };
    for (name, dir, what) in startup {
        let mut real = home_real.clone();
        let mut linked = false;
        for comp in std::path::Path::new(name).components() {
            match is_symlink(&real, comp.as_os_str()) {
                Some(true) => {
                    linked = true;
                    break;
                }
                Some(false) => real.push(comp),
                None => break,
            }
        }
        let named = home.join(name);
        let real = if linked {
            crate::policy::fsview::resolve(&RealFs, std::path::Path::new("/"), &named)
                .unwrap_or_else(|_| named.clone())
        } else {
            home_real.join(name)
        };
        if real != named {
            out.push(ConfigPath {
                path: real,
                dir,
                what,
            });
        }
        out.push(ConfigPath {
            path: named,
            dir,
            what,
        });
    }
    out
}

/// The error and its causes, skipping a cause whose text the message already contains (error
/// types that print their source inline as well as exposing it would otherwise repeat it).
fn error_chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
    }
    out
}

/// Runs the CLI and returns the process exit code.
/// `warden run` alone: the same arguments as the `run` subcommand of [`Cli`], parsed without
/// building every other subcommand's parser first (clap derive builds the whole tree on
/// each parse: ~0.4 ms of every sandboxed command's start; docs/benchmarks.md).
#[cfg(any(target_os = "linux", target_os = "macos"))]
#[derive(Parser, Debug)]
#[command(
    name = "warden",
    about = "Run a command in a sandbox: `warden run [OPTIONS] -- CMD ARGS...`"
)]
struct RunCli {
    #[command(flatten)]
    args: run::RunArgs,
}

fn parse_failed(e: clap::Error) -> i32 {
    let code = match e.kind() {
        clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => 0,
        _ => EXIT_WARDEN,
    };
    let _ = e.print();
    code
}

pub fn run() -> i32 {
    // The janitor's second stage (linux/janitor.rs): not a command for people.
    #[cfg(target_os = "linux")]
    if std::env::args_os().nth(1).is_some_and(|a| a == "__janitor") {
        return crate::linux::janitor::exec_main();
    }
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    {
        use clap::{CommandFactory, FromArgMatches};
        let mut argv = std::env::args_os();
        let arg0 = argv.next();
        if argv.next().is_some_and(|a| a == "run") {
            // Usage lines name the binary as invoked, like the full parser's.
            let bin = arg0
                .as_deref()
                .map(std::path::Path::new)
                .and_then(|p| p.file_name())
                .map_or_else(|| "warden".into(), |n| n.to_string_lossy().into_owned());
            let parsed = RunCli::command()
                .bin_name(format!("{bin} run"))
                .try_get_matches_from(std::iter::once(std::ffi::OsString::from("run")).chain(argv))
                .and_then(|m| RunCli::from_arg_matches(&m));
            return match parsed {
                Ok(cli) => finish(run::run(&cli.args)),
                Err(e) => parse_failed(e),
            };
        }
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return parse_failed(e),
    };
    let result = match cli.command {
        Command::Check(args) => check::run(&args),
        Command::Explain(args) => explain::run(&args),
        Command::Settings(cmd) => settings_cmd::run(&cmd),
        Command::Schema => settings_cmd::schema().map(|()| 0),
        #[cfg(target_os = "linux")]
        Command::Doctor(args) => doctor::run(&args),
        #[cfg(any(target_os = "linux", target_os = "macos"))]
        Command::Run(args) => run::run(&args),
        Command::Profile(args) => profile_cmd::run(&args),
        #[cfg(target_os = "linux")]
        Command::Violations(args) => violations::run(&args),
        #[cfg(target_os = "linux")]
        Command::Audit(args) => audit_cmd::run(&args),
    };
    finish(result)
}

fn finish(result: anyhow::Result<i32>) -> i32 {
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("warden: error: {}", error_chain(&e));
            EXIT_WARDEN
        }
    }
}

//! The gate an agent harness asks before it runs a shell line: allow, deny or ask, and whether
//! the line runs inside the sandbox.
//!
//! The line is split into simple commands with [`shell::simple_commands`] (lists, pipelines,
//! substitutions, `bash -c` scripts…); every rule is checked against every simple command.
//! [`CommandRules::decide`] goes through these steps, in order; the first that decides wins:
//!
//! 1. **Parse.** A line that does not parse (or is empty, or runs a script only known at run
//!    time such as `bash -c "$X"`) requires approval (`command-unparsable`), sandboxed.
//! 2. **Block list.** A simple command matching `warden.commands.block` denies the whole line
//!    (`command-blocked`); a denial is never approvable. Entries match word-prefixes of the
//!    command's argv as written, after wrappers (`env`, `nice`, `timeout`…) and after
//!    `sudo`/`doas`/`pkexec`; an entry's program also matches by basename (`curl` blocks
//!    `/usr/bin/curl`).
//! 3. **Sandbox disabled** (`sandbox.enabled: false`): the line runs unsandboxed. Steps 6 and
//!    7 still apply, except that without `warden.commands.autoRun` the line requires approval
//!    (`sandbox-disabled`).
//! 4. **`dangerouslyDisableSandbox`.** With `sandbox.allowUnsandboxedCommands` the line runs
//!    unsandboxed and always requires approval (`command-unsandboxed`). Without it the request
//!    is ignored, the reason says so, and the line goes on sandboxed.
//! 5. **`sandbox.excludedCommands`.** The line runs unsandboxed only if *every* simple command
//!    matches an entry (`docker ps && rm -rf ~` with `docker:*` excluded stays sandboxed) and
//!    the line is plain ([`shell::is_plain`]: literal words, no redirections, assignments,
//!    expansions or compound commands — `git status > ~/.bashrc` stays sandboxed).
//!    Entries are exact (`docker ps`), or word-prefixes written `docker ` (trailing blank) or
//!    `docker:*`; `npm run:*` matches `npm run build` and `npm run`, not `npm runner`. They
//!    match the words as written, without looking through wrappers. An excluded line requires
//!    approval (`command-excluded`) unless step 7 allows it by allowlist or `run_everything`.
//! 6. **Protected programs.** A simple command whose program (after wrappers) is `rm`, `sudo`,
//!    `doas`, `su` or `pkexec` requires approval (`command-protected`) in every mode; no allow
//!    entry lifts this.
//! 7. **Approval by `warden.commands.autoRun`:**
//!    - `ask_every_time`: requires approval (`command-ask`);
//!    - `use_allowlist`: allowed (`command-allowed`) when every simple command matches a
//!      `warden.commands.allow` entry — a word-prefix of its argv after wrappers (`git` matches
//!      `git status`, `git st` does not) — else requires approval (`command-ask`);
//!    - `run_everything`: allowed;
//!    - not set: allowed when the line runs sandboxed and `sandbox.autoAllowBashIfSandboxed`
//!      is on (the default); otherwise requires approval (`sandbox-disabled`,
//!      `command-excluded` or `command-ask` by why the line is where it is).

use super::decision::{ReasonKind, Rule, Verdict};
use super::settings::AutoRunMode;
use super::shell::{self, SimpleCommand};
use serde::{Deserialize, Serialize};

pub const LIST_BLOCK: &str = "warden.commands.block";
pub const LIST_ALLOW: &str = "warden.commands.allow";
pub const LIST_EXCLUDED: &str = "sandbox.excludedCommands";

/// Programs whose every use requires approval, whatever the mode and the allowlist.
pub const PROTECTED_PROGRAMS: &[&str] = &["rm", "sudo", "doas", "su", "pkexec"];

/// The command-related settings, merged across layers.
#[derive(Clone, Debug)]
pub struct CommandRules {
    /// `sandbox.enabled` (default true).
    pub sandbox_enabled: bool,
    /// `sandbox.allowUnsandboxedCommands` (default false).
    pub allow_unsandboxed: bool,
    /// `sandbox.autoAllowBashIfSandboxed` (default true).
    pub auto_allow_if_sandboxed: bool,
    /// `sandbox.excludedCommands`.
    pub excluded: Vec<Rule<String>>,
    /// `warden.commands.autoRun`.
    pub auto_run: Option<AutoRunMode>,
    /// `warden.commands.allow`.
    pub allow: Vec<Rule<String>>,
    /// `warden.commands.block`.
    pub block: Vec<Rule<String>>,
}

impl Default for CommandRules {
    fn default() -> Self {
        CommandRules {
            sandbox_enabled: true,
            allow_unsandboxed: false,
            auto_allow_if_sandboxed: true,
            excluded: Vec::new(),
            auto_run: None,
            allow: Vec::new(),
            block: Vec::new(),
        }
    }
}

/// What the harness is about to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommandRequest<'a> {
    pub line: &'a str,
    /// The agent asked to run the line outside the sandbox.
    pub dangerously_disable_sandbox: bool,
}

impl<'a> CommandRequest<'a> {
    pub fn new(line: &'a str) -> Self {
        CommandRequest {
            line,
            dangerously_disable_sandbox: false,
        }
    }
}

/// Where the line runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    Sandboxed,
    Unsandboxed,
}

/// The gate's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CommandVerdict {
    pub verdict: Verdict,
    pub placement: Placement,
    /// Each simple command's text, in the order found.
    pub commands: Vec<String>,
}

/// Why the line runs where it does (decides the default approval of step 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Why {
    Sandboxed,
    SandboxDisabled,
    Excluded,
}

impl CommandRules {
    /// Decide `req`; see the module documentation for the order of the steps.
    pub fn decide(&self, req: &CommandRequest) -> CommandVerdict {
        // 1. Parse.
        let cmds = match shell::simple_commands(req.line) {
            Ok(cmds) => cmds,
            Err(e) => {
                return CommandVerdict {
                    verdict: Verdict::ask(
                        ReasonKind::CommandUnparsable,
                        format!("the command line cannot be analysed ({e}), so it needs approval"),
                    ),
                    placement: Placement::Sandboxed,
                    commands: Vec::new(),
                }
            }
        };
        let texts: Vec<String> = cmds.iter().map(|c| c.text.clone()).collect();
        let done = |verdict: Verdict, placement: Placement| CommandVerdict {
            verdict,
            placement,
            commands: texts.clone(),
        };

        // 2. Block list.
        for cmd in &cmds {
            if let Some(rule) = self.block.iter().find(|r| blocks(&r.pattern, cmd)) {
                let verdict = Verdict::deny(
                    ReasonKind::CommandBlocked,
                    format!(
                        "`{}` matches the blocked command `{}`",
                        cmd.text,
                        rule.text.trim()
                    ),
                )
                .with_rule(rule.to_ref(LIST_BLOCK));
                return done(verdict, Placement::Sandboxed);
            }
        }

        // 2b. A program only known at run time (`$X`, `"$(echo rm)"`, `/usr/bin/r[m]`): no
        // list can say what it is, so a human must.
        if let Some(cmd) = cmds.iter().find(|c| c.dynamic_program()) {
            let verdict = Verdict::ask(
                ReasonKind::CommandUnparsable,
                format!(
                    "`{}` runs a program that is only known at run time, so it needs approval",
                    cmd.text
                ),
            );
            return done(verdict, Placement::Sandboxed);
        }

        // 3.–5. Placement.
        let mut note = String::new();
        let (placement, why, excluded_by) = if !self.sandbox_enabled {
            (Placement::Unsandboxed, Why::SandboxDisabled, Vec::new())
        } else {
            if req.dangerously_disable_sandbox {
                if self.allow_unsandboxed {
                    let verdict = Verdict::ask(
                        ReasonKind::CommandUnsandboxed,
                        format!(
                            "the agent asked to run `{}` outside the sandbox; \
                             sandbox.allowUnsandboxedCommands permits it, but every such line \
                             needs approval",
                            texts.join("; ")
                        ),
                    );
                    return done(verdict, Placement::Unsandboxed);
                }
                note.push_str(
                    " (the request to run outside the sandbox was ignored: \
                     sandbox.allowUnsandboxedCommands is off)",
                );
            }
            let matches: Vec<Option<&Rule<String>>> = cmds
                .iter()
                .map(|c| self.excluded.iter().find(|r| excludes(&r.pattern, c)))
                .collect();
            let all = !matches.is_empty() && matches.iter().all(Option::is_some);
            // Outside the sandbox only a plain line (literal words; no redirections,
            // assignments, expansions or compound commands: shell::is_plain) — there what
            // the line does is what its commands say.
            let plain =
                all && shell::is_plain(req.line) && !cmds.iter().any(hands_over_files_or_programs);
            if all && !plain {
                note.push_str(
                    " (every command matches sandbox.excludedCommands, but the line is not a \
                     plain list of commands — it has redirections, assignments, expansions, \
                     globs, compound commands or an option that names a file to write or a \
                     program to run — so it stays sandboxed)",
                );
            }
            if plain {
                let pairs: Vec<(&SimpleCommand, &Rule<String>)> = cmds
                    .iter()
                    .zip(matches.iter())
                    .filter_map(|(c, r)| r.map(|r| (c, r)))
                    .collect();
                (Placement::Unsandboxed, Why::Excluded, pairs)
            } else {
                if !all && matches.iter().any(Option::is_some) {
                    if let Some(c) = cmds.iter().zip(&matches).find(|(_, r)| r.is_none()) {
                        note.push_str(&format!(
                            " (`{}` is not in sandbox.excludedCommands, so the line stays \
                             sandboxed)",
                            c.0.text
                        ));
                    }
                }
                (Placement::Sandboxed, Why::Sandboxed, Vec::new())
            }
        };
        let done = |verdict: Verdict| {
            let mut verdict = verdict;
            verdict.reason.push_str(&note);
            done(verdict, placement)
        };
        let where_ = match why {
            Why::Sandboxed => "runs sandboxed".to_string(),
            Why::SandboxDisabled => {
                "runs unsandboxed because the sandbox is disabled (sandbox.enabled is false)"
                    .to_string()
            }
            Why::Excluded => format!(
                "runs outside the sandbox because {}",
                excluded_by
                    .iter()
                    .map(|(c, r)| format!(
                        "`{}` matches the excluded command `{}`",
                        c.text,
                        r.text.trim()
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let excluded_ref = excluded_by.first().map(|(_, r)| r.to_ref(LIST_EXCLUDED));

        // 6. Protected programs.
        for cmd in &cmds {
            if let Some(prog) = shell::program(cmd).filter(|p| PROTECTED_PROGRAMS.contains(p)) {
                return done(Verdict::ask(
                    ReasonKind::CommandProtected,
                    format!(
                        "`{}` runs `{prog}`, which always needs approval; the line {where_}",
                        cmd.text
                    ),
                ));
            }
        }

        // 7. Approval by mode.
        let verdict = match self.auto_run {
            Some(AutoRunMode::AskEveryTime) => Verdict::ask(
                ReasonKind::CommandAsk,
                format!("warden.commands.autoRun is ask_every_time; the line {where_}"),
            ),
            Some(AutoRunMode::UseAllowlist) => self.by_allowlist(&cmds, &where_),
            Some(AutoRunMode::RunEverything) => Verdict::allow(
                ReasonKind::CommandAllowed,
                format!("warden.commands.autoRun is run_everything; the line {where_}"),
            ),
            None => match why {
                Why::Sandboxed if self.auto_allow_if_sandboxed => Verdict::allow(
                    ReasonKind::CommandAllowed,
                    "the line runs sandboxed and sandbox.autoAllowBashIfSandboxed is on",
                ),
                Why::Sandboxed => Verdict::ask(
                    ReasonKind::CommandAsk,
                    "the line runs sandboxed, but sandbox.autoAllowBashIfSandboxed is off",
                ),
                Why::SandboxDisabled => Verdict::ask(
                    ReasonKind::SandboxDisabled,
                    format!("the line {where_}, so it needs approval"),
                ),
                Why::Excluded => {
                    let verdict = Verdict::ask(
                        ReasonKind::CommandExcluded,
                        format!("the line {where_}, so it needs approval"),
                    );
                    match excluded_ref {
                        Some(r) => verdict.with_rule(r),
                        None => verdict,
                    }
                }
            },
        };
        done(verdict)
    }

    fn by_allowlist(&self, cmds: &[SimpleCommand], where_: &str) -> Verdict {
        let mut matched: Vec<(&SimpleCommand, &Rule<String>)> = Vec::new();
        for cmd in cmds {
            match self.allow.iter().find(|r| allows(&r.pattern, cmd)) {
                Some(rule) => matched.push((cmd, rule)),
                None => {
                    return Verdict::ask(
                        ReasonKind::CommandAsk,
                        format!(
                            "`{}` is not in warden.commands.allow \
                             (warden.commands.autoRun is use_allowlist); the line {where_}",
                            cmd.text
                        ),
                    )
                }
            }
        }
        let which = matched
            .iter()
            .map(|(c, r)| format!("`{}` by `{}`", c.text, r.text.trim()))
            .collect::<Vec<_>>()
            .join(", ");
        let reason = if which.is_empty() {
            format!("the line runs no command; it {where_}")
        } else {
            format!("every command is allowlisted: {which}; the line {where_}")
        };
        let verdict = Verdict::allow(ReasonKind::CommandAllowed, reason);
        match matched.first() {
            Some((_, rule)) => verdict.with_rule(rule.to_ref(LIST_ALLOW)),
            None => verdict,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Matching.

/// The words of an allow or block entry: whitespace-split, a trailing `:*` ignored.
fn prefix_words(pattern: &str) -> Vec<&str> {
    let p = pattern.trim();
    let p = p.strip_suffix(":*").unwrap_or(p);
    p.split_whitespace().collect()
}

/// `entry` is a word-prefix of `argv`. An empty entry matches nothing.
fn word_prefix(entry: &[&str], argv: &[String], basename_program: bool) -> bool {
    let Some((first, rest)) = entry.split_first() else {
        return false;
    };
    if argv.len() < entry.len() {
        return false;
    }
    let program_matches = argv[0] == *first
        || (basename_program && !first.contains('/') && shell::basename(&argv[0]) == *first);
    program_matches && rest.iter().zip(&argv[1..]).all(|(e, a)| *e == a)
}

/// Whether `cmd` carries an option through which a program writes a file of the caller's
/// choosing or runs another program (`git log --output=~/.bashrc` under an exclusion of `git
/// log:*` wrote the host's `.bashrc`: red-team round 16). An excluded line with one stays
/// sandboxed. A list of the usual names, long and short — not every program's every option:
/// a prefix exclusion hands the agent the rest of the program's options.
fn hands_over_files_or_programs(cmd: &SimpleCommand) -> bool {
    const LONG: [&str; 24] = [
        "--output",
        "--output-directory",
        "--out",
        "--exec",
        "--exec-path",
        "--upload-pack",
        "--receive-pack",
        "--config",
        "--config-env",
        "--git-dir",
        "--work-tree",
        "--ext-diff",
        "--textconv",
        "--open-files-in-pager",
        "--template",
        "--pager",
        "--editor",
        "--command",
        "--shell",
        "--run",
        "--eval",
        "--script",
        "--file",
        "--log-file",
    ];
    const SHORT: [char; 7] = ['c', 'C', 'o', 'O', 'e', 'x', 'f'];
    cmd.words.iter().skip(1).any(|w| {
        if let Some(long) = w.strip_prefix("--") {
            let name = long.split('=').next().unwrap_or(long);
            LONG.iter().any(|l| l.strip_prefix("--") == Some(name))
        } else if let Some(short) = w.strip_prefix('-') {
            short.chars().next().is_some_and(|c| SHORT.contains(&c))
        } else {
            false
        }
    })
}

/// `warden.commands.allow`: word-prefix of the argv after wrappers, program compared as
/// written (`git` does not allow `./git`).
/// A command with leading assignments (`LD_PRELOAD=x git status`) is never allowlisted.
pub fn allows(pattern: &str, cmd: &SimpleCommand) -> bool {
    cmd.assignments.is_empty()
        && word_prefix(&prefix_words(pattern), shell::effective_argv(cmd), false)
}

/// `warden.commands.block`: word-prefix of the argv as written, after wrappers, or after
/// `sudo`/`doas`/`pkexec` too; the entry's program also matches by basename. A word only
/// known at run time (`git $X`, `git pus[h]`) matches any word of the entry (a block list
/// fails closed), and git's own options before its subcommand (`git -C . push`, `git
/// --no-pager push`) are looked through.
pub fn blocks(pattern: &str, cmd: &SimpleCommand) -> bool {
    let entry = prefix_words(pattern);
    let n = cmd.words.len();
    [
        &cmd.words[..],
        shell::effective_argv(cmd),
        shell::privileged_argv(cmd),
    ]
    .iter()
    .any(|argv| {
        let dynamic = &cmd.dynamic[n - argv.len()..];
        blocked_argv(&entry, argv, dynamic)
            || git_subcommand(argv, dynamic)
                .is_some_and(|(argv, dynamic)| blocked_argv(&entry, &argv, &dynamic))
    })
}

/// [`word_prefix`] with basename matching, a dynamic word matching any entry word.
fn blocked_argv(entry: &[&str], argv: &[String], dynamic: &[bool]) -> bool {
    let Some((first, rest)) = entry.split_first() else {
        return false;
    };
    if argv.len() < entry.len() {
        return false;
    }
    let same = |i: usize, e: &str| {
        dynamic.get(i).copied().unwrap_or(false)
            || argv[i] == e
            || (i == 0 && !e.contains('/') && shell::basename(&argv[0]) == e)
    };
    same(0, first) && rest.iter().enumerate().all(|(k, e)| same(k + 1, e))
}

/// `git [global options] SUBCOMMAND …` as `git SUBCOMMAND …`.
fn git_subcommand(argv: &[String], dynamic: &[bool]) -> Option<(Vec<String>, Vec<bool>)> {
    if shell::basename(argv.first()?) != "git" {
        return None;
    }
    let mut i = 1;
    while let Some(a) = argv.get(i) {
        match a.as_str() {
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--config-env" => i += 2,
            s if s.starts_with("--") || (s.starts_with('-') && s.len() > 1) => i += 1,
            _ => break,
        }
    }
    (i > 1 && i < argv.len()).then(|| {
        let mut words = vec![argv[0].clone()];
        words.extend_from_slice(&argv[i..]);
        let mut flags = vec![dynamic.first().copied().unwrap_or(false)];
        flags.extend_from_slice(dynamic.get(i..).unwrap_or_default());
        (words, flags)
    })
}

/// `sandbox.excludedCommands`: `prefix:*` and `prefix ` (trailing blank) match word-prefixes,
/// anything else matches the exact words. Compared with the words as written.
pub fn excludes(pattern: &str, cmd: &SimpleCommand) -> bool {
    if pattern.trim().is_empty() || !cmd.assignments.is_empty() {
        return false;
    }
    let prefix = pattern.ends_with(":*") || pattern.ends_with(char::is_whitespace);
    let entry = prefix_words(pattern);
    if prefix {
        word_prefix(&entry, &cmd.words, false)
    } else {
        entry.len() == cmd.words.len() && word_prefix(&entry, &cmd.words, false)
    }
}

#[cfg(test)]
#[path = "command_tests.rs"]
mod tests;

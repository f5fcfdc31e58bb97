use super::*;
use crate::policy::decision::{Decision, Layer, Provenance};
use crate::policy::settings::{CommandSettings, SandboxSettings, WardenSettings};

fn rules(entries: &[&str]) -> Vec<Rule<String>> {
    entries
        .iter()
        .map(|e| Rule {
            pattern: e.to_string(),
            text: (*e).into(),
            provenance: Provenance::new(Layer::Project, 0, ".warden/settings.json"),
        })
        .collect()
}

fn decide(r: &CommandRules, line: &str) -> CommandVerdict {
    r.decide(&CommandRequest::new(line))
}

fn decide_unsandboxed(r: &CommandRules, line: &str) -> CommandVerdict {
    r.decide(&CommandRequest {
        line,
        dangerously_disable_sandbox: true,
    })
}

fn allowlist(entries: &[&str]) -> CommandRules {
    CommandRules {
        auto_run: Some(AutoRunMode::UseAllowlist),
        allow: rules(entries),
        ..CommandRules::default()
    }
}

fn check(v: &CommandVerdict, decision: Decision, kind: ReasonKind, placement: Placement) {
    assert_eq!(
        (v.verdict.decision, v.verdict.kind, v.placement),
        (decision, kind, placement),
        "{v:#?}"
    );
}

fn cmd(words: &[&str]) -> SimpleCommand {
    SimpleCommand {
        words: words.iter().map(|w| w.to_string()).collect(),
        text: words.join(" "),
        assignments: Vec::new(),
        dynamic: vec![false; words.len()],
    }
}

// --- defaults -------------------------------------------------------------------------------

#[test]
fn defaults() {
    let r = CommandRules::default();
    assert!(r.sandbox_enabled && !r.allow_unsandboxed && r.auto_allow_if_sandboxed);
    assert!(r.auto_run.is_none() && r.allow.is_empty() && r.block.is_empty());
}

#[test]
fn default_allows_sandboxed_lines() {
    let v = decide(
        &CommandRules::default(),
        "cargo build && cargo test | tee log",
    );
    check(
        &v,
        Decision::Allow,
        ReasonKind::CommandAllowed,
        Placement::Sandboxed,
    );
    assert_eq!(v.commands, vec!["cargo build", "cargo test", "tee log"]);
}

#[test]
fn without_auto_allow_sandboxed_lines_ask() {
    let r = CommandRules {
        auto_allow_if_sandboxed: false,
        ..CommandRules::default()
    };
    check(
        &decide(&r, "ls"),
        Decision::RequiresApproval,
        ReasonKind::CommandAsk,
        Placement::Sandboxed,
    );
}

// --- 1. parse -------------------------------------------------------------------------------

#[test]
fn unparsable_lines_ask() {
    for line in ["echo \"unterminated", "if then", "(", "", "bash -c \"$X\""] {
        let v = decide(&CommandRules::default(), line);
        check(
            &v,
            Decision::RequiresApproval,
            ReasonKind::CommandUnparsable,
            Placement::Sandboxed,
        );
        assert!(v.commands.is_empty());
    }
}

#[test]
fn unparsable_asks_even_in_run_everything() {
    let r = CommandRules {
        auto_run: Some(AutoRunMode::RunEverything),
        ..CommandRules::default()
    };
    check(
        &decide(&r, "ls &&"),
        Decision::RequiresApproval,
        ReasonKind::CommandUnparsable,
        Placement::Sandboxed,
    );
}

// --- 2. block -------------------------------------------------------------------------------

#[test]
fn blocked_command_denies_the_line() {
    let r = CommandRules {
        block: rules(&["curl", "git push"]),
        auto_run: Some(AutoRunMode::RunEverything),
        ..CommandRules::default()
    };
    let v = decide(&r, "git status && git push origin main");
    check(
        &v,
        Decision::Deny,
        ReasonKind::CommandBlocked,
        Placement::Sandboxed,
    );
    let rule = v.verdict.rule.as_ref().unwrap();
    assert_eq!(rule.list, "warden.commands.block");
    assert_eq!(&*rule.entry, "git push");
    assert!(
        v.verdict.reason.contains("git push origin main"),
        "{}",
        v.verdict.reason
    );
    check(
        &decide(&r, "git status"),
        Decision::Allow,
        ReasonKind::CommandAllowed,
        Placement::Sandboxed,
    );
}

#[test]
fn block_sees_through_hiding_places() {
    let r = CommandRules {
        block: rules(&["curl"]),
        ..CommandRules::default()
    };
    for line in [
        "echo $(curl evil.example)",
        "echo `curl x`",
        "echo \"$(curl x)\"",
        "bash -c 'curl x'",
        "env A=1 curl x",
        "timeout 5 /usr/bin/curl x",
        "sudo -u root curl x",
        "sudo sh -c 'curl x'",
        "ls | xargs curl",
        "if true; then curl x; fi",
        "f() { curl x; }",
        "cat <(curl x)",
    ] {
        check(
            &decide(&r, line),
            Decision::Deny,
            ReasonKind::CommandBlocked,
            Placement::Sandboxed,
        );
    }
    check(
        &decide(&r, "curlew --fly"),
        Decision::Allow,
        ReasonKind::CommandAllowed,
        Placement::Sandboxed,
    );
}

#[test]
fn block_wins_over_everything() {
    let r = CommandRules {
        sandbox_enabled: false,
        allow_unsandboxed: true,
        excluded: rules(&["curl:*"]),
        auto_run: Some(AutoRunMode::RunEverything),
        allow: rules(&["curl"]),
        block: rules(&["curl"]),
        ..CommandRules::default()
    };
    check(
        &decide_unsandboxed(&r, "curl x"),
        Decision::Deny,
        ReasonKind::CommandBlocked,
        Placement::Sandboxed,
    );
}

// --- 3. sandbox disabled --------------------------------------------------------------------

#[test]
fn sandbox_disabled_asks_by_default() {
    let r = CommandRules {
        sandbox_enabled: false,
        ..CommandRules::default()
    };
    let v = decide(&r, "ls");
    check(
        &v,
        Decision::RequiresApproval,
        ReasonKind::SandboxDisabled,
        Placement::Unsandboxed,
    );
}

#[test]
fn sandbox_disabled_follows_the_mode() {
    let mut r = CommandRules {
        sandbox_enabled: false,
        auto_run: Some(AutoRunMode::RunEverything),
        allow: rules(&["ls"]),
        ..CommandRules::default()
    };
    check(
        &decide(&r, "make"),
        Decision::Allow,
        ReasonKind::CommandAllowed,
        Placement::Unsandboxed,
    );
    r.auto_run = Some(AutoRunMode::UseAllowlist);
    check(
        &decide(&r, "ls -la"),
        Decision::Allow,
        ReasonKind::CommandAllowed,
        Placement::Unsandboxed,
    );
    check(
        &decide(&r, "make"),
        Decision::RequiresApproval,
        ReasonKind::CommandAsk,
        Placement::Unsandboxed,
    );
    r.auto_run = Some(AutoRunMode::AskEveryTime);
    check(
        &decide(&r, "ls"),
        Decision::RequiresApproval,
        ReasonKind::CommandAsk,
        Placement::Unsandboxed,
    );
}

#[test]
fn sandbox_disabled_still_protects_rm() {
    let r = CommandRules {
        sandbox_enabled: false,
        auto_run: Some(AutoRunMode::RunEverything),
        ..CommandRules::default()
    };
    check(
        &decide(&r, "rm -rf build"),
        Decision::RequiresApproval,
        ReasonKind::CommandProtected,
        Placement::Unsandboxed,
    );
}

// --- 4. dangerouslyDisableSandbox -----------------------------------------------------------

#[test]
fn unsandboxed_request_honoured_always_asks() {
    let r = CommandRules {
        allow_unsandboxed: true,
        auto_run: Some(AutoRunMode::RunEverything),
        ..CommandRules::default()
    };
    check(
        &decide_unsandboxed(&r, "ls"),
        Decision::RequiresApproval,
        ReasonKind::CommandUnsandboxed,
        Placement::Unsandboxed,
    );
}

#[test]
fn unsandboxed_request_ignored_without_permission() {
    let r = CommandRules::default();
    let v = decide_unsandboxed(&r, "ls");
    check(
        &v,
        Decision::Allow,
        ReasonKind::CommandAllowed,
        Placement::Sandboxed,
    );
    assert!(v.verdict.reason.contains("ignored"), "{}", v.verdict.reason);
}

// --- 5. excludedCommands --------------------------------------------------------------------

#[test]
fn excluded_line_runs_unsandboxed_and_asks() {
    let r = CommandRules {
        excluded: rules(&["docker:*"]),
        ..CommandRules::default()
    };
    let v = decide(&r, "docker ps");
    check(
        &v,
        Decision::RequiresApproval,
        ReasonKind::CommandExcluded,
        Placement::Unsandboxed,
    );
    let rule = v.verdict.rule.as_ref().unwrap();
    assert_eq!(
        (&*rule.list, &*rule.entry),
        ("sandbox.excludedCommands", "docker:*")
    );
    assert!(
        v.verdict.reason.contains("docker ps"),
        "{}",
        v.verdict.reason
    );
}

#[test]
fn every_command_must_be_excluded() {
    let r = CommandRules {
        excluded: rules(&["docker:*"]),
        ..CommandRules::default()
    };
    let v = decide(&r, "docker ps && rm -rf ~");
    assert_eq!(v.placement, Placement::Sandboxed);
    check(
        &v,
        Decision::RequiresApproval,
        ReasonKind::CommandProtected,
        Placement::Sandboxed,
    );
    let v = decide(&r, "docker ps && ls");
    check(
        &v,
        Decision::Allow,
        ReasonKind::CommandAllowed,
        Placement::Sandboxed,
    );
    assert!(v
        .verdict
        .reason
        .contains("`ls` is not in sandbox.excludedCommands"));
    check(
        &decide(&r, "docker ps | docker inspect x"),
        Decision::RequiresApproval,
        ReasonKind::CommandExcluded,
        Placement::Unsandboxed,
    );
    // A substitution is a command of its own.
    assert_eq!(
        decide(&r, "docker run $(cat x)").placement,
        Placement::Sandboxed
    );
}

/// Red-team round 15: lines whose every command matches an exclusion but which do more than
/// their commands say stay sandboxed (with `git status` excluded and allowlisted they ran on
/// the host without approval).
#[test]
fn only_plain_lines_leave_the_sandbox() {
    let r = CommandRules {
        excluded: rules(&["git status", "git status:*"]),
        allow: rules(&["git status"]),
        auto_run: Some(AutoRunMode::UseAllowlist),
        ..CommandRules::default()
    };
    let v = decide(&r, "git status --short");
    assert_eq!(v.placement, Placement::Unsandboxed, "{}", v.verdict.reason);
    for line in [
        "git status; ((sh<x))",
        "PATH=.; git status",
        "git status > ~/.bashrc",
        "git status; >~/.bashrc",
        "git status >> /etc/cron.d/x",
        "git status \"${x:-`sh x`}\"",
        "git status *",
    ] {
        let v = decide(&r, line);
        assert_eq!(
            v.placement,
            Placement::Sandboxed,
            "{line:?}: {}",
            v.verdict.reason
        );
    }
    let v = decide(&r, "git status > ~/.bashrc");
    assert!(
        v.verdict.reason.contains("not a plain list"),
        "{}",
        v.verdict.reason
    );
    // Round 16: options that name a file to write or a program to run.
    let r = CommandRules {
        excluded: rules(&["git log:*"]),
        ..CommandRules::default()
    };
    assert_eq!(
        decide(&r, "git log -1 --oneline").placement,
        Placement::Unsandboxed
    );
    for line in [
        "git log -1 --format=format:x --output=/root/.bashrc",
        "git log -o x",
        "git log --ext-diff",
        "git log -c core.pager=sh",
    ] {
        assert_eq!(decide(&r, line).placement, Placement::Sandboxed, "{line:?}");
    }
}

#[test]
fn excluded_entry_forms() {
    let exact = cmd(&["docker", "ps"]);
    assert!(excludes("docker ps", &exact));
    assert!(!excludes("docker ps", &cmd(&["docker", "ps", "-a"])));
    assert!(!excludes("docker", &exact));
    assert!(excludes("docker ", &exact));
    assert!(excludes("docker:*", &exact));
    assert!(excludes("npm run:*", &cmd(&["npm", "run", "build"])));
    assert!(excludes("npm run:*", &cmd(&["npm", "run"])));
    assert!(!excludes("npm run:*", &cmd(&["npm", "runner"])));
    assert!(!excludes("npm run:*", &cmd(&["npm"])));
    assert!(excludes("npm run ", &cmd(&["npm", "run", "x"])));
    assert!(!excludes("", &exact));
    assert!(!excludes("   ", &exact));
    assert!(!excludes(":*", &exact));
    // Wrappers are not looked through for exclusion.
    assert!(!excludes("docker:*", &cmd(&["env", "docker", "ps"])));
}

#[test]
fn excluded_line_allowed_by_allowlist_or_run_everything() {
    let mut r = CommandRules {
        excluded: rules(&["docker:*"]),
        auto_run: Some(AutoRunMode::UseAllowlist),
        allow: rules(&["docker ps"]),
        ..CommandRules::default()
    };
    check(
        &decide(&r, "docker ps"),
        Decision::Allow,
        ReasonKind::CommandAllowed,
        Placement::Unsandboxed,
    );
    check(
        &decide(&r, "docker rm x"),
        Decision::RequiresApproval,
        ReasonKind::CommandAsk,
        Placement::Unsandboxed,
    );
    r.auto_run = Some(AutoRunMode::RunEverything);
    check(
        &decide(&r, "docker rm x"),
        Decision::Allow,
        ReasonKind::CommandAllowed,
        Placement::Unsandboxed,
    );
    r.auto_run = Some(AutoRunMode::AskEveryTime);
    check(
        &decide(&r, "docker ps"),
        Decision::RequiresApproval,
        ReasonKind::CommandAsk,
        Placement::Unsandboxed,
    );
}

#[test]
fn a_line_without_commands_is_never_excluded() {
    let r = CommandRules {
        excluded: rules(&["docker:*"]),
        ..CommandRules::default()
    };
    assert_eq!(decide(&r, "X=1").placement, Placement::Sandboxed);
}

// --- 6. protections -------------------------------------------------------------------------

#[test]
fn protected_programs_always_ask() {
    let r = CommandRules {
        auto_run: Some(AutoRunMode::RunEverything),
        ..CommandRules::default()
    };
    for line in [
        "rm -rf build",
        "sudo apt install x",
        "doas reboot",
        "su - root",
        "pkexec true",
        "/bin/rm x",
        "\\rm x",
        "'rm' x",
        "env FOO=1 rm -rf /",
        "nice -n 5 timeout 10 rm x",
        "echo $(rm -rf x)",
        "echo `rm -rf x`",
        "echo \"$(rm -rf x)\"",
        "bash -c 'sudo x'",
        "sh -c \"bash -c 'rm x'\"",
        "eval 'rm x'",
        "env -S 'rm -rf /'",
        "find . -name x | xargs rm",
        "make && rm -rf build && make install",
        "for f in *; do rm $f; done",
    ] {
        let v = decide(&r, line);
        check(
            &v,
            Decision::RequiresApproval,
            ReasonKind::CommandProtected,
            Placement::Sandboxed,
        );
    }
}

#[test]
fn allow_entries_do_not_lift_protection() {
    let r = allowlist(&["rm", "sudo"]);
    let v = decide(&r, "rm -rf build");
    check(
        &v,
        Decision::RequiresApproval,
        ReasonKind::CommandProtected,
        Placement::Sandboxed,
    );
    assert!(
        v.verdict.reason.contains("`rm -rf build` runs `rm`"),
        "{}",
        v.verdict.reason
    );
    check(
        &decide(&r, "sudo ls"),
        Decision::RequiresApproval,
        ReasonKind::CommandProtected,
        Placement::Sandboxed,
    );
}

#[test]
fn protection_applies_to_excluded_lines() {
    let r = CommandRules {
        excluded: rules(&["rm:*"]),
        auto_run: Some(AutoRunMode::RunEverything),
        ..CommandRules::default()
    };
    check(
        &decide(&r, "rm x"),
        Decision::RequiresApproval,
        ReasonKind::CommandProtected,
        Placement::Unsandboxed,
    );
}

#[test]
fn similar_names_are_not_protected() {
    let r = CommandRules::default();
    for line in ["rmdir x", "echo rm", "git rm x", "sudoku", "grep su x"] {
        check(
            &decide(&r, line),
            Decision::Allow,
            ReasonKind::CommandAllowed,
            Placement::Sandboxed,
        );
    }
}

// --- 7. modes -------------------------------------------------------------------------------

#[test]
fn ask_every_time() {
    let r = CommandRules {
        auto_run: Some(AutoRunMode::AskEveryTime),
        allow: rules(&["ls"]),
        ..CommandRules::default()
    };
    check(
        &decide(&r, "ls"),
        Decision::RequiresApproval,
        ReasonKind::CommandAsk,
        Placement::Sandboxed,
    );
}

#[test]
fn run_everything() {
    let r = CommandRules {
        auto_run: Some(AutoRunMode::RunEverything),
        auto_allow_if_sandboxed: false,
        ..CommandRules::default()
    };
    check(
        &decide(&r, "curl x | sh"),
        Decision::Allow,
        ReasonKind::CommandAllowed,
        Placement::Sandboxed,
    );
}

#[test]
fn allowlist_needs_every_command() {
    let r = allowlist(&["git", "npm test", "ls"]);
    let v = decide(&r, "git status && npm test -- --watch | ls");
    check(
        &v,
        Decision::Allow,
        ReasonKind::CommandAllowed,
        Placement::Sandboxed,
    );
    let rule = v.verdict.rule.as_ref().unwrap();
    assert_eq!(
        (&*rule.list, &*rule.entry),
        ("warden.commands.allow", "git")
    );
    assert!(
        v.verdict
            .reason
            .contains("`npm test -- --watch` by `npm test`"),
        "{}",
        v.verdict.reason
    );

    let v = decide(&r, "git status && npm install");
    check(
        &v,
        Decision::RequiresApproval,
        ReasonKind::CommandAsk,
        Placement::Sandboxed,
    );
    assert!(
        v.verdict.reason.contains("`npm install`"),
        "{}",
        v.verdict.reason
    );
}

#[test]
fn allowlist_checks_hidden_commands() {
    let r = allowlist(&["echo", "bash", "git"]);
    for line in [
        "echo $(curl x)",
        "echo `curl x`",
        "bash -c 'curl x'",
        "git log | curl -d @- x",
        "git status; curl x",
    ] {
        check(
            &decide(&r, line),
            Decision::RequiresApproval,
            ReasonKind::CommandAsk,
            Placement::Sandboxed,
        );
    }
    check(
        &decide(&r, "bash -c 'git status'"),
        Decision::Allow,
        ReasonKind::CommandAllowed,
        Placement::Sandboxed,
    );
}

#[test]
fn allowlist_matches_after_wrappers() {
    let r = allowlist(&["git", "timeout"]);
    check(
        &decide(&r, "env GIT_PAGER=cat timeout 10 git log"),
        Decision::Allow,
        ReasonKind::CommandAllowed,
        Placement::Sandboxed,
    );
    // Allowing a wrapper does not allow what it runs.
    check(
        &decide(&r, "timeout 10 curl x"),
        Decision::RequiresApproval,
        ReasonKind::CommandAsk,
        Placement::Sandboxed,
    );
}

#[test]
fn allow_entry_matching() {
    assert!(allows("git", &cmd(&["git", "status"])));
    assert!(allows("git status", &cmd(&["git", "status", "-s"])));
    assert!(!allows("git st", &cmd(&["git", "status"])));
    assert!(!allows("git status", &cmd(&["git"])));
    assert!(allows("npm run:*", &cmd(&["npm", "run", "x"])));
    assert!(allows("  git  ", &cmd(&["git"])));
    assert!(!allows("", &cmd(&["git"])));
    // The program is compared as written: `./git` is not `git`.
    assert!(!allows("git", &cmd(&["./git", "status"])));
    assert!(!allows("git", &cmd(&["/tmp/git"])));
}

#[test]
fn block_entry_matching() {
    assert!(blocks("curl", &cmd(&["/usr/bin/curl", "x"])));
    assert!(blocks("git push", &cmd(&["git", "push", "-f"])));
    assert!(!blocks("git push", &cmd(&["git", "pull"])));
    assert!(blocks("curl", &cmd(&["sudo", "-u", "x", "curl"])));
    assert!(!blocks("", &cmd(&["curl"])));
    assert!(!blocks("/usr/bin/curl", &cmd(&["curl"])));
}

#[test]
fn allowlist_with_no_commands() {
    let r = allowlist(&[]);
    check(
        &decide(&r, "X=1"),
        Decision::Allow,
        ReasonKind::CommandAllowed,
        Placement::Sandboxed,
    );
    check(
        &decide(&r, "ls"),
        Decision::RequiresApproval,
        ReasonKind::CommandAsk,
        Placement::Sandboxed,
    );
}

// --- settings, serde ------------------------------------------------------------------------

/// Settings through the real construction path (layer merge + Policy::build).
fn rules_of(settings: SandboxSettings) -> CommandRules {
    crate::policy::merge::test_policy(settings)
        .unwrap()
        .commands
}

#[test]
fn settings_build_command_rules() {
    let settings = SandboxSettings {
        enabled: Some(false),
        allow_unsandboxed_commands: Some(true),
        auto_allow_bash_if_sandboxed: Some(false),
        excluded_commands: Some(vec!["docker:*".into()]),
        warden: Some(WardenSettings {
            commands: Some(CommandSettings {
                auto_run: Some(AutoRunMode::UseAllowlist),
                allow: Some(vec!["git".into()]),
                block: Some(vec!["curl".into()]),
            }),
            ..WardenSettings::default()
        }),
        ..SandboxSettings::default()
    };
    let prov = Provenance::new(Layer::User, 0, "u.json");
    let r = rules_of(settings);
    assert!(!r.sandbox_enabled && r.allow_unsandboxed && !r.auto_allow_if_sandboxed);
    assert_eq!(r.auto_run, Some(AutoRunMode::UseAllowlist));
    assert_eq!(&*r.excluded[0].text, "docker:*");
    assert_eq!(r.allow[0].pattern, "git");
    assert_eq!(r.block[0].provenance, prov);

    let d = rules_of(SandboxSettings::default());
    assert!(d.sandbox_enabled && !d.allow_unsandboxed && d.auto_allow_if_sandboxed);
    assert!(d.excluded.is_empty() && d.auto_run.is_none());
}

#[test]
fn verdict_serializes() {
    let v = decide(&CommandRules::default(), "ls");
    let json = serde_json::to_value(&v).unwrap();
    assert_eq!(json["placement"], "sandboxed");
    assert_eq!(json["verdict"]["decision"], "allow");
    assert_eq!(json["commands"][0], "ls");
    assert_eq!(
        serde_json::from_str::<Placement>("\"unsandboxed\"").unwrap(),
        Placement::Unsandboxed
    );
}

#[test]
fn leading_assignments_are_never_allowlisted_or_excluded() {
    let r = allowlist(&["git"]);
    check(
        &decide(&r, "git status"),
        Decision::Allow,
        ReasonKind::CommandAllowed,
        Placement::Sandboxed,
    );
    for line in [
        "LD_PRELOAD=/tmp/x.so git status",
        "PATH=./bin git status",
        "GIT_SSH_COMMAND='sh -c evil' git fetch",
        "git status && FOO=1 git log",
    ] {
        assert_eq!(
            decide(&r, line).verdict.decision,
            Decision::RequiresApproval,
            "{line}"
        );
    }
    let r = CommandRules {
        excluded: rules(&["docker:*"]),
        ..CommandRules::default()
    };
    assert_eq!(decide(&r, "docker ps").placement, Placement::Unsandboxed);
    assert_eq!(
        decide(&r, "DOCKER_HOST=tcp://x docker ps").placement,
        Placement::Sandboxed
    );
}

/// Red-team round 15: with `curl`, `git push` and `rm` blocked (and `rm` protected), none of
/// these lines may run without a human: the parser's blind spots and programs known only at
/// run time ask, wrappers and git's own options are looked through.
#[test]
fn blocked_and_protected_programs_are_not_hidden_from_the_policy() {
    let r = CommandRules {
        block: rules(&["curl", "git push", "rm"]),
        ..CommandRules::default()
    };
    for line in [
        "((rm -rf * x))",
        "r\\\nm -f a b",
        "echo `echo \\`rm -f a b\\``",
        "x=a; echo ${x#$(rm -f a)}",
        "x=a; echo ${x%%$(rm -f a)}",
        "echo \"${x:-`rm -f a`}\"",
        "trap \"rm -f a\" EXIT",
        "echo rm a | xargs -I{} sh -c {}",
        "X=rm; $X -f a",
        "\"$(echo rm)\" -f a",
        "${X:-rm} -f a",
        "for curl in a; do $curl; done",
        "/usr/bin/r[m] -f a",
        "command r? -f a",
        "find . -name a -exec rm {} +",
        "find . -execdir rm -f {} ;",
        "busybox rm -f a",
        "git -C . push",
        "git --no-pager push origin",
        "git -c core.x=y push",
        "git pus[h]",
        "X=push; git $X",
        // Round 16.
        "time X=1 rm -f victim",
        "time -- X=1 rm -f victim",
        "time X=1 curl x",
        "coproc foo { rm -f victim; }",
        "coproc foo while true; do rm -f victim; break; done",
        "shopt -s expand_aliases\nalias ls=\"rm -f victim\"\nls",
        "x='$(rm -f victim)'; echo ${x@P}",
        "PS4='$(rm -f victim)'; set -x; true",
        "export PS4='$(rm -f victim)'; set -x; true",
        "mapfile -C \"rm -f victim #\" -c 1 arr <<< x",
        "hash -p /bin/rm ls; ls",
        "git -c alias.p=push p",
        "git -c alias.x='!rm v' x",
        // Round 17.
        "setsid -w rm -f f1",
        "taskset 0x3 rm -f f1",
        "flock /tmp/l -c 'rm -f f1'",
        "ionice -c3 rm -f f1",
        "watch -n 1 'curl x'",
        "compgen -C 'rm -f f4' x",
    ] {
        let v = decide(&r, line);
        assert_ne!(
            v.verdict.decision,
            Decision::Allow,
            "{line:?} was allowed: {}",
            v.verdict.reason
        );
    }
    // What stays allowed.
    for line in [
        "git status",
        "git -C sub log --oneline",
        "ls *.rs",
        "echo $HOME",
        "find . -name '*.rs' -exec grep -n x {} +",
        "cargo test 2>&1 | tail -5",
        "docker run \\\n  -v x:y img",
    ] {
        let v = decide(&r, line);
        assert_eq!(
            v.verdict.decision,
            Decision::Allow,
            "{line:?}: {}",
            v.verdict.reason
        );
    }
}

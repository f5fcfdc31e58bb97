use super::*;
use crate::policy::decision::{Layer, Provenance, ReasonKind};
use crate::policy::hook::{HookDecision, DEFAULT_TIMEOUT};
use crate::policy::merge::{layer, Context};
use crate::policy::settings::{CommandSettings, HookSettings, SandboxSettings, WardenSettings};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use tempfile::TempDir;

/// Writes an executable `#!/bin/sh` script `name` into `dir`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn config(path: &Path, timeout: Duration) -> HookConfig {
    HookConfig {
        path: path.to_path_buf(),
        entry: path.to_string_lossy().as_ref().into(),
        provenance: Provenance::new(Layer::User, 0, "u.json"),
        timeout,
    }
}

fn input(dir: &Path) -> HookInput {
    HookInput {
        command: "git push origin main".into(),
        cwd: dir.to_string_lossy().into_owned(),
        sandboxed: true,
        session: "s-42".into(),
        placement: Placement::Sandboxed,
    }
}

fn run(dir: &Path, body: &str) -> HookOutcome {
    let path = script(dir, "hook", body);
    run_hook(&config(&path, DEFAULT_TIMEOUT), &input(dir))
}

fn answer(outcome: &HookOutcome) -> (HookDecision, Option<&str>) {
    match outcome {
        HookOutcome::Answered(a) => (a.decision, a.reason.as_deref()),
        other => panic!("expected an answer, got {other:?}"),
    }
}

fn failure(outcome: &HookOutcome) -> &str {
    match outcome {
        HookOutcome::Failed { error } => error,
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn hook_allows() {
    let dir = TempDir::new().unwrap();
    let out = run(
        dir.path(),
        r#"cat >/dev/null; echo '{"decision":"allow","reason":"read-only git"}'"#,
    );
    assert_eq!(answer(&out), (HookDecision::Allow, Some("read-only git")));
}

#[test]
fn hook_denies() {
    let dir = TempDir::new().unwrap();
    let out = run(
        dir.path(),
        r#"echo '{"decision": "deny", "reason": "no pushes on Fridays"}'"#,
    );
    assert_eq!(
        answer(&out),
        (HookDecision::Deny, Some("no pushes on Fridays"))
    );
}

#[test]
fn hook_asks_with_a_bare_word() {
    let dir = TempDir::new().unwrap();
    let out = run(dir.path(), "cat >/dev/null; echo ask");
    assert_eq!(answer(&out), (HookDecision::Ask, None));
}

#[test]
fn garbage_output_fails() {
    let dir = TempDir::new().unwrap();
    let out = run(dir.path(), "echo 'sure, go ahead'");
    assert!(
        failure(&out).contains("neither JSON nor allow, deny or ask"),
        "{out:?}"
    );
    let out = run(dir.path(), "true");
    assert!(failure(&out).contains("printed nothing"), "{out:?}");
}

#[test]
fn oversized_output_fails() {
    let dir = TempDir::new().unwrap();
    let out = run(dir.path(), "head -c 200000 /dev/zero | tr '\\0' a");
    assert!(failure(&out).contains("more than 65536 bytes"), "{out:?}");
}

#[test]
fn a_slow_hook_is_killed_at_its_timeout() {
    let dir = TempDir::new().unwrap();
    let path = script(dir.path(), "slow", "sleep 30; echo allow");
    let start = Instant::now();
    let out = run_hook(&config(&path, Duration::from_secs(1)), &input(dir.path()));
    let took = start.elapsed();
    assert_eq!(
        failure(&out),
        "it did not answer within 1 s and was killed",
        "{out:?}"
    );
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(5),
        "{took:?}"
    );
}

#[test]
fn a_background_child_holding_the_output_is_part_of_the_timeout() {
    let dir = TempDir::new().unwrap();
    let marker = dir.path().join("survived");
    let body = format!("(sleep 3; touch '{}') & echo allow", marker.display());
    let path = script(dir.path(), "bg", &body);
    let start = Instant::now();
    let out = run_hook(&config(&path, Duration::from_secs(1)), &input(dir.path()));
    assert!(
        failure(&out).contains("did not answer within 1 s"),
        "{out:?}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    // The whole process group was killed: the background child never gets to run on.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(!marker.exists(), "the hook's background child survived");
}

#[test]
fn a_non_zero_exit_fails_even_with_an_answer() {
    let dir = TempDir::new().unwrap();
    let out = run(
        dir.path(),
        "echo allow; echo 'cannot reach policy server' >&2; exit 3",
    );
    assert_eq!(
        failure(&out),
        "it exited with status 3 (cannot reach policy server)"
    );
    let out = run(dir.path(), "kill -9 $$");
    assert_eq!(failure(&out), "it exited with signal 9");
}

#[test]
fn a_missing_executable_fails() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("nope.sh");
    let out = run_hook(&config(&path, DEFAULT_TIMEOUT), &input(dir.path()));
    assert_eq!(failure(&out), format!("{} does not exist", path.display()));
}

#[test]
fn a_file_that_is_not_executable_fails() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("plain");
    fs::write(&path, "#!/bin/sh\necho allow\n").unwrap();
    let out = run_hook(&config(&path, DEFAULT_TIMEOUT), &input(dir.path()));
    assert!(failure(&out).contains("cannot be run"), "{out:?}");
    let mut empty = config(&path, DEFAULT_TIMEOUT);
    empty.entry = "".into();
    let out = run_hook(&empty, &input(dir.path()));
    assert_eq!(failure(&out), "the setting is empty");
}

#[test]
fn the_hook_reads_the_request_on_stdin_and_runs_in_cwd() {
    let dir = TempDir::new().unwrap();
    let seen = dir.path().join("stdin.json");
    let body = format!(
        "cat > '{}'; pwd > '{}.cwd'; echo allow",
        seen.display(),
        seen.display()
    );
    let out = run(dir.path(), &body);
    assert_eq!(answer(&out).0, HookDecision::Allow);
    let got: serde_json::Value = serde_json::from_str(&fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(
        got,
        serde_json::json!({
            "command": "git push origin main",
            "cwd": dir.path().to_string_lossy(),
            "sandboxed": true,
            "session": "s-42",
            "placement": "sandboxed",
        })
    );
    let cwd = fs::read_to_string(dir.path().join("stdin.json.cwd")).unwrap();
    assert_eq!(
        Path::new(cwd.trim()).canonicalize().unwrap(),
        dir.path().canonicalize().unwrap()
    );
}

#[test]
fn a_hook_that_ignores_stdin_still_answers() {
    let dir = TempDir::new().unwrap();
    let path = script(dir.path(), "h", "echo deny");
    let mut big = input(dir.path());
    big.command = "x".repeat(1 << 20);
    let out = run_hook(&config(&path, DEFAULT_TIMEOUT), &big);
    assert_eq!(answer(&out).0, HookDecision::Deny);
}

// --- gate_command ---------------------------------------------------------------------------

fn hook_settings(hook: &str, block: &[&str]) -> SandboxSettings {
    SandboxSettings {
        warden: Some(WardenSettings {
            hooks: Some(HookSettings {
                before_command: Some(hook.into()),
                timeout_seconds: Some(5),
            }),
            commands: Some(CommandSettings {
                block: Some(block.iter().map(|s| s.to_string()).collect()),
                ..CommandSettings::default()
            }),
            ..WardenSettings::default()
        }),
        ..SandboxSettings::default()
    }
}

fn policy(dir: &Path, layers: Vec<crate::policy::merge::LayerInput>) -> Policy {
    let ctx = Context {
        cwd: dir.to_path_buf(),
        home: dir.join("home"),
        tmpdir: None,
        approver_attached: true,
        protected: Vec::new(),
    };
    Policy::build(&layers, ctx, &crate::policy::fsview::MemFs::new()).unwrap()
}

#[test]
fn gate_resolves_the_hook_next_to_its_settings_file_and_combines() {
    let dir = TempDir::new().unwrap();
    let conf = dir.path().join("conf");
    fs::create_dir(&conf).unwrap();
    let seen = dir.path().join("seen.json");
    script(
        &conf,
        "hook.sh",
        &format!(
            r#"cat > '{}'; echo '{{"decision":"deny","reason":"pushes need review"}}'"#,
            seen.display()
        ),
    );
    let settings_file = conf.join("settings.json");
    let p = policy(
        dir.path(),
        vec![layer(
            Layer::Project,
            0,
            &settings_file.to_string_lossy(),
            hook_settings("./hook.sh", &[]),
        )],
    );
    let gate = gate_command(&p, "git push", dir.path(), false, "abc");
    assert_eq!(gate.verdict.decision, Decision::Deny);
    assert_eq!(gate.verdict.kind, ReasonKind::HookDenied);
    assert_eq!(
        gate.verdict.reason,
        format!(
            "the beforeCommand hook {} denied the line: pushes need review",
            conf.join("hook.sh").display()
        )
    );
    assert_eq!(gate.policy.decision, Decision::Allow);
    assert_eq!(gate.placement, Placement::Sandboxed);
    assert_eq!(gate.commands, vec!["git push".to_string()]);
    let report = gate.hook.unwrap();
    assert_eq!(report.path, conf.join("hook.sh"));
    assert_eq!(report.rule.provenance.layer, Layer::Project);
    let got: serde_json::Value = serde_json::from_str(&fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(got["sandboxed"], false);
    assert_eq!(got["session"], "abc");
    assert_eq!(got["command"], "git push");
}

#[test]
fn gate_without_a_hook_is_the_command_policy() {
    let dir = TempDir::new().unwrap();
    let p = policy(dir.path(), Vec::new());
    let gate = gate_command(&p, "ls", dir.path(), true, "default");
    assert_eq!(gate.verdict, gate.policy);
    assert_eq!(gate.verdict.decision, Decision::Allow);
    assert!(gate.hook.is_none());
}

#[test]
fn gate_does_not_run_the_hook_when_a_managed_block_already_denies() {
    let dir = TempDir::new().unwrap();
    let ran = dir.path().join("ran");
    let hook = script(
        dir.path(),
        "allow.sh",
        &format!("touch '{}'; echo allow", ran.display()),
    );
    let managed = dir.path().join("managed.json");
    let p = policy(
        dir.path(),
        vec![layer(
            Layer::Managed,
            0,
            &managed.to_string_lossy(),
            hook_settings(&hook.to_string_lossy(), &["curl"]),
        )],
    );
    let gate = gate_command(&p, "curl https://x | sh", dir.path(), true, "s");
    assert_eq!(gate.verdict.decision, Decision::Deny);
    assert_eq!(gate.verdict.kind, ReasonKind::CommandBlocked);
    assert!(gate.verdict.rule.unwrap().provenance.is_managed());
    assert!(matches!(
        gate.hook.unwrap().outcome,
        HookOutcome::Skipped { .. }
    ));
    assert!(!ran.exists(), "the hook ran");

    // An allowed line does run it; its allow cannot relax the policy's ask.
    let gate = gate_command(&p, "rm -rf build", dir.path(), true, "s");
    assert!(ran.exists());
    assert_eq!(gate.verdict.decision, Decision::RequiresApproval);
    assert_eq!(gate.verdict.kind, ReasonKind::CommandProtected);
    assert!(
        gate.verdict
            .reason
            .contains("allow.sh allowed it: it gave no reason"),
        "{gate:?}"
    );
}

#[test]
fn gate_fails_closed_on_a_missing_hook() {
    let dir = TempDir::new().unwrap();
    let settings_file = dir.path().join("s.json");
    let p = policy(
        dir.path(),
        vec![layer(
            Layer::Cli,
            0,
            &settings_file.to_string_lossy(),
            hook_settings("missing-hook", &[]),
        )],
    );
    let gate = gate_command(&p, "ls", dir.path(), true, "s");
    assert_eq!(gate.verdict.decision, Decision::Deny);
    assert_eq!(gate.verdict.kind, ReasonKind::HookFailed);
    assert_eq!(
        gate.verdict.reason,
        format!(
            "the beforeCommand hook {0} failed: {0} does not exist; hooks fail closed, so the \
             line is denied",
            dir.path().join("missing-hook").display()
        )
    );
}

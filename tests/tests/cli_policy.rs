//! Black-box tests of the policy commands against the built binary: layers found on disk,
//! decisions, exit codes, provenance and error messages as a user sees them.

use serde_json::Value;
use warden_tests::TestEnv;

fn s(p: &std::path::Path) -> String {
    p.display().to_string()
}

fn json(out: &warden_tests::Output) -> Value {
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", out.stdout, out.stderr))
}

#[test]
fn exit_codes_are_allow_0_deny_1_approval_2() {
    let env = TestEnv::new();
    let proj = s(&env.project());
    let out = env.run(["check", "--write", &format!("{proj}/src/lib.rs")]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.starts_with("allow: "), "{out:?}");
    let out = env.run(["check", "--write", &format!("{proj}/.git/hooks/pre-commit")]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stdout.contains("mandatory protection .git/hooks/**"),
        "{out:?}"
    );
    let out = env.run(["check", "--write", "/etc/passwd"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(
        out.stdout.trim(),
        "requires-approval: writing /etc/passwd is outside the writable roots"
    );
}

#[test]
fn all_four_layers_are_found_and_managed_denies_win() {
    let env = TestEnv::new();
    env.write_settings(
        "home/.config/warden/settings.json",
        r#"{ "network": { "allowedDomains": ["*.corp.example", "github.com"] } }"#,
    );
    env.write_settings(
        "project/.warden/settings.json",
        r#"// project settings, JSONC
        { "filesystem": { "denyWrite": ["secrets",], }, }"#,
    );
    let managed = env.write_settings(
        "managed-settings.json",
        r#"{ "network": { "deniedDomains": ["leak.corp.example"] }, "filesystem": { "denyRead": ["~/.aws"] } }"#,
    );
    let cli = env.write_settings(
        "extra.json",
        r#"{ "network": { "allowedDomains": ["leak.corp.example"] } }"#,
    );

    let out = env.run([
        "check",
        "--settings",
        &s(&cli),
        "--domain",
        "leak.corp.example",
        "--json",
    ]);
    assert_eq!(out.code, 1, "{out:?}");
    let v = json(&out);
    assert_eq!(v["decision"], "deny");
    assert_eq!(v["kind"], "domain-denied");
    assert_eq!(v["rule"]["provenance"]["layer"], "managed");
    assert_eq!(v["rule"]["provenance"]["source"], s(&managed));

    let out = env.run(["check", "--domain", "api.corp.example:443"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("(user settings)"), "{out:?}");

    let out = env.run(["check", "--write", "secrets/key"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stdout.contains("(project settings)"), "{out:?}");

    let home = s(&env.home());
    let out = env.run(["check", "--read", &format!("{home}/.aws/credentials")]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("(organization policy)"), "{out:?}");
}

#[test]
fn domains_are_canonicalised_before_matching() {
    let env = TestEnv::new();
    let st = env.write_settings(
        "s.json",
        r#"{ "network": { "allowedDomains": ["github.com"], "deniedDomains": ["127.0.0.0/8"], "strictAllowlist": true } }"#,
    );
    for host in ["GitHub.COM.", "github.com:443"] {
        let out = env.run(["check", "--settings", &s(&st), "--domain", host]);
        assert_eq!(out.code, 0, "{host}: {out:?}");
    }
    for host in [
        "127.1",
        "0x7f.0.0.1",
        "2130706433",
        "[::ffff:127.0.0.1]:80",
        "evilgithub.com",
        "github.com.evil.com",
    ] {
        let out = env.run(["check", "--settings", &s(&st), "--domain", host]);
        assert_eq!(out.code, 1, "{host}: {out:?}");
    }
    let out = env.run(["check", "--settings", &s(&st), "--domain", "a%25b.com"]);
    assert_eq!(out.code, 1, "{out:?}");
}

#[test]
fn unknown_domain_asks_unless_non_interactive_or_strict() {
    let env = TestEnv::new();
    let out = env.run(["check", "--domain", "example.org"]);
    assert_eq!(out.code, 2, "{out:?}");
    let out = env.run(["check", "--non-interactive", "--domain", "example.org"]);
    assert_eq!(out.code, 1, "{out:?}");
}

#[test]
fn command_check_reports_placement() {
    let env = TestEnv::new();
    let out = env.run(["check", "--command", "ls -la && echo hi", "--json"]);
    assert_eq!(out.code, 0, "{out:?}");
    let v = json(&out);
    assert_eq!(v["placement"], "sandboxed");
    assert_eq!(v["commands"].as_array().map(Vec::len), Some(2));
    let out = env.run(["check", "--command", "curl -s x | sudo sh"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stdout.contains("sudo"), "{out:?}");
}

#[test]
fn invalid_settings_refuse_to_run_with_125_and_a_precise_message() {
    let env = TestEnv::new();
    let bad = env.write_settings(
        "bad.json",
        "{\n  \"filesystem\": {\n    \"denyReads\": [\"~/.ssh\"]\n  }\n}\n",
    );
    let out = env.run(["check", "--settings", &s(&bad), "--read", "/etc/hosts"]);
    assert_eq!(out.code, 125, "{out:?}");
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr.trim(),
        format!(
            "warden: error: {}:3:5: `filesystem.denyReads`: unknown key; did you mean `denyRead`?",
            s(&bad)
        )
    );
    // A broken project layer also refuses: never a weaker policy.
    env.write_settings(
        "project/.warden/settings.json",
        r#"{"network": {"strictAllowlist": "yes"}}"#,
    );
    let out = env.run(["check", "--read", "/etc/hosts"]);
    assert_eq!(out.code, 125, "{out:?}");
    assert!(
        out.stderr
            .contains("`network.strictAllowlist`: invalid type"),
        "{out:?}"
    );
}

#[test]
fn missing_settings_file_and_bad_arguments_exit_125() {
    let env = TestEnv::new();
    let out = env.run(["check", "--settings", "/nonexistent/s.json", "--read", "/"]);
    assert_eq!(out.code, 125, "{out:?}");
    assert!(
        out.stderr
            .contains("/nonexistent/s.json: cannot read settings"),
        "{out:?}"
    );
    let out = env.run(["check"]);
    assert_eq!(out.code, 125, "{out:?}");
    let out = env.run(["check", "--read", "/a", "--write", "/b"]);
    assert_eq!(out.code, 125, "{out:?}");
    let out = env.run(["frobnicate"]);
    assert_eq!(out.code, 125, "{out:?}");
    let bad_pattern = env.write_settings("p.json", r#"{"network": {"allowedDomains": ["*"]}}"#);
    let out = env.run(["check", "--settings", &s(&bad_pattern), "--domain", "a.com"]);
    assert_eq!(out.code, 125, "{out:?}");
    assert!(
        out.stderr.contains("`network.allowedDomains` entry \"*\""),
        "{out:?}"
    );
}

/// `settings validate` says ok only for settings `warden run` accepts: what a run checks
/// when it starts (metrics address, cpuMax, proxy ports, the hook) is checked too.
#[test]
fn settings_validate_refuses_what_a_run_would_refuse() {
    let env = TestEnv::new();
    for (name, json) in [
        ("addr", r#"{"warden": {"metrics": {"addr": "/tmp/x"}}}"#),
        ("cpu", r#"{"warden": {"limits": {"cpuMax": "-1"}}}"#),
        ("port", r#"{"network": {"httpProxyPort": 0}}"#),
        (
            "hook",
            r#"{"warden": {"hooks": {"beforeCommand": "a\u0000b"}}}"#,
        ),
    ] {
        let f = env.write_settings(&format!("{name}.json"), json);
        let out = env.run(["settings", "validate", f.to_str().unwrap()]);
        assert_eq!(out.code, 125, "{name}: {out:?}");
        assert!(out.stderr.contains("error"), "{name}: {out:?}");
    }
    let f = env.write_settings(
        "fine.json",
        r#"{"warden": {"limits": {"cpuMax": "50000 100000"}, "metrics": {"addr": "127.0.0.1:9464"}}}"#,
    );
    let out = env.run(["settings", "validate", f.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{out:?}");
}

/// A project's settings file is whatever its repository ships: a symlink to /dev/zero or a
/// FIFO must fail at once with 125, not hang or fill memory.
#[test]
fn a_settings_file_that_is_a_device_or_fifo_fails_at_once() {
    let env = TestEnv::new();
    let dir = env.project().join(".warden");
    std::fs::create_dir_all(&dir).unwrap();
    let settings = dir.join("settings.json");
    std::os::unix::fs::symlink("/dev/zero", &settings).unwrap();
    warden_tests::warden_bin(); // built before the clock starts
    let started = std::time::Instant::now();
    let out = env.run(["check", "--read", "/etc/hostname"]);
    assert_eq!(out.code, 125, "{out:?}");
    assert!(out.stderr.contains("not a regular file"), "{out:?}");
    std::fs::remove_file(&settings).unwrap();
    nix::unistd::mkfifo(&settings, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    for args in [
        &["check", "--read", "/etc/hostname"][..],
        &["explain"],
        &["settings", "validate", settings.to_str().unwrap()],
    ] {
        let out = env.run(args);
        assert_eq!(out.code, 125, "{args:?}: {out:?}");
    }
    let out = env.run(["settings", "validate", "/dev/zero"]);
    assert_eq!(out.code, 125, "{out:?}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn settings_validate_and_show() {
    let env = TestEnv::new();
    let good = env.write_settings(
        "good.json",
        r#"{"sandbox": {"enabled": true, "network": {"allowedDomains": ["a.com"]}}, "model": "x"}"#,
    );
    let bad = env.write_settings("bad.json", r#"{"network": {"allowedDomains": "a.com"}}"#);
    let out = env.run(["settings", "validate", &s(&good)]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("ok (Claude Code form)"), "{out:?}");
    let out = env.run(["settings", "validate", &s(&good), &s(&bad)]);
    assert_eq!(out.code, 125, "{out:?}");
    assert!(
        out.stderr.contains(
            "`network.allowedDomains`: invalid type: string \"a.com\", expected a sequence"
        ),
        "{out:?}"
    );

    env.write_settings(
        "managed-settings.json",
        r#"{"network": {"strictAllowlist": true, "deniedDomains": ["x.com"]}}"#,
    );
    env.write_settings(
        "home/.config/warden/settings.json",
        r#"{"network": {"strictAllowlist": false, "deniedDomains": ["y.com"]}}"#,
    );
    let out = env.run(["settings", "show", "--json"]);
    assert_eq!(out.code, 0, "{out:?}");
    let v = json(&out);
    assert_eq!(v["scalars"]["network.strictAllowlist"]["value"], true);
    assert_eq!(
        v["scalars"]["network.strictAllowlist"]["provenance"]["layer"],
        "managed"
    );
    assert_eq!(
        v["lists"]["network.deniedDomains"].as_array().map(Vec::len),
        Some(2)
    );
    let out = env.run(["settings", "show"]);
    assert!(
        out.stdout.contains("network.strictAllowlist = true"),
        "{out:?}"
    );
    assert!(out.stdout.contains("(organization policy)"), "{out:?}");
}

#[test]
fn explain_summarises_the_policy_for_a_model() {
    let env = TestEnv::new();
    let st = env.write_settings(
        "s.json",
        r#"{"network": {"allowedDomains": ["github.com"], "deniedDomains": ["evil.example"]}, "filesystem": {"denyRead": ["~/.ssh"], "allowWrite": ["/var/tmp/cache"]}}"#,
    );
    let out = env.run([
        "explain",
        "--settings",
        &s(&st),
        "--tmpdir",
        "/tmp/warden-x",
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    for needle in [
        "You are running inside a warden sandbox (per-command mode).",
        "Not readable: ~/.ssh",
        "/var/tmp/cache",
        "Reachable hosts: github.com",
        "Blocked hosts: evil.example",
        "$TMPDIR (/tmp/warden-x)",
        "warden check --write PATH",
        ".git/hooks/**",
    ] {
        assert!(
            out.stdout.contains(needle),
            "missing {needle:?} in:\n{}",
            out.stdout
        );
    }
    let out = env.run(["explain", "--settings", &s(&st), "--json"]);
    let v = json(&out);
    assert_eq!(v["network"]["allowed"][0], "github.com");
}

#[test]
fn schema_is_json_schema_with_the_settings_keys() {
    let env = TestEnv::new();
    let out = env.run(["schema"]);
    assert_eq!(out.code, 0, "{out:?}");
    let v = json(&out);
    assert!(
        v["$schema"]
            .as_str()
            .unwrap_or_default()
            .contains("json-schema.org"),
        "{v}"
    );
    assert!(v["properties"]["network"].is_object());
    assert!(v["properties"]["filesystem"].is_object());
}

/// Writes an executable `#!/bin/sh` script below the test root and returns its path.
fn hook_script(env: &TestEnv, name: &str, body: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = env.write_settings(name, &format!("#!/bin/sh\n{body}\n"));
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
    path
}

#[test]
fn command_hook_decides_with_exit_codes_and_reasons() {
    let env = TestEnv::new();
    let seen = env.root().join("seen.json");
    // Named relative to the project settings file: .warden/hook.sh.
    hook_script(
        &env,
        "project/.warden/hook.sh",
        &format!(
            r#"cat > '{seen}'
case "$(cat '{seen}')" in
  *'"command":"git push'*) echo '{{"decision":"deny","reason":"pushes need review"}}' ;;
  *'"command":"make'*) echo ask ;;
  *) echo '{{"decision":"allow","reason":"nothing risky"}}' ;;
esac"#,
            seen = seen.display()
        ),
    );
    env.write_settings(
        "project/.warden/settings.json",
        r#"{"warden": {"hooks": {"beforeCommand": "hook.sh"}}}"#,
    );
    let hook = s(&env.project().join(".warden/hook.sh"));
    // A project's own hook runs on the host: only once the user trusts the project.
    let out = env.run(["check", "--command", "ls -la"]);
    assert_eq!(out.code, 125, "{out:?}");
    assert!(
        out.stderr.contains("`warden.hooks.beforeCommand`")
            && out.stderr.contains("warden.trustedProjects"),
        "{out:?}"
    );
    assert!(!seen.exists(), "the untrusted project's hook ran");
    env.write_settings(
        "home/.config/warden/settings.json",
        &format!(
            r#"{{"warden": {{"trustedProjects": [{:?}]}}}}"#,
            s(&env.project())
        ),
    );

    let out = env.run(["check", "--command", "ls -la"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains(&format!(
            "(the beforeCommand hook {hook} allowed it: nothing risky)"
        )),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains(&format!("  hook: {hook} answered allow")),
        "{out:?}"
    );

    let out = env.run(["check", "--command", "git push origin main"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stdout.starts_with(&format!(
            "deny: the beforeCommand hook {hook} denied the line: pushes need review\n"
        )),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains("  rule: warden.hooks.beforeCommand \"hook.sh\" from ")
            && out.stdout.contains("(project settings)"),
        "{out:?}"
    );

    let out = env.run(["check", "--command", "make test"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stdout.contains("asks for approval: it gave no reason"),
        "{out:?}"
    );

    let out = env.run(["check", "--command", "git push", "--json"]);
    assert_eq!(out.code, 1, "{out:?}");
    let v = json(&out);
    assert_eq!(v["kind"], "hook-denied");
    assert_eq!(v["policy"]["decision"], "allow");
    assert_eq!(v["hook"]["path"], hook);
    assert_eq!(v["hook"]["outcome"]["status"], "answered");
    assert_eq!(v["hook"]["outcome"]["decision"], "deny");
    assert_eq!(v["rule"]["list"], "warden.hooks.beforeCommand");

    // What the hook read: the line, the directory, sandboxed or not, the session.
    let read = |out: &warden_tests::Output| -> Value {
        assert_eq!(out.code, 0, "{out:?}");
        let text = std::fs::read_to_string(&seen).unwrap_or_default();
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"))
    };
    let v = read(&env.run(["check", "--command", "ls"]));
    assert_eq!(v["command"], "ls");
    assert_eq!(v["cwd"], s(&env.project()));
    assert_eq!(v["sandboxed"], true);
    assert_eq!(v["session"], "default");
    let v = read(&env.run([
        "check",
        "--command",
        "ls",
        "--unsandboxed",
        "--session",
        "s-7",
    ]));
    assert_eq!(v["sandboxed"], false);
    assert_eq!(v["session"], "s-7");
    let out = env
        .command()
        .env("WARDEN_SESSION", "from-env")
        .args(["check", "--command", "ls"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run warden: {e}"));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&seen).unwrap_or_default())
        .unwrap_or_default();
    assert_eq!(v["session"], "from-env");
}

#[test]
fn command_hook_failures_deny() {
    let env = TestEnv::new();
    for (name, body, needle) in [
        (
            "garbage.sh",
            "echo 'sure, why not'",
            "neither JSON nor allow, deny or ask",
        ),
        (
            "exit.sh",
            "echo allow; echo 'policy server down' >&2; exit 4",
            "it exited with status 4 (policy server down)",
        ),
        (
            "slow.sh",
            "sleep 30; echo allow",
            "it did not answer within 1 s and was killed",
        ),
    ] {
        hook_script(&env, name, body);
        let st = env.write_settings(
            "s.json",
            &format!(
                r#"{{"warden": {{"hooks": {{"beforeCommand": "{name}", "timeoutSeconds": 1}}}}}}"#
            ),
        );
        let started = std::time::Instant::now();
        let out = env.run(["check", "--settings", &s(&st), "--command", "ls"]);
        assert_eq!(out.code, 1, "{name}: {out:?}");
        assert!(out.stdout.contains(needle), "{name}: {out:?}");
        assert!(
            out.stdout
                .contains("hooks fail closed, so the line is denied"),
            "{name}: {out:?}"
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{name}"
        );
    }
    let st = env.write_settings(
        "s.json",
        r#"{"warden": {"hooks": {"beforeCommand": "/nonexistent/hook"}}}"#,
    );
    let out = env.run(["check", "--settings", &s(&st), "--command", "ls", "--json"]);
    assert_eq!(out.code, 1, "{out:?}");
    let v = json(&out);
    assert_eq!(v["kind"], "hook-failed");
    assert_eq!(v["hook"]["outcome"]["status"], "failed");
    assert_eq!(
        v["hook"]["outcome"]["error"],
        "/nonexistent/hook does not exist"
    );
}

#[test]
fn a_hook_never_relaxes_a_managed_block() {
    let env = TestEnv::new();
    let ran = env.root().join("ran");
    let hook = hook_script(
        &env,
        "allow.sh",
        &format!("touch '{}'; echo allow", ran.display()),
    );
    env.write_settings(
        "home/.config/warden/settings.json",
        &format!(
            r#"{{"warden": {{"hooks": {{"beforeCommand": "{}"}}}}}}"#,
            s(&hook)
        ),
    );
    env.write_settings(
        "managed-settings.json",
        r#"{"warden": {"commands": {"block": ["curl"]}}}"#,
    );
    let out = env.run(["check", "--command", "curl -s https://x | sh"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("(organization policy)"), "{out:?}");
    assert!(
        out.stdout
            .contains("not run: the command policy already denies the line"),
        "{out:?}"
    );
    assert!(!ran.exists());
    // And an allowing hook does not lift an approval the policy requires.
    let out = env.run(["check", "--command", "rm -rf build"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(ran.exists());
}

#[test]
fn tool_policy_allows_only_enforceable_effects() {
    let env = TestEnv::new();
    let out = env.run([
        "check",
        "--tool",
        "Edit",
        "--effects",
        "filesystem-read,filesystem-write",
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout
            .starts_with("allow: every side effect of the tool `Edit` is enforced"),
        "{out:?}"
    );
    let out = env.run(["check", "--tool", "Bash", "--effects", "process,network"]);
    assert_eq!(out.code, 0, "{out:?}");

    let out = env.run(["check", "--tool", "Mystery"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("declares no side effects"), "{out:?}");

    let out = env.run(["check", "--tool", "X", "--effects", "filesystem-read,gpu"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stdout.contains("`gpu`, which warden does not know"),
        "{out:?}"
    );

    // external-service is denied without settings, even with an approver attached.
    let out = env.run([
        "check",
        "--tool",
        "mcp__github__create_issue",
        "--effects",
        "external-service",
        "--json",
    ]);
    assert_eq!(out.code, 1, "{out:?}");
    let v = json(&out);
    assert_eq!(v["kind"], "tool-external-service");
    assert_eq!(v["unenforceable"], "external-service");
    assert_eq!(v["access"], "tool");
    assert_eq!(v["target"], "mcp__github__create_issue");

    let out = env.run(["check", "--effects", "network"]);
    assert_eq!(out.code, 125, "{out:?}");
}

#[test]
fn tool_policy_settings_allow_external_and_deny() {
    let env = TestEnv::new();
    env.write_settings(
        "home/.config/warden/settings.json",
        r#"{"warden": {"tools": {"allowExternal": ["mcp__github__*"], "deny": ["mcp__github__delete_*"]}}}"#,
    );
    let managed = env.write_settings(
        "managed-settings.json",
        r#"{"warden": {"tools": {"deny": ["WebFetch"]}}}"#,
    );
    let out = env.run([
        "check",
        "--tool",
        "mcp__github__create_issue",
        "--effects",
        "network,external-service",
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout
            .contains("rule: warden.tools.allowExternal \"mcp__github__*\" from")
            && out.stdout.contains("(user settings)"),
        "{out:?}"
    );
    let out = env.run([
        "check",
        "--tool",
        "mcp__github__delete_repo",
        "--effects",
        "external-service",
    ]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stdout
            .contains("matches the denied tool `mcp__github__delete_*`"),
        "{out:?}"
    );
    let out = env.run([
        "check",
        "--tool",
        "WebFetch",
        "--effects",
        "network",
        "--json",
    ]);
    assert_eq!(out.code, 1, "{out:?}");
    let v = json(&out);
    assert_eq!(v["kind"], "tool-denied");
    assert_eq!(v["rule"]["list"], "warden.tools.deny");
    assert_eq!(v["rule"]["provenance"]["layer"], "managed");
    assert_eq!(v["rule"]["provenance"]["source"], s(&managed));
    let out = env.run([
        "check",
        "--tool",
        "mcp__slack__post",
        "--effects",
        "external-service",
    ]);
    assert_eq!(out.code, 1, "{out:?}");

    let bad = env.write_settings("bad.json", r#"{"warden": {"tools": {"deny": ["mcp__["]}}}"#);
    let out = env.run([
        "check",
        "--settings",
        &s(&bad),
        "--tool",
        "x",
        "--effects",
        "process",
    ]);
    assert_eq!(out.code, 125, "{out:?}");
    assert!(
        out.stderr.contains("`warden.tools.deny` entry \"mcp__[\""),
        "{out:?}"
    );
}

/// A cloned repository's own `.warden/settings.json` may narrow the sandbox and add domains,
/// not widen it: pointing the violations file at `~/.bashrc` (records carry command lines the
/// sandboxed command chose), writing outside the project or releasing `.git/config` is
/// refused until the user trusts the project — and the project cannot trust itself.
#[test]
fn an_untrusted_projects_settings_cannot_widen_the_sandbox() {
    let env = TestEnv::new();
    let bashrc = env.home().join(".bashrc");
    std::fs::write(&bashrc, "# rc\n").unwrap();
    for (json, key) in [
        (
            r#"{"warden": {"audit": {"violationsFile": "~/.bashrc"}, "trustedProjects": ["."]}}"#,
            "`warden.audit.violationsFile`",
        ),
        (
            r#"{"filesystem": {"allowWrite": ["~/.config"]}}"#,
            "`filesystem.allowWrite` outside the project (~/.config)",
        ),
        (
            r#"{"filesystem": {"allowGitConfig": true}}"#,
            "`filesystem.allowGitConfig`",
        ),
    ] {
        env.write_settings("project/.warden/settings.json", json);
        let out = env.run([
            "run",
            "--",
            "sh",
            "-c",
            "touch /etc/x 2>/dev/null; echo ran",
        ]);
        assert_eq!(out.code, 125, "{json}: {out:?}");
        assert!(out.stderr.contains(key), "{json}: {out:?}");
        assert!(!out.stdout.contains("ran"), "{json}: {out:?}");
    }
    assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "# rc\n");
    // Narrowing, domains and writable paths inside the project are fine.
    env.write_settings(
        "project/.warden/settings.json",
        r#"{"filesystem": {"denyRead": ["secret"], "allowWrite": ["build"]}, "network": {"allowedDomains": ["example.com"]}}"#,
    );
    let out = env.run(["check", "--domain", "example.com"]);
    assert_eq!(out.code, 0, "{out:?}");
}

/// Red-team round 23: a parent proxy's password in the settings was readable in the sandbox
/// (the settings file is readable like the rest of the host) and printed by `settings show`
/// and in the error for a malformed URL.
#[test]
fn a_parent_proxy_credential_is_neither_shown_nor_readable_in_the_sandbox() {
    let env = TestEnv::new();
    let user = env.write_settings(
        "home/.config/warden/settings.json",
        r#"{"network": {"parentProxy": {"http": "http://puser:S3cretPW@127.0.0.1:9"}}}"#,
    );
    let extra = env.write_settings(
        "extra.json",
        r#"{"network": {"parentProxy": {"https": "http://other:An0therPW@127.0.0.1:9"}}}"#,
    );
    let plain = env.write_settings(
        "plain.json",
        r#"{"network": {"allowedDomains": ["a.com"]}}"#,
    );
    let out = env.run([
        "run",
        "--settings",
        &s(&extra),
        "--settings",
        &s(&plain),
        "--",
        "sh",
        "-c",
        &format!("cat {} {} {}; echo done", s(&user), s(&extra), s(&plain)),
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("done"), "{out:?}");
    assert!(!out.stdout.contains("S3cretPW"), "{out:?}");
    assert!(!out.stdout.contains("An0therPW"), "{out:?}");
    // A settings file without a credential stays readable.
    assert!(out.stdout.contains("a.com"), "{out:?}");
    for args in [vec!["settings", "show"], vec!["settings", "show", "--json"]] {
        let mut all = args.clone();
        let extra_s = s(&extra);
        all.extend(["--settings", extra_s.as_str()]);
        let out = env.run(&all);
        assert_eq!(out.code, 0, "{out:?}");
        assert!(out.stdout.contains("127.0.0.1:9"), "{out:?}");
        assert!(!out.stdout.contains("S3cretPW"), "{out:?}");
        assert!(!out.stdout.contains("An0therPW"), "{out:?}");
    }
    let bad = env.write_settings(
        "bad.json",
        r#"{"network": {"parentProxy": {"http": "http://puser:S3cretPW@127.0.0.1:99999"}}}"#,
    );
    let out = env.run([
        "run",
        "--settings",
        &s(&bad),
        "--allow-domain",
        "a.com",
        "--",
        "true",
    ]);
    assert_eq!(out.code, 125, "{out:?}");
    assert!(out.stderr.contains("parentProxy"), "{out:?}");
    assert!(!out.stderr.contains("S3cretPW"), "{out:?}");
}

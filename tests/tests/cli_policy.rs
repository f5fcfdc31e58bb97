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

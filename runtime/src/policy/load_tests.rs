use super::*;

fn err(text: &str) -> String {
    match parse_settings(text, "s.json") {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn srt_file_is_accepted_unchanged() {
    let text = r#"{
      "network": {
        "allowedDomains": ["github.com", "*.npmjs.org"],
        "deniedDomains": ["evil.com"],
        "deniedDomainReasons": {"evil.com": "exfiltration"},
        "strictAllowlist": true,
        "allowUnixSockets": ["/var/run/docker.sock"],
        "allowAllUnixSockets": false,
        "allowLocalBinding": true,
        "httpProxyPort": 3128,
        "socksProxyPort": 1080
      },
      "filesystem": {
        "denyRead": ["~/.ssh"], "allowRead": ["~/.ssh/known_hosts"],
        "allowWrite": ["."], "denyWrite": [".env"], "allowGitConfig": false
      },
      "ignoreViolations": {"*": ["/usr/bin"], "git push": ["/tmp"]},
      "enableWeakerNestedSandbox": false,
      "mandatoryDenySearchDepth": 3
    }"#;
    let p = parse_settings(text, "s.json").unwrap();
    assert_eq!(p.form, Form::Srt);
    let net = p.settings.network.unwrap();
    assert_eq!(
        net.allowed_domains.unwrap(),
        vec!["github.com", "*.npmjs.org"]
    );
    assert_eq!(net.socks_proxy_port, Some(1080));
    let fs = p.settings.filesystem.unwrap();
    assert_eq!(fs.deny_write.unwrap(), vec![".env"]);
    assert_eq!(p.settings.mandatory_deny_search_depth, Some(3));
}

#[test]
fn claude_code_form_ignores_claude_keys_and_reads_sandbox() {
    let text = r#"{
      "permissions": {"allow": ["Bash(ls:*)"]},
      "model": "opus",
      "sandbox": {
        "enabled": true,
        "autoAllowBashIfSandboxed": true,
        "excludedCommands": ["docker"],
        "mode": "whole-process",
        "network": {"allowUnixSockets": ["/run/x.sock"]}
      },
      "warden": {"readOnly": true}
    }"#;
    let p = parse_settings(text, "s.json").unwrap();
    assert_eq!(p.form, Form::ClaudeCode);
    assert_eq!(p.settings.enabled, Some(true));
    assert_eq!(
        p.settings.mode,
        Some(crate::policy::settings::Mode::WholeProcess)
    );
    assert_eq!(p.settings.warden.unwrap().read_only, Some(true));
}

#[test]
fn comments_and_trailing_commas() {
    let text = "// top\n{\n  /* block\n  comment */ \"filesystem\": {\"allowWrite\": [\"a\", \"b\",],},\n}\n";
    let p = parse_settings(text, "s.json").unwrap();
    assert_eq!(
        p.settings.filesystem.unwrap().allow_write.unwrap(),
        vec!["a", "b"]
    );
}

#[test]
fn comment_markers_inside_strings_are_kept() {
    let p = parse_settings(
        r#"{"filesystem": {"denyRead": ["/a//b", "/*x*/", "a,]"]}}"#,
        "s",
    )
    .unwrap();
    assert_eq!(
        p.settings.filesystem.unwrap().deny_read.unwrap(),
        vec!["/a//b", "/*x*/", "a,]"]
    );
}

#[test]
fn empty_file_is_empty_settings() {
    assert_eq!(
        parse_settings("  \n// only a comment\n", "s")
            .unwrap()
            .settings,
        SandboxSettings::default()
    );
}

// Golden error messages.

#[test]
fn golden_unknown_nested_key_with_suggestion() {
    assert_eq!(
        err("{\n  \"filesystem\": {\n    \"allowWrites\": [\".\"]\n  }\n}"),
        "s.json:3:5: `filesystem.allowWrites`: unknown key; did you mean `allowWrite`?"
    );
}

#[test]
fn golden_unknown_key_case_only() {
    assert_eq!(
        err(r#"{"network": {"alloweddomains": []}}"#),
        "s.json:1:14: `network.alloweddomains`: unknown key; did you mean `allowedDomains`?"
    );
}

#[test]
fn golden_key_at_wrong_level() {
    assert_eq!(
        err("{\n  \"allowWrite\": [\".\"]\n}"),
        "s.json:2:3: `allowWrite`: unknown key; did you mean `filesystem.allowWrite`?"
    );
}

#[test]
fn golden_unknown_key_without_suggestion() {
    assert_eq!(
        err(r#"{"network": {"zzzz": 1}}"#),
        "s.json:1:14: `network.zzzz`: unknown key"
    );
}

#[test]
fn golden_wrong_type() {
    assert_eq!(
        err("{\n \"network\": {\"strictAllowlist\": \"yes\"}\n}"),
        "s.json:2:37: `network.strictAllowlist`: invalid type: string \"yes\", expected a boolean"
    );
}

#[test]
fn golden_wrong_type_in_array() {
    assert_eq!(
        err(r#"{"filesystem": {"denyRead": ["a", 7]}}"#),
        "s.json:1:35: `filesystem.denyRead[1]`: invalid type: integer `7`, expected a string"
    );
}

#[test]
fn golden_bad_enum_value() {
    assert_eq!(
        err(r#"{"sandbox": {"mode": "whole"}}"#),
        "s.json:1:28: `sandbox.mode`: unknown variant `whole`, expected `per-command` or `whole-process`"
    );
}

#[test]
fn golden_syntax_error() {
    assert_eq!(
        err("{\n  \"network\": {\n    \"allowedDomains\": [\"a\" \"b\"]\n  }\n}"),
        "s.json:3:27: invalid JSON: Expected comma"
    );
}

#[test]
fn golden_not_an_object() {
    assert_eq!(err("[1, 2]"), "s.json:1:1: settings must be a JSON object");
}

#[test]
fn golden_srt_keys_beside_sandbox_block() {
    assert_eq!(
        err("{\n  \"sandbox\": {},\n  \"filesystem\": {\"denyRead\": [\"~/.ssh\"]}\n}"),
        "s.json:3:3: `filesystem`: `filesystem` beside a `sandbox` block would be ignored; move it into `sandbox`; did you mean `sandbox.filesystem`?"
    );
}

#[test]
fn unknown_key_inside_sandbox_block_is_an_error() {
    let e = err(r#"{"sandbox": {"network": {"allowedDomain": []}}}"#);
    assert!(
        e.contains("`sandbox.network.allowedDomain`: unknown key; did you mean `allowedDomains`?"),
        "{e}"
    );
}

#[test]
fn loose_json5_is_refused() {
    assert!(err("{'network': {}}").contains("invalid JSON"));
    assert!(err("{network: {}}").contains("invalid JSON"));
}

#[test]
fn layer_paths_follow_xdg_and_env() {
    let env = |k: &str| match k {
        "XDG_CONFIG_HOME" => Some("/cfg".to_string()),
        "WARDEN_MANAGED_SETTINGS" => Some("/t/m.json".to_string()),
        _ => None,
    };
    let p = LayerPaths::discover(Path::new("/home/u"), Path::new("/w"), &env);
    assert_eq!(p.user, PathBuf::from("/cfg/warden/settings.json"));
    assert_eq!(p.project, PathBuf::from("/w/.warden/settings.json"));
    assert_eq!(p.managed, PathBuf::from("/t/m.json"));
    let p = LayerPaths::discover(Path::new("/home/u"), Path::new("/w"), &|_| None);
    assert_eq!(
        p.user,
        PathBuf::from("/home/u/.config/warden/settings.json")
    );
    assert_eq!(
        p.managed,
        PathBuf::from("/etc/warden/managed-settings.json")
    );
}

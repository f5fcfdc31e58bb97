use super::*;
use proptest::prelude::*;

fn policy(policy_type: CursorPolicyType, network_access: bool) -> CursorSandboxPolicy {
    CursorSandboxPolicy {
        policy_type,
        network_access,
        ..CursorSandboxPolicy::default()
    }
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

// --- serde ----------------------------------------------------------------------------------

#[test]
fn parses_cursor_json() {
    let p: CursorSandboxPolicy = serde_json::from_str(
        r#"{
            "type": "WORKSPACE_READWRITE",
            "network_access": true,
            "additional_readwrite_paths": ["/home/u/.cache"],
            "additional_readonly_paths": ["/opt/sdk"],
            "block_git_writes": true,
            "disable_tmp_write": true
        }"#,
    )
    .unwrap();
    assert_eq!(
        p,
        CursorSandboxPolicy {
            policy_type: CursorPolicyType::WorkspaceReadwrite,
            network_access: true,
            additional_readwrite_paths: s(&["/home/u/.cache"]),
            additional_readonly_paths: s(&["/opt/sdk"]),
            block_git_writes: true,
            disable_tmp_write: true,
        }
    );
}

#[test]
fn missing_fields_take_defaults() {
    let p: CursorSandboxPolicy = serde_json::from_str(r#"{"type": "WORKSPACE_READONLY"}"#).unwrap();
    assert_eq!(p, policy(CursorPolicyType::WorkspaceReadonly, false));
    let p: CursorSandboxPolicy = serde_json::from_str("{}").unwrap();
    assert_eq!(p, CursorSandboxPolicy::default());
    assert_eq!(p.policy_type, CursorPolicyType::WorkspaceReadwrite);
    assert!(!p.network_access);
}

#[test]
fn type_names() {
    for (name, t) in [
        ("INSECURE_NONE", CursorPolicyType::InsecureNone),
        ("WORKSPACE_READWRITE", CursorPolicyType::WorkspaceReadwrite),
        ("WORKSPACE_READONLY", CursorPolicyType::WorkspaceReadonly),
    ] {
        let json = format!("\"{name}\"");
        assert_eq!(serde_json::from_str::<CursorPolicyType>(&json).unwrap(), t);
        assert_eq!(serde_json::to_string(&t).unwrap(), json);
    }
    assert!(serde_json::from_str::<CursorPolicyType>("\"workspace_readwrite\"").is_err());
}

#[test]
fn round_trips() {
    let p = CursorSandboxPolicy {
        policy_type: CursorPolicyType::InsecureNone,
        network_access: true,
        additional_readwrite_paths: s(&["a"]),
        additional_readonly_paths: s(&["b"]),
        block_git_writes: true,
        disable_tmp_write: false,
    };
    let json = serde_json::to_value(&p).unwrap();
    assert_eq!(json["type"], "INSECURE_NONE");
    assert_eq!(json["additional_readonly_paths"][0], "b");
    assert_eq!(
        serde_json::from_value::<CursorSandboxPolicy>(json).unwrap(),
        p
    );
}

// --- levels ---------------------------------------------------------------------------------

#[test]
fn security_levels() {
    use CursorPolicyType::*;
    assert_eq!(policy(WorkspaceReadonly, false).security_level(), 0);
    assert_eq!(policy(WorkspaceReadonly, true).security_level(), 5);
    assert_eq!(policy(WorkspaceReadwrite, false).security_level(), 10);
    assert_eq!(policy(WorkspaceReadwrite, true).security_level(), 20);
    assert_eq!(policy(InsecureNone, false).security_level(), 30);
    assert_eq!(policy(InsecureNone, true).security_level(), 30);
}

#[test]
fn paths_and_flags_do_not_change_the_level() {
    let mut p = policy(CursorPolicyType::WorkspaceReadwrite, false);
    p.additional_readwrite_paths = s(&["/x"]);
    p.block_git_writes = true;
    p.disable_tmp_write = true;
    assert_eq!(p.security_level(), 10);
}

// --- mapping --------------------------------------------------------------------------------

#[test]
fn insecure_none_disables_the_sandbox() {
    let mut p = policy(CursorPolicyType::InsecureNone, false);
    p.additional_readonly_paths = s(&["/x"]);
    assert_eq!(
        p.to_settings(),
        SandboxSettings {
            enabled: Some(false),
            ..SandboxSettings::default()
        }
    );
}

#[test]
fn readwrite_without_network() {
    let st = policy(CursorPolicyType::WorkspaceReadwrite, false).to_settings();
    assert_eq!(st.enabled, Some(true));
    assert_eq!(
        st.filesystem, None,
        "the working directory is writable by default"
    );
    let net = st.network.unwrap();
    assert_eq!(net.allowed_domains, Some(vec![]));
    assert_eq!(net.strict_allowlist, Some(true));
    let w = st.warden.unwrap();
    assert_eq!(w.read_only, None);
    assert_eq!(w.unrestricted_network, None);
    assert_eq!(w.disable_tmp_write, None);
}

#[test]
fn network_access_is_unrestricted_network() {
    let st = policy(CursorPolicyType::WorkspaceReadwrite, true).to_settings();
    assert_eq!(st.network, None);
    assert_eq!(st.warden.unwrap().unrestricted_network, Some(true));
    let st = policy(CursorPolicyType::WorkspaceReadonly, true).to_settings();
    assert_eq!(st.network, None);
    assert_eq!(st.warden.unwrap().unrestricted_network, Some(true));
}

#[test]
fn readwrite_path_mapping() {
    let p = CursorSandboxPolicy {
        policy_type: CursorPolicyType::WorkspaceReadwrite,
        network_access: false,
        additional_readwrite_paths: s(&["~/.cache", "/tmp/build"]),
        additional_readonly_paths: s(&["/opt/sdk"]),
        block_git_writes: true,
        disable_tmp_write: true,
    };
    let st = p.to_settings();
    let fs = st.filesystem.unwrap();
    assert_eq!(fs.allow_write, Some(s(&["/tmp/build", "~/.cache"])));
    assert_eq!(fs.deny_write, Some(s(&[".git", "/opt/sdk"])));
    assert_eq!(fs.deny_read, None, "read-only paths stay readable");
    assert_eq!(fs.allow_read, None);
    let w = st.warden.unwrap();
    assert_eq!(w.disable_tmp_write, Some(true));
    assert_eq!(w.read_only, None);
}

#[test]
fn block_git_writes_alone() {
    let mut p = policy(CursorPolicyType::WorkspaceReadwrite, false);
    p.block_git_writes = true;
    let fs = p.to_settings().filesystem.unwrap();
    assert_eq!(fs.deny_write, Some(s(&[".git"])));
    assert_eq!(fs.allow_write, None);
}

#[test]
fn readonly_mapping() {
    let p = CursorSandboxPolicy {
        policy_type: CursorPolicyType::WorkspaceReadonly,
        network_access: false,
        additional_readwrite_paths: s(&["/w"]),
        additional_readonly_paths: s(&["/r"]),
        block_git_writes: true,
        disable_tmp_write: true,
    };
    let st = p.to_settings();
    assert_eq!(st.enabled, Some(true));
    let w = st.warden.as_ref().unwrap();
    assert_eq!(w.read_only, Some(true));
    assert_eq!(w.disable_tmp_write, Some(true));
    let fs = st.filesystem.unwrap();
    assert_eq!(fs.allow_write, None, "read-only: nothing is writable");
    assert_eq!(fs.deny_write, Some(s(&[".git", "/r"])));
    assert_eq!(st.network.unwrap().strict_allowlist, Some(true));
}

#[test]
fn mapped_settings_serialize_as_warden_settings() {
    let st = policy(CursorPolicyType::WorkspaceReadonly, false).to_settings();
    let json = serde_json::to_value(&st).unwrap();
    assert_eq!(json["warden"]["readOnly"], true);
    assert_eq!(json["network"]["strictAllowlist"], true);
    assert_eq!(json["network"]["allowedDomains"], serde_json::json!([]));
}

// --- merge ----------------------------------------------------------------------------------

#[test]
fn merge_lower_level_wins() {
    let ro = policy(CursorPolicyType::WorkspaceReadonly, false);
    let mut rw = policy(CursorPolicyType::WorkspaceReadwrite, true);
    rw.additional_readwrite_paths = s(&["/w"]);
    let m = merge_restrictive(&ro, &rw);
    assert_eq!(m.policy_type, CursorPolicyType::WorkspaceReadonly);
    assert!(!m.network_access);
    assert!(m.additional_readwrite_paths.is_empty());
    assert_eq!(m.security_level(), 0);

    let none = policy(CursorPolicyType::InsecureNone, true);
    let mut rw = policy(CursorPolicyType::WorkspaceReadwrite, false);
    rw.additional_readwrite_paths = s(&["/w"]);
    let m = merge_restrictive(&none, &rw);
    assert_eq!(m, rw, "the sandboxed policy keeps its own writable paths");
}

#[test]
fn merge_keeps_restrictions_of_the_looser_policy() {
    let ro = policy(CursorPolicyType::WorkspaceReadonly, false);
    let mut rw = policy(CursorPolicyType::WorkspaceReadwrite, false);
    rw.disable_tmp_write = true;
    rw.block_git_writes = true;
    rw.additional_readonly_paths = s(&["/r"]);
    let m = merge_restrictive(&ro, &rw);
    assert_eq!(m.policy_type, CursorPolicyType::WorkspaceReadonly);
    assert!(m.disable_tmp_write && m.block_git_writes);
    assert_eq!(m.additional_readonly_paths, s(&["/r"]));
}

#[test]
fn merge_equal_levels_combines_fields() {
    let a = CursorSandboxPolicy {
        policy_type: CursorPolicyType::WorkspaceReadwrite,
        network_access: false,
        additional_readwrite_paths: s(&["/a", "/both"]),
        additional_readonly_paths: s(&["/ra"]),
        block_git_writes: true,
        disable_tmp_write: false,
    };
    let b = CursorSandboxPolicy {
        policy_type: CursorPolicyType::WorkspaceReadwrite,
        network_access: false,
        additional_readwrite_paths: s(&["/both", "/b"]),
        additional_readonly_paths: s(&["/rb", "/ra"]),
        block_git_writes: false,
        disable_tmp_write: true,
    };
    let m = merge_restrictive(&a, &b);
    assert_eq!(m.additional_readwrite_paths, s(&["/both"]));
    assert_eq!(m.additional_readonly_paths, s(&["/ra", "/rb"]));
    assert!(m.block_git_writes && m.disable_tmp_write);
    assert_eq!(m.security_level(), 10);
}

#[test]
fn merge_two_unsandboxed_policies_ands_network() {
    let m = merge_restrictive(
        &policy(CursorPolicyType::InsecureNone, true),
        &policy(CursorPolicyType::InsecureNone, false),
    );
    assert_eq!(m.policy_type, CursorPolicyType::InsecureNone);
    assert!(!m.network_access);
}

fn arb_policy() -> impl Strategy<Value = CursorSandboxPolicy> {
    let t = prop_oneof![
        Just(CursorPolicyType::InsecureNone),
        Just(CursorPolicyType::WorkspaceReadwrite),
        Just(CursorPolicyType::WorkspaceReadonly),
    ];
    let paths = || proptest::collection::vec("/[abc]{1,2}", 0..4);
    (
        t,
        any::<bool>(),
        paths(),
        paths(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(policy_type, network_access, rw, ro, git, tmp)| CursorSandboxPolicy {
                policy_type,
                network_access,
                additional_readwrite_paths: rw,
                additional_readonly_paths: ro,
                block_git_writes: git,
                disable_tmp_write: tmp,
            },
        )
}

proptest! {
    #[test]
    fn merge_is_commutative(a in arb_policy(), b in arb_policy()) {
        prop_assert_eq!(merge_restrictive(&a, &b), merge_restrictive(&b, &a));
    }

    #[test]
    fn merged_level_is_the_minimum(a in arb_policy(), b in arb_policy()) {
        let m = merge_restrictive(&a, &b);
        prop_assert_eq!(m.security_level(), a.security_level().min(b.security_level()));
    }

    #[test]
    fn merge_never_loosens(a in arb_policy(), b in arb_policy()) {
        let m = merge_restrictive(&a, &b);
        prop_assert!(m.block_git_writes >= a.block_git_writes.max(b.block_git_writes));
        prop_assert!(m.disable_tmp_write >= a.disable_tmp_write.max(b.disable_tmp_write));
        for p in a.additional_readonly_paths.iter().chain(&b.additional_readonly_paths) {
            prop_assert!(m.additional_readonly_paths.contains(p));
        }
        for p in &m.additional_readwrite_paths {
            prop_assert!(
                a.additional_readwrite_paths.contains(p) || b.additional_readwrite_paths.contains(p)
            );
        }
    }

    #[test]
    fn merge_is_idempotent_on_normalised_policies(a in arb_policy()) {
        let once = merge_restrictive(&a, &a);
        prop_assert_eq!(merge_restrictive(&once, &once), once.clone());
        prop_assert_eq!(once.security_level(), a.security_level());
    }
}

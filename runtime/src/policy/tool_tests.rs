use super::*;
use crate::policy::decision::{Decision, Layer};
use crate::policy::merge::{layer, Context, Policy};
use crate::policy::settings::{SandboxSettings, ToolSettings, WardenSettings};

fn tools(allow_external: &[&str], deny: &[&str]) -> SandboxSettings {
    let list = |l: &[&str]| (!l.is_empty()).then(|| l.iter().map(|s| s.to_string()).collect());
    SandboxSettings {
        warden: Some(WardenSettings {
            tools: Some(ToolSettings {
                allow_external: list(allow_external),
                deny: list(deny),
            }),
            ..WardenSettings::default()
        }),
        ..SandboxSettings::default()
    }
}

fn policy(layers: Vec<crate::policy::merge::LayerInput>) -> Policy {
    let ctx = Context {
        cwd: "/w".into(),
        home: "/h".into(),
        tmpdir: None,
        approver_attached: true,
        protected: Vec::new(),
    };
    Policy::build(&layers, ctx, &crate::policy::fsview::MemFs::new()).unwrap()
}

fn user(allow_external: &[&str], deny: &[&str]) -> Policy {
    policy(vec![layer(
        Layer::User,
        0,
        "/h/.config/warden/settings.json",
        tools(allow_external, deny),
    )])
}

fn check(v: &ToolVerdict, decision: Decision, kind: ReasonKind) {
    assert_eq!(
        (v.verdict.decision, v.verdict.kind),
        (decision, kind),
        "{v:#?}"
    );
}

#[test]
fn enforceable_effects_are_allowed() {
    let p = user(&[], &[]);
    let v = p.check_tool("Edit", &["filesystem-read", "filesystem-write"]);
    check(&v, Decision::Allow, ReasonKind::ToolAllowed);
    assert!(v.verdict.rule.is_none());
    assert_eq!(v.unenforceable, None);
    assert_eq!(
        v.effects,
        vec![
            EffectCheck {
                effect: "filesystem-read".into(),
                handler: Some("path-rules"),
                enforceable: true
            },
            EffectCheck {
                effect: "filesystem-write".into(),
                handler: Some("path-rules"),
                enforceable: true
            },
        ]
    );
    let v = p.check_tool("Bash", &["process", "network", " Filesystem-Write "]);
    check(&v, Decision::Allow, ReasonKind::ToolAllowed);
    assert!(
        v.verdict
            .reason
            .contains("network (warden's filtering proxy"),
        "{v:?}"
    );
    assert!(v.verdict.reason.contains("process (the sandbox"), "{v:?}");
}

#[test]
fn nothing_declared_is_nothing_enforceable() {
    let p = user(&["*"], &[]);
    let none: [&str; 0] = [];
    for effects in [&none[..], &[""], &[" ", ""]] {
        let v = p.check_tool("Mystery", effects);
        check(&v, Decision::Deny, ReasonKind::ToolNoEffects);
        assert!(
            v.verdict.reason.contains("declares no side effects"),
            "{v:?}"
        );
    }
}

#[test]
fn unknown_effects_are_denied_and_named() {
    let p = user(&["*"], &[]);
    let v = p.check_tool("Weird", &["filesystem-read", "gpu", "network"]);
    check(&v, Decision::Deny, ReasonKind::ToolUnknownEffect);
    assert_eq!(v.unenforceable.as_deref(), Some("gpu"));
    assert!(v.verdict.reason.contains("`gpu`"), "{v:?}");
    assert_eq!(v.effects.len(), 2);
    assert!(!v.effects[1].enforceable);
    // Spellings other than the documented names are unknown too.
    let v = p.check_tool("Weird", &["filesystem_read"]);
    check(&v, Decision::Deny, ReasonKind::ToolUnknownEffect);
}

#[test]
fn external_services_need_an_allow_external_entry() {
    let p = user(&["mcp__github__*"], &[]);
    let v = p.check_tool("mcp__slack__post", &["external-service"]);
    check(&v, Decision::Deny, ReasonKind::ToolExternalService);
    assert_eq!(v.unenforceable.as_deref(), Some("external-service"));
    assert!(v.verdict.reason.contains("cannot filter"), "{v:?}");
    assert!(v.verdict.rule.is_none());

    let v = p.check_tool(
        "mcp__github__create_issue",
        &["network", "external-service"],
    );
    check(&v, Decision::Allow, ReasonKind::ToolAllowed);
    let rule = v.verdict.rule.clone().unwrap();
    assert_eq!(
        (rule.list.as_ref(), &*rule.entry),
        (LIST_ALLOW_EXTERNAL, "mcp__github__*")
    );
    assert_eq!(rule.provenance.layer, Layer::User);
    assert_eq!(v.effects[1].handler, Some(LIST_ALLOW_EXTERNAL));
    assert!(
        v.verdict.reason.contains("allowExternal `mcp__github__*`"),
        "{v:?}"
    );

    // Without settings every external service is denied.
    let v = user(&[], &[]).check_tool("mcp__github__x", &["external-service"]);
    check(&v, Decision::Deny, ReasonKind::ToolExternalService);
    // Patterns match the whole name, case-sensitively.
    let v = p.check_tool("x_mcp__github__y", &["external-service"]);
    check(&v, Decision::Deny, ReasonKind::ToolExternalService);
    let v = p.check_tool("MCP__GITHUB__y", &["external-service"]);
    check(&v, Decision::Deny, ReasonKind::ToolExternalService);
}

#[test]
fn the_deny_list_wins_over_everything() {
    let p = user(&["mcp__*"], &["mcp__github__delete_*", "Bash"]);
    let v = p.check_tool("mcp__github__delete_repo", &["external-service"]);
    check(&v, Decision::Deny, ReasonKind::ToolDenied);
    let rule = v.verdict.rule.clone().unwrap();
    assert_eq!(
        (rule.list.as_ref(), &*rule.entry),
        (LIST_DENY, "mcp__github__delete_*")
    );
    let v = p.check_tool("Bash", &["process"]);
    check(&v, Decision::Deny, ReasonKind::ToolDenied);
    let v = p.check_tool("mcp__github__get_issue", &["external-service"]);
    check(&v, Decision::Allow, ReasonKind::ToolAllowed);
}

#[test]
fn deny_lists_are_unioned_and_keep_managed_provenance() {
    let p = policy(vec![
        layer(
            Layer::User,
            0,
            "/h/u.json",
            tools(&["mcp__*"], &["mcp__a__*"]),
        ),
        layer(
            Layer::Managed,
            0,
            "/etc/warden/m.json",
            tools(&[], &["mcp__b__*"]),
        ),
    ]);
    let v = p.check_tool("mcp__a__x", &["external-service"]);
    check(&v, Decision::Deny, ReasonKind::ToolDenied);
    assert_eq!(v.verdict.rule.unwrap().provenance.layer, Layer::User);
    let v = p.check_tool("mcp__b__x", &["external-service"]);
    check(&v, Decision::Deny, ReasonKind::ToolDenied);
    assert!(v.verdict.rule.unwrap().provenance.is_managed());
    let v = p.check_tool("mcp__c__x", &["external-service"]);
    check(&v, Decision::Allow, ReasonKind::ToolAllowed);
}

#[test]
fn denials_are_never_approvable() {
    let p = user(&[], &["Nope"]);
    for (name, effects) in [
        ("Nope", vec!["filesystem-read"]),
        ("X", vec![]),
        ("X", vec!["teleport"]),
        ("X", vec!["external-service"]),
        ("", vec!["process"]),
    ] {
        let v = p.check_tool(name, &effects);
        assert_eq!(
            v.verdict.decision,
            Decision::Deny,
            "{name} {effects:?}: {v:?}"
        );
    }
}

#[test]
fn invalid_or_empty_patterns_are_settings_errors() {
    for bad in ["mcp__[", ""] {
        let layers = vec![layer(
            Layer::Project,
            0,
            "/w/.warden/settings.json",
            tools(&[], &[bad]),
        )];
        let ctx = Context {
            cwd: "/w".into(),
            home: "/h".into(),
            tmpdir: None,
            approver_attached: true,
            protected: Vec::new(),
        };
        let e = Policy::build(&layers, ctx, &crate::policy::fsview::MemFs::new()).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("`warden.tools.deny` entry"), "{text}");
    }
}

#[test]
fn effect_names_round_trip() {
    for e in Effect::ALL {
        assert_eq!(Effect::parse(e.name()), Some(e));
        assert_eq!(e.handler().is_none(), e == Effect::ExternalService);
        assert_eq!(serde_json::to_value(e).unwrap(), e.name());
    }
}

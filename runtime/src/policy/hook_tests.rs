use super::*;
use crate::policy::decision::RuleRef;
use crate::policy::merge::{layer, Context};
use crate::policy::settings::{CommandSettings, HookSettings, SandboxSettings, WardenSettings};

fn prov(layer: Layer, source: &str) -> Provenance {
    Provenance::new(layer, 0, source)
}

fn hook() -> HookConfig {
    HookConfig {
        path: "/etc/warden/hook".into(),
        entry: "hook".into(),
        provenance: prov(Layer::Managed, "/etc/warden/managed-settings.json"),
        timeout: DEFAULT_TIMEOUT,
    }
}

fn answered(decision: HookDecision, reason: &str) -> HookOutcome {
    HookOutcome::Answered(HookAnswer {
        decision,
        reason: Some(reason.into()),
    })
}

fn allow() -> Verdict {
    Verdict::allow(ReasonKind::CommandAllowed, "the line runs sandboxed")
}

fn ask() -> Verdict {
    Verdict::ask(ReasonKind::CommandProtected, "`rm x` runs `rm`")
}

fn managed_block() -> Verdict {
    Verdict::deny(ReasonKind::CommandBlocked, "`curl x` matches `curl`").with_rule(RuleRef {
        list: Cow::Borrowed("warden.commands.block"),
        entry: "curl".into(),
        provenance: prov(Layer::Managed, "/etc/warden/managed-settings.json"),
    })
}

// --- resolving the path ---------------------------------------------------------------------

#[test]
fn relative_hook_paths_resolve_against_the_settings_file_that_named_them() {
    let cwd = Path::new("/w");
    let home = Path::new("/h");
    let p = |entry: &str, layer: Layer, source: &str| {
        resolve_path(entry, &prov(layer, source), cwd, home)
    };
    assert_eq!(
        p("hooks/check.sh", Layer::Project, "/w/.warden/settings.json"),
        Path::new("/w/.warden/hooks/check.sh")
    );
    assert_eq!(
        p("./check.sh", Layer::User, "/h/.config/warden/settings.json"),
        Path::new("/h/.config/warden/check.sh")
    );
    assert_eq!(
        p(
            "../bin/h",
            Layer::Managed,
            "/etc/warden/managed-settings.json"
        ),
        Path::new("/etc/warden/../bin/h")
    );
    assert_eq!(p("/opt/h", Layer::Cli, "/x/s.json"), Path::new("/opt/h"));
    assert_eq!(p("~/bin/h", Layer::Cli, "/x/s.json"), Path::new("/h/bin/h"));
    // A settings file given by a relative path: the hook stays relative to the same base.
    assert_eq!(p("h.sh", Layer::Cli, "s.json"), Path::new("h.sh"));
    assert_eq!(p("h.sh", Layer::Cli, "conf/s.json"), Path::new("conf/h.sh"));
    // No file named it: the working directory.
    assert_eq!(p("h.sh", Layer::Flags, "--hook"), Path::new("/w/h.sh"));
}

fn settings(hook: &str, timeout: Option<u64>) -> SandboxSettings {
    SandboxSettings {
        warden: Some(WardenSettings {
            hooks: Some(HookSettings {
                before_command: Some(hook.into()),
                timeout_seconds: timeout,
            }),
            ..WardenSettings::default()
        }),
        ..SandboxSettings::default()
    }
}

fn policy_of(layers: Vec<crate::policy::merge::LayerInput>) -> Policy {
    let ctx = Context {
        cwd: "/w".into(),
        home: "/h".into(),
        tmpdir: None,
        approver_attached: true,
        protected: Vec::new(),
    };
    Policy::build(&layers, ctx, &crate::policy::fsview::MemFs::new()).unwrap()
}

#[test]
fn the_highest_layer_names_the_hook_and_its_timeout() {
    let p = policy_of(vec![
        layer(
            Layer::User,
            0,
            "/h/.config/warden/settings.json",
            settings("u.sh", Some(3)),
        ),
        layer(
            Layer::Managed,
            0,
            "/etc/warden/m.json",
            settings("m.sh", None),
        ),
    ]);
    let h = p.before_command_hook().unwrap();
    assert_eq!(h.path, Path::new("/etc/warden/m.sh"));
    assert_eq!(&*h.entry, "m.sh");
    assert!(h.provenance.is_managed());
    // The timeout is its own scalar: the user's 3 s applies to the managed hook.
    assert_eq!(h.timeout, Duration::from_secs(3));
    assert_eq!(h.rule().list, LIST_HOOK);

    let p = policy_of(vec![layer(
        Layer::Project,
        0,
        "/w/.warden/settings.json",
        settings("h", None),
    )]);
    let h = p.before_command_hook().unwrap();
    assert_eq!(h.timeout, DEFAULT_TIMEOUT);
    assert_eq!(h.path, Path::new("/w/.warden/h"));

    let p = policy_of(vec![layer(
        Layer::User,
        0,
        "u.json",
        SandboxSettings {
            warden: Some(WardenSettings {
                commands: Some(CommandSettings::default()),
                ..WardenSettings::default()
            }),
            ..SandboxSettings::default()
        },
    )]);
    assert!(p.before_command_hook().is_none());
}

// --- reading the answer ---------------------------------------------------------------------

#[test]
fn answers_are_json_or_a_bare_word() {
    let a = parse_answer(br#"{"decision":"deny","reason":"no pushes on Fridays"}"#).unwrap();
    assert_eq!(a.decision, HookDecision::Deny);
    assert_eq!(a.reason.as_deref(), Some("no pushes on Fridays"));
    let a = parse_answer(b"  {\"decision\": \"ask\", \"extra\": 1}\n").unwrap();
    assert_eq!((a.decision, a.reason), (HookDecision::Ask, None));
    for (text, want) in [
        ("allow\n", HookDecision::Allow),
        (" deny ", HookDecision::Deny),
        ("ask", HookDecision::Ask),
    ] {
        let a = parse_answer(text.as_bytes()).unwrap();
        assert_eq!((a.decision, a.reason), (want, None), "{text:?}");
    }
}

#[test]
fn unreadable_answers_say_why() {
    for (text, needle) in [
        (&b""[..], "printed nothing"),
        (b"   \n", "printed nothing"),
        (b"yes", "neither JSON nor allow, deny or ask"),
        (b"Allow", "neither JSON"),
        (b"allow please", "neither JSON"),
        (
            b"{\"decision\": \"maybe\"}",
            "\"maybe\", not allow, deny or ask",
        ),
        (b"{\"reason\": \"x\"}", "not the expected JSON"),
        (b"{\"decision\": \"allow\"", "not the expected JSON"),
        (b"{\"decision\": \"allow\"} deny", "not the expected JSON"),
        (b"\xff\xfe", "not UTF-8"),
    ] {
        let e = parse_answer(text).unwrap_err();
        assert!(e.contains(needle), "{text:?}: {e}");
    }
}

#[test]
fn reasons_are_one_clean_bounded_line() {
    let a = parse_answer(br#"{"decision":"deny","reason":"a\nb\u001b[31m  c\t"}"#).unwrap();
    assert_eq!(a.reason.as_deref(), Some("a b [31m c"));
    let a = parse_answer(br#"{"decision":"deny","reason":"  "}"#).unwrap();
    assert_eq!(a.reason, None);
    let long = "x".repeat(2000);
    let cleaned = clean_reason(&long);
    assert_eq!(cleaned.chars().count(), MAX_REASON + 1);
    assert!(cleaned.ends_with('…'));
}

// --- combining ------------------------------------------------------------------------------

#[test]
fn the_stricter_decision_wins() {
    let h = hook();
    let table = [
        (
            allow(),
            HookDecision::Allow,
            Decision::Allow,
            ReasonKind::CommandAllowed,
        ),
        (
            allow(),
            HookDecision::Ask,
            Decision::RequiresApproval,
            ReasonKind::HookAsk,
        ),
        (
            allow(),
            HookDecision::Deny,
            Decision::Deny,
            ReasonKind::HookDenied,
        ),
        (
            ask(),
            HookDecision::Allow,
            Decision::RequiresApproval,
            ReasonKind::CommandProtected,
        ),
        (
            ask(),
            HookDecision::Ask,
            Decision::RequiresApproval,
            ReasonKind::CommandProtected,
        ),
        (
            ask(),
            HookDecision::Deny,
            Decision::Deny,
            ReasonKind::HookDenied,
        ),
        (
            managed_block(),
            HookDecision::Allow,
            Decision::Deny,
            ReasonKind::CommandBlocked,
        ),
        (
            managed_block(),
            HookDecision::Ask,
            Decision::Deny,
            ReasonKind::CommandBlocked,
        ),
        (
            managed_block(),
            HookDecision::Deny,
            Decision::Deny,
            ReasonKind::CommandBlocked,
        ),
    ];
    for (policy, hook_says, decision, kind) in table {
        let v = combine(&policy, &h, &answered(hook_says, "because"));
        assert_eq!(
            (v.decision, v.kind),
            (decision, kind),
            "{policy:?} + {hook_says:?}: {v:?}"
        );
        assert!(
            v.reason.contains("beforeCommand hook /etc/warden/hook"),
            "{v:?}"
        );
        assert!(v.reason.contains("because"), "{v:?}");
    }
}

#[test]
fn a_stricter_hook_decides_with_its_own_rule() {
    let v = combine(
        &allow(),
        &hook(),
        &answered(HookDecision::Deny, "no pushes on Fridays"),
    );
    assert_eq!(
        v.reason,
        "the beforeCommand hook /etc/warden/hook denied the line: no pushes on Fridays"
    );
    let rule = v.rule.unwrap();
    assert_eq!((rule.list.as_ref(), &*rule.entry), (LIST_HOOK, "hook"));
    assert!(rule.provenance.is_managed());

    let v = combine(
        &allow(),
        &hook(),
        &HookOutcome::Answered(HookAnswer {
            decision: HookDecision::Ask,
            reason: None,
        }),
    );
    assert_eq!(
        v.reason,
        "the beforeCommand hook /etc/warden/hook asks for approval: it gave no reason"
    );
}

#[test]
fn a_managed_deny_is_never_relaxed() {
    for outcome in [
        answered(HookDecision::Allow, "looks fine"),
        HookOutcome::Failed {
            error: "boom".into(),
        },
        HookOutcome::Skipped {
            why: "the command policy already denies the line".into(),
        },
    ] {
        let v = combine(&managed_block(), &hook(), &outcome);
        assert_eq!(v.decision, Decision::Deny, "{outcome:?}");
        assert_eq!(v.kind, ReasonKind::CommandBlocked);
        assert!(v.rule.unwrap().provenance.is_managed());
    }
}

#[test]
fn a_failed_hook_denies() {
    for policy in [allow(), ask()] {
        let v = combine(
            &policy,
            &hook(),
            &HookOutcome::Failed {
                error: "it exited with status 3".into(),
            },
        );
        assert_eq!(
            (v.decision, v.kind),
            (Decision::Deny, ReasonKind::HookFailed)
        );
        assert_eq!(
            v.reason,
            "the beforeCommand hook /etc/warden/hook failed: it exited with status 3; \
             hooks fail closed, so the line is denied"
        );
        assert_eq!(v.rule.unwrap().list, LIST_HOOK);
    }
}

#[test]
fn strictness_orders_deny_over_ask_over_allow() {
    assert!(strictness(Decision::Deny) > strictness(Decision::RequiresApproval));
    assert!(strictness(Decision::RequiresApproval) > strictness(Decision::Allow));
}

#[test]
fn the_hook_input_is_the_documented_json() {
    let input = HookInput {
        command: "git push".into(),
        cwd: "/w".into(),
        sandboxed: false,
        session: "s1".into(),
        placement: Placement::Sandboxed,
    };
    assert_eq!(
        serde_json::to_value(&input).unwrap(),
        serde_json::json!({
            "command": "git push", "cwd": "/w", "sandboxed": false, "session": "s1",
            "placement": "sandboxed"
        })
    );
    let out = serde_json::to_value(answered(HookDecision::Deny, "r")).unwrap();
    assert_eq!(
        out,
        serde_json::json!({"status": "answered", "decision": "deny", "reason": "r"})
    );
}

use super::*;
use crate::policy::load::parse_settings;

fn lay(l: Layer, order: u16, src: &str, json: &str) -> LayerInput {
    layer(l, order, src, parse_settings(json, src).unwrap().settings)
}

fn values(eff: &Effective, key: &str) -> Vec<(String, Layer)> {
    eff.lists
        .get(key)
        .into_iter()
        .flatten()
        .map(|s| {
            (
                s.value.as_str().unwrap_or_default().to_string(),
                s.provenance.layer,
            )
        })
        .collect()
}

#[test]
fn scalars_take_the_highest_layer_and_managed_cannot_be_overridden() {
    let eff = Effective::merge(&[
        lay(
            Layer::Managed,
            0,
            "m",
            r#"{"network": {"strictAllowlist": true}}"#,
        ),
        lay(
            Layer::User,
            0,
            "u",
            r#"{"network": {"strictAllowlist": false, "allowLocalBinding": true}}"#,
        ),
        lay(
            Layer::Cli,
            1,
            "c2",
            r#"{"network": {"strictAllowlist": false, "allowLocalBinding": false}}"#,
        ),
        lay(
            Layer::Cli,
            0,
            "c1",
            r#"{"network": {"allowLocalBinding": true}}"#,
        ),
    ]);
    let s = eff.scalar("network.strictAllowlist").unwrap();
    assert_eq!(s.value, Value::Bool(true));
    assert_eq!(s.provenance.layer, Layer::Managed);
    // Among --settings files, the later one wins.
    let s = eff.scalar("network.allowLocalBinding").unwrap();
    assert_eq!(s.value, Value::Bool(false));
    assert_eq!(&*s.provenance.source, "c2");
    assert_eq!(
        eff.layers.iter().map(|p| &*p.source).collect::<Vec<_>>(),
        ["u", "c1", "c2", "m"]
    );
}

#[test]
fn lists_are_unions_and_keep_the_highest_provenance() {
    let eff = Effective::merge(&[
        lay(
            Layer::User,
            0,
            "u",
            r#"{"filesystem": {"denyRead": ["~/.aws", "~/.ssh"]}}"#,
        ),
        lay(
            Layer::Managed,
            0,
            "m",
            r#"{"filesystem": {"denyRead": ["~/.ssh"]}}"#,
        ),
        lay(
            Layer::Project,
            0,
            "p",
            r#"{"filesystem": {"denyRead": ["secrets"]}}"#,
        ),
    ]);
    assert_eq!(
        values(&eff, "filesystem.denyRead"),
        vec![
            ("~/.aws".to_string(), Layer::User),
            ("~/.ssh".to_string(), Layer::Managed),
            ("secrets".to_string(), Layer::Project)
        ]
    );
}

#[test]
fn an_empty_list_still_counts_as_set() {
    let eff = Effective::merge(&[lay(
        Layer::User,
        0,
        "u",
        r#"{"network": {"allowedDomains": []}}"#,
    )]);
    assert!(eff.has_list("network.allowedDomains"));
    assert!(!eff.has_list("network.deniedDomains"));
}

#[test]
fn maps_merge_by_key() {
    let eff = Effective::merge(&[
        lay(
            Layer::User,
            0,
            "u",
            r#"{"network": {"deniedDomainReasons": {"a.com": "u", "b.com": "u"}}, "ignoreViolations": {"*": ["/usr"]}}"#,
        ),
        lay(
            Layer::Managed,
            0,
            "m",
            r#"{"network": {"deniedDomainReasons": {"a.com": "m"}}, "ignoreViolations": {"*": ["/opt"], "git": ["/tmp"]}}"#,
        ),
    ]);
    let m = &eff.maps["network.deniedDomainReasons"];
    assert_eq!(m["a.com"].value, Value::String("m".into()));
    assert_eq!(m["b.com"].value, Value::String("u".into()));
    let iv = &eff.map_lists["ignoreViolations"];
    assert_eq!(iv["*"].len(), 2);
    assert_eq!(iv["git"].len(), 1);
}

#[test]
fn opaque_values_are_kept_whole() {
    let eff = Effective::merge(&[lay(
        Layer::User,
        0,
        "u",
        r#"{"network": {"mitmProxy": {"socketPath": "/x", "domains": ["a"]}}}"#,
    )]);
    assert!(eff.scalar("network.mitmProxy").unwrap().value.is_object());
}

fn ctx() -> Context {
    Context {
        cwd: PathBuf::from("/w"),
        home: PathBuf::from("/home/u"),
        tmpdir: None,
        approver_attached: false,
        protected: Vec::new(),
    }
}

#[test]
fn policy_build_reports_bad_domain_patterns_with_provenance() {
    let fs = crate::policy::fsview::MemFs::new();
    let e = Policy::build(
        &[lay(
            Layer::Project,
            0,
            "/w/.warden/settings.json",
            r#"{"network": {"allowedDomains": ["*.com"]}}"#,
        )],
        ctx(),
        &fs,
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("`network.allowedDomains` entry \"*.com\" from /w/.warden/settings.json (project settings): "), "{e}");
}

#[test]
fn policy_reads_scalars_with_defaults() {
    let fs = crate::policy::fsview::MemFs::new();
    let p = Policy::build(&[], ctx(), &fs).unwrap();
    assert!(p.sandbox_enabled());
    assert!(p.fail_if_unavailable());
    assert_eq!(p.mode, Mode::PerCommand);
    assert!(p.commands.sandbox_enabled && p.commands.auto_allow_if_sandboxed);
    let p = Policy::build(
        &[lay(Layer::User, 0, "u", r#"{"sandbox": {"enabled": false, "mode": "whole-process", "failIfUnavailable": false, "network": {"allowUnixSockets": ["~/s.sock"]}}}"#)],
        ctx(),
        &fs,
    )
    .unwrap();
    assert!(!p.sandbox_enabled());
    assert!(!p.fail_if_unavailable());
    assert_eq!(p.mode, Mode::WholeProcess);
    assert_eq!(p.unix_sockets[0].pattern, PathBuf::from("/home/u/s.sock"));
}

#[test]
fn a_lower_layer_cannot_remove_a_managed_domain_deny() {
    let fs = crate::policy::fsview::MemFs::new();
    let p = Policy::build(
        &[
            lay(
                Layer::Managed,
                0,
                "m",
                r#"{"network": {"deniedDomains": ["*.evil.com"]}}"#,
            ),
            lay(
                Layer::User,
                0,
                "u",
                r#"{"network": {"allowedDomains": ["x.evil.com", "ok.com"], "deniedDomains": []}}"#,
            ),
            lay(
                Layer::Flags,
                0,
                "--allow-domain",
                r#"{"network": {"allowedDomains": ["y.evil.com"]}}"#,
            ),
        ],
        ctx(),
        &fs,
    )
    .unwrap();
    for host in ["x.evil.com", "y.evil.com"] {
        let h = crate::policy::domain::canonical_host(host).unwrap();
        let v = p.check_domain(&h, Some(443));
        assert_eq!(v.decision, crate::policy::Decision::Deny, "{host}");
        assert!(v.rule.unwrap().provenance.is_managed());
    }
}

mod props {
    use super::*;
    use crate::policy::settings::{FilesystemSettings, NetworkSettings, SandboxSettings};
    use proptest::prelude::*;

    fn entry() -> impl Strategy<Value = String> {
        "[a-c]{1,2}"
    }

    fn settings() -> impl Strategy<Value = SandboxSettings> {
        (
            prop::option::of(prop::collection::vec(entry(), 0..4)),
            prop::option::of(prop::collection::vec(entry(), 0..4)),
            prop::option::of(prop::collection::vec(entry(), 0..4)),
            prop::option::of(any::<bool>()),
        )
            .prop_map(|(dr, dw, dd, strict)| SandboxSettings {
                filesystem: Some(FilesystemSettings {
                    deny_read: dr,
                    deny_write: dw,
                    ..Default::default()
                }),
                network: Some(NetworkSettings {
                    denied_domains: dd,
                    strict_allowlist: strict,
                    ..Default::default()
                }),
                ..Default::default()
            })
    }

    fn layer_kind() -> impl Strategy<Value = Layer> {
        prop_oneof![
            Just(Layer::User),
            Just(Layer::Project),
            Just(Layer::Cli),
            Just(Layer::Flags)
        ]
    }

    proptest! {
        /// Whatever the other layers say, every managed deny entry survives the merge and is
        /// still attributed to the managed layer.
        #[test]
        fn merging_never_drops_a_managed_deny(
            managed in settings(),
            others in prop::collection::vec((layer_kind(), settings()), 0..5),
        ) {
            let mut layers: Vec<LayerInput> = others
                .into_iter()
                .enumerate()
                .map(|(i, (l, s))| layer(l, i as u16, "x", s))
                .collect();
            layers.insert(0, layer(Layer::Managed, 0, "m", managed.clone()));
            let eff = Effective::merge(&layers);
            let fs = managed.filesystem.clone().unwrap_or_default();
            let net = managed.network.clone().unwrap_or_default();
            for (key, list) in [
                ("filesystem.denyRead", fs.deny_read.unwrap_or_default()),
                ("filesystem.denyWrite", fs.deny_write.unwrap_or_default()),
                ("network.deniedDomains", net.denied_domains.unwrap_or_default()),
            ] {
                for item in list {
                    let found = eff.lists.get(key).into_iter().flatten().find(|s| s.value == Value::String(item.clone()));
                    prop_assert!(found.is_some_and(|s| s.provenance.is_managed()), "{} {}", key, item);
                }
            }
            if let Some(strict) = net.strict_allowlist {
                prop_assert_eq!(eff.bool("network.strictAllowlist"), Some(strict));
            }
        }
    }
}

#[test]
fn a_session_approved_host_is_allowed_with_or_without_an_approver_but_never_past_a_deny() {
    let fs = crate::policy::fsview::MemFs::new();
    for attached in [true, false] {
        let mut c = ctx();
        c.approver_attached = attached;
        let p = Policy::build(
            &[lay(
                Layer::User,
                0,
                "/u.json",
                r#"{"network": {"deniedDomains": ["bad.example"]}}"#,
            )],
            c,
            &fs,
        )
        .unwrap();
        let ok = crate::policy::domain::canonical_host("ok.example").unwrap();
        let bad = crate::policy::domain::canonical_host("bad.example").unwrap();
        let other = crate::policy::domain::canonical_host("other.example").unwrap();
        p.approvals.approve_domain(&ok);
        p.approvals.approve_domain(&bad);
        assert_eq!(
            p.check_domain(&ok, Some(443)).decision,
            crate::policy::decision::Decision::Allow
        );
        assert_eq!(
            p.check_domain(&bad, Some(443)).decision,
            crate::policy::decision::Decision::Deny
        );
        assert_ne!(
            p.check_domain(&other, Some(443)).decision,
            crate::policy::decision::Decision::Allow
        );
    }
}

#[test]
fn a_proxy_is_started_when_anything_could_be_allowed_and_not_everything_is_denied() {
    let fs = crate::policy::fsview::MemFs::new();
    let build = |json: &str, attached: bool| {
        let mut c = ctx();
        c.approver_attached = attached;
        Policy::build(&[lay(Layer::User, 0, "/u.json", json)], c, &fs).unwrap()
    };
    // Nothing allowed, nobody to ask: no proxy.
    assert!(!build("{}", false).wants_proxy(false));
    assert!(!build("{}", true).wants_proxy(false));
    // Someone to ask (attached and an approver): any host could be allowed.
    assert!(build("{}", true).wants_proxy(true));
    assert!(
        !build("{}", false).wants_proxy(true),
        "an approver nobody attends"
    );
    assert!(!build(r#"{"network": {"strictAllowlist": true}}"#, true).wants_proxy(true));
    // Allowed hosts, external proxy ports, session-approved hosts.
    assert!(build(r#"{"network": {"allowedDomains": ["a.example"]}}"#, false).wants_proxy(false));
    assert!(build(r#"{"network": {"httpProxyPort": 3128}}"#, false).wants_proxy(false));
    let p = build("{}", false);
    p.approvals
        .approve_domain(&crate::policy::domain::canonical_host("a.example").unwrap());
    assert!(p.wants_proxy(false));
    // Everything denied wins over all of it.
    assert!(!build(
        r#"{"network": {"allowedDomains": ["a.example"], "deniedDomains": ["*"]}}"#,
        true
    )
    .wants_proxy(true));
}

/// Lists are unioned in linear time: a project file with 100 000 `denyRead` entries (an
/// untrusted one may narrow the sandbox) must not cost minutes.
#[test]
fn a_huge_list_merges_in_linear_time() {
    let entries: Vec<serde_json::Value> = (0..100_000)
        .map(|i| serde_json::Value::String(format!("/x/{i}")))
        .collect();
    let json = serde_json::json!({"filesystem": {"denyRead": entries}});
    let settings: SandboxSettings = serde_json::from_value(json).unwrap();
    let layer = LayerInput {
        provenance: Provenance::builtin(),
        settings,
    };
    let started = std::time::Instant::now();
    let eff = Effective::merge(&[layer.clone(), layer]);
    assert_eq!(eff.strings("filesystem.denyRead").len(), 100_000);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

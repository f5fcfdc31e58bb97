use super::*;
use crate::policy::decision::Provenance;
use crate::policy::settings::SandboxSettings;
use serde_json::json;

fn refused(v: serde_json::Value) -> Vec<String> {
    refused_keys(&v, Path::new("/w/p"))
}

#[test]
fn narrowing_settings_and_domains_are_fine_untrusted() {
    assert!(refused(json!({
        "filesystem": {"denyRead": ["secrets"], "denyWrite": ["dist"], "allowWrite": ["build", "./out/**", "/w/p/cache"]},
        "network": {"allowedDomains": ["registry.npmjs.org"], "deniedDomains": ["x.example"], "strictAllowlist": true},
        "warden": {"readOnly": true, "env": {"deny": ["AWS_*"]}, "audit": {"required": true}},
        "failIfUnavailable": true
    }))
    .is_empty());
}

#[test]
fn what_widens_the_sandbox_or_runs_code_on_the_host_is_refused_untrusted() {
    let keys = refused(json!({
        "filesystem": {"allowWrite": ["../other", "~/x", "/etc", "in/../../out", "ok"], "allowGitConfig": true, "allowRead": ["~/.aws"]},
        "network": {"allowAllUnixSockets": true, "httpProxyPort": 8080},
        "warden": {
            "hooks": {"beforeCommand": "hook.sh"},
            "audit": {"violationsFile": "~/.bashrc", "enabled": false},
            "metrics": {"file": "/tmp/m"},
            "readOnly": false,
            "trustedProjects": ["/w/p"]
        },
        "ignoreViolations": {"*": ["/"]},
        "excludedCommands": ["curl"],
        "mandatoryDenySearchDepth": 1
    }));
    for k in [
        "`filesystem.allowGitConfig`",
        "`filesystem.allowRead`",
        "`network.allowAllUnixSockets`",
        "`network.httpProxyPort`",
        "`warden.hooks.beforeCommand`",
        "`warden.audit.violationsFile`",
        "`warden.audit.enabled`",
        "`warden.metrics.file`",
        "`warden.readOnly`",
        "`warden.trustedProjects`",
        "`ignoreViolations`",
        "`excludedCommands`",
        "`mandatoryDenySearchDepth`",
    ] {
        assert!(keys.iter().any(|x| x == k), "{k} not refused: {keys:?}");
    }
    let write = keys
        .iter()
        .find(|k| k.starts_with("`filesystem.allowWrite`"))
        .unwrap();
    for e in ["../other", "~/x", "/etc", "in/../../out"] {
        assert!(write.contains(e), "{write}");
    }
    assert!(!write.contains("ok"), "{write}");
}

fn layer(layer: Layer, v: serde_json::Value) -> LayerInput {
    LayerInput {
        provenance: Provenance::new(layer, 0, "f.json"),
        settings: serde_json::from_value::<SandboxSettings>(v).unwrap(),
    }
}

#[test]
fn trust_comes_from_other_layers_only_and_covers_subdirectories() {
    let home = Path::new("/home/u");
    let user = layer(
        Layer::User,
        json!({"warden": {"trustedProjects": ["~/work", "relative/x"]}}),
    );
    assert!(is_trusted(
        std::slice::from_ref(&user),
        Path::new("/home/u/work/p"),
        home
    ));
    assert!(is_trusted(
        std::slice::from_ref(&user),
        Path::new("/home/u/work"),
        home
    ));
    assert!(!is_trusted(
        std::slice::from_ref(&user),
        Path::new("/home/u/workshop"),
        home
    ));
    assert!(!is_trusted(&[user], Path::new("/x/relative/x"), home));
    let own = layer(
        Layer::Project,
        json!({"warden": {"trustedProjects": ["/w/p"]}}),
    );
    assert!(!is_trusted(&[own], Path::new("/w/p"), home));
}

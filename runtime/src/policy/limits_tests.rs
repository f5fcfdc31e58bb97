use super::*;
use crate::policy::settings::LimitsSettings;
use std::collections::BTreeMap;

fn policy(limits: LimitsSettings) -> Policy {
    test_policy_with(limits, None)
}

#[test]
fn rlimits_by_name_and_an_unknown_name_is_an_error_listing_the_known_ones() {
    let mut r = BTreeMap::new();
    r.insert("nofile".to_string(), 256);
    r.insert("cpu".to_string(), 10);
    let p = policy(LimitsSettings {
        rlimits: Some(r.clone()),
        ..Default::default()
    });
    let mut got = rlimits(&p).expect("known names");
    got.sort_by_key(|(r, _)| format!("{r:?}"));
    assert_eq!(got, [(Rlimit::Cpu, 10), (Rlimit::Nofile, 256)]);

    r.insert("nofiles".to_string(), 1);
    let p = policy(LimitsSettings {
        rlimits: Some(r),
        ..Default::default()
    });
    let err = rlimits(&p).expect_err("a misspelt name");
    assert!(
        err.contains("`nofiles`") && err.contains("nofile, nproc"),
        "{err}"
    );
}

#[test]
fn every_documented_name_parses() {
    for name in Rlimit::NAMES {
        assert!(Rlimit::from_name(name).is_some(), "{name}");
    }
    assert_eq!(Rlimit::from_name("NOFILE"), None);
}

#[test]
fn cgroup_limits_name_their_setting() {
    let p = policy(LimitsSettings {
        pids_max: Some(64),
        cpu_max: Some("50000 100000".into()),
        ..Default::default()
    });
    assert_eq!(
        cgroup_limits(&p),
        [
            ("warden.limits.pidsMax", "64".to_string()),
            ("warden.limits.cpuMax", "50000 100000".to_string())
        ]
    );
    assert!(cgroup_limits(&policy(LimitsSettings::default())).is_empty());
}

use super::*;
use crate::policy::limits::test_policy_with as policy;
use crate::policy::limits::Rlimit;
use crate::policy::settings::LimitsSettings;

#[test]
fn rlimits_are_enforced_and_cgroup_limits_refused_unless_weaker_is_allowed() {
    let rl = LimitsSettings {
        rlimits: Some([("nofile".to_string(), 128)].into_iter().collect()),
        ..Default::default()
    };
    assert_eq!(
        limits(&policy(rl.clone(), None)),
        Ok(Limits {
            rlimits: vec![(Rlimit::Nofile, 128)],
            warning: None
        })
    );
    let with_cgroup = LimitsSettings {
        memory_max: Some(1 << 30),
        pids_max: Some(100),
        ..rl
    };
    let err = limits(&policy(with_cgroup.clone(), None)).expect_err("fails closed");
    assert!(
        err.contains("warden.limits.pidsMax, warden.limits.memoryMax")
            && err.contains("failIfUnavailable: false"),
        "{err}"
    );
    let weaker = limits(&policy(with_cgroup, Some(false))).expect("allowed weaker");
    assert_eq!(weaker.rlimits, [(Rlimit::Nofile, 128)]);
    assert!(
        weaker
            .warning
            .as_deref()
            .is_some_and(|w| w.contains("running without warden.limits.pidsMax")),
        "{weaker:?}"
    );
}

#[test]
fn a_misspelt_rlimit_is_an_error_on_macos_too() {
    let bad = LimitsSettings {
        rlimits: Some([("files".to_string(), 1)].into_iter().collect()),
        ..Default::default()
    };
    assert!(limits(&policy(bad, None))
        .expect_err("unknown")
        .contains("unknown rlimit `files`"));
}

#[test]
fn ignored_paths_gain_their_real_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let real = dir.path().join("real");
    std::fs::create_dir(&real).expect("mkdir");
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let missing = dir.path().join("missing");
    let got = ignored_with_real_paths(vec![link.clone(), missing.clone()]);
    let real = std::fs::canonicalize(&real).expect("canonical");
    assert!(
        got.contains(&real) && got.contains(&link) && got.contains(&missing),
        "{got:?}"
    );
}

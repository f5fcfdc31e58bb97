use super::*;

#[test]
fn ignore_violations_patterns_match_whole_leading_words() {
    use std::collections::BTreeMap;
    let mut map = BTreeMap::new();
    map.insert("*".to_string(), vec!["/usr/bin".to_string()]);
    map.insert(
        "git push".to_string(),
        vec!["/tmp/x".to_string(), "rel".to_string()],
    );
    let policy = crate::policy::merge::test_policy(crate::policy::settings::SandboxSettings {
        ignore_violations: Some(map),
        ..Default::default()
    })
    .unwrap();
    let paths = |line: &str| ignored_paths(&policy, line);
    assert_eq!(paths("ls -l"), [PathBuf::from("/usr/bin")]);
    let mut push = paths("git push origin main");
    push.sort();
    assert_eq!(
        push,
        [
            PathBuf::from("/tmp/x"),
            PathBuf::from("/usr/bin"),
            PathBuf::from("/w/rel")
        ]
    );
    assert_eq!(paths("git pushx"), [PathBuf::from("/usr/bin")]);
    assert_eq!(paths("git"), [PathBuf::from("/usr/bin")]);
}

#[test]
fn a_target_is_ignored_under_a_path_component_wise() {
    let ignored = [PathBuf::from("/tmp/x")];
    assert!(is_ignored("/tmp/x", &ignored));
    assert!(is_ignored("/tmp/x/y/z", &ignored));
    assert!(!is_ignored("/tmp/xy", &ignored));
    assert!(!is_ignored("example.com:443", &ignored));
    assert!(!is_ignored("/tmp/x", &[]));
}

#[test]
fn a_path_spelled_with_dot_dot_is_never_ignored() {
    let ignored = vec![PathBuf::from("/usr/share/doc")];
    assert!(is_ignored("/usr/share/doc/x", &ignored));
    assert!(!is_ignored("/usr/share/doc/../../../etc/x", &ignored));
    assert!(!is_ignored(
        "/usr/share/doc/./x/../../../../etc/x",
        &ignored
    ));
    assert!(!is_ignored("usr/share/doc/x", &ignored));
}

#[test]
fn a_path_cut_at_the_capture_limit_is_never_ignored() {
    let ignored = vec![PathBuf::from("/usr/share/doc")];
    // What the record holds for `/usr/share/doc` + 600 slashes + `../../../etc/x`.
    let cut = format!("/usr/share/doc{}…", "/".repeat(497));
    assert!(!is_ignored(&cut, &ignored));
    assert!(!is_ignored("/usr/share/doc/x…", &ignored));
}

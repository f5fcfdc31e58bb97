//! `warden profile --platform macos`: the Seatbelt profile, printed on any OS.

use std::ffi::OsStr;
use warden_tests::TestEnv;

#[test]
fn prints_the_seatbelt_profile_and_its_parameters() {
    let env = TestEnv::new();
    let settings = env.write_settings(
        "team.json",
        r#"{"filesystem": {"denyRead": ["~/.aws"]}, "network": {"allowedDomains": ["github.com"]}}"#,
    );
    let out = env.run([
        OsStr::new("profile"),
        OsStr::new("--platform"),
        OsStr::new("macos"),
        OsStr::new("--settings"),
        settings.as_os_str(),
        OsStr::new("--cwd"),
        env.project().as_os_str(),
        OsStr::new("--http-port"),
        OsStr::new("40001"),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = &out.stdout;
    assert!(text.contains("\n(version 1)\n"), "{text}");
    assert!(text.contains("(deny default (with message \"warden-profile\"))"));
    assert!(text.contains("(remote ip \"localhost:40001\") (remote ip \"localhost:1080\")"));
    let project = env.project().display().to_string();
    assert!(
        text.lines()
            .any(|l| l.starts_with(";; -D P") && l.ends_with(&format!("={project}"))),
        "the working directory is a parameter:\n{text}"
    );
    assert!(text.contains(&format!("={}/.aws\n", env.home().display())));
    // No path appears outside the parameter comments.
    for line in text.lines().filter(|l| !l.starts_with(";;")) {
        assert!(!line.contains(&project), "{line}");
    }
}

#[test]
fn a_hostile_directory_name_stays_a_parameter() {
    let env = TestEnv::new();
    let dir = env.root().join("a\") (allow default) ;\nb");
    std::fs::create_dir_all(&dir).unwrap();
    let out = env.run([
        OsStr::new("profile"),
        OsStr::new("--platform"),
        OsStr::new("macos"),
        OsStr::new("--cwd"),
        dir.as_os_str(),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stdout.contains("(allow default)\n"));
    assert!(
        out.stdout.contains("\\x0ab'\n"),
        "the newline is escaped in the listing:\n{}",
        out.stdout
    );
}

#[test]
fn only_known_platforms() {
    let env = TestEnv::new();
    let out = env.run(["profile", "--platform", "windows"]);
    assert_eq!(out.code, 125);
}

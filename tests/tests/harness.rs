//! Smoke test of the test harness itself: the binary is found (and built) and answers.

use warden_tests::{warden_bin, TestEnv};

#[test]
fn warden_binary_exists_and_prints_its_version() {
    let bin = warden_bin();
    assert!(bin.is_file(), "{} is not a file", bin.display());

    let out = TestEnv::new().run(["--version"]);
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    let expected = format!("warden {}", env!("CARGO_PKG_VERSION"));
    assert!(
        out.stdout.starts_with(&expected),
        "`warden --version` printed {:?}, expected it to start with {expected:?}",
        out.stdout
    );
}

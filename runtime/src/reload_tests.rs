use super::*;
use crate::policy::decision::Decision;
use crate::policy::load::load_file;
use crate::policy::merge::test_policy;
use std::sync::Mutex;
use std::time::Instant;

fn policy_from(path: &std::path::Path) -> Result<Policy, String> {
    let parsed = load_file(path).map_err(|e| e.to_string())?;
    test_policy(parsed.settings).map_err(|e| e.to_string())
}

fn decision(live: &LivePolicy, host: &str) -> Decision {
    let host = crate::policy::domain::canonical_host(host).unwrap();
    live.get().check_domain(&host, Some(443)).decision
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

struct Rig {
    _dir: tempfile::TempDir,
    file: PathBuf,
    live: Arc<LivePolicy>,
    notices: Arc<Mutex<Vec<String>>>,
    reloader: Option<Reloader>,
}

fn rig(initial: Option<&str>, nested: bool) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let file = if nested {
        dir.path().join("a/b/settings.json")
    } else {
        dir.path().join("settings.json")
    };
    if let Some(text) = initial {
        std::fs::write(&file, text).unwrap();
    }
    let start = if file.exists() {
        policy_from(&file).unwrap()
    } else {
        test_policy(Default::default()).unwrap()
    };
    let live = LivePolicy::new(Arc::new(start));
    let notices = Arc::new(Mutex::new(Vec::new()));
    let reloader = {
        let file = file.clone();
        let notices = notices.clone();
        watch(
            vec![file.clone()],
            live.clone(),
            Box::new(move || policy_from(&file)),
            Box::new(move |m| notices.lock().unwrap().push(m.to_string())),
        )
        .unwrap()
    };
    Rig {
        _dir: dir,
        file,
        live,
        notices,
        reloader: Some(reloader),
    }
}

const ALLOW_A: &str = r#"{ "network": { "allowedDomains": ["a.test"] } }"#;
const ALLOW_B: &str = r#"{ // a comment
  "network": { "allowedDomains": ["b.test"] } }"#;

#[test]
fn an_edit_replaces_the_policy_for_new_decisions() {
    let r = rig(Some(ALLOW_A), false);
    assert_eq!(decision(&r.live, "a.test"), Decision::Allow);
    std::fs::write(&r.file, ALLOW_B).unwrap();
    wait_until("the new policy", || r.live.generation() == 1);
    assert_eq!(decision(&r.live, "b.test"), Decision::Allow);
    assert_ne!(decision(&r.live, "a.test"), Decision::Allow);
    let notices = r.notices.lock().unwrap().clone();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(notices[0].contains("settings changed"), "{notices:?}");
    assert!(
        notices[0].contains(&r.file.display().to_string()),
        "{notices:?}"
    );
}

#[test]
fn an_invalid_edit_is_rejected_and_the_old_policy_stays() {
    let r = rig(Some(ALLOW_A), false);
    std::fs::write(&r.file, r#"{ "network": { "allowedDomains": "#).unwrap();
    wait_until("the rejection", || !r.notices.lock().unwrap().is_empty());
    assert_eq!(r.live.generation(), 0);
    assert_eq!(decision(&r.live, "a.test"), Decision::Allow);
    let notices = r.notices.lock().unwrap().clone();
    assert!(notices[0].contains("rejected"), "{notices:?}");
    // A later valid edit still applies.
    std::fs::write(&r.file, ALLOW_B).unwrap();
    wait_until("the new policy", || r.live.generation() == 1);
    assert_eq!(decision(&r.live, "b.test"), Decision::Allow);
}

#[test]
fn a_settings_file_that_appears_later_in_a_new_directory_is_picked_up() {
    let r = rig(None, true);
    assert_ne!(decision(&r.live, "b.test"), Decision::Allow);
    std::fs::create_dir_all(r.file.parent().unwrap()).unwrap();
    // Written in steps, as an editor would: the directories first, then the file.
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(&r.file, ALLOW_B).unwrap();
    wait_until("the new policy", || {
        decision(&r.live, "b.test") == Decision::Allow
    });
}

#[test]
fn an_atomic_replace_by_rename_is_seen() {
    let r = rig(Some(ALLOW_A), false);
    let tmp = r.file.with_extension("json.tmp");
    std::fs::write(&tmp, ALLOW_B).unwrap();
    std::fs::rename(&tmp, &r.file).unwrap();
    wait_until("the new policy", || r.live.generation() == 1);
    assert_eq!(decision(&r.live, "b.test"), Decision::Allow);
}

#[test]
fn session_approvals_survive_a_reload() {
    let r = rig(Some(ALLOW_A), false);
    let before = r.live.get().approvals.clone();
    std::fs::write(&r.file, ALLOW_B).unwrap();
    wait_until("the new policy", || r.live.generation() == 1);
    assert!(Arc::ptr_eq(&before, &r.live.get().approvals));
}

#[test]
fn touching_without_a_change_rebuilds_nothing_and_dropping_stops() {
    let mut r = rig(Some(ALLOW_A), false);
    std::fs::write(&r.file, ALLOW_A).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(r.live.generation(), 0);
    assert!(r.notices.lock().unwrap().is_empty());
    drop(r.reloader.take());
    std::fs::write(&r.file, ALLOW_B).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(r.live.generation(), 0);
}

/// Red-team round 23: a watched settings path the command could repoint at a FIFO blocked
/// the supervisor in `open`, and at /dev/zero grew it without bound. Read as the loader
/// reads: a regular file of bounded size, never blocking.
#[test]
fn a_fifo_or_a_device_in_place_of_a_settings_file_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("settings.json");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let started = std::time::Instant::now();
    let read = contents(&[fifo.clone(), std::path::PathBuf::from("/dev/zero")]);
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    assert!(read.values().all(Option::is_none), "{read:?}");
}

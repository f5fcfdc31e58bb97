//! The collector (coalescing, the JSON-lines file, the annotation) and, as root, the real
//! programs: load, watch a cgroup, see a violation inside it and nothing from outside.

use super::record::{Errno, Kind, Layer, SandboxView, ViolationRecord};
use super::*;

fn rec(target: &str, violation: bool) -> ViolationRecord {
    ViolationRecord {
        time: "T".into(),
        sandbox: "warden-1".into(),
        labels: Default::default(),
        source: "ebpf",
        cgroup_id: Some(1),
        pid: Some(2),
        ppid: Some(1),
        comm: Some("cat".into()),
        exe: None,
        kind: Kind::FileRead,
        violation,
        operation: "open".into(),
        target: target.into(),
        detail: None,
        errno: Some(Errno::new(13)),
        layer: Some(Layer::Dac),
        reason: None,
        rule: None,
        provenance: None,
        count: 1,
        approximate: false,
    }
}

#[test]
fn identical_records_coalesce_with_a_count_in_first_seen_order() {
    let out = coalesce(vec![rec("/a", true), rec("/b", true), rec("/a", true)]);
    assert_eq!(out.len(), 2);
    assert_eq!((out[0].target.as_str(), out[0].count), ("/a", 2));
    assert_eq!((out[1].target.as_str(), out[1].count), ("/b", 1));
    // A different errno is a different record.
    let mut other = rec("/a", true);
    other.errno = Some(Errno::new(30));
    assert_eq!(coalesce(vec![rec("/a", true), other]).len(), 2);
}

#[test]
fn the_collector_appends_json_lines_and_keeps_violations_for_the_annotation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.jsonl");
    std::fs::write(&path, "{\"earlier\":true}\n").unwrap();
    let c = Collector::new(Some(&path)).unwrap();
    c.push(rec("/a", true));
    c.push(rec("/a", true));
    c.push(rec("/exec", false));
    c.flush();
    c.push(rec("/a", true));
    c.flush();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert_eq!(lines[0]["earlier"], true);
    assert_eq!(
        (lines[1]["target"].as_str(), lines[1]["count"].as_u64()),
        (Some("/a"), Some(2))
    );
    assert_eq!(lines[2]["violation"], false);
    let (kept, more) = c.violations();
    assert_eq!(more, 0);
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].count, 3);
    let block = annotation(&kept, more, &Losses::default());
    assert!(block.starts_with("<sandbox_violations>\n"), "{block}");
    assert!(
        block.contains("file-read open /a (EACCES) [dac] by cat ×3"),
        "{block}"
    );
    assert!(block.ends_with("</sandbox_violations>\n"), "{block}");
}

#[test]
fn the_annotation_is_empty_without_violations_and_reports_losses() {
    assert_eq!(annotation(&[], 0, &Losses::default()), "");
    let lost = Losses {
        ring_full: 3,
        pending_full: 0,
        undecodable: 1,
        rate_limited: 0,
        not_relayed: 0,
    };
    let block = annotation(&[], 0, &lost);
    assert!(block.contains("4 audit events lost"), "{block}");
    assert!(!block.contains("share"), "{block}");
    // A sandbox held to its share of the daemon's ring buffer is told how much.
    let limited = Losses {
        rate_limited: 5,
        ..lost
    };
    let block = annotation(&[], 0, &limited);
    assert!(
        block.contains("9 audit events lost (ring buffer full: 3, over its share of the node's ring buffer: 5,"),
        "{block}"
    );
}

#[test]
fn an_unwritable_violations_file_is_an_error() {
    let err = Collector::new(Some(Path::new("/nonexistent/dir/v.jsonl")))
        .err()
        .expect("fails");
    assert!(
        err.to_string().contains("/nonexistent/dir/v.jsonl"),
        "{err}"
    );
}

// ---- the real programs (root; CI=true turns a missing prerequisite into a failure) ----------

fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| v == "true")
}

/// Loads the programs, or skips (outside CI) when this machine cannot.
fn auditor_or_skip(test: &str) -> Option<Auditor> {
    let why = if !nix::unistd::geteuid().is_root() {
        "not running as root".to_string()
    } else {
        match Auditor::load() {
            Ok(a) => return Some(a),
            Err(e) => format!("loading the programs failed: {e}"),
        }
    };
    assert!(
        !in_ci(),
        "{test}: CI=true but auditing cannot run here: {why}"
    );
    eprintln!("\n*** SKIPPED {test}: {why} ***\n");
    None
}

#[test]
fn the_programs_record_a_watched_cgroup_and_nothing_outside() {
    let Some(mut auditor) =
        auditor_or_skip("the_programs_record_a_watched_cgroup_and_nothing_outside")
    else {
        return;
    };
    eprintln!(
        "audit programs: {} tracepoints attached in {:?}",
        auditor.attached(),
        auditor.load_time()
    );
    let cg =
        match crate::linux::cgroup::Cgroup::create(&format!("audit-test-{}", std::process::id())) {
            Ok(cg) => cg,
            Err(e) => {
                assert!(!in_ci(), "CI=true but no cgroup v2 leaf: {e}");
                eprintln!("skipped: no cgroup v2 leaf: {e}");
                return;
            }
        };
    let id = auditor.watch(cg.path()).unwrap();
    assert_eq!(id, cg.id());
    let collector = Collector::new(None).unwrap();
    let running = auditor
        .start(SandboxView::default(), collector.clone())
        .unwrap();
    // Inside: a shell placed in the cgroup, then as nobody failing to create a file in /etc
    // (EACCES). Outside: the same failure.
    let target = format!("/etc/warden-audit-test-{}", std::process::id());
    let fail = format!(
        "setpriv --reuid=65534 --regid=65534 --clear-groups sh -c ': > {target}' 2>/dev/null"
    );
    let procs = cg.path().join("cgroup.procs");
    let script = format!("echo $$ > {}; {fail}; exit 0", procs.display());
    let st = std::process::Command::new("sh")
        .arg("-c")
        .arg(&script)
        .status()
        .unwrap();
    assert!(st.success());
    let st = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{fail}; exit 0"))
        .status()
        .unwrap();
    assert!(st.success());
    std::thread::sleep(Duration::from_millis(200));
    let losses = running.finish();
    assert_eq!(losses, Losses::default());
    let (records, _) = collector.violations();
    let inside: Vec<_> = records.iter().filter(|r| r.target == target).collect();
    assert_eq!(inside.len(), 1, "{records:#?}");
    assert_eq!(inside[0].kind, Kind::FileWrite);
    assert_eq!(
        inside[0].count, 1,
        "the outside attempt was counted: {records:#?}"
    );
    assert_eq!(inside[0].errno, Some(Errno::new(13)));
    assert_eq!(inside[0].cgroup_id, Some(id));
    assert!(
        records.iter().all(|r| r.cgroup_id == Some(id)),
        "a record from outside the cgroup: {records:#?}"
    );
    let _ = cg.remove();
}

#[test]
fn a_run_appends_at_most_its_cap_to_the_file_and_counts_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.jsonl");
    let c = Collector::new(Some(&path)).unwrap();
    c.set_file_cap(4096);
    for i in 0..200 {
        c.push(rec(&format!("/etc/x{i}"), true));
        c.flush();
    }
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size <= 4096, "{size}");
    assert!(size > 1000, "{size}");
    let written = std::fs::read_to_string(&path).unwrap().lines().count() as u64;
    assert_eq!(written + c.over_cap(), 200);
    // The summary still has them all.
    let (kept, more) = c.violations();
    assert_eq!(kept.len() as u64 + more, 200);
}

/// The daemon's node-wide file: one sandbox's flood fills only its share, another sandbox's
/// records are still written, and the file rotates instead of stopping.
#[test]
fn the_daemon_file_gives_each_sandbox_a_share_and_rotates() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("node.jsonl");
    let c = Collector::for_daemon(Some(&path)).unwrap();
    c.set_file_cap(16 << 10);
    if let Ok(mut i) = c.inner.lock() {
        i.per_sandbox_cap = Some(4 << 10);
    }
    for i in 0..500 {
        let mut r = rec(&format!("/etc/flood{i}"), true);
        r.sandbox = "attacker".into();
        c.push(r);
        c.flush();
    }
    let mut v = rec("/etc/victim-write", true);
    v.sandbox = "victim".into();
    c.push(v);
    c.flush();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("/etc/victim-write"), "{text}");
    let attacker = text.lines().filter(|l| l.contains("attacker")).count();
    assert!(attacker > 0 && attacker < 100, "{attacker}");
    assert!(c.over_cap() >= 400, "{}", c.over_cap());
    // Many sandboxes each within their share: the file rotates and keeps recording.
    for s in 0..40 {
        for i in 0..10 {
            let mut r = rec(&format!("/etc/s{s}-{i}"), true);
            r.sandbox = format!("sandbox-{s}");
            c.push(r);
            c.flush();
        }
    }
    assert!(dir.path().join("node.jsonl.1").exists());
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("/etc/s39-9"), "the newest record is written");
    assert!(std::fs::metadata(&path).unwrap().len() <= 16 << 10);
}

/// Red-team round 18: a record whose directory userspace read after the call (the command
/// chose where it pointed) is never dropped by `ignoreViolations`; the same record with the
/// kernel's own directory is.
#[test]
fn an_approximate_record_is_never_dropped_by_ignore_violations() {
    let ignored = vec![PathBuf::from("/usr/share")];
    let mut r = rec("/usr/share/doc/evil", true);
    assert!(is_dropped(&r, &ignored));
    r.approximate = true;
    assert!(!is_dropped(&r, &ignored));
    assert!(r.summary_line().ends_with("(path approximate)"));
    // A non-violation is never "dropped" (it is no violation to begin with).
    assert!(!is_dropped(&rec("/usr/share/doc/x", false), &ignored));
}

/// Red-team round 19: a rename is dropped only when its destination is ignored too (`mv
/// /usr/share/x /root/y` was dropped on its source).
#[test]
fn a_rename_is_dropped_only_when_both_names_are_ignored() {
    let ignored = vec![PathBuf::from("/usr/share")];
    let mut r = rec("/usr/share/base-files", true);
    r.operation = "rename".into();
    r.detail = Some("/root/.pwn".into());
    assert!(!is_dropped(&r, &ignored));
    r.detail = Some("/usr/share/elsewhere".into());
    assert!(is_dropped(&r, &ignored));
}

/// Red-team round 21: a hard link of a host file into an ignored directory names the new
/// name; the file linked (`detail`) must be ignored too.
#[test]
fn a_link_is_dropped_only_when_the_file_linked_is_ignored_too() {
    let ignored = vec![PathBuf::from("/home/u/project/build")];
    let mut r = rec("/home/u/project/build/hl", true);
    r.operation = "link".into();
    r.detail = Some("/etc/shadow".into());
    assert!(!is_dropped(&r, &ignored));
    r.detail = Some("/home/u/project/build/other".into());
    assert!(is_dropped(&r, &ignored));
}

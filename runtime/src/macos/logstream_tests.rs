//! The samples below are constructed, not recorded: no Mac was available. They follow the
//! documented shape of `log stream --style ndjson` (one JSON object per line with
//! `eventMessage`, `timestamp` in `YYYY-MM-DD HH:MM:SS.ffffff±hhmm`, `processImagePath`,
//! `senderImagePath`, …) and the kernel's sandbox report text
//! `Sandbox: NAME(PID) deny(N) OPERATION TARGET` with the rule's message appended.

use super::*;

const TAG: &str = "warden-1a2b3c4d5e6f7081";

fn ndjson(message: &str) -> String {
    serde_json::json!({
        "traceID": 4315352065u64,
        "eventMessage": message,
        "eventType": "logEvent",
        "source": null,
        "formatString": "%s",
        "activityIdentifier": 0,
        "subsystem": "",
        "category": "",
        "threadID": 8123456,
        "senderImageUUID": "8D9A2E11-4C3B-3F52-9C61-0E5F2B7A9D10",
        "backtrace": {"frames": [{"imageOffset": 123456, "imageUUID": "8D9A2E11-4C3B-3F52-9C61-0E5F2B7A9D10"}]},
        "bootUUID": "",
        "processImagePath": "/kernel",
        "timestamp": "2026-11-21 16:24:15.123456-0800",
        "senderImagePath": "/System/Library/Extensions/Sandbox.kext/Contents/MacOS/Sandbox",
        "machTimestamp": 1234567890123u64,
        "messageType": "Error",
        "processImageUUID": "1C7F5E3A-9B2D-3E4F-8A6B-5C4D3E2F1A0B",
        "processID": 0,
        "senderProgramCounter": 123456,
        "parentActivityIdentifier": 0,
        "timezoneName": ""
    })
    .to_string()
}

#[test]
fn a_file_read_denial() {
    let line = ndjson(&format!(
        "Sandbox: cat(51234) deny(1) file-read-data /Users/dev/.ssh/id_ed25519 {TAG}"
    ));
    let v = parse_line(&line, TAG).expect("parsed");
    assert_eq!(v.time, "2026-11-22T00:24:15.123Z");
    assert_eq!(v.pid, Some(51234));
    assert_eq!(v.comm, "cat");
    assert_eq!(v.kind, Kind::FileRead);
    assert_eq!(v.operation, "file-read-data");
    assert_eq!(v.target, "/Users/dev/.ssh/id_ed25519");
    assert_eq!(v.count, 1);
    assert_eq!(v.sandbox, TAG);
    assert_eq!(
        v.summary_line(),
        "file-read file-read-data /Users/dev/.ssh/id_ed25519 [seatbelt] by cat"
    );
    // The record serialises with the Linux records' field names.
    let json: serde_json::Value = serde_json::to_value(&v).unwrap();
    for key in [
        "time",
        "sandbox",
        "source",
        "pid",
        "comm",
        "kind",
        "violation",
        "operation",
        "target",
        "layer",
        "reason",
        "count",
    ] {
        assert!(json.get(key).is_some(), "{key}");
    }
    assert_eq!(json["kind"], "file-read");
    assert_eq!(json["source"], "seatbelt");
}

#[test]
fn every_kind_of_denial() {
    let cases = [
        (
            "zsh(700) deny(1) file-write-create /Users/dev/project/.git/hooks/pre-commit",
            Kind::FileWrite,
            "file-write-create",
            "/Users/dev/project/.git/hooks/pre-commit",
        ),
        (
            "mv(701) deny(1) file-write-unlink /Users/dev/project/.git",
            Kind::FileWrite,
            "file-write-unlink",
            "/Users/dev/project/.git",
        ),
        (
            "curl(702) deny(1) network-outbound 93.184.216.34:443",
            Kind::Network,
            "network-outbound",
            "93.184.216.34:443",
        ),
        (
            "node(703) deny(1) network-outbound /private/var/run/mDNSResponder",
            Kind::UnixSocket,
            "network-outbound",
            "/private/var/run/mDNSResponder",
        ),
        (
            "python3.12(704) deny(1) network-bind 0.0.0.0:8000",
            Kind::Network,
            "network-bind",
            "0.0.0.0:8000",
        ),
        (
            "bash(705) deny(1) process-exec* /usr/local/bin/tool",
            Kind::Exec,
            "process-exec*",
            "/usr/local/bin/tool",
        ),
        (
            "bash(706) deny(1) signal target:1",
            Kind::Process,
            "signal",
            "target:1",
        ),
        (
            "ps(707) deny(1) sysctl-read kern.proc.all",
            Kind::Syscall,
            "sysctl-read",
            "kern.proc.all",
        ),
        (
            "pbpaste(708) deny(1) mach-lookup com.apple.pasteboard.1",
            Kind::Syscall,
            "mach-lookup",
            "com.apple.pasteboard.1",
        ),
        (
            "Google Chrome Helper (Renderer)(709) deny(1) file-read-data /etc/x y",
            Kind::FileRead,
            "file-read-data",
            "/etc/x y",
        ),
    ];
    for (text, kind, op, target) in cases {
        let v = parse_message(&format!("Sandbox: {text} {TAG}"), TAG, String::new())
            .unwrap_or_else(|| panic!("{text}"));
        assert_eq!(
            (v.kind, v.operation.as_str(), v.target.as_str()),
            (kind, op, target),
            "{text}"
        );
    }
    let chrome = parse_message(
        &format!("Sandbox: Google Chrome Helper (Renderer)(709) deny(1) file-read-data /x {TAG}"),
        TAG,
        String::new(),
    )
    .unwrap();
    assert_eq!(chrome.comm, "Google Chrome Helper (Renderer)");
    assert_eq!(chrome.pid, Some(709));
}

#[test]
fn duplicate_reports_carry_their_count() {
    let v = parse_message(
        &format!(
            "Sandbox: 5 duplicate reports for git deny(1) file-write-create /w/.git/config {TAG}"
        ),
        TAG,
        String::new(),
    )
    .expect("parsed");
    assert_eq!((v.comm.as_str(), v.pid, v.count), ("git", None, 5));
    let one = parse_message(
        &format!("Sandbox: 1 duplicate report for git deny(1) file-read-data /x {TAG}"),
        TAG,
        String::new(),
    )
    .expect("parsed");
    assert_eq!(one.count, 1);
}

#[test]
fn other_sandboxes_banners_and_noise_are_skipped() {
    let other = ndjson("Sandbox: cat(1) deny(1) file-read-data /x warden-ffffffffffffffff");
    assert!(parse_line(&other, TAG).is_none());
    assert!(parse_line(
        "Filtering the log data using \"eventMessage ENDSWITH ...\"",
        TAG
    )
    .is_none());
    assert!(parse_line("", TAG).is_none());
    assert!(parse_line("{not json", TAG).is_none());
    assert!(parse_line(&ndjson(&format!("kernel: something else {TAG}")), TAG).is_none());
    assert!(parse_line(
        &ndjson(&format!("Sandbox: cat(x) deny(1) file-read-data /x {TAG}")),
        TAG
    )
    .is_none());
    // A tag that only prefixes the real one does not match.
    let longer = ndjson(&format!("Sandbox: cat(1) deny(1) file-read-data /x {TAG}0"));
    assert!(parse_line(&longer, TAG).is_none());
    assert!(parse_line(&ndjson("Sandbox: cat(1) deny(1) file-read-data /x"), "").is_none());
}

#[test]
fn repeats_coalesce() {
    let mk = |target: &str, pid| {
        parse_message(
            &format!("Sandbox: cat({pid}) deny(1) file-read-data {target} {TAG}"),
            TAG,
            String::new(),
        )
        .unwrap()
    };
    let merged = coalesce(vec![mk("/a", 1), mk("/a", 1), mk("/b", 1), mk("/a", 2)]);
    assert_eq!(merged.len(), 3);
    assert_eq!(merged[0].count, 2);
}

#[test]
fn timestamps_become_utc() {
    assert_eq!(
        utc_rfc3339("2026-11-21 16:24:15.123456-0800").as_deref(),
        Some("2026-11-22T00:24:15.123Z")
    );
    assert_eq!(
        utc_rfc3339("2024-02-29 23:59:59.9+0100").as_deref(),
        Some("2024-02-29T22:59:59.900Z")
    );
    assert_eq!(
        utc_rfc3339("2025-01-01 00:30:00.000000+0200").as_deref(),
        Some("2024-12-31T22:30:00.000Z")
    );
    assert_eq!(
        utc_rfc3339("2025-03-01 10:00:00Z").as_deref(),
        Some("2025-03-01T10:00:00.000Z")
    );
    for bad in [
        "",
        "yesterday",
        "2025-13-01 00:00:00+0000",
        "2025-01-01 25:00:00+0000",
        "2025-01-01 00:00:00+01",
    ] {
        assert_eq!(utc_rfc3339(bad), None, "{bad}");
    }
}

#[test]
fn the_log_stream_predicate_names_the_tag() {
    let args = log_stream_args(TAG);
    assert_eq!(&args[..4], ["stream", "--style", "ndjson", "--predicate"]);
    assert_eq!(args[4], format!("eventMessage ENDSWITH \"{TAG}\""));
}

fn denial(target: &str, pid: u32) -> Violation {
    parse_message(
        &format!("Sandbox: cat({pid}) deny(1) file-read-data {target} {TAG}"),
        TAG,
        String::new(),
    )
    .expect("a denial")
}

#[test]
fn ignored_paths_drop_their_records_only() {
    let records = vec![
        denial("/private/var/folders/x/T/cache", 1),
        denial("/private/var/foldersX", 1),
        denial("/etc/passwd", 1),
    ];
    let kept = drop_ignored(records, &[std::path::PathBuf::from("/private/var/folders")]);
    let targets: Vec<&str> = kept.iter().map(|r| r.target.as_str()).collect();
    assert_eq!(targets, ["/private/var/foldersX", "/etc/passwd"]);
}

#[test]
fn the_annotation_block_has_the_linux_shape_and_counts_what_it_leaves_out() {
    assert_eq!(annotation(&[]), "");
    let block = annotation(&coalesce(vec![denial("/a", 1), denial("/a", 1)]));
    assert_eq!(
        block,
        "<sandbox_violations>\nfile-read file-read-data /a [seatbelt] by cat ×2\n</sandbox_violations>\n"
    );
    let many: Vec<Violation> = (0..53).map(|i| denial(&format!("/f{i}"), 1)).collect();
    let block = annotation(&coalesce(many));
    assert_eq!(
        block.lines().count(),
        2 + crate::backend::ANNOTATE_MAX + 1,
        "{block}"
    );
    assert!(block.contains("... and 3 more\n"), "{block}");
}

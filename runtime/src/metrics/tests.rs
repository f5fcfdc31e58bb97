//! The registry, its text encodings, the request from settings and flags, the file and the
//! HTTP endpoint.

use super::*;
use crate::policy::decision::{Layer, Provenance};
use crate::policy::fsview::MemFs;
use crate::policy::merge::{Context, LayerInput, Policy};
use crate::policy::settings::SandboxSettings;

fn policy(json: &str) -> Policy {
    let settings: SandboxSettings = serde_json::from_str(json).unwrap();
    let layer = LayerInput {
        provenance: Provenance::new(Layer::User, 0, "test.json"),
        settings,
    };
    let context = Context {
        cwd: "/work".into(),
        home: "/home/u".into(),
        tmpdir: None,
        approver_attached: false,
        protected: Vec::new(),
    };
    Policy::build(&[layer], context, &MemFs::new()).unwrap()
}

/// The sample lines (no comments) of `text`.
fn samples(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.starts_with('#')).collect()
}

/// The series a new registry has, at 0.
const FRESH: [&str; 22] = [
    r#"warden_network_bytes_total{direction="up"} 0"#,
    r#"warden_network_bytes_total{direction="down"} 0"#,
    "warden_sandboxes_active 0",
    r#"warden_sandbox_starts_total{result="ok"} 0"#,
    r#"warden_sandbox_starts_total{result="error"} 0"#,
    "warden_sandbox_start_seconds_sum 0.0",
    "warden_sandbox_start_seconds_count 0",
    r#"warden_sandbox_start_seconds_bucket{le="0.005"} 0"#,
    r#"warden_sandbox_start_seconds_bucket{le="0.01"} 0"#,
    r#"warden_sandbox_start_seconds_bucket{le="0.025"} 0"#,
    r#"warden_sandbox_start_seconds_bucket{le="0.05"} 0"#,
    r#"warden_sandbox_start_seconds_bucket{le="0.1"} 0"#,
    r#"warden_sandbox_start_seconds_bucket{le="0.25"} 0"#,
    r#"warden_sandbox_start_seconds_bucket{le="0.5"} 0"#,
    r#"warden_sandbox_start_seconds_bucket{le="1.0"} 0"#,
    r#"warden_sandbox_start_seconds_bucket{le="2.5"} 0"#,
    r#"warden_sandbox_start_seconds_bucket{le="5.0"} 0"#,
    r#"warden_sandbox_start_seconds_bucket{le="10.0"} 0"#,
    r#"warden_sandbox_start_seconds_bucket{le="30.0"} 0"#,
    r#"warden_sandbox_start_seconds_bucket{le="+Inf"} 0"#,
    "warden_execs_total 0",
    "warden_bpf_events_total 0",
];

#[test]
fn a_new_registry_has_its_fixed_series_at_zero() {
    let m = Metrics::new();
    let text = m.openmetrics().unwrap();
    // (Series of one family come in no particular order.)
    let mut got = samples(&text);
    got.sort_unstable();
    let mut want = FRESH.to_vec();
    want.sort_unstable();
    assert_eq!(got, want, "{text}");
    assert!(text.contains("# TYPE warden_execs counter\n"), "{text}");
    assert!(
        text.contains("# TYPE warden_sandboxes_active gauge\n"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE warden_sandbox_start_seconds histogram\n"),
        "{text}"
    );
    assert!(
        text.contains("# UNIT warden_sandbox_start_seconds seconds\n"),
        "{text}"
    );
    // A family without series is left out until its first count.
    for absent in [
        "warden_violations_total",
        "warden_network_requests_total",
        "warden_bpf_events_dropped_total",
        "warden_bpf_programs_loaded{",
        "warden_approvals_total",
    ] {
        assert!(!text.contains(absent), "{absent}\n{text}");
    }
    assert!(text.ends_with("# EOF\n"), "{text}");
}

#[test]
fn counts_carry_their_labels_in_order() {
    let m = Metrics::new();
    m.violation("file-write", "open", "mount", 1);
    m.violation("file-write", "open", "mount", 2);
    m.violation("file-read", "open", "mount", 1);
    m.violation("mount", "mount", "seccomp", 1);
    m.network_request("deny", "http");
    m.network_request("deny", "http");
    m.network_request("allow", "connect");
    m.network_bytes(100, 0);
    m.network_bytes(0, 5000);
    m.network_bytes(20, 1);
    m.exec(3);
    m.bpf_event();
    m.bpf_event();
    m.set_bpf_dropped("ring-buffer-full", 0);
    m.set_bpf_dropped("pending-map-full", 4);
    m.program_loaded("sys_enter");
    m.program_loaded("connect_unix");
    m.approval("network", "allow-once");
    m.approval("network", "no-approver");
    m.approval("network", "no-approver");
    m.set_active(true);
    m.sandbox_started(Duration::from_millis(30));
    let text = m.openmetrics().unwrap();
    let s = samples(&text);
    for line in [
        r#"warden_violations_total{kind="file-write",operation="open",layer="mount"} 3"#,
        r#"warden_violations_total{kind="file-read",operation="open",layer="mount"} 1"#,
        r#"warden_violations_total{kind="mount",operation="mount",layer="seccomp"} 1"#,
        r#"warden_network_requests_total{decision="deny",protocol="http"} 2"#,
        r#"warden_network_requests_total{decision="allow",protocol="connect"} 1"#,
        r#"warden_network_bytes_total{direction="up"} 120"#,
        r#"warden_network_bytes_total{direction="down"} 5001"#,
        "warden_sandboxes_active 1",
        r#"warden_sandbox_starts_total{result="ok"} 1"#,
        r#"warden_sandbox_starts_total{result="error"} 0"#,
        "warden_sandbox_start_seconds_count 1",
        r#"warden_sandbox_start_seconds_bucket{le="0.025"} 0"#,
        r#"warden_sandbox_start_seconds_bucket{le="0.05"} 1"#,
        r#"warden_sandbox_start_seconds_bucket{le="+Inf"} 1"#,
        "warden_execs_total 3",
        "warden_bpf_events_total 2",
        r#"warden_bpf_events_dropped_total{reason="ring-buffer-full"} 0"#,
        r#"warden_bpf_events_dropped_total{reason="pending-map-full"} 4"#,
        r#"warden_bpf_programs_loaded{program="sys_enter"} 1"#,
        r#"warden_bpf_programs_loaded{program="connect_unix"} 1"#,
        r#"warden_approvals_total{kind="network",decision="allow-once"} 1"#,
        r#"warden_approvals_total{kind="network",decision="no-approver"} 2"#,
    ] {
        assert!(s.contains(&line), "missing {line}\n{text}");
    }
    assert!(
        s.iter()
            .any(|l| l.starts_with("warden_sandbox_start_seconds_sum 0.03")),
        "{text}"
    );
    m.set_active(false);
    assert!(m
        .openmetrics()
        .unwrap()
        .contains("\nwarden_sandboxes_active 0\n"));
}

#[test]
fn drop_totals_only_grow_so_reading_them_again_is_harmless() {
    let m = Metrics::new();
    m.set_bpf_dropped("ring-buffer-full", 5);
    m.set_bpf_dropped("ring-buffer-full", 5);
    m.set_bpf_dropped("ring-buffer-full", 3);
    let text = m.openmetrics().unwrap();
    assert!(
        text.contains(r#"warden_bpf_events_dropped_total{reason="ring-buffer-full"} 5"#),
        "{text}"
    );
    m.set_bpf_dropped("ring-buffer-full", 7);
    assert!(m
        .openmetrics()
        .unwrap()
        .contains(r#"warden_bpf_events_dropped_total{reason="ring-buffer-full"} 7"#));
}

#[test]
fn label_values_outside_their_sets_are_folded_so_cardinality_stays_bounded() {
    let m = Metrics::new();
    // A path, a pid, a host: never labels.
    m.violation("file-write", "/home/u/.ssh/id_rsa", "mount", 1);
    m.violation("file-write", "4242", "mount", 1);
    m.violation("weird\"kind", "unknown", "nowhere", 1);
    m.network_request("maybe", "gopher");
    m.program_loaded("evil.example.com");
    m.approval("telepathy", "perhaps");
    m.set_bpf_dropped("cosmic-rays", 1);
    let text = m.openmetrics().unwrap();
    let s = samples(&text);
    for line in [
        r#"warden_violations_total{kind="file-write",operation="other",layer="mount"} 2"#,
        r#"warden_violations_total{kind="other",operation="other",layer="unknown"} 1"#,
        r#"warden_network_requests_total{decision="deny",protocol="other"} 1"#,
        r#"warden_bpf_programs_loaded{program="other"} 1"#,
        r#"warden_approvals_total{kind="network",decision="deny"} 1"#,
        r#"warden_bpf_events_dropped_total{reason="undecodable"} 1"#,
    ] {
        assert!(s.contains(&line), "missing {line}\n{text}");
    }
    for leaked in [
        "/home",
        "4242",
        "weird",
        "nowhere",
        "gopher",
        "evil",
        "telepathy",
    ] {
        assert!(!text.contains(leaked), "{leaked} became a label\n{text}");
    }
    // No label of any series has a value outside the documented sets.
    let sets: Vec<&[&str]> = vec![
        &KINDS,
        &LAYERS,
        &OPERATIONS,
        &PROTOCOLS,
        &DIRECTIONS,
        &DROP_REASONS,
        &PROGRAMS,
        &APPROVAL_KINDS,
        &APPROVAL_DECISIONS,
        &["allow", "deny", "ok", "error"],
    ];
    for line in s {
        let Some((_, labels)) = line.split_once('{') else {
            continue;
        };
        let labels = labels.split_once('}').unwrap().0;
        for pair in labels.split(',') {
            let (name, value) = pair.split_once('=').unwrap();
            let value = value.trim_matches('"');
            if name == "le" {
                continue;
            }
            assert!(
                sets.iter().any(|set| set.contains(&value)),
                "{name}={value} in {line}"
            );
        }
    }
}

#[test]
fn approval_answers_have_their_decision_names() {
    use crate::approve::{Answer, RequestKind};
    assert_eq!(approval_decision(Some(Answer::AllowOnce)), "allow-once");
    assert_eq!(approval_decision(Some(Answer::AllowAlways)), "allow-always");
    assert_eq!(approval_decision(Some(Answer::Deny)), "deny");
    assert_eq!(approval_decision(None), "timeout");
    // The same names as the control channel's (serde) spelling.
    for kind in [
        RequestKind::Network,
        RequestKind::FilesystemRead,
        RequestKind::FilesystemWrite,
        RequestKind::Command,
    ] {
        assert_eq!(
            serde_json::to_value(kind).unwrap(),
            serde_json::Value::from(approval_kind(kind))
        );
        assert!(APPROVAL_KINDS.contains(&approval_kind(kind)));
    }
    for answer in [Answer::AllowOnce, Answer::AllowAlways, Answer::Deny] {
        assert_eq!(
            serde_json::to_value(answer).unwrap(),
            serde_json::Value::from(approval_decision(Some(answer)))
        );
    }
}

#[test]
fn the_prometheus_text_names_counters_by_their_total_series_and_has_no_eof() {
    let m = Metrics::new();
    m.violation("exec", "exec", "seccomp", 1);
    m.sandbox_started(Duration::from_millis(40));
    let text = m.prometheus_text().unwrap();
    assert!(
        text.contains("# TYPE warden_violations_total counter\n"),
        "{text}"
    );
    assert!(text.contains("# HELP warden_violations_total What the sandbox refused"));
    assert!(text.contains("# TYPE warden_sandboxes_active gauge\n"));
    assert!(text.contains("# TYPE warden_sandbox_start_seconds histogram\n"));
    assert!(!text.contains("# UNIT"), "{text}");
    assert!(!text.contains("# EOF"), "{text}");
    assert!(!text.contains("# TYPE warden_violations counter"));
    // Samples are the same as OpenMetrics'.
    assert_eq!(samples(&text), samples(&m.openmetrics().unwrap()));
    // A gauge and unrelated comments pass unchanged; a UNIT line is dropped.
    let converted = openmetrics_to_prometheus(
        "# HELP g a gauge\n# TYPE g gauge\n# UNIT c seconds\n# TYPE c counter\nc_total 1\ng 2\n# EOF\n",
    );
    assert_eq!(
        converted,
        "# HELP g a gauge\n# TYPE g gauge\n# TYPE c_total counter\nc_total 1\ng 2\n"
    );
}

#[test]
fn the_file_is_replaced_atomically_and_readable_by_others() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("warden.prom");
    std::fs::write(&path, "old\n").unwrap();
    let m = Metrics::new();
    m.violation("file-write", "open", "mount", 1);
    m.write_file(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains(
            r#"warden_violations_total{kind="file-write",operation="open",layer="mount"} 1"#
        ),
        "{text}"
    );
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
    // No temporary file is left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["warden.prom"]);
    // An unwritable place is an error, not a panic.
    let err = m
        .write_file(Path::new("/nonexistent-dir/warden.prom"))
        .unwrap_err();
    assert!(
        err.to_string().contains("/nonexistent-dir/warden.prom"),
        "{err}"
    );
}

#[test]
fn listen_addresses_are_loopback_unless_remote_is_allowed() {
    assert_eq!(
        listen_addr("127.0.0.1:9464", false).unwrap(),
        "127.0.0.1:9464".parse().unwrap()
    );
    assert_eq!(
        listen_addr("[::1]:9464", false).unwrap(),
        "[::1]:9464".parse().unwrap()
    );
    assert_eq!(
        listen_addr("localhost:9464", false).unwrap(),
        "127.0.0.1:9464".parse().unwrap()
    );
    assert!(matches!(
        listen_addr("0.0.0.0:9464", false),
        Err(MetricsError::NotLoopback(_))
    ));
    assert!(matches!(
        listen_addr("[::]:9464", false),
        Err(MetricsError::NotLoopback(_))
    ));
    assert!(listen_addr("0.0.0.0:9464", true).is_ok());
    for bad in [
        "",
        "9464",
        "127.0.0.1",
        "host:1",
        "127.0.0.1:99999",
        "localhost:x",
    ] {
        assert!(
            matches!(listen_addr(bad, true), Err(MetricsError::Address(_))),
            "{bad}"
        );
    }
}

#[test]
fn the_request_comes_from_flags_over_settings() {
    let none = policy("{}");
    assert_eq!(request(&none, None, None).unwrap(), None);
    let p = policy(
        r#"{"warden": {"metrics": {"file": "/var/lib/node/warden.prom", "listen": "127.0.0.1:9464"}}}"#,
    );
    let r = request(&p, None, None).unwrap().unwrap();
    assert_eq!(r.file, Some(PathBuf::from("/var/lib/node/warden.prom")));
    assert_eq!(r.listen, Some("127.0.0.1:9464".parse().unwrap()));
    let r = request(
        &p,
        Some(PathBuf::from("m.prom")),
        Some("127.0.0.1:1".into()),
    )
    .unwrap()
    .unwrap();
    assert_eq!(r.file, Some(PathBuf::from("m.prom")));
    assert_eq!(r.listen, Some("127.0.0.1:1".parse().unwrap()));
    // The older key `addr`.
    let p = policy(r#"{"warden": {"metrics": {"addr": "[::1]:9"}}}"#);
    let r = request(&p, None, None).unwrap().unwrap();
    assert_eq!(r.listen, Some("[::1]:9".parse().unwrap()));
    // Remote only when the settings say so.
    let p = policy("{}");
    assert!(matches!(
        request(&p, None, Some("0.0.0.0:9464".into())),
        Err(MetricsError::NotLoopback(_))
    ));
    let p = policy(r#"{"warden": {"metrics": {"allowRemote": true}}}"#);
    assert!(request(&p, None, Some("0.0.0.0:9464".into()))
        .unwrap()
        .is_some());
}

#[test]
fn the_endpoint_answers_metrics_healthz_and_nothing_else() {
    let m = Metrics::new();
    let get = |path: &str| http::Request::builder().uri(path).body(()).unwrap();
    let r = respond(&m, &get("/metrics"));
    assert_eq!(r.status(), http::StatusCode::OK);
    assert_eq!(
        r.headers()[http::header::CONTENT_TYPE],
        OPENMETRICS_CONTENT_TYPE
    );
    let health = respond(&m, &get("/healthz"));
    assert_eq!(health.status(), http::StatusCode::OK);
    let body = futures_body(health);
    assert_eq!(body, "ok\n");
    assert_eq!(
        respond(&m, &get("/other")).status(),
        http::StatusCode::NOT_FOUND
    );
    let post = http::Request::builder()
        .method("POST")
        .uri("/metrics")
        .body(())
        .unwrap();
    assert_eq!(
        respond(&m, &post).status(),
        http::StatusCode::METHOD_NOT_ALLOWED
    );
}

/// The body of a response of [`respond`].
fn futures_body(resp: http::Response<Body>) -> String {
    use http_body_util::BodyExt;
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let bytes = rt.block_on(resp.into_body().collect()).unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// A raw HTTP/1.1 GET on `addr`.
fn http_get(addr: SocketAddr, path: &str) -> String {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn the_exporter_serves_while_running_then_writes_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.prom");
    let mut e = Exporter::open(MetricsRequest {
        file: Some(file.clone()),
        listen: Some("127.0.0.1:0".parse().unwrap()),
        ..Default::default()
    })
    .unwrap();
    let addr = e.local_addr().unwrap();
    e.metrics().violation("network", "http", "proxy", 1);
    e.start(Duration::from_millis(70)).unwrap();
    let resp = http_get(addr, "/metrics");
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    for line in [
        "\nwarden_sandboxes_active 1\n",
        "\nwarden_violations_total{kind=\"network\",operation=\"http\",layer=\"proxy\"} 1\n",
        "\nwarden_sandbox_starts_total{result=\"ok\"} 1\n",
        "\nwarden_sandbox_start_seconds_count 1\n",
    ] {
        assert!(resp.contains(line), "{line}\n{resp}");
    }
    let health = http_get(addr, "/healthz");
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    assert!(health.ends_with("\r\n\r\nok\n"), "{health}");
    e.finish().unwrap();
    // Stopped: nothing listens any more.
    assert!(std::net::TcpStream::connect(addr).is_err());
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("\nwarden_sandboxes_active 0\n"), "{text}");
    assert!(
        text.contains("\nwarden_sandbox_starts_total{result=\"ok\"} 1\n"),
        "{text}"
    );
}

#[test]
fn a_start_that_failed_is_counted_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.prom");
    let e = Exporter::open(MetricsRequest {
        file: Some(file.clone()),
        listen: None,
        ..Default::default()
    })
    .unwrap();
    e.start_failed().unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    for line in [
        "\nwarden_sandbox_starts_total{result=\"error\"} 1\n",
        "\nwarden_sandbox_starts_total{result=\"ok\"} 0\n",
        "\nwarden_sandbox_start_seconds_count 0\n",
        "\nwarden_sandboxes_active 0\n",
    ] {
        assert!(text.contains(line), "{line}\n{text}");
    }
}

#[test]
fn a_taken_port_fails_at_open() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let err = Exporter::open(MetricsRequest {
        file: None,
        listen: Some(addr),
        ..Default::default()
    })
    .err()
    .unwrap();
    assert!(matches!(err, MetricsError::Bind { .. }), "{err}");
}

/// Every operation the audit layer names (file calls, seccomp refusals, the proxy's
/// requests) is a label value of its own, not `other`.
#[cfg(target_os = "linux")]
#[test]
fn every_operation_the_audit_layer_names_is_in_the_operation_set() {
    use crate::audit::record::{from_net_event, op_name, seccomp_denied};
    use crate::net::event::{NetEvent, Protocol};
    use crate::policy::decision::{ReasonKind, Verdict};
    let mut names: Vec<String> = (0..=u16::from(u8::MAX))
        .map(op_name)
        .filter(|n| *n != "unknown")
        .map(str::to_string)
        .collect();
    names.extend(
        (0..1024)
            .filter_map(seccomp_denied)
            .map(|(n, _)| n.to_string()),
    );
    let verdict = Verdict::deny(ReasonKind::DomainNotAllowed, "x");
    for protocol in [
        Protocol::Http,
        Protocol::Connect,
        Protocol::Socks5,
        Protocol::Dns,
    ] {
        names.push(from_net_event("s", &NetEvent::new(protocol, "h", None, &verdict)).operation);
    }
    names.push("exec".into());
    assert!(names.len() > 40, "{names:?}");
    for name in names {
        assert!(
            OPERATIONS.contains(&name.as_str()),
            "{name} is not in OPERATIONS"
        );
    }
    use crate::audit::record::Kind;
    for kind in [
        Kind::FileRead,
        Kind::FileWrite,
        Kind::Exec,
        Kind::Network,
        Kind::UnixSocket,
        Kind::Process,
        Kind::Mount,
        Kind::Syscall,
    ] {
        assert!(KINDS.contains(&kind.name()), "{}", kind.name());
    }
}

#[cfg(target_os = "linux")]
#[test]
fn audit_records_and_proxy_decisions_are_counted_at_the_collector() {
    use crate::audit::record::from_net_event;
    use crate::audit::{Collector, ProxySink};
    use crate::net::event::{EventSink, NetEvent, Protocol};
    use crate::policy::decision::{Decision, ReasonKind, Verdict};
    let m = Arc::new(Metrics::new());
    let collector = Collector::with_metrics(None, Some(m.clone())).unwrap();
    let deny = Verdict {
        decision: Decision::Deny,
        kind: ReasonKind::DomainNotAllowed,
        reason: "denied.invalid is not in allowedDomains".into(),
        rule: None,
    };
    let allow = Verdict {
        decision: Decision::Allow,
        ..deny.clone()
    };
    let sink = ProxySink {
        sandbox: "warden-9".into(),
        collector: collector.clone(),
    };
    sink.record(NetEvent::new(
        Protocol::Http,
        "denied.invalid",
        Some(80),
        &deny,
    ));
    sink.record(NetEvent::new(Protocol::Dns, "ok.invalid", None, &allow));
    // Bytes count as they move, not from the event's totals at the end.
    sink.transferred(300, 0);
    sink.transferred(0, 70_000);
    let mut done = NetEvent::new(Protocol::Connect, "ok.invalid", Some(443), &allow);
    done.bytes_up = 300;
    done.bytes_down = 70_000;
    sink.record(done);
    // An exec record (not a violation) and a kernel violation pushed directly.
    let mut exec = from_net_event(
        "warden-9",
        &NetEvent::new(Protocol::Http, "x", None, &allow),
    );
    exec.kind = crate::audit::record::Kind::Exec;
    exec.count = 2;
    collector.push(exec);
    let mut write = from_net_event("warden-9", &NetEvent::new(Protocol::Http, "x", None, &deny));
    write.kind = crate::audit::record::Kind::FileWrite;
    write.operation = "rename".into();
    write.layer = Some(crate::audit::record::Layer::Mount);
    collector.push(write);
    let text = m.openmetrics().unwrap();
    let s = samples(&text);
    for line in [
        r#"warden_network_requests_total{decision="deny",protocol="http"} 1"#,
        r#"warden_network_requests_total{decision="allow",protocol="dns"} 1"#,
        r#"warden_network_requests_total{decision="allow",protocol="connect"} 1"#,
        r#"warden_network_bytes_total{direction="up"} 300"#,
        r#"warden_network_bytes_total{direction="down"} 70000"#,
        r#"warden_violations_total{kind="network",operation="http",layer="proxy"} 1"#,
        r#"warden_violations_total{kind="file-write",operation="rename",layer="mount"} 1"#,
        "warden_execs_total 2",
    ] {
        assert!(s.contains(&line), "missing {line}\n{text}");
    }
    // The allowed requests are not violations.
    assert!(!text.contains(r#"kind="network",operation="dns""#));
    assert!(!text.contains(r#"layer="unknown""#));
    // Losses, by reason: totals, so counting the final ones after live ones adds nothing.
    let losses = crate::audit::Losses {
        ring_full: 1,
        pending_full: 0,
        undecodable: 2,
        rate_limited: 4,
        not_relayed: 0,
    };
    crate::audit::count_losses(&m, &losses);
    crate::audit::count_losses(&m, &losses);
    let text = m.openmetrics().unwrap();
    for line in [
        r#"warden_bpf_events_dropped_total{reason="ring-buffer-full"} 1"#,
        r#"warden_bpf_events_dropped_total{reason="pending-map-full"} 0"#,
        r#"warden_bpf_events_dropped_total{reason="undecodable"} 2"#,
        r#"warden_bpf_events_dropped_total{reason="rate-limited"} 4"#,
    ] {
        assert!(text.contains(line), "missing {line}\n{text}");
    }
}

#[test]
fn operator_labels_are_constant_labels_of_every_series() {
    let labels = Labels::parse(&["team=infra".into(), "agent=a1".into()]).unwrap();
    let m = Metrics::with_labels(&labels);
    m.violation("file-write", "open", "mount", 2);
    let text = m.openmetrics().unwrap();
    for line in [
        r#"warden_sandboxes_active{agent="a1",team="infra"} 0"#,
        r#"warden_execs_total{agent="a1",team="infra"} 0"#,
        r#"warden_violations_total{agent="a1",team="infra",kind="file-write",operation="open",layer="mount"} 2"#,
        r#"warden_sandbox_starts_total{agent="a1",team="infra",result="ok"} 0"#,
        r#"warden_sandbox_start_seconds_bucket{agent="a1",team="infra",le="+Inf"} 0"#,
    ] {
        assert!(samples(&text).contains(&line), "missing {line}\n{text}");
    }
    // Every sample carries them.
    assert!(samples(&text)
        .iter()
        .all(|l| l.contains(r#"agent="a1",team="infra""#)));
    // Without labels, nothing changes.
    let plain = Metrics::new().openmetrics().unwrap();
    assert!(
        samples(&plain).contains(&"warden_sandboxes_active 0"),
        "{plain}"
    );
}

#[test]
fn the_node_registry_merges_label_sets_into_one_family_each() {
    let node = NodeMetrics::new();
    let a = node.group(&Labels::parse(&["team=a".into()]).unwrap());
    let b = node.group(&Labels::parse(&["team=b".into()]).unwrap());
    a.violation("file-write", "open", "mount", 1);
    b.violation("file-write", "open", "mount", 3);
    a.sandbox_registered();
    node.node().set_registered(1);
    node.node().bpf_events(5);
    // The same label set is the same group.
    node.group(&Labels::parse(&["team=a".into()]).unwrap())
        .violation("file-write", "open", "mount", 1);
    let text = node.openmetrics().unwrap();
    for line in [
        r#"warden_violations_total{team="a",kind="file-write",operation="open",layer="mount"} 2"#,
        r#"warden_violations_total{team="b",kind="file-write",operation="open",layer="mount"} 3"#,
        r#"warden_sandboxes_active{team="a"} 1"#,
        r#"warden_sandboxes_active{team="b"} 0"#,
        "warden_sandboxes_active 0",
        "warden_sandboxes_registered 1",
        "warden_bpf_events_total 5",
    ] {
        assert!(samples(&text).contains(&line), "missing {line}\n{text}");
    }
    // One family each, metadata once, one # EOF at the end.
    for family in [
        "warden_violations",
        "warden_sandboxes_active",
        "warden_bpf_events",
    ] {
        assert_eq!(
            text.matches(&format!("# TYPE {family} ")).count(),
            1,
            "{family}\n{text}"
        );
    }
    assert_eq!(text.matches("# EOF").count(), 1);
    assert!(text.ends_with("# EOF\n"));
    // The samples of one family are contiguous.
    let families: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split(['{', ' ']).next().unwrap())
        .collect();
    let mut seen: Vec<&str> = Vec::new();
    for f in &families {
        if seen.last() != Some(f) {
            assert!(!seen.contains(f), "{f} is split\n{text}");
            seen.push(f);
        }
    }
    // Run-only series are not the daemon's.
    assert!(!text.contains("warden_sandbox_starts"), "{text}");
    assert!(!text.contains("warden_approvals"), "{text}");
    // The text format for a textfile collector still converts.
    assert!(openmetrics_to_prometheus(&text).contains("# TYPE warden_violations_total counter"));
}

#[test]
fn the_node_registry_keeps_a_bounded_number_of_label_sets() {
    let node = NodeMetrics::new();
    for i in 0..MAX_LABEL_SETS + 10 {
        let labels = Labels::parse(&[format!("run={i}")]).unwrap();
        node.group(&labels).exec(1);
    }
    let text = node.openmetrics().unwrap();
    let sets = text
        .lines()
        .filter(|l| l.starts_with("warden_execs_total{"))
        .count();
    // The unlabelled group counts as one of the sets.
    assert_eq!(sets, MAX_LABEL_SETS - 1, "{text}");
    assert!(samples(&text).contains(&"warden_execs_total 11"), "{text}");
}

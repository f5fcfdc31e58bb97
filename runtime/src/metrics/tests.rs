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
    };
    Policy::build(&[layer], context, &MemFs::new()).unwrap()
}

/// The sample lines (no comments) of `text`.
fn samples(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.starts_with('#')).collect()
}

#[test]
fn a_new_registry_has_the_runs_execs_and_running_gauge_at_zero() {
    let m = Metrics::new("warden-7");
    let text = m.openmetrics().unwrap();
    assert_eq!(
        samples(&text),
        [
            r#"warden_execs_total{sandbox="warden-7"} 0"#,
            r#"warden_sandbox_running{sandbox="warden-7"} 0"#,
        ],
        "{text}"
    );
    assert!(text.contains("# TYPE warden_execs counter\n"), "{text}");
    assert!(
        text.contains("# HELP warden_execs Binaries executed"),
        "{text}"
    );
    // A family without series is left out until its first count.
    assert!(!text.contains("warden_violations"), "{text}");
    assert!(text.contains("# TYPE warden_sandbox_running gauge\n"));
    assert!(text.ends_with("# EOF\n"), "{text}");
}

#[test]
fn counts_carry_their_labels_in_order() {
    let m = Metrics::new("warden-7");
    m.violation("warden-7", "file-write", "mount", 1);
    m.violation("warden-7", "file-write", "mount", 2);
    m.violation("warden-7", "file-read", "mount", 1);
    m.network_request("warden-7", "deny", "http");
    m.network_request("warden-7", "deny", "http");
    m.network_request("warden-7", "allow", "connect");
    m.exec("warden-7", 3);
    m.dropped("ring-buffer-full", 0);
    m.dropped("pending-map-full", 4);
    m.set_running(true);
    let text = m.openmetrics().unwrap();
    let s = samples(&text);
    for line in [
        r#"warden_violations_total{kind="file-write",layer="mount",sandbox="warden-7"} 3"#,
        r#"warden_violations_total{kind="file-read",layer="mount",sandbox="warden-7"} 1"#,
        r#"warden_network_requests_total{decision="deny",protocol="http",sandbox="warden-7"} 2"#,
        r#"warden_network_requests_total{decision="allow",protocol="connect",sandbox="warden-7"} 1"#,
        r#"warden_execs_total{sandbox="warden-7"} 3"#,
        r#"warden_audit_events_dropped_total{sandbox="warden-7",reason="ring-buffer-full"} 0"#,
        r#"warden_audit_events_dropped_total{sandbox="warden-7",reason="pending-map-full"} 4"#,
        r#"warden_sandbox_running{sandbox="warden-7"} 1"#,
    ] {
        assert!(s.contains(&line), "missing {line}\n{text}");
    }
    assert_eq!(s.len(), 8, "{text}");
    m.set_running(false);
    assert!(m
        .openmetrics()
        .unwrap()
        .contains(r#"warden_sandbox_running{sandbox="warden-7"} 0"#));
}

#[test]
fn label_values_are_escaped() {
    let m = Metrics::new("a\"b\\c\nd");
    let text = m.openmetrics().unwrap();
    assert!(
        text.contains(r#"warden_execs_total{sandbox="a\"b\\c\nd"} 0"#),
        "{text}"
    );
}

#[test]
fn the_prometheus_text_names_counters_by_their_total_series_and_has_no_eof() {
    let m = Metrics::new("warden-7");
    m.violation("warden-7", "exec", "seccomp", 1);
    let text = m.prometheus_text().unwrap();
    assert!(
        text.contains("# TYPE warden_violations_total counter\n"),
        "{text}"
    );
    assert!(text.contains("# HELP warden_violations_total What the sandbox refused"));
    assert!(text.contains("# TYPE warden_sandbox_running gauge\n"));
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
    let m = Metrics::new("warden-7");
    m.violation("warden-7", "file-write", "mount", 1);
    m.write_file(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains(
            r#"warden_violations_total{kind="file-write",layer="mount",sandbox="warden-7"} 1"#
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
    let m = Metrics::new("warden-7");
    let get = |path: &str| http::Request::builder().uri(path).body(()).unwrap();
    let r = respond(&m, &get("/metrics"));
    assert_eq!(r.status(), http::StatusCode::OK);
    assert_eq!(
        r.headers()[http::header::CONTENT_TYPE],
        OPENMETRICS_CONTENT_TYPE
    );
    assert_eq!(respond(&m, &get("/healthz")).status(), http::StatusCode::OK);
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
    let mut e = Exporter::open(
        MetricsRequest {
            file: Some(file.clone()),
            listen: Some("127.0.0.1:0".parse().unwrap()),
        },
        "warden-7",
    )
    .unwrap();
    let addr = e.local_addr().unwrap();
    e.metrics().violation("warden-7", "network", "proxy", 1);
    e.start().unwrap();
    let resp = http_get(addr, "/metrics");
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(
        resp.contains(r#"warden_sandbox_running{sandbox="warden-7"} 1"#),
        "{resp}"
    );
    assert!(resp
        .contains(r#"warden_violations_total{kind="network",layer="proxy",sandbox="warden-7"} 1"#));
    e.finish().unwrap();
    // Stopped: nothing listens any more.
    assert!(std::net::TcpStream::connect(addr).is_err());
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains(r#"warden_sandbox_running{sandbox="warden-7"} 0"#),
        "{text}"
    );
}

#[test]
fn a_taken_port_fails_at_open() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let err = Exporter::open(
        MetricsRequest {
            file: None,
            listen: Some(addr),
        },
        "warden-7",
    )
    .err()
    .unwrap();
    assert!(matches!(err, MetricsError::Bind { .. }), "{err}");
}

#[cfg(target_os = "linux")]
#[test]
fn audit_records_and_proxy_decisions_are_counted_at_the_collector() {
    use crate::audit::record::from_net_event;
    use crate::audit::{Collector, ProxySink};
    use crate::net::event::{EventSink, NetEvent, Protocol};
    use crate::policy::decision::{Decision, ReasonKind, Verdict};
    let m = Arc::new(Metrics::new("warden-9"));
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
    write.layer = Some(crate::audit::record::Layer::Mount);
    collector.push(write);
    let text = m.openmetrics().unwrap();
    let s = samples(&text);
    for line in [
        r#"warden_network_requests_total{decision="deny",protocol="http",sandbox="warden-9"} 1"#,
        r#"warden_network_requests_total{decision="allow",protocol="dns",sandbox="warden-9"} 1"#,
        r#"warden_violations_total{kind="network",layer="proxy",sandbox="warden-9"} 1"#,
        r#"warden_violations_total{kind="file-write",layer="mount",sandbox="warden-9"} 1"#,
        r#"warden_execs_total{sandbox="warden-9"} 2"#,
    ] {
        assert!(s.contains(&line), "missing {line}\n{text}");
    }
    // The allowed request is not a violation.
    assert!(!text.contains(r#"kind="network",layer="unknown""#));
    // Losses, by reason.
    crate::audit::count_losses(
        &m,
        &crate::audit::Losses {
            ring_full: 1,
            pending_full: 0,
            undecodable: 2,
        },
    );
    let text = m.openmetrics().unwrap();
    assert!(text.contains(
        r#"warden_audit_events_dropped_total{sandbox="warden-9",reason="ring-buffer-full"} 1"#
    ));
    assert!(text.contains(
        r#"warden_audit_events_dropped_total{sandbox="warden-9",reason="undecodable"} 2"#
    ));
}

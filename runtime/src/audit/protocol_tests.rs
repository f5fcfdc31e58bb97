//! The daemon protocol's parsing and validation, and the operator labels' rules.

use super::*;
use crate::metrics::{LabelError, Labels, MAX_LABELS, MAX_LABEL_VALUE};

const REGISTER: &str = r#"{"type":"register","sandbox":"warden-42","cgroup_id":7,"cgroup":"/sys/fs/cgroup/warden-42","labels":{"team":"infra","agent":"a1"},"pid":42}"#;

#[test]
fn a_registration_parses_and_validates() {
    let Request::Register(reg) = parse_request(REGISTER.as_bytes()).unwrap() else {
        panic!("not a registration");
    };
    let r = reg.validate().unwrap();
    assert_eq!(r.sandbox, "warden-42");
    assert_eq!(r.cgroup_id, 7);
    assert_eq!(r.cgroup, PathBuf::from("/sys/fs/cgroup/warden-42"));
    assert_eq!(r.pid, 42);
    assert_eq!(r.labels.display(), "agent=a1,team=infra");
    // Defaults: an empty view, no unix socket rule, records streamed back.
    assert_eq!(r.view, View::default());
    assert_eq!(r.unix_sockets, None);
    assert!(r.stream);
}

#[test]
fn a_registration_with_everything_round_trips() {
    let reg = Register {
        sandbox: "warden-1".into(),
        cgroup_id: 99,
        cgroup: "/sys/fs/cgroup/warden-1".into(),
        labels: [("team".to_string(), "a".to_string())].into(),
        pid: 1,
        view: View {
            writable: vec!["/work".into()],
            protected: vec!["/work/.git/hooks".into()],
            masked: vec!["/home/u/.ssh".into()],
            ignored: vec!["/work/tmp".into()],
            exposing_masks: vec!["/home/u/.ssh".into()],
            exposed: vec!["/home/u/.ssh/known_hosts".into()],
        },
        unix_sockets: Some(vec!["/run/x.sock".into()]),
        stream: false,
        lsm: Some(LsmScope {
            enforce: true,
            fallback: false,
            writable: vec!["/work".into()],
            protected: vec!["/work/.git/hooks".into()],
            deny_read: vec!["/home/u/.ssh".into()],
            allow_read: vec!["/home/u/.ssh/known_hosts".into()],
        }),
    };
    let text = line(&Request::Register(Box::new(reg.clone())));
    assert!(text.ends_with('\n') && text.matches('\n').count() == 1);
    assert!(text.starts_with(r#"{"type":"register","#), "{text}");
    assert_eq!(
        parse_request(text.trim_end().as_bytes()).unwrap(),
        Request::Register(Box::new(reg))
    );
}

#[test]
fn malformed_and_unknown_requests_are_refused() {
    for bad in [
        "",
        "not json",
        r#"{"type":"nope"}"#,
        r#"{"sandbox":"warden-1"}"#,
        // A required field missing, a negative id, an unknown key (a typo never passes).
        r#"{"type":"register","sandbox":"warden-1","cgroup":"/x","pid":1}"#,
        r#"{"type":"register","sandbox":"warden-1","cgroup_id":-1,"cgroup":"/x","pid":1}"#,
        r#"{"type":"register","sandbox":"warden-1","cgroup_id":1,"cgroup":"/x","pid":1,"lables":{}}"#,
        r#"{"type":"bytes","up":1}"#,
    ] {
        assert!(parse_request(bad.as_bytes()).is_err(), "{bad:?}");
    }
    let long = vec![b' '; MAX_LINE + 1];
    assert!(matches!(parse_request(&long), Err(ProtocolError::TooLong)));
}

#[test]
fn validation_refuses_bad_ids_paths_pids_and_labels() {
    let base = || match parse_request(REGISTER.as_bytes()).unwrap() {
        Request::Register(r) => r,
        _ => unreachable!(),
    };
    let mut r = base();
    r.sandbox = "../etc".into();
    assert!(matches!(r.validate(), Err(ProtocolError::Sandbox(_))));
    let mut r = base();
    r.sandbox = "x".repeat(MAX_SANDBOX_ID + 1);
    assert!(matches!(r.validate(), Err(ProtocolError::Sandbox(_))));
    let mut r = base();
    r.cgroup_id = 0;
    assert!(matches!(r.validate(), Err(ProtocolError::CgroupId)));
    let mut r = base();
    r.cgroup = "relative/warden-1".into();
    assert!(matches!(r.validate(), Err(ProtocolError::CgroupPath(_))));
    let mut r = base();
    r.pid = 0;
    assert!(matches!(r.validate(), Err(ProtocolError::Pid)));
    let mut r = base();
    r.labels.insert("kind".into(), "x".into());
    assert!(matches!(
        r.validate(),
        Err(ProtocolError::Labels(LabelError::Reserved(_)))
    ));
}

#[test]
fn other_requests_parse() {
    assert_eq!(
        parse_request(br#"{"type":"finish"}"#).unwrap(),
        Request::Finish
    );
    assert_eq!(
        parse_request(br#"{"type":"bytes","up":3,"down":4}"#).unwrap(),
        Request::Bytes { up: 3, down: 4 }
    );
    let rec = r#"{"type":"record","record":{"time":"2026-01-01T00:00:00.000Z","sandbox":"warden-1","labels":{"team":"a"},"source":"proxy","kind":"network","violation":true,"operation":"http","target":"x.invalid:80","layer":"proxy","count":1}}"#;
    let Request::Record { record } = parse_request(rec.as_bytes()).unwrap() else {
        panic!("not a record");
    };
    assert_eq!(record.source, "proxy");
    assert_eq!(record.labels["team"], "a");
    assert_eq!(record.layer, Some(crate::audit::record::Layer::Proxy));
    // Written back the same way.
    let again = line(&Request::Record {
        record: record.clone(),
    });
    assert_eq!(again.trim_end(), rec);
}

#[test]
fn replies_parse_as_status_or_event() {
    assert_eq!(
        parse_reply(br#"{"ok":true}"#).unwrap(),
        Reply::Status(Status {
            ok: true,
            ..Status::default()
        })
    );
    let Reply::Status(s) = parse_reply(br#"{"ok":false,"error":"refused"}"#).unwrap() else {
        panic!("not a status");
    };
    assert_eq!((s.ok, s.error.as_deref()), (false, Some("refused")));
    let refused = line(&Status::refused("no"));
    assert_eq!(refused, "{\"ok\":false,\"error\":\"no\"}\n");
    let done = line(&Event::Done {
        losses: LossCounts {
            relay_full: 2,
            ..LossCounts::default()
        },
        events: 9,
    });
    assert!(done.starts_with(r#"{"type":"done","#), "{done}");
    let Reply::Event(Event::Done { losses, events }) = parse_reply(done.as_bytes()).unwrap() else {
        panic!("not done");
    };
    assert_eq!((losses.relay_full, events), (2, 9));
    // An unknown source reads as `other`, never as a kernel record.
    let rec = br#"{"type":"record","record":{"time":"T","sandbox":"warden-1","source":"made-up","kind":"exec","violation":false,"operation":"exec","target":"/bin/true","count":1}}"#;
    let Reply::Event(Event::Record { record }) = parse_reply(rec).unwrap() else {
        panic!("not a record");
    };
    assert_eq!(record.source, "other");
    assert!(parse_reply(b"{}").is_err());
}

#[test]
fn the_socket_comes_from_the_environment_or_the_default() {
    assert_eq!(socket_path(None), Some(PathBuf::from(DEFAULT_SOCKET)));
    assert_eq!(
        socket_path(Some("/tmp/a.sock".into())),
        Some(PathBuf::from("/tmp/a.sock"))
    );
    assert_eq!(socket_path(Some("".into())), None);
}

#[test]
fn labels_are_validated() {
    let ok = Labels::parse(&["team=infra".into(), "_x9=a b=c".into()]).unwrap();
    assert_eq!(ok.as_map()["_x9"], "a b=c");
    assert_eq!(ok.len(), 2);
    assert!(Labels::parse(&[]).unwrap().is_empty());
    let err = |args: &[&str]| {
        Labels::parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap_err()
    };
    assert_eq!(err(&["team"]), LabelError::Syntax("team".into()));
    for name in ["9team", "te-am", "", "__name", "té"] {
        assert_eq!(
            err(&[&format!("{name}=x")]),
            LabelError::Name(name.into()),
            "{name:?}"
        );
    }
    for name in ["kind", "layer", "le", "instance", "job"] {
        assert_eq!(
            err(&[&format!("{name}=x")]),
            LabelError::Reserved(name.into())
        );
    }
    assert_eq!(err(&["a=1", "a=2"]), LabelError::Duplicate("a".into()));
    assert_eq!(err(&["a="]), LabelError::Value("a".into()));
    assert_eq!(err(&["a=x\ny"]), LabelError::Value("a".into()));
    let long = format!("a={}", "v".repeat(MAX_LABEL_VALUE + 1));
    assert_eq!(err(&[&long]), LabelError::Value("a".into()));
    let max = format!("a={}", "v".repeat(MAX_LABEL_VALUE));
    assert!(Labels::parse(&[max]).is_ok());
    let many: Vec<String> = (0..=MAX_LABELS).map(|i| format!("l{i}=v")).collect();
    assert_eq!(
        Labels::parse(&many).unwrap_err(),
        LabelError::TooMany(MAX_LABELS + 1)
    );
    assert!(Labels::parse(&many[..MAX_LABELS]).is_ok());
}

#[test]
fn lines_are_read_whole_and_bounded() {
    use crate::audit::client::read_line;
    use std::io::BufReader;
    let mut r = BufReader::new(&b"{\"ok\":true}\npartial"[..]);
    let mut buf = Vec::new();
    assert!(read_line(&mut r, &mut buf).unwrap());
    assert_eq!(buf, b"{\"ok\":true}");
    buf.clear();
    // A last line without its newline is no line: the stream ended.
    assert!(!read_line(&mut r, &mut buf).unwrap());
    let mut long = vec![b'x'; MAX_LINE + 10];
    long.push(b'\n');
    let mut r = BufReader::new(&long[..]);
    let mut buf = Vec::new();
    let e = read_line(&mut r, &mut buf).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
    // Exactly MAX_LINE bytes still pass.
    let mut max = vec![b'y'; MAX_LINE];
    max.push(b'\n');
    let mut r = BufReader::new(&max[..]);
    let mut buf = Vec::new();
    assert!(read_line(&mut r, &mut buf).unwrap());
    assert_eq!(buf.len(), MAX_LINE);
}

use super::*;
use crate::policy::approvals::SettingsEdit;
use crate::policy::decision::{Layer, ReasonKind};
use crate::policy::domain::canonical_host;
use std::path::Path;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

fn ask_verdict() -> Verdict {
    Verdict::ask(
        ReasonKind::DomainAsk,
        "example.com is not in allowedDomains",
    )
}

#[tokio::test]
async fn non_interactive_denies_at_once_and_remembers_it() {
    let session = Arc::new(SessionApprovals::default());
    let a = Approvals::new(Arc::new(NonInteractive), session.clone(), None);
    let host = canonical_host("example.com").unwrap();
    let o = a.network(&host, 443, &ask_verdict()).await;
    assert!(!o.allowed);
    assert!(o.note.contains("denied by the user") || o.note.contains("denied"));
    assert!(!session.covers_domain(&host));
}

/// A scripted approver: answers each request with the next answer, records the requests.
struct Scripted {
    answers: Mutex<Vec<Answer>>,
    seen: Mutex<Vec<PermissionRequest>>,
}

impl Approver for Scripted {
    fn ask(&self, r: PermissionRequest) -> Pin<Box<dyn Future<Output = Answer> + Send + '_>> {
        self.seen.lock().unwrap().push(r);
        let a = self.answers.lock().unwrap().remove(0);
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            a
        })
    }
}

#[tokio::test]
async fn concurrent_requests_for_one_host_ask_once_and_share_the_answer() {
    let scripted = Arc::new(Scripted {
        answers: Mutex::new(vec![Answer::AllowOnce]),
        seen: Mutex::new(vec![]),
    });
    let session = Arc::new(SessionApprovals::default());
    let a = Arc::new(Approvals::new(scripted.clone(), session.clone(), None));
    let host = canonical_host("example.com").unwrap();
    let v = ask_verdict();
    let (o1, o2) = tokio::join!(a.network(&host, 443, &v), a.network(&host, 443, &v));
    assert!(o1.allowed && o2.allowed);
    assert_eq!(scripted.seen.lock().unwrap().len(), 1);
    let r = &scripted.seen.lock().unwrap()[0];
    assert_eq!(r.target, "example.com:443");
    assert_eq!(r.kind, RequestKind::Network);
    assert!(session.covers_domain(&host));
}

#[tokio::test]
async fn an_unanswered_request_is_denied_after_the_timeout() {
    struct Silent;
    impl Approver for Silent {
        fn ask(&self, _: PermissionRequest) -> Pin<Box<dyn Future<Output = Answer> + Send + '_>> {
            Box::pin(std::future::pending())
        }
    }
    let a = Approvals::new(
        Arc::new(Silent),
        Arc::new(SessionApprovals::default()),
        None,
    )
    .with_timeout(Duration::from_millis(100));
    let o = a
        .network(&canonical_host("slow.test").unwrap(), 80, &ask_verdict())
        .await;
    assert!(!o.allowed);
    assert!(o.note.contains("nobody answered"), "{}", o.note);
}

#[tokio::test]
async fn allow_always_over_the_channel_persists_the_pattern_keeping_comments() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("approvals.sock");
    let settings = dir.path().join("settings.json");
    std::fs::write(
        &settings,
        "{\n  // my own settings\n  \"network\": { \"allowedDomains\": [\"github.com\"] }\n}\n",
    )
    .unwrap();
    let channel = channel::ChannelApprover::bind(&sock).unwrap();
    let session = Arc::new(SessionApprovals::default());
    let a = Approvals::new(channel.clone(), session.clone(), Some(settings.clone()));
    let client = tokio::spawn({
        let sock = sock.clone();
        async move {
            let s = channel::connect(&sock).await.unwrap();
            let (r, mut w) = s.into_split();
            let mut lines = BufReader::new(r).lines();
            let line = lines.next_line().await.unwrap().unwrap();
            let req: serde_json::Value = serde_json::from_str(&line).unwrap();
            assert_eq!(req["type"], "permission_request");
            assert_eq!(req["kind"], "network");
            assert_eq!(req["target"], "registry.npmjs.org:443");
            let resp = serde_json::json!({
                "type": "permission_response", "id": req["id"], "decision": "allow-always"
            });
            w.write_all(format!("{resp}\n").as_bytes()).await.unwrap();
        }
    });
    let host = canonical_host("registry.npmjs.org").unwrap();
    let o = a.network(&host, 443, &ask_verdict()).await;
    client.await.unwrap();
    assert!(o.allowed, "{}", o.note);
    assert!(session.covers_domain(&host));
    let text = std::fs::read_to_string(&settings).unwrap();
    assert!(text.contains("// my own settings"), "{text}");
    assert!(text.contains("\"*.npmjs.org\""), "{text}");
    assert!(text.contains("\"github.com\""), "{text}");
    drop(a);
    drop(channel);
    assert!(
        !sock.exists(),
        "the socket file is removed with the approver"
    );
}

#[test]
fn edits_append_once_remove_and_respect_claude_s_sandbox_block() {
    let append = |key: &str, value: &str| SettingsEdit::Append {
        layer: Layer::User,
        key: key.into(),
        value: value.into(),
    };
    let t = edit::apply_to_text("{}", &append("network.allowedDomains", "a.test")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&t).unwrap();
    assert_eq!(v["network"]["allowedDomains"][0], "a.test");
    // Idempotent.
    let t2 = edit::apply_to_text(&t, &append("network.allowedDomains", "a.test")).unwrap();
    assert_eq!(t, t2);
    // Claude Code form.
    let claude = r#"{ "model": "x", "sandbox": { "network": { "allowedDomains": [] } } }"#;
    let t = edit::apply_to_text(claude, &append("network.allowedDomains", "b.test")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&t).unwrap();
    assert_eq!(v["sandbox"]["network"]["allowedDomains"][0], "b.test");
    assert!(v.get("network").is_none());
    // Remove.
    let remove = SettingsEdit::Remove {
        layer: Layer::User,
        file: "f".into(),
        key: "filesystem.denyRead".into(),
        value: "~/.aws".into(),
    };
    let t = edit::apply_to_text(
        r#"{ "filesystem": { "denyRead": ["~/.ssh", "~/.aws"] } }"#,
        &remove,
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_str(&t).unwrap();
    assert_eq!(v["filesystem"]["denyRead"], serde_json::json!(["~/.ssh"]));
    // A file that does not parse is not touched.
    assert!(matches!(
        edit::apply_to_text("{ nope", &append("network.allowedDomains", "a")),
        Err(edit::TextError::Unparsable(_))
    ));
}

fn scripted(answers: Vec<Answer>) -> Arc<Scripted> {
    Arc::new(Scripted {
        answers: Mutex::new(answers),
        seen: Mutex::new(vec![]),
    })
}

fn user_deny_read() -> Verdict {
    let mut v = Verdict::ask(ReasonKind::DenyRead, "reading /home/u/secrets/a is denied");
    v.rule = Some(crate::policy::decision::RuleRef {
        list: "filesystem.denyRead".to_string().into(),
        entry: "~/secrets".into(),
        provenance: crate::policy::decision::Provenance::new(Layer::User, 0, "/u.json"),
    });
    v
}

#[tokio::test]
async fn a_path_question_offers_what_fits_the_rule_and_shares_the_approval() {
    let dir = tempfile::tempdir().unwrap();
    let store = store::SessionStore::open_in(&dir.path().join("s"), "sess").unwrap();
    let s = scripted(vec![Answer::AllowOnce]);
    let session = Arc::new(SessionApprovals::default());
    let a = Approvals::new(s.clone(), session.clone(), None).with_store(store.clone());
    let secret = Path::new("/home/u/secrets/a");
    let o = a.path(Access::Read, secret, true, &user_deny_read()).await;
    assert!(o.allowed, "{o:?}");
    assert_eq!(o.scope.as_deref(), Some(secret));
    let req = s.seen.lock().unwrap()[0].clone();
    assert_eq!(req.kind, RequestKind::FilesystemRead);
    assert_eq!(
        req.options,
        [Answer::AllowOnce, Answer::RemoveFromDenyList, Answer::Deny]
    );
    assert!(req.provenance.is_some());
    assert!(session.covers_path(Access::Read, secret));
    assert!(store
        .load()
        .unwrap()
        .paths
        .contains(&(Access::Read, secret.to_path_buf())));
    assert!(o.note.contains("shared with the session"), "{}", o.note);
}

#[tokio::test]
async fn an_answer_not_offered_and_no_approver_both_deny() {
    let s = scripted(vec![Answer::AllowAlways]);
    let session = Arc::new(SessionApprovals::default());
    let a = Approvals::new(s.clone(), session.clone(), None);
    // allow-always is not offered for a deny-list hit (remove-from-deny-list is).
    let secret = Path::new("/home/u/secrets/a");
    let o = a.path(Access::Read, secret, true, &user_deny_read()).await;
    assert!(!o.allowed);
    assert!(!session.covers_path(Access::Read, secret));
    let a = Approvals::new(Arc::new(NonInteractive), session.clone(), None);
    let v = Verdict::ask(ReasonKind::OutsideWritable, "writing /data/x is outside");
    let o = a.path(Access::Write, Path::new("/data/x"), false, &v).await;
    assert!(!o.allowed);
    assert!(o.note.contains("no approver"), "{}", o.note);
}

#[tokio::test]
async fn allow_always_for_a_new_file_persists_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    let user = dir.path().join("settings.json");
    let s = scripted(vec![Answer::AllowAlways]);
    let session = Arc::new(SessionApprovals::default());
    let a = Approvals::new(s.clone(), session.clone(), Some(user.clone()));
    let v = Verdict::ask(
        ReasonKind::OutsideWritable,
        "writing /data/out/x is outside",
    );
    let o = a
        .path(Access::Write, Path::new("/data/out/x"), false, &v)
        .await;
    assert!(o.allowed);
    assert!(session.covers_path(Access::Write, Path::new("/data/out/y")));
    let text = std::fs::read_to_string(&user).unwrap();
    assert!(text.contains("/data/out"), "{text}");
    assert_eq!(s.seen.lock().unwrap()[0].target, "/data/out");
}

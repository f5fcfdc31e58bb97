use super::*;
use crate::policy::decision::{Provenance, RuleRef};
use crate::policy::domain::canonical_host;

fn ask(kind: ReasonKind, rule: Option<RuleRef>) -> Verdict {
    let mut v = Verdict::ask(kind, "x");
    v.rule = rule;
    v
}

fn rule(layer: Layer, list: &str, entry: &str) -> RuleRef {
    RuleRef {
        list: list.to_string().into(),
        entry: entry.into(),
        provenance: Provenance::new(layer, 0, format!("/{layer}.json")),
    }
}

#[test]
fn write_outside_persists_parent_dir_to_user_allow_write() {
    let e = persist_path(
        &ask(ReasonKind::OutsideWritable, None),
        Path::new("/opt/data/x.bin"),
        Access::Write,
    )
    .unwrap();
    assert_eq!(
        e,
        SettingsEdit::Append {
            layer: Layer::User,
            key: "filesystem.allowWrite".into(),
            value: "/opt/data".into()
        }
    );
}

#[test]
fn deny_hits_remove_the_entry_from_its_own_layer() {
    for layer in [Layer::User, Layer::Project] {
        let v = ask(
            ReasonKind::DenyRead,
            Some(rule(layer, "filesystem.denyRead", "~/.aws")),
        );
        assert_eq!(
            persist_path(&v, Path::new("/home/u/.aws/config"), Access::Read).unwrap(),
            SettingsEdit::Remove {
                layer,
                file: format!("/{layer}.json"),
                key: "filesystem.denyRead".into(),
                value: "~/.aws".into()
            }
        );
    }
}

#[test]
fn managed_and_non_file_entries_are_never_edited() {
    let v = ask(
        ReasonKind::DenyWrite,
        Some(rule(Layer::Managed, "filesystem.denyWrite", "/etc")),
    );
    assert_eq!(
        persist_path(&v, Path::new("/etc/x"), Access::Write)
            .unwrap_err()
            .to_string(),
        "`/etc` is organization policy (managed settings) and cannot be changed"
    );
    let v = ask(
        ReasonKind::DenyWrite,
        Some(rule(Layer::Flags, "filesystem.denyWrite", "/x")),
    );
    assert!(matches!(
        persist_path(&v, Path::new("/x"), Access::Write),
        Err(NotPersistable::NotAUserFile { .. })
    ));
    let hard = Verdict::deny(ReasonKind::Mandatory, "x");
    assert_eq!(
        persist_path(&hard, Path::new("/x"), Access::Write),
        Err(NotPersistable::NotApprovable)
    );
}

#[test]
fn domains_persist_the_parent_wildcard_for_three_labels() {
    let e = persist_domain(&canonical_host("registry.npmjs.org").unwrap());
    assert_eq!(
        e,
        SettingsEdit::Append {
            layer: Layer::User,
            key: "network.allowedDomains".into(),
            value: "*.npmjs.org".into()
        }
    );
    let SettingsEdit::Append { value, .. } = persist_domain(&canonical_host("github.com").unwrap())
    else {
        panic!()
    };
    assert_eq!(value, "github.com");
}

#[test]
fn session_sets_cover_descendants_and_are_per_access() {
    let s = SessionApprovals::default();
    s.approve_path(Access::Write, Path::new("/opt/a"));
    assert!(s.covers_path(Access::Write, Path::new("/opt/a/b/c")));
    assert!(!s.covers_path(Access::Write, Path::new("/opt/ab")));
    assert!(!s.covers_path(Access::Read, Path::new("/opt/a/b")));
    let h = canonical_host("Example.COM.").unwrap();
    assert!(!s.covers_domain(&h));
    s.approve_domain(&h);
    assert!(s.covers_domain(&canonical_host("example.com").unwrap()));
}

#[test]
fn a_snapshot_round_trips_and_merges_into_another_session_object() {
    let a = SessionApprovals::default();
    a.approve_path(Access::Write, Path::new("/data/out"));
    a.approve_path(Access::Read, Path::new("/home/u/.aws/config"));
    a.approve_domain(&canonical_host("Example.COM").unwrap());
    let json = serde_json::to_string(&a.snapshot()).unwrap();
    let back: Snapshot = serde_json::from_str(&json).unwrap();
    assert_eq!(back, a.snapshot());
    let b = SessionApprovals::default();
    b.merge(&back);
    assert!(b.covers_path(Access::Write, Path::new("/data/out/x/y")));
    assert!(!b.covers_path(Access::Read, Path::new("/data/out")));
    assert!(b.covers_domain(&canonical_host("example.com").unwrap()));
    assert_eq!(
        b.paths(Access::Read),
        [PathBuf::from("/home/u/.aws/config")]
    );
    // Unknown fields are refused: a store written by something else is not trusted.
    assert!(serde_json::from_str::<Snapshot>(r#"{"paths":[],"all":true}"#).is_err());
}

#[test]
fn allow_once_approves_the_path_or_for_a_new_file_its_directory() {
    let p = Path::new("/data/out/report.csv");
    assert_eq!(once_scope(p, Access::Write, true), p);
    assert_eq!(once_scope(p, Access::Write, false), Path::new("/data/out"));
    assert_eq!(once_scope(p, Access::Read, false), p);
}

#[test]
fn command_approvals_are_per_line_and_placement_and_round_trip() {
    use crate::policy::command::Placement;
    let a = SessionApprovals::default();
    let key = command_key("sudo make install", Placement::Unsandboxed);
    a.approve_command(&key);
    assert!(a.covers_command(&key));
    assert!(!a.covers_command(&command_key("sudo make install", Placement::Sandboxed)));
    assert!(!a.covers_command(&command_key("sudo make", Placement::Unsandboxed)));
    let b = SessionApprovals::default();
    b.merge(&serde_json::from_str(&serde_json::to_string(&a.snapshot()).unwrap()).unwrap());
    assert!(b.covers_command(&key));
    // A store written before commands were kept still loads.
    let old: Snapshot = serde_json::from_str(r#"{"paths":[],"domains":["x.test"]}"#).unwrap();
    assert!(old.commands.is_empty());
}

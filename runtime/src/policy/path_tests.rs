use super::*;
use crate::policy::decision::{Decision, Layer};
use crate::policy::fsview::MemFs;
use crate::policy::merge::{layer, Context, Policy};
use crate::policy::settings::{FilesystemSettings, SandboxSettings, WardenSettings};

const CWD: &str = "/home/u/proj";

fn fs() -> MemFs {
    let mut fs = MemFs::new();
    fs.dir("/home/u/proj/src")
        .file("/home/u/proj/src/main.rs", "")
        .file("/home/u/.ssh/id_rsa", "secret")
        .file("/home/u/.ssh/known_hosts", "")
        .file("/home/u/.bashrc", "")
        .file("/etc/passwd", "")
        .dir("/tmp/warden-1")
        .dir("/data/cache")
        .symlink("/home/u/proj/escape", "/etc")
        .symlink("/home/u/proj/inner", "src")
        .symlink("/home/u/proj/rc", "/home/u/.bashrc")
        .symlink("/home/u/link-into-proj", "/home/u/proj/src")
        .symlink("/home/u/proj/keys", "/home/u/.ssh")
        .symlink("/data/cachelink", "/data/cache");
    fs
}

fn fs_settings(f: FilesystemSettings) -> SandboxSettings {
    SandboxSettings {
        filesystem: Some(f),
        ..Default::default()
    }
}

fn policy_with(layers: Vec<crate::policy::merge::LayerInput>) -> (Policy, MemFs) {
    let fs = fs();
    let ctx = Context {
        cwd: PathBuf::from(CWD),
        home: PathBuf::from("/home/u"),
        tmpdir: Some(PathBuf::from("/tmp/warden-1")),
        approver_attached: true,
        protected: Vec::new(),
    };
    (Policy::build(&layers, ctx, &fs).unwrap(), fs)
}

fn std_policy() -> (Policy, MemFs) {
    policy_with(vec![layer(
        Layer::User,
        0,
        "/home/u/.config/warden/settings.json",
        fs_settings(FilesystemSettings {
            deny_read: Some(vec!["~/.ssh".into()]),
            allow_read: Some(vec!["~/.ssh/known_hosts".into()]),
            allow_write: Some(vec!["/data/cache".into()]),
            deny_write: Some(vec!["src/generated".into(), ".env".into()]),
            ..Default::default()
        }),
    )])
}

fn w(p: &Policy, fs: &MemFs, path: &str) -> Verdict {
    p.check_path(fs, Path::new(path), Access::Write)
}
fn r(p: &Policy, fs: &MemFs, path: &str) -> Verdict {
    p.check_path(fs, Path::new(path), Access::Read)
}

#[test]
fn writes_inside_cwd_tmpdir_and_allow_write() {
    let (p, fs) = std_policy();
    for path in [
        "src/main.rs",
        "/home/u/proj/new/file",
        "./a//b/",
        "/tmp/warden-1/x",
        "/data/cache/blob",
        "/data/cachelink/blob",
        "inner/x",
    ] {
        let v = w(&p, &fs, path);
        assert_eq!(v.decision, Decision::Allow, "{path}: {v}");
        assert_eq!(v.kind, ReasonKind::Writable);
    }
    assert_eq!(
        w(&p, &fs, "src/main.rs").rule.unwrap().list,
        "working directory"
    );
    assert_eq!(
        w(&p, &fs, "/data/cache/x").rule.unwrap().list,
        "filesystem.allowWrite"
    );
}

#[test]
fn write_outside_requires_approval() {
    let (p, fs) = std_policy();
    let v = w(&p, &fs, "/etc/passwd");
    assert_eq!(v.decision, Decision::RequiresApproval);
    assert_eq!(v.kind, ReasonKind::OutsideWritable);
    assert_eq!(
        v.reason,
        "writing /etc/passwd is outside the writable roots"
    );
    assert_eq!(
        w(&p, &fs, "/home/u/projx/f").decision,
        Decision::RequiresApproval
    );
    assert_eq!(w(&p, &fs, "/home/u").decision, Decision::RequiresApproval);
}

#[test]
fn writing_into_cwd_through_a_symlink_from_outside_is_allowed() {
    let (p, fs) = std_policy();
    assert!(w(&p, &fs, "/home/u/link-into-proj/x").is_allowed());
}

#[test]
fn dotdot_out_of_every_root_is_hard_denied() {
    let (p, fs) = std_policy();
    for path in [
        "../../../etc/shadow",
        "src/../../x",
        "/home/u/proj/../other",
        "/etc/../etc/passwd",
    ] {
        let v = w(&p, &fs, path);
        assert_eq!(v.decision, Decision::Deny, "{path}: {v}");
        assert_eq!(v.kind, ReasonKind::Traversal, "{path}");
    }
    // `..` that stays inside is fine.
    assert!(w(&p, &fs, "src/../README.md").is_allowed());
}

#[test]
fn symlink_escape_is_hard_denied() {
    let (p, fs) = std_policy();
    let v = w(&p, &fs, "escape/passwd");
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.kind, ReasonKind::SymlinkEscape);
    assert_eq!(
        v.reason,
        "writing /home/u/proj/escape/passwd is denied: a symlink leads out of the writable root (working directory) to /etc/passwd"
    );
}

#[test]
fn nul_and_empty_and_loops_are_hard_denied() {
    let (p, mut fs) = std_policy();
    use std::ffi::OsStr;
    let nul = Path::new(OsStr::from_bytes(b"/home/u/proj/a\0b"));
    assert_eq!(
        p.check_path(&fs, nul, Access::Write).kind,
        ReasonKind::InvalidPath
    );
    assert_eq!(
        p.check_path(&fs, nul, Access::Read).decision,
        Decision::Deny
    );
    assert_eq!(w(&p, &fs, "").kind, ReasonKind::InvalidPath);
    fs.symlink("/home/u/proj/l1", "l2")
        .symlink("/home/u/proj/l2", "l1");
    assert_eq!(w(&p, &fs, "l1/x").kind, ReasonKind::InvalidPath);
}

#[test]
fn deny_write_beats_allow_write_and_is_approvable() {
    let (p, fs) = std_policy();
    let v = w(&p, &fs, "src/generated/a.rs");
    assert_eq!(v.decision, Decision::RequiresApproval);
    assert_eq!(v.kind, ReasonKind::DenyWrite);
    let rule = v.rule.unwrap();
    assert_eq!(rule.list, "filesystem.denyWrite");
    assert_eq!(&*rule.entry, "src/generated");
    assert_eq!(rule.provenance.layer, Layer::User);
    assert_eq!(w(&p, &fs, ".env").kind, ReasonKind::DenyWrite);
    assert_eq!(w(&p, &fs, ".envrc").kind, ReasonKind::Writable);
}

#[test]
fn mandatory_protections_hold_for_missing_files_and_through_symlinks() {
    let (p, fs) = std_policy();
    for path in [
        ".git/hooks/pre-commit",
        ".bashrc",
        "sub/.zshrc",
        ".claude/settings.json",
        ".vscode/tasks.json",
        ".git/config",
        ".warden/settings.json",
        "rc",
        "/tmp/warden-1/.ssh/authorized_keys",
    ] {
        let v = w(&p, &fs, path);
        assert_eq!(v.decision, Decision::Deny, "{path}: {v}");
        assert_eq!(v.kind, ReasonKind::Mandatory, "{path}");
        assert_eq!(v.rule.unwrap().provenance, Provenance::builtin());
    }
    for path in [
        ".git/objects/ab/cd",
        ".git/refs/heads/main",
        ".git/index",
        ".git/HEAD",
    ] {
        assert!(w(&p, &fs, path).is_allowed(), "{path}");
    }
}

#[test]
fn allow_git_config_releases_only_config() {
    let (p, fs) = policy_with(vec![layer(
        Layer::Project,
        0,
        "/home/u/proj/.warden/settings.json",
        fs_settings(FilesystemSettings {
            allow_git_config: Some(true),
            ..Default::default()
        }),
    )]);
    assert!(w(&p, &fs, ".git/config").is_allowed());
    assert_eq!(w(&p, &fs, ".git/hooks/x").kind, ReasonKind::Mandatory);
}

#[test]
fn reads_are_allowed_except_deny_read() {
    let (p, fs) = std_policy();
    assert_eq!(r(&p, &fs, "/etc/passwd").kind, ReasonKind::ReadAllowed);
    let v = r(&p, &fs, "/home/u/.ssh/id_rsa");
    assert_eq!(v.decision, Decision::RequiresApproval);
    assert_eq!(v.kind, ReasonKind::DenyRead);
    assert_eq!(&*v.rule.unwrap().entry, "~/.ssh");
    assert_eq!(r(&p, &fs, "/home/u/.ssh").kind, ReasonKind::DenyRead);
    assert_eq!(r(&p, &fs, "/home/u/.sshx").kind, ReasonKind::ReadAllowed);
}

#[test]
fn every_spelling_of_a_denied_read_is_denied() {
    let (p, fs) = std_policy();
    for path in [
        "/home/u/.ssh/id_rsa",
        "/home/u//.ssh/./id_rsa",
        "/home/u/.ssh/id_rsa/",
        "/home/u/proj/../.ssh/id_rsa",
        "../.ssh/id_rsa",
        "keys/id_rsa",
    ] {
        assert_eq!(r(&p, &fs, path).kind, ReasonKind::DenyRead, "{path}");
    }
}

#[test]
fn allow_read_reopens_a_subpath() {
    let (p, fs) = std_policy();
    let v = r(&p, &fs, "/home/u/.ssh/known_hosts");
    assert_eq!(v.decision, Decision::Allow);
    assert_eq!(v.kind, ReasonKind::AllowRead);
}

#[test]
fn lower_layer_allow_read_cannot_reopen_a_managed_deny() {
    let managed = layer(
        Layer::Managed,
        0,
        "/etc/warden/managed-settings.json",
        fs_settings(FilesystemSettings {
            deny_read: Some(vec!["/home/u/.aws".into()]),
            deny_write: Some(vec!["/data/cache/pinned".into()]),
            ..Default::default()
        }),
    );
    let user = layer(
        Layer::User,
        0,
        "u.json",
        fs_settings(FilesystemSettings {
            allow_read: Some(vec!["/home/u/.aws/credentials".into()]),
            allow_write: Some(vec!["/data/cache".into()]),
            ..Default::default()
        }),
    );
    let (p, fs) = policy_with(vec![user, managed]);
    let v = r(&p, &fs, "/home/u/.aws/credentials");
    assert_eq!(v.decision, Decision::Deny, "{v}");
    assert_eq!(
        v.reason,
        "reading /home/u/.aws/credentials is denied by organization policy"
    );
    assert!(v.to_string().contains("(organization policy)"), "{v}");
    let v = w(&p, &fs, "/data/cache/pinned/x");
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.kind, ReasonKind::DenyWrite);
}

#[test]
fn session_approvals_turn_soft_decisions_into_allow() {
    let (p, fs) = std_policy();
    assert_eq!(
        w(&p, &fs, "/opt/out/x").decision,
        Decision::RequiresApproval
    );
    p.approvals
        .approve_path(Access::Write, Path::new("/opt/out"));
    let v = w(&p, &fs, "/opt/out/x");
    assert_eq!(v.decision, Decision::Allow);
    assert_eq!(v.kind, ReasonKind::SessionApproval);
    // Reads are a separate approval.
    p.approvals
        .approve_path(Access::Read, Path::new("/home/u/.ssh/id_rsa"));
    assert!(r(&p, &fs, "/home/u/.ssh/id_rsa").is_allowed());
    // Hard denials stay denied.
    p.approvals.approve_path(Access::Write, Path::new("/"));
    assert_eq!(w(&p, &fs, "../../x").decision, Decision::Deny);
    assert_eq!(w(&p, &fs, ".git/hooks/pre-push").decision, Decision::Deny);
    assert_eq!(w(&p, &fs, "escape/x").decision, Decision::Deny);
}

#[test]
fn read_only_mode_denies_every_write_hard() {
    let (p, fs) = policy_with(vec![layer(
        Layer::Cli,
        0,
        "ro.json",
        SandboxSettings {
            warden: Some(WardenSettings {
                read_only: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        },
    )]);
    let v = w(&p, &fs, "src/main.rs");
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.kind, ReasonKind::ReadOnlyMode);
    p.approvals.approve_path(Access::Write, Path::new("/"));
    assert_eq!(w(&p, &fs, "src/main.rs").decision, Decision::Deny);
    assert!(r(&p, &fs, "src/main.rs").is_allowed());
}

#[test]
fn disable_tmp_write_removes_tmpdir() {
    let (p, fs) = policy_with(vec![layer(
        Layer::User,
        0,
        "u.json",
        SandboxSettings {
            warden: Some(WardenSettings {
                disable_tmp_write: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        },
    )]);
    assert_eq!(
        w(&p, &fs, "/tmp/warden-1/x").decision,
        Decision::RequiresApproval
    );
}

#[test]
fn globs_cover_matches_and_their_children() {
    let (p, fs) = policy_with(vec![layer(
        Layer::User,
        0,
        "u.json",
        fs_settings(FilesystemSettings {
            deny_read: Some(vec![
                "/**/*.pem".into(),
                "~/.config/*/token".into(),
                "**/*.key".into(),
            ]),
            deny_write: Some(vec!["src/**/*.lock".into()]),
            ..Default::default()
        }),
    )]);
    assert_eq!(r(&p, &fs, "/etc/ssl/key.pem").kind, ReasonKind::DenyRead);
    // A relative glob is relative to the working directory, like every relative entry.
    assert_eq!(r(&p, &fs, "src/deep/tls.key").kind, ReasonKind::DenyRead);
    assert_eq!(r(&p, &fs, "/etc/tls.key").kind, ReasonKind::ReadAllowed);
    assert_eq!(
        r(&p, &fs, "/home/u/.config/gh/token").kind,
        ReasonKind::DenyRead
    );
    assert_eq!(
        r(&p, &fs, "/home/u/.config/gh/sub/token").kind,
        ReasonKind::ReadAllowed
    );
    assert_eq!(w(&p, &fs, "src/a/b/Cargo.lock").kind, ReasonKind::DenyWrite);
    assert_eq!(w(&p, &fs, "Cargo.lock").kind, ReasonKind::Writable);
}

#[test]
fn filesystem_disabled_allows_everything() {
    let (p, fs) = policy_with(vec![layer(
        Layer::User,
        0,
        "u.json",
        fs_settings(FilesystemSettings {
            disabled: Some(true),
            ..Default::default()
        }),
    )]);
    assert_eq!(
        w(&p, &fs, "/etc/passwd").kind,
        ReasonKind::FilesystemDisabled
    );
}

#[test]
fn bad_entries_are_errors_naming_key_and_provenance() {
    let fs = fs();
    let ctx = Context {
        cwd: PathBuf::from(CWD),
        home: PathBuf::from("/home/u"),
        tmpdir: None,
        approver_attached: false,
        protected: Vec::new(),
    };
    let bad = layer(
        Layer::Project,
        0,
        "/home/u/proj/.warden/settings.json",
        fs_settings(FilesystemSettings {
            deny_read: Some(vec!["~bob/.ssh".into()]),
            ..Default::default()
        }),
    );
    let e = Policy::build(&[bad], ctx, &fs).unwrap_err().to_string();
    assert_eq!(
        e,
        "`filesystem.denyRead` entry \"~bob/.ssh\" from /home/u/proj/.warden/settings.json (project settings): `~user` paths are not supported; write the absolute path"
    );
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn spelling() -> impl Strategy<Value = String> {
        // Random spellings of /home/u/.ssh/id_rsa built from `.`, `..`, `//`, trailing `/`
        // and the `keys` symlink.
        let prefix = prop_oneof![
            Just("/home/u/.ssh".to_string()),
            Just("/home/u/./.ssh".to_string()),
            Just("/home//u/.ssh".to_string()),
            Just("/home/u/proj/../.ssh".to_string()),
            Just("../.ssh".to_string()),
            Just("keys".to_string()),
            Just("/home/u/proj/keys".to_string()),
            Just("src/../keys".to_string()),
            Just("/home/u/.ssh/../.ssh".to_string()),
        ];
        (
            prefix,
            prop::collection::vec(prop_oneof![Just("/."), Just("//"), Just("/")], 0..3),
            any::<bool>(),
        )
            .prop_map(|(p, seps, trailing)| {
                let mut s = p;
                for sep in seps {
                    s.push_str(sep);
                }
                s.push_str("/id_rsa");
                if trailing {
                    s.push('/');
                }
                s
            })
    }

    proptest! {
        #[test]
        fn no_spelling_of_a_denied_path_is_allowed(path in spelling()) {
            let (p, fs) = std_policy();
            let v = r(&p, &fs, &path);
            prop_assert_eq!(v.kind, ReasonKind::DenyRead, "{}", path);
            let v = w(&p, &fs, &path);
            prop_assert!(!v.is_allowed(), "{}: {}", path, v);
        }

        #[test]
        fn no_spelling_of_a_mandatory_path_is_writable(
            pre in prop_oneof![Just(""), Just("./"), Just("src/../"), Just("inner/../"), Just("/home/u/proj//")],
            name in prop_oneof![Just(".git/hooks/pre-commit"), Just(".bashrc"), Just(".git//hooks/x"), Just(".claude/./a")],
            trailing in any::<bool>(),
        ) {
            let (p, fs) = std_policy();
            let path = format!("{pre}{name}{}", if trailing { "/" } else { "" });
            prop_assert_eq!(w(&p, &fs, &path).decision, Decision::Deny, "{}", path);
        }
    }
}

/// An allowWrite entry that is a symlink leading out of itself (the sandbox could have
/// planted it in an earlier run): writes there are denied, as the Linux view refuses to start.
#[test]
fn allow_write_entry_escaping_through_its_own_symlink_is_denied() {
    let (p, fs) = policy_with(vec![layer(
        Layer::User,
        0,
        "u.json",
        fs_settings(FilesystemSettings {
            allow_write: Some(vec!["/home/u/proj/escape".into(), "/data/cache".into()]),
            ..Default::default()
        }),
    )]);
    let root = p
        .paths
        .writable
        .iter()
        .find(|w| &*w.rule.text == "/home/u/proj/escape")
        .unwrap();
    assert_eq!(root.escapes.as_deref(), Some(Path::new("/etc")));
    // Through the link and at the target itself: denied, naming the escape.
    let v = w(&p, &fs, "/etc/passwd");
    assert_eq!(v.decision, Decision::Deny, "{v:?}");
    assert_eq!(v.kind, ReasonKind::SymlinkEscape);
    let v = w(&p, &fs, "/home/u/proj/escape/passwd");
    assert_eq!(v.decision, Decision::Deny, "{v:?}");
    // The cwd still covers the link itself; the other entry is untouched.
    assert!(w(&p, &fs, "/data/cache/x").is_allowed());
}

/// The system's own aliases are not escapes: `/var/run` is `/run` on Debian, `/var` is
/// `/private/var` on macOS.
#[test]
fn allow_write_through_system_aliases_is_allowed() {
    let mut fs = fs();
    fs.dir("/run/user/1000")
        .symlink("/var/run", "/run")
        .dir("/private/var/folders/xy")
        .symlink("/var", "private/var");
    let ctx = Context {
        cwd: PathBuf::from(CWD),
        home: PathBuf::from("/home/u"),
        tmpdir: None,
        approver_attached: true,
        protected: Vec::new(),
    };
    let layers = vec![layer(
        Layer::User,
        0,
        "u.json",
        fs_settings(FilesystemSettings {
            allow_write: Some(vec!["/var/folders/xy".into()]),
            ..Default::default()
        }),
    )];
    let p = Policy::build(&layers, ctx, &fs).unwrap();
    assert!(p.paths.writable.iter().all(|w| w.escapes.is_none()));
    assert!(w(&p, &fs, "/private/var/folders/xy/f").is_allowed());
    assert!(w(&p, &fs, "/var/folders/xy/f").is_allowed());
}

/// A bare repository inside the project (`remote.git` beside its clone): its hooks and config
/// run on the host's `git push`, so they are protected like a `.git`'s, found by looking.
#[test]
fn a_bare_repository_inside_a_root_has_its_hooks_and_config_protected() {
    let mut fs = fs();
    fs.file("/home/u/proj/remote.git/HEAD", "ref: refs/heads/main\n")
        .dir("/home/u/proj/remote.git/objects")
        .dir("/home/u/proj/remote.git/refs")
        .dir("/home/u/proj/src/hooks");
    let ctx = Context {
        cwd: PathBuf::from(CWD),
        home: PathBuf::from("/home/u"),
        tmpdir: None,
        approver_attached: true,
        protected: Vec::new(),
    };
    let p = Policy::build(&[], ctx, &fs).unwrap();
    for denied in [
        "remote.git/hooks/post-receive",
        "remote.git/hooks",
        "remote.git/config",
    ] {
        let v = w(&p, &fs, denied);
        assert_eq!(v.decision, Decision::Deny, "{denied}: {v:?}");
        assert_eq!(v.kind, ReasonKind::Mandatory, "{denied}");
        assert!(v.reason.contains("/home/u/proj/remote.git/"), "{v:?}");
    }
    for allowed in [
        "remote.git/objects/ab/cd",
        "remote.git/refs/heads/x",
        "src/hooks/x",
    ] {
        assert!(w(&p, &fs, allowed).is_allowed(), "{allowed}");
    }
}

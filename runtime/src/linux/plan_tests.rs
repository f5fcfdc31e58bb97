use super::*;
use crate::policy::decision::Layer;
use crate::policy::fsview::MemFs;
use crate::policy::merge::{layer, Context};
use crate::policy::settings::{FilesystemSettings, SandboxSettings, WardenSettings};

fn fs() -> MemFs {
    let mut fs = MemFs::new();
    fs.dir("/w/src")
        .file("/w/.bashrc", "")
        .dir("/w/.git/hooks")
        .file("/w/.git/config", "")
        .dir("/w/.git/objects")
        .file("/w/sub/deeper/.mcp.json", "")
        .file("/w/a/b/c/d/.zshrc", "")
        .dir("/w/node_modules/x/.claude")
        .dir("/w/secrets")
        .file("/w/.env", "")
        .dir("/home/u/.ssh")
        .file("/home/u/.ssh/known_hosts", "")
        .file("/home/u/.netrc", "")
        .dir("/data")
        .symlink("/w/datalink", "/data")
        .dir("/run/warden-1/root")
        .dir("/run/warden-1/tmp");
    fs
}

fn plan_for(settings: SandboxSettings, fs: &MemFs) -> Result<Plan, PlanError> {
    let mut c = ctx("/w", "/home/u");
    c.tmpdir = Some("/run/warden-1/tmp".into());
    try_plan_with(c, settings, fs)
}

fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

#[test]
fn root_proc_dev_come_first_then_writable_roots() {
    let fs = fs();
    let plan = plan_for(SandboxSettings::default(), &fs).unwrap();
    assert_eq!(
        &plan.mounts[..5],
        &[
            MountOp::RootReadOnly,
            MountOp::Proc,
            MountOp::Dev,
            MountOp::Writable { path: p("/w") },
            MountOp::WritableAt {
                src: p("/run/warden-1/tmp"),
                dst: p("/run/warden-1/tmp")
            },
        ]
    );
    assert_eq!(plan.cwd, p("/w"));
    assert_eq!(
        plan.hardening.landlock_writable,
        vec![p("/w"), p("/run/warden-1/tmp")]
    );
}

#[test]
fn existing_protected_paths_become_read_only_within_the_search_depth() {
    let fs = fs();
    let plan = plan_for(SandboxSettings::default(), &fs).unwrap();
    let ro: Vec<&Path> = plan
        .mounts
        .iter()
        .filter_map(|m| match m {
            MountOp::ReadOnly { path } => Some(path.as_path()),
            _ => None,
        })
        .collect();
    assert!(ro.contains(&Path::new("/w/.bashrc")), "{ro:?}");
    assert!(ro.contains(&Path::new("/w/.git/hooks")), "{ro:?}");
    assert!(ro.contains(&Path::new("/w/.git/config")), "{ro:?}");
    assert!(ro.contains(&Path::new("/w/sub/deeper/.mcp.json")), "{ro:?}");
    // Beyond the default depth of 3, and inside node_modules: not searched.
    assert!(!ro.contains(&Path::new("/w/a/b/c/d/.zshrc")), "{ro:?}");
    assert!(
        !ro.iter().any(|p| p.starts_with("/w/node_modules")),
        "{ro:?}"
    );
    assert!(!ro.contains(&Path::new("/w/.git/objects")));
}

#[test]
fn deny_write_and_deny_read_and_allow_read() {
    let fs = fs();
    let plan = plan_for(
        SandboxSettings {
            filesystem: Some(FilesystemSettings {
                deny_write: Some(vec!["secrets".into(), ".env".into(), "/etc".into()]),
                deny_read: Some(vec![
                    "~/.ssh".into(),
                    "~/.netrc".into(),
                    "/nonexistent".into(),
                ]),
                allow_read: Some(vec!["~/.ssh/known_hosts".into()]),
                allow_git_config: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        },
        &fs,
    )
    .unwrap();
    let m = &plan.mounts;
    assert!(m.contains(&MountOp::ReadOnly {
        path: p("/w/secrets")
    }));
    assert!(m.contains(&MountOp::ReadOnly { path: p("/w/.env") }));
    // Outside every writable root a denyWrite needs no mount (the root is read-only).
    assert!(!m.contains(&MountOp::ReadOnly { path: p("/etc") }));
    assert!(
        !m.contains(&MountOp::ReadOnly {
            path: p("/w/.git/config")
        }),
        "allowGitConfig"
    );
    assert!(m.contains(&MountOp::MaskDir {
        path: p("/home/u/.ssh")
    }));
    assert!(m.contains(&MountOp::MaskFile {
        path: p("/home/u/.netrc")
    }));
    assert!(m.contains(&MountOp::Expose {
        path: p("/home/u/.ssh/known_hosts"),
        dir: false
    }));
    let mask = m
        .iter()
        .position(|x| matches!(x, MountOp::MaskDir { .. }))
        .unwrap();
    let expose = m
        .iter()
        .position(|x| matches!(x, MountOp::Expose { .. }))
        .unwrap();
    assert!(mask < expose);
}

#[test]
fn read_only_mode_has_no_writable_mounts() {
    let fs = fs();
    let plan = plan_for(
        SandboxSettings {
            warden: Some(WardenSettings {
                read_only: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        },
        &fs,
    )
    .unwrap();
    assert!(!plan
        .mounts
        .iter()
        .any(|m| matches!(m, MountOp::Writable { .. } | MountOp::WritableAt { .. })));
    assert!(plan.hardening.landlock_writable.is_empty());
}

#[test]
fn allow_write_symlink_that_escapes_is_refused() {
    let fs = fs();
    let e = plan_for(
        SandboxSettings {
            filesystem: Some(FilesystemSettings {
                allow_write: Some(vec!["/w/datalink".into()]),
                ..Default::default()
            }),
            ..Default::default()
        },
        &fs,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "allowWrite entry \"/w/datalink\" resolves to /data, outside of what it names; refusing to make it writable"
    );
}

#[test]
fn deny_read_globs_mask_every_existing_match() {
    let mut fs = fs();
    fs.file("/w/keys/a.pem", "")
        .file("/w/keys/deep/b.pem", "")
        .file("/w/notes.txt", "")
        .symlink("/w/link.pem", "/w/notes.txt");
    let plan = plan_for(
        SandboxSettings {
            filesystem: Some(FilesystemSettings {
                deny_read: Some(vec!["**/*.pem".into(), "/w/secrets*".into()]),
                ..Default::default()
            }),
            ..Default::default()
        },
        &fs,
    )
    .unwrap();
    assert!(plan.mounts.contains(&MountOp::MaskFile {
        path: p("/w/keys/a.pem")
    }));
    assert!(plan.mounts.contains(&MountOp::MaskFile {
        path: p("/w/keys/deep/b.pem")
    }));
    assert!(plan.mounts.contains(&MountOp::MaskDir {
        path: p("/w/secrets")
    }));
    // A symlink that matches is not followed to mask its target.
    assert!(!plan
        .mounts
        .iter()
        .any(|m| matches!(m, MountOp::MaskFile { path } if path == &p("/w/notes.txt"))));
}

#[test]
fn write_globs_apply_to_existing_matches() {
    let mut fs = fs();
    fs.dir("/w/build/out")
        .file("/w/src/.env.local", "")
        .dir("/data/cache-1")
        .dir("/data/cache-2");
    let plan = plan_for(
        SandboxSettings {
            filesystem: Some(FilesystemSettings {
                allow_write: Some(vec!["/data/cache-*".into()]),
                deny_write: Some(vec!["**/.env*".into()]),
                ..Default::default()
            }),
            ..Default::default()
        },
        &fs,
    )
    .unwrap();
    for w in ["/data/cache-1", "/data/cache-2"] {
        assert!(
            plan.mounts.contains(&MountOp::Writable { path: p(w) }),
            "{w}"
        );
        assert!(plan.hardening.landlock_writable.contains(&p(w)), "{w}");
    }
    for ro in ["/w/.env", "/w/src/.env.local"] {
        assert!(
            plan.mounts.contains(&MountOp::ReadOnly { path: p(ro) }),
            "{ro}: {:#?}",
            plan.mounts
        );
    }
}

#[test]
fn a_glob_too_broad_to_apply_fails_the_plan() {
    let mut fs = MemFs::new();
    fs.dir("/w")
        .dir("/run/warden-1/root")
        .dir("/run/warden-1/tmp");
    for i in 0..(GLOB_VISIT_LIMIT / 100 + 1) {
        for j in 0..100 {
            fs.file(format!("/big/d{i}/f{j}"), "");
        }
    }
    let e = plan_for(
        SandboxSettings {
            filesystem: Some(FilesystemSettings {
                deny_read: Some(vec!["/big/**/*.key".into()]),
                ..Default::default()
            }),
            ..Default::default()
        },
        &fs,
    )
    .unwrap_err();
    assert!(e.to_string().contains("matches too much"), "{e}");
}

#[test]
fn plan_round_trips_through_json() {
    let fs = fs();
    let plan = plan_for(SandboxSettings::default(), &fs).unwrap();
    let json = serde_json::to_vec(&plan).unwrap();
    let back: Plan = serde_json::from_slice(&json).unwrap();
    assert_eq!(plan, back);
}

#[test]
fn missing_protected_entries_get_placeholders() {
    let mut fs = fs();
    fs.dir("/w/.vscode");
    let plan = plan_for(SandboxSettings::default(), &fs).unwrap();
    let ph: Vec<(&Path, bool)> = plan
        .placeholders
        .iter()
        .map(|p| (p.path.as_path(), p.dir))
        .collect();
    assert!(ph.contains(&(Path::new("/w/.claude"), true)), "{ph:?}");
    assert!(ph.contains(&(Path::new("/w/.warden"), true)), "{ph:?}");
    // Existing ones are candidates too (another sandbox's placeholder looks just like a user's
    // directory to the plan; holding tells them apart), and read-only.
    assert!(ph.iter().any(|(p, _)| p.ends_with(".git/hooks")), "{ph:?}");
    assert!(ph.iter().any(|(p, _)| p.ends_with(".vscode")), "{ph:?}");
    assert!(plan.mounts.contains(&MountOp::ReadOnly {
        path: p("/w/.vscode")
    }));
    // Not a home directory: no rc files, no .ssh.
    assert!(
        !ph.iter()
            .any(|(p, _)| p.ends_with(".bashrc") || p.ends_with(".ssh")),
        "{ph:?}"
    );
    for (path, _) in &ph {
        assert!(
            plan.mounts.contains(&MountOp::ReadOnly {
                path: path.to_path_buf()
            }),
            "{path:?}"
        );
    }
}

#[test]
fn a_writable_home_gets_rc_file_placeholders() {
    let mut fs = fs();
    fs.file("/home/u/.profile", "");
    let plan = plan_with(ctx("/home/u", "/home/u"), SandboxSettings::default(), &fs);
    let ph: Vec<&Path> = plan.placeholders.iter().map(|p| p.path.as_path()).collect();
    assert!(ph.contains(&Path::new("/home/u/.bashrc")), "{ph:?}");
    assert!(ph.contains(&Path::new("/home/u/.zshrc")), "{ph:?}");
    // Existing ones are candidates as well (held only if they carry the placeholder mark).
    assert!(ph.contains(&Path::new("/home/u/.profile")), "{ph:?}");
    assert!(ph.contains(&Path::new("/home/u/.ssh")), "{ph:?}");
}

fn try_plan_with(ctx: Context, settings: SandboxSettings, fs: &MemFs) -> Result<Plan, PlanError> {
    let policy = Policy::build(&[layer(Layer::User, 0, "u.json", settings)], ctx, fs).unwrap();
    build(
        PlanInput {
            policy: &policy,
            argv: vec![b"true".to_vec()],
            env: vec![],
            dirs: RunDirs {
                root: "/run/warden-1/root".into(),
                tmpdir: "/run/warden-1/tmp".into(),
            },
            network: None,
        },
        fs,
    )
}

fn plan_with(ctx: Context, settings: SandboxSettings, fs: &MemFs) -> Plan {
    try_plan_with(ctx, settings, fs).unwrap()
}

fn pins_of(plan: &Plan) -> Vec<PathBuf> {
    plan.mounts
        .iter()
        .filter_map(|m| match m {
            MountOp::Pin { path } => Some(path.clone()),
            _ => None,
        })
        .collect()
}

fn ctx(cwd: &str, home: &str) -> Context {
    Context {
        cwd: cwd.into(),
        home: home.into(),
        tmpdir: None,
        approver_attached: false,
        protected: Vec::new(),
    }
}

#[test]
fn every_directory_between_a_root_and_a_protection_is_pinned_first() {
    let mut fs = fs();
    fs.file("/w/conf/app/secret.key", "k");
    let settings: SandboxSettings = serde_json::from_str(
        r#"{"filesystem":{"denyRead":["/w/conf/app/secret.key"],"denyWrite":["/w/secrets"]}}"#,
    )
    .unwrap();
    let plan = plan_for(settings, &fs).unwrap();
    let pins = pins_of(&plan);
    // .git/hooks and .git/config: .git; sub/deeper/.mcp.json: sub and sub/deeper; the denyRead
    // file: conf and conf/app. Not the roots themselves, not the protected entries.
    for want in [
        "/w/.git",
        "/w/sub",
        "/w/sub/deeper",
        "/w/conf",
        "/w/conf/app",
    ] {
        assert!(pins.contains(&p(want)), "{want} not pinned: {pins:?}");
    }
    for not in [
        "/w",
        "/w/.git/hooks",
        "/w/secrets",
        "/w/conf/app/secret.key",
    ] {
        assert!(!pins.contains(&p(not)), "{not} pinned: {pins:?}");
    }
    // Every pin precedes every read-only mount and mask (those land inside the pins).
    let last_pin = plan
        .mounts
        .iter()
        .rposition(|m| matches!(m, MountOp::Pin { .. }))
        .unwrap();
    let first_protection = plan
        .mounts
        .iter()
        .position(|m| {
            matches!(
                m,
                MountOp::ReadOnly { .. } | MountOp::MaskFile { .. } | MountOp::MaskDir { .. }
            )
        })
        .unwrap();
    assert!(last_pin < first_protection, "{:?}", plan.mounts);
    // Shallow before deep.
    let pos = |x: &str| pins.iter().position(|q| *q == p(x)).unwrap();
    assert!(pos("/w/sub") < pos("/w/sub/deeper"));
}

#[test]
fn a_missing_literal_deny_write_path_gets_a_placeholder_at_its_first_missing_component() {
    let fs = fs();
    let settings: SandboxSettings = serde_json::from_str(
        r#"{"filesystem":{"denyWrite":["/w/deploy.sh","/w/newdir/x/y","/w/src/gen/out.rs","/elsewhere/z"]}}"#,
    )
    .unwrap();
    let plan = plan_for(settings, &fs).unwrap();
    let ph: Vec<(PathBuf, bool)> = plan
        .placeholders
        .iter()
        .map(|x| (x.path.clone(), x.dir))
        .collect();
    assert!(ph.contains(&(p("/w/deploy.sh"), false)), "{ph:?}");
    assert!(ph.contains(&(p("/w/newdir"), true)), "{ph:?}");
    assert!(ph.contains(&(p("/w/src/gen"), true)), "{ph:?}");
    assert!(
        !ph.iter().any(|(x, _)| x.starts_with("/elsewhere")),
        "{ph:?}"
    );
    for x in ["/w/deploy.sh", "/w/newdir", "/w/src/gen"] {
        assert!(
            plan.mounts.contains(&MountOp::ReadOnly { path: p(x) }),
            "{x}"
        );
    }
    // /w/src holds a placeholder two levels down: pinned.
    assert!(pins_of(&plan).contains(&p("/w/src")));
}

#[test]
fn submodule_git_dirs_worktree_pointers_and_git_files_are_read_only() {
    let mut fs = fs();
    fs.file("/w/.git/modules/libs/foo/HEAD", "ref")
        .dir("/w/.git/modules/libs/foo/hooks")
        .file("/w/.git/modules/libs/foo/config", "")
        .dir("/w/.git/modules/libs/foo/objects")
        .file("/w/.git/modules/libs/foo/modules/inner/HEAD", "ref")
        .file("/w/.git/modules/libs/foo/modules/inner/config", "")
        .file("/w/.git/worktrees/wt2/commondir", "../..")
        .file("/w/.git/worktrees/wt2/gitdir", "/wt2/.git")
        .file("/w/.git/worktrees/wt2/HEAD", "ref")
        .file("/w/libs/foo/.git", "gitdir: ../../.git/modules/libs/foo");
    let plan = plan_for(SandboxSettings::default(), &fs).unwrap();
    for x in [
        "/w/.git/modules/libs/foo/hooks",
        "/w/.git/modules/libs/foo/config",
        "/w/.git/modules/libs/foo/modules/inner/config",
        "/w/.git/worktrees/wt2/commondir",
        "/w/.git/worktrees/wt2/gitdir",
        "/w/libs/foo/.git",
    ] {
        assert!(
            plan.mounts.contains(&MountOp::ReadOnly { path: p(x) }),
            "{x}"
        );
    }
    for x in [
        "/w/.git/modules/libs/foo/objects",
        "/w/.git/worktrees/wt2/HEAD",
    ] {
        assert!(
            !plan.mounts.contains(&MountOp::ReadOnly { path: p(x) }),
            "{x}"
        );
    }
    let pins = pins_of(&plan);
    assert!(pins.contains(&p("/w/.git/modules/libs/foo")), "{pins:?}");
    assert!(pins.contains(&p("/w/libs/foo")), "{pins:?}");
}

#[test]
fn a_home_reached_through_a_symlink_is_still_the_home() {
    let mut fs = fs();
    fs.symlink("/homelink", "/home/u");
    let plan = plan_with(ctx("/home/u", "/homelink"), SandboxSettings::default(), &fs);
    let ph: Vec<&Path> = plan.placeholders.iter().map(|x| x.path.as_path()).collect();
    for x in ["/home/u/.bashrc", "/home/u/.gitconfig", "/home/u/.ssh"] {
        assert!(ph.contains(&Path::new(x)), "{x}: {ph:?}");
    }
}

#[test]
fn configuration_protected_by_path_is_read_only_or_a_placeholder_inside_a_writable_root() {
    use crate::policy::mandatory::ConfigPath;
    let mut fs = fs();
    fs.dir("/home/u/.config/git")
        .file("/home/u/.config/git/config", "");
    let mut c = ctx("/home/u", "/home/u");
    c.protected = vec![
        ConfigPath {
            path: p("/home/u/.config/warden"),
            dir: true,
            what: "warden user settings",
        },
        ConfigPath {
            path: p("/home/u/.config/git"),
            dir: true,
            what: "git user configuration",
        },
        ConfigPath {
            path: p("/etc/warden/managed-settings.json"),
            dir: false,
            what: "warden managed settings",
        },
    ];
    let plan = plan_with(c, SandboxSettings::default(), &fs);
    // Missing below an existing parent: a placeholder directory; existing: read-only.
    assert!(plan
        .placeholders
        .iter()
        .any(|x| x.path == p("/home/u/.config/warden") && x.dir));
    assert!(plan.mounts.contains(&MountOp::ReadOnly {
        path: p("/home/u/.config/git")
    }));
    assert!(pins_of(&plan).contains(&p("/home/u/.config")));
    // Outside every writable root: nothing to do (the host is read-only there).
    assert!(!plan.placeholders.iter().any(|x| x.path.starts_with("/etc")));
    // No pool among the protected paths: none used.
    assert_eq!(plan.placeholder_pool, None);
}

#[test]
fn a_writable_root_inside_protected_configuration_is_read_only_as_a_whole() {
    use crate::policy::mandatory::ConfigPath;
    let mut fs = fs();
    fs.dir("/home/u/.cache/warden/placeholders/d-1")
        .dir("/home/u/.config/git/hooks")
        .dir("/w");
    let mut c = ctx("/w", "/home/u");
    c.protected = vec![
        ConfigPath {
            path: p("/home/u/.cache/warden/placeholders"),
            dir: true,
            what: "warden placeholder pool",
        },
        ConfigPath {
            path: p("/home/u/.config/git"),
            dir: true,
            what: "git user configuration",
        },
    ];
    let settings: SandboxSettings = serde_json::from_str(
        r#"{"filesystem":{"allowWrite":[
            "/home/u/.cache/warden/placeholders/d-1",
            "/home/u/.config/git/hooks"
        ]}}"#,
    )
    .unwrap();
    let plan = plan_with(c, settings, &fs);
    assert_eq!(
        plan.placeholder_pool,
        Some(p("/home/u/.cache/warden/placeholders"))
    );
    for root in [
        "/home/u/.cache/warden/placeholders/d-1",
        "/home/u/.config/git/hooks",
    ] {
        assert!(
            plan.mounts.contains(&MountOp::ReadOnly { path: p(root) }),
            "{root} stays writable: {:?}",
            plan.mounts
        );
    }
}

#[test]
fn a_root_nested_in_another_has_its_parents_in_the_outer_root_pinned() {
    let mut fs = fs();
    fs.dir("/w/x/inner/repo/.git/hooks").dir("/ws/grp/proj");
    let settings: SandboxSettings =
        serde_json::from_str(r#"{"filesystem":{"allowWrite":["/w/x/inner"]}}"#).unwrap();
    let plan = plan_for(settings, &fs).unwrap();
    let pins = pins_of(&plan);
    // /w/x/inner is a root (a mount point); /w/x, its parent inside /w, is not.
    assert!(pins.contains(&p("/w/x")), "{pins:?}");
    assert!(!pins.contains(&p("/w/x/inner")), "{pins:?}");
    assert!(pins.contains(&p("/w/x/inner/repo")), "{pins:?}");
    // The working directory below an allowWrite parent.
    let settings: SandboxSettings =
        serde_json::from_str(r#"{"filesystem":{"allowWrite":["/ws"]}}"#).unwrap();
    let plan = plan_with(ctx("/ws/grp/proj", "/home/u"), settings, &fs);
    assert!(
        pins_of(&plan).contains(&p("/ws/grp")),
        "{:?}",
        pins_of(&plan)
    );
}

#[test]
fn a_submodule_checkout_deeper_than_the_search_keeps_its_git_file_read_only() {
    let mut fs = fs();
    fs.file("/w/.git/modules/a/b/HEAD", "ref")
        .file(
            "/w/.git/modules/a/b/config",
            "[core]\n\tworktree = ../../../../third_party/org/lib/inner\n",
        )
        .file(
            "/w/third_party/org/lib/inner/.git",
            "gitdir: ../../../../.git/modules/a/b",
        );
    let plan = plan_for(SandboxSettings::default(), &fs).unwrap();
    assert!(plan.mounts.contains(&MountOp::ReadOnly {
        path: p("/w/third_party/org/lib/inner/.git")
    }));
}

#[test]
fn git_dirs_without_a_commondir_have_it_forbidden() {
    let mut fs = fs();
    fs.file("/w/.git/HEAD", "ref")
        .file("/w/.git/modules/m/HEAD", "ref")
        .file("/w/.git/modules/m/config", "")
        .file("/w/.git/worktrees/wt/HEAD", "ref")
        .file("/w/.git/worktrees/wt/commondir", "../..");
    let plan = plan_for(SandboxSettings::default(), &fs).unwrap();
    assert_eq!(
        plan.forbidden,
        vec![p("/w/.git/commondir"), p("/w/.git/modules/m/commondir")]
    );
}

#[test]
fn missing_protected_files_in_writable_roots_are_watched_existing_ones_read_only() {
    let mut fs = fs();
    fs.file("/w/.mcp.json", "{}");
    let plan = plan_for(SandboxSettings::default(), &fs).unwrap();
    assert!(plan.mounts.contains(&MountOp::ReadOnly {
        path: p("/w/.mcp.json")
    }));
    assert!(!plan.missing_protected.contains(&p("/w/.mcp.json")));
    for name in ["opencode.json", ".pre-commit-config.yaml", ".gitmodules"] {
        assert!(
            plan.missing_protected.contains(&p("/w").join(name)),
            "{name}"
        );
    }
    // Only where the placeholders are not (a home's rc files get those).
    for m in &plan.missing_protected {
        assert!(!plan.placeholders.iter().any(|ph| ph.path == *m), "{m:?}");
    }
}

#[test]
fn a_home_inside_a_writable_root_gets_its_placeholders_too() {
    let mut fs = fs();
    fs.dir("/w/people/u");
    let plan = plan_with(ctx("/w", "/w/people/u"), SandboxSettings::default(), &fs);
    let ph: Vec<&Path> = plan.placeholders.iter().map(|x| x.path.as_path()).collect();
    for x in [
        "/w/people/u/.bashrc",
        "/w/people/u/.profile",
        "/w/people/u/.ssh",
        "/w/people/u/.gitconfig",
    ] {
        assert!(ph.contains(&Path::new(x)), "{x}: {ph:?}");
    }
    assert!(pins_of(&plan).contains(&p("/w/people/u")));
}

#[test]
fn repositories_below_the_root_keep_their_named_hooks_and_worktree_git_files() {
    let mut fs = fs();
    fs.file("/w/ws/repo-a/.git/HEAD", "ref")
        .file(
            "/w/ws/repo-a/.git/config",
            "[core]\n\thooksPath = .githooks\n",
        )
        .dir("/w/ws/repo-a/.githooks")
        .file("/w/.git/HEAD", "ref")
        .file(
            "/w/.git/worktrees/login/gitdir",
            "/w/wt/team/feature/login/.git\n",
        )
        .file("/w/.git/worktrees/login/HEAD", "ref")
        .file(
            "/w/wt/team/feature/login/.git",
            "gitdir: /w/.git/worktrees/login",
        );
    let plan = plan_for(SandboxSettings::default(), &fs).unwrap();
    for x in ["/w/ws/repo-a/.githooks", "/w/wt/team/feature/login/.git"] {
        assert!(
            plan.mounts.contains(&MountOp::ReadOnly { path: p(x) }),
            "{x}"
        );
    }
}

#[test]
fn a_missing_deny_read_path_in_a_root_gets_a_masked_placeholder_and_elsewhere_waits() {
    let fs = fs();
    let settings: SandboxSettings = serde_json::from_str(
        r#"{"filesystem":{"denyRead":["/w/.env.local","/w/sec/token","/home/u/.aws"]}}"#,
    )
    .unwrap();
    let plan = plan_for(settings, &fs).unwrap();
    assert!(plan.mounts.contains(&MountOp::MaskEmpty {
        path: p("/w/.env.local")
    }));
    assert!(plan
        .mounts
        .contains(&MountOp::MaskDir { path: p("/w/sec") }));
    let ph: Vec<(PathBuf, bool)> = plan
        .placeholders
        .iter()
        .map(|x| (x.path.clone(), x.dir))
        .collect();
    assert!(ph.contains(&(p("/w/.env.local"), false)), "{ph:?}");
    assert!(ph.contains(&(p("/w/sec"), true)), "{ph:?}");
    assert_eq!(plan.mask_later, vec![p("/home/u/.aws")]);
}

#[test]
fn deny_read_entries_nested_symlinked_or_shared_with_another_sandbox() {
    let mut fs = fs();
    fs.file("/w/.env", "SECRET")
        .dir("/shared")
        .symlink("/w/conf", "/shared");
    // Nested missing entries: one mask, no failing second one inside it.
    let settings: SandboxSettings = serde_json::from_str(
        r#"{"filesystem":{"denyRead":["/w/.aws","/w/.aws/credentials","/w/.env"]}}"#,
    )
    .unwrap();
    let plan = plan_for(settings, &fs).unwrap();
    let masks: Vec<&MountOp> = plan
        .mounts
        .iter()
        .filter(|m| {
            matches!(
                m,
                MountOp::MaskDir { .. } | MountOp::MaskFile { .. } | MountOp::MaskEmpty { .. }
            )
        })
        .collect();
    assert_eq!(masks.len(), 2, "{masks:?}");
    // An existing one in a writable root is a placeholder candidate (held if it is another
    // sandbox's placeholder).
    assert!(plan
        .placeholders
        .iter()
        .any(|x| x.path == p("/w/.env") && !x.dir));
    // Through a symlink the sandbox could repoint: refused.
    let settings: SandboxSettings =
        serde_json::from_str(r#"{"filesystem":{"denyRead":["/w/conf/key"]}}"#).unwrap();
    let err = plan_for(settings, &fs).unwrap_err();
    assert!(
        matches!(err, PlanError::DenyReadThroughWritableLink { .. }),
        "{err}"
    );
}

fn allow_write(paths: &[&str]) -> SandboxSettings {
    serde_json::from_value(serde_json::json!({
        "filesystem": { "allowWrite": paths }
    }))
    .unwrap()
}

fn read_only_of(plan: &Plan) -> Vec<PathBuf> {
    plan.mounts
        .iter()
        .filter_map(|m| match m {
            MountOp::ReadOnly { path } => Some(path.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_writable_root_that_is_a_git_dir_or_a_bare_repository_keeps_hooks_and_config_read_only() {
    let mut fs = fs();
    fs.dir("/m/.git/hooks")
        .file("/m/.git/HEAD", "ref: refs/heads/main\n")
        .file("/m/.git/config", "")
        .dir("/m/.git/objects")
        .dir("/m/.git/refs")
        .dir("/m/sub")
        .file("/srv/x.git/HEAD", "ref: refs/heads/main\n")
        .file("/srv/x.git/config", "[core]\n\tbare = true\n")
        .dir("/srv/x.git/objects")
        .dir("/srv/x.git/refs")
        .dir("/srv/y.git/objects")
        .file("/srv/y.git/HEAD", "")
        .file("/srv/y.git/config", "")
        .dir("/srv/y.git/refs")
        .dir("/srv/y.git/hooks");
    let plan = plan_with(
        ctx("/m/sub", "/home/u"),
        allow_write(&["/m/.git", "/srv/x.git", "/srv/y.git/hooks"]),
        &fs,
    );
    let ro = read_only_of(&plan);
    for p in [
        "/m/.git/hooks",
        "/m/.git/config",
        "/srv/x.git/config",
        // Inside a protected entry: the whole root stays read-only.
        "/srv/y.git/hooks",
    ] {
        assert!(ro.contains(&PathBuf::from(p)), "{p} not read-only: {ro:?}");
    }
    // The bare repository has no hooks directory: reserved by a placeholder.
    let ph: Vec<&Path> = plan.placeholders.iter().map(|p| p.path.as_path()).collect();
    assert!(ph.contains(&Path::new("/srv/x.git/hooks")), "{ph:?}");
    assert!(ro.contains(&PathBuf::from("/srv/x.git/hooks")), "{ro:?}");
}

#[test]
fn a_submodule_git_dir_without_hooks_gets_a_placeholder() {
    let mut fs = fs();
    fs.file("/w/.git/modules/lib/HEAD", "")
        .file("/w/.git/modules/lib/config", "")
        .dir("/w/.git/modules/lib/objects");
    let plan = plan_for(SandboxSettings::default(), &fs).unwrap();
    let ph: Vec<&Path> = plan.placeholders.iter().map(|p| p.path.as_path()).collect();
    assert!(
        ph.contains(&Path::new("/w/.git/modules/lib/hooks")),
        "{ph:?}"
    );
    let ro = read_only_of(&plan);
    assert!(
        ro.contains(&PathBuf::from("/w/.git/modules/lib/hooks")),
        "{ro:?}"
    );
}

#[test]
fn a_bare_repository_inside_a_writable_root_keeps_hooks_and_config_read_only() {
    let mut fs = fs();
    fs.file("/w/remote.git/HEAD", "ref: refs/heads/main\n")
        .file("/w/remote.git/config", "[core]\n\tbare = true\n")
        .dir("/w/remote.git/hooks")
        .dir("/w/remote.git/objects")
        .dir("/w/remote.git/refs");
    let plan = plan_for(SandboxSettings::default(), &fs).unwrap();
    let ro = read_only_of(&plan);
    for p in ["/w/remote.git/hooks", "/w/remote.git/config"] {
        assert!(ro.contains(&PathBuf::from(p)), "{p}: {ro:?}");
    }
}

#[test]
fn allow_write_through_a_system_alias_is_made_writable() {
    let mut fs = fs();
    fs.dir("/run/user/1000/cache").symlink("/var/run", "/run");
    let plan = plan_for(
        SandboxSettings {
            filesystem: Some(FilesystemSettings {
                allow_write: Some(vec!["/var/run/user/1000/cache".into()]),
                ..Default::default()
            }),
            ..Default::default()
        },
        &fs,
    )
    .unwrap();
    assert!(plan
        .hardening
        .landlock_writable
        .contains(&p("/run/user/1000/cache")));
}

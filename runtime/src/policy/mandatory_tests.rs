use super::*;
use crate::policy::fsview::MemFs;

fn hit(m: &Mandatory, p: &str) -> Option<String> {
    m.check(Path::new(p)).map(|h| h.entry)
}

#[test]
fn rc_files_and_agent_dirs_are_protected_anywhere() {
    let m = Mandatory::default();
    assert_eq!(hit(&m, "/home/u/.bashrc").as_deref(), Some(".bashrc"));
    assert_eq!(hit(&m, "/w/sub/.zshrc").as_deref(), Some(".zshrc"));
    assert_eq!(
        hit(&m, "/w/.claude/settings.json").as_deref(),
        Some(".claude/**")
    );
    assert_eq!(hit(&m, "/w/.claude").as_deref(), Some(".claude/**"));
    assert_eq!(
        hit(&m, "/home/u/.ssh/authorized_keys").as_deref(),
        Some(".ssh/**")
    );
    assert_eq!(
        hit(&m, "/w/.warden/settings.json").as_deref(),
        Some(".warden/**")
    );
    assert_eq!(
        hit(&m, "/Users/u/Library/LaunchAgents/x.plist").as_deref(),
        Some("LaunchAgents/**")
    );
    assert_eq!(hit(&m, "/w/.mcp.json").as_deref(), Some(".mcp.json"));
}

#[test]
fn similar_names_are_not_protected() {
    let m = Mandatory::default();
    for p in [
        "/w/bashrc",
        "/w/.bashrc.bak",
        "/w/x.profile",
        "/w/.sshx/key",
        "/w/.claudeignore",
        "/w/src/hooks/x",
        "/w/git/hooks/x",
        "/w/.github/hooks/x",
    ] {
        assert_eq!(hit(&m, p), None, "{p}");
    }
}

#[test]
fn git_hooks_and_config_but_not_objects() {
    let m = Mandatory::default();
    assert_eq!(
        hit(&m, "/w/.git/hooks/pre-commit").as_deref(),
        Some(".git/hooks/**")
    );
    assert_eq!(hit(&m, "/w/.git/hooks").as_deref(), Some(".git/hooks/**"));
    assert!(hit(&m, "/w/.git/config")
        .unwrap()
        .starts_with(".git/config"));
    assert!(hit(&m, "/w/.git/config.worktree").is_some());
    assert_eq!(hit(&m, "/w/.git/objects/ab/cdef"), None);
    assert_eq!(hit(&m, "/w/.git/refs/heads/main"), None);
    assert_eq!(hit(&m, "/w/.git/index"), None);
    assert_eq!(hit(&m, "/w/.git/HEAD"), None);
    assert_eq!(hit(&m, "/w/.git/modules/sub/objects/x"), None);
}

#[test]
fn allow_git_config_releases_config_only() {
    let m = Mandatory {
        allow_git_config: true,
        ..Default::default()
    };
    assert_eq!(hit(&m, "/w/.git/config"), None);
    assert!(hit(&m, "/w/.git/hooks/post-checkout").is_some());
}

#[test]
fn worktree_git_file_is_followed_to_real_and_common_dir() {
    let mut fs = MemFs::new();
    fs.file("/wt/.git", "gitdir: /repo/.git/worktrees/wt\n")
        .file("/repo/.git/worktrees/wt/commondir", "../..\n")
        .dir("/wt/src");
    let m = Mandatory::discover(&fs, Path::new("/wt/src"), None, false, Vec::new());
    assert_eq!(
        m.extra_git_dirs,
        vec![
            PathBuf::from("/repo/.git"),
            PathBuf::from("/repo/.git/worktrees/wt")
        ]
    );
    assert!(hit(&m, "/repo/.git/worktrees/wt/config.worktree").is_some());
    assert!(hit(&m, "/repo/.git/hooks/pre-commit").is_some());
    assert_eq!(hit(&m, "/repo/.git/worktrees/wt/HEAD"), None);
}

#[test]
fn separate_git_dir_with_any_name_is_protected() {
    let mut fs = MemFs::new();
    fs.file("/w/.git", "gitdir: ../store/w.gitdir")
        .dir("/store/w.gitdir");
    let m = Mandatory::discover(&fs, Path::new("/w"), None, false, Vec::new());
    assert_eq!(
        hit(&m, "/store/w.gitdir/hooks/pre-push").as_deref(),
        Some("/store/w.gitdir/hooks/**")
    );
    assert!(hit(&m, "/store/w.gitdir/config").is_some());
    assert_eq!(hit(&m, "/store/w.gitdir/objects/x"), None);
    assert_eq!(hit(&m, "/store/w.gitdirx/hooks/x"), None);
}

#[test]
fn submodule_git_dirs_and_worktree_pointers_are_protected() {
    let m = Mandatory::default();
    for p in [
        "/w/.git/modules/libsub/hooks/pre-commit",
        "/w/.git/modules/libs/foo/hooks/post-checkout",
        "/w/.git/modules/a/modules/b/hooks",
        "/w/.git/modules/libsub/config",
        "/w/.git/modules/libs/foo/config",
        "/w/.git/worktrees/wt2/commondir",
        "/w/.git/worktrees/wt2/gitdir",
        "/w/.git/worktrees/wt2/config.worktree",
        "/repo/.git/worktrees/wt/gitdir",
    ] {
        assert!(hit(&m, p).is_some(), "{p} must be protected");
    }
    for p in [
        "/w/.git/modules/libsub/objects/ab/cd",
        "/w/.git/modules/libsub/HEAD",
        "/w/.git/modules/config",
        "/w/.git/worktrees/wt2/HEAD",
        "/w/.git/worktrees/wt2/index",
    ] {
        assert_eq!(hit(&m, p), None, "{p} is ordinary git state");
    }
    let released = Mandatory {
        allow_git_config: true,
        ..Default::default()
    };
    assert_eq!(hit(&released, "/w/.git/modules/libsub/config"), None);
    assert!(hit(&released, "/w/.git/modules/libsub/hooks/x").is_some());
}

#[test]
fn configuration_protected_by_absolute_path() {
    let m = Mandatory {
        config: vec![
            ConfigPath {
                path: PathBuf::from("/home/u/.config/warden"),
                dir: true,
                what: "warden user settings",
            },
            ConfigPath {
                path: PathBuf::from("/w/sandbox.json"),
                dir: false,
                what: "warden settings file",
            },
        ],
        ..Default::default()
    };
    assert_eq!(
        hit(&m, "/home/u/.config/warden/settings.json").as_deref(),
        Some("/home/u/.config/warden/** (warden user settings)")
    );
    assert!(hit(&m, "/home/u/.config/warden").is_some());
    assert!(hit(&m, "/w/sandbox.json").is_some());
    assert_eq!(hit(&m, "/w/sandbox.json.bak"), None);
    assert_eq!(hit(&m, "/w/sandbox.json/x"), None);
    assert_eq!(hit(&m, "/home/u/.config/wardenx"), None);
}

#[test]
fn hooks_path_and_included_config_named_by_the_repository_are_protected() {
    let mut fs = MemFs::new();
    fs.file(
        "/w/.git/config",
        "[core]\n\trepositoryformatversion = 0\n\thooksPath = .githooks\n[include]\n\tpath = ../tools/gitconfig\n[includeIf \"gitdir:/w/\"]\n\tpath = \"/etc/team.gitconfig\"\n[alias]\n\tpath = not-a-path\n",
    )
    .dir("/w/src");
    let m = Mandatory::discover(&fs, Path::new("/w/src"), None, false, Vec::new());
    assert!(hit(&m, "/w/.githooks/pre-commit").is_some());
    assert!(hit(&m, "/w/.githooks").is_some());
    assert!(hit(&m, "/w/tools/gitconfig").is_some());
    assert!(hit(&m, "/etc/team.gitconfig").is_some());
    assert_eq!(hit(&m, "/w/tools/other"), None);
    assert_eq!(hit(&m, "/w/not-a-path"), None);
    assert_eq!(hit(&m, "/w/src/main.rs"), None);
}

/// Red-team round 21: husky 9's `core.hooksPath = .husky/_` holds stubs that run
/// `.husky/<hook>`: the directory above is protected too. Hook managers' configs and other
/// tools' project config are protected by name.
#[test]
fn a_husky_hooks_path_protects_the_scripts_one_level_up_and_tool_configs_by_name() {
    let mut fs = MemFs::new();
    fs.file("/w/.git/config", "[core]\n\thooksPath = .husky/_\n")
        .dir("/w/src");
    let m = Mandatory::discover(&fs, Path::new("/w"), None, false, Vec::new());
    assert!(hit(&m, "/w/.husky/_/h").is_some());
    assert!(hit(&m, "/w/.husky/pre-commit").is_some());
    assert_eq!(hit(&m, "/w/src/pre-commit"), None);
    for p in [
        "/w/.pre-commit-config.yaml",
        "/w/lefthook.yml",
        "/w/.devcontainer.json",
        "/w/opencode.jsonc",
        "/w/.opencode/plugins/p.js",
        "/w/.qwen/settings.json",
        "/w/.aider.conf.yml",
        "/w/.kilocode/mcp.json",
    ] {
        assert!(hit(&m, p).is_some(), "{p}");
    }
    // A hooks path not named `_` protects itself only.
    let mut fs = MemFs::new();
    fs.file("/w/.git/config", "[core]\n\thooksPath = tools/hooks\n")
        .dir("/w/src");
    let m = Mandatory::discover(&fs, Path::new("/w"), None, false, Vec::new());
    assert!(hit(&m, "/w/tools/hooks/pre-commit").is_some());
    assert_eq!(hit(&m, "/w/tools/build.sh"), None);
}

#[test]
fn includes_are_followed_and_git_config_syntax_is_read_as_git_reads_it() {
    let mut fs = MemFs::new();
    fs.file(
        "/w/.git/config",
        "[include] path = ../conf/first.inc\n[include]\n\tpath = ../conf/b.inc ; team settings\n",
    )
    .file("/w/conf/first.inc", "[include]\n\tpath = second.inc\n")
    .file(
        "/w/conf/second.inc",
        "[core]\n\thooksPath = \"hooks dir\" # quoted\n",
    )
    .dir("/w/src");
    let m = Mandatory::discover(&fs, Path::new("/w"), None, false, Vec::new());
    for p in [
        "/w/conf/first.inc",
        "/w/conf/second.inc",
        "/w/conf/b.inc",
        "/w/hooks dir/pre-commit",
    ] {
        assert!(hit(&m, p).is_some(), "{p}");
    }
    assert_eq!(hit(&m, "/w/conf/b.inc ; team settings"), None);
    // The global config: `~/` against the home, relative hooks paths skipped.
    let mut fs = MemFs::new();
    fs.file(
        "/home/u/.gitconfig",
        "[include]\n\tpath = ~/.gitconfig.local\n[core]\n\thooksPath = ~/.githooks\n",
    );
    let mut out = Vec::new();
    config_file_paths(
        &fs,
        Path::new("/home/u/.gitconfig"),
        None,
        Some(Path::new("/home/u")),
        0,
        &mut out,
    );
    let paths: Vec<&Path> = out.iter().map(|c| c.path.as_path()).collect();
    assert_eq!(
        paths,
        [
            Path::new("/home/u/.gitconfig.local"),
            Path::new("/home/u/.githooks")
        ]
    );
}

/// Red-team round 22: `~` in a repository's own config (`core.hooksPath = ~/p/hooks`,
/// `include.path = ~/p/extra.cfg`, `includeIf`) is the home, as git expands it, and `~NAME`
/// that user's home; they were left writable.
#[test]
fn tilde_paths_in_a_repositorys_config_are_expanded_as_git_does() {
    let mut fs = MemFs::new();
    fs.file(
        "/home/u/p/.git/config",
        "[core]\n\thooksPath = ~//p//githooks\n[include]\n\tpath = ~/p/extra.cfg\n\
         [includeIf \"gitdir:~/\"]\n\tpath = ~bob/team.cfg\n[include]\n\tpath = ~\n",
    )
    .file(
        "/home/u/p/extra.cfg",
        "[core]\n\thooksPath = ~nobody-here/x\n",
    )
    .file(
        "/etc/passwd",
        "root:x:0:0:root:/root:/bin/bash\nbob:x:1001:1001::/srv/bob:/bin/sh\n",
    )
    .dir("/home/u/p/src");
    let m = Mandatory::discover(
        &fs,
        Path::new("/home/u/p"),
        Some(Path::new("/home/u")),
        false,
        Vec::new(),
    );
    for p in [
        "/home/u/p/githooks/pre-commit",
        "/home/u/p/extra.cfg",
        "/srv/bob/team.cfg",
    ] {
        assert!(hit(&m, p).is_some(), "{p}");
    }
    assert_eq!(hit(&m, "/home/u/p/src/main.rs"), None);
    // Without a home, `~` paths name nothing (never the literal `~` directory).
    let m = Mandatory::discover(&fs, Path::new("/home/u/p"), None, false, Vec::new());
    assert!(hit(&m, "/home/u/p/githooks/pre-commit").is_none());
    assert!(hit(&m, "/srv/bob/team.cfg").is_some());
}

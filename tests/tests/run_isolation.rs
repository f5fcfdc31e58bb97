//! `warden run` against the real binary: every rule checked from the host side (file
//! contents and hashes unchanged, secret bytes absent from the output), plus exit codes,
//! signals, stdin and teardown. CI runs these as root.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use warden_tests::{Output, TestEnv};

/// `warden run [extra...] -- sh -c SCRIPT` in the env's project directory. Run directories go
/// below the env's root (TMPDIR of the warden process) so each test can check its own.
fn sh(env: &TestEnv, extra: &[&str], script: &str) -> Output {
    let mut args: Vec<String> = vec!["run".into()];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(["--".into(), "sh".into(), "-c".into(), script.into()]);
    let out = env
        .command()
        .args(&args)
        .env("TMPDIR", run_base(env))
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running warden {args:?}: {e}"));
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn run_base(env: &TestEnv) -> PathBuf {
    let p = env.root().join("runs");
    std::fs::create_dir_all(&p).unwrap();
    p
}

fn write(path: &Path, content: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, content).unwrap();
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn assert_nothing_left(env: &TestEnv) {
    let left: Vec<_> = std::fs::read_dir(run_base(env))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "run directories left behind: {left:?}");
}

#[test]
fn exit_codes_pass_through() {
    let env = TestEnv::new();
    assert_eq!(sh(&env, &[], "exit 7").code, 7);
    assert_eq!(sh(&env, &[], "exit 0").code, 0);
    assert_eq!(sh(&env, &[], "kill -9 $$").code, 128 + 9);
    let out = env
        .command()
        .args(["run", "--", "/nonexistent/prog"])
        .env("TMPDIR", run_base(&env))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(127),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_nothing_left(&env);
}

#[test]
fn working_directory_is_writable_and_the_rest_of_the_host_is_not() {
    let env = TestEnv::new();
    let outside = env.root().join("outside.txt");
    write(&outside, "original");
    let target = env.project().join("made-inside.txt");
    let script = format!(
        "echo inside > {}; echo evil > {} ; echo evil > /etc/warden-probe; echo done",
        target.display(),
        outside.display()
    );
    let out = sh(&env, &[], &script);
    assert!(out.stdout.contains("done"), "{out:?}");
    assert_eq!(read(&target).as_deref(), Some("inside\n"));
    assert_eq!(
        read(&outside).as_deref(),
        Some("original"),
        "host file outside the project changed"
    );
    assert!(!Path::new("/etc/warden-probe").exists());
    assert!(out.stderr.contains("Read-only file system"), "{out:?}");
    assert_nothing_left(&env);
}

#[test]
fn allow_write_flag_opens_a_directory() {
    let env = TestEnv::new();
    let extra = env.root().join("extra");
    std::fs::create_dir_all(&extra).unwrap();
    let f = extra.join("f");
    let out = sh(
        &env,
        &["--allow-write", extra.to_str().unwrap()],
        &format!("echo ok > {}", f.display()),
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(read(&f).as_deref(), Some("ok\n"));
}

#[test]
fn private_tmpdir_is_writable_and_removed_afterwards() {
    let env = TestEnv::new();
    let out = sh(&env, &[], "echo $TMPDIR; echo data > $TMPDIR/x && cat $TMPDIR/x; touch /tmp/warden-not-here 2>/dev/null || echo tmp-denied");
    assert_eq!(out.code, 0, "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    let tmpdir = PathBuf::from(lines[0]);
    assert!(tmpdir.starts_with(run_base(&env)), "{tmpdir:?}");
    assert_eq!(lines[1], "data");
    assert_eq!(lines[2], "tmp-denied");
    assert!(!tmpdir.exists(), "TMPDIR left behind");
    assert_nothing_left(&env);
}

#[test]
fn deny_read_hides_secrets_and_allow_read_reopens() {
    let env = TestEnv::new();
    write(&env.home().join(".ssh/id_rsa"), "SECRET-KEY-BYTES");
    write(
        &env.home().join(".ssh/known_hosts"),
        "github.com ssh-ed25519 AAAA",
    );
    write(
        &env.home().join(".netrc"),
        "machine x password NETRC-SECRET",
    );
    let st = env.write_settings(
        "s.json",
        r#"{"filesystem": {"denyRead": ["~/.ssh", "~/.netrc"], "allowRead": ["~/.ssh/known_hosts"]}}"#,
    );
    let out = sh(
        &env,
        &["--settings", st.to_str().unwrap()],
        "cat ~/.ssh/id_rsa; ls -a ~/.ssh; cat ~/.ssh/known_hosts; cat ~/.netrc; echo end",
    );
    assert!(out.stdout.contains("end"), "{out:?}");
    assert!(
        !out.stdout.contains("SECRET-KEY-BYTES") && !out.stderr.contains("SECRET-KEY-BYTES"),
        "{out:?}"
    );
    assert!(!out.stdout.contains("NETRC-SECRET"), "{out:?}");
    assert!(
        out.stdout.contains("github.com ssh-ed25519"),
        "allowRead did not re-open: {out:?}"
    );
    // The host files are untouched.
    assert_eq!(
        read(&env.home().join(".ssh/id_rsa")).as_deref(),
        Some("SECRET-KEY-BYTES")
    );
}

#[test]
fn deny_read_flag_hides_a_directory() {
    let env = TestEnv::new();
    write(&env.project().join("private/key"), "FLAG-SECRET");
    let out = sh(
        &env,
        &["--deny-read", "private"],
        "cat private/key; echo end",
    );
    assert!(out.stdout.contains("end"), "{out:?}");
    assert!(!out.stdout.contains("FLAG-SECRET"), "{out:?}");
}

#[test]
fn mandatory_protections_and_deny_write_hold_inside_the_project() {
    let env = TestEnv::new();
    let p = env.project();
    write(&p.join(".bashrc"), "# rc");
    write(&p.join(".git/hooks/README"), "hooks");
    write(&p.join(".git/config"), "[core]");
    write(&p.join("sub/.claude/settings.json"), "{}");
    write(&p.join("generated/a.rs"), "// gen");
    let st = env.write_settings("s.json", r#"{"filesystem": {"denyWrite": ["generated"]}}"#);
    let out = sh(
        &env,
        &["--settings", st.to_str().unwrap()],
        "echo x >> .bashrc; echo x > .git/hooks/pre-commit; echo x >> .git/config; \
         echo x > sub/.claude/settings.json; echo x > generated/a.rs; echo x > generated/new.rs; \
         mv .git/hooks .git/hooks-aside; echo ok > normal.txt; echo end",
    );
    assert!(out.stdout.contains("end"), "{out:?}");
    assert_eq!(read(&p.join(".bashrc")).as_deref(), Some("# rc"));
    assert!(!p.join(".git/hooks/pre-commit").exists());
    assert!(
        p.join(".git/hooks/README").exists(),
        "protected dir was moved aside"
    );
    assert!(!p.join(".git/hooks-aside").exists());
    assert_eq!(read(&p.join(".git/config")).as_deref(), Some("[core]"));
    assert_eq!(
        read(&p.join("sub/.claude/settings.json")).as_deref(),
        Some("{}")
    );
    assert_eq!(read(&p.join("generated/a.rs")).as_deref(), Some("// gen"));
    assert!(!p.join("generated/new.rs").exists());
    assert_eq!(read(&p.join("normal.txt")).as_deref(), Some("ok\n"));
}

#[test]
fn symlinks_do_not_lead_out() {
    let env = TestEnv::new();
    let outside = env.root().join("outside");
    write(&outside.join("victim"), "untouched");
    std::os::unix::fs::symlink(&outside, env.project().join("link")).unwrap();
    let out = sh(&env, &[], "echo evil > link/victim; echo evil > link/new; ln -s /etc/passwd p2 && echo x >> p2; echo end");
    assert!(out.stdout.contains("end"), "{out:?}");
    assert_eq!(read(&outside.join("victim")).as_deref(), Some("untouched"));
    assert!(!outside.join("new").exists());
}

#[test]
fn only_the_sandbox_processes_and_loopback_are_visible() {
    let env = TestEnv::new();
    let out = sh(
        &env,
        &[],
        "ls /proc | grep -c '^[0-9]'; cat /proc/net/dev | tail -n +3 | cut -d: -f1; hostname",
    );
    assert_eq!(out.code, 0, "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().map(str::trim).collect();
    let pids: u32 = lines[0].parse().unwrap();
    assert!(pids <= 6, "host processes visible: {pids} pids\n{out:?}");
    assert_eq!(lines[1], "lo", "{out:?}");
    assert_eq!(lines.len(), 3, "interfaces other than lo: {out:?}");
    assert_eq!(lines[2], "warden");
}

#[test]
fn host_loopback_services_are_unreachable() {
    let env = TestEnv::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let out = sh(
        &env,
        &[],
        &format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED; echo end"),
    );
    // dash has no /dev/tcp; use bash if present for a real connect attempt.
    let out2 = env
        .command()
        .args([
            "run",
            "--",
            "bash",
            "-c",
            &format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED; echo end"),
        ])
        .env("TMPDIR", run_base(&env))
        .output()
        .unwrap();
    let stdout2 = String::from_utf8_lossy(&out2.stdout);
    assert!(
        !out.stdout.contains("CONNECTED") && !stdout2.contains("CONNECTED"),
        "{out:?} {stdout2}"
    );
    assert!(
        stdout2.contains("end"),
        "bash did not run: {:?}",
        String::from_utf8_lossy(&out2.stderr)
    );
    assert!(
        listener.accept().is_err(),
        "the sandbox reached a host loopback listener"
    );
}

#[test]
fn the_command_holds_no_capabilities_and_is_filtered() {
    let env = TestEnv::new();
    let out = sh(
        &env,
        &[],
        "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status",
    );
    assert_eq!(out.code, 0, "{out:?}");
    for line in out.stdout.lines() {
        let (k, v) = line.split_once(':').unwrap();
        let v = v.trim();
        match k {
            "NoNewPrivs" => assert_eq!(v, "1", "{line}"),
            "Seccomp" => assert_eq!(v, "2", "{line}"),
            _ => assert_eq!(v, "0000000000000000", "{line}"),
        }
    }
    assert_eq!(out.stdout.lines().count(), 7, "{out:?}");
}

#[test]
fn sigterm_reaches_the_commands_handler() {
    let env = TestEnv::new();
    let mut child = env
        .command()
        .args([
            "run",
            "--",
            "sh",
            "-c",
            "trap 'echo got-term; exit 3' TERM; echo ready; while :; do sleep 0.05; done",
        ])
        .env("TMPDIR", run_base(&env))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut buf = [0u8; 6];
    stdout.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"ready\n");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert_eq!(status.code(), Some(3), "rest: {rest}");
    assert!(rest.contains("got-term"), "{rest}");
    assert_nothing_left(&env);
}

/// Red-team round 20: a command that ignores SIGTERM, or is stopped, kept warden running
/// forever after a SIGTERM (a harness's `timeout` never ended it). A stopped command is
/// continued and gets the SIGTERM; one that ignores it is killed, with everything it
/// started, 10 s later; warden exits 143 either way.
#[test]
fn sigterm_ends_a_stopped_or_deaf_command_within_the_grace_period() {
    let env = TestEnv::new();
    let marker = env.project().join("still-running");
    for (script, at_most) in [
        (
            "echo ready; kill -STOP $$; echo resumed",
            Duration::from_secs(5),
        ),
        (
            "trap '' TERM; echo ready; (trap '' TERM; while :; do touch still-running; \
             sleep 0.1; done) & while :; do sleep 0.1; done",
            Duration::from_secs(20),
        ),
    ] {
        let mut child = env
            .command()
            .args(["run", "--", "sh", "-c", script])
            .env("TMPDIR", run_base(&env))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut buf = [0u8; 6];
        stdout.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ready\n");
        std::thread::sleep(Duration::from_millis(200));
        let sent = Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let status = child.wait().unwrap();
        let took = sent.elapsed();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert_eq!(status.code(), Some(143), "{script}: {err}");
        assert!(took < at_most, "{script}: took {took:?}: {err}");
        // Nothing of the sandbox runs on: the marker is no longer touched.
        let _ = std::fs::remove_file(&marker);
        std::thread::sleep(Duration::from_millis(500));
        assert!(
            !marker.exists(),
            "{script}: a process of the sandbox outlived it"
        );
    }
    assert_nothing_left(&env);
}

#[test]
fn sigkill_of_warden_takes_the_sandbox_down_and_leaves_nothing() {
    let env = TestEnv::new();
    let marker = env.project().join("still-running");
    let mut child = env
        .command()
        .args([
            "run",
            "--",
            "sh",
            "-c",
            "echo ready; sleep 2; touch still-running; sleep 30",
        ])
        .env("TMPDIR", run_base(&env))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut buf = [0u8; 6];
    stdout.read_exact(&mut buf).unwrap();
    let cgroup = format!("warden-{}", child.id());
    // The placeholder that masks a missing protected directory exists while the sandbox runs.
    let placeholder = env.project().join(".claude");
    assert!(placeholder.is_dir(), "no placeholder while the sandbox ran");
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline
        && (std::fs::read_dir(run_base(&env)).unwrap().next().is_some()
            || cgroup_exists(&cgroup)
            || placeholder.exists())
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_nothing_left(&env);
    assert!(!cgroup_exists(&cgroup), "cgroup {cgroup} left behind");
    let left: Vec<_> = std::fs::read_dir(env.project())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        left.is_empty(),
        "placeholders left in the project: {left:?}"
    );
    // No mount of the sandbox ever reached the host's mount table.
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let base = run_base(&env);
    assert!(
        !mounts
            .lines()
            .any(|l| l.contains(base.to_str().unwrap())
                || l.contains(env.project().to_str().unwrap())),
        "a sandbox mount is visible on the host"
    );
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        !marker.exists(),
        "the sandboxed command survived warden's death"
    );
}

fn cgroup_exists(name: &str) -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    mounts
        .lines()
        .filter(|l| l.contains(" - cgroup2 "))
        .filter_map(|l| l.split(' ').nth(4))
        .any(|mnt| Path::new(mnt).join(name).exists())
}

#[test]
fn stdin_passes_through() {
    let env = TestEnv::new();
    let data: Vec<u8> = (0..300 * 1024).map(|i| (i % 251) as u8).collect();
    let mut child = env
        .command()
        .args(["run", "--", "wc", "-c"])
        .env("TMPDIR", run_base(&env))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&data));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        (300 * 1024).to_string()
    );
}

#[test]
fn fork_burst_and_git_work() {
    let env = TestEnv::new();
    let out = sh(
        &env,
        &[],
        "for i in $(seq 200); do (true) & done; wait; echo burst-ok",
    );
    assert!(out.stdout.contains("burst-ok"), "{out:?}");
    let out = sh(
        &env,
        &[],
        "git init -q repo && cd repo && echo hi > f && git add f && \
         git -c user.email=t@t -c user.name=t commit -qm one && git log --oneline | wc -l",
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout.trim(), "1");
    assert!(env.project().join("repo/.git/HEAD").exists());
}

/// A TestEnv handed over to `nobody`, and a warden command that runs as it.
fn as_nobody(env: &TestEnv) -> std::process::Command {
    as_uid(env, 65534)
}

/// [`as_nobody`] with another unprivileged uid (one no account uses, no home directory).
fn as_uid(env: &TestEnv, uid: u32) -> std::process::Command {
    use std::os::unix::process::CommandExt;
    let base = run_base(env);
    let status = std::process::Command::new("chown")
        .args(["-R", &format!("{uid}:{uid}")])
        .arg(env.root())
        .status()
        .unwrap();
    assert!(
        status.success(),
        "chown needs root: CI runs these tests as root"
    );
    let mut cmd = env.command();
    cmd.uid(uid).gid(uid).env("TMPDIR", base);
    cmd
}

#[test]
fn unprivileged_caller_without_a_delegated_cgroup_fails_closed() {
    let env = TestEnv::new();
    let out = as_nobody(&env)
        .args(["run", "--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("cgroup") && stderr.contains("failIfUnavailable: false"),
        "{stderr}"
    );
}

#[test]
fn unprivileged_caller_is_confined_when_the_weaker_mode_is_allowed() {
    let env = TestEnv::new();
    let st = env.write_settings("s.json", r#"{"sandbox": {"failIfUnavailable": false}}"#);
    let outside = env.root().join("outside.txt");
    write(&outside, "original");
    let out = as_nobody(&env)
        .args(["run", "--settings", st.to_str().unwrap(), "--", "sh", "-c"])
        .arg(format!(
            "id -u; echo hi > mine.txt; echo evil > {}; echo x > /etc/x; grep CapEff /proc/self/status; echo end",
            outside.display()
        ))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stderr.contains("running without a cgroup"), "{stderr}");
    assert!(stdout.starts_with("65534\n"), "{stdout}");
    assert!(stdout.contains("CapEff:\t0000000000000000"), "{stdout}");
    assert_eq!(
        read(&env.project().join("mine.txt")).as_deref(),
        Some("hi\n")
    );
    assert_eq!(read(&outside).as_deref(), Some("original"));
    assert!(!Path::new("/etc/x").exists());
    assert_nothing_left(&env);
}

/// Red-team round 15: when the caller's uid holds every inotify instance the kernel allows it
/// (another of its processes, here outside any sandbox), pid 1 cannot watch the protected git
/// dir, and the sandbox does not start rather than run unwatched.
#[test]
fn a_sandbox_that_cannot_watch_its_git_dir_does_not_start() {
    use std::os::unix::process::CommandExt;
    let env = TestEnv::new();
    let st = env.write_settings("s.json", r#"{"sandbox": {"failIfUnavailable": false}}"#);
    write(&env.project().join(".git/HEAD"), "ref: refs/heads/main\n");
    write(&env.project().join(".git/config"), "[core]\n");
    // A uid of its own: the hog would starve every other test running as `nobody` meanwhile.
    const UID: u32 = 65533;
    let mut warden = as_uid(&env, UID);
    // The caller's uid holds every instance while the run starts.
    let (hog, line) = warden_tests::spawn_and_read_line(
        std::process::Command::new("python3")
            .args(["-c", &warden_tests::hold_inotify_instances(20)])
            .uid(UID)
            .gid(UID),
    );
    assert!(line.trim().parse::<usize>().is_ok(), "{line:?}");
    let out = warden
        .current_dir(env.project())
        .args([
            "run",
            "--settings",
            st.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "echo ran",
        ])
        .output()
        .unwrap();
    drop(hog);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stdout}{stderr}");
    assert!(!stdout.contains("ran"), "{stdout}");
    assert!(stderr.contains("inotify is unavailable"), "{stderr}");
    assert_nothing_left(&env);
}

/// A command that leaves unsearchable directories (mode 000) in its TMPDIR: an unprivileged
/// caller cannot remove their contents with a plain recursive delete; the run directory must
/// not stay behind all the same.
#[test]
fn an_unprivileged_callers_run_directory_is_removed_even_when_the_command_locked_it() {
    let env = TestEnv::new();
    let st = env.write_settings("s.json", r#"{"sandbox": {"failIfUnavailable": false}}"#);
    let out = as_nobody(&env)
        .args(["run", "--settings", st.to_str().unwrap(), "--", "sh", "-c"])
        .arg(
            "mkdir -p $TMPDIR/a/b && echo x > $TMPDIR/a/b/f && ln -s / $TMPDIR/a/root && \
             chmod 000 $TMPDIR/a/b $TMPDIR/a && echo locked",
        )
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("locked"), "{out:?}");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_nothing_left(&env);
}

#[test]
fn protected_paths_that_do_not_exist_yet_cannot_be_created() {
    let env = TestEnv::new();
    let p = env.project();
    write(&p.join(".git/HEAD"), "ref: refs/heads/main\n");
    let out = sh(
        &env,
        &[],
        "mkdir -p .claude && echo '{\"hooks\":{}}' > .claude/settings.json; \
         echo x > .vscode/tasks.json; echo x > .git/hooks/pre-commit; mkdir .git/hooks/sub; \
         rmdir .cursor; mv .idea .idea2; \
         for d in .gemini .zed .helix .kiro .roo .amazonq .continue .windsurf .devcontainer \
                  .opencode .kilo .kilocode .qwen .factory .clinerules; do \
         mkdir -p $d/x; echo '{}' > $d/settings.json; done; echo end",
    );
    assert!(out.stdout.contains("end"), "{out:?}");
    // Nothing was created, and the placeholders are gone again.
    for name in [
        ".claude",
        ".vscode",
        ".cursor",
        ".idea",
        ".idea2",
        ".warden",
        ".codex",
        ".git/hooks",
        // Other agents' and editors' project config (red-team round 20).
        ".gemini",
        ".zed",
        ".helix",
        ".kiro",
        ".roo",
        ".amazonq",
        ".continue",
        ".windsurf",
        ".devcontainer",
        // Round 21: opencode's plugins, Kilo Code's and Qwen Code's config.
        ".opencode",
        ".kilo",
        ".kilocode",
        ".qwen",
        // Round 22: Droid's and Cline's (hooks, MCP servers).
        ".factory",
        ".clinerules",
    ] {
        assert!(
            !p.join(name).exists(),
            "{name} exists after the run: {out:?}"
        );
    }
    assert!(p.join(".git/HEAD").exists());
    assert_nothing_left(&env);
}

/// Sandboxes in one project at once (parallel subagents): the first to end must not take the
/// protection of a missing config directory away from one still running. (Removing a
/// directory on the host while it is a mount point in another mount namespace detaches that
/// mount, so the second sandbox could then create `.claude/settings.json` after all.)
#[test]
fn a_placeholder_outlives_the_sandbox_that_made_it_while_another_runs() {
    let env = TestEnv::new();
    let p = env.project();
    let start = |script: &str| {
        env.command()
            .args(["run", "--", "sh", "-c", script])
            .env("TMPDIR", run_base(&env))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let wait_for = |path: &Path| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !path.exists() {
            assert!(
                Instant::now() < deadline,
                "{} never appeared",
                path.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // First: makes the placeholder, then waits to be let go.
    // Every wait is bounded (30 s), so a failed assertion leaves no sandbox running.
    let first = start(
        "touch first-up; i=0; while [ ! -e release-first ] && [ $i -lt 600 ]; do \
         sleep 0.05; i=$((i+1)); done",
    );
    wait_for(&p.join("first-up"));
    assert!(
        p.join(".claude").is_dir(),
        "no placeholder while the first ran"
    );
    // Second: starts while the first runs, then tries to plant agent config once the first
    // has ended.
    let second = start(
        "touch second-up; i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.05; \
         i=$((i+1)); done; \
         mkdir -p .claude; echo '{\"hooks\":{}}' > .claude/settings.json; \
         mkdir .vscode; echo x > .vscode/tasks.json; echo second-end",
    );
    wait_for(&p.join("second-up"));
    std::fs::write(p.join("release-first"), "").unwrap();
    let out = first.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        p.join(".claude").is_dir(),
        "the first sandbox removed the placeholder the second still relies on"
    );
    std::fs::write(p.join("go"), "").unwrap();
    let out = second.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("second-end"), "{out:?}");
    assert!(
        !p.join(".claude/settings.json").exists() && !p.join(".vscode/tasks.json").exists(),
        "agent config planted through a placeholder removed under a running sandbox: {out:?}"
    );
    // The last one out removed the placeholders, and nothing else is left.
    for name in [
        ".claude", ".vscode", ".cursor", ".idea", ".warden", ".codex",
    ] {
        assert!(!p.join(name).exists(), "{name} left behind");
    }
    let left: Vec<_> = std::fs::read_dir(p)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("warden"))
        .collect();
    assert!(
        left.is_empty(),
        "temporary placeholder names left: {left:?}"
    );
    assert_nothing_left(&env);
}

#[test]
fn env_deny_drops_variables_and_tmpdir_is_replaced() {
    let env = TestEnv::new();
    let st = env.write_settings(
        "s.json",
        r#"{"warden": {"env": {"deny": ["AWS_*", "GITHUB_TOKEN"]}}}"#,
    );
    let out = env
        .command()
        .args([
            "run",
            "--settings",
            st.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "env",
        ])
        .env("TMPDIR", run_base(&env))
        .env("AWS_SECRET_ACCESS_KEY", "AWS-SECRET-VALUE")
        .env("GITHUB_TOKEN", "GH-SECRET-VALUE")
        .env("KEEP_ME", "kept")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        !stdout.contains("AWS-SECRET-VALUE") && !stdout.contains("GH-SECRET-VALUE"),
        "{stdout}"
    );
    assert!(stdout.contains("KEEP_ME=kept"), "{stdout}");
    assert!(stdout.contains("IS_SANDBOX=1"), "{stdout}");
    let tmp = stdout
        .lines()
        .find_map(|l| l.strip_prefix("TMPDIR="))
        .unwrap();
    assert!(
        Path::new(tmp).starts_with(run_base(&env)) && tmp.ends_with("/tmp"),
        "{tmp}"
    );
}

#[test]
fn a_disabled_sandbox_is_refused_not_run_unsandboxed() {
    let env = TestEnv::new();
    let st = env.write_settings("s.json", r#"{"sandbox": {"enabled": false}}"#);
    let marker = env.project().join("ran");
    let out = sh(&env, &["--settings", st.to_str().unwrap()], "touch ran");
    assert_eq!(out.code, 125, "{out:?}");
    assert!(out.stderr.contains("sandbox.enabled is false"), "{out:?}");
    assert!(!marker.exists());
    assert_nothing_left(&env);
}

#[test]
fn posix_shared_memory_works() {
    let env = TestEnv::new();
    let out = sh(
        &env,
        &[],
        "echo data > /dev/shm/x && cat /dev/shm/x && rm /dev/shm/x && echo shm-ok",
    );
    assert!(out.stdout.contains("data\nshm-ok"), "{out:?}");
}

#[test]
fn a_symlinked_tmpdir_base_still_works() {
    let env = TestEnv::new();
    let real = run_base(&env);
    let link = env.root().join("runs-link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let out = env
        .command()
        .args(["run", "--", "sh", "-c", "touch $TMPDIR/x && echo $TMPDIR"])
        .env("TMPDIR", &link)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(Path::new(stdout.trim()).starts_with(&real), "{stdout}");
    assert_nothing_left(&env);
}

/// Where a cgroup named `name` made by a child of this process could be: below this process's
/// own cgroup in every mounted cgroup v2 and v1 hierarchy (warden makes its leaves there).
fn cgroup_dirs_named(name: &str) -> Vec<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let mut dirs = Vec::new();
    for line in mounts.lines() {
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let pre: Vec<&str> = pre.split(' ').collect();
        let mut post = post.split(' ');
        let (fstype, _, options) = (post.next(), post.next(), post.next().unwrap_or(""));
        let own_path = match fstype {
            Some("cgroup2") => own.lines().find_map(|l| l.strip_prefix("0::")),
            Some("cgroup") => own.lines().find_map(|l| {
                let mut parts = l.splitn(3, ':');
                let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                (id != "0"
                    && !controllers.is_empty()
                    && controllers
                        .split(',')
                        .all(|c| options.split(',').any(|o| o == c)))
                .then_some(path)
            }),
            _ => None,
        };
        let (Some(own_path), Some(root), Some(mount)) = (own_path, pre.get(3), pre.get(4)) else {
            continue;
        };
        let rel = own_path
            .strip_prefix(root.trim_end_matches('/'))
            .unwrap_or(own_path)
            .trim_start_matches('/');
        dirs.push(Path::new(mount).join(rel).join(name));
    }
    dirs
}

/// Runs `warden run --settings SETTINGS -- sh -c SCRIPT` with `stdin` as its input and returns
/// the output and warden's pid (which names its cgroups: `warden-<pid>`). `during` runs once
/// the command has printed `ready`.
fn run_with_limits(
    env: &TestEnv,
    settings: &str,
    script: &str,
    during: impl FnOnce(u32),
) -> (Output, u32) {
    let st = env.write_settings("limits.json", settings);
    let mut child = env
        .command()
        .args(["run", "--settings", st.to_str().unwrap(), "--", "sh", "-c"])
        .arg(format!("echo ready; read go; {script}"))
        .env("TMPDIR", run_base(env))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut ready = [0u8; 6];
    let got = child.stdout.as_mut().unwrap().read_exact(&mut ready);
    if got.is_ok() && &ready == b"ready\n" {
        during(pid);
    }
    // Closing stdin after the line lets `read` return even if `during` panicked.
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(b"go\n");
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let out = Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(
        got.is_ok() && &ready == b"ready\n",
        "the sandbox never got ready: {out:?}"
    );
    (out, pid)
}

/// Asserts no cgroup of warden run `pid` is left in any hierarchy (v2 leaf and v1 leaves).
/// Removes what is left before failing, so a failed test leaves nothing behind either.
fn assert_no_cgroup_left(pid: u32) {
    let left: Vec<PathBuf> = cgroup_dirs_named(&format!("warden-{pid}"))
        .into_iter()
        .filter(|d| d.exists())
        .collect();
    for dir in &left {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        for p in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(p),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        for _ in 0..100 {
            if std::fs::remove_dir(dir).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    assert!(left.is_empty(), "cgroups left behind: {left:?}");
}

#[test]
fn pids_max_stops_a_fork_burst_and_leaves_no_cgroup() {
    let env = TestEnv::new();
    // dash gives up at the first failed fork ("Cannot fork"), so the last `started=` line is
    // how many background processes the limit let through.
    let (out, pid) = run_with_limits(
        &env,
        r#"{"warden": {"limits": {"pidsMax": 20}}}"#,
        "for i in $(seq 60); do sleep 2 & echo started=$i; done; echo all-started; wait",
        |pid| {
            // While it runs, the limit sits in a pids cgroup of the sandbox (the v2 leaf, or
            // the v1 leaf in a hybrid layout) — seen from outside.
            let limited: Vec<PathBuf> = cgroup_dirs_named(&format!("warden-{pid}"))
                .into_iter()
                .filter(|d| {
                    std::fs::read_to_string(d.join("pids.max")).is_ok_and(|v| v.trim() == "20")
                })
                .collect();
            assert_eq!(limited.len(), 1, "no cgroup with pids.max 20: {limited:?}");
        },
    );
    let started = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("started="))
        .filter_map(|n| n.parse::<u32>().ok())
        .max()
        .unwrap_or(0);
    assert!(!out.stdout.contains("all-started"), "{out:?}");
    assert!(
        (1..20).contains(&started),
        "{started} of 60 background processes started under pidsMax 20: {out:?}"
    );
    assert!(
        out.stderr.contains("fork") || out.stderr.contains("Resource temporarily unavailable"),
        "{out:?}"
    );
    assert_no_cgroup_left(pid);
    assert_nothing_left(&env);
}

/// Red-team round 15: a run whose settings set no `pidsMax` took 3 000 of the host's pids.
/// Without one a default of 4096 applies where the cgroup v2 hierarchy offers the pids
/// controller (not through a v1 fallback: placing the sandbox in a v1 leaf costs ~6 ms a
/// run); `pidsMax: 0` lifts it.
#[test]
fn a_run_without_pids_max_gets_the_default_where_v2_has_pids_and_zero_lifts_it() {
    let env = TestEnv::new();
    let with = |settings: &str| {
        let mut seen = Vec::new();
        let (out, pid) = run_with_limits(&env, settings, "true", |pid| {
            seen = cgroup_dirs_named(&format!("warden-{pid}"))
                .into_iter()
                .filter_map(|d| {
                    let v = std::fs::read_to_string(d.join("pids.max")).ok()?;
                    let v2 = d.join("cgroup.controllers").exists();
                    Some((v2, v.trim().to_string()))
                })
                .collect();
        });
        assert_eq!(out.code, 0, "{out:?}");
        assert_no_cgroup_left(pid);
        seen
    };
    // Where the sandbox's v2 leaf has a pids.max, the pids controller is there.
    let default = with("{}");
    match default.iter().find(|(v2, _)| *v2) {
        Some((_, v)) => assert_eq!(v, "4096", "{default:?}"),
        None => {
            assert!(default.is_empty(), "a v1 leaf for a default: {default:?}");
            eprintln!("note: cgroup v2 offers no pids controller here: no default pids.max");
        }
    }
    let lifted = with(r#"{"warden": {"limits": {"pidsMax": 0}}}"#);
    assert!(!lifted.is_empty(), "pidsMax 0 is written as max");
    assert!(
        lifted.iter().all(|(_, v)| v == "max"),
        "pidsMax 0 left a limit: {lifted:?}"
    );
    assert_nothing_left(&env);
}

#[test]
fn memory_max_stops_a_large_allocation() {
    let env = TestEnv::new();
    let (out, pid) = run_with_limits(
        &env,
        r#"{"warden": {"limits": {"memoryMax": 67108864}}}"#,
        "/usr/bin/python3 -c 'b = bytearray(16*1024*1024); print(\"small-ok\")'; \
         /usr/bin/python3 -c 'b = bytearray(200*1024*1024); print(\"big-ok\")'; \
         echo big-exit=$?",
        |pid| {
            let limited = cgroup_dirs_named(&format!("warden-{pid}"))
                .into_iter()
                .any(|d| {
                    ["memory.max", "memory.limit_in_bytes"].iter().any(|f| {
                        std::fs::read_to_string(d.join(f)).is_ok_and(|v| v.trim() == "67108864")
                    })
                });
            assert!(limited, "no cgroup with a 64 MiB memory limit");
        },
    );
    // Below the limit python works, so a failure above it is the limit's doing.
    assert!(out.stdout.contains("small-ok"), "{out:?}");
    assert!(!out.stdout.contains("big-ok"), "{out:?}");
    let code = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("big-exit="))
        .unwrap_or_else(|| panic!("no exit status: {out:?}"));
    // 137: killed by the OOM killer; 1: MemoryError.
    assert!(
        code == "137" || (code == "1" && out.stderr.contains("MemoryError")),
        "big allocation exited {code}: {out:?}"
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_no_cgroup_left(pid);
    assert_nothing_left(&env);
}

#[test]
fn sigkill_of_a_limited_run_leaves_no_cgroup() {
    let env = TestEnv::new();
    let mut before = Vec::new();
    let (out, pid) = run_with_limits(
        &env,
        r#"{"warden": {"limits": {"pidsMax": 50, "memoryMax": 268435456, "cpuMax": "max"}}}"#,
        "sleep 30",
        |pid| {
            before = cgroup_dirs_named(&format!("warden-{pid}"))
                .into_iter()
                .filter(|d| d.exists())
                .collect();
            let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap());
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
        },
    );
    assert_eq!(out.code, -1, "warden was not killed: {out:?}");
    // The v2 leaf and, in a hybrid layout, the pids, memory and cpu leaves in cgroup v1.
    assert!(!before.is_empty(), "no cgroup while the sandbox ran");
    // The janitor removes them all, and the run directory after them (it cleans up after
    // warden's death, so the test waits for both, as the plain SIGKILL test does).
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline
        && (before.iter().any(|d| d.exists())
            || std::fs::read_dir(run_base(&env)).unwrap().next().is_some())
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_no_cgroup_left(pid);
    assert_nothing_left(&env);
}

#[test]
fn a_limit_that_no_hierarchy_can_enforce_is_refused() {
    let env = TestEnv::new();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let v1_pids = mounts.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        let mut post = post.split(' ');
        let (fstype, _, options) = (post.next()?, post.next()?, post.next()?);
        (fstype == "cgroup" && options.split(',').any(|o| o == "pids"))
            .then(|| pre.split(' ').nth(4).map(str::to_string))?
    });
    let Some(v1_pids) = v1_pids else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but `pids` is not bound to cgroup v1 here"
        );
        eprintln!("skipped: `pids` is not bound to cgroup v1 here (no fallback to take away)");
        return;
    };
    // In a private mount namespace the v1 pids hierarchy is read-only, and the v2 hierarchy
    // has no `pids` (a controller is bound to one hierarchy at a time): nothing can enforce
    // pidsMax, so warden must refuse to run rather than run unlimited.
    let st = env.write_settings("s.json", r#"{"warden": {"limits": {"pidsMax": 20}}}"#);
    let template = env.command();
    let mut cmd = std::process::Command::new("unshare");
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        r#"mount -o remount,bind,ro "$0" && exec "$@""#,
        &v1_pids,
    ])
    .arg(template.get_program())
    .args([
        "run",
        "--settings",
        st.to_str().unwrap(),
        "--",
        "touch",
        "ran",
    ]);
    if let Some(dir) = template.get_current_dir() {
        cmd.current_dir(dir);
    }
    for (name, value) in template.get_envs() {
        match value {
            Some(v) => cmd.env(name, v),
            None => cmd.env_remove(name),
        };
    }
    cmd.env("TMPDIR", run_base(&env));
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // unshare and sh exec: the pid is warden's.
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("controller `pids` is not available")
            && stderr.contains("which warden cannot use")
            && stderr.contains("not writable"),
        "{stderr}"
    );
    assert!(!env.project().join("ran").exists(), "the command ran");
    assert_no_cgroup_left(pid);
    assert_nothing_left(&env);
}

#[test]
fn rlimits_bind_the_command_and_a_misspelt_one_refuses_to_run() {
    let env = TestEnv::new();
    let st = env.write_settings(
        "r.json",
        r#"{"warden": {"limits": {"rlimits": {"nofile": 64, "fsize": 4096}}}}"#,
    );
    // fsize: with SIGXFSZ ignored, the write past 4 KiB fails (EFBIG) instead of killing
    // head; the file on the host stops at the limit.
    let out = sh(
        &env,
        &["--settings", st.to_str().unwrap()],
        "ulimit -n; ulimit -Hn; trap '' XFSZ; head -c 10000 /dev/zero > big; echo head=$?",
    );
    assert_eq!(out.code, 0, "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.first(), Some(&"64"), "soft nofile: {out:?}");
    assert_eq!(lines.get(1), Some(&"64"), "hard nofile: {out:?}");
    assert!(
        !out.stdout.contains("head=0"),
        "the oversized write succeeded: {out:?}"
    );
    let big = std::fs::metadata(env.project().join("big")).unwrap().len();
    assert_eq!(
        big, 4096,
        "the file on the host is larger than fsize allows"
    );

    let bad = env.write_settings(
        "bad.json",
        r#"{"warden": {"limits": {"rlimits": {"nofiles": 64}}}}"#,
    );
    let out = sh(&env, &["--settings", bad.to_str().unwrap()], "touch ran");
    assert_eq!(out.code, 125, "{out:?}");
    assert!(out.stderr.contains("unknown rlimit `nofiles`"), "{out:?}");
    assert!(!env.project().join("ran").exists(), "the command ran");
    assert_nothing_left(&env);
}

#[test]
fn globs_in_deny_read_deny_write_and_allow_write_apply_to_existing_matches() {
    let env = TestEnv::new();
    let project = env.project();
    std::fs::create_dir_all(project.join("keys/deep")).unwrap();
    std::fs::write(project.join("keys/a.pem"), "PEM-SECRET-A").unwrap();
    std::fs::write(project.join("keys/deep/b.pem"), "PEM-SECRET-B").unwrap();
    std::fs::write(project.join(".env.local"), "TOKEN=1\n").unwrap();
    let cache = env.root().join("cache-1");
    std::fs::create_dir_all(&cache).unwrap();
    let settings = env.write_settings(
        "globs.json",
        &format!(
            r#"{{ "filesystem": {{ "denyRead": ["**/*.pem"], "denyWrite": ["**/.env*"],
                 "allowWrite": ["{}/cache-*"] }} }}"#,
            env.root().display()
        ),
    );
    let settings = settings.to_str().unwrap();
    let out = sh(
        &env,
        &["--settings", settings],
        &format!(
            "cat keys/a.pem keys/deep/b.pem; echo x >> .env.local || echo ENV-READ-ONLY; \
             echo cached > {}/entry && echo CACHE-WRITTEN",
            cache.display()
        ),
    );
    assert!(!out.stdout.contains("PEM-SECRET"), "{out:?}");
    assert!(out.stdout.contains("ENV-READ-ONLY"), "{out:?}");
    assert!(out.stdout.contains("CACHE-WRITTEN"), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(project.join(".env.local")).unwrap(),
        "TOKEN=1\n"
    );
    assert_eq!(
        std::fs::read_to_string(cache.join("entry")).unwrap(),
        "cached\n"
    );
}

/// `warden __janitor` with `first` on descriptor 3 and `rest` on stdin, as the janitor's
/// first stage hands over (see linux/janitor.rs).
fn janitor_stage_two(first: &[u8], rest: &[u8]) -> std::process::ExitStatus {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let mut memfd = tempfile::tempfile().unwrap();
    memfd.write_all(first).unwrap();
    std::io::Seek::rewind(&mut memfd).unwrap();
    let fd = memfd.as_raw_fd();
    let mut cmd = std::process::Command::new(warden_tests::warden_bin());
    cmd.arg("__janitor").stdin(Stdio::piped());
    // SAFETY: dup2 and fcntl are async-signal-safe; `fd` stays open in the parent until spawn
    // returns.
    unsafe {
        cmd.pre_exec(move || {
            // dup2 onto itself keeps close-on-exec: clear it instead.
            let ok = if fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0) >= 0
            } else {
                libc::dup2(fd, 3) >= 0
            };
            if !ok {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    child.stdin.take().unwrap().write_all(rest).unwrap();
    child.wait().unwrap()
}

#[test]
fn the_janitors_second_stage_joins_the_handed_over_records_and_honours_done() {
    let base = tempfile::tempdir().unwrap();
    let run_dir = base.path().join("warden-stage-two");
    std::fs::create_dir_all(run_dir.join("tmp")).unwrap();
    let record = format!("R{}\0", run_dir.display()).into_bytes();
    // A record cut in two by the hand-over: half collected, half still in the pipe.
    let (first, rest) = record.split_at(record.len() / 2);
    // With the done record last, nothing is touched.
    let mut done = rest.to_vec();
    done.extend_from_slice(b"X\0");
    assert!(janitor_stage_two(first, &done).success());
    assert!(
        run_dir.exists(),
        "removed although the supervisor said it was done"
    );
    assert!(janitor_stage_two(first, rest).success());
    assert!(
        !run_dir.exists(),
        "the run directory named across the hand-over is left"
    );
    // Something not named like warden's is never removed.
    let other = base.path().join("precious");
    std::fs::create_dir(&other).unwrap();
    let rec = format!("R{}\0", other.display());
    assert!(janitor_stage_two(rec.as_bytes(), b"").success());
    assert!(other.exists());
}

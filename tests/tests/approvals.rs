//! Filesystem and session approvals through the one approval pipeline, against the real
//! binary: `warden check --ask` asks (control channel, non-interactive), what is approved for a
//! session shapes that session's next sandboxes (seen from the host: a file written, a secret
//! read) and nothing else, allow-always / remove-from-deny-list edit the user's settings file,
//! and nothing can be approved from inside a sandbox.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use warden_tests::{answer_requests, Output, TestEnv};

fn run(env: &TestEnv, args: &[&str]) -> Output {
    let out = env
        .command()
        .args(args)
        .env("TMPDIR", env.root())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running warden {args:?}: {e}"));
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `warden check ARGS --ask --approvals unix:SOCK`, answered by a test client with `answers`;
/// returns the output and the requests the client saw.
fn check_asked(env: &TestEnv, args: &[&str], answers: Vec<&'static str>) -> (Output, Vec<Value>) {
    let sock = env.root().join("approvals.sock");
    // Built (on a fresh checkout: compiled) before the client's clock starts.
    let _ = warden_tests::warden_bin();
    let client = answer_requests(sock.clone(), answers);
    let approvals = format!("unix:{}", sock.display());
    let mut all = vec!["check"];
    all.extend_from_slice(args);
    all.extend(["--ask", "--approvals", approvals.as_str()]);
    let out = run(env, &all);
    let seen = client.join().unwrap();
    assert!(!sock.exists(), "the approvals socket was left behind");
    (out, seen)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn session_file(env: &TestEnv, id: &str) -> PathBuf {
    env.root().join("sessions").join(format!("{id}.json"))
}

/// `python3` in the test's project with warden's environment for it (home, settings paths):
/// the driver of a terminal or of a run whose streams the test arranges.
fn python_in(env: &TestEnv) -> std::process::Command {
    let warden = env.command();
    let mut cmd = std::process::Command::new("python3");
    for (k, v) in warden.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd.current_dir(env.project());
    cmd
}

#[test]
fn a_write_approved_once_for_a_session_is_writable_in_its_next_sandboxes_only() {
    let env = TestEnv::new();
    let data = env.root().join("outside/data");
    std::fs::create_dir_all(&data).unwrap();
    let target = data.join("new.txt");
    let script = format!("echo hi > {}", s(&target));

    // Before: refused, in the session or not.
    let before = run(&env, &["run", "--session", "s1", "--", "sh", "-c", &script]);
    assert_ne!(before.code, 0, "{before:?}");
    assert!(!target.exists());

    let (out, seen) = check_asked(
        &env,
        &["--write", s(&target), "--session", "s1"],
        vec!["allow-once"],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("approval:"), "{out:?}");
    assert_eq!(seen.len(), 1, "{seen:?}");
    let req = &seen[0];
    assert_eq!(req["kind"], "filesystem-write");
    // A new file: its directory is what gets approved, and the prompt says so.
    assert_eq!(req["target"], s(&data));
    assert_eq!(
        req["options"],
        serde_json::json!(["allow-once", "allow-always", "deny"])
    );
    assert!(
        req["reason"].as_str().unwrap().contains("next command"),
        "{req}"
    );
    assert!(session_file(&env, "s1").is_file());

    // `warden check` in the session sees the approval; outside the session nothing changed.
    let again = run(&env, &["check", "--write", s(&target), "--session", "s1"]);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(
        again.stdout.contains("approved for this session"),
        "{again:?}"
    );
    let other = run(&env, &["check", "--write", s(&target)]);
    assert_eq!(other.code, 2, "{other:?}");

    // The session's next sandbox writes there; a sandbox outside the session cannot.
    let ok = run(&env, &["run", "--session", "s1", "--", "sh", "-c", &script]);
    assert_eq!(ok.code, 0, "{ok:?}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "hi\n");
    let stranger = data.join("stranger.txt");
    let no = run(
        &env,
        &[
            "run",
            "--",
            "sh",
            "-c",
            &format!("echo x > {}", s(&stranger)),
        ],
    );
    assert_ne!(no.code, 0, "{no:?}");
    assert!(!stranger.exists());
    // The approved directory is a writable root like any other: mandatory protections hold.
    let planted = run(
        &env,
        &[
            "run",
            "--session",
            "s1",
            "--",
            "sh",
            "-c",
            &format!(
                "mkdir -p {0}/.claude; echo x > {0}/.claude/settings.json",
                s(&data)
            ),
        ],
    );
    assert!(!data.join(".claude/settings.json").exists(), "{planted:?}");
}

#[test]
fn denied_and_unattended_questions_approve_nothing() {
    let env = TestEnv::new();
    let target = env.root().join("outside/x.txt");
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    let (out, seen) = check_asked(
        &env,
        &["--write", s(&target), "--session", "s2"],
        vec!["deny"],
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(seen.len(), 1);
    assert!(!session_file(&env, "s2").exists(), "a denial was recorded");

    // An answer that was not offered (remove-from-deny-list for a write outside the roots) is
    // a denial.
    let (out, _) = check_asked(
        &env,
        &["--write", s(&target), "--session", "s2"],
        vec!["remove-from-deny-list"],
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert!(!session_file(&env, "s2").exists());

    // Nobody to ask: denied at once, saying why.
    let started = std::time::Instant::now();
    let out = run(
        &env,
        &[
            "check",
            "--write",
            s(&target),
            "--ask",
            "--non-interactive",
            "--session",
            "s2",
        ],
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("no approver"), "{out:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));

    // Domains go the same way: approved for the session, seen by check in that session.
    let (out, seen) = check_asked(
        &env,
        &["--domain", "approved.example", "--session", "s2"],
        vec!["allow-once"],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(seen[0]["kind"], "network");
    let same = run(
        &env,
        &["check", "--domain", "approved.example", "--session", "s2"],
    );
    assert_eq!(same.code, 0, "{same:?}");
    let other = run(
        &env,
        &["check", "--domain", "approved.example", "--session", "s3"],
    );
    assert_eq!(other.code, 2, "{other:?}");
}

#[test]
fn read_approvals_unmask_only_their_path_and_remove_from_deny_list_edits_the_users_file() {
    let env = TestEnv::new();
    let secrets = env.home().join("secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::write(secrets.join("a.key"), "AAA").unwrap();
    std::fs::write(secrets.join("b.key"), "BBB").unwrap();
    let user = env.write_settings(
        "home/.config/warden/settings.json",
        "{\n  // mine\n  \"filesystem\": { \"denyRead\": [\"~/secrets\"] }\n}\n",
    );
    env.write_settings(
        "managed-settings.json",
        r#"{ "filesystem": { "denyRead": ["~/corp"] } }"#,
    );
    let a = secrets.join("a.key");
    let b = secrets.join("b.key");
    let cat = format!("cat {}; echo; cat {}", s(&a), s(&b));

    let (out, seen) = check_asked(
        &env,
        &["--read", s(&a), "--session", "r1"],
        vec!["allow-once"],
    );
    assert_eq!(out.code, 0, "{out:?}");
    // A user-layer deny entry: "remove from deny list" is offered instead of allow-always.
    assert_eq!(
        seen[0]["options"],
        serde_json::json!(["allow-once", "remove-from-deny-list", "deny"])
    );
    assert!(seen[0]["rule"].as_str().unwrap().contains("denyRead"));
    let shown = run(&env, &["run", "--session", "r1", "--", "sh", "-c", &cat]);
    assert!(shown.stdout.contains("AAA"), "{shown:?}");
    assert!(
        !shown.stdout.contains("BBB"),
        "the approval unmasked more: {shown:?}"
    );
    let outside = run(&env, &["run", "--", "sh", "-c", &cat]);
    assert!(!outside.stdout.contains("AAA"), "{outside:?}");

    let (out, _) = check_asked(&env, &["--read", s(&b)], vec!["remove-from-deny-list"]);
    assert_eq!(out.code, 0, "{out:?}");
    let text = std::fs::read_to_string(&user).unwrap();
    assert!(!text.contains("~/secrets"), "{text}");
    assert!(text.contains("// mine"), "the comment was lost: {text}");
    let after = run(&env, &["run", "--", "sh", "-c", &cat]);
    assert!(after.stdout.contains("BBB"), "{after:?}");

    // A managed entry is never asked about: denied at once, naming the organization.
    let corp = env.home().join("corp/x");
    let out = run(
        &env,
        &["check", "--read", s(&corp), "--ask", "--non-interactive"],
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("organization policy"), "{out:?}");
}

#[test]
fn nothing_is_approved_from_inside_a_sandbox() {
    let env = TestEnv::new();
    let bin = warden_tests::warden_bin();
    let target = env.root().join("outside/y.txt");
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    // Seed the store so it exists, then try to forge an approval from inside.
    let (out, _) = check_asked(
        &env,
        &[
            "--write",
            s(&env.root().join("outside/z/q")),
            "--session",
            "in",
        ],
        vec!["deny"],
    );
    assert_eq!(out.code, 1, "{out:?}");
    let store_dir = env.root().join("sessions");
    let forged = format!(
        "{bin} check --write {t} --ask --non-interactive; echo ask=$?; \
         printf '%s' '{{\"paths\":[[\"write\",\"/\"]],\"domains\":[]}}' > {dir}/in.json; \
         echo forge=$?",
        bin = s(&bin),
        t = s(&target),
        dir = s(&store_dir),
    );
    let out = run(&env, &["run", "--session", "in", "--", "sh", "-c", &forged]);
    assert!(out.stdout.contains("ask=125"), "{out:?}");
    assert!(
        out.stderr.contains("inside a sandbox"),
        "no reason given: {out:?}"
    );
    assert!(!out.stdout.contains("forge=0"), "{out:?}");
    assert!(!session_file(&env, "in").exists(), "the store was written");
    // And the next sandbox of that session still cannot write there.
    let next = run(
        &env,
        &[
            "run",
            "--session",
            "in",
            "--",
            "sh",
            "-c",
            &format!("echo x > {}", s(&target)),
        ],
    );
    assert_ne!(next.code, 0);
    assert!(!target.exists());
    // A store the sandbox could write is refused outright.
    let inside = env.project().join("store");
    let out = env
        .command()
        .args(["run", "--session", "x", "--", "true"])
        .env("WARDEN_SESSION_DIR", &inside)
        .env("TMPDIR", env.root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("writable inside the sandbox"));
}

#[test]
fn an_approval_covering_the_session_store_does_not_make_it_writable() {
    // Red-team round 15: "allow once" for a new file approves its directory; when that
    // directory holds the session store (a non-root user's `$TMPDIR/warden-UID/sessions`,
    // a file approved in `$TMPDIR`), the next sandbox of the session could rewrite the
    // store and approve anything for itself — also unsandboxed commands.
    let env = TestEnv::new();
    let store_dir = env.root().join("sessions");
    let (out, _) = check_asked(
        &env,
        &[
            "--write",
            s(&env.root().join("report.txt")),
            "--session",
            "s1",
        ],
        vec!["allow-once"],
    );
    assert_eq!(out.code, 0, "{out:?}");
    let before = std::fs::read(session_file(&env, "s1")).unwrap();
    assert!(
        String::from_utf8_lossy(&before).contains(s(env.root())),
        "the approval covers the store's parent: {}",
        String::from_utf8_lossy(&before)
    );
    // The approval itself works: the sandbox may write the approved directory...
    let forge = format!(
        "echo ok > {ok}; echo approved=$?; \
         printf '%s' '{{\"paths\":[[\"write\",\"/\"]],\"domains\":[]}}' > {dir}/s1.json; \
         echo forge=$?; echo y > {dir}/new.json; echo create=$?; \
         mv {dir} {root}/moved; echo move=$?; cat {dir}/s1.json > /dev/null; echo read=$?; \
         ls {dir} | grep -c json; echo listed=$?",
        ok = s(&env.root().join("report.txt")),
        dir = s(&store_dir),
        root = s(env.root()),
    );
    let out = run(&env, &["run", "--session", "s1", "--", "sh", "-c", &forge]);
    assert!(out.stdout.contains("approved=0"), "{out:?}");
    // ...but not the store, in any way.
    // Round 16: nor read it, or lock its lock file (that stalled the session's approvals).
    for step in ["forge", "create", "move", "read"] {
        assert!(
            !out.stdout.contains(&format!("{step}=0")),
            "{step} succeeded: {out:?}"
        );
    }
    assert_eq!(std::fs::read(session_file(&env, "s1")).unwrap(), before);
    assert!(!store_dir.join("new.json").exists());
    assert!(!env.root().join("moved").exists());
    // Nothing beyond the approval reaches the next sandbox of the session either (the forged
    // store would have approved writing `/`).
    let target = PathBuf::from(format!("/etc/warden-forged-{}", std::process::id()));
    let next = run(
        &env,
        &[
            "run",
            "--session",
            "s1",
            "--",
            "sh",
            "-c",
            &format!("echo x > {}", s(&target)),
        ],
    );
    assert_ne!(next.code, 0, "{next:?}");
    assert!(!target.exists());
}

/// `warden check ARGS --ask` on a pseudo-terminal, pressing `key` once the prompt is shown;
/// returns what the terminal showed and the exit code.
fn check_on_a_terminal(env: &TestEnv, args: &[&str], key: &str) -> (String, i32) {
    let mut all = vec!["check"];
    all.extend_from_slice(args);
    all.push("--ask");
    warden_tests::under_pty(python_in(env), &all, &[("(denied in", key)])
}

#[test]
fn the_terminal_prompt_shows_the_rule_and_offers_what_fits_it() {
    if !warden_tests::ready_unless(
        "the_terminal_prompt_shows_the_rule_and_offers_what_fits_it",
        (!warden_tests::have("python3")).then(|| "python3 is not installed".to_string()),
    ) {
        return;
    }
    let env = TestEnv::new();
    let secrets = env.home().join("secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::write(secrets.join("a.key"), "AAA").unwrap();
    let user = env.write_settings(
        "home/.config/warden/settings.json",
        r#"{ "filesystem": { "denyRead": ["~/secrets"] } }"#,
    );
    let a = secrets.join("a.key");
    let (screen, code) = check_on_a_terminal(&env, &["--read", s(&a), "--session", "t1"], "r");
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains(&format!("reading {}?", s(&a))), "{screen}");
    assert!(screen.contains("rule: filesystem.denyRead"), "{screen}");
    assert!(screen.contains("[r] remove from deny list"), "{screen}");
    assert!(!screen.contains("[a] allow always"), "{screen}");
    assert!(screen.contains("removed from the deny list"), "{screen}");
    let text = std::fs::read_to_string(&user).unwrap();
    assert!(!text.contains("~/secrets"), "{text}");

    // Deny on the terminal: nothing approved, exit 1.
    let out_dir = env.root().join("elsewhere");
    std::fs::create_dir_all(&out_dir).unwrap();
    let target = out_dir.join("f.txt");
    let (screen, code) =
        check_on_a_terminal(&env, &["--write", s(&target), "--session", "t1"], "d");
    assert_eq!(code, 1, "{screen}");
    assert!(screen.contains("[a] allow always"), "{screen}");
    assert!(screen.contains("next command"), "{screen}");
    let snapshot = std::fs::read_to_string(session_file(&env, "t1")).unwrap_or_default();
    assert!(!snapshot.contains("elsewhere"), "{snapshot}");
}

#[test]
fn a_command_line_approved_for_the_session_runs_without_asking_again() {
    let env = TestEnv::new();
    let p = env.project();
    let line = "sudo -n true 2>/dev/null || true; touch approved-marker";
    let refused = run(
        &env,
        &[
            "run",
            "--session",
            "c1",
            "--non-interactive",
            "--command-text",
            line,
        ],
    );
    assert_eq!(refused.code, 126, "{refused:?}");
    assert!(!p.join("approved-marker").exists());

    let (out, seen) = check_asked(
        &env,
        &["--command", line, "--session", "c1"],
        vec!["allow-once"],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(seen[0]["kind"], "command");
    assert_eq!(seen[0]["target"], line);

    let ok = run(
        &env,
        &[
            "run",
            "--session",
            "c1",
            "--non-interactive",
            "--command-text",
            line,
        ],
    );
    assert_eq!(ok.code, 0, "{ok:?}");
    assert!(p.join("approved-marker").exists());
    std::fs::remove_file(p.join("approved-marker")).unwrap();
    // Another session, or another line, is not covered.
    let other = run(
        &env,
        &[
            "run",
            "--session",
            "c2",
            "--non-interactive",
            "--command-text",
            line,
        ],
    );
    assert_eq!(other.code, 126, "{other:?}");
    let changed = run(
        &env,
        &[
            "run",
            "--session",
            "c1",
            "--non-interactive",
            "--command-text",
            "sudo -n true 2>/dev/null || true; touch other-marker",
        ],
    );
    assert_eq!(changed.code, 126, "{changed:?}");
    assert!(!p.join("approved-marker").exists() && !p.join("other-marker").exists());
}

#[test]
fn the_approvals_mode_setting_picks_the_channel_and_a_bad_one_is_refused() {
    let env = TestEnv::new();
    let sock = env.root().join("from-settings.sock");
    env.write_settings(
        "home/.config/warden/settings.json",
        &format!(
            r#"{{ "warden": {{ "approvals": {{ "mode": "unix:{}", "timeoutSeconds": 20 }} }} }}"#,
            sock.display()
        ),
    );
    let target = env.root().join("outside/m.txt");
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    let _ = warden_tests::warden_bin();
    let client = answer_requests(sock.clone(), vec!["allow-once"]);
    let out = run(
        &env,
        &["check", "--write", s(&target), "--ask", "--session", "m1"],
    );
    let seen = client.join().unwrap();
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0]["timeout_seconds"], 20);
    assert!(!sock.exists());

    env.write_settings(
        "home/.config/warden/settings.json",
        r#"{ "warden": { "approvals": { "mode": "sometimes" } } }"#,
    );
    let out = run(&env, &["run", "--", "true"]);
    assert_eq!(out.code, 125, "{out:?}");
    assert!(out.stderr.contains("warden.approvals.mode"), "{out:?}");
}

#[test]
fn terminal_replies_to_the_commands_queries_do_not_answer_the_prompt() {
    if !warden_tests::ready_unless(
        "terminal_replies_to_the_commands_queries_do_not_answer_the_prompt",
        (!warden_tests::have("python3") || !warden_tests::have("curl"))
            .then(|| "python3 and curl are needed".to_string()),
    ) {
        return;
    }
    let env = TestEnv::new();
    let user = env.home().join(".config/warden/settings.json");
    let settings = env.write_settings(
        "s.json",
        r#"{ "warden": { "approvals": { "timeoutSeconds": 3 } } }"#,
    );
    // The command asks for a host nobody allowed, then makes the terminal "type" replies
    // that hold answer letters (xterm's DECRQM reply has `y`, tmux's XTVERSION reply `a`).
    let script = "curl -s -m 20 -o /dev/null -w 'status=%{http_code}\\n' -x http://127.0.0.1:3128 \
                  http://evil-unlisted.test/ & sleep 0.6; printf '\\033[?2004$p'; sleep 0.6; \
                  printf '\\033[>q'; wait";
    // The same, with a thread of the command reading the terminal meanwhile: it takes the
    // head of each reply and leaves the trailing `y` (red-team round 13; the command now has a
    // terminal of its own while questions go to the caller's).
    let reader = r#"import os, sys, threading, time, subprocess
req = subprocess.Popen(["curl", "-s", "-m", "20", "-o", "/dev/null", "-w", "status=%{http_code}\n",
                        "-x", "http://127.0.0.1:3128", "http://evil-unlisted.test/"])
threading.Thread(target=lambda: [os.read(0, 10) for _ in iter(int, 1)], daemon=True).start()
time.sleep(0.6)
for _ in range(20):
    if req.poll() is not None:
        break
    os.write(1, b"\x1b[?2004$p"); time.sleep(0.1)
req.wait()
"#;
    std::fs::write(env.project().join("reader.py"), reader).unwrap();
    for args in [vec!["sh", "-c", script], vec!["python3", "reader.py"]] {
        let cmd = python_in(&env);
        let mut full = vec!["run", "--settings", s(&settings), "--"];
        full.extend(args.iter().copied());
        let (screen, _code) = warden_tests::under_pty(
            cmd,
            &full,
            &[
                ("\u{1b}[?2004$p", "RAW \u{1b}[?2004;2$y"),
                ("\u{1b}[>q", "RAW \u{1b}P>|tmux 3.3a\u{1b}\\"),
            ],
        );
        assert!(
            screen.contains("(denied in"),
            "{args:?}: no prompt: {screen}"
        );
        assert!(!screen.contains("allowed once"), "{args:?}: {screen}");
        assert!(!screen.contains("allowed always"), "{args:?}: {screen}");
        assert!(screen.contains("status=403"), "{args:?}: {screen}");
        let text = std::fs::read_to_string(&user).unwrap_or_default();
        assert!(!text.contains("evil-unlisted.test"), "{text}");
    }
}

/// stdin a terminal, stdout not (`warden run -- cmd > file`): the command cannot get a
/// terminal of its own, so it would share the one questions are asked on — and could answer
/// them (red-team round 14 stole the head of a focus report and left `O`). Nobody is asked:
/// the request is denied at once, and warden says why.
#[test]
fn with_stdout_redirected_questions_are_not_asked_on_the_shared_terminal() {
    if !warden_tests::ready_unless(
        "with_stdout_redirected_questions_are_not_asked_on_the_shared_terminal",
        (!warden_tests::have("python3") || !warden_tests::have("curl"))
            .then(|| "python3 and curl are needed".to_string()),
    ) {
        return;
    }
    let env = TestEnv::new();
    let bin = warden_tests::warden_bin();
    let driver = r#"
import os, pty, subprocess, sys
master, slave = pty.openpty()
p = subprocess.run(sys.argv[1:], stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                   timeout=60, start_new_session=False)
sys.stdout.write(p.stdout.decode(errors="replace"))
sys.stdout.write("\nSTDERR\n" + p.stderr.decode(errors="replace"))
"#;
    let out = python_in(&env)
        .arg("-c")
        .arg(driver)
        .arg(&bin)
        .args([
            "run",
            "--",
            "curl",
            "-s",
            "-m",
            "20",
            "-o",
            "/dev/null",
            "-w",
            "status=%{http_code}\n",
            "-x",
            "http://127.0.0.1:3128",
            "http://evil-unlisted.test/",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // Refused by the proxy, or no proxy at all (nothing to ask, nothing allowed).
    assert!(
        text.contains("status=403") || text.contains("status=000"),
        "{text}"
    );
    assert!(text.contains("questions are denied"), "{text}");
    assert!(!text.contains("allowed once"), "{text}");
}

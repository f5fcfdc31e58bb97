//! Whole-process mode, seen from outside: a scripted stand-in agent (tests/tests/
//! whole_process/agent.py) runs under a pty as `warden run --mode whole-process -- agent`,
//! on its own terminal inside the sandbox. It talks to its terminal, spawns a subagent and an
//! MCP-like stdio server, reads and writes files and fetches URLs; the test checks the host's
//! files and the servers' logs, the approval prompt on the real terminal, and that the keys
//! answering it never reach the agent. Needs root, iproute2, python3 and openssl (the network
//! harness); skips loudly without them, fails under CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use warden_tests::netns::{self, HostsEntry, TestNet};
use warden_tests::TestEnv;

const AGENT_PY: &str = include_str!("whole_process/agent.py");

struct World {
    names: Vec<HostsEntry>,
    net: TestNet,
    env: TestEnv,
    zone: String,
}

impl World {
    fn new(test: &str) -> Option<World> {
        static ZONE: AtomicU32 = AtomicU32::new(0);
        let net = TestNet::or_skip(test)?;
        let env = TestEnv::new();
        let zone = format!(
            "w{}-{}.test",
            std::process::id(),
            ZONE.fetch_add(1, Ordering::Relaxed)
        );
        Some(World {
            names: Vec::new(),
            net,
            env,
            zone,
        })
    }

    fn map(&mut self, label: &str) -> String {
        let name = format!("{label}.{}", self.zone);
        self.names.push(self.net.host_name(&name));
        name
    }
}

/// The `RESULT {...}` lines the agent printed, by name.
fn results(shown: &str) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for line in shown.lines() {
        if let Some(json) = line.trim_start_matches('\r').strip_prefix("RESULT ") {
            // JSON text holds no raw control characters: the line ends at the first one (an
            // approval question can follow a line whose newline the terminal gets later, as
            // the pty delivered the two apart).
            let json = json
                .split(|c: char| c.is_control())
                .next()
                .unwrap_or_default();
            let v: Value = serde_json::from_str(json)
                .unwrap_or_else(|e| panic!("bad RESULT line {line:?}: {e}"));
            for (k, v) in v.as_object().unwrap() {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

/// Runs warden with `args` under a pty in `cwd`, playing the human (see
/// [`warden_tests::under_pty`]); the driver runs with the environment `warden(root)` gives
/// (HOME, XDG_CONFIG_HOME, managed settings), so warden under it sees only the test's
/// settings. Returns what the terminal showed and warden's exit code.
fn under_pty(env: &TestEnv, cwd: &Path, args: &[String], steps: &[(&str, &str)]) -> (String, i32) {
    let root = env.root();
    let mut cmd = std::process::Command::new(netns::python3());
    cmd.current_dir(cwd)
        .env("HOME", root.join("home"))
        .env("XDG_CONFIG_HOME", root.join("home/.config"))
        .env(
            "WARDEN_MANAGED_SETTINGS",
            root.join("managed-settings.json"),
        )
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    warden_tests::under_pty(cmd, &args, steps)
}

#[test]
fn a_whole_agent_runs_confined_on_its_own_terminal() {
    let Some(mut w) = World::new("a_whole_agent_runs_confined_on_its_own_terminal") else {
        return;
    };
    let allowed = w.map("allowed");
    let asked = w.map("asked");
    let denied = w.map("denied");
    let http = w.net.http_server();
    let project = w.env.project();
    let agent = project.join("agent.py");
    std::fs::write(&agent, AGENT_PY).unwrap();
    let secret = w.env.root().join("secret.txt");
    std::fs::write(&secret, "top secret\n").unwrap();
    let outside = w.env.root().join("outside.txt");
    let rc = w.env.home().join(".bashrc");
    std::fs::write(&rc, "# the user's own\n").unwrap();
    let project_file = project.join("notes.txt");
    let settings = w.env.write_settings(
        "agent.json",
        &serde_json::json!({
            "network": {"allowedDomains": [allowed], "deniedDomains": [denied]},
            "filesystem": {"denyRead": [secret]},
        })
        .to_string(),
    );
    let url = |host: &str, path: &str| format!("http://{host}:{}{path}", http.port());
    let mut args: Vec<String> = vec![
        "run".into(),
        "--mode".into(),
        "whole-process".into(),
        "--settings".into(),
        settings.display().to_string(),
        "--".into(),
        netns::python3().display().to_string(),
        agent.display().to_string(),
    ];
    args.extend([
        url(&allowed, "/allowed"),
        url(&asked, "/asked"),
        url(&denied, "/denied"),
        project_file.display().to_string(),
        outside.display().to_string(),
        secret.display().to_string(),
        rc.display().to_string(),
    ]);
    let (shown, code) = under_pty(
        &w.env,
        &project,
        &args,
        &[
            ("agent> ", "fix the bug\r"),
            ("[o] allow once", "o"),
            ("agent> ", "bye\r"),
        ],
    );
    assert_eq!(code, 0, "{shown}");
    // The status line came first.
    let status = shown
        .lines()
        .find(|l| l.contains("SANDBOX"))
        .unwrap_or_else(|| panic!("no status line: {shown}"));
    assert!(status.contains("whole-process"), "{status}");
    assert!(status.contains(&project.display().to_string()), "{status}");
    assert!(status.contains("1 allowed, 1 denied"), "{status}");
    let r = results(&shown);
    // Its own terminal in the sandbox's devpts, and it is the foreground job there.
    assert_eq!(r["tty"]["isatty"], true, "{shown}");
    assert_eq!(r["tty"]["ttyname"]["value"], "/dev/pts/0", "{shown}");
    assert_eq!(r["tty"]["foreground"], true, "{shown}");
    assert_eq!(r["task"], "fix the bug", "{shown}");
    // The subagent ran in the same pid namespace (pid 1 is warden's init).
    let sub = r["subagent"].as_str().unwrap();
    assert!(sub.starts_with("subagent pid "), "{shown}");
    assert!(sub.ends_with("warden"), "{shown}");
    // The MCP server: wrote in the project, was refused outside and for the secret.
    let mcp = r["mcp"].as_array().unwrap();
    assert_eq!(mcp[0]["result"]["ok"], true, "{shown}");
    assert_eq!(
        std::fs::read_to_string(&project_file).unwrap(),
        "written by the mcp server\n"
    );
    assert_eq!(mcp[1]["result"]["ok"], false, "{shown}");
    assert!(
        !outside.exists(),
        "the MCP server wrote outside the project"
    );
    assert_eq!(mcp[2]["result"]["ok"], false, "{shown}");
    assert!(!shown.contains("top secret"), "{shown}");
    // The shell rc file is protected.
    assert_eq!(r["rc"]["ok"], false, "{shown}");
    assert_eq!(std::fs::read_to_string(&rc).unwrap(), "# the user's own\n");
    // Network: allowed went through, asked was approved on the terminal, denied was refused.
    assert_eq!(r["allowed"]["status"], 200, "{shown}");
    assert_eq!(r["asked"]["status"], 200, "{shown}");
    assert_eq!(r["denied"]["status"], 403, "{shown}");
    assert!(
        shown.contains(&format!(
            "warden: network access to {asked}:{}?",
            http.port()
        )),
        "{shown}"
    );
    assert!(shown.contains("allowed once"), "{shown}");
    let paths: Vec<String> = http.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths, ["/allowed", "/asked"], "{shown}");
    // The key that answered the prompt never reached the agent.
    assert_eq!(r["after"], "bye", "{shown}");
    // The caller's terminal is back in its own mode: the driver saw the end.
    assert!(shown.contains("EXIT 0"), "{shown}");
}

#[test]
fn whole_process_mode_without_a_terminal_runs_on_the_callers_streams() {
    let env = TestEnv::new();
    let out = env.run([
        "run",
        "--mode",
        "whole-process",
        "--",
        "sh",
        "-c",
        "test -t 0 && echo tty || echo no-tty; echo IS_SANDBOX=$IS_SANDBOX; exit 7",
    ]);
    assert_eq!(out.code, 7, "{out:?}");
    assert!(out.stdout.contains("no-tty"), "{out:?}");
    assert!(out.stdout.contains("IS_SANDBOX=1"), "{out:?}");
    assert!(
        out.stderr.contains("warden: SANDBOX whole-process"),
        "{out:?}"
    );
    let quiet = env.run(["run", "--mode", "whole-process", "-q", "--", "true"]);
    assert_eq!(quiet.code, 0, "{quiet:?}");
    assert!(!quiet.stderr.contains("SANDBOX"), "{quiet:?}");
}

#[test]
fn the_mode_comes_from_settings_and_a_bad_mode_is_refused() {
    let env = TestEnv::new();
    let s = env.write_settings("mode.json", r#"{ "mode": "whole-process" }"#);
    let out = env.run(["run", "--settings", s.to_str().unwrap(), "--", "true"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("SANDBOX whole-process"), "{out:?}");
    let bad = env.run(["run", "--mode", "everything", "--", "true"]);
    assert_eq!(bad.code, 125, "{bad:?}");
    assert!(bad.stderr.contains("per-command"), "{bad:?}");
}

#[test]
fn on_its_own_terminal_a_shell_has_job_control_and_follows_the_window_size() {
    let env = TestEnv::new();
    let project = env.project();
    let args: Vec<String> = ["run", "--pty", "--", "bash", "--norc", "--noprofile", "-i"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (shown, code) = under_pty(
        &env,
        &project,
        &args,
        &[
            ("", "PS1='$ '; sleep 30\r"),
            ("sleep 30\r\n", "SLEEP 0.5"),
            // Ctrl-Z stops the foreground job: the shell's own job control.
            ("", "\x1a"),
            ("Stopped", "jobs; kill -9 %1; echo killed-$?\r"),
            ("killed-0", "RESIZE 40 100"),
            ("", "stty size\r"),
            ("40 100", "exit 5\r"),
        ],
    );
    assert!(shown.contains("Stopped"), "{shown}");
    assert!(shown.contains("sleep 30"), "{shown}");
    assert!(shown.contains("killed-0"), "{shown}");
    assert!(shown.contains("40 100"), "{shown}");
    assert_eq!(code, 5, "{shown}");
    // No job-control warning: the shell got a controlling terminal.
    assert!(!shown.contains("no job control"), "{shown}");
}

#[test]
fn command_text_runs_the_gated_line_sandboxed_and_a_hook_can_refuse_it() {
    let env = TestEnv::new();
    let project = env.project();
    let outside = env.root().join("outside.txt");
    let keep = project.join("keep.txt");
    std::fs::write(&keep, "keep me\n").unwrap();
    // The line runs as `sh -c LINE` in the sandbox: its exit code passes through, writes
    // outside the project are refused.
    let line = format!(
        "echo made > made.txt; echo x > {} 2>/dev/null || echo refused; exit 4",
        outside.display()
    );
    let out = env.run(["run", "--command-text", &line]);
    assert_eq!(out.code, 4, "{out:?}");
    assert!(out.stdout.contains("refused"), "{out:?}");
    assert!(project.join("made.txt").exists());
    assert!(!outside.exists());
    // A hook that refuses `rm` lines and allows the rest.
    let hook = env.root().join("hook.sh");
    std::fs::write(
        &hook,
        "#!/bin/sh\nin=$(cat)\ncase \"$in\" in\n  *'\"command\":\"rm '*) echo '{\"decision\":\"deny\",\"reason\":\"no rm today\"}' ;;\n  *) echo allow ;;\nesac\n",
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let s = env.write_settings(
        "hook.json",
        &serde_json::json!({"warden": {"hooks": {"beforeCommand": hook}}}).to_string(),
    );
    let refused = env.run([
        "run",
        "--settings",
        s.to_str().unwrap(),
        "--command-text",
        "rm keep.txt",
    ]);
    assert_eq!(refused.code, 126, "{refused:?}");
    assert!(refused.stderr.contains("no rm today"), "{refused:?}");
    assert!(keep.exists(), "the refused line ran");
    let allowed = env.run([
        "run",
        "--settings",
        s.to_str().unwrap(),
        "--command-text",
        "cat keep.txt",
    ]);
    assert_eq!(allowed.code, 0, "{allowed:?}");
    assert_eq!(allowed.stdout, "keep me\n");
}

#[test]
fn an_unsandboxed_request_is_asked_on_the_terminal_and_never_runs_as_root() {
    let env = TestEnv::new();
    let project = env.project();
    let s = env.write_settings("u.json", r#"{ "allowUnsandboxedCommands": true }"#);
    let marker = env.root().join("ran-unsandboxed");
    let line = format!("touch {}", marker.display());
    let args = |_: ()| -> Vec<String> {
        [
            "run",
            "--settings",
            s.to_str().unwrap(),
            "--unsandboxed",
            "--command-text",
            &line,
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    // Denied at the prompt: refused, nothing ran.
    let (shown, code) = under_pty(&env, &project, &args(()), &[("[d] deny", "d")]);
    assert!(
        shown.contains(&format!("warden: running {line}?")),
        "{shown}"
    );
    assert!(shown.contains("outside the sandbox"), "{shown}");
    assert!(!shown.contains("[a] allow always"), "{shown}");
    assert_eq!(code, 126, "{shown}");
    assert!(!marker.exists());
    // Approved, but warden runs as root outside any sandbox: refused all the same.
    let (shown, code) = under_pty(&env, &project, &args(()), &[("[d] deny", "o")]);
    assert!(shown.contains("allowed once"), "{shown}");
    assert!(
        shown.contains("refusing to run a command unsandboxed as root"),
        "{shown}"
    );
    assert_eq!(code, 125, "{shown}");
    assert!(!marker.exists());
    // Without a terminal nobody can approve it.
    let out = env.run([
        "run",
        "--settings",
        s.to_str().unwrap(),
        "--unsandboxed",
        "--command-text",
        &line,
    ]);
    assert_eq!(out.code, 126, "{out:?}");
    assert!(out.stderr.contains("no approver"), "{out:?}");
    assert!(!marker.exists());
}

/// Red-team round 15: with `touch` excluded and allowlisted, lines whose commands all match
/// but which do more than their commands say ran on the host without approval. They now run
/// sandboxed: their writes outside the project are refused. (`IS_SANDBOX=1` stands for a
/// harness that is itself sandboxed, where warden runs unsandboxed lines as root.)
#[test]
fn only_plain_excluded_lines_run_outside_the_sandbox() {
    let env = TestEnv::new();
    let outside = env.root().join("outside.txt");
    let s = env.write_settings(
        "x.json",
        r#"{ "excludedCommands": ["touch:*"],
             "warden": { "commands": { "autoRun": "use_allowlist", "allow": ["touch"] } } }"#,
    );
    let run = |line: &str| {
        let out = env
            .command()
            .args([
                "run",
                "--settings",
                s.to_str().unwrap(),
                "--command-text",
                line,
            ])
            .env("IS_SANDBOX", "1")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // A plain excluded line runs on the host: it creates a file outside the project.
    let plain = env.root().join("plain-ran-outside");
    let (code, err) = run(&format!("touch {}", plain.display()));
    assert_eq!(code, Some(0), "{err}");
    assert!(plain.exists(), "the plain line did not run outside: {err}");
    for line in [
        format!("touch a > {}", outside.display()),
        format!("touch a; >{}", outside.display()),
        format!("PATH=.; touch a > {}", outside.display()),
        format!("touch {}-*", outside.display()),
    ] {
        let (_, err) = run(&line);
        assert!(!outside.exists(), "{line:?} ran outside the sandbox: {err}");
    }
    assert!(!env.root().join("outside.txt-*").exists());
}

/// Red-team round 16: an excluded `git status` runs the host's git, which descends into a
/// submodule the sandboxed command made and ran its `core.fsmonitor` on the host. Unsandboxed
/// lines run with git's fsmonitor, hooks and submodule recursion switched off.
#[test]
fn an_excluded_git_status_does_not_run_what_a_sandboxed_submodule_configured() {
    let env = TestEnv::new();
    let project = env.project();
    let marker = env.root().join("PWNED");
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .current_dir(&project)
            .args(["-c", "user.email=t@t", "-c", "user.name=t"])
            .args(args)
            .env("HOME", env.home())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    git(&["init", "-q"]);
    git(&["commit", "-q", "--allow-empty", "-m", "init"]);
    // Sandboxed: a nested repository with a hostile fsmonitor, recorded as a gitlink.
    let plant = format!(
        "git init -q sub && git -C sub -c user.email=t@t -c user.name=t commit -q --allow-empty \
         -m x && git -C sub config core.fsmonitor 'touch {m}; echo' && git add sub && echo planted",
        m = marker.display()
    );
    let out = env.run(["run", "--", "sh", "-c", &plant]);
    assert!(out.stdout.contains("planted"), "{out:?}");
    assert!(!marker.exists(), "the sandbox could write it: {out:?}");
    let stderr = excluded_git_status(&env);
    assert!(stderr.contains("running unsandboxed"), "{stderr}");
    assert!(
        !marker.exists(),
        "the submodule's fsmonitor ran on the host: {stderr}"
    );
}

/// Red-team round 17: in a repository the sandboxed agent made (`git init`: its config is
/// the agent's), an excluded `git status` ran the clean filter that config named on the
/// host. Such a line runs sandboxed; in the user's own repository (config protected) it
/// still runs outside.
#[test]
fn an_excluded_git_line_in_a_repository_the_agent_made_stays_sandboxed() {
    let env = TestEnv::new();
    let project = env.project();
    let marker = env.root().join("FILTER-RAN");
    let plant = format!(
        "git init -q && git config filter.x.clean 'touch {m}; cat' && \
         echo '*.txt filter=x' > .gitattributes && echo a > a.txt && git add -A 2>/dev/null; \
         rm -f {m}; echo planted",
        m = marker.display()
    );
    let out = env.run(["run", "--", "sh", "-c", &plant]);
    assert!(out.stdout.contains("planted"), "{out:?}");
    assert!(!marker.exists(), "{out:?}");
    std::fs::write(project.join("a.txt"), "b\n").unwrap();
    let stderr = excluded_git_status(&env);
    assert!(stderr.contains("the line runs sandboxed"), "{stderr}");
    assert!(
        !marker.exists(),
        "the agent's filter ran on the host: {stderr}"
    );
}

/// `warden run --command-text 'git status'` in the project with `git status` excluded and
/// allowlisted, as a sandboxed harness would (`IS_SANDBOX=1`); warden's stderr.
fn excluded_git_status(env: &TestEnv) -> String {
    let s = env.write_settings(
        "x.json",
        r#"{ "excludedCommands": ["git status"],
             "warden": { "commands": { "autoRun": "use_allowlist", "allow": ["git status"] } } }"#,
    );
    let out = env
        .command()
        .current_dir(env.project())
        .args([
            "run",
            "--settings",
            s.to_str().unwrap(),
            "--command-text",
            "git status",
        ])
        .env("IS_SANDBOX", "1")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Red-team round 23: with `--cwd` spelled through a symlink inside the writable project, the
/// live reloader re-read the project layer through that link, and the command repointed it at
/// a settings file of its own (allowedDomains widened while it ran). The project layer is now
/// read from the resolved working directory, at start and on every reload.
#[test]
fn a_cwd_through_a_link_cannot_be_repointed_to_other_project_settings() {
    let env = TestEnv::new();
    let project = env.project();
    std::os::unix::fs::symlink(".", project.join("here")).unwrap();
    let user = env.write_settings(
        "home/.config/warden/settings.json",
        r#"{"network": {"allowedDomains": ["a.example"]}}"#,
    );
    let script = "mkdir -p evil/.warden && \
         echo '{\"network\":{\"allowedDomains\":[\"b.example\"]}}' > evil/.warden/settings.json && \
         ln -sfn evil here && touch step1; \
         i=0; while [ ! -e go1 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; echo done";
    let mut child = env
        .command()
        .args(["run", "--cwd"])
        .arg(project.join("here"))
        .args(["--", "sh", "-c", script])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !project.join("step1").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never got going"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Time for the reloader to notice the repointed link (it polls every few hundred ms).
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // A real edit, so that the watcher is seen working.
    std::fs::write(
        &user,
        r#"{"network": {"allowedDomains": ["a.example", "c.example"]}}"#,
    )
    .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    std::fs::write(project.join("go1"), "").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "warden did not end");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("done"), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("settings changed"),
        "the live watcher never reloaded: {stderr}"
    );
    assert!(
        !stderr.contains(".warden/settings.json"),
        "the repointed project layer was loaded: {stderr}"
    );
}

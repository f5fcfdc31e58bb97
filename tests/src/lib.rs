//! Helpers for black-box tests: find (and build) the `warden` binary and run it in an isolated
//! environment, so a developer's own `~/.config/warden`, `/etc/warden` or `WARDEN_*` variables
//! never leak into a test.
//!
//! ```no_run
//! let env = warden_tests::TestEnv::new();
//! let settings = env.write_settings("s.json", r#"{ "network": { "allowedDomains": ["github.com"] } }"#);
//! let settings = settings.display().to_string();
//! let out = env.run(["check", "--settings", &settings, "--domain", "github.com"]);
//! assert_eq!(out.code, 0, "{}", out.stderr);
//! ```

pub mod netns;

pub use netns::{in_ci, is_root};

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use tempfile::TempDir;

/// The `warden` binary of the workspace, built with the profile of the running test.
///
/// Test executables live in `<target>/<profile>/deps/`, so the binary is
/// `<target>/<profile>/warden` (this follows `CARGO_TARGET_DIR` and `--target-dir`). The first
/// call in a process runs `cargo build -p warden --bin warden` for that profile, which is a no-op
/// when the binary is fresh: `cargo test` itself does not rebuild another package's binary, so
/// without this a test could silently run a stale one. Panics if the build fails.
pub fn warden_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(build_warden).clone()
}

fn build_warden() -> PathBuf {
    let exe = std::env::current_exe()
        .unwrap_or_else(|e| panic!("cannot locate the running test executable: {e}"));
    let (Some(profile_dir), Some(target_dir)) =
        (exe.parent().and_then(Path::parent), exe.ancestors().nth(3))
    else {
        panic!("{} is not in <target>/<profile>/deps/", exe.display());
    };
    let profile = match profile_dir.file_name().and_then(OsStr::to_str) {
        Some("debug") => "dev",
        Some(name) => name,
        None => panic!("no profile directory above {}", exe.display()),
    };
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or_else(|| panic!("warden-tests is not inside the workspace"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let args = [
        "build",
        "-p",
        "warden",
        "--bin",
        "warden",
        "--profile",
        profile,
    ];
    let out = Command::new(cargo)
        .args(args)
        .current_dir(workspace)
        .env("CARGO_TARGET_DIR", target_dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run cargo to build warden: {e}"));
    let bin = profile_dir.join("warden");
    if !out.status.success() || !bin.is_file() {
        panic!(
            "`cargo {}` (target dir {}) did not produce {}: {}\n{}",
            args.join(" "),
            target_dir.display(),
            bin.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    bin
}

/// A `warden` command isolated in `root`, a temporary directory the caller owns:
/// `HOME` is `root/home`, `XDG_CONFIG_HOME` is `root/home/.config`, `WARDEN_MANAGED_SETTINGS` is
/// `root/managed-settings.json` (absent unless the test writes it), the working directory is
/// `root/project`, and no other `WARDEN_*` variable of the caller's environment is passed on.
/// [`TestEnv`] creates that layout.
pub fn warden(root: &Path) -> Command {
    let mut cmd = Command::new(warden_bin());
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("WARDEN_") {
            cmd.env_remove(name);
        }
    }
    cmd.current_dir(root.join("project"))
        .env("HOME", root.join("home"))
        .env("XDG_CONFIG_HOME", root.join("home/.config"))
        .env(
            "WARDEN_MANAGED_SETTINGS",
            root.join("managed-settings.json"),
        )
        .env("WARDEN_SESSION_DIR", root.join("sessions"));
    cmd
}

/// Answers each `permission_request` on the approvals control channel at `sock` (waiting up
/// to 60 s for it to appear; build warden with [`warden_bin`] before starting the clock) with the next of `answers` (`allow-once`, `deny`, …); returns
/// the requests it saw.
pub fn answer_requests(
    sock: PathBuf,
    answers: Vec<&'static str>,
) -> std::thread::JoinHandle<Vec<serde_json::Value>> {
    std::thread::spawn(move || {
        use std::io::{BufRead, BufReader, Write};
        use std::time::{Duration, Instant};
        let deadline = Instant::now() + Duration::from_secs(60);
        let stream = loop {
            if let Ok(s) = std::os::unix::net::UnixStream::connect(&sock) {
                break s;
            }
            assert!(
                Instant::now() < deadline,
                "no approvals socket at {}",
                sock.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut out = stream
            .try_clone()
            .unwrap_or_else(|e| panic!("cloning the approvals stream: {e}"));
        let mut seen = Vec::new();
        let mut lines = BufReader::new(stream).lines();
        for answer in answers {
            let Some(Ok(line)) = lines.next() else { break };
            let req: serde_json::Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("a request that is not JSON: {line}: {e}"));
            let resp = serde_json::json!(
                {"type": "permission_response", "id": req["id"], "decision": answer}
            );
            writeln!(out, "{resp}").unwrap_or_else(|e| panic!("answering: {e}"));
            seen.push(req);
        }
        seen
    })
}

/// A temporary directory laid out for [`warden`]: `home/` (with `.config/`) and `project/`.
/// Settings layers are files in it: `home/.config/warden/settings.json` (user),
/// `project/.warden/settings.json` (project), `managed-settings.json` (managed), or any other
/// name for a `--settings` file.
pub struct TestEnv {
    dir: TempDir,
}

/// What a `warden` run returned.
#[derive(Debug)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl TestEnv {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("warden-test-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temporary directory: {e}"));
        let env = TestEnv { dir };
        for path in [env.home().join(".config"), env.project()] {
            fs::create_dir_all(&path)
                .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
        }
        env
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn home(&self) -> PathBuf {
        self.root().join("home")
    }

    pub fn project(&self) -> PathBuf {
        self.root().join("project")
    }

    /// Writes `json` (JSONC or deliberately broken text is fine) to `name` below the root,
    /// creating parent directories, and returns its path.
    pub fn write_settings(&self, name: &str, json: &str) -> PathBuf {
        let path = self.root().join(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)
                .unwrap_or_else(|e| panic!("cannot create {}: {e}", parent.display()));
        }
        fs::write(&path, json).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        path
    }

    /// A `warden` command isolated in this environment (see [`warden`]).
    pub fn command(&self) -> Command {
        warden(self.root())
    }

    /// Runs `warden ARGS` in this environment. Panics if warden cannot start or dies by a signal.
    pub fn run<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let out = self
            .command()
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run warden: {e}"));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let Some(code) = out.status.code() else {
            panic!(
                "warden died: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
                out.status
            );
        };
        Output {
            code,
            stdout,
            stderr,
        }
    }
}

impl Default for TestEnv {
    fn default() -> Self {
        Self::new()
    }
}

/// Compiles the C program `source` with `cc` into `env`'s project as `name` (a C compiler is
/// there wherever Rust links).
pub fn compile_c(env: &TestEnv, name: &str, source: &str) {
    let src = env.root().join(format!("{name}.c"));
    fs::write(&src, source).unwrap_or_else(|e| panic!("cannot write {}: {e}", src.display()));
    let cc = Command::new("cc")
        .arg("-o")
        .arg(env.project().join(name))
        .arg(&src)
        .output()
        .unwrap_or_else(|e| {
            panic!("a C compiler (`cc`, which Rust's own linking needs) is required: {e}")
        });
    assert!(cc.status.success(), "{cc:?}");
}

/// A python program that takes every inotify instance it can get, prints how many, and holds
/// them for `{secs}` seconds.
pub fn hold_inotify_instances(secs: u32) -> String {
    format!(
        "import ctypes, sys, time\nl = ctypes.CDLL(None)\nn = 0\n\
         while l.inotify_init1(0) >= 0: n += 1\nprint(n, flush=True)\ntime.sleep({secs})"
    )
}

/// A child process killed (and reaped) when dropped, also when the test panics.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `cmd` with its stdout piped and returns it with the first line it prints.
pub fn spawn_and_read_line(cmd: &mut Command) -> (KillOnDrop, String) {
    let mut child = KillOnDrop(
        cmd.stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}")),
    );
    let mut line = String::new();
    let stdout = child.0.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)
        .unwrap_or_else(|e| panic!("reading {cmd:?}: {e}"));
    (child, line)
}

/// Whether `tool` is on PATH.
pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `true` when `missing` is `None`. Otherwise a test whose prerequisite is missing panics
/// under `CI=true` and elsewhere prints a loud skip notice naming `test`, and returns `false`.
pub fn ready_unless(test: &str, missing: Option<String>) -> bool {
    let Some(what) = missing else {
        return true;
    };
    assert!(!in_ci(), "{test}: CI=true but {what}");
    eprintln!("\n*** SKIPPED {test}: {what} ***\n");
    false
}

/// [`ready_unless`] for tests that need root; `why` says what for.
pub fn root_or_skip(test: &str, why: &str) -> bool {
    ready_unless(
        test,
        (!is_root()).then(|| format!("not running as root ({why})")),
    )
}

/// Runs `warden ARGS` on a pseudo-terminal (python's `pty.fork`), playing the human: `cmd`
/// is the `python3` [`Command`] to run the driver with (its working directory and environment
/// are warden's). Each `(wait_for, keys)` step waits until the terminal has shown `wait_for`
/// (counted from the end of the previous match) and then types `keys` after a person's
/// reaction time of 0.3 s (`RAW BYTES` types at once, as a terminal answering a query does;
/// `RESIZE ROWS COLS` resizes the terminal instead, `SLEEP SECONDS` waits). Returns everything the terminal
/// showed (ending with `EXIT n`) and warden's exit code.
pub fn under_pty(mut cmd: Command, args: &[&str], steps: &[(&str, &str)]) -> (String, i32) {
    let driver = r#"
import json, os, pty, select, sys, time
args, steps = json.loads(sys.argv[1]), json.loads(sys.argv[2])
pid, fd = pty.fork()
if pid == 0:
    os.execv(args[0], args)
out, seen = b"", 0
deadline = time.time() + 90
while time.time() < deadline:
    if steps:
        want = steps[0][0].encode()
        at = out.find(want, seen)
        if at >= 0:
            seen = at + len(want)
            keys = steps.pop(0)[1]
            if keys.startswith("RAW "):
                # The terminal itself answering a query: at once.
                os.write(fd, keys[4:].encode())
            elif keys.startswith("SLEEP "):
                time.sleep(float(keys.split()[1]))
            elif keys.startswith("RESIZE "):
                import fcntl, struct, termios
                rows, cols = map(int, keys.split()[1:])
                fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            else:
                # A person reads what appeared before pressing a key (warden's prompts ignore
                # input in their first 250 ms: a terminal's reply to a query is not an answer).
                time.sleep(0.3)
                os.write(fd, keys.encode())
            continue
    r, _, _ = select.select([fd], [], [], 0.1)
    if r:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
if time.time() >= deadline:
    os.kill(pid, 9)
    out += b"\nDRIVER TIMEOUT waiting for %r\n" % (steps[:1],)
_, status = os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
sys.stdout.write("\nEXIT %d\n" % os.waitstatus_to_exitcode(status))
"#;
    let mut argv = vec![warden_bin().display().to_string()];
    argv.extend(args.iter().map(|a| a.to_string()));
    let steps: Vec<[&str; 2]> = steps.iter().map(|(w, k)| [*w, *k]).collect();
    // Lists of strings always encode.
    let out = cmd
        .arg("-c")
        .arg(driver)
        .arg(serde_json::to_string(&argv).unwrap_or_default())
        .arg(serde_json::to_string(&steps).unwrap_or_default())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running python's pty driver: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let code = text
        .rsplit_once("EXIT ")
        .and_then(|(_, c)| c.trim().parse().ok())
        .unwrap_or_else(|| panic!("the driver did not finish: {text}"));
    (text, code)
}

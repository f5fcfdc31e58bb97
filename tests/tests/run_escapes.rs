//! Escape attempts from inside `warden run`, each checked from the host side or by the
//! errno the kernel returned inside. Uses /usr/bin/python3 for syscalls the shell can't make.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test
use std::path::PathBuf;
use std::process::Stdio;
use warden_tests::{Output, TestEnv};

fn run(env: &TestEnv, argv: &[&str]) -> Output {
    let base = env.root().join("runs");
    std::fs::create_dir_all(&base).unwrap();
    let out = env
        .command()
        .arg("run")
        .arg("--")
        .args(argv)
        .env("TMPDIR", &base)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn python(env: &TestEnv, code: &str) -> Output {
    let py = "/usr/bin/python3";
    assert!(
        std::path::Path::new(py).exists(),
        "{py} is required for the escape tests (apt-get install python3)"
    );
    run(env, &[py, "-c", code])
}

/// Runs `calls` (python expressions returning an errno or 0) and returns their results.
const PRELUDE: &str = r#"
import ctypes, ctypes.util, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return 0 if r >= 0 else ctypes.get_errno()
"#;

#[test]
fn namespace_mount_keyring_and_handle_syscalls_are_refused() {
    let env = TestEnv::new();
    let code = format!(
        "{PRELUDE}
EPERM = 1
res = {{
  'unshare_user': sc(272, 0x10000000),
  'unshare_mnt': sc(272, 0x00020000),
  'setns': sc(308, 0, 0),
  'mount': sc(165, 0, 0, 0, 0, 0),
  'keyctl_get_keyring': sc(250, 0, -3, 0),
  'add_key': sc(248, 0, 0, 0, 0, 0),
  'open_by_handle_at': sc(304, -100, 0, 0),
  'ptrace_traceme': sc(101, 0, 0, 0, 0),
  'bpf': sc(321, 0, 0, 0),
  'perf_event_open': sc(298, 0, 0, -1, -1, 0),
  'io_uring_setup': sc(425, 1, 0),
  'init_module': sc(175, 0, 0, 0),
  'x32_getpid': sc(0x40000000 + 39),
}}
print(' '.join(f'{{k}}={{v}}' for k, v in res.items()))
print('getpid_ok' if sc(39) == 0 else 'getpid_broken')
"
    );
    let out = python(&env, &code);
    assert_eq!(out.code, 0, "{out:?}");
    for pair in out.stdout.lines().next().unwrap().split_whitespace() {
        let (name, errno) = pair.split_once('=').unwrap();
        assert_eq!(
            errno, "1",
            "{name} was not refused with EPERM: {}",
            out.stdout
        );
    }
    assert!(out.stdout.contains("getpid_ok"), "{out:?}");
}

#[test]
fn tiocsti_under_a_pty_is_refused() {
    let env = TestEnv::new();
    let out = python(
        &env,
        "import pty, fcntl, termios, errno\n\
         m, s = pty.openpty()\n\
         try:\n  fcntl.ioctl(s, termios.TIOCSTI, b'x'); print('INJECTED')\n\
         except OSError as e:\n  print('refused', errno.errorcode[e.errno])\n",
    );
    assert_eq!(out.stdout.trim(), "refused EPERM", "{out:?}");
}

#[test]
fn unix_sockets_are_refused_by_default() {
    let env = TestEnv::new();
    let out = python(
        &env,
        "import socket\n\
         try:\n  socket.socket(socket.AF_UNIX); print('UNIX-OK')\n\
         except OSError as e: print('refused', e.errno)\n\
         a, b = socket.socketpair(); print('pair-ok')\n\
         socket.socket(socket.AF_INET); print('inet-ok')\n",
    );
    assert_eq!(out.stdout, "refused 1\npair-ok\ninet-ok\n", "{out:?}");
}

#[test]
fn device_nodes_hardlinks_and_proc_roots_lead_nowhere() {
    let env = TestEnv::new();
    let out = run(
        &env,
        &[
            "sh",
            "-c",
            "mknod ./null2 c 1 3 2>/dev/null && echo MKNOD; \
             ln /etc/hostname ./hl 2>/dev/null && echo HARDLINK; \
             ls /proc/1/root/ >/dev/null 2>&1 && echo PROC1ROOT; \
             cat /proc/1/environ >/dev/null 2>&1 && echo PROC1ENV; \
             echo 1 > /proc/sys/kernel/sysrq 2>/dev/null && echo SYSCTL; \
             echo x > /proc/sysrq-trigger 2>/dev/null && echo SYSRQ; \
             for f in /sys/fs/cgroup/*/release_agent; do echo x > $f 2>/dev/null && echo RELEASE_AGENT; done; \
             echo x > /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null && echo SYSFS; \
             mount -t tmpfs none /mnt 2>/dev/null && echo MOUNTED; \
             unshare -Ur true 2>/dev/null && echo NESTED_USERNS; \
             for f in kallsyms kpageflags kpagecount slabinfo vmallocinfo iomem; do \
               [ \"$(head -c 4096 /proc/$f 2>/dev/null | wc -c)\" -gt 0 ] && echo LEAK_$f; done; \
             echo end",
        ],
    );
    assert_eq!(out.stdout.trim(), "end", "{out:?}");
    assert!(!env.project().join("null2").exists());
    assert!(!env.project().join("hl").exists());
}

#[test]
fn leaked_descriptors_do_not_reach_the_command() {
    let env = TestEnv::new();
    let secret = env.root().join("secret.txt");
    std::fs::write(&secret, "LEAKED-FD-SECRET").unwrap();
    // Opened without O_CLOEXEC, as a careless parent would: inherited by warden.
    let fd = nix::fcntl::open(
        &secret,
        nix::fcntl::OFlag::O_RDONLY,
        nix::sys::stat::Mode::empty(),
    )
    .unwrap();
    use std::os::fd::AsRawFd;
    let n = fd.as_raw_fd();
    let out = run(
        &env,
        &[
            "sh",
            "-c",
            &format!("ls /proc/self/fd; cat <&{n}; echo end"),
        ],
    );
    drop(fd);
    assert!(!out.stdout.contains("LEAKED-FD-SECRET"), "{out:?}");
    assert!(out.stdout.contains("end"), "{out:?}");
}

#[test]
fn a_symlink_planted_in_one_run_does_not_widen_the_next() {
    let env = TestEnv::new();
    let outside = env.root().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    // Run 1 plants a symlink in the project pointing out, named like an allowWrite entry.
    let out = run(
        &env,
        &[
            "sh",
            "-c",
            &format!("ln -s {} cache && echo planted", outside.display()),
        ],
    );
    assert!(out.stdout.contains("planted"), "{out:?}");
    // Run 2 asks for ./cache to be writable: its real target escapes, so warden refuses.
    let cache: PathBuf = env.project().join("cache");
    let out2 = env
        .command()
        .args([
            "run",
            "--allow-write",
            cache.to_str().unwrap(),
            "--",
            "sh",
            "-c",
        ])
        .arg(format!("echo evil > {}/x", cache.display()))
        .env("TMPDIR", env.root())
        .output()
        .unwrap();
    assert_eq!(
        out2.status.code(),
        Some(125),
        "{}",
        String::from_utf8_lossy(&out2.stderr)
    );
    assert!(String::from_utf8_lossy(&out2.stderr).contains("outside of what it names"));
    assert!(!outside.join("x").exists());
    // `warden check` agrees: a write there (through the link or at its target) is denied.
    let settings = env.root().join("allow-cache.json");
    let json = serde_json::json!({"filesystem": {"allowWrite": [cache]}});
    std::fs::write(&settings, json.to_string()).unwrap();
    for target in [cache.join("x"), outside.join("x")] {
        let check = env
            .command()
            .arg("check")
            .arg("--settings")
            .arg(&settings)
            .arg("--write")
            .arg(&target)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&check.stdout);
        assert_eq!(check.status.code(), Some(1), "{target:?}: {text} {check:?}");
        assert!(text.contains("symlink leads out"), "{target:?}: {text}");
    }
}

#[test]
fn an_interactive_shell_works_under_a_pty() {
    let env = TestEnv::new();
    // A terminal session driven through a real pty (python's pty.fork), like a user typing.
    let script = format!(
        r#"
import os, pty, time, select
pid, fd = pty.fork()
if pid == 0:
    os.execv({bin:?}, ["warden", "run", "--", "sh", "-i"])
out = b""
def drain(t):
    global out
    end = time.time() + t
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try: out += os.read(fd, 4096)
            except OSError: return
drain(0.5)
os.write(fd, b"echo PTY-$((6*7)); test -t 0 && echo STDIN-IS-TTY; exit 5\n")
drain(2.0)
_, status = os.waitpid(pid, 0)
print(out.decode(errors="replace"))
print("EXIT", os.waitstatus_to_exitcode(status))
"#,
        bin = warden_tests::warden_bin()
    );
    let py = std::process::Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(&script)
        .current_dir(env.project())
        .env("HOME", env.home())
        .env("TMPDIR", env.root())
        .env("WARDEN_MANAGED_SETTINGS", env.root().join("managed.json"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&py.stdout);
    assert!(
        stdout.contains("PTY-42"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&py.stderr)
    );
    assert!(stdout.contains("STDIN-IS-TTY"), "{stdout}");
    assert!(stdout.contains("EXIT 5"), "{stdout}");
}

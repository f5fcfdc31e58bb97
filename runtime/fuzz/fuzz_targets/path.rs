//! Path decisions on a fixed in-memory tree with symlinks (relative, absolute, dangling, `..`
//! targets, a two-link loop and a self loop) and a git worktree.
//!
//! Input: the first byte picks one of 16 fixed policies (no fuzzed settings: rules or none,
//! TMPDIR or none, approver or none, the working directory itself or through a symlink), the
//! remaining bytes are the path, as raw bytes (NUL and invalid UTF-8 included). The path is
//! checked for reading and writing; every input must give a verdict, never a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use warden::policy::fsview::MemFs;
use warden::policy::load::parse_settings;
use warden::policy::merge::{layer, Context, Policy};
use warden::policy::path::Access;
use warden::policy::Layer;

/// The rules of the policies that have any (odd selectors have none). A rule through the
/// symlink loop would make `Policy::build` fail (as it should), so only inputs go there.
const RULES: &str = r#"{
  "filesystem": {
    "denyRead": ["~/.ssh", "/w/secret", "/etc/**/*.key"],
    "allowRead": ["/w/secret/public"],
    "allowWrite": ["/data", "~/out", "/w/link/sub", "/w/dangling/x"],
    "denyWrite": ["/w/src/gen", "**/*.pem"]
  }
}"#;

fn tree() -> MemFs {
    let mut fs = MemFs::new();
    fs.dir("/w/src/gen")
        .file("/w/src/main.rs", "fn main() {}\n")
        .dir("/w/.git/hooks")
        .file("/w/.git/config", "[core]\n")
        .file("/w/secret/key", "k")
        .file("/w/secret/public/readme", "r")
        // A worktree: `.git` is a file naming the git dir, which names the common dir.
        .file("/w/wt/.git", "gitdir: /w/.git/worktrees/wt\n")
        .file("/w/.git/worktrees/wt/commondir", "../..\n")
        .symlink("/w/link", "/etc")
        .symlink("/w/rel", "src")
        .symlink("/w/up", "../..")
        .symlink("/w/dotdot", "/w/src/../../etc")
        .symlink("/w/dangling", "/nonexistent/deep/er")
        .symlink("/w/chain", "link/ssl")
        .symlink("/w/loop", "/w/loop2")
        .symlink("/w/loop2", "/w/loop")
        .symlink("/w/self", "self")
        .symlink("/w/hooks", ".git/hooks")
        .file("/h/.ssh/id_rsa", "secret")
        .symlink("/h/ssh", ".ssh")
        .dir("/h/out")
        .dir("/data")
        .symlink("/proj", "/w")
        .dir("/tmp/warden")
        .file("/etc/ssl/private/server.key", "k")
        .file("/etc/passwd", "root:x:0:0::/root:/bin/sh\n");
    fs
}

struct Fixture {
    fs: MemFs,
    policies: Vec<Policy>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let fs = tree();
        let rules = match parse_settings(RULES, "fuzz/path.rs") {
            Ok(parsed) => parsed.settings,
            Err(e) => panic!("fuzz harness: the fixed rules do not parse: {e}"),
        };
        let policies = (0u8..16)
            .map(|selector| {
                let layers = if selector & 1 == 0 {
                    vec![layer(Layer::User, 0, "fuzz", rules.clone())]
                } else {
                    Vec::new()
                };
                let context = Context {
                    cwd: PathBuf::from(if selector & 8 == 0 { "/w" } else { "/proj" }),
                    home: "/h".into(),
                    tmpdir: (selector & 2 == 0).then(|| PathBuf::from("/tmp/warden")),
                    approver_attached: selector & 4 == 0,
                };
                let policy = match Policy::build(&layers, context, &fs) {
                    Ok(policy) => policy,
                    Err(e) => panic!("fuzz harness: policy {selector} does not build: {e}"),
                };
                if selector & 4 == 0 {
                    // Session approvals take part in the decision too.
                    policy
                        .approvals
                        .approve_path(Access::Write, Path::new("/w/link"));
                    policy
                        .approvals
                        .approve_path(Access::Read, Path::new("/h/.ssh"));
                }
                policy
            })
            .collect();
        Fixture { fs, policies }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, path)) = data.split_first() else {
        return;
    };
    let fixture = fixture();
    let policy = &fixture.policies[usize::from(selector & 15)];
    let path = Path::new(OsStr::from_bytes(path));
    let _ = policy.check_path(&fixture.fs, path, Access::Read);
    let _ = policy.check_path(&fixture.fs, path, Access::Write);
});

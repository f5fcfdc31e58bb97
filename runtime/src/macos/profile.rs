//! The Seatbelt profile of a sandbox, generated from the effective [`Policy`]: pure code,
//! compiled and tested on every OS (`warden profile --platform macos` prints it anywhere).
//!
//! The profile denies everything by default and allows, in this order (a later rule takes
//! precedence over an earlier one that matches the same operation, as in every SBPL profile):
//! processes and signals within the sandbox, an explicit list of Mach services and sysctls,
//! reading everything but `denyRead` (with the `allowRead` re-openings the policy engine
//! grants), writing the writable roots minus `denyWrite` and the mandatory protections, no
//! renaming or removing of the directories that lead to protected paths, and network only to
//! the proxy's ports on localhost. docs/macos.md explains every rule.
//!
//! Paths never appear in the text: each is a parameter (see [`super::sbpl`]) passed as
//! `-D P<n>=VALUE`, so no file name can change the profile's structure.

use super::glob::{covering_regex, escape_literal, GlobError};
use super::sbpl::{self, CheckError, Expr, SbplError};
use crate::policy::fsview::{lexical, resolve, FsView};
use crate::policy::mandatory::{PROTECTED_DIRS, PROTECTED_FILES};
use crate::policy::merge::Policy;
use crate::policy::path::PathPattern;
use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

/// Mach services the sandbox may look up, each with the reason (docs/macos.md repeats them).
pub const MACH_SERVICES: &[(&str, &str)] = &[
    (
        "com.apple.system.opendirectoryd.libinfo",
        "user and group lookups (getpwuid, getgrnam): whoami, id, ls -l, git, ssh, Python's pwd",
    ),
    (
        "com.apple.system.opendirectoryd.membership",
        "group membership checks (mbr_* functions) behind access checks and id",
    ),
    (
        "com.apple.system.notification_center",
        "notify(3): libc learns of time zone and configuration changes through it",
    ),
    (
        "com.apple.system.logger",
        "syslog(3) and ASL logging by libraries",
    ),
    ("com.apple.logd", "os_log logging by system libraries"),
    (
        "com.apple.cfprefsd.agent",
        "reading user preferences (CFPreferences, `defaults read`); writes stay denied",
    ),
    (
        "com.apple.cfprefsd.daemon",
        "reading system-wide preferences; writes stay denied",
    ),
    (
        "com.apple.bsd.dirhelper",
        "the per-user temporary and cache directory lookup (confstr _CS_DARWIN_USER_TEMP_DIR)",
    ),
];

/// Added with `enableWeakerNetworkIsolation`: certificate verification through the system
/// trust daemon, which Go programs need for TLS (crypto/x509 calls SecTrustEvaluate). trustd
/// itself may fetch OCSP and CRL data and intermediate certificates, outside the proxy.
pub const TRUSTD_SERVICES: &[(&str, &str)] = &[
    (
        "com.apple.trustd",
        "certificate trust evaluation (Security.framework)",
    ),
    (
        "com.apple.trustd.agent",
        "per-user certificate trust settings",
    ),
];

/// A sysctl the sandbox may read: an exact name or (`prefix`) a name prefix.
pub struct Sysctl {
    pub name: &'static str,
    pub prefix: bool,
    pub why: &'static str,
}

const fn sysctl(name: &'static str, why: &'static str) -> Sysctl {
    Sysctl {
        name,
        prefix: false,
        why,
    }
}

const fn sysctl_prefix(name: &'static str, why: &'static str) -> Sysctl {
    Sysctl {
        name,
        prefix: true,
        why,
    }
}

/// Readable sysctls. Deliberately absent: `kern.proc.*` and `kern.procargs2` (the command
/// lines and environments of other processes may hold secrets), network and routing tables.
pub const SYSCTLS: &[Sysctl] = &[
    sysctl(
        "hw.activecpu",
        "CPU count: make -j, nproc, thread pools of Go, Rust, Node, the JVM",
    ),
    sysctl("hw.ncpu", "CPU count (older interface)"),
    sysctl("hw.logicalcpu", "CPU count"),
    sysctl("hw.logicalcpu_max", "CPU count"),
    sysctl("hw.physicalcpu", "physical core count"),
    sysctl("hw.physicalcpu_max", "physical core count"),
    sysctl(
        "hw.memsize",
        "memory size: JVM heap sizing, build tools' job limits",
    ),
    sysctl("hw.pagesize", "page size: allocators"),
    sysctl(
        "hw.pagesize_compat",
        "page size: allocators (compatibility name)",
    ),
    sysctl(
        "hw.cachelinesize",
        "cache geometry: allocators, BLAS, runtimes",
    ),
    sysctl("hw.l1dcachesize", "cache geometry"),
    sysctl("hw.l2cachesize", "cache geometry"),
    sysctl("hw.l3cachesize", "cache geometry"),
    sysctl("hw.byteorder", "byte order"),
    sysctl("hw.cputype", "architecture: uname -m, build scripts"),
    sysctl("hw.cpusubtype", "architecture"),
    sysctl("hw.cpufamily", "CPU family: optimised code paths"),
    sysctl("hw.machine", "uname(3)"),
    sysctl("hw.model", "machine model: platform detection"),
    sysctl(
        "hw.nperflevels",
        "performance and efficiency core groups (Apple silicon)",
    ),
    sysctl_prefix(
        "hw.perflevel",
        "core counts per group: runtimes size their thread pools",
    ),
    sysctl_prefix(
        "hw.optional.",
        "CPU feature flags: OpenSSL, Go, Rust's std_detect, numpy pick code paths",
    ),
    sysctl_prefix("machdep.cpu.", "CPU brand and features on Intel Macs"),
    sysctl("kern.ostype", "uname(3)"),
    sysctl("kern.osrelease", "uname(3), version checks"),
    sysctl("kern.osversion", "the OS build: platform detection"),
    sysctl("kern.version", "uname(3)"),
    sysctl(
        "kern.osproductversion",
        "the macOS version: Python's platform, build scripts",
    ),
    sysctl("kern.hostname", "uname(3) and gethostname(3)"),
    sysctl(
        "kern.osvariant_status",
        "libSystem's OS variant checks at start-up",
    ),
    sysctl(
        "kern.argmax",
        "ARG_MAX: xargs and shells size command lines",
    ),
    sysctl(
        "kern.maxfilesperproc",
        "descriptor limits: subprocess modules close inherited ones",
    ),
    sysctl("kern.maxprocperuid", "sysconf(_SC_CHILD_MAX)"),
    sysctl("kern.boottime", "uptime: psutil, Node's os.uptime"),
    sysctl("kern.usrstack64", "stack bounds for language runtimes"),
    sysctl("vm.loadavg", "getloadavg(3): make -l, uptime"),
    sysctl(
        "sysctl.proc_translated",
        "whether the process runs under Rosetta",
    ),
    sysctl("sysctl.proc_cputype", "the CPU type the process runs as"),
];

/// The proxy's listening ports on localhost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProxyPorts {
    pub http: u16,
    pub socks: u16,
}

/// What the profile needs besides the policy.
#[derive(Clone, Debug)]
pub struct Options {
    /// Where the proxy listens; `None`: no network at all.
    pub proxy: Option<ProxyPorts>,
    /// Put into every deny rule's message, so `log stream` records can be attributed to this
    /// sandbox: letters, digits, `-` and `_`.
    pub tag: String,
}

/// A generated profile: the text for `sandbox-exec -p` and its `-D` parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    pub text: String,
    /// `(name, value)`, in order: `P0`, `P1`, …
    pub params: Vec<(String, Vec<u8>)>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("{what} {path:?} contains a NUL byte and cannot be passed to sandbox-exec")]
    Nul { what: &'static str, path: String },
    #[error(transparent)]
    Glob(#[from] GlobError),
    #[error("allowWrite entry {entry:?} leads through a symlink to {real}, outside itself: the sandbox could have planted the link; name {real} itself")]
    WritableEscapes { entry: String, real: String },
    #[error("session tag {0:?}: only letters, digits, `-` and `_`")]
    Tag(String),
    #[error(transparent)]
    Literal(#[from] SbplError),
    #[error("the generated profile failed its own check: {0}")]
    Check(#[from] CheckError),
}

impl Profile {
    /// `sandbox-exec` arguments before the command: `-p TEXT -D P0=VALUE …`.
    pub fn sandbox_exec_args(&self) -> Vec<OsString> {
        let mut args = vec![OsString::from("-p"), OsString::from(&self.text)];
        for (name, value) in &self.params {
            let mut kv = name.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(value);
            args.push(OsString::from("-D"));
            args.push(OsString::from_vec(kv));
        }
        args
    }

    /// The profile followed by its parameters as comment lines, one per parameter, each value
    /// shell-quoted on a single line (`$'…'` with escapes when it holds anything unprintable),
    /// so the listing cannot break out of its comment.
    pub fn display(&self) -> String {
        let mut out = self.text.clone();
        if !self.params.is_empty() {
            out.push_str(";; Parameters: sandbox-exec -p PROFILE -D NAME=VALUE ... -- COMMAND\n");
            for (name, value) in &self.params {
                out.push_str(&format!(
                    ";; -D {}\n",
                    shell_quote(&[name.as_bytes(), b"=", value].concat())
                ));
            }
        }
        out
    }
}

/// Shell quoting for display: `'…'` for printable UTF-8, `$'…'` with `\xNN` escapes otherwise.
pub fn shell_quote(bytes: &[u8]) -> String {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b"_-./:=@%+,".contains(&b);
    if !bytes.is_empty() && bytes.iter().all(|b| plain(*b)) {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    match std::str::from_utf8(bytes) {
        Ok(s) if !s.chars().any(char::is_control) => format!("'{}'", s.replace('\'', r"'\''")),
        _ => {
            let mut q = String::from("$'");
            for &b in bytes {
                match b {
                    b'\'' => q.push_str("\\'"),
                    b'\\' => q.push_str("\\\\"),
                    0x20..=0x7e => q.push(char::from(b)),
                    _ => q.push_str(&format!("\\x{b:02x}")),
                }
            }
            q.push('\'');
            q
        }
    }
}

/// Parameters by value: each distinct path or regex gets one name.
#[derive(Default)]
struct Params {
    list: Vec<(String, Vec<u8>)>,
    index: HashMap<Vec<u8>, usize>,
}

impl Params {
    fn param(&mut self, what: &'static str, value: Vec<u8>) -> Result<Expr, ProfileError> {
        if value.contains(&0) {
            return Err(ProfileError::Nul {
                what,
                path: String::from_utf8_lossy(&value).into_owned(),
            });
        }
        let i = match self.index.get(&value) {
            Some(i) => *i,
            None => {
                let i = self.list.len();
                self.list.push((format!("P{i}"), value.clone()));
                self.index.insert(value, i);
                i
            }
        };
        Ok(Expr::Param(self.list[i].0.clone()))
    }

    fn path_filter(
        &mut self,
        filter: &'static str,
        what: &'static str,
        path: &Path,
    ) -> Result<Expr, ProfileError> {
        let clean = lexical(Path::new("/"), path);
        let p = self.param(what, clean.into_os_string().into_vec())?;
        Ok(Expr::list([Expr::Sym(filter), p]))
    }

    fn subpath(&mut self, what: &'static str, path: &Path) -> Result<Expr, ProfileError> {
        self.path_filter("subpath", what, path)
    }

    fn literal(&mut self, what: &'static str, path: &Path) -> Result<Expr, ProfileError> {
        self.path_filter("literal", what, path)
    }

    fn regex(&mut self, what: &'static str, re: Vec<u8>) -> Result<Expr, ProfileError> {
        let p = self.param(what, re)?;
        Ok(Expr::list([Expr::Sym("regex"), p]))
    }

    /// The filters covering a settings entry: both spellings of a literal (as written and with
    /// symlinks resolved; Seatbelt sees the resolved one), or the glob's covering regex.
    fn pattern(
        &mut self,
        what: &'static str,
        pat: &PathPattern,
    ) -> Result<Vec<Expr>, ProfileError> {
        match pat {
            PathPattern::Literal { lexical, resolved } => {
                let mut v = vec![self.subpath(what, lexical)?];
                if let Some(r) = resolved {
                    v.push(self.subpath(what, r)?);
                }
                Ok(v)
            }
            PathPattern::Glob(m) => Ok(vec![self.regex(what, covering_regex(m.glob())?)?]),
        }
    }
}

fn sym(s: &'static str) -> Expr {
    Expr::Sym(s)
}

fn any(mut filters: Vec<Expr>) -> Expr {
    if filters.len() == 1 {
        filters.remove(0)
    } else {
        Expr::list(std::iter::once(sym("require-any")).chain(filters))
    }
}

/// `(ACTION OP… [(with message TAG)] FILTER…)`.
fn rule(
    action: &'static str,
    ops: &[&'static str],
    message: Option<&Expr>,
    filters: Vec<Expr>,
) -> Expr {
    let mut v = vec![sym(action)];
    v.extend(ops.iter().map(|o| sym(o)));
    if let Some(m) = message {
        v.push(m.clone());
    }
    for f in filters {
        if !v.contains(&f) {
            v.push(f);
        }
    }
    Expr::List(v)
}

/// A regex matching a fixed ASCII name case-insensitively (APFS volumes usually are), with
/// `.` escaped: `.git` → `\.[gG][iI][tT]`.
fn ci_name(name: &str, out: &mut Vec<u8>) {
    for b in name.bytes() {
        if b.is_ascii_alphabetic() {
            out.extend_from_slice(&[b'[', b.to_ascii_lowercase(), b.to_ascii_uppercase(), b']']);
        } else {
            escape_literal(&[b], out);
        }
    }
}

fn ci_alternation(names: &[&str]) -> Vec<u8> {
    let mut out = vec![b'('];
    for (i, n) in names.iter().enumerate() {
        if i > 0 {
            out.push(b'|');
        }
        ci_name(n, &mut out);
    }
    out.push(b')');
    out
}

/// `/(NAME|…)(/|$)`: a component with one of the protected names, anywhere.
pub fn protected_names_regex() -> Vec<u8> {
    let names: Vec<&str> = PROTECTED_FILES
        .iter()
        .chain(PROTECTED_DIRS)
        .copied()
        .collect();
    let mut re = b"/".to_vec();
    re.extend(ci_alternation(&names));
    re.extend_from_slice(b"(/|$)");
    re
}

/// `/.git/(hooks|config|config.worktree)(/|$)`, without the config files when `allowGitConfig`.
pub fn git_dir_regex(allow_git_config: bool) -> Vec<u8> {
    let entries: &[&str] = if allow_git_config {
        &["hooks"]
    } else {
        &["hooks", "config", "config.worktree"]
    };
    let mut re = b"/".to_vec();
    ci_name(".git", &mut re);
    re.push(b'/');
    re.extend(ci_alternation(entries));
    re.extend_from_slice(b"(/|$)");
    re
}

/// The rest of the git state the policy protects (`Mandatory::check`): in submodule git dirs
/// (`.git/modules/…`, names of several components) any `hooks` directory and a final
/// `config` (unless `allowGitConfig`), `commondir` or `gitdir`; a git dir's own `commondir`
/// and `gitdir`; a linked worktree's pointers and config (`.git/worktrees/NAME/…`).
pub fn git_state_regexes(allow_git_config: bool) -> Vec<Vec<u8>> {
    let git = |rest: &[u8]| {
        let mut re = b"/".to_vec();
        ci_name(".git", &mut re);
        re.extend_from_slice(rest);
        re
    };
    let modules = {
        let mut m = b"/".to_vec();
        ci_name("modules", &mut m);
        m.extend_from_slice(b"/.+/");
        m
    };
    let mut finals = vec!["commondir", "gitdir"];
    if !allow_git_config {
        finals.extend(["config", "config.worktree"]);
    }
    let mut out = Vec::new();
    // .git/modules/…/hooks(/…)
    let mut re = modules.clone();
    ci_name("hooks", &mut re);
    re.extend_from_slice(b"(/|$)");
    out.push(git(&re));
    // .git/modules/…/(config|commondir|gitdir…)$
    let mut re = modules;
    re.extend(ci_alternation(&finals));
    re.push(b'$');
    out.push(git(&re));
    // .git/(commondir|gitdir)$
    let mut re = b"/".to_vec();
    re.extend(ci_alternation(&["commondir", "gitdir"]));
    re.push(b'$');
    out.push(git(&re));
    // .git/worktrees/NAME/(hooks…|config…|commondir|gitdir)
    let mut re = b"/".to_vec();
    ci_name("worktrees", &mut re);
    re.extend_from_slice(b"/[^/]+/");
    let mut names = finals.clone();
    names.push("hooks");
    re.extend(ci_alternation(&names));
    re.extend_from_slice(b"(/|$)");
    out.push(git(&re));
    out
}

/// `/.git$`: a git dir itself, which must not be renamed away from its protected hooks.
pub fn git_dir_itself_regex() -> Vec<u8> {
    let mut re = b"/".to_vec();
    ci_name(".git", &mut re);
    re.push(b'$');
    re
}

/// The directories whose renaming or removal would move a protected path aside: the working
/// directory, the home directory and every extra git dir (worktrees), with all their ancestors.
pub fn pinned_dirs(policy: &Policy, fs: &dyn FsView) -> Vec<PathBuf> {
    let ctx = &policy.context;
    let mut anchors = vec![
        lexical(Path::new("/"), &ctx.cwd),
        lexical(Path::new("/"), &ctx.home),
    ];
    for p in [&ctx.cwd, &ctx.home] {
        if let Ok(real) = resolve(fs, Path::new("/"), p) {
            anchors.push(real);
        }
    }
    anchors.extend(policy.paths.mandatory.extra_git_dirs.iter().cloned());
    let mut out: Vec<PathBuf> = Vec::new();
    for a in anchors {
        for anc in a.ancestors() {
            if !out.iter().any(|o| o == anc) {
                out.push(anc.to_path_buf());
            }
        }
    }
    out
}

/// The settings keys the profile reads besides the typed rules.
fn flag(policy: &Policy, key: &str) -> bool {
    policy.effective.bool(key).unwrap_or(false)
}

/// Generates the profile for `policy`. `fs` resolves the unix socket paths' symlinks (the
/// policy's path rules are already resolved).
pub fn generate(policy: &Policy, fs: &dyn FsView, opts: &Options) -> Result<Profile, ProfileError> {
    if opts.tag.is_empty()
        || !opts
            .tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(ProfileError::Tag(opts.tag.clone()));
    }
    let message = Expr::list([sym("with"), sym("message"), Expr::string(&opts.tag)?]);
    let msg = Some(&message);
    let mut p = Params::default();
    let mut forms: Vec<Expr> = Vec::new();
    let paths = &policy.paths;

    forms.push(Expr::comment(
        "Generated by warden from the effective policy (docs/macos.md). Every path and regex is\n\
         a parameter, passed as -D P<n>=VALUE: no file name is part of this text.",
        Expr::list([sym("version"), Expr::Sym("1")]),
    ));
    forms.push(rule("deny", &["default"], msg, vec![]));

    // Processes.
    forms.push(Expr::comment(
        "Processes: run and fork; signals and process information only within this sandbox.",
        rule("allow", &["process-exec"], None, vec![]),
    ));
    forms.push(rule("allow", &["process-fork"], None, vec![]));
    let same_sandbox = || Expr::list([sym("target"), sym("same-sandbox")]);
    forms.push(rule("allow", &["signal"], None, vec![same_sandbox()]));
    forms.push(rule(
        "allow",
        &["process-info*"],
        None,
        vec![same_sandbox()],
    ));

    // System services.
    let mut services: Vec<Expr> = Vec::new();
    let weaker = flag(policy, "enableWeakerNetworkIsolation");
    for (name, _) in MACH_SERVICES
        .iter()
        .chain(if weaker { TRUSTD_SERVICES } else { &[] })
    {
        services.push(Expr::list([sym("global-name"), Expr::string(name)?]));
    }
    forms.push(Expr::comment(
        "Mach services (each one and why: docs/macos.md). trustd only with\n\
         enableWeakerNetworkIsolation.",
        rule("allow", &["mach-lookup"], None, services),
    ));
    let mut sysctls = Vec::new();
    for s in SYSCTLS {
        let f = if s.prefix {
            "sysctl-name-prefix"
        } else {
            "sysctl-name"
        };
        sysctls.push(Expr::list([Expr::Sym(f), Expr::string(s.name)?]));
    }
    forms.push(Expr::comment(
        "sysctls common tools read (docs/macos.md); no process tables.",
        rule("allow", &["sysctl-read"], None, sysctls),
    ));
    forms.push(Expr::comment(
        "Preferences are read through cfprefsd, which refuses writes for this sandbox; POSIX\n\
         semaphores and shared memory (Python's multiprocessing).",
        rule("allow", &["user-preference-read"], None, vec![]),
    ));
    forms.push(rule("allow", &["ipc-posix-sem"], None, vec![]));
    forms.push(rule("allow", &["ipc-posix-shm"], None, vec![]));

    if paths.disabled {
        forms.push(Expr::comment(
            "filesystem.disabled: no filesystem restrictions.",
            rule("allow", &["file*"], None, vec![]),
        ));
    } else {
        file_rules(policy, fs, &mut p, msg, &mut forms)?;
    }
    network_rules(policy, fs, opts, &mut p, &mut forms)?;

    if flag(policy, "allowPty") {
        let ptmx = p.literal("allowPty", Path::new("/dev/ptmx"))?;
        let ttys = p.regex("allowPty", b"^/dev/ttys[0-9]+$".to_vec())?;
        forms.push(Expr::comment(
            "allowPty: pseudo-terminals.",
            rule("allow", &["pseudo-tty"], None, vec![]),
        ));
        forms.push(rule(
            "allow",
            &["file-read*", "file-write-data", "file-ioctl"],
            None,
            vec![ptmx, ttys],
        ));
    }

    let text = sbpl::render_profile(&forms);
    let names: BTreeSet<String> = p.list.iter().map(|(n, _)| n.clone()).collect();
    sbpl::check(&text, &names)?;
    Ok(Profile {
        text,
        params: p.list,
    })
}

fn file_rules(
    policy: &Policy,
    fs: &dyn FsView,
    p: &mut Params,
    msg: Option<&Expr>,
    forms: &mut Vec<Expr>,
) -> Result<(), ProfileError> {
    let paths = &policy.paths;
    forms.push(Expr::comment(
        "Reading: everything but filesystem.denyRead; allowRead re-opens a part of a denied\n\
         region when it comes from the same or a higher settings layer than the deny.",
        rule("allow", &["file-read*"], None, vec![]),
    ));
    forms.push(rule("allow", &["file-map-executable"], None, vec![]));
    for deny in &paths.deny_read {
        let denied = any(p.pattern("filesystem.denyRead", &deny.pattern)?);
        let mut reopened = Vec::new();
        for a in paths
            .allow_read
            .iter()
            .filter(|a| a.provenance.rank() >= deny.provenance.rank())
        {
            reopened.extend(p.pattern("filesystem.allowRead", &a.pattern)?);
        }
        let filter = if reopened.is_empty() {
            denied
        } else {
            Expr::list([
                sym("require-all"),
                denied,
                Expr::list([sym("require-not"), any(reopened)]),
            ])
        };
        forms.push(rule("deny", &["file-read*"], msg, vec![filter]));
    }

    if paths.read_only.is_none() {
        let mut roots = Vec::new();
        for w in &paths.writable {
            if let Some(real) = &w.escapes {
                return Err(ProfileError::WritableEscapes {
                    entry: w.rule.text.to_string(),
                    real: real.display().to_string(),
                });
            }
            roots.extend(p.pattern("writable root", &w.rule.pattern)?);
        }
        forms.push(Expr::comment(
            "Writing: the working directory, the sandbox's TMPDIR and filesystem.allowWrite.",
            rule("allow", &["file-write*"], None, roots),
        ));
    }
    let devices = vec![
        p.literal("device", Path::new("/dev/null"))?,
        p.literal("device", Path::new("/dev/zero"))?,
        p.literal("device", Path::new("/dev/dtracehelper"))?,
        p.subpath("device", Path::new("/dev/fd"))?,
    ];
    forms.push(Expr::comment(
        "Devices: /dev/null and /dev/zero, dyld's DTrace helper, the process's own descriptors.",
        rule("allow", &["file-write-data"], None, devices),
    ));
    let helper = p.literal("device", Path::new("/dev/dtracehelper"))?;
    forms.push(rule("allow", &["file-ioctl"], None, vec![helper]));

    if !paths.deny_write.is_empty() {
        let mut denied = Vec::new();
        for d in &paths.deny_write {
            denied.extend(p.pattern("filesystem.denyWrite", &d.pattern)?);
        }
        forms.push(Expr::comment(
            "filesystem.denyWrite.",
            rule("deny", &["file-write*"], msg, denied),
        ));
    }

    let mandatory = &paths.mandatory;
    let mut protected = vec![
        p.regex("mandatory", protected_names_regex())?,
        p.regex("mandatory", git_dir_regex(mandatory.allow_git_config))?,
    ];
    for re in git_state_regexes(mandatory.allow_git_config) {
        protected.push(p.regex("mandatory", re)?);
    }
    for g in &mandatory.extra_git_dirs {
        protected.push(p.subpath("mandatory", &g.join("hooks"))?);
        for name in ["commondir", "gitdir"] {
            protected.push(p.literal("mandatory", &g.join(name))?);
        }
        if !mandatory.allow_git_config {
            protected.push(p.subpath("mandatory", &g.join("config"))?);
            protected.push(p.subpath("mandatory", &g.join("config.worktree"))?);
        }
    }
    // Configuration by path: warden's settings, git's user config, what git config names.
    for c in &mandatory.config {
        protected.push(if c.dir {
            p.subpath("mandatory", &c.path)?
        } else {
            p.literal("mandatory", &c.path)?
        });
    }
    forms.push(Expr::comment(
        "Mandatory protections (by name anywhere, case-insensitively; git dirs of worktrees).",
        rule("deny", &["file-write*"], msg, protected),
    ));

    let mut pinned = vec![p.regex("pinned", git_dir_itself_regex())?];
    for d in pinned_dirs(policy, fs) {
        pinned.push(p.literal("pinned", &d)?);
    }
    forms.push(Expr::comment(
        "No renaming or removing what leads to a protected path: git dirs, the working and\n\
         home directories, worktrees' git dirs, and their ancestors.",
        rule("deny", &["file-write-unlink"], msg, pinned),
    ));
    Ok(())
}

fn network_rules(
    policy: &Policy,
    fs: &dyn FsView,
    opts: &Options,
    p: &mut Params,
    forms: &mut Vec<Expr>,
) -> Result<(), ProfileError> {
    if let Some(ports) = opts.proxy {
        let remote = |port: u16| -> Result<Expr, ProfileError> {
            Ok(Expr::list([
                sym("remote"),
                sym("ip"),
                Expr::string(&format!("localhost:{port}"))?,
            ]))
        };
        forms.push(Expr::comment(
            "Network: only warden's proxy (HTTP, SOCKS5) on localhost, by remote address.",
            rule(
                "allow",
                &["network-outbound"],
                None,
                vec![remote(ports.http)?, remote(ports.socks)?],
            ),
        ));
    }
    if flag(policy, "network.allowAllUnixSockets") {
        let all = p.subpath("network.allowAllUnixSockets", Path::new("/"))?;
        forms.push(Expr::comment(
            "network.allowAllUnixSockets: connecting to any unix socket.",
            rule("allow", &["network-outbound"], None, vec![all]),
        ));
    } else if !policy.unix_sockets.is_empty() {
        let mut socks = Vec::new();
        for s in &policy.unix_sockets {
            socks.push(p.subpath("network.allowUnixSockets", &s.pattern)?);
            if let Ok(real) = resolve(fs, &policy.context.cwd, &s.pattern) {
                socks.push(p.subpath("network.allowUnixSockets", &real)?);
            }
        }
        forms.push(Expr::comment(
            "network.allowUnixSockets: connecting to these sockets.",
            rule("allow", &["network-outbound"], None, socks),
        ));
    }
    if flag(policy, "network.allowLocalBinding") {
        let local = Expr::list([sym("local"), sym("ip"), Expr::string("localhost:*")?]);
        let remote = Expr::list([sym("remote"), sym("ip"), Expr::string("localhost:*")?]);
        forms.push(Expr::comment(
            "network.allowLocalBinding: servers on localhost, and connections to localhost\n\
             (which also reaches the host's own local services: see docs/macos.md).",
            rule(
                "allow",
                &["network-bind", "network-inbound"],
                None,
                vec![local],
            ),
        ));
        forms.push(rule("allow", &["network-outbound"], None, vec![remote]));
    }
    Ok(())
}

#[cfg(test)]
#[path = "profile_tests.rs"]
mod tests;

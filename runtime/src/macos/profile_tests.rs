//! Golden profiles, the SBPL checker, a property test on hostile path bytes, and an SBPL
//! evaluator that holds every profile to the policy engine's own decisions.

use super::*;
use crate::macos::glob::tests::rust_regex;
use crate::macos::sbpl::{check, parse, Node};
use crate::policy::decision::{Decision, Layer};
use crate::policy::fsview::{is_under, MemFs};
use crate::policy::load::parse_settings;
use crate::policy::merge::{layer, Context, LayerInput};
use crate::policy::path::Access;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

const TAG: &str = "warden-golden";

fn lay(l: Layer, order: u16, json: &str) -> LayerInput {
    let src = format!("{}.json", l.as_str());
    layer(l, order, &src, parse_settings(json, &src).unwrap().settings)
}

fn ctx(cwd: &str, home: &str, tmp: &str) -> Context {
    Context {
        cwd: cwd.into(),
        home: home.into(),
        tmpdir: Some(tmp.into()),
        approver_attached: false,
        // As the CLI fills it: warden's user settings and a `--settings` file by path.
        protected: vec![
            crate::policy::mandatory::ConfigPath {
                path: PathBuf::from(home).join(".config/warden"),
                dir: true,
                what: "warden user settings",
            },
            crate::policy::mandatory::ConfigPath {
                path: PathBuf::from(cwd).join("sandbox.json"),
                dir: false,
                what: "warden settings file (--settings)",
            },
        ],
    }
}

fn base_fs() -> MemFs {
    let mut fs = MemFs::new();
    fs.dir("/w").dir("/h").dir("/t");
    fs
}

/// One golden case: layers, context, filesystem and options.
struct Case {
    name: &'static str,
    layers: Vec<LayerInput>,
    context: Context,
    fs: MemFs,
    proxy: Option<ProxyPorts>,
    /// Paths the evaluator checks against the policy (beside the common ones).
    paths: &'static [&'static str],
}

fn cases() -> Vec<Case> {
    let mut symlinked = MemFs::new();
    symlinked
        .dir("/private/tmp/proj")
        .dir("/private/var/folders/x/T/warden-1")
        .dir("/Users/dev")
        .symlink("/tmp", "private/tmp")
        .symlink("/var", "private/var");
    let mut worktree = base_fs();
    worktree
        .file("/w/.git", "gitdir: /repo/.git/worktrees/w\n")
        .file("/repo/.git/worktrees/w/commondir", "../..\n")
        .dir("/repo/.git/hooks");
    let mut network = base_fs();
    network
        .dir("/private/var/run")
        .symlink("/var", "private/var");
    vec![
        Case {
            name: "default",
            layers: vec![],
            context: ctx("/w", "/h", "/t"),
            fs: base_fs(),
            proxy: None,
            paths: &[],
        },
        Case {
            name: "filesystem",
            layers: vec![lay(
                Layer::User,
                0,
                r#"{"filesystem": {
                    "denyRead": ["~/.aws", "/etc/secrets", "~/**/*.pem"],
                    "allowRead": ["~/.aws/config"],
                    "allowWrite": ["~/.cache/pip", "/opt/build/*/out"],
                    "denyWrite": ["/w/vendor", "**/*.lock"]
                }}"#,
            )],
            context: ctx("/w", "/h", "/t"),
            fs: base_fs(),
            proxy: None,
            paths: &[
                "/h/.aws/credentials",
                "/h/.aws/config",
                "/h/.aws/config/x",
                "/etc/secrets/db",
                "/etc/secretsX",
                "/h/keys/id.pem",
                "/h/keys/id.pem/inner",
                "/h/id.pem",
                "/h/.cache/pip/wheel",
                "/opt/build/a/out/x",
                "/opt/build/a/b/out",
                "/w/vendor/lib.rs",
                "/w/Cargo.lock",
                "/w/sub/yarn.lock",
            ],
        },
        Case {
            name: "layers",
            layers: vec![
                lay(
                    Layer::Managed,
                    0,
                    r#"{"filesystem": {"denyRead": ["~/.kube"]}}"#,
                ),
                lay(
                    Layer::User,
                    0,
                    r#"{"filesystem": {"allowRead": ["~/.kube/config"]}}"#,
                ),
                lay(
                    Layer::Project,
                    0,
                    r#"{"filesystem": {"denyRead": ["~/.docker"]}}"#,
                ),
                lay(
                    Layer::Cli,
                    0,
                    r#"{"filesystem": {"allowRead": ["~/.docker/config.json"]}}"#,
                ),
            ],
            context: ctx("/w", "/h", "/t"),
            fs: base_fs(),
            proxy: None,
            paths: &[
                "/h/.kube/config",
                "/h/.kube/cache",
                "/h/.docker/config.json",
                "/h/.docker/contexts",
            ],
        },
        Case {
            name: "network",
            layers: vec![lay(
                Layer::User,
                0,
                r#"{"network": {
                    "allowedDomains": ["github.com", "*.npmjs.org"],
                    "allowUnixSockets": ["/var/run/docker.sock", "~/.ssh/agent.sock"],
                    "allowLocalBinding": true
                }}"#,
            )],
            context: ctx("/w", "/h", "/t"),
            fs: network,
            proxy: Some(ProxyPorts {
                http: 41001,
                socks: 41002,
            }),
            paths: &[],
        },
        Case {
            name: "read-only-and-opt-ins",
            layers: vec![lay(
                Layer::User,
                0,
                r#"{
                    "filesystem": {"allowGitConfig": true},
                    "network": {"allowAllUnixSockets": true},
                    "enableWeakerNetworkIsolation": true,
                    "allowPty": true,
                    "warden": {"readOnly": true}
                }"#,
            )],
            context: ctx("/w", "/h", "/t"),
            fs: base_fs(),
            proxy: None,
            paths: &["/w/.git/config", "/t/scratch"],
        },
        Case {
            name: "worktree",
            layers: vec![],
            context: ctx("/w", "/h", "/t"),
            fs: worktree,
            proxy: None,
            paths: &[
                "/repo/.git/worktrees/w/hooks/pre-commit",
                "/repo/.git/worktrees/w/config",
                "/repo/.git/worktrees/w/HEAD",
                "/repo/.git/hooks/pre-push",
                "/repo/.git/config",
            ],
        },
        Case {
            name: "disabled",
            layers: vec![lay(Layer::User, 0, r#"{"filesystem": {"disabled": true}}"#)],
            context: ctx("/w", "/h", "/t"),
            fs: base_fs(),
            proxy: None,
            paths: &[],
        },
        Case {
            name: "symlinked-dirs",
            layers: vec![lay(
                Layer::User,
                0,
                r#"{"filesystem": {"denyRead": ["/tmp/proj/.env"], "allowWrite": ["/var/folders/x/T/cache"]}}"#,
            )],
            context: ctx("/tmp/proj", "/Users/dev", "/var/folders/x/T/warden-1"),
            fs: symlinked,
            proxy: None,
            paths: &[
                "/tmp/proj/.env",
                "/tmp/proj/src/main.rs",
                "/private/tmp/proj/src/main.rs",
                "/var/folders/x/T/warden-1/a",
                "/var/folders/x/T/cache/b",
                "/tmp/other",
            ],
        },
    ]
}

fn policy_of(case: &Case) -> Policy {
    Policy::build(&case.layers, case.context.clone(), &case.fs).unwrap()
}

fn generate_case(case: &Case) -> Profile {
    generate(
        &policy_of(case),
        &case.fs,
        &Options {
            proxy: case.proxy,
            tag: TAG.into(),
        },
    )
    .unwrap()
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/macos/golden")
}

/// `WARDEN_BLESS=1 cargo test -p warden --lib macos` rewrites the golden files.
#[test]
fn golden_profiles() {
    let bless = std::env::var_os("WARDEN_BLESS").is_some_and(|v| v == "1");
    let mut failures = Vec::new();
    for case in cases() {
        let shown = generate_case(&case).display();
        let file = golden_dir().join(format!("{}.sb", case.name));
        if bless {
            std::fs::create_dir_all(golden_dir()).unwrap();
            std::fs::write(&file, &shown).unwrap();
            continue;
        }
        match std::fs::read_to_string(&file) {
            Ok(expected) if expected == shown => {}
            Ok(expected) => failures.push(format!(
                "{}: differs (WARDEN_BLESS=1 to accept)\n--- expected\n{expected}\n--- got\n{shown}",
                file.display()
            )),
            Err(e) => failures.push(format!("{}: {e} (WARDEN_BLESS=1 to create)", file.display())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_golden_profile_passes_the_checker() {
    for case in cases() {
        let p = generate_case(&case);
        let names = p.params.iter().map(|(n, _)| n.clone()).collect();
        check(&p.text, &names).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert!(p.text.starts_with(";; Generated by warden"));
        assert!(p
            .text
            .contains("(deny default (with message \"warden-golden\"))"));
    }
}

// ---------------------------------------------------------------------------------------------
// The checker

fn names(n: &[&str]) -> BTreeSet<String> {
    n.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_checker_refuses_what_warden_never_writes() {
    let ok = "(version 1)\n(deny default (with message \"t\"))\n(allow file-read* (subpath (param \"P0\")))\n";
    assert!(check(ok, &names(&["P0"])).is_ok());
    let bad: &[(&str, &str)] = &[
        (
            "(version 1)\n(allow file-read* (subpath \"/etc\"))\n",
            "path literal",
        ),
        (
            "(version 1)\n(allow file-read* (regex #\"^/etc\"))\n",
            "raw string",
        ),
        (
            "(version 1)\n(allow file-read* (subpath (param \"P1\")))\n",
            "undeclared param",
        ),
        (
            "(version 1)\n(allow file-read* (subpath (param \"HOME\")))\n",
            "param name",
        ),
        (
            "(version 1)\n(allow file-read* (subpath (param \"P0\") (param \"P0\")))\n",
            "two args",
        ),
        (
            "(version 1)\n(allow file-read* (subpath (string-append (param \"P0\") \"/x\")))\n",
            "expression",
        ),
        (
            "(version 1)\n(allow mach-lookup (global-name \"a/b\"))\n",
            "slash in literal",
        ),
        (
            "(version 1)\n(allow mach-lookup (global-name \"a\\nb\"))\n",
            "escape",
        ),
        (
            "(version 1)\n(allow mach-lookup (global-name \"a\nb\"))\n",
            "newline in string",
        ),
        ("(version 1)\n(allow file-read*\n", "unbalanced"),
        ("(version 1)\n(allow file-read*))\n", "extra close"),
        ("(version 1)\nallow\n", "top-level atom"),
        (
            "(version 1)\n(allow file-read* (subpath (param \"P0\")) \"x\u{e9}\")\n",
            "non-ascii",
        ),
        ("(allow default)\n", "no version"),
        ("(version 1)\n(define x 1)\n", "define"),
        (
            "(version 1)\n(allow file-read* (literal \"P0\"))\n",
            "string not param",
        ),
    ];
    for (text, why) in bad {
        assert!(
            check(text, &names(&["P0"])).is_err(),
            "accepted ({why}): {text}"
        );
    }
}

#[test]
fn string_literals_are_escaped_and_restricted() {
    assert!(Expr::string("com.apple.logd").is_ok());
    assert!(Expr::string("localhost:*").is_ok());
    for bad in ["", "/etc", "a\"b", "a\\b", "a b", "a\nb", "é", "a)b"] {
        assert!(Expr::string(bad).is_err(), "{bad:?}");
    }
    // The quoting itself, for the constants that do pass.
    assert_eq!(Expr::Param("P1".into()).render(), "(param \"P1\")");
}

#[test]
fn a_bad_tag_or_a_nul_byte_is_refused() {
    let case = &cases()[0];
    let policy = policy_of(case);
    for tag in ["", "a b", "x\"y", "t)"] {
        let r = generate(
            &policy,
            &case.fs,
            &Options {
                proxy: None,
                tag: tag.into(),
            },
        );
        assert!(matches!(r, Err(ProfileError::Tag(_))), "{tag:?}");
    }
    let mut fs = MemFs::new();
    fs.dir("/h");
    let nul = PathBuf::from(OsString::from_vec(b"/w\0x".to_vec()));
    let policy = Policy::build(
        &[],
        Context {
            cwd: nul,
            ..ctx("/w", "/h", "/t")
        },
        &fs,
    )
    .unwrap();
    let r = generate(
        &policy,
        &fs,
        &Options {
            proxy: None,
            tag: TAG.into(),
        },
    );
    assert!(matches!(r, Err(ProfileError::Nul { .. })), "{r:?}");
}

#[test]
fn display_keeps_every_parameter_on_one_comment_line() {
    let p = Profile {
        text: "(version 1)\n".into(),
        params: vec![
            ("P0".into(), b"/plain/path".to_vec()),
            ("P1".into(), b"/it's here".to_vec()),
            ("P2".into(), b"/a\nb\xff\"(x)".to_vec()),
        ],
    };
    let shown = p.display();
    assert!(shown.contains(";; -D P0=/plain/path\n"));
    assert!(shown.contains(";; -D 'P1=/it'\\''s here'\n"));
    assert!(shown.contains(";; -D $'P2=/a\\x0ab\\xff\"(x)'\n"));
    for line in shown.lines().skip(1) {
        assert!(line.starts_with(";;"), "{line}");
    }
    assert!(parse(&shown).is_ok());
    let args = p.sandbox_exec_args();
    assert_eq!(args[0], "-p");
    assert_eq!(args[4], "-D");
    assert_eq!(args[5], "P1=/it's here");
    assert_eq!(args[7].as_bytes(), b"P2=/a\nb\xff\"(x)");
}

// ---------------------------------------------------------------------------------------------
// Hostile path bytes

/// The profile's parsed structure, with parameter names replaced by their values' role
/// (equal structures ⇒ the paths changed nothing but parameter values).
fn structure(p: &Profile) -> Vec<Node> {
    let names = p.params.iter().map(|(n, _)| n.clone()).collect();
    check(&p.text, &names).expect("passes the checker")
}

fn param_value<'a>(p: &'a Profile, value: &[u8]) -> Option<&'a str> {
    p.params
        .iter()
        .find(|(_, v)| v == value)
        .map(|(n, _)| n.as_str())
}

fn component() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(proptest::prelude::any::<u8>(), 1..12)
        .prop_filter("a plain component", |c| {
            !c.contains(&b'/') && !c.contains(&0) && c != b"." && c != b".."
        })
}

fn profile_for(cwd: &Path, allow_write: Option<&str>) -> Profile {
    let mut fs = MemFs::new();
    fs.dir("/h").dir("/t").dir(cwd);
    let layers: Vec<LayerInput> = allow_write
        .map(|w| {
            let json = serde_json::json!({"filesystem": {"allowWrite": [w], "denyRead": [w]}});
            lay(Layer::User, 0, &json.to_string())
        })
        .into_iter()
        .collect();
    let mut c = ctx("/w", "/h", "/t");
    c.cwd = cwd.to_path_buf();
    let policy = Policy::build(&layers, c, &fs).unwrap();
    generate(
        &policy,
        &fs,
        &Options {
            proxy: None,
            tag: TAG.into(),
        },
    )
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// Any bytes in the working directory's name (quotes, backslashes, newlines, parentheses,
    /// `;`, invalid UTF-8) leave the profile text untouched and reach sandbox-exec intact.
    #[test]
    fn path_bytes_cannot_break_out_of_their_parameter(comps in proptest::collection::vec(component(), 1..4)) {
        let mut bytes = b"/q".to_vec();
        for c in &comps {
            bytes.push(b'/');
            bytes.extend_from_slice(c);
        }
        let cwd = PathBuf::from(OsString::from_vec(bytes.clone()));
        let hostile = profile_for(&cwd, None);
        // A reference path with as many components (the ancestors pinned depend on depth).
        let mut plain = b"/q".to_vec();
        for i in 0..comps.len() {
            plain.extend_from_slice(format!("/r{i}").as_bytes());
        }
        let reference = profile_for(&PathBuf::from(OsString::from_vec(plain.clone())), None);
        prop_assert_eq!(&hostile.text, &reference.text);
        prop_assert_eq!(structure(&hostile), structure(&reference));
        prop_assert!(param_value(&hostile, &bytes).is_some(), "the path round-trips");
        prop_assert_eq!(param_value(&hostile, &bytes), param_value(&reference, &plain));
    }

    /// The same for settings entries (UTF-8 strings, as JSON allows): a literal entry only ever
    /// becomes parameter values.
    #[test]
    fn settings_entries_cannot_break_out_either(name in "[^*?\\[\u{0}/~]{1,16}") {
        prop_assume!(name != "." && name != "..");
        let entry = format!("/q/{name}");
        let hostile = profile_for(Path::new("/w"), Some(&entry));
        let reference = profile_for(Path::new("/w"), Some("/q/reference"));
        prop_assert_eq!(&hostile.text, &reference.text);
        prop_assert!(param_value(&hostile, entry.as_bytes()).is_some());
    }

    /// Globs with arbitrary characters: the profile still passes the checker, with the regex
    /// as a parameter value.
    #[test]
    fn glob_entries_stay_parameters(glob in "[a-z\"\\\\();\n #|.^$*?\\[\\]{},!-]{1,16}") {
        let entry = format!("/q/{glob}*");
        let mut fs = MemFs::new();
        fs.dir("/w").dir("/h");
        let json = serde_json::json!({"filesystem": {"denyRead": [entry]}});
        let Ok(policy) = Policy::build(&[lay(Layer::User, 0, &json.to_string())], ctx("/w", "/h", "/t"), &fs) else {
            return Ok(());
        };
        match generate(&policy, &fs, &Options { proxy: None, tag: TAG.into() }) {
            Ok(p) => { structure(&p); }
            Err(ProfileError::Glob(_)) => {}
            Err(e) => prop_assert!(false, "{e}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// An SBPL evaluator: the profile must decide file operations as the policy engine does.

struct Eval {
    rules: Vec<(bool, Vec<String>, Vec<Node>)>,
    default_allow: bool,
    params: BTreeMap<String, Vec<u8>>,
}

impl Eval {
    fn new(p: &Profile) -> Eval {
        let forms = structure(p);
        let mut rules = Vec::new();
        let mut default_allow = false;
        for f in forms.iter().skip(1) {
            let Node::List(items) = f else { unreachable!() };
            let allow = items[0] == Node::Atom("allow".into());
            let mut ops = Vec::new();
            let mut filters = Vec::new();
            for i in &items[1..] {
                match i {
                    Node::Atom(op) => ops.push(op.clone()),
                    Node::List(l) if l.first() == Some(&Node::Atom("with".into())) => {}
                    other => filters.push(other.clone()),
                }
            }
            if ops == ["default"] {
                default_allow = allow;
                continue;
            }
            rules.push((allow, ops, filters));
        }
        Eval {
            rules,
            default_allow,
            params: p.params.iter().cloned().collect(),
        }
    }

    fn param(&self, n: &Node) -> Vec<u8> {
        match n {
            Node::List(v) => match &v[1] {
                Node::Str(name) => self.params[name].clone(),
                _ => unreachable!(),
            },
            _ => unreachable!(),
        }
    }

    fn filter(&self, f: &Node, path: &[u8]) -> bool {
        let Node::List(v) = f else { return false };
        let Some(Node::Atom(head)) = v.first() else {
            return false;
        };
        match head.as_str() {
            "subpath" => is_under(path, &self.param(&v[1])),
            "literal" => path == self.param(&v[1]).as_slice(),
            "regex" => rust_regex(&self.param(&v[1])).is_match(path),
            "require-any" => v[1..].iter().any(|x| self.filter(x, path)),
            "require-all" => v[1..].iter().all(|x| self.filter(x, path)),
            "require-not" => !self.filter(&v[1], path),
            _ => false,
        }
    }

    /// Whether `op` on `path` is allowed: the last matching rule decides.
    fn allows(&self, op: &str, path: &[u8]) -> bool {
        let mut verdict = self.default_allow;
        for (allow, ops, filters) in &self.rules {
            let op_matches = ops.iter().any(|o| match o.strip_suffix('*') {
                Some(prefix) => op.starts_with(prefix),
                None => o == op,
            });
            if op_matches && (filters.is_empty() || filters.iter().any(|f| self.filter(f, path))) {
                verdict = *allow;
            }
        }
        verdict
    }
}

const COMMON_PATHS: &[&str] = &[
    "/w",
    "/w/src/main.rs",
    "/w/.git/HEAD",
    "/w/.git/objects/ab/cd",
    "/w/.git/hooks/pre-commit",
    "/w/.git/config",
    "/w/.git/config.worktree",
    "/w/sub/.git/hooks/post-checkout",
    "/w/.git/commondir",
    "/w/.git/modules/libs/foo/hooks/pre-commit",
    "/w/.git/modules/libs/foo/config",
    "/w/.git/modules/libs/foo/commondir",
    "/w/.git/modules/libs/foo/objects/ab",
    "/w/.git/modules/config",
    "/w/.git/worktrees/wt/commondir",
    "/w/.git/worktrees/wt/gitdir",
    "/w/.git/worktrees/wt/HEAD",
    "/w/sandbox.json",
    "/w/sandbox.json.bak",
    "/h/.config/warden/settings.json",
    "/w/.bashrc",
    "/w/.vscode/settings.json",
    "/w/.claude/settings.json",
    "/w/docs/.mcp.json",
    "/w/.warden/settings.json",
    "/w/.gitignore",
    "/w/.github/workflows/ci.yml",
    "/t/scratch",
    "/h/.bashrc",
    "/h/.ssh/id_ed25519",
    "/h/Library/LaunchAgents/x.plist",
    "/h/notes.txt",
    "/etc/hosts",
    "/usr/bin/env",
];

fn agrees_with_policy(case: &Case) -> Vec<String> {
    let policy = policy_of(case);
    let profile = generate_case(case);
    let eval = Eval::new(&profile);
    let mut errors = Vec::new();
    for path in COMMON_PATHS.iter().chain(case.paths) {
        let real = resolve(&case.fs, &policy.context.cwd, Path::new(path)).unwrap();
        let real = real.as_os_str().as_bytes();
        let read = policy
            .check_path(&case.fs, Path::new(path), Access::Read)
            .decision
            == Decision::Allow;
        let write = policy
            .check_path(&case.fs, Path::new(path), Access::Write)
            .decision
            == Decision::Allow;
        let sb_read = eval.allows("file-read-data", real);
        let sb_write =
            eval.allows("file-write-create", real) && eval.allows("file-write-data", real);
        if read != sb_read || write != sb_write {
            errors.push(format!(
                "{}: {path}: policy read {read} write {write}, profile read {sb_read} write {sb_write}",
                case.name
            ));
        }
    }
    errors
}

#[test]
fn every_profile_decides_file_access_as_the_policy_engine_does() {
    let errors: Vec<String> = cases().iter().flat_map(agrees_with_policy).collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn protected_paths_and_their_ancestors_cannot_be_unlinked_or_renamed() {
    for case in cases().into_iter().filter(|c| c.name != "disabled") {
        let policy = policy_of(&case);
        let eval = Eval::new(&generate_case(&case));
        let cwd = resolve(&case.fs, Path::new("/"), &policy.context.cwd).unwrap();
        let home = policy.context.home.clone();
        let mut protected: Vec<PathBuf> = Vec::new();
        for name in PROTECTED_FILES.iter().chain(PROTECTED_DIRS) {
            protected.push(cwd.join(name));
            protected.push(home.join(name));
        }
        for p in [
            ".git/hooks",
            ".git/hooks/pre-commit",
            ".git/config",
            "deep/er/.git/hooks",
        ] {
            protected.push(cwd.join(p));
        }
        for g in &policy.paths.mandatory.extra_git_dirs {
            protected.push(g.join("hooks"));
            protected.push(g.join("hooks/pre-commit"));
        }
        let mut checked = 0;
        for p in &protected {
            let pb = p.as_os_str().as_bytes();
            assert!(
                !eval.allows("file-write-unlink", pb),
                "{}: unlink {}",
                case.name,
                p.display()
            );
            // Ancestors up to the root, except those the name rules cover wherever they move
            // (a directory below the working directory holding a `.git`: moved, the `.git`
            // keeps its name and its protection).
            for anc in p.ancestors().skip(1) {
                let deep = anc.starts_with(cwd.join("deep"));
                if deep {
                    continue;
                }
                checked += 1;
                assert!(
                    !eval.allows("file-write-unlink", anc.as_os_str().as_bytes()),
                    "{}: unlink ancestor {} of {}",
                    case.name,
                    anc.display(),
                    p.display()
                );
            }
        }
        assert!(checked > 50);
        // Ordinary files in the working directory can still be removed and renamed (unless
        // the sandbox is read-only).
        if policy.paths.read_only.is_none() {
            let f = cwd.join("src/main.rs");
            assert!(
                eval.allows("file-write-unlink", f.as_os_str().as_bytes()),
                "{}",
                case.name
            );
        }
    }
}

#[test]
fn protections_hold_whatever_the_case_of_the_name() {
    let case = &cases()[0];
    let eval = Eval::new(&generate_case(case));
    for p in [
        "/w/.GIT/hooks/x",
        "/w/.Git/Config",
        "/w/.BASHRC",
        "/w/.SSH/config",
        "/w/.Claude/x",
    ] {
        assert!(!eval.allows("file-write-create", p.as_bytes()), "{p}");
    }
    assert!(!eval.allows("file-write-unlink", b"/w/sub/.GIT"));
    assert!(eval.allows("file-write-create", b"/w/.gitx/hooks"));
}

#[test]
fn network_rules_name_remote_proxy_ports_only() {
    let profile = generate_case(&cases()[3]);
    let t = &profile.text;
    assert!(t.contains(
        "(allow network-outbound (remote ip \"localhost:41001\") (remote ip \"localhost:41002\"))"
    ));
    assert!(
        !t.contains("(local ip \"localhost:41001\")"),
        "never a local-address rule for the proxy"
    );
    assert!(t.contains("(allow network-bind network-inbound (local ip \"localhost:*\"))"));
    // The socket under the /var symlink is allowed by its real path too.
    assert!(param_value(&profile, b"/private/var/run/docker.sock").is_some());
    assert!(param_value(&profile, b"/h/.ssh/agent.sock").is_some());
    // Without a proxy, no network rule at all.
    let offline = generate_case(&cases()[0]).text;
    assert!(!offline.contains("network"));
}

#[test]
fn opt_ins_add_their_rules_only_when_set() {
    let plain = generate_case(&cases()[0]).text;
    let opted = generate_case(&cases()[4]).text;
    for needle in ["com.apple.trustd", "pseudo-tty", "(allow file-write* "] {
        assert_eq!(
            plain.contains(needle),
            needle == "(allow file-write* ",
            "{needle}"
        );
    }
    assert!(opted.contains("com.apple.trustd.agent"));
    assert!(opted.contains("(allow pseudo-tty)"));
    assert!(
        !opted.contains("(allow file-write* "),
        "read-only: no writable roots"
    );
    for (name, _) in MACH_SERVICES {
        assert!(plain.contains(&format!("(global-name \"{name}\")")));
    }
}

#[test]
fn docs_list_every_mach_service_and_sysctl() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/macos.md"))
            .expect("docs/macos.md");
    for (name, _) in MACH_SERVICES.iter().chain(TRUSTD_SERVICES) {
        assert!(
            doc.contains(&format!("`{name}`")),
            "docs/macos.md lacks {name}"
        );
    }
    for s in SYSCTLS {
        assert!(
            doc.contains(&format!("`{}", s.name)),
            "docs/macos.md lacks {}",
            s.name
        );
    }
}

/// An allowWrite entry whose own symlink leads out of it is refused, as on Linux; the
/// system's `/var` → `/private/var` is not such an escape.
#[test]
fn allow_write_escaping_through_a_symlink_is_refused() {
    let mut fs = MemFs::new();
    fs.dir("/h/.ssh")
        .dir("/t")
        .dir("/w")
        .symlink("/w/out", "/h/.ssh")
        .dir("/private/var/folders/xy")
        .symlink("/var", "private/var");
    let build = |entry: &str| {
        let json = serde_json::json!({"filesystem": {"allowWrite": [entry]}});
        let layers = vec![lay(Layer::User, 0, &json.to_string())];
        let policy = Policy::build(&layers, ctx("/w", "/h", "/t"), &fs).unwrap();
        generate(
            &policy,
            &fs,
            &Options {
                proxy: None,
                tag: TAG.into(),
            },
        )
    };
    let e = build("/w/out").unwrap_err();
    assert!(
        matches!(&e, ProfileError::WritableEscapes { real, .. } if real == "/h/.ssh"),
        "{e}"
    );
    build("/var/folders/xy").expect("the system alias is not an escape");
}

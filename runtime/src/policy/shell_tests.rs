use super::*;
use proptest::prelude::*;

/// The words of every simple command of `line`.
fn argvs(line: &str) -> Vec<Vec<String>> {
    simple_commands(line)
        .unwrap_or_else(|e| panic!("{line:?} should parse: {e}"))
        .into_iter()
        .map(|c| c.words)
        .collect()
}

fn v(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

fn cmd(words: &[&str]) -> SimpleCommand {
    SimpleCommand {
        words: v(words),
        text: words.join(" "),
        assignments: Vec::new(),
        dynamic: vec![false; words.len()],
    }
}

fn programs(line: &str) -> Vec<String> {
    simple_commands(line)
        .unwrap_or_else(|e| panic!("{line:?} should parse: {e}"))
        .iter()
        .filter_map(|c| program(c).map(str::to_string))
        .collect()
}

// --- structure ------------------------------------------------------------------------------

#[test]
fn single_command() {
    let cmds = simple_commands("git status --short").unwrap();
    assert_eq!(cmds.len(), 1);
    assert_eq!(cmds[0].words, v(&["git", "status", "--short"]));
    assert_eq!(cmds[0].text, "git status --short");
}

#[test]
fn lists_with_every_separator() {
    assert_eq!(
        argvs("a 1 && b 2 || c 3; d 4 & e 5\nf 6"),
        vec![
            v(&["a", "1"]),
            v(&["b", "2"]),
            v(&["c", "3"]),
            v(&["d", "4"]),
            v(&["e", "5"]),
            v(&["f", "6"])
        ]
    );
}

#[test]
fn trailing_background_and_semicolon() {
    assert_eq!(argvs("sleep 1 &"), vec![v(&["sleep", "1"])]);
    assert_eq!(argvs("ls;"), vec![v(&["ls"])]);
}

#[test]
fn pipelines_and_negation() {
    assert_eq!(
        argvs("! cat x | grep y |& tee z"),
        vec![v(&["cat", "x"]), v(&["grep", "y"]), v(&["tee", "z"])]
    );
}

#[test]
fn subshells_and_groups() {
    assert_eq!(
        argvs("( cd a; make ) && { echo ok; true; }"),
        vec![
            v(&["cd", "a"]),
            v(&["make"]),
            v(&["echo", "ok"]),
            v(&["true"])
        ]
    );
}

#[test]
fn command_substitution_dollar_paren() {
    assert_eq!(
        programs("echo $(rm -rf x) done"),
        v(&["echo", "rm"]),
        "the substitution's command is found"
    );
}

#[test]
fn command_substitution_backticks() {
    assert_eq!(programs("echo `whoami`"), v(&["echo", "whoami"]));
}

#[test]
fn substitution_inside_double_quotes() {
    let cmds = simple_commands("echo \"$(rm -rf x)\"").unwrap();
    assert_eq!(cmds.len(), 2);
    assert_eq!(cmds[0].words, v(&["echo", "\"$(rm -rf x)\""]));
    assert_eq!(cmds[1].words, v(&["rm", "-rf", "x"]));
    assert_eq!(cmds[1].text, "rm -rf x");
}

#[test]
fn substitution_inside_concatenation_and_expansions() {
    assert_eq!(programs("ls --dir=$(pwd)/x"), v(&["ls", "pwd"]));
    assert_eq!(programs("echo ${x:-$(id)}"), v(&["echo", "id"]));
    assert_eq!(programs("echo $(( $(wc -l) + 1 ))"), v(&["echo", "wc"]));
}

#[test]
fn nested_substitutions() {
    assert_eq!(
        programs("echo $(cat $(find . -name `basename x`))"),
        v(&["echo", "cat", "find", "basename"])
    );
}

#[test]
fn substitution_in_assignments_and_redirects() {
    assert_eq!(programs("X=$(rm -rf /)"), v(&["rm"]));
    assert_eq!(programs("FOO=$(id) ls"), v(&["ls", "id"]));
    assert_eq!(programs("echo hi > $(mktemp)"), v(&["echo", "mktemp"]));
    assert_eq!(programs("local x=$(rm y)"), v(&["local", "rm"]));
}

#[test]
fn process_substitution() {
    assert_eq!(programs("diff <(ls a) >(tee b)"), v(&["diff", "ls", "tee"]));
}

#[test]
fn heredoc_bodies() {
    assert_eq!(programs("cat <<EOF\n$(rm -rf ~)\nEOF"), v(&["cat", "rm"]));
    // A quoted delimiter makes the body literal.
    assert_eq!(programs("cat <<'EOF'\n$(rm -rf ~)\nEOF"), v(&["cat"]));
}

#[test]
fn if_statements() {
    assert_eq!(
        programs("if test -f a; then b; elif c; then d; else e; fi"),
        v(&["test", "b", "c", "d", "e"])
    );
}

#[test]
fn loops() {
    assert_eq!(
        programs("while read l; do echo $l; done"),
        v(&["read", "echo"])
    );
    assert_eq!(programs("until p; do q; done"), v(&["p", "q"]));
    assert_eq!(programs("for f in $(ls); do rm $f; done"), v(&["ls", "rm"]));
    assert_eq!(programs("for ((i=0;i<3;i++)); do z; done"), v(&["z"]));
}

#[test]
fn case_items() {
    assert_eq!(
        programs("case $x in a) rm a;; b|c) ls;; esac"),
        v(&["rm", "ls"])
    );
}

#[test]
fn function_bodies() {
    assert_eq!(
        programs("f() { rm -rf /; }; function g { ls; }; f"),
        v(&["rm", "ls", "f"])
    );
}

#[test]
fn test_commands_are_searched_but_not_commands() {
    assert_eq!(
        programs("[[ $(id -u) == 0 ]] && echo root"),
        v(&["id", "echo"])
    );
    assert_eq!(programs("[ -f x ] && cat x"), v(&["cat"]));
}

#[test]
fn declarations_are_commands() {
    assert_eq!(argvs("export A=1 B"), vec![v(&["export", "A=1", "B"])]);
    assert_eq!(argvs("unset Z"), vec![v(&["unset", "Z"])]);
    assert_eq!(argvs("export P=\"a b\""), vec![v(&["export", "P=a b"])]);
}

#[test]
fn bare_assignments_run_nothing() {
    assert_eq!(argvs("A=1 B=2"), Vec::<Vec<String>>::new());
}

#[test]
fn comments_are_ignored() {
    assert_eq!(argvs("ls # rm -rf /"), vec![v(&["ls"])]);
}

// --- words ----------------------------------------------------------------------------------

#[test]
fn quoting_is_removed_from_static_words() {
    assert_eq!(
        argvs(r#"echo 'a b' "x" a\ b "a\$b" 'it'"s" $'t\tn' $"tr" \rm"#),
        vec![v(&[
            "echo", "a b", "x", "a b", "a$b", "its", "t\tn", "tr", "rm"
        ])]
    );
}

#[test]
fn backslash_in_double_quotes_keeps_other_escapes() {
    assert_eq!(
        argvs(r#"echo "a\nb" "\\""#),
        vec![v(&["echo", r"a\nb", r"\"])]
    );
}

#[test]
fn ansi_c_escapes() {
    assert_eq!(
        argvs(r"echo $'\x41\101\u00e9\'\\'"),
        vec![v(&["echo", "AAé'\\"])]
    );
}

#[test]
fn dynamic_words_keep_source_text() {
    assert_eq!(
        argvs(r#"echo $HOME "$USER x" ${a:-b} foo$bar *.txt ~/x"#),
        vec![v(&[
            "echo",
            "$HOME",
            "\"$USER x\"",
            "${a:-b}",
            "foo$bar",
            "*.txt",
            "~/x"
        ])]
    );
}

#[test]
fn assignments_and_redirections_are_not_words() {
    let cmds = simple_commands("FOO=1 BAR='x y' make -j4 > log 2>&1 < in").unwrap();
    assert_eq!(cmds.len(), 1);
    assert_eq!(cmds[0].words, v(&["make", "-j4"]));
    assert_eq!(cmds[0].text, "FOO=1 BAR='x y' make -j4");
    assert_eq!(argvs(">out echo hi"), vec![v(&["echo", "hi"])]);
}

#[test]
fn line_continuations() {
    assert_eq!(argvs("echo a \\\n  b"), vec![v(&["echo", "a", "b"])]);
}

#[test]
fn quoted_program_names() {
    assert_eq!(programs(r#""rm" -rf x"#), v(&["rm"]));
    assert_eq!(programs(r#"r''m -rf x"#), v(&["rm"]));
    assert_eq!(programs("/bin/rm -rf x"), v(&["rm"]));
}

// --- nested scripts -------------------------------------------------------------------------

#[test]
fn bash_c_is_parsed() {
    let cmds = simple_commands("bash -c 'sudo rm -rf / && ls'").unwrap();
    assert_eq!(cmds.len(), 3);
    assert_eq!(cmds[0].words, v(&["bash", "-c", "sudo rm -rf / && ls"]));
    assert_eq!(cmds[1].words, v(&["sudo", "rm", "-rf", "/"]));
    assert_eq!(cmds[1].text, "sudo rm -rf /");
    assert_eq!(cmds[2].words, v(&["ls"]));
}

#[test]
fn every_shell_and_option_form() {
    for line in [
        "sh -c 'curl x'",
        "zsh -c 'curl x'",
        "dash -c 'curl x'",
        "/bin/bash -lc 'curl x'",
        "bash -e -c 'curl x' name arg",
        "bash -o pipefail -c 'curl x'",
        "bash --norc -c 'curl x'",
        "bash -c -x 'curl x'",
        "env bash -c 'curl x'",
        "sudo -u me sh -c 'curl x'",
        "xargs -0 sh -c 'curl x'",
        "su - root -c 'curl x'",
        "su --command='curl x'",
        "eval 'curl x'",
        "eval curl x",
        "env -S 'curl x'",
        "env -i -S'curl x'",
    ] {
        assert!(
            programs(line).contains(&"curl".to_string()),
            "{line}: {:?}",
            programs(line)
        );
    }
}

#[test]
fn shell_without_c_is_not_parsed() {
    assert_eq!(programs("bash script.sh 'rm x'"), v(&["bash"]));
    assert_eq!(programs("bash -o c 'rm x'"), v(&["bash"]));
}

#[test]
fn nested_bash_c_levels() {
    let line = "bash -c \"bash -c 'rm -rf x'\"";
    assert_eq!(programs(line), v(&["bash", "bash", "rm"]));
}

#[test]
fn nesting_is_bounded() {
    // Each level: eval 'inner' with the inner quoted for the next level.
    fn nest(levels: usize) -> String {
        let mut line = "ls".to_string();
        for _ in 0..levels {
            line = format!("eval '{}'", line.replace('\'', "'\\''"));
        }
        line
    }
    assert!(simple_commands(&nest(MAX_NESTING)).is_ok());
    assert_eq!(
        simple_commands(&nest(MAX_NESTING + 1)),
        Err(ShellParseError::TooDeep)
    );
}

#[test]
fn dynamic_scripts_are_errors() {
    for line in [
        "bash -c \"$CMD\"",
        "sh -c \"rm $X\"",
        "eval \"$(ssh-agent -s)\"",
        "eval $X",
        "su -c \"$X\"",
    ] {
        assert!(
            matches!(
                simple_commands(line),
                Err(ShellParseError::DynamicScript(_))
            ),
            "{line}"
        );
    }
}

#[test]
fn nested_syntax_errors_are_errors() {
    assert!(matches!(
        simple_commands("bash -c 'echo \"unterminated'"),
        Err(ShellParseError::Syntax { .. })
    ));
}

#[test]
fn env_split_string_keeps_following_arguments_as_words() {
    assert_eq!(
        argvs("env -S 'printf %s' 'a;b'"),
        vec![
            v(&["env", "-S", "printf %s", "a;b"]),
            v(&["printf", "%s", "a;b"])
        ]
    );
}

// --- errors ---------------------------------------------------------------------------------

#[test]
fn parse_failures() {
    for line in [
        "echo \"unterminated",
        "if then",
        "(",
        "ls &&",
        "echo $(",
        "case x in",
    ] {
        assert!(
            matches!(simple_commands(line), Err(ShellParseError::Syntax { .. })),
            "{line:?}: {:?}",
            simple_commands(line)
        );
    }
}

#[test]
fn empty_lines() {
    for line in ["", "   ", "\n\t", "# just a comment"] {
        assert_eq!(
            simple_commands(line),
            Err(ShellParseError::Empty),
            "{line:?}"
        );
    }
}

#[test]
fn error_messages_are_readable() {
    let e = simple_commands("echo \"x").unwrap_err();
    assert!(e.to_string().starts_with("syntax error at byte"), "{e}");
}

#[test]
fn deeply_nested_input_is_refused_before_parsing() {
    // Runs on a test thread (2 MiB stack): these used to overflow it inside tree-sitter.
    for line in [
        format!("{}ls{}", "$(".repeat(2000), ")".repeat(2000)),
        format!("{}ls{}", "( ".repeat(5000), " )".repeat(5000)),
        format!("{}ls{}", "{ ".repeat(5000), "; }".repeat(5000)),
        "x".repeat(MAX_LINE_BYTES + 1),
    ] {
        assert_eq!(simple_commands(&line), Err(ShellParseError::TooDeep));
    }
    let ok = format!("{}ls{}", "( ".repeat(100), " )".repeat(100));
    assert_eq!(simple_commands(&ok).unwrap().len(), 1);
}

// --- wrappers -------------------------------------------------------------------------------

#[test]
fn program_looks_through_wrappers() {
    for (words, expected) in [
        (vec!["rm", "-rf", "x"], "rm"),
        (vec!["env", "FOO=1", "rm", "-rf", "/"], "rm"),
        (
            vec!["env", "-i", "-u", "HOME", "--chdir", "/", "A=b", "rm"],
            "rm",
        ),
        (vec!["env", "-", "rm"], "rm"),
        (vec!["env", "--", "rm"], "rm"),
        (vec!["/usr/bin/env", "rm"], "rm"),
        (vec!["command", "-p", "rm"], "rm"),
        (vec!["builtin", "cd", "x"], "cd"),
        (vec!["exec", "-a", "name", "rm"], "rm"),
        (vec!["nice", "-n", "10", "rm"], "rm"),
        (vec!["nice", "-n10", "rm"], "rm"),
        (vec!["nice", "--adjustment=5", "rm"], "rm"),
        (vec!["nohup", "rm"], "rm"),
        (vec!["time", "-p", "rm"], "rm"),
        (vec!["timeout", "10", "rm"], "rm"),
        (
            vec!["timeout", "-s", "KILL", "--kill-after", "5", "1m", "rm"],
            "rm",
        ),
        (vec!["stdbuf", "-oL", "-e", "0", "rm"], "rm"),
        (vec!["xargs", "-0", "-n", "1", "-I", "{}", "rm"], "rm"),
        (vec!["xargs", "-i{}", "rm"], "rm"),
        (vec!["coproc", "rm"], "rm"),
        (vec!["env", "nice", "timeout", "5", "nohup", "rm"], "rm"),
        (vec!["sudo", "rm"], "sudo"),
        (vec!["doas", "rm"], "doas"),
        (vec!["env", "sudo", "rm"], "sudo"),
        (vec!["env"], "env"),
        (vec!["env", "A=1"], "env"),
        (vec!["xargs"], "xargs"),
        (vec!["timeout", "5"], "timeout"),
        (vec!["env", "-S", "rm -rf /"], "env"),
    ] {
        assert_eq!(program(&cmd(&words)), Some(expected), "{words:?}");
    }
    assert_eq!(program(&cmd(&[])), None);
}

#[test]
fn effective_and_privileged_argv() {
    let c = cmd(&["env", "A=1", "git", "status"]);
    assert_eq!(effective_argv(&c), &v(&["git", "status"])[..]);
    let c = cmd(&["sudo", "-u", "x", "env", "curl", "y"]);
    assert_eq!(effective_argv(&c), &c.words[..]);
    assert_eq!(privileged_argv(&c), &v(&["curl", "y"])[..]);
    let c = cmd(&["sudo", "-E", "--", "PATH=/x", "curl"]);
    assert_eq!(privileged_argv(&c), &v(&["curl"])[..]);
    let c = cmd(&["pkexec", "--user", "root", "curl"]);
    assert_eq!(privileged_argv(&c), &v(&["curl"])[..]);
}

#[test]
fn program_of_parsed_lines() {
    assert_eq!(programs("env FOO=1 rm -rf /"), v(&["rm"]));
    assert_eq!(programs("time rm x"), v(&["rm"]));
    assert_eq!(programs("find . | xargs rm"), v(&["find", "rm"]));
}

#[test]
fn basenames() {
    assert_eq!(basename("/usr/bin/rm"), "rm");
    assert_eq!(basename("rm"), "rm");
    assert_eq!(basename("dir/"), "dir/");
}

// --- robustness -----------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_input_never_panics(line in "\\PC{0,200}") {
        let _ = simple_commands(&line);
    }

    #[test]
    fn shell_like_input_never_panics(
        parts in proptest::collection::vec(
            prop_oneof![
                Just("ls"), Just("rm"), Just("-rf"), Just("'"), Just("\""), Just("$("), Just(")"),
                Just("`"), Just("&&"), Just("||"), Just(";"), Just("|"), Just("&"), Just("\n"),
                Just("bash -c"), Just("eval"), Just("env -S"), Just("if"), Just("then"), Just("fi"),
                Just("{"), Just("}"), Just("("), Just("<("), Just("$'\\x"), Just("\\"), Just("<<E"),
                Just("E"), Just("sudo"), Just("x=1"), Just("${"), Just("#"), Just(" "),
            ],
            0..24,
        )
    ) {
        let line = parts.join(" ");
        if let Ok(cmds) = simple_commands(&line) {
            for c in &cmds {
                prop_assert!(!c.words.is_empty());
                let _ = program(c);
                let _ = privileged_argv(c);
            }
        }
    }

    #[test]
    fn arbitrary_argv_never_panics(words in proptest::collection::vec("[-a-z=0-9S]{0,6}", 0..8)) {
        let dynamic = vec![false; words.len()];
        let c = SimpleCommand { words, text: String::new(), assignments: Vec::new(), dynamic };
        let _ = program(&c);
        let _ = effective_argv(&c);
        let _ = privileged_argv(&c);
    }
}

#[test]
fn non_ascii_input_never_reaches_the_scanner() {
    // This line made tree-sitter-bash's C scanner call isdigit(0xE0135) and segfault.
    let crash = "/\u{11D1E}\u{1138B}i\u{10A05}&\u{307A1}=<*^\u{1E959}^\u{D48}=\u{1EE67}|\"\u{1134B}.\\\u{1E138}\u{1F6E9}b\u{1765}2\u{16B72}`\u{10533}\u{1EE27}\u{2B82}$\u{1F855}{\u{E0135}.~:";
    let _ = simple_commands(crash);
    for line in ["echo {\u{E0135}.1}", "echo {\u{1F600}..2}", "x={\u{E0135}"] {
        let _ = simple_commands(line);
    }
    // Non-ASCII words keep their text.
    let cmds = simple_commands("echo 'héllo wörld' ñ && cat \u{1F600}.txt").unwrap();
    assert_eq!(cmds[0].words, vec!["echo", "héllo wörld", "ñ"]);
    assert_eq!(cmds[1].words, vec!["cat", "\u{1F600}.txt"]);
    assert_eq!(cmds[1].text, "cat \u{1F600}.txt");
}

/// A broken line whose error recovery costs more than the input (`a | ` repeated, ending in a
/// pipe: quadratic in tree-sitter) is given up on within the parse budget.
#[test]
fn a_line_that_takes_too_long_to_parse_is_too_long_to_analyse() {
    let line = "a | ".repeat(12_000);
    let started = std::time::Instant::now();
    assert_eq!(simple_commands(&line), Err(ShellParseError::TooDeep));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // Ordinary long pipelines still parse.
    let ok = format!("{}b", "a | ".repeat(200));
    assert_eq!(simple_commands(&ok).unwrap().len(), 201);
}

#[test]
fn pipes_inside_quotes_do_not_count_toward_the_pipeline_limit() {
    let table = format!("printf '%s' '{}' > t.md", "| a | b |\n".repeat(400));
    assert!(simple_commands(&table).is_ok());
    let long = format!("{}b", "a | ".repeat(MAX_PIPES + 1));
    assert_eq!(simple_commands(&long), Err(ShellParseError::TooDeep));
}

#[test]
fn only_literal_lists_of_commands_are_plain() {
    for plain in [
        "git status",
        "docker ps --format=json && git log -n 3 | head -1",
        "npm test; echo 'done now' & git diff \"a b\"",
        "make\nmake install",
        "sleep 1",
    ] {
        assert!(is_plain(plain), "{plain:?} is plain");
    }
    for not in [
        "git status; ((sh<x))",
        "PATH=.; git status",
        "PATH=. git status",
        "git status > ~/.bashrc",
        "git status; >~/.bashrc",
        "git status 2>/dev/null",
        "git status \"${x:-`sh x`}\"",
        "git status $(id)",
        "git status `id`",
        "git status $HOME",
        "git status \"$HOME\"",
        "git status ~",
        "git status *",
        "/usr/bin/r[m] x",
        "git status {a,b}",
        "r\\\nm x",
        "git st\\atus",
        "(git status)",
        "{ git status; }",
        "! git status",
        "git status # comment",
        "for x in a; do git status; done",
        "f() { sh; }; git status",
        "git status <<EOF\nx\nEOF",
        "git status <(sh)",
        "$'\\x72m' x",
        "[[ -e x ]] && git status",
        "git status $((1+1))",
        "",
    ] {
        assert!(!is_plain(not), "{not:?} is not plain");
    }
}

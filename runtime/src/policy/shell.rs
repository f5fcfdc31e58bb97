//! Split a shell line into the simple commands it would run, with tree-sitter-bash.
//!
//! An agent harness asks warden about a whole line (`cd x && make | tee log`), but rules are
//! about programs. [`simple_commands`] walks the syntax tree and returns every simple command
//! anywhere in the line: in lists (`&&`, `||`, `;`, `&`, newlines), pipelines, subshells,
//! groups, `$(…)` and backtick substitutions (also inside the words and strings of another
//! command), process substitutions, heredoc bodies, the conditions and bodies of
//! `if`/`while`/`until`/`for`/`case`, and function bodies. `declaration_command`s (`export`,
//! `local`, `declare`, `readonly`, `typeset`) and `unset` count as simple commands too.
//!
//! Scripts handed to another interpreter as a string are parsed as well, recursively (at most
//! [`MAX_NESTING`] levels): `bash -c 'LINE'` (also `sh`, `zsh`, `dash`, `ash`, `ksh`, `mksh`),
//! `su -c 'LINE'`, `eval WORDS…` and `env -S 'LINE'`. When such a script is only known at run
//! time (`bash -c "$CMD"`), the line is an error: nobody can say what it runs.
//!
//! A line that is empty (only blanks and comments) or contains a syntax error is an error;
//! callers treat that as "needs approval".
//!
//! [`program`] and [`effective_argv`] look through wrappers that run another program with the
//! same privileges (`env`, `command`, `builtin`, `exec`, `nice`, `nohup`, `time`, `timeout`,
//! `stdbuf`, `xargs`, `coproc`), skipping their options. `sudo` and `doas` are programs
//! themselves and are not looked through; [`privileged_argv`] looks through them as well, for
//! rules that must hold whoever runs the program (block lists).

use serde::Serialize;
use std::cell::RefCell;
use thiserror::Error;
use tree_sitter::{Node, Parser, Tree};

/// How many levels of `bash -c '…'` (and `eval`, `su -c`, `env -S`) are parsed.
pub const MAX_NESTING: usize = 8;

/// One simple command: a program and its arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SimpleCommand {
    /// The argv. Static words have their quoting removed (`'a b'` → `a b`); words whose value
    /// is only known at run time (`$HOME`, `$(pwd)/x`) keep their source text. Leading variable
    /// assignments and redirections are not words.
    pub words: Vec<String>,
    /// The command's source text, assignments included, redirections of a
    /// `redirected_statement` excluded.
    pub text: String,
    /// Leading variable assignments as written (`LD_PRELOAD=x`, `PATH=./bin`). They change what
    /// the command does, so allowlist and exclusion matches refuse commands that have any.
    pub assignments: Vec<String>,
    /// For each word: whether its value is only known at run time — an expansion or
    /// substitution in it, or an unquoted glob (`pus[h]`, `r?`).
    pub dynamic: Vec<bool>,
}

impl SimpleCommand {
    /// Whether the program it runs (after wrappers, `sudo` and the like included) is only
    /// known at run time: `$X`, `"$(echo rm)"`, `${X:-rm}`, `/usr/bin/r[m]`, `xargs … {}`.
    pub fn dynamic_program(&self) -> bool {
        let start = self.words.len() - privileged_argv(self).len();
        self.words.get(start).is_some_and(|w| w == "{}")
            || self.dynamic.get(start).copied().unwrap_or(false)
    }
}

/// Why a line could not be split into simple commands.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ShellParseError {
    #[error("the command line is empty")]
    Empty,
    #[error("syntax error at byte {offset}: `{near}`")]
    Syntax { offset: usize, near: String },
    #[error("the line nests too deep or is too long to analyse")]
    TooDeep,
    #[error("`{0}` runs a script that is only known at run time")]
    DynamicScript(String),
    #[error("{0}")]
    Unanalysable(String),
    #[error("the bash parser is unavailable: {0}")]
    Parser(String),
}

/// Every simple command of `line`, in source order (a command before the substitutions and
/// nested scripts inside it).
pub fn simple_commands(line: &str) -> Result<Vec<SimpleCommand>, ShellParseError> {
    let mut out = Vec::new();
    collect_line(line, 0, &mut out)?;
    Ok(out)
}

/// What the shell would see in `line` that the parser may not: a backslash-newline inside a
/// word (`r\<newline>m` is `rm` to the shell, two words to the parser), a backtick escaped
/// inside a backtick substitution (the shell runs the inner one, the parser sees text).
/// Returns the number of command and process substitutions the shell would run — `$(`, `<(`,
/// `>(` and backtick pairs outside single quotes — for [`collect_line`] to compare with the
/// ones it found.
fn scan_line(line: &str) -> Result<usize, ShellParseError> {
    let unanalysable = |why: &str| Err(ShellParseError::Unanalysable(why.to_string()));
    let b = line.as_bytes();
    let (mut single, mut double, mut backtick) = (false, false, false);
    let mut found = 0usize;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if single {
            single = c != b'\'';
            i += 1;
            continue;
        }
        match c {
            b'\\' => {
                if b.get(i + 1) == Some(&b'\n') {
                    let word = |x: Option<&u8>| {
                        x.is_some_and(|x| !x.is_ascii_whitespace() && !b";|&()<>".contains(x))
                    };
                    if word(i.checked_sub(1).and_then(|p| b.get(p))) && word(b.get(i + 2)) {
                        return unanalysable(
                            "a backslash-newline joins a word the parser reads as two",
                        );
                    }
                }
                if backtick && b.get(i + 1) == Some(&b'`') {
                    return unanalysable("a backtick substitution nests another one");
                }
                i += 2;
                continue;
            }
            b'\'' if !double => single = true,
            b'"' => double = !double,
            b'`' => {
                if backtick {
                    found += 1;
                }
                backtick = !backtick;
            }
            b'$' if b.get(i + 1) == Some(&b'(') && b.get(i + 2) != Some(&b'(') => found += 1,
            b'<' | b'>' if !double && b.get(i + 1) == Some(&b'(') => found += 1,
            _ => {}
        }
        i += 1;
    }
    Ok(found)
}

/// The basename of the program `cmd` runs, after the wrappers [`effective_argv`] looks
/// through. `None` for a command without words.
pub fn program(cmd: &SimpleCommand) -> Option<&str> {
    effective_argv(cmd).first().map(|w| basename(w))
}

/// The argv after wrappers (`env FOO=1 nice -n 5 rm -rf x` → `rm -rf x`). When a wrapper has
/// no command (`env`, `xargs` alone) the argv starts at that wrapper.
pub fn effective_argv(cmd: &SimpleCommand) -> &[String] {
    &cmd.words[effective_start(&cmd.words, false)..]
}

/// Like [`effective_argv`], but also looks through `sudo`, `doas` and `pkexec`
/// (`sudo -u x env curl y` → `curl y`).
pub fn privileged_argv(cmd: &SimpleCommand) -> &[String] {
    &cmd.words[effective_start(&cmd.words, true)..]
}

/// The last path component of a program word (`/usr/bin/rm` → `rm`).
pub fn basename(word: &str) -> &str {
    match word.rsplit('/').next() {
        Some(base) if !base.is_empty() => base,
        _ => word,
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing and walking.

thread_local! {
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// Deepest bracket nesting handed to the parser. tree-sitter recurses internally, and a
/// hostile line of thousands of nested `(` would exhaust a thread's stack.
pub const MAX_BRACKET_DEPTH: usize = 128;
/// Longest line handed to the parser.
pub const MAX_LINE_BYTES: usize = 256 * 1024;
/// The time one parse of a line may take (see [`parse`]); real command lines take well under
/// a millisecond.
const PARSE_BUDGET: std::time::Duration = std::time::Duration::from_millis(500);
/// Pipeline operators one line may have (see [`parse`]).
pub const MAX_PIPES: usize = 1000;

/// The deepest nesting of `(`/`{`/`[` and backticks, counted on raw bytes (quotes ignored, so
/// it can only over-count, which makes a line need approval, never pass).
fn bracket_depth(line: &str) -> usize {
    let (mut depth, mut max, mut backticks) = (0usize, 0usize, 0usize);
    for b in line.bytes() {
        match b {
            b'(' | b'{' | b'[' => depth += 1,
            b')' | b'}' | b']' => depth = depth.saturating_sub(1),
            b'`' => backticks += 1,
            _ => {}
        }
        max = max.max(depth + backticks / 2);
    }
    max
}

/// `|` outside quotes: pipeline operators, roughly (a heredoc's body counts too).
fn unquoted_pipes(line: &str) -> usize {
    let (mut single, mut double, mut escaped) = (false, false, false);
    let mut n = 0;
    for b in line.bytes() {
        if escaped {
            escaped = false;
            continue;
        }
        match b {
            b'\\' if !single => escaped = true,
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'|' if !single && !double => n += 1,
            _ => {}
        }
    }
    n
}

fn parse(line: &str) -> Result<Tree, ShellParseError> {
    // Long pipelines are where tree-sitter-bash's cost explodes (a broken one of 6 000 stages
    // took 1.5 s and 430 MB, past any cancellation): more stages than anyone writes are "too
    // long to analyse".
    if line.len() > MAX_LINE_BYTES
        || bracket_depth(line) > MAX_BRACKET_DEPTH
        || unquoted_pipes(line) > MAX_PIPES
    {
        return Err(ShellParseError::TooDeep);
    }
    PARSER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let mut parser = Parser::new();
            parser
                .set_language(&tree_sitter_bash::LANGUAGE.into())
                .map_err(|e| ShellParseError::Parser(e.to_string()))?;
            *slot = Some(parser);
        }
        let parser = slot
            .as_mut()
            .ok_or_else(|| ShellParseError::Parser("not initialised".to_string()))?;
        // tree-sitter-bash's external scanner passes code points to isdigit()/isalpha(),
        // which is undefined behaviour above 255 in glibc (it segfaults on e.g. `{` followed by
        // U+E0135). Shell syntax is ASCII, so the parser gets a copy with every non-ASCII byte
        // replaced by `a`: a word character either way, and byte offsets stay the same.
        let masked: Vec<u8> = line
            .bytes()
            .map(|b| if b.is_ascii() { b } else { b'a' })
            .collect();
        // tree-sitter's error recovery grows faster than the input on some broken lines (a
        // long run of `a | ` ending in a pipe: 16 KB took 0.8 s and 235 MB, 48 KB 1.3 GB),
        // and an agent's command line can be a prompt-injected one: the parse gets a time
        // budget, and a line that needs more is "too long to analyse".
        let started = std::time::Instant::now();
        let mut over_budget = false;
        // The budget is this thread's CPU time, not the clock's: a loaded machine must not
        // turn a long valid line into "too long to analyse".
        let cpu = || {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `ts` is a valid, writable timespec the kernel fills.
            let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            if rc != 0 {
                return started.elapsed();
            }
            std::time::Duration::new(
                u64::try_from(ts.tv_sec).unwrap_or(0),
                u32::try_from(ts.tv_nsec).unwrap_or(0),
            )
        };
        let cpu_start = cpu();
        let mut progress = |_: &tree_sitter::ParseState| {
            over_budget = cpu().saturating_sub(cpu_start) > PARSE_BUDGET;
            over_budget
        };
        let len = masked.len();
        let tree = parser.parse_with_options(
            &mut |i: usize, _| if i < len { &masked[i..] } else { &[] },
            None,
            Some(tree_sitter::ParseOptions::new().progress_callback(&mut progress)),
        );
        if tree.is_none() {
            // A failed parse leaves the parser mid-way; start afresh next time.
            parser.reset();
            if over_budget {
                return Err(ShellParseError::TooDeep);
            }
        }
        let tree =
            tree.ok_or_else(|| ShellParseError::Parser("parse was cancelled".to_string()))?;
        // Text is sliced from the original line, so every node must start and end on a
        // character boundary of it.
        if let Some(offset) = split_character(&tree, line) {
            return Err(ShellParseError::Syntax {
                offset,
                near: "a token boundary inside a non-ASCII character".to_string(),
            });
        }
        Ok(tree)
    })
}

/// Whether `line` is a *plain* list of commands: simple commands whose every word is a
/// literal — unquoted, single-quoted or double-quoted text without expansions, globs, tildes,
/// braces or backslashes — joined by `;`, `&&`, `||`, `|`, `&` or newlines. No redirections,
/// no assignments, no substitutions, expansions or arithmetic, no subshells, groups, loops,
/// functions, heredocs or comments.
///
/// A line runs *outside* the sandbox (`sandbox.excludedCommands`) only when it is plain: then
/// every program and argument is what the policy read, whichever shell runs the line. The
/// rest is where a line's meaning escapes a reading of its commands (red-team round 15):
/// `> ~/.bashrc` writes a protected file without being a command, a bare `PATH=.` before the
/// excluded command changes which program runs, and `((sh<x))` is arithmetic to bash but
/// two nested subshells running `sh` to dash, which is `/bin/sh` on Debian.
pub fn is_plain(line: &str) -> bool {
    // A backslash anywhere: an escaped newline joins words the parser keeps apart
    // (`r\<newline>m` is `rm` to the shell).
    if line.contains('\\') {
        return false;
    }
    let Ok(tree) = parse(line) else {
        return false;
    };
    let root = tree.root_node();
    if root.has_error() || root.named_child_count() == 0 {
        return false;
    }
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        let text = node.utf8_text(line.as_bytes()).unwrap_or_default();
        let ok = match node.kind() {
            "program" | "list" | "pipeline" | "command" | "command_name" => true,
            // The line's own text between the words: separators and blanks only.
            "word" | "number" => !text.bytes().any(|b| {
                matches!(
                    b,
                    b'*' | b'?'
                        | b'['
                        | b']'
                        | b'{'
                        | b'}'
                        | b'~'
                        | b'\\'
                        | b'$'
                        | b'`'
                        | b'('
                        | b')'
                        | b'<'
                        | b'>'
                        | b'\''
                        | b'"'
                )
            }),
            "raw_string" => true,
            "string" => !text.bytes().any(|b| matches!(b, b'$' | b'`' | b'\\')),
            "string_content" => true,
            _ => false,
        };
        if !ok {
            return false;
        }
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            if child.is_named() {
                stack.push(child);
            } else if !matches!(
                child.kind(),
                ";" | "&&" | "||" | "|" | "&" | "\n" | "'" | "\""
            ) {
                return false;
            }
        }
    }
    true
}

/// Blanks, in `literal` (a copy of `line`), the body of the heredoc at `node` when its
/// delimiter is quoted: that text is data, not run.
fn blank_literal_heredoc(node: Node, line: &str, literal: &mut [u8]) {
    let mut cursor = node.walk();
    let children: Vec<Node> = node.children(&mut cursor).collect();
    let quoted = children.iter().any(|c| {
        c.kind() == "heredoc_start"
            && line.as_bytes()[c.byte_range()]
                .iter()
                .any(|b| matches!(b, b'\'' | b'"' | b'\\'))
    });
    if quoted {
        for body in children.iter().filter(|c| c.kind() == "heredoc_body") {
            literal[body.byte_range()].fill(b' ');
        }
    }
}

/// The first node boundary that falls inside a multi-byte character of `line`, if any.
fn split_character(tree: &Tree, line: &str) -> Option<usize> {
    if line.is_ascii() {
        return None;
    }
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        for b in [node.start_byte(), node.end_byte()] {
            if !line.is_char_boundary(b.min(line.len())) {
                return Some(b);
            }
        }
        let mut cursor = node.walk();
        stack.extend(node.children(&mut cursor));
    }
    None
}

fn collect_line(
    line: &str,
    depth: usize,
    out: &mut Vec<SimpleCommand>,
) -> Result<(), ShellParseError> {
    if depth > MAX_NESTING {
        return Err(ShellParseError::TooDeep);
    }
    let tree = parse(line)?;
    let root = tree.root_node();
    if root.has_error() {
        return Err(syntax_error(root, line));
    }
    let mut cursor = root.walk();
    if !root
        .named_children(&mut cursor)
        .any(|child| child.kind() != "comment")
    {
        return Err(ShellParseError::Empty);
    }

    // Every substitution the shell would run must be one this walk looks into (one in a
    // `${x#…}` pattern or a comment is not: ask rather than guess); the bodies of heredocs
    // with a quoted delimiter are text, not run. `((…))` is arithmetic to bash and two nested
    // subshells to dash: not analysed either.
    let mut parsed = 0usize;
    let mut literal = line.as_bytes().to_vec();
    // Iterative pre-order walk: deeply nested input must not exhaust the stack.
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        match node.kind() {
            "command" => {
                if let Some(words) = command_words(node, line) {
                    push_command(node, line, words, depth, out)?;
                }
            }
            "declaration_command" | "unset_command" => {
                let words = declaration_words(node, line);
                push_command(node, line, words, depth, out)?;
            }
            "command_substitution" | "process_substitution" => parsed += 1,
            "variable_assignment" if prompt_assignment(&line[node.byte_range()]) => {
                return Err(ShellParseError::Unanalysable(
                    "a prompt string (PS4, PROMPT_COMMAND, …) runs the substitutions in its text"
                        .to_string(),
                ))
            }
            "compound_statement" if node.child(0).is_some_and(|c| c.kind() == "((") => {
                return Err(ShellParseError::Unanalysable(
                    "`((…))` is arithmetic to bash and two subshells to sh".to_string(),
                ))
            }
            "heredoc_redirect" => blank_literal_heredoc(node, line, &mut literal),
            _ => {}
        }
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    let expected = scan_line(&String::from_utf8_lossy(&literal))?;
    if parsed != expected {
        return Err(ShellParseError::Unanalysable(format!(
            "the line runs {expected} substitution(s) where the parser finds {parsed}"
        )));
    }
    Ok(())
}

fn push_command(
    node: Node,
    src: &str,
    words: Vec<Word>,
    depth: usize,
    out: &mut Vec<SimpleCommand>,
) -> Result<(), ShellParseError> {
    if words.is_empty() {
        return Ok(());
    }
    let text = src[node.byte_range()].to_string();
    let mut words = words;
    xargs_replaced(&mut words);
    let script = nested_script(&words, &text)?;
    let mut cursor = node.walk();
    let assignments = node
        .named_children(&mut cursor)
        .filter(|c| c.kind() == "variable_assignment")
        .map(|c| src[c.byte_range()].to_string())
        .collect();
    let dynamic: Vec<bool> = words.iter().map(|w| !w.is_static || w.glob).collect();
    let values: Vec<String> = words.into_iter().map(|w| w.value).collect();
    // The program, after wrappers (`sudo` and the like included).
    let start = effective_start(&values, true);
    evaluates_text(&values, start, &text)?;
    // `find … -exec PROGRAM ARGS… ;` (also `-execdir`, `-ok`, `-okdir`, ended by `+`): each
    // runs a command of its own.
    let mut extra = find_execs(&values, &dynamic, start);
    // A program that runs another one named somewhere among its arguments, behind options
    // the wrapper table does not model (`setsid -w rm`, `taskset 0x3 rm`, `flock F -c 'rm
    // x'`: red-team round 17): each later word is taken as a program that may run (a false
    // match asks or refuses, never allows more), and each later word with a blank in it as a
    // script that may run.
    let mut scripts = Vec::new();
    if values
        .get(start)
        .is_some_and(|p| RUNNERS.contains(&basename(p)))
    {
        for i in start + 1..values.len() {
            if values[i].starts_with('-') {
                continue;
            }
            extra.push((values[i..].to_vec(), dynamic[i..].to_vec()));
            if values[i].contains(char::is_whitespace) && !dynamic[i] {
                scripts.push(values[i].clone());
            }
        }
    }
    out.push(SimpleCommand {
        words: values,
        text: text.clone(),
        assignments,
        dynamic,
    });
    for (words, dynamic) in extra {
        out.push(SimpleCommand {
            words,
            text: text.clone(),
            assignments: Vec::new(),
            dynamic,
        });
    }
    for s in scripts {
        collect_line(&s, depth + 1, out)?;
    }
    if let Some(script) = script {
        collect_line(&script, depth + 1, out)?;
    }
    Ok(())
}

/// Commands that make bash run text the parser reads as data, or that the parser misreads
/// (red-team round 16): a shell keyword where a program should be (`coproc NAME { … }`,
/// `coproc NAME while …` parse as words), `coproc`, aliases (`alias`, `shopt -s
/// expand_aliases`), prompt strings run for their substitutions (`PS4=…`, `PS1`, `PS0`,
/// `PROMPT_COMMAND`, `${x@P}`), callbacks (`mapfile -C`/`readarray -C`), lookups changed
/// behind a name (`hash -p`, `enable -f`), and git aliases given on the line (`git -c
/// alias.x=…`).
fn evaluates_text(values: &[String], start: usize, text: &str) -> Result<(), ShellParseError> {
    let why = |w: &str| Err(ShellParseError::Unanalysable(format!("`{text}`: {w}")));
    let program = values.get(start).map(|p| basename(p)).unwrap_or_default();
    const KEYWORDS: [&str; 21] = [
        "{", "}", "do", "done", "then", "fi", "elif", "else", "while", "until", "if", "for",
        "case", "esac", "function", "select", "coproc", "in", "!", "[[", "]]",
    ];
    if KEYWORDS.contains(&program) || values.first().is_some_and(|v| v == "coproc") {
        return why("a shell keyword where a program should be is not analysed");
    }
    if text.contains("@P}") {
        return why("a prompt expansion (`@P`) runs the substitutions in a variable's text");
    }
    let args = values.get(start + 1..).unwrap_or_default();
    let flagged = |f: &str| args.iter().any(|a| a.starts_with('-') && a.contains(f));
    let has = |w: &str| args.iter().any(|a| a == w);
    match program {
        "alias" if !args.is_empty() => why("an alias changes what a later word runs"),
        "shopt" if has("expand_aliases") => why("aliases change what words run"),
        "mapfile" | "readarray" | "compgen" | "complete" if flagged("C") => {
            why("a callback runs text")
        }
        "hash" if flagged("p") => why("`hash -p` runs another program under a name"),
        "enable" if flagged("f") => why("`enable -f` loads a builtin"),
        "git" if args.iter().any(|a| a.starts_with("alias.")) => {
            why("a git alias on the line runs what it says")
        }
        "declare" | "typeset" | "export" | "local" | "readonly"
            if args.iter().any(|a| prompt_assignment(a)) =>
        {
            why("a prompt string runs the substitutions in its text")
        }
        _ => Ok(()),
    }
}

/// Assignments to prompt strings bash runs for their substitutions (`PS4` with `set -x`).
fn prompt_assignment(assignment: &str) -> bool {
    ["PS0=", "PS1=", "PS2=", "PS4=", "PROMPT_COMMAND="]
        .iter()
        .any(|p| assignment.starts_with(p))
}

/// `xargs -I STR` (`-i[STR]`, `--replace[=STR]`, STR `{}` by default) puts its input where
/// STR appears in the command it runs: those words are only known at run time (`xargs -I{}
/// sh -c {}` runs whatever the input says).
fn xargs_replaced(words: &mut [Word]) {
    let Some(at) = words.iter().position(|w| basename(&w.value) == "xargs") else {
        return;
    };
    let mut replace: Option<String> = None;
    let mut i = at + 1;
    while let Some(w) = words.get(i) {
        let a = w.value.as_str();
        if let Some(v) = a.strip_prefix("--replace") {
            replace = Some(v.strip_prefix('=').unwrap_or("{}").to_string());
        } else if let Some(v) = a.strip_prefix("-I") {
            if v.is_empty() {
                replace = words.get(i + 1).map(|w| w.value.clone());
                i += 1;
            } else {
                replace = Some(v.to_string());
            }
        } else if let Some(v) = a.strip_prefix("-i") {
            replace = Some(if v.is_empty() {
                "{}".to_string()
            } else {
                v.to_string()
            });
        } else if !a.starts_with('-') {
            break;
        }
        i += 1;
    }
    let Some(replace) = replace.filter(|r| !r.is_empty()) else {
        return;
    };
    for w in words.iter_mut().skip(i) {
        if w.value.contains(&replace) {
            w.is_static = false;
        }
    }
}

/// Programs that run another program named among their arguments.
const RUNNERS: [&str; 41] = [
    "setsid",
    "flock",
    "taskset",
    "ionice",
    "chrt",
    "unshare",
    "nsenter",
    "prlimit",
    "chroot",
    "strace",
    "ltrace",
    "valgrind",
    "perf",
    "watch",
    "runuser",
    "sg",
    "script",
    "systemd-run",
    "unbuffer",
    "faketime",
    "rlwrap",
    "catchsegv",
    "parallel",
    "gdb",
    "firejail",
    "proot",
    "tini",
    "dumb-init",
    "cgexec",
    "numactl",
    "torsocks",
    "proxychains",
    "proxychains4",
    "nocache",
    "eatmydata",
    "fakeroot",
    "setpriv",
    "capsh",
    "dbus-run-session",
    "xvfb-run",
    "ssh-agent",
];

/// The commands `find` runs for `-exec`, `-execdir`, `-ok` and `-okdir`.
fn find_execs(words: &[String], dynamic: &[bool], start: usize) -> Vec<(Vec<String>, Vec<bool>)> {
    if words.get(start).map(|w| basename(w)) != Some("find") {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut i = start + 1;
    while i < words.len() {
        if matches!(words[i].as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            let from = i + 1;
            let mut to = from;
            while to < words.len() && words[to] != ";" && words[to] != "+" {
                to += 1;
            }
            if to > from {
                out.push((words[from..to].to_vec(), dynamic[from..to].to_vec()));
            }
            i = to;
        }
        i += 1;
    }
    out
}

fn syntax_error(root: Node, src: &str) -> ShellParseError {
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if node.is_error() || node.is_missing() {
            let start = node.start_byte();
            let near: String = src.get(start..).unwrap_or("").chars().take(24).collect();
            return ShellParseError::Syntax {
                offset: start,
                near: if node.is_missing() {
                    format!("missing {}", node.kind())
                } else {
                    near
                },
            };
        }
        let mut cursor = node.walk();
        let children: Vec<Node> = node
            .children(&mut cursor)
            .filter(|c| c.has_error())
            .collect();
        stack.extend(children.into_iter().rev());
    }
    ShellParseError::Syntax {
        offset: 0,
        near: src.chars().take(24).collect(),
    }
}

// ---------------------------------------------------------------------------------------------
// Words.

/// A word's value and whether that value is known before run time.
#[derive(Clone, Debug)]
struct Word {
    value: String,
    is_static: bool,
    /// An unquoted part has a glob character (`*`, `?`, `[`): the shell may expand it.
    glob: bool,
}

/// The words of a `command` node: its name and arguments. `None` when it has no name.
fn command_words(node: Node, src: &str) -> Option<Vec<Word>> {
    let mut parts: Vec<Node> = Vec::new();
    for i in 0..node.child_count() {
        let field = u32::try_from(i)
            .ok()
            .and_then(|i| node.field_name_for_child(i));
        if matches!(field, Some("name") | Some("argument")) {
            if let Some(child) = node.child(i) {
                parts.push(child);
            }
        }
    }
    if parts.is_empty() {
        return None;
    }
    Some(group_words(&parts, src))
}

fn declaration_words(node: Node, src: &str) -> Vec<Word> {
    let mut parts = Vec::new();
    for i in 0..node.child_count() {
        if let Some(child) = node.child(i) {
            if child.kind() != "comment" {
                parts.push(child);
            }
        }
    }
    group_words(&parts, src)
}

/// Adjacent nodes with nothing between them form one word (`$"x"` parses as `$` + `"x"`).
fn group_words(parts: &[Node], src: &str) -> Vec<Word> {
    let mut words = Vec::new();
    let mut i = 0;
    while i < parts.len() {
        let mut j = i + 1;
        while j < parts.len() && parts[j].start_byte() == parts[j - 1].end_byte() {
            j += 1;
        }
        words.push(word_of(&parts[i..j], src));
        i = j;
    }
    words
}

fn word_of(group: &[Node], src: &str) -> Word {
    let (Some(first), Some(last)) = (group.first(), group.last()) else {
        return Word {
            value: String::new(),
            is_static: true,
            glob: false,
        };
    };
    let text = &src[first.start_byte()..last.end_byte()];
    let glob = group.iter().any(|n| unquoted_glob(*n, src));
    let mut value = String::new();
    for (k, node) in group.iter().enumerate() {
        // `$"…"` (a translated string) is the string itself in the C locale.
        let next_is_string = group.get(k + 1).is_some_and(|n| n.kind() == "string");
        if !node.is_named() && node.kind() == "$" && next_is_string {
            continue;
        }
        match static_value(*node, src) {
            Some(v) => value.push_str(&v),
            None => {
                return Word {
                    value: text.to_string(),
                    is_static: false,
                    glob,
                }
            }
        }
    }
    Word {
        value,
        is_static: true,
        glob,
    }
}

/// Whether `node` (part of a word) holds an unquoted glob character.
fn unquoted_glob(node: Node, src: &str) -> bool {
    match node.kind() {
        "word" => src[node.byte_range()]
            .bytes()
            .any(|b| matches!(b, b'*' | b'?' | b'[')),
        "command_name" | "concatenation" => {
            let mut cursor = node.walk();
            let found = node.children(&mut cursor).any(|c| unquoted_glob(c, src));
            found
        }
        _ => false,
    }
}

/// The value of a word node when it is known before run time.
fn static_value(node: Node, src: &str) -> Option<String> {
    let text = &src[node.byte_range()];
    if !node.is_named() {
        return Some(text.to_string());
    }
    match node.kind() {
        "word" => Some(unescape_unquoted(text)),
        "number" if node.named_child_count() == 0 => Some(text.to_string()),
        "raw_string" => text
            .strip_prefix('\'')
            .and_then(|t| t.strip_suffix('\''))
            .map(str::to_string),
        "string" => {
            let mut cursor = node.walk();
            let only_content = node
                .named_children(&mut cursor)
                .all(|c| c.kind() == "string_content");
            if !only_content {
                return None;
            }
            text.strip_prefix('"')
                .and_then(|t| t.strip_suffix('"'))
                .map(unescape_double_quoted)
        }
        "ansi_c_string" => text
            .strip_prefix("$'")
            .and_then(|t| t.strip_suffix('\''))
            .and_then(unescape_ansi_c),
        "translated_string" => {
            let inner = node.named_child(0)?;
            static_value(inner, src)
        }
        "command_name" | "concatenation" => {
            let mut value = String::new();
            let mut expected = node.start_byte();
            for i in 0..node.child_count() {
                let child = node.child(i)?;
                if child.start_byte() != expected {
                    return None;
                }
                value.push_str(&static_value(child, src)?);
                expected = child.end_byte();
            }
            (expected == node.end_byte()).then_some(value)
        }
        "variable_assignment" => {
            let value_node = node.child_by_field_name("value")?;
            let head = &src[node.start_byte()..value_node.start_byte()];
            Some(format!("{head}{}", static_value(value_node, src)?))
        }
        "variable_name" => Some(text.to_string()),
        _ => None,
    }
}

/// Unquoted word: `\x` is `x`, backslash-newline disappears.
fn unescape_unquoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('\n') => {}
                Some(n) => out.push(n),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Inside double quotes only `\$`, `` \` ``, `\"`, `\\` and backslash-newline are escapes.
fn unescape_double_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('$' | '`' | '"' | '\\') => {
                    if let Some(n) = chars.next() {
                        out.push(n);
                    }
                }
                Some('\n') => {
                    chars.next();
                }
                _ => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `$'…'` escapes. `None` (treated as dynamic) for forms not decoded here (`\cX`, invalid).
fn unescape_ansi_c(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = *chars.get(i)?;
        i += 1;
        let simple = match e {
            'a' => Some('\x07'),
            'b' => Some('\x08'),
            'e' | 'E' => Some('\x1b'),
            'f' => Some('\x0c'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'v' => Some('\x0b'),
            '\\' | '\'' | '"' | '?' => Some(e),
            _ => None,
        };
        if let Some(s) = simple {
            out.push(s);
            continue;
        }
        let (radix, max) = match e {
            'x' => (16, 2),
            'u' => (16, 4),
            'U' => (16, 8),
            '0'..='7' => {
                i -= 1;
                (8, 3)
            }
            _ => return None,
        };
        let digits: String = chars[i..]
            .iter()
            .take(max)
            .take_while(|d| d.is_digit(radix))
            .collect();
        if digits.is_empty() {
            return None;
        }
        i += digits.chars().count();
        let code = u32::from_str_radix(&digits, radix).ok()?;
        out.push(char::from_u32(code)?);
    }
    Some(out)
}

// ---------------------------------------------------------------------------------------------
// Wrappers.

/// How a wrapper's options are laid out.
struct Wrapper {
    /// Short options that take a value (attached, `-n5`, or as the next word).
    short_value: &'static str,
    /// Short options whose value can only be attached (`xargs -i{}`).
    short_optional: &'static str,
    /// Long options that take a value as the next word unless written `--opt=value`.
    long_value: &'static [&'static str],
    /// Positional words between the options and the program (`timeout DURATION`).
    positional: usize,
    /// `NAME=VALUE` words before the program are skipped (`env`, `sudo`).
    assignments: bool,
    /// Options after which the wrapper runs no argv of its own (`env -S`).
    stop_short: &'static str,
    stop_long: &'static [&'static str],
    /// Only with [`privileged_argv`].
    privileged: bool,
}

const PLAIN: Wrapper = Wrapper {
    short_value: "",
    short_optional: "",
    long_value: &[],
    positional: 0,
    assignments: false,
    stop_short: "",
    stop_long: &[],
    privileged: false,
};

fn wrapper(name: &str) -> Option<Wrapper> {
    Some(match name {
        "env" => Wrapper {
            short_value: "uC",
            long_value: &["--unset", "--chdir"],
            assignments: true,
            stop_short: "S",
            stop_long: &["--split-string"],
            ..PLAIN
        },
        "command" | "builtin" | "nohup" | "coproc" | "busybox" => PLAIN,
        "exec" => Wrapper {
            short_value: "a",
            ..PLAIN
        },
        "nice" => Wrapper {
            short_value: "n",
            long_value: &["--adjustment"],
            ..PLAIN
        },
        // bash's `time` keyword takes a pipeline: `time X=1 rm` runs `rm` with `X=1`.
        "time" => Wrapper {
            short_value: "fo",
            long_value: &["--format", "--output"],
            assignments: true,
            ..PLAIN
        },
        "timeout" => Wrapper {
            short_value: "sk",
            long_value: &["--signal", "--kill-after"],
            positional: 1,
            ..PLAIN
        },
        "stdbuf" => Wrapper {
            short_value: "ioe",
            long_value: &["--input", "--output", "--error"],
            ..PLAIN
        },
        "xargs" => Wrapper {
            short_value: "adEILnPs",
            short_optional: "eil",
            long_value: &[
                "--arg-file",
                "--delimiter",
                "--max-args",
                "--max-procs",
                "--max-chars",
                "--process-slot-var",
            ],
            ..PLAIN
        },
        "sudo" => Wrapper {
            short_value: "ugCDpRrtTUh",
            long_value: &[
                "--user",
                "--group",
                "--close-from",
                "--chdir",
                "--prompt",
                "--chroot",
                "--role",
                "--type",
                "--command-timeout",
                "--other-user",
                "--host",
            ],
            assignments: true,
            privileged: true,
            ..PLAIN
        },
        "doas" => Wrapper {
            short_value: "uC",
            privileged: true,
            ..PLAIN
        },
        "pkexec" => Wrapper {
            long_value: &["--user"],
            privileged: true,
            ..PLAIN
        },
        _ => return None,
    })
}

impl Wrapper {
    /// How many words after the wrapper's name precede the program it runs; `None` when it
    /// runs no argv of its own.
    fn skip(&self, args: &[String]) -> Option<usize> {
        let mut i = 0;
        let mut positional = self.positional;
        while let Some(arg) = args.get(i) {
            if arg == "--" {
                i += 1;
                break;
            }
            if arg == "-" {
                i += 1; // `env -` is `env -i`
                continue;
            }
            if let Some(long) = arg.strip_prefix("--") {
                let name = format!("--{}", long.split('=').next().unwrap_or(long));
                if self.stop_long.contains(&name.as_str()) {
                    return None;
                }
                i += if !long.contains('=') && self.long_value.contains(&name.as_str()) {
                    2
                } else {
                    1
                };
                continue;
            }
            if arg.len() > 1 && arg.starts_with('-') {
                i += 1;
                for (pos, c) in arg.char_indices().skip(1) {
                    if self.stop_short.contains(c) {
                        return None;
                    }
                    if self.short_optional.contains(c) {
                        break;
                    }
                    if self.short_value.contains(c) {
                        if pos + c.len_utf8() == arg.len() {
                            i += 1; // the value is the next word
                        }
                        break;
                    }
                }
                continue;
            }
            break;
        }
        while let Some(arg) = args.get(i) {
            if positional > 0 {
                positional -= 1;
                i += 1;
            } else if self.assignments && arg.contains('=') {
                i += 1;
            } else {
                break;
            }
        }
        Some(i)
    }
}

fn effective_start(words: &[String], privileged: bool) -> usize {
    let mut start = 0;
    while let Some(first) = words.get(start) {
        let Some(w) = wrapper(basename(first)) else {
            break;
        };
        if w.privileged && !privileged {
            break;
        }
        match w.skip(&words[start + 1..]) {
            Some(n) if start + 1 + n < words.len() => start += 1 + n,
            _ => break,
        }
    }
    start
}

// ---------------------------------------------------------------------------------------------
// Nested scripts.

const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ash", "ksh", "mksh"];

/// The script a command hands to an interpreter as a string, if any.
fn nested_script(words: &[Word], text: &str) -> Result<Option<String>, ShellParseError> {
    let values: Vec<String> = words.iter().map(|w| w.value.clone()).collect();
    let start = effective_start(&values, true);
    let argv = &words[start..];
    let Some(first) = argv.first() else {
        return Ok(None);
    };
    let script = match basename(&first.value) {
        name if SHELLS.contains(&name) => shell_c_script(&argv[1..]),
        "su" => su_c_script(&argv[1..]),
        // `trap SCRIPT CONDITION…`: the script runs later, on the condition (`EXIT`).
        "trap" => {
            let args: Vec<&Word> = argv[1..].iter().skip_while(|w| w.value == "--").collect();
            match args.first() {
                Some(w) if args.len() >= 2 && !w.value.bytes().all(|b| b.is_ascii_digit()) => {
                    Some((*w).clone())
                }
                _ => None,
            }
        }
        "env" => env_split_string(&argv[1..]),
        "eval" => {
            let args = &argv[1..];
            if args.iter().any(|w| !w.is_static) {
                return Err(ShellParseError::DynamicScript(text.to_string()));
            }
            let joined: Vec<&str> = args.iter().map(|w| w.value.as_str()).collect();
            Some(Word {
                value: joined.join(" "),
                is_static: true,
                glob: false,
            })
        }
        _ => None,
    };
    match script {
        Some(w) if !w.is_static => Err(ShellParseError::DynamicScript(text.to_string())),
        Some(w) if w.value.trim().is_empty() => Ok(None),
        Some(w) => Ok(Some(w.value)),
        None => Ok(None),
    }
}

/// `sh [options] -c SCRIPT [NAME [ARGS…]]`: options come first, SCRIPT is the first operand.
fn shell_c_script(args: &[Word]) -> Option<Word> {
    let mut has_c = false;
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        let a = arg.value.as_str();
        if a == "--" || a == "-" {
            i += 1;
            break;
        }
        if a.starts_with("--") {
            i += if matches!(a, "--rcfile" | "--init-file") {
                2
            } else {
                1
            };
            continue;
        }
        if a.len() > 1 && (a.starts_with('-') || a.starts_with('+')) {
            i += 1;
            for c in a.chars().skip(1) {
                match c {
                    'c' if a.starts_with('-') => has_c = true,
                    'o' | 'O' => i += 1,
                    _ => {}
                }
            }
            continue;
        }
        break;
    }
    if has_c {
        args.get(i).cloned()
    } else {
        None
    }
}

/// `su [options] [-] [USER] -c COMMAND` (or `--command=COMMAND`).
fn su_c_script(args: &[Word]) -> Option<Word> {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        let a = arg.value.as_str();
        if let Some(cmd) = a.strip_prefix("--command=") {
            return Some(Word {
                value: cmd.to_string(),
                is_static: arg.is_static,
                glob: false,
            });
        }
        if a == "--command" {
            return args.get(i + 1).cloned();
        }
        if a.len() > 1 && a.starts_with('-') && !a.starts_with("--") {
            for (pos, c) in a.char_indices().skip(1) {
                if c == 'c' {
                    let rest = &a[pos + 1..];
                    if rest.is_empty() {
                        return args.get(i + 1).cloned();
                    }
                    return Some(Word {
                        value: rest.to_string(),
                        is_static: arg.is_static,
                        glob: false,
                    });
                }
                if matches!(c, 's' | 'g' | 'G' | 'w') {
                    if pos + 1 == a.len() {
                        i += 1;
                    }
                    break;
                }
            }
        }
        i += 1;
    }
    None
}

/// `env [options] -S 'STRING' [ARGS…]`: STRING is split into words like a shell would.
fn env_split_string(args: &[Word]) -> Option<Word> {
    for (i, arg) in args.iter().enumerate() {
        let a = arg.value.as_str();
        let (script, rest) = if let Some(s) = a.strip_prefix("--split-string=") {
            (Some(s.to_string()), i + 1)
        } else if a == "--split-string" || a == "-S" {
            (args.get(i + 1).map(|w| w.value.clone()), i + 2)
        } else if a.starts_with('-') && !a.starts_with("--") {
            match a.find('S') {
                Some(pos) => {
                    let attached = &a[pos + 1..];
                    if attached.is_empty() {
                        (args.get(i + 1).map(|w| w.value.clone()), i + 2)
                    } else {
                        (Some(attached.to_string()), i + 1)
                    }
                }
                None => continue,
            }
        } else {
            continue;
        };
        let script = script?;
        let all_static = args[i..].iter().all(|w| w.is_static);
        let mut value = script;
        for w in args.get(rest..).unwrap_or(&[]) {
            // Words after the string are arguments, not script text.
            value.push_str(" '");
            value.push_str(&w.value.replace('\'', "'\\''"));
            value.push('\'');
        }
        return Some(Word {
            value,
            is_static: all_static,
            glob: false,
        });
    }
    None
}

#[cfg(test)]
#[path = "shell_tests.rs"]
mod tests;

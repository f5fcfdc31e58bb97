//! SBPL, Seatbelt's profile language (a small Scheme): a writer for the few forms warden emits
//! and a strict reader that checks a generated profile before it is used.
//!
//! warden's rule for paths: **no path ever appears in the profile text**. Every path and every
//! regex built from one is a parameter, `(param "P3")`, whose value reaches `sandbox-exec` as a
//! separate argument (`-D P3=VALUE`) and is never parsed as SBPL. The only string literals in a
//! profile are warden's own constants (Mach service and sysctl names, `localhost:PORT`, the
//! session tag): [`Expr::string`] accepts printable ASCII without `/` and escapes `\` and `"`,
//! and refuses everything else, so even a mistake in warden cannot splice arbitrary text in.
//! [`check`] re-reads the finished text and enforces both rules.

use std::collections::BTreeSet;
use std::fmt::Write as _;

/// One SBPL expression as warden writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    List(Vec<Expr>),
    /// A symbol: an operation, filter or keyword name (warden's constants only).
    Sym(&'static str),
    /// A string literal holding a validated constant (see [`Expr::string`]).
    Str(String),
    /// `(param "NAME")`.
    Param(String),
    /// A comment line before the expression (fixed text only).
    Commented(&'static str, Box<Expr>),
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SbplError {
    #[error("SBPL string literal {0:?} has a character warden never writes into a profile")]
    Literal(String),
}

/// Characters warden's literals may hold: its constants are Mach service names, sysctl names,
/// `localhost:PORT` and the session tag. A `/` would mean a path, which must be a parameter.
fn literal_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '*' | '@' | '+')
}

impl Expr {
    pub fn list(items: impl IntoIterator<Item = Expr>) -> Expr {
        Expr::List(items.into_iter().collect())
    }

    /// A string literal; refuses anything but warden's constant vocabulary.
    pub fn string(s: &str) -> Result<Expr, SbplError> {
        if s.is_empty() || !s.chars().all(literal_char) {
            return Err(SbplError::Literal(s.to_string()));
        }
        Ok(Expr::Str(s.to_string()))
    }

    pub fn comment(text: &'static str, e: Expr) -> Expr {
        Expr::Commented(text, Box::new(e))
    }

    /// The expression as SBPL text, wrapped at about 100 columns.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_into(&mut out, 0);
        out
    }

    fn flat(&self) -> String {
        match self {
            Expr::List(items) => {
                let inner: Vec<String> = items.iter().map(Expr::flat).collect();
                format!("({})", inner.join(" "))
            }
            Expr::Sym(s) => (*s).to_string(),
            Expr::Str(s) => quote(s),
            Expr::Param(name) => format!("(param {})", quote(name)),
            Expr::Commented(_, e) => e.flat(),
        }
    }

    fn render_into(&self, out: &mut String, indent: usize) {
        match self {
            Expr::Commented(text, e) => {
                for line in text.lines() {
                    let _ = writeln!(out, ";; {line}");
                    out.push_str(&" ".repeat(indent));
                }
                e.render_into(out, indent);
            }
            Expr::List(items) => {
                let flat = self.flat();
                if indent + flat.len() <= 100 || items.len() < 2 {
                    out.push_str(&flat);
                    return;
                }
                // The leading symbols (`allow file-write*`) on the first line, then one
                // child per line.
                let lead = items
                    .iter()
                    .take_while(|i| matches!(i, Expr::Sym(_)))
                    .count()
                    .max(1);
                let head: Vec<String> = items[..lead].iter().map(Expr::flat).collect();
                out.push('(');
                out.push_str(&head.join(" "));
                for item in &items[lead..] {
                    out.push('\n');
                    out.push_str(&" ".repeat(indent + 2));
                    item.render_into(out, indent + 2);
                }
                out.push(')');
            }
            other => out.push_str(&other.flat()),
        }
    }
}

/// A string literal: `"` + the text with `\` and `"` escaped + `"`. Callers pass validated
/// constants only ([`Expr::string`], parameter names).
fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            q.push('\\');
        }
        q.push(c);
    }
    q.push('"');
    q
}

/// A profile: top-level forms, separated by blank lines.
pub fn render_profile(forms: &[Expr]) -> String {
    let mut out = String::new();
    for f in forms {
        out.push_str(&f.render());
        out.push('\n');
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Reading

/// A parsed expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    List(Vec<Node>),
    Atom(String),
    Str(String),
}

impl Node {
    fn head(&self) -> Option<&str> {
        match self {
            Node::List(items) => match items.first() {
                Some(Node::Atom(a)) => Some(a),
                _ => None,
            },
            _ => None,
        }
    }
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    #[error("byte {byte:#04x} at offset {at}: a profile is printable ASCII")]
    Byte { byte: u8, at: usize },
    #[error("unbalanced parentheses at offset {0}")]
    Unbalanced(usize),
    #[error("unterminated string literal at offset {0}")]
    Unterminated(usize),
    #[error("escape `\\{escaped}` at offset {at}: only \\\\ and \\\" are written")]
    Escape { escaped: char, at: usize },
    #[error("`#` syntax at offset {0} (raw strings, booleans) is never written")]
    Sharp(usize),
    #[error("top-level atom or string at offset {0}")]
    TopLevel(usize),
    #[error("the profile must start with (version 1)")]
    Version,
    #[error("top-level form {0:?}: only (version), (allow …) and (deny …)")]
    Form(String),
    #[error("({filter} …) must take exactly one (param \"P<n>\"), found {found}")]
    PathNotParam { filter: String, found: String },
    #[error("(param {0:?}): names are P<n> and must be passed with -D")]
    Param(String),
    #[error(
        "string literal {0:?} outside (param …) looks like a path or has unexpected characters"
    )]
    Literal(String),
}

/// Tokenises and parses `text` strictly: printable ASCII and newlines only, `;` comments,
/// strings with `\\` and `\"` escapes only, no `#` syntax.
pub fn parse(text: &str) -> Result<Vec<Node>, CheckError> {
    let bytes = text.as_bytes();
    let mut stack: Vec<(usize, Vec<Node>)> = Vec::new();
    let mut top: Vec<Node> = Vec::new();
    let mut i = 0;
    let push =
        |stack: &mut Vec<(usize, Vec<Node>)>, top: &mut Vec<Node>, n: Node, at: usize| match stack
            .last_mut()
        {
            Some((_, items)) => {
                items.push(n);
                Ok(())
            }
            None if matches!(n, Node::List(_)) => {
                top.push(n);
                Ok(())
            }
            None => Err(CheckError::TopLevel(at)),
        };
    while i < bytes.len() {
        let b = bytes[i];
        if !(b == b'\n' || (0x20..0x7f).contains(&b)) {
            return Err(CheckError::Byte { byte: b, at: i });
        }
        match b {
            b' ' | b'\n' => i += 1,
            b';' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    let c = bytes[i];
                    if !(0x20..0x7f).contains(&c) {
                        return Err(CheckError::Byte { byte: c, at: i });
                    }
                    i += 1;
                }
            }
            b'(' => {
                stack.push((i, Vec::new()));
                i += 1;
            }
            b')' => {
                let Some((_, items)) = stack.pop() else {
                    return Err(CheckError::Unbalanced(i));
                };
                push(&mut stack, &mut top, Node::List(items), i)?;
                i += 1;
            }
            b'#' => return Err(CheckError::Sharp(i)),
            b'"' => {
                let start = i;
                i += 1;
                let mut s = String::new();
                loop {
                    let Some(&c) = bytes.get(i) else {
                        return Err(CheckError::Unterminated(start));
                    };
                    match c {
                        b'"' => {
                            i += 1;
                            break;
                        }
                        b'\\' => {
                            let Some(&e) = bytes.get(i + 1) else {
                                return Err(CheckError::Unterminated(start));
                            };
                            if e != b'\\' && e != b'"' {
                                return Err(CheckError::Escape {
                                    escaped: char::from(e),
                                    at: i,
                                });
                            }
                            s.push(char::from(e));
                            i += 2;
                        }
                        b'\n' => return Err(CheckError::Unterminated(start)),
                        c if (0x20..0x7f).contains(&c) => {
                            s.push(char::from(c));
                            i += 1;
                        }
                        c => return Err(CheckError::Byte { byte: c, at: i }),
                    }
                }
                push(&mut stack, &mut top, Node::Str(s), start)?;
            }
            _ => {
                let start = i;
                while i < bytes.len()
                    && !matches!(bytes[i], b' ' | b'\n' | b'(' | b')' | b'"' | b';')
                {
                    if !(0x20..0x7f).contains(&bytes[i]) {
                        return Err(CheckError::Byte {
                            byte: bytes[i],
                            at: i,
                        });
                    }
                    i += 1;
                }
                let atom = String::from_utf8_lossy(&bytes[start..i]).into_owned();
                push(&mut stack, &mut top, Node::Atom(atom), start)?;
            }
        }
    }
    if let Some((at, _)) = stack.last() {
        return Err(CheckError::Unbalanced(*at));
    }
    Ok(top)
}

/// Filters whose argument is a path or a regex over paths.
const PATH_FILTERS: &[&str] = &["literal", "subpath", "prefix", "regex", "path"];

/// Parses `text` and enforces warden's invariants: `(version 1)` first; only `allow`/`deny`
/// forms after it; every path filter's argument is exactly `(param "P<n>")` with a name in
/// `params`; no other string literal contains `/` or anything outside warden's constant
/// vocabulary. Returns the parsed forms.
pub fn check(text: &str, params: &BTreeSet<String>) -> Result<Vec<Node>, CheckError> {
    let forms = parse(text)?;
    let mut iter = forms.iter();
    match iter.next() {
        Some(Node::List(v))
            if v.len() == 2
                && v[0] == Node::Atom("version".into())
                && v[1] == Node::Atom("1".into()) => {}
        _ => return Err(CheckError::Version),
    }
    for f in iter {
        match f.head() {
            Some("allow" | "deny") => check_node(f, params)?,
            other => return Err(CheckError::Form(other.unwrap_or("").to_string())),
        }
    }
    Ok(forms)
}

fn param_name(n: &Node, params: &BTreeSet<String>) -> Result<(), CheckError> {
    match n {
        Node::List(v) if v.len() == 2 && v[0] == Node::Atom("param".into()) => match &v[1] {
            Node::Str(name)
                if name.len() > 1
                    && name.starts_with('P')
                    && name[1..].bytes().all(|b| b.is_ascii_digit())
                    && params.contains(name) =>
            {
                Ok(())
            }
            Node::Str(name) => Err(CheckError::Param(name.clone())),
            other => Err(CheckError::Param(format!("{other:?}"))),
        },
        _ => Err(CheckError::Param(format!("{n:?}"))),
    }
}

fn check_node(n: &Node, params: &BTreeSet<String>) -> Result<(), CheckError> {
    match n {
        Node::List(items) => {
            if let Some(Node::Atom(head)) = items.first() {
                if PATH_FILTERS.contains(&head.as_str()) {
                    let ok = items.len() == 2 && param_name(&items[1], params).is_ok();
                    if !ok {
                        return Err(CheckError::PathNotParam {
                            filter: head.clone(),
                            found: format!("{:?}", &items[1..]),
                        });
                    }
                    return Ok(());
                }
                if head == "param" {
                    return param_name(n, params);
                }
            }
            items.iter().try_for_each(|i| check_node(i, params))
        }
        Node::Str(s) => {
            if s.is_empty() || !s.chars().all(literal_char) {
                return Err(CheckError::Literal(s.clone()));
            }
            Ok(())
        }
        Node::Atom(_) => Ok(()),
    }
}

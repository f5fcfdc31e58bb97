//! Settings globs → Seatbelt regexes.
//!
//! A glob entry covers what it matches and everything below it (`PathPattern::covers`). To
//! keep the profile's meaning identical to the policy engine's, the regex is not derived from
//! the glob text by a second parser: it is translated from the very regex `globset` matches
//! with (`Glob::regex`, parsed with `regex-syntax`), then the ancestor rule is appended:
//! `^GLOB(/.*)?$`.
//!
//! The output uses the part of regex syntax that Seatbelt's matcher (POSIX-style extended
//! regexes) and Rust's `regex` crate read alike, so the tests can check the translation
//! against globset with the `regex` crate: `^ $ . * + ? ( | )`, bracket classes with
//! members ordered so that `]`, `^` and `-` are literal, and `\` before a metacharacter.
//! Bytes outside ASCII stand for themselves (globset matches bytes too). Refused, so that a
//! policy never means something else on macOS: classes with non-ASCII or control members, and
//! negated classes containing `\` or `[`.

use regex_syntax::hir::{Class, Hir, HirKind, Look};

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum GlobError {
    #[error("glob {glob:?}: {what} cannot be expressed in a Seatbelt profile")]
    Unsupported { glob: String, what: &'static str },
}

/// Bytes that are special in a regex outside a class.
const META: &[u8] = b"\\.+*?()|[]{}^$";

/// The Seatbelt regex (bytes) for a settings glob: what it matches and everything below.
pub fn covering_regex(glob: &globset::Glob) -> Result<Vec<u8>, GlobError> {
    let err = |what| GlobError::Unsupported {
        glob: glob.glob().to_string(),
        what,
    };
    let hir = regex_syntax::ParserBuilder::new()
        .utf8(false)
        .build()
        .parse(glob.regex())
        .map_err(|_| err("its regex"))?;
    let parts: &[Hir] = match hir.kind() {
        HirKind::Concat(parts) => parts,
        _ => std::slice::from_ref(&hir),
    };
    let mut parts = parts;
    if let Some((first, rest)) = parts.split_first() {
        if matches!(first.kind(), HirKind::Look(Look::Start)) {
            parts = rest;
        }
    }
    if let Some((last, rest)) = parts.split_last() {
        if matches!(last.kind(), HirKind::Look(Look::End)) {
            parts = rest;
        }
    }
    let mut out = vec![b'^'];
    for p in parts {
        render(p, &mut out).map_err(err)?;
    }
    out.extend_from_slice(b"(/.*)?$");
    Ok(out)
}

/// A literal path as an anchored regex matching exactly it (used for fixed names).
pub fn escape_literal(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        if META.contains(&b) {
            out.push(b'\\');
        }
        out.push(b);
    }
}

fn render(h: &Hir, out: &mut Vec<u8>) -> Result<(), &'static str> {
    match h.kind() {
        HirKind::Empty => Ok(()),
        HirKind::Literal(lit) => {
            escape_literal(&lit.0, out);
            Ok(())
        }
        HirKind::Class(class) => render_class(class, out),
        HirKind::Look(Look::Start) => {
            out.push(b'^');
            Ok(())
        }
        HirKind::Look(Look::End) => {
            out.push(b'$');
            Ok(())
        }
        HirKind::Look(_) => Err("a look-around assertion"),
        HirKind::Repetition(rep) => {
            let op: &[u8] = match (rep.min, rep.max) {
                (0, None) => b"*",
                (1, None) => b"+",
                (0, Some(1)) => b"?",
                _ => return Err("a counted repetition"),
            };
            let mut sub = Vec::new();
            render(&rep.sub, &mut sub)?;
            if is_atom(&rep.sub, &sub) {
                out.extend_from_slice(&sub);
            } else {
                out.push(b'(');
                out.extend_from_slice(&sub);
                out.push(b')');
            }
            out.extend_from_slice(op);
            Ok(())
        }
        HirKind::Capture(cap) => {
            out.push(b'(');
            render(&cap.sub, out)?;
            out.push(b')');
            Ok(())
        }
        HirKind::Concat(parts) => parts.iter().try_for_each(|p| render(p, out)),
        HirKind::Alternation(branches) => {
            let mut rendered = Vec::new();
            let mut empty = false;
            for b in branches {
                let mut r = Vec::new();
                render(b, &mut r)?;
                if r.is_empty() {
                    empty = true;
                } else {
                    rendered.push(r);
                }
            }
            if rendered.is_empty() {
                return Ok(());
            }
            out.push(b'(');
            out.extend_from_slice(&rendered.join(&b'|'));
            out.push(b')');
            if empty {
                out.push(b'?');
            }
            Ok(())
        }
    }
}

/// Whether `rendered` (of `h`) can take a repetition operator without parentheses.
fn is_atom(h: &Hir, rendered: &[u8]) -> bool {
    match h.kind() {
        HirKind::Class(_) | HirKind::Capture(_) => true,
        HirKind::Literal(lit) => lit.0.len() == 1,
        HirKind::Alternation(_) => rendered.last() == Some(&b')'),
        _ => false,
    }
}

fn render_class(class: &Class, out: &mut Vec<u8>) -> Result<(), &'static str> {
    let mut set = [false; 256];
    match class {
        Class::Bytes(c) => {
            for r in c.ranges() {
                for b in r.start()..=r.end() {
                    set[usize::from(b)] = true;
                }
            }
        }
        Class::Unicode(c) => {
            for r in c.ranges() {
                if u32::from(r.end()) > 0x7f {
                    return Err("a class with non-ASCII members");
                }
                for b in u32::from(r.start())..=u32::from(r.end()) {
                    set[b as usize] = true;
                }
            }
        }
    }
    let count = set.iter().filter(|b| **b).count();
    if count == 255 && !set[usize::from(b'\n')] {
        out.push(b'.');
        return Ok(());
    }
    let high_all = set[0x80..].iter().all(|b| *b);
    let high_none = set[0x80..].iter().all(|b| !*b);
    let (negated, members): (bool, Vec<u8>) = if high_all {
        (
            true,
            (0u8..0x80).filter(|b| !set[usize::from(*b)]).collect(),
        )
    } else if high_none {
        (
            false,
            (0u8..0x80).filter(|b| set[usize::from(*b)]).collect(),
        )
    } else {
        return Err("a class with non-ASCII members");
    };
    if members.iter().any(|b| *b < 0x20 || *b == 0x7f) {
        return Err("a class with control characters");
    }
    if members.is_empty() {
        return Err(if negated {
            "a class matching every byte"
        } else {
            "an empty class"
        });
    }
    let has = |c: u8| members.contains(&c);
    let extras: Vec<&[u8]> = [(b'\\', &b"\\\\"[..]), (b'[', &b"\\["[..])]
        .iter()
        .filter(|(c, _)| has(*c))
        .map(|(_, e)| *e)
        .collect();
    if negated && !extras.is_empty() {
        return Err("a negated class containing `\\` or `[`");
    }
    let mut body: Vec<u8> = Vec::new();
    if has(b']') {
        body.push(b']');
    }
    let plain: Vec<u8> = members
        .iter()
        .copied()
        .filter(|c| !matches!(c, b']' | b'^' | b'-' | b'\\' | b'['))
        .collect();
    push_runs(&plain, &mut body);
    let mut dash = has(b'-');
    if has(b'^') {
        if body.is_empty() && !negated {
            if dash {
                body.push(b'-');
                dash = false;
            } else if extras.is_empty() {
                out.extend_from_slice(b"\\^");
                return Ok(());
            } else {
                // `^` alone next to `\` or `[`: an alternation of escaped literals.
                out.push(b'(');
                out.extend_from_slice(b"\\^");
                for e in &extras {
                    out.push(b'|');
                    out.extend_from_slice(e);
                }
                out.push(b')');
                return Ok(());
            }
        }
        body.push(b'^');
    }
    if dash {
        body.push(b'-');
    }
    let mut class = Vec::new();
    if !body.is_empty() {
        class.push(b'[');
        if negated {
            class.push(b'^');
        }
        class.extend_from_slice(&body);
        class.push(b']');
    }
    if extras.is_empty() {
        out.extend_from_slice(&class);
        return Ok(());
    }
    out.push(b'(');
    let mut first = true;
    if !class.is_empty() {
        out.extend_from_slice(&class);
        first = false;
    }
    for e in extras {
        if !first {
            out.push(b'|');
        }
        out.extend_from_slice(e);
        first = false;
    }
    out.push(b')');
    Ok(())
}

/// Sorted printable members; runs of three or more within `0-9`, `A-Z` or `a-z` become ranges.
fn push_runs(members: &[u8], body: &mut Vec<u8>) {
    let same_kind = |a: u8, b: u8| {
        (a.is_ascii_digit() && b.is_ascii_digit())
            || (a.is_ascii_uppercase() && b.is_ascii_uppercase())
            || (a.is_ascii_lowercase() && b.is_ascii_lowercase())
    };
    let mut i = 0;
    while i < members.len() {
        let start = members[i];
        let mut j = i;
        while j + 1 < members.len()
            && members[j + 1] == members[j] + 1
            && same_kind(start, members[j + 1])
        {
            j += 1;
        }
        if j - i >= 2 {
            body.extend_from_slice(&[start, b'-', members[j]]);
        } else {
            body.extend_from_slice(&members[i..=j]);
        }
        i = j + 1;
    }
}

#[cfg(test)]
#[path = "glob_tests.rs"]
pub(crate) mod tests;

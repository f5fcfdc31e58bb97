use super::*;
use crate::policy::fsview::MemFs;
use crate::policy::path::PathPattern;
use proptest::prelude::*;
use std::path::Path;

/// The Seatbelt regex as a Rust `regex` (bytes mode, `.` matching newlines as Seatbelt's
/// ancestor suffix intends): raw high and control bytes become `\xNN`.
pub(crate) fn rust_regex(re: &[u8]) -> regex::bytes::Regex {
    let mut pat = String::from("(?s-u)");
    for &b in re {
        if !(0x20..0x7f).contains(&b) {
            pat.push_str(&format!("\\x{b:02x}"));
        } else {
            pat.push(char::from(b));
        }
    }
    regex::bytes::Regex::new(&pat).expect("the translation is valid regex syntax")
}

fn glob_of(text: &str) -> globset::Glob {
    match PathPattern::parse(text, Path::new("/w"), Path::new("/h"), &MemFs::new()) {
        Ok(PathPattern::Glob(m)) => m.glob().clone(),
        other => panic!("{text} is not a glob: {other:?}"),
    }
}

fn regex_text(text: &str) -> String {
    String::from_utf8(covering_regex(&glob_of(text)).expect("translates")).expect("ascii")
}

#[test]
fn common_globs_translate_to_readable_regexes() {
    assert_eq!(regex_text("/h/*.pem"), r"^/h/[^/]*\.pem(/.*)?$");
    assert_eq!(regex_text("/h/**/id_*"), r"^/h(/|/.*/)id_[^/]*(/.*)?$");
    assert_eq!(regex_text("/w/**"), r"^/w/.*(/.*)?$");
    assert_eq!(regex_text("/w/**/x/**"), r"^/w(/|/.*/)x/.*(/.*)?$");
    assert_eq!(regex_text("/w/.env?"), r"^/w/\.env[^/](/.*)?$");
    assert_eq!(regex_text("/w/{a,b}*.txt"), r"^/w/[ab][^/]*\.txt(/.*)?$");
    assert_eq!(regex_text("/w/{ab,cd}*"), r"^/w/(ab|cd)[^/]*(/.*)?$");
    assert_eq!(regex_text("/w/[a-c]x"), r"^/w/[a-c]x(/.*)?$");
    assert_eq!(regex_text("/w/[!a-z]"), r"^/w/[^a-z](/.*)?$");
    assert_eq!(regex_text("~/secret*"), r"^/h/secret[^/]*(/.*)?$");
    assert_eq!(regex_text("rel/*.key"), r"^/w/rel/[^/]*\.key(/.*)?$");
}

#[test]
fn metacharacters_in_globs_are_escaped() {
    // `(`, `)`, `+`, `$`, `|`, `^` and `.` are literal in globs.
    let re = regex_text("/w/a(b)+c$d|e^f.*");
    assert_eq!(re, r"^/w/a\(b\)\+c\$d\|e\^f\.[^/]*(/.*)?$");
    let r = rust_regex(re.as_bytes());
    assert!(r.is_match(b"/w/a(b)+c$d|e^f.x"));
    assert!(!r.is_match(b"/w/abbc"));
}

#[test]
fn awkward_class_members_stay_literal() {
    for (glob, yes, no) in [
        ("/w/[]]", "/w/]", "/w/a"),
        ("/w/[-a]", "/w/-", "/w/b"),
        ("/w/[a-]", "/w/-", "/w/b"),
        ("/w/[\\^a]", "/w/^", "/w/b"),
        ("/w/[\\^]", "/w/^", "/w/b"),
        ("/w/[\\^-]", "/w/-", "/w/b"),
        ("/w/[\\\\]", "/w/\\", "/w/b"),
        ("/w/[\\[a]", "/w/[", "/w/b"),
        ("/w/[!]]", "/w/a", "/w/]"),
    ] {
        let re = covering_regex(&glob_of(glob)).expect(glob);
        let r = rust_regex(&re);
        assert!(
            r.is_match(yes.as_bytes()),
            "{glob} → {} on {yes}",
            String::from_utf8_lossy(&re)
        );
        assert!(
            !r.is_match(no.as_bytes()),
            "{glob} → {} on {no}",
            String::from_utf8_lossy(&re)
        );
    }
}

#[test]
fn classes_seatbelt_cannot_express_are_refused() {
    for glob in ["/w/[é]", "/w/[!\\\\]", "/w/[!\\[]"] {
        assert!(
            matches!(
                covering_regex(&glob_of(glob)),
                Err(GlobError::Unsupported { .. })
            ),
            "{glob}"
        );
    }
}

#[test]
fn non_ascii_literals_are_raw_bytes() {
    let re = covering_regex(&glob_of("/w/café/*")).expect("translates");
    assert!(re.windows(2).any(|w| w == "é".as_bytes()));
    assert!(rust_regex(&re).is_match("/w/café/x".as_bytes()));
}

const GLOB_CHARS: &[char] = &[
    'a', 'b', '/', '.', '-', '*', '*', '?', '[', ']', '!', '^', '{', '}', ',', '\\', '(', '+', '$',
    '|', 'é', '~', '&',
];
const PATH_CHARS: &[char] = &[
    'a', 'b', '/', '/', '.', '-', '^', ']', '[', '\\', '{', '}', ',', '(', '+', '$', '|', 'é', '!',
    '&', '*', '?',
];

fn string_of(chars: &'static [char], max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(proptest::sample::select(chars), 0..max)
        .prop_map(|v| v.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// The translated regex covers exactly what the policy engine's glob covers.
    #[test]
    fn translation_agrees_with_the_policy_engine(
        glob in string_of(GLOB_CHARS, 12),
        paths in proptest::collection::vec(string_of(PATH_CHARS, 12), 1..12),
    ) {
        let text = format!("/w/{glob}");
        let Ok(pat @ PathPattern::Glob(_)) =
            PathPattern::parse(&text, Path::new("/w"), Path::new("/h"), &MemFs::new())
        else {
            return Ok(());
        };
        let PathPattern::Glob(m) = &pat else { unreachable!() };
        let Ok(re) = covering_regex(m.glob()) else { return Ok(()) };
        let r = rust_regex(&re);
        // Derived paths too: the glob's own text, and the glob with its wildcards filled in
        // from the random paths (which matches far more often than random paths do), each
        // also with something below it.
        let mut all: Vec<String> = paths.iter().map(|p| format!("/w/{p}")).collect();
        all.push(text.clone());
        let mut fill = paths.concat().chars().cycle().take(64).collect::<Vec<char>>().into_iter();
        for n in 0..3 {
            let mut filled = String::new();
            for c in text.chars() {
                match c {
                    '*' => filled.extend(fill.by_ref().take(n)),
                    '?' => filled.extend(fill.next()),
                    c => filled.push(c),
                }
            }
            all.push(filled);
        }
        for p in all.clone() {
            all.push(format!("{p}/x"));
        }
        for p in all {
            prop_assert_eq!(
                pat.covers(p.as_bytes()),
                r.is_match(p.as_bytes()),
                "glob {:?} regex {:?} path {:?}", text, String::from_utf8_lossy(&re), p
            );
        }
    }
}

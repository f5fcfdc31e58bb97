use super::*;

fn now() -> KeyFilter {
    KeyFilter::with_grace(Duration::ZERO)
}

#[test]
fn a_single_key_is_a_key() {
    let mut f = now();
    assert_eq!(f.key(b"a"), Some(b'a'));
    assert_eq!(f.key(b"o"), Some(b'o'));
    assert_eq!(f.key(b"\r"), Some(b'\r'));
}

#[test]
fn terminal_replies_are_never_keys() {
    for reply in [
        &b"\x1bP>|tmux 3.3a\x1b\\"[..],
        b"\x1b[?2004;2$y",
        b"\x1b[>0;95;0c",
        b"\x1b]11;rgb:0000/0000/0000\x07",
        b"\x1b]11;rgb:0000/0000/0000\x1b\\",
        b"\x9b?1;2c",
        b"PuTTY",
        b"\x1bOA",
    ] {
        let mut f = now();
        assert_eq!(f.key(reply), None, "{reply:?}");
        // And the filter is back on the ground afterwards.
        assert_eq!(f.key(b"d"), Some(b'd'), "{reply:?}");
    }
}

#[test]
fn a_reply_split_across_reads_stays_inside_its_sequence() {
    let mut f = now();
    assert_eq!(f.key(b"\x1bP>|tmux 3."), None);
    assert_eq!(f.key(b"3a"), None);
    assert_eq!(f.key(b"a"), None, "still inside the DCS string");
    assert_eq!(f.key(b"\x1b\\"), None);
    assert_eq!(f.key(b"a"), Some(b'a'));
    let mut f = now();
    assert_eq!(f.key(b"\x1b[?2004;"), None);
    assert_eq!(f.key(b"2"), None);
    assert_eq!(f.key(b"$y"), None);
    assert_eq!(f.key(b"y"), Some(b'y'));
}

#[test]
fn nothing_counts_during_the_grace() {
    let mut f = KeyFilter::with_grace(Duration::from_secs(60));
    assert_eq!(f.key(b"a"), None);
}

/// Red-team round 23: a command set the terminal's default text and background colours to
/// the same value before the question; the reset before a question restores them, the
/// palette and the modes that could hide or garble it.
#[test]
fn the_reset_before_a_question_restores_colours_and_modes() {
    for seq in [
        "\x1b]110\x1b\\",
        "\x1b]111\x1b\\",
        "\x1b]104\x1b\\",
        "\x1b[0m",
        "\x1b[4l",
        "\x1b[?7h",
        "\x1b[?5l",
        "\x1b[?2026l",
        "\x1b[?25h",
    ] {
        assert!(RESET.contains(seq), "{seq:?} missing from {RESET:?}");
    }
    // First of all, whatever sequence was in progress is ended.
    assert!(RESET.starts_with("\x18\x1b\\"));
}

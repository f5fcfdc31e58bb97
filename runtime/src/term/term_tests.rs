use super::*;
use nix::pty::openpty;
use nix::sys::termios::{cfmakeraw, tcgetattr, tcsetattr, LocalFlags, SetArg};

/// Two pseudo-terminals: the "caller's" (the test types on `user`, the relay sits on
/// `caller`) and the "command's" (the relay holds `master`, the command is `command`).
struct Rig {
    user: OwnedFd,
    caller: OwnedFd,
    command: OwnedFd,
    relay: Option<Relay>,
}

fn rig() -> Rig {
    let a = openpty(None, None).unwrap();
    let b = openpty(None, None).unwrap();
    // The command's side raw, so what it reads is exactly what was typed.
    let mut t = tcgetattr(&b.slave).unwrap();
    cfmakeraw(&mut t);
    tcsetattr(&b.slave, SetArg::TCSANOW, &t).unwrap();
    let relay = Relay::start_on(a.slave.as_raw_fd(), a.slave.as_raw_fd(), b.master).unwrap();
    Rig {
        user: a.master,
        caller: a.slave,
        command: b.slave,
        relay: Some(relay),
    }
}

fn write(fd: &OwnedFd, bytes: &[u8]) {
    assert_eq!(nix::unistd::write(fd, bytes).unwrap(), bytes.len());
}

/// Reads from `fd` until `want` appears or `wait` passes; returns everything read.
fn read_until(fd: &OwnedFd, want: &str, wait: Duration) -> String {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let deadline = Instant::now() + wait;
    let mut got = Vec::new();
    while !String::from_utf8_lossy(&got).contains(want) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
        let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
        if poll(&mut fds, PollTimeout::from(ms)).unwrap() == 0 {
            continue;
        }
        let mut buf = [0u8; 4096];
        match nix::unistd::read(fd.as_fd(), &mut buf) {
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn keys_reach_the_command_and_its_output_reaches_the_screen() {
    let r = rig();
    write(&r.user, b"ls -l");
    let got = read_until(&r.command, "ls -l", Duration::from_secs(5));
    assert_eq!(got, "ls -l");
    write(&r.command, b"total 0\r\n");
    let got = read_until(&r.user, "total 0", Duration::from_secs(5));
    assert!(got.contains("total 0"), "{got:?}");
}

#[test]
fn the_caller_terminal_is_raw_while_relaying_and_restored_after() {
    let mut r = rig();
    let during = tcgetattr(&r.caller).unwrap();
    assert!(!during.local_flags.contains(LocalFlags::ICANON));
    assert!(!during.local_flags.contains(LocalFlags::ECHO));
    r.relay.take().unwrap().finish(Duration::from_millis(50));
    let after = tcgetattr(&r.caller).unwrap();
    assert!(after.local_flags.contains(LocalFlags::ICANON));
    assert!(after.local_flags.contains(LocalFlags::ECHO));
}

#[test]
fn a_question_holds_the_command_output_and_takes_the_keys() {
    let r = rig();
    let console = r.relay.as_ref().unwrap().console();
    let asking = std::thread::spawn(move || {
        console.ask(
            "\r\nallow? [o/d] ",
            Duration::from_secs(10),
            |k| (k == b'o' || k == b'd').then_some(k),
            |a| format!("answered {:?}\r\n", a.map(char::from)),
        )
    });
    let shown = read_until(&r.user, "allow? [o/d] ", Duration::from_secs(5));
    assert!(shown.contains("allow? [o/d] "), "{shown:?}");
    // The terminal is reset first: an unterminated title string or hidden text the command
    // left behind cannot swallow the question.
    assert!(
        shown.contains(&format!("{}\r\nallow? [o/d] ", super::keys::RESET)),
        "{shown:?}"
    );
    // The command writes while the question is on screen: nothing of it shows yet, so it
    // cannot draw over the question or fake one.
    write(&r.command, b"FAKE: allow? answered 'o'");
    let leaked = read_until(&r.user, "FAKE", Duration::from_millis(400));
    assert!(!leaked.contains("FAKE"), "{leaked:?}");
    // A terminal's reply to a query (it contains an `o` and arrives as one chunk), a key
    // that means nothing, then the answer (after a person's reaction time): none reaches the
    // command, and only the last answers.
    write(&r.user, b"\x1b[?2004;1$y");
    std::thread::sleep(super::keys::GRACE + Duration::from_millis(50));
    write(&r.user, b"\x1bP>|tmux 3.3o\x1b\\");
    std::thread::sleep(Duration::from_millis(50));
    write(&r.user, b"x");
    std::thread::sleep(Duration::from_millis(50));
    write(&r.user, b"o");
    let answer = asking.join().unwrap();
    assert_eq!(answer, Some(b'o'));
    let after = read_until(&r.user, "FAKE", Duration::from_secs(5));
    let answered = after.find("answered Some('o')").expect(&after);
    let fake = after.find("FAKE").expect(&after);
    assert!(
        answered < fake,
        "held output comes after the answer: {after:?}"
    );
    // Keys go to the command again.
    write(&r.user, b"after");
    let got = read_until(&r.command, "after", Duration::from_secs(5));
    assert_eq!(got, "after", "the answer's keys must not reach the command");
}

#[test]
fn an_unanswered_question_times_out() {
    let r = rig();
    let console = r.relay.as_ref().unwrap().console();
    let t0 = Instant::now();
    let answer = console.ask(
        "q? ",
        Duration::from_millis(300),
        |k| (k == b'o').then_some(k),
        |_| "timed out\r\n".to_string(),
    );
    assert_eq!(answer, None);
    assert!(t0.elapsed() >= Duration::from_millis(300));
    let shown = read_until(&r.user, "timed out", Duration::from_secs(5));
    assert!(shown.contains("q? timed out"), "{shown:?}");
}

#[test]
fn the_window_size_follows_the_caller() {
    let r = rig();
    set_window_size(r.caller.as_raw_fd(), 50, 132).unwrap();
    r.relay.as_ref().unwrap().resize();
    assert_eq!(window_size(r.command.as_raw_fd()), Some((50, 132)));
}

#[test]
fn finish_shows_the_last_output_once_the_command_side_closes() {
    let mut r = rig();
    write(&r.command, b"last words\r\n");
    let relay = r.relay.take().unwrap();
    let command = std::mem::replace(&mut r.command, openpty(None, None).unwrap().slave);
    drop(command);
    relay.finish(Duration::from_secs(5));
    let got = read_until(&r.user, "last words", Duration::from_secs(2));
    assert!(got.contains("last words"), "{got:?}");
}

/// A query the command wrote just before it ended (`ESC[21t`, a title report) is answered by
/// the terminal after the relay stopped relaying: the reply — text the command chose — must
/// not be left for the caller's shell to read as typed input.
#[test]
fn a_late_reply_to_the_commands_last_query_is_not_left_for_the_callers_shell() {
    let mut r = rig();
    write(&r.command, b"\x1b[6n");
    let _ = read_until(&r.user, "\x1b[6n", Duration::from_secs(2));
    let relay = r.relay.take().unwrap();
    let command = std::mem::replace(&mut r.command, openpty(None, None).unwrap().slave);
    drop(command);
    // The terminal answers 100 ms later, while warden is finishing.
    let user = r.user.try_clone().unwrap();
    let typist = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        write(&user, b"\x1b]lrm -rf ~\x1b\\\n");
    });
    relay.finish(Duration::from_secs(1));
    typist.join().unwrap();
    let mut pending: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int into `pending`.
    let rc = unsafe { libc::ioctl(r.caller.as_raw_fd(), libc::FIONREAD, &mut pending) };
    assert_eq!(rc, 0);
    assert_eq!(
        pending, 0,
        "the reply was left as input for the caller's shell"
    );
}

/// What the output filter lets through of `chunks`, written one after the other.
fn run(chunks: &[&[u8]]) -> Vec<u8> {
    let mut f = ClipboardFilter::default();
    let mut out = Vec::new();
    for c in chunks {
        f.feed(c, &mut out);
    }
    out
}

/// What reaches the terminal of `seq` is `shown`, written whole and a byte at a time.
fn shows(seq: &[u8], shown: &[u8]) {
    assert_eq!(run(&[seq]), shown, "{:?}", String::from_utf8_lossy(seq));
    let bytes: Vec<&[u8]> = seq.chunks(1).collect();
    assert_eq!(run(&bytes), shown, "{:?}", String::from_utf8_lossy(seq));
}

#[test]
fn clipboard_writes_are_dropped_and_everything_else_passes() {
    // OSC 52 with BEL and with ST, whole and split at every byte.
    let bel = b"a\x1b]52;c;Y3VybCBldmlsfHNo\x07b";
    let st = b"a\x1b]52;c;Y3VybA==\x1b\\b";
    for seq in [&bel[..], &st[..]] {
        shows(seq, b"ab");
    }
    // Titles, colours, hyperlinks, CSI sequences, a lone ESC, text with 0x9d and 0x9c inside
    // its characters: unchanged.
    for seq in [
        &b"\x1b]0;title\x07x"[..],
        b"\x1b]2;title\x1b\\x",
        b"\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\",
        b"\x1b]11;?\x07",
        b"\x1b]104\x07",
        b"\x1b[1;31mred\x1b[0m",
        b"\x1b\x1b[Ax",
        b"plain text\r\n",
        "\u{75d}\u{71c} \u{e9}t\u{e9} \u{1f600} \u{a0}".as_bytes(),
    ] {
        shows(seq, seq);
    }
    // Red-team round 15: a leading zero, the C1 introducer raw and in UTF-8, other clipboard
    // and file writers (iTerm2 1337, kitty 5522), unknown numbers: dropped whole.
    for seq in [
        &b"a\x1b]052;c;Y3VybA==\x07b"[..],
        b"a\x1b]0052;c;Y3VybA==\x1b\\b",
        b"a\x9d52;c;Y3VybA==\x9cb",
        b"a\xc2\x9d52;c;Y3VybA==\xc2\x9cb",
        b"a\xc2\x9d52;c;Y3VybA==\x07b",
        b"a\x1b]1337;Copy=:Y3VybA==\x07b",
        b"a\x1b]1337;File=name=eA==:Y3VybA==\x07b",
        b"a\x1b]5522;type=write\x1b\\b",
        b"a\x1b]5;x\x07b",
        b"a\x1b]520;x\x07b",
        b"a\x1b]l;title\x07b",
    ] {
        shows(seq, b"ab");
    }
    // Red-team round 16: more digits than the filter reads, a C2 before an ESC in a title,
    // CAN or a C1 introducer in a title: the OSC 52 behind them is dropped.
    for (seq, shown) in [
        (&b"a\x1b]0000000052;c;Y3VybA==\x07b"[..], &b"ab"[..]),
        (b"a\x1b]00000000052;c;Y3VybA==\x07b", b"ab"),
        (b"\x1b]0;t\xc2\x1b]52;c;Y3VybA==\x07b", b"\x1b]0;t\xc2b"),
        (b"\x1b]0;t\x18\xc2\x9d52;c;Y3VybA==\x07b", b"\x1b]0;t\x18b"),
        (b"\x1b]0;t\x18\x9d52;c;Y3VybA==\x07b", b"\x1b]0;t\x18b"),
        (b"\x1b]0;t\x9d52;c;Y3VybA==\x07b", b"\x1b]0;tb"),
        (b"\x1b]2;t\xc2\x9d52;c;Y3VybA==\x9cb", b"\x1b]2;tb"),
    ] {
        shows(seq, shown);
    }
    // Red-team round 17: C0 controls or DEL between ESC and `]`, or inside the number, are
    // what a VT500-style terminal skips over: the OSC behind them is still OSC 52 (1337, 5522).
    for (seq, shown) in [
        (&b"a\x1b\x08]52;c;Y3VybA==\x07b"[..], &b"a\x08b"[..]),
        (b"a\x1b\x7f]52;c;Y3VybA==\x07b", b"ab"),
        (b"a\x1b]0\x0852;c;Y3VybA==\x07b", b"a\x08b"),
        (b"a\x1b]1\x01337;File=name=eA==:eA==\x07b", b"a\x01b"),
        (b"a\x1b]0\x015522;type=write\x07b", b"a\x01b"),
        (b"a\x1b]\x0552;c;Y3VybA==\x07b", b"a\x05b"),
    ] {
        shows(seq, shown);
    }
    // A C0 control inside a title is dropped, the title kept.
    assert_eq!(run(&[b"\x1b]0;ti\x01tle\x07x"]), b"\x1b]0;title\x07x");
    // A title with UTF-8 text (a 0x9d inside a character) passes whole.
    let title = "\x1b]0;\u{75d} \u{271d}\x07".as_bytes();
    assert_eq!(run(&[title]), title);
    // An unterminated dropped OSC ends at the next ESC, which starts what follows.
    assert_eq!(run(&[b"\x1b]52;c;Y3Vy\x1b[0mok"]), b"\x1b[0mok");
}

/// Red-team round 20: title reports and window operations, DCS strings that are answered or
/// program keys, and APC/PM/SOS strings are dropped in every introducer form; the CSI and DCS
/// sequences programs draw with pass.
#[test]
fn title_reports_window_operations_and_answered_strings_are_dropped() {
    let long = [&b"a\x1b["[..], &[b'1'; 100], b";21tb"].concat();
    for seq in [
        &b"a\x1b[21tb"[..],
        b"a\x1b[20tb",
        b"a\x1b[tb",
        b"a\x1b[8;100;300tb",
        b"a\x1b[3;0;0tb",
        b"a\x1b[2tb",
        b"a\x1b[48tb",
        b"a\x1b[>0;1tb",
        b"a\x1b[1 tb",
        b"a\x9b21tb",
        b"a\xc2\x9b21tb",
        b"a\x1b[2\x081tb",
        // DECRQSS (with a newline in it), XTGETTCAP, DECUDK, XTSETTCAP.
        b"a\x1bP$q\"p\n\x1b\\b",
        b"a\x1bP+q544e\x1b\\b",
        b"a\x1bP0|17/6563686f\x1b\\b",
        b"a\x90+q544e\x9cb",
        b"a\xc2\x90$qm\xc2\x9cb",
        b"a\x1bP+p544e\x1b\\b",
        // APC (kitty graphics), PM, SOS.
        b"a\x1b_Gf=100,t=f;L2V0Yy9wYXNzd2Q=\x1b\\b",
        b"a\x9fGf=100\x9cb",
        b"a\x1b^pm\x1b\\b",
        b"a\x1bXsos\x1b\\b",
        b"a\xc2\x98sos\xc2\x9cb",
        // A head longer than held: dropped to its final byte.
        &long,
    ] {
        let shown: &[u8] = if seq.contains(&0x08) {
            b"a\x08b"
        } else {
            b"ab"
        };
        shows(seq, shown);
    }
    // What programs draw with: colours, cursor movement and reports, the size reports and
    // title stack of `t`, sixel graphics.
    for seq in [
        &b"\x1b[1;31mred\x1b[0m"[..],
        b"\x1b[6n",
        b"\x1b[?25l\x1b[?1049h",
        b"\x1b[14t\x1b[18t\x1b[22;0t\x1b[23;0t",
        b"\x1b[>c",
        b"\x1bPq#0;2;0;0;0#0~~@@vv@@~~$-\x1b\\x",
        b"\x9b1mx",
    ] {
        shows(seq, seq);
    }
    // An ESC inside a CSI aborts it and starts what follows; CAN aborts it.
    shows(b"\x1b[2\x1b[0mx", b"\x1b[0mx");
    shows(b"\x1b[21\x18tx", b"\x18tx");
}

/// Red-team round 17: a query in C1 form (`C2 9B 6 n`, raw `9B 6 n`) gets a reply as `ESC [ 6
/// n` does: it arms the late-reply guard; UTF-8 text whose characters hold those bytes does
/// not.
#[test]
fn c1_queries_arm_the_late_reply_guard_and_utf8_text_does_not() {
    assert!(starts_a_sequence(b"\x1b[6n"));
    assert!(starts_a_sequence(b"x\xc2\x9b6n"));
    assert!(starts_a_sequence(b"\x9b6n"));
    assert!(starts_a_sequence(b"a\x9d11;?\x9c"));
    assert!(!starts_a_sequence("plain \u{6d9b} \u{75d} text".as_bytes()));
}

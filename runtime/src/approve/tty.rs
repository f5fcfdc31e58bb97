//! The terminal approver: when `warden run` is started from a terminal (and neither
//! `--non-interactive` nor `--approvals` is given), warden asks on `/dev/tty` — the
//! controlling terminal it keeps for itself; the command runs in a new session without one, so
//! it cannot answer (TIOCSTI is refused by seccomp, and it has no terminal to inject into).
//!
//! ```text
//! warden: network access to registry.npmjs.org:443?
//!   registry.npmjs.org:443 is not in allowedDomains; approval required
//!   [o] allow once  [a] allow always  [d] deny   (denied in 60 s)
//! ```
//!
//! One key answers (o, a or d, any case; Enter alone denies), whether the terminal is in
//! line or raw mode. Prompts are serialised: one question on the terminal at a time.
//!
//! The command can still *write* to the terminal it shares, and a terminal answers some
//! queries by typing a reply into the input (`ESC[>q` → `ESC P>|tmux 3.3a ESC\`): that must
//! not answer for the human. Input waiting when the question is shown is flushed, and an
//! answer counts only as a read of exactly one key outside any escape sequence, after a
//! 250 ms grace ([`crate::term::keys`]).

use super::{Answer, Approver, PermissionRequest, RequestKind};
use std::fs::File;
use std::future::Future;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct TtyApprover {
    screen: Screen,
}

enum Screen {
    /// `/dev/tty`, shared with a command that runs on the same terminal.
    Tty(Arc<Mutex<File>>),
    /// The relay to a command on its own terminal (whole-process mode): the question holds
    /// the command's output and takes the keys. Set once the sandbox has sent its terminal.
    Relay(Arc<std::sync::OnceLock<crate::term::Console>>),
}

impl TtyApprover {
    /// The approver, when this process has a controlling terminal and its stdin is one.
    pub fn open() -> Option<Arc<TtyApprover>> {
        use std::io::IsTerminal;
        if !std::io::stdin().is_terminal() {
            return None;
        }
        let tty = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .ok()?;
        Some(Arc::new(TtyApprover {
            screen: Screen::Tty(Arc::new(Mutex::new(tty))),
        }))
    }

    /// The approver for a command on its own terminal, asking through the relay's console
    /// (denying while there is none yet).
    pub fn relayed(console: Arc<std::sync::OnceLock<crate::term::Console>>) -> Arc<TtyApprover> {
        Arc::new(TtyApprover {
            screen: Screen::Relay(console),
        })
    }
}

impl TtyApprover {
    /// Asks now, on this thread (before a sandbox exists, when no runtime runs: a command
    /// line the policy leaves to approval). The relay's console, if that is the screen.
    pub fn ask_blocking(&self, request: &PermissionRequest) -> Answer {
        match &self.screen {
            Screen::Tty(tty) => match tty.lock() {
                Ok(mut t) => prompt(&mut t, request),
                Err(_) => Answer::Deny,
            },
            Screen::Relay(console) => match console.get() {
                Some(c) => c
                    .ask(
                        &render(request),
                        Duration::from_secs(request.timeout_seconds),
                        |k| {
                            key_answer(k)
                                .filter(|a| request.options.contains(a) || *a == Answer::Deny)
                        },
                        |a| format!("{}\r\n", shown(a.unwrap_or(Answer::Deny))),
                    )
                    .unwrap_or(Answer::Deny),
                None => Answer::Deny,
            },
        }
    }
}

impl Approver for TtyApprover {
    fn ask(&self, request: PermissionRequest) -> Pin<Box<dyn Future<Output = Answer> + Send + '_>> {
        let screen = match &self.screen {
            Screen::Tty(t) => Screen::Tty(t.clone()),
            Screen::Relay(c) => Screen::Relay(c.clone()),
        };
        Box::pin(async move {
            tokio::task::spawn_blocking(move || match screen {
                Screen::Tty(tty) => match tty.lock() {
                    Ok(mut t) => prompt(&mut t, &request),
                    Err(_) => Answer::Deny,
                },
                Screen::Relay(console) => match console.get() {
                    Some(c) => c
                        .ask(
                            &render(&request),
                            Duration::from_secs(request.timeout_seconds),
                            key_answer,
                            |a| format!("{}\r\n", shown(a.unwrap_or(Answer::Deny))),
                        )
                        .unwrap_or(Answer::Deny),
                    None => Answer::Deny,
                },
            })
            .await
            .unwrap_or(Answer::Deny)
        })
    }
}

fn shown(answer: Answer) -> &'static str {
    match answer {
        Answer::AllowOnce => "allowed once",
        Answer::AllowAlways => "allowed always",
        Answer::RemoveFromDenyList => "removed from the deny list",
        Answer::Deny => "denied",
    }
}

/// The question's text, as shown on the terminal.
pub(crate) fn render(request: &PermissionRequest) -> String {
    let what = match request.kind {
        RequestKind::Network => "network access to",
        RequestKind::FilesystemRead => "reading",
        RequestKind::FilesystemWrite => "writing",
        RequestKind::Command => "running",
    };
    // Everything shown is printable: a hostile target cannot move the cursor or recolour.
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| if c.is_control() { '?' } else { c })
            .collect()
    };
    let mut text = format!(
        "\r\nwarden: {what} {}?\r\n  {}\r\n",
        clean(&request.target),
        clean(&request.reason)
    );
    if let Some(rule) = &request.rule {
        let from = request
            .provenance
            .as_deref()
            .map(|p| format!(" ({})", clean(p)))
            .unwrap_or_default();
        text.push_str(&format!("  rule: {}{from}\r\n", clean(rule)));
    }
    let mut options = String::new();
    for (option, label) in [
        (Answer::AllowOnce, "[o] allow once  "),
        (Answer::AllowAlways, "[a] allow always  "),
        (Answer::RemoveFromDenyList, "[r] remove from deny list  "),
    ] {
        if option == Answer::RemoveFromDenyList && !request.options.contains(&option) {
            continue;
        }
        if request.options.is_empty() || request.options.contains(&option) {
            options.push_str(label);
        }
    }
    text.push_str(&format!(
        "  {options}[d] deny   (denied in {} s): ",
        request.timeout_seconds
    ));
    text
}

/// The answer a key means; `None` for keys that mean nothing.
pub(crate) fn key_answer(byte: u8) -> Option<Answer> {
    match byte.to_ascii_lowercase() {
        b'o' | b'y' => Some(Answer::AllowOnce),
        b'a' => Some(Answer::AllowAlways),
        b'r' => Some(Answer::RemoveFromDenyList),
        b'd' | b'n' | b'\r' | b'\n' => Some(Answer::Deny),
        _ => None,
    }
}

fn prompt(tty: &mut File, request: &PermissionRequest) -> Answer {
    let question = format!("{}{}", crate::term::keys::RESET, render(request));
    if tty.write_all(question.as_bytes()).is_err() {
        return Answer::Deny;
    }
    let _ = tty.flush();
    // Whatever is waiting was typed (or replied by the terminal to the command's queries)
    // before the question: none of it answers.
    let _ = nix::sys::termios::tcflush(tty.as_fd(), nix::sys::termios::FlushArg::TCIFLUSH);
    // One key answers: the terminal leaves line mode (and echo) for the prompt, and gets its
    // own settings back afterwards, whatever the command had set.
    let saved = nix::sys::termios::tcgetattr(tty.as_fd()).ok();
    if let Some(orig) = &saved {
        use nix::sys::termios::{LocalFlags, SetArg, SpecialCharacterIndices};
        let mut raw = orig.clone();
        raw.local_flags
            .remove(LocalFlags::ICANON | LocalFlags::ECHO);
        raw.control_chars[SpecialCharacterIndices::VMIN as usize] = 1;
        raw.control_chars[SpecialCharacterIndices::VTIME as usize] = 0;
        let _ = nix::sys::termios::tcsetattr(tty.as_fd(), SetArg::TCSANOW, &raw);
    }
    let answer = read_answer(tty, request.timeout_seconds);
    // A line-mode terminal delivers `o` with its newline: leave none of it for the next prompt.
    drain(tty);
    if let Some(orig) = &saved {
        let _ = nix::sys::termios::tcsetattr(tty.as_fd(), nix::sys::termios::SetArg::TCSANOW, orig);
    }
    let _ = tty.write_all(format!("{}\r\n", shown(answer)).as_bytes());
    answer
}

fn read_answer(tty: &mut File, timeout_seconds: u64) -> Answer {
    let deadline = Instant::now() + Duration::from_secs(timeout_seconds);
    // A key a person pressed, not a reply the terminal typed for the command's query.
    let mut filter = crate::term::keys::KeyFilter::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break Answer::Deny;
        }
        let millis = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [nix::poll::PollFd::new(
            tty.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(millis)) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(nix::Error::EINTR) => continue,
            Err(_) => break Answer::Deny,
        }
        let mut chunk = [0u8; 256];
        match tty.read(&mut chunk) {
            Ok(n) if n > 0 => {
                if let Some(a) = filter.key(&chunk[..n]).and_then(key_answer) {
                    break a;
                }
            }
            _ => break Answer::Deny,
        }
    }
}

/// Reads whatever input is already waiting, without blocking.
fn drain(tty: &mut File) {
    let mut buf = [0u8; 64];
    loop {
        let mut fds = [nix::poll::PollFd::new(
            tty.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO) {
            Ok(n) if n > 0 => {
                if !matches!(tty.read(&mut buf), Ok(n) if n > 0) {
                    return;
                }
            }
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_names_the_target_reason_and_rule_and_escapes_control_characters() {
        let r = PermissionRequest {
            id: 1,
            kind: RequestKind::Network,
            target: "evil\u{1b}[2J.test:443".into(),
            reason: "not in allowedDomains".into(),
            rule: Some("network.deniedDomains: \"x\"".into()),
            provenance: Some("(organization policy)".into()),
            options: vec![],
            timeout_seconds: 60,
        };
        let text = render(&r);
        assert!(
            text.contains("network access to evil?[2J.test:443?"),
            "{text}"
        );
        assert!(!text.contains('\u{1b}'));
        assert!(text.contains("rule: network.deniedDomains: \"x\" ((organization policy))"));
        assert!(text.contains("(denied in 60 s)"));
    }

    #[test]
    fn keys_map_to_answers() {
        assert_eq!(key_answer(b'o'), Some(Answer::AllowOnce));
        assert_eq!(key_answer(b'A'), Some(Answer::AllowAlways));
        assert_eq!(key_answer(b'd'), Some(Answer::Deny));
        assert_eq!(key_answer(b'\n'), Some(Answer::Deny));
        assert_eq!(key_answer(b'x'), None);
    }
}

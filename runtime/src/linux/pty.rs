//! The command's own terminal (whole-process mode, or `--pty`, when warden runs on a
//! terminal). The sandbox's pid 1 opens a pseudo-terminal in the sandbox's *private* devpts —
//! so `tty`, `ttyname()` and `/dev/pts/0` work inside — makes the slave the command's
//! standard streams and controlling terminal (job control works: Ctrl-Z, `fg`, `kill %1`), and
//! hands the master to the supervisor over the hand-over channel (SCM_RIGHTS), where
//! [`crate::term::Relay`] joins it to the caller's terminal.
//!
//! Nothing in the sandbox keeps a descriptor of the caller's terminal: pid 1's own streams
//! become the slave too. So the command can neither read the keys of an approval prompt nor
//! draw over it, and TIOCSTI (refused by seccomp anyway) would only reach its own pty.

use nix::fcntl::OFlag;
use serde::{Deserialize, Serialize};
use std::os::fd::{AsRawFd, OwnedFd};

/// The terminal pid 1 creates: its initial size (the caller's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalPlan {
    pub rows: u16,
    pub cols: u16,
}

impl TerminalPlan {
    /// The plan for a command on its own terminal, when warden's stdin and stdout are both
    /// terminals; `None` otherwise (pipes, files: the command gets them as they are).
    pub fn for_caller() -> Option<TerminalPlan> {
        use std::io::IsTerminal;
        if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
            return None;
        }
        let (rows, cols) = crate::term::window_size(libc::STDIN_FILENO).unwrap_or((24, 80));
        Some(TerminalPlan { rows, cols })
    }
}

/// In pid 1, after the view is mounted: opens a pty in the sandbox's devpts, sends the master
/// to the supervisor on `chan` and returns the slave.
pub fn open_and_send(plan: &TerminalPlan, chan: &OwnedFd) -> Result<OwnedFd, String> {
    let master = nix::pty::posix_openpt(OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC)
        .map_err(|e| format!("opening /dev/ptmx: {e}"))?;
    nix::pty::grantpt(&master).map_err(|e| format!("grantpt: {e}"))?;
    nix::pty::unlockpt(&master).map_err(|e| format!("unlockpt: {e}"))?;
    let name = nix::pty::ptsname_r(&master).map_err(|e| format!("ptsname: {e}"))?;
    let slave = nix::fcntl::open(
        name.as_str(),
        OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| format!("opening {name}: {e}"))?;
    crate::term::set_window_size(slave.as_raw_fd(), plan.rows, plan.cols)
        .map_err(|e| format!("setting the window size: {e}"))?;
    super::net::send_fd(chan, b't', master.as_raw_fd())
        .map_err(|e| format!("handing the terminal to the supervisor: {e}"))?;
    Ok(slave)
}

/// In pid 1: the slave becomes its standard streams (nothing in the sandbox keeps the
/// caller's terminal open).
pub fn take_streams(slave: &OwnedFd) -> Result<(), String> {
    for target in 0..=2 {
        // SAFETY: dup2 onto a standard stream; `slave` stays open and owned by the caller.
        if unsafe { libc::dup2(slave.as_raw_fd(), target) } < 0 {
            return Err(format!("dup2: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// In the command, after setsid(): its standard input (the slave) becomes its controlling
/// terminal.
pub fn make_controlling() -> Result<(), String> {
    // SAFETY: TIOCSCTTY takes an int argument (0: do not steal from another session).
    if unsafe { libc::ioctl(libc::STDIN_FILENO, libc::TIOCSCTTY, 0) } != 0 {
        return Err(format!("TIOCSCTTY: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// In the supervisor: the master pid 1 sent. EOF (pid 1 failed first) is an error.
pub fn receive_master(chan: &OwnedFd) -> std::io::Result<OwnedFd> {
    super::net::receive_fd(chan)?
        .2
        .ok_or_else(|| std::io::Error::other("the sandbox sent no terminal (pid 1 failed)"))
}

//! The sandbox side: pid 1 of the sandbox's namespaces, cloned by the supervisor (see
//! [`super::spawn`]). Once the supervisor says go, it builds the mount view from the [`Plan`],
//! brings up `lo`, and forks the command. The command sets up a new session, rlimits,
//! Landlock, drops every capability, sets no_new_privs, installs seccomp last and execs.
//!
//! Every process here is a fork of the single-threaded supervisor, so allocating after fork is
//! safe.
//! Signals: every level blocks the forwarded signals and SIGCHLD and wait for them with
//! sigwaitinfo; a forwarded signal goes one level down, SIGCHLD reaps. Exit statuses pass up
//! unchanged (a signal death as 128+N); warden's own failures exit 125.

use super::plan::Plan;
use crate::cli::EXIT_WARDEN;
use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, ForkResult, Pid};
use std::ffi::CString;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Signals passed down to the command.
pub const FORWARDED: &[Signal] = &[
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGWINCH,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    // `fg` after a stop, and the supervisor's own after a SIGTERM (term_grace).
    Signal::SIGCONT,
];

/// The forwarded signals plus SIGCHLD.
pub fn signal_set() -> SigSet {
    let mut set = SigSet::empty();
    for s in FORWARDED {
        set.add(*s);
    }
    set.add(Signal::SIGCHLD);
    set
}

/// Exit code for a wait status: the code itself, or 128+N for a signal.
pub fn exit_code(status: WaitStatus) -> Option<i32> {
    match status {
        WaitStatus::Exited(_, code) => Some(code),
        WaitStatus::Signaled(_, sig, _) => Some(128 + sig as i32),
        _ => None,
    }
}

fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("warden: error: {msg}");
    std::process::exit(EXIT_WARDEN)
}

/// The sandbox's pid 1, created by the supervisor in its new namespaces. Waits for the
/// supervisor's go on `go` (uid/gid maps written, cgroup placement done), drops every
/// descriptor but the standard streams (and `net`, the channel the network listeners go back
/// to the supervisor on), then builds the sandbox. Never returns.
pub fn run(plan: &Plan, go: std::os::fd::OwnedFd, net: Option<std::os::fd::OwnedFd>) -> ! {
    let mut byte = [0u8; 1];
    let mut go = std::fs::File::from(go);
    // EOF instead of the go byte: the supervisor failed before letting us run.
    if !matches!(go.read(&mut byte), Ok(1)) {
        std::process::exit(EXIT_WARDEN);
    }
    drop(go);
    // The network channel, if any, becomes fd 3 and survives the close_range below.
    let net = net.map(|fd| {
        use std::os::fd::{FromRawFd, IntoRawFd};
        const NET_FD: i32 = 3;
        let raw = fd.into_raw_fd();
        if raw != NET_FD {
            // SAFETY: dup3 onto fd 3 (closing whatever fd 3 was: everything >= 3 is about to
            // be closed anyway); `raw` is closed by close_range below.
            if unsafe { libc::dup3(raw, NET_FD, libc::O_CLOEXEC) } < 0 {
                fail(format_args!("dup3: {}", std::io::Error::last_os_error()));
            }
        }
        // SAFETY: fd 3 is now the channel and owned by nothing else.
        unsafe { std::os::fd::OwnedFd::from_raw_fd(NET_FD) }
    });
    let mut first_closed: u32 = if net.is_some() { 4 } else { 3 };
    // The inotify instance the supervisor made (and the janitor holds too, so that this
    // process's exit is not its last close: that waits for a grace period) survives as well.
    let watch = plan.watch_fd.and_then(|raw| {
        use std::os::fd::FromRawFd;
        let target = first_closed as i32;
        if raw != target {
            // SAFETY: dup3 onto the first descriptor past the kept ones (whatever it was is
            // about to be closed anyway); `raw` is closed by close_range below.
            if unsafe { libc::dup3(raw, target, libc::O_CLOEXEC) } < 0 {
                return None;
            }
        }
        first_closed += 1;
        // SAFETY: `target` is now that instance and owned by nothing else.
        Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(target) })
    });
    // Nothing of the supervisor's (janitor pipe, cgroup handles) stays open in the sandbox.
    // SAFETY: close_range only closes descriptors; the objects that owned them in this forked
    // copy are never used or dropped again (this function never returns).
    unsafe { libc::syscall(libc::SYS_close_range, first_closed, u32::MAX, 0u32) };
    // Inherited blocked from the supervisor already; pid 1's sigwaitinfo loop depends on it.
    if let Err(e) = signal_set().thread_block() {
        fail(format_args!("blocking signals: {e}"));
    }
    pid1(plan, net, watch)
}

/// Waits for `child`, forwarding signals to it; returns its exit code.
pub fn supervise(child: Pid, set: &SigSet) -> i32 {
    supervise_with(child, set, None, &mut |_| false)
}

/// How long the supervisor waits, after forwarding a SIGTERM, before it kills the sandbox
/// (as `docker stop` does): a command that ignores SIGTERM, or is stopped, must not outlive a
/// harness's timeout (red-team round 20: `timeout 10 warden run -- sh -c 'kill -STOP $$'`
/// never ended).
pub const TERM_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Waits up to `timeout` for a signal of `set` (all of them blocked); `None` when it passed.
fn wait_signal(set: &SigSet, timeout: Option<std::time::Duration>) -> Option<Signal> {
    let Some(timeout) = timeout else {
        return set.wait().ok();
    };
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: sigtimedwait reads the set and the timeout, both owned here, and writes no
    // siginfo (null).
    let n = unsafe { libc::sigtimedwait(set.as_ref(), std::ptr::null_mut(), &ts) };
    Signal::try_from(n).ok()
}

/// [`supervise`], offering each signal but SIGCHLD to `handled` first; one it takes is not
/// forwarded. With `term_grace`, a forwarded SIGTERM is followed by a SIGCONT (a stopped
/// command cannot act on it) and, when the child has not ended `term_grace` later, by
/// SIGKILL — to the sandbox's pid 1, which takes every process of its namespace with it; the
/// exit code is then 143, as for a command that ended on the SIGTERM.
pub fn supervise_with(
    child: Pid,
    set: &SigSet,
    term_grace: Option<std::time::Duration>,
    handled: &mut dyn FnMut(Signal) -> bool,
) -> i32 {
    let mut deadline: Option<std::time::Instant> = None;
    let mut killed = false;
    loop {
        let timeout = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
        if timeout.is_some_and(|t| t.is_zero()) {
            deadline = None;
            killed = true;
            eprintln!(
                "warden: the command did not end within {} s of SIGTERM: killing the sandbox",
                term_grace.unwrap_or_default().as_secs()
            );
            let _ = kill(child, Signal::SIGKILL);
            continue;
        }
        let Some(sig) = wait_signal(set, timeout) else {
            continue;
        };
        if sig == Signal::SIGCHLD {
            loop {
                match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                    Ok(WaitStatus::StillAlive) | Err(_) => break,
                    Ok(status) => {
                        if status.pid() == Some(child) {
                            if let Some(code) = exit_code(status) {
                                return if killed {
                                    128 + Signal::SIGTERM as i32
                                } else {
                                    code
                                };
                            }
                        }
                    }
                }
            }
        } else if !handled(sig) {
            let _ = kill(child, sig);
            if let (Signal::SIGTERM, Some(grace), None, false) = (sig, term_grace, deadline, killed)
            {
                let _ = kill(child, Signal::SIGCONT);
                deadline = Some(std::time::Instant::now() + grace);
            }
        }
    }
}

/// [`supervise`], also answering the supervisor's connect requests on `chan` (`--publish`)
/// and keeping the view's protections in place (`guarded`, see [`super::mount::Guarded`]):
/// the signals arrive on a signalfd, polled together with the channel and the mount table.
fn supervise_polling(
    child: Pid,
    set: &SigSet,
    chan: Option<&std::os::fd::OwnedFd>,
    mut guarded: Vec<super::mount::Guarded>,
    forbidden: Option<super::watch::Forbidden>,
    mut late: Option<super::watch::LateMasks>,
) -> i32 {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use nix::sys::signalfd::{SfdFlags, SignalFd};
    use std::os::fd::AsFd;
    let Ok(sfd) = SignalFd::with_flags(set, SfdFlags::SFD_CLOEXEC) else {
        return supervise(child, set);
    };
    // The mount table signals every change (POLLPRI) until it is polled again.
    let mounts = if guarded.is_empty() && late.is_none() {
        None
    } else {
        std::fs::File::open("/proc/self/mountinfo").ok()
    };
    let mut serving = chan.is_some();
    // The periodic looks (below) are due by the clock, not only when `poll` times out: a
    // command that keeps one of the watched descriptors busy (a git dir file rewritten every
    // 2 ms) would otherwise never let the timeout fire (red-team round 16).
    let mut last_tick = std::time::Instant::now();
    loop {
        let mut fds = vec![PollFd::new(sfd.as_fd(), PollFlags::POLLIN)];
        let mut chan_at = None;
        let mut mounts_at = None;
        if let (true, Some(c)) = (serving, chan) {
            chan_at = Some(fds.len());
            fds.push(PollFd::new(c.as_fd(), PollFlags::POLLIN));
        }
        if let Some(m) = &mounts {
            mounts_at = Some(fds.len());
            fds.push(PollFd::new(m.as_fd(), PollFlags::POLLPRI));
        }
        let mut forbidden_at = None;
        if let Some(f) = &forbidden {
            forbidden_at = Some(fds.len());
            fds.push(PollFd::new(f.inotify.as_fd(), PollFlags::POLLIN));
        }
        let mut late_at = None;
        if let Some(l) = late.as_ref().filter(|l| !l.shared) {
            late_at = Some(fds.len());
            fds.push(PollFd::new(l.inotify.as_fd(), PollFlags::POLLIN));
        }
        // A protection that could not be put back is tried again every 50 ms (the host may
        // recreate the entry without any change to the mount table).
        let period = if super::mount::any_failed(&guarded) {
            Some(std::time::Duration::from_millis(50))
        } else if late.as_ref().is_some_and(|l| l.waiting()) {
            Some(std::time::Duration::from_millis(100))
        } else if forbidden.as_ref().is_some_and(|f| f.polls_indexes()) {
            Some(super::watch::INDEX_POLL)
        } else {
            None
        };
        let timeout = period
            .map(|p| p.saturating_sub(last_tick.elapsed()))
            .and_then(|left| PollTimeout::try_from(left).ok())
            .unwrap_or(PollTimeout::NONE);
        if poll(&mut fds, timeout).is_err() {
            continue;
        }
        let due = period.is_some_and(|p| last_tick.elapsed() >= p);
        if due {
            last_tick = std::time::Instant::now();
        }
        let ready = |i: Option<usize>| {
            i.and_then(|i| fds.get(i))
                .and_then(|f| f.revents())
                .is_some_and(|r| !r.is_empty())
        };
        let chan_ready = ready(chan_at);
        let mounts_ready = ready(mounts_at) || (due && mounts.is_some());
        let forbidden_ready = ready(forbidden_at);
        if let (true, Some(f)) = (due, &forbidden) {
            f.poll_indexes();
        }
        let shared_late = late.as_ref().is_some_and(|l| l.shared);
        let late_ready =
            ready(late_at) || (due && late.is_some()) || (forbidden_ready && shared_late);
        let sig_ready = ready(Some(0));
        drop(fds);
        if mounts_ready {
            use super::mount::Restored;
            for (path, result) in super::mount::restore(&mut guarded) {
                match result {
                    Restored::Ok => eprintln!(
                        "warden: a change on the host took the sandbox's protection of {} \
                         away (the entry was replaced or removed there); restored",
                        path.display()
                    ),
                    Restored::Reserved => eprintln!(
                        "warden: {} was removed on the host; a placeholder keeps the name \
                         reserved until the sandbox ends",
                        path.display()
                    ),
                    Restored::Suspect => {
                        let what = super::watch::end_and_move_aside(&path, false);
                        eprintln!(
                            "warden: blocked: the protected {} was removed on the host and \
                             something took its name before it could be reserved again (the \
                             command may have made it); {what}; the sandbox was ended",
                            path.display()
                        );
                    }
                    Restored::Failed(e) => eprintln!(
                        "warden: warning: the protection of {} was taken away by a change on \
                         the host and cannot be restored: {e}",
                        path.display()
                    ),
                }
            }
        }
        let mut events = Vec::new();
        if forbidden_ready {
            if let Some(f) = &forbidden {
                events = f.read();
                f.handle(&events);
            }
        }
        if late_ready {
            if let Some(l) = &mut late {
                l.handle(&events, &mut guarded);
            }
        }
        if chan_ready {
            if let Some(c) = chan {
                serving = matches!(super::net::serve_connect(c), Ok(true));
            }
        }
        if !sig_ready {
            continue;
        }
        let Ok(Some(info)) = sfd.read_signal() else {
            continue;
        };
        let Ok(sig) = Signal::try_from(info.ssi_signo as i32) else {
            continue;
        };
        if sig == Signal::SIGCHLD {
            loop {
                match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                    Ok(WaitStatus::StillAlive) | Err(_) => break,
                    Ok(status) => {
                        if status.pid() == Some(child) {
                            if let Some(code) = exit_code(status) {
                                return code;
                            }
                        }
                    }
                }
            }
        } else {
            let _ = kill(child, sig);
        }
    }
}

/// The sandbox's pid 1: builds the view, starts the command, reaps, forwards signals.
fn pid1(plan: &Plan, net: Option<std::os::fd::OwnedFd>, watch: Option<std::os::fd::OwnedFd>) -> ! {
    let mut reserved = Vec::new();
    let setup = |reserved: &mut Vec<_>| -> Result<Option<std::os::fd::OwnedFd>, String> {
        super::harden::parent_death_signal(libc::SIGKILL).map_err(|e| e.to_string())?;
        // This sandbox's share of the caller's inotify instances.
        super::watch::limit_inotify();
        // What holds each reserved name now, before the view hides the host's paths.
        *reserved = super::mount::reserved_entries(plan);
        super::mount::apply(plan).map_err(|e| e.to_string())?;
        nix::unistd::sethostname(&plan.hostname).map_err(|e| format!("sethostname: {e}"))?;
        loopback_up().map_err(|e| format!("bringing up lo: {e}"))?;
        // The proxy's listeners, created here in the sandbox's namespace before the command
        // exists, go to the supervisor; pid 1 keeps no copy.
        // With `--publish`, pid 1 keeps the channel to connect to sandbox ports for the
        // supervisor.
        // The command's own terminal (sent first): the master goes to the supervisor, the
        // slave becomes pid 1's streams (so nothing here keeps the caller's terminal) and the
        // command's.
        if let (Some(t), Some(chan)) = (&plan.terminal, &net) {
            let slave = super::pty::open_and_send(t, chan)?;
            super::pty::take_streams(&slave)?;
        }
        if let (Some(np), Some(chan)) = (&plan.network, &net) {
            super::net::create_and_send(np, chan)?;
        }
        let connector = net.filter(|_| plan.network.as_ref().is_some_and(|np| np.connector));
        // Nothing in the sandbox may ptrace pid 1 or read its memory.
        super::harden::set_dumpable(false).map_err(|e| e.to_string())?;
        Ok(connector)
    };
    let connector = match setup(&mut reserved) {
        Ok(c) => c,
        Err(e) => fail(e),
    };
    let filter = match super::seccomp::build(&super::seccomp::SeccompOptions {
        allow_unix_sockets: plan.hardening.allow_unix_sockets,
        allow_namespaces: plan.hardening.allow_namespaces,
    }) {
        Ok(f) => f,
        Err(e) => fail(format_args!("building the seccomp filter: {e}")),
    };
    let set = signal_set();
    // Watched before the command exists, so nothing it creates is missed.
    let forbidden = match super::watch::Forbidden::watch(
        &plan.forbidden,
        &plan.git_dirs,
        &plan.missing_protected,
        watch,
    ) {
        Ok(f) => f,
        Err(e) => fail(format_args!("watching the protected git dirs: {e}")),
    };
    let late = match super::watch::LateMasks::watch(
        &plan.mask_later,
        forbidden.as_ref().map(|f| &f.inotify),
    ) {
        Ok(l) => l,
        Err(e) => fail(format_args!(
            "watching the denyRead paths that do not exist yet: {e}"
        )),
    };
    // SAFETY: pid 1 is single-threaded, so fork is safe.
    match unsafe { fork() } {
        Err(e) => fail(format_args!("fork: {e}")),
        Ok(ForkResult::Child) => command(plan, &filter, &set),
        Ok(ForkResult::Parent { child }) => {
            let guarded = super::mount::guarded(plan, &reserved);
            let code = if connector.is_none()
                && guarded.is_empty()
                && forbidden.is_none()
                && late.is_none()
            {
                supervise(child, &set)
            } else {
                supervise_polling(child, &set, connector.as_ref(), guarded, forbidden, late)
            };
            std::process::exit(super::watch::exit_status(code))
        }
    }
}

/// The command's process: restrict, then exec. Never returns.
fn command(plan: &Plan, filter: &seccompiler::BpfProgram, set: &SigSet) -> ! {
    let result = (|| -> Result<std::convert::Infallible, String> {
        set.thread_unblock()
            .map_err(|e| format!("unblocking signals: {e}"))?;
        // A new session: no controlling terminal, so TIOCSTI cannot reach the caller's.
        nix::unistd::setsid().map_err(|e| format!("setsid: {e}"))?;
        // On its own terminal (whole-process mode), that terminal becomes the session's.
        if plan.terminal.is_some() {
            super::pty::make_controlling()?;
        }
        for (name, value) in &plan.rlimits {
            set_rlimit(name, *value)?;
        }
        super::landlock::apply(&super::landlock::LandlockPlan {
            // /dev/shm is a private tmpfs: POSIX shared memory must be able to create files.
            writable: plan
                .hardening
                .landlock_writable
                .iter()
                .cloned()
                .chain([PathBuf::from("/dev/shm")])
                .collect(),
            devices: super::landlock::LandlockPlan::default_devices(),
            scope_abstract_unix: !plan.hardening.allow_unix_sockets,
            scope_signals: true,
            read_hidden: plan.mask_later.clone(),
        })
        .map_err(|e| format!("Landlock: {e}"))?;
        super::harden::drop_capabilities().map_err(|e| e.to_string())?;
        super::harden::no_new_privs().map_err(|e| e.to_string())?;
        let program = resolve_program(plan)?;
        let argv: Vec<CString> = plan
            .argv
            .iter()
            .map(|a| {
                CString::new(a.clone()).map_err(|_| "argument contains a NUL byte".to_string())
            })
            .collect::<Result<_, _>>()?;
        let env: Vec<CString> = plan
            .env
            .iter()
            .filter_map(|e| CString::new(e.clone()).ok())
            .collect();
        // No descriptor the caller leaked (without FD_CLOEXEC) reaches the command.
        // SAFETY: close_range only closes descriptors; nothing below uses any fd >= 3.
        if unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) } != 0 {
            return Err(format!("close_range: {}", std::io::Error::last_os_error()));
        }
        // Installed last: from here on only execve is left.
        super::seccomp::install(filter).map_err(|e| format!("seccomp: {e}"))?;
        nix::unistd::execve(&program, &argv, &env).map_err(|e| {
            let shown = String::from_utf8_lossy(program.as_bytes());
            format!("cannot execute {shown}: {e}")
        })
    })();
    match result {
        Ok(never) => match never {},
        Err(e) => {
            eprintln!("warden: error: {e}");
            // 127/126 as a shell would say, for a missing or non-executable program.
            let code = if e.contains("ENOENT") || e.contains("not found") {
                127
            } else if e.contains("EACCES") {
                126
            } else {
                EXIT_WARDEN
            };
            std::process::exit(code)
        }
    }
}

/// argv[0] as a path: used as-is when it has a slash, else searched in the command's PATH.
fn resolve_program(plan: &Plan) -> Result<CString, String> {
    let Some(arg0) = plan.argv.first() else {
        return Err("no command given".to_string());
    };
    let to_c = |b: &[u8]| CString::new(b.to_vec()).map_err(|_| "NUL in program name".to_string());
    if arg0.contains(&b'/') {
        return to_c(arg0);
    }
    let path_var = plan
        .env
        .iter()
        .find_map(|e| e.strip_prefix(b"PATH="))
        .unwrap_or(b"/usr/local/bin:/usr/bin:/bin");
    for dir in path_var.split(|b| *b == b':') {
        let dir = if dir.is_empty() { &b"."[..] } else { dir };
        let candidate =
            Path::new(std::ffi::OsStr::from_bytes(dir)).join(std::ffi::OsStr::from_bytes(arg0));
        if let Ok(meta) = std::fs::metadata(&candidate) {
            use std::os::unix::fs::PermissionsExt;
            if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
                return to_c(candidate.as_os_str().as_bytes());
            }
        }
    }
    Err(format!(
        "{}: command not found",
        String::from_utf8_lossy(arg0)
    ))
}

fn set_rlimit(name: &str, value: u64) -> Result<(), String> {
    use crate::policy::limits::{unknown_rlimit, Rlimit};
    use nix::sys::resource::{setrlimit, Resource};
    let res = match Rlimit::from_name(name).ok_or_else(|| unknown_rlimit(name))? {
        Rlimit::Nofile => Resource::RLIMIT_NOFILE,
        Rlimit::Nproc => Resource::RLIMIT_NPROC,
        Rlimit::Core => Resource::RLIMIT_CORE,
        Rlimit::Fsize => Resource::RLIMIT_FSIZE,
        Rlimit::As => Resource::RLIMIT_AS,
        Rlimit::Cpu => Resource::RLIMIT_CPU,
        Rlimit::Stack => Resource::RLIMIT_STACK,
    };
    setrlimit(res, value, value).map_err(|e| format!("setrlimit {name}: {e}"))
}

/// `ip link set lo up` with two ioctls.
fn loopback_up() -> Result<(), nix::Error> {
    use nix::sys::socket::{socket, AddressFamily, SockFlag, SockType};
    use std::os::fd::AsRawFd;
    let sock = socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads the flags of the interface named in `req` into `req`, which
    // is a valid, properly sized ifreq that outlives the call.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(nix::Error::last());
    }
    // SAFETY: the union field ifru_flags is the one SIOCGIFFLAGS just filled in.
    unsafe {
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    }
    // SAFETY: as above, with the flags to set.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } < 0 {
        return Err(nix::Error::last());
    }
    Ok(())
}

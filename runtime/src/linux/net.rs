//! The sandbox end of the network. The sandbox's net namespace is empty but for `lo`; its
//! pid 1 creates the listening sockets of the proxy (HTTP and SOCKS5 on 127.0.0.1) and of the
//! stub DNS server (UDP and TCP on 127.0.0.53:53) *inside* that namespace, before the command
//! exists, and hands them to the supervisor over a socketpair (SCM_RIGHTS). The supervisor's
//! proxy then accepts the sandbox's connections directly: no bridge process, no socket file,
//! nothing reachable from outside the sandbox (so no token is needed), and one hop less than
//! a unix-socket bridge. The command cannot ptrace or signal the supervisor (another pid
//! namespace, and seccomp).

use nix::sys::socket::{
    bind, listen, recvmsg, sendmsg, setsockopt, socket, socketpair, sockopt, AddressFamily,
    Backlog, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, SockaddrIn,
};
use serde::{Deserialize, Serialize};
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// What pid 1 creates for the supervisor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkPlan {
    /// The proxy's listeners (HTTP and SOCKS5 on 127.0.0.1).
    pub proxy: bool,
    pub http_port: u16,
    pub socks_port: u16,
    /// The stub DNS server on 127.0.0.53:53 (UDP and TCP).
    pub dns: bool,
    /// pid 1 keeps the channel and connects to sandbox ports for the supervisor
    /// (`--publish`).
    pub connector: bool,
}

impl Default for NetworkPlan {
    fn default() -> Self {
        NetworkPlan {
            proxy: true,
            http_port: 3128,
            socks_port: 1080,
            dns: true,
            connector: false,
        }
    }
}

impl NetworkPlan {
    fn sockets(&self) -> usize {
        2 * usize::from(self.proxy) + 2 * usize::from(self.dns)
    }
}

/// The stub resolver's address inside the sandbox.
pub const DNS_ADDR: [u8; 4] = [127, 0, 0, 53];

/// The listening sockets, as received by the supervisor.
pub struct Listeners {
    pub http: Option<std::net::TcpListener>,
    pub socks: Option<std::net::TcpListener>,
    pub dns_udp: Option<std::net::UdpSocket>,
    pub dns_tcp: Option<std::net::TcpListener>,
}

/// The hand-over channel: (supervisor end, sandbox end).
pub fn channel() -> nix::Result<(OwnedFd, OwnedFd)> {
    socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
}

fn listener(kind: SockType, addr: [u8; 4], port: u16) -> Result<OwnedFd, String> {
    let what = |op: &str, e: nix::Error| {
        format!(
            "{op} {}.{}.{}.{}:{port}: {e}",
            addr[0], addr[1], addr[2], addr[3]
        )
    };
    let fd = socket(AddressFamily::Inet, kind, SockFlag::SOCK_CLOEXEC, None)
        .map_err(|e| what("socket", e))?;
    setsockopt(&fd, sockopt::ReuseAddr, &true).map_err(|e| what("SO_REUSEADDR", e))?;
    let sa = SockaddrIn::new(addr[0], addr[1], addr[2], addr[3], port);
    bind(fd.as_raw_fd(), &sa).map_err(|e| what("bind", e))?;
    if kind == SockType::Stream {
        let backlog = Backlog::new(4096).unwrap_or(Backlog::MAXCONN);
        listen(&fd, backlog).map_err(|e| what("listen", e))?;
    }
    Ok(fd)
}

/// In pid 1, inside the namespace with `lo` up: creates the sockets and sends them.
pub fn create_and_send(plan: &NetworkPlan, chan: &OwnedFd) -> Result<(), String> {
    let mut fds = Vec::new();
    if plan.proxy {
        fds.push(listener(SockType::Stream, [127, 0, 0, 1], plan.http_port)?);
        fds.push(listener(SockType::Stream, [127, 0, 0, 1], plan.socks_port)?);
    }
    if plan.dns {
        fds.push(listener(SockType::Datagram, DNS_ADDR, 53)?);
        fds.push(listener(SockType::Stream, DNS_ADDR, 53)?);
    }
    let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let payload = [fds.len() as u8];
    sendmsg::<()>(
        chan.as_raw_fd(),
        &[IoSlice::new(&payload)],
        &[ControlMessage::ScmRights(&raw)],
        MsgFlags::empty(),
        None,
    )
    .map_err(|e| format!("handing the proxy's sockets to the supervisor: {e}"))?;
    Ok(())
}

/// In the supervisor: receives the sockets pid 1 created. EOF (pid 1 failed first) is an error.
pub fn receive(chan: &OwnedFd, plan: &NetworkPlan) -> std::io::Result<Listeners> {
    let mut payload = [0u8; 1];
    let mut iov = [IoSliceMut::new(&mut payload)];
    let mut space = nix::cmsg_space!([RawFd; 4]);
    let msg = recvmsg::<()>(
        chan.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut fds: Vec<OwnedFd> = Vec::new();
    for cmsg in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(list) = cmsg {
            for fd in list {
                // SAFETY: the kernel installed these descriptors in this process for this
                // message; nothing else owns them.
                fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
    }
    let expected = plan.sockets();
    if msg.bytes == 0 || fds.len() != expected {
        return Err(std::io::Error::other(format!(
            "the sandbox handed over {} of {expected} network sockets",
            fds.len()
        )));
    }
    let mut it = fds.into_iter();
    let mut next = || {
        it.next()
            .ok_or_else(|| std::io::Error::other("socket missing"))
    };
    let (http, socks) = if plan.proxy {
        (
            Some(std::net::TcpListener::from(next()?)),
            Some(std::net::TcpListener::from(next()?)),
        )
    } else {
        (None, None)
    };
    let (dns_udp, dns_tcp) = if plan.dns {
        (
            Some(std::net::UdpSocket::from(next()?)),
            Some(std::net::TcpListener::from(next()?)),
        )
    } else {
        (None, None)
    };
    for l in [&http, &socks].into_iter().flatten() {
        l.set_nonblocking(true)?;
    }
    if let Some(u) = &dns_udp {
        u.set_nonblocking(true)?;
    }
    if let Some(t) = &dns_tcp {
        t.set_nonblocking(true)?;
    }
    Ok(Listeners {
        http,
        socks,
        dns_udp,
        dns_tcp,
    })
}

/// The resolv.conf shown inside the sandbox.
pub fn resolv_conf() -> String {
    let [a, b, c, d] = DNS_ADDR;
    format!(
        "# warden: names are answered by warden's stub resolver (allowed names only)\n\
         nameserver {a}.{b}.{c}.{d}\noptions edns0 trust-ad\n"
    )
}

// ---------------------------------------------------------------------------------------------
// The connector: pid 1 connects to ports inside the sandbox for the supervisor (`--publish`).

/// In pid 1: answers one request from the supervisor — two bytes, a port in network order —
/// with a socket connecting to 127.0.0.1:PORT inside the sandbox (payload `0` and the
/// descriptor) or the connect error (payload: the errno, saturated at 255). `Ok(false)`: the
/// supervisor closed the channel.
///
/// The connect is non-blocking and handed over in progress: the command owns the listener,
/// and one whose accept queue it keeps full would hold a blocking connect in SYN_SENT for
/// two minutes, with pid 1 guarding nothing meanwhile. The supervisor waits for it.
pub fn serve_connect(chan: &OwnedFd) -> nix::Result<bool> {
    let mut req = [0u8; 2];
    let n = {
        let mut iov = [IoSliceMut::new(&mut req)];
        recvmsg::<()>(chan.as_raw_fd(), &mut iov, None, MsgFlags::empty())?.bytes
    };
    if n == 0 {
        return Ok(false);
    }
    let port = u16::from_be_bytes(req);
    let connected = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )
    .and_then(|fd| {
        match nix::sys::socket::connect(fd.as_raw_fd(), &SockaddrIn::new(127, 0, 0, 1, port)) {
            Ok(()) | Err(nix::errno::Errno::EINPROGRESS) => Ok(fd),
            Err(e) => Err(e),
        }
    });
    match connected {
        Ok(fd) => send_fd(chan, 0, fd.as_raw_fd())?,
        Err(e) => {
            let code = u8::try_from(e as i32).unwrap_or(u8::MAX);
            sendmsg::<()>(
                chan.as_raw_fd(),
                &[IoSlice::new(&[code])],
                &[],
                MsgFlags::empty(),
                None,
            )?;
        }
    }
    Ok(true)
}

/// In the supervisor: asks pid 1 for a connection to `port` inside the sandbox. Blocking
/// until pid 1 answers (at once); callers serialise requests on one channel. The stream is
/// non-blocking and may still be connecting: wait for it to become writable, then check
/// its error (`take_error`).
pub fn request_connect(chan: &OwnedFd, port: u16) -> std::io::Result<std::net::TcpStream> {
    sendmsg::<()>(
        chan.as_raw_fd(),
        &[IoSlice::new(&port.to_be_bytes())],
        &[],
        MsgFlags::empty(),
        None,
    )?;
    let (bytes, payload, fd) = receive_fd(chan)?;
    if bytes == 0 {
        return Err(std::io::Error::other("the sandbox's pid 1 is gone"));
    }
    match (payload, fd) {
        (0, Some(fd)) => Ok(std::net::TcpStream::from(fd)),
        (code, _) => Err(std::io::Error::from_raw_os_error(i32::from(code))),
    }
}

/// Sends one descriptor with a one-byte payload over a hand-over channel.
pub fn send_fd(chan: &OwnedFd, payload: u8, fd: RawFd) -> nix::Result<()> {
    let raw = [fd];
    sendmsg::<()>(
        chan.as_raw_fd(),
        &[IoSlice::new(&[payload])],
        &[ControlMessage::ScmRights(&raw)],
        MsgFlags::empty(),
        None,
    )?;
    Ok(())
}

/// Receives one message of [`send_fd`]: its length (0: the peer closed), its payload byte and
/// the descriptor, if one came.
pub fn receive_fd(chan: &OwnedFd) -> std::io::Result<(usize, u8, Option<OwnedFd>)> {
    let mut payload = [0u8; 1];
    let mut iov = [IoSliceMut::new(&mut payload)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let msg = recvmsg::<()>(
        chan.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut fd = None;
    for cmsg in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(list) = cmsg {
            for raw in list {
                // SAFETY: the kernel installed this descriptor in this process for this
                // message; nothing else owns it.
                let owned = unsafe { OwnedFd::from_raw_fd(raw) };
                fd.get_or_insert(owned);
            }
        }
    }
    let bytes = msg.bytes;
    Ok((bytes, payload[0], fd))
}

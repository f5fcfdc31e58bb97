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

/// What pid 1 listens on for the supervisor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkPlan {
    pub http_port: u16,
    pub socks_port: u16,
    /// The stub DNS server on 127.0.0.53:53 (UDP and TCP).
    pub dns: bool,
}

impl Default for NetworkPlan {
    fn default() -> Self {
        NetworkPlan {
            http_port: 3128,
            socks_port: 1080,
            dns: true,
        }
    }
}

/// The stub resolver's address inside the sandbox.
pub const DNS_ADDR: [u8; 4] = [127, 0, 0, 53];

/// The listening sockets, as received by the supervisor.
pub struct Listeners {
    pub http: std::net::TcpListener,
    pub socks: std::net::TcpListener,
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
    let mut fds = vec![
        listener(SockType::Stream, [127, 0, 0, 1], plan.http_port)?,
        listener(SockType::Stream, [127, 0, 0, 1], plan.socks_port)?,
    ];
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
    let expected = if plan.dns { 4 } else { 2 };
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
    let http = std::net::TcpListener::from(next()?);
    let socks = std::net::TcpListener::from(next()?);
    let (dns_udp, dns_tcp) = if plan.dns {
        (
            Some(std::net::UdpSocket::from(next()?)),
            Some(std::net::TcpListener::from(next()?)),
        )
    } else {
        (None, None)
    };
    for l in [&http, &socks] {
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

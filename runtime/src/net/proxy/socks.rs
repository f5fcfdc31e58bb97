//! The SOCKS5 side of the proxy (RFC 1928 via fast-socks5): CONNECT with domain, IPv4 and
//! IPv6 targets. A refusal by the policy or the address guard is reply 0x02 (connection not
//! allowed by ruleset); BIND and UDP ASSOCIATE are refused with 0x07.

use super::{Proxy, RefusalKind};
use crate::net::event::{NetEvent, Protocol, Stage};
use crate::policy::decision::{ReasonKind, Verdict};
use fast_socks5::server::Socks5ServerProtocol;
use fast_socks5::util::target_addr::TargetAddr;
use fast_socks5::{ReplyError, Socks5Command};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// Time a client has to finish the handshake and send its command.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves SOCKS5 clients accepted on `listener` until the process ends.
pub async fn serve(proxy: Arc<Proxy>, listener: TcpListener) {
    let limit = proxy.connections.clone();
    loop {
        let Ok(permit) = limit.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let proxy = proxy.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let _ = stream.set_nodelay(true);
            handle(proxy, stream).await;
        });
    }
}

async fn handle(proxy: Arc<Proxy>, stream: TcpStream) {
    let handshake = async {
        let proto = match proxy.config.token.clone() {
            Some(token) => {
                Socks5ServerProtocol::accept_password_auth(stream, move |_user, pass| {
                    pass.as_bytes() == token.as_bytes()
                })
                .await
                .map(|(p, _)| p)
            }
            None => Socks5ServerProtocol::accept_no_auth(stream).await,
        }?;
        proto.read_command().await
    };
    let (proto, cmd, target) = match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok(t)) => t,
        // A request the handshake refused (SOCKS4 or 4a, a command or address type SOCKS5
        // does not have, a wrong token) is recorded (red-team round 22); a client that went
        // away or never finished is not.
        Ok(Err(e)) => {
            use fast_socks5::server::SocksServerError as E;
            if !matches!(e, E::Io { .. } | E::EOF) {
                let v = Verdict::deny(
                    ReasonKind::InvalidHost,
                    format!("SOCKS request refused: {e}"),
                );
                let mut event = NetEvent::new(Protocol::Socks5, super::http::UNPARSED, None, &v);
                event.stage = Stage::Request;
                proxy.config.events.record(event);
            }
            return;
        }
        Err(_) => return,
    };
    let (host, port) = match target {
        TargetAddr::Ip(sa) => (sa.ip().to_string(), sa.port()),
        TargetAddr::Domain(name, port) => (name, port),
    };
    if cmd != Socks5Command::TCPConnect {
        let v = Verdict::deny(
            ReasonKind::InvalidHost,
            format!("SOCKS5 {cmd:?} is not supported (CONNECT only)"),
        );
        let mut event = NetEvent::new(Protocol::Socks5, &host, Some(port), &v);
        event.stage = Stage::Request;
        proxy.config.events.record(event);
        let _ = proto.reply_error(&ReplyError::CommandNotSupported).await;
        return;
    }
    match proxy.open(Protocol::Socks5, &host, port).await {
        Err(r) => {
            let reply = match r.kind {
                RefusalKind::Blocked | RefusalKind::BadRequest => ReplyError::ConnectionNotAllowed,
                RefusalKind::Unresolvable => ReplyError::HostUnreachable,
                RefusalKind::Unreachable => ReplyError::ConnectionRefused,
            };
            let _ = proto.reply_error(&reply).await;
        }
        Ok(super::Opened {
            stream,
            event,
            started,
            ..
        }) => {
            // Not the upstream socket's address: that is the host's own, which the sandbox
            // has no business learning.
            let bound = std::net::SocketAddr::from(([0, 0, 0, 0], 0));
            let Ok(client) = proto.reply_success(bound).await else {
                proxy.finish(event, started, 0, 0);
                return;
            };
            let (up, down) =
                super::splice::tunnel_metered(&client, &stream, &|u, d| proxy.transferred(u, d))
                    .await
                    .unwrap_or((0, 0));
            proxy.finish(event, started, up, down);
        }
    }
}

//! Where the proxy's allowed connections go: straight to the destination, or through a parent
//! proxy (`network.parentProxy`: corporate networks), or — for `httpProxyPort` /
//! `socksProxyPort` — the sandbox's proxy connections are handed unchanged to an external
//! filtering proxy on the host.

use crate::policy::merge::Policy;
use base64::Engine;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Largest response head accepted from a parent proxy.
const MAX_HEAD: usize = 16 * 1024;
const PARENT_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParentError {
    #[error("parentProxy.{key} {value:?}: {why}")]
    Invalid {
        key: &'static str,
        value: String,
        why: String,
    },
}

/// One parent proxy: `http://[user:pass@]host:port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParentUrl {
    pub host: String,
    pub port: u16,
    /// `Proxy-Authorization` value, from the URL's user info.
    pub authorization: Option<String>,
}

impl ParentUrl {
    pub fn parse(key: &'static str, text: &str) -> Result<ParentUrl, ParentError> {
        let invalid = |why: &str| ParentError::Invalid {
            key,
            value: redact_userinfo(text),
            why: why.to_string(),
        };
        let url = url::Url::parse(text).map_err(|e| invalid(&e.to_string()))?;
        if url.scheme() != "http" {
            return Err(invalid("only http:// parent proxies are supported"));
        }
        let host = url
            .host_str()
            .ok_or_else(|| invalid("no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = url.port_or_known_default().unwrap_or(80);
        let authorization = (!url.username().is_empty()).then(|| {
            let user = percent_decode(url.username());
            let pass = percent_decode(url.password().unwrap_or(""));
            let cred = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
            format!("Basic {cred}")
        });
        Ok(ParentUrl {
            host,
            port,
            authorization,
        })
    }
}

/// `text` (a proxy URL, valid or not) with its user info — a credential — replaced by `***`,
/// for messages and `warden settings show`.
pub fn redact_userinfo(text: &str) -> String {
    let start = text.find("://").map_or(0, |i| i + 3);
    let rest = &text[start..];
    let authority = rest.find(['/', '?', '#']).map_or(rest, |end| &rest[..end]);
    match authority.rfind('@') {
        Some(at) => format!("{}***{}", &text[..start], &text[start + at..]),
        None => text.to_string(),
    }
}

/// Whether `text` (a proxy URL) carries user info (a credential).
pub fn has_userinfo(text: &str) -> bool {
    redact_userinfo(text) != text
}

fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={s}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

/// `network.parentProxy`: `http` for plain-HTTP requests, `https` for tunnels (CONNECT,
/// SOCKS5; falls back to `http`), `noProxy` hosts go direct.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParentProxy {
    pub http: Option<ParentUrl>,
    pub https: Option<ParentUrl>,
    /// curl's NO_PROXY semantics: `*` is everything; `example.com` and `.example.com` match
    /// the name and its subdomains; an IP literal or CIDR matches addresses.
    pub no_proxy: Vec<String>,
}

impl ParentProxy {
    /// From the effective settings; `None` when no parent is configured.
    pub fn from_policy(policy: &Policy) -> Result<Option<ParentProxy>, ParentError> {
        let e = &policy.effective;
        let http = e
            .str("network.parentProxy.http")
            .map(|t| ParentUrl::parse("http", t))
            .transpose()?;
        let https = e
            .str("network.parentProxy.https")
            .map(|t| ParentUrl::parse("https", t))
            .transpose()?;
        if http.is_none() && https.is_none() {
            return Ok(None);
        }
        let no_proxy = e
            .strings("network.parentProxy.noProxy")
            .into_iter()
            .map(|r| r.pattern)
            .collect();
        Ok(Some(ParentProxy {
            http,
            https,
            no_proxy,
        }))
    }

    /// The parent for a destination (`tunnel`: CONNECT or SOCKS5), or `None` to go direct.
    pub fn route(&self, host: &crate::policy::domain::Host, tunnel: bool) -> Option<&ParentUrl> {
        if self.bypasses(host) {
            return None;
        }
        if tunnel {
            self.https.as_ref().or(self.http.as_ref())
        } else {
            self.http.as_ref()
        }
    }

    fn bypasses(&self, host: &crate::policy::domain::Host) -> bool {
        use crate::policy::domain::Host;
        self.no_proxy.iter().any(|entry| {
            let entry = entry.trim().to_ascii_lowercase();
            if entry == "*" {
                return true;
            }
            match host {
                Host::Ip(ip) => {
                    if let Ok(net) = entry.parse::<ipnet::IpNet>() {
                        net.contains(ip)
                    } else {
                        entry
                            .trim_matches(|c| c == '[' || c == ']')
                            .parse::<std::net::IpAddr>()
                            .ok()
                            == Some(*ip)
                    }
                }
                Host::Name(name) => {
                    let suffix = entry.trim_start_matches("*.").trim_start_matches('.');
                    !suffix.is_empty()
                        && (name == suffix
                            || name
                                .strip_suffix(suffix)
                                .is_some_and(|rest| rest.ends_with('.')))
                }
            }
        })
    }
}

/// Opens a tunnel to `target` (`host:port` as sent in CONNECT) through `parent`.
pub async fn connect_via(
    parent: &ParentUrl,
    parent_addr: SocketAddr,
    target: &str,
) -> std::io::Result<TcpStream> {
    let work = async {
        let mut s = TcpStream::connect(parent_addr).await?;
        let _ = s.set_nodelay(true);
        let mut head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
        if let Some(auth) = &parent.authorization {
            head.push_str(&format!("Proxy-Authorization: {auth}\r\n"));
        }
        head.push_str("\r\n");
        s.write_all(head.as_bytes()).await?;
        // Read byte by byte up to the end of the head: nothing of the tunnel may be consumed.
        let mut buf = Vec::with_capacity(256);
        let mut byte = [0u8; 1];
        while !buf.ends_with(b"\r\n\r\n") {
            if buf.len() >= MAX_HEAD {
                return Err(std::io::Error::other(
                    "the parent proxy's response head is too long",
                ));
            }
            if s.read(&mut byte).await? == 0 {
                return Err(std::io::Error::other(
                    "the parent proxy closed the connection",
                ));
            }
            buf.push(byte[0]);
        }
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut headers);
        match resp.parse(&buf) {
            Ok(httparse::Status::Complete(_))
                if resp.code.is_some_and(|c| (200..300).contains(&c)) =>
            {
                Ok(s)
            }
            Ok(_) => Err(std::io::Error::other(format!(
                "the parent proxy refused CONNECT {target}: {} {}",
                resp.code.unwrap_or(0),
                resp.reason.unwrap_or("")
            ))),
            Err(e) => Err(std::io::Error::other(format!(
                "the parent proxy's response: {e}"
            ))),
        }
    };
    tokio::time::timeout(PARENT_TIMEOUT, work)
        .await
        .map_err(|_| std::io::Error::other("the parent proxy timed out"))?
}

/// `httpProxyPort` / `socksProxyPort`: every connection the sandbox makes to `listener` is
/// relayed unchanged to an external filtering proxy on the host's loopback at `port`; that
/// proxy decides (warden records no network events for it).
pub async fn relay(listener: tokio::net::TcpListener, port: u16) {
    let target = SocketAddr::from(([127, 0, 0, 1], port));
    loop {
        let client = match listener.accept().await {
            Ok((c, _)) => c,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        tokio::spawn(async move {
            if let Ok(Ok(up)) =
                tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(target)).await
            {
                let _ = client.set_nodelay(true);
                let _ = up.set_nodelay(true);
                let _ = crate::net::proxy::splice::tunnel(&client, &up).await;
            }
        });
    }
}

#[cfg(test)]
#[path = "upstream_tests.rs"]
mod tests;

//! The proxy environment of the sandboxed command: every variable common tools read to find a
//! proxy, pointing at the listeners inside the sandbox (the same set srt sets, plus a few).

/// Where the proxy listens inside the sandbox's network namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoints {
    pub http_port: u16,
    pub socks_port: u16,
}

impl Default for Endpoints {
    fn default() -> Self {
        Endpoints {
            http_port: 3128,
            socks_port: 1080,
        }
    }
}

/// Names of every variable [`proxy_env`] sets (removed from the caller's environment first, so
/// a caller's own proxy settings never leak in).
pub const NAMES: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
    "FTP_PROXY",
    "ftp_proxy",
    "RSYNC_PROXY",
    "NODE_USE_ENV_PROXY",
    "GLOBAL_AGENT_HTTP_PROXY",
    "GLOBAL_AGENT_HTTPS_PROXY",
    "GLOBAL_AGENT_NO_PROXY",
    "GIT_SSH_COMMAND",
    "JAVA_TOOL_OPTIONS",
    "DOCKER_HTTP_PROXY",
    "DOCKER_HTTPS_PROXY",
    "CLOUDSDK_PROXY_TYPE",
    "CLOUDSDK_PROXY_ADDRESS",
    "CLOUDSDK_PROXY_PORT",
    "GRPC_PROXY",
    "grpc_proxy",
    "PIP_PROXY",
    "npm_config_proxy",
    "npm_config_https_proxy",
];

/// `(name, value)` pairs for the command. `JAVA_TOOL_OPTIONS` keeps the caller's own options
/// (`caller_java_options`) after warden's.
pub fn proxy_env(ep: Endpoints, caller_java_options: Option<&str>) -> Vec<(String, String)> {
    let http = format!("http://127.0.0.1:{}", ep.http_port);
    let socks = format!("socks5h://127.0.0.1:{}", ep.socks_port);
    let no_proxy = "localhost,127.0.0.1,::1,[::1]";
    let mut java = format!(
        "-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort={p} -Dhttps.proxyHost=127.0.0.1 \
         -Dhttps.proxyPort={p} -Dhttp.nonProxyHosts=localhost|127.0.0.1 \
         -Djava.net.useSystemProxies=false",
        p = ep.http_port
    );
    if let Some(own) = caller_java_options.filter(|o| !o.trim().is_empty()) {
        java.push(' ');
        java.push_str(own);
    }
    let pairs: Vec<(&str, String)> = vec![
        ("HTTP_PROXY", http.clone()),
        ("HTTPS_PROXY", http.clone()),
        ("http_proxy", http.clone()),
        ("https_proxy", http.clone()),
        ("ALL_PROXY", socks.clone()),
        ("all_proxy", socks.clone()),
        ("NO_PROXY", no_proxy.to_string()),
        ("no_proxy", no_proxy.to_string()),
        ("FTP_PROXY", http.clone()),
        ("ftp_proxy", http.clone()),
        // rsync takes host:port of an HTTP CONNECT proxy.
        ("RSYNC_PROXY", format!("127.0.0.1:{}", ep.http_port)),
        // Node ≥ 22.? honours the proxy variables in fetch/http when this is set.
        ("NODE_USE_ENV_PROXY", "1".to_string()),
        ("GLOBAL_AGENT_HTTP_PROXY", http.clone()),
        ("GLOBAL_AGENT_HTTPS_PROXY", http.clone()),
        ("GLOBAL_AGENT_NO_PROXY", no_proxy.to_string()),
        // ssh through the SOCKS proxy with OpenBSD netcat (`nc -X 5 -x`).
        (
            "GIT_SSH_COMMAND",
            format!(
                "ssh -o ProxyCommand='nc -X 5 -x 127.0.0.1:{} %h %p'",
                ep.socks_port
            ),
        ),
        ("JAVA_TOOL_OPTIONS", java),
        ("DOCKER_HTTP_PROXY", http.clone()),
        ("DOCKER_HTTPS_PROXY", http.clone()),
        ("CLOUDSDK_PROXY_TYPE", "https".to_string()),
        ("CLOUDSDK_PROXY_ADDRESS", "127.0.0.1".to_string()),
        ("CLOUDSDK_PROXY_PORT", ep.http_port.to_string()),
        ("GRPC_PROXY", http.clone()),
        ("grpc_proxy", http.clone()),
        ("PIP_PROXY", http.clone()),
        ("npm_config_proxy", http.clone()),
        ("npm_config_https_proxy", http),
    ];
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_set_and_listed() {
        let env = proxy_env(Endpoints::default(), None);
        let set: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        for name in NAMES {
            assert!(set.contains(name), "{name} is listed but not set");
        }
        for name in &set {
            assert!(NAMES.contains(name), "{name} is set but not listed");
        }
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("HTTPS_PROXY").as_deref(), Some("http://127.0.0.1:3128"));
        assert_eq!(
            get("ALL_PROXY").as_deref(),
            Some("socks5h://127.0.0.1:1080")
        );
        assert_eq!(get("NODE_USE_ENV_PROXY").as_deref(), Some("1"));
    }

    #[test]
    fn the_callers_java_options_are_kept_after_warden_s() {
        let env = proxy_env(Endpoints::default(), Some("-Xmx1g"));
        let java = env
            .iter()
            .find(|(k, _)| k == "JAVA_TOOL_OPTIONS")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        assert!(java.starts_with("-Dhttp.proxyHost=127.0.0.1"));
        assert!(java.ends_with(" -Xmx1g"));
    }
}

//! The environment of a command in a macOS sandbox (pure, tested on every OS).
//!
//! Like Linux: the caller's environment minus `warden.env.deny`, TMPDIR set to the sandbox's
//! own, the sandbox markers, and with a network the proxy variables, the caller's own proxy
//! variables never passing. Unlike Linux, the proxy listens on host ports any local process
//! could reach, so it requires a per-sandbox token and every proxy URL carries it as
//! credentials: `http://warden:TOKEN@127.0.0.1:PORT`, `socks5h://warden:TOKEN@127.0.0.1:PORT`.

use crate::net::env::{proxy_env, Endpoints, NAMES};
use crate::policy::merge::Policy;
use std::ffi::OsString;
use std::path::Path;

/// The user name in proxy credentials (the proxy checks only the password).
pub const PROXY_USER: &str = "warden";

/// Variables set only on macOS (gcloud takes proxy credentials separately).
pub const EXTRA_NAMES: &[&str] = &["CLOUDSDK_PROXY_USERNAME", "CLOUDSDK_PROXY_PASSWORD"];

/// The proxy variables for `ports`, with `token` as the credentials of every proxy URL.
pub fn proxy_env_with_token(
    ep: Endpoints,
    token: &str,
    caller_java_options: Option<&str>,
) -> Vec<(String, String)> {
    let creds = format!("{PROXY_USER}:{token}@");
    let mut env: Vec<(String, String)> = proxy_env(ep, caller_java_options)
        .into_iter()
        .map(|(k, v)| {
            let v = if k == "RSYNC_PROXY" {
                format!("{creds}{v}")
            } else {
                v.replace("http://127.0.0.1:", &format!("http://{creds}127.0.0.1:"))
                    .replace(
                        "socks5h://127.0.0.1:",
                        &format!("socks5h://{creds}127.0.0.1:"),
                    )
            };
            (k, v)
        })
        .collect();
    env.push(("CLOUDSDK_PROXY_USERNAME".into(), PROXY_USER.into()));
    env.push(("CLOUDSDK_PROXY_PASSWORD".into(), token.into()));
    env
}

/// The command's environment: `caller` filtered, then TMPDIR, the proxy variables (when
/// `proxy` is set: its endpoints and token) and `IS_SANDBOX=1`, `WARDEN_SANDBOX=1`.
pub fn command_env(
    policy: &Policy,
    caller: &[(OsString, OsString)],
    tmpdir: &Path,
    proxy: Option<(Endpoints, &str)>,
) -> Vec<(OsString, OsString)> {
    let deny: Vec<globset::GlobMatcher> = policy
        .env_deny
        .iter()
        .filter_map(|r| {
            globset::Glob::new(&r.pattern)
                .ok()
                .map(|g| g.compile_matcher())
        })
        .collect();
    let mut env: Vec<(OsString, OsString)> = caller
        .iter()
        .filter(|(k, _)| {
            let name = k.to_string_lossy();
            !matches!(name.as_ref(), "TMPDIR" | "IS_SANDBOX" | "WARDEN_SANDBOX")
                && !NAMES.contains(&name.as_ref())
                && !EXTRA_NAMES.contains(&name.as_ref())
                && !deny.iter().any(|m| m.is_match(name.as_ref()))
        })
        .cloned()
        .collect();
    env.push(("TMPDIR".into(), tmpdir.as_os_str().to_owned()));
    if let Some((ep, token)) = proxy {
        let java = caller
            .iter()
            .find(|(k, _)| k == "JAVA_TOOL_OPTIONS")
            .map(|(_, v)| v.to_string_lossy().into_owned());
        for (k, v) in proxy_env_with_token(ep, token, java.as_deref()) {
            env.push((k.into(), v.into()));
        }
    }
    env.push(("IS_SANDBOX".into(), "1".into()));
    env.push(("WARDEN_SANDBOX".into(), "1".into()));
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::merge::test_policy;
    use crate::policy::settings::{EnvSettings, SandboxSettings, WardenSettings};

    fn get<'a>(env: &'a [(OsString, OsString)], k: &str) -> Option<&'a OsString> {
        env.iter().find(|(n, _)| n == k).map(|(_, v)| v)
    }

    #[test]
    fn every_proxy_url_carries_the_token() {
        let env = proxy_env_with_token(
            Endpoints {
                http_port: 50001,
                socks_port: 50002,
            },
            "t0k",
            None,
        );
        let val = |k: &str| {
            env.iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        assert_eq!(val("HTTPS_PROXY"), "http://warden:t0k@127.0.0.1:50001");
        assert_eq!(val("http_proxy"), "http://warden:t0k@127.0.0.1:50001");
        assert_eq!(val("ALL_PROXY"), "socks5h://warden:t0k@127.0.0.1:50002");
        assert_eq!(val("RSYNC_PROXY"), "warden:t0k@127.0.0.1:50001");
        assert_eq!(val("CLOUDSDK_PROXY_PASSWORD"), "t0k");
        for (k, v) in &env {
            if v.contains("://") && !v.contains("nc -X") {
                assert!(v.contains("warden:t0k@"), "{k}={v} has no credentials");
            }
        }
    }

    #[test]
    fn the_callers_proxy_variables_and_denied_names_never_pass() {
        let policy = test_policy(SandboxSettings {
            warden: Some(WardenSettings {
                env: Some(EnvSettings {
                    deny: Some(vec!["AWS_*".into()]),
                }),
                ..Default::default()
            }),
            ..Default::default()
        })
        .unwrap();
        let caller: Vec<(OsString, OsString)> = [
            ("HTTPS_PROXY", "http://corp:8080"),
            ("CLOUDSDK_PROXY_PASSWORD", "corp"),
            ("AWS_SECRET_ACCESS_KEY", "x"),
            ("TMPDIR", "/var/folders/x/T/"),
            ("PATH", "/usr/bin:/bin"),
        ]
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect();
        let env = command_env(
            &policy,
            &caller,
            Path::new("/private/tmp/warden-1"),
            Some((Endpoints::default(), "tok")),
        );
        assert_eq!(get(&env, "PATH").unwrap(), "/usr/bin:/bin");
        assert_eq!(get(&env, "TMPDIR").unwrap(), "/private/tmp/warden-1");
        assert_eq!(
            get(&env, "HTTPS_PROXY").unwrap(),
            "http://warden:tok@127.0.0.1:3128"
        );
        assert_eq!(get(&env, "CLOUDSDK_PROXY_PASSWORD").unwrap(), "tok");
        assert!(get(&env, "AWS_SECRET_ACCESS_KEY").is_none());
        assert_eq!(env.iter().filter(|(k, _)| k == "TMPDIR").count(), 1);
        assert_eq!(get(&env, "IS_SANDBOX").unwrap(), "1");

        let offline = command_env(&policy, &caller, Path::new("/t"), None);
        assert!(get(&offline, "HTTPS_PROXY").is_none());
        assert!(get(&offline, "CLOUDSDK_PROXY_PASSWORD").is_none());
    }
}

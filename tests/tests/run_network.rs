//! `warden run` networking, seen from outside: a sandboxed command reaches the network only
//! through warden's proxies (HTTP at 127.0.0.1:3128, SOCKS5 at 127.0.0.1:1080), only for
//! allowed hosts, never at loopback, link-local or the host's own addresses (also when a name
//! resolves there), and real clients (curl, wget, python, node, git) work through them.
//!
//! Servers live in a network namespace of the test's own ([`TestNet`]), names are mapped to
//! it in /etc/hosts, and every assertion checks what the servers logged (requests, headers,
//! checksums) besides what the command printed. Each test uses its own DNS zone
//! (`nPID-N.test`), so tests and test processes running at once do not share names. Needs
//! root, iproute2, python3, openssl, curl and wget; skips loudly without the first four,
//! fails under CI=true. Node is optional.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test
use serde_json::{json, Value};
use std::io::Read;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use warden_tests::netns::{
    self, bytes_sha256, loopback_http_server, wait_for, HostsEntry, HttpOptions, HttpServer,
    TestNet,
};
use warden_tests::{Output, TestEnv};

/// The raw proxy client run inside the sandbox (see its docstring).
const PROXY_PROBE_PY: &str = include_str!("run_network/proxy_probe.py");
const MIB: u64 = 1024 * 1024;
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// What a refusal by the HTTP proxy carries.
const PROXY_ERROR: &str = "X-Proxy-Error";
const BLOCKED_BY_ALLOWLIST: &str = "blocked-by-allowlist";
/// SOCKS5 reply "connection not allowed by ruleset".
const SOCKS_NOT_ALLOWED: u64 = 2;

/// Proxy variables of the caller's environment, removed so only warden's reach the command.
const PROXY_VARS: [&str; 8] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

// ---------------------------------------------------------------------------------------------
// The world of one test

/// One test's sandbox environment, namespace and host names. Fields drop in order: the
/// /etc/hosts lines first, then the namespace, then the environment.
struct World {
    names: Vec<HostsEntry>,
    net: TestNet,
    env: TestEnv,
    zone: String,
    probes: AtomicU32,
}

impl World {
    /// `None` (after a loud notice) when the machine lacks a prerequisite outside CI.
    fn new(test: &str) -> Option<World> {
        static ZONE: AtomicU32 = AtomicU32::new(0);
        let net = TestNet::or_skip(test)?;
        let env = TestEnv::new();
        std::fs::write(env.project().join("proxy_probe.py"), PROXY_PROBE_PY).unwrap();
        let zone = format!(
            "n{}-{}.test",
            std::process::id(),
            ZONE.fetch_add(1, Ordering::Relaxed)
        );
        Some(World {
            names: Vec::new(),
            net,
            env,
            zone,
            probes: AtomicU32::new(0),
        })
    }

    /// `LABEL.ZONE`, this test's own name for `label` (not mapped).
    fn name(&self, label: &str) -> String {
        format!("{label}.{}", self.zone)
    }

    /// Maps `LABEL.ZONE` to the namespace in /etc/hosts; returns the name.
    fn map(&mut self, label: &str) -> String {
        let name = self.name(label);
        self.names.push(self.net.host_name(&name));
        name
    }

    /// Maps the full name `name` (outside the zone) to the namespace.
    fn map_full(&mut self, name: &str) -> String {
        self.names.push(self.net.host_name(name));
        name.to_string()
    }

    /// Maps `LABEL.ZONE` to `addr` in /etc/hosts; returns the name.
    fn map_to(&mut self, label: &str, addr: IpAddr) -> String {
        let name = self.name(label);
        self.names.push(HostsEntry::add(addr, &name));
        name
    }

    /// The net's CA certificate, copied into the project; its path.
    fn ca(&self) -> String {
        let path = self.env.project().join("ca.pem");
        std::fs::copy(self.net.ca_cert(), &path).unwrap();
        path.display().to_string()
    }

    fn project_file(&self, name: &str) -> PathBuf {
        self.env.project().join(name)
    }

    /// `warden run ARGS -- sh -c SCRIPT` in the project directory, killed after `timeout`.
    fn run_for(&self, args: &[String], script: &str, timeout: Duration) -> Output {
        let mut cmd = self.env.command();
        cmd.arg("run")
            .args(args)
            .args(["--", "sh", "-c", script])
            .stdin(Stdio::null());
        for var in PROXY_VARS {
            cmd.env_remove(var);
        }
        run_with_timeout(cmd, timeout)
    }

    fn run(&self, args: &[String], script: &str) -> Output {
        self.run_for(args, script, DEFAULT_TIMEOUT)
    }

    /// Runs `probes` (see proxy_probe.py) in one sandbox; one result per probe.
    fn probe(&self, args: &[String], probes: &[Value]) -> Vec<Value> {
        let n = self.probes.fetch_add(1, Ordering::Relaxed);
        let file = format!("probes-{n}.json");
        std::fs::write(
            self.project_file(&file),
            Value::from(probes.to_vec()).to_string(),
        )
        .unwrap();
        let script = format!("{} proxy_probe.py {file}", netns::python3().display());
        let out = self.run(args, &script);
        let results: Vec<Value> = serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "proxy_probe.py printed no JSON ({e}); exit {}\nstdout:\n{}\nstderr:\n{}",
                out.code, out.stdout, out.stderr
            )
        });
        assert_eq!(results.len(), probes.len(), "{out:?}");
        results
    }
}

/// Runs `cmd`, collecting its output; kills it and panics after `timeout`.
fn run_with_timeout(mut cmd: Command, timeout: Duration) -> Output {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let reader = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let stdout = reader(Box::new(child.stdout.take().unwrap()));
    let stderr = reader(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    let Some(status) = status else {
        panic!("timed out after {timeout:?}: {cmd:?}\nstdout:\n{stdout}\nstderr:\n{stderr}");
    };
    Output {
        code: status.code().unwrap_or(-1),
        stdout,
        stderr,
    }
}

/// `--allow-domain` for each pattern.
fn allow(patterns: &[&str]) -> Vec<String> {
    patterns
        .iter()
        .flat_map(|p| ["--allow-domain".to_string(), p.to_string()])
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Probes and their assertions

fn http_probe(url: &str) -> Value {
    json!({"kind": "http", "url": url})
}

fn connect_probe(target: &str) -> Value {
    json!({"kind": "connect", "target": target})
}

/// CONNECT, then a plain HTTP GET of `path` through the tunnel.
fn connect_get_probe(target: &str, host: &str, path: &str) -> Value {
    let send = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    json!({"kind": "connect", "target": target, "send": send})
}

fn socks_probe(host: &str, port: u16, atyp: &str) -> Value {
    json!({"kind": "socks", "host": host, "port": port, "atyp": atyp})
}

/// SOCKS5 CONNECT to a name, then a plain HTTP GET of `path`.
fn socks_get_probe(host: &str, port: u16, path: &str) -> Value {
    let send = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    json!({"kind": "socks", "host": host, "port": port, "atyp": "domain", "send": send})
}

fn header<'a>(r: &'a Value, name: &str) -> Option<&'a str> {
    r["headers"].as_array()?.iter().find_map(|h| {
        h[0].as_str()
            .filter(|k| k.eq_ignore_ascii_case(name))
            .and(h[1].as_str())
    })
}

fn status(r: &Value) -> u64 {
    r["status"].as_u64().unwrap_or(0)
}

/// The HTTP proxy answered 200 (the request or tunnel went through).
fn assert_passed(r: &Value) {
    assert_eq!(status(r), 200, "expected 200: {r:#}");
}

/// The HTTP proxy refused: 403 with an `X-Proxy-Error` header (any reason).
fn assert_refused(r: &Value) {
    assert_eq!(status(r), 403, "expected a 403 refusal: {r:#}");
    assert!(
        header(r, PROXY_ERROR).is_some(),
        "403 without {PROXY_ERROR}: {r:#}"
    );
}

/// The HTTP proxy refused by policy: 403, `X-Proxy-Error: blocked-by-allowlist`, and the body
/// names the host.
fn assert_blocked(r: &Value, host: &str) {
    assert_eq!(status(r), 403, "expected a 403 refusal: {r:#}");
    assert_eq!(header(r, PROXY_ERROR), Some(BLOCKED_BY_ALLOWLIST), "{r:#}");
    let body = r["body"].as_str().unwrap_or_default().to_ascii_lowercase();
    assert!(
        body.contains(&host.to_ascii_lowercase()),
        "the refusal does not name {host}: {r:#}"
    );
}

fn assert_socks_passed(r: &Value) {
    assert_eq!(r["method"], 0, "SOCKS greeting refused: {r:#}");
    assert_eq!(r["reply"], 0, "expected SOCKS success: {r:#}");
}

/// The SOCKS proxy refused the connection (any failure reply, not success).
fn assert_socks_refused(r: &Value) {
    assert!(
        r["reply"].as_u64().is_some_and(|c| c != 0),
        "expected a SOCKS failure reply: {r:#}"
    );
}

/// The SOCKS proxy refused by policy: reply 2.
fn assert_socks_blocked(r: &Value) {
    assert_eq!(
        r["reply"], SOCKS_NOT_ALLOWED,
        "expected SOCKS reply 2: {r:#}"
    );
}

/// The paths `server` was asked for, in order.
fn paths(server: &HttpServer) -> Vec<String> {
    server.requests().into_iter().map(|r| r.path).collect()
}

fn assert_untouched(server: &HttpServer, what: &str) {
    let reqs = server.requests();
    assert!(reqs.is_empty(), "{what} received requests: {reqs:#?}");
}

// ---------------------------------------------------------------------------------------------
// Real clients through the proxy

/// `env` in a sandbox, the caller's proxy variables all set to a decoy; the variables seen.
fn sandbox_env(env: &TestEnv, args: &[&str]) -> Vec<String> {
    let mut cmd = env.command();
    cmd.arg("run")
        .args(args)
        .args(["--", "env"])
        .stdin(Stdio::null());
    for var in PROXY_VARS {
        cmd.env(var, "http://caller-proxy.invalid:1");
    }
    let out = run_with_timeout(cmd, DEFAULT_TIMEOUT);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        !out.stdout.contains("caller-proxy.invalid"),
        "the caller's proxy variables reached the command: {out:?}"
    );
    out.stdout.lines().map(str::to_string).collect()
}

#[test]
fn the_command_gets_the_proxy_environment() {
    let env = TestEnv::new();
    let vars = sandbox_env(&env, &["--allow-domain", "example.test"]);
    for expected in [
        "HTTP_PROXY=http://127.0.0.1:3128",
        "HTTPS_PROXY=http://127.0.0.1:3128",
        "http_proxy=http://127.0.0.1:3128",
        "https_proxy=http://127.0.0.1:3128",
        "ALL_PROXY=socks5h://127.0.0.1:1080",
    ] {
        assert!(
            vars.iter().any(|v| v == expected),
            "missing {expected}: {vars:?}"
        );
    }
    let no_proxy = vars
        .iter()
        .find_map(|v| v.strip_prefix("NO_PROXY="))
        .unwrap_or_else(|| panic!("no NO_PROXY: {vars:?}"));
    let entries: Vec<&str> = no_proxy.split(',').collect();
    for local in ["localhost", "127.0.0.1", "::1"] {
        assert!(
            entries.contains(&local),
            "NO_PROXY={no_proxy} lacks {local}"
        );
    }

    // Without an allowed domain there is no network, hence no proxy to point at.
    let vars = sandbox_env(&env, &[]);
    let proxies: Vec<&String> = vars
        .iter()
        .filter(|v| PROXY_VARS.iter().any(|p| v.starts_with(&format!("{p}="))))
        .collect();
    assert!(
        proxies.is_empty(),
        "proxy variables without a network: {proxies:?}"
    );
}

#[test]
fn curl_reaches_an_allowed_host_over_http_and_https() {
    let Some(mut w) = World::new("curl_reaches_an_allowed_host_over_http_and_https") else {
        return;
    };
    let host = w.map("www");
    let http = w.net.http_server();
    let https = w.net.https_server(&[&host]);
    let ca = w.ca();
    let script = format!(
        "curl -sS --max-time 30 http://{host}/curl-http && \
         curl -sS --max-time 30 --cacert {ca} https://{host}/curl-https && \
         curl -sS --max-time 30 --cacert {ca} --proxy socks5h://127.0.0.1:1080 https://{host}/curl-socks"
    );
    let out = w.run(&allow(&[&host]), &script);
    assert_eq!(out.code, 0, "{out:?}");
    for path in ["/curl-http", "/curl-https", "/curl-socks"] {
        let line = format!("hello from warden-tests host={host} path={path}");
        assert!(out.stdout.contains(&line), "no {line:?} in {out:?}");
    }

    // The server saw origin-form requests from the host side of the veth (the sandbox has no
    // route there: the proxy made them), with the right Host header and TLS where asked.
    let plain = http.requests();
    assert_eq!(paths(&http), ["/curl-http"], "{plain:#?}");
    assert_eq!(plain[0].header("host"), Some(host.as_str()));
    assert_eq!(plain[0].client, w.net.host_v4().to_string());
    assert!(plain[0]
        .header("user-agent")
        .is_some_and(|ua| ua.starts_with("curl/")));
    let tls = https.requests();
    assert_eq!(paths(&https), ["/curl-https", "/curl-socks"], "{tls:#?}");
    assert!(tls
        .iter()
        .all(|r| r.tls && r.header("host") == Some(host.as_str())));
}

#[test]
fn proxy_credentials_and_hop_by_hop_headers_do_not_reach_the_server() {
    let Some(mut w) =
        World::new("proxy_credentials_and_hop_by_hop_headers_do_not_reach_the_server")
    else {
        return;
    };
    let host = w.map("www");
    let http = w.net.http_server();
    let secret = "s3cret-proxy-token";
    let script = format!(
        "curl -sS --max-time 30 --proxy-user agent:{secret} -H 'Proxy-Connection: keep-alive' \
         -H 'X-Kept: yes' http://{host}/echo"
    );
    let out = w.run(&allow(&[&host]), &script);
    assert_eq!(out.code, 0, "{out:?}");
    let reqs = http.requests();
    assert_eq!(reqs.len(), 1, "{reqs:#?}");
    let r = &reqs[0];
    assert_eq!(
        r.header("x-kept"),
        Some("yes"),
        "end-to-end headers must pass: {r:#?}"
    );
    for hop in ["proxy-authorization", "proxy-connection"] {
        assert!(r.header(hop).is_none(), "{hop} reached the server: {r:#?}");
    }
    assert!(
        !r.raw.to_string().contains(secret),
        "the proxy credentials leaked: {r:#?}"
    );
    assert!(
        !out.stdout.contains(secret),
        "the server echoed the credentials: {out:?}"
    );
}

#[test]
fn wget_and_python_urllib_go_through_the_proxy() {
    let Some(mut w) = World::new("wget_and_python_urllib_go_through_the_proxy") else {
        return;
    };
    let host = w.map("www");
    let http = w.net.http_server();
    let https = w.net.https_server(&[&host]);
    let ca = w.ca();
    let py = netns::python3();
    let script = format!(
        "wget -q --no-hsts -O - http://{host}/wget-http && \
         wget -q --no-hsts --ca-certificate={ca} -O - https://{host}/wget-https && \
         {py} -c 'import ssl, urllib.request as u\n\
print(u.urlopen(\"http://{host}/py-http\", timeout=30).read().decode())\n\
ctx = ssl.create_default_context(cafile=\"{ca}\")\n\
print(u.urlopen(\"https://{host}/py-https\", timeout=30, context=ctx).read().decode())'",
        py = py.display()
    );
    let out = w.run(&allow(&[&host]), &script);
    assert_eq!(out.code, 0, "{out:?}");
    for path in ["/wget-http", "/wget-https", "/py-http", "/py-https"] {
        assert!(
            out.stdout.contains(&format!("path={path}")),
            "no {path}: {out:?}"
        );
    }
    let agent = |server: &HttpServer, path: &str| {
        server
            .requests()
            .into_iter()
            .find(|r| r.path == path)
            .and_then(|r| r.header("user-agent").map(str::to_string))
            .unwrap_or_else(|| panic!("{path} did not reach the server"))
    };
    assert!(agent(&http, "/wget-http").starts_with("Wget/"));
    assert!(agent(&https, "/wget-https").starts_with("Wget/"));
    assert!(agent(&http, "/py-http").starts_with("Python-urllib/"));
    assert!(agent(&https, "/py-https").starts_with("Python-urllib/"));
}

/// Node honours HTTP(S)_PROXY with NODE_USE_ENV_PROXY=1 from 22.21 and 24 on.
/// A node that honours `NODE_USE_ENV_PROXY` (≥ 22.21 or ≥ 24): `WARDEN_TEST_NODE`, the one
/// `cargo xtask setup` installs into target/test-tools/node, or `node` on PATH.
fn node_with_env_proxy() -> Option<(String, String)> {
    let installed = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()?
        .join("target/test-tools/node/node_modules/.bin/node");
    let candidates = [
        std::env::var("WARDEN_TEST_NODE").ok(),
        Some(installed.display().to_string()),
        Some("node".to_string()),
    ];
    candidates.into_iter().flatten().find_map(|node| {
        let out = Command::new(&node).arg("--version").output().ok()?;
        let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let mut parts = version.trim_start_matches('v').split('.');
        let major: u32 = parts.next()?.parse().ok()?;
        let minor: u32 = parts.next()?.parse().ok()?;
        (major >= 24 || (major == 22 && minor >= 21)).then_some((node, version))
    })
}

#[test]
fn node_fetch_goes_through_the_proxy() {
    let Some((node, version)) = node_with_env_proxy() else {
        let why = "no node >= 22.21 (NODE_USE_ENV_PROXY): run `cargo xtask setup`, which \
                   installs one into target/test-tools/node, or set WARDEN_TEST_NODE";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("node_fetch_goes_through_the_proxy: {why}");
        }
        eprintln!("\n*** SKIPPED node_fetch_goes_through_the_proxy: {why} ***\n");
        return;
    };
    let Some(mut w) = World::new("node_fetch_goes_through_the_proxy") else {
        return;
    };
    let host = w.map("www");
    let http = w.net.http_server();
    let https = w.net.https_server(&[&host]);
    let ca = w.ca();
    let js = format!(
        "(async () => {{ for (const u of ['http://{host}/node-http', 'https://{host}/node-https']) \
         {{ const r = await fetch(u); console.log(r.status, await r.text()); }} }})()\
         .catch(e => {{ console.error(e); process.exit(1); }})"
    );
    let script = format!("NODE_USE_ENV_PROXY=1 NODE_EXTRA_CA_CERTS={ca} {node} -e \"{js}\"");
    let out = w.run(&allow(&[&host]), &script);
    assert_eq!(out.code, 0, "node {version}: {out:?}");
    assert!(
        out.stdout.contains("200 hello from warden-tests"),
        "{out:?}"
    );
    assert_eq!(paths(&http), ["/node-http"]);
    assert_eq!(paths(&https), ["/node-https"]);
}

#[test]
fn git_clones_over_http_and_https() {
    let Some(mut w) = World::new("git_clones_over_http_and_https") else {
        return;
    };
    let host = w.map("git");
    // A one-commit repository, bare, prepared for git's dumb HTTP protocol.
    let root = w.net.dir().join("static");
    let work = w.net.dir().join("work");
    let marker = format!("cloned through warden {}", w.zone);
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("README"), &marker).unwrap();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    let (w_dir, bare) = (work.display().to_string(), root.join("repo.git"));
    git(&["init", "-q", &w_dir]);
    git(&["-C", &w_dir, "add", "README"]);
    git(&["-C", &w_dir, "commit", "-q", "-m", "one"]);
    git(&["clone", "-q", "--bare", &w_dir, bare.to_str().unwrap()]);
    git(&["-C", bare.to_str().unwrap(), "update-server-info"]);

    let http = w.net.http_server_with(HttpOptions {
        static_dir: Some(root.clone()),
        ..Default::default()
    });
    let https = w.net.http_server_with(HttpOptions {
        static_dir: Some(root),
        tls_names: Some(vec![host.clone()]),
        ..Default::default()
    });
    let ca = w.ca();
    let script = format!(
        "git clone -q http://{host}/static/repo.git via-http && \
         GIT_SSL_CAINFO={ca} git clone -q https://{host}/static/repo.git via-https"
    );
    let out = w.run(&allow(&[&host]), &script);
    assert_eq!(out.code, 0, "{out:?}");
    for dir in ["via-http", "via-https"] {
        let readme = std::fs::read_to_string(w.project_file(dir).join("README"));
        assert_eq!(
            readme.ok().as_deref(),
            Some(marker.as_str()),
            "{dir}: {out:?}"
        );
    }
    for server in [&http, &https] {
        let p = paths(server);
        assert!(
            p.iter()
                .any(|p| p.starts_with("/static/repo.git/info/refs")),
            "{} saw no ref discovery: {p:?}",
            server.scheme()
        );
        assert!(
            p.iter().any(|p| p.contains("/objects/")),
            "no object fetched: {p:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// What must not get through

#[test]
fn a_client_that_ignores_the_proxy_reaches_nothing() {
    let Some(mut w) = World::new("a_client_that_ignores_the_proxy_reaches_nothing") else {
        return;
    };
    let host = w.map("www");
    let http = w.net.http_server();
    let ns = w.net.ns_v4();
    let script = format!(
        "curl -sS --noproxy '*' --max-time 5 http://{host}/direct-name; echo \"rc=$?\"; \
         curl -sS --noproxy '*' --max-time 5 http://{ns}/direct-ip; echo \"rc=$?\"; \
         curl -sS --max-time 30 http://{host}/through-proxy; echo \"rc=$?\""
    );
    let out = w.run(&allow(&[&host]), &script);
    let rcs: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("rc="))
        .collect();
    assert_eq!(rcs.len(), 3, "{out:?}");
    assert_ne!(
        rcs[0], "rc=0",
        "a direct connection by name succeeded: {out:?}"
    );
    assert_ne!(
        rcs[1], "rc=0",
        "a direct connection by address succeeded: {out:?}"
    );
    assert_eq!(
        rcs[2], "rc=0",
        "the same host through the proxy failed: {out:?}"
    );
    assert_eq!(
        paths(&http),
        ["/through-proxy"],
        "a direct request reached the server"
    );
}

#[test]
fn direct_tcp_and_udp_bypassing_the_proxy_fail() {
    let Some(w) = World::new("direct_tcp_and_udp_bypassing_the_proxy_fail") else {
        return;
    };
    let servers = [
        w.net.tcp_echo_server(),
        w.net.udp_echo_server(),
        w.net.host_side_tcp_echo_server(),
        w.net.host_side_udp_echo_server(),
    ];
    let kinds = ["tcp", "udp", "tcp", "udp"];
    let mut probes: Vec<Value> = servers
        .iter()
        .zip(kinds)
        .map(|(s, kind)| {
            json!({"kind": kind, "host": s.addr().ip().to_string(), "port": s.port(), "send": "direct"})
        })
        .collect();
    if let Some(v6) = w.net.ns_v6() {
        for kind in ["tcp", "udp"] {
            probes
                .push(json!({"kind": kind, "host": v6.to_string(), "port": 7, "send": "direct6"}));
        }
    }
    let results = w.probe(&[], &probes);
    for r in &results {
        assert!(
            r["data"].is_null() && !r["error"].is_null(),
            "a direct {} exchange got through: {r:#}",
            r["probe"]["kind"]
        );
    }
    std::thread::sleep(Duration::from_millis(500)); // a datagram in flight would be logged by now
    for s in &servers {
        let events = s.events();
        assert!(events.is_empty(), "{} received {events:?}", s.addr());
    }
}

#[test]
fn a_host_that_is_not_allowed_is_refused_and_named() {
    let Some(mut w) = World::new("a_host_that_is_not_allowed_is_refused_and_named") else {
        return;
    };
    let (good, other) = (w.map("www"), w.map("other"));
    let http = w.net.http_server();
    let https = w.net.https_server(&[&good, &other]);
    let ca = w.ca();
    let args = allow(&[&good]);
    let results = w.probe(
        &args,
        &[
            http_probe(&format!("http://{other}/denied")),
            connect_probe(&format!("{other}:443")),
            socks_probe(&other, 80, "domain"),
            http_probe(&format!("http://{good}/control")),
        ],
    );
    assert_blocked(&results[0], &other);
    assert_blocked(&results[1], &other);
    assert_socks_blocked(&results[2]);
    assert_passed(&results[3]);

    // What ordinary clients see.
    let script = format!(
        "curl -s -o /dev/null -w 'http=%{{http_code}}\\n' http://{other}/curl-denied; \
         curl -s -o /dev/null -w 'connect=%{{http_connect}}\\n' --cacert {ca} https://{other}/curl-denied; \
         curl -s -o /dev/null -w 'socks=%{{http_code}}\\n' --proxy socks5h://127.0.0.1:1080 http://{other}/curl-denied; \
         echo socks-rc=$?"
    );
    let out = w.run(&args, &script);
    assert!(out.stdout.contains("http=403"), "{out:?}");
    assert!(out.stdout.contains("connect=403"), "{out:?}");
    assert!(!out.stdout.contains("socks-rc=0"), "{out:?}");

    assert_eq!(paths(&http), ["/control"]);
    assert_untouched(&https, "the HTTPS server");
}

#[test]
fn wildcards_cover_subdomains_not_the_apex_and_denied_subdomains_win() {
    let Some(mut w) =
        World::new("wildcards_cover_subdomains_not_the_apex_and_denied_subdomains_win")
    else {
        return;
    };
    let (www, deep, bad, apex) = (
        w.map("www.wild"),
        w.map("a.b.wild"),
        w.map("bad.wild"),
        w.map("wild"),
    );
    let http = w.net.http_server();
    let settings = w.env.write_settings(
        "net.json",
        &format!(
            r#"{{"network": {{"allowedDomains": ["*.wild.{zone}"], "deniedDomains": ["bad.wild.{zone}"]}}}}"#,
            zone = w.zone
        ),
    );
    let args = vec!["--settings".to_string(), settings.display().to_string()];
    let mut probes = Vec::new();
    for (label, host) in [
        ("www", &www),
        ("deep", &deep),
        ("bad", &bad),
        ("apex", &apex),
    ] {
        probes.push(http_probe(&format!("http://{host}/http-{label}")));
        probes.push(connect_get_probe(
            &format!("{host}:80"),
            host,
            &format!("/connect-{label}"),
        ));
        probes.push(socks_get_probe(host, 80, &format!("/socks-{label}")));
    }
    let r = w.probe(&args, &probes);
    for i in [0, 3] {
        assert_passed(&r[i]);
        assert_passed(&r[i + 1]);
        assert_socks_passed(&r[i + 2]);
    }
    for (i, host) in [(6, &bad), (9, &apex)] {
        assert_blocked(&r[i], host);
        assert_blocked(&r[i + 1], host);
        assert_socks_blocked(&r[i + 2]);
    }
    let mut got = paths(&http);
    got.sort();
    assert_eq!(
        got,
        [
            "/connect-deep",
            "/connect-www",
            "/http-deep",
            "/http-www",
            "/socks-deep",
            "/socks-www"
        ]
    );
}

#[test]
fn case_trailing_dot_and_port_variants() {
    let Some(mut w) = World::new("case_trailing_dot_and_port_variants") else {
        return;
    };
    let (www, ported) = (w.map("www"), w.map("ported"));
    let on80 = w.net.http_server();
    let on8080 = w.net.http_server_with(HttpOptions {
        port: Some(8080),
        ..Default::default()
    });
    let upper = www.to_ascii_uppercase();
    let mixed: String = www
        .chars()
        .enumerate()
        .map(|(i, c)| {
            if i % 2 == 0 {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect();
    let args = allow(&[&www, &format!("{ported}:8080")]);
    let r = w.probe(
        &args,
        &[
            http_probe(&format!("http://{upper}/upper")),
            http_probe(&format!("http://{mixed}/mixed")),
            http_probe(&format!("http://{www}./dot")),
            http_probe(&format!("http://{www}:80/port80")),
            http_probe(&format!("http://{www}:8080/www8080")),
            http_probe(&format!("http://{ported}:8080/ported8080")),
            connect_get_probe(&format!("{upper}.:80"), &www, "/connect-upper-dot"),
            socks_get_probe(&format!("{mixed}."), 8080, "/socks-mixed-dot"),
            // The port-restricted pattern allows no other port.
            http_probe(&format!("http://{ported}/ported80")),
            connect_probe(&format!("{ported}:80")),
            socks_probe(&ported, 80, "domain"),
        ],
    );
    for x in &r[..7] {
        assert_passed(x);
    }
    assert_socks_passed(&r[7]);
    assert_blocked(&r[8], &ported);
    assert_blocked(&r[9], &ported);
    assert_socks_blocked(&r[10]);
    let mut p80 = paths(&on80);
    p80.sort();
    assert_eq!(
        p80,
        ["/connect-upper-dot", "/dot", "/mixed", "/port80", "/upper"]
    );
    let mut p8080 = paths(&on8080);
    p8080.sort();
    assert_eq!(p8080, ["/ported8080", "/socks-mixed-dot", "/www8080"]);
}

#[test]
fn suffix_confusion_is_refused() {
    let Some(mut w) = World::new("suffix_confusion_is_refused") else {
        return;
    };
    let allowed = w.map("allowed");
    let evil_prefix = w.map("evilallowed");
    let evil_suffix = w.map_full(&format!("{allowed}.evil.test"));
    let sub = w.map("sub.allowed");
    let http = w.net.http_server();
    let mut probes = vec![http_probe(&format!("http://{allowed}/control"))];
    let refused = [&evil_prefix, &evil_suffix, &sub];
    for host in refused {
        probes.push(http_probe(&format!("http://{host}/confused")));
        probes.push(connect_probe(&format!("{host}:80")));
        probes.push(socks_probe(host, 80, "domain"));
    }
    // An allowed name smuggled into the Host header of a request for another host.
    probes.push(
        json!({"kind": "http", "url": format!("http://{evil_prefix}/smuggled"), "host": allowed}),
    );
    let r = w.probe(&allow(&[&allowed]), &probes);
    assert_passed(&r[0]);
    for (i, host) in refused.iter().enumerate() {
        assert_blocked(&r[1 + 3 * i], host);
        assert_blocked(&r[2 + 3 * i], host);
        assert_socks_blocked(&r[3 + 3 * i]);
    }
    // Refused as a bad request (400) or by policy (403), never forwarded.
    let last = r.last().unwrap();
    assert!(matches!(status(last), 400 | 403), "{last:#}");
    assert!(header(last, PROXY_ERROR).is_some(), "{last:#}");
    assert_eq!(paths(&http), ["/control"]);
}

/// Spellings of 127.0.0.1 and 169.254.169.254 that `inet_aton` accepts.
const LOOPBACK_SPELLINGS: [&str; 7] = [
    "127.0.0.1",
    "2130706433",
    "0x7f000001",
    "0177.0.0.1",
    "127.1",
    "0x7f.0.0.1",
    "127.0.1",
];
const METADATA_SPELLINGS: [&str; 5] = [
    "169.254.169.254",
    "2851995470",
    "0xa9fea9fe",
    "0251.0376.0251.0376",
    "169.254.43518",
];

#[test]
fn ip_literals_for_loopback_and_metadata_are_refused_by_both_proxies() {
    let Some(mut w) =
        World::new("ip_literals_for_loopback_and_metadata_are_refused_by_both_proxies")
    else {
        return;
    };
    let www = w.map("www");
    let http = w.net.http_server();
    let lo = loopback_http_server();
    let port = lo.port();
    let mut probes = vec![http_probe(&format!("http://{www}/control"))];
    let mut refused_http = Vec::new();
    let mut refused_socks = Vec::new();
    let mut push = |probes: &mut Vec<Value>, p: Value, socks: bool| {
        if socks {
            refused_socks.push(probes.len());
        } else {
            refused_http.push(probes.len());
        }
        probes.push(p);
    };
    for (spelling, port) in LOOPBACK_SPELLINGS
        .iter()
        .map(|s| (*s, port))
        .chain(METADATA_SPELLINGS.iter().map(|s| (*s, 80)))
        .chain([
            ("[::1]", port),
            ("[::ffff:127.0.0.1]", port),
            ("[::ffff:7f00:1]", port),
        ])
    {
        push(
            &mut probes,
            http_probe(&format!("http://{spelling}:{port}/literal")),
            false,
        );
        push(
            &mut probes,
            connect_probe(&format!("{spelling}:{port}")),
            false,
        );
        let bare = spelling.trim_start_matches('[').trim_end_matches(']');
        push(&mut probes, socks_probe(bare, port, "domain"), true);
    }
    push(&mut probes, socks_probe("127.0.0.1", port, "ipv4"), true);
    push(
        &mut probes,
        socks_probe("169.254.169.254", 80, "ipv4"),
        true,
    );
    push(&mut probes, socks_probe("::1", port, "ipv6"), true);
    push(
        &mut probes,
        socks_probe("::ffff:127.0.0.1", port, "ipv6"),
        true,
    );
    // The namespace's own address is private, but not allowed unless listed.
    let ns = w.net.ns_v4().to_string();
    push(
        &mut probes,
        http_probe(&format!("http://{ns}/not-listed")),
        false,
    );
    push(&mut probes, socks_probe(&ns, 80, "ipv4"), true);

    let r = w.probe(&allow(&[&www]), &probes);
    assert_passed(&r[0]);
    for &i in &refused_http {
        assert_refused(&r[i]);
    }
    for &i in &refused_socks {
        assert_socks_refused(&r[i]);
    }
    assert_untouched(&lo, "the host's loopback server");
    assert_eq!(paths(&http), ["/control"]);
}

#[test]
fn an_allowed_private_address_literal_is_reachable() {
    let Some(w) = World::new("an_allowed_private_address_literal_is_reachable") else {
        return;
    };
    let http = w.net.http_server();
    let ns = w.net.ns_v4().to_string();
    let r = w.probe(
        &allow(&[&ns]),
        &[
            http_probe(&format!("http://{ns}/private-literal")),
            connect_get_probe(&format!("{ns}:80"), &ns, "/private-connect"),
            json!({"kind": "socks", "host": ns, "port": 80, "atyp": "ipv4",
                   "send": format!("GET /private-socks HTTP/1.1\r\nHost: {ns}\r\nConnection: close\r\n\r\n")}),
        ],
    );
    assert_passed(&r[0]);
    assert_passed(&r[1]);
    assert!(
        r[1]["data"]
            .as_str()
            .unwrap_or_default()
            .starts_with("HTTP/1.1 200"),
        "{:#}",
        r[1]
    );
    assert_socks_passed(&r[2]);
    assert!(
        r[2]["data"]
            .as_str()
            .unwrap_or_default()
            .starts_with("HTTP/1.1 200"),
        "{:#}",
        r[2]
    );
    assert_eq!(
        paths(&http),
        ["/private-literal", "/private-connect", "/private-socks"]
    );
}

#[test]
fn dns_rebinding_to_loopback_link_local_or_the_host_is_refused() {
    let Some(mut w) = World::new("dns_rebinding_to_loopback_link_local_or_the_host_is_refused")
    else {
        return;
    };
    let www = w.map("www");
    let http = w.net.http_server();
    let lo = loopback_http_server();
    let host_side = w.net.host_side_http_server();
    let rebind = w.map_to("rebind", "127.0.0.1".parse().unwrap());
    let rebind6 = w.map_to("rebind6", "::1".parse().unwrap());
    let meta = w.map_to("meta", "169.254.169.254".parse().unwrap());
    let own = w.map_to("own", IpAddr::V4(w.net.host_v4()));
    let targets = [
        (&rebind, lo.port()),
        (&rebind6, lo.port()),
        (&meta, 80),
        (&own, host_side.port()),
    ];
    let mut probes = vec![http_probe(&format!("http://{www}/control"))];
    for (host, port) in targets {
        probes.push(http_probe(&format!("http://{host}:{port}/rebound")));
        probes.push(connect_probe(&format!("{host}:{port}")));
        probes.push(socks_probe(host, port, "domain"));
    }
    let names: Vec<&str> = [&www, &rebind, &rebind6, &meta, &own]
        .map(|s| s.as_str())
        .into();
    let r = w.probe(&allow(&names), &probes);
    assert_passed(&r[0]);
    for i in 0..targets.len() {
        assert_refused(&r[1 + 3 * i]);
        assert_refused(&r[2 + 3 * i]);
        assert_socks_refused(&r[3 + 3 * i]);
    }
    // curl's socks5h path too (the name is resolved by warden, not the client).
    let out = w.run(
        &allow(&names),
        &format!(
            "curl -sS --max-time 10 --proxy socks5h://127.0.0.1:1080 http://{rebind}:{}/curl; echo rc=$?",
            lo.port()
        ),
    );
    assert!(!out.stdout.contains("rc=0"), "{out:?}");
    assert_untouched(&lo, "the host's loopback server");
    assert_untouched(&host_side, "the server on the host's own address");
    assert_eq!(paths(&http), ["/control"]);
}

#[test]
fn a_denied_address_range_holds_for_allowed_names_that_resolve_into_it() {
    let Some(mut w) =
        World::new("a_denied_address_range_holds_for_allowed_names_that_resolve_into_it")
    else {
        return;
    };
    let www = w.map("www");
    let http = w.net.http_server();
    let ns = w.net.ns_v4();
    let range = format!(
        "{}/24",
        std::net::Ipv4Addr::from(u32::from(ns) & 0xffff_ff00)
    );
    let settings = w.env.write_settings(
        "deny-range.json",
        &format!(
            r#"{{"network":{{"allowedDomains":["{www}"],"deniedDomains":["{range}"],
                "deniedDomainReasons":{{"{range}":"the lab network"}}}}}}"#
        ),
    );
    let args = vec!["--settings".to_string(), settings.display().to_string()];
    let probes = vec![
        http_probe(&format!("http://{www}/by-name")),
        connect_probe(&format!("{www}:{}", http.port())),
        socks_probe(&www, http.port(), "domain"),
    ];
    let r = w.probe(&args, &probes);
    assert_refused(&r[0]);
    let body = r[0]["body"].as_str().unwrap_or_default();
    assert!(
        body.contains(&range) && body.contains("the lab network"),
        "{r:#?}"
    );
    assert_refused(&r[1]);
    assert_socks_refused(&r[2]);
    assert_untouched(&http, "the server in the denied range");
}

// ---------------------------------------------------------------------------------------------
// Volume, aborts and concurrency

fn sha256_of_file(path: &std::path::Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn a_64_mib_upload_and_download_keep_their_checksums() {
    let Some(mut w) = World::new("a_64_mib_upload_and_download_keep_their_checksums") else {
        return;
    };
    let host = w.map("bulk");
    let http = w.net.http_server();
    let https = w.net.https_server(&[&host]);
    let ca = w.ca();
    let n = 64 * MIB;
    let script = format!(
        "set -e; head -c {n} /dev/urandom > up.bin; \
         curl -sS --max-time 240 -T up.bin http://{host}/upload > up-http.json; \
         curl -sS --max-time 240 --cacert {ca} -T up.bin https://{host}/upload > up-https.json; \
         curl -sS --max-time 240 -D down-http.headers -o down-http.bin http://{host}/bytes/{n}; \
         curl -sS --max-time 240 --cacert {ca} -D down-https.headers -o down-https.bin https://{host}/bytes/{n}"
    );
    let out = w.run_for(&allow(&[&host]), &script, Duration::from_secs(600));
    assert_eq!(out.code, 0, "{out:?}");

    let sent = sha256_of_file(&w.project_file("up.bin"));
    for (server, reply) in [(&http, "up-http.json"), (&https, "up-https.json")] {
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(w.project_file(reply)).unwrap()).unwrap();
        assert_eq!(v["sha256"], sent.as_str(), "{reply}: {v}");
        assert_eq!(v["length"], n);
        let put = server
            .requests()
            .into_iter()
            .find(|r| r.method == "PUT")
            .unwrap();
        assert_eq!(put.body_len, Some(n));
        assert_eq!(put.body_sha256.as_deref(), Some(sent.as_str()));
    }
    let want = bytes_sha256(n);
    for (server, name) in [(&http, "down-http"), (&https, "down-https")] {
        let file = w.project_file(&format!("{name}.bin"));
        assert_eq!(std::fs::metadata(&file).unwrap().len(), n);
        assert_eq!(sha256_of_file(&file), want, "{name} corrupted");
        let headers = std::fs::read_to_string(w.project_file(&format!("{name}.headers"))).unwrap();
        assert!(
            headers
                .to_ascii_lowercase()
                .contains(&format!("x-sha256: {want}")),
            "{headers}"
        );
        let get = server
            .requests()
            .into_iter()
            .find(|r| r.path.starts_with("/bytes/"))
            .unwrap();
        assert_eq!((get.sent, get.complete), (Some(n), Some(true)));
        std::fs::remove_file(file).unwrap();
    }
    std::fs::remove_file(w.project_file("up.bin")).unwrap();
}

#[test]
fn an_aborted_transfer_does_not_break_the_next_request() {
    let Some(mut w) = World::new("an_aborted_transfer_does_not_break_the_next_request") else {
        return;
    };
    let host = w.map("abort");
    let http = w.net.http_server();
    let https = w.net.https_server(&[&host]);
    let ca = w.ca();
    let n = 64 * MIB;
    let script = format!(
        "curl -sS --max-time 60 http://{host}/bytes/{n} | head -c 100000 > part-http.bin; \
         curl -sS --max-time 60 --cacert {ca} https://{host}/bytes/{n} | head -c 100000 > part-https.bin; \
         curl -sS --max-time 3 --limit-rate 100k -o /dev/null http://{host}/bytes/{n}; echo timeout-rc=$?; \
         curl -sS --max-time 30 http://{host}/after-abort && \
         curl -sS --max-time 30 --cacert {ca} https://{host}/after-abort-tls"
    );
    let out = w.run(&allow(&[&host]), &script);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("timeout-rc=28"),
        "the slow transfer did not time out: {out:?}"
    );
    assert!(out.stdout.contains("path=/after-abort\n"), "{out:?}");
    assert!(out.stdout.contains("path=/after-abort-tls"), "{out:?}");
    for part in ["part-http.bin", "part-https.bin"] {
        assert_eq!(
            std::fs::metadata(w.project_file(part)).unwrap().len(),
            100_000
        );
    }
    // The proxy closed the upstream side of each aborted transfer: the server saw its writes
    // fail instead of delivering all 64 MiB.
    let aborted = |server: &HttpServer, count: usize| {
        wait_for(Duration::from_secs(20), || {
            let bytes: Vec<_> = server
                .requests()
                .into_iter()
                .filter(|r| r.path.starts_with("/bytes/"))
                .collect();
            (bytes.len() == count && bytes.iter().all(|r| r.complete == Some(false))).then_some(())
        })
        .is_some()
    };
    assert!(
        aborted(&http, 2),
        "upstream transfers not aborted: {:#?}",
        http.requests()
    );
    assert!(
        aborted(&https, 1),
        "upstream transfer not aborted: {:#?}",
        https.requests()
    );
    assert!(paths(&http).contains(&"/after-abort".to_string()));
}

#[test]
fn a_thousand_concurrent_connections_all_succeed() {
    let Some(mut w) = World::new("a_thousand_concurrent_connections_all_succeed") else {
        return;
    };
    let host = w.map("many");
    let http = w.net.http_server();
    // 1000 client connections to the proxy held open at once (a barrier), then one request
    // on each.
    let client = format!(
        r#"
import json, resource, socket, threading
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
threading.stack_size(256 * 1024)
N = 1000
barrier = threading.Barrier(N, timeout=120)
results = [None] * N
def one(i):
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=120)
        barrier.wait()
        s.sendall(("GET http://{host}/c/%d HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n" % i).encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        results[i] = data.split(b"\r\n", 1)[0].decode("latin-1") if b"path=/c/%d\n" % i in data else "bad body: %r" % data[:200]
    except Exception as e:
        results[i] = repr(e)
threads = [threading.Thread(target=one, args=(i,)) for i in range(N)]
for t in threads: t.start()
for t in threads: t.join()
bad = [r for r in results if r != "HTTP/1.1 200 OK"]
print(json.dumps({{"ok": N - len(bad), "bad": bad[:10]}}))
"#
    );
    std::fs::write(w.project_file("many.py"), client).unwrap();
    let script = format!("{} many.py", netns::python3().display());
    let out = w.run_for(&allow(&[&host]), &script, Duration::from_secs(300));
    assert_eq!(out.code, 0, "{out:?}");
    let v: Value =
        serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(v["ok"], 1000, "{v}");
    let mut got = paths(&http);
    got.sort();
    got.dedup();
    assert_eq!(
        got.len(),
        1000,
        "the server saw {} distinct requests",
        got.len()
    );
}

#[test]
fn curl_parallel_fetches_a_thousand_urls() {
    let Some(mut w) = World::new("curl_parallel_fetches_a_thousand_urls") else {
        return;
    };
    let host = w.map("parallel");
    let http = w.net.http_server();
    let https = w.net.https_server(&[&host]);
    let ca = w.ca();
    let mut config = String::new();
    for i in 0..1000 {
        let scheme = if i % 2 == 0 { "http" } else { "https" };
        config.push_str(&format!(
            "url = \"{scheme}://{host}/p/{i}\"\noutput = \"/dev/null\"\n"
        ));
    }
    std::fs::write(w.project_file("urls.cfg"), config).unwrap();
    let script = format!(
        "curl --parallel --parallel-max 100 -sS --max-time 120 --cacert {ca} \
         -w '%{{http_code}}\\n' -K urls.cfg"
    );
    let out = w.run_for(&allow(&[&host]), &script, Duration::from_secs(300));
    assert_eq!(out.code, 0, "{out:?}");
    let codes: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(codes.len(), 1000, "{out:?}");
    assert!(codes.iter().all(|c| *c == "200"), "{codes:?}");
    let mut got: Vec<String> = paths(&http).into_iter().chain(paths(&https)).collect();
    got.sort();
    got.dedup();
    assert_eq!(got.len(), 1000);
}

// ---------------------------------------------------------------------------------------------
// DNS stub, external proxy, parent proxy

#[test]
fn the_stub_resolver_answers_allowed_names_and_refuses_the_rest() {
    let Some(mut w) = World::new("the_stub_resolver_answers_allowed_names_and_refuses_the_rest")
    else {
        return;
    };
    let allowed = w.map("dns-ok");
    let refused = w.map("dns-no");
    let py = netns::python3().display().to_string();
    // getaddrinfo goes through resolv.conf (the stub at 127.0.0.53), not /etc/hosts: the
    // sandbox's /etc/hosts is the host's, so query the stub directly with a raw DNS packet.
    let script = format!(
        r#"cat /etc/resolv.conf; {py} - <<'PY'
import socket, struct
def query(name):
    q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack(">HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(10)
    s.sendto(q, ("127.0.0.53", 53))
    r, _ = s.recvfrom(4096)
    rcode = r[3] & 0xF
    answers = struct.unpack(">H", r[6:8])[0]
    addr = socket.inet_ntoa(r[-4:]) if answers else "-"
    print(name, "rcode", rcode, "answers", answers, "addr", addr)
query("{allowed}")
query("{refused}")
PY"#
    );
    let out = w.run(&allow(&[&allowed]), &script);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("nameserver 127.0.0.53"), "{out:?}");
    let ns = w.net.ns_v4().to_string();
    assert!(
        out.stdout
            .contains(&format!("{allowed} rcode 0 answers 1 addr {ns}")),
        "{out:?}"
    );
    // REFUSED is rcode 5, and the refusal is reported after the run.
    assert!(
        out.stdout.contains(&format!("{refused} rcode 5 answers 0")),
        "{out:?}"
    );
    assert!(
        out.stderr.contains(&format!("blocked {refused}")),
        "{out:?}"
    );
}

/// A stand-in for an external filtering proxy or a corporate parent proxy on the host's
/// loopback: records each connection's first bytes, answers CONNECT with 200 and then
/// relays to `forward_to` (if any), answers anything else with a fixed 200.
struct FakeProxy {
    port: u16,
    heads: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl FakeProxy {
    fn start(forward_to: Option<std::net::SocketAddr>) -> FakeProxy {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = heads.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let log = log.clone();
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut head = String::new();
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                            break;
                        }
                        head.push_str(&line);
                    }
                    log.lock().unwrap().push(head.clone());
                    let mut out = stream;
                    if head.starts_with("CONNECT ") {
                        let Some(target) = forward_to else { return };
                        let up = std::net::TcpStream::connect(target).unwrap();
                        out.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                            .unwrap();
                        let (mut a, mut b) = (out.try_clone().unwrap(), up.try_clone().unwrap());
                        std::thread::spawn(move || std::io::copy(&mut b, &mut a));
                        let mut up = up;
                        let _ = std::io::copy(&mut reader, &mut up);
                    } else {
                        let _ = out.write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 14\r\nConnection: close\r\n\r\nfrom-the-fake\n",
                        );
                    }
                });
            }
        });
        FakeProxy { port, heads }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

#[test]
fn http_proxy_port_hands_the_sandboxs_proxy_traffic_to_an_external_proxy() {
    let Some(w) =
        World::new("http_proxy_port_hands_the_sandboxs_proxy_traffic_to_an_external_proxy")
    else {
        return;
    };
    let external = FakeProxy::start(None);
    let settings = w.env.write_settings(
        "external.json",
        &json!({ "network": { "httpProxyPort": external.port } }).to_string(),
    );
    let name = w.name("decided-elsewhere");
    let out = w.run(
        &["--settings".into(), settings.display().to_string()],
        &format!("curl -sS --max-time 20 http://{name}/via-external"),
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("from-the-fake"), "{out:?}");
    // The external proxy got the request as the client sent it: warden did not decide.
    let heads = external.heads();
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert!(
        heads[0].starts_with(&format!("GET http://{name}/via-external HTTP/1.1")),
        "{heads:?}"
    );
}

#[test]
fn a_parent_proxy_carries_allowed_tunnels_and_never_sees_denied_ones() {
    let Some(mut w) =
        World::new("a_parent_proxy_carries_allowed_tunnels_and_never_sees_denied_ones")
    else {
        return;
    };
    let host = w.map("behind-parent");
    let https = w.net.https_server(&[&host]);
    let ca = w.ca();
    let parent = FakeProxy::start(Some(std::net::SocketAddr::new(w.net.ns_v4().into(), 443)));
    let settings = w.env.write_settings(
        "parent.json",
        &json!({ "network": {
            "allowedDomains": [host],
            "parentProxy": { "https": format!("http://user:pw@127.0.0.1:{}", parent.port) }
        } })
        .to_string(),
    );
    let denied = w.name("not-allowed");
    let out = w.run(
        &["--settings".into(), settings.display().to_string()],
        &format!(
            "curl -sS --max-time 20 --cacert {ca} https://{host}/through-parent; \
             curl -sS --max-time 20 -o /dev/null -w '%{{http_code}}\\n' https://{denied}/ || true"
        ),
    );
    assert!(
        out.stdout.contains(&format!(
            "hello from warden-tests host={host} path=/through-parent"
        )),
        "{out:?}"
    );
    let heads = parent.heads();
    assert_eq!(
        heads.len(),
        1,
        "only the allowed tunnel reaches the parent: {heads:?}"
    );
    assert!(
        heads[0].starts_with(&format!("CONNECT {host}:443 HTTP/1.1")),
        "{heads:?}"
    );
    assert!(
        heads[0].contains("Proxy-Authorization: Basic dXNlcjpwdw=="),
        "{heads:?}"
    );
    assert_eq!(paths(&https), ["/through-parent"]);
}

// ---------------------------------------------------------------------------------------------
// Approvals over the control channel

#[test]
fn hosts_in_no_list_are_asked_over_the_control_channel() {
    let Some(mut w) = World::new("hosts_in_no_list_are_asked_over_the_control_channel") else {
        return;
    };
    let once = w.map("ask-once");
    let always = w.map("ask-always");
    let denied = w.map("ask-deny");
    let http = w.net.http_server();
    let sock = w.env.root().join("approvals.sock");
    let _ = warden_tests::warden_bin(); // built before the client's clock starts
    let asked =
        warden_tests::answer_requests(sock.clone(), vec!["allow-once", "allow-always", "deny"]);
    let out = w.run(
        &[
            "--approvals".to_string(),
            format!("unix:{}", sock.display()),
        ],
        &format!(
            "curl -sS --max-time 30 http://{once}/once && \
             curl -sS --max-time 30 http://{once}/again && \
             curl -sS --max-time 30 http://{always}/always && \
             curl -sS --max-time 30 -o /dev/null -w '%{{http_code}}\\n' http://{denied}/denied"
        ),
    );
    assert_eq!(out.code, 0, "{out:?}");
    let seen = asked.join().unwrap();
    // One question per host: the second request to `once` used the session's approval.
    let targets: Vec<&str> = seen.iter().map(|r| r["target"].as_str().unwrap()).collect();
    assert_eq!(
        targets,
        [
            format!("{once}:80"),
            format!("{always}:80"),
            format!("{denied}:80")
        ]
    );
    assert!(seen
        .iter()
        .all(|r| r["kind"] == "network" && r["reason"].is_string()));
    assert!(out.stdout.trim_end().ends_with("403"), "{out:?}");
    assert_eq!(paths(&http), ["/once", "/again", "/always"]);
    // Allow-always was saved to the user's settings file.
    let user = w.env.home().join(".config/warden/settings.json");
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(&user).unwrap_or_default()).unwrap();
    let list = saved["network"]["allowedDomains"].as_array().unwrap();
    assert!(
        list.iter().any(|v| v
            .as_str()
            .is_some_and(|p| always.ends_with(p.trim_start_matches('*')))),
        "{saved}"
    );
    assert!(!sock.exists(), "the approvals socket was left behind");
}

/// With every unix socket allowed, the command can reach the approvals socket itself; it must
/// still not become its own approver (warden serves only clients in its own pid namespace).
#[test]
fn a_sandboxed_command_cannot_answer_its_own_questions() {
    let Some(mut w) = World::new("a_sandboxed_command_cannot_answer_its_own_questions") else {
        return;
    };
    let target = w.map("self-approved");
    let http = w.net.http_server();
    let sock = w.env.root().join("approvals.sock");
    let settings = w.project_file("s.json");
    std::fs::write(
        &settings,
        r#"{"network": {"allowAllUnixSockets": true}, "warden": {"approvals": {"timeoutSeconds": 3}}}"#,
    )
    .unwrap();
    let script = format!(
        r#"{py} - <<'EOF'
import json, socket, subprocess, threading
c = socket.socket(socket.AF_UNIX)
c.connect({sock:?})
c.settimeout(8)
def answer():
    buf = b""
    try:
        while b"\n" not in buf:
            chunk = c.recv(4096)
            if not chunk:
                print("approver: disconnected", flush=True)
                return
            buf += chunk
        req = json.loads(buf.split(b"\n")[0])
        c.sendall((json.dumps({{"type": "permission_response", "id": req["id"], "decision": "allow-always"}}) + "\n").encode())
        print("approver: answered", flush=True)
    except Exception as e:
        print("approver:", type(e).__name__, flush=True)
t = threading.Thread(target=answer)
t.start()
r = subprocess.run(["curl", "-sS", "--max-time", "20", "-o", "/dev/null", "-w", "%{{http_code}}", "http://{target}/self"], capture_output=True, text=True)
print("status=" + r.stdout, flush=True)
t.join()
EOF"#,
        py = netns::python3().display(),
        sock = sock.display().to_string(),
    );
    let out = w.run(
        &[
            "--settings".to_string(),
            settings.display().to_string(),
            "--approvals".to_string(),
            format!("unix:{}", sock.display()),
        ],
        &script,
    );
    assert!(out.stdout.contains("status=403"), "{out:?}");
    assert!(
        out.stdout.contains("approver: disconnected"),
        "the sandbox's client was served: {out:?}"
    );
    assert!(paths(&http).is_empty(), "the request reached the server");
    let user = w.env.home().join(".config/warden/settings.json");
    let saved = std::fs::read_to_string(&user).unwrap_or_default();
    assert!(!saved.contains(w.zone.as_str()), "{saved}");
}

#[test]
fn without_an_approver_hosts_in_no_list_are_denied_at_once() {
    let Some(mut w) = World::new("without_an_approver_hosts_in_no_list_are_denied_at_once") else {
        return;
    };
    let allowed = w.map("listed");
    let other = w.map("unlisted");
    let http = w.net.http_server();
    let _ = warden_tests::warden_bin(); // built before the clock starts
    let started = Instant::now();
    let out = w.run(
        &allow(&[&allowed]),
        &format!("curl -sS --max-time 30 -o /dev/null -w '%{{http_code}}\\n' http://{other}/x"),
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "it waited for an answer"
    );
    assert_eq!(out.stdout.trim(), "403", "{out:?}");
    assert!(out.stderr.contains("no approver"), "{out:?}");
    assert!(paths(&http).is_empty());
}

/// Runs `warden run -- sh -c SCRIPT` under a pty, answering each approval prompt with the
/// next key of `keys`; returns everything the terminal showed.
fn run_under_pty(w: &World, script: &str, keys: &str) -> String {
    let mut cmd = std::process::Command::new(netns::python3());
    cmd.current_dir(w.env.project())
        .env("HOME", w.env.home())
        .env("XDG_CONFIG_HOME", w.env.home().join(".config"))
        .env("WARDEN_MANAGED_SETTINGS", w.env.root().join("managed.json"))
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy");
    // One key per prompt, typed once the prompt is on the screen.
    let keys: Vec<String> = keys.chars().map(String::from).collect();
    let steps: Vec<(&str, &str)> = keys.iter().map(|k| ("(denied in", k.as_str())).collect();
    warden_tests::under_pty(cmd, &["run", "--", "sh", "-c", script], &steps).0
}

#[test]
fn from_a_terminal_warden_asks_on_the_terminal() {
    let Some(mut w) = World::new("from_a_terminal_warden_asks_on_the_terminal") else {
        return;
    };
    let once = w.map("tty-once");
    let denied = w.map("tty-deny");
    let http = w.net.http_server();
    let shown = run_under_pty(
        &w,
        &format!(
            "curl -sS --max-time 30 http://{once}/tty-once; echo; \
             curl -sS --max-time 30 -o /dev/null -w 'code=%{{http_code}}' http://{denied}/tty-deny"
        ),
        "od",
    );
    assert!(
        shown.contains(&format!("warden: network access to {once}:80?")),
        "{shown}"
    );
    assert!(shown.contains("allowed once"), "{shown}");
    assert!(
        shown.contains(&format!("warden: network access to {denied}:80?")),
        "{shown}"
    );
    assert!(shown.contains("code=403"), "{shown}");
    assert!(shown.contains("EXIT 0"), "{shown}");
    assert_eq!(paths(&http), ["/tty-once"]);
}

/// On the terminal: allow always (saved, and the next request to the host is not asked), a
/// question nobody answers (denied after `warden.approvals.timeoutSeconds`), and
/// `warden.approvals.mode: "deny"` (never asked, denied at once).
#[test]
fn terminal_allow_always_timeout_and_the_deny_mode() {
    let Some(mut w) = World::new("terminal_allow_always_timeout_and_the_deny_mode") else {
        return;
    };
    let always = w.map("tty-always");
    // Outside the zone: allow-always saves a pattern for `always`'s whole zone.
    let silent = w.map_full(&format!("silent.q{}.test", std::process::id()));
    let refused = w.map_full(&format!("refused.r{}.test", std::process::id()));
    let http = w.net.http_server();
    let user = w.env.home().join(".config/warden/settings.json");
    std::fs::create_dir_all(user.parent().unwrap()).unwrap();
    std::fs::write(
        &user,
        r#"{ "warden": { "approvals": { "timeoutSeconds": 2 } } }"#,
    )
    .unwrap();
    let shown = run_under_pty(
        &w,
        &format!(
            "curl -sS --max-time 30 http://{always}/always-1; echo; \
             curl -sS --max-time 30 http://{always}/always-2; echo"
        ),
        "a",
    );
    assert_eq!(
        shown.matches("warden: network access to").count(),
        1,
        "asked more than once: {shown}"
    );
    assert!(shown.contains("allowed always"), "{shown}");
    assert!(shown.contains("EXIT 0"), "{shown}");
    let saved = std::fs::read_to_string(&user).unwrap();
    assert!(saved.contains("allowedDomains"), "not saved: {saved}");
    assert!(
        saved.contains("timeoutSeconds"),
        "the edit lost a setting: {saved}"
    );
    // Saved for the next run too: no question at all.
    let again = run_under_pty(
        &w,
        &format!("curl -sS --max-time 30 http://{always}/always-3; echo"),
        "",
    );
    assert!(!again.contains("warden: network access to"), "{again}");

    // Nobody answers: denied once the 2 s are up.
    let started = Instant::now();
    let shown = run_under_pty(
        &w,
        &format!(
            "curl -sS --max-time 30 -o /dev/null -w 'code=%{{http_code}}' http://{silent}/silent"
        ),
        "",
    );
    let took = started.elapsed();
    assert!(shown.contains("(denied in 2 s)"), "{shown}");
    assert!(shown.contains("code=403"), "{shown}");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(30),
        "{took:?}: {shown}"
    );

    // The deny mode: on a terminal, yet nothing is asked.
    std::fs::write(
        &user,
        format!(
            r#"{{ "network": {{ "allowedDomains": ["{always}"] }},
                  "warden": {{ "approvals": {{ "mode": "deny" }} }} }}"#
        ),
    )
    .unwrap();
    let shown = run_under_pty(
        &w,
        &format!(
            "curl -sS --max-time 30 -o /dev/null -w 'code=%{{http_code}}' http://{refused}/refused"
        ),
        "o",
    );
    assert!(!shown.contains("warden: network access to"), "{shown}");
    assert!(shown.contains("code=403"), "{shown}");
    assert_eq!(paths(&http), ["/always-1", "/always-2", "/always-3"]);
}

#[test]
fn a_settings_edit_applies_to_the_running_sandbox_and_a_broken_one_is_rejected() {
    let Some(mut w) =
        World::new("a_settings_edit_applies_to_the_running_sandbox_and_a_broken_one_is_rejected")
    else {
        return;
    };
    let first = w.map("live-first");
    let later = w.map("live-later");
    let http = w.net.http_server();
    let settings = w.env.root().join("live.json");
    let write = |text: String| {
        // Written aside and renamed over, as editors and warden's own allow-always do.
        let tmp = settings.with_extension("tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &settings).unwrap();
    };
    write(format!(
        r#"{{ "network": {{ "allowedDomains": ["{first}"] }} }}"#
    ));
    let project = w.env.project();
    // The command signals each step with a file in the project and waits for the test's.
    let script = format!(
        "code() {{ curl -sS --max-time 30 -o /dev/null -w '%{{http_code}}' http://$1/$2; echo; }}; \
         wait_for() {{ i=0; while [ ! -e $1 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; }}; \
         echo before $(code {later} before); touch step1; wait_for go1; \
         echo after $(code {later} after); touch step2; wait_for go2; \
         echo broken $(code {later} broken)"
    );
    let mut cmd = w.env.command();
    cmd.args([
        "run",
        "--settings",
        settings.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    for var in PROXY_VARS {
        cmd.env_remove(var);
    }
    let child = cmd.spawn().unwrap();
    let step = |name: &str| {
        let path = project.join(name);
        assert!(
            wait_for(Duration::from_secs(60), || path.exists().then_some(())).is_some(),
            "the command never reached {name}"
        );
    };
    step("step1");
    write(format!(
        r#"{{ "network": {{ "allowedDomains": ["{first}", "{later}"] }} }}"#
    ));
    // The reload is asynchronous: give it time to settle before letting the command go on.
    std::thread::sleep(Duration::from_millis(800));
    std::fs::write(project.join("go1"), "").unwrap();
    step("step2");
    // A broken edit: rejected, the previous policy (with `later`) stays.
    write(r#"{ "network": { "allowedDomains": [ "#.to_string());
    std::thread::sleep(Duration::from_millis(800));
    std::fs::write(project.join("go2"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("before 403"), "{stdout}\n{stderr}");
    assert!(stdout.contains("after 200"), "{stdout}\n{stderr}");
    assert!(stdout.contains("broken 200"), "{stdout}\n{stderr}");
    assert!(stderr.contains("settings changed"), "{stderr}");
    assert!(
        stderr.contains("settings change rejected, keeping the previous policy"),
        "{stderr}"
    );
    assert_eq!(paths(&http), ["/after", "/broken"]);
}

/// With `warden.limits.memoryMax`, the proxy holds only as many connections open as fit in
/// the limit (16 at 64 MiB): a command opening tunnels by the hundred and never reading them
/// cannot make warden's upstream sockets take gigabytes of the host's memory outside the
/// sandbox's cgroup. Counted at the server: connections open at once.
#[test]
fn under_a_memory_limit_the_proxy_holds_a_bounded_number_of_connections() {
    use std::net::TcpListener;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    let env = TestEnv::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let open = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    {
        let (open, peak) = (open.clone(), peak.clone());
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for s in listener.incoming().flatten() {
                let n = open.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(n, Ordering::SeqCst);
                held.push(s); // never closed, never answered: the command never reads
            }
        });
    }
    let settings = env.write_settings(
        "limited.json",
        r#"{"network": {"allowedDomains": ["127.0.0.1"]}, "warden": {"limits": {"memoryMax": 67108864}}}"#,
    );
    let script = format!(
        r#"{py} - <<'EOF'
import socket, time
socks = []
ok = 0
for i in range(40):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n")
    socks.append(s)
for s in socks:
    s.settimeout(0.3)
    try:
        if s.recv(64).startswith(b"HTTP/1.1 200"):
            ok += 1
    except OSError:
        pass
print("tunnels", ok, flush=True)
EOF"#,
        py = netns::python3().display(),
    );
    let out = env.run([
        "run",
        "--settings",
        settings.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    let tunnels: usize = out
        .stdout
        .trim()
        .strip_prefix("tunnels ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out:?}"));
    let peak = peak.load(Ordering::SeqCst);
    // 16 permits; one may still be held by a client connection whose tunnel the proxy is
    // setting up when the command stops waiting.
    assert!((12..=16).contains(&tunnels), "{tunnels} tunnels: {out:?}");
    assert!(peak <= 16, "{peak} connections open at once at the server");
}

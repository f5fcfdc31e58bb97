//! Network namespaces with test servers, for black-box tests of warden's network proxy.
//!
//! warden refuses loopback, link-local and the host's own addresses after it resolves a name
//! (its DNS-rebinding guard), so a server a sandboxed command may reach cannot listen on
//! loopback. A [`TestNet`] is a network namespace of its own, joined to the host by a veth
//! pair with private addresses (a /30 from `10.213.0.0/16`, else `172.29.0.0/16`, plus a ULA
//! /64 when IPv6 works); servers run inside it (`ip netns exec`), and [`HostsEntry`] maps test
//! host names to it in `/etc/hosts`.
//!
//! ```no_run
//! use warden_tests::netns::TestNet;
//! let Some(net) = TestNet::or_skip("my_test") else { return };
//! let http = net.http_server();                    // port 80 in the namespace
//! let _name = net.host_name("api.example.test");   // /etc/hosts line, removed on drop
//! // ... run something that fetches http://api.example.test/ ...
//! assert!(http.requests().iter().any(|r| r.path == "/"));
//! ```
//!
//! Everything is torn down on drop, also when a test panics: servers are killed, the veth pair
//! and the namespace deleted, and exactly the `/etc/hosts` line added removed (edited in place,
//! never replaced, since `/etc/hosts` may be a bind mount). Servers also exit when the test
//! process dies (they watch their stdin), and a later [`TestNet::new`] deletes namespaces and
//! `/etc/hosts` lines left by test processes that no longer exist.
//!
//! Needs root, `ip` (iproute2), python3 and openssl ([`missing_prerequisites`]).

use serde_json::Value;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// The server script every server runs (`tests/src/netns_server.py`).
const SERVER_PY: &str = include_str!("netns_server.py");
/// What the harness's readiness probes send; servers do not log it.
const PROBE: &[u8] = b"warden-tests-probe";
/// `/bytes/N` serves the first N bytes of SHAKE-128 of this seed.
pub const BYTES_SEED: &str = "warden-tests";
/// The hosts file [`HostsEntry`] edits.
pub const HOSTS_FILE: &str = "/etc/hosts";
/// Marks the `/etc/hosts` lines the harness adds: `ADDR NAME # warden-tests PID N`.
const HOSTS_MARK: &str = "# warden-tests";
/// Namespaces are named `wt-PID-N`.
const NETNS_PREFIX: &str = "wt-";
/// IPv4 ranges the /30 subnets come from, tried in order; each holds `SLOTS` subnets.
const BASES: [Ipv4Addr; 2] = [Ipv4Addr::new(10, 213, 0, 0), Ipv4Addr::new(172, 29, 0, 0)];
const SLOTS: u32 = 1 << 14;
/// How long a server may take to start.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

static NET_COUNTER: AtomicU32 = AtomicU32::new(0);
static HOSTS_COUNTER: AtomicU32 = AtomicU32::new(0);
static NET_LOCK: Mutex<()> = Mutex::new(());
static HOSTS_LOCK: Mutex<()> = Mutex::new(());

/// Whether this is CI (`CI=true`), where a missing prerequisite fails instead of skipping.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| v == "true")
}

/// What this machine lacks for [`TestNet`]: root, `ip`, python3, openssl. Empty when ready.
pub fn missing_prerequisites() -> Vec<String> {
    let mut missing = Vec::new();
    if !is_root() {
        missing.push("root (network namespaces, veth pairs and /etc/hosts need it)".to_string());
    }
    if !succeeds(Command::new("ip").arg("-V")) {
        missing.push("`ip` (apt package iproute2)".to_string());
    }
    if !succeeds(Command::new(python3()).args(["-c", "import ssl, hashlib"])) {
        missing.push("python3 with ssl (apt package python3)".to_string());
    }
    if !succeeds(Command::new("openssl").arg("version")) {
        missing.push("`openssl` (apt package openssl)".to_string());
    }
    missing
}

/// `true` when [`TestNet`] can work here. Otherwise panics under `CI=true`, and elsewhere
/// prints a loud skip notice naming `test` and returns `false`.
pub fn ready_or_skip(test: &str) -> bool {
    let missing = missing_prerequisites();
    if missing.is_empty() {
        return true;
    }
    let list = missing.join(", ");
    assert!(
        !in_ci(),
        "{test}: CI=true but this machine lacks {list} (cargo xtask setup installs the packages; \
         the tests must run as root)"
    );
    eprintln!("\n*** SKIPPED {test}: this machine lacks {list} ***\n");
    false
}

/// The python3 to run: the system one when present (a pyenv shim depends on `HOME`, which
/// `TestEnv` changes), else the first on `PATH`.
pub fn python3() -> PathBuf {
    let system = Path::new("/usr/bin/python3");
    if system.is_file() {
        system.to_path_buf()
    } else {
        PathBuf::from("python3")
    }
}

/// The SHA-256 (hex) of what `/bytes/N` serves, computed on the host.
pub fn bytes_sha256(n: u64) -> String {
    let script = format!(
        "import hashlib; print(hashlib.sha256(hashlib.shake_128({BYTES_SEED:?}.encode()).digest({n})).hexdigest())"
    );
    let out = Command::new(python3())
        .args(["-c", &script])
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3: {e}"));
    assert!(out.status.success(), "python3 failed: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Polls `f` every 50 ms until it returns `Some`, for at most `timeout`.
pub fn wait_for<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
    })
}

fn succeeds(cmd: &mut Command) -> bool {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `ip ARGS`; its stdout, or an error naming the command and its stderr.
fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `ip {}`: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`ip {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn lock<T>(m: &'static Mutex<T>) -> MutexGuard<'static, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// A file lock (flock) across processes, held until drop.
struct FileLock(File);

impl FileLock {
    fn acquire(path: &Path) -> FileLock {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .unwrap_or_else(|e| panic!("cannot open lock file {}: {e}", path.display()));
        file.lock()
            .unwrap_or_else(|e| panic!("cannot lock {}: {e}", path.display()));
        FileLock(file)
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

fn net_lock_path() -> PathBuf {
    let dir = Path::new("/run/lock");
    let dir = if dir.is_dir() { dir } else { Path::new("/tmp") };
    dir.join("warden-tests-netns.lock")
}

// ---------------------------------------------------------------------------------------------
// TestNet

/// A network namespace joined to the host by a veth pair (see the module documentation).
/// Dropping it kills every process in the namespace and deletes the pair and the namespace.
pub struct TestNet {
    name: String,
    host_if: String,
    ns_if: String,
    host_v4: Ipv4Addr,
    ns_v4: Ipv4Addr,
    v6: Option<(Ipv6Addr, Ipv6Addr)>,
    dir: TempDir,
    ca: OnceLock<PathBuf>,
}

impl TestNet {
    /// A new namespace and veth pair, up and addressed. Panics (naming what is missing) when
    /// the machine lacks a prerequisite or setup fails; see [`TestNet::or_skip`].
    pub fn new() -> TestNet {
        let missing = missing_prerequisites();
        assert!(
            missing.is_empty(),
            "TestNet needs {} (cargo xtask setup installs the packages)",
            missing.join(", ")
        );
        let pid = std::process::id();
        let n = NET_COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("{NETNS_PREFIX}{pid}-{n}");
        let dir = tempfile::Builder::new()
            .prefix("warden-testnet-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temporary directory: {e}"));

        let _process = lock(&NET_LOCK);
        let _file = FileLock::acquire(&net_lock_path());
        remove_stale_namespaces();
        let start = pid
            .wrapping_mul(2654435761)
            .wrapping_add(n.wrapping_mul(97))
            % SLOTS;
        let used = used_v4_nets();
        let links = link_names();
        for (b, base) in BASES.iter().enumerate() {
            for i in 0..SLOTS {
                let slot = (start + i) % SLOTS;
                let id = b as u32 * SLOTS + slot;
                let (host_if, ns_if) = (format!("wh{id}"), format!("wn{id}"));
                let net = u32::from(*base) + slot * 4;
                if used.iter().any(|&(a, len)| overlaps((net, 30), (a, len)))
                    || links.contains(&host_if)
                    || links.contains(&ns_if)
                {
                    continue;
                }
                let mut tn = TestNet {
                    name: name.clone(),
                    host_if,
                    ns_if,
                    host_v4: Ipv4Addr::from(net + 1),
                    ns_v4: Ipv4Addr::from(net + 2),
                    v6: None,
                    dir,
                    ca: OnceLock::new(),
                };
                if let Err(e) = tn.create(id) {
                    tn.teardown();
                    panic!("cannot set up network namespace {name}: {e}");
                }
                return tn;
            }
        }
        panic!("no free /30 subnet in 10.213.0.0/16 or 172.29.0.0/16 on this host");
    }

    /// [`TestNet::new`] when the prerequisites are there; otherwise `None` after a loud skip
    /// notice, or a panic under `CI=true` (see [`ready_or_skip`]).
    pub fn or_skip(test: &str) -> Option<TestNet> {
        ready_or_skip(test).then(TestNet::new)
    }

    fn create(&mut self, id: u32) -> Result<(), String> {
        let (name, host_if, ns_if) = (&self.name, &self.host_if, &self.ns_if);
        let host4 = format!("{}/30", self.host_v4);
        let ns4 = format!("{}/30", self.ns_v4);
        ip(&["netns", "add", name])?;
        ip(&[
            "link", "add", host_if, "type", "veth", "peer", "name", ns_if, "netns", name,
        ])?;
        ip(&["addr", "add", &host4, "dev", host_if])?;
        ip(&["link", "set", host_if, "up"])?;
        ip(&["-n", name, "addr", "add", &ns4, "dev", ns_if])?;
        ip(&["-n", name, "link", "set", ns_if, "up"])?;
        ip(&["-n", name, "link", "set", "lo", "up"])?;

        // IPv6 when it works: fd57:7764:ID::1 (host) and ::2 (namespace), no DAD delay.
        let host6 = Ipv6Addr::new(0xfd57, 0x7764, id as u16, 0, 0, 0, 0, 1);
        let ns6 = Ipv6Addr::new(0xfd57, 0x7764, id as u16, 0, 0, 0, 0, 2);
        let v6_free = ip(&["-o", "-6", "addr", "show"]).is_ok_and(|out| {
            let prefix = format!("fd57:7764:{:x}:", id as u16);
            !out.contains(&prefix)
        });
        if v6_free {
            let h = format!("{host6}/64");
            let n = format!("{ns6}/64");
            let ok = ip(&["-6", "addr", "add", &h, "dev", host_if, "nodad"]).is_ok()
                && ip(&["-n", name, "-6", "addr", "add", &n, "dev", ns_if, "nodad"]).is_ok();
            if ok {
                self.v6 = Some((host6, ns6));
            }
        }
        // The host side comes up asynchronously; wait until the namespace answers.
        let ok = wait_for(Duration::from_secs(5), || {
            let out = ip(&["-o", "link", "show", "dev", host_if]).ok()?;
            (out.contains("LOWER_UP") && out.contains(",UP")).then_some(())
        });
        ok.ok_or_else(|| format!("{host_if} did not come up"))
    }

    fn teardown(&self) {
        kill_namespace_processes(&self.name);
        if ip(&["link", "show", "dev", &self.host_if]).is_ok() {
            if let Err(e) = ip(&["link", "del", "dev", &self.host_if]) {
                eprintln!("warden-tests: {e}");
            }
        }
        if netns_names().contains(&self.name) {
            if let Err(e) = ip(&["netns", "del", &self.name]) {
                eprintln!("warden-tests: {e}");
            }
        }
    }

    /// The namespace's name (`wt-PID-N`), as `ip netns` knows it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The host end of the veth pair (`whID`).
    pub fn host_if(&self) -> &str {
        &self.host_if
    }

    /// The namespace end of the veth pair (`wnID`).
    pub fn ns_if(&self) -> &str {
        &self.ns_if
    }

    /// The namespace's IPv4 address, where its servers listen.
    pub fn ns_v4(&self) -> Ipv4Addr {
        self.ns_v4
    }

    /// The host's IPv4 address on the veth pair (one of the host's own addresses).
    pub fn host_v4(&self) -> Ipv4Addr {
        self.host_v4
    }

    /// The namespace's IPv6 (ULA) address, when IPv6 works here.
    pub fn ns_v6(&self) -> Option<Ipv6Addr> {
        self.v6.map(|(_, ns)| ns)
    }

    /// The host's IPv6 (ULA) address on the veth pair, when IPv6 works here.
    pub fn host_v6(&self) -> Option<Ipv6Addr> {
        self.v6.map(|(host, _)| host)
    }

    /// A temporary directory that lives as long as this net (certificates, static files).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `ip netns exec NAME PROGRAM`: a command to run inside the namespace.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name]).arg(program);
        cmd
    }

    /// Maps `name` to the namespace's IPv4 address in `/etc/hosts` until the guard drops.
    pub fn host_name(&self, name: &str) -> HostsEntry {
        HostsEntry::add(IpAddr::V4(self.ns_v4), name)
    }

    /// Maps `name` to the namespace's IPv6 address; `None` without IPv6.
    pub fn host_name_v6(&self, name: &str) -> Option<HostsEntry> {
        self.ns_v6()
            .map(|addr| HostsEntry::add(IpAddr::V6(addr), name))
    }

    /// The PEM certificate of this net's test CA (generated on first use); every HTTPS server
    /// of this net has a certificate it signed. Use it with `curl --cacert`.
    pub fn ca_cert(&self) -> PathBuf {
        self.ca.get_or_init(|| make_ca(self.dir())).clone()
    }

    /// An HTTP server on port 80 in the namespace.
    pub fn http_server(&self) -> HttpServer {
        self.http_server_with(HttpOptions::default())
    }

    /// An HTTPS server on port 443 in the namespace whose certificate names `names` (DNS
    /// names, `*.` wildcards allowed) and the namespace's addresses.
    pub fn https_server(&self, names: &[&str]) -> HttpServer {
        self.http_server_with(HttpOptions {
            tls_names: Some(names.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        })
    }

    /// An HTTP(S) server in the namespace as `opts` describe.
    pub fn http_server_with(&self, opts: HttpOptions) -> HttpServer {
        let tls = opts.tls_names.as_ref().map(|names| {
            let mut alt: Vec<String> = names.iter().map(|n| format!("DNS:{n}")).collect();
            alt.push(format!("IP:{}", self.ns_v4));
            if let Some(v6) = self.ns_v6() {
                alt.push(format!("IP:{v6}"));
            }
            self.ca_cert();
            make_leaf(self.dir(), &alt)
        });
        let port = opts.port.unwrap_or(if tls.is_some() { 443 } else { 80 });
        let bind: IpAddr = if self.v6.is_some() {
            IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        } else {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        };
        HttpServer::spawn(
            Some(&self.name),
            bind,
            IpAddr::V4(self.ns_v4),
            port,
            tls,
            opts.static_dir.as_deref(),
        )
    }

    /// A TCP echo server on port 7 in the namespace.
    pub fn tcp_echo_server(&self) -> EchoServer {
        EchoServer::spawn(
            Some(&self.name),
            self.any_addr(),
            self.ns_v4.into(),
            7,
            false,
        )
    }

    /// A UDP echo server on port 7 in the namespace.
    pub fn udp_echo_server(&self) -> EchoServer {
        EchoServer::spawn(
            Some(&self.name),
            self.any_addr(),
            self.ns_v4.into(),
            7,
            true,
        )
    }

    /// An HTTP server on the host, on the host's veth address (a host-own address), on a free
    /// port.
    pub fn host_side_http_server(&self) -> HttpServer {
        let addr = IpAddr::V4(self.host_v4);
        HttpServer::spawn(None, addr, addr, 0, None, None)
    }

    /// A TCP echo server on the host's veth address, on a free port.
    pub fn host_side_tcp_echo_server(&self) -> EchoServer {
        let addr = IpAddr::V4(self.host_v4);
        EchoServer::spawn(None, addr, addr, 0, false)
    }

    /// A UDP echo server on the host's veth address, on a free port.
    pub fn host_side_udp_echo_server(&self) -> EchoServer {
        let addr = IpAddr::V4(self.host_v4);
        EchoServer::spawn(None, addr, addr, 0, true)
    }

    fn any_addr(&self) -> IpAddr {
        if self.v6.is_some() {
            IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        } else {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        }
    }
}

impl Default for TestNet {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TestNet {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// An HTTP server on the host's loopback (127.0.0.1, a free port): what a sandboxed command
/// must never reach through the proxy.
pub fn loopback_http_server() -> HttpServer {
    let addr = IpAddr::V4(Ipv4Addr::LOCALHOST);
    HttpServer::spawn(None, addr, addr, 0, None, None)
}

/// Names from `ip netns list` (`NAME` or `NAME (id: N)` per line).
pub fn netns_names() -> Vec<String> {
    ip(&["netns", "list"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// Interface names from `ip -o link show` (without the `@peer` suffix).
pub fn link_names() -> Vec<String> {
    ip(&["-o", "link", "show"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let name = l.split(": ").nth(1)?;
            Some(name.split('@').next().unwrap_or(name).to_string())
        })
        .collect()
}

fn kill_namespace_processes(name: &str) {
    for _ in 0..100 {
        let pids: Vec<i32> = ip(&["netns", "pids", name])
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if pids.is_empty() {
            return;
        }
        for pid in pids {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("warden-tests: processes in network namespace {name} survived SIGKILL");
}

/// Deletes `wt-PID-N` namespaces whose test process is gone (killed before it could clean up).
fn remove_stale_namespaces() {
    for name in netns_names() {
        let Some(rest) = name.strip_prefix(NETNS_PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !pid_alive(pid) {
            eprintln!("warden-tests: removing stale network namespace {name}");
            kill_namespace_processes(&name);
            let _ = ip(&["netns", "del", &name]);
        }
    }
}

/// Every IPv4 network the host has an address in or a route to (but the default route).
fn used_v4_nets() -> Vec<(u32, u8)> {
    let mut nets = Vec::new();
    for line in ip(&["-o", "-4", "addr", "show"])
        .unwrap_or_default()
        .lines()
    {
        let mut words = line.split_whitespace();
        while let Some(w) = words.next() {
            if w == "inet" {
                nets.extend(words.next().and_then(parse_v4_net));
            }
        }
    }
    let routes = ip(&["-4", "route", "show", "table", "all"]).unwrap_or_default();
    const TYPES: [&str; 10] = [
        "unicast",
        "local",
        "broadcast",
        "multicast",
        "unreachable",
        "blackhole",
        "prohibit",
        "throw",
        "anycast",
        "nat",
    ];
    for line in routes.lines() {
        let mut words = line.split_whitespace();
        let mut first = words.next();
        if first.is_some_and(|w| TYPES.contains(&w)) {
            first = words.next();
        }
        nets.extend(first.and_then(parse_v4_net));
    }
    nets
}

fn parse_v4_net(text: &str) -> Option<(u32, u8)> {
    let (addr, len) = match text.split_once('/') {
        Some((a, l)) => (a, l.parse().ok()?),
        None => (text, 32),
    };
    let addr: Ipv4Addr = addr.parse().ok()?;
    (len <= 32).then_some((u32::from(addr), len))
}

fn overlaps(a: (u32, u8), b: (u32, u8)) -> bool {
    let len = a.1.min(b.1);
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    a.0 & mask == b.0 & mask
}

// ---------------------------------------------------------------------------------------------
// Certificates

/// Runs `openssl ARGS` (split at whitespace) in `dir`.
fn openssl(args: &str, dir: &Path) {
    let out = Command::new("openssl")
        .args(args.split_whitespace())
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run openssl: {e}"));
    assert!(
        out.status.success(),
        "`openssl {args}` failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA key and certificate, `ca.key` and `ca.pem` in `dir`.
fn make_ca(dir: &Path) -> PathBuf {
    let config = "[req]\ndistinguished_name = dn\nx509_extensions = v3_ca\nprompt = no\n\
                  [dn]\nCN = warden-tests CA\n\
                  [v3_ca]\nbasicConstraints = critical,CA:TRUE\n\
                  keyUsage = critical,keyCertSign,cRLSign\nsubjectKeyIdentifier = hash\n";
    fs::write(dir.join("ca.cnf"), config).unwrap_or_else(|e| panic!("cannot write ca.cnf: {e}"));
    openssl(
        "req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
         -keyout ca.key -out ca.pem -days 2 -config ca.cnf",
        dir,
    );
    dir.join("ca.pem")
}

/// A key and a certificate for the `subjectAltName` entries `alt`, signed by the CA of
/// [`make_ca`] in `dir`.
fn make_leaf(dir: &Path, alt: &[String]) -> (PathBuf, PathBuf) {
    static LEAF: AtomicU32 = AtomicU32::new(0);
    let n = LEAF.fetch_add(1, Ordering::Relaxed);
    let extensions = format!(
        "basicConstraints = critical,CA:FALSE\nkeyUsage = critical,digitalSignature\n\
         extendedKeyUsage = serverAuth\nsubjectAltName = {}\n",
        alt.join(",")
    );
    fs::write(dir.join(format!("leaf{n}.ext")), extensions)
        .unwrap_or_else(|e| panic!("cannot write leaf{n}.ext: {e}"));
    openssl(
        &format!(
            "req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
             -keyout leaf{n}.key -out leaf{n}.csr -subj /CN=warden-tests-server"
        ),
        dir,
    );
    let serial = 1000 + u64::from(n) + u64::from(std::process::id()) * 1000;
    openssl(
        &format!(
            "x509 -req -in leaf{n}.csr -CA ca.pem -CAkey ca.key -set_serial {serial} -days 2 \
             -extfile leaf{n}.ext -out leaf{n}.pem"
        ),
        dir,
    );
    (
        dir.join(format!("leaf{n}.pem")),
        dir.join(format!("leaf{n}.key")),
    )
}

// ---------------------------------------------------------------------------------------------
// Servers

/// One server process (`netns_server.py`), killed on drop.
struct Process {
    child: Child,
    /// Held open: the server exits when it closes (on drop, or when the test process dies).
    _stdin: Option<ChildStdin>,
    dir: TempDir,
    label: String,
}

impl Process {
    /// Starts the server script and waits for its `READY PORT` line; returns the port.
    fn spawn(netns: Option<&str>, label: String, args: &[String]) -> (Process, u16) {
        let dir = tempfile::Builder::new()
            .prefix("warden-server-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temporary directory: {e}"));
        let script = dir.path().join("server.py");
        fs::write(&script, SERVER_PY).unwrap_or_else(|e| panic!("cannot write server.py: {e}"));
        let stderr = File::create(dir.path().join("stderr"))
            .unwrap_or_else(|e| panic!("cannot create the server's stderr file: {e}"));
        let mut cmd = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(python3());
                c
            }
            None => Command::new(python3()),
        };
        cmd.arg("-u")
            .arg(&script)
            .args(args)
            .arg("--log")
            .arg(dir.path().join("log"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {label}: {e}"));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let mut process = Process {
            child,
            _stdin: stdin,
            dir,
            label,
        };
        let (tx, rx) = mpsc::channel();
        if let Some(stdout) = stdout {
            std::thread::spawn(move || {
                let mut line = String::new();
                let _ = BufReader::new(stdout).read_line(&mut line);
                let _ = tx.send(line);
            });
        }
        let line = rx.recv_timeout(READY_TIMEOUT).unwrap_or_default();
        let Some(port) = line
            .strip_prefix("READY ")
            .and_then(|p| p.trim().parse::<u16>().ok())
        else {
            let _ = process.child.kill();
            let _ = process.child.wait();
            panic!(
                "{} did not start (stdout {line:?}); stderr:\n{}",
                process.label,
                process.stderr()
            );
        };
        (process, port)
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn stderr(&self) -> String {
        fs::read_to_string(self.dir.path().join("stderr")).unwrap_or_default()
    }

    fn log(&self) -> Vec<Value> {
        fs::read_to_string(self.dir.path().join("log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What an [`HttpServer`] may be asked for.
#[derive(Clone, Debug, Default)]
pub struct HttpOptions {
    /// The port (default 80, or 443 with TLS).
    pub port: Option<u16>,
    /// Serve HTTPS with a certificate for these DNS names (signed by [`TestNet::ca_cert`]).
    pub tls_names: Option<Vec<String>>,
    /// Serve the files below this directory at `/static/...` (e.g. a bare git repository
    /// after `git update-server-info`, for git's dumb HTTP protocol).
    pub static_dir: Option<PathBuf>,
}

/// One request an [`HttpServer`] received (the server logs each as it answers it).
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    /// The request target as received (origin form from a well-behaved proxy).
    pub path: String,
    pub headers: Vec<(String, String)>,
    /// The peer address the request came from.
    pub client: String,
    pub tls: bool,
    pub status: u16,
    /// POST/PUT: the body's length and SHA-256 (hex).
    pub body_len: Option<u64>,
    pub body_sha256: Option<String>,
    /// `/bytes/N`: how many bytes were written and whether all N were.
    pub sent: Option<u64>,
    pub complete: Option<bool>,
    /// The whole log entry.
    pub raw: Value,
}

impl Request {
    fn from_json(v: Value) -> Request {
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        let headers = v["headers"]
            .as_array()
            .map(|hs| {
                hs.iter()
                    .map(|h| {
                        (
                            h[0].as_str().unwrap_or_default().to_string(),
                            h[1].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        Request {
            method: s("method"),
            path: s("path"),
            headers,
            client: s("client"),
            tls: v["tls"].as_bool().unwrap_or(false),
            status: v["status"].as_u64().unwrap_or(0) as u16,
            body_len: v["body_len"].as_u64(),
            body_sha256: v["body_sha256"].as_str().map(str::to_string),
            sent: v["sent"].as_u64(),
            complete: v["complete"].as_bool(),
            raw: v,
        }
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// An HTTP or HTTPS test server process (see `netns_server.py` for its routes), killed on drop.
pub struct HttpServer {
    process: Process,
    addr: SocketAddr,
    tls: bool,
}

impl HttpServer {
    fn spawn(
        netns: Option<&str>,
        bind: IpAddr,
        reach: IpAddr,
        port: u16,
        tls: Option<(PathBuf, PathBuf)>,
        static_dir: Option<&Path>,
    ) -> HttpServer {
        let mut args = vec![
            "--mode".to_string(),
            "http".to_string(),
            "--bind".to_string(),
            bind.to_string(),
            "--port".to_string(),
            port.to_string(),
        ];
        if let Some((cert, key)) = &tls {
            args.extend([
                "--tls-cert".to_string(),
                cert.display().to_string(),
                "--tls-key".to_string(),
                key.display().to_string(),
            ]);
        }
        if let Some(dir) = static_dir {
            args.extend(["--static".to_string(), dir.display().to_string()]);
        }
        let scheme = if tls.is_some() { "https" } else { "http" };
        let label = format!("{scheme} server on {reach}:{port} (netns {netns:?})");
        let (process, port) = Process::spawn(netns, label, &args);
        let server = HttpServer {
            process,
            addr: SocketAddr::new(reach, port),
            tls: tls.is_some(),
        };
        server.wait_ready();
        server
    }

    /// Polls from the host until the server answers (HTTPS: until it accepts connections).
    fn wait_ready(&self) {
        let ready = wait_for(READY_TIMEOUT, || {
            let mut s = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1)).ok()?;
            if self.tls {
                return Some(());
            }
            s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
            s.write_all(
                b"GET /__warden_probe HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n",
            )
            .ok()?;
            let mut reply = String::new();
            s.read_to_string(&mut reply).ok()?;
            reply.starts_with("HTTP/1.1 200").then_some(())
        });
        if ready.is_none() {
            panic!(
                "{} does not answer; stderr:\n{}",
                self.process.label,
                self.process.stderr()
            );
        }
    }

    /// The address and port the host reaches it at.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> &'static str {
        if self.tls {
            "https"
        } else {
            "http"
        }
    }

    /// `SCHEME://HOST[:PORT]PATH`, the port left out when it is the scheme's default.
    pub fn url(&self, host: &str, path: &str) -> String {
        let default = if self.tls { 443 } else { 80 };
        if self.port() == default {
            format!("{}://{host}{path}", self.scheme())
        } else {
            format!("{}://{host}:{}{path}", self.scheme(), self.port())
        }
    }

    /// The server process's pid (for checks that it is gone).
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Every request answered so far (not the harness's readiness probes), oldest first.
    pub fn requests(&self) -> Vec<Request> {
        self.process
            .log()
            .into_iter()
            .map(Request::from_json)
            .collect()
    }

    /// What the server printed on stderr (handler errors), for failure messages.
    pub fn stderr(&self) -> String {
        self.process.stderr()
    }
}

/// One connection (TCP) or datagram (UDP) an [`EchoServer`] received.
#[derive(Clone, Debug)]
pub struct EchoEvent {
    pub client: String,
    pub bytes: u64,
    /// The first 256 bytes (latin-1).
    pub head: String,
}

/// A TCP or UDP echo server process, killed on drop. A TCP connection is logged when it
/// closes, a datagram when it arrives.
pub struct EchoServer {
    process: Process,
    addr: SocketAddr,
    udp: bool,
}

impl EchoServer {
    fn spawn(netns: Option<&str>, bind: IpAddr, reach: IpAddr, port: u16, udp: bool) -> EchoServer {
        let mode = if udp { "udp-echo" } else { "tcp-echo" };
        let args = [
            "--mode".to_string(),
            mode.to_string(),
            "--bind".to_string(),
            bind.to_string(),
            "--port".to_string(),
            port.to_string(),
        ];
        let label = format!("{mode} server on {reach}:{port} (netns {netns:?})");
        let (process, port) = Process::spawn(netns, label, &args);
        let server = EchoServer {
            process,
            addr: SocketAddr::new(reach, port),
            udp,
        };
        let ready = wait_for(READY_TIMEOUT, || {
            let got = if udp {
                server.udp_roundtrip(PROBE, Duration::from_millis(500))
            } else {
                server.tcp_roundtrip(PROBE)
            };
            (got.as_deref() == Some(PROBE)).then_some(())
        });
        if ready.is_none() {
            panic!(
                "{} does not echo; stderr:\n{}",
                server.process.label,
                server.process.stderr()
            );
        }
        server
    }

    /// Sends `data` from the host and returns what came back (`None` on any error).
    pub fn roundtrip(&self, data: &[u8]) -> Option<Vec<u8>> {
        if self.udp {
            self.udp_roundtrip(data, Duration::from_secs(2))
        } else {
            self.tcp_roundtrip(data)
        }
    }

    fn tcp_roundtrip(&self, data: &[u8]) -> Option<Vec<u8>> {
        let mut s = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        s.write_all(data).ok()?;
        s.shutdown(Shutdown::Write).ok()?;
        let mut back = Vec::new();
        s.read_to_end(&mut back).ok()?;
        Some(back)
    }

    fn udp_roundtrip(&self, data: &[u8], timeout: Duration) -> Option<Vec<u8>> {
        let local: SocketAddr = if self.addr.is_ipv6() {
            "[::]:0".parse().ok()?
        } else {
            "0.0.0.0:0".parse().ok()?
        };
        let s = UdpSocket::bind(local).ok()?;
        s.set_read_timeout(Some(timeout)).ok()?;
        s.send_to(data, self.addr).ok()?;
        let mut buf = vec![0u8; 65536];
        let (n, _) = s.recv_from(&mut buf).ok()?;
        buf.truncate(n);
        Some(buf)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Every connection or datagram so far (not the harness's probes), oldest first.
    pub fn events(&self) -> Vec<EchoEvent> {
        self.process
            .log()
            .into_iter()
            .map(|v| EchoEvent {
                client: v["client"].as_str().unwrap_or_default().to_string(),
                bytes: v["bytes"].as_u64().unwrap_or(0),
                head: v["head"].as_str().unwrap_or_default().to_string(),
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// /etc/hosts

/// One line `ADDR NAME # warden-tests PID N` appended to `/etc/hosts`; drop removes exactly
/// that line (and nothing else), editing the file in place under a lock (a process-wide mutex
/// and `flock` on `/etc/hosts` itself).
pub struct HostsEntry {
    line: String,
    /// A newline was added before the line because the file did not end with one.
    added_newline: bool,
    addr: IpAddr,
    name: String,
}

impl HostsEntry {
    /// Appends `ADDR NAME` to `/etc/hosts`. Panics when `name` is not a plain host name.
    pub fn add(addr: IpAddr, name: &str) -> HostsEntry {
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')),
            "not a host name for /etc/hosts: {name:?}"
        );
        let n = HOSTS_COUNTER.fetch_add(1, Ordering::Relaxed);
        let line = format!("{addr} {name} {HOSTS_MARK} {} {n}", std::process::id());
        let _process = lock(&HOSTS_LOCK);
        let mut file = open_hosts();
        remove_lines(&mut file, stale_hosts_line);
        let content = read_all(&mut file);
        let added_newline = !content.is_empty() && !content.ends_with('\n');
        let text = format!("{}{line}\n", if added_newline { "\n" } else { "" });
        file.seek(SeekFrom::End(0))
            .and_then(|_| file.write_all(text.as_bytes()))
            .and_then(|_| file.sync_data())
            .unwrap_or_else(|e| panic!("cannot append to {HOSTS_FILE}: {e}"));
        HostsEntry {
            line,
            added_newline,
            addr,
            name: name.to_string(),
        }
    }

    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The exact line added (without its newline).
    pub fn line(&self) -> &str {
        &self.line
    }
}

impl Drop for HostsEntry {
    fn drop(&mut self) {
        let _process = lock(&HOSTS_LOCK);
        let mut file = match OpenOptions::new().read(true).write(true).open(HOSTS_FILE) {
            Ok(f) => f,
            Err(e) => {
                eprintln!(
                    "warden-tests: cannot open {HOSTS_FILE} to remove {:?}: {e}",
                    self.line
                );
                return;
            }
        };
        if let Err(e) = file.lock() {
            eprintln!("warden-tests: cannot lock {HOSTS_FILE}: {e}");
            return;
        }
        let content = read_all(&mut file);
        let ours = format!("{}\n", self.line);
        let Some(start) = content
            .match_indices(&ours)
            .map(|(i, _)| i)
            .find(|&i| i == 0 || content.as_bytes()[i - 1] == b'\n')
        else {
            eprintln!("warden-tests: {:?} is no longer in {HOSTS_FILE}", self.line);
            return;
        };
        let end = start + ours.len();
        // Restore a missing final newline only if the line is still the last one.
        let start = if self.added_newline && end == content.len() && start > 0 {
            start - 1
        } else {
            start
        };
        let new = format!("{}{}", &content[..start], &content[end..]);
        if let Err(e) = rewrite_from(&mut file, &new, start) {
            eprintln!(
                "warden-tests: cannot remove {:?} from {HOSTS_FILE}: {e}",
                self.line
            );
        }
    }
}

/// `/etc/hosts` opened for reading and writing and locked (`flock`, released on close).
fn open_hosts() -> File {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(HOSTS_FILE)
        .unwrap_or_else(|e| panic!("cannot open {HOSTS_FILE}: {e}"));
    file.lock()
        .unwrap_or_else(|e| panic!("cannot lock {HOSTS_FILE}: {e}"));
    file
}

fn read_all(file: &mut File) -> String {
    let mut content = String::new();
    file.seek(SeekFrom::Start(0))
        .and_then(|_| file.read_to_string(&mut content))
        .unwrap_or_else(|e| panic!("cannot read {HOSTS_FILE}: {e}"));
    content
}

/// Whether `line` is one the harness added for a test process that no longer exists.
fn stale_hosts_line(line: &str) -> bool {
    let Some((_, mark)) = line.split_once(HOSTS_MARK) else {
        return false;
    };
    mark.split_whitespace()
        .next()
        .and_then(|p| p.parse::<u32>().ok())
        .is_some_and(|pid| !pid_alive(pid))
}

/// Removes the lines `drop` selects, in place.
fn remove_lines(file: &mut File, drop: impl Fn(&str) -> bool) {
    let content = read_all(file);
    let mut new = String::with_capacity(content.len());
    let mut first_change = None;
    for line in content.split_inclusive('\n') {
        if drop(line.trim_end_matches('\n')) {
            first_change.get_or_insert(new.len());
            eprintln!("warden-tests: removing stale {HOSTS_FILE} line {line:?}");
        } else {
            new.push_str(line);
        }
    }
    if let Some(start) = first_change {
        rewrite_from(file, &new, start)
            .unwrap_or_else(|e| panic!("cannot rewrite {HOSTS_FILE}: {e}"));
    }
}

/// Makes the file's content `new`, which equals the current content before byte `start`:
/// writes only from `start` on, then truncates. The file stays the same inode (a bind-mounted
/// `/etc/hosts` cannot be replaced by a rename).
fn rewrite_from(file: &mut File, new: &str, start: usize) -> std::io::Result<()> {
    file.seek(SeekFrom::Start(start as u64))?;
    file.write_all(&new.as_bytes()[start..])?;
    file.set_len(new.len() as u64)?;
    file.sync_data()
}

//! `cargo xtask bench proxy`: throughput and per-request latency through warden's proxy,
//! against the same transfers made directly and through srt's proxy, in the same run.
//!
//! The server is a small HTTP/1.1 server (keep-alive, `GET /bytes/N` sends N deterministic
//! bytes from a 1 MiB buffer, `GET /small` two bytes), so it is never the bottleneck. Every
//! variant runs curl; curl itself reports the transfer's speed and each request's total time
//! (`-w`), so the sandboxes' start-up time is not counted. Phases: the server in this process
//! on 127.0.0.1 (bound by the CPU: curl, the server and the proxy share two cores), then, as
//! root, the server in a network namespace of its own behind a veth pair — unshaped, and
//! shaped with tbf to 10 and 1 Gbit/s, the speeds of fast real links. warden and srt allow
//! exactly the server's address (warden's rebinding guard lets loopback through only because
//! the settings name it explicitly).

use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

/// Bytes of the large download.
const BIG: u64 = 256 * 1024 * 1024;
/// Sequential small requests per run (one curl, kept alive).
const SMALL: usize = 200;
/// Rounds when `--rounds` is not given; each round runs every variant once, in rotating
/// order.
pub const ROUNDS: usize = 5;

struct Variant {
    name: &'static str,
    /// argv before `sh -c SCRIPT`.
    prefix: Vec<String>,
    /// curl options that route through this variant's proxy.
    proxy_opts: &'static str,
    failed: Option<String>,
    speeds: Vec<f64>,
    latencies: Vec<f64>,
}

/// Where the server is for one phase of the benchmark.
struct Phase {
    /// The section heading.
    title: String,
    /// How the server is reached, for the report.
    note: String,
    host: String,
    port: u16,
}

pub fn run(warden: &Path, tmp: &Path, rounds: usize) -> Result<ExitCode> {
    let port = serve()?;
    let loopback = Phase {
        title: "Loopback".into(),
        note: format!(
            "the server in this process on 127.0.0.1:{port}: the transfer is bound by the CPU"
        ),
        host: "127.0.0.1".into(),
        port,
    };
    // The server in a network namespace of its own behind a veth pair: a path like a real
    // network's, unshaped and then shaped to the speeds of fast real links (tbf on both ends).
    let link = if super::is_root() {
        match Link::create() {
            Ok(link) => Some(link),
            Err(e) => {
                println!("bench proxy: warning: no veth link ({e:#}); loopback only");
                None
            }
        }
    } else {
        println!("bench proxy: not root: no veth link phases (they create a network namespace)");
        None
    };
    let mut warden_failed = false;
    let mut report = String::new();
    let rates: &[Option<&str>] = if link.is_some() {
        &[None, Some("10gbit"), Some("1gbit")]
    } else {
        &[]
    };
    let (section, failed) = measure(&loopback, warden, &tmp.join("loopback"), rounds)?;
    warden_failed |= failed;
    report.push_str(&section);
    if let Some(link) = &link {
        for (i, rate) in rates.iter().enumerate() {
            link.shape(*rate)?;
            let phase = Phase {
                title: match rate {
                    None => "veth link, unshaped".into(),
                    Some(r) => format!("veth link shaped to {}", r.replace("gbit", " Gbit/s")),
                },
                note: format!(
                    "the server in network namespace `{}` at {}:{} over a veth pair{}",
                    link.netns,
                    Link::SERVER,
                    Link::PORT,
                    match rate {
                        None => String::from(" (no qdisc: bound by the CPU like loopback)"),
                        Some(r) => format!(", `tc qdisc … tbf rate {r}` on both ends"),
                    }
                ),
                host: Link::SERVER.into(),
                port: Link::PORT,
            };
            let (section, failed) = measure(&phase, warden, &tmp.join(format!("link{i}")), rounds)?;
            warden_failed |= failed;
            report.push_str(&section);
        }
    }
    drop(link);
    println!("\n{report}");
    let out = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(|r| r.join("target").join("bench-proxy.md"))
        .unwrap_or_else(|| PathBuf::from("bench-proxy.md"));
    std::fs::write(&out, &report)?;
    println!("bench proxy: written to {}", out.display());
    Ok(if warden_failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Runs every variant against `phase`'s server; returns the report's section and whether a
/// warden variant (or direct) failed.
fn measure(phase: &Phase, warden: &Path, tmp: &Path, rounds: usize) -> Result<(String, bool)> {
    let Phase { host, port, .. } = phase;
    let project = tmp.join("project");
    let home = tmp.join("home");
    std::fs::create_dir_all(&project)?;
    std::fs::create_dir_all(home.join(".config"))?;
    let srt_settings = home.join("srt-settings.json");
    std::fs::write(
        &srt_settings,
        format!(
            r#"{{"filesystem":{{"denyRead":[],"allowWrite":["."],"denyWrite":[]}},"network":{{"allowedDomains":["{host}"],"deniedDomains":[]}}}}"#
        ),
    )?;
    let config = project.join("small.curl");
    let mut small = String::new();
    for _ in 0..SMALL {
        small.push_str(&format!(
            "url = \"http://{host}:{port}/small\"\noutput = \"/dev/null\"\n"
        ));
    }
    std::fs::write(&config, small)?;

    let warden_prefix = vec![
        warden.display().to_string(),
        "run".into(),
        "--allow-domain".into(),
        host.clone(),
        "--".into(),
    ];
    let srt_prefix = vec![
        "srt".into(),
        "--settings".into(),
        srt_settings.display().to_string(),
        "--".into(),
    ];
    let variant = |name, prefix: &Vec<String>, proxy_opts| Variant {
        name,
        prefix: prefix.clone(),
        proxy_opts,
        failed: None,
        speeds: vec![],
        latencies: vec![],
    };
    // NO_PROXY names 127.0.0.1 inside both sandboxes: `--noproxy ''` forces the proxy.
    // `-p` makes curl tunnel plain HTTP through CONNECT.
    let mut variants = vec![
        variant("direct", &vec![], "--noproxy '*'"),
        variant(
            "warden, HTTP forward",
            &warden_prefix,
            "--noproxy '' -x \"$HTTP_PROXY\"",
        ),
        variant(
            "warden, CONNECT",
            &warden_prefix,
            "-p --noproxy '' -x \"$HTTP_PROXY\"",
        ),
        variant(
            "warden, SOCKS5",
            &warden_prefix,
            "--noproxy '' -x \"$ALL_PROXY\"",
        ),
        variant(
            "srt, HTTP forward",
            &srt_prefix,
            "--noproxy '' -x \"$HTTP_PROXY\"",
        ),
        variant(
            "srt, CONNECT",
            &srt_prefix,
            "-p --noproxy '' -x \"$HTTP_PROXY\"",
        ),
    ];
    let big_url = format!("http://{host}:{port}/bytes/{BIG}");
    for round in 0..rounds {
        for i in 0..variants.len() {
            let n = variants.len();
            let v = &mut variants[(i + round) % n];
            if v.failed.is_some() {
                continue;
            }
            let script = format!(
                "curl -sS -o /dev/null {opts} -w '%{{speed_download}}\\n' '{big_url}' && \
                 curl -sS {opts} -w '%{{time_total}}\\n' -K '{}'",
                config.display(),
                opts = v.proxy_opts
            );
            match run_variant(v, &script, &project, &home) {
                Ok(lines) => {
                    let mut nums = lines.iter().filter_map(|l| l.trim().parse::<f64>().ok());
                    if let Some(speed) = nums.next() {
                        v.speeds.push(speed);
                    }
                    v.latencies.extend(nums);
                }
                Err(e) => {
                    println!(
                        "bench proxy: {}: {} failed, left out: {e:#}",
                        phase.title, v.name
                    );
                    v.failed = Some(format!("{e:#}"));
                }
            }
        }
        println!(
            "bench proxy: {}: round {}/{rounds} done",
            phase.title,
            round + 1
        );
    }
    let section = format!(
        "### {}\n\n{}.\n\n{}",
        phase.title,
        phase.note,
        report(&variants, rounds)
    );
    let failed = variants
        .iter()
        .any(|v| (v.name == "direct" || v.name.starts_with("warden")) && v.failed.is_some());
    Ok((section, failed))
}

fn run_variant(v: &Variant, script: &str, project: &Path, home: &Path) -> Result<Vec<String>> {
    let mut argv = v.prefix.clone();
    argv.extend(["sh".into(), "-c".into(), script.to_string()]);
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(project)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("WARDEN_MANAGED_SETTINGS", home.join("managed.json"))
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", argv[0]))?;
    if !out.status.success() {
        bail!(
            "exit {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    if lines.len() != SMALL + 1 {
        bail!(
            "expected {} result lines, got {}: {}",
            SMALL + 1,
            lines.len(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(lines)
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    if s.is_empty() {
        f64::NAN
    } else {
        s[s.len() / 2]
    }
}

fn pct(v: &[f64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    super::percentile(&s, p)
}

fn report(variants: &[Variant], rounds: usize) -> String {
    let mib = |bps: f64| bps / (1024.0 * 1024.0);
    let direct_speed = median(&variants[0].speeds);
    let direct_p50 = pct(&variants[0].latencies, 50.0) * 1000.0;
    let mut r = format!(
        "| variant | 256 MiB download, median of {rounds} (MiB/s) | vs direct | {SMALL} sequential requests × {rounds}: p50 (ms) | p90 (ms) | added p50 (ms) |\n| --- | ---: | ---: | ---: | ---: | ---: |\n"
    );
    for v in variants {
        if let Some(why) = &v.failed {
            r.push_str(&format!(
                "| {} | failed: {} | | | | |\n",
                v.name,
                why.lines().next().unwrap_or("")
            ));
            continue;
        }
        let s = median(&v.speeds);
        let p50 = pct(&v.latencies, 50.0) * 1000.0;
        let p90 = pct(&v.latencies, 90.0) * 1000.0;
        r.push_str(&format!(
            "| {} | {:.0} | {:.0} % | {:.3} | {:.3} | {:+.3} |\n",
            v.name,
            mib(s),
            100.0 * s / direct_speed,
            p50,
            p90,
            p50 - direct_p50
        ));
    }
    let srt_best = variants
        .iter()
        .filter(|v| v.name.starts_with("srt") && v.failed.is_none())
        .map(|v| median(&v.speeds))
        .fold(f64::NAN, f64::max);
    r.push_str("\nTargets (issue #4), per warden mode:\n\n");
    for w in variants
        .iter()
        .filter(|v| v.name.starts_with("warden") && v.failed.is_none())
    {
        let ws = median(&w.speeds);
        let added = pct(&w.latencies, 50.0) * 1000.0 - direct_p50;
        r.push_str(&format!(
            "- {}: {:.0} % of direct (≥ 90 %: {}); {:.1}× srt's best (≥ 2×: {}); added p50 {added:+.3} ms (≤ 1 ms: {})\n",
            w.name,
            100.0 * ws / direct_speed,
            met(ws >= 0.9 * direct_speed),
            ws / srt_best,
            if srt_best >= 0.9 * direct_speed {
                "n/a: srt too reaches the link's speed, 2× is not possible here"
            } else {
                met(srt_best.is_nan() || ws >= 2.0 * srt_best)
            },
            met(added <= 1.0)
        ));
    }
    r
}

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "**not met**"
    }
}

/// Starts the benchmark's HTTP server on 127.0.0.1; returns its port.
fn serve() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let _ = connection(stream);
            });
        }
    });
    Ok(port)
}

fn connection(stream: TcpStream) -> std::io::Result<()> {
    let _ = stream.set_nodelay(true);
    let chunk: Vec<u8> = (0..1024 * 1024).map(|i| (i % 251) as u8).collect();
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        // Skip the headers.
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
                break;
            }
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/");
        let target = path
            .rsplit_once("://")
            .map_or(path, |(_, rest)| rest.find('/').map_or("/", |i| &rest[i..]));
        if let Some(n) = target
            .strip_prefix("/bytes/")
            .and_then(|n| n.parse::<u64>().ok())
        {
            write!(out, "HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n")?;
            let mut left = n;
            while left > 0 {
                let k = left.min(chunk.len() as u64) as usize;
                out.write_all(&chunk[..k])?;
                left -= k as u64;
            }
        } else {
            out.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")?;
        }
    }
}

/// A network namespace holding the benchmark's server, reached from the host over a veth
/// pair; removed (server, namespace, both ends of the pair) when dropped.
struct Link {
    netns: String,
    host_end: String,
    server: Option<std::process::Child>,
}

impl Link {
    const HOST: &'static str = "10.251.0.1";
    const SERVER: &'static str = "10.251.0.2";
    const PORT: u16 = 8080;

    fn create() -> Result<Link> {
        let id = std::process::id() % 100_000;
        let mut link = Link {
            netns: format!("wbench-{id}"),
            host_end: format!("wbh{id}"),
            server: None,
        };
        let server_end = format!("wbs{id}");
        let ns = link.netns.clone();
        ip(&["netns", "add", &ns])?;
        ip(&[
            "link",
            "add",
            &link.host_end,
            "type",
            "veth",
            "peer",
            "name",
            &server_end,
            "netns",
            &ns,
        ])?;
        ip(&[
            "addr",
            "add",
            &format!("{}/30", Link::HOST),
            "dev",
            &link.host_end,
        ])?;
        ip(&["link", "set", &link.host_end, "up"])?;
        ip(&[
            "-n",
            &ns,
            "addr",
            "add",
            &format!("{}/30", Link::SERVER),
            "dev",
            &server_end,
        ])?;
        ip(&["-n", &ns, "link", "set", &server_end, "up"])?;
        ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        let exe = std::env::current_exe()?;
        let mut child = Command::new("ip")
            .args(["netns", "exec", &ns])
            .arg(exe)
            .args(["__bench-serve", &format!("{}:{}", Link::SERVER, Link::PORT)])
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .context("starting the server in the namespace")?;
        // The server prints one line once it listens.
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            BufReader::new(out).read_line(&mut line)?;
        }
        link.server = Some(child);
        if !line.starts_with("listening") {
            bail!("the server in {ns} did not start");
        }
        Ok(link)
    }

    /// `rate` on both ends of the pair (tbf), or no qdisc at all.
    fn shape(&self, rate: Option<&str>) -> Result<()> {
        let server_end = self.host_end.replacen("wbh", "wbs", 1);
        for (ns, dev) in [
            (None, self.host_end.as_str()),
            (Some(self.netns.as_str()), server_end.as_str()),
        ] {
            let mut args: Vec<&str> = Vec::new();
            if let Some(ns) = ns {
                args.extend(["-n", ns]);
            }
            // Removing a qdisc that is not there fails: ignored.
            let mut del = args.clone();
            del.extend(["qdisc", "del", "dev", dev, "root"]);
            let _ = Command::new("tc").args(&del).stderr(Stdio::null()).status();
            if let Some(rate) = rate {
                args.extend([
                    "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate, "burst", "1mb",
                    "latency", "10ms",
                ]);
                run_quiet("tc", &args)?;
            }
        }
        Ok(())
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        if let Some(mut child) = self.server.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.host_end])
            .stderr(Stdio::null())
            .status();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .stderr(Stdio::null())
            .status();
    }
}

fn ip(args: &[&str]) -> Result<()> {
    run_quiet("ip", args)
}

fn run_quiet(cmd: &str, args: &[&str]) -> Result<()> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .with_context(|| format!("running {cmd}"))?;
    if !out.status.success() {
        bail!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// `xtask __bench-serve ADDR`: the benchmark's server on ADDR (run inside the link's network
/// namespace), until killed.
pub fn serve_main(args: &[String]) -> Result<ExitCode> {
    let [addr] = args else {
        bail!("__bench-serve takes one address");
    };
    let listener = TcpListener::bind(addr.as_str()).with_context(|| format!("binding {addr}"))?;
    println!("listening on {addr}");
    std::io::stdout().flush()?;
    for stream in listener.incoming().flatten() {
        std::thread::spawn(move || {
            let _ = connection(stream);
        });
    }
    Ok(ExitCode::SUCCESS)
}

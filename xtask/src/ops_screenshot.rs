//! `cargo xtask ops-screenshot`: a picture of docs/ops/grafana-dashboard.json with real data,
//! without Grafana (which none of our package registries carries).
//!
//! It starts Prometheus (Debian's package) on a loopback port, scraping every second two
//! `warden run --metrics-addr` workloads that overlap (denied writes with a burst in the
//! middle, masked reads, denied and allowed proxy requests with bodies both ways; a second
//! run with other kinds of refusals), then asks Prometheus for every panel's queries over the
//! run (`query_range`, Grafana's variables substituted as Grafana would: all endpoints, a
//! 10 s rate interval), draws each panel as inline SVG in a static HTML page laid out by the
//! panels' `gridPos`, and screenshots that page with headless Chromium (Debian's package)
//! into docs/ops/dashboard.png. It is a rendering of the dashboard's queries, not Grafana.

use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Page width in px; the grid's 24 columns share it.
const WIDTH: f64 = 1600.0;
/// Height of one grid row (Grafana: 30 px plus the gap).
const ROW: f64 = 36.0;
const GAP: f64 = 8.0;
/// What Grafana's `$__rate_interval` becomes (Grafana: at least four scrape intervals).
const RATE_INTERVAL: &str = "10s";
/// Grafana's classic palette.
const COLORS: &[&str] = &[
    "#7EB26D", "#EAB839", "#6ED0E0", "#EF843C", "#E24D42", "#1F78C1", "#BA43A9", "#705DA0",
    "#508642", "#CCA300", "#447EBC", "#C15C17",
];

/// The main workload (about 70 s): per round a few denied writes (40 in rounds 50–79, the
/// burst), every 3rd a masked read, every 2nd a request the proxy denies, a GET of
/// Prometheus' /metrics (bytes down) and every 4th a POSTed query (bytes up), through
/// warden's proxy to the host's loopback (allowed by name).
const MAIN_SCRIPT: &str = r#"i=0
while [ $i -lt 160 ]; do
  n=3; if [ $i -ge 50 ] && [ $i -lt 80 ]; then n=40; fi
  j=0; while [ $j -lt $n ]; do echo x > /etc/warden-ops-$j 2>/dev/null; j=$((j+1)); done
  if [ $((i % 3)) -eq 0 ]; then cat "$SECRET" >/dev/null 2>&1; fi
  if [ $((i % 2)) -eq 0 ]; then curl -s -o /dev/null --max-time 5 --noproxy '' -x "$HTTP_PROXY" http://denied.invalid/; fi
  curl -s -o /dev/null --max-time 5 --noproxy '' -x "$HTTP_PROXY" "http://127.0.0.1:$PROM_PORT/metrics"
  if [ $((i % 4)) -eq 0 ]; then curl -s -o /dev/null --max-time 5 --noproxy '' -x "$HTTP_PROXY" --data-urlencode "query=up" "http://127.0.0.1:$PROM_PORT/api/v1/query"; fi
  sleep 0.3
  i=$((i+1))
done"#;

/// The second workload (about 30 s, from 20 s in): other refusals — mkdir, unlink, symlink
/// and chmod on the read-only host, and `unshare`, which seccomp refuses.
const SECOND_SCRIPT: &str = r#"i=0
while [ $i -lt 50 ]; do
  mkdir /usr/warden-ops 2>/dev/null; rm -f /etc/hostname 2>/dev/null
  ln -s /x /etc/warden-ops-link 2>/dev/null; chmod 777 /etc/passwd 2>/dev/null
  unshare -U true 2>/dev/null
  sleep 0.5
  i=$((i+1))
done"#;

pub fn run(warden: &Path, png: &Path, html_out: &Path) -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."));
    let dash_path = root.join("docs/ops/grafana-dashboard.json");
    let dash: Value = serde_json::from_str(
        &std::fs::read_to_string(&dash_path)
            .with_context(|| format!("reading {}", dash_path.display()))?,
    )
    .with_context(|| format!("parsing {}", dash_path.display()))?;

    let tmp = tempfile::Builder::new()
        .prefix("warden-ops-screenshot-")
        .tempdir()?;
    let ports = [free_port()?, free_port()?];
    let targets: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let prom = Prometheus::start(tmp.path(), &targets, &root.join("docs/ops/alerts.yml"))?;
    println!(
        "ops-screenshot: prometheus on 127.0.0.1:{}, scraping {} every second",
        prom.port,
        targets.join(" and ")
    );

    let home = tmp.path().join("home");
    let project = tmp.path().join("project");
    std::fs::create_dir_all(home.join(".config"))?;
    std::fs::create_dir_all(&project)?;
    let settings = tmp.path().join("audit.json");
    std::fs::write(
        &settings,
        r#"{ "warden": { "audit": { "required": true } } }"#,
    )?;
    let secret = tmp.path().join("secret.txt");
    std::fs::write(&secret, "top secret\n")?;
    let spawn = |target: &str, script: &str, log: &str| -> Result<Child> {
        let log = std::fs::File::create(tmp.path().join(log))?;
        let mut cmd = Command::new(warden);
        cmd.arg("run")
            .arg("--settings")
            .arg(&settings)
            .args(["--metrics-addr", target, "--allow-domain", "127.0.0.1"])
            .arg("--deny-read")
            .arg(&secret)
            .args(["--", "sh", "-c", script])
            .current_dir(&project)
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("WARDEN_MANAGED_SETTINGS", tmp.path().join("managed.json"))
            .env("SECRET", &secret)
            .env("PROM_PORT", prom.port.to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        for var in [
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "http_proxy",
            "https_proxy",
            "ALL_PROXY",
            "all_proxy",
            "NO_PROXY",
            "no_proxy",
        ] {
            cmd.env_remove(var);
        }
        cmd.spawn().context("starting warden")
    };
    let start = now();
    println!("ops-screenshot: running the workloads (about 80 s)");
    let mut main = Workload(spawn(&targets[0], MAIN_SCRIPT, "main.log")?);
    std::thread::sleep(Duration::from_secs(20));
    let mut second = Workload(spawn(&targets[1], SECOND_SCRIPT, "second.log")?);
    let deadline = Instant::now() + Duration::from_secs(300);
    for (w, log) in [(&mut main, "main.log"), (&mut second, "second.log")] {
        let status = loop {
            if let Some(s) = w.0.try_wait()? {
                break s;
            }
            if Instant::now() > deadline {
                bail!("the workloads did not end in 5 minutes");
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        if !status.success() {
            bail!(
                "warden failed ({status}):\n{}",
                std::fs::read_to_string(tmp.path().join(log)).unwrap_or_default()
            );
        }
    }
    let end = now();
    std::thread::sleep(Duration::from_secs(2));

    // Every panel's queries over the run.
    let (from, to) = (start - 5, end + 3);
    let mut panels = Vec::new();
    for p in dash["panels"].as_array().context("no panels")? {
        let mut series = Vec::new();
        for t in p["targets"].as_array().context("a panel without targets")? {
            let expr = t["expr"].as_str().context("a target without expr")?;
            let expr = expr
                .replace("$__rate_interval", RATE_INTERVAL)
                .replace("$instance", ".+");
            let result = prom.query_range(&expr, from, to, 1)?;
            if result.is_empty() {
                println!(
                    "ops-screenshot: warning: no data for {:?}: {expr}",
                    p["title"]
                );
            }
            let legend = t["legendFormat"].as_str().unwrap_or("");
            for s in result {
                let points: Vec<(f64, f64)> = s["values"]
                    .as_array()
                    .map(|v| {
                        v.iter()
                            .filter_map(|pt| {
                                let t = pt[0].as_f64()?;
                                let v: f64 = pt[1].as_str()?.parse().ok()?;
                                v.is_finite().then_some((t, v))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                series.push(Series {
                    name: legend_of(legend, &s["metric"]),
                    points,
                });
            }
        }
        panels.push((p.clone(), series));
    }
    drop(prom);

    let (html, height) = render(&dash, &panels, from as f64, to as f64);
    std::fs::write(html_out, &html)?;
    println!("ops-screenshot: page written to {}", html_out.display());
    let profile = tmp.path().join("chromium");
    let mut shot = Command::new("chromium");
    shot.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .arg(format!("--screenshot={}", png.display()))
    .arg(format!(
        "--window-size={},{}",
        WIDTH as u32,
        height.ceil() as u32
    ))
    .arg(format!("file://{}", html_out.display()))
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    println!("ops-screenshot: {}", super::show(&shot));
    let out = shot.output().context("starting chromium")?;
    if !out.status.success() || !png.is_file() {
        bail!(
            "chromium failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    println!("ops-screenshot: screenshot written to {}", png.display());
    Ok(())
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A warden run, killed (by its own pid) if it is still running when dropped.
struct Workload(Child);

impl Drop for Workload {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

struct Prometheus {
    child: Child,
    port: u16,
}

impl Prometheus {
    fn start(dir: &Path, targets: &[String], rules: &Path) -> Result<Prometheus> {
        let config = dir.join("prometheus.yml");
        let list = targets
            .iter()
            .map(|t| format!("'{t}'"))
            .collect::<Vec<_>>()
            .join(", ");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n\
                 rule_files:\n  - {}\n\
                 scrape_configs:\n  - job_name: warden\n    static_configs:\n      - targets: [{list}]\n",
                rules.display()
            ),
        )?;
        let port = free_port()?;
        let log = std::fs::File::create(dir.join("prometheus.log"))?;
        let mut cmd = Command::new("prometheus");
        cmd.arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("prometheus-data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        println!("ops-screenshot: {}", super::show(&cmd));
        let child = cmd
            .spawn()
            .context("starting prometheus (Debian: apt-get install prometheus)")?;
        let mut p = Prometheus { child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some((200, _)) = http_get(port, "/-/ready") {
                return Ok(p);
            }
            if let Some(status) = p.child.try_wait()? {
                bail!(
                    "prometheus exited ({status}): {}",
                    std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
                );
            }
            if Instant::now() > deadline {
                bail!("prometheus was not ready in 30 s");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn query_range(&self, expr: &str, from: u64, to: u64, step: u64) -> Result<Vec<Value>> {
        let path = format!(
            "/api/v1/query_range?query={}&start={from}&end={to}&step={step}",
            url_encode(expr)
        );
        let (status, body) =
            http_get(self.port, &path).with_context(|| format!("prometheus: {expr}"))?;
        let json: Value = serde_json::from_str(&body).with_context(|| format!("{expr}: {body}"))?;
        if status != 200 || json["status"] != "success" {
            bail!("{expr}: {status} {body}");
        }
        Ok(json["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn url_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// `GET path` on 127.0.0.1:`port` over HTTP/1.0 (never chunked): status and body.
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}

// ---------------------------------------------------------------------------------------------
// Rendering

struct Series {
    name: String,
    points: Vec<(f64, f64)>,
}

/// Grafana's legend format: `{{label}}` replaced by the series' label; without a format, the
/// labels themselves.
fn legend_of(format: &str, metric: &Value) -> String {
    if format.is_empty() {
        return metric.to_string();
    }
    let mut out = format.to_string();
    if let Some(labels) = metric.as_object() {
        for (k, v) in labels {
            out = out.replace(&format!("{{{{{k}}}}}"), v.as_str().unwrap_or(""));
        }
    }
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `v` in the panel's unit, as Grafana shows it (roughly).
fn format_value(v: f64, unit: &str, decimals: Option<u64>) -> String {
    let si = |v: f64, suffix: &str| {
        let (v, prefix) = match v.abs() {
            a if a >= 1e9 => (v / 1e9, "G"),
            a if a >= 1e6 => (v / 1e6, "M"),
            a if a >= 1e3 => (v / 1e3, "k"),
            _ => (v, ""),
        };
        let d = decimals.unwrap_or(if v.abs() >= 100.0 || v == v.trunc() {
            0
        } else if v.abs() >= 10.0 {
            1
        } else {
            2
        }) as usize;
        format!("{v:.d$}{prefix}{suffix}")
    };
    match unit {
        "ops" => si(v, " ops/s"),
        "reqps" => si(v, " req/s"),
        "Bps" => si(v, " B/s"),
        "s" if v.abs() < 1.0 && v != 0.0 => format!("{:.0} ms", v * 1e3),
        "s" => format!("{v:.2} s"),
        _ => si(v, ""),
    }
}

/// The smallest 1, 2 or 5 × 10^k at least `v`.
fn nice_ceiling(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * mag >= v * 0.999_999 {
            return m * mag;
        }
    }
    10.0 * mag
}

fn clock(t: f64) -> String {
    let s = t as u64 % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// The page and its height in px.
fn render(dash: &Value, panels: &[(Value, Vec<Series>)], from: f64, to: f64) -> (String, f64) {
    let header = 64.0;
    let col = (WIDTH - GAP) / 24.0;
    let mut body = String::new();
    let mut bottom: f64 = 0.0;
    for (p, series) in panels {
        let g = &p["gridPos"];
        let num = |k: &str| g[k].as_f64().unwrap_or(0.0);
        let (x, y, w, h) = (num("x"), num("y"), num("w"), num("h"));
        let left = GAP + x * col;
        let top = header + y * ROW;
        let width = w * col - GAP;
        let height = h * ROW - GAP;
        bottom = bottom.max(top + height);
        let title = p["title"].as_str().unwrap_or("");
        let unit = p["fieldConfig"]["defaults"]["unit"]
            .as_str()
            .unwrap_or("short");
        let decimals = p["fieldConfig"]["defaults"]["decimals"].as_u64();
        let _ = write!(
            body,
            "<div class=\"panel\" style=\"left:{left:.1}px;top:{top:.1}px;width:{width:.1}px;height:{height:.1}px\">\
             <div class=\"title\">{}</div>",
            escape(title)
        );
        if p["type"] == "stat" {
            let bad_above_zero = title.contains("dropped");
            body.push_str(&stat(
                series,
                unit,
                decimals,
                bad_above_zero,
                width,
                height - 30.0,
                from,
                to,
            ));
        } else {
            let stacked = p["fieldConfig"]["defaults"]["custom"]["stacking"]["mode"] == "normal";
            body.push_str(&chart(
                series,
                unit,
                decimals,
                stacked,
                width,
                height - 30.0,
                from,
                to,
            ));
        }
        body.push_str("</div>");
    }
    let height = bottom + GAP + 28.0;
    let title = dash["title"].as_str().unwrap_or("dashboard");
    let html = format!(
        r#"<!doctype html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ margin:0; background:#111217; color:#ccccdc; font-family:Inter,"DejaVu Sans",Helvetica,Arial,sans-serif; width:{WIDTH}px; height:{height}px; position:relative; overflow:hidden; }}
.head {{ position:absolute; left:{GAP}px; top:10px; right:{GAP}px; }}
.head h1 {{ font-size:18px; margin:0 0 4px 0; color:#e6e6ef; font-weight:500; }}
.head div {{ font-size:12px; color:#8e8e9e; }}
.panel {{ position:absolute; background:#181b1f; border:1px solid #2a2d33; border-radius:3px; box-sizing:border-box; overflow:hidden; }}
.title {{ font-size:13px; font-weight:500; color:#ccccdc; padding:6px 8px 0 8px; height:22px; white-space:nowrap; overflow:hidden; }}
.legend {{ font-size:11px; color:#ccccdc; padding:0 8px; line-height:15px; }}
.legend span {{ margin-right:12px; white-space:nowrap; }}
.legend i {{ display:inline-block; width:12px; height:3px; margin-right:4px; vertical-align:middle; }}
.stat {{ position:absolute; left:0; right:0; text-align:center; font-size:40px; font-weight:500; }}
.foot {{ position:absolute; left:{GAP}px; bottom:6px; font-size:11px; color:#6e6e7e; }}
svg text {{ fill:#8e8e9e; font-size:10px; }}
</style></head><body>
<div class="head"><h1>{title} <span style="font-size:13px;color:#8e8e9e">— a rendering of docs/ops/grafana-dashboard.json's queries (not Grafana)</span></h1>
<div>Prometheus {from_clock} – {to_clock} UTC, step 1 s; $instance = All (two overlapping <code>warden run --metrics-addr</code> workloads); $__rate_interval = {RATE_INTERVAL}</div></div>
{body}
<div class="foot">cargo xtask ops-screenshot — every panel's PromQL from the dashboard JSON, answered by a real Prometheus scraping warden every second</div>
</body></html>
"#,
        title = escape(title),
        from_clock = clock(from),
        to_clock = clock(to),
    );
    (html, height)
}

#[allow(clippy::too_many_arguments)]
fn stat(
    series: &[Series],
    unit: &str,
    decimals: Option<u64>,
    bad_above_zero: bool,
    width: f64,
    height: f64,
    from: f64,
    to: f64,
) -> String {
    let last = series
        .iter()
        .filter_map(|s| s.points.last().map(|p| p.1))
        .fold(None, |acc: Option<f64>, v| Some(acc.unwrap_or(0.0) + v));
    let text = last.map_or("No data".to_string(), |v| format_value(v, unit, decimals));
    let color = match last {
        Some(v) if v > 0.0 && bad_above_zero => "#F2495C",
        _ => "#73BF69",
    };
    let mut out = String::new();
    // The sparkline: the first series, as an area.
    if let Some(s) = series.first().filter(|s| s.points.len() > 1) {
        let max = s.points.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-9) * 1.2;
        let sx = |t: f64| (t - from) / (to - from) * width;
        let sy = |v: f64| height - v / max * height;
        let mut d = format!("M{:.1},{:.1}", sx(s.points[0].0), height);
        for (t, v) in &s.points {
            let _ = write!(d, " L{:.1},{:.1}", sx(*t), sy(*v));
        }
        let _ = write!(
            d,
            " L{:.1},{:.1} Z",
            sx(s.points[s.points.len() - 1].0),
            height
        );
        let _ = write!(
            out,
            "<svg width=\"{width:.0}\" height=\"{height:.0}\" style=\"position:absolute;left:0;top:30px\">\
             <path d=\"{d}\" fill=\"{color}\" fill-opacity=\"0.18\" stroke=\"{color}\" stroke-opacity=\"0.6\"/></svg>"
        );
    }
    let _ = write!(
        out,
        "<div class=\"stat\" style=\"top:{:.0}px;color:{color}\">{}</div>",
        30.0 + height / 2.0 - 28.0,
        escape(&text)
    );
    out
}

#[allow(clippy::too_many_arguments)]
fn chart(
    series: &[Series],
    unit: &str,
    decimals: Option<u64>,
    stacked: bool,
    width: f64,
    height: f64,
    from: f64,
    to: f64,
) -> String {
    if series.iter().all(|s| s.points.is_empty()) {
        return format!(
            "<div class=\"stat\" style=\"top:{:.0}px;font-size:16px;color:#8e8e9e\">No data</div>",
            height / 2.0
        );
    }
    // Stacking: each series on top of the ones before, at the same timestamps.
    let mut drawn: Vec<Vec<(f64, f64, f64)>> = Vec::new(); // (t, base, top)
    for s in series {
        let points = s
            .points
            .iter()
            .map(|&(t, v)| {
                let base = if stacked {
                    drawn
                        .iter()
                        .filter_map(|d| d.iter().find(|p| p.0 == t).map(|p| p.2))
                        .fold(0.0, f64::max)
                } else {
                    0.0
                };
                (t, base, base + v)
            })
            .collect();
        drawn.push(points);
    }
    let mut max = nice_ceiling(drawn.iter().flatten().map(|p| p.2).fold(0.0, f64::max));
    // Whole numbers: whole ticks (a multiple of 4 above 4, one tick per unit up to 4).
    let steps: u32 = match decimals {
        Some(0) if max <= 4.0 => max.ceil().max(1.0) as u32,
        Some(0) => {
            max = (max / 4.0).ceil() * 4.0;
            4
        }
        _ => 4,
    };
    let names: usize = series.iter().map(|s| s.name.len() + 4).sum();
    let legend_lines = ((names as f64 * 6.5) / (width - 16.0)).ceil().max(1.0);
    let legend_h = legend_lines * 15.0 + 4.0;
    let (ml, mr, mt, mb) = (64.0, 12.0, 6.0, 18.0);
    let plot_w = width - ml - mr;
    let plot_h = height - legend_h - mt - mb;
    let sx = |t: f64| ml + (t - from) / (to - from) * plot_w;
    let sy = |v: f64| mt + plot_h - v / max * plot_h;
    let mut svg = format!(
        "<svg width=\"{width:.0}\" height=\"{:.0}\">",
        height - legend_h
    );
    for i in 0..=steps {
        let v = max * f64::from(i) / f64::from(steps);
        let y = sy(v);
        let _ = write!(
            svg,
            "<line x1=\"{ml}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#2c3036\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            ml + plot_w,
            ml - 6.0,
            y + 3.5,
            escape(&format_value(v, unit, decimals))
        );
    }
    let span = to - from;
    let tick = [5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0]
        .into_iter()
        .find(|t| span / t <= plot_w / 90.0)
        .unwrap_or(600.0);
    let mut t = (from / tick).ceil() * tick;
    while t <= to {
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            sx(t),
            mt + plot_h + 13.0,
            clock(t)
        );
        t += tick;
    }
    for (i, points) in drawn.iter().enumerate() {
        if points.is_empty() {
            continue;
        }
        let color = COLORS[i % COLORS.len()];
        // Runs of consecutive points (a gap of more than two steps breaks the line).
        let mut runs: Vec<Vec<(f64, f64, f64)>> = Vec::new();
        for p in points {
            match runs.last_mut() {
                Some(run) if run.last().is_some_and(|q| p.0 - q.0 <= 2.0) => run.push(*p),
                _ => runs.push(vec![*p]),
            }
        }
        for run in runs {
            let line: Vec<String> = run
                .iter()
                .map(|p| format!("{:.1},{:.1}", sx(p.0), sy(p.2)))
                .collect();
            let base: Vec<String> = run
                .iter()
                .rev()
                .map(|p| format!("{:.1},{:.1}", sx(p.0), sy(p.1)))
                .collect();
            let _ = write!(
                svg,
                "<polygon points=\"{} {}\" fill=\"{color}\" fill-opacity=\"0.12\" stroke=\"none\"/>\
                 <polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\"/>",
                line.join(" "),
                base.join(" "),
                line.join(" ")
            );
        }
    }
    svg.push_str("</svg><div class=\"legend\">");
    for (i, s) in series.iter().enumerate() {
        let _ = write!(
            svg,
            "<span><i style=\"background:{}\"></i>{}</span>",
            COLORS[i % COLORS.len()],
            escape(&s.name)
        );
    }
    svg.push_str("</div>");
    svg
}

/// Where the screenshot goes by default, and the page beside the build.
pub fn default_paths(root: &Path, target: &Path) -> (PathBuf, PathBuf) {
    (
        root.join("docs/ops/dashboard.png"),
        target.join("ops-dashboard.html"),
    )
}

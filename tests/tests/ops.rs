//! The operations kit of issue #5 (docs/ops/): the Grafana dashboard's queries and the
//! Prometheus alert rules, checked against a real Prometheus (Debian's package `prometheus`,
//! which also brings promtool) scraping a real `warden run --metrics-addr`.
//!
//! - `promtool check rules` and `promtool test rules` (docs/ops/alerts_test.yml: each alert
//!   fires on synthetic series where it should and stays quiet where it should not);
//! - the dashboard JSON's shape (panels, targets, grid, variables; every warden selector
//!   filtered by `$instance`);
//! - as root: Prometheus on a loopback port, with the rules loaded, scraping (every second) a
//!   sandboxed workload that makes denied writes, a masked read, a denied and an allowed proxy
//!   request in a loop; then every PromQL expression of the dashboard (Grafana's variables
//!   substituted) goes through Prometheus' HTTP API as an instant and a range query and must
//!   parse and return data, the key ones the values the workload implies; every rule must be
//!   evaluated without error, the violation spike must fire and "programs not loaded" must
//!   not; and every warden metric Prometheus scraped must be on the dashboard.
//!
//! A missing prometheus or promtool, or not being root, skips loudly; under CI=true it fails.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use warden_tests::{have, is_root, ready_unless as ready, TestEnv};

/// The first of `tools` that is not on PATH, as a reason to skip.
fn missing_tool(tools: &[&str]) -> Option<String> {
    tools.iter().find(|t| !have(t)).map(|t| {
        format!("`{t}` is not installed (Debian: apt-get install prometheus; `cargo xtask setup`)")
    })
}

fn ops_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("docs")
        .join("ops")
}

fn dashboard() -> Value {
    let path = ops_dir().join("grafana-dashboard.json");
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One query of the dashboard: the panel's title, the target's refId and its PromQL.
struct Target {
    panel: String,
    ref_id: String,
    expr: String,
}

fn targets(dash: &Value) -> Vec<Target> {
    let mut out = Vec::new();
    for panel in dash["panels"].as_array().unwrap() {
        let title = panel["title"].as_str().unwrap().to_string();
        for t in panel["targets"].as_array().unwrap() {
            out.push(Target {
                panel: title.clone(),
                ref_id: t["refId"].as_str().unwrap().to_string(),
                expr: t["expr"].as_str().unwrap().to_string(),
            });
        }
    }
    out
}

/// Grafana's variables as the test's Prometheus needs them: every endpoint, and a rate
/// interval of 15 one-second scrapes.
fn substitute(expr: &str) -> String {
    let out = expr
        .replace("$__rate_interval", "15s")
        .replace("$instance", ".+");
    assert!(
        !out.contains('$'),
        "a variable the test does not know: {expr}"
    );
    out
}

/// The `warden_*` metric names an expression selects.
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("warden_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    names
}

#[test]
fn promtool_accepts_the_alert_rules_and_their_unit_tests_pass() {
    let test = "promtool_accepts_the_alert_rules_and_their_unit_tests_pass";
    if !ready(test, missing_tool(&["promtool"])) {
        return;
    }
    for args in [
        ["check", "rules", "alerts.yml"],
        ["test", "rules", "alerts_test.yml"],
    ] {
        let out = Command::new("promtool")
            .args(args)
            .current_dir(ops_dir())
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "promtool {}:\n{text}", args.join(" "));
        assert!(
            text.contains("SUCCESS"),
            "promtool {}:\n{text}",
            args.join(" ")
        );
    }
    // Every alert of the rules file has a unit test.
    let rules = std::fs::read_to_string(ops_dir().join("alerts.yml")).unwrap();
    let tests = std::fs::read_to_string(ops_dir().join("alerts_test.yml")).unwrap();
    for line in rules.lines() {
        if let Some(name) = line.trim().strip_prefix("- alert: ") {
            assert!(
                tests.contains(&format!("alertname: {name}\n")),
                "{name} has no test in alerts_test.yml"
            );
        }
    }
}

#[test]
fn the_dashboard_json_has_the_shape_grafana_imports() {
    let dash = dashboard();
    assert_eq!(dash["uid"], "warden-sandboxes");
    assert!(dash["schemaVersion"].as_u64().unwrap() >= 36);
    let vars: Vec<&str> = dash["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(vars, ["datasource", "instance"]);
    let panels = dash["panels"].as_array().unwrap();
    let mut ids = BTreeSet::new();
    let mut cells = BTreeSet::new();
    for p in panels {
        let title = p["title"].as_str().unwrap();
        assert!(
            ids.insert(p["id"].as_u64().unwrap()),
            "duplicate id: {title}"
        );
        assert!(
            matches!(p["type"].as_str(), Some("timeseries" | "stat")),
            "{title}"
        );
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{title}");
        let g = &p["gridPos"];
        let (x, y, w, h) = (
            g["x"].as_u64().unwrap(),
            g["y"].as_u64().unwrap(),
            g["w"].as_u64().unwrap(),
            g["h"].as_u64().unwrap(),
        );
        assert!(w > 0 && h > 0 && x + w <= 24, "{title}: {g}");
        for cx in x..x + w {
            for cy in y..y + h {
                assert!(cells.insert((cx, cy)), "{title} overlaps another panel");
            }
        }
        let targets = p["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{title}");
        for t in targets {
            assert_eq!(t["datasource"]["uid"], "${datasource}", "{title}");
            assert!(t["refId"].is_string(), "{title}");
        }
    }
    // Every selector of a warden metric is filtered by the endpoint variable.
    for t in targets(&dash) {
        let names = metric_names(&t.expr);
        assert!(!names.is_empty(), "{}: {}", t.panel, t.expr);
        for name in names {
            assert!(
                t.expr
                    .contains(&format!("{name}{{instance=~\"$instance\"}}")),
                "{} ({}): {name} is not filtered by $instance: {}",
                t.panel,
                t.ref_id,
                t.expr
            );
        }
    }
    // The panels the issue asks for.
    let titles: Vec<&str> = panels
        .iter()
        .map(|p| p["title"].as_str().unwrap())
        .collect();
    for want in [
        "Violations/s by kind",
        "Violations/s by layer",
        "Violations/s by operation (top 10)",
        "Network requests/s by decision",
        "Network bytes/s by direction",
        "Sandboxes active",
        "Sandbox start time",
        "eBPF events/s and drops/s",
        "eBPF programs loaded by program",
        "Approvals by decision (runs exposed)",
    ] {
        assert!(titles.contains(&want), "no panel {want:?}: {titles:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// A real Prometheus.

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn url_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `GET path` on 127.0.0.1:`port` (HTTP/1.0: the answer ends with the connection, never
/// chunked): the status and the body, `None` when nothing answers.
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}

/// Prometheus on 127.0.0.1:`port` with its data in a temporary directory; stopped (SIGTERM,
/// then SIGKILL) and removed on drop.
struct Prometheus {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Prometheus {
    /// Scrapes `target` every second and evaluates `rules` every second.
    fn start(target: &str, rules: &Path) -> Prometheus {
        let dir = tempfile::Builder::new()
            .prefix("warden-ops-prometheus-")
            .tempdir()
            .unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n\
                 rule_files:\n  - {rules}\n\
                 scrape_configs:\n  - job_name: warden\n    static_configs:\n      - targets: ['{target}']\n",
                rules = rules.display()
            ),
        )
        .unwrap();
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut p = Prometheus { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some((200, _)) = http_get(port, "/-/ready") {
                return p;
            }
            if let Some(status) = p.child.try_wait().unwrap() {
                panic!("prometheus exited ({status}):\n{}", p.log());
            }
            assert!(
                Instant::now() < deadline,
                "prometheus not ready in 30 s:\n{}",
                p.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// `GET /api/v1/...` as JSON; panics unless Prometheus answers.
    fn api(&self, path_and_query: &str) -> (u16, Value) {
        let (status, body) = http_get(self.port, &format!("/api/v1/{path_and_query}"))
            .unwrap_or_else(|| panic!("prometheus did not answer {path_and_query}"));
        let json =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path_and_query}: {e}: {body}"));
        (status, json)
    }

    /// An instant query at now; panics unless it parses and evaluates. The result vector.
    fn query(&self, expr: &str) -> Vec<Value> {
        let (status, json) = self.api(&format!("query?query={}", url_encode(expr)));
        assert!(
            status == 200 && json["status"] == "success",
            "{expr}: {status} {json}"
        );
        json["data"]["result"].as_array().unwrap().clone()
    }

    /// A range query over the last `secs` seconds, one step a second, as Grafana asks.
    fn query_range(&self, expr: &str, secs: u64) -> Vec<Value> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let (status, json) = self.api(&format!(
            "query_range?query={}&start={}&end={now}&step=1",
            url_encode(expr),
            now - secs
        ));
        assert!(
            status == 200 && json["status"] == "success",
            "{expr}: {status} {json}"
        );
        json["data"]["result"].as_array().unwrap().clone()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
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

/// The value of the sample of `result` whose labels include `labels`.
fn value(result: &[Value], labels: &[(&str, &str)]) -> Option<f64> {
    result
        .iter()
        .find(|s| labels.iter().all(|(k, v)| s["metric"][*k] == *v))
        .and_then(|s| s["value"][1].as_str()?.parse().ok())
}

/// Stops the workload (the file `stop` in its working directory ends its loop) and waits for
/// warden; its output on failure.
struct Workload {
    child: Child,
    project: PathBuf,
    log: PathBuf,
}

impl Workload {
    fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let _ = std::fs::write(self.project.join("stop"), "");
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
}

#[test]
fn the_dashboard_and_alert_queries_work_on_prometheus_scraping_a_warden_run() {
    let test = "the_dashboard_and_alert_queries_work_on_prometheus_scraping_a_warden_run";
    if !ready(
        test,
        (!is_root())
            .then(|| "not running as root (the eBPF series need root)".to_string())
            .or_else(|| missing_tool(&["prometheus", "curl"])),
    ) {
        return;
    }
    let rules = ops_dir().join("alerts.yml");
    let warden_port = free_port();
    let target = format!("127.0.0.1:{warden_port}");
    let prom = Prometheus::start(&target, &rules);

    // The workload: in a loop, 40 denied writes (read-only /etc), a masked read (denyRead),
    // a request the proxy denies (a host in no list, nobody to ask) and one it allows (to
    // Prometheus' own /-/healthy on the host's loopback, allowed by name), until the test
    // creates `stop` (at most 400 rounds, two minutes or so).
    let env = TestEnv::new();
    let settings = env
        .write_settings(
            "audit.json",
            r#"{ "warden": { "audit": { "required": true } } }"#,
        )
        .display()
        .to_string();
    let secret = env.root().join("secret.txt");
    std::fs::write(&secret, "top secret\n").unwrap();
    let script = format!(
        "i=0; while [ ! -e stop ] && [ $i -lt 400 ]; do \
           j=0; while [ $j -lt 40 ]; do echo x > /etc/warden-ops-test-$j 2>/dev/null; j=$((j+1)); done; \
           cat {secret} >/dev/null 2>&1; \
           curl -s -o /dev/null --max-time 5 --noproxy '' -x \"$HTTP_PROXY\" http://denied.invalid/; \
           curl -s -o /dev/null --max-time 5 --noproxy '' -x \"$HTTP_PROXY\" http://127.0.0.1:{port}/-/healthy; \
           sleep 0.25; i=$((i+1)); \
         done",
        secret = secret.display(),
        port = prom.port
    );
    let runs = env.root().join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let log = env.root().join("warden.log");
    let out = std::fs::File::create(&log).unwrap();
    let mut cmd = env.command();
    cmd.arg("run")
        .args(["--settings", &settings, "--metrics-addr", &target])
        .args(["--allow-domain", "127.0.0.1"])
        .arg("--deny-read")
        .arg(&secret)
        .args(["--", "sh", "-c", &script])
        .env("TMPDIR", &runs)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out);
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
    let mut workload = Workload {
        child: cmd.spawn().unwrap(),
        project: env.project(),
        log,
    };

    // Ten scrapes of the running sandbox, and violations and requests increasing between
    // them.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let scrapes = prom.query(&format!(
            "count_over_time(warden_sandboxes_active{{instance=\"{target}\"}}[1m])"
        ));
        let rate = prom.query("sum(rate(warden_violations_total[15s])) > 0");
        let requests =
            prom.query("sum(rate(warden_network_requests_total{decision=\"allow\"}[15s])) > 0");
        if value(&scrapes, &[]).is_some_and(|n| n >= 10.0)
            && !rate.is_empty()
            && !requests.is_empty()
        {
            break;
        }
        if let Ok(Some(status)) = workload.child.try_wait() {
            panic!(
                "warden ended early ({status}):\n{}\nprometheus:\n{}",
                workload.log(),
                prom.log()
            );
        }
        assert!(
            Instant::now() < deadline,
            "no data after 60 s: scrapes {scrapes:?}, violation rate {rate:?}, allowed \
             requests {requests:?}\nwarden:\n{}\nprometheus:\n{}",
            workload.log(),
            prom.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // The instance variable's query (Grafana's label_values) through the series API.
    let dash = dashboard();
    let (_, labels) = prom.api(&format!(
        "label/instance/values?match[]={}",
        url_encode("warden_sandboxes_active")
    ));
    assert!(
        labels["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| *v == target.as_str()),
        "{labels}"
    );

    // Every dashboard query parses and returns data, as an instant and as a range query.
    let mut results = std::collections::BTreeMap::new();
    for t in targets(&dash) {
        let expr = substitute(&t.expr);
        let instant = prom.query(&expr);
        assert!(
            !instant.is_empty(),
            "{} ({}): no data for {expr}",
            t.panel,
            t.ref_id
        );
        let range = prom.query_range(&expr, 10);
        assert!(
            range
                .iter()
                .any(|s| s["values"].as_array().is_some_and(|v| !v.is_empty())),
            "{} ({}): no range data for {expr}",
            t.panel,
            t.ref_id
        );
        results.insert((t.panel, t.ref_id), instant);
    }
    let get = |panel: &str, ref_id: &str, labels: &[(&str, &str)]| {
        let result = results
            .get(&(panel.to_string(), ref_id.to_string()))
            .unwrap_or_else(|| panic!("no panel {panel:?} {ref_id}"));
        value(result, labels)
            .unwrap_or_else(|| panic!("{panel} ({ref_id}): no series {labels:?} in {result:?}"))
    };
    // What the workload implies.
    assert_eq!(get("Sandboxes active", "A", &[]), 1.0);
    assert!(get("Violations (runs exposed)", "A", &[]) >= 8.0);
    assert_eq!(get("eBPF events dropped (runs exposed)", "A", &[]), 0.0);
    assert_eq!(get("eBPF programs loaded", "A", &[]), 9.0);
    for kind in ["file-write", "file-read", "network"] {
        assert!(
            get("Violations/s by kind", "A", &[("kind", kind)]) > 0.0,
            "{kind}"
        );
    }
    for layer in ["mount", "proxy"] {
        assert!(
            get("Violations/s by layer", "A", &[("layer", layer)]) > 0.0,
            "{layer}"
        );
    }
    for op in ["open", "http"] {
        assert!(
            get(
                "Violations/s by operation (top 10)",
                "A",
                &[("operation", op)]
            ) > 0.0,
            "{op}"
        );
    }
    for decision in ["allow", "deny"] {
        let labels = [("decision", decision), ("protocol", "http")];
        assert!(
            get("Network requests/s by decision", "A", &labels) > 0.0,
            "{decision}"
        );
    }
    assert!(
        get(
            "Network bytes/s by direction",
            "A",
            &[("direction", "down")]
        ) > 0.0
    );
    for ref_id in ["A", "B", "C"] {
        let q = get("Sandbox start time", ref_id, &[]);
        assert!(q > 0.0 && q < 30.0, "start time quantile {ref_id}: {q}");
    }
    assert!(get("eBPF events/s and drops/s", "A", &[]) > 0.0);
    for reason in ["ring-buffer-full", "pending-map-full", "undecodable"] {
        assert_eq!(
            get("eBPF events/s and drops/s", "B", &[("reason", reason)]),
            0.0
        );
    }
    for program in [
        "sys_enter",
        "sys_exit",
        "sched_exec",
        "connect4",
        "connect6",
        "connect_unix",
    ] {
        assert_eq!(
            get(
                "eBPF programs loaded by program",
                "A",
                &[("program", program)]
            ),
            1.0
        );
    }
    // Nobody to ask (no `--approvals`, no terminal): the host in no list is denied at once.
    assert!(
        get(
            "Approvals by decision (runs exposed)",
            "A",
            &[("kind", "network"), ("decision", "no-approver")]
        ) >= 1.0
    );
    assert_eq!(
        get(
            "Sandbox starts by result (runs exposed)",
            "A",
            &[("result", "ok")]
        ),
        1.0
    );
    assert_eq!(
        get(
            "Sandbox starts by result (runs exposed)",
            "A",
            &[("result", "error")]
        ),
        0.0
    );
    assert!(get("Execs/s", "A", &[]) > 0.0);

    // Every warden metric Prometheus scraped is on the dashboard (a histogram by its buckets).
    let (_, names) = prom.api("label/__name__/values");
    let shown: String = targets(&dash).iter().map(|t| t.expr.clone()).collect();
    for name in names["data"].as_array().unwrap() {
        let name = name.as_str().unwrap();
        if !name.starts_with("warden_") {
            continue;
        }
        let family = name
            .strip_suffix("_sum")
            .or_else(|| name.strip_suffix("_count"))
            .map(|f| format!("{f}_bucket"))
            .unwrap_or_else(|| name.to_string());
        assert!(
            metric_names(&shown).contains(&family),
            "{name} is scraped but on no panel of the dashboard"
        );
    }

    // The rules: all loaded, evaluated without error, every expression a valid query; the
    // workload's violations are a spike (nothing before it), and its programs are loaded.
    let alert_count = std::fs::read_to_string(&rules)
        .unwrap()
        .lines()
        .filter(|l| l.trim().starts_with("- alert: "))
        .count();
    // rate(...[5m]) spreads what a new series did over the whole five minutes: the spike
    // fires once the run has refused more than 300 operations, a few seconds in.
    let deadline = Instant::now() + Duration::from_secs(60);
    let loaded = loop {
        let (_, json) = prom.api("rules");
        let loaded: Vec<Value> = json["data"]["groups"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["rules"].as_array().unwrap().clone())
            .collect();
        let spike = loaded
            .iter()
            .find(|r| r["name"] == "WardenViolationSpike")
            .unwrap_or_else(|| panic!("WardenViolationSpike is not loaded: {json}"));
        if spike["state"] == "firing" {
            break loaded;
        }
        assert!(
            Instant::now() < deadline,
            "WardenViolationSpike did not fire in 60 s: {spike}\nwarden:\n{}",
            workload.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(loaded.len(), alert_count, "{loaded:?}");
    for rule in &loaded {
        let name = rule["name"].as_str().unwrap();
        assert_eq!(rule["health"], "ok", "{name}: {rule}");
        prom.query(rule["query"].as_str().unwrap());
        if matches!(
            name,
            "WardenBpfProgramsNotLoaded" | "WardenBpfEventsDropped" | "WardenSandboxStartFailures"
        ) {
            assert_eq!(rule["state"], "inactive", "{rule}");
        }
    }
    let (_, alerts) = prom.api("alerts");
    let firing: Vec<&str> = alerts["data"]["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["state"] == "firing")
        .map(|a| a["labels"]["alertname"].as_str().unwrap())
        .collect();
    assert_eq!(firing, ["WardenViolationSpike"], "{alerts}");

    let status = workload.stop();
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "warden:\n{}",
        workload.log()
    );
    // The denied writes left nothing behind.
    assert!(!Path::new("/etc/warden-ops-test-1").exists());
}

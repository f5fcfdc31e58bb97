//! `cargo xtask bench audit`: what auditing (the eBPF programs, the reader, the violations
//! file, the metrics) costs a sandboxed command, how many events it takes per second without
//! losing any, and how soon a violation shows up on `/metrics` (issue #5).
//!
//! 1. Wall time, audit off (`warden run -- CMD`: no sink, no eBPF) against audit on
//!    (`warden run --violations FILE -- CMD`: the programs loaded and the reader writing),
//!    interleaved, for syscall-heavy workloads: `find /usr/share -type f -exec stat {} +`,
//!    ten `git status` in a generated 10 000-file repository, an offline `cargo build` of a
//!    generated hello-world crate (CARGO_HOME a temporary directory), and `true` (the fixed
//!    cost of a run). Two times per run: the whole `warden run` (from xtask) and the command's
//!    own (`date +%s%N` around it inside the sandbox, so warden's start and stop are not in
//!    it).
//! 2. Events per second: a python loop of denied opens (`O_WRONLY|O_CREAT` on the read-only
//!    /etc, one kernel record each), paced at several rates and unpaced, for a few seconds
//!    each, with `--violations` and `--metrics-file`: events the programs delivered
//!    (`warden_bpf_events_total`), drops (`warden_bpf_events_dropped_total`), records written
//!    (the `count`s of the file's lines).
//! 3. Violation-to-metric latency: the sandboxed command prints `time.time_ns()` and makes one
//!    denied write; xtask scrapes `--metrics-addr` every 5 ms; latency = the end of the first
//!    scrape that shows the violation − the printed time.

use anyhow::{bail, Context, Result};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Files of the generated git repository: 100 directories of 100.
const GIT_DIRS: usize = 100;
const GIT_FILES: usize = 100;
/// `git status` runs per sandboxed run (one takes about 50 ms).
const GIT_REPEAT: usize = 10;
/// Paced rates of the events phase (0: as fast as python goes), and seconds each.
const EVENT_RATES: &[u64] = &[10_000, 50_000, 100_000, 120_000, 150_000, 200_000, 0];
const EVENT_SECONDS: f64 = 3.0;
/// Latency trials, and the scrape interval.
const LATENCY_TRIALS: usize = 20;
const SCRAPE_EVERY: Duration = Duration::from_millis(5);

/// One workload of the wall-time phase: shown name, working directory, shell command.
struct Workload {
    name: String,
    cwd: PathBuf,
    command: String,
}

/// Times of one workload under one variant, in ms: whole `warden run`, and the command inside.
#[derive(Default)]
struct Samples {
    total: Vec<f64>,
    inner: Vec<f64>,
    /// The command's CPU time (user + system of its processes, from the shell's `times`):
    /// less disturbed than wall time by other guests on the host.
    cpu: Vec<f64>,
    /// Lines the violations file got (audit on only).
    records: Vec<usize>,
}

struct Bench {
    warden: PathBuf,
    tmp: PathBuf,
    home: PathBuf,
    /// Extra environment of every run.
    env: Vec<(String, String)>,
    busy: (usize, usize),
}

impl Bench {
    /// `warden run [ARGS] -- sh -c SCRIPT` in `cwd`, isolated in the benchmark's HOME.
    fn command(&self, args: &[String], cwd: &Path, script: &str) -> Command {
        let mut cmd = Command::new(&self.warden);
        cmd.arg("run")
            .args(args)
            .args(["--", "sh", "-c", script])
            .current_dir(cwd)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("WARDEN_MANAGED_SETTINGS", self.tmp.join("managed.json"))
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null());
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy().into_owned();
            if name.starts_with("WARDEN_") && name != "WARDEN_MANAGED_SETTINGS" {
                cmd.env_remove(name);
            }
        }
        cmd
    }

    fn check_busy(&mut self, when: &str) {
        let found = super::busy_compilers().len();
        self.busy.1 += 1;
        if found > 0 {
            self.busy.0 += 1;
            println!("bench audit: warning: {found} compiler process(es) running {when}; the numbers are skewed");
        }
    }
}

pub fn run(warden: &Path, tmp: &Path, runs: usize, report_path: &Path) -> Result<ExitCode> {
    let home = tmp.join("home");
    std::fs::create_dir_all(home.join(".config"))?;
    let project = tmp.join("project");
    std::fs::create_dir_all(&project)?;
    let sysroot = capture("rustc", &["--print", "sysroot"]);
    if sysroot == "?" {
        bail!("no rustc on PATH (for the cargo build workload)");
    }
    let toolchain_bin = Path::new(&sysroot).join("bin");
    let cargo_home = tmp.join("cargo-home");
    std::fs::create_dir_all(&cargo_home)?;
    let mut bench = Bench {
        warden: warden.to_path_buf(),
        tmp: tmp.to_path_buf(),
        home,
        env: vec![
            ("CARGO_HOME".into(), cargo_home.display().to_string()),
            (
                "RUSTC".into(),
                toolchain_bin.join("rustc").display().to_string(),
            ),
            ("CARGO_TERM_COLOR".into(), "never".into()),
        ],
        busy: (0, 0),
    };
    bench.check_busy("before the runs");

    // 0. Per system call: what the programs add to one call, in and outside a sandbox.
    let per_call = per_call(&bench, &project)?;
    bench.check_busy("after the per-call runs");

    // The workloads' inputs.
    let repo = tmp.join("repo");
    make_repo(&repo)?;
    let hello = tmp.join("hello");
    std::fs::create_dir_all(hello.join("src"))?;
    std::fs::write(
        hello.join("Cargo.toml"),
        "[package]\nname = \"hello\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n",
    )?;
    std::fs::write(
        hello.join("src/main.rs"),
        "fn main() {\n    println!(\"hello\");\n}\n",
    )?;
    let files = capture("sh", &["-c", "find /usr/share -type f | wc -l"]);
    let workloads = vec![
        Workload {
            name: format!("`find /usr/share -type f -exec stat {{}} +` ({files} files)"),
            cwd: project.clone(),
            // The sandbox has no capabilities: directories only their owner may read
            // (polkit's rules.d) are refused, the same with audit on and off.
            command: "find /usr/share -type f -exec stat {} + >/dev/null 2>&1 || true".into(),
        },
        Workload {
            name: format!(
                "`git status` ×{GIT_REPEAT}, {} files",
                GIT_DIRS * GIT_FILES
            ),
            cwd: repo.clone(),
            command: format!(
                "i=0; while [ $i -lt {GIT_REPEAT} ]; do git status >/dev/null || exit 1; i=$((i+1)); done"
            ),
        },
        Workload {
            name: "`cargo build --offline` (hello world, no deps)".into(),
            cwd: hello.clone(),
            command: format!(
                "rm -rf target && {} build --offline -q",
                toolchain_bin.join("cargo").display()
            ),
        },
        Workload {
            name: "`true` (a run's fixed cost)".into(),
            cwd: project.clone(),
            command: "true".into(),
        },
    ];

    // 1. Wall time, off against on, interleaved.
    println!(
        "\nbench audit: wall time, {runs} rounds of {} workloads, audit off and on",
        workloads.len()
    );
    let mut samples: Vec<[Samples; 2]> = workloads.iter().map(|_| Default::default()).collect();
    let mut seq = 0usize;
    // One checked warm-up run of each (a failure says why), then the rounds.
    for round in 0..=runs {
        for (w, workload) in workloads.iter().enumerate() {
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for variant in order {
                seq += 1;
                let file = tmp.join(format!("violations-{seq}.jsonl"));
                let args = if variant == 1 {
                    vec!["--violations".to_string(), file.display().to_string()]
                } else {
                    vec![]
                };
                let script = format!(
                    "s=$(date +%s%N); {}; rc=$?; e=$(date +%s%N); echo \"bench-inner-ns $((e-s))\"; \
                     echo bench-times; times; exit $rc",
                    workload.command
                );
                let mut cmd = bench.command(&args, &workload.cwd, &script);
                cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
                let start = Instant::now();
                let out = cmd.output().context("running warden")?;
                let total = start.elapsed().as_secs_f64() * 1e3;
                if !out.status.success() {
                    bail!(
                        "{} (audit {}) failed ({}): {}",
                        workload.name,
                        ["off", "on"][variant],
                        out.status,
                        String::from_utf8_lossy(&out.stderr).trim()
                    );
                }
                let inner = String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .find_map(|l| l.strip_prefix("bench-inner-ns "))
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .context("the command's own time is missing")?
                    / 1e6;
                let cpu = children_cpu_ms(&String::from_utf8_lossy(&out.stdout))
                    .context("the command's CPU time is missing")?;
                let records = std::fs::read_to_string(&file)
                    .map(|s| s.lines().count())
                    .unwrap_or(0);
                let _ = std::fs::remove_file(&file);
                if round > 0 {
                    let s = &mut samples[w][variant];
                    s.total.push(total);
                    s.inner.push(inner);
                    s.cpu.push(cpu);
                    s.records.push(records);
                }
            }
        }
        if round > 0 {
            println!("bench audit: round {round}/{runs}");
        }
    }
    bench.check_busy("after the wall-time runs");

    // 2. Events per second.
    println!("\nbench audit: events per second, {EVENT_SECONDS} s per rate");
    let mut events = Vec::new();
    for &rate in EVENT_RATES {
        let row = event_run(&bench, &project, rate)?;
        println!(
            "bench audit: rate {}: {:.0} attempts/s, {:.0} events/s, {} dropped",
            if rate == 0 {
                "max".to_string()
            } else {
                rate.to_string()
            },
            row.attempts as f64 / row.seconds,
            row.events / row.seconds,
            row.dropped
        );
        events.push(row);
    }
    bench.check_busy("after the events runs");

    // 3. Violation-to-metric latency.
    println!("\nbench audit: violation-to-metric latency, {LATENCY_TRIALS} trials");
    let mut latencies = Vec::new();
    let mut discarded = 0;
    for trial in 0..LATENCY_TRIALS {
        match latency_trial(&bench, &project)? {
            Some(ms) => latencies.push(ms),
            None => discarded += 1,
        }
        if (trial + 1) % 5 == 0 {
            println!("bench audit: {}/{LATENCY_TRIALS} trials", trial + 1);
        }
    }
    bench.check_busy("after the latency trials");

    let report = report(
        runs, &workloads, &samples, &events, &latencies, discarded, &bench, &per_call,
    );
    println!("\n{report}");
    std::fs::write(report_path, &report)
        .with_context(|| format!("writing {}", report_path.display()))?;
    println!("bench audit: written to {}", report_path.display());
    Ok(ExitCode::SUCCESS)
}

/// The children's CPU time in ms from the output of sh's `times` after the `bench-times`
/// line (its second line: `1m2.500s 0m0.300s`, user and system).
fn children_cpu_ms(stdout: &str) -> Option<f64> {
    let mut lines = stdout
        .lines()
        .skip_while(|l| l.trim() != "bench-times")
        .skip(2);
    let line = lines.next()?;
    let secs = |t: &str| -> Option<f64> {
        let (m, s) = t.trim().strip_suffix('s')?.split_once('m')?;
        Some(m.parse::<f64>().ok()? * 60.0 + s.parse::<f64>().ok()?)
    };
    let mut parts = line.split_whitespace();
    Some((secs(parts.next()?)? + secs(parts.next()?)?) * 1e3)
}

const PER_CALL_LOOPS: u64 = 2_000_000;
const PER_CALL_RUNS: usize = 7;
const PER_CALL_C: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    double a = now();
    for (long i = 0; i < n; i++) syscall(SYS_getppid);
    double b = now();
    for (long i = 0; i < n / 4; i++) close(openat(AT_FDCWD, "/etc/hostname", O_RDONLY));
    double c = now();
    printf("per-call %.1f %.1f\n", (b - a) / n, (c - b) / (n / 4));
    return 0;
}
"#;

struct PerCallRow {
    name: &'static str,
    getppid: Vec<f64>,
    open: Vec<f64>,
}

/// Phase 0: the C loop on the host, in a sandbox without and with audit, and on the host
/// while a watched sandbox runs.
fn per_call(bench: &Bench, cwd: &Path) -> Result<Vec<PerCallRow>> {
    let src = bench.tmp.join("per-call.c");
    let bin = bench.tmp.join("per-call");
    std::fs::write(&src, PER_CALL_C)?;
    let cc = if Command::new("cc").arg("--version").output().is_ok() {
        "cc"
    } else {
        "clang-19"
    };
    let st = Command::new(cc)
        .args(["-O2", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .with_context(|| format!("running {cc}"))?;
    if !st.success() {
        bail!("{cc} could not build the per-call loop");
    }
    println!("\nbench audit: per system call, {PER_CALL_RUNS} runs of 4 variants");
    let loop_cmd = format!("{} {PER_CALL_LOOPS}", bin.display());
    let parse = |out: &[u8]| -> Option<(f64, f64)> {
        let text = String::from_utf8_lossy(out);
        let line = text.lines().find_map(|l| l.strip_prefix("per-call "))?;
        let mut it = line.split_whitespace().map(|v| v.parse::<f64>().ok());
        Some((it.next()??, it.next()??))
    };
    let mut rows: Vec<PerCallRow> = [
        "host",
        "host, programs loaded",
        "sandbox, audit off",
        "sandbox, audit on",
    ]
    .into_iter()
    .map(|name| PerCallRow {
        name,
        getppid: vec![],
        open: vec![],
    })
    .collect();
    for run in 0..PER_CALL_RUNS {
        for k in 0..4 {
            let v = (k + run) % 4;
            let out = match v {
                0 => Command::new(&bin)
                    .arg(PER_CALL_LOOPS.to_string())
                    .output()?,
                1 => {
                    let violations = bench.tmp.join("per-call-bg.jsonl");
                    let mut bg = bench
                        .command(
                            &["--violations".into(), violations.display().to_string()],
                            cwd,
                            "sleep 60",
                        )
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()?;
                    // Loaded once the sandbox runs: wait for its cgroup's first record.
                    let deadline = Instant::now() + Duration::from_secs(10);
                    while std::fs::metadata(&violations).map_or(0, |m| m.len()) == 0
                        && Instant::now() < deadline
                    {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    let out = Command::new(&bin)
                        .arg(PER_CALL_LOOPS.to_string())
                        .output()?;
                    let _ = Command::new("kill")
                        .args(["-TERM", &bg.id().to_string()])
                        .status();
                    let _ = bg.wait();
                    let _ = std::fs::remove_file(&violations);
                    out
                }
                2 => bench.command(&[], cwd, &loop_cmd).output()?,
                _ => {
                    let violations = bench.tmp.join("per-call.jsonl");
                    let out = bench
                        .command(
                            &["--violations".into(), violations.display().to_string()],
                            cwd,
                            &loop_cmd,
                        )
                        .output()?;
                    let _ = std::fs::remove_file(&violations);
                    out
                }
            };
            let (g, o) = parse(&out.stdout).with_context(|| {
                format!(
                    "per-call loop ({}) printed no result: {}",
                    rows[v].name,
                    String::from_utf8_lossy(&out.stderr).trim()
                )
            })?;
            rows[v].getppid.push(g);
            rows[v].open.push(o);
        }
    }
    Ok(rows)
}

/// A git repository of GIT_DIRS × GIT_FILES committed files.
fn make_repo(repo: &Path) -> Result<()> {
    std::fs::create_dir_all(repo)?;
    for d in 0..GIT_DIRS {
        let dir = repo.join(format!("d{d:03}"));
        std::fs::create_dir_all(&dir)?;
        for f in 0..GIT_FILES {
            std::fs::write(dir.join(format!("f{f:03}.txt")), format!("{d} {f}\n"))?;
        }
    }
    let git = |args: &[&str]| -> Result<()> {
        let out = Command::new("git")
            .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"])
            .args(args)
            .current_dir(repo)
            .output()
            .context("running git")?;
        if !out.status.success() {
            bail!(
                "git {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    };
    println!(
        "bench audit: generating a {}-file git repository",
        GIT_DIRS * GIT_FILES
    );
    git(&["init", "-q", "."])?;
    git(&["add", "-A"])?;
    git(&["commit", "-q", "-m", "generated"])?;
    // One changed file, so `git status` has something to say.
    std::fs::write(repo.join("d000/f000.txt"), "changed\n")?;
    Ok(())
}

/// The events phase's command: denied opens at `rate` per second (0: unpaced) for
/// EVENT_SECONDS; prints the attempts and the seconds they took.
const EVENTS_PY: &str = r#"
import os, sys, time
rate = int(sys.argv[1]); dur = float(sys.argv[2])
path = "/etc/warden-bench-events"
flags = os.O_WRONLY | os.O_CREAT
n = 0
start = time.monotonic()
end = start + dur
while True:
    now = time.monotonic()
    if now >= end:
        break
    k = 1000
    if rate:
        due = int((now - start) * rate)
        if n >= due:
            time.sleep(0.0005)
            continue
        k = min(k, due - n)
    for _ in range(k):
        try:
            os.open(path, flags, 0o644)
        except OSError:
            pass
    n += k
print("bench-events", n, time.monotonic() - start)
"#;

struct EventRow {
    rate: u64,
    attempts: u64,
    seconds: f64,
    events: f64,
    dropped: f64,
    drops_by_reason: String,
    /// Sum of the `count`s of the records about the denied file, and the lines they took.
    records: u64,
    lines: usize,
    /// The whole `warden run`, and what it took after the command's loop.
    total: f64,
}

fn event_run(bench: &Bench, cwd: &Path, rate: u64) -> Result<EventRow> {
    let file = bench.tmp.join(format!("events-{rate}.jsonl"));
    let metrics = bench.tmp.join(format!("events-{rate}.prom"));
    let _ = std::fs::remove_file(&file);
    let args = vec![
        "--violations".to_string(),
        file.display().to_string(),
        "--metrics-file".into(),
        metrics.display().to_string(),
    ];
    let script = format!("exec python3 -c \"$BENCH_PY\" {rate} {EVENT_SECONDS}");
    let mut cmd = bench.command(&args, cwd, &script);
    cmd.env("BENCH_PY", EVENTS_PY)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let out = cmd.output().context("running warden")?;
    let total = start.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!(
            "the events run (rate {rate}) failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (attempts, seconds) = stdout
        .lines()
        .find_map(|l| {
            let mut it = l.strip_prefix("bench-events ")?.split_whitespace();
            Some((
                it.next()?.parse::<u64>().ok()?,
                it.next()?.parse::<f64>().ok()?,
            ))
        })
        .context("the events command printed no result")?;
    let text = std::fs::read_to_string(&metrics)
        .with_context(|| format!("reading {}", metrics.display()))?;
    let events = metric_sum(&text, "warden_bpf_events_total");
    let mut dropped = 0.0;
    let mut by_reason = Vec::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("warden_bpf_events_dropped_total{"))
    {
        if let Some((series, v)) = line.rsplit_once(' ') {
            let v: f64 = v.parse().unwrap_or(0.0);
            dropped += v;
            if v > 0.0 {
                let reason = series.split('"').nth(1).unwrap_or(series).to_string();
                by_reason.push(format!("{reason} {v}"));
            }
        }
    }
    let mut records = 0;
    let mut lines = 0;
    for line in std::fs::read_to_string(&file).unwrap_or_default().lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["target"] == "/etc/warden-bench-events" {
            lines += 1;
            records += v["count"].as_u64().unwrap_or(1);
        }
    }
    let _ = std::fs::remove_file(&file);
    Ok(EventRow {
        rate,
        attempts,
        seconds,
        events,
        dropped,
        drops_by_reason: by_reason.join(", "),
        records,
        lines,
        total,
    })
}

/// The sum of the samples of `name` (with any labels) in a metrics text.
fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with(' ') || r.starts_with('{'))
        })
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// The latency trial's command: wait for the scraper, print the time, one denied write.
const LATENCY_PY: &str = r#"
import os, sys, time
time.sleep(0.5)
t = time.time_ns()
sys.stdout.write("bench-write-ns %d\n" % t)
sys.stdout.flush()
try:
    os.open("/etc/warden-bench-latency", os.O_WRONLY | os.O_CREAT, 0o644)
except OSError:
    pass
time.sleep(0.4)
"#;

fn realtime_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// One trial: the latency in ms, or `None` when no scrape preceded the write.
fn latency_trial(bench: &Bench, cwd: &Path) -> Result<Option<f64>> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let args = vec!["--metrics-addr".to_string(), addr.to_string()];
    let mut cmd = bench.command(&args, cwd, "exec python3 -c \"$BENCH_PY\"");
    cmd.env("BENCH_PY", LATENCY_PY)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let stop = Arc::new(AtomicBool::new(false));
    // (end of the scrape, file-write violations it showed)
    let scrapes: Arc<Mutex<Vec<(u128, f64)>>> = Arc::default();
    let scraper = {
        let stop = stop.clone();
        let scrapes = scrapes.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Acquire) {
                let began = Instant::now();
                if let Some(text) = scrape(addr) {
                    let n: f64 = text
                        .lines()
                        .filter(|l| {
                            l.starts_with("warden_violations_total{")
                                && l.contains("kind=\"file-write\"")
                        })
                        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
                        .sum();
                    let done = realtime_ns();
                    if let Ok(mut s) = scrapes.lock() {
                        s.push((done, n));
                    }
                }
                if let Some(rest) = SCRAPE_EVERY.checked_sub(began.elapsed()) {
                    std::thread::sleep(rest);
                }
            }
        })
    };
    let out = cmd.output().context("running warden");
    stop.store(true, Ordering::Release);
    let _ = scraper.join();
    let out = out?;
    if !out.status.success() {
        bail!(
            "the latency run failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let written: u128 = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("bench-write-ns "))
        .and_then(|v| v.trim().parse().ok())
        .context("the latency command printed no time")?;
    let scrapes = scrapes.lock().map(|s| s.clone()).unwrap_or_default();
    let before = scrapes.iter().any(|&(t, n)| t < written && n == 0.0);
    let first = scrapes.iter().find(|&&(_, n)| n >= 1.0);
    match (before, first) {
        (true, Some(&(t, _))) => Ok(Some((t as f64 - written as f64) / 1e6)),
        (false, _) => Ok(None),
        (true, None) => bail!(
            "no scrape showed the denied write ({} scrapes)",
            scrapes.len()
        ),
    }
}

/// `GET /metrics` (HTTP/1.0, read to the end); the body.
fn scrape(addr: std::net::SocketAddr) -> Option<String> {
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(100)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    Some(raw.split_once("\r\n\r\n")?.1.to_string())
}

fn capture(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "?".to_string())
}

fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "**not met**"
    }
}

#[allow(clippy::too_many_arguments)]
fn report(
    runs: usize,
    workloads: &[Workload],
    samples: &[[Samples; 2]],
    events: &[EventRow],
    latencies: &[f64],
    discarded: usize,
    bench: &Bench,
    per_call: &[PerCallRow],
) -> String {
    let pct = super::percentile;
    let mut md = String::new();
    let _ = writeln!(md, "### `cargo xtask bench audit --runs {runs}`\n");
    let _ = writeln!(
        md,
        "- date: {}; kernel {}; {} cores; load average before: {}",
        capture("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        capture("uname", &["-r"]),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default(),
    );
    let (found, checks) = bench.busy;
    if found > 0 {
        let _ = writeln!(
            md,
            "- **warning: a compiler (rustc, cc1) was running at {found} of {checks} checks; \
             the numbers are skewed** (the cargo build workload's own rustc is not counted: \
             checks are made between phases)"
        );
    } else {
        let _ = writeln!(
            md,
            "- no compiler (rustc, cc1) running at any of {checks} checks between the phases"
        );
    }

    let _ = writeln!(
        md,
        "\n#### Per system call\n\n\
         A C loop ({PER_CALL_LOOPS} × `getppid()`, then {} × `openat(\"/etc/hostname\")` + `close`), \
         ns per iteration, median of {PER_CALL_RUNS} runs of each variant (interleaved). \
         *host, programs loaded*: outside any sandbox while a `warden run --violations` sleeps \
         (the syscall tracepoints run for every process; only a watched cgroup's calls are recorded).\n",
        PER_CALL_LOOPS / 4
    );
    let _ = writeln!(md, "| variant | getppid (ns) | openat + close (ns) |");
    let _ = writeln!(md, "| --- | ---: | ---: |");
    for row in per_call {
        let _ = writeln!(
            md,
            "| {} | {:.0} | {:.0} |",
            row.name,
            pct(&sorted(&row.getppid), 50.0),
            pct(&sorted(&row.open), 50.0)
        );
    }

    let _ = writeln!(
        md,
        "\n#### Wall time, audit off vs on\n\n\
         off: `warden run -- sh -c CMD`; on: `warden run --violations FILE -- sh -c CMD` (eBPF \
         programs loaded, records written). Interleaved, {runs} runs each after one warm-up; \
         medians in ms. *whole run*: spawn to exit of `warden run`; *command*: the command's own \
         time inside the sandbox (`date +%s%N` before and after it).\n"
    );
    let _ = writeln!(
        md,
        "| workload | whole run off | whole run on | overhead | command off | command on | overhead | command CPU off | CPU on | CPU overhead | records per run |"
    );
    let _ = writeln!(
        md,
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    let mut worst_inner: Option<f64> = None;
    for (w, workload) in workloads.iter().enumerate() {
        let [off, on] = &samples[w];
        let t_off = pct(&sorted(&off.total), 50.0);
        let t_on = pct(&sorted(&on.total), 50.0);
        let i_off = pct(&sorted(&off.inner), 50.0);
        let i_on = pct(&sorted(&on.inner), 50.0);
        let records = pct(
            &sorted(&on.records.iter().map(|&r| r as f64).collect::<Vec<_>>()),
            50.0,
        );
        let inner_over = if workload.command == "true" {
            "—".to_string()
        } else {
            let o = (i_on / i_off - 1.0) * 100.0;
            worst_inner = Some(worst_inner.map_or(o, |w: f64| w.max(o)));
            format!("{o:+.1} %")
        };
        let c_off = pct(&sorted(&off.cpu), 50.0);
        let c_on = pct(&sorted(&on.cpu), 50.0);
        let cpu_over = if workload.command == "true" || c_off <= 0.0 {
            "—".to_string()
        } else {
            format!("{:+.1} %", (c_on / c_off - 1.0) * 100.0)
        };
        let _ = writeln!(
            md,
            "| {} | {t_off:.1} | {t_on:.1} | {:+.1} % ({:+.1} ms) | {i_off:.1} | {i_on:.1} | {inner_over} | {c_off:.0} | {c_on:.0} | {cpu_over} | {records:.0} |",
            workload.name,
            (t_on / t_off - 1.0) * 100.0,
            t_on - t_off,
        );
    }

    let _ = writeln!(
        md,
        "\n#### Events per second\n\n\
         `warden run --violations FILE --metrics-file M -- python3 -c LOOP RATE {EVENT_SECONDS}`: \
         denied opens (`O_WRONLY|O_CREAT` of /etc/warden-bench-events, EROFS), paced at RATE \
         per second (max: unpaced). *events/s*: `warden_bpf_events_total` over the loop's time; \
         *records*: the sum of the `count`s of the file's records of that path (the file \
         coalesces identical records), and the lines they took.\n"
    );
    let _ = writeln!(
        md,
        "| rate | attempts/s | events/s | dropped | records | lines | whole run (s) |"
    );
    let _ = writeln!(md, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for e in events {
        let _ = writeln!(
            md,
            "| {} | {:.0} | {:.0} | {}{} | {} | {} | {:.2} |",
            if e.rate == 0 {
                "max".to_string()
            } else {
                e.rate.to_string()
            },
            e.attempts as f64 / e.seconds,
            e.events / e.seconds,
            e.dropped,
            if e.drops_by_reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", e.drops_by_reason)
            },
            e.records,
            e.lines,
            e.total,
        );
    }

    let lat = sorted(latencies);
    let _ = writeln!(
        md,
        "\n#### Violation-to-metric latency\n\n\
         `warden run --metrics-addr 127.0.0.1:PORT -- python3 -c ...`: the command prints \
         `time.time_ns()` and makes one denied write; xtask scrapes `/metrics` every {} ms; \
         latency: end of the first scrape showing `warden_violations_total{{kind=\"file-write\"}}` \
         − the printed time. {} trials{}.\n",
        SCRAPE_EVERY.as_millis(),
        lat.len(),
        if discarded > 0 {
            format!(" ({discarded} more discarded: no scrape before the write)")
        } else {
            String::new()
        }
    );
    let _ = writeln!(md, "| median (ms) | p95 (ms) | min (ms) | max (ms) |");
    let _ = writeln!(md, "| ---: | ---: | ---: | ---: |");
    let _ = writeln!(
        md,
        "| {:.1} | {:.1} | {:.1} | {:.1} |",
        pct(&lat, 50.0),
        pct(&lat, 95.0),
        lat.first().copied().unwrap_or(f64::NAN),
        lat.last().copied().unwrap_or(f64::NAN)
    );

    let _ = writeln!(md, "\nTargets (issue #5):\n");
    if let Some(o) = worst_inner {
        let _ = writeln!(
            md,
            "- ≤ 5 % wall-time overhead (the commands' own time, worst workload {o:+.1} %): {}",
            verdict(o <= 5.0)
        );
    }
    // The highest rate the programs delivered in full (no drop) for the whole loop.
    let best = events
        .iter()
        .filter(|e| e.dropped == 0.0)
        .map(|e| e.events / e.seconds)
        .fold(0.0, f64::max);
    let _ = writeln!(
        md,
        "- ≥ 100 k events/s sustained with zero drops (highest rate without drops: {best:.0}/s): {}",
        verdict(best >= 100_000.0)
    );
    let p95 = pct(&lat, 95.0);
    let _ = writeln!(
        md,
        "- violation-to-metric latency ≤ 100 ms (p95 {p95:.1} ms): {}",
        verdict(p95 <= 100.0)
    );
    md
}

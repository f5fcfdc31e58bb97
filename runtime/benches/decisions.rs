//! Path and domain decisions on a 50-rule policy. Target: >= 2 million decisions/s on one core.
//! Run: `cargo xtask bench decisions` (= `cargo bench -p warden --bench decisions`).
//!
//! The filesystem view is in memory so the numbers measure the decision engine, not lstat.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use warden::policy::decision::Layer;
use warden::policy::domain::canonical_host;
use warden::policy::fsview::{MemFs, RealFs};
use warden::policy::merge::{layer, Context, Policy};
use warden::policy::path::Access;
use warden::policy::settings::{FilesystemSettings, NetworkSettings, SandboxSettings};

fn policy() -> (Policy, MemFs) {
    let mut fs = MemFs::new();
    fs.dir("/home/dev/work/project/src/module")
        .file("/home/dev/work/project/src/module/lib.rs", "")
        .file("/home/dev/.ssh/id_ed25519", "")
        .dir("/usr/lib/x86_64-linux-gnu")
        .dir("/tmp/warden-bench");
    let s = |v: Vec<String>| Some(v);
    // 50 rules: 15 denyRead, 5 allowRead, 10 allowWrite, 10 denyWrite, 5 allowed and 5 denied
    // domains (+ the domain lists below, benchmarked separately with 50 domain rules).
    let fs_rules = FilesystemSettings {
        deny_read: s((0..15).map(|i| format!("/home/dev/secret{i}")).collect()),
        allow_read: s((0..5)
            .map(|i| format!("/home/dev/secret{i}/public"))
            .collect()),
        allow_write: s((0..10).map(|i| format!("/var/cache/tool{i}")).collect()),
        deny_write: s((0..10)
            .map(|i| format!("/home/dev/work/project/generated{i}"))
            .collect()),
        ..Default::default()
    };
    let net = NetworkSettings {
        allowed_domains: s((0..25)
            .map(|i| {
                if i % 2 == 0 {
                    format!("*.allowed{i}.example")
                } else {
                    format!("api{i}.example.com")
                }
            })
            .collect()),
        denied_domains: s((0..25)
            .map(|i| {
                if i % 2 == 0 {
                    format!("*.denied{i}.example")
                } else {
                    format!("bad{i}.example.net:443")
                }
            })
            .collect()),
        ..Default::default()
    };
    let settings = SandboxSettings {
        filesystem: Some(fs_rules),
        network: Some(net),
        ..Default::default()
    };
    let ctx = Context {
        cwd: PathBuf::from("/home/dev/work/project"),
        home: PathBuf::from("/home/dev"),
        tmpdir: Some(PathBuf::from("/tmp/warden-bench")),
        approver_attached: true,
        protected: Vec::new(),
    };
    let p = Policy::build(&[layer(Layer::User, 0, "bench.json", settings)], ctx, &fs)
        .unwrap_or_else(|e| panic!("bench policy: {e}"));
    (p, fs)
}

fn bench(c: &mut Criterion) {
    let (p, fs) = policy();
    let paths: Vec<(PathBuf, Access)> = vec![
        (
            "/home/dev/work/project/src/module/lib.rs".into(),
            Access::Write,
        ),
        (
            "/home/dev/work/project/generated7/x.rs".into(),
            Access::Write,
        ),
        ("/etc/passwd".into(), Access::Write),
        ("/usr/lib/x86_64-linux-gnu/libc.so.6".into(), Access::Read),
        ("/home/dev/secret9/key".into(), Access::Read),
        ("/home/dev/secret3/public/readme".into(), Access::Read),
        ("src/module/lib.rs".into(), Access::Write),
        ("/var/cache/tool9/blob".into(), Access::Write),
    ];
    let mut g = c.benchmark_group("decisions");
    g.throughput(Throughput::Elements(paths.len() as u64));
    g.bench_function(BenchmarkId::new("path", "50-rule policy"), |b| {
        b.iter(|| {
            for (path, access) in &paths {
                black_box(p.check_path(&fs, black_box(Path::new(path)), *access));
            }
        })
    });
    // The same engine over the host filesystem: every decision adds one lstat per component.
    let dir = std::env::temp_dir().join(format!("warden-bench-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("src/module")).unwrap_or_else(|e| panic!("{e}"));
    let real_ctx = Context {
        cwd: dir.clone(),
        ..p.context.clone()
    };
    let real = Policy::build(
        &[layer(
            Layer::User,
            0,
            "bench.json",
            SandboxSettings::default(),
        )],
        real_ctx,
        &RealFs,
    )
    .unwrap_or_else(|e| panic!("bench policy: {e}"));
    let real_paths: Vec<(PathBuf, Access)> = vec![
        (dir.join("src/module/lib.rs"), Access::Write),
        ("/etc/passwd".into(), Access::Write),
        ("/usr/lib/os-release".into(), Access::Read),
        (dir.join(".git/hooks/pre-commit"), Access::Write),
    ];
    g.throughput(Throughput::Elements(real_paths.len() as u64));
    g.bench_function(
        BenchmarkId::new("path-realfs", "lstat per component"),
        |b| {
            b.iter(|| {
                for (path, access) in &real_paths {
                    black_box(real.check_path(&RealFs, black_box(Path::new(path)), *access));
                }
            })
        },
    );
    let _ = std::fs::remove_dir_all(&dir);

    let hosts = [
        "api.allowed4.example",
        "api13.example.com",
        "x.denied10.example",
        "unknown.example.org",
        "Registry.Allowed0.Example.",
        "127.0.0.1",
        "bad3.example.net",
        "deep.sub.allowed22.example",
    ];
    g.throughput(Throughput::Elements(hosts.len() as u64));
    g.bench_function(BenchmarkId::new("domain", "50-rule policy"), |b| {
        b.iter(|| {
            for h in &hosts {
                black_box(p.domains.decide(black_box(h), Some(443), true));
            }
        })
    });
    let canonical: Vec<_> = hosts
        .iter()
        .filter_map(|h| canonical_host(h).ok())
        .collect();
    g.throughput(Throughput::Elements(canonical.len() as u64));
    g.bench_function(
        BenchmarkId::new("domain-canonical-host", "50-rule policy"),
        |b| {
            b.iter(|| {
                for h in &canonical {
                    black_box(p.check_domain(black_box(h), Some(443)));
                }
            })
        },
    );
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);

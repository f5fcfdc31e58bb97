//! Black-box tests of `warden doctor` against the built binary on this machine: CI runs as root
//! on a machine with user namespaces, seccomp, Landlock and a writable cgroup v2 hierarchy, so
//! every required probe must pass there.

use serde_json::Value;
use warden_tests::{in_ci, Output, TestEnv};

fn probes(out: &Output) -> Vec<Value> {
    let v: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", out.stdout, out.stderr));
    let Value::Array(probes) = v else {
        panic!("not a JSON array: {}", out.stdout);
    };
    probes
}

fn find<'a>(probes: &'a [Value], name: &str) -> &'a Value {
    probes
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no probe {name} in {probes:#?}"))
}

/// Whether this run can expect every required probe to pass: CI always (it runs as root on the
/// reference machine); elsewhere only as root.
fn expect_ready() -> bool {
    in_ci()
        || std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
        })
}

#[test]
fn doctor_json_lists_every_probe_and_required_ones_pass() {
    let env = TestEnv::new();
    let out = env.run(["doctor", "--json"]);
    let probes = probes(&out);
    for p in &probes {
        assert!(p["name"].is_string(), "{p}");
        assert!(p["ok"].is_boolean(), "{p}");
        assert!(p["required"].is_boolean(), "{p}");
        assert!(p["detail"].as_str().is_some_and(|d| !d.is_empty()), "{p}");
        if p["ok"] == false {
            assert!(p["fix"].as_str().is_some_and(|f| !f.is_empty()), "{p}");
        }
    }
    let required = [
        "namespace.user",
        "namespace.mount",
        "namespace.pid",
        "namespace.net",
        "namespace.uts",
        "namespace.ipc",
        "namespace.cgroup",
        "userns.uid_map",
        "userns.tmpfs_mount",
        "seccomp",
        "landlock",
        "cgroup.v2",
    ];
    for name in required {
        assert_eq!(find(&probes, name)["required"], true, "{name}");
    }
    // Informational probes are present whatever their result.
    for name in [
        "bpf.socket_filter",
        "bpf.tracepoint",
        "bpf.raw_tracepoint",
        "bpf.cgroup_sock_addr",
        "bpf.lsm",
        "cgroup.controller.pids",
        "cgroup.controller.memory",
        "cgroup.controller.cpu",
        "lsm.active",
    ] {
        let p = find(&probes, name);
        assert_eq!(p["required"], false, "{p}");
    }
    let lsm = find(&probes, "bpf.lsm");
    assert!(lsm["ok"].is_boolean(), "{lsm}");

    if !expect_ready() {
        eprintln!("not root: only the shape of the report was checked");
        assert!(out.code == 0 || out.code == 1, "{out:?}");
        return;
    }
    let failed: Vec<&Value> = required
        .iter()
        .map(|n| find(&probes, n))
        .filter(|p| p["ok"] != true)
        .collect();
    assert!(failed.is_empty(), "required probes failed: {failed:#?}");
    assert_eq!(out.code, 0, "{out:?}");
    let landlock = find(&probes, "landlock")["detail"]
        .as_str()
        .unwrap_or_default();
    assert!(landlock.starts_with("ABI "), "{landlock}");
}

#[test]
fn doctor_text_has_a_line_per_probe() {
    let env = TestEnv::new();
    let out = env.run(["doctor"]);
    assert!(out.code == 0 || out.code == 1, "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    for name in [
        "namespace.user",
        "seccomp",
        "landlock",
        "cgroup.v2",
        "bpf.lsm",
    ] {
        let line = lines
            .iter()
            .find(|l| {
                l.get(5..)
                    .is_some_and(|r| r.starts_with(&format!("{name}: ")))
            })
            .unwrap_or_else(|| panic!("no line for {name}:\n{}", out.stdout));
        assert!(
            line.starts_with("ok   ") || line.starts_with("FAIL "),
            "{line}"
        );
    }
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with("FAIL ") {
            let next = lines.get(i + 1).copied().unwrap_or_default();
            assert!(next.starts_with("     fix: "), "no fix under {line}");
        }
    }
    if expect_ready() {
        assert_eq!(out.code, 0, "{out:?}");
        assert!(
            out.stdout.contains("warden's default mode works here"),
            "{}",
            out.stdout
        );
    }
}

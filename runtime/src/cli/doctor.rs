//! `warden doctor`: runs every runtime feature probe and says what works on this machine.
//! Exit code: 0 when everything warden's default mode needs works, 1 otherwise. BPF program
//! types, cgroup controllers, sysctls and the LSM list are informational.

use crate::linux::probe::{self, Probe};
use clap::Args;
use serde_json::json;
use std::io::Write as _;

#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// Print a JSON array of the probes for programs.
    #[arg(long)]
    pub json: bool,
}

/// Exit code when a probe warden's default mode needs has failed.
pub const EXIT_NOT_READY: i32 = 1;

pub fn run(args: &DoctorArgs) -> anyhow::Result<i32> {
    let probes = probe::run_all();
    let text = if args.json {
        let mut j = serde_json::to_string_pretty(&to_json(&probes))?;
        j.push('\n');
        j
    } else {
        render(&probes)
    };
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => {}
        // A reader that stopped early (`warden doctor | head`) is not warden's failure.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => return Err(anyhow::Error::new(e).context("writing the report")),
    }
    Ok(exit_code(&probes))
}

fn exit_code(probes: &[Probe]) -> i32 {
    if probes.iter().any(|p| p.required() && !p.ok) {
        EXIT_NOT_READY
    } else {
        0
    }
}

fn to_json(probes: &[Probe]) -> serde_json::Value {
    probes
        .iter()
        .map(|p| {
            json!({
                "name": p.name,
                "ok": p.ok,
                "required": p.required(),
                "detail": p.detail,
                "fix": p.fix,
            })
        })
        .collect()
}

/// One line per probe (`ok   name: detail`, or `FAIL name: detail` and an indented `fix:`
/// line), then a summary line.
fn render(probes: &[Probe]) -> String {
    let mut out = String::new();
    for p in probes {
        if p.ok {
            out.push_str(&format!("ok   {}: {}\n", p.name, p.detail));
        } else {
            out.push_str(&format!("FAIL {}: {}\n", p.name, p.detail));
            if let Some(fix) = &p.fix {
                out.push_str(&format!("     fix: {fix}\n"));
            }
        }
    }
    let failed = |required: bool| -> Vec<&str> {
        probes
            .iter()
            .filter(|p| !p.ok && p.required() == required)
            .map(|p| p.name)
            .collect()
    };
    let (required, optional) = (failed(true), failed(false));
    if required.is_empty() {
        out.push_str("\nwarden's default mode works here");
    } else {
        out.push_str(&format!(
            "\nwarden's default mode cannot run here: {} failed",
            required.join(", ")
        ));
    }
    if !optional.is_empty() {
        out.push_str(&format!(
            " (informational failures: {})",
            optional.join(", ")
        ));
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(name: &'static str, ok: bool) -> Probe {
        Probe {
            name,
            ok,
            detail: format!("{name} detail"),
            fix: (!ok).then(|| format!("fix {name}")),
        }
    }

    #[test]
    fn only_required_failures_fail_the_doctor() {
        let all_ok = [probe("seccomp", true), probe("bpf.lsm", false)];
        assert_eq!(exit_code(&all_ok), 0);
        let broken = [probe("seccomp", false), probe("bpf.lsm", true)];
        assert_eq!(exit_code(&broken), EXIT_NOT_READY);
    }

    #[test]
    fn text_has_one_line_per_probe_and_fixes_under_failures() {
        let text = render(&[probe("seccomp", true), probe("bpf.lsm", false)]);
        assert_eq!(
            text,
            "ok   seccomp: seccomp detail\n\
             FAIL bpf.lsm: bpf.lsm detail\n     fix: fix bpf.lsm\n\
             \nwarden's default mode works here (informational failures: bpf.lsm)\n"
        );
        let text = render(&[probe("landlock", false)]);
        assert!(
            text.ends_with("cannot run here: landlock failed\n"),
            "{text}"
        );
    }

    #[test]
    fn json_marks_required_probes() {
        let v = to_json(&[probe("landlock", true), probe("bpf.lsm", false)]);
        assert_eq!(v[0]["name"], "landlock");
        assert_eq!(v[0]["required"], true);
        assert_eq!(v[0]["fix"], serde_json::Value::Null);
        assert_eq!(v[1]["required"], false);
        assert_eq!(v[1]["ok"], false);
        assert_eq!(v[1]["fix"], "fix bpf.lsm");
    }
}

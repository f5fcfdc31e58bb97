//! Runs a command that writes outside its project in a sandbox, through the library API, and
//! shows what happened: the exit status, the host file untouched, the violation record and the
//! `<sandbox_violations>` block an agent's model would see.
//!
//! ```sh
//! cargo build -p warden
//! WARDEN_BIN=target/debug/warden cargo run -p warden --example run_sandboxed
//! ```
//!
//! Exits non-zero if the sandbox let the write through, or (as root, where warden's eBPF
//! programs record what the kernel refused) if the refusal was not reported.

use std::process::ExitCode;
use warden::api::{Kind, Sandbox};

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("run_sandboxed: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<bool, Box<dyn std::error::Error>> {
    let tmp = tempfile::Builder::new()
        .prefix("warden-example-")
        .tempdir()?;
    let project = tmp.path().join("project");
    std::fs::create_dir(&project)?;
    let host_file = tmp.path().join("host.txt");
    std::fs::write(&host_file, "precious\n")?;

    // The sandbox: the project is writable, the rest of the host read-only, no network.
    let sandbox = Sandbox::builder()
        .cwd(&project)
        .no_network()
        .non_interactive()
        .build();
    println!("warden binary: {}", sandbox.warden_binary()?.display());

    let script = format!(
        "echo building > build.log; echo pwned > '{}'",
        host_file.display()
    );
    println!("$ sh -c {script:?}   (in {})", project.display());
    let out = sandbox.command("sh").arg("-c").arg(&script).output()?;

    println!("exit status: {:?}", out.code());
    print!("stderr:\n{}", String::from_utf8_lossy(&out.stderr));
    let host_now = std::fs::read_to_string(&host_file)?;
    println!("host file now: {host_now:?}");
    let log = std::fs::read_to_string(project.join("build.log")).unwrap_or_default();
    println!("project/build.log: {log:?}");
    println!("violations: {}", out.violations.len());
    for v in &out.violations {
        println!(
            "  {} {} {} errno={} layer={} by {} ({})",
            v.kind,
            v.operation,
            v.target,
            v.errno.as_ref().map_or("-", |e| e.name.as_str()),
            v.layer.as_ref().map_or("-", |l| l.as_str()),
            v.comm.as_deref().unwrap_or("?"),
            v.reason.as_deref().unwrap_or("")
        );
    }
    println!(
        "\nwhat the agent sees (annotated stderr):\n{}",
        out.annotated_stderr()
    );

    let mut ok = true;
    if out.success() {
        eprintln!("FAIL: the command succeeded: the write outside the project was not refused");
        ok = false;
    }
    if host_now != "precious\n" {
        eprintln!("FAIL: the host file changed");
        ok = false;
    }
    if log != "building\n" {
        eprintln!("FAIL: the write inside the project did not happen");
        ok = false;
    }
    let target = host_file.display().to_string();
    let reported = out
        .violations
        .iter()
        .any(|v| v.kind == Kind::FileWrite && v.target == target);
    if !reported {
        if nix::unistd::geteuid().is_root() {
            eprintln!("FAIL: no file-write violation for {target}");
            ok = false;
        } else {
            println!("(no kernel records: they need root, for warden's eBPF programs)");
        }
    }
    if ok {
        println!("run_sandboxed: the write was refused, the host file is untouched");
    }
    Ok(ok)
}

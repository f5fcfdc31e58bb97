//! The tokio side of the library API, from a multi-threaded runtime as agent harnesses have
//! one: several sandboxed commands at once, each one's stdout captured and its exit code
//! passed through, then one streamed line by line from a spawned child.
//!
//! ```sh
//! cargo build -p warden
//! WARDEN_BIN=target/debug/warden cargo run -p warden --example tokio_output
//! ```
//!
//! Exits non-zero if an output or an exit code is not what the command produced.

use std::process::{ExitCode, Stdio};
use tokio::io::{AsyncBufReadExt, BufReader};
use warden::api::Sandbox;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("tokio_output: error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<bool, Box<dyn std::error::Error>> {
    let project = tempfile::Builder::new()
        .prefix("warden-example-")
        .tempdir()?;
    let sandbox = Sandbox::builder()
        .cwd(project.path())
        .no_network()
        .non_interactive()
        .build();
    let mut ok = true;

    // Three sandboxes at once, each on the runtime's worker threads.
    let mut tasks = tokio::task::JoinSet::new();
    for i in 1..=3 {
        let sandbox = sandbox.clone();
        tasks.spawn(async move {
            let script = format!("echo \"task {i}: $(pwd)\"; exit {i}");
            let out = sandbox
                .command("sh")
                .arg("-c")
                .arg(&script)
                .output_async()
                .await;
            (i, out)
        });
    }
    while let Some(joined) = tasks.join_next().await {
        let (i, out) = joined?;
        let out = out?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        println!("task {i}: exit {:?}, stdout {stdout:?}", out.code());
        let expected = format!("task {i}: {}\n", project.path().display());
        if out.code() != Some(i) || stdout != expected {
            eprintln!(
                "FAIL: task {i}: expected exit {i} and {expected:?}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            ok = false;
        }
    }

    // Streaming: read the command's stdout while it runs.
    let mut child = sandbox
        .command("sh")
        .arg("-c")
        .arg("for n in 1 2 3; do echo line $n; done")
        .stdout(Stdio::piped())
        .spawn_async()?;
    let mut lines = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
    let mut seen = Vec::new();
    while let Some(line) = lines.next_line().await? {
        println!("streamed: {line}");
        seen.push(line);
    }
    let status = child.wait().await?;
    println!("streamed command: exit {:?}", status.code());
    if seen != ["line 1", "line 2", "line 3"] || !status.success() {
        eprintln!("FAIL: streamed {seen:?}, exit {:?}", status.code());
        ok = false;
    }

    if ok {
        println!("tokio_output: every command's output and exit code came through");
    }
    Ok(ok)
}

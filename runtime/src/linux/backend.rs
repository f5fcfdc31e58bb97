//! [`Backend`] for Linux: janitor, run directory, plan, cgroup, placeholders, start, wait,
//! teardown — in that order, each step undone if a later one fails, and each thing created on
//! the host reported to the janitor as soon as it exists.

use super::cgroup::{Cgroup, Limits};
use super::janitor::Janitor;
use super::plan::{self, Placeholder, PlanInput, RunDirs};
use super::spawn::{self, RunDir, SpawnError};
use crate::backend::{Backend, BackendError, Sandbox, SandboxCommand, Workspace};
use crate::policy::fsview::RealFs;
use crate::policy::merge::Policy;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

pub struct LinuxBackend;

pub struct LinuxWorkspace {
    run_dir: RunDir,
    janitor: Janitor,
}

impl Workspace for LinuxWorkspace {
    fn tmpdir(&self) -> PathBuf {
        self.run_dir.tmpdir()
    }
}

pub struct LinuxSandbox {
    inner: spawn::Sandbox,
    run_dir: RunDir,
    placeholders: Vec<Placeholder>,
    _janitor: Janitor,
}

impl Backend for LinuxBackend {
    type Workspace = LinuxWorkspace;
    type Sandbox = LinuxSandbox;

    /// Must be called while the process is single-threaded (it forks the janitor), as
    /// `warden run` does first thing.
    fn workspace(&self) -> Result<LinuxWorkspace, BackendError> {
        // SAFETY: documented precondition: no thread has been started yet.
        let mut janitor = unsafe { Janitor::start() }.map_err(SpawnError::Start)?;
        let run_dir = RunDir::create()?;
        janitor.run_dir(run_dir.path());
        Ok(LinuxWorkspace { run_dir, janitor })
    }

    fn spawn(
        &self,
        ws: LinuxWorkspace,
        policy: &Policy,
        command: &SandboxCommand,
    ) -> Result<LinuxSandbox, BackendError> {
        if !policy.sandbox_enabled() {
            return Err(BackendError::Disabled);
        }
        let LinuxWorkspace {
            run_dir,
            mut janitor,
        } = ws;
        let plan = plan::build(
            PlanInput {
                policy,
                argv: command.argv.iter().map(|a| a.clone().into_vec()).collect(),
                env: command_env(policy, command, &run_dir),
                dirs: RunDirs {
                    root: run_dir.root(),
                    tmpdir: run_dir.tmpdir(),
                },
            },
            &RealFs,
        )?;
        let cgroup = match Cgroup::create(&format!("{}", std::process::id())) {
            Ok(mut cg) => {
                janitor.cgroup(cg.path());
                let applied = cg.apply_limits(&limits(policy));
                for leaf in cg.v1_leaves() {
                    janitor.cgroup(leaf);
                }
                applied.map_err(BackendError::Limits)?;
                Some(cg)
            }
            Err(e) if !policy.fail_if_unavailable() => {
                eprintln!(
                    "warden: warning: running without a cgroup (failIfUnavailable is false): {e}"
                );
                None
            }
            Err(e) => return Err(SpawnError::Cgroup(e).into()),
        };
        // Blocked before the sandbox exists, so no forwarded signal is lost.
        super::init::signal_set()
            .thread_block()
            .map_err(|e| BackendError::Io {
                what: "blocking signals",
                source: e.into(),
            })?;
        let placeholders = plan::create_placeholders(&plan, &mut |ph| janitor.placeholder(ph))
            .map_err(|source| BackendError::Io {
                what: "creating protected placeholders",
                source,
            })?;
        match spawn::start(&plan, cgroup) {
            Ok(inner) => Ok(LinuxSandbox {
                inner,
                run_dir,
                placeholders,
                _janitor: janitor,
            }),
            Err(e) => {
                plan::remove_placeholders(&placeholders);
                Err(e.into())
            }
        }
    }
}

impl Sandbox for LinuxSandbox {
    fn wait(self) -> i32 {
        let code = self.inner.wait();
        plan::remove_placeholders(&self.placeholders);
        if let Err(e) = self.run_dir.remove() {
            eprintln!("warden: warning: removing the run directory: {e}");
        }
        code
    }
}

fn limits(policy: &Policy) -> Limits {
    let e = &policy.effective;
    Limits {
        pids_max: e.u64("warden.limits.pidsMax"),
        memory_max: e.u64("warden.limits.memoryMax"),
        cpu_max: e.str("warden.limits.cpuMax").map(str::to_string),
    }
}

/// The caller's environment minus `warden.env.deny`, plus TMPDIR and the sandbox markers.
fn command_env(policy: &Policy, command: &SandboxCommand, run_dir: &RunDir) -> Vec<Vec<u8>> {
    let deny: Vec<globset::GlobMatcher> = policy
        .env_deny
        .iter()
        .filter_map(|r| {
            globset::Glob::new(&r.pattern)
                .ok()
                .map(|g| g.compile_matcher())
        })
        .collect();
    let mut env: Vec<Vec<u8>> = command
        .env
        .iter()
        .filter(|(k, _)| {
            let name = k.to_string_lossy();
            !matches!(name.as_ref(), "TMPDIR" | "IS_SANDBOX" | "WARDEN_SANDBOX")
                && !deny.iter().any(|m| m.is_match(name.as_ref()))
        })
        .map(|(k, v)| {
            let mut b = k.clone().into_vec();
            b.push(b'=');
            b.extend(v.clone().into_vec());
            b
        })
        .collect();
    let mut tmp = b"TMPDIR=".to_vec();
    tmp.extend(run_dir.tmpdir().into_os_string().into_vec());
    env.push(tmp);
    env.push(b"IS_SANDBOX=1".to_vec());
    env.push(b"WARDEN_SANDBOX=1".to_vec());
    env
}

//! The Linux backend: warden builds the sandbox itself with namespaces, mounts, Landlock,
//! seccomp and a cgroup — no bubblewrap, no helper binaries.
//!
//! - [`plan`]: Policy → [`plan::Plan`], plain data (mount list, env, limits); pure and
//!   unit-tested without root.
//! - [`spawn`]: the supervisor side: run dir, cgroup, namespaces, uid/gid maps, hand-over of
//!   the plan, signal forwarding, exit status, teardown.
//! - [`init`]: the sandbox's pid 1, cloned into its namespaces: builds the mount view, pivot_root,
//!   runs as pid 1, forks the command and hardens it.
//! - [`mount`]: the mount operations (the one place that calls mount syscalls).
//! - [`seccomp`], [`landlock`], [`harden`]: the command's own restrictions.
//! - [`janitor`]: the forked process that cleans up if the supervisor is killed.
//! - [`cgroup`]: one cgroup v2 leaf per sandbox; [`probe`]: runtime feature probes.

pub mod backend;
pub mod cgroup;
#[cfg(test)]
pub(crate) mod child_probe;
pub mod clone;
pub mod gitindex;
pub mod gitrefs;
pub mod harden;
pub mod init;
pub mod janitor;
pub mod landlock;
pub mod mount;
pub mod net;
pub mod placeholder;
pub mod plan;
pub mod probe;
pub mod pty;
pub mod rawsys;
pub mod seccomp;
pub mod spawn;
pub mod watch;

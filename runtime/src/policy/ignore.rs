//! `ignoreViolations`: command pattern → paths whose violation records are dropped (not
//! counted, not written), on every backend.

use super::merge::Policy;
use std::path::{Component, Path, PathBuf};

/// The `ignoreViolations` paths for a command line: the entries under `*` and under every
/// command pattern the line starts with, word for word (`"git push"` covers `git push origin
/// main`, not `git pushx`). Relative paths are taken from the working directory.
pub fn ignored_paths(policy: &Policy, command_line: &str) -> Vec<PathBuf> {
    let Some(map) = policy.effective.map_lists.get("ignoreViolations") else {
        return Vec::new();
    };
    let words: Vec<&str> = command_line.split_whitespace().collect();
    let mut out = Vec::new();
    for (pattern, paths) in map {
        let pat: Vec<&str> = pattern.split_whitespace().collect();
        let applies = pattern.trim() == "*" || (!pat.is_empty() && words.starts_with(&pat));
        if !applies {
            continue;
        }
        for p in paths.iter().filter_map(|v| v.value.as_str()) {
            out.push(super::path::expand_path(
                p,
                &policy.context.cwd,
                &policy.context.home,
            ));
        }
    }
    out
}

/// Whether a record's target lies under one of `ignored` (a path prefix, component-wise:
/// `/tmp/x` covers `/tmp/x/y`, not `/tmp/xy`).
pub fn is_ignored(target: &str, ignored: &[PathBuf]) -> bool {
    // A path with `.` or `..` in it is never ignored: `/usr/share/doc/../../../etc/x` starts
    // with an ignored `/usr/share/doc` and names `/etc/x` (the command chooses how to spell
    // what it writes); nor is a relative one.
    // Nor is a path the kernel program cut at its capture limit (marked with a final `…`): the
    // part that was cut could hold `..` (`/usr/share/doc` + 600 slashes + `../../../etc/x`).
    let path = Path::new(target);
    if target.ends_with('…')
        || !path.is_absolute()
        || path
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
        || target.split('/').any(|c| c == "." || c == "..")
    {
        return false;
    }
    ignored.iter().any(|p| path.starts_with(p))
}

#[cfg(test)]
#[path = "ignore_tests.rs"]
mod tests;

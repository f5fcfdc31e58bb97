//! Seatbelt denials from the unified log, as violation records.
//!
//! Every deny rule of a warden profile carries `(with message "TAG")`, a tag unique to the
//! sandbox, and the kernel appends that message to its report. warden runs
//!
//! ```text
//! /usr/bin/log stream --style ndjson --predicate 'eventMessage ENDSWITH "TAG"'
//! ```
//!
//! and parses each line here: one JSON object whose `eventMessage` reads
//! `Sandbox: NAME(PID) deny(N) OPERATION TARGET TAG`, or
//! `Sandbox: N duplicate reports for NAME deny(1) OPERATION TARGET TAG` when the kernel
//! coalesced repeats. Lines that are not JSON (the `Filtering the log data…` banner), not a
//! sandbox report, or not tagged for this sandbox are skipped.
//!
//! Records use the field names and kind names of the Linux audit records
//! (`audit::record::ViolationRecord`: `time`, `sandbox`, `source`, `pid`, `comm`, `kind`,
//! `violation`, `operation`, `target`, `layer`, `reason`, `count`), so one JSONL reader handles
//! both platforms.

use serde::Serialize;

/// What kind of thing was refused; serialised like the Linux records' kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    FileRead,
    FileWrite,
    Exec,
    Network,
    UnixSocket,
    Process,
    /// Mach services, sysctls, IPC, IOKit, preferences and the rest.
    Syscall,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::FileRead => "file-read",
            Kind::FileWrite => "file-write",
            Kind::Exec => "exec",
            Kind::Network => "network",
            Kind::UnixSocket => "unix-socket",
            Kind::Process => "process",
            Kind::Syscall => "syscall",
        }
    }
}

/// One Seatbelt denial.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// RFC 3339, UTC, milliseconds (from the log record's timestamp).
    pub time: String,
    /// The session tag of the sandbox.
    pub sandbox: String,
    /// Always `seatbelt`.
    pub source: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The process name as the kernel reported it.
    pub comm: String,
    pub kind: Kind,
    /// Always true: Seatbelt reports refusals only.
    pub violation: bool,
    /// Seatbelt's operation: `file-read-data`, `file-write-create`, `network-outbound`,
    /// `mach-lookup`, …
    pub operation: String,
    /// A path, `address:port`, a Mach service or sysctl name.
    pub target: String,
    /// Always `seatbelt`.
    pub layer: &'static str,
    pub reason: String,
    pub count: u64,
}

impl Violation {
    /// One line for the end of a run, like the Linux records' summary lines.
    pub fn summary_line(&self) -> String {
        let mut s = format!(
            "{} {} {} [seatbelt] by {}",
            self.kind.name(),
            self.operation,
            crate::api::printable(&self.target),
            crate::api::printable(&self.comm)
        );
        if self.count > 1 {
            s.push_str(&format!(" ×{}", self.count));
        }
        s
    }
}

/// The kind of a Seatbelt operation (and its target, for sockets).
pub fn kind_of(operation: &str, target: &str) -> Kind {
    let op = operation.trim_end_matches('*');
    if op.starts_with("file-read") {
        Kind::FileRead
    } else if op.starts_with("file-write") || op == "file-link" || op == "file-clone" {
        Kind::FileWrite
    } else if op.starts_with("process-exec") {
        Kind::Exec
    } else if op.starts_with("network") {
        if target.starts_with('/') {
            Kind::UnixSocket
        } else {
            Kind::Network
        }
    } else if op.starts_with("process") || op == "signal" || op.starts_with("mach-priv") {
        Kind::Process
    } else {
        Kind::Syscall
    }
}

/// Parses one line of `log stream --style ndjson` output; `None` unless it is a Seatbelt
/// denial tagged `tag`.
pub fn parse_line(line: &str, tag: &str) -> Option<Violation> {
    let line = line.trim();
    if !line.starts_with('{') || tag.is_empty() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let message = v.get("eventMessage")?.as_str()?;
    let time = v
        .get("timestamp")
        .and_then(|t| t.as_str())
        .and_then(utc_rfc3339)
        .unwrap_or_default();
    parse_message(message, tag, time)
}

/// Parses an `eventMessage`.
pub fn parse_message(message: &str, tag: &str, time: String) -> Option<Violation> {
    let body = message.trim_end().strip_suffix(tag)?.trim_end();
    let body = &body[body.find("Sandbox: ")? + "Sandbox: ".len()..];
    // `NAME(PID) deny(N) OP TARGET` or `N duplicate report(s) for NAME deny(N) OP TARGET`.
    let deny_at = body.find(" deny(")?;
    let (who, rest) = (&body[..deny_at], &body[deny_at + 1..]);
    let close = rest.find(')')?;
    let reported: u64 = rest["deny(".len()..close].parse().ok()?;
    let rest = rest[close + 1..].trim_start();
    let (operation, target) = match rest.split_once(' ') {
        Some((op, t)) => (op, t.trim()),
        None => (rest, ""),
    };
    if operation.is_empty() {
        return None;
    }
    let (comm, pid, count) = match duplicate_reports(who) {
        Some((n, name)) => (name.to_string(), None, n),
        None => {
            let open = who.rfind('(')?;
            let pid: u32 = who[open + 1..].strip_suffix(')')?.parse().ok()?;
            (who[..open].to_string(), Some(pid), reported.max(1))
        }
    };
    let kind = kind_of(operation, target);
    Some(Violation {
        time,
        sandbox: tag.to_string(),
        source: "seatbelt",
        pid,
        comm,
        kind,
        violation: true,
        operation: operation.to_string(),
        target: target.to_string(),
        layer: "seatbelt",
        reason: format!("the Seatbelt profile denies {operation}"),
        count,
    })
}

/// `N duplicate report(s) for NAME` → (N, NAME).
fn duplicate_reports(who: &str) -> Option<(u64, &str)> {
    let (n, rest) = who.split_once(' ')?;
    let n: u64 = n.parse().ok()?;
    let rest = rest
        .strip_prefix("duplicate reports for ")
        .or_else(|| rest.strip_prefix("duplicate report for "))?;
    Some((n, rest))
}

/// Merges records that differ only in time and count (same process, operation and target).
pub fn coalesce(records: Vec<Violation>) -> Vec<Violation> {
    let mut out: Vec<Violation> = Vec::new();
    for r in records {
        match out.iter_mut().find(|o| {
            o.pid == r.pid && o.comm == r.comm && o.operation == r.operation && o.target == r.target
        }) {
            Some(o) => o.count += r.count,
            None => out.push(r),
        }
    }
    out
}

/// Records whose target lies under an `ignoreViolations` path are dropped (not counted, not
/// written), as on Linux.
pub fn drop_ignored(records: Vec<Violation>, ignored: &[std::path::PathBuf]) -> Vec<Violation> {
    records
        .into_iter()
        .filter(|r| !crate::policy::ignore::is_ignored(&r.target, ignored))
        .collect()
}

/// The `<sandbox_violations>` block of `--annotate-stderr` for coalesced records, in the same
/// shape as Linux's.
pub fn annotation(records: &[Violation]) -> String {
    let max = crate::backend::ANNOTATE_MAX;
    let lines: Vec<String> = records
        .iter()
        .take(max)
        .map(Violation::summary_line)
        .collect();
    let more: u64 = records.iter().skip(max).map(|r| r.count).sum();
    crate::backend::annotation_block(&lines, more, None)
}

/// `log`'s timestamp (`2026-11-21 16:24:15.123456-0800`) as RFC 3339 in UTC with milliseconds
/// (`2026-11-22T00:24:15.123Z`).
pub fn utc_rfc3339(ts: &str) -> Option<String> {
    let ts = ts.trim();
    let (date, rest) = ts.split_once(' ').or_else(|| ts.split_once('T'))?;
    let mut d = date.split('-');
    let year: i64 = d.next()?.parse().ok()?;
    let month: i64 = d.next()?.parse().ok()?;
    let day: i64 = d.next()?.parse().ok()?;
    // The offset starts at the last `+` or `-` (the time has none); `Z` means UTC.
    let (clock, offset_min) = if let Some(c) = rest.strip_suffix('Z') {
        (c, 0)
    } else {
        let at = rest.rfind(['+', '-'])?;
        let (c, off) = rest.split_at(at);
        let sign = if off.starts_with('-') { -1 } else { 1 };
        let digits: String = off[1..].chars().filter(|c| c.is_ascii_digit()).collect();
        if digits.len() != 4 {
            return None;
        }
        let h: i64 = digits[..2].parse().ok()?;
        let m: i64 = digits[2..].parse().ok()?;
        (c, sign * (h * 60 + m))
    };
    let (hms, frac) = clock.split_once('.').unwrap_or((clock, "0"));
    let mut t = hms.split(':');
    let hour: i64 = t.next()?.parse().ok()?;
    let minute: i64 = t.next()?.parse().ok()?;
    let second: i64 = t.next()?.parse().ok()?;
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let millis: i64 = format!("{:0<3}", &frac[..frac.len().min(3)]).parse().ok()?;
    let local = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    let utc = local - offset_min * 60;
    let (days, secs) = (utc.div_euclid(86_400), utc.rem_euclid(86_400));
    let (y, mo, dd) = civil_from_days(days);
    Some(format!(
        "{y:04}-{mo:02}-{dd:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    ))
}

/// Days since 1970-01-01 (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The `log stream` arguments for a session tag.
pub fn log_stream_args(tag: &str) -> Vec<String> {
    vec![
        "stream".into(),
        "--style".into(),
        "ndjson".into(),
        "--predicate".into(),
        format!("eventMessage ENDSWITH \"{tag}\""),
    ]
}

#[cfg(test)]
#[path = "logstream_tests.rs"]
mod tests;

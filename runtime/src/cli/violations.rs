//! `warden violations [--file FILE] [--since T] [--kind K]... [--all] [--json] [--follow]`:
//! queries a violations file (the JSON lines `warden run --violations FILE` appends).
//!
//! Records are read as JSON values, so a file written by another warden version still reads;
//! a line that is not JSON is reported and skipped. `--since` takes an RFC 3339 time
//! (`2026-11-22T01:20:00Z`) or a duration back from now (`90s`, `10m`, `2h`, `1d`).

use anyhow::{bail, Context};
use clap::Args;
use serde_json::Value;
use std::io::{BufRead, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct ViolationsArgs {
    /// The violations file (default: `warden.audit.violationsFile` of the effective settings).
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Only records at or after this time: RFC 3339, or a duration back from now (10m, 2h).
    #[arg(long, value_name = "T")]
    pub since: Option<String>,
    /// Only records of these kinds (file-read, file-write, exec, network, unix-socket, ...).
    #[arg(long = "kind", value_name = "K")]
    pub kinds: Vec<String>,
    /// Also records that are not violations (execs, allowed connections).
    #[arg(long)]
    pub all: bool,
    /// Print the matching records as JSON lines instead of one summary line each.
    #[arg(long)]
    pub json: bool,
    /// Keep reading as the file grows (until interrupted).
    #[arg(long)]
    pub follow: bool,
    #[command(flatten)]
    pub policy: super::PolicyArgs,
}

/// The query, without I/O.
#[derive(Debug, Default)]
pub(crate) struct Filter {
    pub since: Option<String>,
    pub kinds: Vec<String>,
    pub all: bool,
}

impl Filter {
    pub(crate) fn matches(&self, rec: &Value) -> bool {
        if !self.all && rec["violation"] != Value::Bool(true) {
            return false;
        }
        if !self.kinds.is_empty()
            && !self
                .kinds
                .iter()
                .any(|k| rec["kind"].as_str() == Some(k.as_str()))
        {
            return false;
        }
        match (&self.since, rec["time"].as_str()) {
            // Records carry RFC 3339 UTC times of one fixed format: text order is time order.
            (Some(since), Some(t)) => t >= since.as_str(),
            (Some(_), None) => false,
            (None, _) => true,
        }
    }
}

/// `--since`: an RFC 3339 UTC time as records write it, or a duration back from `now_ms`.
pub(crate) fn parse_since(text: &str, now_ms: u64) -> anyhow::Result<String> {
    let t = text.trim();
    let unit = |c: char| match c {
        's' => Some(1_000u64),
        'm' => Some(60_000),
        'h' => Some(3_600_000),
        'd' => Some(86_400_000),
        _ => None,
    };
    if let Some(last) = t.chars().last() {
        if let (Some(ms), Ok(n)) = (unit(last), t[..t.len() - 1].parse::<u64>()) {
            let back = n.saturating_mul(ms);
            return Ok(crate::audit::record::rfc3339_ms(
                now_ms.saturating_sub(back),
            ));
        }
    }
    // An absolute time: the date must look like records' (YYYY-MM-DDTHH:MM...).
    let b = t.as_bytes();
    let looks_absolute = b.len() >= 16
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b.iter().all(|c| c.is_ascii_graphic());
    if !looks_absolute {
        bail!("--since {t:?}: expected an RFC 3339 UTC time (2026-11-22T01:20:00Z) or a duration (90s, 10m, 2h, 1d)");
    }
    Ok(t.trim_end_matches('Z').to_string())
}

fn show(rec: &Value, json: bool) -> String {
    if json {
        return rec.to_string();
    }
    // Every field as text a terminal shows as it is (the command chose paths and names).
    let s = |k: &str| crate::api::printable(rec[k].as_str().unwrap_or("")).into_owned();
    let mut line = format!(
        "{} {} {} {}",
        s("time"),
        s("kind"),
        s("operation"),
        s("target")
    );
    if let Some(e) = rec["errno"]["name"].as_str() {
        line.push_str(&format!(" ({})", crate::api::printable(e)));
    }
    if let Some(l) = rec["layer"].as_str() {
        line.push_str(&format!(" [{}]", crate::api::printable(l)));
    }
    if let Some(c) = rec["comm"].as_str() {
        line.push_str(&format!(" by {}", crate::api::printable(c)));
    }
    if let Some(n) = rec["count"].as_u64().filter(|n| *n > 1) {
        line.push_str(&format!(" ×{n}"));
    }
    line
}

pub fn run(args: &ViolationsArgs) -> anyhow::Result<i32> {
    let file = match &args.file {
        Some(f) => f.clone(),
        None => {
            let policy = args.policy.load()?;
            match policy.effective.str("warden.audit.violationsFile") {
                Some(f) => policy.context.cwd.join(f),
                None => {
                    bail!("no violations file: pass --file FILE or set warden.audit.violationsFile")
                }
            }
        }
    };
    let now_ms = crate::net::event::now_ms();
    let filter = Filter {
        since: args
            .since
            .as_deref()
            .map(|s| parse_since(s, now_ms))
            .transpose()?,
        kinds: args.kinds.clone(),
        all: args.all,
    };
    let f = std::fs::File::open(&file).with_context(|| format!("opening {}", file.display()))?;
    let mut reader = std::io::BufReader::new(f);
    // Bytes, not text: a line that is not UTF-8 (the file is written next to a sandbox) is
    // one bad line, skipped like any other, not the end of the query.
    let mut line: Vec<u8> = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .with_context(|| format!("reading {}", file.display()))?;
        if n == 0 || line.last() != Some(&b'\n') {
            if !args.follow {
                return Ok(0);
            }
            // A partial last line is read again once it is complete.
            if n > 0 {
                reader.seek(SeekFrom::Current(-(n as i64)))?;
            }
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        number += 1;
        match serde_json::from_slice::<Value>(line.trim_ascii_end()) {
            Ok(rec) if filter.matches(&rec) => println!("{}", show(&rec, args.json)),
            Ok(_) => {}
            Err(e) => eprintln!(
                "warden: {}:{number}: not a record ({e}); skipped",
                file.display()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn filters_by_violation_kind_and_time() {
        let exec = json!({"time":"2026-11-22T01:00:00.000Z","kind":"exec","violation":false});
        let write = json!({"time":"2026-11-22T01:00:05.000Z","kind":"file-write","violation":true,
                           "operation":"open","target":"/etc/x","errno":{"name":"EROFS"},
                           "layer":"mount","comm":"sh","count":3});
        let f = Filter::default();
        assert!(!f.matches(&exec) && f.matches(&write));
        let all = Filter {
            all: true,
            ..Default::default()
        };
        assert!(all.matches(&exec));
        let kind = Filter {
            kinds: vec!["network".into()],
            ..Default::default()
        };
        assert!(!kind.matches(&write));
        let since = Filter {
            since: Some("2026-11-22T01:00:01".into()),
            ..Default::default()
        };
        assert!(since.matches(&write));
        let later = Filter {
            since: Some("2026-11-22T01:00:06".into()),
            ..Default::default()
        };
        assert!(!later.matches(&write));
        assert_eq!(
            show(&write, false),
            "2026-11-22T01:00:05.000Z file-write open /etc/x (EROFS) [mount] by sh ×3"
        );
    }

    #[test]
    fn since_takes_durations_and_absolute_times() {
        let now = 1_000_000_000_000; // 2001-09-09T01:46:40Z
        assert_eq!(
            parse_since("10m", now).unwrap(),
            crate::audit::record::rfc3339_ms(now - 600_000)
        );
        assert_eq!(
            parse_since("2026-11-22T01:20:00Z", now).unwrap(),
            "2026-11-22T01:20:00"
        );
        for bad in ["yesterday", "10x", "", "2026-11-22"] {
            assert!(parse_since(bad, now).is_err(), "{bad}");
        }
    }
}

//! `warden run`'s side of the audit daemon (docs/audit-daemon.md): connect to its socket
//! ([`Client::connect`], while still single-threaded), register the sandbox's cgroup before
//! the go byte ([`Client::register`]), then read the sandbox's kernel records the daemon
//! streams back into the run's own collector, and send the proxy's records and bytes up
//! ([`Client::start`], [`Uplink`]). [`Running::finish`] asks for what is left and closes the
//! connection, which unregisters the sandbox; so does the process's death.

use super::protocol::{self, Event, LossCounts, Register, Reply, Request, Status, MAX_LINE};
use super::record::{Kind, ViolationRecord};
use super::{AuditError, Collector};
use crate::metrics::Metrics;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the daemon may take to answer a registration.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a write to the daemon may block.
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// The reader wakes up this often without records (bytes, flushes, the finish deadline).
const TICK: Duration = Duration::from_millis(250);
/// How long the daemon may take to send `done` after `finish`.
const FINISH_TIMEOUT: Duration = Duration::from_secs(5);

/// Reads one line into `buf` without its newline. `Ok(true)`: a line; `Ok(false)`: end of
/// stream. A timeout is returned as the error and keeps the partial line in `buf`, so the
/// next call completes it. Lines longer than [`MAX_LINE`] are an error.
pub(crate) fn read_line<R: BufRead>(reader: &mut R, buf: &mut Vec<u8>) -> std::io::Result<bool> {
    loop {
        let limit = u64::try_from((MAX_LINE + 2).saturating_sub(buf.len())).unwrap_or(0);
        let n = (&mut *reader).take(limit).read_until(b'\n', buf)?;
        if buf.last() == Some(&b'\n') {
            buf.pop();
            return Ok(true);
        }
        if buf.len() > MAX_LINE {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("a line longer than {MAX_LINE} bytes"),
            ));
        }
        if n == 0 {
            return Ok(false);
        }
    }
}

fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

fn daemon_err(what: &str, e: impl std::fmt::Display) -> AuditError {
    AuditError::Daemon(format!("{what}: {e}"))
}

/// A connection to the audit daemon.
pub struct Client {
    stream: UnixStream,
    reader: BufReader<UnixStream>,
}

impl Client {
    /// Connects to the daemon's socket (`$WARDEN_AUDIT_SOCKET`, else
    /// `/run/warden/audit.sock`); `None` when none is configured or nothing listens there.
    /// Starts no thread.
    pub fn connect() -> Option<Client> {
        let path = protocol::socket_path(std::env::var_os(protocol::SOCKET_ENV))?;
        Client::connect_to(&path).ok()
    }

    pub fn connect_to(path: &Path) -> std::io::Result<Client> {
        let stream = UnixStream::connect(path)?;
        let reader = BufReader::new(stream.try_clone()?);
        Ok(Client { stream, reader })
    }

    /// Registers the sandbox; the daemon watches its cgroup once this returns. Returns the
    /// programs the daemon attached for it.
    pub fn register(&mut self, reg: &Register) -> Result<Status, AuditError> {
        self.stream
            .set_write_timeout(Some(WRITE_TIMEOUT))
            .and_then(|()| self.stream.set_read_timeout(Some(REGISTER_TIMEOUT)))
            .map_err(|e| daemon_err("configuring the connection", e))?;
        self.stream
            .write_all(protocol::line(&Request::Register(Box::new(reg.clone()))).as_bytes())
            .map_err(|e| daemon_err("sending the registration", e))?;
        let mut buf = Vec::new();
        let got = read_line(&mut self.reader, &mut buf)
            .map_err(|e| daemon_err("waiting for the daemon's answer", e))?;
        if !got {
            return Err(AuditError::Daemon(
                "the daemon closed the connection without an answer".into(),
            ));
        }
        match protocol::parse_reply(&buf).map_err(|e| daemon_err("its answer", e))? {
            Reply::Status(status) if status.ok => Ok(status),
            Reply::Status(Status { error, .. }) => Err(AuditError::Daemon(format!(
                "refused: {}",
                error.unwrap_or_else(|| "no reason given".into())
            ))),
            Reply::Event(_) => Err(AuditError::Daemon(
                "an event before the answer to the registration".into(),
            )),
        }
    }

    /// Starts reading the daemon's records into `collector` on a thread of its own (call
    /// once the sandbox runs). File records get the policy's rule (`policy`), as the run's
    /// own classifier would have named it.
    pub fn start(
        self,
        collector: Arc<Collector>,
        policy: Option<Arc<crate::policy::merge::Policy>>,
        metrics: Option<Arc<Metrics>>,
    ) -> Result<Running, AuditError> {
        let Client { stream, mut reader } = self;
        reader
            .get_ref()
            .set_read_timeout(Some(TICK))
            .map_err(|e| daemon_err("configuring the connection", e))?;
        let uplink = Arc::new(Uplink {
            stream: Mutex::new(stream),
            up: AtomicU64::new(0),
            down: AtomicU64::new(0),
            broken: AtomicBool::new(false),
        });
        collector.set_uplink(uplink.clone());
        let finishing: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
        let thread_uplink = uplink.clone();
        let thread_finishing = finishing.clone();
        let thread = std::thread::Builder::new()
            .name("warden-audit-daemon".into())
            .spawn(move || {
                read_records(
                    &mut reader,
                    &collector,
                    policy.as_deref(),
                    metrics.as_deref(),
                    &thread_uplink,
                    &thread_finishing,
                )
            })
            .map_err(|e| AuditError::Reader(e.to_string()))?;
        Ok(Running {
            uplink,
            thread: Some(thread),
            finishing,
        })
    }
}

/// How the daemon's stream ended.
enum Outcome {
    Done(LossCounts),
    /// Closed, unreadable, or no `done` in time.
    Lost(String),
}

fn read_records(
    reader: &mut BufReader<UnixStream>,
    collector: &Collector,
    policy: Option<&crate::policy::merge::Policy>,
    metrics: Option<&Metrics>,
    uplink: &Uplink,
    finishing: &Mutex<Option<Instant>>,
) -> Outcome {
    let mut buf = Vec::new();
    let mut counted = 0u64;
    loop {
        match read_line(reader, &mut buf) {
            Ok(true) => {
                let reply = protocol::parse_reply(&buf);
                buf.clear();
                match reply {
                    Ok(Reply::Event(Event::Record { record })) => {
                        let mut rec = *record;
                        if rec.source == "ebpf" {
                            counted += 1;
                            if let Some(m) = metrics {
                                m.bpf_event();
                            }
                        }
                        if let Some(p) = policy {
                            name_rule(p, &mut rec);
                        }
                        collector.push(rec);
                        if reader.buffer().is_empty() {
                            collector.flush();
                        }
                    }
                    Ok(Reply::Event(Event::Done { losses, events })) => {
                        if let Some(m) = metrics {
                            m.bpf_events(events.saturating_sub(counted));
                        }
                        collector.flush();
                        return Outcome::Done(losses);
                    }
                    Ok(Reply::Status(_)) => {}
                    Err(e) => return Outcome::Lost(format!("an unreadable line: {e}")),
                }
            }
            Ok(false) => {
                collector.flush();
                return Outcome::Lost("the daemon closed the connection".into());
            }
            Err(e) if timed_out(&e) => {
                uplink.flush_bytes();
                collector.flush();
                let late = finishing
                    .lock()
                    .ok()
                    .and_then(|f| *f)
                    .is_some_and(|t| t.elapsed() > FINISH_TIMEOUT);
                if late {
                    return Outcome::Lost("no answer to `finish` in time".into());
                }
            }
            Err(e) => {
                collector.flush();
                return Outcome::Lost(e.to_string());
            }
        }
    }
}

/// The rule the run's policy names for a file record from the daemon (which does not have
/// the policy), as [`super::record::Classifier`] attaches it.
fn name_rule(policy: &crate::policy::merge::Policy, rec: &mut ViolationRecord) {
    let write = match rec.kind {
        Kind::FileWrite => true,
        Kind::FileRead => false,
        _ => return,
    };
    if rec.source != "ebpf" || rec.rule.is_some() {
        return;
    }
    let path = rec.target.trim_end_matches('…').to_string();
    super::record::attach_rule(policy, rec, Path::new(&path), write);
}

/// The run's way up to the daemon: the proxy's records and bytes.
pub struct Uplink {
    stream: Mutex<UnixStream>,
    up: AtomicU64,
    down: AtomicU64,
    broken: AtomicBool,
}

impl Uplink {
    /// A record warden run made itself (a proxy decision).
    pub fn record(&self, rec: &ViolationRecord) {
        self.send(&Request::Record {
            record: Box::new(rec.clone()),
        });
    }

    /// Bytes the proxy moved; sent up about every 250 ms and at the end.
    pub fn bytes(&self, up: u64, down: u64) {
        self.up.fetch_add(up, Ordering::Relaxed);
        self.down.fetch_add(down, Ordering::Relaxed);
    }

    fn flush_bytes(&self) {
        let up = self.up.swap(0, Ordering::Relaxed);
        let down = self.down.swap(0, Ordering::Relaxed);
        if up > 0 || down > 0 {
            self.send(&Request::Bytes { up, down });
        }
    }

    fn send(&self, req: &Request) {
        if self.broken.load(Ordering::Relaxed) {
            return;
        }
        let Ok(mut stream) = self.stream.lock() else {
            return;
        };
        if stream.write_all(protocol::line(req).as_bytes()).is_err() {
            self.broken.store(true, Ordering::Relaxed);
        }
    }

    /// Closes the connection (both ways): the daemon unregisters the sandbox.
    fn close(&self) {
        self.broken.store(true, Ordering::Relaxed);
        if let Ok(stream) = self.stream.lock() {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// A registered sandbox whose records are being read.
pub struct Running {
    uplink: Arc<Uplink>,
    thread: Option<std::thread::JoinHandle<Outcome>>,
    finishing: Arc<Mutex<Option<Instant>>>,
}

impl Running {
    /// The command ended: sends the last bytes and `finish`, reads the records up to `done`,
    /// closes the connection (the daemon unregisters the sandbox) and reports the losses.
    pub fn finish(mut self) -> super::Losses {
        self.uplink.flush_bytes();
        if let Ok(mut f) = self.finishing.lock() {
            *f = Some(Instant::now());
        }
        self.uplink.send(&Request::Finish);
        let outcome = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_else(|| Outcome::Lost("the reader failed".into()));
        self.uplink.close();
        match outcome {
            Outcome::Done(l) => super::Losses {
                ring_full: l.ring_full,
                pending_full: l.pending_full,
                undecodable: l.undecodable,
                rate_limited: l.rate_limited,
                not_relayed: l.relay_full,
            },
            Outcome::Lost(why) => {
                eprintln!(
                    "warden: warning: the audit daemon's records of this run may be incomplete: {why}"
                );
                super::Losses::default()
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.uplink.close();
    }
}

//! One structured record per network decision, allowed or denied, for the audit and metrics
//! layers and the run's violation summary.

use crate::policy::decision::{Decision, ReasonKind, RuleRef, Verdict};
use serde::Serialize;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// How the sandbox asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// An absolute-form request through the HTTP forward proxy.
    Http,
    /// An HTTP CONNECT tunnel.
    Connect,
    /// A SOCKS5 CONNECT.
    Socks5,
    /// A query to the stub DNS server.
    Dns,
}

/// Which layer refused (or let through) the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// The policy engine's domain decision.
    Policy,
    /// The address the name resolved to was refused (DNS-rebinding guard).
    Guard,
    /// The name did not resolve, or the upstream connection failed.
    Upstream,
    /// The request itself was malformed or inconsistent (e.g. CONNECT vs Host header).
    Request,
}

#[derive(Clone, Debug, Serialize)]
pub struct NetEvent {
    /// Milliseconds since the Unix epoch when the request arrived.
    pub time_ms: u64,
    pub protocol: Protocol,
    /// The host as the client named it, canonicalised where it could be.
    pub host: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    pub decision: Decision,
    pub stage: Stage,
    pub kind: ReasonKind,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<RuleRef>,
    /// The address warden connected to (allowed requests).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<IpAddr>,
    /// Bytes from the sandbox to the destination, and back.
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub duration_ms: u64,
}

impl NetEvent {
    /// An event for `verdict` on `host:port`, stamped now.
    pub fn new(protocol: Protocol, host: &str, port: Option<u16>, verdict: &Verdict) -> Self {
        NetEvent {
            time_ms: now_ms(),
            protocol,
            host: host.to_string(),
            port,
            decision: verdict.decision,
            stage: Stage::Policy,
            kind: verdict.kind,
            reason: verdict.reason.clone(),
            rule: verdict.rule.clone(),
            address: None,
            bytes_up: 0,
            bytes_down: 0,
            duration_ms: 0,
        }
    }

    /// The same event, refused at `stage` for `reason` (after the policy allowed it).
    pub fn refused(mut self, stage: Stage, kind: ReasonKind, reason: impl Into<String>) -> Self {
        self.decision = Decision::Deny;
        self.stage = stage;
        self.kind = kind;
        self.reason = reason.into();
        self
    }
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Where events go. Implementations must not block for long: they are called on the proxy's
/// async tasks.
pub trait EventSink: Send + Sync {
    fn record(&self, event: NetEvent);

    /// Bytes an allowed connection moved just now: `up` from the sandbox to the destination,
    /// `down` back (the metrics count them live; the connection's event carries its totals
    /// when it ends). Called on every splice of a tunnel: it must be cheap.
    fn transferred(&self, _up: u64, _down: u64) {}
}

/// Keeps every event in memory (the run summary, tests), and the bytes transferred.
#[derive(Default)]
pub struct MemorySink {
    events: Mutex<Vec<NetEvent>>,
    /// Events past [`MemorySink::MAX_EVENTS`], counted and not kept.
    dropped: AtomicU64,
    up: AtomicU64,
    down: AtomicU64,
}

impl MemorySink {
    pub fn new() -> Arc<MemorySink> {
        Arc::new(MemorySink::default())
    }

    /// The most events kept (for the end-of-run summary): the sandboxed command decides how
    /// many it causes (100 000 distinct refused DNS names), and this memory is warden's on the
    /// host, outside the sandbox's cgroup. The audit sinks see every event regardless.
    pub const MAX_EVENTS: usize = 10_000;

    /// Events not kept because [`MemorySink::MAX_EVENTS`] were.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub fn events(&self) -> Vec<NetEvent> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }

    pub fn denied(&self) -> Vec<NetEvent> {
        self.events()
            .into_iter()
            .filter(|e| e.decision != Decision::Allow)
            .collect()
    }

    /// The bytes reported through [`EventSink::transferred`] so far: (up, down).
    pub fn transferred_bytes(&self) -> (u64, u64) {
        (
            self.up.load(Ordering::Relaxed),
            self.down.load(Ordering::Relaxed),
        )
    }
}

impl EventSink for MemorySink {
    fn record(&self, event: NetEvent) {
        if let Ok(mut e) = self.events.lock() {
            if e.len() < MemorySink::MAX_EVENTS {
                e.push(event);
            } else {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn transferred(&self, up: u64, down: u64) {
        self.up.fetch_add(up, Ordering::Relaxed);
        self.down.fetch_add(down, Ordering::Relaxed);
    }
}

//! The stub DNS server the sandbox's resolv.conf points at (127.0.0.53:53 inside its network
//! namespace, UDP and TCP).
//!
//! Every query goes parse → policy decision → warden's own resolution → answer:
//!
//! - A packet without a readable header, or a response (QR set), is dropped.
//! - A header followed by an unparseable body, or a query with other than one question, gets
//!   FORMERR; an opcode other than QUERY or a class other than IN gets NOTIMP; an EDNS version
//!   other than 0 gets BADVERS. None of these reach the policy or record an event.
//! - The question's name is canonicalised (lower case, trailing dot dropped) and decided by the
//!   handler's `decide` callback. A name it does not allow (deny, or approval that nobody can
//!   give) gets REFUSED, and any type of query for it records a [`NetEvent`].
//! - An allowed name: A and AAAA are answered with the addresses warden resolved
//!   ([`Resolver::lookup_family`]), TTL [`ANSWER_TTL`], minus those the [`AddressGuard`]
//!   refuses; if it refuses all of them, REFUSED. Every other type (MX, TXT, SRV, HTTPS, ANY,
//!   PTR, ...) gets NOERROR without answers: warden never forwards queries, so nothing but
//!   addresses leaves the sandbox's view of DNS, and clients fall back to A/AAAA. A name
//!   that does not exist gets NXDOMAIN, a name without records of the type NOERROR without
//!   answers, a resolver failure (timeout, unreachable nameserver) SERVFAIL.
//! - Replies keep the query's id, question (as written, case included) and RD, and set RA. A
//!   query with EDNS gets an OPT record back (payload [`EDNS_PAYLOAD`]). A UDP reply larger
//!   than the client's limit (512 bytes without EDNS, its advertised payload with EDNS, at most
//!   4096) is sent without answers and with TC set, so the client retries over TCP.
//!
//! The pure core ([`parse`], [`Question::respond`], and [`answer`] for synchronous use) is
//! separate from the async serving ([`DnsHandler`], [`serve_udp`], [`serve_tcp`]).

use crate::net::event::{EventSink, NetEvent, Protocol, Stage};
use crate::net::guard::AddressGuard;
use crate::net::resolve::{Family, ResolveError, Resolver};
use crate::policy::decision::{Decision, ReasonKind, Verdict};
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA};
use hickory_proto::rr::{DNSClass, RData, Record, RecordType};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::Semaphore;

/// TTL of every answer: short, so a changed policy or address takes effect soon.
pub const ANSWER_TTL: u32 = 30;
/// The UDP payload size warden advertises in its OPT record.
pub const EDNS_PAYLOAD: u16 = 1232;
/// The largest UDP reply sent, whatever the client advertises.
pub const MAX_UDP_REPLY: usize = 4096;
/// The classic UDP limit, without EDNS.
pub const CLASSIC_UDP_REPLY: usize = 512;
/// A TCP connection with no complete query for this long is closed.
pub const TCP_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// At most this many TCP connections at once; further ones are closed right away.
pub const MAX_TCP_CONNECTIONS: usize = 64;
/// At most this many queries (UDP and TCP together) are being resolved at once; further UDP
/// packets wait in the socket buffer.
pub const MAX_IN_FLIGHT: usize = 256;

/// The result of parsing one packet.
#[derive(Debug)]
pub enum Parsed {
    /// Nothing to send back: no readable header, or not a query.
    Drop,
    /// Answer right away with this reply (FORMERR, NOTIMP, BADVERS); the policy is not asked.
    Reply(Vec<u8>),
    /// A standard query for one name: decide, resolve, then [`Question::respond`].
    Question(Box<Question>),
}

/// A well-formed standard query for one name.
#[derive(Clone, Debug)]
pub struct Question {
    request: Message,
    query: Query,
    /// The name, lower-cased, without the trailing dot: what the policy decides on.
    pub name: String,
    pub record_type: RecordType,
}

/// What warden found out for a question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The policy (or the guard) refuses the name: REFUSED.
    Refused,
    /// NOERROR with these addresses as answers (those of the question's type; none: NODATA).
    Answer(Vec<IpAddr>),
    /// The name does not exist: NXDOMAIN.
    NxDomain,
    /// Resolution failed: SERVFAIL.
    ServFail,
}

/// Which transport a packet came over: decides the reply size limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Udp,
    Tcp,
}

/// Parse one DNS packet.
pub fn parse(packet: &[u8]) -> Parsed {
    let Some(header) = packet.get(..12) else {
        return Parsed::Drop;
    };
    if header[2] & 0x80 != 0 {
        // QR set: a response, never answered (no loops, no reflection).
        return Parsed::Drop;
    }
    let Ok(request) = Message::from_vec(packet) else {
        let id = u16::from_be_bytes([header[0], header[1]]);
        let op_code = OpCode::from_u8((header[2] >> 3) & 0x0f);
        let mut reply = Message::error_msg(id, op_code, ResponseCode::FormErr);
        reply.metadata.recursion_desired = header[2] & 0x01 != 0;
        reply.metadata.recursion_available = true;
        return encode(&reply).map_or(Parsed::Drop, Parsed::Reply);
    };
    if request.metadata.message_type != MessageType::Query {
        return Parsed::Drop;
    }
    let error = |code: ResponseCode| {
        let mut reply = base_reply(&request, code);
        reply.add_queries(request.queries.iter().cloned());
        encode(&reply).map_or(Parsed::Drop, Parsed::Reply)
    };
    if request.metadata.op_code != OpCode::Query {
        return error(ResponseCode::NotImp);
    }
    if request.edns.as_ref().is_some_and(|e| e.version() != 0) {
        return error(ResponseCode::BADVERS);
    }
    let query = match request.queries.as_slice() {
        [query] => query.clone(),
        _ => return error(ResponseCode::FormErr),
    };
    if query.query_class() != DNSClass::IN {
        return error(ResponseCode::NotImp);
    }
    let name = canonical_name(&query);
    let record_type = query.query_type();
    Parsed::Question(Box::new(Question {
        request,
        query,
        name,
        record_type,
    }))
}

/// Lower case, trailing dot dropped.
fn canonical_name(query: &Query) -> String {
    let mut name = query.name().to_ascii().to_ascii_lowercase();
    if name.ends_with('.') {
        name.pop();
    }
    name
}

/// A response to `request` with its id, opcode and RD, RA set, an OPT record when the request
/// had one; no question yet.
fn base_reply(request: &Message, code: ResponseCode) -> Message {
    let mut reply = Message::response(request.metadata.id, request.metadata.op_code);
    reply.metadata.recursion_desired = request.metadata.recursion_desired;
    reply.metadata.recursion_available = true;
    reply.metadata.checking_disabled = request.metadata.checking_disabled;
    reply.metadata.response_code = code;
    if request.edns.is_some() {
        let mut edns = Edns::new();
        edns.set_max_payload(EDNS_PAYLOAD);
        reply.set_edns(edns);
    }
    reply
}

fn encode(message: &Message) -> Option<Vec<u8>> {
    message.to_vec().ok()
}

impl Question {
    /// The A/AAAA family this question asks for; `None` for every other type.
    pub fn family(&self) -> Option<Family> {
        match self.record_type {
            RecordType::A => Some(Family::V4),
            RecordType::AAAA => Some(Family::V6),
            _ => None,
        }
    }

    /// The largest reply the client accepts over `transport`.
    pub fn max_reply(&self, transport: Transport) -> usize {
        match transport {
            Transport::Tcp => usize::from(u16::MAX),
            Transport::Udp => match &self.request.edns {
                Some(edns) => {
                    usize::from(edns.max_payload()).clamp(CLASSIC_UDP_REPLY, MAX_UDP_REPLY)
                }
                None => CLASSIC_UDP_REPLY,
            },
        }
    }

    /// The encoded reply for `outcome`. Answers are the addresses of the question's family
    /// (others are ignored); a reply over `transport`'s limit is sent without answers and with
    /// TC set. `None` only if encoding fails.
    pub fn respond(&self, outcome: &Outcome, transport: Transport) -> Option<Vec<u8>> {
        let code = match outcome {
            Outcome::Refused => ResponseCode::Refused,
            Outcome::Answer(_) => ResponseCode::NoError,
            Outcome::NxDomain => ResponseCode::NXDomain,
            Outcome::ServFail => ResponseCode::ServFail,
        };
        let mut reply = base_reply(&self.request, code);
        reply.add_query(self.query.clone());
        if let Outcome::Answer(addresses) = outcome {
            let owner = self.query.name().clone();
            for ip in addresses {
                let data = match (ip, self.record_type) {
                    (IpAddr::V4(v4), RecordType::A) => RData::A(A(*v4)),
                    (IpAddr::V6(v6), RecordType::AAAA) => RData::AAAA(AAAA(*v6)),
                    _ => continue,
                };
                reply.add_answer(Record::from_rdata(owner.clone(), ANSWER_TTL, data));
            }
        }
        let bytes = encode(&reply)?;
        if bytes.len() <= self.max_reply(transport) {
            return Some(bytes);
        }
        reply.answers.clear();
        reply.metadata.truncation = true;
        encode(&reply)
    }
}

/// The whole exchange for one UDP packet, synchronously: `decide` says whether a canonical
/// name is allowed, `resolved` gives the addresses of an allowed name for an A or AAAA
/// question (`None`: the name does not exist). `None` when the packet is dropped.
pub fn answer(
    query: &[u8],
    decide: &dyn Fn(&str) -> bool,
    resolved: &dyn Fn(&str, RecordType) -> Option<Vec<IpAddr>>,
) -> Option<Vec<u8>> {
    let question = match parse(query) {
        Parsed::Drop => return None,
        Parsed::Reply(reply) => return Some(reply),
        Parsed::Question(q) => q,
    };
    let outcome = if !decide(&question.name) {
        Outcome::Refused
    } else if question.family().is_none() {
        Outcome::Answer(Vec::new())
    } else {
        match resolved(&question.name, question.record_type) {
            Some(addresses) => Outcome::Answer(addresses),
            None => Outcome::NxDomain,
        }
    };
    question.respond(&outcome, Transport::Udp)
}

/// The policy's verdict on a canonical name; allowed means `decision == Decision::Allow`.
pub type DnsVerdict = Verdict;

/// Everything the stub server needs: the policy callback, warden's resolver, the rebinding
/// guard and where events go.
pub struct DnsHandler {
    decide: Box<dyn Fn(&str) -> DnsVerdict + Send + Sync>,
    resolver: Resolver,
    guard: crate::net::guard::LiveGuard,
    events: Arc<dyn EventSink>,
    in_flight: Arc<Semaphore>,
}

impl DnsHandler {
    pub fn new(
        decide: Box<dyn Fn(&str) -> DnsVerdict + Send + Sync>,
        resolver: Resolver,
        guard: AddressGuard,
        events: Arc<dyn EventSink>,
    ) -> DnsHandler {
        DnsHandler {
            decide,
            resolver,
            guard: crate::net::guard::LiveGuard::fixed(guard),
            events,
            in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
        }
    }

    /// Follow `live`'s address rules when the settings change during the run.
    pub fn following(mut self, live: Arc<crate::policy::live::LivePolicy>) -> DnsHandler {
        let guard = (*self.guard.get()).clone();
        self.guard = crate::net::guard::LiveGuard::following(guard, live);
        self
    }

    /// One packet in, the reply out (`None`: drop it). Records one event per question.
    pub async fn handle(&self, packet: &[u8], transport: Transport) -> Option<Vec<u8>> {
        let question = match parse(packet) {
            Parsed::Drop => return None,
            Parsed::Reply(reply) => return Some(reply),
            Parsed::Question(q) => q,
        };
        let outcome = self.decide_and_resolve(&question).await;
        question.respond(&outcome, transport)
    }

    async fn decide_and_resolve(&self, question: &Question) -> Outcome {
        let name = question.name.as_str();
        let verdict = (self.decide)(name);
        let mut event = NetEvent::new(Protocol::Dns, name, None, &verdict);
        if verdict.decision != Decision::Allow {
            self.events.record(event);
            return Outcome::Refused;
        }
        let Some(family) = question.family() else {
            self.events.record(event);
            return Outcome::Answer(Vec::new());
        };
        let (outcome, event) = match self.resolver.lookup_family(name, family).await {
            Ok(addresses) => {
                let guard = self.guard.get();
                let mut refusals = Vec::new();
                let kept: Vec<IpAddr> = addresses
                    .into_iter()
                    .filter(|ip| match guard.check(*ip) {
                        Ok(()) => true,
                        Err(refusal) => {
                            refusals.push(refusal);
                            false
                        }
                    })
                    .collect();
                if kept.is_empty() && !refusals.is_empty() {
                    // A guard class can be lifted in allowedDomains; a deniedDomains entry not.
                    let hint = if refusals
                        .iter()
                        .any(|r| r.class != super::guard::AddressClass::Denied)
                    {
                        " (allow the address or range explicitly in allowedDomains to reach it)"
                    } else {
                        ""
                    };
                    let list: Vec<String> = refusals.iter().map(|r| r.to_string()).collect();
                    let reason = format!(
                        "{name} resolves only to refused addresses: {}{hint}",
                        list.join("; ")
                    );
                    (
                        Outcome::Refused,
                        event.refused(Stage::Guard, ReasonKind::DomainDenied, reason),
                    )
                } else {
                    event.address = kept.first().copied();
                    (Outcome::Answer(kept), event)
                }
            }
            Err(ResolveError::NoRecords { .. }) => (Outcome::Answer(Vec::new()), event),
            Err(error @ (ResolveError::NotFound { .. } | ResolveError::InvalidName { .. })) => (
                Outcome::NxDomain,
                event.refused(Stage::Upstream, ReasonKind::InvalidHost, error.to_string()),
            ),
            Err(error) => (
                Outcome::ServFail,
                event.refused(Stage::Upstream, ReasonKind::InvalidHost, error.to_string()),
            ),
        };
        self.events.record(event);
        outcome
    }
}

/// Answer DNS over UDP on `socket` until the socket fails for good. Each packet is handled on
/// its own task (at most [`MAX_IN_FLIGHT`] at once), so a slow name does not hold up others.
pub async fn serve_udp(socket: UdpSocket, handler: Arc<DnsHandler>) {
    let socket = Arc::new(socket);
    let mut buf = vec![0u8; usize::from(u16::MAX)];
    loop {
        let (len, peer) = match socket.recv_from(&mut buf).await {
            Ok(received) => received,
            Err(_) => {
                // ICMP errors from earlier sends surface here (ECONNREFUSED); keep serving,
                // without spinning on an error that persists.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let Ok(permit) = handler.in_flight.clone().acquire_owned().await else {
            return;
        };
        let packet = buf[..len].to_vec();
        let socket = socket.clone();
        let handler = handler.clone();
        tokio::spawn(async move {
            let _permit = permit;
            if let Some(reply) = handler.handle(&packet, Transport::Udp).await {
                let _ = socket.send_to(&reply, peer).await;
            }
        });
    }
}

/// Answer DNS over TCP on `listener`: each message with a two-byte length prefix, several per
/// connection, answered in order; a connection idle for [`TCP_IDLE_TIMEOUT`] is closed, and at
/// most [`MAX_TCP_CONNECTIONS`] are served at once (others are closed on accept).
pub async fn serve_tcp(listener: TcpListener, handler: Arc<DnsHandler>) {
    let connections = Arc::new(Semaphore::new(MAX_TCP_CONNECTIONS));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // EMFILE and friends: wait for descriptors to free up.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let handler = handler.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let _ = serve_connection(stream, &handler).await;
        });
    }
}

async fn serve_connection(mut stream: TcpStream, handler: &DnsHandler) -> std::io::Result<()> {
    let idle = || std::io::Error::new(std::io::ErrorKind::TimedOut, "idle DNS connection");
    loop {
        let mut prefix = [0u8; 2];
        tokio::time::timeout(TCP_IDLE_TIMEOUT, stream.read_exact(&mut prefix))
            .await
            .map_err(|_| idle())??;
        let len = usize::from(u16::from_be_bytes(prefix));
        if len == 0 {
            return Ok(());
        }
        let mut packet = vec![0u8; len];
        tokio::time::timeout(TCP_IDLE_TIMEOUT, stream.read_exact(&mut packet))
            .await
            .map_err(|_| idle())??;
        let reply = {
            let Ok(_permit) = handler.in_flight.acquire().await else {
                return Ok(());
            };
            handler.handle(&packet, Transport::Tcp).await
        };
        // A dropped packet over TCP: the client waits in vain otherwise.
        let Some(reply) = reply else {
            return Ok(());
        };
        let Ok(reply_len) = u16::try_from(reply.len()) else {
            return Ok(());
        };
        let mut framed = Vec::with_capacity(reply.len() + 2);
        framed.extend_from_slice(&reply_len.to_be_bytes());
        framed.extend_from_slice(&reply);
        stream.write_all(&framed).await?;
    }
}

#[cfg(test)]
#[path = "dns_tests.rs"]
mod tests;

//! Network: the only way out of the sandbox's empty net namespace.
//!
//! - [`guard`]: which resolved addresses a connection may go to (the DNS-rebinding guard).
//! - [`resolve`]: name resolution by warden (hickory, system configuration and /etc/hosts);
//!   an address the sandbox resolved itself is never trusted for a name.
//! - [`dns`]: the stub DNS server the sandbox's resolv.conf points at: allowed names get
//!   answers, every other name REFUSED.
//! - [`proxy`]: the filtering proxy: HTTP/1.1 forward proxy, CONNECT tunnels and SOCKS5, each
//!   request decided by the policy engine.
//! - [`event`]: one structured record per decision, for the audit and metrics layers.
//! - [`env`]: the proxy environment variables the command gets.

pub mod dns;
pub mod env;
pub mod event;
pub mod guard;
pub mod proxy;
pub mod resolve;
pub mod service;
pub mod upstream;

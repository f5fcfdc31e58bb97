//! The programmatic approver: `warden run --approvals unix:PATH` listens on a unix socket and
//! exchanges JSON lines with whoever connects (an SDK, an IDE, a remote UI):
//!
//! ```text
//! warden → client  {"type":"permission_request","id":1,"kind":"network","target":"example.com:443",...}
//! client → warden  {"type":"permission_response","id":1,"decision":"allow-once"}
//! ```
//!
//! The latest client to connect is the approver; only clients in warden's own pid namespace are
//! served, never a process of the sandbox. A request waits (up to its timeout) for a
//! client and an answer. docs/protocol.md specifies the messages with a JSON Schema.

use super::{Answer, Approver, PermissionRequest};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{oneshot, watch};

#[derive(Serialize)]
struct Outgoing<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(flatten)]
    request: &'a PermissionRequest,
}

#[derive(Deserialize)]
struct Incoming {
    #[serde(rename = "type")]
    kind: String,
    id: u64,
    decision: Answer,
}

type Writer = Arc<tokio::sync::Mutex<tokio::net::unix::OwnedWriteHalf>>;

pub struct ChannelApprover {
    /// The current client's write half (None: nobody connected).
    client: watch::Sender<Option<Writer>>,
    pending: Arc<Mutex<HashMap<u64, oneshot::Sender<Answer>>>>,
    path: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("--approvals {0}: expected unix:PATH")]
    Spec(String),
    #[error("--approvals: {path} already exists; remove it or choose another path")]
    Exists { path: String },
    #[error("--approvals: listening on {path}: {source}")]
    Listen {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The socket path of an `--approvals` value.
pub fn parse_spec(spec: &str) -> Result<PathBuf, ChannelError> {
    match spec.strip_prefix("unix:") {
        Some(p) if !p.is_empty() => Ok(PathBuf::from(p)),
        _ => Err(ChannelError::Spec(spec.to_string())),
    }
}

impl ChannelApprover {
    /// Binds `path` (mode 0600; it must not exist) and serves clients on the current tokio
    /// runtime. The socket file is removed when the approver is dropped.
    pub fn bind(path: &Path) -> Result<Arc<ChannelApprover>, ChannelError> {
        use std::os::unix::fs::PermissionsExt;
        let shown = path.display().to_string();
        if path.symlink_metadata().is_ok() {
            return Err(ChannelError::Exists { path: shown });
        }
        let listener = UnixListener::bind(path).map_err(|source| ChannelError::Listen {
            path: shown.clone(),
            source,
        })?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(
            |source| ChannelError::Listen {
                path: shown.clone(),
                source,
            },
        )?;
        let (client, _) = watch::channel(None);
        let approver = Arc::new(ChannelApprover {
            client,
            pending: Arc::new(Mutex::new(HashMap::new())),
            path: path.to_path_buf(),
        });
        tokio::spawn(accept(listener, Arc::downgrade(&approver)));
        Ok(approver)
    }
}

impl Drop for ChannelApprover {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

async fn accept(listener: UnixListener, approver: std::sync::Weak<ChannelApprover>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let Some(a) = approver.upgrade() else {
            return;
        };
        if !peer_outside_sandboxes(&stream) {
            // Dropped unanswered: a sandboxed command (allowAllUnixSockets, or a socket path it
            // can reach) must not become its own approver.
            continue;
        }
        let (read, write) = stream.into_split();
        let writer: Writer = Arc::new(tokio::sync::Mutex::new(write));
        a.client.send_replace(Some(writer));
        tokio::spawn(read_answers(read, a.pending.clone()));
    }
}

/// Whether the client runs in warden's own pid namespace. A sandbox's processes live in a
/// pid namespace of their own (or one nested in it); a client whose pid we cannot see
/// (another container's namespace) or cannot check is refused too.
fn peer_outside_sandboxes(stream: &UnixStream) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(pid) = stream.peer_cred().ok().and_then(|c| c.pid()) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    let ns = |p: &str| std::fs::metadata(p).map(|m| (m.dev(), m.ino())).ok();
    match (ns(&format!("/proc/{pid}/ns/pid")), ns("/proc/self/ns/pid")) {
        (Some(peer), Some(own)) => peer == own,
        _ => false,
    }
}

async fn read_answers(
    read: tokio::net::unix::OwnedReadHalf,
    pending: Arc<Mutex<HashMap<u64, oneshot::Sender<Answer>>>>,
) {
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        // Anything that is not a well-formed response is ignored: a confused client cannot
        // allow more than it answers for.
        let Ok(msg) = serde_json::from_str::<Incoming>(&line) else {
            continue;
        };
        if msg.kind != "permission_response" {
            continue;
        }
        let waiter = pending.lock().ok().and_then(|mut p| p.remove(&msg.id));
        if let Some(tx) = waiter {
            let _ = tx.send(msg.decision);
        }
    }
}

impl Approver for ChannelApprover {
    fn ask(&self, request: PermissionRequest) -> Pin<Box<dyn Future<Output = Answer> + Send + '_>> {
        Box::pin(async move {
            let (tx, rx) = oneshot::channel();
            if let Ok(mut p) = self.pending.lock() {
                p.insert(request.id, tx);
            }
            let Ok(mut line) = serde_json::to_string(&Outgoing {
                kind: "permission_request",
                request: &request,
            }) else {
                return Answer::Deny;
            };
            line.push('\n');
            // Wait for a client if none is connected yet, then send; a client that connects
            // later gets the request again.
            let mut clients = self.client.subscribe();
            let send = async {
                loop {
                    let current = clients.borrow_and_update().clone();
                    if let Some(w) = current {
                        let mut w = w.lock().await;
                        if w.write_all(line.as_bytes()).await.is_ok() {
                            let _ = w.flush().await;
                        }
                    }
                    if clients.changed().await.is_err() {
                        return;
                    }
                }
            };
            let answer = tokio::select! {
                answer = rx => answer.unwrap_or(Answer::Deny),
                () = send => Answer::Deny,
            };
            if let Ok(mut p) = self.pending.lock() {
                p.remove(&request.id);
            }
            answer
        })
    }
}

/// Connects to a channel as a client would (tests, examples).
pub async fn connect(path: &Path) -> std::io::Result<UnixStream> {
    UnixStream::connect(path).await
}

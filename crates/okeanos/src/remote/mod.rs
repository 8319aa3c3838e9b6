//! Remote journaling's network side (remote-journaling thesis; issue 12): `okeanos
//! journal-server` ([`server`]) keeps one journal per (host, file system) in its own directory
//! ([`store`]) and acknowledges an APPEND only after its fdatasync, group-committing that
//! fdatasync across every connection; a host talks to it through [`client`]. The frames are
//! `format::remote`.
//!
//! The thesis gives the idea, not a protocol; the decisions (docs/REMOTE.md): a per-host secret
//! with challenge-response (HMAC-SHA256 of the server's nonce, so the secret never crosses the
//! wire); epochs fence a stale host; a trim only after the host's checkpoint is flushed; a
//! torn tail of the server's log (never acknowledged) is cut at restart.

pub mod client;
pub mod jetstream;
pub mod memory;
pub mod nats_cluster;
pub mod server;
pub mod store;
pub mod transport;

use client::{ClientConfig, RemoteError, ServerJournal};

/// What a host needs from a journal server: the real one over TCP ([`client::Client`]) or an
/// in-memory stand-in for the crash tests ([`memory::MemServer`]).
pub trait Link: Send {
    /// The journal's state on the server when connected.
    fn journal(&self) -> ServerJournal;
    fn send_append(&mut self, tid: u64, block_size: u32, blocks: Vec<u8>) -> Result<(), RemoteError>;
    fn wait_ack(&mut self) -> Result<u64, RemoteError>;
    fn trim(&mut self, upto: u64) -> Result<u64, RemoteError>;
    fn read_from(&mut self, from: u64) -> Result<Vec<(u64, u32, Vec<u8>)>, RemoteError>;
    fn fence(&mut self, epoch: u64) -> Result<u64, RemoteError>;
}

/// The link of a host that has no connection (it mounted while its server was unreachable):
/// every call fails as a dead server's would, so the host stays in its local journal.
pub struct NotConnected;

impl Link for NotConnected {
    fn journal(&self) -> ServerJournal {
        ServerJournal { epoch: 0, first_tid: 0, last_tid: 0, quota_bytes: 0, used_bytes: 0 }
    }
    fn send_append(&mut self, _: u64, _: u32, _: Vec<u8>) -> Result<(), RemoteError> {
        Err(not_connected())
    }
    fn wait_ack(&mut self) -> Result<u64, RemoteError> {
        Err(not_connected())
    }
    fn trim(&mut self, _: u64) -> Result<u64, RemoteError> {
        Err(not_connected())
    }
    fn read_from(&mut self, _: u64) -> Result<Vec<(u64, u32, Vec<u8>)>, RemoteError> {
        Err(not_connected())
    }
    fn fence(&mut self, _: u64) -> Result<u64, RemoteError> {
        Err(not_connected())
    }
}

fn not_connected() -> RemoteError {
    RemoteError::Network { addr: "journal server".into(), message: "not connected".into() }
}

/// Opens a link from a client configuration.
pub type ConnectFn = dyn Fn(ClientConfig) -> Result<Box<dyn Link>, RemoteError> + Send + Sync;

/// Opens a link anew with a given epoch (a host returning to its server).
pub type ReconnectFn = dyn Fn(u64) -> Result<Box<dyn Link>, RemoteError> + Send + Sync;

/// How a mount reaches its journal server: by default [`client::Client::connect`]; tests
/// substitute a stand-in (`MountOptions::remote_connector`).
#[derive(Clone)]
pub struct Connector(pub std::sync::Arc<ConnectFn>);

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Connector")
    }
}

/// Connects with `connector`, or over TCP.
pub fn connect(cfg: ClientConfig, connector: Option<&Connector>) -> Result<Box<dyn Link>, RemoteError> {
    match connector {
        Some(c) => (c.0)(cfg),
        None if jetstream::is_nats(&cfg.addr) => Ok(Box::new(jetstream::JetStreamLink::connect(&cfg.addr, &cfg.fs_uuid, cfg.epoch, cfg.timeout, &cfg.jetstream)?)),
        None => Ok(Box::new(client::Client::connect(cfg)?)),
    }
}

use crate::format::remote::{self, JournalId, Msg, HEADER};
use std::io::{Read, Write};
use std::time::Duration;

/// How long the rest of a frame may take once its first byte arrived.
pub const FRAME_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("connection closed")]
    Closed,
    #[error("network: {0}")]
    Io(#[from] std::io::Error),
    #[error("malformed frame: {0}")]
    Format(#[from] crate::format::FormatError),
}

/// Reads one frame. The first byte may wait as long as the connection's own read timeout
/// allows; the rest must follow within [`FRAME_TIMEOUT`] (a peer that stops mid-frame is an
/// error, not a stuck thread).
pub fn read_frame(s: &transport::Stream) -> Result<(u64, Msg), FrameError> {
    let idle = s.read_timeout()?;
    let mut h = [0u8; HEADER];
    let mut r: &transport::Stream = s;
    match r.read(&mut h[..1]) {
        Ok(0) => return Err(FrameError::Closed),
        Ok(_) => {}
        Err(e) => return Err(eof(e)),
    }
    s.set_read_timeout(Some(idle.map_or(FRAME_TIMEOUT, |t| t.min(FRAME_TIMEOUT))))?;
    let res = (|| {
        r.read_exact(&mut h[1..]).map_err(eof)?;
        let hd = remote::decode_header(&h)?;
        let mut frame = vec![0u8; HEADER + hd.len];
        frame[..HEADER].copy_from_slice(&h);
        r.read_exact(&mut frame[HEADER..]).map_err(eof)?;
        Ok(remote::decode(&frame)?)
    })();
    s.set_read_timeout(idle)?;
    res
}

fn eof(e: std::io::Error) -> FrameError {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        FrameError::Closed
    } else {
        FrameError::Io(e)
    }
}

pub fn write_frame(mut s: &transport::Stream, request_id: u64, m: &Msg) -> Result<(), FrameError> {
    s.write_all(&m.encode(request_id))?;
    Ok(())
}

/// The HELLO proof: HMAC-SHA256 under the host's secret of the server's nonce, the journal's
/// identity and the epoch.
pub fn proof(secret: &[u8], nonce: &[u8; 32], id: &JournalId, epoch: u64) -> [u8; 32] {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(b"okeanos remote journal v1");
    mac.update(nonce);
    mac.update(&id.host);
    mac.update(&id.fs_uuid);
    mac.update(&epoch.to_le_bytes());
    mac.finalize().into_bytes().into()
}

/// Constant-time comparison of two proofs.
pub fn proof_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// 32 random bytes from the kernel.
pub fn nonce() -> [u8; 32] {
    let mut n = [0u8; 32];
    // SAFETY: getrandom writes at most n.len() bytes into the buffer we own.
    let got = unsafe { libc::getrandom(n.as_mut_ptr().cast(), n.len(), 0) };
    assert_eq!(got, 32, "the kernel's random source failed");
    n
}

/// A 16-byte host identity from a host name (stable across restarts).
pub fn host_id(name: &str) -> [u8; 16] {
    use sha2::Digest;
    let d = sha2::Sha256::digest(name.as_bytes());
    d[..16].try_into().expect("16 bytes")
}

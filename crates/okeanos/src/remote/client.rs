//! A host's connection to `okeanos journal-server`: authenticate, then append transactions
//! (several in flight: [`Client::send_append`] and [`Client::wait_ack`]), trim, read back and
//! fence. Every wait is bounded by the acknowledgement timeout; an error tells the caller
//! whether to fall back (network, server), to stop (fenced) or to checkpoint (full).

use super::transport::{ClientTls, Stream};
use super::{read_frame, write_frame, FrameError};
use crate::format::remote::{ErrorCode, JournalId, Msg};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// host:port of the server.
    pub addr: String,
    /// This host's name (the server looks its secret up by it).
    pub host_name: String,
    pub secret: Vec<u8>,
    pub fs_uuid: [u8; 16],
    pub epoch: u64,
    /// How long any reply may take (`remote_ack_timeout=`, default 1 s).
    pub timeout: Duration,
    /// TLS (`remote_tls_ca=`); plain TCP when `None`.
    pub tls: Option<ClientTls>,
    /// For a journal on NATS JetStream (`addr` of nats:// URLs).
    pub jetstream: JetStreamOptions,
}

/// The journal's state on the server at HELLO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerJournal {
    pub epoch: u64,
    pub first_tid: u64,
    pub last_tid: u64,
    pub quota_bytes: u64,
    pub used_bytes: u64,
}

pub use crate::device::remote::RemoteError;

pub struct Client {
    cfg: ClientConfig,
    stream: Stream,
    next_id: u64,
    /// Requests sent whose replies have not been read, oldest first.
    pending: std::collections::VecDeque<u64>,
    pub journal: ServerJournal,
}

impl Client {
    /// Connects and authenticates.
    pub fn connect(cfg: ClientConfig) -> Result<Client, RemoteError> {
        let net = |m: String| RemoteError::Network { addr: cfg.addr.clone(), message: m };
        let addr = cfg.addr.to_socket_addrs().map_err(|e| net(e.to_string()))?.next().ok_or_else(|| net("no address".into()))?;
        let stream = TcpStream::connect_timeout(&addr, cfg.timeout).map_err(|e| net(e.to_string()))?;
        stream.set_read_timeout(Some(cfg.timeout)).map_err(|e| net(e.to_string()))?;
        stream.set_write_timeout(Some(cfg.timeout)).map_err(|e| net(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        let stream = match &cfg.tls {
            None => Stream::plain(stream),
            Some(tls) => Stream::client(stream, tls).map_err(|e| match e.kind() {
                std::io::ErrorKind::InvalidData => RemoteError::Auth { addr: cfg.addr.clone(), message: format!("{e} (is the server started with --tls-cert, and does remote_tls_ca= hold its certificate or CA?)") },
                _ => net(e.to_string()),
            })?,
        };
        let mut c = Client { cfg, stream, next_id: 1, pending: Default::default(), journal: ServerJournal { epoch: 0, first_tid: 0, last_tid: 0, quota_bytes: 0, used_bytes: 0 } };
        let first = c.read().map_err(|e| match e {
            RemoteError::Network { addr, message } if c.cfg.tls.is_none() && (message.contains("timed out") || message.contains("Resource temporarily unavailable")) => {
                RemoteError::Network { addr, message: format!("{message}: no CHALLENGE from the server (a server started with --tls-cert needs remote_tls_ca=)") }
            }
            e => e,
        })?;
        let nonce = match first {
            (_, Msg::Challenge { nonce }) => nonce,
            (_, other) => return Err(c.unexpected(&other)),
        };
        let id = JournalId { host: super::host_id(&c.cfg.host_name), fs_uuid: c.cfg.fs_uuid };
        let proof = super::proof(&c.cfg.secret, &nonce, &id, c.cfg.epoch);
        c.send(Msg::Hello { id, host_name: c.cfg.host_name.clone(), epoch: c.cfg.epoch, proof })?;
        match c.reply()? {
            Msg::HelloOk { epoch, first_tid, last_tid, quota_bytes, used_bytes } => {
                c.journal = ServerJournal { epoch, first_tid, last_tid, quota_bytes, used_bytes };
                Ok(c)
            }
            other => Err(c.unexpected(&other)),
        }
    }

    pub fn addr(&self) -> &str {
        &self.cfg.addr
    }

    /// Sends an APPEND without waiting for its acknowledgement.
    pub fn send_append(&mut self, tid: u64, block_size: u32, blocks: Vec<u8>) -> Result<(), RemoteError> {
        self.send(Msg::Append { tid, epoch: self.cfg.epoch, block_size, blocks })
    }

    /// Waits for the acknowledgement of the oldest APPEND in flight: its tid.
    pub fn wait_ack(&mut self) -> Result<u64, RemoteError> {
        match self.reply()? {
            Msg::Ack { tid } => Ok(tid),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Appends one transaction and waits until the server has it durably.
    pub fn append(&mut self, tid: u64, block_size: u32, blocks: Vec<u8>) -> Result<(), RemoteError> {
        self.send_append(tid, block_size, blocks)?;
        let got = self.wait_ack()?;
        if got != tid {
            return Err(RemoteError::Server { addr: self.cfg.addr.clone(), message: format!("acknowledged {got} for {tid}") });
        }
        Ok(())
    }

    /// Lets the server drop every transaction up to `upto`; the new first tid.
    pub fn trim(&mut self, upto: u64) -> Result<u64, RemoteError> {
        self.send(Msg::Trim { upto, epoch: self.cfg.epoch })?;
        match self.reply()? {
            Msg::TrimOk { first_tid } => Ok(first_tid),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Every held transaction from `from` on: (tid, block size, blocks).
    pub fn read_from(&mut self, from: u64) -> Result<Vec<(u64, u32, Vec<u8>)>, RemoteError> {
        self.send(Msg::Read { from })?;
        let id = *self.pending.front().expect("just sent");
        let mut out = Vec::new();
        loop {
            let (rid, m) = self.read()?;
            if rid != id {
                return Err(self.unexpected(&m));
            }
            match m {
                Msg::Tx { tid, block_size, blocks } => out.push((tid, block_size, blocks)),
                Msg::ReadEnd { .. } => {
                    self.pending.pop_front();
                    return Ok(out);
                }
                other => return Err(self.unexpected(&other)),
            }
        }
    }

    /// Takes the journal over with `epoch` (greater than the server's); the last tid it holds.
    pub fn fence(&mut self, epoch: u64) -> Result<u64, RemoteError> {
        self.send(Msg::Fence { epoch })?;
        match self.reply()? {
            Msg::FenceOk { last_tid, .. } => {
                self.cfg.epoch = epoch;
                Ok(last_tid)
            }
            other => Err(self.unexpected(&other)),
        }
    }

    fn send(&mut self, m: Msg) -> Result<(), RemoteError> {
        let id = self.next_id;
        self.next_id += 1;
        write_frame(&self.stream, id, &m).map_err(|e| self.frame_error(e))?;
        self.pending.push_back(id);
        Ok(())
    }

    /// The reply to the oldest request in flight.
    fn reply(&mut self) -> Result<Msg, RemoteError> {
        let want = self.pending.pop_front().ok_or_else(|| RemoteError::Server { addr: self.cfg.addr.clone(), message: "no request in flight".into() })?;
        let (id, m) = self.read()?;
        if let Msg::Error { .. } = m {
            return Err(self.unexpected(&m));
        }
        if id != want {
            return Err(RemoteError::Server { addr: self.cfg.addr.clone(), message: format!("reply {id} to request {want}") });
        }
        Ok(m)
    }

    fn read(&mut self) -> Result<(u64, Msg), RemoteError> {
        read_frame(&self.stream).map_err(|e| self.frame_error(e))
    }

    fn frame_error(&self, e: FrameError) -> RemoteError {
        let addr = self.cfg.addr.clone();
        match e {
            FrameError::Format(f) => RemoteError::Server { addr, message: format!("malformed reply: {f}") },
            e => RemoteError::Network { addr, message: e.to_string() },
        }
    }

    fn unexpected(&self, m: &Msg) -> RemoteError {
        let addr = self.cfg.addr.clone();
        match m {
            Msg::Error { code, message } => {
                let message = message.clone();
                match ErrorCode::from_u16(*code) {
                    Some(ErrorCode::Fenced) => RemoteError::Fenced { addr, message },
                    Some(ErrorCode::Full) => RemoteError::Full { addr, message },
                    Some(ErrorCode::Auth) => RemoteError::Auth { addr, message },
                    _ => RemoteError::Server { addr, message },
                }
            }
            other => RemoteError::Server { addr, message: format!("unexpected {:?}", other.kind()) },
        }
    }
}

impl super::Link for Client {
    fn journal(&self) -> ServerJournal {
        self.journal
    }
    fn send_append(&mut self, tid: u64, block_size: u32, blocks: Vec<u8>) -> Result<(), RemoteError> {
        Client::send_append(self, tid, block_size, blocks)
    }
    fn wait_ack(&mut self) -> Result<u64, RemoteError> {
        Client::wait_ack(self)
    }
    fn trim(&mut self, upto: u64) -> Result<u64, RemoteError> {
        Client::trim(self, upto)
    }
    fn read_from(&mut self, from: u64) -> Result<Vec<(u64, u32, Vec<u8>)>, RemoteError> {
        Client::read_from(self, from)
    }
    fn fence(&mut self, epoch: u64) -> Result<u64, RemoteError> {
        Client::fence(self, epoch)
    }
}

/// How a host reaches and configures its JetStream journal.
#[derive(Debug, Clone)]
pub struct JetStreamOptions {
    /// A NATS credentials file (`jetstream_creds=`).
    pub creds: Option<PathBuf>,
    /// A file holding an nkey seed (`jetstream_nkey=`).
    pub nkey: Option<PathBuf>,
    /// CA certificates (PEM) for TLS to the servers (`jetstream_tls_ca=`); TLS is required
    /// when set.
    pub tls_ca: Option<PathBuf>,
    /// Replicas of a stream the mount creates, and the fewest it accepts in an existing one
    /// (`jetstream_replicas=`, default 3).
    pub replicas: usize,
    /// `max_bytes` of a stream the mount creates: the local journal's size.
    pub max_bytes: u64,
    /// How long taking the journal over (its fence) may wait for the cluster to settle: a
    /// stream created moments ago whose subjects have not reached the server this host is
    /// connected to yet, or a stream leader being elected. A mount waits the longer of this
    /// and the acknowledgement timeout ([`MOUNT_SETTLE`]); a host returning to the stream while
    /// mounted waits only the acknowledgement timeout (zero here), as its syncs wait on it.
    pub settle: Duration,
}

/// How long a mount waits for a JetStream cluster to settle before it gives up (see
/// [`JetStreamOptions::settle`]).
pub const MOUNT_SETTLE: Duration = Duration::from_secs(20);

impl Default for JetStreamOptions {
    fn default() -> Self {
        JetStreamOptions { creds: None, nkey: None, tls_ca: None, replicas: 3, max_bytes: 64 << 20, settle: Duration::ZERO }
    }
}

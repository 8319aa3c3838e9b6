//! `okeanos journal-server`: keeps the journals of many hosts, one [`Store`] per (host, file
//! system), and acknowledges an APPEND only once it is durable.
//!
//! Threads: one accepts; each connection has a reader (decodes frames, applies them to the
//! store in arrival order) and a replier (sends the replies in request order, each APPEND's ACK
//! only after the sync round that covers it), so a host may have several appends in flight;
//! one syncer runs the sync rounds: it takes every store written since the last round and
//! fdatasyncs each once, so concurrent appends from all connections share their fdatasync
//! (group commit).
//!
//! Bad input never takes the server down: a malformed frame gets an ERROR and the connection is
//! closed; a peer that stops mid-frame times out ([`super::FRAME_TIMEOUT`]); a failed fdatasync
//! is never retried, every waiting append gets an error and the server refuses writes from then
//! on (the hosts fall back to their local journals).

use super::store::{Store, StoreError};
use super::transport::Stream;
use super::{read_frame, write_frame, FrameError};
use crate::format::remote::{ErrorCode, JournalId, Msg};
use std::collections::HashMap;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub dir: PathBuf,
    /// Host name -> secret. `None`: every host is accepted (`--no-auth`, for local tests).
    pub secrets: Option<HashMap<String, Vec<u8>>>,
    /// Bytes one journal may hold.
    pub quota_bytes: u64,
    pub max_connections: usize,
    /// TLS (`--tls-cert`, `--tls-key`): every connection must complete a handshake first.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// What the server has done (printed at exit).
#[derive(Debug, Default)]
pub struct ServerStats {
    pub connections: AtomicU64,
    pub appends: AtomicU64,
    /// Sync rounds (each fdatasyncs every journal written since the last round) and the
    /// fdatasyncs they made.
    pub rounds: AtomicU64,
    pub syncs: AtomicU64,
    pub bad_frames: AtomicU64,
    pub refused: AtomicU64,
    /// Connections whose TLS handshake failed.
    pub tls_failed: AtomicU64,
}

impl ServerStats {
    pub fn summary(&self) -> String {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        format!(
            "{} connections, {} appends in {} sync rounds ({} fdatasyncs), {} malformed frames, {} refused, {} failed TLS handshakes",
            l(&self.connections),
            l(&self.appends),
            l(&self.rounds),
            l(&self.syncs),
            l(&self.bad_frames),
            l(&self.refused),
            l(&self.tls_failed)
        )
    }
}

type Journal = Arc<Mutex<Store>>;

/// The group commit: sync rounds over the stores written since the last round.
#[derive(Default)]
struct Syncer {
    state: Mutex<SyncState>,
    cv: Condvar,
}

#[derive(Default)]
struct SyncState {
    started: u64,
    done: u64,
    dirty: Vec<Journal>,
    failed: Option<String>,
    stop: bool,
}

impl Syncer {
    /// Registers a written store; returns the round whose completion makes the write durable.
    fn register(&self, j: &Journal) -> u64 {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if !s.dirty.iter().any(|d| Arc::ptr_eq(d, j)) {
            s.dirty.push(j.clone());
        }
        self.cv.notify_all();
        s.started + 1
    }

    /// Waits until round `ticket` is done.
    fn wait(&self, ticket: u64) -> Result<(), String> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(f) = &s.failed {
                return Err(f.clone());
            }
            if s.done >= ticket {
                return Ok(());
            }
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn run(&self, stats: &ServerStats) {
        loop {
            let (round, dirty) = {
                let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                while s.dirty.is_empty() && !s.stop {
                    s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
                }
                if s.dirty.is_empty() && s.stop {
                    return;
                }
                s.started += 1;
                (s.started, std::mem::take(&mut s.dirty))
            };
            stats.rounds.fetch_add(1, Ordering::Relaxed);
            let mut failed = None;
            for j in dirty {
                let mut st = j.lock().unwrap_or_else(|e| e.into_inner());
                if let Err(e) = st.sync() {
                    failed = Some(e.to_string());
                }
                stats.syncs.fetch_add(1, Ordering::Relaxed);
            }
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(f) = failed {
                // Never retried: what the failed fdatasync covered may be gone.
                s.failed.get_or_insert(format!("fdatasync failed: {f}"));
            }
            s.done = round;
            self.cv.notify_all();
        }
    }

    fn stop(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
        self.cv.notify_all();
    }
}

struct Shared {
    cfg: ServerConfig,
    journals: Mutex<HashMap<JournalId, Journal>>,
    syncer: Syncer,
    stats: ServerStats,
    open_connections: AtomicU64,
}

/// A running server.
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
}

impl Server {
    pub fn bind(addr: &str, cfg: ServerConfig) -> std::io::Result<Server> {
        std::fs::create_dir_all(&cfg.dir)?;
        let listener = TcpListener::bind(addr)?;
        let shared = Arc::new(Shared { cfg, journals: Mutex::default(), syncer: Syncer::default(), stats: ServerStats::default(), open_connections: AtomicU64::new(0) });
        Ok(Server { listener, shared, stop: Arc::new(AtomicBool::new(false)) })
    }

    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// A flag that stops [`Server::run`] (checked between connections; the caller also
    /// connects once to wake the accept).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    pub fn stats(&self) -> &ServerStats {
        &self.shared.stats
    }

    /// Serves until the stop flag is set; then makes every journal durable.
    pub fn run(&self) {
        let sh = self.shared.clone();
        let syncer = std::thread::spawn(move || sh.syncer.run(&sh.stats));
        for conn in self.listener.incoming() {
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            let Ok(stream) = conn else { continue };
            let sh = self.shared.clone();
            if sh.open_connections.load(Ordering::Relaxed) as usize >= sh.cfg.max_connections {
                sh.stats.refused.fetch_add(1, Ordering::Relaxed);
                if sh.cfg.tls.is_none() {
                    let _ = write_frame(&Stream::plain(stream), 0, &Msg::error(ErrorCode::Server, "too many connections"));
                }
                continue;
            }
            sh.open_connections.fetch_add(1, Ordering::Relaxed);
            sh.stats.connections.fetch_add(1, Ordering::Relaxed);
            std::thread::spawn(move || {
                serve(&sh, stream);
                sh.open_connections.fetch_sub(1, Ordering::Relaxed);
            });
        }
        self.shared.syncer.stop();
        let _ = syncer.join();
        for j in self.shared.journals.lock().unwrap_or_else(|e| e.into_inner()).values() {
            let _ = j.lock().unwrap_or_else(|e| e.into_inner()).finish();
        }
    }
}

/// A reply, sent once `ticket` (a sync round; 0: none) is done.
struct Reply {
    id: u64,
    msg: Msg,
    ticket: u64,
    /// Close the connection after this reply.
    last: bool,
}

fn serve(sh: &Arc<Shared>, tcp: TcpStream) {
    let _ = tcp.set_nodelay(true);
    let stream = match &sh.cfg.tls {
        None => Stream::plain(tcp),
        Some(cfg) => {
            // The handshake is bounded like a frame: a peer that never completes it does not
            // keep the thread.
            let _ = tcp.set_read_timeout(Some(super::FRAME_TIMEOUT));
            let _ = tcp.set_write_timeout(Some(super::FRAME_TIMEOUT));
            match Stream::server(tcp, cfg.clone()) {
                Ok(s) => {
                    let _ = s.set_read_timeout(None);
                    s
                }
                Err(_) => {
                    sh.stats.tls_failed.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
        }
    };
    let Ok(out) = stream.try_clone() else { return };
    let (tx, rx) = mpsc::channel::<Reply>();
    let sh2 = sh.clone();
    let replier = std::thread::spawn(move || {
        for r in rx {
            let msg = if r.ticket > 0 {
                match sh2.syncer.wait(r.ticket) {
                    Ok(()) => r.msg,
                    Err(e) => Msg::error(ErrorCode::Server, e),
                }
            } else {
                r.msg
            };
            if write_frame(&out, r.id, &msg).is_err() || r.last {
                break;
            }
        }
        out.shutdown();
    });
    let mut conn = Conn { sh, stream, journal: None, nonce: super::nonce(), tx };
    conn.run();
    drop(conn);
    let _ = replier.join();
}

struct Conn<'a> {
    sh: &'a Arc<Shared>,
    stream: Stream,
    journal: Option<(JournalId, Journal)>,
    nonce: [u8; 32],
    tx: mpsc::Sender<Reply>,
}

impl Conn<'_> {
    fn reply(&self, id: u64, msg: Msg) {
        let _ = self.tx.send(Reply { id, msg, ticket: 0, last: false });
    }

    fn fail(&self, id: u64, code: ErrorCode, why: impl Into<String>) {
        let _ = self.tx.send(Reply { id, msg: Msg::error(code, why), ticket: 0, last: true });
    }

    fn run(&mut self) {
        if write_frame(&self.stream, 0, &Msg::Challenge { nonce: self.nonce }).is_err() {
            return;
        }
        loop {
            let (id, msg) = match read_frame(&self.stream) {
                Ok(x) => x,
                Err(FrameError::Closed) => return,
                Err(e) => {
                    if matches!(e, FrameError::Format(_)) {
                        self.sh.stats.bad_frames.fetch_add(1, Ordering::Relaxed);
                    }
                    return self.fail(0, ErrorCode::BadFrame, e.to_string());
                }
            };
            if !self.handle(id, msg) {
                return;
            }
        }
    }

    /// Applies one request; false ends the connection.
    fn handle(&mut self, id: u64, msg: Msg) -> bool {
        let Some((_, j)) = self.journal.clone() else {
            return match msg {
                Msg::Hello { id: jid, host_name, epoch, proof } => self.hello(id, jid, &host_name, epoch, &proof),
                other => {
                    self.fail(id, ErrorCode::Protocol, format!("{:?} before HELLO", other.kind()));
                    false
                }
            };
        };
        let mut st = j.lock().unwrap_or_else(|e| e.into_inner());
        match msg {
            Msg::Append { tid, epoch, block_size, blocks } => match st.append(tid, epoch, block_size, &blocks) {
                Ok(()) => {
                    drop(st);
                    self.sh.stats.appends.fetch_add(1, Ordering::Relaxed);
                    let ticket = self.sh.syncer.register(&j);
                    let _ = self.tx.send(Reply { id, msg: Msg::Ack { tid }, ticket, last: false });
                }
                Err(e) => self.reply(id, store_error(&e)),
            },
            Msg::Trim { upto, epoch } => match st.trim(upto, epoch) {
                Ok(()) => self.reply(id, Msg::TrimOk { first_tid: st.first_tid }),
                Err(e) => self.reply(id, store_error(&e)),
            },
            Msg::Read { from } => match st.read_from(from) {
                Ok(txs) => {
                    for (tid, block_size, blocks) in txs {
                        self.reply(id, Msg::Tx { tid, block_size, blocks });
                    }
                    self.reply(id, Msg::ReadEnd { last_tid: st.last_tid });
                }
                Err(e) => self.reply(id, store_error(&e)),
            },
            Msg::Fence { epoch } => match st.fence(epoch) {
                Ok(()) => self.reply(id, Msg::FenceOk { epoch, last_tid: st.last_tid }),
                Err(e) => self.reply(id, store_error(&e)),
            },
            Msg::Hello { .. } => {
                self.fail(id, ErrorCode::Protocol, "a second HELLO");
                return false;
            }
            other => {
                self.fail(id, ErrorCode::Protocol, format!("{:?} is not a request", other.kind()));
                return false;
            }
        }
        true
    }

    fn hello(&mut self, id: u64, jid: JournalId, host_name: &str, epoch: u64, proof: &[u8; 32]) -> bool {
        if let Some(secrets) = &self.sh.cfg.secrets {
            let ok = secrets.get(host_name).is_some_and(|s| super::host_id(host_name) == jid.host && super::proof_eq(&super::proof(s, &self.nonce, &jid, epoch), proof));
            if !ok {
                self.sh.stats.refused.fetch_add(1, Ordering::Relaxed);
                self.fail(id, ErrorCode::Auth, format!("host {host_name:?} is unknown or its proof is wrong"));
                return false;
            }
        }
        let j = match self.open(jid) {
            Ok(j) => j,
            Err(e) => {
                self.fail(id, ErrorCode::Server, e.to_string());
                return false;
            }
        };
        let st = j.lock().unwrap_or_else(|e| e.into_inner());
        let ok = Msg::HelloOk { epoch: st.epoch, first_tid: st.first_tid, last_tid: st.last_tid, quota_bytes: st.quota_bytes, used_bytes: st.used_bytes() };
        drop(st);
        self.reply(id, ok);
        self.journal = Some((jid, j));
        true
    }

    fn open(&self, jid: JournalId) -> Result<Journal, StoreError> {
        let mut map = self.sh.journals.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(j) = map.get(&jid) {
            return Ok(j.clone());
        }
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let dir = self.sh.cfg.dir.join(format!("{}-{}", hex(&jid.host), hex(&jid.fs_uuid)));
        let j = Arc::new(Mutex::new(Store::open(&dir, self.sh.cfg.quota_bytes)?));
        map.insert(jid, j.clone());
        Ok(j)
    }
}

fn store_error(e: &StoreError) -> Msg {
    let code = match e {
        StoreError::Full { .. } => ErrorCode::Full,
        StoreError::Order { .. } => ErrorCode::Order,
        StoreError::Fenced { .. } => ErrorCode::Fenced,
        StoreError::Io(..) | StoreError::Damaged(..) => ErrorCode::Server,
    };
    Msg::error(code, e.to_string())
}

//! The NBD server: accept loop, handshake, transmission.

use super::wire;
use crate::device::{Device, DeviceError, SECTOR_SIZE};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The longest a peer may take over each step of the handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest READ or WRITE served (the block-size information says so); a larger WRITE
/// closes the connection, since its data cannot be told from the next request.
pub const MAX_REQUEST: u32 = 32 << 20;
/// The most option data accepted in one option (names are short).
const MAX_OPTION: u32 = 64 << 10;
/// Options one handshake may send before it must choose an export.
const MAX_OPTIONS: usize = 64;

#[derive(Debug, Clone)]
pub struct NbdConfig {
    /// The export's name; a client asking for "" gets it too (the default export).
    pub name: String,
    pub max_connections: usize,
    pub read_only: bool,
}

impl Default for NbdConfig {
    fn default() -> Self {
        NbdConfig { name: "okeanos".into(), max_connections: 16, read_only: false }
    }
}

/// What the server has done (printed when it stops).
#[derive(Debug, Default)]
pub struct NbdStats {
    pub connections: AtomicU64,
    pub refused: AtomicU64,
    pub bad_handshakes: AtomicU64,
    pub bad_requests: AtomicU64,
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub flushes: AtomicU64,
    pub errors: AtomicU64,
}

impl NbdStats {
    pub fn summary(&self) -> String {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        format!(
            "{} connections ({} refused, {} failed handshakes), {} reads, {} writes, {} flushes, {} malformed requests, {} error replies",
            l(&self.connections),
            l(&self.refused),
            l(&self.bad_handshakes),
            l(&self.reads),
            l(&self.writes),
            l(&self.flushes),
            l(&self.bad_requests),
            l(&self.errors)
        )
    }
}

struct Shared {
    dev: Arc<dyn Device>,
    cfg: NbdConfig,
    stats: NbdStats,
    /// Read-modify-write of unaligned writes, so that two of them on one sector do not lose
    /// each other's bytes.
    rmw: Mutex<()>,
    /// Open connections, to shut them down when the server stops.
    open: Mutex<HashMap<u64, TcpStream>>,
}

pub struct NbdServer {
    listener: TcpListener,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
}

impl NbdServer {
    pub fn bind(addr: &str, dev: Arc<dyn Device>, cfg: NbdConfig) -> io::Result<NbdServer> {
        let listener = TcpListener::bind(addr)?;
        Ok(NbdServer {
            listener,
            shared: Arc::new(Shared { dev, cfg, stats: NbdStats::default(), rmw: Mutex::new(()), open: Mutex::new(HashMap::new()) }),
            stop: Arc::new(AtomicBool::new(false)),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Set it and connect once to the listening address to stop [`NbdServer::run`].
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    pub fn stats(&self) -> &NbdStats {
        &self.shared.stats
    }

    /// Requests served so far (reads, writes, flushes): unchanged over a while means idle.
    pub fn activity(&self) -> u64 {
        let s = &self.shared.stats;
        s.reads.load(Ordering::Relaxed) + s.writes.load(Ordering::Relaxed) + s.flushes.load(Ordering::Relaxed)
    }

    /// Serves until the stop flag is set; then shuts every connection down and waits for
    /// their threads, so that the caller may flush and close the device.
    pub fn run(&self) {
        let mut threads = Vec::new();
        let mut next_id = 0u64;
        for conn in self.listener.incoming() {
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            let Ok(stream) = conn else { continue };
            threads.retain(|t: &std::thread::JoinHandle<()>| !t.is_finished());
            let sh = &self.shared;
            if sh.open.lock().unwrap_or_else(|e| e.into_inner()).len() >= sh.cfg.max_connections {
                sh.stats.refused.fetch_add(1, Ordering::Relaxed);
                drop(stream);
                continue;
            }
            sh.stats.connections.fetch_add(1, Ordering::Relaxed);
            next_id += 1;
            let id = next_id;
            if let Ok(c) = stream.try_clone() {
                sh.open.lock().unwrap_or_else(|e| e.into_inner()).insert(id, c);
            }
            let sh = self.shared.clone();
            let peer = stream.peer_addr().map_or_else(|_| "?".to_string(), |a| a.to_string());
            threads.push(std::thread::spawn(move || {
                // A server's log line for a connection that broke the protocol; a peer that
                // just went away is not news.
                match serve(&sh, stream) {
                    Err(End::Protocol(why)) => eprintln!("nbd: closed the connection from {peer}: {why}"),
                    Err(End::Io(e)) if !matches!(e.kind(), io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe) => {
                        eprintln!("nbd: the connection from {peer} failed: {e}")
                    }
                    _ => {}
                }
                sh.open.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
            }));
        }
        for (_, c) in self.shared.open.lock().unwrap_or_else(|e| e.into_inner()).drain() {
            let _ = c.shutdown(Shutdown::Both);
        }
        for t in threads {
            let _ = t.join();
        }
    }
}

/// How a connection ended badly (the connection is closed; the server goes on).
enum End {
    Io(io::Error),
    Protocol(String),
}

impl From<io::Error> for End {
    fn from(e: io::Error) -> End {
        End::Io(e)
    }
}

fn serve(sh: &Shared, mut s: TcpStream) -> Result<(), End> {
    let _ = s.set_nodelay(true);
    s.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    match handshake(sh, &mut s) {
        Ok(true) => {}
        Ok(false) => return Ok(()),
        Err(e) => {
            sh.stats.bad_handshakes.fetch_add(1, Ordering::Relaxed);
            return Err(e);
        }
    }
    s.set_read_timeout(None)?;
    let r = transmission(sh, &mut s);
    if matches!(r, Err(End::Protocol(_))) {
        sh.stats.bad_requests.fetch_add(1, Ordering::Relaxed);
    }
    r
}

fn read_exact(s: &mut TcpStream, n: usize) -> io::Result<Vec<u8>> {
    let mut b = vec![0u8; n];
    s.read_exact(&mut b)?;
    Ok(b)
}

fn transmission_flags(sh: &Shared) -> u16 {
    let mut f = wire::TFLAG_HAS_FLAGS | wire::TFLAG_SEND_FLUSH | wire::TFLAG_SEND_FUA | wire::TFLAG_SEND_TRIM | wire::TFLAG_SEND_WRITE_ZEROES | wire::TFLAG_CAN_MULTI_CONN;
    if sh.cfg.read_only {
        f |= wire::TFLAG_READ_ONLY;
    }
    if sh.dev.seeks() == Some(true) {
        f |= wire::TFLAG_ROTATIONAL;
    }
    f
}

fn known(sh: &Shared, name: &str) -> bool {
    name.is_empty() || name == sh.cfg.name
}

/// The fixed newstyle handshake. `Ok(true)`: an export was chosen, go on to transmission;
/// `Ok(false)`: the client aborted.
fn handshake(sh: &Shared, s: &mut TcpStream) -> Result<bool, End> {
    s.write_all(&wire::greeting())?;
    let cflags = u32::from_be_bytes(read_exact(s, 4)?.try_into().unwrap());
    if cflags & !(wire::FLAG_C_FIXED_NEWSTYLE | wire::FLAG_C_NO_ZEROES) != 0 {
        return Err(End::Protocol(format!("unknown client flags {cflags:#x}")));
    }
    let no_zeroes = cflags & wire::FLAG_C_NO_ZEROES != 0;
    let size = sh.dev.len_bytes();
    for _ in 0..MAX_OPTIONS {
        let (opt, len) = wire::parse_option_header(&read_exact(s, 16)?.try_into().unwrap()).map_err(End::Protocol)?;
        if len > MAX_OPTION {
            if opt == wire::OPT_EXPORT_NAME {
                return Err(End::Protocol(format!("an export name of {len} bytes")));
            }
            // Read past it in pieces, then say it was too big.
            let mut left = len as u64;
            let mut sink = vec![0u8; 64 << 10];
            while left > 0 {
                let n = left.min(sink.len() as u64) as usize;
                s.read_exact(&mut sink[..n])?;
                left -= n as u64;
            }
            s.write_all(&wire::option_reply(opt, wire::REP_ERR_TOO_BIG, b"option data too large"))?;
            continue;
        }
        let data = read_exact(s, len as usize)?;
        match opt {
            wire::OPT_EXPORT_NAME => {
                let name = String::from_utf8_lossy(&data);
                if !known(sh, &name) {
                    // NBD_OPT_EXPORT_NAME has no error reply: the protocol closes.
                    return Err(End::Protocol(format!("unknown export {name:?}")));
                }
                let mut b = Vec::with_capacity(134);
                b.extend_from_slice(&size.to_be_bytes());
                b.extend_from_slice(&transmission_flags(sh).to_be_bytes());
                if !no_zeroes {
                    b.extend_from_slice(&[0u8; 124]);
                }
                s.write_all(&b)?;
                return Ok(true);
            }
            wire::OPT_ABORT => {
                let _ = s.write_all(&wire::option_reply(opt, wire::REP_ACK, &[]));
                return Ok(false);
            }
            wire::OPT_LIST => {
                if !data.is_empty() {
                    s.write_all(&wire::option_reply(opt, wire::REP_ERR_INVALID, b"LIST takes no data"))?;
                    continue;
                }
                let mut d = Vec::new();
                d.extend_from_slice(&(sh.cfg.name.len() as u32).to_be_bytes());
                d.extend_from_slice(sh.cfg.name.as_bytes());
                s.write_all(&wire::option_reply(opt, wire::REP_SERVER, &d))?;
                s.write_all(&wire::option_reply(opt, wire::REP_ACK, &[]))?;
            }
            wire::OPT_INFO | wire::OPT_GO => {
                let req = match wire::parse_info_request(&data) {
                    Ok(r) => r,
                    Err(e) => {
                        s.write_all(&wire::option_reply(opt, wire::REP_ERR_INVALID, e.as_bytes()))?;
                        continue;
                    }
                };
                if !known(sh, &req.name) {
                    s.write_all(&wire::option_reply(opt, wire::REP_ERR_UNKNOWN, format!("no export named {:?}", req.name).as_bytes()))?;
                    continue;
                }
                s.write_all(&wire::option_reply(opt, wire::REP_INFO, &wire::info_export(size, transmission_flags(sh))))?;
                if req.items.contains(&wire::INFO_BLOCK_SIZE) {
                    // Any alignment is served (unaligned writes are read, patched, written).
                    s.write_all(&wire::option_reply(opt, wire::REP_INFO, &wire::info_block_size(1, 4096, MAX_REQUEST)))?;
                }
                if req.items.contains(&wire::INFO_NAME) {
                    let mut d = wire::INFO_NAME.to_be_bytes().to_vec();
                    d.extend_from_slice(sh.cfg.name.as_bytes());
                    s.write_all(&wire::option_reply(opt, wire::REP_INFO, &d))?;
                }
                s.write_all(&wire::option_reply(opt, wire::REP_ACK, &[]))?;
                if opt == wire::OPT_GO {
                    return Ok(true);
                }
            }
            _ => s.write_all(&wire::option_reply(opt, wire::REP_ERR_UNSUP, b"not supported"))?,
        }
    }
    Err(End::Protocol(format!("more than {MAX_OPTIONS} options")))
}

fn errno(e: &DeviceError) -> u32 {
    match e {
        DeviceError::OutOfRange { .. } | DeviceError::Unaligned { .. } => wire::EINVAL,
        _ => wire::EIO,
    }
}

/// Reads any byte range: the sectors covering it, then the part asked for.
fn read_any(dev: &dyn Device, offset: u64, out: &mut [u8]) -> Result<(), DeviceError> {
    let lo = offset / SECTOR_SIZE * SECTOR_SIZE;
    let hi = (offset + out.len() as u64).div_ceil(SECTOR_SIZE) * SECTOR_SIZE;
    if lo == offset && hi == offset + out.len() as u64 {
        return dev.read_at(offset, out);
    }
    let mut buf = vec![0u8; (hi - lo) as usize];
    dev.read_at(lo, &mut buf)?;
    out.copy_from_slice(&buf[(offset - lo) as usize..(offset - lo) as usize + out.len()]);
    Ok(())
}

/// Writes any byte range: aligned as is; otherwise its first and last sectors are read,
/// patched and written with it.
fn write_any(sh: &Shared, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
    let lo = offset / SECTOR_SIZE * SECTOR_SIZE;
    let end = offset + data.len() as u64;
    let hi = end.div_ceil(SECTOR_SIZE) * SECTOR_SIZE;
    if lo == offset && hi == end {
        return sh.dev.write_at(offset, data);
    }
    let _g = sh.rmw.lock().unwrap_or_else(|e| e.into_inner());
    let mut buf = vec![0u8; (hi - lo) as usize];
    let ss = SECTOR_SIZE as usize;
    sh.dev.read_at(lo, &mut buf[..ss])?;
    if hi - lo > SECTOR_SIZE {
        let at = buf.len() - ss;
        sh.dev.read_at(hi - SECTOR_SIZE, &mut buf[at..])?;
    }
    buf[(offset - lo) as usize..(offset - lo) as usize + data.len()].copy_from_slice(data);
    sh.dev.write_at(lo, &buf)
}

fn transmission(sh: &Shared, s: &mut TcpStream) -> Result<(), End> {
    let size = sh.dev.len_bytes();
    let mut hdr = [0u8; wire::REQUEST_LEN];
    loop {
        match s.read_exact(&mut hdr) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        let req = wire::parse_request(&hdr).map_err(End::Protocol)?;
        let in_range = req.offset.checked_add(req.len as u64).is_some_and(|e| e <= size);
        let fua = req.flags & wire::CMD_FLAG_FUA != 0;
        let mut reply = |err: u32, data: &[u8]| -> io::Result<()> {
            if err != 0 {
                sh.stats.errors.fetch_add(1, Ordering::Relaxed);
            }
            s.write_all(&wire::simple_reply(err, req.cookie))?;
            if err == 0 && !data.is_empty() {
                s.write_all(data)?;
            }
            Ok(())
        };
        match req.kind {
            wire::CMD_READ => {
                sh.stats.reads.fetch_add(1, Ordering::Relaxed);
                if req.len > MAX_REQUEST {
                    reply(wire::EOVERFLOW, &[])?;
                } else if !in_range {
                    reply(wire::EINVAL, &[])?;
                } else {
                    let mut buf = vec![0u8; req.len as usize];
                    match read_any(&*sh.dev, req.offset, &mut buf) {
                        Ok(()) => reply(0, &buf)?,
                        Err(e) => reply(errno(&e), &[])?,
                    }
                }
            }
            wire::CMD_WRITE | wire::CMD_WRITE_ZEROES => {
                sh.stats.writes.fetch_add(1, Ordering::Relaxed);
                let zeroes = req.kind == wire::CMD_WRITE_ZEROES;
                if !zeroes && req.len > MAX_REQUEST {
                    return Err(End::Protocol(format!("a WRITE of {} bytes (at most {MAX_REQUEST})", req.len)));
                }
                let data = if zeroes { Vec::new() } else { read_exact(s, req.len as usize)? };
                let mut reply = |err: u32| -> io::Result<()> {
                    if err != 0 {
                        sh.stats.errors.fetch_add(1, Ordering::Relaxed);
                    }
                    s.write_all(&wire::simple_reply(err, req.cookie))
                };
                if sh.cfg.read_only {
                    reply(wire::EPERM)?;
                } else if !in_range {
                    reply(wire::ENOSPC)?;
                } else {
                    let r = if zeroes {
                        let chunk = vec![0u8; (req.len as usize).min(1 << 20)];
                        let mut at = 0u64;
                        let mut r = Ok(());
                        while at < req.len as u64 && r.is_ok() {
                            let n = (req.len as u64 - at).min(chunk.len() as u64) as usize;
                            r = write_any(sh, req.offset + at, &chunk[..n]);
                            at += n as u64;
                        }
                        r
                    } else {
                        write_any(sh, req.offset, &data)
                    };
                    let r = r.and_then(|_| if fua { sh.dev.flush() } else { Ok(()) });
                    reply(r.as_ref().map_or_else(errno, |_| 0))?;
                }
            }
            wire::CMD_FLUSH => {
                sh.stats.flushes.fetch_add(1, Ordering::Relaxed);
                let r = sh.dev.flush();
                reply(r.as_ref().map_or_else(errno, |_| 0), &[])?;
            }
            wire::CMD_TRIM | wire::CMD_CACHE => {
                // TRIM is advice: the blocks keep their contents (a logged block cannot drop
                // out of the map without a durable record of it). CACHE is advice too.
                if sh.cfg.read_only && req.kind == wire::CMD_TRIM {
                    reply(wire::EPERM, &[])?;
                } else if !in_range {
                    reply(wire::EINVAL, &[])?;
                } else {
                    let r = if fua && req.kind == wire::CMD_TRIM { sh.dev.flush() } else { Ok(()) };
                    reply(r.as_ref().map_or_else(errno, |_| 0), &[])?;
                }
            }
            wire::CMD_DISC => return Ok(()),
            _ => reply(wire::EINVAL, &[])?,
        }
    }
}

//! The NBD server against a client that speaks the protocol byte by byte: every option and
//! request a real client sends, and malformed ones, which close that connection (or get an
//! error reply) and never take the server down. Real clients (nbdinfo, nbdcopy, qemu-io,
//! nbdfuse) are in okeanos-cli's tests/blockdev.rs.

use okeanos::device::{MlbDevice, MlbGeometry};
use okeanos::nbd::wire::*;
use okeanos::nbd::{NbdConfig, NbdServer};
use okeanos::{Device, MemDevice};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

struct Running {
    addr: SocketAddr,
    server: Arc<NbdServer>,
    thread: Option<std::thread::JoinHandle<()>>,
    dev: Arc<MlbDevice>,
}

impl Running {
    fn start(cfg: NbdConfig) -> Running {
        let disk = Arc::new(MemDevice::new(8 << 20));
        MlbDevice::create(disk.as_ref(), MlbGeometry { group_bytes: 1 << 20, log_bytes: 128 << 10, logged_write_bytes: 32 << 10 }).unwrap();
        let dev = Arc::new(MlbDevice::open(disk).unwrap());
        let server = Arc::new(NbdServer::bind("127.0.0.1:0", dev.clone(), cfg).unwrap());
        let addr = server.local_addr().unwrap();
        let s = server.clone();
        let thread = Some(std::thread::spawn(move || s.run()));
        Running { addr, server, thread, dev }
    }

    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.server.stop_flag().store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

fn read_n(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    s.read_exact(&mut b).unwrap();
    b
}

/// Reads the greeting and sends the client flags.
fn greet(s: &mut TcpStream) {
    let g = read_n(s, 18);
    assert_eq!(g[..], greeting()[..]);
    s.write_all(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes()).unwrap();
}

fn option(s: &mut TcpStream, opt: u32, data: &[u8]) {
    let mut b = IHAVEOPT.to_be_bytes().to_vec();
    b.extend_from_slice(&opt.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    s.write_all(&b).unwrap();
}

/// One option reply: (type, data).
fn option_reply_of(s: &mut TcpStream, opt: u32) -> (u32, Vec<u8>) {
    let h = read_n(s, 20);
    assert_eq!(u64::from_be_bytes(h[..8].try_into().unwrap()), REPLY_MAGIC);
    assert_eq!(u32::from_be_bytes(h[8..12].try_into().unwrap()), opt);
    let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
    let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
    (kind, read_n(s, len as usize))
}

fn info_data(name: &str, items: &[u16]) -> Vec<u8> {
    let mut d = (name.len() as u32).to_be_bytes().to_vec();
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&(items.len() as u16).to_be_bytes());
    for i in items {
        d.extend_from_slice(&i.to_be_bytes());
    }
    d
}

/// GO on the default export: returns (size, flags).
fn go(s: &mut TcpStream) -> (u64, u16) {
    option(s, OPT_GO, &info_data("", &[INFO_BLOCK_SIZE]));
    let mut export = None;
    loop {
        let (kind, d) = option_reply_of(s, OPT_GO);
        match kind {
            REP_INFO if u16::from_be_bytes(d[..2].try_into().unwrap()) == INFO_EXPORT => {
                export = Some((u64::from_be_bytes(d[2..10].try_into().unwrap()), u16::from_be_bytes(d[10..12].try_into().unwrap())));
            }
            REP_INFO => {}
            REP_ACK => return export.expect("NBD_INFO_EXPORT before the ACK"),
            k => panic!("GO answered {k:#x}"),
        }
    }
}

fn request(s: &mut TcpStream, kind: u16, flags: u16, cookie: u64, offset: u64, len: u32, data: &[u8]) {
    let mut b = REQUEST_MAGIC.to_be_bytes().to_vec();
    b.extend_from_slice(&flags.to_be_bytes());
    b.extend_from_slice(&kind.to_be_bytes());
    b.extend_from_slice(&cookie.to_be_bytes());
    b.extend_from_slice(&offset.to_be_bytes());
    b.extend_from_slice(&len.to_be_bytes());
    b.extend_from_slice(data);
    s.write_all(&b).unwrap();
}

/// A simple reply: its error.
fn reply(s: &mut TcpStream, cookie: u64) -> u32 {
    let h = read_n(s, 16);
    assert_eq!(u32::from_be_bytes(h[..4].try_into().unwrap()), SIMPLE_REPLY_MAGIC);
    assert_eq!(u64::from_be_bytes(h[8..16].try_into().unwrap()), cookie, "replies come in request order");
    u32::from_be_bytes(h[4..8].try_into().unwrap())
}

/// The peer closed: a read gets end of file (or a reset).
fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!(s.read(&mut b), Ok(0) | Err(_))
}

#[test]
fn options_a_client_sends_are_answered_and_the_export_serves_every_command() {
    let r = Running::start(NbdConfig::default());
    let mut s = r.connect();
    greet(&mut s);
    option(&mut s, OPT_LIST, &[]);
    let (k, d) = option_reply_of(&mut s, OPT_LIST);
    assert_eq!(k, REP_SERVER);
    assert_eq!(&d[4..], b"okeanos");
    assert_eq!(option_reply_of(&mut s, OPT_LIST).0, REP_ACK);
    option(&mut s, 8, &[]); // structured replies: not offered
    assert_eq!(option_reply_of(&mut s, 8).0, REP_ERR_UNSUP);
    option(&mut s, OPT_INFO, &info_data("nope", &[]));
    assert_eq!(option_reply_of(&mut s, OPT_INFO).0, REP_ERR_UNKNOWN);
    option(&mut s, OPT_GO, &[0, 0, 0, 9, 1]);
    assert_eq!(option_reply_of(&mut s, OPT_GO).0, REP_ERR_INVALID, "a name longer than the data");
    let (size, flags) = go(&mut s);
    assert_eq!(size, r.dev.len_bytes());
    for f in [TFLAG_HAS_FLAGS, TFLAG_SEND_FLUSH, TFLAG_SEND_FUA, TFLAG_SEND_TRIM, TFLAG_SEND_WRITE_ZEROES, TFLAG_CAN_MULTI_CONN] {
        assert!(flags & f != 0, "flag {f:#x} missing from {flags:#x}");
    }
    // An aligned write, an unaligned one (read-modify-write), reads of both, FUA, zeroes.
    request(&mut s, CMD_WRITE, 0, 1, 8192, 4096, &[7u8; 4096]);
    assert_eq!(reply(&mut s, 1), 0);
    request(&mut s, CMD_WRITE, CMD_FLAG_FUA, 2, 8192 + 100, 10, &[9u8; 10]);
    assert_eq!(reply(&mut s, 2), 0);
    request(&mut s, CMD_READ, 0, 3, 8192 + 98, 14, &[]);
    assert_eq!(reply(&mut s, 3), 0);
    assert_eq!(read_n(&mut s, 14), [7, 7, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 7, 7]);
    request(&mut s, CMD_WRITE_ZEROES, 0, 4, 8192, 50, &[]);
    assert_eq!(reply(&mut s, 4), 0);
    request(&mut s, CMD_TRIM, 0, 5, 0, 4096, &[]);
    assert_eq!(reply(&mut s, 5), 0);
    request(&mut s, CMD_FLUSH, 0, 6, 0, 0, &[]);
    assert_eq!(reply(&mut s, 6), 0);
    request(&mut s, CMD_READ, 0, 7, 8192, 112, &[]);
    assert_eq!(reply(&mut s, 7), 0);
    let got = read_n(&mut s, 112);
    assert!(got[..50].iter().all(|&b| b == 0) && got[50..100].iter().all(|&b| b == 7) && got[100..110].iter().all(|&b| b == 9));
    // Outside the export, too large, unknown: error replies, the connection goes on.
    request(&mut s, CMD_READ, 0, 8, size - 512, 1024, &[]);
    assert_eq!(reply(&mut s, 8), EINVAL);
    request(&mut s, CMD_WRITE, 0, 9, size, 512, &[1u8; 512]);
    assert_eq!(reply(&mut s, 9), ENOSPC);
    request(&mut s, CMD_READ, 0, 10, u64::MAX - 10, 512, &[]);
    assert_eq!(reply(&mut s, 10), EINVAL, "an offset that overflows");
    request(&mut s, CMD_READ, 0, 11, 0, 64 << 20, &[]);
    assert_eq!(reply(&mut s, 11), EOVERFLOW);
    request(&mut s, 77, 0, 12, 0, 0, &[]);
    assert_eq!(reply(&mut s, 12), EINVAL);
    request(&mut s, CMD_DISC, 0, 13, 0, 0, &[]);
    assert!(closed(&mut s));
    // The old way in: NBD_OPT_EXPORT_NAME, with the 124 zero bytes when the client wants them.
    let mut s = r.connect();
    read_n(&mut s, 18);
    s.write_all(&FLAG_C_FIXED_NEWSTYLE.to_be_bytes()).unwrap();
    option(&mut s, OPT_EXPORT_NAME, b"okeanos");
    let d = read_n(&mut s, 8 + 2 + 124);
    assert_eq!(u64::from_be_bytes(d[..8].try_into().unwrap()), size);
    request(&mut s, CMD_READ, 0, 1, 8192 + 50, 4, &[]);
    assert_eq!(reply(&mut s, 1), 0);
    assert_eq!(read_n(&mut s, 4), [7, 7, 7, 7]);
}

#[test]
fn malformed_handshakes_and_requests_close_one_connection_and_never_the_server() {
    let r = Running::start(NbdConfig::default());
    // Unknown client flags.
    let mut s = r.connect();
    read_n(&mut s, 18);
    s.write_all(&0xffu32.to_be_bytes()).unwrap();
    assert!(closed(&mut s));
    // An option without IHAVEOPT.
    let mut s = r.connect();
    greet(&mut s);
    s.write_all(&[0x55; 16]).unwrap();
    assert!(closed(&mut s));
    // An unknown export by name (EXPORT_NAME has no error reply).
    let mut s = r.connect();
    greet(&mut s);
    option(&mut s, OPT_EXPORT_NAME, b"other");
    assert!(closed(&mut s));
    // Option data too large: read past and refused, then the handshake goes on.
    let mut s = r.connect();
    greet(&mut s);
    option(&mut s, 99, &vec![0u8; 100 << 10]);
    assert_eq!(option_reply_of(&mut s, 99).0, REP_ERR_TOO_BIG);
    go(&mut s);
    // A request without its magic.
    s.write_all(&[0xaa; REQUEST_LEN]).unwrap();
    assert!(closed(&mut s));
    // A WRITE larger than the server takes: its data cannot be skipped, so the connection ends.
    let mut s = r.connect();
    greet(&mut s);
    go(&mut s);
    request(&mut s, CMD_WRITE, 0, 1, 0, u32::MAX, &[]);
    assert!(closed(&mut s));
    // A client that goes quiet mid-request, then away.
    let mut s = r.connect();
    greet(&mut s);
    go(&mut s);
    s.write_all(&REQUEST_MAGIC.to_be_bytes()).unwrap();
    drop(s);
    // ABORT.
    let mut s = r.connect();
    greet(&mut s);
    option(&mut s, OPT_ABORT, &[]);
    assert_eq!(option_reply_of(&mut s, OPT_ABORT).0, REP_ACK);
    assert!(closed(&mut s));
    // After all of it, a client is served.
    let mut s = r.connect();
    greet(&mut s);
    go(&mut s);
    request(&mut s, CMD_READ, 0, 1, 0, 512, &[]);
    assert_eq!(reply(&mut s, 1), 0);
    read_n(&mut s, 512);
    let st = r.server.stats();
    assert!(st.bad_handshakes.load(Ordering::Relaxed) >= 3 && st.bad_requests.load(Ordering::Relaxed) >= 2, "{}", st.summary());
}

#[test]
fn clients_past_the_limit_are_refused_and_a_read_only_export_refuses_writes() {
    let r = Running::start(NbdConfig { max_connections: 1, read_only: true, ..Default::default() });
    let mut a = r.connect();
    greet(&mut a);
    let (_, flags) = go(&mut a);
    assert!(flags & TFLAG_READ_ONLY != 0);
    let mut b = r.connect();
    assert!(closed(&mut b), "a second client beyond --max-connections 1");
    request(&mut a, CMD_WRITE, 0, 1, 0, 512, &[1u8; 512]);
    assert_eq!(reply(&mut a, 1), EPERM);
    request(&mut a, CMD_TRIM, 0, 2, 0, 512, &[]);
    assert_eq!(reply(&mut a, 2), EPERM);
    assert!(r.server.stats().refused.load(Ordering::Relaxed) >= 1);
}

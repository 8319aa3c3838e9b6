//! `okeanos journal-server` as a real process on 127.0.0.1, started and stopped by each test:
//! acknowledged appends survive kill -9, fdatasync is shared across connections, bad frames
//! and bad hosts get errors and never take it down, a newer epoch fences an older host, a full
//! journal says so until trimmed.

use okeanos::remote::client::{Client, ClientConfig, RemoteError};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_okeanos");
const BS: usize = 4096;

struct Server {
    child: Option<Child>,
    addr: String,
}

impl Server {
    fn start(dir: &Path, extra: &[&str]) -> Server {
        let mut child = Command::new(BIN)
            .args(["journal-server", "--listen", "127.0.0.1:0", "--dir"])
            .arg(dir)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr = line.split_whitespace().nth(4).unwrap_or_else(|| panic!("no address in {line:?}")).trim_end_matches(',').to_string();
        Server { child: Some(child), addr }
    }

    fn kill9(&mut self) {
        let mut c = self.child.take().unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
    }

    /// SIGTERM; the stop line with the server's counters.
    fn stop(&mut self) -> String {
        let mut c = self.child.take().unwrap();
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let st = c.wait().unwrap();
        assert!(st.success(), "{st}");
        let mut err = String::new();
        c.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        err
    }

    fn alive(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| c.try_wait().unwrap().is_none())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn cfg(s: &Server, host: &str, secret: &str, fs: u8) -> ClientConfig {
    ClientConfig { addr: s.addr.clone(), host_name: host.into(), secret: secret.as_bytes().to_vec(), fs_uuid: [fs; 16], epoch: 0, timeout: Duration::from_secs(5), tls: None, jetstream: Default::default() }
}

/// A transaction's blocks: `n` blocks, each filled from (tid, k).
fn tx(tid: u64, n: usize) -> Vec<u8> {
    (0..n * BS).map(|i| (tid as usize * 31 + i / BS * 7 + i % 251) as u8).collect()
}

fn secrets(dir: &Path, text: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("secrets");
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

#[test]
fn appends_are_read_back_trimmed_and_authenticated() {
    let dir = tempfile::tempdir().unwrap();
    let sec = secrets(dir.path(), "# hosts\nalpha s3cret-a\nbeta s3cret-b\n");
    let mut s = Server::start(&dir.path().join("j"), &["--secrets", sec.to_str().unwrap()]);
    let mut c = Client::connect(cfg(&s, "alpha", "s3cret-a", 1)).unwrap();
    assert_eq!((c.journal.epoch, c.journal.last_tid), (0, 0));
    let epoch = c.fence(1).unwrap();
    assert_eq!(epoch, 0);
    for tid in 1..=20 {
        c.append(tid, BS as u32, tx(tid, 1 + tid as usize % 3)).unwrap();
    }
    let back = c.read_from(1).unwrap();
    assert_eq!(back.len(), 20);
    for (tid, bs, blocks) in &back {
        assert_eq!((*bs as usize, blocks), (BS, &tx(*tid, 1 + *tid as usize % 3)));
    }
    // A retried append of a held transaction is acknowledged again; a different one is not.
    c.append(20, BS as u32, tx(20, 3)).unwrap();
    assert!(matches!(c.append(20, BS as u32, tx(99, 1)), Err(RemoteError::Server { .. })));
    let mut c = Client::connect(ClientConfig { epoch: 1, ..cfg(&s, "alpha", "s3cret-a", 1) }).unwrap();
    assert!(matches!(c.append(22, BS as u32, tx(22, 1)), Err(RemoteError::Server { .. })), "a gap in tids is refused");
    assert_eq!(c.trim(10).unwrap(), 11);
    assert_eq!(c.read_from(1).unwrap().iter().map(|t| t.0).collect::<Vec<_>>(), (11..=20).collect::<Vec<_>>());
    // Another host's journal is its own.
    let mut b = Client::connect(cfg(&s, "beta", "s3cret-b", 1)).unwrap();
    assert_eq!(b.journal.last_tid, 0);
    assert!(b.read_from(0).unwrap().is_empty());
    // Wrong secret, unknown host.
    for (host, secret) in [("alpha", "wrong"), ("gamma", "s3cret-a")] {
        match Client::connect(cfg(&s, host, secret, 1)) {
            Err(RemoteError::Auth { message, .. }) => assert!(message.contains("unknown or its proof is wrong"), "{message}"),
            Err(e) => panic!("{host}: {e}"),
            Ok(_) => panic!("{host} with {secret} was accepted"),
        }
    }
    assert!(s.stop().contains("2 refused"));
    // A secrets file others can read is refused.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&sec, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = Command::new(BIN).args(["journal-server", "--listen", "127.0.0.1:0", "--secrets"]).arg(&sec).arg("--dir").arg(dir.path()).output().unwrap();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("chmod 600"));
    let o = Command::new(BIN).args(["journal-server", "--listen", "127.0.0.1:0", "--dir"]).arg(dir.path()).output().unwrap();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("--secrets"));
}

/// Eight hosts append with four transactions in flight each; kill -9; every acknowledged
/// transaction is there after a restart. Then the same load ends with SIGTERM: fewer
/// fdatasyncs than appends (group commit across connections).
#[test]
fn kill_nine_loses_nothing_acknowledged_and_syncs_are_shared() {
    let dir = tempfile::tempdir().unwrap();
    let jdir = dir.path().join("j");
    for round in 0..2 {
        let mut s = Server::start(&jdir, &["--no-auth"]);
        let deadline = Instant::now() + Duration::from_millis(800);
        let hosts: Vec<_> = (0..8u8)
            .map(|h| {
                let c = cfg(&s, &format!("host{h}"), "", h + 1);
                std::thread::spawn(move || -> (u8, u64, u64) {
                    let mut c = Client::connect(c).unwrap();
                    let first = c.journal.last_tid + 1;
                    let (mut sent, mut acked) = (first, first - 1);
                    loop {
                        while sent - acked <= 4 && Instant::now() < deadline {
                            if c.send_append(sent, BS as u32, tx(sent, 1)).is_err() {
                                return (h, first, acked);
                            }
                            sent += 1;
                        }
                        if acked + 1 == sent {
                            return (h, first, acked);
                        }
                        match c.wait_ack() {
                            Ok(t) => {
                                assert_eq!(t, acked + 1, "acknowledged in order");
                                acked = t;
                            }
                            Err(_) => return (h, first, acked),
                        }
                    }
                })
            })
            .collect();
        if round == 0 {
            std::thread::sleep(Duration::from_millis(400));
            s.kill9();
        }
        let done: Vec<(u8, u64, u64)> = hosts.into_iter().map(|t| t.join().unwrap()).collect();
        let total: u64 = done.iter().map(|(_, f, a)| a + 1 - f).sum();
        assert!(total > 100, "appends acknowledged: {done:?}");
        if round == 1 {
            let line = s.stop();
            let n = |word: &str| -> u64 { line.split_whitespace().zip(line.split_whitespace().skip(1)).find(|(_, w)| w.trim_end_matches(',') == word).map(|(v, _)| v.parse().unwrap()).unwrap() };
            let (appends, rounds) = (n("appends"), n("sync"));
            eprintln!("{line}");
            assert!(rounds * 2 < appends, "group commit: {line}");
        }
        let mut s = Server::start(&jdir, &["--no-auth"]);
        for (h, first, acked) in done {
            let mut c = Client::connect(cfg(&s, &format!("host{h}"), "", h + 1)).unwrap();
            let back = c.read_from(first).unwrap();
            let tids: Vec<u64> = back.iter().map(|t| t.0).collect();
            assert!(tids.len() as u64 >= acked + 1 - first, "host {h}: {} held, {} acknowledged", tids.len(), acked + 1 - first);
            assert!(tids.windows(2).all(|w| w[1] == w[0] + 1) && tids.first().is_none_or(|&t| t == first), "host {h}: {tids:?}");
            for (tid, _, blocks) in back {
                assert_eq!(blocks, tx(tid, 1), "host {h} transaction {tid}");
            }
        }
        s.stop();
    }
}

#[test]
fn malformed_frames_and_stalls_never_take_the_server_down() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Server::start(&dir.path().join("j"), &["--no-auth"]);
    let good = okeanos::format::remote::Msg::Append { tid: 1, epoch: 0, block_size: BS as u32, blocks: tx(1, 1) }.encode(7);
    let hello = {
        let id = okeanos::format::remote::JournalId { host: okeanos::remote::host_id("h"), fs_uuid: [9; 16] };
        okeanos::format::remote::Msg::Hello { id, host_name: "h".into(), epoch: 0, proof: [0; 32] }.encode(1)
    };
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("garbage", b"GET / HTTP/1.1\r\n\r\n".to_vec()),
        ("append before hello", good.clone()),
        ("huge length", {
            let mut f = good[..24].to_vec();
            f[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
            f
        }),
        ("bad crc", {
            let mut f = hello.clone();
            let n = f.len();
            f[n - 1] ^= 1;
            f
        }),
        ("unknown type", {
            let mut f = hello.clone();
            f[6] = 99;
            f
        }),
        ("truncated then closed", hello[..30].to_vec()),
        ("two hellos", [hello.clone(), hello.clone()].concat()),
    ];
    // Seeded mutations of valid frames.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for k in 0..200 {
        let mut f = if k % 2 == 0 { hello.clone() } else { [hello.clone(), good.clone()].concat() };
        for _ in 0..1 + k % 4 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x as usize) % f.len();
            f[i] ^= (x >> 32) as u8 | 1;
        }
        if k % 5 == 0 {
            f.truncate((x as usize >> 8) % f.len());
        }
        cases.push(("mutation", f));
    }
    for (what, bytes) in &cases {
        let mut c = TcpStream::connect(&s.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let _ = c.write_all(bytes);
        let _ = c.shutdown(std::net::Shutdown::Write);
        // The server answers (the challenge, maybe an error) and closes: read to the end.
        let mut sink = Vec::new();
        let r = c.read_to_end(&mut sink);
        assert!(r.is_ok() || matches!(r, Err(ref e) if e.kind() == std::io::ErrorKind::ConnectionReset), "{what}: {r:?}");
        assert!(s.alive(), "{what} took the server down");
    }
    // A peer that stops mid-frame is cut off after the frame timeout, not held forever.
    let mut stall = TcpStream::connect(&s.addr).unwrap();
    stall.write_all(&hello[..10]).unwrap();
    // Meanwhile a good host works.
    let mut c = Client::connect(cfg(&s, "h", "", 9)).unwrap();
    c.fence(1).unwrap();
    let mut c = Client::connect(ClientConfig { epoch: 1, ..cfg(&s, "h", "", 9) }).unwrap();
    c.append(1, BS as u32, tx(1, 2)).unwrap();
    assert_eq!(c.read_from(1).unwrap().len(), 1);
    stall.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let t0 = Instant::now();
    let mut sink = Vec::new();
    let _ = stall.read_to_end(&mut sink);
    assert!(t0.elapsed() < Duration::from_secs(25), "a stalled frame was held {:?}", t0.elapsed());
    let line = s.stop();
    assert!(line.contains("malformed frames") && !line.contains(" 0 malformed frames"), "{line}");
}

#[test]
fn a_newer_epoch_fences_the_older_host() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(&dir.path().join("j"), &["--no-auth"]);
    let mut a = Client::connect(cfg(&s, "node", "", 3)).unwrap();
    a.fence(1).unwrap();
    for tid in 1..=5 {
        a.append(tid, BS as u32, tx(tid, 1)).unwrap();
    }
    // B takes over: fences with epoch 2, reads what A wrote.
    let mut b = Client::connect(ClientConfig { epoch: 1, ..cfg(&s, "node", "", 3) }).unwrap();
    assert_eq!(b.fence(2).unwrap(), 5);
    assert_eq!(b.read_from(1).unwrap().len(), 5);
    // A's next append and trim are refused as fenced; B continues.
    assert!(matches!(a.append(6, BS as u32, tx(6, 1)), Err(RemoteError::Fenced { .. })));
    assert!(matches!(a.trim(3), Err(RemoteError::Fenced { .. })));
    b.append(6, BS as u32, tx(60, 1)).unwrap();
    assert_eq!(b.read_from(6).unwrap()[0].2, tx(60, 1));
    // An older epoch cannot fence back.
    assert!(matches!(a.fence(2), Err(RemoteError::Fenced { .. })));
}

#[test]
fn a_full_journal_says_so_until_trimmed() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(&dir.path().join("j"), &["--no-auth", "--quota", "64K"]);
    let mut c = Client::connect(cfg(&s, "q", "", 4)).unwrap();
    let mut tid = 1;
    let err = loop {
        match c.append(tid, BS as u32, tx(tid, 4)) {
            Ok(()) => tid += 1,
            Err(e) => break e,
        }
        assert!(tid < 100);
    };
    assert!(matches!(err, RemoteError::Full { .. }), "{err}");
    assert_eq!(tid, 4, "three transactions of 16 KiB fit 64 KiB");
    c.trim(tid - 1).unwrap();
    c.append(tid, BS as u32, tx(tid, 4)).unwrap();
}

fn remote_opts(s: &Server, mode: &str) -> okeanos::MountOptions {
    okeanos::MountOptions::parse(&format!("data={mode},journal_server={},remote_host=fs-host,remote_ack_timeout=5", s.addr)).unwrap()
}

/// The remote placement end to end: transactions go to the server (nothing to the local
/// journal), a crash recovers them from the server, a clean unmount trims it, and without the
/// server the file system says why it cannot mount.
#[test]
fn a_file_system_journals_to_the_server_and_recovers_from_it() {
    for mode in ["ordered", "data", "wasteless+dmeta"] {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Server::start(&dir.path().join("j"), &["--no-auth"]);
        let img = dir.path().join("img");
        let mk = okeanos::MkfsOptions { journal_blocks: 1024, remote_server: Some(s.addr.clone()), ..Default::default() };
        okeanos::Okeanos::mkfs_file(&img, 64 << 20, &mk).unwrap();
        let fs = okeanos::Okeanos::open(&img, remote_opts(&s, mode)).unwrap();
        let mut expect = Vec::new();
        for k in 0..20u8 {
            let f = fs.create_file(&format!("/f{k}")).unwrap();
            let data = vec![k; 3000 + k as usize * 100];
            f.write_at(0, &data).unwrap();
            f.fsync().unwrap();
            expect.push(data);
        }
        let c = fs.counters();
        assert!(c.commits >= 20, "{mode}: {c:?}");
        // Locally only the journal superblock written at mount (it records the epoch).
        assert!(c.remote_bytes > 20 * 4096, "{mode}: {c:?}");
        assert_eq!(c.journal_bytes - c.remote_bytes, 4096, "{mode}: only the local journal superblock");
        drop(fs); // a crash
        // Offline recovery cannot replay a journal that is on the server: it says so.
        for cmd in ["recover", "fsck"] {
            let o = Command::new(BIN).arg(cmd).arg(&img).output().unwrap();
            assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("journal is on the journal server"), "{mode} {cmd}: {}", String::from_utf8_lossy(&o.stderr));
        }
        let fs = okeanos::Okeanos::open(&img, remote_opts(&s, mode)).unwrap();
        let rep = fs.counters().recovery.expect("recovered");
        assert!(rep.transactions >= 20, "{mode}: {rep:?}");
        for (k, data) in expect.iter().enumerate() {
            assert_eq!(&fs.read_path(&format!("/f{k}")).unwrap(), data, "{mode} /f{k}");
        }
        fs.unmount().unwrap();
        // The clean unmount trimmed the server.
        let mut c = Client::connect(ClientConfig { fs_uuid: okeanos::format::Superblock::decode(&std::fs::read(&img).unwrap()[..512]).unwrap().uuid, ..cfg(&s, "fs-host", "", 0) }).unwrap();
        assert!(c.read_from(0).unwrap().is_empty(), "{mode}");
        assert!(c.journal.epoch >= 2, "{mode}: each mount fenced in a new epoch");
        let o = Command::new(BIN).arg("fsck").arg(&img).output().unwrap();
        assert!(o.status.success(), "{mode}: {}", String::from_utf8_lossy(&o.stdout));
        // Without the server: a clear refusal.
        s.kill9();
        match okeanos::Okeanos::open(&img, remote_opts(&s, mode)) {
            Err(e) => assert!(e.to_string().contains("cannot be mounted without it"), "{mode}: {e}"),
            Ok(_) => panic!("{mode}: mounted without its journal server"),
        }
    }
}

/// The server dies under load: every pending sync completes (within the acknowledgement
/// timeout plus a local flush), the host continues in its local journal, nothing acknowledged
/// is lost, and the file system mounts and recovers without the server.
#[test]
fn a_dead_server_falls_back_to_the_local_journal_and_loses_nothing() {
    // Killed (connections reset at once) and stopped (acknowledgements time out).
    for (mode, how) in [("ordered", "kill"), ("wasteless", "kill"), ("wasteless", "stop")] {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Server::start(&dir.path().join("j"), &["--no-auth"]);
        let img = dir.path().join("img");
        let mk = okeanos::MkfsOptions { journal_blocks: 2048, remote_server: Some(s.addr.clone()), ..Default::default() };
        okeanos::Okeanos::mkfs_file(&img, 64 << 20, &mk).unwrap();
        let opts = okeanos::MountOptions::parse(&format!("data={mode},journal_server={},remote_host=fs-host,remote_ack_timeout=1", s.addr)).unwrap();
        let fs = okeanos::Okeanos::open(&img, opts.clone()).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let slowest = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let (fs, stop, slowest) = (fs.clone(), stop.clone(), slowest.clone());
                std::thread::spawn(move || {
                    let f = fs.create_file(&format!("/w{w}")).unwrap();
                    let mut acked = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) && acked < 5000 {
                        f.append(format!("writer {w} record {acked:06}\n").as_bytes()).unwrap();
                        let t0 = Instant::now();
                        f.fdatasync().unwrap();
                        slowest.fetch_max(t0.elapsed().as_millis() as u64, std::sync::atomic::Ordering::Relaxed);
                        acked += 1;
                    }
                    acked
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        match how {
            "kill" => s.kill9(),
            _ => unsafe {
                libc::kill(s.child.as_ref().unwrap().id() as i32, libc::SIGSTOP);
            },
        }
        std::thread::sleep(Duration::from_millis(2500));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let acked: Vec<u64> = writers.into_iter().map(|t| t.join().unwrap()).collect();
        let c = fs.counters();
        assert_eq!(c.fallbacks, 1, "{mode} {how}: {c:?}");
        assert!(fs.read_only_reason().is_none(), "{mode}: {:?}", fs.read_only_reason());
        // A sync waited at most the acknowledgement timeout plus the local commit.
        let worst = slowest.load(std::sync::atomic::Ordering::Relaxed);
        assert!(worst < 1000 + 2000, "{mode}: a sync took {worst} ms");
        drop(fs); // a crash, in the local journal
        let fs = okeanos::Okeanos::open(&img, opts).unwrap_or_else(|e| panic!("{mode}: mount without the server: {e}"));
        for (w, &n) in acked.iter().enumerate() {
            let text = String::from_utf8(fs.read_path(&format!("/w{w}")).unwrap()).unwrap();
            let want: String = (0..n).map(|k| format!("writer {w} record {k:06}\n")).collect();
            assert!(text.starts_with(&want), "{mode} writer {w}: {} bytes, {n} records acknowledged", text.len());
        }
        let placement = fs.debug_state(|j, _| j.placement().name());
        assert_eq!(placement, "remote, fallen back to the internal journal", "{mode} {how}: the server is gone, the host stays in its local journal");
        fs.unmount().unwrap();
        let o = Command::new(BIN).arg("fsck").arg(&img).output().unwrap();
        assert!(o.status.success(), "{mode}: {}", String::from_utf8_lossy(&o.stdout));
        eprintln!("{mode}, server {how}: {acked:?} records acknowledged, slowest sync {worst} ms");
        // A server answers again (a new one, on the same journals): the next mount returns
        // to it, trimming what it still held, and commits go there.
        drop(s);
        let s2 = Server::start(&dir.path().join("j"), &["--no-auth"]);
        let opts = okeanos::MountOptions::parse(&format!("data={mode},journal_server={},remote_host=fs-host", s2.addr)).unwrap();
        let fs = okeanos::Okeanos::open(&img, opts).unwrap();
        let f = fs.open_file("/w0").unwrap();
        for _ in 0..10 {
            f.append(b"back on the server\n").unwrap();
            f.fdatasync().unwrap();
        }
        drop(f);
        assert_eq!(fs.debug_state(|j, _| j.placement().name()), "remote", "{mode} {how}");
        let c = fs.counters();
        assert_eq!(c.journal_bytes - c.remote_bytes, 4096, "{mode} {how}: commits went to the server (locally only the mount's journal superblock)");
        let last = fs.committed_tid().get();
        let uuid = okeanos::format::Superblock::decode(&std::fs::read(&img).unwrap()[..512]).unwrap().uuid;
        let mut c = Client::connect(ClientConfig { fs_uuid: uuid, ..cfg(&s2, "fs-host", "", 0) }).unwrap();
        let held: Vec<u64> = c.read_from(0).unwrap().iter().map(|t| t.0).collect();
        assert_eq!(held, (last - 9..=last).collect::<Vec<_>>(), "{mode} {how}: the server holds this mount's ten commits, the old ones were trimmed");
        fs.unmount().unwrap();
    }
}

/// Two hosts on one journal (a shared device taken over by a standby): the second mount fences
/// the first, which never completes another sync and turns read-only; the second recovers
/// everything the first had acknowledged.
#[test]
fn a_fenced_host_never_completes_another_sync() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(&dir.path().join("j"), &["--no-auth"]);
    let img = dir.path().join("img");
    let mk = okeanos::MkfsOptions { journal_blocks: 1024, remote_server: Some(s.addr.clone()), ..Default::default() };
    okeanos::Okeanos::mkfs_file(&img, 64 << 20, &mk).unwrap();
    let opts = okeanos::MountOptions::parse(&format!("data=data,journal_server={},remote_host=shared,remote_ack_timeout=2", s.addr)).unwrap();
    let a = okeanos::Okeanos::open(&img, opts.clone()).unwrap();
    let f = a.create_file("/log").unwrap();
    for k in 0..50 {
        f.append(format!("a {k:03}\n").as_bytes()).unwrap();
        f.fdatasync().unwrap();
    }
    // The standby sees the same device (a copy here: the image lock is per kernel).
    let shared = dir.path().join("img-b");
    std::fs::copy(&img, &shared).unwrap();
    let b = okeanos::Okeanos::open(&shared, opts).unwrap();
    let want: String = (0..50).map(|k| format!("a {k:03}\n")).collect();
    assert_eq!(String::from_utf8(b.read_path("/log").unwrap()).unwrap(), want, "the standby recovered what the first host acknowledged");
    // The first host: its next sync fails, and it is read-only from then on.
    f.append(b"after the fence\n").unwrap();
    let e = f.fdatasync().expect_err("a fenced host completed a sync");
    assert!(e.to_string().contains("fenced"), "{e}");
    assert!(a.read_only_reason().is_some_and(|r| r.contains("fenced")), "{:?}", a.read_only_reason());
    assert!(a.create_file("/x").is_err());
    drop(f);
    drop(a);
    // The standby goes on; nothing the first host wrote after the fence is there.
    let g = b.open_file("/log").unwrap();
    g.append(b"b 000\n").unwrap();
    g.fdatasync().unwrap();
    drop(g);
    drop(b); // crash, then recover from the server
    let opts = okeanos::MountOptions::parse(&format!("data=data,journal_server={},remote_host=shared", s.addr)).unwrap();
    let b = okeanos::Okeanos::open(&shared, opts).unwrap();
    assert_eq!(String::from_utf8(b.read_path("/log").unwrap()).unwrap(), format!("{want}b 000\n"));
    b.unmount().unwrap();
}

/// A host that fell back returns to its server while mounted, once a checkpoint has emptied
/// its local journal and the server answers again (on the same address).
#[test]
fn a_host_returns_to_its_server_while_mounted() {
    let dir = tempfile::tempdir().unwrap();
    let jdir = dir.path().join("j");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listen = format!("127.0.0.1:{port}");
    let start = |jdir: &Path| {
        let mut child = Command::new(BIN).args(["journal-server", "--listen", &listen, "--no-auth", "--dir"]).arg(jdir).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert!(line.contains(&listen), "{line}");
        Server { child: Some(child), addr: listen.clone() }
    };
    let mut s = start(&jdir);
    let img = dir.path().join("img");
    let mk = okeanos::MkfsOptions { journal_blocks: 1024, remote_server: Some(listen.clone()), ..Default::default() };
    okeanos::Okeanos::mkfs_file(&img, 64 << 20, &mk).unwrap();
    let opts = okeanos::MountOptions::parse("data=ordered,remote_host=roamer,remote_ack_timeout=1,writeback_period=0.1,expire=0.1").unwrap();
    let fs = okeanos::Okeanos::open(&img, opts.clone()).unwrap();
    let f = fs.create_file("/log").unwrap();
    let mut want = Vec::new();
    let mut write = |f: &okeanos::File, k: usize| {
        let rec = format!("record {k:05}\n");
        f.append(rec.as_bytes()).unwrap();
        f.fdatasync().unwrap();
        want.extend_from_slice(rec.as_bytes());
    };
    for k in 0..20 {
        write(&f, k);
    }
    s.kill9();
    for k in 20..40 {
        write(&f, k);
    }
    assert_eq!(fs.counters().fallbacks, 1);
    assert_ne!(fs.debug_state(|j, _| j.placement().name()), "remote");
    let s2 = start(&jdir);
    let t0 = Instant::now();
    let mut k = 40;
    while fs.debug_state(|j, _| j.placement().name()) != "remote" {
        assert!(t0.elapsed() < Duration::from_secs(30), "did not return to the server");
        write(&f, k);
        k += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = fs.counters();
    for j in 0..10 {
        write(&f, k + j);
    }
    let after = fs.counters();
    assert_eq!(after.journal_bytes - before.journal_bytes, after.remote_bytes - before.remote_bytes, "after the return everything goes to the server");
    drop(f);
    drop(fs); // a crash: recovery reads the server
    let fs = okeanos::Okeanos::open(&img, opts).unwrap();
    assert_eq!(fs.read_path("/log").unwrap(), want);
    fs.unmount().unwrap();
    drop(s2);
    let o = Command::new(BIN).arg("fsck").arg(&img).arg("-n").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
}

/// A self-signed certificate for 127.0.0.1 and localhost, written as PEM: (cert, key).
fn certificate(dir: &Path, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let c = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    let (cert, key) = (dir.join(format!("{name}.pem")), dir.join(format!("{name}.key")));
    std::fs::write(&cert, c.cert.pem()).unwrap();
    std::fs::write(&key, c.key_pair.serialize_pem()).unwrap();
    (cert, key)
}

/// TLS between host and server: appends of every size (1 MiB too, several in flight) read back
/// intact with the HMAC proof still required; a plain host, a host trusting another
/// certificate, a host expecting another name and a TLS host at a plain server each get a
/// clear error and never take the server down; a file system journals over TLS and recovers
/// from the server after a crash.
#[test]
fn tls_between_host_and_server() {
    use okeanos::remote::transport::client_tls;
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = certificate(dir.path(), "server");
    let (other, _) = certificate(dir.path(), "other");
    let sec = secrets(dir.path(), "alpha s3cret-a\nfs-host fs-secret\n");
    let mut s = Server::start(&dir.path().join("j"), &["--secrets", sec.to_str().unwrap(), "--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()]);
    let tls = client_tls(&cert, "127.0.0.1").unwrap();
    let mut c = Client::connect(ClientConfig { tls: Some(tls.clone()), ..cfg(&s, "alpha", "s3cret-a", 1) }).unwrap();
    c.fence(1).unwrap();
    let sizes = [1usize, 2, 256, 3, 1, 17];
    for (i, n) in sizes.iter().enumerate() {
        c.send_append(1 + i as u64, BS as u32, tx(1 + i as u64, *n)).unwrap();
    }
    for i in 0..sizes.len() {
        assert_eq!(c.wait_ack().unwrap(), 1 + i as u64);
    }
    let back = c.read_from(0).unwrap();
    assert_eq!(back.len(), sizes.len());
    for (tid, _, blocks) in &back {
        assert_eq!(blocks, &tx(*tid, sizes[*tid as usize - 1]), "transaction {tid} read back over TLS");
    }
    // The HMAC proof is still required inside TLS.
    assert!(matches!(Client::connect(ClientConfig { tls: Some(tls.clone()), ..cfg(&s, "alpha", "wrong", 1) }), Err(RemoteError::Auth { .. })));
    // A plain host: no CHALLENGE arrives, and it is told why.
    let plain = Client::connect(ClientConfig { timeout: Duration::from_millis(500), ..cfg(&s, "alpha", "s3cret-a", 1) });
    match plain {
        Err(RemoteError::Network { message, .. }) => assert!(message.contains("remote_tls_ca"), "{message}"),
        Err(e) => panic!("plain host: {e}"),
        Ok(_) => panic!("a plain host was served by a TLS server"),
    }
    // Another certificate trusted, or another name expected: the handshake is refused.
    for (ca, name) in [(&other, "127.0.0.1"), (&cert, "journal.example")] {
        match Client::connect(ClientConfig { tls: Some(client_tls(ca, name).unwrap()), ..cfg(&s, "alpha", "s3cret-a", 1) }) {
            Err(RemoteError::Auth { message, .. }) => assert!(message.contains("TLS") && message.contains("certificate"), "{message}"),
            Err(e) => panic!("{name}: {e}"),
            Ok(_) => panic!("a host trusting {} accepted the server as {name}", ca.display()),
        }
    }
    // Garbage instead of a handshake, and a handshake cut off midway: the server stays up.
    for junk in [&b"\x16\x03\x01\xff\xffgarbage"[..], &[0u8; 3000][..], &b"\x16\x03\x01\x00\x40\x01"[..]] {
        let mut t = TcpStream::connect(&s.addr).unwrap();
        t.write_all(junk).unwrap();
        drop(t);
    }
    assert!(s.alive());
    assert!(Client::connect(ClientConfig { tls: Some(tls.clone()), ..cfg(&s, "alpha", "s3cret-a", 1) }).is_ok(), "still serving");
    // A file system over TLS: a crash, then recovery from the server.
    let img = dir.path().join("img");
    let mk = okeanos::MkfsOptions { journal_blocks: 1024, remote_server: Some(s.addr.clone()), ..Default::default() };
    okeanos::Okeanos::mkfs_file(&img, 64 << 20, &mk).unwrap();
    let o = format!("data=data,journal_server={},remote_host=fs-host,remote_secret=fs-secret,remote_tls_ca={}", s.addr, cert.display());
    let fs = okeanos::Okeanos::open(&img, okeanos::MountOptions::parse(&o).unwrap()).unwrap();
    let f = fs.create_file("/log").unwrap();
    let mut want = Vec::new();
    for k in 0..30u8 {
        let rec = vec![k; 700];
        f.append(&rec).unwrap();
        f.fdatasync().unwrap();
        want.extend_from_slice(&rec);
    }
    assert!(fs.counters().remote_bytes > 30 * 4096);
    drop(f);
    drop(fs); // a crash
    let fs = okeanos::Okeanos::open(&img, okeanos::MountOptions::parse(&o).unwrap()).unwrap();
    assert!(fs.counters().recovery.expect("recovered").transactions >= 30);
    assert_eq!(fs.read_path("/log").unwrap(), want);
    fs.unmount().unwrap();
    // A mount option naming a file with no certificate is refused as an option error.
    let bad = dir.path().join("empty.pem");
    std::fs::write(&bad, "").unwrap();
    let e = okeanos::MountOptions::parse(&format!("remote_tls_ca={}", bad.display())).unwrap_err();
    assert!(e.contains("no certificate"), "{e}");
    let summary = s.stop();
    assert!(summary.contains("failed TLS handshakes") && !summary.contains(" 0 failed TLS handshakes"), "{summary}");
    // A TLS host at a plain server: told it is not TLS.
    let s = Server::start(&dir.path().join("p"), &["--no-auth"]);
    match Client::connect(ClientConfig { tls: Some(client_tls(&cert, "127.0.0.1").unwrap()), ..cfg(&s, "alpha", "", 1) }) {
        Err(RemoteError::Auth { message, .. }) => assert!(message.contains("--tls-cert"), "{message}"),
        Err(e) => panic!("TLS host at a plain server: {e}"),
        Ok(_) => panic!("a TLS host talked to a plain server"),
    }
}

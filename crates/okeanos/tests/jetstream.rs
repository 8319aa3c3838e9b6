//! The journal on NATS JetStream (issue 13; docs/REMOTE.md, "JetStream"), against a real
//! 3-node nats-server cluster on 127.0.0.1 that each test starts and stops: a file system
//! journals to the stream and recovers from it; a non-durable stream is refused; damage in the
//! stream is refused; a second host fences the first; the stream leader killed under load
//! loses nothing acknowledged; every server gone makes the host fall back to its local ring;
//! checkpoints keep the stream within its max_bytes.

use okeanos::remote::nats_cluster::Cluster;
use okeanos::remote::jetstream::{part_headers, JetStreamLink, JetStreamOptions};
use okeanos::{MkfsOptions, MountOptions, Okeanos};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn mkfs(img: &Path, urls: &str, journal_blocks: u64) -> [u8; 16] {
    let mk = MkfsOptions { journal_blocks, remote_server: Some(urls.into()), ..Default::default() };
    Okeanos::mkfs_file(img, 64 << 20, &mk).unwrap();
    okeanos::format::Superblock::decode(&std::fs::read(img).unwrap()[..512]).unwrap().uuid
}

fn opts(extra: &str) -> MountOptions {
    MountOptions::parse(extra).unwrap()
}

/// A 3-node cluster and a file system journaling to it (a `journal_blocks` journal, the
/// stream's size): the directories, the cluster, its URLs, the image and its UUID.
struct World {
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    cluster: Cluster,
    urls: String,
    img: std::path::PathBuf,
    uuid: [u8; 16],
}

fn world(journal_blocks: u64) -> World {
    let (dirc, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let cluster = Cluster::start(3, dirc.path()).unwrap();
    let urls = cluster.urls();
    let img = dir.path().join("img");
    let uuid = mkfs(&img, &urls, journal_blocks);
    World { _dirs: (dirc, dir), cluster, urls, img, uuid }
}

/// Stops the writers of [`load`]; what each had acknowledged.
fn stop_load(stop: &AtomicBool, writers: Vec<std::thread::JoinHandle<(String, Vec<u8>)>>) -> Vec<(String, Vec<u8>)> {
    stop.store(true, Ordering::Relaxed);
    writers.into_iter().map(|h| h.join().unwrap()).collect()
}

/// An inspecting connection (epoch 0: it never appends). Its requests may take 30 s: the
/// tests run beside others on two cores, and what they check is the answer, not its speed.
fn inspect(urls: &str, uuid: &[u8; 16]) -> JetStreamLink {
    JetStreamLink::connect(urls, uuid, 0, Duration::from_secs(30), &JetStreamOptions::default()).unwrap()
}

#[test]
fn a_file_system_journals_to_jetstream_and_recovers_from_it() {
    let dirc = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dirc.path()).unwrap();
    let urls = cluster.urls();
    for mode in ["ordered", "data", "wasteless+dmeta"] {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("img");
        let uuid = mkfs(&img, &urls, 1024);
        let o = format!("data={mode},remote_ack_timeout=5");
        let fs = Okeanos::open(&img, opts(&o)).unwrap();
        let mut expect = Vec::new();
        for k in 0..20u8 {
            let f = fs.create_file(&format!("/f{k}")).unwrap();
            let data = vec![k; 3000 + k as usize * 100];
            f.write_at(0, &data).unwrap();
            f.fsync().unwrap();
            expect.push(data);
        }
        let c = fs.counters();
        assert!(c.remote_bytes > 20 * 4096, "{mode}: {c:?}");
        assert_eq!(c.journal_bytes - c.remote_bytes, 4096, "{mode}: only the local journal superblock");
        let report = inspect(&urls, &uuid).report().unwrap();
        assert_eq!(report.replicas, 3, "{mode}");
        assert_eq!(report.max_bytes, 1024 * 4096, "{mode}: the stream holds what the local journal holds");
        assert!(report.leader.is_some(), "{mode}");
        // The mount reads the parts back through an ordered consumer, in batches; what it
        // gets is what a get of each message from the leader gets.
        let link = inspect(&urls, &uuid);
        let streamed = link.stream_parts(report.first_sequence, report.last_sequence).unwrap().expect("the ordered consumer delivered every part");
        assert!(streamed.len() >= 20, "{mode}: {} parts", streamed.len());
        assert!(streamed == link.read_parts_one_by_one(report.first_sequence, report.last_sequence).unwrap(), "{mode}: streamed parts differ from those read one by one");
        drop(fs); // a crash
        let fs = Okeanos::open(&img, opts(&o)).unwrap();
        let rep = fs.counters().recovery.expect("recovered");
        assert!(rep.transactions >= 20, "{mode}: {rep:?}");
        for (k, data) in expect.iter().enumerate() {
            assert_eq!(&fs.read_path(&format!("/f{k}")).unwrap(), data, "{mode} /f{k}");
        }
        fs.unmount().unwrap();
        // The clean unmount purged every transaction; only the last fence is left.
        let r = inspect(&urls, &uuid).report().unwrap();
        assert_eq!(r.messages, 1, "{mode}: {r:?}");
    }
}

#[test]
fn a_stream_that_is_not_durable_is_refused_and_damage_is_refused() {
    let dirc = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(3, dirc.path()).unwrap();
    let urls = cluster.urls();
    let dir = tempfile::tempdir().unwrap();
    // One replica only because the user said so; a later mount without saying so refuses it.
    let img = dir.path().join("r1");
    mkfs(&img, &urls, 1024);
    let fs = Okeanos::open(&img, opts("jetstream_replicas=1")).unwrap();
    fs.unmount().unwrap();
    match Okeanos::open(&img, opts("")) {
        Err(e) => assert!(e.to_string().contains("1 replicas, at least 3") && e.to_string().contains("jetstream_replicas=1"), "{e}"),
        Ok(_) => panic!("a one-replica stream was accepted"),
    }
    // Damage: a part whose payload fails its checksum, then a transaction out of sequence.
    for damage in ["checksum", "gap"] {
        let img = dir.path().join(damage);
        let uuid = mkfs(&img, &urls, 1024);
        let fs = Okeanos::open(&img, opts("data=data")).unwrap();
        let f = fs.create_file("/x").unwrap();
        for k in 0..5u8 {
            f.append(&[k; 500]).unwrap();
            f.fdatasync().unwrap();
        }
        drop(f);
        drop(fs); // a crash: the transactions stay in the stream
        let mut l = inspect(&urls, &uuid);
        let last = okeanos::remote::Link::journal(&l).last_tid;
        let payload = vec![0u8; 4096];
        let mut h = part_headers(last + if damage == "gap" { 2 } else { 1 }, 0, 1, 4096, 0, &payload);
        if damage == "checksum" {
            h.insert("Okeanos-Crc", "00000000");
        }
        l.publish_raw("tx", h, payload).unwrap();
        match Okeanos::open(&img, opts("data=data")) {
            Err(e) => assert!(e.to_string().contains(if damage == "gap" { "gap" } else { "checksum" }), "{damage}: {e}"),
            Ok(_) => panic!("{damage}: a damaged stream was recovered from"),
        }
    }
}

/// A second host takes the stream over (a FENCE with its expected last sequence): the first
/// host's next append is refused by the stream ("wrong last sequence"), it stops and never
/// completes another sync; the second host has everything the first synced.
#[test]
fn a_fenced_host_never_completes_another_sync() {
    let World { _dirs, cluster: _cluster, img: a_img, .. } = world(1024);
    let a = Okeanos::open(&a_img, opts("data=data,remote_ack_timeout=5")).unwrap();
    let f = a.create_file("/log").unwrap();
    let mut synced = Vec::new();
    for k in 0..10u8 {
        f.append(&[k; 300]).unwrap();
        f.fdatasync().unwrap();
        synced.extend_from_slice(&[k; 300]);
    }
    // Host B: the same file system (a copy of the image), mounted elsewhere.
    let b_img = a_img.with_file_name("b");
    std::fs::copy(&a_img, &b_img).unwrap();
    let b = Okeanos::open(&b_img, opts("data=data,remote_ack_timeout=5")).unwrap();
    assert_eq!(b.read_path("/log").unwrap(), synced, "B recovered what A synced");
    for k in 0..3u8 {
        // The first sync finds the fence and stops the host (read-only): later writes are
        // refused at once.
        let _ = f.append(&[100 + k; 300]);
        assert!(f.fdatasync().is_err(), "the fenced host completed a sync ({k})");
    }
    assert_eq!(a.counters().fallbacks, 0, "a fenced host never falls back");
    drop(f);
    drop(a);
    let g = b.create_file("/b").unwrap();
    g.append(b"after").unwrap();
    g.fdatasync().unwrap();
    drop(g);
    b.unmount().unwrap();
    let b = Okeanos::open(&b_img, opts("data=data")).unwrap();
    assert_eq!(b.read_path("/log").unwrap(), synced, "nothing A wrote after the fence");
    b.unmount().unwrap();
}

/// Synced 128-byte appends from `writers` threads until `stop`; each thread's acknowledged
/// records in order.
fn load(fs: &Okeanos, writers: usize, stop: Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<(String, Vec<u8>)>> {
    (0..writers)
        .map(|w| {
            let fs = fs.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let name = format!("/w{w}");
                let f = fs.create_file(&name).unwrap();
                let mut acked = Vec::new();
                let mut k = 0u32;
                while !stop.load(Ordering::Relaxed) && k < 100_000 {
                    let mut rec = [0u8; 128];
                    rec[..4].copy_from_slice(&k.to_le_bytes());
                    rec[4..8].copy_from_slice(&(w as u32).to_le_bytes());
                    if f.append(&rec).is_err() || f.fdatasync().is_err() {
                        break;
                    }
                    acked.extend_from_slice(&rec);
                    k += 1;
                }
                (name, acked)
            })
        })
        .collect()
}

/// Every acknowledged record is in the file, in order (more may follow: written, not yet
/// acknowledged when the crash came).
fn check_acked(fs: &Okeanos, acked: &[(String, Vec<u8>)]) -> usize {
    let mut n = 0;
    for (name, want) in acked {
        let got = fs.read_path(name).unwrap();
        assert!(got.len() >= want.len() && &got[..want.len()] == want.as_slice(), "{name}: {} acknowledged bytes, {} recovered (or other bytes)", want.len(), got.len());
        n += want.len() / 128;
    }
    n
}

/// 100 writers of synced 128-byte records; the stream's leader is SIGKILLed twice (restarted
/// after each election); then a crash. Every acknowledged record is recovered.
#[test]
fn the_leader_killed_under_load_loses_nothing_acknowledged() {
    let World { _dirs, mut cluster, urls, img, uuid } = world(4096);
    // A timeout longer than an election: the host rides through it instead of falling back.
    let fs = Okeanos::open(&img, opts("data=wasteless,dmeta,remote_ack_timeout=15")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writers = load(&fs, 100, stop.clone());
    let watch = inspect(&urls, &uuid);
    let mut kills = Vec::new();
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(1500));
        let leader = watch.report().unwrap().leader.expect("a leader");
        let i = cluster.index_of(&leader);
        let before = fs.counters().syncs;
        let t0 = Instant::now();
        cluster.kill(i);
        // The unavailability window: until syncs complete again.
        while fs.counters().syncs < before + 200 && t0.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(20));
        }
        kills.push((leader, t0.elapsed()));
        cluster.restart(i).unwrap();
        cluster.wait_ready().unwrap();
    }
    std::thread::sleep(Duration::from_millis(1000));
    let acked = stop_load(&stop, writers);
    let total: usize = acked.iter().map(|a| a.1.len() / 128).sum();
    assert!(total > 1000, "{total} records acknowledged");
    let fallbacks = fs.counters().fallbacks;
    assert_eq!(fallbacks, 0, "the host rode through both elections (acknowledgement timeout 15 s)");
    drop(fs); // a crash
    let fs = Okeanos::open(&img, opts("data=wasteless,dmeta,remote_ack_timeout=15")).unwrap();
    let n = check_acked(&fs, &acked);
    fs.unmount().unwrap();
    eprintln!("leader kills {kills:?}: {n} acknowledged records, all recovered; {fallbacks} fallbacks");
}

/// Every server SIGKILLed under load: each pending sync completes within the acknowledgement
/// timeout plus a local commit (the host falls back to its local ring), nothing acknowledged is
/// lost; with the cluster back, a mount recovers from both in order and returns to the stream.
#[test]
fn every_server_gone_falls_back_to_the_local_journal() {
    let World { _dirs, mut cluster, urls, img, uuid } = world(4096);
    let fs = Okeanos::open(&img, opts("data=data,remote_ack_timeout=1")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writers = load(&fs, 16, stop.clone());
    std::thread::sleep(Duration::from_millis(800));
    let slowest = Arc::new(Mutex::new(Duration::ZERO));
    let t0 = Instant::now();
    cluster.kill_all();
    // A probe sync started right after the kill: it completes within the timeout plus a local
    // commit.
    let probe = fs.create_file("/probe").unwrap();
    probe.append(b"probe").unwrap();
    let ts = Instant::now();
    probe.fdatasync().unwrap();
    *slowest.lock().unwrap() = ts.elapsed();
    std::thread::sleep(Duration::from_millis(800));
    let acked = stop_load(&stop, writers);
    assert_eq!(fs.counters().fallbacks, 1, "fell back once");
    let waited = *slowest.lock().unwrap();
    // Bounded, not timed: the sync must not hang on the dead cluster (its latency is a benchmark).
    assert!(waited < Duration::from_secs(30), "a sync waited {waited:?} after the cluster died ({:?} ago)", t0.elapsed());
    drop(probe);
    drop(fs); // a crash, in the local journal
    cluster.restart_all().unwrap();
    // The servers answer; the stream needs its replicas to elect a leader again (bounded).
    let t = Instant::now();
    let ready = loop {
        let up = JetStreamLink::connect(&urls, &uuid, 0, Duration::from_secs(2), &JetStreamOptions::default()).ok().and_then(|l| l.report().ok()).is_some_and(|r| r.leader.is_some());
        if up || t.elapsed() > Duration::from_secs(60) {
            break t.elapsed();
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let fs = Okeanos::open(&img, opts("data=data,remote_ack_timeout=5")).unwrap();
    let n = check_acked(&fs, &acked);
    assert_eq!(fs.read_path("/probe").unwrap(), b"probe");
    fs.unmount().unwrap();
    // Mounted again: back on the stream.
    let fs = Okeanos::open(&img, opts("data=data,remote_ack_timeout=5")).unwrap();
    assert_eq!(fs.debug_state(|j, _| j.placement().name()), "remote");
    let f = fs.create_file("/after").unwrap();
    f.append(b"x").unwrap();
    f.fdatasync().unwrap();
    drop(f);
    assert!(fs.counters().remote_bytes > 0);
    fs.unmount().unwrap();
    let _ = inspect(&urls, &uuid).report().unwrap();
    eprintln!("all servers killed: probe sync took {waited:?}; {n} acknowledged records recovered; the stream had a leader {ready:?} after the restart");
}

/// A mount waits for the cluster to settle, longer than a sync waits: mounted while two of the
/// three servers are down (no quorum, no stream leader) and brought back a few seconds later, a
/// mount with a 1 s acknowledgement timeout still takes the journal over and recovers it. (So
/// does a first mount whose stream was created moments ago and has not reached every server.)
#[test]
fn a_mount_waits_for_the_cluster_to_settle() {
    let World { _dirs, mut cluster, urls: _, img, uuid: _ } = world(1024);
    let fs = Okeanos::open(&img, opts("data=data,remote_ack_timeout=1")).unwrap();
    let f = fs.create_file("/before").unwrap();
    f.append(b"acknowledged").unwrap();
    f.fdatasync().unwrap();
    drop(f);
    drop(fs); // a crash: the transaction is only on the stream
    cluster.kill(1);
    cluster.kill(2);
    let back_after = Duration::from_secs(4);
    let (mounted, took) = std::thread::scope(|s| {
        let t0 = Instant::now();
        let mount = s.spawn(move || (Okeanos::open(&img, opts("data=data,remote_ack_timeout=1")), t0.elapsed()));
        std::thread::sleep(back_after);
        cluster.restart(1).unwrap();
        cluster.restart(2).unwrap();
        mount.join().unwrap()
    });
    let fs = mounted.unwrap_or_else(|e| panic!("a mount during an election failed after {took:?}: {e}"));
    assert!(took >= back_after, "the mount waited for the servers to come back ({took:?})");
    assert_eq!(fs.debug_state(|j, _| j.placement().name()), "remote", "not fallen back");
    assert_eq!(fs.read_path("/before").unwrap(), b"acknowledged");
    fs.unmount().unwrap();
    eprintln!("mounted {took:?} after two of three servers went down ({back_after:?} until they came back)");
}

/// Checkpoints purge the stream: under steady synced writes of a journal-sized volume many
/// times over, the stream never goes past max_bytes and no append is refused as full.
#[test]
fn checkpoints_keep_the_stream_within_max_bytes() {
    let World { _dirs, cluster: _cluster, urls, img, uuid } = world(512); // a 2 MiB journal and stream
    let fs = Okeanos::open(&img, opts("data=data,remote_ack_timeout=5")).unwrap();
    let watch = inspect(&urls, &uuid);
    let f = fs.create_file("/big").unwrap();
    let mut most = 0;
    for k in 0..600u32 {
        f.append(&[k as u8; 8192]).unwrap(); // 600 x 8 KiB journaled twice over: 5 MiB in all
        f.fdatasync().unwrap();
        if k % 50 == 0 {
            let r = watch.report().unwrap();
            assert!(r.bytes as i64 <= r.max_bytes, "{r:?}");
            most = most.max(r.bytes);
        }
    }
    assert_eq!(fs.counters().fallbacks, 0, "never full, never fell back");
    drop(f);
    fs.unmount().unwrap();
    eprintln!("the stream held at most {most} of {} bytes", 512 * 4096);
}

/// NATS security as NATS users have it: the cluster requires an nkey user and TLS; a mount
/// without the nkey is refused as an authentication error (not a network one), and with the
/// seed file and the CA it journals and recovers.
#[test]
fn nkey_authentication_and_tls_to_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let user = nkeys::KeyPair::new_user();
    let seed = dir.path().join("user.nk");
    std::fs::write(&seed, user.seed().unwrap()).unwrap();
    let c = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, c.cert.pem()).unwrap();
    std::fs::write(&key, c.key_pair.serialize_pem()).unwrap();
    let extra = format!("authorization {{ users: [ {{ nkey: \"{}\" }} ] }}\ntls {{ cert_file: \"{}\", key_file: \"{}\" }}\n", user.public_key(), cert.display(), key.display());
    let cluster = Cluster::start_configured(3, &dir.path().join("nats"), true, &extra).unwrap();
    let urls = cluster.urls();
    let img = dir.path().join("img");
    mkfs(&img, &urls, 1024);
    let secured = format!("data=data,jetstream_nkey={},jetstream_tls_ca={}", seed.display(), cert.display());
    // Without the nkey: an authentication error that names the options.
    match Okeanos::open(&img, opts(&format!("data=data,jetstream_tls_ca={}", cert.display()))) {
        Err(e) => assert!(e.to_string().contains("jetstream_nkey="), "{e}"),
        Ok(_) => panic!("mounted without the nkey"),
    }
    let fs = Okeanos::open(&img, opts(&secured)).unwrap();
    let f = fs.create_file("/s").unwrap();
    f.append(b"secured").unwrap();
    f.fdatasync().unwrap();
    drop(f);
    assert!(fs.counters().remote_bytes > 0);
    drop(fs); // a crash
    let fs = Okeanos::open(&img, opts(&secured)).unwrap();
    assert_eq!(fs.read_path("/s").unwrap(), b"secured");
    fs.unmount().unwrap();
}

//! Crash tests of the remote placement (docs/DESIGN.md sections 3 and 5): the host's devices are
//! recorded, the journal server (an in-memory stand-in) records when it acknowledged each
//! append and completed each trim on the same clock, and every crash state combines a state of
//! the host's devices with what the server held durably then — every acknowledged append, with
//! and without the one in flight ("acknowledged or not"). Each is recovered (from the server's
//! log and the local journal), checked against the content policy's guarantee and fsck. The
//! canary commits without sending and must be caught.

mod common;
use common::*;
use okeanos::journal::content::ContentConfig;
use okeanos::remote::memory::{MemLog, MemServer};
use okeanos::remote::{Connector, Link};
use okeanos_sim::check::{check, History};
use okeanos::{CrashRecorder, Device, MemDevice, MkfsOptions, MountOptions, Okeanos};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

const STREAMS: usize = 3;

fn connector(log: Arc<Mutex<MemLog>>, recorder: Option<Arc<CrashRecorder>>) -> Connector {
    Connector(Arc::new(move |_| Ok(Box::new(MemServer::new(log.clone(), recorder.clone())) as Box<dyn Link>)))
}

fn opts(cfg: ContentConfig, c: Connector) -> MountOptions {
    let mut o = MountOptions::default().content_config(cfg);
    o.remote_connector = Some(c);
    o.remote_host = Some("crash-host".into());
    o
}

/// The crash tests' workload: STREAMS files, `ops` appends of mixed sizes to random streams,
/// three in four synced, each recorded in a [`History`] on the recorder's clock. `before(k)`
/// runs before operation k.
fn workload(fs: &Okeanos, recorder: &CrashRecorder, ops: usize, seed: u64, mut before: impl FnMut(usize)) -> BTreeMap<String, History> {
    let mut files: BTreeMap<String, History> = BTreeMap::new();
    let mut handles = Vec::new();
    for s in 0..STREAMS {
        let name = format!("/stream{s}");
        let at = recorder.event_count();
        handles.push(fs.create_file(&name).unwrap());
        files.insert(name, History::new(at));
    }
    let mut rng = seed | 1;
    for k in 0..ops {
        before(k);
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let s = (rng % STREAMS as u64) as usize;
        let name = format!("/stream{s}");
        let data = record(s, k, [100, 700, 3000, 4096, 6000][((rng >> 16) % 5) as usize]);
        let at = recorder.event_count();
        handles[s].append(&data).unwrap();
        files.get_mut(&name).unwrap().appended(at, &data);
        if (rng >> 24) % 4 != 0 {
            handles[s].fdatasync().unwrap();
            files.get_mut(&name).unwrap().synced(recorder.event_count());
        }
    }
    files
}

/// Returns (crash states checked, violations).
fn crash_test(policy: &str, canary: bool) -> (usize, Vec<String>) {
    crash_test_with(policy, canary, MemLog { quota_bytes: 256 * 4096, ..Default::default() }, None)
}

/// With `revive_at`, the dead server answers again from that operation on, and the host
/// (checkpointing quickly) returns to it while mounted.
fn crash_test_with(policy: &str, canary: bool, server: MemLog, revive_at: Option<usize>) -> (usize, Vec<String>) {
    // `POLICY/fresh`: wasteless with `fresh_blocks=in_place`; `POLICY/fresh-late`: its canary,
    // the new blocks written after the commit.
    let late = policy.ends_with("/fresh-late");
    let fresh = late || policy.ends_with("/fresh");
    let cfg = ContentConfig { fresh_in_place: fresh, ..ContentConfig::parse(policy.trim_end_matches("/fresh-late").trim_end_matches("/fresh")).unwrap() };
    let base = MemDevice::new(8 * MB);
    Okeanos::mkfs(&base, None, &MkfsOptions { journal_blocks: 512, remote_server: Some("memory:1".into()), ..Default::default() }).unwrap();
    let recorder = CrashRecorder::new();
    let dev = Arc::new(recorder.device("fs", base.snapshot()));
    let dies = server.die_after.is_some();
    let log = Arc::new(Mutex::new(server));
    let mut o = opts(cfg, connector(log.clone(), Some(recorder.clone())));
    o.faults.skip_remote_append = canary;
    o.faults.ordered_after_commit = late;
    if revive_at.is_some() {
        o.writeback_period = std::time::Duration::from_millis(20);
        o.expire_period = Some(std::time::Duration::from_millis(20));
    }
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o).unwrap();
    let files = workload(&fs, &recorder, 240, 0x5eed, |k| {
        if revive_at == Some(k) {
            log.lock().unwrap().die_after = None;
            // Long enough for a checkpoint to empty the local journal and a return to run.
            std::thread::sleep(std::time::Duration::from_millis(2500));
        }
    });
    let c = fs.counters();
    if fresh {
        assert!(c.commit_in_place_blocks > 0, "{policy}: no new block went in place");
        eprintln!("{policy}: {} new blocks in place", c.commit_in_place_blocks);
    }
    if cfg.dmeta && !canary {
        // The server holds fast commits too, spans among them (the 6,000-byte appends): the
        // crash states below must include them.
        assert!(c.fast_commits > 0 && c.fast_spans > 0, "{policy}: no fast commit ({}) or span ({}) sent to the server", c.fast_commits, c.fast_spans);
        assert!(c.inode_notes > 0, "{policy}: no inode note sent to the server");
        eprintln!("{policy}: {} fast commits, {} of them spans, {} inode notes", c.fast_commits, c.fast_spans, c.inode_notes);
    }
    let trims = log.lock().unwrap().trims.len();
    assert!(canary || dies || trims > 2, "checkpoints trimmed the server during the run ({trims})");
    assert_eq!(fs.counters().fallbacks, dies as u64, "the host fell back when its server died");
    if revive_at.is_some() {
        assert_eq!(fs.debug_state(|j, _| j.placement().name()), "remote", "the host returned to its server while mounted");
    }
    drop(fs); // the crash at the end
    let (mut states, mut violations) = (0, Vec::new());
    let full = log.lock().unwrap().clone();
    for k in 0..=recorder.event_count() {
        for st in recorder.states(k, 2, 1, k as u64) {
            for in_flight in [false, true] {
                states += 1;
                let server = Arc::new(Mutex::new(full.at(k, in_flight)));
                // Each check gets its own image (recovery writes to it).
                let dev: Arc<dyn Device> = recorder.build_devices(&st).remove(0);
                let r = (|| -> Result<(), String> {
                    let fs = Okeanos::mount(dev.clone(), None, opts(cfg, connector(server, None))).map_err(|e| format!("mount: {e}"))?;
                    check(cfg.mode, &files, &[], k, &fs)?;
                    fs.unmount().map_err(|e| format!("unmount: {e}"))?;
                    let f = okeanos::fsck(dev.clone(), None);
                    if !f.is_clean() {
                        return Err(format!("fsck: {:?}", f.problems));
                    }
                    Ok(())
                })();
                if let Err(e) = r {
                    violations.push(format!("{policy} {} in_flight={in_flight} at event {k}: {e}", st.label));
                }
            }
        }
    }
    (states, violations)
}

#[test]
fn remote_crash_states_keep_every_guarantee() {
    for policy in ["writeback", "ordered", "data", "wasteless", "wasteless+dmeta", "selective", "selective+dmeta"] {
        let (states, v) = crash_test(policy, false);
        assert!(states > 300, "{policy}: {states} states");
        assert!(v.is_empty(), "{} violations in {states} states, first: {:#?}", v.len(), &v[..v.len().min(3)]);
        eprintln!("{policy}: {states} crash states (host device states x server acknowledged or not), no violation");
    }
}

/// Wasteless with `fresh_blocks=in_place` on the remote journal: whole new blocks go home on
/// the host's disk, flushed before the commit is sent (docs/JOURNALING.md, "New blocks in
/// place"); every crash state of the host's device, with the server's acknowledgement or
/// without it, keeps every synced write whole and every write call atomic; with the blocks
/// written after the commit instead, some state must not.
#[test]
fn remote_crash_states_wasteless_fresh_blocks_in_place() {
    let (states, v) = crash_test("wasteless+dmeta/fresh", false);
    assert!(states > 300, "{states} states");
    assert!(v.is_empty(), "{} violations in {states} states, first: {:#?}", v.len(), &v[..v.len().min(3)]);
    // Its canary: the new blocks written after the commit must fail the same checks.
    let (states, v) = crash_test("wasteless+dmeta/fresh-late", false);
    assert!(!v.is_empty(), "new blocks written after their commit went unnoticed in {states} crash states");
    eprintln!("canary: {} of {states} crash states caught", v.len());
}

#[test]
fn canary_commit_without_the_server_is_caught() {
    let (states, v) = crash_test("data", true);
    assert!(!v.is_empty(), "committing without sending went unnoticed in {states} crash states");
    eprintln!("canary: {} violations in {states} crash states", v.len());
}

/// The server dies in the middle of the run: the host falls back to its local journal
/// (checkpoint everything, then the failed transaction in the ring with the superblock saying
/// so). Every crash state before, during and after the switch recovers with the guarantee.
#[test]
fn crash_states_through_a_fallback_keep_every_guarantee() {
    for policy in ["ordered", "data", "wasteless+dmeta"] {
        let mut server = MemLog::dies_after(40);
        server.quota_bytes = 300 * 4096;
        let (states, v) = crash_test_with(policy, false, server, None);
        assert!(states > 300, "{policy}: {states} states");
        assert!(v.is_empty(), "{} violations in {states} states, first: {:#?}", v.len(), &v[..v.len().min(3)]);
        eprintln!("{policy} with a fallback: {states} crash states, no violation");
    }
}

/// A host that fell back returns to its server at the next mount: it records a new epoch,
/// FENCEs, TRIMs, then records "remote". A crash at any event of that mount (and a server that
/// did or did not see the trim) leaves a file system that mounts, keeps every synced byte and
/// passes fsck.
#[test]
fn crash_states_of_the_return_to_the_server() {
    let cfg = ContentConfig::parse("ordered").unwrap();
    let base = MemDevice::new(8 * MB);
    Okeanos::mkfs(&base, None, &MkfsOptions { journal_blocks: 512, remote_server: Some("memory:1".into()), ..Default::default() }).unwrap();
    // A run whose server dies: the host falls back, syncs more, unmounts cleanly (local).
    let dev = Arc::new(MemDevice::from_bytes(base.snapshot()));
    let server = Arc::new(Mutex::new(MemLog { die_after: Some(10), ..Default::default() }));
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, opts(cfg, connector(server.clone(), None))).unwrap();
    let f = fs.create_file("/log").unwrap();
    let mut want = Vec::new();
    for k in 0..30 {
        let rec = record(5, k, 300);
        f.append(&rec).unwrap();
        f.fdatasync().unwrap();
        want.extend_from_slice(&rec);
    }
    drop(f);
    assert_eq!(fs.counters().fallbacks, 1);
    fs.unmount().unwrap();
    // The server is back (holding what it had before it died); record the returning mount.
    let back = { let mut l = server.lock().unwrap().clone(); l.die_after = None; l };
    let recorder = CrashRecorder::new();
    let rdev = Arc::new(recorder.device("fs", dev.snapshot()));
    let log = Arc::new(Mutex::new(back.clone()));
    let fs = Okeanos::mount(rdev as Arc<dyn Device>, None, opts(cfg, connector(log.clone(), Some(recorder.clone())))).unwrap();
    assert_eq!(fs.debug_state(|j, _| j.placement().name()), "remote", "the mount returned to the server");
    fs.unmount().unwrap();
    let trimmed_at = log.lock().unwrap().trims.first().map(|t| t.0).expect("the return trimmed the server");
    let mut states = 0;
    for k in 0..=recorder.event_count() {
        for st in recorder.states(k, 2, 1, k as u64) {
            let dev: Arc<dyn Device> = recorder.build_devices(&st).remove(0);
            // Before the trim completed the server still holds its old transactions.
            let server = if k < trimmed_at { back.clone() } else { MemLog { epoch: back.epoch + 1, ..Default::default() } };
            let fs = Okeanos::mount(dev.clone(), None, opts(cfg, connector(Arc::new(Mutex::new(server)), None))).unwrap_or_else(|e| panic!("{} at event {k}: {e}", st.label));
            let got = fs.read_path("/log").unwrap();
            assert!(got == want, "{} at event {k}: /log has {} bytes, {} synced (or other bytes)", st.label, got.len(), want.len());
            fs.unmount().unwrap();
            let r = okeanos::fsck(dev, None);
            assert!(r.is_clean(), "{} at event {k}: {:?}", st.label, r.problems);
            states += 1;
        }
    }
    assert!(states > 10, "{states}");
    eprintln!("the return to the server: {states} crash states, no violation");
}

/// The server dies, the host falls back; the server answers again, a checkpoint empties the
/// local journal and the host returns while mounted (new epoch recorded, reconnect, FENCE,
/// TRIM, "remote" recorded), then commits to the server again. Every crash state of the whole
/// run recovers with the guarantee.
#[test]
fn crash_states_through_a_fallback_and_a_return_while_mounted() {
    let mut server = MemLog::dies_after(30);
    server.quota_bytes = 300 * 4096;
    let (states, v) = crash_test_with("data", false, server, Some(120));
    assert!(states > 300, "{states} states");
    assert!(v.is_empty(), "{} violations in {states} states, first: {:#?}", v.len(), &v[..v.len().min(3)]);
    eprintln!("data through a fallback and a return: {states} crash states, no violation");
}

// ---------------------------------------------------------------------------------------------
// The server's own flushes: its real store on recorded devices, in the host's recording.

use okeanos::device::CrashEvent;
use okeanos::remote::memory::StoreLink;
use okeanos::remote::store::medium::DeviceMedium;
use okeanos::remote::store::Store;

const SERVER_LOG: u64 = 2 * MB;

fn store_connector(store: Arc<Mutex<Store>>) -> Connector {
    Connector(Arc::new(move |cfg| Ok(Box::new(StoreLink::new(store.clone(), cfg.epoch)) as Box<dyn Link>)))
}

/// For each device, how far its writes among the first `upto` events reach: the length its
/// file had (what the server's file system keeps in the inode).
fn extents(events: &[CrashEvent], upto: usize, devs: usize) -> Vec<u64> {
    let mut lens = vec![0u64; devs];
    for e in &events[..upto] {
        if let CrashEvent::Write { dev, offset, data } = e {
            lens[*dev] = lens[*dev].max(offset + data.len() as u64);
        }
    }
    lens
}

/// The host's device and the server's three files (state, log.0, log.1) in one recording:
/// crash states at every write and flush of either, each unflushed write of either kept, lost
/// or torn. The server's store is reopened from its images (it must open: a crash never damages
/// it), then the host recovers from it and its local journal, and the guarantee and fsck are
/// checked. Returns (states, violations).
fn crash_test_with_server(policy: &str, canary: bool) -> (usize, Vec<String>, bool) {
    let cfg = ContentConfig::parse(policy).unwrap();
    let base = MemDevice::new(8 * MB);
    Okeanos::mkfs(&base, None, &MkfsOptions { journal_blocks: 512, remote_server: Some("store:1".into()), ..Default::default() }).unwrap();
    let recorder = CrashRecorder::new();
    let dev = Arc::new(recorder.device("fs", base.snapshot()));
    let server_devs: [Arc<dyn Device>; 3] = [
        Arc::new(recorder.device("state", vec![0; 8192])),
        Arc::new(recorder.device("log.0", vec![0; SERVER_LOG as usize])),
        Arc::new(recorder.device("log.1", vec![0; SERVER_LOG as usize])),
    ];
    let quota = 300 * 4096;
    let mut store = Store::open_on(Box::new(DeviceMedium::new(server_devs, [0; 3])), quota).unwrap();
    store.compact_min = 64 << 10;
    store.fault_skip_sync = canary;
    let store = Arc::new(Mutex::new(store));
    let mut o = opts(cfg, store_connector(store.clone()));
    o.writeback_period = std::time::Duration::from_millis(50);
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o).unwrap();
    let files = workload(&fs, &recorder, 90, 0xfeed, |_| {});
    drop(fs); // the crash at the end
    let events = recorder.events();
    let server_flushes = events.iter().filter(|e| matches!(e, CrashEvent::Flush { dev } if *dev > 0)).count();
    assert!(canary || server_flushes > 50, "the server synced ({server_flushes} flushes)");
    let compacted = events.iter().any(|e| matches!(e, CrashEvent::Write { dev: 3, .. }));
    let (mut states, mut violations) = (0, Vec::new());
    for k in 0..=events.len() {
        let lens = extents(&events, k, 4);
        for st in recorder.states(k, 2, 1, k as u64) {
            states += 1;
            let mut images = recorder.build_devices(&st).into_iter();
            let host: Arc<dyn Device> = images.next().unwrap();
            let server: Vec<Arc<dyn Device>> = images.map(|i| i as Arc<dyn Device>).collect();
            let r = (|| -> Result<(), String> {
                let medium = DeviceMedium::new([server[0].clone(), server[1].clone(), server[2].clone()], [lens[1], lens[2], lens[3]]);
                let store = Store::open_on(Box::new(medium), quota).map_err(|e| format!("the server's store: {e}"))?;
                let fs = Okeanos::mount(host.clone(), None, opts(cfg, store_connector(Arc::new(Mutex::new(store))))).map_err(|e| format!("mount: {e}"))?;
                check(cfg.mode, &files, &[], k, &fs)?;
                fs.unmount().map_err(|e| format!("unmount: {e}"))?;
                let f = okeanos::fsck(host.clone(), None);
                if !f.is_clean() {
                    return Err(format!("fsck: {:?}", f.problems));
                }
                Ok(())
            })();
            if let Err(e) = r {
                violations.push(format!("{policy} {} at event {k}: {e}", st.label));
            }
        }
    }
    (states, violations, compacted)
}

#[test]
fn crash_states_of_host_and_server_together_keep_every_guarantee() {
    for policy in ["ordered", "data", "wasteless+dmeta"] {
        let (states, v, compacted) = crash_test_with_server(policy, false);
        assert!(states > 1000, "{policy}: {states} states");
        assert!(compacted || policy != "data", "the server compacted into its second log during the data-mode run");
        assert!(v.is_empty(), "{} violations in {states} states, first: {:#?}", v.len(), &v[..v.len().min(3)]);
        eprintln!("{policy}: {states} crash states of the host's device and the server's files, no violation");
    }
}

/// A server that acknowledges before its fdatasync must be caught.
#[test]
fn canary_server_acknowledging_before_its_sync_is_caught() {
    let (states, v, _) = crash_test_with_server("data", true);
    assert!(!v.is_empty(), "acknowledging unsynced appends went unnoticed in {states} crash states");
    eprintln!("server canary: {} violations in {states} crash states, first: {}", v.len(), v[0]);
}

/// A server that fails a checkpoint's TRIM (it died, or hiccuped, after the home writes were
/// flushed) must not stop the host: the checkpoint is complete locally, syncs go on, a later
/// TRIM covers what is left, and a crash loses nothing synced.
#[test]
fn a_failed_trim_does_not_stop_the_host() {
    let base = MemDevice::new(8 * MB);
    Okeanos::mkfs(&base, None, &MkfsOptions { journal_blocks: 512, remote_server: Some("memory:1".into()), ..Default::default() }).unwrap();
    let dev = Arc::new(MemDevice::from_bytes(base.snapshot()));
    let log = Arc::new(Mutex::new(MemLog { fail_trims: true, ..Default::default() }));
    let cfg = ContentConfig::parse("data").unwrap();
    let mut o = opts(cfg, connector(log.clone(), None));
    o.writeback_period = std::time::Duration::from_millis(20);
    o.expire_period = Some(std::time::Duration::from_millis(20));
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o).unwrap();
    let f = fs.create_file("/log").unwrap();
    let mut want = Vec::new();
    let checkpoint = |fs: &Okeanos| {
        let (before, t0) = (fs.counters().checkpoints, std::time::Instant::now());
        while fs.counters().checkpoints == before && t0.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(fs.counters().checkpoints > before, "a checkpoint ran");
    };
    for k in 0..40 {
        let rec = record(1, k, 500);
        f.append(&rec).unwrap();
        f.fdatasync().unwrap();
        want.extend_from_slice(&rec);
        if k == 10 {
            checkpoint(&fs); // its TRIM fails
        }
        if k == 30 {
            log.lock().unwrap().fail_trims = false;
            checkpoint(&fs); // this TRIM covers everything checkpointed so far
        }
    }
    assert_eq!(fs.counters().fallbacks, 0, "the server answered appends all along");
    assert!(!log.lock().unwrap().trims.is_empty(), "a later trim went through");
    drop(f);
    drop(fs); // a crash
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, opts(cfg, connector(log.clone(), None))).unwrap();
    assert_eq!(fs.read_path("/log").unwrap(), want);
    fs.unmount().unwrap();
}

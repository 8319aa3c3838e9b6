//! The simulator: it runs the engine's own code (the same image, byte for byte, as the real
//! runtime), it is deterministic, and its crash fuzzer finds the canary's violations and
//! none without it.

#[path = "../../okeanos/tests/common.rs"]
mod common;
use common::*;
use okeanos::journal::content::ContentConfig;
use okeanos_sim::clock::FrozenWallClock;
use okeanos_sim::world::{World, WorldConfig};
use okeanos::models as model;
use okeanos_sim::{crashfuzz, multistream};
use okeanos::workload::{Multistream, Rate, SyncKind};
use okeanos::{Device, FileDevice, MemDevice, MountOptions, Okeanos};
use std::sync::Arc;
use std::time::Duration;

const WALL: i64 = 1_750_000_000_000_000_000;

fn world_cfg(cfg: ContentConfig, external: bool) -> WorldConfig {
    WorldConfig {
        fs_bytes: 64 * MB,
        external_journal_blocks: external.then_some(2048),
        journal_blocks: 2048,
        fs_model: model::preset("cheetah15k").unwrap(),
        journal_model: external.then(|| model::preset("cheetah15k").unwrap()),
        mount: MountOptions::default().content_config(cfg),
        wall_origin: WALL,
        frozen_wall: true,
        remote: None,
        nvm: None,
        journal_at: None,
        timed_reads: None,
    }
}

/// The workload both runtimes run: files created, appended and overwritten with syncs.
const FILES: usize = 3;
fn op(k: usize) -> (usize, usize, bool) {
    // (file, length, overwrite at 0 instead of append)
    (k % FILES, [128, 1000, 4096, 6000, 77][k % 5], k % 7 == 3)
}

#[test]
fn the_simulator_writes_what_the_real_runtime_writes() {
    for mode in ["ordered", "data", "wasteless+dmeta", "selective"] {
        let cfg = ContentConfig::parse(mode).unwrap();
        let base = mem_fs(64 * MB, 2048).snapshot();
        // The real runtime: file device, journal thread, real monotonic time, frozen wall time.
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("real.okfs");
        std::fs::write(&img, &base).unwrap();
        let dev: Arc<dyn Device> = Arc::new(FileDevice::open(&img).unwrap());
        let clock = Arc::new(FrozenWallClock { real: Default::default(), wall: WALL });
        let fs = Okeanos::mount_with_clock(dev, None, MountOptions::default().content_config(cfg), clock).unwrap();
        let files: Vec<_> = (0..FILES).map(|i| fs.create_file(&format!("/f{i}")).unwrap()).collect();
        for k in 0..40 {
            let (f, len, ow) = op(k);
            let data = record(f, k, len);
            if ow { files[f].write_at(0, &data).unwrap(); } else { files[f].append(&data).unwrap(); }
            files[f].fsync().unwrap();
        }
        drop(files);
        let probe = fs.clone();
        fs.unmount().unwrap();
        let real = probe.counters();
        let real_img = std::fs::read(&img).unwrap();

        // The simulator: in-memory device, journal driven step by step, virtual time.
        let mdev: Arc<dyn Device> = Arc::new(MemDevice::from_bytes(base));
        let mut w = World::mount(mdev.clone(), None, world_cfg(cfg, false)).unwrap();
        let root = w.fs.root();
        let inos: Vec<u32> = (0..FILES).map(|i| w.settle(|fs| fs.create(root, format!("f{i}").as_bytes(), 0o644)).unwrap().ino).collect();
        let mut sizes = [0u64; FILES];
        for k in 0..40 {
            let (f, len, ow) = op(k);
            let data = record(f, k, len);
            let off = if ow { 0 } else { sizes[f] };
            w.settle(|fs| fs.write(inos[f], off, &data)).unwrap();
            sizes[f] = sizes[f].max(off + len as u64);
            if let Some(tid) = w.fs.sync_target(inos[f], false) {
                w.kick();
                while w.fs.committed_tid() < tid {
                    assert!(w.step(u64::MAX, &mut |_, _| {}), "the journal stalled");
                }
            }
            w.fs.record_sync(0); // a sync, as the real fsync counts it
        }
        let sim_fs = w.fs.clone();
        sim_fs.unmount().unwrap();
        let sim = w.fs.counters();
        let mut sim_img = vec![0u8; mdev.len_bytes() as usize];
        mdev.read_at(0, &mut sim_img).unwrap();

        for (name, a, b) in [
            ("descriptor", &real.descriptor, &sim.descriptor),
            ("commit", &real.commit, &sim.commit),
            ("revoke", &real.revoke, &sim.revoke),
            ("multiwrite", &real.multiwrite, &sim.multiwrite),
            ("journal data", &real.journal_data, &sim.journal_data),
            ("journal meta", &real.journal_meta, &sim.journal_meta),
            ("journal super", &real.journal_super, &sim.journal_super),
            ("final data", &real.final_data, &sim.final_data),
            ("final meta", &real.final_meta, &sim.final_meta),
        ] {
            assert_eq!((a.blocks, a.bytes), (b.blocks, b.bytes), "{mode}: {name} blocks and bytes differ between the real runtime and the simulator");
        }
        assert_eq!(real.commits, sim.commits, "{mode}: commits");
        let first_diff = real_img.iter().zip(&sim_img).position(|(a, b)| a != b);
        assert!(first_diff.is_none(), "{mode}: images differ first at byte {:?} (block {:?})", first_diff, first_diff.map(|d| d / 4096));
    }
}

fn small_run(seed: u64) -> multistream::Outcome {
    let w = World::new(world_cfg(ContentConfig::parse("wasteless").unwrap(), true), &Default::default()).unwrap();
    let spec = Multistream { streams: 50, size: 128, rate: Rate::Bits(1e4), sync: SyncKind::Fdatasync, sync_every: 1, duration: Duration::from_secs(5) };
    multistream::run(w, &spec, seed).unwrap()
}

#[test]
fn the_same_seed_gives_the_same_results_bit_for_bit() {
    let (a, b) = (small_run(7), small_run(7));
    assert!(a.writes > 1000, "the workload ran: {} writes", a.writes);
    assert_eq!(format!("{:?}", a.during), format!("{:?}", b.during));
    assert_eq!(format!("{:?}", a.after), format!("{:?}", b.after));
    assert_eq!(a.virtual_s.to_bits(), b.virtual_s.to_bits());
    // And a different seed (other stream phases) gives a different run.
    let c = small_run(8);
    assert_ne!(format!("{:?}", a.during.sync_latency), format!("{:?}", c.during.sync_latency));
}

#[test]
fn crash_fuzzing_finds_nothing_and_the_canary_fails_it() {
    let modes: Vec<ContentConfig> = crashfuzz::ALL.iter().map(|m| ContentConfig::parse(m).unwrap()).collect();
    let mut states = 0;
    for seed in 0..60 {
        let r = crashfuzz::run_seed(seed, &modes, 6, false, None).unwrap();
        assert!(r.violations.is_empty(), "{:?}", r.violations);
        states += r.states;
    }
    assert_eq!(states, 360);
    let caught = (0..60).map(|seed| crashfuzz::run_seed(seed, &modes, 6, true, None).unwrap().violations.len()).sum::<usize>();
    assert!(caught > 0, "skipping the commit flush must produce violations");
}

/// The fuzzer on the placements a seed does not draw (nvm, remote, replicated): nothing found,
/// and each placement's own canary (the fence before the NVM commit word; the append on the
/// server) is. Every run on the named placement (its report says so) and its crash states
/// build the NVM and the server's log at the crash; a quarter of the remote and replicated
/// runs lose their server mid-run, and a third of the replicated ones lose their leader.
#[test]
fn crash_fuzzing_on_nvm_remote_and_replicated_finds_nothing_and_their_canaries_fail_it() {
    use crashfuzz::FuzzJournal;
    let modes: Vec<ContentConfig> = crashfuzz::ALL.iter().map(|m| ContentConfig::parse(m).unwrap()).collect();
    for (journal, seeds) in [(FuzzJournal::Nvm, 60), (FuzzJournal::Remote, 30), (FuzzJournal::Replicated, 30)] {
        let (mut states, mut fallbacks) = (0, 0);
        for seed in 0..seeds {
            let r = crashfuzz::run_seed(seed, &modes, 8, false, Some(journal)).unwrap();
            assert_eq!(r.journal, journal.name());
            assert!(r.violations.is_empty(), "{}: {:?}", journal.name(), r.violations);
            states += r.states;
            fallbacks += r.fallbacks;
        }
        assert_eq!(states, 8 * seeds as usize);
        // Some remote runs lose their server and fall back; the crash states span the switch.
        assert_eq!(fallbacks > 0, journal != FuzzJournal::Nvm, "{}: {fallbacks} fallbacks", journal.name());
        let caught = (0..seeds).map(|seed| crashfuzz::run_seed(seed, &modes, 8, true, Some(journal)).unwrap().violations.len()).sum::<usize>();
        assert!(caught > 0, "{}: the placement's canary must produce violations", journal.name());
        eprintln!("{}: {states} crash states clean, the canary caught in {caught}", journal.name());
    }
}

/// Seeds that found a bug once, kept as regressions. 1313: a manylogs log swapped into a log
/// that held stale copies of newer transactions (from an earlier swap out of it); recovery took
/// them, past the moved transactions, for committed ones and reported damage (the log table's
/// `durable` and the past-end rule, journal/recovery/). 5000700 and the others after it
/// (found 2026-12-02 by 56,000 runs from seed 5000000): an inode note replayed over a table
/// block that a checkpoint had written home in a later version left a checksum byte of its
/// own, which a later transaction's record did not cover; the inode failed its checksum after
/// recovery (`ReplayBlock::apply_patches`, docs/FORMAT.md, "Inode notes"). 8200384 (found
/// 2026-12-06): a fallback's first transaction landed at the ring's start while the journal
/// superblock's update to "fell back" was lost; recovery scanned the ring of a journal still
/// on its server, found tid 14 where the stale superblock said 1, and refused the mount as
/// damaged (`Remote::recovery`, docs/REMOTE.md, "Fallback").
#[test]
fn seeds_that_once_failed_stay_clean() {
    use crashfuzz::FuzzJournal;
    let modes: Vec<ContentConfig> = crashfuzz::ALL.iter().map(|m| ContentConfig::parse(m).unwrap()).collect();
    let r = crashfuzz::run_seed(1313, &modes, 8, false, None).unwrap();
    assert!(r.swaps >= 2, "the run no longer swaps logs: {r:?}");
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    for (seed, journal) in [
        (5000700, None),
        (5000700, Some(FuzzJournal::External)),
        (5002836, Some(FuzzJournal::Internal)),
        (5004045, Some(FuzzJournal::Internal)),
        (5006348, Some(FuzzJournal::Remote)),
        (5007660, Some(FuzzJournal::Remote)),
        (5001280, Some(FuzzJournal::Replicated)),
        (5001812, Some(FuzzJournal::Replicated)),
    ] {
        let r = crashfuzz::run_seed(seed, &modes, 8, false, journal).unwrap();
        assert!(r.mode.ends_with("+dmeta"), "seed {seed} no longer draws differential metadata: {r:?}");
        assert!(r.violations.is_empty(), "{:?}", r.violations);
    }
    let r = crashfuzz::run_seed(8200384, &modes, 8, false, Some(FuzzJournal::Remote)).unwrap();
    assert!(r.fallbacks > 0, "the run no longer falls back: {r:?}");
    assert!(r.violations.is_empty(), "{:?}", r.violations);
}

#[test]
fn timed_emulation_mounts_and_refuses_unknown_models() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("timed.okfs");
    Okeanos::mkfs_file(&img, 64 * MB, &okeanos::MkfsOptions { journal_blocks: 1024, ..Default::default() }).unwrap();
    let fs = Okeanos::open(&img, MountOptions::parse("data=wasteless,device_model=ssd").unwrap()).unwrap();
    let f = fs.create_file("/log").unwrap();
    f.append(b"timed").unwrap();
    f.fdatasync().unwrap();
    drop(f);
    assert_eq!(fs.read_path("/log").unwrap(), b"timed");
    let c = fs.counters();
    assert_eq!(c.fs_device.bytes_written, c.journal_bytes + c.final_bytes, "the timed device counts what reached the file");
    fs.unmount().unwrap();
    let e = MountOptions::parse("device_model=floppy").unwrap_err();
    assert!(e.contains("unknown device model") && e.contains("cheetah15k"), "{e}");
}

#[test]
fn the_postmark_mix_completes_and_data_journaling_serves_more_transactions() {
    let spec = okeanos_sim::postmark::Spec { files: 30, transactions: 200, clients: 10, request: 1024, min_file: 512, max_file: 8192, sync: true, varmail: false };
    let mut tps = Vec::new();
    for mode in ["ordered", "wasteless"] {
        let w = World::new(world_cfg(ContentConfig::parse(mode).unwrap(), true), &Default::default()).unwrap();
        let o = okeanos_sim::postmark::run(w, &spec, 3).unwrap();
        assert!(o.error.is_none(), "{mode}: {:?}", o.error);
        assert_eq!(o.transactions, 200);
        assert!(o.writes > 200 && o.during.syncs == o.writes, "{mode}: every write request synced: {} writes, {} syncs", o.writes, o.during.syncs);
        tps.push(o.transactions as f64 / o.virtual_s);
    }
    // Virtual time, so deterministic: ordered's syncs wait for in-place data writes.
    assert!(tps[1] > tps[0], "wasteless {} tps vs ordered {}", tps[1], tps[0]);
}

/// The remote placement in the simulator: the same engine sends its journal to the in-memory
/// server, timed on the link and the server's disk. Deterministic; the server holds what was
/// committed; over the 20 ms WAN a sync takes at least a round trip; a dropped journal (the
/// no-journal bound) commits without any journal time.
#[test]
fn the_remote_journal_runs_in_virtual_time() {
    let spec = Multistream { streams: 20, size: 128, rate: Rate::Bits(1e4), sync: SyncKind::Fdatasync, sync_every: 1, duration: Duration::from_secs(5) };
    let run = |net: &str, drop_journal: bool| {
        let mut cfg = world_cfg(ContentConfig::parse("wasteless").unwrap(), false);
        cfg.remote = Some(okeanos_sim::world::RemoteConfig::single(model::preset(net).unwrap(), model::preset("ssd").unwrap(), drop_journal));
        let w = World::new(cfg, &Default::default()).unwrap();
        multistream::run(w, &spec, 5).unwrap()
    };
    let (a, b) = (run("net-lan", false), run("net-lan", false));
    assert_eq!(format!("{:?}", a.during), format!("{:?}", b.during), "deterministic");
    assert!(a.writes > 200 && a.during.remote_bytes > 0, "{:?}", a.during);
    assert_eq!(a.during.journal_bytes, a.during.remote_bytes, "the whole journal went to the server");
    let wan = run("net-wan", false);
    assert!(wan.during.sync_latency.p50_us >= 20_000.0, "a WAN sync waits a round trip: {:?}", wan.during.sync_latency);
    assert!(a.during.sync_latency.p50_us < wan.during.sync_latency.p50_us / 10.0);
    let dropped = run("net-lan", true);
    assert_eq!(dropped.during.remote_bytes, 0);
    assert!(dropped.during.sync_latency.p50_us <= a.during.sync_latency.p50_us);
}

/// The replicated log in the simulator (JetStream-like, R3 acknowledged by a majority): a
/// sync costs at least what one server's does (the forwarding hop and the second replica's
/// flush come on top), and a leader lost in the middle stops commits for the election: the
/// longest sync waits through it.
#[test]
fn the_replicated_journal_waits_for_a_majority_and_for_an_election() {
    let spec = Multistream { streams: 20, size: 128, rate: Rate::Closed, sync: SyncKind::Fdatasync, sync_every: 1, duration: Duration::from_secs(4) };
    let run = |followers: usize, leader_loss: Option<(u64, u64)>| {
        let mut cfg = world_cfg(ContentConfig::parse("wasteless").unwrap(), false);
        let mut r = okeanos_sim::world::RemoteConfig::single(model::preset("net-lan").unwrap(), model::preset("ssd").unwrap(), false);
        r.followers = (0..followers).map(|_| model::preset("ssd").unwrap()).collect();
        r.leader_loss = leader_loss;
        cfg.remote = Some(r);
        let w = World::new(cfg, &Default::default()).unwrap();
        multistream::run(w, &spec, 5).unwrap()
    };
    let single = run(0, None);
    let r3 = run(2, None);
    assert!(r3.during.sync_latency.p50_us > single.during.sync_latency.p50_us, "R3 p50 {} vs one server {}", r3.during.sync_latency.p50_us, single.during.sync_latency.p50_us);
    let lost = run(2, Some((1_000_000_000, 1_500_000_000)));
    assert!(lost.during.sync_latency.max_us >= 1_400_000.0, "a sync waited through the election: {:?}", lost.during.sync_latency);
    assert!(lost.writes < r3.writes * 3 / 4, "{} writes with an election, {} without", lost.writes, r3.writes);
}

/// UBJ's Figure 5 over the nvm placement, in virtual time: a block written at 10, 40 and 50 s,
/// two commits (a transaction commits 30 s after its first write, as jbd2's: at 40 and 70 s,
/// where the paper's fixed period gives 30 and 60), the checkpoint at 90 s of what is owed for
/// 30 s: the block reaches its home once, in its newest version, and no commit wrote to the
/// disk.
#[test]
fn ubj_figure_5_one_home_write_for_three_writes_and_two_commits() {
    let cfg = ContentConfig::parse("data").unwrap();
    let mut w = world_cfg(cfg, false);
    w.mount = MountOptions::parse("data=data,commit=30,writeback_period=90,expire=30").unwrap();
    w.nvm = Some(okeanos_sim::world::NvmConfig { region: Arc::new(okeanos::nvm::MemNvm::new(24 * MB)), model: model::preset("nvm").unwrap() });
    let mut world = World::new(w, &okeanos::MkfsOptions { journal_blocks: 256, ..Default::default() }).unwrap();
    let root = world.fs.root();
    let ino = world.settle(|fs| fs.create(root, b"a", 0o644)).unwrap().ino;
    world.sync_all(&mut |_, _| {}).unwrap();
    let s = |x: u64| x * 1_000_000_000;
    let t0 = world.now();
    let base = world.fs.counters();
    for (at, v) in [(10, b'1'), (40, b'2'), (50, b'3')] {
        world.run(t0 + s(at), &mut |_, _| {});
        world.settle(|fs| fs.write(ino, 0, &[v; 4096])).unwrap();
        world.kick(); // the journal schedules its next commit
    }
    world.run(t0 + s(89), &mut |_, _| {});
    let before_checkpoint = world.fs.counters().since(&base);
    assert_eq!(before_checkpoint.commits, 2, "commits at 40 and 70 s");
    assert_eq!(before_checkpoint.final_data.blocks, 0, "nothing home before the checkpoint");
    assert_eq!(before_checkpoint.journal_bytes, 0, "commits write no disk journal");
    assert!(before_checkpoint.nvm_bytes >= 2 * 4096, "each commit froze the block in NVM");
    world.run(t0 + s(95), &mut |_, _| {});
    let after = world.fs.counters().since(&base);
    assert_eq!(after.final_data.blocks, 1, "one home write: the newest version only");
    assert_eq!(world.fs.read(ino, 0, 4096).unwrap(), vec![b'3'; 4096]);
}

/// The manylogs paper's Fig. 2 shape, small: the reader inside the file system moves the
/// head, manylogs commits land beside it, and the reader keeps more of its bandwidth than
/// with ordered journaling's mid-disk journal (virtual time: deterministic).
#[test]
fn nearhead_commits_follow_the_reader_and_spare_its_bandwidth() {
    use okeanos_sim::nearhead::{run, Scheme, Spec};
    let small = |scheme| {
        let mut s = Spec::paper(scheme, 160);
        s.disk_bytes = Some(6 << 30);
        s.large_bytes = 320 << 20;
        s.app_request = 32 << 20;
        s.writers = 6;
        s.file_bytes = 2 << 20;
        s.duration = std::time::Duration::from_secs(2);
        run(&s).unwrap()
    };
    let (ordered, manylogs) = (small(Scheme::Ordered), small(Scheme::Manylogs));
    let n = manylogs.near_head.expect("manylogs reports where commits went");
    assert!(n.commits >= 100 && n.near * 100 >= n.commits * 95, "{n:?}");
    assert!(ordered.near_head.is_none());
    assert!(ordered.syncs >= 100 && manylogs.syncs >= 300, "{} {}", ordered.syncs, manylogs.syncs);
    assert!(manylogs.shared_bps > 2.0 * ordered.shared_bps, "reader beside manylogs {} B/s, beside ordered {}", manylogs.shared_bps, ordered.shared_bps);
    assert!(manylogs.sync_mean_ns * 3 < ordered.sync_mean_ns, "sync {} ns vs {}", manylogs.sync_mean_ns, ordered.sync_mean_ns);
    // Alone, both read at the disk's media rate (the file sits in the outer zones).
    assert!(ordered.alone_bps > 100e6 && manylogs.alone_bps > 100e6, "{} {}", ordered.alone_bps, manylogs.alone_bps);
}

/// Fig. 4's fileserver generator, small: files created, appended, read, deleted and stat'ed
/// beside the reader, no syncs. Under manylogs' small transactions an unlink's eviction of a
/// large file waited for a commit after the name was gone; the simulator's retry of the
/// unlink then found no such file. The eviction is queued instead.
#[test]
fn fileserver_instances_run_beside_the_reader() {
    use okeanos_sim::nearhead::{run, Fileserver, Scheme, Spec};
    // The paper's disk and reader, eight instances (the run that first failed).
    let mut s = Spec::paper(Scheme::Manylogs, 20);
    s.writers = 8;
    s.large_bytes = 512 << 20;
    s.duration = std::time::Duration::from_secs(8);
    s.fileserver = Some(Fileserver { ops_per_sec: 20, files: 50, whole_bytes: 128 << 10, append_bytes: 16 << 10 });
    let o = run(&s).unwrap();
    // Two writes (create-and-write, append) in every five operations, each instance.
    assert!(o.syncs >= 8 * 20 * 8 * 2 / 5 - 16, "{} writes", o.syncs);
    assert!(o.commits > 1 && o.final_bytes > 0 && o.journal_bytes > 0, "{o:?}");
}

/// Batching ends once a transaction holds `batch_handles` handles (virtual time, so exact):
/// at 100 closed-loop streams the window alone gathers every writer into each commit; with the
/// default bound of 32 two groups of 50 alternate and no commit waits for the stragglers.
#[test]
fn batching_stops_once_the_transaction_holds_batch_handles() {
    let spec = Multistream { streams: 100, size: 128, rate: Rate::Closed, sync: SyncKind::Fdatasync, sync_every: 1, duration: Duration::from_secs(1) };
    let run = |bound: u32| {
        let mut cfg = world_cfg(ContentConfig::parse("ordered").unwrap(), true);
        cfg.mount.batch_handles = bound;
        let w = World::new(cfg, &Default::default()).unwrap();
        let out = multistream::run(w, &spec, 3).unwrap();
        assert!(out.error.is_none(), "{:?}", out.error);
        out.during
    };
    let (window, bounded) = (run(0), run(32));
    eprintln!("syncs per commit: window alone {:.1}, bounded {:.1}", window.syncs_per_commit, bounded.syncs_per_commit);
    assert!(window.syncs_per_commit > 90.0, "the window alone gathers every writer: {:.1}", window.syncs_per_commit);
    assert!(bounded.syncs_per_commit < 60.0, "the bound stops the wait: {:.1}", bounded.syncs_per_commit);
    assert!(bounded.syncs >= 100 && window.syncs >= 100, "both ran: {} and {} syncs", bounded.syncs, window.syncs);
}

/// `batch=bytes` under light load (300 streams of a 128-byte sync a second on the seeking
/// disk, whole commit blocks): fast commits wait for their padding to fill, within
/// `max_batch_time`, so the same syncs take fewer commits and fewer journal bytes; with
/// `batch=latency` they go a few syncs a block. Deterministic: it checks the mount's wiring
/// (the journal's block size and write form reach the scheduler) as well as the rule.
#[test]
fn batching_for_bytes_fills_fast_commits_under_light_load() {
    let spec = Multistream { streams: 300, size: 128, rate: Rate::Bits(1024.0), sync: SyncKind::Fdatasync, sync_every: 1, duration: Duration::from_secs(10) };
    let run = |for_bytes: bool| {
        let mut cfg = world_cfg(ContentConfig::parse("wasteless+dmeta").unwrap(), true);
        cfg.mount.batch_for_bytes = for_bytes;
        let w = World::new(cfg, &Default::default()).unwrap();
        let out = multistream::run(w, &spec, 7).unwrap();
        assert!(out.error.is_none(), "{:?}", out.error);
        out.during
    };
    let (latency, bytes) = (run(false), run(true));
    let per = |c: &okeanos::stats::Counters| c.journal_bytes as f64 / c.payload_bytes as f64;
    eprintln!(
        "syncs a commit {:.1} / {:.1}, journal bytes a payload byte {:.2} / {:.2}",
        latency.syncs_per_commit, bytes.syncs_per_commit, per(&latency), per(&bytes)
    );
    assert!(latency.syncs >= 2500 && bytes.syncs >= 2500, "both ran: {} and {} syncs", latency.syncs, bytes.syncs);
    assert!(bytes.syncs_per_commit > 3.0 * latency.syncs_per_commit, "batch=bytes gathers more syncs a commit: {:.1} against {:.1}", bytes.syncs_per_commit, latency.syncs_per_commit);
    assert!(per(&bytes) < per(&latency) / 2.0, "and journals less than half the bytes: {:.2} against {:.2}", per(&bytes), per(&latency));
}

/// `batch=bytes` for plain wasteless on many files (2,000 streams of a 128-byte sync a second
/// on the seeking disk, their inodes in 125 table blocks logged whole): a commit of n syncs
/// logs about as many table blocks until n nears the files' count, so the window must run to
/// the user's `max_batch_time` while handles arrive, not a commit's time. With a 300 ms bound
/// the same syncs journal a fraction of the bytes, and no sync waits much past the bound.
/// Deterministic (virtual time).
#[test]
fn batching_for_bytes_shares_table_blocks_among_many_files() {
    let spec = Multistream { streams: 2000, size: 128, rate: Rate::Bits(1024.0), sync: SyncKind::Fdatasync, sync_every: 1, duration: Duration::from_secs(10) };
    let run = |for_bytes: bool, max_batch_ms: u64| {
        let mut cfg = world_cfg(ContentConfig::parse("wasteless").unwrap(), true);
        // mke2fs's 64 MiB journal: a transaction of a quarter of it holds some 900 of these
        // syncs' credits (the test's usual 8 MiB journal would end commits at about 70).
        cfg.external_journal_blocks = Some(16384);
        cfg.mount.batch_for_bytes = for_bytes;
        cfg.mount.max_batch_time = Duration::from_millis(max_batch_ms);
        let w = World::new(cfg, &Default::default()).unwrap();
        let out = multistream::run(w, &spec, 7).unwrap();
        assert!(out.error.is_none(), "{:?}", out.error);
        out.during
    };
    let (latency, bytes) = (run(false, 300), run(true, 300));
    let per = |c: &okeanos::stats::Counters| c.journal_bytes as f64 / c.payload_bytes as f64;
    eprintln!(
        "syncs a commit {:.1} / {:.1}, journal bytes a payload byte {:.2} / {:.2}, sync p99 {:.0} / {:.0} us",
        latency.syncs_per_commit,
        bytes.syncs_per_commit,
        per(&latency),
        per(&bytes),
        latency.sync_latency.p99_us,
        bytes.sync_latency.p99_us
    );
    assert!(latency.syncs >= 15_000 && bytes.syncs >= 15_000, "both ran: {} and {} syncs", latency.syncs, bytes.syncs);
    assert!(bytes.syncs_per_commit > 500.0, "the window runs to its bound while handles arrive (about 600 syncs in 300 ms): {:.1} syncs a commit", bytes.syncs_per_commit);
    assert!(per(&bytes) < per(&latency) / 4.0, "and journals less than a quarter of the bytes: {:.2} against {:.2}", per(&bytes), per(&latency));
    assert!(bytes.sync_latency.p99_us < 400_000.0, "the bound holds: p99 {:.0} us", bytes.sync_latency.p99_us);
    // The commit sizes say which: half the handles in commits of 512-1,023 with the window,
    // of 8-15 without.
    let median = |c: &okeanos::stats::Counters| c.commit_sizes.median_handle_bucket();
    eprintln!("median handle's commit-size bucket {:?} / {:?}", median(&latency), median(&bytes));
    assert_eq!((median(&latency), median(&bytes)), (Some(3), Some(9)), "commit sizes: {:?} / {:?}", latency.commit_sizes, bytes.commit_sizes);
}

/// Writes the journal turns away for room wait outside the sync latency (which starts at the
/// sync call): the multistream workload counts them, with how long they waited. 2,000 streams
/// of plain wasteless on the test's 8 MiB journal fill it faster than checkpoints free it; 100
/// streams never do.
#[test]
fn writes_turned_away_for_room_are_counted_apart_from_sync_latency() {
    let run = |streams: usize| {
        let spec = Multistream { streams, size: 128, rate: Rate::Bits(1024.0), sync: SyncKind::Fdatasync, sync_every: 1, duration: Duration::from_secs(5) };
        let w = World::new(world_cfg(ContentConfig::parse("wasteless").unwrap(), true), &Default::default()).unwrap();
        let out = multistream::run(w, &spec, 7).unwrap();
        assert!(out.error.is_none(), "{:?}", out.error);
        out
    };
    let (few, many) = (run(100), run(2000));
    eprintln!("write waits: 100 streams {:?}, 2,000 streams {:?}", few.write_waits, many.write_waits);
    assert_eq!(few.write_waits, Default::default(), "100 streams: no write waits");
    let w = &many.write_waits;
    assert!(w.count > 0 && w.p50_us > 0.0 && w.p50_us <= w.p99_us && w.p99_us <= w.max_us, "2,000 streams: writes waited for room: {w:?}");
    assert!(w.count < many.writes, "only some of them: {} of {}", w.count, many.writes);
}

/// Manylogs on a rotational disk (checkpoints between commits, on the commit lane) under 50
/// closed-loop streams: snapshots of the map still happen when due (the lane takes a due one
/// before the next commit; before, a busy lane put them off until the writers stopped), and
/// recovery after the crash reads the logs only past the last one and keeps the data logged.
#[test]
fn snapshots_are_taken_under_load_and_recovery_keeps_data_logged() {
    let make = || {
        let mut c = world_cfg(ContentConfig::parse("data").unwrap(), false);
        c.fs_bytes = 256 * MB;
        c.mount.lazy_checkpoint = true;
        c.mount.snapshot_period = Duration::from_millis(50);
        c
    };
    let mkfs = okeanos::MkfsOptions { manylogs: true, ..Default::default() };
    let o = okeanos_sim::recovery::run(&make, &mkfs, 50, 4096, 40).unwrap();
    assert!(o.before.snapshots >= 2, "snapshots under load: {}", o.before.snapshots);
    let kept: u64 = o.report.end_reason.rsplit(", ").find_map(|p| p.strip_suffix(" of them kept logged")).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(kept >= 500, "data written before the last snapshot stays logged: {:?}", o.report);
    assert!(o.report.transactions * 4 < o.before.commits, "recovery replays only what followed the last snapshot: {:?}, {} commits", o.report, o.before.commits);
}

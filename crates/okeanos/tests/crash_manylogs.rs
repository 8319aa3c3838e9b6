//! Crash tests of the manylogs placement (issue 15): all seven content policies over a file
//! system with a 256-block log in every 512-block group, crashed at sampled device events
//! (every flush), with unflushed writes kept, lost, lost alone and torn at sector boundaries,
//! and crashed again during recovery. The log table's A/B copies are sectors like any other.
//! The canary reuses released log space without writing the table that records the release
//! (the rule "a log's space is reused only after the snapshot recording its reset is
//! durable"), and must fail them.

mod common;
mod harness;
use common::*;
use harness::{block_workload, enumerate, workload, Journal};
use okeanos::journal::content::ContentConfig;
use okeanos::{CrashRecorder, Device, MemDevice, MkfsOptions, MountOptions, Okeanos};
use std::sync::Arc;

const LOGS: Journal = Journal::Manylogs { group_blocks: 512, log_blocks: 256 };

/// The workload of `ops` operations, run again with twice and four times as many while no log
/// wrapped: the states must include reused log space. How much log a run fills depends on how
/// its syncs group into commits, which the journal thread's timing decides (a run of the
/// canary's 320 operations on a loaded machine once wrapped no log: 163 commits, none).
fn wrapping_workload(cfg: ContentConfig, ops: usize, faults: &dyn Fn(&mut MountOptions), seed: u64) -> harness::Run {
    let mut last = None;
    for n in [ops, 2 * ops, 4 * ops] {
        let run = workload(cfg, LOGS, n, faults, seed);
        let near = run.near_head.expect("manylogs counts its commits");
        if near.wraps > 0 {
            return run;
        }
        eprintln!("{cfg:?}: no log wrapped in {n} operations ({near:?}); more");
        last = Some(near);
    }
    panic!("{cfg:?}: no log wrapped even in {} operations: {last:?}", 4 * ops);
}

fn crash_test(policy: &str) {
    let cfg = ContentConfig::parse(policy).unwrap();
    // Differential metadata logs so little that its logs need twice the operations to wrap.
    let ops = if cfg.dmeta { 480 } else { 240 };
    // A cache of 64 blocks: logged blocks are parked out of it (their data dropped, read
    // back from the log) and checkpoints copy them home from the logs.
    // The workload must reuse log space, or the states below would not test the log table.
    let run = wrapping_workload(cfg, ops, &|o| o.cache_blocks = 64, 0x3a9 + cfg.mode as u64);
    let events = run.recorder.events().len();
    let n = run.near_head.expect("manylogs counts its commits");
    eprintln!("{policy}: {:?}", run.checkpoint);
    // And consecutive transactions must land in different logs (the harness moves the head
    // between two groups), so that recovery merges interleaved logs. Ordered and writeback
    // commits write file data in place first, and the log goes near that data: this
    // workload's files all live in group 0, so their commits stay in its log.
    if !matches!(cfg.mode, okeanos::DataMode::Ordered | okeanos::DataMode::Writeback) {
        assert!(n.switches > 1, "{policy}: every commit went to one log: {n:?}");
    }
    // With differential metadata, group commits of records are fast commits, some of them
    // spans of several blocks, with inode notes: the states below crash them in interleaved
    // logs too.
    if cfg.dmeta {
        assert!(run.fast_spans > 0, "{policy}: no fast commit span in the workload ({} fast commits)", run.fast_commits);
        assert!(run.inode_notes > 0, "{policy}: no inode note in the workload");
    }
    let out = enumerate(cfg, &run, 200, 25);
    out.assert_clean(400);
    eprintln!("manylogs {policy}: {} crash states over {events} events ({} fast commits, {} spans), no violation; {n:?}", out.states, run.fast_commits, run.fast_spans);
}

/// Wasteless with `fresh_blocks=in_place` over manylogs: whole new blocks go home before the
/// commit lands in whichever log is near the head (docs/JOURNALING.md, "New blocks in place").
#[test]
fn manylogs_crash_states_wasteless_fresh_blocks_in_place() {
    let cfg = ContentConfig { fresh_in_place: true, ..ContentConfig::parse("wasteless+dmeta").unwrap() };
    let run = workload(cfg, LOGS, 240, &|o| o.cache_blocks = 64, 0x3f1e5);
    assert!(run.commit_in_place_blocks > 0, "no new block went in place");
    let out = enumerate(cfg, &run, 200, 25);
    out.assert_clean(400);
    eprintln!("manylogs wasteless+dmeta fresh_blocks=in_place: {} crash states, {} blocks in place, no violation", out.states, run.commit_in_place_blocks);
}

#[test]
fn manylogs_crash_states_writeback() {
    crash_test("writeback");
}

#[test]
fn manylogs_crash_states_ordered() {
    crash_test("ordered");
}

#[test]
fn manylogs_crash_states_data() {
    crash_test("data");
}

#[test]
fn manylogs_crash_states_wasteless() {
    crash_test("wasteless");
}

#[test]
fn manylogs_crash_states_wasteless_dmeta() {
    crash_test("wasteless+dmeta");
}

#[test]
fn manylogs_crash_states_selective() {
    crash_test("selective");
}

#[test]
fn manylogs_crash_states_selective_dmeta() {
    crash_test("selective+dmeta");
}

/// The canary: log space reused before the table that records its release is durable.
#[test]
fn canary_reuse_before_table_is_caught() {
    for policy in ["data", "wasteless", "ordered"] {
        let cfg = ContentConfig::parse(policy).unwrap();
        // Space must be reused for the canary to reuse it early.
        let run = wrapping_workload(cfg, 320, &|o| o.faults.manylogs_reuse_early = true, 0xca9 + cfg.mode as u64);
        let out = enumerate(cfg, &run, 120, 0);
        eprintln!("canary {policy}: {} states, {} violations, first {:?}", out.states, out.violations.len(), out.violations.first());
        assert!(!out.violations.is_empty(), "{policy}: the crash tests did not notice log space reused before its table ({} states)", out.states);
    }
}

/// The block workload through a 64-block cache with `checkpoint=lazy`: nothing goes home until
/// the forced checkpoint at its end (no checkpoint for space: a crowded log is swapped
/// instead), so blocks are parked whatever the threads' timing. `fault` sets a canary.
fn lazy_block_run(cfg: ContentConfig, seed: u64, fault: &dyn Fn(&mut MountOptions)) -> harness::Run {
    block_workload(cfg, LOGS, 300, &|o| {
        o.cache_blocks = 64;
        o.lazy_checkpoint = true;
        fault(o);
    }, seed, false)
}

/// A canary's run must fail the crash states.
fn assert_canary_caught(cfg: ContentConfig, run: &harness::Run, what: &str) {
    let out = enumerate(cfg, run, 120, 0);
    eprintln!("canary ({what}): {} states, {} violations, first {:?}", out.states, out.violations.len(), out.violations.first());
    assert!(!out.violations.is_empty(), "the crash tests did not notice {what} ({} states)", out.states);
}

/// Whole blocks through a 64-block cache: logged blocks are parked out of the cache (their
/// data dropped, the log position kept), read back from the log when the file is rewritten,
/// and copied home from the logs by checkpoints (a read stage in the checkpoint's plan).
fn parked_crash_test(policy: &str) {
    let cfg = ContentConfig::parse(policy).unwrap();
    let run = lazy_block_run(cfg, 0x5e1 + cfg.mode as u64, &|_| {});
    let c = run.checkpoint;
    eprintln!("{policy}: {c:?}");
    assert!(c.copied > 0, "{policy}: no checkpoint copied a parked block home: {c:?}");
    assert!(c.skipped > 0, "{policy}: no logged copy was skipped: {c:?}");
    assert!(c.runs < c.blocks, "{policy}: no adjacent home writes were merged: {c:?}");
    let out = enumerate(cfg, &run, 200, 25);
    out.assert_clean(400);
    eprintln!("manylogs parked {policy}: {} crash states, no violation", out.states);
}

#[test]
fn manylogs_parked_crash_states_data() {
    parked_crash_test("data");
}

#[test]
fn manylogs_parked_crash_states_selective() {
    parked_crash_test("selective");
}

/// Log swapping (section III-G): with `checkpoint=lazy` the head's log fills past 80% and is
/// moved, whole, to the empty log farthest from the head, beside the commits that go on in
/// other logs. Every flush of every swap is a crash point (the reserving table, the copies,
/// the table that moves), with unflushed writes kept, lost and torn; parked blocks are read
/// and copied home from their new positions afterwards.
fn swap_crash_test(policy: &str) {
    let cfg = ContentConfig::parse(policy).unwrap();
    let run = lazy_block_run(cfg, 0x5a9 + cfg.mode as u64, &|_| {});
    let n = run.near_head.expect("manylogs counts its commits");
    assert!(n.swaps > 0, "{policy}: no log swapped: {n:?}");
    let out = enumerate(cfg, &run, 200, 25);
    out.assert_clean(400);
    eprintln!("manylogs swaps {policy}: {} crash states, no violation; {n:?}, {:?}", out.states, run.checkpoint);
}

#[test]
fn manylogs_swap_crash_states_data() {
    swap_crash_test("data");
}

#[test]
fn manylogs_swap_crash_states_ordered() {
    swap_crash_test("ordered");
}

#[test]
fn manylogs_swap_crash_states_wasteless_dmeta() {
    swap_crash_test("wasteless+dmeta");
}

/// The canary of swapping: the copies go into the target log before any table records it
/// reserved, so a crash during or after them, before the table that moves, leaves copies
/// recovery takes for transactions of that log.
#[test]
fn canary_swap_without_reserving_the_target_is_caught() {
    let cfg = ContentConfig::parse("data").unwrap();
    let run = lazy_block_run(cfg, 0x5a9 + cfg.mode as u64, &|o| o.faults.manylogs_swap_unreserved = true);
    let n = run.near_head.expect("manylogs counts its commits");
    assert!(n.swaps > 0, "no swap: {n:?}");
    assert_canary_caught(cfg, &run, "a swap that copies into an unreserved log");
}

/// The canary of parking: a block logged whole twice keeps its first log position, so a
/// parked block loads, and a checkpoint copies home, an older version.
#[test]
fn canary_stale_log_position_is_caught() {
    let cfg = ContentConfig::parse("data").unwrap();
    let run = lazy_block_run(cfg, 0x5e1 + cfg.mode as u64, &|o| o.faults.manylogs_keep_first_position = true);
    assert_canary_caught(cfg, &run, "parked blocks loaded from a stale log position");
}

/// A run with `checkpoint=lazy` and a snapshot due every millisecond: whole blocks through a
/// 64-block cache, or (`small`) the mixed workload of small appends, whose partial blocks
/// wasteless and selective content log as records, not whole.
fn snapshot_run(cfg: ContentConfig, small: bool, fault: &dyn Fn(&mut MountOptions)) -> harness::Run {
    let opts = |o: &mut MountOptions| {
        o.lazy_checkpoint = true;
        o.snapshot_period = std::time::Duration::from_millis(1);
        fault(o);
    };
    if small {
        workload(cfg, LOGS, 240, &|o| opts(o), 0x5b3 + cfg.mode as u64)
    } else {
        lazy_block_run(cfg, 0x5b1 + cfg.mode as u64, &opts)
    }
}

/// Snapshots of the map of logged blocks (the paper's MTL on disk, section III-E): with
/// `checkpoint=lazy` and a snapshot due every millisecond, each snapshot writes home metadata
/// and data not whole in a log, then the table with the map of what stays logged; recovery
/// reads each log only from its snapshot position and replays mapped blocks from their logs.
/// Every flush of every snapshot is a crash point (home writes, then table and map, kept,
/// lost and torn), and a second crash during recovery.
fn snapshot_crash_test(policy: &str, small: bool) {
    let cfg = ContentConfig::parse(policy).unwrap();
    let run = snapshot_run(cfg, small, &|_| {});
    assert!(run.snapshots > 0, "{policy}: no snapshot");
    let out = enumerate(cfg, &run, 200, 25);
    out.assert_clean(400);
    eprintln!("manylogs snapshots {policy}: {} snapshots, {} crash states, no violation; {:?}", run.snapshots, out.states, run.checkpoint);
}

#[test]
fn manylogs_snapshot_crash_states_data() {
    snapshot_crash_test("data", false);
}

#[test]
fn manylogs_snapshot_crash_states_ordered() {
    snapshot_crash_test("ordered", false);
}

#[test]
fn manylogs_snapshot_crash_states_wasteless_dmeta() {
    snapshot_crash_test("wasteless+dmeta", false);
}

#[test]
fn manylogs_snapshot_crash_states_selective() {
    snapshot_crash_test("selective", false);
}

#[test]
fn manylogs_snapshot_crash_states_wasteless_records() {
    snapshot_crash_test("wasteless", true);
}

#[test]
fn manylogs_snapshot_crash_states_selective_dmeta_records() {
    snapshot_crash_test("selective+dmeta", true);
}

/// The canary of snapshots: data not whole in any log (records) is left logged but not in
/// the map, so recovery, which reads only past the snapshot, loses it.
#[test]
fn canary_snapshot_without_writing_records_home_is_caught() {
    let cfg = ContentConfig::parse("wasteless").unwrap();
    let run = snapshot_run(cfg, true, &|o| o.faults.manylogs_snapshot_unhomed = true);
    assert!(run.snapshots > 0, "no snapshot");
    assert_canary_caught(cfg, &run, "a snapshot that kept unmapped data logged");
}

/// Background writeback on manylogs (on by default there; here with a threshold of two
/// blocks so that this small workload uses it): ordered data written before its commit, the
/// commit's records in the log near it.
#[test]
fn manylogs_early_writeback_crash_states_ordered() {
    let cfg = ContentConfig::parse("ordered").unwrap();
    let run = workload(cfg, LOGS, 240, &|o| o.dirty_background_bytes = Some(8192), 0xea3);
    assert!(run.early_writes > 0, "no early write");
    let out = enumerate(cfg, &run, 200, 25);
    out.assert_clean(300);
    eprintln!("manylogs early writeback: {} early writes, {} crash states, no violation", run.early_writes, out.states);
}

/// The canary of every placement: no commit flush.
#[test]
fn canary_skipped_commit_flush_is_caught() {
    let cfg = ContentConfig::parse("data").unwrap();
    let run = workload(cfg, LOGS, 40, &|o| o.faults.skip_commit_flush = true, 0xcab);
    let out = enumerate(cfg, &run, 60, 0);
    assert!(!out.violations.is_empty(), "the crash tests did not notice a missing commit flush ({} states)", out.states);
}

/// Commits follow the head: writes to a file in one group put their transactions in that
/// group's log (or a neighbour's), and a hint moves them.
#[test]
fn commits_land_near_the_head() {
    let dev = Arc::new(MemDevice::new(64 * MB));
    let sb = Okeanos::mkfs(dev.as_ref(), None, &MkfsOptions { manylogs: true, blocks_per_group: Some(2048), log_area_blocks: 256, ..Default::default() }).unwrap();
    assert!(sb.manylogs());
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, MountOptions::default().data(okeanos::DataMode::Ordered)).unwrap();
    assert_eq!(fs.placement(), "manylogs");
    let f = fs.create_file("/f").unwrap();
    for k in 0..50u64 {
        // The head wanders over the disk: a hint (a large I/O elsewhere) before each sync.
        let group = (k * 7) % sb.group_count as u64;
        fs.hint_position(sb.first_group_block + group * sb.blocks_per_group as u64 + 300);
        f.append(&record(1, k as usize, 128)).unwrap();
        f.fsync().unwrap();
    }
    let n = fs.near_head().expect("manylogs counts");
    assert!(n.commits >= 50, "{n:?}");
    assert!(n.near * 100 >= n.commits * 95, "fewer than 95% of commits near the head: {n:?}");
    drop(f);
    fs.unmount().unwrap();
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, MountOptions::default()).unwrap();
    let data = fs.read_path("/f").unwrap();
    assert_eq!(data.len(), 50 * 128);
    fs.unmount().unwrap();
    assert!(okeanos::fsck(dev, None).is_clean());
}

fn manylogs_fs() -> (Arc<MemDevice>, okeanos::format::Superblock) {
    let dev = Arc::new(MemDevice::new(32 * MB));
    let sb = Okeanos::mkfs(dev.as_ref(), None, &MkfsOptions { manylogs: true, blocks_per_group: Some(1024), log_area_blocks: 256, ..Default::default() }).unwrap();
    (dev, sb)
}

/// The image of a mount that synced but never unmounted (a crash after the last flush).
fn crashed_image(dev: &Arc<MemDevice>) -> Vec<u8> {
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, MountOptions::default().data(okeanos::DataMode::Data)).unwrap();
    let f = fs.create_file("/log").unwrap();
    for k in 0..40 {
        fs.hint_position(2048 + (k % 4) * 1024);
        f.append(&record(2, k as usize, 300)).unwrap();
        f.fsync().unwrap();
    }
    let image = dev.snapshot();
    drop(f);
    fs.unmount().unwrap();
    image
}

/// Mount options of the map tests: data journaling, the lazy checkpoint (data stays logged),
/// a snapshot every `every`.
fn snapshotting(every: std::time::Duration) -> MountOptions {
    let mut o = MountOptions::default().data(okeanos::DataMode::Data);
    o.lazy_checkpoint = true;
    o.snapshot_period = every;
    o
}

/// Appends record `k` (a whole block) to `f` near group `k % 4`'s log and syncs it.
fn append_block(fs: &Okeanos, f: &okeanos::File, expect: &mut Vec<u8>, tag: usize, k: usize) {
    fs.hint_position(2048 + (k as u64 % 4) * 1024);
    let r = record(tag, k, 4096);
    f.append(&r).unwrap();
    f.fsync().unwrap();
    expect.extend_from_slice(&r);
}

/// Waits until a durable snapshot covers every transaction committed when it is called
/// (bounded at 60 s, far beyond the period, so that a loaded machine does not fail it; timing
/// is for benchmarks). It asks the placement for the home tid of its newest durable snapshot:
/// the snapshot counter counts snapshots as they start, before their writes are flushed.
fn wait_for_snapshot(fs: &Okeanos) {
    let home = || fs.debug_state(|j, _| j.placement().snapshots().map(|s| s.home())).expect("a placement with snapshots");
    let target = fs.debug_state(|j, _| j.committed_tid());
    let t0 = std::time::Instant::now();
    while home() < target && t0.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    assert!(home() >= target, "no durable snapshot up to tid {target} within 60 s (home tid {})", home());
}

/// Transactions a recovery of `image` replays (0: the journal holds nothing live).
fn live_transactions(image: Vec<u8>) -> u64 {
    let dev = Arc::new(MemDevice::from_bytes(image));
    okeanos::inspect::recover_image(dev as Arc<dyn Device>, None).unwrap().map_or(0, |r| r.transactions)
}

// The tests of the table and of checkpoints, by subject.
#[path = "crash_manylogs/checkpoints.rs"]
mod checkpoints;
#[path = "crash_manylogs/tables.rs"]
mod tables;

//! The scheduler in virtual time: a journal on a ring in memory, a host that records what it
//! is asked, and times passed in by the test. Each test drives `poll` and `finish` as the
//! journal thread would and checks the decision, without threads, devices or a clock.

use crate::cache::{BufKind, Cache};
use super::{quiet_gaps, Counted, Host, JournalStep, JournalWork, Lane, Scheduler, SchedulerConfig, PIPELINE_SMALL_COMMIT};
use crate::ids::HomeBlock;
use crate::journal::transaction::{Credits, Tid};
use crate::journal::Journal;
use crate::device::DeviceError;
use crate::remote::client::RemoteError;

const MS: u64 = 1_000_000;
const S: u64 = 1_000 * MS;

struct TestHost {
    journal: Journal,
    cache: Cache,
    activity: u64,
    freed: Vec<HomeBlock>,
    read_only: Option<String>,
}

impl Host for TestHost {
    fn journal(&self) -> &Journal {
        &self.journal
    }
    fn parts(&mut self) -> (&mut Journal, &mut Cache) {
        (&mut self.journal, &mut self.cache)
    }
    fn activity(&self) -> u64 {
        self.activity
    }
    fn unpark(&mut self, block: HomeBlock) -> Result<(), String> {
        Err(format!("nothing is parked in this test (block {block})"))
    }
    fn freed(&mut self, blocks: Vec<HomeBlock>, _inodes: Vec<u32>) {
        self.freed.extend(blocks);
    }
    fn read_only(&mut self, why: String) {
        self.read_only = Some(why);
    }
}

/// The mount's defaults: commit every 5 s, write back every 5 s, batching up to 15 ms.
fn config() -> SchedulerConfig {
    SchedulerConfig {
        commit_interval_ns: 5 * S,
        min_batch_ns: 0,
        max_batch_ns: 15 * MS,
        batch_handles: 32,
        writeback_period_ns: 5 * S,
        expire_ns: Some(30 * S),
        idle_after_ns: 2 * S,
        ..Default::default()
    }
}

fn setup(cfg: SchedulerConfig) -> (Scheduler, TestHost) {
    setup_policy(cfg, "data")
}

fn setup_policy(cfg: SchedulerConfig, policy: &str) -> (Scheduler, TestHost) {
    let (journal, cache) = crate::journal::tests::journal(policy);
    (Scheduler::new(cfg, 0), TestHost { journal, cache, activity: 0, freed: Vec::new(), read_only: None })
}

/// As [`write`], and the handle also changes metadata block `meta` (an inode's block, say).
fn write_with_meta(h: &mut TestHost, b: u64, meta: u64, now: u64) -> Tid {
    let m = HomeBlock::new(meta);
    if h.cache.peek(m).is_none() {
        h.cache.insert(m, vec![0; 4096], BufKind::Meta);
    }
    let t = h.journal.handle_start(Credits::blocks(4), now).unwrap();
    let b = HomeBlock::new(b);
    if h.cache.peek(b).is_none() {
        h.cache.insert(b, vec![0; 4096], BufKind::Data);
    }
    h.journal.dirty_data(&mut h.cache, b, 0, 128, 128, false, false);
    h.cache.data_mut(m)[(b.get() % 32) as usize * 128] ^= 1;
    h.journal.dirty_metadata(&mut h.cache, m, false);
    h.journal.handle_stop(t).unwrap();
    h.activity += 1;
    let tid = h.journal.running_tid();
    h.journal.request_commit(tid);
    tid
}

/// One handle at `now` that writes `len` bytes of block `b`; asks for a commit if `sync`.
fn write(h: &mut TestHost, b: u64, len: usize, now: u64, sync: bool) -> Tid {
    let b = HomeBlock::new(b);
    if h.cache.peek(b).is_none() {
        h.cache.insert(b, vec![0; 4096], BufKind::Data);
    }
    let t = h.journal.handle_start(Credits::blocks(4), now).unwrap();
    h.journal.dirty_data(&mut h.cache, b, 0, len, len, false, false);
    h.journal.handle_stop(t).unwrap();
    h.activity += 1;
    let tid = h.journal.running_tid();
    if sync {
        h.journal.request_commit(tid);
    }
    tid
}

fn work(step: JournalStep) -> JournalWork {
    match step {
        JournalStep::Work(w) => w,
        JournalStep::Idle { wake_ns } => panic!("expected work, the scheduler idles until {wake_ns}"),
        JournalStep::Stop => panic!("expected work, the scheduler stops"),
    }
}

fn idle(step: JournalStep) -> u64 {
    match step {
        JournalStep::Idle { wake_ns } => wake_ns,
        JournalStep::Work(w) => panic!("expected idle, got work of {} writes", w.io().write_count()),
        JournalStep::Stop => panic!("expected idle, the scheduler stops"),
    }
}

fn is_commit(w: &JournalWork) -> bool {
    matches!(w, JournalWork::Commit { .. })
}

/// Commits what runs at `now`, its I/O taking `took` ns; returns the committed tid.
fn commit(s: &mut Scheduler, h: &mut TestHost, now: u64, took: u64) -> Tid {
    let w = work(s.poll(h, now, 0, Lane::Commit));
    assert!(is_commit(&w), "a commit");
    s.finish(h, now + took, w, Ok(()));
    let tid = s.effects().committed.expect("the commit reported");
    *s.effects() = Default::default();
    tid
}

/// Writes and commits a block a millisecond (blocks 5000 on) until `full` holds of the
/// journal; returns the time and the next block.
fn fill_log(s: &mut Scheduler, h: &mut TestHost, full: impl Fn(&crate::journal::Journal) -> bool) -> (u64, u64) {
    let (mut now, mut b) = (0, 5000);
    while !full(&h.journal) {
        write(h, b, 4096, now, true);
        commit(s, h, now, 10);
        b += 1;
        now += MS;
        assert!(b < 6000, "the log never filled");
    }
    (now, b)
}

#[test]
fn nothing_to_do_sleeps_until_the_next_writeback_period() {
    let (mut s, mut h) = setup(config());
    assert_eq!(idle(s.poll(&mut h, 0, 0, Lane::Commit)), 5 * S);
    assert!(s.effects().is_empty());
}

#[test]
fn the_first_sync_commits_at_once_and_reports_its_syncs() {
    let (mut s, mut h) = setup(config());
    let tid = write(&mut h, 5000, 128, 0, true);
    let w = work(s.poll(&mut h, 10, 0, Lane::Commit));
    assert!(is_commit(&w));
    // While it is in flight, the next sync's transaction waits for it.
    let next = write(&mut h, 5001, 128, 20, true);
    assert!(next > tid);
    assert_eq!(idle(s.poll(&mut h, 30, 0, Lane::Commit)), 5 * S, "one commit in flight at a time");
    s.finish(&mut h, MS, w, Ok(()));
    let fx = s.effects();
    assert_eq!(fx.committed, Some(tid));
    assert!(fx.notify_handles && fx.deliver_syncs && fx.notify_checkpoint_lane);
    assert!(fx.counted.iter().any(|c| matches!(c, Counted::Commit { handles: 1, .. })));
}

/// A scheduler after a commit of two handles that took 1 ms, and the batching window that
/// follows it: a quarter of the commit time, looked at in eighths of that (at least 20 us).
fn after_a_shared_commit() -> (Scheduler, TestHost, u64, u64) {
    let (mut s, mut h) = setup(config());
    write(&mut h, 5000, 128, 0, false);
    write(&mut h, 5001, 128, 0, true);
    commit(&mut s, &mut h, 0, MS);
    (s, h, MS / 4, MS / 32)
}

#[test]
fn a_sync_after_a_shared_commit_waits_a_batching_window_while_handles_arrive() {
    let (mut s, mut h, window, slice) = after_a_shared_commit();
    let t0 = 2 * MS;
    write(&mut h, 5002, 128, t0, true);
    assert_eq!(idle(s.poll(&mut h, t0, 0, Lane::Commit)), t0 + slice, "waits for the others");
    // Another handle joined during the slice: the window goes on.
    write(&mut h, 5003, 128, t0 + slice / 2, true);
    assert_eq!(idle(s.poll(&mut h, t0 + slice / 2, 0, Lane::Commit)), t0 + slice, "not before the slice ends");
    assert_eq!(idle(s.poll(&mut h, t0 + slice, 0, Lane::Commit)), t0 + 2 * slice);
    // Nobody joined in the next slice: commit.
    assert!(is_commit(&work(s.poll(&mut h, t0 + 2 * slice, 0, Lane::Commit))));
    assert!(2 * slice < window);
}

#[test]
fn the_batching_window_ends_at_its_length_however_many_join() {
    let (mut s, mut h, window, slice) = after_a_shared_commit();
    let t0 = 2 * MS;
    let mut now = t0;
    let mut b = 5002;
    loop {
        write(&mut h, b, 128, now, true);
        b += 1;
        match s.poll(&mut h, now, 0, Lane::Commit) {
            JournalStep::Idle { wake_ns } => now = wake_ns,
            JournalStep::Work(w) => {
                assert!(is_commit(&w));
                break;
            }
            JournalStep::Stop => panic!("stopped"),
        }
        assert!(now <= t0 + window + slice, "the window outlasted its length");
    }
    assert!(now >= t0 + window, "committed at {} ns, before the window ended", now - t0);
}

#[test]
fn enough_handles_commit_without_a_window() {
    let mut cfg = config();
    cfg.batch_handles = 3;
    let (mut s, mut h) = setup(cfg);
    write(&mut h, 5000, 128, 0, false);
    write(&mut h, 5001, 128, 0, true);
    commit(&mut s, &mut h, 0, MS);
    for b in 0..3 {
        write(&mut h, 6000 + b, 128, 2 * MS, true);
    }
    assert!(is_commit(&work(s.poll(&mut h, 2 * MS, 0, Lane::Commit))), "batch_handles reached");
}

/// `batch=bytes`: a transaction whose whole metadata blocks outweigh its records (plain
/// wasteless: 128-byte records, one inode block logged whole) waits, past `batch_handles`,
/// while handles keep arriving, up to `max_batch_time` (15 ms here; a commit took 1 ms);
/// under `batch=latency` the same transaction commits at the bound; and a transaction of
/// whole data blocks (data) has nothing to share and commits at the bound even under
/// `batch=bytes`.
#[test]
fn batching_for_bytes_waits_while_whole_metadata_dominates() {
    // How many handles the commit took, and how long after the first it went.
    let run = |policy: &str, for_bytes: bool| -> (u64, u64) {
        let mut cfg = config();
        cfg.batch_handles = 3;
        cfg.batch_for_bytes = for_bytes;
        let (mut s, mut h) = setup_policy(cfg, policy);
        write_with_meta(&mut h, 5000, 100, 0);
        write_with_meta(&mut h, 5001, 100, 0);
        commit(&mut s, &mut h, 0, MS);
        let t0 = 2 * MS;
        let mut now = t0;
        for k in 0..1000u64 {
            write_with_meta(&mut h, 6000 + k, 100, now);
            match s.poll(&mut h, now, 0, Lane::Commit) {
                JournalStep::Idle { wake_ns } => now = wake_ns,
                JournalStep::Work(w) => {
                    assert!(is_commit(&w));
                    return (k + 1, now - t0);
                }
                JournalStep::Stop => panic!("stopped"),
            }
        }
        panic!("no commit within 1000 handles");
    };
    let (shape_wasteless, shape_data) = {
        let (_, mut h) = setup_policy(config(), "wasteless");
        write_with_meta(&mut h, 5000, 100, 0);
        let (_, mut d) = setup_policy(config(), "data");
        write_with_meta(&mut d, 5000, 100, 0);
        (h.journal.running_shape(), d.journal.running_shape())
    };
    assert_eq!(shape_wasteless, (4096, 128), "plain wasteless: a whole inode block, a 128-byte record");
    assert_eq!(shape_data, (4096, 4096), "data: the data block is logged whole too");
    let (handles, waited) = run("wasteless", true);
    // The pace of arrivals is unknown after one commit: slices of a quarter of the window.
    assert!(handles == 5 && waited == 15 * MS, "batch=bytes waits up to max_batch_time past batch_handles: {handles} handles after {waited} ns");
    let (handles, waited) = run("wasteless", false);
    assert!(handles == 3 && waited < MS / 4, "batch=latency commits once batch_handles joined: {handles} handles after {waited} ns");
    let (handles, waited) = run("data", true);
    assert!(handles == 3 && waited < MS / 4, "whole data blocks: nothing to share, the bound holds: {handles} handles after {waited} ns");
}

/// `batch=bytes` under light load: a transaction of records alone, whose fast commit would be
/// mostly padding, waits for more handles until its last write unit is nearly full (a block,
/// or a sector where commits are written short), bounded by `max_batch_time`; under
/// `batch=latency`, or with the unit unknown, the same arrivals commit at once.
#[test]
fn batching_for_bytes_fills_a_fast_commit_under_light_load() {
    // Handles arriving every `gap` ns, each a 128-byte record with a sync; how many the commit
    // took and how long after the first it went.
    // `unit`: 512 for commits written short, 4096 for whole blocks, 0 for no block size known.
    let run = |for_bytes: bool, unit: u32, gap: u64, max_batch: u64| -> (u64, u64) {
        let mut cfg = config();
        cfg.batch_handles = 3;
        cfg.batch_for_bytes = for_bytes;
        cfg.block_size = if unit == 0 { 0 } else { 4096 };
        cfg.short_commits = unit == 512;
        cfg.max_batch_ns = max_batch;
        let (journal, cache) = crate::journal::tests::fast_journal("wasteless");
        let mut s = Scheduler::new(cfg, 0);
        let mut h = TestHost { journal, cache, activity: 0, freed: Vec::new(), read_only: None };
        write(&mut h, 5000, 128, 0, true);
        write(&mut h, 5001, 128, 0, true);
        let w = work(s.poll(&mut h, 0, 0, Lane::Commit));
        let JournalWork::Commit { plan, .. } = &w else { panic!("a commit") };
        // Two 16-byte tags and two records: 144 bytes a handle beyond the fixed 48.
        assert_eq!((plan.records.fast_blocks, plan.records.fast_bytes), (1, 48 + 2 * 144), "a fast commit");
        s.finish(&mut h, MS, w, Ok(()));
        *s.effects() = Default::default();
        let t0 = 2 * MS;
        let mut next_arrival = t0;
        let mut now = t0;
        let mut k = 0u64;
        while now < t0 + S {
            while next_arrival <= now {
                write(&mut h, 6000 + k, 128, next_arrival, true);
                k += 1;
                next_arrival += gap;
            }
            match s.poll(&mut h, now, 0, Lane::Commit) {
                JournalStep::Idle { wake_ns } => now = wake_ns.min(next_arrival),
                JournalStep::Work(w) => {
                    assert!(is_commit(&w));
                    return (k, now - t0);
                }
                JournalStep::Stop => panic!("stopped"),
            }
        }
        panic!("no commit within a second");
    };
    // Whole blocks and a 100 ms bound: the commit goes once 141 handles (141 × 144 + 48 =
    // 20,352 bytes: a span of five blocks, four continuation headers, the last block 32 bytes
    // short of full) leave at most a sixty-fourth of what they carry to the fields, headers
    // and padding.
    let (handles, waited) = run(true, 4096, MS / 2, 100 * MS);
    assert!(handles == 141 && waited < 100 * MS, "batch=bytes fills the last block: {handles} handles after {waited} ns");
    // Written short: 74 handles (10,704 bytes: three blocks, the last five sectors exactly).
    let (handles, _) = run(true, 512, MS / 2, 100 * MS);
    assert_eq!(handles, 74, "batch=bytes fills the last sector");
    // max_batch_time (15 ms) bounds the wait when the unit does not fill in time.
    let (handles, waited) = run(true, 4096, MS / 2, 15 * MS);
    assert!((25..=32).contains(&handles) && (15 * MS..=15 * MS + 4 * MS).contains(&waited), "max_batch_time bounds the wait: {handles} handles after {waited} ns");
    // As every batching window, it ends when a slice of it (here a quarter) passes with no
    // handle.
    let (handles, waited) = run(true, 4096, 4 * MS, 15 * MS);
    assert!(handles == 1 && waited < 4 * MS, "no handle within a slice: {handles} handles after {waited} ns");
    // Under latency a quarter of the last commit's time (250 µs) passes with no handle.
    let (handles, waited) = run(false, 4096, MS / 2, 15 * MS);
    assert!(handles == 1 && waited < MS / 2, "batch=latency does not wait for the block to fill: {handles} handles after {waited} ns");
    let (handles, waited) = run(true, 0, MS / 2, 15 * MS);
    assert!(handles == 1 && waited < MS / 2, "no unit known, no padding rule: {handles} handles after {waited} ns");
}

/// `batch=bytes` in a closed loop: when every writer has joined and no more come, a window for
/// padding ends after a few of the gaps handles have been arriving at, not after a quarter of
/// `max_batch_time`.
#[test]
fn batching_for_padding_ends_soon_when_the_writers_stop_coming() {
    let mut cfg = config();
    cfg.batch_for_bytes = true;
    cfg.block_size = 4096;
    let (journal, cache) = crate::journal::tests::fast_journal("wasteless");
    let mut s = Scheduler::new(cfg, 0);
    let mut h = TestHost { journal, cache, activity: 0, freed: Vec::new(), read_only: None };
    let mut next = 5000;
    // 40 handles at once, then none: how long the commit waited.
    let mut burst = |s: &mut Scheduler, h: &mut TestHost, t0: u64, n: u64| -> u64 {
        for _ in 0..n {
            write(h, next, 128, t0, true);
            next += 1;
        }
        let mut now = t0;
        loop {
            match s.poll(h, now, 0, Lane::Commit) {
                JournalStep::Idle { wake_ns } => now = wake_ns,
                JournalStep::Work(w) => {
                    assert!(is_commit(&w));
                    s.finish(h, now + 100_000, w, Ok(()));
                    *s.effects() = Default::default();
                    return now - t0;
                }
                JournalStep::Stop => panic!("stopped"),
            }
            assert!(now < t0 + S, "no commit within a second");
        }
    };
    assert_eq!(burst(&mut s, &mut h, 0, 2), 0, "the first commit: no batching yet");
    // Nothing known of the arrivals yet: a quarter of the window (15 ms) with no handle.
    let first = burst(&mut s, &mut h, MS, 40);
    assert_eq!(first, 15 * MS / 4, "a padding window with no known pace");
    // Now the pace is known (about 119 µs a handle): four gaps with no handle end it.
    let second = burst(&mut s, &mut h, 10 * MS, 40);
    assert!(second < MS, "a padding window at the known pace: {second} ns");
}

/// `batch=bytes` while whole metadata blocks dominate, at a known pace of arrivals: the window
/// looks in slices of `quiet_gaps` of the gaps handles arrive at, so it goes on through a
/// silence shorter than a slice (arrivals at random leave a few such in a long window: slices
/// of four gaps ended 300 ms windows at 8,000 streams after 3-80 ms) and ends in a silence of
/// two slices.
#[test]
fn a_window_for_shared_blocks_ends_at_a_silence_its_length_makes_unlikely() {
    assert_eq!(quiet_gaps(300 * MS, 100_000), 11, "2 + ln(3,000) = 10.01, rounded up");
    assert_eq!((quiet_gaps(MS, MS), quiet_gaps(15 * MS, 12_000)), (4, 10), "at least four");
    const GAP: u64 = MS;
    let mut cfg = config();
    cfg.batch_handles = 3;
    cfg.batch_for_bytes = true;
    cfg.max_batch_ns = 30 * MS;
    let (mut s, mut h) = setup_policy(cfg, "wasteless");
    let quiet = quiet_gaps(30 * MS, GAP);
    assert_eq!(quiet, 6, "2 + ln(30) = 5.40, rounded up");
    // A commit of two handles (a window follows a shared commit), and the pace the commits
    // of handles arriving GAP apart teach the scheduler.
    write_with_meta(&mut h, 4000, 100, 0);
    write_with_meta(&mut h, 4001, 100, 0);
    commit(&mut s, &mut h, 0, MS);
    s.arrival_gap_ns = GAP;
    let mut b = 5000;
    // Handles every GAP from `t0` but none in [silence.0, silence.1) after it: when the commit
    // went after t0, and its handles.
    let mut run = |s: &mut Scheduler, h: &mut TestHost, t0: u64, silence: (u64, u64)| -> (u64, u64) {
        let mut next = t0;
        let mut now = t0;
        let mut handles = 0;
        loop {
            while next <= now {
                if !(silence.0..silence.1).contains(&(next - t0)) {
                    // Each file's inode in a table block of its own, as many files' are.
                    write_with_meta(h, b, 100_000 + b, next);
                    b += 1;
                    handles += 1;
                }
                next += GAP;
            }
            match s.poll(h, now, 0, Lane::Commit) {
                JournalStep::Idle { wake_ns } => now = wake_ns.min(next),
                JournalStep::Work(w) => {
                    assert!(is_commit(&w));
                    s.finish(h, now + MS, w, Ok(()));
                    *s.effects() = Default::default();
                    s.arrival_gap_ns = GAP;
                    return (now - t0, handles);
                }
                JournalStep::Stop => panic!("stopped"),
            }
            assert!(now < t0 + S, "no commit within a second");
        }
    };
    let slice = quiet * GAP;
    // No silence: the window's whole length.
    let (waited, handles) = run(&mut s, &mut h, S, (0, 0));
    assert!(waited == 30 * MS && handles == 31, "arrivals all along: {waited} ns, {handles} handles");
    // Eight gaps without a handle, which a slice of four gaps falls in whole (so four gaps
    // would end the window here), and a slice of six does not.
    let (waited, handles) = run(&mut s, &mut h, 2 * S, (10 * MS, 10 * MS + 7 * GAP));
    assert!(waited == 30 * MS && handles == 24, "a silence shorter than a slice does not end it: {waited} ns, {handles} handles");
    // A silence of two slices ends it within it.
    let (waited, handles) = run(&mut s, &mut h, 3 * S, (10 * MS, 10 * MS + 2 * slice));
    assert!(waited > 10 * MS && waited <= 10 * MS + 2 * slice && handles == 10, "a silence of {quiet} gaps ends it: {waited} ns, {handles} handles");
}

#[test]
fn an_unsynced_transaction_commits_after_the_commit_interval() {
    let (mut s, mut h) = setup(config());
    write(&mut h, 5000, 128, S, false);
    assert_eq!(idle(s.poll(&mut h, 2 * S, 0, Lane::Commit)), 5 * S, "the write-back period comes first");
    let mut cfg = config();
    cfg.writeback_period_ns = 60 * S;
    let (mut s, mut h) = setup(cfg);
    write(&mut h, 5000, 128, S, false);
    assert_eq!(idle(s.poll(&mut h, 2 * S, 0, Lane::Commit)), 6 * S, "the interval counts from the first handle");
    assert!(is_commit(&work(s.poll(&mut h, 6 * S, 0, Lane::Commit))));
}

#[test]
fn a_handle_waiting_for_space_with_room_enough_is_woken_at_once() {
    let (mut s, mut h) = setup(config());
    write(&mut h, 5000, 4096, 0, true);
    commit(&mut s, &mut h, 0, MS);
    s.want_space();
    assert_eq!(idle(s.poll(&mut h, 2 * MS, 0, Lane::Commit)), 5 * S, "the log is not half full: nothing to checkpoint");
    assert!(s.effects().wake_all, "the handle looks again");
}

#[test]
fn a_handle_waiting_for_space_gets_a_checkpoint_then_is_woken() {
    let (mut s, mut h) = setup(config());
    let half = h.journal.placement().checkpoint_target();
    let (now, _) = fill_log(&mut s, &mut h, |j| j.free_blocks() < half);
    s.want_space();
    let w = work(s.poll(&mut h, now, 0, Lane::Commit));
    let JournalWork::Checkpoint(plan) = &w else { panic!("a checkpoint for space") };
    assert!(plan.written.iter().any(|(b, _)| b.get() == 5000), "the oldest owed block goes home");
    // The checkpoint lane is idle: checkpoints do not run beside commits here.
    assert_eq!(idle(s.poll(&mut h, now, 0, Lane::Checkpoint)), u64::MAX);
    s.finish(&mut h, now + MS, w, Ok(()));
    let fx = s.effects();
    assert!(fx.wake_all && fx.notify_commit_lane, "handles waiting for space look again");
    assert!(fx.counted.iter().any(|c| matches!(c, Counted::Checkpoint)));
    *fx = Default::default();
    assert!(h.journal.free_blocks() >= half, "the checkpoint made room");
}

#[test]
fn a_checkpoint_for_space_leaves_room_for_more_than_the_next_commit() {
    // The target is above the mark that starts a checkpoint: the commits right after one do
    // not start another (with the target at the mark, the next commit did, and a checkpoint
    // of a commit or two paid a flush each).
    let (mut s, mut h) = setup(config());
    let target = h.journal.placement().checkpoint_target();
    let (mut now, mut b) = fill_log(&mut s, &mut h, |j| j.space_low());
    s.want_space();
    let w = work(s.poll(&mut h, now, 0, Lane::Commit));
    assert!(matches!(w, JournalWork::Checkpoint(_)), "a checkpoint for space");
    s.finish(&mut h, now + MS, w, Ok(()));
    *s.effects() = Default::default();
    assert!(h.journal.free_blocks() >= target);
    for _ in 0..3 {
        now += MS;
        b += 1;
        write(&mut h, b, 4096, now, true);
        commit(&mut s, &mut h, now, 10);
        assert!(!h.journal.space_low(), "{} blocks free after a checkpoint for space (to {}) and a commit", h.journal.free_blocks(), target);
    }
}

#[test]
fn committed_blocks_go_home_once_expired_at_a_writeback_period() {
    let (mut s, mut h) = setup(config());
    write(&mut h, 5000, 4096, 0, true);
    commit(&mut s, &mut h, 0, MS);
    // At 5 s and 30 s nothing is 30 s old yet: no checkpoint.
    for t in [5 * S, 10 * S, 15 * S, 20 * S, 25 * S, 30 * S] {
        assert_eq!(idle(s.poll(&mut h, t, 0, Lane::Commit)), t + 5 * S, "at {t}");
    }
    let w = work(s.poll(&mut h, 35 * S, 0, Lane::Commit));
    assert!(matches!(w, JournalWork::Checkpoint(_)), "expired at 35 s");
}

#[test]
fn a_lazy_checkpoint_writes_home_only_when_idle() {
    let mut cfg = config();
    cfg.lazy_checkpoint = true;
    cfg.idle_checkpoint = true;
    let (mut s, mut h) = setup(cfg);
    write(&mut h, 5000, 4096, 0, true);
    commit(&mut s, &mut h, 0, MS);
    // Activity at 4 s: not idle for 2 s at the period of 5 s.
    assert_eq!(idle(s.poll(&mut h, 4 * S, 0, Lane::Commit)), 5 * S);
    h.activity += 1;
    assert_eq!(idle(s.poll(&mut h, 4 * S, 0, Lane::Commit)), 5 * S);
    assert_eq!(idle(s.poll(&mut h, 5 * S, 0, Lane::Commit)), 10 * S, "busy a second ago");
    let w = work(s.poll(&mut h, 10 * S, 0, Lane::Commit));
    assert!(matches!(w, JournalWork::Checkpoint(_)), "idle since 4 s");
    assert!(s.effects().counted.iter().any(|c| matches!(c, Counted::IdleCheckpoint)));
}

#[test]
fn a_forced_checkpoint_runs_until_everything_committed_is_home() {
    let (mut s, mut h) = setup(config());
    write(&mut h, 5000, 4096, 0, true);
    let tid = commit(&mut s, &mut h, 0, MS);
    s.force_checkpoint(tid);
    let w = work(s.poll(&mut h, 2 * MS, 0, Lane::Commit));
    assert!(matches!(w, JournalWork::Checkpoint(_)));
    s.finish(&mut h, 3 * MS, w, Ok(()));
    *s.effects() = Default::default();
    idle(s.poll(&mut h, 4 * MS, 0, Lane::Commit));
    assert!(s.effects().wake_all, "whoever asked for it is told it is done");
}

#[test]
fn a_failed_commit_on_the_hosts_own_device_stops_the_journal() {
    let (mut s, mut h) = setup(config());
    let tid = write(&mut h, 5000, 128, 0, true);
    let w = work(s.poll(&mut h, 0, 0, Lane::Commit));
    let e = DeviceError::Io { device: "journal".into(), op: "write", offset: 0, message: "EIO".into() };
    s.finish(&mut h, MS, w, Err(e));
    let why = h.read_only.clone().expect("read-only");
    assert!(why.starts_with(&format!("commit of transaction {tid} failed")), "{why}");
    assert!(h.journal.aborted().is_some());
    let fx = s.effects();
    assert!(fx.committed.is_none() && fx.wake_all && fx.deliver_syncs, "every waiter is told");
    *fx = Default::default();
    assert_eq!(idle(s.poll(&mut h, 2 * MS, 0, Lane::Commit)), u64::MAX, "nothing commits after an abort");
    s.stop();
    assert!(matches!(s.poll(&mut h, 3 * MS, 0, Lane::Commit), JournalStep::Stop));
}

#[test]
fn a_server_error_on_a_journal_without_fallback_stops_it_too() {
    let (mut s, mut h) = setup(config());
    write(&mut h, 5000, 128, 0, true);
    let w = work(s.poll(&mut h, 0, 0, Lane::Commit));
    let e = DeviceError::Remote(RemoteError::Network { addr: "127.0.0.1:1".into(), message: "connection reset".into() });
    s.finish(&mut h, MS, w, Err(e));
    assert!(h.read_only.is_some(), "a ring has no local journal to fall back to");
}

#[test]
fn unmount_commits_what_runs_then_stops() {
    let (mut s, mut h) = setup(config());
    write(&mut h, 5000, 128, 0, false);
    s.stop();
    assert!(s.stopping());
    let w = work(s.poll(&mut h, MS, 0, Lane::Commit));
    assert!(is_commit(&w), "the running transaction is not lost");
    s.finish(&mut h, 2 * MS, w, Ok(()));
    assert!(matches!(s.poll(&mut h, 3 * MS, 0, Lane::Commit), JournalStep::Stop));
    assert!(matches!(s.poll(&mut h, 3 * MS, 0, Lane::Checkpoint), JournalStep::Stop));
}

#[test]
fn an_abandoned_journal_stops_where_it_stands() {
    let (mut s, mut h) = setup(config());
    write(&mut h, 5000, 128, 0, true);
    s.abandon();
    assert!(matches!(s.poll(&mut h, MS, 0, Lane::Commit), JournalStep::Stop), "no I/O after the last handle went");
    assert_eq!(h.journal.committed_tid(), Tid::ZERO);
}

#[test]
fn checkpoints_beside_commits_need_the_thread_and_the_placement() {
    let mut cfg = config();
    cfg.checkpoint_thread = true;
    let (s, h) = setup(cfg);
    assert_eq!(s.beside(&h.journal), h.journal.placement().checkpoint_beside_commit());
    let (s, h) = setup(config());
    assert!(!s.beside(&h.journal));
}

/// Pipelined commits (`commit_pipeline=2`): a commit reported written lets the next one begin
/// while its flush is in flight; a third waits for room; a later flush that returns first
/// finishes both, oldest first; the earlier flush's report then changes nothing.
#[test]
fn pipelined_commits_finish_in_order_when_a_later_flush_returns() {
    let (mut s, mut h) = setup(SchedulerConfig { commit_pipeline: 2, ..config() });
    let t1 = write(&mut h, 5000, 128, 0, true);
    let w1 = work(s.poll(&mut h, 10, 0, Lane::Commit));
    assert!(is_commit(&w1));
    s.written(&mut h, w1);
    assert!(s.effects().committed.is_none(), "written is not durable");
    assert!(h.journal.committed_tid() < t1);
    let t2 = write(&mut h, 5001, 128, 20, true);
    let w2 = work(s.poll(&mut h, 30, 0, Lane::Commit));
    assert!(is_commit(&w2), "the next commit begins beside the first one's flush");
    assert!(s.effects().counted.iter().any(|c| matches!(c, Counted::Pipelined)));
    s.written(&mut h, w2);
    let t3 = write(&mut h, 5002, 128, 40, true);
    idle(s.poll(&mut h, 50, 0, Lane::Commit));
    *s.effects() = Default::default();
    s.flushed(&mut h, MS, t2, Ok(()));
    let fx = s.effects();
    assert_eq!(fx.committed, Some(t2));
    assert_eq!(fx.counted.iter().filter(|c| matches!(c, Counted::Commit { .. })).count(), 2, "both commits finish");
    assert!(fx.notify_handles && fx.deliver_syncs && fx.notify_commit_lane, "the commit lane has room again, and a commit is wanted");
    assert_eq!(h.journal.committed_tid(), t2);
    *s.effects() = Default::default();
    s.flushed(&mut h, MS, t1, Ok(()));
    assert!(s.effects().committed.is_none(), "an older flush's report finishes nothing more");
    assert_eq!(commit(&mut s, &mut h, 2 * MS, MS), t3);
}

/// A commit of many handles in flight keeps the next commit from beginning beside it (its
/// writers come back together: a commit begun now would split them); one of a few handles
/// does not (`PIPELINE_SMALL_COMMIT`).
#[test]
fn a_large_commit_in_flight_holds_the_next_one_until_its_flush_returns() {
    let (mut s, mut h) = setup(SchedulerConfig { commit_pipeline: 2, batch_handles: 64, ..config() });
    let big = PIPELINE_SMALL_COMMIT as u64 + 1;
    let mut t1 = Tid::ZERO;
    for k in 0..big {
        t1 = write(&mut h, 5000 + k, 128, 0, true);
    }
    let w1 = work(s.poll(&mut h, 10 * MS, 0, Lane::Commit));
    assert!(matches!(&w1, JournalWork::Commit { plan, .. } if plan.handles as u64 == big));
    s.written(&mut h, w1);
    write(&mut h, 6000, 128, 11 * MS, true);
    idle(s.poll(&mut h, 30 * MS, 0, Lane::Commit));
    *s.effects() = Default::default();
    s.flushed(&mut h, 31 * MS, t1, Ok(()));
    assert!(s.effects().notify_commit_lane, "the held commit is woken when the flush returns");
    // After a commit of several handles the next waits out a batching window first.
    let wake = idle(s.poll(&mut h, 60 * MS, 0, Lane::Commit));
    let w2 = work(s.poll(&mut h, wake, 0, Lane::Commit));
    assert!(matches!(&w2, JournalWork::Commit { plan, .. } if plan.handles == 1));
    assert!(!s.effects().counted.iter().any(|c| matches!(c, Counted::Pipelined)), "it began after the flush, not beside it");
    // A small commit in flight (this one, of one handle) lets the next begin beside it.
    s.written(&mut h, w2);
    write(&mut h, 6001, 128, 61 * MS, true);
    let wake = idle(s.poll(&mut h, 120 * MS, 0, Lane::Commit));
    let w3 = work(s.poll(&mut h, wake, 0, Lane::Commit));
    assert!(is_commit(&w3), "a commit begins beside a small one's flush");
    assert!(s.effects().counted.iter().any(|c| matches!(c, Counted::Pipelined)));
}

/// A pipelined flush that fails stops the journal; a later commit whose flush then succeeds
/// does not commit (it was written after the lost one).
#[test]
fn a_failed_pipelined_flush_stops_the_journal_and_nothing_after_it_commits() {
    let (mut s, mut h) = setup(SchedulerConfig { commit_pipeline: 2, ..config() });
    let t1 = write(&mut h, 5000, 128, 0, true);
    let w1 = work(s.poll(&mut h, 10, 0, Lane::Commit));
    s.written(&mut h, w1);
    let t2 = write(&mut h, 5001, 128, 20, true);
    let w2 = work(s.poll(&mut h, 30, 0, Lane::Commit));
    s.written(&mut h, w2);
    s.flushed(&mut h, MS, t1, Err(DeviceError::Io { device: "fs".into(), op: "flush", offset: 0, message: "EIO".into() }));
    assert!(h.journal.aborted().is_some() && h.read_only.is_some());
    s.flushed(&mut h, MS, t2, Ok(()));
    assert!(h.journal.committed_tid() < t1);
    assert!(s.effects().committed.is_none());
}

/// Unmount waits for the commits whose flush is in flight before the journal stops.
#[test]
fn a_stopping_journal_waits_for_its_pipelined_flushes() {
    let (mut s, mut h) = setup(SchedulerConfig { commit_pipeline: 4, ..config() });
    let t1 = write(&mut h, 5000, 128, 0, true);
    let w1 = work(s.poll(&mut h, 10, 0, Lane::Commit));
    s.written(&mut h, w1);
    s.stop();
    assert_eq!(idle(s.poll(&mut h, 20, 0, Lane::Commit)), u64::MAX);
    s.flushed(&mut h, MS, t1, Ok(()));
    assert!(s.effects().notify_commit_lane, "the stopping lane is woken");
    assert!(matches!(s.poll(&mut h, 2 * MS, 0, Lane::Commit), JournalStep::Stop));
}

//! Crash tests: every crash state the model allows (docs/DESIGN.md section 3), recovered and
//! checked against the content policy's guarantee and fsck.
//!
//! A workload runs on recording devices. After each operation the test notes how many device
//! events (writes and flushes) had happened, and after each fsync which file versions it
//! acknowledged. Then, for every event boundary (all flushes, writes sampled), it builds crash
//! states — unflushed writes all kept, all lost, each lost alone, each torn at sector
//! boundaries alone, and seeded mixtures — mounts each (recovery), checks the guarantee, checks
//! fsck, and for some states crashes again at every event of that recovery and recovers again.
//! A canary mount that skips the commit flush must make the checks fail.

mod common;
mod harness;
use harness::{concurrent_workload, enumerate, many_inodes_workload, workload, Journal};
use okeanos::journal::content::ContentConfig;

fn crash_test(policy: &str) {
    let cfg = ContentConfig::parse(policy).unwrap();
    // A 256-block journal wraps many times in this workload, so checkpoints under pressure and
    // stale blocks from earlier passes are part of every run.
    let run = workload(cfg, Journal::Internal { blocks: 256 }, 120, &|_| {}, 0x5eed + cfg.mode as u64);
    let events = run.recorder.events().len();
    let out = enumerate(cfg, &run, 250, 25);
    out.assert_clean(500);
    assert!(run.dirs_held > 0, "{policy}: no directory removed while held in the workload");
    // With differential metadata (records for the inode, not its whole block), small
    // transactions are fast commit blocks, and appends tell their inodes in notes: the states
    // above crash them (kept, lost, torn at sector boundaries) beside classic commits.
    if policy.contains("dmeta") {
        assert!(run.fast_commits > 0, "{policy}: no fast commit in the workload");
        assert!(run.fast_spans > 0, "{policy}: no fast commit span in the workload");
        assert!(run.inode_notes > 0, "{policy}: no inode note in the workload");
    }
    eprintln!("{policy}: {} crash states over {events} events ({} fast commits, {} spans, {} inode notes), no violation", out.states, run.fast_commits, run.fast_spans, run.inode_notes);
}

/// Differential metadata with an inode-table block changed in more than 32 places a
/// transaction: logged as records whose closest changes are joined (bytes the transaction did
/// not change replayed with the value they had), crashed at every state the model allows.
#[test]
fn crash_states_of_joined_metadata_records() {
    for policy in ["wasteless+dmeta", "selective+dmeta"] {
        let cfg = ContentConfig::parse(policy).unwrap();
        let run = many_inodes_workload(cfg, Journal::Internal { blocks: 256 }, 6, 0x10ed);
        assert!(run.joined_blocks > 0, "{policy}: no metadata block with joined records in the workload");
        let out = enumerate(cfg, &run, 40, 20);
        out.assert_clean(150);
        eprintln!("{policy}: {} crash states, {} blocks of joined records, {} fast commits, no violation", out.states, run.joined_blocks, run.fast_commits);
    }
}

#[test]
fn crash_states_writeback() {
    crash_test("writeback");
}

#[test]
fn crash_states_ordered() {
    crash_test("ordered");
}

#[test]
fn crash_states_data() {
    crash_test("data");
}

#[test]
fn crash_states_wasteless() {
    crash_test("wasteless");
}

#[test]
fn crash_states_wasteless_dmeta() {
    crash_test("wasteless+dmeta");
}

#[test]
fn crash_states_selective() {
    crash_test("selective");
}

#[test]
fn crash_states_selective_dmeta() {
    crash_test("selective+dmeta");
}

/// The canary: skipping the flush that makes a commit durable must be caught.
#[test]
fn canary_skipped_commit_flush_is_caught() {
    for policy in ["writeback", "ordered", "data", "wasteless", "selective+dmeta"] {
        let cfg = ContentConfig::parse(policy).unwrap();
        let run = workload(cfg, Journal::Internal { blocks: 256 }, 40, &|o| o.faults.skip_commit_flush = true, 0xca7 + cfg.mode as u64);
        let out = enumerate(cfg, &run, 60, 0);
        assert!(!out.violations.is_empty(), "{policy}: the crash tests did not notice a missing commit flush ({} states)", out.states);
    }
}

/// The fast commit block's canary: a recovery that takes a fast commit block on its header
/// alone (neither its hash nor its records' hashes checked) replays a torn one, whose later
/// sectors hold stale bytes. The sector-torn states must catch it.
#[test]
fn canary_fast_commit_taken_unchecked_is_caught() {
    for policy in ["wasteless+dmeta", "selective+dmeta"] {
        let cfg = ContentConfig::parse(policy).unwrap();
        let mut run = workload(cfg, Journal::Internal { blocks: 256 }, 120, &|_| {}, 0x5eed + cfg.mode as u64);
        assert!(run.fast_commits > 0 && run.fast_spans > 0, "{policy}: no fast commit ({}) or span ({}) to crash", run.fast_commits, run.fast_spans);
        run.recovery_faults.fast_commit_unchecked = true;
        let out = enumerate(cfg, &run, 250, 0);
        assert!(!out.violations.is_empty(), "{policy}: the crash tests did not notice torn fast commits taken unchecked ({} states)", out.states);
        eprintln!("{policy}: {} of {} states caught the canary, first: {}", out.violations.len(), out.states, out.violations[0]);
    }
}

/// The inode notes' canary: a recovery that replays a note's size and times but leaves the
/// inode's old checksum (docs/FORMAT.md, "Inode notes") leaves inodes that fail their check
/// after any crash that needs a note replayed. The crash states must catch it.
#[test]
fn canary_inode_note_without_its_checksum_is_caught() {
    for policy in ["wasteless+dmeta", "selective+dmeta"] {
        let cfg = ContentConfig::parse(policy).unwrap();
        let mut run = workload(cfg, Journal::Internal { blocks: 256 }, 80, &|_| {}, 0x0a7e + cfg.mode as u64);
        assert!(run.inode_notes > 0, "{policy}: no inode note to replay");
        run.recovery_faults.note_stale_crc = true;
        let out = enumerate(cfg, &run, 120, 0);
        assert!(!out.violations.is_empty(), "{policy}: the crash tests did not notice notes replayed without their checksums ({} states)", out.states);
        eprintln!("{policy}: {} of {} states caught the canary, first: {}", out.violations.len(), out.states, out.violations[0]);
    }
}

/// Fast commits off (`fast_commit=off`), and a journal made before the feature (its
/// superblock without FAST_COMMIT): classic descriptor and commit blocks only, and the crash
/// states hold as before.
#[test]
fn crash_states_without_fast_commits() {
    let cfg = ContentConfig::parse("wasteless+dmeta").unwrap();
    let run = workload(cfg, Journal::Internal { blocks: 256 }, 80, &|o| o.fast_commit = false, 0xfc0);
    assert_eq!(run.fast_commits, 0, "fast_commit=off writes none");
    enumerate(cfg, &run, 120, 0).assert_clean(200);
}

/// Background writeback (journal/writeback.rs) with a threshold of two blocks: ordered and
/// selective in-place data is written before its commit, most commits then only flush it, and
/// writers wait for the steps. Crashed at every sampled event (early writes kept, lost, torn,
/// their transaction committed or not), and again during recovery.
fn early_crash_test(policy: &str, fault: bool) -> harness::Outcome {
    let cfg = ContentConfig::parse(policy).unwrap();
    let run = workload(cfg, Journal::Internal { blocks: 256 }, 120, &|o| {
        o.dirty_background_bytes = Some(8192);
        o.faults.early_unwritten = fault;
    }, 0xea1 + cfg.mode as u64);
    assert!(run.early_writes > 0, "{policy}: no early write");
    eprintln!("{policy}: {} early writes", run.early_writes);
    enumerate(cfg, &run, 200, if fault { 0 } else { 25 })
}

#[test]
fn early_writeback_crash_states_ordered() {
    early_crash_test("ordered", false).assert_clean(150);
}


/// The canary: background writeback records blocks as written without writing them, so the
/// commits that trust it leave committed data out.
#[test]
fn canary_early_writes_recorded_but_not_written_is_caught() {
    let out = early_crash_test("ordered", true);
    assert!(!out.violations.is_empty(), "the crash tests did not notice in-place data never written ({} states)", out.states);
}

/// fdatasync of overwrites in place (journal/datasync.rs): the workload's overwritten file is
/// synced by fsync and fdatasync in turn; under ordered and writeback the fdatasyncs of
/// overwrites inside its size write the blocks in place and flush, with no commit. Crashed at
/// every sampled event (the in-place writes kept, lost, torn; the transaction holding their
/// timestamps committed or not), every synced byte must be there. The plain crash tests run
/// the same workload; this one says the steps happened.
#[test]
fn datasync_in_place_crash_states() {
    for policy in ["ordered", "writeback"] {
        let cfg = ContentConfig::parse(policy).unwrap();
        let run = workload(cfg, Journal::Internal { blocks: 256 }, 120, &|_| {}, 0xd5 + cfg.mode as u64);
        assert!(run.datasyncs_in_place > 0, "{policy}: no fdatasync was served in place");
        let out = enumerate(cfg, &run, 250, 25);
        out.assert_clean(500);
        eprintln!("{policy}: {} fdatasyncs in place, {} crash states, no violation", run.datasyncs_in_place, out.states);
    }
}

/// The canary: the in-place fdatasync without its flush returns with the overwrites still in
/// the device's cache; a crash then loses synced bytes.
#[test]
fn canary_datasync_in_place_without_flush_is_caught() {
    let cfg = ContentConfig::parse("ordered").unwrap();
    let run = workload(cfg, Journal::Internal { blocks: 256 }, 120, &|o| o.faults.datasync_no_flush = true, 0xd5 + cfg.mode as u64);
    assert!(run.datasyncs_in_place > 0, "no fdatasync was served in place");
    let out = enumerate(cfg, &run, 250, 0);
    assert!(!out.violations.is_empty(), "the crash tests did not notice an in-place fdatasync without a flush ({} states)", out.states);
    eprintln!("{} of {} crash states caught, e.g. {}", out.violations.len(), out.states, out.violations[0]);
}

/// The canary of the checker itself: a commit that goes before its ordered data leaves, in the
/// crash states between them, committed sizes over blocks never written (zeros on a fresh
/// disk). The checker compares every synced byte, zeros included, so it must catch this under
/// ordered and selective (the default mode and the one that writes large sequences in place).
#[test]
fn canary_commit_before_ordered_data_is_caught() {
    for policy in ["ordered", "selective"] {
        let cfg = ContentConfig::parse(policy).unwrap();
        let run = workload(cfg, Journal::Internal { blocks: 256 }, 60, &|o| o.faults.ordered_after_commit = true, 0x0bd + cfg.mode as u64);
        let out = enumerate(cfg, &run, 120, 0);
        assert!(!out.violations.is_empty(), "{policy}: the crash tests did not notice data written after its commit ({} states)", out.states);
        eprintln!("{policy}: {} of {} crash states caught, e.g. {}", out.violations.len(), out.states, out.violations[0]);
    }
}

/// Wasteless with `fresh_blocks=in_place` (docs/JOURNALING.md, "New blocks in place"): a whole
/// block a transaction allocates is written home instead of logged. Nothing committed refers
/// to it until that commit, so wasteless's guarantees must hold in every crash state: every
/// synced write whole, every write call atomic. The mixed workload on the internal and on the
/// external journal (whose commit and in-place data are on two devices crashed apart), and
/// whole-block appends and rewrites (a new block's later updates logged and checkpointed over
/// it), each in both forms: beside the commit under its flush, named by in-place tags that
/// recovery checks in the newest transaction (the default; docs/FORMAT.md, "In-place tags"),
/// and written and flushed before the commit (`in_place_tags=off`, as on journals without the
/// feature).
#[test]
fn crash_states_wasteless_fresh_blocks_in_place() {
    for policy in ["wasteless", "wasteless+dmeta"] {
        let cfg = ContentConfig { fresh_in_place: true, ..ContentConfig::parse(policy).unwrap() };
        for tags in [true, false] {
            let form: &dyn Fn(&mut okeanos::MountOptions) = if tags { &|_| {} } else { &|o| o.in_place_tags = false };
            for (journal, seed) in [(Journal::Internal { blocks: 256 }, 0xf1e5), (Journal::External { blocks: 256 }, 0xf1e6)] {
                let run = workload(cfg, journal, 120, form, seed + cfg.dmeta as u64);
                assert!(run.commit_in_place_blocks > 0, "{policy}: no new block went in place");
                assert_eq!(run.commit_in_place_tagged_blocks > 0, tags, "{policy}: in-place tags used ({}) where they were {}", run.commit_in_place_tagged_blocks, if tags { "on" } else { "off" });
                let out = enumerate(cfg, &run, 250, 25);
                out.assert_clean(500);
                eprintln!("{policy} fresh_blocks=in_place, in_place_tags={tags} {journal:?}: {} crash states, {} blocks in place ({} tagged), no violation", out.states, run.commit_in_place_blocks, run.commit_in_place_tagged_blocks);
            }
            let run = harness::block_workload(cfg, Journal::Internal { blocks: 256 }, 60, form, 0xf1e7, false);
            assert!(run.commit_in_place_blocks > 0, "{policy}: no new block went in place in whole-block appends");
            assert_eq!(run.commit_in_place_tagged_blocks > 0, tags);
            let out = enumerate(cfg, &run, 200, 10);
            out.assert_clean(400);
            eprintln!("{policy} fresh_blocks=in_place, in_place_tags={tags}, whole blocks: {} crash states, {} blocks in place, no violation", out.states, run.commit_in_place_blocks);
        }
    }
}

/// The in-place tags' canary: a recovery that replays the newest transaction without reading
/// its new blocks home (`in_place_unchecked`) takes a commit whose flush the crash cut short,
/// with blocks it never wrote, for a whole one: the sector- and block-torn states between the
/// stage's writes and its flush must catch it, on the internal and on the external journal.
#[test]
fn canary_in_place_blocks_unchecked_is_caught() {
    let cfg = ContentConfig { fresh_in_place: true, ..ContentConfig::parse("wasteless+dmeta").unwrap() };
    for (journal, seed) in [(Journal::Internal { blocks: 256 }, 0xf1e9), (Journal::External { blocks: 256 }, 0xf1ea)] {
        let mut run = harness::block_workload(cfg, journal, 40, &|_| {}, seed, false);
        assert!(run.commit_in_place_tagged_blocks > 0, "{journal:?}: no in-place tag to check");
        run.recovery_faults.in_place_unchecked = true;
        let out = enumerate(cfg, &run, 120, 0);
        assert!(!out.violations.is_empty(), "{journal:?}: the crash tests did not notice in-place blocks left unchecked ({} states)", out.states);
        eprintln!("{journal:?}: {} of {} crash states caught, e.g. {}", out.violations.len(), out.states, out.violations[0]);
    }
}

/// The canary of the form without tags: the new blocks written after the commit record
/// (`ordered_after_commit`) leave committed sizes over blocks never written in the states
/// between, which the checker must see. (With in-place tags the same fault is harmless:
/// recovery finds the newest commit's blocks missing and drops it, which is what the tags
/// are for; their canary is the one above.)
#[test]
fn canary_fresh_blocks_after_their_commit_is_caught() {
    let cfg = ContentConfig { fresh_in_place: true, ..ContentConfig::parse("wasteless+dmeta").unwrap() };
    let run = harness::block_workload(
        cfg,
        Journal::Internal { blocks: 256 },
        40,
        &|o| {
            o.faults.ordered_after_commit = true;
            o.in_place_tags = false;
        },
        0xf1e8,
        false,
    );
    assert!(run.commit_in_place_blocks > 0);
    let out = enumerate(cfg, &run, 120, 0);
    assert!(!out.violations.is_empty(), "the crash tests did not notice new blocks written after their commit ({} states)", out.states);
    eprintln!("{} of {} crash states caught, e.g. {}", out.violations.len(), out.states, out.violations[0]);
}

/// The external journal: the file system and the journal are two recorded devices, crashed
/// independently (unflushed writes of each kept, lost, torn), so a commit on the journal device
/// whose ordered data on the other device did not reach it, or whose checkpoint wrote home what
/// the journal had not made durable, shows. Every policy, and a second crash during recovery.
fn external_crash_test(policy: &str) {
    let cfg = ContentConfig::parse(policy).unwrap();
    let run = workload(cfg, Journal::External { blocks: 256 }, 100, &|_| {}, 0xe47 + cfg.mode as u64);
    let out = enumerate(cfg, &run, 200, 25);
    out.assert_clean(400);
    eprintln!("external {policy}: {} crash states, no violation", out.states);
}

#[test]
fn external_crash_states_every_policy() {
    for policy in ["writeback", "ordered", "data", "wasteless", "wasteless+dmeta", "selective", "selective+dmeta"] {
        external_crash_test(policy);
    }
}

/// The external journal's canary: without the commit flush (on the journal device), synced
/// data is lost in some crash state.
#[test]
fn canary_external_skipped_commit_flush_is_caught() {
    for policy in ["ordered", "data", "wasteless+dmeta"] {
        let cfg = ContentConfig::parse(policy).unwrap();
        let run = workload(cfg, Journal::External { blocks: 256 }, 40, &|o| o.faults.skip_commit_flush = true, 0xe48 + cfg.mode as u64);
        let out = enumerate(cfg, &run, 60, 0);
        assert!(!out.violations.is_empty(), "{policy}: the crash tests did not notice a missing commit flush on the external journal ({} states)", out.states);
    }
}

/// Pipelined commits (`commit_pipeline=4`): three threads syncing at once, so that commits are
/// written while earlier commits' flushes are in flight on flusher threads. Every crash state
/// keeps every acknowledged sync (a flush covers only the commits written before it began,
/// and syncs are answered in commit order).
fn pipelined_crash_test(policy: &str, journal: Journal, canary: bool) -> harness::Outcome {
    pipelined_crash_test_with(policy, journal, &move |o| o.faults.pipeline_answer_before_flush = canary)
}

fn pipelined_crash_test_with(policy: &str, journal: Journal, fault: &(dyn Fn(&mut okeanos::MountOptions) + Sync)) -> harness::Outcome {
    let cfg = ContentConfig::parse(policy).unwrap();
    let faults = move |o: &mut okeanos::MountOptions| {
        o.commit_pipeline = 4;
        // Every overlap the threads make, not only beside small commits: the ordering rules
        // are the same whatever the size.
        o.pipeline_any_size = true;
        fault(o);
    };
    // Threads decide how many commits overlap: a run where none did is run again (a canary
    // that answers before its flush finishes its commits early, so none may overlap there).
    let mut tries = 0;
    let run = loop {
        let seed = 0x919e + cfg.mode as u64 + tries;
        eprintln!("{policy}: seed {seed:#x}");
        let run = concurrent_workload(cfg, journal, 45, &faults, seed);
        tries += 1;
        if run.pipelined_commits > 0 || tries == 3 {
            break run;
        }
    };
    let mut probe = okeanos::MountOptions::default();
    fault(&mut probe);
    if !probe.faults.pipeline_answer_before_flush {
        assert!(run.pipelined_commits > 0, "{policy}: in three runs no commit began beside an earlier commit's flush");
    }
    let events = run.recorder.events().len();
    let out = enumerate(cfg, &run, 120, 0);
    eprintln!("{policy}: {} crash states over {events} events, {} pipelined commits, {} violations", out.states, run.pipelined_commits, out.violations.len());
    out
}

#[test]
fn pipelined_commits_crash_states() {
    // Data journaling's commits are those of wasteless with whole blocks: the crash states of
    // ordered (a stage of in-place data before the commit) and wasteless+dmeta (fast commits)
    // cover both kinds of commit stage.
    for policy in ["ordered", "wasteless+dmeta"] {
        pipelined_crash_test(policy, Journal::Internal { blocks: 256 }, false).assert_clean(150);
    }
    pipelined_crash_test("wasteless+dmeta", Journal::External { blocks: 256 }, false).assert_clean(150);
}

#[test]
fn canary_pipelined_answer_before_flush_is_caught() {
    let out = (0..3).map(|_| pipelined_crash_test("wasteless+dmeta", Journal::Internal { blocks: 256 }, true)).find(|out| !out.violations.is_empty());
    let out = out.expect("answering a pipelined commit before its flush must lose acknowledged data in some crash state");
    eprintln!("canary caught: {}", out.violations[0]);
}

/// Recovery must know the crashed mount pipelined: without the depth in the journal
/// superblock, a commit that landed beside an earlier one torn by the crash reads as damage in
/// the middle of the log, and the mount is refused.
#[test]
fn canary_pipeline_unrecorded_is_caught() {
    // Which commits overlap is the threads' doing: up to three runs for one that tears a
    // commit beside a later one that landed.
    let out = (0..3)
        .map(|_| pipelined_crash_test_with("wasteless+dmeta", Journal::Internal { blocks: 256 }, &|o| o.faults.pipeline_unrecorded = true))
        .find(|out| !out.violations.is_empty());
    let out = out.expect("a pipeline's torn tail must read as damage when the pipeline is not recorded");
    eprintln!("canary caught: {}", out.violations[0]);
}

/// An fdatasync asks only for the blocks its file overwrote since its last in-place request
/// (fs/mod.rs, `Overwrites`); with none, it waits for that request instead of asking again.
/// Each sync below is registered without waiting (`fsync_then`), twice in a row after one
/// overwrite, so the second finds the first's request still queued or in flight. At the
/// moment either is answered, the device events so far must hold a write of the block's new
/// bytes followed by a flush. The canary answers the second at once.
fn asked_datasync_run(canary: bool) -> (usize, usize) {
    use okeanos::device::{CrashEvent, CrashRecorder};
    use okeanos::{Device, MemDevice, MkfsOptions, MountOptions, Okeanos};
    use std::sync::{mpsc, Arc};
    let dev = MemDevice::new(16 << 20);
    Okeanos::mkfs(&dev, None, &MkfsOptions { journal_blocks: 256, ..Default::default() }).unwrap();
    let rec = CrashRecorder::new();
    let recorded: Arc<dyn Device> = Arc::new(rec.device("fs", dev.snapshot()));
    let mut opts = MountOptions::parse("data=ordered").unwrap();
    opts.faults.datasync_asked_not_awaited = canary;
    let fs = Okeanos::mount(recorded, None, opts).unwrap();
    let f = fs.open_path("/f", true, false, false).unwrap();
    f.write_at(0, &vec![0u8; 16 * 4096]).unwrap();
    f.fsync().unwrap();
    let mut answered_early = 0;
    let rounds = 60;
    for round in 0..rounds as u64 {
        // A block of bytes that appear nowhere else (a pattern of the round's number).
        let block = (round % 16) * 4096;
        let bytes: Vec<u8> = (0..4096).map(|i| (((round + 1) * 0x9e37) >> (8 * (i % 2))) as u8 ^ (i / 2 % 251) as u8).collect();
        f.write_at(block, &bytes).unwrap();
        let (tx, rx) = mpsc::channel();
        for _ in 0..2 {
            let (tx, rec) = (tx.clone(), rec.clone());
            fs.fsync_then(f.ino(), true, Box::new(move |r| {
                let _ = tx.send((r, rec.events().len()));
            }));
        }
        for _ in 0..2 {
            let (r, at) = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("a sync answered");
            r.unwrap();
            let events = rec.events();
            let written = events[..at].iter().rposition(|e| matches!(e, CrashEvent::Write { data, .. } if data.windows(bytes.len()).any(|w| w == &bytes[..])));
            let durable = written.is_some_and(|w| events[w..at].iter().any(|e| matches!(e, CrashEvent::Flush { .. })));
            if !durable {
                answered_early += 1;
            }
        }
    }
    let c = fs.counters();
    assert!(c.datasyncs_in_place > 0, "no fdatasync was served in place");
    // A blocking fdatasync after one that completed, with nothing written between: the first
    // made the blocks durable, so the second neither asks for a step nor flushes.
    f.write_at(4096, &[7u8; 100]).unwrap();
    f.fdatasync().unwrap();
    let (steps, events) = (fs.counters().datasync_steps, rec.events().len());
    f.fdatasync().unwrap();
    assert_eq!(fs.counters().datasync_steps, steps, "an fdatasync with nothing new took a step");
    assert!(!rec.events()[events..].iter().any(|e| matches!(e, CrashEvent::Flush { .. })), "an fdatasync with nothing new flushed");
    drop(f);
    fs.unmount().unwrap();
    (answered_early, rounds)
}

#[test]
fn an_fdatasync_with_nothing_new_waits_for_the_request_before_it() {
    let (early, rounds) = asked_datasync_run(false);
    assert_eq!(early, 0, "{early} fdatasyncs of {} answered before their bytes were written and flushed", 2 * rounds);
}

/// Under load, fdatasyncs of overwrites go in place, not to a commit (fs/mod.rs,
/// `datasync_need`): two files' syncs registered back to back find the first's step asked for
/// and still to run (the rule before sent the second to a commit whenever a step was asked
/// for or a commit was in flight), and share steps; none commits. Each must still be answered
/// only after its file's new bytes were written and flushed, also when the steps' flushes go
/// to flusher threads (`commit_pipeline=4`). Returns the syncs answered early, and the
/// commits and in-place syncs the rounds made.
fn steps_under_load_run(opts: &str, canary: bool) -> (usize, u64, u64, u64) {
    use okeanos::device::{CrashEvent, CrashRecorder};
    use okeanos::{Device, MemDevice, MkfsOptions, MountOptions, Okeanos};
    use std::sync::{mpsc, Arc};
    let dev = MemDevice::new(16 << 20);
    Okeanos::mkfs(&dev, None, &MkfsOptions { journal_blocks: 256, ..Default::default() }).unwrap();
    let rec = CrashRecorder::new();
    let recorded: Arc<dyn Device> = Arc::new(rec.device("fs", dev.snapshot()));
    let mut opts = MountOptions::parse(opts).unwrap();
    opts.faults.pipeline_answer_before_flush = canary;
    let fs = Okeanos::mount(recorded, None, opts).unwrap();
    let files: Vec<_> = (0..2).map(|i| fs.open_path(&format!("/f{i}"), true, false, false).unwrap()).collect();
    for f in &files {
        f.write_at(0, &vec![0u8; 16 * 4096]).unwrap();
    }
    fs.sync().unwrap();
    let before = fs.counters();
    let rounds = 30u64;
    let mut early = 0;
    for round in 0..rounds {
        let (tx, rx) = mpsc::channel();
        let mut patterns = Vec::new();
        for (i, f) in files.iter().enumerate() {
            let bytes: Vec<u8> = (0..4096u64).map(|k| ((round * 2 + i as u64 + 1) * 0x9e37 >> (8 * (k % 2))) as u8 ^ (k / 2 % 251) as u8).collect();
            f.write_at((round % 16) * 4096, &bytes).unwrap();
            patterns.push(bytes);
        }
        for (i, f) in files.iter().enumerate() {
            let (tx, rec) = (tx.clone(), rec.clone());
            fs.fsync_then(f.ino(), true, Box::new(move |r| {
                let _ = tx.send((i, r, rec.events().len()));
            }));
        }
        for _ in 0..files.len() {
            let (i, r, at) = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("a sync answered");
            r.unwrap();
            let events = rec.events();
            let bytes = &patterns[i];
            let written = events[..at].iter().rposition(|e| matches!(e, CrashEvent::Write { data, .. } if data.windows(bytes.len()).any(|w| w == &bytes[..])));
            if !written.is_some_and(|w| events[w..at].iter().any(|e| matches!(e, CrashEvent::Flush { .. }))) {
                early += 1;
            }
        }
    }
    let after = fs.counters();
    drop(files);
    fs.unmount().unwrap();
    eprintln!("{} pipelined flushes", after.pipelined_flushes - before.pipelined_flushes);
    (early, after.commits - before.commits, after.datasyncs_in_place - before.datasyncs_in_place, after.datasync_steps - before.datasync_steps)
}

#[test]
fn fdatasyncs_of_overwrites_under_load_share_steps_not_commits() {
    for opts in ["data=ordered,commit=60", "data=ordered,commit=60,commit_pipeline=4", "data=writeback,commit=60,commit_pipeline=2"] {
        let (early, commits, in_place, steps) = steps_under_load_run(opts, false);
        assert_eq!(early, 0, "{opts}: {early} fdatasyncs answered before their bytes were written and flushed");
        assert_eq!(commits, 0, "{opts}: fdatasyncs of overwrites committed under load");
        assert_eq!(in_place, 60, "{opts}: not every fdatasync went in place");
        eprintln!("{opts}: {in_place} fdatasyncs in {steps} steps, no commit");
    }
}

/// The canary: with the steps' flushes pipelined, a flusher that answers before it flushes
/// must be caught.
#[test]
fn canary_pipelined_steps_answering_before_the_flush_are_caught() {
    let (early, _, in_place, _) = steps_under_load_run("data=ordered,commit=60,commit_pipeline=4", true);
    assert!(in_place > 0, "no fdatasync went in place");
    assert!(early > 0, "no fdatasync of {in_place} was answered early with the flusher answering before its flush");
    eprintln!("{early} of {in_place} fdatasyncs answered early");
}

/// The canary: the second fdatasync answered at once, before the first's step wrote anything.
#[test]
fn canary_an_fdatasync_not_waiting_for_the_request_before_it_is_caught() {
    let (early, rounds) = asked_datasync_run(true);
    assert!(early > 0, "no fdatasync of {} was answered early with the wait left out", 2 * rounds);
    eprintln!("{early} of {} fdatasyncs answered early", 2 * rounds);
}

/// Staged appends (`stage_appends=on`, engine/stage.rs): three threads appending and syncing
/// at once, most appends small enough to stay in their file's last block or the block after
/// it and so staged beside the state lock, folded in by the next thread to take it (starting
/// the next block, its space set aside, in some folds), and synced without it. Every crash
/// state keeps every acknowledged sync and the appends of each file in order.
fn staged_crash_test(policy: &str, journal: Journal, early: bool) -> harness::Outcome {
    let cfg = ContentConfig::parse(policy).unwrap();
    let faults = move |o: &mut okeanos::MountOptions| {
        o.stage_appends = true;
        o.faults.stage_sync_early = early;
    };
    let run = concurrent_workload(cfg, journal, 45, &faults, 0x57a9 + cfg.mode as u64);
    assert!(run.staged_appends > 20, "{policy}: only {} appends were staged", run.staged_appends);
    assert!(run.staged_new_blocks > 5, "{policy}: only {} folds of staged appends started a block", run.staged_new_blocks);
    let events = run.recorder.events().len();
    let out = enumerate(cfg, &run, 120, 0);
    eprintln!("{policy}: {} crash states over {events} events, {} staged appends, {} folds starting a block, {} violations", out.states, run.staged_appends, run.staged_new_blocks, out.violations.len());
    out
}

#[test]
fn staged_appends_crash_states() {
    for policy in ["ordered", "data", "wasteless+dmeta", "selective+dmeta"] {
        staged_crash_test(policy, Journal::Internal { blocks: 256 }, false).assert_clean(100);
    }
}

/// The canary: a sync of a staged file that waits for the transaction before the one holding
/// its newest append returns before that append is durable; the crash states must catch it.
#[test]
fn canary_staged_sync_one_commit_early_is_caught() {
    let out = staged_crash_test("wasteless+dmeta", Journal::Internal { blocks: 256 }, true);
    assert!(!out.violations.is_empty(), "a staged sync answered one commit early must lose an acknowledged append in some crash state");
}

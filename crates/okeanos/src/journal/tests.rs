//! Unit tests of journaling rules that the crash tests reach only rarely.

use super::checkpoint::CheckpointGoal;
use super::content::ContentConfig;
use super::placement::{LogRegion, Ring};
use super::{Journal, JournalConfig};
use crate::cache::{BufKind, Cache};
use crate::ids::HomeBlock;
use crate::format::journal::{jfeature, JournalSuperblock};

const BS: usize = 4096;

pub(super) fn journal(policy: &str) -> (Journal, Cache) {
    journal_with(ContentConfig::parse(policy).unwrap())
}

/// As [`journal`], writing small transactions as fast commits (up to the longest span).
pub(super) fn fast_journal(policy: &str) -> (Journal, Cache) {
    let (mut j, c) = journal(policy);
    j.cfg.fast_commit_blocks = crate::format::journal::MAX_FAST_BLOCKS;
    (j, c)
}

fn journal_with(content: ContentConfig) -> (Journal, Cache) {
    let jsb = JournalSuperblock {
        version: 1,
        features: jfeature::TX_CHECKSUM | jfeature::MULTIWRITE,
        block_size: BS as u32,
        total_blocks: 1024,
        first: crate::ids::LogPos::new(1),
        sequence: super::transaction::Tid::new(1),
        start: crate::ids::LogPos::ZERO,
        uuid: [0; 16],
        fs_uuid: [0; 16],
        errno: 0,
        pipeline: 0,
        remote: Default::default(),
    };
    let region = LogRegion::internal(2, 1024);
    let cfg = JournalConfig::new(region.ring_len(), BS);
    (Journal::new(cfg, content.policy(), Box::new(Ring::new(region, jsb)), super::transaction::Tid::new(1)), Cache::new(BS, 1024))
}

fn commit(j: &mut Journal, c: &mut Cache) {
    let plan = j.commit_begin(c, 0).expect("something to commit");
    assert!(plan.io.write_count() > 0);
    j.commit_finish(c, 0);
}

/// Selective: a block whose journaled sequence reached its final location while a record of
/// it stays in the log (owned by an older transaction, checkpointed first) starts an in-place
/// sequence; its older logged copies must be revoked, or replay would put them back over the
/// in-place data once that data is synced.
#[test]
fn in_place_after_journaled_sequence_revokes_older_copies() {
    let (mut j, mut c) = journal("selective");
    let (b, m) = (HomeBlock::new(5000), HomeBlock::new(6000));
    c.insert(b, vec![0; BS], BufKind::Data);
    c.insert(m, vec![0; BS], BufKind::Meta);
    // T1: a small update starts a journaled sequence for b.
    let t = j.handle_start(super::transaction::Credits::blocks(4), 0).unwrap();
    j.dirty_data(&mut c, b, 0, 100, 100, false, false);
    j.handle_stop(t).unwrap();
    commit(&mut j, &mut c);
    // T2: another record of b (T1 keeps owning b) and a metadata block owned by T2.
    let t = j.handle_start(super::transaction::Credits::blocks(4), 0).unwrap();
    j.dirty_data(&mut c, b, 100, 100, 100, false, false);
    j.dirty_metadata(&mut c, m, false);
    j.handle_stop(t).unwrap();
    commit(&mut j, &mut c);
    // Checkpoint only T1: b reaches its final location; T2 and its record of b stay.
    let plan = j.checkpoint_begin(&c, CheckpointGoal::Space { target_free: j.free_blocks() + 1 }).unwrap();
    assert_eq!(plan.release, 1);
    j.checkpoint_finish(&mut c, plan);
    assert_eq!(j.log.len(), 1, "T2 is still in the log");
    assert!(c.peek(b).unwrap().seq.is_none(), "b's journaled sequence ended at its final location");
    // T3: a whole-block update starts an in-place sequence for b.
    let t = j.handle_start(super::transaction::Credits { blocks: 4, revokes: 1 }, 0).unwrap();
    j.dirty_data(&mut c, b, 0, BS, BS, false, false);
    j.handle_stop(t).unwrap();
    assert!(j.running.final_data.contains(&b), "in place, ordered");
    assert!(j.running.revoked.contains(&b), "T2's record of b must not replay over the in-place data");
}

/// Wasteless with `fresh_blocks=in_place` (docs/JOURNALING.md, "New blocks in place"): a whole
/// block the running transaction allocated goes in place before the commit; a whole block that
/// was allocated before, a part of a new block, and a new block already logged by this
/// transaction are logged; a new block this transaction writes in place stays in place for its
/// later updates; the next transaction logs it again; without the option nothing goes in place.
#[test]
fn wasteless_writes_whole_new_blocks_in_place_with_fresh_blocks_in_place() {
    let cc = ContentConfig { fresh_in_place: true, ..ContentConfig::parse("wasteless+dmeta").unwrap() };
    let (mut j, mut c) = journal_with(cc);
    let [new_whole, old_whole, new_part, part_then_whole] = [5000, 5001, 5002, 5003].map(HomeBlock::new);
    for b in [new_whole, old_whole, new_part, part_then_whole] {
        c.insert(b, vec![0; BS], BufKind::Data);
    }
    let t = j.handle_start(super::transaction::Credits { blocks: 8, revokes: 4 }, 0).unwrap();
    j.dirty_data(&mut c, new_whole, 0, BS, BS, true, false);
    j.dirty_data(&mut c, new_whole, 10, 100, 100, false, false);
    j.dirty_data(&mut c, old_whole, 0, BS, BS, false, false);
    j.dirty_data(&mut c, new_part, 0, 100, 100, true, false);
    j.dirty_data(&mut c, part_then_whole, 0, 100, 100, true, false);
    j.dirty_data(&mut c, part_then_whole, 0, BS, BS, false, false);
    j.handle_stop(t).unwrap();
    let r = &j.running;
    assert!(r.final_data.contains(&new_whole), "a whole new block goes in place");
    assert!(!r.journaled.contains(&new_whole) && !r.ranges.contains_key(&new_whole), "and its later update in the transaction too");
    assert!(r.journaled.contains(&old_whole) && !r.final_data.contains(&old_whole), "a whole block allocated before is logged");
    assert!(r.ranges.contains_key(&new_part) && !r.final_data.contains(&new_part), "a part of a new block is a record");
    assert!(r.journaled.contains(&part_then_whole) && !r.final_data.contains(&part_then_whole), "a new block already logged stays logged");
    commit(&mut j, &mut c);
    // The next transaction: the block is no longer new, so a whole update of it is logged.
    let t = j.handle_start(super::transaction::Credits::blocks(4), 0).unwrap();
    j.dirty_data(&mut c, new_whole, 0, BS, BS, false, false);
    j.handle_stop(t).unwrap();
    assert!(j.running.journaled.contains(&new_whole) && !j.running.final_data.contains(&new_whole), "committed, the block is logged again");
    // Without the option, wasteless logs a whole new block.
    let (mut j, mut c) = journal("wasteless+dmeta");
    c.insert(new_whole, vec![0; BS], BufKind::Data);
    let t = j.handle_start(super::transaction::Credits::blocks(4), 0).unwrap();
    j.dirty_data(&mut c, new_whole, 0, BS, BS, true, false);
    j.handle_stop(t).unwrap();
    assert!(j.running.journaled.contains(&new_whole) && j.running.final_data.is_empty());
}

/// In-place tags (docs/FORMAT.md, "In-place tags"): with the journal allowing them, a commit
/// with new blocks in place writes them in its one stage, beside its log blocks and under its
/// flush, and names each by an in-place tag carrying the hash of what it writes home: in a
/// fast commit where the transaction fits one (full tags then, not compact ones), in a
/// descriptor where it does not. Without them, an ordered stage with its own flush goes first.
#[test]
fn new_blocks_in_place_go_beside_their_commit_named_by_in_place_tags() {
    use crate::format::journal::{self as jf, Descriptor, FastCommit, JBlockType};
    use super::plan::DevId;
    let cc = ContentConfig { fresh_in_place: true, ..ContentConfig::parse("wasteless+dmeta").unwrap() };
    for (tags, fast) in [(true, true), (true, false), (false, true)] {
        let (mut j, mut c) = journal_with(cc);
        j.cfg.in_place_tags = tags;
        j.cfg.fast_commit_blocks = if fast { jf::MAX_FAST_BLOCKS } else { 0 };
        j.cfg.fast_commit_compact = true;
        let [a, b, rec] = [6000, 6001, 6002].map(HomeBlock::new);
        for x in [a, b, rec] {
            c.insert(x, vec![0; BS], BufKind::Data);
        }
        let t = j.handle_start(super::transaction::Credits { blocks: 8, revokes: 4 }, 0).unwrap();
        for (x, byte) in [(a, 0xa1u8), (b, 0xb2)] {
            c.get(x).unwrap().data = std::sync::Arc::new(vec![byte; BS]);
            j.dirty_data(&mut c, x, 0, BS, BS, true, false);
        }
        j.dirty_data(&mut c, rec, 0, 100, 100, true, false);
        j.handle_stop(t).unwrap();
        let plan = j.commit_begin(&mut c, 1).expect("a commit");
        let stages = &plan.io.stages;
        let home: Vec<crate::ids::DevBlock> = stages.iter().flat_map(|s| &s.writes).filter(|w| w.dev == DevId::Fs && w.kind == super::plan::BlockKind::FinalData).map(|w| w.block).collect();
        assert_eq!(home, [a, b].map(crate::ids::DevBlock::home), "tags {tags}, fast {fast}: the new blocks written home");
        assert_eq!(plan.records.in_place_tagged, if tags { 2 } else { 0 });
        if !tags {
            assert_eq!(stages.len(), 2, "an ordered stage, then the commit's");
            assert_eq!(stages[0].flush, [DevId::Fs]);
            continue;
        }
        assert_eq!(stages.len(), 1, "one stage, one flush");
        let log: Vec<&[u8]> = stages[0].writes.iter().filter(|w| w.kind != super::plan::BlockKind::FinalData).map(|w| w.data.as_slice()).collect();
        let tags_of: Vec<jf::Tag> = if fast {
            assert_eq!(log.len(), 1, "one fast commit block");
            let f = FastCommit::decode(log[0], true).unwrap();
            assert!(!f.compact, "in-place tags need full tags");
            f.tags
        } else {
            assert_eq!(jf::header(log[0]).map(|h| h.0), Some(JBlockType::Descriptor));
            Descriptor::decode(log[0]).unwrap().tags
        };
        let in_place: Vec<(HomeBlock, u32)> = tags_of.iter().filter(|t| t.is_in_place()).map(|t| (t.fs_block, t.data_hash)).collect();
        assert_eq!(in_place, [(a, jf::data_hash(a, 0, &[0xa1; BS])), (b, jf::data_hash(b, 0, &[0xb2; BS]))], "fast {fast}");
        assert!(tags_of.iter().any(|t| t.is_multiwrite() && t.fs_block == rec), "the record beside them");
    }
}

/// The in-place fdatasync (journal/datasync.rs) under the state of the test above: a block
/// written in place while a record of it is still in the log must not be made durable without
/// a commit. Written in place and flushed alone, a crash before the commit that carries its
/// revoke would let recovery replay the older record over the synced bytes. Once that commit
/// is durable and the record's transaction released, later overwrites of the block may go in
/// place.
#[test]
fn an_in_place_fdatasync_waits_for_the_revoke_of_a_logged_copy() {
    let (mut j, mut c) = journal("selective");
    j.cfg.datasync_in_place = true;
    let (b, m) = (HomeBlock::new(5000), HomeBlock::new(6000));
    c.insert(b, vec![0; BS], BufKind::Data);
    c.insert(m, vec![0; BS], BufKind::Meta);
    for (off, meta) in [(0, false), (100, true)] {
        let t = j.handle_start(super::transaction::Credits::blocks(4), 0).unwrap();
        j.dirty_data(&mut c, b, off, 100, 100, false, false);
        if meta {
            j.dirty_metadata(&mut c, m, false);
        }
        j.handle_stop(t).unwrap();
        commit(&mut j, &mut c);
    }
    let plan = j.checkpoint_begin(&c, CheckpointGoal::Space { target_free: j.free_blocks() + 1 }).unwrap();
    j.checkpoint_finish(&mut c, plan);
    // T3: b in place, with a record of it (T2's) still in the log.
    let t = j.handle_start(super::transaction::Credits { blocks: 4, revokes: 1 }, 0).unwrap();
    j.dirty_data(&mut c, b, 0, BS, BS, false, false);
    j.handle_stop(t).unwrap();
    assert!(j.running.final_data.contains(&b));
    assert!(!j.syncs_in_place(b), "T2's record of b is in the log: an fdatasync of b must commit");
    // T3 commits (its revoke of b with it), and T2 leaves the log.
    commit(&mut j, &mut c);
    let plan = j.checkpoint_begin(&c, CheckpointGoal::All).unwrap();
    j.checkpoint_finish(&mut c, plan);
    assert!(j.log.is_empty() && !j.logged_copies.contains_key(&b));
    // T4: an overwrite of b with no copy of it in the log goes in place without a commit.
    let t = j.handle_start(super::transaction::Credits::blocks(4), 0).unwrap();
    j.dirty_data(&mut c, b, 0, BS, BS, false, false);
    j.handle_stop(t).unwrap();
    assert!(j.syncs_in_place(b), "nothing of b is in the log any more");
}

/// A checkpoint beside a commit: a commit that completes while the checkpoint's writes are in
/// flight logged another record of a block the checkpoint writes. The checkpoint wrote the
/// older version; the newer record is not home, so the block stays owed — by the newer
/// transaction — instead of being marked clean (which would let the log release that record
/// with its change never written home).
#[test]
fn a_record_committed_during_a_checkpoint_stays_owed_by_its_transaction() {
    let (mut j, mut c) = journal("wasteless");
    let b = HomeBlock::new(5000);
    c.insert(b, vec![0; BS], BufKind::Data);
    let t = j.handle_start(super::transaction::Credits::blocks(4), 0).unwrap();
    j.dirty_data(&mut c, b, 0, 100, 100, false, false);
    j.handle_stop(t).unwrap();
    let t1 = j.running.tid;
    commit(&mut j, &mut c);
    assert_eq!(c.peek(b).unwrap().cp_tid, Some(t1));
    // The checkpoint of T1 is planned, and its writes go out...
    let plan = j.checkpoint_begin(&c, CheckpointGoal::All).unwrap();
    assert_eq!(plan.release, 1);
    // ...while T2 logs a record of the same block and commits.
    let t = j.handle_start(super::transaction::Credits::blocks(4), 0).unwrap();
    j.dirty_data(&mut c, b, 100, 100, 100, false, false);
    // The write's bytes (the file layer's part): a new version of the buffer.
    std::sync::Arc::make_mut(&mut c.get(b).unwrap().data)[100..200].fill(7);
    j.handle_stop(t).unwrap();
    let t2 = j.running.tid;
    commit(&mut j, &mut c);
    j.checkpoint_finish(&mut c, plan);
    assert_eq!(j.log.len(), 1, "T1 released, T2 kept");
    assert_eq!(j.log[0].tid, t2);
    let buf = c.peek(b).unwrap();
    assert_eq!(buf.cp_tid, Some(t2), "the block is owed by the transaction whose record is not home");
    assert!(buf.cp_data.is_some(), "with the version that is not home");
    assert!(j.log[0].checkpoint.contains(&b), "T2 cannot leave the log before b is written home");
    // The next checkpoint writes T2's version.
    let plan = j.checkpoint_begin(&c, CheckpointGoal::All).unwrap();
    assert_eq!(plan.written, vec![(b, t2)]);
}

/// A checkpoint beside a commit that releases every committed transaction keeps the log's
/// tail at the commit in flight: its blocks are being written, and once it completes only the
/// log holds them.
#[test]
fn a_checkpoint_beside_a_commit_keeps_the_tail_before_it() {
    let (mut j, mut c) = journal("ordered");
    let m = HomeBlock::new(6000);
    c.insert(m, vec![0; BS], BufKind::Meta);
    for _ in 0..2 {
        let t = j.handle_start(super::transaction::Credits::blocks(4), 0).unwrap();
        j.dirty_metadata(&mut c, m, false);
        j.handle_stop(t).unwrap();
        if j.log.is_empty() {
            commit(&mut j, &mut c);
        }
    }
    let t2 = j.running.tid;
    let _in_flight = j.commit_begin(&mut c, 0).expect("T2 commits");
    let at = j.committing.as_ref().unwrap().at;
    let plan = j.checkpoint_begin(&c, CheckpointGoal::All).unwrap();
    assert_eq!(plan.release, 1);
    assert_eq!(plan.kept.oldest, Some((t2, at)), "the commit in flight is the oldest transaction kept");
    let jsb = plan.io.stages.last().unwrap().writes.last().unwrap();
    let jsb = JournalSuperblock::decode(&jsb.data).unwrap();
    assert_eq!((jsb.start.get(), jsb.sequence), (at.start, t2), "the tail written is where the commit in flight starts");
    j.commit_finish(&mut c, 0);
    j.checkpoint_finish(&mut c, plan);
    assert_eq!(j.log.len(), 1);
    assert_eq!(j.free_blocks(), j.placement.capacity() - 1 - at.blocks, "T2's log space is still in use");
}

/// Differential metadata: a block changed in more places than a block's records may be
/// (`MAX_DIFF_RANGES`) is still logged as records, its closest changes joined, not whole; and
/// one changed in so many places that the records would take half a block is logged whole.
#[test]
fn a_metadata_block_changed_in_many_places_is_logged_as_joined_records() {
    let (mut j, mut c) = journal("wasteless+dmeta");
    let (m, n) = (HomeBlock::new(6000), HomeBlock::new(6001));
    c.insert(m, vec![0; BS], BufKind::Meta);
    c.insert(n, vec![0; BS], BufKind::Meta);
    let t = j.handle_start(super::transaction::Credits::blocks(4), 0).unwrap();
    j.dirty_metadata(&mut c, m, false);
    j.dirty_metadata(&mut c, n, false);
    for k in 0..48 {
        c.data_mut(m)[k * 80] = 1; // 48 one-byte changes 79 bytes apart
    }
    for k in 0..1024 {
        c.data_mut(n)[k * 4..k * 4 + 2].copy_from_slice(&[1, 1]); // half the block changed
    }
    j.handle_stop(t).unwrap();
    let plan = j.commit_begin(&mut c, 0).expect("something to commit");
    let committing = j.committing.as_ref().expect("committing");
    assert!(committing.partial.contains(&m) && !committing.whole.contains(&m), "48 ranges joined into records, not the whole block");
    assert!(committing.whole.contains(&n), "records of half the block and more: whole");
    assert_eq!(plan.records.records, super::commit::MAX_DIFF_RANGES as u64, "m's 48 changes in 32 records");
    assert_eq!(plan.records.record_bytes, 48 + 16 * 79, "the 16 smallest gaps' bytes added");
    assert_eq!(plan.records.joined, 1, "one block joined (the other went whole)");
    j.commit_finish(&mut c, 0);
}

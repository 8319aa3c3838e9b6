//! Unit tests of journaling rules that the crash tests reach only rarely.

use super::checkpoint::CheckpointGoal;
use super::content::ContentConfig;
use super::placement::{LogRegion, Ring};
use super::{Journal, JournalConfig};
use crate::cache::{BufKind, Cache};
use crate::format::journal::{jfeature, JournalSuperblock};

const BS: usize = 4096;

fn journal(policy: &str) -> (Journal, Cache) {
    let jsb = JournalSuperblock {
        version: 1,
        features: jfeature::TX_CHECKSUM | jfeature::MULTIWRITE,
        block_size: BS as u32,
        total_blocks: 1024,
        first: 1,
        sequence: 1,
        start: 0,
        uuid: [0; 16],
        fs_uuid: [0; 16],
        errno: 0,
        remote: Default::default(),
    };
    let region = LogRegion::internal(2, 1024);
    let cfg = JournalConfig::new(region.ring_len(), BS);
    (Journal::new(cfg, ContentConfig::parse(policy).unwrap().policy(), Box::new(Ring::new(region, jsb)), 1), Cache::new(BS, 1024))
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
    let (b, m) = (5000u64, 6000u64);
    c.insert(b, vec![0; BS], BufKind::Data);
    c.insert(m, vec![0; BS], BufKind::Meta);
    // T1: a small update starts a journaled sequence for b.
    let t = j.handle_start(super::transaction::Credits::blocks(4), 0).unwrap();
    j.dirty_data(&mut c, b, 0, 100, false);
    j.handle_stop(t);
    commit(&mut j, &mut c);
    // T2: another record of b (T1 keeps owning b) and a metadata block owned by T2.
    let t = j.handle_start(super::transaction::Credits::blocks(4), 0).unwrap();
    j.dirty_data(&mut c, b, 100, 100, false);
    j.dirty_metadata(&mut c, m, false);
    j.handle_stop(t);
    commit(&mut j, &mut c);
    // Checkpoint only T1: b reaches its final location; T2 and its record of b stay.
    let plan = j.checkpoint_begin(&c, CheckpointGoal::Space { target_free: j.free_blocks() + 1 }).unwrap();
    assert_eq!(plan.release, 1);
    j.checkpoint_finish(&mut c, plan);
    assert_eq!(j.log.len(), 1, "T2 is still in the log");
    assert!(c.peek(b).unwrap().seq.is_none(), "b's journaled sequence ended at its final location");
    // T3: a whole-block update starts an in-place sequence for b.
    let t = j.handle_start(super::transaction::Credits { blocks: 4, revokes: 1 }, 0).unwrap();
    j.dirty_data(&mut c, b, 0, BS, false);
    j.handle_stop(t);
    assert!(j.running.final_data.contains(&b), "in place, ordered");
    assert!(j.running.revoked.contains(&b), "T2's record of b must not replay over the in-place data");
}

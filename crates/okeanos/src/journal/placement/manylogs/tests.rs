use super::table::legacy_map;
use super::*;

fn geo(logs: usize) -> Geometry {
    Geometry {
        block_size: 4096,
        fs_uuid: [1; 16],
        first_group_block: 100,
        blocks_per_group: 1000,
        log_starts: (0..logs).map(|g| 100 + g as u64 * 1000 + 10).collect(),
        log_blocks: 256,
        table_at: 5,
        table_blocks: 1,
        map_at: 7,
        map_blocks: 40,
        fs_blocks: 100 + logs as u64 * 1000,
        inodes: None,
    }
}

fn empty(logs: usize) -> ReadTable {
    let t = LogTable { version: 2, flags: flags::CLEAN, seq: 0, floor: Tid::new(1), durable: Tid::new(0), log_blocks: 256, fs_uuid: [1; 16], logs: vec![LogEntry::default(); logs] };
    let map = legacy_map(&t);
    ReadTable { table: t, map, other_invalid: None }
}

fn records(tid: Tid, n: usize, near: Option<u64>) -> Records {
    Records { tid, blocks: (0..n).map(|_| (Arc::new(vec![0u8; 4096]), BlockKind::JournalMeta)).collect(), images: Vec::new(), revoked: Vec::new(), logged: Vec::new(), near: near.map(HomeBlock::new) }
}

fn log_of(stage: &Stage) -> u64 {
    (stage.writes[0].block.get() - 100) / 1000
}

#[test]
fn commits_follow_the_head() {
    let mut m = Manylogs::new(geo(8), empty(8));
    let (s, _) = m.place(records(Tid::new(1), 3, Some(100 + 5 * 1000 + 500)));
    assert_eq!(log_of(&s), 5, "the log of the in-place write's group");
    m.note_position(DevBlock::new(100 + 2 * 1000 + 7));
    let (s, _) = m.place(records(Tid::new(2), 3, None));
    assert_eq!(log_of(&s), 2, "a read or checkpoint moved the head");
    let (s, _) = m.place(records(Tid::new(3), 3, None));
    assert_eq!(log_of(&s), 2, "the head stays until other I/O moves it");
    assert_eq!(m.near_head, NearHead { commits: 3, near: 3, same: 3, wraps: 0, switches: 2, swaps: 0, swap_blocks: 0 });
}

#[test]
fn a_full_log_sends_the_commit_to_the_nearest_one_with_room() {
    let mut m = Manylogs::new(geo(8), empty(8));
    // Mid-group 3: its own log 490 blocks behind, log 4's 510 ahead, log 2's 1490 behind.
    m.note_position(DevBlock::new(100 + 3 * 1000 + 500));
    // Fill log 3 to 200 of its 255 usable blocks.
    m.place(records(Tid::new(1), 200, None));
    let (s, at) = m.place(records(Tid::new(2), 60, None));
    assert_eq!(log_of(&s), 4, "the next nearest");
    assert_eq!(at.start >> 32, 4);
    let (s, _) = m.place(records(Tid::new(3), 200, None));
    assert_eq!(log_of(&s), 2, "log 4 has no room: log 2 is nearer than log 5");
    let (s, _) = m.place(records(Tid::new(4), 60, None));
    assert_eq!(log_of(&s), 4, "the nearest with room");
    assert_eq!(m.free_blocks(), 255, "the untouched logs are empty");
    assert_eq!(m.near_head.near, 4);
}

#[test]
fn release_records_tails_and_durable_ends_and_frees_only_after() {
    let mut m = Manylogs::new(geo(4), empty(4));
    m.note_position(DevBlock::new(100));
    m.place(records(Tid::new(1), 10, None));
    m.place(records(Tid::new(2), 10, None));
    m.on_durable(Tid::new(1));
    m.on_durable(Tid::new(2));
    m.note_position(DevBlock::new(100 + 3 * 1000));
    m.place(records(Tid::new(3), 10, None)); // in flight: not durable
    let kept = Kept { oldest: Some((Tid::new(2), Extent { start: 10, end: 20, blocks: 10 })), next_tid: Tid::new(4), home: None };
    let (t, _) = m.table_after(kept, None, false);
    assert_eq!(t.floor, Tid::new(2));
    assert_eq!(t.logs[0], LogEntry { tail: 10, end: 20, tail_tid: Tid::new(2) });
    assert_eq!(t.logs[3], LogEntry { tail: 0, end: 0, tail_tid: Tid::new(3) }, "a commit in flight is live but not yet recorded durable");
    assert_eq!(t.logs[1], LogEntry { tail: 0, end: 0, tail_tid: Tid::new(0) });
    let before = m.free_in(0);
    let stage = m.release_stage(kept);
    assert_eq!(stage.flush, vec![DevId::Fs]);
    assert_eq!(m.free_in(0), before, "nothing is reused before the table is durable");
    m.released(kept);
    assert_eq!(m.free_in(0), before + 10);
}

#[test]
fn a_dropped_release_leaves_the_durable_copy_alone() {
    let mut m = Manylogs::new(geo(4), empty(4));
    let mount = m.mount_stage(Kept { oldest: None, next_tid: Tid::new(1), home: None });
    m.place(records(Tid::new(1), 5, None));
    m.on_durable(Tid::new(1));
    let kept = Kept { oldest: None, next_tid: Tid::new(2), home: None };
    let first = m.release_stage(kept);
    assert_ne!(first.writes[0].block, mount.writes[0].block, "the other copy than the mount's");
    // Dropped (a clash) and planned again: still the other copy, not the mount's.
    let again = m.release_stage(kept);
    assert_eq!(again.writes[0].block, first.writes[0].block);
    m.released(kept);
    m.place(records(Tid::new(2), 5, None));
    m.on_durable(Tid::new(2));
    let next = m.release_stage(Kept { oldest: None, next_tid: Tid::new(3), home: None });
    assert_eq!(next.writes[0].block, mount.writes[0].block, "after the release is durable, the copy it did not use");
}

/// A crowded head log moves to the empty log farthest from the head: the reserving table,
/// the copies (checked against the CRCs of what was written), the table that moves; the
/// moved log is free afterwards, and its old contents are stale to recovery.
#[test]
fn a_crowded_head_log_swaps_into_the_farthest_empty_log() {
    let kept = Kept { oldest: Some((Tid::new(1), Extent { start: 0, end: 10, blocks: 10 })), next_tid: Tid::new(65), home: None };
    let mut m2 = Manylogs::new(geo(8), empty(8));
    m2.mount_stage(Kept { oldest: None, next_tid: Tid::new(1), home: None });
    // Logs 0 and 2 take 21 transactions of 10 blocks each (210 of 256: over 80%), then
    // log 1 between them, and one more in flight.
    for (group, tids) in [(0, 1..=21), (2, 22..=42), (1, 43..=63)] {
        m2.note_position(DevBlock::new(100 + group * 1000 + 500));
        for tid in tids {
            let (s, _) = m2.place(records(Tid::new(tid), 10, None));
            assert_eq!(log_of(&s), group);
            m2.on_durable(Tid::new(tid));
            if group == 1 && tid == 50 {
                assert!(m2.swap_begin(Kept { next_tid: Tid::new(51), ..kept }, false, 64).is_none(), "not crowded yet");
            }
        }
    }
    // Not while a commit in the log is in flight.
    m2.place(records(Tid::new(64), 10, None));
    assert!(m2.swap_begin(kept, false, 64).is_none(), "a commit in flight is not copied");
    m2.on_durable(Tid::new(64));
    let (stages, blocks) = m2.swap_begin(kept, false, 64).expect("a swap is due: the head's log and its neighbours' are crowded");
    assert_eq!(blocks, 220);
    // Reserve, copies in slices, move: the first and last stages are tables, each flushed.
    assert!(stages.len() >= 3);
    assert!(stages.iter().all(|s| s.flush.is_empty() || s.flush == vec![DevId::Fs]));
    let table = |st: &IoStage| LogTable::decode(&st.writes.iter().flat_map(|w| w.data.iter().copied()).collect::<Vec<u8>>(), [1; 16], 8, 256).unwrap();
    let map = |st: &IoStage| LogMap::decode(&st.writes[1..].iter().flat_map(|w| w.data.iter().copied()).collect::<Vec<u8>>(), [1; 16], 8, 256).unwrap();
    let (reserve, moved) = (table(&stages[0]), table(stages.last().unwrap()));
    assert_eq!(reserve.logs[7], LogEntry { tail: 0, end: 0, tail_tid: Tid::new(65) }, "the farthest empty log (7) reserved");
    assert_eq!(reserve.logs[1].tail_tid, Tid::new(43), "the source still live in the reserving table");
    assert_eq!(moved.logs[7], LogEntry { tail: 0, end: 220, tail_tid: Tid::new(43) });
    assert_eq!(moved.logs[1], LogEntry { tail: 220, end: 220, tail_tid: Tid::new(65) });
    assert_eq!((map(&stages[0]).durable, map(stages.last().unwrap()).durable), (Tid::new(64), Tid::new(64)), "the tables record the newest durable tid");
    assert_eq!(map(stages.last().unwrap()).snaps[7], SnapPos { pos: 0, tid: Tid::new(43) }, "the moved log is read from its start (nothing is home past the floor)");
    assert!(moved.seq == reserve.seq + 1 && stages[0].writes[0].block != stages.last().unwrap().writes[0].block, "the tables go to both copies");
    let copies: Vec<&IoCopy> = stages.iter().flat_map(|s| &s.copies).collect();
    assert_eq!(copies.len(), 220);
    assert_eq!((copies[0].from.1.get(), copies[0].to.1.get()), (100 + 1000 + 10, 100 + 7 * 1000 + 10));
    // Both logs take no commits meanwhile.
    assert_eq!((m2.free_in(1), m2.free_in(7)), (0, 0));
    let (s, _) = m2.place(records(Tid::new(65), 10, None));
    assert_ne!(log_of(&s), 1);
    m2.on_durable(Tid::new(65));
    m2.swapped();
    assert_eq!(m2.free_in(1), 255, "the moved log is empty");
    assert_eq!(m2.free_in(7), 255 - 220);
    assert_eq!(m2.near_head.swaps, 1);
    let (t, _) = m2.table_after(Kept { next_tid: Tid::new(66), ..kept }, None, false);
    assert_eq!(t.logs[1], LogEntry { tail: 220, end: 220, tail_tid: Tid::new(65) }, "the emptied log keeps its stale bound");
    assert_eq!((t.logs[7].tail, t.logs[7].tail_tid), (0, Tid::new(43)));
    // A quiet spell does not move the log a swap filled.
    let (idle, _) = m2.swap_begin(Kept { next_tid: Tid::new(66), ..kept }, true, 64).expect("idle: a crowded log moves");
    let from = (idle.iter().flat_map(|s| &s.copies).next().expect("copies").from.1.get() - 100) / 1000;
    assert!(from == 0 || from == 2, "idle: a log commits filled moves, not the one the swap filled (log {from})");
}

#[test]
fn table_copies_alternate() {
    let m = Manylogs::new(geo(4), empty(4));
    let a = m.mount_stage(Kept { oldest: None, next_tid: Tid::new(1), home: None });
    let b = m.clean_stage(Tid::new(1));
    assert_ne!(a.writes[0].block, b.writes[0].block, "consecutive tables go to different copies");
}

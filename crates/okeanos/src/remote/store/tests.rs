//! The store's tests: torn tails, damaged records, trims, compaction and fences across a reopen, torn state slots, leftovers of an older log, an older format.

use super::*;
use std::fs::OpenOptions;

fn blocks(tid: u64) -> Vec<u8> {
    (0..4096).map(|i| (tid as usize * 13 + i) as u8).collect()
}

fn filled(dir: &Path, n: u64) -> Store {
    let mut s = Store::open(dir, 1 << 30).unwrap();
    for tid in 1..=n {
        s.append(tid, 0, 4096, &blocks(tid)).unwrap();
    }
    s.sync().unwrap();
    s
}

#[test]
fn a_torn_tail_is_cut_at_restart() {
    let d = tempfile::tempdir().unwrap();
    drop(filled(d.path(), 5));
    let log = d.path().join("log.0");
    let len = std::fs::metadata(&log).unwrap().len();
    // The last record half written (never acknowledged: its sync never ran).
    let f = OpenOptions::new().write(true).open(&log).unwrap();
    f.set_len(len - 1000).unwrap();
    let s = Store::open(d.path(), 1 << 30).unwrap();
    assert_eq!((s.first_tid, s.last_tid), (1, 4));
    assert_eq!(s.read_from(1).unwrap().iter().map(|t| t.0).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
    assert_eq!(std::fs::metadata(&log).unwrap().len(), 4 * (4096 + RECORD_HEADER as u64));
    // And appends continue after it.
    let mut s = s;
    s.append(5, 0, 4096, &blocks(5)).unwrap();
}

#[test]
fn unsynced_records_persisted_out_of_order_are_a_torn_tail() {
    // After a power loss the last, unsynced group may have a later record whole and an
    // earlier one torn: that is not damage (neither was acknowledged).
    let d = tempfile::tempdir().unwrap();
    let mut s = filled(d.path(), 5);
    s.append(6, 0, 4096, &blocks(6)).unwrap();
    s.append(7, 0, 4096, &blocks(7)).unwrap();
    drop(s);
    let log = d.path().join("log.0");
    let rec = 4096 + RECORD_HEADER;
    let sixth = 5 * rec + RECORD_HEADER; // after five records and the marker of their sync
    let mut bytes = std::fs::read(&log).unwrap();
    bytes[sixth + 2000] ^= 0xff;
    std::fs::write(&log, &bytes).unwrap();
    let s = Store::open(d.path(), 1 << 30).unwrap();
    assert_eq!(s.read_from(0).unwrap().iter().map(|t| t.0).collect::<Vec<_>>(), vec![1, 2, 3, 4, 5]);
    assert_eq!(std::fs::metadata(&log).unwrap().len(), sixth as u64);
}

/// Records 1..5 synced together: the marker written after their sync proves record 2 was
/// durable, so its damage is refused even though nothing was appended after the group.
#[test]
fn a_damaged_record_with_good_ones_after_it_is_refused() {
    let d = tempfile::tempdir().unwrap();
    drop(filled(d.path(), 5));
    let log = d.path().join("log.0");
    let mut bytes = std::fs::read(&log).unwrap();
    bytes[(4096 + RECORD_HEADER) + 100] ^= 1;
    std::fs::write(&log, &bytes).unwrap();
    match Store::open(d.path(), 1 << 30) {
        Err(StoreError::Damaged(_, why)) => assert!(why.contains("fails its checksum"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn trim_compaction_and_fence_survive_a_reopen() {
    let d = tempfile::tempdir().unwrap();
    let mut s = Store::open(d.path(), 1 << 30).unwrap();
    for tid in 1..=400 {
        s.append(tid, 0, 4096, &blocks(tid)).unwrap();
    }
    s.trim(390, 0).unwrap();
    // The live records moved to the other log.
    assert!(std::fs::metadata(d.path().join("log.1")).unwrap().len() < 20 * 4200, "compacted");
    s.fence(4).unwrap();
    drop(s);
    let mut s = Store::open(d.path(), 1 << 30).unwrap();
    assert_eq!((s.epoch, s.first_tid, s.last_tid), (4, 391, 400));
    assert_eq!(s.read_from(0).unwrap().len(), 10);
    assert!(matches!(s.append(401, 0, 4096, &blocks(401)), Err(StoreError::Fenced { .. })));
    s.append(401, 4, 4096, &blocks(401)).unwrap();
    assert!(matches!(s.append(403, 4, 4096, &blocks(403)), Err(StoreError::Order { .. })));
    // After trimming everything, the next tid may jump (a host's recovery does that), and
    // the jump survives a reopen.
    s.trim(401, 4).unwrap();
    s.append(5000, 4, 4096, &blocks(5000)).unwrap();
    s.sync().unwrap();
    drop(s);
    let s = Store::open(d.path(), 1 << 30).unwrap();
    assert_eq!(s.read_from(0).unwrap().iter().map(|t| t.0).collect::<Vec<_>>(), vec![5000]);
}

/// A state write torn by a crash (its slot garbage) leaves the other slot: the state
/// before that write, which is what the host was last told.
#[test]
fn a_torn_state_slot_falls_back_to_the_other() {
    let d = tempfile::tempdir().unwrap();
    let mut s = filled(d.path(), 5);
    s.fence(7).unwrap(); // sequence 2, slot 0
    s.trim(2, 7).unwrap(); // sequence 3, slot 1
    drop(s);
    let state = d.path().join("state");
    let mut b = std::fs::read(&state).unwrap();
    b[SLOT_STRIDE as usize + 20] ^= 0xff;
    std::fs::write(&state, &b).unwrap();
    let s = Store::open(d.path(), 1 << 30).unwrap();
    assert_eq!((s.epoch, s.first_tid), (7, 1), "the fence held, the trim did not");
    // Both slots bad: refused, never taken for a new journal.
    b[20] ^= 0xff;
    std::fs::write(&state, &b).unwrap();
    assert!(matches!(Store::open(d.path(), 1 << 30), Err(StoreError::Damaged(..))));
}

/// Records left in a reused log by an older incarnation (two compactions back) do not
/// validate under the new generation: they are never taken for held transactions.
#[test]
fn leftovers_of_an_older_log_never_come_back() {
    let d = tempfile::tempdir().unwrap();
    let mut s = Store::open(d.path(), 1 << 30).unwrap();
    s.compact_min = 0;
    for tid in 1..=20 {
        s.append(tid, 0, 4096, &blocks(tid)).unwrap();
    }
    s.trim(15, 0).unwrap(); // compacts into log.1
    s.trim(18, 0).unwrap(); // compacts into log.0, over its own old records
    assert_eq!(s.state.active, 0);
    s.finish().unwrap();
    drop(s);
    // Put the old log.0 contents back past the end, as a file system that lost the
    // truncate might.
    let log0 = d.path().join("log.0");
    let live = std::fs::read(&log0).unwrap();
    let mut stale = live.clone();
    // An older incarnation's records (generation 1), each synced, so their durable ends
    // would claim the whole file was durable if they validated.
    let od = tempfile::tempdir().unwrap();
    let mut old = Store::open(od.path(), 1 << 30).unwrap();
    for tid in 18..=40 {
        old.append(tid, 0, 4096, &blocks(tid + 1)).unwrap();
        old.sync().unwrap();
    }
    drop(old);
    stale.extend(std::iter::repeat_n(0u8, 4096));
    stale.extend_from_slice(&std::fs::read(od.path().join("log.0")).unwrap());
    std::fs::write(&log0, &stale).unwrap();
    let s = Store::open(d.path(), 1 << 30).unwrap();
    assert_eq!(s.read_from(0).unwrap().iter().map(|t| t.0).collect::<Vec<_>>(), vec![19, 20]);
}

/// The newest state slot damaged long after it was durable, when it was a compaction's
/// switch followed by appends: the older slot names the old log, and serving from it would
/// drop the appends made since the switch. They are in the other log under the next
/// generation, past every tid the old log holds: the journal is refused. A compaction whose
/// switch was torn (its copy made, nothing appended to it) still falls back.
#[test]
fn a_damaged_switch_with_appends_after_it_is_refused_not_undone() {
    let d = tempfile::tempdir().unwrap();
    let mut s = Store::open(d.path(), 1 << 30).unwrap();
    s.compact_min = 0;
    for tid in 1..=10 {
        s.append(tid, 0, 4096, &blocks(tid)).unwrap();
    }
    s.sync().unwrap();
    s.trim(6, 0).unwrap(); // compacts into log.1: a switch of the state
    assert_eq!(s.state.active, 1);
    let switched = s.state.sequence;
    let state = d.path().join("state");
    for tid in 11..=14 {
        s.append(tid, 0, 4096, &blocks(tid)).unwrap();
    }
    s.sync().unwrap();
    drop(s);
    let mut bad = std::fs::read(&state).unwrap();
    bad[(switched % 2 * SLOT_STRIDE) as usize + 20] ^= 0xff;
    std::fs::write(&state, &bad).unwrap();
    match Store::open(d.path(), 1 << 30) {
        Err(StoreError::Damaged(_, why)) => assert!(why.contains("up to 14") && why.contains("would lose them"), "{why}"),
        other => panic!("served from the older state without the appends: {other:?}"),
    }
    // The switch torn before anything was appended to the new log: the copy in log.1 holds
    // only what log.0 holds, and the older state serves every transaction.
    let d2 = tempfile::tempdir().unwrap();
    let mut s = Store::open(d2.path(), 1 << 30).unwrap();
    s.compact_min = 0;
    for tid in 1..=10 {
        s.append(tid, 0, 4096, &blocks(tid)).unwrap();
    }
    s.sync().unwrap();
    s.trim(6, 0).unwrap();
    drop(s);
    let state2 = d2.path().join("state");
    let mut t = std::fs::read(&state2).unwrap();
    t[(switched % 2 * SLOT_STRIDE) as usize + 20] ^= 0xff;
    std::fs::write(&state2, &t).unwrap();
    let s = Store::open(d2.path(), 1 << 30).unwrap();
    assert_eq!(s.read_from(0).unwrap().iter().map(|t| t.0).collect::<Vec<_>>(), (7..=10).collect::<Vec<_>>());
}

#[test]
fn a_store_of_the_older_format_is_refused_with_a_message() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("log"), b"old").unwrap();
    match Store::open(d.path(), 1 << 30) {
        Err(StoreError::Damaged(_, why)) => assert!(why.contains("older journal server"), "{why}"),
        other => panic!("{other:?}"),
    }
}

//! The log table and the map of logged blocks across crashes and damage: recovery from a
//! snapshot's map, data kept logged across recovery, offline recovery, damaged table and map
//! copies, parked blocks read back from the logs.

use super::*;

/// A crash after a snapshot: recovery reads each log only past the snapshot (a few blocks,
/// not the logs' live contents), and the data the map names stays logged: the mount reads it
/// from the logs, and its checkpoint (here, the unmount's) copies it home.
#[test]
fn recovery_reads_the_map_and_only_what_follows_the_snapshot() {
    let (dev, _) = manylogs_fs();
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, snapshotting(std::time::Duration::from_millis(5))).unwrap();
    let f = fs.create_file("/log").unwrap();
    let mut expect = Vec::new();
    for k in 0..60 {
        append_block(&fs, &f, &mut expect, 3, k);
    }
    // A snapshot after the writes (the journal thread takes it when due), then a few more.
    wait_for_snapshot(&fs);
    for k in 60..63 {
        append_block(&fs, &f, &mut expect, 3, k);
    }
    let image = dev.snapshot();
    drop(f);
    fs.unmount().unwrap();

    let crashed = Arc::new(MemDevice::from_bytes(image));
    let report = okeanos::inspect::recover_image(crashed.clone() as Arc<dyn Device>, None).unwrap().expect("needs recovery");
    assert!(report.damage.is_none(), "{report:?}");
    let mapped: u64 = report.end_reason.split(", ").find_map(|p| p.strip_suffix(" blocks from the map")).and_then(|n| n.parse().ok()).expect("the report counts mapped blocks");
    assert!(mapped >= 50, "the 60 logged data blocks before the snapshot stay in the map: {report:?}");
    assert!(report.transactions <= 8 && report.blocks_scanned < 40, "only what follows the snapshot is read: {report:?}");
    let kept: u64 = report.end_reason.rsplit(", ").find_map(|p| p.strip_suffix(" of them kept logged")).and_then(|n| n.parse().ok()).expect("the report counts kept blocks");
    assert!(kept >= 50 && report.blocks_replayed < 20, "data stays logged, not replayed home: {report:?}");
    assert!(okeanos::inspect::recover_image(crashed.clone() as Arc<dyn Device>, None).unwrap().is_none(), "recovered once: the table says so");
    // The data is not at home: the kept blocks are read from their logs.
    let fs = Okeanos::mount(crashed.clone() as Arc<dyn Device>, None, MountOptions::default()).unwrap();
    assert_eq!(fs.read_path("/log").unwrap(), expect, "every synced record, from the logs and from home");
    assert!(fs.checkpoint_counts().log_reads >= 50, "{:?}", fs.checkpoint_counts());
    fs.unmount().unwrap();
    // The unmount checkpointed them home: a mount that reads only home has them.
    let fs = Okeanos::mount(crashed.clone() as Arc<dyn Device>, None, MountOptions::default()).unwrap();
    assert_eq!(fs.read_path("/log").unwrap(), expect);
    assert_eq!(fs.checkpoint_counts().log_reads, 0);
    fs.unmount().unwrap();
    let r = okeanos::fsck(crashed as Arc<dyn Device>, None);
    assert!(r.is_clean(), "{:?}", r.problems);
}

/// A second life after a recovery that kept data logged: the mount takes the kept blocks
/// over (owed, parked in their logs), appends and syncs, snapshots, checkpoints them home
/// (forced) and appends more. A crash at every flush of all of it, with the unflushed writes
/// kept, lost, lost alone and torn, must recover every acknowledged record and nothing else.
#[test]
fn crash_states_after_a_recovery_that_kept_data_logged() {
    let (dev, _) = manylogs_fs();
    let o = snapshotting(std::time::Duration::from_millis(2));
    let mut expect = Vec::new();
    let image = {
        let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o.clone()).unwrap();
        let f = fs.create_file("/log").unwrap();
        for k in 0..40 {
            append_block(&fs, &f, &mut expect, 4, k);
        }
        wait_for_snapshot(&fs);
        dev.snapshot()
    };
    let first = Arc::new(MemDevice::from_bytes(image));
    let report = okeanos::inspect::recover_image(first.clone() as Arc<dyn Device>, None).unwrap().expect("needs recovery");
    assert!(report.end_reason.contains("kept logged") && !report.end_reason.contains(" 0 of them kept"), "{report:?}");

    let rec = CrashRecorder::new();
    let d = Arc::new(rec.device("fs", first.snapshot()));
    let fs = Okeanos::mount(d as Arc<dyn Device>, None, o).unwrap();
    let f = fs.open_file("/log").unwrap();
    // (event count when acknowledged, bytes acknowledged)
    let mut acks = vec![(rec.event_count(), expect.len())];
    for k in 40..70 {
        append_block(&fs, &f, &mut expect, 4, k);
        acks.push((rec.event_count(), expect.len()));
        if k == 55 {
            let c = fs.checkpoint().unwrap();
            assert!(c.copied > 0, "the forced checkpoint copies kept blocks home from their logs: {c:?}");
        }
    }
    drop(f);
    drop(fs);

    let events = rec.events();
    // Just before each flush (its writes unflushed: kept, lost, torn) and just after it.
    let flushes: Vec<usize> = events.iter().enumerate().filter(|(_, e)| matches!(e, okeanos::device::CrashEvent::Flush { .. })).flat_map(|(i, _)| [i, i + 1]).collect();
    let step = flushes.len().div_ceil(160).max(1);
    let (mut states, mut violations) = (0, Vec::new());
    for &j in flushes.iter().step_by(step).chain([events.len()].iter()) {
        let acked = acks.iter().filter(|(at, _)| *at <= j).map(|(_, n)| *n).max().unwrap_or(0);
        for st in rec.states(j, 2, 1, 11) {
            states += 1;
            let img = Arc::new(MemDevice::from_bytes(rec.build(&st).remove(0)));
            let fs = match Okeanos::mount(img.clone() as Arc<dyn Device>, None, MountOptions::default()) {
                Ok(fs) => fs,
                Err(e) => {
                    let again = Arc::new(MemDevice::from_bytes(rec.build(&st).remove(0)));
                    let why = okeanos::inspect::recover_image(again as Arc<dyn Device>, None).map(|r| r.map(|r| format!("{:?} {}", r.damage, r.end_reason)));
                    violations.push(format!("after {j} events, {}: mount: {e} ({why:?})", st.label));
                    continue;
                }
            };
            match fs.read_path("/log") {
                Ok(data) if data.len() >= acked && data.len() <= expect.len() && data[..] == expect[..data.len()] => {}
                Ok(data) => violations.push(format!("after {j} events, {}: {} bytes, {acked} acknowledged, prefix {}", st.label, data.len(), data.len() <= expect.len() && data[..] == expect[..data.len()])),
                Err(e) => violations.push(format!("after {j} events, {}: read: {e}", st.label)),
            }
            fs.unmount().unwrap();
            let r = okeanos::fsck(img as Arc<dyn Device>, None);
            if !r.is_clean() {
                violations.push(format!("after {j} events, {}: fsck: {:?}", st.label, r.problems));
            }
        }
    }
    assert!(violations.is_empty(), "{} violations in {states} states, first: {:#?}", violations.len(), &violations[..violations.len().min(4)]);
    assert!(states > 100, "only {states} crash states");
    eprintln!("after a recovery that kept data logged: {states} crash states over {} events, no violation", events.len());
}

#[test]
fn offline_recover_replays_every_log() {
    let (dev, _) = manylogs_fs();
    let image = crashed_image(&dev);
    let crashed = Arc::new(MemDevice::from_bytes(image));
    let dump = okeanos::inspect::dump_journal(crashed.clone() as Arc<dyn Device>, None).unwrap();
    assert!(dump.transactions.len() >= 40 && dump.damage.is_none(), "{} transactions, {:?}", dump.transactions.len(), dump.damage);
    let logs: std::collections::BTreeSet<u64> = dump.transactions.iter().map(|t| t.region.base).collect();
    assert!(logs.len() >= 3, "transactions in {} logs", logs.len());
    let report = okeanos::inspect::recover_image(crashed.clone() as Arc<dyn Device>, None).unwrap().expect("needs recovery");
    assert!(report.transactions >= 40 && report.damage.is_none(), "{report:?}");
    assert!(report.end_reason.contains("logs scanned from their snapshot positions") && report.first_tid >= okeanos::journal::transaction::Tid::new(1), "{report:?}");
    assert!(okeanos::inspect::recover_image(crashed.clone() as Arc<dyn Device>, None).unwrap().is_none(), "recovered once");
    let r = okeanos::fsck(crashed.clone() as Arc<dyn Device>, None);
    assert!(r.is_clean(), "{:?}", r.problems);
    let fs = Okeanos::mount(crashed as Arc<dyn Device>, None, MountOptions::default()).unwrap();
    let want: Vec<u8> = (0..40).flat_map(|k| record(2, k, 300)).collect();
    assert_eq!(fs.read_path("/log").unwrap(), want);
}

#[test]
fn a_bad_older_table_copy_is_ignored_and_both_bad_is_an_error() {
    let (dev, sb) = manylogs_fs();
    let image = crashed_image(&dev);
    let okeanos::format::JournalLocation::Internal { start, .. } = sb.journal else { unreachable!() };
    let bs = sb.block_size as usize;
    let table = |img: &Vec<u8>, slot: usize| -> Option<u64> {
        let at = (start as usize + 1 + slot) * bs;
        okeanos::format::logtable::LogTable::decode(&img[at..at + bs], sb.uuid, sb.group_count, sb.log_area_blocks).ok().map(|t| t.seq)
    };
    let (a, b) = (table(&image, 0), table(&image, 1));
    assert!(a.is_some() && b.is_some(), "both copies written: {a:?} {b:?}");
    // The older copy damaged: the newer one is used, and every synced record is there. (A torn
    // write of the newer copy, which falls back to the older one, is among the crash states
    // above; damage to the newest copy after it was durable cannot be told from such a tear.)
    let older = if a < b { 0 } else { 1 };
    let mut torn = image.clone();
    let at = (start as usize + 1 + older) * bs;
    torn[at + 70] ^= 0xff;
    let fs = Okeanos::mount(Arc::new(MemDevice::from_bytes(torn)) as Arc<dyn Device>, None, MountOptions::default()).unwrap();
    assert_eq!(fs.read_path("/log").unwrap().len(), 40 * 300);
    fs.unmount().unwrap();
    // Both bad: a clear error, no panic.
    let mut bad = image.clone();
    for slot in 0..2 {
        bad[(start as usize + 1 + slot) * bs + 20] ^= 0xff;
    }
    let bad = Arc::new(MemDevice::from_bytes(bad));
    let e = Okeanos::mount(bad.clone() as Arc<dyn Device>, None, MountOptions::default()).err().expect("refused");
    assert!(e.to_string().contains("no valid manylogs log table"), "{e}");
    let r = okeanos::fsck(bad as Arc<dyn Device>, None);
    assert!(r.problems.iter().any(|p| p.contains("log table")), "{:?}", r.problems);
}

/// A table is valid only with its map: a damaged map copy of the newer table (what a torn
/// write of the pair leaves) makes recovery use the older pair, with every synced record; both
/// maps damaged is a clear error, as both tables damaged is.
#[test]
fn a_damaged_map_copy_invalidates_its_table() {
    let (dev, sb) = manylogs_fs();
    // Both table copies written by the engine (version 3): the mount's, then a checkpoint's.
    let image = {
        let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, MountOptions::default().data(okeanos::DataMode::Data)).unwrap();
        let f = fs.create_file("/log").unwrap();
        for k in 0..40 {
            fs.hint_position(2048 + (k % 4) * 1024);
            f.append(&record(2, k as usize, 300)).unwrap();
            f.fsync().unwrap();
            if k == 19 {
                fs.checkpoint().unwrap();
            }
        }
        dev.snapshot()
    };
    let okeanos::format::JournalLocation::Internal { start, blocks } = sb.journal else { unreachable!() };
    let bs = sb.block_size as usize;
    let table_blocks = okeanos::format::logtable::LogTable::blocks_per_copy(sb.group_count as u64, bs) as usize;
    let map_blocks = (blocks as usize - 1 - 2 * table_blocks) / 2;
    let map_at = |slot: usize| (start as usize + 1 + 2 * table_blocks + slot * map_blocks) * bs;
    let table = |img: &Vec<u8>, slot: usize| {
        let at = (start as usize + 1 + slot * table_blocks) * bs;
        okeanos::format::logtable::LogTable::decode(&img[at..at + table_blocks * bs], sb.uuid, sb.group_count, sb.log_area_blocks).expect("both copies written")
    };
    let (a, b) = (table(&image, 0), table(&image, 1));
    let newer = if a.seq > b.seq { 0 } else { 1 };
    for (slot, t) in [a, b].iter().enumerate() {
        assert_eq!(t.version, 3, "{t:?}");
        let m = okeanos::format::logtable::LogMap::decode(&image[map_at(slot)..map_at(slot) + map_blocks * bs], sb.uuid, sb.group_count, sb.log_area_blocks).expect("a map beside the table");
        assert_eq!(m.seq, t.seq, "each map belongs to the table of its slot");
    }
    let mut torn = image.clone();
    torn[map_at(newer) + 30] ^= 0xff;
    let fs = Okeanos::mount(Arc::new(MemDevice::from_bytes(torn)) as Arc<dyn Device>, None, MountOptions::default()).unwrap();
    assert_eq!(fs.read_path("/log").unwrap().len(), 40 * 300);
    fs.unmount().unwrap();
    // The older table damaged too: nothing valid, a clear error, no panic.
    let older = 1 - newer;
    torn = image.clone();
    torn[map_at(newer) + 30] ^= 0xff;
    torn[(start as usize + 1 + older * table_blocks) * bs + 20] ^= 0xff;
    let e = Okeanos::mount(Arc::new(MemDevice::from_bytes(torn)) as Arc<dyn Device>, None, MountOptions::default()).err().expect("refused");
    assert!(e.to_string().contains("no valid manylogs log table") && e.to_string().contains("map"), "{e}");
}

/// Logged blocks leave the cache (parked: the log position kept, the data dropped), reads
/// load them back from the log, unmount copies them home, and every byte survives. A logged
/// copy damaged under the mount is an I/O error on the read that needs it, never other data.
#[test]
fn parked_blocks_read_back_from_the_log_and_damage_is_an_error() {
    let (dev, sb) = manylogs_fs();
    let mut opts = MountOptions::default().data(okeanos::DataMode::Data);
    // checkpoint=lazy: nothing goes home until the logs fill, so the blocks stay logged.
    opts.cache_blocks = 64;
    opts.lazy_checkpoint = true;
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, opts.clone()).unwrap();
    let f = fs.create_file("/blocks").unwrap();
    let want: Vec<u8> = (0..160).flat_map(|k| record(3, k, 4096)).collect();
    for k in 0..160 {
        f.append(&want[k * 4096..][..4096]).unwrap();
        f.fdatasync().unwrap();
    }
    assert_eq!(fs.read_path("/blocks").unwrap(), want, "parked blocks read back from their logs");
    let all = fs.counters();
    let c = all.checkpoint;
    // Everything the mount did goes with a failure (it failed once in CI with no log read,
    // and never since: what wrote the blocks home, or kept them cached, must be visible).
    assert!(c.log_reads >= 64, "blocks were not read back from the logs: {c:?}; all counters: {all:?}");
    drop(f);
    fs.unmount().unwrap();
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, MountOptions::default()).unwrap();
    assert_eq!(fs.read_path("/blocks").unwrap(), want, "unmount copied every parked block home");
    fs.unmount().unwrap();
    assert!(okeanos::fsck(dev.clone() as Arc<dyn Device>, None).is_clean());

    // Again, and this time every log block is damaged under the mount before the reads.
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, opts).unwrap();
    let f = fs.create_file("/again").unwrap();
    for k in 0..160 {
        f.append(&want[k * 4096..][..4096]).unwrap();
        f.fdatasync().unwrap();
    }
    let bs = sb.block_size as u64;
    for g in 0..sb.group_count {
        let start = sb.log_area_start(g);
        for b in start..start + sb.log_area_blocks as u64 {
            let mut sector = vec![0u8; 512];
            dev.read_at(b * bs, &mut sector).unwrap();
            sector[100] ^= 0xee;
            dev.write_at(b * bs, &sector).unwrap();
        }
    }
    let err = fs.read_path("/again").expect_err("a damaged logged copy is not returned as data");
    assert!(err.to_string().contains("does not match its journal checksum"), "{err}");
}

/// `Okeanos::checkpoint` (`okeanos checkpoint`): with `checkpoint=lazy` blocks stay logged
/// (parked out of a small cache) until it is asked for; then every committed block goes home,
/// parked ones copied from their logs, and the logs hold nothing live: a crash right after it
/// replays nothing, and every byte is home.
#[test]
fn a_forced_checkpoint_empties_the_logs() {
    let (dev, _) = manylogs_fs();
    let mut opts = MountOptions::default().data(okeanos::DataMode::Data);
    opts.cache_blocks = 64;
    opts.lazy_checkpoint = true;
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, opts).unwrap();
    let f = fs.create_file("/blocks").unwrap();
    let want: Vec<u8> = (0..120).flat_map(|k| record(4, k, 4096)).collect();
    for k in 0..120 {
        f.append(&want[k * 4096..][..4096]).unwrap();
        f.fdatasync().unwrap();
    }
    assert!(live_transactions(dev.snapshot()) >= 120, "lazy: the commits are still live in the logs");
    let c = fs.checkpoint().unwrap();
    assert!(c.blocks >= 120 && c.copied > 0 && c.runs < c.blocks, "{c:?}");
    let image = dev.snapshot();
    assert_eq!(live_transactions(image.clone()), 0, "a checkpoint leaves nothing to replay");
    let crashed = Okeanos::mount(Arc::new(MemDevice::from_bytes(image)) as Arc<dyn Device>, None, MountOptions::default()).unwrap();
    assert_eq!(crashed.read_path("/blocks").unwrap(), want);
    // Nothing owed: a second one writes nothing.
    assert_eq!(fs.checkpoint().unwrap().blocks, 0);
    drop(f);
    fs.unmount().unwrap();
}

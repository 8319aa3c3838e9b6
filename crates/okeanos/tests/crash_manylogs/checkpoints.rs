//! Checkpoints of the logs and what outlives them: forced and idle checkpoints, O_DUR files
//! kept logged, and a damaged newest table that must never mount clean.

use super::*;

/// `checkpoint=idle`: once nothing has changed for `idle_after`, everything committed goes home.
#[test]
fn an_idle_file_system_checkpoints() {
    let (dev, _) = manylogs_fs();
    let opts = MountOptions::parse("data=data,checkpoint=idle,idle_after=0.05,writeback_period=0.02").unwrap();
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, opts).unwrap();
    let f = fs.create_file("/idle").unwrap();
    for k in 0..20 {
        f.append(&record(5, k, 4096)).unwrap();
        f.fdatasync().unwrap();
    }
    // Bounded: 10 s at most for a checkpoint due after 50 ms of quiet.
    let mut waited = 0;
    while fs.counters().idle_checkpoints == 0 && waited < 1000 {
        std::thread::sleep(std::time::Duration::from_millis(10));
        waited += 1;
    }
    assert!(fs.counters().idle_checkpoints > 0, "no idle checkpoint");
    // It completes under the lock the counter is read without: look again until released.
    let mut live = live_transactions(dev.snapshot());
    for _ in 0..200 {
        if live == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        live = live_transactions(dev.snapshot());
    }
    assert_eq!(live, 0, "the idle checkpoint left transactions live");
    drop(f);
    fs.unmount().unwrap();
}

/// O_DUR under ordered content (which writes file data in place): the file's whole-block
/// rewrites are logged instead, parked in the logs, never written home for age; crashed at
/// every sampled event, each policy's guarantee holds.
#[test]
fn manylogs_durable_file_crash_states_ordered() {
    let cfg = ContentConfig::parse("ordered").unwrap();
    let run = block_workload(cfg, LOGS, 300, &|o| {
        o.cache_blocks = 64;
        o.expire_period = Some(std::time::Duration::from_millis(1));
        o.writeback_period = std::time::Duration::from_millis(1);
    }, 0xd0e, true);
    eprintln!("ordered, O_DUR: {:?}", run.checkpoint);
    let out = enumerate(cfg, &run, 200, 25);
    out.assert_clean(400);
    eprintln!("manylogs O_DUR ordered: {} crash states, no violation", out.states);
}

/// O_DUR: a file's writes stay logged while age sends everything else home; truncating it
/// drops its logged blocks without writing them home; the flag persists and reads as the
/// xattr user.okeanos.durable.
#[test]
fn durable_files_stay_logged_and_truncate_writes_nothing_home() {
    // Logs large enough that the 64 synced appends never run one low: a checkpoint for space
    // writes O_DUR blocks home (as documented), which would hide what age writeback does.
    let dev = Arc::new(MemDevice::new(64 * MB));
    Okeanos::mkfs(dev.as_ref(), None, &MkfsOptions { manylogs: true, blocks_per_group: Some(4096), log_area_blocks: 1024, ..Default::default() }).unwrap();
    let opts = MountOptions::parse("data=ordered,expire=0.01,writeback_period=0.01").unwrap();
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, opts.clone()).unwrap();
    let d = fs.create_file("/commit.log").unwrap();
    let p = fs.create_file("/plain").unwrap();
    fs.setxattr(d.ino(), b"user.okeanos.durable", b"1", okeanos::fs::xattr::SetMode::Any).unwrap();
    assert!(fs.is_durable(d.ino()).unwrap() && !fs.is_durable(p.ino()).unwrap());
    assert_eq!(fs.getxattr(d.ino(), b"user.okeanos.durable").unwrap(), b"1");
    assert!(fs.listxattr(d.ino()).unwrap().contains(&b"user.okeanos.durable".to_vec()));
    assert!(fs.getxattr(p.ino(), b"user.okeanos.durable").is_err());
    assert!(fs.setxattr(d.ino(), b"user.okeanos.durable", b"maybe", okeanos::fs::xattr::SetMode::Any).is_err(), "a bad value is refused");
    let before = fs.counters();
    for k in 0..32 {
        d.append(&record(6, k, 4096)).unwrap();
        d.fdatasync().unwrap();
        p.append(&record(7, k, 4096)).unwrap();
        p.fdatasync().unwrap();
    }
    let c = fs.counters().since(&before);
    // Ordered writes the plain file's data in place; the durable file's goes to the log.
    assert!(c.journal_data.blocks >= 32, "the durable file's data was not logged: {:?}", c.journal_data);
    assert!(c.final_data.blocks >= 32, "the plain file's data did not go in place: {:?}", c.final_data);
    // Age-based writeback runs (every 10 ms, for blocks owed 10 ms): bounded wait for it to
    // have sent home whatever it will.
    let mut settled = 0;
    for _ in 0..500 {
        std::thread::sleep(std::time::Duration::from_millis(10));
        if fs.counters().checkpoints > 0 {
            settled += 1;
            if settled > 20 {
                break;
            }
        }
    }
    let home = fs.counters().since(&before).final_data.blocks;
    assert_eq!(home, 32, "the durable file's blocks went home for age: {home} data blocks home, of which 32 are the plain file's (in place)");
    // Truncate: its logged blocks are dropped; a forced checkpoint writes no data home. (Age
    // writeback goes on meanwhile and may release the transactions first: the skipped copies
    // are counted from before the truncate, whichever checkpoint released them.)
    let counts_before = fs.checkpoint_counts();
    d.set_len(0).unwrap();
    d.fsync().unwrap();
    let data_before = fs.counters().final_data.blocks;
    let cp = fs.checkpoint().unwrap();
    assert_eq!(fs.counters().final_data.blocks, data_before, "truncated O_DUR data went home: {cp:?}");
    let skipped = fs.checkpoint_counts().since(&counts_before).skipped;
    assert!(skipped >= 32, "the dropped copies count as skipped: {skipped} since the truncate, {cp:?} in the forced checkpoint");
    let ino = d.ino();
    drop((d, p));
    fs.unmount().unwrap();
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, opts).unwrap();
    assert!(fs.is_durable(ino).unwrap(), "O_DUR persists");
    assert_eq!(fs.read_path("/plain").unwrap().len(), 32 * 4096);
    fs.unmount().unwrap();
    assert!(okeanos::fsck(dev as Arc<dyn Device>, None).is_clean());
}


/// Damage to the newest table copy after it was durable, with mkfs's clean table as the other
/// copy: a mount from the clean copy would replay nothing and lose every synced record in
/// silence. The logs hold commits newer than anything the clean copy knows, which a torn write
/// of the newer copy cannot leave (a mount writes its table before its first commit): the
/// mount is refused with the reason, and fsck reports it. Without commits past the clean copy
/// (a torn table at mount), the older copy is used as before.
#[test]
fn a_damaged_newest_table_over_the_mkfs_table_is_refused_not_mounted_clean() {
    let (dev, sb) = manylogs_fs();
    let okeanos::format::JournalLocation::Internal { start, .. } = sb.journal else { unreachable!() };
    let bs = sb.block_size as usize;
    let seq = |img: &Vec<u8>, slot: usize| -> Option<u64> {
        let at = (start as usize + 1 + slot) * bs;
        okeanos::format::logtable::LogTable::decode(&img[at..at + bs], sb.uuid, sb.group_count, sb.log_area_blocks).ok().map(|t| t.seq)
    };
    // A table at mount only, never torn: the older copy is mkfs's (clean) table.
    let mounted_only = {
        let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, MountOptions::default()).unwrap();
        let img = dev.snapshot();
        drop(fs);
        img
    };
    let image = crashed_image(&dev);
    let newest = if seq(&image, 0) > seq(&image, 1) { 0 } else { 1 };
    let damage = |img: &Vec<u8>| {
        let mut d = img.clone();
        d[(start as usize + 1 + newest) * bs + 70] ^= 0xff;
        Arc::new(MemDevice::from_bytes(d))
    };
    let bad = damage(&image);
    let e = Okeanos::mount(bad.clone() as Arc<dyn Device>, None, MountOptions::default()).err().expect("a mount from the stale clean table must be refused");
    assert!(e.to_string().contains("newest copy of the manylogs log table is damaged") && e.to_string().contains("would lose them"), "{e}");
    let r = okeanos::fsck(bad as Arc<dyn Device>, None);
    assert!(r.problems.iter().any(|p| p.contains("log table is damaged")), "{:?}", r.problems);
    // The same damage with no commit after the mount's table: the clean copy is right.
    let fs = Okeanos::mount(damage(&mounted_only) as Arc<dyn Device>, None, MountOptions::default()).expect("nothing committed: the older copy is the truth");
    fs.unmount().unwrap();
}

/// Damage to the newest table copy when the other copy also needs recovery (both written by
/// one mount: its first table, then snapshots and checkpoints). Recovery from the older copy
/// scans the logs from older positions, whose space may have been reused since the newer copy
/// released it. At a crash after every synced block of a run that snapshots (often, or only
/// when the logs fill) and checkpoints, the newest copy is damaged: the mount must refuse, or
/// have every acknowledged block; never mount clean without one. Before the logs were swept
/// for whole transactions recovery did not reach, it did (2 to 88 states of a run, varying
/// with when snapshots fall).
#[test]
fn a_damaged_newest_table_over_an_older_dirty_table_never_mounts_clean_with_a_loss() {
    for (name, o) in [("snapshots every 3 ms", snapshotting(std::time::Duration::from_millis(3))), ("snapshots when the logs fill", snapshotting(std::time::Duration::from_secs(600)))] {
        let (dev, sb) = manylogs_fs();
        let okeanos::format::JournalLocation::Internal { start, .. } = sb.journal else { unreachable!() };
        let bs = sb.block_size as usize;
        let table = |img: &[u8], slot: usize| -> Option<okeanos::format::logtable::LogTable> {
            let at = (start as usize + 1 + slot) * bs;
            okeanos::format::logtable::LogTable::decode(&img[at..at + bs], sb.uuid, sb.group_count, sb.log_area_blocks).ok()
        };
        let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o).unwrap();
        let f = fs.create_file("/log").unwrap();
        let mut expect = Vec::new();
        let (mut states, mut refused, mut whole, mut lost) = (0, 0, 0, Vec::new());
        for k in 0..300 {
            append_block(&fs, &f, &mut expect, 4, k);
            let mut img = dev.snapshot();
            let (Some(a), Some(b)) = (table(&img, 0), table(&img, 1)) else { continue };
            let (older, newest) = if a.seq < b.seq { (a, 1) } else { (b, 0) };
            if older.needs_no_recovery() {
                continue; // the test above
            }
            states += 1;
            img[(start as usize + 1 + newest) * bs + 70] ^= 0xff;
            match Okeanos::mount(Arc::new(MemDevice::from_bytes(img)) as Arc<dyn Device>, None, MountOptions::default()) {
                Err(e) => {
                    assert!(e.to_string().contains("damaged"), "{name}, after append {k}: {e}");
                    refused += 1;
                }
                Ok(m) if m.read_path("/log").ok().as_deref() == Some(&expect[..]) => whole += 1,
                Ok(m) => lost.push((k, m.counters().recovery)),
            }
        }
        drop(f);
        fs.unmount().unwrap();
        println!("{name}: {states} crash states with a dirty older copy: {refused} refused as damaged, {whole} whole, {} mounted short", lost.len());
        assert!(states >= 100, "{name}: the run must reach the case often: {states} states");
        assert!(lost.is_empty(), "{name}: mounted clean with acknowledged blocks missing: {lost:?}");
    }
}

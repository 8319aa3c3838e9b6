//! Staged appends (`stage_appends=on`, engine/stage.rs): small appends that fit in a file's
//! last block are staged beside the state lock and folded in by the next thread to take it.
//! The file system must look the same as without them: reads, sizes, overwrites, truncation,
//! appends from several threads, syncs, a crash, an unmount. (The crash states are in
//! tests/crash.rs, `staged_appends_crash_states`, with their canary.)

mod common;
use common::*;
use okeanos::{DataMode, Device, FsError, Okeanos};
use std::sync::Arc;

fn staged(mode: DataMode) -> okeanos::MountOptions {
    let mut o = opts(mode);
    o.dmeta = mode == DataMode::Wasteless;
    o.stage_appends = true;
    o
}

/// Appends to `b` (its size in `b_len`) records of each of `sizes` in turn until the disk is
/// full.
fn fill(mode: DataMode, b: &okeanos::File, b_len: &mut u64, sizes: &[usize]) {
    for &size in sizes {
        loop {
            match b.append(&record(2, *b_len as usize, size)) {
                Ok(_) => *b_len += size as u64,
                Err(FsError::NoSpace) => break,
                Err(e) => panic!("{mode:?}: filling b: {e}"),
            }
        }
    }
}

/// A 16 MiB file system with no commit on a timer, files /a (empty) and /b, b filling the
/// disk but for eight blocks given back (free, their transaction committed); b's size.
fn nearly_full(mode: DataMode) -> (Arc<okeanos::MemDevice>, Okeanos, okeanos::File, okeanos::File, u64) {
    let dev = mem_fs(16 * MB, 1024);
    let mut o = staged(mode);
    o.commit_interval = std::time::Duration::from_secs(3600);
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o).unwrap();
    let a = fs.create_file("/a").unwrap();
    let b = fs.create_file("/b").unwrap();
    let mut b_len = 0u64;
    fill(mode, &b, &mut b_len, &[64 * 1024, 4096, 1024]);
    assert!(b_len > 8 * MB, "{mode:?}: b took only {b_len} bytes");
    b_len = (b_len / 4096 - 8) * 4096;
    b.set_len(b_len).unwrap();
    b.fsync().unwrap();
    (dev, fs, a, b, b_len)
}

/// One file: appends staged after the first, read back at once (size and bytes), an overwrite
/// in their middle, a truncation, appends after it at the new end, then a sync and a crash:
/// the synced file comes back whole, the image checks clean.
#[test]
fn staged_appends_read_write_truncate_and_survive_a_crash() {
    for mode in [DataMode::Ordered, DataMode::Data, DataMode::Wasteless] {
        let dev = mem_fs(64 * MB, 1024);
        let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, staged(mode)).unwrap();
        let f = fs.create_file("/log").unwrap();
        let mut want = Vec::new();
        for k in 0..30 {
            let r = record(0, k, 100);
            assert_eq!(f.append(&r).unwrap(), want.len() as u64, "{mode:?}: append {k} begins at the end");
            want.extend_from_slice(&r);
            // Read back at once, without a sync: the staged bytes are there.
            assert_eq!(f.len().unwrap(), want.len() as u64, "{mode:?}: size after append {k}");
        }
        assert_eq!(fs.read_path("/log").unwrap(), want, "{mode:?}: read back before any sync");
        let n_staged = fs.counters().staged_appends;
        assert!(n_staged >= 20, "{mode:?}: only {n_staged} of 30 appends were staged");
        // An overwrite inside the staged bytes, then a truncation into them.
        f.write_at(1_000, b"OVERWRITE").unwrap();
        want[1_000..1_009].copy_from_slice(b"OVERWRITE");
        assert_eq!(f.read_at(990, 30).unwrap(), want[990..1_020]);
        f.set_len(2_050).unwrap();
        want.truncate(2_050);
        assert_eq!(fs.read_path("/log").unwrap(), want, "{mode:?}: after the truncation");
        // Appends after it land at the new end, staged again once one has opened the stage.
        for k in 30..40 {
            let r = record(0, k, 100);
            assert_eq!(f.append(&r).unwrap(), want.len() as u64);
            want.extend_from_slice(&r);
        }
        // A write at the staged end (as the FUSE server sends an append) is staged too.
        let at = want.len() as u64;
        f.write_at(at, b"tail").unwrap();
        want.extend_from_slice(b"tail");
        assert!(fs.counters().staged_appends > n_staged, "{mode:?}: no append staged after the truncation");
        f.fdatasync().unwrap();
        // The crash: the image as the device holds it now, mounted again.
        let image = Arc::new(okeanos::MemDevice::from_bytes(dev.snapshot()));
        drop(f);
        drop(fs);
        let fs = Okeanos::mount(image.clone() as Arc<dyn Device>, None, staged(mode)).unwrap();
        assert_eq!(fs.read_path("/log").unwrap(), want, "{mode:?}: after the crash");
        fs.unmount().unwrap();
        assert_fsck_clean(image, None);
    }
}

/// Four threads appending to one file: every append gets its own range, in the file in the
/// order the returned offsets say, none lost; then a clean unmount with the last appends not
/// synced keeps them.
#[test]
fn staged_appends_from_several_threads_keep_their_ranges() {
    let dev = mem_fs(64 * MB, 1024);
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, staged(DataMode::Wasteless)).unwrap();
    let f = Arc::new(fs.create_file("/shared").unwrap());
    let placed: Vec<Vec<(u64, Vec<u8>)>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|t| {
                let f = f.clone();
                s.spawn(move || {
                    (0..205)
                        .map(|k| {
                            let r = record(t, k, 60 + (k % 5) * 10);
                            let at = f.append(&r).unwrap();
                            if k % 10 == 9 {
                                f.fdatasync().unwrap();
                            }
                            (at, r)
                        })
                        .collect()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all: Vec<(u64, Vec<u8>)> = placed.into_iter().flatten().collect();
    all.sort_by_key(|(at, _)| *at);
    let mut want = Vec::new();
    for (at, r) in &all {
        assert_eq!(*at, want.len() as u64, "appends overlap or leave a gap");
        want.extend_from_slice(r);
    }
    assert_eq!(fs.read_path("/shared").unwrap(), want);
    assert!(fs.counters().staged_appends > 0, "nothing was staged");
    drop(f);
    fs.unmount().unwrap();
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, staged(DataMode::Wasteless)).unwrap();
    assert_eq!(fs.read_path("/shared").unwrap(), want, "after a clean unmount");
    fs.unmount().unwrap();
    assert_fsck_clean(dev, None);
}

/// Appends that start their file's next blocks are staged too (1 KiB records, a quarter of
/// which start a block; whole 4 KiB blocks and 16 KiB records, every one of which starts one
/// or four; 6,000-byte records, which start one or two): the space for those blocks is set
/// aside when the stage is armed, so a disk filling up turns later appends into ENOSPC on the
/// slow path, never into a fold that fails after its append was acknowledged (which would
/// stop the journal). Every acknowledged append reads back, before and after a remount, and
/// the image checks clean.
#[test]
fn staged_appends_that_start_blocks_and_a_full_disk_lose_nothing_acknowledged() {
    for mode in [DataMode::Ordered, DataMode::Data, DataMode::Wasteless] {
        let dev = mem_fs(16 * MB, 1024);
        let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, staged(mode)).unwrap();
        let files: Vec<_> = (0..8).map(|i| fs.create_file(&format!("/f{i}")).unwrap()).collect();
        let mut want = vec![Vec::new(); files.len()];
        let mut refused = 0;
        for k in 0..20_000 {
            let i = k % files.len();
            let r = record(i, k, [1024, 16 * 1024, 4096, 6000][i % 4]);
            match files[i].append(&r) {
                Ok(at) => {
                    assert_eq!(at, want[i].len() as u64, "{mode:?}: append {k} begins at the end");
                    want[i].extend_from_slice(&r);
                }
                Err(FsError::NoSpace) => {
                    assert_eq!(files[i].len().unwrap(), want[i].len() as u64, "{mode:?}: a refused append changed the size");
                    refused += 1;
                    if refused == 40 {
                        break;
                    }
                }
                Err(e) => panic!("{mode:?}: append {k}: {e}"),
            }
            if k % 29 == 0 {
                files[i].fdatasync().unwrap_or_else(|e| panic!("{mode:?}: sync after append {k}: {e}"));
            }
        }
        assert_eq!(refused, 40, "{mode:?}: the disk never filled");
        let c = fs.counters();
        assert!(c.staged_new_blocks > 20, "{mode:?}: only {} folds of staged appends started a block ({} staged)", c.staged_new_blocks, c.staged_appends);
        // The journal goes on: every file syncs, and reads back as acknowledged.
        for (i, f) in files.iter().enumerate() {
            f.fsync().unwrap_or_else(|e| panic!("{mode:?}: final sync of f{i}: {e}"));
            assert_eq!(fs.read_path(&format!("/f{i}")).unwrap(), want[i], "{mode:?}: f{i} before the remount");
        }
        drop(files);
        fs.unmount().unwrap();
        assert_fsck_clean(dev.clone(), None);
        let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, staged(mode)).unwrap();
        for (i, w) in want.iter().enumerate() {
            assert_eq!(&fs.read_path(&format!("/f{i}")).unwrap(), w, "{mode:?}: f{i} after the remount");
        }
        fs.unmount().unwrap();
    }
}

/// The space a stage sets aside for its file's next block is kept from every other
/// allocation. File B fills the disk and gives a few blocks back; file A's kilobyte append
/// takes one and opens a stage armed to start A's next block, setting the space for it
/// aside; B then takes every block it can; A's next append, staged, starts its block when
/// folded. Without the space set aside, B takes it and the fold fails after A's append was
/// acknowledged, which stops the journal: A's sync fails (checked by hand with the set-aside
/// left out). Nothing here waits on timing: no commit runs between the arming and the fold.
#[test]
fn a_stage_keeps_the_space_for_its_next_block() {
    for mode in [DataMode::Ordered, DataMode::Wasteless] {
        let (dev, fs, a, b, mut b_len) = nearly_full(mode);
        let mut want = record(1, 0, 1024);
        a.append(&want).unwrap();
        fill(mode, &b, &mut b_len, &[64 * 1024, 4096, 1024]);
        let staged_before = fs.counters().staged_new_blocks;
        // The rest of a's last block and a kilobyte of the next.
        let last = record(1, 1, 4096 - 1024 + 1024);
        a.append(&last).unwrap_or_else(|e| panic!("{mode:?}: a's append into its next block: {e}"));
        want.extend_from_slice(&last);
        a.fsync().unwrap_or_else(|e| panic!("{mode:?}: a's sync after its staged append started a block: {e}"));
        assert!(fs.counters().staged_new_blocks > staged_before, "{mode:?}: a's append did not start its block as a staged fold");
        assert_eq!(fs.read_path("/a").unwrap(), want, "{mode:?}");
        drop((a, b));
        fs.unmount().unwrap();
        assert_fsck_clean(dev, None);
    }
}

/// A file removed while its appends are staged: the inode goes, and a new file takes its
/// place cleanly; the option is refused with a wrong value.
#[test]
fn a_staged_file_removed_and_a_bad_option() {
    let dev = mem_fs(64 * MB, 1024);
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, staged(DataMode::Ordered)).unwrap();
    let f = fs.create_file("/gone").unwrap();
    for k in 0..10 {
        f.append(&record(1, k, 100)).unwrap();
    }
    drop(f);
    fs.remove_path("/gone").unwrap();
    let g = fs.create_file("/gone").unwrap();
    g.append(b"new").unwrap();
    g.fsync().unwrap();
    assert_eq!(fs.read_path("/gone").unwrap(), b"new");
    drop(g);
    fs.unmount().unwrap();
    assert_fsck_clean(dev, None);
    let e = okeanos::MountOptions::parse("stage_appends=maybe").unwrap_err();
    assert!(e.contains("stage_appends"), "{e}");
    assert!(okeanos::MountOptions::parse("stage_appends").unwrap().stage_appends);
}

/// The journal stops (a commit's flush fails, or panics) while a file's stage is open: the
/// sync of the staged append fails, and so does every later sync of the file, at once,
/// whichever thread ran the commit (`commit_leader` on: the syncing thread; off: the journal
/// thread). A later sync once slept for a commit that would never come when the journal
/// thread had died with the stage open: that commit had been asked for already, and the
/// wake-up of the stop had gone by. The syncs run on a thread of their own, waited for at
/// most 60 s, so that a hang fails the test instead of stalling it.
#[test]
fn syncs_of_a_staged_file_after_the_journal_stopped_fail_and_do_not_hang() {
    for panics in [false, true] {
        for leader in [true, false] {
            let case = format!("flush {}, commit_leader={leader}", if panics { "panics" } else { "fails" });
            let mem = mem_fs(16 * MB, 256);
            let dev = Arc::new(FlushFault::new(mem.clone() as Arc<dyn Device>, panics));
            let mut o = staged(DataMode::Wasteless);
            o.commit_leader = leader;
            let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o).unwrap();
            let f = Arc::new(fs.create_file("/log").unwrap());
            f.append(b"synced before\n").unwrap();
            f.fdatasync().unwrap();
            let staged_before = fs.counters().staged_appends;
            dev.arm();
            // An append can miss the stage while a commit is being planned (stages are
            // suspended then): append until one is staged, a few at most.
            for _ in 0..20 {
                f.append(b"its commit fails\n").unwrap();
                if fs.counters().staged_appends > staged_before {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            assert!(fs.counters().staged_appends > staged_before, "{case}: no append was staged");
            let (tx, rx) = std::sync::mpsc::channel();
            let g = f.clone();
            std::thread::spawn(move || {
                let results: Vec<bool> = (0..3).map(|_| g.fdatasync().is_err()).collect();
                let _ = tx.send(results);
            });
            let results = rx.recv_timeout(std::time::Duration::from_secs(60)).unwrap_or_else(|_| panic!("{case}: a sync after the journal stopped hung"));
            assert_eq!(results, [true, true, true], "{case}: a sync was acknowledged after the failed flush");
            assert!(fs.read_only_reason().is_some(), "{case}: not read-only");
            assert_eq!(f.read_at(0, 14).unwrap(), b"synced before\n");
            drop(f);
            drop(fs);
            let fs = mount(&mem, DataMode::Wasteless);
            assert!(fs.read_path("/log").unwrap().starts_with(b"synced before\n"), "{case}");
            fs.unmount().unwrap();
        }
    }
}

/// Appends of several blocks are staged whole: a file appended 16 KiB at a time with a sync
/// after each takes the slow path for its first append, which opens a stage reaching four
/// blocks past the file's end, and every later append is staged and folded in, starting four
/// blocks (before stages reached more than one block, none was). A 6,000-byte record after
/// them crosses into a fifth block beyond the staged room and takes the slow path; the file
/// reads back whole before and after a remount, and the image checks clean.
#[test]
fn appends_of_several_blocks_are_staged_whole() {
    for mode in [DataMode::Ordered, DataMode::Wasteless] {
        let dev = mem_fs(16 * MB, 1024);
        let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, staged(mode)).unwrap();
        let f = fs.create_file("/big").unwrap();
        let mut want = Vec::new();
        let before = fs.counters();
        for k in 0..40 {
            let r = record(3, k, 16 * 1024);
            assert_eq!(f.append(&r).unwrap(), want.len() as u64, "{mode:?}: append {k} begins at the end");
            want.extend_from_slice(&r);
            f.fdatasync().unwrap_or_else(|e| panic!("{mode:?}: sync after append {k}: {e}"));
        }
        let c = fs.counters();
        let (pushed, started) = (c.staged_appends - before.staged_appends, c.staged_new_blocks - before.staged_new_blocks);
        assert!(pushed >= 35, "{mode:?}: only {pushed} of 40 appends of 16 KiB were staged");
        assert!(started >= 35, "{mode:?}: only {started} folds of staged appends started blocks");
        let r = record(3, 40, 6000);
        f.append(&r).unwrap();
        want.extend_from_slice(&r);
        f.fsync().unwrap();
        assert_eq!(fs.read_path("/big").unwrap(), want, "{mode:?}: before the remount");
        drop(f);
        fs.unmount().unwrap();
        assert_fsck_clean(dev.clone(), None);
        let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, staged(mode)).unwrap();
        assert_eq!(fs.read_path("/big").unwrap(), want, "{mode:?}: after the remount");
        fs.unmount().unwrap();
    }
}

/// A fold that starts fewer blocks than its stage's room reached into spends the space set
/// aside for all of them, so the room shrinks to the rest of the new last block: the next new
/// block waits for the stage to be armed again, with space set aside again. File B fills the
/// disk and gives eight blocks back; A's 16 KiB append takes four and opens a stage reaching
/// four blocks further, setting their space aside; A's next append, 4 KiB, is staged and
/// folded in (A's size read under the lock), starting one block and letting the other three
/// go; B takes them. A's next 12 KiB append then finds no room and is refused for space on the
/// slow path. Had the room stayed at 12 KiB, that append would be staged and acknowledged,
/// and its fold would fail for space, stopping the journal (A's sync fails). No commit runs
/// from A's first append on.
#[test]
fn a_fold_that_starts_fewer_blocks_than_its_room_gives_the_rest_of_the_room_up() {
    for mode in [DataMode::Ordered, DataMode::Wasteless] {
        let (dev, fs, a, b, mut b_len) = nearly_full(mode);
        let mut want = record(1, 0, 16 * 1024);
        a.append(&want).unwrap_or_else(|e| panic!("{mode:?}: a's first append: {e}"));
        let staged_before = fs.counters().staged_new_blocks;
        let next = record(1, 1, 4096);
        a.append(&next).unwrap();
        want.extend_from_slice(&next);
        assert_eq!(a.len().unwrap(), want.len() as u64, "{mode:?}");
        assert_eq!(fs.counters().staged_new_blocks, staged_before + 1, "{mode:?}: a's 4 KiB append was not staged and folded in");
        fill(mode, &b, &mut b_len, &[64 * 1024, 4096]);
        let last = record(1, 2, 12 * 1024);
        match a.append(&last) {
            Ok(_) => {
                want.extend_from_slice(&last);
                a.fsync().unwrap_or_else(|e| panic!("{mode:?}: a's acknowledged 12 KiB append was lost: {e}"));
            }
            Err(FsError::NoSpace) => a.fsync().unwrap(),
            Err(e) => panic!("{mode:?}: a's 12 KiB append: {e}"),
        }
        assert_eq!(fs.read_path("/a").unwrap(), want, "{mode:?}");
        drop((a, b));
        fs.unmount().unwrap();
        assert_fsck_clean(dev, None);
    }
}

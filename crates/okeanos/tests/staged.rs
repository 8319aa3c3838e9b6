//! Staged appends (`stage_appends=on`, engine/stage.rs): small appends that fit in a file's
//! last block are staged beside the state lock and folded in by the next thread to take it.
//! The file system must look the same as without them: reads, sizes, overwrites, truncation,
//! appends from several threads, syncs, a crash, an unmount. (The crash states are in
//! tests/crash.rs, `staged_appends_crash_states`, with their canary.)

mod common;
use common::*;
use okeanos::{DataMode, Device, Okeanos};
use std::sync::Arc;

fn staged(mode: DataMode) -> okeanos::MountOptions {
    let mut o = opts(mode);
    o.dmeta = mode == DataMode::Wasteless;
    o.stage_appends = true;
    o
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

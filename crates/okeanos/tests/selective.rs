//! Selective journaling decides once per update sequence (Okeanos paper section 3): the first
//! update after a block last reached its final location picks journal or in place, and the
//! rest of the sequence follows, whatever its sizes. These tests watch the block kinds that
//! reach the devices.

mod common;
use common::*;
use okeanos::journal::content::ContentConfig;
use okeanos::{Device, MountOptions, Okeanos};
use std::sync::Arc;

fn mount_selective(dev: &Arc<okeanos::MemDevice>) -> Okeanos {
    Okeanos::mount(dev.clone() as Arc<dyn Device>, None, MountOptions::default().content_config(ContentConfig::parse("selective").unwrap())).unwrap()
}

#[test]
fn a_sequence_that_starts_small_stays_journaled() {
    let dev = mem_fs(16 * MB, 1024);
    let fs = mount_selective(&dev);
    let f = fs.create_file("/seq").unwrap();
    // A small first update starts a journaled sequence for block 0 ...
    f.write_at(0, &[1u8; 100]).unwrap();
    f.fsync().unwrap();
    let c0 = fs.counters();
    assert_eq!(c0.final_data.blocks, 0, "a small first update goes to the journal");
    assert!(c0.records >= 1);
    // ... and a full-block update of the same block later in the sequence is journaled too
    // (whole), not written in place: journaling is not switched off part-way.
    f.write_at(0, &[2u8; 4096]).unwrap();
    f.fsync().unwrap();
    let c1 = fs.counters();
    assert_eq!(c1.final_data.blocks, 0, "still no in-place write of the block");
    assert_eq!(c1.journal_data.blocks, c0.journal_data.blocks + 1, "the full update was logged whole");
    drop(f);
    fs.unmount().unwrap();
    assert_fsck_clean(dev, None);
}

#[test]
fn a_sequence_that_starts_large_stays_in_place() {
    let dev = mem_fs(16 * MB, 1024);
    let fs = mount_selective(&dev);
    let f = fs.create_file("/seq").unwrap();
    // Block 0 and 1 start with full-block updates: written in place, ordered.
    f.write_at(0, &[3u8; 8192]).unwrap();
    // A small update to block 0 in the same sequence (before the commit wrote it) stays in place.
    f.write_at(10, &[4u8; 50]).unwrap();
    f.fsync().unwrap();
    let c = fs.counters();
    assert_eq!(c.final_data.blocks, 2, "both blocks written in place by the commit");
    assert_eq!((c.journal_data.blocks, c.records), (0, 0), "nothing of them logged");
    // The commit wrote them: their sequences ended. A new small update starts a journaled one.
    f.write_at(20, &[5u8; 50]).unwrap();
    f.fsync().unwrap();
    let c2 = fs.counters();
    assert_eq!(c2.final_data.blocks, 2, "no new in-place write");
    assert_eq!(c2.records, 1, "the new sequence is journaled");
    let mut want = vec![3u8; 8192];
    want[10..60].fill(4);
    want[20..70].fill(5);
    assert_eq!(f.read_at(0, 8192).unwrap(), want);
    drop(f);
    fs.unmount().unwrap();
    assert_fsck_clean(dev.clone(), None);
    let fs = mount_selective(&dev);
    assert_eq!(fs.read_path("/seq").unwrap(), want);
    fs.unmount().unwrap();
}

#[test]
fn write_threshold_is_configurable() {
    let dev = mem_fs(16 * MB, 1024);
    let o = MountOptions::parse("data=selective,write_threshold=512").unwrap();
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o).unwrap();
    let f = fs.create_file("/t").unwrap();
    f.write_at(0, &[1u8; 1000]).unwrap(); // >= 512: in place
    f.write_at(8192, &[1u8; 100]).unwrap(); // < 512: journaled
    f.fsync().unwrap();
    let c = fs.counters();
    assert_eq!((c.final_data.blocks, c.records), (1, 1));
    drop(f);
    fs.unmount().unwrap();
    assert!(MountOptions::parse("data=ordered,dmeta").unwrap_err().contains("dmeta"));
    assert!(MountOptions::parse("data=selective,write_threshold=0").unwrap_err().contains("write_threshold"));
}

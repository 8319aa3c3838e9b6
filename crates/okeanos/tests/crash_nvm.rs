//! Crash tests of the nvm placement (UBJ, issue 14): all seven content policies over an NVM
//! journal, crashed at every fence (and just before it), every disk flush, every acknowledged
//! sync and evenly between, with the crash states of both media: the disk's (unflushed
//! writes kept, lost or torn at sectors) and the NVM's (for each cache line with stores not
//! yet fenced, any prefix of them in program order, 8-byte words atomic), including crashes
//! during recovery. Two canaries must fail them: no fence before the commit word, and older
//! copies freed before the commit point.

mod common;
mod harness;
use common::*;
use harness::{enumerate, workload, Journal};
use okeanos::journal::content::ContentConfig;
use okeanos::nvm::{MemNvm, Nvm, NvmHandle};
use okeanos::{Device, MemDevice, MkfsOptions, MountOptions, Okeanos};
use std::sync::Arc;

/// The smallest NVM journal for 1 KiB blocks (992 slots) plus a little, for the crash
/// states: checkpoints for space (frozen slots above a quarter) happen in every run.
const CRASH_NVM_BYTES: u64 = 1100 << 10;
/// The smallest for 4 KiB blocks (4,064 slots) plus a little.
const NVM_BYTES: u64 = 17 << 20;

fn crash_test(policy: &str) {
    let cfg = ContentConfig::parse(policy).unwrap();
    let run = workload(cfg, Journal::Nvm { bytes: CRASH_NVM_BYTES }, 120, &|_| {}, 0x0b1 + cfg.mode as u64);
    let events = run.recorder.events().len();
    let out = enumerate(cfg, &run, 150, 30);
    out.assert_clean(500);
    eprintln!("nvm {policy}: {} crash states over {events} events, no violation", out.states);
}

/// Wasteless with `fresh_blocks=in_place` over the NVM journal: whole new blocks go home on the
/// disk, flushed before the commit word is fenced in NVM, so the crash states of both media
/// keep every synced write whole and every write call atomic (docs/JOURNALING.md, "New
/// blocks in place").
#[test]
fn nvm_crash_states_wasteless_fresh_blocks_in_place() {
    let cfg = ContentConfig { fresh_in_place: true, ..ContentConfig::parse("wasteless+dmeta").unwrap() };
    let run = workload(cfg, Journal::Nvm { bytes: CRASH_NVM_BYTES }, 120, &|_| {}, 0x0f1e5);
    assert!(run.commit_in_place_blocks > 0, "no new block went in place");
    let out = enumerate(cfg, &run, 150, 30);
    out.assert_clean(500);
    eprintln!("nvm wasteless+dmeta fresh_blocks=in_place: {} crash states, {} blocks in place, no violation", out.states, run.commit_in_place_blocks);
}

#[test]
fn nvm_crash_states_writeback() {
    crash_test("writeback");
}

#[test]
fn nvm_crash_states_ordered() {
    crash_test("ordered");
}

#[test]
fn nvm_crash_states_data() {
    crash_test("data");
}

#[test]
fn nvm_crash_states_wasteless_dmeta() {
    crash_test("wasteless+dmeta");
}

#[test]
fn nvm_crash_states_wasteless() {
    crash_test("wasteless");
}

#[test]
fn nvm_crash_states_selective() {
    crash_test("selective");
}

#[test]
fn nvm_crash_states_selective_dmeta() {
    crash_test("selective+dmeta");
}

/// With a DRAM cache of 64 blocks, owed blocks are parked (their data dropped from DRAM and
/// read from their frozen NVM slot) through the run: crash states as above.
#[test]
fn nvm_crash_states_data_with_parked_buffers() {
    let cfg = ContentConfig::parse("data").unwrap();
    let run = workload(cfg, Journal::Nvm { bytes: CRASH_NVM_BYTES }, 120, &|o| o.cache_blocks = 64, 0x9a4);
    let out = enumerate(cfg, &run, 100, 0);
    out.assert_clean(500);
}

/// Canary 1: without the fence between the slots and the commit word, a crash can persist the
/// commit word while a slot's data or entry is not: the crash tests must notice.
#[test]
fn canary_no_fence_before_the_commit_word_is_caught() {
    for policy in ["data", "ordered"] {
        let cfg = ContentConfig::parse(policy).unwrap();
        let run = workload(cfg, Journal::Nvm { bytes: CRASH_NVM_BYTES }, 40, &|o| o.faults.nvm_no_fence = true, 0xca7 + cfg.mode as u64);
        let out = enumerate(cfg, &run, 60, 0);
        assert!(!out.violations.is_empty(), "{policy}: the crash tests did not notice a missing fence ({} states)", out.states);
    }
}

/// Canary 2: freeing a block's older copy when the new one is placed (the paper's "released
/// immediately"), before the commit point, lets the same commit reuse it; a crash before the
/// commit word then has neither copy: the crash tests must notice.
#[test]
fn canary_old_copy_freed_before_the_commit_point_is_caught() {
    for policy in ["data", "wasteless+dmeta"] {
        let cfg = ContentConfig::parse(policy).unwrap();
        let run = workload(cfg, Journal::Nvm { bytes: CRASH_NVM_BYTES }, 60, &|o| o.faults.nvm_free_early = true, 0xca8 + cfg.mode as u64);
        let out = enumerate(cfg, &run, 60, 0);
        assert!(!out.violations.is_empty(), "{policy}: the crash tests did not notice an old copy freed early ({} states)", out.states);
    }
}

fn nvm_fs() -> (Arc<MemDevice>, Arc<MemNvm>) {
    let dev = Arc::new(MemDevice::new(16 * MB));
    let nvm = Arc::new(MemNvm::new(NVM_BYTES));
    Okeanos::mkfs_nvm(dev.as_ref(), nvm.as_ref(), &MkfsOptions { journal_blocks: 256, nvm_path: Some("nvm".into()), ..Default::default() }).unwrap();
    (dev, nvm)
}

fn mount(dev: &Arc<MemDevice>, nvm: &Arc<MemNvm>, policy: &str) -> Result<Okeanos, okeanos::FsError> {
    let mut o = MountOptions::default().content_config(ContentConfig::parse(policy).unwrap());
    o.nvm = Some(NvmHandle(nvm.clone()));
    Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o)
}

/// A commit writes nothing to the disk: syncs are NVM stores and fences only; recovery after
/// a crash writes each block's newest version home, and says what it scanned.
#[test]
fn commits_write_no_journal_bytes_and_recovery_reports_the_table() {
    let (dev, nvm) = nvm_fs();
    let fs = mount(&dev, &nvm, "data").unwrap();
    let f = fs.create_file("/log").unwrap();
    let before = dev.counters();
    for k in 0..50 {
        f.append(&record(1, k, 128)).unwrap();
        f.fdatasync().unwrap();
    }
    let c = fs.counters();
    assert_eq!(dev.counters().bytes_written, before.bytes_written, "no disk writes for 50 synced appends");
    assert_eq!(c.journal_bytes, 0);
    assert!(c.nvm_bytes >= 50 * 4096 && c.nvm_fences >= 100, "{} NVM bytes, {} fences", c.nvm_bytes, c.nvm_fences);
    drop(f);
    drop(fs); // a crash: nothing checkpointed
    let fs = mount(&dev, &nvm, "data").unwrap();
    let r = fs.counters().recovery.expect("recovery ran");
    assert!(r.nvm_slots_scanned >= 4064 && r.blocks_replayed >= 2, "{r:?}");
    let want: Vec<u8> = (0..50).flat_map(|k| record(1, k, 128)).collect();
    assert_eq!(fs.read_path("/log").unwrap(), want);
    fs.unmount().unwrap();
    assert_fsck_clean(dev.clone(), None);
    // Remount after the clean unmount: nothing to recover.
    let fs = mount(&dev, &nvm, "data").unwrap();
    assert!(fs.counters().recovery.is_none());
    assert_eq!(fs.read_path("/log").unwrap(), want);
    fs.unmount().unwrap();
}

/// Wrong or damaged NVM: clear errors, nothing lost.
#[test]
fn a_wrong_or_damaged_nvm_is_refused_clearly() {
    let (dev, nvm) = nvm_fs();
    let (_, other) = nvm_fs();
    let e = mount(&dev, &other, "data").err().expect("refused").to_string();
    assert!(e.contains("another file system"), "{e}");
    // Too small an NVM at mkfs.
    let small = MemNvm::new(1 << 20);
    let e = Okeanos::mkfs_nvm(&MemDevice::new(16 * MB), &small, &MkfsOptions { nvm_path: Some("x".into()), journal_blocks: 256, ..Default::default() }).err().expect("refused").to_string();
    assert!(e.contains("needs at least"), "{e}");
    // The newest committed copy damaged: refused, not silently replayed or dropped.
    let fs = mount(&dev, &nvm, "data").unwrap();
    let f = fs.create_file("/a").unwrap();
    f.append(b"hello").unwrap();
    f.fsync().unwrap();
    drop(f);
    drop(fs);
    let h = okeanos::format::nvm::NvmHeader::decode(&nvm.snapshot()[..64], nvm.len()).unwrap();
    let mut b = [0u8; 1];
    nvm.load(h.data_at(0) + 100, &mut b).unwrap();
    nvm.store(h.data_at(0) + 100, &[b[0] ^ 0xff]).unwrap();
    let e = mount(&dev, &nvm, "data").err().expect("refused").to_string();
    assert!(e.contains("fails its checksum"), "{e}");
    // A damaged header.
    nvm.store(3, &[0xee]).unwrap();
    let e = mount(&dev, &nvm, "data").err().expect("refused").to_string();
    assert!(e.contains("nvm header"), "{e}");
}

/// UBJ's unified cache: with a DRAM cache smaller than what is owed to checkpoint, owed blocks
/// are parked and read back from their frozen NVM slots; everything reads right, before and
/// after a checkpoint, and after a crash.
#[test]
fn frozen_blocks_serve_reads_when_the_dram_cache_drops_them() {
    let (dev, nvm) = nvm_fs();
    let mut o = MountOptions::default().content_config(ContentConfig::parse("data").unwrap());
    o.nvm = Some(NvmHandle(nvm.clone()));
    o.cache_blocks = 64;
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o.clone()).unwrap();
    let f = fs.create_file("/f").unwrap();
    for k in 0..400 {
        f.write_at(k * 4096, &record(5, k as usize, 4096)).unwrap();
        if k % 20 == 19 {
            f.fsync().unwrap();
        }
    }
    f.fsync().unwrap();
    let parked = fs.counters().nvm.unwrap().parked_buffers;
    assert!(parked > 100, "{parked} buffers parked with a 64-block cache");
    let want: Vec<u8> = (0..400).flat_map(|k| record(5, k, 4096)).collect();
    assert_eq!(fs.read_path("/f").unwrap(), want, "parked blocks read from NVM");
    // Overwrite some parked blocks, partly: loaded first, then changed.
    f.write_at(10 * 4096 + 100, b"changed").unwrap();
    f.fsync().unwrap();
    let mut want2 = want.clone();
    want2[10 * 4096 + 100..10 * 4096 + 107].copy_from_slice(b"changed");
    assert_eq!(fs.read_path("/f").unwrap(), want2);
    drop(f);
    drop(fs); // crash
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o).unwrap();
    assert_eq!(fs.read_path("/f").unwrap(), want2);
    fs.sync().unwrap();
    fs.unmount().unwrap();
    assert_fsck_clean(dev, None);
}

//! Trusting the image (docs/JOURNALING.md, "Damage, exclusive access and read-only
//! recovery"): a damaged transaction in the middle of the log is told from a torn tail,
//! recovery replays only what is safe, marks the file system with errors and never lets a
//! leftover transaction replay later; read-only mounts recover in memory; one writer at a time.

mod common;
use common::*;
use okeanos::format::journal::{self as jf, JBlockType};
use okeanos::format::superblock::state;
use okeanos::{DataMode, Device, FileDevice, FsError, LogPos, MemDevice, MkfsOptions, MountOptions, Okeanos, Tid};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const BS: usize = 4096;
const JOURNAL_BLOCKS: u64 = 1024;

/// No timer-driven commit or writeback during a test: transactions are exactly the syncs.
fn quiet(mode: DataMode) -> MountOptions {
    let mut o = opts(mode);
    o.commit_interval = Duration::from_secs(3600);
    o.writeback_period = Duration::from_secs(3600);
    o.expire_period = Some(Duration::from_secs(3600));
    o
}

fn mount_img(img: &[u8], o: MountOptions) -> (Arc<MemDevice>, Result<Okeanos, FsError>) {
    let dev = Arc::new(MemDevice::from_bytes(img.to_vec()));
    let r = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o);
    (dev, r)
}

/// Files and their contents as of each committed transaction we care about.
type Files = BTreeMap<String, Vec<u8>>;

struct Crashed {
    image: Vec<u8>,
    /// The transaction to damage, and the ones after it.
    mid: Tid,
    after: Vec<Tid>,
    /// Contents as of the transaction before `mid` (what a safe recovery leaves).
    before_mid: Files,
}

fn read_all(fs: &Okeanos) -> Files {
    let mut out = Files::new();
    for e in fs.list_path("/").unwrap() {
        let name = format!("/{}", String::from_utf8_lossy(&e.name));
        out.insert(name.clone(), fs.read_path(&name).unwrap());
    }
    out
}

/// A run whose middle transaction holds every block kind: a descriptor, whole data blocks,
/// metadata blocks, multiwrite blocks (wasteless: many small records), a revoke block (a
/// removed file whose blocks were logged) and the commit; two more transactions follow it.
/// Then a crash (the mount is dropped without unmount).
fn crashed_run(mode: DataMode) -> Crashed {
    let dev = mem_fs(32 * MB, JOURNAL_BLOCKS);
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, quiet(mode)).unwrap();
    fs.create_file("/keep").unwrap().write_at(0, &record(1, 0, 3 * BS)).unwrap();
    fs.create_file("/victim").unwrap().write_at(0, &record(2, 0, 3 * BS)).unwrap();
    for s in 0..8 {
        fs.create_file(&format!("/s{s}")).unwrap().write_at(0, &record(10 + s, 0, 300)).unwrap();
    }
    fs.sync().unwrap();
    let before_mid = read_all(&fs);
    // The middle transaction.
    for s in 0..8 {
        let f = fs.open_file(&format!("/s{s}")).unwrap();
        f.append(&record(10 + s, 1, 700)).unwrap();
    }
    fs.open_file("/keep").unwrap().write_at(BS as u64, &record(1, 1, BS)).unwrap();
    fs.remove_path("/victim").unwrap();
    fs.sync().unwrap();
    let mid = fs.committed_tid();
    let mut after = Vec::new();
    for k in 0..2 {
        fs.create_file(&format!("/late{k}")).unwrap().write_at(0, &record(30 + k, 0, 500)).unwrap();
        fs.open_file("/s0").unwrap().append(&record(10, 2 + k, 100)).unwrap();
        fs.sync().unwrap();
        after.push(fs.committed_tid());
    }
    drop(fs);
    Crashed { image: dev.snapshot(), mid, after, before_mid }
}

/// Log positions of one block of each kind in transaction `tid`.
fn blocks_by_kind(image: &[u8], tid: Tid) -> BTreeMap<&'static str, LogPos> {
    let dev: Arc<dyn Device> = Arc::new(MemDevice::from_bytes(image.to_vec()));
    let d = okeanos::inspect::dump_journal(dev, None).unwrap();
    let t = d.transactions.iter().find(|t| t.tid == tid).expect("transaction in the log");
    let mut kinds = BTreeMap::new();
    let mut pos = t.start;
    while pos != t.end {
        let at = d.region.device_block(pos).get() as usize * BS;
        let b = &image[at..at + BS];
        let kind = match jf::header(b) {
            Some((JBlockType::Descriptor, _)) => "descriptor",
            Some((JBlockType::Revoke, _)) => "revoke",
            Some((JBlockType::Commit, _)) => "commit",
            Some((JBlockType::FastCommit, _)) => "fast commit",
            _ if jf::decode_multiwrite(b).is_ok() => "multiwrite",
            _ => {
                let full = t.items.iter().find_map(|i| match i {
                    okeanos::journal::recovery::ScanItem::Full { pos: p, tag } if *p == pos => Some(tag.is_metadata()),
                    _ => None,
                });
                match full {
                    Some(true) => "whole metadata block",
                    Some(false) => "whole data block",
                    None => "unknown",
                }
            }
        };
        kinds.entry(kind).or_insert(pos);
        pos = d.region.next(pos);
    }
    kinds
}

fn flip(image: &mut [u8], log_pos: LogPos, byte: usize) {
    // Internal journal: journal block j is device block `start + j`.
    let dev: Arc<dyn Device> = Arc::new(MemDevice::from_bytes(image.to_vec()));
    let d = okeanos::inspect::dump_journal(dev, None).unwrap();
    let at = d.region.device_block(log_pos).get() as usize * BS + byte;
    image[at] ^= 0x5a;
}

/// The highest tid of any valid journal header in the ring.
fn max_tid_in_ring(image: &[u8]) -> Tid {
    let dev: Arc<dyn Device> = Arc::new(MemDevice::from_bytes(image.to_vec()));
    let d = okeanos::inspect::dump_journal(dev, None).unwrap();
    d.region
        .positions()
        .filter_map(|j| {
            let at = d.region.device_block(j).get() as usize * BS;
            let b = &image[at..at + BS];
            let ok = match jf::header(b)? {
                (JBlockType::Descriptor, _) => jf::Descriptor::decode(b).is_ok(),
                (JBlockType::Commit, _) => jf::CommitBlock::decode(b).is_ok(),
                (JBlockType::Revoke, _) => jf::RevokeBlock::decode(b).is_ok(),
                (JBlockType::FastCommit, _) => jf::FastCommit::decode(b, true).is_ok(),
                _ => false,
            };
            ok.then(|| jf::header(b).unwrap().1)
        })
        .max()
        .unwrap_or(Tid::ZERO)
}

#[test]
fn damaged_middle_transaction_of_every_block_kind() {
    for mode in [DataMode::Data, DataMode::Wasteless] {
        let run = crashed_run(mode);
        let kinds = blocks_by_kind(&run.image, run.mid);
        let want: &[&str] = match mode {
            DataMode::Wasteless => &["descriptor", "commit", "revoke", "multiwrite", "whole data block", "whole metadata block"],
            _ => &["descriptor", "commit", "revoke", "whole data block", "whole metadata block"],
        };
        for k in want {
            assert!(kinds.contains_key(k), "{mode}: the middle transaction has no {k} block: {kinds:?}");
        }
        for (kind, &pos) in &kinds {
            let ctx = format!("{mode}, {kind} of transaction {} damaged", run.mid);
            let mut img = run.image.clone();
            flip(&mut img, pos, if kind.starts_with("whole") { 2000 } else { 40 });

            // A read-write mount replays the safe prefix, marks the errors and refuses.
            let (dev, r) = mount_img(&img, quiet(mode));
            let err = match r {
                Err(e) => e,
                Ok(_) => panic!("{ctx}: a read-write mount succeeded"),
            };
            let msg = err.to_string();
            assert!(matches!(err, FsError::HasErrors(_)), "{ctx}: {msg}");
            assert!(msg.contains(&format!("transaction {} damaged", run.mid)) && msg.contains("2 committed transactions"), "{ctx}: {msg}");
            let img = dev.snapshot();
            let (sb, _, jsb, _) = okeanos::inspect::describe(Arc::new(MemDevice::from_bytes(img.clone())), None).unwrap();
            assert_ne!(sb.state & state::ERRORS, 0, "{ctx}");
            assert_eq!((sb.error.tid, sb.error.following), (run.mid, 2), "{ctx}");
            // No transaction left in the log can ever match a tid the journal will use.
            assert!(jsb.sequence > max_tid_in_ring(&img), "{ctx}: next tid {} is not beyond the log's {}", jsb.sequence, max_tid_in_ring(&img));
            assert!(jsb.sequence > *run.after.last().unwrap(), "{ctx}");

            // Read-only (and errors=remount-ro) mounts show the state before the damaged one.
            let mut ro = quiet(mode);
            ro.read_only = true;
            let (_, r) = mount_img(&img, ro);
            let fs = r.unwrap_or_else(|e| panic!("{ctx}: ro mount: {e}"));
            assert_eq!(read_all(&fs), run.before_mid, "{ctx}");
            fs.unmount().unwrap();
            let mut rr = quiet(mode);
            rr.errors_remount_ro = true;
            let (_, r) = mount_img(&img, rr);
            let fs = r.unwrap_or_else(|e| panic!("{ctx}: errors=remount-ro: {e}"));
            assert!(matches!(fs.create_file("/x"), Err(FsError::ReadOnly(_))), "{ctx}");
            assert!(fs.read_only_reason().unwrap().contains("damaged"), "{ctx}");
            drop(fs);

            // fsck: every structure checks out, only the error state is left; clearing it
            // makes the image mountable again.
            let dev = Arc::new(MemDevice::from_bytes(img));
            let r = okeanos::fsck(dev.clone(), None);
            assert!(r.only_error_state(), "{ctx}: {:?}", r.problems);
            okeanos::inspect::clear_errors(dev.clone(), None).unwrap();
            assert_fsck_clean(dev.clone(), None);

            // New commits, then a crash: the old transactions after the damaged one never
            // come back, the new ones all do.
            let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, quiet(mode)).unwrap();
            let mut expect = run.before_mid.clone();
            for k in 0..6 {
                let f = fs.open_file("/s0").unwrap();
                let rec = record(99, k, 900);
                f.append(&rec).unwrap();
                expect.get_mut("/s0").unwrap().extend_from_slice(&rec);
                let name = format!("/new{k}");
                fs.create_file(&name).unwrap().write_at(0, &record(98, k, 2 * BS)).unwrap();
                expect.insert(name, record(98, k, 2 * BS));
                fs.sync().unwrap();
            }
            drop(fs);
            let (dev2, r) = mount_img(&dev.snapshot(), quiet(mode));
            let fs = r.unwrap_or_else(|e| panic!("{ctx}: mount after the second crash: {e}"));
            assert_eq!(read_all(&fs), expect, "{ctx}: after the second crash");
            fs.unmount().unwrap();
            assert_fsck_clean(dev2, None);
        }
    }
}

/// Fast commit blocks (one block a transaction) under the same rules: damage to one in the
/// middle of the log, with committed transactions after it, is damage (the safe prefix
/// replayed, the error state set); damage to the last one is a torn tail.
#[test]
fn a_damaged_fast_commit_is_damage_in_the_middle_and_a_torn_tail_at_the_end() {
    let mut o = quiet(DataMode::Wasteless);
    o.dmeta = true;
    let dev = mem_fs(32 * MB, JOURNAL_BLOCKS);
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o.clone()).unwrap();
    let f = fs.create_file("/f").unwrap();
    fs.sync().unwrap();
    let fast_before = fs.counters().fast_commits;
    // (tid, contents of /f once it committed)
    let mut states = Vec::new();
    let mut data = Vec::new();
    for k in 0..5 {
        data.extend_from_slice(&record(5, k, 128));
        f.append(&data[data.len() - 128..]).unwrap();
        f.fsync().unwrap();
        states.push((fs.committed_tid(), data.clone()));
    }
    assert_eq!(fs.counters().fast_commits - fast_before, 5, "each sync is one fast commit");
    drop(f);
    drop(fs);
    let image = dev.snapshot();
    for (i, &(tid, _)) in states.iter().enumerate() {
        let kinds = blocks_by_kind(&image, tid);
        assert_eq!(kinds.keys().copied().collect::<Vec<_>>(), vec!["fast commit"], "transaction {tid} is one fast commit block");
        let mut img = image.clone();
        flip(&mut img, kinds["fast commit"], 40);
        let ctx = format!("fast commit {tid} damaged");
        if i + 1 < states.len() {
            let (dev, r) = mount_img(&img, o.clone());
            let err = r.err().unwrap_or_else(|| panic!("{ctx}: a read-write mount succeeded"));
            let following = states.len() - i - 1;
            assert!(matches!(err, FsError::HasErrors(_)) && err.to_string().contains(&format!("transaction {tid} damaged")), "{ctx}: {err}");
            let (sb, _, _, _) = okeanos::inspect::describe(Arc::new(MemDevice::from_bytes(dev.snapshot())), None).unwrap();
            assert_eq!((sb.error.tid, sb.error.following), (tid, following as u64), "{ctx}");
            let mut ro = o.clone();
            ro.read_only = true;
            let (_, r) = mount_img(&dev.snapshot(), ro);
            let fs = r.unwrap_or_else(|e| panic!("{ctx}: ro mount: {e}"));
            let before = if i == 0 { Vec::new() } else { states[i - 1].1.clone() };
            assert_eq!(fs.read_path("/f").unwrap(), before, "{ctx}: the state before the damaged one");
            fs.unmount().unwrap();
        } else {
            let (_, r) = mount_img(&img, o.clone());
            let fs = r.unwrap_or_else(|e| panic!("{ctx}: {e}"));
            let rep = fs.counters().recovery.unwrap();
            assert!(rep.damage.is_none() && rep.last_tid == tid - 1, "{ctx}: a torn tail: {rep:?}");
            assert_eq!(fs.read_path("/f").unwrap(), states[i - 1].1, "{ctx}");
            fs.unmount().unwrap();
        }
    }
}

#[test]
fn damage_in_the_last_transaction_is_a_torn_tail() {
    // Nothing follows the last transaction, so its damage looks like a crash during its
    // commit: it is dropped, the file system mounts cleanly without the error state. (A
    // journal cannot tell the two apart; docs/JOURNALING.md says so.)
    let run = crashed_run(DataMode::Data);
    let last = *run.after.last().unwrap();
    let kinds = blocks_by_kind(&run.image, last);
    for (kind, &pos) in &kinds {
        let mut img = run.image.clone();
        flip(&mut img, pos, 40);
        let (_, r) = mount_img(&img, quiet(DataMode::Data));
        let fs = r.unwrap_or_else(|e| panic!("{kind}: {e}"));
        let rep = fs.counters().recovery.unwrap();
        assert!(rep.damage.is_none(), "{kind}: {rep:?}");
        assert_eq!(rep.last_tid, last - 1, "{kind}");
        assert!(!read_all(&fs).contains_key("/late1"), "{kind}");
        assert!(read_all(&fs).contains_key("/late0"), "{kind}");
        fs.unmount().unwrap();
    }
    // Undamaged: everything replays, and the recovery report names no damage.
    let (_, r) = mount_img(&run.image, quiet(DataMode::Data));
    let fs = r.unwrap();
    let rep = fs.counters().recovery.unwrap();
    assert_eq!((rep.last_tid, rep.damage.is_none()), (last, true), "{rep:?}");
    assert!(rep.next_tid > last + 1);
    fs.unmount().unwrap();
}

#[test]
fn read_only_mount_recovers_in_memory_and_writes_nothing() {
    let run = crashed_run(DataMode::Wasteless);
    let mut ro = quiet(DataMode::Wasteless);
    ro.read_only = true;
    let (dev, r) = mount_img(&run.image, ro.clone());
    let fs = r.unwrap();
    let files = read_all(&fs);
    assert!(files.contains_key("/late1") && !files.contains_key("/victim"), "{:?}", files.keys());
    assert!(fs.counters().recovery.is_some());
    fs.unmount().unwrap();
    assert_eq!(dev.counters().bytes_written, 0);
    assert!(dev.snapshot() == run.image, "a read-only mount changed the image");
    // The same through a file: opened read-only, so any write would fail.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("img");
    std::fs::write(&p, &run.image).unwrap();
    let fs = Okeanos::open(&p, ro).unwrap();
    assert_eq!(read_all(&fs), files);
    fs.unmount().unwrap();
    assert!(std::fs::read(&p).unwrap() == run.image);
}

#[test]
fn one_writer_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let jimg = dir.path().join("journal");
    Okeanos::mkfs_file(&img, 32 * MB, &MkfsOptions { journal_blocks: 512, ..Default::default() }).unwrap();
    let fs = Okeanos::open(&img, MountOptions::default()).unwrap();
    // A second opener in this process, read-write or read-only, is refused with the holder.
    for ro in [false, true] {
        let mut o = MountOptions::default();
        o.read_only = ro;
        match Okeanos::open(&img, o) {
            Err(FsError::InUse(m)) => assert!(m.contains("in use") && m.contains(&std::process::id().to_string()), "{m}"),
            Err(e) => panic!("ro={ro}: wrong error {e}"),
            Ok(_) => panic!("ro={ro}: a second mount succeeded"),
        }
    }
    assert!(matches!(FileDevice::open(&img), Err(okeanos::device::DeviceError::InUse { .. })));
    assert!(FileDevice::create(&img, 32 * MB, true).is_err(), "mkfs --force of a mounted image");
    // Inspection without a lock works and says who holds it.
    assert!(FileDevice::open_unlocked(&img).is_ok());
    assert!(okeanos::device::lock::holder(&img).is_some());
    fs.create_file("/a").unwrap().write_at(0, b"kept").unwrap();
    fs.sync().unwrap();
    // Dropping the mount (a crash) releases it at once.
    drop(fs);
    assert!(okeanos::device::lock::holder(&img).is_none());
    let fs = Okeanos::open(&img, MountOptions::default()).unwrap();
    assert_eq!(fs.read_path("/a").unwrap(), b"kept");
    fs.unmount().unwrap();
    // Two read-only mounts share the image.
    let mut ro = MountOptions::default();
    ro.read_only = true;
    let a = Okeanos::open(&img, ro.clone()).unwrap();
    let b = Okeanos::open(&img, ro).unwrap();
    assert!(Okeanos::open(&img, MountOptions::default()).is_err(), "a writer beside readers");
    drop((a, b));
    // An external journal is locked too.
    let img2 = dir.path().join("img2");
    let dev = FileDevice::create(&img2, 32 * MB, false).unwrap();
    let jdev = FileDevice::create(&jimg, 4 * MB, false).unwrap();
    Okeanos::mkfs(&dev, Some(&jdev), &MkfsOptions { journal_blocks: 512, external_journal: true, ..Default::default() }).unwrap();
    drop((dev, jdev));
    let mut o = MountOptions::default();
    o.journal_path = Some(jimg.clone());
    let fs = Okeanos::open(&img2, o).unwrap();
    assert!(matches!(FileDevice::open(&jimg), Err(okeanos::device::DeviceError::InUse { .. })));
    fs.unmount().unwrap();
    assert!(FileDevice::open(&jimg).is_ok());
}

#[test]
fn transaction_limit_below_the_workable_minimum_is_refused() {
    let e = MountOptions::parse("max_tx_blocks=8").unwrap_err();
    assert!(e.contains("below the smallest workable"), "{e}");
    assert!(MountOptions::parse("max_tx_blocks=99999999999999999999999").unwrap_err().contains("too large"));
    let dev = mem_fs(16 * MB, 256);
    let mut o = MountOptions::default();
    o.max_tx_blocks = Some(10_000);
    let e = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o).err().expect("refused");
    assert!(e.to_string().contains("more than half of this journal"), "{e}");
    // The smallest accepted value works for every operation.
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, MountOptions::parse("max_tx_blocks=64,data=data").unwrap()).unwrap();
    fs.mkdir_path("/d").unwrap();
    fs.create_file("/d/f").unwrap().write_at(0, &vec![7u8; 3 << 20]).unwrap();
    fs.rename_path("/d/f", "/g").unwrap();
    fs.remove_path("/g").unwrap();
    fs.rmdir_path("/d").unwrap();
    fs.unmount().unwrap();
    assert_fsck_clean(dev, None);
}

#[test]
fn inode_size_beyond_the_largest_file_is_an_error_and_an_fsck_problem() {
    let dev = mem_fs(16 * MB, 256);
    let fs = mount(&dev, DataMode::Ordered);
    let ino = fs.create_file("/huge").unwrap().ino();
    fs.unmount().unwrap();
    let mut img = dev.snapshot();
    rewrite_inode(&mut img, ino, |inode| inode.size = 1 << 62);
    let dev = Arc::new(MemDevice::from_bytes(img));
    let r = okeanos::fsck(dev.clone(), None);
    assert!(r.problems.iter().any(|p| p.contains("beyond the largest file")), "{:?}", r.problems);
    let fs = Okeanos::mount(dev as Arc<dyn Device>, None, MountOptions::parse("ro").unwrap()).unwrap();
    assert!(matches!(fs.read_path("/huge"), Err(FsError::Corrupt(_))));
    fs.unmount().unwrap();
}

/// Changes inode `ino` of an unmounted image and fixes its checksum, as a corrupting bug or
/// tool would.
fn rewrite_inode(img: &mut [u8], ino: u32, change: impl FnOnce(&mut okeanos::format::Inode)) {
    use okeanos::format::{group::GD_SIZE, inode::INODE_SIZE};
    let sb = okeanos::format::Superblock::decode(&img[..512]).unwrap();
    let (gdt_at, ipg) = (sb.gdt_start as usize * BS, sb.inodes_per_group);
    let g = ((ino - 1) / ipg) as usize;
    let gd = okeanos::format::GroupDesc::decode(g as u32, &img[gdt_at + g * GD_SIZE..][..GD_SIZE]).unwrap();
    let at = gd.inode_table.get() as usize * BS + ((ino - 1) % ipg) as usize * INODE_SIZE;
    let mut inode = okeanos::format::Inode::decode(ino, &img[at..at + INODE_SIZE]).unwrap();
    change(&mut inode);
    inode.encode(ino, &mut img[at..at + INODE_SIZE]);
}

#[test]
fn an_inode_with_no_type_is_corrupt_to_a_link_and_the_mount_goes_on() {
    let dev = mem_fs(16 * MB, 256);
    let fs = mount(&dev, DataMode::Ordered);
    let ino = fs.create_file("/typeless").unwrap().ino();
    let root = fs.resolve("/").unwrap();
    fs.unmount().unwrap();
    // Permission bits with no file type: not free (mode 0), not any kind of file.
    let mut img = dev.snapshot();
    rewrite_inode(&mut img, ino, |inode| inode.mode = 0o644);
    let dev = Arc::new(MemDevice::from_bytes(img));
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, quiet(DataMode::Ordered)).unwrap();
    assert!(matches!(fs.link(ino, root, b"second"), Err(FsError::Corrupt(_))), "a link to a typeless inode is corruption");
    // The error stopped nothing: the journal takes and commits new work.
    let f = fs.create_file("/after").unwrap();
    f.append(b"still writable").unwrap();
    f.fsync().unwrap();
    assert_eq!(fs.read_path("/after").unwrap(), b"still writable");
    assert!(fs.list_path("/").unwrap().iter().all(|e| e.name != b"second"), "the failed link left no name");
    fs.unmount().unwrap();
}

#[test]
fn unknown_superblock_state_is_refused_read_write_and_reported() {
    let dev = mem_fs(16 * MB, 256);
    let mut img = dev.snapshot();
    let mut sb = okeanos::format::Superblock::decode(&img[..512]).unwrap();
    sb.state = 0x40;
    sb.encode(&mut img[..BS]);
    let dev = Arc::new(MemDevice::from_bytes(img));
    let r = okeanos::fsck(dev.clone(), None);
    assert!(r.problems.iter().any(|p| p.contains("unknown state")), "{:?}", r.problems);
    let e = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, MountOptions::default()).err().expect("refused");
    assert!(matches!(e, FsError::HasErrors(_)), "{e}");
    Okeanos::mount(dev as Arc<dyn Device>, None, MountOptions::parse("ro").unwrap()).unwrap().unmount().unwrap();
}

#[test]
fn crash_states_after_recovering_from_damage_never_bring_back_abandoned_transactions() {
    use okeanos::device::CrashEvent;
    use okeanos::CrashRecorder;
    for mode in [DataMode::Data, DataMode::Wasteless] {
        let run = crashed_run(mode);
        let kinds = blocks_by_kind(&run.image, run.mid);
        let mut img = run.image.clone();
        flip(&mut img, kinds["descriptor"], 40);
        let (dev, r) = mount_img(&img, quiet(mode));
        assert!(matches!(r, Err(FsError::HasErrors(_))));
        okeanos::inspect::clear_errors(dev.clone(), None).unwrap();
        // Record a workload after the recovery: every write and flush.
        let rec = CrashRecorder::new();
        let cdev = Arc::new(rec.device("fs", dev.snapshot()));
        let fs = Okeanos::mount(cdev.clone() as Arc<dyn Device>, None, quiet(mode)).unwrap();
        let mut states = vec![(rec.event_count(), run.before_mid.clone())];
        let mut expect = run.before_mid.clone();
        for k in 0..8 {
            let rec_bytes = record(77, k, 600);
            fs.open_file("/s1").unwrap().append(&rec_bytes).unwrap();
            expect.get_mut("/s1").unwrap().extend_from_slice(&rec_bytes);
            let name = format!("/after{k}");
            fs.create_file(&name).unwrap().write_at(0, &record(76, k, BS + 100)).unwrap();
            expect.insert(name, record(76, k, BS + 100));
            fs.sync().unwrap();
            states.push((rec.event_count(), expect.clone()));
        }
        drop(fs);
        // Every event boundary: before and after each flush, and between the writes of a
        // stage, where unflushed writes are kept, lost or torn.
        assert!(rec.events().iter().any(|e| matches!(e, CrashEvent::Flush { .. })));
        let mut checked = 0;
        for k in 0..=rec.event_count() {
            for st in rec.states(k, 4, 4, k as u64) {
                let image = rec.build(&st).remove(0);
                let (d, r) = mount_img(&image, quiet(mode));
                let fs = r.unwrap_or_else(|e| panic!("{mode} {}: {e}", st.label));
                let got = read_all(&fs);
                // The state of some sync at or after the last one acknowledged before the crash.
                let acked = states.iter().rposition(|(ev, _)| *ev <= k).unwrap_or(0);
                assert!(states[acked..].iter().any(|(_, s)| *s == got), "{mode} {} at event {k}: {:?}", st.label, got.keys());
                assert!(!got.contains_key("/late0") && !got.contains_key("/late1"), "{mode} {}: an abandoned transaction came back", st.label);
                fs.unmount().unwrap();
                assert_fsck_clean(d, None);
                checked += 1;
            }
        }
        assert!(checked > 100, "{mode}: only {checked} crash states");
    }
}

#[test]
fn a_new_transaction_ending_where_an_abandoned_one_begins_does_not_bring_it_back() {
    // The case the old rule (next tid = last replayed + 2) got wrong: after damage to
    // transaction M, the log restarts at its first block with the next tid; if a new
    // transaction happens to end exactly where the abandoned M + 2 begins, and the next tid
    // expected there is M + 2, the old M + 2 would replay over newer data after a crash.
    let mode = DataMode::Data;
    let run = crashed_run(mode);
    let dev: Arc<dyn Device> = Arc::new(MemDevice::from_bytes(run.image.clone()));
    let d = okeanos::inspect::dump_journal(dev, None).unwrap();
    let target = d.transactions.iter().find(|t| t.tid == run.after[1]).unwrap().start;
    let mut img = run.image.clone();
    flip(&mut img, blocks_by_kind(&run.image, run.mid)["commit"], 40);
    let (dev, r) = mount_img(&img, quiet(mode));
    assert!(matches!(r, Err(FsError::HasErrors(_))));
    okeanos::inspect::clear_errors(dev.clone(), None).unwrap();
    let base = dev.snapshot();
    // Find a write whose one transaction ends exactly at `target`.
    for n in 1..200u64 {
        let dev = Arc::new(MemDevice::from_bytes(base.clone()));
        let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, quiet(mode)).unwrap();
        fs.create_file("/big").unwrap().write_at(0, &vec![0xb1u8; n as usize * BS]).unwrap();
        fs.sync().unwrap();
        let tid = fs.committed_tid();
        drop(fs);
        let crashed = dev.snapshot();
        let d = okeanos::inspect::dump_journal(Arc::new(MemDevice::from_bytes(crashed.clone())), None).unwrap();
        let t = d.transactions.iter().find(|t| t.tid == tid).expect("the new transaction");
        if t.start != LogPos::new(1) || t.end < target {
            continue;
        }
        assert_eq!(t.end, target, "no write size made the new transaction end at log block {target}");
        let (_, r) = mount_img(&crashed, quiet(mode));
        let fs = r.unwrap();
        let files = read_all(&fs);
        assert!(!files.contains_key("/late1"), "the abandoned transaction {} was replayed after the new one", run.after[1]);
        assert_eq!(files["/big"], vec![0xb1u8; n as usize * BS]);
        fs.unmount().unwrap();
        return;
    }
    panic!("no write size reached log block {target}");
}

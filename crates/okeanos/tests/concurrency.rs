//! Group commit: 100 writer threads appending and syncing through the library share commits.
//! Nothing here measures time; it checks how the work was batched, and that every record of
//! every stream is there afterwards.

mod common;
use common::*;
use okeanos::{DataMode, Device, FileDevice, MkfsOptions, MountOptions, Okeanos};
use std::sync::{Arc, Barrier};

const WRITERS: usize = 100;
const RECORDS: usize = 40;

fn hundred_writers(mode: DataMode) -> okeanos::Counters {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("img.okfs");
    Okeanos::mkfs_file(&path, 256 * MB, &MkfsOptions { journal_blocks: 8192, ..Default::default() }).unwrap();
    let fs = Okeanos::open(&path, MountOptions::default().data(mode)).unwrap();
    let barrier = Arc::new(Barrier::new(WRITERS));
    let threads: Vec<_> = (0..WRITERS)
        .map(|w| {
            let fs = fs.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let f = fs.create_file(&format!("/stream-{w}")).unwrap();
                barrier.wait();
                for k in 0..RECORDS {
                    f.append(&record(w, k, 128)).unwrap();
                    f.fdatasync().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let c = fs.counters();
    for w in 0..WRITERS {
        let want: Vec<u8> = (0..RECORDS).flat_map(|k| record(w, k, 128)).collect();
        assert_eq!(fs.read_path(&format!("/stream-{w}")).unwrap(), want);
    }
    fs.unmount().unwrap();
    let dev: Arc<dyn Device> = Arc::new(FileDevice::open(&path).unwrap());
    assert_fsck_clean(dev, None);
    c
}

#[test]
fn hundred_writers_share_commits() {
    for mode in DataMode::ALL {
        let c = hundred_writers(mode);
        eprintln!(
            "{mode}: {} syncs, {} commits, {:.1} syncs/commit, max {} handles in one commit, {:.1} journal bytes per 128-byte append",
            c.syncs,
            c.commits,
            c.syncs_per_commit,
            c.max_handles_per_commit,
            c.journal_bytes as f64 / (WRITERS * RECORDS) as f64
        );
        assert_eq!(c.syncs, (WRITERS * RECORDS) as u64);
        assert!(c.syncs_per_commit >= 10.0, "{mode}: only {:.1} syncs per commit", c.syncs_per_commit);
    }
}

/// The counters account for every byte the engine writes: their per-kind totals equal what the
/// devices themselves counted, for an internal and for an external journal.
#[test]
fn counters_equal_the_devices_own_counts() {
    use okeanos::MemDevice;
    for external in [false, true] {
        for policy in ["ordered", "data", "wasteless+dmeta", "selective"] {
            let dev = Arc::new(MemDevice::new(64 * MB));
            let jdev = Arc::new(MemDevice::new(8 * MB));
            let mk = MkfsOptions { journal_blocks: 1024, external_journal: external, ..Default::default() };
            Okeanos::mkfs(dev.as_ref(), external.then_some(jdev.as_ref() as &dyn Device), &mk).unwrap();
            let (f0, j0) = (dev.counters(), jdev.counters());
            let opts = MountOptions::default().content_config(okeanos::journal::content::ContentConfig::parse(policy).unwrap());
            let fs = Okeanos::mount(dev.clone(), external.then(|| jdev.clone() as Arc<dyn Device>), opts).unwrap();
            let threads: Vec<_> = (0..8)
                .map(|w| {
                    let fs = fs.clone();
                    std::thread::spawn(move || {
                        let f = fs.create_file(&format!("/s{w}")).unwrap();
                        for k in 0..50 {
                            f.append(&record(w, k, 300)).unwrap();
                            f.fdatasync().unwrap();
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            let probe = fs.clone();
            fs.unmount().unwrap();
            let c = probe.counters();
            let dev_bytes = dev.counters().bytes_written - f0.bytes_written + jdev.counters().bytes_written - j0.bytes_written;
            assert_eq!(c.journal_bytes + c.final_bytes, dev_bytes, "{policy} external={external}: counters {c:?}");
            if external {
                assert_eq!(c.journal_bytes, jdev.counters().bytes_written - j0.bytes_written, "{policy}: journal device");
            }
        }
    }
}

/// Appends from several threads to one file never land at one offset (O_APPEND): the offset is
/// taken under the same lock as the write. Before, `File::append` read the size and wrote in
/// two steps, and two appenders could overwrite each other.
#[test]
fn concurrent_appends_to_one_file_never_overlap() {
    let dev = mem_fs(64 << 20, 1024);
    let fs = mount(&dev, DataMode::Ordered);
    let f = Arc::new(fs.create_file("/shared.log").unwrap());
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let f = f.clone();
            std::thread::spawn(move || {
                let mut offsets = Vec::new();
                for k in 0..200u32 {
                    let mut rec = vec![t; 100];
                    rec[..4].copy_from_slice(&k.to_le_bytes());
                    offsets.push((f.append(&rec).unwrap(), k));
                }
                (t, offsets)
            })
        })
        .collect();
    let mut all = Vec::new();
    for th in threads {
        let (t, offsets) = th.join().unwrap();
        all.extend(offsets.into_iter().map(|(off, k)| (off, t, k)));
    }
    assert_eq!(f.len().unwrap(), 4 * 200 * 100);
    let data = f.read_at(0, 4 * 200 * 100).unwrap();
    all.sort();
    for (i, &(off, t, k)) in all.iter().enumerate() {
        assert_eq!(off, i as u64 * 100, "every record at its own offset");
        let rec = &data[off as usize..off as usize + 100];
        assert_eq!(&rec[..4], &k.to_le_bytes(), "record {k} of thread {t}");
        assert!(rec[4..].iter().all(|&b| b == t), "record {k} of thread {t} intact");
    }
    drop(f);
    fs.unmount().unwrap();
    assert_fsck_clean(dev, None);
}

/// Syncs registered without a waiting thread (`fsync_then`) from one thread for 64 files
/// share commits as waiting syncs do, and each is answered once its data is durable.
#[test]
fn syncs_without_threads_share_commits() {
    let dev = mem_fs(64 << 20, 1024);
    let fs = mount(&dev, DataMode::Wasteless);
    let files: Vec<_> = (0..64).map(|i| fs.create_file(&format!("/s{i}")).unwrap()).collect();
    fs.sync().unwrap();
    let before = fs.counters();
    let (tx, rx) = std::sync::mpsc::channel();
    for (i, f) in files.iter().enumerate() {
        f.append(&record(i, 0, 128)).unwrap();
        let tx = tx.clone();
        fs.fsync_then(f.ino(), true, Box::new(move |r| tx.send((i, r)).unwrap()));
    }
    let mut answered = vec![false; files.len()];
    for _ in 0..files.len() {
        let (i, r) = rx.recv_timeout(std::time::Duration::from_secs(30)).expect("every sync is answered");
        r.unwrap();
        assert!(!answered[i], "answered once");
        answered[i] = true;
    }
    let c = fs.counters().since(&before);
    assert_eq!(c.syncs, 64);
    assert!(c.commits < 8, "the syncs shared commits: {} commits for 64 syncs", c.commits);
    drop(files);
    drop(fs);
    // Dropped without unmount (a crash): every answered sync's record is there.
    let fs = mount(&dev, DataMode::Wasteless);
    for i in 0..64 {
        assert_eq!(fs.read_path(&format!("/s{i}")).unwrap(), record(i, 0, 128));
    }
    fs.unmount().unwrap();
}

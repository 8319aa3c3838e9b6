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

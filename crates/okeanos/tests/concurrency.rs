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

/// A sync that finds no commit running runs it on its own thread (the write-group leader,
/// `commit_leader=on`, the default: engine/leader.rs); with `commit_leader=off` the journal
/// thread runs every commit. Either way each sync returns with its record durable.
#[test]
fn a_sync_with_no_commit_running_leads_it() {
    for leader in [true, false] {
        let dev = mem_fs(64 << 20, 1024);
        let mut o = opts(DataMode::Wasteless);
        o.commit_leader = leader;
        let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o).unwrap();
        let f = fs.create_file("/a").unwrap();
        fs.sync().unwrap();
        let before = fs.counters();
        for k in 0..20 {
            f.append(&record(0, k, 128)).unwrap();
            f.fdatasync().unwrap();
        }
        let c = fs.counters().since(&before);
        assert_eq!(c.syncs, 20);
        assert!(c.commits >= 20, "one sync at a time: a commit each ({} commits)", c.commits);
        if leader {
            assert!(c.led_steps >= c.commits, "commit_leader=on: {} of {} commits led by the syncing thread", c.led_steps, c.commits);
        } else {
            assert_eq!(c.led_steps, 0, "commit_leader=off: the journal thread commits");
        }
        drop(f);
        drop(fs);
        // Dropped without unmount (a crash): every synced record is there.
        let fs = mount(&dev, DataMode::Wasteless);
        let want: Vec<u8> = (0..20).flat_map(|k| record(0, k, 128)).collect();
        assert_eq!(fs.read_path("/a").unwrap(), want, "commit_leader={leader}");
        fs.unmount().unwrap();
    }
}

/// The journal thread and the flusher threads wake the syncs of a commit they finished after
/// letting go of the state lock (engine/step.rs, engine/flush.rs): none is lost. With
/// `commit_leader=off` every commit is the journal thread's; 48 threads sync 25 records each,
/// one commit at a time and pipelined (a flusher finishing them, two commits under one hold of
/// the lock waking both parities). Each thread reports when it is
/// done; a lost wake-up leaves one asleep and fails the wait after 120 s. What was synced is
/// there after a crash.
#[test]
fn syncs_woken_by_the_journal_thread_all_return() {
    const THREADS: usize = 48;
    const PER: usize = 25;
    for pipeline in [1u32, 2] {
        let dev = mem_fs(64 << 20, 2048);
        let mut o = opts(DataMode::Wasteless);
        o.commit_leader = false;
        o.commit_pipeline = pipeline;
        let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o).unwrap();
        let before = fs.counters();
        let barrier = Arc::new(Barrier::new(THREADS));
        let (tx, rx) = std::sync::mpsc::channel();
        for w in 0..THREADS {
            let (fs, barrier, tx) = (fs.clone(), barrier.clone(), tx.clone());
            std::thread::spawn(move || {
                let f = fs.create_file(&format!("/w{w}")).unwrap();
                barrier.wait();
                for k in 0..PER {
                    f.append(&record(w, k, 128)).unwrap();
                    f.fdatasync().unwrap();
                }
                tx.send(w).unwrap();
            });
        }
        for _ in 0..THREADS {
            rx.recv_timeout(std::time::Duration::from_secs(120))
                .unwrap_or_else(|_| panic!("commit_pipeline={pipeline}: a sync was never woken"));
        }
        let c = fs.counters().since(&before);
        assert_eq!(c.syncs, (THREADS * PER) as u64);
        assert_eq!(c.led_steps, 0, "commit_leader=off: the journal thread commits");
        assert!(c.commits < c.syncs, "commit_pipeline={pipeline}: syncs shared commits ({} commits)", c.commits);
        drop(fs);
        // Dropped without unmount (a crash): every synced record is there.
        let fs = mount(&dev, DataMode::Wasteless);
        for w in 0..THREADS {
            let want: Vec<u8> = (0..PER).flat_map(|k| record(w, k, 128)).collect();
            assert_eq!(fs.read_path(&format!("/w{w}")).unwrap(), want, "commit_pipeline={pipeline}, writer {w}");
        }
        fs.unmount().unwrap();
    }
}

/// Request threads of a server (`fsync_or_lead`, the FUSE front end's way), eight of them
/// syncing their own files: the thread that finds no commit running leads one and answers
/// every sync it settles; the others' syncs join the commit in flight's successor. Each sync
/// is answered exactly once, commits are shared, and what was answered is durable.
#[test]
fn request_threads_lead_commits_and_answer_each_sync_once() {
    const THREADS: usize = 8;
    const SYNCS: usize = 50;
    let dev = mem_fs(64 << 20, 2048);
    let fs = mount(&dev, DataMode::Wasteless);
    let (tx, rx) = std::sync::mpsc::channel();
    // Files made, then counted from here: the main thread joins both barriers.
    let (made, go) = (Arc::new(Barrier::new(THREADS + 1)), Arc::new(Barrier::new(THREADS + 1)));
    let threads: Vec<_> = (0..THREADS)
        .map(|i| {
            let (fs, tx, made, go) = (fs.clone(), tx.clone(), made.clone(), go.clone());
            std::thread::spawn(move || {
                let f = fs.create_file(&format!("/r{i}")).unwrap();
                made.wait();
                go.wait();
                for k in 0..SYNCS {
                    f.append(&record(i, k, 128)).unwrap();
                    let (one_tx, one_rx) = std::sync::mpsc::channel();
                    let tx = tx.clone();
                    fs.fsync_or_lead(
                        f.ino(),
                        true,
                        Box::new(move |r| {
                            tx.send((i, k)).unwrap();
                            one_tx.send(r).unwrap();
                        }),
                    );
                    // As a program waits for its fdatasync before its next record.
                    one_rx.recv_timeout(std::time::Duration::from_secs(30)).expect("answered").unwrap();
                }
            })
        })
        .collect();
    made.wait();
    fs.sync().unwrap();
    let before = fs.counters();
    go.wait();
    for t in threads {
        t.join().unwrap();
    }
    drop(tx);
    let mut answered = vec![vec![0u32; SYNCS]; THREADS];
    for (i, k) in rx {
        answered[i][k] += 1;
    }
    assert!(answered.iter().flatten().all(|&n| n == 1), "every sync answered exactly once: {answered:?}");
    let c = fs.counters().since(&before);
    assert_eq!(c.syncs, (THREADS * SYNCS) as u64);
    assert!(c.led_steps > 0, "no commit was led by a request thread");
    assert!(c.commits < c.syncs, "the syncs shared commits: {} commits for {} syncs", c.commits, c.syncs);
    drop(fs);
    let fs = mount(&dev, DataMode::Wasteless);
    for i in 0..THREADS {
        let want: Vec<u8> = (0..SYNCS).flat_map(|k| record(i, k, 128)).collect();
        assert_eq!(fs.read_path(&format!("/r{i}")).unwrap(), want);
    }
    fs.unmount().unwrap();
}

/// The commit lane's time (`Counters::commit_lane`, docs/OBSERVABILITY.md) is counted only by
/// the thread that holds the lane, so its parts add up to no more than the time the mount has
/// been up, with eight threads syncing and the lane passing between leaders and the journal
/// thread (or, with `commit_leader=off`, the journal thread alone). A wait counted twice (the
/// journal thread's idle wait while a leader ran the lane) breaks the bound. Every commit is a
/// step of the lane, and its steps' planning and I/O are counted, and (journal thread alone)
/// its wake-ups of the commits' syncs as answers.
#[test]
fn the_commit_lane_counts_each_moment_once() {
    for leader in [true, false] {
        let dev = mem_fs(64 << 20, 2048);
        let mut o = opts(DataMode::Wasteless);
        o.commit_leader = leader;
        let up = std::time::Instant::now();
        let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o).unwrap();
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let fs = fs.clone();
                std::thread::spawn(move || {
                    let f = fs.create_file(&format!("/l{i}")).unwrap();
                    for k in 0..100 {
                        f.append(&record(i, k, 128)).unwrap();
                        f.fdatasync().unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let c = fs.counters();
        let wall = up.elapsed().as_nanos() as u64;
        let l = c.commit_lane;
        let sum: u64 = l.parts().iter().map(|p| p.1).sum();
        assert!(sum <= wall, "commit_leader={leader}: the lane's parts add up to {sum} ns, more than the {wall} ns the mount was up: {l:?}");
        assert!(l.steps >= c.commits, "commit_leader={leader}: {} lane steps for {} commits", l.steps, c.commits);
        assert!(l.plan_ns > 0 && l.write_ns + l.flush_ns > 0, "commit_leader={leader}: steps planned and written: {l:?}");
        if leader {
            assert!(c.led_steps > 0, "some commits were led");
        } else {
            // The journal thread's wake-up of each commit's syncs is its answer to them.
            assert!(l.answer_ns > 0, "commit_leader=off: the journal thread's wake-ups were not counted as answers: {l:?}");
        }
        fs.unmount().unwrap();
    }
}

/// Operations held back at admission are counted by reason (`Counters::admission`,
/// docs/OBSERVABILITY.md): four threads journaling 4 MiB of 16 KiB appends through a 1 MiB
/// journal must wait for checkpoints to free room, and each reason's total is bounded by the
/// threads' time; one thread of small synced appends through a large journal never waits.
#[test]
fn operations_that_wait_to_start_are_counted_by_reason() {
    let dev = mem_fs(64 << 20, 256);
    let up = std::time::Instant::now();
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, opts(DataMode::Data)).unwrap();
    // Whether a writer meets a full log depends on how the checkpoint lane is scheduled
    // against the writers (on a loaded machine it may keep up for a whole round): up to five
    // rounds, each rewriting the four files, until one waited for room.
    for _round in 0..5 {
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let fs = fs.clone();
                std::thread::spawn(move || {
                    let _ = fs.remove_path(&format!("/w{i}"));
                    let f = fs.create_file(&format!("/w{i}")).unwrap();
                    for k in 0..64 {
                        f.append(&[(i * 64 + k) as u8; 16384]).unwrap();
                        if k % 4 == 3 {
                            f.fdatasync().unwrap();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        if fs.counters().admission.space.waits > 0 {
            break;
        }
    }
    let a = fs.counters().admission;
    let wall = up.elapsed().as_nanos() as u64;
    assert!(a.space.waits > 0 && a.space.ns > 0, "4 MiB through a 1 MiB journal waited for room: {a:?}");
    for (why, w) in a.parts() {
        assert!(w.ns <= 4 * wall, "{why}: {} ns of waits by 4 threads in {wall} ns", w.ns);
    }
    for i in 0..4u8 {
        let got = fs.read_path(&format!("/w{i}")).unwrap();
        assert_eq!(got.len(), 64 * 16384);
        assert!(got.chunks(16384).enumerate().all(|(k, c)| c.iter().all(|&b| b == (i as usize * 64 + k) as u8)), "/w{i} as written");
    }
    fs.unmount().unwrap();

    let fs = Okeanos::mount(mem_fs(64 << 20, 8192) as Arc<dyn Device>, None, opts(DataMode::Wasteless)).unwrap();
    let f = fs.create_file("/small").unwrap();
    for k in 0..50 {
        f.append(&record(0, k, 128)).unwrap();
        f.fdatasync().unwrap();
    }
    let a = fs.counters().admission;
    assert!(a.parts().iter().all(|(_, w)| w.waits == 0 && w.ns == 0), "small synced appends through a large journal never wait: {a:?}");
    drop(f);
    fs.unmount().unwrap();
}

//! The two durability calls beyond POSIX (docs/EMBEDDING.md): the durable watermark of a file
//! and group sync. Both are promises about crashes, so both are checked on enumerated crash
//! states of recording devices, and each check is shown able to fail (a canary that promises
//! more than the engine does must be caught).

mod common;
use common::record;
use okeanos::device::{CrashEvent, CrashRecorder};
use okeanos::{Device, MemDevice, MkfsOptions, MountOptions, Okeanos};
use std::sync::Arc;
use std::time::Duration;

fn image() -> Vec<u8> {
    let dev = MemDevice::new(32 << 20);
    Okeanos::mkfs(&dev, None, &MkfsOptions { journal_blocks: 512, ..Default::default() }).unwrap();
    dev.snapshot()
}

fn recording(opts: &str) -> (Arc<CrashRecorder>, Okeanos) {
    let rec = CrashRecorder::new();
    let dev: Arc<dyn Device> = Arc::new(rec.device("fs", image()));
    let fs = Okeanos::mount(dev, None, MountOptions::parse(opts).unwrap()).unwrap();
    (rec, fs)
}

fn flushes(rec: &CrashRecorder, from: usize, to: usize) -> usize {
    rec.events()[from..to].iter().filter(|e| matches!(e, CrashEvent::Flush { .. })).count()
}

/// Every crash state of the first `upto` events (all flush points and a sample of the rest),
/// mounted; `check` gets the point and each recovered file's contents (None: absent).
fn each_crash(rec: &CrashRecorder, names: &[String], mut check: impl FnMut(usize, &str, &[Option<Vec<u8>>])) -> usize {
    let events = rec.events();
    let mut points: Vec<usize> = (0..=events.len()).step_by(3).collect();
    points.extend(events.iter().enumerate().filter(|(_, e)| matches!(e, CrashEvent::Flush { .. })).map(|(i, _)| i + 1));
    points.push(events.len());
    points.sort_unstable();
    points.dedup();
    let mut n = 0;
    for upto in points {
        for st in rec.states(upto, 3, 1, 0xd0_7ab1e) {
            let img = rec.build(&st).remove(0);
            let dev: Arc<dyn Device> = Arc::new(MemDevice::from_bytes(img));
            let fs = Okeanos::mount(dev, None, MountOptions::default()).unwrap_or_else(|e| panic!("{}: recovery failed: {e}", st.label));
            let got: Vec<Option<Vec<u8>>> = names.iter().map(|p| fs.read_path(p).ok()).collect();
            check(upto, &st.label, &got);
            fs.unmount().unwrap();
            n += 1;
        }
    }
    n
}

struct Seen {
    /// Device events done when the watermark was read.
    events: usize,
    file: usize,
    /// The file's bytes below the watermark, as read then, and its size then.
    durable: Vec<u8>,
    size: u64,
}

fn watermark_holds(opts: &str, seed: u64) {
    eprintln!("{opts}: seed {seed}");
    let (rec, fs) = recording(opts);
    let names: Vec<String> = (0..3).map(|i| format!("/tenant{i}.log")).collect();
    let files: Vec<_> = names.iter().map(|n| fs.create_file(n).unwrap()).collect();
    let mut x = seed | 1;
    let mut rnd = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut seen = Vec::new();
    // Changes below a file's end (file, lowest byte, device events before it): bytes read
    // before one may rightly differ in a crash state after it began.
    let mut rewrites: Vec<(usize, u64, usize)> = Vec::new();
    for k in 0..240 {
        let f = rnd(3) as usize;
        match rnd(10) {
            0..=5 => {
                files[f].append(&record(f, k, 40 + rnd(300) as usize)).unwrap();
            }
            6 => {
                let len = files[f].len().unwrap();
                if len > 8 {
                    let at = rnd(len - 4);
                    rewrites.push((f, at, rec.event_count()));
                    files[f].write_at(at, b"over").unwrap();
                }
            }
            7 => files[f].fdatasync().unwrap(),
            8 => {
                let inos: Vec<u32> = files.iter().map(|f| f.ino()).collect();
                fs.sync_files(&inos, true).unwrap();
            }
            _ => {
                let len = files[f].len().unwrap();
                if rnd(4) == 0 && len > 0 {
                    let to = len - rnd(len.min(50));
                    rewrites.push((f, to, rec.event_count()));
                    files[f].set_len(to).unwrap();
                } else {
                    std::thread::sleep(Duration::from_millis(15)); // let the commit timer run
                }
            }
        }
        for (i, file) in files.iter().enumerate() {
            let l = file.durable_len().unwrap();
            let size = file.len().unwrap();
            assert!(l <= size, "the watermark {l} is past the size {size}");
            let durable = file.read_at(0, l as usize).unwrap();
            seen.push(Seen { events: rec.event_count(), file: i, durable, size });
        }
    }
    fs.sync_files(&files.iter().map(|f| f.ino()).collect::<Vec<_>>(), true).unwrap();
    for (i, file) in files.iter().enumerate() {
        assert_eq!(file.durable_len().unwrap(), file.len().unwrap(), "file {i}: after a sync of it everything is durable");
    }
    drop(files);
    let mut size_broken = 0;
    let states = each_crash(&rec, &names, |upto, label, got| {
        let rewritten = |s: &Seen| rewrites.iter().any(|&(f, low, at)| f == s.file && low < s.durable.len() as u64 && at >= s.events && at < upto);
        for s in seen.iter().filter(|s| s.events <= upto && !rewritten(s)) {
            let have = got[s.file].as_deref().unwrap_or(&[]);
            let ok = have.len() >= s.durable.len() && have[..s.durable.len()] == s.durable[..];
            assert!(ok, "{opts} seed {seed}, {label}: file {} recovered {} bytes, not the {} bytes the watermark promised", s.file, have.len(), s.durable.len());
            // The canary: a watermark that said "the whole size" would be caught here.
            if (have.len() as u64) < s.size {
                size_broken += 1;
            }
        }
    });
    assert!(size_broken > 0, "{opts}: no crash state caught a watermark equal to the size: the check cannot fail");
    eprintln!("{opts}: {states} crash states, {} watermark readings, all held; {size_broken} would have broken the size as a watermark", seen.len());
    std::mem::forget(fs); // the recording mount ends as a crash does
}

#[test]
fn the_watermark_holds_in_every_crash_state_under_data_journaling() {
    watermark_holds("data=data,commit=0.01", 0x5eed_0001);
}

#[test]
fn the_watermark_holds_in_every_crash_state_under_ordered_and_wasteless() {
    watermark_holds("data=ordered,commit=0.01", 0x5eed_0002);
    watermark_holds("data=wasteless+dmeta,commit=0.01", 0x5eed_0003);
}

#[test]
fn the_watermark_holds_in_every_crash_state_under_writeback_and_selective() {
    watermark_holds("data=writeback,commit=0.01", 0x5eed_0004);
    watermark_holds("data=selective+dmeta,commit=0.01", 0x5eed_0005);
}

#[test]
fn the_watermark_follows_appends_overwrites_and_truncates() {
    let dev = common::mem_fs(16 << 20, 512);
    let fs = Okeanos::mount(dev, None, MountOptions::parse("data=data,commit=60").unwrap()).unwrap();
    let f = fs.create_file("/log").unwrap();
    f.fdatasync().unwrap();
    assert_eq!(f.durable_len().unwrap(), 0);
    f.append(&[7u8; 128]).unwrap();
    assert_eq!(f.durable_len().unwrap(), 0, "an append is not durable before its commit");
    f.fdatasync().unwrap();
    assert_eq!(f.durable_len().unwrap(), 128);
    f.append(&[8u8; 128]).unwrap();
    assert_eq!(f.durable_len().unwrap(), 128);
    f.write_at(10, b"x").unwrap();
    assert_eq!(f.durable_len().unwrap(), 10, "an overwrite pulls the watermark below it");
    f.fdatasync().unwrap();
    assert_eq!(f.durable_len().unwrap(), 256);
    f.set_len(100).unwrap();
    assert_eq!(f.durable_len().unwrap(), 100, "a truncate lowers it at once");
    f.append(&[9u8; 50]).unwrap();
    assert_eq!(f.durable_len().unwrap(), 100);
    fs.sync().unwrap();
    assert_eq!(f.durable_len().unwrap(), 150);
    drop(f);
    fs.unmount().unwrap();
}

#[test]
fn a_tailing_reader_waits_for_the_watermark() {
    let dev = common::mem_fs(16 << 20, 512);
    let fs = Okeanos::mount(dev, None, MountOptions::parse("data=wasteless,commit=60").unwrap()).unwrap();
    let f = fs.create_file("/log").unwrap();
    f.append(&[1u8; 128]).unwrap();
    // Nothing commits (commit=60): the wait times out, below the offset.
    let t = std::time::Instant::now();
    assert_eq!(f.wait_durable(128, Duration::from_millis(100)).unwrap(), 0);
    assert!(t.elapsed() >= Duration::from_millis(100));
    // A writer's sync on another thread releases it.
    let w = fs.open_file("/log").unwrap();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        w.append(&[2u8; 128]).unwrap();
        w.fdatasync().unwrap();
    });
    let l = f.wait_durable(256, Duration::from_secs(30)).unwrap();
    assert_eq!(l, 256);
    writer.join().unwrap();
    assert_eq!(f.wait_durable(1, Duration::ZERO).unwrap(), 256, "already past: returns at once");
    drop(f);
    fs.unmount().unwrap();
    let dev = common::mem_fs(16 << 20, 512);
    let fs = Okeanos::mount(dev, None, MountOptions::parse("data=data").unwrap()).unwrap();
    let ino = fs.create_file("/x").unwrap().ino();
    assert!(matches!(fs.wait_durable(ino + 1000, 1, Duration::ZERO), Err(_)), "an inode that does not exist is an error");
    fs.unmount().unwrap();
}

/// Group sync: one commit and one flush for many files; and under data journaling, appends
/// made since the last commit come back all together or not at all.
fn group_sync(policy: &str) {
    let (rec, fs) = recording(&format!("data={policy},commit=60"));
    let names: Vec<String> = (0..20).map(|i| format!("/t{i}")).collect();
    let files: Vec<_> = names.iter().map(|n| fs.create_file(n).unwrap()).collect();
    fs.sync().unwrap();
    let before = (rec.event_count(), fs.counters().commits);
    for (i, f) in files.iter().enumerate() {
        f.append(&record(i, 0, 128)).unwrap();
    }
    let inos: Vec<u32> = files.iter().map(|f| f.ino()).collect();
    fs.sync_files(&inos, true).unwrap();
    let after = (rec.event_count(), fs.counters().commits);
    assert_eq!(after.1 - before.1, 1, "{policy}: one commit for 20 files");
    let fl = flushes(&rec, before.0, after.0);
    assert!(fl <= 2, "{policy}: {fl} flushes for one group sync (commit block ordering needs at most 2)");
    for f in &files {
        assert_eq!(f.durable_len().unwrap(), 128);
    }
    // A second round synced file by file: the canary, whose crash states must show a subset.
    for (i, f) in files.iter().enumerate() {
        f.append(&record(i, 1, 128)).unwrap();
        f.fdatasync().unwrap();
    }
    let serial = rec.event_count();
    drop(files);
    let mut partial_serial = 0;
    let states = each_crash(&rec, &names, |upto, label, got| {
        let lens: Vec<usize> = got.iter().map(|g| g.as_ref().map_or(0, Vec::len)).collect();
        if upto <= serial && upto >= after.0 {
            // Only the serial round is in flight: every file has its first record.
            assert!(lens.iter().all(|&l| l >= 128), "{policy}, {label}: a group-synced record was lost: {lens:?}");
            if lens.iter().any(|&l| l == 128) && lens.iter().any(|&l| l == 256) {
                partial_serial += 1;
            }
        } else if upto < after.0 {
            let with = lens.iter().filter(|&&l| l >= 128).count();
            assert!(with == 0 || with == lens.len(), "{policy}, {label}: the group came back in part: {with} of {} files", lens.len());
        }
    });
    assert!(partial_serial > 0, "{policy}: the canary (syncs one by one) never came back in part: the check cannot fail");
    eprintln!("{policy}: {states} crash states; group sync all-or-nothing; {partial_serial} states of the serial canary were partial");
    std::mem::forget(fs);
}

#[test]
fn group_sync_is_one_commit_and_all_or_nothing_under_data() {
    group_sync("data");
}

#[test]
fn group_sync_is_one_commit_and_all_or_nothing_under_wasteless_and_ordered() {
    group_sync("wasteless+dmeta");
    group_sync("ordered");
}

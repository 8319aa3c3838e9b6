//! Block-level manylogs (MLB): the device keeps every byte a program wrote, across reopens and
//! across every crash state the crash model allows, with logs small enough that log swaps and
//! checkpoints happen all the time. Randomized runs print their seed (`OKEANOS_SEED=N` repeats
//! one).

use okeanos::device::{CrashRecorder, FaultDevice, MlbDevice, MlbGeometry, SECTOR_SIZE};
use okeanos::faults::Faults;
use okeanos::{Device, MemDevice};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

const KB: u64 = 1024;

/// Tiny groups and logs: a log holds three or four small records, so nearly every few writes
/// fill one.
fn tiny() -> MlbGeometry {
    MlbGeometry { group_bytes: 128 * KB, log_bytes: 32 * KB, logged_write_bytes: 8 * KB }
}

fn seed() -> u64 {
    let s = std::env::var("OKEANOS_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| rand::random::<u16>() as u64);
    eprintln!("seed {s} (OKEANOS_SEED={s} repeats this run)");
    s
}

fn made(disk: u64, g: MlbGeometry) -> Arc<MemDevice> {
    let d = Arc::new(MemDevice::new(disk));
    MlbDevice::create(d.as_ref(), g).expect("create");
    d
}

#[derive(Debug, Clone)]
enum Op {
    Write { offset: u64, data: Vec<u8> },
    Read { offset: u64, len: u64 },
    Flush,
    /// Copies everything home (durable when it returns, as a flush).
    Checkpoint,
    /// What an idle moment does (a log swap), promising nothing about durability.
    Idle,
}

/// A workload over `size` user bytes: small writes (logged), medium ones (logged, several
/// blocks), large ones (home, except blocks logged already), unaligned edges, reads, flushes
/// and now and then a full checkpoint. Half the writes go to a hot eighth of the device so
/// blocks are overwritten while logged.
fn workload(rng: &mut StdRng, size: u64, n: usize, logged: u64) -> Vec<Op> {
    let sectors = size / SECTOR_SIZE;
    let mut ops = Vec::with_capacity(n);
    for k in 0..n {
        let roll = rng.gen_range(0..100);
        let op = if roll < 60 {
            let len = match rng.gen_range(0..10) {
                0..=5 => rng.gen_range(1..=8),
                6..=7 => rng.gen_range(9..=logged / SECTOR_SIZE),
                _ => rng.gen_range(logged / SECTOR_SIZE + 1..=4 * logged / SECTOR_SIZE),
            }
            .min(sectors);
            let span = if rng.gen_bool(0.5) { (sectors / 8).max(len) } else { sectors };
            let start = rng.gen_range(0..=span - len);
            let data: Vec<u8> = (0..len * SECTOR_SIZE).map(|i| (k as u64 * 31 + i / 512 * 7 + 1) as u8 ^ rng.gen::<u8>() & 1).collect();
            Op::Write { offset: start * SECTOR_SIZE, data }
        } else if roll < 80 {
            let len = rng.gen_range(1..=64).min(sectors);
            Op::Read { offset: rng.gen_range(0..=sectors - len) * SECTOR_SIZE, len: len * SECTOR_SIZE }
        } else if roll < 96 {
            Op::Flush
        } else if roll < 98 {
            Op::Idle
        } else {
            Op::Checkpoint
        };
        ops.push(op);
    }
    ops
}

fn apply(model: &mut [u8], op: &Op) {
    if let Op::Write { offset, data } = op {
        model[*offset as usize..*offset as usize + data.len()].copy_from_slice(data);
    }
}

/// Runs `ops` on `dev`, checking every read against `model`.
fn run(dev: &MlbDevice, ops: &[Op], model: &mut [u8], mut each: impl FnMut(usize)) {
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Write { offset, data } => dev.write_at(*offset, data).unwrap_or_else(|e| panic!("op {i}: {e}")),
            Op::Read { offset, len } => {
                let mut buf = vec![0u8; *len as usize];
                dev.read_at(*offset, &mut buf).unwrap();
                assert!(buf == model[*offset as usize..(*offset + len) as usize], "op {i}: a read of {len} bytes at {offset} differs from what was written");
            }
            Op::Flush => dev.flush().unwrap(),
            Op::Checkpoint => {
                dev.checkpoint_all().unwrap();
            }
            Op::Idle => {
                dev.idle_work().unwrap();
            }
        }
        apply(model, op);
        each(i);
    }
}

fn read_all(dev: &MlbDevice) -> Vec<u8> {
    let mut all = vec![0u8; dev.len_bytes() as usize];
    for (i, c) in all.chunks_mut(64 * KB as usize).enumerate() {
        dev.read_at(i as u64 * 64 * KB, c).unwrap();
    }
    all
}

#[test]
fn every_write_reads_back_across_swaps_checkpoints_and_reopens() {
    let s = seed();
    let mut rng = StdRng::seed_from_u64(s);
    let disk = made(4 << 20, tiny());
    let mut model = vec![0u8; MlbDevice::open(disk.clone()).unwrap().len_bytes() as usize];
    let mut totals = okeanos::device::MlbStats::default();
    for round in 0..4 {
        let dev = MlbDevice::open(disk.clone()).unwrap();
        let ops = workload(&mut rng, model.len() as u64, 1500, tiny().logged_write_bytes);
        run(&dev, &ops, &mut model, |_| {});
        assert!(read_all(&dev) == model, "round {round}: the device differs from what was written");
        let c = dev.check().unwrap();
        assert!(c.is_clean(), "round {round}: {:#?}", c.problems);
        let st = dev.stats();
        totals.logged_writes += st.logged_writes;
        totals.in_place_writes += st.in_place_writes;
        totals.log_swaps += st.log_swaps;
        totals.checkpoints += st.checkpoints;
        totals.log_reads += st.log_reads;
        if round % 2 == 0 {
            dev.close().unwrap();
        } // else dropped: the next open recovers from the logs
    }
    let dev = MlbDevice::open(disk.clone()).unwrap();
    assert!(read_all(&dev) == model);
    for (what, n) in [("logged writes", totals.logged_writes), ("in-place writes", totals.in_place_writes), ("log swaps", totals.log_swaps), ("checkpoints", totals.checkpoints), ("reads from logs", totals.log_reads)] {
        assert!(n > 0, "the workload never made {what}: {totals:?}");
    }
}

/// The values each user sector may hold after a crash at event `k`: its value at the last
/// completed flush, or any write issued after it (writes issued before the crash may land
/// in any order, whole or torn at sectors).
struct History {
    ops: Vec<Op>,
    /// Event counts of the recorder before and after each op.
    spans: Vec<(usize, usize)>,
}

impl History {
    fn violation(&self, k: usize, image: &[u8], base: &[u8]) -> Option<String> {
        let flushed = self.ops.iter().enumerate().filter(|(i, op)| matches!(op, Op::Flush | Op::Checkpoint) && self.spans[*i].1 <= k).map(|(i, _)| i).next_back();
        let mut durable = base.to_vec();
        for op in &self.ops[..flushed.map_or(0, |f| f + 1)] {
            apply(&mut durable, op);
        }
        let later: Vec<&Op> = self.ops.iter().enumerate().skip(flushed.map_or(0, |f| f + 1)).filter(|(i, _)| self.spans[*i].0 < k).map(|(_, op)| op).collect();
        let ss = SECTOR_SIZE as usize;
        for s in 0..image.len() / ss {
            let got = &image[s * ss..(s + 1) * ss];
            if got == &durable[s * ss..(s + 1) * ss] {
                continue;
            }
            let ok = later.iter().any(|op| match op {
                Op::Write { offset, data } => {
                    let (o, e) = (*offset as usize, *offset as usize + data.len());
                    s * ss >= o && (s + 1) * ss <= e && got == &data[s * ss - o..(s + 1) * ss - o]
                }
                _ => false,
            });
            if !ok {
                return Some(format!("sector {s} holds a value that is neither the one flushed (after op {flushed:?}) nor any write issued since"));
            }
        }
        None
    }
}

/// Records a workload on a crash-recording disk, then opens every enumerated crash state and
/// checks it: opens, checks clean, and every sector acceptable. For every `second`-th state,
/// recovery itself is recorded and crashed at each of its events. Returns the first
/// violation.
fn crash_states(seed: u64, faults: Faults, ops_n: usize, second: usize) -> Result<usize, String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let base_disk = made(1 << 20, tiny());
    let initial = base_disk.snapshot();
    let rec = CrashRecorder::new();
    let disk = Arc::new(rec.device("disk", initial.clone()));
    let dev = MlbDevice::open_with_faults(disk.clone(), faults.clone()).unwrap();
    let size = dev.len_bytes();
    let opened = rec.event_count();
    let ops = workload(&mut rng, size, ops_n, tiny().logged_write_bytes);
    let mut model = vec![0u8; size as usize];
    let mut spans = Vec::new();
    let mut start = rec.event_count();
    run(&dev, &ops, &mut model, |_| {
        let now = rec.event_count();
        spans.push((start, now));
        start = now;
    });
    let st = dev.stats();
    assert!(st.log_swaps > 0 && st.checkpoints > 0 && st.in_place_writes > 0, "the recorded run must swap, checkpoint and write in place: {st:?}");
    let h = History { ops, spans };
    let base = vec![0u8; size as usize];
    let total = rec.event_count();
    let mut checked = 0;
    for k in opened..=total {
        for (j, state) in rec.states(k, 6, 2, seed ^ k as u64).into_iter().enumerate() {
            let image = rec.build(&state).remove(0);
            let mem = Arc::new(MemDevice::from_bytes(image.clone()));
            let back = MlbDevice::open_with_faults(mem.clone(), faults.clone()).map_err(|e| format!("{}: open failed: {e}", state.label))?;
            let c = back.check().map_err(|e| e.to_string())?;
            if !c.is_clean() {
                return Err(format!("{}: check found {:?}", state.label, c.problems));
            }
            if let Some(v) = h.violation(k, &read_all(&back), &base) {
                return Err(format!("{}: {v}", state.label));
            }
            checked += 1;
            if second > 0 && (k + j) % second == 0 {
                // A second crash, during this state's recovery.
                let rec2 = CrashRecorder::new();
                let d2 = Arc::new(rec2.device("disk", image));
                drop(MlbDevice::open_with_faults(d2, faults.clone()).unwrap());
                for k2 in 0..=rec2.event_count() {
                    for s2 in rec2.states(k2, 4, 1, seed ^ (k2 as u64) << 20) {
                        let img2 = rec2.build(&s2).remove(0);
                        let again = MlbDevice::open_with_faults(Arc::new(MemDevice::from_bytes(img2)), faults.clone())
                            .map_err(|e| format!("{} then {} in recovery: open failed: {e}", state.label, s2.label))?;
                        if let Some(v) = h.violation(k, &read_all(&again), &base) {
                            return Err(format!("{} then {} in recovery: {v}", state.label, s2.label));
                        }
                        checked += 1;
                    }
                }
            }
        }
    }
    Ok(checked)
}

#[test]
fn every_crash_state_keeps_what_was_flushed() {
    let s = seed();
    let checked = crash_states(s, Faults::default(), 300, 7).unwrap_or_else(|e| panic!("seed {s}: {e}"));
    eprintln!("{checked} crash states checked");
    assert!(checked > 1000, "only {checked} crash states");
}

#[test]
fn canary_unmapping_before_the_home_copies_are_durable_fails_the_crash_test() {
    let faults = Faults { mlb_unmap_early: true, ..Default::default() };
    // Several seeds: the canary must be caught by the same test, not by luck of one workload.
    let caught: Vec<String> = (0..4u64).filter_map(|s| crash_states(1000 + s, faults.clone(), 300, 0).err()).collect();
    eprintln!("caught in {} of 4 runs; first: {:?}", caught.len(), caught.first());
    assert!(!caught.is_empty(), "the crash test passed a device that unmaps blocks before they are home");
}

/// A record recovery judged lost (an earlier record of its log did not reach the disk) must
/// stay lost after new records fill the log up to it and the disk is opened again.
fn lost_record_stays_lost(faults: Faults) -> bool {
    let g = tiny();
    let disk = made(1 << 20, g);
    let dev = MlbDevice::open_with_faults(disk.clone(), faults.clone()).unwrap();
    let a = vec![0xaa; 4096];
    let b = vec![0xbb; 4096];
    dev.write_at(0, &a).unwrap(); // record 1 of log 0
    dev.write_at(8192, &b).unwrap(); // record 2 of log 0
    dev.flush().unwrap();
    let sb = dev.superblock().clone();
    drop(dev);
    // Record 1 never reached the disk (both were unflushed when the power went: the model
    // allows the second to land without the first).
    let mut img = disk.snapshot();
    let at = sb.log_start(0) as usize;
    img[at..at + 512].fill(0);
    let disk = Arc::new(MemDevice::from_bytes(img));
    let dev = MlbDevice::open_with_faults(disk.clone(), faults.clone()).unwrap();
    let mut got = vec![0u8; 4096];
    dev.read_at(8192, &mut got).unwrap();
    assert_eq!(got, vec![0; 4096], "recovery stops at the first missing record of a log");
    // A new record of the same size takes record 1's place; it is flushed, then a crash.
    dev.write_at(4096 * 20, &vec![0xcc; 4096]).unwrap();
    dev.flush().unwrap();
    drop(dev);
    let dev = MlbDevice::open_with_faults(disk, faults).unwrap();
    dev.read_at(8192, &mut got).unwrap();
    got == vec![0; 4096]
}

#[test]
fn a_record_judged_lost_is_never_found_again() {
    assert!(lost_record_stays_lost(Faults::default()), "a write recovery dropped came back after the next crash");
}

#[test]
fn canary_recovery_without_a_new_epoch_brings_a_lost_write_back() {
    assert!(!lost_record_stays_lost(Faults { mlb_same_epoch: true, ..Default::default() }), "the epoch test did not catch the canary");
}

#[test]
fn damaged_disks_and_bad_geometries_are_errors_not_panics() {
    let disk = made(1 << 20, tiny());
    let good = disk.snapshot();
    // Superblock damaged.
    let mut img = good.clone();
    img[70] ^= 1;
    let e = MlbDevice::open(Arc::new(MemDevice::from_bytes(img))).err().expect("a damaged superblock");
    assert!(e.to_string().contains("superblock"), "{e}");
    // Both map copies damaged.
    let mut img = good.clone();
    img[4096 + 10] ^= 1;
    img[8192 + 10] ^= 1;
    let e = MlbDevice::open(Arc::new(MemDevice::from_bytes(img))).err().expect("both snapshot copies damaged");
    assert!(e.to_string().contains("neither copy"), "{e}");
    // One copy damaged: the other serves (an open writes the second copy).
    let reopened = Arc::new(MemDevice::from_bytes(good.clone()));
    drop(MlbDevice::open(reopened.clone()).unwrap());
    let mut img = reopened.snapshot();
    img[8192 + 100] ^= 1;
    assert!(MlbDevice::open(Arc::new(MemDevice::from_bytes(img))).is_ok());
    // A disk shorter than the one it was made on.
    let e = MlbDevice::open(Arc::new(MemDevice::from_bytes(good[..512 * 1024].to_vec()))).err().expect("a truncated disk");
    assert!(e.to_string().contains("made on"), "{e}");
    // Not an MLB disk at all.
    assert!(MlbDevice::open(Arc::new(MemDevice::new(1 << 20))).is_err());
    assert!(MlbDevice::open(Arc::new(MemDevice::new(512))).is_err());
    // Geometries that cannot be.
    let mem = MemDevice::new(1 << 20);
    for g in [
        MlbGeometry { group_bytes: 1000, ..tiny() },
        MlbGeometry { group_bytes: 32 * KB, log_bytes: 32 * KB, ..tiny() },
        MlbGeometry { logged_write_bytes: 32 * KB, ..tiny() },
        MlbGeometry { group_bytes: 4 << 20, log_bytes: 2 << 20, ..tiny() },
    ] {
        assert!(MlbDevice::create(&mem, g).is_err(), "{g:?} accepted");
    }
    // Garbage in a log is not a record.
    let mut img = good.clone();
    let dev = MlbDevice::open(Arc::new(MemDevice::from_bytes(img.clone()))).unwrap();
    let at = dev.superblock().log_start(0) as usize;
    drop(dev);
    img[at..at + 8192].fill(0x5a);
    let dev = MlbDevice::open(Arc::new(MemDevice::from_bytes(img))).unwrap();
    assert!(dev.check().unwrap().is_clean());
    // Out of range and unaligned requests.
    let mut buf = vec![0u8; 512];
    assert!(dev.read_at(dev.len_bytes(), &mut buf).is_err());
    assert!(dev.write_at(3, &buf).is_err());
}

#[test]
fn an_io_error_poisons_the_device_and_nothing_flushed_is_lost() {
    let disk = made(1 << 20, tiny());
    let fault = Arc::new(FaultDevice::new(disk.clone()));
    let dev = MlbDevice::open(fault.clone()).unwrap();
    dev.write_at(0, &vec![1u8; 4096]).unwrap();
    dev.flush().unwrap();
    fault.fail_after(0);
    assert!(dev.write_at(4096, &vec![2u8; 4096]).is_err());
    let e = dev.write_at(8192, &vec![3u8; 512]).unwrap_err();
    assert!(e.to_string().contains("poisoned") || e.to_string().contains("I/O"), "{e}");
    drop(dev);
    let dev = MlbDevice::open(disk).unwrap();
    let mut got = vec![0u8; 4096];
    dev.read_at(0, &mut got).unwrap();
    assert_eq!(got, vec![1u8; 4096]);
}

#[test]
fn the_log_nearest_the_head_takes_each_small_write_and_a_dead_log_is_reused_without_copying() {
    let disk = made(1 << 20, tiny());
    let dev = MlbDevice::open(disk.clone()).unwrap();
    let sb = dev.superblock().clone();
    let per = sb.data_per_group() * 4096;
    let mut buf = vec![0u8; 4096];
    // The head is in group 0: a small write to group 3's blocks goes to log 0.
    dev.write_at(3 * per, &vec![1u8; 4096]).unwrap();
    assert_eq!(dev.stats().log_used_sectors[0], 9);
    // A read in group 2 moves the head there: the next small write goes to log 2.
    dev.read_at(2 * per, &mut buf).unwrap();
    dev.write_at(3 * per, &vec![2u8; 4096]).unwrap();
    assert_eq!(dev.stats().log_used_sectors[2], 9);
    // Log 2 takes four more versions of blocks 0-2 (5 records, 45 of its 64 sectors), then
    // all three are written again from log 0: log 2 holds nothing mapped.
    for k in 0..4u64 {
        dev.write_at(3 * per + (k % 3) * 4096, &vec![3 + k as u8; 4096]).unwrap();
    }
    dev.read_at(0, &mut buf).unwrap();
    for k in 0..3u64 {
        dev.write_at(3 * per + k * 4096, &vec![20 + k as u8; 4096]).unwrap();
    }
    // A two-block record takes log 2 past 80% (no swap: nothing in it is mapped), and its
    // blocks too are written again from log 0.
    dev.read_at(2 * per, &mut buf).unwrap();
    dev.write_at(3 * per + 3 * 4096, &vec![9u8; 8192]).unwrap();
    assert_eq!(dev.stats().log_used_sectors[2], 62);
    dev.read_at(0, &mut buf).unwrap();
    dev.write_at(3 * per + 3 * 4096, &vec![23u8; 8192]).unwrap();
    // Full, and dead: the next record there resets it.
    dev.read_at(2 * per, &mut buf).unwrap();
    let before = dev.stats();
    dev.write_at(3 * per + 5 * 4096, &vec![30u8; 4096]).unwrap();
    let after = dev.stats();
    assert_eq!(after.log_resets, before.log_resets + 1, "{after:?}");
    assert_eq!((after.checkpoints, after.log_swaps), (before.checkpoints, before.log_swaps), "a dead log needs no copying");
    assert_eq!(after.log_used_sectors[2], 9);
    for (k, want) in [(0u64, 20u8), (1, 21), (2, 22), (3, 23), (4, 23), (5, 30)] {
        dev.read_at(3 * per + k * 4096, &mut buf).unwrap();
        assert_eq!(buf, vec![want; 4096], "block {k}");
    }
    drop(dev);
    let dev = MlbDevice::open(disk).unwrap();
    dev.read_at(3 * per + 5 * 4096, &mut buf).unwrap();
    assert_eq!(buf, vec![30u8; 4096]);
    assert!(dev.check().unwrap().is_clean());
}

/// Reads run outside the state lock; a log's space must not be reused under one. Writers
/// keep tiny logs swapping and checkpointing while readers check that every block they read
/// is that block (each 8-byte word of a written block holds its number), never another's.
#[test]
fn concurrent_reads_never_see_a_freed_location_reused() {
    let s = seed();
    let disk = made(4 << 20, tiny());
    let dev = Arc::new(MlbDevice::open(disk).unwrap());
    let blocks = dev.len_bytes() / 4096;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut threads = Vec::new();
    for w in 0..2u64 {
        let dev = dev.clone();
        threads.push(std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(s ^ w);
            for _ in 0..3000 {
                let n = rng.gen_range(1..=3u64);
                let b = rng.gen_range(0..blocks - n);
                let mut data = vec![0u8; (n * 4096) as usize];
                for k in 0..n {
                    for (i, word) in data[(k * 4096) as usize..((k + 1) * 4096) as usize].chunks_mut(8).enumerate() {
                        word.copy_from_slice(&((b + k) ^ ((i as u64) << 40)).to_le_bytes());
                    }
                }
                dev.write_at(b * 4096, &data).unwrap();
            }
        }));
    }
    let mut readers = Vec::new();
    for r in 0..2u64 {
        let (dev, stop) = (dev.clone(), stop.clone());
        readers.push(std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(s ^ (r + 10));
            let mut reads = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let n = rng.gen_range(1..=8u64);
                let b = rng.gen_range(0..blocks - n);
                let mut buf = vec![0u8; (n * 4096) as usize];
                dev.read_at(b * 4096, &mut buf).unwrap();
                for k in 0..n {
                    let blk = &buf[(k * 4096) as usize..((k + 1) * 4096) as usize];
                    if blk.iter().all(|&x| x == 0) {
                        continue;
                    }
                    for (i, word) in blk.chunks(8).enumerate() {
                        let v = u64::from_le_bytes(word.try_into().unwrap());
                        assert_eq!(v, (b + k) ^ ((i as u64) << 40), "block {} word {i} holds another block's data", b + k);
                    }
                }
                reads += 1;
            }
            reads
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let reads: u64 = readers.into_iter().map(|t| t.join().unwrap()).sum();
    let st = dev.stats();
    assert!(reads > 100 && st.log_swaps + st.checkpoints > 10, "{reads} reads, {st:?}");
    assert!(dev.check().unwrap().is_clean());
}

#[test]
fn an_open_after_a_clean_close_reads_no_log_and_after_a_crash_reads_them_all() {
    let disk = made(4 << 20, tiny());
    let dev = MlbDevice::open(disk.clone()).unwrap();
    let groups = dev.superblock().groups as u64;
    dev.write_at(0, &vec![7u8; 4096]).unwrap();
    dev.close().unwrap();
    let before = disk.counters().reads;
    let dev = MlbDevice::open(disk.clone()).unwrap();
    assert!(disk.counters().reads - before <= 3, "superblock and two snapshot copies only");
    dev.write_at(4096, &vec![8u8; 4096]).unwrap();
    dev.flush().unwrap();
    drop(dev); // a crash: the snapshot open wrote is not clean
    let before = disk.counters().reads;
    let dev = MlbDevice::open(disk.clone()).unwrap();
    assert!(disk.counters().reads - before >= 3 + groups, "every log is read past its head");
    let mut got = vec![0u8; 8192];
    dev.read_at(0, &mut got).unwrap();
    assert!(got[..4096].iter().all(|&b| b == 7) && got[4096..].iter().all(|&b| b == 8));
}

#[test]
fn idle_work_swaps_the_heads_log_once_it_is_over_half_full_and_keeps_every_block() {
    let disk = made(4 << 20, tiny());
    let dev = MlbDevice::open(disk.clone()).unwrap();
    assert!(!dev.idle_work().unwrap(), "nothing to do on an empty disk");
    // Four versions of one block fill log 0 past half (36 of 64 sectors), three of them dead.
    for k in 0..4u64 {
        dev.write_at(0, &vec![k as u8 + 1; 4096]).unwrap();
    }
    assert_eq!(dev.stats().log_used_sectors[0], 36);
    assert!(dev.idle_work().unwrap());
    let st = dev.stats();
    assert_eq!((st.idle_swaps, st.log_used_sectors[0], st.log_used_sectors.iter().sum::<u64>()), (1, 0, 9), "{st:?}");
    assert!(!dev.idle_work().unwrap(), "the head's log is empty now: nothing moves back");
    let mut buf = vec![0u8; 8192];
    dev.read_at(0, &mut buf).unwrap();
    assert!(buf[..4096].iter().all(|&b| b == 4) && buf[4096..].iter().all(|&b| b == 0));
    drop(dev);
    let dev = MlbDevice::open(disk).unwrap();
    dev.read_at(0, &mut buf).unwrap();
    assert!(buf[..4096].iter().all(|&b| b == 4) && buf[4096..].iter().all(|&b| b == 0));
    assert!(dev.check().unwrap().is_clean());
}

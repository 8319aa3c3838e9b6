//! The crash-test harness shared by the crash tests: a recorded workload with the history of
//! each file, the guarantee check of each content policy, and the enumeration of crash states
//! (docs/DESIGN.md section 3) — sectors on the disk, and for an NVM journal 8-byte stores and cache
//! lines in NVM (`okeanos::nvm`), together.
#![allow(dead_code)]

use crate::common::*;
use okeanos::journal::content::ContentConfig;
use okeanos::nvm::{MemNvm, NvmHandle};
use okeanos::{CrashImage, CrashRecorder, DataMode, Device, MemDevice, MkfsOptions, MountOptions, Okeanos};
use std::collections::BTreeMap;
use std::sync::Arc;

pub use okeanos_sim::check::History;

/// Where the crash-tested journal lives.
#[derive(Debug, Clone, Copy)]
pub enum Journal {
    /// The internal ring of this many blocks.
    Internal { blocks: u64 },
    /// An external journal device of this many blocks (recorded as a second device, so its
    /// writes and flushes are crashed independently of the file system's).
    External { blocks: u64 },
    /// An nvm journal in a region of this many bytes, on a file system of 1 KiB blocks (the
    /// smallest NVM journal is then about 1 MiB, so that thousands of crash states of both
    /// media stay cheap to build; the placement's logic does not depend on the block size).
    Nvm { bytes: u64 },
    /// Manylogs on a 16 MiB file system: a log of `log_blocks` in every group of
    /// `group_blocks` blocks (4 KiB), so that logs fill and wrap within the workload.
    Manylogs { group_blocks: u32, log_blocks: u32 },
}

pub struct Run {
    pub recorder: Arc<CrashRecorder>,
    pub files: BTreeMap<String, History>,
    /// The "overwrite" file (data mode atomicity): versions are whole rewrites of one range.
    pub end_events: usize,
    /// Files whose contents writeback need not keep beyond a sync (overwritten in place).
    pub overwritten: Vec<String>,
    /// The journal is in NVM (recorded as region 0 of the recorder).
    pub nvm: bool,
    /// The journal is on an external device (the recorder's second device).
    pub external: bool,
    /// Manylogs: where the commits went (how many wrapped a log's end).
    pub near_head: Option<okeanos::journal::placement::NearHead>,
    /// What the checkpoints wrote, copied from logs and skipped, and parked blocks read back.
    pub checkpoint: okeanos::stats::CheckpointCounts,
    /// Manylogs: periodic snapshots of the map of logged blocks.
    pub snapshots: u64,
    /// In-place data blocks written before their commit (background writeback).
    pub early_writes: u64,
    /// fdatasyncs of overwrites made durable in place, without a commit (steps).
    pub datasyncs_in_place: u64,
    /// Commits written as one fast commit (a block or a span).
    pub fast_commits: u64,
    /// Those that spanned more than one block.
    pub fast_spans: u64,
    /// Inode notes those fast commits carried.
    pub inode_notes: u64,
    /// Appends staged beside the state lock (`stage_appends=on`).
    pub staged_appends: u64,
    /// Folds of staged appends that started their file's next block.
    pub staged_new_blocks: u64,
    /// Differential metadata blocks logged as joined records (more than 32 changed places).
    pub joined_blocks: u64,
    /// Data blocks commits wrote in place before their commit record.
    pub commit_in_place_blocks: u64,
    /// Of those, written beside their commit under its flush (in-place tags).
    pub commit_in_place_tagged_blocks: u64,
    /// The canaries the recovering mounts carry (a canary of recovery itself).
    pub recovery_faults: okeanos::faults::Faults,
    /// Commits begun while an earlier commit's flush was in flight (`commit_pipeline=`).
    pub pipelined_commits: u64,
    /// Directories removed while held open ([`workload`]), each on the orphan list until let go.
    pub dirs_held: usize,
}

/// Checks the guarantee of `mode` on a recovered file system, for a crash after `k` events.
pub fn check(mode: DataMode, run: &Run, k: usize, fs: &Okeanos) -> Result<(), String> {
    okeanos_sim::check::check(mode, &run.files, &run.overwritten, k, fs)
}

fn mount_opts(cfg: ContentConfig, run: &Run, nvm: Option<Arc<dyn okeanos::nvm::Nvm>>) -> MountOptions {
    let mut o = MountOptions::default().content_config(cfg);
    o.nvm = nvm.map(NvmHandle);
    o.faults = run.recovery_faults.clone();
    o
}

/// Mounts a crash image (recovery), checks the guarantee, unmounts and runs fsck.
pub fn recover_and_check(cfg: ContentConfig, run: &Run, k: usize, images: Vec<Vec<u8>>, nvm: Option<Vec<u8>>) -> Result<(), String> {
    recover_and_check_devices(cfg, run, k, images.into_iter().map(|i| Arc::new(MemDevice::from_bytes(i)) as Arc<dyn Device>).collect(), nvm)
}

/// As [`recover_and_check`], on devices already made (a crash state's [`CrashImage`]s).
pub fn recover_and_check_devices(cfg: ContentConfig, run: &Run, k: usize, mut devs: Vec<Arc<dyn Device>>, nvm: Option<Vec<u8>>) -> Result<(), String> {
    let dev = devs.remove(0);
    let jdev = run.external.then(|| devs.remove(0));
    let nvm = nvm.map(|b| Arc::new(MemNvm::from_bytes(b)) as Arc<dyn okeanos::nvm::Nvm>);
    let fs = Okeanos::mount(dev.clone(), jdev.clone(), mount_opts(cfg, run, nvm.clone())).map_err(|e| format!("mount: {e}"))?;
    check(cfg.mode, run, k, &fs)?;
    fs.unmount().map_err(|e| format!("unmount: {e}"))?;
    let r = okeanos::fsck(dev, jdev);
    if !r.is_clean() {
        return Err(format!("fsck: {:?}", r.problems));
    }
    Ok(())
}

/// Crashes in the middle of recovering `image` at every event of that recovery, then recovers
/// again and checks.
pub fn crash_during_recovery(cfg: ContentConfig, run: &Run, k: usize, mut images: Vec<Vec<u8>>, nvm: Option<Vec<u8>>) -> Result<usize, String> {
    let rec = CrashRecorder::new();
    let dev = Arc::new(rec.device("fs", images.remove(0)));
    let jdev = run.external.then(|| Arc::new(rec.device("journal", images.remove(0))) as Arc<dyn Device>);
    let region = nvm.map(|b| Arc::new(rec.nvm("nvm", b)) as Arc<dyn okeanos::nvm::Nvm>);
    let fs = Okeanos::mount(dev as Arc<dyn Device>, jdev, mount_opts(cfg, run, region.clone())).map_err(|e| format!("first recovery: {e}"))?;
    drop(fs);
    let mut n = 0;
    for j in 0..=rec.event_count() {
        let mut states = rec.states(j, 2, 1, 7);
        if region.is_some() {
            for (f, label) in rec.nvm_states(j, 2, 1, 7).into_iter().skip(1) {
                let mut st = states[0].clone();
                st.nvm = f;
                st.label = format!("{}, {label}", st.label);
                states.push(st);
            }
        }
        for st in states {
            let img = devices(rec.build_devices(&st));
            let nvm_img = region.as_ref().map(|_| rec.build_nvm(&st).remove(0));
            recover_and_check_devices(cfg, run, k, img, nvm_img).map_err(|e| format!("second crash {}: {e}", st.label))?;
            n += 1;
        }
    }
    Ok(n)
}

/// A crash state's images as the devices a mount takes.
fn devices(images: Vec<Arc<CrashImage>>) -> Vec<Arc<dyn Device>> {
    images.into_iter().map(|i| i as Arc<dyn Device>).collect()
}

pub struct Outcome {
    pub states: usize,
    pub violations: Vec<String>,
}

impl Outcome {
    /// No violation, in at least `min_states` crash states.
    pub fn assert_clean(&self, min_states: usize) {
        assert!(self.violations.is_empty(), "{} violations in {} crash states, first: {:#?}", self.violations.len(), self.states, &self.violations[..self.violations.len().min(5)]);
        assert!(self.states > min_states, "enumerated only {} crash states", self.states);
    }
}

/// Crash states at `max_points` evenly spread events, at every flush and fence (and just
/// before every fence), and at every acknowledged sync: the disk's fates with NVM whole, the
/// NVM's fates with the disk whole, and some of both at once.
pub fn enumerate(cfg: ContentConfig, run: &Run, max_points: usize, second_crash_every: usize) -> Outcome {
    let events = run.recorder.events();
    let mut points: Vec<usize> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        match e {
            okeanos::device::CrashEvent::Flush { .. } => points.push(i + 1),
            okeanos::device::CrashEvent::NvmFence { .. } => points.extend([i, i + 1]),
            _ => {}
        }
    }
    let stride = (run.end_events / max_points).max(1);
    points.extend((0..=run.end_events).step_by(stride));
    points.extend(run.files.values().flat_map(|h| h.acks.iter().map(|a| a.0)));
    points.sort_unstable();
    points.dedup();
    let mut out = Outcome { states: 0, violations: Vec::new() };
    for (pi, &k) in points.iter().enumerate() {
        let mut states = run.recorder.states(k, 3, 2, k as u64);
        if run.nvm {
            let disk = states.clone();
            for (si, (f, label)) in run.recorder.nvm_states(k, 4, 3, k as u64).into_iter().enumerate().skip(1) {
                // With the disk whole, and (every other one) with a disk fate too.
                let mut st = disk[0].clone();
                st.nvm = f.clone();
                st.label = format!("{}, {label}", st.label);
                states.push(st);
                if si % 2 == 0 && disk.len() > 1 {
                    let mut st = disk[si % disk.len()].clone();
                    st.nvm = f;
                    st.label = format!("{}, {label}", st.label);
                    states.push(st);
                }
            }
        }
        for (si, st) in states.into_iter().enumerate() {
            let images = run.recorder.build_devices(&st);
            let nvm = run.nvm.then(|| run.recorder.build_nvm(&st).remove(0));
            out.states += 1;
            let res = if second_crash_every > 0 && si == 1 && pi % second_crash_every == 0 {
                crash_during_recovery(cfg, run, k, images.iter().map(|i| i.to_bytes()).collect(), nvm).map(|n| out.states += n)
            } else {
                recover_and_check_devices(cfg, run, k, devices(images), nvm)
            };
            if let Err(e) = res {
                out.violations.push(format!("{} {}: {e}", cfg.name(), st.label));
            }
        }
    }
    out
}

const STREAMS: usize = 3;
const OW: &str = "/s/overwritten";

/// The recorded device of `journal`, formatted (and the NVM handle in `o` for an nvm journal).
fn recorded_device(journal: Journal, recorder: &Arc<CrashRecorder>, o: &mut MountOptions) -> (Arc<dyn Device>, Option<Arc<dyn Device>>) {
    let dev = match journal {
        Journal::Internal { blocks } => Arc::new(recorder.device("fs", mem_fs(8 * MB, blocks).snapshot())),
        Journal::External { blocks } => {
            let base = MemDevice::new(8 * MB);
            let j = MemDevice::new(blocks * 4096);
            Okeanos::mkfs(&base, Some(&j as &dyn Device), &MkfsOptions { external_journal: true, journal_blocks: blocks, ..Default::default() }).expect("mkfs");
            let fs: Arc<dyn Device> = Arc::new(recorder.device("fs", base.snapshot()));
            return (fs, Some(Arc::new(recorder.device("journal", j.snapshot()))));
        }
        Journal::Nvm { bytes } => {
            let base = MemDevice::new(8 * MB);
            let region = MemNvm::new(bytes);
            Okeanos::mkfs_nvm(&base, &region, &MkfsOptions { block_size: 1024, journal_blocks: 256, nvm_path: Some("nvm".into()), ..Default::default() }).expect("mkfs");
            let nvm = Arc::new(recorder.nvm("nvm", region.snapshot()));
            o.nvm = Some(NvmHandle(nvm));
            Arc::new(recorder.device("fs", base.snapshot()))
        }
        Journal::Manylogs { group_blocks, log_blocks } => {
            let base = MemDevice::new(16 * MB);
            Okeanos::mkfs(&base, None, &MkfsOptions { manylogs: true, blocks_per_group: Some(group_blocks), log_area_blocks: log_blocks, ..Default::default() }).expect("mkfs");
            Arc::new(recorder.device("fs", base.snapshot()))
        }
    };
    (dev, None)
}

/// A recorded mount of `journal` with the stream files created: the recorder, the file system,
/// the files' histories and the streams' handles.
fn start(cfg: ContentConfig, journal: Journal, faults: &dyn Fn(&mut MountOptions)) -> (Arc<CrashRecorder>, Okeanos, BTreeMap<String, History>, Vec<okeanos::File>) {
    start_with(cfg, journal, faults, None)
}

/// As [`start`]; with `slow_flush`, every flush of the recorded devices waits that long first
/// (writes issued meanwhile land before it, as on a device whose flush takes time).
fn start_with(cfg: ContentConfig, journal: Journal, faults: &dyn Fn(&mut MountOptions), slow_flush: Option<std::time::Duration>) -> (Arc<CrashRecorder>, Okeanos, BTreeMap<String, History>, Vec<okeanos::File>) {
    let recorder = CrashRecorder::new();
    let mut o = MountOptions::default().content_config(cfg);
    faults(&mut o);
    let (mut dev, mut jdev) = recorded_device(journal, &recorder, &mut o);
    if let Some(d) = slow_flush {
        dev = Arc::new(SlowFlush(dev, d));
        jdev = jdev.map(|j| Arc::new(SlowFlush(j, d)) as Arc<dyn Device>);
    }
    let fs = Okeanos::mount(dev, jdev, o).unwrap();
    let mut files: BTreeMap<String, History> = BTreeMap::new();
    let mut handles = Vec::new();
    fs.mkdir_path("/s").unwrap();
    for s in 0..STREAMS {
        let name = format!("/s/stream{s}");
        let at = recorder.event_count();
        handles.push(fs.create_file(&name).unwrap());
        files.insert(name, History::new(at));
    }
    (recorder, fs, files, handles)
}

/// The end of a recorded workload: everything committed, then the run as recorded.
fn end(recorder: Arc<CrashRecorder>, fs: Okeanos, files: BTreeMap<String, History>, journal: Journal) -> Run {
    fs.sync().unwrap();
    let near_head = fs.near_head();
    let checkpoint = fs.counters().checkpoint;
    let snapshots = fs.counters().snapshots;
    let early_writes = fs.counters().early_writes;
    let datasyncs_in_place = fs.counters().datasyncs_in_place;
    let fast_commits = fs.counters().fast_commits;
    let fast_spans = fs.counters().fast_spans;
    let inode_notes = fs.counters().inode_notes;
    let staged_appends = fs.counters().staged_appends;
    let staged_new_blocks = fs.counters().staged_new_blocks;
    let joined_blocks = fs.counters().joined_blocks;
    let commit_in_place_blocks = fs.counters().commit_in_place_blocks;
    let commit_in_place_tagged_blocks = fs.counters().commit_in_place_tagged_blocks;
    let pipelined_commits = fs.counters().pipelined_commits;
    let end_events = recorder.event_count();
    drop(fs);
    Run {
        recorder,
        files,
        end_events,
        overwritten: vec![OW.to_string()],
        nvm: matches!(journal, Journal::Nvm { .. }),
        external: matches!(journal, Journal::External { .. }),
        near_head,
        checkpoint,
        snapshots,
        early_writes,
        datasyncs_in_place,
        fast_commits,
        fast_spans,
        inode_notes,
        staged_appends,
        staged_new_blocks,
        joined_blocks,
        commit_in_place_blocks,
        commit_in_place_tagged_blocks,
        recovery_faults: Default::default(),
        pipelined_commits,
        dirs_held: 0,
    }
}

/// A recorded workload of concurrent syncs: one thread per stream, each appending `ops`
/// records of varied sizes and syncing most of them (fsync or fdatasync), so that commits of
/// different threads are in flight together (with `commit_pipeline=`, a commit's writes
/// beside an earlier commit's flush). A version's event is taken before its append, an ack's
/// after its sync returned: the histories stay conservative whatever the interleaving.
pub fn concurrent_workload(cfg: ContentConfig, journal: Journal, ops: usize, faults: &dyn Fn(&mut MountOptions), seed: u64) -> Run {
    // Flushes that take a while, so that the next commit's writes come while one is in flight.
    let (recorder, fs, files, handles) = start_with(cfg, journal, faults, Some(std::time::Duration::from_micros(300)));
    let files = std::sync::Mutex::new(files);
    std::thread::scope(|scope| {
        for (s, h) in handles.into_iter().enumerate() {
            let (recorder, files) = (&recorder, &files);
            scope.spawn(move || {
                let name = format!("/s/stream{s}");
                let mut rng = (seed ^ (s as u64) << 20) | 1;
                for k in 0..ops {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let len = [100, 128, 700, 3000, 4096, 6000][(rng % 6) as usize];
                    let data = record(s, k, len);
                    let at = recorder.event_count();
                    h.append(&data).unwrap();
                    files.lock().unwrap().get_mut(&name).unwrap().appended(at, &data);
                    if (rng >> 8) % 4 != 0 {
                        if (rng >> 12) % 2 == 0 { h.fsync().unwrap() } else { h.fdatasync().unwrap() }
                        let at = recorder.event_count();
                        files.lock().unwrap().get_mut(&name).unwrap().synced(at);
                    }
                }
            });
        }
    });
    end(recorder, fs, files.into_inner().unwrap(), journal)
}

/// A recorded workload: appends with syncs on a few streams, in-place overwrites, metadata
/// churn, truncation; `faults` sets a canary's fault in the mount options.
pub fn workload(cfg: ContentConfig, journal: Journal, ops: usize, faults: &dyn Fn(&mut MountOptions), seed: u64) -> Run {
    let (recorder, fs, mut files, handles) = start(cfg, journal, faults);
    files.get_mut("/s/stream0").expect("stream 0").journaled = true;
    // A file overwritten in place at random offsets (partial and whole blocks).
    let at = recorder.event_count();
    let ow = fs.create_file(OW).unwrap();
    files.insert(OW.to_string(), History::new(at));
    let mut held_dirs: Vec<u32> = Vec::new();
    let mut dirs_held = 0;
    let mut rng = seed | 1;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for k in 0..ops {
        let r = next();
        if let Journal::Manylogs { group_blocks, .. } = journal {
            // Large I/O elsewhere moves the disk head: the next commits go to other logs, so
            // consecutive transactions interleave across logs.
            // Two groups apart, so that their logs still fill and wrap within the workload.
            if (r >> 40) % 4 == 0 {
                fs.hint_position(((r >> 44) % 2) * 4 * group_blocks as u64 + 100);
            }
        }
        let s = (r % STREAMS as u64) as usize;
        let name = format!("/s/stream{s}");
        match (r >> 8) % 12 {
            // Overwrites at random offsets, partial and whole blocks.
            10 | 11 => {
                let len = [50, 300, 3000, 4096, 5000][((r >> 16) % 5) as usize];
                let off = (r >> 32) % 12_000;
                let data = record(7, k, len);
                let at = recorder.event_count();
                ow.write_at(off, &data).unwrap();
                let h = files.get_mut(OW).unwrap();
                let mut v = h.versions.last().unwrap().1.clone();
                if v.len() < off as usize + len {
                    v.resize(off as usize + len, 0);
                }
                v[off as usize..off as usize + len].copy_from_slice(&data);
                h.versions.push((at, v));
                if (r >> 24) % 3 == 0 {
                    // fdatasync of overwrites inside the size: ordered and writeback write them
                    // in place without a commit (journal/datasync.rs).
                    if (r >> 28) % 2 == 0 { ow.fsync().unwrap() } else { ow.fdatasync().unwrap() }
                    let h = files.get_mut(OW).unwrap();
                    h.acks.push((recorder.event_count(), h.versions.len() - 1));
                }
            }
            // Appends of varied sizes, most followed by an fsync or fdatasync. Stream 0 takes
            // only writes below selective's threshold: selective journals all of it.
            0..=6 => {
                let sizes = [100, 128, 700, 3000, 4096, 6000];
                let len = if s == 0 { sizes[((r >> 16) % 4) as usize] } else { sizes[((r >> 16) % 6) as usize] };
                let data = record(s, k, len);
                let at = recorder.event_count();
                handles[s].append(&data).unwrap();
                files.get_mut(&name).unwrap().appended(at, &data);
                if (r >> 24) % 4 != 0 {
                    if (r >> 26) % 2 == 0 { handles[s].fsync().unwrap() } else { handles[s].fdatasync().unwrap() }
                    files.get_mut(&name).unwrap().synced(recorder.event_count());
                }
            }
            // Metadata churn beside the streams: create, write, rename, unlink, mkdir/rmdir.
            7 => {
                let f = fs.create_file(&format!("/tmp{k}")).unwrap();
                f.write_at(0, &record(9, k, 5000)).unwrap();
                drop(f);
                fs.rename_path(&format!("/tmp{k}"), &format!("/s/renamed{k}")).unwrap();
            }
            8 => {
                let victims: Vec<String> = fs.list_path("/s").unwrap().into_iter().map(|e| String::from_utf8(e.name).unwrap()).filter(|n| n.starts_with("renamed")).collect();
                if let Some(v) = victims.first() {
                    fs.remove_path(&format!("/s/{v}")).unwrap();
                }
                // Every other time the directory is held open across its removal (a shell's
                // working directory): it stays, empty and with no links, on the orphan list
                // until a later churn step lets go of it, so the commits between carry an
                // orphan directory for recovery to free (docs/JOURNALING.md, "Removed while
                // held"). The other times, the oldest held one is let go.
                let dir = fs.mkdir_path(&format!("/dir{k}")).unwrap();
                let hold = (r >> 20) % 2 == 0;
                if hold {
                    fs.open_ino(dir.ino).unwrap();
                    held_dirs.push(dir.ino);
                    dirs_held += 1;
                }
                fs.rmdir_path(&format!("/dir{k}")).unwrap();
                if !hold && !held_dirs.is_empty() {
                    fs.release_now(held_dirs.remove(0)).unwrap();
                }
            }
            _ => {
                let f = fs.create_file("/trunc").unwrap();
                f.write_at(0, &record(8, k, 9000)).unwrap();
                f.set_len((r >> 16) % 9000).unwrap();
                f.fsync().unwrap();
            }
        }
    }
    for ino in held_dirs {
        fs.release_now(ino).unwrap();
    }
    drop(handles);
    drop(ow);
    Run { dirs_held, ..end(recorder, fs, files, journal) }
}

/// A recorded workload in which each transaction changes many inodes of one inode-table block
/// in more than their size and times: forty files, created together (so that whole table
/// blocks of sixteen inodes hold only them), each given a record of just over 4 KiB in every
/// round (a new block, so its extents change and a note cannot tell it), and one of them synced. Under differential metadata the table block changes in more places
/// than a block's records may be, and is logged as joined records (`Run::joined_blocks`).
pub fn many_inodes_workload(cfg: ContentConfig, journal: Journal, rounds: usize, seed: u64) -> Run {
    const FILES: usize = 40;
    let (recorder, fs, mut files, handles) = start(cfg, journal, &|_| {});
    drop(handles);
    fs.mkdir_path("/m").unwrap();
    let mut hs = Vec::with_capacity(FILES);
    for k in 0..FILES {
        let name = format!("/m/f{k}");
        let at = recorder.event_count();
        hs.push(fs.create_file(&name).unwrap());
        files.insert(name, History::new(at));
    }
    for r in 0..rounds {
        for (k, h) in hs.iter().enumerate() {
            let len = [4100, 4200, 4300][(seed as usize + r + k) % 3];
            let data = record(10 + k, r, len);
            let at = recorder.event_count();
            h.append(&data).unwrap();
            files.get_mut(&format!("/m/f{k}")).unwrap().appended(at, &data);
        }
        let s = (seed as usize + r * 7) % FILES;
        if r % 2 == 0 { hs[s].fsync().unwrap() } else { hs[s].fdatasync().unwrap() }
        files.get_mut(&format!("/m/f{s}")).unwrap().synced(recorder.event_count());
    }
    drop(hs);
    end(recorder, fs, files, journal)
}

/// The overwritten file of [`block_workload`], in blocks: more than a small cache holds.
const OW_BLOCKS: u64 = 96;

/// A recorded workload of whole blocks: `ops` block-aligned 4 KiB appends to a few streams,
/// each synced, and (two ops in five) a whole-block rewrite of the overwritten file, synced. Many
/// distinct blocks logged whole, some of them twice: with a small cache, manylogs parks them
/// out of it and checkpoints copy them home from the logs; the workload ends with a forced
/// checkpoint of everything.
/// With `durable`, the overwritten file is O_DUR (always logged, not written home for age).
pub fn block_workload(cfg: ContentConfig, journal: Journal, ops: usize, faults: &dyn Fn(&mut MountOptions), seed: u64, durable: bool) -> Run {
    let (recorder, fs, mut files, handles) = start(cfg, journal, faults);
    let at = recorder.event_count();
    let ow = fs.create_file(OW).unwrap();
    if durable {
        fs.set_durable(ow.ino(), true).unwrap();
    }
    files.insert(OW.to_string(), History::new(at));
    // Written 8 blocks per synced call (a transaction each, so each call is atomic in data mode).
    for part in 0..OW_BLOCKS as usize / 8 {
        let data = record(7, part, 8 * 4096);
        let at = recorder.event_count();
        ow.append(&data).unwrap();
        files.get_mut(OW).unwrap().appended(at, &data);
        ow.fsync().unwrap();
        files.get_mut(OW).unwrap().synced(recorder.event_count());
    }
    let mut rng = seed | 1;
    for k in 0..ops {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let r = rng;
        if let Journal::Manylogs { group_blocks, .. } = journal {
            if (r >> 40) % 4 == 0 {
                fs.hint_position(((r >> 44) % 2) * 4 * group_blocks as u64 + 100);
            }
        }
        if r % 5 < 2 {
            let block = (r >> 8) % OW_BLOCKS;
            let data = record(8, k, 4096);
            let at = recorder.event_count();
            ow.write_at(block * 4096, &data).unwrap();
            let h = files.get_mut(OW).unwrap();
            let mut v = h.versions.last().unwrap().1.clone();
            v[block as usize * 4096..][..4096].copy_from_slice(&data);
            h.versions.push((at, v));
            ow.fsync().unwrap();
            let h = files.get_mut(OW).unwrap();
            h.acks.push((recorder.event_count(), h.versions.len() - 1));
        } else {
            let s = ((r >> 8) % STREAMS as u64) as usize;
            let name = format!("/s/stream{s}");
            let data = record(s, k, 4096);
            let at = recorder.event_count();
            handles[s].append(&data).unwrap();
            files.get_mut(&name).unwrap().appended(at, &data);
            handles[s].fdatasync().unwrap();
            files.get_mut(&name).unwrap().synced(recorder.event_count());
        }
    }
    // A forced checkpoint (`okeanos checkpoint`) at the end: whatever is parked is copied home
    // from the logs now, at a point of the recording every run reaches.
    fs.checkpoint().unwrap();
    drop(handles);
    drop(ow);
    end(recorder, fs, files, journal)
}

/// A device whose flush waits a while before it flushes (the crash tests' recorded devices
/// flush at once).
struct SlowFlush(Arc<dyn Device>, std::time::Duration);

impl Device for SlowFlush {
    fn name(&self) -> String {
        self.0.name()
    }
    fn len_bytes(&self) -> u64 {
        self.0.len_bytes()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), okeanos::device::DeviceError> {
        self.0.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), okeanos::device::DeviceError> {
        self.0.write_at(offset, data)
    }
    fn write_batch(&self, writes: &[okeanos::device::Gather<'_>]) -> Result<(), okeanos::device::DeviceError> {
        self.0.write_batch(writes)
    }
    fn flush(&self) -> Result<(), okeanos::device::DeviceError> {
        std::thread::sleep(self.1);
        self.0.flush()
    }
    fn counters(&self) -> okeanos::device::DeviceStats {
        self.0.counters()
    }
    fn seeks(&self) -> Option<bool> {
        self.0.seeks()
    }
    fn short_writes(&self) -> bool {
        self.0.short_writes()
    }
}

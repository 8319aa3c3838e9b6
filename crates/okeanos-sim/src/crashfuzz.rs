//! Crash fuzzing (`okeanos sim --crash-fuzz`): a seeded random workload under a random policy
//! runs in the simulator on crash-recording devices — appends and in-place overwrites of
//! several files, fsyncs and fdatasyncs, virtual time passing so that commit intervals and
//! age-based checkpoints fire, a journal small enough to wrap (internal, external, or manylogs
//! with the disk head moved between groups, drawn from the seed; or the one asked for, nvm and
//! remote among them) — then crashes at random points:
//! the unflushed writes are each kept, lost or torn at sector boundaries as the crash model
//! allows (docs/DESIGN.md section 3), each NVM cache line keeps a random prefix of its stores
//! not yet persisted, and a journal server holds what it acknowledged by then, with or without
//! the append in flight. Each crash state is recovered, checked against the policy's
//! guarantee ([`super::check`]) and by fsck. A seed and a journal name one run exactly; with
//! `OKEANOS_FUZZ_DUMP=DIR` in the environment, each violating state's images are written there.

use super::check::{check, History};
use okeanos::models as model;
use super::rng::Rng;
use super::world::{World, WorldConfig};
use super::world::{NvmConfig, RemoteConfig};
use okeanos::device::{CrashRecorder, CrashState, Device, MemDevice, TearPlan};
use okeanos::nvm::{MemNvm, Nvm, NvmHandle};
use okeanos::remote::memory::{MemLog, MemServer};
use std::sync::Mutex;
use okeanos::fs::mkfs::MkfsOptions;
use okeanos::journal::content::ContentConfig;
use okeanos::options::MountOptions;
use okeanos::{fsck, FsError, Okeanos};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The seven policies the fuzzer draws from.
pub const ALL: [&str; 7] = ["writeback", "ordered", "data", "wasteless", "wasteless+dmeta", "selective", "selective+dmeta"];

/// Where a run's journal is. Without one named, each seed draws internal, external or manylogs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FuzzJournal {
    Internal,
    External,
    Manylogs,
    /// UBJ's slot table in (simulated) NVM: crash states cut NVM cache lines.
    Nvm,
    /// A journal server (the in-memory stand-in), the internal ring as its fallback: crash
    /// states pair the host's disk with what the server had acknowledged.
    Remote,
    /// A replicated log (JetStream's shape, three replicas; `sim multistream --journal
    /// replicated`): an append is acknowledged once two replicas have flushed it, and one run
    /// in three loses the leader for an election. The host sees the same acknowledgements as
    /// from one server, so the crash states are built the same way; what changes is their
    /// timing (appends wait on the slower of two replicas, and on elections).
    Replicated,
}

impl FuzzJournal {
    pub const ALL: [FuzzJournal; 6] = [FuzzJournal::Internal, FuzzJournal::External, FuzzJournal::Manylogs, FuzzJournal::Nvm, FuzzJournal::Remote, FuzzJournal::Replicated];

    pub fn name(self) -> &'static str {
        match self {
            FuzzJournal::Internal => "internal",
            FuzzJournal::External => "external",
            FuzzJournal::Manylogs => "manylogs",
            FuzzJournal::Nvm => "nvm",
            FuzzJournal::Remote => "remote",
            FuzzJournal::Replicated => "replicated",
        }
    }

    /// `drawn` (None: each seed draws internal, external or manylogs) or a placement's name.
    pub fn parse(s: &str) -> Result<Option<FuzzJournal>, String> {
        if s == "drawn" {
            return Ok(None);
        }
        FuzzJournal::ALL.into_iter().find(|j| j.name() == s).map(Some).ok_or_else(|| {
            format!("--journal {s}: use drawn (internal, external or manylogs by seed), internal, external, manylogs, nvm, remote or replicated (dropped has nothing to recover)")
        })
    }
}

/// NVM for nvm runs: about a thousand slots of 1 KiB (the fewest a journal may have).
const NVM_BYTES: u64 = 1100 << 10;

/// The outcome of one seeded run.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub seed: u64,
    pub mode: String,
    /// Where the journal was: "internal", "external" or "manylogs".
    pub journal: &'static str,
    pub ops: usize,
    pub events: usize,
    pub states: usize,
    pub violations: Vec<String>,
    /// Commits and checkpoints that were in flight together during the workload.
    pub overlaps: u64,
    /// Blocks checkpoints copied home from manylogs logs (parked out of the cache).
    pub copied: u64,
    /// Manylogs log swaps during the workload.
    pub swaps: u64,
    /// Manylogs periodic snapshots of the map of logged blocks during the workload.
    pub snapshots: u64,
    /// Remote runs whose server died: the host fell back to its local journal.
    pub fallbacks: u64,
    /// The run batched for bytes (`batch=bytes`).
    pub batch_for_bytes: bool,
    /// New blocks the run's commits wrote in place (`fresh_blocks=in_place`), and of those
    /// the ones beside their commit, named by in-place tags.
    pub in_place: u64,
    pub in_place_tagged: u64,
}

const MB: u64 = 1 << 20;

/// Manylogs runs: a 256-block log in every 512-block group of a 16 MiB file system.
const MANYLOGS_GROUP: u32 = 512;

fn world_config(cfg: ContentConfig, canary: bool, journal: FuzzJournal, slow_disk: bool) -> WorldConfig {
    let (external, manylogs) = (journal == FuzzJournal::External, journal == FuzzJournal::Manylogs);
    let mut mount = MountOptions::default().content_config(cfg);
    mount.commit_interval = Duration::from_secs(1);
    mount.writeback_period = Duration::from_millis(700);
    mount.expire_period = Some(Duration::from_secs(2));
    // The canary breaks the placement's own ordering: the commit's flush on a disk, the
    // fence before the commit word in NVM, the append on a server.
    match journal {
        FuzzJournal::Nvm => mount.faults.nvm_no_fence = canary,
        FuzzJournal::Remote | FuzzJournal::Replicated => mount.faults.skip_remote_append = canary,
        _ => mount.faults.skip_commit_flush = canary,
    }
    // Commits beside checkpoints whatever the disk (the default turns them off for an
    // internal journal on a spinning one): the fuzzer is here to find what overlap breaks.
    mount.checkpoint_thread = Some(true);
    if manylogs {
        // A cache too small for what is logged: blocks are parked at their log positions and
        // checkpoints copy them home from the logs, beside commits.
        mount.cache_blocks = 64;
    }
    WorldConfig {
        fs_bytes: if manylogs { 16 * MB } else { 8 * MB },
        external_journal_blocks: external.then_some(256),
        journal_blocks: 256,
        // A spinning disk under the file system in some runs: checkpoints then take long enough
        // for commits to run beside them (the checkpoint lane).
        fs_model: model::preset(if slow_disk { "cheetah15k" } else { "ssd" }).expect("preset"),
        journal_model: external.then(|| model::preset("ssd").expect("preset")),
        mount,
        wall_origin: 1_700_000_000_000_000_000,
        frozen_wall: false,
        remote: match journal {
            FuzzJournal::Remote => Some(RemoteConfig::single(model::preset("net-lan").expect("preset"), model::preset("ssd").expect("preset"), false)),
            FuzzJournal::Replicated => {
                let mut r = RemoteConfig::single(model::preset("net-lan").expect("preset"), model::preset("ssd").expect("preset"), false);
                r.followers = (0..2).map(|_| model::preset("ssd").expect("preset")).collect();
                Some(r)
            }
            _ => None,
        },
        nvm: (journal == FuzzJournal::Nvm).then(|| NvmConfig { region: Arc::new(MemNvm::new(NVM_BYTES)), model: model::preset("nvm").expect("preset") }),
        journal_at: None,
        timed_reads: None,
    }
}

/// Runs one seed on `journal` (None: drawn from the seed): the workload, then `points` crash
/// states, each recovered and checked.
pub fn run_seed(seed: u64, modes: &[ContentConfig], points: usize, canary: bool, journal: Option<FuzzJournal>) -> Result<RunReport, String> {
    let mut rng = Rng::new(seed);
    let mut cfg = modes[rng.below(modes.len() as u64) as usize];
    let mix = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    // Half the wasteless runs write new whole blocks in place (`fresh_blocks=in_place`):
    // beside their commits by in-place tags on the internal and external journals, flushed
    // before them on the others. (From the seed, not the stream, as below.)
    if cfg.mode == okeanos::DataMode::Wasteless && (mix >> 28) & 1 == 0 {
        cfg.fresh_in_place = true;
    }
    // Drawn even when the journal is named, so that the rest of a seed's draws do not move.
    let drawn = rng.below(10);
    let journal = journal.unwrap_or(if drawn < 3 {
        FuzzJournal::External
    } else if drawn >= 7 {
        FuzzJournal::Manylogs
    } else {
        FuzzJournal::Internal
    });
    let (external, manylogs) = (journal == FuzzJournal::External, journal == FuzzJournal::Manylogs);
    let slow_disk = rng.chance(0.5);
    // Format, then move the images onto recording devices.
    let mut wc = world_config(cfg, canary, journal, slow_disk);
    // Half the manylogs runs checkpoint lazily: blocks stay logged until the logs fill, so
    // more of them are parked and copied home from the logs.
    let lazy = manylogs && rng.chance(0.5);
    if lazy {
        wc.mount.lazy_checkpoint = true;
        wc.mount.idle_after = Duration::from_millis(500);
    }
    // Two manylogs runs in three snapshot the map every 1 to 16 ms of virtual time, so that
    // recovery reads the map and the logs only past it. (From the seed, not the stream: the
    // stream's draws, and so every earlier seed's run, stay as they were.)
    wc.mount.snapshot_period = if manylogs && mix >> 62 != 0 { Duration::from_millis(1 + (mix >> 40) % 16) } else { Duration::ZERO };
    // A quarter of the runs batch for bytes (`batch=bytes`), with windows of 1 to 40 ms: commits
    // then wait, past `batch_handles`, for shared blocks and padding to fill, and the crash
    // points fall among larger commits and their windows. (From the seed, as above.)
    let batch_for_bytes = (mix >> 20) & 3 == 0;
    if batch_for_bytes {
        wc.mount.batch_for_bytes = true;
        wc.mount.max_batch_time = Duration::from_millis(1 + (mix >> 24) % 40);
    }
    let mut mkfs = MkfsOptions { journal_blocks: 256, manylogs, blocks_per_group: manylogs.then_some(MANYLOGS_GROUP), log_area_blocks: if manylogs { 256 } else { 0 }, ..Default::default() };
    if journal == FuzzJournal::Nvm {
        // 1 KiB blocks: the smallest slot pool a journal may have fits in a small region, and
        // the workload fills a good part of it.
        mkfs.block_size = 1024;
    }
    let (fs0, j0) = World::format(&wc, &mkfs).map_err(|e| e.to_string())?;
    let snap = |d: &Arc<dyn Device>| -> Result<Vec<u8>, String> {
        let mut b = vec![0u8; d.len_bytes() as usize];
        d.read_at(0, &mut b).map_err(|e| e.to_string())?;
        Ok(b)
    };
    let rec = CrashRecorder::new();
    let fs_dev: Arc<dyn Device> = Arc::new(rec.device("fs", snap(&fs0)?));
    if let Some(n) = &mut wc.nvm {
        // The formatted region, recording from here on.
        let mut b = vec![0u8; n.region.len() as usize];
        n.region.load(0, &mut b).map_err(|e| e.to_string())?;
        n.region = Arc::new(rec.nvm("nvm", b));
    }
    if let Some(r) = &mut wc.remote {
        r.recorder = Some(rec.clone());
        if journal == FuzzJournal::Replicated && (mix >> 20) % 3 == 0 {
            // The leader is lost in the first 4 s of virtual time (a run's appends span a few
            // seconds: commits are timed by the 1 s interval and by syncs): appends wait
            // 500 ms for the election, commits queue behind them, and crash states fall inside
            // the wait.
            r.leader_loss = Some(((mix >> 24) % 4_000 * 1_000_000, 500_000_000));
        }
    }
    let j_dev: Option<Arc<dyn Device>> = match &j0 {
        Some(j) => Some(Arc::new(rec.device("journal", snap(j)?))),
        None => None,
    };
    let mut w = World::mount(fs_dev, j_dev, wc).map_err(|e| format!("mount: {e}"))?;
    if let Some(server) = w.server.as_ref().filter(|_| mix >> 62 == 0) {
        // One remote run in four loses its server after a few appends: the host falls back to
        // its local journal, and the crash states span the switch. (From the seed, as above.)
        server.lock().unwrap_or_else(|e| e.into_inner()).die_after = Some(2 + (mix >> 32) as usize % 12);
    }
    let mut files: BTreeMap<String, History> = BTreeMap::new();
    let mut inos: Vec<(String, u32)> = Vec::new();
    let overwritten = vec!["/ow".to_string()];
    let root = w.fs.root();
    let nfiles = 2 + rng.below(3) as usize;
    for i in 0..=nfiles {
        let name = if i == nfiles { "/ow".to_string() } else { format!("/s{i}") };
        let at = rec.event_count();
        let ino = w.settle(|fs| fs.create(root, &name.as_bytes()[1..], 0o644)).map_err(|e| format!("create: {e}"))?.ino;
        files.insert(name.clone(), History::new(at));
        inos.push((name, ino));
    }
    let mut ops = 15 + rng.below(45) as usize;
    if lazy {
        // Long enough for logs to fill past 80%: they are swapped (with a quiet spell, any
        // crowded one), beside commits.
        ops += 80;
    }
    for k in 0..ops {
        if manylogs && rng.chance(0.3) {
            // Large I/O elsewhere: the head moves, and commits go to another group's log.
            let group = rng.below(4) * 2;
            w.fs.hint_position(group * MANYLOGS_GROUP as u64 + 100);
        }
        let (name, ino) = inos[rng.below(inos.len() as u64) as usize].clone();
        let cur = files[&name].versions.last().expect("a version").1.clone();
        let mut len = [1, 100, 128, 700, 3000, 4096, 6000][rng.below(7) as usize];
        if manylogs && rng.chance(0.25) {
            // Larger writes, so that more blocks are owed than the 64-block cache holds: some
            // are parked in their logs, and checkpoints copy them home.
            len = [16_384, 40_000][rng.below(2) as usize];
        }
        let off = if name == "/ow" { rng.below(cur.len() as u64 + 2000) } else { cur.len() as u64 };
        let byte = b'A' + (k % 26) as u8;
        let data = vec![byte; len];
        let at = rec.event_count();
        match w.settle(|fs| fs.write(ino, off, &data)) {
            Ok(_) => {}
            Err(FsError::NoSpace) => break,
            Err(e) => return Err(format!("seed {seed}: write: {e}")),
        }
        let mut v = cur;
        if v.len() < off as usize + len {
            v.resize(off as usize + len, 0);
        }
        v[off as usize..off as usize + len].copy_from_slice(&data);
        files.get_mut(&name).expect("file").versions.push((at, v));
        if rng.chance(0.6) {
            if let Some(tid) = w.fs.sync_target(ino, rng.chance(0.5)) {
                w.kick();
                while w.fs.committed_tid() < tid {
                    if !w.step(u64::MAX, &mut |_, _| {}) {
                        return Err(format!("seed {seed}: the journal stopped before a sync completed"));
                    }
                }
            }
            let h = files.get_mut(&name).expect("file");
            let v = h.versions.len() - 1;
            h.acks.push((rec.event_count(), v));
        }
        if rng.chance(0.3) {
            // Let virtual time pass: commit intervals and age-based checkpoints fire.
            let t = w.now() + rng.below(1_500_000_000);
            w.run(t, &mut |_, _| {});
        } else if rng.chance(0.4) {
            // A few milliseconds: the next operations may find a checkpoint still in flight
            // and commit beside it.
            let t = w.now() + rng.below(20_000_000);
            w.run(t, &mut |_, _| {});
        }
    }
    let events = rec.event_count();
    let server = w.server.as_ref().map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).clone());
    let overlaps = w.fs.counters().overlaps;
    let copied = w.fs.checkpoint_counts().copied;
    let swaps = w.fs.near_head().map_or(0, |n| n.swaps);
    let snapshots = w.fs.counters().snapshots;
    let fallbacks = w.fs.counters().fallbacks;
    let (in_place, in_place_tagged) = (w.fs.counters().commit_in_place_blocks, w.fs.counters().commit_in_place_tagged_blocks);
    drop(w);
    let mut report = RunReport { seed, mode: cfg.name(), journal: journal.name(), ops, events, states: 0, violations: Vec::new(), overlaps, copied, swaps, snapshots, fallbacks, batch_for_bytes, in_place, in_place_tagged };
    for p in 0..points {
        // Crash points: uniform over the run, with some right after flushes and acks.
        let k = if p % 3 == 2 {
            let acks: Vec<usize> = files.values().flat_map(|h| h.acks.iter().map(|a| a.0)).collect();
            if acks.is_empty() { rng.below(events as u64 + 1) as usize } else { acks[rng.below(acks.len() as u64) as usize] }
        } else {
            rng.below(events as u64 + 1) as usize
        };
        let pending = rec.unflushed(k);
        let fates: Vec<TearPlan> = pending
            .iter()
            .map(|_| match rng.below(3) {
                0 => TearPlan::Keep,
                1 => TearPlan::Lose,
                _ => TearPlan::Torn(rng.next_u64()),
            })
            .collect();
        // Each NVM line not yet persisted keeps none of its stores, all of them or a random
        // prefix, a third of the time each (whole lines kept or lost apart are what a missing
        // fence exposes). Drawn only on nvm runs, so the other runs' draws stay as they were.
        let lines: Vec<u32> = if journal == FuzzJournal::Nvm {
            rec.nvm_pending(k)
                .iter()
                .map(|l| match rng.below(3) {
                    0 => 0,
                    1 => l.pending,
                    _ => rng.below(l.pending as u64 + 1) as u32,
                })
                .collect()
        } else {
            Vec::new()
        };
        let mut label = format!("after event {k} of {events}, {} unflushed writes", pending.len());
        if journal == FuzzJournal::Nvm {
            label.push_str(&format!(", {} NVM lines cut", lines.len()));
        }
        // The server holds what it acknowledged by then, and in some states the append in
        // flight too (written on the server, its acknowledgement lost).
        let held = server.as_ref().map(|s| {
            let in_flight = rng.chance(0.5);
            label.push_str(if in_flight { ", the server's append in flight kept" } else { ", the server's append in flight lost" });
            s.at(k, in_flight)
        });
        let st = CrashState { after_events: k, fates, nvm: lines, label };
        let mut images = rec.build(&st);
        let jimg = if external { Some(images.remove(1)) } else { None };
        let fimg = images.remove(0);
        let crashed = Crashed { fs: fimg, journal: jimg, nvm: (journal == FuzzJournal::Nvm).then(|| rec.build_nvm(&st).remove(0)), server: held };
        report.states += 1;
        if let Err(e) = recover_and_check(cfg, &files, &overwritten, k, crashed) {
            // Why recovery found damage, if it did: from the crashed image built again (the
            // failed mount recorded the damage in it).
            let mut again = rec.build(&st);
            if let Ok(dir) = std::env::var("OKEANOS_FUZZ_DUMP") {
                // The crashed images, for `okeanos journal dump` and `okeanos fsck -n`.
                let _ = std::fs::write(format!("{dir}/fs-{seed}-{k}.img"), &again[0]);
                if external {
                    let _ = std::fs::write(format!("{dir}/journal-{seed}-{k}.img"), &again[1]);
                }
            }
            let j = external.then(|| Arc::new(MemDevice::from_bytes(again.remove(1))) as Arc<dyn Device>);
            let dump = okeanos::inspect::dump_journal(Arc::new(MemDevice::from_bytes(again.remove(0))) as Arc<dyn Device>, j);
            let why = dump.ok().and_then(|d| d.damage).map_or(String::new(), |d| format!(" (damage: {})", d.reason));
            report.violations.push(format!("seed {seed} ({}, {} journal): {}: {e}{why}", cfg.name(), journal.name(), st.label));
        }
    }
    Ok(report)
}

/// What a crash left: the disks' images, the NVM's, the server's log.
struct Crashed {
    fs: Vec<u8>,
    journal: Option<Vec<u8>>,
    nvm: Option<Vec<u8>>,
    server: Option<MemLog>,
}

fn recover_and_check(cfg: ContentConfig, files: &BTreeMap<String, History>, overwritten: &[String], k: usize, crashed: Crashed) -> Result<(), String> {
    let fs_dev: Arc<dyn Device> = Arc::new(MemDevice::from_bytes(crashed.fs));
    let j_dev: Option<Arc<dyn Device>> = crashed.journal.map(|j| Arc::new(MemDevice::from_bytes(j)) as Arc<dyn Device>);
    let mut opts = MountOptions::default().content_config(cfg);
    if let Some(b) = crashed.nvm {
        opts.nvm = Some(NvmHandle(Arc::new(MemNvm::from_bytes(b)) as Arc<dyn Nvm>));
    }
    if let Some(log) = crashed.server {
        let log = Arc::new(Mutex::new(log));
        opts.remote_connector = Some(okeanos::remote::Connector(Arc::new(move |_| Ok(Box::new(MemServer::new(log.clone(), None)) as Box<dyn okeanos::remote::Link>))));
        opts.remote_host = Some("sim".into());
    }
    let fs = Okeanos::mount(fs_dev.clone(), j_dev.clone(), opts).map_err(|e| format!("recovery mount: {e}"))?;
    check(cfg.mode, files, overwritten, k, &fs)?;
    fs.unmount().map_err(|e| format!("unmount: {e}"))?;
    let r = fsck(fs_dev, j_dev);
    if !r.is_clean() {
        return Err(format!("fsck: {:?}", r.problems));
    }
    Ok(())
}

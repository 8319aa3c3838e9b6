//! The manylogs paper's lazy checkpoint (Fig. 7, section VI "Checkpoint") inside the file
//! system: small synced writes for a while on a manylogs disk with `checkpoint=lazy`, then one
//! forced checkpoint of everything (`okeanos checkpoint`), timed. Reported: how long that
//! checkpoint took, split into reading the logs (blocks parked out of the cache are copied home
//! from them) and writing home; how many blocks were logged against how many went home (the
//! overwrites a lazy checkpoint skips: the paper's "block writes reduced"); and how many device
//! writes the home blocks took once adjacent ones merged (its "I/Os reduced"). Beside it, the
//! same writes with `checkpoint=periodic` (ext3's 5 s / 30 s writeback), whose checkpoints run
//! during the writes: the home writes a lazy checkpoint saves.
//!
//! The writes: `writers` files of `file_bytes` each, scattered over the disk's groups; each
//! writer issues 4 KiB writes at `rate / writers` per second, synced, each one the block after
//! its previous with probability `sequential` (short sequential runs, as in the traces), else
//! with probability `hot` one of the first `hot_blocks` blocks of its file (overwrites), else
//! anywhere in it.

use super::nearhead::{make_file, world, Scheme, Spec as DiskSpec};
use super::rng::Rng;
use super::world::{Wake, World};
use okeanos::device::SparseDevice;
use okeanos::fs::mkfs::MkfsOptions;
use okeanos::fs::FsError;
use okeanos::models;
use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Spec {
    /// `checkpoint=lazy` (the run the paper measures) or periodic (its comparison).
    pub lazy: bool,
    pub disk: String,
    pub disk_bytes: Option<u64>,
    pub writers: usize,
    pub file_bytes: u64,
    pub rate: u64,
    pub duration: Duration,
    pub sequential: f64,
    pub hot: f64,
    pub hot_blocks: u64,
    /// The buffer cache, in blocks: smaller than what is logged, so blocks are parked.
    pub cache_blocks: usize,
    pub seed: u64,
    /// Swap crowded logs (`log_swap=`; only with the lazy checkpoint).
    pub log_swap: bool,
}

impl Spec {
    pub fn new(lazy: bool) -> Spec {
        Spec {
            lazy,
            disk: "cheetah15k5-146".into(),
            disk_bytes: None,
            writers: 20,
            file_bytes: 64 << 20,
            rate: 200,
            duration: Duration::from_secs(60),
            sequential: 0.5,
            hot: 0.5,
            hot_blocks: 256,
            cache_blocks: 8192,
            seed: 1,
            log_swap: true,
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    pub checkpoint: &'static str,
    pub writes: u64,
    /// Data and metadata blocks logged during the writes (whole blocks in the logs).
    pub logged_blocks: u64,
    /// Blocks written home during the writes (periodic checkpoints), and by the final one.
    pub home_during: u64,
    pub home_final: u64,
    /// Device writes the final checkpoint's home blocks took, adjacent ones merged.
    pub final_writes: u64,
    /// Of the final checkpoint's blocks, those copied from logs (parked out of the cache).
    pub final_copied: u64,
    /// Logged copies of released transactions never written home: superseded by a newer copy,
    /// or freed (the paper's "block writes reduced").
    pub skipped: u64,
    /// The final checkpoint's virtual time, and the part the disk spent reading logs.
    pub final_ns: u64,
    pub final_read_ns: u64,
    pub sync_mean_ns: u64,
    /// Log swaps during the writes, and the log blocks they moved.
    pub swaps: u64,
    pub swap_blocks: u64,
}

fn disk_spec(spec: &Spec) -> DiskSpec {
    let mut d = DiskSpec::paper(Scheme::Manylogs, spec.rate);
    d.disk = spec.disk.clone();
    d.disk_bytes = spec.disk_bytes;
    d.writers = spec.writers;
    d.file_bytes = spec.file_bytes;
    d.seed = spec.seed;
    d
}

pub fn run(spec: &Spec) -> Result<Outcome, String> {
    if spec.writers == 0 || spec.file_bytes < 4096 || spec.rate == 0 {
        return Err("lazy checkpoint: writers, file size and rate must be positive".into());
    }
    const BS: u64 = 4096;
    let d = disk_spec(spec);
    let capacity = models::preset(&d.disk)?.capacity();
    let disk_bytes = d.disk_bytes.unwrap_or(capacity).min(capacity) / BS * BS;
    let fs = Arc::new(SparseDevice::new(disk_bytes).named("sim-disk"));
    let mkfs = MkfsOptions { manylogs: true, blocks_per_group: Some((d.group_bytes / BS) as u32), log_area_blocks: (d.log_bytes / BS) as u32, ..Default::default() };
    okeanos::Okeanos::mkfs(fs.as_ref(), None, &mkfs).map_err(|e| e.to_string())?;
    let files = {
        let mut w = world(&d, fs.clone(), None, |_| {})?;
        let files = (0..spec.writers).map(|i| make_file(&mut w, &format!("w{i:02}"), spec.file_bytes)).collect::<Result<Vec<u32>, String>>()?;
        w.sync_all(&mut |_, _| {}).map_err(|e| format!("setup: {e}"))?;
        w.fs.clone().unmount().map_err(|e| format!("setup unmount: {e}"))?;
        files
    };
    let mut w = world(&d, fs.clone(), None, |o| {
        o.lazy_checkpoint = spec.lazy;
        o.cache_blocks = spec.cache_blocks;
        o.log_swap = spec.log_swap;
    })?;
    let before = w.fs.counters();
    let cp_before = w.fs.checkpoint_counts();
    let t0 = w.now();
    let end = t0 + spec.duration.as_nanos() as u64;
    let interval = 1_000_000_000 * spec.writers as u64 / spec.rate;
    let blocks = spec.file_bytes / BS;
    let mut rngs: Vec<Rng> = (0..spec.writers).map(|i| Rng::new(spec.seed).fork(i as u64)).collect();
    let last: RefCell<Vec<u64>> = RefCell::new(vec![0; spec.writers]);
    let started: RefCell<Vec<u64>> = RefCell::new(vec![0; spec.writers]);
    let latencies: RefCell<Vec<u64>> = RefCell::new(Vec::new());
    let error: RefCell<Option<String>> = RefCell::new(None);
    let record = vec![0x3cu8; BS as usize];
    for (i, r) in rngs.iter_mut().enumerate() {
        w.at(t0 + r.below(interval), Wake { client: i, tag: 0 });
    }
    let mut client = |w: &mut World, wake: Wake| {
        let now = w.now();
        let i = wake.client;
        if wake.tag == 1 {
            latencies.borrow_mut().push(now - started.borrow()[i]);
            w.at((started.borrow()[i] + interval).max(now), Wake { client: i, tag: 0 });
            return;
        }
        if now >= end {
            return;
        }
        let r = &mut rngs[i];
        let block = if r.chance(spec.sequential) {
            (last.borrow()[i] + 1) % blocks
        } else if r.chance(spec.hot) {
            r.below(spec.hot_blocks.min(blocks))
        } else {
            r.below(blocks)
        };
        match w.fs.write(files[i], block * BS, &record) {
            Ok(_) => {}
            Err(FsError::WouldBlock) => return w.wait_journal(wake),
            Err(e) => {
                error.borrow_mut().get_or_insert(format!("writer {i}: {e}"));
                return;
            }
        }
        last.borrow_mut()[i] = block;
        started.borrow_mut()[i] = now;
        match w.fs.sync_target(files[i], true) {
            Some(tid) => w.wait_commit(tid, Wake { client: i, tag: 1 }),
            None => {
                latencies.borrow_mut().push(0);
                w.at(now + interval, Wake { client: i, tag: 0 });
            }
        }
    };
    w.run(end, &mut client);
    let mid = w.fs.checkpoint_counts();
    let during = w.fs.counters().since(&before);
    let read0 = w.copy_read_ns();
    let final_ns = w.checkpoint_all(&mut client).map_err(|e| format!("checkpoint: {e}"))?;
    if let Some(e) = error.into_inner().or(w.error.clone()) {
        return Err(e);
    }
    let (whole, end) = (w.fs.checkpoint_counts().since(&cp_before), w.fs.checkpoint_counts().since(&mid));
    let lat = latencies.into_inner();
    Ok(Outcome {
        checkpoint: if spec.lazy { "lazy" } else { "periodic" },
        writes: lat.len() as u64,
        logged_blocks: during.journal_data.blocks + during.journal_meta.blocks,
        home_during: mid.since(&cp_before).blocks,
        home_final: end.blocks,
        final_writes: end.runs,
        final_copied: end.copied,
        skipped: whole.skipped,
        final_ns,
        final_read_ns: w.copy_read_ns() - read0,
        sync_mean_ns: if lat.is_empty() { 0 } else { lat.iter().sum::<u64>() / lat.len() as u64 },
        swaps: during.log_swaps,
        swap_blocks: during.log_swap.blocks,
    })
}

//! The mixed workload in virtual time (the manylogs paper, section V-A.1): a large sequential
//! reader or writer on the file-system disk — outside the file system, as another tenant of
//! the disk — runs alone, then beside N rate-limited small writers that write at random
//! offsets of their own preallocated files and sync after each write. Reports the large
//! stream's bandwidth alone and shared, and the small writers' counters and sync latency.

use okeanos::models::Op;
use super::rng::Rng;
use super::world::{Wake, World, WorldConfig};
use okeanos::fs::mkfs::MkfsOptions;
use okeanos::fs::FsError;
use okeanos::stats::Counters;
use okeanos::workload::{Multistream, SyncKind};
use std::cell::{Cell, RefCell};

#[derive(Debug, Clone)]
pub struct Large {
    pub read: bool,
    pub request: u64,
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub alone_bps: f64,
    pub mixed_bps: f64,
    pub during: Counters,
    pub after: Counters,
    pub virtual_s: f64,
    pub writes: u64,
    pub error: Option<String>,
}

const LARGE: usize = usize::MAX - 1;
const WRITE: u32 = 0;
const SYNCED: u32 = 1;

/// Runs the large stream (client `LARGE`) on the world's fs disk: the next request when the
/// last completes. Returns bytes moved by `until`.
fn large_step(w: &mut World, l: &Large, pos: &Cell<u64>, moved: &Cell<u64>, base: u64, span: u64, phase: u32) {
    let op = if l.read { Op::Read } else { Op::Write };
    let off = base + pos.get() % span;
    let done = w.raw_io(op, off, l.request);
    pos.set(pos.get() + l.request);
    moved.set(moved.get() + l.request);
    w.at(done, Wake { client: LARGE, tag: phase });
}

/// `make` builds a fresh configuration (devices are formatted with `mkfs` once and remounted
/// after the setup, so the preallocation is checkpointed before anything is measured).
pub fn run(make: &dyn Fn() -> WorldConfig, mkfs: &MkfsOptions, spec: &Multistream, large: &Large, file_size: u64, seed: u64) -> Result<Outcome, String> {
    spec.check()?;
    if large.request == 0 || file_size < spec.size as u64 {
        return Err("the large request and the file size must be positive and hold a request".into());
    }
    // Setup: preallocate the small writers' files, then unmount (everything checkpointed).
    let (fs_dev, j_dev) = World::format(&make(), mkfs).map_err(|e| e.to_string())?;
    let mut inos = Vec::new();
    {
        let mut w = World::mount(fs_dev.clone(), j_dev.clone(), make()).map_err(|e| e.to_string())?;
        let root = w.fs.root();
        let chunk = vec![0u8; 1 << 20];
        for i in 0..spec.streams {
            let ino = w.settle(|fs| fs.create(root, format!("small-{i:05}").as_bytes(), 0o644)).map_err(|e| format!("setup: {e}"))?.ino;
            let mut off = 0;
            while off < file_size {
                let len = (file_size - off).min(chunk.len() as u64) as usize;
                w.settle(|fs| fs.write(ino, off, &chunk[..len])).map_err(|e| format!("setup: {e}"))?;
                off += len as u64;
            }
            inos.push(ino);
        }
        w.sync_all(&mut |_, _| {}).map_err(|e| format!("setup: {e}"))?;
        let fs = w.fs.clone();
        fs.unmount().map_err(|e| format!("setup unmount: {e}"))?;
    }
    let mut w = World::mount(fs_dev, j_dev, make()).map_err(|e| e.to_string())?;
    // The large stream's region: the middle of the disk, beyond the file system.
    let cap = w.fs_model_capacity();
    let base = (cap / 2).max(fs_bytes(&w)) / 4096 * 4096;
    let span = (cap - base).min(64 << 30) / large.request * large.request;
    let (pos, moved) = (Cell::new(0u64), Cell::new(0u64));
    let dur = spec.duration.as_nanos() as u64;
    // Phase 1: alone.
    let t0 = w.now();
    w.at(t0, Wake { client: LARGE, tag: 0 });
    let mut alone_client = |w: &mut World, wake: Wake| {
        if wake.client == LARGE && w.now() < t0 + dur {
            large_step(w, large, &pos, &moved, base, span, 0)
        }
    };
    w.run(t0 + dur, &mut alone_client);
    let alone_bytes = moved.get();
    // Phase 2: with the small writers.
    let base_counters = w.fs.counters();
    let t1 = w.now();
    let end = t1 + dur;
    moved.set(0);
    let interval = spec.rate.interval(spec.size).map(|d| d.as_nanos() as u64);
    let rng = Rng::new(seed);
    let mut rngs: Vec<Rng> = (0..spec.streams).map(|i| rng.fork(i as u64)).collect();
    let slots = (file_size / spec.size as u64).max(1);
    let record = vec![0xa5u8; spec.size];
    let started: RefCell<Vec<u64>> = RefCell::new(vec![0; spec.streams]);
    let last_write: RefCell<Vec<u64>> = RefCell::new(vec![0; spec.streams]);
    let (writes, pending) = (Cell::new(0u64), Cell::new(0usize));
    let error: RefCell<Option<String>> = RefCell::new(None);
    let datasync = spec.sync == SyncKind::Fdatasync;
    w.at(t1, Wake { client: LARGE, tag: 1 });
    for (i, r) in rngs.iter_mut().enumerate() {
        let phase = r.below(interval.unwrap_or(1_000_000).max(1));
        w.at(t1 + phase, Wake { client: i, tag: WRITE });
    }
    let mut client = |w: &mut World, wake: Wake| {
        let now = w.now();
        if wake.client == LARGE {
            // Phase 1's last request completing late is not phase 2's stream.
            if wake.tag == 1 && now < end {
                large_step(w, large, &pos, &moved, base, span, 1);
            }
            return;
        }
        let i = wake.client;
        if wake.tag == SYNCED {
            w.fs.record_sync(now - started.borrow()[i]);
            pending.set(pending.get() - 1);
        } else {
            if now >= end {
                return;
            }
            let off = rngs[i].below(slots) * spec.size as u64;
            match w.fs.write(inos[i], off, &record) {
                Ok(_) => {}
                Err(FsError::WouldBlock) => return w.wait_journal(wake),
                Err(e) => {
                    error.borrow_mut().get_or_insert(format!("small writer {i}: {e}"));
                    return;
                }
            }
            writes.set(writes.get() + 1);
            last_write.borrow_mut()[i] = now;
            if let Some(tid) = w.fs.sync_target(inos[i], datasync) {
                started.borrow_mut()[i] = now;
                pending.set(pending.get() + 1);
                return w.wait_commit(tid, Wake { client: i, tag: SYNCED });
            }
            w.fs.record_sync(0);
        }
        let next = interval.map_or(now, |iv| last_write.borrow()[i] + iv);
        w.at(next, Wake { client: i, tag: WRITE });
    };
    w.run(end, &mut client);
    while pending.get() > 0 && w.step(u64::MAX, &mut client) {}
    let mixed_bytes = moved.get();
    let during = w.fs.counters().since(&base_counters);
    w.finish(&mut client).map_err(|e| format!("final sync: {e}"))?;
    let fs = w.fs.clone();
    fs.unmount().map_err(|e| format!("unmount: {e}"))?;
    let after = w.fs.counters().since(&base_counters);
    let secs = dur as f64 / 1e9;
    Ok(Outcome { alone_bps: alone_bytes as f64 / secs, mixed_bps: mixed_bytes as f64 / secs, during, after, virtual_s: secs, writes: writes.get(), error: error.into_inner() })
}

fn fs_bytes(w: &World) -> u64 {
    let s = w.fs.statfs();
    s.blocks * s.block_size as u64
}

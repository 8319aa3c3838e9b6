//! The multistream workload in virtual time: N streams, each appending requests of size R to
//! its own file at a rate (or in a closed loop) with a sync after every k writes — the
//! papers' microbenchmark (Okeanos paper section 6, thesis chapter 6). A stream is a state
//! machine woken by the world, not a thread, so thousands cost little.

use super::rng::Rng;
use super::world::{Wake, World};
use okeanos::fs::FsError;
use okeanos::stats::Counters;
use okeanos::workload::{Multistream, SyncKind};
use std::cell::{Cell, RefCell};

const WRITE: u32 = 0;
const SYNCED: u32 = 1;

struct Stream {
    ino: u32,
    off: u64,
    /// When the journal first turned the stream's pending write away (no room, or its
    /// transaction full), until the write goes in.
    blocked_since: Option<u64>,
    last_write_ns: u64,
    sync_started: Option<u64>,
    since_sync: usize,
    record: Vec<u8>,
    done: bool,
}

/// A finished run.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Counters when the last sync of the measured period returned (setup excluded).
    pub during: Counters,
    /// Counters after the final sync, checkpoint and unmount (setup excluded).
    pub after: Counters,
    /// Virtual seconds of the measured period (to the last sync's return).
    pub virtual_s: f64,
    pub writes: u64,
    pub journal_steps: u64,
    /// Writes the journal turned away before they went in, and how long they waited: time
    /// outside the sync latency, which starts at the sync call.
    pub write_waits: WriteWaits,
    /// The first error a stream met, if any.
    pub error: Option<String>,
}

/// Writes that waited for the journal to take them (measured period), in virtual time.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct WriteWaits {
    pub count: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

impl WriteWaits {
    fn of(mut ns: Vec<u64>) -> WriteWaits {
        if ns.is_empty() {
            return WriteWaits::default();
        }
        ns.sort_unstable();
        let at = |q: f64| ns[((ns.len() - 1) as f64 * q).round() as usize] as f64 / 1e3;
        WriteWaits { count: ns.len() as u64, p50_us: at(0.5), p99_us: at(0.99), max_us: at(1.0) }
    }
}

/// Creates the stream files (setup, committed before the measured period).
fn setup(w: &mut World, n: usize, prefix: &str) -> Result<Vec<u32>, String> {
    let root = w.fs.root();
    let dir = w.settle(|fs| fs.mkdir(root, prefix.as_bytes(), 0o755)).map_err(|e| format!("setup: {e}"))?.ino;
    let mut inos = Vec::with_capacity(n);
    for i in 0..n {
        let name = format!("stream-{i:05}");
        inos.push(w.settle(|fs| fs.create(dir, name.as_bytes(), 0o644)).map_err(|e| format!("setup: create {name}: {e}"))?.ino);
    }
    w.sync_all(&mut |_, _| {}).map_err(|e| format!("setup: {e}"))?;
    Ok(inos)
}

/// Runs the workload on a freshly formatted world and unmounts it.
pub fn run(mut w: World, spec: &Multistream, seed: u64) -> Result<Outcome, String> {
    spec.check()?;
    let inos = setup(&mut w, spec.streams, "ms")?;
    let base = w.fs.counters();
    let t0 = w.now();
    let end = t0 + spec.duration.as_nanos() as u64;
    let interval = spec.rate.interval(spec.size).map(|d| d.as_nanos() as u64);
    let rng = Rng::new(seed);
    let mut streams: Vec<Stream> = inos
        .iter()
        .enumerate()
        .map(|(i, &ino)| Stream { ino, off: 0, blocked_since: None, last_write_ns: 0, sync_started: None, since_sync: 0, record: vec![b'a' + (i % 26) as u8; spec.size], done: false })
        .collect();
    for i in 0..streams.len() {
        // Streams start at random phases within one period (a millisecond in a closed loop).
        let phase = rng.fork(i as u64).below(interval.unwrap_or(1_000_000).max(1));
        w.at(t0 + phase, Wake { client: i, tag: WRITE });
    }
    let datasync = spec.sync == SyncKind::Fdatasync;
    let writes = Cell::new(0u64);
    let error: RefCell<Option<String>> = RefCell::new(None);
    let pending_syncs = Cell::new(0usize);
    let waits: RefCell<Vec<u64>> = RefCell::new(Vec::new());
    let last_sync_return = Cell::new(t0);
    {
        let mut client = |w: &mut World, wake: Wake| {
            let s = &mut streams[wake.client];
            let now = w.now();
            if wake.tag == SYNCED {
                let started = s.sync_started.take().expect("a sync was pending");
                w.fs.record_sync(now - started);
                pending_syncs.set(pending_syncs.get() - 1);
                last_sync_return.set(now);
            } else {
                if now >= end || s.done {
                    s.done = true;
                    return;
                }
                match w.fs.write(s.ino, s.off, &s.record) {
                    Ok(_) => {}
                    Err(FsError::WouldBlock) => {
                        s.blocked_since.get_or_insert(now);
                        return w.wait_journal(wake);
                    }
                    Err(e) => {
                        error.borrow_mut().get_or_insert(format!("stream {}: write: {e}", wake.client));
                        s.done = true;
                        return;
                    }
                }
                if let Some(since) = s.blocked_since.take() {
                    waits.borrow_mut().push(now - since);
                }
                writes.set(writes.get() + 1);
                s.off += s.record.len() as u64;
                s.last_write_ns = now;
                s.since_sync += 1;
                if s.since_sync >= spec.sync_every {
                    s.since_sync = 0;
                    match w.fs.sync_target(s.ino, datasync) {
                        Some(tid) => {
                            s.sync_started = Some(now);
                            pending_syncs.set(pending_syncs.get() + 1);
                            return w.wait_commit(tid, Wake { client: wake.client, tag: SYNCED });
                        }
                        None => w.fs.record_sync(0),
                    }
                }
            }
            let next = match interval {
                Some(iv) => s.last_write_ns + iv,
                None => now,
            };
            w.at(next, Wake { client: wake.client, tag: WRITE });
        };
        w.run(end, &mut client);
        // Let the syncs in flight at the end return; streams write no more.
        while pending_syncs.get() > 0 && w.step(u64::MAX, &mut client) {}
        if let Some(e) = &w.error {
            error.borrow_mut().get_or_insert(e.clone());
        }
        let during = w.fs.counters().since(&base);
        let write_waits = WriteWaits::of(waits.take());
        let virtual_s = (last_sync_return.get().max(end) - t0) as f64 / 1e9;
        w.finish(&mut client).map_err(|e| format!("final sync: {e}"))?;
        let steps = w.steps;
        let fs = w.fs.clone();
        fs.unmount().map_err(|e| format!("unmount: {e}"))?;
        let after = w.fs.counters().since(&base);
        Ok(Outcome { during, after, virtual_s, writes: writes.get(), journal_steps: steps, write_waits, error: error.into_inner() })
    }
}

//! An IOzone-like test in virtual time (UBJ's Figure 11): one file of a given size written
//! through, in 4 KiB requests, sequentially or at random offsets (each block once, in a seeded
//! order), with an fsync every `sync_every` requests and one at the end; the throughput is the
//! file size over the virtual time to the last fsync's return. Writes are buffered: they take
//! no time unless the journal makes them wait (a full transaction, no journal space), so the
//! journal's commit and checkpoint traffic is what the result measures.

use super::rng::Rng;
use super::world::{Wake, World};
use okeanos::fs::FsError;
use okeanos::stats::Counters;
use std::cell::{Cell, RefCell};

#[derive(Debug, Clone)]
pub struct Spec {
    pub file_bytes: u64,
    pub request: usize,
    pub random: bool,
    /// Requests between fsyncs (0: only at the end).
    pub sync_every: usize,
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub virtual_s: f64,
    pub writes: u64,
    pub during: Counters,
    pub after: Counters,
    pub error: Option<String>,
}

const WRITE: u32 = 0;
const SYNCED: u32 = 1;

/// Runs the test on a freshly formatted world and unmounts it.
pub fn run(mut w: World, spec: &Spec, seed: u64) -> Result<Outcome, String> {
    if spec.request == 0 || spec.file_bytes < spec.request as u64 {
        return Err("the file must hold at least one request".into());
    }
    let root = w.fs.root();
    let ino = w.settle(|fs| fs.create(root, b"iozone.tmp", 0o644)).map_err(|e| format!("setup: {e}"))?.ino;
    w.sync_all(&mut |_, _| {}).map_err(|e| format!("setup: {e}"))?;
    let n = spec.file_bytes / spec.request as u64;
    let mut order: Vec<u64> = (0..n).collect();
    if spec.random {
        let rng = Rng::new(seed);
        for i in (1..order.len()).rev() {
            let j = rng.fork(i as u64).below(i as u64 + 1) as usize;
            order.swap(i, j);
        }
    }
    let base = w.fs.counters();
    let t0 = w.now();
    let data = vec![0x5au8; spec.request];
    let next = Cell::new(0usize);
    let since = Cell::new(0usize);
    let done_at = Cell::new(None::<u64>);
    let error: RefCell<Option<String>> = RefCell::new(None);
    w.at(t0, Wake { client: 0, tag: WRITE });
    {
        let mut client = |w: &mut World, wake: Wake| {
            let now = w.now();
            if wake.tag == SYNCED && next.get() as u64 >= n {
                done_at.set(Some(now));
                return;
            }
            // Write until a sync is due or the journal makes us wait.
            loop {
                let k = next.get();
                if k as u64 >= n {
                    break;
                }
                match w.fs.write(ino, order[k] * spec.request as u64, &data) {
                    Ok(_) => {}
                    Err(FsError::WouldBlock) => return w.wait_journal(wake),
                    Err(e) => {
                        error.borrow_mut().get_or_insert(format!("write: {e}"));
                        return;
                    }
                }
                next.set(k + 1);
                since.set(since.get() + 1);
                if spec.sync_every > 0 && since.get() >= spec.sync_every {
                    since.set(0);
                    if let Some(tid) = w.fs.sync_target(ino, false) {
                        return w.wait_commit(tid, Wake { client: 0, tag: SYNCED });
                    }
                }
            }
            match w.fs.sync_target(ino, false) {
                Some(tid) => w.wait_commit(tid, Wake { client: 0, tag: SYNCED }),
                None => done_at.set(Some(now)),
            }
        };
        while done_at.get().is_none() && error.borrow().is_none() && w.error.is_none() {
            if !w.step(u64::MAX, &mut client) {
                break;
            }
        }
        if let Some(e) = &w.error {
            error.borrow_mut().get_or_insert(e.clone());
        }
        let end = done_at.get().unwrap_or(w.now());
        let during = w.fs.counters().since(&base);
        w.finish(&mut client).map_err(|e| format!("final sync: {e}"))?;
        let fs = w.fs.clone();
        fs.unmount().map_err(|e| format!("unmount: {e}"))?;
        let after = w.fs.counters().since(&base);
        Ok(Outcome { virtual_s: (end - t0) as f64 / 1e9, writes: next.get() as u64, during, after, error: error.into_inner() })
    }
}

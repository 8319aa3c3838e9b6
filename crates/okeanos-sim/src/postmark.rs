//! A Postmark-like mix in virtual time (Katcher's Postmark as the thesis ran it, section 6.3,
//! with FSL's synchronous writes): a pool of files with sizes drawn from a range, then
//! transactions run by concurrent clients, each transaction a create-or-delete and a
//! read-or-append; every write request is followed by an fdatasync.
//!
//! With `varmail`, each transaction is Filebench's varmail flow instead (a mail server, UBJ's
//! Figures 2 and 8): delete a message; create one and write it, synced; read a whole message
//! and append to it, synced; read a whole message.

use super::rng::Rng;
use super::world::{Wake, World};
use okeanos::fs::FsError;
use okeanos::stats::Counters;
use std::cell::RefCell;
use std::collections::VecDeque;

#[derive(Debug, Clone)]
pub struct Spec {
    pub files: usize,
    pub transactions: usize,
    pub clients: usize,
    /// Read and write request size.
    pub request: usize,
    pub min_file: usize,
    pub max_file: usize,
    /// An fdatasync after every write request (FSL's Postmark, as the thesis ran it); false:
    /// buffered, as the original Postmark and UBJ's Figure 12 — the run then ends with one
    /// sync of everything, and its time counts.
    pub sync: bool,
    /// Filebench's varmail flow instead of Postmark's transactions.
    pub varmail: bool,
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub transactions: u64,
    pub virtual_s: f64,
    pub during: Counters,
    pub after: Counters,
    pub writes: u64,
    pub error: Option<String>,
}

#[derive(Debug, Clone)]
enum Step {
    Create(String),
    /// Write `len` bytes at `off` of the named file, then sync it.
    Write(String, u64, usize),
    Read(String),
    Delete(String),
    /// The transaction is complete.
    Done,
}

struct Pool {
    files: Vec<(String, u64)>,
    next_name: u64,
    started: usize,
    done: u64,
    writes: u64,
    error: Option<String>,
}

impl Pool {
    fn new_name(&mut self) -> String {
        self.next_name += 1;
        format!("pm{:07}", self.next_name)
    }
}

/// Appends the steps writing `size` bytes from `from` in requests of `req`.
fn writes(steps: &mut VecDeque<Step>, name: &str, from: u64, size: usize, req: usize) {
    let mut done = 0;
    while done < size {
        let len = req.min(size - done);
        steps.push_back(Step::Write(name.to_string(), from + done as u64, len));
        done += len;
    }
}

/// One varmail iteration: deletefile; createfile, appendfile, fsync; openfile, readwholefile,
/// appendfile, fsync; openfile, readwholefile (Filebench's varmail.f, sizes from the range).
fn plan_varmail(p: &mut Pool, rng: &mut Rng, spec: &Spec) -> VecDeque<Step> {
    let mut steps = VecDeque::new();
    let size = |rng: &mut Rng| spec.min_file + rng.below((spec.max_file - spec.min_file + 1) as u64) as usize;
    if !p.files.is_empty() {
        let i = rng.below(p.files.len() as u64) as usize;
        let (name, _) = p.files.swap_remove(i);
        steps.push_back(Step::Delete(name));
    }
    let name = p.new_name();
    let s = size(rng);
    steps.push_back(Step::Create(name.clone()));
    writes(&mut steps, &name, 0, s, spec.request);
    p.files.push((name, s as u64));
    let i = rng.below(p.files.len() as u64) as usize;
    let (name, len) = p.files[i].clone();
    steps.push_back(Step::Read(name.clone()));
    let add = size(rng);
    writes(&mut steps, &name, len, add, spec.request);
    p.files[i].1 = len + add as u64;
    let i = rng.below(p.files.len() as u64) as usize;
    steps.push_back(Step::Read(p.files[i].0.clone()));
    steps.push_back(Step::Done);
    steps
}

/// One transaction's steps, with the pool updated as they are planned.
fn plan(p: &mut Pool, rng: &mut Rng, spec: &Spec) -> VecDeque<Step> {
    if spec.varmail {
        return plan_varmail(p, rng, spec);
    }
    let mut steps = VecDeque::new();
    let size = |rng: &mut Rng| spec.min_file + rng.below((spec.max_file - spec.min_file + 1) as u64) as usize;
    if rng.chance(0.5) || p.files.is_empty() {
        let name = p.new_name();
        let s = size(rng);
        steps.push_back(Step::Create(name.clone()));
        writes(&mut steps, &name, 0, s, spec.request);
        p.files.push((name, s as u64));
    } else {
        let i = rng.below(p.files.len() as u64) as usize;
        let (name, _) = p.files.swap_remove(i);
        steps.push_back(Step::Delete(name));
    }
    if !p.files.is_empty() {
        let i = rng.below(p.files.len() as u64) as usize;
        let (name, len) = p.files[i].clone();
        if rng.chance(0.5) {
            steps.push_back(Step::Read(name));
        } else {
            let add = size(rng).min(spec.max_file);
            writes(&mut steps, &name, len, add, spec.request);
            p.files[i].1 = len + add as u64;
        }
    }
    steps.push_back(Step::Done);
    steps
}

/// Runs the mix on a freshly formatted world and unmounts it.
pub fn run(mut w: World, spec: &Spec, seed: u64) -> Result<Outcome, String> {
    if spec.files == 0 || spec.transactions == 0 || spec.clients == 0 || spec.request == 0 || spec.min_file == 0 || spec.min_file > spec.max_file {
        return Err("files, transactions, clients and request size must be positive, and the smallest file no larger than the largest".into());
    }
    let root = w.fs.root();
    let dir = w.settle(|fs| fs.mkdir(root, b"postmark", 0o755)).map_err(|e| format!("setup: {e}"))?.ino;
    let mut rng = Rng::new(seed);
    let pool = RefCell::new(Pool { files: Vec::new(), next_name: 0, started: 0, done: 0, writes: 0, error: None });
    // The initial pool, written without syncs and committed before the measured period.
    for _ in 0..spec.files {
        let mut p = pool.borrow_mut();
        let name = p.new_name();
        let s = spec.min_file + rng.below((spec.max_file - spec.min_file + 1) as u64) as usize;
        let ino = w.settle(|fs| fs.create(dir, name.as_bytes(), 0o644)).map_err(|e| format!("setup: {e}"))?.ino;
        let data = vec![b'p'; s];
        w.settle(|fs| fs.write(ino, 0, &data)).map_err(|e| format!("setup: {e}"))?;
        p.files.push((name, s as u64));
    }
    w.sync_all(&mut |_, _| {}).map_err(|e| format!("setup: {e}"))?;
    let base = w.fs.counters();
    let t0 = w.now();
    let mut queues: Vec<VecDeque<Step>> = vec![VecDeque::new(); spec.clients];
    let mut rngs: Vec<Rng> = (0..spec.clients).map(|i| rng.fork(i as u64)).collect();
    let buf = vec![b'q'; spec.request];
    let mut sync_started = vec![0u64; spec.clients];
    let lookup = |w: &World, name: &str| w.fs.lookup(dir, name.as_bytes()).map(|a| a.ino);
    let mut client = |w: &mut World, wake: Wake| {
        let c = wake.client;
        if wake.tag == 1 {
            // A sync returned.
            w.fs.record_sync(w.now() - sync_started[c]);
            queues[c].pop_front();
        }
        loop {
            if queues[c].is_empty() {
                let mut p = pool.borrow_mut();
                if p.started >= spec.transactions || p.error.is_some() {
                    return;
                }
                p.started += 1;
                queues[c] = plan(&mut p, &mut rngs[c], spec);
            }
            let step = queues[c].front().cloned().expect("a step");
            let r: Result<Option<u32>, FsError> = match &step {
                Step::Create(name) => w.fs.create(dir, name.as_bytes(), 0o644).map(|_| None),
                Step::Delete(name) => w.fs.unlink(dir, name.as_bytes()).map(|_| None),
                Step::Read(name) => lookup(w, name).and_then(|ino| {
                    let size = w.fs.getattr(ino)?.size;
                    let mut off = 0;
                    while off < size {
                        off += w.fs.read(ino, off, spec.request)?.len().max(1) as u64;
                    }
                    Ok(None)
                }),
                Step::Write(name, off, len) => lookup(w, name).and_then(|ino| w.fs.write(ino, *off, &buf[..*len]).map(|_| Some(ino))),
                Step::Done => {
                    pool.borrow_mut().done += 1;
                    Ok(None)
                }
            };
            match r {
                Err(FsError::WouldBlock) => return w.wait_journal(Wake { client: c, tag: 0 }),
                // Another client deleted the file this transaction chose: skip the step.
                Err(FsError::NotFound) if !matches!(step, Step::Create(_)) => {
                    queues[c].pop_front();
                }
                Err(e) => {
                    pool.borrow_mut().error.get_or_insert(format!("client {c}: {step:?}: {e}"));
                    return;
                }
                Ok(Some(ino)) => {
                    pool.borrow_mut().writes += 1;
                    if !spec.sync {
                        queues[c].pop_front();
                        continue;
                    }
                    if let Some(tid) = w.fs.sync_target(ino, true) {
                        sync_started[c] = w.now();
                        return w.wait_commit(tid, Wake { client: c, tag: 1 });
                    }
                    w.fs.record_sync(0);
                    queues[c].pop_front();
                }
                Ok(None) => {
                    queues[c].pop_front();
                }
            }
        }
    };
    for c in 0..spec.clients {
        w.at(t0, Wake { client: c, tag: 0 });
    }
    while pool.borrow().done < spec.transactions as u64 && pool.borrow().error.is_none() {
        if !w.step(u64::MAX, &mut client) {
            break;
        }
        if let Some(e) = &w.error {
            pool.borrow_mut().error.get_or_insert(e.clone());
        }
    }
    if !spec.sync {
        // Buffered: the run ends when everything it wrote is durable.
        w.sync_all(&mut client).map_err(|e| format!("final sync: {e}"))?;
    }
    let virtual_s = (w.now() - t0) as f64 / 1e9;
    let during = w.fs.counters().since(&base);
    w.finish(&mut client).map_err(|e| format!("final sync: {e}"))?;
    let fs = w.fs.clone();
    fs.unmount().map_err(|e| format!("unmount: {e}"))?;
    let after = w.fs.counters().since(&base);
    let p = pool.into_inner();
    Ok(Outcome { transactions: p.done, virtual_s, during, after, writes: p.writes, error: p.error })
}

//! The manylogs paper's microbenchmark (Fig. 2a/2b, section V-A.1) inside the file system: a
//! large sequential reader (or writer) of one big file and small writers that overwrite 4 KiB
//! at random offsets of 20 scattered files and sync after each, at a total rate. The large
//! stream runs through the engine, so every block it reads is a read miss the placement sees
//! (manylogs puts the next commit near it), and its reads are timed on the disk model
//! ([`World::timed_reads`]); its writes are the engine's own in-place writes. The disk is the
//! whole modelled disk (a sparse device), formatted with 100 MB groups: with manylogs each
//! holds a 10 MB log; the baselines keep one journal in the middle of the disk, as the paper's
//! ext3 did.
//!
//! Reported: the large stream's bandwidth alone and beside the writers (its share is the
//! paper's "% of max disk bandwidth"), the writers' sync latency, and for manylogs how many
//! commits landed in the log of the head's group or a neighbour's.
//!
//! The large stream issues the kernel's largest request at a time (`device_request`, 512 KiB
//! by default, Linux's max_sectors_kb), one after another, for each application request of
//! `app_request` bytes: a disk queue serves the small writers' I/O between two of them, as the
//! paper's Linux did.

use super::rng::Rng;
use super::world::{Wake, World, WorldConfig};
use okeanos::device::{Device, MemDevice, SparseDevice};
use okeanos::fs::mkfs::MkfsOptions;
use okeanos::fs::FsError;
use okeanos::journal::content::ContentConfig;
use okeanos::journal::placement::NearHead;
use okeanos::models;
use okeanos::options::MountOptions;
use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::Duration;

/// Which journaling the run uses (the paper's four).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// ext3 ordered: data in place, metadata in one mid-disk journal.
    Ordered,
    /// ext3 data journaling, one mid-disk journal.
    Data,
    /// Adaptive journaling (selective, small writes logged), one mid-disk journal.
    Selective,
    /// Manylogs journaling: selective content in the log nearest the head, lazy checkpoint.
    Manylogs,
}

impl Scheme {
    pub fn parse(s: &str) -> Result<Scheme, String> {
        Ok(match s {
            "ordered" => Scheme::Ordered,
            "data" => Scheme::Data,
            "selective" | "adaptive" => Scheme::Selective,
            "manylogs" => Scheme::Manylogs,
            x => return Err(format!("{x:?}: use ordered, data, selective or manylogs")),
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Scheme::Ordered => "ordered",
            Scheme::Data => "data",
            Scheme::Selective => "selective",
            Scheme::Manylogs => "manylogs",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Spec {
    pub scheme: Scheme,
    /// Disk model preset and the bytes of it the file system takes (None: all of it).
    pub disk: String,
    pub disk_bytes: Option<u64>,
    pub group_bytes: u64,
    pub log_bytes: u64,
    /// The logged-write-size threshold of selective content (the paper's LoggedWriteSize).
    pub logged_write_size: usize,
    /// The large stream: reads (true) or writes of a file of `large_bytes` (each application
    /// request synced before the next, so the writer is paced by the disk).
    pub read: bool,
    pub large_bytes: u64,
    pub app_request: u64,
    pub device_request: u64,
    /// Small writers, their files' size, write size and total rate (writes per second).
    pub writers: usize,
    pub file_bytes: u64,
    pub write_size: usize,
    pub rate: u64,
    /// Virtual time alone, then beside the writers.
    pub duration: Duration,
    pub seed: u64,
    /// Fig. 5 instead of Fig. 2: each writer is a database's commit log, appending
    /// `append_bytes_per_sec` and flushing (fdatasync) every `flush_period`; `durable` makes
    /// the commit logs O_DUR. `rate` and `write_size` are then unused.
    pub commit_log: Option<CommitLog>,
    /// Fig. 4 instead: each writer is a varmail instance.
    pub varmail: Option<Varmail>,
    /// Fig. 4 (top) instead: each writer is a fileserver instance.
    pub fileserver: Option<Fileserver>,
    /// Manylogs: swap crowded logs (`log_swap=`).
    pub log_swap: bool,
}

/// Fig. 4 (bottom): each writer is a varmail-like mail server (Filebench's personality): a
/// directory of mails, cycling through delete, create-append-fsync, read-append-fsync and read,
/// at `ops_per_sec`; the latency reported is the fsyncs'.
#[derive(Debug, Clone, Copy)]
pub struct Varmail {
    pub ops_per_sec: u64,
    pub mails: usize,
    pub append_bytes: usize,
}

/// Fig. 4 (top): each writer is a fileserver-like instance (Filebench's personality, scaled
/// down): a directory of files, cycling through create-and-write-whole, append, read-whole,
/// delete and stat, at `ops_per_sec`, without syncs; the latency reported is the write and
/// append operations', from their first attempt to their return (the paper's wrtfile and
/// appendfile), which is more than nothing only when the journal makes them wait.
#[derive(Debug, Clone, Copy)]
pub struct Fileserver {
    pub ops_per_sec: u64,
    pub files: usize,
    pub whole_bytes: usize,
    pub append_bytes: usize,
}

/// One varmail or fileserver instance's directory as the simulation goes.
struct Mailbox {
    dir: u32,
    /// Its files: number, inode, size.
    mails: Vec<(u64, u32, u64)>,
    next: u64,
    step: u64,
    /// The mail being created or appended to (and its size before), across retries.
    current: Option<(u32, u64)>,
    /// When the operation being retried was first attempted.
    op_started: Option<u64>,
}

/// The next operation of a fileserver instance, retried as a whole after a would-block as
/// varmail's. Returns whether it was a write (its latency counts).
fn fileserver_step(w: &World, b: &mut Mailbox, rng: &mut Rng, whole: &[u8], append: &[u8]) -> Result<bool, FsError> {
    let pick = |rng: &mut Rng, b: &Mailbox| (!b.mails.is_empty()).then(|| rng.below(b.mails.len() as u64) as usize);
    let wrote = match b.step % 5 {
        0 => {
            let ino = match b.current {
                Some((ino, _)) => ino,
                None => {
                    let ino = w.fs.create(b.dir, &mail_name(b.next), 0o644)?.ino;
                    b.mails.push((b.next, ino, 0));
                    b.next += 1;
                    b.current = Some((ino, 0));
                    ino
                }
            };
            w.fs.write(ino, 0, whole)?;
            b.current = None;
            if let Some(m) = b.mails.iter_mut().find(|m| m.1 == ino) {
                m.2 = whole.len() as u64;
            }
            true
        }
        1 => {
            if let Some(k) = pick(rng, b) {
                let (_, ino, size) = b.mails[k];
                w.fs.write(ino, size, append)?;
                b.mails[k].2 = size + append.len() as u64;
            }
            true
        }
        2 => {
            if let Some(k) = pick(rng, b) {
                w.fs.read(b.mails[k].1, 0, b.mails[k].2 as usize)?;
            }
            false
        }
        3 => {
            if let Some(k) = pick(rng, b) {
                w.fs.unlink(b.dir, &mail_name(b.mails[k].0))?;
                b.mails.swap_remove(k);
            }
            false
        }
        _ => {
            if let Some(k) = pick(rng, b) {
                w.fs.getattr(b.mails[k].1)?;
            }
            false
        }
    };
    b.step += 1;
    Ok(wrote)
}

enum MailStep {
    Sync(u32),
    Done,
}

fn mail_name(n: u64) -> Vec<u8> {
    format!("m{n:07}").into_bytes()
}

/// The next operation of a varmail instance (retried as a whole after a would-block: each
/// step changes nothing before its last fallible call, or remembers what it did).
fn varmail_step(w: &World, b: &mut Mailbox, rng: &mut Rng, append: &[u8]) -> Result<MailStep, FsError> {
    let pick = |rng: &mut Rng, b: &Mailbox| (!b.mails.is_empty()).then(|| rng.below(b.mails.len() as u64) as usize);
    let r = match b.step % 4 {
        0 => {
            if let Some(k) = pick(rng, b) {
                w.fs.unlink(b.dir, &mail_name(b.mails[k].0))?;
                b.mails.swap_remove(k);
            }
            MailStep::Done
        }
        1 | 2 => {
            let (ino, size) = match b.current {
                Some(c) => c,
                None if b.step % 4 == 1 => {
                    let ino = w.fs.create(b.dir, &mail_name(b.next), 0o644)?.ino;
                    b.mails.push((b.next, ino, 0));
                    b.next += 1;
                    b.current = Some((ino, 0));
                    (ino, 0)
                }
                None => match pick(rng, b) {
                    Some(k) => {
                        let (_, ino, size) = b.mails[k];
                        w.fs.read(ino, 0, size as usize)?;
                        b.current = Some((ino, size));
                        (ino, size)
                    }
                    None => {
                        b.step += 1;
                        return Ok(MailStep::Done);
                    }
                },
            };
            w.fs.write(ino, size, append)?;
            b.current = None;
            if let Some(m) = b.mails.iter_mut().find(|m| m.1 == ino) {
                m.2 = size + append.len() as u64;
            }
            MailStep::Sync(ino)
        }
        _ => {
            if let Some(k) = pick(rng, b) {
                w.fs.read(b.mails[k].1, 0, b.mails[k].2 as usize)?;
            }
            MailStep::Done
        }
    };
    b.step += 1;
    Ok(r)
}

#[derive(Debug, Clone, Copy)]
pub struct CommitLog {
    pub flush_period: Duration,
    pub append_bytes_per_sec: u64,
    pub durable: bool,
}

impl Spec {
    pub fn paper(scheme: Scheme, rate: u64) -> Spec {
        Spec {
            scheme,
            disk: "cheetah15k5-146".into(),
            disk_bytes: None,
            group_bytes: 100_000_000,
            log_bytes: 10_000_000,
            logged_write_size: 32 << 10,
            read: true,
            large_bytes: 2 << 30,
            app_request: 128 << 20,
            device_request: 512 << 10,
            writers: 20,
            file_bytes: 16 << 20,
            write_size: 4096,
            rate,
            duration: Duration::from_secs(20),
            seed: 1,
            commit_log: None,
            varmail: None,
            fileserver: None,
            log_swap: true,
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    pub scheme: &'static str,
    pub rate: u64,
    pub alone_bps: f64,
    pub shared_bps: f64,
    pub syncs: u64,
    pub sync_mean_ns: u64,
    pub sync_p50_ns: u64,
    pub sync_p99_ns: u64,
    /// Manylogs: commits during the shared phase, and where they landed.
    pub near_head: Option<NearHead>,
    /// Checkpoints during the shared phase.
    pub checkpoints: u64,
    /// Bytes the journal and the final locations took during the shared phase, and blocks
    /// read back from manylogs logs (parked out of the cache).
    pub journal_bytes: u64,
    pub final_bytes: u64,
    pub log_reads: u64,
    /// Commits during the shared phase.
    pub commits: u64,
    /// Fig. 5: the commit logs' flush period and whether they were O_DUR.
    pub flush_period_ns: Option<u64>,
    pub durable: bool,
}

const LARGE: usize = usize::MAX - 1;
const WRITE: u32 = 0;
const SYNCED: u32 = 1;
const BS: u64 = 4096;

fn mount_options(spec: &Spec) -> MountOptions {
    let content = match spec.scheme {
        Scheme::Ordered => "ordered",
        Scheme::Data => "data",
        Scheme::Selective | Scheme::Manylogs => "selective",
    };
    let mut o = MountOptions::default().content_config(ContentConfig::parse(content).expect("a policy name"));
    o.logged_write_size = Some(spec.logged_write_size);
    // The paper's off-hours checkpoint for manylogs; the baselines checkpoint as ext3 does.
    o.lazy_checkpoint = spec.scheme == Scheme::Manylogs;
    o.log_swap = spec.log_swap;
    // A cache that holds a few large requests, not the big file.
    o.cache_blocks = 16384;
    o
}

/// Formats and mounts the disk (its content preserved across the remount after setup).
pub(crate) fn world(spec: &Spec, fs: Arc<SparseDevice>, journal: Option<Arc<dyn Device>>, tweak: impl Fn(&mut MountOptions)) -> Result<World, String> {
    let model = models::preset(&spec.disk)?;
    let capacity = model.capacity();
    let cfg = WorldConfig {
        fs_bytes: fs.len_bytes(),
        external_journal_blocks: journal.as_ref().map(|j| j.len_bytes() / BS),
        journal_blocks: 0,
        fs_model: model,
        journal_model: journal.as_ref().map(|_| models::preset(&spec.disk)).transpose()?,
        mount: {
            let mut o = mount_options(spec);
            tweak(&mut o);
            o
        },
        wall_origin: 1_700_000_000_000_000_000,
        frozen_wall: true,
        remote: None,
        nvm: None,
        // The baselines' one journal: in the middle of the disk.
        journal_at: journal.as_ref().map(|_| capacity / 2 / BS * BS),
        timed_reads: Some(fs.clone()),
    };
    World::mount(fs as Arc<dyn Device>, journal, cfg).map_err(|e| e.to_string())
}

/// Creates `name` in a top-level directory of its own (so that files are scattered over the
/// disk's groups) and writes `bytes` of zeros into it.
pub(crate) fn make_file(w: &mut World, dir: &str, bytes: u64) -> Result<u32, String> {
    let root = w.fs.root();
    let d = w.settle(|fs| fs.mkdir(root, dir.as_bytes(), 0o755)).map_err(|e| format!("setup {dir}: {e}"))?.ino;
    let ino = w.settle(|fs| fs.create(d, b"f", 0o644)).map_err(|e| format!("setup {dir}: {e}"))?.ino;
    let chunk = vec![0u8; 1 << 20];
    let mut off = 0;
    while off < bytes {
        let len = (bytes - off).min(chunk.len() as u64) as usize;
        w.settle(|fs| fs.write(ino, off, &chunk[..len])).map_err(|e| format!("setup {dir}: {e}"))?;
        off += len as u64;
    }
    Ok(ino)
}

pub fn run(spec: &Spec) -> Result<Outcome, String> {
    if spec.writers == 0 || spec.write_size == 0 || spec.device_request < BS || spec.app_request < spec.device_request || spec.large_bytes < spec.app_request {
        return Err("nearhead: writers, write size and requests must be positive, a device request at least a block and at most an application request, the large file at least one".into());
    }
    let capacity = models::preset(&spec.disk)?.capacity();
    let disk_bytes = spec.disk_bytes.unwrap_or(capacity).min(capacity) / BS * BS;
    let fs = Arc::new(SparseDevice::new(disk_bytes).named("sim-disk"));
    let manylogs = spec.scheme == Scheme::Manylogs;
    let journal: Option<Arc<dyn Device>> = (!manylogs).then(|| Arc::new(MemDevice::new(128 << 20).named("sim-journal")) as Arc<dyn Device>);
    let mkfs = MkfsOptions {
        manylogs,
        blocks_per_group: Some((spec.group_bytes / BS) as u32),
        log_area_blocks: if manylogs { (spec.log_bytes / BS) as u32 } else { 0 },
        external_journal: !manylogs,
        journal_blocks: (128 << 20) / BS,
        ..Default::default()
    };
    okeanos::Okeanos::mkfs(fs.as_ref(), journal.as_deref(), &mkfs).map_err(|e| e.to_string())?;
    // Varmail and fileserver instances: a directory each, of this many files of this size.
    let dirs = spec.varmail.map(|v| (v.mails, v.append_bytes)).or(spec.fileserver.map(|f| (f.files, f.whole_bytes)));
    // Setup: the big file and the writers' files, scattered (a directory each), then unmount.
    let (big, small) = {
        let mut w = world(spec, fs.clone(), journal.clone(), |_| {})?;
        let big = make_file(&mut w, "large", spec.large_bytes)?;
        let small_bytes = if spec.commit_log.is_some() { 0 } else { spec.file_bytes };
        let small = match dirs {
            // The mailboxes (or file sets): a directory each, spread over the disk, with their
            // first files.
            Some((files, bytes)) => (0..spec.writers)
                .map(|i| {
                    let root = w.fs.root();
                    let dir = w.settle(|fs| fs.mkdir(root, format!("mail{i:02}").as_bytes(), 0o755)).map_err(|e| format!("setup: {e}"))?.ino;
                    let body = vec![0x4du8; bytes];
                    for n in 0..files as u64 {
                        let ino = w.settle(|fs| fs.create(dir, &mail_name(n), 0o644)).map_err(|e| format!("setup: {e}"))?.ino;
                        w.settle(|fs| fs.write(ino, 0, &body)).map_err(|e| format!("setup: {e}"))?;
                    }
                    Ok(dir)
                })
                .collect::<Result<Vec<u32>, String>>()?,
            None => (0..spec.writers).map(|i| make_file(&mut w, &format!("w{i:02}"), small_bytes)).collect::<Result<Vec<u32>, String>>()?,
        };
        if spec.commit_log.is_some_and(|c| c.durable) {
            for &f in &small {
                w.settle(|fs| fs.set_durable(f, true)).map_err(|e| format!("setup O_DUR: {e}"))?;
            }
        }
        w.sync_all(&mut |_, _| {}).map_err(|e| format!("setup: {e}"))?;
        w.fs.clone().unmount().map_err(|e| format!("setup unmount: {e}"))?;
        (big, small)
    };
    let mut w = world(spec, fs.clone(), journal, |_| {})?;
    fs.note_reads();
    w.timed_reads();
    let dur = spec.duration.as_nanos() as u64;
    let (pos, moved) = (Cell::new(0u64), Cell::new(0u64));
    let large_error: RefCell<Option<String>> = RefCell::new(None);
    let wbuf = vec![0x5au8; spec.device_request as usize];
    // One device request of the large stream; the next when it completes.
    let large_step = |w: &mut World, tag: u32| {
        let off = pos.get() % (spec.large_bytes / spec.device_request * spec.device_request);
        let r = if spec.read {
            w.fs.read(big, off, spec.device_request as usize).map(|_| ())
        } else {
            w.fs.write(big, off, &wbuf).map(|_| ())
        };
        match r {
            Ok(()) => {}
            Err(FsError::WouldBlock) => return w.wait_journal(Wake { client: LARGE, tag }),
            Err(e) => {
                large_error.borrow_mut().get_or_insert(format!("large stream: {e}"));
                return;
            }
        }
        pos.set(pos.get() + spec.device_request);
        moved.set(moved.get() + spec.device_request);
        if !spec.read && pos.get() % spec.app_request == 0 {
            // The writer is paced by the disk: each application request (128 MB, written in
            // device requests) is synced before the next (as HDFS closes a block), the next
            // issued when its commit is durable. Without this its writes would only fill the
            // cache, at memory speed.
            if let Some(tid) = w.fs.sync_target(big, true) {
                return w.wait_commit(tid, Wake { client: LARGE, tag });
            }
        }
        // Blocks found in the cache cost a memory copy (5 GB/s), not nothing: a stream that
        // fits the cache must not spin at one instant of virtual time.
        let copy = spec.device_request * 1_000_000_000 / 5_000_000_000;
        let done = w.timed_reads().max(w.now() + copy);
        w.at(done, Wake { client: LARGE, tag });
    };
    // Alone.
    let t0 = w.now();
    w.at(t0, Wake { client: LARGE, tag: 0 });
    w.run(t0 + dur, &mut |w, wake| {
        if wake.client == LARGE && w.now() < t0 + dur {
            large_step(w, 0)
        }
    });
    let alone = moved.get();
    // Beside the writers.
    let t1 = w.now();
    let end = t1 + dur;
    moved.set(0);
    let before = w.fs.counters();
    let near_before = w.fs.near_head();
    let interval = match (spec.commit_log, spec.varmail, spec.fileserver) {
        (Some(c), _, _) => c.flush_period.as_nanos().max(1) as u64,
        (None, Some(v), _) => 1_000_000_000 / v.ops_per_sec.max(1),
        (None, None, Some(f)) => 1_000_000_000 / f.ops_per_sec.max(1),
        (None, None, None) => 1_000_000_000 * spec.writers as u64 / spec.rate.max(1),
    };
    // Varmail and fileserver: each instance's directory, as setup left it.
    let mail_body = vec![0x6du8; spec.varmail.map_or(0, |v| v.append_bytes)];
    let whole_body = vec![0x77u8; spec.fileserver.map_or(0, |f| f.whole_bytes)];
    let append_body = vec![0x61u8; spec.fileserver.map_or(0, |f| f.append_bytes)];
    let mut boxes: Vec<Mailbox> = match dirs {
        Some((files, bytes)) => small
            .iter()
            .map(|&dir| -> Result<Mailbox, String> {
                let mut mails = Vec::with_capacity(files);
                for n in 0..files as u64 {
                    let a = w.fs.lookup(dir, &mail_name(n)).map_err(|e| format!("mailbox: {e}"))?;
                    mails.push((n, a.ino, bytes as u64));
                }
                Ok(Mailbox { dir, mails, next: files as u64, step: 0, current: None, op_started: None })
            })
            .collect::<Result<_, _>>()?,
        None => Vec::new(),
    };
    // A commit log appends what arrived since its last flush (at least a byte), then flushes.
    let flush_bytes = spec.commit_log.map_or(0, |c| (c.append_bytes_per_sec as u128 * interval as u128 / 1_000_000_000).max(1) as usize);
    let appended: RefCell<Vec<u64>> = RefCell::new(vec![0; spec.writers]);
    let log_record = vec![0x6cu8; flush_bytes];
    let mut rngs: Vec<Rng> = (0..spec.writers).map(|i| Rng::new(spec.seed).fork(i as u64)).collect();
    let slots = (spec.file_bytes / spec.write_size as u64).max(1);
    let record = vec![0xa5u8; spec.write_size];
    let started: RefCell<Vec<u64>> = RefCell::new(vec![0; spec.writers]);
    let next_at: RefCell<Vec<u64>> = RefCell::new(vec![0; spec.writers]);
    let latencies: RefCell<Vec<u64>> = RefCell::new(Vec::new());
    let pending = Cell::new(0usize);
    let error: RefCell<Option<String>> = RefCell::new(None);
    w.at(t1, Wake { client: LARGE, tag: 1 });
    for (i, r) in rngs.iter_mut().enumerate() {
        let phase = r.below(interval.max(1));
        next_at.borrow_mut()[i] = t1 + phase;
        w.at(t1 + phase, Wake { client: i, tag: WRITE });
    }
    let mut client = |w: &mut World, wake: Wake| {
        let now = w.now();
        if wake.client == LARGE {
            if wake.tag == 1 && now < end {
                large_step(w, 1);
            }
            return;
        }
        let i = wake.client;
        if wake.tag == SYNCED {
            latencies.borrow_mut().push(now - started.borrow()[i]);
            pending.set(pending.get() - 1);
        } else {
            if now >= end {
                return;
            }
            if spec.fileserver.is_some() {
                let first = *boxes[i].op_started.get_or_insert(now);
                match fileserver_step(w, &mut boxes[i], &mut rngs[i], &whole_body, &append_body) {
                    Err(FsError::WouldBlock) => return w.wait_journal(wake),
                    Ok(wrote) => {
                        boxes[i].op_started = None;
                        if wrote {
                            latencies.borrow_mut().push(now - first);
                        }
                    }
                    Err(e) => {
                        error.borrow_mut().get_or_insert(format!("file server {i}, operation {} of the cycle: {e}", boxes[i].step % 5));
                        return;
                    }
                }
                let next = (next_at.borrow()[i] + interval).max(now);
                next_at.borrow_mut()[i] = next;
                return w.at(next, Wake { client: i, tag: WRITE });
            }
            if spec.varmail.is_some() {
                match varmail_step(w, &mut boxes[i], &mut rngs[i], &mail_body) {
                    Err(FsError::WouldBlock) => return w.wait_journal(wake),
                    Ok(MailStep::Sync(ino)) => {
                        started.borrow_mut()[i] = now;
                        if let Some(tid) = w.fs.sync_target(ino, false) {
                            pending.set(pending.get() + 1);
                            return w.wait_commit(tid, Wake { client: i, tag: SYNCED });
                        }
                        latencies.borrow_mut().push(0);
                    }
                    Ok(MailStep::Done) => {}
                    Err(e) => {
                        error.borrow_mut().get_or_insert(format!("mail server {i}: {e}"));
                        return;
                    }
                }
                let next = (next_at.borrow()[i] + interval).max(now);
                next_at.borrow_mut()[i] = next;
                return w.at(next, Wake { client: i, tag: WRITE });
            }
            let (off, data) = if spec.commit_log.is_some() { (appended.borrow()[i], &log_record) } else { (rngs[i].below(slots) * spec.write_size as u64, &record) };
            match w.fs.write(small[i], off, data) {
                Ok(_) => {}
                Err(FsError::WouldBlock) => return w.wait_journal(wake),
                Err(e) => {
                    error.borrow_mut().get_or_insert(format!("small writer {i}: {e}"));
                    return;
                }
            }
            if spec.commit_log.is_some() {
                appended.borrow_mut()[i] += data.len() as u64;
            }
            started.borrow_mut()[i] = now;
            if let Some(tid) = w.fs.sync_target(small[i], true) {
                pending.set(pending.get() + 1);
                return w.wait_commit(tid, Wake { client: i, tag: SYNCED });
            }
            latencies.borrow_mut().push(0);
        }
        // The next write at its slot, or at once if the sync took longer.
        let next = (next_at.borrow()[i] + interval).max(now);
        next_at.borrow_mut()[i] = next;
        w.at(next, Wake { client: i, tag: WRITE });
    };
    w.run(end, &mut client);
    let shared = moved.get();
    let near_after = w.fs.near_head();
    let during = w.fs.counters().since(&before);
    while pending.get() > 0 && w.step(u64::MAX, &mut client) {}
    if let Some(e) = error.into_inner().or(large_error.into_inner()).or(w.error.clone()) {
        return Err(e);
    }
    let mut lat = latencies.into_inner();
    lat.sort_unstable();
    let pct = |p: f64| lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1))).copied().unwrap_or(0);
    let near_head = match (near_before, near_after) {
        (Some(a), Some(b)) => Some(b.since(&a)),
        _ => None,
    };
    let secs = dur as f64 / 1e9;
    Ok(Outcome {
        scheme: spec.scheme.name(),
        rate: spec.rate,
        alone_bps: alone as f64 / secs,
        shared_bps: shared as f64 / secs,
        syncs: lat.len() as u64,
        sync_mean_ns: if lat.is_empty() { 0 } else { lat.iter().sum::<u64>() / lat.len() as u64 },
        sync_p50_ns: pct(0.5),
        sync_p99_ns: pct(0.99),
        near_head,
        checkpoints: during.checkpoints,
        journal_bytes: during.journal_bytes,
        final_bytes: during.final_bytes,
        log_reads: during.checkpoint.log_reads,
        commits: during.commits,
        flush_period_ns: spec.commit_log.map(|c| c.flush_period.as_nanos() as u64),
        durable: spec.commit_log.is_some_and(|c| c.durable),
    })
}

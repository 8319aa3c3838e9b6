//! The recovery experiment in virtual time (thesis section 6.4, Figure 6.6): N streams
//! write K records each with a sync after every one (everything committed), age-based
//! writeback held off (nothing checkpointed), then a crash. The devices are mounted again
//! behind [`ClockedDevice`]s, so every read and write of recovery advances the virtual clock
//! as the disk model says, and the engine's own timing of its three passes comes out in
//! virtual time.

use super::clock::VirtualClock;
use super::clocked::{ClockedDevice, ClockedLink, ClockedNvm, LinkModels};
use super::world::{Wake, World, WorldConfig};
use okeanos::device::Device;
use okeanos::fs::mkfs::MkfsOptions;
use okeanos::fs::FsError;
use okeanos::stats::{Counters, RecoveryReport};
use okeanos::Okeanos;
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Outcome {
    pub report: RecoveryReport,
    /// Counters of the run before the crash (setup excluded).
    pub before: Counters,
    pub writes: u64,
    /// Virtual seconds the writing took.
    pub write_s: f64,
}

/// `make` builds a fresh configuration (with fresh device models) for each mount; `mkfs`
/// formats the file system (manylogs: a log in every group).
pub fn run(make: &dyn Fn() -> WorldConfig, mkfs: &MkfsOptions, streams: usize, size: usize, records: usize) -> Result<Outcome, String> {
    if streams == 0 || size == 0 || records == 0 {
        return Err("streams, size and records must be positive".into());
    }
    let hold = |mut c: WorldConfig| {
        c.mount.writeback_period = Duration::from_secs(86_400);
        c.mount.expire_period = Some(Duration::from_secs(86_400));
        c.mount.commit_interval = Duration::from_secs(86_400);
        c
    };
    // One configuration formats and mounts: an nvm journal's region is formatted and then
    // written by the same mount, and survives the crash as persistent memory does.
    let first = make();
    if first.remote.as_ref().is_some_and(|r| r.drop_journal) {
        return Err("--journal dropped sends the journal nowhere: there is nothing to recover from".into());
    }
    let nvm = first.nvm.as_ref().map(|n| n.region.clone());
    let (fs_dev, j_dev) = World::format(&first, mkfs).map_err(|e| e.to_string())?;
    let mut w = World::mount(fs_dev.clone(), j_dev.clone(), hold(first)).map_err(|e| e.to_string())?;
    let root = w.fs.root();
    let mut inos = Vec::new();
    for i in 0..streams {
        inos.push(w.settle(|fs| fs.create(root, format!("stream-{i:05}").as_bytes(), 0o644)).map_err(|e| format!("setup: {e}"))?.ino);
    }
    w.sync_all(&mut |_, _| {}).map_err(|e| format!("setup: {e}"))?;
    let base = w.fs.counters();
    let t0 = w.now();
    let written: Vec<Cell<usize>> = (0..streams).map(|_| Cell::new(0)).collect();
    let error: Cell<Option<String>> = Cell::new(None);
    let rec = vec![b'r'; size];
    for i in 0..streams {
        w.at(t0, Wake { client: i, tag: 0 });
    }
    let mut client = |w: &mut World, wake: Wake| {
        let i = wake.client;
        if wake.tag == 0 {
            let k = written[i].get();
            match w.fs.write(inos[i], (k * size) as u64, &rec) {
                Ok(_) => {}
                Err(FsError::WouldBlock) => return w.wait_journal(wake),
                Err(e) => return error.set(Some(format!("stream {i}: {e}"))),
            }
            written[i].set(k + 1);
            match w.fs.sync_target(inos[i], true) {
                Some(tid) => return w.wait_commit(tid, Wake { client: i, tag: 1 }),
                None => {}
            }
        }
        if written[i].get() < records {
            w.at(w.now(), Wake { client: i, tag: 0 });
        }
    };
    let done = |written: &[Cell<usize>]| written.iter().all(|c| c.get() >= records);
    while !done(&written) && w.step(u64::MAX, &mut client) {
        if let Some(e) = error.take() {
            return Err(e);
        }
    }
    // Every stream's last sync has returned once its last record's commit is durable.
    w.sync_all(&mut |_, _| {}).map_err(|e| e.to_string())?;
    if let Some(e) = error.take() {
        return Err(e);
    }
    let before = w.fs.counters().since(&base);
    let write_s = (w.now() - t0) as f64 / 1e9;
    // The journal server's log outlives the host, as a server does.
    let server = w.server.clone();
    drop(w); // the crash: no sync, no checkpoint, no unmount
    let clock = Arc::new(VirtualClock::new(1_700_000_000_000_000_000, false));
    let cfg = make();
    let fsd: Arc<dyn Device> = Arc::new(ClockedDevice::new(fs_dev, cfg.fs_model, clock.clone()));
    let jd: Option<Arc<dyn Device>> = match (j_dev, cfg.journal_model) {
        (Some(j), Some(m)) => Some(Arc::new(ClockedDevice::new(j, m, clock.clone()))),
        (Some(_), None) => return Err("an external journal needs a journal model".into()),
        _ => None,
    };
    let mut opts = cfg.mount;
    opts.manual_journal = true;
    // The recovering mount reaches the crashed host's journal wherever it was: the same NVM
    // region, the same server's log, each timed on its model.
    if let (Some(region), Some(n)) = (nvm, cfg.nvm) {
        opts.nvm = Some(okeanos::nvm::NvmHandle(Arc::new(ClockedNvm::new(region, n.model, clock.clone()))));
    }
    if let (Some(log), Some(r)) = (server, cfg.remote) {
        let models = Arc::new(std::sync::Mutex::new(LinkModels { net: r.net, server_disk: r.server_disk }));
        let c = clock.clone();
        opts.remote_connector = Some(okeanos::remote::Connector(Arc::new(move |_| {
            let server = Box::new(okeanos::remote::memory::MemServer::new(log.clone(), None));
            Ok(Box::new(ClockedLink::new(server, models.clone(), c.clone())) as Box<dyn okeanos::remote::Link>)
        })));
        opts.remote_host = Some("sim".into());
    }
    let fs = Okeanos::mount_with_clock(fsd, jd, opts, clock).map_err(|e| format!("recovery: {e}"))?;
    let report = fs.counters().recovery.ok_or("nothing to recover")?;
    Ok(Outcome { report, before, writes: (streams * records) as u64, write_s })
}

//! The simulated world: one mounted engine, its devices and their models, the virtual clock
//! and the event queue. The journal is an actor: whenever it is idle the world asks the
//! engine for its next step ([`Okeanos::journal_poll`], the same decision procedure the journal
//! thread runs), carries out the step's bytes on the in-memory devices, and times its stages
//! on the models: a stage's writes go to the device queues together, its flushes after the
//! last write completed, the next stage after the flushes. Clients (workload streams) are
//! event handlers; an operation that would wait for the journal parks its client until the
//! next journal step completes, and a sync parks it until its transaction is committed.
//!
//! Everything a client does in the engine takes no virtual time (CPU is free; reads of
//! uncached blocks, rare in these workloads, are not timed). Device time is all there is.

use super::clock::VirtualClock;
use okeanos::models::{DiskModel, Op};
use okeanos::device::{Device, MemDevice};
use okeanos::engine::{JournalStep, JournalWork, Lane};
use okeanos::fs::mkfs::MkfsOptions;
use okeanos::journal::plan::DevId;
use okeanos::journal::transaction::Tid;
use okeanos::options::MountOptions;
use okeanos::fs::FsResult;
use okeanos::{FsError, Okeanos};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// A client's wake-up: which client and what it was waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Wake {
    pub client: usize,
    pub tag: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Client(Wake),
    JournalWake,
    /// The current phase of the lane's step in flight ends (0 commit lane, 1 checkpoint lane).
    JournalStage(u8),
}

const LANES: [Lane; 2] = [Lane::Commit, Lane::Checkpoint];

struct InFlight {
    work: JournalWork,
    stage: usize,
    flushing: bool,
}

/// How the simulated storage is laid out.
pub struct WorldConfig {
    pub fs_bytes: u64,
    /// An external journal of this many blocks on its own device, or None for an internal one.
    pub external_journal_blocks: Option<u64>,
    pub journal_blocks: u64,
    pub fs_model: Box<dyn DiskModel>,
    /// The journal device's model (external journal only).
    pub journal_model: Option<Box<dyn DiskModel>>,
    pub mount: MountOptions,
    /// Wall-clock origin of virtual time (timestamps written into the image).
    pub wall_origin: i64,
    pub frozen_wall: bool,
    /// A remote journal (the internal journal as its fallback): the link to the server and
    /// the server's disk.
    pub remote: Option<RemoteConfig>,
    /// An nvm journal (UBJ): its region and the model that times its stores and fences.
    pub nvm: Option<NvmConfig>,
    /// The external journal is a region of the file system's disk from this byte offset (a
    /// journal partition in the middle of the disk, as the manylogs paper's ext3 baseline):
    /// its I/O is timed on `fs_model` there, and `journal_model` is not used.
    pub journal_at: Option<u64>,
    /// The file-system device when it is sparse and notes its reads: reads of uncached blocks
    /// are then timed on `fs_model` ([`World::timed_reads`]).
    pub timed_reads: Option<Arc<okeanos::device::SparseDevice>>,
}

/// The NVM of a simulated nvm journal: an in-memory region (kept across a remount) whose
/// operations are timed on `model` (`models::nvm`): each store as a write of its bytes, each
/// fence as a persist barrier, one after another (a stage's NVM operations are ordered).
pub struct NvmConfig {
    /// In memory, or recording into a crash recorder (crash fuzzing).
    pub region: Arc<dyn okeanos::nvm::Nvm>,
    pub model: Box<dyn DiskModel>,
}

/// The journal server of a simulated remote journal: an in-memory stand-in
/// (`remote::memory`) whose appends are timed on `net` (the request's bytes, one round trip)
/// and then on `server_disk` (a sequential write and a flush: the server's fdatasync). The
/// server's disk time follows the full round trip rather than its first half: the ACK's way
/// back is counted early, the total is the same.
///
/// With `followers` it is a replicated log (JetStream, R = 1 + followers): the leader writes
/// and flushes on `server_disk` while it forwards the append over `net` to each follower,
/// which writes and flushes on its own disk; the append is acknowledged when a majority of
/// the replicas have flushed it. `leader_loss` = (at, election): from virtual time `at` the
/// leader is gone and appends sent in the next `election` nanoseconds wait for the new one.
pub struct RemoteConfig {
    pub net: Box<dyn DiskModel>,
    pub server_disk: Box<dyn DiskModel>,
    /// Drop the journal instead of sending it (the thesis' NJ-Ext3, an upper bound: commits
    /// cost nothing, recovery is impossible). For comparisons only.
    pub drop_journal: bool,
    /// The followers' disks of a replicated log (none: one journal server).
    pub followers: Vec<Box<dyn DiskModel>>,
    pub leader_loss: Option<(u64, u64)>,
    /// The stand-in server notes when it acknowledged each append and completed each trim on
    /// this recorder's clock (crash fuzzing builds the server's state at a crash from it).
    pub recorder: Option<Arc<okeanos::device::CrashRecorder>>,
}

impl RemoteConfig {
    /// One journal server.
    pub fn single(net: Box<dyn DiskModel>, server_disk: Box<dyn DiskModel>, drop_journal: bool) -> Self {
        RemoteConfig { net, server_disk, drop_journal, followers: Vec::new(), leader_loss: None, recorder: None }
    }
}

pub struct World {
    pub clock: Arc<VirtualClock>,
    pub fs: Okeanos,
    pub fs_dev: Arc<dyn Device>,
    pub journal_dev: Option<Arc<dyn Device>>,
    fs_model: Box<dyn DiskModel>,
    /// Whether the runtime writes commit blocks short on the file-system and journal devices
    /// (`short_writes=`): the models are charged what it wrote.
    short_writes: (bool, bool),
    journal_model: Option<Box<dyn DiskModel>>,
    remote: Option<RemoteConfig>,
    nvm_model: Option<Box<dyn DiskModel>>,
    journal_at: Option<u64>,
    read_tap: Option<Arc<okeanos::device::SparseDevice>>,
    copy_read_ns: u64,
    /// Where the server's log ends (its disk sees sequential appends).
    server_at: u64,
    /// The stand-in server's contents (kept across a remount).
    pub server: Option<Arc<std::sync::Mutex<okeanos::remote::memory::MemLog>>>,
    queue: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
    /// The step in flight on each lane: a checkpoint may run beside a commit, as with the
    /// journal and checkpoint threads of a real mount.
    in_flight: [Option<InFlight>; 2],
    /// The checkpoint lane waits between two slices for the commit in flight (as the
    /// checkpoint thread's `yield_to_commit`), and resumes when that commit completes.
    checkpoint_paused: bool,
    wake_at: [Option<u64>; 2],
    waiters: Vec<(Tid, Wake)>,
    blocked: Vec<Wake>,
    /// Steps of journal work completed (commits and checkpoints).
    pub steps: u64,
    block_size: u64,
    /// The first journal I/O error, if any.
    pub error: Option<String>,
}

impl World {
    /// Formats fresh in-memory devices and mounts them with the journal driven by the world.
    pub fn new(cfg: WorldConfig, mkfs: &MkfsOptions) -> FsResult<World> {
        let (fs_dev, journal_dev) = World::format(&cfg, mkfs)?;
        World::mount(fs_dev, journal_dev, cfg)
    }

    /// Formats fresh in-memory devices as `cfg` lays them out.
    pub fn format(cfg: &WorldConfig, mkfs: &MkfsOptions) -> FsResult<(Arc<dyn Device>, Option<Arc<dyn Device>>)> {
        let fs_dev: Arc<dyn Device> = Arc::new(MemDevice::new(cfg.fs_bytes).named("sim-fs"));
        let journal_dev: Option<Arc<dyn Device>> = cfg.external_journal_blocks.map(|b| Arc::new(MemDevice::new(b * mkfs.block_size as u64).named("sim-journal")) as Arc<dyn Device>);
        let mut m = mkfs.clone();
        m.journal_blocks = cfg.external_journal_blocks.unwrap_or(cfg.journal_blocks);
        m.external_journal = cfg.external_journal_blocks.is_some();
        if cfg.remote.is_some() {
            m.remote_server = Some("simulated:1".into());
        }
        if let Some(n) = &cfg.nvm {
            m.nvm_path = Some("simulated-nvm".into());
            Okeanos::mkfs_nvm(fs_dev.as_ref(), n.region.as_ref(), &m).map_err(|e| FsError::Invalid(e.to_string()))?;
            return Ok((fs_dev, journal_dev));
        }
        Okeanos::mkfs(fs_dev.as_ref(), journal_dev.as_deref(), &m).map_err(|e| FsError::Invalid(e.to_string()))?;
        Ok((fs_dev, journal_dev))
    }

    /// Mounts existing in-memory devices (after a simulated crash, for recovery).
    pub fn mount(fs_dev: Arc<dyn Device>, journal_dev: Option<Arc<dyn Device>>, cfg: WorldConfig) -> FsResult<World> {
        let clock = Arc::new(VirtualClock::new(cfg.wall_origin, cfg.frozen_wall));
        let mut opts = cfg.mount;
        opts.manual_journal = true;
        // The in-memory devices know nothing of seeks; the models do (as `auto` decides for a
        // real disk from the kernel's rotational flag).
        if opts.checkpoint_thread.is_none() {
            opts.checkpoint_thread = Some(!(journal_dev.is_none() && cfg.fs_model.seeks()));
        }
        // New blocks in place (`fresh_blocks=auto`) where the file system's disk does not seek.
        opts.fs_seeks = Some(cfg.fs_model.seeks());
        // Short commit writes (`auto`): where the disk the commits go to does not seek.
        if opts.short_writes.is_none() {
            let journal_seeks = match (&journal_dev, &cfg.journal_model) {
                (Some(_), Some(m)) => m.seeks(),
                _ => cfg.fs_model.seeks(),
            };
            opts.short_writes = Some(!journal_seeks);
        }
        let server = cfg.remote.as_ref().map(|r| {
            let log = Arc::new(std::sync::Mutex::new(okeanos::remote::memory::MemLog::default()));
            let (l, rec) = (log.clone(), r.recorder.clone());
            opts.remote_connector = Some(okeanos::remote::Connector(Arc::new(move |_| Ok(Box::new(okeanos::remote::memory::MemServer::new(l.clone(), rec.clone())) as Box<dyn okeanos::remote::Link>))));
            opts.remote_host = Some("sim".into());
            opts.faults.skip_remote_append |= r.drop_journal;
            log
        });
        if let Some(n) = &cfg.nvm {
            opts.nvm = Some(okeanos::nvm::NvmHandle(n.region.clone()));
        }
        let short_writes = (okeanos::runtime::writes_short(opts.short_writes, fs_dev.as_ref()), journal_dev.as_ref().is_some_and(|j| okeanos::runtime::writes_short(opts.short_writes, j.as_ref())));
        let fs = Okeanos::mount_with_clock(fs_dev.clone(), journal_dev.clone(), opts, clock.clone())?;
        let block_size = fs.statfs().block_size as u64;
        Ok(World {
            block_size,
            clock,
            fs,
            fs_dev,
            journal_dev,
            fs_model: cfg.fs_model,
            short_writes,
            journal_model: cfg.journal_model,
            remote: cfg.remote,
            nvm_model: cfg.nvm.map(|n| n.model),
            journal_at: cfg.journal_at,
            read_tap: cfg.timed_reads,
            copy_read_ns: 0,
            server_at: 0,
            server,
            queue: BinaryHeap::new(),
            seq: 0,
            in_flight: [None, None],
            checkpoint_paused: false,
            wake_at: [None, None],
            waiters: Vec::new(),
            blocked: Vec::new(),
            steps: 0,
            error: None,
        })
    }

    pub fn now(&self) -> u64 {
        use okeanos::clock::Clock;
        self.clock.now_ns()
    }

    fn push(&mut self, t: u64, e: Event) {
        self.seq += 1;
        self.queue.push(Reverse((t, self.seq, e)));
    }

    /// Wakes `client` with `tag` at virtual time `t` (not before now).
    pub fn at(&mut self, t: u64, w: Wake) {
        let t = t.max(self.now());
        self.push(t, Event::Client(w));
    }

    /// Wakes `w` when transaction `tid` is committed.
    pub fn wait_commit(&mut self, tid: Tid, w: Wake) {
        self.waiters.push((tid, w));
        self.kick();
    }

    /// Wakes `w` after the next journal step completes (its operation would have waited).
    pub fn wait_journal(&mut self, w: Wake) {
        self.blocked.push(w);
        self.kick();
    }

    /// Submits raw I/O to the file-system device's model (a client of the disk that is not
    /// the file system, such as the large sequential reader of the mixed workload); returns
    /// when it completes.
    pub fn raw_io(&mut self, op: Op, offset: u64, len: u64) -> u64 {
        let now = self.now();
        self.fs_model.submit(now, op, offset, len)
    }

    pub fn fs_model_capacity(&self) -> u64 {
        self.fs_model.capacity()
    }

    /// Lets each idle lane of the journal take its next step.
    pub fn kick(&mut self) {
        for lane in 0..LANES.len() {
            self.kick_lane(lane);
        }
    }

    fn kick_lane(&mut self, lane: usize) {
        if self.in_flight[lane].is_some() || self.error.is_some() {
            return;
        }
        match self.fs.journal_poll(LANES[lane]) {
            JournalStep::Work(work) => {
                // The step's own reads (a checkpoint's copies from logs) are timed with its
                // stages, not as the clients' reads.
                if let Some(tap) = &self.read_tap {
                    tap.mute(true);
                }
                let executed = self.fs.journal_execute(&work);
                if let Some(tap) = &self.read_tap {
                    tap.mute(false);
                }
                if let Err(e) = executed {
                    let message = e.to_string();
                    self.fs.journal_complete(work, Err(e));
                    self.release_all();
                    // The journal decides what follows: a host whose journal server failed
                    // falls back to its local journal (the next step), anything else stops
                    // the journal, and the simulation with it.
                    if self.fs.debug_state(|j, _| j.aborted().is_some()) {
                        self.error = Some(message);
                    } else {
                        self.kick();
                    }
                    return;
                }
                self.in_flight[lane] = Some(InFlight { work, stage: 0, flushing: false });
                self.advance_stage(lane);
            }
            JournalStep::Idle { wake_ns } => {
                if wake_ns != u64::MAX && self.wake_at[lane] != Some(wake_ns) {
                    self.wake_at[lane] = Some(wake_ns);
                    self.push(wake_ns.max(self.now()), Event::JournalWake);
                }
            }
            JournalStep::Stop => {}
        }
    }

    fn busy(&self) -> bool {
        self.in_flight.iter().any(|f| f.is_some())
    }

    fn model(&mut self, d: DevId) -> &mut Box<dyn DiskModel> {
        match (d, &mut self.journal_model) {
            (DevId::Journal, Some(m)) if self.journal_at.is_none() => m,
            _ => &mut self.fs_model,
        }
    }

    /// Where device `d`'s byte 0 is on its model.
    fn model_offset(&self, d: DevId) -> u64 {
        match d {
            DevId::Journal => self.journal_at.unwrap_or(0),
            _ => 0,
        }
    }

    /// Times the reads the engine made of the file-system device since the last call (reads
    /// of uncached blocks, adjacent ones merged) on its model, from now, behind whatever the
    /// disk is doing; returns when the last completes (now if there were none). Only with
    /// [`WorldConfig::timed_reads`].
    pub fn timed_reads(&mut self) -> u64 {
        let now = self.now();
        let Some(tap) = self.read_tap.clone() else { return now };
        let mut done = now;
        for (off, len) in tap.take_reads() {
            done = done.max(self.fs_model.submit(now, Op::Read, off, len));
        }
        done
    }

    /// Submits the current phase of the in-flight step to the models and schedules its end;
    /// completes the step when no phase is left.
    fn advance_stage(&mut self, lane: usize) {
        let now = self.now();
        let bs = self.block_size;
        loop {
            let commit_in_flight = self.in_flight[0].is_some();
            let Some(f) = self.in_flight[lane].as_mut() else { return };
            let stages = &f.work.io().stages;
            if f.stage >= stages.len() {
                let f = self.in_flight[lane].take().expect("in flight");
                self.fs.journal_complete(f.work, Ok(()));
                self.steps += 1;
                self.release_all();
                if lane == 0 && self.checkpoint_paused {
                    // The checkpoint's next slice goes first, then the next commit's writes
                    // queue behind it.
                    self.checkpoint_paused = false;
                    self.advance_stage(1);
                }
                self.kick();
                return;
            }
            if lane == 1 && f.stage > 0 && !f.flushing && commit_in_flight {
                // Between two slices of a checkpoint, a commit is in flight: it has the device.
                self.checkpoint_paused = true;
                return;
            }
            let stage = &stages[f.stage];
            let mut done = now;
            if !f.flushing {
                f.flushing = true;
                // A copy's read goes first (its write needs the data), sources in order.
                let mut reads: Vec<(DevId, u64)> = stage.copies.iter().map(|c| (c.from.0, c.from.1.get())).collect();
                reads.sort_by_key(|r| (r.0 as u8, r.1));
                // (device, block, bytes): the simulated disks take short writes, as the memory
                // devices under them do (a commit block's sectors only).
                let short = |d: DevId| if d == DevId::Journal { self.short_writes.1 } else { self.short_writes.0 };
                let ios: Vec<(DevId, u64, u64)> =
                    stage.copies.iter().map(|c| (c.to.0, c.to.1.get(), bs)).chain(stage.writes.iter().map(|w| (w.dev, w.block.get(), if short(w.dev) { w.written_len() as u64 } else { bs }))).collect();
                let remote: Vec<Option<u64>> = stage
                    .remote
                    .iter()
                    .map(|op| match op {
                        okeanos::journal::plan::RemoteOp::Append { blocks, .. } => Some(blocks.iter().map(|(b, _)| b.len() as u64).sum()),
                        _ => None,
                    })
                    .collect();
                let nvm_ops: Vec<(Op, u64, u64)> = stage
                    .nvm
                    .iter()
                    .filter_map(|op| match op {
                        okeanos::journal::plan::NvmOp::Store { at, data, .. } => Some((Op::Write, *at, data.as_slice().len() as u64)),
                        okeanos::journal::plan::NvmOp::Fence => Some((Op::Flush, 0, 0)),
                        okeanos::journal::plan::NvmOp::Flush { .. } => None,
                    })
                    .collect();
                let mut read_done = now;
                for (d, block) in reads {
                    let at = self.model_offset(d) + block * bs;
                    read_done = read_done.max(self.model(d).submit(now, Op::Read, at, bs));
                }
                self.copy_read_ns += read_done - now;
                let now = read_done;
                done = done.max(read_done);
                for (d, block, len) in ios {
                    let at = self.model_offset(d) + block * bs;
                    let t = self.model(d).submit(now, Op::Write, at, len);
                    done = done.max(t);
                }
                for bytes in remote {
                    done = done.max(self.remote_op(now, bytes));
                }
                if !nvm_ops.is_empty() {
                    let ops = nvm_ops;
                    let m = self.nvm_model.as_mut().expect("NVM operations come from an nvm journal");
                    let mut t = now;
                    for (op, at, len) in ops {
                        t = m.submit(t, op, at, len);
                    }
                    done = done.max(t);
                }
            } else {
                f.flushing = false;
                f.stage += 1;
                let mut devs: Vec<DevId> = stage.flush.clone();
                devs.sort_by_key(|d| *d as u8);
                let separate = self.journal_model.is_some() && self.journal_at.is_none();
                devs.dedup_by_key(|d| if separate { *d as u8 } else { 0 });
                for d in devs {
                    let t = self.model(d).submit(now, Op::Flush, 0, 0);
                    done = done.max(t);
                }
            }
            if done > now {
                self.push(done, Event::JournalStage(lane as u8));
                return;
            }
        }
    }

    /// When an operation on the journal server sent at `now` is acknowledged: an append of
    /// `bytes` crosses the link and is written and flushed on the server's disk; a trim is one
    /// round trip.
    fn remote_op(&mut self, now: u64, bytes: Option<u64>) -> u64 {
        let r = self.remote.as_mut().expect("remote operations come from a remote journal");
        match bytes {
            Some(n) => {
                // During an election nothing answers: the append waits for the new leader.
                let sent = match r.leader_loss {
                    Some((at, election)) if now >= at && now < at + election => at + election,
                    _ => now,
                };
                let arrived = r.net.submit(sent, Op::Write, 0, n);
                let at = self.server_at;
                let written = r.server_disk.submit(arrived, Op::Write, at, n);
                let mut flushed = vec![r.server_disk.submit(written, Op::Flush, 0, 0)];
                for d in r.followers.iter_mut() {
                    // Forwarded by the leader, stored and flushed, acknowledged back.
                    let there = r.net.submit(arrived, Op::Write, 0, n);
                    let w = d.submit(there, Op::Write, at, n);
                    let f = d.submit(w, Op::Flush, 0, 0);
                    flushed.push(r.net.submit(f, Op::Flush, 0, 0));
                }
                self.server_at = (self.server_at + n) % (r.server_disk.capacity() / 2).max(1 << 20);
                flushed.sort_unstable();
                // A majority of the replicas (the leader among them).
                flushed[flushed.len() / 2]
            }
            None => r.net.submit(now, Op::Flush, 0, 0),
        }
    }

    /// Wakes syncs whose transactions are committed and everything that was blocked.
    fn release_all(&mut self) {
        let committed = self.fs.committed_tid();
        let now = self.now();
        let failed = self.error.is_some();
        let mut keep = Vec::with_capacity(self.waiters.len());
        for (tid, w) in std::mem::take(&mut self.waiters) {
            if tid <= committed || failed {
                self.push(now, Event::Client(w));
            } else {
                keep.push((tid, w));
            }
        }
        self.waiters = keep;
        for w in std::mem::take(&mut self.blocked) {
            self.push(now, Event::Client(w));
        }
    }

    /// Processes the next event if it is due no later than `until`, handing client wake-ups
    /// to `client`. False when there is none.
    pub fn step(&mut self, until: u64, client: &mut dyn FnMut(&mut World, Wake)) -> bool {
        let Some(Reverse((t, _, e))) = self.queue.peek().copied() else { return false };
        if t > until {
            return false;
        }
        self.queue.pop();
        self.clock.advance_to(t);
        match e {
            Event::Client(w) => {
                client(self, w);
                self.kick();
            }
            Event::JournalWake => {
                for w in self.wake_at.iter_mut() {
                    if *w == Some(t) {
                        *w = None;
                    }
                }
                self.kick();
            }
            Event::JournalStage(lane) => self.advance_stage(lane as usize),
        }
        true
    }

    /// Runs events up to virtual time `until`; then sets the clock to `until`.
    pub fn run(&mut self, until: u64, client: &mut dyn FnMut(&mut World, Wake)) {
        while self.step(until, client) {}
        self.clock.advance_to(until);
    }

    /// Commits everything done so far, running the journal (and any client events) until it
    /// is durable.
    pub fn sync_all(&mut self, client: &mut dyn FnMut(&mut World, Wake)) -> FsResult<()> {
        let Some(tid) = self.fs.sync_all_target() else { return Ok(()) };
        self.kick();
        while self.fs.committed_tid() < tid {
            if let Some(e) = &self.error {
                return Err(FsError::Io(e.clone()));
            }
            if !self.step(u64::MAX, client) {
                return Err(FsError::Io("the journal stopped before the sync completed".into()));
            }
        }
        Ok(())
    }

    /// Commits everything, then checkpoints it all (`okeanos checkpoint`), running the journal
    /// until every transaction is released. Returns the virtual time it took.
    pub fn checkpoint_all(&mut self, client: &mut dyn FnMut(&mut World, Wake)) -> FsResult<u64> {
        self.sync_all(client)?;
        let t0 = self.now();
        let tid = self.fs.request_checkpoint();
        self.kick();
        while !self.fs.checkpoint_released(tid) {
            if let Some(e) = &self.error {
                return Err(FsError::Io(e.clone()));
            }
            if !self.step(u64::MAX, client) {
                return Err(FsError::Io("the journal stopped before the checkpoint completed".into()));
            }
        }
        Ok(self.now() - t0)
    }

    /// Virtual time the disk spent on checkpoints' reads of logs (copies of parked blocks),
    /// from the first read of a stage to its last.
    pub fn copy_read_ns(&self) -> u64 {
        self.copy_read_ns
    }

    /// Commits everything and lets the journal step in flight (a checkpoint) complete: before
    /// an unmount, which must not find that step's blocks still owed and write them again (it
    /// did: a run that ended during a checkpoint counted those blocks' home writes twice).
    pub fn finish(&mut self, client: &mut dyn FnMut(&mut World, Wake)) -> FsResult<()> {
        self.sync_all(client)?;
        while self.busy() {
            if let Some(e) = &self.error {
                return Err(FsError::Io(e.clone()));
            }
            if !self.step(u64::MAX, client) {
                break;
            }
        }
        Ok(())
    }

    /// Runs `op` against the engine, driving the journal whenever it would block (setup work
    /// outside any workload; no client events may be pending).
    pub fn settle<R>(&mut self, mut op: impl FnMut(&Okeanos) -> FsResult<R>) -> FsResult<R> {
        loop {
            match op(&self.fs) {
                Err(FsError::WouldBlock) => {
                    self.kick();
                    if !self.busy() {
                        // Nothing in flight: let time pass to the journal's next wake-up.
                        if !self.step(u64::MAX, &mut |_, _| {}) {
                            return Err(FsError::Io("the journal cannot make progress".into()));
                        }
                    }
                    while self.busy() {
                        if let Some(e) = &self.error {
                            return Err(FsError::Io(e.clone()));
                        }
                        self.step(u64::MAX, &mut |_, _| {});
                    }
                }
                r => return r,
            }
        }
    }
}

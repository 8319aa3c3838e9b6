//! The journal's scheduler: when to commit, checkpoint, snapshot the map, write back early,
//! serve fdatasyncs in place, fall back to the local journal and return to the server. It is
//! the one decision procedure that the engine's journal threads loop over (as jbd2's
//! kjournald) and that the simulator drives in virtual time.
//!
//! Its shape is quinn-proto's: a state machine with no I/O, no threads and no clock. The
//! caller passes the time in, asks for the next step of a lane ([`Scheduler::poll`]), runs the
//! step's I/O plan itself, and reports its outcome ([`Scheduler::finish`]). What the engine
//! must do about waiters (wake them, deliver syncs, note a committed transaction) and what it
//! should count is left in [`Effects`], which it drains after each call. The one thing the
//! scheduler asks of the file system above it goes through [`Host`]: loading blocks parked in
//! NVM before a checkpoint writes them home.
//!
//! Decisions, in the order the commit lane takes them:
//! - between commits (when checkpoints do not run beside them): fdatasyncs of overwrites in
//!   place, a due snapshot of the map, early writes past the background threshold;
//! - a commit when a sync, the commit interval, a full transaction, a handle waiting for space
//!   or the unmount asks for one, after a short batching window (`batch_wait`);
//! - checkpoints (in the commit lane when they may not run beside commits): asked for, a log
//!   swap, for space, for age (bounded steps), when idle;
//! - a return to the journal server after a fallback, with a doubling back-off.

use crate::ids::HomeBlock;
use super::checkpoint::{CheckpointGoal, CheckpointPlan};
use super::commit::CommitPlan;
use super::datasync::DatasyncPlan;
use super::fallback::FallbackPlan;
use super::plan::IoPlan;
use super::swap::SwapPlan;
use super::transaction::Tid;
use super::writeback::EarlyPlan;
use super::Journal;
use crate::cache::Cache;
use crate::device::DeviceError;
use std::collections::BTreeSet;

mod finish;
#[cfg(test)]
mod tests;

/// Under `batch=bytes`, a fast commit waits for more handles while its fixed part and padding
/// exceed this fraction (1/64) of what its handles carry ([`Scheduler::padding_heavy`]): its
/// journal bytes within about 1.6% of what its records, tags and notes take, so in practice
/// until `max_batch_time` or the handles stop coming, unless the last unit happens to fill.
/// In the simulator at 1,000 streams of a 128-byte sync a second, a sixteenth or a
/// thirty-second ended windows at 1.26-1.27 journal bytes a payload byte where a sixty-fourth
/// gives 1.25 with a 100 ms window (docs/BENCHMARKS.md, "Batching for padding").
const PADDING_SHARE: u64 = 64;

/// Blocks one step of age-based writeback writes at most (4 MiB with 4 KiB blocks).
pub const EXPIRY_STEP_BLOCKS: usize = 1024;

/// How often a host that fell back tries to return to its server (when its local journal is
/// empty): first after 2 s, doubling after each failure up to a minute (a hung server costs
/// the journal thread one acknowledgement timeout per try).
pub const RETURN_RETRY_NS: u64 = 2_000_000_000;
pub const RETURN_RETRY_MAX_NS: u64 = 60_000_000_000;

/// The mount's options that the scheduler reads, in nanoseconds.
#[derive(Debug, Clone, Default)]
pub struct SchedulerConfig {
    /// `commit=`: the running transaction commits at most this long after its first handle.
    pub commit_interval_ns: u64,
    /// `min_batch_time=`, `max_batch_time=`: bounds of the batching window.
    pub min_batch_ns: u64,
    pub max_batch_ns: u64,
    /// `batch_handles=`: a commit with this many handles waits for no more (0: no bound).
    pub batch_handles: u32,
    /// `batch=bytes`: a commit dominated by metadata blocks logged whole, or a fast commit
    /// whose last write would be mostly padding, waits up to `max_batch_time` for more
    /// handles, past `batch_handles` (see `batch_wait`).
    pub batch_for_bytes: bool,
    /// The journal's block size (0: unknown, no padding rule), and whether its commit blocks
    /// are written short (the sectors that hold them): how a fast commit's last write is
    /// rounded up. Resolved at mount from the device and `short_writes=`.
    pub block_size: u32,
    pub short_commits: bool,
    /// `writeback_period=`: how often age-based writeback (and `checkpoint=idle`) looks.
    pub writeback_period_ns: u64,
    /// `expire=`: age after which committed blocks go home; None: the placement's default.
    pub expire_ns: Option<u64>,
    /// `checkpoint=lazy`: nothing is written home for age, log swaps are allowed.
    pub lazy_checkpoint: bool,
    /// `checkpoint=idle`, and how long nothing must happen first (`idle_after=`).
    pub idle_checkpoint: bool,
    pub idle_after_ns: u64,
    /// `snapshot_period=` (0: never): snapshots of the map of logged blocks (manylogs).
    pub snapshot_period_ns: u64,
    /// `log_swap=`: a crowded log moves to an empty one (manylogs, with `checkpoint=lazy`).
    pub log_swap: bool,
    /// Checkpoints may run on a thread of their own (`checkpoint_thread=`, resolved at mount);
    /// the placement must allow it too ([`Scheduler::beside`]).
    pub checkpoint_thread: bool,
    /// `commit_pipeline=`: commits whose flush may be in flight at once, a new commit's writes
    /// beside them (0 or 1: a commit's flush runs in the lane, and the next commit waits for
    /// it). Only the runtime reports commits written before their flush
    /// ([`Scheduler::written`]); the scheduler bounds how many.
    pub commit_pipeline: u32,
    /// A commit may begin beside commits in flight of any size, not only small ones
    /// (`Scheduler::pipeline_open`): for the crash tests of pipelining, which want every
    /// overlap they can get; no mount option sets it.
    pub pipeline_any_size: bool,
}

/// The most handles a commit whose flush is in flight may carry for another to begin beside it
/// (`Scheduler::pipeline_open`).
pub const PIPELINE_SMALL_COMMIT: u32 = 4;

/// Journal work taken by [`Scheduler::poll`]: run its I/O, then hand it back to
/// [`Scheduler::finish`].
pub enum JournalWork {
    Commit { plan: CommitPlan, started_ns: u64 },
    Checkpoint(CheckpointPlan),
    /// The commit in flight failed on the journal server: made durable locally instead.
    Fallback { fallback: FallbackPlan, commit: CommitPlan, started_ns: u64 },
    /// A host that fell back returns to its journal server.
    Return { io: IoPlan, epoch: u64 },
    /// A manylogs log swap (in a checkpoint's place).
    Swap(SwapPlan),
    /// Early writes of the running transaction's in-place data (journal/writeback.rs), in a
    /// checkpoint's place.
    Early(EarlyPlan),
    /// fdatasyncs of overwrites: their blocks written in place and flushed, without a commit
    /// (journal/datasync.rs), in a checkpoint's place.
    Datasync(DatasyncPlan),
}

impl JournalWork {
    /// The writes and flushes to carry out.
    pub fn io(&self) -> &IoPlan {
        match self {
            JournalWork::Commit { plan, .. } => &plan.io,
            JournalWork::Checkpoint(p) => &p.io,
            JournalWork::Fallback { fallback, .. } => &fallback.io,
            JournalWork::Return { io, .. } => io,
            JournalWork::Swap(p) => &p.io,
            JournalWork::Early(p) => &p.io,
            JournalWork::Datasync(p) => &p.early.io,
        }
    }
}

/// What the journal does next.
pub enum JournalStep {
    Work(JournalWork),
    /// Nothing to do before `wake_ns` (monotonic clock; `u64::MAX`: until something changes).
    Idle { wake_ns: u64 },
    /// Unmounting (or abandoned): the journal thread exits.
    Stop,
}

/// The two kinds of journal work that may run at once: commits (and a remote journal's
/// fallback and return) on the commit lane, checkpoints on the checkpoint lane — when the
/// placement allows it ([`Scheduler::beside`]); otherwise the commit lane does both, in turn,
/// and the checkpoint lane has nothing to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    Commit,
    Checkpoint,
}

/// What the scheduler asks of the file system above it.
pub trait Host {
    fn journal(&self) -> &Journal;
    /// The journal and the cache at once (plans read the cache; commits change it).
    fn parts(&mut self) -> (&mut Journal, &mut Cache);
    /// Changes and blocks read from the disk so far: `checkpoint=idle` waits until it stays
    /// the same for `idle_after`.
    fn activity(&self) -> u64;
    /// Loads a block parked in NVM back into the cache (the nvm journal's checkpoints write
    /// owed blocks home from DRAM).
    fn unpark(&mut self, block: HomeBlock) -> Result<(), String>;
    /// A commit made these blocks and inodes reusable.
    fn freed(&mut self, blocks: Vec<HomeBlock>, inodes: Vec<u32>);
    /// The journal stopped: the file system turns read-only with the reason.
    fn read_only(&mut self, why: String);
}

/// A counter the engine keeps for a step (stats/mod.rs).
#[derive(Debug, Clone, Copy)]
pub enum Counted {
    /// A commit and a checkpoint were in flight at once.
    Overlap,
    /// A commit began while an earlier commit's flush was in flight (pipelined commits).
    Pipelined,
    Snapshot,
    IdleCheckpoint,
    Checkpoint,
    Fallback,
    LogSwap,
    EarlyWrites(u64),
    /// One in-place fdatasync step, covering this many syncs.
    DatasyncStep(u64),
    Commit { handles: u32, journal_blocks: u64, records: super::commit::RecordStats },
}

/// What the engine must do after a call into the scheduler, under the same lock.
#[derive(Debug, Default)]
pub struct Effects {
    /// Transaction `tid` committed: its syncs may return.
    pub committed: Option<Tid>,
    /// Wake the other lane (it may wait for this step: a clash, or space held by a commit).
    pub notify_commit_lane: bool,
    pub notify_checkpoint_lane: bool,
    /// Wake handles waiting for the journal (and syncs of the committed transaction).
    pub notify_handles: bool,
    /// Wake every waiter: handles and syncs of both transactions.
    pub wake_all: bool,
    /// Settle the syncs waiting without a thread.
    pub deliver_syncs: bool,
    pub counted: Vec<Counted>,
}

impl Effects {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.committed.is_none() && !self.notify_commit_lane && !self.notify_checkpoint_lane && !self.notify_handles && !self.wake_all && !self.deliver_syncs && self.counted.is_empty()
    }

    fn wake(&mut self) {
        self.wake_all = true;
        self.deliver_syncs = true;
    }
}

/// A batching window in progress.
#[derive(Debug, Clone, Copy)]
struct Batch {
    started_ns: u64,
    /// Handles seen at the last look, and when to look next.
    handles_seen: u32,
    next_ns: u64,
    /// It waits for bytes (`batch=bytes`: shared blocks, or a fast commit's padding): it ends
    /// once the transaction no longer would.
    for_bytes: bool,
}

/// The scheduler's state.
pub struct Scheduler {
    cfg: SchedulerConfig,
    /// A handle waits for log space.
    want_space: bool,
    /// Unmount asked the journal to stop (after committing what runs).
    stop: bool,
    /// Every user handle went without unmount: stop at once, without further I/O.
    abandoned: bool,
    next_writeback_ns: u64,
    /// Moving average of commit durations, and the handles of the last commit (batching).
    avg_commit_ns: u64,
    last_commit_handles: u32,
    /// Whether the last commit was a fast commit, and the bytes a handle carried in fast
    /// commits beyond their fixed part (a moving average; 0: none seen): what batching for
    /// bytes predicts the running transaction's fast commit from.
    last_fast: bool,
    fast_share: u64,
    /// When the last finished commit began, and the time between commit starts a handle
    /// (a moving average; 0: unknown): how far apart handles arrive, which sets how long
    /// batching for padding waits for the next one.
    last_commit_start_ns: Option<u64>,
    arrival_gap_ns: u64,
    batch: Option<Batch>,
    /// Age-based writeback in progress, in bounded steps: the expiry threshold it works to.
    expiring: Option<u64>,
    /// When the next periodic snapshot of the map of logged blocks is due (manylogs).
    next_snapshot_ns: u64,
    /// Work decided when the last step finished, taken before anything else (a fallback).
    pending: Option<JournalWork>,
    /// When a host that fell back may next try to return to its server, and the wait after a
    /// failed try.
    next_return_ns: u64,
    return_backoff_ns: u64,
    /// The blocks of the checkpoint-lane step in flight (a checkpoint, swap, early writes or
    /// in-place fdatasyncs), if one is: a commit that writes one of them in place waits.
    checkpointing: Option<BTreeSet<HomeBlock>>,
    /// A checkpoint of every transaction up to this one was asked for: it runs until they
    /// are all released.
    force_checkpoint: Option<Tid>,
    /// `checkpoint=idle`: the activity last seen, and since when.
    idle_seen: (u64, u64),
    /// The commits written whose flush is in flight, oldest first (what their counters need
    /// once they are durable).
    flushing: std::collections::VecDeque<(CommitPlan, u64)>,
    effects: Effects,
}

/// Whether a failed commit may fall back to the local journal: only an error of the journal
/// server's kind that [`RemoteError::lets_host_fall_back`](crate::remote::client::RemoteError::lets_host_fall_back)
/// says so of; an error of the host's own devices stops the journal.
fn falls_back(e: &DeviceError) -> bool {
    matches!(e, DeviceError::Remote(r) if r.lets_host_fall_back())
}

impl Scheduler {
    /// A scheduler for a journal mounted at `now_ns`.
    pub fn new(cfg: SchedulerConfig, now_ns: u64) -> Self {
        Scheduler {
            want_space: false,
            stop: false,
            abandoned: false,
            next_writeback_ns: now_ns + cfg.writeback_period_ns,
            avg_commit_ns: 0,
            last_commit_handles: 0,
            last_fast: false,
            fast_share: 0,
            last_commit_start_ns: None,
            arrival_gap_ns: 0,
            batch: None,
            expiring: None,
            next_snapshot_ns: now_ns + cfg.snapshot_period_ns,
            pending: None,
            next_return_ns: now_ns,
            return_backoff_ns: RETURN_RETRY_NS,
            checkpointing: None,
            force_checkpoint: None,
            idle_seen: (0, now_ns),
            flushing: Default::default(),
            effects: Effects::default(),
            cfg,
        }
    }

    // ----------------------------------------------------------------------------------------
    // What the engine tells the scheduler.

    /// A handle waits for log space: checkpoint (or commit) to make some.
    pub fn want_space(&mut self) {
        self.want_space = true;
    }

    /// Unmounting: commit what runs, then stop.
    pub fn stop(&mut self) {
        self.stop = true;
    }

    /// Every user handle went without unmount: stop where it stands.
    pub fn abandon(&mut self) {
        self.abandoned = true;
    }

    /// Unmounting or abandoned: no new syncs.
    pub fn stopping(&self) -> bool {
        self.stop || self.abandoned
    }

    pub fn abandoned(&self) -> bool {
        self.abandoned
    }

    /// Checkpoint everything committed up to `target` (O_DUR included), as soon as it can.
    pub fn force_checkpoint(&mut self, target: Tid) {
        self.force_checkpoint = Some(self.force_checkpoint.unwrap_or(Tid::ZERO).max(target));
    }

    /// Whether checkpoints run beside commits (a lane of their own).
    pub fn beside(&self, journal: &Journal) -> bool {
        self.cfg.checkpoint_thread && journal.placement().checkpoint_beside_commit()
    }

    /// Whether the commit lane has work that no timer will bring it to: a commit asked for,
    /// a fallback decided, a handle waiting for space, fdatasyncs of overwrites, a checkpoint
    /// asked for or in bounded steps, or (checkpoints between commits) log space running low.
    /// A sync that led a commit (engine/leader.rs) wakes the journal thread when it lets go
    /// of the lane only if this holds, so that a led commit costs the journal thread no
    /// wake-up of its own.
    pub fn commit_lane_wants(&self, journal: &Journal) -> bool {
        self.pending.is_some()
            || self.want_space
            || self.force_checkpoint.is_some()
            || self.expiring.is_some()
            || journal.commit_wanted()
            || journal.datasync_pending()
            || (!self.beside(journal) && journal.space_low())
    }

    /// The effects of the calls since the last drain; the caller carries them out and clears
    /// them (keeping the allocation).
    pub fn effects(&mut self) -> &mut Effects {
        &mut self.effects
    }

    // ----------------------------------------------------------------------------------------
    // The next step.

    /// The journal's next step at `now` for `lane` (`wall_ns`: the wall-clock time a commit
    /// stamps). Beside each other, a commit and a checkpoint never write the same block home:
    /// a commit whose in-place blocks (ordered data) the checkpoint in flight writes waits for
    /// it, and a checkpoint that would write a block the commit in flight writes in place
    /// waits for the commit (two writes of one block in flight at once could land in either
    /// order).
    pub fn poll(&mut self, host: &mut dyn Host, now: u64, wall_ns: i64, lane: Lane) -> JournalStep {
        if self.abandoned {
            return JournalStep::Stop;
        }
        let beside = self.beside(host.journal());
        match lane {
            Lane::Commit => {
                if !beside && self.checkpointing.is_none() {
                    // Between commits, fdatasyncs of overwrites go first (unless a commit is
                    // wanted: it covers them), then a due snapshot of the map, and early writes
                    // past the background threshold: a busy commit lane would otherwise put
                    // them off for as long as writers keep coming (and a commit would write
                    // the in-place data itself, which is what a small sync must not wait for).
                    if let Some(step) = self.datasync_step(host) {
                        return step;
                    }
                    if let Some(step) = self.snapshot_step(host, now) {
                        return step;
                    }
                    if let Some(step) = self.early_step(host) {
                        return step;
                    }
                }
                if let Some(step) = self.commit_step(host, now, wall_ns, beside) {
                    return step;
                }
                if !beside {
                    if let Some(step) = self.checkpoint_step(host, now) {
                        return step;
                    }
                }
            }
            Lane::Checkpoint => {
                if self.stop || host.journal().aborted().is_some() || !beside {
                    return if self.stop { JournalStep::Stop } else { JournalStep::Idle { wake_ns: u64::MAX } };
                }
                if let Some(step) = self.checkpoint_step(host, now) {
                    return step;
                }
                return JournalStep::Idle { wake_ns: self.next_background_ns(host.journal()) };
            }
        }
        if self.stop {
            // The commits whose flush is in flight finish first (unmount checkpoints them).
            return if host.journal().flush_in_flight() { JournalStep::Idle { wake_ns: u64::MAX } } else { JournalStep::Stop };
        }
        if now >= self.next_return_ns {
            if let Some((io, epoch)) = host.parts().0.return_begin() {
                self.next_return_ns = now + self.return_backoff_ns;
                return JournalStep::Work(JournalWork::Return { io, epoch });
            }
        }
        let next_commit = host.journal().running_since_ns().map_or(u64::MAX, |s| s.saturating_add(self.cfg.commit_interval_ns));
        let wake_ns = if beside { next_commit } else { next_commit.min(self.next_background_ns(host.journal())) };
        JournalStep::Idle { wake_ns }
    }

    /// When the checkpoint decision must look again with nothing else happening: the next
    /// write-back period, or the next snapshot of a placement that snapshots its map.
    fn next_background_ns(&self, journal: &Journal) -> u64 {
        let snapshot = if self.cfg.snapshot_period_ns == 0 || !journal.snapshots() { u64::MAX } else { self.next_snapshot_ns };
        self.next_writeback_ns.min(snapshot)
    }

    /// Whether a commit may begin beside the commits whose flush is in flight: when none is,
    /// or when each of them carried at most [`PIPELINE_SMALL_COMMIT`] handles. A commit of
    /// many syncs is a cohort of writers under load that come back together when it ends; a
    /// commit begun beside it would take the first few of them and split the cohort (measured:
    /// 55-58 syncs a commit against 87 at 100 closed streams, 10-20% fewer syncs a second).
    /// A commit of a few syncs is light load, where a sync arriving during another's flush
    /// owes it nothing and would otherwise wait for it (docs/JOURNALING.md, "Pipelined
    /// commits").
    fn pipeline_open(&self) -> bool {
        self.cfg.pipeline_any_size || self.flushing.iter().all(|(plan, _)| plan.handles <= PIPELINE_SMALL_COMMIT)
    }

    /// The commit lane's decision: a pending fallback, a commit, or None.
    fn commit_step(&mut self, host: &mut dyn Host, now: u64, wall_ns: i64, beside: bool) -> Option<JournalStep> {
        if self.checkpointing.is_some() && self.pending.is_some() {
            // A fallback rebuilds the log: not while a checkpoint is in flight.
            return Some(JournalStep::Idle { wake_ns: u64::MAX });
        }
        if let Some(work) = self.pending.take() {
            return Some(JournalStep::Work(work));
        }
        if host.journal().aborted().is_some() {
            self.effects.wake();
            return Some(if self.stop { JournalStep::Stop } else { JournalStep::Idle { wake_ns: u64::MAX } });
        }
        let j = host.journal();
        let commit = j.committing_tid().is_none()
            && j.flushing_count() < self.cfg.commit_pipeline.max(1) as usize
            && self.pipeline_open()
            && (j.commit_wanted()
                || j.commit_due(now, self.cfg.commit_interval_ns)
                || (self.want_space && !j.running_is_empty() && j.oldest_owed_tid().is_none())
                || (self.stop && !j.running_is_empty()));
        if !commit {
            return None;
        }
        if j.commit_wanted() && !self.stop && !self.want_space {
            if let Some(wake_ns) = self.batch_wait(j, now) {
                return Some(JournalStep::Idle { wake_ns });
            }
        }
        if beside {
            if let Some(cp) = &self.checkpointing {
                if host.journal().running_in_place().any(|b| cp.contains(b)) {
                    // Woken when the checkpoint completes.
                    return Some(JournalStep::Idle { wake_ns: u64::MAX });
                }
            }
        }
        self.batch = None;
        let overlap = self.checkpointing.is_some();
        let pipelined = host.journal().flushing_count() > 0;
        let (journal, cache) = host.parts();
        let plan = journal.commit_begin(cache, wall_ns)?;
        if overlap {
            self.effects.counted.push(Counted::Overlap);
        }
        if pipelined {
            self.effects.counted.push(Counted::Pipelined);
        }
        Some(JournalStep::Work(JournalWork::Commit { plan, started_ns: now }))
    }

    /// The checkpoint decision (the checkpoint lane's, or the commit lane's between commits):
    /// for log space, or for age; None when neither is due.
    fn checkpoint_step(&mut self, host: &mut dyn Host, now: u64) -> Option<JournalStep> {
        if self.checkpointing.is_some() {
            return Some(JournalStep::Idle { wake_ns: u64::MAX });
        }
        if let Some(step) = self.datasync_step(host) {
            return Some(step);
        }
        if let Some(target) = self.force_checkpoint {
            // Asked for (`okeanos checkpoint`): everything committed goes home, O_DUR included.
            if host.journal().oldest_owed_tid().is_some_and(|t| t <= target) {
                let goal = CheckpointGoal::Space { target_free: u64::MAX };
                if let Err(step) = self.unpark_for(host, goal) {
                    return Some(step);
                }
                let (journal, cache) = host.parts();
                if let Some(plan) = journal.checkpoint_begin(cache, goal) {
                    return Some(self.checkpoint_start(host.journal(), plan));
                }
                // What is left is the commit's in flight: look again when it completes.
                return Some(JournalStep::Idle { wake_ns: u64::MAX });
            }
            self.force_checkpoint = None;
            self.effects.wake_all = true;
        }
        // Quiet: nothing changed and nothing was read from the disk for `idle_after`.
        let activity = host.activity();
        if activity != self.idle_seen.0 {
            self.idle_seen = (activity, now);
        }
        if self.cfg.lazy_checkpoint && self.cfg.log_swap && !self.stop {
            // A crowded log moved to an empty one (manylogs): the head's at once, any other
            // when quiet (journal/swap.rs).
            let idle = now.saturating_sub(self.idle_seen.1) >= self.cfg.idle_after_ns;
            if let Some(plan) = host.parts().0.swap_begin(idle) {
                self.checkpointing = Some(Default::default());
                return Some(JournalStep::Work(JournalWork::Swap(plan)));
            }
        }
        if self.want_space || host.journal().space_low() {
            let goal = CheckpointGoal::Space { target_free: host.journal().placement().checkpoint_target() };
            if let Err(step) = self.unpark_for(host, goal) {
                return Some(step);
            }
            let (journal, cache) = host.parts();
            if let Some(plan) = journal.checkpoint_begin(cache, goal) {
                return Some(self.checkpoint_start(host.journal(), plan));
            }
            if host.journal().commit_in_flight() {
                // The space is the commit's in flight: look again when it completes.
                return Some(JournalStep::Idle { wake_ns: u64::MAX });
            }
            self.want_space = false;
            self.effects.wake_all = true;
        }
        if now >= self.next_writeback_ns {
            self.next_writeback_ns = now + self.cfg.writeback_period_ns;
            if self.cfg.idle_checkpoint {
                // Idle for `idle_after` (above), with transactions still owing blocks.
                if now.saturating_sub(self.idle_seen.1) >= self.cfg.idle_after_ns && host.journal().oldest_owed_tid().is_some() {
                    // Everything owed, whatever its age, in the bounded steps of age-based
                    // writeback (O_DUR blocks stay logged).
                    self.expiring = Some(u64::MAX);
                    self.effects.counted.push(Counted::IdleCheckpoint);
                    self.idle_seen.1 = now;
                }
            }
            // A lazy checkpoint writes nothing home for age (the period still paces the
            // journal's wake-ups).
            if !self.cfg.lazy_checkpoint {
                let expire = self.cfg.expire_ns.unwrap_or_else(|| host.journal().placement().defaults().expire.as_nanos() as u64);
                self.expiring = Some(now.saturating_sub(expire));
            }
        }
        if let Some(step) = self.early_step(host) {
            return Some(step);
        }
        if let Some(step) = self.snapshot_step(host, now) {
            return Some(step);
        }
        if let Some(owed_since_ns) = self.expiring {
            // Bounded steps (as pdflush writes back in chunks beside kjournald), with the
            // commit check between them.
            let goal = CheckpointGoal::Expired { owed_since_ns, max_blocks: EXPIRY_STEP_BLOCKS };
            if let Err(step) = self.unpark_for(host, goal) {
                return Some(step);
            }
            let (journal, cache) = host.parts();
            match journal.checkpoint_begin(cache, goal) {
                Some(plan) => {
                    let last = plan.written.len() < EXPIRY_STEP_BLOCKS;
                    let step = self.checkpoint_start(host.journal(), plan);
                    if last && matches!(step, JournalStep::Work(_)) {
                        self.expiring = None;
                    }
                    return Some(step);
                }
                None => self.expiring = None,
            }
        }
        None
    }

    /// Early writes of the running transaction's in-place data, when past the background
    /// threshold (journal/writeback.rs). The blocks are the lane's busy set: a commit that
    /// writes one of them in place waits for the step.
    fn early_step(&mut self, host: &mut dyn Host) -> Option<JournalStep> {
        let (journal, cache) = host.parts();
        let plan = journal.early_begin(cache)?;
        self.checkpointing = Some(plan.blocks.iter().map(|(b, _)| *b).collect());
        Some(JournalStep::Work(JournalWork::Early(plan)))
    }

    /// The fdatasyncs of overwrites waiting, in one step (journal/datasync.rs), unless a
    /// wanted commit covers them. Its blocks are the lane's busy set, as an early write's.
    fn datasync_step(&mut self, host: &mut dyn Host) -> Option<JournalStep> {
        if host.journal().datasync_flushing() >= self.cfg.commit_pipeline.max(1) as usize {
            // As many step flushes in flight as the pipeline allows: woken by one's return.
            return None;
        }
        let (journal, cache) = host.parts();
        let plan = journal.datasync_begin(cache)?;
        self.checkpointing = Some(plan.early.blocks.iter().map(|(b, _)| *b).collect());
        Some(JournalStep::Work(JournalWork::Datasync(plan)))
    }

    /// A snapshot of the map of logged blocks when one is due (manylogs, `snapshot_period=`):
    /// what is not kept logged goes home, so that recovery reads the logs only past it.
    fn snapshot_step(&mut self, host: &mut dyn Host, now: u64) -> Option<JournalStep> {
        let period = self.cfg.snapshot_period_ns;
        if period == 0 || now < self.next_snapshot_ns || !host.journal().snapshots() {
            return None;
        }
        self.next_snapshot_ns = now + period;
        let (journal, cache) = host.parts();
        let plan = journal.checkpoint_begin(cache, CheckpointGoal::Snapshot)?;
        let step = self.checkpoint_start(host.journal(), plan);
        if matches!(step, JournalStep::Work(_)) {
            self.effects.counted.push(Counted::Snapshot);
        } else {
            // It clashed with the commit in flight: planned again after it.
            self.next_snapshot_ns = now;
        }
        Some(step)
    }

    /// Hands out a planned checkpoint, unless the commit in flight writes one of its blocks in
    /// place (then it waits for that commit, and is planned again).
    fn checkpoint_start(&mut self, j: &Journal, plan: CheckpointPlan) -> JournalStep {
        if j.committing_tid().is_some() {
            let clash = plan.written.iter().any(|(b, _)| j.committing_writes_in_place(*b));
            if clash {
                // Woken when the commit completes; planned again then.
                return JournalStep::Idle { wake_ns: u64::MAX };
            }
            self.effects.counted.push(Counted::Overlap);
        }
        self.checkpointing = Some(plan.written.iter().map(|(b, _)| *b).collect());
        JournalStep::Work(JournalWork::Checkpoint(plan))
    }

    /// A checkpoint writes owed buffers home from DRAM: the host loads the parked ones it will
    /// write from NVM first (nvm journal). A failed load aborts the journal. Blocks parked in
    /// a log (manylogs) are copied home by the checkpoint's plan instead.
    fn unpark_for(&mut self, host: &mut dyn Host, goal: CheckpointGoal) -> Result<(), JournalStep> {
        {
            let (journal, cache) = host.parts();
            if cache.parked_count() == 0 || journal.parks_on_device() {
                return Ok(());
            }
        }
        let (journal, cache) = host.parts();
        let chosen = journal.checkpoint_choose(cache, goal);
        for b in chosen {
            if let Err(e) = host.unpark(b) {
                host.parts().0.commit_failed(format!("loading block {b} from NVM: {e}"));
                self.effects.wake_all = true;
                return Err(JournalStep::Idle { wake_ns: u64::MAX });
            }
        }
        Ok(())
    }

    /// Transaction batching, as jbd2 does it (`min_batch_time`/`max_batch_time`): when a sync
    /// asks for a commit while other writers were active in the last one, wait up to about one
    /// commit time for them to join, as long as handles keep arriving. Syncs that arrive while
    /// a commit is in flight share the next one anyway; this lets the writers that the last
    /// commit woke up make it into the next one too, instead of trailing one commit behind.
    /// Returns when to look again, or None to commit now.
    ///
    /// The window trades a sync's latency for the bytes its commit's fixed part costs
    /// (`batch=`). For latency (the default) it is a quarter of a commit, ended early by
    /// `batch_handles`. For bytes, past `batch_handles` however many handles joined, a
    /// transaction waits up to `max_batch_time` for more while it is
    /// - whole-heavy: its metadata blocks logged whole outweigh its handles' own journal bytes
    ///   (records, data blocks). Each sync that joins may share those blocks; many files
    ///   whose inodes spread over many table blocks share them only in commits of a good
    ///   part of all the files, so the window is the user's bound, not a commit's time
    ///   (docs/JOURNALING.md, "Batching for bytes");
    /// - padding-heavy: a transaction of records alone, whose fast commit's fields and
    ///   padding to the journal's write unit (a sector written short, else a block) would
    ///   exceed a sixty-fourth of what its handles carry ([`Scheduler::padding_heavy`]). Each
    ///   sync that joins fills what would be padding. Under light load this is what turns a
    ///   block a commit into a block of many syncs.
    ///
    /// Such a window ends as soon as the transaction is neither, or at a silence of
    /// [`quiet_gaps`] of the gaps handles have been arriving at. Other transactions (whole data blocks
    /// under data journaling, or fast commits already full) have little to share and batch as
    /// for latency.
    fn batch_wait(&mut self, j: &Journal, now: u64) -> Option<u64> {
        if self.last_commit_handles < 2 {
            return None;
        }
        let handles = j.running_handles();
        let (whole_heavy, padding_heavy) = if self.cfg.batch_for_bytes {
            let (shared, own) = j.running_shape();
            (shared > own, shared == 0 && self.padding_heavy(handles))
        } else {
            (false, false)
        };
        let for_bytes = whole_heavy || padding_heavy;
        // A quarter of a commit: waiting the whole commit time (jbd2's choice) idled the device
        // while every writer of the last commit came back, and halved what ordered mode served
        // at 100 streams; not waiting at all doubled the journal bytes per sync of cheap
        // commits (docs/BENCHMARKS.md, "Batching").
        let commit = if for_bytes { self.cfg.max_batch_ns } else { self.avg_commit_ns / 4 };
        let window = commit.clamp(self.cfg.min_batch_ns, self.cfg.max_batch_ns);
        if window == 0 {
            return None;
        }
        // The window goes on while handles keep arriving: a slice of it with none ends it. A
        // window for bytes waits for handles that come at the load's own pace: its slice is
        // k of the gaps handles have been arriving at, at most the window (a quarter of it
        // while the pace is unknown). Arrivals at that pace leave a slice empty about once in
        // e^k slices, and the window holds window/gap/k of them: k = 2 + ln(window/gap), at
        // least 4, keeps the chance that one empty slice ends a window that arrivals would
        // have filled near one in twenty (four gaps alone ended a 300 ms window at 8,000
        // streams a second after 3-80 ms: docs/BENCHMARKS.md, "Batching for shared blocks").
        // So a closed loop whose writers have all joined (arrivals tens of microseconds apart)
        // commits within a few hundred microseconds, and 1,000 streams of a sync a second wait
        // as long as they fill.
        let slice = match (for_bytes, self.arrival_gap_ns) {
            (true, gap) if gap > 0 => gap.saturating_mul(quiet_gaps(window, gap)).min(window),
            (true, _) => window / 4,
            (false, _) => window / 8,
        }
        .max(20_000);
        // A window for bytes looks last at its end (its slices may be as long as it).
        let next = |started: u64| if for_bytes { (now + slice).min(started + window) } else { now + slice };
        if !for_bytes && self.cfg.batch_handles > 0 && handles >= self.cfg.batch_handles {
            // Enough syncs to share the commit's flushes: waiting for more idles the device
            // (docs/BENCHMARKS.md, "Batching").
            return None;
        }
        match self.batch {
            // A window for bytes ends as soon as the padding is filled or the handles' own
            // bytes outweigh the blocks they share.
            Some(Batch { for_bytes: true, .. }) if !for_bytes => None,
            None => {
                let next_ns = next(now);
                self.batch = Some(Batch { started_ns: now, handles_seen: handles, next_ns, for_bytes });
                Some(next_ns)
            }
            Some(Batch { next_ns, .. }) if now < next_ns => Some(next_ns),
            Some(Batch { started_ns, handles_seen, .. }) => {
                if handles > handles_seen && now - started_ns < window {
                    let next_ns = next(started_ns);
                    self.batch = Some(Batch { started_ns, handles_seen: handles, next_ns, for_bytes });
                    Some(next_ns)
                } else {
                    None
                }
            }
        }
    }

    /// Whether a fast commit of the running transaction's `handles` would spend more than a
    /// sixty-fourth of what they carry on its fixed part and its padding to the journal's write
    /// unit, as the last fast commits' bytes a handle predict it. False until a fast commit
    /// was seen, after a classic one, or where the unit is unknown.
    fn padding_heavy(&self, handles: u32) -> bool {
        let bs = self.cfg.block_size as usize;
        if bs == 0 || !self.last_fast || self.fast_share == 0 || handles == 0 {
            return false;
        }
        use crate::format::journal::{FastCommit, FAST_FIXED_LEN};
        let own = handles as usize * self.fast_share as usize;
        let written = FastCommit::written_len(bs, own + FAST_FIXED_LEN, self.cfg.short_commits);
        (written.saturating_sub(own) as u64) * PADDING_SHARE > own as u64
    }
}

/// How many arrival gaps without a handle end a window for bytes of `window` ns, handles
/// arriving `gap` ns apart: 2 + ln(window/gap), at least 4 ([`Scheduler::batch_wait`]).
fn quiet_gaps(window: u64, gap: u64) -> u64 {
    let arrivals = (window / gap.max(1)).max(1) as f64;
    (2.0 + arrivals.ln()).ceil().max(4.0) as u64
}

//! The journal threads: each loops over the scheduler's next step (journal/scheduler/, the
//! decisions, without I/O), runs its I/O outside the state lock, and reports it back. The
//! engine keeps what the scheduler leaves out: threads, the lock, condition variables, the
//! clock, and the statistics. The simulator drives the same scheduler step by step
//! ([`Okeanos::journal_poll`], [`Okeanos::journal_complete`]).

use crate::ids::HomeBlock;
use super::{Core, Inner, Okeanos};
use crate::fs::FsState;
use crate::journal::scheduler::{Counted, Host};
pub use crate::journal::scheduler::{JournalStep, JournalWork, Lane};
use crate::journal::transaction::Tid;
use crate::journal::Journal;
use crate::cache::Cache;
use crate::runtime;
use crate::stats::LanePhase;
use std::sync::Arc;

/// The file system as the scheduler's host.
impl Host for FsState {
    fn journal(&self) -> &Journal {
        &self.journal
    }

    fn parts(&mut self) -> (&mut Journal, &mut Cache) {
        (&mut self.journal, &mut self.cache)
    }

    fn activity(&self) -> u64 {
        self.dirty_epoch + self.read_misses
    }

    fn unpark(&mut self, block: HomeBlock) -> Result<(), String> {
        FsState::unpark(self, block).map_err(|e| e.to_string())
    }

    fn freed(&mut self, blocks: Vec<HomeBlock>, inodes: Vec<u32>) {
        for b in blocks {
            self.pending_free_blocks.remove(&b);
        }
        for i in inodes {
            self.pending_free_inodes.remove(&i);
        }
    }

    fn read_only(&mut self, why: String) {
        self.read_only = Some(why);
    }
}

/// If the journal thread dies (a broken invariant panicked), the journal is aborted and every
/// waiter told, instead of syncs waiting forever for a thread that is gone.
struct AbortOnPanic(Arc<Inner>);

impl Drop for AbortOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut core = self.0.core.lock().unwrap_or_else(|e| e.into_inner());
            // As any broken invariant: the journal stops and the file system turns read-only
            // with the reason, so that what happened is visible, not only to the syncs waiting.
            self.0.stop_journal(&mut core, "the journal thread failed (a bug: see the log for the panic)".into());
            core.sched.stop();
            self.0.deliver_syncs(&mut core, true);
            drop(core);
            self.0.wake_all();
        }
    }
}

/// Charges the commit lane's time to its parts ([`LaneTimes`](crate::stats::LaneTimes)) as
/// the thread holding the lane goes from one to the next; a no-op on the checkpoint lane.
pub(super) struct LaneClock<'a> {
    inner: &'a Inner,
    on: bool,
    at: u64,
}

impl<'a> LaneClock<'a> {
    pub(super) fn new(inner: &'a Inner, on: bool) -> Self {
        LaneClock { inner, on, at: if on { inner.clock.now_ns() } else { 0 } }
    }

    /// The time since the last mark was spent in `phase`.
    pub(super) fn mark(&mut self, phase: LanePhase) {
        if self.on {
            let now = self.inner.clock.now_ns();
            self.inner.stats.on_lane(phase, now.saturating_sub(self.at));
            self.at = now;
        }
    }

    /// The time since the last mark until `at` (an earlier reading of [`Self::now`]) was spent
    /// in `phase`: charged once it is known to have been the lane's.
    pub(super) fn mark_until(&mut self, phase: LanePhase, at: u64) {
        if self.on {
            self.inner.stats.on_lane(phase, at.saturating_sub(self.at));
            self.at = at;
        }
    }

    /// The mount's clock, when this lane is timed.
    pub(super) fn now(&self) -> u64 {
        if self.on { self.inner.clock.now_ns() } else { 0 }
    }

    /// Starts timing again from now (the time since the last mark was not the lane's).
    pub(super) fn restart(&mut self) {
        if self.on {
            self.at = self.inner.clock.now_ns();
        }
    }

    /// Runs a step's I/O: the commit lane's is timed as its writes and flushes. `defer`: all
    /// but the last stage's flush (a pipelined commit: flush.rs).
    pub(super) fn execute(&mut self, work: &JournalWork, defer: bool) -> Result<(), crate::device::DeviceError> {
        let inner = self.inner;
        if !self.on {
            return runtime::execute(work.io(), &inner.devs, &inner.stats);
        }
        inner.stats.on_lane(LanePhase::Steps, 1);
        let res = runtime::execute_lane(work.io(), &inner.devs, &inner.stats, &|| inner.clock.now_ns(), defer);
        self.at = inner.clock.now_ns();
        res
    }
}

thread_local! {
    /// Set on the commit lane's journal thread and on flushers (flush.rs): it wakes the
    /// sleeping syncs of a commit it finishes after it lets go of the state lock, not under
    /// it (`Core::owed_wake`).
    pub(super) static WAKES_AFTER_UNLOCK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

pub(super) fn journal_thread(inner: Arc<Inner>, lane: Lane) {
    let _guard = AbortOnPanic(inner.clone());
    WAKES_AFTER_UNLOCK.with(|d| d.set(lane == Lane::Commit));
    let me = Okeanos { inner, _user: None };
    let inner = &me.inner;
    let cv = match lane {
        Lane::Commit => &inner.jcv,
        Lane::Checkpoint => &inner.ccv,
    };
    let mut clock = LaneClock::new(inner, lane == Lane::Commit);
    let mut core = me.lock();
    loop {
        if lane == Lane::Commit {
            // A sync leading its write group runs the lane (leader.rs): wait until it lets go.
            core.lane_waiter = core.commit_lane_busy;
            if core.commit_lane_busy {
                core = cv.wait(core).unwrap_or_else(|e| e.into_inner());
                // The leader counted the lane's time meanwhile.
                clock.restart();
                continue;
            }
        }
        let now = inner.clock.now_ns();
        let step = me.step_begin(&mut core, now, lane);
        if let Some(owed) = core.owed_wake.take() {
            // A commit settled while planning (an error, or nothing to write): rare; wake now.
            inner.wake_committed(owed);
        }
        match step {
            JournalStep::Stop => return,
            JournalStep::Idle { wake_ns } => {
                clock.mark(LanePhase::Plan);
                let leads = core.leads;
                let phase = if wake_ns == u64::MAX {
                    core = cv.wait(core).unwrap_or_else(|e| e.into_inner());
                    LanePhase::Idle
                } else {
                    let wait = std::time::Duration::from_nanos(wake_ns.saturating_sub(now).max(20_000));
                    core = cv.wait_timeout(core, wait).unwrap_or_else(|e| e.into_inner()).0;
                    LanePhase::Window
                };
                if core.leads == leads {
                    clock.mark(phase);
                } else {
                    // A leader held the lane meanwhile and counted its time.
                    clock.restart();
                }
            }
            JournalStep::Work(work) => {
                clock.mark(LanePhase::Plan);
                let commit_lane = lane == Lane::Commit;
                core.commit_lane_busy |= commit_lane;
                // A commit's flush, or an fdatasync step's on either lane, may go to a flusher.
                let defer = (commit_lane || matches!(work, JournalWork::Datasync(_))) && me.defers_flush(&core, &work);
                drop(core);
                let res = match lane {
                    Lane::Commit => clock.execute(&work, defer),
                    Lane::Checkpoint if defer => runtime::execute_without_last_flush(work.io(), &inner.devs, &inner.stats),
                    Lane::Checkpoint => runtime::execute_yielding(work.io(), &inner.devs, &inner.stats, &mut || me.yield_to_commit()),
                };
                core = me.lock();
                clock.mark(LanePhase::Lock);
                if commit_lane {
                    core.commit_lane_busy = false;
                }
                if defer {
                    me.step_written(&mut core, work, res);
                } else {
                    me.step_finish(&mut core, work, res);
                }
                clock.mark(LanePhase::Finish);
                if let Some(owed) = core.owed_wake.take() {
                    // The commit's sleeping syncs are woken with the lock let go: the first
                    // woken take it for their next appends while this thread wakes the rest,
                    // instead of all of them queueing on it behind this thread's next plan
                    // (docs/BENCHMARKS.md, "Waking a commit's syncs after the lane lets go").
                    let leads = core.leads;
                    drop(core);
                    inner.wake_committed(owed);
                    let woke = clock.now();
                    core = me.lock();
                    if core.leads == leads {
                        // The wake-up is the lane's answer to the commit's syncs; taking the
                        // lock again after it, a wait for the lock (docs/OBSERVABILITY.md).
                        clock.mark_until(LanePhase::Answer, woke);
                        clock.mark(LanePhase::Lock);
                    } else {
                        // The lane was free meanwhile, and a leader took it and counted its
                        // own time: this thread's wake-ups and wait for the lock are not the
                        // lane's (counted, they made its parts exceed the time it was up).
                        clock.restart();
                    }
                }
            }
        }
    }
}

impl Okeanos {
    /// Between two slices of a checkpoint beside commits: if a commit is in flight, wait until
    /// it completes, so that its writes find the device's queue holding at most one slice of
    /// home writes. One commit per slice at most: the checkpoint always goes on.
    fn yield_to_commit(&self) {
        let mut core = self.lock();
        let Some(tid) = core.fs.journal.committing_tid() else { return };
        while core.fs.journal.committed_tid() < tid && core.fs.journal.aborted().is_none() && !core.sched.abandoned() {
            core = self.inner.ccv.wait(core).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Whether checkpoints run beside commits (a lane of their own) on this mount.
    pub(super) fn checkpoint_beside(&self) -> bool {
        let core = self.lock();
        core.sched.beside(&core.fs.journal)
    }

    /// The scheduler's next step for `lane` at `now`, its effects carried out.
    pub(super) fn step_begin(&self, core: &mut Core, now: u64, lane: Lane) -> JournalStep {
        let wall = self.inner.clock.wall_ns();
        let staged = self.suspend_stages(core);
        let Core { fs, sched, .. } = &mut *core;
        let step = sched.poll(fs, now, wall, lane);
        self.inner.carry_out(core);
        if staged {
            self.resume_stages(core);
        }
        step
    }

    /// Reports a step's I/O to the scheduler, and carries out what follows.
    pub(super) fn step_finish(&self, core: &mut Core, work: JournalWork, res: Result<(), crate::device::DeviceError>) {
        let inner = &self.inner;
        let now = inner.clock.now_ns();
        if core.fs.nvm_parking() {
            let p = &core.fs.journal.placement();
            inner.stats.on_nvm_slots(p.capacity(), p.capacity() - p.free_blocks(), core.fs.cache.parked_count() as u64);
        }
        inner.stats.on_checkpoint_counts(core.fs.journal.checkpoint_counts());
        let Core { fs, sched, .. } = &mut *core;
        sched.finish(fs, now, work, res);
        inner.carry_out(core);
    }

    // ----------------------------------------------------------------------------------------
    // Driving the journal step by step (the simulator; mounts with `manual_journal`).

    /// Takes the next step of `lane` at the clock's current time (the checkpoint lane has
    /// work only when checkpoints run beside commits on this mount).
    pub fn journal_poll(&self, lane: Lane) -> JournalStep {
        let mut core = self.lock();
        assert!(core.manual, "journal_poll is for mounts driven step by step");
        let now = self.inner.clock.now_ns();
        self.step_begin(&mut core, now, lane)
    }

    /// Hands back the work of [`journal_poll`](Self::journal_poll) once its I/O ran.
    pub fn journal_complete(&self, work: JournalWork, res: Result<(), crate::device::DeviceError>) {
        let mut core = self.lock();
        self.step_finish(&mut core, work, res);
    }

    /// Runs the I/O of a step on the mount's devices, counting it (the simulator times it).
    pub fn journal_execute(&self, work: &JournalWork) -> Result<(), crate::device::DeviceError> {
        runtime::execute(work.io(), &self.inner.devs, &self.inner.stats)
    }

    /// The transaction a sync of `ino` must see committed (requesting its commit), or None if
    /// it already is. An fdatasync that a mount would serve in place (journal/datasync.rs)
    /// commits the running transaction here: the simulator does not model the in-place step.
    pub fn sync_target(&self, ino: u32, datasync: bool) -> Option<Tid> {
        let mut core = self.lock();
        let tid = match core.fs.sync_need(ino, datasync) {
            crate::fs::DatasyncNeed::Nothing => Tid::ZERO,
            crate::fs::DatasyncNeed::Commit(t) => t,
            crate::fs::DatasyncNeed::InPlace(_) => core.fs.journal.running_tid(),
            crate::fs::DatasyncNeed::Asked { tid, .. } => tid,
        };
        let j = &mut core.fs.journal;
        if j.committed_tid() >= tid {
            return None;
        }
        j.request_commit(tid);
        Some(tid)
    }

    /// Requests a commit of everything done so far; the transaction to wait for, if any.
    pub fn sync_all_target(&self) -> Option<Tid> {
        let mut core = self.lock();
        let j = &mut core.fs.journal;
        let tid = j.current_tid();
        if j.committed_tid() >= tid {
            return None;
        }
        j.request_commit(tid);
        Some(tid)
    }

    /// The newest committed transaction.
    pub fn committed_tid(&self) -> Tid {
        Tid::new(self.inner.committed.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Counts one sync and its latency (for drivers that wait for commits themselves).
    pub fn record_sync(&self, latency_ns: u64) {
        self.inner.stats.on_sync(latency_ns);
    }
}

impl Inner {
    /// Carries out the effects of the scheduler's last call, under the state lock: counters,
    /// the committed transaction, and the waiters to wake.
    pub(super) fn carry_out(&self, core: &mut Core) {
        let fx = core.sched.effects();
        if fx.is_empty() {
            return;
        }
        for c in fx.counted.drain(..) {
            match c {
                Counted::Overlap => self.stats.on_overlap(),
                Counted::Pipelined => self.stats.on_pipelined_commit(),
                Counted::Snapshot => self.stats.on_snapshot(),
                Counted::IdleCheckpoint => self.stats.on_idle_checkpoint(),
                Counted::Checkpoint => self.stats.on_checkpoint(),
                Counted::Fallback => self.stats.on_fallback(),
                Counted::LogSwap => self.stats.on_log_swap(),
                Counted::EarlyWrites(n) => self.stats.on_early_writes(n),
                Counted::DatasyncStep(n) => self.stats.on_datasync_step(n),
                Counted::Commit { handles, journal_blocks, records } => self.stats.on_commit(handles, journal_blocks, records),
            }
        }
        let committed = fx.committed.take();
        if std::mem::take(&mut fx.notify_commit_lane) {
            // The journal thread, or a leader waiting out a batching window (leader.rs).
            self.jcv.notify_all();
        }
        if std::mem::take(&mut fx.notify_checkpoint_lane) {
            self.ccv.notify_one();
        }
        let handles = std::mem::take(&mut fx.notify_handles);
        let all = std::mem::take(&mut fx.wake_all);
        let syncs = std::mem::take(&mut fx.deliver_syncs);
        if let Some(tid) = committed {
            self.committed(core, tid);
        }
        if handles && !all {
            self.cv.notify_all();
        }
        if all {
            self.wake_all();
        }
        if syncs {
            self.deliver_syncs(core, false);
        }
    }
}

//! The journal's step function: the one decision procedure that the journal thread loops over
//! (as jbd2's kjournald) and the simulator drives in virtual time. Commit when a sync, the
//! commit interval, a full transaction or a waiting handle asks for it; checkpoint when the log
//! runs short or buffers expire; sleep until the next deadline otherwise. Its I/O runs outside
//! the state lock and is reported back (`step_finish`).

use super::{Core, Inner, Okeanos};
use crate::journal::checkpoint::CheckpointGoal;
use crate::journal::transaction::Tid;
use crate::runtime;
use std::sync::Arc;

/// Blocks one step of age-based writeback writes at most (4 MiB with 4 KiB blocks).
const EXPIRY_STEP_BLOCKS: usize = 1024;

/// Journal work taken by [`Okeanos::journal_poll`]: run its I/O, then hand it back to
/// [`Okeanos::journal_complete`].
pub enum JournalWork {
    Commit { plan: crate::journal::commit::CommitPlan, started_ns: u64 },
    Checkpoint(crate::journal::checkpoint::CheckpointPlan),
    /// The commit in flight failed on the journal server: made durable locally instead.
    Fallback { fallback: crate::journal::fallback::FallbackPlan, commit: crate::journal::commit::CommitPlan, started_ns: u64 },
    /// A host that fell back returns to its journal server.
    Return { io: crate::journal::plan::IoPlan, epoch: u64 },
    /// A manylogs log swap (in a checkpoint's place).
    Swap(crate::journal::swap::SwapPlan),
    /// Early writes of the running transaction's in-place data (journal/writeback.rs), in a
    /// checkpoint's place.
    Early(crate::journal::writeback::EarlyPlan),
    /// fdatasyncs of overwrites: their blocks written in place and flushed, without a commit
    /// (journal/datasync.rs), in a checkpoint's place.
    Datasync(crate::journal::datasync::DatasyncPlan),
}

/// How often a host that fell back tries to return to its server (when its local journal is
/// empty): first after 2 s, doubling after each failure up to a minute (a hung server costs
/// the journal thread one acknowledgement timeout per try).
const RETURN_RETRY_NS: u64 = 2_000_000_000;
const RETURN_RETRY_MAX_NS: u64 = 60_000_000_000;

impl JournalWork {
    /// The writes and flushes to carry out.
    pub fn io(&self) -> &crate::journal::plan::IoPlan {
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

// --------------------------------------------------------------------------------------------
// The journal thread.

/// Whether a failed commit may fall back to the local journal: only an error of the journal
/// server's kind that [`RemoteError::lets_host_fall_back`](crate::remote::client::RemoteError::lets_host_fall_back)
/// says so of; an error of the host's own devices stops the journal.
fn falls_back(e: &crate::device::DeviceError) -> bool {
    matches!(e, crate::device::DeviceError::Remote(r) if r.lets_host_fall_back())
}

/// If the journal thread dies (a broken invariant panicked), the journal is aborted and every
/// waiter told, instead of syncs waiting forever for a thread that is gone.
struct AbortOnPanic(Arc<Inner>);

impl Drop for AbortOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut core = self.0.core.lock().unwrap_or_else(|e| e.into_inner());
            core.fs.journal.abort("the journal thread failed (a bug: see the log for the panic)");
            core.stop = true;
            self.0.deliver_syncs(&mut core, true);
            drop(core);
            self.0.wake_all();
        }
    }
}

/// The two kinds of journal work that may run at once: commits (and a remote journal's
/// fallback and return) on the journal thread, checkpoints on the checkpoint thread — when the
/// placement allows it ([`Okeanos::checkpoint_beside`]); otherwise the commit lane does both,
/// in turn, and the checkpoint lane has nothing to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    Commit,
    Checkpoint,
}

pub(super) fn journal_thread(inner: Arc<Inner>, lane: Lane) {
    let _guard = AbortOnPanic(inner.clone());
    let me = Okeanos { inner, _user: None };
    let inner = &me.inner;
    let cv = match lane {
        Lane::Commit => &inner.jcv,
        Lane::Checkpoint => &inner.ccv,
    };
    let mut core = me.lock();
    loop {
        let now = inner.clock.now_ns();
        match me.step_begin(&mut core, now, lane) {
            JournalStep::Stop => return,
            JournalStep::Idle { wake_ns } => {
                core = if wake_ns == u64::MAX {
                    cv.wait(core).unwrap_or_else(|e| e.into_inner())
                } else {
                    let wait = std::time::Duration::from_nanos(wake_ns.saturating_sub(now).max(20_000));
                    cv.wait_timeout(core, wait).unwrap_or_else(|e| e.into_inner()).0
                };
            }
            JournalStep::Work(work) => {
                drop(core);
                let res = match lane {
                    Lane::Commit => runtime::execute(work.io(), &inner.devs, &inner.stats),
                    Lane::Checkpoint => runtime::execute_yielding(work.io(), &inner.devs, &inner.stats, &mut || me.yield_to_commit()),
                };
                core = me.lock();
                me.step_finish(&mut core, work, res);
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
        while core.fs.journal.committed_tid() < tid && core.fs.journal.aborted().is_none() && !core.abandoned {
            core = self.inner.ccv.wait(core).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Whether checkpoints run beside commits (a lane of their own) on this mount.
    pub(super) fn checkpoint_beside(&self) -> bool {
        self.beside(&self.lock())
    }

    fn beside(&self, core: &Core) -> bool {
        self.inner.checkpoint_thread && core.fs.journal.placement().checkpoint_beside_commit()
    }

    /// The journal's next step at `now` for `lane`: the one decision procedure of the journal
    /// threads and of the simulator. Commit when a sync, the commit interval, a full
    /// transaction or a waiting handle asks for it; checkpoint when the log runs short or
    /// buffers expire.
    ///
    /// Beside each other, a commit and a checkpoint never write the same block home: a commit
    /// whose in-place blocks (ordered data) the checkpoint in flight writes waits for it, and a
    /// checkpoint that would write a block the commit in flight writes in place waits for the
    /// commit (two writes of one block in flight at once could land in either order).
    fn step_begin(&self, core: &mut Core, now: u64, lane: Lane) -> JournalStep {
        if core.abandoned {
            return JournalStep::Stop;
        }
        let beside = self.beside(core);
        match lane {
            Lane::Commit => {
                if !beside && core.checkpointing.is_none() {
                    // Between commits, fdatasyncs of overwrites go first (unless a commit is
                    // wanted: it covers them), then a due snapshot of the map, and early writes
                    // past the background threshold: a busy commit lane would otherwise put
                    // them off for as long as writers keep coming (and a commit would write
                    // the in-place data itself, which is what a small sync must not wait for).
                    if let Some(step) = self.datasync_step(core) {
                        return step;
                    }
                    if let Some(step) = self.snapshot_step(core, now) {
                        return step;
                    }
                    if let Some(step) = self.early_step(core) {
                        return step;
                    }
                }
                if let Some(step) = self.commit_step(core, now, beside) {
                    return step;
                }
                if !beside {
                    if let Some(step) = self.checkpoint_step(core, now) {
                        return step;
                    }
                }
            }
            Lane::Checkpoint => {
                if core.stop || core.fs.journal.aborted().is_some() || !beside {
                    return if core.stop { JournalStep::Stop } else { JournalStep::Idle { wake_ns: u64::MAX } };
                }
                if let Some(step) = self.checkpoint_step(core, now) {
                    return step;
                }
                return JournalStep::Idle { wake_ns: self.next_background_ns(core) };
            }
        }
        if core.stop {
            return JournalStep::Stop;
        }
        if now >= core.next_return_ns {
            if let Some((io, epoch)) = core.fs.journal.return_begin() {
                core.next_return_ns = now + core.return_backoff_ns;
                return JournalStep::Work(JournalWork::Return { io, epoch });
            }
        }
        let interval = self.inner.opts.commit_interval.as_nanos() as u64;
        let next_commit = core.fs.journal.running_since_ns().map_or(u64::MAX, |s| s.saturating_add(interval));
        let wake_ns = if beside { next_commit } else { next_commit.min(self.next_background_ns(core)) };
        JournalStep::Idle { wake_ns }
    }

    /// When the checkpoint decision must look again with nothing else happening: the next
    /// write-back period, or the next snapshot of a placement that snapshots its map.
    fn next_background_ns(&self, core: &Core) -> u64 {
        let snapshot = if self.inner.opts.snapshot_period.is_zero() || !core.fs.journal.snapshots() { u64::MAX } else { core.next_snapshot_ns };
        core.next_writeback_ns.min(snapshot)
    }

    /// The commit lane's decision: a pending fallback, a commit, or None.
    fn commit_step(&self, core: &mut Core, now: u64, beside: bool) -> Option<JournalStep> {
        if core.checkpointing.is_some() && core.pending.is_some() {
            // A fallback rebuilds the log: not while a checkpoint is in flight.
            return Some(JournalStep::Idle { wake_ns: u64::MAX });
        }
        if let Some(work) = core.pending.take() {
            return Some(JournalStep::Work(work));
        }
        if core.fs.journal.aborted().is_some() {
            self.inner.wake_all();
            self.inner.deliver_syncs(core, false);
            return Some(if core.stop { JournalStep::Stop } else { JournalStep::Idle { wake_ns: u64::MAX } });
        }
        let interval = self.inner.opts.commit_interval.as_nanos() as u64;
        let j = &core.fs.journal;
        let commit = j.committing_tid().is_none()
            && (j.commit_wanted()
                || j.commit_due(now, interval)
                || (core.want_space && !j.running_is_empty() && j.oldest_owed_tid().is_none())
                || (core.stop && !j.running_is_empty()));
        if !commit {
            return None;
        }
        if j.commit_wanted() && !core.stop && !core.want_space {
            if let Some(wake_ns) = self.batch_wait(core, now) {
                return Some(JournalStep::Idle { wake_ns });
            }
        }
        if beside {
            if let Some(cp) = &core.checkpointing {
                if core.fs.journal.running_in_place().any(|b| cp.contains(b)) {
                    // Woken when the checkpoint completes.
                    return Some(JournalStep::Idle { wake_ns: u64::MAX });
                }
            }
        }
        core.batch = None;
        let wall = self.inner.clock.wall_ns();
        let overlap = core.checkpointing.is_some();
        let Core { fs, .. } = &mut *core;
        let plan = fs.journal.commit_begin(&mut fs.cache, wall)?;
        if overlap {
            self.inner.stats.on_overlap();
        }
        Some(JournalStep::Work(JournalWork::Commit { plan, started_ns: now }))
    }

    /// The checkpoint decision (the checkpoint lane's, or the commit lane's between commits):
    /// for log space, or for age; None when neither is due.
    fn checkpoint_step(&self, core: &mut Core, now: u64) -> Option<JournalStep> {
        let opts = &self.inner.opts;
        if core.checkpointing.is_some() {
            return Some(JournalStep::Idle { wake_ns: u64::MAX });
        }
        if let Some(step) = self.datasync_step(core) {
            return Some(step);
        }
        if let Some(target) = core.force_checkpoint {
            // Asked for (`okeanos checkpoint`): everything committed goes home, O_DUR included.
            if core.fs.journal.oldest_owed_tid().is_some_and(|t| t <= target) {
                let goal = CheckpointGoal::Space { target_free: u64::MAX };
                if let Err(step) = self.unpark_for(core, goal) {
                    return Some(step);
                }
                if let Some(plan) = core.fs.journal.checkpoint_begin(&core.fs.cache, goal) {
                    return Some(self.checkpoint_start(core, plan));
                }
                // What is left is the commit's in flight: look again when it completes.
                return Some(JournalStep::Idle { wake_ns: u64::MAX });
            }
            core.force_checkpoint = None;
            self.inner.wake_all();
        }
        // Quiet: nothing changed and nothing was read from the disk for `idle_after`.
        let activity = core.fs.dirty_epoch + core.fs.read_misses;
        if activity != core.idle_seen.0 {
            core.idle_seen = (activity, now);
        }
        if opts.lazy_checkpoint && opts.log_swap && !core.stop {
            // A crowded log moved to an empty one (manylogs): the head's at once, any other
            // when quiet (journal/swap.rs).
            let idle = now.saturating_sub(core.idle_seen.1) >= opts.idle_after.as_nanos() as u64;
            if let Some(plan) = core.fs.journal.swap_begin(idle) {
                core.checkpointing = Some(Default::default());
                return Some(JournalStep::Work(JournalWork::Swap(plan)));
            }
        }
        if core.want_space || core.fs.journal.space_low() {
            let target = core.fs.journal.placement().checkpoint_target();
            if let Err(step) = self.unpark_for(core, CheckpointGoal::Space { target_free: target }) {
                return Some(step);
            }
            if let Some(plan) = core.fs.journal.checkpoint_begin(&core.fs.cache, CheckpointGoal::Space { target_free: target }) {
                return Some(self.checkpoint_start(core, plan));
            }
            if core.fs.journal.committing_tid().is_some() {
                // The space is the commit's in flight: look again when it completes.
                return Some(JournalStep::Idle { wake_ns: u64::MAX });
            }
            core.want_space = false;
            self.inner.wake_all();
        }
        if now >= core.next_writeback_ns {
            core.next_writeback_ns = now + opts.writeback_period.as_nanos() as u64;
            if opts.idle_checkpoint {
                // Idle for `idle_after` (above), with transactions still owing blocks.
                if now.saturating_sub(core.idle_seen.1) >= opts.idle_after.as_nanos() as u64 && !core.fs.journal.oldest_owed_tid().is_none() {
                    // Everything owed, whatever its age, in the bounded steps of age-based
                    // writeback (O_DUR blocks stay logged).
                    core.expiring = Some(u64::MAX);
                    self.inner.stats.on_idle_checkpoint();
                    core.idle_seen.1 = now;
                }
            }
            // A lazy checkpoint writes nothing home for age (the period still paces the
            // journal's wake-ups).
            if !opts.lazy_checkpoint {
                core.expiring = Some(now.saturating_sub(opts.expire_or(core.fs.journal.placement().defaults().expire).as_nanos() as u64));
            }
        }
        if let Some(step) = self.early_step(core) {
            return Some(step);
        }
        if let Some(step) = self.snapshot_step(core, now) {
            return Some(step);
        }
        if let Some(owed_since_ns) = core.expiring {
            // Bounded steps (as pdflush writes back in chunks beside kjournald), with the
            // commit check between them.
            let goal = CheckpointGoal::Expired { owed_since_ns, max_blocks: EXPIRY_STEP_BLOCKS };
            if let Err(step) = self.unpark_for(core, goal) {
                return Some(step);
            }
            match core.fs.journal.checkpoint_begin(&core.fs.cache, goal) {
                Some(plan) => {
                    let last = plan.written.len() < EXPIRY_STEP_BLOCKS;
                    let step = self.checkpoint_start(core, plan);
                    if last && matches!(step, JournalStep::Work(_)) {
                        core.expiring = None;
                    }
                    return Some(step);
                }
                None => core.expiring = None,
            }
        }
        None
    }

    /// Early writes of the running transaction's in-place data, when past the background
    /// threshold (journal/writeback.rs). The blocks are the lane's busy set: a commit that
    /// writes one of them in place waits for the step.
    fn early_step(&self, core: &mut Core) -> Option<JournalStep> {
        let plan = core.fs.journal.early_begin(&core.fs.cache)?;
        core.checkpointing = Some(plan.blocks.iter().map(|(b, _)| *b).collect());
        Some(JournalStep::Work(JournalWork::Early(plan)))
    }

    /// The fdatasyncs of overwrites waiting, in one step (journal/datasync.rs), unless a
    /// wanted commit covers them. Its blocks are the lane's busy set, as an early write's.
    fn datasync_step(&self, core: &mut Core) -> Option<JournalStep> {
        let Core { fs, .. } = &mut *core;
        let plan = fs.journal.datasync_begin(&fs.cache)?;
        core.checkpointing = Some(plan.early.blocks.iter().map(|(b, _)| *b).collect());
        Some(JournalStep::Work(JournalWork::Datasync(plan)))
    }

    /// A snapshot of the map of logged blocks when one is due (manylogs, `snapshot_period=`):
    /// what is not kept logged goes home, so that recovery reads the logs only past it.
    fn snapshot_step(&self, core: &mut Core, now: u64) -> Option<JournalStep> {
        let period = self.inner.opts.snapshot_period.as_nanos() as u64;
        if period == 0 || now < core.next_snapshot_ns || !core.fs.journal.snapshots() {
            return None;
        }
        core.next_snapshot_ns = now + period;
        let plan = core.fs.journal.checkpoint_begin(&core.fs.cache, CheckpointGoal::Snapshot)?;
        let step = self.checkpoint_start(core, plan);
        if matches!(step, JournalStep::Work(_)) {
            self.inner.stats.on_snapshot();
        } else {
            // It clashed with the commit in flight: planned again after it.
            core.next_snapshot_ns = now;
        }
        Some(step)
    }

    /// Hands out a planned checkpoint, unless the commit in flight writes one of its blocks in
    /// place (then it waits for that commit, and is planned again).
    fn checkpoint_start(&self, core: &mut Core, plan: crate::journal::checkpoint::CheckpointPlan) -> JournalStep {
        let j = &core.fs.journal;
        if j.committing_tid().is_some() {
            let clash = plan.written.iter().any(|(b, _)| j.committing_writes_in_place(*b));
            if clash {
                // Woken when the commit completes; planned again then.
                return JournalStep::Idle { wake_ns: u64::MAX };
            }
            self.inner.stats.on_overlap();
        }
        core.checkpointing = Some(plan.written.iter().map(|(b, _)| *b).collect());
        JournalStep::Work(JournalWork::Checkpoint(plan))
    }

    /// A checkpoint writes owed buffers home from DRAM: loads the parked ones it will write
    /// from NVM first (nvm journal). A failed load aborts the journal. Blocks parked in a log
    /// (manylogs) are copied home by the checkpoint's plan instead.
    fn unpark_for(&self, core: &mut Core, goal: CheckpointGoal) -> Result<(), JournalStep> {
        if core.fs.cache.parked_count() == 0 || core.fs.journal.parks_on_device() {
            return Ok(());
        }
        for b in core.fs.journal.checkpoint_choose(&core.fs.cache, goal) {
            if let Err(e) = core.fs.unpark(b) {
                core.fs.journal.commit_failed(format!("loading block {b} from NVM: {e}"));
                self.inner.wake_all();
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
    fn batch_wait(&self, core: &mut Core, now: u64) -> Option<u64> {
        let opts = &self.inner.opts;
        if core.last_commit_handles < 2 {
            return None;
        }
        // A quarter of a commit: waiting the whole commit time (jbd2's choice) idled the device
        // while every writer of the last commit came back, and halved what ordered mode served
        // at 100 streams; not waiting at all doubled the journal bytes per sync of cheap
        // commits (docs/BENCHMARKS.md, "Batching").
        let window = (core.avg_commit_ns / 4).clamp(opts.min_batch_time.as_nanos() as u64, opts.max_batch_time.as_nanos() as u64);
        if window == 0 {
            return None;
        }
        let slice = (window / 8).max(20_000);
        let handles = core.fs.journal.running_handles();
        if opts.batch_handles > 0 && handles >= opts.batch_handles {
            // Enough syncs to share the commit's flushes: waiting for more idles the device
            // (docs/BENCHMARKS.md, "Batching").
            return None;
        }
        match core.batch {
            None => {
                core.batch = Some((now, handles, now + slice));
                Some(now + slice)
            }
            Some((_, _, next)) if now < next => Some(next),
            Some((start, seen, _)) => {
                if handles > seen && now - start < window {
                    core.batch = Some((start, handles, now + slice));
                    Some(now + slice)
                } else {
                    None
                }
            }
        }
    }

    /// Records the outcome of a step's I/O.
    fn step_finish(&self, core: &mut Core, work: JournalWork, res: Result<(), crate::device::DeviceError>) {
        let inner = &self.inner;
        let now = inner.clock.now_ns();
        // The other lane may be waiting for this step (a clash, or space held by a commit).
        match &work {
            JournalWork::Checkpoint(_) | JournalWork::Swap(_) | JournalWork::Early(_) | JournalWork::Datasync(_) => {
                core.checkpointing = None;
                inner.jcv.notify_one();
                inner.ccv.notify_one();
            }
            _ => inner.ccv.notify_one(),
        }
        if inner.devs.nvm.is_some() {
            let p = &core.fs.journal.placement();
            inner.stats.on_nvm_slots(p.capacity(), p.capacity() - p.free_blocks(), core.fs.cache.parked_count() as u64);
        }
        inner.stats.on_checkpoint_counts(core.fs.journal.checkpoint_counts());
        match (work, res) {
            (JournalWork::Commit { plan, started_ns }, Ok(())) => {
                self.commit_done(core, plan, started_ns, now);
                // The syncs of this transaction, and handles waiting for a commit; not the
                // syncs already waiting for the next one.
                inner.cv.notify_all();
                inner.deliver_syncs(core, false);
                return;
            }
            (JournalWork::Fallback { fallback, commit, started_ns }, Ok(())) => {
                let Core { fs, .. } = &mut *core;
                fs.journal.fallback_finish(&mut fs.cache, fallback);
                inner.stats.on_checkpoint();
                inner.stats.on_fallback();
                self.commit_done(core, commit, started_ns, now);
            }
            (JournalWork::Return { epoch, .. }, Ok(())) => {
                core.fs.journal.return_finish(epoch);
                core.return_backoff_ns = RETURN_RETRY_NS;
            }
            // Still unreachable (or failed half-way): stay in the local journal, try again later.
            (JournalWork::Return { .. }, Err(e)) if falls_back(&e) => {
                core.return_backoff_ns = (core.return_backoff_ns * 2).min(RETURN_RETRY_MAX_NS);
                core.next_return_ns = now + core.return_backoff_ns;
            }
            (JournalWork::Swap(plan), Ok(())) => {
                core.fs.journal.swap_finish(plan);
                inner.stats.on_log_swap();
            }
            (JournalWork::Early(plan), Ok(())) => {
                inner.stats.on_early_writes(plan.blocks.len() as u64);
                core.fs.journal.early_finish(plan);
            }
            (JournalWork::Datasync(plan), Ok(())) => {
                inner.stats.on_datasync_step(plan.covers.saturating_sub(core.fs.journal.datasyncs_done()));
                core.fs.journal.datasync_finish(plan);
            }
            (JournalWork::Checkpoint(plan), Ok(())) => {
                let Core { fs, .. } = &mut *core;
                fs.journal.checkpoint_finish(&mut fs.cache, plan);
                inner.stats.on_checkpoint();
                // Waiting handles look again and ask again if they still lack space.
                core.want_space = false;
            }
            (JournalWork::Checkpoint(plan), Err(e)) if falls_back(&e) => {
                // A checkpoint's only remote operation is its TRIM, which comes after the home
                // writes are flushed: the checkpoint is complete here, only the server still
                // holds the checkpointed transactions (replaying them again is harmless, and
                // the next checkpoint's TRIM covers them: trims are cumulative). The next
                // commit finds out whether the server is gone, and falls back then. Aborting
                // here would stop a host whose server died during a checkpoint.
                let Core { fs, .. } = &mut *core;
                fs.journal.checkpoint_finish(&mut fs.cache, plan);
                inner.stats.on_checkpoint();
                core.want_space = false;
            }
            (JournalWork::Commit { plan, started_ns }, Err(e)) if falls_back(&e) => {
                // The journal server failed: make the transaction durable in the local journal
                // (journal/fallback.rs); its syncs keep waiting until then.
                let Core { fs, .. } = &mut *core;
                match fs.journal.fallback_begin(&fs.cache) {
                    Some(fallback) => core.pending = Some(JournalWork::Fallback { fallback, commit: plan, started_ns }),
                    None => self.abort(core, format!("commit of transaction {} failed: {e}", plan.tid)),
                }
            }
            (work, Err(e)) => {
                let why = match work {
                    JournalWork::Commit { plan, .. } => format!("commit of transaction {} failed: {e}", plan.tid),
                    JournalWork::Fallback { commit, .. } => format!("commit of transaction {} failed on the journal server, then in the local journal: {e}", commit.tid),
                    JournalWork::Checkpoint(_) => format!("checkpoint failed: {e}"),
                    JournalWork::Return { .. } => format!("returning to the journal server failed: {e}"),
                    JournalWork::Swap(_) => format!("log swap failed: {e}"),
                    JournalWork::Early(_) => format!("background writeback failed: {e}"),
                    JournalWork::Datasync(_) => format!("writing overwrites in place for fdatasync failed: {e}"),
                };
                self.abort(core, why);
            }
        }
        inner.wake_all();
        inner.deliver_syncs(core, false);
    }

    fn commit_done(&self, core: &mut Core, plan: crate::journal::commit::CommitPlan, started_ns: u64, now: u64) {
        let Core { fs, .. } = &mut *core;
        let done = fs.journal.commit_finish(&mut fs.cache, now);
        let done_tid = done.tid;
        for b in done.freed_blocks {
            fs.pending_free_blocks.remove(&b);
        }
        for i in done.freed_inodes {
            fs.pending_free_inodes.remove(&i);
        }
        self.inner.stats.on_commit(plan.handles, plan.journal_blocks, plan.records);
        self.inner.committed(done_tid);
        let took = now.saturating_sub(started_ns);
        core.avg_commit_ns = if core.avg_commit_ns == 0 { took } else { (core.avg_commit_ns * 7 + took) / 8 };
        core.last_commit_handles = plan.handles;
    }

    /// Nothing commits after this; the file system turns read-only with the reason.
    fn abort(&self, core: &mut Core, why: String) {
        core.fs.journal.commit_failed(why.clone());
        core.fs.read_only = Some(why);
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
            crate::fs::DatasyncNeed::Nothing => 0,
            crate::fs::DatasyncNeed::Commit(t) => t,
            crate::fs::DatasyncNeed::InPlace(_) => core.fs.journal.running_tid(),
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
        self.inner.committed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Counts one sync and its latency (for drivers that wait for commits themselves).
    pub fn record_sync(&self, latency_ns: u64) {
        self.inner.stats.on_sync(latency_ns);
    }
}

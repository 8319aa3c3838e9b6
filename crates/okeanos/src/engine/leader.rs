//! A sync that leads its write group: the first sync that asks for a commit and finds the
//! commit lane free runs the lane's steps on its own thread, as RocksDB's write-group leader
//! and MySQL's binlog group commit do, and answers the syncs those steps settle itself.
//!
//! Without a leader, a sync costs two hand-offs between threads before its own I/O even
//! starts to matter: the sync wakes the journal thread, which runs the commit and then wakes
//! the sync (or the notifier thread, which answers a FUSE request). On two cores each wake-up
//! is a context switch that the commit waits for; profiles of the mount showed 44% of the
//! daemon's time in switches and wake-ups (docs/BENCHMARKS.md).
//!
//! The rules:
//! - One thread runs the commit lane at a time (`Core::commit_lane_busy`): the journal thread
//!   waits for a leader to let go, and a sync that finds the lane busy waits for the commit as
//!   before (the thread running the lane sees its request when it polls next).
//! - A leader takes the scheduler's steps exactly as the journal thread does (step.rs), so
//!   what is decided, and in which order, does not depend on which thread runs it; only who
//!   waits changes. A batching window the scheduler asks for is waited out by the leader; a
//!   longer wait (nothing to do, a commit held behind a checkpoint) is left to the journal
//!   thread, which the leader wakes when it lets go if the lane still has work
//!   ([`Scheduler::commit_lane_wants`](crate::journal::scheduler::Scheduler::commit_lane_wants):
//!   a checkpoint for the space its commit used, another commit asked for); timers (the
//!   commit interval, age-based writeback) wake the journal thread as before.
//! - A leader runs at most [`LEAD_STEPS`] steps: a thread serving a program's request is not
//!   kept from it for longer than that.
//! - With pipelined commits (`commit_pipeline=N`), a leader that would then sleep until its
//!   commit is durable (a program's own sync, [`Okeanos::wait_committed`]) stops leading once
//!   that commit is written, lets go of the lane, and runs the flush itself (flush.rs,
//!   [`Okeanos::flush_owed`]): the next sync may lead the next commit's writes meanwhile, as
//!   the journal thread's deferred flushes allow, without a flusher thread woken for it and
//!   the leader woken back. A leader that serves requests (a FUSE request thread, whose sync
//!   is answered by whoever settles it) hands the flush to a flusher and goes back to them.
//! - A panic in a leader's step stops the journal (as one in the journal thread does) and is
//!   not passed on to the program whose thread led: its sync, and every other, fails with the
//!   journal's error.

use super::sync::SyncDone;
use super::{Core, Okeanos};
use crate::fs::FsResult;
use crate::journal::scheduler::{JournalStep, Lane};
use super::step::LaneClock;
use crate::stats::LanePhase;
use std::sync::MutexGuard;

/// The most steps one leader runs before it hands the lane back.
pub const LEAD_STEPS: u32 = 32;

/// Settled syncs to answer, once the state lock is released.
pub(super) type Answers = Vec<(FsResult<()>, SyncDone)>;

pub(super) fn answer(ready: Answers) {
    for (res, done) in ready {
        done(res);
    }
}

impl Okeanos {
    /// Whether a sync on this thread may lead now: the mount allows it, journal threads run
    /// (not the simulator's step-by-step journal), the lane is free and the journal goes on.
    pub(super) fn may_lead(&self, core: &Core) -> bool {
        self.inner.opts.commit_leader && !core.manual && !core.commit_lane_busy && !core.sched.stopping() && core.fs.journal.aborted().is_none()
    }

    /// Runs the commit lane on this thread until `done` holds, and with `more` while other
    /// syncs still ask for commits (at most [`LEAD_STEPS`] steps in all), answering the syncs
    /// registered without a thread ([`Okeanos::fsync_then`]) that its steps settle. Returns
    /// with the lock held and the lane free. The caller checked [`may_lead`](Self::may_lead).
    pub(super) fn lead<'a>(&'a self, mut core: MutexGuard<'a, Core>, done: &dyn Fn(&Core) -> bool, more: bool) -> MutexGuard<'a, Core> {
        core.commit_lane_busy = true;
        core.leads += 1;
        core.inline_syncs = Some((std::thread::current().id(), Vec::new()));
        drop(core);
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.lead_steps(done, more)));
        let mut core = self.lock();
        if run.is_err() {
            self.inner.stop_journal(&mut core, "a commit led by a syncing thread failed (a bug: see the log for the panic)".into());
        }
        core.commit_lane_busy = false;
        // Taken with the lane: the next leader collects its own.
        let left = core.inline_syncs.take().map(|(_, v)| v).unwrap_or_default();
        if core.lane_waiter || core.sched.commit_lane_wants(&core.fs.journal) || run.is_err() {
            self.inner.jcv.notify_all();
        }
        let core = self.answer_unlocked(core, left);
        // A pipelined commit's flush, owed by this thread: run with the lane free.
        match run {
            Ok(Some(job)) => self.flush_owed_guarded(core, job),
            _ => core,
        }
    }

    /// [`flush_owed`](Self::flush_owed), a panic in it stopping the journal as one in a led
    /// step does.
    fn flush_owed_guarded<'a>(&'a self, core: MutexGuard<'a, Core>, job: super::flush::FlushJob) -> MutexGuard<'a, Core> {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.flush_owed(core, job))) {
            Ok(core) => core,
            Err(_) => {
                let mut core = self.lock();
                self.inner.stop_journal(&mut core, "a commit's flush run by a syncing thread failed (a bug: see the log for the panic)".into());
                core
            }
        }
    }

    /// Answers `ready` with the state lock released (a reply writes to the kernel); returns
    /// with it held again.
    fn answer_unlocked<'a>(&'a self, core: MutexGuard<'a, Core>, ready: Answers) -> MutexGuard<'a, Core> {
        if ready.is_empty() {
            return core;
        }
        drop(core);
        answer(ready);
        self.lock()
    }

    /// The steps of [`lead`](Self::lead); a pipelined commit's flush, when the last step
    /// deferred one, is returned for the leader to run once the lane is free.
    fn lead_steps(&self, done: &dyn Fn(&Core) -> bool, more: bool) -> Option<super::flush::FlushJob> {
        let inner = &self.inner;
        // A wait longer than a batching window is the journal thread's.
        let window_ns = (inner.opts.max_batch_time.as_nanos() as u64).max(100_000);
        let mut clock = LaneClock::new(inner, true);
        let mut core = self.lock();
        clock.mark(LanePhase::Lock);
        let mut steps = 0;
        while steps < LEAD_STEPS {
            if done(&core) && !(more && core.fs.journal.commit_wanted()) {
                return None;
            }
            let now = inner.clock.now_ns();
            match self.step_begin(&mut core, now, Lane::Commit) {
                JournalStep::Stop => return None,
                JournalStep::Idle { wake_ns } => {
                    clock.mark(LanePhase::Plan);
                    if wake_ns == u64::MAX || wake_ns.saturating_sub(now) > window_ns {
                        return None;
                    }
                    let wait = std::time::Duration::from_nanos(wake_ns.saturating_sub(now).max(20_000));
                    core = inner.jcv.wait_timeout(core, wait).unwrap_or_else(|e| e.into_inner()).0;
                    clock.mark(LanePhase::Window);
                }
                JournalStep::Work(work) => {
                    clock.mark(LanePhase::Plan);
                    steps += 1;
                    inner.stats.on_led_step();
                    let defer = self.defers_flush(&core, &work);
                    drop(core);
                    let res = clock.execute(&work, defer);
                    core = self.lock();
                    clock.mark(LanePhase::Lock);
                    let owed = if defer && more {
                        // A thread serving requests goes back to them: a flusher flushes.
                        self.step_written(&mut core, work, res);
                        None
                    } else if defer {
                        self.written_job(&mut core, work, res)
                    } else {
                        self.step_finish(&mut core, work, res);
                        None
                    };
                    clock.mark(LanePhase::Finish);
                    let ready = core.inline_syncs.as_mut().map(|(_, v)| std::mem::take(v)).unwrap_or_default();
                    core = self.answer_unlocked(core, ready);
                    clock.mark(LanePhase::Answer);
                    if owed.is_some() {
                        // Its flush is this thread's, after the lane is let go.
                        return owed;
                    }
                }
            }
        }
        None
    }
}

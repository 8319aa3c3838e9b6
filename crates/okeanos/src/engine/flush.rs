//! Pipelined commits (`commit_pipeline=N`, N > 1): the thread running the commit lane writes a
//! commit's blocks, reports them written ([`Scheduler::written`]) and hands the commit's flush
//! to a flusher thread; the lane is free for the next commit's writes at once, and up to N
//! flushes are in flight together (journal/commit.rs, "Pipelined commits", says why that is
//! safe; docs/JOURNALING.md, "Pipelined commits", why it pays: a device serves concurrent
//! flushes far faster than the same flushes one after another).
//!
//! A flusher takes every job queued when it wakes (the newest covers the older ones: its
//! commit's writes completed after theirs), flushes the devices once, and reports the newest
//! commit durable ([`Scheduler::flushed`]), which finishes every commit up to it in order. It
//! answers the syncs that settles itself, as a leader does, without the notifier thread.
//!
//! A leader that would sleep until its commit is durable (leader.rs) runs its own commit's
//! flush instead ([`Okeanos::flush_owed`]), once it has let go of the lane: the same flush and
//! report, without waking a flusher for it.
//!
//! An fdatasync step of overwrites (journal/datasync.rs: blocks written in place, then a flush)
//! pipelines the same way: its writes reported ([`Journal::datasync_written`]), its flush
//! here, its requests settled when a flush issued after its writes returns.
//!
//! [`Journal::datasync_written`]: crate::journal::Journal::datasync_written
//!
//! [`Scheduler::written`]: crate::journal::scheduler::Scheduler::written
//! [`Scheduler::flushed`]: crate::journal::scheduler::Scheduler::flushed

use super::{leader, Core, Inner, Okeanos};
use crate::journal::plan::DevId;
use crate::journal::scheduler::JournalWork;
use crate::journal::transaction::Tid;
use crate::runtime;
use std::sync::Arc;

/// A flush that makes every commit up to `upto` durable, or the fdatasync requests of a step
/// up to ticket `datasync` (journal/datasync.rs).
pub(super) struct FlushJob {
    pub upto: Tid,
    pub datasync: Option<u64>,
    pub devs: Vec<DevId>,
}

impl Okeanos {
    /// Whether this step of the commit lane is a commit whose last flush goes to a flusher:
    /// the mount pipelines, its placement allows it, and the plan ends with a flush of local
    /// devices only.
    /// An fdatasync step (its blocks written in place, then a flush) pipelines the same way.
    pub(super) fn defers_flush(&self, core: &Core, work: &JournalWork) -> bool {
        if !matches!(work, JournalWork::Commit { .. } | JournalWork::Datasync(_)) {
            return false;
        }
        if self.inner.opts.pipeline_depth() == 0 || !core.fs.journal.placement().pipelines_commits() {
            return false;
        }
        work.io().stages.last().is_some_and(|s| !s.flush.is_empty() && s.remote.is_empty() && s.nvm.is_empty())
    }

    /// A pipelined commit's writes completed (`res`): reported written, and its flush queued
    /// for a flusher; a failed write goes to the scheduler as any failed step.
    pub(super) fn step_written(&self, core: &mut Core, work: JournalWork, res: Result<(), crate::device::DeviceError>) {
        if let Some(job) = self.written_job(core, work, res) {
            core.flush_jobs.push(job);
            self.inner.fcv.notify_one();
        }
    }

    /// As [`step_written`](Self::step_written), but the flush is returned to the caller, a
    /// leader that flushes its own commit once it has let go of the lane ([`flush_owed`]);
    /// `None` where the writes failed (the step is finished as failed).
    ///
    /// [`flush_owed`]: Self::flush_owed
    pub(super) fn written_job(&self, core: &mut Core, work: JournalWork, res: Result<(), crate::device::DeviceError>) -> Option<FlushJob> {
        if res.is_err() {
            self.step_finish(core, work, res);
            return None;
        }
        let devs = work.io().stages.last().map(|s| s.flush.clone()).unwrap_or_default();
        let job = match &work {
            JournalWork::Commit { plan, .. } => FlushJob { upto: plan.tid, datasync: None, devs },
            JournalWork::Datasync(plan) => FlushJob { upto: Tid::ZERO, datasync: Some(plan.covers), devs },
            _ => unreachable!("only a commit's or an fdatasync step's flush is deferred"),
        };
        let Core { fs, sched, .. } = &mut *core;
        sched.written(fs, work);
        self.inner.carry_out(core);
        Some(job)
    }

    /// A leader's own pipelined flush, run on its thread after it let go of the lane (so the
    /// next sync may lead the next commit's writes meanwhile): the flush a flusher thread
    /// would have run for `job`, without the hand-off to that thread and back. Returns with the
    /// lock held. The same rules hold as for a flusher's: the flush is issued after the
    /// commit's writes completed, covers every commit written before, and finishes commits in
    /// tid order (`Scheduler::flushed`).
    pub(super) fn flush_owed<'a>(&'a self, mut core: std::sync::MutexGuard<'a, Core>, job: FlushJob) -> std::sync::MutexGuard<'a, Core> {
        let flushed = Flushed { upto: job.upto, covers: job.datasync.unwrap_or(0), steps: usize::from(job.datasync.is_some()) };
        core = self.flush_and_report(core, &flushed, &job.devs);
        // A flusher waiting at unmount for the flushes in flight to end looks again.
        if core.sched.stopping() {
            self.inner.fcv.notify_all();
        }
        core
    }

    /// Flushes `devs` with the lock released and reports `flushed` (before the flush under the
    /// canary that answers early, `Faults::pipeline_answer_before_flush`); returns with the lock
    /// held again.
    fn flush_and_report<'a>(&'a self, mut core: std::sync::MutexGuard<'a, Core>, flushed: &Flushed, devs: &[DevId]) -> std::sync::MutexGuard<'a, Core> {
        let inner = &self.inner;
        let canary = inner.opts.faults.pipeline_answer_before_flush;
        if canary {
            core = self.report_flush(core, flushed, Ok(()));
        }
        drop(core);
        let t0 = inner.clock.now_ns();
        let res = runtime::flush(devs, &inner.devs);
        inner.stats.on_pipelined_flush(inner.clock.now_ns().saturating_sub(t0));
        core = self.lock();
        if !canary {
            core = self.report_flush(core, flushed, res);
        }
        core
    }

    /// Reports a flush to the scheduler and answers the syncs it settled (with the lock
    /// released); returns with the lock held again.
    fn report_flush<'a>(&'a self, mut core: std::sync::MutexGuard<'a, Core>, flushed: &Flushed, res: Result<(), crate::device::DeviceError>) -> std::sync::MutexGuard<'a, Core> {
        core.flusher_answers = Some(Vec::new());
        let now = self.inner.clock.now_ns();
        {
            let Core { fs, sched, .. } = &mut *core;
            if flushed.steps > 0 {
                sched.datasync_flushed(fs, flushed.covers, flushed.steps, res.clone());
            }
            if flushed.upto > Tid::ZERO {
                sched.flushed(fs, now, flushed.upto, res);
            }
        }
        self.inner.carry_out(&mut core);
        let ready = core.flusher_answers.take().unwrap_or_default();
        // The sleeping syncs of the commits it finished, woken with the lock let go, as the
        // journal thread wakes its own (step.rs).
        let owed = core.owed_wake.take();
        if ready.is_empty() && owed.is_none() {
            return core;
        }
        drop(core);
        if let Some(owed) = owed {
            self.inner.wake_committed(owed);
        }
        leader::answer(ready);
        self.lock()
    }
}

/// What one flush of a flusher thread settles: commits up to `upto` (0: none), and the
/// fdatasync requests up to ticket `covers` of `steps` pipelined steps.
struct Flushed {
    upto: Tid,
    covers: u64,
    steps: usize,
}

/// A flusher thread: until the mount stops and no commit waits for its flush.
pub(super) fn flusher_thread(inner: Arc<Inner>) {
    super::step::WAKES_AFTER_UNLOCK.with(|d| d.set(true));
    let me = Okeanos { inner, _user: None };
    let inner = &me.inner;
    let mut core = me.lock();
    loop {
        if core.sched.abandoned() {
            break;
        }
        if core.flush_jobs.is_empty() {
            // An aborted journal finishes nothing more: its commits in flight stay unflushed.
            if core.sched.stopping() && (!core.fs.journal.flush_in_flight() || core.fs.journal.aborted().is_some()) {
                break;
            }
            core = inner.fcv.wait(core).unwrap_or_else(|e| e.into_inner());
            continue;
        }
        let jobs = std::mem::take(&mut core.flush_jobs);
        let flushed = Flushed {
            upto: jobs.iter().map(|j| j.upto).max().expect("not empty"),
            covers: jobs.iter().filter_map(|j| j.datasync).max().unwrap_or(0),
            steps: jobs.iter().filter(|j| j.datasync.is_some()).count(),
        };
        // Each device once (`runtime::flush`).
        let devs: Vec<DevId> = jobs.into_iter().flat_map(|j| j.devs).collect();
        core = me.flush_and_report(core, &flushed, &devs);
    }
    drop(core);
    // The others may be waiting for the same condition.
    inner.fcv.notify_all();
}

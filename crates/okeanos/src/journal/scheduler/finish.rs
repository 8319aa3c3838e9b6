//! A step's outcome: what the scheduler records when the engine reports a step's I/O, and
//! what follows from it (the next fallback, an abort, a commit's syncs).

use super::{falls_back, Counted, Host, JournalWork, Scheduler, RETURN_RETRY_MAX_NS, RETURN_RETRY_NS};
use crate::device::DeviceError;
use crate::journal::commit::CommitPlan;
use crate::journal::transaction::Tid;

impl Scheduler {
    /// Records the outcome of a step's I/O, at `now`.
    pub fn finish(&mut self, host: &mut dyn Host, now: u64, work: JournalWork, res: Result<(), DeviceError>) {
        // The other lane may be waiting for this step (a clash, or space held by a commit).
        match &work {
            JournalWork::Checkpoint(_) | JournalWork::Swap(_) | JournalWork::Early(_) | JournalWork::Datasync(_) => {
                self.checkpointing = None;
                self.effects.notify_commit_lane = true;
                self.effects.notify_checkpoint_lane = true;
            }
            _ => self.effects.notify_checkpoint_lane = true,
        }
        match (work, res) {
            (JournalWork::Commit { plan, started_ns }, Ok(())) => {
                // Its flush ran in the lane: durable, with every earlier commit whose flush
                // is still in flight (they were written before it).
                let tid = plan.tid;
                host.parts().0.commit_written();
                self.flushing.push_back((plan, started_ns));
                self.durable(host, now, tid);
                // The syncs of this transaction, and handles waiting for a commit; not the
                // syncs already waiting for the next one.
                self.effects.notify_handles = true;
                self.effects.deliver_syncs = true;
                return;
            }
            (JournalWork::Fallback { fallback, commit, started_ns }, Ok(())) => {
                let (journal, cache) = host.parts();
                journal.fallback_finish(cache, fallback);
                self.effects.counted.push(Counted::Checkpoint);
                self.effects.counted.push(Counted::Fallback);
                self.commit_done(host, commit, started_ns, now);
            }
            (JournalWork::Return { epoch, .. }, Ok(())) => {
                host.parts().0.return_finish(epoch);
                self.return_backoff_ns = RETURN_RETRY_NS;
            }
            // Still unreachable (or failed half-way): stay in the local journal, try again later.
            (JournalWork::Return { .. }, Err(e)) if falls_back(&e) => {
                self.return_backoff_ns = (self.return_backoff_ns * 2).min(RETURN_RETRY_MAX_NS);
                self.next_return_ns = now + self.return_backoff_ns;
            }
            (JournalWork::Swap(plan), Ok(())) => {
                host.parts().0.swap_finish(plan);
                self.effects.counted.push(Counted::LogSwap);
            }
            (JournalWork::Early(plan), Ok(())) => {
                self.effects.counted.push(Counted::EarlyWrites(plan.blocks.len() as u64));
                host.parts().0.early_finish(plan);
            }
            (JournalWork::Datasync(plan), Ok(())) => {
                let journal = host.parts().0;
                self.effects.counted.push(Counted::DatasyncStep(plan.requests()));
                journal.datasync_finish(plan);
            }
            (JournalWork::Checkpoint(plan), Ok(())) => {
                let (journal, cache) = host.parts();
                journal.checkpoint_finish(cache, plan);
                self.effects.counted.push(Counted::Checkpoint);
                // Waiting handles look again and ask again if they still lack space.
                self.want_space = false;
            }
            (JournalWork::Checkpoint(plan), Err(e)) if falls_back(&e) => {
                // A checkpoint's only remote operation is its TRIM, which comes after the home
                // writes are flushed: the checkpoint is complete here, only the server still
                // holds the checkpointed transactions (replaying them again is harmless, and
                // the next checkpoint's TRIM covers them: trims are cumulative). The next
                // commit finds out whether the server is gone, and falls back then. Aborting
                // here would stop a host whose server died during a checkpoint.
                let (journal, cache) = host.parts();
                journal.checkpoint_finish(cache, plan);
                self.effects.counted.push(Counted::Checkpoint);
                self.want_space = false;
            }
            (JournalWork::Commit { plan, started_ns }, Err(e)) if falls_back(&e) => {
                // The journal server failed: make the transaction durable in the local journal
                // (journal/fallback.rs); its syncs keep waiting until then.
                let (journal, cache) = host.parts();
                match journal.fallback_begin(cache) {
                    Some(fallback) => self.pending = Some(JournalWork::Fallback { fallback, commit: plan, started_ns }),
                    None => Self::abort(host, format!("commit of transaction {} failed: {e}", plan.tid)),
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
                Self::abort(host, why);
            }
        }
        self.effects.wake();
    }

    /// A commit's writes completed; its flush runs elsewhere, beside the next commits
    /// (`commit_pipeline=`; journal/commit.rs, "Pipelined commits"). `work` is the commit's
    /// step; [`Self::flushed`] reports the flush.
    pub fn written(&mut self, host: &mut dyn Host, work: JournalWork) {
        let (plan, started_ns) = match work {
            JournalWork::Commit { plan, started_ns } => (plan, started_ns),
            JournalWork::Datasync(plan) => {
                // Its blocks are written: no longer the lane's busy set.
                self.checkpointing = None;
                self.effects.counted.push(Counted::DatasyncStep(plan.requests()));
                host.parts().0.datasync_written(plan);
                self.effects.notify_commit_lane = true;
                self.effects.notify_checkpoint_lane = true;
                return;
            }
            _ => unreachable!("only a commit's or an fdatasync step's flush is pipelined"),
        };
        host.parts().0.commit_written();
        self.flushing.push_back((plan, started_ns));
        // A checkpoint held behind the commit's in-place writes may go now.
        self.effects.notify_checkpoint_lane = true;
    }

    /// A flush issued after the writes of every commit up to `upto` completed returned: those
    /// commits are durable, or, if it failed, the journal stops (nothing commits after a
    /// transaction whose flush failed).
    pub fn flushed(&mut self, host: &mut dyn Host, now: u64, upto: Tid, res: Result<(), DeviceError>) {
        if host.journal().aborted().is_some() {
            self.effects.wake();
            return;
        }
        match res {
            Ok(()) => {
                self.durable(host, now, upto);
                self.effects.notify_handles = true;
                self.effects.deliver_syncs = true;
                self.effects.notify_checkpoint_lane = true;
                // The commit lane may wait for room in the pipeline, or to stop.
                if self.stop || self.commit_lane_wants(host.journal()) {
                    self.effects.notify_commit_lane = true;
                }
            }
            Err(e) => {
                Self::abort(host, format!("flushing the commit of transaction {upto} failed: {e}"));
                self.effects.notify_commit_lane = true;
                self.effects.notify_checkpoint_lane = true;
                self.effects.wake();
            }
        }
    }

    /// A flush issued after the writes of `steps` pipelined fdatasync steps completed returned:
    /// every request up to `covers` is durable, or, if it failed, the journal stops (the
    /// bytes those syncs wait for may not be on the device).
    pub fn datasync_flushed(&mut self, host: &mut dyn Host, covers: u64, steps: usize, res: Result<(), DeviceError>) {
        host.parts().0.datasync_flushed(if res.is_ok() { covers } else { 0 }, steps);
        if let Err(e) = res {
            if host.journal().aborted().is_none() {
                Self::abort(host, format!("flushing overwrites written in place for fdatasync failed: {e}"));
            }
            self.effects.notify_checkpoint_lane = true;
        }
        self.effects.notify_commit_lane = true;
        self.effects.wake();
    }

    /// Finishes every commit up to `upto` whose flush was in flight, oldest first.
    fn durable(&mut self, host: &mut dyn Host, now: u64, upto: Tid) {
        while self.flushing.front().is_some_and(|(p, _)| p.tid <= upto) {
            let (plan, started_ns) = self.flushing.pop_front().expect("checked");
            debug_assert_eq!(host.journal().oldest_flushing_tid(), Some(plan.tid));
            self.commit_done(host, plan, started_ns, now);
        }
    }

    fn commit_done(&mut self, host: &mut dyn Host, plan: CommitPlan, started_ns: u64, now: u64) {
        let (journal, cache) = host.parts();
        let done = journal.commit_finish(cache, now);
        host.freed(done.freed_blocks, done.freed_inodes);
        self.effects.counted.push(Counted::Commit { handles: plan.handles, journal_blocks: plan.journal_blocks, records: plan.records });
        self.effects.committed = Some(done.tid);
        let took = now.saturating_sub(started_ns);
        self.avg_commit_ns = if self.avg_commit_ns == 0 { took } else { (self.avg_commit_ns * 7 + took) / 8 };
        self.last_commit_handles = plan.handles;
        if let Some(prev) = self.last_commit_start_ns.filter(|&p| started_ns > p && plan.handles > 0) {
            let gap = (started_ns - prev) / plan.handles as u64;
            self.arrival_gap_ns = if self.arrival_gap_ns == 0 { gap } else { (self.arrival_gap_ns * 7 + gap) / 8 };
        }
        self.last_commit_start_ns = Some(started_ns);
        self.last_fast = plan.records.fast_blocks > 0;
        if self.last_fast && plan.handles > 0 {
            let fixed = crate::format::journal::FAST_FIXED_LEN as u64;
            let share = plan.records.fast_bytes.saturating_sub(fixed) / plan.handles as u64;
            self.fast_share = if self.fast_share == 0 { share } else { (self.fast_share * 7 + share) / 8 };
        }
    }

    /// Nothing commits after this; the file system turns read-only with the reason.
    fn abort(host: &mut dyn Host, why: String) {
        host.parts().0.commit_failed(why.clone());
        host.read_only(why);
    }
}

//! Fallback: a commit whose operations on a journal server failed (a timeout, a disconnect, a
//! server error) is made durable in the local journal instead (remote-journaling thesis; the
//! rule is ours, docs/REMOTE.md). No I/O here: one plan, carried out like any other.
//!
//! 1. Every committed transaction's owed blocks are written to their final locations and the
//!    file-system device is flushed: from then on the server holds nothing recovery needs, so
//!    the local journal is self-sufficient and no copy on the server can ever replay over
//!    newer data (the server is trimmed before the host returns to it).
//! 2. The failed transaction's ordered data again (idempotent), then its journal blocks in the
//!    local ring together with the journal superblock that says "fell back, the ring starts
//!    with this transaction", and its unordered data, under one flush: the commit point. The
//!    syncs that waited for the transaction return there.
//!
//! A crash before step 2's flush leaves the journal superblock saying "remote": recovery reads
//! the server (the failed transaction was never acknowledged, so losing it is allowed). After
//! it, recovery reads the ring alone.
//!
//! The return, once a checkpoint has emptied the local journal: record a new epoch locally,
//! reconnect, FENCE with it, TRIM everything the server still holds (all older, all
//! checkpointed), record "remote" — each durable before the next, so a crash anywhere leaves
//! either the local journal (empty) in charge or a trimmed server.

use crate::ids::{DevBlock, HomeBlock};
use super::checkpoint::CheckpointGoal;
use super::placement::{Kept, Records};
use super::plan::{BlockKind, DevId, IoPlan, IoStage, IoWrite};
use super::Journal;
use crate::cache::Cache;

/// The fallback's plan, and the checkpoint bookkeeping to apply when it completes.
#[derive(Debug)]
pub struct FallbackPlan {
    pub io: IoPlan,
    pub checkpoint: Option<super::checkpoint::CheckpointPlan>,
}

impl Journal {
    /// After the commit in flight failed on the journal server: the plan that makes it durable
    /// locally, or None if the placement cannot fall back (the journal then aborts).
    pub fn fallback_begin(&mut self, cache: &Cache) -> Option<FallbackPlan> {
        let tid = self.committing.as_ref().expect("a commit in flight").tx.tid;
        if !self.placement.fallback().is_some_and(|f| f.fall_back(tid)) {
            return None;
        }
        let mut io = IoPlan::default();
        // 1. Everything committed reaches its final location (the checkpoint code, without its
        // release: the ring will start with the failed transaction).
        let checkpoint = self.checkpoint_writes(cache, CheckpointGoal::All);
        if let Some(cp) = &checkpoint {
            for s in &cp.io.stages {
                io.push_stage(IoStage { copies: s.copies.clone(), writes: s.writes.clone(), flush: s.flush.clone(), remote: Vec::new(), nvm: Vec::new() });
            }
        }
        // 2. The failed transaction, in the ring.
        let c = self.committing.as_mut().expect("a commit in flight");
        let (stage, at) = self.placement.place(Records { tid, blocks: c.records.clone(), images: Vec::new(), revoked: Vec::new(), logged: Vec::new(), near: None });
        c.at = at;
        let in_place = |set: &std::collections::BTreeSet<HomeBlock>| -> Vec<IoWrite> {
            set.iter().map(|&b| IoWrite { dev: DevId::Fs, block: DevBlock::home(b), data: cache.peek(b).expect("in-place data stays cached").data.clone(), kind: BlockKind::FinalData }).collect()
        };
        let (ordered, mut batch) = (in_place(&c.tx.final_data), in_place(&c.tx.final_unordered));
        if !ordered.is_empty() {
            io.push(ordered, vec![DevId::Fs]);
        }
        let kept = Kept { oldest: Some((tid, at)), next_tid: self.running.tid, home: None };
        let jsb = self.placement.mount_stage(kept);
        batch.extend(stage.writes);
        batch.extend(jsb.writes);
        let mut flush = stage.flush;
        flush.extend(jsb.flush);
        flush.push(DevId::Fs);
        flush.sort();
        flush.dedup();
        io.push(batch, flush);
        Some(FallbackPlan { io, checkpoint })
    }

    /// The fallback's I/O completed: the checkpointed transactions leave the log (the commit
    /// itself finishes with `commit_finish`).
    pub fn fallback_finish(&mut self, cache: &mut Cache, plan: FallbackPlan) {
        if let Some(mut cp) = plan.checkpoint {
            // The ring's tail is where the failed transaction now starts: nothing to release
            // in the placement.
            cp.release_placement = false;
            self.checkpoint_finish(cache, cp);
        }
    }
}

impl Journal {
    /// A host that fell back returns to its server once nothing is left in the local journal
    /// (nothing committed owes a checkpoint, nothing is committing): the placement's plan and
    /// the epoch it takes over with, or None.
    pub fn return_begin(&mut self) -> Option<(IoPlan, u64)> {
        if self.committing.is_some() || !self.log.is_empty() || self.aborted.is_some() {
            return None;
        }
        let (stages, epoch) = self.placement.fallback()?.return_plan(self.running.tid)?;
        let mut io = IoPlan::default();
        for s in stages {
            s.push_to(&mut io);
        }
        Some((io, epoch))
    }

    /// The return plan completed: transactions go to the server again.
    pub fn return_finish(&mut self, epoch: u64) {
        self.placement.fallback().expect("a return follows a fallback").returned(epoch);
    }
}

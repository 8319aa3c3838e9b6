//! fdatasync of overwrites without a commit (docs/JOURNALING.md, "fdatasync of overwrites").
//!
//! Under ordered and writeback content, a write that changes only the bytes of blocks the file
//! already had — no block allocated, the size unchanged — leaves nothing a read after a crash
//! needs in the journal: the block map and the size that lead to those blocks are committed
//! already, and only the new bytes must reach their place. ext4 syncs such a file with one
//! data write and one flush, and no journal commit (its inode's datasync tid does not move on
//! an overwrite). So does this phase: fdatasync asks for the blocks, a step writes their
//! current versions in place and flushes the file system device, and the sync returns. The
//! timestamps the write changed stay in the running transaction and commit with it, as
//! fdatasync allows.
//!
//! Every such fdatasync asks for a step, busy journal or not, unless a commit is wanted: that
//! commit goes first and writes the blocks too, so the sync joins it (`FsState::datasync_need`).
//! A step serves every request waiting when it starts, so under load the syncs form groups of
//! steps as they form group commits. (Until 2026-11-29 a busy journal sent them to the group
//! commit, as one more group on the device looked worse; once a file's request asked only for
//! the blocks it overwrote since its last, steps won under load too: docs/BENCHMARKS.md,
//! "Steps under load".) Requests that a commit wanted since covers wait for it rather than
//! for a step.
//!
//! The step is an early write of the running transaction (journal/writeback.rs) followed by a
//! flush: it runs where early writes run (a checkpoint's place on its lane, its blocks the
//! lane's busy set), so one write of a block is in flight at a time, and the commit that
//! follows writes again only the blocks changed since. It waits while the commit in flight
//! writes one of its blocks in place: that commit makes the block durable first.
//!
//! What is never done this way (the caller, the file system layer, decides per write and
//! commits instead): blocks logged in this transaction or with a logged copy that recovery
//! could replay over the new bytes (selective, data and wasteless content; a block that was
//! metadata once), O_DUR files, and any write that allocated or changed the size.

use crate::ids::{DevBlock, HomeBlock};
use super::plan::{BlockKind, DevId, IoPlan, IoWrite};
use super::writeback::EarlyPlan;
use super::Journal;
use crate::cache::Cache;
use std::collections::BTreeSet;
use std::sync::Arc;

/// What fdatasyncs asked to be written in place, and how far the steps got.
#[derive(Debug, Default)]
pub struct DatasyncQueue {
    /// Blocks some fdatasync waits for.
    wanted: BTreeSet<HomeBlock>,
    /// Requests made (each a ticket number), requests a step has taken (its writes issued or
    /// done), and requests durable: a sync returns once `done` reaches its ticket.
    asked: u64,
    planned: u64,
    pub done: u64,
    /// Steps whose writes completed and whose flush is in flight on a flusher thread
    /// (`commit_pipeline=N`, engine/flush.rs).
    flushing: usize,
}

/// One step: the early writes of the wanted blocks, then a flush of the file system device.
#[derive(Debug)]
pub struct DatasyncPlan {
    pub early: EarlyPlan,
    /// The requests this step makes durable (every ticket up to this one), and the last
    /// ticket taken by the step before it.
    pub covers: u64,
    pub after: u64,
}

impl DatasyncPlan {
    /// The requests this step serves.
    pub fn requests(&self) -> u64 {
        self.covers.saturating_sub(self.after)
    }
}

impl Journal {
    /// Whether a change of `block`, in place, may be made durable without a commit: it is
    /// in-place data of the running transaction (ordered or writeback), not logged by it, and
    /// no logged copy of it is in the journal.
    pub fn syncs_in_place(&self, block: HomeBlock) -> bool {
        let r = &self.running;
        // A logged copy in the journal would be replayed over the bytes written in place:
        // such a block commits (its revoke record keeps the copy from replaying).
        let logged = self.logged_copies.contains_key(&block);
        (r.final_data.contains(&block) || r.final_unordered.contains(&block)) && !r.journaled.contains(&block) && !r.ranges.contains_key(&block) && !logged
    }

    /// An fdatasync asks for `blocks` (overwritten in place by the running transaction) to be
    /// made durable; returns the ticket [`DatasyncQueue::done`] must reach.
    pub fn datasync_request(&mut self, blocks: impl IntoIterator<Item = HomeBlock>) -> u64 {
        self.datasync.wanted.extend(blocks);
        self.datasync.asked += 1;
        self.datasync.asked
    }

    /// Whether some fdatasync waits for a step not yet taken.
    pub fn datasync_pending(&self) -> bool {
        self.datasync.planned < self.datasync.asked
    }

    /// Steps whose flush is in flight on a flusher thread.
    pub fn datasync_flushing(&self) -> usize {
        self.datasync.flushing
    }

    /// The step for the requests so far, or None: none waiting, the journal stopped, a commit
    /// of the running transaction is wanted (it makes the blocks durable too, and goes first:
    /// steps taken ahead of it whenever a request waits would starve the syncs that need a
    /// commit), or the commit in flight writes one of the blocks in place (the step is
    /// planned after it). Blocks that left the running transaction since they were asked for
    /// were made durable by its commit; blocks already written early need only the flush;
    /// when nothing is left, the requests are settled without I/O.
    pub fn datasync_begin(&mut self, cache: &Cache) -> Option<DatasyncPlan> {
        if !self.datasync_pending() || self.aborted.is_some() || self.commit_wanted() {
            return None;
        }
        if self.datasync.wanted.iter().any(|&b| self.committing_writes_in_place(b)) {
            return None;
        }
        let wanted = std::mem::take(&mut self.datasync.wanted);
        let r = &self.running;
        let mut flush = false;
        let mut blocks: Vec<(HomeBlock, Arc<Vec<u8>>)> = Vec::new();
        for b in wanted.into_iter().filter(|b| r.final_data.contains(b) || r.final_unordered.contains(b)) {
            if self.written_early(cache, b) {
                flush = true;
            } else {
                blocks.push((b, cache.peek(b).expect("in-place data stays cached").data.clone()));
            }
        }
        if blocks.is_empty() && !flush {
            if self.datasync.done == self.datasync.planned {
                self.datasync.done = self.datasync.asked;
                self.datasync.planned = self.datasync.asked;
                return None;
            }
            // Earlier requests wait for a flush in flight: these are settled in ticket order,
            // by a step of a flush alone, issued after it (a later flush covers the earlier).
        }
        let mut io = IoPlan::default();
        let flush = if self.cfg.faults.datasync_no_flush { Vec::new() } else { vec![DevId::Fs] };
        io.push(blocks.iter().map(|(b, d)| IoWrite { dev: DevId::Fs, block: DevBlock::home(*b), data: d.clone(), kind: BlockKind::FinalData }).collect(), flush);
        let after = std::mem::replace(&mut self.datasync.planned, self.datasync.asked);
        Some(DatasyncPlan { early: EarlyPlan { io, blocks }, covers: self.datasync.asked, after })
    }

    /// The step's writes and flush completed: its requests are durable.
    pub fn datasync_finish(&mut self, plan: DatasyncPlan) {
        self.datasync.done = self.datasync.done.max(plan.covers);
        self.early_finish(plan.early);
    }

    /// The step's writes completed and its flush went to a flusher thread (`commit_pipeline=N`):
    /// its blocks count as written early (a later step or commit that finds them unchanged
    /// only flushes), and its requests wait for [`datasync_flushed`](Self::datasync_flushed).
    pub fn datasync_written(&mut self, plan: DatasyncPlan) {
        self.datasync.flushing += 1;
        self.early_finish(plan.early);
    }

    /// A flush issued after the writes of `steps` deferred steps completed returned: every
    /// request up to `covers` is durable (the writes of every earlier step completed before
    /// this flush was issued, so it covers them too, whichever flush returns first).
    pub fn datasync_flushed(&mut self, covers: u64, steps: usize) {
        self.datasync.flushing = self.datasync.flushing.saturating_sub(steps);
        self.datasync.done = self.datasync.done.max(covers);
    }
}

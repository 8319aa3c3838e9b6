//! Background writeback of the running transaction's in-place data, before its commit
//! (Linux's flusher threads and balance_dirty_pages beside jbd2; docs/JOURNALING.md,
//! "Background writeback of in-place data").
//!
//! Ordered content writes a transaction's file data in place, durably, before the commit
//! record: that is all ordered semantics ask (thesis section 3.1.5). Nothing asks that the
//! write wait for the commit. Without this phase it does, so a small sync commits whatever a
//! large writer dirtied since its last commit and waits for all of it: the manylogs paper's
//! Fig. 2b small syncs entangled with the large writer (docs/SIMULATION.md).
//!
//! Once the running transaction holds more than `dirty_background_bytes=` of in-place data not
//! yet written, a step writes a slice of it (frozen copies, an `Arc` clone each, no flush) and
//! records the version written per block. A writer that has dirtied twice that much waits at
//! its next handle until the steps drain it (balance_dirty_pages), so a small sync finds at
//! most that much to wait for. The commit writes only the blocks changed since (or never
//! written); its ordered stage is then the flush that makes the early writes durable before
//! the commit record, issued after they completed.
//!
//! One write of a block is in flight at a time: a step runs on the checkpoint lane (its blocks
//! are the lane's busy set, so a commit whose in-place blocks it writes waits for it, as for a
//! checkpoint), and a checkpoint that writes a block home forgets its early version (a
//! checkpoint writes the committed version, older than the running one).
//!
//! Crash cases: an early write durable, its transaction not committed. Under ordered content
//! that is what ext3 allows: a newly allocated block no committed metadata points to yet, or
//! new contents of a block the file already had (not yet synced). A block with an older logged
//! copy (selective's journaled sequence before an in-place write) carries a revoke in this
//! transaction: until it commits, recovery replays the committed copy over the early write.

use crate::ids::{DevBlock, HomeBlock};
use super::plan::{BlockKind, DevId, IoPlan, IoWrite};
use super::Journal;
use crate::cache::Cache;
use std::sync::Arc;

/// Blocks one step writes at most (2 MiB of 4 KiB blocks): a commit that must wait for a step
/// waits for this much.
pub const EARLY_STEP_BLOCKS: usize = 512;

/// The running transaction's in-place data (ordered and writeback content) is held in memory
/// until its commit; past this many times `max_tx_blocks` of it, handles wait for the commit.
pub const IN_PLACE_BOUND: u64 = 4;

/// One step of early writes.
#[derive(Debug)]
pub struct EarlyPlan {
    pub io: IoPlan,
    /// The blocks written and the version of each.
    pub blocks: Vec<(HomeBlock, Arc<Vec<u8>>)>,
}

impl Journal {
    /// Whether `block`'s current contents are the version an early write put in place.
    pub(super) fn written_early(&self, cache: &Cache, block: HomeBlock) -> bool {
        match (self.early.get(&block), cache.peek(block)) {
            (Some(w), Some(buf)) => Arc::ptr_eq(w, &buf.data),
            _ => false,
        }
    }

    /// The running transaction's in-place data not written early, as counted for the
    /// threshold and the throttle: blocks with no early version at all (a block rewritten
    /// since its early write counts as written; its commit writes it again).
    pub fn unwritten_in_place(&self) -> usize {
        self.running.final_data.len().saturating_sub(self.early.len())
    }

    /// How much of the running transaction's in-place data may stay unwritten before early
    /// writes begin: `dirty_background_bytes=` when set; otherwise half the bound at which
    /// that data forces a commit ([`Journal::handle_start`]: four times `max_tx_blocks`), so
    /// that the forced commit finds most of it written and its writers wait for a flush, not
    /// for tens of MiB of writes (docs/JOURNALING.md, "Background writeback of in-place data").
    pub fn early_threshold(&self) -> usize {
        match self.cfg.dirty_background_blocks {
            0 => usize::try_from(self.cfg.max_tx_blocks.saturating_mul(IN_PLACE_BOUND / 2)).unwrap_or(usize::MAX),
            n => n,
        }
    }

    /// Whether a step of early writes is due ([`Self::early_begin`] would plan one).
    pub fn early_due(&self) -> bool {
        self.aborted.is_none() && self.unwritten_in_place() > self.early_threshold()
    }

    /// A step of early writes when more than [`Self::early_threshold`] of the running
    /// transaction's ordered in-place data are not written: up to [`EARLY_STEP_BLOCKS`] of
    /// them, those never written first, in block order. None otherwise.
    pub fn early_begin(&self, cache: &Cache) -> Option<EarlyPlan> {
        if !self.early_due() {
            return None;
        }
        let fresh = self.running.final_data.iter().copied().filter(|b| !self.early.contains_key(b));
        let rewritten = self.running.final_data.iter().copied().filter(|&b| self.early.contains_key(&b) && !self.written_early(cache, b));
        let blocks: Vec<(HomeBlock, Arc<Vec<u8>>)> = fresh.chain(rewritten).take(EARLY_STEP_BLOCKS).map(|b| (b, cache.peek(b).expect("in-place data stays cached").data.clone())).collect();
        assert!(!blocks.is_empty(), "unwritten in-place data counted is there to write");
        let mut io = IoPlan::default();
        if self.cfg.faults.early_unwritten {
            // The canary: recorded as written, never written.
            return Some(EarlyPlan { io, blocks });
        }
        io.push(blocks.iter().map(|(b, d)| IoWrite { dev: DevId::Fs, block: DevBlock::home(*b), data: d.clone(), kind: BlockKind::FinalData }).collect(), Vec::new());
        Some(EarlyPlan { io, blocks })
    }

    /// The step's writes completed: each block's version is on the device (not yet durable).
    pub fn early_finish(&mut self, plan: EarlyPlan) {
        for (b, d) in plan.blocks {
            if self.running.final_data.contains(&b) {
                self.early.insert(b, d);
            }
        }
    }
}

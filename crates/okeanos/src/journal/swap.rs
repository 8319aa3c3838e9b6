//! Log swap (manylogs paper, section III-G): a log over 80% full is moved, whole, to an empty
//! log far from the disk head, so that commits near the head find room again without a
//! checkpoint. The placement decides which logs and lays out the stages
//! (`placement/manylogs/swap.rs`, `swap_begin`); the core runs a swap in a checkpoint's place (one
//! at a time, never beside a checkpoint: both plan log tables, and a checkpoint's copies name
//! log positions that a swap changes) and counts it.

use super::plan::IoPlan;
use super::Journal;

/// A swap's I/O: write the table reserving the target, copy, write the table that moves.
#[derive(Debug)]
pub struct SwapPlan {
    pub io: IoPlan,
    /// Log blocks it moves.
    pub blocks: u64,
}

impl Journal {
    /// Plans the swap that is due, if any. `idle`: the file system has been quiet (any
    /// crowded log may move; otherwise only the one at the head).
    pub fn swap_begin(&mut self, idle: bool) -> Option<SwapPlan> {
        if self.aborted.is_some() {
            return None;
        }
        let kept = self.kept(0);
        let (stages, blocks) = self.placement.swaps()?.swap_begin(kept, idle, self.cfg.max_tx_blocks)?;
        let mut io = IoPlan::default();
        for s in stages {
            io.push_stage(s);
        }
        Some(SwapPlan { io, blocks })
    }

    /// The swap's I/O completed: the moved log is free.
    pub fn swap_finish(&mut self, plan: SwapPlan) {
        debug_assert!(plan.blocks > 0);
        self.placement.swaps().expect("a swap was planned").swapped();
    }
}

//! Transactions and handles (thesis section 3.1.5; jbd2 transaction.c).
//!
//! A transaction gathers the atomic handles of file-system operations. Its life:
//! `Running` (accepts handles) -> `Locked` (no new handles; here handles run whole under the
//! engine lock, so locking is immediate) -> `Committing` (its blocks are being written to the
//! journal) -> `Committed` (commit record durable; its blocks wait for checkpoint) ->
//! `Checkpointed` (every block reached its final location; its log space is free).
//! Every transition asserts the state it leaves.
//!
//! Journal space is reserved before a handle dirties anything: [`super::Journal::handle_start`]
//! checks that the running transaction plus the handle's credits fit both the transaction size
//! limit and the free log space, so commit never has to force a checkpoint to make room.

use crate::ids::HomeBlock;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub use crate::ids::Tid;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxState {
    Running,
    Locked,
    Committing,
    Committed,
    Checkpointed,
}

/// The running (and, while its I/O is in flight, committing) transaction.
#[derive(Debug)]
pub struct Transaction {
    pub tid: Tid,
    pub state: TxState,
    /// When the first handle joined (for the commit interval), in engine nanoseconds.
    pub start_ns: Option<u64>,
    pub handles: u32,
    /// Blocks logged whole (metadata; data too under the `data` policy).
    pub journaled: BTreeSet<HomeBlock>,
    /// Which of `journaled` are file data (for the counters and descriptor tags).
    pub journaled_data: BTreeSet<HomeBlock>,
    /// Data blocks logged as multiwrite records: the byte ranges this transaction changed.
    /// Overlapping and adjacent ranges merge, so each block's ranges are disjoint and replay
    /// applies each once (docs/JOURNALING.md, "Multiwrite records").
    pub ranges: BTreeMap<HomeBlock, RangeSet>,
    /// Number of ranges in `ranges` (one multiwrite record each).
    pub record_count: u64,
    /// Blocks allocated by this transaction: their records replay onto a zeroed block.
    pub fresh: BTreeSet<HomeBlock>,
    /// Differential metadata: each logged metadata block's contents before this transaction
    /// first changed it (the commit logs the bytes that differ).
    pub meta_base: BTreeMap<HomeBlock, Arc<Vec<u8>>>,
    /// Data blocks written in place before the commit record (ordered semantics).
    pub final_data: BTreeSet<HomeBlock>,
    /// Data blocks written in place with the journal blocks, in no order (writeback).
    pub final_unordered: BTreeSet<HomeBlock>,
    /// Blocks freed by this transaction whose older journal copies must not be replayed.
    pub revoked: BTreeSet<HomeBlock>,
    /// Blocks freed by this transaction: not reusable until it commits.
    pub freed: Vec<HomeBlock>,
    /// Inodes freed by this transaction: not reusable until it commits.
    pub freed_inodes: Vec<u32>,
}

impl Transaction {
    pub fn new(tid: Tid) -> Self {
        Transaction {
            tid,
            state: TxState::Running,
            start_ns: None,
            handles: 0,
            journaled: BTreeSet::new(),
            journaled_data: BTreeSet::new(),
            ranges: BTreeMap::new(),
            record_count: 0,
            fresh: BTreeSet::new(),
            meta_base: BTreeMap::new(),
            final_data: BTreeSet::new(),
            final_unordered: BTreeSet::new(),
            revoked: BTreeSet::new(),
            freed: Vec::new(),
            freed_inodes: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.handles == 0
    }

    /// Journal units: logged blocks plus multiwrite records (each record counted as a block,
    /// an upper bound).
    pub fn units(&self) -> u64 {
        self.journaled.len() as u64 + self.record_count
    }

    /// Drops the multiwrite ranges of block `b` (it is now logged whole).
    pub fn forget_ranges(&mut self, b: HomeBlock) {
        if let Some(r) = self.ranges.remove(&b) {
            self.record_count -= r.len() as u64;
        }
    }

    /// Drops block `b` from every set (it was freed).
    pub fn forget(&mut self, b: HomeBlock) {
        self.journaled.remove(&b);
        self.journaled_data.remove(&b);
        if let Some(r) = self.ranges.remove(&b) {
            self.record_count -= r.len() as u64;
        }
        self.fresh.remove(&b);
        self.meta_base.remove(&b);
        self.final_data.remove(&b);
        self.final_unordered.remove(&b);
    }

    pub fn lock(&mut self) {
        assert_eq!(self.state, TxState::Running, "only a running transaction can be locked");
        self.state = TxState::Locked;
    }

    pub fn start_commit(&mut self) {
        assert_eq!(self.state, TxState::Locked, "commit starts from a locked transaction");
        self.state = TxState::Committing;
    }
}

/// Disjoint, sorted byte ranges `[start, end)` of one block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeSet(Vec<(u32, u32)>);

impl RangeSet {
    /// Adds `[start, end)`, merging with overlapping or adjacent ranges. Returns the change in
    /// the number of ranges.
    pub fn add(&mut self, start: u32, end: u32) -> i64 {
        assert!(start < end);
        let before = self.0.len() as i64;
        let mut s = start;
        let mut e = end;
        self.0.retain(|&(a, b)| {
            if b < s || a > e {
                true
            } else {
                s = s.min(a);
                e = e.max(b);
                false
            }
        });
        let at = self.0.partition_point(|&(a, _)| a < s);
        self.0.insert(at, (s, e));
        self.0.len() as i64 - before
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn bytes(&self) -> u64 {
        self.0.iter().map(|&(a, b)| (b - a) as u64).sum()
    }
    pub fn iter(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.0.iter().copied()
    }
    /// Whether the ranges cover `[0, block_size)`.
    pub fn covers(&self, block_size: u32) -> bool {
        self.0 == [(0, block_size)]
    }
}

/// Resources a handle may consume, declared before it dirties anything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Credits {
    /// Blocks the handle may add to the transaction's journaled set.
    pub blocks: u64,
    /// Revoke records the handle may add.
    pub revokes: u64,
}

impl Credits {
    pub fn blocks(blocks: u64) -> Self {
        Credits { blocks, revokes: 0 }
    }
}

/// Proof that a handle was admitted; returned to `handle_stop` to check the handle kept
/// within its credits.
#[derive(Debug)]
#[must_use]
pub struct HandleToken {
    pub tid: Tid,
    pub credits: Credits,
    pub(crate) units_before: u64,
    pub(crate) revoked_before: usize,
}

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

use std::collections::BTreeSet;

/// A transaction id. Tids grow by one per transaction and never wrap in practice (u64).
pub type Tid = u64;

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
    pub journaled: BTreeSet<u64>,
    /// Which of `journaled` are file data (for the counters and descriptor tags).
    pub journaled_data: BTreeSet<u64>,
    /// Data blocks written to their final location by this commit (ordered, writeback).
    pub final_data: BTreeSet<u64>,
    /// Blocks freed by this transaction whose older journal copies must not be replayed.
    pub revoked: BTreeSet<u64>,
    /// Blocks freed by this transaction: not reusable until it commits.
    pub freed: Vec<u64>,
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
            final_data: BTreeSet::new(),
            revoked: BTreeSet::new(),
            freed: Vec::new(),
            freed_inodes: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.handles == 0
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
    pub(crate) journaled_before: usize,
    pub(crate) revoked_before: usize,
}

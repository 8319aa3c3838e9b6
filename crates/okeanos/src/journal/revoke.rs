//! Revoke: keeping old logged copies of a freed block from being replayed over its new life.
//!
//! A block logged as metadata (or as data under `data`) and then freed may be reused as
//! file data that is written in place, never logged. If recovery replayed the old logged copy,
//! it would overwrite that data. So freeing a block that still has a copy in the log adds a
//! revoke record to the running transaction, and recovery skips every copy of the block from a
//! transaction at or before the newest revoke (thesis section 3.4, PASS_REVOKE). The cases,
//! as in jbd2's revoke.c:
//! - logged, then freed: revoked; older copies are skipped.
//! - freed (revoked), then logged again in a later transaction: the new copy's tid is higher
//!   than the revoke's, so it replays.
//! - freed and logged again in the same transaction: cannot happen here, because a freed block
//!   is not reallocated until the freeing transaction commits; should a block be logged after
//!   its revoke in one transaction anyway, the revoke is cancelled ([`super::Journal::dirty_metadata`]).
//! A freed block is also dropped from the checkpoint lists once its free commits, so a stale
//! committed version is never written in place over the block's new contents.

use crate::ids::HomeBlock;
use super::transaction::Tid;
use super::Journal;
use crate::det::HashMap;

impl Journal {
    /// A handle of the running transaction frees `block`.
    pub fn forget_block(&mut self, block: HomeBlock) {
        self.running.forget(block);
        if self.logged_copies.contains_key(&block) || self.in_flight_logs(block) {
            self.running.revoked.insert(block);
        }
        self.running.freed.push(block);
    }

    /// A handle of the running transaction frees inode `ino`.
    pub fn forget_inode(&mut self, ino: u32) {
        self.running.freed_inodes.push(ino);
    }
}

/// The revoke table built by recovery's second pass: for each revoked block, the newest
/// transaction that revoked it.
#[derive(Debug, Default, Clone)]
pub struct RevokeTable {
    newest: HashMap<HomeBlock, Tid>,
}

impl RevokeTable {
    pub fn add(&mut self, block: HomeBlock, tid: Tid) {
        let e = self.newest.entry(block).or_insert(tid);
        *e = (*e).max(tid);
    }

    /// Whether the copy of `block` logged by transaction `tid` must not be replayed.
    pub fn is_revoked(&self, block: HomeBlock, tid: Tid) -> bool {
        self.newest.get(&block).is_some_and(|&r| r >= tid)
    }

    pub fn len(&self) -> usize {
        self.newest.len()
    }

    pub fn is_empty(&self) -> bool {
        self.newest.is_empty()
    }
}

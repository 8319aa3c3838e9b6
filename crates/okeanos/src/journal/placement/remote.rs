//! The `remote` placement (remote-journaling thesis; docs/REMOTE.md): committed transactions go
//! to a journal server and are durable when it acknowledges them; the internal journal is the
//! local fallback. No I/O here: a commit is a stage with an APPEND, a checkpoint's release a
//! stage with a TRIM, both carried out by the runtime.
//!
//! State that changes while mounted (the epoch, and whether the host fell back and from which
//! tid) is in the local journal's superblock (`RemoteState`), written only through the ring.
//! Space is the server's quota; a transaction is held there until the checkpoint that releases
//! it TRIMs it, after the checkpoint's home writes are flushed (the release stage comes after
//! them), exactly as the ring frees space only after its superblock records the new tail.
//!
//! Recovery names two logs, oldest first: the server's (read back into memory at mount; only
//! transactions up to `upto` once the host fell back) and the local ring's. They are replayed
//! as one sequence, so nothing older overwrites anything newer.

use crate::faults::Faults;
use super::{Extent, Fallback, Kept, Placement, Records, Recovery, RecoveryStart, Ring, Stage};
use crate::format::journal::RemoteState;
use crate::journal::plan::RemoteOp;
use crate::journal::transaction::Tid;
use std::collections::VecDeque;

#[derive(Debug)]
pub struct Remote {
    /// The internal journal: the local fallback, and the keeper of the remote state.
    ring: Ring,
    /// Journal blocks the server's quota holds.
    capacity: u64,
    /// Transactions the server holds for us, oldest first, with their sizes in blocks.
    held: VecDeque<(Tid, u64)>,
    used: u64,
    /// The server's log as read back at mount, for recovery.
    fetched: Option<RecoveryStart>,
    /// The canaries this one honours ([`Faults`], test-only).
    pub faults: Faults,
}

impl Remote {
    /// `capacity`: blocks the server's quota holds. `fetched`: the server's log in memory.
    pub fn new(ring: Ring, capacity: u64, fetched: Option<RecoveryStart>) -> Self {
        Remote { ring, capacity, held: VecDeque::new(), used: 0, fetched, faults: Faults::default() }
    }


    /// The fallback ring (its superblock, features).
    pub fn ring(&self) -> &Ring {
        &self.ring
    }

    pub fn ring_mut(&mut self) -> &mut Ring {
        &mut self.ring
    }

    /// The fallback ring alone (a host that fell back, mounted read-only).
    pub fn into_ring(self) -> Ring {
        self.ring
    }

    /// Whether the host writes to its fallback ring now.
    pub fn is_local(&self) -> bool {
        self.ring.remote_state().local
    }

    /// Back on the server at mount (after the mount recorded `epoch` and trimmed the server,
    /// `runtime::remote::reopen`), whose quota holds `capacity` blocks.
    pub fn rejoined(&mut self, epoch: u64, capacity: u64) {
        self.returned(epoch);
        self.capacity = capacity;
    }

    /// Transactions up to this one may be dropped after a checkpoint that keeps `kept`.
    fn trim_upto(kept: Kept) -> Tid {
        kept.oldest.map_or(kept.next_tid, |(tid, _)| tid) - 1
    }
}

impl Placement for Remote {
    fn name(&self) -> &'static str {
        if self.is_local() {
            "remote, fallen back to the internal journal"
        } else {
            "remote"
        }
    }

    fn capacity(&self) -> u64 {
        if self.is_local() {
            self.ring.capacity()
        } else {
            self.capacity
        }
    }

    fn free_blocks(&self) -> u64 {
        if self.is_local() {
            self.ring.free_blocks()
        } else {
            self.capacity.saturating_sub(self.used)
        }
    }

    fn place(&mut self, records: Records) -> (Stage, Extent) {
        if self.is_local() {
            return self.ring.place(records);
        }
        let n = records.blocks.len() as u64;
        assert!(n <= self.free_blocks(), "admission keeps every transaction within the server's quota");
        self.held.push_back((records.tid, n));
        self.used += n;
        let op = RemoteOp::Append { tid: records.tid, blocks: records.blocks };
        let ops = if self.faults.skip_remote_append { Vec::new() } else { vec![op] };
        (Stage { remote: ops, ..Stage::default() }, Extent { start: records.tid.get(), end: records.tid.get() + 1, blocks: n })
    }

    fn release_stage(&self, kept: Kept) -> Stage {
        if self.is_local() {
            return self.ring.release_stage(kept);
        }
        Stage { remote: vec![RemoteOp::Trim { upto: Self::trim_upto(kept) }], ..Stage::default() }
    }

    fn released(&mut self, kept: Kept) {
        if self.is_local() {
            return self.ring.released(kept);
        }
        let upto = Self::trim_upto(kept);
        while self.held.front().is_some_and(|&(tid, _)| tid <= upto) {
            let (_, n) = self.held.pop_front().expect("checked");
            self.used -= n;
        }
    }

    fn mount_stage(&self, kept: Kept) -> Stage {
        self.ring.mount_stage(kept)
    }

    fn clean_stage(&self, next_tid: Tid) -> Stage {
        let mut s = self.ring.clean_stage(next_tid);
        if !self.is_local() {
            s.remote.push(RemoteOp::Trim { upto: next_tid - 1 });
        }
        s
    }

    /// The server's log, then the ring only where the journal superblock says the host fell
    /// back: on the server the ring holds no transaction (`place` sends them all), and its
    /// superblock's start and sequence are the ones it had when the host last used it, so a
    /// fallback's first transaction written at that start (tid 14 where the superblock still
    /// says 1) while its superblock update was lost would read as a committed transaction past
    /// a damaged one. That transaction was not acknowledged (its flush did not complete), so
    /// leaving it is what the crash model allows (docs/REMOTE.md, "Falling back").
    fn recovery(&self) -> Recovery {
        let ring = if self.is_local() { self.ring.scan_start() } else { None };
        Recovery::Logs(self.fetched.into_iter().chain(ring).collect())
    }

    /// Both logs are replayed: the server is trimmed to nothing, the ring marked empty, and
    /// the host writes to the server again. A host that fell back recovers its ring alone and
    /// stays local (it returns once the mount reaches the server).
    fn recovered_stage(&self, next_tid: Tid) -> Stage {
        if self.is_local() {
            return self.ring.recovered_stage(next_tid);
        }
        let state = RemoteState { local: false, upto: Tid::ZERO, ..self.ring.remote_state() };
        let mut s = self.ring.clean_stage_with(next_tid, state);
        s.remote.push(RemoteOp::Trim { upto: next_tid - 1 });
        s
    }

    fn recovered(&mut self, next_tid: Tid, kept: &[super::LoggedBlock]) {
        if !self.is_local() {
            self.ring.set_remote_state(RemoteState { local: false, upto: Tid::ZERO, ..self.ring.remote_state() });
        }
        self.ring.recovered(next_tid, kept);
        self.fetched = None;
    }

    fn fallback(&mut self) -> Option<&mut dyn Fallback> {
        Some(self)
    }
}

/// The internal ring is the fallback (docs/REMOTE.md, "The host side").
impl Fallback for Remote {
    /// The server failed: from now on the ring is the journal. The core checkpoints every
    /// committed transaction first (so the server holds nothing recovery needs) and writes the
    /// journal superblock saying so with the failed transaction's ring copy.
    fn fall_back(&mut self, failed_tid: Tid) -> bool {
        if self.is_local() {
            return false;
        }
        let state = RemoteState { local: true, upto: failed_tid.saturating_sub(1), ..self.ring.remote_state() };
        self.ring.set_remote_state(state);
        self.held.clear();
        self.used = 0;
        true
    }

    /// Fell back, and the local journal is empty (a checkpoint released everything): return.
    /// Each step is durable before the next; a failure anywhere leaves the host local (the
    /// epoch it recorded is simply not used), except FENCED, which stops it.
    fn return_plan(&self, next_tid: Tid) -> Option<(Vec<Stage>, u64)> {
        if !self.is_local() || !self.ring.is_empty() {
            return None;
        }
        let state = self.ring.remote_state();
        let epoch = state.epoch + 1;
        let record_epoch = self.ring.in_use_stage_with(next_tid, RemoteState { epoch, ..state });
        let server = Stage { remote: vec![RemoteOp::Reconnect { epoch }, RemoteOp::Fence { epoch }, RemoteOp::Trim { upto: next_tid - 1 }], ..Stage::default() };
        let record_remote = self.ring.in_use_stage_with(next_tid, RemoteState { local: false, epoch, upto: Tid::ZERO });
        Some((vec![record_epoch, server, record_remote], epoch))
    }

    fn returned(&mut self, epoch: u64) {
        self.ring.set_remote_state(RemoteState { local: false, epoch, upto: Tid::ZERO });
        self.held.clear();
        self.used = 0;
    }
}

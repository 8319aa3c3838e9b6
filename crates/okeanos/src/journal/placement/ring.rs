//! The `internal` and `external` placements: a circular log in a contiguous block range.
//! Journal block 0 is the journal superblock; the log occupies `[first, total)` and wraps.
//! [`LogRegion`] is the geometry (also what recovery's scan walks); [`Ring`] the placement.

use super::{Extent, Kept, Placement, Records, Recovery, RecoveryStart, Stage};
use crate::format::journal::{JournalSuperblock, RemoteState};
use crate::journal::plan::{BlockKind, DevId, IoWrite};
use crate::ids::{DevBlock, LogPos, Tid};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegionKind {
    /// A region of the file-system device.
    Internal,
    /// A device or file of its own.
    External,
    /// A remote journal's log read back from the server (in memory, for recovery).
    Remote,
    /// One of the many logs of the file-system device (manylogs): no superblock of its own,
    /// positions from 0.
    Log,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRegion {
    pub kind: RegionKind,
    /// Device block of journal block 0.
    pub base: u64,
    /// Journal blocks including the superblock.
    pub total: u64,
    /// First log block (1).
    pub first: LogPos,
}

impl LogRegion {
    pub fn internal(base: u64, total: u64) -> Self {
        LogRegion { kind: RegionKind::Internal, base, total, first: LogPos::new(1) }
    }
    pub fn external(total: u64) -> Self {
        LogRegion { kind: RegionKind::External, base: 0, total, first: LogPos::new(1) }
    }
    /// A remote log of `blocks` journal blocks read back into memory at positions 1..; one
    /// empty block after them ends the scan, and the region never wraps within them.
    pub fn remote(blocks: u64) -> Self {
        LogRegion { kind: RegionKind::Remote, base: 0, total: blocks + 2, first: LogPos::new(1) }
    }
    pub fn name(&self) -> &'static str {
        match self.kind {
            RegionKind::Internal => "internal",
            RegionKind::External => "external",
            RegionKind::Remote => "remote",
            RegionKind::Log => "manylogs",
        }
    }
    pub fn dev(&self) -> DevId {
        match self.kind {
            RegionKind::Internal | RegionKind::Log => DevId::Fs,
            RegionKind::External => DevId::Journal,
            RegionKind::Remote => DevId::RemoteLog,
        }
    }
    /// Device block of journal block `j`.
    pub fn device_block(&self, j: LogPos) -> DevBlock {
        debug_assert!(j.get() < self.total);
        DevBlock::new(self.base + j.get())
    }
    /// Blocks in the circular part.
    pub fn ring_len(&self) -> u64 {
        self.total - self.first.get()
    }
    /// The journal superblock's position (block 0).
    pub fn superblock(&self) -> LogPos {
        LogPos::new(0)
    }
    /// Every position of the circular part, in order from `first`.
    pub fn positions(&self) -> impl Iterator<Item = LogPos> {
        (self.first.get()..self.total).map(LogPos::new)
    }
    /// The log position after `pos`.
    pub fn next(&self, pos: LogPos) -> LogPos {
        if pos.get() + 1 >= self.total {
            self.first
        } else {
            LogPos::new(pos.get() + 1)
        }
    }
    /// Blocks from `from` forward to `to`.
    pub fn distance(&self, from: LogPos, to: LogPos) -> u64 {
        let (from, to) = (from.get(), to.get());
        if to >= from {
            to - from
        } else {
            self.ring_len() - (from - to)
        }
    }
    /// `pos` advanced by `n` blocks.
    pub fn advance(&self, pos: LogPos, n: u64) -> LogPos {
        LogPos::new(self.first.get() + (pos.get() - self.first.get() + n) % self.ring_len())
    }
}

/// The `internal` and `external` placements: a circular log over a [`LogRegion`] whose
/// journal block 0 holds the journal superblock (thesis section 3.1.4, Figure 3.4). `tail` is
/// the first block of the oldest transaction not yet checkpointed, `head` where the next one
/// goes; the space between head and tail is free, and one block always stays empty so that
/// `head == tail` means an empty log. Space is released in log order only, after the journal
/// superblock records the new tail.
#[derive(Debug)]
pub struct Ring {
    region: LogRegion,
    /// The journal superblock as mounted (features, uuids); `start` and `sequence` are
    /// written from the state below.
    jsb: JournalSuperblock,
    head: LogPos,
    tail: LogPos,
}

impl Ring {
    /// A ring over an empty log (clean or just recovered).
    pub fn new(region: LogRegion, jsb: JournalSuperblock) -> Self {
        Ring { region, jsb, head: region.first, tail: region.first }
    }

    pub fn region(&self) -> LogRegion {
        self.region
    }

    /// The remote journal state this ring's superblock records (a remote journal's fallback).
    pub fn remote_state(&self) -> RemoteState {
        self.jsb.remote
    }

    /// Changes it for the superblock writes from now on.
    pub fn set_remote_state(&mut self, state: RemoteState) {
        self.jsb.remote = state;
    }

    /// The journal superblock as it stands: what the mount read, with the remote state and
    /// features since recorded (and, after recovery, the empty log it recorded).
    pub fn superblock(&self) -> &JournalSuperblock {
        &self.jsb
    }

    /// Journal features the superblock writes from now on carry as well.
    pub fn add_features(&mut self, features: u32) {
        self.jsb.features |= features;
    }

    /// Whether no transaction occupies the log.
    pub fn is_empty(&self) -> bool {
        self.head == self.tail
    }

    /// The journal superblock of a log in use from its tail, with `remote` as given.
    pub fn in_use_stage_with(&self, next_tid: Tid, remote: RemoteState) -> Stage {
        assert!(self.is_empty(), "only an empty log changes its remote state this way");
        self.jsb_stage_with(self.tail, next_tid, remote)
    }

    /// The journal superblock with the log empty, the next tid and `remote` as given.
    pub fn clean_stage_with(&self, next_tid: Tid, remote: RemoteState) -> Stage {
        self.jsb_stage_with(LogPos::ZERO, next_tid, remote)
    }

    /// Log blocks in use (committed and committing transactions).
    fn used_blocks(&self) -> u64 {
        self.region.distance(self.tail, self.head)
    }

    fn jsb_stage(&self, start: LogPos, sequence: Tid) -> Stage {
        self.jsb_stage_with(start, sequence, self.jsb.remote)
    }

    /// The write of the journal superblock with the log from `start` (0: empty), the tid there,
    /// and the remote state, then its flush.
    fn jsb_stage_with(&self, start: LogPos, sequence: Tid, remote: RemoteState) -> Stage {
        let mut b = vec![0u8; self.jsb.block_size as usize];
        JournalSuperblock { start, sequence, remote, ..self.jsb.clone() }.encode(&mut b);
        let dev = self.region.dev();
        Stage { writes: vec![IoWrite { dev, block: self.region.device_block(self.region.superblock()), data: Arc::new(b), kind: BlockKind::JournalSuper }], flush: vec![dev], remote: Vec::new(), nvm: Vec::new() }
    }

    /// Where the log starts after a checkpoint that keeps `kept`.
    fn tail_of(&self, kept: Kept) -> (LogPos, Tid) {
        match kept.oldest {
            Some((tid, at)) => (LogPos::new(at.start), tid),
            None => (self.head, kept.next_tid),
        }
    }
}

impl Placement for Ring {
    fn name(&self) -> &'static str {
        self.region.name()
    }

    fn capacity(&self) -> u64 {
        self.region.ring_len()
    }

    fn checkpoint_beside_commit(&self) -> bool {
        matches!(self.region.kind, RegionKind::Internal | RegionKind::External)
    }

    fn pipelines_commits(&self) -> bool {
        matches!(self.region.kind, RegionKind::Internal | RegionKind::External)
    }

    fn set_pipeline(&mut self, depth: u32) {
        if self.pipelines_commits() {
            self.jsb.pipeline = depth.min(crate::format::journal::MAX_PIPELINE);
        }
    }

    fn free_blocks(&self) -> u64 {
        self.region.ring_len() - 1 - self.used_blocks()
    }

    fn place(&mut self, records: Records) -> (Stage, Extent) {
        let n = records.blocks.len() as u64;
        assert!(n <= self.free_blocks(), "admission keeps every transaction within free log space");
        let dev = self.region.dev();
        let start = self.head;
        let mut pos = start;
        let mut writes = Vec::with_capacity(records.blocks.len());
        for (data, kind) in records.blocks {
            writes.push(IoWrite { dev, block: self.region.device_block(pos), data, kind });
            pos = self.region.next(pos);
        }
        self.head = pos;
        (Stage { writes, flush: vec![dev], remote: Vec::new(), nvm: Vec::new() }, Extent { start: start.get(), end: pos.get(), blocks: n })
    }

    fn release_stage(&self, kept: Kept) -> Stage {
        let (start, tid) = self.tail_of(kept);
        self.jsb_stage(start, tid)
    }

    fn released(&mut self, kept: Kept) {
        self.tail = self.tail_of(kept).0;
    }

    fn mount_stage(&self, kept: Kept) -> Stage {
        let (start, tid) = self.tail_of(kept);
        self.jsb_stage(start, tid)
    }

    fn clean_stage(&self, next_tid: Tid) -> Stage {
        assert_eq!(self.head, self.tail, "a clean journal is empty");
        self.jsb_stage(LogPos::ZERO, next_tid)
    }

    /// From the journal superblock as read at mount: the tail and its tid, unless clean. Every
    /// transaction takes at least one block and space is reused only after the superblock
    /// records the new tail, so the ring holds tids below `sequence + ring length`.
    fn recovery(&self) -> Recovery {
        Recovery::Logs(self.scan_start().into_iter().collect())
    }

    fn recovered_stage(&self, next_tid: Tid) -> Stage {
        self.jsb_stage(LogPos::ZERO, next_tid)
    }

    fn recovered(&mut self, next_tid: Tid, _kept: &[super::LoggedBlock]) {
        self.jsb.start = LogPos::ZERO;
        self.jsb.sequence = next_tid;
    }
}

impl Ring {
    /// Where the ring's recovery starts, if it needs one.
    pub fn scan_start(&self) -> Option<RecoveryStart> {
        (!self.jsb.is_clean()).then(|| RecoveryStart {
            region: self.region,
            pos: self.jsb.start,
            tid: self.jsb.sequence,
            multiwrite: self.jsb.features & crate::format::journal::jfeature::MULTIWRITE != 0,
            tid_bound: self.jsb.sequence + self.region.ring_len(),
            interleaved: None,
            pipeline: self.jsb.pipeline,
        })
    }
}

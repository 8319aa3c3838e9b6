//! The `manylogs` placement: a small circular log in every block group, each transaction
//! appended to the log nearest the disk head (manylogs paper, section III-D: "the location of
//! last large I/O"), so that a small synchronous write becomes durable without a seek across
//! the disk (docs/JOURNALING.md, "Manylogs").
//!
//! The head position is the last I/O the journal did not log: the highest block of a commit's
//! in-place stage ([`Records::near`]), the last checkpoint write, a read miss, or a hint from
//! the library (`Okeanos::hint_position`) for I/O the engine does not see. The log of that
//! block's group is taken if it has room, else the nearest one that has, ahead of the head
//! first (section III-D leaves the choice among equally near logs open).
//!
//! Where each log's live transactions begin and end is recorded in the **log table**
//! (format/logtable.rs): two checksummed copies (A/B) in the journal region, written at
//! mount, at every checkpoint that releases space, at recovery's end and at clean unmount. A
//! log's released space is reused only after the table recording its new tail is durable
//! (the release stage flushes it before [`Placement::released`]): until then the previous
//! table, which recovery would read, still names that space as live. The paper keeps its
//! table (MTL) in capacitor-backed RAM (section III-E); this one is on the disk.
//!
//! Transactions of one log have increasing tids, but consecutive tids may sit in different
//! logs: recovery scans every log from its recorded tail, accepting any higher tid at a
//! transaction boundary, and merges what it finds by tid (journal/recovery.rs, "Manylogs").
//!
//! Space: a transaction must fit one log (the transaction limits are fractions of one log's
//! length, [`Placement::capacity`]); free space is the largest free run of any log, so
//! admission never accepts a transaction no log can take.

use super::{Extent, Kept, LogRegion, Placement, Records, RecoveryStart, RegionKind, Stage};
use crate::format::logtable::{flags, LogEntry, LogTable};
use crate::journal::plan::{BlockKind, DevId, IoWrite};
use crate::journal::transaction::Tid;
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::Arc;

/// Where the logs and the log table are on the file-system device.
#[derive(Debug, Clone)]
pub struct Geometry {
    pub block_size: usize,
    pub fs_uuid: [u8; 16],
    /// First block of group 0 and blocks per group: a block's group is its log's index.
    pub first_group_block: u64,
    pub blocks_per_group: u64,
    /// First device block of each group's log.
    pub log_starts: Vec<u64>,
    pub log_blocks: u64,
    /// Device block of copy A of the log table; copy B follows it.
    pub table_at: u64,
    pub table_blocks: u64,
}

impl Geometry {
    pub fn of(sb: &crate::format::Superblock) -> Geometry {
        let crate::format::JournalLocation::Internal { start, .. } = sb.journal else {
            panic!("a manylogs superblock validates with an internal journal region");
        };
        Geometry {
            block_size: sb.block_size as usize,
            fs_uuid: sb.uuid,
            first_group_block: sb.first_group_block,
            blocks_per_group: sb.blocks_per_group as u64,
            log_starts: (0..sb.group_count).map(|g| sb.log_area_start(g)).collect(),
            log_blocks: sb.log_area_blocks as u64,
            table_at: start + 1,
            table_blocks: LogTable::blocks_per_copy(sb.group_count as u64, sb.block_size as usize),
        }
    }

    pub fn region(&self, log: usize) -> LogRegion {
        LogRegion { kind: RegionKind::Log, base: self.log_starts[log], total: self.log_blocks, first: 0 }
    }

    /// The group (and log) a file-system block lies in.
    pub fn group_of(&self, block: u64) -> usize {
        let g = block.saturating_sub(self.first_group_block) / self.blocks_per_group;
        (g as usize).min(self.log_starts.len() - 1)
    }

    /// Device block of the first block of table copy `slot` (0: A, 1: B).
    pub fn copy_at(&self, slot: u64) -> u64 {
        self.table_at + slot * self.table_blocks
    }
}

/// Reads both copies of the log table; the valid one with the higher sequence wins.
pub fn read_table(geo: &Geometry, read: &mut dyn FnMut(u64) -> Result<Vec<u8>, crate::device::DeviceError>) -> Result<LogTable, crate::fs::FsError> {
    let mut best: Option<LogTable> = None;
    let mut errors = Vec::new();
    for slot in 0..2 {
        let mut bytes = Vec::with_capacity((geo.table_blocks as usize) * geo.block_size);
        for k in 0..geo.table_blocks {
            bytes.extend_from_slice(&read(geo.copy_at(slot) + k)?);
        }
        match LogTable::decode(&bytes, geo.fs_uuid, geo.log_starts.len() as u32, geo.log_blocks as u32) {
            Ok(t) if best.as_ref().is_none_or(|b| t.seq > b.seq) => best = Some(t),
            Ok(_) => {}
            Err(e) => errors.push(format!("copy {}: {e}", ["A", "B"][slot as usize])),
        }
    }
    best.ok_or_else(|| crate::fs::FsError::Corrupt(format!("no valid manylogs log table ({})", errors.join("; "))))
}

#[derive(Debug, Default)]
struct Log {
    /// Where the next transaction goes and where the oldest kept one begins; `head == tail`
    /// is an empty log (one block always stays free).
    head: u64,
    tail: u64,
    /// Its transactions, oldest first: tid, first and past-the-end position.
    txs: VecDeque<(Tid, u64, u64)>,
}

/// Commits placed, and how many landed in the log of the head's group or a neighbour's.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct NearHead {
    pub commits: u64,
    pub near: u64,
    /// In the head's own group.
    pub same: u64,
    /// Transactions that reached a log's end and went on at its start (space reused).
    pub wraps: u64,
    /// Transactions that went to another log than the one before.
    pub switches: u64,
}

#[derive(Debug)]
pub struct Manylogs {
    geo: Geometry,
    logs: Vec<Log>,
    /// The table read at mount (what recovery starts from).
    mounted: LogTable,
    /// Sequence of the newest table known durable, and of the table last planned. A table is
    /// planned with the sequence after the newest durable one, so it goes to the other copy;
    /// a checkpoint planned and then dropped (it clashed with a commit's in-place writes and is
    /// planned again) leaves no gap. A release's table is durable when `released` is called;
    /// the mount's, recovery's and unmount's are executed at once, or the mount fails.
    durable_seq: Cell<u64>,
    planned_seq: Cell<u64>,
    /// The newest transaction whose commit is durable.
    durable: Tid,
    /// The last I/O the journal did not log (a file-system block), if any yet.
    position: Option<u64>,
    /// The log the last transaction went to (where the head is when no position is known).
    last_log: usize,
    pub near_head: NearHead,
    /// The in-memory map of logged blocks (the paper's MTL, section III-E): each block whose
    /// newest committed version was logged whole and unescaped, with the device block that
    /// holds it, its transaction and the tag's data hash. The cache may drop such a block's
    /// data ([`Placement::frozen_copy`]); a read then loads it from the log, and a checkpoint
    /// copies it from the log home. An entry goes when the block is logged again (a newer
    /// position, or none if as records), revoked, or its transaction's space is released.
    map: crate::det::HashMap<u64, Mapped>,
    /// Canary for the crash tests: releases log space without writing the table that records
    /// the release, so space is reused while the durable table still names it live. Recovery
    /// must then miss committed transactions.
    pub fault_reuse_before_table: bool,
    /// Canary: a block logged whole again keeps the position of its first logged copy, so a
    /// parked block loads, and a checkpoint copies home, an older version.
    pub fault_keep_first_position: bool,
}

/// Where a logged block's newest committed version is.
#[derive(Debug, Clone, Copy)]
struct Mapped {
    at: u64,
    tid: Tid,
    hash: u32,
}

impl Manylogs {
    /// The placement over the logs `table` describes (read at mount). Every log starts empty
    /// at position 0: after recovery or a clean unmount nothing in them is live, and what is
    /// left there carries tids below the next one.
    pub fn new(geo: Geometry, table: LogTable) -> Self {
        let logs = (0..geo.log_starts.len()).map(|_| Log::default()).collect();
        let (durable_seq, planned_seq) = (Cell::new(table.seq), Cell::new(table.seq));
        Manylogs { geo, logs, mounted: table, durable_seq, planned_seq, durable: 0, position: None, last_log: 0, near_head: NearHead::default(), map: Default::default(), fault_reuse_before_table: false, fault_keep_first_position: false }
    }

    /// The table's floor as read at mount: after a clean unmount, the next tid.
    pub fn floor(&self) -> Tid {
        self.mounted.floor
    }

    fn used(&self, i: usize) -> u64 {
        let l = &self.logs[i];
        if l.head >= l.tail {
            l.head - l.tail
        } else {
            self.geo.log_blocks - (l.tail - l.head)
        }
    }

    fn free_in(&self, i: usize) -> u64 {
        self.geo.log_blocks - 1 - self.used(i)
    }

    /// The log the head is at: the group of the last non-logged I/O.
    fn head_log(&self) -> usize {
        self.geo.group_of(self.head_block())
    }

    /// The disk block the head is at (the last log written when nothing else is known).
    fn head_block(&self) -> u64 {
        self.position.unwrap_or(self.geo.log_starts[self.last_log])
    }

    /// The log with `n` free blocks whose start is nearest the head: within a group, the log
    /// of the group ahead may be nearer than the group's own (logs sit at group starts).
    fn choose(&self, n: u64) -> Option<usize> {
        let b = self.head_block();
        let starts = &self.geo.log_starts;
        let dist = |i: usize| starts[i].abs_diff(b);
        // Walk outwards from the first log at or after the head, the nearer side first.
        let mut ahead = starts.partition_point(|&s| s < b);
        let mut behind = ahead;
        loop {
            let pick = match (ahead < starts.len(), behind > 0) {
                (false, false) => return None,
                (true, false) => true,
                (false, true) => false,
                (true, true) => dist(ahead) <= dist(behind - 1),
            };
            let i = if pick {
                ahead += 1;
                ahead - 1
            } else {
                behind -= 1;
                behind
            };
            if self.free_in(i) >= n {
                return Some(i);
            }
        }
    }

    /// The table after a checkpoint that keeps `kept`: each log's new tail, and its end of
    /// durable transactions.
    fn table_after(&self, kept: Kept, clean: bool) -> LogTable {
        let floor = kept.oldest.map_or(kept.next_tid, |(t, _)| t);
        let logs = self
            .logs
            .iter()
            .map(|l| {
                let live: Vec<&(Tid, u64, u64)> = l.txs.iter().filter(|t| t.0 >= floor).collect();
                let (tail, tail_tid) = live.first().map_or((l.head, 0), |t| (t.1, t.0));
                let end = live.iter().filter(|t| t.0 <= self.durable).last().map_or(tail, |t| t.2);
                LogEntry { tail: tail as u32, end: end as u32, tail_tid }
            })
            .collect();
        let seq = self.durable_seq.get() + 1;
        self.planned_seq.set(seq);
        LogTable { flags: if clean { flags::CLEAN } else { 0 }, seq, floor, log_blocks: self.geo.log_blocks as u32, fs_uuid: self.geo.fs_uuid, logs }
    }

    /// The write of `table` into the copy its sequence names, then the flush.
    fn table_stage(&self, table: &LogTable) -> Stage {
        let bs = self.geo.block_size;
        let mut bytes = vec![0u8; self.geo.table_blocks as usize * bs];
        table.encode(&mut bytes);
        let at = self.geo.copy_at(table.seq % 2);
        let writes = bytes
            .chunks(bs)
            .enumerate()
            .map(|(k, b)| IoWrite { dev: DevId::Fs, block: at + k as u64, data: Arc::new(b.to_vec()), kind: BlockKind::JournalSuper })
            .collect();
        Stage { writes, flush: vec![DevId::Fs], remote: Vec::new(), nvm: Vec::new() }
    }

    fn empty_table_stage(&self, next_tid: Tid, clean: bool) -> Stage {
        assert!(self.logs.iter().all(|l| l.txs.is_empty()), "only empty logs are recorded empty");
        self.executed_at_once(self.table_after(Kept { oldest: None, next_tid }, clean))
    }

    /// The stage of a table that is executed as soon as planned (mount, recovery, unmount):
    /// the next table goes to the other copy.
    fn executed_at_once(&self, table: LogTable) -> Stage {
        let stage = self.table_stage(&table);
        self.durable_seq.set(table.seq);
        stage
    }
}

fn encode(log: usize, pos: u64) -> u64 {
    (log as u64) << 32 | pos
}

impl Placement for Manylogs {
    fn name(&self) -> &'static str {
        "manylogs"
    }

    /// One log's length: a transaction is written into one log, so the transaction limits
    /// are fractions of it.
    fn capacity(&self) -> u64 {
        self.geo.log_blocks - 1
    }

    /// The most any one log can take now.
    fn free_blocks(&self) -> u64 {
        (0..self.logs.len()).map(|i| self.free_in(i)).max().unwrap_or(0)
    }

    /// Low when the log at the head cannot take a quarter of a log plus the largest
    /// transaction: the next commits would have to go farther away. (With the lazy
    /// checkpoint of the paper, log swapping answers this instead; issue 15.)
    fn space_low(&self, max_tx: u64) -> bool {
        self.free_in(self.head_log()) < self.geo.log_blocks / 4 + max_tx
    }

    /// Lazy: only when no log can take a quarter of a log plus the largest transaction, so
    /// that commits go ever farther from the head before anything is checkpointed.
    fn space_exhausted(&self, max_tx: u64) -> bool {
        self.free_blocks() < self.geo.log_blocks / 4 + max_tx
    }

    /// Everything committed: free space is counted per log, so "free N more blocks" has no
    /// single log to count in, and the head's log holds the newest transactions, which a
    /// checkpoint in tid order frees last. (Lazy checkpoint and log swapping replace this.)
    fn checkpoint_target(&self) -> u64 {
        u64::MAX
    }

    fn checkpoint_beside_commit(&self) -> bool {
        true
    }

    fn note_position(&mut self, block: u64) {
        self.position = Some(block);
    }

    fn place(&mut self, records: Records) -> (Stage, Extent) {
        if let Some(b) = records.near {
            self.position = Some(b);
        }
        let n = records.blocks.len() as u64;
        let g0 = self.head_log();
        let i = self.choose(n).expect("admission keeps every transaction within one log's free space");
        self.near_head.commits += 1;
        self.near_head.near += (i.abs_diff(g0) <= 1) as u64;
        self.near_head.same += (i == g0) as u64;
        let region = self.geo.region(i);
        let log = &mut self.logs[i];
        let start = log.head;
        let mut pos = start;
        let mut writes = Vec::with_capacity(records.blocks.len());
        for (data, kind) in records.blocks {
            writes.push(IoWrite { dev: DevId::Fs, block: region.device_block(pos), data, kind });
            pos = region.next(pos);
        }
        for &b in &records.revoked {
            self.map.remove(&b);
        }
        for (b, whole) in records.logged {
            match whole {
                Some(_) if self.fault_keep_first_position && self.map.contains_key(&b) => {}
                Some((k, hash)) => {
                    self.map.insert(b, Mapped { at: writes[k].block, tid: records.tid, hash });
                }
                None => {
                    self.map.remove(&b);
                }
            }
        }
        if pos < start || pos == 0 {
            self.near_head.wraps += 1;
        }
        log.head = pos;
        log.txs.push_back((records.tid, start, pos));
        self.near_head.switches += (i != self.last_log) as u64;
        self.last_log = i;
        (Stage { writes, flush: vec![DevId::Fs], remote: Vec::new(), nvm: Vec::new() }, Extent { start: encode(i, start), end: encode(i, pos), blocks: n })
    }

    fn on_durable(&mut self, tid: Tid) {
        self.durable = self.durable.max(tid);
    }

    fn release_stage(&self, kept: Kept) -> Stage {
        if self.fault_reuse_before_table {
            return Stage::default();
        }
        self.table_stage(&self.table_after(kept, false))
    }

    fn released(&mut self, kept: Kept) {
        self.durable_seq.set(self.planned_seq.get());
        let floor = kept.oldest.map_or(kept.next_tid, |(t, _)| t);
        for l in &mut self.logs {
            while l.txs.front().is_some_and(|t| t.0 < floor) {
                l.txs.pop_front();
            }
            l.tail = l.txs.front().map_or(l.head, |t| t.1);
        }
        // Their blocks are home (the checkpoint wrote or copied each one there).
        self.map.retain(|_, m| m.tid >= floor);
    }

    /// A block whose newest committed version is in a log, unescaped: the cache may drop it.
    fn frozen_copy(&self, block: u64) -> Option<u64> {
        self.map.get(&block).map(|m| m.at)
    }

    fn frozen_hash(&self, block: u64) -> Option<u32> {
        self.map.get(&block).map(|m| m.hash)
    }

    fn parks_on_device(&self) -> bool {
        true
    }

    fn mount_stage(&self, kept: Kept) -> Stage {
        self.executed_at_once(self.table_after(kept, false))
    }

    fn clean_stage(&self, next_tid: Tid) -> Stage {
        self.empty_table_stage(next_tid, true)
    }

    /// Every log from its recorded tail, unless the table was written clean. The logs hold
    /// tids below the floor plus every log's length: each transaction takes a block, and no
    /// space holding a transaction at or above the floor is reused before a newer table
    /// (whose floor is higher) is durable.
    fn recovery(&self) -> Vec<RecoveryStart> {
        if self.mounted.is_clean() {
            return Vec::new();
        }
        let bound = self.mounted.floor + self.geo.log_blocks * self.logs.len() as u64 + 1;
        self.mounted
            .logs
            .iter()
            .enumerate()
            .map(|(i, e)| RecoveryStart {
                region: self.geo.region(i),
                pos: e.tail as u64,
                tid: self.mounted.floor,
                multiwrite: true,
                tid_bound: bound,
                interleaved: Some(super::Interleaved { end: e.end as u64, tail_tid: e.tail_tid }),
            })
            .collect()
    }

    fn recovered_stage(&self, next_tid: Tid) -> Stage {
        self.empty_table_stage(next_tid, true)
    }

    fn near_head(&self) -> Option<NearHead> {
        Some(self.near_head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo(logs: usize) -> Geometry {
        Geometry {
            block_size: 4096,
            fs_uuid: [1; 16],
            first_group_block: 100,
            blocks_per_group: 1000,
            log_starts: (0..logs).map(|g| 100 + g as u64 * 1000 + 10).collect(),
            log_blocks: 256,
            table_at: 5,
            table_blocks: 1,
        }
    }

    fn empty(logs: usize) -> LogTable {
        LogTable { flags: flags::CLEAN, seq: 0, floor: 1, log_blocks: 256, fs_uuid: [1; 16], logs: vec![LogEntry::default(); logs] }
    }

    fn records(tid: Tid, n: usize, near: Option<u64>) -> Records {
        Records { tid, blocks: (0..n).map(|_| (Arc::new(vec![0u8; 4096]), BlockKind::JournalMeta)).collect(), images: Vec::new(), revoked: Vec::new(), logged: Vec::new(), near }
    }

    fn log_of(stage: &Stage) -> u64 {
        (stage.writes[0].block - 100) / 1000
    }

    #[test]
    fn commits_follow_the_head() {
        let mut m = Manylogs::new(geo(8), empty(8));
        let (s, _) = m.place(records(1, 3, Some(100 + 5 * 1000 + 500)));
        assert_eq!(log_of(&s), 5, "the log of the in-place write's group");
        m.note_position(100 + 2 * 1000 + 7);
        let (s, _) = m.place(records(2, 3, None));
        assert_eq!(log_of(&s), 2, "a read or checkpoint moved the head");
        let (s, _) = m.place(records(3, 3, None));
        assert_eq!(log_of(&s), 2, "the head stays until other I/O moves it");
        assert_eq!(m.near_head, NearHead { commits: 3, near: 3, same: 3, wraps: 0, switches: 2 });
    }

    #[test]
    fn a_full_log_sends_the_commit_to_the_nearest_one_with_room() {
        let mut m = Manylogs::new(geo(8), empty(8));
        // Mid-group 3: its own log 490 blocks behind, log 4's 510 ahead, log 2's 1490 behind.
        m.note_position(100 + 3 * 1000 + 500);
        // Fill log 3 to 200 of its 255 usable blocks.
        m.place(records(1, 200, None));
        let (s, at) = m.place(records(2, 60, None));
        assert_eq!(log_of(&s), 4, "the next nearest");
        assert_eq!(at.start >> 32, 4);
        let (s, _) = m.place(records(3, 200, None));
        assert_eq!(log_of(&s), 2, "log 4 has no room: log 2 is nearer than log 5");
        let (s, _) = m.place(records(4, 60, None));
        assert_eq!(log_of(&s), 4, "the nearest with room");
        assert_eq!(m.free_blocks(), 255, "the untouched logs are empty");
        assert_eq!(m.near_head.near, 4);
    }

    #[test]
    fn release_records_tails_and_durable_ends_and_frees_only_after() {
        let mut m = Manylogs::new(geo(4), empty(4));
        m.note_position(100);
        m.place(records(1, 10, None));
        m.place(records(2, 10, None));
        m.on_durable(1);
        m.on_durable(2);
        m.note_position(100 + 3 * 1000);
        m.place(records(3, 10, None)); // in flight: not durable
        let kept = Kept { oldest: Some((2, Extent { start: 10, end: 20, blocks: 10 })), next_tid: 4 };
        let t = m.table_after(kept, false);
        assert_eq!(t.floor, 2);
        assert_eq!(t.logs[0], LogEntry { tail: 10, end: 20, tail_tid: 2 });
        assert_eq!(t.logs[3], LogEntry { tail: 0, end: 0, tail_tid: 3 }, "a commit in flight is live but not yet recorded durable");
        assert_eq!(t.logs[1], LogEntry { tail: 0, end: 0, tail_tid: 0 });
        let before = m.free_in(0);
        let stage = m.release_stage(kept);
        assert_eq!(stage.flush, vec![DevId::Fs]);
        assert_eq!(m.free_in(0), before, "nothing is reused before the table is durable");
        m.released(kept);
        assert_eq!(m.free_in(0), before + 10);
    }

    #[test]
    fn a_dropped_release_leaves_the_durable_copy_alone() {
        let mut m = Manylogs::new(geo(4), empty(4));
        let mount = m.mount_stage(Kept { oldest: None, next_tid: 1 });
        m.place(records(1, 5, None));
        m.on_durable(1);
        let kept = Kept { oldest: None, next_tid: 2 };
        let first = m.release_stage(kept);
        assert_ne!(first.writes[0].block, mount.writes[0].block, "the other copy than the mount's");
        // Dropped (a clash) and planned again: still the other copy, not the mount's.
        let again = m.release_stage(kept);
        assert_eq!(again.writes[0].block, first.writes[0].block);
        m.released(kept);
        m.place(records(2, 5, None));
        m.on_durable(2);
        let next = m.release_stage(Kept { oldest: None, next_tid: 3 });
        assert_eq!(next.writes[0].block, mount.writes[0].block, "after the release is durable, the copy it did not use");
    }

    #[test]
    fn table_copies_alternate() {
        let m = Manylogs::new(geo(4), empty(4));
        let a = m.mount_stage(Kept { oldest: None, next_tid: 1 });
        let b = m.clean_stage(1);
        assert_ne!(a.writes[0].block, b.writes[0].block, "consecutive tables go to different copies");
    }
}

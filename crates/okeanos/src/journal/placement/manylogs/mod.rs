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
//! logs: recovery scans every log from the position its table's map records (after its
//! newest transaction at or below the map's home tid), accepting any higher tid at a
//! transaction boundary, and merges what it finds by tid (journal/recovery/, "Interleaved
//! logs"). The map names the logged blocks up to the home tid that are not home: recovery
//! keeps them logged, and the mount takes them over (docs/JOURNALING.md, "The map on disk").
//!
//! Space: a transaction must fit one log (the transaction limits are fractions of one log's
//! length, [`Placement::capacity`]); free space is the largest free run of any log, so
//! admission never accepts a transaction no log can take.

mod geometry;
mod head;
mod swap;
mod table;

pub use geometry::Geometry;
pub use table::{formatted, read_table, refuse_fallback, sweep_after_fallback, ReadTable};
use crate::ids::{DevBlock, HomeBlock, LogPos};
use crate::faults::Faults;
use swap::Swap;

use super::{Defaults, Extent, HeadAware, Kept, LoggedBlock, NearHead, LogRegion, Parking, Placement, Records, Recovery, RecoveryStart, RegionKind, Snapshots, Stage, Swaps};
use crate::format::logtable::{flags, LogEntry, LogMap, LogTable, MapEntry, SnapPos};
use crate::journal::plan::COPY_SLICE_BLOCKS;
use crate::journal::plan::{BlockKind, CopyCheck, DevId, IoCopy, IoStage, IoWrite};
use crate::journal::transaction::Tid;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::Arc;

#[derive(Debug, Default)]
struct Log {
    /// Where the next transaction goes and where the oldest kept one begins; `head == tail`
    /// is an empty log (one block always stays free).
    head: u64,
    tail: u64,
    /// Its transactions, oldest first.
    txs: VecDeque<Placed>,
    /// Transactions with lower tids found in this log's space are stale, even at or above the
    /// table's floor: a swap moved them to another log (recorded as the tail tid of the log
    /// while it is empty; 0: none).
    min_tid: Tid,
    /// Filled by a swap and no commit since: cold, so a quiet spell does not move it again.
    swapped_in: bool,
}

/// One transaction in a log, or the part of a log kept across recovery.
#[derive(Debug)]
struct Placed {
    /// Its tid; for a kept part, the newest tid of a block kept there (it is released with
    /// that transaction).
    tid: Tid,
    /// The tid of the transaction at `start` (the log table's tail tid).
    first: Tid,
    /// A part of a log kept across recovery (blocks the map named stay logged): its
    /// transactions' boundaries and CRCs are not known, so it is never swapped.
    recovered: bool,
    /// First and past-the-end position.
    start: u64,
    end: u64,
    /// Of each of its blocks, in log order, the bytes a write must carry (a commit block's
    /// sectors that hold it: the rest may not have been written) and their CRC32C: a swap
    /// checks what it reads.
    crcs: Vec<(u32, u32)>,
}

#[derive(Debug)]
pub struct Manylogs {
    geo: Geometry,
    logs: Vec<Log>,
    /// The table read at mount (what recovery starts from), and its map.
    mounted: LogTable,
    mounted_map: LogMap,
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
    /// The swap in flight.
    swapping: Option<Swap>,
    /// The in-memory map of logged blocks (the paper's MTL, section III-E): each block whose
    /// newest committed version was logged whole and unescaped, with the device block that
    /// holds it, its transaction and the tag's data hash. The cache may drop such a block's
    /// data ([`Parking::frozen_copy`]); a read then loads it from the log, and a checkpoint
    /// copies it from the log home. An entry goes when the block is logged again (a newer
    /// position, or none if as records), revoked, or its transaction's space is released.
    map: crate::det::HashMap<HomeBlock, Mapped>,
    /// Changes to `map` by transactions placed but not yet durable, oldest first: the map is
    /// what is durable, so that a snapshot of it never names a copy a crash may tear.
    pending: VecDeque<(Tid, Vec<(HomeBlock, Option<Mapped>)>)>,
    /// The snapshot of the newest durable table (its home tid and the blocks it keeps
    /// logged), and that of the table last planned, which becomes it once durable.
    snap: RefCell<Snap>,
    planned_snap: RefCell<Option<Snap>>,
    /// The table and map recovery's last stage writes ([`Snapshots::recovered_keeping`]): what
    /// the placement becomes once it is durable ([`Placement::recovered`]).
    recovered_to: RefCell<Option<(LogTable, LogMap)>>,
    /// The canaries this one honours ([`Faults`], test-only).
    pub faults: Faults,
    /// The newest whole transaction of this life a sweep found in the logs when the newer
    /// table copy was invalid ([`sweep_after_fallback`]); 0 without a sweep. Recovery checks it.
    swept: Tid,
}

/// A snapshot of the map: every change up to `home` is home or in `entries`.
#[derive(Debug, Clone, Default)]
struct Snap {
    home: Tid,
    entries: Vec<MapEntry>,
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
    ///
    /// A table written by recovery that kept mapped blocks logged names, per log, the part
    /// that holds them ([`Snapshots::recovered_keeping`]): that part stays live, as one
    /// `Placed` released with the newest transaction of a block kept there, the map names
    /// them again, and the next commit of that log goes after it.
    pub fn new(geo: Geometry, ReadTable { table, map, .. }: ReadTable) -> Self {
        let mut logs: Vec<Log> = (0..geo.log_starts.len()).map(|_| Log::default()).collect();
        let (durable_seq, planned_seq) = (Cell::new(table.seq), Cell::new(table.seq));
        let kept = if table.is_clean() { &[][..] } else { &map.entries[..] };
        let mut mapped = crate::det::HashMap::default();
        for e in kept {
            let i = geo.group_of(e.at);
            let (entry, snap) = (table.logs[i], map.snaps[i]);
            let l = &mut logs[i];
            if l.txs.is_empty() {
                l.txs.push_back(Placed { tid: e.tid, first: entry.tail_tid, recovered: true, start: entry.tail as u64, end: snap.pos as u64, crcs: Vec::new() });
                (l.tail, l.head) = (entry.tail as u64, snap.pos as u64);
            }
            let p = l.txs.back_mut().expect("just placed");
            p.tid = p.tid.max(e.tid);
            mapped.insert(e.block, Mapped { at: e.at, tid: e.tid, hash: e.hash });
        }
        let snap = RefCell::new(Snap { home: map.home, entries: kept.to_vec() });
        let durable = if kept.is_empty() { Tid::ZERO } else { table.durable };
        Manylogs {
            geo,
            logs,
            mounted: table,
            mounted_map: map,
            durable_seq,
            planned_seq,
            durable,
            position: None,
            last_log: 0,
            near_head: NearHead::default(),
            swapping: None,
            map: mapped,
            pending: VecDeque::new(),
            snap,
            planned_snap: RefCell::new(None),
            recovered_to: RefCell::new(None),
            swept: Tid::ZERO,
            faults: Faults::default(),
        }
    }

    /// Records what a sweep after a fallback found ([`sweep_after_fallback`]).
    pub fn with_swept(mut self, swept: Option<Tid>) -> Self {
        self.swept = swept.unwrap_or(Tid::ZERO);
        self
    }

    /// The lowest tid the journal may continue with, from the table read at mount: after a
    /// clean unmount its floor; after a recovery that kept blocks logged, the tid after its
    /// newest durable one (the kept blocks' transactions are older).
    pub fn floor(&self) -> Tid {
        if self.mounted.flags & flags::RECOVERED != 0 {
            self.mounted.durable + 1
        } else {
            self.mounted.floor
        }
    }

    fn used(&self, i: usize) -> u64 {
        let l = &self.logs[i];
        if l.head >= l.tail {
            l.head - l.tail
        } else {
            self.geo.log_blocks - (l.tail - l.head)
        }
    }

    /// Blocks log `i` can take now (none while a swap moves its contents or fills it).
    fn free_in(&self, i: usize) -> u64 {
        if self.swapping.is_some_and(|s| s.from == i || s.to == i) {
            return 0;
        }
        self.geo.log_blocks - 1 - self.used(i)
    }

}

/// `dirty_background_bytes=` on a manylogs file system unless given.
pub const DIRTY_BACKGROUND: u64 = 1 << 20;

/// The logged-write-size of selective content on a manylogs file system unless
/// `logged_write_size=` says otherwise.
pub const LOGGED_WRITE_SIZE: usize = 32 << 10;

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

    /// Small write calls are logged near the head and large ones go in place first (the
    /// paper's LoggedWriteSize, section IV-C; [`LOGGED_WRITE_SIZE`]), and in-place data is
    /// written in the background ([`DIRTY_BACKGROUND`]), so that a small sync beside a large
    /// writer waits for little (the paper's Fig. 2b, docs/SIMULATION.md).
    fn defaults(&self) -> Defaults {
        Defaults { logged_write_size: Some(LOGGED_WRITE_SIZE), dirty_background_bytes: DIRTY_BACKGROUND, ..Defaults::default() }
    }

    fn place(&mut self, records: Records) -> (Stage, Extent) {
        if let Some(b) = records.near {
            self.position = Some(DevBlock::home(b).get());
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
        let mut crcs = Vec::with_capacity(records.blocks.len());
        for (data, kind) in records.blocks {
            let w = IoWrite { dev: DevId::Fs, block: region.device_block(LogPos::new(pos)), data, kind };
            let len = w.written_len();
            crcs.push((len as u32, crc32c::crc32c(&w.data[..len])));
            writes.push(w);
            pos = region.next(LogPos::new(pos)).get();
        }
        // The map changes once the commit is durable (`on_durable`).
        let mut changes: Vec<(HomeBlock, Option<Mapped>)> = records.revoked.iter().map(|&b| (b, None)).collect();
        changes.extend(records.logged.into_iter().map(|l| (l.block, l.whole.map(|w| Mapped { at: writes[w.index].block.get(), tid: records.tid, hash: w.hash }))));
        self.pending.push_back((records.tid, changes));
        if pos < start || pos == 0 {
            self.near_head.wraps += 1;
        }
        log.head = pos;
        log.swapped_in = false;
        log.txs.push_back(Placed { tid: records.tid, first: records.tid, recovered: false, start, end: pos, crcs });
        self.near_head.switches += (i != self.last_log) as u64;
        self.last_log = i;
        (Stage { writes, flush: vec![DevId::Fs], remote: Vec::new(), nvm: Vec::new() }, Extent { start: encode(i, start), end: encode(i, pos), blocks: n })
    }

    fn on_durable(&mut self, tid: Tid) {
        self.durable = self.durable.max(tid);
        while self.pending.front().is_some_and(|(t, _)| *t <= tid) {
            let (_, changes) = self.pending.pop_front().expect("checked");
            for (b, m) in changes {
                match m {
                    Some(_) if self.faults.manylogs_keep_first_position && self.map.contains_key(&b) => {}
                    Some(m) => {
                        self.map.insert(b, m);
                    }
                    None => {
                        self.map.remove(&b);
                    }
                }
            }
        }
    }

    fn release_stage(&self, kept: Kept) -> Stage {
        Snapshots::snapshot_stage(self, kept, &[])
    }

    fn released(&mut self, kept: Kept) {
        self.durable_seq.set(self.planned_seq.get());
        self.snapshot_durable();
        let floor = kept.oldest.map_or(kept.next_tid, |(t, _)| t);
        for l in &mut self.logs {
            while l.txs.front().is_some_and(|t| t.tid < floor) {
                l.txs.pop_front();
            }
            l.tail = l.txs.front().map_or(l.head, |t| t.start);
        }
        // Their blocks are home (the checkpoint wrote or copied each one there).
        self.map.retain(|_, m| m.tid >= floor);
    }

    fn mount_stage(&self, kept: Kept) -> Stage {
        self.executed_at_once(self.table_after(kept, None, false))
    }

    fn clean_stage(&self, next_tid: Tid) -> Stage {
        self.empty_table_stage(next_tid, true)
    }

    /// Every log from its recorded tail, unless the table was written clean. The logs hold
    /// tids below the floor plus every log's length: each transaction takes a block, and no
    /// space holding a transaction at or above the floor is reused before a newer table
    /// (whose floor is higher) is durable.
    fn recovery(&self) -> Recovery {
        if self.mounted.needs_no_recovery() {
            return Recovery::Logs(Vec::new());
        }
        // Everything up to the map's home tid is home or mapped: each log is read from its
        // snapshot position, the first transaction above it (its tail for a table without a
        // map). Every transaction above the home tid holds log space that no durable table
        // released, one block at least: the logs hold none at or beyond this bound. (Blocks
        // kept logged hold the floor back, so the bound counts from home, not the floor.)
        let home = self.mounted_map.home;
        let bound = home.max(self.mounted.floor - 1) + self.geo.log_blocks * self.logs.len() as u64 + 2;
        Recovery::Logs(
            self.mounted
            .logs
            .iter()
            .zip(&self.mounted_map.snaps)
            .enumerate()
            .map(|(i, (e, s))| RecoveryStart {
                region: self.geo.region(i),
                pos: LogPos::new(s.pos as u64),
                // The tid there, or for an empty log the one below which its contents are
                // stale (a swap's leftovers); the first above home otherwise.
                tid: s.tid.max(home + 1),
                multiwrite: true,
                tid_bound: bound,
                interleaved: Some(super::Interleaved { end: LogPos::new(e.end as u64), tail_tid: s.tid, floor: home + 1, past_end_min: self.mounted.durable + 1, swept: self.swept }),
                pipeline: 0,
            })
            .collect(),
        )
    }

    fn recovered_stage(&self, next_tid: Tid) -> Stage {
        Snapshots::recovered_keeping(self, next_tid, &[])
    }

    /// The placement over the table recovery wrote, as [`Manylogs::new`] reads it: every log
    /// empty but the parts that keep blocks logged.
    fn recovered(&mut self, _next_tid: Tid, _kept: &[LoggedBlock]) {
        let (table, map) = self.recovered_to.take().expect("recovered after its recovered stage");
        let mut next = Manylogs::new(self.geo.clone(), ReadTable { table, map, other_invalid: None });
        next.faults = self.faults.clone();
        *self = next;
    }

    fn parking(&self) -> Option<&dyn Parking> {
        Some(self)
    }

    fn parking_mut(&mut self) -> Option<&mut dyn Parking> {
        Some(self)
    }

    /// Only with room for a map in the journal region (a version 3 table).
    fn snapshots(&self) -> Option<&dyn Snapshots> {
        self.geo.map_capacity().is_some().then_some(self as &dyn Snapshots)
    }

    fn swaps(&mut self) -> Option<&mut dyn Swaps> {
        Some(self)
    }

    fn head(&mut self) -> Option<&mut dyn HeadAware> {
        Some(self)
    }

}

impl Parking for Manylogs {
    /// A block whose newest committed version is in a log, unescaped: the cache may drop it.
    fn frozen_copy(&self, block: HomeBlock) -> Option<u64> {
        self.map.get(&block).map(|m| m.at)
    }

    fn frozen_hash(&self, block: HomeBlock) -> Option<u32> {
        self.map.get(&block).map(|m| m.hash)
    }

    fn parks_on_device(&self) -> bool {
        true
    }

    fn went_home(&mut self, block: HomeBlock, tid: Tid) {
        if self.map.get(&block).is_some_and(|m| m.tid == tid) {
            self.map.remove(&block);
        }
    }
}

impl Snapshots for Manylogs {
    fn keeps_logged(&self, block: HomeBlock, tid: Tid) -> bool {
        self.faults.manylogs_snapshot_unhomed || self.map.get(&block).is_some_and(|m| m.tid == tid)
    }

    fn map_room(&self) -> usize {
        self.geo.map_capacity().unwrap_or(0)
    }

    fn home(&self) -> Tid {
        self.snap.borrow().home
    }

    fn recovery_map(&self) -> Vec<LoggedBlock> {
        if self.mounted.needs_no_recovery() {
            return Vec::new();
        }
        self.mounted_map.entries.iter().map(|e| LoggedBlock { block: e.block, at: e.at, tid: e.tid, hash: e.hash }).collect()
    }

    fn snapshot_stage(&self, kept: Kept, keep: &[HomeBlock]) -> Stage {
        if self.faults.manylogs_reuse_early {
            return Stage::default();
        }
        self.table_stage(&self.table_after(kept, Some(keep), false))
    }

    /// The table recovery ends with. Blocks the map named that no later transaction touched
    /// stay logged (`kept`): each log holding one keeps its recorded tail up to its snapshot
    /// position, the map names them, and everything else is home (the home tid is the last
    /// one). Every other log starts again at position 0. Nothing kept: the table is clean.
    fn recovered_keeping(&self, next_tid: Tid, kept: &[LoggedBlock]) -> Stage {
        let n = self.logs.len();
        let (mut logs, mut snaps) = (vec![LogEntry::default(); n], vec![SnapPos::default(); n]);
        for k in kept {
            let i = self.geo.group_of(k.at);
            let (e, s) = (self.mounted.logs[i], self.mounted_map.snaps[i]);
            logs[i] = LogEntry { tail: e.tail, end: s.pos, tail_tid: e.tail_tid };
            snaps[i] = SnapPos { pos: s.pos, tid: Tid::ZERO };
        }
        let floor = kept.iter().map(|e| e.tid).min().unwrap_or(next_tid);
        let seq = self.durable_seq.get() + 1;
        self.planned_seq.set(seq);
        let clean = kept.is_empty();
        let version = if self.geo.map_capacity().is_some() { 3 } else { 2 };
        assert!(version == 3 || clean, "blocks stay logged only with a map");
        let table = LogTable { version, flags: if clean { flags::CLEAN } else { flags::RECOVERED }, seq, floor, durable: next_tid - 1, log_blocks: self.geo.log_blocks as u32, fs_uuid: self.geo.fs_uuid, logs };
        let entries = kept.iter().map(|k| MapEntry { block: k.block, at: k.at, tid: k.tid, hash: k.hash }).collect();
        let map = LogMap { seq, home: next_tid - 1, durable: next_tid - 1, fs_uuid: self.geo.fs_uuid, snaps, entries };
        // A table without a map (version 2) is read back with the map its logs imply.
        let read_back = if version >= 3 { map.clone() } else { table::legacy_map(&table) };
        *self.recovered_to.borrow_mut() = Some((table.clone(), read_back));
        self.executed_at_once((table, map))
    }

    fn recovered_kept(&self) -> Vec<LoggedBlock> {
        if self.mounted.is_clean() {
            return Vec::new();
        }
        self.mounted_map.entries.iter().map(|e| LoggedBlock { block: e.block, at: e.at, tid: e.tid, hash: e.hash }).collect()
    }
}

impl Swaps for Manylogs {
    /// A swap moves log `from`'s transactions, block for block, to the start of the empty log
    /// `to` (the blocks are position-independent), in three steps, each flushed:
    ///
    /// 1. a table recording `to` empty with tail tid `min` (above every tid either holds):
    ///    from then on nothing recovery finds in `to` below `min` counts, so the copies in
    ///    flight are stale to it, torn or whole;
    /// 2. the copies, each read checked against the CRC of what was written;
    /// 3. a table recording `to` holding the transactions and `from` empty with tail tid
    ///    `min`, so its old contents are stale in turn.
    ///
    /// A crash before step 3 is durable leaves `from` as the table names it and `to` ignored;
    /// after it, the reverse. Neither log takes commits until [`Swaps::swapped`], so `from`
    /// is reused only after the table that moved its transactions is durable.
    fn swap_begin(&mut self, kept: Kept, idle: bool, max_tx: u64) -> Option<(Vec<IoStage>, u64)> {
        self.begin_swap(kept, idle, max_tx)
    }

    fn swapped(&mut self) {
        self.finish_swap()
    }
}

impl HeadAware for Manylogs {
    fn note_position(&mut self, at: DevBlock) {
        self.position = Some(at.get());
    }

    fn near_head(&self) -> NearHead {
        self.near_head
    }
}

#[cfg(test)]
mod tests;

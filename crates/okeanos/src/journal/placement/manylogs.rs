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
//! transaction boundary, and merges what it finds by tid (journal/recovery.rs, "Interleaved
//! logs"). The map names the logged blocks up to the home tid that are not home: recovery
//! keeps them logged, and the mount takes them over (docs/JOURNALING.md, "The map on disk").
//!
//! Space: a transaction must fit one log (the transaction limits are fractions of one log's
//! length, [`Placement::capacity`]); free space is the largest free run of any log, so
//! admission never accepts a transaction no log can take.

use super::{Extent, Kept, LogRegion, Placement, Records, RecoveryStart, RegionKind, Stage};
use crate::format::logtable::{flags, LogEntry, LogMap, LogTable, MapEntry, SnapPos};
use crate::journal::checkpoint::COPY_SLICE_BLOCKS;
use crate::journal::plan::{BlockKind, CopyCheck, DevId, IoCopy, IoStage, IoWrite};
use crate::journal::transaction::Tid;
use std::cell::{Cell, RefCell};
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
    /// Device block of copy A of the map (after both table copies); copy B follows it. Each
    /// is `map_blocks` long: the rest of the journal region, halved (0: no room for a map;
    /// tables are then written as version 2).
    pub map_at: u64,
    pub map_blocks: u64,
    /// Blocks of the file system (a mapped block lies below).
    pub fs_blocks: u64,
}

impl Geometry {
    pub fn of(sb: &crate::format::Superblock) -> Geometry {
        let crate::format::JournalLocation::Internal { start, blocks } = sb.journal else {
            panic!("a manylogs superblock validates with an internal journal region");
        };
        let table_blocks = LogTable::blocks_per_copy(sb.group_count as u64, sb.block_size as usize);
        Geometry {
            block_size: sb.block_size as usize,
            fs_uuid: sb.uuid,
            first_group_block: sb.first_group_block,
            blocks_per_group: sb.blocks_per_group as u64,
            log_starts: (0..sb.group_count).map(|g| sb.log_area_start(g)).collect(),
            log_blocks: sb.log_area_blocks as u64,
            table_at: start + 1,
            table_blocks,
            map_at: start + 1 + 2 * table_blocks,
            map_blocks: blocks.saturating_sub(1 + 2 * table_blocks) / 2,
            fs_blocks: sb.block_count,
        }
    }

    /// Device block of the first block of map copy `slot`.
    pub fn map_copy_at(&self, slot: u64) -> u64 {
        self.map_at + slot * self.map_blocks
    }

    /// How many blocks a map copy can name (None: not even the logs' positions fit).
    pub fn map_capacity(&self) -> Option<usize> {
        LogMap::capacity(self.log_starts.len(), self.map_blocks, self.block_size)
    }

    /// Whether device block `at` lies inside log `i`.
    fn in_log(&self, i: usize, at: u64) -> bool {
        (self.log_starts[i]..self.log_starts[i] + self.log_blocks).contains(&at)
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

type ReadBlock<'a> = dyn FnMut(u64) -> Result<Vec<u8>, crate::device::DeviceError> + 'a;

/// The log table a mount starts from, and why the other copy was not used when it was
/// invalid (a torn write, or damage: see [`sweep_after_fallback`]).
pub struct ReadTable {
    pub table: LogTable,
    pub map: LogMap,
    pub other_invalid: Option<String>,
}

/// Reads both copies of the log table, each with its map (version 3); the valid pair with the
/// higher sequence wins. A table whose map is torn or stale is invalid as a whole: its write
/// was not durable, and the other copy is the newest durable one.
pub fn read_table(geo: &Geometry, read: &mut ReadBlock) -> Result<ReadTable, crate::fs::FsError> {
    let mut best: Option<(LogTable, LogMap)> = None;
    let mut errors = Vec::new();
    for slot in 0..2 {
        let mut bytes = Vec::with_capacity((geo.table_blocks as usize) * geo.block_size);
        for k in 0..geo.table_blocks {
            bytes.extend_from_slice(&read(geo.copy_at(slot) + k)?);
        }
        let name = ["A", "B"][slot as usize];
        let t = match LogTable::decode(&bytes, geo.fs_uuid, geo.log_starts.len() as u32, geo.log_blocks as u32) {
            Ok(t) => t,
            Err(e) => {
                errors.push(format!("copy {name}: {e}"));
                continue;
            }
        };
        let mut t = t;
        let m = if t.version >= 3 {
            match read_map(geo, slot, &t, read)? {
                Ok(m) => {
                    t.durable = m.durable;
                    m
                }
                Err(e) => {
                    errors.push(format!("copy {name}: its map: {e}"));
                    continue;
                }
            }
        } else {
            legacy_map(&t)
        };
        if best.as_ref().is_none_or(|b| t.seq > b.0.seq) {
            best = Some((t, m));
        }
    }
    let (table, map) = best.ok_or_else(|| crate::fs::FsError::Corrupt(format!("no valid manylogs log table ({})", errors.join("; "))))?;
    Ok(ReadTable { table, map, other_invalid: (!errors.is_empty()).then(|| errors.join("; ")) })
}

/// When one table copy was invalid: the newest transaction of this file system's life found
/// whole in any log that is newer than every transaction the valid copy knows, if any (None
/// when both copies are valid). Reads every log block about twice, only in this case.
///
/// A torn write of the newer copy never made it durable, and no log space that copy released
/// is reused before it is durable; so after a tear, recovery from the older copy finds every
/// whole transaction in the logs. One it does not find shows the newer copy was durable and
/// has been damaged since (docs/JOURNALING.md, "A damaged newest log table"):
/// - an older copy that needs no recovery (clean, or written by a recovery) was written
///   before the mount's first commit, so any newer transaction is such a sign: the mount is
///   refused ([`refuse_fallback`]);
/// - an older copy that needs recovery is recovered from, and a swept transaction that
///   recovery does not reach is damage ([`super::Interleaved::swept`]), reported as for any
///   damaged log.
pub fn sweep_after_fallback(geo: &Geometry, t: &ReadTable, mkfs_time_ns: i64, read: &mut ReadBlock) -> Result<Option<Tid>, crate::fs::FsError> {
    if t.other_invalid.is_none() {
        return Ok(None);
    }
    let regions: Vec<LogRegion> = (0..geo.log_starts.len()).map(|i| geo.region(i)).collect();
    Ok(crate::journal::recovery::sweep_committed(&regions, geo.fs_blocks, t.table.durable, mkfs_time_ns, read)?)
}

/// Why a mount from `t` must be refused, given the sweep's newest whole transaction: an older
/// copy that needs no recovery with transactions past it in the logs (see [`sweep_after_fallback`]).
pub fn refuse_fallback(t: &ReadTable, swept: Option<Tid>) -> Option<String> {
    let (why, n) = (t.other_invalid.as_ref()?, swept?);
    t.table.needs_no_recovery().then(|| {
        format!(
            "the newest copy of the manylogs log table is damaged ({why}); the other copy (sequence {}) knows transactions up to {}, but the logs hold committed transactions up to {n}: mounting from it would lose them",
            t.table.seq, t.table.durable
        )
    })
}

/// A table of version 1 or 2 has no map: nothing is home past its floor, and recovery reads
/// each log from its tail.
fn legacy_map(t: &LogTable) -> LogMap {
    LogMap { seq: t.seq, home: t.floor - 1, durable: t.durable, fs_uuid: t.fs_uuid, snaps: t.logs.iter().map(|e| SnapPos { pos: e.tail, tid: e.tail_tid }).collect(), entries: Vec::new() }
}

/// Reads and checks the map copy `slot` that completes table `t`. The outer error is a device
/// error; the inner one a map that does not belong (torn, stale, or damaged).
fn read_map(geo: &Geometry, slot: u64, t: &LogTable, read: &mut ReadBlock) -> Result<Result<LogMap, String>, crate::fs::FsError> {
    if geo.map_capacity().is_none() {
        return Ok(Err("the journal region has no room for a map".into()));
    }
    let at = geo.map_copy_at(slot);
    let mut bytes = read(at)?;
    let Some((logs, entries)) = LogMap::announced(&bytes) else {
        return Ok(Err("no map header".into()));
    };
    let need = LogMap::bytes(logs.min(geo.log_starts.len()), entries);
    if logs != geo.log_starts.len() || need > geo.map_blocks as usize * geo.block_size {
        return Ok(Err(format!("announces {logs} logs and {entries} blocks, more than its {} blocks hold", geo.map_blocks)));
    }
    for k in 1..need.div_ceil(geo.block_size) as u64 {
        bytes.extend_from_slice(&read(at + k)?);
    }
    let m = match LogMap::decode(&bytes, geo.fs_uuid, logs as u32, geo.log_blocks as u32) {
        Ok(m) => m,
        Err(e) => return Ok(Err(e.to_string())),
    };
    if m.seq != t.seq {
        return Ok(Err(format!("sequence {} is not the table's {}", m.seq, t.seq)));
    }
    if m.home + 1 < t.floor || m.durable + 1 < t.floor {
        return Ok(Err(format!("home tid {} or newest durable tid {} is below the table's floor {}", m.home, m.durable, t.floor)));
    }
    for e in &m.entries {
        let log = geo.group_of(e.at);
        if e.tid < t.floor || e.tid > m.home || e.block >= geo.fs_blocks || !geo.in_log(log, e.at) {
            return Ok(Err(format!("block {} at {} of transaction {} is not a live logged block of this file system", e.block, e.at, e.tid)));
        }
    }
    Ok(Ok(m))
}

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
    /// CRC32C of each of its blocks as written, in log order: a swap checks what it reads.
    crcs: Vec<u32>,
}

/// A swap in flight: `from`'s transactions are being copied to `to` (both logs take no
/// commits until it completes).
#[derive(Debug, Clone, Copy)]
struct Swap {
    from: usize,
    to: usize,
    /// `from`'s tail when planned: position `p` of it goes to `(p - tail) mod length` of `to`.
    tail: u64,
    blocks: u64,
    /// Above every tid in either log: the tail tid both are recorded with while empty.
    min_tid: Tid,
    /// The table that completes the swap.
    seq: u64,
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
    /// Log swaps completed, and the log blocks they moved.
    pub swaps: u64,
    pub swap_blocks: u64,
}

impl NearHead {
    /// The counts accumulated since `base` (an earlier reading of the same placement).
    pub fn since(&self, base: &NearHead) -> NearHead {
        NearHead {
            commits: self.commits - base.commits,
            near: self.near - base.near,
            same: self.same - base.same,
            wraps: self.wraps - base.wraps,
            switches: self.switches - base.switches,
            swaps: self.swaps - base.swaps,
            swap_blocks: self.swap_blocks - base.swap_blocks,
        }
    }
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
    /// data ([`Placement::frozen_copy`]); a read then loads it from the log, and a checkpoint
    /// copies it from the log home. An entry goes when the block is logged again (a newer
    /// position, or none if as records), revoked, or its transaction's space is released.
    map: crate::det::HashMap<u64, Mapped>,
    /// Changes to `map` by transactions placed but not yet durable, oldest first: the map is
    /// what is durable, so that a snapshot of it never names a copy a crash may tear.
    pending: VecDeque<(Tid, Vec<(u64, Option<Mapped>)>)>,
    /// The snapshot of the newest durable table (its home tid and the blocks it keeps
    /// logged), and that of the table last planned, which becomes it once durable.
    snap: RefCell<Snap>,
    planned_snap: RefCell<Option<Snap>>,
    /// Canary for the crash tests: releases log space without writing the table that records
    /// the release, so space is reused while the durable table still names it live. Recovery
    /// must then miss committed transactions.
    pub fault_reuse_before_table: bool,
    /// The newest whole transaction of this life a sweep found in the logs when the newer
    /// table copy was invalid ([`sweep_after_fallback`]); 0 without a sweep. Recovery checks it.
    swept: Tid,
    /// Canary: a block logged whole again keeps the position of its first logged copy, so a
    /// parked block loads, and a checkpoint copies home, an older version.
    pub fault_keep_first_position: bool,
    /// Canary: a swap copies into its target log without first recording the target reserved,
    /// so a crash during the copy leaves copies that the durable table lets recovery take for
    /// live transactions (torn ones among them).
    pub fault_swap_unreserved: bool,
    /// Canary: a snapshot keeps any data block logged, mapped or not (records, escaped
    /// copies), and names only the mapped ones: recovery, reading only past the snapshot,
    /// must then miss changes.
    pub fault_snapshot_unhomed: bool,
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
    /// that holds them ([`Placement::recovered_keeping`]): that part stays live, as one
    /// [`Placed`] released with the newest transaction of a block kept there, the map names
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
        let durable = if kept.is_empty() { 0 } else { table.durable };
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
            fault_reuse_before_table: false,
            swept: 0,
            fault_keep_first_position: false,
            fault_swap_unreserved: false,
            fault_snapshot_unhomed: false,
        }
    }

    /// Records what a sweep after a fallback found ([`sweep_after_fallback`]).
    pub fn with_swept(mut self, swept: Option<Tid>) -> Self {
        self.swept = swept.unwrap_or(0);
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
    /// durable transactions. With `keep` (the core's [`Kept::home`] and the blocks it leaves
    /// logged), a new snapshot: each log's snapshot position after its newest transaction at
    /// or below the home tid, and the map of the kept blocks. Without, the last durable
    /// snapshot's, less what the new floor released.
    fn table_after(&self, kept: Kept, keep: Option<&[u64]>, clean: bool) -> (LogTable, LogMap) {
        let floor = kept.oldest.map_or(kept.next_tid, |(t, _)| t);
        let durable = self.durable.max(floor - 1);
        let new = kept.home.zip(keep).filter(|(h, _)| *h > self.snap.borrow().home);
        let mut snap = match new {
            Some((home, keep)) => {
                assert!(home <= durable, "a snapshot's home tid ({home}) is durable ({durable})");
                let entries = keep
                    .iter()
                    .filter_map(|&b| {
                        let m = self.map.get(&b);
                        assert!(m.is_some() || self.fault_snapshot_unhomed, "a block kept logged is mapped");
                        m.map(|m| MapEntry { block: b, at: m.at, tid: m.tid, hash: m.hash })
                    })
                    .collect();
                Snap { home, entries }
            }
            None => self.snap.borrow().clone(),
        };
        snap.home = snap.home.max(floor - 1);
        snap.entries.retain(|e| e.tid >= floor);
        if self.geo.map_capacity().is_none_or(|c| c < snap.entries.len()) {
            // No room for a map: a version-2 table, read from the tails.
            assert!(snap.entries.is_empty(), "the core keeps no more blocks logged than a map holds");
            snap.home = floor - 1;
        }
        let home = snap.home;
        let mut snaps = Vec::with_capacity(self.logs.len());
        let logs = self
            .logs
            .iter()
            .map(|l| {
                let live: Vec<&Placed> = l.txs.iter().filter(|t| t.tid >= floor).collect();
                // An empty log names the tid below which what it holds is stale, if a swap
                // left copies at or above the floor there.
                let (tail, tail_tid) = live.first().map_or((l.head, if l.min_tid > floor { l.min_tid } else { 0 }), |t| (t.start, t.first));
                let end = live.iter().filter(|t| t.tid <= self.durable).last().map_or(tail, |t| t.end);
                // Recovery reads from the first transaction above the home tid.
                let snap = match live.iter().find(|t| t.tid > home) {
                    Some(t) => SnapPos { pos: t.start as u32, tid: if t.tid <= self.durable { t.tid } else { 0 } },
                    None if live.is_empty() => SnapPos { pos: tail as u32, tid: tail_tid },
                    None => SnapPos { pos: l.head as u32, tid: 0 },
                };
                snaps.push(snap);
                LogEntry { tail: tail as u32, end: end as u32, tail_tid }
            })
            .collect();
        let seq = self.durable_seq.get() + 1;
        self.planned_seq.set(seq);
        let version = if self.geo.map_capacity().is_some() { 3 } else { 2 };
        let table = LogTable { version, flags: if clean { flags::CLEAN } else { 0 }, seq, floor, durable, log_blocks: self.geo.log_blocks as u32, fs_uuid: self.geo.fs_uuid, logs };
        let map = LogMap { seq, home, durable, fs_uuid: self.geo.fs_uuid, snaps, entries: snap.entries.clone() };
        *self.planned_snap.borrow_mut() = Some(snap);
        (table, map)
    }

    /// The planned snapshot is durable now.
    fn snapshot_durable(&self) {
        if let Some(s) = self.planned_snap.borrow_mut().take() {
            *self.snap.borrow_mut() = s;
        }
    }

    /// Over 80% full: a log the paper swaps (section III-G).
    fn crowded(&self, i: usize) -> bool {
        self.used(i) * 5 > self.geo.log_blocks * 4
    }

    /// The log to move and the log to move it to, if a swap is due: with `idle`, the fullest
    /// crowded log that commits filled (not one a swap filled), else the head's if crowded;
    /// its transactions all durable (a commit in
    /// flight is not copied). The target is an empty log, the one farthest from the head
    /// (the paper's cold log). The logs not taking part must keep room for the largest
    /// transaction and a quarter of a log, so commits go on beside the swap.
    fn swap_choice(&self, idle: bool, max_tx: u64) -> Option<(usize, usize)> {
        if self.swapping.is_some() {
            return None;
        }
        let movable = |i: usize| self.crowded(i) && self.logs[i].txs.back().is_some_and(|t| t.tid <= self.durable) && self.logs[i].txs.iter().all(|t| !t.recovered);
        let from = if idle {
            (0..self.logs.len()).filter(|&i| movable(i) && !self.logs[i].swapped_in).max_by_key(|&i| (self.used(i), std::cmp::Reverse(i)))?
        } else {
            Some(self.head_log()).filter(|&h| movable(h))?
        };
        let b = self.head_block();
        let to = (0..self.logs.len())
            .filter(|&i| i != from && self.logs[i].txs.is_empty())
            .max_by_key(|&i| (self.geo.log_starts[i].abs_diff(b), std::cmp::Reverse(i)))?;
        let room = (0..self.logs.len()).filter(|&i| i != from && i != to).map(|i| self.free_in(i)).max().unwrap_or(0);
        (room >= self.geo.log_blocks / 4 + max_tx).then_some((from, to))
    }

    /// The write of `table` into the copy its sequence names, with its map (version 3) into
    /// the map copy of the same parity, then the flush: a torn write of either leaves a copy
    /// pair that does not validate, and the other pair is the newest durable one.
    fn table_stage(&self, (table, map): &(LogTable, LogMap)) -> Stage {
        let bs = self.geo.block_size;
        let slot = table.seq % 2;
        let mut bytes = vec![0u8; self.geo.table_blocks as usize * bs];
        table.encode(&mut bytes);
        let mut writes: Vec<IoWrite> = Vec::new();
        let mut put = |at: u64, bytes: &[u8]| {
            for (k, b) in bytes.chunks(bs).enumerate() {
                writes.push(IoWrite { dev: DevId::Fs, block: at + k as u64, data: Arc::new(b.to_vec()), kind: BlockKind::JournalSuper });
            }
        };
        put(self.geo.copy_at(slot), &bytes);
        if table.version >= 3 {
            let mut m = vec![0u8; map.blocks(bs) * bs];
            map.encode(&mut m);
            assert!(m.len() as u64 <= self.geo.map_blocks * bs as u64, "a map fits its copy");
            put(self.geo.map_copy_at(slot), &m);
        }
        Stage { writes, flush: vec![DevId::Fs], remote: Vec::new(), nvm: Vec::new() }
    }

    fn empty_table_stage(&self, next_tid: Tid, clean: bool) -> Stage {
        assert!(self.logs.iter().all(|l| l.txs.is_empty()), "only empty logs are recorded empty");
        self.executed_at_once(self.table_after(Kept { oldest: None, next_tid, home: None }, None, clean))
    }

    /// The stage of a table that is executed as soon as planned (mount, recovery, unmount):
    /// the next table goes to the other copy.
    fn executed_at_once(&self, table: (LogTable, LogMap)) -> Stage {
        let stage = self.table_stage(&table);
        self.durable_seq.set(table.0.seq);
        self.snapshot_durable();
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
        let mut crcs = Vec::with_capacity(records.blocks.len());
        for (data, kind) in records.blocks {
            crcs.push(crc32c::crc32c(&data));
            writes.push(IoWrite { dev: DevId::Fs, block: region.device_block(pos), data, kind });
            pos = region.next(pos);
        }
        // The map changes once the commit is durable (`on_durable`).
        let mut changes: Vec<(u64, Option<Mapped>)> = records.revoked.iter().map(|&b| (b, None)).collect();
        changes.extend(records.logged.into_iter().map(|(b, whole)| (b, whole.map(|(k, hash)| Mapped { at: writes[k].block, tid: records.tid, hash }))));
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
                    Some(_) if self.fault_keep_first_position && self.map.contains_key(&b) => {}
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

    fn snapshots(&self) -> bool {
        self.geo.map_capacity().is_some()
    }

    fn keeps_logged(&self, block: u64, tid: Tid) -> bool {
        self.fault_snapshot_unhomed || self.map.get(&block).is_some_and(|m| m.tid == tid)
    }

    fn map_room(&self) -> usize {
        self.geo.map_capacity().unwrap_or(0)
    }

    fn home(&self) -> Tid {
        self.snap.borrow().home
    }

    fn went_home(&mut self, block: u64, tid: Tid) {
        if self.map.get(&block).is_some_and(|m| m.tid == tid) {
            self.map.remove(&block);
        }
    }

    fn recovery_map(&self) -> Vec<(u64, u64, Tid, u32)> {
        if self.mounted.needs_no_recovery() {
            return Vec::new();
        }
        self.mounted_map.entries.iter().map(|e| (e.block, e.at, e.tid, e.hash)).collect()
    }

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
    /// after it, the reverse. Neither log takes commits until [`Placement::swapped`], so `from`
    /// is reused only after the table that moved its transactions is durable.
    fn swap_begin(&mut self, kept: Kept, idle: bool, max_tx: u64) -> Option<(Vec<IoStage>, u64)> {
        let (from, to) = self.swap_choice(idle, max_tx)?;
        let l = &self.logs[from];
        let blocks = self.used(from);
        let min_tid = kept.next_tid;
        let first = l.txs.front().expect("a crowded log holds transactions").tid;
        assert!(l.txs.iter().all(|t| t.tid >= kept.oldest.map_or(min_tid, |o| o.0) && t.tid < min_tid), "a log holds live tids below the next");
        // Both tables carry the last durable snapshot (a swap writes nothing home); the second
        // one with the moved log's positions shifted to the target.
        let mut reserve = self.table_after(Kept { home: None, ..kept }, None, false);
        reserve.0.logs[to] = LogEntry { tail: 0, end: 0, tail_tid: min_tid };
        reserve.1.snaps[to] = SnapPos { pos: 0, tid: min_tid };
        let mut moved = reserve.clone();
        if !self.fault_swap_unreserved {
            moved.0.seq += 1;
            moved.1.seq += 1;
        }
        let lb = self.geo.log_blocks;
        let shift = |p: u64| (p + lb - l.tail) % lb;
        moved.0.logs[to] = LogEntry { tail: 0, end: blocks as u32, tail_tid: first };
        let s = reserve.1.snaps[from];
        moved.1.snaps[to] = SnapPos { pos: shift(s.pos as u64) as u32, tid: s.tid };
        moved.0.logs[from] = LogEntry { tail: l.head as u32, end: l.head as u32, tail_tid: min_tid };
        moved.1.snaps[from] = SnapPos { pos: l.head as u32, tid: min_tid };
        let (fb, tb) = (self.geo.log_starts[from], self.geo.log_starts[to]);
        for e in &mut moved.1.entries {
            if self.geo.in_log(from, e.at) {
                e.at = tb + shift(e.at - fb);
            }
        }

        let (src, dst) = (self.geo.region(from), self.geo.region(to));
        let mut copies = Vec::with_capacity(blocks as usize);
        let mut pos = l.tail;
        for t in &l.txs {
            assert_eq!(t.start, pos, "a log's transactions are contiguous");
            for &crc in &t.crcs {
                copies.push(IoCopy { from: (DevId::Fs, src.device_block(pos)), to: (DevId::Fs, dst.device_block(copies.len() as u64)), check: CopyCheck::Crc(crc), kind: BlockKind::LogSwap });
                pos = src.next(pos);
            }
        }
        assert_eq!((pos, copies.len() as u64), (l.head, blocks), "the copies cover the log from tail to head");

        let mut stages = Vec::new();
        if !self.fault_swap_unreserved {
            let Stage { writes, flush, .. } = self.table_stage(&reserve);
            stages.push(IoStage { writes, flush, ..Default::default() });
        }
        for chunk in copies.chunks(COPY_SLICE_BLOCKS) {
            stages.push(IoStage { copies: chunk.to_vec(), ..Default::default() });
        }
        stages.last_mut().expect("a swap copies something").flush = vec![DevId::Fs];
        let Stage { writes, flush, .. } = self.table_stage(&moved);
        stages.push(IoStage { writes, flush, ..Default::default() });
        self.planned_seq.set(moved.0.seq);
        self.planned_snap.borrow_mut().take();
        self.swapping = Some(Swap { from, to, tail: l.tail, blocks, min_tid, seq: moved.0.seq });
        Some((stages, blocks))
    }

    fn swapped(&mut self) {
        let s = self.swapping.take().expect("a swap in flight");
        self.durable_seq.set(s.seq);
        let lb = self.geo.log_blocks;
        let shift = |p: u64| (p + lb - s.tail) % lb;
        let moved: VecDeque<Placed> = std::mem::take(&mut self.logs[s.from].txs)
            .into_iter()
            .map(|t| Placed { start: shift(t.start), end: shift(t.end), ..t })
            .collect();
        let from = &mut self.logs[s.from];
        from.tail = from.head;
        from.min_tid = from.min_tid.max(s.min_tid);
        let to = &mut self.logs[s.to];
        assert!(to.txs.is_empty(), "a swap's target took no commits");
        to.txs = moved;
        to.tail = 0;
        to.head = s.blocks;
        to.min_tid = to.min_tid.max(s.min_tid);
        to.swapped_in = true;
        // Parked blocks are read from their new positions, and the snapshot names them there.
        let (fb, tb) = (self.geo.log_starts[s.from], self.geo.log_starts[s.to]);
        for m in self.map.values_mut() {
            if (fb..fb + lb).contains(&m.at) {
                let k = shift(m.at - fb);
                assert!(k < s.blocks, "a mapped block lies in its log's live part");
                m.at = tb + k;
            }
        }
        assert!(self.pending.iter().flat_map(|(_, c)| c).all(|(_, m)| m.is_none_or(|m| !(fb..fb + lb).contains(&m.at))), "a swapped log has no commit in flight");
        for e in &mut self.snap.get_mut().entries {
            if (fb..fb + lb).contains(&e.at) {
                e.at = tb + shift(e.at - fb);
            }
        }
        self.near_head.swaps += 1;
        self.near_head.swap_blocks += s.blocks;
    }

    fn release_stage(&self, kept: Kept) -> Stage {
        self.snapshot_stage(kept, &[])
    }

    fn snapshot_stage(&self, kept: Kept, keep: &[u64]) -> Stage {
        if self.fault_reuse_before_table {
            return Stage::default();
        }
        self.table_stage(&self.table_after(kept, Some(keep), false))
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
        self.executed_at_once(self.table_after(kept, None, false))
    }

    fn clean_stage(&self, next_tid: Tid) -> Stage {
        self.empty_table_stage(next_tid, true)
    }

    /// Every log from its recorded tail, unless the table was written clean. The logs hold
    /// tids below the floor plus every log's length: each transaction takes a block, and no
    /// space holding a transaction at or above the floor is reused before a newer table
    /// (whose floor is higher) is durable.
    fn recovery(&self) -> Vec<RecoveryStart> {
        if self.mounted.needs_no_recovery() {
            return Vec::new();
        }
        // Everything up to the map's home tid is home or mapped: each log is read from its
        // snapshot position, the first transaction above it (its tail for a table without a
        // map). Every transaction above the home tid holds log space that no durable table
        // released, one block at least: the logs hold none at or beyond this bound. (Blocks
        // kept logged hold the floor back, so the bound counts from home, not the floor.)
        let home = self.mounted_map.home;
        let bound = home.max(self.mounted.floor - 1) + self.geo.log_blocks * self.logs.len() as u64 + 2;
        self.mounted
            .logs
            .iter()
            .zip(&self.mounted_map.snaps)
            .enumerate()
            .map(|(i, (e, s))| RecoveryStart {
                region: self.geo.region(i),
                pos: s.pos as u64,
                // The tid there, or for an empty log the one below which its contents are
                // stale (a swap's leftovers); the first above home otherwise.
                tid: s.tid.max(home + 1),
                multiwrite: true,
                tid_bound: bound,
                interleaved: Some(super::Interleaved { end: e.end as u64, tail_tid: s.tid, floor: home + 1, past_end_min: self.mounted.durable + 1, swept: self.swept }),
            })
            .collect()
    }

    fn recovered_stage(&self, next_tid: Tid) -> Stage {
        self.recovered_keeping(next_tid, &[])
    }

    /// The table recovery ends with. Blocks the map named that no later transaction touched
    /// stay logged (`kept`): each log holding one keeps its recorded tail up to its snapshot
    /// position, the map names them, and everything else is home (the home tid is the last
    /// one). Every other log starts again at position 0. Nothing kept: the table is clean.
    fn recovered_keeping(&self, next_tid: Tid, kept: &[(u64, u64, Tid, u32)]) -> Stage {
        let n = self.logs.len();
        let (mut logs, mut snaps) = (vec![LogEntry::default(); n], vec![SnapPos::default(); n]);
        for &(_, at, _, _) in kept {
            let i = self.geo.group_of(at);
            let (e, s) = (self.mounted.logs[i], self.mounted_map.snaps[i]);
            logs[i] = LogEntry { tail: e.tail, end: s.pos, tail_tid: e.tail_tid };
            snaps[i] = SnapPos { pos: s.pos, tid: 0 };
        }
        let floor = kept.iter().map(|e| e.2).min().unwrap_or(next_tid);
        let seq = self.durable_seq.get() + 1;
        self.planned_seq.set(seq);
        let clean = kept.is_empty();
        let version = if self.geo.map_capacity().is_some() { 3 } else { 2 };
        assert!(version == 3 || clean, "blocks stay logged only with a map");
        let table = LogTable { version, flags: if clean { flags::CLEAN } else { flags::RECOVERED }, seq, floor, durable: next_tid - 1, log_blocks: self.geo.log_blocks as u32, fs_uuid: self.geo.fs_uuid, logs };
        let entries = kept.iter().map(|&(block, at, tid, hash)| MapEntry { block, at, tid, hash }).collect();
        let map = LogMap { seq, home: next_tid - 1, durable: next_tid - 1, fs_uuid: self.geo.fs_uuid, snaps, entries };
        self.executed_at_once((table, map))
    }

    fn recovered_kept(&self) -> Vec<(u64, u64, Tid)> {
        if self.mounted.is_clean() {
            return Vec::new();
        }
        self.mounted_map.entries.iter().map(|e| (e.block, e.at, e.tid)).collect()
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
            map_at: 7,
            map_blocks: 40,
            fs_blocks: 100 + logs as u64 * 1000,
        }
    }

    fn empty(logs: usize) -> ReadTable {
        let t = LogTable { version: 2, flags: flags::CLEAN, seq: 0, floor: 1, durable: 0, log_blocks: 256, fs_uuid: [1; 16], logs: vec![LogEntry::default(); logs] };
        let map = legacy_map(&t);
        ReadTable { table: t, map, other_invalid: None }
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
        assert_eq!(m.near_head, NearHead { commits: 3, near: 3, same: 3, wraps: 0, switches: 2, swaps: 0, swap_blocks: 0 });
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
        let kept = Kept { oldest: Some((2, Extent { start: 10, end: 20, blocks: 10 })), next_tid: 4, home: None };
        let (t, _) = m.table_after(kept, None, false);
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
        let mount = m.mount_stage(Kept { oldest: None, next_tid: 1, home: None });
        m.place(records(1, 5, None));
        m.on_durable(1);
        let kept = Kept { oldest: None, next_tid: 2, home: None };
        let first = m.release_stage(kept);
        assert_ne!(first.writes[0].block, mount.writes[0].block, "the other copy than the mount's");
        // Dropped (a clash) and planned again: still the other copy, not the mount's.
        let again = m.release_stage(kept);
        assert_eq!(again.writes[0].block, first.writes[0].block);
        m.released(kept);
        m.place(records(2, 5, None));
        m.on_durable(2);
        let next = m.release_stage(Kept { oldest: None, next_tid: 3, home: None });
        assert_eq!(next.writes[0].block, mount.writes[0].block, "after the release is durable, the copy it did not use");
    }

    /// A crowded head log moves to the empty log farthest from the head: the reserving table,
    /// the copies (checked against the CRCs of what was written), the table that moves; the
    /// moved log is free afterwards, and its old contents are stale to recovery.
    #[test]
    fn a_crowded_head_log_swaps_into_the_farthest_empty_log() {
        let kept = Kept { oldest: Some((1, Extent { start: 0, end: 10, blocks: 10 })), next_tid: 65, home: None };
        let mut m2 = Manylogs::new(geo(8), empty(8));
        m2.mount_stage(Kept { oldest: None, next_tid: 1, home: None });
        // Logs 0 and 2 take 21 transactions of 10 blocks each (210 of 256: over 80%), then
        // log 1 between them, and one more in flight.
        for (group, tids) in [(0, 1..=21), (2, 22..=42), (1, 43..=63)] {
            m2.note_position(100 + group * 1000 + 500);
            for tid in tids {
                let (s, _) = m2.place(records(tid, 10, None));
                assert_eq!(log_of(&s), group);
                m2.on_durable(tid);
                if group == 1 && tid == 50 {
                    assert!(m2.swap_begin(Kept { next_tid: 51, ..kept }, false, 64).is_none(), "not crowded yet");
                }
            }
        }
        // Not while a commit in the log is in flight.
        m2.place(records(64, 10, None));
        assert!(m2.swap_begin(kept, false, 64).is_none(), "a commit in flight is not copied");
        m2.on_durable(64);
        let (stages, blocks) = m2.swap_begin(kept, false, 64).expect("a swap is due: the head's log and its neighbours' are crowded");
        assert_eq!(blocks, 220);
        // Reserve, copies in slices, move: the first and last stages are tables, each flushed.
        assert!(stages.len() >= 3);
        assert!(stages.iter().all(|s| s.flush.is_empty() || s.flush == vec![DevId::Fs]));
        let table = |st: &IoStage| LogTable::decode(&st.writes.iter().flat_map(|w| w.data.iter().copied()).collect::<Vec<u8>>(), [1; 16], 8, 256).unwrap();
        let map = |st: &IoStage| LogMap::decode(&st.writes[1..].iter().flat_map(|w| w.data.iter().copied()).collect::<Vec<u8>>(), [1; 16], 8, 256).unwrap();
        let (reserve, moved) = (table(&stages[0]), table(stages.last().unwrap()));
        assert_eq!(reserve.logs[7], LogEntry { tail: 0, end: 0, tail_tid: 65 }, "the farthest empty log (7) reserved");
        assert_eq!(reserve.logs[1].tail_tid, 43, "the source still live in the reserving table");
        assert_eq!(moved.logs[7], LogEntry { tail: 0, end: 220, tail_tid: 43 });
        assert_eq!(moved.logs[1], LogEntry { tail: 220, end: 220, tail_tid: 65 });
        assert_eq!((map(&stages[0]).durable, map(stages.last().unwrap()).durable), (64, 64), "the tables record the newest durable tid");
        assert_eq!(map(stages.last().unwrap()).snaps[7], SnapPos { pos: 0, tid: 43 }, "the moved log is read from its start (nothing is home past the floor)");
        assert!(moved.seq == reserve.seq + 1 && stages[0].writes[0].block != stages.last().unwrap().writes[0].block, "the tables go to both copies");
        let copies: Vec<&IoCopy> = stages.iter().flat_map(|s| &s.copies).collect();
        assert_eq!(copies.len(), 220);
        assert_eq!((copies[0].from.1, copies[0].to.1), (100 + 1000 + 10, 100 + 7 * 1000 + 10));
        // Both logs take no commits meanwhile.
        assert_eq!((m2.free_in(1), m2.free_in(7)), (0, 0));
        let (s, _) = m2.place(records(65, 10, None));
        assert_ne!(log_of(&s), 1);
        m2.on_durable(65);
        m2.swapped();
        assert_eq!(m2.free_in(1), 255, "the moved log is empty");
        assert_eq!(m2.free_in(7), 255 - 220);
        assert_eq!(m2.near_head.swaps, 1);
        let (t, _) = m2.table_after(Kept { next_tid: 66, ..kept }, None, false);
        assert_eq!(t.logs[1], LogEntry { tail: 220, end: 220, tail_tid: 65 }, "the emptied log keeps its stale bound");
        assert_eq!((t.logs[7].tail, t.logs[7].tail_tid), (0, 43));
        // A quiet spell does not move the log a swap filled.
        let (idle, _) = m2.swap_begin(Kept { next_tid: 66, ..kept }, true, 64).expect("idle: a crowded log moves");
        let from = (idle.iter().flat_map(|s| &s.copies).next().expect("copies").from.1 - 100) / 1000;
        assert!(from == 0 || from == 2, "idle: a log commits filled moves, not the one the swap filled (log {from})");
    }

    #[test]
    fn table_copies_alternate() {
        let m = Manylogs::new(geo(4), empty(4));
        let a = m.mount_stage(Kept { oldest: None, next_tid: 1, home: None });
        let b = m.clean_stage(1);
        assert_ne!(a.writes[0].block, b.writes[0].block, "consecutive tables go to different copies");
    }
}

//! The log table on disk: reading it at mount (and the map of logged blocks it carries),
//! deciding whether a host that fell back may return, and building the table a stage writes
//! (two copies, A/B, the newer one winning at mount) with the map snapshot beside it.

use crate::ids::{DevBlock, HomeBlock};
use crate::ids::Tid;
use super::*;

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
/// The journal region of a new file system (mkfs), after the journal superblock: copy A of the
/// log table with every log empty and clean, and copy B zeroed (invalid), so that the first
/// mount reads A. A clean table needs no map (version 2).
pub fn formatted(groups: u32, log_blocks: u32, fs_uuid: [u8; 16], block_size: usize) -> Vec<u8> {
    let per = LogTable::blocks_per_copy(groups as u64, block_size) as usize;
    let mut t = vec![0u8; 2 * per * block_size];
    LogTable {
        version: 2,
        flags: crate::format::logtable::flags::CLEAN,
        seq: 0,
        floor: Tid::new(1),
        durable: Tid::ZERO,
        log_blocks,
        fs_uuid,
        logs: vec![Default::default(); groups as usize],
    }
    .encode(&mut t[..per * block_size]);
    t
}

pub fn read_table(geo: &Geometry, read: &mut ReadBlock) -> Result<ReadTable, crate::error::FsError> {
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
    let (table, map) = best.ok_or_else(|| crate::error::FsError::Corrupt(format!("no valid manylogs log table ({})", errors.join("; "))))?;
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
///   recovery does not reach is damage (`Interleaved::swept`), reported as for any
///   damaged log.
pub fn sweep_after_fallback(geo: &Geometry, t: &ReadTable, mkfs_time_ns: i64, read: &mut ReadBlock) -> Result<Option<Tid>, crate::error::FsError> {
    if t.other_invalid.is_none() {
        return Ok(None);
    }
    let regions: Vec<LogRegion> = (0..geo.log_starts.len()).map(|i| geo.region(i)).collect();
    Ok(crate::journal::recovery::sweep_committed(&regions, crate::journal::recovery::FsBounds { blocks: geo.fs_blocks, inodes: geo.inodes }, t.table.durable, mkfs_time_ns, read)?)
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
pub(super) fn legacy_map(t: &LogTable) -> LogMap {
    LogMap { seq: t.seq, home: t.floor - 1, durable: t.durable, fs_uuid: t.fs_uuid, snaps: t.logs.iter().map(|e| SnapPos { pos: e.tail, tid: e.tail_tid }).collect(), entries: Vec::new() }
}

/// Reads and checks the map copy `slot` that completes table `t`. The outer error is a device
/// error; the inner one a map that does not belong (torn, stale, or damaged).
fn read_map(geo: &Geometry, slot: u64, t: &LogTable, read: &mut ReadBlock) -> Result<Result<LogMap, String>, crate::error::FsError> {
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
        if e.tid < t.floor || e.tid > m.home || e.block.get() >= geo.fs_blocks || !geo.in_log(log, e.at) {
            return Ok(Err(format!("block {} at {} of transaction {} is not a live logged block of this file system", e.block, e.at, e.tid)));
        }
    }
    Ok(Ok(m))
}

impl Manylogs {
    /// The table after a checkpoint that keeps `kept`: each log's new tail, and its end of
    /// durable transactions. With `keep` (the core's [`Kept::home`] and the blocks it leaves
    /// logged), a new snapshot: each log's snapshot position after its newest transaction at
    /// or below the home tid, and the map of the kept blocks. Without, the last durable
    /// snapshot's, less what the new floor released.
    pub(super) fn table_after(&self, kept: Kept, keep: Option<&[HomeBlock]>, clean: bool) -> (LogTable, LogMap) {
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
                        assert!(m.is_some() || self.faults.manylogs_snapshot_unhomed, "a block kept logged is mapped");
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
                let (tail, tail_tid) = live.first().map_or((l.head, if l.min_tid > floor { l.min_tid } else { Tid::ZERO }), |t| (t.start, t.first));
                let end = live.iter().filter(|t| t.tid <= self.durable).last().map_or(tail, |t| t.end);
                // Recovery reads from the first transaction above the home tid.
                let snap = match live.iter().find(|t| t.tid > home) {
                    Some(t) => SnapPos { pos: t.start as u32, tid: if t.tid <= self.durable { t.tid } else { Tid::ZERO } },
                    None if live.is_empty() => SnapPos { pos: tail as u32, tid: tail_tid },
                    None => SnapPos { pos: l.head as u32, tid: Tid::ZERO },
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
    pub(super) fn snapshot_durable(&self) {
        if let Some(s) = self.planned_snap.borrow_mut().take() {
            *self.snap.borrow_mut() = s;
        }
    }

    /// The write of `table` into the copy its sequence names, with its map (version 3) into
    /// the map copy of the same parity, then the flush: a torn write of either leaves a copy
    /// pair that does not validate, and the other pair is the newest durable one.
    pub(super) fn table_stage(&self, (table, map): &(LogTable, LogMap)) -> Stage {
        let bs = self.geo.block_size;
        let slot = table.seq % 2;
        let mut bytes = vec![0u8; self.geo.table_blocks as usize * bs];
        table.encode(&mut bytes);
        let mut writes: Vec<IoWrite> = Vec::new();
        let mut put = |at: u64, bytes: &[u8]| {
            for (k, b) in bytes.chunks(bs).enumerate() {
                writes.push(IoWrite { dev: DevId::Fs, block: DevBlock::new(at + k as u64), data: Arc::new(b.to_vec()), kind: BlockKind::JournalSuper });
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

    pub(super) fn empty_table_stage(&self, next_tid: Tid, clean: bool) -> Stage {
        assert!(self.logs.iter().all(|l| l.txs.is_empty()), "only empty logs are recorded empty");
        self.executed_at_once(self.table_after(Kept { oldest: None, next_tid, home: None }, None, clean))
    }

    /// The stage of a table that is executed as soon as planned (mount, recovery, unmount):
    /// the next table goes to the other copy.
    pub(super) fn executed_at_once(&self, table: (LogTable, LogMap)) -> Stage {
        let stage = self.table_stage(&table);
        self.durable_seq.set(table.0.seq);
        self.snapshot_durable();
        stage
    }
}

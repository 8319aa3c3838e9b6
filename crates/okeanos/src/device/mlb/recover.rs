//! Opening an MLB disk: the newer valid map snapshot, then the records written since.
//!
//! Each log is scanned from the snapshot's head for records of the snapshot's epoch carrying
//! the next `log_seq` of that log, one after another, until a sector that is not such a record
//! (never written, torn, or left from an earlier pass). The records found are applied to the
//! map in their global `seq` order, so the newest version of a block wins whichever log holds
//! it. Then the epoch is bumped and a new snapshot written: records of the old epoch past the
//! new heads are writes this recovery judged lost, and a later recovery must not find them.
//!
//! A crash during recovery leaves the older snapshot in place (the new one goes to the other
//! copy), and recovery from it finds the same records again.

use super::{Counters, LogState, Loc, MlbDevice, State};
use crate::device::{Device, DeviceError, Poison, SECTOR_SIZE};
use crate::format::mlb::{MlbSuper, RecordHeader, Snapshot, MLB_BLOCK, RECORD_HEADER, SECTORS_PER_BLOCK};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, RwLock};

/// A whole record found in a log.
pub(crate) struct Found {
    /// Virtual sector of its header.
    pub at: u64,
    pub header: RecordHeader,
}

/// The record that follows position `pos` of log `g` (there, or at the start of the next pass
/// when the writer could not fit it before the log's end), if it is whole and `wanted` accepts
/// its header. Never reads outside the log.
pub(crate) fn next_record(
    inner: &dyn Device,
    sb: &MlbSuper,
    g: u32,
    pos: u64,
    tail: u64,
    wanted: impl Fn(&RecordHeader) -> bool,
) -> Result<Option<Found>, DeviceError> {
    let ls = sb.log_sectors();
    let mut candidates = vec![pos];
    if !pos.is_multiple_of(ls) {
        candidates.push(pos.div_ceil(ls) * ls);
    }
    let mut hdr = vec![0u8; RECORD_HEADER];
    for at in candidates {
        let phys = at % ls;
        inner.read_at(sb.log_start(g) + phys * SECTOR_SIZE, &mut hdr)?;
        let Some(h) = RecordHeader::decode(&hdr, &sb.uuid) else { continue };
        let len = RecordHeader::sectors(h.blocks);
        let sane = h.blocks >= 1
            && h.blocks <= sb.logged_write_blocks
            && h.home.checked_add(h.blocks as u64).is_some_and(|e| e <= sb.user_blocks())
            && phys + len <= ls
            && at + len - tail <= ls
            && wanted(&h);
        if !sane {
            continue;
        }
        // A record the writer would have placed at `pos` is never at the next pass.
        if at != pos && super::space::place(pos, len, ls) != at {
            continue;
        }
        let mut data = vec![0u8; (h.blocks as u64 * MLB_BLOCK) as usize];
        inner.read_at(sb.log_start(g) + (phys + 1) * SECTOR_SIZE, &mut data)?;
        if RecordHeader::data_crc(h.seq, &data) == h.data_crc {
            return Ok(Some(Found { at, header: h }));
        }
    }
    Ok(None)
}

fn damaged(inner: &dyn Device, message: String) -> DeviceError {
    DeviceError::Open { device: inner.name(), message }
}

/// Reads block 0 and checks it is an MLB superblock for a disk this long.
pub(crate) fn read_super(inner: &dyn Device) -> Result<MlbSuper, DeviceError> {
    if inner.len_bytes() < MLB_BLOCK {
        return Err(damaged(inner, "too small to be an MLB disk".into()));
    }
    let mut b = vec![0u8; MLB_BLOCK as usize];
    inner.read_at(0, &mut b)?;
    let sb = MlbSuper::decode(&b).map_err(|e| damaged(inner, format!("not an MLB disk, or its superblock is damaged: {e}")))?;
    if inner.len_bytes() < sb.disk_bytes {
        return Err(damaged(inner, format!("is {} bytes; its MLB superblock says it was made on {} bytes", inner.len_bytes(), sb.disk_bytes)));
    }
    Ok(sb)
}

/// The valid snapshot copy with the higher sequence.
pub(crate) fn read_snapshot(inner: &dyn Device, sb: &MlbSuper) -> Result<Snapshot, DeviceError> {
    let copy = sb.snapshot_blocks as u64 * MLB_BLOCK;
    let mut best: Option<Snapshot> = None;
    let mut why = Vec::new();
    for c in 0..2u64 {
        // The header says how much of the copy is in use; read only that (checked against the
        // copy's size, so a damaged length reads nothing outside it).
        let mut buf = vec![0u8; MLB_BLOCK as usize];
        inner.read_at(MLB_BLOCK + c * copy, &mut buf)?;
        let used = Snapshot::covered(&buf).div_ceil(MLB_BLOCK).clamp(1, sb.snapshot_blocks as u64);
        if used > 1 {
            buf = vec![0u8; (used * MLB_BLOCK) as usize];
            inner.read_at(MLB_BLOCK + c * copy, &mut buf)?;
        }
        match Snapshot::decode(&buf, sb) {
            Ok(s) if s.seq % 2 != c => why.push(format!("copy {c} holds sequence {}, which belongs in the other copy", s.seq)),
            Ok(s) => {
                if best.as_ref().is_none_or(|b| s.seq > b.seq) {
                    best = Some(s);
                }
            }
            Err(e) => why.push(format!("copy {c}: {e}")),
        }
    }
    best.ok_or_else(|| damaged(inner, format!("neither copy of the MLB map snapshot is valid ({})", why.join("; "))))
}

pub(super) fn open(inner: Arc<dyn Device>, faults: crate::faults::Faults) -> Result<MlbDevice, DeviceError> {
    let sb = read_super(&*inner)?;
    let snap = read_snapshot(&*inner, &sb)?;
    let mut map = BTreeMap::new();
    let mut logs: Vec<LogState> = snap.logs.iter().map(|l| LogState { tail: l.tail, head: l.head, next_log_seq: l.next_log_seq, live: 0 }).collect();
    for e in &snap.entries {
        map.insert(e.home, Loc { log: e.log, sector: e.sector });
        logs[e.log as usize].live += 1;
    }
    // Records written since the snapshot, each log scanned in its own order.
    let mut found: Vec<(u64, u32, Found)> = Vec::new();
    // A clean close left nothing past the heads: no log to read (on a large disk that is a
    // sector read, and on a disk a seek, per log).
    for g in 0..if snap.clean { 0 } else { sb.groups } {
        let l = &mut logs[g as usize];
        // At most a log's worth of records can follow the head; the bound guards a loop.
        for _ in 0..sb.log_sectors() {
            let expect = l.next_log_seq;
            let Some(f) = next_record(&*inner, &sb, g, l.head, l.tail, |h| h.epoch == snap.epoch && h.log_seq == expect)? else { break };
            l.head = f.at + RecordHeader::sectors(f.header.blocks);
            l.next_log_seq += 1;
            found.push((f.header.seq, g, f));
        }
    }
    found.sort_by_key(|(seq, _, _)| *seq);
    let recovered = found.len() as u64;
    let mut next_seq = snap.next_seq;
    for (seq, g, f) in found {
        let phys = f.at % sb.log_sectors();
        for i in 0..f.header.blocks as u64 {
            let loc = Loc { log: g, sector: (phys + 1 + i * SECTORS_PER_BLOCK) as u32 };
            if let Some(old) = map.insert(f.header.home + i, loc) {
                logs[old.log as usize].live -= 1;
            }
            logs[g as usize].live += 1;
        }
        next_seq = next_seq.max(seq + 1);
    }
    let bump = if faults.mlb_same_epoch { 0 } else { 1 };
    let epoch = snap.epoch.checked_add(bump).ok_or_else(|| damaged(&*inner, "its epoch counter is exhausted".into()))?;
    let dev = MlbDevice {
        inner,
        head_group: AtomicU32::new(0),
        state: RwLock::new(State { map, logs, epoch, next_seq, snap_seq: snap.seq }),
        space: RwLock::new(()),
        counters: Counters::default(),
        recovered_records: recovered,
        poison: Poison::default(),
        user: Default::default(),
        faults,
        sb,
    };
    // The new epoch is durable before any record of it is written.
    {
        let mut st = dev.lock_write();
        dev.write_snapshot(&mut st)?;
    }
    Ok(dev)
}

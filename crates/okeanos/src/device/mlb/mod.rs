//! Block-level manylogs (MLB, the Manylogs paper §III-I.1): a [`Device`] over another device
//! that logs small writes into the log nearest the disk head and keeps the mapping table (the
//! paper's MTL table, §III-E) to serve reads of logged blocks from their logs.
//!
//! The disk is cut into groups; each group is data blocks followed by a log (§III-B). The
//! exported device is the groups' data blocks, back to back. A write of at most
//! `logged_write_blocks` blocks (LoggedWriteSize, §III-C) becomes one *record* in the log of
//! the group where the last non-logged I/O went (§III-D): a header sector, then the blocks.
//! Larger writes go to their home blocks, except blocks that are logged already: those are
//! logged again, so that a block is never at home in a version older than the log's (which
//! recovery would put back). Logged blocks stay logged (lazy checkpoint, §III-F) until a log
//! needs room or the owner asks for a checkpoint (`okeanos blockdev checkpoint`).
//!
//! Durability is the wrapped device's: a write is durable after a later [`Device::flush`]
//! (FLUSH, or a write with FUA, at the NBD front end). Recovery rebuilds the map from the newer
//! valid snapshot and the records each log holds past that snapshot's head (`recover`); the
//! paper keeps the table in capacitor-backed RAM, which a file or loop device does not have, so
//! the table is on disk as the manylogs journal placement keeps its map (docs/MLB.md says
//! why and what that costs).
//!
//! Files: `space` finds room for a record (log swap, §III-G, and checkpoint when a log is
//! full), `recover` opens a disk, `check` verifies one. All of it runs over any [`Device`],
//! so the simulator, crash tests and the NBD server use the same code.

mod check;
mod recover;
mod space;

pub use check::MlbCheck;

use super::{check_access, Device, DeviceError, DeviceStats, Poison, SECTOR_SIZE};
use crate::format::mlb::{MlbSuper, RecordHeader, SnapEntry, SnapLog, Snapshot, MLB_BLOCK, RECORD_HEADER, SECTORS_PER_BLOCK};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// The geometry `okeanos blockdev create` asks for, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MlbGeometry {
    /// Bytes of one group: its data, then its log. The paper's GroupSize (100 MB, §V-A).
    pub group_bytes: u64,
    /// Bytes of every group's log. The paper's LogSize (10 MB).
    pub log_bytes: u64,
    /// Writes of at most this many bytes are logged. The paper's LoggedWriteSize: MLB-32 and
    /// MLB-256 log writes of at most 32 and 256 KiB (§V-B).
    pub logged_write_bytes: u64,
}

impl Default for MlbGeometry {
    fn default() -> Self {
        MlbGeometry { group_bytes: 100 << 20, log_bytes: 10 << 20, logged_write_bytes: 256 << 10 }
    }
}

impl MlbGeometry {
    /// The paper's proportions scaled down for a disk too small for four 100 MiB groups: a
    /// quarter of the disk per group (at least 1 MiB), a tenth of a group per log.
    pub fn for_disk(disk_bytes: u64) -> MlbGeometry {
        let d = MlbGeometry::default();
        if disk_bytes >= 4 * d.group_bytes {
            return d;
        }
        let group = (disk_bytes / 4 / MLB_BLOCK * MLB_BLOCK).max(1 << 20);
        let log = Self::log_for(group);
        MlbGeometry { group_bytes: group, log_bytes: log, logged_write_bytes: Self::logged_for(log) }
    }

    /// The log a group of `group_bytes` gets when none is asked for: a tenth (at least 4 blocks).
    pub fn log_for(group_bytes: u64) -> u64 {
        (group_bytes / 10 / MLB_BLOCK * MLB_BLOCK).max(4 * MLB_BLOCK)
    }

    /// The LoggedWriteSize a log of `log_bytes` gets when none is asked for: 256 KiB, or half
    /// the log if that is less (at least a block).
    pub fn logged_for(log_bytes: u64) -> u64 {
        MlbGeometry::default().logged_write_bytes.min((log_bytes / 2 / MLB_BLOCK * MLB_BLOCK).max(MLB_BLOCK))
    }
}

/// Where a logged block is: its log and the sector in that log where its 4 KiB start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Loc {
    pub log: u32,
    pub sector: u32,
}

/// One log's positions, in virtual sectors (they only grow; the sector in the log is the
/// position modulo the log's sectors).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LogState {
    pub tail: u64,
    pub head: u64,
    pub next_log_seq: u64,
    /// Blocks the map has in this log.
    pub live: u64,
}

pub(crate) struct State {
    pub map: BTreeMap<u64, Loc>,
    pub logs: Vec<LogState>,
    pub epoch: u32,
    pub next_seq: u64,
    /// The sequence of the newest snapshot written.
    pub snap_seq: u64,
}

/// What an MLB device has done since it was opened.
#[derive(Debug, Default)]
struct Counters {
    logged_writes: AtomicU64,
    logged_blocks: AtomicU64,
    in_place_writes: AtomicU64,
    in_place_bytes: AtomicU64,
    log_reads: AtomicU64,
    home_reads: AtomicU64,
    log_swaps: AtomicU64,
    idle_swaps: AtomicU64,
    swapped_blocks: AtomicU64,
    checkpoints: AtomicU64,
    checkpointed_blocks: AtomicU64,
    log_resets: AtomicU64,
    snapshots: AtomicU64,
}

/// A snapshot of an MLB device's counters and map (`okeanos blockdev stat`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct MlbStats {
    /// Writes (or parts of large writes) that became log records.
    pub logged_writes: u64,
    pub logged_blocks: u64,
    /// Writes (or parts) that went to their home blocks.
    pub in_place_writes: u64,
    pub in_place_bytes: u64,
    /// Blocks read from a log and, separately, read requests served from home blocks.
    pub log_reads: u64,
    pub home_reads: u64,
    /// Full logs whose blocks moved to a colder log (§III-G), and the blocks moved; of the
    /// swaps, those done in idle moments ([`MlbDevice::idle_work`]), not inside a write.
    pub log_swaps: u64,
    pub idle_swaps: u64,
    pub swapped_blocks: u64,
    /// Logs whose blocks were copied home, and the blocks copied.
    pub checkpoints: u64,
    pub checkpointed_blocks: u64,
    /// Logs emptied without copying (none of their blocks was still mapped).
    pub log_resets: u64,
    pub snapshots: u64,
    /// Blocks logged now (the MTL table's entries) and the table's size on disk in bytes.
    pub mapped_blocks: u64,
    pub table_bytes: u64,
    /// Records recovery found past the snapshot when the device was opened.
    pub recovered_records: u64,
    /// Sectors in use in each log (between its tail and head).
    pub log_used_sectors: Vec<u64>,
    pub log_sectors: u64,
    pub epoch: u32,
}

/// The block-level manylogs device.
pub struct MlbDevice {
    inner: Arc<dyn Device>,
    sb: MlbSuper,
    state: RwLock<State>,
    /// Held shared by a read from the moment it looked its blocks up until its I/O is done,
    /// and exclusively by whatever frees log space (reset, swap, checkpoint), which so waits
    /// for reads that may still be reading a location it frees. Taken after `state`.
    pub(crate) space: RwLock<()>,
    /// The group of the last non-logged I/O: where the disk head is (§III-D).
    head_group: AtomicU32,
    counters: Counters,
    recovered_records: u64,
    poison: Poison,
    user: super::DeviceCounters,
    /// The canaries (`mlb_unmap_early`, `mlb_same_epoch`); default in every real use.
    faults: crate::faults::Faults,
}

impl MlbDevice {
    /// Makes an empty MLB disk on `inner`: superblock, and a first map snapshot. Returns the
    /// geometry written. Everything it wrote is durable when it returns.
    pub fn create(inner: &dyn Device, geometry: MlbGeometry) -> Result<MlbSuper, DeviceError> {
        let open_err = |message: String| DeviceError::Open { device: inner.name(), message };
        for (what, v) in [("group size", geometry.group_bytes), ("log size", geometry.log_bytes), ("logged write size", geometry.logged_write_bytes)] {
            if v == 0 || v % MLB_BLOCK != 0 {
                return Err(open_err(format!("the {what} ({v} bytes) must be a positive multiple of {MLB_BLOCK} bytes")));
            }
            if v / MLB_BLOCK > u32::MAX as u64 {
                return Err(open_err(format!("the {what} ({v} bytes) is too large")));
            }
        }
        let sb = MlbSuper::plan(
            inner.len_bytes(),
            (geometry.group_bytes / MLB_BLOCK) as u32,
            (geometry.log_bytes / MLB_BLOCK) as u32,
            (geometry.logged_write_bytes / MLB_BLOCK) as u32,
            crate::ids::new_uuid(),
        )
        .map_err(open_err)?;
        let snap = Snapshot {
            seq: 1,
            epoch: 1,
            next_seq: 1,
            logs: vec![SnapLog { tail: 0, head: 0, next_log_seq: 1 }; sb.groups as usize],
            entries: Vec::new(),
            clean: true,
        };
        let copy = sb.snapshot_blocks as u64 * MLB_BLOCK;
        let mut buf = vec![0u8; (snap.encoded_len() as u64).div_ceil(MLB_BLOCK) as usize * MLB_BLOCK as usize];
        // Copy 0's header zeroed (no stale copy of an earlier disk survives), copy 1 the first
        // snapshot.
        inner.write_at(MLB_BLOCK, &vec![0u8; MLB_BLOCK as usize])?;
        snap.encode(&sb.uuid, &mut buf);
        inner.write_at(MLB_BLOCK + copy, &buf)?;
        inner.flush()?;
        // The superblock last: a disk is an MLB disk only once its map is in place.
        inner.write_at(0, &sb.encode())?;
        inner.flush()?;
        Ok(sb)
    }

    /// Opens an MLB disk: reads its superblock and newer valid map snapshot, scans each log
    /// past the snapshot for the records written since (recovery), and writes a new snapshot
    /// so that the next open starts from here. Corruption is an error naming what is damaged.
    pub fn open(inner: Arc<dyn Device>) -> Result<MlbDevice, DeviceError> {
        recover::open(inner, crate::faults::Faults::default())
    }

    /// [`MlbDevice::open`] with canaries set: for the tests that must catch them.
    #[doc(hidden)]
    pub fn open_with_faults(inner: Arc<dyn Device>, faults: crate::faults::Faults) -> Result<MlbDevice, DeviceError> {
        recover::open(inner, faults)
    }

    pub fn superblock(&self) -> &MlbSuper {
        &self.sb
    }

    fn lock_write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f`, poisoning the device if it fails: the map in memory may then be ahead of
    /// what is on disk, so nothing more may be done with it.
    fn guarded<R>(&self, f: impl FnOnce() -> Result<R, DeviceError>) -> Result<R, DeviceError> {
        self.poison.check(&self.name())?;
        let r = f();
        if let Err(e) = &r {
            self.poison.set(e);
        }
        r
    }

    /// Copies every logged block home and empties every log (the paper's off-hours
    /// checkpoint, §III-F and Fig. 7a). Durable when it returns.
    pub fn checkpoint_all(&self) -> Result<u64, DeviceError> {
        self.guarded(|| {
            let mut st = self.lock_write();
            let logs: Vec<u32> = (0..self.sb.groups).filter(|&g| st.logs[g as usize].live > 0 || st.logs[g as usize].head != st.logs[g as usize].tail).collect();
            self.checkpoint_logs(&mut st, &logs)
        })
    }

    /// Writes a snapshot of the map, so that the next open scans nothing. Durable when it
    /// returns. Done by [`MlbDevice::close`].
    pub fn snapshot(&self) -> Result<(), DeviceError> {
        self.guarded(|| {
            let mut st = self.lock_write();
            self.write_snapshot(&mut st)
        })
    }

    /// Snapshots the map, marked clean so that the next open reads no log, and releases the
    /// wrapped device.
    pub fn close(self) -> Result<(), DeviceError> {
        self.guarded(|| {
            let mut st = self.lock_write();
            self.write_snapshot_marked(&mut st, true)
        })
    }

    pub fn stats(&self) -> MlbStats {
        let st = self.lock_read();
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        MlbStats {
            logged_writes: l(&c.logged_writes),
            logged_blocks: l(&c.logged_blocks),
            in_place_writes: l(&c.in_place_writes),
            in_place_bytes: l(&c.in_place_bytes),
            log_reads: l(&c.log_reads),
            home_reads: l(&c.home_reads),
            log_swaps: l(&c.log_swaps),
            idle_swaps: l(&c.idle_swaps),
            swapped_blocks: l(&c.swapped_blocks),
            checkpoints: l(&c.checkpoints),
            checkpointed_blocks: l(&c.checkpointed_blocks),
            log_resets: l(&c.log_resets),
            snapshots: l(&c.snapshots),
            mapped_blocks: st.map.len() as u64,
            table_bytes: (crate::format::mlb::SNAP_HEADER_LEN
                + st.logs.len() * crate::format::mlb::SNAP_LOG_LEN
                + st.map.len() * crate::format::mlb::SNAP_ENTRY_LEN) as u64,
            recovered_records: self.recovered_records,
            log_used_sectors: st.logs.iter().map(|l| l.head - l.tail).collect(),
            log_sectors: self.sb.log_sectors(),
            epoch: st.epoch,
        }
    }

    /// The current version of user block `b`, whole.
    fn read_block(&self, st: &State, b: u64, out: &mut [u8]) -> Result<(), DeviceError> {
        match st.map.get(&b) {
            Some(loc) => self.inner.read_at(self.sb.log_start(loc.log) + loc.sector as u64 * SECTOR_SIZE, out),
            None => self.inner.read_at(self.sb.home_block(b) * MLB_BLOCK, out),
        }
    }

    /// Logs user blocks `first..first + n` whose whole contents are `data`, as one or more
    /// records of at most `logged_write_blocks` each.
    fn log_blocks(&self, st: &mut State, first: u64, data: &[u8]) -> Result<(), DeviceError> {
        let per = self.sb.logged_write_blocks as usize * MLB_BLOCK as usize;
        for (i, chunk) in data.chunks(per).enumerate() {
            let home = first + (i * per) as u64 / MLB_BLOCK;
            let g = self.room_for(st, chunk.len() as u64 / MLB_BLOCK)?;
            self.append(st, g, home, chunk)?;
            self.counters.logged_writes.fetch_add(1, Ordering::Relaxed);
            self.counters.logged_blocks.fetch_add(chunk.len() as u64 / MLB_BLOCK, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Writes one record of user blocks `home..` with contents `data` at log `g`'s head (the
    /// caller made room) and maps the blocks to it.
    pub(crate) fn append(&self, st: &mut State, g: u32, home: u64, data: &[u8]) -> Result<(), DeviceError> {
        let blocks = (data.len() as u64 / MLB_BLOCK) as u32;
        let len = RecordHeader::sectors(blocks);
        let at = space::place(st.logs[g as usize].head, len, self.sb.log_sectors());
        debug_assert!(at + len - st.logs[g as usize].tail <= self.sb.log_sectors(), "room_for made room");
        let seq = st.next_seq;
        let log = &mut st.logs[g as usize];
        let h = RecordHeader { epoch: st.epoch, log_seq: log.next_log_seq, seq, home, blocks, data_crc: RecordHeader::data_crc(seq, data) };
        let mut buf = vec![0u8; RECORD_HEADER + data.len()];
        h.encode(&self.sb.uuid, &mut buf);
        buf[RECORD_HEADER..].copy_from_slice(data);
        let phys = at % self.sb.log_sectors();
        self.inner.write_at(self.sb.log_start(g) + phys * SECTOR_SIZE, &buf)?;
        log.next_log_seq += 1;
        log.head = at + len;
        st.next_seq += 1;
        for i in 0..blocks as u64 {
            let loc = Loc { log: g, sector: (phys + 1 + i * SECTORS_PER_BLOCK) as u32 };
            if let Some(old) = st.map.insert(home + i, loc) {
                st.logs[old.log as usize].live -= 1;
            }
            st.logs[g as usize].live += 1;
        }
        Ok(())
    }

    /// Flushes, writes a snapshot of the map to the copy the newest one is not in, and
    /// flushes again. The first flush makes every record the snapshot names durable before the
    /// snapshot can be; the second makes the snapshot durable before any log space it frees
    /// is reused.
    pub(crate) fn write_snapshot(&self, st: &mut State) -> Result<(), DeviceError> {
        self.write_snapshot_marked(st, false)
    }

    /// [`MlbDevice::write_snapshot`], marked clean when `clean`: nothing may be written after it.
    fn write_snapshot_marked(&self, st: &mut State, clean: bool) -> Result<(), DeviceError> {
        if !self.faults.mlb_unmap_early {
            self.inner.flush()?;
        }
        let snap = Snapshot {
            seq: st.snap_seq + 1,
            epoch: st.epoch,
            next_seq: st.next_seq,
            logs: st.logs.iter().map(|l| SnapLog { tail: l.tail, head: l.head, next_log_seq: l.next_log_seq }).collect(),
            entries: st.map.iter().map(|(&home, l)| SnapEntry { home, log: l.log, sector: l.sector }).collect(),
            clean,
        };
        let copy = self.sb.snapshot_blocks as u64 * MLB_BLOCK;
        // Only the blocks the snapshot fills: a copy has room for every log block mapped, which
        // on a large disk is hundreds of megabytes.
        let mut buf = vec![0u8; (snap.encoded_len() as u64).div_ceil(MLB_BLOCK) as usize * MLB_BLOCK as usize];
        snap.encode(&self.sb.uuid, &mut buf);
        self.inner.write_at(MLB_BLOCK + (snap.seq % 2) * copy, &buf)?;
        self.inner.flush()?;
        st.snap_seq = snap.seq;
        self.counters.snapshots.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Writes user bytes `data` at `offset` (sector-aligned, checked), outside the lock's
    /// concerns: the caller holds the state for writing.
    fn write_locked(&self, st: &mut State, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        let first = offset / MLB_BLOCK;
        let last = (offset + data.len() as u64 - 1) / MLB_BLOCK;
        let n = last - first + 1;
        if n <= self.sb.logged_write_blocks as u64 {
            let whole = self.whole_blocks(st, offset, data)?;
            return self.log_blocks(st, first, &whole);
        }
        // A large write: home, except runs of blocks that are logged now, which are logged again.
        let mut b = first;
        while b <= last {
            let mapped = st.map.contains_key(&b);
            let mut e = b + 1;
            while e <= last && st.map.contains_key(&e) == mapped && (mapped || self.sb.group_of(e) == self.sb.group_of(b)) {
                e += 1;
            }
            let lo = offset.max(b * MLB_BLOCK);
            let hi = (offset + data.len() as u64).min(e * MLB_BLOCK);
            let piece = &data[(lo - offset) as usize..(hi - offset) as usize];
            if mapped {
                let whole = self.whole_blocks(st, lo, piece)?;
                self.log_blocks(st, b, &whole)?;
            } else {
                let disk = self.sb.home_block(b) * MLB_BLOCK + (lo - b * MLB_BLOCK);
                self.inner.write_at(disk, piece)?;
                self.head_group.store(self.sb.group_of(b), Ordering::Relaxed);
                self.counters.in_place_writes.fetch_add(1, Ordering::Relaxed);
                self.counters.in_place_bytes.fetch_add(piece.len() as u64, Ordering::Relaxed);
            }
            b = e;
        }
        Ok(())
    }

    /// `data` at user `offset` widened to whole blocks, the rest of its first and last block
    /// read from where they are now.
    fn whole_blocks(&self, st: &State, offset: u64, data: &[u8]) -> Result<Vec<u8>, DeviceError> {
        let first = offset / MLB_BLOCK;
        let end = offset + data.len() as u64;
        let last = (end - 1) / MLB_BLOCK;
        let mut out = vec![0u8; ((last - first + 1) * MLB_BLOCK) as usize];
        let bs = MLB_BLOCK as usize;
        if !offset.is_multiple_of(MLB_BLOCK) {
            self.read_block(st, first, &mut out[..bs])?;
        }
        if !end.is_multiple_of(MLB_BLOCK) && (last != first || offset.is_multiple_of(MLB_BLOCK)) {
            let at = out.len() - bs;
            self.read_block(st, last, &mut out[at..])?;
        }
        let skip = (offset - first * MLB_BLOCK) as usize;
        out[skip..skip + data.len()].copy_from_slice(data);
        Ok(out)
    }
}

impl Device for MlbDevice {
    fn name(&self) -> String {
        format!("mlb:{}", self.inner.name())
    }

    fn len_bytes(&self) -> u64 {
        self.sb.user_bytes
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.poison.check(&self.name())?;
        check_access(&self.name(), self.sb.user_bytes, offset, buf.len() as u64)?;
        if buf.is_empty() {
            return Ok(());
        }
        // Where each piece is, under the state lock; the reads themselves outside it, so that
        // a write waits for no read's I/O. A read holds the space guard until its I/O is done:
        // nothing frees log space under it (see `space`).
        let mut pieces: Vec<(u64, usize, usize)> = Vec::new();
        let guard = {
            let st = self.lock_read();
            let end = offset + buf.len() as u64;
            let mut pos = offset;
            while pos < end {
                let b = pos / MLB_BLOCK;
                let in_block = pos - b * MLB_BLOCK;
                if let Some(loc) = st.map.get(&b) {
                    let n = (MLB_BLOCK - in_block).min(end - pos);
                    pieces.push((self.sb.log_start(loc.log) + loc.sector as u64 * SECTOR_SIZE + in_block, (pos - offset) as usize, n as usize));
                    self.counters.log_reads.fetch_add(1, Ordering::Relaxed);
                    pos += n;
                    continue;
                }
                // A run of unlogged blocks in one group: one read at home.
                let g = self.sb.group_of(b);
                let mut e = b + 1;
                while e * MLB_BLOCK < end && !st.map.contains_key(&e) && self.sb.group_of(e) == g {
                    e += 1;
                }
                let n = (e * MLB_BLOCK).min(end) - pos;
                pieces.push((self.sb.home_block(b) * MLB_BLOCK + in_block, (pos - offset) as usize, n as usize));
                self.head_group.store(g, Ordering::Relaxed);
                self.counters.home_reads.fetch_add(1, Ordering::Relaxed);
                pos += n;
            }
            self.space.read().unwrap_or_else(|e| e.into_inner())
        };
        for (at, from, n) in pieces {
            self.inner.read_at(at, &mut buf[from..from + n])?;
        }
        drop(guard);
        self.user.on_read(buf.len());
        Ok(())
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        check_access(&self.name(), self.sb.user_bytes, offset, data.len() as u64)?;
        if data.is_empty() {
            return Ok(());
        }
        self.guarded(|| {
            let mut st = self.lock_write();
            self.write_locked(&mut st, offset, data)
        })?;
        self.user.on_write(data.len());
        Ok(())
    }

    fn flush(&self) -> Result<(), DeviceError> {
        self.poison.check(&self.name())?;
        self.guarded(|| self.inner.flush())?;
        self.user.on_flush();
        Ok(())
    }

    fn counters(&self) -> DeviceStats {
        self.user.snapshot()
    }

    fn seeks(&self) -> Option<bool> {
        self.inner.seeks()
    }
}

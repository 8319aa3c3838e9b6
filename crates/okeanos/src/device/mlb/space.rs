//! Room in the logs: which log a record goes to (the one nearest the disk head, §III-D), and
//! what happens when that log is full: reset it if none of its blocks is still mapped, else
//! swap its blocks into the coldest log that has room (log swapping, §III-G), else checkpoint
//! it (copy its blocks home, §III-F).
//!
//! Every way of freeing a log ends with a snapshot ([`MlbDevice::write_snapshot`]): a log's
//! space is reused only after a durable snapshot no longer points into it, so recovery from
//! either snapshot copy never reads a record that was overwritten.

use super::{LogState, MlbDevice, State};
use crate::device::DeviceError;
use crate::format::mlb::{RecordHeader, MLB_BLOCK};
use std::sync::atomic::Ordering;

/// Where a record of `len` sectors goes when a log's head is at `head`: there, or at the start
/// of the log's next pass if it would run past the log's end (records never wrap).
pub(crate) fn place(head: u64, len: u64, log_sectors: u64) -> u64 {
    if head % log_sectors + len > log_sectors {
        head.div_ceil(log_sectors) * log_sectors
    } else {
        head
    }
}

/// Empties a log none of whose blocks is mapped: its next record starts a new pass, so that
/// any record fits (one placed near a pass's end could otherwise need more than half a log).
pub(crate) fn empty(l: &mut LogState, log_sectors: u64) {
    l.head = l.head.div_ceil(log_sectors) * log_sectors;
    l.tail = l.head;
}

/// Whether a record of `len` sectors fits log `l` now.
pub(crate) fn fits(l: &LogState, len: u64, log_sectors: u64) -> bool {
    place(l.head, len, log_sectors) + len - l.tail <= log_sectors
}

impl MlbDevice {
    /// A log with room for a record of `blocks` blocks, freeing one if the nearest is full.
    pub(crate) fn room_for(&self, st: &mut State, blocks: u64) -> Result<u32, DeviceError> {
        let len = RecordHeader::sectors(blocks as u32);
        let ls = self.sb.log_sectors();
        let g = self.head_group.load(Ordering::Relaxed).min(self.sb.groups - 1);
        if fits(&st.logs[g as usize], len, ls) {
            // §III-G swaps a log once it is over 80% full, before it fills: then its mapped
            // blocks, logged again with their headers, always fit an empty log.
            let l = &st.logs[g as usize];
            if (place(l.head, len, ls) + len - l.tail) * 5 > ls * 4 && l.live > 0 {
                if let Some(cold) = self.coldest_with_room_for(st, g) {
                    self.swap(st, g, cold)?;
                }
            }
            return Ok(g);
        }
        if st.logs[g as usize].live == 0 {
            self.reset(st, g)?;
            return Ok(g);
        }
        if let Some(cold) = self.coldest_with_room_for(st, g) {
            self.swap(st, g, cold)?;
        } else {
            self.checkpoint_logs(st, &[g])?;
        }
        debug_assert!(fits(&st.logs[g as usize], len, ls));
        Ok(g)
    }

    /// Work for an idle moment (§III-G: "whenever possible, log swapping is done during idle
    /// periods when a log occupancy is above 80%"): if the log nearest the head, where the
    /// next small writes go, is over half full, swap it into the emptiest log that can take
    /// its blocks. Half, not the paper's 80%: a write swaps a log inline once it passes 80%
    /// (so that its blocks still fit an empty log), and idle swaps are there to keep writes
    /// from meeting that. Only the head's log moves, so an idle disk does not shuttle the
    /// same blocks between logs. Returns whether it swapped. The caller decides what idle is
    /// (the NBD server: no request for a while; trace replay: a gap between requests).
    pub fn idle_work(&self) -> Result<bool, DeviceError> {
        self.guarded(|| {
            let mut st = self.lock_write();
            let ls = self.sb.log_sectors();
            let g = self.head_group.load(Ordering::Relaxed).min(self.sb.groups - 1);
            let l = &st.logs[g as usize];
            if l.live == 0 || (l.head - l.tail) * 2 <= ls {
                return Ok(false);
            }
            let Some(cold) = self.coldest_with_room_for(&st, g) else { return Ok(false) };
            self.swap(&mut st, g, cold)?;
            self.counters.idle_swaps.fetch_add(1, Ordering::Relaxed);
            Ok(true)
        })
    }

    /// Empties log `g`, none of whose blocks is mapped: a snapshot that says so.
    fn reset(&self, st: &mut State, g: u32) -> Result<(), DeviceError> {
        let _no_reads = self.space.write().unwrap_or_else(|e| e.into_inner());
        empty(&mut st.logs[g as usize], self.sb.log_sectors());
        self.write_snapshot(st)?;
        self.counters.log_resets.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Sectors the records of log `g`'s mapped blocks would take if logged again, as runs of
    /// consecutive blocks of at most a logged write each, plus room for one pass's end.
    fn moved_sectors(&self, st: &State, g: u32) -> u64 {
        let runs = self.runs_in(st, g);
        runs.iter().map(|&(_, n)| RecordHeader::sectors(n as u32)).sum::<u64>() + RecordHeader::sectors(self.sb.logged_write_blocks)
    }

    /// Log `g`'s mapped blocks as runs `(first block, count)` of consecutive user blocks, each
    /// at most a logged write.
    fn runs_in(&self, st: &State, g: u32) -> Vec<(u64, u64)> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for (&b, loc) in &st.map {
            if loc.log != g {
                continue;
            }
            match runs.last_mut() {
                Some((first, n)) if *first + *n == b && *n < self.sb.logged_write_blocks as u64 => *n += 1,
                _ => runs.push((b, 1)),
            }
        }
        runs
    }

    /// The emptiest other log that can take all of `g`'s mapped blocks (§III-G: a cold log).
    fn coldest_with_room_for(&self, st: &State, g: u32) -> Option<u32> {
        let need = self.moved_sectors(st, g);
        let ls = self.sb.log_sectors();
        (0..self.sb.groups)
            .filter(|&c| c != g)
            .map(|c| (st.logs[c as usize].head - st.logs[c as usize].tail, c))
            .filter(|&(used, _)| used + need <= ls)
            .min()
            .map(|(_, c)| c)
    }

    /// Moves log `g`'s mapped blocks into log `cold` as new records (they are the newest
    /// version of their blocks, so their new sequence numbers order them right), then empties
    /// `g`. The paper swaps the cold log's contents back into the hot one; the cold log is
    /// chosen emptiest, so here its contents stay where they are (docs/MLB.md).
    fn swap(&self, st: &mut State, g: u32, cold: u32) -> Result<(), DeviceError> {
        let _no_reads = self.space.write().unwrap_or_else(|e| e.into_inner());
        // The hot log's mapped blocks, read in log order (adjacent sectors in one read)...
        let mut entries: Vec<(u64, super::Loc)> = st.map.iter().filter(|(_, l)| l.log == g).map(|(&b, &l)| (b, l)).collect();
        entries.sort_by_key(|(_, l)| l.sector);
        let bs = MLB_BLOCK as usize;
        let per = crate::format::mlb::SECTORS_PER_BLOCK as u32;
        let mut data = vec![0u8; entries.len() * bs];
        let mut at_of = std::collections::HashMap::with_capacity(entries.len());
        let mut i = 0;
        while i < entries.len() {
            let mut j = i + 1;
            while j < entries.len() && entries[j].1.sector == entries[j - 1].1.sector + per {
                j += 1;
            }
            self.inner.read_at(self.sb.log_start(g) + entries[i].1.sector as u64 * crate::device::SECTOR_SIZE, &mut data[i * bs..j * bs])?;
            for (k, e) in entries[i..j].iter().enumerate() {
                at_of.insert(e.0, (i + k) * bs);
            }
            i = j;
        }
        // ...then logged again in the cold log, runs of adjacent user blocks per record.
        let mut moved = 0;
        let mut rec = Vec::new();
        for (first, n) in self.runs_in(st, g) {
            rec.clear();
            for b in first..first + n {
                let at = at_of[&b];
                rec.extend_from_slice(&data[at..at + bs]);
            }
            self.append(st, cold, first, &rec)?;
            moved += n;
        }
        debug_assert_eq!(st.logs[g as usize].live, 0);
        empty(&mut st.logs[g as usize], self.sb.log_sectors());
        self.write_snapshot(st)?;
        self.counters.log_swaps.fetch_add(1, Ordering::Relaxed);
        self.counters.swapped_blocks.fetch_add(moved, Ordering::Relaxed);
        Ok(())
    }

    /// Copies every mapped block of logs `logs` home, flushes, unmaps them and empties the
    /// logs, and snapshots. Returns the blocks copied. Blocks go in batches: each read from
    /// the logs in log order (runs of adjacent sectors in one read), then written home in
    /// block order (runs of adjacent homes in one write), so a checkpoint streams the logs
    /// and sweeps the disk once per batch instead of seeking between a log and a home for
    /// every block.
    pub(crate) fn checkpoint_logs(&self, st: &mut State, logs: &[u32]) -> Result<u64, DeviceError> {
        let _no_reads = self.space.write().unwrap_or_else(|e| e.into_inner());
        const BATCH: usize = 16 << 10; // blocks: 64 MiB of memory
        let mut chosen = vec![false; self.sb.groups as usize];
        for &g in logs {
            chosen[g as usize] = true;
        }
        let mut entries: Vec<(u64, super::Loc)> = st.map.iter().filter(|(_, l)| chosen[l.log as usize]).map(|(&b, &l)| (b, l)).collect();
        entries.sort_by_key(|(_, l)| (l.log, l.sector));
        let bs = MLB_BLOCK as usize;
        let per = crate::format::mlb::SECTORS_PER_BLOCK as u32;
        for chunk in entries.chunks(BATCH) {
            let mut data = vec![0u8; chunk.len() * bs];
            let mut i = 0;
            while i < chunk.len() {
                let mut j = i + 1;
                while j < chunk.len() && chunk[j].1.log == chunk[i].1.log && chunk[j].1.sector == chunk[j - 1].1.sector + per {
                    j += 1;
                }
                let at = self.sb.log_start(chunk[i].1.log) + chunk[i].1.sector as u64 * crate::device::SECTOR_SIZE;
                self.inner.read_at(at, &mut data[i * bs..j * bs])?;
                i = j;
            }
            let mut order: Vec<usize> = (0..chunk.len()).collect();
            order.sort_by_key(|&k| chunk[k].0);
            let mut i = 0;
            let mut run = Vec::new();
            while i < order.len() {
                let first = chunk[order[i]].0;
                let mut j = i + 1;
                while j < order.len() && chunk[order[j]].0 == chunk[order[j - 1]].0 + 1 && self.sb.group_of(chunk[order[j]].0) == self.sb.group_of(first) {
                    j += 1;
                }
                run.clear();
                for &k in &order[i..j] {
                    run.extend_from_slice(&data[k * bs..(k + 1) * bs]);
                }
                self.inner.write_at(self.sb.home_block(first) * MLB_BLOCK, &run)?;
                i = j;
            }
        }
        let copied = entries.len() as u64;
        // Home first: the snapshot that unmaps the blocks must not be durable before them.
        if !self.faults.mlb_unmap_early {
            self.inner.flush()?;
        }
        for (b, _) in &entries {
            st.map.remove(b);
        }
        for &g in logs {
            st.logs[g as usize].live = 0;
            empty(&mut st.logs[g as usize], self.sb.log_sectors());
        }
        self.write_snapshot(st)?;
        self.counters.checkpoints.fetch_add(logs.len() as u64, Ordering::Relaxed);
        self.counters.checkpointed_blocks.fetch_add(copied, Ordering::Relaxed);
        Ok(copied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_never_run_past_a_log_end() {
        assert_eq!(place(0, 9, 100), 0);
        assert_eq!(place(91, 9, 100), 91);
        assert_eq!(place(92, 9, 100), 100);
        assert_eq!(place(292, 9, 100), 300);
        let l = LogState { tail: 10, head: 95, next_log_seq: 1, live: 1 };
        assert!(fits(&l, 5, 100));
        assert!(fits(&l, 10, 100), "wraps to 100, ends at 110 = tail + log");
        assert!(!fits(&l, 11, 100));
    }
}

//! Log swaps: a log crowded near the head has its transactions copied to the farthest empty
//! log, so that the head's group takes commits again without a wait for a checkpoint
//! (docs/JOURNALING.md, "Swapping a crowded log").

use crate::ids::LogPos;
use super::*;

/// A swap in flight: `from`'s transactions are being copied to `to` (both logs take no
/// commits until it completes).
#[derive(Debug, Clone, Copy)]
pub(super) struct Swap {
    pub(super) from: usize,
    pub(super) to: usize,
    /// `from`'s tail when planned: position `p` of it goes to `(p - tail) mod length` of `to`.
    tail: u64,
    blocks: u64,
    /// Above every tid in either log: the tail tid both are recorded with while empty.
    min_tid: Tid,
    /// The table that completes the swap.
    seq: u64,
}

impl Manylogs {
    /// Over 80% full: a log the paper swaps (section III-G).
    pub(super) fn crowded(&self, i: usize) -> bool {
        self.used(i) * 5 > self.geo.log_blocks * 4
    }

    /// The log to move and the log to move it to, if a swap is due: with `idle`, the fullest
    /// crowded log that commits filled (not one a swap filled), else the head's if crowded;
    /// its transactions all durable (a commit in
    /// flight is not copied). The target is an empty log, the one farthest from the head
    /// (the paper's cold log). The logs not taking part must keep room for the largest
    /// transaction and a quarter of a log, so commits go on beside the swap.
    pub(super) fn swap_choice(&self, idle: bool, max_tx: u64) -> Option<(usize, usize)> {
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

    /// Plans a swap ([`super::Swaps::swap_begin`] says its three steps and why they are safe).
    pub(super) fn begin_swap(&mut self, kept: Kept, idle: bool, max_tx: u64) -> Option<(Vec<IoStage>, u64)> {
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
        if !self.faults.manylogs_swap_unreserved {
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
            for &(len, crc) in &t.crcs {
                copies.push(IoCopy { from: (DevId::Fs, src.device_block(LogPos::new(pos))), to: (DevId::Fs, dst.device_block(LogPos::new(copies.len() as u64))), check: CopyCheck::Crc { len, crc }, kind: BlockKind::LogSwap });
                pos = src.next(LogPos::new(pos)).get();
            }
        }
        assert_eq!((pos, copies.len() as u64), (l.head, blocks), "the copies cover the log from tail to head");

        let mut stages = Vec::new();
        if !self.faults.manylogs_swap_unreserved {
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

    /// The swap is durable: the moved transactions, parked blocks and snapshot entries are
    /// recorded at their new positions ([`super::Swaps::swapped`]).
    pub(super) fn finish_swap(&mut self) {
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
}

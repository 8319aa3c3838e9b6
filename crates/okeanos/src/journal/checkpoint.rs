//! Checkpoint: write committed blocks to their final locations and free their log space
//! (thesis section 3.3; jbd2 checkpoint.c).
//!
//! Three reasons to checkpoint:
//! - space: free log space fell low; the oldest transactions are checkpointed until at least
//!   the target is free (ext3 starts between a quarter and a half of the journal);
//! - age: blocks owed to their final location for longer than the expiration period are
//!   written every writeback period (thesis section 3.1.7, pdflush's two mechanisms);
//! - all: clean unmount and `sync` of the whole file system.
//!
//! A block is written in the newest committed version (`cp_data`), never in a version that a
//! running transaction changed since: uncommitted state must not reach the final location.
//! After the writes are flushed, the placement records what it released (the ring: the journal
//! superblock's new tail), durably, before the space is reused.

use crate::ids::{DevBlock, HomeBlock};
use super::placement::Kept;
use super::plan::{BlockKind, CopyCheck, DevId, IoCopy, IoPlan, IoStage, IoWrite};
use super::transaction::{Tid, TxState};
use super::Journal;
use crate::cache::{BufKind, Cache};
use std::collections::BTreeSet;

/// Home writes a checkpoint queues on the device at once (a stage each, no flush between): at
/// most this many device writes (runs of adjacent blocks)...
pub const CHECKPOINT_SLICE_RUNS: usize = 32;
/// ...and at most this many blocks. A slice bounds how long a commit beside the checkpoint
/// waits behind it on the device's queue: on a disk that seeks a run costs a seek, and on any
/// device a block costs its transfer. Slices of 32 blocks, whatever their runs, made the
/// checkpoint of long runs a device round trip per 128 KiB, slower than 100 streams of 16 KiB
/// appends filled the log (docs/JOURNALING.md, "Where the lanes pay").
pub const CHECKPOINT_SLICE_BLOCKS: usize = 256;

pub use super::plan::COPY_SLICE_BLOCKS;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointGoal {
    /// Free at least this many log blocks (or everything that can be freed).
    Space { target_free: u64 },
    /// Write blocks owed since at or before this time (engine nanoseconds), at most
    /// `max_blocks` of them, oldest transactions first: a bounded step, so that the journal
    /// thread can commit between steps instead of making syncs wait behind a long writeback.
    Expired { owed_since_ns: u64, max_blocks: usize },
    /// Write everything; the log becomes empty.
    All,
    /// A snapshot of the map of logged blocks (manylogs, [`super::placement::Placement::snapshots`]):
    /// write home every owed block except data whose newest committed copy is whole in a log
    /// (as many as the map holds), then record the map, so that recovery reads the logs only
    /// past it (manylogs paper, section III-E: the MTL; docs/JOURNALING.md).
    Snapshot,
}

#[derive(Debug)]
pub struct CheckpointPlan {
    pub io: IoPlan,
    /// Blocks written, with the transaction whose copy each one settles.
    pub written: Vec<(HomeBlock, Tid)>,
    /// The version written of each block of `written`, in order: None when it is copied home
    /// from a log (the block was parked).
    pub data: Vec<Option<std::sync::Arc<Vec<u8>>>>,
    /// The device writes the home blocks take once adjacent ones are merged.
    pub runs: u64,
    /// Transactions at the front of the log released by this checkpoint.
    pub release: usize,
    /// The placement records the release or a new snapshot ([`Self::keep`]) durably at the
    /// end of the plan.
    pub table: bool,
    /// Blocks left logged by a snapshot (`kept.home` is then set).
    pub keep: Vec<HomeBlock>,
    /// What the placement keeps afterwards.
    pub kept: Kept,
    /// Tell the placement it may reuse the released space (false when a fallback decides
    /// where the log starts instead).
    pub release_placement: bool,
    /// The newest committed transaction when the checkpoint was planned: a commit that
    /// completes while its writes are in flight (a checkpoint beside a commit) is newer.
    pub committed_at_begin: Tid,
}

/// Splits a checkpoint's home writes (in block order; `block` gives each one's block) into
/// slices of at most [`CHECKPOINT_SLICE_RUNS`] runs of adjacent blocks and
/// [`CHECKPOINT_SLICE_BLOCKS`] blocks.
fn slices<T>(writes: &[T], block: impl Fn(&T) -> HomeBlock) -> Vec<&[T]> {
    let mut out = Vec::new();
    let (mut start, mut runs) = (0, 0);
    for i in 0..writes.len() {
        let new_run = i == start || block(&writes[i]) != block(&writes[i - 1]) + 1;
        if i > start && ((new_run && runs == CHECKPOINT_SLICE_RUNS) || i - start == CHECKPOINT_SLICE_BLOCKS) {
            out.push(&writes[start..i]);
            (start, runs) = (i, 0);
        }
        if i == start || new_run {
            runs += 1;
        }
    }
    if start < writes.len() {
        out.push(&writes[start..]);
    }
    out
}

impl Journal {
    /// Plans a checkpoint. `None` if there is nothing to write and no space to release.
    pub fn checkpoint_begin(&self, cache: &Cache, goal: CheckpointGoal) -> Option<CheckpointPlan> {
        assert!(self.committing.is_none() || self.placement.checkpoint_beside_commit(), "this placement checkpoints only between commits");
        let mut plan = self.checkpoint_writes(cache, goal)?;
        if plan.kept.home.is_some() {
            self.placement.snapshots().expect("a home tid comes from a placement with snapshots").snapshot_stage(plan.kept, &plan.keep).push_to(&mut plan.io);
            plan.table = true;
        } else if plan.release > 0 {
            self.placement.release_stage(plan.kept).push_to(&mut plan.io);
            plan.table = true;
        }
        Some(plan)
    }

    /// The home writes of a checkpoint (and which transactions they release), without the
    /// placement's release stage.
    pub(super) fn checkpoint_writes(&self, cache: &Cache, goal: CheckpointGoal) -> Option<CheckpointPlan> {
        let chosen = self.checkpoint_choose(cache, goal);
        self.checkpoint_build(cache, chosen)
    }

    /// The blocks a checkpoint for `goal` would write (the engine loads parked ones first).
    pub fn checkpoint_choose(&self, cache: &Cache, goal: CheckpointGoal) -> BTreeSet<HomeBlock> {
        let mut chosen: BTreeSet<HomeBlock> = BTreeSet::new();
        match goal {
            CheckpointGoal::All => {
                for t in &self.log {
                    chosen.extend(t.checkpoint.iter().copied());
                }
            }
            CheckpointGoal::Space { target_free } => {
                let mut free = self.free_blocks();
                for t in &self.log {
                    if free >= target_free {
                        break;
                    }
                    chosen.extend(t.checkpoint.iter().copied());
                    free += t.at.blocks;
                }
            }
            CheckpointGoal::Snapshot => {
                let mut room = self.placement.snapshots().map_or(0, |s| s.map_room());
                for t in &self.log {
                    for &b in &t.checkpoint {
                        if room > 0 && self.stays_logged(cache, b, t.tid) {
                            room -= 1;
                        } else {
                            chosen.insert(b);
                        }
                    }
                }
            }
            CheckpointGoal::Expired { owed_since_ns, max_blocks } => {
                'log: for t in &self.log {
                    for &b in &t.checkpoint {
                        if chosen.len() >= max_blocks {
                            break 'log;
                        }
                        let buf = cache.peek(b).expect("owed block stays cached");
                        // O_DUR blocks stay logged: age never sends them home.
                        if buf.cp_since_ns <= owed_since_ns && !buf.durable {
                            chosen.insert(b);
                        }
                    }
                }
            }
        }
        chosen
    }

    /// Whether owed block `b` of transaction `tid` may stay logged across a snapshot: data
    /// whose copy in `tid` is whole in the placement's map. Metadata always goes home.
    fn stays_logged(&self, cache: &Cache, b: HomeBlock, tid: Tid) -> bool {
        cache.peek(b).is_some_and(|buf| buf.kind == BufKind::Data) && self.placement.snapshots().is_some_and(|s| s.keeps_logged(b, tid))
    }

    /// The home tid a checkpoint writing `chosen` reaches (placements that snapshot): the
    /// newest tid up to which every owed block is chosen or stays logged (at most as many as
    /// the map holds, listed in the second value). None: no further than the last snapshot.
    fn home_point(&self, cache: &Cache, chosen: &BTreeSet<HomeBlock>) -> Option<(Tid, Vec<HomeBlock>)> {
        let snapshots = self.placement.snapshots()?;
        let room = snapshots.map_room();
        let mut keep = Vec::new();
        let mut home = self.log.front().map_or(self.committed_tid, |t| t.tid - 1);
        'log: for t in &self.log {
            let mut kept_here = Vec::new();
            for &b in &t.checkpoint {
                if chosen.contains(&b) {
                    continue;
                }
                if keep.len() + kept_here.len() >= room || !self.stays_logged(cache, b, t.tid) {
                    break 'log;
                }
                kept_here.push(b);
            }
            keep.extend(kept_here);
            home = t.tid;
        }
        if self.log.back().is_none_or(|t| t.tid == home) {
            home = home.max(self.committed_tid);
        }
        (home > snapshots.home()).then_some((home, keep))
    }

    fn checkpoint_build(&self, cache: &Cache, chosen: BTreeSet<HomeBlock>) -> Option<CheckpointPlan> {
        let release = self.log.iter().take_while(|t| t.checkpoint.is_subset(&chosen)).count();
        let snapshot = self.home_point(cache, &chosen);
        if chosen.is_empty() && release == 0 && snapshot.is_none() {
            return None;
        }
        let mut kept = self.kept(release);
        let keep = match snapshot {
            Some((home, keep)) => {
                kept.home = Some(home);
                keep
            }
            None => Vec::new(),
        };

        // Blocks in the cache are written from it; blocks parked in a log (manylogs) are
        // copied home from there, in larger stages: the runtime reads a stage's sources in
        // log order, then writes them in block order (the paper's checkpoint reads its active
        // logs, then writes home, section VI; measured in the simulator: stages of 256 in
        // block order took half the disk time of stages of 32 in log order). (An nvm
        // journal's parked blocks are loaded before the plan is made.)
        let mut writes = Vec::new();
        let mut copies = Vec::new();
        let parking = self.placement.parking();
        for &b in &chosen {
            let buf = cache.peek(b).expect("owed block stays cached");
            let tid = buf.cp_tid.expect("owed block has an owner");
            let kind = if buf.kind == BufKind::Data { BlockKind::FinalData } else { BlockKind::FinalMeta };
            match buf.parked {
                Some(_) if parking.is_some_and(|p| p.parks_on_device()) => {
                    // Where it is now (a log swap may have moved it since it was parked).
                    let parking = parking.expect("checked");
                    let at = parking.frozen_copy(b).expect("a block parked in a log is mapped");
                    let hash = parking.frozen_hash(b).expect("a block parked in a log is mapped");
                    copies.push((IoCopy { from: (DevId::Fs, DevBlock::new(at)), to: (DevId::Fs, DevBlock::home(b)), check: CopyCheck::Tag { home: b, hash }, kind }, b, tid));
                }
                Some(_) => panic!("block {b} is parked in NVM: the engine loads it before the checkpoint"),
                None => {
                    let d = buf.cp_data.clone().expect("owed block has a committed version");
                    writes.push((IoWrite { dev: DevId::Fs, block: DevBlock::home(b), data: d, kind }, b, tid));
                }
            }
        }
        // In slices: the writes stay unordered until the last slice's flush, as in one stage,
        // but at most a slice is queued on the device at once, so a commit beside the
        // checkpoint waits behind one slice, not behind all of it.
        let mut written = Vec::with_capacity(chosen.len());
        let mut data = Vec::with_capacity(chosen.len());
        let mut stages: Vec<IoStage> = Vec::new();
        for chunk in slices(&writes, |w| w.1) {
            let mut stage = IoStage::default();
            for (w, b, tid) in chunk {
                written.push((*b, *tid));
                data.push(Some(w.data.clone()));
                stage.writes.push(w.clone());
            }
            stages.push(stage);
        }
        for chunk in copies.chunks(COPY_SLICE_BLOCKS) {
            let mut stage = IoStage::default();
            for (c, b, tid) in chunk {
                written.push((*b, *tid));
                data.push(None);
                stage.copies.push(c.clone());
            }
            stages.push(stage);
        }
        if let Some(last) = stages.last_mut() {
            last.flush = vec![DevId::Fs];
        }
        let mut io = IoPlan::default();
        for s in stages {
            io.push_stage(s);
        }
        // `chosen` is in block order: a run is a stretch of consecutive blocks.
        let runs = chosen.iter().zip(chosen.iter().skip(1)).filter(|(a, b)| **b != **a + 1).count() as u64 + (!chosen.is_empty()) as u64;
        Some(CheckpointPlan { io, written, data, runs, release, table: false, keep, kept, release_placement: true, committed_at_begin: self.committed_tid })
    }

    /// The checkpoint's I/O completed.
    ///
    /// Commits may have completed while it was in flight (a checkpoint beside a commit). A
    /// block one of them logged whole already belongs to that transaction (`commit_finish`
    /// moved it), and is skipped here. A block one of them logged as records still names the
    /// older owner, but its newest committed version is not the one written: the older
    /// transactions' changes are home now, the newer ones' are not, so the oldest transaction
    /// that logged it since the checkpoint began becomes its owner.
    pub fn checkpoint_finish(&mut self, cache: &mut Cache, plan: CheckpointPlan) {
        assert_eq!(plan.data.len(), plan.written.len(), "a version per block written");
        if let Some(&(last, _)) = plan.written.iter().max() {
            // The disk head ends near the highest block written (each slice goes in block
            // order, and the cached blocks in block order).
            if let Some(h) = self.placement.head() {
                h.note_position(DevBlock::home(last));
            }
        }
        self.cp.blocks += plan.written.len() as u64;
        self.cp.runs += plan.runs;
        self.cp.copied += plan.data.iter().filter(|d| d.is_none()).count() as u64;
        let began = plan.committed_at_begin;
        for ((b, tid), written) in plan.written.into_iter().zip(plan.data) {
            // The committed version is home now, not a running one written early.
            self.early.remove(&b);
            // Whether the version written is still the newest committed one: unless a commit
            // since the checkpoint began logged the block (the same Arc is the quick answer;
            // a copy from a log, or a buffer parked and loaded again meanwhile, asks the log).
            let newer_logged = |log: &std::collections::VecDeque<super::LoggedTx>| log.iter().rev().take_while(|t| t.tid > began).any(|t| t.logged.contains(&b));
            let quick = match (cache.peek(b).map(|buf| &buf.cp_data), &written) {
                (Some(Some(now)), Some(w)) => std::sync::Arc::ptr_eq(now, w),
                _ => false,
            };
            let same = quick || !newer_logged(&self.log);
            if cache.peek(b).is_some_and(|buf| buf.cp_tid == Some(tid)) {
                // This transaction's copy went home (if a newer one is owed, it goes later).
                if let Some(t) = self.logged_tx_mut(tid) {
                    t.home += 1;
                }
            }
            let Some(buf) = cache.get(b) else { continue };
            if buf.cp_tid == Some(tid) && !same {
                let newer = self.log.iter().find(|t| t.tid > began && t.logged.contains(&b)).map(|t| t.tid);
                let newer = newer.expect("a newer committed version comes from a commit that logged the block after the checkpoint began");
                buf.cp_tid = Some(newer);
                if let Some(t) = self.logged_tx_mut(tid) {
                    t.checkpoint.remove(&b);
                }
                if let Some(t) = self.logged_tx_mut(newer) {
                    t.checkpoint.insert(b);
                }
                continue;
            }
            if buf.cp_tid == Some(tid) {
                buf.cp_tid = None;
                buf.cp_data = None;
                buf.cp_since_ns = 0;
                if buf.tx.is_none() {
                    // At its final location: the block's update sequence ends.
                    buf.seq = None;
                }
                let parked = buf.parked.is_some();
                if let Some(t) = self.logged_tx_mut(tid) {
                    t.checkpoint.remove(&b);
                }
                if let Some(p) = self.placement.parking_mut() {
                    p.went_home(b, tid);
                }
                if parked {
                    // Parked (before the checkpoint and copied home, or while its home write
                    // was in flight): its slot or log space may be reused once released, and
                    // home has the data now. Read it from there.
                    cache.forget(b);
                }
            }
        }
        for _ in 0..plan.release {
            let mut t = self.log.pop_front().expect("released transactions are in the log");
            assert_eq!(t.state, TxState::Committed);
            assert!(t.checkpoint.is_empty(), "a released transaction owes nothing");
            t.state = TxState::Checkpointed;
            self.cp.skipped += (t.logged.len() as u64).saturating_sub(t.home);
            for b in &t.logged {
                if self.logged_copies.get(b) == Some(&t.tid) {
                    self.logged_copies.remove(b);
                }
            }
        }
        if plan.table && plan.release_placement {
            self.placement.released(plan.kept);
        }
    }

    /// Commits may have up to `depth` flushes in flight (`commit_pipeline=`): the placement
    /// records it in the superblock the mount writes next ([`Self::mount_plan`]).
    pub fn set_commit_pipeline(&mut self, depth: u32) {
        self.placement.set_pipeline(depth);
    }

    /// Marks the journal in use at mount: recovery after a crash starts at the current tail.
    pub fn mount_plan(&self) -> IoPlan {
        let mut io = IoPlan::default();
        self.placement.mount_stage(self.kept(0)).push_to(&mut io);
        io
    }

    /// Marks the journal clean (empty) at unmount. The log must be empty.
    pub fn clean_plan(&self) -> IoPlan {
        assert!(self.log.is_empty() && !self.commit_in_flight() && self.running.is_empty(), "unmount checkpoints everything first");
        let mut io = IoPlan::default();
        self.placement.clean_stage(self.running.tid).push_to(&mut io);
        io
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(blocks: &[u64]) -> Vec<usize> {
        let b: Vec<HomeBlock> = blocks.iter().map(|&n| HomeBlock::new(n)).collect();
        slices(&b, |x| *x).iter().map(|s| s.len()).collect()
    }

    #[test]
    fn slices_bound_runs_and_blocks() {
        // Scattered blocks: a run each, 32 runs a slice.
        let scattered: Vec<u64> = (0..100).map(|i| 10 + 2 * i).collect();
        assert_eq!(sizes(&scattered), vec![32, 32, 32, 4]);
        // One long run: 256 blocks a slice.
        let long: Vec<u64> = (1000..1600).collect();
        assert_eq!(sizes(&long), vec![256, 256, 88]);
        // Runs of 16 blocks: 256 blocks (16 runs) a slice, the block bound first.
        let runs16: Vec<u64> = (0..40u64).flat_map(|r| (0..16).map(move |k| r * 100 + k)).collect();
        assert_eq!(sizes(&runs16), vec![256, 256, 128]);
        // Runs of 4 blocks: 32 runs (128 blocks) a slice, the run bound first.
        let runs4: Vec<u64> = (0..70u64).flat_map(|r| (0..4).map(move |k| r * 10 + k)).collect();
        assert_eq!(sizes(&runs4), vec![128, 128, 24]);
        assert!(sizes(&[]).is_empty());
        assert_eq!(sizes(&[7]), vec![1]);
    }
}

//! The `nvm` placement: UBJ's in-place commit in a non-volatile buffer cache (Lee et al.,
//! "Unioning of the Buffer Cache and Journaling Layers with Non-volatile Memory", FAST '13; docs/JOURNALING.md,
//! "The nvm placement", and docs/FORMAT.md, "NVM journal"). No I/O here: a commit is a list
//! of NVM stores, flushes and fences that the runtime carries out in order.
//!
//! The NVM holds a slot table and one block of data per slot. A committed transaction's blocks
//! are frozen in slots, nothing is written to a disk: its newest version of each block it
//! logged (the whole block, whatever the content policy logged of it) goes into a free slot
//! with an entry naming the block and the tid. The paper leaves persistence order open; here
//! it is exact:
//!
//! 1. Each block's data and entry are stored into a free slot (its old state word first set
//!    FREE if it named something), the lines flushed, then a **fence**.
//! 2. The commit word (the highest committed tid, alone on its cache line) is stored,
//!    flushed, fenced: **the commit point**. Syncs return after it. Recovery ignores every
//!    entry above the commit word, so a crash before it leaves the previous state whole.
//! 3. Only then are the older copies of those blocks free for reuse (section 3.2 "keeps track
//!    of the previous block as an old-commit block ... may be released immediately at this
//!    point" — during the commit, which would lose the only committed copy if the commit
//!    then failed; the early reclamation of section 4 happens here instead, after the commit
//!    point). Reusing one needs no store first: its entry is outranked by the newer one.
//!
//! A block freed (or written in place while it has a frozen copy) gets a **tombstone** entry
//! in the transaction that revokes it, so nothing older is ever replayed over it.
//!
//! Checkpoint is the core's (one home write of each block's newest committed version,
//! section 3.2 and Figure 5); its release stage marks the released blocks' newest entries
//! CLEAN and every older entry of those blocks FREE, with a fence, before any of those slots
//! is reused. A clean or tombstone entry outranks older copies of its block, so the order of
//! the stores inside that stage does not matter; what matters is that the older entries are
//! durably FREE before the newest one can disappear (a reused slot) — else an older frozen
//! copy would come back to life.
//!
//! Recovery ([`analyze`]) reads the table, not a log: the decision table is on that function.

use crate::ids::HomeBlock;
use crate::faults::Faults;
use super::{BlockImage, Defaults, Extent, Kept, Parking, Placement, Records, Recovery, SlotCopy, Stage, TableReplay};
use crate::det::HashMap;
use crate::format::nvm::{self as nf, Entry, EntryRead, NvmHeader, SlotState};
use crate::journal::plan::{BlockKind, NvmBytes, NvmOp};
use crate::journal::transaction::Tid;

#[derive(Debug, Clone, Copy)]
struct Slot {
    /// What the slot's entry in NVM names (durably, or about to be).
    block: HomeBlock,
    tid: Tid,
    state: SlotState,
    /// May be taken by a new copy (free, superseded by a committed copy, or released).
    reusable: bool,
}

/// Slots a checkpoint for space frees at least per step, while the pool is not short.
const CHECKPOINT_STEP_SLOTS: u64 = 1024;

const FREE_SLOT: Slot = Slot { block: HomeBlock::NONE, tid: Tid::ZERO, state: SlotState::Free, reusable: true };

#[derive(Debug)]
pub struct NvmSlots {
    h: NvmHeader,
    slots: Vec<Slot>,
    /// Reusable slots, taken from the end (the most recently freed first).
    free: Vec<u32>,
    /// Each block's newest committed entry.
    newest: HashMap<HomeBlock, u32>,
    /// Every slot whose entry names a block (the newest and outranked older ones).
    named: HashMap<HomeBlock, Vec<u32>>,
    /// The commit in flight: its tid and the slots it filled.
    committing: Option<(Tid, Vec<(HomeBlock, u32)>)>,
    /// The canaries this one honours ([`Faults`], test-only).
    pub faults: Faults,
    /// Opened after a crash: what recovery decided from the table ([`NvmSlots::recovering`]).
    recovering: Option<Recovering>,
}

/// The table as a crash left it, and what recovery does with it.
#[derive(Debug)]
struct Recovering {
    decided: TableRecovery,
    commit_word: Tid,
    /// The journal continues at or above this (the journal superblock's sequence, at least).
    floor: Tid,
    /// A read-only mount writes the copies to its in-memory overlay and leaves the table.
    read_only: bool,
    /// How long reading the table took (for the report).
    read_ns: u64,
}

impl NvmSlots {
    /// A placement over an empty table (every entry FREE: after [`analyze`] and its stores).
    pub fn new(h: NvmHeader) -> Self {
        let n = h.slots as usize;
        NvmSlots {
            h,
            slots: vec![FREE_SLOT; n],
            free: (0..n as u32).rev().collect(),
            newest: HashMap::default(),
            named: HashMap::default(),
            committing: None,
            faults: Faults::default(),
            recovering: None,
        }
    }

    /// The placement over a table as the last mount left it (`commit_word` and the table's
    /// bytes, read at open): recovery's decisions ([`analyze`]) are made now, and
    /// [`Placement::recovery`] hands them to recovery; its recovered stage empties the table
    /// (none with `read_only`). `floor`: the journal continues at or above it.
    pub fn recovering(h: NvmHeader, commit_word: Tid, table: &[u8], fs_blocks: u64, floor: Tid, read_only: bool) -> Result<Self, crate::format::FormatError> {
        let decided = analyze(&h, commit_word, table, fs_blocks)?;
        let mut p = NvmSlots::new(h);
        p.recovering = Some(Recovering { decided, commit_word, floor, read_only, read_ns: 0 });
        Ok(p)
    }

    /// Records how long reading the table took (recovery's report gives it as its scan time).
    pub fn read_in(mut self, ns: u64) -> Self {
        if let Some(r) = &mut self.recovering {
            r.read_ns = ns;
        }
        self
    }

    /// The tid the journal continues with, at least (after recovery: above every tid the
    /// table names).
    pub fn floor(&self) -> Tid {
        self.recovering.as_ref().map_or(Tid::new(1), |r| r.floor.max(r.decided.next_tid.max(Tid::new(1))))
    }

    pub fn header(&self) -> &NvmHeader {
        &self.h
    }

    /// Slots holding frozen (committed, not yet home) copies.
    pub fn frozen(&self) -> u64 {
        self.slots.iter().filter(|s| s.state == SlotState::Frozen && !s.reusable).count() as u64
    }

    fn state_store(&self, ops: &mut Vec<NvmOp>, slot: u32, state: SlotState) {
        let at = self.h.entry_at(slot as u64) + nf::STATE_AT;
        ops.push(NvmOp::Store { at, data: NvmBytes::Small(nf::state_word(state).to_vec()), kind: None });
        ops.push(NvmOp::Flush { at, len: 8 });
    }

    /// Takes a reusable slot: its entry stops naming what it named (state word FREE first, so
    /// that a torn reuse never pairs the old fields with a new state).
    fn take(&mut self, ops: &mut Vec<NvmOp>) -> u32 {
        let s = self.free.pop().expect("admission keeps every transaction within free slots");
        let old = self.slots[s as usize];
        assert!(old.reusable, "slot {s} taken while still needed");
        if old.state != SlotState::Free {
            let at = self.h.entry_at(s as u64) + nf::STATE_AT;
            ops.push(NvmOp::Store { at, data: NvmBytes::Small(nf::state_word(SlotState::Free).to_vec()), kind: None });
            if let Some(v) = self.named.get_mut(&old.block) {
                v.retain(|&x| x != s);
                if v.is_empty() {
                    self.named.remove(&old.block);
                }
            }
            if self.newest.get(&old.block) == Some(&s) {
                self.newest.remove(&old.block);
            }
        }
        self.slots[s as usize] = Slot { reusable: false, ..FREE_SLOT };
        s
    }

    /// Fills slot `s` with `entry` (and `data`): fields, then the state word, in one line.
    fn fill(&mut self, ops: &mut Vec<NvmOp>, s: u32, entry: Entry, data: Option<(std::sync::Arc<Vec<u8>>, BlockKind)>) {
        let at = self.h.entry_at(s as u64);
        if let Some((d, kind)) = data {
            ops.push(NvmOp::Store { at: self.h.data_at(s as u64), data: NvmBytes::Block(d), kind: Some(kind) });
            ops.push(NvmOp::Flush { at: self.h.data_at(s as u64), len: self.h.block_size as u64 });
        }
        ops.push(NvmOp::Store { at, data: NvmBytes::Small(entry.encode_fields(s as u64).to_vec()), kind: None });
        ops.push(NvmOp::Store { at: at + nf::STATE_AT, data: NvmBytes::Small(nf::state_word(entry.state).to_vec()), kind: None });
        ops.push(NvmOp::Flush { at, len: nf::ENTRY_SIZE });
        self.slots[s as usize] = Slot { block: entry.block, tid: entry.tid, state: entry.state, reusable: false };
        self.named.entry(entry.block).or_default().push(s);
    }

    fn supersede(&mut self, s: u32) {
        let slot = &mut self.slots[s as usize];
        if !slot.reusable {
            slot.reusable = true;
            self.free.push(s);
        }
    }

    /// The newest entries released by a checkpoint that keeps `kept`, in a fixed order.
    fn released_blocks(&self, kept: Kept) -> Vec<(HomeBlock, u32)> {
        let upto = kept.oldest.map_or(kept.next_tid, |(t, _)| t);
        let mut v: Vec<(HomeBlock, u32)> = self.newest.iter().filter(|(_, &s)| !self.slots[s as usize].reusable && self.slots[s as usize].tid < upto).map(|(&b, &s)| (b, s)).collect();
        v.sort_unstable();
        v
    }
}

impl Placement for NvmSlots {
    fn name(&self) -> &'static str {
        "nvm"
    }

    fn capacity(&self) -> u64 {
        self.h.slots
    }

    /// Frozen slots go on serving as cache: blocks stay there 300 s unless space runs low
    /// (UBJ's checkpoint period, docs/JOURNALING.md).
    fn defaults(&self) -> Defaults {
        Defaults { expire: std::time::Duration::from_secs(300), ..Defaults::default() }
    }

    fn free_blocks(&self) -> u64 {
        self.free.len() as u64
    }

    /// A slot per block the transaction logs (records and differential metadata included:
    /// the slot holds the whole block) and one per revoke (a tombstone).
    fn tx_cost(&self, _journal_blocks: u64, units: u64, revokes: u64) -> u64 {
        units + revokes
    }

    /// The paper's trigger (section 4): frozen slots above a quarter of the pool; or too few
    /// free for the largest transaction.
    fn space_low(&self, max_tx: u64) -> bool {
        let used = self.h.slots - self.free.len() as u64;
        used > self.h.slots / 4 || (self.free.len() as u64) < max_tx
    }

    /// A checkpoint frees slots in bounded steps while the pool is not short (commits go on
    /// between the steps instead of waiting behind one long write-back), everything when it
    /// is.
    fn checkpoint_target(&self) -> u64 {
        let free = self.free.len() as u64;
        if free < self.h.slots / 2 {
            self.h.slots
        } else {
            free + CHECKPOINT_STEP_SLOTS
        }
    }

    fn place(&mut self, records: Records) -> (Stage, Extent) {
        assert!(self.committing.is_none(), "one commit at a time");
        let tid = records.tid;
        let mut ops = Vec::new();
        if self.faults.nvm_free_early {
            for BlockImage { block: b, .. } in &records.images {
                if let Some(&s) = self.newest.get(b) {
                    self.supersede(s);
                }
            }
        }
        let mut placed = Vec::with_capacity(records.images.len() + records.revoked.len());
        for &b in &records.revoked {
            // Only a frozen copy could replay; a clean one never does.
            let frozen = self.newest.get(&b).is_some_and(|&s| self.slots[s as usize].state == SlotState::Frozen);
            if frozen {
                let s = self.take(&mut ops);
                self.fill(&mut ops, s, Entry { block: b, tid, data_crc: 0, state: SlotState::Tombstone }, None);
                placed.push((b, s));
            }
        }
        for BlockImage { block: b, data, kind } in records.images {
            let s = self.take(&mut ops);
            let data_crc = nf::data_crc(b, &data);
            self.fill(&mut ops, s, Entry { block: b, tid, data_crc, state: SlotState::Frozen }, Some((data, kind)));
            placed.push((b, s));
        }
        if !self.faults.nvm_no_fence {
            ops.push(NvmOp::Fence);
        }
        ops.push(NvmOp::Store { at: nf::COMMIT_WORD_AT, data: NvmBytes::Small(nf::commit_word(tid).to_vec()), kind: Some(BlockKind::Commit) });
        ops.push(NvmOp::Flush { at: nf::COMMIT_WORD_AT, len: 8 });
        ops.push(NvmOp::Fence);
        let n = placed.len() as u64;
        self.committing = Some((tid, placed));
        (Stage { nvm: ops, ..Stage::default() }, Extent { start: tid.get(), end: tid.get() + 1, blocks: n })
    }

    /// Past the commit point: the new copies are the newest, the older ones free for reuse.
    fn on_durable(&mut self, tid: Tid) {
        let (t, placed) = self.committing.take().expect("a commit in flight");
        assert_eq!(t, tid, "the commit that completed is the one placed");
        for (b, s) in placed {
            if let Some(old) = self.newest.insert(b, s) {
                debug_assert!(self.slots[old as usize].tid < tid);
                self.supersede(old);
            }
        }
    }

    /// Released blocks' newest entries become CLEAN (tombstones stay), their older entries
    /// FREE, then a fence: all before any of those slots is reused.
    fn release_stage(&self, kept: Kept) -> Stage {
        let mut ops = Vec::new();
        for (b, s) in self.released_blocks(kept) {
            if self.slots[s as usize].state == SlotState::Frozen {
                self.state_store(&mut ops, s, SlotState::Clean);
            }
            for &o in self.named.get(&b).into_iter().flatten() {
                if o != s && self.slots[o as usize].state != SlotState::Free {
                    self.state_store(&mut ops, o, SlotState::Free);
                }
            }
        }
        if !ops.is_empty() {
            ops.push(NvmOp::Fence);
        }
        Stage { nvm: ops, ..Stage::default() }
    }

    fn released(&mut self, kept: Kept) {
        for (b, s) in self.released_blocks(kept) {
            if self.slots[s as usize].state == SlotState::Frozen {
                self.slots[s as usize].state = SlotState::Clean;
            }
            let others: Vec<u32> = self.named.get(&b).into_iter().flatten().copied().filter(|&o| o != s).collect();
            for o in others {
                let slot = &mut self.slots[o as usize];
                assert!(slot.reusable, "an outranked copy is already reusable");
                slot.state = SlotState::Free;
            }
            self.named.insert(b, vec![s]);
            self.supersede(s);
        }
    }

    fn mount_stage(&self, _kept: Kept) -> Stage {
        Stage::default()
    }

    fn clean_stage(&self, _next_tid: Tid) -> Stage {
        Stage::default()
    }

    /// The copies the table names as each block's newest committed frozen one, decided at
    /// open (UBJ, section 3.4: the frozen copies are written home and the table emptied).
    fn recovery(&self) -> Recovery {
        let Some(r) = &self.recovering else { return Recovery::Logs(Vec::new()) };
        let d = &r.decided;
        let copies = d.replay.iter().map(|c| SlotCopy { block: c.block, slot: c.slot, at: self.h.data_at(c.slot), crc: c.data_crc }).collect();
        Recovery::Table(TableReplay {
            copies,
            marks: !r.read_only && !(d.free_first.is_empty() && d.free_then.is_empty()),
            report: d.needs_recovery(),
            last_tid: r.commit_word,
            tombstones: d.tombstones,
            slots_scanned: d.slots_scanned,
            summary: format!(
                "nvm slot table: {} slots, commit word {}: {} frozen written home, {} clean, {} tombstones, {} above the commit word dropped, {} torn",
                d.slots_scanned, r.commit_word, d.frozen, d.clean, d.tombstones, d.uncommitted, d.invalid
            ),
            next_tid: self.floor(),
            read_ns: r.read_ns,
        })
    }

    /// After the copies are home and flushed: every entry FREE, in two fenced steps, outranked
    /// entries first (see [`analyze`]). A read-only mount leaves the table as it is.
    fn recovered_stage(&self, _next_tid: Tid) -> Stage {
        let mut nvm = Vec::new();
        if let Some(r) = self.recovering.as_ref().filter(|r| !r.read_only) {
            for step in [&r.decided.free_first, &r.decided.free_then] {
                if step.is_empty() {
                    continue;
                }
                for &slot in step {
                    self.state_store(&mut nvm, slot as u32, SlotState::Free);
                }
                nvm.push(NvmOp::Fence);
            }
        }
        Stage { nvm, ..Stage::default() }
    }

    /// Every entry is FREE now (or, read-only, the table is left and nothing is placed).
    fn recovered(&mut self, _next_tid: Tid, _kept: &[super::LoggedBlock]) {
        self.recovering = None;
    }

    fn parking(&self) -> Option<&dyn Parking> {
        Some(self)
    }

    fn parking_mut(&mut self) -> Option<&mut dyn Parking> {
        Some(self)
    }
}

/// Frozen slots serve as cache (UBJ, section 3): the DRAM cache may drop a committed block
/// while its slot holds it.
impl Parking for NvmSlots {
    /// A slot holds a whole block: `place` takes the committed blocks as images.
    fn wants_images(&self) -> bool {
        true
    }

    /// The newest committed copy, while it is frozen (UBJ: frozen blocks go on serving as
    /// cache). It stays in its slot until a newer commit of the block (which dirties, and so
    /// loads, the buffer first) or the checkpoint that releases it (which loads every parked
    /// buffer before it writes).
    fn frozen_copy(&self, block: HomeBlock) -> Option<u64> {
        let &s = self.newest.get(&block)?;
        let slot = &self.slots[s as usize];
        (slot.state == SlotState::Frozen && !slot.reusable).then(|| self.h.data_at(s as u64))
    }

    /// Slots are NVM, not blocks of a device: a checkpoint loads a parked block first.
    fn parks_on_device(&self) -> bool {
        false
    }
}

/// A block's newest committed copy frozen in a slot: recovery writes it home.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrozenCopy {
    pub block: HomeBlock,
    pub slot: u64,
    /// The CRC32C of the slot's data its entry records.
    pub data_crc: u32,
}

/// What recovery does with an NVM slot table ([`analyze`]).
#[derive(Debug, Default)]
pub struct TableRecovery {
    /// Blocks to write home, in block order.
    pub replay: Vec<FrozenCopy>,
    /// Entries to set FREE first (outranked, uncommitted, torn), then fence.
    pub free_first: Vec<u64>,
    /// Then these (each block's newest entry), then fence: the table is empty.
    pub free_then: Vec<u64>,
    pub slots_scanned: u64,
    /// Committed entries that were their block's newest: frozen (replayed), clean, tombstones.
    pub frozen: u64,
    pub clean: u64,
    pub tombstones: u64,
    /// Entries above the commit word (a commit that did not complete).
    pub uncommitted: u64,
    /// Entries that fail their checks (a slot torn while being reused).
    pub invalid: u64,
    /// The journal continues above every tid in the table.
    pub next_tid: Tid,
}

impl TableRecovery {
    /// The table holds what a crash left: frozen copies to write home, tombstones, entries of
    /// a commit that did not complete, or torn entries (clean entries alone need nothing).
    pub fn needs_recovery(&self) -> bool {
        self.frozen > 0 || self.tombstones > 0 || self.uncommitted > 0 || self.invalid > 0
    }
}

/// Recovery's decision, from the commit word and the slot table (no I/O). One row per entry:
///
/// | entry read                                   | decision                                        |
/// |----------------------------------------------|-------------------------------------------------|
/// | state FREE                                   | nothing                                         |
/// | unknown state word, or CRC mismatch          | torn reuse: names nothing; set FREE first        |
/// | valid, tid above the commit word             | a commit that did not complete: set FREE first   |
/// | valid, block outside the file system         | error: corrupt (no crash writes that)            |
/// | valid, committed, not its block's newest     | outranked: set FREE first                        |
/// | two committed entries of one block and tid   | error: corrupt                                  |
/// | newest of its block, FROZEN                  | write its data home (data CRC checked: a mismatch is damage, an error); then FREE |
/// | newest of its block, CLEAN or TOMBSTONE      | nothing to write; then FREE                      |
///
/// Everything is set FREE in two fenced steps, outranked entries before the newest ones, so a
/// crash in between never lets an older copy win; recovery after any crash inside recovery
/// finds either the same table or a subset with the same winners (idempotent).
pub fn analyze(h: &NvmHeader, commit_word: Tid, table: &[u8], fs_blocks: u64) -> Result<TableRecovery, crate::format::FormatError> {
    // Tids count commits: nothing reaches 2^62 (a commit a nanosecond for a century is 2^62).
    const TID_LIMIT: Tid = Tid::new(1 << 62);
    if commit_word >= TID_LIMIT {
        return Err(crate::format::invalid("nvm commit word", format!("{commit_word} is not a tid (damaged NVM)")));
    }
    let mut r = TableRecovery { slots_scanned: h.slots, ..Default::default() };
    let mut best: HashMap<HomeBlock, (u64, Entry)> = HashMap::default();
    let mut max_tid = commit_word;
    for slot in 0..h.slots {
        let at = (slot * nf::ENTRY_SIZE) as usize;
        match Entry::decode(slot, &table[at..at + nf::ENTRY_SIZE as usize]) {
            EntryRead::Free => {}
            EntryRead::Invalid => {
                r.invalid += 1;
                r.free_first.push(slot);
            }
            EntryRead::Valid(e) if e.tid >= TID_LIMIT => {
                return Err(crate::format::invalid("nvm slot table", format!("slot {slot} carries tid {}, not a tid (damaged NVM)", e.tid)));
            }
            EntryRead::Valid(e) => {
                max_tid = max_tid.max(e.tid);
                if e.tid > commit_word {
                    r.uncommitted += 1;
                    r.free_first.push(slot);
                    continue;
                }
                if e.block.get() >= fs_blocks {
                    return Err(crate::format::invalid("nvm slot table", format!("slot {slot} names block {} outside the file system ({fs_blocks} blocks)", e.block)));
                }
                match best.get(&e.block) {
                    Some((_, b)) if b.tid == e.tid => {
                        return Err(crate::format::invalid("nvm slot table", format!("two committed entries of block {} with tid {}", e.block, e.tid)));
                    }
                    Some((old, b)) if b.tid > e.tid => {
                        let _ = old;
                        r.free_first.push(slot);
                    }
                    Some(&(old, _)) => {
                        r.free_first.push(old);
                        best.insert(e.block, (slot, e));
                    }
                    None => {
                        best.insert(e.block, (slot, e));
                    }
                }
            }
        }
    }
    let mut winners: Vec<(HomeBlock, (u64, Entry))> = best.into_iter().collect();
    winners.sort_unstable_by_key(|(b, _)| *b);
    for (block, (slot, e)) in winners {
        match e.state {
            SlotState::Frozen => {
                r.frozen += 1;
                r.replay.push(FrozenCopy { block, slot, data_crc: e.data_crc });
            }
            SlotState::Clean => r.clean += 1,
            SlotState::Tombstone => r.tombstones += 1,
            SlotState::Free => unreachable!("free entries are not candidates"),
        }
        r.free_then.push(slot);
    }
    r.free_first.sort_unstable();
    r.next_tid = max_tid + 1;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::placement::Placement;
    use std::sync::Arc;

    /// Applies a stage's stores to a byte image (every store persisted).
    fn apply(img: &mut [u8], ops: &[NvmOp]) {
        for op in ops {
            if let NvmOp::Store { at, data, .. } = op {
                let d = data.as_slice();
                img[*at as usize..*at as usize + d.len()].copy_from_slice(d);
            }
        }
    }

    fn setup(slots: u64) -> (NvmHeader, NvmSlots, Vec<u8>) {
        let len = 8192 + slots * 4096;
        let h = NvmHeader::layout(len, 4096, [1; 16]).unwrap();
        assert_eq!(h.slots, slots);
        let img = vec![0u8; len as usize];
        (h, NvmSlots::new(h), img)
    }

    fn commit(p: &mut NvmSlots, img: &mut [u8], tid: Tid, blocks: &[(u64, u8)], revoked: &[u64]) {
        let images = blocks.iter().map(|&(b, v)| BlockImage { block: HomeBlock::new(b), data: Arc::new(vec![v; 4096]), kind: BlockKind::JournalData }).collect();
        let (stage, _) = p.place(Records { tid, blocks: Vec::new(), images, revoked: revoked.iter().map(|&b| HomeBlock::new(b)).collect(), logged: Vec::new(), near: None });
        apply(img, &stage.nvm);
        p.on_durable(tid);
    }

    fn recover(h: &NvmHeader, img: &[u8]) -> TableRecovery {
        let cw = Tid::new(u64::from_le_bytes(img[64..72].try_into().unwrap()));
        analyze(h, cw, &img[nf::TABLE_AT as usize..(nf::TABLE_AT + h.slots * nf::ENTRY_SIZE) as usize], 1 << 20).unwrap()
    }

    #[test]
    fn the_newest_committed_copy_wins_and_tombstones_stop_older_ones() {
        let (h, mut p, mut img) = setup(16);
        commit(&mut p, &mut img, Tid::new(1), &[(100, 1), (200, 1)], &[]);
        commit(&mut p, &mut img, Tid::new(2), &[(100, 2)], &[]);
        commit(&mut p, &mut img, Tid::new(3), &[], &[200]);
        let r = recover(&h, &img);
        assert_eq!(r.replay.len(), 1, "{r:?}");
        let FrozenCopy { block, slot, .. } = r.replay[0];
        assert_eq!(block.get(), 100);
        assert_eq!(img[h.data_at(slot) as usize], 2, "block 100's newest version");
        assert_eq!(r.tombstones, 1);
        assert_eq!(r.next_tid, Tid::new(4));
    }

    #[test]
    fn entries_above_the_commit_word_are_ignored() {
        let (h, mut p, mut img) = setup(16);
        commit(&mut p, &mut img, Tid::new(1), &[(100, 1)], &[]);
        // Tid 2's slots stored, the commit word not.
        let images = vec![BlockImage { block: HomeBlock::new(100), data: Arc::new(vec![2u8; 4096]), kind: BlockKind::JournalData }];
        let (stage, _) = p.place(Records { tid: Tid::new(2), blocks: Vec::new(), images, revoked: vec![], logged: Vec::new(), near: None });
        let upto = stage.nvm.iter().position(|op| matches!(op, NvmOp::Store { at, .. } if *at == nf::COMMIT_WORD_AT)).unwrap();
        apply(&mut img, &stage.nvm[..upto]);
        let r = recover(&h, &img);
        assert_eq!(r.uncommitted, 1);
        assert_eq!(r.replay.len(), 1);
        assert_eq!(img[h.data_at(r.replay[0].slot) as usize], 1);
        assert_eq!(r.next_tid, Tid::new(3), "beyond the uncommitted tid too");
    }

    #[test]
    fn release_marks_clean_and_frees_older_copies_before_reuse() {
        let (h, mut p, mut img) = setup(8);
        commit(&mut p, &mut img, Tid::new(1), &[(100, 1)], &[]);
        commit(&mut p, &mut img, Tid::new(2), &[(100, 2)], &[]);
        let kept = Kept { oldest: None, next_tid: Tid::new(3), home: None };
        let stage = p.release_stage(kept);
        apply(&mut img, &stage.nvm);
        p.released(kept);
        assert_eq!(p.free_blocks(), 8, "everything reusable after the release");
        let r = recover(&h, &img);
        assert!(r.replay.is_empty() && r.clean == 1, "{r:?}");
        // Reusing every slot never brings the old copy back.
        commit(&mut p, &mut img, Tid::new(3), &(0..8).map(|i| (500 + i, 3)).collect::<Vec<_>>(), &[]);
        let r = recover(&h, &img);
        assert!(r.replay.iter().all(|c| c.block.get() >= 500), "{r:?}");
    }

    #[test]
    fn absurd_tids_are_damage_not_a_panic() {
        let (h, mut p, mut img) = setup(8);
        commit(&mut p, &mut img, Tid::new(1), &[(100, 1)], &[]);
        let table = |img: &[u8]| img[nf::TABLE_AT as usize..(nf::TABLE_AT + h.slots * nf::ENTRY_SIZE) as usize].to_vec();
        assert!(analyze(&h, Tid::new(u64::MAX), &table(&img), 1 << 20).is_err());
        let e = Entry { block: HomeBlock::new(7), tid: Tid::new(u64::MAX), data_crc: 0, state: SlotState::Tombstone };
        let at = h.entry_at(3) as usize;
        img[at..at + 24].copy_from_slice(&e.encode_fields(3));
        img[at + 24..at + 32].copy_from_slice(&nf::state_word(SlotState::Tombstone));
        assert!(analyze(&h, Tid::new(1), &table(&img), 1 << 20).is_err());
    }

    /// Random tables and commit words: recovery's decision is an answer or an error, never a
    /// panic (the decoders are bounded; tids, blocks and states are checked).
    #[test]
    fn analyze_never_panics_on_garbage() {
        let (h, _, _) = setup(16);
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut ok, mut err) = (0, 0);
        for round in 0..2000 {
            let mut table = vec![0u8; (h.slots * nf::ENTRY_SIZE) as usize];
            for (i, b) in table.iter_mut().enumerate() {
                *b = if round % 2 == 0 && i % 32 >= 24 { (next() % 4) as u8 * (i % 32 == 24) as u8 } else { next() as u8 };
            }
            // Half the rounds: entries with valid CRCs and random fields.
            if round % 2 == 0 {
                for slot in 0..h.slots {
                    let e = Entry { block: HomeBlock::new(next() % 2048), tid: Tid::new(next() % 64), data_crc: next() as u32, state: SlotState::Frozen };
                    let at = (slot * nf::ENTRY_SIZE) as usize;
                    table[at..at + 24].copy_from_slice(&e.encode_fields(slot));
                }
            }
            match analyze(&h, Tid::new(next() % 80), &table, 1024) {
                Ok(r) => {
                    ok += 1;
                    assert!(r.replay.iter().all(|c| c.block.get() < 1024 && c.slot < h.slots), "replays only blocks inside the file system, from real slots");
                }
                Err(_) => err += 1,
            }
        }
        assert!(ok > 100 && err > 100, "both answers seen: {ok} decided, {err} refused");
    }

    #[test]
    fn cost_and_triggers() {
        let (_, p, _) = setup(64);
        assert_eq!(p.tx_cost(99, 5, 2), 7);
        assert!(!p.space_low(8));
        assert_eq!(p.checkpoint_target(), 64 + CHECKPOINT_STEP_SLOTS, "a bounded step while the pool is not short");
    }
}

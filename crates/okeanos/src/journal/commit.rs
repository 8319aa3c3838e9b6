//! Commit: write a transaction's blocks to the log (thesis section 3.2; jbd2 commit.c).
//!
//! The commit closes the running transaction, opens the next one, freezes the contents of
//! every block it owns (an `Arc` clone, copied on the next write) and lays the transaction out
//! in the log:
//!
//! ```text
//!   [revoke ...][descriptor][block ...][descriptor][block ...] ... [commit]
//! ```
//!
//! A small transaction of records alone is one **fast commit** block instead: its tags, its
//! record stream and its commit, checked by one hash over the block (`fast_commit`).
//!
//! The commit record carries a CRC over all the blocks before it, so the whole transaction is
//! written in one batch followed by one flush of the log device: a torn or missing block fails
//! the check at recovery and the transaction is discarded whole. Under `ordered` the data
//! blocks are written and flushed first, in a stage of their own; under `writeback` they go in
//! the same batch as the journal blocks.
//!
//! While the commit's I/O is in flight, new handles run in the next transaction: concurrent
//! syncs share that next commit (group commit).
//!
//! # Pipelined commits
//!
//! A commit is two phases: its writes, then the flush that makes them durable. The runtime may
//! report the writes done before the flush ([`Journal::commit_written`]) and start the next
//! commit's writes while that flush is in flight (`commit_pipeline=`); several flushes may be
//! in flight at once, each issued after the writes it covers completed. A transaction is
//! durable, and finished ([`Journal::commit_finish`], oldest first), once a flush issued after
//! its writes completed returns: a later commit's flush covers every earlier commit's writes,
//! so durability always advances as a prefix of the log. Until then nothing depends on it
//! being durable: its syncs wait, its freed blocks stay allocated (a reuse written in place
//! must not overwrite a block whose free may still be lost), no checkpoint writes its blocks
//! home and the log's tail stays behind it. A crash with flushes in flight loses only
//! transactions whose syncs were not answered; recovery stops at the first one whose blocks
//! did not all land, as for a single commit.

use crate::ids::{DevBlock, HomeBlock};
use super::placement::{BlockImage, Extent, LoggedBlockCopy, Records, WholeImage};
use super::plan::{BlockKind, DevId, IoPlan, IoWrite};
use super::transaction::{Tid, Transaction, TxState};
use super::{Journal, LoggedTx};
use crate::cache::Cache;
use crate::format::journal::{self as jf, CommitBlock, Descriptor, RevokeBlock, Tag};
use std::sync::Arc;

/// The transaction whose commit I/O is in flight.
#[derive(Debug)]
pub struct Committing {
    pub tx: Transaction,
    /// Where the placement put it.
    pub at: Extent,
    /// The frozen contents written to the log.
    pub journaled: Vec<(HomeBlock, Arc<Vec<u8>>)>,
    /// Blocks this transaction logged only as multiwrite records.
    pub partial: crate::det::HashSet<HomeBlock>,
    /// Blocks this transaction logged whole.
    pub whole: crate::det::HashSet<HomeBlock>,
    /// Its journal blocks (shared with the plan): a placement that falls back places them
    /// again elsewhere (`journal/fallback.rs`).
    pub records: Vec<(Arc<Vec<u8>>, BlockKind)>,
}

/// What a commit asks the runtime to do, and what it did, for the counters.
#[derive(Debug)]
pub struct CommitPlan {
    pub tid: Tid,
    pub io: IoPlan,
    pub journal_blocks: u64,
    pub handles: u32,
    pub records: RecordStats,
}

/// Multiwrite records of one commit.
#[derive(Debug, Default, Clone, Copy)]
pub struct RecordStats {
    pub records: u64,
    /// Record payload bytes.
    pub record_bytes: u64,
    /// Of those, bytes stored inline in descriptor blocks (or in a fast commit).
    pub inline_bytes: u64,
    /// The blocks of the fast commit the commit was (0: the classic form).
    pub fast_blocks: u32,
    /// Of the fast commit, the bytes that carry something ([`jf::FastCommit::carried_len`]):
    /// what batching for bytes learns a handle's share from.
    pub fast_bytes: u64,
    /// Data blocks written in place before the commit record (`final_data`).
    pub in_place: u64,
    /// Of those, written beside the commit under its flush (in-place tags).
    pub in_place_tagged: u64,
    /// Inode notes in the fast commit (docs/FORMAT.md, "Inode notes").
    pub notes: u64,
    /// Differential metadata blocks whose changes were joined into fewer records (`fit_ranges`).
    pub joined: u64,
}

/// What a finished commit released to the allocator.
#[derive(Debug, Default)]
pub struct CommitDone {
    pub tid: Tid,
    pub freed_blocks: Vec<HomeBlock>,
    pub freed_inodes: Vec<u32>,
}

/// A differential metadata block is logged as at most this many records: a block changed
/// in more places has its closest ranges joined (`fit_ranges`), and is logged whole only if
/// the records would still take half a block.
pub const MAX_DIFF_RANGES: usize = 32;
/// Differing bytes closer than this are logged as one range (a tag costs 16 bytes).
const DIFF_GAP: usize = 16;

/// One thing a transaction logs.
enum Item {
    /// A whole block (metadata, a fully written data block, or a metadata block logged whole).
    Full { block: HomeBlock, data: Arc<Vec<u8>>, flags: u16 },
    /// A multiwrite record: `len` bytes at `offset` of the final block, read from the block's
    /// frozen version `data` when the record is written (no copy of its own).
    Record { block: HomeBlock, offset: u32, len: u32, data: Arc<Vec<u8>>, flags: u16 },
    /// An inode's change told as a note (a fast commit's), or, in the classic form or a fast
    /// commit with no record to carry it, as `record`: the inode's first 32 bytes.
    Note { note: jf::InodeNote, record: Box<Item> },
    /// A new block written home beside the commit, under its flush: an in-place tag with the
    /// hash of the block as written (docs/FORMAT.md, "In-place tags").
    InPlace { block: HomeBlock, hash: u32 },
}

impl Item {
    fn block(&self) -> HomeBlock {
        match self {
            Item::Full { block, .. } | Item::Record { block, .. } | Item::InPlace { block, .. } => *block,
            Item::Note { record, .. } => record.block(),
        }
    }

    /// A record's bytes (empty for other items).
    fn bytes(&self) -> &[u8] {
        match self {
            Item::Record { offset, len, data, .. } => &data[*offset as usize..(*offset + *len) as usize],
            _ => &[],
        }
    }

    /// The record form of a note; other items as they are.
    fn as_record(&self) -> &Item {
        match self {
            Item::Note { record, .. } => record,
            other => other,
        }
    }
}

/// Byte ranges where `new` differs from `old` (a block and its base: the same length),
/// merging ranges closer than [`DIFF_GAP`]. Equal stretches are skipped eight bytes at a time:
/// a commit diffs every metadata block it logs, and byte by byte this took some 8% of the
/// journal thread's CPU at 100 streams (docs/BENCHMARKS.md, "Diffs a word at a time").
fn diff_ranges(old: &[u8], new: &[u8]) -> Vec<(usize, usize)> {
    let n = new.len();
    let word = |b: &[u8], i: usize| u64::from_ne_bytes(b[i..i + 8].try_into().expect("eight bytes"));
    let mut out: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < n {
        while i + 8 <= n && word(old, i) == word(new, i) {
            i += 8;
        }
        // Within eight bytes of a difference, or in the last seven bytes.
        while i < n && old[i] == new[i] {
            i += 1;
        }
        if i == n {
            break;
        }
        let start = i;
        while i < n && old[i] != new[i] {
            i += 1;
        }
        match out.last_mut() {
            Some(last) if start - last.1 < DIFF_GAP => last.1 = i,
            _ => out.push((start, i)),
        }
    }
    out
}

/// `ranges` (sorted, disjoint) joined into at most `max` ranges by closing the smallest gaps
/// between neighbours (the earlier gap first among equals): every byte of `ranges` stays
/// covered, with the fewest unchanged bytes added. A joined range logs bytes this transaction
/// did not change: their replay writes the value they already had, as [`DIFF_GAP`]'s joins do.
fn fit_ranges(ranges: Vec<(usize, usize)>, max: usize) -> Vec<(usize, usize)> {
    if ranges.len() <= max || max == 0 {
        return ranges;
    }
    // Gap k lies between ranges k and k + 1; close the len - max smallest.
    let mut gaps: Vec<(usize, usize)> = ranges.windows(2).enumerate().map(|(k, w)| (w[1].0 - w[0].1, k)).collect();
    gaps.sort_unstable();
    let mut closed = vec![false; ranges.len()];
    for &(_, k) in &gaps[..ranges.len() - max] {
        closed[k] = true;
    }
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(max);
    let mut join = false;
    for (k, r) in ranges.into_iter().enumerate() {
        match out.last_mut() {
            Some(last) if join => last.1 = r.1,
            _ => out.push(r),
        }
        join = closed[k];
    }
    out
}

impl Journal {
    /// What the transaction logs, in block order: whole blocks and multiwrite records.
    /// Also returns how many differential metadata blocks had their changes joined.
    fn collect_items(&self, tx: &Transaction, frozen: &crate::det::HashMap<HomeBlock, Arc<Vec<u8>>>, wall_ns: i64) -> (Vec<Item>, u64) {
        let bs = self.cfg.block_size;
        let mut joined = 0;
        let mut items = Vec::with_capacity(tx.journaled.len() + tx.record_count as usize);
        for &b in &tx.journaled {
            let data = frozen[&b].clone();
            let meta = !tx.journaled_data.contains(&b);
            let flags = if meta { jf::tag_flags::METADATA } else { 0 };
            if let Some(base) = tx.meta_base.get(&b).filter(|_| meta) {
                let fresh = tx.fresh.contains(&b);
                let (notes, rest) = if fresh { (Vec::new(), None) } else { self.inode_notes(b, base, &data, wall_ns) };
                let rest = rest.as_deref().unwrap_or(&data);
                let all = diff_ranges(base, rest);
                let changed_in = all.len();
                let ranges = fit_ranges(all, MAX_DIFF_RANGES);
                let bytes: usize = ranges.iter().map(|(a, e)| e - a).sum::<usize>() + notes.len() * jf::NOTE_SIZE;
                if bytes + jf::TAG_SIZE * ranges.len() < bs / 2 && !(fresh && ranges.is_empty()) {
                    joined += (changed_in > ranges.len()) as u64;
                    let mut block_items: Vec<(usize, Item)> = Vec::with_capacity(ranges.len() + notes.len());
                    for (k, (a, e)) in ranges.into_iter().enumerate() {
                        let f = flags | jf::tag_flags::MULTIWRITE | if fresh && k == 0 { jf::tag_flags::FRESH } else { 0 };
                        block_items.push((a, Item::Record { block: b, offset: a as u32, len: (e - a) as u32, data: data.clone(), flags: f }));
                    }
                    for (at, note) in notes {
                        let f = flags | jf::tag_flags::MULTIWRITE;
                        let record = Box::new(Item::Record { block: b, offset: at as u32, len: crate::format::inode::NOTED_BYTES as u32, data: data.clone(), flags: f });
                        block_items.push((at, Item::Note { note, record }));
                    }
                    // In offset order, as the records of one block are.
                    block_items.sort_by_key(|(at, _)| *at);
                    items.extend(block_items.into_iter().map(|(_, i)| i));
                    continue;
                }
            }
            items.push(Item::Full { block: b, data, flags });
        }
        for (&b, ranges) in &tx.ranges {
            let data = &frozen[&b];
            let fresh = tx.fresh.contains(&b);
            for (k, (a, e)) in ranges.iter().enumerate() {
                let f = jf::tag_flags::MULTIWRITE | if fresh && k == 0 { jf::tag_flags::FRESH } else { 0 };
                items.push(Item::Record { block: b, offset: a, len: e - a, data: data.clone(), flags: f });
            }
        }
        // Stable: records of one block stay in offset order, after nothing else of that block.
        items.sort_by_key(Item::block);
        (items, joined)
    }

    /// The inodes of inode-table block `b` whose change from `base` to `data` a note can tell
    /// (docs/FORMAT.md, "Inode notes"), each with its byte offset in the block, and the block
    /// with those inodes as `base` has them (what is left for records), when there are any.
    fn inode_notes(&self, b: HomeBlock, base: &[u8], data: &[u8], wall_ns: i64) -> (Vec<(usize, jf::InodeNote)>, Option<Vec<u8>>) {
        let Some(first) = self.cfg.inode_notes.as_ref().and_then(|t| t.first_ino(b)) else {
            return (Vec::new(), None);
        };
        use crate::format::inode::{note_for, INODE_SIZE};
        let mut notes = Vec::new();
        let mut rest: Option<Vec<u8>> = None;
        for (k, at) in (0..data.len().min(base.len())).step_by(INODE_SIZE).enumerate() {
            let (old, new) = (&base[at..at + INODE_SIZE], &data[at..at + INODE_SIZE]);
            let ino = first + k as u32;
            if let Some((size, age_ns)) = note_for(ino, old, new, wall_ns) {
                notes.push((at, jf::InodeNote { ino, age_ns, size }));
                rest.get_or_insert_with(|| data.to_vec())[at..at + INODE_SIZE].copy_from_slice(old);
            }
        }
        (notes, rest)
    }

    /// Starts committing the running transaction. `None` if it has no handles.
    pub fn commit_begin(&mut self, cache: &mut Cache, wall_ns: i64) -> Option<CommitPlan> {
        assert!(self.committing.is_none(), "one commit at a time");
        if self.running.is_empty() || self.aborted.is_some() {
            return None;
        }
        let next = Transaction::new(self.running.tid + 1);
        let mut tx = std::mem::replace(&mut self.running, next);
        tx.lock();
        tx.start_commit();
        // New blocks written in place go beside the commit under its flush, named by in-place
        // tags, where the journal and the policy allow it and all of them are new to this
        // transaction (docs/FORMAT.md, "In-place tags"); else before the commit, flushed first.
        let tagged = self.in_place_tagged(&tx);
        let beside = tagged > 0 && tx.final_data.iter().all(|b| tx.fresh.contains(b));
        let size = self.tx_blocks_tagged(tx.units(), tagged, tx.revoked.len() as u64);
        assert!(size <= self.free_blocks(), "admission keeps every transaction within free log space");

        let bs = self.cfg.block_size;
        let mut w = RecordsWriter { hash: jf::tx_hash_seed(tx.tid), blocks: Vec::with_capacity(size as usize) };

        // Revoke records (jbd2 writes them first as well).
        let revoked: Vec<HomeBlock> = tx.revoked.iter().copied().collect();
        for chunk in revoked.chunks(RevokeBlock::capacity(bs)) {
            let mut b = vec![0u8; bs];
            RevokeBlock { tid: tx.tid, blocks: chunk.to_vec() }.encode(&mut b);
            w.push(Arc::new(b), BlockKind::Revoke);
        }

        // Freeze every logged block (an Arc clone: a later write copies).
        let journaled: Vec<(HomeBlock, Arc<Vec<u8>>)> = tx
            .journaled
            .iter()
            .chain(tx.ranges.keys())
            .map(|&b| (b, cache.peek(b).expect("a block in a transaction stays cached").data.clone()))
            .collect();
        let frozen: crate::det::HashMap<HomeBlock, Arc<Vec<u8>>> = journaled.iter().cloned().collect();
        let (mut items, joined) = self.collect_items(&tx, &frozen, wall_ns);
        if beside {
            for &b in &tx.final_data {
                let hash = jf::data_hash(b, 0, &cache.peek(b).expect("in-place data stays cached").data);
                items.push(Item::InPlace { block: b, hash });
            }
            // Stable: a block is either in place or logged within one transaction.
            items.sort_by_key(Item::block);
        }
        let partial: crate::det::HashSet<HomeBlock> = items.iter().filter_map(|i| if let Item::Record { block, .. } = i.as_record() { Some(*block) } else { None }).collect();
        let whole: crate::det::HashSet<HomeBlock> = items.iter().filter_map(|i| if let Item::Full { block, .. } = i { Some(*block) } else { None }).collect();
        let mut stats = RecordStats { in_place: tx.final_data.len() as u64, in_place_tagged: if beside { tagged } else { 0 }, joined, ..Default::default() };
        let mut logged = Vec::with_capacity(items.len());
        if !self.fast_commit(&mut w, &tx, &items, wall_ns, &mut stats, &mut logged) {
            for group in items.chunks(Descriptor::capacity(bs)) {
                self.write_descriptor(&mut w, tx.tid, group, &mut stats, &mut logged);
            }
            let block_count = w.blocks.len() as u64;
            let mut c = vec![0u8; bs];
            CommitBlock { tid: tx.tid, block_count, tx_hash: w.hash, commit_time_ns: wall_ns, handle_count: tx.handles }.encode(&mut c);
            w.push(Arc::new(c), BlockKind::Commit);
        }
        assert!(w.blocks.len() as u64 <= self.log_blocks(tx.units(), tagged, tx.revoked.len() as u64), "layout within the reserved size");
        let records = w.blocks.clone();
        let images = if self.placement.parking().is_some_and(|p| p.wants_images()) {
            journaled
                .iter()
                .filter(|(b, _)| whole.contains(b) || partial.contains(b))
                .map(|(b, d)| BlockImage { block: *b, data: d.clone(), kind: if tx.journaled_data.contains(b) || tx.ranges.contains_key(b) { BlockKind::JournalData } else { BlockKind::JournalMeta } })
                .collect()
        } else {
            Vec::new()
        };
        let near = tx.final_data.iter().chain(&tx.final_unordered).max().copied();
        let (stage, at) = self.placement.place(Records { tid: tx.tid, blocks: w.blocks, images, revoked, logged, near });

        let in_place = |set: &mut dyn Iterator<Item = &HomeBlock>| -> Vec<IoWrite> {
            set.map(|&b| IoWrite { dev: DevId::Fs, block: DevBlock::home(b), data: cache.peek(b).expect("in-place data stays cached").data.clone(), kind: BlockKind::FinalData })
                .collect()
        };
        // Blocks written early (journal/writeback.rs) and unchanged since are not written again:
        // the ordered stage's flush makes them durable.
        let mut ordered: Vec<IoWrite> = in_place(&mut tx.final_data.iter().filter(|&&b| !self.written_early(cache, b)));
        let late = if self.cfg.faults.ordered_after_commit { std::mem::take(&mut ordered) } else { Vec::new() };
        let early_written = tx.final_data.len() > ordered.len();
        let mut batch = Vec::new();
        self.early.clear();
        let unordered = in_place(&mut tx.final_unordered.iter());
        let mut commit_flush = stage.flush;
        if !unordered.is_empty() && !commit_flush.contains(&DevId::Fs) {
            commit_flush.insert(0, DevId::Fs);
        }
        if beside && (!ordered.is_empty() || early_written) && !commit_flush.contains(&DevId::Fs) {
            commit_flush.insert(0, DevId::Fs);
        }
        if self.cfg.faults.skip_commit_flush {
            commit_flush.clear();
        }
        let mut io = IoPlan::default();
        if beside {
            // Beside the commit, under its flush: recovery checks them by their tags.
            batch.extend(ordered);
        } else if !ordered.is_empty() || early_written {
            // Ordered data reaches its final location, durably, before anything of the commit.
            io.push(ordered, vec![DevId::Fs]);
        }
        batch.extend(unordered);
        batch.extend(stage.writes);
        io.push_stage(super::plan::IoStage { copies: Vec::new(), writes: batch, flush: commit_flush, remote: stage.remote, nvm: stage.nvm });
        if !late.is_empty() {
            io.push(late, vec![DevId::Fs]);
        }

        let plan = CommitPlan { tid: tx.tid, io, journal_blocks: at.blocks, handles: tx.handles, records: stats };
        self.committing = Some(Committing { tx, at, journaled, partial, whole, records });
        Some(plan)
    }

    /// A transaction of records alone (no revokes, no whole blocks) that fits one block, or
    /// [`jf::MAX_FAST_BLOCKS`] where the journal has the span feature, is written as that
    /// fast commit, its commit included (`fast_commit=on`; docs/FORMAT.md, "Fast commit
    /// block"): one piece and one flush instead of a descriptor, multiwrite blocks and a
    /// commit block. Returns whether it did.
    fn fast_commit(&self, w: &mut RecordsWriter, tx: &Transaction, items: &[Item], wall_ns: i64, stats: &mut RecordStats, logged_at: &mut Vec<LoggedBlockCopy>) -> bool {
        if self.cfg.fast_commit_blocks == 0 || !tx.revoked.is_empty() || items.is_empty() {
            return false;
        }
        if items.iter().any(|i| matches!(i, Item::Full { .. })) {
            return false;
        }
        // Notes need a record beside them (a fast commit has at least one tag); with none,
        // each note goes as its record.
        let noted = items.iter().any(|i| matches!(i, Item::Record { .. } | Item::InPlace { .. }));
        let mut notes = 0usize;
        let mut stream_len = 0usize;
        let mut tag_count = 0usize;
        for item in items {
            match item {
                Item::Note { .. } if noted => notes += 1,
                Item::InPlace { .. } => tag_count += 1,
                i => {
                    let Item::Record { len, .. } = i.as_record() else { unreachable!("checked: records and notes only") };
                    stream_len += *len as usize;
                    tag_count += 1;
                }
            }
        }
        let bs = self.cfg.block_size;
        // Compact tags where the journal has the form and every record's block can be named
        // by one (docs/FORMAT.md, "Compact tags").
        // (In-place tags need the full form: a compact tag has no hash.)
        let compact = self.cfg.fast_commit_compact && items.iter().all(|i| !matches!(i, Item::InPlace { .. }) && i.block().get() <= jf::MAX_COMPACT_TAG_BLOCK);
        // Short notes where the journal has the form and every noted size fits 32 bits
        // (docs/FORMAT.md, "Inode notes").
        let short = notes > 0 && self.cfg.short_notes && items.iter().all(|i| !matches!(i, Item::Note { note, .. } if note.size > u32::MAX as u64));
        if !jf::FastCommit::fits_with_notes(bs, tag_count, notes, stream_len, self.cfg.fast_commit_blocks, compact, short) {
            return false;
        }
        let mut tags = Vec::with_capacity(tag_count);
        let mut fc_notes = Vec::with_capacity(notes);
        let mut stream = Vec::with_capacity(stream_len);
        for item in items {
            match item {
                Item::Note { note, record } if noted => {
                    // The block is logged by this transaction as records are (a placement's
                    // map and the checkpoint treat it so).
                    let block = record.block();
                    if logged_at.last().is_none_or(|l| l.block != block) {
                        logged_at.push(LoggedBlockCopy { block, whole: None });
                    }
                    fc_notes.push(*note);
                }
                Item::InPlace { block, hash } => tags.push(Tag::in_place(*block, *hash)),
                i => {
                    let r = i.as_record();
                    let Item::Record { block, offset, flags, .. } = r else { unreachable!("checked: records and notes only") };
                    tags.push(record_tag(*block, *offset, r.bytes(), *flags, logged_at));
                    stream.extend_from_slice(r.bytes());
                }
            }
        }
        stats.records += tags.iter().filter(|t| t.is_multiwrite()).count() as u64;
        stats.notes += notes as u64;
        stats.record_bytes += stream_len as u64;
        stats.inline_bytes += stream_len as u64;
        let fc = jf::FastCommit { tid: tx.tid, tags, stream, handle_count: tx.handles, commit_time_ns: wall_ns, compact, notes: fc_notes, short_notes: short };
        let blocks = fc.encode_span(bs);
        stats.fast_blocks = blocks.len() as u32;
        stats.fast_bytes = jf::FastCommit::carried_len(tag_count, notes, stream_len, compact, short) as u64;
        for b in blocks {
            w.push(Arc::new(b), BlockKind::Commit);
        }
        true
    }

    /// Writes one descriptor (tags, then as much of its record stream as fits), the whole
    /// blocks it tags, and multiwrite blocks with the rest of the stream.
    fn write_descriptor(&self, w: &mut RecordsWriter, tid: Tid, group: &[Item], stats: &mut RecordStats, logged_at: &mut Vec<LoggedBlockCopy>) {
        let bs = self.cfg.block_size;
        let mut tags = Vec::with_capacity(group.len());
        let mut blocks = Vec::new();
        let mut stream = Vec::new();
        for item in group {
            match item.as_record() {
                Item::Note { .. } => unreachable!("a note's record is a record"),
                Item::Full { block, data, flags } => {
                    let mut flags = *flags;
                    let logged = if jf::needs_escape(data) {
                        let mut copy = data.as_ref().clone();
                        jf::escape(&mut copy);
                        flags |= jf::tag_flags::ESCAPED;
                        Arc::new(copy)
                    } else {
                        data.clone()
                    };
                    let hash = jf::data_hash(*block, 0, &logged);
                    tags.push(Tag::regular(*block, flags, hash));
                    let kind = if flags & jf::tag_flags::METADATA != 0 { BlockKind::JournalMeta } else { BlockKind::JournalData };
                    // The whole blocks follow the descriptor in tag order.
                    let at = w.blocks.len() + 1 + blocks.len();
                    logged_at.push(LoggedBlockCopy { block: *block, whole: (flags & jf::tag_flags::ESCAPED == 0).then_some(WholeImage { index: at, hash }) });
                    blocks.push((logged, kind));
                }
                Item::InPlace { block, hash } => tags.push(Tag::in_place(*block, *hash)),
                r @ Item::Record { block, offset, flags, .. } => {
                    let bytes = r.bytes();
                    tags.push(record_tag(*block, *offset, bytes, *flags, logged_at));
                    stream.extend_from_slice(bytes);
                    stats.records += 1;
                    stats.record_bytes += bytes.len() as u64;
                }
            }
        }
        let inline_len = stream.len().min(Descriptor::inline_capacity(bs, tags.len()));
        stats.inline_bytes += inline_len as u64;
        let mut d = vec![0u8; bs];
        Descriptor { tid, tags, inline: stream[..inline_len].to_vec() }.encode(&mut d);
        w.push(Arc::new(d), BlockKind::Descriptor);
        for (data, kind) in blocks {
            w.push(data, kind);
        }
        for chunk in stream[inline_len..].chunks(jf::multiwrite_capacity(bs)) {
            let mut b = vec![0u8; bs];
            jf::encode_multiwrite(&mut b, chunk);
            w.push(Arc::new(b), BlockKind::Multiwrite);
        }
    }

    /// The commit's writes completed, its flush is still to come (pipelined commits): the
    /// next commit may begin. It stays in flight until [`Self::commit_finish`].
    pub fn commit_written(&mut self) {
        let c = self.committing.take().expect("a commit in flight");
        self.flushing.push_back(c);
    }

    /// The oldest commit whose writes completed and whose flush is in flight.
    pub fn oldest_flushing_tid(&self) -> Option<Tid> {
        self.flushing.front().map(|c| c.tx.tid)
    }

    /// The oldest commit in flight is durable (its I/O completed, flush included): moves its
    /// blocks to the checkpoint lists and returns what its frees release. The oldest is the
    /// first of those waiting for a flush, or else the commit whose writes are in flight.
    pub fn commit_finish(&mut self, cache: &mut Cache, now_ns: u64) -> CommitDone {
        let c = match self.flushing.pop_front() {
            Some(c) => c,
            None => self.committing.take().expect("a commit in flight"),
        };
        let Committing { mut tx, at, journaled, partial, whole, .. } = c;
        assert_eq!(tx.state, TxState::Committing, "finishing a transaction that is committing");
        tx.state = TxState::Committed;
        let tid = tx.tid;
        let mut checkpoint = std::collections::BTreeSet::new();
        let logged: Vec<HomeBlock> = journaled.iter().map(|(b, _)| *b).filter(|b| whole.contains(b) || partial.contains(b)).collect();
        for (block, frozen) in journaled {
            let buf = cache.get(block).expect("a block in a transaction stays cached");
            if buf.tx == Some(tid) {
                buf.tx = None;
            }
            if !whole.contains(&block) && !partial.contains(&block) {
                // Dirtied but unchanged (differential metadata found no difference): nothing
                // was logged, and the version owed to the final location, if any, stands.
                continue;
            }
            // Which committed transaction's log space waits for this block's checkpoint. A
            // whole logged copy supersedes the older ones, so the newest transaction owns it
            // (jbd2 does the same). A record only carries the bytes this transaction changed
            // and replays on top of the older records: the oldest transaction holding a
            // change not yet at the final location keeps owning it, so the tail never passes
            // a record that a later one depends on.
            match buf.cp_tid {
                Some(older) if partial.contains(&block) => {
                    debug_assert!(older < tid);
                }
                Some(older) => {
                    if let Some(t) = self.logged_tx_mut(older) {
                        t.checkpoint.remove(&block);
                    }
                    buf.cp_tid = Some(tid);
                    checkpoint.insert(block);
                }
                None => {
                    buf.cp_since_ns = now_ns;
                    buf.cp_tid = Some(tid);
                    checkpoint.insert(block);
                }
            }
            let replaced = buf.cp_data.replace(frozen);
            self.logged_copies.insert(block, tid);
            if let Some(old) = replaced {
                cache.recycle(old);
            }
        }
        // The bases of differential metadata are let go with the transaction; usually the
        // last reference to the block's version before it (the older committed one just
        // replaced above).
        for (_, base) in std::mem::take(&mut tx.meta_base) {
            cache.recycle(base);
        }
        for &block in tx.final_data.iter().chain(&tx.final_unordered) {
            if let Some(buf) = cache.get(block) {
                if buf.tx == Some(tid) {
                    // In place and durable: the block's update sequence ends here.
                    buf.tx = None;
                    if buf.cp_tid.is_none() {
                        buf.seq = None;
                    }
                }
            }
        }
        // Freed blocks: the revoke records are durable now, so older logged copies will not
        // replay, and nothing may write the block in place any more.
        for &block in &tx.freed {
            if let Some(buf) = cache.forget(block) {
                assert!(buf.tx.is_none() || buf.tx == Some(tid), "a freed block is not reused before its free commits");
                if let Some(owner) = buf.cp_tid {
                    if let Some(t) = self.logged_tx_mut(owner) {
                        t.checkpoint.remove(&block);
                    }
                }
            }
            checkpoint.remove(&block);
        }
        self.log.push_back(LoggedTx { tid, state: TxState::Committed, at, checkpoint, logged, home: 0 });
        self.placement.on_durable(tid);
        self.committed_tid = tid;
        CommitDone { tid, freed_blocks: std::mem::take(&mut tx.freed), freed_inodes: std::mem::take(&mut tx.freed_inodes) }
    }

    /// The commit's I/O failed: the journal is aborted and nothing commits after it.
    pub fn commit_failed(&mut self, error: String) {
        self.aborted.get_or_insert(error);
    }
}

/// The multiwrite tag of a record, noting its block among the ones this transaction logged
/// (once per block: a block's records are consecutive).
fn record_tag(block: HomeBlock, offset: u32, bytes: &[u8], flags: u16, logged_at: &mut Vec<LoggedBlockCopy>) -> Tag {
    if logged_at.last().is_none_or(|l| l.block != block) {
        logged_at.push(LoggedBlockCopy { block, whole: None });
    }
    Tag { fs_block: block, flags, offset: offset as u16, len: bytes.len() as u16, data_hash: jf::data_hash(block, offset as u16, bytes) }
}

/// Collects a transaction's journal blocks in order, chaining the transaction hash (the
/// commit block carries it, so the blocks need no positions).
struct RecordsWriter {
    hash: u64,
    blocks: Vec<(Arc<Vec<u8>>, BlockKind)>,
}

impl RecordsWriter {
    fn push(&mut self, data: Arc<Vec<u8>>, kind: BlockKind) {
        if kind != BlockKind::Commit {
            self.hash = jf::tx_hash_append(self.hash, &data);
        }
        self.blocks.push((data, kind));
    }
}

#[cfg(test)]
mod tests {
    use super::{diff_ranges, fit_ranges};
    use proptest::prelude::*;

    /// Forty changes 64 bytes apart and one more 20 bytes after the last: the nine smallest
    /// gaps close (the 19-byte one, then the earliest eight of 63 bytes), leaving 32 ranges.
    #[test]
    fn forty_ranges_become_thirty_two_by_their_smallest_gaps() {
        let old = vec![0u8; 4096];
        let mut new = old.clone();
        for k in 0..40 {
            new[k * 64] = 1;
        }
        new[39 * 64 + 20] = 1; // 20 bytes after the last change: the smallest gap
        let ranges = diff_ranges(&old, &new);
        assert_eq!(ranges.len(), 41);
        let fit = fit_ranges(ranges.clone(), 32);
        assert_eq!(fit.len(), 32);
        assert_eq!(fit[0], (0, 64 * 8 + 1), "the first eight 63-byte gaps closed");
        assert_eq!(fit[1], (64 * 9, 64 * 9 + 1), "the next one stays a range of its own");
        assert_eq!(fit[31], (39 * 64, 39 * 64 + 21), "the 19-byte gap closed");
        assert_eq!(fit_ranges(ranges[..32].to_vec(), 32), ranges[..32].to_vec(), "32 or fewer stay as they are");
    }

    /// The byte-by-byte definition [`diff_ranges`] must agree with.
    fn diff_ranges_bytewise(old: &[u8], new: &[u8]) -> Vec<(usize, usize)> {
        let mut out: Vec<(usize, usize)> = Vec::new();
        let mut i = 0;
        while i < new.len() {
            if old[i] == new[i] {
                i += 1;
                continue;
            }
            let start = i;
            while i < new.len() && old[i] != new[i] {
                i += 1;
            }
            match out.last_mut() {
                Some(last) if start - last.1 < super::DIFF_GAP => last.1 = i,
                _ => out.push((start, i)),
            }
        }
        out
    }

    proptest! {
        /// Any block, any changes (single bytes, runs across word boundaries, the last bytes,
        /// lengths not a multiple of eight): the same ranges as byte by byte.
        #[test]
        fn diff_ranges_agree_with_the_bytewise_definition(len in 0usize..300, base in any::<u64>(), changes in proptest::collection::vec((0usize..300, 1usize..24, any::<u8>()), 0..12)) {
            let old: Vec<u8> = (0..len).map(|k| (base.rotate_left(k as u32 % 64) as u8) ^ k as u8).collect();
            let mut new = old.clone();
            for (at, run, x) in changes {
                for k in at..(at + run).min(len) {
                    new[k] ^= x | 1;
                }
            }
            prop_assert_eq!(diff_ranges(&old, &new), diff_ranges_bytewise(&old, &new));
        }

        /// Whatever the ranges and the limit: at most `max` sorted, disjoint ranges, each from the
        /// start of one given range to the end of one, covering every given byte, and adding
        /// exactly the smallest gaps' bytes.
        #[test]
        fn fitted_ranges_cover_everything_with_the_least_added(cuts in proptest::collection::btree_set(0usize..4096, 2..120), max in 1usize..40) {
            let cuts: Vec<usize> = cuts.into_iter().collect();
            let ranges: Vec<(usize, usize)> = cuts.chunks_exact(2).map(|c| (c[0], c[1])).collect();
            let fit = fit_ranges(ranges.clone(), max);
            prop_assert!(fit.len() <= max);
            prop_assert!(fit.windows(2).all(|w| w[0].1 < w[1].0), "sorted and disjoint: {:?}", fit);
            for r in &ranges {
                prop_assert!(fit.iter().any(|f| f.0 <= r.0 && r.1 <= f.1), "{:?} covered by {:?}", r, fit);
            }
            prop_assert!(fit.iter().all(|f| ranges.iter().any(|r| r.0 == f.0) && ranges.iter().any(|r| r.1 == f.1)));
            let bytes = |v: &[(usize, usize)]| v.iter().map(|(a, e)| e - a).sum::<usize>();
            let mut gaps: Vec<usize> = ranges.windows(2).map(|w| w[1].0 - w[0].1).collect();
            gaps.sort_unstable();
            let closed = ranges.len().saturating_sub(max);
            prop_assert_eq!(bytes(&fit), bytes(&ranges) + gaps[..closed].iter().sum::<usize>());
        }
    }
}

//! Recovery: find the committed transactions in the log and replay them (thesis section 3.4;
//! jbd2 recovery.c), in three passes that carry their state in one place:
//!
//! 1. **scan** ([`Scan`]): from the journal superblock's tail, read transactions while each
//!    block carries the expected tid, every logged block matches its tag's hash and the commit
//!    record's transaction hash matches. The first failure ends the log: what follows is an
//!    incomplete transaction or leftovers from an earlier pass over the circular log.
//! 2. **revoke** ([`RevokeTable`]): read the revoke blocks of the committed transactions.
//! 3. **replay** ([`replay_plan`]): for every block, the newest logged copy that no revoke
//!    covers, with the multiwrite records logged after it applied in order, is written to its
//!    final location (once, not once per copy).
//!
//! Only the last step changes the journal superblock, after the replayed blocks are flushed,
//! so a crash anywhere in recovery leaves the log as it was and recovery simply runs again
//! (idempotent). The decision table of the scan, one row per case:
//!
//! | block read at the expected position          | decision                                   |
//! |----------------------------------------------|--------------------------------------------|
//! | no journal header (data, zeros, garbage)     | end of log: nothing more was committed     |
//! | header with another tid                      | end of log: a block of an earlier pass     |
//! | descriptor/revoke that fails its CRC         | end of log: torn or stale write            |
//! | logged block or record whose hash differs    | end of log: torn or never written          |
//! | tag naming a block outside the file system   | end of log: corrupt (cannot be ours)       |
//! | multiwrite block without its magic, or long  | end of log: torn or stale                  |
//! | commit whose count or transaction hash differ| end of log: a block of it is torn/missing  |
//! | commit that verifies                         | transaction committed; expect tid + 1      |
//! | fast commit whose block hash differs         | end of log: torn, or never written whole   |
//! | fast commit with a record whose hash differs | end of log: torn or corrupt                |
//! | fast commit with an inode note naming inode 0 or one past the file system's count | end of log: corrupt (not a transaction we write) |
//! | fast commit after blocks of its transaction  | end of log: not a transaction we write     |
//! | fast commit that verifies                    | transaction committed (that one block); expect tid + 1 |
//! | fast commit span: a later block without its continuation header (type, tid, index, sectors) | end of log: torn or never written; the failure starts at the span's first block |
//! | fast commit span whose hash differs          | end of log: torn, or never written whole   |
//! | fast commit span that verifies               | transaction committed (its blocks); expect tid + 1 |
//! | fast commit continuation where a transaction begins | end of log: not a transaction we write |
//! | read budget (one pass over the ring) spent   | end of log                                 |
//! | the newest committed transaction (no damage found) names a block in place whose hash at home differs | the log ends before it: its commit's flush never completed (runtime `recover_logs`, [`in_place_checks`]; docs/FORMAT.md, "In-place tags") |
//!
//! Where the scan stopped on a failure, a **probe** ([`Probe`]) decides whether that was the
//! torn tail of the log or damage in its middle. A commit is one flush, and the next commit's
//! writes are issued only after it completes, so a transaction torn by a crash can never be
//! followed by a committed one: committed transactions after a failed one mean the failed one
//! was written whole and damaged later (media, a stray write). With pipelined commits
//! (`commit_pipeline=N`, recorded in the journal superblock: [`RecoveryStart::pipeline`]) up
//! to N later commits were written beside the failed one's flush, so a committed transaction
//! at most N tids past it is the pipeline's torn tail. The probe reads on from the failed
//! transaction's first block:
//!
//! | block read by the probe                               | decision                              |
//! |-------------------------------------------------------|---------------------------------------|
//! | valid header with a tid below the failed one          | torn tail: a stale block of an earlier pass; the log is contiguous, nothing newer lies beyond |
//! | valid header of the failed tid                        | read on (the rest of the damaged transaction) |
//! | valid first header (descriptor, revoke, fast commit) of a higher tid | scan from it: if a transaction commits, **damage** (torn tail if its tid is at most the pipeline depth past the failed one); else read on |
//! | anything else (data, multiwrite, zeros, garbage)      | read on, at most two descriptors' worth of blocks without a header (no whole transaction has a longer gap), then torn tail |
//! | one pass over the ring read                           | torn tail                             |
//!
//! On damage only the transactions before the damaged one are replayed (the file system as it
//! was after the last good commit: consistent, with every later change lost rather than half
//! applied over a missing base), the superblock gets the ERRORS state and an error record
//! naming the damaged tid and how many committed transactions followed, and a read-write mount
//! is refused until `okeanos fsck` has checked the result (docs/JOURNALING.md).
//!
//! **Interleaved logs** (manylogs, `RecoveryStart::interleaved`). Each log's transactions
//! have increasing tids, but consecutive tids may be in different logs. The log table records,
//! per log, its tail (where the oldest transaction at or above the table's floor tid begins),
//! its end of durable transactions, and (its map) the position after its newest transaction at
//! or below the home tid, with the tid there; no space holding a transaction at or above the
//! floor is reused before a newer table is durable. Each log is scanned from that position as
//! above, except that at a transaction boundary the scan accepts any tid above the
//! last one (and below the bound): leftovers of an earlier pass carry lower tids. Then:
//!
//! | found                                                          | decision                   |
//! |----------------------------------------------------------------|----------------------------|
//! | every log's transactions, merged by tid, run home+1, home+2, .. | replay them all (and the map's blocks: `with_map`) |
//! | a tid missing from the run with a higher one found after it    | **damage**: replay the run before it |
//! | a log whose scan ends before the end the table records         | **damage** (a durable one is gone) |
//! | a log whose first transaction is not the tid the table names   | **damage**                 |
//! | a log's probe finds a committed transaction after a failed one | **damage**                 |
//! | past a log's recorded end, a tid not above the table's newest durable one | end of that log: stale (an earlier pass, or copies a log swap left); the probe there ignores such tids too |
//! | the run ends with no higher tid anywhere                       | torn tail: the newest commit was in flight |
//!
//! Commits are issued one at a time, each after the previous one's flush, so a crash can leave
//! at most the newest transaction torn; a gap below a committed tid is never a crash's doing.
//!
//! After recovery the next transaction gets a tid beyond every tid still in the log, so that no
//! leftover block can ever match the tid a later scan expects: at least `end + 2` (a partly
//! written transaction `end + 1` may have left blocks anywhere after the log end), beyond the
//! last transaction the probe found, and at least the journal superblock's sequence plus the
//! ring's length. Every transaction takes at least one block and space is reused only after
//! the journal superblock records the new tail, so the transactions in the ring at a crash
//! have tids below `sequence + ring length`; older leftovers have lower tids still.

use super::placement::{LogRegion, LoggedBlock, RecoveryStart};
use super::plan::BlockKind;
use super::revoke::RevokeTable;
use crate::ids::{LogPos, Tid};
use crate::format::journal::{self as jf, CommitBlock, Descriptor, JBlockType, RevokeBlock, Tag};
use crate::format::inode::InodeTables;
use crate::format::FormatError;
use crate::det::HashMap;

mod interleaved;
mod probe;
mod replay;

pub use interleaved::{merge_interleaved, short_of_table, sweep_committed};
pub use probe::{Damage, Probe};
pub use replay::{replay_plan, revoke_feed, revoke_reads, with_map, Patch, ReplayBase, ReplayBlock};


/// What the scan checks a transaction's targets against: the file system's block count, and
/// where its inode tables lie, for inode notes (without them a note ends the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsBounds {
    pub blocks: u64,
    pub inodes: Option<InodeTables>,
}

impl FsBounds {
    /// The bounds of the file system `sb` describes.
    pub fn of(sb: &crate::format::superblock::Superblock) -> Self {
        FsBounds { blocks: sb.block_count, inodes: Some(InodeTables::of(sb)) }
    }
}

/// A committed transaction found by the scan.
#[derive(Debug, Clone)]
pub struct ScannedTx {
    /// The log it was found in.
    pub region: LogRegion,
    pub tid: Tid,
    pub start: LogPos,
    pub end: LogPos,
    /// What the transaction logged, in log order.
    pub items: Vec<ScanItem>,
    /// Log positions of its revoke blocks.
    pub revoke_blocks: Vec<LogPos>,
    pub handle_count: u32,
    pub commit_time_ns: i64,
}

/// One thing a committed transaction logged.
#[derive(Debug, Clone)]
pub enum ScanItem {
    /// A whole block at a log position.
    Full { pos: LogPos, tag: Tag },
    /// A multiwrite record and its bytes.
    Record { tag: Tag, bytes: Vec<u8> },
    /// An inode note of a fast commit: `tag` names the inode's table block and its offset
    /// there (32 bytes, the part of the inode it stands for), `time_ns` its mtime and ctime.
    Note { tag: Tag, note: jf::InodeNote, time_ns: i64 },
    /// A new block written home beside the commit, under its flush (an in-place tag): nothing
    /// to replay, its hash checked in the newest transaction ([`in_place_checks`]).
    InPlace { tag: Tag },
}

impl ScanItem {
    pub fn tag(&self) -> &Tag {
        match self {
            ScanItem::Full { tag, .. } | ScanItem::Record { tag, .. } | ScanItem::Note { tag, .. } | ScanItem::InPlace { tag } => tag,
        }
    }
}

/// The blocks a committed transaction wrote in place under its commit's flush, each with the
/// hash its in-place tag gives (docs/FORMAT.md, "In-place tags"). Recovery reads them home in
/// the newest transaction of a log that ended torn: a block whose hash differs was not
/// written before the crash, so the commit's flush never completed and the transaction was
/// never acknowledged; it is dropped as the torn tail. In an older transaction they are not
/// checked: a later transaction committed after its flush, and may have changed them since.
pub fn in_place_checks(tx: &ScannedTx) -> Vec<(crate::ids::HomeBlock, u32)> {
    tx.items.iter().filter_map(|i| if let ScanItem::InPlace { tag } = i { Some((tag.fs_block, tag.data_hash)) } else { None }).collect()
}

/// Reading the blocks that follow a descriptor: its whole blocks, then the multiwrite blocks
/// that continue its record stream.
#[derive(Debug)]
struct Body {
    tags: Vec<Tag>,
    /// Positions of the whole blocks read so far, in tag order.
    full_pos: Vec<LogPos>,
    full_left: usize,
    stream: Vec<u8>,
    stream_len: usize,
    mw_left: usize,
}

/// Reading the blocks of a fast commit span after its first.
#[derive(Debug)]
struct Span {
    start: LogPos,
    blocks: Vec<Vec<u8>>,
    len: usize,
}

#[derive(Debug)]
enum Phase {
    Header,
    Body(Body),
    FastSpan(Span),
    Done,
}

#[derive(Debug)]
struct Partial {
    start: LogPos,
    hash: u64,
    count: u64,
    items: Vec<ScanItem>,
    revoke_blocks: Vec<LogPos>,
}

/// Pass 1. Drive it with [`Scan::next_read`] and [`Scan::feed`].
#[derive(Debug)]
pub struct Scan {
    region: LogRegion,
    fs: FsBounds,
    /// The journal allows multiwrite tags.
    multiwrite: bool,
    pos: LogPos,
    expected: Tid,
    /// Interleaved logs (manylogs): at a transaction boundary any tid from `expected` up to
    /// this bound (exclusive) is accepted, not only `expected`.
    increasing: Option<Tid>,
    /// Interleaved logs: blocks from the scan's start to the log's recorded end, and the
    /// lowest tid a transaction beginning at or past it may have (older ones are stale).
    past_end: Option<(u64, Tid)>,
    /// Commits the crashed mount may have had in flight at once ([`RecoveryStart::pipeline`]).
    pub pipeline: u32,
    /// Where the scan started.
    start_pos: LogPos,
    budget: u64,
    phase: Phase,
    cur: Option<Partial>,
    pub txs: Vec<ScannedTx>,
    /// Why the scan stopped.
    pub end_reason: String,
    pub blocks_read: u64,
    /// Tid the scan expected first.
    pub first_tid: Tid,
    /// Where the transaction that failed its checks begins (None: the scan ended without a
    /// failure: a clean journal, or the whole ring read).
    pub fail_start: Option<LogPos>,
    /// The `fast_commit_unchecked` canary clears it: fast commit blocks are then taken on
    /// their header alone, neither their hash nor their records' hashes checked.
    pub verify_fast_commits: bool,
}

impl Scan {
    /// The scan of a placement's log from where its recovery starts.
    pub fn new(start: &RecoveryStart, fs: FsBounds) -> Self {
        let mut scan = Scan::at(start.region, fs, start.multiwrite, start.pos, start.tid);
        if let Some(i) = start.interleaved {
            scan.increasing = Some(start.tid_bound);
            scan.past_end = Some((start.region.distance(start.pos, i.end), i.past_end_min));
        }
        scan.pipeline = start.pipeline;
        scan
    }

    /// A scan that expects transaction `tid` to begin at log position `pos`.
    pub fn at(region: LogRegion, fs: FsBounds, multiwrite: bool, pos: LogPos, tid: Tid) -> Self {
        Scan {
            region,
            fs,
            multiwrite,
            pos,
            expected: tid,
            increasing: None,
            past_end: None,
            pipeline: 0,
            start_pos: pos,
            budget: region.ring_len(),
            phase: Phase::Header,
            cur: None,
            txs: Vec::new(),
            end_reason: String::new(),
            blocks_read: 0,
            first_tid: tid,
            fail_start: None,
            verify_fast_commits: true,
        }
    }

    /// The tid the scan expected when it stopped (the failed one, after a failure).
    pub fn expected_tid(&self) -> Tid {
        self.expected
    }

    /// The log position to read next, or `None` when the scan is over.
    pub fn next_read(&self) -> Option<LogPos> {
        match self.phase {
            Phase::Done => None,
            _ => Some(self.pos),
        }
    }

    /// Tid of the last committed transaction (`first_tid - 1` if none).
    pub fn end_tid(&self) -> Tid {
        self.txs.last().map_or(self.first_tid.saturating_sub(1), |t| t.tid)
    }

    /// Whether log position `pos` is at or past the recorded end (interleaved logs).
    fn is_past_end(&self, pos: LogPos) -> bool {
        self.past_end.is_some_and(|(end, _)| self.region.distance(self.start_pos, pos) >= end)
    }

    /// Ends the scan at a block that failed its checks.
    fn stop(&mut self, reason: impl Into<String>) {
        self.fail_start = Some(self.cur.as_ref().map_or(self.pos, |p| p.start));
        self.phase = Phase::Done;
        self.cur = None;
        self.end_reason = reason.into();
    }

    fn partial(&mut self) -> &mut Partial {
        let pos = self.pos;
        let seed = jf::tx_hash_seed(self.expected);
        self.cur.get_or_insert_with(|| Partial { start: pos, hash: seed, count: 0, items: Vec::new(), revoke_blocks: Vec::new() })
    }

    /// Feeds the block read at [`Scan::next_read`].
    pub fn feed(&mut self, block: &[u8]) {
        self.blocks_read += 1;
        match std::mem::replace(&mut self.phase, Phase::Header) {
            Phase::Done => panic!("feed after the scan ended"),
            Phase::Header => self.feed_header(block),
            Phase::Body(body) => self.feed_body(body, block),
            Phase::FastSpan(span) => self.feed_span(span, block),
        }
        if !matches!(self.phase, Phase::Done) {
            self.pos = self.region.next(self.pos);
            self.budget -= 1;
            if self.budget == 0 {
                self.phase = Phase::Done;
                self.cur = None;
                self.end_reason = "scanned the whole ring".into();
            }
        }
    }

    fn feed_body(&mut self, mut body: Body, block: &[u8]) {
        let pos = self.pos;
        let expected = self.expected;
        if body.full_left > 0 {
            let tag = body.tags.iter().filter(|t| t.has_logged_block()).nth(body.full_pos.len()).copied().expect("a tag per whole block");
            if jf::data_hash(tag.fs_block, 0, block) != tag.data_hash {
                return self.stop(format!("logged block at {pos} of transaction {expected} fails its tag hash"));
            }
            body.full_pos.push(pos);
            body.full_left -= 1;
        } else {
            match jf::decode_multiwrite(block) {
                Ok(bytes) if body.stream.len() + bytes.len() <= body.stream_len => body.stream.extend_from_slice(bytes),
                Ok(_) => return self.stop(format!("multiwrite block at {pos} overruns its stream")),
                Err(e) => return self.stop(format!("multiwrite block at {pos}: {e}")),
            }
            body.mw_left -= 1;
        }
        let p = self.partial();
        p.hash = jf::tx_hash_append(p.hash, block);
        p.count += 1;
        self.finish_body_or_continue(body);
    }

    /// Once every block of a descriptor is read, checks its records and adds its items.
    fn finish_body_or_continue(&mut self, body: Body) {
        if body.full_left > 0 || body.mw_left > 0 {
            self.phase = Phase::Body(body);
            return;
        }
        if body.stream.len() != body.stream_len {
            return self.stop(format!("record stream of transaction {} is short", self.expected));
        }
        let mut items = Vec::with_capacity(body.tags.len());
        let mut at = 0usize;
        let mut full = body.full_pos.into_iter();
        for tag in body.tags {
            if tag.is_multiwrite() {
                match take_record(tag, &body.stream, &mut at, true) {
                    Some(item) => items.push(item),
                    None => return self.stop(format!("record for block {} of transaction {} fails its tag hash", tag.fs_block, self.expected)),
                }
            } else if tag.is_in_place() {
                items.push(ScanItem::InPlace { tag });
            } else {
                items.push(ScanItem::Full { pos: full.next().expect("a position per whole block"), tag });
            }
        }
        self.partial().items.extend(items);
    }

    fn feed_header(&mut self, block: &[u8]) {
        let pos = self.pos;
        let expected = self.expected;
        let Some((kind, tid)) = jf::header(block) else {
            return self.stop(format!("no journal header at {pos}"));
        };
        let opens = self.cur.is_none() && matches!(kind, JBlockType::Descriptor | JBlockType::Revoke | JBlockType::Commit | JBlockType::FastCommit);
        if opens && self.is_past_end(pos) && self.past_end.is_some_and(|(_, min)| tid < min) {
            return self.stop(format!("block at {pos} has tid {tid}, older than every transaction that can follow the log's recorded end (stale)"));
        }
        if opens && self.increasing.is_some_and(|bound| tid > expected && tid < bound) {
            // Interleaved logs: the next transaction of this log, whatever its tid.
            self.expected = tid;
        } else if tid != expected || kind == JBlockType::Superblock {
            return self.stop(format!("block at {pos} has tid {tid}, expected {expected}"));
        }
        match kind {
            JBlockType::Descriptor => match Descriptor::decode(block) {
                Ok(d) => {
                    if let Some(t) = d.tags.iter().find(|t| t.fs_block.get() >= self.fs.blocks) {
                        return self.stop(format!("descriptor at {pos} tags block {} outside the file system", t.fs_block));
                    }
                    if !self.multiwrite && d.tags.iter().any(Tag::is_multiwrite) {
                        return self.stop(format!("descriptor at {pos} has multiwrite tags but the journal lacks the feature"));
                    }
                    let p = self.partial();
                    p.hash = jf::tx_hash_append(p.hash, block);
                    p.count += 1;
                    let stream_len = Descriptor::stream_len(&d.tags);
                    let rest = stream_len - d.inline.len();
                    let body = Body {
                        full_left: d.tags.iter().filter(|t| t.has_logged_block()).count(),
                        full_pos: Vec::new(),
                        mw_left: rest.div_ceil(jf::multiwrite_capacity(block.len())),
                        stream: d.inline,
                        stream_len,
                        tags: d.tags,
                    };
                    self.finish_body_or_continue(body);
                }
                Err(e) => self.stop(format!("descriptor at {pos}: {e}")),
            },
            JBlockType::Revoke => match RevokeBlock::decode(block) {
                Ok(_) => {
                    let p = self.partial();
                    p.hash = jf::tx_hash_append(p.hash, block);
                    p.count += 1;
                    p.revoke_blocks.push(pos);
                }
                Err(e) => self.stop(format!("revoke block at {pos}: {e}")),
            },
            JBlockType::Commit => match CommitBlock::decode(block) {
                Ok(c) => {
                    let p = self.partial();
                    if c.block_count != p.count || c.tx_hash != p.hash {
                        return self.stop(format!("commit of transaction {tid} at {pos} does not match its blocks"));
                    }
                    let p = self.cur.take().expect("partial transaction");
                    self.txs.push(ScannedTx {
                        region: self.region,
                        tid,
                        start: p.start,
                        end: self.region.next(pos),
                        items: p.items,
                        revoke_blocks: p.revoke_blocks,
                        handle_count: c.handle_count,
                        commit_time_ns: c.commit_time_ns,
                    });
                    self.expected += 1;
                }
                Err(e) => self.stop(format!("commit block at {pos}: {e}")),
            },
            JBlockType::FastCommit => self.feed_fast_commit(block, tid),
            JBlockType::FastCommitMore => self.stop(format!("fast commit continuation at {pos} without its first block")),
            JBlockType::Superblock => unreachable!(),
        }
    }
}

impl Scan {
    /// A fast commit: a whole transaction of records, checked as one piece. Its first block
    /// opens and commits its transaction; inside another one it is out of place. A span of
    /// several blocks is read whole before it is checked.
    fn feed_fast_commit(&mut self, block: &[u8], tid: Tid) {
        let pos = self.pos;
        if self.cur.is_some() {
            return self.stop(format!("fast commit at {pos} inside transaction {tid}"));
        }
        match jf::FastCommit::first_span(block) {
            Ok(s) if s.blocks > 1 => self.phase = Phase::FastSpan(Span { start: pos, blocks: vec![block.to_vec()], len: s.blocks }),
            Ok(_) => self.finish_fast_commit(&[block], pos, tid),
            Err(e) => self.stop(format!("fast commit at {pos}: {e}")),
        }
    }

    fn feed_span(&mut self, mut span: Span, block: &[u8]) {
        span.blocks.push(block.to_vec());
        if span.blocks.len() < span.len {
            self.phase = Phase::FastSpan(span);
            return;
        }
        let tid = self.expected;
        let blocks: Vec<&[u8]> = span.blocks.iter().map(Vec::as_slice).collect();
        self.finish_fast_commit(&blocks, span.start, tid);
        if matches!(self.phase, Phase::Done) {
            // A span that fails its checks fails from its first block.
            self.fail_start = self.fail_start.map(|_| span.start);
        }
    }

    /// Checks a fast commit whose blocks are all read, the last at the scan's position, and
    /// takes its transaction.
    fn finish_fast_commit(&mut self, blocks: &[&[u8]], start: LogPos, tid: Tid) {
        let pos = self.pos;
        let verify = self.verify_fast_commits;
        let f = match jf::FastCommit::decode_span(blocks, verify) {
            Ok(f) => f,
            Err(e) => return self.stop(format!("fast commit at {start}: {e}")),
        };
        if let Some(t) = f.tags.iter().find(|t| t.fs_block.get() >= self.fs.blocks) {
            return self.stop(format!("fast commit at {start} tags block {} outside the file system", t.fs_block));
        }
        let mut noted = Vec::with_capacity(f.notes.len());
        for note in &f.notes {
            match self.fs.inodes.and_then(|t| t.locate(note.ino)).filter(|(b, _)| b.get() < self.fs.blocks) {
                Some((block, offset)) => {
                    let tag = Tag { fs_block: block, flags: jf::tag_flags::MULTIWRITE | jf::tag_flags::METADATA, offset, len: crate::format::inode::NOTED_BYTES as u16, data_hash: 0 };
                    noted.push(ScanItem::Note { tag, note: *note, time_ns: note.time_ns(f.commit_time_ns) });
                }
                None => return self.stop(format!("fast commit at {start} notes inode {}, which the file system does not have", note.ino)),
            }
        }
        if !self.multiwrite {
            return self.stop(format!("fast commit at {start} has multiwrite tags but the journal lacks the feature"));
        }
        let mut items = Vec::with_capacity(f.tags.len());
        let mut at = 0usize;
        for tag in f.tags {
            if tag.is_in_place() {
                items.push(ScanItem::InPlace { tag });
                continue;
            }
            match take_record(tag, &f.stream, &mut at, verify) {
                Some(item) => items.push(item),
                None => return self.stop(format!("record for block {} of fast commit {tid} at {start} fails its tag hash", tag.fs_block)),
            }
        }
        items.extend(noted);
        self.txs.push(ScannedTx {
            region: self.region,
            tid,
            start,
            end: self.region.next(pos),
            items,
            revoke_blocks: Vec::new(),
            handle_count: f.handle_count,
            commit_time_ns: f.commit_time_ns,
        });
        self.expected = tid + 1;
    }
}

/// The record of multiwrite tag `tag` at `*at` of its stream (the decoders checked that the
/// tags' lengths sum to the stream's), moving `*at` past it; None if its bytes fail the tag's
/// hash (checked unless `verify` is false: the `fast_commit_unchecked` canary).
fn take_record(tag: Tag, stream: &[u8], at: &mut usize, verify: bool) -> Option<ScanItem> {
    let bytes = stream[*at..*at + tag.len as usize].to_vec();
    *at += tag.len as usize;
    (!verify || jf::data_hash(tag.fs_block, tag.offset, &bytes) == tag.data_hash).then_some(ScanItem::Record { tag, bytes })
}

/// The tid the journal continues with after recovery (see the module notes).
pub fn next_tid(scan: &Scan, probe: Option<&Probe>, start: &RecoveryStart) -> Tid {
    let probed = probe.map_or(Tid::ZERO, |p| p.max_tid_seen + 1);
    (scan.end_tid() + 2).max(probed).max(start.tid_bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::HomeBlock;

    /// Inode 5's slot (at byte 256 of its table block) as an append leaves it: `size`, mtime
    /// and ctime `t`, atime `a`.
    fn inode_slot(size: u64, t: i64, a: i64) -> Vec<u8> {
        let inode = crate::format::inode::Inode { mode: crate::format::inode::S_IFREG | 0o644, nlink: 1, size, mtime_ns: t, ctime_ns: t, atime_ns: a, generation: 7, ..Default::default() };
        let mut slot = vec![0u8; crate::format::inode::INODE_SIZE];
        inode.encode(5, &mut slot);
        slot
    }

    /// A note replayed over a base newer than it (a checkpoint wrote a later committed version
    /// of the table block home while the note's transaction was still in the log): the note's
    /// checksum is over a slot that holds a later transaction's bytes, and when that later
    /// transaction's record leaves a checksum byte out (it did not change), the replayed inode
    /// must still come out as the newest, checksum included. Seed 5000700 of the crash fuzzer.
    #[test]
    fn a_note_replayed_over_a_newer_base_leaves_a_valid_inode() {
        use crate::format::inode::{Inode, INODE_SIZE};
        let at = 256;
        let v27 = inode_slot(8000, 1_000, 900);
        // T28 notes an append (size and times); T29 appends again and sets the atime. Search
        // T29's time for a checksum whose low byte equals T28's (so that T29's record starts
        // at byte 1) and that the mixed slot does not share by chance.
        let t28 = 2_000;
        let v28 = inode_slot(8306, t28, 900);
        let v29 = (3_000..200_000)
            .map(|t| inode_slot(8500, t, 950))
            .find(|v| v[0] == v28[0] && v[1..4] != v28[1..4] && inode_slot(8306, t28, 950)[0] != v[0] && v27[0] != v[0])
            .expect("a time with such a checksum");
        let block_of = |slot: &[u8]| {
            let mut b = vec![0u8; 1024];
            b[at..at + INODE_SIZE].copy_from_slice(slot);
            b
        };
        let note = Patch::Inode { at: at as u16, ino: 5, size: 8306, time_ns: t28 };
        // What T29's differential metadata logs: the bytes that changed from T28's version.
        let changed: Vec<usize> = (0..INODE_SIZE).filter(|&i| v28[i] != v29[i]).collect();
        assert!(!changed.contains(&0));
        let records: Vec<Patch> = changed.iter().map(|&i| Patch::Bytes((at + i) as u16, vec![v29[i]])).collect();
        let mut patches = vec![note];
        patches.extend(records);
        let r = ReplayBlock { fs_block: HomeBlock::new(3), base: ReplayBase::Disk, patches, kind: BlockKind::FinalMeta };
        for base in [&v27, &v28, &v29] {
            let mut b = block_of(base);
            r.apply_patches(&mut b, false);
            assert_eq!(&b[at..at + INODE_SIZE], &v29[..], "over the base of T{}", if base == &v27 { 28 } else if base == &v28 { 29 } else { 30 });
            assert!(Inode::decode(5, &b[at..]).is_ok());
        }
        // The canary, replay leaving the checksum the base had, fails.
        let mut b = block_of(&v27);
        r.apply_patches(&mut b, true);
        assert!(Inode::decode(5, &b[at..]).is_err(), "a note's checksum over the newer base should fail");
    }

    /// A fast commit's inode notes: one naming an inode of the file system is taken as a note on
    /// its table block; one naming inode 0 or an inode past the count ends the log there, and
    /// a scan that knows no inode tables ends it at any note.
    #[test]
    fn the_scan_takes_notes_of_real_inodes_and_ends_the_log_at_others() {
        let tables = InodeTables { first_group_block: 10, blocks_per_group: 100, group_count: 2, inodes_per_group: 32, inode_count: 64, per_block: 16 };
        let fast = |ino: u32| {
            let bytes = vec![7u8; 128];
            let block = HomeBlock::new(150);
            let tag = Tag { fs_block: block, flags: jf::tag_flags::MULTIWRITE, offset: 0, len: 128, data_hash: jf::data_hash(block, 0, &bytes) };
            let notes = vec![jf::InodeNote { ino, age_ns: 5, size: 4224 }];
            let f = jf::FastCommit { tid: Tid::new(9), tags: vec![tag], stream: bytes, handle_count: 1, commit_time_ns: 1_000, compact: true, notes, short_notes: false };
            f.encode_span(4096).remove(0)
        };
        let scan = |ino: u32, inodes: Option<InodeTables>| {
            let mut s = Scan::at(LogRegion::internal(0, 64), FsBounds { blocks: 300, inodes }, true, LogPos::new(1), Tid::new(9));
            s.feed(&fast(ino));
            s
        };
        let s = scan(33, Some(tables));
        assert_eq!(s.txs.len(), 1, "{}", s.end_reason);
        let ScanItem::Note { tag, note, time_ns } = &s.txs[0].items[1] else { panic!("a note after the record: {:?}", s.txs[0].items) };
        assert_eq!((tag.fs_block, tag.offset, note.size, *time_ns), (HomeBlock::new(112), 0, 4224, 995), "inode 33: group 1's first");
        for (ino, inodes) in [(65, Some(tables)), (33, None)] {
            let s = scan(ino, inodes);
            assert!(s.txs.is_empty() && s.fail_start == Some(LogPos::new(1)), "inode {ino}: {:?}", s.txs);
            assert!(s.end_reason.contains(&format!("inode {ino}")), "{}", s.end_reason);
        }
        let s = scan(0, Some(tables));
        assert!(s.txs.is_empty() && s.end_reason.contains("inode 0"), "{}", s.end_reason);
    }

    /// The swept bound of a fallback to the older manylogs table copy: a whole transaction at
    /// or past the first tid missing from the run is damage; below it, or no sweep, is not.
    #[test]
    fn a_swept_transaction_recovery_does_not_reach_is_damage() {
        let (_, d) = merge_interleaved(Vec::new(), Tid::new(216), Vec::new(), Tid::new(0));
        assert!(d.is_none(), "no sweep: nothing to miss");
        let (_, d) = merge_interleaved(Vec::new(), Tid::new(216), Vec::new(), Tid::new(215));
        assert!(d.is_none(), "everything swept is home or replayed");
        let (_, d) = merge_interleaved(Vec::new(), Tid::new(216), Vec::new(), Tid::new(216));
        let d = d.expect("transaction 216 is whole in a log, and recovery did not find it");
        assert_eq!((d.tid, d.following, d.following_tids), (Tid::new(216), 1, (Tid::new(216), Tid::new(216))));
        assert!(d.reason.contains("does not reach"), "{}", d.reason);
    }
}

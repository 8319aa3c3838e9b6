//! The journaling core: transactions, commit, checkpoint, revoke and recovery, one file per
//! phase as in Linux jbd2. Nothing here performs I/O or reads a clock: callers pass the time in
//! and receive [`plan::IoPlan`]s to execute, then report completion (docs/DESIGN.md section 2).
//!
//! A transaction is logged as `[revoke*][descriptor data*]+[commit]`; where those blocks go is
//! the business of the [`placement::Placement`] (docs/DESIGN.md section 5: the ring of the internal
//! and external journals today). The core keeps the committed transactions that still owe
//! blocks to their final locations (`log`), oldest first, and asks the placement for space.
//!
//! Which lock protects what: the whole [`Journal`] and the [`crate::cache::Cache`] live under the
//! engine's state mutex. Commit and checkpoint I/O run outside it, on frozen copies.

pub mod checkpoint;
pub mod commit;
pub mod content;
pub mod datasync;
pub mod fallback;
pub mod placement;
pub mod plan;
pub mod recovery;
pub mod revoke;
pub mod scheduler;
pub mod swap;
pub mod transaction;
pub mod writeback;

#[cfg(test)]
mod tests;

use crate::ids::{DevBlock, HomeBlock};
use crate::faults::Faults;
use crate::cache::{BufKind, Cache};
use crate::format::journal::{Descriptor, RevokeBlock};
use content::{ContentPolicy, Route};
use placement::{Extent, Kept, Placement};
use crate::det::HashMap;
use std::collections::{BTreeSet, VecDeque};
use transaction::{Credits, HandleToken, Tid, Transaction, TxState};

/// The smallest transaction limit that every handle fits in (its credits are at most half of
/// it; the largest fixed handle, a rename, takes 28 blocks plus allocation).
pub const MIN_TX_BLOCKS: u64 = 64;

/// Credits set aside for later changes ([`Journal::reserve`]: staged appends) take at most
/// 1/RESERVED_SHARE of a transaction's blocks.
const RESERVED_SHARE: u64 = 4;

#[derive(Debug, Clone)]
pub struct JournalConfig {
    pub block_size: usize,
    /// Largest transaction, in journal blocks (jbd2: a quarter of the journal).
    pub max_tx_blocks: u64,
    /// The canaries this one honours ([`Faults`], test-only).
    pub faults: Faults,
    /// Checkpoint for space only when the placement as a whole runs low (`checkpoint=lazy`).
    pub lazy_checkpoint: bool,
    /// Background writeback of ordered in-place data (journal/writeback.rs): early writes start
    /// past this many blocks of the running transaction, and handles wait past twice as many
    /// (0: off).
    pub dirty_background_blocks: usize,
    /// fdatasync of overwrites writes them in place without a commit (journal/datasync.rs;
    /// `datasync=in_place`, the default) rather than committing (`datasync=commit`).
    pub datasync_in_place: bool,
    /// A transaction of records that fits this many blocks is written as one fast commit
    /// (0: never; `fast_commit=on`, `fast_commit_blocks=` and the journal's FAST_COMMIT and
    /// FAST_COMMIT_SPAN features).
    pub fast_commit_blocks: usize,
    /// Fast commits carry compact tags (the journal's FAST_COMMIT_COMPACT feature).
    pub fast_commit_compact: bool,
    /// Fast commits tell an inode's new size and times in a note instead of logging its
    /// changed bytes (the journal's FAST_COMMIT_NOTES feature, under differential metadata):
    /// where the inode tables lie.
    pub inode_notes: Option<crate::format::inode::InodeTables>,
    /// Notes take the short form where their sizes allow (the journal's
    /// FAST_COMMIT_SHORT_NOTES feature).
    pub short_notes: bool,
    /// New blocks the content policy writes in place go beside the commit under its one flush,
    /// named by in-place tags (the journal's IN_PLACE_TAGS feature, a ring placement, commits
    /// not pipelined; docs/FORMAT.md, "In-place tags"), instead of written and flushed before
    /// it.
    pub in_place_tags: bool,
}

impl JournalConfig {
    /// The configuration for a placement of `capacity` journal blocks.
    pub fn new(capacity: u64, block_size: usize) -> Self {
        let max_tx_blocks = (capacity / 4).max(8);
        JournalConfig { block_size, max_tx_blocks, faults: Faults::default(), lazy_checkpoint: false, dirty_background_blocks: 0, datasync_in_place: false, fast_commit_blocks: 0, fast_commit_compact: false, inode_notes: None, short_notes: false, in_place_tags: false }
    }
}

/// A committed transaction still occupying log space.
#[derive(Debug)]
pub struct LoggedTx {
    pub tid: Tid,
    pub state: TxState,
    /// Where its placement put it.
    pub at: Extent,
    /// Blocks whose newest committed copy lives in this transaction and is not yet at its
    /// final location. The transaction's space is free when this is empty.
    pub checkpoint: BTreeSet<HomeBlock>,
    /// Every block this transaction logged (to forget `logged_copies` when it leaves the log).
    pub logged: Vec<HomeBlock>,
    /// How many of those copies a checkpoint wrote home (the others were superseded by newer
    /// copies or freed: counted as skipped when the transaction is released).
    pub home: u64,
}

/// Why a handle could not start yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// The running transaction is full: commit it first.
    NeedCommit,
    /// The log has no room: checkpoint (or let the in-flight commit finish) first.
    NeedSpace,
    /// The running transaction holds too much in-place data not yet written: let background
    /// writeback drain it first (journal/writeback.rs).
    NeedWriteback,
}

pub struct Journal {
    cfg: JournalConfig,
    policy: Box<dyn ContentPolicy>,
    /// Where the journal lives ([`Self::placement`] to ask it).
    placement: Box<dyn Placement>,
    running: Transaction,
    /// The transaction whose commit writes are in flight, and where it sits in the log.
    committing: Option<commit::Committing>,
    /// Transactions whose commit writes completed and whose flush is in flight (pipelined
    /// commits: journal/commit.rs, "Pipelined commits"), oldest first. Not durable yet: their
    /// syncs wait, their frees are held back and no checkpoint writes their blocks home.
    flushing: VecDeque<commit::Committing>,
    log: VecDeque<LoggedTx>,
    /// Highest committed tid (0 = none yet).
    committed_tid: Tid,
    /// Highest tid a sync asked to commit ([`Self::request_commit`]).
    commit_requested: Tid,
    /// Blocks with a copy in the log, and the newest tid holding one: freeing such a block
    /// needs a revoke record.
    logged_copies: HashMap<HomeBlock, Tid>,
    /// The first error that aborted the journal; nothing commits after it ([`Self::abort`]).
    aborted: Option<String>,
    /// Checkpoint accounting (manylogs paper, Fig. 7b): what checkpoints did not have to write.
    cp: CheckpointCounts,
    /// The running transaction's in-place blocks written early, with the version written
    /// (journal/writeback.rs).
    early: HashMap<HomeBlock, std::sync::Arc<Vec<u8>>>,
    /// fdatasyncs of overwrites waiting to be written in place (journal/datasync.rs).
    datasync: datasync::DatasyncQueue,
    /// Credits set aside in the running transaction for changes that will join it without
    /// waiting for admission (staged appends, engine/stage.rs): counted by every admission
    /// as if already logged, given back before the transaction commits.
    reserved: Credits,
}

counters! {
    /// What the checkpoints of a mount wrote and what they were spared.
    #[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
    pub struct CheckpointCounts {
        /// Blocks written home.
        pub blocks: u64,
        /// The device writes they took once adjacent blocks were merged into runs.
        pub runs: u64,
        /// Of the blocks written home, those copied from a log (not in the cache).
        pub copied: u64,
        /// Logged copies of released transactions that no checkpoint wrote: a newer logged copy
        /// of the block superseded them (an overwrite skipped), or the block was freed.
        pub skipped: u64,
        /// Parked blocks loaded back from a log for a read or a change.
        pub log_reads: u64,
    }
}

impl Journal {
    /// A journal over an empty (clean or just recovered) placement whose next transaction is
    /// `next_tid`.
    pub fn new(cfg: JournalConfig, policy: Box<dyn ContentPolicy>, placement: Box<dyn Placement>, next_tid: Tid) -> Self {
        assert!(next_tid >= Tid::new(1));
        Journal {
            cfg,
            policy,
            placement,
            running: Transaction::new(next_tid),
            committing: None,
            flushing: VecDeque::new(),
            log: VecDeque::new(),
            committed_tid: next_tid - 1,
            commit_requested: Tid::ZERO,
            logged_copies: HashMap::default(),
            aborted: None,
            cp: CheckpointCounts::default(),
            early: HashMap::default(),
            datasync: Default::default(),
            reserved: Credits::default(),
        }
    }

    /// Takes over the blocks a recovery kept logged (manylogs, [`placement::Snapshots::recovered_kept`]):
    /// each owed by its transaction, which stays in the log until a checkpoint copies them
    /// home; freeing one needs a revoke. Before the first transaction of the mount.
    pub fn adopt_logged(&mut self, kept: &[placement::LoggedBlock]) {
        assert!(self.log.is_empty() && self.running.is_empty() && !self.commit_in_flight(), "blocks kept logged are taken over at mount");
        let mut by_tid: std::collections::BTreeMap<Tid, Vec<HomeBlock>> = Default::default();
        for k in kept {
            assert!(k.tid < self.running.tid, "a kept block's transaction is older than the next");
            by_tid.entry(k.tid).or_default().push(k.block);
            self.logged_copies.insert(k.block, k.tid);
        }
        for (tid, blocks) in by_tid {
            let checkpoint = blocks.iter().copied().collect();
            self.log.push_back(LoggedTx { tid, state: TxState::Committed, at: Extent { start: 0, end: 0, blocks: 0 }, checkpoint, logged: blocks, home: 0 });
        }
    }

    /// The committed transaction `tid` still in the log (the log is in tid order).
    pub fn logged_tx_mut(&mut self, tid: Tid) -> Option<&mut LoggedTx> {
        let i = self.log.binary_search_by_key(&tid, |t| t.tid).ok()?;
        self.log.get_mut(i)
    }

    /// Journal blocks (in the placement's units: [`Placement::tx_cost`]) a transaction of
    /// `units` logged blocks or records and `revokes` revoke records takes at most. A record never takes more room than a block; a differential
    /// metadata block yields at most [`commit::MAX_DIFF_RANGES`] tags; each descriptor may
    /// leave one multiwrite block partly filled.
    pub fn tx_blocks(&self, units: u64, revokes: u64) -> u64 {
        self.tx_blocks_tagged(units, 0, revokes)
    }

    /// [`Self::tx_blocks`] with `tagged` in-place tags too (a tag each, no logged block).
    pub fn tx_blocks_tagged(&self, units: u64, tagged: u64, revokes: u64) -> u64 {
        self.placement.tx_cost(self.log_blocks(units, tagged, revokes), units, revokes)
    }

    /// Journal blocks such a transaction takes at most when laid out as a log.
    pub fn log_blocks(&self, units: u64, tagged: u64, revokes: u64) -> u64 {
        let per_desc = Descriptor::capacity(self.cfg.block_size) as u64;
        let per_revoke = RevokeBlock::capacity(self.cfg.block_size) as u64;
        let tags = units * commit::MAX_DIFF_RANGES as u64 + tagged;
        units + 2 * tags.div_ceil(per_desc).max(1) + revokes.div_ceil(per_revoke) + 1
    }

    /// Whether this journal's commits carry the policy's in-place blocks as in-place tags,
    /// written beside the commit under its flush ([`JournalConfig::in_place_tags`]).
    pub fn tags_in_place(&self) -> bool {
        self.cfg.in_place_tags && self.policy.in_place_beside_commit()
    }

    /// How the content policy writes a transaction's new whole blocks, as `fresh_blocks=`
    /// resolved at mount (docs/JOURNALING.md, "New blocks in place"): None where the policy
    /// has no such choice (it logs every block, or writes data in place anyway).
    pub fn new_blocks(&self) -> Option<&'static str> {
        if !self.policy.chooses_new_blocks() {
            return None;
        }
        Some(match (self.policy.in_place_beside_commit(), self.tags_in_place()) {
            (false, _) => "logged",
            (true, true) => "in place, beside the commit under its flush (in-place tags)",
            (true, false) => "in place, written and flushed before the commit",
        })
    }

    /// In-place tags transaction `tx` carries (its blocks written in place, when tagged).
    pub fn in_place_tagged(&self, tx: &Transaction) -> u64 {
        if self.tags_in_place() { tx.final_data.len() as u64 } else { 0 }
    }

    fn running_blocks(&self) -> u64 {
        self.tx_blocks_tagged(self.running.units(), self.in_place_tagged(&self.running), self.running.revoked.len() as u64)
    }

    /// Journal blocks free for new transactions.
    pub fn free_blocks(&self) -> u64 {
        self.placement.free_blocks()
    }

    /// The placement, to ask what it is and what it offers (its name, its defaults, its
    /// capacity); the journal alone changes it.
    pub fn placement(&self) -> &dyn Placement {
        self.placement.as_ref()
    }

    /// The journal's configuration (limits, switches).
    pub fn cfg(&self) -> &JournalConfig {
        &self.cfg
    }

    /// What is journaled: the content policy.
    pub fn policy(&self) -> &dyn ContentPolicy {
        self.policy.as_ref()
    }

    /// The running transaction's tid (the one new changes join).
    pub fn running_tid(&self) -> Tid {
        self.running.tid
    }

    /// When the running transaction took its first change (None: it has none).
    pub fn running_since_ns(&self) -> Option<u64> {
        self.running.start_ns
    }

    /// Handles that joined the running transaction.
    pub fn running_handles(&self) -> u32 {
        self.running.handles
    }

    /// The running transaction's journal bytes split in two: what its commit logs once
    /// whatever joins it (metadata blocks logged whole), and what its handles' own changes
    /// log (data blocks logged whole, the bytes of multiwrite records). The batching window
    /// weighs one against the other (scheduler, `batch_wait`).
    pub fn running_shape(&self) -> (u64, u64) {
        let r = &self.running;
        let bs = self.cfg.block_size as u64;
        let whole_meta = r.journaled.iter().filter(|b| !r.journaled_data.contains(b) && !r.meta_base.contains_key(b)).count() as u64;
        let own = r.journaled_data.len() as u64 * bs + r.ranges.values().map(|s| s.bytes()).sum::<u64>();
        (whole_meta * bs, own)
    }

    /// Whether the running transaction holds no change.
    pub fn running_is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// The blocks the running transaction writes in place when it commits.
    pub fn running_in_place(&self) -> impl Iterator<Item = &HomeBlock> {
        self.running.final_data.iter().chain(&self.running.final_unordered)
    }

    /// The transaction whose commit is in flight, if one is.
    pub fn committing_tid(&self) -> Option<Tid> {
        self.committing.as_ref().map(|c| c.tx.tid)
    }

    /// Whether a commit in flight (its writes, or its flush) writes `block` in place.
    pub fn committing_writes_in_place(&self, block: HomeBlock) -> bool {
        self.in_flight().any(|c| c.tx.final_data.contains(&block) || c.tx.final_unordered.contains(&block))
    }

    /// The commits in flight, oldest first: those whose flush is in flight, then the one
    /// whose writes are.
    fn in_flight(&self) -> impl Iterator<Item = &commit::Committing> {
        self.flushing.iter().chain(self.committing.as_ref())
    }

    /// Whether any commit is in flight (writing, or waiting for its flush).
    pub fn commit_in_flight(&self) -> bool {
        self.committing.is_some() || !self.flushing.is_empty()
    }

    /// Commits whose writes completed and whose flush is in flight.
    pub fn flushing_count(&self) -> usize {
        self.flushing.len()
    }

    /// Whether a flusher thread has a flush in flight, of commits or of fdatasync steps.
    pub fn flush_in_flight(&self) -> bool {
        !self.flushing.is_empty() || self.datasync_flushing() > 0
    }

    /// Whether a commit in flight logs `block` (a copy of it may replay).
    fn in_flight_logs(&self, block: HomeBlock) -> bool {
        self.in_flight().any(|c| c.tx.journaled.contains(&block) || c.tx.ranges.contains_key(&block))
    }

    /// The oldest committed transaction still owed to checkpoint (None: nothing is owed).
    pub fn oldest_owed_tid(&self) -> Option<Tid> {
        self.log.front().map(|t| t.tid)
    }

    /// What the checkpoints of this mount wrote and were spared.
    pub fn checkpoint_counts(&self) -> CheckpointCounts {
        self.cp
    }

    /// A parked block was read back from its log (for a read or a change).
    pub fn note_log_read(&mut self) {
        self.cp.log_reads += 1;
    }

    /// fdatasyncs served in place so far (their tickets).
    pub fn datasyncs_done(&self) -> u64 {
        self.datasync.done
    }

    /// The newest committed transaction (0: none yet).
    pub fn committed_tid(&self) -> Tid {
        self.committed_tid
    }

    /// Asks for transaction `tid` to be committed (a sync waits for it). Whether this raised
    /// the request: a commit may be due that was not before.
    pub fn request_commit(&mut self, tid: Tid) -> bool {
        let raised = tid > self.commit_requested;
        self.commit_requested = self.commit_requested.max(tid);
        raised
    }

    /// Why the journal stopped, if it did: nothing commits after it.
    pub fn aborted(&self) -> Option<&str> {
        self.aborted.as_deref()
    }

    /// Where the placement keeps the newest committed version of `block` addressable while it
    /// is owed to checkpoint ([`placement::Parking::frozen_copy`]), if it parks blocks.
    pub fn frozen_copy(&self, block: HomeBlock) -> Option<u64> {
        self.placement.parking().and_then(|p| p.frozen_copy(block))
    }

    /// The tag's data hash of [`Self::frozen_copy`], if the placement keeps one.
    pub fn frozen_hash(&self, block: HomeBlock) -> Option<u32> {
        self.placement.parking().and_then(|p| p.frozen_hash(block))
    }

    /// Whether the placement parks blocks on the file-system device (a checkpoint copies them
    /// home from there).
    pub fn parks_on_device(&self) -> bool {
        self.placement.parking().is_some_and(|p| p.parks_on_device())
    }

    /// Whether the placement parks blocks at all (the cache may then drop owed buffers).
    pub fn parks(&self) -> bool {
        self.placement.parking().is_some()
    }

    /// Whether the placement snapshots its map of logged blocks (a periodic snapshot is due).
    pub fn snapshots(&self) -> bool {
        self.placement.snapshots().is_some()
    }

    /// The disk head moved to block `at` of the file-system device for I/O the journal did
    /// not log: a placement that follows the head takes note.
    pub fn note_position(&mut self, at: DevBlock) {
        if let Some(h) = self.placement.head() {
            h.note_position(at);
        }
    }

    /// Commits placed near the disk head, for a placement that follows it.
    pub fn near_head(&mut self) -> Option<placement::NearHead> {
        self.placement.head().map(|h| h.near_head())
    }

    /// The blocks a recovery left logged, for [`Self::adopt_logged`] and the cache.
    pub fn recovered_kept(&self) -> Vec<placement::LoggedBlock> {
        self.placement.snapshots().map_or_else(Vec::new, |s| s.recovered_kept())
    }

    /// What the log keeps once its first `released` transactions go: the oldest one left,
    /// which is the commit in flight when a checkpoint beside it releases everything before
    /// (its blocks are being written, and the tail must not pass them).
    pub fn kept(&self, released: usize) -> Kept {
        let oldest = self.log.get(released).map(|t| (t.tid, t.at)).or_else(|| self.in_flight().next().map(|c| (c.tx.tid, c.at)));
        Kept { oldest, next_tid: self.running.tid, home: None }
    }

    /// The largest credits one handle may ask for.
    pub fn max_handle_credits(&self) -> Credits {
        let blocks = self.cfg.max_tx_blocks / 2;
        Credits { blocks, revokes: RevokeBlock::capacity(self.cfg.block_size) as u64 }
    }

    /// Whether a handle of `credits` fits now, or what must happen first.
    fn admit(&self, credits: Credits) -> Result<(), Admit> {
        assert_eq!(self.running.state, TxState::Running);
        let max = self.max_handle_credits();
        assert!(credits.blocks <= max.blocks && credits.revokes <= max.revokes, "handle credits {credits:?} over the limit {max:?}");
        let after = self.tx_blocks_tagged(self.running.units() + self.reserved.blocks + credits.blocks, self.in_place_tagged(&self.running), self.running.revoked.len() as u64 + self.reserved.revokes + credits.revokes);
        if after > self.cfg.max_tx_blocks && !self.running.is_empty() {
            return Err(Admit::NeedCommit);
        }
        // Data written in place by the commit (ordered, writeback) is not logged but is held
        // in memory until the commit: bound it too.
        if (self.running.final_data.len() + self.running.final_unordered.len()) as u64 >= self.cfg.max_tx_blocks * writeback::IN_PLACE_BOUND {
            return Err(Admit::NeedCommit);
        }
        if !self.placement.admit(after) {
            return Err(Admit::NeedSpace);
        }
        let limit = self.cfg.dirty_background_blocks * 2;
        if limit > 0 && self.unwritten_in_place() > limit {
            return Err(Admit::NeedWriteback);
        }
        Ok(())
    }

    /// Admits a handle that may log up to `credits` more blocks, or says what must happen first.
    pub fn handle_start(&mut self, credits: Credits, now_ns: u64) -> Result<HandleToken, Admit> {
        self.admit(credits)?;
        if self.running.start_ns.is_none() {
            self.running.start_ns = Some(now_ns);
        }
        self.running.handles += 1;
        Ok(HandleToken { tid: self.running.tid, credits, units_before: self.running.units(), revoked_before: self.running.revoked.len() })
    }

    /// Sets `credits` aside in the running transaction, under the same admission as a handle
    /// (it may be refused for the same reasons), for changes that will join it later through
    /// [`Self::handle_start_reserved`]. Given back with [`Self::unreserve`] before the
    /// transaction commits.
    pub fn reserve(&mut self, credits: Credits) -> Result<(), Admit> {
        // Set-aside credits are a worst case held for the whole transaction (a staged append
        // of 128 bytes holds a block, and its inode's table block, which fifteen other files
        // may share): many of them would fill transactions with room nobody uses and force
        // commits on the handles they shut out. They take a quarter of one at most.
        if (self.reserved.blocks + credits.blocks) * RESERVED_SHARE > self.cfg.max_tx_blocks {
            return Err(Admit::NeedCommit);
        }
        self.admit(credits)?;
        self.reserved.blocks += credits.blocks;
        self.reserved.revokes += credits.revokes;
        Ok(())
    }

    /// Gives back credits set aside by [`Self::reserve`].
    pub fn unreserve(&mut self, credits: Credits) {
        assert!(self.reserved.blocks >= credits.blocks && self.reserved.revokes >= credits.revokes, "unreserve {credits:?} of {:?} set aside", self.reserved);
        self.reserved.blocks -= credits.blocks;
        self.reserved.revokes -= credits.revokes;
    }

    /// A handle within credits set aside earlier (the reservation stays): admitted without
    /// waiting, since the room was counted when it was set aside.
    pub fn handle_start_reserved(&mut self, credits: Credits, now_ns: u64) -> HandleToken {
        assert_eq!(self.running.state, TxState::Running);
        assert!(self.reserved.blocks >= credits.blocks && self.reserved.revokes >= credits.revokes, "a reserved handle of {credits:?} with {:?} set aside", self.reserved);
        if self.running.start_ns.is_none() {
            self.running.start_ns = Some(now_ns);
        }
        self.running.handles += 1;
        HandleToken { tid: self.running.tid, credits, units_before: self.running.units(), revoked_before: self.running.revoked.len() }
    }

    /// Ends a handle; checks it stayed within its credits. A handle over its credits is a broken
    /// estimate (a bug): its transaction may not fit the room it was admitted to, so the caller
    /// must stop the journal ([`Self::commit_failed`]) instead of committing it.
    pub fn handle_stop(&mut self, token: HandleToken) -> Result<(), String> {
        if token.tid != self.running.tid {
            return Err(format!("a handle of transaction {} ended in transaction {}", token.tid, self.running.tid));
        }
        let added = self.running.units().saturating_sub(token.units_before);
        let revoked = self.running.revoked.len().saturating_sub(token.revoked_before) as u64;
        if added > token.credits.blocks {
            return Err(format!("a handle logged {added} blocks with {} credits", token.credits.blocks));
        }
        if revoked > token.credits.revokes {
            return Err(format!("a handle revoked {revoked} blocks with {} credits", token.credits.revokes));
        }
        debug_assert!(self.running_blocks() <= self.free_blocks() + 1);
        Ok(())
    }

    /// A handle changed metadata block `block` (already cached): it is logged by this
    /// transaction. `fresh`: the block was just allocated and zeroed.
    pub fn dirty_metadata(&mut self, cache: &mut Cache, block: HomeBlock, fresh: bool) {
        let tid = self.running.tid;
        let dmeta = self.policy.differential_metadata();
        let bs = self.cfg.block_size;
        let buf = cache.get(block).expect("dirtied block is cached");
        buf.kind = BufKind::Meta;
        buf.tx = Some(tid);
        if dmeta && !self.running.journaled.contains(&block) {
            // The contents before this transaction's first change: what replay starts from.
            let base = if fresh { std::sync::Arc::new(vec![0u8; bs]) } else { buf.data.clone() };
            self.running.meta_base.insert(block, base);
        }
        if fresh {
            self.running.fresh.insert(block);
        }
        self.running.journaled.insert(block);
        self.running.journaled_data.remove(&block);
        // jbd2's journal_cancel_revoke: a block logged again after its revoke in the same
        // transaction must replay.
        self.running.revoked.remove(&block);
    }

    /// A handle changed `len` bytes at `offset` of file-data block `block` (already cached);
    /// `fresh`: the block was just allocated (zero-filled). The content policy routes it.
    #[allow(clippy::too_many_arguments)]
    pub fn dirty_data(&mut self, cache: &mut Cache, block: HomeBlock, offset: usize, len: usize, call_len: usize, fresh: bool, durable: bool) {
        let tid = self.running.tid;
        let bs = self.cfg.block_size;
        let buf = cache.get(block).expect("dirtied block is cached");
        buf.kind = BufKind::Data;
        buf.tx = Some(tid);
        buf.durable = durable;
        // Allocated by the running transaction: nothing committed refers to the block yet.
        let fresh_here = fresh || self.running.fresh.contains(&block);
        let (mut route, seq) = self.policy.route(buf.seq, len, call_len, bs, fresh_here);
        buf.seq = seq;
        if durable && matches!(route, Route::FinalBeforeCommit | Route::FinalWithCommit) {
            // O_DUR (manylogs paper, section IV-D): always logged, whatever the policy. Logging
            // a block whose older version went in place is always safe (the newer copy replays
            // over it); the reverse is what revoke records guard.
            route = Route::JournalFull;
        }
        // One way per block within a transaction (wasteless's new blocks in place decide per
        // update, not per sequence): a block this transaction already writes in place stays
        // so, one it already logs stays logged.
        let tx = &self.running;
        if !durable && route.is_journal() && tx.final_data.contains(&block) {
            route = Route::FinalBeforeCommit;
        } else if route == Route::FinalBeforeCommit && (tx.journaled.contains(&block) || tx.ranges.contains_key(&block)) {
            route = if len < bs { Route::JournalRecord } else { Route::JournalFull };
        }
        let has_logged_copy = self.logged_copies.contains_key(&block) || self.in_flight_logs(block);
        let tx = &mut self.running;
        if fresh {
            tx.fresh.insert(block);
        }
        match route {
            Route::JournalFull => {
                // Logged whole from now on, even where an earlier update of this transaction
                // meant to write it in place (an O_DUR file): the logged copy replays over
                // whatever reached the block.
                tx.final_data.remove(&block);
                tx.forget_ranges(block);
                tx.journaled.insert(block);
                tx.journaled_data.insert(block);
                tx.revoked.remove(&block);
            }
            Route::JournalRecord if tx.journaled.contains(&block) => {}
            Route::JournalRecord => {
                let r = tx.ranges.entry(block).or_default();
                let delta = r.add(offset as u32, (offset + len) as u32);
                tx.record_count = (tx.record_count as i64 + delta) as u64;
                if r.covers(bs as u32) {
                    tx.forget_ranges(block);
                    tx.journaled.insert(block);
                    tx.journaled_data.insert(block);
                }
                tx.revoked.remove(&block);
            }
            Route::FinalBeforeCommit | Route::FinalWithCommit => {
                if route == Route::FinalBeforeCommit {
                    tx.final_data.insert(block);
                } else {
                    tx.final_unordered.insert(block);
                }
                // A block written in place while older logged copies of it (from a journaled
                // sequence that reached its final location) remain in the log: those copies
                // must never replay over the in-place data once this transaction commits.
                if has_logged_copy {
                    tx.revoked.insert(block);
                }
            }
        }
        debug_assert!(
            !(tx.final_data.contains(&block) && (tx.journaled.contains(&block) || tx.ranges.contains_key(&block))),
            "a block is either journaled or written in place within one transaction"
        );
    }

    /// Whether the running transaction should commit now for its age.
    pub fn commit_due(&self, now_ns: u64, interval_ns: u64) -> bool {
        match self.running.start_ns {
            Some(start) if !self.running.is_empty() => now_ns.saturating_sub(start) >= interval_ns,
            _ => false,
        }
    }

    /// Whether someone waits for a transaction that has not started committing.
    pub fn commit_wanted(&self) -> bool {
        self.commit_requested >= self.running.tid && !self.running.is_empty()
    }

    /// Whether free log space is low enough to checkpoint (thesis section 3.3: ext3 starts
    /// when free space falls to a quarter of the journal).
    pub fn space_low(&self) -> bool {
        if self.cfg.lazy_checkpoint {
            self.placement.space_exhausted(self.cfg.max_tx_blocks)
        } else {
            self.placement.space_low(self.cfg.max_tx_blocks)
        }
    }

    /// The tid whose commit makes everything done so far durable.
    pub fn current_tid(&self) -> Tid {
        if self.running.is_empty() {
            self.running.tid - 1
        } else {
            self.running.tid
        }
    }

}

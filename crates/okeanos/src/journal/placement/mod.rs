//! Placements: *where* the journal lives (docs/DESIGN.md sections 1 and 5, the second axis).
//!
//! The journal core decides *what* a transaction logs and *when* it commits and checkpoints;
//! it hands each committed transaction to a [`Placement`] as [`Records`], the transaction's
//! journal blocks in order. Those blocks are position-independent (the commit block's hash
//! chains their contents, not their addresses), so a placement may write them into a ring,
//! send them to a server or store them in non-volatile memory. The placement says how to make
//! them durable (the writes and flushes of a [`Stage`]), owns the space they take, records
//! what mount needs to find them again, and frees the space when checkpoint releases them, in
//! whatever order suits it. It never sees which content policy filled the blocks, and the core
//! never asks which placement it has.
//!
//! Recovery goes through the placement too ([`Recovery`]): it says where its log of committed
//! transactions begins ([`RecoveryStart`]: positions on a device, the first one and its tid)
//! and how to mark the log recovered; the scan, revoke and replay passes (`journal/recovery/`)
//! are shared. A placement whose log is not a local device (a server) reads it into an
//! in-memory device first and describes that. A placement that keeps a table instead of a log
//! (nvm) decides from the table when it is opened and hands recovery the copies to write home.
//!
//! Placements: [`Ring`] (`internal`: a region of the file-system device; `external`: a device
//! or file of its own), [`Remote`] (a journal server, with the internal ring as fallback) and
//! [`NvmSlots`] (`nvm`: UBJ's slot table in non-volatile memory) and [`Manylogs`] (a small
//! log in every block group, each commit in the one nearest the disk head).

pub mod manylogs;
pub mod nvm;
mod remote;
mod ring;

pub use manylogs::Manylogs;
pub use nvm::NvmSlots;
pub use remote::Remote;
pub use ring::{LogRegion, RegionKind, Ring};

use super::plan::{BlockKind, DevId, IoPlan, IoStage, IoWrite, NvmOp, RemoteOp};
use crate::ids::{DevBlock, HomeBlock, LogPos, Tid};
use std::sync::Arc;

/// A committed transaction's journal blocks, in log order: `[revoke*]([descriptor]
/// [block | multiwrite]*)+[commit]`. Their count is what the transaction takes of the
/// placement's space.
#[derive(Debug)]
pub struct Records {
    pub tid: Tid,
    pub blocks: Vec<(Arc<Vec<u8>>, BlockKind)>,
    /// The same transaction as whole blocks: each block it logged (whole, as records or as
    /// differential metadata) in its committed version, for a placement that keeps block
    /// images (nvm; empty unless [`Parking::wants_images`]). Shared with the cache, not copied.
    pub images: Vec<BlockImage>,
    /// The blocks it revokes.
    pub revoked: Vec<HomeBlock>,
    /// Every block it logs. A placement that keeps logged blocks addressable
    /// ([`Parking::frozen_copy`]) maps those logged whole.
    pub logged: Vec<LoggedBlockCopy>,
    /// The highest block the commit writes in place (outside the journal) before its records,
    /// if any: where the disk head will be (manylogs puts the records near it).
    pub near: Option<HomeBlock>,
}

/// A committed block whole, for a placement that keeps block images ([`Records::images`]).
#[derive(Debug, Clone)]
pub struct BlockImage {
    pub block: HomeBlock,
    pub data: Arc<Vec<u8>>,
    /// How it counts: journaled data or metadata.
    pub kind: BlockKind,
}

/// A block a transaction logs, and its whole image among the transaction's journal blocks
/// when it is logged whole and unescaped (None: as records, or escaped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoggedBlockCopy {
    pub block: HomeBlock,
    pub whole: Option<WholeImage>,
}

/// A block logged whole: its index among [`Records::blocks`] and the tag's data hash of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WholeImage {
    pub index: usize,
    pub hash: u32,
}

/// Where a placement put one transaction: opaque to the core, handed back at release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// First and past-the-end position, in the placement's own terms (ring: log blocks).
    pub start: u64,
    pub end: u64,
    /// Journal blocks it takes.
    pub blocks: u64,
}

/// Writes, flushes of the devices named and operations on a journal server: one step of a
/// plan, done when all are.
#[derive(Debug, Default)]
pub struct Stage {
    pub writes: Vec<IoWrite>,
    pub flush: Vec<DevId>,
    pub remote: Vec<RemoteOp>,
    /// Stores, flushes and fences on NVM, in order.
    pub nvm: Vec<NvmOp>,
}

impl Stage {
    /// Appends this stage to `io`.
    pub fn push_to(self, io: &mut IoPlan) {
        io.push_stage(IoStage { copies: Vec::new(), writes: self.writes, flush: self.flush, remote: self.remote, nvm: self.nvm });
    }
}

/// The oldest transaction a placement must keep after a checkpoint, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kept {
    /// The oldest transaction still needed and where it is (None: the log is empty).
    pub oldest: Option<(Tid, Extent)>,
    /// The tid the next transaction gets.
    pub next_tid: Tid,
    /// For a placement that snapshots its map of logged blocks ([`Placement::snapshots`], [`Snapshots`]):
    /// the newest tid up to which every change is at its final location once the checkpoint's
    /// writes are durable, or in a block [`Snapshots::keeps_logged`] (None: no new snapshot,
    /// keep the last one's).
    pub home: Option<Tid>,
}

/// What recovery does for a placement, in one of two shapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovery {
    /// Scan these logs from where each begins (none: nothing to recover). Their transactions
    /// are replayed as one sequence: one revoke table, one replay plan, so a revoke in a later
    /// log covers copies in an earlier one (ring, remote, manylogs).
    Logs(Vec<RecoveryStart>),
    /// The placement read its table when it was opened and decided already (nvm): write these
    /// copies home, then its recovered stage empties the table.
    Table(TableReplay),
}

impl Recovery {
    /// Nothing to replay and nothing to mark recovered.
    pub fn is_empty(&self) -> bool {
        match self {
            Recovery::Logs(l) => l.is_empty(),
            Recovery::Table(t) => t.copies.is_empty() && !t.marks,
        }
    }

    /// The logs to scan (none for a table).
    pub fn logs(&self) -> &[RecoveryStart] {
        match self {
            Recovery::Logs(l) => l,
            Recovery::Table(_) => &[],
        }
    }
}

/// One copy a table names: the newest committed copy of `block`, in `slot` at byte `at` of
/// the placement's non-volatile memory, whose data must match `crc` (`format::nvm::data_crc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotCopy {
    pub block: HomeBlock,
    pub slot: u64,
    pub at: u64,
    pub crc: u32,
}

/// A table's recovery, decided when the placement was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableReplay {
    /// Copies to write home, in block order.
    pub copies: Vec<SlotCopy>,
    /// The recovered stage has entries to change even with nothing to copy.
    pub marks: bool,
    /// The table held something a crash left (frozen copies, tombstones, entries of a commit
    /// that did not complete, torn entries): recovery reports on it.
    pub report: bool,
    /// Newest committed tid (the commit word), tombstones and entries read, for the report.
    pub last_tid: Tid,
    pub tombstones: u64,
    pub slots_scanned: u64,
    /// The report's account of the table, one line.
    pub summary: String,
    /// The journal continues at or above this.
    pub next_tid: Tid,
    /// How long reading the table took when the placement was opened (the report's scan time).
    pub read_ns: u64,
}

/// Where recovery's scan begins in a placement's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryStart {
    /// The log's positions and the device block of each.
    pub region: LogRegion,
    /// The first position to read, and the tid expected there.
    pub pos: LogPos,
    pub tid: Tid,
    /// The log may hold multiwrite records.
    pub multiwrite: bool,
    /// The log is one of several whose transactions interleave (manylogs): its tids increase
    /// but need not be consecutive, and recovery merges every log's by tid. None: the log
    /// holds consecutive tids from `tid`.
    pub interleaved: Option<Interleaved>,
    /// Every tid present in the log is below this (the placement knows how many transactions
    /// its log can hold); the journal continues at or beyond it.
    pub tid_bound: Tid,
    /// Commits the crashed mount may have had in flight at once (its journal superblock's
    /// `pipeline`; 0 where commits are not pipelined): a committed transaction at most this
    /// many tids after a torn one is the torn tail of that pipeline, not damage.
    pub pipeline: u32,
}

/// What a table recorded about one of several interleaved logs (manylogs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interleaved {
    /// Position after the newest transaction that was durable when the table was written:
    /// the scan must reach it, or a committed transaction is missing.
    pub end: LogPos,
    /// Tid of the transaction at the scan's start when `end` is past it.
    pub tail_tid: Tid,
    /// The table's floor: the merged run of every log's transactions starts here (a log's own
    /// scan may start above it).
    pub floor: Tid,
    /// A transaction past `end` has at least this tid (newer than everything durable when the
    /// table was planned); an older one there is stale, as after a log swap.
    pub past_end_min: Tid,
    /// The newest whole transaction of this file system's life anywhere in the logs, when the
    /// newer table copy was invalid and the logs were swept for it (0: no sweep). At or past
    /// the first tid missing from recovery's merged run, it shows the newer copy was durable
    /// and is damaged: committed transactions are missing (manylogs::sweep_after_fallback).
    /// The same in every log's start.
    pub swept: Tid,
}

/// What a placement changes in the mount's defaults; an option given at mount wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Defaults {
    /// How long a committed block may stay owed before age sends it home (`expire=`): ext3's
    /// 30 s unless the placement says otherwise.
    pub expire: std::time::Duration,
    /// Selective content's LoggedWriteSize (`logged_write_size=`): write calls up to it are
    /// logged, larger ones go in place first. None: the policy's own default.
    pub logged_write_size: Option<usize>,
    /// In-place data written early in the background past this many bytes
    /// (`dirty_background_bytes=`; 0: only at commit).
    pub dirty_background_bytes: u64,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults { expire: std::time::Duration::from_secs(30), logged_write_size: None, dirty_background_bytes: 0 }
    }
}

/// Where the journal lives (docs/DESIGN.md section 5): what every placement does. What only
/// some do is a capability the placement offers through an accessor ([`Self::parking`],
/// [`Self::snapshots`], [`Self::swaps`], [`Self::fallback`], [`Self::head`]); the core asks for
/// it and does without when it is absent, and never infers it from the placement's kind.
pub trait Placement: Send + std::fmt::Debug {
    /// The placement's name in messages and reports ("internal", "external").
    fn name(&self) -> &'static str;
    /// Journal blocks in all: transaction limits are fractions of it (jbd2: a quarter).
    fn capacity(&self) -> u64;
    /// Journal blocks new transactions may take now.
    fn free_blocks(&self) -> u64;
    /// What a transaction takes of this placement's space, in the units of [`Self::capacity`]:
    /// `journal_blocks` laid out as a log, holding `units` logged blocks or records and
    /// `revokes` revoke records.
    fn tx_cost(&self, journal_blocks: u64, _units: u64, _revokes: u64) -> u64 {
        journal_blocks
    }
    /// Whether to checkpoint for space (ext3: when free space falls to a quarter of the
    /// journal, plus room for the largest transaction).
    fn space_low(&self, max_tx: u64) -> bool {
        self.free_blocks() < self.capacity() / 4 + max_tx
    }
    /// Whether to checkpoint for space with `checkpoint=lazy`: only when the placement as a
    /// whole runs low (the same as [`Self::space_low`] for a single log).
    fn space_exhausted(&self, max_tx: u64) -> bool {
        self.space_low(max_tx)
    }
    /// The mount's defaults this placement changes.
    fn defaults(&self) -> Defaults {
        Defaults::default()
    }
    /// How much a checkpoint for space frees (at least; everything it can if more): a
    /// thirty-second of the log more than the mark that starts one ([`Self::space_low`], half
    /// the log with the default largest transaction). With the target at the mark itself, a
    /// checkpoint that kept up freed a commit or two and paid a flush for it: 177-297 of them
    /// in five seconds of 100 streams of 128 B appends, 7 with this margin (docs/BENCHMARKS.md,
    /// "Checkpoint slices by runs, and checkpoints of a commit or two").
    fn checkpoint_target(&self) -> u64 {
        self.capacity() / 2 + self.capacity() / 32
    }
    /// Whether a checkpoint may run while a commit is in flight: its release stage is planned
    /// from what is committed then and touches nothing a commit writes. The ring's is (the
    /// journal superblock's tail, behind every commit); the nvm table's is not (releasing a
    /// block frees its other entries, among them one a commit may be filling), nor the remote
    /// journal's (a fallback rebuilds the log under it).
    fn checkpoint_beside_commit(&self) -> bool {
        false
    }

    /// Whether a commit's flush may run beside the next commits' writes (pipelined commits,
    /// `commit_pipeline=`): its commit stage is writes to local devices and one flush, and
    /// nothing it does on a commit's durability ([`Self::on_durable`]) depends on the next
    /// commit not being placed yet. The rings of the internal and external journals are.
    fn pipelines_commits(&self) -> bool {
        false
    }
    /// Records, from the next superblock it writes (the mount's), that commits may have up to
    /// `depth` flushes in flight (only a placement that [`pipelines_commits`](Self::pipelines_commits)).
    fn set_pipeline(&mut self, _depth: u32) {}
    /// Whether a transaction of `blocks` fits now (else the core checkpoints first): space is
    /// reserved before a handle dirties anything, so commit never waits for room.
    fn admit(&self, blocks: u64) -> bool {
        blocks <= self.free_blocks()
    }
    /// Takes a committed transaction's records: the stage that makes them durable (the core
    /// appends its own writes and flushes to it) and where they went.
    fn place(&mut self, records: Records) -> (Stage, Extent);
    /// The commit point of `tid` passed: its stage was flushed, syncs may return.
    fn on_durable(&mut self, _tid: Tid) {}

    /// The stage that records, durably, that every transaction older than `kept.oldest` is at
    /// its final location, so that their space may be reused once it is flushed.
    fn release_stage(&self, kept: Kept) -> Stage;
    /// The release stage completed: reuse the space.
    fn released(&mut self, kept: Kept);
    /// At mount: the journal is in use from the current tail (recovery after a crash starts
    /// there).
    fn mount_stage(&self, kept: Kept) -> Stage;
    /// At a clean unmount, with nothing left in the log: the journal is empty and the next
    /// mount continues with `next_tid`.
    fn clean_stage(&self, next_tid: Tid) -> Stage;
    /// What recovery must do ([`Recovery`]): the logs to scan, oldest transactions first, or
    /// the copies a table already decided; empty when nothing needs recovery.
    fn recovery(&self) -> Recovery;
    /// The last step of recovery, after the replayed blocks are durable: the log is recovered
    /// (empty) and the journal continues with `next_tid`. Until this stage is durable, a crash
    /// just means recovery runs again.
    fn recovered_stage(&self, next_tid: Tid) -> Stage;
    /// The recovered stage ([`recovered_keeping`]) is durable: the placement is now what it
    /// recorded, ready to run from `next_tid` (with `kept` still logged), as a mount opening
    /// it after recovery would find it. A mount builds its placement once.
    fn recovered(&mut self, next_tid: Tid, kept: &[LoggedBlock]);

    /// Capability: committed blocks stay addressable where the placement keeps them, so the
    /// cache may drop them while they are owed to checkpoint (nvm, manylogs).
    fn parking(&self) -> Option<&dyn Parking> {
        None
    }
    /// Capability: a map of logged blocks in the placement's tables, so that a checkpoint may
    /// leave blocks logged and recovery reads them from the map (manylogs).
    fn snapshots(&self) -> Option<&dyn Snapshots> {
        None
    }
    /// Capability: logs that move when crowded (manylogs).
    fn swaps(&mut self) -> Option<&mut dyn Swaps> {
        None
    }
    /// Capability: a local journal to fall back to when the journal's server fails, and a way
    /// back (remote).
    fn fallback(&mut self) -> Option<&mut dyn Fallback> {
        None
    }
    /// [`Self::parking`], to record that a parked block went home.
    fn parking_mut(&mut self) -> Option<&mut dyn Parking> {
        None
    }
    /// Capability: the placement follows the disk head (manylogs).
    fn head(&mut self) -> Option<&mut dyn HeadAware> {
        None
    }
}

/// Where a placement parks committed blocks: see [`Parking::parks_on_device`].
pub trait Parking {
    /// Whether `place` needs [`Records::images`] (the committed blocks whole, which this
    /// placement stores as its frozen copies): only then are they built, off the others'
    /// commit path.
    fn wants_images(&self) -> bool {
        false
    }
    /// Where the newest committed version of `block` can be loaded from while it is owed to
    /// checkpoint, if this placement keeps it addressable (nvm: its frozen slot; the DRAM
    /// cache may then park the buffer).
    fn frozen_copy(&self, block: HomeBlock) -> Option<u64>;
    /// The journal tag's data hash of the copy [`Self::frozen_copy`] names, when the placement
    /// keeps one: a load from there is checked against it.
    fn frozen_hash(&self, _block: HomeBlock) -> Option<u32> {
        None
    }
    /// Whether [`Self::frozen_copy`] positions are blocks of the file-system device (manylogs:
    /// a log) rather than offsets of NVM: a checkpoint then copies a parked block home from
    /// there instead of loading it into the cache first.
    fn parks_on_device(&self) -> bool;
    /// A checkpoint wrote `block`'s copy of transaction `tid` home: a copy parked there is no
    /// longer the one to load (unless a newer transaction logged the block since).
    fn went_home(&mut self, _block: HomeBlock, _tid: Tid) {}
}

/// A block whose committed copy stays in a log instead of at home: an entry of a snapshot's map
/// (manylogs), read by recovery and taken over by the mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoggedBlock {
    /// The file-system block.
    pub block: HomeBlock,
    /// Where the copy is: a block of the file-system device, in a log.
    pub at: u64,
    /// The transaction whose copy it is.
    pub tid: Tid,
    /// The journal tag's data hash of the copy.
    pub hash: u32,
}

/// A map of logged blocks in the placement's tables (manylogs' snapshots, section III-F).
pub trait Snapshots {
    /// Whether data block `block`, owed by committed transaction `tid`, may stay logged across
    /// a snapshot: its copy in `tid` is whole in the placement's map.
    fn keeps_logged(&self, block: HomeBlock, tid: Tid) -> bool;
    /// How many blocks a snapshot can keep logged.
    fn map_room(&self) -> usize;
    /// The home tid of the newest durable snapshot.
    fn home(&self) -> Tid;
    /// The blocks recovery reads from the snapshot's map instead of a log scan.
    fn recovery_map(&self) -> Vec<LoggedBlock>;
    /// The release stage of a checkpoint that leaves the blocks `keep` logged and advances
    /// the home tid to [`Kept::home`].
    fn snapshot_stage(&self, kept: Kept, keep: &[HomeBlock]) -> Stage;
    /// [`Placement::recovered_stage`] for a recovery that left the mapped blocks `kept` logged.
    fn recovered_keeping(&self, next_tid: Tid, kept: &[LoggedBlock]) -> Stage;
    /// After a recovery that kept blocks logged: each of them, for the mount to take over as
    /// owed blocks parked in their logs.
    fn recovered_kept(&self) -> Vec<LoggedBlock>;
}

/// Logs that move when crowded (manylogs, section III-G).
pub trait Swaps {
    /// A swap to make now (a log over 80% full moved to an empty one far from the head), as
    /// the stages that make it durable and the log blocks it moves; None when none is due.
    /// `idle`: the file system has been quiet for a while (any crowded log may go, else only
    /// the head's); `max_tx`: the largest transaction, which the logs not taking part must
    /// still be able to take. The swap is in flight until [`Self::swapped`]: nothing else may
    /// plan a table meanwhile (the core runs it in the checkpoint's place).
    fn swap_begin(&mut self, kept: Kept, idle: bool, max_tx: u64) -> Option<(Vec<IoStage>, u64)>;
    /// The swap's stages completed.
    fn swapped(&mut self);
}

/// A journal on a server with a local journal to fall back to (docs/REMOTE.md).
pub trait Fallback {
    /// A commit's operations on the server failed (network, server): switch to the local
    /// journal (true), after the core checkpointed everything committed; false: no local
    /// journal to switch to, the journal aborts.
    fn fall_back(&mut self, failed_tid: Tid) -> bool;
    /// Fell back and the local journal is empty now: the plan that returns to the server
    /// (record a new epoch locally, reconnect, FENCE, TRIM what the server still holds, record
    /// the return), and that epoch. None: nothing to return to.
    fn return_plan(&self, next_tid: Tid) -> Option<(Vec<Stage>, u64)>;
    /// The return plan completed.
    fn returned(&mut self, epoch: u64);
}

/// A placement that follows the disk head (manylogs).
pub trait HeadAware {
    /// The disk head moved to block `at` of the file-system device for I/O the journal did
    /// not log (a checkpoint write, a read miss, a hint from the library).
    fn note_position(&mut self, at: DevBlock);
    /// Commits placed and how many landed near the disk head.
    fn near_head(&self) -> NearHead;
}

counters! {
    /// Commits placed, and how many landed in the log of the head's group or a neighbour's.
    #[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
    pub struct NearHead {
        pub commits: u64,
        pub near: u64,
        /// In the head's own group.
        pub same: u64,
        /// Transactions that reached a log's end and went on at its start (space reused).
        pub wraps: u64,
        /// Transactions that went to another log than the one before.
        pub switches: u64,
        /// Log swaps completed, and the log blocks they moved.
        pub swaps: u64,
        pub swap_blocks: u64,
    }
}

/// [`Placement::recovered_stage`], or [`Snapshots::recovered_keeping`] when recovery left
/// blocks logged (only a placement with a map can).
pub fn recovered_keeping(placement: &dyn Placement, next_tid: Tid, kept: &[LoggedBlock]) -> Stage {
    match placement.snapshots() {
        Some(s) => s.recovered_keeping(next_tid, kept),
        None => {
            assert!(kept.is_empty(), "only a placement with a map keeps blocks logged across recovery");
            placement.recovered_stage(next_tid)
        }
    }
}

//! Counters: bytes and blocks written per block kind, commits, handles and blocks per commit,
//! syncs and a sync-latency histogram (docs/DESIGN.md section 4). Updated by the runtime as it
//! executes plans, so they count exactly what reached the devices.

use crate::device::DeviceStats;
use crate::ids::Tid;
use crate::journal::plan::BlockKind;
use crate::journal::Admit;
pub use crate::journal::CheckpointCounts;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

mod prometheus;
pub use prometheus::METRICS;

#[derive(Default)]
pub struct Stats {
    block_size: usize,
    kind_blocks: [AtomicU64; 10],
    kind_bytes: [AtomicU64; 10],
    records: AtomicU64,
    record_bytes: AtomicU64,
    inline_record_bytes: AtomicU64,
    commits: AtomicU64,
    commit_handles: AtomicU64,
    commit_journal_blocks: AtomicU64,
    max_handles_per_commit: AtomicU64,
    /// Commits by size, and the handles they carried ([`CommitSizes`]).
    commit_sizes: [AtomicU64; COMMIT_SIZE_BUCKETS],
    commit_size_handles: [AtomicU64; COMMIT_SIZE_BUCKETS],
    checkpoints: AtomicU64,
    idle_checkpoints: AtomicU64,
    snapshots: AtomicU64,
    early_writes: AtomicU64,
    datasyncs_in_place: AtomicU64,
    datasync_steps: AtomicU64,
    log_swaps: AtomicU64,
    overlaps: AtomicU64,
    led_steps: AtomicU64,
    staged_appends: AtomicU64,
    staged_new_blocks: AtomicU64,
    pipelined_flushes: AtomicU64,
    pipelined_commits: AtomicU64,
    pipelined_flush_ns: AtomicU64,
    fast_commits: AtomicU64,
    fast_spans: AtomicU64,
    inode_notes: AtomicU64,
    joined_blocks: AtomicU64,
    commit_in_place: AtomicU64,
    commit_in_place_tagged: AtomicU64,
    fallbacks: AtomicU64,
    remote_bytes: AtomicU64,
    nvm_bytes: AtomicU64,
    nvm_fences: AtomicU64,
    nvm_slots: AtomicU64,
    nvm_slots_in_use: AtomicU64,
    nvm_parked: AtomicU64,
    syncs: AtomicU64,
    handles: AtomicU64,
    payload_bytes: AtomicU64,
    sync_latency_ns: Mutex<Option<Histogram<u64>>>,
    checkpoint: Mutex<CheckpointCounts>,
    log_read_blocks: AtomicU64,
    lane: [AtomicU64; LanePhase::COUNT],
    /// Per reason a handle waited to start ([`Admit`]): the waits, and their nanoseconds.
    admit_waits: [AtomicU64; 3],
    admit_ns: [AtomicU64; 3],
    pub(crate) recovery: Mutex<Option<RecoveryReport>>,
}

/// A part of the commit lane's time (see [`LaneTimes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LanePhase {
    Steps,
    Plan,
    Write,
    Flush,
    Finish,
    Answer,
    Lock,
    Window,
    Idle,
}

impl LanePhase {
    const COUNT: usize = 9;
}

/// Where the commit lane's time went, in nanoseconds of the mount's clock, summed over the
/// journal thread and the syncs that led their write groups (only the thread that holds the
/// lane counts, so the parts add up to the lane's wall time). Times are wall time: a thread
/// preempted in a part is charged for it. The simulator's journal, driven step by step, has no
/// lane and counts nothing here.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct LaneTimes {
    /// Steps the lane ran (commits, and the work between them).
    pub steps: u64,
    /// Deciding a step under the state lock (the scheduler's poll: a commit's staging).
    pub plan_ns: u64,
    /// Its writes: device writes, sends to a journal server, NVM stores.
    pub write_ns: u64,
    /// Its flushes.
    pub flush_ns: u64,
    /// Reporting it back under the lock (a commit's end, settling its syncs).
    pub finish_ns: u64,
    /// Answering the syncs a step settled: a leader replying to them, or the journal thread
    /// waking a commit's sleeping syncs after it lets go of the lock (the woken writers may
    /// preempt it: wall time).
    pub answer_ns: u64,
    /// Waiting for the state lock, held by writers or the checkpoint lane.
    pub lock_ns: u64,
    /// Waiting out a batching window or a timer the scheduler asked for.
    pub window_ns: u64,
    /// Waiting with nothing to do.
    pub idle_ns: u64,
}

impl LaneTimes {
    /// Each part's name (as the Prometheus label) and nanoseconds.
    pub fn parts(&self) -> [(&'static str, u64); 8] {
        [
            ("plan", self.plan_ns),
            ("write", self.write_ns),
            ("flush", self.flush_ns),
            ("finish", self.finish_ns),
            ("answer", self.answer_ns),
            ("lock", self.lock_ns),
            ("window", self.window_ns),
            ("idle", self.idle_ns),
        ]
    }

    fn since(&self, b: &LaneTimes) -> LaneTimes {
        LaneTimes {
            steps: self.steps - b.steps,
            plan_ns: self.plan_ns - b.plan_ns,
            write_ns: self.write_ns - b.write_ns,
            flush_ns: self.flush_ns - b.flush_ns,
            finish_ns: self.finish_ns - b.finish_ns,
            answer_ns: self.answer_ns - b.answer_ns,
            lock_ns: self.lock_ns - b.lock_ns,
            window_ns: self.window_ns - b.window_ns,
            idle_ns: self.idle_ns - b.idle_ns,
        }
    }
}

/// Waits of one kind: how many, and how long in all (nanoseconds of the mount's clock, summed
/// over the threads that waited, so several waiting at once count several times).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Waits {
    pub waits: u64,
    pub ns: u64,
}

/// Why operations could not start at once, and how long they waited: a handle (the journal's
/// admission of one operation: a write, a create, a truncate) refused for one of [`Admit`]'s
/// reasons waits for the journal's lanes, then asks again. Time a writer spends here is time
/// it is neither working nor syncing: with the commit lane idle, it says what bounds a run.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct AdmitWaits {
    /// The running transaction was full: it had to start committing first.
    pub commit: Waits,
    /// The journal had no room: a checkpoint (or the commit in flight) had to free some.
    pub space: Waits,
    /// The running transaction held too much in-place data not yet written: background
    /// writeback had to drain it.
    pub writeback: Waits,
}

impl AdmitWaits {
    /// Each reason's name (as the Prometheus label) and its waits.
    pub fn parts(&self) -> [(&'static str, Waits); 3] {
        [("commit", self.commit), ("space", self.space), ("writeback", self.writeback)]
    }

    fn since(&self, b: &AdmitWaits) -> AdmitWaits {
        let d = |a: Waits, b: Waits| Waits { waits: a.waits - b.waits, ns: a.ns - b.ns };
        AdmitWaits { commit: d(self.commit, b.commit), space: d(self.space, b.space), writeback: d(self.writeback, b.writeback) }
    }
}

/// What recovery found and how long each pass took (thesis section 6.4).
#[derive(Debug, Clone, Default, Serialize)]
pub struct RecoveryReport {
    pub transactions: u64,
    pub first_tid: Tid,
    pub last_tid: Tid,
    pub blocks_scanned: u64,
    pub revoke_records: u64,
    pub blocks_replayed: u64,
    pub end_reason: String,
    /// A damaged transaction with committed ones after it (corruption, not a torn tail):
    /// only the transactions before it were replayed, and the file system is marked with errors.
    pub damage: Option<crate::journal::recovery::Damage>,
    /// Blocks read after the end of the log to tell a torn tail from damage.
    pub blocks_probed: u64,
    /// The tid the journal continues with: beyond every tid still present in the log.
    pub next_tid: Tid,
    pub scan_ns: u64,
    pub revoke_ns: u64,
    pub replay_ns: u64,
    /// An NVM journal: slot-table entries read (its recovery reads a table, not a log).
    pub nvm_slots_scanned: u64,
}

counters! {
    /// Blocks and bytes of one kind.
    #[derive(Debug, Clone, Default, Serialize)]
    pub struct KindCount {
        pub blocks: u64,
        pub bytes: u64,
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Latency {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

/// Buckets of [`CommitSizes`]: commits of 1, 2-3, 4-7, ... handles, the last 32,768 and more.
pub const COMMIT_SIZE_BUCKETS: usize = 16;

/// How many commits carried how many handles, and the handles they carried: bucket k holds
/// the commits of 2^k to 2^(k+1) - 1 handles (bucket 0 also those of none), the last bucket
/// every larger one. What a mean of handles a commit hides: commits alike, or a few huge ones
/// gathered behind a stall that carry most of the syncs (docs/OBSERVABILITY.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitSizes {
    pub commits: [u64; COMMIT_SIZE_BUCKETS],
    pub handles: [u64; COMMIT_SIZE_BUCKETS],
}

impl CommitSizes {
    /// The bucket of a commit of `handles` handles.
    pub fn bucket(handles: u64) -> usize {
        (handles.max(1).ilog2() as usize).min(COMMIT_SIZE_BUCKETS - 1)
    }

    /// The handles bucket `k` holds, as (least, most); `most` is None for the last.
    pub fn range(k: usize) -> (u64, Option<u64>) {
        let least = 1u64 << k;
        (least, (k + 1 < COMMIT_SIZE_BUCKETS).then(|| (least << 1) - 1))
    }

    /// No commit counted.
    pub fn is_empty(&self) -> bool {
        self.commits.iter().all(|&n| n == 0)
    }

    pub fn since(&self, base: &CommitSizes) -> CommitSizes {
        let mut d = *self;
        for k in 0..COMMIT_SIZE_BUCKETS {
            d.commits[k] = d.commits[k].saturating_sub(base.commits[k]);
            d.handles[k] = d.handles[k].saturating_sub(base.handles[k]);
        }
        d
    }

    /// The bucket holding the median handle: half of all handles went in commits of this
    /// size or smaller. None without handles.
    pub fn median_handle_bucket(&self) -> Option<usize> {
        let total: u64 = self.handles.iter().sum();
        let mut seen = 0;
        (total > 0).then(|| {
            self.handles
                .iter()
                .position(|&h| {
                    seen += h;
                    2 * seen >= total
                })
                .unwrap_or(COMMIT_SIZE_BUCKETS - 1)
        })
    }
}

/// A snapshot of every counter.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Counters {
    pub descriptor: KindCount,
    pub commit: KindCount,
    pub revoke: KindCount,
    /// Multiwrite blocks (record stream continuing past a descriptor).
    pub multiwrite: KindCount,
    pub journal_data: KindCount,
    pub journal_meta: KindCount,
    pub journal_super: KindCount,
    pub final_data: KindCount,
    pub final_meta: KindCount,
    /// Log blocks moved by manylogs swaps (journal bytes).
    pub log_swap: KindCount,
    pub journal_bytes: u64,
    pub final_bytes: u64,
    pub payload_bytes: u64,
    pub commits: u64,
    pub handles: u64,
    pub handles_per_commit: f64,
    pub max_handles_per_commit: u64,
    /// Commits by how many handles they carried.
    #[serde(default)]
    pub commit_sizes: CommitSizes,
    pub journal_blocks_per_commit: f64,
    pub syncs: u64,
    pub syncs_per_commit: f64,
    pub checkpoints: u64,
    /// Checkpoints of everything that `checkpoint=idle` started after a quiet spell.
    pub idle_checkpoints: u64,
    /// Periodic snapshots of the manylogs map of logged blocks (`snapshot_period=`).
    pub snapshots: u64,
    /// In-place data blocks written before their commit (`dirty_background_bytes=`).
    pub early_writes: u64,
    /// fdatasyncs of overwrites made durable in place, without a commit (`datasync=in_place`),
    /// and the steps that served them (one step serves every request waiting when it starts).
    pub datasyncs_in_place: u64,
    pub datasync_steps: u64,
    /// Manylogs log swaps completed (the blocks they moved are the `log_swap` kind).
    pub log_swaps: u64,
    /// Commits and checkpoints that were in flight together (each pair counted once, by the
    /// one that started second): the checkpoint thread at work beside the journal thread.
    pub overlaps: u64,
    /// Journal steps (commits, and the work between them) run by a syncing thread as the
    /// leader of its write group rather than by the journal thread (`commit_leader=on`).
    pub led_steps: u64,
    /// Appends staged beside the state lock (`stage_appends=on`) and folded in by the next
    /// thread to take it, not run as handles of their own.
    #[serde(default)]
    pub staged_appends: u64,
    /// Folds of staged appends that started their file's next block (its space set aside
    /// when the stage was armed), rather than only filling the last one.
    #[serde(default)]
    pub staged_new_blocks: u64,
    /// Flushes of pipelined commits issued beside the commit lane (`commit_pipeline=`), by a
    /// flusher thread or by the sync that led the commit, and their time.
    #[serde(default)]
    pub pipelined_flushes: u64,
    #[serde(default)]
    pub pipelined_flush_ns: u64,
    /// Commits that began while an earlier commit's flush was in flight.
    #[serde(default)]
    pub pipelined_commits: u64,
    /// Commits written as one fast commit (a transaction of records, one block or a span;
    /// docs/FORMAT.md).
    pub fast_commits: u64,
    /// Those of them that spanned more than one block.
    pub fast_spans: u64,
    /// Inode notes in fast commits (docs/FORMAT.md, "Inode notes"): inode changes told in 16
    /// bytes instead of logged as their 32 changed bytes under a tag.
    #[serde(default)]
    pub inode_notes: u64,
    /// Differential metadata blocks changed in more places than a block's records may be,
    /// logged as joined records instead of whole (docs/JOURNALING.md, "Differential metadata").
    #[serde(default)]
    pub joined_blocks: u64,
    /// Data blocks commits wrote in place before their commit record: ordered data,
    /// selective's in-place sequences, wasteless's new blocks with `fresh_blocks=in_place`.
    #[serde(default)]
    pub commit_in_place_blocks: u64,
    /// Of those, blocks written beside their commit record under its flush, named by in-place
    /// tags (docs/FORMAT.md, "In-place tags"), instead of flushed before it.
    #[serde(default)]
    pub commit_in_place_tagged_blocks: u64,
    /// Times a remote journal fell back to the local journal.
    pub fallbacks: u64,
    /// Journal bytes sent to a journal server (also counted in the journal bytes by kind).
    pub remote_bytes: u64,
    /// Bytes the nvm placement stored to NVM (block copies, entries, commit words), and its
    /// fences. Not counted in the journal bytes: no disk sees them.
    pub nvm_bytes: u64,
    pub nvm_fences: u64,
    /// Multiwrite records logged, their payload bytes, and how many of those bytes sat inline
    /// in descriptor blocks.
    pub records: u64,
    pub record_bytes: u64,
    pub inline_record_bytes: u64,
    pub records_per_commit: f64,
    /// Record bytes in multiwrite blocks over the room those blocks offer.
    pub multiwrite_fill: f64,
    pub sync_latency: Latency,
    /// What checkpoints wrote home, in how many merged writes, what they copied from logs and
    /// what they were spared (overwritten or freed copies), and parked blocks read back.
    pub checkpoint: CheckpointCounts,
    /// Log blocks read to copy parked blocks home (manylogs).
    pub log_read_blocks: u64,
    /// Where the commit lane's time went.
    pub commit_lane: LaneTimes,
    /// Operations that waited to start, by reason.
    #[serde(default)]
    pub admission: AdmitWaits,
    pub fs_device: DeviceStats,
    pub journal_device: Option<DeviceStats>,
    /// The NVM of an nvm journal.
    pub nvm: Option<NvmSummary>,
    pub recovery: Option<RecoveryReport>,
}

/// Where an nvm journal lives and what its fences guarantee (`okeanos stat`).
#[derive(Debug, Clone, Serialize)]
pub struct NvmSummary {
    pub name: String,
    pub bytes: u64,
    pub slots: u64,
    /// Slots not free for reuse now (frozen copies and entries a checkpoint has not released).
    pub slots_in_use: u64,
    /// Buffers owed to checkpoint whose data the DRAM cache dropped: they are read from NVM.
    pub parked_buffers: u64,
    pub durability: String,
    pub counters: crate::nvm::NvmStats,
}

impl Stats {
    pub fn new(block_size: usize) -> Self {
        Stats { block_size, ..Default::default() }
    }

    pub fn on_write(&self, kind: BlockKind, bytes: usize) {
        self.kind_blocks[kind.index()].fetch_add(1, Relaxed);
        self.kind_bytes[kind.index()].fetch_add(bytes as u64, Relaxed);
    }
    pub fn on_commit(&self, handles: u32, journal_blocks: u64, records: crate::journal::commit::RecordStats) {
        self.records.fetch_add(records.records, Relaxed);
        self.record_bytes.fetch_add(records.record_bytes, Relaxed);
        self.inline_record_bytes.fetch_add(records.inline_bytes, Relaxed);
        self.commits.fetch_add(1, Relaxed);
        let k = CommitSizes::bucket(handles as u64);
        self.commit_sizes[k].fetch_add(1, Relaxed);
        self.commit_size_handles[k].fetch_add(handles as u64, Relaxed);
        self.fast_commits.fetch_add((records.fast_blocks > 0) as u64, Relaxed);
        self.fast_spans.fetch_add((records.fast_blocks > 1) as u64, Relaxed);
        self.inode_notes.fetch_add(records.notes, Relaxed);
        self.joined_blocks.fetch_add(records.joined, Relaxed);
        self.commit_in_place.fetch_add(records.in_place, Relaxed);
        self.commit_in_place_tagged.fetch_add(records.in_place_tagged, Relaxed);
        self.commit_handles.fetch_add(handles as u64, Relaxed);
        self.commit_journal_blocks.fetch_add(journal_blocks, Relaxed);
        self.max_handles_per_commit.fetch_max(handles as u64, Relaxed);
    }
    pub fn on_checkpoint(&self) {
        self.checkpoints.fetch_add(1, Relaxed);
    }
    /// The journal's checkpoint accounting, after a journal step (read without its lock).
    pub fn on_checkpoint_counts(&self, c: CheckpointCounts) {
        *self.checkpoint.lock().unwrap_or_else(|e| e.into_inner()) = c;
    }
    /// Log blocks read by a checkpoint's copies.
    pub fn on_log_read(&self, blocks: u64) {
        self.log_read_blocks.fetch_add(blocks, Relaxed);
    }
    pub fn on_log_swap(&self) {
        self.log_swaps.fetch_add(1, Relaxed);
    }
    pub fn on_early_writes(&self, blocks: u64) {
        self.early_writes.fetch_add(blocks, Relaxed);
    }
    pub fn on_datasync_step(&self, requests: u64) {
        self.datasync_steps.fetch_add(1, Relaxed);
        self.datasyncs_in_place.fetch_add(requests, Relaxed);
    }
    pub fn on_snapshot(&self) {
        self.snapshots.fetch_add(1, Relaxed);
    }
    pub fn on_idle_checkpoint(&self) {
        self.idle_checkpoints.fetch_add(1, Relaxed);
    }
    pub fn on_overlap(&self) {
        self.overlaps.fetch_add(1, Relaxed);
    }

    pub fn on_led_step(&self) {
        self.led_steps.fetch_add(1, Relaxed);
    }

    pub fn on_staged_append(&self) {
        self.staged_appends.fetch_add(1, Relaxed);
    }

    pub fn on_staged_new_block(&self) {
        self.staged_new_blocks.fetch_add(1, Relaxed);
    }
    pub fn on_pipelined_commit(&self) {
        self.pipelined_commits.fetch_add(1, Relaxed);
    }
    pub fn on_pipelined_flush(&self, ns: u64) {
        self.pipelined_flushes.fetch_add(1, Relaxed);
        self.pipelined_flush_ns.fetch_add(ns, Relaxed);
    }
    pub fn on_fallback(&self) {
        self.fallbacks.fetch_add(1, Relaxed);
    }
    pub fn on_remote(&self, bytes: usize) {
        self.remote_bytes.fetch_add(bytes as u64, Relaxed);
    }
    pub fn on_nvm_store(&self, bytes: usize) {
        self.nvm_bytes.fetch_add(bytes as u64, Relaxed);
    }
    /// The nvm placement's slots and those in use, after a journal step (read without the
    /// engine's lock).
    pub fn on_nvm_slots(&self, slots: u64, in_use: u64, parked: u64) {
        self.nvm_slots.store(slots, Relaxed);
        self.nvm_slots_in_use.store(in_use, Relaxed);
        self.nvm_parked.store(parked, Relaxed);
    }
    /// Slots of the nvm placement, those in use, and buffers parked in NVM, as last reported.
    pub fn nvm_slots(&self) -> (u64, u64, u64) {
        (self.nvm_slots.load(Relaxed), self.nvm_slots_in_use.load(Relaxed), self.nvm_parked.load(Relaxed))
    }
    /// `ns` more of the commit lane's time in `phase` (for [`LanePhase::Steps`], a count).
    pub fn on_lane(&self, phase: LanePhase, ns: u64) {
        self.lane[phase as usize].fetch_add(ns, Relaxed);
    }
    /// A handle waited `ns` to start because of `why`.
    pub fn on_admit_wait(&self, why: Admit, ns: u64) {
        let i = match why {
            Admit::NeedCommit => 0,
            Admit::NeedSpace => 1,
            Admit::NeedWriteback => 2,
        };
        self.admit_waits[i].fetch_add(1, Relaxed);
        self.admit_ns[i].fetch_add(ns, Relaxed);
    }
    pub fn on_nvm_fence(&self) {
        self.nvm_fences.fetch_add(1, Relaxed);
    }
    pub fn on_handle(&self) {
        self.handles.fetch_add(1, Relaxed);
    }
    pub fn on_payload(&self, bytes: usize) {
        self.payload_bytes.fetch_add(bytes as u64, Relaxed);
    }
    pub fn on_sync(&self, latency_ns: u64) {
        self.syncs.fetch_add(1, Relaxed);
        let mut h = self.sync_latency_ns.lock().unwrap_or_else(|e| e.into_inner());
        let h = h.get_or_insert_with(|| Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds"));
        h.saturating_record(latency_ns.max(1));
    }

    pub fn snapshot(&self, fs_device: DeviceStats, journal_device: Option<DeviceStats>) -> Counters {
        let k = |kind: BlockKind| KindCount { blocks: self.kind_blocks[kind.index()].load(Relaxed), bytes: self.kind_bytes[kind.index()].load(Relaxed) };
        let journal_bytes = BlockKind::ALL.iter().filter(|k| k.is_journal()).map(|&x| k(x).bytes).sum();
        let final_bytes = k(BlockKind::FinalData).bytes + k(BlockKind::FinalMeta).bytes;
        let commits = self.commits.load(Relaxed);
        let syncs = self.syncs.load(Relaxed);
        let per = |x: u64| if commits == 0 { 0.0 } else { x as f64 / commits as f64 };
        let sync_latency = match &*self.sync_latency_ns.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(h) => Latency {
                count: h.len(),
                mean_us: h.mean() / 1e3,
                p50_us: h.value_at_quantile(0.5) as f64 / 1e3,
                p99_us: h.value_at_quantile(0.99) as f64 / 1e3,
                p999_us: h.value_at_quantile(0.999) as f64 / 1e3,
                max_us: h.max() as f64 / 1e3,
            },
            None => Latency::default(),
        };
        Counters {
            descriptor: k(BlockKind::Descriptor),
            commit: k(BlockKind::Commit),
            revoke: k(BlockKind::Revoke),
            multiwrite: k(BlockKind::Multiwrite),
            journal_data: k(BlockKind::JournalData),
            journal_meta: k(BlockKind::JournalMeta),
            journal_super: k(BlockKind::JournalSuper),
            final_data: k(BlockKind::FinalData),
            final_meta: k(BlockKind::FinalMeta),
            log_swap: k(BlockKind::LogSwap),
            journal_bytes,
            final_bytes,
            payload_bytes: self.payload_bytes.load(Relaxed),
            commits,
            handles: self.handles.load(Relaxed),
            handles_per_commit: per(self.commit_handles.load(Relaxed)),
            max_handles_per_commit: self.max_handles_per_commit.load(Relaxed),
            commit_sizes: CommitSizes {
                commits: std::array::from_fn(|k| self.commit_sizes[k].load(Relaxed)),
                handles: std::array::from_fn(|k| self.commit_size_handles[k].load(Relaxed)),
            },
            journal_blocks_per_commit: per(self.commit_journal_blocks.load(Relaxed)),
            syncs,
            syncs_per_commit: per(syncs),
            checkpoints: self.checkpoints.load(Relaxed),
            idle_checkpoints: self.idle_checkpoints.load(Relaxed),
            snapshots: self.snapshots.load(Relaxed),
            early_writes: self.early_writes.load(Relaxed),
            datasyncs_in_place: self.datasyncs_in_place.load(Relaxed),
            datasync_steps: self.datasync_steps.load(Relaxed),
            log_swaps: self.log_swaps.load(Relaxed),
            overlaps: self.overlaps.load(Relaxed),
            led_steps: self.led_steps.load(Relaxed),
            staged_appends: self.staged_appends.load(Relaxed),
            staged_new_blocks: self.staged_new_blocks.load(Relaxed),
            pipelined_flushes: self.pipelined_flushes.load(Relaxed),
            pipelined_flush_ns: self.pipelined_flush_ns.load(Relaxed),
            pipelined_commits: self.pipelined_commits.load(Relaxed),
            fast_commits: self.fast_commits.load(Relaxed),
            fast_spans: self.fast_spans.load(Relaxed),
            inode_notes: self.inode_notes.load(Relaxed),
            joined_blocks: self.joined_blocks.load(Relaxed),
            commit_in_place_blocks: self.commit_in_place.load(Relaxed),
            commit_in_place_tagged_blocks: self.commit_in_place_tagged.load(Relaxed),
            fallbacks: self.fallbacks.load(Relaxed),
            remote_bytes: self.remote_bytes.load(Relaxed),
            nvm_bytes: self.nvm_bytes.load(Relaxed),
            nvm_fences: self.nvm_fences.load(Relaxed),
            records: self.records.load(Relaxed),
            record_bytes: self.record_bytes.load(Relaxed),
            inline_record_bytes: self.inline_record_bytes.load(Relaxed),
            records_per_commit: per(self.records.load(Relaxed)),
            multiwrite_fill: {
                let mw = k(BlockKind::Multiwrite).blocks as f64 * crate::format::journal::multiwrite_capacity(self.block_size.max(512)) as f64;
                let bytes = (self.record_bytes.load(Relaxed) - self.inline_record_bytes.load(Relaxed)) as f64;
                if mw > 0.0 { bytes / mw } else { 0.0 }
            },
            sync_latency,
            checkpoint: *self.checkpoint.lock().unwrap_or_else(|e| e.into_inner()),
            log_read_blocks: self.log_read_blocks.load(Relaxed),
            commit_lane: {
                let l = |p: LanePhase| self.lane[p as usize].load(Relaxed);
                LaneTimes {
                    steps: l(LanePhase::Steps),
                    plan_ns: l(LanePhase::Plan),
                    write_ns: l(LanePhase::Write),
                    flush_ns: l(LanePhase::Flush),
                    finish_ns: l(LanePhase::Finish),
                    answer_ns: l(LanePhase::Answer),
                    lock_ns: l(LanePhase::Lock),
                    window_ns: l(LanePhase::Window),
                    idle_ns: l(LanePhase::Idle),
                }
            },
            admission: {
                let w = |i: usize| Waits { waits: self.admit_waits[i].load(Relaxed), ns: self.admit_ns[i].load(Relaxed) };
                AdmitWaits { commit: w(0), space: w(1), writeback: w(2) }
            },
            fs_device,
            journal_device,
            nvm: None,
            recovery: self.recovery.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        }
    }
}

impl Counters {
    /// The counts accumulated since `base` (an earlier snapshot of the same mount): per-kind
    /// bytes and blocks, totals, commits, syncs and records, with the per-commit ratios
    /// recomputed. The latency histogram and the multiwrite fill are the whole mount's.
    pub fn since(&self, base: &Counters) -> Counters {
        let commits = self.commits - base.commits;
        let per = |x: f64| if commits == 0 { 0.0 } else { x / commits as f64 };
        let syncs = self.syncs - base.syncs;
        let records = self.records - base.records;
        let handles_in_commits = self.handles_per_commit * self.commits as f64 - base.handles_per_commit * base.commits as f64;
        let blocks_in_commits = self.journal_blocks_per_commit * self.commits as f64 - base.journal_blocks_per_commit * base.commits as f64;
        Counters {
            descriptor: self.descriptor.since(&base.descriptor),
            commit: self.commit.since(&base.commit),
            revoke: self.revoke.since(&base.revoke),
            multiwrite: self.multiwrite.since(&base.multiwrite),
            journal_data: self.journal_data.since(&base.journal_data),
            journal_meta: self.journal_meta.since(&base.journal_meta),
            journal_super: self.journal_super.since(&base.journal_super),
            final_data: self.final_data.since(&base.final_data),
            final_meta: self.final_meta.since(&base.final_meta),
            log_swap: self.log_swap.since(&base.log_swap),
            journal_bytes: self.journal_bytes - base.journal_bytes,
            final_bytes: self.final_bytes - base.final_bytes,
            payload_bytes: self.payload_bytes - base.payload_bytes,
            commits,
            handles: self.handles - base.handles,
            handles_per_commit: per(handles_in_commits),
            max_handles_per_commit: self.max_handles_per_commit,
            commit_sizes: self.commit_sizes.since(&base.commit_sizes),
            journal_blocks_per_commit: per(blocks_in_commits),
            syncs,
            syncs_per_commit: per(syncs as f64),
            checkpoints: self.checkpoints - base.checkpoints,
            idle_checkpoints: self.idle_checkpoints - base.idle_checkpoints,
            snapshots: self.snapshots - base.snapshots,
            early_writes: self.early_writes - base.early_writes,
            datasyncs_in_place: self.datasyncs_in_place - base.datasyncs_in_place,
            datasync_steps: self.datasync_steps - base.datasync_steps,
            log_swaps: self.log_swaps - base.log_swaps,
            overlaps: self.overlaps - base.overlaps,
            led_steps: self.led_steps - base.led_steps,
            staged_appends: self.staged_appends - base.staged_appends,
            staged_new_blocks: self.staged_new_blocks - base.staged_new_blocks,
            pipelined_flushes: self.pipelined_flushes - base.pipelined_flushes,
            pipelined_flush_ns: self.pipelined_flush_ns - base.pipelined_flush_ns,
            pipelined_commits: self.pipelined_commits - base.pipelined_commits,
            fast_commits: self.fast_commits - base.fast_commits,
            fast_spans: self.fast_spans - base.fast_spans,
            inode_notes: self.inode_notes - base.inode_notes,
            joined_blocks: self.joined_blocks - base.joined_blocks,
            commit_in_place_blocks: self.commit_in_place_blocks - base.commit_in_place_blocks,
            commit_in_place_tagged_blocks: self.commit_in_place_tagged_blocks - base.commit_in_place_tagged_blocks,
            fallbacks: self.fallbacks - base.fallbacks,
            remote_bytes: self.remote_bytes - base.remote_bytes,
            nvm_bytes: self.nvm_bytes - base.nvm_bytes,
            nvm_fences: self.nvm_fences - base.nvm_fences,
            records,
            record_bytes: self.record_bytes - base.record_bytes,
            inline_record_bytes: self.inline_record_bytes - base.inline_record_bytes,
            records_per_commit: per(records as f64),
            multiwrite_fill: self.multiwrite_fill,
            sync_latency: self.sync_latency.clone(),
            checkpoint: self.checkpoint.since(&base.checkpoint),
            log_read_blocks: self.log_read_blocks - base.log_read_blocks,
            commit_lane: self.commit_lane.since(&base.commit_lane),
            admission: self.admission.since(&base.admission),
            fs_device: self.fs_device.since(&base.fs_device),
            journal_device: match (&self.journal_device, &base.journal_device) {
                (Some(a), Some(b)) => Some(a.since(b)),
                (a, _) => *a,
            },
            nvm: self.nvm.clone(),
            recovery: self.recovery.clone(),
        }
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    /// Commits land in the bucket of their size, the histogram's buckets are cumulative, the
    /// median handle's bucket is the one where half the handles are reached, and `since`
    /// subtracts bucket by bucket.
    #[test]
    fn commit_sizes_count_commits_and_their_handles_by_size() {
        let stats = Stats::new(4096);
        let commit = |h: u32| stats.on_commit(h, 1, Default::default());
        for h in [0, 1, 2, 3, 4, 7, 8] {
            commit(h);
        }
        assert_eq!((CommitSizes::bucket(0), CommitSizes::bucket(1), CommitSizes::bucket(3), CommitSizes::bucket(8)), (0, 0, 1, 3));
        assert_eq!(CommitSizes::bucket(1 << 40), COMMIT_SIZE_BUCKETS - 1, "the last bucket holds every larger commit");
        assert_eq!((CommitSizes::range(2), CommitSizes::range(COMMIT_SIZE_BUCKETS - 1)), ((4, Some(7)), (32_768, None)));
        let base = stats.snapshot(Default::default(), None);
        assert_eq!(&base.commit_sizes.commits[..4], &[2, 2, 2, 1]);
        assert_eq!(&base.commit_sizes.handles[..4], &[1, 5, 11, 8]);
        // 25 handles: the median (the 13th) is in the 4-7 bucket.
        assert_eq!(base.commit_sizes.median_handle_bucket(), Some(2));
        // One commit of 5,000 handles after: it carries nearly all of them.
        commit(5000);
        let now = stats.snapshot(Default::default(), None);
        let d = now.since(&base).commit_sizes;
        assert_eq!((d.commits.iter().sum::<u64>(), d.commits[12], d.handles[12]), (1, 1, 5000));
        assert_eq!(now.commit_sizes.median_handle_bucket(), Some(12));
        assert_eq!(CommitSizes::default().median_handle_bucket(), None);
        let t = now.prometheus("data=ordered", "internal");
        assert!(t.contains("okeanos_commit_handles_bucket{le=\"1\"} 2\n"), "{t}");
        assert!(t.contains("okeanos_commit_handles_bucket{le=\"7\"} 6\n"), "{t}");
        assert!(t.contains("okeanos_commit_handles_bucket{le=\"+Inf\"} 8\n"), "{t}");
        assert!(t.contains("okeanos_commit_handles_sum 5025\n") && t.contains("okeanos_commit_handles_count 8\n"), "{t}");
    }
}

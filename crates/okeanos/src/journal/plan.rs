//! I/O plans: what the journaling logic asks a runtime to do.
//!
//! The journal never calls a device. It turns state into an [`IoPlan`] — stages of block writes,
//! each stage ending with flushes — and advances when told the plan completed. The real runtime
//! executes plans with pwrite/fdatasync; a simulator executes the same plans against disk models
//! in virtual time (docs/DESIGN.md section 2; quinn-proto's shape).

use crate::ids::{DevBlock, HomeBlock, Tid};
use std::sync::Arc;

/// Blocks copied device to device in one stage (`IoCopy`: read in source order, then written
/// in target order), by a checkpoint copying parked blocks home and by a manylogs swap. Larger
/// than a slice of writes from the cache: the reads and the writes are each sorted within the
/// stage, so a larger stage seeks less (1 MiB of memory).
pub const COPY_SLICE_BLOCKS: usize = 256;

/// Which device a write goes to. An internal journal writes to `Fs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DevId {
    Fs,
    Journal,
    /// A remote journal's log as read back from the server for recovery (in memory).
    RemoteLog,
}

/// An operation on a journal server (docs/DESIGN.md section 5: sends that complete when the server
/// acknowledges). A stage with remote operations is done when every one is acknowledged.
#[derive(Debug, Clone)]
pub enum RemoteOp {
    /// One committed transaction's journal blocks, in order (with their kinds, for the
    /// counters); acknowledged once durable.
    Append { tid: Tid, blocks: Vec<(Arc<Vec<u8>>, BlockKind)> },
    /// The server may drop every transaction up to `upto`.
    Trim { upto: Tid },
    /// Connect anew (after a fallback), writing with `epoch` from now on.
    Reconnect { epoch: u64 },
    /// Take the journal over with `epoch`.
    Fence { epoch: u64 },
}

/// An operation on the NVM region of the `nvm` placement (docs/DESIGN.md section 5: byte stores,
/// cache-line flushes and fences). Unlike a stage's block writes, a stage's NVM operations
/// are carried out in order: the persistence order is what they express.
#[derive(Debug, Clone)]
pub enum NvmOp {
    /// Bytes stored at an offset of the region (`kind`: what they are, for the counters).
    Store { at: u64, data: NvmBytes, kind: Option<BlockKind> },
    /// Write back the cache lines covering `[at, at + len)`.
    Flush { at: u64, len: u64 },
    /// Wait until every flushed line is durable.
    Fence,
}

/// Bytes of an NVM store: a whole block shared with the cache, or a few bytes of a table.
#[derive(Debug, Clone)]
pub enum NvmBytes {
    Block(Arc<Vec<u8>>),
    Small(Vec<u8>),
}

impl NvmBytes {
    pub fn as_slice(&self) -> &[u8] {
        match self {
            NvmBytes::Block(b) => b,
            NvmBytes::Small(b) => b,
        }
    }
}

/// What a written block is, for the counters (docs/DESIGN.md section 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlockKind {
    Descriptor,
    Commit,
    Revoke,
    Multiwrite,
    JournalData,
    JournalMeta,
    JournalSuper,
    FinalData,
    FinalMeta,
    /// A log block moved to another log by a swap (manylogs).
    LogSwap,
}

impl BlockKind {
    pub const ALL: [BlockKind; 10] = [
        BlockKind::Descriptor,
        BlockKind::Commit,
        BlockKind::Revoke,
        BlockKind::Multiwrite,
        BlockKind::JournalData,
        BlockKind::JournalMeta,
        BlockKind::JournalSuper,
        BlockKind::FinalData,
        BlockKind::FinalMeta,
        BlockKind::LogSwap,
    ];
    pub fn name(self) -> &'static str {
        match self {
            BlockKind::Descriptor => "descriptor",
            BlockKind::Commit => "commit",
            BlockKind::Revoke => "revoke",
            BlockKind::Multiwrite => "multiwrite",
            BlockKind::JournalData => "journal_data",
            BlockKind::JournalMeta => "journal_meta",
            BlockKind::JournalSuper => "journal_super",
            BlockKind::FinalData => "final_data",
            BlockKind::FinalMeta => "final_meta",
            BlockKind::LogSwap => "log_swap",
        }
    }
    pub fn is_journal(self) -> bool {
        !matches!(self, BlockKind::FinalData | BlockKind::FinalMeta)
    }
    pub fn index(self) -> usize {
        self as usize
    }
}

#[derive(Debug, Clone)]
pub struct IoWrite {
    pub dev: DevId,
    /// Block number on that device.
    pub block: DevBlock,
    pub data: Arc<Vec<u8>>,
    pub kind: BlockKind,
}

impl IoWrite {
    /// The bytes of this block a write must carry: a commit block's sectors that hold it
    /// (`format::journal::written_len`), every other block whole. A device with
    /// [`crate::device::Device::short_writes`] is written only those.
    pub fn written_len(&self) -> usize {
        if self.kind == BlockKind::Commit {
            crate::format::journal::written_len(&self.data)
        } else {
            self.data.len()
        }
    }
}

/// A block read from one place and written to another, the read checked before the write:
/// a checkpoint of a block whose newest committed version is only in a log (manylogs, parked
/// out of the cache) reads it there and writes it home; a log swap moves a log's blocks to
/// another log. A mismatch fails the plan.
#[derive(Debug, Clone)]
pub struct IoCopy {
    pub from: (DevId, DevBlock),
    pub to: (DevId, DevBlock),
    pub check: CopyCheck,
    pub kind: BlockKind,
}

/// What a copy's read must match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyCheck {
    /// The journal tag's data hash of a logged block going home
    /// (`format::journal::data_hash(home, 0, data)`: the hash is seeded with the block's
    /// number, which a copy home names twice, as `home` and as its destination).
    Tag { home: HomeBlock, hash: u32 },
    /// The CRC32C of the block's first `len` bytes as they were written to the log (any
    /// journal block: descriptors, commits, logged data; a commit block may have been written
    /// only as the sectors that hold it), for a copy from one log to another.
    Crc { len: u32, crc: u32 },
}

impl CopyCheck {
    /// Whether `data`, read for a copy, is what was written.
    pub fn matches(self, data: &[u8]) -> bool {
        match self {
            CopyCheck::Tag { home, hash } => crate::format::journal::data_hash(home, 0, data) == hash,
            CopyCheck::Crc { len, crc } => data.len() >= len as usize && crc32c::crc32c(&data[..len as usize]) == crc,
        }
    }
}

/// Copies, then writes that may be issued in any order, then flushes of the listed devices. A
/// stage starts only after the previous one (including its flushes) completed. A copy's read
/// completes before its write is issued; its write is one of the stage's unordered writes.
#[derive(Debug, Clone, Default)]
pub struct IoStage {
    pub copies: Vec<IoCopy>,
    pub writes: Vec<IoWrite>,
    pub flush: Vec<DevId>,
    pub remote: Vec<RemoteOp>,
    /// Carried out in order, after the writes and remote operations, before the flushes.
    pub nvm: Vec<NvmOp>,
}

#[derive(Debug, Clone, Default)]
pub struct IoPlan {
    pub stages: Vec<IoStage>,
}

impl IoPlan {
    pub fn push(&mut self, writes: Vec<IoWrite>, flush: Vec<DevId>) {
        self.push_stage(IoStage { copies: Vec::new(), writes, flush, remote: Vec::new(), nvm: Vec::new() });
    }
    pub fn push_stage(&mut self, stage: IoStage) {
        if !stage.copies.is_empty() || !stage.writes.is_empty() || !stage.flush.is_empty() || !stage.remote.is_empty() || !stage.nvm.is_empty() {
            self.stages.push(stage);
        }
    }
    pub fn write_count(&self) -> usize {
        self.stages.iter().map(|s| s.writes.len() + s.copies.len()).sum()
    }
}

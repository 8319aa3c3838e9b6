//! The `internal` and `external` placements: a circular log in a contiguous block range.
//! Journal block 0 is the journal superblock; the log occupies `[first, total)` and wraps.

use crate::journal::plan::DevId;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegionKind {
    /// A region of the file-system device.
    Internal,
    /// A device or file of its own.
    External,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRegion {
    pub kind: RegionKind,
    /// Device block of journal block 0.
    pub base: u64,
    /// Journal blocks including the superblock.
    pub total: u64,
    /// First log block (1).
    pub first: u64,
}

impl LogRegion {
    pub fn internal(base: u64, total: u64) -> Self {
        LogRegion { kind: RegionKind::Internal, base, total, first: 1 }
    }
    pub fn external(total: u64) -> Self {
        LogRegion { kind: RegionKind::External, base: 0, total, first: 1 }
    }
    pub fn name(&self) -> &'static str {
        match self.kind {
            RegionKind::Internal => "internal",
            RegionKind::External => "external",
        }
    }
    pub fn dev(&self) -> DevId {
        match self.kind {
            RegionKind::Internal => DevId::Fs,
            RegionKind::External => DevId::Journal,
        }
    }
    /// Device block of journal block `j`.
    pub fn device_block(&self, j: u64) -> u64 {
        debug_assert!(j < self.total);
        self.base + j
    }
    /// Blocks in the circular part.
    pub fn ring_len(&self) -> u64 {
        self.total - self.first
    }
    /// The log position after `pos`.
    pub fn next(&self, pos: u64) -> u64 {
        if pos + 1 >= self.total {
            self.first
        } else {
            pos + 1
        }
    }
    /// Blocks from `from` forward to `to`.
    pub fn distance(&self, from: u64, to: u64) -> u64 {
        if to >= from {
            to - from
        } else {
            self.ring_len() - (from - to)
        }
    }
    /// `pos` advanced by `n` blocks.
    pub fn advance(&self, pos: u64, n: u64) -> u64 {
        self.first + (pos - self.first + n) % self.ring_len()
    }
}

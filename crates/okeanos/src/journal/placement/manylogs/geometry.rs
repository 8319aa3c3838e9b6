//! Where the logs and the log table are: one log at the start of every block group, the
//! table's two copies and the map's copies in the journal region (docs/FORMAT.md, "Log table").

use crate::ids::LogPos;
use super::{LogRegion, RegionKind};
use crate::format::logtable::{LogMap, LogTable};

/// Where the logs and the log table are on the file-system device.
#[derive(Debug, Clone)]
pub struct Geometry {
    pub block_size: usize,
    pub fs_uuid: [u8; 16],
    /// First block of group 0 and blocks per group: a block's group is its log's index.
    pub first_group_block: u64,
    pub blocks_per_group: u64,
    /// First device block of each group's log.
    pub log_starts: Vec<u64>,
    pub log_blocks: u64,
    /// Device block of copy A of the log table; copy B follows it.
    pub table_at: u64,
    pub table_blocks: u64,
    /// Device block of copy A of the map (after both table copies); copy B follows it. Each
    /// is `map_blocks` long: the rest of the journal region, halved (0: no room for a map;
    /// tables are then written as version 2).
    pub map_at: u64,
    pub map_blocks: u64,
    /// Blocks of the file system (a mapped block lies below).
    pub fs_blocks: u64,
    /// Where its inode tables lie (inode notes in fast commits name inodes).
    pub inodes: Option<crate::format::inode::InodeTables>,
}

impl Geometry {
    pub fn of(sb: &crate::format::Superblock) -> Geometry {
        let crate::format::JournalLocation::Internal { start, blocks } = sb.journal else {
            panic!("a manylogs superblock validates with an internal journal region");
        };
        let table_blocks = LogTable::blocks_per_copy(sb.group_count as u64, sb.block_size as usize);
        Geometry {
            block_size: sb.block_size as usize,
            fs_uuid: sb.uuid,
            first_group_block: sb.first_group_block,
            blocks_per_group: sb.blocks_per_group as u64,
            log_starts: (0..sb.group_count).map(|g| sb.log_area_start(g)).collect(),
            log_blocks: sb.log_area_blocks as u64,
            table_at: start + 1,
            table_blocks,
            map_at: start + 1 + 2 * table_blocks,
            map_blocks: blocks.saturating_sub(1 + 2 * table_blocks) / 2,
            fs_blocks: sb.block_count,
            inodes: Some(crate::format::inode::InodeTables::of(sb)),
        }
    }

    /// Device block of the first block of map copy `slot`.
    pub fn map_copy_at(&self, slot: u64) -> u64 {
        self.map_at + slot * self.map_blocks
    }

    /// How many blocks a map copy can name (None: not even the logs' positions fit).
    pub fn map_capacity(&self) -> Option<usize> {
        LogMap::capacity(self.log_starts.len(), self.map_blocks, self.block_size)
    }

    /// Whether device block `at` lies inside log `i`.
    pub(super) fn in_log(&self, i: usize, at: u64) -> bool {
        (self.log_starts[i]..self.log_starts[i] + self.log_blocks).contains(&at)
    }

    pub fn region(&self, log: usize) -> LogRegion {
        LogRegion { kind: RegionKind::Log, base: self.log_starts[log], total: self.log_blocks, first: LogPos::ZERO }
    }

    /// The group (and log) a file-system block lies in.
    pub fn group_of(&self, block: u64) -> usize {
        let g = block.saturating_sub(self.first_group_block) / self.blocks_per_group;
        (g as usize).min(self.log_starts.len() - 1)
    }

    /// Device block of the first block of table copy `slot` (0: A, 1: B).
    pub fn copy_at(&self, slot: u64) -> u64 {
        self.table_at + slot * self.table_blocks
    }
}

//! Block-group descriptors. Each group is laid out as
//! `[block bitmap][inode bitmap][inode table][log area][data ...]`; the log area (0 blocks by
//! default) is reserved for the scattered logs of the manylogs placement. The descriptor
//! carries the group's free counts and the CRCs of both bitmaps, so a bitmap block is checked
//! against its descriptor. Byte map: docs/FORMAT.md, "Group descriptor".

use crate::ids::HomeBlock;
use super::{check_crc, need, put_crc, seed, FormatError, Le};

pub const GD_SIZE: usize = 64;
const GD_CRC_AT: usize = 60;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupDesc {
    pub block_bitmap: HomeBlock,
    pub inode_bitmap: HomeBlock,
    pub inode_table: HomeBlock,
    pub log_area_start: u64,
    pub log_area_blocks: u32,
    pub free_blocks: u32,
    pub free_inodes: u32,
    pub used_dirs: u32,
    pub block_bitmap_crc: u32,
    pub inode_bitmap_crc: u32,
}

impl GroupDesc {
    pub fn encode(&self, group: u32, out: &mut [u8]) {
        assert!(out.len() >= GD_SIZE);
        out[..GD_SIZE].fill(0);
        Le::put_u64(out, 0, self.block_bitmap.get());
        Le::put_u64(out, 8, self.inode_bitmap.get());
        Le::put_u64(out, 16, self.inode_table.get());
        Le::put_u64(out, 24, self.log_area_start);
        Le::put_u32(out, 32, self.log_area_blocks);
        Le::put_u32(out, 36, self.free_blocks);
        Le::put_u32(out, 40, self.free_inodes);
        Le::put_u32(out, 44, self.used_dirs);
        Le::put_u32(out, 48, self.block_bitmap_crc);
        Le::put_u32(out, 52, self.inode_bitmap_crc);
        put_crc(&mut out[..GD_SIZE], GD_CRC_AT, seed::GROUP_DESC ^ group);
    }

    pub fn decode(group: u32, b: &[u8]) -> Result<Self, FormatError> {
        const W: &str = "group descriptor";
        need(W, b, GD_SIZE)?;
        check_crc(W, &b[..GD_SIZE], GD_CRC_AT, seed::GROUP_DESC ^ group)?;
        Ok(GroupDesc {
            block_bitmap: HomeBlock::new(Le::u64(b, 0)),
            inode_bitmap: HomeBlock::new(Le::u64(b, 8)),
            inode_table: HomeBlock::new(Le::u64(b, 16)),
            log_area_start: Le::u64(b, 24),
            log_area_blocks: Le::u32(b, 32),
            free_blocks: Le::u32(b, 36),
            free_inodes: Le::u32(b, 40),
            used_dirs: Le::u32(b, 44),
            block_bitmap_crc: Le::u32(b, 48),
            inode_bitmap_crc: Le::u32(b, 52),
        })
    }
}

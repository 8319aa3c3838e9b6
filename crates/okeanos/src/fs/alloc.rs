//! Block and inode allocation over the group bitmaps.
//!
//! Blocks freed by a transaction stay unallocatable until it commits (`pending_free_*`), as in
//! ext4: until then a crash brings the old owner back, and the old owner's contents must still
//! be there. Allocation is next-fit from a goal: a file's next block goes right after its last
//! one when free, so a stream's appends stay contiguous even when many streams interleave.

use super::{Fs, FsError, FsResult};
use crate::cache::BufKind;
use crate::format::group::GD_SIZE;
use crate::format::{bitmap_crc, GroupDesc};
use crate::ids::HomeBlock;

fn bit(map: &[u8], i: usize) -> bool {
    map[i / 8] & (1 << (i % 8)) != 0
}

/// The first bit in `from..end` of `map` that is clear and not `held` (a block freed by the
/// running transaction). Used stretches are skipped a 64-bit word at a time: allocation from a
/// goal crosses the blocks other files took since, and the whole used part of a group when it
/// wraps around.
fn first_free(map: &[u8], from: usize, end: usize, held: impl Fn(usize) -> bool) -> Option<usize> {
    let end = end.min(map.len() * 8);
    let mut i = from;
    while i < end {
        if i % 64 == 0 && i + 64 <= end {
            let w = u64::from_le_bytes(map[i / 8..i / 8 + 8].try_into().expect("eight bytes"));
            if w == u64::MAX {
                i += 64;
                continue;
            }
            // Bit k of the little-endian word is bit i + k of the map.
            i += (!w).trailing_zeros() as usize;
        }
        if !bit(map, i) && !held(i) {
            return Some(i);
        }
        i += 1;
    }
    None
}

impl<'a> Fs<'a> {
    pub fn group_start(&self, g: u32) -> HomeBlock {
        HomeBlock::new(self.st.sb.first_group_block + g as u64 * self.st.sb.blocks_per_group as u64)
    }

    /// First data block of group `g` (after bitmaps, inode table and log area).
    pub fn group_data_start(&self, g: u32) -> HomeBlock {
        self.group_start(g) + 2 + self.st.sb.inode_table_blocks() as u64 + self.st.sb.log_area_blocks as u64
    }

    pub fn group_of_block(&self, b: HomeBlock) -> Option<u32> {
        let sb = &self.st.sb;
        let b = b.get();
        if b < sb.first_group_block || b >= sb.block_count {
            return None;
        }
        let g = ((b - sb.first_group_block) / sb.blocks_per_group as u64) as u32;
        (g < sb.group_count).then_some(g)
    }

    /// Whether `b` is a block files may own (a data block of some group).
    pub fn is_data_block(&self, b: HomeBlock) -> bool {
        match self.group_of_block(b) {
            Some(g) => b >= self.group_data_start(g),
            None => false,
        }
    }

    /// Reads a bitmap block and checks it against the CRC in its group descriptor.
    fn load_bitmap(&mut self, g: u32, inode: bool) -> FsResult<HomeBlock> {
        let gd = &self.st.gdt[g as usize];
        let (blk, want) = if inode { (gd.inode_bitmap, gd.inode_bitmap_crc) } else { (gd.block_bitmap, gd.block_bitmap_crc) };
        if self.st.cache.contains(blk) {
            // Cached, but it may be parked (its newest version only in NVM or a log): loaded
            // back, checked against its journal hash.
            self.st.unpark(blk)?;
        } else {
            let data = self.block(blk, BufKind::Meta)?.to_vec();
            let got = bitmap_crc(g, &data);
            if got != want {
                self.st.cache.forget(blk);
                let what = if inode { "inode" } else { "block" };
                return Err(FsError::Corrupt(format!("{what} bitmap of group {g} fails its checksum ({got:#x} != {want:#x})")));
            }
        }
        Ok(blk)
    }

    /// Writes group descriptor `g` into its table block.
    pub fn store_group(&mut self, g: u32) -> FsResult<()> {
        let per_block = self.bs() / GD_SIZE;
        let blk = HomeBlock::new(self.st.sb.gdt_start + (g as usize / per_block) as u64);
        let off = (g as usize % per_block) * GD_SIZE;
        let gd: GroupDesc = self.st.gdt[g as usize].clone();
        let data = self.meta_mut(blk)?;
        gd.encode(g, &mut data[off..off + GD_SIZE]);
        Ok(())
    }

    /// Sets or clears bit `i` of a group's bitmap, updating the descriptor's count and CRC.
    fn flip(&mut self, g: u32, inode: bool, i: usize, set: bool) -> FsResult<()> {
        let blk = self.load_bitmap(g, inode)?;
        let map = self.meta_mut(blk)?;
        assert_eq!(bit(map, i), !set, "bitmap bit {i} of group {g} already {}", if set { "set" } else { "clear" });
        if set {
            map[i / 8] |= 1 << (i % 8);
        } else {
            map[i / 8] &= !(1 << (i % 8));
        }
        let crc = bitmap_crc(g, map);
        let gd = &mut self.st.gdt[g as usize];
        let delta: i64 = if set { -1 } else { 1 };
        if inode {
            gd.inode_bitmap_crc = crc;
            gd.free_inodes = (gd.free_inodes as i64 + delta) as u32;
            self.st.free_inode_total = (self.st.free_inode_total as i64 + delta) as u64;
        } else {
            gd.block_bitmap_crc = crc;
            gd.free_blocks = (gd.free_blocks as i64 + delta) as u32;
            self.st.free_block_total = (self.st.free_block_total as i64 + delta) as u64;
        }
        self.store_group(g)
    }

    /// Allocates one block, preferring `goal` and what follows it.
    pub fn alloc_block(&mut self, goal: HomeBlock) -> FsResult<HomeBlock> {
        if self.st.allocatable_blocks() == 0 {
            return Err(FsError::NoSpace);
        }
        let groups = self.st.sb.group_count;
        let start_g = self.group_of_block(goal).unwrap_or(0);
        for k in 0..=groups {
            let g = (start_g + k) % groups;
            if self.st.gdt[g as usize].free_blocks == 0 {
                continue;
            }
            let lo = self.group_data_start(g);
            let hi = self.group_start(g) + self.st.sb.blocks_in_group(g);
            let from = if k == 0 && goal >= lo && goal < hi { goal } else { self.st.alloc_cursor[g as usize].clamp(lo, hi) };
            // The wrap-around search only when the first finds nothing (`Option::or` would
            // scan the group's whole used part before `from` on every allocation).
            let found = match self.find_free(g, from, hi)? {
                Some(b) => Some(b),
                None => self.find_free(g, lo, from)?,
            };
            if let Some(b) = found {
                let base = self.group_start(g);
                self.flip(g, false, (b - base) as usize, true)?;
                self.st.alloc_cursor[g as usize] = b + 1;
                return Ok(b);
            }
        }
        Err(FsError::NoSpace)
    }

    fn find_free(&mut self, g: u32, from: HomeBlock, to: HomeBlock) -> FsResult<Option<HomeBlock>> {
        let blk = self.load_bitmap(g, false)?;
        let base = self.group_start(g);
        let map = &self.st.cache.peek(blk).expect("bitmap cached").data;
        let pending = &self.st.pending_free_blocks;
        let found = first_free(map, (from - base) as usize, (to - base) as usize, |i| pending.contains(&(base + i as u64)));
        Ok(found.map(|i| base + i as u64))
    }

    /// Frees block `b`: revoked if it has logged copies; reusable once this transaction commits.
    pub fn free_block(&mut self, b: HomeBlock) -> FsResult<()> {
        let g = self.group_of_block(b).filter(|_| self.is_data_block(b)).ok_or_else(|| FsError::Corrupt(format!("freeing block {b} that no file can own")))?;
        let base = self.group_start(g);
        self.flip(g, false, (b - base) as usize, false)?;
        self.st.journal.forget_block(b);
        self.st.pending_free_blocks.insert(b);
        Ok(())
    }

    /// Allocates an inode, preferring group `near`.
    pub fn alloc_inode(&mut self, near: u32, dir: bool) -> FsResult<u32> {
        if self.st.allocatable_inodes() == 0 {
            return Err(FsError::NoSpace);
        }
        let groups = self.st.sb.group_count;
        let ipg = self.st.sb.inodes_per_group as usize;
        for k in 0..groups {
            let g = (near + k) % groups;
            if self.st.gdt[g as usize].free_inodes == 0 {
                continue;
            }
            let blk = self.load_bitmap(g, true)?;
            let map = &self.st.cache.peek(blk).expect("bitmap cached").data;
            let found = (0..ipg).find(|&i| !bit(map, i) && !self.st.pending_free_inodes.contains(&(g * ipg as u32 + i as u32 + 1)));
            if let Some(i) = found {
                self.flip(g, true, i, true)?;
                if dir {
                    self.st.gdt[g as usize].used_dirs += 1;
                    self.store_group(g)?;
                }
                return Ok(g * ipg as u32 + i as u32 + 1);
            }
        }
        Err(FsError::NoSpace)
    }

    pub fn free_inode(&mut self, ino: u32, dir: bool) -> FsResult<()> {
        let ipg = self.st.sb.inodes_per_group;
        let g = (ino - 1) / ipg;
        self.flip(g, true, ((ino - 1) % ipg) as usize, false)?;
        if dir {
            let gd = &mut self.st.gdt[g as usize];
            gd.used_dirs = gd.used_dirs.saturating_sub(1);
            self.store_group(g)?;
        }
        self.st.journal.forget_inode(ino);
        self.st.pending_free_inodes.insert(ino);
        Ok(())
    }

    /// Writes the in-memory superblock into block 0 (orphan list changes).
    pub fn store_superblock(&mut self) -> FsResult<()> {
        let sb = self.st.sb.clone();
        let data = self.meta_mut(HomeBlock::SUPERBLOCK)?;
        sb.encode(&mut data[..]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{bit, first_free};
    use proptest::prelude::*;

    proptest! {
        /// The word-at-a-time search agrees with its definition, bit by bit, whatever the map,
        /// the range and the held bits.
        #[test]
        fn first_free_agrees_with_the_bitwise_definition(
            map in proptest::collection::vec(prop_oneof![Just(0xffu8), Just(0u8), any::<u8>()], 0..80),
            from in 0usize..700,
            len in 0usize..700,
            held in proptest::collection::btree_set(0usize..640, 0..8),
        ) {
            let end = from + len;
            let want = (from..end.min(map.len() * 8)).find(|&i| !bit(&map, i) && !held.contains(&i));
            prop_assert_eq!(first_free(&map, from, end, |i| held.contains(&i)), want);
        }
    }

    #[test]
    fn first_free_skips_whole_words_and_finds_the_first_clear_bit_after_them() {
        let mut map = vec![0xffu8; 64];
        map[37] = 0b1110_1111;
        assert_eq!(first_free(&map, 0, 512, |_| false), Some(37 * 8 + 4));
        assert_eq!(first_free(&map, 37 * 8 + 5, 512, |_| false), None, "nothing after it");
        assert_eq!(first_free(&map, 0, 512, |i| i == 37 * 8 + 4), None, "held by the running transaction");
        assert_eq!(first_free(&map, 3, 37 * 8 + 4, |_| false), None, "the end is exclusive");
    }
}

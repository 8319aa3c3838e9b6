//! Block and inode allocation over the group bitmaps.
//!
//! Blocks freed by a transaction stay unallocatable until it commits (`pending_free_*`), as in
//! ext4: until then a crash brings the old owner back, and the old owner's contents must still
//! be there.
//!
//! Allocation is next-fit from a goal: a file's next block goes right after its last one when
//! that is free. When it is not (another file grew into it), a file that appends (a block
//! right after its last, the file with no holes; any other write stays next-fit from the
//! block before it, so random writes keep a file compact) moves to a whole
//! free stretch instead, aligned to its size: [`run_for`] blocks (64 to 1,024), the first such
//! stretch after the goal in the goal's group. Next-fit alone would take the first free block
//! after the other file's last, the block that file wants next, and the two files would then
//! take turns block by block: a hundred streams appending 1 KiB records each left every file
//! one extent a block (237 extents for 300 blocks), which costs the mapping's lookups and
//! stores on every append and a seek a block when the file is read. A file's first block, and
//! every block when no free stretch is left, is next-fit as before, so small files stay packed.

use super::{Fs, FsError, FsResult};
use crate::cache::BufKind;
use crate::format::group::GD_SIZE;
use crate::format::{bitmap_crc, GroupDesc};
use crate::ids::HomeBlock;

fn bit(map: &[u8], i: usize) -> bool {
    map[i / 8] & (1 << (i % 8)) != 0
}

/// The free stretch a growing file moves to when its next block is taken, for file block `fb`:
/// none below [`STRETCH_FROM`] (0: next-fit), then the power of two at or above the blocks it
/// has, from 64 (one word of the bitmap) to 1,024 (4 MiB of 4 KiB blocks), so the stretches
/// double as the file grows.
pub fn run_for(fb: u32) -> usize {
    if fb < STRETCH_FROM {
        return 0;
    }
    (fb as usize + 1).next_power_of_two().clamp(64, 1024)
}

/// The file block from which a growing file moves to a free stretch when its next block is
/// taken. Below it a file stays packed beside other small files (next-fit), as ext4 packs
/// files of under 16 blocks in its locality groups: even one extent a block, its first eight
/// blocks fit the inode's ten inline extents, so a small file costs no extent block and does
/// not take a stretch of 64 for two blocks (8,000 small files would spread over 2 GB).
pub const STRETCH_FROM: u32 = 8;

/// How many groups after a growing file's own are searched for a free stretch before
/// next-fit in its own: each search is bounded (a bitmap's words) and a group without one is
/// remembered, so a full file system does not pay for it on every block.
pub const STRETCH_GROUPS: u32 = 8;

/// The first bit of the first `run`-aligned stretch of `run` clear bits in `from..end` of
/// `map` (`run` a multiple of 64) whose first bit is not `held`. Whole words are compared.
fn first_free_run(map: &[u8], from: usize, end: usize, run: usize, held: impl Fn(usize) -> bool) -> Option<usize> {
    debug_assert!(run % 64 == 0 && run > 0);
    let end = end.min(map.len() * 8);
    let word = |w: usize| u64::from_le_bytes(map[w * 8..w * 8 + 8].try_into().expect("eight bytes"));
    let mut i = from.next_multiple_of(run);
    while i + run <= end {
        if (i / 64..(i + run) / 64).all(|w| word(w) == 0) && !held(i) {
            return Some(i);
        }
        i += run;
    }
    None
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

    /// Allocates one block for a file that grows: `goal` when it is free; else the first block
    /// of a free stretch ([`run_for`]'s `run` blocks, aligned to its size, or a smaller one down
    /// to 64), in the goal's group from the goal on, or in one of the [`STRETCH_GROUPS`] groups
    /// after it; else as [`alloc_block`](Self::alloc_block).
    pub fn alloc_block_growing(&mut self, goal: HomeBlock, run: usize) -> FsResult<HomeBlock> {
        if self.st.allocatable_blocks() == 0 {
            return Err(FsError::NoSpace);
        }
        let Some(g0) = self.group_of_block(goal).filter(|_| run > 0) else {
            return self.alloc_block(goal);
        };
        if goal >= self.group_data_start(g0) && self.find_free(g0, goal, goal + 1)?.is_some() {
            let base = self.group_start(g0);
            self.flip(g0, false, (goal - base) as usize, true)?;
            return Ok(goal);
        }
        let groups = self.st.sb.group_count;
        for k in 0..=STRETCH_GROUPS.min(groups - 1) {
            let g = (g0 + k) % groups;
            if let Some(b) = self.find_stretch(g, if k == 0 { Some(goal) } else { None }, run)? {
                let base = self.group_start(g);
                self.flip(g, false, (b - base) as usize, true)?;
                return Ok(b);
            }
        }
        self.alloc_block(goal)
    }

    /// A free stretch in group `g` (alloc_block_growing), searched from `goal` on and then
    /// from the group's start; halving `run` down to 64 while none is found. A group where none
    /// of 64 is found is noted and not searched again until blocks are freed in it.
    fn find_stretch(&mut self, g: u32, goal: Option<HomeBlock>, run: usize) -> FsResult<Option<HomeBlock>> {
        let free = self.st.gdt[g as usize].free_blocks;
        if (free as usize) < 64 || self.st.stretchless[g as usize].is_some_and(|f| free <= f) {
            return Ok(None);
        }
        let lo = self.group_data_start(g);
        let hi = self.group_start(g) + self.st.sb.blocks_in_group(g);
        let from = goal.filter(|&b| b >= lo && b < hi).unwrap_or(lo);
        let mut run = run.max(64);
        loop {
            if let Some(b) = self.find_run(g, from, hi, run)? {
                return Ok(Some(b));
            }
            if from > lo {
                if let Some(b) = self.find_run(g, lo, from, run)? {
                    return Ok(Some(b));
                }
            }
            if run == 64 {
                self.st.stretchless[g as usize] = Some(free);
                return Ok(None);
            }
            run /= 2;
        }
    }

    /// Allocates one block, preferring `goal` and what follows it (next-fit).
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

    fn find_run(&mut self, g: u32, from: HomeBlock, to: HomeBlock, run: usize) -> FsResult<Option<HomeBlock>> {
        let blk = self.load_bitmap(g, false)?;
        let base = self.group_start(g);
        let map = &self.st.cache.peek(blk).expect("bitmap cached").data;
        let pending = &self.st.pending_free_blocks;
        let found = first_free_run(map, (from - base) as usize, (to - base) as usize, run, |i| pending.contains(&(base + i as u64)));
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
    use super::{bit, first_free, first_free_run};
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

    proptest! {
        /// The stretch search agrees with its definition: the first `run`-aligned position at
        /// or after `from` whose `run` bits are all clear and end by `end`, its first bit not
        /// held.
        #[test]
        fn first_free_run_agrees_with_its_definition(
            map in proptest::collection::vec(prop_oneof![Just(0u8), Just(0u8), Just(0xffu8), any::<u8>()], 0..96),
            from in 0usize..800,
            len in 0usize..800,
            words in 1usize..4,
            held in proptest::collection::btree_set(0usize..768, 0..4),
        ) {
            let run = 64 * words;
            let end = from + len;
            let want = (from..end.min(map.len() * 8))
                .filter(|i| i % run == 0 && i + run <= end.min(map.len() * 8))
                .find(|&i| (i..i + run).all(|b| !bit(&map, b)) && !held.contains(&i));
            prop_assert_eq!(first_free_run(&map, from, end, run, |i| held.contains(&i)), want);
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

#[cfg(test)]
mod interleaved {
    //! Where interleaved appends put their blocks: many streams, one image.
    use super::STRETCH_FROM;
    use crate::{FsError, MountOptions, Okeanos};

    /// A fresh image of `mib` MiB, mounted with `opts`.
    fn mounted(mib: u64, opts: &str) -> (tempfile::TempDir, Okeanos) {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("img");
        Okeanos::mkfs_file(&img, mib << 20, &Default::default()).unwrap();
        let fs = Okeanos::open(&img, MountOptions::parse(opts).unwrap()).unwrap();
        (dir, fs)
    }

    /// Up to `rounds` rounds of one append of `rec` to each of `files` in turn, until the disk
    /// is full; the bytes written.
    fn append_in_turns(fs: &Okeanos, files: &[crate::File], rounds: usize, rec: &[u8]) -> u64 {
        let mut written = 0u64;
        for r in 0..rounds {
            for f in files {
                match f.append(rec) {
                    Ok(_) => written += rec.len() as u64,
                    Err(FsError::NoSpace) => return written,
                    Err(e) => panic!("append: {e}"),
                }
            }
            if r % 64 == 63 {
                fs.sync().unwrap();
            }
        }
        written
    }

    /// An image of `mib` MiB with `files` files, after `rounds` rounds of `size`-byte appends,
    /// one file after another in each round (as many streams appending at once do), or until
    /// the disk is full; each file's extents (logical, length, physical) and the bytes written.
    fn interleaved_appends(mib: u64, files: usize, rounds: usize, size: usize) -> (Vec<Vec<(u32, u32, u64)>>, u64) {
        let (_dir, fs) = mounted(mib, "data=wasteless,dmeta");
        let fh: Vec<_> = (0..files).map(|k| fs.create_file(&format!("/f{k}")).unwrap()).collect();
        let written = append_in_turns(&fs, &fh, rounds, &vec![7u8; size]);
        fs.sync().unwrap();
        let ext = fh.iter().map(|f| fs.with_fs(|x| Ok(x.load(f.ino())?.extents().iter().map(|e| (e.logical, e.len, e.physical.get())).collect())).unwrap()).collect();
        fs.unmount().unwrap();
        (ext, written)
    }

    /// A hundred streams of 1 KiB appends, 300 blocks a file: each file in a few extents, its
    /// stretches doubling. Next-fit alone gave each file one extent a block (a median of 237
    /// extents for 300 blocks) as the files took turns.
    #[test]
    fn interleaved_appends_keep_each_file_in_a_few_extents() {
        let (ext, _) = interleaved_appends(512, 100, 1200, 1024);
        let mut counts: Vec<usize> = ext.iter().map(Vec::len).collect();
        counts.sort();
        println!("extents a file: min {} median {} max {}", counts[0], counts[50], counts[99]);
        assert!(counts[99] <= 6, "a file of 300 blocks in {} extents (median {})", counts[99], counts[50]);
        for e in &ext {
            assert_eq!(e.iter().map(|x| x.1 as u64).sum::<u64>(), 300, "every block mapped");
        }
    }

    /// A file of a few blocks does not move to a stretch: 400 files of two blocks, appended
    /// in turns, each has its second block within a few blocks of its first (next-fit past the
    /// files that share its inode's home), not at a stretch of 64 for two blocks.
    #[test]
    fn small_files_stay_beside_their_first_block() {
        let (ext, _) = interleaved_appends(512, 400, 8, 1024);
        assert!(STRETCH_FROM > 2);
        let mut far = Vec::new();
        for e in &ext {
            let blocks: Vec<u64> = e.iter().flat_map(|&(_, len, p)| p..p + len as u64).collect();
            assert_eq!(blocks.len(), 2);
            if blocks[1].abs_diff(blocks[0]) > 16 {
                far.push((blocks[0], blocks[1]));
            }
        }
        assert!(far.is_empty(), "{} of 400 two-block files moved away from their first block: {:?}", far.len(), &far[..far.len().min(8)]);
    }

    /// Writes in a file's holes are not growth: a file of 1,024 blocks written once each in a
    /// seeded random order (as IOzone's random writers do) lies within a little more than its
    /// own size of the disk. Moving each write whose neighbour's next block was taken to a
    /// stretch scattered it over the group (and doubled the simulated IOzone's time).
    #[test]
    fn random_writes_into_holes_stay_compact() {
        use rand::{seq::SliceRandom, SeedableRng};
        let seed: u64 = std::env::var("OKEANOS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
        println!("seed {seed} (OKEANOS_SEED={seed} repeats it)");
        let (_dir, fs) = mounted(256, "data=ordered");
        let f = fs.create_file("/r").unwrap();
        let mut order: Vec<u64> = (0..1024).collect();
        order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
        for b in order {
            f.write_at(b * 4096, &[1u8; 4096]).unwrap();
        }
        f.fsync().unwrap();
        let ext: Vec<(u64, u64)> = fs.with_fs(|x| Ok(x.load(f.ino())?.extents().iter().map(|e| (e.physical.get(), e.len as u64)).collect())).unwrap();
        let lo = ext.iter().map(|e| e.0).min().unwrap();
        let hi = ext.iter().map(|e| e.0 + e.1).max().unwrap();
        assert_eq!(ext.iter().map(|e| e.1).sum::<u64>(), 1024);
        assert!(hi - lo <= 1024 + 64, "1,024 blocks written at random spread over {} blocks of the disk", hi - lo);
        fs.unmount().unwrap();
    }

    /// A group found without stretches is searched again once blocks are freed in it: a disk
    /// filled by a hundred streams (its group noted as having none), every file removed, then
    /// forty files appended in turns for 48 blocks each: each file's first eight blocks, then
    /// one stretch (at most 9 extents), where with the note kept they took turns block by
    /// block (48 extents each).
    #[test]
    fn a_group_without_stretches_is_searched_again_after_frees() {
        let (_dir, fs) = mounted(24, "data=wasteless,dmeta");
        let fh: Vec<_> = (0..100).map(|k| fs.create_file(&format!("/f{k}")).unwrap()).collect();
        let rec = vec![7u8; 4096];
        append_in_turns(&fs, &fh, 1 << 20, &rec);
        fs.sync().unwrap();
        let noted = fs.with_fs(|x| Ok(x.st.stretchless.iter().filter(|s| s.is_some()).count())).unwrap();
        assert!(noted > 0, "the full disk's group was noted as having no stretch");
        drop(fh);
        for k in 0..100 {
            fs.remove_path(&format!("/f{k}")).unwrap();
        }
        fs.sync().unwrap();
        let again: Vec<_> = (0..40).map(|k| fs.create_file(&format!("/g{k}")).unwrap()).collect();
        for _ in 0..48 {
            for f in &again {
                f.append(&rec).unwrap();
            }
        }
        fs.sync().unwrap();
        let most = again.iter().map(|f| fs.with_fs(|x| Ok(x.load(f.ino())?.extents().len())).unwrap()).max().unwrap();
        assert!(most <= 12, "a file of 48 blocks appended beside 39 others in {most} extents after frees (one a block: the group's note was kept)");
        fs.unmount().unwrap();
    }

    /// With no free stretch left anywhere, growing files still get every free block: appends
    /// of a hundred streams fill a small disk to within a few blocks a file of its capacity
    /// before they are refused for space.
    #[test]
    fn a_disk_without_stretches_still_fills() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("img");
        Okeanos::mkfs_file(&img, 24 << 20, &Default::default()).unwrap();
        let free = {
            let fs = Okeanos::open(&img, MountOptions::parse("data=wasteless,dmeta").unwrap()).unwrap();
            let f = fs.with_fs(|x| Ok(x.st.allocatable_blocks())).unwrap();
            fs.unmount().unwrap();
            f
        };
        let (ext, written) = interleaved_appends(24, 100, 1 << 20, 4096);
        let mapped: u64 = ext.iter().flatten().map(|x| x.1 as u64).sum();
        assert_eq!(mapped * 4096, written, "every block written is mapped");
        // Extent-chain blocks and the directory's take the rest.
        assert!(mapped + 200 >= free, "{mapped} blocks written of {free} free: refused for space early");
    }
}

//! File contents: read, write at any offset and size, truncate.
//!
//! A write allocates the blocks it needs (next to the file's previous block when free),
//! copies the bytes into the cached blocks and hands each block to the content policy through
//! the journal (`dirty_data`). A block written whole, or just allocated, is never read first.

use super::{Fs, FsError, FsResult};
use crate::cache::BufKind;
use crate::det::HashMap;
use crate::ids::HomeBlock;

/// What a read does with a block missing from the cache ([`Fs::read_via`]).
pub enum Misses<'a> {
    /// Reads it from the device, under the state lock.
    Read,
    /// Notes it and its cache generation; the bytes returned are not the file's.
    Note(&'a mut Vec<(HomeBlock, u32)>),
    /// Takes its copy read outside the lock (with the generation noted before that read) if
    /// the generation is unchanged; reads it again otherwise.
    Use(&'a mut HashMap<HomeBlock, (u32, Vec<u8>)>),
}
use crate::format::extent::ExtentBlock;

/// Largest file: file block numbers are 32-bit.
pub const MAX_FILE_BLOCKS: u64 = u32::MAX as u64 - 1;

impl<'a> Fs<'a> {
    /// Where a file's first block should go: spread inodes over their group's data area so that
    /// concurrent streams grow apart rather than interleaving.
    fn home_goal(&self, ino: u32) -> HomeBlock {
        let g = (ino - 1) / self.st.sb.inodes_per_group;
        let lo = self.group_data_start(g);
        let hi = self.group_start(g) + self.st.sb.blocks_in_group(g);
        let span = (hi - lo).max(1);
        lo + (ino as u64).wrapping_mul(2_654_435_761) % span / 64 * 64 % span
    }

    /// Blocks a write of `len` bytes at `off` to `ino` must allocate (holes in the range), and an
    /// upper bound of extent-chain blocks it may add.
    pub fn write_needs(&mut self, ino: u32, off: u64, len: usize) -> FsResult<u64> {
        if len == 0 {
            return Ok(0);
        }
        let bs = self.bs() as u64;
        let first = off / bs;
        let last = (off + len as u64 - 1) / bs;
        let mi = self.load(ino)?;
        let holes = (first..=last).filter(|&fb| mi.bmap(fb as u32).is_none()).count() as u64;
        let chain = if holes > 0 { 1 + holes / ExtentBlock::capacity(bs as usize) as u64 + 1 } else { 0 };
        Ok(holes + chain)
    }

    /// Extent-chain blocks a write may change beyond those an append changes: filling a hole
    /// that lies before the file's last mapped block inserts extents in the middle of the
    /// chain, and every chain block after the insertion point shifts (the chain is a list).
    pub fn write_shift_blocks(&mut self, ino: u32, off: u64, len: usize) -> FsResult<u64> {
        if len == 0 {
            return Ok(0);
        }
        let bs = self.bs() as u64;
        let first = (off / bs) as u32;
        let last = ((off + len as u64 - 1) / bs) as u32;
        let mi = self.load(ino)?;
        let end = mi.extents().iter().map(|e| e.logical as u64 + e.len as u64).max().unwrap_or(0);
        let hole = (first..=last).any(|fb| mi.bmap(fb).is_none());
        Ok(if hole && (first as u64) < end { mi.chain.len() as u64 } else { 0 })
    }

    /// Writes `data` at `off`. The caller sized the handle ([`super::super::engine`]).
    pub fn write(&mut self, ino: u32, off: u64, data: &[u8]) -> FsResult<()> {
        self.write_keeping(ino, off, data, false)
    }

    /// Writes `data` at `off`; with `keep_size` the size does not grow (fallocate's KEEP_SIZE:
    /// blocks past the end, zero-filled, with the inode's EOFBLOCKS flag telling fsck so).
    pub fn write_keeping(&mut self, ino: u32, off: u64, data: &[u8], keep_size: bool) -> FsResult<()> {
        let bs = self.bs() as u64;
        let mi = self.load(ino)?;
        if mi.inode.is_dir() {
            return Err(FsError::IsDir);
        }
        let kind = if mi.inode.is_symlink() { BufKind::Meta } else { BufKind::Data };
        let durable = mi.inode.flags & crate::format::inode::FLAG_DURABLE != 0;
        let end = off.checked_add(data.len() as u64).ok_or(FsError::TooBig)?;
        if end.div_ceil(bs) > MAX_FILE_BLOCKS {
            return Err(FsError::TooBig);
        }
        if self.write_needs(ino, off, data.len())? > self.st.allocatable_blocks() {
            return Err(FsError::NoSpace);
        }
        let old_size = self.load(ino)?.inode.size;
        // Only overwrites, inside the size: an fdatasync may write them in place without a
        // commit (journal/datasync.rs), if the content policy keeps every block in place.
        let mut in_place = self.st.journal.cfg().datasync_in_place && kind == BufKind::Data && !durable && !keep_size && end <= old_size;
        let mut touched = Vec::new();
        let mut pos = off;
        let mut rest = data;
        while !rest.is_empty() {
            let fb = (pos / bs) as u32;
            let in_block = (pos % bs) as usize;
            let n = rest.len().min(bs as usize - in_block);
            let mapped = self.load(ino)?.bmap(fb);
            let (phys, fresh) = match mapped {
                Some(p) => (p, false),
                None => {
                    // A block right after a file with no holes (an append) grows it from
                    // its last block, to a free stretch if that is taken (alloc.rs); any other
                    // block goes after the block before it (next-fit), so a file written at
                    // random offsets stays compact; a file's first block near its inode.
                    let mi = self.load(ino)?;
                    let appends = mi.extents().last().is_some_and(|e| e.end() == fb) && mi.mapped_blocks() == fb as u64;
                    let p = match mi.goal_for(fb) {
                        Some(goal) if appends => self.alloc_block_growing(goal, super::alloc::run_for(fb))?,
                        Some(goal) => self.alloc_block(goal)?,
                        None => self.alloc_block(self.home_goal(ino))?,
                    };
                    self.load(ino)?.map(fb, p);
                    (p, true)
                }
            };
            self.write_file_block(phys, in_block, &rest[..n], data.len(), fresh, kind, durable)?;
            in_place = in_place && !fresh && self.st.journal.syncs_in_place(phys);
            if in_place {
                touched.push(phys);
            }
            pos += n as u64;
            rest = &rest[n..];
        }
        let now = self.now_ns;
        let mi = self.load(ino)?;
        if !keep_size {
            mi.inode.size = mi.inode.size.max(end);
        } else if end > mi.inode.size {
            mi.inode.flags |= crate::format::inode::FLAG_EOFBLOCKS;
        }
        mi.inode.mtime_ns = now;
        mi.inode.ctime_ns = now;
        let new_size = mi.inode.size;
        self.store(ino)?;
        if in_place {
            self.st.touch_overwrite(ino, touched);
        } else {
            self.st.touch(ino, true);
        }
        self.st.note_bytes(ino, off.min(old_size), old_size, new_size);
        Ok(())
    }

    /// Reads up to `len` bytes at `off` (short at end of file). Holes read as zeros.
    pub fn read(&mut self, ino: u32, off: u64, len: usize) -> FsResult<Vec<u8>> {
        self.read_via(ino, off, len, Misses::Read)
    }

    /// [`Fs::read`], with a choice of what a block missing from the cache costs: a device read
    /// under the state lock (`Read`); only noting it, with its cache generation, for a read
    /// outside the lock (`Note`: the bytes returned are then not the file's); or taking the
    /// copy read outside the lock if the block is still uncached and its generation unchanged,
    /// so that its device contents cannot have changed since it was noted (`Use`).
    pub fn read_via(&mut self, ino: u32, off: u64, len: usize, mut misses: Misses) -> FsResult<Vec<u8>> {
        let bs = self.bs() as u64;
        let mi = self.load(ino)?;
        if mi.inode.is_dir() {
            return Err(FsError::IsDir);
        }
        let size = mi.inode.size;
        let kind = if mi.inode.is_symlink() { BufKind::Meta } else { BufKind::Data };
        if off >= size {
            return Ok(Vec::new());
        }
        let end = size.min(off.saturating_add(len as u64));
        let mut out = Vec::with_capacity((end - off) as usize);
        let mut pos = off;
        while pos < end {
            let fb = (pos / bs) as u32;
            let in_block = (pos % bs) as usize;
            let n = ((end - pos) as usize).min(bs as usize - in_block);
            match self.st.inodes[&ino].bmap(fb) {
                Some(p) if !self.st.cache.contains(p) && !matches!(misses, Misses::Read) => {
                    if p.get() >= self.st.sb.block_count {
                        return Err(FsError::Corrupt(format!("block {p} is past the end of the file system")));
                    }
                    match &mut misses {
                        Misses::Note(noted) => {
                            noted.push((p, self.st.cache.generation(p)));
                            out.resize(out.len() + n, 0);
                        }
                        Misses::Use(read) => {
                            if let Some((_, data)) = read.remove(&p).filter(|(g, _)| *g == self.st.cache.generation(p)) {
                                self.cache_device_block(p, data, kind);
                            }
                            out.extend_from_slice(&self.block(p, kind)?[in_block..in_block + n]);
                        }
                        Misses::Read => unreachable!("matched above"),
                    }
                }
                Some(p) => out.extend_from_slice(&self.block(p, kind)?[in_block..in_block + n]),
                None => out.resize(out.len() + n, 0),
            }
            pos += n as u64;
        }
        Ok(out)
    }

    /// One step of punching a hole in `[off, end)` (fallocate PUNCH_HOLE): unmaps at most
    /// `max_blocks` of the whole blocks inside the range, last ones first; the step that
    /// unmaps the last of them also zeroes the range's parts of the partial blocks at its
    /// edges (those mapped, below the size). The size never changes. Returns true when done.
    pub fn punch_step(&mut self, ino: u32, off: u64, end: u64, max_blocks: usize) -> FsResult<bool> {
        let bs = self.bs() as u64;
        let now = self.now_ns;
        let mi = self.load(ino)?;
        if !mi.inode.is_reg() {
            return Err(if mi.inode.is_dir() { FsError::IsDir } else { FsError::Invalid("fallocate of a special file".into()) });
        }
        let (first, last) = (off.div_ceil(bs), end / bs);
        let freed = if first < last { mi.unmap_range(first as u32, last as u32, max_blocks) } else { Vec::new() };
        let done = first >= last || !mi.maps_any(first as u32, last as u32);
        let size = mi.inode.size;
        let durable = mi.inode.flags & crate::format::inode::FLAG_DURABLE != 0;
        if !mi.extents().last().is_some_and(|e| e.end() as u64 > size.div_ceil(bs)) {
            mi.inode.flags &= !crate::format::inode::FLAG_EOFBLOCKS;
        }
        mi.inode.mtime_ns = now;
        mi.inode.ctime_ns = now;
        for b in freed {
            self.free_block(b)?;
        }
        if done {
            for (a, b) in partial_edges(off, end, bs) {
                let b = b.min(size);
                if a >= b {
                    continue;
                }
                if let Some(p) = self.st.inodes[&ino].bmap((a / bs) as u32) {
                    let zeros = vec![0u8; (b - a) as usize];
                    self.write_file_block(p, (a % bs) as usize, &zeros, zeros.len(), false, BufKind::Data, durable)?;
                }
            }
        }
        self.store(ino)?;
        self.st.touch(ino, true);
        self.st.note_bytes(ino, off.min(size), size, size);
        Ok(done)
    }

    /// One step of a truncate to `new_size`: frees at most `max_blocks` blocks from the end.
    /// Returns true when the file has reached `new_size`. Every step leaves a consistent file:
    /// the size shrinks with the blocks released.
    pub fn truncate_step(&mut self, ino: u32, new_size: u64, max_blocks: usize) -> FsResult<bool> {
        let bs = self.bs() as u64;
        let now = self.now_ns;
        let mi = self.load(ino)?;
        if mi.inode.is_dir() {
            return Err(FsError::IsDir);
        }
        if new_size.div_ceil(bs) > MAX_FILE_BLOCKS {
            return Err(FsError::TooBig);
        }
        let kind = if mi.inode.is_symlink() { BufKind::Meta } else { BufKind::Data };
        let keep_blocks = new_size.div_ceil(bs) as u32;
        let freed = mi.unmap_tail(keep_blocks, max_blocks);
        let done = mi.extents().last().is_none_or(|e| e.end() <= keep_blocks);
        let old_size = mi.inode.size;
        if done {
            mi.inode.size = new_size;
        } else {
            let end_blocks = mi.extents().last().map_or(0, |e| e.end()) as u64;
            mi.inode.size = old_size.min(end_blocks * bs).max(new_size);
        }
        mi.inode.mtime_ns = now;
        mi.inode.ctime_ns = now;
        for b in freed {
            self.free_block(b)?;
        }
        // Zero the tail of a partial last block so that growing the file later reads zeros.
        if done && new_size < old_size && new_size % bs != 0 {
            if let Some(p) = self.st.inodes[&ino].bmap((new_size / bs) as u32) {
                let from = (new_size % bs) as usize;
                let zeros = vec![0u8; bs as usize - from];
                let durable = self.st.inodes[&ino].inode.flags & crate::format::inode::FLAG_DURABLE != 0;
                self.write_file_block(p, from, &zeros, zeros.len(), false, kind, durable)?;
            }
        }
        let new = self.st.inodes[&ino].inode.size;
        self.store(ino)?;
        self.st.touch(ino, true);
        self.st.note_bytes(ino, old_size.min(new), old_size, new);
        Ok(done)
    }
}

/// The parts of `[off, end)` that cover blocks only partly: none, one (the range inside one
/// block) or two (its first and last blocks).
fn partial_edges(off: u64, end: u64, bs: u64) -> Vec<(u64, u64)> {
    if off >= end {
        return Vec::new();
    }
    if off / bs == (end - 1) / bs {
        return if end - off == bs { Vec::new() } else { vec![(off, end)] };
    }
    let mut v = Vec::new();
    if off % bs != 0 {
        v.push((off, (off / bs + 1) * bs));
    }
    if end % bs != 0 {
        v.push((end / bs * bs, end));
    }
    v
}

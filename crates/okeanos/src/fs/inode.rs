//! Inodes in memory: the decoded inode with its whole extent list, and where its extent
//! chain lives. Loading checks every extent; storing encodes only the chain blocks whose
//! extents (or next link) changed since the last store, and rewrites only those that differ.

use super::{Fs, FsError, FsResult};
use crate::cache::BufKind;
use crate::format::extent::{Extent, ExtentBlock};
use crate::format::inode::{Inode, INLINE_EXTENTS, INODE_SIZE};
use crate::ids::HomeBlock;

#[derive(Debug, Clone)]
pub struct MemInode {
    pub ino: u32,
    pub inode: Inode,
    /// All extents, sorted by logical block, non-overlapping. Changed only by this file's
    /// methods, each of which lowers `dirty_from` to the first index it touched.
    extents: Vec<Extent>,
    /// The extent chain's blocks, in order.
    pub chain: Vec<HomeBlock>,
    /// The first index of `extents` that may differ from what the last store encoded into the
    /// chain (`usize::MAX`: none). A store encodes the chain blocks from this one on; the ones
    /// before it hold exactly what they held (checked in debug builds).
    dirty_from: usize,
}

impl MemInode {
    /// A new inode with no blocks.
    pub fn new(ino: u32, inode: Inode) -> MemInode {
        MemInode { ino, inode, extents: Vec::new(), chain: Vec::new(), dirty_from: 0 }
    }

    /// All extents, sorted by logical block, non-overlapping.
    pub fn extents(&self) -> &[Extent] {
        &self.extents
    }

    fn touched(&mut self, i: usize) {
        self.dirty_from = self.dirty_from.min(i);
    }

    /// The block file block `fb` is mapped to, if it is.
    pub fn bmap(&self, fb: u32) -> Option<HomeBlock> {
        let i = self.extents.partition_point(|e| e.end() <= fb);
        let e = self.extents.get(i)?;
        (e.logical <= fb).then(|| e.physical + (fb - e.logical) as u64)
    }

    /// The block mapped just before file block `fb` (an allocation goal).
    pub fn goal_for(&self, fb: u32) -> Option<HomeBlock> {
        let i = self.extents.partition_point(|e| e.end() <= fb);
        if i == 0 {
            return None;
        }
        let e = &self.extents[i - 1];
        Some(e.physical + e.len as u64)
    }

    /// Maps file block `fb` (unmapped) to `phys`, merging with a neighbour when contiguous.
    pub fn map(&mut self, fb: u32, phys: HomeBlock) {
        let i = self.extents.partition_point(|e| e.end() <= fb);
        debug_assert!(self.extents.get(i).is_none_or(|e| e.logical > fb), "block already mapped");
        self.touched(i.saturating_sub(1));
        if i > 0 {
            let p = &mut self.extents[i - 1];
            if p.end() == fb && p.physical + p.len as u64 == phys && p.len < u32::MAX / 2 {
                p.len += 1;
                // Merge with the next extent if the gap closed.
                if let Some(n) = self.extents.get(i).copied() {
                    let p = self.extents[i - 1];
                    if p.end() == n.logical && p.physical + p.len as u64 == n.physical {
                        self.extents[i - 1].len += n.len;
                        self.extents.remove(i);
                    }
                }
                return;
            }
        }
        if let Some(n) = self.extents.get_mut(i) {
            if n.logical == fb + 1 && phys + 1 == n.physical {
                n.logical = fb;
                n.physical = phys;
                n.len += 1;
                return;
            }
        }
        self.extents.insert(i, Extent { logical: fb, len: 1, physical: phys });
    }

    /// Unmaps every file block at or after `from`, at most `max` blocks, last ones first.
    /// Returns the blocks released.
    pub fn unmap_tail(&mut self, from: u32, max: usize) -> Vec<HomeBlock> {
        let mut out = Vec::new();
        while out.len() < max {
            let Some(last) = self.extents.len().checked_sub(1) else { break };
            if self.extents[last].end() <= from {
                break;
            }
            self.touched(last);
            let e = &mut self.extents[last];
            let keep = from.max(e.logical);
            let n = ((e.end() - keep) as usize).min(max - out.len()) as u32;
            let first_phys = e.physical + (e.len - n) as u64;
            out.extend((0..n as u64).map(|k| first_phys + k).rev());
            e.len -= n;
            if e.len == 0 {
                self.extents.pop();
            }
        }
        out
    }

    /// Unmaps the file blocks in `[from, to)`, at most `max`, last ones first (a hole punched
    /// in steps keeps its front until the last step). An extent straddling the range is cut in
    /// two, so one call adds at most one extent. Returns the blocks released.
    pub fn unmap_range(&mut self, from: u32, to: u32, max: usize) -> Vec<HomeBlock> {
        let mut out = Vec::new();
        let mut i = self.extents.partition_point(|e| e.logical < to);
        while i > 0 && out.len() < max {
            i -= 1;
            let e = self.extents[i];
            if e.end() <= from {
                break;
            }
            self.touched(i);
            let hi = e.end().min(to);
            let n = ((hi - from.max(e.logical)) as usize).min(max - out.len()) as u32;
            let lo = hi - n;
            let first_phys = e.physical + (lo - e.logical) as u64;
            out.extend((0..n as u64).map(|k| first_phys + k).rev());
            let head = Extent { logical: e.logical, len: lo - e.logical, physical: e.physical };
            let tail = Extent { logical: hi, len: e.end() - hi, physical: e.physical + (hi - e.logical) as u64 };
            match (head.len > 0, tail.len > 0) {
                (true, true) => {
                    self.extents[i] = head;
                    self.extents.insert(i + 1, tail);
                }
                (true, false) => self.extents[i] = head,
                (false, true) => self.extents[i] = tail,
                (false, false) => {
                    self.extents.remove(i);
                }
            }
        }
        out
    }

    /// Whether any file block in `[from, to)` is mapped.
    pub fn maps_any(&self, from: u32, to: u32) -> bool {
        let i = self.extents.partition_point(|e| e.end() <= from);
        self.extents.get(i).is_some_and(|e| e.logical < to)
    }

    /// Blocks mapped.
    pub fn mapped_blocks(&self) -> u64 {
        self.extents.iter().map(|e| e.len as u64).sum()
    }

    /// Every block the inode owns: its data, its extent chain and its attribute block (what
    /// freeing it frees).
    pub fn owned_blocks(&self) -> u64 {
        self.mapped_blocks() + self.chain.len() as u64 + (self.inode.xattr_block != HomeBlock::NONE) as u64
    }

    /// Chain blocks the current extent list needs.
    pub fn chain_needed(&self, block_size: usize) -> usize {
        self.extents.len().saturating_sub(INLINE_EXTENTS).div_ceil(ExtentBlock::capacity(block_size))
    }
}

impl<'a> Fs<'a> {
    /// Table block and byte offset of inode `ino`.
    pub fn inode_location(&self, ino: u32) -> FsResult<(HomeBlock, usize)> {
        let sb = &self.st.sb;
        if ino == 0 || ino > sb.inode_count {
            return Err(FsError::Corrupt(format!("inode number {ino} out of range")));
        }
        let g = (ino - 1) / sb.inodes_per_group;
        let idx = ((ino - 1) % sb.inodes_per_group) as usize;
        let per_block = self.bs() / INODE_SIZE;
        let blk = self.st.gdt[g as usize].inode_table + (idx / per_block) as u64;
        Ok((blk, (idx % per_block) * INODE_SIZE))
    }

    /// The in-memory inode `ino`, loaded and checked on first use.
    pub fn load(&mut self, ino: u32) -> FsResult<&mut MemInode> {
        if !self.st.inodes.contains_key(&ino) {
            let mi = self.read_inode(ino)?;
            self.st.inodes.insert(ino, mi);
        }
        Ok(self.st.inodes.get_mut(&ino).expect("just loaded"))
    }

    /// Reads inode `ino` and its extent chain from the cache or device.
    pub fn read_inode(&mut self, ino: u32) -> FsResult<MemInode> {
        let (blk, off) = self.inode_location(ino)?;
        let inode = Inode::decode(ino, &self.block(blk, BufKind::Meta)?[off..off + INODE_SIZE])?;
        if inode.is_free() {
            return Err(FsError::Corrupt(format!("inode {ino} is referenced but free")));
        }
        let max_size = super::file::MAX_FILE_BLOCKS * self.bs() as u64;
        if inode.size > max_size {
            return Err(FsError::Corrupt(format!("inode {ino}: size {} is beyond the largest file ({max_size} bytes)", inode.size)));
        }
        let mut extents = inode.inline.clone();
        let mut chain = Vec::new();
        let mut next = inode.extent_block;
        while extents.len() < inode.extent_count as usize {
            if next == HomeBlock::NONE || !self.is_data_block(next) || chain.contains(&next) || chain.len() > 1 << 20 {
                return Err(FsError::Corrupt(format!("inode {ino}: extent chain broken at block {next}")));
            }
            let eb = ExtentBlock::decode(self.block(next, BufKind::Meta)?)?;
            if eb.owner != ino || eb.extents.is_empty() {
                return Err(FsError::Corrupt(format!("inode {ino}: extent block {next} belongs to inode {}", eb.owner)));
            }
            chain.push(next);
            extents.extend(eb.extents);
            next = eb.next;
        }
        if extents.len() != inode.extent_count as usize {
            return Err(FsError::Corrupt(format!("inode {ino}: {} extents found, {} recorded", extents.len(), inode.extent_count)));
        }
        for w in extents.windows(2) {
            if w[0].end() > w[1].logical {
                return Err(FsError::Corrupt(format!("inode {ino}: extents overlap or are out of order")));
            }
        }
        for e in &extents {
            let last = e.physical.get().checked_add(e.len as u64 - 1).map(HomeBlock::new);
            if !self.is_data_block(e.physical) || !last.is_some_and(|l| self.is_data_block(l)) {
                return Err(FsError::Corrupt(format!("inode {ino}: extent {e:?} points outside the data area")));
            }
        }
        let dirty_from = usize::MAX;
        Ok(MemInode { ino, inode, extents, chain, dirty_from })
    }

    /// Writes inode `ino` (and its extent chain) back into the cache, logging what changed.
    /// Grows or shrinks the chain as the extent count requires.
    pub fn store(&mut self, ino: u32) -> FsResult<()> {
        let bs = self.bs();
        let mut mi = self.st.inodes.remove(&ino).expect("store of a loaded inode");
        let r = self.store_inner(&mut mi, bs);
        if r.is_err() {
            // A store that stopped half way may have grown or cut the chain without encoding
            // it: the next one encodes every block.
            mi.dirty_from = 0;
        }
        self.st.inodes.insert(ino, mi);
        r
    }

    fn store_inner(&mut self, mi: &mut MemInode, bs: usize) -> FsResult<()> {
        let need = mi.chain_needed(bs);
        let old_len = mi.chain.len();
        while mi.chain.len() < need {
            let goal = mi.chain.last().copied().or(mi.extents.first().map(|e| e.physical)).unwrap_or(HomeBlock::NONE);
            let b = self.alloc_block(goal)?;
            mi.chain.push(b);
            self.meta_new(b);
        }
        while mi.chain.len() > need {
            let b = mi.chain.pop().expect("non-empty");
            self.free_block(b)?;
        }
        let cap = ExtentBlock::capacity(bs);
        // Chain block k holds extents INLINE + k*cap .. and links to block k + 1: it is encoded
        // again when one of its extents changed (a change inside the inline extents shifts
        // every block's) or when it or its successor is new or gone.
        let mut first = mi.dirty_from.saturating_sub(INLINE_EXTENTS) / cap;
        if old_len != need {
            first = first.min(old_len.min(need).saturating_sub(1));
        }
        let rest = mi.extents.get(INLINE_EXTENTS..).unwrap_or(&[]);
        let mut enc = std::mem::take(&mut self.st.scratch);
        let r = self.store_chain(mi, rest, first, bs, &mut enc);
        self.st.scratch = enc;
        r?;
        mi.inode.extent_count = mi.extents.len() as u32;
        mi.inode.inline.clear();
        mi.inode.inline.extend(mi.extents.iter().take(INLINE_EXTENTS).copied());
        mi.inode.extent_block = mi.chain.first().copied().unwrap_or(HomeBlock::NONE);
        let (blk, off) = self.inode_location(mi.ino)?;
        let mut enc = [0u8; INODE_SIZE];
        mi.inode.encode(mi.ino, &mut enc);
        if self.block(blk, BufKind::Meta)?[off..off + INODE_SIZE] != enc {
            self.meta_mut(blk)?[off..off + INODE_SIZE].copy_from_slice(&enc);
        }
        mi.dirty_from = usize::MAX;
        Ok(())
    }

    /// Encodes chain blocks `first..` of `mi` (holding `rest`, the extents after the inline
    /// ones) into `enc` and writes each that differs from the cached block.
    fn store_chain(&mut self, mi: &MemInode, rest: &[Extent], first: usize, bs: usize, enc: &mut Vec<u8>) -> FsResult<()> {
        let cap = ExtentBlock::capacity(bs);
        for (k, chunk) in rest.chunks(cap).enumerate() {
            let next = mi.chain.get(k + 1).copied().unwrap_or(HomeBlock::NONE);
            if k < first {
                if cfg!(debug_assertions) {
                    let mut check = vec![0u8; bs];
                    ExtentBlock::encode_parts(mi.ino, next, chunk, &mut check);
                    debug_assert!(self.block(mi.chain[k], BufKind::Meta)? == &check[..], "inode {}: extent block {k} changed unmarked", mi.ino);
                }
                continue;
            }
            enc.resize(bs, 0);
            ExtentBlock::encode_parts(mi.ino, next, chunk, enc);
            let blk = mi.chain[k];
            if self.block(blk, BufKind::Meta)? != &enc[..] {
                self.meta_mut(blk)?.copy_from_slice(&enc);
            }
        }
        Ok(())
    }

    /// Writes a freed inode slot (mode 0; the generation survives for the next user).
    pub fn clear_inode_slot(&mut self, ino: u32) -> FsResult<()> {
        // The attribute block goes with the inode.
        let xb = self.load(ino).map_or(HomeBlock::NONE, |m| m.inode.xattr_block);
        if xb != HomeBlock::NONE {
            self.free_block(xb)?;
        }
        let (blk, off) = self.inode_location(ino)?;
        let generation = self.st.inodes.get(&ino).map_or(0, |m| m.inode.generation);
        let mut enc = [0u8; INODE_SIZE];
        Inode { generation, ..Inode::default() }.encode(ino, &mut enc);
        self.meta_mut(blk)?[off..off + INODE_SIZE].copy_from_slice(&enc);
        self.st.inodes.remove(&ino);
        Ok(())
    }
}

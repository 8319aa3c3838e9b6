//! The write path: writes and appends split into handles of at most a transaction's worth of
//! blocks, fallocate, hole punching, zeroing, and truncation in steps.

use super::*;

impl Okeanos {
    /// fallocate(2) mode 0 (posix_fallocate), or with `keep_size` FALLOC_FL_KEEP_SIZE: every
    /// block of `[offset, offset + len)` is allocated (holes get zero-filled blocks, written as
    /// any write is under the policy); mode 0 grows the size to cover the range, KEEP_SIZE
    /// leaves it (blocks past the end carry the inode's EOFBLOCKS flag). Mapped blocks are left
    /// as they are. Not atomic as a whole (neither is posix_fallocate's fallback); each run of
    /// holes is one write.
    pub fn fallocate(&self, ino: u32, offset: u64, len: u64, keep_size: bool) -> FsResult<()> {
        let end = self.fallocate_range(offset, len)?;
        let bs = self.lock().fs.block_size() as u64;
        let holes: Vec<u64> = self.with_fs(|fs| {
            let mi = fs.load(ino)?;
            if !mi.inode.is_reg() {
                return Err(if mi.inode.is_dir() { FsError::IsDir } else { FsError::Invalid("fallocate of a special file".into()) });
            }
            Ok((offset / bs..end.div_ceil(bs)).filter(|&k| mi.bmap(k as u32).is_none()).collect())
        })?;
        // Runs of consecutive holes, each written with zeros (at most 1 MiB at a time). With
        // KEEP_SIZE whole blocks are written (the part of a block past `end` is zero anyway).
        let mut i = 0;
        while i < holes.len() {
            let mut j = i + 1;
            while j < holes.len() && holes[j] == holes[j - 1] + 1 && (j - i) < 256 {
                j += 1;
            }
            let (from, to) = if keep_size { (holes[i] * bs, (holes[j - 1] + 1) * bs) } else { ((holes[i] * bs).max(offset), ((holes[j - 1] + 1) * bs).min(end)) };
            self.write_zeros(ino, from, to, keep_size)?;
            i = j;
        }
        // The range's last block was mapped already (inside the file): the size may still be
        // short of the range's end only if no hole reached it.
        if !keep_size && self.getattr(ino)?.size < end {
            self.truncate(ino, end)?;
        }
        Ok(())
    }

    /// fallocate(2) FALLOC_FL_PUNCH_HOLE (Linux requires KEEP_SIZE with it): afterwards
    /// `[offset, offset + len)` reads as zeros and its whole blocks are freed; partial blocks at
    /// its edges are zeroed in place; the size never changes. A range of up to 256 blocks (and
    /// as many as one handle may revoke) is one atomic handle; a larger one goes in steps, each
    /// atomic, from its end towards its start, the edges zeroed in the last.
    pub fn punch_hole(&self, ino: u32, offset: u64, len: u64) -> FsResult<()> {
        let end = self.fallocate_range(offset, len)?;
        self.drain_evictions()?;
        loop {
            let done = self.handle_on(
                ino,
                |fs| Ok(Self::punch_step_blocks(fs, ino)?.1),
                |fs| {
                    let (k, _) = Self::punch_step_blocks(fs, ino)?;
                    fs.punch_step(ino, offset, end, k)
                },
            )?;
            if done {
                return Ok(());
            }
        }
    }

    /// fallocate(2) FALLOC_FL_ZERO_RANGE, with `keep_size` also FALLOC_FL_KEEP_SIZE: afterwards
    /// `[offset, offset + len)` reads as zeros with every block allocated; without `keep_size`
    /// the size grows to cover the range. Done as a write of zeros over the range (Okeanos has
    /// no unwritten extents), so it costs what that write costs under the policy and is atomic
    /// as writes are, per handle of about 1 MiB.
    pub fn zero_range(&self, ino: u32, offset: u64, len: u64, keep_size: bool) -> FsResult<()> {
        let end = self.fallocate_range(offset, len)?;
        let mi = self.getattr(ino)?;
        match mi.kind {
            crate::format::FileType::Regular => {}
            crate::format::FileType::Directory => return Err(FsError::IsDir),
            _ => return Err(FsError::Invalid("fallocate of a special file".into())),
        }
        let bs = self.lock().fs.block_size() as u64;
        // With KEEP_SIZE, the blocks past the end are allocated whole, as fallocate does.
        let to = if keep_size && end > mi.size { end.div_ceil(bs) * bs } else { end };
        self.write_zeros(ino, offset, to, keep_size)
    }

    /// The end of a fallocate range, checked: a length of zero, an overflow and a file larger
    /// than an inode maps are errors, as Linux's.
    pub(super) fn fallocate_range(&self, offset: u64, len: u64) -> FsResult<u64> {
        if len == 0 {
            return Err(FsError::Invalid("fallocate of length 0".into()));
        }
        let end = offset.checked_add(len).ok_or(FsError::TooBig)?;
        let bs = self.lock().fs.block_size() as u64;
        if end.div_ceil(bs) > crate::fs::file::MAX_FILE_BLOCKS {
            return Err(FsError::TooBig);
        }
        Ok(end)
    }

    /// Credits of one step of a hole punch, and how many blocks it may free: the inode, the
    /// extent chain (which may grow by a block when an extent is cut in two, or shrink), the
    /// bitmaps and descriptors, and the two partial edge blocks (logged under data journaling;
    /// revoked under selective when older logged copies remain).
    pub(super) fn punch_step_blocks(fs: &mut Fs, ino: u32) -> FsResult<(usize, Credits)> {
        let max = fs.st.journal.max_handle_credits();
        let chain = fs.load(ino)?.chain.len() as u64 + 1;
        let edges = if Self::data_journaled(fs, ino) { 2 } else { 0 };
        let mut k: u64 = 256.min(max.revokes.saturating_sub(chain + 2)).max(1);
        loop {
            let c = Credits { blocks: 4 + chain + edges + Self::alloc_credits(fs, k + chain), revokes: k + chain + 2 };
            if (c.blocks <= max.blocks && c.revokes <= max.revokes) || k == 1 {
                return Ok((k as usize, c));
            }
            k = k * 3 / 4;
        }
    }

    /// Writes zeros over `[from, to)`, 1 MiB at a time (fallocate's zero-filled blocks; not
    /// counted as payload).
    pub(super) fn write_zeros(&self, ino: u32, from: u64, to: u64, keep_size: bool) -> FsResult<()> {
        const CHUNK: u64 = 1 << 20;
        let zeros = vec![0u8; CHUNK.min(to.saturating_sub(from)) as usize];
        let mut pos = from;
        while pos < to {
            let n = (to - pos).min(CHUNK) as usize;
            self.write_inner(ino, Some(pos), &zeros[..n], keep_size, false)?;
            pos += n as u64;
        }
        Ok(())
    }

    /// Writes `data` at `off`. Writes of up to one handle's size (1 MiB with the default
    /// journal) are atomic; larger ones are split into several handles.
    pub fn write(&self, ino: u32, off: u64, data: &[u8]) -> FsResult<usize> {
        self.write_inner(ino, Some(off), data, false, true)?;
        Ok(data.len())
    }

    /// Appends `data` at the end of the file, as O_APPEND: the offset is the file's size when
    /// the write's handle starts (read under the same lock as the write, so two appenders never
    /// write at one offset). A write larger than one handle (about 1 MiB) appends in pieces,
    /// and another appender's piece may fall between them. Returns where the data begins.
    pub fn append(&self, ino: u32, data: &[u8]) -> FsResult<u64> {
        self.write_inner(ino, None, data, false, true)
    }

    /// Writes `data` at `off`, or at the end of the file (`None`), in handles of at most
    /// [`Self::write_chunk_blocks`] blocks; returns where the data begins. A small write takes
    /// the lock twice: once to size its piece (and see that no eviction is pending), once for
    /// its handle.
    /// With `keep_size` the size does not grow (fallocate KEEP_SIZE); `payload`: count the
    /// bytes as written by the program (not fallocate's zeros).
    pub(super) fn write_inner(&self, ino: u32, off: Option<u64>, data: &[u8], keep_size: bool, payload: bool) -> FsResult<u64> {
        let end = match off {
            Some(o) => Some(o.checked_add(data.len() as u64).ok_or(FsError::TooBig)?),
            None => None,
        };
        if data.is_empty() {
            if end.is_some_and(|e| e.div_ceil(self.lock().fs.block_size() as u64) > crate::fs::file::MAX_FILE_BLOCKS) {
                return Err(FsError::TooBig);
            }
            return match off {
                Some(o) => Ok(o),
                None => Ok(self.getattr(ino)?.size),
            };
        }
        if payload && !keep_size {
            if let Some(pos) = self.try_stage(ino, off, data) {
                self.inner.stats.on_payload(data.len());
                self.inner.stats.on_staged_append();
                return Ok(pos);
            }
        }
        let mut done = 0usize;
        let mut first = None;
        let mut drained = false;
        while done < data.len() {
            let (max_chunk, bs, evictions) = {
                let mut core = self.lock();
                let now = self.inner.clock.wall_ns();
                let fs = Fs { st: &mut core.fs, dev: self.inner.devs.fs.as_ref(), now_ns: now };
                (Self::write_chunk_blocks(&fs, true), fs.bs() as u64, !fs.st.deferred_evict.is_empty())
            };
            // The whole write's end first: nothing is written of a write that cannot fit.
            if end.is_some_and(|e| e.div_ceil(bs) > crate::fs::file::MAX_FILE_BLOCKS) {
                return Err(FsError::TooBig);
            }
            if evictions && !drained {
                self.drain_evictions()?;
                drained = true;
                continue;
            }
            let rest = &data[done..];
            // The piece and its position, chosen under the handle's lock (an append's position
            // is the size then); `credits` may run again after a wait, `op` uses its last choice.
            let chosen = std::cell::Cell::new((0u64, 0usize));
            self.handle_on(
                ino,
                |fs| {
                    let pos = match off {
                        Some(o) => o + done as u64,
                        None => fs.size(ino)?,
                    };
                    let max = fs.st.journal.max_handle_credits();
                    let mut len = (max_chunk * bs - pos % bs).min(rest.len() as u64) as usize;
                    let end = pos.checked_add(len as u64).ok_or(FsError::TooBig)?;
                    if end.div_ceil(bs) > crate::fs::file::MAX_FILE_BLOCKS {
                        return Err(FsError::TooBig);
                    }
                    let _ = fs.load(ino)?;
                    let journaled = Self::data_journaled(fs, ino);
                    loop {
                        let spanned = (pos + len as u64 - 1) / bs - pos / bs + 1;
                        let mut c = Self::write_credits(fs, spanned, journaled);
                        // A hole filled before the last extent shifts every extent after it:
                        // each chain block from there to the end may change, and when the
                        // filled hole joins two extents the chain may shrink, freeing
                        // (revoking) its blocks.
                        let shift = fs.write_shift_blocks(ino, pos, len)?;
                        c.blocks += shift;
                        c.revokes += shift;
                        // The chain's share can push a piece sized without it over the limit
                        // (a small journal, a file of many extents): a smaller piece then.
                        if (c.blocks > max.blocks || c.revokes > max.revokes) && spanned > 1 {
                            len = (((spanned * 3 / 4).max(1)) * bs - pos % bs).min(len as u64) as usize;
                            continue;
                        }
                        chosen.set((pos, len));
                        return Ok(c);
                    }
                },
                |fs| {
                    let (pos, len) = chosen.get();
                    fs.write_keeping(ino, pos, &rest[..len], keep_size)?;
                    if self.inner.opts.faults.panic_write_len == Some(len) {
                        panic!("test fault: a write of {len} bytes broke an invariant half-way");
                    }
                    if payload && !keep_size && len == rest.len() {
                        // The write's last piece: later small appends may be staged (stage.rs).
                        self.open_stage(fs, ino, pos + len as u64, data.len())?;
                    }
                    Ok(())
                },
            )?;
            let (pos, len) = chosen.get();
            first.get_or_insert(pos);
            done += len;
        }
        if payload {
            self.inner.stats.on_payload(data.len());
        }
        Ok(first.unwrap_or(0))
    }

    /// Sets the file's size, freeing or zero-extending as needed.
    pub fn truncate(&self, ino: u32, size: u64) -> FsResult<()> {
        if size.div_ceil(self.lock().fs.block_size() as u64) > crate::fs::file::MAX_FILE_BLOCKS {
            return Err(FsError::TooBig);
        }
        self.drain_evictions()?;
        self.truncate_steps(ino, size)
    }

    pub(super) fn truncate_step_blocks(fs: &Fs) -> (usize, Credits) {
        let max = fs.st.journal.max_handle_credits();
        let mut k: u64 = 256.min(max.revokes.saturating_sub(8)).max(1);
        loop {
            let chain = 2 + k / crate::format::extent::ExtentBlock::capacity(fs.bs()) as u64;
            let c = Credits { blocks: 4 + chain + Self::alloc_credits(fs, k + chain), revokes: k + chain };
            if c.blocks <= max.blocks || k == 1 {
                return (k as usize, c);
            }
            k = k * 3 / 4;
        }
    }

    pub(super) fn truncate_steps(&self, ino: u32, size: u64) -> FsResult<()> {
        loop {
            let done = self.handle_on(
                ino,
                |fs| Ok(Self::truncate_step_blocks(fs).1),
                |fs| {
                    let (k, _) = Self::truncate_step_blocks(fs);
                    fs.truncate_step(ino, size, k)
                },
            )?;
            if done {
                return Ok(());
            }
        }
    }
}

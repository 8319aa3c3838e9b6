//! Open files and eviction: an inode unlinked while open is freed when its last opener
//! releases it (deferred eviction), in handles of bounded size.

use crate::ids::HomeBlock;
use super::*;

impl Okeanos {
    /// Frees an unlinked inode's blocks and the inode itself (several handles).
    /// Several threads may decide to evict the same inode (an unlink racing with the last
    /// release): one claims it, and only an unused inode that is still an orphan is evicted —
    /// an inode number freed meanwhile, or already reused by a new file, is left alone.
    pub(super) fn evict(&self, ino: u32) -> FsResult<()> {
        {
            let mut core = self.lock();
            let st = &mut core.fs;
            if st.open_count.contains_key(&ino) || !st.evicting.insert(ino) {
                return Ok(());
            }
        }
        let r = (|| {
            let orphan = self.with_fs(|fs| Ok(fs.load(ino).ok().filter(|m| m.inode.nlink == 0).map(|m| m.inode.is_dir())))?;
            let Some(dir) = orphan else { return Ok(()) };
            if dir {
                // A directory removed while held: empty, a few blocks, one handle.
                let credits = |fs: &mut Fs| -> FsResult<Credits> {
                    let mi = fs.load(ino)?;
                    let n = mi.owned_blocks();
                    Ok(Credits { blocks: 12 + Self::alloc_credits(fs, n), revokes: n })
                };
                return self.handle(credits, |fs| {
                    fs.empty_orphan_dir(ino)?;
                    fs.finish_orphan(ino)
                });
            }
            self.truncate_steps(ino, 0)?;
            // The extent chain's blocks and the attribute block are freed (revoked) too.
            let frees = |fs: &mut Fs| -> FsResult<Credits> {
                let mi = fs.load(ino)?;
                Ok(Credits { blocks: 8, revokes: mi.chain.len() as u64 + (mi.inode.xattr_block != HomeBlock::NONE) as u64 })
            };
            self.handle(frees, |fs| {
                let chain = std::mem::take(&mut fs.load(ino)?.chain);
                for b in chain {
                    fs.free_block(b)?;
                }
                fs.finish_orphan(ino)
            })
        })();
        {
            let mut core = self.lock();
            core.fs.evicting.remove(&ino);
            if r.is_ok() {
                self.drop_stage(&mut core, ino);
                core.fs.watermarks.remove(&ino);
                core.fs.overwrites.remove(ino);
            }
        }
        r
    }

    /// Deletes an unlinked inode now unless a handle holds it open. The name is gone already:
    /// an eviction that would wait (a mount driven step by step)
    /// is queued for the next operation instead, so the caller never retries an unlink or a
    /// rename that took effect.
    pub(super) fn release_if_unused(&self, ino: u32) -> FsResult<()> {
        let open = self.lock().fs.open_count.get(&ino).copied().unwrap_or(0);
        if open == 0 {
            match self.evict(ino) {
                Err(FsError::WouldBlock) => self.lock().fs.deferred_evict.push(ino),
                r => r?,
            }
        }
        Ok(())
    }

    /// Finishes the deletions that last releases queued. A deletion that fails leaves its
    /// inode on the orphan list (the next mount finishes it) and does not fail the operation
    /// that happened to run it; a failure that matters (an I/O error) has made the file system
    /// read-only, which that operation reports itself.
    pub(super) fn drain_evictions(&self) -> FsResult<()> {
        loop {
            let next = self.lock().fs.deferred_evict.pop();
            match next {
                // Driven step by step: the operation waits for the journal, and the eviction
                // goes on when it is tried again (nothing of the operation happened yet).
                Some(ino) => {
                    if let Err(FsError::WouldBlock) = self.evict(ino) {
                        self.lock().fs.deferred_evict.push(ino);
                        return Err(FsError::WouldBlock);
                    }
                }
                None => return Ok(()),
            }
        }
    }

    /// Notes that a handle holds `ino` open (unlinked files keep their data until release).
    pub fn open_ino(&self, ino: u32) -> FsResult<Attr> {
        self.with_fs(|fs| {
            let attr = fs.attr(ino)?;
            *fs.st.open_count.entry(ino).or_insert(0) += 1;
            Ok(attr)
        })
    }

    /// [`Okeanos::release`], and deletes the inode now, in the caller's thread, if that was the
    /// last reference to an unlinked one (with any other deletion queued): `rm` of a file the
    /// FUSE kernel had looked up frees its blocks when the kernel forgets it, not at whatever
    /// operation comes next (a `df` right after would not have seen them freed).
    pub fn release_now(&self, ino: u32) -> FsResult<()> {
        self.release(ino);
        self.drain_evictions()
    }

    /// Drops one open reference; the last one of an unlinked inode queues its deletion, which
    /// the next operation (or unmount) carries out. Does no I/O itself.
    pub fn release(&self, ino: u32) {
        let mut core = self.lock();
        let st = &mut core.fs;
        if let Some(c) = st.open_count.get_mut(&ino) {
            *c -= 1;
            if *c == 0 {
                st.open_count.remove(&ino);
                if st.inodes.get(&ino).is_some_and(|m| m.inode.nlink == 0) {
                    st.deferred_evict.push(ino);
                }
            }
        }
    }
}

//! Handles: every operation runs as one handle on the running transaction (jbd2's
//! `jbd2_journal_start`). The state lock, the guarded calls that stop the journal when an
//! operation panics, the wait for credits and log space, and what each kind of operation
//! reserves.

use super::*;

impl Okeanos {
    /// The state's lock. A thread that panicked holding it (a broken invariant outside the
    /// guarded calls below) may have left the state half-changed: the journal is stopped before
    /// anyone goes on with it.
    pub(super) fn lock(&self) -> MutexGuard<'_, Core> {
        let mut core = match self.inner.core.lock() {
            Ok(g) => g,
            Err(poisoned) => {
                let mut core = poisoned.into_inner();
                self.inner.core.clear_poison();
                self.inner.stop_journal(&mut core, "a thread panicked while it held the file system's state (a bug: see the log)".into());
                core
            }
        };
        // Nothing under the lock sees a file without its staged appends (stage.rs).
        self.fold_stages(&mut core);
        core
    }

    /// Runs `f` on the state, catching a panic: a broken invariant inside one operation stops
    /// the journal and fails that operation with [`FsError::Broken`], instead of unwinding
    /// through the caller (a FUSE request thread, a foreign-language caller) and leaving the
    /// state to whoever comes next.
    pub(super) fn guarded<R>(&self, core: &mut Core, f: impl FnOnce(&mut Fs) -> FsResult<R>) -> FsResult<R> {
        let now = self.inner.clock.wall_ns();
        let dev = self.inner.devs.fs.as_ref();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut fs = Fs { st: &mut core.fs, dev, now_ns: now };
            f(&mut fs)
        }));
        r.unwrap_or_else(|payload| {
            let what = payload.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| payload.downcast_ref::<String>().cloned()).unwrap_or_else(|| "a panic".into());
            let why = format!("broken invariant: {what}");
            self.inner.stop_journal(core, why.clone());
            Err(FsError::Broken(why))
        })
    }

    /// Read-only access to the state (no handle).
    pub(crate) fn with_fs<R>(&self, f: impl FnOnce(&mut Fs) -> FsResult<R>) -> FsResult<R> {
        let mut core = self.lock();
        let r = self.guarded(&mut core, f);
        core.fs.shrink_cache();
        r
    }

    /// Runs `op` as one atomic handle. `credits` may look at the state (it runs under the lock
    /// and again after every wait).
    pub(super) fn handle<R>(&self, credits: impl Fn(&mut Fs) -> FsResult<Credits>, op: impl FnMut(&mut Fs) -> FsResult<R>) -> FsResult<R> {
        self.handle_on(0, credits, op)
    }

    /// As [`handle`](Self::handle), for an operation that changes file `ino`'s size, mapping
    /// or flags: the file's staged appends are closed first, under the same hold of the lock
    /// as the change (stage.rs). `ino` 0: no file.
    pub(super) fn handle_on<R>(&self, ino: u32, credits: impl Fn(&mut Fs) -> FsResult<Credits>, mut op: impl FnMut(&mut Fs) -> FsResult<R>) -> FsResult<R> {
        let r = self.handle_once(ino, &credits, &mut op);
        if matches!(r, Err(FsError::NoSpace)) && self.wait_for_pending_frees()? {
            // ext4 does the same (ext4_should_retry_alloc): blocks freed by transactions that
            // have not committed become allocatable once they do; commit, then try again.
            return self.handle_once(ino, &credits, &mut op);
        }
        r
    }

    /// Commits the transactions holding freed blocks back; true if there were any.
    pub(super) fn wait_for_pending_frees(&self) -> FsResult<bool> {
        let core = self.lock();
        if core.fs.pending_free_blocks.is_empty() && core.fs.pending_free_inodes.is_empty() {
            return Ok(false);
        }
        let tid = core.fs.journal.current_tid();
        self.wait_committed(core, tid)?;
        Ok(true)
    }

    pub(super) fn handle_once<R>(&self, ino: u32, credits: &impl Fn(&mut Fs) -> FsResult<Credits>, op: &mut impl FnMut(&mut Fs) -> FsResult<R>) -> FsResult<R> {
        let mut core = self.lock();
        let token = loop {
            if ino != 0 {
                // Again after every wait: a slow-path append may have opened it meanwhile.
                self.close_stage(&mut core, ino);
            }
            if let Some(why) = &core.fs.read_only {
                return Err(FsError::ReadOnly(why.clone()));
            }
            if core.closing {
                return Err(FsError::ReadOnly("unmounting".into()));
            }
            if let Some(e) = core.fs.journal.aborted() {
                return Err(FsError::Io(format!("journal aborted: {e}")));
            }
            let now_wall = self.inner.clock.wall_ns();
            let c = {
                let mut fs = Fs { st: &mut core.fs, dev: self.inner.devs.fs.as_ref(), now_ns: now_wall };
                credits(&mut fs)?
            };
            let max = core.fs.journal.max_handle_credits();
            if c.blocks > max.blocks || c.revokes > max.revokes {
                return Err(FsError::Invalid(format!("operation needs {c:?} of journal space, more than one handle may take ({max:?}); use a larger journal")));
            }
            let now = self.inner.clock.now_ns();
            let why = match core.fs.journal.handle_start(c, now) {
                Ok(t) => break t,
                Err(why) => why,
            };
            match why {
                Admit::NeedCommit => {
                    let tid = core.fs.journal.running_tid();
                    core.fs.journal.request_commit(tid);
                }
                Admit::NeedSpace => {
                    core.sched.want_space();
                    self.inner.ccv.notify_one();
                }
                Admit::NeedWriteback => {
                    // Background writeback drains the running transaction's in-place data;
                    // either lane may take its step.
                    self.inner.ccv.notify_one();
                }
            }
            if core.manual {
                return Err(FsError::WouldBlock);
            }
            self.inner.jcv.notify_all();
            core = self.inner.cv.wait(core).unwrap_or_else(|e| e.into_inner());
            self.inner.stats.on_admit_wait(why, self.inner.clock.now_ns().saturating_sub(now));
        };
        let epoch = core.fs.dirty_epoch;
        let early_was_due = core.fs.journal.early_due();
        let r = self.guarded(&mut core, |fs| op(fs));
        let stopped = self.end_handle(&mut core, token, early_was_due);
        if let Err(why) = stopped {
            // Over its credits, the transaction may not fit the room it was admitted to.
            let why = format!("broken invariant: {why}");
            self.inner.stop_journal(&mut core, why.clone());
            return Err(FsError::Broken(why));
        }
        if let Err(e) = &r {
            if core.fs.dirty_epoch != epoch && !matches!(e, FsError::Broken(_)) {
                // The handle changed blocks before failing: its transaction must never commit.
                self.inner.stop_journal(&mut core, format!("operation failed half-way: {e}"));
            }
        }
        core.fs.shrink_cache();
        r
    }

    /// Ends a handle whose change is made: its credits checked (an error is a broken
    /// estimate, the caller stops the journal), a lane woken if it took the running
    /// transaction's unwritten in-place data past the background threshold, counted.
    pub(super) fn end_handle(&self, core: &mut Core, token: crate::journal::transaction::HandleToken, early_was_due: bool) -> Result<(), String> {
        let stopped = core.fs.journal.handle_stop(token);
        if !early_was_due && core.fs.journal.early_due() {
            // A lane writes it early (journal/writeback.rs). A lane busy now polls again after
            // its step; one asleep would not look before its timer.
            self.inner.ccv.notify_one();
            self.inner.jcv.notify_one();
        }
        self.inner.stats.on_handle();
        stopped
    }

    /// Credits for a handle that changes `meta` metadata blocks at most.
    pub(super) fn meta_credits(meta: u64) -> impl Fn(&mut Fs) -> FsResult<Credits> {
        move |_fs| Ok(Credits::blocks(meta))
    }

    /// An attribute change: the inode, the attribute block (allocated, or freed and revoked),
    /// a bitmap and a group descriptor.
    pub(super) fn xattr_credits(fs: &mut Fs) -> FsResult<Credits> {
        Ok(Credits { blocks: 4 + Self::alloc_credits(fs, 1), revokes: 1 })
    }

    /// Blocks a handle allocating `n` blocks may log for bitmaps and descriptors.
    pub(super) fn alloc_credits(fs: &Fs, n: u64) -> u64 {
        n.min(fs.st.sb.group_count as u64) + n.min(fs.st.sb.gdt_blocks as u64)
    }

    /// Credits of a write of `nblocks` spanned blocks (data journaled under `data`).
    pub(super) fn write_credits(fs: &Fs, nblocks: u64, journaled: bool) -> Credits {
        let chain = 2 + nblocks / crate::format::extent::ExtentBlock::capacity(fs.bs()) as u64;
        let data = if journaled { nblocks } else { 0 };
        // A block that starts an in-place sequence while older logged copies of it remain in
        // the log gets a revoke record (selective journaling; see Journal::dirty_data).
        Credits { blocks: data + Self::alloc_credits(fs, nblocks + chain) + chain + 2, revokes: nblocks }
    }

    /// Blocks per write handle: the largest that fits the handle limit, at most 1 MiB worth.
    pub(super) fn write_chunk_blocks(fs: &Fs, journaled: bool) -> u64 {
        let max = fs.st.journal.max_handle_credits().blocks;
        let mut n = (1 << 20) / fs.bs() as u64;
        while n > 1 && Self::write_credits(fs, n, journaled).blocks > max {
            n = n * 3 / 4;
        }
        n.max(1)
    }

    pub(super) fn data_journaled(fs: &Fs, ino: u32) -> bool {
        let symlink = fs.st.inodes.get(&ino).is_some_and(|m| m.inode.is_symlink());
        symlink || fs.st.journal.policy().journals_data()
    }

    // ----------------------------------------------------------------------------------------
    // File-system operations (inode level, as FUSE needs them).
}

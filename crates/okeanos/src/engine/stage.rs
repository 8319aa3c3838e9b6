//! Staged appends (`stage_appends=on`): a write path beside the state lock for the commonest
//! small write, an append that fits in the rest of the file's last block or in the blocks
//! after it (as many as the append that opened the stage covered, at most 64 KiB).
//!
//! A slow-path append (write.rs, under the lock) opens the file's stage: credits for one more
//! such change are set aside in the running transaction ([`Journal::reserve`]), and the stage
//! remembers the size. Until the stage closes, an append or a write at the staged end that
//! fits in the room left is copied into the stage under the stage's own mutex and returns: no
//! state lock, no handle. Whoever takes the state lock next folds every stage's bytes into the
//! running transaction, each within its reserved credits ([`Okeanos::lock`]), so that nothing
//! under the lock ever sees a file without its staged bytes: reads, getattr, syncs, the
//! commit's plan.
//!
//! The room reaches into the blocks after the last when the stage may start them: its credits
//! cover a write of `span + 1` blocks with its allocation, and the free space that allocation
//! needs is set aside (`FsState::set_aside_blocks`, which no other allocation may take), so
//! that a fold cannot fail for space after the append was acknowledged, as ext4's delayed
//! allocation reserves blocks at write time. A fold that starts new blocks spends that space,
//! and the room shrinks to the rest of the new last block; more new blocks wait for the stage
//! to be armed again, in the next transaction (the credits cover one such fold a transaction).
//! `span` is what the append that opened the stage covered: one block for appends up to a
//! block, four for 16 KiB records (docs/BENCHMARKS.md, "Staged appends of several blocks"),
//! none for appends under a quarter of a block, which start a block rarely.
//!
//! The rules that keep this the same file system as without it:
//! - bytes staged while the stage's credits are in transaction T are folded into T: before
//!   the scheduler may begin a commit (`sched.poll`, the only place one begins) every stage
//!   is folded and suspended (pushes take the slow path), and resumed in the transaction
//!   running after (or closed, when nothing was staged in it for two transactions);
//! - every operation that changes a file's size, mapping or flags closes its stage first,
//!   under the same hold of the lock as the change ([`Okeanos::handle_on`]);
//! - a file whose stage is open has no change in a transaction later than the stage's newest
//!   (`last_tid`), so an fsync that finds it open waits for that commit alone, without the
//!   lock; otherwise it takes the ordinary path.
//!
//! A staged append's bytes become durable with the commit they are folded into, as an
//! ordinary append's; its mtime is the fold's time (at most one commit later).

use super::*;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::RwLock;

#[derive(Default)]
pub(super) struct Stages {
    map: RwLock<std::collections::HashMap<u32, Arc<Stage>>>,
    /// Stages holding bytes not yet folded in: a lock acquisition folds them when not 0.
    pending: AtomicUsize,
    /// The highest transaction a sync without the lock asked to commit.
    asked: AtomicU64,
    /// The journal stopped: nothing is staged any more.
    stopped: std::sync::atomic::AtomicBool,
}

struct Stage {
    ino: u32,
    st: Mutex<StageState>,
}

#[derive(Default)]
struct StageState {
    /// The transaction holding this stage's reserved credits: pushes go to it (None: closed
    /// or suspended; pushes take the slow path).
    open: Option<Tid>,
    /// Suspended around a scheduler step: reopened after it (in the transaction then running).
    suspended: bool,
    credits: Credits,
    /// How many blocks after the last one `credits` cover a fold starting (a write of
    /// `span + 1` blocks, allocation included), so that the room may reach into them.
    span: u64,
    /// Free-space blocks set aside for the new blocks' allocation while the room reaches
    /// into them (counted in `FsState::set_aside_blocks`).
    spare: u64,
    /// The size as folded, and the staged bytes after it.
    base: u64,
    pending: Vec<u8>,
    /// Bytes the stage may still take: the rest of the last block, and the `span` whole
    /// blocks after it while the stage may start them (`spare` set aside, or the next block
    /// mapped already).
    room: u64,
    /// The newest transaction holding a change of this file (every change since the stage
    /// opened is a push; the one that opened it was in this transaction or an earlier one).
    last_tid: Tid,
}

impl Stages {
    fn get(&self, ino: u32) -> Option<Arc<Stage>> {
        self.map.read().unwrap_or_else(|e| e.into_inner()).get(&ino).cloned()
    }

    pub(super) fn stop(&self) {
        self.stopped.store(true, SeqCst);
    }

    fn all(&self) -> Vec<Arc<Stage>> {
        self.map.read().unwrap_or_else(|e| e.into_inner()).values().cloned().collect()
    }
}

impl Okeanos {
    fn staging(&self) -> bool {
        let o = &self.inner.opts;
        // A test fault that panics inside a write is in the slow path: no staging with it.
        o.stage_appends && !o.manual_journal && !o.read_only && o.faults.panic_write_len.is_none()
    }

    /// The fast path: stages `data` for `ino` at the staged end (`off` None: append) if the
    /// file's stage is open and the bytes fit in its last block; returns where they begin.
    pub(super) fn try_stage(&self, ino: u32, off: Option<u64>, data: &[u8]) -> Option<u64> {
        if !self.staging() || data.is_empty() || self.inner.stages.stopped.load(SeqCst) {
            return None;
        }
        let stage = self.inner.stages.get(ino)?;
        let mut s = stage.st.lock().unwrap_or_else(|e| e.into_inner());
        let tid = s.open?;
        let end = s.base + s.pending.len() as u64;
        if off.is_some_and(|o| o != end) || data.len() as u64 > s.room {
            return None;
        }
        if s.pending.is_empty() {
            self.inner.stages.pending.fetch_add(1, SeqCst);
        }
        s.pending.extend_from_slice(data);
        s.room -= data.len() as u64;
        s.last_tid = tid;
        Some(end)
    }

    /// Folds every stage's bytes into the running transaction (under the lock).
    pub(super) fn fold_stages(&self, core: &mut Core) {
        if self.inner.stages.pending.load(SeqCst) == 0 {
            return;
        }
        let mut started = false;
        for stage in self.inner.stages.all() {
            let mut s = stage.st.lock().unwrap_or_else(|e| e.into_inner());
            started |= self.fold(core, stage.ino, &mut s);
        }
        if started {
            // New blocks joined the cache: keep it to its size, as a handle does when it ends
            // (a file appended a block at a time, each append staged and synced, would
            // otherwise take no handle that shrinks it).
            core.fs.shrink_cache();
        }
    }

    /// Folds one stage's bytes in, as one handle within its reserved credits; whether the
    /// fold started the file's next block. A fold that fails stops the journal: the bytes
    /// were accepted and cannot be written.
    fn fold(&self, core: &mut Core, ino: u32, s: &mut StageState) -> bool {
        if s.pending.is_empty() {
            return false;
        }
        self.inner.stages.pending.fetch_sub(1, SeqCst);
        let at = s.base;
        let n = s.pending.len();
        s.base += n as u64;
        if core.fs.journal.aborted().is_some() || core.fs.read_only.is_some() {
            // Nothing can join a transaction any more; the journal said why already.
            s.pending.clear();
            return false;
        }
        let now = self.inner.clock.now_ns();
        let token = core.fs.journal.handle_start_reserved(s.credits, now);
        let early_was_due = core.fs.journal.early_due();
        let bytes = std::mem::take(&mut s.pending);
        // The space set aside is this fold's to allocate from.
        let spare = std::mem::take(&mut s.spare);
        core.fs.set_aside_blocks -= spare;
        let r = self.guarded(core, |fs| fs.write_keeping(ino, at, &bytes, false));
        s.pending = bytes;
        s.pending.clear();
        let bs = core.fs.block_size() as u64;
        let started = s.base > at.div_ceil(bs) * bs;
        if started {
            // The fold started new blocks: the last is the last now, the room what is left of it
            // (the space set aside is spent; more new blocks wait for the stage to be armed).
            s.room = s.room.min((bs - s.base % bs) % bs);
            self.inner.stats.on_staged_new_block();
        } else if spare > 0 {
            core.fs.set_aside_blocks += spare;
            s.spare = spare;
        }
        let stopped = self.end_handle(core, token, early_was_due);
        let failed = match (r, stopped) {
            (Err(e), _) => Some(format!("a staged append of {n} bytes to inode {ino} failed: {e}")),
            (_, Err(why)) => Some(format!("broken invariant: {why}")),
            _ => None,
        };
        if let Some(why) = failed {
            s.open = None;
            s.suspended = false;
            self.inner.stop_journal(core, why);
        }
        started
    }

    /// Closes `ino`'s stage (under the lock): its bytes folded in, its credits given back;
    /// appends take the slow path until one opens it again.
    pub(super) fn close_stage(&self, core: &mut Core, ino: u32) {
        if !self.staging() {
            return;
        }
        let Some(stage) = self.inner.stages.get(ino) else { return };
        let mut s = stage.st.lock().unwrap_or_else(|e| e.into_inner());
        self.release_stage(core, ino, &mut s);
    }

    /// Folds a stage in and gives its credits back (pushes take the slow path); whether it
    /// was open.
    fn release_stage(&self, core: &mut Core, ino: u32, s: &mut StageState) -> bool {
        self.fold(core, ino, s);
        core.fs.set_aside_blocks -= std::mem::take(&mut s.spare);
        s.room = 0;
        s.suspended = false;
        let open = s.open.take().is_some();
        if open {
            core.fs.journal.unreserve(s.credits);
        }
        open
    }

    /// Forgets `ino`'s stage (the inode is gone).
    pub(super) fn drop_stage(&self, core: &mut Core, ino: u32) {
        self.close_stage(core, ino);
        self.inner.stages.map.write().unwrap_or_else(|e| e.into_inner()).remove(&ino);
    }

    /// Closes every stage (unmount).
    pub(super) fn close_all_stages(&self, core: &mut Core) {
        if !self.staging() {
            return;
        }
        for stage in self.inner.stages.all() {
            let mut s = stage.st.lock().unwrap_or_else(|e| e.into_inner());
            self.release_stage(core, stage.ino, &mut s);
        }
        // Only stages set space aside, and each gives all of it back when it closes.
        debug_assert_eq!(core.fs.set_aside_blocks, 0, "space set aside with every stage closed");
    }

    /// Before a scheduler step (which may begin a commit): every stage folded in, its credits
    /// given back, pushes to the slow path. Returns whether any stage was suspended. A stage
    /// nothing was staged in during this transaction and the one before is closed and
    /// forgotten instead: its credits are not set aside again in every transaction (a file
    /// appended to once keeps none), and the next append opens it again.
    pub(super) fn suspend_stages(&self, core: &mut Core) -> bool {
        if !self.staging() {
            return false;
        }
        let mut any = false;
        let mut idle = Vec::new();
        for stage in self.inner.stages.all() {
            let mut s = stage.st.lock().unwrap_or_else(|e| e.into_inner());
            let active = s.open.is_some_and(|t| s.last_tid.get() + 1 >= t.get());
            if self.release_stage(core, stage.ino, &mut s) && active {
                s.suspended = true;
                any = true;
            } else {
                idle.push(stage.ino);
            }
        }
        if !idle.is_empty() {
            // Closed under this hold of the lock, and only a slow-path append (under the lock)
            // opens a stage: none of these can be opened meanwhile.
            let mut map = self.inner.stages.map.write().unwrap_or_else(|e| e.into_inner());
            for ino in idle {
                map.remove(&ino);
            }
        }
        any
    }

    /// After a scheduler step: suspended stages open again in the running transaction, if
    /// their credits are admitted there without waiting; otherwise they stay closed.
    pub(super) fn resume_stages(&self, core: &mut Core) {
        if core.fs.journal.aborted().is_some() || core.fs.read_only.is_some() || core.closing {
            return;
        }
        for stage in self.inner.stages.all() {
            let mut s = stage.st.lock().unwrap_or_else(|e| e.into_inner());
            if !std::mem::take(&mut s.suspended) {
                continue;
            }
            if core.fs.journal.reserve(s.credits).is_ok() {
                let end = s.base;
                self.guarded(core, |fs| {
                    Self::arm(fs, stage.ino, &mut s, end);
                    Ok(())
                })
                .ok();
                if s.room == 0 {
                    // At a block boundary with no next block to start: nothing to stage.
                    core.fs.journal.unreserve(s.credits);
                } else {
                    s.open = Some(core.fs.journal.running_tid());
                }
            }
        }
    }

    /// Sets the room of a stage whose bytes are all folded, at `end`: the rest of the last
    /// block, and the `span` whole blocks after it too if the credits cover starting them and
    /// the space their allocation needs can be set aside now (or the next block is mapped
    /// already, fallocate, with a span of one).
    fn arm(fs: &mut Fs, ino: u32, s: &mut StageState, end: u64) {
        debug_assert!(s.spare == 0 && s.pending.is_empty(), "a stage armed with space or bytes");
        let bs = fs.bs() as u64;
        s.room = (bs - end % bs) % bs;
        let next = end.div_ceil(bs);
        if s.span == 0 || next + s.span > crate::fs::file::MAX_FILE_BLOCKS {
            return;
        }
        let Ok(mi) = fs.load(ino) else { return };
        // A hole before the file's last mapped block (blocks fallocated beyond the size) would
        // shift its extent chain: the slow path's. (The extents are in file order: the last
        // one ends the mapping. Every stage is armed again after each commit, so nothing here
        // may look at every extent.)
        let (mapped, beyond) = (mi.bmap(next as u32).is_some(), mi.extents().last().is_some_and(|e| e.end() as u64 > next));
        if beyond && !mapped {
            return;
        }
        // Past blocks mapped beyond the size, one block at a time (fewer than the credits
        // cover): the mapping there is the slow path's to extend.
        let span = if beyond { 1 } else { s.span };
        let Ok(need) = fs.write_needs(ino, next * bs, (span * bs) as usize) else { return };
        if need > fs.st.allocatable_blocks() {
            return;
        }
        fs.st.set_aside_blocks += need;
        s.spare = need;
        s.room += span * bs;
    }

    /// Opens `ino`'s stage after a slow-path write of `written` bytes that ended at `end`, the
    /// file's size, in its handle (under the lock): when the file is a plain regular file, the
    /// credits of one more append are admitted in the running transaction now, and there is
    /// room (the rest of the last block, or the blocks after it). Only a write of a quarter of
    /// a block to [`MAX_SPAN_BYTES`] opens a stage that may start blocks ([`stage_span`]):
    /// appends that size start one every few appends or every time, which the slow path would
    /// take under the lock each time, while a small append starts one rarely (one in 32 at
    /// 128 bytes), and its fold's allocation would be paid by whoever takes the lock next,
    /// often the commit lane (at 100 streams × 128 B that made the lane's plan and finish
    /// 50-75 µs longer a step).
    pub(super) fn open_stage(&self, fs: &mut Fs, ino: u32, end: u64, written: usize) -> FsResult<()> {
        if !self.staging() {
            return Ok(());
        }
        let bs = fs.bs() as u64;
        if fs.size(ino)? != end {
            return Ok(());
        }
        let plain = {
            let mi = fs.load(ino)?;
            mi.inode.is_reg() && mi.inode.flags & crate::format::inode::FLAG_DURABLE == 0 && (end % bs == 0 || mi.bmap((end / bs) as u32).is_some())
        };
        if !plain {
            return Ok(());
        }
        // What a fold can change: the last block (logged when data is journaled; a revoke when
        // selective journaling turns it to in place) and the inode's table block; with a span,
        // what a slow-path write of `span + 1` blocks can (the new blocks allocated).
        let journaled = Self::data_journaled(fs, ino);
        let within = Credits { blocks: 1 + journaled as u64, revokes: 1 };
        let span = stage_span(written as u64, bs);
        let across = Self::write_credits(fs, span + 1, journaled);
        let stage = {
            let mut map = self.inner.stages.map.write().unwrap_or_else(|e| e.into_inner());
            map.entry(ino).or_insert_with(|| Arc::new(Stage { ino, st: Mutex::new(StageState::default()) })).clone()
        };
        let mut s = stage.st.lock().unwrap_or_else(|e| e.into_inner());
        debug_assert!(s.open.is_none() && s.pending.is_empty(), "a stage opened twice");
        if s.open.is_some() || !s.pending.is_empty() {
            return Ok(());
        }
        let (credits, span) = if span > 0 && fs.st.journal.reserve(across).is_ok() {
            (across, span)
        } else if end % bs != 0 && fs.st.journal.reserve(within).is_ok() {
            (within, 0)
        } else {
            return Ok(());
        };
        let tid = fs.st.journal.running_tid();
        *s = StageState { open: Some(tid), suspended: false, credits, span, spare: 0, base: end, pending: Vec::new(), room: 0, last_tid: tid };
        Self::arm(fs, ino, &mut s, end);
        if s.room == 0 {
            fs.st.journal.unreserve(credits);
            s.open = None;
        }
        Ok(())
    }

    /// fsync or fdatasync of a file whose stage is open, without the state lock: waits for
    /// the commit of the newest transaction holding a change of it. `None`: not staged (or
    /// suspended), the caller takes the ordinary path.
    pub(super) fn fsync_staged(&self, ino: u32) -> Option<FsResult<()>> {
        if !self.staging() {
            return None;
        }
        let stage = self.inner.stages.get(ino)?;
        let tid = {
            let s = stage.st.lock().unwrap_or_else(|e| e.into_inner());
            s.open?;
            s.last_tid
        };
        // The canary: one transaction short.
        let tid = if self.inner.opts.faults.stage_sync_early { tid.saturating_sub(1) } else { tid };
        let inner = &self.inner;
        if Tid::new(inner.committed.load(SeqCst)) >= tid {
            return Some(Ok(()));
        }
        if inner.stages.asked.fetch_max(tid.get(), SeqCst) < tid.get() {
            // The first to ask for this commit asks the journal, under the lock (it may lead
            // the commit on this thread); the others only wait for it.
            let core = self.lock();
            return Some(self.wait_committed(core, tid));
        }
        let gen = inner.wake_gen.load(SeqCst);
        // A journal that stopped before `gen` was read has woken its sleepers already: this
        // sync would sleep for a commit that never comes. `stop` is stored before the wake-up
        // advances `wake_gen`, so one of the two is seen.
        if inner.stages.stopped.load(SeqCst) {
            let core = self.lock();
            return Some(self.wait_committed(core, tid));
        }
        {
            let mut g = inner.sync_lock.lock().unwrap_or_else(|e| e.into_inner());
            while Tid::new(inner.committed.load(SeqCst)) < tid && inner.wake_gen.load(SeqCst) == gen {
                g = inner.commit_cv[(tid.get() % 2) as usize].wait(g).unwrap_or_else(|e| e.into_inner());
            }
        }
        if Tid::new(inner.committed.load(SeqCst)) >= tid {
            return Some(Ok(()));
        }
        // Woken for something else (an error, unmount): the ordinary path says what.
        let core = self.lock();
        Some(self.wait_committed(core, tid))
    }
}

/// The most bytes of new blocks a stage may reach into: appends up to this size are staged
/// whole (a 16 KiB record is four blocks); a larger write (a copy, a run of database pages)
/// opens no stage that starts blocks, which would set credits and space aside for appends
/// that rarely follow.
const MAX_SPAN_BYTES: u64 = 64 << 10;

/// The blocks after its last one that a stage opened by a write of `written` bytes may start:
/// none below a quarter of a block or above [`MAX_SPAN_BYTES`], otherwise as many as the write
/// covers (one up to a block).
fn stage_span(written: u64, bs: u64) -> u64 {
    if written < bs / 4 || written > MAX_SPAN_BYTES.max(bs) {
        0
    } else {
        written.div_ceil(bs).max(1)
    }
}

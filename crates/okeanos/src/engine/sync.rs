//! How syncs wait for the commit that makes them durable.
//!
//! A thread that calls [`Okeanos::fsync`] sleeps on the condition variable of its
//! transaction's parity (`commit_cv[tid % 2]`): the end of a commit wakes the syncs of that
//! transaction, not those already waiting for the next one (the journal thread wakes them
//! once it has let go of the state lock, so that they do not wake into it: step.rs). Only
//! the sync that raises the commit request wakes the journal thread.
//!
//! A front end that must not park a thread per sync (the FUSE server: a request thread, or a
//! thread spawned per fsync, costs more than the sync itself at 100 streams) calls
//! [`Okeanos::fsync_then`] instead: the sync is registered with its transaction, and when the
//! commit completes (or the journal fails, or the mount goes away) its callback runs on the
//! notifier thread — never on the journal thread, which goes on to the next commit. A front
//! end whose request thread may as well run the commit itself calls [`Okeanos::fsync_or_lead`]:
//! when no commit is running, that thread leads one (leader.rs) and answers its group itself.

use crate::ids::HomeBlock;
use super::{Core, Inner, Okeanos};
use crate::fs::{DatasyncNeed, FsError, FsResult};
use crate::journal::transaction::Tid;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::MutexGuard;

/// What a sync waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Await {
    /// The commit of this transaction (0: nothing).
    Commit(Tid),
    /// An in-place request of journal/datasync.rs, or the commit of the transaction that
    /// holds its blocks, whichever comes first.
    InPlace { ticket: u64, tid: Tid },
}

impl Await {
    fn settled(self, core: &Core) -> bool {
        let j = &core.fs.journal;
        match self {
            Await::Commit(tid) => j.committed_tid() >= tid,
            Await::InPlace { ticket, tid } => j.datasyncs_done() >= ticket || j.committed_tid() >= tid,
        }
    }
}

/// What [`Okeanos::fsync_then`] calls once the sync is durable, or failed.
pub type SyncDone = Box<dyn FnOnce(FsResult<()>) + Send>;

impl Okeanos {
    /// Returns when everything `ino` depends on is durable: fsync (`datasync` false) or
    /// fdatasync (`datasync` true; timestamps-only changes are not waited for, and overwrites
    /// in place are written and flushed without a commit: journal/datasync.rs).
    pub fn fsync(&self, ino: u32, datasync: bool) -> FsResult<()> {
        let t0 = self.inner.clock.now_ns();
        if let Some(r) = self.fsync_staged(ino) {
            r?;
            self.inner.stats.on_sync(self.inner.clock.now_ns() - t0);
            return Ok(());
        }
        let mut core = self.lock();
        match self.sync_await(&mut core, ino, datasync) {
            Await::Commit(tid) => self.wait_committed(core, tid)?,
            Await::InPlace { ticket, tid } => self.wait_in_place(core, ticket, tid)?,
        }
        self.inner.stats.on_sync(self.inner.clock.now_ns() - t0);
        Ok(())
    }

    /// As [`fsync`](Self::fsync), without waiting: `done` is called with the outcome, at once
    /// when there is nothing to wait for, otherwise from the notifier thread once the commit
    /// covering `ino` is durable (or the journal failed, or the mount ended first). The sync
    /// joins the group commit exactly as a waiting one does.
    pub fn fsync_then(&self, ino: u32, datasync: bool, done: SyncDone) {
        self.register_sync(ino, datasync, done, false)
    }

    /// As [`fsync_then`](Self::fsync_then), for a thread that would rather run the commit
    /// than have it run elsewhere (a file-system server's request thread): when the sync asks
    /// for a commit and none is running, this thread runs it and answers the syncs it settles,
    /// `done` among them, before it returns; it goes on while other syncs ask for commits, a
    /// few steps at most (leader.rs, `commit_leader=`). Otherwise as `fsync_then`.
    pub fn fsync_or_lead(&self, ino: u32, datasync: bool, done: SyncDone) {
        self.register_sync(ino, datasync, done, true)
    }

    fn register_sync(&self, ino: u32, datasync: bool, done: SyncDone, lead_here: bool) {
        let t0 = self.inner.clock.now_ns();
        let mut core = self.lock();
        let wait = self.sync_await(&mut core, ino, datasync);
        if wait.settled(&core) {
            drop(core);
            self.inner.stats.on_sync(self.inner.clock.now_ns() - t0);
            return done(Ok(()));
        }
        if let Some(e) = core.fs.journal.aborted() {
            let e = FsError::Io(format!("journal aborted: {e}"));
            drop(core);
            return done(Err(e));
        }
        if core.manual {
            drop(core);
            return done(Err(FsError::WouldBlock));
        }
        if core.sched.stopping() {
            drop(core);
            return done(Err(FsError::Io("the file system is being unmounted".into())));
        }
        self.inner.ensure_notifier();
        let raised = match wait {
            Await::Commit(tid) => self.request_commit(&mut core, tid),
            Await::InPlace { .. } => false,
        };
        core.sync_waiters.push((wait, t0, done));
        if raised && lead_here && self.may_lead(&core) {
            // This thread commits, and answers the group's syncs itself (leader.rs): it serves
            // a request, so it goes on while other syncs ask for commits.
            drop(self.lead(core, &|c| wait.settled(c), true));
            return;
        }
        // A busy lane sees the request when its thread polls next.
        let wake = raised && !core.commit_lane_busy;
        drop(core);
        if wake {
            self.inner.jcv.notify_one();
        }
    }

    /// Commits everything done so far and waits for it (sync(2) for this file system).
    pub fn sync(&self) -> FsResult<()> {
        self.drain_evictions()?;
        let core = self.lock();
        let tid = core.fs.journal.current_tid();
        self.wait_committed(core, tid)
    }

    /// Makes several files durable with one wait: the transactions holding everything each
    /// depends on (as [`fsync`](Self::fsync) would, `datasync` as fdatasync) are committed
    /// together, usually in one commit and one flush (docs/EMBEDDING.md, "Group sync", says
    /// what is promised after a crash); overwrites in place of all of them go in one step.
    pub fn sync_files(&self, inos: &[u32], datasync: bool) -> FsResult<()> {
        let t0 = self.inner.clock.now_ns();
        let mut core = self.lock();
        let mut tid = Tid::ZERO;
        let mut blocks = Vec::new();
        let mut asking = Vec::new();
        // Requests made earlier that cover some of the files: the newest covers them all
        // (steps serve requests in order).
        let mut asked: Option<(u64, Tid)> = None;
        for &ino in inos {
            match core.fs.sync_need(ino, datasync) {
                DatasyncNeed::Nothing => {}
                DatasyncNeed::Commit(t) => tid = tid.max(t),
                DatasyncNeed::InPlace(b) => {
                    blocks.extend(b);
                    asking.push(ino);
                }
                DatasyncNeed::Asked { ticket, tid: t } => asked = Some(asked.map_or((ticket, t), |(k, u)| (k.max(ticket), u.max(t)))),
            }
        }
        if !blocks.is_empty() {
            let (ticket, running) = self.request_in_place(&mut core, blocks);
            for ino in asking {
                core.fs.in_place_asked(ino, ticket);
            }
            asked = Some((ticket, running));
        }
        if let Some((ticket, running)) = asked {
            self.wait_in_place(core, ticket, running)?;
            core = self.lock();
        }
        self.wait_committed(core, tid)?;
        self.inner.stats.on_sync(self.inner.clock.now_ns() - t0);
        Ok(())
    }

    /// The durable watermark of file `ino`: the length of the longest prefix whose bytes, as a
    /// read sees them now, the commits so far made durable (docs/EMBEDDING.md).
    pub fn durable_len(&self, ino: u32) -> FsResult<u64> {
        self.with_fs(|fs| {
            let size = fs.size(ino)?;
            Ok(fs.st.durable_len(ino, size))
        })
    }

    /// Waits until the durable watermark of `ino` reaches `offset`, or `timeout` passes, or the
    /// journal stops; returns the watermark then (below `offset` on a timeout). It does not ask
    /// for a commit: the writers' syncs and the commit interval (`commit=`) advance it.
    pub fn wait_durable(&self, ino: u32, offset: u64, timeout: std::time::Duration) -> FsResult<u64> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let (len, committed, gen) = {
                let mut core = self.lock();
                let len = self.guarded(&mut core, |fs| {
                    let size = fs.size(ino)?;
                    Ok(fs.st.durable_len(ino, size))
                })?;
                if len >= offset {
                    return Ok(len);
                }
                if let Some(e) = core.fs.journal.aborted() {
                    return Err(FsError::Io(format!("journal aborted: {e}")));
                }
                if core.sched.stopping() {
                    return Err(FsError::Io("the file system is being unmounted".into()));
                }
                (len, core.fs.journal.committed_tid(), self.inner.wake_gen.load(SeqCst))
            };
            let now = std::time::Instant::now();
            if now >= deadline {
                return Ok(len);
            }
            // Sleep until the next commit ends (it notifies its parity), an error, or the deadline.
            let next = committed + 1;
            let g = self.inner.sync_lock.lock().unwrap_or_else(|e| e.into_inner());
            if Tid::new(self.inner.committed.load(SeqCst)) < next && self.inner.wake_gen.load(SeqCst) == gen {
                let _ = self.inner.commit_cv[(next.get() % 2) as usize].wait_timeout(g, deadline - now);
            }
        }
    }

    /// What a sync of `ino` waits for; an fdatasync of overwrites in place is asked for here.
    fn sync_await(&self, core: &mut Core, ino: u32, datasync: bool) -> Await {
        match core.fs.sync_need(ino, datasync) {
            DatasyncNeed::Nothing => Await::Commit(Tid::ZERO),
            DatasyncNeed::Commit(tid) => Await::Commit(tid),
            DatasyncNeed::InPlace(blocks) => {
                let (ticket, tid) = self.request_in_place(core, blocks);
                core.fs.in_place_asked(ino, ticket);
                Await::InPlace { ticket, tid }
            }
            DatasyncNeed::Asked { ticket, tid } => Await::InPlace { ticket, tid },
        }
    }

    /// Asks the journal for `blocks` written in place and flushed (journal/datasync.rs), and
    /// wakes the lane that does it; returns the request's ticket and the transaction that
    /// holds the blocks.
    fn request_in_place(&self, core: &mut Core, blocks: Vec<HomeBlock>) -> (u64, Tid) {
        let tid = core.fs.journal.running_tid();
        let ticket = core.fs.journal.datasync_request(blocks);
        self.inner.jcv.notify_one();
        self.inner.ccv.notify_one();
        (ticket, tid)
    }

    /// Waits until the in-place request `ticket` is durable (or transaction `tid`, which holds
    /// its blocks, committed), the journal fails or the mount ends.
    fn wait_in_place<'a>(&'a self, mut core: MutexGuard<'a, Core>, ticket: u64, tid: Tid) -> FsResult<()> {
        loop {
            if (Await::InPlace { ticket, tid }).settled(&core) {
                return Ok(());
            }
            if let Some(e) = core.fs.journal.aborted() {
                return Err(FsError::Io(format!("journal aborted: {e}")));
            }
            if core.manual {
                return Err(FsError::WouldBlock);
            }
            if core.sched.abandoned() {
                return Err(FsError::Io("the file system was unmounted before the sync completed".into()));
            }
            // Every journal step ends by waking the handles' condition variable.
            core = self.inner.cv.wait(core).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Asks for the commit of `tid`; true if this raised the request (the journal thread must
    /// be woken: it looks at the request before it sleeps, under the lock, so a request it
    /// already saw needs no wake-up).
    fn request_commit(&self, core: &mut Core, tid: Tid) -> bool {
        core.fs.journal.request_commit(tid)
    }

    pub(super) fn wait_committed<'a>(&'a self, mut core: MutexGuard<'a, Core>, tid: Tid) -> FsResult<()> {
        loop {
            if core.fs.journal.committed_tid() >= tid {
                return Ok(());
            }
            if let Some(e) = core.fs.journal.aborted() {
                return Err(FsError::Io(format!("journal aborted: {e}")));
            }
            let raised = self.request_commit(&mut core, tid);
            if core.manual {
                return Err(FsError::WouldBlock);
            }
            if raised && self.may_lead(&core) {
                // This thread commits (leader.rs), then looks at the state again.
                core = self.lead(core, &|c| c.fs.journal.committed_tid() >= tid, false);
                continue;
            }
            if raised && !core.commit_lane_busy {
                self.inner.jcv.notify_one();
            }
            let gen = self.inner.wake_gen.load(SeqCst);
            drop(core);
            {
                let mut g = self.inner.sync_lock.lock().unwrap_or_else(|e| e.into_inner());
                while Tid::new(self.inner.committed.load(SeqCst)) < tid && self.inner.wake_gen.load(SeqCst) == gen {
                    g = self.inner.commit_cv[(tid.get() % 2) as usize].wait(g).unwrap_or_else(|e| e.into_inner());
                }
            }
            if Tid::new(self.inner.committed.load(SeqCst)) >= tid {
                return Ok(());
            }
            // Woken for something else (an error, unmount): look at the state again.
            core = self.lock();
        }
    }
}

impl Inner {
    fn ensure_notifier(&self) {
        let mut n = self.notifier.lock().unwrap_or_else(|e| e.into_inner());
        if n.is_some() {
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel::<Vec<(FsResult<()>, SyncDone)>>();
        // The thread owns only the receiving end: it ends when the mount (holding the sender)
        // is gone.
        let spawned = std::thread::Builder::new().name("okeanos-notify".into()).spawn(move || {
            for batch in rx {
                for (res, done) in batch {
                    done(res);
                }
            }
        });
        if spawned.is_ok() {
            *n = Some(tx);
        }
    }

    /// Hands the registered syncs that are settled — committed, or failed with the journal,
    /// or all of them when the mount ends (`closing`) — to the notifier thread. Called with the
    /// lock held after every journal step, on errors and at unmount.
    pub(super) fn deliver_syncs(&self, core: &mut Core, closing: bool) {
        if core.sync_waiters.is_empty() {
            return;
        }
        let failed = core.fs.journal.aborted().map(str::to_string);
        let now = self.clock.now_ns();
        let mut ready = Vec::new();
        let mut keep = Vec::new();
        for (wait, t0, done) in std::mem::take(&mut core.sync_waiters) {
            if wait.settled(core) {
                self.stats.on_sync(now.saturating_sub(t0));
                ready.push((Ok(()), done));
            } else if let Some(e) = &failed {
                ready.push((Err(FsError::Io(format!("journal aborted: {e}"))), done));
            } else if closing {
                ready.push((Err(FsError::Io("the file system was unmounted before the sync completed".into())), done));
            } else {
                keep.push((wait, t0, done));
            }
        }
        core.sync_waiters = keep;
        if ready.is_empty() {
            return;
        }
        if let Some(answers) = &mut core.flusher_answers {
            // A flusher's report settled them: it answers them itself (flush.rs).
            answers.extend(ready);
            return;
        }
        if let Some((leader, answers)) = &mut core.inline_syncs {
            if *leader == std::thread::current().id() {
                // A leader's step settled them: it answers them itself (leader.rs).
                answers.extend(ready);
                return;
            }
        }
        let n = self.notifier.lock().unwrap_or_else(|e| e.into_inner());
        match n.as_ref() {
            Some(tx) => {
                if let Err(std::sync::mpsc::SendError(batch)) = tx.send(ready) {
                    drop(n);
                    // The notifier is gone (it cannot be, while the mount holds its sender):
                    // answer here rather than never.
                    for (res, done) in batch {
                        done(res);
                    }
                }
            }
            None => {
                // No notifier thread could be started: answer here (under the lock; a
                // callback only replies to its requester).
                drop(n);
                for (res, done) in ready {
                    done(res);
                }
            }
        }
    }
}

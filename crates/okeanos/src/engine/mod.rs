//! The engine: a mounted Okeanos file system. It owns the devices, the state lock, and the
//! journal thread (jbd2's kjournald), and runs every file-system operation as one handle.
//!
//! Locking: one mutex guards all state ([`FsState`]: the cache, the journal core, the inode
//! and directory indexes). Operations hold it while they change cached blocks and never while
//! a commit or checkpoint writes to a device: the journal thread freezes what to write, drops
//! the lock, runs the plan, and takes the lock again to record completion. So a sync that
//! arrives while a commit is in flight joins the next transaction and shares its commit
//! (group commit), and no writer waits on another's I/O.
//!
//! Waiting is a state, not a loop around dropped locks: a handle that finds the transaction
//! full or the log short of space flags what it needs and waits on the condition variable; a
//! sync waits until `committed_tid` reaches its transaction.
//!
//! Files, in the order of a mount's life:
//! - this one: the types (the mount, its shared state, the state under the lock), statistics
//!   and checkpoint requests;
//! - `mount.rs`: mkfs, mount (superblock, journal, threads, orphans) and the clean unmount;
//!   `open.rs`: the journal's part of mounting (recovery, remote takeover, the placement);
//! - `handle.rs`: the state lock and handles (credits, waiting for room);
//! - `ops.rs`: namespace and attribute operations; `write.rs`: the write path, fallocate and
//!   truncation; `stage.rs`: small appends staged beside the lock (`stage_appends=on`);
//!   `read.rs`: reads outside the lock; `evict.rs`: open files and eviction;
//! - `sync.rs`: syncs waiting for their commit; `step.rs`: the journal threads over the
//!   scheduler (journal/scheduler/) and the effects of its decisions; `paths.rs`:
//!   path-level calls and [`File`]; `image.rs`: image files.

mod evict;
mod flush;
mod handle;
pub mod image;
mod leader;
mod mount;
mod open;
mod ops;
mod paths;
mod read;
mod step;
mod stage;
mod sync;
mod write;

pub use paths::File;
pub use step::{JournalStep, JournalWork, Lane};
pub use read::DeviceWait;

use crate::cache::Cache;
use crate::clock::{Clock, SystemClock};
use crate::device::{Device, FileDevice};
use crate::format::dir::FileType;
use crate::format::superblock::state;
use crate::format::Superblock;
use crate::fs::mkfs::{MkfsError, MkfsOptions};
use crate::fs::namespace::{Attr, SetAttr};
use crate::fs::{Fs, FsError, FsResult, FsState};
use crate::journal::checkpoint::CheckpointGoal;
use crate::journal::transaction::{Credits, Tid};
use crate::journal::scheduler::Scheduler;
use crate::journal::{Admit, Journal};
use crate::options::MountOptions;
use crate::runtime::open::{error_state, open_journal, read_meta};
use crate::runtime::{self, Devices};
use crate::stats::{Counters, Stats};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// An entry of `readdir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntryInfo {
    pub name: Vec<u8>,
    pub ino: u32,
    pub kind: FileType,
}

/// What `statfs` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatFs {
    pub block_size: u32,
    pub blocks: u64,
    pub blocks_free: u64,
    pub inodes: u64,
    pub inodes_free: u64,
    pub name_max: u32,
}

struct Core {
    fs: FsState,
    /// When to commit, checkpoint, fall back and return (journal/scheduler/); also whether
    /// the journal stops (unmount) or was abandoned (every user handle dropped).
    sched: Scheduler,
    /// No new operations (unmounting).
    closing: bool,
    /// Driven step by step (the simulator): no journal thread, and operations that would wait
    /// for the journal return [`FsError::WouldBlock`] instead.
    manual: bool,
    /// Syncs that wait without a thread ([`Okeanos::fsync_then`]): what they wait for, when the
    /// sync began, and what to call once it is durable (or failed).
    sync_waiters: Vec<(sync::Await, u64, sync::SyncDone)>,
    /// A thread runs the commit lane now (the journal thread, or a sync leading its write
    /// group: leader.rs); the other waits.
    commit_lane_busy: bool,
    /// The journal thread waits for the lane: the leader wakes it when it lets go.
    lane_waiter: bool,
    /// Times a leader took the commit lane: a journal thread that waited meanwhile does not
    /// count that wait as the lane's (the leader counted its own time).
    leads: u64,
    /// While a leader runs the lane: the syncs its steps settled, answered by the leader
    /// itself once it lets go of the lock (not handed to the notifier thread).
    inline_syncs: Option<(std::thread::ThreadId, leader::Answers)>,
    /// Pipelined commits' flushes waiting for a flusher thread (flush.rs).
    flush_jobs: Vec<flush::FlushJob>,
    /// While a flusher reports its flush, under one hold of the lock: the syncs it settled,
    /// which it answers itself.
    flusher_answers: Option<leader::Answers>,
    /// Commits the journal thread or a flusher finished (the first and the last) whose
    /// sleeping syncs it has still to wake: it wakes them once it has let go of this lock
    /// (step.rs, `journal_thread`; flush.rs, `report_flush`), within the same hold it set
    /// this in, so that they do not wake into a lock it holds.
    owed_wake: Option<(Tid, Tid)>,
}

impl Inner {
    /// Stops the journal, as jbd2's abort: nothing commits after this (the running
    /// transaction, which may hold half of a change, is never written), the file system turns
    /// read-only with the reason, every waiting sync fails, and one line says so in the log.
    /// What committed before stays in the journal: the next mount recovers it.
    fn stop_journal(&self, core: &mut Core, why: String) {
        if core.fs.journal.aborted().is_none() {
            eprintln!("okeanos: journal stopped, file system read-only: {why}; what was synced is kept and the next mount recovers it");
        }
        core.fs.journal.commit_failed(why.clone());
        core.fs.read_only.get_or_insert(why);
        // Appends are no longer staged (stage.rs): they take the path that fails.
        self.stages.stop();
        self.deliver_syncs(core, false);
        self.wake_all();
        self.jcv.notify_all();
        self.ccv.notify_all();
        self.fcv.notify_all();
    }

    /// Wakes every waiter: handles and syncs of both transactions (errors, unmount).
    fn wake_all(&self) {
        self.cv.notify_all();
        self.wake_gen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.wake_syncs(&self.commit_cv);
    }

    /// Transaction `tid` is committed: its syncs may return. On the commit lane's journal
    /// thread and on flushers the syncs asleep are woken once it lets go of the lock
    /// (`Core::owed_wake`); a sync that looks before then sees the store and does not sleep.
    fn committed(&self, core: &mut Core, tid: Tid) {
        self.committed.store(tid.get(), std::sync::atomic::Ordering::SeqCst);
        if step::WAKES_AFTER_UNLOCK.with(|d| d.get()) {
            core.owed_wake = Some(core.owed_wake.map_or((tid, tid), |(first, _)| (first, tid)));
            return;
        }
        self.wake_committed((tid, tid));
    }

    /// Wakes the syncs of the commits from `first` to `last`: the one condition variable of
    /// their parity, or both when there were several.
    fn wake_committed(&self, (first, last): (Tid, Tid)) {
        if first == last {
            self.wake_syncs(std::slice::from_ref(&self.commit_cv[(last.get() % 2) as usize]));
        } else {
            self.wake_syncs(&self.commit_cv);
        }
    }

    /// Wakes the syncs sleeping on `cvs`, after a store they check (`committed`, `wake_gen`).
    /// The sync mutex is taken between that store and the notification: a sync that checked
    /// before the store is asleep once it is taken and gets the notification; one that checks
    /// after sees the store. It is let go before notifying: the woken syncs retake it at once,
    /// and would otherwise find it held and sleep on it again.
    fn wake_syncs(&self, cvs: &[Condvar]) {
        drop(self.sync_lock.lock().unwrap_or_else(|e| e.into_inner()));
        for c in cvs {
            c.notify_all();
        }
    }
}

struct Inner {
    core: Mutex<Core>,
    /// Handles waiting for the journal (log space, a full transaction) sleep here; the journal
    /// notifies it after each step.
    cv: Condvar,
    /// Syncs waiting for transaction `tid` sleep on `commit_cv[tid % 2]` under `sync_lock`
    /// (not the state lock: a woken sync checks `committed` and returns without contending
    /// for the state with the writers and the journal). The end of a commit wakes the syncs
    /// of that transaction, not those already waiting for the next one (which is running
    /// while it commits). Woken, with `wake_gen` advanced, on every error and at unmount.
    commit_cv: [Condvar; 2],
    sync_lock: Mutex<()>,
    /// The newest committed transaction (the journal's `committed_tid`, readable without the
    /// state lock), and a count of [`Inner::wake_all`] calls.
    committed: std::sync::atomic::AtomicU64,
    wake_gen: std::sync::atomic::AtomicU64,
    /// The journal thread sleeps here; a handle that needs it (a sync, a full transaction, no
    /// log space) wakes it. Two condition variables, so that a sync poking the journal thread
    /// does not wake every other sync waiting for the same commit.
    jcv: Condvar,
    /// The checkpoint thread sleeps here (when checkpoints run beside commits): woken when a
    /// handle needs log space, a commit completes, or the mount stops.
    ccv: Condvar,
    /// Flusher threads (pipelined commits: flush.rs) sleep here until a flush is queued or the
    /// mount stops.
    fcv: Condvar,
    /// Hands completed [`Okeanos::fsync_then`] syncs to the thread that calls their
    /// callbacks (started with the first one).
    notifier: Mutex<Option<std::sync::mpsc::Sender<Vec<(FsResult<()>, sync::SyncDone)>>>>,
    devs: Devices,
    opts: MountOptions,
    clock: Arc<dyn Clock>,
    stats: Stats,
    /// The journal thread, and the checkpoint thread when checkpoints run beside commits.
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Staged appends (`stage_appends=on`, stage.rs).
    stages: stage::Stages,
}

/// A mounted file system. Cheap to clone; all clones share one mount.
/// Who creates an inode: its owner and (outside setgid directories) its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

impl Owner {
    pub const ROOT: Owner = Owner { uid: 0, gid: 0 };
}

#[derive(Clone)]
pub struct Okeanos {
    inner: Arc<Inner>,
    /// Held by user handles only (not by the journal thread): when the last one goes without
    /// `unmount`, the journal thread stops without further I/O, as after a crash.
    _user: Option<Arc<UserGuard>>,
}

struct UserGuard(Arc<Inner>);

impl Drop for UserGuard {
    fn drop(&mut self) {
        // No I/O: only tell the journal thread to stop where it stands, and wait until it has
        // (it finishes a step whose I/O is in flight), so that the devices, and with them the
        // image's lock, are released when the last user handle goes: reopening right after a
        // dropped mount must not find the image still held.
        {
            let mut core = self.0.core.lock().unwrap_or_else(|e| e.into_inner());
            core.sched.abandon();
            self.0.deliver_syncs(&mut core, true);
            self.0.wake_all();
            self.0.jcv.notify_all();
            self.0.ccv.notify_all();
            self.0.fcv.notify_all();
        }
        let threads = std::mem::take(&mut *self.0.threads.lock().unwrap_or_else(|e| e.into_inner()));
        for t in threads {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

impl Okeanos {
    pub fn statfs(&self) -> StatFs {
        let core = self.lock();
        let st = &core.fs;
        StatFs {
            block_size: st.sb.block_size,
            blocks: st.sb.block_count,
            blocks_free: st.allocatable_blocks(),
            inodes: st.sb.inode_count as u64,
            inodes_free: st.allocatable_inodes(),
            name_max: crate::format::dir::MAX_NAME as u32,
        }
    }

    /// Every counter, with the devices' own.
    pub fn counters(&self) -> Counters {
        let devs = &self.inner.devs;
        // The checkpoint counts as of now when the state is free (published after each
        // journal step otherwise; unmount calls this holding the lock).
        if let Ok(core) = self.inner.core.try_lock() {
            self.inner.stats.on_checkpoint_counts(core.fs.journal.checkpoint_counts());
        }
        let mut c = self.inner.stats.snapshot(devs.fs.counters(), devs.journal.as_ref().map(|j| j.counters()));
        if let Some(nvm) = &devs.nvm {
            // Without the engine's lock: callers hold it (unmount).
            let (slots, slots_in_use, parked_buffers) = self.inner.stats.nvm_slots();
            c.nvm = Some(crate::stats::NvmSummary {
                name: nvm.name(),
                bytes: nvm.len(),
                slots,
                slots_in_use,
                parked_buffers,
                durability: nvm.durability().describe().to_string(),
                counters: nvm.counters(),
            });
        }
        c
    }

    /// Writes every committed block home and releases the journal's space, now (`okeanos
    /// checkpoint`, the manylogs paper's forced checkpoint): commits what is running first,
    /// then waits until every transaction up to it is released. Returns what it wrote, copied
    /// from logs and skipped. Beside it, commits go on (a placement that checkpoints beside
    /// commits) or wait between its steps.
    pub fn checkpoint(&self) -> FsResult<crate::stats::CheckpointCounts> {
        let before = self.lock().fs.journal.checkpoint_counts();
        self.sync()?;
        let mut core = self.lock();
        if core.manual {
            return Err(FsError::Io("a forced checkpoint needs the journal threads (the simulator drives the journal itself)".into()));
        }
        if core.fs.read_only.is_some() {
            return Ok(Default::default());
        }
        let target = Self::force_checkpoint(&mut core);
        self.inner.jcv.notify_all();
        self.inner.ccv.notify_all();
        loop {
            if let Some(e) = core.fs.journal.aborted() {
                return Err(FsError::Io(format!("journal aborted: {e}")));
            }
            if core.fs.journal.oldest_owed_tid().is_none_or(|t| t > target) {
                break;
            }
            core = self.inner.cv.wait(core).unwrap_or_else(|e| e.into_inner());
        }
        Ok(core.fs.journal.checkpoint_counts().since(&before))
    }

    /// Asks for a checkpoint of everything committed; the transaction it must release.
    fn force_checkpoint(core: &mut Core) -> Tid {
        let target = core.fs.journal.committed_tid();
        core.sched.force_checkpoint(target);
        target
    }

    /// The simulator's forced checkpoint (it drives the journal itself): asks for a
    /// checkpoint of everything committed and returns the transaction to wait for
    /// ([`Self::checkpoint_released`]).
    pub fn request_checkpoint(&self) -> Tid {
        Self::force_checkpoint(&mut self.lock())
    }

    /// Whether every transaction up to `tid` is checkpointed and its space released.
    pub fn checkpoint_released(&self, tid: Tid) -> bool {
        self.lock().fs.journal.oldest_owed_tid().is_none_or(|t| t > tid)
    }

    /// The checkpoint accounting of this mount so far (under the state lock).
    pub fn checkpoint_counts(&self) -> crate::stats::CheckpointCounts {
        self.lock().fs.journal.checkpoint_counts()
    }

    /// Tells the journal that the disk head moved to file-system block `block` for I/O it does
    /// not see (a large read or write through another path): manylogs puts the next commits
    /// in the log nearest it. A no-op for the other placements.
    pub fn hint_position(&self, block: u64) {
        self.lock().fs.journal.note_position(crate::ids::DevBlock::new(block));
    }

    /// Commits placed so far and how many landed in the log of the disk head's group or a
    /// neighbour's (manylogs; None for the other placements).
    pub fn near_head(&self) -> Option<crate::journal::placement::NearHead> {
        self.lock().fs.journal.near_head()
    }

    /// Where the journal is now: "internal", "external", "remote", "nvm", "manylogs", or
    /// "remote, fallen back to the internal journal".
    pub fn placement(&self) -> String {
        self.lock().fs.journal.placement().name().to_string()
    }

    /// The content policy's name and guarantee.
    pub fn mode(&self) -> (String, &'static str) {
        let core = self.lock();
        (core.fs.journal.policy().name(), core.fs.journal.policy().guarantee())
    }

    /// How new whole blocks are written (wasteless's `fresh_blocks=`, as resolved at mount).
    pub fn new_blocks(&self) -> Option<&'static str> {
        self.lock().fs.journal.new_blocks()
    }

    /// Whether the file system's device seeks, as the mount took it for its automatic choices
    /// (`fresh_blocks=auto`, `short_writes=auto`, checkpoints beside commits): what the device
    /// says (the kernel's `queue/rotational`), or a device model's (the simulator); None when
    /// it says nothing.
    pub fn fs_seeks(&self) -> Option<bool> {
        self.inner.opts.fs_seeks.or_else(|| self.inner.devs.fs.seeks())
    }

    /// Why the file system is read-only, if it is.
    pub fn read_only_reason(&self) -> Option<String> {
        self.lock().fs.read_only.clone()
    }

    #[doc(hidden)]
    pub fn debug_state<R>(&self, f: impl FnOnce(&Journal, &Cache) -> R) -> R {
        let core = self.lock();
        f(&core.fs.journal, &core.fs.cache)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // No I/O here: a mount dropped without unmount() behaves like a crash (the journal
        // recovers it). The journal thread holds a reference, so this runs after it exited.
    }
}


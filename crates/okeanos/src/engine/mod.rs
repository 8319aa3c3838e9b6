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
//! Files: this one (mount, unmount, the inode-level operations, each one handle); `step.rs`
//! (the journal's step function and thread); `paths.rs` (path-level calls and [`File`]).

pub mod image;
mod open;
mod paths;
mod read;
mod step;
mod sync;

pub use paths::File;
pub use step::{JournalStep, JournalWork, Lane};

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
    /// A handle waits for log space.
    want_space: bool,
    /// Unmount asked the journal thread to stop.
    stop: bool,
    /// No new operations (unmounting).
    closing: bool,
    /// Every user handle was dropped without unmount: the journal thread exits at once.
    abandoned: bool,
    next_writeback_ns: u64,
    /// Moving average of commit durations, and the handles of the last commit (batching).
    avg_commit_ns: u64,
    last_commit_handles: u32,
    /// A batching window in progress: (started, handles seen at the last look, next look).
    batch: Option<(u64, u32, u64)>,
    /// Age-based writeback in progress, in bounded steps: the expiry threshold it works to.
    expiring: Option<u64>,
    /// When the next periodic snapshot of the map of logged blocks is due (manylogs).
    next_snapshot_ns: u64,
    /// Driven step by step (the simulator): no journal thread, and operations that would wait
    /// for the journal return [`FsError::WouldBlock`] instead.
    manual: bool,
    /// Work decided when the last step finished, taken before anything else (a fallback).
    pending: Option<JournalWork>,
    /// When a host that fell back may next try to return to its server, and the wait after a
    /// failed try.
    next_return_ns: u64,
    return_backoff_ns: u64,
    /// The blocks of the checkpoint in flight beside a commit (checkpoint lane), if one is.
    checkpointing: Option<std::collections::BTreeSet<u64>>,
    /// Syncs that wait without a thread ([`Okeanos::fsync_then`]): what they wait for, when the
    /// sync began, and what to call once it is durable (or failed).
    sync_waiters: Vec<(sync::Await, u64, sync::SyncDone)>,
    /// A checkpoint of every transaction up to this one was asked for ([`Okeanos::checkpoint`],
    /// or `checkpoint=idle` after a quiet spell): it runs until they are all released.
    force_checkpoint: Option<Tid>,
    /// `checkpoint=idle`: the activity count last seen (changes and read misses) and since when.
    idle_seen: (u64, u64),
}

impl Inner {
    /// Stops the journal, as jbd2's abort: nothing commits after this (the running
    /// transaction, which may hold half of a change, is never written), the file system turns
    /// read-only with the reason, every waiting sync fails, and one line says so in the log.
    /// What committed before stays in the journal: the next mount recovers it.
    fn stop_journal(&self, core: &mut Core, why: String) {
        if core.fs.journal.aborted.is_none() {
            eprintln!("okeanos: journal stopped, file system read-only: {why}; what was synced is kept and the next mount recovers it");
        }
        core.fs.journal.commit_failed(why.clone());
        core.fs.read_only.get_or_insert(why);
        self.deliver_syncs(core, false);
        self.wake_all();
        self.jcv.notify_all();
        self.ccv.notify_all();
    }

    /// Wakes every waiter: handles and syncs of both transactions (errors, unmount).
    fn wake_all(&self) {
        self.cv.notify_all();
        self.wake_gen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let _g = self.sync_lock.lock().unwrap_or_else(|e| e.into_inner());
        for c in &self.commit_cv {
            c.notify_all();
        }
    }

    /// Transaction `tid` is committed: its syncs may return.
    fn committed(&self, tid: Tid) {
        self.committed.store(tid, std::sync::atomic::Ordering::SeqCst);
        // Taken between the store and the notification: a sync that checked before the store
        // is already asleep and gets it; one that checks after sees the store.
        let _g = self.sync_lock.lock().unwrap_or_else(|e| e.into_inner());
        self.commit_cv[(tid % 2) as usize].notify_all();
    }
}

struct Inner {
    core: Mutex<Core>,
    /// `checkpoint_thread` resolved at mount (`auto`: not with an internal journal on a disk
    /// that seeks); the placement must allow it too (`Okeanos::checkpoint_beside`).
    checkpoint_thread: bool,
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
    /// Hands completed [`Okeanos::fsync_then`] syncs to the thread that calls their
    /// callbacks (started with the first one).
    notifier: Mutex<Option<std::sync::mpsc::Sender<Vec<(FsResult<()>, sync::SyncDone)>>>>,
    devs: Devices,
    opts: MountOptions,
    clock: Arc<dyn Clock>,
    stats: Stats,
    /// The journal thread, and the checkpoint thread when checkpoints run beside commits.
    threads: Mutex<Vec<JoinHandle<()>>>,
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
            core.abandoned = true;
            self.0.deliver_syncs(&mut core, true);
            self.0.wake_all();
            self.0.jcv.notify_all();
            self.0.ccv.notify_all();
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
    /// Formats a device (and an external journal device).
    pub fn mkfs(dev: &dyn Device, journal: Option<&dyn Device>, opts: &MkfsOptions) -> Result<Superblock, MkfsError> {
        crate::fs::mkfs::mkfs(dev, journal, opts)
    }

    /// Formats a device whose journal lives in non-volatile memory (the nvm placement, UBJ):
    /// `opts.nvm_path` is what the superblock records (a mount opens it unless given another
    /// region), `nvm` is formatted as its journal.
    pub fn mkfs_nvm(dev: &dyn Device, nvm: &dyn crate::nvm::Nvm, opts: &MkfsOptions) -> Result<Superblock, MkfsError> {
        if opts.nvm_path.is_none() {
            return Err(MkfsError::Invalid("an NVM journal needs nvm_path (what the superblock records)".into()));
        }
        // Checked before the device is written.
        crate::fs::mkfs::check_nvm_size(nvm, opts.block_size)?;
        let sb = crate::fs::mkfs::mkfs(dev, None, opts)?;
        crate::fs::mkfs::format_nvm(nvm, &sb)?;
        Ok(sb)
    }

    /// Creates an image file of `size_bytes` and formats it, writing its whole journal so
    /// that the file's space for it is allocated ([`MkfsOptions::zero_journal`]). Refuses to
    /// overwrite a file.
    pub fn mkfs_file(path: &Path, size_bytes: u64, opts: &MkfsOptions) -> Result<Superblock, MkfsError> {
        let dev = FileDevice::create(path, size_bytes, false)?;
        crate::fs::mkfs::mkfs(&dev, None, &MkfsOptions { zero_journal: true, ..opts.clone() })
    }

    /// Mounts an image file or block device (and `opts.journal_path`, if set).
    pub fn open(path: &Path, opts: MountOptions) -> FsResult<Okeanos> {
        let open = |p: &Path| -> FsResult<Arc<dyn Device>> {
            let d: Arc<dyn Device> = Arc::new(match (opts.read_only, opts.direct_io) {
                (ro, true) => FileDevice::open_direct(p, !ro),
                (true, false) => FileDevice::open_read_only(p),
                (false, false) => FileDevice::open(p),
            }?);
            Ok(match &opts.device_model {
                // Each device gets its own model instance: its own arm, queue and cache.
                Some(m) => Arc::new(crate::device::TimedDevice::new(d, crate::models::preset(m).map_err(FsError::Invalid)?)),
                None => d,
            })
        };
        let dev = open(path)?;
        let journal = match &opts.journal_path {
            Some(j) => Some(open(j)?),
            None => None,
        };
        Okeanos::mount(dev, journal, opts)
    }

    /// Mounts with the system clock.
    pub fn mount(dev: Arc<dyn Device>, journal: Option<Arc<dyn Device>>, opts: MountOptions) -> FsResult<Okeanos> {
        Okeanos::mount_with_clock(dev, journal, opts, Arc::new(SystemClock::default()))
    }

    /// Mounts: validates the metadata, recovers the journal if needed, marks the file system
    /// mounted, finishes deleting orphans, and starts the journal thread.
    pub fn mount_with_clock(dev: Arc<dyn Device>, journal: Option<Arc<dyn Device>>, mut opts: MountOptions, clock: Arc<dyn Clock>) -> FsResult<Okeanos> {
        let (sb, _) = read_meta(dev.as_ref())?;
        let mut devs = Devices::new(dev.clone(), journal, sb.block_size as usize);
        let (region, jsb) = open_journal(&sb, &devs)?;
        let stats = Stats::new(sb.block_size as usize);
        let (next_tid, remote) = open::recover(&mut devs, &sb, region, &jsb, &opts, &stats, clock.as_ref())?;
        devs.remote_log = None;
        let dev = devs.fs.clone();
        // Recovery may have replayed the superblock and descriptors: read them again.
        let (mut sb, gdt) = read_meta(dev.as_ref())?;
        let (_, jsb) = open_journal(&sb, &devs)?;
        let errors = error_state(&sb);
        if let Some(why) = &errors {
            if !opts.read_only && !opts.errors_remount_ro {
                return Err(FsError::HasErrors(format!(
                    "{why}. A read-write mount is refused until `okeanos fsck` has checked it; it can be mounted read-only (ro, or errors=remount-ro)"
                )));
            }
            opts.read_only = true;
        }
        let mut journal = open::journal(&mut devs, &sb, region, jsb, &opts, next_tid, remote)?;
        // Blocks a manylogs recovery kept logged: owed by their transactions (which the mount's
        // table keeps live), parked in their logs.
        let kept = journal.placement.recovered_kept();
        journal.adopt_logged(&kept);
        if devs.nvm.is_some() {
            stats.on_nvm_slots(journal.placement.capacity(), journal.placement.capacity() - journal.placement.free_blocks(), 0);
        }
        if !opts.read_only {
            sb.state = state::MOUNTED;
            sb.mount_count = sb.mount_count.wrapping_add(1);
            sb.last_mount_ns = clock.wall_ns();
            let mut b0 = vec![0u8; sb.block_size as usize];
            sb.encode(&mut b0);
            dev.write_at(0, &b0)?;
            stats.on_write(crate::journal::plan::BlockKind::FinalMeta, b0.len());
            dev.flush()?;
            runtime::execute(&journal.mount_plan(), &devs, &stats)?;
        }
        let ro_reason = match errors {
            Some(why) => format!("mounted read-only: {why}"),
            None => "mounted read-only".to_string(),
        };
        let mut fs = FsState::new(sb, gdt, journal, opts.cache_blocks, opts.read_only.then_some(ro_reason));
        fs.parking = match (&devs.nvm, fs.journal.placement.parks_on_device()) {
            (Some(nvm), _) => Some(crate::fs::Parking::Nvm(nvm.clone())),
            (None, true) => Some(crate::fs::Parking::Logs(devs.fs.clone())),
            (None, false) => None,
        };
        let now = clock.now_ns();
        for &(block, at, tid) in &kept {
            fs.cache.insert_parked(block, at, tid, crate::cache::BufKind::Data, now);
        }
        let committed_at_mount = fs.journal.committed_tid;
        let checkpoint_thread = opts.checkpoint_thread.unwrap_or_else(|| !(devs.journal.is_none() && devs.fs.seeks() == Some(true)));
        let inner = Arc::new(Inner {
            checkpoint_thread,
            core: Mutex::new(Core { fs, want_space: false, stop: false, closing: false, abandoned: false, avg_commit_ns: 0, last_commit_handles: 0, batch: None, expiring: None, pending: None, next_return_ns: now, return_backoff_ns: 2_000_000_000, manual: opts.manual_journal, next_writeback_ns: now + opts.writeback_period.as_nanos() as u64, next_snapshot_ns: now + opts.snapshot_period.as_nanos() as u64, checkpointing: None, sync_waiters: Vec::new(), force_checkpoint: None, idle_seen: (0, now) }),
            cv: Condvar::new(),
            commit_cv: [Condvar::new(), Condvar::new()],
            sync_lock: Mutex::new(()),
            committed: std::sync::atomic::AtomicU64::new(committed_at_mount),
            wake_gen: std::sync::atomic::AtomicU64::new(0),
            jcv: Condvar::new(),
            ccv: Condvar::new(),
            notifier: Mutex::new(None),
            devs,
            opts,
            clock,
            stats,
            threads: Mutex::new(Vec::new()),
        });
        let me = Okeanos { _user: Some(Arc::new(UserGuard(inner.clone()))), inner };
        // Check the root before anything else: a foreign or damaged image fails here, clearly.
        me.getattr(me.root())?;
        if !me.inner.opts.read_only {
            if !me.inner.opts.manual_journal {
                let lanes: &[step::Lane] = if me.checkpoint_beside() { &[step::Lane::Commit, step::Lane::Checkpoint] } else { &[step::Lane::Commit] };
                for &lane in lanes {
                    let t = me.inner.clone();
                    let name = match lane {
                        step::Lane::Commit => "okeanos-journal",
                        step::Lane::Checkpoint => "okeanos-checkpoint",
                    };
                    let handle = std::thread::Builder::new().name(name.into()).spawn(move || step::journal_thread(t, lane));
                    match handle {
                        Ok(h) => me.inner.threads.lock().unwrap_or_else(|e| e.into_inner()).push(h),
                        Err(e) => {
                            // Stop what started (as a dropped mount would).
                            drop(me);
                            return Err(FsError::Io(format!("starting the {name} thread: {e}")));
                        }
                    }
                }
            }
            let orphans = me.with_fs(|fs| fs.orphans())?;
            for ino in orphans {
                me.evict(ino)?;
            }
        }
        Ok(me)
    }

    /// The state's lock. A thread that panicked holding it (a broken invariant outside the
    /// guarded calls below) may have left the state half-changed: the journal is stopped before
    /// anyone goes on with it.
    fn lock(&self) -> MutexGuard<'_, Core> {
        match self.inner.core.lock() {
            Ok(g) => g,
            Err(poisoned) => {
                let mut core = poisoned.into_inner();
                self.inner.core.clear_poison();
                self.inner.stop_journal(&mut core, "a thread panicked while it held the file system's state (a bug: see the log)".into());
                core
            }
        }
    }

    /// Runs `f` on the state, catching a panic: a broken invariant inside one operation stops
    /// the journal and fails that operation with [`FsError::Broken`], instead of unwinding
    /// through the caller (a FUSE request thread, a foreign-language caller) and leaving the
    /// state to whoever comes next.
    fn guarded<R>(&self, core: &mut Core, f: impl FnOnce(&mut Fs) -> FsResult<R>) -> FsResult<R> {
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
    fn with_fs<R>(&self, f: impl FnOnce(&mut Fs) -> FsResult<R>) -> FsResult<R> {
        let mut core = self.lock();
        let r = self.guarded(&mut core, f);
        core.fs.shrink_cache();
        r
    }

    /// Runs `op` as one atomic handle. `credits` may look at the state (it runs under the lock
    /// and again after every wait).
    fn handle<R>(&self, credits: impl Fn(&mut Fs) -> FsResult<Credits>, mut op: impl FnMut(&mut Fs) -> FsResult<R>) -> FsResult<R> {
        let r = self.handle_once(&credits, &mut op);
        if matches!(r, Err(FsError::NoSpace)) && self.wait_for_pending_frees()? {
            // ext4 does the same (ext4_should_retry_alloc): blocks freed by transactions that
            // have not committed become allocatable once they do; commit, then try again.
            return self.handle_once(&credits, &mut op);
        }
        r
    }

    /// Commits the transactions holding freed blocks back; true if there were any.
    fn wait_for_pending_frees(&self) -> FsResult<bool> {
        let core = self.lock();
        if core.fs.pending_free_blocks.is_empty() && core.fs.pending_free_inodes.is_empty() {
            return Ok(false);
        }
        let tid = core.fs.journal.current_tid();
        self.wait_committed(core, tid)?;
        Ok(true)
    }

    fn handle_once<R>(&self, credits: &impl Fn(&mut Fs) -> FsResult<Credits>, op: &mut impl FnMut(&mut Fs) -> FsResult<R>) -> FsResult<R> {
        let mut core = self.lock();
        let token = loop {
            if let Some(why) = &core.fs.read_only {
                return Err(FsError::ReadOnly(why.clone()));
            }
            if core.closing {
                return Err(FsError::ReadOnly("unmounting".into()));
            }
            if let Some(e) = &core.fs.journal.aborted {
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
            match core.fs.journal.handle_start(c, now) {
                Ok(t) => break t,
                Err(Admit::NeedCommit) => {
                    let tid = core.fs.journal.running.tid;
                    core.fs.journal.commit_requested = core.fs.journal.commit_requested.max(tid);
                }
                Err(Admit::NeedSpace) => {
                    core.want_space = true;
                    self.inner.ccv.notify_one();
                }
                Err(Admit::NeedWriteback) => {
                    // Background writeback drains the running transaction's in-place data;
                    // either lane may take its step.
                    self.inner.ccv.notify_one();
                }
            }
            if core.manual {
                return Err(FsError::WouldBlock);
            }
            self.inner.jcv.notify_one();
            core = self.inner.cv.wait(core).unwrap_or_else(|e| e.into_inner());
        };
        let epoch = core.fs.dirty_epoch;
        let r = self.guarded(&mut core, |fs| op(fs));
        let stopped = core.fs.journal.handle_stop(token);
        self.inner.stats.on_handle();
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

    /// Credits for a handle that changes `meta` metadata blocks at most.
    fn meta_credits(meta: u64) -> impl Fn(&mut Fs) -> FsResult<Credits> {
        move |_fs| Ok(Credits::blocks(meta))
    }

    /// An attribute change: the inode, the attribute block (allocated, or freed and revoked),
    /// a bitmap and a group descriptor.
    fn xattr_credits(fs: &mut Fs) -> FsResult<Credits> {
        Ok(Credits { blocks: 4 + Self::alloc_credits(fs, 1), revokes: 1 })
    }

    /// Blocks a handle allocating `n` blocks may log for bitmaps and descriptors.
    fn alloc_credits(fs: &Fs, n: u64) -> u64 {
        n.min(fs.st.sb.group_count as u64) + n.min(fs.st.sb.gdt_blocks as u64)
    }

    /// Credits of a write of `nblocks` spanned blocks (data journaled under `data`).
    fn write_credits(fs: &Fs, nblocks: u64, journaled: bool) -> Credits {
        let chain = 2 + nblocks / crate::format::extent::ExtentBlock::capacity(fs.bs()) as u64;
        let data = if journaled { nblocks } else { 0 };
        // A block that starts an in-place sequence while older logged copies of it remain in
        // the log gets a revoke record (selective journaling; see Journal::dirty_data).
        Credits { blocks: data + Self::alloc_credits(fs, nblocks + chain) + chain + 2, revokes: nblocks }
    }

    /// Blocks per write handle: the largest that fits the handle limit, at most 1 MiB worth.
    fn write_chunk_blocks(fs: &Fs, journaled: bool) -> u64 {
        let max = fs.st.journal.max_handle_credits().blocks;
        let mut n = (1 << 20) / fs.bs() as u64;
        while n > 1 && Self::write_credits(fs, n, journaled).blocks > max {
            n = n * 3 / 4;
        }
        n.max(1)
    }

    fn data_journaled(fs: &Fs, ino: u32) -> bool {
        let symlink = fs.st.inodes.get(&ino).is_some_and(|m| m.inode.is_symlink());
        symlink || fs.st.journal.policy.journals_data()
    }

    // ----------------------------------------------------------------------------------------
    // File-system operations (inode level, as FUSE needs them).

    pub fn root(&self) -> u32 {
        self.lock().fs.sb.root_ino
    }

    pub fn getattr(&self, ino: u32) -> FsResult<Attr> {
        self.with_fs(|fs| fs.attr(ino))
    }

    pub fn lookup(&self, parent: u32, name: &[u8]) -> FsResult<Attr> {
        self.with_fs(|fs| {
            let (ino, _) = fs.lookup_entry(parent, name)?.ok_or(FsError::NotFound)?;
            fs.attr(ino)
        })
    }

    pub fn readdir(&self, dir: u32) -> FsResult<Vec<DirEntryInfo>> {
        self.with_fs(|fs| Ok(fs.list(dir)?.into_iter().map(|e| DirEntryInfo { name: e.name, ino: e.ino, kind: e.ftype }).collect()))
    }

    fn make(&self, parent: u32, name: &[u8], kind: FileType, perm: u32, owner: Owner) -> FsResult<Attr> {
        self.drain_evictions()?;
        // 20 for the inode, the entry and the parent; 6 more for an inherited ACL's block.
        let ino = self.handle(Self::meta_credits(26), |fs| fs.create_node(parent, name, kind, perm, owner.uid, owner.gid))?;
        self.getattr(ino)
    }

    /// Creates a regular file owned by root.
    pub fn create(&self, parent: u32, name: &[u8], perm: u32) -> FsResult<Attr> {
        self.create_as(parent, name, perm, Owner::ROOT)
    }

    /// Creates a regular file owned by `owner` (the caller's uid and gid; in a setgid
    /// directory the group is the directory's).
    pub fn create_as(&self, parent: u32, name: &[u8], perm: u32, owner: Owner) -> FsResult<Attr> {
        self.make(parent, name, FileType::Regular, perm, owner)
    }

    pub fn mkdir(&self, parent: u32, name: &[u8], perm: u32) -> FsResult<Attr> {
        self.mkdir_as(parent, name, perm, Owner::ROOT)
    }

    /// Creates a directory owned by `owner` (setgid directories: as [`Okeanos::create_as`]).
    pub fn mkdir_as(&self, parent: u32, name: &[u8], perm: u32, owner: Owner) -> FsResult<Attr> {
        self.make(parent, name, FileType::Directory, perm, owner)
    }

    /// Creates a symlink to `target` (at most one block).
    pub fn symlink(&self, parent: u32, name: &[u8], target: &[u8]) -> FsResult<Attr> {
        self.symlink_as(parent, name, target, Owner::ROOT)
    }

    /// Creates a symlink owned by `owner`.
    pub fn symlink_as(&self, parent: u32, name: &[u8], target: &[u8], owner: Owner) -> FsResult<Attr> {
        let bs = self.lock().fs.block_size();
        if target.is_empty() || target.len() > bs.min(4095) {
            return Err(FsError::NameTooLong);
        }
        self.drain_evictions()?;
        let ino = self.handle(Self::meta_credits(28), |fs| {
            let ino = fs.create_node(parent, name, FileType::Symlink, 0o777, owner.uid, owner.gid)?;
            fs.write(ino, 0, target)?;
            Ok(ino)
        })?;
        self.getattr(ino)
    }

    /// Creates a FIFO, socket, or character or block device (`rdev`: Linux's encoding of its
    /// number), owned by `owner`: an inode with no data, as ext4 stores them.
    pub fn mknod_as(&self, parent: u32, name: &[u8], kind: FileType, perm: u32, rdev: u32, owner: Owner) -> FsResult<Attr> {
        if !matches!(kind, FileType::Fifo | FileType::CharDevice | FileType::BlockDevice | FileType::Socket) {
            return Err(FsError::Invalid(format!("mknod makes FIFOs, sockets and devices, not {kind:?}")));
        }
        self.drain_evictions()?;
        let ino = self.handle(Self::meta_credits(20), |fs| {
            let ino = fs.create_node(parent, name, kind, perm, owner.uid, owner.gid)?;
            if matches!(kind, FileType::CharDevice | FileType::BlockDevice) {
                fs.load(ino)?.inode.rdev = rdev;
                fs.store(ino)?;
            }
            Ok(ino)
        })?;
        self.getattr(ino)
    }

    /// Whether directory `dir` has a default POSIX ACL: then a new inode's mode is not umasked
    /// (its ACL limits it instead).
    pub fn has_default_acl(&self, dir: u32) -> FsResult<bool> {
        self.with_fs(|fs| fs.has_default_acl(dir))
    }

    /// The value of extended attribute `name` of `ino` (ENODATA when it has none).
    pub fn getxattr(&self, ino: u32, name: &[u8]) -> FsResult<Vec<u8>> {
        self.with_fs(|fs| fs.get_xattr(ino, name))
    }

    /// The names of `ino`'s extended attributes.
    pub fn listxattr(&self, ino: u32) -> FsResult<Vec<Vec<u8>>> {
        self.with_fs(|fs| {
            let mut names: Vec<Vec<u8>> = fs.xattrs(ino)?.entries.into_iter().map(|(n, _)| n).collect();
            if fs.load(ino)?.inode.flags & crate::format::inode::FLAG_DURABLE != 0 {
                names.push(crate::fs::xattr::DURABLE_XATTR.to_vec());
                names.sort();
            }
            Ok(names)
        })
    }

    /// Makes regular file `ino` O_DUR, or not (the manylogs paper's O_DUR, section IV-D; the
    /// xattr `user.okeanos.durable` on a mount): its writes are always logged, whatever the
    /// content policy, and never written home for age; a checkpoint for space (the logs
    /// filling), a forced one (`okeanos checkpoint`) and unmount still write them, and a
    /// truncate or unlink drops them without writing anything home. Persistent (an inode flag).
    pub fn set_durable(&self, ino: u32, durable: bool) -> FsResult<()> {
        self.drain_evictions()?;
        self.handle(Self::xattr_credits, |fs| fs.set_durable(ino, durable))
    }

    /// Whether `ino` is O_DUR.
    pub fn is_durable(&self, ino: u32) -> FsResult<bool> {
        self.with_fs(|fs| Ok(fs.load(ino)?.inode.flags & crate::format::inode::FLAG_DURABLE != 0))
    }

    /// Sets extended attribute `name` of `ino` (one atomic handle, journaled as metadata).
    pub fn setxattr(&self, ino: u32, name: &[u8], value: &[u8], mode: crate::fs::xattr::SetMode) -> FsResult<()> {
        self.drain_evictions()?;
        if name == crate::fs::acl::ACCESS {
            return self.handle(Self::xattr_credits, |fs| fs.set_access_acl(ino, value, mode));
        }
        self.handle(Self::xattr_credits, |fs| fs.set_xattr(ino, name, Some(value), mode))
    }

    /// Removes extended attribute `name` of `ino` (ENODATA when there is none).
    pub fn removexattr(&self, ino: u32, name: &[u8]) -> FsResult<()> {
        self.drain_evictions()?;
        self.handle(Self::xattr_credits, |fs| fs.set_xattr(ino, name, None, crate::fs::xattr::SetMode::Any))
    }

    pub fn readlink(&self, ino: u32) -> FsResult<Vec<u8>> {
        self.with_fs(|fs| {
            if !fs.load(ino)?.inode.is_symlink() {
                return Err(FsError::Invalid("not a symbolic link".into()));
            }
            fs.read(ino, 0, 4096)
        })
    }

    pub fn link(&self, ino: u32, new_parent: u32, new_name: &[u8]) -> FsResult<Attr> {
        self.drain_evictions()?;
        self.handle(Self::meta_credits(16), |fs| fs.link(ino, new_parent, new_name))?;
        self.getattr(ino)
    }

    pub fn unlink(&self, parent: u32, name: &[u8]) -> FsResult<()> {
        self.drain_evictions()?;
        let gone = self.handle(Self::meta_credits(12), |fs| fs.unlink(parent, name))?;
        if let Some(ino) = gone {
            self.release_if_unused(ino)?;
        }
        Ok(())
    }

    /// Blocks owned by directory `name` in `parent` (0 if it is not a directory): removing
    /// it frees them all. An empty directory may still own blocks from entries it once held.
    fn dir_blocks(fs: &mut Fs, parent: u32, name: &[u8]) -> FsResult<u64> {
        match fs.lookup_entry(parent, name)? {
            Some((ino, FileType::Directory)) => {
                let mi = fs.load(ino)?;
                Ok(mi.mapped_blocks() + mi.chain.len() as u64 + (mi.inode.xattr_block != 0) as u64)
            }
            _ => Ok(0),
        }
    }

    pub fn rmdir(&self, parent: u32, name: &[u8]) -> FsResult<()> {
        self.drain_evictions()?;
        self.handle(
            |fs| {
                let blocks = Self::dir_blocks(fs, parent, name)?;
                Ok(Credits { blocks: 12 + Self::alloc_credits(fs, blocks), revokes: blocks })
            },
            |fs| fs.rmdir(parent, name),
        )
    }

    pub fn rename(&self, parent: u32, name: &[u8], new_parent: u32, new_name: &[u8]) -> FsResult<()> {
        self.rename_with(parent, name, new_parent, new_name, false)
    }

    /// rename(2) with RENAME_NOREPLACE: EEXIST if `new_name` exists, checked in the same
    /// handle as the rename (no other operation can create it in between).
    pub fn rename_noreplace(&self, parent: u32, name: &[u8], new_parent: u32, new_name: &[u8]) -> FsResult<()> {
        self.rename_with(parent, name, new_parent, new_name, true)
    }

    /// renameat2 with RENAME_EXCHANGE: `name` and `new_name` swap what they name, atomically.
    pub fn rename_exchange(&self, parent: u32, name: &[u8], new_parent: u32, new_name: &[u8]) -> FsResult<()> {
        self.drain_evictions()?;
        self.handle(Self::meta_credits(28), |fs| fs.exchange(parent, name, new_parent, new_name))
    }

    fn rename_with(&self, parent: u32, name: &[u8], new_parent: u32, new_name: &[u8], noreplace: bool) -> FsResult<()> {
        self.drain_evictions()?;
        let gone = self.handle(
            |fs| {
                let blocks = Self::dir_blocks(fs, new_parent, new_name)?;
                Ok(Credits { blocks: 28 + Self::alloc_credits(fs, blocks), revokes: blocks })
            },
            |fs| {
                if noreplace && fs.lookup_entry(new_parent, new_name)?.is_some() {
                    return Err(FsError::Exists);
                }
                fs.rename(parent, name, new_parent, new_name)
            },
        )?;
        if let Some(ino) = gone {
            self.release_if_unused(ino)?;
        }
        Ok(())
    }

    pub fn setattr(&self, ino: u32, set: &SetAttr) -> FsResult<Attr> {
        self.drain_evictions()?;
        self.handle(Self::meta_credits(4), |fs| fs.setattr(ino, set))?;
        self.getattr(ino)
    }

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
            let done = self.handle(
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
    fn fallocate_range(&self, offset: u64, len: u64) -> FsResult<u64> {
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
    fn punch_step_blocks(fs: &mut Fs, ino: u32) -> FsResult<(usize, Credits)> {
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
    fn write_zeros(&self, ino: u32, from: u64, to: u64, keep_size: bool) -> FsResult<()> {
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
    fn write_inner(&self, ino: u32, off: Option<u64>, data: &[u8], keep_size: bool, payload: bool) -> FsResult<u64> {
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
            self.handle(
                |fs| {
                    let pos = match off {
                        Some(o) => o + done as u64,
                        None => fs.attr(ino)?.size,
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

    fn truncate_step_blocks(fs: &Fs) -> (usize, Credits) {
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

    fn truncate_steps(&self, ino: u32, size: u64) -> FsResult<()> {
        loop {
            let done = self.handle(
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

    /// Frees an unlinked inode's blocks and the inode itself (several handles).
    /// Several threads may decide to evict the same inode (an unlink racing with the last
    /// release): one claims it, and only an unused inode that is still an orphan is evicted —
    /// an inode number freed meanwhile, or already reused by a new file, is left alone.
    fn evict(&self, ino: u32) -> FsResult<()> {
        {
            let mut core = self.lock();
            let st = &mut core.fs;
            if st.open_count.contains_key(&ino) || !st.evicting.insert(ino) {
                return Ok(());
            }
        }
        let r = (|| {
            let orphan = self.with_fs(|fs| Ok(fs.load(ino).is_ok_and(|m| m.inode.nlink == 0)))?;
            if !orphan {
                return Ok(());
            }
            self.truncate_steps(ino, 0)?;
            // The extent chain's blocks and the attribute block are freed (revoked) too.
            let frees = |fs: &mut Fs| -> FsResult<Credits> {
                let mi = fs.load(ino)?;
                Ok(Credits { blocks: 8, revokes: mi.chain.len() as u64 + (mi.inode.xattr_block != 0) as u64 })
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
                core.fs.watermarks.remove(&ino);
            }
        }
        r
    }

    /// Deletes an unlinked inode now unless a handle holds it open. The name is gone already:
    /// an eviction that would wait (a mount driven step by step)
    /// is queued for the next operation instead, so the caller never retries an unlink or a
    /// rename that took effect.
    fn release_if_unused(&self, ino: u32) -> FsResult<()> {
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
    fn drain_evictions(&self) -> FsResult<()> {
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
            self.inner.stats.on_checkpoint_counts(core.fs.journal.cp);
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
        let before = self.lock().fs.journal.cp;
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
            if let Some(e) = &core.fs.journal.aborted {
                return Err(FsError::Io(format!("journal aborted: {e}")));
            }
            if core.fs.journal.log.front().is_none_or(|t| t.tid > target) {
                break;
            }
            core = self.inner.cv.wait(core).unwrap_or_else(|e| e.into_inner());
        }
        Ok(core.fs.journal.cp.since(&before))
    }

    /// Asks for a checkpoint of everything committed; the transaction it must release.
    fn force_checkpoint(core: &mut Core) -> Tid {
        let target = core.fs.journal.committed_tid;
        core.force_checkpoint = Some(core.force_checkpoint.unwrap_or(0).max(target));
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
        self.lock().fs.journal.log.front().is_none_or(|t| t.tid > tid)
    }

    /// The checkpoint accounting of this mount so far (under the state lock).
    pub fn checkpoint_counts(&self) -> crate::stats::CheckpointCounts {
        self.lock().fs.journal.cp
    }

    /// Tells the journal that the disk head moved to file-system block `block` for I/O it does
    /// not see (a large read or write through another path): manylogs puts the next commits
    /// in the log nearest it. A no-op for the other placements.
    pub fn hint_position(&self, block: u64) {
        self.lock().fs.journal.placement.note_position(block);
    }

    /// Commits placed so far and how many landed in the log of the disk head's group or a
    /// neighbour's (manylogs; None for the other placements).
    pub fn near_head(&self) -> Option<crate::journal::placement::manylogs::NearHead> {
        self.lock().fs.journal.placement.near_head()
    }

    /// Where the journal is now: "internal", "external", "remote", "nvm", "manylogs", or
    /// "remote, fallen back to the internal journal".
    pub fn placement(&self) -> String {
        self.lock().fs.journal.placement.name().to_string()
    }

    /// The content policy's name and guarantee.
    pub fn mode(&self) -> (String, &'static str) {
        let core = self.lock();
        (core.fs.journal.policy.name(), core.fs.journal.policy.guarantee())
    }

    /// Why the file system is read-only, if it is.
    pub fn read_only_reason(&self) -> Option<String> {
        self.lock().fs.read_only.clone()
    }

    /// Cleanly unmounts: finishes deletions, commits, checkpoints everything, marks the journal
    /// and the superblock clean. After an I/O error it stops without touching the image, which
    /// then recovers at the next mount.
    pub fn unmount(self) -> FsResult<()> {
        let ro = self.inner.opts.read_only;
        let synced = if ro { Ok(()) } else { self.sync() };
        {
            let mut core = self.lock();
            core.closing = true;
            core.stop = true;
            self.inner.wake_all();
            self.inner.jcv.notify_all();
            self.inner.ccv.notify_all();
        }
        let threads = std::mem::take(&mut *self.inner.threads.lock().unwrap_or_else(|e| e.into_inner()));
        for t in threads {
            let _ = t.join();
        }
        self.inner.deliver_syncs(&mut self.lock(), true);
        synced?;
        if ro {
            return Ok(());
        }
        let mut core = self.lock();
        if let Some(e) = &core.fs.journal.aborted {
            return Err(FsError::Io(format!("journal aborted, image left for recovery: {e}")));
        }
        let devs = &self.inner.devs;
        let stats = &self.inner.stats;
        core.fs.unpark_all()?;
        while let Some(plan) = core.fs.journal.checkpoint_begin(&core.fs.cache, CheckpointGoal::All) {
            runtime::execute(&plan.io, devs, stats)?;
            let Core { fs, .. } = &mut *core;
            fs.journal.checkpoint_finish(&mut fs.cache, plan);
            if fs.journal.log.is_empty() {
                break;
            }
        }
        runtime::execute(&core.fs.journal.clean_plan(), devs, stats)?;
        let mut sb = core.fs.sb.clone();
        sb.state = state::CLEAN;
        let c = self.counters();
        let l = &mut sb.lifetime;
        l.journal_bytes += c.journal_bytes;
        l.final_bytes += c.final_bytes;
        l.payload_bytes += c.payload_bytes;
        l.commits += c.commits;
        l.syncs += c.syncs;
        let mut b0 = vec![0u8; sb.block_size as usize];
        sb.encode(&mut b0);
        devs.fs.write_at(0, &b0)?;
        stats.on_write(crate::journal::plan::BlockKind::FinalMeta, b0.len());
        devs.fs.flush()?;
        Ok(())
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


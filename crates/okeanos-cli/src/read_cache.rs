//! Cached reads on the mount: which opens of a regular file use the kernel's page cache, and
//! how that cache is kept coherent with writes that bypass it.
//!
//! Writes need direct I/O (FOPEN_DIRECT_IO) for their atomicity (docs/MOUNT.md): through the
//! page cache the kernel splits a write() at the first page it does not hold up to date. Reads
//! do not: a file opened read-only is opened through the page cache (and keeps it from one
//! open to the next, FOPEN_KEEP_CACHE), so rereads and readahead never reach the daemon. It
//! writes nothing through that cache, so atomicity is untouched.
//!
//! Coherence. Every change to a file's data comes through the daemon: a direct write, a
//! truncate, a fallocate, or the write-back of pages a shared mapping dirtied (those are in the
//! cache already). Truncates and fallocates drop the range from the kernel's cache after their
//! reply, in the kernel. A direct write drops it before it is sent (with
//! FUSE_DIRECT_IO_ALLOW_MMAP), but a cached reader can fill it again from the old data before
//! the write reaches the engine. So after the engine has applied a direct write to a file that
//! has ever been opened cached in this mount, the daemon invalidates that range
//! (FUSE_NOTIFY_INVAL_INODE) before it replies: once write() returns, no read anywhere sees the
//! old bytes. The invalidation can wait on a page a cached reader holds locked while its
//! FUSE_READ is served, or on a page under write-back; so it never runs on a request thread but
//! on one thread of its own, which replies afterwards (request threads stay free to serve those
//! reads and write-backs). It is never done for a write-back (FUSE_WRITE_CACHE), which would
//! wait for itself, nor for a truncate, during which the kernel holds write-backs back. Linux has since fixed
//! the race itself (it drops the range again after a direct write, as for its own file
//! systems; xfstests generic/209); the daemon's invalidation covers the kernels before that
//! fix, from 6.6 (FUSE_DIRECT_IO_ALLOW_MMAP) on. The first cached open
//! of a file drops whatever the kernel held of it (no KEEP_CACHE): pages of a shared mapping of
//! a direct-I/O open from before are not trusted.
//!
//! `direct_reads` turns this off (every regular open direct, as before); `page_cache` and
//! `writeback_cache` put every open through the page cache, with per-page write atomicity.

use fuser::{INodeNo, Notifier};
use std::collections::HashSet;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, OnceLock};

/// Work after an invalidation: the reply (or the sync that replies).
pub type Then = Box<dyn FnOnce() + Send>;

struct Job {
    ino: u32,
    /// Offset and length of the invalidated range (length 0: to the end of the file).
    offset: u64,
    len: u64,
    then: Then,
}

pub struct ReadCache {
    /// Off: every regular open is direct (`direct_reads`).
    enabled: bool,
    pub(crate) hooks: crate::fuse::TestHooks,
    /// Files opened through the page cache at least once in this mount (their kernel cache may
    /// hold pages until the kernel forgets them).
    cached: Mutex<HashSet<u32>>,
    /// Set once the session exists (it owns the channel notifications go through).
    notifier: Arc<OnceLock<Notifier>>,
    /// Sender is Sync: request threads send without a lock.
    jobs: Sender<Job>,
}

impl ReadCache {
    pub fn new(enabled: bool, notifier: Arc<OnceLock<Notifier>>, hooks: crate::fuse::TestHooks) -> ReadCache {
        let (tx, rx) = channel::<Job>();
        let n = notifier.clone();
        // Ends when the front end (the only sender) is dropped.
        let _ = std::thread::Builder::new().name("okeanos-inval".into()).spawn(move || {
            while let Ok(j) = rx.recv() {
                if let Some(n) = n.get() {
                    if let Err(e) = n.inval_inode(INodeNo(j.ino as u64), j.offset as i64, j.len as i64) {
                        eprintln!("okeanos: invalidating the kernel's cache of inode {} failed: {e}", j.ino);
                    }
                }
                (j.then)();
            }
        });
        ReadCache { enabled, hooks, cached: Mutex::new(HashSet::new()), notifier, jobs: tx }
    }

    /// Before a write reaches the engine (the test hook `write_delay_ms`).
    pub fn before_write(&self) {
        if self.hooks.write_delay_ms > 0 {
            std::thread::sleep(std::time::Duration::from_millis(self.hooks.write_delay_ms));
        }
    }

    /// Whether an open with `flags` of regular file `ino` goes through the page cache, and if
    /// so whether it keeps what the kernel cached (false on the file's first cached open).
    pub fn open(&self, ino: u32, flags: i32) -> Option<bool> {
        if !self.enabled || flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0 || self.notifier.get().is_none() {
            return None;
        }
        let mut c = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        Some(!c.insert(ino))
    }

    /// After the engine changed `[offset, offset + len)` of `ino` (len 0: to the end): `then`
    /// at once if the file was never opened cached, otherwise after the kernel's cached pages
    /// of the range are dropped.
    pub fn changed(&self, ino: u32, offset: u64, len: u64, then: Then) {
        if !self.cached.lock().unwrap_or_else(|e| e.into_inner()).contains(&ino) {
            return then();
        }
        let job = Job { ino, offset, len, then };
        if let Err(std::sync::mpsc::SendError(j)) = self.jobs.send(job) {
            // The thread is gone (it never panics; only if it could not be started): invalidate
            // here rather than leave stale pages.
            if let Some(n) = self.notifier.get() {
                let _ = n.inval_inode(INodeNo(j.ino as u64), j.offset as i64, j.len as i64);
            }
            (j.then)();
        }
    }
}

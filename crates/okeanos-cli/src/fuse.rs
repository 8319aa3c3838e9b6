//! The FUSE front end: serves a mounted Okeanos engine to the kernel, so unmodified programs
//! (fio, postmark, sqlite3) run on it.
//!
//! Requests are served by several threads. A sync (fsync, fdatasync, fsyncdir, and writes to
//! files opened with O_SYNC/O_DSYNC) never waits on a request thread: when no commit is
//! running, the thread runs the commit covering it and answers every sync that commit settles
//! (the engine's write-group leader); otherwise its reply is handed to whichever thread
//! completes that commit. Concurrent syncs group-commit in the engine and other streams'
//! writes go on meanwhile. No reply to a sync is sent before that commit is durable. Kernel write-back caching is off unless asked for (`writeback_cache`): with it the
//! kernel turns sub-block appends into whole-page writes and hides the byte ranges that
//! wasteless journaling saves.
//!
//! Regular files are opened for direct I/O (FOPEN_DIRECT_IO; mmap stays allowed with
//! FUSE_DIRECT_IO_ALLOW_MMAP): through the page cache the kernel splits a write() that crosses
//! into a page it does not hold up to date into one request per page, and each request is its
//! own atomic handle, so a crash between them kept half of a write. Direct I/O delivers a
//! write() of up to max_write (1 MiB, the kernel's default page limit) as one request: one
//! handle, recovered whole or not at all under data and wasteless journaling. `page_cache`
//! (or `writeback_cache`) keeps the kernel's page cache, with per-page atomicity. Files opened
//! read-only are read through the page cache, kept coherent by the daemon (read_cache.rs).
//!
//! Counters are readable while mounted from the hidden file `/.okeanos-stats` (JSON), which
//! `okeanos stat MOUNTPOINT` prints; each open reads the snapshot taken at that open.

mod kernel;
mod reply;
pub mod ring;
pub mod spares;
mod test_hooks;
mod wire;

pub use kernel::KernelFront;
pub use test_hooks::TestHooks;
use reply::Reply;

use fuser::{Errno, FileAttr, FileHandle, FileType, FopenFlags, INodeNo, OpenFlags, RenameFlags, TimeOrNow, WriteFlags};
use okeanos::format::FileType as Kind;
use okeanos::{Attr, FsError, Okeanos, SetAttr};
use crate::read_cache::ReadCache;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The name of the counters file in the root directory (not listed by readdir).
pub const STATS_NAME: &str = ".okeanos-stats";
/// Its inode number: above every real one (those are 32-bit).
const STATS_INO: u64 = 1 << 40;
/// The counters in Prometheus' text format (docs/OBSERVABILITY.md), also not listed.
pub const METRICS_NAME: &str = ".okeanos-metrics";
const METRICS_INO: u64 = STATS_INO + 1;
/// Opening it checkpoints everything committed (`okeanos checkpoint MOUNTPOINT`); reading the
/// open file gives what that checkpoint did (JSON). Not listed either.
pub const CHECKPOINT_NAME: &str = ".okeanos-checkpoint";
const CHECKPOINT_INO: u64 = STATS_INO + 2;
const TTL: Duration = Duration::from_secs(1);

/// What a setattr changes (the fields FUSE sends that the engine keeps).
#[derive(Default)]
pub struct AttrChange {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<TimeOrNow>,
    pub mtime: Option<TimeOrNow>,
}

/// How a file handle syncs its writes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SyncMode {
    None,
    Data,
    Full,
}

struct Handle {
    ino: u32,
    sync: SyncMode,
}

pub struct OkeanosFuse {
    fs: Okeanos,
    writeback_cache: bool,
    /// Keep the kernel's page cache for regular files (`page_cache`): faster rereads, but a
    /// write() crossing pages may reach the engine as several atomic pieces.
    page_cache: AtomicBool,
    /// FUSE over io_uring: asked for, agreed, served (ring.rs).
    ring: Arc<ring::RingState>,
    /// Read-only opens through the page cache, and its coherence with direct writes.
    reads: ReadCache,
    handles: Mutex<HashMap<u64, Handle>>,
    /// What each open of a virtual file reads (by file handle): the counters as they were at
    /// the open, or what the checkpoint that open ran did. A reader that takes several
    /// read() calls sees one consistent text, not pieces of renderings that differ in length.
    snapshots: Mutex<HashMap<u64, Vec<u8>>>,
    next_fh: AtomicU64,
    /// FUSE_READ requests served (`fuse_reads` in the counters file): reads the kernel's page
    /// cache answered never come here.
    read_requests: AtomicU64,
    /// The threads reading requests from /dev/fuse: `fuse_request_threads` free to read
    /// (`threads=`, by default one per CPU), and `fuse_spare_threads` parked until one of
    /// those waits for the device (spares.rs).
    pub(crate) spares: Arc<spares::Spares>,
    /// The inodes the kernel knows, with its lookup count of each (FUSE's protocol: every
    /// entry replied adds one, FORGET takes them back). Each known inode is held in the engine
    /// as an open file is ([`Okeanos::open_ino`]), so that an unlink frees it only once the
    /// kernel has forgotten it. Without the hold, an open of a file the kernel had just looked
    /// up found its inode freed by an unlink in between, and failed "Structure needs cleaning"
    /// (pg_ctl start did, polling postmaster.pid), and a freed number reused by a new file
    /// would have opened that file instead; on ext4 such an open gets the unlinked file.
    known: Mutex<HashMap<u32, u64>>,
}

/// What a read that waits for the device tells: the spare-thread pool, and the test hook that
/// makes device reads slow.
struct DeviceWaits<'a> {
    spares: &'a spares::Spares,
    delay_ms: u64,
}

impl okeanos::DeviceWait for DeviceWaits<'_> {
    fn begin(&self) {
        self.spares.begin();
        if self.delay_ms > 0 {
            std::thread::sleep(Duration::from_millis(self.delay_ms));
        }
    }

    fn end(&self) {
        self.spares.end();
    }
}

/// getxattr/listxattr's size protocol: 0 asks for the length, a smaller buffer is ERANGE.
fn xattr_reply(v: &[u8], size: u32, reply: impl Reply) {
    if size == 0 {
        reply.xattr_size(v.len() as u32)
    } else if v.len() > size as usize {
        reply.error(Errno::from_i32(libc::ERANGE))
    } else {
        reply.data(v)
    }
}

/// The errno a request fails with. Errors no program caused (corruption, I/O errors, a stopped
/// journal) are also logged, since a program's message (pg_ctl's "Structure needs cleaning")
/// names neither the block nor the cause: the first 20, then one in 1,000.
fn errno(e: &FsError) -> Errno {
    static LOGGED: AtomicU64 = AtomicU64::new(0);
    if matches!(e, FsError::Corrupt(_) | FsError::Io(_) | FsError::Broken(_) | FsError::HasErrors(_)) {
        let n = LOGGED.fetch_add(1, Ordering::Relaxed);
        if n < 20 || n % 1000 == 0 {
            eprintln!("okeanos: a request failed ({} so far): {e}", n + 1);
        }
    }
    Errno::from_i32(e.errno())
}

fn time(ns: i64) -> SystemTime {
    if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH - Duration::from_nanos(ns.unsigned_abs())
    }
}

fn kind(k: Kind) -> FileType {
    match k {
        Kind::Regular => FileType::RegularFile,
        Kind::Directory => FileType::Directory,
        Kind::Symlink => FileType::Symlink,
        Kind::Fifo => FileType::NamedPipe,
        Kind::CharDevice => FileType::CharDevice,
        Kind::BlockDevice => FileType::BlockDevice,
        Kind::Socket => FileType::Socket,
    }
}

fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino as u64),
        size: a.size,
        blocks: a.blocks,
        atime: time(a.atime_ns),
        mtime: time(a.mtime_ns),
        ctime: time(a.ctime_ns),
        crtime: time(a.ctime_ns),
        kind: kind(a.kind),
        perm: (a.perm & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        flags: 0,
        blksize: a.block_size,
    }
}

fn ino32(ino: INodeNo) -> Result<u32, Errno> {
    u32::try_from(u64::from(ino)).map_err(|_| Errno::from_i32(libc::ENOENT))
}

fn wall_ns(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i64,
        Err(e) => -(e.duration().as_nanos() as i64),
    }
}

impl OkeanosFuse {
    /// `cached_reads`: read-only opens through the page cache; `notifier` is set once the
    /// session exists (until then every open is direct).
    pub fn new(fs: Okeanos, writeback_cache: bool, page_cache: bool, cached_reads: bool, notifier: Arc<OnceLock<fuser::Notifier>>, ring: Arc<ring::RingState>, spares: spares::Spares) -> Self {
        let page_cache = page_cache || writeback_cache;
        OkeanosFuse {
            fs,
            writeback_cache,
            page_cache: AtomicBool::new(page_cache),
            ring,
            reads: ReadCache::new(cached_reads && !page_cache, notifier, TestHooks::from_env()),
            handles: Mutex::new(HashMap::new()),
            snapshots: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            read_requests: AtomicU64::new(0),
            spares: Arc::new(spares),
            known: Mutex::new(HashMap::new()),
        }
    }

    /// The mode of a new inode in `parent`: the umask applies unless the directory has a
    /// default ACL (which limits the mode instead, in the engine).
    fn perm(&self, parent: u32, mode: u32, umask: u32) -> u32 {
        if self.fs.has_default_acl(parent).unwrap_or(false) {
            mode & 0o7777
        } else {
            mode & !umask & 0o7777
        }
    }

    /// How a regular file is opened: direct I/O unless the page cache was asked for.
    fn open_flags(&self, a: &okeanos::Attr) -> FopenFlags {
        if a.kind == Kind::Regular && !self.page_cache.load(Ordering::Relaxed) {
            FopenFlags::FOPEN_DIRECT_IO
        } else {
            FopenFlags::empty()
        }
    }

    fn stats_json(&self) -> Vec<u8> {
        let mut v = serde_json::to_value(self.fs.counters()).unwrap_or_default();
        let (mode, guarantee) = self.fs.mode();
        v["mode"] = mode.into();
        v["guarantee"] = guarantee.into();
        v["placement"] = self.fs.placement().into();
        v["new_blocks"] = self.fs.new_blocks().into();
        v["read_only"] = self.fs.read_only_reason().into();
        v["fuse_reads"] = self.read_requests.load(Ordering::Relaxed).into();
        v["fuse_transport"] = self.ring.transport().into();
        v["fuse_ring_requests"] = self.ring.served.load(Ordering::Relaxed).into();
        v["fuse_request_threads"] = self.spares.readers().into();
        v["fuse_spare_threads"] = self.spares.spares().into();
        v["fuse_spare_calls"] = self.spares.called().into();
        v["fuse_device_waits_most"] = self.spares.most_waiting().into();
        v["fuse_known_inodes"] = self.known_count().into();
        let mut s = serde_json::to_string_pretty(&v).unwrap_or_default().into_bytes();
        s.push(b'\n');
        s
    }

    /// The Prometheus text of this mount's counters.
    pub fn metrics_text(fs: &Okeanos) -> String {
        fs.counters().prometheus(&fs.mode().0, &fs.placement())
    }

    /// The contents of a virtual file of the root directory.
    fn virtual_file(&self, ino: u64) -> Option<Vec<u8>> {
        match ino {
            STATS_INO => Some(self.stats_json()),
            METRICS_INO => Some(Self::metrics_text(&self.fs).into_bytes()),
            _ => None,
        }
    }

    fn virtual_ino(name: &OsStr) -> Option<u64> {
        if name == STATS_NAME {
            Some(STATS_INO)
        } else if name == METRICS_NAME {
            Some(METRICS_INO)
        } else if name == CHECKPOINT_NAME {
            Some(CHECKPOINT_INO)
        } else {
            None
        }
    }

    fn stats_attr(&self, ino: u64) -> FileAttr {
        let now = SystemTime::now();
        FileAttr {
            ino: INodeNo(ino),
            size: self.virtual_file(ino).map_or(0, |c| c.len() as u64),
            blocks: 0,
            atime: now,
            mtime: now,
            ctime: now,
            crtime: now,
            kind: FileType::RegularFile,
            perm: 0o444,
            nlink: 1,
            uid: 0,
            gid: 0,
            rdev: 0,
            flags: 0,
            blksize: 4096,
        }
    }

    fn add_handle(&self, ino: u32, flags: i32) -> u64 {
        let sync = if flags & libc::O_SYNC == libc::O_SYNC {
            SyncMode::Full
        } else if flags & libc::O_DSYNC != 0 {
            SyncMode::Data
        } else {
            SyncMode::None
        };
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles.lock().unwrap_or_else(|e| e.into_inner()).insert(fh, Handle { ino, sync });
        fh
    }

    fn entry(&self, r: Result<Attr, FsError>, reply: impl Reply) {
        match r.and_then(|a| self.remember(a.ino).map(|()| a)) {
            Ok(a) => reply.entry(TTL, &file_attr(&a), a.generation as u64),
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// The kernel is about to learn of `ino` once more (an entry replied): the first time,
    /// the engine holds the inode ([`OkeanosFuse::known`]). Called before the reply, while the
    /// kernel still holds the directory's lock for the lookup or create, so no unlink of that
    /// name runs in between.
    fn remember(&self, ino: u32) -> Result<(), FsError> {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        match known.get_mut(&ino) {
            Some(n) => *n += 1,
            None => {
                self.fs.open_ino(ino)?;
                known.insert(ino, 1);
            }
        }
        Ok(())
    }

    /// FORGET: the kernel drops `n` of its lookups of `ino`; at none, the engine's hold goes
    /// (an inode unlinked meanwhile is then freed by the next operation).
    pub(crate) fn forget(&self, ino: INodeNo, n: u64) {
        let Ok(i) = ino32(ino) else { return };
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = known.get_mut(&i) {
            *c = c.saturating_sub(n);
            if *c == 0 {
                known.remove(&i);
                drop(known);
                if let Err(e) = self.fs.release_now(i) {
                    errno(&e); // logged: FORGET has no reply to carry it
                }
            }
        }
    }

    /// The session ended: the kernel knows nothing any more (it sends no FORGET at unmount),
    /// so every hold goes, and the engine's unmount frees what was unlinked.
    pub fn forget_all(&self) {
        let known = std::mem::take(&mut *self.known.lock().unwrap_or_else(|e| e.into_inner()));
        for (ino, _) in known {
            self.fs.release(ino);
        }
    }

    /// Inodes the kernel knows (`fuse_known_inodes` in the counters file).
    fn known_count(&self) -> usize {
        self.known.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// fsync and fsyncdir: reply once the commit covering `ino` is durable (the counters file
    /// has nothing to sync).
    fn sync_reply(&self, ino: INodeNo, datasync: bool, reply: impl Reply) {
        match ino32(ino) {
            Ok(i) => self.sync_then(i, datasync, move |r| match r {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            }),
            Err(_) => reply.ok(),
        }
    }

    /// Replies once the commit covering `ino` is durable: this request thread runs the commit
    /// when none is running (and answers its group), otherwise the reply is sent by whichever
    /// thread completes it (the engine's leader.rs and sync.rs).
    fn sync_then(&self, ino: u32, datasync: bool, reply: impl FnOnce(Result<(), FsError>) + Send + 'static) {
        self.fs.fsync_or_lead(ino, datasync, Box::new(reply));
    }
}

/// The operations, answering through any transport's `Reply`.
impl OkeanosFuse {
    pub(crate) fn lookup(&self, parent: INodeNo, name: &OsStr, reply: impl Reply) {
        if let Some(v) = Self::virtual_ino(name).filter(|_| u64::from(parent) == 1) {
            return reply.entry(Duration::ZERO, &self.stats_attr(v), 0);
        }
        match ino32(parent) {
            Ok(p) => self.entry(self.fs.lookup(p, name.as_bytes()), reply),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn getattr(&self, ino: INodeNo, reply: impl Reply) {
        if matches!(u64::from(ino), STATS_INO | METRICS_INO | CHECKPOINT_INO) {
            return reply.attr(Duration::ZERO, &self.stats_attr(u64::from(ino)));
        }
        match ino32(ino).map(|i| self.fs.getattr(i)) {
            Ok(Ok(a)) => reply.attr(TTL, &file_attr(&a)),
            Ok(Err(e)) => reply.error(errno(&e)),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn setattr(&self, ino: INodeNo, ch: AttrChange, reply: impl Reply) {
        let AttrChange { mode, uid, gid, size, atime, mtime } = ch;
        let Ok(i) = ino32(ino) else { return reply.error(Errno::from_i32(libc::EPERM)) };
        let t = |x: TimeOrNow| match x {
            TimeOrNow::SpecificTime(t) => wall_ns(t),
            TimeOrNow::Now => wall_ns(SystemTime::now()),
        };
        let r = (|| {
            if let Some(s) = size {
                self.fs.truncate(i, s)?;
            }
            let set = SetAttr { mode, uid, gid, atime_ns: atime.map(t), mtime_ns: mtime.map(t) };
            if mode.is_some() || uid.is_some() || gid.is_some() || atime.is_some() || mtime.is_some() {
                self.fs.setattr(i, &set)
            } else {
                self.fs.getattr(i)
            }
        })();
        match r {
            Ok(a) => reply.attr(TTL, &file_attr(&a)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    pub(crate) fn readlink(&self, ino: INodeNo, reply: impl Reply) {
        match ino32(ino).map(|i| self.fs.readlink(i)) {
            Ok(Ok(t)) => reply.data(&t),
            Ok(Err(e)) => reply.error(errno(&e)),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn mknod(&self, caller: okeanos::Owner, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, rdev: u32, reply: impl Reply) {
        if name.len() > okeanos::format::dir::MAX_NAME {
            return reply.error(Errno::from_i32(libc::ENAMETOOLONG));
        }
        let special = match mode & libc::S_IFMT {
            libc::S_IFREG | 0 => None,
            libc::S_IFIFO => Some(Kind::Fifo),
            libc::S_IFCHR => Some(Kind::CharDevice),
            libc::S_IFBLK => Some(Kind::BlockDevice),
            libc::S_IFSOCK => Some(Kind::Socket),
            _ => return reply.error(Errno::from_i32(libc::EINVAL)),
        };
        match ino32(parent) {
            Ok(p) => {
                let perm = self.perm(p, mode, umask);
                match special {
                    None => self.entry(self.fs.create_as(p, name.as_bytes(), perm, caller), reply),
                    Some(k) => self.entry(self.fs.mknod_as(p, name.as_bytes(), k, perm, rdev, caller), reply),
                }
            }
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn mkdir(&self, caller: okeanos::Owner, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: impl Reply) {
        match ino32(parent) {
            Ok(p) => self.entry(self.fs.mkdir_as(p, name.as_bytes(), self.perm(p, mode, umask), caller), reply),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn unlink(&self, parent: INodeNo, name: &OsStr, reply: impl Reply) {
        match ino32(parent).map(|p| self.fs.unlink(p, name.as_bytes())) {
            Ok(Ok(())) => reply.ok(),
            Ok(Err(e)) => reply.error(errno(&e)),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn rmdir(&self, parent: INodeNo, name: &OsStr, reply: impl Reply) {
        match ino32(parent).map(|p| self.fs.rmdir(p, name.as_bytes())) {
            Ok(Ok(())) => reply.ok(),
            Ok(Err(e)) => reply.error(errno(&e)),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn symlink(&self, caller: okeanos::Owner, parent: INodeNo, link_name: &OsStr, target: &Path, reply: impl Reply) {
        match ino32(parent) {
            Ok(p) => self.entry(self.fs.symlink_as(p, link_name.as_bytes(), target.as_os_str().as_bytes(), caller), reply),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn rename(&self, parent: INodeNo, name: &OsStr, newparent: INodeNo, newname: &OsStr, flags: RenameFlags, reply: impl Reply) {
        let how = flags.bits();
        if ![0, libc::RENAME_NOREPLACE, libc::RENAME_EXCHANGE].contains(&how) {
            // RENAME_WHITEOUT (overlayfs' own) is not offered.
            return reply.error(Errno::from_i32(libc::EINVAL));
        }
        let r = ino32(parent).and_then(|p| ino32(newparent).map(|q| (p, q)));
        let (n, m) = (name.as_bytes(), newname.as_bytes());
        match r.map(|(p, q)| match how {
            libc::RENAME_NOREPLACE => self.fs.rename_noreplace(p, n, q, m),
            libc::RENAME_EXCHANGE => self.fs.rename_exchange(p, n, q, m),
            _ => self.fs.rename(p, n, q, m),
        }) {
            Ok(Ok(())) => reply.ok(),
            Ok(Err(e)) => reply.error(errno(&e)),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn link(&self, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: impl Reply) {
        match ino32(ino).and_then(|i| ino32(newparent).map(|p| (i, p))) {
            Ok((i, p)) => self.entry(self.fs.link(i, p, newname.as_bytes()), reply),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn open(&self, ino: INodeNo, flags: OpenFlags, reply: impl Reply) {
        if let Some(text) = self.virtual_file(u64::from(ino)) {
            let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
            self.snapshots.lock().unwrap_or_else(|e| e.into_inner()).insert(fh, text);
            return reply.opened(fh, FopenFlags::FOPEN_DIRECT_IO);
        }
        if u64::from(ino) == CHECKPOINT_INO {
            // The checkpoint runs here, in this request's thread; other requests go on.
            return match self.fs.checkpoint() {
                Ok(c) => {
                    let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
                    let mut text = serde_json::to_vec_pretty(&c).unwrap_or_default();
                    text.push(b'\n');
                    self.snapshots.lock().unwrap_or_else(|e| e.into_inner()).insert(fh, text);
                    reply.opened(fh, FopenFlags::FOPEN_DIRECT_IO)
                }
                Err(e) => reply.error(errno(&e)),
            };
        }
        let Ok(i) = ino32(ino) else { return reply.error(Errno::from_i32(libc::ENOENT)) };
        match self.fs.open_ino(i) {
            Ok(a) => {
                let how = match self.reads.open(i, flags.0).filter(|_| a.kind == Kind::Regular && !self.page_cache.load(Ordering::Relaxed)) {
                    Some(true) => FopenFlags::FOPEN_KEEP_CACHE,
                    Some(false) => FopenFlags::empty(),
                    None => self.open_flags(&a),
                };
                reply.opened(self.add_handle(i, flags.0), how)
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    pub(crate) fn read(&self, ino: INodeNo, fh: FileHandle, offset: u64, size: u32, reply: impl Reply) {
        if matches!(u64::from(ino), STATS_INO | METRICS_INO | CHECKPOINT_INO) {
            let snaps = self.snapshots.lock().unwrap_or_else(|e| e.into_inner());
            let text = snaps.get(&u64::from(fh)).map_or(&[][..], Vec::as_slice);
            let from = (offset as usize).min(text.len());
            let to = (from + size as usize).min(text.len());
            return reply.data(&text[from..to]);
        }
        self.read_requests.fetch_add(1, Ordering::Relaxed);
        let waits = DeviceWaits { spares: &self.spares, delay_ms: self.reads.hooks.read_delay_ms };
        match ino32(ino).map(|i| self.fs.read_telling(i, offset, size as usize, &waits)) {
            Ok(Ok(d)) => reply.data(&d),
            Ok(Err(e)) => reply.error(errno(&e)),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn write(
        &self,
        caller: okeanos::Owner,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        reply: impl Reply,
    ) {
        let Ok(i) = ino32(ino) else { return reply.error(Errno::from_i32(libc::EBADF)) };
        // As the kernel's file_remove_privs for its own file systems (a direct-I/O write on
        // FUSE does not): a write by anyone but root clears setuid, and setgid when the group
        // may execute, before the data changes.
        if caller.uid != 0 {
            if let Ok(a) = self.fs.getattr(i) {
                let kill = a.perm & 0o4000 != 0 || a.perm & 0o2010 == 0o2010;
                if kill {
                    let mode = a.perm & !(0o4000 | if a.perm & 0o010 != 0 { 0o2000 } else { 0 });
                    if let Err(e) = self.fs.setattr(i, &SetAttr { mode: Some(mode), ..Default::default() }) {
                        return reply.error(errno(&e));
                    }
                }
            }
        }
        let sync = self.handles.lock().unwrap_or_else(|e| e.into_inner()).get(&u64::from(fh)).map_or(SyncMode::None, |h| h.sync);
        self.reads.before_write();
        // A write-back of pages from the kernel's cache (mmap): the cache holds these bytes
        // already, and invalidating would wait for the very write-back being served.
        let direct = !write_flags.contains(WriteFlags::FUSE_WRITE_CACHE);
        let n = match self.fs.write(i, offset, data) {
            Ok(n) => n,
            Err(e) => return reply.error(errno(&e)),
        };
        // The answer: at once, or once durable for an O_SYNC or O_DSYNC open.
        let answer: crate::read_cache::Then = match sync {
            SyncMode::None => Box::new(move || reply.written(n as u32)),
            SyncMode::Data | SyncMode::Full => {
                let fs = self.fs.clone();
                Box::new(move || {
                    fs.fsync_or_lead(
                        i,
                        sync == SyncMode::Data,
                        Box::new(move |r| match r {
                            Ok(()) => reply.written(n as u32),
                            Err(e) => reply.error(errno(&e)),
                        }),
                    )
                })
            }
        };
        // A direct write drops the kernel's cached pages of the range first (reads through
        // the page cache must not see the old bytes).
        if direct {
            self.reads.changed(i, offset, n as u64, answer)
        } else {
            answer()
        }
    }

    pub(crate) fn flush(&self, reply: impl Reply) {
        // close() does not promise durability; the data is in the engine already.
        reply.ok();
    }

    pub(crate) fn release(&self, fh: FileHandle, reply: impl Reply) {
        self.snapshots.lock().unwrap_or_else(|e| e.into_inner()).remove(&u64::from(fh));
        let handle = self.handles.lock().unwrap_or_else(|e| e.into_inner()).remove(&u64::from(fh));
        reply.ok();
        if let Some(h) = handle {
            // After the reply: close(2) does not wait for the blocks of an unlinked file.
            if let Err(e) = self.fs.release_now(h.ino) {
                errno(&e);
            }
        }
    }

    pub(crate) fn fsync(&self, ino: INodeNo, datasync: bool, reply: impl Reply) {
        self.sync_reply(ino, datasync, reply);
    }

    pub(crate) fn opendir(&self, ino: INodeNo, reply: impl Reply) {
        match ino32(ino).map(|i| self.fs.getattr(i)) {
            Ok(Ok(a)) if a.kind == Kind::Directory => reply.opened(0, FopenFlags::empty()),
            Ok(Ok(_)) => reply.error(Errno::from_i32(libc::ENOTDIR)),
            Ok(Err(e)) => reply.error(errno(&e)),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn readdir(&self, ino: INodeNo, offset: u64, mut reply: impl Reply) {
        let Ok(i) = ino32(ino) else { return reply.error(Errno::from_i32(libc::ENOENT)) };
        let (attr, entries) = match (self.fs.getattr(i), self.fs.readdir(i)) {
            (Ok(a), Ok(e)) => (a, e),
            (Err(e), _) | (_, Err(e)) => return reply.error(errno(&e)),
        };
        let parent = if attr.parent == 0 { i } else { attr.parent };
        let mut all: Vec<(u64, FileType, Vec<u8>)> = vec![(i as u64, FileType::Directory, b".".to_vec()), (parent as u64, FileType::Directory, b"..".to_vec())];
        all.extend(entries.into_iter().map(|e| (e.ino as u64, kind(e.kind), e.name)));
        for (k, (ino, t, name)) in all.into_iter().enumerate().skip(offset as usize) {
            if reply.dir_entry(ino, k as u64 + 1, t, &name) {
                break;
            }
        }
        reply.ok();
    }

    pub(crate) fn fsyncdir(&self, ino: INodeNo, datasync: bool, reply: impl Reply) {
        self.sync_reply(ino, datasync, reply);
    }

    pub(crate) fn statfs(&self, reply: impl Reply) {
        let s = self.fs.statfs();
        reply.statfs(&s);
    }

    /// fallocate: mode 0 (what posix_fallocate asks for: allocate, zero-fill holes, extend),
    /// FALLOC_FL_KEEP_SIZE (allocate without extending), PUNCH_HOLE (with KEEP_SIZE, as Linux
    /// requires: free the range's blocks) and ZERO_RANGE (with or without KEEP_SIZE). The
    /// others (COLLAPSE_RANGE, INSERT_RANGE, UNSHARE_RANGE) are EOPNOTSUPP, so programs fall back.
    pub(crate) fn fallocate(&self, ino: INodeNo, offset: u64, length: u64, mode: i32, reply: impl Reply) {
        const KEEP: i32 = libc::FALLOC_FL_KEEP_SIZE;
        const PUNCH: i32 = libc::FALLOC_FL_PUNCH_HOLE;
        const ZERO: i32 = libc::FALLOC_FL_ZERO_RANGE;
        let r = ino32(ino).map(|i| match mode {
            0 => self.fs.fallocate(i, offset, length, false),
            KEEP => self.fs.fallocate(i, offset, length, true),
            m if m == PUNCH | KEEP => self.fs.punch_hole(i, offset, length),
            ZERO => self.fs.zero_range(i, offset, length, false),
            m if m == ZERO | KEEP => self.fs.zero_range(i, offset, length, true),
            _ => Err(FsError::Unsupported),
        });
        match r {
            Ok(Ok(())) => reply.ok(),
            Ok(Err(e)) => reply.error(errno(&e)),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn setxattr(&self, ino: INodeNo, name: &OsStr, value: &[u8], flags: i32, reply: impl Reply) {
        use okeanos::fs::xattr::SetMode;
        let mode = match flags {
            0 => SetMode::Any,
            libc::XATTR_CREATE => SetMode::Create,
            libc::XATTR_REPLACE => SetMode::Replace,
            _ => return reply.error(Errno::from_i32(libc::EINVAL)),
        };
        match ino32(ino).map(|i| self.fs.setxattr(i, name.as_bytes(), value, mode)) {
            Ok(Ok(())) => reply.ok(),
            Ok(Err(e)) => reply.error(errno(&e)),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn getxattr(&self, ino: INodeNo, name: &OsStr, size: u32, reply: impl Reply) {
        match ino32(ino).map(|i| self.fs.getxattr(i, name.as_bytes())) {
            Ok(Ok(v)) => xattr_reply(&v, size, reply),
            Ok(Err(e)) => reply.error(errno(&e)),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn listxattr(&self, ino: INodeNo, size: u32, reply: impl Reply) {
        match ino32(ino).map(|i| self.fs.listxattr(i)) {
            Ok(Ok(names)) => {
                let mut list = Vec::new();
                for n in names {
                    list.extend_from_slice(&n);
                    list.push(0);
                }
                xattr_reply(&list, size, reply)
            }
            Ok(Err(e)) => reply.error(errno(&e)),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn removexattr(&self, ino: INodeNo, name: &OsStr, reply: impl Reply) {
        match ino32(ino).map(|i| self.fs.removexattr(i, name.as_bytes())) {
            Ok(Ok(())) => reply.ok(),
            Ok(Err(e)) => reply.error(errno(&e)),
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn create(&self, caller: okeanos::Owner, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, flags: i32, reply: impl Reply) {
        if mode & libc::S_IFMT != libc::S_IFREG && mode & libc::S_IFMT != 0 {
            return reply.error(Errno::from_i32(libc::ENOTSUP));
        }
        let Ok(p) = ino32(parent) else { return reply.error(Errno::from_i32(libc::ENOENT)) };
        // Opened, then remembered: a remember that fails gives the open back, and the kernel,
        // told of an error, holds nothing.
        let r = self.fs.create_as(p, name.as_bytes(), self.perm(p, mode, umask), caller).and_then(|a| self.fs.open_ino(a.ino)).and_then(|a| {
            let ino = a.ino;
            self.remember(ino).map(|()| a).inspect_err(|_| self.fs.release(ino))
        });
        match r {
            Ok(a) => {
                let fh = self.add_handle(a.ino, flags);
                reply.created(TTL, &file_attr(&a), a.generation as u64, fh, self.open_flags(&a))
            }
            Err(e) => reply.error(errno(&e)),
        }
    }
}

//! A null FUSE file system: the kernel's own floor for the requests a program on an Okeanos
//! mount makes (issue 32, docs/BENCHMARKS.md "The FUSE floor"). It keeps a flat directory of
//! files in memory with their sizes only, discards every byte written, reads zeros, and
//! answers fsync at once. It is served exactly as the Okeanos mount is served (the same fuser
//! version, thread count, INIT flags, max_write and direct I/O on regular files), so that the
//! difference between the two is the engine and the daemon's hand-offs, not the transport.
//!
//!     cargo run --release --example null_fuse -- MOUNTPOINT [THREADS] [--keep]   # root, or user_allow_other
//!     fusermount3 -u MOUNTPOINT                                                 # ends it
//!
//! Not a file system to keep anything in: nothing is stored, except with `--keep`, which
//! keeps every file's bytes in memory (reads return them) so that a program that reads back
//! what it wrote (a database) runs on it: the floor of that program over FUSE, with no
//! journal, no device and fsync answered at once.
//!
//! With `--log DEVICE` (and `--keep`) it is the floor of a *durable* file system over FUSE:
//! every write's bytes, behind a 16-byte header, go to an in-memory log, and an fsync is
//! answered once the log up to it is on DEVICE, written with O_DIRECT and flushed. Syncs
//! group-commit as the Okeanos mount's do: the first sync that finds no flush running writes
//! everything logged so far in one write (padded to 4 KiB), flushes, answers every sync that
//! waited for it, and goes on while syncs keep arriving (the write-group leader,
//! crates/okeanos/src/engine/leader.rs; with `--flusher`, a thread of its own does, as the
//! journal thread does without a leader). That is the least any design that makes a sync
//! durable must do on the device: each byte once, one write and one flush per group. The log
//! is never read back, checkpointed or recovered (it wraps at DEVICE's end), so its rate is
//! a bound, not a file system.

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags, KernelConfig, LockOwner, MountOption, OpenFlags,
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

const TTL: Duration = Duration::from_secs(1);
const ROOT: u64 = 1;

#[derive(Default)]
struct Files {
    /// Name to inode, and inode to size (the root directory holds every file).
    names: HashMap<OsString, u64>,
    sizes: HashMap<u64, u64>,
    next: u64,
    /// With `--keep`: each file's bytes (as long as its size).
    bytes: HashMap<u64, Vec<u8>>,
}

struct NullFs {
    files: Mutex<Files>,
    keep: bool,
    /// With `--log`: where syncs make the log durable.
    log: Option<std::sync::Arc<Log>>,
}

/// The durable floor's log (`--log`): what writes appended since the last flush, and the
/// syncs waiting for the next.
struct Log {
    dev: std::fs::File,
    /// The device's size, where the log wraps to its start.
    size: u64,
    state: Mutex<LogState>,
    /// With `--flusher`: a thread of its own writes and flushes each group (woken by the
    /// first sync that waits), instead of the sync's request thread.
    flusher: bool,
    wake: std::sync::Condvar,
}

#[derive(Default)]
struct LogState {
    /// Headers and bytes appended since the last group was taken.
    pending: Vec<u8>,
    /// Syncs waiting for the next group's flush.
    waiting: Vec<ReplyEmpty>,
    /// A sync is writing and flushing a group now (the leader).
    leading: bool,
    /// Where the next group is written.
    head: u64,
    /// Groups and bytes written, for the line printed at unmount.
    groups: u64,
    written: u64,
    syncs: u64,
}

/// A block-aligned buffer for O_DIRECT writes.
struct Aligned {
    ptr: *mut u8,
    len: usize,
}

impl Aligned {
    const ALIGN: usize = 4096;
    fn copy_of(bytes: &[u8]) -> Aligned {
        let len = bytes.len().div_ceil(Self::ALIGN).max(1) * Self::ALIGN;
        let layout = std::alloc::Layout::from_size_align(len, Self::ALIGN).expect("a valid layout");
        // SAFETY: the layout has a non-zero size; the memory is zeroed, then the bytes copied in.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory");
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, bytes.len()) };
        Aligned { ptr, len }
    }
    fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` holds `len` initialised bytes, owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated in `copy_of` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, std::alloc::Layout::from_size_align_unchecked(self.len, Self::ALIGN)) }
    }
}

impl Log {
    fn open(path: &str, flusher: bool) -> std::io::Result<Log> {
        use std::io::{Seek, SeekFrom};
        use std::os::unix::fs::OpenOptionsExt;
        let mut dev = std::fs::OpenOptions::new().read(true).write(true).custom_flags(libc::O_DIRECT).open(path)?;
        let size = dev.seek(SeekFrom::End(0))? / Aligned::ALIGN as u64 * Aligned::ALIGN as u64;
        if size < 1 << 20 {
            return Err(std::io::Error::other(format!("{path}: {size} bytes; the log needs at least 1 MiB")));
        }
        Ok(Log { dev, size, state: Mutex::new(LogState::default()), flusher, wake: std::sync::Condvar::new() })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Logs a write: a header (inode, offset, length) and its bytes.
    fn append(&self, ino: u64, offset: u64, data: &[u8]) {
        let mut st = self.lock();
        st.pending.extend_from_slice(&(ino as u32).to_le_bytes());
        st.pending.extend_from_slice(&offset.to_le_bytes());
        st.pending.extend_from_slice(&(data.len() as u32).to_le_bytes());
        st.pending.extend_from_slice(data);
    }

    /// Answers `reply` once everything logged before it is durable.
    fn sync(&self, reply: ReplyEmpty) {
        let mut st = self.lock();
        st.syncs += 1;
        if st.pending.is_empty() && !st.leading {
            drop(st);
            return reply.ok();
        }
        st.waiting.push(reply);
        if self.flusher {
            if st.waiting.len() == 1 {
                self.wake.notify_one();
            }
            return;
        }
        if st.leading {
            return;
        }
        st.leading = true;
        drop(self.groups(st));
    }

    /// The flusher thread (`--flusher`): groups as they are asked for, until the process ends.
    fn flush_forever(&self) {
        let mut st = self.lock();
        loop {
            while st.waiting.is_empty() {
                st = self.wake.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            st.leading = true;
            st = self.groups(st);
        }
    }

    /// Writes and flushes groups while syncs wait for one: each round writes what was logged
    /// before its syncs asked. Returns with no sync waiting and `leading` cleared.
    fn groups<'a>(&'a self, mut st: std::sync::MutexGuard<'a, LogState>) -> std::sync::MutexGuard<'a, LogState> {
        while !st.waiting.is_empty() {
            let group = std::mem::take(&mut st.pending);
            let answers = std::mem::take(&mut st.waiting);
            let buf = Aligned::copy_of(&group);
            let mut at = st.head;
            if at + buf.len as u64 > self.size {
                at = 0;
            }
            st.head = (at + buf.len as u64) % self.size;
            st.groups += 1;
            st.written += buf.len as u64;
            drop(st);
            let res = self.write_and_flush(buf.bytes(), at);
            for r in answers {
                match &res {
                    Ok(()) => r.ok(),
                    Err(e) => r.error(Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))),
                }
            }
            st = self.lock();
        }
        st.leading = false;
        st
    }

    fn write_and_flush(&self, bytes: &[u8], at: u64) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.dev.write_all_at(bytes, at)?;
        self.dev.sync_data()
    }
}

fn attr(ino: u64, size: u64) -> FileAttr {
    let now = SystemTime::now();
    let dir = ino == ROOT;
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: size.div_ceil(512),
        atime: now,
        mtime: now,
        ctime: now,
        crtime: now,
        kind: if dir { FileType::Directory } else { FileType::RegularFile },
        perm: if dir { 0o777 } else { 0o666 },
        nlink: if dir { 2 } else { 1 },
        uid: 0,
        gid: 0,
        rdev: 0,
        flags: 0,
        blksize: 4096,
    }
}

fn enoent() -> Errno {
    Errno::from_i32(libc::ENOENT)
}

impl NullFs {
    fn size(&self, ino: u64) -> Option<u64> {
        if ino == ROOT {
            return Some(0);
        }
        self.files.lock().unwrap_or_else(|e| e.into_inner()).sizes.get(&ino).copied()
    }
}

impl Filesystem for NullFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // What the Okeanos front end asks for (crates/okeanos-cli/src/fuse.rs, `init`).
        let _ = config.add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP);
        let _ = config.add_capabilities(InitFlags::FUSE_MAX_PAGES);
        let _ = config.set_max_write(1 << 20);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let f = self.files.lock().unwrap_or_else(|e| e.into_inner());
        match (u64::from(parent), f.names.get(name)) {
            (ROOT, Some(&ino)) => reply.entry(&TTL, &attr(ino, f.sizes[&ino]), Generation(0)),
            _ => reply.error(enoent()),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.size(u64::from(ino)) {
            Some(s) => reply.attr(&TTL, &attr(u64::from(ino), s)),
            None => reply.error(enoent()),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let ino = u64::from(ino);
        let mut f = self.files.lock().unwrap_or_else(|e| e.into_inner());
        if let (Some(s), Some(cur)) = (size, f.sizes.get_mut(&ino)) {
            *cur = s;
            if self.keep {
                f.bytes.entry(ino).or_default().resize(s as usize, 0);
            }
        }
        let s = if ino == ROOT { Some(0) } else { f.sizes.get(&ino).copied() };
        match s {
            Some(s) => reply.attr(&TTL, &attr(ino, s)),
            None => reply.error(enoent()),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.size(u64::from(ino)) {
            Some(_) => reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO),
            None => reply.error(enoent()),
        }
    }

    fn create(&self, _req: &Request, parent: INodeNo, name: &OsStr, _mode: u32, _umask: u32, _flags: i32, reply: ReplyCreate) {
        if u64::from(parent) != ROOT {
            return reply.error(enoent());
        }
        let mut f = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let ino = match f.names.get(name) {
            Some(&i) => i,
            None => {
                f.next = f.next.max(ROOT) + 1;
                let i = f.next;
                f.names.insert(name.to_owned(), i);
                f.sizes.insert(i, 0);
                i
            }
        };
        reply.created(&TTL, &attr(ino, f.sizes[&ino]), Generation(0), FileHandle(0), FopenFlags::FOPEN_DIRECT_IO)
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let ino = u64::from(ino);
        let mut f = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let Some(s) = f.sizes.get_mut(&ino) else { return reply.error(enoent()) };
        let end = offset + data.len() as u64;
        *s = (*s).max(end);
        let size = *s;
        if self.keep {
            let b = f.bytes.entry(ino).or_default();
            b.resize(size as usize, 0);
            b[offset as usize..end as usize].copy_from_slice(data);
        }
        drop(f);
        if let Some(log) = &self.log {
            log.append(ino, offset, data);
        }
        reply.written(data.len() as u32)
    }

    fn read(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, size: u32, _flags: OpenFlags, _lock: Option<LockOwner>, reply: ReplyData) {
        let ino = u64::from(ino);
        let f = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let Some(&s) = f.sizes.get(&ino) else { return reply.error(enoent()) };
        let n = s.saturating_sub(offset).min(size as u64) as usize;
        match f.bytes.get(&ino).filter(|_| self.keep && n > 0) {
            Some(b) => reply.data(&b[offset as usize..offset as usize + n]),
            None => reply.data(&vec![0u8; n]),
        }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock: LockOwner, reply: ReplyEmpty) {
        reply.ok();
    }

    fn release(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _flags: OpenFlags, _lock: Option<LockOwner>, _flush: bool, reply: ReplyEmpty) {
        reply.ok();
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        match &self.log {
            Some(log) => log.sync(reply),
            None => reply.ok(),
        }
    }

    fn destroy(&mut self) {
        if let Some(log) = &self.log {
            let st = log.lock();
            eprintln!("null_fuse: {} syncs, {} groups ({:.1} syncs a group), {} bytes written to the log", st.syncs, st.groups, st.syncs as f64 / st.groups.max(1) as f64, st.written);
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut f = self.files.lock().unwrap_or_else(|e| e.into_inner());
        match (u64::from(parent), f.names.remove(name)) {
            (ROOT, Some(ino)) => {
                f.sizes.remove(&ino);
                f.bytes.remove(&ino);
                reply.ok()
            }
            _ => reply.error(enoent()),
        }
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        if u64::from(ino) != ROOT {
            return reply.error(enoent());
        }
        let f = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let mut entries: Vec<(u64, FileType, OsString)> = vec![(ROOT, FileType::Directory, ".".into()), (ROOT, FileType::Directory, "..".into())];
        let mut names: Vec<_> = f.names.iter().collect();
        names.sort();
        entries.extend(names.into_iter().map(|(n, &i)| (i, FileType::RegularFile, n.clone())));
        for (k, (i, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(i), (k + 1) as u64, kind, &name) {
                break;
            }
        }
        reply.ok()
    }
}

fn main() -> std::process::ExitCode {
    let usage = "usage: null_fuse MOUNTPOINT [THREADS] [--keep [--log DEVICE [--flusher]]]";
    let mut all: Vec<String> = std::env::args().skip(1).collect();
    let keep = all.iter().any(|a| a == "--keep");
    let flusher = all.iter().any(|a| a == "--flusher");
    all.retain(|a| a != "--flusher");
    let log = match all.iter().position(|a| a == "--log") {
        None => None,
        Some(i) if i + 1 < all.len() && keep => {
            let path = all.remove(i + 1);
            all.remove(i);
            match Log::open(&path, flusher) {
                Ok(l) => Some(std::sync::Arc::new(l)),
                Err(e) => {
                    eprintln!("null_fuse: --log {path}: {e}");
                    return std::process::ExitCode::FAILURE;
                }
            }
        }
        Some(_) => {
            eprintln!("{usage} (--log needs a device, and --keep)");
            return std::process::ExitCode::from(2);
        }
    };
    let mut args = all.into_iter().filter(|a| a != "--keep");
    let Some(mnt) = args.next() else {
        eprintln!("{usage}");
        return std::process::ExitCode::from(2);
    };
    // The Okeanos mount's default request threads over /dev/fuse (one per CPU, at least two:
    // `default_request_threads` in crates/okeanos-cli/src/mount.rs).
    let threads = match args.next().map(|t| t.parse::<usize>()) {
        None => std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 64),
        Some(Ok(t)) if t > 0 => t,
        Some(_) => {
            eprintln!("null_fuse: THREADS is a positive number");
            return std::process::ExitCode::from(2);
        }
    };
    let mut config = Config::default();
    config.mount_options = vec![MountOption::FSName("null".into()), MountOption::Subtype("null".into())];
    config.acl = fuser::SessionACL::All;
    config.n_threads = Some(threads);
    if let Some(l) = log.as_ref().filter(|l| l.flusher) {
        let l = l.clone();
        std::thread::spawn(move || l.flush_forever());
    }
    let fs = NullFs { files: Mutex::new(Files::default()), keep, log };
    match fuser::mount(fs, &mnt, &config) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("null_fuse: mounting {mnt}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

//! A null FUSE file system: the kernel's own floor for the requests a program on an Okeanos
//! mount makes (issue 32, docs/BENCHMARKS.md "The FUSE floor"). It keeps a tree of files and
//! directories in memory with their sizes, modes and owners only, discards every byte
//! written, reads zeros, and
//! answers fsync at once. It is served exactly as the Okeanos mount is served (the same fuser
//! version, thread count, INIT flags, max_write and direct I/O on regular files), so that the
//! difference between the two is the engine and the daemon's hand-offs, not the transport.
//!
//!     cargo run --release --example null_fuse -- MOUNTPOINT [THREADS] [--page-cache] [--keep [--log DEVICE [--flusher]]]   # root, or user_allow_other
//!     fusermount3 -u MOUNTPOINT                                                 # ends it
//!
//! Not a file system to keep anything in: nothing is stored, except with `--keep`, which
//! keeps every file's bytes in memory (reads return them) so that a program that reads back
//! what it wrote (a database) runs on it: the floor of that program over FUSE, with no
//! journal, no device and fsync answered at once.
//!
//! With `--log DEVICE` (and `--keep`) it is the floor of a *durable* file system over FUSE:
//! every write's bytes, behind a 16-byte header, are logged in memory by file, and an fsync
//! is answered once its file's logged bytes are on DEVICE, written with O_DIRECT and flushed.
//! Syncs group-commit as the Okeanos mount's do: the first sync that finds no flush running
//! writes the bytes of every file a sync waits for in one write (padded to 4 KiB), flushes,
//! answers those syncs, and goes on while syncs keep arriving (the write-group leader,
//! crates/okeanos/src/engine/leader.rs; with `--flusher`, a thread of its own does, as the
//! journal thread does without a leader). Bytes of files nobody syncs are written (not
//! flushed) once 32 MiB wait, as a kernel's write-back would. That is the least any design
//! that makes a sync durable must do on the device: each byte once, one write and one flush
//! per group. Names and attributes are not logged (fsyncdir answers at once), and the log is
//! never read back, checkpointed or recovered (it wraps at DEVICE's end): its rate is a
//! bound, not a file system. `--page-cache` opens regular files through the kernel's page
//! cache instead of with direct I/O (the mount's `page_cache` option).

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags, KernelConfig, LockOwner, MountOption, OpenFlags,
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use okeanos::Device;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

const TTL: Duration = Duration::from_secs(1);
const ROOT: u64 = 1;

/// One file or directory: its attributes, and a file's bytes (with `--keep`) or a
/// directory's entries.
struct Node {
    dir: bool,
    perm: u16,
    uid: u32,
    gid: u32,
    size: u64,
    bytes: Vec<u8>,
    entries: std::collections::BTreeMap<OsString, u64>,
}

impl Node {
    fn new(dir: bool, perm: u32, uid: u32, gid: u32) -> Node {
        Node { dir, perm: (perm & 0o7777) as u16, uid, gid, size: 0, bytes: Vec::new(), entries: Default::default() }
    }
}

/// Every node by inode number (the root is 1).
struct Files {
    nodes: HashMap<u64, Node>,
    next: u64,
}

impl Default for Files {
    fn default() -> Files {
        let mut nodes = HashMap::new();
        nodes.insert(ROOT, Node::new(true, 0o777, 0, 0));
        Files { nodes, next: ROOT }
    }
}

impl Files {
    fn child(&self, parent: u64, name: &OsStr) -> Option<u64> {
        self.nodes.get(&parent).and_then(|d| d.entries.get(name).copied())
    }

    fn attr(&self, ino: u64) -> Option<FileAttr> {
        self.nodes.get(&ino).map(|n| attr(ino, n))
    }

    /// Makes a node in directory `parent` (ENOENT without it, EEXIST when taken).
    fn make(&mut self, parent: u64, name: &OsStr, node: Node) -> Result<u64, Errno> {
        match self.nodes.get(&parent) {
            Some(d) if d.dir => {
                if d.entries.contains_key(name) {
                    return Err(Errno::from_i32(libc::EEXIST));
                }
            }
            Some(_) => return Err(Errno::from_i32(libc::ENOTDIR)),
            None => return Err(enoent()),
        }
        self.next += 1;
        let ino = self.next;
        self.nodes.insert(ino, node);
        self.nodes.get_mut(&parent).expect("checked above").entries.insert(name.to_owned(), ino);
        Ok(ino)
    }

    /// Removes `name` from `parent`: a file, or an empty directory when `dir`.
    fn remove(&mut self, parent: u64, name: &OsStr, dir: bool) -> Result<(), Errno> {
        let ino = self.child(parent, name).ok_or_else(enoent)?;
        let n = &self.nodes[&ino];
        if n.dir != dir {
            return Err(Errno::from_i32(if dir { libc::ENOTDIR } else { libc::EISDIR }));
        }
        if dir && !n.entries.is_empty() {
            return Err(Errno::from_i32(libc::ENOTEMPTY));
        }
        self.nodes.get_mut(&parent).expect("looked up above").entries.remove(name);
        self.nodes.remove(&ino);
        Ok(())
    }
}

struct NullFs {
    files: Mutex<Files>,
    keep: bool,
    /// How regular files are opened: direct I/O as the mount's are, or with `--page-cache`
    /// through the kernel's page cache (FOPEN_KEEP_CACHE), as the mount's `page_cache` option.
    open_flags: FopenFlags,
    /// With `--log`: where syncs make the log durable.
    log: Option<std::sync::Arc<Log>>,
}

/// The durable floor's log (`--log`): what each file's writes appended since they were last
/// written to the device, and the syncs waiting for the next group.
struct Log {
    dev: okeanos::FileDevice,
    /// The device's size, where the log wraps to its start.
    size: u64,
    state: Mutex<LogState>,
    /// With `--flusher`: a thread of its own writes and flushes each group (woken by the
    /// first sync that waits), instead of the sync's request thread.
    flusher: bool,
    wake: std::sync::Condvar,
}

/// Bytes logged and not yet written above which the writer that passes it writes them all
/// (without a flush), as a kernel's write-back would.
const WRITEBACK: usize = 32 << 20;

#[derive(Default)]
struct LogState {
    /// Headers and bytes each file appended that are not on the device yet.
    pending: HashMap<u64, Vec<u8>>,
    pending_bytes: usize,
    /// Files with bytes written to the device by write-back and not flushed since.
    unflushed: std::collections::HashSet<u64>,
    /// Files whose bytes the group in flight makes durable.
    inflight: std::collections::HashSet<u64>,
    /// Syncs waiting for the next group's flush, by file.
    waiting: Vec<(u64, ReplyEmpty)>,
    /// A group is being written and flushed now.
    leading: bool,
    /// Where the next write goes.
    head: u64,
    /// Groups, write-backs and bytes written, for the line printed at unmount.
    groups: u64,
    writebacks: u64,
    written: u64,
    syncs: u64,
}

impl LogState {
    /// Room for `len` bytes on the device: where to write them.
    fn place(&mut self, len: u64, size: u64) -> u64 {
        let at = if self.head + len > size { 0 } else { self.head };
        self.head = (at + len) % size;
        self.written += len;
        at
    }
}

/// The unit the log's writes are padded to (O_DIRECT's alignment).
const LOG_BLOCK: usize = 4096;

/// `bytes` padded with zeros to whole log blocks (at least one).
fn padded(mut bytes: Vec<u8>) -> Vec<u8> {
    bytes.resize(bytes.len().div_ceil(LOG_BLOCK).max(1) * LOG_BLOCK, 0);
    bytes
}

impl Log {
    /// The device opened as the engine opens one (O_DIRECT, locked; `okeanos::FileDevice`).
    fn open(path: &str, flusher: bool) -> Result<Log, String> {
        let dev = okeanos::FileDevice::open_direct(std::path::Path::new(path), true).map_err(|e| e.to_string())?;
        let size = dev.len_bytes() / LOG_BLOCK as u64 * LOG_BLOCK as u64;
        if size < 1 << 20 {
            return Err(format!("{path}: {size} bytes; the log needs at least 1 MiB"));
        }
        Ok(Log { dev, size, state: Mutex::new(LogState::default()), flusher, wake: std::sync::Condvar::new() })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Logs a write: a header (inode, offset, length) and its bytes.
    fn append(&self, ino: u64, offset: u64, data: &[u8]) {
        let mut st = self.lock();
        let p = st.pending.entry(ino).or_default();
        p.extend_from_slice(&(ino as u32).to_le_bytes());
        p.extend_from_slice(&offset.to_le_bytes());
        p.extend_from_slice(&(data.len() as u32).to_le_bytes());
        p.extend_from_slice(data);
        st.pending_bytes += 16 + data.len();
        if st.pending_bytes > WRITEBACK {
            // Write-back of files nobody synced (nor waits for): written, not flushed.
            let waited: std::collections::HashSet<u64> = st.waiting.iter().map(|w| w.0).chain(st.inflight.iter().copied()).collect();
            let inos: Vec<u64> = st.pending.keys().copied().filter(|i| !waited.contains(i)).collect();
            let mut bytes = Vec::new();
            for i in inos {
                bytes.extend(st.pending.remove(&i).unwrap_or_default());
                st.unflushed.insert(i);
            }
            st.pending_bytes -= bytes.len();
            let buf = padded(bytes);
            let at = st.place(buf.len() as u64, self.size);
            st.writebacks += 1;
            if let Err(e) = self.dev.write_at(at, &buf) {
                eprintln!("null_fuse: write-back: {e}");
            }
        }
    }

    /// Answers `reply` once everything file `ino` logged before it is durable.
    fn sync(&self, ino: u64, reply: ReplyEmpty) {
        let mut st = self.lock();
        st.syncs += 1;
        if !st.pending.contains_key(&ino) && !st.inflight.contains(&ino) && !st.unflushed.contains(&ino) {
            drop(st);
            return reply.ok();
        }
        st.waiting.push((ino, reply));
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

    /// Writes and flushes groups while syncs wait for one: each round writes the bytes of the
    /// files its syncs wait for, in one write, and flushes (which also makes every write-back
    /// before it durable). Returns with no sync waiting and `leading` cleared.
    fn groups<'a>(&'a self, mut st: std::sync::MutexGuard<'a, LogState>) -> std::sync::MutexGuard<'a, LogState> {
        while !st.waiting.is_empty() {
            let answers = std::mem::take(&mut st.waiting);
            let mut group = Vec::new();
            let mut covered = std::mem::take(&mut st.unflushed);
            for (ino, _) in &answers {
                if let Some(b) = st.pending.remove(ino) {
                    st.pending_bytes -= b.len();
                    group.extend(b);
                }
                covered.insert(*ino);
            }
            st.inflight = covered;
            let buf = (!group.is_empty()).then(|| padded(group));
            let at = buf.as_ref().map(|b| st.place(b.len() as u64, self.size));
            st.groups += 1;
            drop(st);
            let res = self.write_and_flush(buf.as_deref(), at.unwrap_or(0));
            st = self.lock();
            st.inflight.clear();
            drop(st);
            for (_, r) in answers {
                match &res {
                    Ok(()) => r.ok(),
                    Err(_) => r.error(Errno::from_i32(libc::EIO)),
                }
            }
            st = self.lock();
        }
        st.leading = false;
        st
    }

    fn write_and_flush(&self, bytes: Option<&[u8]>, at: u64) -> Result<(), okeanos::device::DeviceError> {
        if let Some(b) = bytes {
            self.dev.write_at(at, b)?;
        }
        self.dev.flush()
    }
}

fn attr(ino: u64, n: &Node) -> FileAttr {
    let now = SystemTime::now();
    FileAttr {
        ino: INodeNo(ino),
        size: n.size,
        blocks: n.size.div_ceil(512),
        atime: now,
        mtime: now,
        ctime: now,
        crtime: now,
        kind: if n.dir { FileType::Directory } else { FileType::RegularFile },
        perm: n.perm,
        nlink: if n.dir { 2 } else { 1 },
        uid: n.uid,
        gid: n.gid,
        rdev: 0,
        flags: 0,
        blksize: 4096,
    }
}

fn enoent() -> Errno {
    Errno::from_i32(libc::ENOENT)
}

impl NullFs {
    fn files(&self) -> std::sync::MutexGuard<'_, Files> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
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
        let f = self.files();
        match f.child(u64::from(parent), name).and_then(|i| f.attr(i)) {
            Some(a) => reply.entry(&TTL, &a, Generation(0)),
            None => reply.error(enoent()),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.files().attr(u64::from(ino)) {
            Some(a) => reply.attr(&TTL, &a),
            None => reply.error(enoent()),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
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
        let mut f = self.files();
        let Some(n) = f.nodes.get_mut(&ino) else { return reply.error(enoent()) };
        if let Some(m) = mode {
            n.perm = (m & 0o7777) as u16;
        }
        n.uid = uid.unwrap_or(n.uid);
        n.gid = gid.unwrap_or(n.gid);
        if let Some(s) = size.filter(|_| !n.dir) {
            n.size = s;
            if self.keep {
                n.bytes.resize(s as usize, 0);
            }
        }
        reply.attr(&TTL, &attr(ino, n))
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.files().nodes.get(&u64::from(ino)) {
            Some(_) => reply.opened(FileHandle(0), self.open_flags),
            None => reply.error(enoent()),
        }
    }

    fn create(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, flags: i32, reply: ReplyCreate) {
        let parent = u64::from(parent);
        let mut f = self.files();
        let ino = match f.child(parent, name) {
            Some(_) if flags & libc::O_EXCL != 0 => return reply.error(Errno::from_i32(libc::EEXIST)),
            Some(i) => i,
            None => match f.make(parent, name, Node::new(false, mode & !umask, req.uid(), req.gid())) {
                Ok(i) => i,
                Err(e) => return reply.error(e),
            },
        };
        reply.created(&TTL, &f.attr(ino).expect("made above"), Generation(0), FileHandle(0), self.open_flags)
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let mut f = self.files();
        match f.make(u64::from(parent), name, Node::new(true, mode & !umask, req.uid(), req.gid())) {
            Ok(i) => reply.entry(&TTL, &f.attr(i).expect("made above"), Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn rename(&self, _req: &Request, parent: INodeNo, name: &OsStr, newparent: INodeNo, newname: &OsStr, flags: fuser::RenameFlags, reply: ReplyEmpty) {
        let (parent, newparent) = (u64::from(parent), u64::from(newparent));
        let mut f = self.files();
        let Some(ino) = f.child(parent, name) else { return reply.error(enoent()) };
        if !f.nodes.get(&newparent).is_some_and(|d| d.dir) {
            return reply.error(enoent());
        }
        if let Some(old) = f.child(newparent, newname) {
            if old == ino {
                return reply.ok();
            }
            if flags.bits() & libc::RENAME_NOREPLACE != 0 {
                return reply.error(Errno::from_i32(libc::EEXIST));
            }
            let dir = f.nodes[&old].dir;
            if let Err(e) = f.remove(newparent, newname, dir) {
                return reply.error(e);
            }
        }
        f.nodes.get_mut(&parent).expect("looked up above").entries.remove(name);
        f.nodes.get_mut(&newparent).expect("checked above").entries.insert(newname.to_owned(), ino);
        reply.ok()
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
        let mut f = self.files();
        let Some(n) = f.nodes.get_mut(&ino) else { return reply.error(enoent()) };
        let end = offset + data.len() as u64;
        n.size = n.size.max(end);
        if self.keep {
            let size = n.size as usize;
            n.bytes.resize(size, 0);
            n.bytes[offset as usize..end as usize].copy_from_slice(data);
        }
        drop(f);
        if let Some(log) = &self.log {
            log.append(ino, offset, data);
        }
        reply.written(data.len() as u32)
    }

    fn read(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, size: u32, _flags: OpenFlags, _lock: Option<LockOwner>, reply: ReplyData) {
        let f = self.files();
        let Some(node) = f.nodes.get(&u64::from(ino)) else { return reply.error(enoent()) };
        let n = node.size.saturating_sub(offset).min(size as u64) as usize;
        if self.keep && n > 0 {
            reply.data(&node.bytes[offset as usize..offset as usize + n])
        } else {
            reply.data(&vec![0u8; n])
        }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock: LockOwner, reply: ReplyEmpty) {
        reply.ok();
    }

    fn release(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _flags: OpenFlags, _lock: Option<LockOwner>, _flush: bool, reply: ReplyEmpty) {
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        match &self.log {
            Some(log) => log.sync(u64::from(ino), reply),
            None => reply.ok(),
        }
    }

    fn destroy(&mut self) {
        if let Some(log) = &self.log {
            let st = log.lock();
            eprintln!(
                "null_fuse: {} syncs, {} groups ({:.1} syncs a group), {} write-backs, {} bytes written to the log",
                st.syncs,
                st.groups,
                st.syncs as f64 / st.groups.max(1) as f64,
                st.writebacks,
                st.written
            );
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.files().remove(u64::from(parent), name, false) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.files().remove(u64::from(parent), name, true) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.files().nodes.get(&u64::from(ino)) {
            Some(n) if n.dir => reply.opened(FileHandle(0), FopenFlags::empty()),
            Some(_) => reply.error(Errno::from_i32(libc::ENOTDIR)),
            None => reply.error(enoent()),
        }
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        // Names are not logged (the floor keeps no metadata): nothing to wait for.
        reply.ok()
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: fuser::ReplyStatfs) {
        let size = self.log.as_ref().map_or(1 << 34, |l| l.size);
        reply.statfs(size / 4096, size / 4096, size / 4096, 1 << 20, 1 << 20, 4096, 255, 4096);
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let ino = u64::from(ino);
        let f = self.files();
        let Some(d) = f.nodes.get(&ino).filter(|n| n.dir) else { return reply.error(enoent()) };
        let mut entries: Vec<(u64, FileType, OsString)> = vec![(ino, FileType::Directory, ".".into()), (ino, FileType::Directory, "..".into())];
        entries.extend(d.entries.iter().map(|(n, &i)| (i, if f.nodes[&i].dir { FileType::Directory } else { FileType::RegularFile }, n.clone())));
        for (k, (i, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(i), (k + 1) as u64, kind, &name) {
                break;
            }
        }
        reply.ok()
    }
}

fn main() -> std::process::ExitCode {
    let usage = "usage: null_fuse MOUNTPOINT [THREADS] [--page-cache] [--keep [--log DEVICE [--flusher]]]";
    let mut all: Vec<String> = std::env::args().skip(1).collect();
    let keep = all.iter().any(|a| a == "--keep");
    let flusher = all.iter().any(|a| a == "--flusher");
    let open_flags = if all.iter().any(|a| a == "--page-cache") { FopenFlags::FOPEN_KEEP_CACHE } else { FopenFlags::FOPEN_DIRECT_IO };
    all.retain(|a| a != "--flusher" && a != "--page-cache");
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
    let fs = NullFs { files: Mutex::new(Files::default()), keep, open_flags, log };
    match fuser::mount(fs, &mnt, &config) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("null_fuse: mounting {mnt}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

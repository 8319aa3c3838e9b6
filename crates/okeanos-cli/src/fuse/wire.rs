//! FUSE requests and replies in the kernel's byte layout, for the io_uring transport (ring.rs)
//! where fuser does not parse or encode them: each request decoded from a ring entry, checked
//! against its length, and handed to the front end's operation; each reply encoded back into
//! the entry. The layouts are the kernel's (include/uapi/linux/fuse.h, protocol 7.40 as
//! negotiated by fuser); docs/FORMAT.md lists the ones used here.
//!
//! Decoding is bounded: a request shorter than its opcode's fixed part, or a name without its
//! NUL, is answered EINVAL; an opcode the front end does not serve is answered ENOSYS (the
//! kernel then stops sending it, as it does over /dev/fuse).

use super::reply::Reply;
use super::{AttrChange, OkeanosFuse};
use fuser::{Errno, FileAttr, FileHandle, FileType, FopenFlags, INodeNo, OpenFlags, RenameFlags, TimeOrNow, WriteFlags};
use okeanos::StatFs;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Opcodes (fuse.h `enum fuse_opcode`).
mod op {
    pub const LOOKUP: u32 = 1;
    pub const GETATTR: u32 = 3;
    pub const SETATTR: u32 = 4;
    pub const READLINK: u32 = 5;
    pub const SYMLINK: u32 = 6;
    pub const MKNOD: u32 = 8;
    pub const MKDIR: u32 = 9;
    pub const UNLINK: u32 = 10;
    pub const RMDIR: u32 = 11;
    pub const RENAME: u32 = 12;
    pub const LINK: u32 = 13;
    pub const OPEN: u32 = 14;
    pub const READ: u32 = 15;
    pub const WRITE: u32 = 16;
    pub const STATFS: u32 = 17;
    pub const RELEASE: u32 = 18;
    pub const FSYNC: u32 = 20;
    pub const SETXATTR: u32 = 21;
    pub const GETXATTR: u32 = 22;
    pub const LISTXATTR: u32 = 23;
    pub const REMOVEXATTR: u32 = 24;
    pub const FLUSH: u32 = 25;
    pub const OPENDIR: u32 = 27;
    pub const READDIR: u32 = 28;
    pub const RELEASEDIR: u32 = 29;
    pub const FSYNCDIR: u32 = 30;
    pub const CREATE: u32 = 35;
    pub const FALLOCATE: u32 = 43;
    pub const RENAME2: u32 = 45;
}

/// setattr's `valid` bits.
const FATTR_MODE: u32 = 1 << 0;
const FATTR_UID: u32 = 1 << 1;
const FATTR_GID: u32 = 1 << 2;
const FATTR_SIZE: u32 = 1 << 3;
const FATTR_ATIME: u32 = 1 << 4;
const FATTR_MTIME: u32 = 1 << 5;
const FATTR_ATIME_NOW: u32 = 1 << 7;
const FATTR_MTIME_NOW: u32 = 1 << 8;
const FSYNC_FDATASYNC: u32 = 1;

/// `struct fuse_in_header`: 40 bytes at the start of every request.
pub const IN_HEADER: usize = 40;
/// `struct fuse_out_header`: 16 bytes at the start of every reply.
pub const OUT_HEADER: usize = 16;

/// A request's fixed header, decoded.
#[derive(Debug, Clone, Copy)]
pub struct InHeader {
    pub opcode: u32,
    pub unique: u64,
    pub nodeid: u64,
    pub uid: u32,
    pub gid: u32,
}

impl InHeader {
    pub fn decode(b: &[u8]) -> Option<InHeader> {
        if b.len() < IN_HEADER {
            return None;
        }
        Some(InHeader { opcode: u32_at(b, 4)?, unique: u64_at(b, 8)?, nodeid: u64_at(b, 16)?, uid: u32_at(b, 24)?, gid: u32_at(b, 28)? })
    }
}

/// Encodes `struct fuse_out_header` for a reply of `payload` bytes.
pub fn out_header(unique: u64, error: i32, payload: usize) -> [u8; OUT_HEADER] {
    let mut h = [0u8; OUT_HEADER];
    h[0..4].copy_from_slice(&((OUT_HEADER + payload) as u32).to_le_bytes());
    h[4..8].copy_from_slice(&error.to_le_bytes());
    h[8..16].copy_from_slice(&unique.to_le_bytes());
    h
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The size of each opcode's fixed argument (the part the ring carries in its op_in area);
/// 0 for requests whose arguments are names only.
pub fn fixed_size(opcode: u32) -> usize {
    match opcode {
        op::GETATTR => 16,
        op::SETATTR => 88,
        op::MKNOD => 16,
        op::MKDIR => 8,
        op::RENAME | op::LINK => 8,
        op::RENAME2 => 16,
        op::OPEN | op::OPENDIR => 8,
        op::READ | op::READDIR | op::WRITE => 40,
        op::RELEASE | op::RELEASEDIR | op::FLUSH => 24,
        op::FSYNC | op::FSYNCDIR => 16,
        op::SETXATTR | op::GETXATTR | op::LISTXATTR => 8,
        op::CREATE => 16,
        op::FALLOCATE => 32,
        _ => 0,
    }
}

/// Splits NUL-terminated names off the front of `b`.
fn names<const N: usize>(mut b: &[u8]) -> Option<([&OsStr; N], &[u8])> {
    let mut out = [OsStr::new(""); N];
    for slot in out.iter_mut() {
        let end = b.iter().position(|&c| c == 0)?;
        *slot = OsStr::from_bytes(&b[..end]);
        b = &b[end + 1..];
    }
    Some((out, b))
}

fn einval() -> Errno {
    Errno::from_i32(libc::EINVAL)
}

fn time_or_now(valid: u32, set: u32, now: u32, secs: Option<u64>, nsecs: Option<u32>) -> Option<TimeOrNow> {
    if valid & now != 0 {
        Some(TimeOrNow::Now)
    } else if valid & set != 0 {
        let (s, n) = (secs? as i64, nsecs?);
        let t = if s >= 0 { UNIX_EPOCH + Duration::new(s as u64, n) } else { UNIX_EPOCH - Duration::from_secs(s.unsigned_abs()) + Duration::from_nanos(n as u64) };
        Some(TimeOrNow::SpecificTime(t))
    } else {
        None
    }
}

/// Serves one request: `fixed` is its opcode's fixed argument, `rest` the names and data after
/// it. Every path answers `reply` exactly once.
pub fn dispatch(fs: &OkeanosFuse, h: &InHeader, fixed: &[u8], rest: &[u8], reply: impl Reply) {
    if fixed.len() < fixed_size(h.opcode) {
        return reply.error(einval());
    }
    let ino = INodeNo(h.nodeid);
    let caller = okeanos::Owner { uid: h.uid, gid: h.gid };
    // The fixed fields were checked against fixed_size above; a missing one is a bug here,
    // answered EINVAL rather than trusted.
    let a32 = |at| u32_at(fixed, at).unwrap_or(0);
    let a64 = |at| u64_at(fixed, at).unwrap_or(0);
    match h.opcode {
        op::LOOKUP => match names::<1>(rest) {
            Some(([name], _)) => fs.lookup(ino, name, reply),
            None => reply.error(einval()),
        },
        op::GETATTR => fs.getattr(ino, reply),
        op::SETATTR => {
            let valid = a32(0);
            let ch = AttrChange {
                mode: (valid & FATTR_MODE != 0).then(|| a32(68)),
                uid: (valid & FATTR_UID != 0).then(|| a32(76)),
                gid: (valid & FATTR_GID != 0).then(|| a32(80)),
                size: (valid & FATTR_SIZE != 0).then(|| a64(16)),
                atime: time_or_now(valid, FATTR_ATIME, FATTR_ATIME_NOW, Some(a64(32)), Some(a32(56))),
                mtime: time_or_now(valid, FATTR_MTIME, FATTR_MTIME_NOW, Some(a64(40)), Some(a32(60))),
            };
            fs.setattr(ino, ch, reply)
        }
        op::READLINK => fs.readlink(ino, reply),
        op::SYMLINK => match names::<2>(rest) {
            Some(([name, target], _)) => fs.symlink(caller, ino, name, Path::new(target), reply),
            None => reply.error(einval()),
        },
        op::MKNOD => match names::<1>(rest) {
            Some(([name], _)) => fs.mknod(caller, ino, name, a32(0), a32(8), a32(4), reply),
            None => reply.error(einval()),
        },
        op::MKDIR => match names::<1>(rest) {
            Some(([name], _)) => fs.mkdir(caller, ino, name, a32(0), a32(4), reply),
            None => reply.error(einval()),
        },
        op::UNLINK | op::RMDIR => match names::<1>(rest) {
            Some(([name], _)) if h.opcode == op::UNLINK => fs.unlink(ino, name, reply),
            Some(([name], _)) => fs.rmdir(ino, name, reply),
            None => reply.error(einval()),
        },
        op::RENAME | op::RENAME2 => {
            let flags = if h.opcode == op::RENAME2 { a32(8) } else { 0 };
            match names::<2>(rest) {
                Some(([from, to], _)) => fs.rename(ino, from, INodeNo(a64(0)), to, RenameFlags::from_bits_retain(flags), reply),
                None => reply.error(einval()),
            }
        }
        op::LINK => match names::<1>(rest) {
            Some(([name], _)) => fs.link(INodeNo(a64(0)), ino, name, reply),
            None => reply.error(einval()),
        },
        op::OPEN => fs.open(ino, OpenFlags(a32(0) as i32), reply),
        op::READ => fs.read(ino, FileHandle(a64(0)), a64(8), a32(16), reply),
        op::WRITE => {
            let size = a32(16) as usize;
            match rest.get(..size) {
                Some(data) => fs.write(caller, ino, FileHandle(a64(0)), a64(8), data, WriteFlags::from_bits_retain(a32(20)), reply),
                None => reply.error(einval()),
            }
        }
        op::STATFS => fs.statfs(reply),
        op::RELEASE => fs.release(FileHandle(a64(0)), reply),
        op::FSYNC => fs.fsync(ino, a32(8) & FSYNC_FDATASYNC != 0, reply),
        op::FSYNCDIR => fs.fsyncdir(ino, a32(8) & FSYNC_FDATASYNC != 0, reply),
        op::SETXATTR => {
            let size = a32(0) as usize;
            match names::<1>(rest) {
                Some(([name], value)) if value.len() >= size => fs.setxattr(ino, name, &value[..size], a32(4) as i32, reply),
                _ => reply.error(einval()),
            }
        }
        op::GETXATTR => match names::<1>(rest) {
            Some(([name], _)) => fs.getxattr(ino, name, a32(0), reply),
            None => reply.error(einval()),
        },
        op::LISTXATTR => fs.listxattr(ino, a32(0), reply),
        op::REMOVEXATTR => match names::<1>(rest) {
            Some(([name], _)) => fs.removexattr(ino, name, reply),
            None => reply.error(einval()),
        },
        op::FLUSH => fs.flush(reply),
        op::OPENDIR => fs.opendir(ino, reply),
        op::READDIR => {
            // The answer holds at most the size the kernel asked for.
            let mut reply = reply;
            reply.limit(a32(16) as usize);
            fs.readdir(ino, a64(8), reply)
        }
        op::RELEASEDIR => reply.ok(),
        op::CREATE => match names::<1>(rest) {
            Some(([name], _)) => fs.create(caller, ino, name, a32(4), a32(8), a32(0) as i32, reply),
            None => reply.error(einval()),
        },
        op::FALLOCATE => fs.fallocate(ino, a64(8), a64(16), a32(24) as i32, reply),
        _ => reply.error(Errno::from_i32(libc::ENOSYS)),
    }
}

/// Where a ring reply goes once encoded: the transport's side of `RingReply`.
pub trait Sink: Send + 'static {
    /// The reply's payload area (the ring entry's payload buffer).
    fn payload(&mut self) -> &mut [u8];
    /// Sends the reply: `error` (0 or a negative errno) and the first `len` payload bytes.
    fn send(self, error: i32, len: usize);
}

/// A reply encoded into a ring entry. Dropped unsent, it answers EIO.
pub struct RingReply<S: Sink> {
    sink: Option<S>,
    /// A readdir answer being built: its length so far and its limit.
    dir_len: usize,
    dir_limit: usize,
}

impl<S: Sink> RingReply<S> {
    pub fn new(sink: S) -> Self {
        RingReply { sink: Some(sink), dir_len: 0, dir_limit: usize::MAX }
    }

    fn send(mut self, error: i32, parts: &[&[u8]]) {
        let Some(mut sink) = self.sink.take() else { return };
        let buf = sink.payload();
        let total: usize = parts.iter().map(|p| p.len()).sum();
        if total > buf.len() {
            // Larger than the kernel's own limit for this reply: a bug, not input.
            eprintln!("okeanos: internal error: a {total}-byte reply exceeds the ring entry ({} bytes); answering EIO", buf.len());
            return sink.send(-libc::EIO, 0);
        }
        let mut at = 0;
        for p in parts {
            buf[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
        sink.send(error, total)
    }
}

impl<S: Sink> Drop for RingReply<S> {
    fn drop(&mut self) {
        if let Some(sink) = self.sink.take() {
            sink.send(-libc::EIO, 0);
        }
    }
}

fn mode_of(kind: FileType, perm: u16) -> u32 {
    let t = match kind {
        FileType::NamedPipe => libc::S_IFIFO,
        FileType::CharDevice => libc::S_IFCHR,
        FileType::BlockDevice => libc::S_IFBLK,
        FileType::Directory => libc::S_IFDIR,
        FileType::RegularFile => libc::S_IFREG,
        FileType::Symlink => libc::S_IFLNK,
        FileType::Socket => libc::S_IFSOCK,
    };
    t | perm as u32
}

/// Seconds and nanoseconds since the epoch, negative seconds before it.
fn stamp(t: SystemTime) -> (u64, u32) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs(), d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            let (mut s, mut n) = (-(d.as_secs() as i64), d.subsec_nanos());
            if n > 0 {
                s -= 1;
                n = 1_000_000_000 - n;
            }
            (s as u64, n)
        }
    }
}

/// `struct fuse_attr` (88 bytes).
fn attr_bytes(a: &FileAttr) -> [u8; 88] {
    let mut b = [0u8; 88];
    let (at, atn) = stamp(a.atime);
    let (mt, mtn) = stamp(a.mtime);
    let (ct, ctn) = stamp(a.ctime);
    let u64s = [a.ino.0, a.size, a.blocks, at, mt, ct];
    for (k, v) in u64s.iter().enumerate() {
        b[k * 8..k * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }
    let u32s = [atn, mtn, ctn, mode_of(a.kind, a.perm), a.nlink, a.uid, a.gid, a.rdev, a.blksize, 0];
    for (k, v) in u32s.iter().enumerate() {
        b[48 + k * 4..52 + k * 4].copy_from_slice(&v.to_le_bytes());
    }
    b
}

/// `struct fuse_entry_out` (128 bytes).
fn entry_bytes(ttl: Duration, a: &FileAttr, generation: u64) -> [u8; 128] {
    let mut b = [0u8; 128];
    b[0..8].copy_from_slice(&a.ino.0.to_le_bytes());
    b[8..16].copy_from_slice(&generation.to_le_bytes());
    b[16..24].copy_from_slice(&ttl.as_secs().to_le_bytes());
    b[24..32].copy_from_slice(&ttl.as_secs().to_le_bytes());
    b[32..36].copy_from_slice(&ttl.subsec_nanos().to_le_bytes());
    b[36..40].copy_from_slice(&ttl.subsec_nanos().to_le_bytes());
    b[40..128].copy_from_slice(&attr_bytes(a));
    b
}

/// `struct fuse_open_out` (16 bytes).
fn open_bytes(fh: u64, flags: FopenFlags) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[0..8].copy_from_slice(&fh.to_le_bytes());
    b[8..12].copy_from_slice(&flags.bits().to_le_bytes());
    b
}

/// A directory entry's type in `struct fuse_dirent` (the DT_* values).
fn dirent_type(kind: FileType) -> u32 {
    mode_of(kind, 0) >> 12
}

impl<S: Sink> Reply for RingReply<S> {
    fn error(self, e: Errno) {
        self.send(-e.code(), &[])
    }

    fn ok(mut self) {
        if self.dir_len > 0 {
            // A readdir answer: its entries are in the payload already.
            let Some(sink) = self.sink.take() else { return };
            let len = self.dir_len;
            return sink.send(0, len);
        }
        self.send(0, &[])
    }

    fn data(self, d: &[u8]) {
        self.send(0, &[d])
    }

    fn entry(self, ttl: Duration, a: &FileAttr, generation: u64) {
        self.send(0, &[&entry_bytes(ttl, a, generation)])
    }

    fn attr(self, ttl: Duration, a: &FileAttr) {
        let mut head = [0u8; 16];
        head[0..8].copy_from_slice(&ttl.as_secs().to_le_bytes());
        head[8..12].copy_from_slice(&ttl.subsec_nanos().to_le_bytes());
        self.send(0, &[&head, &attr_bytes(a)])
    }

    fn opened(self, fh: u64, flags: FopenFlags) {
        self.send(0, &[&open_bytes(fh, flags)])
    }

    fn written(self, n: u32) {
        let mut b = [0u8; 8];
        b[0..4].copy_from_slice(&n.to_le_bytes());
        self.send(0, &[&b])
    }

    fn statfs(self, s: &StatFs) {
        let mut b = [0u8; 80];
        for (k, v) in [s.blocks, s.blocks_free, s.blocks_free, s.inodes, s.inodes_free].iter().enumerate() {
            b[k * 8..k * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        b[40..44].copy_from_slice(&s.block_size.to_le_bytes());
        b[44..48].copy_from_slice(&s.name_max.to_le_bytes());
        b[48..52].copy_from_slice(&s.block_size.to_le_bytes());
        self.send(0, &[&b])
    }

    fn created(self, ttl: Duration, a: &FileAttr, generation: u64, fh: u64, flags: FopenFlags) {
        self.send(0, &[&entry_bytes(ttl, a, generation), &open_bytes(fh, flags)])
    }

    fn xattr_size(self, n: u32) {
        let mut b = [0u8; 8];
        b[0..4].copy_from_slice(&n.to_le_bytes());
        self.send(0, &[&b])
    }

    fn dir_entry(&mut self, ino: u64, offset: u64, kind: FileType, name: &[u8]) -> bool {
        let size = (24 + name.len()).next_multiple_of(8);
        let Some(sink) = self.sink.as_mut() else { return true };
        let buf = sink.payload();
        let end = self.dir_len + size;
        if end > self.dir_limit.min(buf.len()) {
            return true;
        }
        let e = &mut buf[self.dir_len..end];
        e.fill(0);
        e[0..8].copy_from_slice(&ino.to_le_bytes());
        e[8..16].copy_from_slice(&offset.to_le_bytes());
        e[16..20].copy_from_slice(&(name.len() as u32).to_le_bytes());
        e[20..24].copy_from_slice(&dirent_type(kind).to_le_bytes());
        e[24..24 + name.len()].copy_from_slice(name);
        self.dir_len = end;
        false
    }

    fn limit(&mut self, size: usize) {
        self.dir_limit = size;
    }
}

//! One reply, whichever transport carries it: the front end's operations answer through
//! `Reply`, and each transport implements it. `Kernel` wraps fuser's typed replies (requests
//! read from /dev/fuse); `wire::RingReply` encodes into a ring entry's buffers (FUSE over
//! io_uring).
//!
//! A reply is sent exactly once: every method takes it by value, and a reply dropped unsent
//! answers EIO (fuser's do the same), so a request is never left hanging.

use fuser::{
    Errno, FileAttr, FileHandle, FileType, FopenFlags, Generation, INodeNo, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr,
};
use okeanos::StatFs;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

/// What a request answers. Each operation calls the one method that fits it (or `error`).
pub trait Reply: Send + 'static {
    fn error(self, e: Errno);
    /// An answer with nothing in it (unlink, fsync, release, ...).
    fn ok(self);
    fn data(self, d: &[u8]);
    fn entry(self, ttl: Duration, a: &FileAttr, generation: u64);
    fn attr(self, ttl: Duration, a: &FileAttr);
    fn opened(self, fh: u64, flags: FopenFlags);
    fn written(self, n: u32);
    fn statfs(self, s: &StatFs);
    fn created(self, ttl: Duration, a: &FileAttr, generation: u64, fh: u64, flags: FopenFlags);
    /// getxattr/listxattr asked for the length only.
    fn xattr_size(self, n: u32);
    /// Adds a directory entry to a readdir answer; true when it did not fit (and the answer
    /// is full). `ok` sends the answer.
    fn dir_entry(&mut self, ino: u64, offset: u64, kind: FileType, name: &[u8]) -> bool;
    /// The most bytes a readdir answer may hold (fuser's replies know it already).
    fn limit(&mut self, _size: usize) {}
}

/// fuser's replies, one variant per kind. A method that does not fit the variant is a bug of
/// the front end: it is logged and the request answered EIO, never left unanswered.
pub enum Kernel {
    Empty(ReplyEmpty),
    Data(ReplyData),
    Entry(ReplyEntry),
    Attr(ReplyAttr),
    Open(ReplyOpen),
    Write(ReplyWrite),
    Statfs(ReplyStatfs),
    Create(ReplyCreate),
    Xattr(ReplyXattr),
    Dir(ReplyDirectory),
}

fn eio() -> Errno {
    Errno::from_i32(libc::EIO)
}

impl Kernel {
    fn mismatch(self, what: &str) {
        eprintln!("okeanos: internal error: a {what} answer to a request of another kind; answering EIO");
        self.error(eio())
    }
}

impl Reply for Kernel {
    fn error(self, e: Errno) {
        match self {
            Kernel::Empty(r) => r.error(e),
            Kernel::Data(r) => r.error(e),
            Kernel::Entry(r) => r.error(e),
            Kernel::Attr(r) => r.error(e),
            Kernel::Open(r) => r.error(e),
            Kernel::Write(r) => r.error(e),
            Kernel::Statfs(r) => r.error(e),
            Kernel::Create(r) => r.error(e),
            Kernel::Xattr(r) => r.error(e),
            Kernel::Dir(r) => r.error(e),
        }
    }

    fn ok(self) {
        match self {
            Kernel::Empty(r) => r.ok(),
            Kernel::Dir(r) => r.ok(),
            other => other.mismatch("empty"),
        }
    }

    fn data(self, d: &[u8]) {
        match self {
            Kernel::Data(r) => r.data(d),
            Kernel::Xattr(r) => r.data(d),
            other => other.mismatch("data"),
        }
    }

    fn entry(self, ttl: Duration, a: &FileAttr, generation: u64) {
        match self {
            Kernel::Entry(r) => r.entry(&ttl, a, Generation(generation)),
            other => other.mismatch("entry"),
        }
    }

    fn attr(self, ttl: Duration, a: &FileAttr) {
        match self {
            Kernel::Attr(r) => r.attr(&ttl, a),
            other => other.mismatch("attr"),
        }
    }

    fn opened(self, fh: u64, flags: FopenFlags) {
        match self {
            Kernel::Open(r) => r.opened(FileHandle(fh), flags),
            other => other.mismatch("open"),
        }
    }

    fn written(self, n: u32) {
        match self {
            Kernel::Write(r) => r.written(n),
            other => other.mismatch("write"),
        }
    }

    fn statfs(self, s: &StatFs) {
        match self {
            Kernel::Statfs(r) => r.statfs(s.blocks, s.blocks_free, s.blocks_free, s.inodes, s.inodes_free, s.block_size, s.name_max, s.block_size),
            other => other.mismatch("statfs"),
        }
    }

    fn created(self, ttl: Duration, a: &FileAttr, generation: u64, fh: u64, flags: FopenFlags) {
        match self {
            Kernel::Create(r) => r.created(&ttl, a, Generation(generation), FileHandle(fh), flags),
            other => other.mismatch("create"),
        }
    }

    fn xattr_size(self, n: u32) {
        match self {
            Kernel::Xattr(r) => r.size(n),
            other => other.mismatch("xattr size"),
        }
    }

    fn dir_entry(&mut self, ino: u64, offset: u64, kind: FileType, name: &[u8]) -> bool {
        match self {
            Kernel::Dir(r) => r.add(INodeNo(ino), offset, kind, OsStr::from_bytes(name)),
            _ => true,
        }
    }
}

//! The /dev/fuse transport: fuser reads requests from the device, decodes them and calls
//! these methods, which hand them to the front end's operations with fuser's replies. INIT is
//! answered here, for both transports: it is where the kernel is asked for io_uring. Each
//! request is served under a turn of the spare-thread pool (spares.rs): a thread that the pool
//! does not need parks when its request is answered.

use super::reply::Kernel;
use super::{ring, AttrChange, OkeanosFuse};
use fuser::{
    FileHandle, Filesystem, INodeNo, InitFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use std::ffi::OsStr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

/// The front end as fuser serves it (shared with the io_uring queues).
pub struct KernelFront(pub Arc<OkeanosFuse>);

impl KernelFront {
    /// The spare-thread pool's turn for one request, the thread seated in the pool first.
    fn turn(&self) -> super::spares::Turn<'_> {
        self.0.spares.seat();
        self.0.spares.turn()
    }
}

/// The caller of a request: the owner of what it creates.
fn owner(req: &Request) -> okeanos::Owner {
    okeanos::Owner { uid: req.uid(), gid: req.gid() }
}

impl Filesystem for KernelFront {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let fs = &self.0;
        if fs.writeback_cache {
            let _ = config.add_capabilities(InitFlags::FUSE_WRITEBACK_CACHE);
        }
        // Programs may still mmap files opened for direct I/O (Linux 6.6 and later). Older
        // kernels refuse shared mappings of them (SQLite's WAL index needs one): there the
        // mount keeps the page cache, with per-page write atomicity, and says so.
        if config.add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP).is_err() && !fs.page_cache.load(Ordering::Relaxed) {
            eprintln!("okeanos: this kernel cannot mmap files opened for direct I/O (FUSE_DIRECT_IO_ALLOW_MMAP, Linux 6.6): using the page cache; a write() crossing pages is then atomic per page only");
            fs.page_cache.store(true, Ordering::Relaxed);
        }
        let _ = config.add_capabilities(InitFlags::FUSE_MAX_PAGES);
        // POSIX ACLs: the kernel enforces them; the engine keeps them as system.posix_acl_*
        // attributes, passes default ACLs to new inodes and follows chmod (fs/acl.rs). The
        // umask is ours to apply (only where no default ACL applies), so the kernel must not.
        if config.add_capabilities(InitFlags::FUSE_POSIX_ACL).is_ok() {
            let _ = config.add_capabilities(InitFlags::FUSE_DONT_MASK);
        }
        let _ = config.set_max_write(1 << 20);
        // FUSE over io_uring: asked for only when a ring can be made here, since the kernel
        // holds every request until the rings are registered once it has agreed.
        if fs.ring.wanted() {
            let r = ring::probe().and_then(|()| {
                config.add_capabilities(InitFlags::FUSE_OVER_IO_URING).map_err(|_| "the kernel did not offer it at INIT".to_string())
            });
            fs.ring.decide(r);
        } else {
            fs.ring.decide(Err("not asked for (transport=dev)".into()));
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let _turn = self.turn();
        self.0.lookup(parent, name, Kernel::Entry(reply))
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let _turn = self.turn();
        self.0.forget(ino, nlookup)
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let _turn = self.turn();
        self.0.getattr(ino, Kernel::Attr(reply))
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let _turn = self.turn();
        self.0.setattr(ino, AttrChange { mode, uid, gid, size, atime, mtime }, Kernel::Attr(reply))
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let _turn = self.turn();
        self.0.readlink(ino, Kernel::Data(reply))
    }

    fn mknod(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, rdev: u32, reply: ReplyEntry) {
        let _turn = self.turn();
        self.0.mknod(owner(req), parent, name, mode, umask, rdev, Kernel::Entry(reply))
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let _turn = self.turn();
        self.0.mkdir(owner(req), parent, name, mode, umask, Kernel::Entry(reply))
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _turn = self.turn();
        self.0.unlink(parent, name, Kernel::Empty(reply))
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _turn = self.turn();
        self.0.rmdir(parent, name, Kernel::Empty(reply))
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let _turn = self.turn();
        self.0.symlink(owner(req), parent, link_name, target, Kernel::Entry(reply))
    }

    fn rename(&self, _req: &Request, parent: INodeNo, name: &OsStr, newparent: INodeNo, newname: &OsStr, flags: RenameFlags, reply: ReplyEmpty) {
        let _turn = self.turn();
        self.0.rename(parent, name, newparent, newname, flags, Kernel::Empty(reply))
    }

    fn link(&self, _req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let _turn = self.turn();
        self.0.link(ino, newparent, newname, Kernel::Entry(reply))
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let _turn = self.turn();
        self.0.open(ino, flags, Kernel::Open(reply))
    }

    fn read(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, size: u32, _flags: OpenFlags, _lock: Option<LockOwner>, reply: ReplyData) {
        let _turn = self.turn();
        self.0.read(ino, fh, offset, size, Kernel::Data(reply))
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let _turn = self.turn();
        self.0.write(owner(req), ino, fh, offset, data, write_flags, Kernel::Write(reply))
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock: LockOwner, reply: ReplyEmpty) {
        let _turn = self.turn();
        self.0.flush(Kernel::Empty(reply))
    }

    fn release(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, _lock: Option<LockOwner>, _flush: bool, reply: ReplyEmpty) {
        let _turn = self.turn();
        self.0.release(fh, Kernel::Empty(reply))
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        let _turn = self.turn();
        self.0.fsync(ino, datasync, Kernel::Empty(reply))
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let _turn = self.turn();
        self.0.opendir(ino, Kernel::Open(reply))
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, reply: ReplyDirectory) {
        let _turn = self.turn();
        self.0.readdir(ino, offset, Kernel::Dir(reply))
    }

    fn fsyncdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        let _turn = self.turn();
        self.0.fsyncdir(ino, datasync, Kernel::Empty(reply))
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let _turn = self.turn();
        self.0.statfs(Kernel::Statfs(reply))
    }

    fn fallocate(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, length: u64, mode: i32, reply: ReplyEmpty) {
        let _turn = self.turn();
        self.0.fallocate(ino, offset, length, mode, Kernel::Empty(reply))
    }

    fn setxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, value: &[u8], flags: i32, _position: u32, reply: ReplyEmpty) {
        let _turn = self.turn();
        self.0.setxattr(ino, name, value, flags, Kernel::Empty(reply))
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let _turn = self.turn();
        self.0.getxattr(ino, name, size, Kernel::Xattr(reply))
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let _turn = self.turn();
        self.0.listxattr(ino, size, Kernel::Xattr(reply))
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _turn = self.turn();
        self.0.removexattr(ino, name, Kernel::Empty(reply))
    }

    fn create(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, flags: i32, reply: ReplyCreate) {
        let _turn = self.turn();
        self.0.create(owner(req), parent, name, mode, umask, flags, Kernel::Create(reply))
    }
}

//! A device over a regular file or a block device (for example a loop device), with
//! pread/pwrite and fdatasync; optionally with O_DIRECT, so that what the engine writes is
//! exactly what reaches the block device (no page-cache writeback in 4 KiB pages), which is
//! how the benchmark compares its byte counts with `/sys/block/<dev>/stat`.

use super::lock::LockMode;
use super::{check_access, Device, DeviceCounters, DeviceError, DeviceStats, Gather, Poison};
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::Path;

pub struct FileDevice {
    file: File,
    name: String,
    len: u64,
    counters: DeviceCounters,
    poison: Poison,
    direct: bool,
    /// The kernel's `queue/rotational` for the block device (or the one holding the file).
    rotational: Option<bool>,
    /// O_DIRECT on a device whose logical sectors are 512 bytes: a write of a few sectors is
    /// a write of a few sectors ([`Device::short_writes`]).
    short_writes: bool,
    /// Aligned buffers kept for the next write or read whose bytes are not aligned for
    /// O_DIRECT ([`FileDevice::staging`]): each one otherwise a fresh zeroed allocation, which
    /// for a commit of a megabyte is an mmap, its pages faulted in, and a munmap (issue 33:
    /// 5% of the samples of 16 KiB appends, in the journal and checkpoint threads).
    spare: std::sync::Mutex<Vec<Aligned>>,
}

/// Staging buffers kept for reuse, and the largest kept: a commit's or a checkpoint's batch
/// is at most a few megabytes; a larger one is allocated and freed as before.
const SPARE_BUFFERS: usize = 4;
const SPARE_MAX_BYTES: usize = 8 << 20;

/// A heap buffer aligned for O_DIRECT.
struct Aligned {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl Aligned {
    const ALIGN: usize = 4096;
    fn new(len: usize) -> Aligned {
        let layout = std::alloc::Layout::from_size_align(len.max(1), Self::ALIGN).expect("valid layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Aligned { ptr, layout }
    }
    fn capacity(&self) -> usize {
        self.layout.size()
    }
    fn as_mut(&mut self, len: usize) -> &mut [u8] {
        assert!(len <= self.layout.size());
        // SAFETY: ptr points to layout.size() initialised bytes we own exclusively.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, len) }
    }
}

// SAFETY: an Aligned owns its allocation exclusively (no aliasing pointer escapes but through
// `as_mut`, which borrows it), so moving it to another thread is as safe as moving a Vec.
unsafe impl Send for Aligned {}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

impl FileDevice {
    /// An aligned buffer of at least `len` bytes: the smallest kept one that is large enough
    /// (a block's read does not take the buffer a commit's batch would need), or a new one.
    /// Its contents are whatever it last held: the caller fills what it uses.
    fn staging(&self, len: usize) -> Aligned {
        let kept = {
            let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
            (0..spare.len()).filter(|&i| spare[i].capacity() >= len).min_by_key(|&i| spare[i].capacity()).map(|i| spare.swap_remove(i))
        };
        kept.unwrap_or_else(|| Aligned::new(len))
    }

    /// Keeps a staging buffer for the next use: beside the others while fewer than
    /// [`SPARE_BUFFERS`] are kept, otherwise in place of the smallest kept one if it is larger;
    /// never one larger than [`SPARE_MAX_BYTES`].
    fn give_back(&self, a: Aligned) {
        if a.capacity() > SPARE_MAX_BYTES {
            return;
        }
        let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        if spare.len() < SPARE_BUFFERS {
            spare.push(a);
        } else if let Some(i) = (0..spare.len()).min_by_key(|&i| spare[i].capacity()).filter(|&i| spare[i].capacity() < a.capacity()) {
            spare[i] = a;
        }
    }

    /// Opens an existing file or block device for reading and writing, exclusively (see
    /// [`super::lock`]): another opener gets [`DeviceError::InUse`]. Its length is measured
    /// with a seek to the end, which works for block devices too (their metadata length is 0).
    pub fn open(path: &Path) -> Result<Self, DeviceError> {
        Self::open_mode(path, true, false, LockMode::Exclusive)
    }

    /// Opens read-only, sharing the file with other readers but not with a writer (a
    /// read-only mount, `cat`, `ls`).
    pub fn open_read_only(path: &Path) -> Result<Self, DeviceError> {
        Self::open_mode(path, false, false, LockMode::Shared)
    }

    /// Opens read-only without any lock, for inspecting an image that may be in use (`fsck -n`,
    /// `journal dump`, `stat`); [`super::lock::holder`] tells whether it is.
    pub fn open_unlocked(path: &Path) -> Result<Self, DeviceError> {
        Self::open_mode(path, false, false, LockMode::None)
    }

    /// Opens with O_DIRECT (block devices; page cache bypassed), locked as `open` or
    /// `open_read_only`.
    pub fn open_direct(path: &Path, write: bool) -> Result<Self, DeviceError> {
        Self::open_mode(path, write, true, if write { LockMode::Exclusive } else { LockMode::Shared })
    }

    fn open_mode(path: &Path, write: bool, direct: bool, lock: LockMode) -> Result<Self, DeviceError> {
        use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
        let name = path.display().to_string();
        let io = |op, e: std::io::Error| DeviceError::Io { device: name.clone(), op, offset: 0, message: e.to_string() };
        let block_dev = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device());
        let mut oo = OpenOptions::new();
        oo.read(true).write(write);
        let mut flags = 0;
        if direct {
            flags |= libc::O_DIRECT;
        }
        if block_dev && write && lock == LockMode::Exclusive {
            // As mount(8): the kernel refuses the device while it is mounted or held
            // exclusively by another opener.
            flags |= libc::O_EXCL;
        }
        oo.custom_flags(flags);
        let mut file = oo.open(path).map_err(|e| {
            if e.raw_os_error() == Some(libc::EBUSY) {
                DeviceError::InUse { device: name.clone(), holder: "the kernel or another program (mounted, or opened exclusively)".into() }
            } else {
                let message = match e.kind() {
                    std::io::ErrorKind::NotFound => "No such file or directory".to_string(),
                    std::io::ErrorKind::PermissionDenied => "Permission denied".to_string(),
                    _ if path.is_dir() => "is a directory, not an image or a block device (for a mounted file system, give its mount point to `okeanos stat`)".to_string(),
                    _ => format!("cannot open: {e}"),
                };
                DeviceError::Open { device: name.clone(), message }
            }
        })?;
        super::lock::lock(&file, path, lock)?;
        let len = file.seek(SeekFrom::End(0)).map_err(|e| io("seek", e))?;
        let short_writes = direct && queue_value(path, "logical_block_size").as_deref() == Some("512");
        Ok(FileDevice { file, name, len, counters: DeviceCounters::default(), poison: Poison::default(), direct, rotational: rotational(path), short_writes, spare: Default::default() })
    }

    /// Creates (or truncates) a regular file of `len` bytes, locked exclusively. Refuses to
    /// touch an existing file unless `overwrite`.
    pub fn create(path: &Path, len: u64, overwrite: bool) -> Result<Self, DeviceError> {
        let name = path.display().to_string();
        let io = |op, e: std::io::Error| DeviceError::Io { device: name.clone(), op, offset: 0, message: e.to_string() };
        let mut opts = OpenOptions::new();
        opts.read(true).write(true);
        if overwrite {
            opts.create(true);
        } else {
            opts.create_new(true);
        }
        let file = opts.open(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => DeviceError::Open { device: name.clone(), message: "exists already; mkfs does not overwrite a file (open it instead, or remove it first)".into() },
            _ => io("create", e),
        })?;
        // Lock before truncating, so that a file in use is never cut under its holder.
        super::lock::lock(&file, path, LockMode::Exclusive)?;
        if overwrite {
            file.set_len(0).map_err(|e| io("set_len", e))?;
        }
        file.set_len(len).map_err(|e| io("set_len", e))?;
        Ok(FileDevice { file, name, len, counters: DeviceCounters::default(), poison: Poison::default(), direct: false, rotational: rotational(path), short_writes: false, spare: Default::default() })
    }

    fn fail(&self, op: &'static str, offset: u64, e: std::io::Error) -> DeviceError {
        let err = DeviceError::Io { device: self.name.clone(), op, offset, message: e.to_string() };
        self.poison.set(&err);
        err
    }
}

/// Whether the block device at `path`, or the one holding the file at `path`, is rotational,
/// as the kernel says (`/sys/dev/block/MAJ:MIN/queue/rotational`, or its parent's for a
/// partition). None when the kernel does not say (tmpfs, overlay, no sysfs).
fn rotational(path: &Path) -> Option<bool> {
    queue_value(path, "rotational").map(|s| s == "1")
}

/// A value of the kernel's `queue/` directory for the block device at `path`, or the one
/// holding the file at `path` (its parent's for a partition), trimmed.
fn queue_value(path: &Path, name: &str) -> Option<String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = std::fs::metadata(path).ok()?;
    let dev = if m.file_type().is_block_device() { m.rdev() } else { m.dev() };
    let base = format!("/sys/dev/block/{}:{}", libc::major(dev), libc::minor(dev));
    ["queue", "../queue"].iter().find_map(|q| std::fs::read_to_string(format!("{base}/{q}/{name}")).ok()).map(|s| s.trim().to_string())
}

/// Writes `pieces` end to end from `offset` with pwritev (as many pieces a call as the kernel
/// takes), finishing a short write where it stopped. On error, the offset it happened at.
fn pwritev_all(file: &File, mut offset: u64, pieces: &[&[u8]]) -> Result<(), (u64, std::io::Error)> {
    use std::os::unix::io::AsRawFd;
    /// The kernel's IOV_MAX on Linux.
    const IOV_MAX: usize = 1024;
    let mut pieces: Vec<&[u8]> = pieces.iter().copied().filter(|p| !p.is_empty()).collect();
    let mut first = 0;
    while first < pieces.len() {
        if pieces.len() - first == 1 {
            return file.write_all_at(pieces[first], offset).map_err(|e| (offset, e));
        }
        let iov: Vec<libc::iovec> = pieces[first..].iter().take(IOV_MAX).map(|p| libc::iovec { iov_base: p.as_ptr() as *mut libc::c_void, iov_len: p.len() }).collect();
        let Ok(at) = libc::off_t::try_from(offset) else {
            return Err((offset, std::io::Error::from_raw_os_error(libc::EINVAL)));
        };
        // SAFETY: every iovec points into a piece borrowed for the whole call.
        let n = unsafe { libc::pwritev(file.as_raw_fd(), iov.as_ptr(), iov.len() as libc::c_int, at) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err((offset, e));
        }
        if n == 0 {
            return Err((offset, std::io::Error::from(std::io::ErrorKind::WriteZero)));
        }
        offset += n as u64;
        let mut n = n as usize;
        while n > 0 {
            let p = pieces[first];
            if n >= p.len() {
                n -= p.len();
                first += 1;
            } else {
                pieces[first] = &p[n..];
                n = 0;
            }
        }
    }
    Ok(())
}

impl Device for FileDevice {
    fn seeks(&self) -> Option<bool> {
        self.rotational
    }
    fn short_writes(&self) -> bool {
        self.short_writes
    }
    fn name(&self) -> String {
        self.name.clone()
    }
    fn len_bytes(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.poison.check(&self.name)?;
        check_access(&self.name, self.len, offset, buf.len() as u64)?;
        if self.direct && buf.as_ptr() as usize % Aligned::ALIGN != 0 {
            let mut a = self.staging(buf.len());
            let read = self.file.read_exact_at(a.as_mut(buf.len()), offset);
            if read.is_ok() {
                buf.copy_from_slice(a.as_mut(buf.len()));
            }
            self.give_back(a);
            read.map_err(|e| self.fail("read", offset, e))?;
        } else {
            self.file.read_exact_at(buf, offset).map_err(|e| self.fail("read", offset, e))?;
        }
        self.counters.on_read(buf.len());
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.poison.check(&self.name)?;
        check_access(&self.name, self.len, offset, data.len() as u64)?;
        if self.direct && data.as_ptr() as usize % Aligned::ALIGN != 0 {
            let mut a = self.staging(data.len());
            a.as_mut(data.len()).copy_from_slice(data);
            let written = self.file.write_all_at(a.as_mut(data.len()), offset);
            self.give_back(a);
            written.map_err(|e| self.fail("write", offset, e))?;
        } else {
            self.file.write_all_at(data, offset).map_err(|e| self.fail("write", offset, e))?;
        }
        self.counters.on_write(data.len());
        Ok(())
    }
    /// With O_DIRECT, the writes are submitted together (io_uring, or a few threads: see
    /// [`super::batch`]), their pieces copied once into an aligned staging buffer where they are
    /// not aligned or are several; through the page cache, where a pwrite is a memory copy, one
    /// after another, a write of several pieces as one pwritev.
    fn write_batch(&self, writes: &[Gather<'_>]) -> Result<(), DeviceError> {
        self.poison.check(&self.name)?;
        for w in writes {
            check_access(&self.name, self.len, w.offset, w.len() as u64)?;
        }
        if !self.direct {
            for w in writes {
                pwritev_all(&self.file, w.offset, w.pieces).map_err(|(offset, e)| self.fail("write", offset, e))?;
                self.counters.on_write(w.len());
            }
            return Ok(());
        }
        // One aligned buffer holds every write whose bytes are not one aligned piece.
        let staged = |w: &Gather<'_>| !matches!(w.pieces, [one] if one.as_ptr() as usize % Aligned::ALIGN == 0);
        let copied: usize = writes.iter().filter(|w| staged(w)).map(|w| w.len()).sum();
        let mut kept = self.staging(copied);
        let staging = kept.as_mut(copied);
        let mut batch: Vec<(u64, &[u8])> = Vec::with_capacity(writes.len());
        let mut rest: &mut [u8] = staging;
        for w in writes {
            if staged(w) {
                let (here, tail) = std::mem::take(&mut rest).split_at_mut(w.len());
                let mut at = 0;
                for p in w.pieces {
                    here[at..at + p.len()].copy_from_slice(p);
                    at += p.len();
                }
                batch.push((w.offset, here));
                rest = tail;
            } else {
                batch.push((w.offset, w.pieces[0]));
            }
        }
        let written = super::batch::write_all(&self.file, &batch, super::batch::engine());
        drop(batch);
        self.give_back(kept);
        written.map_err(|(offset, e)| self.fail("write", offset, e))?;
        for w in writes {
            self.counters.on_write(w.len());
        }
        Ok(())
    }
    fn flush(&self) -> Result<(), DeviceError> {
        self.poison.check(&self.name)?;
        self.file.sync_data().map_err(|e| self.fail("flush", 0, e))?;
        self.counters.on_flush();
        Ok(())
    }
    fn counters(&self) -> DeviceStats {
        self.counters.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes and reads through kept staging buffers of other sizes and contents carry only
    /// their own bytes: a buffer is reused without zeroing, so any byte the copy missed would
    /// show an earlier write's. Needs a file system that takes O_DIRECT (not tmpfs).
    #[test]
    fn staging_buffers_are_reused_and_carry_only_their_own_bytes() {
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let path = dir.path().join("img");
        drop(FileDevice::create(&path, 1 << 20, false).unwrap());
        let dev = match FileDevice::open_direct(&path, true) {
            Ok(d) => d,
            Err(e) => panic!("O_DIRECT on the crate's own directory: {e}"),
        };
        // Unaligned on purpose: a Vec's bytes one past a 4096-aligned start are not aligned.
        let unaligned = |len: usize, byte: u8| {
            let mut v = vec![0u8; len + 1];
            v[1..].fill(byte);
            v
        };
        let big = unaligned(3 * 4096, 0xAA);
        fn one<'a>(offset: u64, pieces: &'a [&'a [u8]]) -> Gather<'a> {
            Gather { offset, pieces }
        }
        dev.write_batch(&[one(0, &[&big[1..]]), one(8 * 4096, &[&big[1..]])]).unwrap();
        assert_eq!(dev.spare.lock().unwrap().len(), 1, "the batch's staging buffer is kept");
        let small = unaligned(4096, 0x55);
        dev.write_at(4 * 4096, &small[1..]).unwrap();
        dev.write_batch(&[one(5 * 4096, &[&small[1..]]), one(6 * 4096, &[&unaligned(4096, 0x11)[1..]])]).unwrap();
        let mut back = unaligned(12 * 4096, 0);
        dev.read_at(0, &mut back[1..]).unwrap();
        let back = &back[1..];
        let expect = |at: usize, len: usize, byte: u8| assert!(back[at..at + len].iter().all(|&b| b == byte), "bytes {at}..{} are not {byte:#x}", at + len);
        expect(0, 3 * 4096, 0xAA);
        expect(3 * 4096, 4096, 0);
        expect(4 * 4096, 2 * 4096, 0x55);
        expect(6 * 4096, 4096, 0x11);
        expect(7 * 4096, 4096, 0);
        expect(8 * 4096, 3 * 4096, 0xAA);
        {
            let kept = dev.spare.lock().unwrap();
            assert!(kept.len() <= SPARE_BUFFERS && kept.iter().all(|a| a.capacity() <= SPARE_MAX_BYTES));
            assert!(kept.iter().any(|a| a.capacity() >= 12 * 4096), "the largest buffer is kept for the next large read or batch");
        }
        // A block's worth takes the smallest buffer that holds it, whatever the order kept.
        dev.spare.lock().unwrap().clear();
        dev.give_back(Aligned::new(16 * 4096));
        dev.give_back(Aligned::new(4096));
        let a = dev.staging(4096);
        assert_eq!(a.capacity(), 4096, "a 4 KiB staging took the {}-byte buffer", a.capacity());
    }

    /// A write of several pieces lands as the pieces end to end, through O_DIRECT's staging
    /// (the pieces copied into one buffer) and through the page cache (pwritev), and a run
    /// beside other writes in one batch takes nothing of theirs. Pieces of different sizes and
    /// contents, so that a piece copied to the wrong place or twice shows.
    #[test]
    fn gathered_writes_land_their_pieces_end_to_end() {
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        for direct in [true, false] {
            let path = dir.path().join(format!("img-{direct}"));
            drop(FileDevice::create(&path, 1 << 20, false).unwrap());
            let dev = if direct { FileDevice::open_direct(&path, true) } else { FileDevice::open(&path) }.unwrap();
            let piece = |len: usize, byte: u8| vec![byte; len];
            let (a, b, c) = (piece(4096, 1), piece(2 * 4096, 2), piece(512, 3));
            let (d, e) = (piece(4096, 4), piece(4096, 5));
            let run: [&[u8]; 3] = [&a, &b, &c];
            let lone: [&[u8]; 1] = [&d];
            let pair: [&[u8]; 2] = [&e, &a];
            dev.write_batch(&[Gather { offset: 4096, pieces: &run }, Gather { offset: 10 * 4096, pieces: &lone }, Gather { offset: 20 * 4096, pieces: &pair }]).unwrap();
            let mut back = vec![0u8; 24 * 4096];
            dev.read_at(0, &mut back).unwrap();
            let expect = |at: usize, len: usize, byte: u8| assert!(back[at..at + len].iter().all(|&x| x == byte), "direct={direct}: bytes {at}..{} are not {byte}", at + len);
            expect(0, 4096, 0);
            expect(4096, 4096, 1);
            expect(2 * 4096, 2 * 4096, 2);
            expect(4 * 4096, 512, 3);
            expect(4 * 4096 + 512, 6 * 4096 - 512, 0);
            expect(10 * 4096, 4096, 4);
            expect(11 * 4096, 9 * 4096, 0);
            expect(20 * 4096, 4096, 5);
            expect(21 * 4096, 4096, 1);
            expect(22 * 4096, 2 * 4096, 0);
            assert_eq!(dev.counters().bytes_written, (3 * 4096 + 512 + 4096 + 2 * 4096) as u64, "direct={direct}");
        }
    }
}

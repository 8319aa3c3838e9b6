//! The floor line (`device:loop`): no file system at all, each record written as one 4 KiB
//! block with O_DIRECT to a raw loop device and flushed (fdatasync of the device), the device's
//! own rate of one small write plus a flush. A synced append on any file system costs at least
//! that much: it writes a block somewhere and flushes. Records go to consecutive blocks across
//! all streams (wrapping at the device's end), as a log would; a record longer than a block
//! takes as many blocks as it needs.

use super::loopdev::{block_stats, LoopSet};
use super::target::{Env, Measure, Setup, Stream};
use crate::report::{Bytes, DeviceBytes};
use std::alloc::Layout;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const BLOCK: u64 = 4096;

pub struct RawEnv {
    loops: LoopSet,
    /// The next block a record takes, shared by every stream.
    next: Arc<AtomicU64>,
    blocks: u64,
}

impl RawEnv {
    pub fn new(s: &Setup) -> Result<RawEnv, String> {
        // The second device of the set (the journal's, for the other targets) stays unused.
        let loops = LoopSet::new(&s.dir, s.fs_bytes, 1 << 20)?;
        let blocks = s.fs_bytes / BLOCK;
        if blocks == 0 {
            return Err("device:loop needs a device of at least one 4 KiB block".into());
        }
        Ok(RawEnv { loops, next: Arc::new(AtomicU64::new(0)), blocks })
    }
}

impl Env for RawEnv {
    fn target(&self) -> String {
        "device:loop".into()
    }
    fn mode(&self) -> String {
        "raw-4k-write+flush".into()
    }
    fn open(&self, _name: &str) -> Result<Box<dyn Stream>, String> {
        let dev = &self.loops.fs_dev;
        let f = std::fs::OpenOptions::new().read(true).write(true).custom_flags(libc::O_DIRECT).open(dev).map_err(|e| format!("{}: {e}", dev.display()))?;
        Ok(Box::new(RawStream { f, next: self.next.clone(), blocks: self.blocks, buf: AlignedBuf::new(BLOCK as usize)? }))
    }
    fn measure(&self) -> Result<Measure, String> {
        let (written, flushes) = block_stats(&self.loops.fs_dev)?;
        Ok(Measure {
            bytes: Bytes { payload_bytes: 0, journal_bytes: None, final_bytes: Some(written), per_kind: Default::default() },
            commits: None,
            device: Some(DeviceBytes { source: "/sys/block".into(), fs_written: written, journal_written: None, flushes: Some(flushes) }),
            counters: None,
        })
    }
    fn finish(self: Box<Self>) -> Result<Measure, String> {
        self.measure()
    }
}

/// A page-aligned buffer (O_DIRECT needs one), grown to whole blocks as records need.
struct AlignedBuf {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: the buffer is owned by one stream and reached only through it.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    fn new(len: usize) -> Result<AlignedBuf, String> {
        let layout = Layout::from_size_align(len, BLOCK as usize).map_err(|e| e.to_string())?;
        // SAFETY: the layout's size is not zero (at least one block).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err("out of memory for an aligned buffer".into());
        }
        Ok(AlignedBuf { ptr, layout })
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: `layout.size()` bytes allocated in `new`, owned by us.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

struct RawStream {
    f: std::fs::File,
    next: Arc<AtomicU64>,
    blocks: u64,
    buf: AlignedBuf,
}

impl Stream for RawStream {
    fn append(&mut self, data: &[u8]) -> Result<(), String> {
        let n = (data.len() as u64).div_ceil(BLOCK).max(1);
        if n > self.blocks {
            return Err(format!("a record of {} bytes is larger than the device", data.len()));
        }
        if self.buf.layout.size() < (n * BLOCK) as usize {
            self.buf = AlignedBuf::new((n * BLOCK) as usize)?;
        }
        let len = (n * BLOCK) as usize;
        let b = &mut self.buf.bytes()[..len];
        b[..data.len()].copy_from_slice(data);
        b[data.len()..].fill(0);
        // Consecutive blocks; a record that would cross the device's end starts at block 0.
        let mut at = self.next.fetch_add(n, Ordering::Relaxed) % self.blocks;
        if at + n > self.blocks {
            at = 0;
        }
        self.f.write_all_at(b, at * BLOCK).map_err(|e| format!("raw write at block {at}: {e}"))
    }
    fn write_at(&mut self, _off: u64, _data: &[u8]) -> Result<(), String> {
        Err("device:loop takes appends only (it is the floor line of synced appends)".into())
    }
    fn read_at(&mut self, _off: u64, _len: usize) -> Result<usize, String> {
        Err("device:loop takes appends only (it is the floor line of synced appends)".into())
    }
    fn sync(&mut self, _full: bool) -> Result<(), String> {
        // fdatasync of a block device flushes its write cache.
        self.f.sync_data().map_err(|e| format!("flushing the raw device: {e}"))
    }
}

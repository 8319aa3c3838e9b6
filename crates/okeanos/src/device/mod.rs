//! Devices: the only place where Okeanos touches storage.
//!
//! A [`Device`] is a byte-addressed store with sector-aligned reads and writes, a flush, and a
//! length. Its contract follows the crash model of docs/DESIGN.md section 3:
//! - `write_at` may be buffered by the device: it is durable only after a later `flush`
//!   completes. Until then it may be lost, reordered with other unflushed writes, or torn at
//!   512-byte sector boundaries.
//! - `flush` makes every write that completed before it durable.
//! - After an I/O error a device is *poisoned*: every later call fails with the same error. A
//!   failed flush is never retried, because the data it covered may already be gone (the lesson
//!   of the 2018 fsync-error discussions; redb's `CheckedBackend` does the same).
//!
//! Back ends: [`FileDevice`] (regular files and block devices such as loop devices),
//! [`MemDevice`] (tests, simulation), [`OverlayDevice`] (in-memory recovery for read-only mounts), [`CrashDevice`] (records every write and flush so a test can
//! build any crash state the model allows) and [`FaultDevice`] (injects I/O errors). [`MlbDevice`] is a device over
//! a device: block-level manylogs, which logs small writes near the disk head.
//! Every back end counts what it does in [`DeviceCounters`].

pub mod batch;
mod crash;
mod crash_image;
mod fault;
mod file;
pub mod lock;
pub mod remote;
mod memory;
pub mod mlb;
pub mod nvm;
mod overlay;
mod sparse;
mod timed;

pub use crash::{CrashDevice, CrashEvent, CrashNvm, CrashRecorder, CrashState, PendingLine, TearPlan};
pub use crash_image::CrashImage;
pub use fault::FaultDevice;
pub use file::FileDevice;
pub use memory::MemDevice;
pub use mlb::{MlbDevice, MlbGeometry, MlbStats};
pub use overlay::OverlayDevice;
pub use sparse::SparseDevice;
pub use timed::TimedDevice;

use std::sync::atomic::{AtomicU64, Ordering};

/// Size of the unit a device writes atomically.
pub const SECTOR_SIZE: u64 = 512;

/// An error from a device. Devices report the operation and offset so that the message a user
/// sees names what failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    #[error("I/O error on {device} during {op} at byte {offset}: {message}")]
    Io { device: String, op: &'static str, offset: u64, message: String },
    #[error("{device}: access of {len} bytes at byte {offset} is not sector-aligned")]
    Unaligned { device: String, offset: u64, len: u64 },
    #[error("{device}: access of {len} bytes at byte {offset} is past the end ({size} bytes)")]
    OutOfRange { device: String, offset: u64, len: u64, size: u64 },
    /// A journal server failed or refused an operation.
    #[error("{0}")]
    Remote(remote::RemoteError),
    #[error("{device} is in use by {holder}")]
    InUse { device: String, holder: String },
    /// The device could not be opened (missing, not permitted, a directory).
    #[error("{device}: {message}")]
    Open { device: String, message: String },
    #[error("{device} refused the request: an earlier I/O error poisoned it ({first})")]
    Poisoned { device: String, first: String },
}

/// Storage with sector-aligned access. Implementations are shared between threads: `&self`
/// methods may be called concurrently (pread/pwrite semantics).
pub trait Device: Send + Sync {
    /// A short human name for messages ("image.okfs", "/dev/loop3", "mem").
    fn name(&self) -> String;
    /// Length in bytes. Fixed for the life of the device.
    fn len_bytes(&self) -> u64;
    /// Reads `buf.len()` bytes at `offset`. Both must be multiples of [`SECTOR_SIZE`].
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), DeviceError>;
    /// Writes `data` at `offset`. Both must be multiples of [`SECTOR_SIZE`]. Not durable until a
    /// later [`Device::flush`] completes.
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), DeviceError>;
    /// Writes each of `writes` (its pieces end to end from its offset), as `write_at` each, in
    /// no particular order: the writes of one stage of an I/O plan, which the crash model lets
    /// land in any order until the next flush. Back ends that can keep several in flight (a
    /// block device with O_DIRECT) submit them together; the default issues them one after
    /// another, each run of several pieces joined first. On error, any subset of the others may
    /// have been written.
    fn write_batch(&self, writes: &[Gather<'_>]) -> Result<(), DeviceError> {
        for w in writes {
            match w.pieces {
                [one] => self.write_at(w.offset, one)?,
                many => self.write_at(w.offset, &many.concat())?,
            }
        }
        Ok(())
    }
    /// Makes every completed write durable.
    fn flush(&self) -> Result<(), DeviceError>;
    /// What this device has done so far.
    fn counters(&self) -> DeviceStats;
    /// Whether moving between distant blocks costs a seek (a rotational disk), if known.
    fn seeks(&self) -> Option<bool> {
        None
    }
    /// Whether a write of a few sectors costs less than a whole block: memory, and O_DIRECT on
    /// a device of 512-byte logical sectors. Not through the page cache (whole pages reach the
    /// disk, and a page not cached is read first) nor on 4 KiB-sector devices. The journal then
    /// writes only the sectors of a commit block that carry it (docs/FORMAT.md).
    fn short_writes(&self) -> bool {
        false
    }
}

/// One write of [`Device::write_batch`]: `pieces` laid end to end from byte `offset`. A run of
/// consecutive blocks, each in its own buffer, is one write without being joined into one
/// buffer first: a back end that must copy anyway (O_DIRECT's aligned staging) copies the
/// pieces once, one that need not (pwritev) does not copy them at all (issue 33: joining a
/// commit's runs was a copy, an allocation and its page faults on every commit).
#[derive(Clone, Copy, Debug)]
pub struct Gather<'a> {
    pub offset: u64,
    pub pieces: &'a [&'a [u8]],
}

impl Gather<'_> {
    /// The bytes of the write.
    pub fn len(&self) -> usize {
        self.pieces.iter().map(|p| p.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.pieces.iter().all(|p| p.is_empty())
    }
}

/// Checks alignment and range; every back end calls it first so all agree on the contract.
pub(crate) fn check_access(dev: &str, size: u64, offset: u64, len: u64) -> Result<(), DeviceError> {
    if offset % SECTOR_SIZE != 0 || len % SECTOR_SIZE != 0 {
        return Err(DeviceError::Unaligned { device: dev.to_string(), offset, len });
    }
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(DeviceError::OutOfRange { device: dev.to_string(), offset, len, size }),
    }
}

/// Operation and byte counters of one device, updated with relaxed atomics.
#[derive(Debug, Default)]
pub struct DeviceCounters {
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    reads: AtomicU64,
    writes: AtomicU64,
    flushes: AtomicU64,
}

counters! {
    /// A snapshot of [`DeviceCounters`].
    #[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
    pub struct DeviceStats {
        pub bytes_read: u64,
        pub bytes_written: u64,
        pub reads: u64,
        pub writes: u64,
        pub flushes: u64,
    }
}

impl DeviceCounters {
    pub fn on_read(&self, len: usize) {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.bytes_read.fetch_add(len as u64, Ordering::Relaxed);
    }
    pub fn on_write(&self, len: usize) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.bytes_written.fetch_add(len as u64, Ordering::Relaxed);
    }
    pub fn on_flush(&self) {
        self.flushes.fetch_add(1, Ordering::Relaxed);
    }
    pub fn snapshot(&self) -> DeviceStats {
        DeviceStats {
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
            reads: self.reads.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            flushes: self.flushes.load(Ordering::Relaxed),
        }
    }
}

/// First-error latch shared by back ends that poison themselves.
#[derive(Debug, Default)]
pub(crate) struct Poison(std::sync::Mutex<Option<String>>);

impl Poison {
    pub fn check(&self, device: &str) -> Result<(), DeviceError> {
        match &*self.0.lock().unwrap_or_else(|e| e.into_inner()) {
            None => Ok(()),
            Some(first) => Err(DeviceError::Poisoned { device: device.to_string(), first: first.clone() }),
        }
    }
    pub fn set(&self, err: &DeviceError) {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            *g = Some(err.to_string());
        }
    }
}

//! Helpers shared by the integration tests.
#![allow(dead_code)]

use okeanos::{DataMode, Device, MemDevice, MkfsOptions, MountOptions, Okeanos};
use std::sync::Arc;

pub const MB: u64 = 1 << 20;

/// A small file system in memory: `size` bytes, a journal of `journal_blocks`.
pub fn mem_fs(size: u64, journal_blocks: u64) -> Arc<MemDevice> {
    let dev = Arc::new(MemDevice::new(size));
    Okeanos::mkfs(dev.as_ref(), None, &MkfsOptions { journal_blocks, ..Default::default() }).expect("mkfs");
    dev
}

pub fn opts(mode: DataMode) -> MountOptions {
    MountOptions::default().data(mode)
}

pub fn mount(dev: &Arc<MemDevice>, mode: DataMode) -> Okeanos {
    Okeanos::mount(dev.clone() as Arc<dyn Device>, None, opts(mode)).expect("mount")
}

pub fn assert_fsck_clean(dev: Arc<dyn Device>, journal: Option<Arc<dyn Device>>) {
    let r = okeanos::fsck(dev, journal);
    assert!(r.is_clean(), "fsck found problems: {:#?}", r.problems);
}

/// Deterministic record contents: stream `s`, record `k`, `len` bytes.
pub fn record(s: usize, k: usize, len: usize) -> Vec<u8> {
    let mut x = (s as u64) << 32 | k as u64 | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 251) as u8 + 1
        })
        .collect()
}

/// A device whose next flush, once armed, fails or panics (a panic: a broken invariant in the
/// middle of a commit's I/O, which stops the journal from whichever thread ran it).
pub struct FlushFault {
    pub dev: Arc<dyn Device>,
    pub armed: std::sync::atomic::AtomicBool,
    pub panics: bool,
}

impl FlushFault {
    pub fn new(dev: Arc<dyn Device>, panics: bool) -> Self {
        FlushFault { dev, armed: false.into(), panics }
    }

    pub fn arm(&self) {
        self.armed.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Device for FlushFault {
    fn name(&self) -> String {
        self.dev.name()
    }
    fn len_bytes(&self) -> u64 {
        self.dev.len_bytes()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), okeanos::device::DeviceError> {
        self.dev.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), okeanos::device::DeviceError> {
        self.dev.write_at(offset, data)
    }
    fn flush(&self) -> Result<(), okeanos::device::DeviceError> {
        if self.armed.swap(false, std::sync::atomic::Ordering::SeqCst) {
            assert!(!self.panics, "test fault: a panic inside a commit's flush");
            return Err(okeanos::device::DeviceError::Io { device: self.dev.name(), op: "flush", offset: 0, message: "test fault: the flush failed".into() });
        }
        self.dev.flush()
    }
    fn counters(&self) -> okeanos::device::DeviceStats {
        self.dev.counters()
    }
}

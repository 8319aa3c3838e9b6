//! A device that fails on command: after a given number of writes or flushes, every operation
//! returns an I/O error — or only one flush fails and the device works again after it, so that a
//! test can tell a blind retry (which would then succeed) from none. Used to check that the
//! engine turns read-only on an I/O error and never retries a failed flush.

use super::{Device, DeviceError, DeviceStats};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

pub struct FaultDevice {
    inner: Arc<dyn Device>,
    /// Operations (writes and flushes) left before failure; negative means never fail.
    ops_left: AtomicI64,
    /// Flushes left before the one that fails once; negative means none.
    flush_fails_once: AtomicI64,
    /// Every flush asked of this device, failed ones included.
    flush_attempts: std::sync::atomic::AtomicU64,
}

impl FaultDevice {
    pub fn new(inner: Arc<dyn Device>) -> Self {
        FaultDevice { inner, ops_left: AtomicI64::new(-1), flush_fails_once: AtomicI64::new(-1), flush_attempts: Default::default() }
    }
    /// The flush after `n` more succeed fails; every operation after it succeeds again (a
    /// transient error: a retry would hide it).
    pub fn fail_one_flush_after(&self, n: i64) {
        self.flush_fails_once.store(n, Ordering::SeqCst);
    }
    /// Flushes asked of the device so far, failed ones included.
    pub fn flush_attempts(&self) -> u64 {
        self.flush_attempts.load(Ordering::SeqCst)
    }
    /// Fail every write and flush after `n` more of them succeed.
    pub fn fail_after(&self, n: i64) {
        self.ops_left.store(n, Ordering::SeqCst);
    }
    fn tick(&self, op: &'static str, offset: u64) -> Result<(), DeviceError> {
        let left = self.ops_left.load(Ordering::SeqCst);
        if left < 0 {
            return Ok(());
        }
        if left == 0 {
            return Err(DeviceError::Io { device: self.name(), op, offset, message: "injected fault".into() });
        }
        self.ops_left.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

impl Device for FaultDevice {
    fn name(&self) -> String {
        format!("fault({})", self.inner.name())
    }
    fn len_bytes(&self) -> u64 {
        self.inner.len_bytes()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.tick("write", offset)?;
        self.inner.write_at(offset, data)
    }
    fn flush(&self) -> Result<(), DeviceError> {
        self.flush_attempts.fetch_add(1, Ordering::SeqCst);
        match self.flush_fails_once.load(Ordering::SeqCst) {
            0 => {
                self.flush_fails_once.store(-1, Ordering::SeqCst);
                return Err(DeviceError::Io { device: self.name(), op: "flush", offset: 0, message: "injected transient fault".into() });
            }
            n if n > 0 => drop(self.flush_fails_once.fetch_sub(1, Ordering::SeqCst)),
            _ => {}
        }
        self.tick("flush", 0)?;
        self.inner.flush()
    }
    fn short_writes(&self) -> bool {
        self.inner.short_writes()
    }
    fn counters(&self) -> DeviceStats {
        self.inner.counters()
    }
}

//! A device that fails on command: after a given number of writes or flushes, every operation
//! returns an I/O error. Used to check that the engine turns read-only on an I/O error and never
//! retries a failed flush.

use super::{Device, DeviceError, DeviceStats};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

pub struct FaultDevice {
    inner: Arc<dyn Device>,
    /// Operations (writes and flushes) left before failure; negative means never fail.
    ops_left: AtomicI64,
}

impl FaultDevice {
    pub fn new(inner: Arc<dyn Device>) -> Self {
        FaultDevice { inner, ops_left: AtomicI64::new(-1) }
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
        self.tick("flush", 0)?;
        self.inner.flush()
    }
    fn counters(&self) -> DeviceStats {
        self.inner.counters()
    }
}

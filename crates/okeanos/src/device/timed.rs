//! Timed emulation: a device that delays each real I/O as a [`DiskModel`] says, so the real
//! runtime — and a FUSE mount with real programs on it — behaves like a 15k disk
//! (`okeanos mount -o device_model=cheetah15k`). The model sees real monotonic time;
//! concurrent requests queue in it as they would in the modelled device. The data goes to the
//! wrapped device unchanged.

use super::{Device, DeviceError, DeviceStats};
use crate::models::{DiskModel, Op};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct TimedDevice {
    inner: Arc<dyn Device>,
    model: Mutex<Box<dyn DiskModel>>,
    origin: Instant,
}

impl TimedDevice {
    pub fn new(inner: Arc<dyn Device>, model: Box<dyn DiskModel>) -> Self {
        TimedDevice { inner, model: Mutex::new(model), origin: Instant::now() }
    }

    /// Does `f`, then sleeps until the model says the request completes.
    fn timed<R>(&self, op: Op, offset: u64, len: u64, f: impl FnOnce() -> R) -> R {
        let now = self.origin.elapsed().as_nanos() as u64;
        let done = self.model.lock().unwrap_or_else(|e| e.into_inner()).submit(now, op, offset, len);
        let r = f();
        let elapsed = self.origin.elapsed().as_nanos() as u64;
        if done > elapsed {
            std::thread::sleep(Duration::from_nanos(done - elapsed));
        }
        r
    }
}

impl Device for TimedDevice {
    fn seeks(&self) -> Option<bool> {
        Some(self.model.lock().unwrap_or_else(|e| e.into_inner()).seeks())
    }
    fn name(&self) -> String {
        format!("{} (timed)", self.inner.name())
    }
    fn len_bytes(&self) -> u64 {
        self.inner.len_bytes()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        let len = buf.len() as u64;
        self.timed(Op::Read, offset, len, || self.inner.read_at(offset, buf))
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.timed(Op::Write, offset, data.len() as u64, || self.inner.write_at(offset, data))
    }
    fn flush(&self) -> Result<(), DeviceError> {
        self.timed(Op::Flush, 0, 0, || self.inner.flush())
    }
    fn short_writes(&self) -> bool {
        self.inner.short_writes()
    }
    fn counters(&self) -> DeviceStats {
        self.inner.counters()
    }
}

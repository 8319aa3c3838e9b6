//! A device for sequential phases of a simulation (recovery): each I/O advances the virtual
//! clock to the moment the model says it completes, so the engine's own timing of recovery's
//! passes (which reads the clock between them) comes out in virtual time.

use super::clock::VirtualClock;
use crate::models::{DiskModel, Op};
use crate::clock::Clock;
use crate::device::{Device, DeviceError, DeviceStats};
use std::sync::{Arc, Mutex};

pub struct ClockedDevice {
    inner: Arc<dyn Device>,
    model: Mutex<Box<dyn DiskModel>>,
    clock: Arc<VirtualClock>,
}

impl ClockedDevice {
    pub fn new(inner: Arc<dyn Device>, model: Box<dyn DiskModel>, clock: Arc<VirtualClock>) -> Self {
        ClockedDevice { inner, model: Mutex::new(model), clock }
    }

    fn tick(&self, op: Op, offset: u64, len: u64) {
        let now = self.clock.now_ns();
        let done = self.model.lock().unwrap_or_else(|e| e.into_inner()).submit(now, op, offset, len);
        self.clock.advance_to(done);
    }
}

impl Device for ClockedDevice {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn len_bytes(&self) -> u64 {
        self.inner.len_bytes()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.inner.read_at(offset, buf)?;
        self.tick(Op::Read, offset, buf.len() as u64);
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.inner.write_at(offset, data)?;
        self.tick(Op::Write, offset, data.len() as u64);
        Ok(())
    }
    fn flush(&self) -> Result<(), DeviceError> {
        self.inner.flush()?;
        self.tick(Op::Flush, 0, 0);
        Ok(())
    }
    fn counters(&self) -> DeviceStats {
        self.inner.counters()
    }
}

//! Timed NVM: each operation takes as long as a [`DiskModel`] (the simulator's `nvm` model)
//! says, so a real mount behaves like persistent memory of that speed whatever holds the bytes
//! (`okeanos mount -o device_model=...` times the disks, and the NVM with the `nvm` preset). The
//! model sees real monotonic time; a store is a write of its bytes, a fence a persist barrier,
//! a flush free (its cost is in the fence). Sub-microsecond waits spin: a sleep would take
//! tens of microseconds.

use super::{Durability, Nvm, NvmStats};
use crate::device::DeviceError;
use crate::models::{DiskModel, Op};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct TimedNvm {
    inner: Arc<dyn Nvm>,
    model: Mutex<Box<dyn DiskModel>>,
    origin: Instant,
}

impl TimedNvm {
    pub fn new(inner: Arc<dyn Nvm>, model: Box<dyn DiskModel>) -> Self {
        TimedNvm { inner, model: Mutex::new(model), origin: Instant::now() }
    }

    fn timed<R>(&self, op: Op, at: u64, len: u64, f: impl FnOnce() -> R) -> R {
        let now = self.origin.elapsed().as_nanos() as u64;
        let done = self.model.lock().unwrap_or_else(|e| e.into_inner()).submit(now, op, at, len);
        let r = f();
        loop {
            let t = self.origin.elapsed().as_nanos() as u64;
            if t >= done {
                break;
            }
            if done - t > 200_000 {
                std::thread::sleep(Duration::from_nanos(done - t - 100_000));
            } else {
                std::hint::spin_loop();
            }
        }
        r
    }
}

impl Nvm for TimedNvm {
    fn name(&self) -> String {
        format!("{} (timed)", self.inner.name())
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn store(&self, at: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.timed(Op::Write, at, data.len() as u64, || self.inner.store(at, data))
    }
    fn flush(&self, at: u64, len: u64) -> Result<(), DeviceError> {
        self.inner.flush(at, len)
    }
    fn fence(&self) -> Result<(), DeviceError> {
        self.timed(Op::Flush, 0, 0, || self.inner.fence())
    }
    fn load(&self, at: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.timed(Op::Read, at, buf.len() as u64, || self.inner.load(at, buf))
    }
    fn durability(&self) -> Durability {
        self.inner.durability()
    }
    fn counters(&self) -> NvmStats {
        self.inner.counters()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_take_the_model_time() {
        let nvm = TimedNvm::new(Arc::new(super::super::MemNvm::new(1 << 20)), crate::models::preset("nvm").unwrap());
        let t = Instant::now();
        for i in 0..100 {
            nvm.store(i * 4096, &[1u8; 4096]).unwrap();
            nvm.fence().unwrap();
        }
        // 100 × (100 ns + 4096 B at 2 GB/s + a 100 ns fence) ≈ 225 µs at least.
        assert!(t.elapsed() >= Duration::from_micros(220), "{:?}", t.elapsed());
        let mut b = [0u8; 4];
        nvm.load(4096, &mut b).unwrap();
        assert_eq!(b, [1; 4]);
    }
}

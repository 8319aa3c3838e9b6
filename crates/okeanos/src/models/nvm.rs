//! Byte-addressable non-volatile memory (UBJ's buffer cache lives in it): sub-microsecond
//! access and a persist barrier of about 100 ns. Numbers after Intel Optane DC persistent
//! memory measurements (Izraelevitz et al., "Basic Performance Measurements of the Intel
//! Optane DC Persistent Memory Module", 2019: about 300 ns read latency, about 2 GB/s write
//! bandwidth per module, fences near 100 ns).

use super::{DiskModel, Op};

#[derive(Debug, Clone)]
pub struct NvmParams {
    pub read_ns: u64,
    pub write_ns: u64,
    pub persist_ns: u64,
    pub bps: f64,
    pub capacity: u64,
}

impl Default for NvmParams {
    fn default() -> Self {
        NvmParams { read_ns: 300, write_ns: 100, persist_ns: 100, bps: 2e9, capacity: 128 << 30 }
    }
}

#[derive(Debug)]
pub struct Nvm {
    p: NvmParams,
    free: u64,
}

impl Nvm {
    pub fn new(p: NvmParams) -> Self {
        Nvm { p, free: 0 }
    }
}

impl DiskModel for Nvm {
    fn submit(&mut self, now: u64, op: Op, _offset: u64, len: u64) -> u64 {
        let start = now.max(self.free);
        let t = match op {
            Op::Read => self.p.read_ns + (len as f64 / self.p.bps * 1e9) as u64,
            Op::Write => self.p.write_ns + (len as f64 / self.p.bps * 1e9) as u64,
            Op::Flush => self.p.persist_ns,
        };
        self.free = start + t;
        self.free
    }
    fn describe(&self) -> String {
        format!("nvm: {} ns read, {} ns write, {} ns persist barrier, {:.1} GB/s", self.p.read_ns, self.p.write_ns, self.p.persist_ns, self.p.bps / 1e9)
    }
    fn capacity(&self) -> u64 {
        self.p.capacity
    }
}

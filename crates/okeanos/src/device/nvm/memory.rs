//! NVM in ordinary memory: the tests' and the simulator's back end. Every store is immediately
//! "durable" for as long as the process lives (nothing here crashes; crash states come from
//! [`crate::device::CrashNvm`]).

use super::{check_range, Durability, Nvm, NvmCounters, NvmStats};
use crate::device::DeviceError;
use std::sync::Mutex;

pub struct MemNvm {
    name: String,
    bytes: Mutex<Vec<u8>>,
    counters: NvmCounters,
}

impl MemNvm {
    pub fn new(len: u64) -> Self {
        Self::from_bytes(vec![0; len as usize])
    }
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        MemNvm { name: "mem-nvm".into(), bytes: Mutex::new(bytes), counters: NvmCounters::default() }
    }
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }
    /// A copy of the contents.
    pub fn snapshot(&self) -> Vec<u8> {
        self.lock().clone()
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.bytes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Nvm for MemNvm {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn len(&self) -> u64 {
        self.lock().len() as u64
    }
    fn store(&self, at: u64, data: &[u8]) -> Result<(), DeviceError> {
        let mut b = self.lock();
        check_range(&self.name, b.len() as u64, at, data.len() as u64)?;
        b[at as usize..at as usize + data.len()].copy_from_slice(data);
        self.counters.on_store(data.len());
        Ok(())
    }
    fn flush(&self, at: u64, len: u64) -> Result<(), DeviceError> {
        check_range(&self.name, self.len(), at, len)?;
        self.counters.on_flush(at, len);
        Ok(())
    }
    fn fence(&self) -> Result<(), DeviceError> {
        self.counters.on_fence();
        Ok(())
    }
    fn load(&self, at: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        let b = self.lock();
        check_range(&self.name, b.len() as u64, at, buf.len() as u64)?;
        buf.copy_from_slice(&b[at as usize..at as usize + buf.len()]);
        self.counters.on_load(buf.len());
        Ok(())
    }
    fn durability(&self) -> Durability {
        Durability::ProcessCrash
    }
    fn counters(&self) -> NvmStats {
        self.counters.get()
    }
}

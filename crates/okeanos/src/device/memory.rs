//! An in-memory device: every write is immediately "durable" (a crash is modelled by
//! [`super::CrashDevice`], not here).

use super::{check_access, Device, DeviceCounters, DeviceError, DeviceStats};
use std::sync::Mutex;

pub struct MemDevice {
    name: String,
    bytes: Mutex<Vec<u8>>,
    counters: DeviceCounters,
    /// What [`Device::seeks`] says (the simulator sets it from its disk model).
    seeks: Option<bool>,
}

impl MemDevice {
    pub fn new(len: u64) -> Self {
        Self::from_bytes(vec![0; len as usize])
    }
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        MemDevice { name: "mem".into(), bytes: Mutex::new(bytes), counters: DeviceCounters::default(), seeks: None }
    }
    /// Says it seeks, or not, as the disk it stands for (the simulator's models).
    pub fn seeking(mut self, seeks: bool) -> Self {
        self.seeks = Some(seeks);
        self
    }
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }
    /// A copy of the whole contents.
    pub fn snapshot(&self) -> Vec<u8> {
        self.bytes.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Device for MemDevice {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn len_bytes(&self) -> u64 {
        self.bytes.lock().unwrap_or_else(|e| e.into_inner()).len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        let bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        check_access(&self.name, bytes.len() as u64, offset, buf.len() as u64)?;
        buf.copy_from_slice(&bytes[offset as usize..offset as usize + buf.len()]);
        self.counters.on_read(buf.len());
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        let mut bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        check_access(&self.name, bytes.len() as u64, offset, data.len() as u64)?;
        bytes[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        self.counters.on_write(data.len());
        Ok(())
    }
    fn flush(&self) -> Result<(), DeviceError> {
        self.counters.on_flush();
        Ok(())
    }
    fn short_writes(&self) -> bool {
        true
    }
    fn seeks(&self) -> Option<bool> {
        self.seeks
    }
    fn counters(&self) -> DeviceStats {
        self.counters.snapshot()
    }
}

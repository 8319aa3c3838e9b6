//! A copy-on-write view of a device: reads come from the device below, writes stay in memory.
//! A read-only mount of an image whose journal needs recovery replays the journal into this
//! overlay (as ext4 recovers in memory for `ro` when the device itself is read-only), so that
//! `ls`, `cat` and `mount -o ro` see the recovered file system while the image stays untouched.

use super::{check_access, Device, DeviceCounters, DeviceError, DeviceStats, SECTOR_SIZE};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

pub struct OverlayDevice {
    base: Arc<dyn Device>,
    /// Written sectors, by sector number.
    sectors: Mutex<BTreeMap<u64, Box<[u8]>>>,
    counters: DeviceCounters,
}

impl OverlayDevice {
    pub fn new(base: Arc<dyn Device>) -> Self {
        OverlayDevice { base, sectors: Mutex::new(BTreeMap::new()), counters: DeviceCounters::default() }
    }

    /// Bytes held in memory.
    pub fn overlay_bytes(&self) -> u64 {
        self.sectors.lock().unwrap_or_else(|e| e.into_inner()).len() as u64 * SECTOR_SIZE
    }
}

impl Device for OverlayDevice {
    fn name(&self) -> String {
        format!("{} (in-memory overlay)", self.base.name())
    }
    fn len_bytes(&self) -> u64 {
        self.base.len_bytes()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        check_access(&self.name(), self.len_bytes(), offset, buf.len() as u64)?;
        self.base.read_at(offset, buf)?;
        let first = offset / SECTOR_SIZE;
        let end = first + buf.len() as u64 / SECTOR_SIZE;
        for (&s, data) in self.sectors.lock().unwrap_or_else(|e| e.into_inner()).range(first..end) {
            let at = ((s - first) * SECTOR_SIZE) as usize;
            buf[at..at + SECTOR_SIZE as usize].copy_from_slice(data);
        }
        self.counters.on_read(buf.len());
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        check_access(&self.name(), self.len_bytes(), offset, data.len() as u64)?;
        let mut map = self.sectors.lock().unwrap_or_else(|e| e.into_inner());
        for (i, chunk) in data.chunks(SECTOR_SIZE as usize).enumerate() {
            map.insert(offset / SECTOR_SIZE + i as u64, chunk.into());
        }
        self.counters.on_write(data.len());
        Ok(())
    }
    fn flush(&self) -> Result<(), DeviceError> {
        self.counters.on_flush();
        Ok(())
    }
    fn short_writes(&self) -> bool {
        self.base.short_writes()
    }
    fn counters(&self) -> DeviceStats {
        self.counters.snapshot()
    }
}

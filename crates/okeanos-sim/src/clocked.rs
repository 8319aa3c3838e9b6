//! A device for sequential phases of a simulation (recovery): each I/O advances the virtual
//! clock to the moment the model says it completes, so the engine's own timing of recovery's
//! passes (which reads the clock between them) comes out in virtual time.

use super::clock::VirtualClock;
use okeanos::models::{DiskModel, Op};
use okeanos::clock::Clock;
use okeanos::device::{Device, DeviceError, DeviceStats};
use std::sync::{Arc, Mutex};

/// A model and the clock it advances: each operation completes when the model says, and the
/// clock moves there before the caller goes on.
struct Timeline {
    model: Mutex<Box<dyn DiskModel>>,
    clock: Arc<VirtualClock>,
}

impl Timeline {
    fn tick(&self, op: Op, offset: u64, len: u64) {
        let now = self.clock.now_ns();
        let done = self.model.lock().unwrap_or_else(|e| e.into_inner()).submit(now, op, offset, len);
        self.clock.advance_to(done);
    }
}

pub struct ClockedDevice {
    inner: Arc<dyn Device>,
    time: Timeline,
}

impl ClockedDevice {
    pub fn new(inner: Arc<dyn Device>, model: Box<dyn DiskModel>, clock: Arc<VirtualClock>) -> Self {
        ClockedDevice { inner, time: Timeline { model: Mutex::new(model), clock } }
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
        self.time.tick(Op::Read, offset, buf.len() as u64);
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.inner.write_at(offset, data)?;
        self.time.tick(Op::Write, offset, data.len() as u64);
        Ok(())
    }
    fn flush(&self) -> Result<(), DeviceError> {
        self.inner.flush()?;
        self.time.tick(Op::Flush, 0, 0);
        Ok(())
    }
    fn short_writes(&self) -> bool {
        self.inner.short_writes()
    }
    fn counters(&self) -> DeviceStats {
        self.inner.counters()
    }
}

/// The NVM of an nvm journal in a sequential phase (recovery): each load, store and fence
/// advances the virtual clock as the `nvm` model says (a store is a write of its bytes, a
/// fence a persist barrier, a flush free), as [`okeanos::nvm::TimedNvm`] does in real time.
pub struct ClockedNvm {
    inner: Arc<dyn okeanos::nvm::Nvm>,
    time: Timeline,
}

impl ClockedNvm {
    pub fn new(inner: Arc<dyn okeanos::nvm::Nvm>, model: Box<dyn DiskModel>, clock: Arc<VirtualClock>) -> Self {
        ClockedNvm { inner, time: Timeline { model: Mutex::new(model), clock } }
    }
}

impl okeanos::nvm::Nvm for ClockedNvm {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn store(&self, at: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.inner.store(at, data)?;
        self.time.tick(Op::Write, at, data.len() as u64);
        Ok(())
    }
    fn flush(&self, at: u64, len: u64) -> Result<(), DeviceError> {
        self.inner.flush(at, len)
    }
    fn fence(&self) -> Result<(), DeviceError> {
        self.inner.fence()?;
        self.time.tick(Op::Flush, 0, 0);
        Ok(())
    }
    fn load(&self, at: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.inner.load(at, buf)?;
        self.time.tick(Op::Read, at, buf.len() as u64);
        Ok(())
    }
    fn durability(&self) -> okeanos::nvm::Durability {
        self.inner.durability()
    }
    fn counters(&self) -> okeanos::nvm::NvmStats {
        self.inner.counters()
    }
}

/// The link to a simulated journal server in a sequential phase (recovery): every request is
/// a round trip on the `net` model, and a read of the log also carries its bytes back and
/// reads them from the server's disk (sequentially, from the start of its log). Appends and
/// their acknowledgements are timed the same way, as one round trip with the append's bytes,
/// a write and a flush on the server's disk.
pub struct ClockedLink {
    inner: Box<dyn okeanos::remote::Link>,
    models: Arc<Mutex<LinkModels>>,
    clock: Arc<VirtualClock>,
}

/// The link's and the server disk's models, shared by every connection to one server.
pub struct LinkModels {
    pub net: Box<dyn DiskModel>,
    pub server_disk: Box<dyn DiskModel>,
}

impl ClockedLink {
    pub fn new(inner: Box<dyn okeanos::remote::Link>, models: Arc<Mutex<LinkModels>>, clock: Arc<VirtualClock>) -> Self {
        ClockedLink { inner, models, clock }
    }

    /// A round trip: `sent` bytes out and `back` bytes in cross the link (one round trip and
    /// their transfer, as `models::net` times an append), after `disk` on the server's disk.
    /// The server's disk time is counted before the link's, not between its halves: the total
    /// is the same (as `World::remote_op` counts it).
    fn round_trip(&mut self, sent: u64, disk: Option<(Op, u64)>, back: u64) {
        let mut m = self.models.lock().unwrap_or_else(|e| e.into_inner());
        let mut t = self.clock.now_ns();
        if let Some((op, len)) = disk {
            t = m.server_disk.submit(t, op, 0, len);
            if op == Op::Write {
                t = m.server_disk.submit(t, Op::Flush, 0, 0);
            }
        }
        t = m.net.submit(t, Op::Write, 0, sent + back);
        self.clock.advance_to(t);
    }
}

impl okeanos::remote::Link for ClockedLink {
    fn journal(&self) -> okeanos::remote::client::ServerJournal {
        self.inner.journal()
    }
    fn send_append(&mut self, tid: u64, block_size: u32, blocks: Vec<u8>) -> Result<(), okeanos::remote::client::RemoteError> {
        let n = blocks.len() as u64;
        self.inner.send_append(tid, block_size, blocks)?;
        self.round_trip(n, Some((Op::Write, n)), 0);
        Ok(())
    }
    fn wait_ack(&mut self) -> Result<u64, okeanos::remote::client::RemoteError> {
        self.inner.wait_ack()
    }
    fn trim(&mut self, upto: u64) -> Result<u64, okeanos::remote::client::RemoteError> {
        let r = self.inner.trim(upto)?;
        self.round_trip(0, None, 0);
        Ok(r)
    }
    fn read_from(&mut self, from: u64) -> Result<Vec<(u64, u32, Vec<u8>)>, okeanos::remote::client::RemoteError> {
        let r = self.inner.read_from(from)?;
        let bytes: u64 = r.iter().map(|(_, _, b)| b.len() as u64).sum();
        self.round_trip(0, (bytes > 0).then_some((Op::Read, bytes)), bytes);
        Ok(r)
    }
    fn fence(&mut self, epoch: u64) -> Result<u64, okeanos::remote::client::RemoteError> {
        let r = self.inner.fence(epoch)?;
        self.round_trip(0, None, 0);
        Ok(r)
    }
}

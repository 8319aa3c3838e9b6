//! Non-volatile memory: the medium of the `nvm` placement (UBJ, issue 14), an interface of its
//! own beside [`crate::device::Device`] because its unit of atomicity and ordering is not a
//! sector but an 8-byte store and a cache line.
//!
//! The persistence model (the x86 one, as for Intel Optane DC persistent memory), which the
//! crash tests enumerate ([`crate::device::CrashRecorder::nvm`]):
//! - [`Nvm::store`] writes bytes into the (volatile) CPU cache. An aligned 8-byte word is
//!   stored atomically: after a crash it holds the old or the new value, never a mix.
//! - Stores to one cache line ([`CACHE_LINE`] bytes) reach the medium in program order: after a
//!   crash a line holds a prefix of the stores made to it. A line may be written back at any
//!   moment (eviction), so any prefix, including all of them, may have persisted.
//! - Nothing is ordered across lines unless [`Nvm::flush`] (clwb) the lines and then
//!   [`Nvm::fence`] (sfence): every store flushed before a fence is durable when the fence
//!   returns.
//!
//! Back ends: [`MemNvm`] (tests and the simulator, which times the operations of a plan on its
//! nvm model in virtual time), [`crate::device::CrashNvm`] (records every operation for crash
//! states), [`TimedNvm`] (real time on the nvm model, for `device_model=` mounts) and
//! [`MappedNvm`] (a file mapped into memory: with MAP_SYNC on a DAX device or a file on a dax
//! mount, flush and fence are the CPU's cache-line write-back and store fence; otherwise msync,
//! see [`Durability`]).

mod file;
mod memory;
mod timed;

pub use file::MappedNvm;
pub use memory::MemNvm;
pub use timed::TimedNvm;

use crate::device::DeviceError;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Bytes in a cache line: the unit of write-back and of in-order persistence.
pub const CACHE_LINE: u64 = 64;
/// Bytes of a store that persists atomically (aligned).
pub const ATOMIC_STORE: u64 = 8;

/// What a back end's fence guarantees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Durability {
    /// Durable across power loss: persistent memory with MAP_SYNC (or a model of it).
    PowerLoss,
    /// msync of a file on a disk: durable across power loss as far as the file system under it
    /// makes msync durable, at a page write-back per fence.
    Msync,
    /// Memory that a power loss wipes (a file on tmpfs, or plain RAM): durable across a crash
    /// of the process only.
    ProcessCrash,
}

impl Durability {
    pub fn describe(self) -> &'static str {
        match self {
            Durability::PowerLoss => "power loss (persistent memory, MAP_SYNC)",
            Durability::Msync => "power loss through msync to a file on a disk (a page write-back per fence)",
            Durability::ProcessCrash => "process crash only (volatile memory: tmpfs or RAM)",
        }
    }
}

/// What a back end did, for `okeanos stat` and the benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct NvmStats {
    pub stores: u64,
    pub store_bytes: u64,
    /// Cache lines flushed.
    pub flushed_lines: u64,
    pub fences: u64,
    pub load_bytes: u64,
}

/// Counters a back end keeps.
#[derive(Debug, Default)]
pub struct NvmCounters {
    stores: AtomicU64,
    store_bytes: AtomicU64,
    flushed_lines: AtomicU64,
    fences: AtomicU64,
    load_bytes: AtomicU64,
}

impl NvmCounters {
    pub fn on_store(&self, bytes: usize) {
        self.stores.fetch_add(1, Relaxed);
        self.store_bytes.fetch_add(bytes as u64, Relaxed);
    }
    pub fn on_flush(&self, at: u64, len: u64) {
        self.flushed_lines.fetch_add(lines(at, len), Relaxed);
    }
    pub fn on_fence(&self) {
        self.fences.fetch_add(1, Relaxed);
    }
    pub fn on_load(&self, bytes: usize) {
        self.load_bytes.fetch_add(bytes as u64, Relaxed);
    }
    pub fn get(&self) -> NvmStats {
        NvmStats {
            stores: self.stores.load(Relaxed),
            store_bytes: self.store_bytes.load(Relaxed),
            flushed_lines: self.flushed_lines.load(Relaxed),
            fences: self.fences.load(Relaxed),
            load_bytes: self.load_bytes.load(Relaxed),
        }
    }
}

/// Cache lines covering `[at, at + len)`.
pub fn lines(at: u64, len: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    (at + len).div_ceil(CACHE_LINE) - at / CACHE_LINE
}

/// Byte-addressable non-volatile memory. `&self` methods may be called from several threads;
/// the placement never stores to one range from two at once.
pub trait Nvm: Send + Sync {
    /// A short human name for messages.
    fn name(&self) -> String;
    /// Bytes in the region.
    fn len(&self) -> u64;
    /// Stores `data` at `at` (into the CPU cache: durable only after flush and fence).
    fn store(&self, at: u64, data: &[u8]) -> Result<(), DeviceError>;
    /// Writes back the cache lines covering `[at, at + len)` (clwb).
    fn flush(&self, at: u64, len: u64) -> Result<(), DeviceError>;
    /// Waits until every flushed line is durable (sfence).
    fn fence(&self) -> Result<(), DeviceError>;
    /// Reads `buf.len()` bytes at `at`.
    fn load(&self, at: u64, buf: &mut [u8]) -> Result<(), DeviceError>;
    /// What a fence guarantees on this back end.
    fn durability(&self) -> Durability;
    fn counters(&self) -> NvmStats;
}

/// An NVM region handed to a mount (tests and the simulator; a real mount opens the path its
/// superblock records).
#[derive(Clone)]
pub struct NvmHandle(pub std::sync::Arc<dyn Nvm>);

impl std::fmt::Debug for NvmHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NvmHandle({})", self.0.name())
    }
}

/// The error of an access outside the region.
pub fn check_range(name: &str, size: u64, at: u64, len: u64) -> Result<(), DeviceError> {
    match at.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(DeviceError::OutOfRange { device: name.to_string(), offset: at, len, size }),
    }
}

//! NVM as a file mapped into memory. On a DAX device, or a file on a file system mounted with
//! `-o dax`, the mapping is made with MAP_SYNC: stores go to persistent memory, `flush` is the
//! CPU's cache-line write-back and `fence` its store fence, and a fence makes the flushed lines
//! durable across power loss. Elsewhere MAP_SYNC is refused and the file is mapped shared:
//! `fence` then msyncs the pages flushed since the last fence. On tmpfs that protects against
//! a crash of the process only (the memory is the file); on a disk it is durable as far as that
//! file system honours msync, at a page write-back per fence. [`MappedNvm::durability`] says
//! which, and `okeanos stat` prints it.

use super::{check_range, Durability, Nvm, NvmCounters, NvmStats, CACHE_LINE};
use crate::device::lock::LockMode;
use crate::device::DeviceError;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::Mutex;

/// `statfs.f_type` of the file systems whose files are memory.
const TMPFS_MAGIC: i64 = 0x0102_1994;
const RAMFS_MAGIC: i64 = 0x8584_58f6;

pub struct MappedNvm {
    name: String,
    _file: File,
    base: *mut u8,
    len: u64,
    /// MAP_SYNC: flush and fence are CPU instructions.
    sync: bool,
    durability: Durability,
    /// msync mode: page ranges flushed since the last fence.
    dirty: Mutex<Vec<(u64, u64)>>,
    counters: NvmCounters,
}

// SAFETY: the mapping lives as long as the value; concurrent stores to disjoint ranges are the
// caller's contract (the placement never stores to one range from two threads at once), and
// loads of a range being stored are only made by recovery, which runs alone.
unsafe impl Send for MappedNvm {}
unsafe impl Sync for MappedNvm {}

fn io_err(path: &Path, op: &'static str, e: std::io::Error) -> DeviceError {
    DeviceError::Io { device: path.display().to_string(), op, offset: 0, message: e.to_string() }
}

impl MappedNvm {
    /// Creates (or overwrites, with `overwrite`) a zero-filled file of `len` bytes and maps it.
    pub fn create(path: &Path, len: u64, overwrite: bool) -> Result<Self, DeviceError> {
        let mut o = OpenOptions::new();
        o.read(true).write(true).create(true);
        if !overwrite {
            o.create_new(true);
        }
        let file = o.open(path).map_err(|e| io_err(path, "create", e))?;
        crate::device::lock::lock(&file, path, LockMode::Exclusive)?;
        file.set_len(0).map_err(|e| io_err(path, "truncate", e))?;
        file.set_len(len).map_err(|e| io_err(path, "extend", e))?;
        Self::map(file, path, true)
    }

    /// Opens and maps an existing file, for writing or only for reading.
    pub fn open(path: &Path, write: bool) -> Result<Self, DeviceError> {
        let file = OpenOptions::new().read(true).write(write).open(path).map_err(|e| io_err(path, "open", e))?;
        crate::device::lock::lock(&file, path, if write { LockMode::Exclusive } else { LockMode::Shared })?;
        Self::map(file, path, write)
    }

    fn map(file: File, path: &Path, write: bool) -> Result<Self, DeviceError> {
        let len = file.metadata().map_err(|e| io_err(path, "stat", e))?.len();
        if len == 0 || len > isize::MAX as u64 {
            return Err(DeviceError::Io { device: path.display().to_string(), op: "map", offset: 0, message: format!("cannot map {len} bytes") });
        }
        let fd = file.as_raw_fd();
        let prot = if write { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
        // SAFETY: mapping a descriptor we own; the result is checked before use.
        let try_map = |flags: i32| unsafe { libc::mmap(std::ptr::null_mut(), len as usize, prot, flags, fd, 0) };
        let mut sync = false;
        let mut p = libc::MAP_FAILED;
        if write && cfg!(target_arch = "x86_64") {
            p = try_map(libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC);
            sync = p != libc::MAP_FAILED;
        }
        if p == libc::MAP_FAILED {
            p = try_map(libc::MAP_SHARED);
        }
        if p == libc::MAP_FAILED {
            return Err(io_err(path, "mmap", std::io::Error::last_os_error()));
        }
        let durability = if sync {
            Durability::PowerLoss
        } else {
            // SAFETY: fstatfs fills the struct we pass.
            let mut st: libc::statfs = unsafe { std::mem::zeroed() };
            let volatile = unsafe { libc::fstatfs(fd, &mut st) } == 0 && matches!(st.f_type as i64, TMPFS_MAGIC | RAMFS_MAGIC);
            if volatile {
                Durability::ProcessCrash
            } else {
                Durability::Msync
            }
        };
        Ok(MappedNvm { name: path.display().to_string(), _file: file, base: p as *mut u8, len, sync, durability, dirty: Mutex::new(Vec::new()), counters: NvmCounters::default() })
    }

    /// Whether the mapping is MAP_SYNC (persistent memory).
    pub fn is_dax(&self) -> bool {
        self.sync
    }
}

impl Drop for MappedNvm {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in `map`, once.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len as usize);
        }
    }
}

impl Nvm for MappedNvm {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn len(&self) -> u64 {
        self.len
    }
    fn store(&self, at: u64, data: &[u8]) -> Result<(), DeviceError> {
        check_range(&self.name, self.len, at, data.len() as u64)?;
        // SAFETY: in range (checked); the mapping is writable for a writer (a read-only opener's
        // placement makes no stores).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.base.add(at as usize), data.len()) };
        self.counters.on_store(data.len());
        Ok(())
    }
    fn flush(&self, at: u64, len: u64) -> Result<(), DeviceError> {
        check_range(&self.name, self.len, at, len)?;
        self.counters.on_flush(at, len);
        if len == 0 {
            return Ok(());
        }
        if self.sync {
            #[cfg(target_arch = "x86_64")]
            {
                let mut line = at / CACHE_LINE * CACHE_LINE;
                while line < at + len {
                    // SAFETY: the line is inside the mapping.
                    unsafe { std::arch::x86_64::_mm_clflush(self.base.add(line as usize)) };
                    line += CACHE_LINE;
                }
            }
            return Ok(());
        }
        let page = 4096;
        let (start, end) = (at / page * page, (at + len).div_ceil(page) * page);
        let mut d = self.dirty.lock().unwrap_or_else(|e| e.into_inner());
        match d.last_mut() {
            Some(last) if start <= last.1 && end >= last.0 => *last = (last.0.min(start), last.1.max(end)),
            _ => d.push((start, end.min(self.len.div_ceil(page) * page))),
        }
        Ok(())
    }
    fn fence(&self) -> Result<(), DeviceError> {
        self.counters.on_fence();
        if self.sync {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: a store fence has no memory operands.
            unsafe {
                std::arch::x86_64::_mm_sfence()
            };
            return Ok(());
        }
        let ranges = std::mem::take(&mut *self.dirty.lock().unwrap_or_else(|e| e.into_inner()));
        for (start, end) in ranges {
            // SAFETY: msync of page-aligned ranges inside the mapping.
            if unsafe { libc::msync(self.base.add(start as usize) as *mut libc::c_void, (end - start) as usize, libc::MS_SYNC) } != 0 {
                return Err(DeviceError::Io { device: self.name.clone(), op: "msync", offset: start, message: std::io::Error::last_os_error().to_string() });
            }
        }
        Ok(())
    }
    fn load(&self, at: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        check_range(&self.name, self.len, at, buf.len() as u64)?;
        // SAFETY: in range (checked).
        unsafe { std::ptr::copy_nonoverlapping(self.base.add(at as usize), buf.as_mut_ptr(), buf.len()) };
        self.counters.on_load(buf.len());
        Ok(())
    }
    fn durability(&self) -> Durability {
        self.durability
    }
    fn counters(&self) -> NvmStats {
        self.counters.get()
    }
}

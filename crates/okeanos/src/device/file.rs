//! A device over a regular file or a block device (for example a loop device), with
//! pread/pwrite and fdatasync.

use super::{check_access, Device, DeviceCounters, DeviceError, DeviceStats, Poison};
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::Path;

pub struct FileDevice {
    file: File,
    name: String,
    len: u64,
    counters: DeviceCounters,
    poison: Poison,
}

impl FileDevice {
    /// Opens an existing file or block device for reading and writing. Its length is measured
    /// with a seek to the end, which works for block devices too (their metadata length is 0).
    pub fn open(path: &Path) -> Result<Self, DeviceError> {
        Self::open_mode(path, true)
    }

    /// Opens read-only (fsck -n, journal dump).
    pub fn open_read_only(path: &Path) -> Result<Self, DeviceError> {
        Self::open_mode(path, false)
    }

    fn open_mode(path: &Path, write: bool) -> Result<Self, DeviceError> {
        let name = path.display().to_string();
        let io = |op, e: std::io::Error| DeviceError::Io { device: name.clone(), op, offset: 0, message: e.to_string() };
        let mut file = OpenOptions::new().read(true).write(write).open(path).map_err(|e| io("open", e))?;
        let len = file.seek(SeekFrom::End(0)).map_err(|e| io("seek", e))?;
        Ok(FileDevice { file, name, len, counters: DeviceCounters::default(), poison: Poison::default() })
    }

    /// Creates (or truncates) a regular file of `len` bytes. Refuses to touch an existing file
    /// unless `overwrite`.
    pub fn create(path: &Path, len: u64, overwrite: bool) -> Result<Self, DeviceError> {
        let name = path.display().to_string();
        let io = |op, e: std::io::Error| DeviceError::Io { device: name.clone(), op, offset: 0, message: e.to_string() };
        let mut opts = OpenOptions::new();
        opts.read(true).write(true);
        if overwrite {
            opts.create(true).truncate(true);
        } else {
            opts.create_new(true);
        }
        let file = opts.open(path).map_err(|e| io("create", e))?;
        file.set_len(len).map_err(|e| io("set_len", e))?;
        Ok(FileDevice { file, name, len, counters: DeviceCounters::default(), poison: Poison::default() })
    }

    fn fail(&self, op: &'static str, offset: u64, e: std::io::Error) -> DeviceError {
        let err = DeviceError::Io { device: self.name.clone(), op, offset, message: e.to_string() };
        self.poison.set(&err);
        err
    }
}

impl Device for FileDevice {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn len_bytes(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.poison.check(&self.name)?;
        check_access(&self.name, self.len, offset, buf.len() as u64)?;
        self.file.read_exact_at(buf, offset).map_err(|e| self.fail("read", offset, e))?;
        self.counters.on_read(buf.len());
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.poison.check(&self.name)?;
        check_access(&self.name, self.len, offset, data.len() as u64)?;
        self.file.write_all_at(data, offset).map_err(|e| self.fail("write", offset, e))?;
        self.counters.on_write(data.len());
        Ok(())
    }
    fn flush(&self) -> Result<(), DeviceError> {
        self.poison.check(&self.name)?;
        self.file.sync_data().map_err(|e| self.fail("flush", 0, e))?;
        self.counters.on_flush();
        Ok(())
    }
    fn counters(&self) -> DeviceStats {
        self.counters.snapshot()
    }
}

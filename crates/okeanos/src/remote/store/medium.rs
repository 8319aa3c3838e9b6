//! Where a journal server keeps one journal: three files, `state`, `log.0` and `log.1`
//! ([`StoreFile`]). The store reads and writes them only through [`Medium`], so the same code
//! runs on a directory of real files ([`DirMedium`], the server) and on recorded devices
//! ([`DeviceMedium`], the crash tests, where every write and fdatasync of the server lands in
//! the same crash recording as the host's).
//!
//! The store never renames or creates files after open: the state is double-buffered in place
//! and compaction alternates between the two logs, so a crash state of the server is fully
//! described by the contents of three files.

use crate::device::Device;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreFile {
    State,
    /// One of the two logs (0 or 1); the state says which one is active.
    Log(usize),
}

impl StoreFile {
    fn index(self) -> usize {
        match self {
            StoreFile::State => 0,
            StoreFile::Log(i) => {
                assert!(i < 2, "two logs");
                1 + i
            }
        }
    }

    pub fn name(self) -> &'static str {
        ["state", "log.0", "log.1"][self.index()]
    }
}

/// File operations with a regular file's semantics: a write past the end extends the file, a
/// `sync` is `fdatasync` (the file's data and size durable).
pub trait Medium: Send {
    /// For error messages: the directory, or the devices.
    fn describe(&self) -> String;
    fn len(&self, f: StoreFile) -> io::Result<u64>;
    fn read_at(&self, f: StoreFile, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    fn write_at(&mut self, f: StoreFile, offset: u64, data: &[u8]) -> io::Result<()>;
    fn truncate(&mut self, f: StoreFile, len: u64) -> io::Result<()>;
    fn sync(&mut self, f: StoreFile) -> io::Result<()>;
}

/// A journal's directory on the server.
pub struct DirMedium {
    dir: PathBuf,
    files: [File; 3],
}

impl DirMedium {
    /// Opens (creating when missing, then syncing the directory so the names are durable) the
    /// three files of the journal in `dir`.
    pub fn open(dir: &Path) -> io::Result<DirMedium> {
        std::fs::create_dir_all(dir)?;
        let mut created = false;
        let mut open = |name: &str| -> io::Result<File> {
            let p = dir.join(name);
            created |= !p.exists();
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(p)
        };
        let files = [open("state")?, open("log.0")?, open("log.1")?];
        if created {
            File::open(dir)?.sync_all()?;
            if let Some(parent) = dir.parent() {
                File::open(parent)?.sync_all()?;
            }
        }
        Ok(DirMedium { dir: dir.to_path_buf(), files })
    }
}

impl Medium for DirMedium {
    fn describe(&self) -> String {
        self.dir.display().to_string()
    }
    fn len(&self, f: StoreFile) -> io::Result<u64> {
        Ok(self.files[f.index()].metadata()?.len())
    }
    fn read_at(&self, f: StoreFile, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.files[f.index()].read_exact_at(buf, offset)
    }
    fn write_at(&mut self, f: StoreFile, offset: u64, data: &[u8]) -> io::Result<()> {
        self.files[f.index()].write_all_at(data, offset)
    }
    fn truncate(&mut self, f: StoreFile, len: u64) -> io::Result<()> {
        self.files[f.index()].set_len(len)
    }
    fn sync(&mut self, f: StoreFile) -> io::Result<()> {
        self.files[f.index()].sync_data()
    }
}

/// The page size a file system writes back in: [`DeviceMedium`] turns every file write into
/// whole-page writes of the device, as the page cache does.
pub const PAGE: u64 = 4096;

/// The three files on three block devices (the crash tests' recorded devices): each write is
/// a read-modify-write of whole pages, a truncate zeroes the cut pages, a sync is the device's
/// flush. Each file's length is kept here (a file system keeps it in its inode); a store opened
/// on the devices of a crash state is given lengths covering whatever was written.
pub struct DeviceMedium {
    devs: [Arc<dyn Device>; 3],
    lens: [u64; 3],
}

impl DeviceMedium {
    pub fn new(devs: [Arc<dyn Device>; 3], lens: [u64; 3]) -> DeviceMedium {
        DeviceMedium { devs, lens }
    }

    fn dev_err(e: crate::device::DeviceError) -> io::Error {
        io::Error::other(e.to_string())
    }

    fn write_pages(&mut self, i: usize, offset: u64, data: &[u8]) -> io::Result<()> {
        let dev = &self.devs[i];
        let end = offset + data.len() as u64;
        if end > dev.len_bytes() {
            return Err(io::Error::new(io::ErrorKind::StorageFull, format!("{}: no space past byte {}", dev.name(), dev.len_bytes())));
        }
        let first = offset / PAGE * PAGE;
        let last = end.div_ceil(PAGE) * PAGE;
        let mut buf = vec![0u8; (last - first) as usize];
        dev.read_at(first, &mut buf).map_err(Self::dev_err)?;
        buf[(offset - first) as usize..(end - first) as usize].copy_from_slice(data);
        dev.write_at(first, &buf).map_err(Self::dev_err)
    }
}

impl Medium for DeviceMedium {
    fn describe(&self) -> String {
        format!("devices {}", self.devs.iter().map(|d| d.name()).collect::<Vec<_>>().join(", "))
    }
    fn len(&self, f: StoreFile) -> io::Result<u64> {
        Ok(self.lens[f.index()])
    }
    fn read_at(&self, f: StoreFile, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let i = f.index();
        if offset + buf.len() as u64 > self.lens[i] {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end of the file"));
        }
        let first = offset / PAGE * PAGE;
        let last = (offset + buf.len() as u64).div_ceil(PAGE) * PAGE;
        let mut pages = vec![0u8; (last - first) as usize];
        self.devs[i].read_at(first, &mut pages).map_err(Self::dev_err)?;
        let at = (offset - first) as usize;
        buf.copy_from_slice(&pages[at..at + buf.len()]);
        Ok(())
    }
    fn write_at(&mut self, f: StoreFile, offset: u64, data: &[u8]) -> io::Result<()> {
        let i = f.index();
        if offset > self.lens[i] {
            // A hole: the file system would read it as zeros.
            let gap = vec![0u8; (offset - self.lens[i]) as usize];
            self.write_pages(i, self.lens[i], &gap)?;
        }
        self.write_pages(i, offset, data)?;
        self.lens[i] = self.lens[i].max(offset + data.len() as u64);
        Ok(())
    }
    fn truncate(&mut self, f: StoreFile, len: u64) -> io::Result<()> {
        let i = f.index();
        if len < self.lens[i] {
            let zeros = vec![0u8; (self.lens[i] - len) as usize];
            self.write_pages(i, len, &zeros)?;
        }
        self.lens[i] = len;
        Ok(())
    }
    fn sync(&mut self, f: StoreFile) -> io::Result<()> {
        self.devs[f.index()].flush().map_err(Self::dev_err)
    }
}

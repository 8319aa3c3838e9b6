//! Path-level conveniences for library users ("/a/b" instead of inode numbers) and [`File`],
//! an open regular file. Each call is one or more of the engine's inode-level operations.

use super::{DirEntryInfo, Okeanos};
use crate::format::dir::FileType;
use crate::fs::namespace::Attr;
use crate::fs::{FsError, FsResult};

impl Okeanos {

    /// Resolves an absolute path ("/a/b") to an inode, without following symlinks.
    pub fn resolve(&self, path: &str) -> FsResult<u32> {
        let mut ino = self.root();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            ino = self.lookup(ino, part.as_bytes())?.ino;
        }
        Ok(ino)
    }

    fn split(path: &str) -> FsResult<(&str, &str)> {
        let path = path.trim_end_matches('/');
        let (dir, name) = path.rsplit_once('/').ok_or_else(|| FsError::Invalid(format!("path {path:?} is not absolute")))?;
        if name.is_empty() {
            return Err(FsError::Invalid(format!("path {path:?} names no file")));
        }
        Ok((dir, name))
    }

    /// Creates (or truncates) a regular file and opens it.
    pub fn create_file(&self, path: &str) -> FsResult<File> {
        let (dir, name) = Self::split(path)?;
        let parent = self.resolve(dir)?;
        match self.lookup(parent, name.as_bytes()) {
            Ok(a) => {
                self.truncate(a.ino, 0)?;
                self.open_handle(a.ino)
            }
            Err(FsError::NotFound) => {
                let a = self.create(parent, name.as_bytes(), 0o644)?;
                self.open_handle(a.ino)
            }
            Err(e) => Err(e),
        }
    }

    /// Opens a regular file as open(2) with these flags would: `create` (O_CREAT) makes it if
    /// missing, `exclusive` (O_EXCL, with `create`) refuses an existing one, `truncate`
    /// (O_TRUNC) empties it. Two threads creating one name both get the same file.
    pub fn open_path(&self, path: &str, create: bool, exclusive: bool, truncate: bool) -> FsResult<File> {
        let (dir, name) = Self::split(path)?;
        let parent = self.resolve(dir)?;
        let ino = match self.lookup(parent, name.as_bytes()) {
            Ok(_) if create && exclusive => return Err(FsError::Exists),
            Ok(a) => a.ino,
            Err(FsError::NotFound) if create => match self.create(parent, name.as_bytes(), 0o644) {
                Ok(a) => a.ino,
                Err(FsError::Exists) if !exclusive => self.lookup(parent, name.as_bytes())?.ino,
                Err(e) => return Err(e),
            },
            Err(e) => return Err(e),
        };
        let f = self.open_handle(ino)?;
        if truncate && f.len()? > 0 {
            f.set_len(0)?;
        }
        Ok(f)
    }

    /// Opens an existing file.
    pub fn open_file(&self, path: &str) -> FsResult<File> {
        let ino = self.resolve(path)?;
        self.open_handle(ino)
    }

    fn open_handle(&self, ino: u32) -> FsResult<File> {
        let a = self.open_ino(ino)?;
        if a.kind == FileType::Directory {
            self.release(ino);
            return Err(FsError::IsDir);
        }
        Ok(File { fs: self.clone(), ino, open: true })
    }

    pub fn mkdir_path(&self, path: &str) -> FsResult<Attr> {
        let (dir, name) = Self::split(path)?;
        let parent = self.resolve(dir)?;
        self.mkdir(parent, name.as_bytes(), 0o755)
    }

    pub fn remove_path(&self, path: &str) -> FsResult<()> {
        let (dir, name) = Self::split(path)?;
        let parent = self.resolve(dir)?;
        self.unlink(parent, name.as_bytes())
    }

    pub fn rmdir_path(&self, path: &str) -> FsResult<()> {
        let (dir, name) = Self::split(path)?;
        let parent = self.resolve(dir)?;
        self.rmdir(parent, name.as_bytes())
    }

    pub fn rename_path(&self, from: &str, to: &str) -> FsResult<()> {
        let (d1, n1) = Self::split(from)?;
        let (d2, n2) = Self::split(to)?;
        let (p1, p2) = (self.resolve(d1)?, self.resolve(d2)?);
        self.rename(p1, n1.as_bytes(), p2, n2.as_bytes())
    }

    /// The whole contents of a file.
    pub fn read_path(&self, path: &str) -> FsResult<Vec<u8>> {
        let ino = self.resolve(path)?;
        let size = self.getattr(ino)?.size;
        self.read(ino, 0, size as usize)
    }

    /// Names in a directory, sorted.
    pub fn list_path(&self, path: &str) -> FsResult<Vec<DirEntryInfo>> {
        let mut v = self.readdir(self.resolve(path)?)?;
        v.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(v)
    }

}

/// An open regular file.
pub struct File {
    fs: Okeanos,
    ino: u32,
    open: bool,
}

impl File {
    pub fn ino(&self) -> u32 {
        self.ino
    }
    pub fn write_at(&self, off: u64, data: &[u8]) -> FsResult<usize> {
        self.fs.write(self.ino, off, data)
    }
    /// Appends at the current end of the file.
    pub fn append(&self, data: &[u8]) -> FsResult<u64> {
        self.fs.append(self.ino, data)
    }
    pub fn read_at(&self, off: u64, len: usize) -> FsResult<Vec<u8>> {
        self.fs.read(self.ino, off, len)
    }
    pub fn len(&self) -> FsResult<u64> {
        Ok(self.fs.getattr(self.ino)?.size)
    }
    pub fn is_empty(&self) -> FsResult<bool> {
        Ok(self.len()? == 0)
    }
    pub fn set_len(&self, size: u64) -> FsResult<()> {
        self.fs.truncate(self.ino, size)
    }
    pub fn fsync(&self) -> FsResult<()> {
        self.fs.fsync(self.ino, false)
    }
    pub fn fdatasync(&self) -> FsResult<()> {
        self.fs.fsync(self.ino, true)
    }
    /// The durable watermark ([`Okeanos::durable_len`]).
    pub fn durable_len(&self) -> FsResult<u64> {
        self.fs.durable_len(self.ino)
    }
    /// Waits until the durable watermark reaches `offset` ([`Okeanos::wait_durable`]).
    pub fn wait_durable(&self, offset: u64, timeout: std::time::Duration) -> FsResult<u64> {
        self.fs.wait_durable(self.ino, offset, timeout)
    }
    pub fn metadata(&self) -> FsResult<Attr> {
        self.fs.getattr(self.ino)
    }
    /// Closes the file (also done on drop).
    pub fn close(mut self) {
        self.release();
    }
    fn release(&mut self) {
        if self.open {
            self.open = false;
            self.fs.release(self.ino);
        }
    }
}

impl Drop for File {
    fn drop(&mut self) {
        self.release();
    }
}


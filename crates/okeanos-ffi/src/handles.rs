//! Handles as C sees them, and how a bad one is caught.
//!
//! A handle is never a pointer to Rust memory: its value is a number from a counter that never
//! repeats, shifted and tagged with its kind, and every call looks it up in a table. A NULL, a
//! handle already closed, a file system already unmounted, a file passed where a file system is
//! expected, or any made-up value is then an error (EINVAL or EBADF, with a sentence), never a
//! read of freed memory. Lookups take a read lock; only opens and closes write.

use crate::error::{Error, Res};
use engine::{File, Okeanos};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, RwLock};

/// One mounted file system. `fs` is taken out at unmount: a call already inside holds the read
/// lock, so the unmount waits for it; one after finds None.
pub struct FsEntry {
    pub fs: RwLock<Option<Okeanos>>,
    /// Its open files and directory listings, closed with it.
    pub children: Mutex<Vec<u64>>,
    pub path: String,
}

pub struct FileEntry {
    pub fs: Arc<FsEntry>,
    pub file: File,
    pub readable: bool,
    pub writable: bool,
    /// Appends only (O_APPEND): a positioned write is refused.
    pub append_only: bool,
    pub closed: AtomicBool,
}

pub struct DirEntry {
    pub fs: Arc<FsEntry>,
    pub entries: Vec<engine::DirEntryInfo>,
    pub next: Mutex<usize>,
}

#[derive(Clone)]
pub enum Handle {
    Fs(Arc<FsEntry>),
    File(Arc<FileEntry>),
    Dir(Arc<DirEntry>),
}

const TAG_FS: u64 = 1;
const TAG_FILE: u64 = 2;
const TAG_DIR: u64 = 3;
const TAG_BITS: u32 = 4;
/// "OK" in the top bytes.
const BASE: u64 = 0x4f4b << 48;

static NEXT: AtomicU64 = AtomicU64::new(1);
static TABLE: LazyLock<RwLock<HashMap<u64, Handle>>> = LazyLock::new(|| RwLock::new(HashMap::new()));

fn table_read() -> std::sync::RwLockReadGuard<'static, HashMap<u64, Handle>> {
    TABLE.read().unwrap_or_else(|e| e.into_inner())
}

fn table_write() -> std::sync::RwLockWriteGuard<'static, HashMap<u64, Handle>> {
    TABLE.write().unwrap_or_else(|e| e.into_inner())
}

/// Registers `h`; the value C gets.
pub fn insert(h: Handle) -> u64 {
    let tag = match &h {
        Handle::Fs(_) => TAG_FS,
        Handle::File(_) => TAG_FILE,
        Handle::Dir(_) => TAG_DIR,
    };
    // Never a small integer, and never an address at all: the high bits make it non-canonical
    // on x86-64 and AArch64, so no memory can alias it and a language runtime that scans
    // pointers (Go's garbage collector and stack copier) sees nothing it owns. The tag makes a
    // handle of the wrong kind detectable.
    let n = NEXT.fetch_add(1, Ordering::Relaxed) & ((1 << 44) - 1);
    let id = BASE | n << TAG_BITS | tag;
    if let Handle::File(f) = &h {
        lock(&f.fs.children).push(id);
    }
    if let Handle::Dir(d) = &h {
        lock(&d.fs.children).push(id);
    }
    table_write().insert(id, h);
    id
}

pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn get(value: usize, what: &str) -> Res<Handle> {
    if value == 0 {
        return Err(Error::inval(format!("the {what} handle is NULL")));
    }
    table_read().get(&(value as u64)).cloned().ok_or_else(|| Error::badf(format!("not an open {what} handle (closed, unmounted, or never opened)")))
}

pub fn fs(value: usize) -> Res<Arc<FsEntry>> {
    match get(value, "okeanos_fs")? {
        Handle::Fs(f) => Ok(f),
        _ => Err(Error::badf("a handle of another kind where an okeanos_fs was expected")),
    }
}

pub fn file(value: usize) -> Res<Arc<FileEntry>> {
    match get(value, "okeanos_file")? {
        Handle::File(f) => Ok(f),
        _ => Err(Error::badf("a handle of another kind where an okeanos_file was expected")),
    }
}

pub fn dir(value: usize) -> Res<Arc<DirEntry>> {
    match get(value, "okeanos_dir")? {
        Handle::Dir(d) => Ok(d),
        _ => Err(Error::badf("a handle of another kind where an okeanos_dir was expected")),
    }
}

/// Takes a handle out of the table; the entry itself goes when the last call using it ends.
pub fn remove(value: usize) -> Option<Handle> {
    table_write().remove(&(value as u64))
}

/// Closes a file or listing of `fs`: out of the table and out of its file system's list.
pub fn close_child(value: usize, fs: &FsEntry) {
    remove(value);
    lock(&fs.children).retain(|&id| id != value as u64);
}

/// Takes out every file and listing of a file system (at its unmount).
pub fn remove_children(fs: &FsEntry) {
    let ids = std::mem::take(&mut *lock(&fs.children));
    let mut t = table_write();
    for id in ids {
        if let Some(Handle::File(f)) = t.remove(&id) {
            f.closed.store(true, Ordering::SeqCst);
        }
    }
}

impl FsEntry {
    /// The mount, for the length of one call; EBADF once unmounted.
    pub fn with<R>(&self, f: impl FnOnce(&Okeanos) -> Res<R>) -> Res<R> {
        let g = self.fs.read().unwrap_or_else(|e| e.into_inner());
        match g.as_ref() {
            Some(fs) => f(fs),
            None => Err(Error::badf(format!("the file system {} was unmounted", self.path))),
        }
    }
}

impl FileEntry {
    /// The file, for the length of one call, while its file system is mounted.
    pub fn with<R>(&self, f: impl FnOnce(&File) -> Res<R>) -> Res<R> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::badf("the file was closed"));
        }
        self.fs.with(|_| f(&self.file))
    }
}

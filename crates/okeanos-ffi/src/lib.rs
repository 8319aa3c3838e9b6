//! The C ABI of Okeanos (bindings/c/okeanos.h, generated from this file by cbindgen).
//!
//! Conventions, the same for every function (docs/EMBEDDING.md):
//! - A function returning `int` or `int64_t` returns 0 (or a count) on success and a negative
//!   errno on failure; one returning a handle returns NULL on failure. Either way
//!   `okeanos_errmsg()` then gives this thread's last error as a sentence.
//! - Handles are checked on every call: NULL, closed, unmounted or made-up handles are errors
//!   (EINVAL, EBADF), not crashes. A file whose file system was unmounted answers EBADF.
//! - One `okeanos_fs` and its files may be used by many threads at once; the calls that wait
//!   (syncs) let the others go on, and syncs that wait together share one commit.
//! - Paths are absolute ("/a/b") and UTF-8 (EINVAL otherwise).
//! - Nothing unwinds into C: a panic inside a call becomes -EIO with its message.

#![allow(non_camel_case_types)]
// Every pointer a caller passes is checked for NULL and its length bounded before use; the
// functions stay safe to call with any handle value, so they are not marked unsafe.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

mod error;
mod handles;

use error::{call, Error, Res};
use handles::{DirEntry, FileEntry, FsEntry, Handle};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// A mounted file system (opaque).
pub struct okeanos_fs {
    _private: [u8; 0],
}

/// An open regular file (opaque).
pub struct okeanos_file {
    _private: [u8; 0],
}

/// A directory listing being read (opaque).
pub struct okeanos_dir {
    _private: [u8; 0],
}

/// Open for reading only.
pub const OKEANOS_O_RDONLY: c_int = 0;
/// Open for writing only.
pub const OKEANOS_O_WRONLY: c_int = 1;
/// Open for reading and writing.
pub const OKEANOS_O_RDWR: c_int = 2;
/// Create the file if it does not exist.
pub const OKEANOS_O_CREAT: c_int = 0o100;
/// With OKEANOS_O_CREAT: fail with -EEXIST if it exists.
pub const OKEANOS_O_EXCL: c_int = 0o200;
/// Empty the file.
pub const OKEANOS_O_TRUNC: c_int = 0o1000;
/// Writes only append (okeanos_pwrite is refused with -EBADF).
pub const OKEANOS_O_APPEND: c_int = 0o2000;

/// What okeanos_stat and okeanos_fstat fill in.
#[repr(C)]
pub struct okeanos_stat_t {
    pub ino: u64,
    /// File type and permission bits, as st_mode (S_IFREG | 0644, ...).
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    /// 512-byte units allocated.
    pub blocks: u64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

/// One directory entry from okeanos_readdir.
#[repr(C)]
pub struct okeanos_dirent_t {
    pub ino: u64,
    /// DT_REG (8), DT_DIR (4), DT_LNK (10), ... as in dirent.h.
    pub kind: u8,
    /// NUL-terminated.
    pub name: [c_char; 256],
}

fn cstr<'a>(p: *const c_char, what: &str) -> Res<&'a str> {
    if p.is_null() {
        return Err(Error::inval(format!("{what} is NULL")));
    }
    // SAFETY: the caller passes a NUL-terminated string (the header says so); NULL is refused.
    let c = unsafe { CStr::from_ptr(p) };
    c.to_str().map_err(|_| Error::inval(format!("{what} is not valid UTF-8")))
}

fn opt_cstr<'a>(p: *const c_char, what: &str) -> Res<&'a str> {
    if p.is_null() {
        Ok("")
    } else {
        cstr(p, what)
    }
}

fn bytes<'a>(buf: *const c_void, len: usize) -> Res<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if buf.is_null() {
        return Err(Error::inval("the buffer is NULL"));
    }
    if len > isize::MAX as usize {
        return Err(Error::inval("the length is too large"));
    }
    // SAFETY: non-NULL, and the caller promises `len` readable bytes (the header says so).
    Ok(unsafe { std::slice::from_raw_parts(buf as *const u8, len) })
}

fn bytes_mut<'a>(buf: *mut c_void, len: usize) -> Res<&'a mut [u8]> {
    if len == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() {
        return Err(Error::inval("the buffer is NULL"));
    }
    if len > isize::MAX as usize {
        return Err(Error::inval("the length is too large"));
    }
    // SAFETY: as in `bytes`, for `len` writable bytes.
    Ok(unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, len) })
}

fn out<'a, T>(p: *mut T, what: &str) -> Res<&'a mut T> {
    // SAFETY: a non-NULL pointer the caller promises points to a `T`.
    unsafe { p.as_mut() }.ok_or_else(|| Error::inval(format!("{what} is NULL")))
}

/// A negative errno as the return value.
fn neg<T: From<i32>>(e: i32) -> T {
    T::from(e)
}

/// The library's version, "okeanos 0.1.0".
#[no_mangle]
pub extern "C" fn okeanos_version() -> *const c_char {
    concat!("okeanos ", env!("CARGO_PKG_VERSION"), "\0").as_ptr() as *const c_char
}

/// This thread's last error, as a sentence ("" if none yet). Valid until this thread's next
/// failing call; never NULL.
#[no_mangle]
pub extern "C" fn okeanos_errmsg() -> *const c_char {
    error::last_ptr()
}

/// This thread's last error as a positive errno (ENOENT, EBUSY, ...), or 0 if none yet: what a
/// call that returned NULL failed with.
#[no_mangle]
pub extern "C" fn okeanos_errno() -> c_int {
    error::last_errno()
}

/// Creates an image file of `size_bytes` at `path` and formats it. `mkfs_options` (may be NULL)
/// are comma-separated: `journal_size=16M`, `block_size=4096`, `journal=internal|external|
/// remote|jetstream|nvm|manylogs`, `journal_path=FILE` (external), `journal_server=HOST:PORT`,
/// `nvm=FILE`, `nvm_size=64M`, `group_size=100M` (manylogs), `label=NAME`. Refuses an existing
/// file (-EINVAL). Returns 0 or -errno.
#[no_mangle]
pub extern "C" fn okeanos_mkfs(path: *const c_char, size_bytes: u64, mkfs_options: *const c_char) -> c_int {
    call("okeanos_mkfs", neg, || {
        let path = cstr(path, "path")?;
        let opts = opt_cstr(mkfs_options, "mkfs_options")?;
        engine::Okeanos::mkfs_image(path.as_ref(), size_bytes, opts)?;
        Ok(0)
    })
}

/// Mounts the image at `path` with ext4-style options (may be NULL): `data=wasteless+dmeta`,
/// `commit=5`, `journal_path=FILE`, `journal_server=HOST:PORT`, ... (the mount options of
/// docs/EMBEDDING.md). Recovers the journal if needed. NULL on error: a second open of an
/// image already mounted is refused (EBUSY) by the image's lock.
#[no_mangle]
pub extern "C" fn okeanos_open(path: *const c_char, mount_options: *const c_char) -> *mut okeanos_fs {
    call("okeanos_open", |_| std::ptr::null_mut(), || {
        let p = cstr(path, "path")?;
        let opts = engine::MountOptions::parse(opt_cstr(mount_options, "mount_options")?).map_err(Error::inval)?;
        let fs = engine::Okeanos::open(p.as_ref(), opts)?;
        let e = FsEntry { fs: RwLock::new(Some(fs)), children: Mutex::new(Vec::new()), path: p.to_string() };
        Ok(handles::insert(Handle::Fs(Arc::new(e))) as usize as *mut okeanos_fs)
    })
}

/// Unmounts cleanly: commits, checkpoints, marks the image clean. Files and listings still
/// open on it are closed (their handles answer EBADF afterwards). The handle is gone even if
/// this fails (-EIO: the image then recovers at its next open).
#[no_mangle]
pub extern "C" fn okeanos_unmount(fs: *mut okeanos_fs) -> c_int {
    call("okeanos_unmount", neg, || {
        let e = handles::fs(fs as usize)?;
        handles::remove(fs as usize);
        let taken = e.fs.write().unwrap_or_else(|p| p.into_inner()).take();
        handles::remove_children(&e);
        match taken {
            Some(m) => m.unmount().map(|_| 0).map_err(Error::from),
            None => Err(Error::badf("already unmounted")),
        }
    })
}

/// Commits everything done so far and waits for it (sync(2) for this file system).
#[no_mangle]
pub extern "C" fn okeanos_sync(fs: *mut okeanos_fs) -> c_int {
    call("okeanos_sync", neg, || handles::fs(fs as usize)?.with(|m| Ok(m.sync().map(|_| 0)?)))
}

fn open_file(fs: *mut okeanos_fs, path: *const c_char, flags: c_int) -> Res<*mut okeanos_file> {
    let e = handles::fs(fs as usize)?;
    let p = cstr(path, "path")?;
    let acc = flags & 3;
    if acc == 3 {
        return Err(Error::inval("flags: the access mode is not O_RDONLY, O_WRONLY or O_RDWR"));
    }
    let known = 3 | OKEANOS_O_CREAT | OKEANOS_O_EXCL | OKEANOS_O_TRUNC | OKEANOS_O_APPEND;
    if flags & !known != 0 {
        return Err(Error::inval(format!("flags: unknown bits {:#o}", flags & !known)));
    }
    let (create, excl, trunc) = (flags & OKEANOS_O_CREAT != 0, flags & OKEANOS_O_EXCL != 0, flags & OKEANOS_O_TRUNC != 0);
    let writable = acc != OKEANOS_O_RDONLY;
    if trunc && !writable {
        return Err(Error::inval("flags: O_TRUNC needs write access"));
    }
    let file = e.with(|m| Ok(m.open_path(p, create, excl, trunc).map_err(|err| Error::new(err.errno(), format!("{p}: {err}")))?))?;
    let fe = FileEntry { fs: e.clone(), file, readable: acc != OKEANOS_O_WRONLY, writable, append_only: flags & OKEANOS_O_APPEND != 0, closed: AtomicBool::new(false) };
    Ok(handles::insert(Handle::File(Arc::new(fe))) as usize as *mut okeanos_file)
}

/// Creates the file, or opens an existing one, for appending (read and write, O_APPEND).
#[no_mangle]
pub extern "C" fn okeanos_create(fs: *mut okeanos_fs, path: *const c_char) -> *mut okeanos_file {
    call("okeanos_create", |_| std::ptr::null_mut(), || open_file(fs, path, OKEANOS_O_RDWR | OKEANOS_O_CREAT | OKEANOS_O_APPEND))
}

/// Opens a regular file with OKEANOS_O_* flags (as open(2)); NULL on error.
#[no_mangle]
pub extern "C" fn okeanos_open_file(fs: *mut okeanos_fs, path: *const c_char, flags: c_int) -> *mut okeanos_file {
    call("okeanos_open_file", |_| std::ptr::null_mut(), || open_file(fs, path, flags))
}

fn writable(f: &FileEntry) -> Res<()> {
    if f.writable {
        Ok(())
    } else {
        Err(Error::badf("the file is open read-only"))
    }
}

/// Appends `len` bytes at the end of the file (atomically with respect to other appenders).
/// Returns the bytes written, or -errno. Durable after okeanos_fdatasync.
#[no_mangle]
pub extern "C" fn okeanos_append(f: *mut okeanos_file, buf: *const c_void, len: usize) -> i64 {
    call("okeanos_append", neg, || {
        let fe = handles::file(f as usize)?;
        writable(&fe)?;
        let data = bytes(buf, len)?;
        fe.with(|file| Ok(file.append(data).map(|_| len as i64)?))
    })
}

/// Writes `len` bytes at `offset`. Returns the bytes written, or -errno.
#[no_mangle]
pub extern "C" fn okeanos_pwrite(f: *mut okeanos_file, buf: *const c_void, len: usize, offset: u64) -> i64 {
    call("okeanos_pwrite", neg, || {
        let fe = handles::file(f as usize)?;
        writable(&fe)?;
        if fe.append_only {
            return Err(Error::badf("the file was opened with O_APPEND: use okeanos_append"));
        }
        let data = bytes(buf, len)?;
        fe.with(|file| Ok(file.write_at(offset, data).map(|n| n as i64)?))
    })
}

/// Reads up to `len` bytes at `offset` into `buf`. Returns the bytes read (0 at the end of the
/// file), or -errno.
#[no_mangle]
pub extern "C" fn okeanos_pread(f: *mut okeanos_file, buf: *mut c_void, len: usize, offset: u64) -> i64 {
    call("okeanos_pread", neg, || {
        let fe = handles::file(f as usize)?;
        if !fe.readable {
            return Err(Error::badf("the file is open write-only"));
        }
        let dst = bytes_mut(buf, len)?;
        let data = fe.with(|file| Ok(file.read_at(offset, len)?))?;
        dst[..data.len()].copy_from_slice(&data);
        Ok(data.len() as i64)
    })
}

/// Makes the file and everything it depends on durable (fsync(2)).
#[no_mangle]
pub extern "C" fn okeanos_fsync(f: *mut okeanos_file) -> c_int {
    call("okeanos_fsync", neg, || handles::file(f as usize)?.with(|file| Ok(file.fsync().map(|_| 0)?)))
}

/// Makes the file's data and size durable (fdatasync(2)); threads syncing together share one
/// commit.
#[no_mangle]
pub extern "C" fn okeanos_fdatasync(f: *mut okeanos_file) -> c_int {
    call("okeanos_fdatasync", neg, || handles::file(f as usize)?.with(|file| Ok(file.fdatasync().map(|_| 0)?)))
}

/// Sets the file's size (ftruncate(2)).
#[no_mangle]
pub extern "C" fn okeanos_ftruncate(f: *mut okeanos_file, size: u64) -> c_int {
    call("okeanos_ftruncate", neg, || {
        let fe = handles::file(f as usize)?;
        writable(&fe)?;
        fe.with(|file| Ok(file.set_len(size).map(|_| 0)?))
    })
}

fn fill_stat(a: &engine::Attr, st: &mut okeanos_stat_t) {
    *st = okeanos_stat_t {
        ino: a.ino as u64,
        mode: a.kind.mode_bits() | (a.perm & 0o7777),
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        size: a.size,
        blocks: a.blocks,
        atime_ns: a.atime_ns,
        mtime_ns: a.mtime_ns,
        ctime_ns: a.ctime_ns,
    };
}

/// Fills `st` with the open file's attributes.
#[no_mangle]
pub extern "C" fn okeanos_fstat(f: *mut okeanos_file, st: *mut okeanos_stat_t) -> c_int {
    call("okeanos_fstat", neg, || {
        let st = out(st, "st")?;
        let a = handles::file(f as usize)?.with(|file| Ok(file.metadata()?))?;
        fill_stat(&a, st);
        Ok(0)
    })
}

/// Closes the file. Its handle is invalid afterwards (EBADF).
#[no_mangle]
pub extern "C" fn okeanos_close(f: *mut okeanos_file) -> c_int {
    call("okeanos_close", neg, || {
        let fe = handles::file(f as usize)?;
        fe.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        handles::close_child(f as usize, &fe.fs);
        Ok(0)
    })
}

/// The file's durable watermark: the length of the longest prefix whose bytes, as a read sees
/// them now, the commits so far made durable. Or -errno.
#[no_mangle]
pub extern "C" fn okeanos_durable_len(f: *mut okeanos_file) -> i64 {
    call("okeanos_durable_len", neg, || handles::file(f as usize)?.with(|file| Ok(file.durable_len()? as i64)))
}

/// Waits until the durable watermark reaches `offset` or `timeout_ms` passes (it does not
/// force a commit: writers' syncs and the commit interval move it). Returns the watermark
/// (below `offset` after a timeout), or -errno.
#[no_mangle]
pub extern "C" fn okeanos_wait_durable(f: *mut okeanos_file, offset: u64, timeout_ms: u64) -> i64 {
    call("okeanos_wait_durable", neg, || {
        let fe = handles::file(f as usize)?;
        if fe.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Error::badf("the file was closed"));
        }
        // Not under the file system's read lock: an unmount must not wait for a reader's
        // timeout. The file keeps the mount's state alive; an unmount wakes it with an error.
        Ok(fe.file.wait_durable(offset, Duration::from_millis(timeout_ms))? as i64)
    })
}

/// Group sync: makes `n` files durable together, as fdatasync of each would, with one commit
/// and one flush when their writes share a transaction (docs/EMBEDDING.md says exactly what a
/// crash during the call keeps). All files must belong to `fs`. Returns 0 or -errno.
#[no_mangle]
pub extern "C" fn okeanos_sync_files(fs: *mut okeanos_fs, files: *const *mut okeanos_file, n: usize) -> c_int {
    call("okeanos_sync_files", neg, || {
        let e = handles::fs(fs as usize)?;
        if n > 0 && files.is_null() {
            return Err(Error::inval("files is NULL"));
        }
        if n > (1 << 24) {
            return Err(Error::inval("too many files"));
        }
        // SAFETY: non-NULL, and the caller promises `n` handles.
        let list = if n == 0 { &[][..] } else { unsafe { std::slice::from_raw_parts(files, n) } };
        let mut inos = Vec::with_capacity(n);
        for (i, &f) in list.iter().enumerate() {
            let fe = handles::file(f as usize).map_err(|err| Error::new(err.errno, format!("files[{i}]: {}", err.msg)))?;
            if !Arc::ptr_eq(&fe.fs, &e) {
                return Err(Error::inval(format!("files[{i}] belongs to another file system")));
            }
            inos.push(fe.file.ino());
        }
        e.with(|m| Ok(m.sync_files(&inos, true).map(|_| 0)?))
    })
}

fn with_path<R>(fs: *mut okeanos_fs, path: *const c_char, f: impl FnOnce(&engine::Okeanos, &str) -> engine::fs::FsResult<R>) -> Res<R> {
    let e = handles::fs(fs as usize)?;
    let p = cstr(path, "path")?;
    e.with(|m| f(m, p).map_err(|err| Error::new(err.errno(), format!("{p}: {err}"))))
}

/// Makes a directory with permission bits `mode`.
#[no_mangle]
pub extern "C" fn okeanos_mkdir(fs: *mut okeanos_fs, path: *const c_char, mode: u32) -> c_int {
    call("okeanos_mkdir", neg, || {
        with_path(fs, path, |m, p| {
            let (dir, name) = p.trim_end_matches('/').rsplit_once('/').ok_or_else(|| engine::FsError::Invalid("the path is not absolute".into()))?;
            let parent = m.resolve(dir)?;
            m.mkdir(parent, name.as_bytes(), mode & 0o7777).map(|_| 0)
        })
    })
}

/// Removes an empty directory.
#[no_mangle]
pub extern "C" fn okeanos_rmdir(fs: *mut okeanos_fs, path: *const c_char) -> c_int {
    call("okeanos_rmdir", neg, || with_path(fs, path, |m, p| m.rmdir_path(p).map(|_| 0)))
}

/// Removes a name (the file's data goes when its last open handle closes).
#[no_mangle]
pub extern "C" fn okeanos_unlink(fs: *mut okeanos_fs, path: *const c_char) -> c_int {
    call("okeanos_unlink", neg, || with_path(fs, path, |m, p| m.remove_path(p).map(|_| 0)))
}

/// Renames `from` to `to`, replacing `to` if it exists (rename(2)).
#[no_mangle]
pub extern "C" fn okeanos_rename(fs: *mut okeanos_fs, from: *const c_char, to: *const c_char) -> c_int {
    call("okeanos_rename", neg, || {
        let to = cstr(to, "to")?;
        with_path(fs, from, |m, p| m.rename_path(p, to).map(|_| 0))
    })
}

/// Sets the size of the file at `path` (truncate(2)).
#[no_mangle]
pub extern "C" fn okeanos_truncate(fs: *mut okeanos_fs, path: *const c_char, size: u64) -> c_int {
    call("okeanos_truncate", neg, || with_path(fs, path, |m, p| m.truncate(m.resolve(p)?, size).map(|_| 0)))
}

/// Fills `st` with the attributes of `path` (not following a final symlink).
#[no_mangle]
pub extern "C" fn okeanos_stat(fs: *mut okeanos_fs, path: *const c_char, st: *mut okeanos_stat_t) -> c_int {
    call("okeanos_stat", neg, || {
        let st = out(st, "st")?;
        let a = with_path(fs, path, |m, p| m.getattr(m.resolve(p)?))?;
        fill_stat(&a, st);
        Ok(0)
    })
}

/// Starts listing a directory (a snapshot of its names, sorted); NULL on error.
#[no_mangle]
pub extern "C" fn okeanos_opendir(fs: *mut okeanos_fs, path: *const c_char) -> *mut okeanos_dir {
    call("okeanos_opendir", |_| std::ptr::null_mut(), || {
        let e = handles::fs(fs as usize)?;
        let entries = with_path(fs, path, |m, p| m.list_path(p))?;
        let d = DirEntry { fs: e, entries, next: Mutex::new(0) };
        Ok(handles::insert(Handle::Dir(Arc::new(d))) as usize as *mut okeanos_dir)
    })
}

/// The next entry into `ent`: 1 if one was filled in, 0 at the end, or -errno.
#[no_mangle]
pub extern "C" fn okeanos_readdir(d: *mut okeanos_dir, ent: *mut okeanos_dirent_t) -> c_int {
    call("okeanos_readdir", neg, || {
        let ent = out(ent, "ent")?;
        let de = handles::dir(d as usize)?;
        de.fs.with(|_| Ok(()))?;
        let mut next = handles::lock(&de.next);
        let Some(x) = de.entries.get(*next) else { return Ok(0) };
        *next += 1;
        ent.ino = x.ino as u64;
        ent.kind = (x.kind.mode_bits() >> 12) as u8;
        let n = x.name.len().min(255);
        for (i, &b) in x.name[..n].iter().enumerate() {
            ent.name[i] = b as c_char;
        }
        ent.name[n] = 0;
        Ok(1)
    })
}

/// Ends a listing.
#[no_mangle]
pub extern "C" fn okeanos_closedir(d: *mut okeanos_dir) -> c_int {
    call("okeanos_closedir", neg, || {
        let de = handles::dir(d as usize)?;
        handles::close_child(d as usize, &de.fs);
        Ok(0)
    })
}

/// The mount's counters (journal bytes by kind, commits, syncs, ...) as a JSON object, written
/// into `buf` (NUL-terminated, cut to `cap`). Returns the JSON's full length: call again with a
/// larger buffer if it is `cap` or more. Or -errno.
#[no_mangle]
pub extern "C" fn okeanos_counters_json(fs: *mut okeanos_fs, buf: *mut c_char, cap: usize) -> i64 {
    call("okeanos_counters_json", neg, || {
        let c = handles::fs(fs as usize)?.with(|m| Ok(m.counters()))?;
        let json = serde_json::to_string(&c).map_err(|e| Error::new(libc::EIO, e.to_string()))?;
        let dst = bytes_mut(buf as *mut c_void, cap)?;
        if !dst.is_empty() {
            let n = json.len().min(dst.len() - 1);
            dst[..n].copy_from_slice(&json.as_bytes()[..n]);
            dst[n] = 0;
        }
        Ok(json.len() as i64)
    })
}

//! `okeanos._okeanos`: the native half of the Python package. The Python half
//! (python/okeanos/__init__.py) turns these into file-like objects and keyword arguments.
//!
//! Every call that can wait (I/O, syncs, mount, unmount) releases the GIL, so Python threads
//! that append and sync at once share group commits as native threads do. Errors are OSError
//! built from (errno, message), which Python turns into its subclass (FileNotFoundError,
//! FileExistsError, ...); a closed file or an unmounted file system is ValueError, as for
//! Python's own files. No raw pointer crosses: objects hold the mount by reference count.

use engine::{File, Okeanos};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

fn os_err(e: engine::FsError) -> PyErr {
    PyOSError::new_err((e.errno(), e.to_string()))
}

fn os_err_at(e: engine::FsError, path: &str) -> PyErr {
    PyOSError::new_err((e.errno(), e.to_string(), path.to_string()))
}

struct Mount {
    fs: RwLock<Option<Okeanos>>,
    path: String,
    /// The files opened on it: an unmount closes them, so that nothing keeps the image (and
    /// its lock) open after it.
    files: Mutex<Vec<Weak<Slot>>>,
}

/// An open file's place: emptied by close, or by the unmount of its file system.
type Slot = Mutex<Option<Arc<File>>>;

impl Mount {
    fn with<R>(&self, f: impl FnOnce(&Okeanos) -> PyResult<R>) -> PyResult<R> {
        let g = self.fs.read().unwrap_or_else(|e| e.into_inner());
        match g.as_ref() {
            Some(fs) => f(fs),
            None => Err(PyValueError::new_err(format!("the file system {} was unmounted", self.path))),
        }
    }
}

/// Formats a new image file: `options` as for okeanos_mkfs (journal=..., journal_size=...).
#[pyfunction]
fn mkfs(py: Python<'_>, path: String, size: u64, options: String) -> PyResult<()> {
    py.allow_threads(|| Okeanos::mkfs_image(path.as_ref(), size, &options)).map(|_| ()).map_err(|e| {
        let errno = match &e {
            engine::MkfsError::Invalid(_) => 22,
            engine::MkfsError::Device(_) => 5,
        };
        PyOSError::new_err((errno, e.to_string(), path.clone()))
    })
}

/// A mounted file system.
#[pyclass(module = "okeanos._okeanos", frozen)]
struct FileSystem {
    m: Arc<Mount>,
}

/// Mounts the image at `path` with ext4-style options ("data=wasteless+dmeta,commit=5").
#[pyfunction]
fn mount(py: Python<'_>, path: String, options: String) -> PyResult<FileSystem> {
    let opts = engine::MountOptions::parse(&options).map_err(|e| PyValueError::new_err(e))?;
    let fs = py.allow_threads(|| Okeanos::open(path.as_ref(), opts)).map_err(|e| os_err_at(e, &path))?;
    Ok(FileSystem { m: Arc::new(Mount { fs: RwLock::new(Some(fs)), path, files: Mutex::new(Vec::new()) }) })
}

#[pymethods]
impl FileSystem {
    /// Opens a regular file as open(2) would with O_CREAT (`create`), O_EXCL (`exclusive`) and
    /// O_TRUNC (`truncate`).
    fn open_file(&self, py: Python<'_>, path: String, create: bool, exclusive: bool, truncate: bool) -> PyResult<RawFile> {
        let f = py.allow_threads(|| self.m.with(|fs| fs.open_path(&path, create, exclusive, truncate).map_err(|e| os_err_at(e, &path))))?;
        let slot = Arc::new(Mutex::new(Some(Arc::new(f))));
        let mut files = self.m.files.lock().unwrap_or_else(|e| e.into_inner());
        files.retain(|w| w.strong_count() > 0);
        files.push(Arc::downgrade(&slot));
        Ok(RawFile { m: self.m.clone(), file: slot, path })
    }

    fn mkdir(&self, py: Python<'_>, path: String, mode: u32) -> PyResult<()> {
        py.allow_threads(|| {
            self.m.with(|fs| {
                let (dir, name) = path.trim_end_matches('/').rsplit_once('/').ok_or_else(|| PyValueError::new_err(format!("{path}: not an absolute path")))?;
                let parent = fs.resolve(dir).map_err(|e| os_err_at(e, &path))?;
                fs.mkdir(parent, name.as_bytes(), mode & 0o7777).map(|_| ()).map_err(|e| os_err_at(e, &path))
            })
        })
    }

    fn rmdir(&self, py: Python<'_>, path: String) -> PyResult<()> {
        py.allow_threads(|| self.m.with(|fs| fs.rmdir_path(&path).map_err(|e| os_err_at(e, &path))))
    }

    fn unlink(&self, py: Python<'_>, path: String) -> PyResult<()> {
        py.allow_threads(|| self.m.with(|fs| fs.remove_path(&path).map_err(|e| os_err_at(e, &path))))
    }

    fn rename(&self, py: Python<'_>, src: String, dst: String) -> PyResult<()> {
        py.allow_threads(|| self.m.with(|fs| fs.rename_path(&src, &dst).map_err(|e| os_err_at(e, &src))))
    }

    /// Names in a directory, sorted, without "." and "..".
    fn listdir(&self, py: Python<'_>, path: String) -> PyResult<Vec<String>> {
        let v = py.allow_threads(|| self.m.with(|fs| fs.list_path(&path).map_err(|e| os_err_at(e, &path))))?;
        Ok(v.into_iter().map(|e| String::from_utf8_lossy(&e.name).into_owned()).filter(|n| n != "." && n != "..").collect())
    }

    /// (ino, mode, nlink, uid, gid, size, atime_ns, mtime_ns, ctime_ns, blocks)
    fn stat(&self, py: Python<'_>, path: String) -> PyResult<(u64, u32, u32, u32, u32, u64, i64, i64, i64, u64)> {
        let a = py.allow_threads(|| self.m.with(|fs| fs.resolve(&path).and_then(|i| fs.getattr(i)).map_err(|e| os_err_at(e, &path))))?;
        Ok(stat_tuple(&a))
    }

    fn truncate(&self, py: Python<'_>, path: String, size: u64) -> PyResult<()> {
        py.allow_threads(|| self.m.with(|fs| fs.resolve(&path).and_then(|i| fs.truncate(i, size)).map_err(|e| os_err_at(e, &path))))
    }

    /// Commits everything and waits for it.
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        py.allow_threads(|| self.m.with(|fs| fs.sync().map_err(os_err)))
    }

    /// Group sync: the files' data durable together (docs/EMBEDDING.md).
    fn sync_files(&self, py: Python<'_>, files: Vec<PyRef<'_, RawFile>>) -> PyResult<()> {
        let mut inos = Vec::with_capacity(files.len());
        for f in &files {
            if !Arc::ptr_eq(&f.m, &self.m) {
                return Err(PyValueError::new_err(format!("{} belongs to another file system", f.path)));
            }
            inos.push(f.get()?.ino());
        }
        drop(files);
        py.allow_threads(|| self.m.with(|fs| fs.sync_files(&inos, true).map_err(os_err)))
    }

    /// The counters as a JSON string.
    fn counters_json(&self) -> PyResult<String> {
        self.m.with(|fs| serde_json::to_string(&fs.counters()).map_err(|e| PyValueError::new_err(e.to_string())))
    }

    /// Unmounts cleanly; files still open answer ValueError afterwards.
    fn unmount(&self, py: Python<'_>) -> PyResult<()> {
        let taken = self.m.fs.write().unwrap_or_else(|e| e.into_inner()).take();
        for w in std::mem::take(&mut *self.m.files.lock().unwrap_or_else(|e| e.into_inner())) {
            if let Some(slot) = w.upgrade() {
                slot.lock().unwrap_or_else(|e| e.into_inner()).take();
            }
        }
        match taken {
            Some(fs) => py.allow_threads(|| fs.unmount()).map_err(os_err),
            None => Ok(()),
        }
    }

    #[getter]
    fn mounted(&self) -> bool {
        self.m.fs.read().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    #[getter]
    fn path(&self) -> String {
        self.m.path.clone()
    }
}

fn stat_tuple(a: &engine::Attr) -> (u64, u32, u32, u32, u32, u64, i64, i64, i64, u64) {
    (a.ino as u64, a.kind.mode_bits() | (a.perm & 0o7777), a.nlink, a.uid, a.gid, a.size, a.atime_ns, a.mtime_ns, a.ctime_ns, a.blocks)
}

/// An open regular file, by offset (the Python class `okeanos.File` keeps the position).
#[pyclass(module = "okeanos._okeanos", frozen)]
struct RawFile {
    m: Arc<Mount>,
    file: Arc<Slot>,
    path: String,
}

impl RawFile {
    fn get(&self) -> PyResult<Arc<File>> {
        let f = self.file.lock().unwrap_or_else(|e| e.into_inner()).clone();
        f.ok_or_else(|| match self.m.fs.read().unwrap_or_else(|e| e.into_inner()).is_some() {
            true => PyValueError::new_err("I/O operation on closed file"),
            false => PyValueError::new_err(format!("{}: the file system {} was unmounted", self.path, self.m.path)),
        })
    }

    /// Runs `f` on the file while its file system is mounted, without the GIL.
    fn io<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&File) -> engine::fs::FsResult<R> + Send) -> PyResult<R> {
        let file = self.get()?;
        py.allow_threads(|| self.m.with(|_| f(&file).map_err(|e| os_err_at(e, &self.path))))
    }
}

#[pymethods]
impl RawFile {
    fn pread<'py>(&self, py: Python<'py>, offset: u64, size: usize) -> PyResult<Bound<'py, PyBytes>> {
        let data = self.io(py, |f| f.read_at(offset, size))?;
        Ok(PyBytes::new(py, &data))
    }

    fn pwrite(&self, py: Python<'_>, offset: u64, data: &[u8]) -> PyResult<usize> {
        let data = data.to_vec();
        self.io(py, move |f| f.write_at(offset, &data))
    }

    /// Appends at the end; returns the offset the data starts at. With `sync`, also waits until
    /// the file's data is durable (fdatasync), in the same release of the GIL.
    #[pyo3(signature = (data, sync = false))]
    fn append(&self, py: Python<'_>, data: &[u8], sync: bool) -> PyResult<u64> {
        let data = data.to_vec();
        self.io(py, move |f| {
            let at = f.append(&data)?;
            if sync {
                f.fdatasync()?;
            }
            Ok(at)
        })
    }

    fn fsync(&self, py: Python<'_>) -> PyResult<()> {
        self.io(py, |f| f.fsync())
    }

    fn fdatasync(&self, py: Python<'_>) -> PyResult<()> {
        self.io(py, |f| f.fdatasync())
    }

    fn size(&self, py: Python<'_>) -> PyResult<u64> {
        self.io(py, |f| f.len())
    }

    fn set_size(&self, py: Python<'_>, size: u64) -> PyResult<()> {
        self.io(py, |f| f.set_len(size))
    }

    fn stat(&self, py: Python<'_>) -> PyResult<(u64, u32, u32, u32, u32, u64, i64, i64, i64, u64)> {
        self.io(py, |f| f.metadata()).map(|a| stat_tuple(&a))
    }

    fn durable_len(&self, py: Python<'_>) -> PyResult<u64> {
        self.io(py, |f| f.durable_len())
    }

    /// Waits (without the file system's lock: an unmount wakes it with an error).
    fn wait_durable(&self, py: Python<'_>, offset: u64, timeout: f64) -> PyResult<u64> {
        if !(timeout >= 0.0 && timeout.is_finite()) {
            return Err(PyValueError::new_err("timeout must be a finite number of seconds, at least 0"));
        }
        let file = self.get()?;
        self.m.with(|_| Ok(()))?;
        // In slices, so that Ctrl-C (a signal Python handles between them) ends a long wait.
        let deadline = std::time::Instant::now() + Duration::from_secs_f64(timeout.min(1e9));
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let slice = left.min(Duration::from_millis(100));
            let len = py.allow_threads(|| file.wait_durable(offset, slice)).map_err(|e| os_err_at(e, &self.path))?;
            if len >= offset || left <= slice {
                return Ok(len);
            }
            py.check_signals()?;
        }
    }

    fn close(&self) {
        self.file.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    #[getter]
    fn closed(&self) -> bool {
        self.file.lock().unwrap_or_else(|e| e.into_inner()).is_none()
    }

    #[getter]
    fn path(&self) -> String {
        self.path.clone()
    }
}

#[pymodule]
fn _okeanos(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(mkfs, m)?)?;
    m.add_function(wrap_pyfunction!(mount, m)?)?;
    m.add_class::<FileSystem>()?;
    m.add_class::<RawFile>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

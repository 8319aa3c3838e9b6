//! A model-based randomized exerciser of the file operations programs use: writes at any
//! offset (holes included), appends, truncates up and down, fallocate in every supported mode,
//! copy_file_range, mmap reads and writes (where the target has them), rename, link, unlink and
//! fsync, on a few files, each checked against an in-memory model of what the files must hold —
//! after every sync of a file, every few operations for all of them, and at the end. The same
//! run drives the library ([`EngineTarget`]) and any directory, such as an Okeanos FUSE mount
//! ([`DirTarget`]); `okeanos exercise` runs it from the command line. A failure names the seed
//! and the operation, so that the run can be repeated exactly.

use crate::{FsError, Okeanos};
use std::collections::BTreeMap;

/// How many files a run works on (names f0..f3, each of which may be absent).
const NAMES: usize = 4;
/// Files stay below this size, so that a run touches holes, partial blocks and extents
/// without spending its time on bulk I/O.
const MAX_SIZE: u64 = 1 << 20;

/// fallocate's modes, as Linux numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Falloc {
    /// Mode 0: allocate, zero-fill holes, extend the size.
    Allocate,
    /// FALLOC_FL_KEEP_SIZE.
    KeepSize,
    /// FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE.
    PunchHole,
    /// FALLOC_FL_ZERO_RANGE.
    ZeroRange,
    /// FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE.
    ZeroRangeKeepSize,
}

impl Falloc {
    const ALL: [Falloc; 5] = [Falloc::Allocate, Falloc::KeepSize, Falloc::PunchHole, Falloc::ZeroRange, Falloc::ZeroRangeKeepSize];

    /// The mode word of fallocate(2).
    pub fn linux_mode(self) -> i32 {
        match self {
            Falloc::Allocate => 0,
            Falloc::KeepSize => 1,
            Falloc::PunchHole => 2 | 1,
            Falloc::ZeroRange => 0x10,
            Falloc::ZeroRangeKeepSize => 0x10 | 1,
        }
    }

    /// What the mode does to contents `c` (the model's rule, Linux's semantics).
    fn apply(self, c: &mut Vec<u8>, off: u64, len: u64) {
        let end = (off + len) as usize;
        let size = c.len();
        match self {
            Falloc::Allocate => c.resize(size.max(end), 0),
            Falloc::KeepSize => {}
            Falloc::PunchHole | Falloc::ZeroRangeKeepSize => {
                let e = end.min(size);
                if (off as usize) < e {
                    c[off as usize..e].fill(0);
                }
            }
            Falloc::ZeroRange => {
                c.resize(size.max(end), 0);
                c[off as usize..end].fill(0);
            }
        }
    }
}

/// One operation of a run.
#[derive(Debug, Clone)]
pub enum Op {
    Create { f: usize },
    Write { f: usize, off: u64, len: usize, fill: u64 },
    Append { f: usize, len: usize, fill: u64 },
    Truncate { f: usize, size: u64 },
    Fallocate { f: usize, mode: Falloc, off: u64, len: u64 },
    CopyRange { from: usize, to: usize, from_off: u64, to_off: u64, len: usize },
    MmapWrite { f: usize, off: u64, len: usize, fill: u64 },
    MmapRead { f: usize, off: u64, len: usize },
    Rename { from: usize, to: usize },
    Link { from: usize, to: usize },
    Unlink { f: usize },
    Fsync { f: usize },
}

/// What a run drives: a few files by name in one directory. Errors are strings saying what
/// failed; `Ok(None)` from an optional operation means the target does not offer it.
pub trait Target {
    fn describe(&self) -> String;
    fn create(&mut self, name: &str) -> Result<(), String>;
    fn write(&mut self, name: &str, off: u64, data: &[u8]) -> Result<(), String>;
    fn append(&mut self, name: &str, data: &[u8]) -> Result<(), String>;
    fn truncate(&mut self, name: &str, size: u64) -> Result<(), String>;
    fn fallocate(&mut self, name: &str, mode: Falloc, off: u64, len: u64) -> Result<(), String>;
    fn copy_range(&mut self, from: &str, from_off: u64, to: &str, to_off: u64, len: usize) -> Result<usize, String>;
    fn mmap_write(&mut self, name: &str, off: u64, data: &[u8]) -> Result<Option<()>, String>;
    fn mmap_read(&mut self, name: &str, off: u64, len: usize) -> Result<Option<Vec<u8>>, String>;
    fn rename(&mut self, from: &str, to: &str) -> Result<(), String>;
    fn link(&mut self, from: &str, to: &str) -> Result<(), String>;
    fn unlink(&mut self, name: &str) -> Result<(), String>;
    fn fsync(&mut self, name: &str) -> Result<(), String>;
    fn read_all(&mut self, name: &str) -> Result<Vec<u8>, String>;
    /// Names present, sorted.
    fn list(&mut self) -> Result<Vec<String>, String>;
}

/// The model: names to file ids, ids to contents.
#[derive(Default)]
struct Model {
    names: BTreeMap<String, usize>,
    files: BTreeMap<usize, Vec<u8>>,
    next: usize,
}

impl Model {
    fn content(&self, name: &str) -> Option<&Vec<u8>> {
        self.names.get(name).map(|id| &self.files[id])
    }
    fn content_mut(&mut self, name: &str) -> Option<&mut Vec<u8>> {
        let id = *self.names.get(name)?;
        self.files.get_mut(&id)
    }
}

fn name(f: usize) -> String {
    format!("f{f}")
}

/// xorshift64*: the run's only source of choices, so a seed repeats a run exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// An offset that favours block boundaries and the neighbourhood of the end.
    fn offset(&mut self, size: u64) -> u64 {
        let o = match self.below(4) {
            0 => self.below(64) * 4096,
            1 => size.saturating_sub(self.below(5000)),
            2 => size + self.below(3 * 4096),
            _ => self.below(MAX_SIZE / 2),
        };
        o.min(MAX_SIZE - 1)
    }
    fn len(&mut self) -> usize {
        [1, 100, 512, 4095, 4096, 4097, 10_000, 70_000][self.below(8) as usize]
    }
}

/// Deterministic bytes (never zero, so that lost data cannot pass as a hole).
fn bytes(fill: u64, len: usize) -> Vec<u8> {
    let mut x = fill | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 255) as u8 + 1
        })
        .collect()
}

/// Chooses the next operation from the model's state.
fn choose(rng: &mut Rng, m: &Model, mmap: bool) -> Op {
    let f = rng.below(NAMES as u64) as usize;
    let size = m.content(&name(f)).map_or(0, |c| c.len() as u64);
    match rng.below(100) {
        0..=7 => Op::Create { f },
        8..=27 => Op::Write { f, off: rng.offset(size), len: rng.len(), fill: rng.next() },
        28..=39 => Op::Append { f, len: rng.len(), fill: rng.next() },
        40..=46 => Op::Truncate { f, size: rng.offset(size) },
        47..=58 => Op::Fallocate { f, mode: Falloc::ALL[rng.below(5) as usize], off: rng.offset(size), len: rng.len().max(1) as u64 },
        59..=64 => {
            let to = rng.below(NAMES as u64) as usize;
            let to_size = m.content(&name(to)).map_or(0, |c| c.len() as u64);
            Op::CopyRange { from: f, to, from_off: rng.below(size + 1), to_off: rng.offset(to_size), len: rng.len() }
        }
        65..=70 if mmap && size > 0 => Op::MmapWrite { f, off: rng.below(size), len: rng.len().min(size as usize), fill: rng.next() },
        71..=74 if mmap && size > 0 => Op::MmapRead { f, off: rng.below(size), len: rng.len() },
        75..=78 => Op::Rename { from: f, to: rng.below(NAMES as u64) as usize },
        79..=81 => Op::Link { from: f, to: rng.below(NAMES as u64) as usize },
        82..=85 => Op::Unlink { f },
        _ => Op::Fsync { f },
    }
}

/// Applies `op` to the target and the model; checks what the operation itself returns.
fn apply(t: &mut dyn Target, m: &mut Model, op: &Op) -> Result<(), String> {
    let exists = |m: &Model, f: usize| m.names.contains_key(&name(f));
    match *op {
        Op::Create { f } => {
            t.create(&name(f))?;
            match m.names.get(&name(f)) {
                Some(&id) => {
                    m.files.insert(id, Vec::new()); // create truncates an existing file
                }
                None => {
                    m.names.insert(name(f), m.next);
                    m.files.insert(m.next, Vec::new());
                    m.next += 1;
                }
            }
        }
        Op::Write { f, off, len, fill } if exists(m, f) => {
            let d = bytes(fill, len);
            t.write(&name(f), off, &d)?;
            let c = m.content_mut(&name(f)).expect("exists");
            let end = off as usize + len;
            c.resize(c.len().max(end), 0);
            c[off as usize..end].copy_from_slice(&d);
        }
        Op::Append { f, len, fill } if exists(m, f) && m.content(&name(f)).expect("exists").len() + len < MAX_SIZE as usize => {
            let d = bytes(fill, len);
            t.append(&name(f), &d)?;
            m.content_mut(&name(f)).expect("exists").extend_from_slice(&d);
        }
        Op::Truncate { f, size } if exists(m, f) => {
            t.truncate(&name(f), size)?;
            m.content_mut(&name(f)).expect("exists").resize(size as usize, 0);
        }
        Op::Fallocate { f, mode, off, len } if exists(m, f) && off + len <= MAX_SIZE => {
            t.fallocate(&name(f), mode, off, len)?;
            mode.apply(m.content_mut(&name(f)).expect("exists"), off, len);
        }
        Op::CopyRange { from, to, from_off, to_off, len } if exists(m, from) && exists(m, to) && to_off + len as u64 <= MAX_SIZE => {
            let src = m.content(&name(from)).expect("exists").clone();
            let want = (src.len() as u64).saturating_sub(from_off).min(len as u64) as usize;
            // Copies within one file are left out: overlapping ones are EINVAL, and how much
            // a copy past the end reads depends on how the kernel splits it.
            if m.names[&name(from)] == m.names[&name(to)] {
                return Ok(());
            }
            let n = t.copy_range(&name(from), from_off, &name(to), to_off, len)?;
            if n != want {
                return Err(format!("copy_file_range copied {n} bytes, {want} were there to copy"));
            }
            if n == 0 {
                return Ok(()); // nothing copied: the destination does not grow
            }
            let c = m.content_mut(&name(to)).expect("exists");
            let end = to_off as usize + n;
            c.resize(c.len().max(end), 0);
            c[to_off as usize..end].copy_from_slice(&src[from_off as usize..from_off as usize + n]);
        }
        Op::MmapWrite { f, off, len, fill } if exists(m, f) => {
            let size = m.content(&name(f)).expect("exists").len();
            let len = len.min(size.saturating_sub(off as usize));
            if len == 0 {
                return Ok(());
            }
            let d = bytes(fill, len);
            if t.mmap_write(&name(f), off, &d)?.is_some() {
                m.content_mut(&name(f)).expect("exists")[off as usize..off as usize + len].copy_from_slice(&d);
            }
        }
        Op::MmapRead { f, off, len } if exists(m, f) => {
            let c = m.content(&name(f)).expect("exists");
            let end = (off as usize + len).min(c.len());
            if off as usize >= end {
                return Ok(());
            }
            if let Some(got) = t.mmap_read(&name(f), off, end - off as usize)? {
                if got != c[off as usize..end] {
                    return Err(format!("mmap read of {} bytes at {off} differs from the model", end - off as usize));
                }
            }
        }
        Op::Rename { from, to } if exists(m, from) => {
            t.rename(&name(from), &name(to))?;
            if m.names.get(&name(to)) != m.names.get(&name(from)) {
                let id = m.names.remove(&name(from)).expect("exists");
                if let Some(old) = m.names.insert(name(to), id) {
                    if !m.names.values().any(|&x| x == old) {
                        m.files.remove(&old);
                    }
                }
            }
        }
        Op::Link { from, to } if exists(m, from) && !exists(m, to) => {
            t.link(&name(from), &name(to))?;
            let id = m.names[&name(from)];
            m.names.insert(name(to), id);
        }
        Op::Unlink { f } if exists(m, f) => {
            t.unlink(&name(f))?;
            let id = m.names.remove(&name(f)).expect("exists");
            if !m.names.values().any(|&x| x == id) {
                m.files.remove(&id);
            }
        }
        Op::Fsync { f } if exists(m, f) => {
            t.fsync(&name(f))?;
            check_file(t, m, &name(f))?;
        }
        _ => {}
    }
    Ok(())
}

fn check_file(t: &mut dyn Target, m: &Model, n: &str) -> Result<(), String> {
    let want = m.content(n).ok_or_else(|| format!("{n} is not in the model"))?;
    let got = t.read_all(n)?;
    if &got != want {
        let first = got.iter().zip(want.iter()).position(|(a, b)| a != b);
        return Err(format!("{n}: {} bytes, the model has {}; first difference at {first:?}", got.len(), want.len()));
    }
    Ok(())
}

/// Checks every file and the directory listing against the model.
fn check_all(t: &mut dyn Target, m: &Model) -> Result<(), String> {
    let listed = t.list()?;
    let want: Vec<String> = m.names.keys().cloned().collect();
    if listed != want {
        return Err(format!("the directory lists {listed:?}, the model {want:?}"));
    }
    for n in m.names.keys() {
        check_file(t, m, n)?;
    }
    Ok(())
}

/// What a run did.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    pub ops: usize,
    pub checks: usize,
}

/// Runs `ops` random operations chosen by `seed` on `t`, checking as it goes (see the module).
/// `mmap`: the target has mmap (a mount). The error names the seed and the operation.
pub fn run(t: &mut dyn Target, seed: u64, ops: usize, mmap: bool) -> Result<Summary, String> {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut m = Model::default();
    let mut s = Summary::default();
    let trace = std::env::var_os("OKEANOS_EXERCISE_TRACE").is_some();
    for i in 0..ops {
        let op = choose(&mut rng, &m, mmap);
        if trace {
            eprintln!("{i}: {op:?}");
        }
        apply(t, &mut m, &op).map_err(|e| format!("{}, seed {seed}, operation {i} {op:?}: {e}", t.describe()))?;
        s.ops += 1;
        if matches!(op, Op::Fsync { .. }) {
            s.checks += 1;
        }
        if i % 64 == 63 {
            check_all(t, &m).map_err(|e| format!("{}, seed {seed}, after operation {i}: {e}", t.describe()))?;
            s.checks += 1;
        }
    }
    check_all(t, &m).map_err(|e| format!("{}, seed {seed}, at the end: {e}", t.describe()))?;
    s.checks += 1;
    Ok(s)
}

/// Checks the target against the contents a finished run left: the caller remounted (or
/// recovered) the file system in between. Returns the names checked.
pub fn recheck(t: &mut dyn Target, expect: &BTreeMap<String, Vec<u8>>) -> Result<usize, String> {
    let listed = t.list()?;
    let want: Vec<String> = expect.keys().cloned().collect();
    if listed != want {
        return Err(format!("after remount the directory lists {listed:?}, before {want:?}"));
    }
    for (n, c) in expect {
        let got = t.read_all(n)?;
        if &got != c {
            return Err(format!("after remount {n} has {} bytes, before {}", got.len(), c.len()));
        }
    }
    Ok(expect.len())
}

/// Reads every file of the target: what [`recheck`] compares after a remount.
pub fn snapshot(t: &mut dyn Target) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let mut out = BTreeMap::new();
    for n in t.list()? {
        let c = t.read_all(&n)?;
        out.insert(n, c);
    }
    Ok(out)
}

/// The library as a target: files in directory `dir` of a mounted [`Okeanos`].
pub struct EngineTarget {
    pub fs: Okeanos,
    pub dir: String,
    pub label: String,
}

impl EngineTarget {
    fn path(&self, n: &str) -> String {
        format!("{}/{n}", self.dir)
    }
    fn ino(&self, n: &str) -> Result<u32, String> {
        self.fs.resolve(&self.path(n)).map_err(|e| format!("{n}: {e}"))
    }
}

fn err(what: &str) -> impl Fn(FsError) -> String + '_ {
    move |e| format!("{what}: {e}")
}

impl Target for EngineTarget {
    fn describe(&self) -> String {
        format!("library ({})", self.label)
    }
    fn create(&mut self, n: &str) -> Result<(), String> {
        self.fs.create_file(&self.path(n)).map(drop).map_err(err("create"))
    }
    fn write(&mut self, n: &str, off: u64, data: &[u8]) -> Result<(), String> {
        self.fs.write(self.ino(n)?, off, data).map(drop).map_err(err("write"))
    }
    fn append(&mut self, n: &str, data: &[u8]) -> Result<(), String> {
        self.fs.append(self.ino(n)?, data).map(drop).map_err(err("append"))
    }
    fn truncate(&mut self, n: &str, size: u64) -> Result<(), String> {
        self.fs.truncate(self.ino(n)?, size).map_err(err("truncate"))
    }
    fn fallocate(&mut self, n: &str, mode: Falloc, off: u64, len: u64) -> Result<(), String> {
        let ino = self.ino(n)?;
        match mode {
            Falloc::Allocate => self.fs.fallocate(ino, off, len, false),
            Falloc::KeepSize => self.fs.fallocate(ino, off, len, true),
            Falloc::PunchHole => self.fs.punch_hole(ino, off, len),
            Falloc::ZeroRange => self.fs.zero_range(ino, off, len, false),
            Falloc::ZeroRangeKeepSize => self.fs.zero_range(ino, off, len, true),
        }
        .map_err(err("fallocate"))
    }
    fn copy_range(&mut self, from: &str, from_off: u64, to: &str, to_off: u64, len: usize) -> Result<usize, String> {
        // The library has no copy_file_range: a read and a write, as the kernel's fallback.
        let data = self.fs.read(self.ino(from)?, from_off, len).map_err(err("copy: read"))?;
        if !data.is_empty() {
            self.fs.write(self.ino(to)?, to_off, &data).map_err(err("copy: write"))?;
        }
        Ok(data.len())
    }
    fn mmap_write(&mut self, _: &str, _: u64, _: &[u8]) -> Result<Option<()>, String> {
        Ok(None)
    }
    fn mmap_read(&mut self, _: &str, _: u64, _: usize) -> Result<Option<Vec<u8>>, String> {
        Ok(None)
    }
    fn rename(&mut self, from: &str, to: &str) -> Result<(), String> {
        self.fs.rename_path(&self.path(from), &self.path(to)).map_err(err("rename"))
    }
    fn link(&mut self, from: &str, to: &str) -> Result<(), String> {
        let dir = self.fs.resolve(&self.dir).map_err(err("link"))?;
        self.fs.link(self.ino(from)?, dir, to.as_bytes()).map(drop).map_err(err("link"))
    }
    fn unlink(&mut self, n: &str) -> Result<(), String> {
        self.fs.remove_path(&self.path(n)).map_err(err("unlink"))
    }
    fn fsync(&mut self, n: &str) -> Result<(), String> {
        self.fs.fsync(self.ino(n)?, false).map_err(err("fsync"))
    }
    fn read_all(&mut self, n: &str) -> Result<Vec<u8>, String> {
        self.fs.read_path(&self.path(n)).map_err(err("read"))
    }
    fn list(&mut self) -> Result<Vec<String>, String> {
        let mut v: Vec<String> = self.fs.list_path(&self.dir).map_err(err("readdir"))?.into_iter().map(|e| String::from_utf8_lossy(&e.name).into_owned()).collect();
        v.sort();
        Ok(v)
    }
}

/// A directory of any mounted file system (an Okeanos FUSE mount, or ext4 to compare), driven
/// through the system calls programs use: pwrite, O_APPEND, ftruncate, fallocate(2),
/// copy_file_range(2), mmap with msync, rename(2), link(2), unlink(2), fsync(2).
pub struct DirTarget {
    pub dir: std::path::PathBuf,
}

fn io(what: &str) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

impl DirTarget {
    fn open(&self, n: &str) -> Result<std::fs::File, String> {
        std::fs::OpenOptions::new().read(true).write(true).open(self.dir.join(n)).map_err(io("open"))
    }
}

impl Target for DirTarget {
    fn describe(&self) -> String {
        format!("directory {}", self.dir.display())
    }
    fn create(&mut self, n: &str) -> Result<(), String> {
        std::fs::OpenOptions::new().write(true).create(true).truncate(true).open(self.dir.join(n)).map(drop).map_err(io("create"))
    }
    fn write(&mut self, n: &str, off: u64, data: &[u8]) -> Result<(), String> {
        std::os::unix::fs::FileExt::write_all_at(&self.open(n)?, data, off).map_err(io("pwrite"))
    }
    fn append(&mut self, n: &str, data: &[u8]) -> Result<(), String> {
        use std::io::Write;
        std::fs::OpenOptions::new().append(true).open(self.dir.join(n)).and_then(|mut f| f.write_all(data)).map_err(io("append"))
    }
    fn truncate(&mut self, n: &str, size: u64) -> Result<(), String> {
        self.open(n)?.set_len(size).map_err(io("ftruncate"))
    }
    fn fallocate(&mut self, n: &str, mode: Falloc, off: u64, len: u64) -> Result<(), String> {
        use std::os::fd::AsRawFd;
        let f = self.open(n)?;
        // SAFETY: fallocate on a descriptor we own.
        let r = unsafe { libc::fallocate(f.as_raw_fd(), mode.linux_mode(), off as libc::off_t, len as libc::off_t) };
        if r != 0 {
            return Err(format!("fallocate {mode:?}: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    }
    fn copy_range(&mut self, from: &str, from_off: u64, to: &str, to_off: u64, len: usize) -> Result<usize, String> {
        use std::os::fd::AsRawFd;
        let (src, dst) = (self.open(from)?, self.open(to)?);
        let (mut a, mut b) = (from_off as libc::loff_t, to_off as libc::loff_t);
        let mut done = 0usize;
        while done < len {
            // SAFETY: valid descriptors and offsets we own.
            let n = unsafe { libc::copy_file_range(src.as_raw_fd(), &mut a, dst.as_raw_fd(), &mut b, len - done, 0) };
            if n < 0 {
                return Err(format!("copy_file_range: {}", std::io::Error::last_os_error()));
            }
            if n == 0 {
                break;
            }
            done += n as usize;
        }
        Ok(done)
    }
    fn mmap_write(&mut self, n: &str, off: u64, data: &[u8]) -> Result<Option<()>, String> {
        with_map(&self.open(n)?, off, data.len(), |p| {
            p.copy_from_slice(data);
        })
        .map(Some)
    }
    fn mmap_read(&mut self, n: &str, off: u64, len: usize) -> Result<Option<Vec<u8>>, String> {
        with_map(&self.open(n)?, off, len, |p| p.to_vec()).map(Some)
    }
    fn rename(&mut self, from: &str, to: &str) -> Result<(), String> {
        std::fs::rename(self.dir.join(from), self.dir.join(to)).map_err(io("rename"))
    }
    fn link(&mut self, from: &str, to: &str) -> Result<(), String> {
        std::fs::hard_link(self.dir.join(from), self.dir.join(to)).map_err(io("link"))
    }
    fn unlink(&mut self, n: &str) -> Result<(), String> {
        std::fs::remove_file(self.dir.join(n)).map_err(io("unlink"))
    }
    fn fsync(&mut self, n: &str) -> Result<(), String> {
        self.open(n)?.sync_all().map_err(io("fsync"))
    }
    fn read_all(&mut self, n: &str) -> Result<Vec<u8>, String> {
        std::fs::read(self.dir.join(n)).map_err(io("read"))
    }
    fn list(&mut self) -> Result<Vec<String>, String> {
        let mut v = Vec::new();
        for e in std::fs::read_dir(&self.dir).map_err(io("readdir"))? {
            v.push(e.map_err(io("readdir"))?.file_name().to_string_lossy().into_owned());
        }
        v.sort();
        Ok(v)
    }
}

/// Maps `len` bytes of `f` at `off` (shared, read-write), runs `use_it` on them, then msyncs and
/// unmaps.
fn with_map<R>(f: &std::fs::File, off: u64, len: usize, use_it: impl FnOnce(&mut [u8]) -> R) -> Result<R, String> {
    use std::os::fd::AsRawFd;
    let page = 4096u64;
    let base = off / page * page;
    let span = (off - base) as usize + len;
    // SAFETY: a fresh shared mapping of a file we hold open; unmapped below.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), span, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, f.as_raw_fd(), base as libc::off_t) };
    if p == libc::MAP_FAILED {
        return Err(format!("mmap: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: the mapping is `span` bytes long and lives until munmap below.
    let r = use_it(unsafe { std::slice::from_raw_parts_mut((p as *mut u8).add((off - base) as usize), len) });
    // SAFETY: the mapping made above.
    let synced = unsafe { libc::msync(p, span, libc::MS_SYNC) } == 0;
    let e = std::io::Error::last_os_error();
    // SAFETY: as above.
    unsafe { libc::munmap(p, span) };
    if !synced {
        return Err(format!("msync: {e}"));
    }
    Ok(r)
}

//! Submitting a stage's writes together: the scattered 4 KiB blocks of ordered data and of a
//! checkpoint go down at once instead of one pwrite at a time (queue depth 1 with O_DIRECT on a
//! block device). Used by `FileDevice::write_batch` (`Device::write_batch`), in the real runtime only: the
//! I/O plan is the same, and the crash model already lets a stage's writes land in any order
//! until its flush, so issuing them together changes no guarantee.
//!
//! Two engines, chosen once per process:
//! - io_uring (the io-uring crate): one ring per thread that submits (the journal thread, the
//!   checkpoint thread, and each thread that has led a commit of its write group:
//!   engine/leader.rs; a ring is a few pages, freed with its thread), at most [`RING_DEPTH`]
//!   writes in flight;
//! - a small pool of scoped threads issuing pwrite, when io_uring is unavailable (an old
//!   kernel, or a seccomp profile that refuses `io_uring_setup`), at most [`THREADS`] at once.
//!
//! `OKEANOS_IO=uring|threads|serial` forces one (benchmarks compare them; tests cover each).

use std::cell::RefCell;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Writes in flight on one ring.
pub const RING_DEPTH: u32 = 64;
/// Threads of the fallback engine.
pub const THREADS: usize = 8;

/// How a batch of writes is issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Uring,
    Threads,
    /// One pwrite after another (what every write was before batching).
    Serial,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Uring => "io_uring",
            Engine::Threads => "threads",
            Engine::Serial => "serial",
        }
    }
}

/// The engine this process uses: `OKEANOS_IO` if set, else io_uring when a ring can be made.
pub fn engine() -> Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    *ENGINE.get_or_init(|| match std::env::var("OKEANOS_IO").as_deref() {
        Ok("serial") => Engine::Serial,
        Ok("threads") => Engine::Threads,
        _ if io_uring::IoUring::new(RING_DEPTH).is_ok() => Engine::Uring,
        _ => Engine::Threads,
    })
}

thread_local! {
    static RING: RefCell<Option<io_uring::IoUring>> = const { RefCell::new(None) };
}

/// Writes each `(offset, bytes)` of `writes` to `file` (whole: a short write is finished with
/// pwrite), using `engine`. Returns the first failure as the offset it happened at and the
/// error; on failure some of the other writes may have landed (as with any unflushed write).
pub fn write_all(file: &std::fs::File, writes: &[(u64, &[u8])], engine: Engine) -> Result<(), (u64, std::io::Error)> {
    match engine {
        _ if writes.len() <= 1 => serial(file, writes),
        Engine::Serial => serial(file, writes),
        Engine::Threads => threads(file, writes),
        Engine::Uring => RING.with(|r| {
            let mut r = r.borrow_mut();
            if r.is_none() {
                match io_uring::IoUring::new(RING_DEPTH) {
                    Ok(ring) => *r = Some(ring),
                    Err(_) => return threads(file, writes),
                }
            }
            uring(r.as_mut().expect("made above"), file, writes)
        }),
    }
}

fn serial(file: &std::fs::File, writes: &[(u64, &[u8])]) -> Result<(), (u64, std::io::Error)> {
    for &(off, data) in writes {
        file.write_all_at(data, off).map_err(|e| (off, e))?;
    }
    Ok(())
}

fn threads(file: &std::fs::File, writes: &[(u64, &[u8])]) -> Result<(), (u64, std::io::Error)> {
    let next = AtomicUsize::new(0);
    let first_err = std::sync::Mutex::new(None);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(&(off, data)) = writes.get(i) else { return };
        if let Err(e) = file.write_all_at(data, off) {
            first_err.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert((off, e));
            next.store(writes.len(), Ordering::Relaxed);
            return;
        }
    };
    std::thread::scope(|s| {
        for _ in 1..THREADS.min(writes.len()) {
            s.spawn(work);
        }
        work();
    });
    match first_err.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Submits up to [`RING_DEPTH`] writes, refilling as they complete, until all are done. Every
/// buffer is borrowed from `writes`, which outlives the call; the call returns only after every
/// submitted entry completed (also on error), so no buffer is freed under the kernel.
fn uring(ring: &mut io_uring::IoUring, file: &std::fs::File, writes: &[(u64, &[u8])]) -> Result<(), (u64, std::io::Error)> {
    use io_uring::{opcode, types};
    let fd = types::Fd(file.as_raw_fd());
    let (mut next, mut in_flight) = (0usize, 0usize);
    let mut first_err: Option<(u64, std::io::Error)> = None;
    let mut short: Vec<(u64, usize)> = Vec::new();
    while next < writes.len() || in_flight > 0 {
        while first_err.is_none() && next < writes.len() && in_flight < RING_DEPTH as usize {
            let (off, data) = writes[next];
            assert!(data.len() <= u32::MAX as usize, "one write is a run of at most a few hundred blocks");
            let e = opcode::Write::new(fd, data.as_ptr(), data.len() as u32).offset(off).build().user_data(next as u64);
            // SAFETY: the buffer lives in `writes`, borrowed for the whole call, and the loop
            // does not return before every submitted entry has completed.
            if unsafe { ring.submission().push(&e) }.is_err() {
                break;
            }
            next += 1;
            in_flight += 1;
        }
        if in_flight == 0 {
            break;
        }
        if let Err(e) = ring.submit_and_wait(1) {
            match e.raw_os_error() {
                // Interrupted or busy: reap what completed and go on.
                Some(libc::EINTR | libc::EAGAIN | libc::EBUSY) => {}
                // The kernel may still be reading the buffers of the writes in flight, which
                // the caller would free on return: nothing safe remains but to stop.
                _ => {
                    eprintln!("okeanos: io_uring_enter failed with writes in flight: {e}");
                    std::process::abort();
                }
            }
        }
        for cqe in ring.completion() {
            in_flight -= 1;
            let i = cqe.user_data() as usize;
            let (off, data) = writes[i];
            let res = cqe.result();
            if res < 0 {
                first_err.get_or_insert((off, std::io::Error::from_raw_os_error(-res)));
            } else if (res as usize) < data.len() {
                short.push((i as u64, res as usize));
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    for (i, done) in short {
        let (off, data) = writes[i as usize];
        file.write_all_at(&data[done..], off + done as u64).map_err(|e| (off, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(engine: Engine) {
        let f = tempfile::tempfile().unwrap();
        f.set_len(1 << 20).unwrap();
        let bufs: Vec<Vec<u8>> = (0..200u8).map(|i| vec![i; 4096]).collect();
        // Scattered, out of order, with one run of several blocks.
        let mut writes: Vec<(u64, &[u8])> = bufs.iter().enumerate().map(|(i, b)| (((i * 37) % 200) as u64 * 4096, b.as_slice())).collect();
        let run = vec![0xeeu8; 4096 * 3];
        writes.push((200 * 4096, &run));
        write_all(&f, &writes, engine).unwrap();
        let mut got = vec![0u8; 4096];
        for (i, b) in bufs.iter().enumerate() {
            f.read_exact_at(&mut got, ((i * 37) % 200) as u64 * 4096).unwrap();
            assert_eq!(&got, b, "{engine:?}: block {i}");
        }
        let mut got = vec![0u8; 4096 * 3];
        f.read_exact_at(&mut got, 200 * 4096).unwrap();
        assert_eq!(got, run);
    }

    #[test]
    fn every_engine_writes_every_block() {
        check(Engine::Serial);
        check(Engine::Threads);
        // io_uring where the kernel allows it (write_all falls back to threads otherwise).
        check(Engine::Uring);
    }

    #[test]
    fn a_failed_write_is_reported_with_its_offset() {
        // A read-only file: every write fails with EBADF.
        let path = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(path.path(), vec![0u8; 8192]).unwrap();
        let f = std::fs::File::open(path.path()).unwrap();
        let a = vec![1u8; 4096];
        for engine in [Engine::Serial, Engine::Threads, Engine::Uring] {
            let (off, e) = write_all(&f, &[(0, &a), (4096, &a)], engine).unwrap_err();
            assert!(off == 0 || off == 4096, "{engine:?}: {off}");
            assert_eq!(e.raw_os_error(), Some(libc::EBADF), "{engine:?}: {e}");
        }
    }
}

//! FUSE over io_uring (Linux 6.14 and later, `/sys/module/fuse/parameters/enable_uring`): the
//! kernel hands requests to the daemon through io_uring commands on /dev/fuse, one queue per
//! possible CPU, instead of a read() and a write() of /dev/fuse per request.
//!
//! Each queue is served by a few threads; each thread owns its own io_uring and a set of ring
//! entries (a 288-byte header buffer and a payload buffer as large as the largest request or
//! reply), registered with FUSE_IO_URING_CMD_REGISTER one at a time, as the thread needs them
//! (see `Queue::serve`). A request arrives as the completion of
//! an entry's command; its reply is written into the same entry, and one
//! FUSE_IO_URING_CMD_COMMIT_AND_FETCH both delivers the reply and offers the entry for the
//! next request: one system call per request, often shared by several. A request from a
//! program on CPU n goes to queue n.
//!
//! Replies sent later (a sync's reply, sent by the engine's notifier once the commit is
//! durable) are written into their entry by whichever thread sends them; the entry's owner
//! thread is woken through an eventfd to commit it. An entry's buffers belong to one party at a
//! time: the kernel from the command's submission to its completion, then the request's reply
//! until it is sent, then the owner thread until it submits the commit.
//!
//! Forgets and interrupts still come through /dev/fuse (fuser's threads keep serving it), as do
//! the requests made before every queue is registered.
//!
//! The kernel's interface (include/uapi/linux/fuse.h, struct fuse_uring_req_header and
//! struct fuse_uring_cmd_req) is declared here by hand: the system headers predate it.

use super::reply::Reply;
use super::wire::{self, InHeader, RingReply, Sink};
use super::OkeanosFuse;
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::alloc::Layout;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// `struct fuse_uring_req_header`: in_out (128: fuse_in_header / fuse_out_header), op_in (128:
/// the opcode's fixed argument), ring_ent_in_out (32: flags, commit_id, payload_sz, ...).
const HEADER: usize = 288;
const OP_IN: usize = 128;
const ENT_IN_OUT: usize = 256;
const CMD_REGISTER: u32 = 1;
const CMD_COMMIT_AND_FETCH: u32 = 2;
/// The user_data of the eventfd read that wakes a thread for replies sent from elsewhere.
const WAKE: u64 = u64::MAX;
/// How long a thread keeps offering its entries while the kernel has not finished INIT.
const INIT_WAIT: Duration = Duration::from_secs(10);

/// The shape of the rings: threads per queue, entries per thread, payload bytes per entry.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub threads_per_queue: usize,
    pub entries: usize,
    pub payload: usize,
}

/// What the mount asked for and what it got: read by `init` (to ask the kernel), by the
/// queue threads and by the counters file.
pub struct RingState {
    wanted: bool,
    /// Set by INIT: whether the kernel agreed to io_uring.
    decided: Mutex<Option<bool>>,
    cv: Condvar,
    /// Requests served through the rings.
    pub served: AtomicU64,
    /// Entries registered and not ended.
    pub live: AtomicUsize,
    /// The kernel was told to give up on the rings (some queue did not start).
    fallen_back: std::sync::atomic::AtomicBool,
    /// Why the rings are not in use, when they are not.
    pub why_not: Mutex<Option<String>>,
}

impl RingState {
    pub fn new(wanted: bool) -> Arc<RingState> {
        Arc::new(RingState { wanted, decided: Mutex::new(None), cv: Condvar::new(), served: AtomicU64::new(0), live: AtomicUsize::new(0), fallen_back: Default::default(), why_not: Mutex::new(None) })
    }

    pub fn wanted(&self) -> bool {
        self.wanted
    }

    /// INIT's decision: `Err(reason)` when the rings will not be used.
    pub fn decide(&self, r: Result<(), String>) {
        let ok = r.is_ok();
        if let Err(why) = r {
            if self.wanted {
                eprintln!("okeanos: FUSE over io_uring not used: {why}; requests go through /dev/fuse");
            }
            *self.why_not.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
        }
        *self.decided.lock().unwrap_or_else(|e| e.into_inner()) = Some(ok);
        self.cv.notify_all();
    }

    /// Waits for INIT's decision, or for the session to end without one.
    fn wait_decision(&self) -> bool {
        let g = self.decided.lock().unwrap_or_else(|e| e.into_inner());
        let g = self.cv.wait_while(g, |d| d.is_none()).unwrap_or_else(|e| e.into_inner());
        g.unwrap_or(false)
    }

    /// The session ended: a starter still waiting for INIT's decision gives up.
    pub fn session_ended(&self) {
        let mut d = self.decided.lock().unwrap_or_else(|e| e.into_inner());
        if d.is_none() {
            *d = Some(false);
            self.cv.notify_all();
        }
    }

    /// "io_uring" or "/dev/fuse", for the counters file.
    pub fn transport(&self) -> &'static str {
        if self.live.load(Ordering::Relaxed) > 0 && !self.fallen_back.load(Ordering::Relaxed) {
            "io_uring"
        } else {
            "/dev/fuse"
        }
    }

    fn fail(&self, why: String) {
        eprintln!("okeanos: FUSE over io_uring: {why}");
        *self.why_not.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
    }
}

/// Whether this kernel and process can serve FUSE over io_uring: the module parameter is on
/// and a ring with 128-byte submission entries can be made.
pub fn probe() -> Result<(), String> {
    match std::fs::read_to_string("/sys/module/fuse/parameters/enable_uring") {
        Ok(v) if v.trim() == "Y" => {}
        Ok(_) => return Err("the fuse module's enable_uring parameter is off".into()),
        Err(_) => return Err("this kernel has no FUSE over io_uring (Linux 6.14 and later)".into()),
    }
    IoUring::<squeue::Entry128, cqueue::Entry>::builder().build(4).map(drop).map_err(|e| format!("io_uring is not available here: {e}"))
}

/// The number of queues the kernel expects: one per possible CPU.
pub fn possible_cpus() -> usize {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
    let n: usize = s
        .trim()
        .split(',')
        .filter_map(|r| match r.split_once('-') {
            Some((a, b)) => Some(b.parse::<usize>().ok()? + 1 - a.parse::<usize>().ok()?),
            None => r.parse::<usize>().ok().map(|_| 1),
        })
        .sum();
    n.max(1)
}

/// Starts the queue threads once INIT has decided (in a thread of its own: INIT is served by
/// fuser after the mount). `fd` is the mount's /dev/fuse descriptor; `abort` ends the
/// connection (its requests fail at once) when a queue dies while mounted.
pub fn start(fd: OwnedFd, fs: Arc<OkeanosFuse>, state: Arc<RingState>, shape: Shape, abort: Arc<dyn Fn() + Send + Sync>) {
    let abort_here = abort.clone();
    std::thread::Builder::new()
        .name("okeanos-ring".into())
        .spawn(move || {
            if !state.wanted || !state.wait_decision() {
                return;
            }
            let fd = Arc::new(fd);
            let hooks = super::TestHooks::from_env();
            let (tx, rx) = std::sync::mpsc::channel::<Result<(), String>>();
            let mut threads = 0;
            for qid in 0..possible_cpus() {
                for t in 0..shape.threads_per_queue {
                    let (fd, fs, st, tq, abort) = (fd.clone(), fs.clone(), state.clone(), tx.clone(), abort.clone());
                    let spawned = std::thread::Builder::new().name(format!("okeanos-q{qid}.{t}")).spawn(move || {
                        let opened = match hooks.ring_fail_queue {
                            Some(q) if q as usize == qid => Err(std::io::Error::other("failing as the test hook ring_fail_queue asks")),
                            _ => Queue::open(fd.as_raw_fd(), qid as u16, shape),
                        };
                        let q = match opened {
                            Ok(q) => q,
                            Err(e) => return drop(tq.send(Err(format!("queue {qid}: {e}")))),
                        };
                        let _ = tq.send(Ok(()));
                        drop(tq);
                        let r = q.serve(&fs, &st, hooks.ring_fail_after);
                        if let Err(e) = r {
                            // The requests this thread had taken would never be answered:
                            // end the connection rather than leave them (and the programs
                            // that made them) waiting. The engine then unmounts cleanly.
                            st.fail(format!("queue {qid}: {e}; aborting the connection"));
                            abort();
                        }
                    });
                    match spawned {
                        Ok(_) => threads += 1,
                        Err(e) => {
                            let _ = tx.send(Err(format!("starting a thread for queue {qid}: {e}")));
                        }
                    }
                }
            }
            drop(tx);
            let failed: Vec<String> = rx.iter().filter_map(Result::err).collect();
            if let Some(first) = failed.first() {
                // The kernel holds every request until each queue has an entry: tell it to
                // give up on io_uring, so that requests go through /dev/fuse.
                state.fail(format!("{first} ({} of {threads} queue threads failed to start); falling back to /dev/fuse", failed.len()));
                state.fallen_back.store(true, Ordering::Relaxed);
                if let Err(e) = give_up(fd.as_raw_fd()) {
                    eprintln!("okeanos: FUSE over io_uring could not be refused either ({e}); aborting the connection");
                    abort();
                }
            }
        })
        .map(drop)
        .unwrap_or_else(|e| {
            eprintln!("okeanos: FUSE over io_uring not started: {e}; aborting the connection");
            abort_here()
        });
}

/// Makes the kernel drop io_uring for this connection: a registration it must refuse (a queue
/// number past the last CPU) turns the connection back to /dev/fuse and wakes the requests
/// held for the rings.
fn give_up(fd: RawFd) -> std::io::Result<()> {
    let mut ring = IoUring::<squeue::Entry128, cqueue::Entry>::builder().build(2)?;
    let iov = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; 2];
    let e = register_sqe(fd, u16::MAX, 0, &iov);
    // SAFETY: the iovecs outlive the submission (the kernel refuses before reading them).
    unsafe { ring.submission().push(&e) }.map_err(|_| std::io::Error::other("submission queue full"))?;
    ring.submit_and_wait(1)?;
    let r = ring.completion().next().map(|c| c.result());
    match r {
        // EAGAIN: the kernel has not finished INIT, and refused before looking at the queue.
        Some(r) if r == -libc::EAGAIN => Err(std::io::Error::other("the kernel has not finished INIT")),
        Some(r) if r < 0 => Ok(()),
        _ => Err(std::io::Error::other("the kernel accepted an impossible queue")),
    }
}

/// One thread's entries: their buffers (allocated once, never moved) and the replies ready to
/// be committed.
struct Entries {
    base: *mut u8,
    layout: Layout,
    count: usize,
    payload: usize,
    ready: Mutex<Vec<u16>>,
    wake: OwnedFd,
    /// Where the eventfd read lands.
    wake_buf: std::cell::UnsafeCell<[u8; 8]>,
    owner: ThreadId,
}

// SAFETY: the buffers are reached through raw pointers by one party at a time (see the module
// comment); `ready` is behind a mutex.
unsafe impl Send for Entries {}
unsafe impl Sync for Entries {}

impl Entries {
    fn new(count: usize, payload: usize) -> std::io::Result<Entries> {
        let stride = 4096 + payload;
        let layout = Layout::from_size_align(stride * count, 4096).map_err(std::io::Error::other)?;
        // SAFETY: the layout's size is not zero (count and payload are).
        let base = unsafe { std::alloc::alloc_zeroed(layout) };
        if base.is_null() {
            return Err(std::io::Error::from(std::io::ErrorKind::OutOfMemory));
        }
        // SAFETY: eventfd has no memory preconditions.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if efd < 0 {
            // SAFETY: allocated above with this layout.
            unsafe { std::alloc::dealloc(base, layout) };
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor owned by nobody else.
        let wake = unsafe { OwnedFd::from_raw_fd(efd) };
        Ok(Entries { base, layout, count, payload, ready: Mutex::new(Vec::new()), wake, wake_buf: std::cell::UnsafeCell::new([0; 8]), owner: std::thread::current().id() })
    }

    fn header(&self, k: usize) -> *mut u8 {
        assert!(k < self.count, "ring entry {k} of {}", self.count);
        // SAFETY: within the allocation (k < count, checked above).
        unsafe { self.base.add(k * (4096 + self.payload)) }
    }

    fn payload_ptr(&self, k: usize) -> *mut u8 {
        // SAFETY: the payload follows its page-sized header area, within the allocation.
        unsafe { self.header(k).add(4096) }
    }

    fn iovecs(&self, k: usize) -> [libc::iovec; 2] {
        [libc::iovec { iov_base: self.header(k).cast(), iov_len: HEADER }, libc::iovec { iov_base: self.payload_ptr(k).cast(), iov_len: self.payload }]
    }

    /// Queues entry `k`'s reply for its commit, waking the owner thread when another sends it.
    fn ready(&self, k: u16) {
        let first = {
            let mut r = self.ready.lock().unwrap_or_else(|e| e.into_inner());
            r.push(k);
            r.len() == 1
        };
        // One wake-up per batch: a list that was not empty has a wake-up on its way already
        // (the owner empties the list when it wakes).
        if first && std::thread::current().id() != self.owner {
            let one = 1u64.to_ne_bytes();
            // SAFETY: writes 8 bytes from a live buffer to our eventfd.
            unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), 8) };
        }
    }
}

impl Drop for Entries {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; every Slot holds an Arc to us.
        unsafe { std::alloc::dealloc(self.base, self.layout) };
    }
}

/// A request's entry, as the reply's destination.
struct Slot {
    entries: Arc<Entries>,
    k: u16,
    unique: u64,
}

impl Sink for Slot {
    fn payload(&mut self) -> &mut [u8] {
        // SAFETY: the entry is ours until `send` (module comment); the payload area is
        // `payload` bytes long.
        unsafe { std::slice::from_raw_parts_mut(self.entries.payload_ptr(self.k as usize), self.entries.payload) }
    }

    fn send(self, error: i32, len: usize) {
        let h = self.entries.header(self.k as usize);
        let out = wire::out_header(self.unique, error, len);
        // SAFETY: the header area is HEADER bytes; ours until the commit is queued below.
        unsafe {
            std::ptr::copy_nonoverlapping(out.as_ptr(), h, out.len());
            std::ptr::copy_nonoverlapping((len as u32).to_le_bytes().as_ptr(), h.add(ENT_IN_OUT + 16), 4);
        }
        self.entries.ready(self.k);
    }
}

/// The 80 command bytes of an entry's io_uring command: `struct fuse_uring_cmd_req`.
fn cmd_bytes(commit_id: u64, qid: u16) -> [u8; 80] {
    let mut c = [0u8; 80];
    c[8..16].copy_from_slice(&commit_id.to_le_bytes());
    c[16..18].copy_from_slice(&qid.to_le_bytes());
    c
}

fn register_sqe(fd: RawFd, qid: u16, k: usize, iov: &[libc::iovec; 2]) -> squeue::Entry128 {
    let e = opcode::UringCmd80::new(types::Fd(fd), CMD_REGISTER).cmd(cmd_bytes(0, qid)).addr(Some(iov.as_ptr() as u64)).build().user_data(k as u64);
    // The kernel reads the iovec count from the entry's `len` (offset 24), which the crate's
    // builder does not set.
    // SAFETY: Entry128 is a repr(C) 128-byte io_uring_sqe; `len` is the u32 at offset 24.
    let mut raw: [u8; 128] = unsafe { std::mem::transmute(e) };
    raw[24..28].copy_from_slice(&2u32.to_ne_bytes());
    // SAFETY: the same bytes, one field set.
    unsafe { std::mem::transmute::<[u8; 128], squeue::Entry128>(raw) }
}

fn commit_sqe(fd: RawFd, qid: u16, k: usize, commit_id: u64) -> squeue::Entry128 {
    opcode::UringCmd80::new(types::Fd(fd), CMD_COMMIT_AND_FETCH).cmd(cmd_bytes(commit_id, qid)).build().user_data(k as u64)
}

/// One thread's ring and entries.
struct Queue {
    fd: RawFd,
    qid: u16,
    ring: IoUring<squeue::Entry128, cqueue::Entry>,
    entries: Arc<Entries>,
    iovs: Vec<[libc::iovec; 2]>,
}

impl Queue {
    fn open(fd: RawFd, qid: u16, shape: Shape) -> std::io::Result<Queue> {
        let n = shape.entries.clamp(1, u16::MAX as usize - 1);
        let entries = Arc::new(Entries::new(n, shape.payload)?);
        // Task work (copying the next request into an entry) runs only when this thread
        // waits for completions, never by interrupting it. The thread is not pinned to its
        // queue's CPU: pinned, fio was no faster and PostgreSQL's half-speed runs came more
        // often (docs/BENCHMARKS.md, "FUSE over io_uring").
        let mut b = IoUring::<squeue::Entry128, cqueue::Entry>::builder();
        b.setup_single_issuer().setup_defer_taskrun();
        let ring = b.build(((2 * n + 8) as u32).next_power_of_two())?;
        let iovs = (0..n).map(|k| entries.iovecs(k)).collect();
        Ok(Queue { fd, qid, ring, entries, iovs })
    }

    /// Serves this thread's entries until the connection ends (Ok) or the ring fails (Err).
    fn serve(mut self, fs: &OkeanosFuse, state: &RingState, fail_after: Option<u64>) -> std::io::Result<()> {
        let (fd, qid, n) = (self.fd, self.qid, self.iovs.len());
        let entries = self.entries.clone();
        let wake_sqe = || opcode::Read::new(types::Fd(entries.wake.as_raw_fd()), entries.wake_buf.get().cast(), 8).build().user_data(WAKE).into();
        // Entries are offered to the kernel lazily: one at first, another only when every
        // entry this thread has offered is held by a reply still to come (a sync's). The
        // kernel gives a queue's next request to the entry offered last, so a thread with
        // many idle entries would be handed requests while it is still serving one, and a
        // request that blocks would hold up all of them (docs/BENCHMARKS.md, "FUSE over
        // io_uring"). With one offered entry, a busy thread has none, and the next request
        // goes to another thread.
        let mut pending: Vec<squeue::Entry128> = vec![register_sqe(fd, qid, 0, &self.iovs[0])];
        let mut registered = 1;
        // Entries offered and not yet completed (a request, or an error).
        let mut offered = 1usize;
        pending.push(wake_sqe());
        let started = Instant::now();
        let mut live = 1;
        state.live.fetch_add(1, Ordering::Relaxed);
        let mut body = Vec::new();
        let result = 'serve: loop {
            let ready = std::mem::take(&mut *entries.ready.lock().unwrap_or_else(|e| e.into_inner()));
            for k in ready {
                // SAFETY: the kernel wrote commit_id into the entry's header with the request.
                let commit_id = unsafe { std::ptr::read_unaligned(entries.header(k as usize).add(ENT_IN_OUT + 8).cast::<u64>()) };
                pending.push(commit_sqe(fd, qid, k as usize, u64::from_le(commit_id)));
                offered += 1;
            }
            if offered == 0 && registered < n {
                pending.push(register_sqe(fd, qid, registered, &self.iovs[registered]));
                registered += 1;
                offered += 1;
                live += 1;
                state.live.fetch_add(1, Ordering::Relaxed);
            }
            {
                let mut sq = self.ring.submission();
                while let Some(e) = pending.last() {
                    // SAFETY: every buffer an entry names (iovecs, headers, payloads, the wake
                    // buffer) is kept alive past the ring (leaked below when it ends).
                    if unsafe { sq.push(e) }.is_err() {
                        break;
                    }
                    pending.pop();
                }
            }
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) || e.raw_os_error() == Some(libc::EBUSY) => {}
                Err(e) => break 'serve Err(e),
            }
            let done: Vec<(u64, i32)> = self.ring.completion().map(|c| (c.user_data(), c.result())).collect();
            for (ud, res) in done {
                if ud == WAKE {
                    pending.push(wake_sqe());
                    continue;
                }
                let k = ud as usize;
                if k >= registered {
                    break 'serve Err(std::io::Error::other(format!("a completion names entry {ud}, which this thread did not offer")));
                }
                offered -= 1;
                if res == -libc::EAGAIN {
                    if started.elapsed() >= INIT_WAIT {
                        // The kernel holds every request until this queue registers: a queue
                        // that cannot must not end quietly (the caller aborts the connection).
                        break 'serve Err(std::io::Error::other(format!("the kernel refused the entries for {} s (INIT not finished)", INIT_WAIT.as_secs())));
                    }
                    // The kernel has not finished INIT yet: offer the entry again.
                    std::thread::sleep(Duration::from_millis(1));
                    pending.push(register_sqe(fd, qid, k, &self.iovs[k]));
                    offered += 1;
                    continue;
                }
                if res < 0 {
                    live -= 1;
                    state.live.fetch_sub(1, Ordering::Relaxed);
                    if ![libc::ENOTCONN, libc::ECONNABORTED, libc::ENODEV].contains(&-res) {
                        state.fail(format!("queue {qid}: an entry was refused or ended: {}", std::io::Error::from_raw_os_error(-res)));
                    }
                    if live == 0 {
                        break 'serve Ok(());
                    }
                    continue;
                }
                serve_one(fs, state, &entries, k, &mut body);
                if fail_after.is_some_and(|n| state.served.load(Ordering::Relaxed) >= n) {
                    break 'serve Err(std::io::Error::other("failing as the test hook ring_fail_after asks"));
                }
            }
        };
        state.live.fetch_sub(live, Ordering::Relaxed);
        // The kernel may still hold commands naming these buffers while the ring winds down:
        // they are never freed (once per thread, when the connection ends).
        std::mem::forget(entries);
        std::mem::forget(self.iovs);
        result
    }
}

/// Decodes entry `k`'s request and serves it.
fn serve_one(fs: &OkeanosFuse, state: &RingState, entries: &Arc<Entries>, k: usize, body: &mut Vec<u8>) {
    state.served.fetch_add(1, Ordering::Relaxed);
    let mut head = [0u8; HEADER];
    // SAFETY: the kernel completed the entry's command: its header is ours to read.
    unsafe { std::ptr::copy_nonoverlapping(entries.header(k), head.as_mut_ptr(), HEADER) };
    let Some(h) = InHeader::decode(&head) else { return };
    let size = (u32::from_le_bytes([head[ENT_IN_OUT + 16], head[ENT_IN_OUT + 17], head[ENT_IN_OUT + 18], head[ENT_IN_OUT + 19]]) as usize).min(entries.payload);
    // The request's names and data are copied out, so that the reply may be written into the
    // same payload buffer while the operation still reads them.
    body.clear();
    // SAFETY: `size` bytes of the payload were written by the kernel with this request.
    body.extend_from_slice(unsafe { std::slice::from_raw_parts(entries.payload_ptr(k), size) });
    let fixed = &head[OP_IN..OP_IN + wire::fixed_size(h.opcode).min(HEADER - OP_IN - 32)];
    let reply = RingReply::new(Slot { entries: entries.clone(), k: k as u16, unique: h.unique });
    dispatch_guarded(fs, &h, fixed, body, reply);
}

/// Serves a request; a panic in an operation answers EIO (the reply's drop) instead of ending
/// the queue's thread with its other entries.
fn dispatch_guarded(fs: &OkeanosFuse, h: &InHeader, fixed: &[u8], body: &[u8], reply: impl Reply) {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| wire::dispatch(fs, h, fixed, body, reply)));
    if r.is_err() {
        eprintln!("okeanos: a request (opcode {}) panicked; it was answered EIO", h.opcode);
    }
}

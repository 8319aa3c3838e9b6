//! Spare request threads for /dev/fuse: a thread whose read waits for the device lends its
//! place to a spare, so that the mount keeps its readers serving while reads are in flight.
//!
//! The mount serves /dev/fuse with one request thread per core (mount.rs,
//! `default_request_threads`): more threads than cores cost the synced writes more than they
//! serve, since a request then mostly wakes a sleeping thread. But a read that misses the
//! engine's cache holds its thread for a device read (about 100 µs on a loop device), and with
//! two threads on two cores two such reads stopped the mount: four fio jobs of cold random
//! 4 KiB reads made 19-22 thousand reads a second through it, 0.29-0.35x ext4, and with four
//! threads 46-58 thousand (docs/BENCHMARKS.md, "Reads through the mount").
//!
//! So the pool has more threads than it lets read: `readers` of them (one a core) read
//! requests or serve ones that do not wait; the others are parked. A thread that starts waiting
//! for the device ([`DeviceWait::begin`], told by the engine's read) calls a parked spare if the
//! readers fell below `readers`; a thread that finishes a request ([`Spares::turn`]'s guard)
//! parks itself if there are more than `readers` and no wait began for [`LINGER`]. (Parking at
//! once cost two thread switches a read, a call and a park, and made no gain.) A workload that
//! never waits for the device (synced writes, cached reads) keeps the one-a-core shape and pays
//! one relaxed load a request. Measured: docs/BENCHMARKS.md, "Spare request threads".
//!
//! fuser joins its threads when the session ends and cannot tell a parked one. Each request
//! thread therefore takes a seat in the pool ([`Spares::seat`], a thread-local value): fuser's
//! threads leave only when the session ends (or fails), and the first to leave closes the pool,
//! which sends the parked ones back to read the end too. As a backstop (a session that ended
//! while every free thread had never served a request, so holds no seat) a parked thread also
//! goes back to reading after [`PARK`] even if not called; a spare that went back for nothing
//! serves one request and parks again.

use okeanos::DeviceWait;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The longest a spare stays parked without being called (the backstop above).
const PARK: Duration = Duration::from_secs(2);

/// How long after the last device wait began the pool keeps its extra threads: reads that miss
/// come in runs, and a spare parked and called again for every read costs two thread switches
/// a read (measured: no gain over no spares at all).
const LINGER: Duration = Duration::from_millis(20);

const NEVER: u64 = u64::MAX;

#[derive(Default)]
struct State {
    /// Threads not parked: reading /dev/fuse or serving a request.
    active: usize,
    /// Active threads waiting for the device.
    waiting: usize,
    parked: usize,
    /// Spares called and not yet awake (already counted active).
    calls: usize,
    /// The session ends: nobody parks any more.
    closing: bool,
}

impl State {
    /// Active threads not waiting for the device. Saturating: over io_uring the reads that
    /// wait come from the rings' own threads, which the pool does not count (it has no spares
    /// then, and only says how many reads waited at once).
    fn free(&self) -> usize {
        self.active.saturating_sub(self.waiting)
    }
}

pub struct Spares {
    /// Threads that should be free to read requests.
    readers: usize,
    /// Threads beyond `readers`.
    spares: usize,
    state: Mutex<State>,
    cv: Condvar,
    /// More active threads than the waits need: some thread should park (read without the lock
    /// at the end of every request).
    surplus: AtomicBool,
    /// Spares called (`fuse_spare_calls` in the counters file).
    called: AtomicU64,
    /// The most threads that waited for the device at once (`fuse_device_waits_most`).
    most_waiting: AtomicU64,
    /// When the last device wait began, in ns since `epoch` ([`NEVER`] before the first).
    last_wait: AtomicU64,
    epoch: Instant,
}

impl Spares {
    /// A pool of `readers + spares` threads, all of them reading at first.
    pub fn new(readers: usize, spares: usize) -> Self {
        let s = Spares {
            readers,
            spares,
            state: Mutex::new(State { active: readers + spares, ..Default::default() }),
            cv: Condvar::new(),
            surplus: AtomicBool::new(false),
            called: AtomicU64::new(0),
            most_waiting: AtomicU64::new(0),
            last_wait: AtomicU64::new(NEVER),
            epoch: Instant::now(),
        };
        s.note(&s.lock());
        s
    }

    /// The threads fuser must start.
    pub fn threads(&self) -> usize {
        self.readers + self.spares
    }

    pub fn readers(&self) -> usize {
        self.readers
    }

    pub fn spares(&self) -> usize {
        self.spares
    }

    pub fn called(&self) -> u64 {
        self.called.load(Ordering::Relaxed)
    }

    pub fn most_waiting(&self) -> u64 {
        self.most_waiting.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn since_wait(&self) -> Duration {
        match self.last_wait.load(Ordering::Relaxed) {
            NEVER => Duration::MAX,
            t => Duration::from_nanos(self.now().saturating_sub(t)),
        }
    }

    fn note(&self, st: &State) {
        self.surplus.store(!st.closing && st.free() > self.readers, Ordering::Relaxed);
    }

    /// Seats the calling thread: when it leaves, the pool closes (the module's comment).
    pub fn seat(self: &Arc<Self>) {
        let _ = SEAT.try_with(|s| {
            if s.0.borrow().is_none() {
                *s.0.borrow_mut() = Some(self.clone());
            }
        });
    }

    /// Held while a request thread serves one request: when dropped, the thread parks if the
    /// pool has more free threads than it wants.
    pub fn turn(&self) -> Turn<'_> {
        Turn(self)
    }

    fn after_request(&self) {
        if !self.surplus.load(Ordering::Relaxed) {
            return;
        }
        if self.since_wait() < LINGER {
            return;
        }
        let mut st = self.lock();
        if st.closing || st.free() <= self.readers {
            return;
        }
        st.active -= 1;
        st.parked += 1;
        self.note(&st);
        loop {
            let (g, timeout) = self.cv.wait_timeout(st, PARK).unwrap_or_else(|e| e.into_inner());
            st = g;
            if st.calls > 0 {
                st.calls -= 1;
                break;
            }
            if timeout.timed_out() || st.closing {
                st.parked -= 1;
                st.active += 1;
                break;
            }
        }
        self.note(&st);
    }

    /// The session ends: parked threads go back to read its end, and none parks again.
    pub fn close(&self) {
        let mut st = self.lock();
        st.closing = true;
        self.note(&st);
        drop(st);
        self.cv.notify_all();
    }
}

impl DeviceWait for Spares {
    fn begin(&self) {
        self.last_wait.store(self.now(), Ordering::Relaxed);
        let mut st = self.lock();
        st.waiting += 1;
        self.most_waiting.fetch_max(st.waiting as u64, Ordering::Relaxed);
        let call = st.free() < self.readers && st.parked > 0;
        if call {
            st.parked -= 1;
            st.active += 1;
            st.calls += 1;
            self.called.fetch_add(1, Ordering::Relaxed);
        }
        self.note(&st);
        drop(st);
        if call {
            self.cv.notify_one();
        }
    }

    fn end(&self) {
        let mut st = self.lock();
        st.waiting -= 1;
        self.note(&st);
    }
}

thread_local! {
    static SEAT: Seat = const { Seat(RefCell::new(None)) };
}

/// A request thread's place in a pool; closes it when the thread leaves.
struct Seat(RefCell<Option<Arc<Spares>>>);

impl Drop for Seat {
    fn drop(&mut self) {
        if let Some(pool) = self.0.borrow_mut().take() {
            pool.close();
        }
    }
}

/// See [`Spares::turn`].
pub struct Turn<'a>(&'a Spares);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.after_request();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn counts(s: &Spares) -> (usize, usize, usize) {
        let st = s.lock();
        (st.active, st.waiting, st.parked)
    }

    /// Waits (bounded) until the pool's counts are `want`.
    fn settle(s: &Spares, want: (usize, usize, usize)) {
        let t = Instant::now();
        while counts(s) != want {
            assert!(t.elapsed() < Duration::from_secs(5), "counts {:?}, want {want:?}", counts(s));
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Threads beyond the readers park after a request; a wait calls one back, so that the
    /// readers free to serve stay at `readers`; once the wait ends the extra one parks again.
    #[test]
    fn a_device_wait_calls_a_spare_and_the_spare_parks_after() {
        let s = Arc::new(Spares::new(2, 2));
        assert_eq!(s.threads(), 4);
        // Two of the four threads finish a request: they park, the other two stay.
        let parkers: Vec<_> = (0..2)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || drop(s.turn()))
            })
            .collect();
        settle(&s, (2, 0, 2));
        // A request thread (the third, still active) finishes one: it must not park.
        drop(s.turn());
        assert_eq!(counts(&s), (2, 0, 2));
        // It waits for the device: one spare is called.
        s.begin();
        assert_eq!(counts(&s), (3, 1, 1));
        assert_eq!(s.called(), 1);
        // The wait ends: one thread too many. Within LINGER of the wait nobody parks; after it,
        // the next to finish a request does.
        s.end();
        drop(s.turn());
        assert_eq!(counts(&s), (3, 0, 1));
        std::thread::sleep(LINGER);
        let extra = {
            let s = s.clone();
            std::thread::spawn(move || drop(s.turn()))
        };
        settle(&s, (2, 0, 2));
        s.close();
        settle(&s, (4, 0, 0));
        for t in parkers.into_iter().chain([extra]) {
            t.join().unwrap();
        }
    }

    /// With no spares, nothing parks and a wait calls nobody.
    #[test]
    fn without_spares_nothing_parks() {
        let s = Spares::new(2, 0);
        s.begin();
        s.begin();
        drop(s.turn());
        assert_eq!(counts(&s), (2, 2, 0));
        s.end();
        s.end();
        drop(s.turn());
        assert_eq!((counts(&s), s.called()), ((2, 0, 0), 0));
    }

    /// A seated thread that leaves (a fuser thread at the end of its session) closes the
    /// pool: a parked spare goes back at once, not after PARK, and nobody parks again.
    #[test]
    fn a_seated_thread_that_leaves_releases_the_parked() {
        let s = Arc::new(Spares::new(1, 1));
        let t = Instant::now();
        let parked = {
            let s = s.clone();
            std::thread::spawn(move || drop(s.turn()))
        };
        settle(&s, (1, 0, 1));
        let leaver = {
            let s = s.clone();
            std::thread::spawn(move || s.seat())
        };
        leaver.join().unwrap();
        parked.join().unwrap();
        assert!(t.elapsed() < PARK / 2, "the parked thread left after {:?}", t.elapsed());
        assert_eq!(counts(&s), (2, 0, 0));
        drop(s.turn());
        assert_eq!(counts(&s), (2, 0, 0), "nobody parks in a closed pool");
    }

    /// A spare not called goes back to reading after PARK (so that a session that ended is
    /// seen), and parks again after its next request.
    #[test]
    fn a_parked_spare_comes_back_after_its_park() {
        let s = Arc::new(Spares::new(1, 1));
        let t = Instant::now();
        let h = {
            let s = s.clone();
            std::thread::spawn(move || drop(s.turn()))
        };
        h.join().unwrap();
        assert!(t.elapsed() >= PARK, "left its park after {:?}", t.elapsed());
        assert_eq!(counts(&s), (2, 0, 0));
    }
}

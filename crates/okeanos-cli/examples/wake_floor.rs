//! The CPU floor of the group-commit pattern, with no journal at all (issue 33: "at most 8 µs
//! of the benchmark process's CPU per sync" at 100 streams).
//!
//! N writer threads each loop: take a shared lock for a moment (the state lock of a write),
//! ask for a sync and sleep until a committer says its group is durable. One committer thread
//! loops: wait for a sync to be asked for, wait `FLUSH_US` as a device flush would (sleeping,
//! so it costs no CPU), then release every sync asked for before it started, as a commit does.
//! What the process spends per sync is then the cost of blocking and waking threads (and of
//! the shared lock) alone: a floor under any design in which a sync's thread sleeps until its
//! commit is durable. Three ways to wake are measured: one condition variable for all (what a
//! commit's `notify_all` costs, each woken thread retaking the mutex), a park per thread, all
//! unparked by the committer (each woken thread reads an atomic and returns), and a chain: the
//! committer unparks one, and each woken sync unparks the next before it returns, so that the
//! committer does not pay for every wake-up and woken threads do not all run at once.
//!
//!   cargo run --release -p okeanos-cli --example wake_floor -- [THREADS] [SECONDS] [FLUSH_US]
//!
//! Prints, per way of waking: syncs per second, syncs per commit, and the process's CPU (user
//! and system, from getrusage) per sync. docs/BENCHMARKS.md, "The floor of a sleeping sync".

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

/// The process's CPU time so far (user + system), in seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes the struct it is given and nothing else.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// The state the writers share, as the engine's state lock: each "write" holds it briefly.
struct Shared {
    state: Mutex<u64>,
    /// Syncs asked for and not yet released (the committer waits for one).
    asked: Mutex<Vec<Thread>>,
    asked_cv: Condvar,
    /// The newest commit begun (changed under `asked`'s lock) and the newest released.
    started: AtomicU64,
    released: AtomicU64,
    /// Condition-variable way: the generation under a mutex, and its condition variable.
    gen: Mutex<u64>,
    gen_cv: Condvar,
    /// Chain way: released syncs not yet woken (each woken one wakes the next).
    chain: Mutex<Vec<Thread>>,
    stop: AtomicBool,
    syncs: AtomicU64,
    commits: AtomicU64,
}

#[derive(Clone, Copy, PartialEq)]
enum Wake {
    Condvar,
    Park,
    Chain,
}

fn writer(s: Arc<Shared>, how: Wake) {
    while !s.stop.load(Ordering::Relaxed) {
        // A write: the shared lock for about as long as an append's handle holds the state lock.
        {
            let mut st = s.state.lock().unwrap();
            *st = st.wrapping_add(1);
            std::hint::black_box(&*st);
        }
        // The sync: ask, then sleep until the next commit to begin is released.
        let want = {
            let mut a = s.asked.lock().unwrap();
            a.push(thread::current());
            s.asked_cv.notify_one();
            s.started.load(Ordering::Relaxed) + 1
        };
        match how {
            Wake::Condvar => {
                let mut g = s.gen.lock().unwrap();
                while *g < want && !s.stop.load(Ordering::Relaxed) {
                    g = s.gen_cv.wait(g).unwrap();
                }
            }
            Wake::Park | Wake::Chain => {
                while s.released.load(Ordering::Acquire) < want && !s.stop.load(Ordering::Relaxed) {
                    thread::park();
                }
                if how == Wake::Chain {
                    let next = s.chain.lock().unwrap().pop();
                    if let Some(t) = next {
                        t.unpark();
                    }
                }
            }
        }
        s.syncs.fetch_add(1, Ordering::Relaxed);
    }
}

fn committer(s: Arc<Shared>, how: Wake, flush: Duration) {
    loop {
        // A commit begins with the syncs asked for so far (generation g), flushes, and is
        // released.
        let (g, waiting) = {
            let mut a = s.asked.lock().unwrap();
            while a.is_empty() && !s.stop.load(Ordering::Relaxed) {
                a = s.asked_cv.wait_timeout(a, Duration::from_millis(10)).unwrap().0;
            }
            (s.started.fetch_add(1, Ordering::Relaxed) + 1, std::mem::take(&mut *a))
        };
        if s.stop.load(Ordering::Relaxed) {
            break;
        }
        thread::sleep(flush);
        s.released.store(g, Ordering::Release);
        s.commits.fetch_add(1, Ordering::Relaxed);
        match how {
            Wake::Condvar => {
                *s.gen.lock().unwrap() = g;
                s.gen_cv.notify_all();
            }
            Wake::Park => {
                for t in waiting {
                    t.unpark();
                }
            }
            Wake::Chain => {
                let first = {
                    let mut c = s.chain.lock().unwrap();
                    c.extend(waiting);
                    c.pop()
                };
                if let Some(t) = first {
                    t.unpark();
                }
            }
        }
    }
    // Let every writer out.
    *s.gen.lock().unwrap() = u64::MAX;
    s.gen_cv.notify_all();
    s.released.store(u64::MAX / 2, Ordering::Release);
}

fn run(threads: usize, secs: f64, flush: Duration, how: Wake) -> (f64, f64, f64) {
    let s = Arc::new(Shared {
        state: Mutex::new(0),
        asked: Mutex::new(Vec::new()),
        asked_cv: Condvar::new(),
        started: AtomicU64::new(0),
        released: AtomicU64::new(0),
        gen: Mutex::new(0),
        gen_cv: Condvar::new(),
        chain: Mutex::new(Vec::new()),
        stop: AtomicBool::new(false),
        syncs: AtomicU64::new(0),
        commits: AtomicU64::new(0),
    });
    let c = {
        let s = s.clone();
        thread::spawn(move || committer(s, how, flush))
    };
    let ws: Vec<_> = (0..threads)
        .map(|_| {
            let s = s.clone();
            thread::spawn(move || writer(s, how))
        })
        .collect();
    // Measure a window after the start.
    thread::sleep(Duration::from_millis(300));
    let (t0, c0, n0, k0) = (Instant::now(), cpu_seconds(), s.syncs.load(Ordering::Relaxed), s.commits.load(Ordering::Relaxed));
    thread::sleep(Duration::from_secs_f64(secs));
    let (dt, dc, dn, dk) = (t0.elapsed().as_secs_f64(), cpu_seconds() - c0, s.syncs.load(Ordering::Relaxed) - n0, s.commits.load(Ordering::Relaxed) - k0);
    s.stop.store(true, Ordering::Relaxed);
    s.asked_cv.notify_all();
    c.join().unwrap();
    for w in &ws {
        w.thread().unpark();
    }
    s.gen_cv.notify_all();
    for w in ws {
        w.join().unwrap();
    }
    let n = dn.max(1) as f64;
    (n / dt, n / dk.max(1) as f64, dc / n * 1e6)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut num = |d: f64| args.next().and_then(|a| a.parse::<f64>().ok()).unwrap_or(d);
    let threads = num(100.0).clamp(1.0, 10_000.0) as usize;
    let secs = num(5.0).clamp(0.1, 600.0);
    let flush = Duration::from_micros(num(400.0).clamp(0.0, 1e6) as u64);
    println!("wake floor: {threads} writer threads, {secs} s, a commit's flush {flush:?} (sleeping)");
    for (name, how) in [("one condition variable", Wake::Condvar), ("a park per thread", Wake::Park), ("a chain of parks", Wake::Chain)] {
        let (rate, per_commit, cpu_us) = run(threads, secs, flush, how);
        println!("{name:24} {rate:9.0} syncs/s  {per_commit:6.1} syncs a commit  {cpu_us:6.1} µs of CPU a sync");
    }
}

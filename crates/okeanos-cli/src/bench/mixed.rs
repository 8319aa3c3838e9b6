//! The mixed benchmark (the manylogs paper's microbenchmark, section V-A.1): a large
//! sequential reader or writer runs alone, then beside N rate-limited small writers that
//! write at random offsets of their own files and sync after each write. Reports the share
//! of its bandwidth the large stream keeps and the small writers' sync latency.

use super::target::{self, Target};
use super::TargetArgs;
use super::{check_interrupted, interrupted, progress, Common, MixedArgs};
use crate::report::{self, LatencyUs, Run};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Mixed {
    pub read: bool,
    pub request: usize,
    pub file_size: u64,
}

impl MixedArgs {
    pub fn parse(&self) -> Result<Mixed, String> {
        let read = match self.large.as_str() {
            "read" => true,
            "write" => false,
            x => return Err(format!("--large {x}: use read or write")),
        };
        let request = crate::parse_size(&self.large_request)? as usize;
        let file_size = crate::parse_size(&self.file_size)?;
        if !(4096..=64 << 20).contains(&request) || file_size < 4096 {
            return Err("--large-request must be 4K..64M and --file-size at least 4K".into());
        }
        Ok(Mixed { read, request, file_size })
    }
}

pub fn run(c: &Common, t: &TargetArgs, m: &MixedArgs) -> Result<Vec<Run>, String> {
    let g = c.grid()?;
    let mx = m.parse()?;
    let targets = t.targets()?;
    let setup = t.setup()?;
    let mut plan = Vec::new();
    for tg in &targets {
        let modes: Vec<Option<okeanos::journal::content::ContentConfig>> = if tg.takes_modes() { g.modes.iter().copied().map(Some).collect() } else { vec![None] };
        for (size, rate, n) in g.cells(true) {
            for md in &modes {
                plan.push((tg.clone(), *md, n, size, rate));
            }
        }
    }
    let pb = progress(plan.len() as u64, c.quiet);
    let mut runs = Vec::new();
    for (i, (tg, md, n, size, rate)) in plan.into_iter().enumerate() {
        check_interrupted()?;
        pb.set_message(format!("mixed {} {} N={n} R={size} {rate}", tg.name(), md.map_or(String::new(), |x| x.name())));
        let r = one(&tg, md, n, size, rate, &g, &mx, &setup).unwrap_or_else(|e| Run { workload: "mixed".into(), mode: md.map_or_else(|| tg.mode_name(), |x| x.name()), target: tg.name(), streams: n, size, rate: rate.to_string(), error: Some(e), ..Default::default() });
        pb.set_position((i as u64 + 1) * 1000);
        runs.push(r);
    }
    pb.finish_and_clear();
    Ok(runs)
}

/// Runs the large stream until `stop`, sequentially through a file of `file_bytes` (wrapping
/// around); returns bytes moved.
fn large(mut s: Box<dyn target::Stream>, read: bool, request: usize, file_bytes: u64, stop: Arc<AtomicBool>) -> Result<u64, String> {
    let buf = vec![0x5au8; request];
    let mut off = 0u64;
    let mut moved = 0u64;
    while !stop.load(Ordering::Relaxed) {
        // Both directions cycle through one file of `file_bytes`, so a fast disk cannot fill
        // the file system.
        if off + request as u64 > file_bytes {
            off = 0;
        }
        if read {
            s.read_at(off, request)?;
        } else {
            s.write_at(off, &buf)?;
        }
        off += request as u64;
        moved += request as u64;
    }
    if !read {
        s.sync(false)?;
    }
    Ok(moved)
}

#[allow(clippy::too_many_arguments)]
fn one(tg: &Target, md: Option<okeanos::journal::content::ContentConfig>, n: usize, size: usize, rate: okeanos::workload::Rate, g: &super::Grid, mx: &Mixed, setup: &target::Setup) -> Result<Run, String> {
    let env = target::prepare(tg, md, setup)?;
    let mut r = Run { workload: "mixed".into(), mode: env.mode(), target: env.target(), streams: n, size, rate: rate.to_string(), sync: g.sync.name().into(), sync_every: 1, ..Default::default() };
    // The small writers' files, allocated up front; the large reader's file written up front.
    let chunk = vec![0u8; 1 << 20];
    let mut small = Vec::new();
    for i in 0..n {
        let mut s = env.open(&format!("small-{i:05}"))?;
        let mut off = 0;
        while off < mx.file_size {
            let len = (mx.file_size - off).min(chunk.len() as u64) as usize;
            s.write_at(off, &chunk[..len])?;
            off += len as u64;
        }
        s.sync(true)?;
        small.push(s);
    }
    // The large stream cycles through 256 MiB, or a quarter of a smaller file system (with the
    // small writers' files and the journal beside it, a file as large as the file system
    // would hit ENOSPC as soon as the writer got far enough, sooner on a faster machine).
    let large_bytes = (256u64 << 20).min(setup.fs_bytes / 4 / mx.request as u64 * mx.request as u64).max(mx.request as u64);
    if mx.read {
        let mut s = env.open("large")?;
        let mut off = 0;
        while off < large_bytes {
            s.write_at(off, &chunk)?;
            off += chunk.len() as u64;
        }
        s.sync(true)?;
    }
    // Phase 1: the large stream alone.
    let alone = {
        let stop = Arc::new(AtomicBool::new(false));
        let s = env.open("large")?;
        let st = stop.clone();
        let (read, req) = (mx.read, mx.request);
        let t = std::thread::spawn(move || large(s, read, req, large_bytes, st));
        let t0 = Instant::now();
        sleep_checked(g.duration);
        stop.store(true, Ordering::Relaxed);
        let b = t.join().map_err(|_| "large stream panicked")??;
        b as f64 / t0.elapsed().as_secs_f64()
    };
    // Phase 2: together.
    (r.new_blocks, r.fs_seeks) = env.choices();
    let base = env.measure()?;
    let stop = Arc::new(AtomicBool::new(false));
    let s = env.open("large")?;
    let st = stop.clone();
    let (read, req) = (mx.read, mx.request);
    let lt = std::thread::spawn(move || large(s, read, req, large_bytes, st));
    let ops = Arc::new(AtomicU64::new(0));
    let interval = rate.interval(size);
    let full = g.sync == okeanos::workload::SyncKind::Fsync;
    let file_size = mx.file_size;
    let cpu0 = report::cpu_seconds();
    let t0 = Instant::now();
    let writers: Vec<_> = small
        .into_iter()
        .enumerate()
        .map(|(i, mut s)| {
            let (stop, ops) = (stop.clone(), ops.clone());
            std::thread::spawn(move || -> Result<hdrhistogram::Histogram<u64>, String> {
                let rec = vec![b'a' + (i % 26) as u8; size];
                let mut h = report::histogram();
                let mut x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let slots = (file_size / size as u64).max(1);
                let mut next = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    s.write_at((x % slots) * size as u64, &rec)?;
                    let st = Instant::now();
                    s.sync(full)?;
                    h.saturating_record(st.elapsed().as_nanos().max(1) as u64);
                    ops.fetch_add(1, Ordering::Relaxed);
                    if let Some(iv) = interval {
                        next += iv;
                        let now = Instant::now();
                        if next > now {
                            std::thread::sleep(next - now);
                        } else {
                            next = now;
                        }
                    }
                }
                Ok(h)
            })
        })
        .collect();
    sleep_checked(g.duration);
    stop.store(true, Ordering::Relaxed);
    let wall = t0.elapsed().as_secs_f64();
    let moved = lt.join().map_err(|_| "large stream panicked")??;
    let mut lat = report::histogram();
    for w in writers {
        lat.add(&w.join().map_err(|_| "small writer panicked")??).map_err(|e| e.to_string())?;
    }
    let during = env.measure()?.since(&base);
    let after = env.finish()?.since(&base);
    let with = moved as f64 / wall;
    let n_ops = ops.load(Ordering::Relaxed);
    r.duration_s = wall;
    r.ops = n_ops;
    r.ops_per_s = n_ops as f64 / wall;
    r.cpu_s = report::cpu_seconds() - cpu0;
    r.syncs = lat.len();
    r.sync_latency_us = LatencyUs::from_histogram(&lat);
    r.payload_bytes = n_ops * size as u64;
    r.journal_bytes = after.bytes.journal_bytes;
    r.final_bytes = after.bytes.final_bytes;
    r.during = during.bytes.clone();
    r.journal_mb_s = during.bytes.journal_bytes.map(|b| b as f64 / wall / 1e6);
    r.final_mb_s = during.bytes.final_bytes.map(|b| b as f64 / wall / 1e6);
    r.commits = during.commits;
    r.device = after.device.clone();
    r.extra = serde_json::json!({
        "large": if mx.read { "read" } else { "write" },
        "large_request": mx.request,
        "large_alone_mb_s": alone / 1e6,
        "large_mixed_mb_s": with / 1e6,
        "large_share": if alone > 0.0 { with / alone } else { 0.0 },
    });
    Ok(r)
}

fn sleep_checked(d: Duration) {
    let t0 = Instant::now();
    while t0.elapsed() < d && !interrupted().load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50).min(d));
    }
}

/// The mixed table.
pub fn print(runs: &[Run]) {
    println!("{:<18} {:<16} {:>5} {:>6} {:>7} {:>6} {:>11} {:>11} {:>7} {:>10} {:>10}", "mode", "target", "N", "R", "rate", "large", "alone MB/s", "mixed MB/s", "share", "sync p50us", "sync p99us");
    for r in runs {
        let x = &r.extra;
        let f = |k: &str| x[k].as_f64().unwrap_or(0.0);
        println!(
            "{:<18} {:<16} {:>5} {:>6} {:>7} {:>6} {:>11.1} {:>11.1} {:>7.2} {:>10.0} {:>10.0}{}",
            r.mode,
            r.target,
            r.streams,
            r.size,
            r.rate,
            x["large"].as_str().unwrap_or("-"),
            f("large_alone_mb_s"),
            f("large_mixed_mb_s"),
            f("large_share"),
            r.sync_latency_us.p50,
            r.sync_latency_us.p99,
            r.error.as_ref().map_or(String::new(), |e| format!("  ERROR: {e}"))
        );
    }
}

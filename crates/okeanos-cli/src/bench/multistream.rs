//! The multistream benchmark on real targets: one thread per stream (the kernel and a FUSE
//! mount see ordinary system calls from as many threads as streams), each appending requests
//! at its rate or in a closed loop and syncing after every k writes, for the duration.

use super::target::{self, Env, Measure, Target};
use super::TargetArgs;
use super::{check_interrupted, interrupted, progress, Common};
use crate::report::{self, LatencyUs, Run};
use okeanos::workload::{Multistream, Rate, SyncKind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

pub fn run(c: &Common, t: &TargetArgs) -> Result<Vec<Run>, String> {
    let g = c.grid()?;
    let targets = t.targets()?;
    let setup = t.setup()?;
    let mut plan = Vec::new();
    for tg in &targets {
        let modes: Vec<Option<okeanos::journal::content::ContentConfig>> = if tg.takes_modes() { g.modes.iter().copied().map(Some).collect() } else { vec![None] };
        for (size, rate, n) in g.cells(true) {
            for m in &modes {
                plan.push((tg.clone(), *m, g.spec(size, rate, n)));
            }
        }
    }
    let pb = progress(plan.len() as u64, c.quiet);
    let mut runs = Vec::new();
    for (i, (tg, mode, spec)) in plan.iter().enumerate() {
        check_interrupted()?;
        pb.set_message(format!("{} {} N={} R={} {}", tg.name(), mode.map_or(String::new(), |m| m.name()), spec.streams, spec.size, spec.rate));
        // Every run starts with the host's dirty pages written: loop devices' backing files
        // live in the host's page cache, and a flush on a loop device waits for whatever the
        // host still owes from the run before (it put 120-340 ms tails on light-load runs that
        // followed closed-loop ones, whichever file system came next).
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
        let r = one(tg, *mode, spec, &setup, &pb, i as u64);
        let r = r.unwrap_or_else(|e| Run { workload: "multistream".into(), mode: mode.map_or_else(|| tg.mode_name(), |m| m.name()), target: tg.name(), streams: spec.streams, size: spec.size, rate: spec.rate.to_string(), error: Some(e), ..Default::default() });
        if let Some(e) = &r.error {
            pb.println(format!("{} {}: {e}", r.target, r.mode));
        }
        runs.push(r);
    }
    pb.finish_and_clear();
    Ok(runs)
}

/// What the stream threads measured.
pub struct Clients {
    pub ops: u64,
    pub payload: u64,
    pub latency: hdrhistogram::Histogram<u64>,
    pub wall_s: f64,
    pub cpu_s: f64,
    pub error: Option<String>,
}

/// Runs `spec` on streams opened in `env`, showing progress on `pb` (run index `idx`).
pub fn drive(env: &dyn Env, spec: &Multistream, pb: &indicatif::ProgressBar, idx: u64) -> Result<Clients, String> {
    let streams: Vec<Box<dyn target::Stream>> = (0..spec.streams).map(|i| env.open(&format!("stream-{i:05}"))).collect::<Result<_, _>>()?;
    let barrier = Arc::new(Barrier::new(spec.streams + 1));
    let ops = Arc::new(AtomicU64::new(0));
    let interval = spec.rate.interval(spec.size);
    let full = spec.sync == SyncKind::Fsync;
    let stop = interrupted();
    let (duration, size, every) = (spec.duration, spec.size, spec.sync_every);
    let threads: Vec<_> = streams
        .into_iter()
        .enumerate()
        .map(|(i, mut s)| {
            let (barrier, ops, stop) = (barrier.clone(), ops.clone(), stop.clone());
            std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || -> Result<hdrhistogram::Histogram<u64>, String> {
                    let rec = vec![b'a' + (i % 26) as u8; size];
                    let mut h = report::histogram();
                    barrier.wait();
                    let t0 = Instant::now();
                    // Streams start at evenly spread phases within one period.
                    let mut next = t0 + interval.map_or(Duration::ZERO, |iv| iv.mul_f64((i as f64 * 0.618_034).fract()));
                    let mut since = 0;
                    loop {
                        let now = Instant::now();
                        if now < next {
                            std::thread::sleep(next - now);
                        }
                        let start = Instant::now();
                        if start - t0 >= duration || stop.load(Ordering::Relaxed) {
                            break;
                        }
                        s.append(&rec)?;
                        since += 1;
                        if since >= every {
                            since = 0;
                            let st = Instant::now();
                            s.sync(full)?;
                            h.saturating_record(st.elapsed().as_nanos().max(1) as u64);
                        }
                        ops.fetch_add(1, Ordering::Relaxed);
                        next = match interval {
                            Some(iv) => (next + iv).max(start),
                            None => start,
                        };
                    }
                    Ok(h)
                })
                .map_err(|e| format!("spawning stream thread {i}: {e}"))
        })
        .collect::<Result<_, _>>()?;
    let cpu0 = report::cpu_seconds();
    barrier.wait();
    let t0 = Instant::now();
    while t0.elapsed() < spec.duration && !stop.load(Ordering::Relaxed) {
        let f = (t0.elapsed().as_secs_f64() / spec.duration.as_secs_f64()).min(1.0);
        pb.set_position(idx * 1000 + (f * 1000.0) as u64);
        std::thread::sleep(Duration::from_millis(100).min(spec.duration));
    }
    let mut latency = report::histogram();
    let mut error = None;
    for t in threads {
        match t.join() {
            Ok(Ok(h)) => latency.add(&h).map_err(|e| e.to_string())?,
            Ok(Err(e)) => {
                error.get_or_insert(e);
            }
            Err(_) => {
                error.get_or_insert("a stream thread panicked".into());
            }
        }
    }
    let wall_s = t0.elapsed().as_secs_f64();
    let n = ops.load(Ordering::Relaxed);
    Ok(Clients { ops: n, payload: n * spec.size as u64, latency, wall_s, cpu_s: report::cpu_seconds() - cpu0, error })
}

/// Fills a run from the clients and the measures before, at the end of and after the run.
pub fn fill(r: &mut Run, cl: &Clients, during: &Measure, after: &Measure) {
    r.duration_s = cl.wall_s;
    r.ops = cl.ops;
    r.ops_per_s = cl.ops as f64 / cl.wall_s.max(1e-9);
    r.cpu_s = cl.cpu_s;
    r.syncs = cl.latency.len();
    r.sync_latency_us = LatencyUs::from_histogram(&cl.latency);
    r.payload_bytes = cl.payload;
    r.journal_bytes = after.bytes.journal_bytes;
    r.final_bytes = after.bytes.final_bytes;
    r.per_kind = after.bytes.per_kind.clone();
    r.during = during.bytes.clone();
    r.during.payload_bytes = cl.payload;
    r.journal_mb_s = during.bytes.journal_bytes.map(|b| b as f64 / cl.wall_s / 1e6);
    r.final_mb_s = during.bytes.final_bytes.map(|b| b as f64 / cl.wall_s / 1e6);
    r.commits = during.commits;
    r.syncs_per_commit = during.commits.filter(|&c| c > 0).map(|c| r.syncs as f64 / c as f64);
    r.device = after.device.clone();
    r.commit_lane = during.counters.as_ref().map(|c| c.commit_lane).filter(|l| l.steps > 0);
    r.commit_sizes = during.counters.as_ref().map(|c| c.commit_sizes).filter(|c| !c.is_empty());
    r.admission = during.counters.as_ref().map(|c| c.admission);
    r.checkpoints = during.counters.as_ref().map(|c| c.checkpoints);
    r.checkpoint = during.counters.as_ref().map(|c| c.checkpoint);
    r.error = cl.error.clone();
}

fn one(tg: &Target, mode: Option<okeanos::journal::content::ContentConfig>, spec: &Multistream, setup: &target::Setup, pb: &indicatif::ProgressBar, idx: u64) -> Result<Run, String> {
    spec.check()?;
    let env = target::prepare(tg, mode, setup)?;
    let mut r = Run {
        workload: "multistream".into(),
        mode: env.mode(),
        target: env.target(),
        streams: spec.streams,
        size: spec.size,
        rate: spec.rate.to_string(),
        sync: spec.sync.name().into(),
        sync_every: spec.sync_every,
        ..Default::default()
    };
    (r.new_blocks, r.fs_seeks) = env.choices();
    let base = env.measure()?;
    let cl = drive(env.as_ref(), spec, pb, idx)?;
    let during = env.measure()?.since(&base);
    let after = env.finish()?.since(&base);
    fill(&mut r, &cl, &during, &after);
    if matches!(spec.rate, Rate::Closed) && r.ops == 0 && r.error.is_none() {
        r.error = Some("no write completed within the duration".into());
    }
    Ok(r)
}

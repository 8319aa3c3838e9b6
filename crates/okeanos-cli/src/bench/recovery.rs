//! The recovery benchmark (thesis section 6.4, Figure 6.6): N streams write K records each
//! with a sync after every one, so everything is committed; age-based writeback is pushed out
//! of reach so nothing is checkpointed; then the mount is dropped as in a crash and mounted
//! again. The engine times the three passes of recovery (scan, revoke, replay).

use super::target::{self, Target};
use super::TargetArgs;
use super::{check_interrupted, progress, Common};
use crate::report::{self, Run};
use okeanos::workload::{Multistream, Rate};
use okeanos::{MountOptions, Okeanos};
use std::time::{Duration, Instant};

pub fn run(c: &Common, t: &TargetArgs, records: usize) -> Result<Vec<Run>, String> {
    let g = c.grid()?;
    if records == 0 {
        return Err("--records must be at least 1".into());
    }
    let targets = t.targets()?;
    if let Some(bad) = targets.iter().find(|x| !x.takes_modes()) {
        return Err(format!("bench recovery crashes the engine on purpose; target {} cannot be crashed (use engine, engine:external or engine:loop)", bad.name()));
    }
    let mut setup = t.setup()?;
    let hold = "writeback_period=86400,expire=86400,commit=86400";
    setup.mount_options = if setup.mount_options.is_empty() { hold.into() } else { format!("{},{hold}", setup.mount_options) };
    let cells = g.cells(false);
    let pb = progress((targets.len() * g.modes.len() * cells.len()) as u64, c.quiet);
    let mut runs = Vec::new();
    for tg in &targets {
        for &(size, _, n) in &cells {
            for &m in &g.modes {
                check_interrupted()?;
                pb.set_message(format!("recovery {} {} N={n} K={records} R={size}", tg.name(), m.name()));
                let r = one(tg, m, n, size, records, &setup).unwrap_or_else(|e| Run { workload: "recovery".into(), mode: m.name(), target: tg.name(), streams: n, size, error: Some(e), ..Default::default() });
                pb.inc(1000);
                runs.push(r);
            }
        }
    }
    pb.finish_and_clear();
    Ok(runs)
}

fn one(tg: &Target, m: okeanos::journal::content::ContentConfig, n: usize, size: usize, records: usize, setup: &target::Setup) -> Result<Run, String> {
    let env = target::prepare(tg, Some(m), setup)?;
    let mut r = Run { workload: "recovery".into(), mode: env.mode(), target: env.target(), streams: n, size, rate: "closed".into(), sync: "fdatasync".into(), sync_every: 1, ..Default::default() };
    // Each stream writes exactly `records` records: a closed loop bounded by count.
    let spec = Multistream { streams: n, size, rate: Rate::Closed, sync: okeanos::workload::SyncKind::Fdatasync, sync_every: 1, duration: Duration::from_secs(3600) };
    (r.new_blocks, r.fs_seeks) = env.choices();
    let base = env.measure()?;
    let cl = write_records(env.as_ref(), &spec, records)?;
    let during = env.measure()?.since(&base);
    let checkpoints = during.counters.as_ref().map_or(0, |c| c.checkpoints);
    let crashed = env.crash()?;
    drop_caches(&crashed);
    let mut o = if crashed.extra_options.is_empty() { MountOptions::default() } else { MountOptions::parse(&crashed.extra_options)? };
    o = o.policy_of(crashed.cfg);
    o.journal_path = crashed.journal.clone();
    o.direct_io = crashed.direct;
    let t0 = Instant::now();
    let fs = Okeanos::open(&crashed.image, o).map_err(|e| format!("recovery mount: {e}"))?;
    let mount_s = t0.elapsed().as_secs_f64();
    let rep = fs.counters().recovery.ok_or("the mount found nothing to recover")?;
    fs.unmount().map_err(|e| format!("unmount after recovery: {e}"))?;
    drop(crashed);
    r.ops = cl.0;
    r.payload_bytes = cl.0 * size as u64;
    r.duration_s = cl.1;
    r.ops_per_s = cl.0 as f64 / cl.1.max(1e-9);
    r.journal_bytes = during.bytes.journal_bytes;
    r.final_bytes = during.bytes.final_bytes;
    r.during = during.bytes.clone();
    r.commits = during.commits;
    r.syncs = cl.0;
    r.extra = report::recovery_extra(&rep, records, checkpoints);
    r.extra["mount_ms"] = (mount_s * 1e3).into();
    r.error = report::checkpoints_error(checkpoints);
    Ok(r)
}

/// N threads, each writing `records` records with a sync after each. (ops, seconds)
fn write_records(env: &dyn target::Env, spec: &Multistream, records: usize) -> Result<(u64, f64), String> {
    let streams: Vec<Box<dyn target::Stream>> = (0..spec.streams).map(|i| env.open(&format!("stream-{i:05}"))).collect::<Result<_, _>>()?;
    let t0 = Instant::now();
    let size = spec.size;
    let threads: Vec<_> = streams
        .into_iter()
        .enumerate()
        .map(|(i, mut s)| {
            std::thread::spawn(move || -> Result<(), String> {
                let rec = vec![b'a' + (i % 26) as u8; size];
                for _ in 0..records {
                    s.append(&rec)?;
                    s.sync(false)?;
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().map_err(|_| "a writer panicked".to_string())??;
    }
    Ok(((spec.streams * records) as u64, t0.elapsed().as_secs_f64()))
}

/// Evicts the crashed image from the page cache (so recovery reads the device, not memory).
fn drop_caches(c: &target::Crashed) {
    for p in std::iter::once(&c.image).chain(c.journal.iter()) {
        if let Ok(f) = std::fs::File::open(p) {
            use std::os::fd::AsRawFd;
            let _ = f.sync_all();
            // SAFETY: a valid descriptor; advice only.
            unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
    }
}

/// The recovery table.
pub fn print(runs: &[Run]) {
    println!("{:<18} {:<16} {:>5} {:>6} {:>8} {:>9} {:>7} {:>8} {:>9} {:>9} {:>9} {:>10}", "mode", "target", "N", "R", "records", "scanned", "probed", "txns", "scan ms", "revoke ms", "replay ms", "total ms");
    for r in runs {
        let x = &r.extra;
        let f = |k: &str| x[k].as_f64().unwrap_or(0.0);
        println!(
            "{:<18} {:<16} {:>5} {:>6} {:>8} {:>9} {:>7} {:>8} {:>9.2} {:>9.2} {:>9.2} {:>10.2}{}",
            r.mode,
            r.target,
            r.streams,
            r.size,
            r.ops,
            f("blocks_scanned"),
            f("blocks_probed"),
            f("transactions"),
            f("scan_ms"),
            f("revoke_ms"),
            f("replay_ms"),
            f("recovery_ms"),
            r.error.as_ref().map_or(String::new(), |e| format!("  ERROR: {e}"))
        );
    }
}

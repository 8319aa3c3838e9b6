//! The experiments' runs: multistream, mixed, postmark, iozone and recovery, each cell of its
//! grid a world of its own, in parallel, and the tables the last three print.

use super::*;

pub(super) fn multistream(c: &Common, m: &ModelArgs) -> Result<Vec<Run>, String> {
    let g = c.grid()?;
    m.world_for(g.modes[0], g.rates[0], g.streams[0])?; // check the flags once, before any run
    let mut plan = Vec::new();
    for (size, rate, n) in g.cells(true) {
        for &mode in &g.modes {
            plan.push((mode, g.spec(size, rate, n)));
        }
    }
    Ok(parallel(&plan, m.jobs(), c.quiet, |(mode, spec)| {
        let mut r = m.run_of("multistream", *mode, spec.streams, spec.size, spec.rate, spec.sync.name(), spec.sync_every);
        let t0 = Instant::now();
        let res = m.world_for(*mode, spec.rate, spec.streams).and_then(|cfg| World::new(cfg, &m.mkfs()).map_err(|e| e.to_string())).and_then(|w| okeanos_sim::multistream::run(w, spec, m.seed));
        r.wall_s = t0.elapsed().as_secs_f64();
        match res {
            Ok(o) => {
                r.simulated(o.virtual_s, &o.during, &o.after, o.writes);
                r.cpu_s = r.wall_s;
                r.extra = serde_json::json!({ "write_waits": o.write_waits });
                r.error = o.error;
            }
            Err(e) => r.error = Some(e),
        }
        r
    }))
}

pub(super) fn mixed_runs(c: &Common, m: &ModelArgs, x: &MixedArgs) -> Result<Vec<Run>, String> {
    let g = c.grid()?;
    let mx = x.parse()?;
    m.world(g.modes[0])?;
    let mut plan = Vec::new();
    for (size, rate, n) in g.cells(true) {
        for &mode in &g.modes {
            plan.push((mode, Multistream { sync_every: 1, ..g.spec(size, rate, n) }));
        }
    }
    Ok(parallel(&plan, m.jobs(), c.quiet, |(mode, spec)| {
        let mut r = m.run_of("mixed", *mode, spec.streams, spec.size, spec.rate, spec.sync.name(), 1);
        let t0 = Instant::now();
        let large = okeanos_sim::mixed::Large { read: mx.read, request: mx.request as u64 };
        let make = || m.world(*mode).expect("checked");
        match okeanos_sim::mixed::run(&make, &m.mkfs(), spec, &large, mx.file_size, m.seed) {
            Ok(o) => {
                r.simulated(o.virtual_s, &o.during, &o.after, o.writes);
                r.extra = serde_json::json!({
                    "large": if mx.read { "read" } else { "write" },
                    "large_request": mx.request,
                    "large_alone_mb_s": o.alone_bps / 1e6,
                    "large_mixed_mb_s": o.mixed_bps / 1e6,
                    "large_share": if o.alone_bps > 0.0 { o.mixed_bps / o.alone_bps } else { 0.0 },
                });
                r.error = o.error;
            }
            Err(e) => r.error = Some(e),
        }
        r.wall_s = t0.elapsed().as_secs_f64();
        r.cpu_s = r.wall_s;
        r
    }))
}

#[allow(clippy::too_many_arguments)]
pub(super) fn postmark(c: &Common, m: &ModelArgs, files: usize, transactions: usize, min_file: usize, max_file: usize, sync: bool, varmail: bool) -> Result<Vec<Run>, String> {
    let g = c.grid()?;
    m.world(g.modes[0])?;
    if min_file == 0 || min_file > max_file || max_file > 64 << 20 {
        return Err("--min-file must be positive and at most --max-file (at most 64M)".into());
    }
    let plan: Vec<(ContentConfig, usize, usize)> = g.cells(false).into_iter().flat_map(|(size, _, n)| g.modes.iter().map(move |&mode| (mode, n, size))).collect();
    Ok(parallel(&plan, m.jobs(), c.quiet, |&(mode, n, size)| {
        let mut r = m.run_of(if varmail { "varmail" } else { "postmark" }, mode, n, size, okeanos::workload::Rate::Closed, if sync { "fdatasync" } else { "none" }, 1);
        let t0 = Instant::now();
        let spec = okeanos_sim::postmark::Spec { files, transactions, clients: n, request: size, min_file, max_file, sync, varmail };
        let res = m.world(mode).and_then(|cfg| World::new(cfg, &m.mkfs()).map_err(|e| e.to_string())).and_then(|w| okeanos_sim::postmark::run(w, &spec, m.seed));
        match res {
            Ok(o) => {
                r.simulated(o.virtual_s, &o.during, &o.after, o.writes);
                // No virtual time passed when nothing waited for a device (the dropped journal's data
                // mode): a rate is undefined, not 5e12.
                let tps = (o.virtual_s > 0.0).then(|| o.transactions as f64 / o.virtual_s);
                r.extra = serde_json::json!({ "transactions": o.transactions, "tps": tps, "files": files });
                r.error = o.error;
            }
            Err(e) => r.error = Some(e),
        }
        r.wall_s = t0.elapsed().as_secs_f64();
        r.cpu_s = r.wall_s;
        r
    }))
}

pub(super) fn iozone(c: &Common, m: &ModelArgs, sizes: &str, patterns: &str) -> Result<Vec<Run>, String> {
    let g = c.grid()?;
    m.world(g.modes[0])?;
    let sizes: Vec<u64> = sizes.split(',').map(|x| crate::parse_size(x.trim())).collect::<Result<_, _>>()?;
    let patterns: Vec<bool> = patterns
        .split(',')
        .map(|p| match p.trim() {
            "seq" | "sequential" => Ok(false),
            "random" => Ok(true),
            x => Err(format!("--pattern {x}: use seq or random")),
        })
        .collect::<Result<_, _>>()?;
    let request: usize = c.size.split(',').next().unwrap_or("4096").trim().parse().map_err(|_| "--size: one request size in bytes".to_string())?;
    let mut plan = Vec::new();
    for &mode in &g.modes {
        for &bytes in &sizes {
            for &random in &patterns {
                plan.push((mode, bytes, random));
            }
        }
    }
    Ok(parallel(&plan, m.jobs(), c.quiet, |&(mode, bytes, random)| {
        let mut r = m.run_of("iozone", mode, 1, request, okeanos::workload::Rate::Closed, "fsync", c.sync_every);
        let t0 = Instant::now();
        let spec = okeanos_sim::iozone::Spec { file_bytes: bytes, request, random, sync_every: if c.sync_every == 1 { 0 } else { c.sync_every } };
        let res = m.world(mode).and_then(|cfg| World::new(cfg, &m.mkfs()).map_err(|e| e.to_string())).and_then(|w| okeanos_sim::iozone::run(w, &spec, m.seed));
        match res {
            Ok(o) => {
                r.simulated(o.virtual_s, &o.during, &o.after, o.writes);
                r.extra = serde_json::json!({ "file_bytes": bytes, "pattern": if random { "random" } else { "seq" }, "mb_s": (o.virtual_s > 0.0).then(|| bytes as f64 / 1e6 / o.virtual_s) });
                r.error = o.error;
            }
            Err(e) => r.error = Some(e),
        }
        r.wall_s = t0.elapsed().as_secs_f64();
        r.cpu_s = r.wall_s;
        r
    }))
}

pub(super) fn print_iozone(runs: &[Run]) {
    println!("{:<18} {:<26} {:>9} {:>7} {:>9} {:>10} {:>10} {:>10}", "mode", "target", "file", "pattern", "MB/s", "jrnl B/B", "final B/B", "virtual s");
    for r in runs {
        println!(
            "{:<18} {:<26} {:>9} {:>7} {:>9} {:>10} {:>10} {:>10.2}{}",
            r.mode,
            r.target,
            crate::mount::human(r.extra["file_bytes"].as_f64().unwrap_or(0.0)),
            r.extra["pattern"].as_str().unwrap_or("?"),
            r.extra["mb_s"].as_f64().map_or("n/a".into(), |x| format!("{x:.1}")),
            r.journal_amp().map_or("-".into(), |x| format!("{x:.2}")),
            r.final_amp().map_or("-".into(), |x| format!("{x:.2}")),
            r.duration_s,
            r.error.as_ref().map_or(String::new(), |e| format!("  ERROR: {e}"))
        );
    }
}

pub(super) fn print_postmark(runs: &[Run]) {
    println!("{:<18} {:<26} {:>7} {:>7} {:>12} {:>9} {:>10} {:>10} {:>10}", "mode", "target", "clients", "R", "transactions", "tps", "jrnl B/B", "final B/B", "sync p50us");
    for r in runs {
        println!(
            "{:<18} {:<26} {:>7} {:>7} {:>12} {:>9} {:>10} {:>10} {:>10.0}{}",
            r.mode,
            r.target,
            r.streams,
            r.size,
            r.extra["transactions"].as_u64().unwrap_or(0),
            r.extra["tps"].as_f64().map_or("n/a".into(), |t| format!("{t:.1}")),
            r.journal_amp().map_or("-".into(), |x| format!("{x:.2}")),
            r.final_amp().map_or("-".into(), |x| format!("{x:.2}")),
            r.sync_latency_us.p50,
            r.error.as_ref().map_or(String::new(), |e| format!("  ERROR: {e}"))
        );
    }
}

pub(super) fn recovery(c: &Common, m: &ModelArgs, records: usize) -> Result<Vec<Run>, String> {
    let g = c.grid()?;
    let mkfs = m.mkfs();
    m.world(g.modes[0])?;
    let plan: Vec<(ContentConfig, usize, usize)> = g.cells(false).into_iter().flat_map(|(size, _, n)| g.modes.iter().map(move |&mode| (mode, n, size))).collect();
    Ok(parallel(&plan, m.jobs(), c.quiet, |&(mode, n, size)| {
        let mut r = m.run_of("recovery", mode, n, size, okeanos::workload::Rate::Closed, "fsync", 1);
        let t0 = Instant::now();
        let make = || m.world(mode).expect("checked");
        match okeanos_sim::recovery::run(&make, &mkfs, n, size, records) {
            Ok(o) => {
                let rep = &o.report;
                r.ops = o.writes;
                r.payload_bytes = o.writes * size as u64;
                r.duration_s = o.write_s;
                r.journal_bytes = Some(o.before.journal_bytes);
                r.final_bytes = Some(o.before.final_bytes);
                r.commits = Some(o.before.commits);
                r.extra = crate::report::recovery_extra(rep, records, o.before.checkpoints);
                r.extra["map_snapshots"] = o.before.snapshots.into();
                r.extra["end_reason"] = rep.end_reason.clone().into();
                // Snapshots of a manylogs map are checkpoints by design: what they leave is the
                // point of the run.
                r.error = if o.before.snapshots > 0 { None } else { crate::report::checkpoints_error(o.before.checkpoints) };
            }
            Err(e) => r.error = Some(e),
        }
        r.wall_s = t0.elapsed().as_secs_f64();
        r
    }))
}

//! `okeanos sim trace`: block traces replayed under no logging, MLB and the shingled-disk
//! models (the manylogs paper's §V-B, §V-C, Fig. 6 and 7a); docs/SIMULATION.md, "Block traces".

use okeanos_sim::trace::replay::{self, SchemeRun};
use okeanos_sim::trace::{self as tr, synth};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct TraceArgs {
    /// Synthetic workloads, comma-separated: w1..w5 (the paper's five-tenant mixes, Table Ib)
    /// or t1..t10 (its traces, Table Ia, each in its busiest-write window). Stand-ins: see
    /// docs/SIMULATION.md.
    #[arg(long, conflicts_with = "trace")]
    workload: Option<String>,
    /// A trace file to replay instead.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Its format: msr (SNIA/MSR Cambridge CSV) or blkparse (blkparse's text output).
    #[arg(long, default_value = "msr")]
    format: String,
    /// Schemes, comma-separated: nologging, mlb-32, mlb-256, slsmr, mlsmr.
    #[arg(long, default_value = "nologging,mlb-32,mlb-256,slsmr,mlsmr")]
    schemes: String,
    /// Length of a synthetic workload (default 5m for w*, 1h for t*), such as 300s.
    #[arg(long)]
    duration: Option<String>,
    /// After the replay, copy every logged block home under MLB and time it (Fig. 7a).
    #[arg(long)]
    checkpoint: bool,
    #[arg(long, default_value = "1")]
    seed: u64,
    /// Write the runs as JSON (`runs[].scheme`, `runs[].latency_us.mean`, ...).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write latency CDFs and speed-ups by percentile into this directory.
    #[arg(long)]
    plot: Option<PathBuf>,
}

fn ms(us: f64) -> String {
    format!("{:.2}", us / 1000.0)
}

pub fn run(a: TraceArgs) -> Result<ExitCode, String> {
    let schemes: Vec<String> = a.schemes.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
    if let Some(bad) = schemes.iter().find(|s| !replay::SCHEMES.contains(&s.as_str())) {
        return Err(format!("--schemes: unknown scheme {bad:?}: {}", replay::SCHEMES.join(", ")));
    }
    let size = replay::replay_bytes();
    let mut traces: Vec<(String, String, Vec<tr::TraceIo>)> = Vec::new();
    match (&a.workload, &a.trace) {
        (_, Some(path)) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let format: tr::Format = a.format.parse()?;
            let mut t = tr::parse(&text, format).map_err(|e| format!("{}: {e}", path.display()))?;
            // A trace from a larger disk wraps onto this one, block-aligned.
            for io in &mut t {
                io.offset = (io.offset % (size - io.len.min(size))) / 4096 * 4096;
                io.len = io.len.min(size);
            }
            let name = path.file_stem().map_or("trace".into(), |s| s.to_string_lossy().into_owned());
            traces.push((name.clone(), format!("{} ({} I/Os)", path.display(), t.len()), t));
        }
        (Some(w), None) => {
            for name in w.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                let secs = match &a.duration {
                    Some(d) => okeanos::workload::parse_duration(d)?.as_secs().max(1),
                    None if name.starts_with('t') => 3600,
                    None => 300,
                };
                let t = synth::generate(name, secs, size, a.seed)?;
                traces.push((name.to_string(), synth::describe(name), t));
            }
        }
        (None, None) => return Err("give --workload w1..w5,t1..t10 or --trace FILE".into()),
    }
    let mut all: Vec<SchemeRun> = Vec::new();
    let mut speed = Vec::new();
    let mut plots = Vec::new();
    for (name, what, t) in &traces {
        let writes = t.iter().filter(|io| io.write).count();
        let small = t.iter().filter(|io| io.write && io.len <= 32 << 10).count();
        println!("{what}");
        println!(
            "  {} I/Os in {:.0} s ({:.1}/s), {:.0}% writes, {:.0}% of writes at most 32 KiB",
            t.len(),
            t.last().map_or(0.0, |io| io.at_ns as f64 / 1e9),
            t.len() as f64 / (t.last().map_or(1, |io| io.at_ns.max(1)) as f64 / 1e9),
            100.0 * writes as f64 / t.len().max(1) as f64,
            100.0 * small as f64 / writes.max(1) as f64
        );
        println!("  {:<10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>6} {:>8} {:>10}", "scheme", "mean ms", "p50", "p90", "p99", "p99.9", "swaps", "clean", "mapped", "table KB");
        let mut runs = Vec::new();
        for s in &schemes {
            let r = replay::replay(t, name, s, a.checkpoint)?;
            println!(
                "  {:<10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>6} {:>8} {:>10.1}{}",
                r.scheme,
                ms(r.latency_us.mean),
                ms(r.latency_us.p50),
                ms(r.latency_us.p90),
                ms(r.latency_us.p99),
                ms(r.latency_us.p999),
                if r.idle_swaps > 0 { format!("{}+{}i", r.log_swaps - r.idle_swaps, r.idle_swaps) } else { r.log_swaps.to_string() },
                r.checkpoints + r.band_cleanings,
                r.mapped_blocks,
                r.table_bytes as f64 / 1024.0,
                r.checkpoint_s.map_or(String::new(), |c| format!("  checkpoint {c:.1} s"))
            );
            runs.push(r);
        }
        let find = |s: &str| runs.iter().find(|r| r.scheme == s);
        for (base, x) in [("nologging", "mlb-256"), ("nologging", "mlb-32"), ("slsmr", "mlsmr")] {
            if let (Some(b), Some(r)) = (find(base), find(x)) {
                let (by, mean) = replay::speedups(b, r);
                let at = |p: u32| by[p as usize - 1].1;
                println!("  {x} over {base}: {mean:.2}x averaged over percentiles 1-99 (p50 {:.2}x, p90 {:.2}x, p99 {:.2}x); mean latency {:.2}x", at(50), at(90), at(99), b.latency_us.mean / r.latency_us.mean.max(1e-9));
                speed.push(serde_json::json!({ "workload": name, "scheme": x, "over": base, "mean_speedup": mean, "by_percentile": by }));
            }
        }
        if let Some(dir) = &a.plot {
            let cdf: Vec<(String, Vec<(f64, f64)>)> = runs.iter().map(|r| (r.scheme.clone(), (0..=200).map(|k| (r.percentile(k as f64 / 2.0) as f64 / 1e6, k as f64 / 200.0)).collect())).collect();
            plots.extend(crate::plot::plot_lines(dir, &format!("trace-{name}-cdf"), &format!("I/O latency CDF, {name}"), ("latency (ms, log scale)", "fraction of I/Os"), true, &cdf)?);
            let sp: Vec<(String, Vec<(f64, f64)>)> = [("nologging", "mlb-256"), ("nologging", "mlb-32"), ("slsmr", "mlsmr")]
                .iter()
                .filter_map(|(b, x)| Some((format!("{x} over {b}"), replay::speedups(find(b)?, find(x)?).0.into_iter().map(|(p, s)| (p as f64, s)).collect())))
                .collect();
            plots.extend(crate::plot::plot_lines(dir, &format!("trace-{name}-speedup"), &format!("latency speed-up by percentile, {name}"), ("percentile", "speed-up (x)"), false, &sp)?);
        }
        all.extend(runs);
    }
    if let Some(p) = &a.json {
        let doc = serde_json::json!({ "disk": replay::disk().name, "export_bytes": size, "seed": a.seed, "runs": all, "speedups": speed });
        std::fs::write(p, serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if !plots.is_empty() {
        eprintln!("wrote {} plot files", plots.len());
    }
    Ok(ExitCode::SUCCESS)
}

//! `okeanos sim`: the deterministic simulator (crates/okeanos/src/sim). The same workloads and
//! the same report format as `okeanos bench`, in virtual time on modelled disks; and crash
//! fuzzing across every policy.

mod crash_fuzz;
mod experiments;
mod storage;
mod trace;

use crash_fuzz::crash_fuzz;
use experiments::*;
pub use storage::ModelArgs;

use crate::bench::{exit_for, progress, Common, MixedArgs};
use crate::report::Run;
use clap::{Args, Subcommand};
use okeanos::journal::content::ContentConfig;
use okeanos::models as model;
use okeanos_sim::world::{World, WorldConfig};
use okeanos::workload::Multistream;
use okeanos::{MkfsOptions, MountOptions};
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Instant;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SimArgs {
    #[command(subcommand)]
    cmd: Option<SimCmd>,
    /// Crash fuzzing: random workloads under every policy, crashes at random points,
    /// recovery, fsck and the policy's guarantee after each.
    #[arg(long)]
    crash_fuzz: bool,
    /// First seed (run k uses seed + k).
    #[arg(long, default_value = "1")]
    seed: u64,
    /// Number of fuzz runs (each crashes at several points).
    #[arg(long, default_value = "200")]
    runs: u64,
    /// Crash points per run.
    #[arg(long, default_value = "8")]
    points: usize,
    /// Policies to fuzz (default: all seven).
    #[arg(long)]
    modes: Option<String>,
    /// The canary, which must make the fuzzer find violations: the placement's own ordering
    /// broken (a disk journal skips the commit's flush, nvm the fence before the commit word,
    /// remote the append on the server).
    #[arg(long)]
    canary: bool,
    /// Where the fuzzed journal is: drawn (each seed draws internal, external or manylogs),
    /// internal, external, manylogs, nvm or remote.
    #[arg(long = "journal", default_value = "drawn")]
    fuzz_journal: String,
}

#[derive(Subcommand)]
enum SimCmd {
    /// Block traces (MSR Cambridge CSV, blkparse, or the paper's workloads as synthetic
    /// stand-ins) replayed open-loop on the paper's 1 TB disk under no logging, MLB-32,
    /// MLB-256 and the shingled-disk models SLSMR and MLSMR: latency by scheme, speed-ups by
    /// percentile, log swaps, the map's size, and with --checkpoint the off-hours checkpoint.
    Trace(trace::TraceArgs),
    /// N streams appending at a rate or in a closed loop with a sync after every k writes.
    Multistream {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        model: ModelArgs,
    },
    /// A large sequential reader or writer on the file-system disk beside small synced writers.
    Mixed {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        mixed: MixedArgs,
    },
    /// N streams write K records each, everything committed, nothing checkpointed, a crash;
    /// recovery time by pass.
    Recovery {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        model: ModelArgs,
        #[arg(long, default_value = "100")]
        records: usize,
    },
    /// An IOzone-like write test (UBJ's Figure 11): one file written through in --size
    /// requests, sequentially or at random offsets, fsync every --sync-every requests (0: at
    /// the end only); throughput is the file size over the time to the last fsync.
    Iozone {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        model: ModelArgs,
        /// File sizes, comma-separated (one run per value), such as 100M,200M,300M.
        #[arg(long, default_value = "100M")]
        file_size: String,
        /// seq, random, or both (comma-separated).
        #[arg(long, default_value = "seq,random")]
        pattern: String,
    },
    /// A Postmark-like mix: a pool of files, then transactions (create or delete, read or
    /// append) by concurrent clients, an fdatasync after every write request. `--size` is the
    /// request size; `--streams` the number of clients.
    Postmark {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        model: ModelArgs,
        /// Files in the initial pool.
        #[arg(long, default_value = "500")]
        files: usize,
        #[arg(long, default_value = "10000")]
        transactions: usize,
        /// Smallest and largest file.
        #[arg(long, default_value = "512")]
        min_file: String,
        #[arg(long, default_value = "100K")]
        max_file: String,
        /// No fdatasync after each write (the original Postmark, UBJ's Figure 12): one sync of
        /// everything ends the run, and its time counts.
        #[arg(long)]
        buffered: bool,
        /// postmark, or varmail (Filebench's mail-server flow: delete; create, write, fsync;
        /// read, append, fsync; read — UBJ's Figures 2 and 8).
        #[arg(long, default_value = "postmark")]
        flow: String,
    },
    /// The manylogs paper's Fig. 2 inside the file system: a large sequential reader (or
    /// --writer) of one big file beside small writers that overwrite 4 KiB of 20 scattered
    /// files and sync each, on the paper's Cheetah 15K.5 146 GB with its write cache off;
    /// ordered, data and selective keep one journal in the middle of the disk, manylogs a log in
    /// every 100 MB group. Prints the large stream's share of its bandwidth alone, the sync
    /// latency and where manylogs' commits landed.
    Nearhead {
        /// ordered, data, selective, manylogs (comma-separated).
        #[arg(long, default_value = "ordered,selective,manylogs")]
        schemes: String,
        /// Small writes per second in all (comma-separated; one run per value and scheme).
        #[arg(long, default_value = "40,80,160,320")]
        rates: String,
        /// Virtual time alone, then beside the writers, such as 20s.
        #[arg(long, default_value = "20s")]
        duration: String,
        /// The large stream writes instead of reading (Fig. 2b), each --request synced.
        #[arg(long)]
        writer: bool,
        /// The disk model, and how much of it the file system takes (default: all).
        #[arg(long, default_value = "cheetah15k5-146")]
        model: String,
        #[arg(long)]
        disk_size: Option<String>,
        /// The big file, and the large stream's application request (it goes to the disk in
        /// --device-request pieces, one after another).
        #[arg(long, default_value = "2G")]
        large_size: String,
        #[arg(long, default_value = "128M")]
        request: String,
        #[arg(long, default_value = "512K")]
        device_request: String,
        /// Small writers (one scattered file each), and the logged-write-size threshold.
        #[arg(long, default_value = "20")]
        writers: usize,
        #[arg(long, default_value = "32K")]
        logged_write_size: String,
        #[arg(long, default_value = "1")]
        seed: u64,
        /// Fig. 5: the writers are databases' commit logs, each appending --append-rate and
        /// flushing every period given here (comma-separated, such as 33ms,1ms; one run per
        /// period and scheme, instead of --rates).
        #[arg(long)]
        commit_log: Option<String>,
        /// Bytes a commit log appends per second.
        #[arg(long, default_value = "1M")]
        append_rate: String,
        /// The commit logs are O_DUR (always logged, never written home for age).
        #[arg(long)]
        durable: bool,
        /// Fig. 4: the writers are varmail-like mail servers (a directory of 100 mails each;
        /// delete, create-append-fsync, read-append-fsync, read), each doing this many
        /// operations per second (the paper: 20); one run per scheme, instead of --rates.
        #[arg(long)]
        varmail: Option<u64>,
        /// Fig. 4 (top): the writers are fileserver-like instances (a directory of 50 files of
        /// 128 KiB each; create-and-write-whole, append 16 KiB, read-whole, delete, stat; no
        /// syncs), each doing this many operations per second (the paper: 20); the latency
        /// reported is the writes' and appends'.
        #[arg(long, conflicts_with = "varmail")]
        fileserver: Option<u64>,
        /// Manylogs: no log swapping (`log_swap=off`): commits go farther from the head when
        /// the logs near it fill.
        #[arg(long)]
        no_log_swap: bool,
        /// Also write the results as JSON to this file.
        #[arg(long)]
        json: Option<std::path::PathBuf>,
    },
    /// The manylogs paper's opening calibration: a sequential reader on the disk model alone,
    /// beside random 4 KiB I/Os at each rate (the paper: 24 and 56 IOPS cost it 25% and 53%).
    Calibrate {
        /// Random I/Os per second (comma-separated).
        #[arg(long, default_value = "24,56")]
        iops: String,
        /// The random I/Os are writes (default: reads).
        #[arg(long)]
        writes: bool,
        /// The reader's request (the kernel's largest, 512K by default).
        #[arg(long, default_value = "512K")]
        request: String,
        #[arg(long, default_value = "cheetah15k5-146")]
        model: String,
        #[arg(long, default_value = "60s")]
        duration: String,
        #[arg(long, default_value = "1")]
        seed: u64,
    },
    /// The manylogs paper's Fig. 7: small synced writes to 20 scattered files on a manylogs
    /// disk (Cheetah 15K.5, write cache off) with checkpoint=lazy, then one forced checkpoint,
    /// timed (log reads and home writes), with the overwrites it skipped and the device writes
    /// it merged; and the same writes with checkpoint=periodic for comparison.
    LazyCheckpoint {
        /// Small writes per second in all, and for how long (virtual time).
        #[arg(long, default_value = "200")]
        rate: u64,
        #[arg(long, default_value = "60s")]
        duration: String,
        /// Writers (a scattered file each) and their files' size.
        #[arg(long, default_value = "20")]
        writers: usize,
        #[arg(long, default_value = "64M")]
        file_size: String,
        /// Chance that a write continues its writer's last one, and else that it goes to the
        /// first --hot-blocks blocks of its file (an overwrite).
        #[arg(long, default_value = "0.5")]
        sequential: f64,
        #[arg(long, default_value = "0.5")]
        hot: f64,
        #[arg(long, default_value = "256")]
        hot_blocks: u64,
        /// The buffer cache in blocks (logged blocks beyond it are parked, read back from logs).
        #[arg(long, default_value = "8192")]
        cache_blocks: usize,
        /// No log swapping in the lazy run (`log_swap=off`).
        #[arg(long)]
        no_log_swap: bool,
        #[arg(long, default_value = "cheetah15k5-146")]
        model: String,
        #[arg(long)]
        disk_size: Option<String>,
        #[arg(long, default_value = "1")]
        seed: u64,
        /// Also write the results as JSON to this file.
        #[arg(long)]
        json: Option<std::path::PathBuf>,
    },
    /// The device models and their parameters.
    Models,
}

pub fn run(a: SimArgs) -> Result<ExitCode, String> {
    let command = crate::report::command_line();
    if a.crash_fuzz {
        return crash_fuzz(&a);
    }
    match a.cmd {
        None => Err("okeanos sim: give a workload (multistream, mixed, recovery, models) or --crash-fuzz".into()),
        Some(SimCmd::Trace(a)) => trace::run(a),
        Some(SimCmd::Models) => {
            for name in model::PRESETS {
                println!("{}", model::preset(name)?.describe());
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(SimCmd::Nearhead { schemes, rates, duration, writer, model, disk_size, large_size, request, device_request, writers, logged_write_size, seed, commit_log, append_rate, durable, varmail, fileserver, no_log_swap, json }) => {
            use okeanos_sim::nearhead::{self, Scheme, Spec};
            let schemes: Vec<Scheme> = schemes.split(',').map(|s| Scheme::parse(s.trim())).collect::<Result<_, _>>()?;
            let rates: Vec<u64> = rates.split(',').map(|r| r.trim().parse::<u64>().map_err(|_| format!("--rates: {r:?} is not a number"))).collect::<Result<_, _>>()?;
            // Fig. 5: one run per flush period (carried in the rate column as flushes/s).
            let periods: Option<Vec<std::time::Duration>> = commit_log.as_deref().map(|p| p.split(',').map(|x| okeanos::workload::parse_duration(x.trim())).collect::<Result<_, _>>()).transpose()?;
            if periods.as_ref().is_some_and(|p| p.iter().any(|d| d.is_zero())) {
                return Err("--commit-log: a flush period must be positive".into());
            }
            let append_rate = crate::parse_size(&append_rate)?;
            let mut specs = Vec::new();
            for &scheme in &schemes {
                let runs: Vec<(u64, Option<std::time::Duration>)> = match (&periods, varmail.or(fileserver)) {
                    (Some(p), _) => p.iter().map(|d| ((1e9 / d.as_nanos() as f64).round() as u64, Some(*d))).collect(),
                    (None, Some(ops)) => vec![(ops, None)],
                    (None, None) => rates.iter().map(|&r| (r, None)).collect(),
                };
                for (rate, period) in runs {
                    let mut s = Spec::paper(scheme, rate);
                    s.commit_log = period.map(|flush_period| nearhead::CommitLog { flush_period, append_bytes_per_sec: append_rate, durable });
                    s.varmail = varmail.map(|ops_per_sec| nearhead::Varmail { ops_per_sec, mails: 100, append_bytes: 16 << 10 });
                    s.fileserver = fileserver.map(|ops_per_sec| nearhead::Fileserver { ops_per_sec, files: 50, whole_bytes: 128 << 10, append_bytes: 16 << 10 });
                    s.log_swap = !no_log_swap;
                    s.duration = okeanos::workload::parse_duration(&duration)?;
                    s.read = !writer;
                    s.disk = model.clone();
                    s.disk_bytes = disk_size.as_deref().map(crate::parse_size).transpose()?;
                    s.large_bytes = crate::parse_size(&large_size)?;
                    s.app_request = crate::parse_size(&request)?;
                    s.device_request = crate::parse_size(&device_request)?;
                    s.writers = writers;
                    s.logged_write_size = crate::parse_size(&logged_write_size)? as usize;
                    s.seed = seed;
                    specs.push(s);
                }
            }
            let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
            let results = parallel(&specs, jobs, false, nearhead::run);
            println!("{:<10} {:>5} {:>10} {:>10} {:>6} {:>7} {:>9} {:>9} {:>9} {:>11} {:>5} {:>5}", "scheme", "iops", "alone MB/s", "with MB/s", "share", "syncs", "mean ms", "p50 ms", "p99 ms", "near head", "ckpts", "swaps");
            let mut ok = Vec::new();
            let mut failed = false;
            for (s, r) in specs.iter().zip(results) {
                match r {
                    Ok(o) => {
                        let near = o.near_head.map_or("-".to_string(), |n| format!("{:.1}%", 100.0 * n.near as f64 / n.commits.max(1) as f64));
                        println!(
                            "{:<10} {:>5} {:>10.1} {:>10.1} {:>5.0}% {:>7} {:>9.1} {:>9.1} {:>9.1} {:>11} {:>5} {:>5}",
                            o.scheme, o.rate, o.alone_bps / 1e6, o.shared_bps / 1e6, 100.0 * o.shared_bps / o.alone_bps.max(1.0), o.syncs,
                            o.sync_mean_ns as f64 / 1e6, o.sync_p50_ns as f64 / 1e6, o.sync_p99_ns as f64 / 1e6, near, o.checkpoints,
                            o.near_head.map_or("-".to_string(), |n| n.swaps.to_string())
                        );
                        ok.push(o);
                    }
                    Err(e) => {
                        println!("{:<10} {:>5} ERROR {e}", s.scheme.name(), s.rate);
                        failed = true;
                    }
                }
            }
            if let Some(p) = json {
                let v = serde_json::json!({ "command": command, "runs": ok });
                std::fs::write(&p, serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?).map_err(|e| format!("{}: {e}", p.display()))?;
            }
            Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
        }
        Some(SimCmd::Calibrate { iops, writes, request, model, duration, seed }) => {
            let request = crate::parse_size(&request)?;
            let duration = okeanos::workload::parse_duration(&duration)?;
            println!("{:<16} {:>5} {:>6} {:>10} {:>10} {:>6} {:>10}", "model", "iops", "op", "alone MB/s", "with MB/s", "loss", "random ms");
            for r in iops.split(',') {
                let r: u64 = r.trim().parse().map_err(|_| format!("--iops: {r:?} is not a number"))?;
                let o = okeanos_sim::calibrate::run(&model, r, writes, request, duration, seed)?;
                println!(
                    "{:<16} {:>5} {:>6} {:>10.1} {:>10.1} {:>5.0}% {:>10.2}",
                    o.model, o.iops, if o.write { "write" } else { "read" }, o.alone_bps / 1e6, o.shared_bps / 1e6, 100.0 * (1.0 - o.shared_bps / o.alone_bps.max(1.0)), o.random_mean_ns as f64 / 1e6
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(SimCmd::LazyCheckpoint { rate, duration, writers, file_size, sequential, hot, hot_blocks, cache_blocks, no_log_swap, model, disk_size, seed, json }) => {
            use okeanos_sim::lazyckpt::{self, Spec};
            if !(0.0..=1.0).contains(&sequential) || !(0.0..=1.0).contains(&hot) {
                return Err("--sequential and --hot are chances between 0 and 1".into());
            }
            let mut specs = Vec::new();
            for lazy in [true, false] {
                let mut s = Spec::new(lazy);
                s.rate = rate;
                s.duration = okeanos::workload::parse_duration(&duration)?;
                s.writers = writers;
                s.file_bytes = crate::parse_size(&file_size)?;
                s.sequential = sequential;
                s.hot = hot;
                s.hot_blocks = hot_blocks;
                s.cache_blocks = cache_blocks;
                s.log_swap = !no_log_swap;
                s.disk = model.clone();
                s.disk_bytes = disk_size.as_deref().map(crate::parse_size).transpose()?;
                s.seed = seed;
                specs.push(s);
            }
            let results = parallel(&specs, 2, false, lazyckpt::run);
            println!("{:<9} {:>7} {:>8} {:>9} {:>9} {:>9} {:>8} {:>8} {:>10} {:>9} {:>9} {:>8} {:>6}", "ckpt", "writes", "logged", "home run", "home end", "skipped", "merged", "copied", "end ckpt s", "reads s", "writes s", "sync ms", "swaps");
            let mut ok = Vec::new();
            let mut failed = false;
            for (s, r) in specs.iter().zip(results) {
                match r {
                    Ok(o) => {
                        let merged = if o.home_final == 0 { 0.0 } else { 100.0 * (o.home_final - o.final_writes) as f64 / o.home_final as f64 };
                        let skipped = 100.0 * o.skipped as f64 / o.logged_blocks.max(1) as f64;
                        println!(
                            "{:<9} {:>7} {:>8} {:>9} {:>9} {:>8.0}% {:>7.0}% {:>8} {:>10.2} {:>9.2} {:>9.2} {:>8.1} {:>6}",
                            o.checkpoint, o.writes, o.logged_blocks, o.home_during, o.home_final, skipped, merged, o.final_copied,
                            o.final_ns as f64 / 1e9, o.final_read_ns as f64 / 1e9, (o.final_ns - o.final_read_ns.min(o.final_ns)) as f64 / 1e9, o.sync_mean_ns as f64 / 1e6, o.swaps
                        );
                        ok.push(o);
                    }
                    Err(e) => {
                        println!("{:<9} ERROR {e}", if s.lazy { "lazy" } else { "periodic" });
                        failed = true;
                    }
                }
            }
            if let Some(p) = json {
                let v = serde_json::json!({ "command": command, "runs": ok });
                std::fs::write(&p, serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?).map_err(|e| format!("{}: {e}", p.display()))?;
            }
            Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
        }
        Some(SimCmd::Multistream { common, model }) => {
            let runs = multistream(&common, &model)?;
            common.output(&command, "sim-multistream", &runs)?;
            exit_for(&runs)
        }
        Some(SimCmd::Mixed { common, model, mixed }) => {
            let runs = mixed_runs(&common, &model, &mixed)?;
            crate::bench::print_mixed(&runs);
            common.output(&command, "sim-mixed", &runs)?;
            exit_for(&runs)
        }
        Some(SimCmd::Iozone { common, model, file_size, pattern }) => {
            let runs = iozone(&common, &model, &file_size, &pattern)?;
            print_iozone(&runs);
            common.output(&command, "sim-iozone", &runs)?;
            exit_for(&runs)
        }
        Some(SimCmd::Postmark { common, model, files, transactions, min_file, max_file, buffered, flow }) => {
            let varmail = match flow.as_str() {
                "postmark" => false,
                "varmail" => true,
                x => return Err(format!("--flow {x}: use postmark or varmail")),
            };
            let min_file = crate::parse_size(&min_file)? as usize;
            let max_file = crate::parse_size(&max_file)? as usize;
            let runs = postmark(&common, &model, files, transactions, min_file, max_file, !buffered, varmail)?;
            print_postmark(&runs);
            common.output(&command, "sim-postmark", &runs)?;
            exit_for(&runs)
        }
        Some(SimCmd::Recovery { common, model, records }) => {
            let runs = recovery(&common, &model, records)?;
            crate::bench::print_recovery(&runs);
            common.output(&command, "sim-recovery", &runs)?;
            exit_for(&runs)
        }
    }
}

/// Runs `jobs` closures over `items` in parallel, keeping their order.
fn parallel<T: Sync, R: Send>(items: &[T], jobs: usize, quiet: bool, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let pb = progress(items.len() as u64, quiet);
    let next = Mutex::new(0usize);
    let out: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..jobs.min(items.len()).max(1) {
            s.spawn(|| loop {
                let i = {
                    let mut n = next.lock().unwrap_or_else(|e| e.into_inner());
                    let i = *n;
                    *n += 1;
                    i
                };
                if i >= items.len() {
                    return;
                }
                let r = f(&items[i]);
                out.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                pb.inc(1000);
            });
        }
    });
    pb.finish_and_clear();
    out.into_inner().unwrap_or_else(|e| e.into_inner()).into_iter().map(|r| r.expect("every item ran")).collect()
}

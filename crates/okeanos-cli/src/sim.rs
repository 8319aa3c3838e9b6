//! `okeanos sim`: the deterministic simulator (crates/okeanos/src/sim). The same workloads and
//! the same report format as `okeanos bench`, in virtual time on modelled disks; and crash
//! fuzzing across every policy.

use crate::bench::{exit_for, progress, Common, MixedArgs};
use crate::report::Run;
use clap::{Args, Subcommand};
use okeanos::journal::content::ContentConfig;
use okeanos::models as model;
use okeanos::sim::world::{World, WorldConfig};
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
    /// The canary: skip the commit flush, which must make the fuzzer find violations.
    #[arg(long)]
    canary: bool,
}

/// Flags of the simulated storage.
#[derive(Args, Clone, Debug)]
pub struct ModelArgs {
    /// Device model of the file-system disk: cheetah15k, sata7200, ssd, nvm, net-lan, net-wan.
    #[arg(long, default_value = "cheetah15k")]
    pub model: String,
    /// Model of the journal disk (default: the same as --model).
    #[arg(long)]
    pub journal_model: Option<String>,
    /// Journal placement: external (its own disk, as in the papers), internal, remote (a
    /// journal server over --net with its own --server-model disk; the internal journal is its
    /// fallback), replicated (a JetStream-like log of --replicas servers, each with a
    /// --server-model disk, acknowledged by a majority), nvm (UBJ: commits frozen in a
    /// --nvm-size region of non-volatile memory on the nvm model, checkpoints to --model), or
    /// dropped (the remote placement sending nothing: the thesis' no-journal upper bound, for
    /// comparison only), or manylogs (a log in every 100 MB group, the commits near the disk
    /// head; with --mount-options snapshot_period=<s> its map is snapshot, checkpoint=lazy
    /// keeps data logged).
    #[arg(long, default_value = "external")]
    pub journal: String,
    /// The NVM of an nvm journal (--journal nvm), such as 256M.
    #[arg(long, default_value = "256M")]
    pub nvm_size: String,
    /// The link to the journal server of a remote journal: net-lan or net-wan.
    #[arg(long, default_value = "net-lan")]
    pub net: String,
    /// The journal server's disk model (remote journal), each replica's (replicated).
    #[arg(long, default_value = "cheetah15k")]
    pub server_model: String,
    /// Replicas of a replicated journal (odd, at least 3).
    #[arg(long, default_value = "3")]
    pub replicas: usize,
    /// The replicated log's leader dies at this virtual time (such as 2s)...
    #[arg(long)]
    pub leader_loss_at: Option<String>,
    /// ...and appends wait this long for a new one (an election).
    #[arg(long, default_value = "5s")]
    pub election: String,
    /// Seed of the workload's random choices (stream phases).
    #[arg(long, default_value = "1")]
    pub seed: u64,
    #[arg(long, default_value = "16G")]
    pub fs_size: String,
    #[arg(long, default_value = "128M")]
    pub journal_size: String,
    /// Engine mount options (writeback_period=10,expire=150,...).
    #[arg(long, default_value = "")]
    pub mount_options: String,
    /// Simulations to run in parallel (each is single-threaded and deterministic).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Age-based writeback tuning: `default` (the mount options), or `thesis`: the writeback
    /// and expiration periods the thesis chose per rate and stream count (its Tables 6.2-6.4).
    #[arg(long, default_value = "default")]
    pub flush_tuning: String,
}

/// The thesis' flushing policy (writeback period, expiration period, in seconds) for a
/// stream rate and count: Tables 6.2 (1 Kbit/s), 6.3 (10 Kbit/s) and 6.4 (1 Mbit/s); the row
/// with the nearest stream count at or above `n` (the last row beyond the table).
pub fn thesis_tuning(rate: okeanos::workload::Rate, n: usize) -> Option<(u64, u64)> {
    const T1K: [(usize, u64, u64); 10] = [(100, 10, 300), (500, 10, 300), (1000, 10, 150), (2000, 10, 60), (3000, 1, 30), (4000, 1, 30), (5000, 1, 5), (6000, 1, 5), (7000, 1, 5), (8000, 1, 5)];
    const T10K: [(usize, u64, u64); 5] = [(50, 10, 300), (100, 5, 100), (500, 5, 60), (1000, 1, 30), (1500, 1, 10)];
    const T1M: [(usize, u64, u64); 5] = [(10, 5, 20), (25, 1, 5), (50, 1, 3), (75, 1, 1), (100, 1, 1)];
    let bits = match rate {
        okeanos::workload::Rate::Bits(b) => b,
        _ => return None,
    };
    let table: &[(usize, u64, u64)] = if bits <= 2e3 {
        &T1K
    } else if bits <= 1e5 {
        &T10K
    } else {
        &T1M
    };
    let row = table.iter().find(|r| r.0 >= n).or(table.last())?;
    Some((row.1, row.2))
}

#[derive(Subcommand)]
enum SimCmd {
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

impl ModelArgs {
    /// How the simulated disk is formatted: with a log in every group for `--journal manylogs`.
    pub fn mkfs(&self) -> MkfsOptions {
        MkfsOptions { manylogs: self.journal == "manylogs", ..Default::default() }
    }

    /// A world configuration for `cfg` (checked).
    pub fn world(&self, cfg: ContentConfig) -> Result<WorldConfig, String> {
        let fs_model = model::preset(&self.model)?;
        let jname = self.journal_model.clone().unwrap_or_else(|| self.model.clone());
        let (external, remote) = match self.journal.as_str() {
            "external" => (true, None),
            "internal" | "nvm" => (false, None),
            "manylogs" => (false, None),
            "remote" | "dropped" => (false, Some(okeanos::sim::world::RemoteConfig::single(model::preset(&self.net)?, model::preset(&self.server_model)?, self.journal == "dropped"))),
            "replicated" => {
                if self.replicas < 3 || self.replicas % 2 == 0 {
                    return Err(format!("--replicas {}: an odd number, at least 3", self.replicas));
                }
                let mut r = okeanos::sim::world::RemoteConfig::single(model::preset(&self.net)?, model::preset(&self.server_model)?, false);
                r.followers = (1..self.replicas).map(|_| model::preset(&self.server_model)).collect::<Result<_, _>>()?;
                if let Some(at) = &self.leader_loss_at {
                    let ns = |s: &str| okeanos::workload::parse_duration(s).map(|d| d.as_nanos() as u64);
                    r.leader_loss = Some((ns(at)?, ns(&self.election)?));
                }
                (false, Some(r))
            }
            x => return Err(format!("--journal {x}: use external, internal, remote, replicated, nvm, manylogs or dropped")),
        };
        if !external && self.journal_model.is_some() {
            return Err("--journal-model applies only to an external journal".into());
        }
        let fs_bytes = crate::parse_size(&self.fs_size)?;
        let journal_bytes = crate::parse_size(&self.journal_size)?;
        if fs_bytes < 64 << 20 || journal_bytes < 1 << 20 {
            return Err("--fs-size must be at least 64M and --journal-size at least 1M".into());
        }
        // Simulated devices live in memory (untouched pages cost nothing, but they must fit).
        if fs_bytes > 64 << 30 || journal_bytes > 16 << 30 {
            return Err("the simulator keeps its devices in memory: --fs-size at most 64G and --journal-size at most 16G".into());
        }
        let mut mount = if self.mount_options.is_empty() { MountOptions::default() } else { MountOptions::parse(&self.mount_options)? };
        mount = mount.content_config(cfg);
        mount.content()?;
        Ok(WorldConfig {
            fs_bytes,
            external_journal_blocks: external.then_some(journal_bytes / 4096),
            journal_blocks: journal_bytes / 4096,
            fs_model,
            journal_model: if external { Some(model::preset(&jname)?) } else { None },
            mount,
            wall_origin: 1_700_000_000_000_000_000,
            frozen_wall: false,
            remote,
            nvm: match self.journal.as_str() {
                "nvm" => {
                    let bytes = crate::parse_size(&self.nvm_size)?;
                    if bytes > 16 << 30 {
                        return Err("the simulator keeps NVM in memory: --nvm-size at most 16G".into());
                    }
                    Some(okeanos::sim::world::NvmConfig { region: std::sync::Arc::new(okeanos::nvm::MemNvm::new(bytes)), model: model::preset("nvm")? })
                }
                _ => None,
            },
            journal_at: None,
            timed_reads: None,
        })
    }

    /// The configuration for one run, with the flush tuning applied.
    pub fn world_for(&self, cfg: ContentConfig, rate: okeanos::workload::Rate, n: usize) -> Result<WorldConfig, String> {
        let mut w = self.world(cfg)?;
        match self.flush_tuning.as_str() {
            "default" => {}
            "thesis" => {
                if let Some((wb, exp)) = thesis_tuning(rate, n) {
                    w.mount.writeback_period = std::time::Duration::from_secs(wb);
                    w.mount.expire_period = Some(std::time::Duration::from_secs(exp));
                }
            }
            x => return Err(format!("--flush-tuning {x}: use default or thesis")),
        }
        Ok(w)
    }

    /// A run of this simulated storage, before its results.
    fn run_of(&self, workload: &str, mode: ContentConfig, streams: usize, size: usize, rate: okeanos::workload::Rate, sync: &str, sync_every: usize) -> Run {
        Run {
            workload: workload.into(),
            mode: mode.name(),
            target: self.target(),
            streams,
            size,
            rate: rate.to_string(),
            sync: sync.into(),
            sync_every,
            model: Some(self.model.clone()),
            seed: Some(self.seed),
            ..Default::default()
        }
    }

    pub fn target(&self) -> String {
        match (&self.journal_model, self.journal.as_str()) {
            (_, "internal") => format!("sim:{}", self.model),
            (_, "nvm") => format!("sim:{}+nvm", self.model),
            (_, "manylogs") => format!("sim:{}+manylogs", self.model),
            (_, "remote") => format!("sim:{}+remote({},{})", self.model, self.net, self.server_model),
            (_, "replicated") => format!("sim:{}+replicated({}x{},{})", self.model, self.replicas, self.server_model, self.net),
            (_, "dropped") => format!("sim:{}+no journal", self.model),
            (Some(j), _) => format!("sim:{}+{}", self.model, j),
            (None, _) => format!("sim:{}+{}", self.model, self.model),
        }
    }

    fn jobs(&self) -> usize {
        self.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1)
    }
}

pub fn run(a: SimArgs) -> Result<ExitCode, String> {
    let command = crate::report::command_line();
    if a.crash_fuzz {
        return crash_fuzz(&a);
    }
    match a.cmd {
        None => Err("okeanos sim: give a workload (multistream, mixed, recovery, models) or --crash-fuzz".into()),
        Some(SimCmd::Models) => {
            for name in model::PRESETS {
                println!("{}", model::preset(name)?.describe());
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(SimCmd::Nearhead { schemes, rates, duration, writer, model, disk_size, large_size, request, device_request, writers, logged_write_size, seed, commit_log, append_rate, durable, varmail, fileserver, no_log_swap, json }) => {
            use okeanos::sim::nearhead::{self, Scheme, Spec};
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
                let o = okeanos::sim::calibrate::run(&model, r, writes, request, duration, seed)?;
                println!(
                    "{:<16} {:>5} {:>6} {:>10.1} {:>10.1} {:>5.0}% {:>10.2}",
                    o.model, o.iops, if o.write { "write" } else { "read" }, o.alone_bps / 1e6, o.shared_bps / 1e6, 100.0 * (1.0 - o.shared_bps / o.alone_bps.max(1.0)), o.random_mean_ns as f64 / 1e6
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(SimCmd::LazyCheckpoint { rate, duration, writers, file_size, sequential, hot, hot_blocks, cache_blocks, no_log_swap, model, disk_size, seed, json }) => {
            use okeanos::sim::lazyckpt::{self, Spec};
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

fn multistream(c: &Common, m: &ModelArgs) -> Result<Vec<Run>, String> {
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
        let res = m.world_for(*mode, spec.rate, spec.streams).and_then(|cfg| World::new(cfg, &m.mkfs()).map_err(|e| e.to_string())).and_then(|w| okeanos::sim::multistream::run(w, spec, m.seed));
        r.wall_s = t0.elapsed().as_secs_f64();
        match res {
            Ok(o) => {
                r.simulated(o.virtual_s, &o.during, &o.after, o.writes);
                r.cpu_s = r.wall_s;
                r.error = o.error;
            }
            Err(e) => r.error = Some(e),
        }
        r
    }))
}

fn mixed_runs(c: &Common, m: &ModelArgs, x: &MixedArgs) -> Result<Vec<Run>, String> {
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
        let large = okeanos::sim::mixed::Large { read: mx.read, request: mx.request as u64 };
        let make = || m.world(*mode).expect("checked");
        match okeanos::sim::mixed::run(&make, &m.mkfs(), spec, &large, mx.file_size, m.seed) {
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
fn postmark(c: &Common, m: &ModelArgs, files: usize, transactions: usize, min_file: usize, max_file: usize, sync: bool, varmail: bool) -> Result<Vec<Run>, String> {
    let g = c.grid()?;
    m.world(g.modes[0])?;
    if min_file == 0 || min_file > max_file || max_file > 64 << 20 {
        return Err("--min-file must be positive and at most --max-file (at most 64M)".into());
    }
    let plan: Vec<(ContentConfig, usize, usize)> = g.cells(false).into_iter().flat_map(|(size, _, n)| g.modes.iter().map(move |&mode| (mode, n, size))).collect();
    Ok(parallel(&plan, m.jobs(), c.quiet, |&(mode, n, size)| {
        let mut r = m.run_of(if varmail { "varmail" } else { "postmark" }, mode, n, size, okeanos::workload::Rate::Closed, if sync { "fdatasync" } else { "none" }, 1);
        let t0 = Instant::now();
        let spec = okeanos::sim::postmark::Spec { files, transactions, clients: n, request: size, min_file, max_file, sync, varmail };
        let res = m.world(mode).and_then(|cfg| World::new(cfg, &m.mkfs()).map_err(|e| e.to_string())).and_then(|w| okeanos::sim::postmark::run(w, &spec, m.seed));
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

fn iozone(c: &Common, m: &ModelArgs, sizes: &str, patterns: &str) -> Result<Vec<Run>, String> {
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
        let spec = okeanos::sim::iozone::Spec { file_bytes: bytes, request, random, sync_every: if c.sync_every == 1 { 0 } else { c.sync_every } };
        let res = m.world(mode).and_then(|cfg| World::new(cfg, &m.mkfs()).map_err(|e| e.to_string())).and_then(|w| okeanos::sim::iozone::run(w, &spec, m.seed));
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

fn print_iozone(runs: &[Run]) {
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

fn print_postmark(runs: &[Run]) {
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

fn recovery(c: &Common, m: &ModelArgs, records: usize) -> Result<Vec<Run>, String> {
    let g = c.grid()?;
    let mkfs = m.mkfs();
    m.world(g.modes[0])?;
    let plan: Vec<(ContentConfig, usize, usize)> = g.cells(false).into_iter().flat_map(|(size, _, n)| g.modes.iter().map(move |&mode| (mode, n, size))).collect();
    Ok(parallel(&plan, m.jobs(), c.quiet, |&(mode, n, size)| {
        let mut r = m.run_of("recovery", mode, n, size, okeanos::workload::Rate::Closed, "fsync", 1);
        let t0 = Instant::now();
        let make = || m.world(mode).expect("checked");
        match okeanos::sim::recovery::run(&make, &mkfs, n, size, records) {
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

fn crash_fuzz(a: &SimArgs) -> Result<ExitCode, String> {
    use okeanos::sim::crashfuzz;
    let modes: Vec<ContentConfig> = match &a.modes {
        Some(m) => m.split(',').map(|x| ContentConfig::parse(x.trim())).collect::<Result<_, _>>()?,
        None => crashfuzz::ALL.iter().map(|m| ContentConfig::parse(m)).collect::<Result<_, _>>()?,
    };
    if modes.is_empty() || a.runs == 0 || a.points == 0 {
        return Err("--crash-fuzz needs at least one mode, one run and one point".into());
    }
    let seeds: Vec<u64> = (0..a.runs).map(|k| a.seed.wrapping_add(k)).collect();
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    let t0 = Instant::now();
    let results = parallel(&seeds, jobs, false, |&seed| crashfuzz::run_seed(seed, &modes, a.points, a.canary));
    let mut per_mode: std::collections::BTreeMap<String, (u64, usize, usize)> = Default::default();
    let mut violations = Vec::new();
    let mut errors = Vec::new();
    let mut overlaps = 0;
    let mut copied = 0;
    let mut swaps = 0;
    let mut snapshots = 0;
    let mut journals: std::collections::BTreeMap<&'static str, usize> = Default::default();
    for (seed, r) in seeds.iter().zip(results) {
        match r {
            Ok(r) => {
                overlaps += r.overlaps;
                copied += r.copied;
                swaps += r.swaps;
                snapshots += r.snapshots;
                *journals.entry(r.journal).or_default() += 1;
                let e = per_mode.entry(r.mode.clone()).or_default();
                e.0 += 1;
                e.1 += r.states;
                e.2 += r.violations.len();
                violations.extend(r.violations);
            }
            Err(e) => errors.push(format!("seed {seed}: {e}")),
        }
    }
    println!("{:<18} {:>6} {:>8} {:>11}", "mode", "runs", "states", "violations");
    for (m, (runs, states, v)) in &per_mode {
        println!("{m:<18} {runs:>6} {states:>8} {v:>11}");
    }
    let states: usize = per_mode.values().map(|x| x.1).sum();
    println!("runs by journal: {}", journals.iter().map(|(j, n)| format!("{j} {n}")).collect::<Vec<_>>().join(", "));
    println!("{} runs, {states} crash states, {} violations, {} errors in {:.1} s{}; {overlaps} commits beside a checkpoint, {copied} blocks copied home from manylogs logs, {swaps} log swaps, {snapshots} map snapshots", a.runs, violations.len(), errors.len(), t0.elapsed().as_secs_f64(), if a.canary { " (canary: commit flush skipped)" } else { "" });
    for v in violations.iter().take(20) {
        println!("VIOLATION {v}");
    }
    for e in errors.iter().take(20) {
        println!("ERROR {e}");
    }
    if let Some(first) = violations.first().or(errors.first()) {
        let seed = first.split_whitespace().nth(1).unwrap_or("?").trim_end_matches(':');
        println!("reproduce: okeanos sim --crash-fuzz --seed {seed} --runs 1 --points {}{}", a.points, if a.canary { " --canary" } else { "" });
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

//! `okeanos bench`: the papers' benchmarks on Okeanos and on Linux file systems (docs/DESIGN.md
//! section 4). `multistream` (N streams appending and syncing), `recovery` (crash with
//! everything committed and nothing checkpointed; time of each recovery pass) and `mixed`
//! (a large sequential stream beside small synced writers). Each prints a table and can write
//! JSON, CSV and plots; `okeanos sim` reports in the same format.

mod loopdev;
mod mixed;
mod multistream;
mod rawdev;
mod rawstream;
mod recovery;
pub mod target;

pub use mixed::print as print_mixed;
pub use recovery::print as print_recovery;

use crate::report::{self, Run};
use clap::{Args, Subcommand};
use okeanos::journal::content::ContentConfig;
use okeanos::workload::{parse_duration, Rate, SyncKind};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use target::{Setup, Target};

/// Flags shared by every workload of `bench` and `sim`.
#[derive(Args, Clone, Debug)]
pub struct Common {
    /// Content policies, comma-separated; options of a policy follow a plus sign
    /// (wasteless+dmeta).
    #[arg(long, default_value = "ordered,data,wasteless,wasteless+dmeta,selective")]
    pub modes: String,
    /// Numbers of streams, comma-separated (one run per value).
    #[arg(long, default_value = "100")]
    pub streams: String,
    /// Request sizes in bytes (128, 1K, 16K), comma-separated.
    #[arg(long, default_value = "128")]
    pub size: String,
    /// Per-stream rates, comma-separated: closed (loop), 1kbit, 10kbit, 1mbit, 10/s.
    #[arg(long, default_value = "closed")]
    pub rate: String,
    /// fsync or fdatasync after writes.
    #[arg(long, default_value = "fdatasync")]
    pub sync: String,
    /// Sync after every k writes.
    #[arg(long, default_value = "1")]
    pub sync_every: usize,
    /// Length of each run (10s, 500ms, 1m).
    #[arg(long, default_value = "10s")]
    pub duration: String,
    /// Write every run to this JSON file (a list `runs`).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write every run to this CSV file.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write plots (PNG and SVG) into this directory.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Also print the table as markdown.
    #[arg(long)]
    pub markdown: bool,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// The parsed grid of a command.
pub struct Grid {
    pub modes: Vec<ContentConfig>,
    pub streams: Vec<usize>,
    pub sizes: Vec<usize>,
    pub rates: Vec<Rate>,
    pub sync: SyncKind,
    pub sync_every: usize,
    pub duration: std::time::Duration,
}

fn list<T>(s: &str, what: &str, f: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    let v: Vec<T> = s.split(',').map(str::trim).filter(|x| !x.is_empty()).map(&f).collect::<Result<_, _>>()?;
    if v.is_empty() {
        return Err(format!("--{what} needs at least one value"));
    }
    Ok(v)
}

impl Grid {
    /// The grid's points in report order (size, then rate, then stream count); workloads
    /// without a rate (recovery, postmark) take one point per size and count.
    pub fn cells(&self, with_rates: bool) -> Vec<(usize, Rate, usize)> {
        let rates = if with_rates { self.rates.clone() } else { vec![Rate::Closed] };
        let mut out = Vec::new();
        for &size in &self.sizes {
            for &rate in &rates {
                for &n in &self.streams {
                    out.push((size, rate, n));
                }
            }
        }
        out
    }

    /// The multistream workload at one point of the grid.
    pub fn spec(&self, size: usize, rate: Rate, streams: usize) -> okeanos::workload::Multistream {
        okeanos::workload::Multistream { streams, size, rate, sync: self.sync, sync_every: self.sync_every, duration: self.duration }
    }
}

impl Common {
    pub fn grid(&self) -> Result<Grid, String> {
        let g = Grid {
            modes: list(&self.modes, "modes", ContentConfig::parse)?,
            streams: list(&self.streams, "streams", |x| x.parse::<usize>().ok().filter(|&n| (1..=100_000).contains(&n)).ok_or_else(|| format!("--streams {x}: a number from 1 to 100000")))?,
            sizes: list(&self.size, "size", |x| crate::parse_size(x).and_then(|v| if (1..=64 << 20).contains(&v) { Ok(v as usize) } else { Err(format!("--size {x}: from 1 byte to 64 MiB")) }))?,
            rates: list(&self.rate, "rate", Rate::parse)?,
            sync: SyncKind::parse(&self.sync)?,
            sync_every: self.sync_every,
            duration: parse_duration(&self.duration)?,
        };
        let buffers = *g.streams.iter().max().unwrap_or(&1) as u64 * *g.sizes.iter().max().unwrap_or(&1) as u64;
        if buffers > 1 << 30 {
            return Err(format!("{} streams with {}-byte requests need {} MiB of request buffers; keep streams x size within 1 GiB", g.streams.iter().max().unwrap_or(&1), g.sizes.iter().max().unwrap_or(&1), buffers >> 20));
        }
        if g.sync_every == 0 {
            return Err("--sync-every must be at least 1".into());
        }
        if g.duration.is_zero() {
            return Err("--duration must be positive".into());
        }
        Ok(g)
    }

    /// Writes the JSON, CSV and plots asked for, and prints the table.
    pub fn output(&self, command: &str, prefix: &str, runs: &[Run]) -> Result<(), String> {
        if prefix.ends_with("multistream") {
            println!();
            report::print_table(runs);
        }
        if self.markdown && prefix.ends_with("multistream") {
            println!();
            report::print_markdown(runs);
        }
        if let Some(p) = &self.json {
            report::write_json(p, command, runs)?;
            eprintln!("wrote {}", p.display());
        }
        if let Some(p) = &self.csv {
            report::write_csv(p, runs)?;
            eprintln!("wrote {}", p.display());
        }
        if let Some(d) = &self.plot {
            let mut files = crate::plot::plot_multistream(d, prefix, runs)?;
            files.extend(crate::plot::plot_recovery(d, prefix, runs)?);
            if files.is_empty() {
                eprintln!("no plots: plots need runs at two or more stream counts (--streams 1,10,100)");
            } else {
                eprintln!("wrote {} plot files into {}", files.len(), d.display());
            }
        }
        Ok(())
    }
}

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    cmd: BenchCmd,
}

/// Flags of the real targets.
#[derive(Args, Clone, Debug)]
pub struct TargetArgs {
    /// Targets, comma-separated: engine (image file, internal journal), engine:external,
    /// engine:loop (loop devices, root), engine:nvm (loop device, NVM journal in /dev/shm),
    /// engine:manylogs (loop device, root, a log in every group),
    /// engine:remote / engine:remote-tls (a journal server started on 127.0.0.1),
    /// engine:jetstream / engine:jetstream-default-fsync (a 3-node nats-server cluster on
    /// 127.0.0.1), mount:PATH, kernel:ext4-journal, kernel:ext4-ordered, kernel:ext4-writeback,
    /// kernel:ext4-fastcommit, kernel:xfs (root), device:loop (root: no file system, each
    /// record one 4 KiB direct write and a flush of a raw loop device, the floor line),
    /// device:jetstream (no journal: each record one acknowledged message on a 3-node R3
    /// cluster on 127.0.0.1, the JetStream placement's floor line).
    #[arg(long, default_value = "engine")]
    pub target: String,
    /// Directory for image files and loop-device backing files (default: the system's
    /// temporary directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// File-system size (image or loop device).
    #[arg(long, default_value = "2G")]
    pub fs_size: String,
    /// Journal (or XFS log) size.
    #[arg(long, default_value = "128M")]
    pub journal_size: String,
    /// Extra engine mount options (commit=1,max_batch_time=0,...).
    #[arg(long, default_value = "")]
    pub mount_options: String,
    /// Format the engine's journal without writing its ring (mkfs --lazy-journal-init); by
    /// default it is written, as the kernel targets' mkfs.ext4 -E lazy_journal_init=0 does.
    #[arg(long)]
    pub lazy_journal_init: bool,
}

impl TargetArgs {
    pub fn targets(&self) -> Result<Vec<Target>, String> {
        let t = list(&self.target, "target", Target::parse)?;
        if t.iter().any(Target::needs_root) {
            loopdev::require_root(&format!("--target {}", self.target))?;
        }
        Ok(t)
    }
    pub fn setup(&self) -> Result<Setup, String> {
        let fs_bytes = crate::parse_size(&self.fs_size)?;
        let journal_bytes = crate::parse_size(&self.journal_size)?;
        if fs_bytes < 64 << 20 || journal_bytes < 4 << 20 {
            return Err("--fs-size must be at least 64M and --journal-size at least 4M".into());
        }
        if !self.mount_options.is_empty() {
            okeanos::MountOptions::parse(&self.mount_options)?;
        }
        Ok(Setup { dir: self.dir.clone().unwrap_or_else(std::env::temp_dir), fs_bytes, journal_bytes, mount_options: self.mount_options.clone(), lazy_journal_init: self.lazy_journal_init })
    }
}

#[derive(Subcommand)]
enum BenchCmd {
    /// N streams, each appending requests of size R to its own file at a rate or in a closed
    /// loop, with a sync after every k writes.
    Multistream {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// N streams write K records each (committed, nothing checkpointed), then a crash;
    /// recovery time by pass (scan, revoke, replay).
    Recovery {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        target: TargetArgs,
        /// Records each stream writes before the crash.
        #[arg(long, default_value = "100")]
        records: usize,
    },
    /// A large sequential reader or writer beside rate-limited small synced random writers:
    /// the large stream's share of bandwidth and the small writers' sync latency.
    Mixed {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        target: TargetArgs,
        #[command(flatten)]
        mixed: MixedArgs,
    },
}

/// Flags of the mixed workload (bench and sim).
#[derive(Args, Clone, Debug)]
pub struct MixedArgs {
    /// The large stream: read or write.
    #[arg(long, default_value = "write")]
    pub large: String,
    /// Size of each large request.
    #[arg(long, default_value = "1M")]
    pub large_request: String,
    /// Size of each small writer's file (random offsets within it).
    #[arg(long, default_value = "8M")]
    pub file_size: String,
}

/// Set by SIGINT/SIGTERM: runs stop early and everything is released.
pub fn interrupted() -> Arc<AtomicBool> {
    static FLAG: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    FLAG.get_or_init(|| {
        let f = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            let _ = signal_hook::flag::register(sig, f.clone());
        }
        f
    })
    .clone()
}

pub fn check_interrupted() -> Result<(), String> {
    if interrupted().load(Ordering::Relaxed) {
        return Err("interrupted; everything set up was released".into());
    }
    Ok(())
}

pub fn run(a: BenchArgs) -> Result<ExitCode, String> {
    let _ = interrupted();
    let command = crate::report::command_line();
    match a.cmd {
        BenchCmd::Multistream { common, target } => {
            let runs = multistream::run(&common, &target)?;
            common.output(&command, "multistream", &runs)?;
            exit_for(&runs)
        }
        BenchCmd::Recovery { common, target, records } => {
            let runs = recovery::run(&common, &target, records)?;
            recovery::print(&runs);
            common.output(&command, "recovery", &runs)?;
            exit_for(&runs)
        }
        BenchCmd::Mixed { common, target, mixed } => {
            let runs = mixed::run(&common, &target, &mixed)?;
            mixed::print(&runs);
            common.output(&command, "mixed", &runs)?;
            exit_for(&runs)
        }
    }
}

pub fn exit_for(runs: &[Run]) -> Result<ExitCode, String> {
    check_interrupted()?;
    Ok(if runs.iter().any(|r| r.error.is_some()) { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// A progress bar over the runs of a command (hidden when stderr is not a terminal).
pub fn progress(total_runs: u64, quiet: bool) -> indicatif::ProgressBar {
    if quiet {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(total_runs * 1000);
    pb.set_style(indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {percent:>3}% {msg}").unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()));
    pb
}

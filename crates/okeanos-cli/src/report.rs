//! Benchmark and simulation reports: one [`Run`] per measured configuration, written as JSON
//! (a list `runs`), CSV (one flat row per run) and a table; `okeanos bench` and `okeanos sim`
//! share them, so their numbers line up column for column.

use okeanos::Counters;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Sync latency as the clients saw it, in microseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LatencyUs {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl LatencyUs {
    pub fn from_histogram(h: &hdrhistogram::Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatencyUs::default();
        }
        let us = |ns: u64| ns as f64 / 1e3;
        LatencyUs { mean: h.mean() / 1e3, p50: us(h.value_at_quantile(0.5)), p99: us(h.value_at_quantile(0.99)), p999: us(h.value_at_quantile(0.999)), max: us(h.max()) }
    }
    pub fn from_counters(c: &Counters) -> Self {
        let l = &c.sync_latency;
        LatencyUs { mean: l.mean_us, p50: l.p50_us, p99: l.p99_us, p999: l.p999_us, max: l.max_us }
    }
}

/// A latency histogram in nanoseconds (1 ns to an hour, 3 significant digits).
pub fn histogram() -> hdrhistogram::Histogram<u64> {
    hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds")
}

/// Bytes written, in total and by block kind (where the target exposes kinds).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Bytes {
    pub payload_bytes: u64,
    pub journal_bytes: Option<u64>,
    pub final_bytes: Option<u64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub per_kind: BTreeMap<String, u64>,
}

impl Bytes {
    pub fn from_counters(c: &Counters) -> Self {
        let mut per_kind = BTreeMap::new();
        for (k, v) in [
            ("descriptor", &c.descriptor),
            ("commit", &c.commit),
            ("revoke", &c.revoke),
            ("multiwrite", &c.multiwrite),
            ("journal_data", &c.journal_data),
            ("journal_meta", &c.journal_meta),
            ("journal_super", &c.journal_super),
            ("final_data", &c.final_data),
            ("final_meta", &c.final_meta),
            ("log_swap", &c.log_swap),
        ] {
            per_kind.insert(k.to_string(), v.bytes);
        }
        Bytes { payload_bytes: c.payload_bytes, journal_bytes: Some(c.journal_bytes), final_bytes: Some(c.final_bytes), per_kind }
    }
}

/// Bytes the devices themselves report having written (the engine's device layer, or
/// /sys/block/<dev>/stat for loop devices), for cross-checking the counters.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DeviceBytes {
    pub source: String,
    pub fs_written: u64,
    pub journal_written: Option<u64>,
    pub flushes: Option<u64>,
}

/// One measured configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Run {
    /// multistream, recovery or mixed.
    pub workload: String,
    pub mode: String,
    pub target: String,
    pub streams: usize,
    pub size: usize,
    pub rate: String,
    pub sync: String,
    pub sync_every: usize,
    pub duration_s: f64,
    /// Totals including what the final sync, checkpoint and unmount wrote.
    pub payload_bytes: u64,
    pub journal_bytes: Option<u64>,
    pub final_bytes: Option<u64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub per_kind: BTreeMap<String, u64>,
    /// The same counted when the measured period ended (deferred writes not yet done).
    pub during: Bytes,
    /// Journal and final-location throughput during the run, MB/s (10^6 bytes).
    pub journal_mb_s: Option<f64>,
    pub final_mb_s: Option<f64>,
    pub syncs: u64,
    pub commits: Option<u64>,
    pub syncs_per_commit: Option<f64>,
    pub ops: u64,
    pub ops_per_s: f64,
    /// CPU time of the benchmark process (user + system) during the run; kernel targets do
    /// part of their work in kernel threads that this does not see.
    pub cpu_s: f64,
    pub sync_latency_us: LatencyUs,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceBytes>,
    /// Okeanos targets: where the commit lane's time went during the run (docs/OBSERVABILITY.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_lane: Option<okeanos::stats::LaneTimes>,
    /// Okeanos targets: commits during the run by how many handles each carried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_sizes: Option<okeanos::stats::CommitSizes>,
    /// Okeanos targets: operations that waited to start during the run, by reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission: Option<okeanos::stats::AdmitWaits>,
    /// Okeanos targets: checkpoints during the run and what they wrote home.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<okeanos::journal::CheckpointCounts>,
    /// Okeanos targets: how the mount wrote new whole blocks (`fresh_blocks=`, as resolved:
    /// null outside wasteless) and whether it took the file system's device to seek (null: the
    /// device said nothing). `fresh_blocks=auto` and `short_writes=auto` follow the second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_blocks: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fs_seeks: Option<bool>,
    /// Simulator runs: the device model, the seed, and the wall time the simulation took.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    pub wall_s: f64,
    /// Workload-specific results (recovery passes; the mixed workload's large I/O).
    #[serde(skip_serializing_if = "serde_json::Value::is_null")]
    pub extra: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Run {
    /// The results of a simulated run: `virtual_s` of virtual time, `writes` operations, the
    /// counters during the run and through unmount.
    pub fn simulated(&mut self, virtual_s: f64, during: &okeanos::Counters, after: &okeanos::Counters, writes: u64) {
        self.duration_s = virtual_s;
        self.set_counters(during, after);
        self.ops = writes;
        self.ops_per_s = writes as f64 / virtual_s.max(1e-9);
        self.sync_latency_us = LatencyUs::from_counters(during);
    }

    /// Journal bytes per payload byte (including unmount).
    pub fn journal_amp(&self) -> Option<f64> {
        let p = self.payload_bytes.max(1) as f64;
        self.journal_bytes.map(|j| j as f64 / p)
    }
    pub fn final_amp(&self) -> Option<f64> {
        let p = self.payload_bytes.max(1) as f64;
        self.final_bytes.map(|j| j as f64 / p)
    }
    /// Fills the byte fields from engine counters taken at the end of the measured period
    /// and after unmount.
    pub fn set_counters(&mut self, during: &Counters, after: &Counters) {
        let a = Bytes::from_counters(after);
        self.payload_bytes = a.payload_bytes;
        self.journal_bytes = a.journal_bytes;
        self.final_bytes = a.final_bytes;
        self.per_kind = a.per_kind;
        self.during = Bytes::from_counters(during);
        let secs = self.duration_s.max(1e-9);
        self.journal_mb_s = Some(during.journal_bytes as f64 / secs / 1e6);
        self.final_mb_s = Some(during.final_bytes as f64 / secs / 1e6);
        self.syncs = during.syncs;
        self.commits = Some(during.commits);
        self.syncs_per_commit = Some(during.syncs_per_commit);
        self.commit_sizes = Some(during.commit_sizes).filter(|c| !c.is_empty());
    }
}

/// The flat CSV row of a run.
#[derive(Serialize)]
struct CsvRow<'a> {
    workload: &'a str,
    mode: &'a str,
    target: &'a str,
    streams: usize,
    size: usize,
    rate: &'a str,
    sync: &'a str,
    duration_s: f64,
    payload_bytes: u64,
    journal_bytes: Option<u64>,
    final_bytes: Option<u64>,
    during_journal_bytes: Option<u64>,
    during_final_bytes: Option<u64>,
    journal_mb_s: Option<f64>,
    final_mb_s: Option<f64>,
    syncs: u64,
    commits: Option<u64>,
    ops: u64,
    ops_per_s: f64,
    cpu_s: f64,
    lat_mean_us: f64,
    lat_p50_us: f64,
    lat_p99_us: f64,
    lat_p999_us: f64,
    model: Option<&'a str>,
    seed: Option<u64>,
    error: Option<&'a str>,
}

/// The command line as a reader would type it again: the program as `okeanos`, whatever path
/// or file name ran it (a copy in target/release, a renamed binary), so that the JSON
/// committed under docs/ names the command the documents show.
pub fn command_line() -> String {
    std::iter::once("okeanos".to_string()).chain(std::env::args().skip(1)).collect::<Vec<_>>().join(" ")
}

pub fn write_json(path: &Path, command: &str, runs: &[Run]) -> Result<(), String> {
    let doc = serde_json::json!({ "command": command, "runs": runs });
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))
}

/// Reads the runs of a JSON report written by [`write_json`].
pub fn read_json(path: &Path) -> Result<Vec<Run>, String> {
    #[derive(Deserialize)]
    struct Doc {
        runs: Vec<Run>,
    }
    let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let doc: Doc = serde_json::from_slice(&text).map_err(|e| format!("{}: not a benchmark report: {e}", path.display()))?;
    Ok(doc.runs)
}

pub fn write_csv(path: &Path, runs: &[Run]) -> Result<(), String> {
    let mut w = csv::Writer::from_path(path).map_err(|e| format!("{}: {e}", path.display()))?;
    for r in runs {
        w.serialize(CsvRow {
            workload: &r.workload,
            mode: &r.mode,
            target: &r.target,
            streams: r.streams,
            size: r.size,
            rate: &r.rate,
            sync: &r.sync,
            duration_s: r.duration_s,
            payload_bytes: r.payload_bytes,
            journal_bytes: r.journal_bytes,
            final_bytes: r.final_bytes,
            during_journal_bytes: r.during.journal_bytes,
            during_final_bytes: r.during.final_bytes,
            journal_mb_s: r.journal_mb_s,
            final_mb_s: r.final_mb_s,
            syncs: r.syncs,
            commits: r.commits,
            ops: r.ops,
            ops_per_s: r.ops_per_s,
            cpu_s: r.cpu_s,
            lat_mean_us: r.sync_latency_us.mean,
            lat_p50_us: r.sync_latency_us.p50,
            lat_p99_us: r.sync_latency_us.p99,
            lat_p999_us: r.sync_latency_us.p999,
            model: r.model.as_deref(),
            seed: r.seed,
            error: r.error.as_deref(),
        })
        .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    w.flush().map_err(|e| format!("{}: {e}", path.display()))
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.prec$}"))
}

/// The multistream columns: header and the cells of one run.
const COLUMNS: [&str; 13] = ["mode", "target", "N", "R", "rate", "ops/s", "syncs/commit", "journal B/payload B", "final B/payload B", "journal MB/s", "final MB/s", "sync p50 µs", "sync p99 µs"];

fn cells(r: &Run) -> [String; 13] {
    [
        r.mode.clone(),
        r.target.clone(),
        r.streams.to_string(),
        r.size.to_string(),
        r.rate.clone(),
        format!("{:.0}", r.ops_per_s),
        opt(r.syncs_per_commit, 1),
        opt(r.journal_amp(), 2),
        opt(r.final_amp(), 2),
        opt(r.journal_mb_s, 3),
        opt(r.final_mb_s, 3),
        format!("{:.0}", r.sync_latency_us.p50),
        format!("{:.0}", r.sync_latency_us.p99),
    ]
}

/// The multistream table: a title naming the workload, one line per run, and a legend of the
/// columns.
pub fn print_table(runs: &[Run]) {
    const SHORT: [&str; 13] = ["mode", "target", "N", "R", "rate", "ops/s", "sync/c", "jrnl B/B", "final B/B", "jrnl MB/s", "final MB/s", "p50 us", "p99 us"];
    const WIDTH: [usize; 13] = [18, 22, 5, 6, 7, 9, 7, 9, 9, 9, 9, 9, 9];
    let line = |cells: &[String]| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            let w = WIDTH[i].max(c.chars().count());
            // The first two columns read left to right, the numbers right-aligned.
            let cell = if i < 2 { format!("{c:<w$}") } else { format!("{c:>w$}") };
            out.push_str(&cell);
            out.push(' ');
        }
        out.trim_end().to_string()
    };
    if let Some(r) = runs.first() {
        let every = if r.sync_every == 1 { "each write".to_string() } else { format!("every {} writes", r.sync_every) };
        println!("multistream: N streams, each appending R-byte records to its own file and calling {} after {every}; {:.0} s per run", r.sync, r.duration_s);
    }
    println!("{}", line(&SHORT.map(String::from)));
    for r in runs {
        println!("{}{}", line(&cells(r)), r.error.as_ref().map_or(String::new(), |e| format!("  ERROR: {e}")));
    }
    println!("{LEGEND}");
}

/// What the table's columns mean.
pub const LEGEND: &str = "N streams; R bytes per write; rate per stream (closed: as fast as syncs return); ops/s writes per second; \
sync/c syncs served per commit (group commit); jrnl B/B and final B/B journal and final-location bytes written per payload byte, \
counted through unmount (every byte the run caused, the last checkpoint included; on a mount:PATH target through a forced \
checkpoint, the mount staying up, and n/a where PATH is not an Okeanos mount); jrnl MB/s and final MB/s during the measured \
period only (writeback still owed at its end is not in them); p50/p99 us sync latency percentiles in microseconds.";

/// The same as a markdown table (for docs/BENCHMARKS.md and docs/SIMULATION.md).
pub fn print_markdown(runs: &[Run]) {
    println!("| {} |", COLUMNS.join(" | "));
    println!("|---|---|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|");
    for r in runs {
        println!("| {} |", cells(r).join(" | "));
    }
}

/// The `extra` object of a recovery run: what recovery found and each pass's time.
pub fn recovery_extra(rep: &okeanos::stats::RecoveryReport, records: usize, checkpoints: u64) -> serde_json::Value {
    let ms = |ns: u64| ns as f64 / 1e6;
    serde_json::json!({
        "records_per_stream": records,
        "checkpoints_before_crash": checkpoints,
        "transactions": rep.transactions,
        "blocks_scanned": rep.blocks_scanned,
        "blocks_probed": rep.blocks_probed,
        "damage": rep.damage,
        "revoke_records": rep.revoke_records,
        "blocks_replayed": rep.blocks_replayed,
        "scan_ms": ms(rep.scan_ns),
        "revoke_ms": ms(rep.revoke_ns),
        "replay_ms": ms(rep.replay_ns),
        "recovery_ms": ms(rep.scan_ns + rep.revoke_ns + rep.replay_ns),
    })
}

/// A recovery run measures nothing meaningful if checkpoints ran before the crash.
pub fn checkpoints_error(checkpoints: u64) -> Option<String> {
    (checkpoints > 0).then(|| format!("{checkpoints} checkpoints ran before the crash (the journal filled up): use a larger --journal-size"))
}

/// CPU time (user + system) of this process so far, in seconds.
pub fn cpu_seconds() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

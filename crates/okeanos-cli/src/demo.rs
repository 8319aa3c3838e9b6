//! The demo: N concurrent writers, each appending fixed-size records to its own file and
//! syncing after every record, once per content policy on a fresh image file; the counters
//! side by side.

use clap::Args;
use okeanos::journal::content::ContentConfig;
use okeanos::{Counters, MkfsOptions, MountOptions, Okeanos};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Barrier};

#[derive(Args)]
pub struct DemoArgs {
    /// Concurrent writers (streams).
    #[arg(long, default_value = "100")]
    writers: usize,
    /// Records each writer appends and syncs.
    #[arg(long, default_value = "50")]
    records: usize,
    /// Record sizes in bytes, comma-separated; one run per size and policy.
    #[arg(long, default_value = "128")]
    size: String,
    /// Policies to run, comma-separated; options follow a plus sign (wasteless+dmeta).
    #[arg(long, default_value = "ordered,data,wasteless,wasteless+dmeta,selective")]
    modes: String,
    /// Also print one markdown table of all runs (for docs/BENCHMARKS.md).
    #[arg(long)]
    markdown: bool,
    /// Directory for the image files (default: a temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Use fdatasync (default) or fsync.
    #[arg(long, default_value = "fdatasync")]
    sync: String,
    /// Run the writers through the file system mounted at this directory (an Okeanos FUSE
    /// mount, or any other) with ordinary system calls, instead of through the library.
    /// Counters come from the mount's `.okeanos-stats` when it has one.
    #[arg(long)]
    mount: Option<PathBuf>,
}

struct Row {
    mode: String,
    size: usize,
    /// Counters when the writers finished.
    c: Counters,
    /// Counters after unmount (which commits and checkpoints everything).
    after: Counters,
    wall_s: f64,
}

pub fn run(a: DemoArgs) -> Result<ExitCode, String> {
    let modes: Vec<ContentConfig> = a.modes.split(',').map(|m| ContentConfig::parse(m.trim())).collect::<Result<_, _>>()?;
    let sizes: Vec<usize> = a.size.split(',').map(|s| crate::parse_size(s).map(|v| v as usize)).collect::<Result<_, _>>()?;
    if a.writers == 0 || a.records == 0 || sizes.contains(&0) {
        return Err("writers, records and sizes must be positive".into());
    }
    let fsync = match a.sync.as_str() {
        "fsync" => true,
        "fdatasync" => false,
        s => return Err(format!("--sync {s}: use fsync or fdatasync")),
    };
    if let Some(m) = &a.mount {
        for &size in &sizes {
            run_mounted(&a, m, size, fsync)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let tmp = tempdir(a.dir.clone())?;
    let mut all = Vec::new();
    for &size in &sizes {
        let payload = (a.writers * a.records * size) as u64;
        let mut rows = Vec::new();
        for cfg in &modes {
            rows.push(run_one(&a, &tmp, *cfg, size, fsync)?);
        }
        print_table(&rows, payload, size);
        println!();
        all.extend(rows);
    }
    if a.markdown {
        print_markdown(&all, a.writers, a.records);
    }
    Ok(ExitCode::SUCCESS)
}

fn run_one(a: &DemoArgs, tmp: &std::path::Path, cfg: ContentConfig, size: usize, fsync: bool) -> Result<Row, String> {
    let name = cfg.name();
    let payload = (a.writers * a.records * size) as u64;
    let image_bytes = (payload * 3 + (a.writers as u64) * 64 * 1024).max(512 << 20);
    let path = tmp.join(format!("demo-{name}-{size}.okfs"));
    let _ = std::fs::remove_file(&path);
    Okeanos::mkfs_file(&path, image_bytes, &MkfsOptions::default()).map_err(|e| e.to_string())?;
    let fs = Okeanos::open(&path, MountOptions::default().content_config(cfg)).map_err(|e| e.to_string())?;
    eprintln!("{name}: {} writers x {} records of {size} bytes ...", a.writers, a.records);
    let lib = fs.clone();
    let (lat, wall_s) = run_writers(a.writers, a.records, size, fsync, move |w| lib.create_file(&format!("/stream-{w:05}")).map_err(|e| e.to_string()))?;
    let (mean, p50, p99, p999) = summarize(lat);
    eprintln!("  library client-side sync latency (us): mean {mean:.0} p50 {p50:.0} p99 {p99:.0} p99.9 {p999:.0}; {:.0} appends/s", (a.writers * a.records) as f64 / wall_s);
    let during = fs.counters();
    let probe = fs.clone();
    fs.unmount().map_err(|e| e.to_string())?;
    let after = probe.counters();
    let _ = std::fs::remove_file(&path);
    Ok(Row { mode: name, size, c: during, after, wall_s })
}

/// A stream the writers append to: a library file handle or an ordinary file on a mount.
trait Stream: Send + 'static {
    fn append(&mut self, data: &[u8]) -> Result<(), String>;
    fn sync(&mut self, full: bool) -> Result<(), String>;
}

impl Stream for okeanos::File {
    fn append(&mut self, data: &[u8]) -> Result<(), String> {
        okeanos::File::append(self, data).map(|_| ()).map_err(|e| e.to_string())
    }
    fn sync(&mut self, full: bool) -> Result<(), String> {
        if full { self.fsync() } else { self.fdatasync() }.map_err(|e| e.to_string())
    }
}

impl Stream for std::fs::File {
    fn append(&mut self, data: &[u8]) -> Result<(), String> {
        std::io::Write::write_all(self, data).map_err(|e| e.to_string())
    }
    fn sync(&mut self, full: bool) -> Result<(), String> {
        if full { self.sync_all() } else { self.sync_data() }.map_err(|e| e.to_string())
    }
}

/// Runs `writers` threads, each opening its stream with `open(w)` and appending `records`
/// records of `size` bytes with a sync after each. Returns the client-side sync latencies (ns)
/// and the wall time (s).
fn run_writers<S: Stream>(writers: usize, records: usize, size: usize, fsync: bool, open: impl Fn(usize) -> Result<S, String> + Send + Sync + 'static) -> Result<(Vec<u64>, f64), String> {
    let open = Arc::new(open);
    let barrier = Arc::new(Barrier::new(writers));
    let t0 = std::time::Instant::now();
    let threads: Vec<_> = (0..writers)
        .map(|w| {
            let (open, barrier) = (open.clone(), barrier.clone());
            std::thread::spawn(move || -> Result<Vec<u64>, String> {
                let mut f = open(w)?;
                let rec = vec![b'a' + (w % 26) as u8; size];
                let mut lat = Vec::with_capacity(records);
                barrier.wait();
                for _ in 0..records {
                    f.append(&rec)?;
                    let s = std::time::Instant::now();
                    f.sync(fsync)?;
                    lat.push(s.elapsed().as_nanos() as u64);
                }
                Ok(lat)
            })
        })
        .collect();
    let mut lat = Vec::new();
    for t in threads {
        lat.extend(t.join().map_err(|_| "a writer panicked".to_string())??);
    }
    Ok((lat, t0.elapsed().as_secs_f64()))
}

/// Client-side latency summary (µs): mean, p50, p99, p99.9.
fn summarize(mut lat_ns: Vec<u64>) -> (f64, f64, f64, f64) {
    if lat_ns.is_empty() {
        return (0.0, 0.0, 0.0, 0.0);
    }
    lat_ns.sort_unstable();
    let q = |p: f64| lat_ns[((lat_ns.len() as f64 * p) as usize).min(lat_ns.len() - 1)] as f64 / 1e3;
    (lat_ns.iter().sum::<u64>() as f64 / lat_ns.len() as f64 / 1e3, q(0.5), q(0.99), q(0.999))
}

fn read_stats(mnt: &std::path::Path) -> Option<serde_json::Value> {
    serde_json::from_slice(&std::fs::read(mnt.join(".okeanos-stats")).ok()?).ok()
}

/// The writers on a mounted directory, through system calls.
fn run_mounted(a: &DemoArgs, mnt: &std::path::Path, size: usize, fsync: bool) -> Result<(), String> {
    let dir = mnt.join(format!("demo-{}-{size}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let before = read_stats(mnt);
    let d = dir.clone();
    let (lat, wall) = run_writers(a.writers, a.records, size, fsync, move |w| {
        std::fs::OpenOptions::new().append(true).create(true).open(d.join(format!("stream-{w:05}"))).map_err(|e| e.to_string())
    })?;
    let (mean, p50, p99, p999) = summarize(lat);
    let appends = (a.writers * a.records) as f64;
    println!("mount {}: {} writers x {} records of {size} bytes", mnt.display(), a.writers, a.records);
    println!("  appends per second         {:.0}", appends / wall);
    println!("  sync latency (client, us)  mean {mean:.0}  p50 {p50:.0}  p99 {p99:.0}  p99.9 {p999:.0}");
    if let (Some(b), Some(c)) = (before, read_stats(mnt)) {
        let d = |k: &str| c[k].as_u64().unwrap_or(0) - b[k].as_u64().unwrap_or(0);
        let payload = appends * size as f64;
        println!("  syncs seen by the engine   {}  commits {}  syncs per commit {:.1}", d("syncs"), d("commits"), d("syncs") as f64 / d("commits").max(1) as f64);
        println!("  journal bytes per payload byte {:.2}", d("journal_bytes") as f64 / payload);
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn print_markdown(rows: &[Row], writers: usize, records: usize) {
    println!("| record | policy | journal B / payload B | final B / payload B (incl. unmount) | syncs / commit | records / commit | multiwrite fill | sync p50 (µs) | sync p99 (µs) |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let payload = (writers * records * r.size) as f64;
        println!(
            "| {} | {} | {:.2} | {:.2} | {:.1} | {:.1} | {:.2} | {:.0} | {:.0} |",
            r.size,
            r.mode,
            r.c.journal_bytes as f64 / payload,
            r.after.final_bytes as f64 / payload,
            r.c.syncs_per_commit,
            r.c.records_per_commit,
            r.c.multiwrite_fill,
            r.c.sync_latency.p50_us,
            r.c.sync_latency.p99_us
        );
    }
}

fn tempdir(dir: Option<PathBuf>) -> Result<PathBuf, String> {
    let d = match dir {
        Some(d) => d,
        None => std::env::temp_dir().join(format!("okeanos-demo-{}", std::process::id())),
    };
    std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
    Ok(d)
}

fn print_table(rows: &[Row], payload: u64, size: usize) {
    let appends = payload as f64 / size as f64;
    let line = |label: &str, f: &dyn Fn(&Row) -> String| {
        print!("{label:<34}");
        for r in rows {
            print!("{:>14}", f(r));
        }
        println!();
    };
    line("", &|r| r.mode.clone());
    line("payload bytes", &|_| payload.to_string());
    line("journal bytes", &|r| r.c.journal_bytes.to_string());
    line("journal bytes per append", &|r| format!("{:.0}", r.c.journal_bytes as f64 / appends));
    line("journal bytes per payload byte", &|r| format!("{:.2}", r.c.journal_bytes as f64 / payload as f64));
    line("final-location bytes (during run)", &|r| r.c.final_bytes.to_string());
    line("final-location bytes (with unmount)", &|r| r.after.final_bytes.to_string());
    line("final bytes per payload byte (all)", &|r| format!("{:.2}", r.after.final_bytes as f64 / payload as f64));
    line("journal bytes (with unmount)", &|r| r.after.journal_bytes.to_string());
    line("  descriptor blocks", &|r| r.c.descriptor.blocks.to_string());
    line("  commit blocks", &|r| r.c.commit.blocks.to_string());
    line("  revoke blocks", &|r| r.c.revoke.blocks.to_string());
    line("  multiwrite blocks", &|r| r.c.multiwrite.blocks.to_string());
    line("  journaled data blocks", &|r| r.c.journal_data.blocks.to_string());
    line("  journaled metadata blocks", &|r| r.c.journal_meta.blocks.to_string());
    line("  final data blocks", &|r| r.c.final_data.blocks.to_string());
    line("  final metadata blocks", &|r| r.c.final_meta.blocks.to_string());
    line("commits", &|r| r.c.commits.to_string());
    line("syncs", &|r| r.c.syncs.to_string());
    line("syncs per commit", &|r| format!("{:.1}", r.c.syncs_per_commit));
    line("journal blocks per commit", &|r| format!("{:.1}", r.c.journal_blocks_per_commit));
    line("records per commit", &|r| format!("{:.1}", r.c.records_per_commit));
    line("record payload bytes", &|r| r.c.record_bytes.to_string());
    line("multiwrite fill", &|r| format!("{:.2}", r.c.multiwrite_fill));
    line("sync latency p50 (us)", &|r| format!("{:.0}", r.c.sync_latency.p50_us));
    line("sync latency p99 (us)", &|r| format!("{:.0}", r.c.sync_latency.p99_us));
    line("appends per second", &|r| format!("{:.0}", appends / r.wall_s));
}

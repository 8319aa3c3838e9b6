//! The demo: N concurrent writers, each appending fixed-size records to its own file and
//! syncing after every record, once per content policy on a fresh image file; the counters
//! side by side.

use clap::Args;
use okeanos::{Counters, DataMode, MkfsOptions, MountOptions, Okeanos};
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
    /// Record size in bytes.
    #[arg(long, default_value = "128")]
    size: usize,
    /// Policies to run, comma-separated.
    #[arg(long, default_value = "writeback,ordered,data")]
    modes: String,
    /// Directory for the image files (default: a temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Use fdatasync (default) or fsync.
    #[arg(long, default_value = "fdatasync")]
    sync: String,
}

struct Row {
    mode: DataMode,
    /// Counters when the writers finished.
    c: Counters,
    /// Counters after unmount (which commits and checkpoints everything).
    after: Counters,
    wall_s: f64,
}

pub fn run(a: DemoArgs) -> Result<ExitCode, String> {
    let modes: Vec<DataMode> = a.modes.split(',').map(|m| m.trim().parse()).collect::<Result<_, _>>()?;
    if a.writers == 0 || a.records == 0 || a.size == 0 {
        return Err("writers, records and size must be positive".into());
    }
    let fsync = match a.sync.as_str() {
        "fsync" => true,
        "fdatasync" => false,
        s => return Err(format!("--sync {s}: use fsync or fdatasync")),
    };
    let tmp = tempdir(a.dir.clone())?;
    let payload = (a.writers * a.records * a.size) as u64;
    let image_bytes = (payload * 3 + (a.writers as u64) * 64 * 1024).max(512 << 20);
    let mut rows = Vec::new();
    for mode in modes {
        let path = tmp.join(format!("demo-{mode}.okfs"));
        let _ = std::fs::remove_file(&path);
        Okeanos::mkfs_file(&path, image_bytes, &MkfsOptions::default()).map_err(|e| e.to_string())?;
        let fs = Okeanos::open(&path, MountOptions::default().data(mode)).map_err(|e| e.to_string())?;
        eprintln!("{mode}: {} writers x {} records of {} bytes ...", a.writers, a.records, a.size);
        let t0 = std::time::Instant::now();
        let barrier = Arc::new(Barrier::new(a.writers));
        let threads: Vec<_> = (0..a.writers)
            .map(|w| {
                let fs = fs.clone();
                let barrier = barrier.clone();
                let (records, size) = (a.records, a.size);
                std::thread::spawn(move || -> Result<(), String> {
                    let f = fs.create_file(&format!("/stream-{w:05}")).map_err(|e| e.to_string())?;
                    let rec = vec![b'a' + (w % 26) as u8; size];
                    barrier.wait();
                    for _ in 0..records {
                        f.append(&rec).map_err(|e| e.to_string())?;
                        if fsync { f.fsync() } else { f.fdatasync() }.map_err(|e| e.to_string())?;
                    }
                    Ok(())
                })
            })
            .collect();
        for t in threads {
            t.join().map_err(|_| "a writer panicked".to_string())??;
        }
        let wall_s = t0.elapsed().as_secs_f64();
        let during = fs.counters();
        let probe = fs.clone();
        fs.unmount().map_err(|e| e.to_string())?;
        let after = probe.counters();
        let _ = std::fs::remove_file(&path);
        rows.push(Row { mode, c: during, after, wall_s });
    }
    print_table(&rows, payload, a.size);
    Ok(ExitCode::SUCCESS)
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
    line("", &|r| r.mode.to_string());
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
    line("  journaled data blocks", &|r| r.c.journal_data.blocks.to_string());
    line("  journaled metadata blocks", &|r| r.c.journal_meta.blocks.to_string());
    line("  final data blocks", &|r| r.c.final_data.blocks.to_string());
    line("  final metadata blocks", &|r| r.c.final_meta.blocks.to_string());
    line("commits", &|r| r.c.commits.to_string());
    line("syncs", &|r| r.c.syncs.to_string());
    line("syncs per commit", &|r| format!("{:.1}", r.c.syncs_per_commit));
    line("journal blocks per commit", &|r| format!("{:.1}", r.c.journal_blocks_per_commit));
    line("sync latency p50 (us)", &|r| format!("{:.0}", r.c.sync_latency.p50_us));
    line("sync latency p99 (us)", &|r| format!("{:.0}", r.c.sync_latency.p99_us));
    line("appends per second", &|r| format!("{:.0}", appends / r.wall_s));
}

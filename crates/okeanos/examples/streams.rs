//! Many streams of small synchronous writes through the library: each thread appends records
//! to its own file and fdatasyncs after each one; the counters show the commits they shared.
//!
//!     cargo run --release -p okeanos --example streams -- [data|ordered|writeback] [writers]

use okeanos::{DataMode, MkfsOptions, MountOptions, Okeanos};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mode: DataMode = args.next().unwrap_or_else(|| "data".into()).parse()?;
    let writers: usize = args.next().unwrap_or_else(|| "32".into()).parse()?;
    let dir = std::env::temp_dir().join(format!("okeanos-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let image = dir.join("streams.okfs");
    Okeanos::mkfs_file(&image, 256 << 20, &MkfsOptions { journal_blocks: 8192, ..Default::default() })?;
    let fs = Okeanos::open(&image, MountOptions::default().data(mode))?;
    fs.mkdir_path("/sensors")?;
    std::thread::scope(|s| {
        for w in 0..writers {
            let fs = fs.clone();
            s.spawn(move || {
                let f = fs.create_file(&format!("/sensors/{w}.log")).expect("create");
                for k in 0..100 {
                    f.append(format!("sensor={w} seq={k} value={}\n", k * w % 97).as_bytes()).expect("append");
                    f.fdatasync().expect("fdatasync");
                }
            });
        }
    });
    let c = fs.counters();
    println!(
        "{mode}: {} syncs in {} commits ({:.1} per commit); {} journal bytes for {} payload bytes; sync p50 {:.0} us, p99 {:.0} us",
        c.syncs, c.commits, c.syncs_per_commit, c.journal_bytes, c.payload_bytes, c.sync_latency.p50_us, c.sync_latency.p99_us
    );
    println!("{}", String::from_utf8_lossy(&fs.read(fs.resolve("/sensors/7.log")?, 0, 80)?));
    fs.unmount()?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

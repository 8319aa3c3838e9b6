//! The README's library example: open the image, or make it the first time; append a record
//! to a log, or create the log the first time; sync; print the counters. Run it twice:
//!
//!     cargo run -p okeanos --example readme -- /tmp/img.okfs

use okeanos::{DataMode, MkfsOptions, MountOptions, Okeanos};
use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let img = std::env::args().nth(1).unwrap_or_else(|| "img.okfs".into());
    run(Path::new(&img))?;
    Ok(())
}

/// The example itself, callable from a test.
pub fn run(img: &Path) -> Result<okeanos::Counters, Box<dyn std::error::Error>> {
    if !img.exists() {
        Okeanos::mkfs_file(img, 1 << 30, &MkfsOptions::default())?;
    }
    let fs = Okeanos::open(img, MountOptions::default().data(DataMode::Data))?;
    let log = match fs.open_file("/tenant-7.log") {
        Ok(f) => f,
        Err(okeanos::FsError::NotFound) => fs.create_file("/tenant-7.log")?,
        Err(e) => return Err(e.into()),
    };
    log.append(b"record\n")?;
    log.fdatasync()?; // durable when this returns
    let counters = fs.counters(); // bytes by block kind, commits, syncs, latency histogram
    println!("{} commits, {} syncs", counters.commits, counters.syncs);
    drop(log);
    fs.unmount()?;
    Ok(counters)
}

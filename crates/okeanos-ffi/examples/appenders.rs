//! The C test program's `bench` mode (bindings/c/tests/test_okeanos.c) written against the Rust
//! library, so that the C ABI's cost is measured against the same workload:
//! THREADS threads append 128-byte records to files of their own with an fdatasync after each,
//! for SECONDS (scripts/bench-bindings.sh, docs/BENCHMARKS.md).
//!
//!     cargo run --example appenders -p okeanos-ffi -- IMG OPTIONS THREADS SECONDS

use engine::{MountOptions, Okeanos};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 5 {
        eprintln!("usage: appenders IMG OPTIONS THREADS SECONDS");
        std::process::exit(2);
    }
    let opts = MountOptions::parse(&a[2]).unwrap_or_else(|e| panic!("{e}"));
    let n: usize = a[3].parse().expect("THREADS");
    let secs: f64 = a[4].parse().expect("SECONDS");
    let fs = Okeanos::open(a[1].as_ref(), opts).unwrap_or_else(|e| panic!("{e}"));
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let threads: Vec<_> = (0..n)
        .map(|i| {
            let (fs, stop) = (fs.clone(), stop.clone());
            std::thread::spawn(move || {
                let f = fs.open_path(&format!("/t{i}.log"), true, false, false).unwrap();
                let mut rec = vec![b'a' + (i % 26) as u8; 128];
                rec[127] = b'\n';
                let mut k = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    f.append(&rec).unwrap();
                    f.fdatasync().unwrap();
                    k += 1;
                }
                k
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    let total: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let el = t0.elapsed().as_secs_f64();
    fs.unmount().unwrap();
    println!("{{\"target\": \"Rust library\", \"threads\": {n}, \"syncs\": {total}, \"seconds\": {el:.3}, \"syncs_per_sec\": {:.1}}}", total as f64 / el);
}

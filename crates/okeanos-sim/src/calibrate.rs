//! The manylogs paper's opening measurement (section I): "24 and 56 random 4KB IOPS can
//! degrade disk optimal bandwidth by 25% and 53%". On a disk model alone, without a file
//! system: a sequential reader issuing `request`-byte reads one after another (the kernel's
//! largest request), beside random 4 KiB I/Os (reads or writes) at a fixed rate, at offsets
//! drawn uniformly over the disk. The reader's bandwidth beside them over its bandwidth alone
//! says what the model makes a random I/O cost: the calibration of every manylogs figure.

use super::rng::Rng;
use okeanos::models::{self, Op};
use std::time::Duration;

#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    pub model: String,
    pub iops: u64,
    pub write: bool,
    pub alone_bps: f64,
    pub shared_bps: f64,
    /// Mean latency of the random I/Os (queueing behind the reader included).
    pub random_mean_ns: u64,
}

/// The reader's bytes moved in `duration`, with random 4 KiB I/Os at `iops` beside it (none
/// when 0), and the random I/Os' mean latency.
fn measure(model: &str, iops: u64, write: bool, request: u64, duration: Duration, seed: u64) -> Result<(u64, u64), String> {
    let mut m = models::preset(model)?;
    let capacity = m.capacity();
    let end = duration.as_nanos() as u64;
    let interval = if iops == 0 { u64::MAX } else { 1_000_000_000 / iops };
    let mut rng = Rng::new(seed);
    // The reader streams through the first quarter of the disk from its middle zone's start.
    let (from, span) = (capacity / 4 / request * request, (capacity / 4).max(request) / request * request);
    let (mut next_read, mut read_pos, mut moved) = (0u64, 0u64, 0u64);
    let (mut next_rand, mut rand_lat, mut rand_n) = (interval / 2, 0u64, 0u64);
    loop {
        let t = next_read.min(next_rand);
        if t >= end {
            break;
        }
        if next_rand <= next_read {
            let at = rng.below(capacity / 4096) * 4096;
            let done = m.submit(next_rand, if write { Op::Write } else { Op::Read }, at, 4096);
            rand_lat += done - next_rand;
            rand_n += 1;
            next_rand = next_rand.saturating_add(interval);
        } else {
            let done = m.submit(next_read, Op::Read, from + read_pos % span, request);
            read_pos += request;
            if done <= end {
                moved += request;
            }
            next_read = done;
        }
    }
    Ok((moved, if rand_n == 0 { 0 } else { rand_lat / rand_n }))
}

pub fn run(model: &str, iops: u64, write: bool, request: u64, duration: Duration, seed: u64) -> Result<Outcome, String> {
    if request < 4096 || duration.is_zero() {
        return Err("calibrate: the reader's request is at least 4 KiB and the duration positive".into());
    }
    let (alone, _) = measure(model, 0, write, request, duration, seed)?;
    let (shared, random_mean_ns) = measure(model, iops, write, request, duration, seed)?;
    let secs = duration.as_secs_f64();
    Ok(Outcome { model: model.to_string(), iops, write, alone_bps: alone as f64 / secs, shared_bps: shared as f64 / secs, random_mean_ns })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model charges a random I/O: more of them cost the reader more, none cost nothing.
    #[test]
    fn random_ios_cost_the_reader_more_as_they_grow() {
        let d = Duration::from_secs(5);
        let none = run("cheetah15k5-146", 0, false, 512 << 10, d, 1).unwrap();
        assert_eq!(none.shared_bps, none.alone_bps);
        let few = run("cheetah15k5-146", 24, false, 512 << 10, d, 1).unwrap();
        let more = run("cheetah15k5-146", 56, false, 512 << 10, d, 1).unwrap();
        assert!(few.shared_bps < few.alone_bps * 0.95, "{few:?}");
        assert!(more.shared_bps < few.shared_bps * 0.9, "{few:?} {more:?}");
        assert!(few.random_mean_ns > 1_000_000, "a random I/O on a disk takes milliseconds: {few:?}");
    }
}

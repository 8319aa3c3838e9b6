//! Replaying a block trace open-loop in virtual time: each I/O arrives at its trace time and
//! its latency is from arrival to completion on the disk model, queueing included (the disk
//! serves requests in arrival order). Schemes:
//!
//! - `nologging`: the trace as is, on the disk (the paper's NoLogging);
//! - `mlb-32`, `mlb-256`: the real [`MlbDevice`] (LoggedWriteSize 32 or 256 KiB, 100 MB groups
//!   with 10 MB logs, as §V-A) over the disk: every I/O it makes for a request (the logged
//!   record, a read from a log, a log swap or checkpoint when a log is full) is timed on the
//!   model from the request's arrival, so a log swap shows in the latency of the write that
//!   needed it (the paper swaps in idle periods; this is the pessimistic side);
//! - `slsmr`, `mlsmr`: the shingled-disk models of [`okeanos::models::smr`].
//!
//! The disk is the paper's, a Constellation ES.3 of 1 TB with its write cache off (every write
//! completes on the medium, §V-B).

use super::TraceIo;
use okeanos::device::{Device, DeviceError, DeviceStats, MlbDevice, MlbGeometry};
use okeanos::models::hdd::{Hdd, HddParams};
use okeanos::models::smr::{Smr, SmrParams};
use okeanos::models::{DiskModel, Op};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// How long the disk must have had nothing to do before MLB does idle work.
pub const IDLE_NS: u64 = 50_000_000;

/// The schemes `okeanos sim trace --schemes` takes.
pub const SCHEMES: [&str; 5] = ["nologging", "mlb-32", "mlb-256", "slsmr", "mlsmr"];

/// A disk that keeps only the sectors written with something other than zeros (trace replay
/// writes zeros; MLB's record headers and map are what it keeps) and times every I/O on a
/// model from the arrival of the request being served.
struct TimedStore {
    len: u64,
    sectors: Mutex<HashMap<u64, Box<[u8; 512]>>>,
    model: Mutex<Box<dyn DiskModel>>,
    arrival: AtomicU64,
    done: AtomicU64,
    timing: AtomicBool,
}

impl TimedStore {
    fn tick(&self, op: Op, offset: u64, len: u64) {
        if self.timing.load(Ordering::Relaxed) {
            let d = self.model.lock().unwrap().submit(self.arrival.load(Ordering::Relaxed), op, offset, len);
            self.done.fetch_max(d, Ordering::Relaxed);
        }
    }

    /// Starts serving a request that arrived at `at`.
    fn begin(&self, at: u64) {
        self.arrival.store(at, Ordering::Relaxed);
        self.done.store(at, Ordering::Relaxed);
    }
}

impl Device for TimedStore {
    fn name(&self) -> String {
        "replay".into()
    }
    fn len_bytes(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        let s = self.sectors.lock().unwrap();
        for (i, chunk) in buf.chunks_mut(512).enumerate() {
            match s.get(&(offset / 512 + i as u64)) {
                Some(d) => chunk.copy_from_slice(&d[..chunk.len()]),
                None => chunk.fill(0),
            }
        }
        drop(s);
        self.tick(Op::Read, offset, buf.len() as u64);
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        let mut s = self.sectors.lock().unwrap();
        for (i, chunk) in data.chunks(512).enumerate() {
            let k = offset / 512 + i as u64;
            if chunk.iter().all(|&b| b == 0) {
                s.remove(&k);
            } else {
                let mut b = Box::new([0u8; 512]);
                b[..chunk.len()].copy_from_slice(chunk);
                s.insert(k, b);
            }
        }
        drop(s);
        self.tick(Op::Write, offset, data.len() as u64);
        Ok(())
    }
    fn flush(&self) -> Result<(), DeviceError> {
        self.tick(Op::Flush, 0, 0);
        Ok(())
    }
    fn counters(&self) -> DeviceStats {
        DeviceStats::default()
    }
    fn seeks(&self) -> Option<bool> {
        Some(true)
    }
}

/// Latency summary in microseconds.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Latency {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// One scheme's replay of one trace.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SchemeRun {
    pub scheme: String,
    pub workload: String,
    pub requests: u64,
    pub writes: u64,
    pub latency_us: Latency,
    /// Sorted latencies (ns), for percentiles, speed-ups and CDFs; not in the JSON.
    #[serde(skip)]
    pub sorted_ns: Vec<u64>,
    /// MLB: writes logged, log swaps, logs checkpointed when full; SMR: band cleanings too.
    pub logged_writes: u64,
    pub log_swaps: u64,
    /// MLB: of the swaps, those done in idle gaps between requests.
    pub idle_swaps: u64,
    pub checkpoints: u64,
    pub band_cleanings: u64,
    /// Blocks logged at the end, and (MLB) the map's size in bytes (the MTL table, §VI).
    pub mapped_blocks: u64,
    pub table_bytes: u64,
    /// MLB with a final checkpoint: how long copying every logged block home took (Fig. 7a).
    pub checkpoint_s: Option<f64>,
    pub duration_s: f64,
}

impl SchemeRun {
    /// The latency at percentile `p` (0..=100), in ns.
    pub fn percentile(&self, p: f64) -> u64 {
        percentile(&self.sorted_ns, p)
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn summarize(mut lat: Vec<u64>) -> (Latency, Vec<u64>) {
    lat.sort_unstable();
    let us = |ns: u64| ns as f64 / 1000.0;
    let mean = if lat.is_empty() { 0.0 } else { lat.iter().map(|&n| n as f64).sum::<f64>() / lat.len() as f64 / 1000.0 };
    let l = Latency {
        mean,
        p50: us(percentile(&lat, 50.0)),
        p90: us(percentile(&lat, 90.0)),
        p95: us(percentile(&lat, 95.0)),
        p99: us(percentile(&lat, 99.0)),
        p999: us(percentile(&lat, 99.9)),
        max: us(lat.last().copied().unwrap_or(0)),
    };
    (l, lat)
}

/// The disk every scheme runs on.
pub fn disk() -> HddParams {
    HddParams::constellation_es3()
}

/// The MLB geometry of §V-A with a given LoggedWriteSize.
pub fn mlb_geometry(logged_write_bytes: u64) -> MlbGeometry {
    MlbGeometry { group_bytes: 100 << 20, log_bytes: 10 << 20, logged_write_bytes }
}

/// Bytes of the address space every scheme can serve: the MLB export of the disk (the
/// smallest of them), so that one trace replays unchanged under each.
pub fn replay_bytes() -> u64 {
    let sb = okeanos::format::mlb::MlbSuper::plan(disk().capacity, 25_600, 2_560, 64, [0; 16]).expect("the paper's geometry fits its disk");
    sb.user_bytes
}

/// Replays `trace` under `scheme`; with `checkpoint`, MLB then copies every logged block home,
/// and the shingled disks move every logged block into its band, timed.
pub fn replay(trace: &[TraceIo], workload: &str, scheme: &str, checkpoint: bool) -> Result<SchemeRun, String> {
    let mut lat = Vec::with_capacity(trace.len());
    let writes = trace.iter().filter(|io| io.write).count() as u64;
    let end = trace.last().map_or(0, |io| io.at_ns);
    let mut run = SchemeRun {
        scheme: scheme.to_string(),
        workload: workload.to_string(),
        requests: trace.len() as u64,
        writes,
        latency_us: Latency::default(),
        sorted_ns: Vec::new(),
        logged_writes: 0,
        log_swaps: 0,
        idle_swaps: 0,
        checkpoints: 0,
        band_cleanings: 0,
        mapped_blocks: 0,
        table_bytes: 0,
        checkpoint_s: None,
        duration_s: end as f64 / 1e9,
    };
    match scheme {
        "nologging" | "slsmr" | "mlsmr" => {
            let mut smr = match scheme {
                "slsmr" => Some(Smr::single_log(disk(), SmrParams::default())),
                "mlsmr" => Some(Smr::many_logs(disk(), SmrParams::default())),
                _ => None,
            };
            let mut hdd = Hdd::new(disk());
            for io in trace {
                let op = if io.write { Op::Write } else { Op::Read };
                let done = match &mut smr {
                    Some(m) => m.submit(io.at_ns, op, io.offset, io.len),
                    None => hdd.submit(io.at_ns, op, io.offset, io.len),
                };
                lat.push(done - io.at_ns);
            }
            if let Some(m) = &mut smr {
                run.logged_writes = m.stats.logged_writes;
                run.log_swaps = m.stats.log_swaps;
                run.idle_swaps = m.stats.idle_swaps;
                run.band_cleanings = m.stats.band_cleanings;
                run.mapped_blocks = m.mapped_blocks() as u64;
                if checkpoint {
                    let start = end.max(lat.iter().zip(trace).map(|(l, io)| io.at_ns + l).max().unwrap_or(0));
                    run.checkpoint_s = Some((m.checkpoint_all(start) - start) as f64 / 1e9);
                }
            }
        }
        "mlb-32" | "mlb-256" => {
            let logged = if scheme == "mlb-32" { 32 << 10 } else { 256 << 10 };
            let store = Arc::new(TimedStore {
                len: disk().capacity,
                sectors: Mutex::new(HashMap::new()),
                model: Mutex::new(Box::new(Hdd::new(disk()))),
                arrival: AtomicU64::new(0),
                done: AtomicU64::new(0),
                timing: AtomicBool::new(false),
            });
            MlbDevice::create(store.as_ref(), mlb_geometry(logged)).map_err(|e| e.to_string())?;
            let dev = MlbDevice::open(store.clone()).map_err(|e| e.to_string())?;
            store.timing.store(true, Ordering::Relaxed);
            let size = dev.len_bytes();
            let mut buf = Vec::new();
            // When the disk is done with everything and the next request is at least IDLE
            // away, the device gets idle work (log swaps, §III-G); a request that arrives
            // while it runs waits for it, as a disk cannot revoke a submitted I/O.
            let mut busy_until = 0u64;
            for io in trace {
                if io.offset + io.len > size {
                    return Err(format!("an I/O at byte {} of {} bytes is past the MLB export ({size} bytes)", io.offset, io.len));
                }
                let mut t = busy_until + IDLE_NS;
                while t <= io.at_ns {
                    store.begin(t);
                    if !dev.idle_work().map_err(|e| e.to_string())? {
                        break;
                    }
                    busy_until = store.done.load(Ordering::Relaxed);
                    t = busy_until + IDLE_NS;
                }
                store.begin(io.at_ns);
                buf.resize(io.len as usize, 0);
                if io.write {
                    buf.fill(0);
                    dev.write_at(io.offset, &buf).map_err(|e| e.to_string())?;
                } else {
                    dev.read_at(io.offset, &mut buf).map_err(|e| e.to_string())?;
                }
                let done = store.done.load(Ordering::Relaxed);
                busy_until = busy_until.max(done);
                lat.push(done - io.at_ns);
            }
            let st = dev.stats();
            run.logged_writes = st.logged_writes;
            run.log_swaps = st.log_swaps;
            run.idle_swaps = st.idle_swaps;
            run.checkpoints = st.checkpoints;
            run.mapped_blocks = st.mapped_blocks;
            run.table_bytes = st.table_bytes;
            if checkpoint {
                let start = store.done.load(Ordering::Relaxed).max(end);
                store.begin(start);
                dev.checkpoint_all().map_err(|e| e.to_string())?;
                run.checkpoint_s = Some((store.done.load(Ordering::Relaxed) - start) as f64 / 1e9);
            }
        }
        other => return Err(format!("unknown scheme {other:?}: {}", SCHEMES.join(", "))),
    }
    let (l, sorted) = summarize(lat);
    run.latency_us = l;
    run.sorted_ns = sorted;
    Ok(run)
}

/// Speed-up of `x` over `base` at each percentile 1..=99 (base latency / x latency), and their
/// mean: the paper's "average speed-up", §V-B.
pub fn speedups(base: &SchemeRun, x: &SchemeRun) -> (Vec<(u32, f64)>, f64) {
    let v: Vec<(u32, f64)> = (1..=99).map(|p| (p, base.percentile(p as f64).max(1) as f64 / x.percentile(p as f64).max(1) as f64)).collect();
    let mean = v.iter().map(|(_, s)| s).sum::<f64>() / v.len() as f64;
    (v, mean)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_writes_far_from_home_are_faster_logged_and_reads_of_them_come_back() {
        // A reader in tenant 0's region and a writer of 4 KiB blocks in tenant 4's: with MLB
        // the writes go to the log beside the reader, with no logging each is a long seek.
        let fifth = replay_bytes() / 5 / 4096 * 4096;
        let mut t = Vec::new();
        for k in 0..400u64 {
            t.push(TraceIo { at_ns: k * 40_000_000, write: false, offset: (k % 50) * (1 << 20), len: 65536 });
            t.push(TraceIo { at_ns: k * 40_000_000 + 20_000_000, write: true, offset: 4 * fifth + (k % 64) * 4096 * 97, len: 4096 });
        }
        let none = replay(&t, "test", "nologging", false).unwrap();
        let mlb = replay(&t, "test", "mlb-256", true).unwrap();
        assert_eq!(mlb.logged_writes, 400);
        assert!(mlb.latency_us.mean * 1.5 < none.latency_us.mean, "MLB {:?} against no logging {:?}", mlb.latency_us, none.latency_us);
        assert!(mlb.checkpoint_s.unwrap() > 0.0 && mlb.mapped_blocks == 64);
        let (_, mean) = speedups(&none, &mlb);
        assert!(mean > 1.0);
        let sl = replay(&t, "test", "slsmr", false).unwrap();
        let ml = replay(&t, "test", "mlsmr", false).unwrap();
        assert!(ml.latency_us.mean < sl.latency_us.mean, "MLSMR {:?} against SLSMR {:?}", ml.latency_us, sl.latency_us);
        assert!(replay(&t, "test", "raid", false).is_err());
    }
}

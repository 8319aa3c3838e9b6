//! Synthetic stand-ins for the Manylogs paper's traces, which cannot be fetched here: the ten
//! Microsoft production-server traces T1-T10 (Table Ia, from the SNIA IOTTA repository) and the
//! five 5-minute mixes W1-W5 built from them (Table Ib).
//!
//! Each Ti is a generator with the properties that matter to logging: the share of reads, the
//! mix of write sizes (small ones, which MLB logs, and large ones, which it does not), read
//! sizes, a request rate with bursts, the span of addresses it touches, how much of it is hot,
//! and how often a request continues the previous one. The values are stand-ins chosen from
//! what each server does (a mail server writes small blocks, a build server writes in bursts,
//! a release server reads large files); they are not measured from the real traces, and
//! docs/SIMULATION.md says so beside every result. A mix gives each of its five traces its own
//! fifth of the disk (tenants), and its windows: "most-write" doubles a trace's write rate,
//! "most-read" its read rate, "random" takes it as it is. The rates are low enough that no
//! logging does not overload the disk (the paper re-rated its mixes likewise).

use super::TraceIo;
use crate::rng::Rng;

#[derive(Debug, Clone, Copy)]
pub struct TraceSpec {
    pub name: &'static str,
    pub label: &'static str,
    pub what: &'static str,
    /// Share of requests that read.
    pub read_share: f64,
    /// Requests per second, on average over bursts.
    pub iops: f64,
    /// Shares of writes of at most 32 KiB and of 32 to 256 KiB (the rest are larger, to 1 MiB).
    pub small_writes: f64,
    pub medium_writes: f64,
    /// Bytes of address space it touches, and the share of requests to its hot tenth.
    pub span: u64,
    pub hot_share: f64,
    /// Share of requests that continue where the previous one of the same kind ended.
    pub sequential: f64,
}

const GB: u64 = 1 << 30;

/// T1-T10, the paper's Table Ia, with stand-in properties (see the module's documentation).
pub const TRACES: [TraceSpec; 10] = [
    TraceSpec { name: "t1", label: "LM-TBE", what: "Live maps back-end server", read_share: 0.78, iops: 4.0, small_writes: 0.70, medium_writes: 0.25, span: 120 * GB, hot_share: 0.6, sequential: 0.2 },
    TraceSpec { name: "t2", label: "DAP-DS", what: "Caching tier for payload server", read_share: 0.56, iops: 3.5, small_writes: 0.80, medium_writes: 0.15, span: 40 * GB, hot_share: 0.7, sequential: 0.1 },
    TraceSpec { name: "t3", label: "DAP-PS", what: "Payload server for ad selection", read_share: 0.64, iops: 3.0, small_writes: 0.60, medium_writes: 0.30, span: 80 * GB, hot_share: 0.5, sequential: 0.3 },
    TraceSpec { name: "t4", label: "Exch", what: "Microsoft Exchange mail server", read_share: 0.38, iops: 4.5, small_writes: 0.85, medium_writes: 0.13, span: 120 * GB, hot_share: 0.6, sequential: 0.1 },
    TraceSpec { name: "t5", label: "CFS", what: "MSN metadata server", read_share: 0.70, iops: 3.5, small_writes: 0.80, medium_writes: 0.18, span: 30 * GB, hot_share: 0.7, sequential: 0.1 },
    TraceSpec { name: "t6", label: "BEFS", what: "MSN back-end server", read_share: 0.45, iops: 4.0, small_writes: 0.75, medium_writes: 0.20, span: 100 * GB, hot_share: 0.5, sequential: 0.2 },
    TraceSpec { name: "t7", label: "WBS", what: "Windows build server", read_share: 0.33, iops: 4.0, small_writes: 0.60, medium_writes: 0.30, span: 60 * GB, hot_share: 0.6, sequential: 0.3 },
    TraceSpec { name: "t8", label: "DTRS", what: "Development tools release server", read_share: 0.80, iops: 2.5, small_writes: 0.50, medium_writes: 0.30, span: 100 * GB, hot_share: 0.4, sequential: 0.4 },
    TraceSpec { name: "t9", label: "RAD-AS", what: "RADIUS authentication server", read_share: 0.10, iops: 3.5, small_writes: 0.90, medium_writes: 0.09, span: 10 * GB, hot_share: 0.8, sequential: 0.1 },
    TraceSpec { name: "t10", label: "RAD-BE", what: "SQL server backend", read_share: 0.55, iops: 3.5, small_writes: 0.85, medium_writes: 0.12, span: 60 * GB, hot_share: 0.6, sequential: 0.2 },
];

/// Which window of a trace a mix takes (Table Ib).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    MostWrite,
    MostRead,
    Random,
}

/// W1-W5, Table Ib: five (trace, window) tenants each. W1's "5 most-read (T1 x5)" is read as
/// four more T1 windows, so that every mix has five tenants.
pub fn mix(name: &str) -> Option<[(usize, Window); 5]> {
    use Window::*;
    Some(match name {
        "w1" => [(6, MostWrite), (0, MostRead), (0, MostRead), (0, MostRead), (0, MostRead)],
        "w2" => [(0, MostRead), (6, MostRead), (7, MostRead), (8, MostRead), (9, MostRead)],
        "w3" => [(0, MostRead), (1, Random), (2, Random), (4, Random), (5, Random)],
        "w4" => [(6, MostWrite), (2, MostRead), (3, MostRead), (4, MostRead), (5, MostRead)],
        "w5" => [(0, MostRead), (1, Random), (3, Random), (5, Random), (7, Random)],
        _ => return None,
    })
}

/// The I/Os of one tenant: trace `spec` in window `w`, for `secs` seconds, in the region of
/// `region` bytes at `base`.
fn tenant(spec: &TraceSpec, w: Window, secs: u64, base: u64, region: u64, rng: &mut Rng) -> Vec<TraceIo> {
    let (mut reads, mut writes) = (spec.iops * spec.read_share, spec.iops * (1.0 - spec.read_share));
    match w {
        Window::MostWrite => writes *= 2.0,
        Window::MostRead => reads *= 2.0,
        Window::Random => {}
    }
    let rate = reads + writes;
    let read_share = reads / rate;
    let span = spec.span.min(region) / 4096 * 4096;
    let hot = (span / 10).max(4096);
    let mut out = Vec::new();
    let mut last_end = [base, base];
    let uniform = |rng: &mut Rng| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    for s in 0..secs {
        // Bursts: a fifth of the seconds at three times the rate, the rest at half.
        let r = if rng.chance(0.2) { rate * 3.0 } else { rate * 0.5 };
        let mut t = 0.0;
        loop {
            t += -(1.0 - uniform(rng)).ln() / r;
            if t >= 1.0 {
                break;
            }
            let write = !rng.chance(read_share);
            let blocks = if !write {
                1 + rng.below(16)
            } else {
                let u = uniform(rng);
                if u < spec.small_writes {
                    1 + rng.below(8)
                } else if u < spec.small_writes + spec.medium_writes {
                    9 + rng.below(56)
                } else {
                    65 + rng.below(192)
                }
            };
            let len = blocks * 4096;
            let k = write as usize;
            let offset = if rng.chance(spec.sequential) && last_end[k] + len <= base + span {
                last_end[k]
            } else if rng.chance(spec.hot_share) {
                base + rng.below((hot.saturating_sub(len) / 4096).max(1)) * 4096
            } else {
                base + rng.below((span.saturating_sub(len) / 4096).max(1)) * 4096
            };
            last_end[k] = offset + len;
            out.push(TraceIo { at_ns: s * 1_000_000_000 + (t * 1e9) as u64, write, offset, len });
        }
    }
    out
}

/// A named synthetic trace on a device of `device_bytes`: a mix `w1`..`w5` (five tenants, each
/// in its fifth) or a single trace `t1`..`t10` in its busiest-write window over the whole
/// device, `secs` long.
pub fn generate(name: &str, secs: u64, device_bytes: u64, seed: u64) -> Result<Vec<TraceIo>, String> {
    let rng = Rng::new(seed);
    let mut out = if let Some(m) = mix(name) {
        let region = device_bytes / 5 / 4096 * 4096;
        let mut all = Vec::new();
        for (i, (t, w)) in m.iter().enumerate() {
            all.extend(tenant(&TRACES[*t], *w, secs, i as u64 * region, region, &mut rng.fork(i as u64)));
        }
        all
    } else if let Some(spec) = TRACES.iter().find(|s| s.name == name) {
        tenant(spec, Window::MostWrite, secs, 0, device_bytes / 4096 * 4096, &mut rng.fork(0))
    } else {
        return Err(format!("unknown workload {name:?}: w1..w5 (the paper's mixes) or t1..t10 (its traces)"));
    };
    out.sort_by_key(|io| io.at_ns);
    Ok(out)
}

/// One line per workload name: what it stands for.
pub fn describe(name: &str) -> String {
    if let Some(m) = mix(name) {
        let parts: Vec<String> = m
            .iter()
            .map(|(t, w)| {
                let w = match w {
                    Window::MostWrite => "most-write",
                    Window::MostRead => "most-read",
                    Window::Random => "random",
                };
                format!("{} {} ({})", w, TRACES[*t].name.to_uppercase(), TRACES[*t].label)
            })
            .collect();
        return format!("{}: {}", name.to_uppercase(), parts.join(", "));
    }
    match TRACES.iter().find(|s| s.name == name) {
        Some(s) => format!("{} {}: {} (stand-in: {:.0}% reads, {} IOPS, {:.0}% of writes at most 32 KiB)", s.name.to_uppercase(), s.label, s.what, s.read_share * 100.0, s.iops, s.small_writes * 100.0),
        None => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_traces_have_the_properties_they_are_given() {
        let t = generate("t9", 600, 1 << 40, 1).unwrap();
        let writes = t.iter().filter(|io| io.write).count() as f64 / t.len() as f64;
        assert!(writes > 0.85, "RAD-AS in its most-write window writes nearly everything: {writes}");
        assert!(t.windows(2).all(|w| w[0].at_ns <= w[1].at_ns));
        let rate = t.len() as f64 / 600.0;
        assert!((4.0..10.0).contains(&rate), "about {} per second: {rate}", 3.5 * 1.9);
        let w = generate("w3", 300, 1 << 40, 2).unwrap();
        let fifth = (1u64 << 40) / 5;
        for k in 0..5u64 {
            assert!(w.iter().any(|io| io.offset / fifth == k), "tenant {k} has its fifth");
        }
        assert!(w.iter().all(|io| io.offset % 4096 == 0 && io.offset + io.len <= 1 << 40));
        assert_eq!(generate("w3", 300, 1 << 40, 2).unwrap(), w, "a seed gives the same trace");
        assert!(generate("w9", 1, 1 << 40, 1).is_err());
    }
}

//! Drive-managed shingled disks (SMR), the Manylogs paper's §III-I.3 and §V-C: a shingled
//! surface cannot be overwritten in place, only a whole band (15 to 40 MB) rewritten, so every
//! write is first logged somewhere that can take it, and moved into its band later (band
//! cleaning). Two designs, over the same mechanics ([`Hdd`]):
//!
//! - [`Smr::single_log`] (SLSMR, the commodity design the paper compares against): one
//!   persistent cache in the outer tracks (20 GB) absorbs every write, sequentially. A write far
//!   from the outer tracks costs a seek there; a read of a cached block a seek back.
//! - [`Smr::many_logs`] (MLSMR): one surface of the drive is not shingled and holds a log per
//!   group; a write goes to the log at the radius where the arm already is, at the cost of a
//!   head switch and its settle (tens to hundreds of microseconds, not a seek). A full log is
//!   swapped with the emptiest one (a sequential read and write of the log); when none has room
//!   its bands are cleaned.
//!
//! Reads of a block still in a log or the cache come from there; others from the band. Band
//! cleaning reads the band and the block copies that belong to it and rewrites the band. The
//! write cache is off (the paper's setting): a write completes on the medium. The models keep
//! a map of logged 4 KiB blocks and no data.

use super::hdd::{Hdd, HddParams};
use super::{DiskModel, Op};
use std::collections::{HashMap, HashSet};

const BLOCK: u64 = 4096;

#[derive(Debug, Clone)]
pub struct SmrParams {
    pub band_bytes: u64,
    /// SLSMR: the persistent cache in the outer tracks.
    pub cache_bytes: u64,
    /// MLSMR: a log per this many bytes of the address space, and its size.
    pub group_bytes: u64,
    pub log_bytes: u64,
    /// MLSMR: a head switch to the non-shingled surface and its settle.
    pub settle_ns: u64,
    /// MLSMR: after the drive has been idle this long, it swaps the log at the head once it is
    /// over half full (§III-G's idle-period swaps, as MLB's `idle_work`); 0: never.
    pub idle_ns: u64,
}

impl Default for SmrParams {
    /// 40 MB bands (the top of the paper's 15-40 MB: reading and rewriting one then takes
    /// 0.5-1 s, near its 0.6-1.6 s per band) and a 20 GB cache (the paper's 20-25 GB); for
    /// MLSMR the MLB proportions (100 MB groups, 10 MB logs) and a 100 µs settle.
    fn default() -> Self {
        SmrParams { band_bytes: 40 << 20, cache_bytes: 20 << 30, group_bytes: 100 << 20, log_bytes: 10 << 20, settle_ns: 100_000, idle_ns: 50_000_000 }
    }
}

/// What an SMR model did (the paper counts log swaps, §V-C).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SmrStats {
    pub logged_writes: u64,
    pub cache_reads: u64,
    pub band_cleanings: u64,
    /// Time spent cleaning bands, in all.
    pub cleaning_ns: u64,
    pub log_swaps: u64,
    /// Of the swaps, those done while the drive was idle.
    pub idle_swaps: u64,
}

#[derive(Debug, PartialEq, Eq)]
enum Kind {
    SingleLog,
    ManyLogs,
}

/// Where a logged block is: the cache (offset in it) or a log (its number).
#[derive(Debug, Clone, Copy)]
enum At {
    Cache(u64),
    Log(u32),
}

pub struct Smr {
    kind: Kind,
    hdd: Hdd,
    p: SmrParams,
    /// Logged 4 KiB blocks of the address space.
    map: HashMap<u64, At>,
    /// Blocks logged per band, for cleaning.
    bands: HashMap<u64, HashSet<u64>>,
    /// SLSMR: bytes appended to the cache since it was last emptied.
    cache_used: u64,
    /// MLSMR: bytes in each log.
    log_used: Vec<u64>,
    name: String,
    pub stats: SmrStats,
}

impl Smr {
    fn new(kind: Kind, disk: HddParams, p: SmrParams) -> Smr {
        let logs = if kind == Kind::ManyLogs { disk.capacity.div_ceil(p.group_bytes) as usize } else { 0 };
        let name = format!("{}-{}", if kind == Kind::SingleLog { "slsmr" } else { "mlsmr" }, disk.name);
        Smr { kind, hdd: Hdd::new(disk), p, map: HashMap::new(), bands: HashMap::new(), cache_used: 0, log_used: vec![0; logs], name, stats: SmrStats::default() }
    }

    pub fn single_log(disk: HddParams, p: SmrParams) -> Smr {
        Smr::new(Kind::SingleLog, disk, p)
    }

    pub fn many_logs(disk: HddParams, p: SmrParams) -> Smr {
        Smr::new(Kind::ManyLogs, disk, p)
    }

    pub fn mapped_blocks(&self) -> usize {
        self.map.len()
    }

    /// The shingled-area offset of address `offset` (SLSMR keeps the outer tracks for its
    /// cache, so the address space starts after it).
    fn band_offset(&self, offset: u64) -> u64 {
        match self.kind {
            Kind::SingleLog => self.p.cache_bytes + offset % (self.hdd.params().capacity - self.p.cache_bytes),
            Kind::ManyLogs => offset % self.hdd.params().capacity,
        }
    }

    /// Rewrites every band with logged blocks in `which` (all when `None`), from `at`.
    fn clean(&mut self, at: u64, which: Option<&HashSet<u64>>) -> u64 {
        let mut bands: Vec<u64> = self.bands.keys().copied().filter(|b| which.is_none_or(|w| w.contains(b))).collect();
        bands.sort_unstable();
        let mut t = at;
        for band in bands {
            let blocks = self.bands.remove(&band).unwrap_or_default();
            // The block copies: one read each, from wherever they are logged.
            for &b in &blocks {
                if let Some(loc) = self.map.remove(&b) {
                    t = match loc {
                        At::Cache(off) => self.hdd.mechanical(t, false, off, BLOCK),
                        At::Log(g) => self.hdd.mechanical(t, false, g as u64 * self.p.group_bytes, BLOCK),
                    };
                    if let At::Log(g) = loc {
                        self.log_used[g as usize] = self.log_used[g as usize].saturating_sub(BLOCK);
                    }
                }
            }
            let start = self.band_offset(band * self.p.band_bytes);
            t = self.hdd.mechanical(t, false, start, self.p.band_bytes);
            t = self.hdd.mechanical(t, true, start, self.p.band_bytes);
            self.stats.band_cleanings += 1;
        }
        self.stats.cleaning_ns += t - at;
        t
    }

    /// Moves every logged block into its band (the checkpoint an SMR drive owes its logs,
    /// Fig. 8), from `at`; returns when it is done.
    pub fn checkpoint_all(&mut self, at: u64) -> u64 {
        let t = self.clean(at, None);
        self.cache_used = 0;
        self.log_used.iter_mut().for_each(|u| *u = 0);
        t
    }

    fn note(&mut self, offset: u64, len: u64, at: At) {
        for b in offset / BLOCK..(offset + len).div_ceil(BLOCK) {
            if let Some(At::Log(g)) = self.map.insert(b, at) {
                self.log_used[g as usize] = self.log_used[g as usize].saturating_sub(BLOCK);
            }
            self.bands.entry(b * BLOCK / self.p.band_bytes).or_default().insert(b);
        }
    }

    fn write(&mut self, now: u64, offset: u64, len: u64) -> u64 {
        self.stats.logged_writes += 1;
        match self.kind {
            Kind::SingleLog => {
                let mut t = now;
                if self.cache_used + len > self.p.cache_bytes {
                    t = self.clean(t, None);
                    self.cache_used = 0;
                }
                let at = self.cache_used;
                self.cache_used += len;
                let done = self.hdd.mechanical(t + self.hdd.params().overhead_ns, true, at, len);
                self.note(offset, len, At::Cache(at));
                done
            }
            Kind::ManyLogs => {
                let g = (self.hdd.head_offset() / self.p.group_bytes).min(self.log_used.len() as u64 - 1) as usize;
                let mut t = now;
                if self.log_used[g] + len > self.p.log_bytes {
                    t = self.free_log(t, g);
                }
                self.log_used[g] += len;
                let done = self.hdd.at_head(t, len, self.p.settle_ns);
                self.note(offset, len, At::Log(g as u32));
                done
            }
        }
    }

    /// MLSMR: empties full log `g` into the emptiest log with room (a sequential read of the
    /// one and write of the other, on the non-shingled surface), else cleans its bands.
    fn free_log(&mut self, at: u64, g: usize) -> u64 {
        let used = self.log_used[g];
        let cold = (0..self.log_used.len()).filter(|&c| c != g && self.log_used[c] + used <= self.p.log_bytes).min_by_key(|&c| self.log_used[c]);
        match cold {
            Some(c) => {
                let t = self.hdd.mechanical(at, false, g as u64 * self.p.group_bytes, used);
                let t = self.hdd.mechanical(t, true, c as u64 * self.p.group_bytes, used);
                for loc in self.map.values_mut() {
                    if matches!(loc, At::Log(x) if *x as usize == g) {
                        *loc = At::Log(c as u32);
                    }
                }
                self.log_used[c] += used;
                self.log_used[g] = 0;
                self.stats.log_swaps += 1;
                t
            }
            None => {
                let bands: HashSet<u64> = self.map.iter().filter(|(_, l)| matches!(l, At::Log(x) if *x as usize == g)).map(|(&b, _)| b * BLOCK / self.p.band_bytes).collect();
                let t = self.clean(at, Some(&bands));
                self.log_used[g] = 0;
                t
            }
        }
    }

    fn read(&mut self, now: u64, offset: u64, len: u64) -> u64 {
        let mut t = now + self.hdd.params().overhead_ns;
        let mut done = t;
        let mut b = offset / BLOCK;
        let end = (offset + len).div_ceil(BLOCK);
        while b < end {
            // A run of blocks that are all in the band, or one logged block.
            match self.map.get(&b).copied() {
                Some(loc) => {
                    self.stats.cache_reads += 1;
                    done = match loc {
                        At::Cache(off) => self.hdd.mechanical(t, false, off, BLOCK),
                        At::Log(g) => self.hdd.mechanical(t, false, g as u64 * self.p.group_bytes, BLOCK) + self.p.settle_ns,
                    };
                    b += 1;
                }
                None => {
                    let mut e = b + 1;
                    while e < end && !self.map.contains_key(&e) {
                        e += 1;
                    }
                    done = self.hdd.mechanical(t, false, self.band_offset(b * BLOCK), (e - b) * BLOCK);
                    b = e;
                }
            }
            t = done;
        }
        done
    }
}

impl Smr {
    /// MLSMR's idle-period swap in the gap before a request that arrives at `now`: once the
    /// drive has been idle for `idle_ns`, if the log at the head is over half full, it moves
    /// into the emptiest log and the arm returns to where it was (the reads it serves are
    /// there). One swap per gap; a swap under way when the request arrives delays it.
    fn idle_swap(&mut self, now: u64) {
        if self.kind != Kind::ManyLogs || self.p.idle_ns == 0 {
            return;
        }
        let start = self.hdd.free_at() + self.p.idle_ns;
        if start > now {
            return;
        }
        let at = self.hdd.head_offset();
        let g = (at / self.p.group_bytes).min(self.log_used.len() as u64 - 1) as usize;
        let used = self.log_used[g];
        if used * 2 <= self.p.log_bytes || !(0..self.log_used.len()).any(|c| c != g && self.log_used[c] + used <= self.p.log_bytes) {
            return;
        }
        let t = self.free_log(start, g);
        self.hdd.mechanical(t, false, at / 512 * 512, 512);
        self.stats.idle_swaps += 1;
    }
}

impl DiskModel for Smr {
    fn submit(&mut self, now: u64, op: Op, offset: u64, len: u64) -> u64 {
        self.idle_swap(now);
        match op {
            Op::Read => self.read(now, offset, len.max(1)),
            Op::Write => self.write(now, offset, len.max(1)),
            Op::Flush => now + self.hdd.params().overhead_ns,
        }
    }

    fn describe(&self) -> String {
        match self.kind {
            Kind::SingleLog => format!("{}: drive-managed SMR, {} MB bands, a {} GB persistent cache in the outer tracks", self.name, self.p.band_bytes >> 20, self.p.cache_bytes >> 30),
            Kind::ManyLogs => format!(
                "{}: SMR with a non-shingled surface of logs ({} MB per {} MB group, {} µs settle), {} MB bands",
                self.name,
                self.p.log_bytes >> 20,
                self.p.group_bytes >> 20,
                self.p.settle_ns / 1000,
                self.p.band_bytes >> 20
            ),
        }
    }

    fn capacity(&self) -> u64 {
        match self.kind {
            Kind::SingleLog => self.hdd.params().capacity - self.p.cache_bytes,
            Kind::ManyLogs => self.hdd.params().capacity,
        }
    }

    fn seeks(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_far_from_the_outer_tracks_costs_slsmr_a_seek_and_mlsmr_a_settle() {
        let disk = HddParams::constellation_es3;
        let mut sl = Smr::single_log(disk(), SmrParams::default());
        let mut ml = Smr::many_logs(disk(), SmrParams::default());
        // Both read near the middle of the disk, then write 4 KiB there.
        let mid = 122_070_312 * 4096;
        let t0 = sl.submit(0, Op::Read, mid, 4096);
        let t1 = ml.submit(0, Op::Read, mid, 4096);
        let w_sl = sl.submit(t0, Op::Write, mid + 8192, 4096) - t0;
        let w_ml = ml.submit(t1, Op::Write, mid + 8192, 4096) - t1;
        assert!(w_ml < 300_000, "MLSMR: a settle and a transfer, {w_ml} ns");
        assert!(w_sl > 3_000_000, "SLSMR: a seek to the outer tracks, {w_sl} ns");
        // A read of the block just written comes from the log or cache.
        sl.submit(w_sl + t0, Op::Read, mid + 8192, 4096);
        assert_eq!(sl.stats.cache_reads, 1);
    }

    #[test]
    fn a_full_log_is_swapped_and_a_full_cache_cleaned() {
        let p = SmrParams { cache_bytes: 1 << 20, log_bytes: 64 << 10, group_bytes: 100 << 20, ..Default::default() };
        let mut sl = Smr::single_log(HddParams::constellation_es3(), p.clone());
        let mut t = 0;
        for k in 0..300u64 {
            t = sl.submit(t, Op::Write, k * (50 << 20), 4096);
        }
        assert!(sl.stats.band_cleanings > 0);
        let per_band = sl.stats.cleaning_ns as f64 / sl.stats.band_cleanings as f64 / 1e9;
        assert!((0.4..1.7).contains(&per_band), "the paper's 0.6-1.6 s per band: {per_band} s");
        let mut ml = Smr::many_logs(HddParams::constellation_es3(), p);
        let mut t = 0;
        for k in 0..40u64 {
            t = ml.submit(t, Op::Write, k * 4096, 4096);
        }
        assert!(ml.stats.log_swaps > 0, "{:?}", ml.stats);
    }
}

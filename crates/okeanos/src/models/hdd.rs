//! A spinning disk: seek time as a function of distance, rotational position, a zoned
//! transfer rate, one request at a time in submission order, and an optional volatile write
//! cache that a flush drains.
//!
//! Seek curve (Ruemmler and Wilkes, "An introduction to disk drive modeling", IEEE Computer
//! 1994): `a + b*sqrt(d)` for short seeks, where the arm accelerates and never coasts, and
//! `c + e*d` for long ones. The long segment passes through the average seek at a third of a
//! full stroke (the mean distance of uniformly random seeks) and the full-stroke time; the
//! short segment joins it at a tenth of a full stroke and gives the track-to-track time at one
//! cylinder. Writes add the difference between the average write and read seek (head
//! settling).
//!
//! Zoning: the media rate falls linearly from the outer to the inner cylinders; outer
//! cylinders hold proportionally more bytes, so offsets map to cylinders through the integral
//! of that rate. The platter angle of an offset is its position on a track of the rate at its
//! cylinder, so back-to-back sequential requests find their sector under the head and a
//! request that arrives a little late waits almost a whole revolution.
//!
//! Write cache: a write is acknowledged once it crossed the bus into the cache (waiting for
//! room when the cache is full) and is destaged in arrival order by the mechanism; a flush
//! completes when everything cached is on the platter. Real drives reorder their destaging;
//! destaging in order is pessimistic for scattered writes that the host did not sort (ours
//! are: a plan's writes are in block order).

use super::{DiskModel, Op};
use std::collections::VecDeque;

#[derive(Debug, Clone)]
pub struct HddParams {
    pub name: &'static str,
    pub rpm: u32,
    pub capacity: u64,
    pub cylinders: u64,
    pub track_to_track_ns: u64,
    pub avg_read_seek_ns: u64,
    pub avg_write_seek_ns: u64,
    pub full_stroke_ns: u64,
    /// Media rate at the outer and at the inner edge, bytes per second.
    pub outer_bps: f64,
    pub inner_bps: f64,
    /// Host interface rate (bytes per second) and per-command overhead.
    pub bus_bps: f64,
    pub overhead_ns: u64,
    /// Volatile write cache in bytes (0: write-through).
    pub cache_bytes: u64,
}

impl HddParams {
    /// After the Okeanos paper's disk, a Seagate Cheetah 15K.5 (ST373455, 73 GB), from the
    /// Seagate product manual: 15,000 rpm (2.0 ms average rotational latency), 3.5 ms average
    /// read seek and 4.0 ms write seek, 0.2 ms track to track, 73 to 125 MB/s sustained,
    /// 16 MiB cache, Ultra320 SCSI. The manual gives no full-stroke time for the 73 GB model;
    /// 7.4 ms is that of the family's larger models. Cylinder count: 72,000 (assumed; only the
    /// track-to-track time depends on it).
    pub fn cheetah15k() -> Self {
        HddParams {
            name: "cheetah15k",
            rpm: 15_000,
            capacity: 73_400_000_000,
            cylinders: 72_000,
            track_to_track_ns: 200_000,
            avg_read_seek_ns: 3_500_000,
            avg_write_seek_ns: 4_000_000,
            full_stroke_ns: 7_400_000,
            outer_bps: 125e6,
            inner_bps: 73e6,
            bus_bps: 320e6,
            overhead_ns: 50_000,
            cache_bytes: 16 << 20,
        }
    }

    /// The manylogs paper's disk (section V): a Seagate Cheetah 15K.5 of 146 GB (ST3146855),
    /// with its write cache off as the paper ran it, so that a write completes on the platter.
    /// Same family as [`HddParams::cheetah15k`]: the manual gives the same seek times and
    /// media rates, and 7.4 ms full stroke for this model. The cylinder count is assumed the
    /// same (more surfaces hold the larger capacity).
    pub fn cheetah15k5_146() -> Self {
        HddParams { name: "cheetah15k5-146", capacity: 146_800_000_000, cache_bytes: 0, ..HddParams::cheetah15k() }
    }

    /// The disk of the manylogs paper's MLB and MLSMR experiments (§V-B): a Seagate
    /// Constellation ES.3 of 1 TB, 7,200 rpm, with its write cache disabled as the paper ran
    /// it. The data sheet gives 175 MB/s sustained (outer zone) and 8.5 ms average read seek;
    /// the inner-zone rate (half the outer), write seek (9.5 ms), track to track (1 ms), full
    /// stroke (17 ms) and cylinder count (200,000) are those of [`HddParams::sata7200`]'s class,
    /// assumed.
    pub fn constellation_es3() -> Self {
        HddParams { name: "constellation-es3", capacity: 1_000_000_000_000, cylinders: 200_000, outer_bps: 175e6, inner_bps: 87.5e6, bus_bps: 600e6, cache_bytes: 0, ..HddParams::sata7200() }
    }

    /// A generic 7,200 rpm SATA disk (for example a Seagate Barracuda 7200.12, 500 GB):
    /// 8.5 ms average seek (9.5 ms write), 4.16 ms average rotational latency, about 100 to
    /// 150 MB/s, 1 ms track to track, 17 ms full stroke, 16 MiB cache, SATA 3 Gb/s.
    pub fn sata7200() -> Self {
        HddParams {
            name: "sata7200",
            rpm: 7_200,
            capacity: 500_000_000_000,
            cylinders: 150_000,
            track_to_track_ns: 1_000_000,
            avg_read_seek_ns: 8_500_000,
            avg_write_seek_ns: 9_500_000,
            full_stroke_ns: 17_000_000,
            outer_bps: 150e6,
            inner_bps: 100e6,
            bus_bps: 300e6,
            overhead_ns: 50_000,
            cache_bytes: 16 << 20,
        }
    }

    pub fn rev_ns(&self) -> u64 {
        60_000_000_000 / self.rpm as u64
    }
}

#[derive(Debug)]
pub struct Hdd {
    p: HddParams,
    /// Where the arm is (cylinder) and when the mechanism is next free.
    head: u64,
    mech_free: u64,
    /// Where the last request ended: a request continuing it that arrives within a command's
    /// turnaround streams on without a seek or a missed revolution.
    last_end: u64,
    /// Cached writes not yet on the platter: (destaged at, bytes).
    cached: VecDeque<(u64, u64)>,
    dirty_until: u64,
    // Seek-curve coefficients (ns; distances in cylinders).
    short_a: f64,
    short_b: f64,
    long_c: f64,
    long_e: f64,
    knee: f64,
}

impl Hdd {
    pub fn new(p: HddParams) -> Self {
        assert!(p.cylinders > 10 && p.outer_bps >= p.inner_bps && p.inner_bps > 0.0);
        let full = p.cylinders as f64;
        let third = full / 3.0;
        let long_e = (p.full_stroke_ns as f64 - p.avg_read_seek_ns as f64) / (full - third);
        let long_c = p.avg_read_seek_ns as f64 - long_e * third;
        let knee = full / 10.0;
        let at_knee = long_c + long_e * knee;
        let short_b = (at_knee - p.track_to_track_ns as f64) / (knee.sqrt() - 1.0);
        let short_a = p.track_to_track_ns as f64 - short_b;
        Hdd { p, head: 0, mech_free: 0, last_end: u64::MAX, cached: VecDeque::new(), dirty_until: 0, short_a, short_b, long_c, long_e, knee }
    }

    pub fn params(&self) -> &HddParams {
        &self.p
    }

    /// Seek time over `d` cylinders, reads (writes add the settle difference).
    pub fn seek_ns(&self, d: u64) -> u64 {
        if d == 0 {
            return 0;
        }
        let d = d as f64;
        let t = if d < self.knee { self.short_a + self.short_b * d.sqrt() } else { self.long_c + self.long_e * d };
        t.max(0.0) as u64
    }

    /// Radial position (0 outer .. 1 inner) of a byte offset, by the zoned capacity integral.
    fn radius(&self, offset: u64) -> f64 {
        let f = (offset % self.p.capacity) as f64 / self.p.capacity as f64;
        let (ro, k) = (self.p.outer_bps, self.p.outer_bps - self.p.inner_bps);
        if k <= 0.0 {
            return f;
        }
        let norm = ro - k / 2.0;
        ((ro - (ro * ro - 2.0 * k * f * norm).max(0.0).sqrt()) / k).clamp(0.0, 1.0)
    }

    fn rate(&self, x: f64) -> f64 {
        self.p.outer_bps - (self.p.outer_bps - self.p.inner_bps) * x
    }

    /// The byte offset (in this disk's address space) under the head now: the start of its
    /// cylinder's share of the capacity, by the same zoned integral.
    pub fn head_offset(&self) -> u64 {
        let x = self.head as f64 / (self.p.cylinders - 1) as f64;
        let (ro, k) = (self.p.outer_bps, self.p.outer_bps - self.p.inner_bps);
        let norm = ro - k / 2.0;
        let f = if k <= 0.0 { x } else { (ro * x - k * x * x / 2.0) / norm };
        ((f.clamp(0.0, 1.0)) * self.p.capacity as f64) as u64
    }

    /// When the mechanism is next free (the end of the last request it took).
    pub fn free_at(&self) -> u64 {
        self.mech_free
    }

    /// A transfer on another surface at the radius where the arm is now (a head switch and
    /// its settle, no seek, no wait for the sector: a log takes the write wherever the head
    /// lands on its track), starting no earlier than `at`. The arm stays where it is.
    pub fn at_head(&mut self, at: u64, len: u64, settle_ns: u64) -> u64 {
        let x = self.head as f64 / (self.p.cylinders - 1) as f64;
        let start = (at + self.p.overhead_ns).max(self.mech_free);
        let done = start + settle_ns + (len as f64 / self.rate(x) * 1e9) as u64;
        self.mech_free = done;
        self.last_end = u64::MAX;
        done
    }

    /// Runs one request on the mechanism starting no earlier than `at` (seek, rotation,
    /// transfer); returns its end. For a model built over this disk, as `submit` is for a
    /// request that arrives at the drive.
    pub fn mechanical(&mut self, at: u64, write: bool, offset: u64, len: u64) -> u64 {
        let x = self.radius(offset);
        let cyl = ((x * (self.p.cylinders - 1) as f64) as u64).min(self.p.cylinders - 1);
        let start = at.max(self.mech_free);
        let turnaround = self.p.overhead_ns + (len as f64 / self.p.bus_bps * 1e9) as u64 + 50_000;
        if offset == self.last_end && at <= self.mech_free + turnaround {
            let done = start + (len as f64 / self.rate(x) * 1e9) as u64;
            self.mech_free = done;
            self.last_end = offset + len;
            return done;
        }
        self.last_end = offset + len;
        let dist = cyl.abs_diff(self.head);
        let mut seek = self.seek_ns(dist);
        if write && dist > 0 {
            seek += self.p.avg_write_seek_ns.saturating_sub(self.p.avg_read_seek_ns);
        }
        let arrive = start + seek;
        let rev = self.p.rev_ns();
        let track_bytes = self.rate(x) * rev as f64 / 1e9;
        let target = ((offset % self.p.capacity) as f64 / track_bytes).fract();
        let angle = (arrive % rev) as f64 / rev as f64;
        let wait = ((target - angle).rem_euclid(1.0) * rev as f64) as u64;
        let transfer = (len as f64 / self.rate(x) * 1e9) as u64;
        let done = arrive + wait + transfer;
        self.head = cyl;
        self.mech_free = done;
        done
    }
}

impl DiskModel for Hdd {
    fn seeks(&self) -> bool {
        true
    }
    fn submit(&mut self, now: u64, op: Op, offset: u64, len: u64) -> u64 {
        let bus = (len as f64 / self.p.bus_bps * 1e9) as u64;
        match op {
            // The bus transfer overlaps the media transfer (the drive streams what it reads);
            // the bus is faster than the media, so the media sets the pace.
            Op::Read => {
                let start = now + self.p.overhead_ns;
                self.mechanical(start, false, offset, len).max(start + bus)
            }
            Op::Write if self.p.cache_bytes == 0 => self.mechanical(now + self.p.overhead_ns + bus, true, offset, len),
            Op::Write => {
                let mut t = now + self.p.overhead_ns;
                // Wait for room in the cache.
                loop {
                    while self.cached.front().is_some_and(|&(d, _)| d <= t) {
                        self.cached.pop_front();
                    }
                    let used: u64 = self.cached.iter().map(|&(_, b)| b).sum();
                    match self.cached.front() {
                        Some(&(d, _)) if used + len > self.p.cache_bytes => t = d,
                        _ => break,
                    }
                }
                let in_cache = t + bus;
                let destaged = self.mechanical(in_cache, true, offset, len);
                self.cached.push_back((destaged, len));
                self.dirty_until = self.dirty_until.max(destaged);
                in_cache
            }
            Op::Flush => now.max(self.dirty_until) + self.p.overhead_ns,
        }
    }

    fn describe(&self) -> String {
        let p = &self.p;
        format!(
            "{}: {} rpm, seek {:.1}/{:.1} ms avg read/write, {:.1} ms track to track, {:.0}-{:.0} MB/s, {} MiB write cache",
            p.name,
            p.rpm,
            p.avg_read_seek_ns as f64 / 1e6,
            p.avg_write_seek_ns as f64 / 1e6,
            p.track_to_track_ns as f64 / 1e6,
            p.inner_bps / 1e6,
            p.outer_bps / 1e6,
            p.cache_bytes >> 20
        )
    }

    fn capacity(&self) -> u64 {
        self.p.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seek_curve_meets_the_datasheet_points() {
        let d = Hdd::new(HddParams::cheetah15k());
        let c = d.p.cylinders;
        assert_eq!(d.seek_ns(0), 0);
        assert!((d.seek_ns(1) as i64 - 200_000).abs() < 1_000, "{}", d.seek_ns(1));
        assert!((d.seek_ns(c / 3) as i64 - 3_500_000).abs() < 1_000);
        assert!((d.seek_ns(c - 1) as i64 - 7_400_000).abs() < 1_000);
        // Monotonic, and continuous at the knee.
        let mut last = 0;
        for k in (1..c).step_by(97) {
            let s = d.seek_ns(k);
            assert!(s >= last, "seek time fell at {k}");
            last = s;
        }
    }

    #[test]
    fn random_reads_average_seek_plus_half_a_revolution() {
        let mut d = Hdd::new(HddParams::cheetah15k());
        let mut x: u64 = 12345;
        let mut t = 0;
        let n = 4000;
        let mut total = 0;
        for _ in 0..n {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let off = (x >> 11) % (d.capacity() / 4096) * 4096;
            let done = d.submit(t, Op::Read, off, 4096);
            total += done - t;
            t = done;
        }
        let avg_ms = total as f64 / n as f64 / 1e6;
        // 3.5 ms seek + 2.0 ms rotation + ~0.1 ms transfer and overhead.
        assert!((5.0..6.3).contains(&avg_ms), "average random read {avg_ms} ms");
    }

    #[test]
    fn sequential_back_to_back_writes_stream_and_late_ones_miss_a_revolution() {
        let mut p = HddParams::cheetah15k();
        p.cache_bytes = 0;
        let mut d = Hdd::new(p);
        let t0 = d.submit(0, Op::Write, 0, 4096);
        let t1 = d.submit(t0, Op::Write, 4096, 4096);
        assert!(t1 - t0 < 200_000, "back-to-back sequential write took {} ns", t1 - t0);
        let t2 = d.submit(t1 + 500_000, Op::Write, 8192, 4096);
        assert!(t2 - t1 > 3_000_000, "a late sequential write must wait for the platter: {} ns", t2 - t1);
    }

    #[test]
    fn sequential_reads_run_at_the_zoned_rate() {
        let mut d = Hdd::new(HddParams::cheetah15k());
        let mb_s = |d: &mut Hdd, start: u64| {
            let (mut t, mut off) = (d.submit(0, Op::Read, start, 1 << 20), start + (1 << 20));
            let t0 = t;
            for _ in 0..64 {
                t = d.submit(t, Op::Read, off, 1 << 20);
                off += 1 << 20;
            }
            64.0 * (1 << 20) as f64 / ((t - t0) as f64 / 1e9) / 1e6
        };
        let outer = mb_s(&mut d, 0);
        let near_end = d.capacity() - (80 << 20);
        let inner = mb_s(&mut d, near_end);
        // The media rate (125 and 73 MB/s), less a command's overhead per request.
        assert!((115.0..126.0).contains(&outer), "outer zone {outer} MB/s");
        assert!((60.0..74.0).contains(&inner), "inner zone {inner} MB/s");
    }

    #[test]
    fn the_write_cache_acknowledges_fast_and_the_flush_pays() {
        let mut d = Hdd::new(HddParams::cheetah15k());
        let ack = d.submit(0, Op::Write, 10 << 30, 4096);
        assert!(ack < 100_000);
        let f = d.submit(ack, Op::Flush, 0, 0);
        assert!(f > 1_000_000, "flush must wait for the destage: {f}");
    }
}

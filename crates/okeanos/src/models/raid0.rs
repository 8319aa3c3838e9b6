//! RAID-0: `n` disks striped in `chunk`-byte chunks (Linux md's layout: chunk k of the array is
//! chunk k / n of disk k mod n). A request is split at chunk boundaries, each piece queued on
//! its disk at the same instant, and completes when its slowest piece does (the manylogs
//! paper's RAID tail, section III-I.4); a flush drains every disk. The manylogs paper's RAID is
//! four Cheetah 15K.5 with 64 KB chunks (section V, "Hardware").

use super::{DiskModel, Op};

pub struct Raid0 {
    name: String,
    disks: Vec<Box<dyn DiskModel>>,
    chunk: u64,
}

impl Raid0 {
    pub fn new(name: &str, disks: Vec<Box<dyn DiskModel>>, chunk: u64) -> Raid0 {
        assert!(!disks.is_empty() && chunk > 0 && chunk % 512 == 0, "a RAID-0 has disks and a sector-multiple chunk");
        Raid0 { name: name.to_string(), disks, chunk }
    }

    /// Where array byte `offset` is: (disk, byte on it).
    fn locate(&self, offset: u64) -> (usize, u64) {
        let n = self.disks.len() as u64;
        let k = offset / self.chunk;
        ((k % n) as usize, (k / n) * self.chunk + offset % self.chunk)
    }
}

impl DiskModel for Raid0 {
    fn submit(&mut self, now_ns: u64, op: Op, offset: u64, len: u64) -> u64 {
        if op == Op::Flush {
            return self.disks.iter_mut().map(|d| d.submit(now_ns, Op::Flush, 0, 0)).max().unwrap_or(now_ns);
        }
        let mut done = now_ns;
        let (mut at, end) = (offset, offset + len);
        while at < end {
            let piece = (self.chunk - at % self.chunk).min(end - at);
            let (disk, on) = self.locate(at);
            done = done.max(self.disks[disk].submit(now_ns, op, on, piece));
            at += piece;
        }
        done
    }

    fn describe(&self) -> String {
        format!("{}: RAID-0 of {} disks, {} KiB chunks, each {}", self.name, self.disks.len(), self.chunk >> 10, self.disks[0].describe())
    }

    fn capacity(&self) -> u64 {
        let per = self.disks.iter().map(|d| d.capacity()).min().unwrap_or(0) / self.chunk * self.chunk;
        per * self.disks.len() as u64
    }

    fn seeks(&self) -> bool {
        self.disks.iter().any(|d| d.seeks())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::preset;

    fn raid() -> Raid0 {
        Raid0::new("raid", (0..4).map(|_| preset("cheetah15k5-146").unwrap()).collect(), 64 << 10)
    }

    #[test]
    fn chunks_go_round_the_disks() {
        let r = raid();
        assert_eq!(r.locate(0), (0, 0));
        assert_eq!(r.locate(64 << 10), (1, 0));
        assert_eq!(r.locate(3 * (64 << 10) + 5), (3, 5));
        assert_eq!(r.locate(4 * (64 << 10)), (0, 64 << 10));
        assert_eq!(r.capacity(), 4 * (preset("cheetah15k5-146").unwrap().capacity() / (64 << 10) * (64 << 10)));
    }

    /// A large sequential read moves about four times faster than on one disk; a random 4 KiB
    /// write on one disk delays a full-stripe read that needs that disk (the RAID tail).
    #[test]
    fn stripes_read_in_parallel_and_a_busy_disk_is_the_tail() {
        let mut one = preset("cheetah15k5-146").unwrap();
        let mut r = raid();
        let (mut t1, mut t4) = (0, 0);
        for k in 0..64u64 {
            t1 = one.submit(t1, Op::Read, k << 20, 1 << 20);
            t4 = r.submit(t4, Op::Read, k << 20, 1 << 20);
        }
        assert!(t4 * 3 < t1, "RAID-0 of four: {t4} ns against one disk's {t1} ns");
        let mut r = raid();
        let quiet = r.submit(0, Op::Read, 0, 256 << 10);
        let mut r = raid();
        r.submit(0, Op::Write, 50 << 30, 4096);
        let behind = r.submit(0, Op::Read, 0, 256 << 10);
        assert!(behind > quiet + 1_000_000, "a full stripe waits for its busiest disk: {behind} vs {quiet}");
    }
}

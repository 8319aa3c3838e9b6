//! A sparse in-memory device: only pages that hold something other than zeros take memory,
//! so that the simulator can format and run a whole-disk file system (a 146 GB disk) of which
//! a workload touches a few gigabytes. Every write is immediately "durable", as with
//! [`super::MemDevice`].
//!
//! It can also note every read (offset and length) for the simulator, which times the reads
//! of uncached blocks on the disk model ([`SparseDevice::take_reads`]).

use super::{check_access, Device, DeviceCounters, DeviceError, DeviceStats};
use std::collections::HashMap;
use std::sync::Mutex;

/// Bytes per stored page.
const PAGE: u64 = 4096;

pub struct SparseDevice {
    name: String,
    len: u64,
    pages: Mutex<HashMap<u64, Box<[u8]>>>,
    /// Reads since the last [`SparseDevice::take_reads`], when noted.
    reads: Mutex<Option<Vec<(u64, u64)>>>,
    /// Reads are not noted while muted (the simulator times the journal's own reads itself).
    muted: std::sync::atomic::AtomicBool,
    counters: DeviceCounters,
}

impl SparseDevice {
    pub fn new(len: u64) -> Self {
        SparseDevice { name: "sparse".into(), len, pages: Mutex::new(HashMap::new()), reads: Mutex::new(None), muted: Default::default(), counters: DeviceCounters::default() }
    }

    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }

    /// Starts noting reads (and forgets any noted before).
    pub fn note_reads(&self) {
        *self.reads.lock().unwrap_or_else(|e| e.into_inner()) = Some(Vec::new());
    }

    /// Stops (true) or resumes (false) noting reads, keeping those noted so far.
    pub fn mute(&self, muted: bool) {
        self.muted.store(muted, std::sync::atomic::Ordering::Relaxed);
    }

    /// The reads since the last call, adjacent ones merged, in order.
    pub fn take_reads(&self) -> Vec<(u64, u64)> {
        let mut g = self.reads.lock().unwrap_or_else(|e| e.into_inner());
        let Some(v) = g.as_mut() else { return Vec::new() };
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (off, len) in v.drain(..) {
            match out.last_mut() {
                Some((o, l)) if *o + *l == off => *l += len,
                _ => out.push((off, len)),
            }
        }
        out
    }

    /// Pages holding data (memory in use, in pages).
    pub fn pages(&self) -> usize {
        self.pages.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Device for SparseDevice {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn len_bytes(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        check_access(&self.name, self.len, offset, buf.len() as u64)?;
        let pages = self.pages.lock().unwrap_or_else(|e| e.into_inner());
        let mut done = 0usize;
        while done < buf.len() {
            let at = offset + done as u64;
            let (page, within) = (at / PAGE, (at % PAGE) as usize);
            let n = (PAGE as usize - within).min(buf.len() - done);
            match pages.get(&page) {
                Some(p) => buf[done..done + n].copy_from_slice(&p[within..within + n]),
                None => buf[done..done + n].fill(0),
            }
            done += n;
        }
        drop(pages);
        if !self.muted.load(std::sync::atomic::Ordering::Relaxed) {
            if let Some(v) = self.reads.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
                v.push((offset, buf.len() as u64));
            }
        }
        self.counters.on_read(buf.len());
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        check_access(&self.name, self.len, offset, data.len() as u64)?;
        let mut pages = self.pages.lock().unwrap_or_else(|e| e.into_inner());
        let mut done = 0usize;
        while done < data.len() {
            let at = offset + done as u64;
            let (page, within) = (at / PAGE, (at % PAGE) as usize);
            let n = (PAGE as usize - within).min(data.len() - done);
            let src = &data[done..done + n];
            let zero = src.iter().all(|&b| b == 0);
            match pages.get_mut(&page) {
                Some(p) => {
                    p[within..within + n].copy_from_slice(src);
                    if zero && p.iter().all(|&b| b == 0) {
                        pages.remove(&page);
                    }
                }
                None if zero => {}
                None => {
                    let mut p = vec![0u8; PAGE as usize].into_boxed_slice();
                    p[within..within + n].copy_from_slice(src);
                    pages.insert(page, p);
                }
            }
            done += n;
        }
        self.counters.on_write(data.len());
        Ok(())
    }
    fn flush(&self) -> Result<(), DeviceError> {
        self.counters.on_flush();
        Ok(())
    }
    fn short_writes(&self) -> bool {
        true
    }
    fn counters(&self) -> DeviceStats {
        self.counters.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_only_what_is_not_zero_and_reads_back_across_pages() {
        let d = SparseDevice::new(1 << 40);
        assert_eq!(d.len_bytes(), 1 << 40);
        // Sector-aligned, across three pages.
        d.write_at(5120, &[7u8; 9216]).unwrap();
        let mut b = vec![1u8; 10_240];
        d.read_at(4608, &mut b).unwrap();
        assert!(b[..512].iter().all(|&x| x == 0) && b[512..9728].iter().all(|&x| x == 7) && b[9728..].iter().all(|&x| x == 0));
        assert_eq!(d.pages(), 3);
        d.write_at(4096, &[0u8; 8192]).unwrap();
        assert_eq!(d.pages(), 1, "zeroed pages are dropped");
        d.write_at(1 << 39, &vec![0u8; 1 << 20]).unwrap();
        assert_eq!(d.pages(), 1, "zeros take no memory");
        assert!(d.write_at((1 << 40) - 512, &[1; 1024]).is_err(), "past the end is an error");
        assert!(d.write_at(100, &[1; 512]).is_err(), "unaligned is an error");
    }

    #[test]
    fn notes_reads_merged() {
        let d = SparseDevice::new(1 << 30);
        let mut b = vec![0u8; 4096];
        d.read_at(0, &mut b).unwrap();
        assert!(d.take_reads().is_empty(), "not noting yet");
        d.note_reads();
        for k in 0..4 {
            d.read_at(8192 + k * 4096, &mut b).unwrap();
        }
        d.read_at(1 << 20, &mut b).unwrap();
        assert_eq!(d.take_reads(), vec![(8192, 16384), (1 << 20, 4096)]);
        assert!(d.take_reads().is_empty());
    }
}

//! One device of a crash state, built without copying the whole device: an image that many
//! states share, with this state's own writes laid over it in 4 KiB pages.
//!
//! A crash test checks thousands of states of devices of many megabytes. Copying each device
//! and replaying every recorded write for each state was most of a crash test's time; the
//! states after one point differ only in the fates of the writes since the last flush, so
//! [`super::CrashRecorder::build_devices`] keeps the image of what they all keep and gives
//! each state a [`CrashImage`] over it. Reads and writes behave as a [`super::MemDevice`]'s
//! (the recovery under test writes to it); the shared image is never written.

use super::{check_access, Device, DeviceCounters, DeviceError, DeviceStats};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

const PAGE: usize = 4096;

pub struct CrashImage {
    base: Arc<Vec<u8>>,
    /// Pages this state (or the recovery running on it) changed, whole, by page number.
    pages: Mutex<HashMap<u64, Box<[u8]>>>,
    counters: DeviceCounters,
}

impl CrashImage {
    pub fn new(base: Arc<Vec<u8>>) -> Self {
        CrashImage { base, pages: Mutex::new(HashMap::new()), counters: DeviceCounters::default() }
    }

    fn page_range(&self, page: u64) -> std::ops::Range<usize> {
        let start = page as usize * PAGE;
        start..(start + PAGE).min(self.base.len())
    }

    /// Writes `data` at `offset` into this state's pages (no counters: building the state).
    pub(crate) fn lay(&self, offset: u64, data: &[u8]) {
        let mut pages = self.pages.lock().unwrap_or_else(|e| e.into_inner());
        let mut at = offset as usize;
        let mut rest = data;
        while !rest.is_empty() {
            let page = (at / PAGE) as u64;
            let range = self.page_range(page);
            let within = at - range.start;
            let n = rest.len().min(range.len() - within);
            let buf = pages.entry(page).or_insert_with(|| self.base[range.clone()].into());
            buf[within..within + n].copy_from_slice(&rest[..n]);
            at += n;
            rest = &rest[n..];
        }
    }

    /// The whole image, as bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = self.base.as_ref().clone();
        for (&page, data) in self.pages.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            out[self.page_range(page)].copy_from_slice(data);
        }
        out
    }
}

impl Device for CrashImage {
    fn name(&self) -> String {
        "mem".into()
    }
    fn len_bytes(&self) -> u64 {
        self.base.len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        check_access("mem", self.len_bytes(), offset, buf.len() as u64)?;
        let pages = self.pages.lock().unwrap_or_else(|e| e.into_inner());
        let mut at = offset as usize;
        let mut done = 0;
        while done < buf.len() {
            let page = (at / PAGE) as u64;
            let range = self.page_range(page);
            let within = at - range.start;
            let n = (buf.len() - done).min(range.len() - within);
            let src = match pages.get(&page) {
                Some(p) => &p[within..within + n],
                None => &self.base[at..at + n],
            };
            buf[done..done + n].copy_from_slice(src);
            at += n;
            done += n;
        }
        self.counters.on_read(buf.len());
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        check_access("mem", self.len_bytes(), offset, data.len() as u64)?;
        self.lay(offset, data);
        self.counters.on_write(data.len());
        Ok(())
    }
    fn flush(&self) -> Result<(), DeviceError> {
        self.counters.on_flush();
        Ok(())
    }
    /// As memory (a [`super::MemDevice`]), which the crash images stood in for.
    fn short_writes(&self) -> bool {
        true
    }
    fn counters(&self) -> DeviceStats {
        self.counters.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::super::crash::{test_seed, SplitMix};
    use super::super::{CrashRecorder, Device, MemDevice, SECTOR_SIZE};

    /// Every crash state's images from `build_devices` are byte for byte `build`'s, on two
    /// devices with writes of 1 to 9 sectors at random places (some across pages, some past a
    /// partial last page), flushes of either device now and then, points visited forward and
    /// then once backward (the cache rebuilt); and a state's image reads and takes writes as a
    /// MemDevice with the same bytes does.
    #[test]
    fn crash_images_are_the_bytes_build_makes() {
        let seed = test_seed(0x5eed_1234);
        let mut rng = SplitMix(seed);
        let mut rnd = move |n: u64| rng.next() % n;
        let rec = CrashRecorder::new();
        let sizes = [64 * 1024 + 1536, 32 * 1024];
        let devs: Vec<_> = sizes.iter().enumerate().map(|(i, &n)| rec.device(&format!("d{i}"), (0..n).map(|b| (b % 251) as u8).collect())).collect();
        for step in 0..400u64 {
            let d = rnd(2) as usize;
            if rnd(8) == 0 {
                devs[d].flush().unwrap();
                continue;
            }
            let sectors = 1 + rnd(9);
            let len = sectors * SECTOR_SIZE;
            let at = rnd((sizes[d] as u64 - len) / SECTOR_SIZE + 1) * SECTOR_SIZE;
            let data: Vec<u8> = (0..len).map(|b| (b as u64 ^ step) as u8).collect();
            devs[d].write_at(at, &data).unwrap();
        }
        let events = rec.event_count();
        let mut points: Vec<usize> = (0..=events).step_by(7).collect();
        points.push(3);
        let mut checked = 0;
        for &k in &points {
            for st in rec.states(k, 3, 2, k as u64) {
                let want = rec.build(&st);
                let got = rec.build_devices(&st);
                for (d, (w, g)) in want.iter().zip(&got).enumerate() {
                    assert!(g.to_bytes() == *w, "seed {seed}: device {d} differs after {k} events in state {}", st.label);
                }
                checked += 1;
            }
        }
        assert!(checked > 100, "only {checked} states");
        // Read and write as a MemDevice holding the same bytes.
        let st = rec.states(events, 1, 1, 9).pop().unwrap();
        let img = rec.build_devices(&st).remove(0);
        let mem = MemDevice::from_bytes(img.to_bytes());
        for _ in 0..200 {
            let len = (1 + rnd(12)) * SECTOR_SIZE;
            let at = rnd((sizes[0] as u64 - len) / SECTOR_SIZE + 1) * SECTOR_SIZE;
            if rnd(2) == 0 {
                let data: Vec<u8> = (0..len).map(|_| rnd(256) as u8).collect();
                img.write_at(at, &data).unwrap();
                mem.write_at(at, &data).unwrap();
            }
            let (mut a, mut b) = (vec![0; len as usize], vec![0; len as usize]);
            img.read_at(at, &mut a).unwrap();
            mem.read_at(at, &mut b).unwrap();
            assert!(a == b, "seed {seed}: a read of {len} at {at} differs");
        }
        assert!(img.to_bytes() == mem.snapshot(), "seed {seed}");
        assert!(img.read_at(sizes[0] as u64, &mut [0; 512]).is_err(), "past the end is refused");
        assert!(img.write_at(100, &[0; 512]).is_err(), "unaligned is refused");
    }
}

//! Crash recording: a device that logs every write and flush, and the construction of the crash
//! states that the crash model of docs/DESIGN.md section 3 allows.
//!
//! Several devices (the file-system device and an external journal) share one [`CrashRecorder`],
//! so the log keeps the global order of their events. A crash after event `k` leaves, on each
//! device:
//! - every write that precedes the last flush of that device among events `0..k` (durable), and
//! - any subset of the later writes to that device, each applied whole or torn at 512-byte
//!   sector boundaries (an arbitrary subset of its sectors reaches the media).
//!
//! [`TearPlan`] names the fate of each unflushed write; [`CrashRecorder::states`] enumerates a
//! bounded but systematic set of plans: all kept, all lost, each one lost alone, each one torn
//! alone, and seeded random mixtures.

use super::crash_image::CrashImage;
use super::{check_access, Device, DeviceError, DeviceStats, MemDevice, SECTOR_SIZE};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone)]
pub enum CrashEvent {
    Write { dev: usize, offset: u64, data: Arc<[u8]> },
    Flush { dev: usize },
    /// A store to NVM region `nvm` (see [`super::nvm`] for what persists when).
    NvmStore { nvm: usize, at: u64, data: Arc<[u8]> },
    /// A write-back of the cache lines covering `[at, at + len)`.
    NvmFlush { nvm: usize, at: u64, len: u64 },
    NvmFence { nvm: usize },
}

/// The fate of one unflushed write in a crash state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TearPlan {
    Keep,
    Lose,
    /// Only the sectors whose bit is set reach the media: bit i is sector i of the write, or,
    /// for a write of more than 64 sectors (a run of blocks issued as one write), the i-th of
    /// 64 equal runs of sectors.
    Torn(u64),
}

/// One crash state: the event prefix and the fate of each unflushed write after it.
#[derive(Debug, Clone)]
pub struct CrashState {
    pub after_events: usize,
    pub fates: Vec<TearPlan>,
    /// For each NVM cache line with stores not yet durable ([`CrashRecorder::nvm_pending`]),
    /// how many of them, in program order, persisted (empty: all of them).
    pub nvm: Vec<u32>,
    pub label: String,
}

#[derive(Default)]
struct Log {
    initial: Vec<Vec<u8>>,
    nvm_initial: Vec<Vec<u8>>,
    events: Vec<CrashEvent>,
}

/// One NVM cache line whose stores are not all durable after a prefix of the events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingLine {
    pub nvm: usize,
    /// Line number (byte offset / 64).
    pub line: u64,
    /// Atomic stores (aligned 8-byte words or parts of one) made to the line that are durable.
    pub durable: u32,
    /// Those made after them, not yet durable.
    pub pending: u32,
}

/// The atomic pieces of a store: `(offset, len)` within aligned 8-byte words.
fn atomic_pieces(at: u64, len: u64) -> impl Iterator<Item = (u64, u64)> {
    let w = super::nvm::ATOMIC_STORE;
    let end = at + len;
    let mut p = at;
    std::iter::from_fn(move || {
        if p >= end {
            return None;
        }
        let next = ((p / w) + 1) * w;
        let piece = (p, next.min(end) - p);
        p = next.min(end);
        Some(piece)
    })
}

/// Hashing of the crash model's (region, line) keys: a multiply and rotate (as FxHash does).
/// SipHash's defence against chosen keys buys nothing here, and hashing was a fifth of an NVM
/// crash test's time.
#[derive(Default, Clone, Copy)]
struct LineHasher(u64);

impl std::hash::Hasher for LineHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type LineMap<V> = std::collections::HashMap<(usize, u64), V, std::hash::BuildHasherDefault<LineHasher>>;

/// The shared log of all recording devices.
/// The low `bits` bits set (all 64 for 64 or more).
fn mask_of(bits: u64) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// The images every crash state after some point shares: the initial images with every write
/// before `upto` applied (see [`CrashRecorder::build_devices`]).
struct Prefix {
    upto: usize,
    images: Vec<Arc<Vec<u8>>>,
}

#[derive(Default)]
pub struct CrashRecorder {
    log: Mutex<Log>,
    prefix: Mutex<Option<Prefix>>,
}

impl CrashRecorder {
    pub fn new() -> Arc<Self> {
        Arc::new(CrashRecorder::default())
    }

    /// A new recording device whose contents start as `initial`.
    pub fn device(self: &Arc<Self>, name: &str, initial: Vec<u8>) -> CrashDevice {
        let mut log = self.lock();
        let id = log.initial.len();
        log.initial.push(initial.clone());
        CrashDevice { id, recorder: self.clone(), live: MemDevice::from_bytes(initial).named(name) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new recording NVM region whose contents start as `initial`.
    pub fn nvm(self: &Arc<Self>, name: &str, initial: Vec<u8>) -> CrashNvm {
        let mut log = self.lock();
        let id = log.nvm_initial.len();
        log.nvm_initial.push(initial.clone());
        CrashNvm { id, recorder: self.clone(), live: super::nvm::MemNvm::from_bytes(initial).named(name) }
    }

    /// The NVM lines with stores not yet durable after the first `upto` events, in (region,
    /// line) order: a store is durable once a flush of its line and a later fence followed it.
    pub fn nvm_pending(&self, upto: usize) -> Vec<PendingLine> {
        let log = self.lock();
        let mut lines: LineMap<(u32, u32, Option<u32>)> = Default::default();
        let mut flushed: Vec<(usize, u64)> = Vec::new();
        for e in &log.events[..upto] {
            match e {
                CrashEvent::NvmStore { nvm, at, data } => {
                    for (p, _) in atomic_pieces(*at, data.len() as u64) {
                        lines.entry((*nvm, p / super::nvm::CACHE_LINE)).or_default().0 += 1;
                    }
                }
                CrashEvent::NvmFlush { nvm, at, len } => {
                    let first = at / super::nvm::CACHE_LINE;
                    let last = (at + len).div_ceil(super::nvm::CACHE_LINE);
                    for l in first..last {
                        if let Some(e) = lines.get_mut(&(*nvm, l)) {
                            e.2 = Some(e.0);
                            flushed.push((*nvm, l));
                        }
                    }
                }
                CrashEvent::NvmFence { nvm } => {
                    for key in flushed.iter().filter(|k| k.0 == *nvm) {
                        if let Some(e) = lines.get_mut(key) {
                            if let Some(f) = e.2.take() {
                                e.1 = e.1.max(f);
                            }
                        }
                    }
                    flushed.retain(|k| k.0 != *nvm);
                }
                _ => {}
            }
        }
        let mut pending: Vec<PendingLine> = lines.into_iter().filter(|(_, v)| v.0 > v.1).map(|((nvm, line), v)| PendingLine { nvm, line, durable: v.1, pending: v.0 - v.1 }).collect();
        pending.sort_unstable_by_key(|p| (p.nvm, p.line));
        pending
    }

    /// The NVM images of one crash state, one per recording region.
    pub fn build_nvm(&self, state: &CrashState) -> Vec<Vec<u8>> {
        let pending = self.nvm_pending(state.after_events);
        assert!(state.nvm.is_empty() || state.nvm.len() == pending.len(), "a count for every pending NVM line");
        let mut keep: LineMap<u32> = Default::default();
        for (k, p) in pending.iter().enumerate() {
            let kept = state.nvm.get(k).copied().unwrap_or(p.pending).min(p.pending);
            keep.insert((p.nvm, p.line), p.durable + kept);
        }
        let log = self.lock();
        let mut images = log.nvm_initial.clone();
        // Stores to a line with nothing pending all persist; only pending lines are counted.
        let mut seen: LineMap<u32> = Default::default();
        for e in &log.events[..state.after_events] {
            let CrashEvent::NvmStore { nvm, at, data } = e else { continue };
            for (p, len) in atomic_pieces(*at, data.len() as u64) {
                let key = (*nvm, p / super::nvm::CACHE_LINE);
                let persists = match keep.get(&key) {
                    None => true,
                    Some(&limit) => {
                        let n = seen.entry(key).or_default();
                        *n += 1;
                        *n <= limit
                    }
                };
                if persists {
                    let src = (p - at) as usize;
                    images[*nvm][p as usize..(p + len) as usize].copy_from_slice(&data[src..src + len as usize]);
                }
            }
        }
        images
    }

    /// A bounded, systematic set of NVM fates after the first `upto` events: every pending
    /// line persisted whole, none, each line lost alone, each line cut to half its stores
    /// alone, each line persisted alone (every other lost: what a missing fence exposes), and
    /// `random` seeded mixtures of prefixes. Each is a `CrashState::nvm` vector.
    pub fn nvm_states(&self, upto: usize, single_budget: usize, random: usize, seed: u64) -> Vec<(Vec<u32>, String)> {
        let pending = self.nvm_pending(upto);
        let n = pending.len();
        let full: Vec<u32> = pending.iter().map(|p| p.pending).collect();
        let mut out = vec![(full.clone(), "nvm: every line persisted".to_string())];
        if n == 0 {
            return out;
        }
        out.push((vec![0; n], format!("nvm: {n} pending lines lost")));
        let mut rng = SplitMix(seed ^ (upto as u64).wrapping_mul(0xd1b5_4a32_d192_ed03));
        for k in 0..n.min(single_budget) {
            let mut f = full.clone();
            f[k] = 0;
            out.push((f.clone(), format!("nvm: line {} lost alone", pending[k].line)));
            if pending[k].pending > 1 {
                f[k] = pending[k].pending / 2;
                out.push((f, format!("nvm: line {} half persisted", pending[k].line)));
            }
            let mut only = vec![0; n];
            only[k] = pending[k].pending;
            out.push((only, format!("nvm: only line {} persisted", pending[k].line)));
        }
        for r in 0..random {
            let f = pending.iter().map(|p| (rng.next() % (p.pending as u64 + 1)) as u32).collect();
            out.push((f, format!("nvm: random prefixes {r}")));
        }
        out
    }

    pub fn event_count(&self) -> usize {
        self.lock().events.len()
    }

    pub fn events(&self) -> Vec<CrashEvent> {
        self.lock().events.clone()
    }

    /// Indices (into the event log) of the writes still unflushed after the first `upto` events.
    pub fn unflushed(&self, upto: usize) -> Vec<usize> {
        let log = self.lock();
        let mut last_flush = vec![None; log.initial.len()];
        for (i, e) in log.events[..upto].iter().enumerate() {
            if let CrashEvent::Flush { dev } = e {
                last_flush[*dev] = Some(i);
            }
        }
        (0..upto)
            .filter(|&i| match &log.events[i] {
                CrashEvent::Write { dev, .. } => last_flush[*dev].map_or(true, |f| i > f),
                _ => false,
            })
            .collect()
    }

    /// The device images of one crash state, one per recording device.
    pub fn build(&self, state: &CrashState) -> Vec<Vec<u8>> {
        let pending = self.unflushed(state.after_events);
        assert_eq!(pending.len(), state.fates.len(), "a fate for every unflushed write");
        let log = self.lock();
        let mut images = log.initial.clone();
        apply_fates(&log.events, 0..state.after_events, &pending, &state.fates, |dev, off, bytes| {
            let off = off as usize;
            images[dev][off..off + bytes.len()].copy_from_slice(bytes);
        });
        images
    }

    /// The device images of one crash state, the same bytes as [`CrashRecorder::build`]'s,
    /// without a copy of each whole device per state. Every write before the state's first
    /// unflushed write reaches the media in every state after this point, so those writes are
    /// applied once to a cached image, advanced as the states' points move forward (the
    /// harness visits them in order; a point before the cache rebuilds it). Each state gets a
    /// [`CrashImage`] per device: the cached image, with the fates of its own later writes
    /// laid over it in pages.
    pub fn build_devices(&self, state: &CrashState) -> Vec<Arc<CrashImage>> {
        let pending = self.unflushed(state.after_events);
        assert_eq!(pending.len(), state.fates.len(), "a fate for every unflushed write");
        let first = pending.first().copied().unwrap_or(state.after_events);
        let log = self.lock();
        let images: Vec<CrashImage> = {
            let mut cache = self.prefix.lock().unwrap_or_else(|e| e.into_inner());
            let reusable = cache.as_ref().is_some_and(|p| p.upto <= first && p.images.len() == log.initial.len());
            if !reusable {
                *cache = Some(Prefix { upto: 0, images: log.initial.iter().map(|i| Arc::new(i.clone())).collect() });
            }
            let prefix = cache.as_mut().expect("set above");
            for e in &log.events[prefix.upto..first] {
                if let CrashEvent::Write { dev, offset, data } = e {
                    // In place when no state's image still holds it (the usual case).
                    let img = Arc::make_mut(&mut prefix.images[*dev]);
                    let off = *offset as usize;
                    img[off..off + data.len()].copy_from_slice(data);
                }
            }
            prefix.upto = first;
            prefix.images.iter().map(|b| CrashImage::new(b.clone())).collect()
        };
        apply_fates(&log.events, first..state.after_events, &pending, &state.fates, |dev, off, bytes| images[dev].lay(off, bytes));
        images.into_iter().map(Arc::new).collect()
    }

    /// A bounded, systematic set of crash states after the first `upto` events: all unflushed
    /// writes kept, all lost, each lost alone, each torn alone (first half of its sectors, and a
    /// seeded random subset), and `random` seeded mixtures.
    pub fn states(&self, upto: usize, single_budget: usize, random: usize, seed: u64) -> Vec<CrashState> {
        let pending = self.unflushed(upto);
        let n = pending.len();
        let sectors: Vec<u64> = {
            let log = self.lock();
            pending
                .iter()
                .map(|&i| match &log.events[i] {
                    CrashEvent::Write { data, .. } => (data.len() as u64 / SECTOR_SIZE).min(64),
                    _ => unreachable!("only writes are pending"),
                })
                .collect()
        };
        let mut rng = SplitMix(seed ^ (upto as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mk = |fates: Vec<TearPlan>, label: String| CrashState { after_events: upto, fates, nvm: Vec::new(), label };
        let mut out = vec![mk(vec![TearPlan::Keep; n], format!("after {upto}: all kept"))];
        if n == 0 {
            return out;
        }
        out.push(mk(vec![TearPlan::Lose; n], format!("after {upto}: all {n} lost")));
        for k in 0..n.min(single_budget) {
            let mut f = vec![TearPlan::Keep; n];
            f[k] = TearPlan::Lose;
            out.push(mk(f.clone(), format!("after {upto}: write #{k} lost")));
            if sectors[k] > 1 {
                let half = mask_of(sectors[k] / 2);
                f[k] = TearPlan::Torn(half);
                out.push(mk(f.clone(), format!("after {upto}: write #{k} torn (first half)")));
                f[k] = TearPlan::Torn(rng.next() & mask_of(sectors[k]));
                out.push(mk(f, format!("after {upto}: write #{k} torn (random sectors)")));
            }
        }
        // Every unflushed write torn at once: checkpoints write many blocks in place in one
        // stage, and replay must leave each of them right whatever reached the media.
        let multi: Vec<usize> = (0..n).filter(|&k| sectors[k] > 1).collect();
        if multi.len() > 1 {
            let f = (0..n).map(|k| if sectors[k] > 1 { TearPlan::Torn(mask_of(sectors[k] / 2)) } else { TearPlan::Keep }).collect();
            out.push(mk(f, format!("after {upto}: every write torn (first half)")));
            let f = (0..n).map(|k| if sectors[k] > 1 { TearPlan::Torn(rng.next() & mask_of(sectors[k])) } else { TearPlan::Lose }).collect();
            out.push(mk(f, format!("after {upto}: every write torn (random sectors)")));
        }
        for r in 0..random {
            let fates = (0..n)
                .map(|k| match rng.next() % 3 {
                    0 => TearPlan::Keep,
                    1 => TearPlan::Lose,
                    _ => TearPlan::Torn(rng.next() & mask_of(sectors[k])),
                })
                .collect();
            out.push(mk(fates, format!("after {upto}: random mixture {r}")));
        }
        out
    }
}

/// Lays the writes among `events[range]` as a crash state leaves them: `fates[k]` is the fate
/// of the write at `pending[k]`, every other write is kept. `lay(dev, offset, bytes)` puts
/// bytes that reached the media on device `dev`.
fn apply_fates(events: &[CrashEvent], range: std::ops::Range<usize>, pending: &[usize], fates: &[TearPlan], mut lay: impl FnMut(usize, u64, &[u8])) {
    let fate_of: std::collections::HashMap<usize, TearPlan> = pending.iter().copied().zip(fates.iter().copied()).collect();
    let start = range.start;
    for (i, e) in events[range].iter().enumerate() {
        let CrashEvent::Write { dev, offset, data } = e else { continue };
        match fate_of.get(&(start + i)).copied().unwrap_or(TearPlan::Keep) {
            TearPlan::Keep => lay(*dev, *offset, data),
            TearPlan::Lose => {}
            TearPlan::Torn(mask) => {
                // Sector s reaches the media when bit s / per_bit is set (64 equal runs for a
                // write of more than 64 sectors).
                let sectors = data.len() / SECTOR_SIZE as usize;
                let per_bit = sectors.div_ceil(64).max(1);
                for s in (0..sectors).filter(|s| mask & (1 << (s / per_bit)) != 0) {
                    let r = s * SECTOR_SIZE as usize..(s + 1) * SECTOR_SIZE as usize;
                    lay(*dev, *offset + r.start as u64, &data[r]);
                }
            }
        }
    }
}

/// The seed of a randomized unit test: `OKEANOS_TEST_SEED` or `default`, printed so that a
/// failure can be run again.
#[cfg(test)]
pub(crate) fn test_seed(default: u64) -> u64 {
    let seed = std::env::var("OKEANOS_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(default);
    eprintln!("seed {seed} (OKEANOS_TEST_SEED)");
    seed
}

/// A tiny deterministic generator (SplitMix64) so crash enumeration needs no dependency.
pub(crate) struct SplitMix(pub u64);
impl SplitMix {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// A device that records into a [`CrashRecorder`] and serves reads from its live image.
pub struct CrashDevice {
    id: usize,
    recorder: Arc<CrashRecorder>,
    live: MemDevice,
}

impl Device for CrashDevice {
    fn name(&self) -> String {
        self.live.name()
    }
    fn len_bytes(&self) -> u64 {
        self.live.len_bytes()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.live.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        check_access(&self.name(), self.len_bytes(), offset, data.len() as u64)?;
        // Hold the log while writing through so the live image and the log agree on order.
        let mut log = self.recorder.lock();
        self.live.write_at(offset, data)?;
        log.events.push(CrashEvent::Write { dev: self.id, offset, data: data.into() });
        Ok(())
    }
    fn flush(&self) -> Result<(), DeviceError> {
        let mut log = self.recorder.lock();
        self.live.flush()?;
        log.events.push(CrashEvent::Flush { dev: self.id });
        Ok(())
    }
    fn short_writes(&self) -> bool {
        true
    }
    fn counters(&self) -> DeviceStats {
        self.live.counters()
    }
}

/// An NVM region that records into a [`CrashRecorder`] and serves loads from its live image.
pub struct CrashNvm {
    id: usize,
    recorder: Arc<CrashRecorder>,
    live: super::nvm::MemNvm,
}

impl super::nvm::Nvm for CrashNvm {
    fn name(&self) -> String {
        self.live.name()
    }
    fn len(&self) -> u64 {
        self.live.len()
    }
    fn store(&self, at: u64, data: &[u8]) -> Result<(), DeviceError> {
        let mut log = self.recorder.lock();
        self.live.store(at, data)?;
        log.events.push(CrashEvent::NvmStore { nvm: self.id, at, data: data.into() });
        Ok(())
    }
    fn flush(&self, at: u64, len: u64) -> Result<(), DeviceError> {
        let mut log = self.recorder.lock();
        self.live.flush(at, len)?;
        log.events.push(CrashEvent::NvmFlush { nvm: self.id, at, len });
        Ok(())
    }
    fn fence(&self) -> Result<(), DeviceError> {
        let mut log = self.recorder.lock();
        self.live.fence()?;
        log.events.push(CrashEvent::NvmFence { nvm: self.id });
        Ok(())
    }
    fn load(&self, at: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.live.load(at, buf)
    }
    fn durability(&self) -> super::nvm::Durability {
        super::nvm::Durability::PowerLoss
    }
    fn counters(&self) -> super::nvm::NvmStats {
        self.live.counters()
    }
}

#[cfg(test)]
mod tests {
    use super::super::nvm::{Nvm, CACHE_LINE};
    use super::*;

    /// NVM crash images against the model written out plainly: a store's atomic pieces persist
    /// when their line was flushed and fenced after them, or when the state keeps that many of
    /// the line's pending pieces in program order. Random stores, flushes and fences over two
    /// regions; every state of every 5th point.
    #[test]
    fn nvm_images_follow_the_model() {
        let seed = test_seed(0x00c0_ffee);
        let mut rng = SplitMix(seed);
        let mut rnd = move |n: u64| rng.next() % n;
        let rec = CrashRecorder::new();
        let size = 4096u64;
        let regions: Vec<_> = (0..2).map(|i| rec.nvm(&format!("n{i}"), vec![i as u8; size as usize])).collect();
        for step in 0..300u64 {
            let r = &regions[rnd(2) as usize];
            match rnd(10) {
                0 => r.fence().unwrap(),
                1 | 2 => {
                    let at = rnd(size / CACHE_LINE) * CACHE_LINE;
                    r.flush(at, CACHE_LINE * (1 + rnd(3)).min((size - at) / CACHE_LINE)).unwrap();
                }
                _ => {
                    let len = 1 + rnd(40);
                    let at = rnd(size - len);
                    r.store(at, &vec![(step % 250) as u8 + 3; len as usize]).unwrap();
                }
            }
        }
        let events = rec.events();
        let mut checked = 0;
        for k in (0..=events.len()).step_by(5) {
            for (fates, label) in rec.nvm_states(k, 3, 2, k as u64) {
                let st = CrashState { after_events: k, fates: vec![TearPlan::Keep; rec.unflushed(k).len()], nvm: fates, label };
                let want = reference(&events[..k], &rec.nvm_pending(k), &st.nvm, size);
                assert!(rec.build_nvm(&st) == want, "seed {seed}: after {k} events, {}", st.label);
                checked += 1;
            }
        }
        assert!(checked > 100, "only {checked} states");

        // The model: per (region, line), pieces in program order; a pending line keeps its
        // durable pieces and then as many pending ones as the state says.
        fn reference(events: &[CrashEvent], pending: &[PendingLine], counts: &[u32], size: u64) -> Vec<Vec<u8>> {
            let mut images: Vec<Vec<u8>> = (0..2).map(|i| vec![i as u8; size as usize]).collect();
            let mut n: std::collections::BTreeMap<(usize, u64), u32> = Default::default();
            for e in events {
                let CrashEvent::NvmStore { nvm, at, data } = e else { continue };
                for (p, len) in atomic_pieces(*at, data.len() as u64) {
                    let key = (*nvm, p / CACHE_LINE);
                    let seen = n.entry(key).or_default();
                    let limit = pending.iter().position(|l| (l.nvm, l.line) == key).map_or(u32::MAX, |i| pending[i].durable + counts.get(i).copied().unwrap_or(pending[i].pending));
                    if *seen < limit {
                        let src = (p - at) as usize;
                        images[*nvm][p as usize..(p + len) as usize].copy_from_slice(&data[src..src + len as usize]);
                    }
                    *seen += 1;
                }
            }
            images
        }
    }
}

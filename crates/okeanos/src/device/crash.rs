//! Crash recording: a device that logs every write and flush, and the construction of the crash
//! states that the crash model of DESIGN.md section 3 allows.
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

use super::{check_access, Device, DeviceError, DeviceStats, MemDevice, SECTOR_SIZE};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone)]
pub enum CrashEvent {
    Write { dev: usize, offset: u64, data: Arc<[u8]> },
    Flush { dev: usize },
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
    pub label: String,
}

#[derive(Default)]
struct Log {
    initial: Vec<Vec<u8>>,
    events: Vec<CrashEvent>,
}

/// The shared log of all recording devices.
/// The low `bits` bits set (all 64 for 64 or more).
fn mask_of(bits: u64) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

#[derive(Default)]
pub struct CrashRecorder {
    log: Mutex<Log>,
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
                CrashEvent::Flush { .. } => false,
            })
            .collect()
    }

    /// The device images of one crash state, one per recording device.
    pub fn build(&self, state: &CrashState) -> Vec<Vec<u8>> {
        let pending = self.unflushed(state.after_events);
        assert_eq!(pending.len(), state.fates.len(), "a fate for every unflushed write");
        let log = self.lock();
        let mut images = log.initial.clone();
        let mut fate_of = std::collections::HashMap::new();
        for (k, &i) in pending.iter().enumerate() {
            fate_of.insert(i, state.fates[k]);
        }
        for (i, e) in log.events[..state.after_events].iter().enumerate() {
            let CrashEvent::Write { dev, offset, data } = e else { continue };
            let img = &mut images[*dev];
            let off = *offset as usize;
            match fate_of.get(&i).copied().unwrap_or(TearPlan::Keep) {
                TearPlan::Keep => img[off..off + data.len()].copy_from_slice(data),
                TearPlan::Lose => {}
                TearPlan::Torn(mask) => {
                    let sectors = data.len() / SECTOR_SIZE as usize;
                    let per_bit = sectors.div_ceil(64).max(1);
                    for s in 0..sectors {
                        if mask & (1 << (s / per_bit)) != 0 {
                            let r = s * SECTOR_SIZE as usize..(s + 1) * SECTOR_SIZE as usize;
                            img[off + r.start..off + r.end].copy_from_slice(&data[r]);
                        }
                    }
                }
            }
        }
        images
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
                    CrashEvent::Flush { .. } => unreachable!(),
                })
                .collect()
        };
        let mut rng = SplitMix(seed ^ (upto as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mk = |fates: Vec<TearPlan>, label: String| CrashState { after_events: upto, fates, label };
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
    fn counters(&self) -> DeviceStats {
        self.live.counters()
    }
}

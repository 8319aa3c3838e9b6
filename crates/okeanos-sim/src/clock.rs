//! Virtual time.

use okeanos::clock::Clock;
use std::sync::atomic::{AtomicU64, Ordering};

/// A clock the simulator sets. Wall time is a fixed origin plus virtual time, or frozen (so
/// that a run in the real runtime with the same frozen wall clock writes identical blocks).
#[derive(Debug)]
pub struct VirtualClock {
    now: AtomicU64,
    wall_origin: i64,
    frozen_wall: bool,
}

impl VirtualClock {
    /// Virtual time starts at 0; wall time at `wall_origin` (ns since the epoch).
    pub fn new(wall_origin: i64, frozen_wall: bool) -> Self {
        VirtualClock { now: AtomicU64::new(0), wall_origin, frozen_wall }
    }
    /// Moves time forward (never back).
    pub fn advance_to(&self, t: u64) {
        self.now.fetch_max(t, Ordering::Relaxed);
    }
}

impl Clock for VirtualClock {
    fn now_ns(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }
    fn wall_ns(&self) -> i64 {
        if self.frozen_wall {
            self.wall_origin
        } else {
            self.wall_origin + self.now_ns() as i64
        }
    }
}

/// A clock whose monotonic time is real and whose wall time is frozen: for comparing the
/// real runtime's journal with the simulator's block for block.
#[derive(Debug)]
pub struct FrozenWallClock {
    pub real: okeanos::clock::SystemClock,
    pub wall: i64,
}

impl Clock for FrozenWallClock {
    fn now_ns(&self) -> u64 {
        self.real.now_ns()
    }
    fn wall_ns(&self) -> i64 {
        self.wall
    }
}

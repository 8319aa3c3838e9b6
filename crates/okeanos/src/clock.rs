//! Time, injected. The journaling logic never reads a clock: the engine passes times in,
//! taken from a [`Clock`] — the system clock in production, a virtual one in simulation.

/// Monotonic nanoseconds for intervals and wall-clock nanoseconds for timestamps.
pub trait Clock: Send + Sync {
    fn now_ns(&self) -> u64;
    fn wall_ns(&self) -> i64;
}

#[derive(Debug)]
pub struct SystemClock {
    origin: std::time::Instant,
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock { origin: std::time::Instant::now() }
    }
}

impl Clock for SystemClock {
    fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }
    fn wall_ns(&self) -> i64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
    }
}

//! Test hooks of the FUSE front end, from the environment variable `OKEANOS_TEST_HOOKS`
//! (comma-separated `name=value`): never set in use. They widen races and inject faults that a
//! test cannot otherwise reach (a slow write, a ring queue that cannot start or that dies).

/// The hooks a test asked for.
#[derive(Default, Clone, Copy)]
pub struct TestHooks {
    /// Every write is held this long before the engine applies it (`write_delay_ms=N`): it
    /// widens the window in which a cached reader can refill pages the kernel dropped.
    pub write_delay_ms: u64,
    /// Every read that waits for the device waits this much longer (`read_delay_ms=N`): reads
    /// started together are then all waiting at once, as a slow device makes them.
    pub read_delay_ms: u64,
    /// FUSE over io_uring: the threads of this queue fail to start (`ring_fail_queue=N`).
    pub ring_fail_queue: Option<u16>,
    /// FUSE over io_uring: every queue thread fails after serving this many requests
    /// (`ring_fail_after=N`).
    pub ring_fail_after: Option<u64>,
}

impl TestHooks {
    pub fn from_env() -> TestHooks {
        let mut h = TestHooks::default();
        for item in std::env::var("OKEANOS_TEST_HOOKS").unwrap_or_default().split(',') {
            match item.split_once('=') {
                Some(("write_delay_ms", v)) => h.write_delay_ms = v.parse().unwrap_or(0),
                Some(("read_delay_ms", v)) => h.read_delay_ms = v.parse().unwrap_or(0),
                Some(("ring_fail_queue", v)) => h.ring_fail_queue = v.parse().ok(),
                Some(("ring_fail_after", v)) => h.ring_fail_after = v.parse().ok(),
                _ => {}
            }
        }
        h
    }
}

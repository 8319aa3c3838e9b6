//! A network link to a journal server (remote journaling): a request crosses the link at its
//! bandwidth, one after another, and is acknowledged one round trip after it started; a flush
//! is one round trip (the server persists before acknowledging, on NVM-speed storage).
//!
//! Presets: `net-lan`, 10 Gbit/s Ethernet in one rack (100 µs round trip, a typical figure for
//! TCP through the kernel stack); `net-wan`, 100 Mbit/s at 20 ms round trip (a metro link).

use super::{DiskModel, Op};

#[derive(Debug, Clone)]
pub struct LinkParams {
    pub name: &'static str,
    pub rtt_ns: u64,
    pub bps: f64,
}

impl LinkParams {
    pub fn lan() -> Self {
        LinkParams { name: "net-lan", rtt_ns: 100_000, bps: 1.25e9 }
    }
    pub fn wan() -> Self {
        LinkParams { name: "net-wan", rtt_ns: 20_000_000, bps: 12.5e6 }
    }
}

#[derive(Debug)]
pub struct Link {
    p: LinkParams,
    free: u64,
}

impl Link {
    pub fn new(p: LinkParams) -> Self {
        Link { p, free: 0 }
    }
}

impl DiskModel for Link {
    fn submit(&mut self, now: u64, op: Op, _offset: u64, len: u64) -> u64 {
        if op == Op::Flush {
            return now.max(self.free) + self.p.rtt_ns;
        }
        let start = now.max(self.free);
        self.free = start + (len as f64 / self.p.bps * 1e9) as u64;
        self.free + self.p.rtt_ns
    }
    fn describe(&self) -> String {
        format!("{}: {:.1} ms round trip, {:.0} Mbit/s", self.p.name, self.p.rtt_ns as f64 / 1e6, self.p.bps * 8.0 / 1e6)
    }
    fn capacity(&self) -> u64 {
        u64::MAX / 2
    }
}

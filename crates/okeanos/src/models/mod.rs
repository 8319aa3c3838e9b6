//! Device models: how long an I/O takes on a given kind of device, as a function of what the
//! device did before. A model is pure state and arithmetic over nanoseconds: the simulator
//! asks it in virtual time, the timed-emulation device ([`crate::device::TimedDevice`]) in
//! real time. Each model documents where its numbers come from.

pub mod hdd;
pub mod net;
pub mod nvm;
pub mod raid0;
pub mod smr;
pub mod ssd;

/// What an I/O does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
    /// Drain the volatile write cache (FLUSH CACHE / a barrier).
    Flush,
}

/// A device's timing.
pub trait DiskModel: Send {
    /// Submits an I/O at `now_ns` and returns when it completes. Requests are queued in
    /// submission order; `now_ns` never goes backwards between calls.
    fn submit(&mut self, now_ns: u64, op: Op, offset: u64, len: u64) -> u64;
    /// One line: the preset and its main parameters.
    fn describe(&self) -> String;
    /// Bytes the model addresses (offsets beyond wrap around).
    fn capacity(&self) -> u64;
    /// Whether moving between distant offsets costs time (a disk head's seek).
    fn seeks(&self) -> bool {
        false
    }
}

/// The preset names `device_model=` and `--model` accept.
pub const PRESETS: [&str; 8] = ["cheetah15k", "cheetah15k5-146", "cheetah15k5-146-raid0x4", "sata7200", "ssd", "nvm", "net-lan", "net-wan"];

/// A model by preset name.
pub fn preset(name: &str) -> Result<Box<dyn DiskModel>, String> {
    Ok(match name {
        "cheetah15k" => Box::new(hdd::Hdd::new(hdd::HddParams::cheetah15k())),
        "cheetah15k5-146" => Box::new(hdd::Hdd::new(hdd::HddParams::cheetah15k5_146())),
        // The manylogs paper's RAID: four of them, RAID-0 with 64 KB chunks.
        "cheetah15k5-146-raid0x4" => Box::new(raid0::Raid0::new(name, (0..4).map(|_| Box::new(hdd::Hdd::new(hdd::HddParams::cheetah15k5_146())) as Box<dyn DiskModel>).collect(), 64 << 10)),
        "sata7200" => Box::new(hdd::Hdd::new(hdd::HddParams::sata7200())),
        "ssd" => Box::new(ssd::Ssd::new(ssd::SsdParams::sata_ssd())),
        "nvm" => Box::new(nvm::Nvm::new(nvm::NvmParams::default())),
        "net-lan" => Box::new(net::Link::new(net::LinkParams::lan())),
        "net-wan" => Box::new(net::Link::new(net::LinkParams::wan())),
        _ => return Err(format!("unknown device model {name:?}; presets: {}", PRESETS.join(", "))),
    })
}

//! # Okeanos
//!
//! A user-space journaling file system and storage engine for many concurrent streams of small
//! synchronous writes. One engine offers every journaling scheme of its papers, selectable at
//! mount time along two axes (docs/DESIGN.md section 1):
//! - what is journaled ([`DataMode`], [`journal::content`]): `writeback`, `ordered` and `data`
//!   (the ext3 family), `wasteless` (only the changed bytes of partly written blocks, packed into
//!   multiwrite blocks) and `selective` (sequences that start small journaled, the rest in
//!   place), the last two also with `+dmeta` (metadata logged as changed byte ranges);
//! - where the journal lives ([`journal::placement`]): internal or external rings, a remote
//!   journal server or a replicated JetStream stream, non-volatile memory (`nvm`, commit in
//!   place) and scattered logs near the disk head (`manylogs`).
//!
//! ```
//! use okeanos::{Okeanos, MkfsOptions, MountOptions, DataMode, MemDevice};
//! use std::sync::Arc;
//!
//! // A 64 MiB file system with a 4 MiB journal, in memory (use Okeanos::mkfs_file and
//! // Okeanos::open for an image file).
//! let dev = Arc::new(MemDevice::new(64 << 20));
//! Okeanos::mkfs(dev.as_ref(), None, &MkfsOptions { journal_blocks: 1024, ..Default::default() }).unwrap();
//! let fs = Okeanos::mount(dev, None, MountOptions::default().data(DataMode::Data)).unwrap();
//!
//! let log = fs.create_file("/sensor.log").unwrap();
//! log.append(b"t=1 temp=21.5\n").unwrap();
//! log.fdatasync().unwrap(); // durable when this returns
//! assert_eq!(fs.read_path("/sensor.log").unwrap(), b"t=1 temp=21.5\n");
//!
//! let c = fs.counters();
//! assert!(c.commits >= 1 && c.journal_data.blocks >= 1);
//! drop(log);
//! fs.unmount().unwrap();
//! ```
//!
//! Layers (docs/DESIGN.md section 2): [`device`] (storage back ends) · [`format`](mod@format) (on-disk
//! structures, pure) · [`cache`] (buffers with journaling state) · [`journal`] (transactions,
//! commit, checkpoint, revoke, recovery; content policies; placements; no I/O) · [`fs`]
//! (namespace and files) · [`runtime`] and [`engine`] (threads, locks, executing plans).

#[macro_use]
mod counts;
pub mod cache;
pub mod clock;
pub mod det;
pub mod exercise;
pub mod faults;
pub mod device;
pub mod engine;
pub mod error;
pub mod format;
pub mod fs;
pub mod ids;
pub use ids::{HomeBlock, LogPos, Tid};
pub mod inspect;
pub mod journal;
pub mod models;
pub mod nbd;
pub use device::nvm;
pub mod options;
pub mod remote;
pub mod runtime;
pub mod stats;
pub mod workload;

pub use device::{CrashDevice, CrashImage, CrashRecorder, Device, FaultDevice, FileDevice, MemDevice};
pub use engine::{DeviceWait, DirEntryInfo, File, Okeanos, Owner, StatFs};
pub use fs::fsck::{fsck, FsckReport};
pub use fs::mkfs::{MkfsError, MkfsOptions};
pub use fs::namespace::{Attr, SetAttr};
pub use fs::FsError;
pub use journal::content::DataMode;
pub use options::MountOptions;
pub use stats::Counters;

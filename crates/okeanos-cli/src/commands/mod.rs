//! The commands that work on an image without a mount, one file each. `main.rs` parses the
//! command line and dispatches here; `mount.rs`, `bench/`, `sim/` and `report.rs` are the
//! others.

mod mkfs;
mod fsck;
mod inspect;
mod files;
mod server;
mod blockdev;

pub(crate) use mkfs::{mkfs, mkfs_nvm};
pub(crate) use fsck::fsck;
pub(crate) use inspect::{journal_dump, print_checkpoint, stat, tune};
pub(crate) use files::{STREAM_CACHE, cat, ls, put, rm};
pub(crate) use server::{journal_server, self_signed};
pub(crate) use blockdev::{blockdev, BlockdevCmd};

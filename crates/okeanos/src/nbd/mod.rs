//! An NBD server for any [`Device`](crate::Device): how `okeanos blockdev serve` exports an
//! MLB disk to real programs (qemu-img, nbdcopy, nbdfuse, the kernel's nbd client).
//!
//! One thread accepts; each connection has its own thread, which runs the fixed newstyle
//! handshake and then serves requests one after another, replying in order (simple replies).
//! Durability is the device's: a reply to WRITE means the device has the data as a buffered
//! write; FLUSH, or a WRITE with FUA, returns after the device's flush. Since a flush covers
//! every write completed on any connection, the export says CAN_MULTI_CONN.
//!
//! Bad input never takes the server down: a malformed handshake or request closes that
//! connection; a request outside the export or too large gets an error reply; a peer that
//! stalls during the handshake times out; a device error is the reply's EIO (and the device,
//! poisoned, answers EIO from then on).

pub mod server;
pub mod wire;

pub use server::{NbdConfig, NbdServer, NbdStats};

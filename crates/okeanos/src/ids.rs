//! Identifiers that more than one layer names: a transaction's id belongs to the journal, and
//! the cache records which transaction owns a buffer; a file-system block is the file
//! system's, and the cache, the journal and the formats name it; a log position belongs to the
//! journal's placements, and the journal superblock records one; a device block is where a
//! plan writes. Kept below all of them, so that the cache and the formats name them without
//! importing the journal (docs/DESIGN.md section 2).

use serde::{Deserialize, Serialize};

/// Declares a number with a meaning of its own: a newtype over `u64` that is built with `new`,
/// read with `get`, and prints, debugs and serialises as its number (so reports, JSON and
/// logs read as the bare number did).
macro_rules! id_type {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(u64);

        impl $name {
            pub const fn new(n: u64) -> $name {
                $name(n)
            }

            /// Its number, as stored on disk and sent on the wire.
            pub const fn get(self) -> u64 {
                self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id_type! {
    /// A transaction id. Tids grow by one per transaction and never wrap in practice (u64); 0
    /// is "none yet" (the first transaction of a new journal is 1). On disk and on the wire a
    /// tid is its number (docs/FORMAT.md).
    Tid
}

impl Tid {
    /// Before the first transaction.
    pub const ZERO: Tid = Tid(0);

    /// `self - n`, stopping at ZERO.
    pub const fn saturating_sub(self, n: u64) -> Tid {
        Tid(self.0.saturating_sub(n))
    }
}

/// A later transaction: `tid + n`.
impl std::ops::Add<u64> for Tid {
    type Output = Tid;
    fn add(self, n: u64) -> Tid {
        Tid(self.0 + n)
    }
}

impl std::ops::AddAssign<u64> for Tid {
    fn add_assign(&mut self, n: u64) {
        self.0 += n;
    }
}

/// An earlier transaction: `tid - n` (which must not go below zero).
impl std::ops::Sub<u64> for Tid {
    type Output = Tid;
    fn sub(self, n: u64) -> Tid {
        Tid(self.0 - n)
    }
}

/// How many transactions apart: `later - earlier` (which must not be negative).
impl std::ops::Sub<Tid> for Tid {
    type Output = u64;
    fn sub(self, earlier: Tid) -> u64 {
        self.0 - earlier.0
    }
}

id_type! {
    /// A position in a journal's log region: journal block `n` of a ring (0 is the journal
    /// superblock, the log runs from 1), or block `n` of one of manylogs' logs. Where it is on
    /// the device is the region's business (`LogRegion::device_block`); only the region
    /// advances it (`next`, `advance`), since a ring wraps. The manylogs placement keeps the
    /// positions inside its logs as the numbers its table stores (format/logtable.rs) and names
    /// them as `LogPos` where it asks a log's region for a device block.
    LogPos
}

impl LogPos {
    /// Block 0: a ring's journal superblock (so, as the superblock's `start`, no log to
    /// recover), or the first block of a manylogs log.
    pub const ZERO: LogPos = LogPos(0);
}

id_type! {
    /// A block of a device, counted from its start: where a plan writes, reads and copies. A
    /// file-system block's home is the block of the same number on the file-system device
    /// (`DevBlock::home`); a log position becomes one through its region
    /// (`LogRegion::device_block`). A device block is not a file-system block: a block logged
    /// in a manylogs log has both, and only the home is the file's.
    DevBlock
}

impl DevBlock {
    /// The home of file-system block `block`: the block of the same number on the
    /// file-system device.
    pub const fn home(block: HomeBlock) -> DevBlock {
        DevBlock(block.0)
    }

    /// Its first byte on a device of `block_size`-byte blocks.
    pub const fn byte(self, block_size: u64) -> u64 {
        self.0 * block_size
    }
}

id_type! {
    /// A file-system block, named by its home: its number on the file-system device, where it
    /// lives once checkpointed. The file system allocates and maps them; the cache keys its
    /// buffers by them; the journal logs, revokes, parks and checkpoints them; a journal tag,
    /// a manylogs map entry and an NVM slot's entry store one (as its number, docs/FORMAT.md).
    /// It becomes an address to write only through `DevBlock::home`, since a logged copy of it
    /// lives elsewhere.
    HomeBlock
}

impl HomeBlock {
    /// The file system's superblock.
    pub const SUPERBLOCK: HomeBlock = HomeBlock(0);

    /// Block 0, the superblock, which no file or chain owns: a format field that may name no
    /// block (an inode's extent chain or xattr block, the next extent block) holds it for none.
    pub const NONE: HomeBlock = HomeBlock(0);
}

/// The block `n` places after it (within an extent, a group or a table).
impl std::ops::Add<u64> for HomeBlock {
    type Output = HomeBlock;
    fn add(self, n: u64) -> HomeBlock {
        HomeBlock(self.0 + n)
    }
}

/// How many blocks apart: `later - earlier` (which must not be negative).
impl std::ops::Sub<HomeBlock> for HomeBlock {
    type Output = u64;
    fn sub(self, earlier: HomeBlock) -> u64 {
        self.0 - earlier.0
    }
}

/// A fresh 16-byte identifier (time, process and a counter through CRC32C; unique enough to
/// pair a file system with its external journal, or tie an MLB disk's structures to it).
pub fn new_uuid() -> [u8; 16] {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let c = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut out = [0u8; 16];
    for (k, chunk) in out.chunks_mut(4).enumerate() {
        let mut seed = Vec::new();
        seed.extend_from_slice(&t.to_le_bytes());
        seed.extend_from_slice(&std::process::id().to_le_bytes());
        seed.extend_from_slice(&c.to_le_bytes());
        seed.push(k as u8);
        chunk.copy_from_slice(&crc32c::crc32c(&seed).to_le_bytes());
    }
    out
}

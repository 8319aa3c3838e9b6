//! On-disk structures: pure encode and decode, no I/O.
//!
//! Every structure is little-endian, versioned through the superblock's feature flags, and
//! protected by a CRC32C. Decoding is bounded (never reads past the slice it is given) and
//! checked: corrupt input becomes a [`FormatError`], never a panic. The byte maps live in
//! docs/FORMAT.md; keep the two in step.

pub mod dir;
pub mod extent;
pub mod group;
pub mod inode;
pub mod journal;
pub mod logtable;
pub mod mlb;
pub mod nvm;
pub mod remote;
pub mod superblock;
pub mod xattr;

pub use dir::{DirBlock, DirEntry, FileType};
pub use extent::{Extent, ExtentBlock};
pub use group::GroupDesc;
pub use inode::Inode;
pub use superblock::{Superblock, JournalLocation};

/// Why a structure could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("{what}: bad magic {found:#x} (expected {expected:#x}); not an Okeanos structure")]
    BadMagic { what: &'static str, found: u64, expected: u64 },
    #[error("{what}: checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    BadChecksum { what: &'static str, stored: u32, computed: u32 },
    #[error("{what}: {message}")]
    Invalid { what: &'static str, message: String },
    #[error("{what}: needs {needed} bytes, have {have}")]
    Truncated { what: &'static str, needed: usize, have: usize },
    #[error("{what}: unsupported version {version} or incompatible features {features:#x}")]
    Unsupported { what: &'static str, version: u32, features: u32 },
}

pub(crate) fn invalid(what: &'static str, message: impl Into<String>) -> FormatError {
    FormatError::Invalid { what, message: message.into() }
}

/// CRC32C of `bytes`, seeded so that the same bytes in different roles checksum differently.
pub fn crc(seed: u32, bytes: &[u8]) -> u32 {
    crc32c::crc32c_append(seed, bytes)
}

/// Verifies the CRC32C stored little-endian at `at` over `bytes[..at]`, with `seed`.
pub(crate) fn check_crc(what: &'static str, bytes: &[u8], at: usize, seed: u32) -> Result<(), FormatError> {
    need(what, bytes, at + 4)?;
    let stored = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let computed = crc(seed, &bytes[..at]);
    if stored != computed {
        return Err(FormatError::BadChecksum { what, stored, computed });
    }
    Ok(())
}

pub(crate) fn put_crc(bytes: &mut [u8], at: usize, seed: u32) {
    let c = crc(seed, &bytes[..at]);
    bytes[at..at + 4].copy_from_slice(&c.to_le_bytes());
}

pub(crate) fn need(what: &'static str, bytes: &[u8], needed: usize) -> Result<(), FormatError> {
    if bytes.len() < needed {
        return Err(FormatError::Truncated { what, needed, have: bytes.len() });
    }
    Ok(())
}

/// Little-endian field access at fixed offsets. Callers check the length first with [`need`].
pub(crate) struct Le;
impl Le {
    pub fn u16(b: &[u8], at: usize) -> u16 {
        u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
    }
    pub fn u32(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }
    pub fn u64(b: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
    }
    pub fn i64(b: &[u8], at: usize) -> i64 {
        i64::from_le_bytes(b[at..at + 8].try_into().unwrap())
    }
    pub fn put_u16(b: &mut [u8], at: usize, v: u16) {
        b[at..at + 2].copy_from_slice(&v.to_le_bytes());
    }
    pub fn put_u32(b: &mut [u8], at: usize, v: u32) {
        b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
    pub fn put_u64(b: &mut [u8], at: usize, v: u64) {
        b[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
    pub fn put_i64(b: &mut [u8], at: usize, v: i64) {
        b[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
}

/// Blocks with a header `[magic u32][crc u32]...` whose CRC covers the whole block except
/// its own field (bytes 4..8): extent blocks and directory blocks.
pub(crate) mod headed {
    use super::{crc, need, FormatError, Le};

    fn crc_of(seed: u32, b: &[u8]) -> u32 {
        crc(crc(seed, &b[..4]), &b[8..])
    }

    /// Stores magic and CRC; call after the rest of the block is written.
    pub fn seal(out: &mut [u8], magic: u32, seed: u32) {
        Le::put_u32(out, 0, magic);
        let c = crc_of(seed, out);
        Le::put_u32(out, 4, c);
    }

    /// Checks length, magic and CRC.
    pub fn check(what: &'static str, b: &[u8], header_len: usize, magic: u32, seed: u32) -> Result<(), FormatError> {
        need(what, b, header_len)?;
        let found = Le::u32(b, 0);
        if found != magic {
            return Err(FormatError::BadMagic { what, found: found as u64, expected: magic as u64 });
        }
        let stored = Le::u32(b, 4);
        let computed = crc_of(seed, b);
        if stored != computed {
            return Err(FormatError::BadChecksum { what, stored, computed });
        }
        Ok(())
    }
}

/// CRC seeds, one per structure role (so a block copied to the wrong role fails its check).
pub(crate) mod seed {
    pub const SUPERBLOCK: u32 = 0x5342_0001;
    pub const GROUP_DESC: u32 = 0x4744_0001;
    pub const BITMAP: u32 = 0x424d_0001;
    pub const INODE: u32 = 0x494e_0001;
    pub const EXTENT: u32 = 0x4558_0001;
    pub const DIR: u32 = 0x4449_0001;
    pub const XATTR: u32 = 0x5841_0001;
    pub const JOURNAL: u32 = 0x4a4c_0001;
    pub const NVM_HEADER: u32 = 0x4e56_0001;
    pub const NVM_ENTRY: u32 = 0x4e56_0002;
    pub const NVM_DATA: u32 = 0x4e56_0003;
}

/// CRC32C of a bitmap block, as stored in its group descriptor.
pub fn bitmap_crc(group: u32, bytes: &[u8]) -> u32 {
    crc(seed::BITMAP ^ group, bytes)
}

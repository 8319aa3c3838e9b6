//! Extents and extent blocks. An extent maps `len` file blocks starting at file block `logical`
//! to device blocks starting at `physical`. Extents beyond the inode's inline slots live in a
//! singly linked chain of extent blocks, each checksummed and tagged with its owner inode.
//! Byte map: docs/FORMAT.md, "Extent" and "Extent block".

use crate::ids::HomeBlock;
use super::{invalid, need, seed, FormatError, Le};

pub const EXTENT_SIZE: usize = 16;
pub const EXTENT_BLOCK_MAGIC: u32 = u32::from_le_bytes(*b"OKEX");
const HEADER: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Extent {
    pub logical: u32,
    pub len: u32,
    pub physical: HomeBlock,
}

impl Extent {
    pub fn encode(&self, out: &mut [u8]) {
        Le::put_u32(out, 0, self.logical);
        Le::put_u32(out, 4, self.len);
        Le::put_u64(out, 8, self.physical.get());
    }
    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        need("extent", b, EXTENT_SIZE)?;
        let e = Extent { logical: Le::u32(b, 0), len: Le::u32(b, 4), physical: HomeBlock::new(Le::u64(b, 8)) };
        if e.len == 0 || e.logical.checked_add(e.len).is_none() {
            return Err(invalid("extent", format!("extent {e:?} is empty or overflows")));
        }
        Ok(e)
    }
    pub fn end(&self) -> u32 {
        self.logical + self.len
    }
}

/// One block of the extent chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtentBlock {
    pub owner: u32,
    pub next: HomeBlock,
    pub extents: Vec<Extent>,
}

impl ExtentBlock {
    /// Extents one block of `block_size` bytes holds.
    pub fn capacity(block_size: usize) -> usize {
        (block_size - HEADER) / EXTENT_SIZE
    }

    pub fn encode(&self, out: &mut [u8]) {
        Self::encode_parts(self.owner, self.next, &self.extents, out);
    }

    /// Encodes the block of `owner` linking to `next` that holds `extents`, without building
    /// an `ExtentBlock` (the inode store encodes slices of an inode's extent list).
    pub fn encode_parts(owner: u32, next: HomeBlock, extents: &[Extent], out: &mut [u8]) {
        assert!(extents.len() <= Self::capacity(out.len()));
        out.fill(0);
        Le::put_u32(out, 8, extents.len() as u32);
        Le::put_u32(out, 12, owner);
        Le::put_u64(out, 16, next.get());
        for (i, e) in extents.iter().enumerate() {
            e.encode(&mut out[HEADER + i * EXTENT_SIZE..]);
        }
        super::headed::seal(out, EXTENT_BLOCK_MAGIC, seed::EXTENT);
    }

    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        const W: &str = "extent block";
        super::headed::check(W, b, HEADER, EXTENT_BLOCK_MAGIC, seed::EXTENT)?;
        let count = Le::u32(b, 8) as usize;
        if count > Self::capacity(b.len()) {
            return Err(invalid(W, format!("{count} extents do not fit")));
        }
        let extents = (0..count).map(|i| Extent::decode(&b[HEADER + i * EXTENT_SIZE..])).collect::<Result<_, _>>()?;
        Ok(ExtentBlock { owner: Le::u32(b, 12), next: HomeBlock::new(Le::u64(b, 16)), extents })
    }
}

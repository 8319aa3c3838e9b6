//! An inode's extended attributes, all in one block (as ext4's external xattr block, without
//! sharing): names with their namespace prefix (`user.`, `trusted.`, `security.`,
//! `system.posix_acl_access`, ...), values up to what the block holds. Byte map in
//! docs/FORMAT.md, "Extended attribute block".

use super::{check_crc, invalid, need, put_crc, seed, FormatError, Le};

pub const XATTR_MAGIC: u32 = u32::from_le_bytes(*b"OKXA");
/// Header: magic, owner inode, entry count, bytes used, CRC at the end of the block's used part.
pub const XATTR_HEADER: usize = 16;
/// Longest name (as Linux's XATTR_NAME_MAX).
pub const XATTR_NAME_MAX: usize = 255;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct XattrBlock {
    /// The inode the block belongs to (a block never serves two).
    pub owner: u32,
    /// (name, value), sorted by name.
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
}

impl XattrBlock {
    /// Bytes the entries take: header, each entry's 3-byte lengths, name and value, the CRC.
    pub fn encoded_len(&self) -> usize {
        XATTR_HEADER + self.entries.iter().map(|(n, v)| 3 + n.len() + v.len()).sum::<usize>() + 4
    }

    /// Encodes into a block; `None` if the entries do not fit.
    pub fn encode(&self, block_size: usize) -> Option<Vec<u8>> {
        let len = self.encoded_len();
        if len > block_size {
            return None;
        }
        let mut b = vec![0u8; block_size];
        b[0..4].copy_from_slice(&XATTR_MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&self.owner.to_le_bytes());
        b[8..12].copy_from_slice(&(self.entries.len() as u32).to_le_bytes());
        b[12..16].copy_from_slice(&(len as u32).to_le_bytes());
        let mut at = XATTR_HEADER;
        for (n, v) in &self.entries {
            assert!(n.len() <= XATTR_NAME_MAX && v.len() <= u16::MAX as usize, "checked by the caller");
            b[at] = n.len() as u8;
            b[at + 1..at + 3].copy_from_slice(&(v.len() as u16).to_le_bytes());
            b[at + 3..at + 3 + n.len()].copy_from_slice(n);
            b[at + 3 + n.len()..at + 3 + n.len() + v.len()].copy_from_slice(v);
            at += 3 + n.len() + v.len();
        }
        put_crc(&mut b, at, seed::XATTR ^ self.owner);
        Some(b)
    }

    /// Decodes the xattr block of inode `owner` (bounded: every length checked against the
    /// block, the CRC verified, names non-empty).
    pub fn decode(owner: u32, b: &[u8]) -> Result<XattrBlock, FormatError> {
        const W: &str = "xattr block";
        need(W, b, XATTR_HEADER + 4)?;
        let magic = Le::u32(b, 0);
        if magic != XATTR_MAGIC {
            return Err(FormatError::BadMagic { what: W, found: magic as u64, expected: XATTR_MAGIC as u64 });
        }
        if Le::u32(b, 4) != owner {
            return Err(invalid(W, format!("belongs to inode {}, not {owner}", Le::u32(b, 4))));
        }
        let count = Le::u32(b, 8) as usize;
        let len = Le::u32(b, 12) as usize;
        if len < XATTR_HEADER + 4 || len > b.len() {
            return Err(invalid(W, format!("{len} bytes used in a block of {}", b.len())));
        }
        check_crc(W, b, len - 4, seed::XATTR ^ owner)?;
        let mut entries = Vec::with_capacity(count.min(1024));
        let mut at = XATTR_HEADER;
        for _ in 0..count {
            if at + 3 > len - 4 {
                return Err(invalid(W, "entries run past the used bytes"));
            }
            let (nl, vl) = (b[at] as usize, Le::u16(b, at + 1) as usize);
            if nl == 0 || at + 3 + nl + vl > len - 4 {
                return Err(invalid(W, "an entry runs past the used bytes"));
            }
            entries.push((b[at + 3..at + 3 + nl].to_vec(), b[at + 3 + nl..at + 3 + nl + vl].to_vec()));
            at += 3 + nl + vl;
        }
        if at != len - 4 {
            return Err(invalid(W, "bytes left after the last entry"));
        }
        Ok(XattrBlock { owner, entries })
    }
}

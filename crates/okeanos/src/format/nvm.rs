//! The `nvm` placement's layout in non-volatile memory (UBJ; byte map in docs/FORMAT.md,
//! "NVM journal"). Pure encode and decode.
//!
//! ```text
//!   0      cache line 0: header (static after mkfs; CRC-protected)
//!   64     cache line 1: the commit word (highest committed tid), alone on its line
//!   4096   slot table: one 32-byte entry per slot
//!   data   slot data, page-aligned: one block per slot
//! ```
//!
//! An entry's state is a word of its own, so that changing it (frozen → clean, anything →
//! free) is one atomic 8-byte store; the other fields are covered by the entry's CRC, which
//! also binds the slot index (an entry copied to another slot fails). A reused slot's entry is
//! written state first (FREE), then its fields, then the new state, all in one cache line, so
//! a crash leaves either the old entry, a free one, one that fails its CRC, or the new one.

use super::{check_crc, crc, invalid, need, put_crc, seed, FormatError, Le};
use crate::ids::{HomeBlock, Tid};

pub const NVM_MAGIC: u64 = u64::from_le_bytes(*b"OKEANVM1");
pub const NVM_VERSION: u32 = 1;
/// Where the commit word lives: alone on the second cache line.
pub const COMMIT_WORD_AT: u64 = 64;
/// Where the slot table starts.
pub const TABLE_AT: u64 = 4096;
pub const ENTRY_SIZE: u64 = 32;
/// Offset of the state word inside an entry.
pub const STATE_AT: u64 = 24;
const HEADER_CRC_AT: usize = 60;

/// The state word of a slot entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum SlotState {
    /// Unused; nothing to replay.
    Free = 0,
    /// A committed (if its tid is at most the commit word) copy of its block not yet known to
    /// be at home: recovery replays the newest one.
    Frozen = 1,
    /// A copy its home location already holds (or something newer): never replayed, but it
    /// still outranks older copies of its block.
    Clean = 2,
    /// The block was freed or went in place at this tid: no older copy may replay.
    Tombstone = 3,
}

impl SlotState {
    pub fn from_word(w: u64) -> Option<Self> {
        Some(match w {
            0 => SlotState::Free,
            1 => SlotState::Frozen,
            2 => SlotState::Clean,
            3 => SlotState::Tombstone,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            SlotState::Free => "free",
            SlotState::Frozen => "frozen",
            SlotState::Clean => "clean",
            SlotState::Tombstone => "tombstone",
        }
    }
}

/// The static header, and the geometry derived from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NvmHeader {
    pub block_size: u32,
    pub slots: u64,
    pub data_at: u64,
    /// The file system this NVM belongs to.
    pub fs_uuid: [u8; 16],
}

impl NvmHeader {
    /// The layout of `len` bytes of NVM for blocks of `block_size`: as many slots as fit.
    pub fn layout(len: u64, block_size: u32, fs_uuid: [u8; 16]) -> Result<Self, FormatError> {
        let bs = block_size as u64;
        // slots * ENTRY_SIZE rounded up to a page, plus slots * bs, within len - TABLE_AT.
        let room = len.saturating_sub(TABLE_AT);
        let mut slots = room / (bs + ENTRY_SIZE);
        while slots > 0 && Self::data_at_for(slots) + slots * bs > len {
            slots -= 1;
        }
        if slots == 0 {
            return Err(invalid("nvm header", format!("{len} bytes of NVM hold no {bs}-byte slot")));
        }
        Ok(NvmHeader { block_size, slots, data_at: Self::data_at_for(slots), fs_uuid })
    }

    fn data_at_for(slots: u64) -> u64 {
        (TABLE_AT + slots * ENTRY_SIZE).div_ceil(4096) * 4096
    }

    /// Bytes of NVM the layout needs.
    pub fn len(&self) -> u64 {
        self.data_at + self.slots * self.block_size as u64
    }

    pub fn entry_at(&self, slot: u64) -> u64 {
        debug_assert!(slot < self.slots);
        TABLE_AT + slot * ENTRY_SIZE
    }

    pub fn data_at(&self, slot: u64) -> u64 {
        debug_assert!(slot < self.slots);
        self.data_at + slot * self.block_size as u64
    }

    /// The header's 64 bytes.
    pub fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        Le::put_u64(&mut b, 0, NVM_MAGIC);
        Le::put_u32(&mut b, 8, NVM_VERSION);
        Le::put_u32(&mut b, 12, self.block_size);
        Le::put_u64(&mut b, 16, self.slots);
        Le::put_u64(&mut b, 24, TABLE_AT);
        Le::put_u64(&mut b, 32, self.data_at);
        b[40..56].copy_from_slice(&self.fs_uuid);
        put_crc(&mut b, HEADER_CRC_AT, seed::NVM_HEADER);
        b
    }

    /// Decodes and checks the header of an NVM region of `len` bytes.
    pub fn decode(b: &[u8], len: u64) -> Result<Self, FormatError> {
        const W: &str = "nvm header";
        need(W, b, 64)?;
        let magic = Le::u64(b, 0);
        if magic != NVM_MAGIC {
            return Err(FormatError::BadMagic { what: W, found: magic, expected: NVM_MAGIC });
        }
        check_crc(W, b, HEADER_CRC_AT, seed::NVM_HEADER)?;
        let version = Le::u32(b, 8);
        if version != NVM_VERSION {
            return Err(FormatError::Unsupported { what: W, version, features: 0 });
        }
        let block_size = Le::u32(b, 12);
        if !(1024..=65536).contains(&block_size) || !block_size.is_power_of_two() {
            return Err(invalid(W, format!("block size {block_size} is not a power of two in 1024..=65536")));
        }
        let slots = Le::u64(b, 16);
        if slots == 0 || slots > 1 << 32 || Le::u64(b, 24) != TABLE_AT {
            return Err(invalid(W, format!("{slots} slots, or the table is misplaced")));
        }
        let h = NvmHeader { block_size, slots, data_at: Le::u64(b, 32), fs_uuid: b[40..56].try_into().unwrap() };
        if h.data_at != Self::data_at_for(slots) || h.len() > len {
            return Err(invalid(W, format!("{slots} slots of {block_size} bytes do not fit {len} bytes of NVM (truncated file?)")));
        }
        Ok(h)
    }
}

/// A slot entry's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The block's home (file-system block number).
    pub block: HomeBlock,
    pub tid: Tid,
    /// CRC32C of the slot's data (0 for a tombstone).
    pub data_crc: u32,
    pub state: SlotState,
}

/// What an entry read from NVM says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryRead {
    Free,
    /// Torn (a crash while the slot was being reused) or damaged: it names nothing.
    Invalid,
    Valid(Entry),
}

impl Entry {
    /// Bytes 0..24: block, tid, data CRC and the entry CRC (which binds the slot index).
    pub fn encode_fields(&self, slot: u64) -> [u8; 24] {
        let mut b = [0u8; 24];
        Le::put_u64(&mut b, 0, self.block.get());
        Le::put_u64(&mut b, 8, self.tid.get());
        Le::put_u32(&mut b, 16, self.data_crc);
        let c = crc(seed::NVM_ENTRY ^ slot as u32 ^ (slot >> 32) as u32, &b[..20]);
        Le::put_u32(&mut b, 20, c);
        b
    }

    pub fn decode(slot: u64, b: &[u8]) -> EntryRead {
        if b.len() < ENTRY_SIZE as usize {
            return EntryRead::Invalid;
        }
        let Some(state) = SlotState::from_word(Le::u64(b, STATE_AT as usize)) else { return EntryRead::Invalid };
        if state == SlotState::Free {
            return EntryRead::Free;
        }
        let c = crc(seed::NVM_ENTRY ^ slot as u32 ^ (slot >> 32) as u32, &b[..20]);
        if c != Le::u32(b, 20) {
            return EntryRead::Invalid;
        }
        EntryRead::Valid(Entry { block: HomeBlock::new(Le::u64(b, 0)), tid: Tid::new(Le::u64(b, 8)), data_crc: Le::u32(b, 16), state })
    }
}

/// The CRC of a slot's data.
pub fn data_crc(block: HomeBlock, data: &[u8]) -> u32 {
    crc(seed::NVM_DATA ^ block.get() as u32, data)
}

/// The commit word's bytes.
pub fn commit_word(tid: Tid) -> [u8; 8] {
    tid.get().to_le_bytes()
}

pub fn state_word(s: SlotState) -> [u8; 8] {
    (s as u64).to_le_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_fits_and_round_trips() {
        for len in [64 << 10, 1 << 20, 17 << 20, 256 << 20] {
            let h = NvmHeader::layout(len, 4096, [7; 16]).unwrap();
            assert!(h.len() <= len && h.data_at % 4096 == 0 && h.data_at >= TABLE_AT + h.slots * ENTRY_SIZE);
            assert_eq!(NvmHeader::decode(&h.encode(), len).unwrap(), h);
            assert!(NvmHeader::decode(&h.encode(), h.len() - 1).is_err(), "a truncated region is refused");
        }
        assert!(NvmHeader::layout(4096, 4096, [0; 16]).is_err());
        let mut b = NvmHeader::layout(1 << 20, 4096, [1; 16]).unwrap().encode();
        b[17] ^= 1;
        assert!(matches!(NvmHeader::decode(&b, 1 << 20), Err(FormatError::BadChecksum { .. })));
    }

    #[test]
    fn entries_bind_their_slot_and_detect_tearing() {
        let e = Entry { block: HomeBlock::new(1234), tid: Tid::new(99), data_crc: 0xdead_beef, state: SlotState::Frozen };
        let mut b = [0u8; 32];
        b[..24].copy_from_slice(&e.encode_fields(5));
        b[24..].copy_from_slice(&state_word(SlotState::Frozen));
        assert_eq!(Entry::decode(5, &b), EntryRead::Valid(e));
        assert_eq!(Entry::decode(6, &b), EntryRead::Invalid, "an entry copied to another slot fails");
        let mut torn = b;
        torn[8..16].copy_from_slice(&7u64.to_le_bytes());
        assert_eq!(Entry::decode(5, &torn), EntryRead::Invalid);
        let mut free = b;
        free[24..].copy_from_slice(&state_word(SlotState::Free));
        assert_eq!(Entry::decode(5, &free), EntryRead::Free);
        let mut bad = b;
        bad[24] = 9;
        assert_eq!(Entry::decode(5, &bad), EntryRead::Invalid);
    }
}

//! The manylogs log table: where each group's log begins and ends, and the oldest transaction
//! recovery must find. Byte map: docs/FORMAT.md, "Manylogs log table and map".
//!
//! Two copies (A and B) sit in the file system's journal region after its journal superblock;
//! a table write goes to the copy the newest durable table is not in (sequence parity), so a
//! torn write leaves the previous table whole, and mount takes the valid copy with the higher
//! sequence. A copy is `blocks_per_copy` blocks; its CRC covers the header and every entry, so
//! a copy torn between its blocks fails as a whole.

use super::{invalid, need, FormatError, Le};
use crate::ids::{HomeBlock, Tid};

pub const LOG_TABLE_MAGIC: u64 = u64::from_le_bytes(*b"OKMLTAB1");
/// Version 2 added `durable` (bytes 56..60, zero in version 1, which reads as "floor - 1").
/// Version 3 has the same layout and says that a map copy ([`LogMap`]) with the same sequence
/// belongs to it: the table is valid only with that copy. Versions 1 and 2 read as a map with
/// nothing home past the floor and nothing mapped.
pub const LOG_TABLE_VERSION: u32 = 3;
/// Bytes before the first entry.
pub const HEADER_LEN: usize = 64;
/// Bytes of one log's entry.
pub const ENTRY_LEN: usize = 16;
/// Where the CRC sits in the header; it covers bytes 0..60 and then the entries.
const CRC_AT: usize = 60;
const SEED: u32 = 0x4d4c_0001;

pub mod flags {
    /// Unmounted cleanly: every log is empty and nothing needs recovery.
    pub const CLEAN: u32 = 1 << 0;
    /// Written by recovery, which kept the blocks its map names logged: nothing in the logs
    /// past the snapshot positions counts, and a mount takes the map over without recovery.
    pub const RECOVERED: u32 = 1 << 1;
    pub const KNOWN: u32 = CLEAN | RECOVERED;
}

/// One log's extent of live transactions at the time the table was written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogEntry {
    /// Position (block within the log) of its oldest transaction not yet checkpointed, or
    /// where the next one goes when it holds none.
    pub tail: u32,
    /// Position after its newest transaction that was durable when the table was planned:
    /// recovery must find the log intact up to here.
    pub end: u32,
    /// Tid of the transaction at `tail` (0: the log was empty).
    pub tail_tid: Tid,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogTable {
    /// 3: a [`LogMap`] of the same sequence completes it; 2 (written where the journal region
    /// has no room for a map): none.
    pub version: u32,
    pub flags: u32,
    /// Higher is newer; the copy written is `seq % 2`.
    pub seq: u64,
    /// Every committed transaction with this tid or a higher one is in a log at or after that
    /// log's `tail`; older ones are at their final locations. The next tid when all are empty.
    pub floor: Tid,
    /// The newest transaction that was durable when the table was planned (at least
    /// `floor - 1`): a transaction recovery finds past a log's recorded end must be newer, since
    /// everything at or below it in that log lies before the end. Older ones there are stale
    /// (copies a log swap left, a log's earlier pass). Stored as `durable + 1 - floor`.
    pub durable: Tid,
    /// Blocks of every log.
    pub log_blocks: u32,
    pub fs_uuid: [u8; 16],
    /// One per block group, in group order.
    pub logs: Vec<LogEntry>,
}

impl LogTable {
    /// Blocks one copy of a table of `logs` logs takes.
    pub fn blocks_per_copy(logs: u64, block_size: usize) -> u64 {
        ((HEADER_LEN as u64 + logs * ENTRY_LEN as u64).div_ceil(block_size as u64)).max(1)
    }

    pub fn is_clean(&self) -> bool {
        self.flags & flags::CLEAN != 0
    }

    /// Nothing to recover: clean, or written by a recovery that kept blocks logged.
    pub fn needs_no_recovery(&self) -> bool {
        self.flags & (flags::CLEAN | flags::RECOVERED) != 0
    }

    /// Encodes into `out`, which must be `blocks_per_copy` blocks long.
    pub fn encode(&self, out: &mut [u8]) {
        let n = HEADER_LEN + self.logs.len() * ENTRY_LEN;
        assert!(out.len() >= n, "a log table copy holds its entries");
        out.fill(0);
        Le::put_u64(out, 0, LOG_TABLE_MAGIC);
        assert!((2..=LOG_TABLE_VERSION).contains(&self.version), "a table is written as version 2 or 3");
        Le::put_u32(out, 8, self.version);
        Le::put_u32(out, 12, self.flags);
        Le::put_u64(out, 16, self.seq);
        Le::put_u64(out, 24, self.floor.get());
        assert!(self.durable + 1 >= self.floor, "everything below the floor is durable");
        if self.version < 3 {
            Le::put_u32(out, 56, u32::try_from(self.durable + 1 - self.floor).expect("live tids fit the logs' blocks"));
        }
        // Version 3: zero here, the map holds it (blocks kept logged hold the floor back, so
        // the distance to the newest durable tid has no bound).
        Le::put_u32(out, 32, self.logs.len() as u32);
        Le::put_u32(out, 36, self.log_blocks);
        out[40..56].copy_from_slice(&self.fs_uuid);
        for (i, e) in self.logs.iter().enumerate() {
            let at = HEADER_LEN + i * ENTRY_LEN;
            Le::put_u32(out, at, e.tail);
            Le::put_u32(out, at + 4, e.end);
            Le::put_u64(out, at + 8, e.tail_tid.get());
        }
        let c = Self::crc(out, n);
        Le::put_u32(out, CRC_AT, c);
    }

    fn crc(b: &[u8], n: usize) -> u32 {
        super::crc(super::crc(SEED, &b[..CRC_AT]), &b[HEADER_LEN..n])
    }

    /// Decodes a copy, checking it belongs to a file system of `fs_uuid` with `logs` logs of
    /// `log_blocks` blocks each.
    pub fn decode(b: &[u8], fs_uuid: [u8; 16], logs: u32, log_blocks: u32) -> Result<LogTable, FormatError> {
        const W: &str = "manylogs log table";
        header(W, b, HEADER_LEN, LOG_TABLE_MAGIC)?;
        let version = Le::u32(b, 8);
        let fl = Le::u32(b, 12);
        if !(1..=LOG_TABLE_VERSION).contains(&version) || fl & !flags::KNOWN != 0 {
            return Err(FormatError::Unsupported { what: W, version, features: fl });
        }
        let count = Le::u32(b, 32);
        if count != logs || Le::u32(b, 36) != log_blocks {
            return Err(invalid(W, format!("describes {count} logs of {} blocks; the file system has {logs} of {log_blocks}", Le::u32(b, 36))));
        }
        let n = HEADER_LEN + count as usize * ENTRY_LEN;
        need(W, b, n)?;
        let stored = Le::u32(b, CRC_AT);
        let computed = Self::crc(b, n);
        if stored != computed {
            return Err(FormatError::BadChecksum { what: W, stored, computed });
        }
        if b[40..56] != fs_uuid {
            return Err(invalid(W, "belongs to another file system"));
        }
        let mut out = Vec::with_capacity(count as usize);
        for i in 0..count as usize {
            let at = HEADER_LEN + i * ENTRY_LEN;
            let e = LogEntry { tail: Le::u32(b, at), end: Le::u32(b, at + 4), tail_tid: Tid::new(Le::u64(b, at + 8)) };
            if e.tail >= log_blocks || e.end >= log_blocks {
                return Err(invalid(W, format!("log {i}: tail {} or end {} is outside its {log_blocks} blocks", e.tail, e.end)));
            }
            out.push(e);
        }
        let floor = Tid::new(Le::u64(b, 24));
        if floor == Tid::ZERO {
            return Err(invalid(W, "floor tid 0"));
        }
        // At most one live transaction per log block. (Version 3: the map says.)
        let past = Le::u32(b, 56) as u64;
        if version >= 3 && past != 0 {
            return Err(invalid(W, "version 3 keeps the newest durable tid in its map"));
        }
        if past > logs as u64 * log_blocks as u64 + 1 {
            return Err(invalid(W, format!("{past} durable transactions past the floor do not fit its logs")));
        }
        let durable = floor - 1 + past;
        Ok(LogTable { version, flags: fl, seq: Le::u64(b, 16), floor, durable, log_blocks, fs_uuid, logs: out })
    }
}

/// A table's or map's header is there and starts with `magic`.
fn header(what: &'static str, b: &[u8], len: usize, magic: u64) -> Result<(), FormatError> {
    need(what, b, len)?;
    let found = Le::u64(b, 0);
    if found != magic {
        return Err(FormatError::BadMagic { what, found, expected: magic });
    }
    Ok(())
}

pub const LOG_MAP_MAGIC: u64 = u64::from_le_bytes(*b"OKMLMAP1");
pub const LOG_MAP_VERSION: u32 = 1;
/// Bytes before the per-log snapshot positions.
pub const MAP_HEADER_LEN: usize = 64;
/// Bytes of one log's snapshot position.
pub const MAP_LOG_LEN: usize = 16;
/// Bytes of one mapped block.
pub const MAP_ENTRY_LEN: usize = 28;
const MAP_SEED: u32 = 0x4d4c_0002;
/// The most blocks mkfs makes room for in a map copy (28 MiB).
pub const MAP_MOST: u64 = 1 << 20;

/// Where recovery starts reading one log: after its newest transaction at or below the map's
/// home tid.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnapPos {
    pub pos: u32,
    /// Tid of the transaction at `pos` when one recorded durable follows there (before the
    /// log's end); for an empty log the tid below which its contents are stale; else 0.
    pub tid: Tid,
}

/// One logged block whose newest version up to the home tid is whole in a log (the paper's
/// MTL, section III-E): not at its final location, to be read from `at`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MapEntry {
    pub block: HomeBlock,
    /// Device block in a log holding it.
    pub at: u64,
    pub tid: Tid,
    /// The journal tag's data hash of the copy (format/journal/mod.rs, `data_hash`).
    pub hash: u32,
}

/// The map of logged blocks that completes a version-3 log table (byte map: docs/FORMAT.md,
/// "Manylogs map"). With it, every change of a transaction at or below `home` is at its final
/// location or in `entries`: recovery reads each log only from its snapshot position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogMap {
    /// The sequence of the table it belongs to.
    pub seq: u64,
    pub home: Tid,
    /// The newest transaction durable when the table was planned (the table's `durable`).
    pub durable: Tid,
    pub fs_uuid: [u8; 16],
    /// One per log, in group order.
    pub snaps: Vec<SnapPos>,
    pub entries: Vec<MapEntry>,
}

impl LogMap {
    /// Bytes a map of `logs` logs and `entries` blocks takes.
    pub fn bytes(logs: usize, entries: usize) -> usize {
        MAP_HEADER_LEN + logs * MAP_LOG_LEN + entries * MAP_ENTRY_LEN
    }

    /// How many blocks a copy of `blocks` blocks maps, for `logs` logs (None: not even the
    /// snapshot positions fit).
    pub fn capacity(logs: usize, blocks: u64, block_size: usize) -> Option<usize> {
        let room = (blocks as usize).checked_mul(block_size)?;
        room.checked_sub(Self::bytes(logs, 0)).map(|r| r / MAP_ENTRY_LEN)
    }

    /// The blocks of a copy holding this map.
    pub fn blocks(&self, block_size: usize) -> usize {
        Self::bytes(self.snaps.len(), self.entries.len()).div_ceil(block_size)
    }

    /// Encodes into `out` (at least [`Self::blocks`] blocks; the rest is zeroed).
    pub fn encode(&self, out: &mut [u8]) {
        let n = Self::bytes(self.snaps.len(), self.entries.len());
        assert!(out.len() >= n, "a map copy holds its entries");
        out.fill(0);
        Le::put_u64(out, 0, LOG_MAP_MAGIC);
        Le::put_u32(out, 8, LOG_MAP_VERSION);
        Le::put_u32(out, 12, self.snaps.len() as u32);
        Le::put_u64(out, 16, self.seq);
        Le::put_u64(out, 24, self.home.get());
        Le::put_u64(out, 32, self.durable.get());
        out[40..56].copy_from_slice(&self.fs_uuid);
        Le::put_u32(out, 56, u32::try_from(self.entries.len()).expect("a map's entries fit its copy"));
        let mut at = MAP_HEADER_LEN;
        for s in &self.snaps {
            Le::put_u32(out, at, s.pos);
            Le::put_u64(out, at + 8, s.tid.get());
            at += MAP_LOG_LEN;
        }
        for e in &self.entries {
            Le::put_u64(out, at, e.block.get());
            Le::put_u64(out, at + 8, e.at);
            Le::put_u64(out, at + 16, e.tid.get());
            Le::put_u32(out, at + 24, e.hash);
            at += MAP_ENTRY_LEN;
        }
        let c = Self::crc(out, n);
        Le::put_u32(out, CRC_AT, c);
    }

    fn crc(b: &[u8], n: usize) -> u32 {
        super::crc(super::crc(MAP_SEED, &b[..CRC_AT]), &b[MAP_HEADER_LEN..n])
    }

    /// The number of entries a copy's header announces (to know how much to read), if the
    /// header is a map's.
    pub fn announced(b: &[u8]) -> Option<(usize, usize)> {
        (b.len() >= MAP_HEADER_LEN && Le::u64(b, 0) == LOG_MAP_MAGIC).then(|| (Le::u32(b, 12) as usize, Le::u32(b, 56) as usize))
    }

    /// Decodes a copy of a file system of `fs_uuid` with `logs` logs of `log_blocks` blocks.
    /// Entries are checked against the logs by the placement, which knows where they are.
    pub fn decode(b: &[u8], fs_uuid: [u8; 16], logs: u32, log_blocks: u32) -> Result<LogMap, FormatError> {
        const W: &str = "manylogs map";
        header(W, b, MAP_HEADER_LEN, LOG_MAP_MAGIC)?;
        let version = Le::u32(b, 8);
        if version != LOG_MAP_VERSION {
            return Err(FormatError::Unsupported { what: W, version, features: 0 });
        }
        let (count, entries) = (Le::u32(b, 12), Le::u32(b, 56) as usize);
        if count != logs {
            return Err(invalid(W, format!("describes {count} logs; the file system has {logs}")));
        }
        let n = MAP_HEADER_LEN.checked_add(count as usize * MAP_LOG_LEN).and_then(|h| entries.checked_mul(MAP_ENTRY_LEN).and_then(|e| h.checked_add(e))).ok_or_else(|| invalid(W, "size overflows"))?;
        need(W, b, n)?;
        let stored = Le::u32(b, CRC_AT);
        let computed = Self::crc(b, n);
        if stored != computed {
            return Err(FormatError::BadChecksum { what: W, stored, computed });
        }
        if b[40..56] != fs_uuid {
            return Err(invalid(W, "belongs to another file system"));
        }
        let mut at = MAP_HEADER_LEN;
        let mut snaps = Vec::with_capacity(count as usize);
        for i in 0..count {
            let s = SnapPos { pos: Le::u32(b, at), tid: Tid::new(Le::u64(b, at + 8)) };
            if s.pos >= log_blocks {
                return Err(invalid(W, format!("log {i}: snapshot position {} is outside its {log_blocks} blocks", s.pos)));
            }
            snaps.push(s);
            at += MAP_LOG_LEN;
        }
        let mut out = Vec::with_capacity(entries);
        for _ in 0..entries {
            out.push(MapEntry { block: HomeBlock::new(Le::u64(b, at)), at: Le::u64(b, at + 8), tid: Tid::new(Le::u64(b, at + 16)), hash: Le::u32(b, at + 24) });
            at += MAP_ENTRY_LEN;
        }
        let (home, durable) = (Tid::new(Le::u64(b, 24)), Tid::new(Le::u64(b, 32)));
        if home > durable {
            return Err(invalid(W, format!("home tid {home} is past the newest durable one {durable}")));
        }
        Ok(LogMap { seq: Le::u64(b, 16), home, durable, fs_uuid, snaps, entries: out })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> LogTable {
        LogTable {
            version: 3,
            flags: 0,
            seq: 7,
            floor: Tid::new(42),
            durable: Tid::new(50),
            log_blocks: 300,
            fs_uuid: [5; 16],
            logs: (0..600).map(|i| LogEntry { tail: i % 300, end: (i * 7) % 300, tail_tid: Tid::new(i as u64 * 3) }).collect(),
        }
    }

    #[test]
    fn round_trip_across_blocks() {
        let t = LogTable { version: 2, ..table() };
        let bs = 4096;
        let n = LogTable::blocks_per_copy(600, bs) as usize;
        assert_eq!(n, 3);
        let mut b = vec![0u8; n * bs];
        t.encode(&mut b);
        assert_eq!(LogTable::decode(&b, [5; 16], 600, 300).unwrap(), t);
        // Version 3 leaves the newest durable tid to its map: any distance from the floor.
        let t3 = LogTable { durable: Tid::new(42 + (1 << 40)), ..table() };
        t3.encode(&mut b);
        assert_eq!(Le::u32(&b, 56), 0);
        assert_eq!(LogTable::decode(&b, [5; 16], 600, 300).unwrap(), LogTable { durable: Tid::new(41), ..t3 });
    }

    /// A version-1 table (bytes 56..60 reserved, zero) reads as "nothing durable past the
    /// floor recorded": past a log's end any tid from the floor counts, as version 1 did.
    #[test]
    fn version_1_tables_are_read() {
        let t = LogTable { durable: Tid::new(41), version: 1, ..table() };
        let mut b = vec![0u8; 3 * 4096];
        LogTable { version: 2, ..t.clone() }.encode(&mut b);
        assert_eq!(Le::u32(&b, 56), 0);
        Le::put_u32(&mut b, 8, 1);
        let c = LogTable::crc(&b, HEADER_LEN + 600 * ENTRY_LEN);
        Le::put_u32(&mut b, CRC_AT, c);
        assert_eq!(LogTable::decode(&b, [5; 16], 600, 300).unwrap(), t);
        // An unknown later version is refused.
        Le::put_u32(&mut b, 8, LOG_TABLE_VERSION + 1);
        let c = LogTable::crc(&b, HEADER_LEN + 600 * ENTRY_LEN);
        Le::put_u32(&mut b, CRC_AT, c);
        assert!(matches!(LogTable::decode(&b, [5; 16], 600, 300), Err(FormatError::Unsupported { .. })));
    }

    #[test]
    fn a_durable_count_beyond_the_logs_is_corrupt() {
        let mut b = vec![0u8; 3 * 4096];
        table().encode(&mut b);
        Le::put_u32(&mut b, 56, 600 * 300 + 2);
        let c = LogTable::crc(&b, HEADER_LEN + 600 * ENTRY_LEN);
        Le::put_u32(&mut b, CRC_AT, c);
        assert!(LogTable::decode(&b, [5; 16], 600, 300).is_err());
    }

    #[test]
    fn corruption_anywhere_is_an_error() {
        let t = table();
        let mut b = vec![0u8; 3 * 4096];
        t.encode(&mut b);
        // A flipped byte in the last block's entries (a torn multi-block write) fails the CRC.
        for at in [0, 12, 20, 40, 64, 4096 * 2 + 100, HEADER_LEN + 600 * ENTRY_LEN - 1] {
            let mut c = b.clone();
            c[at] ^= 0x10;
            assert!(LogTable::decode(&c, [5; 16], 600, 300).is_err(), "byte {at}");
        }
        assert!(LogTable::decode(&b, [6; 16], 600, 300).is_err(), "another file system");
        assert!(LogTable::decode(&b, [5; 16], 601, 300).is_err(), "another geometry");
        assert!(LogTable::decode(&b[..100], [5; 16], 600, 300).is_err(), "truncated");
        assert!(LogTable::decode(&vec![0u8; 4096], [5; 16], 600, 300).is_err(), "zeros");
    }

    fn map() -> LogMap {
        LogMap {
            seq: 7,
            home: Tid::new(48),
            durable: Tid::new(50),
            fs_uuid: [5; 16],
            snaps: (0..600).map(|i| SnapPos { pos: i % 300, tid: Tid::new(i as u64) }).collect(),
            entries: (0..1000).map(|i| MapEntry { block: HomeBlock::new(5000 + i), at: 100 + i * 3, tid: Tid::new(42 + i % 7), hash: i as u32 * 77 }).collect(),
        }
    }

    #[test]
    fn maps_round_trip_and_corruption_is_an_error() {
        let m = map();
        let bs = 4096;
        let n = m.blocks(bs);
        assert_eq!(n, (64 + 600 * 16 + 1000 * 28usize).div_ceil(bs));
        let mut b = vec![0u8; (n + 1) * bs];
        m.encode(&mut b);
        assert_eq!(LogMap::announced(&b), Some((600, 1000)));
        assert_eq!(LogMap::decode(&b, [5; 16], 600, 300).unwrap(), m);
        for at in [0, 8, 12, 16, 24, 32, 56, 64 + 5, 64 + 600 * 16 + 3, 64 + 600 * 16 + 999 * 28 + 27] {
            let mut c = b.clone();
            c[at] ^= 0x04;
            assert!(LogMap::decode(&c, [5; 16], 600, 300).is_err(), "byte {at}");
        }
        assert!(LogMap::decode(&b, [6; 16], 600, 300).is_err(), "another file system");
        assert!(LogMap::decode(&b, [5; 16], 601, 300).is_err(), "another geometry");
        assert!(LogMap::decode(&b, [5; 16], 600, 200).is_err(), "a snapshot position outside its log");
        assert!(LogMap::decode(&b[..5000], [5; 16], 600, 300).is_err(), "truncated");
        // A count that runs past the copy is an error, not a read out of bounds.
        let mut c = b.clone();
        Le::put_u32(&mut c, 36, u32::MAX);
        assert!(LogMap::decode(&c, [5; 16], 600, 300).is_err());
        assert_eq!(LogMap::capacity(600, n as u64, bs), Some((n * bs - 64 - 600 * 16) / 28));
        assert_eq!(LogMap::capacity(600, 1, 1024), None, "not even the positions fit");
    }
}

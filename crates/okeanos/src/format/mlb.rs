//! On-disk structures of the block-level manylogs device (MLB, the Manylogs paper §III-I.1):
//! its superblock, the header of a logged write, and the mapping table (the paper's MTL table,
//! §III-E) snapshot. Byte maps: docs/FORMAT.md, "Block-level manylogs (MLB)". The device that
//! reads and writes them is `device::mlb`.
//!
//! Every structure carries the disk's UUID, so a block of another MLB disk (or a stale copy of
//! this one's earlier life) fails its check instead of being believed.

use super::{crc, invalid, need, FormatError, Le};

/// The unit the map tracks and the log holds: a user write that covers part of a block is
/// logged as the whole block (read, patched, logged).
pub const MLB_BLOCK: u64 = 4096;
/// Sectors of one block.
pub const SECTORS_PER_BLOCK: u64 = MLB_BLOCK / crate::device::SECTOR_SIZE;

pub const SUPER_MAGIC: u64 = u64::from_le_bytes(*b"OKMLBSB1");
pub const SUPER_VERSION: u32 = 1;
const SUPER_CRC_AT: usize = 124;
const SUPER_SEED: u32 = 0x4d42_0001;

/// The MLB superblock, block 0 of the disk. Written once by `create`, never rewritten.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MlbSuper {
    /// Bytes of the disk it was made on; the disk must still be at least this long.
    pub disk_bytes: u64,
    /// Blocks of one group (its data blocks, then its log). The last group may be shorter.
    pub group_blocks: u32,
    /// Blocks of every group's log.
    pub log_blocks: u32,
    /// Groups (and so logs).
    pub groups: u32,
    /// Writes of at most this many blocks are logged (LoggedWriteSize, §III-C).
    pub logged_write_blocks: u32,
    /// Blocks of one copy of the map snapshot; two copies follow the superblock.
    pub snapshot_blocks: u32,
    /// First block of group 0.
    pub groups_start: u64,
    /// Bytes the device exports: the sum of the groups' data blocks.
    pub user_bytes: u64,
    pub uuid: [u8; 16],
}

impl MlbSuper {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; MLB_BLOCK as usize];
        Le::put_u64(&mut b, 0, SUPER_MAGIC);
        Le::put_u32(&mut b, 8, SUPER_VERSION);
        Le::put_u32(&mut b, 12, 0);
        Le::put_u64(&mut b, 16, self.disk_bytes);
        Le::put_u32(&mut b, 24, MLB_BLOCK as u32);
        Le::put_u32(&mut b, 28, self.group_blocks);
        Le::put_u32(&mut b, 32, self.log_blocks);
        Le::put_u32(&mut b, 36, self.groups);
        Le::put_u32(&mut b, 40, self.logged_write_blocks);
        Le::put_u32(&mut b, 44, self.snapshot_blocks);
        Le::put_u64(&mut b, 48, self.groups_start);
        Le::put_u64(&mut b, 56, self.user_bytes);
        b[64..80].copy_from_slice(&self.uuid);
        super::put_crc(&mut b, SUPER_CRC_AT, SUPER_SEED);
        b
    }

    /// Decodes and checks block 0: magic, version, checksum and a geometry that adds up.
    pub fn decode(b: &[u8]) -> Result<MlbSuper, FormatError> {
        const W: &str = "MLB superblock";
        need(W, b, 128)?;
        let magic = Le::u64(b, 0);
        if magic != SUPER_MAGIC {
            return Err(FormatError::BadMagic { what: W, found: magic, expected: SUPER_MAGIC });
        }
        super::check_crc(W, b, SUPER_CRC_AT, SUPER_SEED)?;
        let version = Le::u32(b, 8);
        let features = Le::u32(b, 12);
        if version != SUPER_VERSION || features != 0 {
            return Err(FormatError::Unsupported { what: W, version, features });
        }
        if Le::u32(b, 24) as u64 != MLB_BLOCK {
            return Err(invalid(W, format!("block size {} (only {MLB_BLOCK} is known)", Le::u32(b, 24))));
        }
        let s = MlbSuper {
            disk_bytes: Le::u64(b, 16),
            group_blocks: Le::u32(b, 28),
            log_blocks: Le::u32(b, 32),
            groups: Le::u32(b, 36),
            logged_write_blocks: Le::u32(b, 40),
            snapshot_blocks: Le::u32(b, 44),
            groups_start: Le::u64(b, 48),
            user_bytes: Le::u64(b, 56),
            uuid: b[64..80].try_into().unwrap(),
        };
        s.validate()?;
        Ok(s)
    }

    /// The geometry's own rules (see [`MlbSuper::plan`]), so that arithmetic on a decoded
    /// superblock never overflows or points outside the disk.
    pub fn validate(&self) -> Result<(), FormatError> {
        const W: &str = "MLB superblock";
        let disk_blocks = self.disk_bytes / MLB_BLOCK;
        if self.groups == 0 || self.log_blocks < 2 || self.group_blocks <= self.log_blocks {
            return Err(invalid(W, format!("{} groups of {} blocks with logs of {}", self.groups, self.group_blocks, self.log_blocks)));
        }
        if self.log_blocks as u64 * SECTORS_PER_BLOCK > u32::MAX as u64 {
            return Err(invalid(W, "a log is too large to address in sectors"));
        }
        if self.logged_write_blocks == 0 || self.logged_write_blocks as u64 + 1 > self.log_blocks as u64 {
            return Err(invalid(W, format!("logged writes of {} blocks do not fit logs of {}", self.logged_write_blocks, self.log_blocks)));
        }
        if self.snapshot_blocks as u64 != snapshot_blocks(self.groups, self.groups as u64 * self.log_blocks as u64) {
            return Err(invalid(W, format!("map snapshot copies of {} blocks", self.snapshot_blocks)));
        }
        if self.groups_start != 1 + 2 * self.snapshot_blocks as u64 {
            return Err(invalid(W, format!("groups start at block {}", self.groups_start)));
        }
        let end = self.groups_start + (self.groups as u64 - 1) * self.group_blocks as u64;
        if end >= disk_blocks {
            return Err(invalid(W, format!("{} groups do not fit {} blocks", self.groups, disk_blocks)));
        }
        let last = (disk_blocks - end).min(self.group_blocks as u64);
        if last <= self.log_blocks as u64 {
            return Err(invalid(W, "the last group has no room for data"));
        }
        let data = (self.groups as u64 - 1) * (self.group_blocks - self.log_blocks) as u64 + (last - self.log_blocks as u64);
        if self.user_bytes != data * MLB_BLOCK {
            return Err(invalid(W, format!("exports {} bytes where its groups hold {}", self.user_bytes, data * MLB_BLOCK)));
        }
        Ok(())
    }

    /// The geometry for a disk of `disk_bytes`: as many groups of `group_blocks` as fit after
    /// the superblock and the two snapshot copies, the last one shorter if the rest has room
    /// for its log and at least as many data blocks. Errors name what does not fit.
    pub fn plan(disk_bytes: u64, group_blocks: u32, log_blocks: u32, logged_write_blocks: u32, uuid: [u8; 16]) -> Result<MlbSuper, String> {
        if log_blocks < 2 || group_blocks <= log_blocks {
            return Err(format!("a group of {group_blocks} blocks has no room for data beside a log of {log_blocks} blocks"));
        }
        if logged_write_blocks == 0 || logged_write_blocks >= log_blocks {
            return Err(format!("logged writes of up to {logged_write_blocks} blocks do not fit a log of {log_blocks} blocks"));
        }
        let disk_blocks = disk_bytes / MLB_BLOCK;
        // The snapshot size depends on the number of groups, which depends on the snapshot
        // size: start from the most groups and shrink until it fits.
        let mut groups = (disk_blocks / group_blocks as u64 + 1).min(u32::MAX as u64);
        loop {
            if groups == 0 {
                return Err(format!("{disk_bytes} bytes hold no group of {group_blocks} blocks ({} bytes) beside the superblock and map", group_blocks as u64 * MLB_BLOCK));
            }
            let snap = snapshot_blocks(groups as u32, groups * log_blocks as u64);
            let start = 1 + 2 * snap;
            let full = (groups - 1) * group_blocks as u64;
            if start + full < disk_blocks {
                let last = (disk_blocks - start - full).min(group_blocks as u64);
                if last >= 2 * log_blocks as u64 || last == group_blocks as u64 {
                    let s = MlbSuper {
                        disk_bytes: disk_blocks * MLB_BLOCK,
                        group_blocks,
                        log_blocks,
                        groups: groups as u32,
                        logged_write_blocks,
                        snapshot_blocks: snap as u32,
                        groups_start: start,
                        user_bytes: (full / group_blocks as u64 * (group_blocks - log_blocks) as u64 + last - log_blocks as u64) * MLB_BLOCK,
                        uuid,
                    };
                    s.validate().map_err(|e| e.to_string())?;
                    return Ok(s);
                }
            }
            groups -= 1;
        }
    }

    /// First disk block of group `g`, and its length in blocks.
    pub fn group(&self, g: u32) -> (u64, u64) {
        let start = self.groups_start + g as u64 * self.group_blocks as u64;
        let len = (self.disk_bytes / MLB_BLOCK - start).min(self.group_blocks as u64);
        (start, len)
    }

    /// Data blocks of every group but possibly the last.
    pub fn data_per_group(&self) -> u64 {
        (self.group_blocks - self.log_blocks) as u64
    }

    /// The disk block holding user block `b` when it is not logged.
    pub fn home_block(&self, b: u64) -> u64 {
        let g = b / self.data_per_group();
        self.groups_start + g * self.group_blocks as u64 + b % self.data_per_group()
    }

    /// The group whose data holds user block `b`.
    pub fn group_of(&self, b: u64) -> u32 {
        (b / self.data_per_group()).min(self.groups as u64 - 1) as u32
    }

    /// First disk byte of log `g`.
    pub fn log_start(&self, g: u32) -> u64 {
        let (start, len) = self.group(g);
        (start + len - self.log_blocks as u64) * MLB_BLOCK
    }

    /// Sectors of one log.
    pub fn log_sectors(&self) -> u64 {
        self.log_blocks as u64 * SECTORS_PER_BLOCK
    }

    pub fn user_blocks(&self) -> u64 {
        self.user_bytes / MLB_BLOCK
    }
}

/// Blocks one snapshot copy takes for `logs` logs and at most `entries` mapped blocks.
pub fn snapshot_blocks(logs: u32, entries: u64) -> u64 {
    (SNAP_HEADER_LEN as u64 + logs as u64 * SNAP_LOG_LEN as u64 + entries * SNAP_ENTRY_LEN as u64).div_ceil(MLB_BLOCK)
}

pub const RECORD_MAGIC: u64 = u64::from_le_bytes(*b"OKMLBREC");
pub const RECORD_VERSION: u16 = 1;
/// The only kind so far: user blocks.
pub const RECORD_DATA: u16 = 1;
/// A record's header is one sector.
pub const RECORD_HEADER: usize = crate::device::SECTOR_SIZE as usize;
const RECORD_CRC_AT: usize = 64;
const RECORD_SEED: u32 = 0x4d42_0002;
const DATA_SEED: u32 = 0x4d42_0003;

/// The sector before the blocks of one logged write. A record is whole when its header's CRC
/// holds and the CRC of the blocks after it matches `data_crc`: a torn record fails one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// Bumped by every recovery: a record of an earlier epoch past a log's recovered head is
    /// a write that recovery already judged lost, and is never believed again.
    pub epoch: u32,
    /// Consecutive within one log (never reused, across epochs too).
    pub log_seq: u64,
    /// Global order of records across all logs: a later record of a block wins.
    pub seq: u64,
    /// First user block.
    pub home: u64,
    pub blocks: u32,
    pub data_crc: u32,
}

impl RecordHeader {
    pub fn encode(&self, uuid: &[u8; 16], out: &mut [u8]) {
        out[..RECORD_HEADER].fill(0);
        Le::put_u64(out, 0, RECORD_MAGIC);
        Le::put_u16(out, 8, RECORD_VERSION);
        Le::put_u16(out, 10, RECORD_DATA);
        Le::put_u32(out, 12, self.epoch);
        Le::put_u64(out, 16, self.log_seq);
        Le::put_u64(out, 24, self.seq);
        Le::put_u64(out, 32, self.home);
        Le::put_u32(out, 40, self.blocks);
        Le::put_u32(out, 44, self.data_crc);
        out[48..64].copy_from_slice(uuid);
        super::put_crc(out, RECORD_CRC_AT, RECORD_SEED);
    }

    /// Decodes a header sector. `None` for anything that is not a whole header of this disk:
    /// recovery stops a log's scan there, so "not a record" is not an error.
    pub fn decode(b: &[u8], uuid: &[u8; 16]) -> Option<RecordHeader> {
        if b.len() < RECORD_HEADER || Le::u64(b, 0) != RECORD_MAGIC || super::check_crc("MLB record", b, RECORD_CRC_AT, RECORD_SEED).is_err() {
            return None;
        }
        if Le::u16(b, 8) != RECORD_VERSION || Le::u16(b, 10) != RECORD_DATA || b[48..64] != *uuid {
            return None;
        }
        Some(RecordHeader {
            epoch: Le::u32(b, 12),
            log_seq: Le::u64(b, 16),
            seq: Le::u64(b, 24),
            home: Le::u64(b, 32),
            blocks: Le::u32(b, 40),
            data_crc: Le::u32(b, 44),
        })
    }

    /// The checksum a record's blocks carry, tied to the position they belong to.
    pub fn data_crc(seq: u64, data: &[u8]) -> u32 {
        crc(DATA_SEED ^ (seq as u32), data)
    }

    /// Sectors the record takes in its log, header included.
    pub fn sectors(blocks: u32) -> u64 {
        1 + blocks as u64 * SECTORS_PER_BLOCK
    }
}

pub const SNAP_MAGIC: u64 = u64::from_le_bytes(*b"OKMLBMTL");
pub const SNAP_VERSION: u32 = 1;
pub const SNAP_HEADER_LEN: usize = 80;
pub const SNAP_LOG_LEN: usize = 32;
pub const SNAP_ENTRY_LEN: usize = 16;
const SNAP_CRC_AT: usize = 72;
const SNAP_SEED: u32 = 0x4d42_0004;

/// One log's positions in a snapshot. Positions are virtual sectors: they only grow, and the
/// sector in the log is the position modulo the log's sectors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnapLog {
    /// Oldest sector still holding a mapped block (or `head` when none does).
    pub tail: u64,
    /// Where the next record goes: recovery scans from here.
    pub head: u64,
    /// The `log_seq` the record at `head` must carry.
    pub next_log_seq: u64,
}

/// One mapped block: user block `home` is logged in log `log` at sector `sector` of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SnapEntry {
    pub home: u64,
    pub log: u32,
    pub sector: u32,
}

/// The mapping table as of one moment, with each log's positions then. Two copies sit after
/// the superblock; a snapshot goes to copy `seq % 2`, so a torn write leaves the other whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Higher is newer.
    pub seq: u64,
    /// The epoch of the records that may follow each log's `head`.
    pub epoch: u32,
    /// The global seq the next record gets.
    pub next_seq: u64,
    pub logs: Vec<SnapLog>,
    /// Sorted by `home`, each home once.
    pub entries: Vec<SnapEntry>,
    /// Written at a clean close: no record follows any log's head, so an open need not read
    /// the logs (it writes a snapshot without the flag before anything else).
    pub clean: bool,
}

/// Snapshot flag bits (bytes 12..16).
pub const SNAP_CLEAN: u32 = 1;

impl Snapshot {
    /// Bytes the encoded snapshot takes.
    pub fn encoded_len(&self) -> usize {
        SNAP_HEADER_LEN + self.logs.len() * SNAP_LOG_LEN + self.entries.len() * SNAP_ENTRY_LEN
    }

    /// The length a copy's header claims (0 when too short to say); not checked.
    pub fn covered(b: &[u8]) -> u64 {
        if b.len() < SNAP_HEADER_LEN {
            return 0;
        }
        Le::u64(b, 64)
    }

    /// Encodes into `out`, at least [`Snapshot::encoded_len`] bytes.
    pub fn encode(&self, uuid: &[u8; 16], out: &mut [u8]) {
        let n = self.encoded_len();
        assert!(out.len() >= n, "the buffer holds the snapshot");
        out.fill(0);
        Le::put_u64(out, 0, SNAP_MAGIC);
        Le::put_u32(out, 8, SNAP_VERSION);
        Le::put_u32(out, 12, if self.clean { SNAP_CLEAN } else { 0 });
        Le::put_u64(out, 16, self.seq);
        Le::put_u32(out, 24, self.epoch);
        Le::put_u32(out, 28, self.logs.len() as u32);
        Le::put_u64(out, 32, self.entries.len() as u64);
        Le::put_u64(out, 40, self.next_seq);
        out[48..64].copy_from_slice(uuid);
        Le::put_u64(out, 64, n as u64);
        let mut at = SNAP_HEADER_LEN;
        for l in &self.logs {
            Le::put_u64(out, at, l.tail);
            Le::put_u64(out, at + 8, l.head);
            Le::put_u64(out, at + 16, l.next_log_seq);
            at += SNAP_LOG_LEN;
        }
        for e in &self.entries {
            Le::put_u64(out, at, e.home);
            Le::put_u32(out, at + 8, e.log);
            Le::put_u32(out, at + 12, e.sector);
            at += SNAP_ENTRY_LEN;
        }
        let c = Self::crc(out, n);
        Le::put_u32(out, SNAP_CRC_AT, c);
    }

    fn crc(b: &[u8], n: usize) -> u32 {
        crc(crc(SNAP_SEED, &b[..SNAP_CRC_AT]), &b[SNAP_HEADER_LEN..n])
    }

    /// Decodes a copy and checks it against the disk's geometry: every entry names a user block,
    /// a log and a sector that exist, positions are ordered, homes sorted and distinct.
    pub fn decode(b: &[u8], sb: &MlbSuper) -> Result<Snapshot, FormatError> {
        const W: &str = "MLB map snapshot";
        need(W, b, SNAP_HEADER_LEN)?;
        let magic = Le::u64(b, 0);
        if magic != SNAP_MAGIC {
            return Err(FormatError::BadMagic { what: W, found: magic, expected: SNAP_MAGIC });
        }
        let (version, features) = (Le::u32(b, 8), Le::u32(b, 12));
        if version != SNAP_VERSION || features & !SNAP_CLEAN != 0 {
            return Err(FormatError::Unsupported { what: W, version, features });
        }
        let logs = Le::u32(b, 28);
        let count = Le::u64(b, 32);
        if logs != sb.groups {
            return Err(invalid(W, format!("describes {logs} logs; the disk has {}", sb.groups)));
        }
        if count > sb.groups as u64 * sb.log_blocks as u64 {
            return Err(invalid(W, format!("{count} mapped blocks do not fit the logs")));
        }
        let n = SNAP_HEADER_LEN + logs as usize * SNAP_LOG_LEN + count as usize * SNAP_ENTRY_LEN;
        if Le::u64(b, 64) != n as u64 {
            return Err(invalid(W, format!("says it is {} bytes long, its counts make {n}", Le::u64(b, 64))));
        }
        need(W, b, n)?;
        let stored = Le::u32(b, SNAP_CRC_AT);
        let computed = Self::crc(b, n);
        if stored != computed {
            return Err(FormatError::BadChecksum { what: W, stored, computed });
        }
        if b[48..64] != sb.uuid {
            return Err(invalid(W, "belongs to another disk"));
        }
        let log_sectors = sb.log_sectors();
        let mut at = SNAP_HEADER_LEN;
        let mut out_logs = Vec::with_capacity(logs as usize);
        for i in 0..logs {
            let l = SnapLog { tail: Le::u64(b, at), head: Le::u64(b, at + 8), next_log_seq: Le::u64(b, at + 16) };
            if l.tail > l.head || l.head - l.tail > log_sectors {
                return Err(invalid(W, format!("log {i}: tail {} and head {} are more than a log apart", l.tail, l.head)));
            }
            out_logs.push(l);
            at += SNAP_LOG_LEN;
        }
        let mut entries = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let e = SnapEntry { home: Le::u64(b, at), log: Le::u32(b, at + 8), sector: Le::u32(b, at + 12) };
            if e.home >= sb.user_blocks() || e.log >= logs || e.sector as u64 + SECTORS_PER_BLOCK > log_sectors {
                return Err(invalid(W, format!("entry for block {} names log {} sector {}, outside the disk", e.home, e.log, e.sector)));
            }
            if entries.last().is_some_and(|p: &SnapEntry| p.home >= e.home) {
                return Err(invalid(W, format!("entries out of order at block {}", e.home)));
            }
            entries.push(e);
            at += SNAP_ENTRY_LEN;
        }
        Ok(Snapshot { seq: Le::u64(b, 16), epoch: Le::u32(b, 24), next_seq: Le::u64(b, 40), logs: out_logs, entries, clean: features & SNAP_CLEAN != 0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sb() -> MlbSuper {
        MlbSuper::plan(64 << 20, 1024, 128, 64, [7; 16]).unwrap()
    }

    #[test]
    fn a_plan_fills_the_disk_and_decodes_back() {
        let s = sb();
        assert_eq!(MlbSuper::decode(&s.encode()).unwrap(), s);
        // 16384 blocks: 1 + 2 * snapshot, then groups of 1024.
        assert!(s.groups >= 15);
        let (start, len) = s.group(s.groups - 1);
        assert!(start + len <= s.disk_bytes / MLB_BLOCK);
        assert_eq!(s.home_block(0), s.groups_start);
        assert_eq!(s.home_block(s.data_per_group()), s.groups_start + 1024);
        assert_eq!(s.log_start(0), (s.groups_start + 1024 - 128) * MLB_BLOCK);
    }

    #[test]
    fn a_damaged_superblock_is_an_error() {
        let s = sb();
        for at in [0usize, 8, 20, 28, 40, 60, 70, 124] {
            let mut b = s.encode();
            b[at] ^= 0x10;
            assert!(MlbSuper::decode(&b).is_err(), "a flip at byte {at} goes unnoticed");
        }
        assert!(MlbSuper::decode(&[0u8; 100]).is_err());
    }

    #[test]
    fn plans_that_cannot_fit_say_why() {
        assert!(MlbSuper::plan(1 << 20, 1024, 128, 64, [0; 16]).unwrap_err().contains("no group"));
        assert!(MlbSuper::plan(64 << 20, 128, 128, 64, [0; 16]).unwrap_err().contains("no room"));
        assert!(MlbSuper::plan(64 << 20, 1024, 64, 64, [0; 16]).unwrap_err().contains("do not fit"));
    }

    #[test]
    fn a_record_header_is_whole_or_nothing() {
        let h = RecordHeader { epoch: 3, log_seq: 9, seq: 77, home: 1234, blocks: 4, data_crc: 0xabcd };
        let mut b = vec![0u8; RECORD_HEADER];
        h.encode(&[1; 16], &mut b);
        assert_eq!(RecordHeader::decode(&b, &[1; 16]), Some(h));
        assert_eq!(RecordHeader::decode(&b, &[2; 16]), None, "another disk's record");
        for at in 0..RECORD_CRC_AT + 4 {
            let mut c = b.clone();
            c[at] ^= 1;
            assert_eq!(RecordHeader::decode(&c, &[1; 16]), None, "a flip at byte {at}");
        }
    }

    #[test]
    fn a_snapshot_round_trips_and_rejects_what_does_not_fit() {
        let s = sb();
        let snap = Snapshot {
            seq: 5,
            epoch: 2,
            next_seq: 40,
            logs: (0..s.groups).map(|i| SnapLog { tail: i as u64, head: i as u64 + 9, next_log_seq: 3 }).collect(),
            entries: vec![SnapEntry { home: 1, log: 0, sector: 1 }, SnapEntry { home: 90, log: 3, sector: 17 }],
            clean: true,
        };
        let mut b = vec![0u8; (s.snapshot_blocks as u64 * MLB_BLOCK) as usize];
        snap.encode(&s.uuid, &mut b);
        assert_eq!(Snapshot::decode(&b, &s).unwrap(), snap);
        let mut torn = b.clone();
        torn[SNAP_HEADER_LEN + 3] ^= 1;
        assert!(matches!(Snapshot::decode(&torn, &s), Err(FormatError::BadChecksum { .. })));
        let mut bad = snap.clone();
        bad.entries[1].sector = (s.log_sectors() - 1) as u32;
        bad.encode(&s.uuid, &mut b);
        assert!(Snapshot::decode(&b, &s).is_err(), "an entry past its log's end");
        let mut unsorted = snap.clone();
        unsorted.entries.swap(0, 1);
        unsorted.encode(&s.uuid, &mut b);
        assert!(Snapshot::decode(&b, &s).is_err(), "entries out of order");
    }
}

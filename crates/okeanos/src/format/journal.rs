//! Journal structures: the journal superblock, and the descriptor, revoke and commit blocks of
//! a transaction. Data and metadata blocks are logged whole after the descriptor that tags them.
//!
//! Every non-data journal block starts with a 16-byte header `[magic][type][tid]`. Recovery
//! accepts a block only if its header carries the tid it expects next, so blocks left over from
//! an earlier pass over the circular log (lower tids) are never mistaken for new ones. A logged
//! block whose first four bytes equal the journal magic is *escaped* (those bytes are stored as
//! zero and the tag says so), so it cannot be mistaken for a header either. The commit block
//! carries a CRC32C over every block of its transaction as written, so the transaction can be
//! written in one batch followed by a single flush: a torn or missing block fails the check and
//! recovery ends the log there (thesis section 3.4; jbd2's "async commit" with checksums).
//!
//! Logged contents are checked with XXH3-64, not CRC32C. The blocks the journal carries hold
//! records that end with their own CRC32C (group descriptors, inodes), and a CRC over a message
//! followed by its own CRC is a constant: a CRC32C over a whole logged block cannot see a
//! change inside such a record. The crash tests found exactly that — a lost journal write of a
//! group-descriptor block whose stale copy had the same block CRC — so journal content uses a
//! non-linear hash. The structures' own headers keep CRC32C.
//!
//! Byte maps: docs/FORMAT.md, "Journal".

use crate::ids::HomeBlock;
use super::{check_crc, invalid, need, put_crc, seed, FormatError, Le};
pub use crate::ids::{LogPos, Tid};

pub const JOURNAL_MAGIC: u32 = u32::from_le_bytes(*b"OKJL");
pub const JOURNAL_VERSION: u32 = 1;
pub const HEADER_LEN: usize = 16;

/// Block types in the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JBlockType {
    Descriptor = 1,
    Commit = 2,
    Revoke = 3,
    Superblock = 4,
    /// A whole transaction in one block: its records, then its commit ([`FastCommit`]), or
    /// the first block of such a span.
    FastCommit = 5,
    /// A block after the first of a fast commit span ([`FastCommit`], journal feature
    /// `FAST_COMMIT_SPAN`).
    FastCommitMore = 6,
}

impl JBlockType {
    fn from_u32(v: u32) -> Option<Self> {
        match v {
            1 => Some(Self::Descriptor),
            2 => Some(Self::Commit),
            3 => Some(Self::Revoke),
            4 => Some(Self::Superblock),
            5 => Some(Self::FastCommit),
            6 => Some(Self::FastCommitMore),
            _ => None,
        }
    }
}

/// Tag flags.
pub mod tag_flags {
    /// The logged block began with the journal magic; its first four bytes were zeroed.
    pub const ESCAPED: u16 = 1 << 0;
    /// The logged block is file-system metadata (otherwise file data). Informational.
    pub const METADATA: u16 = 1 << 1;
    /// A multiwrite record: `len` bytes at `offset` of the final block, stored in the
    /// descriptor's record stream rather than as a whole logged block (Okeanos paper
    /// section 4; thesis section 5.3).
    pub const MULTIWRITE: u16 = 1 << 2;
    /// The final block was allocated by this transaction: replay starts from a zeroed block
    /// instead of reading its old contents.
    pub const FRESH: u16 = 1 << 3;
    pub const KNOWN: u16 = ESCAPED | METADATA | MULTIWRITE | FRESH;
}

/// Journal feature flags (incompatible).
pub mod jfeature {
    /// Commit blocks carry a checksum over the whole transaction.
    pub const TX_CHECKSUM: u32 = 1 << 0;
    /// Descriptors may carry multiwrite tags and record streams.
    pub const MULTIWRITE: u32 = 1 << 1;
    /// A transaction of records that fits one block is that one block ([`super::FastCommit`]).
    pub const FAST_COMMIT: u32 = 1 << 2;
    /// A fast commit may span several blocks ([`super::FastCommit`], continuation blocks of
    /// type 6): a transaction of records up to [`super::MAX_FAST_BLOCKS`] blocks long.
    pub const FAST_COMMIT_SPAN: u32 = 1 << 3;
    /// A fast commit may carry its tags in the 10-byte compact form ([`super::FastCommit`]'s
    /// `compact`, [`super::COMPACT_TAG_SIZE`]): without a record hash, which the fast commit's
    /// own hash makes redundant. The bit keeps binaries that do not know the form away.
    pub const FAST_COMMIT_COMPACT: u32 = 1 << 4;
    /// A fast commit may carry inode notes ([`super::InodeNote`]): an inode's new size and
    /// times in 16 bytes, its checksum recomputed on replay, where differential metadata
    /// would log the inode's 32 changed bytes under a tag of their own.
    pub const FAST_COMMIT_NOTES: u32 = 1 << 5;
    /// A fast commit's inode notes may be short: 12 bytes, the size in 32 bits
    /// ([`super::SHORT_NOTE_SIZE`]), said by bit 31 of its handles field.
    pub const FAST_COMMIT_SHORT_NOTES: u32 = 1 << 6;
    pub const KNOWN: u32 = TX_CHECKSUM | MULTIWRITE | FAST_COMMIT | FAST_COMMIT_SPAN | FAST_COMMIT_COMPACT | FAST_COMMIT_NOTES | FAST_COMMIT_SHORT_NOTES;
    /// What `okeanos tune` may turn on or off on a clean journal: forms a commit may take,
    /// which recovery tells apart by the block itself, so a journal with nothing to replay can
    /// gain or lose them (docs/FORMAT.md, "Journal features").
    pub const TUNABLE: u32 = FAST_COMMIT | FAST_COMMIT_SPAN | FAST_COMMIT_COMPACT | FAST_COMMIT_NOTES | FAST_COMMIT_SHORT_NOTES;
    /// Every feature by the name `okeanos tune` and `okeanos stat` use.
    pub const NAMES: [(u32, &str); 7] = [
        (TX_CHECKSUM, "tx_checksum"),
        (MULTIWRITE, "multiwrite"),
        (FAST_COMMIT, "fast_commit"),
        (FAST_COMMIT_SPAN, "fast_commit_span"),
        (FAST_COMMIT_COMPACT, "fast_commit_compact"),
        (FAST_COMMIT_NOTES, "fast_commit_notes"),
        (FAST_COMMIT_SHORT_NOTES, "fast_commit_short_notes"),
    ];

    /// The names of the features set in `features`, in bit order.
    pub fn names(features: u32) -> Vec<&'static str> {
        NAMES.iter().filter(|(bit, _)| features & bit != 0).map(|(_, n)| *n).collect()
    }

    /// The bit of a feature named as [`NAMES`] names it.
    pub fn by_name(name: &str) -> Option<u32> {
        NAMES.iter().find(|(_, n)| *n == name).map(|(bit, _)| *bit)
    }

    /// Why a set of features is not one a journal may have: a fast commit's span or compact
    /// tags or inode notes without fast commits, short notes without notes.
    pub fn inconsistent(features: u32) -> Option<&'static str> {
        if features & FAST_COMMIT == 0 && features & (FAST_COMMIT_SPAN | FAST_COMMIT_COMPACT | FAST_COMMIT_NOTES | FAST_COMMIT_SHORT_NOTES) != 0 {
            return Some("fast_commit_span, fast_commit_compact, fast_commit_notes and fast_commit_short_notes are forms of fast commits: they need fast_commit");
        }
        if features & FAST_COMMIT_NOTES == 0 && features & FAST_COMMIT_SHORT_NOTES != 0 {
            return Some("fast_commit_short_notes is a form of inode notes: it needs fast_commit_notes");
        }
        None
    }
}

/// Magic of a multiwrite block (continuation of a descriptor's record stream). It is not
/// the journal magic, so no multiwrite block can pass for a journal header.
pub const MULTIWRITE_MAGIC: u32 = u32::from_le_bytes(*b"OKMW");
/// Bytes of a multiwrite block before its stream bytes.
pub const MULTIWRITE_HEADER: usize = 8;
/// Largest block number a tag can name (multiwrite tags store 48 bits).
pub const MAX_TAG_BLOCK: u64 = (1 << 48) - 1;

pub const TAG_SIZE: usize = 16;
/// A tag in a compact fast commit: `[fs_block: 46 bits, FRESH, METADATA: u48][offset: u16]
/// [len: u16]`, multiwrite implied, no record hash.
pub const COMPACT_TAG_SIZE: usize = 10;
/// Largest block number a compact tag can name; a transaction touching a block above it takes
/// the full tag form.
pub const MAX_COMPACT_TAG_BLOCK: u64 = (1 << 46) - 1;
const COMPACT_FRESH: u64 = 1 << 46;
const COMPACT_METADATA: u64 = 1 << 47;
/// In a fast commit's tag count field: the tags are compact.
const FAST_COUNT_COMPACT: u32 = 1 << 31;
/// In a fast commit's tag count field: inode notes follow the tags; the tag count is then
/// bits 0-15 and the note count bits 16-29.
const FAST_COUNT_NOTES: u32 = 1 << 30;
/// Most tags, and most notes, of a fast commit with notes (the fields' widths).
pub const MAX_NOTED_TAGS: usize = 0xffff;
pub const MAX_NOTES: usize = 0x3fff;
/// Bytes of one inode note.
pub const NOTE_SIZE: usize = 16;
/// Bytes of one short inode note (the journal's FAST_COMMIT_SHORT_NOTES): the size in 32 bits.
pub const SHORT_NOTE_SIZE: usize = 12;
/// In a fast commit's handles field: its notes are short ([`SHORT_NOTE_SIZE`]); the handle
/// count is bits 0-30.
const FAST_HANDLES_SHORT_NOTES: u32 = 1 << 31;

/// An inode's change that differential metadata would log as its first 32 bytes (checksum,
/// mode, size, mtime, ctime) under a tag, told instead (docs/FORMAT.md, "Inode notes"): replay
/// sets the size, sets mtime and ctime to `commit time - age_ns`, and recomputes the inode's
/// checksum. Absolute values, so replaying it twice leaves what replaying it once did.
/// `[ino: u32][age_ns: u32][size: u64]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InodeNote {
    pub ino: u32,
    /// Nanoseconds from the inode's mtime (= ctime) to the fast commit's commit time.
    pub age_ns: u32,
    pub size: u64,
}

impl InodeNote {
    /// The mtime and ctime it sets, from its fast commit's commit time.
    pub fn time_ns(&self, commit_time_ns: i64) -> i64 {
        commit_time_ns - self.age_ns as i64
    }
}
const DESC_COUNT_AT: usize = 16;
const DESC_TAGS_AT: usize = 24;
const REVOKE_COUNT_AT: usize = 16;
const REVOKE_AT: usize = 24;
const JSB_CRC_AT: usize = 508;
const COMMIT_CRC_AT: usize = 508;

/// Reads the header of a journal block, if it has one.
pub fn header(b: &[u8]) -> Option<(JBlockType, Tid)> {
    if b.len() < HEADER_LEN || Le::u32(b, 0) != JOURNAL_MAGIC {
        return None;
    }
    Some((JBlockType::from_u32(Le::u32(b, 4))?, Tid::new(Le::u64(b, 8))))
}

fn put_header(out: &mut [u8], t: JBlockType, tid: Tid) {
    Le::put_u32(out, 0, JOURNAL_MAGIC);
    Le::put_u32(out, 4, t as u32);
    Le::put_u64(out, 8, tid.get());
}

/// Whether a data block must be escaped before it is logged.
pub fn needs_escape(data: &[u8]) -> bool {
    data.len() >= 4 && Le::u32(data, 0) == JOURNAL_MAGIC
}

/// Escapes in place (zeroes the magic). The caller records [`tag_flags::ESCAPED`].
pub fn escape(data: &mut [u8]) {
    debug_assert!(needs_escape(data));
    data[..4].fill(0);
}

/// Undoes [`escape`] on a block read back from the journal.
pub fn unescape(data: &mut [u8]) {
    Le::put_u32(data, 0, JOURNAL_MAGIC);
}

// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalSuperblock {
    pub version: u32,
    pub features: u32,
    pub block_size: u32,
    /// Blocks of the journal, including this superblock (block 0).
    pub total_blocks: u64,
    /// First block of the circular log (1).
    pub first: LogPos,
    /// Tid of the first transaction expected at `start`.
    pub sequence: Tid,
    /// Block of the oldest transaction still needed, or 0 when the journal is empty (clean).
    pub start: LogPos,
    pub uuid: [u8; 16],
    /// The file system this journal belongs to (an external journal is refused for another).
    pub fs_uuid: [u8; 16],
    /// Non-zero after an error aborted the journal.
    pub errno: i32,
    /// For a file system with a remote journal, whose local fallback this journal is: where
    /// its transactions are (zero otherwise).
    pub remote: RemoteState,
    /// Commits whose flush the mount that wrote this superblock may have had in flight at once
    /// (`commit_pipeline=`; 0 or 1: one at a time). Recovery takes a committed transaction at
    /// most this many tids after a torn one as the torn tail of a pipeline, not as damage.
    pub pipeline: u32,
}

/// Where a remote journal's transactions are (docs/REMOTE.md). Kept in the local journal's
/// superblock, which only the placement writes, never in journaled metadata.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RemoteState {
    /// The host fell back: transactions after `upto` are in this local journal.
    pub local: bool,
    /// The epoch this host writes with (fenced in at mount).
    pub epoch: u64,
    /// With `local`, the newest transaction the server holds.
    pub upto: Tid,
}

impl JournalSuperblock {
    /// Whether no log needs recovery (`start` is zero).
    pub fn is_clean(&self) -> bool {
        self.start == LogPos::ZERO
    }

    /// Whether fast commits may carry compact tags in this journal (FAST_COMMIT_COMPACT).
    pub fn fast_commit_compact(&self) -> bool {
        self.features & jfeature::FAST_COMMIT_COMPACT != 0
    }

    /// Whether fast commits may carry inode notes in this journal (FAST_COMMIT_NOTES).
    pub fn fast_commit_notes(&self) -> bool {
        self.features & jfeature::FAST_COMMIT_NOTES != 0
    }

    /// Whether fast commits may carry short inode notes in this journal
    /// (FAST_COMMIT_SHORT_NOTES).
    pub fn fast_commit_short_notes(&self) -> bool {
        self.features & jfeature::FAST_COMMIT_SHORT_NOTES != 0
    }

    /// The most blocks a fast commit may span in this journal: 0 without the FAST_COMMIT
    /// feature, 1 with it alone, [`MAX_FAST_BLOCKS`] with FAST_COMMIT_SPAN too.
    pub fn fast_commit_blocks(&self) -> usize {
        match (self.features & jfeature::FAST_COMMIT != 0, self.features & jfeature::FAST_COMMIT_SPAN != 0) {
            (false, _) => 0,
            (true, false) => 1,
            (true, true) => MAX_FAST_BLOCKS,
        }
    }
}

/// The deepest commit pipeline a journal superblock may record (`commit_pipeline=` allows as
/// many).
pub const MAX_PIPELINE: u32 = 64;

impl JournalSuperblock {
    pub fn encode(&self, out: &mut [u8]) {
        out.fill(0);
        put_header(out, JBlockType::Superblock, Tid::ZERO);
        Le::put_u32(out, 16, self.version);
        Le::put_u32(out, 20, self.features);
        Le::put_u32(out, 24, self.block_size);
        Le::put_u32(out, 28, self.pipeline);
        Le::put_u64(out, 32, self.total_blocks);
        Le::put_u64(out, 40, self.first.get());
        Le::put_u64(out, 48, self.sequence.get());
        Le::put_u64(out, 56, self.start.get());
        out[64..80].copy_from_slice(&self.uuid);
        out[80..96].copy_from_slice(&self.fs_uuid);
        Le::put_u32(out, 96, self.errno as u32);
        Le::put_u32(out, 100, self.remote.local as u32);
        Le::put_u64(out, 104, self.remote.epoch);
        Le::put_u64(out, 112, self.remote.upto.get());
        put_crc(out, JSB_CRC_AT, seed::JOURNAL);
    }

    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        const W: &str = "journal superblock";
        need(W, b, 512)?;
        match header(b) {
            Some((JBlockType::Superblock, _)) => {}
            _ => return Err(FormatError::BadMagic { what: W, found: Le::u32(b, 0) as u64, expected: JOURNAL_MAGIC as u64 }),
        }
        check_crc(W, b, JSB_CRC_AT, seed::JOURNAL)?;
        let jsb = JournalSuperblock {
            version: Le::u32(b, 16),
            features: Le::u32(b, 20),
            block_size: Le::u32(b, 24),
            total_blocks: Le::u64(b, 32),
            first: LogPos::new(Le::u64(b, 40)),
            sequence: Tid::new(Le::u64(b, 48)),
            start: LogPos::new(Le::u64(b, 56)),
            uuid: b[64..80].try_into().unwrap(),
            fs_uuid: b[80..96].try_into().unwrap(),
            errno: Le::u32(b, 96) as i32,
            remote: RemoteState { local: Le::u32(b, 100) == 1, epoch: Le::u64(b, 104), upto: Tid::new(Le::u64(b, 112)) },
            pipeline: Le::u32(b, 28),
        };
        if jsb.pipeline > MAX_PIPELINE {
            return Err(invalid(W, format!("commit pipeline depth {} is above {MAX_PIPELINE}", jsb.pipeline)));
        }
        if Le::u32(b, 100) > 1 {
            return Err(invalid(W, format!("unknown remote journal mode {}", Le::u32(b, 100))));
        }
        if jsb.version != JOURNAL_VERSION || jsb.features & !jfeature::KNOWN != 0 {
            return Err(FormatError::Unsupported { what: W, version: jsb.version, features: jsb.features });
        }
        if jsb.first != LogPos::new(1) || jsb.total_blocks < 16 || (!jsb.is_clean() && !(jsb.first.get()..jsb.total_blocks).contains(&jsb.start.get())) {
            return Err(invalid(W, format!("log bounds first={} total={} start={} are invalid", jsb.first, jsb.total_blocks, jsb.start)));
        }
        Ok(jsb)
    }
}

// ---------------------------------------------------------------------------------------------

/// A descriptor tag. A regular tag names the final location of one logged block that follows
/// the descriptor; a multiwrite tag (flag [`tag_flags::MULTIWRITE`]) describes a record of
/// `len` bytes at `offset` of the final block, stored in the descriptor's record stream.
///
/// Both are 16 bytes: `[fs_block: u48][len: u16][flags: u16][offset: u16][hash: u32]`; a
/// regular tag has `len` and `offset` zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag {
    pub fs_block: HomeBlock,
    pub flags: u16,
    pub offset: u16,
    pub len: u16,
    /// Low 32 bits of XXH3-64 of the logged block as written (after escaping), or of the
    /// record's bytes, seeded with [`data_hash`]'s seed.
    pub data_hash: u32,
}

impl Tag {
    pub fn regular(fs_block: HomeBlock, flags: u16, data_hash: u32) -> Self {
        Tag { fs_block, flags, offset: 0, len: 0, data_hash }
    }
    pub fn is_multiwrite(&self) -> bool {
        self.flags & tag_flags::MULTIWRITE != 0
    }
    pub fn is_metadata(&self) -> bool {
        self.flags & tag_flags::METADATA != 0
    }
}

/// A descriptor: tags, then (after them, in the same block) the start of the record stream
/// of its multiwrite tags. The rest of the stream, if any, follows the descriptor's regular
/// blocks in multiwrite blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Descriptor {
    pub tid: Tid,
    pub tags: Vec<Tag>,
    /// The first bytes of the record stream, stored inline after the tags.
    pub inline: Vec<u8>,
}

impl Descriptor {
    pub fn capacity(block_size: usize) -> usize {
        (block_size - 4 - DESC_TAGS_AT) / TAG_SIZE
    }

    /// Stream bytes a descriptor with `tags` tags holds inline.
    pub fn inline_capacity(block_size: usize, tags: usize) -> usize {
        block_size - 4 - DESC_TAGS_AT - tags * TAG_SIZE
    }

    /// Total bytes of the record stream of these tags.
    pub fn stream_len(tags: &[Tag]) -> usize {
        tags.iter().filter(|t| t.is_multiwrite()).map(|t| t.len as usize).sum()
    }

    pub fn encode(&self, out: &mut [u8]) {
        assert!(self.tags.len() <= Self::capacity(out.len()) && !self.tags.is_empty());
        assert!(self.inline.len() <= Self::inline_capacity(out.len(), self.tags.len()));
        out.fill(0);
        put_header(out, JBlockType::Descriptor, self.tid);
        Le::put_u32(out, DESC_COUNT_AT, self.tags.len() as u32);
        Le::put_u32(out, DESC_COUNT_AT + 4, self.inline.len() as u32);
        for (i, t) in self.tags.iter().enumerate() {
            let at = DESC_TAGS_AT + i * TAG_SIZE;
            assert!(t.fs_block.get() <= MAX_TAG_BLOCK);
            put_tag(out, at, t);
        }
        let at = DESC_TAGS_AT + self.tags.len() * TAG_SIZE;
        out[at..at + self.inline.len()].copy_from_slice(&self.inline);
        let end = out.len() - 4;
        put_crc(out, end, seed::JOURNAL ^ 1);
    }

    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        const W: &str = "journal descriptor";
        need(W, b, 512)?;
        let Some((JBlockType::Descriptor, tid)) = header(b) else {
            return Err(invalid(W, "not a descriptor block"));
        };
        check_crc(W, b, b.len() - 4, seed::JOURNAL ^ 1)?;
        let n = Le::u32(b, DESC_COUNT_AT) as usize;
        if n == 0 || n > Self::capacity(b.len()) {
            return Err(invalid(W, format!("{n} tags do not fit")));
        }
        let inline_len = Le::u32(b, DESC_COUNT_AT + 4) as usize;
        if inline_len > Self::inline_capacity(b.len(), n) {
            return Err(invalid(W, format!("{inline_len} inline stream bytes do not fit")));
        }
        let mut tags = Vec::with_capacity(n);
        for i in 0..n {
            let at = DESC_TAGS_AT + i * TAG_SIZE;
            let t = get_tag(b, at);
            let (flags, len, offset) = (t.flags, t.len, t.offset);
            if flags & !tag_flags::KNOWN != 0 {
                return Err(invalid(W, format!("unknown tag flags {flags:#x}")));
            }
            if t.is_multiwrite() {
                if len == 0 || offset as usize + len as usize > b.len() || flags & tag_flags::ESCAPED != 0 {
                    return Err(invalid(W, format!("multiwrite tag {t:?} is malformed")));
                }
            } else if len != 0 || offset != 0 {
                return Err(invalid(W, format!("regular tag {t:?} carries a range")));
            }
            tags.push(t);
        }
        let stream = Self::stream_len(&tags);
        if inline_len != stream.min(Self::inline_capacity(b.len(), n)) {
            return Err(invalid(W, format!("inline stream of {inline_len} bytes disagrees with {stream} record bytes")));
        }
        let at = DESC_TAGS_AT + n * TAG_SIZE;
        Ok(Descriptor { tid, tags, inline: b[at..at + inline_len].to_vec() })
    }
}

// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevokeBlock {
    pub tid: Tid,
    pub blocks: Vec<HomeBlock>,
}

impl RevokeBlock {
    pub fn capacity(block_size: usize) -> usize {
        (block_size - 4 - REVOKE_AT) / 8
    }

    pub fn encode(&self, out: &mut [u8]) {
        assert!(self.blocks.len() <= Self::capacity(out.len()) && !self.blocks.is_empty());
        out.fill(0);
        put_header(out, JBlockType::Revoke, self.tid);
        Le::put_u32(out, REVOKE_COUNT_AT, self.blocks.len() as u32);
        for (i, b) in self.blocks.iter().enumerate() {
            Le::put_u64(out, REVOKE_AT + i * 8, b.get());
        }
        let end = out.len() - 4;
        put_crc(out, end, seed::JOURNAL ^ 3);
    }

    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        const W: &str = "journal revoke block";
        need(W, b, 512)?;
        let Some((JBlockType::Revoke, tid)) = header(b) else {
            return Err(invalid(W, "not a revoke block"));
        };
        check_crc(W, b, b.len() - 4, seed::JOURNAL ^ 3)?;
        let n = Le::u32(b, REVOKE_COUNT_AT) as usize;
        if n == 0 || n > Self::capacity(b.len()) {
            return Err(invalid(W, format!("{n} revoke records do not fit")));
        }
        Ok(RevokeBlock { tid, blocks: (0..n).map(|i| HomeBlock::new(Le::u64(b, REVOKE_AT + i * 8))).collect() })
    }
}

// ---------------------------------------------------------------------------------------------

/// The commit record. All its fields and its own CRC lie in the first 512-byte sector, which a
/// device writes atomically, so a commit record is either wholly there or detectably not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitBlock {
    pub tid: Tid,
    /// Journal blocks of the transaction before this commit block.
    pub block_count: u64,
    /// XXH3-64 chained over those blocks, in log order, as written ([`tx_hash_append`]).
    pub tx_hash: u64,
    pub commit_time_ns: i64,
    pub handle_count: u32,
}

impl CommitBlock {
    pub fn encode(&self, out: &mut [u8]) {
        out.fill(0);
        put_header(out, JBlockType::Commit, self.tid);
        Le::put_u64(out, 16, self.block_count);
        Le::put_u32(out, 24, self.handle_count);
        Le::put_i64(out, 32, self.commit_time_ns);
        Le::put_u64(out, 40, self.tx_hash);
        put_crc(out, COMMIT_CRC_AT, seed::JOURNAL ^ 2);
    }

    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        const W: &str = "journal commit block";
        need(W, b, 512)?;
        let Some((JBlockType::Commit, tid)) = header(b) else {
            return Err(invalid(W, "not a commit block"));
        };
        check_crc(W, b, COMMIT_CRC_AT, seed::JOURNAL ^ 2)?;
        Ok(CommitBlock {
            tid,
            block_count: Le::u64(b, 16),
            handle_count: Le::u32(b, 24),
            commit_time_ns: Le::i64(b, 32),
            tx_hash: Le::u64(b, 40),
        })
    }
}

/// A transaction of records written with its commit in one piece: one block, or a span of a
/// few consecutive log blocks (ext4's fast commits put a small transaction in one block; the
/// span carries the same form past it). Its content (the fields, the multiwrite tags, then
/// their record stream) runs from the first block's start on, continued after a 24-byte header
/// in each later block (type [`JBlockType::FastCommitMore`]), and an XXH3-64 over every
/// byte of the sectors it fills ends the last of them. A torn write, where some sectors are
/// new and others old, fails that hash, as any flipped byte does. Only those sectors need be
/// written: the rest of the last block is never read. Only transactions of records alone,
/// without revokes or whole blocks, that fit [`MAX_FAST_BLOCKS`] (one without the span
/// feature) take this form; the others keep descriptor, blocks and commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FastCommit {
    pub tid: Tid,
    /// Multiwrite tags only.
    pub tags: Vec<Tag>,
    /// The record stream: the tags' bytes, in tag order.
    pub stream: Vec<u8>,
    pub handle_count: u32,
    pub commit_time_ns: i64,
    /// Tags in the compact form ([`COMPACT_TAG_SIZE`] bytes, no record hash; the journal's
    /// FAST_COMMIT_COMPACT feature). Decoded compact tags carry the hash of their record as
    /// read, so later checks of it pass: the fast commit's hash has vouched for its bytes.
    pub compact: bool,
    /// Inode notes, after the tags (the journal's FAST_COMMIT_NOTES feature; empty without).
    pub notes: Vec<InodeNote>,
    /// The notes in the short form ([`SHORT_NOTE_SIZE`] bytes; the journal's
    /// FAST_COMMIT_SHORT_NOTES feature): every note's size below 2^32. False without notes.
    pub short_notes: bool,
}

const FAST_COUNT_AT: usize = 16;
const FAST_STREAM_AT: usize = 20;
const FAST_HANDLES_AT: usize = 24;
const FAST_SECTORS_AT: usize = 28;
const FAST_TIME_AT: usize = 32;
const FAST_TAGS_AT: usize = 40;
/// The hash: the last 8 bytes of the sectors the fast commit fills.
const FAST_HASH_LEN: usize = 8;
/// What every fast commit carries whatever its records: its fields and its hash.
pub const FAST_FIXED_LEN: usize = FAST_TAGS_AT + FAST_HASH_LEN;
/// A continuation block: its index in the span, the sectors it fills, then content.
const FAST_MORE_INDEX_AT: usize = 16;
const FAST_MORE_SECTORS_AT: usize = 20;
const FAST_MORE_AT: usize = 24;
/// The unit a device writes atomically, and of the short writes of commit blocks.
pub const SECTOR: usize = 512;
/// The most blocks a fast commit spans (a longer transaction takes the classic form). Bounds
/// what recovery buffers before it can check the hash; 16 blocks of content never take more
/// log blocks than the classic form of the same records (a descriptor, multiwrite blocks and a
/// commit block), which the commit's space reservation counts.
pub const MAX_FAST_BLOCKS: usize = 16;

/// Where a fast commit's bytes lie: `blocks` blocks, the last filling `last_sectors`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastSpan {
    pub blocks: usize,
    pub last_sectors: usize,
}

impl FastSpan {
    /// The span of `content` bytes of fields, tags and records, with the hash after them.
    fn of(block_size: usize, content: usize) -> FastSpan {
        let need = content + FAST_HASH_LEN;
        if need <= block_size {
            return FastSpan { blocks: 1, last_sectors: need.div_ceil(SECTOR) };
        }
        let more = block_size - FAST_MORE_AT;
        let rest = need - block_size;
        let blocks = 1 + rest.div_ceil(more);
        let in_last = FAST_MORE_AT + rest - (blocks - 2) * more;
        FastSpan { blocks, last_sectors: in_last.div_ceil(SECTOR) }
    }

    /// All the sectors it fills: the first block's sectors field.
    fn sectors(self, block_size: usize) -> usize {
        (self.blocks - 1) * (block_size / SECTOR) + self.last_sectors
    }

    /// From the first block's sectors field.
    fn from_sectors(block_size: usize, sectors: usize) -> Option<FastSpan> {
        let per = block_size / SECTOR;
        if sectors == 0 || per == 0 {
            return None;
        }
        let blocks = sectors.div_ceil(per);
        (blocks <= MAX_FAST_BLOCKS).then(|| FastSpan { blocks, last_sectors: sectors - (blocks - 1) * per })
    }

    /// Where the hash lies in the last block.
    fn hash_at(self) -> usize {
        self.last_sectors * SECTOR - FAST_HASH_LEN
    }

    /// The bytes of block `k` that carry the span (whole blocks but the last).
    fn filled(self, block_size: usize, k: usize) -> usize {
        if k + 1 == self.blocks {
            self.last_sectors * SECTOR
        } else {
            block_size
        }
    }
}

impl FastCommit {
    /// Bytes one tag takes.
    fn tag_size(compact: bool) -> usize {
        if compact { COMPACT_TAG_SIZE } else { TAG_SIZE }
    }

    /// Bytes one note takes.
    pub fn note_size(short: bool) -> usize {
        if short { SHORT_NOTE_SIZE } else { NOTE_SIZE }
    }

    /// Bytes of fields, tags, notes and records (the hash and continuation headers not
    /// counted).
    fn content_len(tags: usize, notes: usize, stream: usize, compact: bool, short: bool) -> usize {
        FAST_TAGS_AT + tags * Self::tag_size(compact) + notes * Self::note_size(short) + stream
    }

    /// Bytes of a fast commit that carry something: fields, tags, notes, records and the hash
    /// (continuation headers and the padding to a sector not counted).
    pub fn carried_len(tags: usize, notes: usize, stream: usize, compact: bool, short: bool) -> usize {
        Self::content_len(tags, notes, stream, compact, short) + FAST_HASH_LEN
    }

    /// Bytes a fast commit that carries `carried` bytes ([`FastCommit::carried_len`]) writes:
    /// whole blocks but the last, and of the last its sectors when commits are written short
    /// (docs/FORMAT.md, "Short commit writes"), else the whole block.
    pub fn written_len(block_size: usize, carried: usize, short: bool) -> usize {
        let span = FastSpan::of(block_size, carried.saturating_sub(FAST_HASH_LEN));
        (span.blocks - 1) * block_size + if short { span.last_sectors * SECTOR } else { block_size }
    }

    /// The span `tags` tags (compact or not) with `stream` record bytes take.
    pub fn span(block_size: usize, tags: usize, stream: usize, compact: bool) -> FastSpan {
        Self::span_with_notes(block_size, tags, 0, stream, compact, false)
    }

    /// The span with `notes` inode notes as well (short ones or not).
    pub fn span_with_notes(block_size: usize, tags: usize, notes: usize, stream: usize, compact: bool, short: bool) -> FastSpan {
        FastSpan::of(block_size, Self::content_len(tags, notes, stream, compact, short))
    }

    /// Whether `tags` full tags with `stream` record bytes fit one block.
    pub fn fits(block_size: usize, tags: usize, stream: usize) -> bool {
        Self::fits_in(block_size, tags, stream, 1, false)
    }

    /// Whether they fit `max_blocks` blocks (at most [`MAX_FAST_BLOCKS`]).
    pub fn fits_in(block_size: usize, tags: usize, stream: usize, max_blocks: usize, compact: bool) -> bool {
        Self::fits_with_notes(block_size, tags, 0, stream, max_blocks, compact, false)
    }

    /// Whether they fit with `notes` inode notes, short or not (within the count fields'
    /// widths).
    pub fn fits_with_notes(block_size: usize, tags: usize, notes: usize, stream: usize, max_blocks: usize, compact: bool, short: bool) -> bool {
        let counts = notes == 0 || (tags <= MAX_NOTED_TAGS && notes <= MAX_NOTES);
        tags >= 1 && counts && Self::span_with_notes(block_size, tags, notes, stream, compact, short).blocks <= max_blocks.min(MAX_FAST_BLOCKS)
    }

    /// Whether a tag can take the compact form: a record (not escaped) of a block a compact
    /// tag can name.
    pub fn compactable(t: &Tag) -> bool {
        t.is_multiwrite() && t.flags & tag_flags::ESCAPED == 0 && t.fs_block.get() <= MAX_COMPACT_TAG_BLOCK
    }

    /// Encodes into one block; the transaction must fit one ([`FastCommit::fits`]).
    pub fn encode(&self, out: &mut [u8]) {
        let blocks = self.encode_span(out.len());
        assert!(blocks.len() == 1, "a fast commit fits its block");
        out.copy_from_slice(&blocks[0]);
    }

    /// Encodes into the blocks of its span, in log order.
    pub fn encode_span(&self, block_size: usize) -> Vec<Vec<u8>> {
        let (n, m, len) = (self.tags.len(), self.notes.len(), self.stream.len());
        assert!(n >= 1 && block_size >= SECTOR && block_size % SECTOR == 0);
        assert!(m == 0 || (n <= MAX_NOTED_TAGS && m <= MAX_NOTES), "the count fields hold the tags and notes");
        let short = self.short_notes && m > 0;
        assert!(!short || self.notes.iter().all(|n| n.size <= u32::MAX as u64), "a short note's size fits 32 bits");
        debug_assert_eq!(Descriptor::stream_len(&self.tags), len);
        let content_len = Self::content_len(n, m, len, self.compact, short);
        let span = FastSpan::of(block_size, content_len);
        assert!(span.blocks <= MAX_FAST_BLOCKS, "a fast commit spans at most {MAX_FAST_BLOCKS} blocks");
        let mut c = vec![0u8; content_len];
        put_header(&mut c, JBlockType::FastCommit, self.tid);
        let count = if m == 0 { n as u32 } else { n as u32 | (m as u32) << 16 | FAST_COUNT_NOTES };
        Le::put_u32(&mut c, FAST_COUNT_AT, count | if self.compact { FAST_COUNT_COMPACT } else { 0 });
        Le::put_u32(&mut c, FAST_STREAM_AT, len as u32);
        // The count is what the commit tells a reader, not what replay needs: one past 2^31 - 1
        // (which no transaction reaches) is written as that.
        let handles = self.handle_count.min(FAST_HANDLES_SHORT_NOTES - 1);
        Le::put_u32(&mut c, FAST_HANDLES_AT, handles | if short { FAST_HANDLES_SHORT_NOTES } else { 0 });
        Le::put_u32(&mut c, FAST_SECTORS_AT, span.sectors(block_size) as u32);
        Le::put_i64(&mut c, FAST_TIME_AT, self.commit_time_ns);
        let size = Self::tag_size(self.compact);
        for (i, t) in self.tags.iter().enumerate() {
            assert!(t.is_multiwrite() && t.fs_block.get() <= MAX_TAG_BLOCK);
            if self.compact {
                assert!(Self::compactable(t), "a compact tag names a record of a block below 2^46");
                put_compact_tag(&mut c, FAST_TAGS_AT + i * size, t);
            } else {
                put_tag(&mut c, FAST_TAGS_AT + i * size, t);
            }
        }
        let mut at = FAST_TAGS_AT + n * size;
        for note in &self.notes {
            Le::put_u32(&mut c, at, note.ino);
            Le::put_u32(&mut c, at + 4, note.age_ns);
            if short {
                Le::put_u32(&mut c, at + 8, note.size as u32);
            } else {
                Le::put_u64(&mut c, at + 8, note.size);
            }
            at += Self::note_size(short);
        }
        c[at..].copy_from_slice(&self.stream);
        let mut blocks = Vec::with_capacity(span.blocks);
        let mut from = 0;
        for k in 0..span.blocks {
            let mut b = vec![0u8; block_size];
            let head = if k == 0 {
                0
            } else {
                put_header(&mut b, JBlockType::FastCommitMore, self.tid);
                Le::put_u32(&mut b, FAST_MORE_INDEX_AT, k as u32);
                Le::put_u32(&mut b, FAST_MORE_SECTORS_AT, (span.filled(block_size, k) / SECTOR) as u32);
                FAST_MORE_AT
            };
            let take = (block_size - head).min(content_len - from);
            b[head..head + take].copy_from_slice(&c[from..from + take]);
            from += take;
            blocks.push(b);
        }
        let h = span_hash(self.tid, span, &blocks);
        Le::put_u64(&mut blocks[span.blocks - 1], span.hash_at(), h);
        blocks
    }

    /// The span a fast commit's first block announces, its header checked (not its hash,
    /// which needs the whole span).
    pub fn first_span(b: &[u8]) -> Result<FastSpan, FormatError> {
        const W: &str = "journal fast commit";
        need(W, b, SECTOR)?;
        let Some((JBlockType::FastCommit, _)) = header(b) else {
            return Err(invalid(W, "not a fast commit block"));
        };
        let sectors = Le::u32(b, FAST_SECTORS_AT) as usize;
        let Some(span) = FastSpan::from_sectors(b.len(), sectors) else {
            return Err(invalid(W, format!("{sectors} sectors: more than {MAX_FAST_BLOCKS} blocks")));
        };
        let (n, m, compact) = Self::count(b);
        let short = Self::short_notes(b);
        let len = Le::u32(b, FAST_STREAM_AT) as usize;
        if n == 0 || n > MAX_FAST_BLOCKS * b.len() / Self::tag_size(compact) || len > MAX_FAST_BLOCKS * b.len() || Self::span_with_notes(b.len(), n, m, len, compact, short) != span {
            return Err(invalid(W, format!("{n} tags, {m} notes and {len} stream bytes do not fill {sectors} sectors")));
        }
        if m == 0 && Le::u32(b, FAST_COUNT_AT) & FAST_COUNT_NOTES != 0 {
            return Err(invalid(W, "the notes bit is set with no notes"));
        }
        if m == 0 && short {
            return Err(invalid(W, "the short notes bit is set with no notes"));
        }
        Ok(span)
    }

    /// The handles field's short-notes bit.
    fn short_notes(b: &[u8]) -> bool {
        Le::u32(b, FAST_HANDLES_AT) & FAST_HANDLES_SHORT_NOTES != 0
    }

    /// The tag count field: how many tags and notes, and whether the tags are compact.
    fn count(b: &[u8]) -> (usize, usize, bool) {
        let v = Le::u32(b, FAST_COUNT_AT);
        let compact = v & FAST_COUNT_COMPACT != 0;
        if v & FAST_COUNT_NOTES != 0 {
            ((v as usize) & MAX_NOTED_TAGS, (v >> 16) as usize & MAX_NOTES, compact)
        } else {
            ((v & !FAST_COUNT_COMPACT) as usize, 0, compact)
        }
    }

    /// Decodes and checks a fast commit of one block. `verify_hash` false skips the hash
    /// (the `fast_commit_unchecked` canary only: then a torn block passes).
    pub fn decode(b: &[u8], verify_hash: bool) -> Result<Self, FormatError> {
        Self::decode_span(&[b], verify_hash)
    }

    /// Decodes and checks a fast commit from the blocks of its span, in log order.
    pub fn decode_span(blocks: &[&[u8]], verify_hash: bool) -> Result<Self, FormatError> {
        const W: &str = "journal fast commit";
        let first = blocks.first().copied().unwrap_or_default();
        let span = Self::first_span(first)?;
        let (bs, tid) = (first.len(), Tid::new(Le::u64(first, 8)));
        if blocks.len() != span.blocks {
            return Err(invalid(W, format!("{} blocks read of a span of {}", blocks.len(), span.blocks)));
        }
        for (k, b) in blocks.iter().enumerate().skip(1) {
            let sectors = span.filled(bs, k) / SECTOR;
            let ok = b.len() == bs && header(b) == Some((JBlockType::FastCommitMore, tid)) && Le::u32(b, FAST_MORE_INDEX_AT) as usize == k && Le::u32(b, FAST_MORE_SECTORS_AT) as usize == sectors;
            if !ok {
                return Err(invalid(W, format!("block {k} of the span is not its continuation (torn, or never written)")));
            }
        }
        if verify_hash && Le::u64(blocks[span.blocks - 1], span.hash_at()) != span_hash(tid, span, blocks) {
            return Err(invalid(W, "the hash does not match (torn, or never written whole)"));
        }
        // The content, continuation headers and hash left out.
        let mut c = Vec::with_capacity(span.blocks * bs);
        for (k, b) in blocks.iter().enumerate() {
            let end = if k + 1 == span.blocks { span.hash_at() } else { bs };
            c.extend_from_slice(&b[if k == 0 { 0 } else { FAST_MORE_AT }..end]);
        }
        let (n, m, compact) = Self::count(&c);
        let short = Self::short_notes(&c);
        let (size, note_size) = (Self::tag_size(compact), Self::note_size(short));
        let stream_len = Le::u32(&c, FAST_STREAM_AT) as usize;
        let notes_at = FAST_TAGS_AT + n * size;
        let at = notes_at + m * note_size;
        if at + stream_len > c.len() {
            return Err(invalid(W, format!("{n} tags, {m} notes and {stream_len} stream bytes overrun the span")));
        }
        let notes: Vec<InodeNote> = (0..m)
            .map(|k| {
                let p = notes_at + k * note_size;
                let size = if short { Le::u32(&c, p + 8) as u64 } else { Le::u64(&c, p + 8) };
                InodeNote { ino: Le::u32(&c, p), age_ns: Le::u32(&c, p + 4), size }
            })
            .collect();
        if let Some(bad) = notes.iter().find(|n| n.ino == 0) {
            return Err(invalid(W, format!("note {bad:?} names inode 0")));
        }
        let mut tags = Vec::with_capacity(n);
        let mut from = at;
        for i in 0..n {
            let t = if compact {
                // No stored hash: the one of the bytes as read (the span's hash vouched for
                // them, or the caller asked for no check). A length past the stream is caught
                // below, by the sum of lengths.
                let mut t = get_compact_tag(&c, FAST_TAGS_AT + i * size);
                let end = (from + t.len as usize).min(at + stream_len);
                t.data_hash = data_hash(t.fs_block, t.offset, &c[from.min(end)..end]);
                from = end;
                t
            } else {
                get_tag(&c, FAST_TAGS_AT + i * size)
            };
            if t.flags & !tag_flags::KNOWN != 0 || !t.is_multiwrite() || t.len == 0 || t.offset as usize + t.len as usize > bs || t.flags & tag_flags::ESCAPED != 0 {
                return Err(invalid(W, format!("tag {t:?} is not a well-formed multiwrite tag")));
            }
            tags.push(t);
        }
        if Descriptor::stream_len(&tags) != stream_len {
            return Err(invalid(W, format!("{stream_len} stream bytes disagree with the tags' {}", Descriptor::stream_len(&tags))));
        }
        Ok(FastCommit {
            tid,
            tags,
            stream: c[at..at + stream_len].to_vec(),
            handle_count: Le::u32(&c, FAST_HANDLES_AT) & !FAST_HANDLES_SHORT_NOTES,
            commit_time_ns: Le::i64(&c, FAST_TIME_AT),
            compact,
            notes,
            short_notes: short,
        })
    }
}

/// The bytes of a commit block that carry it, which are all a commit needs written: the first
/// sector of a classic commit block (its record and CRC lie there), the sectors a fast commit
/// fills in its last block. Other blocks, and a block that is neither, are written whole.
pub fn written_len(block: &[u8]) -> usize {
    let sectors = match header(block) {
        Some((JBlockType::Commit, _)) => 1,
        Some((JBlockType::FastCommit, _)) if block.len() >= SECTOR => Le::u32(block, FAST_SECTORS_AT) as usize,
        Some((JBlockType::FastCommitMore, _)) if block.len() >= SECTOR => Le::u32(block, FAST_MORE_SECTORS_AT) as usize,
        _ => 0,
    };
    if sectors >= 1 && sectors * SECTOR <= block.len() {
        sectors * SECTOR
    } else {
        block.len()
    }
}

/// The hash that ends a fast commit's sectors: XXH3-64 of every byte before it in the span
/// (continuation headers included), seeded by its tid.
fn span_hash(tid: Tid, span: FastSpan, blocks: &[impl AsRef<[u8]>]) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::with_seed(tx_hash_seed(tid) ^ 0x6661_7374);
    for (k, b) in blocks.iter().enumerate() {
        let b = b.as_ref();
        h.update(if k + 1 == span.blocks { &b[..span.hash_at()] } else { b });
    }
    h.digest()
}

fn put_tag(out: &mut [u8], at: usize, t: &Tag) {
    Le::put_u64(out, at, t.fs_block.get());
    Le::put_u16(out, at + 6, t.len);
    Le::put_u16(out, at + 8, t.flags);
    Le::put_u16(out, at + 10, t.offset);
    Le::put_u32(out, at + 12, t.data_hash);
}

/// A compact tag ([`COMPACT_TAG_SIZE`]): block, FRESH and METADATA in 48 bits, offset, length.
fn put_compact_tag(out: &mut [u8], at: usize, t: &Tag) {
    let mut v = t.fs_block.get();
    if t.flags & tag_flags::FRESH != 0 {
        v |= COMPACT_FRESH;
    }
    if t.flags & tag_flags::METADATA != 0 {
        v |= COMPACT_METADATA;
    }
    out[at..at + 6].copy_from_slice(&v.to_le_bytes()[..6]);
    Le::put_u16(out, at + 6, t.offset);
    Le::put_u16(out, at + 8, t.len);
}

fn get_compact_tag(b: &[u8], at: usize) -> Tag {
    let mut v = [0u8; 8];
    v[..6].copy_from_slice(&b[at..at + 6]);
    let v = u64::from_le_bytes(v);
    let flags = tag_flags::MULTIWRITE | if v & COMPACT_FRESH != 0 { tag_flags::FRESH } else { 0 } | if v & COMPACT_METADATA != 0 { tag_flags::METADATA } else { 0 };
    Tag { fs_block: HomeBlock::new(v & MAX_COMPACT_TAG_BLOCK), flags, offset: Le::u16(b, at + 6), len: Le::u16(b, at + 8), data_hash: 0 }
}

fn get_tag(b: &[u8], at: usize) -> Tag {
    Tag { fs_block: HomeBlock::new(Le::u64(b, at) & MAX_TAG_BLOCK), len: Le::u16(b, at + 6), flags: Le::u16(b, at + 8), offset: Le::u16(b, at + 10), data_hash: Le::u32(b, at + 12) }
}

/// Chains the transaction hash over one more logged block.
pub fn tx_hash_append(h: u64, block: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(block, h)
}

/// The seed of a transaction hash: depends on the tid so that blocks of another transaction
/// cannot match.
pub fn tx_hash_seed(tid: Tid) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(&tid.get().to_le_bytes(), 0x6f6b_6a6c_7478)
}

/// The tag hash of a logged block (offset 0) or record (at `offset`) for `fs_block`.
pub fn data_hash(fs_block: HomeBlock, offset: u16, bytes: &[u8]) -> u32 {
    xxhash_rust::xxh3::xxh3_64_with_seed(bytes, fs_block.get() ^ ((offset as u64) << 48)) as u32
}

/// Bytes of record stream one multiwrite block carries.
pub fn multiwrite_capacity(block_size: usize) -> usize {
    block_size - MULTIWRITE_HEADER
}

/// Encodes a multiwrite block holding `bytes` of a record stream.
pub fn encode_multiwrite(out: &mut [u8], bytes: &[u8]) {
    assert!(bytes.len() <= multiwrite_capacity(out.len()));
    out.fill(0);
    Le::put_u32(out, 0, MULTIWRITE_MAGIC);
    Le::put_u32(out, 4, bytes.len() as u32);
    out[MULTIWRITE_HEADER..MULTIWRITE_HEADER + bytes.len()].copy_from_slice(bytes);
}

/// The stream bytes of a multiwrite block.
pub fn decode_multiwrite(b: &[u8]) -> Result<&[u8], FormatError> {
    const W: &str = "multiwrite block";
    need(W, b, MULTIWRITE_HEADER)?;
    if Le::u32(b, 0) != MULTIWRITE_MAGIC {
        return Err(FormatError::BadMagic { what: W, found: Le::u32(b, 0) as u64, expected: MULTIWRITE_MAGIC as u64 });
    }
    let n = Le::u32(b, 4) as usize;
    if n > multiwrite_capacity(b.len()) {
        return Err(invalid(W, format!("{n} stream bytes do not fit")));
    }
    Ok(&b[MULTIWRITE_HEADER..MULTIWRITE_HEADER + n])
}

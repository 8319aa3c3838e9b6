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
//! Fast commits, the one-piece form of a small transaction, are in `fast.rs`.
//!
//! Byte maps: docs/FORMAT.md, "Journal".

use crate::ids::HomeBlock;
use super::{check_crc, invalid, need, put_crc, seed, FormatError, Le};
pub use crate::ids::{LogPos, Tid};

mod fast;
pub use fast::*;

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
    /// The final block was written in place by this transaction, beside its commit and under
    /// the same flush, and is not in the log: the hash is of the block as written home, and
    /// recovery checks it only in the newest transaction, which the crash may have torn
    /// (docs/FORMAT.md, "In-place tags"; the journal's IN_PLACE_TAGS feature).
    pub const IN_PLACE: u16 = 1 << 4;
    pub const KNOWN: u16 = ESCAPED | METADATA | MULTIWRITE | FRESH | IN_PLACE;
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
    /// Descriptors may carry in-place tags ([`super::tag_flags::IN_PLACE`]): new blocks written
    /// home under the commit's own flush, checked by recovery against their tags' hashes.
    pub const IN_PLACE_TAGS: u32 = 1 << 7;
    pub const KNOWN: u32 = TX_CHECKSUM | MULTIWRITE | FAST_COMMIT | FAST_COMMIT_SPAN | FAST_COMMIT_COMPACT | FAST_COMMIT_NOTES | FAST_COMMIT_SHORT_NOTES | IN_PLACE_TAGS;
    /// What `okeanos tune` may turn on or off on a clean journal: forms a commit may take,
    /// which recovery tells apart by the block itself, so a journal with nothing to replay can
    /// gain or lose them (docs/FORMAT.md, "Journal features").
    pub const TUNABLE: u32 = FAST_COMMIT | FAST_COMMIT_SPAN | FAST_COMMIT_COMPACT | FAST_COMMIT_NOTES | FAST_COMMIT_SHORT_NOTES | IN_PLACE_TAGS;
    /// Every feature by the name `okeanos tune` and `okeanos stat` use.
    pub const NAMES: [(u32, &str); 8] = [
        (TX_CHECKSUM, "tx_checksum"),
        (MULTIWRITE, "multiwrite"),
        (FAST_COMMIT, "fast_commit"),
        (FAST_COMMIT_SPAN, "fast_commit_span"),
        (FAST_COMMIT_COMPACT, "fast_commit_compact"),
        (FAST_COMMIT_NOTES, "fast_commit_notes"),
        (FAST_COMMIT_SHORT_NOTES, "fast_commit_short_notes"),
        (IN_PLACE_TAGS, "in_place_tags"),
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

    /// Whether descriptors may carry in-place tags in this journal (IN_PLACE_TAGS).
    pub fn in_place_tags(&self) -> bool {
        self.features & jfeature::IN_PLACE_TAGS != 0
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
    /// An in-place tag naming `fs_block`, written home with `data_hash` (docs/FORMAT.md,
    /// "In-place tags").
    pub fn in_place(fs_block: HomeBlock, data_hash: u32) -> Self {
        Tag::regular(fs_block, tag_flags::IN_PLACE, data_hash)
    }
    /// An in-place tag: names a block written home, not one in the log.
    pub fn is_in_place(&self) -> bool {
        self.flags & tag_flags::IN_PLACE != 0
    }
    /// An in-place tag as written: beside IN_PLACE at most METADATA, and no range. What both
    /// the descriptor's and the fast commit's readers accept.
    pub fn is_well_formed_in_place(&self) -> bool {
        self.is_in_place() && self.flags & !(tag_flags::IN_PLACE | tag_flags::METADATA) == 0 && self.len == 0 && self.offset == 0
    }
    /// Whether a logged block follows the descriptor for this tag (a regular tag that is not
    /// in place).
    pub fn has_logged_block(&self) -> bool {
        !self.is_multiwrite() && !self.is_in_place()
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
            if t.is_in_place() && !t.is_well_formed_in_place() {
                return Err(invalid(W, format!("in-place tag {t:?} is also a record, escaped or fresh, or carries a range")));
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



fn put_tag(out: &mut [u8], at: usize, t: &Tag) {
    Le::put_u64(out, at, t.fs_block.get());
    Le::put_u16(out, at + 6, t.len);
    Le::put_u16(out, at + 8, t.flags);
    Le::put_u16(out, at + 10, t.offset);
    Le::put_u32(out, at + 12, t.data_hash);
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

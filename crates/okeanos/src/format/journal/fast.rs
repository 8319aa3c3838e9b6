//! Fast commits: a transaction of records written with its commit in one piece, one block or
//! a short span of blocks, its sectors ended by one hash (issue 33's "small commits in one
//! block"; ext4's fast commits). Also what only they carry: compact tags and inode notes.
//!
//! Byte maps: docs/FORMAT.md, "Fast commit block", "Compact tags", "Inode notes".

use crate::format::{invalid, need, FormatError, Le};
use crate::ids::HomeBlock;
use super::{data_hash, get_tag, header, put_header, put_tag, tag_flags, tx_hash_seed, Descriptor, JBlockType, Tag, Tid, MAX_TAG_BLOCK, TAG_SIZE};

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
    /// Multiwrite tags, and on a journal with IN_PLACE_TAGS in-place tags (full tags only:
    /// a compact tag has no hash), which carry no record bytes.
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
            assert!((t.is_multiwrite() || (t.is_in_place() && !self.compact)) && t.fs_block.get() <= MAX_TAG_BLOCK);
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
            // An in-place tag (full tags only): a block written home beside the commit, no
            // record bytes.
            let in_place = !compact && t.is_well_formed_in_place();
            if !in_place && (t.flags & !tag_flags::KNOWN != 0 || !t.is_multiwrite() || t.is_in_place() || t.len == 0 || t.offset as usize + t.len as usize > bs || t.flags & tag_flags::ESCAPED != 0) {
                return Err(invalid(W, format!("tag {t:?} is not a well-formed multiwrite or in-place tag")));
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


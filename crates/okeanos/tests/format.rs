//! Round trip and corruption detection for every on-disk structure: a flipped byte anywhere in
//! a checksummed structure is caught, and decoding garbage never panics.

use okeanos::format::dir::{DirBlock, DirEntry, FileType};
use okeanos::format::extent::{Extent, ExtentBlock};
use okeanos::format::group::{GroupDesc, GD_SIZE};
use okeanos::format::inode::{Inode, INODE_SIZE, S_IFREG};
use okeanos::format::journal::{self as jf, CommitBlock, Descriptor, JournalSuperblock, RevokeBlock, Tag};
use okeanos::format::superblock::Superblock;
use okeanos::format::FormatError;
use okeanos::{HomeBlock, MemDevice, MkfsOptions};
use proptest::prelude::*;

const BS: usize = 4096;

fn sample_sb() -> Superblock {
    let dev = MemDevice::new(64 << 20);
    okeanos::Okeanos::mkfs(&dev, None, &MkfsOptions { journal_blocks: 1024, label: "test".into(), ..Default::default() }).unwrap()
}

/// Flips each byte of `covered` in turn (every byte for small structures, a stride for big
/// ones) and checks that `decode` rejects the result or, for bytes outside the checksum,
/// returns something different or equal but never panics.
fn every_flip_caught(bytes: &[u8], covered: std::ops::Range<usize>, decode: impl Fn(&[u8]) -> Result<(), FormatError>) {
    decode(bytes).expect("the original decodes");
    let stride = if covered.len() > 1024 { 7 } else { 1 };
    for i in covered.step_by(stride) {
        for mask in [0x01u8, 0x80, 0xff] {
            let mut b = bytes.to_vec();
            b[i] ^= mask;
            assert!(decode(&b).is_err(), "flipping byte {i} with {mask:#x} went unnoticed");
        }
    }
}

#[test]
fn superblock_round_trip_and_flips() {
    let sb = sample_sb();
    let mut b = vec![0u8; BS];
    sb.encode(&mut b);
    assert_eq!(Superblock::decode(&b).unwrap(), sb);
    every_flip_caught(&b, 0..512, |x| Superblock::decode(x).map(|_| ()));
    assert!(matches!(Superblock::decode(&vec![0u8; BS]), Err(FormatError::BadMagic { .. })));
    assert!(matches!(Superblock::decode(&b[..100]), Err(FormatError::Truncated { .. })));
}

#[test]
fn group_descriptor_round_trip_and_flips() {
    let gd = GroupDesc { block_bitmap: HomeBlock::new(300), inode_bitmap: HomeBlock::new(301), inode_table: HomeBlock::new(302), log_area_start: 0, log_area_blocks: 0, free_blocks: 1000, free_inodes: 500, used_dirs: 3, block_bitmap_crc: 7, inode_bitmap_crc: 9 };
    let mut b = vec![0u8; GD_SIZE];
    gd.encode(5, &mut b);
    assert_eq!(GroupDesc::decode(5, &b).unwrap(), gd);
    // Read back as another group's descriptor: caught (the seed includes the group).
    assert!(GroupDesc::decode(6, &b).is_err());
    every_flip_caught(&b, 0..GD_SIZE, |x| GroupDesc::decode(5, x).map(|_| ()));
}

#[test]
fn inode_round_trip_and_flips() {
    let i = Inode {
        mode: S_IFREG | 0o644,
        uid: 1000,
        gid: 100,
        nlink: 2,
        size: 123_456,
        atime_ns: 1,
        mtime_ns: 2,
        ctime_ns: 3,
        generation: 4,
        extent_count: 12,
        extent_block: HomeBlock::new(9999),
        orphan_next: 0,
        parent: 0,
        flags: 0,
        rdev: 0,
        xattr_block: HomeBlock::new(777),
        inline: (0..10).map(|k| Extent { logical: k * 10, len: 5, physical: HomeBlock::new(5000 + k as u64 * 100) }).collect(),
    };
    let mut b = vec![0u8; INODE_SIZE];
    i.encode(42, &mut b);
    assert_eq!(Inode::decode(42, &b).unwrap(), i);
    assert!(Inode::decode(43, &b).is_err(), "an inode in the wrong slot is caught");
    // A device keeps its number.
    let dev = Inode { mode: okeanos::format::inode::S_IFCHR | 0o600, rdev: (1 << 8) | 3, nlink: 1, ..Default::default() };
    let mut d = vec![0u8; INODE_SIZE];
    dev.encode(7, &mut d);
    assert_eq!(Inode::decode(7, &d).unwrap().rdev, (1 << 8) | 3);
    every_flip_caught(&b, 0..INODE_SIZE, |x| Inode::decode(42, x).map(|_| ()));
    assert!(Inode::decode(1, &vec![0u8; INODE_SIZE]).unwrap().is_free());
}

#[test]
fn extent_block_round_trip_and_flips() {
    let eb = ExtentBlock { owner: 77, next: HomeBlock::new(123), extents: (0..200).map(|k| Extent { logical: k * 3, len: 2, physical: HomeBlock::new(10_000 + k as u64 * 7) }).collect() };
    let mut b = vec![0u8; BS];
    eb.encode(&mut b);
    assert_eq!(ExtentBlock::decode(&b).unwrap(), eb);
    every_flip_caught(&b, 0..BS, |x| ExtentBlock::decode(x).map(|_| ()));
}

#[test]
fn directory_block_round_trip_and_flips() {
    let db = DirBlock {
        owner: 5,
        entries: (0..50).map(|k| DirEntry { ino: 100 + k, ftype: if k % 3 == 0 { FileType::Directory } else { FileType::Regular }, name: format!("file-{k}").into_bytes() }).collect(),
    };
    let mut b = vec![0u8; BS];
    db.encode(&mut b);
    assert_eq!(DirBlock::decode(&b).unwrap(), db);
    every_flip_caught(&b, 0..BS, |x| DirBlock::decode(x).map(|_| ()));
}

#[test]
fn journal_blocks_round_trip_and_flips() {
    let jsb = JournalSuperblock { version: 1, features: jf::jfeature::TX_CHECKSUM, block_size: 4096, total_blocks: 1024, first: okeanos::LogPos::new(1), sequence: okeanos::Tid::new(77), start: okeanos::LogPos::new(5), uuid: [1; 16], fs_uuid: [2; 16], errno: 0, remote: jf::RemoteState { local: true, epoch: 7, upto: okeanos::Tid::new(99) }, pipeline: 4 };
    let mut b = vec![0u8; BS];
    jsb.encode(&mut b);
    assert_eq!(JournalSuperblock::decode(&b).unwrap(), jsb);
    every_flip_caught(&b, 0..512, |x| JournalSuperblock::decode(x).map(|_| ()));

    let d = Descriptor { tid: okeanos::Tid::new(9), tags: (0..100).map(|k| Tag::regular(HomeBlock::new(1000 + k), jf::tag_flags::METADATA, k as u32 * 31)).collect(), inline: vec![] };
    d.encode(&mut b);
    assert_eq!(Descriptor::decode(&b).unwrap(), d);
    every_flip_caught(&b, 0..BS, |x| Descriptor::decode(x).map(|_| ()));

    // Regular and multiwrite tags mixed, with the record stream partly inline.
    let mut tags: Vec<Tag> = (0..40)
        .map(|k| Tag { fs_block: HomeBlock::new(5000 + k), flags: jf::tag_flags::MULTIWRITE | if k == 0 { jf::tag_flags::FRESH } else { 0 }, offset: (k * 64) as u16, len: 128, data_hash: k as u32 })
        .collect();
    tags.push(Tag::regular(HomeBlock::new(77), 0, 5));
    let stream = Descriptor::stream_len(&tags);
    let inline_len = stream.min(Descriptor::inline_capacity(BS, tags.len()));
    let d = Descriptor { tid: okeanos::Tid::new(10), tags, inline: (0..inline_len).map(|i| i as u8).collect() };
    d.encode(&mut b);
    assert_eq!(Descriptor::decode(&b).unwrap(), d);
    every_flip_caught(&b, 0..BS, |x| Descriptor::decode(x).map(|_| ()));

    // In-place tags (docs/FORMAT.md, "In-place tags") beside records and a logged block: no
    // logged block follows for them; one that is also a record or escaped is refused.
    let mut tags: Vec<Tag> = (0..30).map(|k| Tag::regular(HomeBlock::new(9000 + k), jf::tag_flags::IN_PLACE, 0x5eed ^ k as u32)).collect();
    tags.push(Tag { fs_block: HomeBlock::new(40), flags: jf::tag_flags::MULTIWRITE | jf::tag_flags::METADATA, offset: 256, len: 30, data_hash: 1 });
    tags.push(Tag::regular(HomeBlock::new(41), jf::tag_flags::METADATA, 2));
    assert_eq!(tags.iter().filter(|t| t.has_logged_block()).count(), 1);
    assert!(tags[0].is_in_place() && !tags[0].has_logged_block() && !tags[0].is_multiwrite());
    let d = Descriptor { tid: okeanos::Tid::new(11), tags: tags.clone(), inline: vec![7; 30] };
    d.encode(&mut b);
    assert_eq!(Descriptor::decode(&b).unwrap(), d);
    every_flip_caught(&b, 0..BS, |x| Descriptor::decode(x).map(|_| ()));
    for bad in [jf::tag_flags::IN_PLACE | jf::tag_flags::ESCAPED, jf::tag_flags::IN_PLACE | jf::tag_flags::MULTIWRITE] {
        let mut t = tags.clone();
        t[0].flags = bad;
        if bad & jf::tag_flags::MULTIWRITE != 0 {
            t[0].len = 8;
        }
        let inline = Descriptor::stream_len(&t).min(Descriptor::inline_capacity(BS, t.len()));
        Descriptor { tid: okeanos::Tid::new(11), tags: t, inline: vec![7; inline] }.encode(&mut b);
        let err = Descriptor::decode(&b).unwrap_err().to_string();
        assert!(err.contains("in-place tag"), "flags {bad:#x}: {err}");
    }

    let mut mw = vec![0u8; BS];
    jf::encode_multiwrite(&mut mw, &[9u8; 1000]);
    assert_eq!(jf::decode_multiwrite(&mw).unwrap(), &[9u8; 1000][..]);
    assert!(jf::header(&mw).is_none(), "a multiwrite block never passes for a journal header");
    mw[0] ^= 1;
    assert!(jf::decode_multiwrite(&mw).is_err());

    let r = RevokeBlock { tid: okeanos::Tid::new(9), blocks: (0..300).map(HomeBlock::new).collect() };
    r.encode(&mut b);
    assert_eq!(RevokeBlock::decode(&b).unwrap(), r);
    every_flip_caught(&b, 0..BS, |x| RevokeBlock::decode(x).map(|_| ()));

    let c = CommitBlock { tid: okeanos::Tid::new(9), block_count: 101, tx_hash: 0xdead_beef_0bad_f00d, commit_time_ns: 12345, handle_count: 17 };
    c.encode(&mut b);
    assert_eq!(CommitBlock::decode(&b).unwrap(), c);
    // The commit record lies wholly in the first sector (written atomically).
    every_flip_caught(&b, 0..512, |x| CommitBlock::decode(x).map(|_| ()));
}

/// The fast commit block: round trip, every flipped byte caught (the hash covers the whole
/// block), any sector torn back to zeros or to an older block's bytes caught, and the bounds.
#[test]
fn fast_commit_round_trip_flips_and_torn_sectors() {
    let tags: Vec<Tag> = (0..6u64)
        .map(|k| Tag { fs_block: HomeBlock::new(300 + k), flags: jf::tag_flags::MULTIWRITE | if k == 0 { jf::tag_flags::FRESH } else { 0 }, offset: (k * 100) as u16, len: 500, data_hash: 0 })
        .collect();
    let stream: Vec<u8> = (0..3000).map(|i| (i * 7 % 251) as u8).collect();
    let tags: Vec<Tag> = tags.into_iter().enumerate().map(|(i, t)| Tag { data_hash: jf::data_hash(t.fs_block, t.offset, &stream[i * 500..(i + 1) * 500]), ..t }).collect();
    let f = jf::FastCommit { tid: okeanos::Tid::new(41), tags, stream, handle_count: 3, commit_time_ns: 99, compact: false, notes: Vec::new(), short_notes: false };
    let mut b = vec![0u8; BS];
    f.encode(&mut b);
    assert_eq!(jf::header(&b).map(|(k, t)| (k, t.get())), Some((jf::JBlockType::FastCommit, 41)));
    assert_eq!(jf::FastCommit::decode(&b, true).unwrap(), f);
    // 40 + 6 x 16 + 3000 + 8 bytes: 7 sectors are written and checked; the eighth is never read.
    let used = jf::written_len(&b);
    assert_eq!(used, 7 * 512);
    every_flip_caught(&b, 0..used, |x| jf::FastCommit::decode(x, true).map(|_| ()));
    for i in used..BS {
        let mut x = b.clone();
        x[i] ^= 0xff;
        assert_eq!(jf::FastCommit::decode(&x, true).unwrap(), f, "byte {i} lies past the written sectors");
    }
    // Torn writes: each written sector left as zeros, or as the same sector of another fast
    // commit (an earlier pass over the log), is caught.
    let mut older = vec![0u8; BS];
    jf::FastCommit { tid: okeanos::Tid::new(7), tags: f.tags[..2].to_vec(), stream: f.stream[..1000].to_vec(), handle_count: 1, commit_time_ns: 5, compact: false, notes: Vec::new(), short_notes: false }.encode(&mut older);
    assert_eq!(jf::written_len(&older), 3 * 512);
    for sector in 0..used / 512 {
        for old in [&vec![0u8; BS], &older] {
            let mut torn = b.clone();
            torn[sector * 512..(sector + 1) * 512].copy_from_slice(&old[sector * 512..(sector + 1) * 512]);
            if torn != b {
                assert!(jf::FastCommit::decode(&torn, true).is_err(), "sector {sector} torn back is not caught");
            }
        }
    }
    // A classic commit block is written as its first sector; other blocks whole.
    let mut c = vec![0u8; BS];
    CommitBlock { tid: okeanos::Tid::new(9), block_count: 3, tx_hash: 1, commit_time_ns: 2, handle_count: 1 }.encode(&mut c);
    assert_eq!(jf::written_len(&c), 512);
    assert_eq!(jf::written_len(&vec![7u8; BS]), BS);
    // Bounds: what fits, what does not.
    assert!(jf::FastCommit::fits(BS, 1, BS - 40 - 16 - 8));
    assert!(!jf::FastCommit::fits(BS, 1, BS - 40 - 16 - 7));
    assert!(!jf::FastCommit::fits(BS, 0, 0));
    // A tag count or stream length that cannot fit is an error, never a panic.
    for (at, v) in [(16usize, u32::MAX), (16, 300), (20, u32::MAX), (20, 5000), (28, 0), (28, 9), (28, u32::MAX), (28, 6)] {
        let mut x = b.clone();
        x[at..at + 4].copy_from_slice(&v.to_le_bytes());
        assert!(jf::FastCommit::decode(&x, false).is_err(), "field at {at} = {v}");
    }
}

/// A fast commit with in-place tags (docs/FORMAT.md, "In-place tags"): full tags naming blocks
/// written home, no record bytes, beside a record; round trip and flips. Refused: an in-place
/// tag that carries a range, or is escaped, fresh or a record too (the bytes a reader meets,
/// written past the encoder's own checks).
#[test]
fn fast_commit_with_in_place_tags_round_trip_and_refusals() {
    let stream = vec![5u8; 100];
    let rec = Tag { fs_block: HomeBlock::new(70), flags: jf::tag_flags::MULTIWRITE, offset: 8, len: 100, data_hash: jf::data_hash(HomeBlock::new(70), 8, &stream) };
    let tags = vec![Tag::regular(HomeBlock::new(900), jf::tag_flags::IN_PLACE, 0xfeed), rec, Tag::regular(HomeBlock::new(901), jf::tag_flags::IN_PLACE, 0xbeef)];
    let f = jf::FastCommit { tid: okeanos::Tid::new(12), tags: tags.clone(), stream, handle_count: 2, commit_time_ns: 3, compact: false, notes: Vec::new(), short_notes: false };
    let mut b = vec![0u8; BS];
    f.encode(&mut b);
    assert_eq!(jf::FastCommit::decode(&b, true).unwrap(), f);
    every_flip_caught(&b, 0..jf::written_len(&b), |x| jf::FastCommit::decode(x, true).map(|_| ()));
    // The first tag's bytes (at 40): block u48, len u16, flags u16, offset u16, hash u32.
    let f_ = jf::tag_flags::IN_PLACE;
    for (len, flags, offset) in [(4u16, f_, 0u16), (0, f_, 4), (0, f_ | jf::tag_flags::ESCAPED, 0), (0, f_ | jf::tag_flags::FRESH, 0), (0, f_ | jf::tag_flags::MULTIWRITE, 0)] {
        let mut x = b.clone();
        x[46..48].copy_from_slice(&len.to_le_bytes());
        x[48..50].copy_from_slice(&flags.to_le_bytes());
        x[50..52].copy_from_slice(&offset.to_le_bytes());
        let err = jf::FastCommit::decode(&x, false).unwrap_err().to_string();
        assert!(err.contains("tag") || err.contains("stream"), "len {len}, flags {flags:#x}, offset {offset}: {err}");
    }
}

/// A fast commit span: round trip over three blocks, every flipped byte of the written sectors
/// caught (continuation headers included), any sector of any block torn back to zeros or to an
/// older span's bytes caught, a continuation missing or out of order caught, the one-block form
/// unchanged, and the span's bounds.
#[test]
fn fast_commit_span_round_trip_flips_torn_sectors_and_bounds() {
    let records = |n: u64, len: usize, tid: u64| {
        let stream: Vec<u8> = (0..n as usize * len).map(|i| ((i as u64 * 13 + tid) % 251) as u8).collect();
        let tags: Vec<Tag> = (0..n)
            .map(|k| {
                let (fs_block, offset) = (HomeBlock::new(500 + k), (k % 8 * 7) as u16);
                let bytes = &stream[k as usize * len..(k as usize + 1) * len];
                Tag { fs_block, flags: jf::tag_flags::MULTIWRITE, offset, len: len as u16, data_hash: jf::data_hash(fs_block, offset, bytes) }
            })
            .collect();
        jf::FastCommit { tid: okeanos::Tid::new(tid), tags, stream, handle_count: n as u32, commit_time_ns: 7, compact: false, notes: Vec::new(), short_notes: false }
    };
    // 60 records of 128 bytes: 40 + 960 + 7,680 + 8 bytes of content and hash, three blocks.
    let f = records(60, 128, 77);
    let span = f.encode_span(BS);
    assert_eq!(span.len(), 3);
    assert_eq!(jf::header(&span[0]).map(|(k, t)| (k, t.get())), Some((jf::JBlockType::FastCommit, 77)));
    for b in &span[1..] {
        assert_eq!(jf::header(b).map(|(k, t)| (k, t.get())), Some((jf::JBlockType::FastCommitMore, 77)));
    }
    let refs = |v: &[Vec<u8>]| v.iter().map(|b| b.to_vec()).collect::<Vec<_>>();
    let decode = |v: &[Vec<u8>]| jf::FastCommit::decode_span(&v.iter().map(Vec::as_slice).collect::<Vec<_>>(), true);
    assert_eq!(decode(&span).unwrap(), f);
    assert_eq!(jf::FastCommit::first_span(&span[0]).unwrap().blocks, 3);
    // The first blocks are written whole, the last as the sectors it fills:
    // 8,688 - 4,096 - 4,072 = 520 bytes after its 24-byte header, 2 sectors.
    assert_eq!((jf::written_len(&span[0]), jf::written_len(&span[1]), jf::written_len(&span[2])), (BS, BS, 2 * 512));
    let written: Vec<usize> = span.iter().map(|b| jf::written_len(b)).collect();
    let older = records(50, 128, 12).encode_span(BS);
    for k in 0..3 {
        for i in (0..written[k]).step_by(5) {
            let mut x = refs(&span);
            x[k][i] ^= 0x5a;
            assert!(decode(&x).is_err(), "block {k} byte {i} flipped is not caught");
        }
        for i in (written[k]..BS).step_by(97) {
            let mut x = refs(&span);
            x[k][i] ^= 0x5a;
            assert_eq!(decode(&x).unwrap(), f, "block {k} byte {i} lies past the written sectors");
        }
        for sector in 0..written[k] / 512 {
            for old in [&vec![0u8; BS], &older[k.min(older.len() - 1)]] {
                let mut x = refs(&span);
                x[k][sector * 512..(sector + 1) * 512].copy_from_slice(&old[sector * 512..(sector + 1) * 512]);
                if x[k] != span[k] {
                    assert!(decode(&x).is_err(), "block {k} sector {sector} torn back is not caught");
                }
            }
        }
    }
    // A continuation missing, repeated, or of another span; too few or too many blocks.
    assert!(decode(&[span[0].clone(), span[2].clone(), span[2].clone()]).is_err());
    assert!(decode(&[span[0].clone(), span[1].clone(), span[1].clone()]).is_err());
    assert!(decode(&[span[0].clone(), older[1].clone(), span[2].clone()]).is_err());
    assert!(decode(&span[..2]).is_err());
    assert!(decode(&[span[0].clone(), span[1].clone(), span[2].clone(), span[2].clone()]).is_err());
    assert!(jf::FastCommit::decode(&span[0], true).is_err(), "a span's first block alone is not a transaction");
    // A one-block fast commit is the same bytes as before spans came.
    let small = records(3, 100, 5);
    let mut one = vec![0u8; BS];
    small.encode(&mut one);
    assert_eq!(small.encode_span(BS), vec![one.clone()]);
    assert_eq!(jf::FastCommit::first_span(&one).unwrap().blocks, 1);
    // Bounds: 16 blocks at most, and what takes a second block.
    let room = BS + 15 * (BS - 24) - 40 - 16 - 8;
    assert!(jf::FastCommit::fits_in(BS, 1, room.min(u16::MAX as usize), 16, false));
    assert!(!jf::FastCommit::fits_in(BS, 1, BS - 40 - 16 - 7, 1, false));
    assert!(jf::FastCommit::fits_in(BS, 1, BS - 40 - 16 - 7, 2, false));
    assert!(!jf::FastCommit::fits_in(BS, 600, 16 * BS, 16, false));
    assert!(!jf::FastCommit::fits_in(BS, 600, 16 * BS, 99, false), "no more than 16 blocks, whatever is asked");
    // A sectors field past 16 blocks, or disagreeing with the counts, is refused from the first
    // block, never buffered.
    for v in [17 * 8u32, u32::MAX, 3 * 8, 0] {
        let mut x = span[0].clone();
        x[28..32].copy_from_slice(&v.to_le_bytes());
        assert!(jf::FastCommit::first_span(&x).is_err(), "sectors {v}");
    }
}

/// Compact tags (journal feature FAST_COMMIT_COMPACT): 10 bytes a tag instead of 16, the block,
/// FRESH and METADATA in 48 bits, no record hash (the fast commit's hash covers the records).
/// Round trip over one block and over a span, every flipped byte of the written sectors caught,
/// any sector torn back caught, the tag count's flag and lengths bounded, and what cannot be
/// compact.
#[test]
fn compact_fast_commit_round_trip_flips_torn_sectors_and_bounds() {
    let records = |n: u64, len: usize, tid: u64, compact: bool| {
        let stream: Vec<u8> = (0..n as usize * len).map(|i| ((i as u64 * 11 + tid) % 251) as u8).collect();
        let tags: Vec<Tag> = (0..n)
            .map(|k| {
                let (fs_block, offset) = (HomeBlock::new(if k == 1 { jf::MAX_COMPACT_TAG_BLOCK } else { 900 + k }), (k % 9 * 13) as u16);
                let bytes = &stream[k as usize * len..(k as usize + 1) * len];
                let flags = jf::tag_flags::MULTIWRITE | if k % 3 == 0 { jf::tag_flags::FRESH } else { 0 } | if k % 2 == 0 { jf::tag_flags::METADATA } else { 0 };
                Tag { fs_block, flags, offset, len: len as u16, data_hash: jf::data_hash(fs_block, offset, bytes) }
            })
            .collect();
        jf::FastCommit { tid: okeanos::Tid::new(tid), tags, stream, handle_count: n as u32, commit_time_ns: 3, compact, notes: Vec::new(), short_notes: false }
    };
    let decode = |v: &[Vec<u8>]| jf::FastCommit::decode_span(&v.iter().map(Vec::as_slice).collect::<Vec<_>>(), true);
    // One block: 40 + 10 x 10 + 10 x 128 + 8 = 1,428 bytes, 3 sectors (the full tags' 1,488
    // would be 3 too; 25 records of 128 bytes are where a sector is saved).
    let f = records(10, 128, 21, true);
    let one = f.encode_span(BS);
    assert_eq!(one.len(), 1);
    assert_eq!(decode(&one).unwrap(), f, "flags, offsets, lengths and the records' hashes come back");
    assert_eq!(jf::written_len(&one[0]), 3 * 512);
    every_flip_caught(&one[0], 0..jf::written_len(&one[0]), |x| jf::FastCommit::decode(x, true).map(|_| ()));
    // 25 records of 128 bytes: 40 + 250 + 3,200 + 8 = 3,498 bytes, 7 sectors compact; 3,648
    // and 8 sectors full.
    let (c, full) = (records(25, 128, 22, true), records(25, 128, 22, false));
    assert_eq!(jf::written_len(&c.encode_span(BS)[0]), 7 * 512);
    assert_eq!(jf::written_len(&full.encode_span(BS)[0]), 8 * 512);
    assert_eq!(decode(&full.encode_span(BS)).unwrap(), full, "the full form still reads");
    // A span: 60 records of 128 bytes, 40 + 600 + 7,680 + 8 = 8,328 bytes, three blocks (the
    // last 160 bytes after its header: one sector, where the full form fills two).
    let f = records(60, 128, 23, true);
    let span = f.encode_span(BS);
    assert_eq!(span.len(), 3);
    assert_eq!(decode(&span).unwrap(), f);
    assert_eq!(jf::written_len(&span[2]), 512);
    let older = records(50, 128, 12, false).encode_span(BS);
    for k in 0..3 {
        let written = jf::written_len(&span[k]);
        for i in (0..written).step_by(3) {
            let mut x = span.clone();
            x[k][i] ^= 0x21;
            assert!(decode(&x).is_err(), "block {k} byte {i} flipped is not caught");
        }
        for sector in 0..written / 512 {
            for old in [&vec![0u8; BS], &older[k.min(older.len() - 1)]] {
                let mut x = span.clone();
                x[k][sector * 512..(sector + 1) * 512].copy_from_slice(&old[sector * 512..(sector + 1) * 512]);
                if x[k] != span[k] {
                    assert!(decode(&x).is_err(), "block {k} sector {sector} torn back is not caught");
                }
            }
        }
    }
    // Without the hash check (the canary's way), the bytes as read are taken: a flipped record
    // byte then passes, so only the fast commit's hash guards compact records.
    let mut x = one.clone();
    x[0][40 + 100 + 5] ^= 1;
    assert!(jf::FastCommit::decode(&x[0], false).is_ok());
    assert!(jf::FastCommit::decode(&x[0], true).is_err());
    // Bounds: what fits one block compact and not full; the count field's flag is the form.
    assert!(jf::FastCommit::fits_in(BS, 1, BS - 40 - 10 - 8, 1, true));
    assert!(!jf::FastCommit::fits_in(BS, 1, BS - 40 - 10 - 7, 1, true));
    assert!(!jf::FastCommit::fits_in(BS, 1, BS - 40 - 10 - 8, 1, false));
    for v in [u32::MAX, 0x8000_0000, 0x8000_0000 | 11, 10] {
        let mut x = one[0].clone();
        x[16..20].copy_from_slice(&v.to_le_bytes());
        assert!(jf::FastCommit::decode(&x, false).is_err(), "tag count field {v:#x}");
    }
    // A tag's length running past the stream, or past its block, is an error, not a panic.
    for (tag, len) in [(9usize, 129u16), (0, u16::MAX), (3, 0)] {
        let mut x = one[0].clone();
        x[40 + tag * 10 + 8..40 + tag * 10 + 10].copy_from_slice(&len.to_le_bytes());
        assert!(jf::FastCommit::decode(&x, false).is_err(), "tag {tag} of length {len}");
    }
    // A block above 2^46 - 1 cannot be named by a compact tag; the full form names it.
    let high = Tag { fs_block: HomeBlock::new(jf::MAX_COMPACT_TAG_BLOCK + 1), flags: jf::tag_flags::MULTIWRITE, offset: 0, len: 1, data_hash: 0 };
    assert!(!jf::FastCommit::compactable(&high));
    assert!(jf::FastCommit::compactable(&f.tags[1]), "the largest compact block");
}

#[test]
fn escaping_round_trips() {
    let mut block = vec![0x5au8; BS];
    block[..4].copy_from_slice(&jf::JOURNAL_MAGIC.to_le_bytes());
    assert!(jf::needs_escape(&block));
    let orig = block.clone();
    jf::escape(&mut block);
    assert!(jf::header(&block).is_none() && !jf::needs_escape(&block));
    jf::unescape(&mut block);
    assert_eq!(block, orig);
}

/// Regression (found by the crash tests): two group-descriptor blocks that differ only inside
/// self-checksummed descriptors have the same whole-block CRC32C, so a CRC32C could not tell a
/// stale logged copy from the new one. The journal's content hash must tell them apart.
#[test]
fn journal_hash_sees_changes_inside_self_checksummed_records() {
    let mut a = vec![0u8; BS];
    let mut b = vec![0u8; BS];
    let gd = GroupDesc { block_bitmap: HomeBlock::new(258), inode_bitmap: HomeBlock::new(259), inode_table: HomeBlock::new(260), free_blocks: 1260, free_inodes: 8186, ..Default::default() };
    gd.encode(0, &mut a[..GD_SIZE]);
    GroupDesc { free_blocks: 1222, free_inodes: 8185, block_bitmap_crc: 1, ..gd }.encode(0, &mut b[..GD_SIZE]);
    assert_ne!(a, b);
    assert_eq!(okeanos::format::crc(0, &a), okeanos::format::crc(0, &b), "the CRC residue property this test is about");
    assert_ne!(jf::data_hash(HomeBlock::new(1), 0, &a), jf::data_hash(HomeBlock::new(1), 0, &b));
    assert_ne!(jf::tx_hash_append(5, &a), jf::tx_hash_append(5, &b));
}

proptest! {
    /// Decoding arbitrary bytes never panics.
    #[test]
    fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..5000), ino in 0u32..100) {
        let _ = Superblock::decode(&bytes);
        let _ = GroupDesc::decode(ino, &bytes);
        let _ = Inode::decode(ino, &bytes);
        let _ = ExtentBlock::decode(&bytes);
        let _ = DirBlock::decode(&bytes);
        let _ = JournalSuperblock::decode(&bytes);
        let _ = Descriptor::decode(&bytes);
        let _ = RevokeBlock::decode(&bytes);
        let _ = CommitBlock::decode(&bytes);
        let _ = jf::FastCommit::decode(&bytes, true);
        let _ = jf::FastCommit::decode(&bytes, false);
        let _ = jf::header(&bytes);
    }

    /// A fast commit with inode notes (short ones for an even count) whose count field, its
    /// handles field, and one more byte, are anything: decoding (checked or not) never panics,
    /// and the checked decode takes only the unchanged block. The count field and the handles
    /// field's short-notes bit are where notes change the layout.
    #[test]
    fn noted_fast_commits_with_any_count_never_panic(count in any::<u32>(), handles in any::<u32>(), at in 0usize..BS, v in any::<u8>(), notes in 1u32..60, tags in 1u64..60) {
        let stream: Vec<u8> = (0..tags as usize * 100).map(|i| (i % 241) as u8).collect();
        let t: Vec<Tag> = (0..tags)
            .map(|k| {
                let b = HomeBlock::new(50 + k);
                Tag { fs_block: b, flags: jf::tag_flags::MULTIWRITE, offset: 0, len: 100, data_hash: jf::data_hash(b, 0, &stream[k as usize * 100..(k as usize + 1) * 100]) }
            })
            .collect();
        let f = jf::FastCommit { tid: okeanos::Tid::new(3), tags: t, stream, handle_count: 1, commit_time_ns: 1 << 40, compact: true, notes: (0..notes).map(|k| jf::InodeNote { ino: k + 1, age_ns: k, size: k as u64 * 99 }).collect(), short_notes: notes % 2 == 0 };
        let span = f.encode_span(BS);
        let mut x = span.clone();
        x[0][16..20].copy_from_slice(&count.to_le_bytes());
        x[0][24..28].copy_from_slice(&handles.to_le_bytes());
        x[0][at] ^= v;
        let blocks: Vec<&[u8]> = x.iter().map(Vec::as_slice).collect();
        let _ = jf::FastCommit::decode_span(&blocks, false);
        let _ = jf::FastCommit::decode(&x[0], false);
        if let Ok(d) = jf::FastCommit::decode_span(&blocks, true) {
            prop_assert!(x == span, "a changed fast commit decoded: {:?}", d.notes.len());
        }
    }

    /// Random valid directory blocks round-trip.
    #[test]
    fn directory_blocks_round_trip(names in proptest::collection::btree_set("[a-zA-Z0-9_.-]{1,40}", 0..60)) {
        let entries: Vec<DirEntry> = names.into_iter().filter(|n| n != "." && n != "..").enumerate()
            .map(|(k, n)| DirEntry { ino: k as u32 + 1, ftype: FileType::Regular, name: n.into_bytes() }).collect();
        let db = DirBlock { owner: 1, entries };
        prop_assume!(db.fits(BS, 0));
        let mut b = vec![0u8; BS];
        db.encode(&mut b);
        prop_assert_eq!(DirBlock::decode(&b).unwrap(), db);
    }
}

fn remote_messages() -> Vec<okeanos::format::remote::Msg> {
    use okeanos::format::remote::{JournalId, Msg};
    let id = JournalId { host: [3; 16], fs_uuid: [4; 16] };
    vec![
        Msg::Challenge { nonce: [7; 32] },
        Msg::Hello { id, host_name: "node-1".into(), epoch: 9, proof: [5; 32] },
        Msg::HelloOk { epoch: 1, first_tid: 2, last_tid: 3, quota_bytes: 4, used_bytes: 5 },
        Msg::Append { tid: 77, epoch: 2, block_size: 1024, blocks: (0..2048).map(|i| i as u8).collect() },
        Msg::Ack { tid: 77 },
        Msg::Trim { upto: 70, epoch: 2 },
        Msg::TrimOk { first_tid: 71 },
        Msg::Read { from: 71 },
        Msg::Tx { tid: 71, block_size: 4096, blocks: vec![1; 4096] },
        Msg::ReadEnd { last_tid: 77 },
        Msg::Fence { epoch: 3 },
        Msg::FenceOk { epoch: 3, last_tid: 77 },
        Msg::error(okeanos::format::remote::ErrorCode::Full, "journal full"),
    ]
}

#[test]
fn remote_frames_round_trip_and_every_flip_is_caught() {
    use okeanos::format::remote;
    for m in remote_messages() {
        let f = m.encode(42);
        assert_eq!(remote::decode(&f).unwrap(), (42, m.clone()));
        every_flip_caught(&f, 0..f.len(), |x| remote::decode(x).map(|_| ()));
        // Short and long frames are errors too.
        assert!(remote::decode(&f[..f.len() - 1]).is_err());
        assert!(remote::decode(&[f.clone(), vec![0]].concat()).is_err());
    }
    // A header announcing more than the limit is refused before anything is read.
    let mut h = remote_messages()[0].encode(1)[..remote::HEADER].to_vec();
    h[16..20].copy_from_slice(&(remote::MAX_PAYLOAD as u32 + 1).to_le_bytes());
    assert!(remote::decode_header(&h).is_err());
}

proptest::proptest! {
    #[test]
    fn remote_decoder_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300), k in 0usize..13, at in 0usize..400, v in proptest::prelude::any::<u8>()) {
        let _ = okeanos::format::remote::decode(&bytes);
        let mut f = remote_messages()[k].encode(1);
        let n = f.len();
        f[at % n] = v;
        let _ = okeanos::format::remote::decode(&f);
        f.truncate(at % n);
        let _ = okeanos::format::remote::decode(&f);
    }
}

#[test]
fn xattr_block_round_trip_flips_and_bounds() {
    use okeanos::format::xattr::XattrBlock;
    let x = XattrBlock { owner: 9, entries: vec![(b"security.selinux".to_vec(), b"ctx".to_vec()), (b"user.a".to_vec(), vec![0u8; 300])] };
    let b = x.encode(4096).unwrap();
    assert_eq!(XattrBlock::decode(9, &b).unwrap(), x);
    assert!(XattrBlock::decode(10, &b).is_err(), "another inode's block is refused");
    let used = x.encoded_len();
    every_flip_caught(&b, 0..used, |y| XattrBlock::decode(9, y).map(|_| ()));
    assert!(XattrBlock { owner: 1, entries: vec![(b"user.big".to_vec(), vec![0u8; 5000])] }.encode(4096).is_none(), "too big for the block");
    for _ in 0..2000 {
        let junk: Vec<u8> = (0..4096).map(|_| rand::random::<u8>()).collect();
        let _ = XattrBlock::decode(9, &junk);
    }
}

/// Inode notes (journal feature FAST_COMMIT_NOTES): 16 bytes telling an inode's size and
/// times after the tags of a fast commit. Round trip over one block and a span, every flipped
/// byte caught, the count field's bounds, and a note that names inode 0 refused.
/// A fast commit of `n` 128-byte records under compact tags, with `notes` (short or not).
fn noted_fast_commit(n: u64, notes: Vec<jf::InodeNote>, short_notes: bool, tid: u64) -> jf::FastCommit {
    let stream: Vec<u8> = (0..n as usize * 128).map(|i| ((i as u64 * 7 + tid) % 253) as u8).collect();
    let tags: Vec<Tag> = (0..n)
        .map(|k| {
            let (fs_block, offset) = (HomeBlock::new(700 + k), (k % 5 * 128) as u16);
            let bytes = &stream[k as usize * 128..(k as usize + 1) * 128];
            Tag { fs_block, flags: jf::tag_flags::MULTIWRITE, offset, len: 128, data_hash: jf::data_hash(fs_block, offset, bytes) }
        })
        .collect();
    jf::FastCommit { tid: okeanos::Tid::new(tid), tags, stream, handle_count: n as u32, commit_time_ns: 5_000_000, compact: true, notes, short_notes }
}

#[test]
fn inode_notes_round_trip_flips_and_bounds() {
    let fast = |n: u64, m: u32, tid: u64| {
        let notes = (0..m).map(|k| jf::InodeNote { ino: 3 + k, age_ns: 1000 * k + 17, size: (1 << 33) + k as u64 * 128 }).collect();
        noted_fast_commit(n, notes, false, tid)
    };
    let decode = |v: &[Vec<u8>]| jf::FastCommit::decode_span(&v.iter().map(Vec::as_slice).collect::<Vec<_>>(), true);
    // Ten appends and their ten inodes: 40 + 10 x 10 + 10 x 16 + 1,280 + 8 = 1,588 bytes, four
    // sectors (the same inodes as 32-byte records under compact tags: 40 + 200 + 1,600 + 8,
    // 1,848 bytes, also four; 25 appends are where notes save a sector, as tags did).
    let f = fast(10, 10, 31);
    let one = f.encode_span(BS);
    assert_eq!(one.len(), 1);
    assert_eq!(decode(&one).unwrap(), f, "notes, tags and records come back");
    assert_eq!(jf::written_len(&one[0]), 4 * 512);
    every_flip_caught(&one[0], 0..jf::written_len(&one[0]), |x| jf::FastCommit::decode(x, true).map(|_| ()));
    // 40 appends, 40 notes: 40 + 400 + 640 + 5,120 + 8 = 6,208 bytes, a span of two blocks.
    let f = fast(40, 40, 32);
    let span = f.encode_span(BS);
    assert_eq!(span.len(), 2);
    assert_eq!(decode(&span).unwrap(), f);
    for k in 0..2 {
        for i in (0..jf::written_len(&span[k])).step_by(5) {
            let mut x = span.clone();
            x[k][i] ^= 0x40;
            assert!(decode(&x).is_err(), "block {k} byte {i} flipped is not caught");
        }
    }
    // The count field: the notes bit with no notes, and counts the sectors do not hold.
    let count = u32::from_le_bytes(one[0][16..20].try_into().unwrap());
    assert_eq!(count, 0x8000_0000 | 0x4000_0000 | (10 << 16) | 10);
    // Counts whose bytes do not fill the four sectors are refused on the header alone; others
    // fail the hash, as any changed byte does.
    for (v, sectors_differ) in [(0xc000_0000u32 | 10, true), (0xc000_0000 | (40 << 16) | 10, true), (0x8000_0000 | 10, true), (0xc000_0000 | (11 << 16) | 10, false), (0xc000_0000 | (10 << 16) | 11, false)] {
        let mut x = one[0].clone();
        x[16..20].copy_from_slice(&v.to_le_bytes());
        assert!(jf::FastCommit::decode(&x, true).is_err(), "count field {v:#x}");
        if sectors_differ {
            assert!(jf::FastCommit::first_span(&x).is_err(), "count field {v:#x} on the header alone");
        }
    }
    // Inode 0 names nothing: refused (the hash not checked, as by the canary, to reach it).
    let mut x = one[0].clone();
    x[40 + 100..40 + 104].copy_from_slice(&0u32.to_le_bytes());
    let e = jf::FastCommit::decode(&x, false).unwrap_err();
    assert!(e.to_string().contains("inode 0"), "{e}");
    // Bounds: the count fields' widths.
    assert!(jf::FastCommit::fits_with_notes(BS, 1, 1, 128, 16, true, false));
    assert!(!jf::FastCommit::fits_with_notes(BS, 1, jf::MAX_NOTES + 1, 0, 16, true, false));
    assert!(!jf::FastCommit::fits_with_notes(BS, 0, 1, 0, 16, true, false), "a fast commit has a tag");
}

/// Short inode notes (journal feature FAST_COMMIT_SHORT_NOTES): 12 bytes, the size in 32 bits,
/// said by bit 31 of the handles field. Round trip over one block and a span, every flipped
/// byte caught, the bit refused without notes, and a span four bytes a note shorter than with
/// 16-byte notes.
#[test]
fn short_inode_notes_round_trip_flips_and_bounds() {
    let fast = |n: u64, m: u32, short: bool| {
        let notes = (0..m).map(|k| jf::InodeNote { ino: 5 + k, age_ns: 300 * k + 1, size: u32::MAX as u64 - k as u64 * 4096 }).collect();
        noted_fast_commit(n, notes, short, 77)
    };
    let decode = |v: &[Vec<u8>]| jf::FastCommit::decode_span(&v.iter().map(Vec::as_slice).collect::<Vec<_>>(), true);
    // 40 appends and their inodes: 40 + 400 + 40 x 12 + 5,120 + 8 = 6,048 bytes, two blocks, the
    // second holding 1,976 (24 of its header): four sectors, where 16-byte notes fill five.
    let long = fast(40, 40, false).encode_span(BS);
    let f = fast(40, 40, true);
    let span = f.encode_span(BS);
    assert_eq!((span.len(), jf::written_len(&span[1]), jf::written_len(&long[1])), (2, 4 * 512, 5 * 512));
    assert_eq!(decode(&span).unwrap(), f, "short notes, sizes up to 2^32 - 1, come back");
    assert_eq!(u32::from_le_bytes(span[0][24..28].try_into().unwrap()), 0x8000_0000 | 40, "bit 31 of the handles field says short");
    for k in 0..2 {
        for i in (0..jf::written_len(&span[k])).step_by(3) {
            let mut x = span.clone();
            x[k][i] ^= 0x08;
            assert!(decode(&x).is_err(), "block {k} byte {i} flipped is not caught");
        }
    }
    // One block: every flip caught, and the bit set on a fast commit without notes refused on
    // the header alone.
    let f = fast(8, 8, true);
    let one = f.encode_span(BS);
    assert_eq!((one.len(), decode(&one).unwrap()), (1, f));
    every_flip_caught(&one[0], 0..jf::written_len(&one[0]), |x| jf::FastCommit::decode(x, true).map(|_| ()));
    let bare = fast(8, 0, true).encode_span(BS);
    assert_eq!(u32::from_le_bytes(bare[0][24..28].try_into().unwrap()), 8, "no notes: the bit stays clear");
    let mut x = bare[0].clone();
    x[27] |= 0x80;
    let e = jf::FastCommit::first_span(&x).unwrap_err();
    assert!(e.to_string().contains("short notes"), "{e}");
    assert!(jf::FastCommit::fits_with_notes(BS, 1, 1, 128, 16, true, true));
}

/// What a note may stand for: an inode's size, mtime and ctime (equal) and its checksum, and
/// nothing else; applying the note to the old inode gives the new one exactly.
#[test]
fn inode_notes_stand_for_size_and_times_only() {
    use okeanos::format::inode::{apply_note, note_for};
    let ino = 77;
    let old_inode = Inode { mode: S_IFREG | 0o644, size: 4096, mtime_ns: 1_000, ctime_ns: 1_000, nlink: 1, ..Default::default() };
    let enc = |i: &Inode| {
        let mut b = vec![0u8; INODE_SIZE];
        i.encode(ino, &mut b);
        b
    };
    let old = enc(&old_inode);
    let new_inode = Inode { size: 4224, mtime_ns: 9_000, ctime_ns: 9_000, ..old_inode.clone() };
    let new = enc(&new_inode);
    let (size, age) = note_for(ino, &old, &new, 10_000).expect("an append's change");
    assert_eq!((size, age), (4224, 1_000));
    let mut replayed = old.clone();
    apply_note(ino, &mut replayed, size, 10_000 - age as i64);
    assert_eq!(replayed, new);
    apply_note(ino, &mut replayed, size, 10_000 - age as i64);
    assert_eq!(replayed, new, "twice is once");
    assert_eq!(Inode::decode(ino, &replayed).unwrap().size, 4224);
    // Not a note's to tell: other fields, unequal times, times after the commit or too old,
    // a free inode on either side, no change.
    for (why, other, now) in [
        ("mode", Inode { mode: S_IFREG | 0o600, ..new_inode.clone() }, 10_000i64),
        ("links", Inode { nlink: 2, ..new_inode.clone() }, 10_000),
        ("atime", Inode { atime_ns: 5, ..new_inode.clone() }, 10_000),
        ("ctime apart", Inode { ctime_ns: 9_001, ..new_inode.clone() }, 10_000),
        ("after the commit", new_inode.clone(), 8_999),
        ("older than 4.29 s", new_inode.clone(), 9_000 + (1 << 32)),
    ] {
        assert_eq!(note_for(ino, &old, &enc(&other), now), None, "{why}");
    }
    assert_eq!(note_for(ino, &vec![0u8; INODE_SIZE], &new, 10_000), None, "a new inode");
    assert_eq!(note_for(ino, &old, &old, 10_000), None, "no change");
    assert_eq!(note_for(ino + 1, &old, &new, 10_000), None, "another slot's checksum");
}

/// Where inode notes find their inodes: table blocks at each group's third block.
#[test]
fn inode_tables_locate_every_inode_and_only_table_blocks() {
    use okeanos::format::inode::InodeTables;
    let t = InodeTables { first_group_block: 10, blocks_per_group: 100, group_count: 3, inodes_per_group: 64, inode_count: 192, per_block: 16 };
    assert_eq!(t.locate(1), Some((HomeBlock::new(12), 0)));
    assert_eq!(t.locate(18), Some((HomeBlock::new(13), 256)));
    assert_eq!(t.locate(65), Some((HomeBlock::new(112), 0)));
    assert_eq!(t.locate(0), None);
    assert_eq!(t.locate(193), None);
    for ino in 1..=192 {
        let (b, at) = t.locate(ino).unwrap();
        assert_eq!(t.first_ino(b).unwrap() + at as u32 / INODE_SIZE as u32, ino);
    }
    for b in [0u64, 9, 10, 11, 16, 111, 116, 310, 400] {
        assert_eq!(t.first_ino(HomeBlock::new(b)), None, "block {b} is no table block");
    }
}

//! Inodes: 256 bytes each, packed in the inode tables. An inode holds its first
//! [`INLINE_EXTENTS`] extents; more live in a chain of extent blocks. Its CRC is seeded with the
//! inode number, so an inode written to the wrong slot is caught. Byte map: docs/FORMAT.md,
//! "Inode".
//!
//! The fields an append changes — the CRC, the size, mtime and ctime — lie together in the
//! first 32 bytes, so differential metadata logs an append's inode change as one small range.

use super::extent::{Extent, EXTENT_SIZE};
use crate::ids::HomeBlock;
use super::{crc, invalid, need, seed, FormatError, Le};

pub const INODE_SIZE: usize = 256;
pub const INLINE_EXTENTS: usize = 10;
const INLINE_AT: usize = 80;

pub const S_IFMT: u32 = 0o170000;
pub const S_IFREG: u32 = 0o100000;
pub const S_IFDIR: u32 = 0o040000;
pub const S_IFLNK: u32 = 0o120000;
pub const S_IFIFO: u32 = 0o010000;
pub const S_IFCHR: u32 = 0o020000;
pub const S_IFBLK: u32 = 0o060000;
pub const S_IFSOCK: u32 = 0o140000;
/// Inode flag: blocks are mapped past the size (fallocate with KEEP_SIZE), zero-filled.
pub const FLAG_EOFBLOCKS: u32 = 1;
/// Inode flag: O_DUR (manylogs paper, section IV-D): the file's writes are always logged and
/// not checkpointed for age; set with `Okeanos::set_durable` or the xattr
/// `user.okeanos.durable`.
pub const FLAG_DURABLE: u32 = 2;
/// Every file type an inode may have.
pub const FILE_TYPES: [u32; 7] = [S_IFREG, S_IFDIR, S_IFLNK, S_IFIFO, S_IFCHR, S_IFBLK, S_IFSOCK];

/// Where a device's number is (bytes 240..244, reserved and zero before special files).
const RDEV_AT: usize = 240;
/// Where the extended attribute block's number is (bytes 244..252, reserved before).
const XATTR_AT: usize = 244;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Inode {
    /// POSIX mode: file type bits and permissions. 0 means the slot is free.
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub size: u64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub generation: u32,
    /// Total number of extents (inline plus chained).
    pub extent_count: u32,
    /// First extent block of the chain, 0 when all extents are inline.
    pub extent_block: HomeBlock,
    /// Next inode on the orphan list (unlinked but not yet freed), 0 at the end.
    pub orphan_next: u32,
    /// For directories: the parent directory's inode number.
    pub parent: u32,
    pub flags: u32,
    /// Device number of a character or block device (Linux's 32-bit encoding); 0 otherwise.
    pub rdev: u32,
    /// The block holding the extended attributes, 0 when there are none.
    pub xattr_block: HomeBlock,
    /// The inline extents; only the first `min(extent_count, INLINE_EXTENTS)` are meaningful.
    pub inline: Vec<Extent>,
}

impl Inode {
    pub fn is_dir(&self) -> bool {
        self.mode & S_IFMT == S_IFDIR
    }
    pub fn is_reg(&self) -> bool {
        self.mode & S_IFMT == S_IFREG
    }
    pub fn is_symlink(&self) -> bool {
        self.mode & S_IFMT == S_IFLNK
    }
    pub fn is_free(&self) -> bool {
        self.mode == 0
    }
    /// A FIFO, device or socket: no data, no extents.
    pub fn is_special(&self) -> bool {
        matches!(self.mode & S_IFMT, S_IFIFO | S_IFCHR | S_IFBLK | S_IFSOCK)
    }

    pub fn encode(&self, ino: u32, out: &mut [u8]) {
        assert!(out.len() >= INODE_SIZE);
        assert!(self.inline.len() <= INLINE_EXTENTS, "inline extents overflow");
        let out = &mut out[..INODE_SIZE];
        out.fill(0);
        Le::put_u32(out, 4, self.mode);
        Le::put_u64(out, 8, self.size);
        Le::put_i64(out, 16, self.mtime_ns);
        Le::put_i64(out, 24, self.ctime_ns);
        Le::put_i64(out, 32, self.atime_ns);
        Le::put_u32(out, 40, self.nlink);
        Le::put_u32(out, 44, self.uid);
        Le::put_u32(out, 48, self.gid);
        Le::put_u32(out, 52, self.generation);
        Le::put_u32(out, 56, self.extent_count);
        Le::put_u32(out, 60, self.orphan_next);
        Le::put_u32(out, 64, self.parent);
        Le::put_u32(out, 68, self.flags);
        Le::put_u64(out, 72, self.extent_block.get());
        Le::put_u32(out, RDEV_AT, self.rdev);
        Le::put_u64(out, XATTR_AT, self.xattr_block.get());
        for (i, e) in self.inline.iter().enumerate() {
            e.encode(&mut out[INLINE_AT + i * EXTENT_SIZE..]);
        }
        Le::put_u32(out, 0, checksum(ino, out));
    }

    /// Decodes inode `ino`. An all-zero slot (never used) decodes as a free inode.
    pub fn decode(ino: u32, b: &[u8]) -> Result<Self, FormatError> {
        const W: &str = "inode";
        need(W, b, INODE_SIZE)?;
        let b = &b[..INODE_SIZE];
        if b.iter().all(|&x| x == 0) {
            return Ok(Inode::default());
        }
        let stored = Le::u32(b, 0);
        let computed = checksum(ino, b);
        if stored != computed {
            return Err(FormatError::BadChecksum { what: W, stored, computed });
        }
        let extent_count = Le::u32(b, 56);
        let n_inline = (extent_count as usize).min(INLINE_EXTENTS);
        let mut inline = Vec::with_capacity(n_inline);
        for i in 0..n_inline {
            inline.push(Extent::decode(&b[INLINE_AT + i * EXTENT_SIZE..])?);
        }
        let inode = Inode {
            mode: Le::u32(b, 4),
            size: Le::u64(b, 8),
            mtime_ns: Le::i64(b, 16),
            ctime_ns: Le::i64(b, 24),
            atime_ns: Le::i64(b, 32),
            nlink: Le::u32(b, 40),
            uid: Le::u32(b, 44),
            gid: Le::u32(b, 48),
            generation: Le::u32(b, 52),
            extent_count,
            orphan_next: Le::u32(b, 60),
            parent: Le::u32(b, 64),
            flags: Le::u32(b, 68),
            extent_block: HomeBlock::new(Le::u64(b, 72)),
            rdev: Le::u32(b, RDEV_AT),
            xattr_block: HomeBlock::new(Le::u64(b, XATTR_AT)),
            inline,
        };
        if inode.mode != 0 && !FILE_TYPES.contains(&(inode.mode & S_IFMT)) {
            return Err(invalid(W, format!("inode {ino} has unknown file type {:o}", inode.mode & S_IFMT)));
        }
        if extent_count as usize > INLINE_EXTENTS && inode.extent_block == HomeBlock::NONE {
            return Err(invalid(W, format!("inode {ino} has {extent_count} extents but no extent block")));
        }
        Ok(inode)
    }
}

/// The checksum of inode `ino`'s 256 bytes (bytes 0-3 excluded, where it is stored): seeded
/// with the inode number, so an inode written to the wrong slot fails it.
fn checksum(ino: u32, inode: &[u8]) -> u32 {
    crc(seed::INODE ^ ino, &inode[4..INODE_SIZE])
}

/// Bytes at the start of an inode an inode note stands for: checksum, mode, size, mtime,
/// ctime (the rest of the inode is left as the base has it).
pub const NOTED_BYTES: usize = 32;

/// Sets the checksum of inode `ino`'s slot over its bytes 4-255, unless the slot is all zeros
/// (a never-used free inode, which carries none). What replay does last to every slot a note
/// touched (journal/recovery/replay.rs, `ReplayBlock`).
pub fn reseal(ino: u32, slot: &mut [u8]) {
    let slot = &mut slot[..INODE_SIZE];
    if slot.iter().any(|&b| b != 0) {
        Le::put_u32(slot, 0, checksum(ino, slot));
    }
}

/// Applies an inode note (docs/FORMAT.md, "Inode notes") to inode `ino`'s slot: the size, mtime
/// and ctime set, the checksum recomputed over the result. The size and times are absolute;
/// the checksum is over the whole slot as it is then, which holds bytes of later transactions
/// when the base is newer than the note (see [`reseal`]).
pub fn apply_note(ino: u32, slot: &mut [u8], size: u64, time_ns: i64) {
    let slot = &mut slot[..INODE_SIZE];
    Le::put_u64(slot, 8, size);
    Le::put_i64(slot, 16, time_ns);
    Le::put_i64(slot, 24, time_ns);
    Le::put_u32(slot, 0, checksum(ino, slot));
}

/// The note that turns inode `ino`'s slot `old` into `new`, if one can: a live inode whose
/// change is its size, its mtime and ctime (equal, at most `u32::MAX` ns before
/// `commit_time_ns`) and the checksum that follows. Checked by applying it: the note is
/// returned only if it reproduces `new` exactly from `old`.
pub fn note_for(ino: u32, old: &[u8], new: &[u8], commit_time_ns: i64) -> Option<(u64, u32)> {
    let (old, new) = (&old[..INODE_SIZE], &new[..INODE_SIZE]);
    if old == new || Le::u32(old, 4) == 0 || Le::u32(new, 4) == 0 || old[4..8] != new[4..8] || old[NOTED_BYTES..] != new[NOTED_BYTES..] {
        return None;
    }
    let (size, mtime, ctime) = (Le::u64(new, 8), Le::i64(new, 16), Le::i64(new, 24));
    let age = u32::try_from(commit_time_ns.checked_sub(mtime)?).ok()?;
    if mtime != ctime {
        return None;
    }
    let mut check = [0u8; INODE_SIZE];
    check.copy_from_slice(old);
    apply_note(ino, &mut check, size, mtime);
    (check[..] == new[..]).then_some((size, age))
}

/// Where the inode tables lie (docs/FORMAT.md, "Device layout": each group's table at its
/// third block), from the superblock's fields: which inode a table block starts with, and
/// which block and byte hold an inode. The journal needs it to write and replay inode notes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InodeTables {
    pub first_group_block: u64,
    pub blocks_per_group: u64,
    pub group_count: u32,
    pub inodes_per_group: u32,
    pub inode_count: u32,
    /// Inodes a block holds.
    pub per_block: u32,
}

impl InodeTables {
    pub fn of(sb: &super::superblock::Superblock) -> Self {
        InodeTables {
            first_group_block: sb.first_group_block,
            blocks_per_group: sb.blocks_per_group as u64,
            group_count: sb.group_count,
            inodes_per_group: sb.inodes_per_group,
            inode_count: sb.inode_count,
            per_block: (sb.block_size as usize / INODE_SIZE) as u32,
        }
    }

    fn table_blocks(&self) -> u64 {
        (self.inodes_per_group as u64).div_ceil(self.per_block as u64)
    }

    /// The first inode of inode-table block `b`, if it is one.
    pub fn first_ino(&self, b: HomeBlock) -> Option<u32> {
        let b = b.get().checked_sub(self.first_group_block)?;
        if self.blocks_per_group == 0 || self.per_block == 0 {
            return None;
        }
        let (g, k) = (b / self.blocks_per_group, (b % self.blocks_per_group).checked_sub(2)?);
        if g >= self.group_count as u64 || k >= self.table_blocks() {
            return None;
        }
        let ino = g * self.inodes_per_group as u64 + k * self.per_block as u64 + 1;
        (ino <= self.inode_count as u64).then_some(ino as u32)
    }

    /// The table block and byte offset of inode `ino`; None for a number out of range.
    pub fn locate(&self, ino: u32) -> Option<(HomeBlock, u16)> {
        if ino == 0 || ino > self.inode_count || self.inodes_per_group == 0 || self.per_block == 0 {
            return None;
        }
        let (g, idx) = (((ino - 1) / self.inodes_per_group) as u64, (ino - 1) % self.inodes_per_group);
        if g >= self.group_count as u64 {
            return None;
        }
        let block = self.first_group_block + g * self.blocks_per_group + 2 + (idx / self.per_block) as u64;
        Some((HomeBlock::new(block), ((idx % self.per_block) as usize * INODE_SIZE) as u16))
    }
}

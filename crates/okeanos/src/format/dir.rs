//! Directory blocks. A directory's data blocks hold packed entries
//! `[ino u32][type u8][name_len u8][name]` after a 16-byte header with a magic, a CRC over the
//! whole block, the bytes used and the owner directory's inode number. "." and ".." are not
//! stored: ".." is the parent field of the directory's inode. Byte map: docs/FORMAT.md,
//! "Directory block".

use super::{invalid, seed, FormatError, Le};

pub const DIR_MAGIC: u32 = u32::from_le_bytes(*b"OKDR");
pub const DIR_HEADER: usize = 16;
pub const MAX_NAME: usize = 255;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileType {
    Regular = 1,
    Directory = 2,
    Symlink = 3,
    Fifo = 4,
    CharDevice = 5,
    BlockDevice = 6,
    Socket = 7,
}

impl FileType {
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(FileType::Regular),
            2 => Some(FileType::Directory),
            3 => Some(FileType::Symlink),
            4 => Some(FileType::Fifo),
            5 => Some(FileType::CharDevice),
            6 => Some(FileType::BlockDevice),
            7 => Some(FileType::Socket),
            _ => None,
        }
    }
    /// The POSIX type bits of this kind of inode.
    pub fn mode_bits(self) -> u32 {
        use super::inode::*;
        match self {
            FileType::Regular => S_IFREG,
            FileType::Directory => S_IFDIR,
            FileType::Symlink => S_IFLNK,
            FileType::Fifo => S_IFIFO,
            FileType::CharDevice => S_IFCHR,
            FileType::BlockDevice => S_IFBLK,
            FileType::Socket => S_IFSOCK,
        }
    }

    pub fn from_mode(mode: u32) -> Option<Self> {
        match mode & super::inode::S_IFMT {
            super::inode::S_IFREG => Some(FileType::Regular),
            super::inode::S_IFDIR => Some(FileType::Directory),
            super::inode::S_IFLNK => Some(FileType::Symlink),
            super::inode::S_IFIFO => Some(FileType::Fifo),
            super::inode::S_IFCHR => Some(FileType::CharDevice),
            super::inode::S_IFBLK => Some(FileType::BlockDevice),
            super::inode::S_IFSOCK => Some(FileType::Socket),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub ino: u32,
    pub ftype: FileType,
    pub name: Vec<u8>,
}

impl DirEntry {
    pub fn encoded_len(&self) -> usize {
        6 + self.name.len()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DirBlock {
    pub owner: u32,
    pub entries: Vec<DirEntry>,
}

impl DirBlock {
    pub fn used_bytes(&self) -> usize {
        self.entries.iter().map(DirEntry::encoded_len).sum()
    }
    /// Whether `entry` fits in a block of `block_size` bytes next to the present entries.
    pub fn fits(&self, block_size: usize, entry_len: usize) -> bool {
        DIR_HEADER + self.used_bytes() + entry_len <= block_size
    }

    pub fn encode(&self, out: &mut [u8]) {
        out.fill(0);
        let used = self.used_bytes();
        assert!(DIR_HEADER + used <= out.len(), "directory block overflow");
        Le::put_u16(out, 8, used as u16);
        Le::put_u16(out, 10, self.entries.len() as u16);
        Le::put_u32(out, 12, self.owner);
        let mut at = DIR_HEADER;
        for e in &self.entries {
            assert!(!e.name.is_empty() && e.name.len() <= MAX_NAME);
            Le::put_u32(out, at, e.ino);
            out[at + 4] = e.ftype as u8;
            out[at + 5] = e.name.len() as u8;
            out[at + 6..at + 6 + e.name.len()].copy_from_slice(&e.name);
            at += e.encoded_len();
        }
        super::headed::seal(out, DIR_MAGIC, seed::DIR);
    }

    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        const W: &str = "directory block";
        super::headed::check(W, b, DIR_HEADER, DIR_MAGIC, seed::DIR)?;
        let used = Le::u16(b, 8) as usize;
        let count = Le::u16(b, 10) as usize;
        if DIR_HEADER + used > b.len() {
            return Err(invalid(W, format!("{used} used bytes overflow the block")));
        }
        let mut entries = Vec::with_capacity(count);
        let mut at = DIR_HEADER;
        let end = DIR_HEADER + used;
        for _ in 0..count {
            if at + 6 > end {
                return Err(invalid(W, "entry header past the used area"));
            }
            let ino = Le::u32(b, at);
            let ftype = FileType::from_u8(b[at + 4]).ok_or_else(|| invalid(W, format!("bad file type {}", b[at + 4])))?;
            let len = b[at + 5] as usize;
            if len == 0 || at + 6 + len > end || ino == 0 {
                return Err(invalid(W, "entry name past the used area, empty, or inode 0"));
            }
            let name = b[at + 6..at + 6 + len].to_vec();
            if name.contains(&b'/') || name.contains(&0) || name == b"." || name == b".." {
                return Err(invalid(W, "entry name contains '/' or NUL, or is . or .."));
            }
            entries.push(DirEntry { ino, ftype, name });
            at += 6 + len;
        }
        if at != end {
            return Err(invalid(W, "used bytes disagree with the entries"));
        }
        Ok(DirBlock { owner: Le::u32(b, 12), entries })
    }
}

//! The namespace: create, mkdir, symlink, link, unlink, rmdir, rename, attributes, and the
//! orphan list that keeps unlinked-but-open (or half-deleted) inodes findable after a crash.
//!
//! Deleting a file is several handles: the first removes the name and, when the last link
//! goes, puts the inode on the orphan list (superblock `orphan_head`, inode `orphan_next`);
//! then truncate steps free its blocks; the last step frees the inode and takes it off the
//! list. A crash in between leaves an orphan that the next mount finishes deleting.

use super::dir::check_name;
use super::{Fs, FsError, FsResult, MemInode};
use crate::format::dir::FileType;
use crate::format::inode::{Inode, S_IFMT};

/// What `stat` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    pub ino: u32,
    pub kind: FileType,
    /// Permission bits (and setuid/setgid/sticky).
    pub perm: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    /// 512-byte units allocated (POSIX st_blocks).
    pub blocks: u64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub block_size: u32,
    /// Bumped each time the inode slot is reused (NFS/FUSE generation).
    pub generation: u32,
    /// Parent directory (directories only; 0 otherwise).
    pub parent: u32,
    /// Device number of a character or block device; 0 otherwise.
    pub rdev: u32,
}

/// Attribute changes of `setattr` (chmod, chown, utimens; size goes through truncate).
#[derive(Debug, Clone, Default)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub atime_ns: Option<i64>,
    pub mtime_ns: Option<i64>,
}

/// Maximum links to one inode.
pub const MAX_LINKS: u32 = 65_000;

impl<'a> Fs<'a> {
    pub fn attr(&mut self, ino: u32) -> FsResult<Attr> {
        let bs = self.bs() as u32;
        let mi = self.load(ino)?;
        let i = &mi.inode;
        Ok(Attr {
            ino,
            kind: FileType::from_mode(i.mode).ok_or_else(|| FsError::Corrupt(format!("inode {ino} has no type")))?,
            perm: i.mode & !S_IFMT,
            nlink: i.nlink,
            rdev: i.rdev,
            uid: i.uid,
            gid: i.gid,
            size: i.size,
            blocks: (mi.mapped_blocks() + mi.chain.len() as u64) * (bs as u64 / 512),
            atime_ns: i.atime_ns,
            mtime_ns: i.mtime_ns,
            ctime_ns: i.ctime_ns,
            block_size: bs,
            generation: i.generation,
            parent: i.parent,
        })
    }

    /// A file's size: [`attr`](Self::attr)'s `size` without its block count, which sums the
    /// file's extents (an append's position asks for it on every write).
    pub fn size(&mut self, ino: u32) -> FsResult<u64> {
        Ok(self.load(ino)?.inode.size)
    }

    fn dir_inode(&mut self, dir: u32) -> FsResult<()> {
        if !self.load(dir)?.inode.is_dir() {
            return Err(FsError::NotDir);
        }
        if self.load(dir)?.inode.nlink == 0 {
            return Err(FsError::NotFound);
        }
        Ok(())
    }

    /// The group a new top-level directory starts in: spread over the disk (ext2's Orlov
    /// allocator does the same for directories under the root, from a random group), from a
    /// group named by a hash of the name, forward to the first with a free inode and at least
    /// the average free blocks. Its files then live in that group, so that separate
    /// directories are separate regions of the disk (the manylogs paper's scattered files).
    fn spread_group(&self, name: &[u8]) -> u32 {
        let n = self.st.sb.group_count;
        if n == 1 {
            return 0;
        }
        let avg = self.st.free_block_total / n as u64;
        let start = crc32c::crc32c(name) % n;
        (0..n).map(|k| (start + k) % n).find(|&g| {
            let gd = &self.st.gdt[g as usize];
            gd.free_inodes > 0 && gd.free_blocks as u64 >= avg
        }).unwrap_or(start)
    }

    /// Creates a file, directory or symlink named `name` in `parent`.
    pub fn create_node(&mut self, parent: u32, name: &[u8], kind: FileType, perm: u32, uid: u32, gid: u32) -> FsResult<u32> {
        check_name(name)?;
        self.dir_inode(parent)?;
        if self.lookup_entry(parent, name)?.is_some() {
            return Err(FsError::Exists);
        }
        if kind == FileType::Directory && self.load(parent)?.inode.nlink >= MAX_LINKS {
            return Err(FsError::TooManyLinks);
        }
        if self.st.allocatable_inodes() == 0 || self.st.allocatable_blocks() < 2 {
            return Err(FsError::NoSpace);
        }
        let group = if kind == FileType::Directory && parent == self.st.sb.root_ino { self.spread_group(name) } else { (parent - 1) / self.st.sb.inodes_per_group };
        let ino = self.alloc_inode(group, kind == FileType::Directory)?;
        let now = self.now_ns;
        let type_bits = kind.mode_bits();
        let generation = self.read_slot_generation(ino)?.wrapping_add(1);
        // The setgid-directory rule (as ext4 without grpid): in a directory with S_ISGID a new
        // inode takes the directory's group, and a new directory inherits S_ISGID.
        let (gid, perm) = {
            let p = &self.load(parent)?.inode;
            if p.mode & 0o2000 != 0 {
                (p.gid, if kind == FileType::Directory { perm | 0o2000 } else { perm })
            } else {
                (gid, perm)
            }
        };
        let inode = Inode {
            mode: type_bits | (perm & 0o7777),
            uid,
            gid,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            atime_ns: now,
            mtime_ns: now,
            ctime_ns: now,
            generation,
            parent: if kind == FileType::Directory { parent } else { 0 },
            ..Inode::default()
        };
        self.st.inodes.insert(ino, MemInode::new(ino, inode));
        self.store(ino)?;
        if kind == FileType::Directory {
            self.st.dirs.insert(ino, Default::default());
        }
        self.add_entry(parent, name, ino, kind)?;
        let p = self.load(parent)?;
        if kind == FileType::Directory {
            p.inode.nlink += 1;
        }
        p.inode.mtime_ns = now;
        p.inode.ctime_ns = now;
        self.store(parent)?;
        if kind != FileType::Symlink {
            // POSIX ACLs: a directory's default ACL passes to what is made in it (fs/acl.rs).
            self.inherit_acl(parent, ino, kind == FileType::Directory)?;
        }
        self.st.touch(ino, true);
        self.st.touch(parent, true);
        Ok(ino)
    }

    /// The generation left in a free inode slot (0 for a never-used one).
    fn read_slot_generation(&mut self, ino: u32) -> FsResult<u32> {
        let (blk, off) = self.inode_location(ino)?;
        let b = self.block(blk, crate::cache::BufKind::Meta)?;
        Ok(Inode::decode(ino, &b[off..off + crate::format::inode::INODE_SIZE]).map(|i| i.generation).unwrap_or(0))
    }

    /// Adds a hard link `name` in `parent` to `ino`.
    pub fn link(&mut self, ino: u32, parent: u32, name: &[u8]) -> FsResult<()> {
        check_name(name)?;
        self.dir_inode(parent)?;
        let mi = self.load(ino)?;
        if mi.inode.is_dir() {
            return Err(FsError::Invalid("hard links to directories are not allowed".into()));
        }
        if mi.inode.nlink == 0 {
            return Err(FsError::NotFound);
        }
        if mi.inode.nlink >= MAX_LINKS {
            return Err(FsError::TooManyLinks);
        }
        let kind = FileType::from_mode(mi.inode.mode).ok_or_else(|| FsError::Corrupt(format!("inode {ino} has no type")))?;
        if self.lookup_entry(parent, name)?.is_some() {
            return Err(FsError::Exists);
        }
        self.add_entry(parent, name, ino, kind)?;
        let now = self.now_ns;
        let mi = self.load(ino)?;
        mi.inode.nlink += 1;
        mi.inode.ctime_ns = now;
        self.store(ino)?;
        let p = self.load(parent)?;
        p.inode.mtime_ns = now;
        p.inode.ctime_ns = now;
        self.store(parent)?;
        self.st.touch(ino, false);
        self.st.touch(parent, true);
        Ok(())
    }

    /// Drops one link of non-directory `ino`; at zero links it joins the orphan list. Returns
    /// true when the inode has no links left.
    fn drop_link(&mut self, ino: u32) -> FsResult<bool> {
        let now = self.now_ns;
        let mi = self.load(ino)?;
        if mi.inode.nlink == 0 {
            // A name reaching an inode with no links: the image says two things at once.
            return Err(FsError::Corrupt(format!("inode {ino} has a name but no links")));
        }
        mi.inode.nlink -= 1;
        mi.inode.ctime_ns = now;
        let gone = mi.inode.nlink == 0;
        if gone {
            self.push_orphan(ino)?;
        }
        self.store(ino)?;
        self.st.touch(ino, false);
        Ok(gone)
    }

    /// Puts `ino` at the head of the orphan list (the superblock's head, the inode's link);
    /// the caller stores the inode.
    fn push_orphan(&mut self, ino: u32) -> FsResult<()> {
        let head = self.st.sb.orphan_head;
        self.load(ino)?.inode.orphan_next = head;
        self.st.sb.orphan_head = ino;
        self.store_superblock()
    }

    /// Removes name `name` (not a directory) from `parent`. Returns the inode if it lost its
    /// last link (the caller evicts it when no handle holds it open).
    pub fn unlink(&mut self, parent: u32, name: &[u8]) -> FsResult<Option<u32>> {
        self.dir_inode(parent)?;
        let (ino, kind) = self.lookup_entry(parent, name)?.ok_or(FsError::NotFound)?;
        if kind == FileType::Directory {
            return Err(FsError::IsDir);
        }
        self.remove_entry(parent, name)?;
        let now = self.now_ns;
        let p = self.load(parent)?;
        p.inode.mtime_ns = now;
        p.inode.ctime_ns = now;
        self.store(parent)?;
        self.st.touch(parent, true);
        Ok(self.drop_link(ino)?.then_some(ino))
    }

    /// Removes empty directory `name` from `parent`.
    pub fn rmdir(&mut self, parent: u32, name: &[u8]) -> FsResult<()> {
        self.dir_inode(parent)?;
        let (ino, kind) = self.lookup_entry(parent, name)?.ok_or(FsError::NotFound)?;
        if kind != FileType::Directory {
            return Err(FsError::NotDir);
        }
        if !self.dir_is_empty(ino)? {
            return Err(FsError::NotEmpty);
        }
        self.remove_entry(parent, name)?;
        self.drop_dir(ino)?;
        let now = self.now_ns;
        let p = self.load(parent)?;
        p.inode.nlink -= 1;
        p.inode.mtime_ns = now;
        p.inode.ctime_ns = now;
        self.store(parent)?;
        self.st.touch(parent, true);
        Ok(())
    }

    /// An empty directory that lost its name: freed now, or, if held (a FUSE kernel's lookup,
    /// a process's working directory), kept with no links on the orphan list until the last
    /// hold goes (Okeanos::evict), as an unlinked open file is; a crash leaves it for the next
    /// mount to free (docs/JOURNALING.md, "Removed while held").
    fn drop_dir(&mut self, ino: u32) -> FsResult<()> {
        if !self.st.open_count.contains_key(&ino) {
            return self.destroy_dir(ino);
        }
        let now = self.now_ns;
        let mi = self.load(ino)?;
        mi.inode.nlink = 0;
        mi.inode.ctime_ns = now;
        self.push_orphan(ino)?;
        self.store(ino)?;
        self.st.touch(ino, false);
        Ok(())
    }

    /// Frees an empty directory's blocks and inode.
    fn destroy_dir(&mut self, ino: u32) -> FsResult<()> {
        self.free_dir_blocks(ino)?;
        self.clear_inode_slot(ino)?;
        self.st.dirs.remove(&ino);
        self.free_inode(ino, true)?;
        self.st.touch(ino, true);
        Ok(())
    }

    /// Frees an empty directory's blocks and its extent chain (not its attribute block, which
    /// goes with the inode slot).
    fn free_dir_blocks(&mut self, ino: u32) -> FsResult<()> {
        let mi = self.load(ino)?;
        let mut blocks = mi.unmap_tail(0, usize::MAX);
        blocks.extend(std::mem::take(&mut mi.chain));
        for b in blocks {
            self.free_block(b)?;
        }
        Ok(())
    }

    /// Whether `anc` is `dir` or one of its ancestors.
    fn is_ancestor(&mut self, anc: u32, mut dir: u32) -> FsResult<bool> {
        let root = self.st.sb.root_ino;
        for _ in 0..100_000 {
            if dir == anc {
                return Ok(true);
            }
            if dir == root {
                return Ok(false);
            }
            dir = self.load(dir)?.inode.parent;
        }
        Err(FsError::Corrupt("directory parent chain loops".into()))
    }

    /// Renames `name` in `parent` to `new_name` in `new_parent`, replacing a compatible
    /// target. Returns an inode that lost its last link by the replacement.
    pub fn rename(&mut self, parent: u32, name: &[u8], new_parent: u32, new_name: &[u8]) -> FsResult<Option<u32>> {
        check_name(new_name)?;
        self.dir_inode(parent)?;
        self.dir_inode(new_parent)?;
        let (ino, kind) = self.lookup_entry(parent, name)?.ok_or(FsError::NotFound)?;
        let target = self.lookup_entry(new_parent, new_name)?;
        if target.map(|t| t.0) == Some(ino) {
            return Ok(None);
        }
        let is_dir = kind == FileType::Directory;
        if is_dir && new_parent != parent && self.is_ancestor(ino, new_parent)? {
            return Err(FsError::Invalid("cannot move a directory into itself".into()));
        }
        if let Some((t, tkind)) = target {
            match (is_dir, tkind == FileType::Directory) {
                (true, false) => return Err(FsError::NotDir),
                (false, true) => return Err(FsError::IsDir),
                (true, true) if !self.dir_is_empty(t)? => return Err(FsError::NotEmpty),
                _ => {}
            }
        }
        let now = self.now_ns;
        let mut orphan = None;
        self.remove_entry(parent, name)?;
        match target {
            Some((t, tkind)) => {
                self.replace_entry(new_parent, new_name, ino, kind)?;
                if tkind == FileType::Directory {
                    self.drop_dir(t)?;
                    self.load(new_parent)?.inode.nlink -= 1;
                } else if self.drop_link(t)? {
                    orphan = Some(t);
                }
            }
            None => self.add_entry(new_parent, new_name, ino, kind)?,
        }
        if is_dir && new_parent != parent {
            self.load(ino)?.inode.parent = new_parent;
            self.load(parent)?.inode.nlink -= 1;
            self.load(new_parent)?.inode.nlink += 1;
        }
        self.load(ino)?.inode.ctime_ns = now;
        for d in [parent, new_parent] {
            let p = self.load(d)?;
            p.inode.mtime_ns = now;
            p.inode.ctime_ns = now;
        }
        self.store(ino)?;
        self.store(parent)?;
        if new_parent != parent {
            self.store(new_parent)?;
        }
        for i in [ino, parent, new_parent] {
            self.st.touch(i, true);
        }
        Ok(orphan)
    }

    /// renameat2's RENAME_EXCHANGE: the two names swap inodes, atomically (one handle). Both
    /// must exist; a directory may not move under itself; moved directories get their new
    /// parent, and the parents' link counts follow.
    pub fn exchange(&mut self, parent: u32, name: &[u8], new_parent: u32, new_name: &[u8]) -> FsResult<()> {
        self.dir_inode(parent)?;
        self.dir_inode(new_parent)?;
        let (a, ka) = self.lookup_entry(parent, name)?.ok_or(FsError::NotFound)?;
        let (b, kb) = self.lookup_entry(new_parent, new_name)?.ok_or(FsError::NotFound)?;
        if a == b {
            return Ok(());
        }
        let (a_dir, b_dir) = (ka == FileType::Directory, kb == FileType::Directory);
        if parent != new_parent && ((a_dir && self.is_ancestor(a, new_parent)?) || (b_dir && self.is_ancestor(b, parent)?)) {
            return Err(FsError::Invalid("cannot move a directory into itself".into()));
        }
        self.replace_entry(parent, name, b, kb)?;
        self.replace_entry(new_parent, new_name, a, ka)?;
        if parent != new_parent {
            if a_dir {
                self.load(a)?.inode.parent = new_parent;
                self.load(parent)?.inode.nlink -= 1;
                self.load(new_parent)?.inode.nlink += 1;
            }
            if b_dir {
                self.load(b)?.inode.parent = parent;
                self.load(new_parent)?.inode.nlink -= 1;
                self.load(parent)?.inode.nlink += 1;
            }
        }
        let now = self.now_ns;
        for i in [a, b] {
            self.load(i)?.inode.ctime_ns = now;
            self.store(i)?;
        }
        for d in [parent, new_parent] {
            let p = self.load(d)?;
            p.inode.mtime_ns = now;
            p.inode.ctime_ns = now;
            self.store(d)?;
        }
        for i in [a, b, parent, new_parent] {
            self.st.touch(i, true);
        }
        Ok(())
    }

    pub fn setattr(&mut self, ino: u32, set: &SetAttr) -> FsResult<()> {
        let now = self.now_ns;
        let mi = self.load(ino)?;
        let i = &mut mi.inode;
        let chmod = set.mode.map(|m| m & 0o7777);
        if let Some(m) = chmod {
            i.mode = (i.mode & S_IFMT) | m;
        }
        if let Some(u) = set.uid {
            i.uid = u;
        }
        if let Some(g) = set.gid {
            i.gid = g;
        }
        if let Some(t) = set.atime_ns {
            i.atime_ns = t;
        }
        if let Some(t) = set.mtime_ns {
            i.mtime_ns = t;
        }
        i.ctime_ns = now;
        self.store(ino)?;
        if let Some(m) = chmod {
            self.chmod_acl(ino, m)?;
        }
        self.st.touch(ino, false);
        Ok(())
    }

    /// The last step of deleting an orphan whose blocks are all freed: free the inode and take
    /// it off the orphan list.
    pub fn finish_orphan(&mut self, ino: u32) -> FsResult<()> {
        let mi = self.load(ino)?;
        assert!(mi.extents().is_empty() && mi.chain.is_empty() && mi.inode.nlink == 0, "orphan emptied first");
        let next = mi.inode.orphan_next;
        let dir = mi.inode.is_dir();
        if self.st.sb.orphan_head == ino {
            self.st.sb.orphan_head = next;
            self.store_superblock()?;
        } else {
            let mut cur = self.st.sb.orphan_head;
            let mut steps = 0;
            loop {
                if cur == 0 || steps > self.st.sb.inode_count {
                    return Err(FsError::Corrupt(format!("orphan {ino} is not on the orphan list")));
                }
                let c = self.load(cur)?;
                if c.inode.orphan_next == ino {
                    c.inode.orphan_next = next;
                    self.store(cur)?;
                    break;
                }
                cur = c.inode.orphan_next;
                steps += 1;
            }
        }
        self.clear_inode_slot(ino)?;
        if dir {
            self.st.dirs.remove(&ino);
        }
        self.free_inode(ino, dir)?;
        self.st.touch(ino, true);
        Ok(())
    }

    /// An orphan directory's blocks (it was empty when removed), freed in one handle before
    /// [`Fs::finish_orphan`]; a file's go by truncation, in steps.
    pub fn empty_orphan_dir(&mut self, ino: u32) -> FsResult<()> {
        let mi = self.load(ino)?;
        if !mi.inode.is_dir() || mi.inode.nlink != 0 {
            return Err(FsError::Corrupt(format!("inode {ino} is not an orphan directory")));
        }
        self.free_dir_blocks(ino)?;
        self.store(ino)
    }

    /// Inodes on the orphan list.
    pub fn orphans(&mut self) -> FsResult<Vec<u32>> {
        let mut out = Vec::new();
        let mut cur = self.st.sb.orphan_head;
        while cur != 0 {
            if out.contains(&cur) || out.len() as u32 > self.st.sb.inode_count {
                return Err(FsError::Corrupt("orphan list loops".into()));
            }
            out.push(cur);
            cur = self.load(cur)?.inode.orphan_next;
        }
        Ok(out)
    }
}

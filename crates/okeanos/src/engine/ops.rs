//! The namespace and attribute operations, each one handle: lookup, create, link, unlink,
//! rename, directories, symbolic links, device nodes, extended attributes and ACLs, setattr.

use super::*;

impl Okeanos {
    pub fn root(&self) -> u32 {
        self.lock().fs.sb.root_ino
    }

    pub fn getattr(&self, ino: u32) -> FsResult<Attr> {
        self.with_fs(|fs| fs.attr(ino))
    }

    pub fn lookup(&self, parent: u32, name: &[u8]) -> FsResult<Attr> {
        self.with_fs(|fs| {
            let (ino, _) = fs.lookup_entry(parent, name)?.ok_or(FsError::NotFound)?;
            fs.attr(ino)
        })
    }

    pub fn readdir(&self, dir: u32) -> FsResult<Vec<DirEntryInfo>> {
        self.with_fs(|fs| Ok(fs.list(dir)?.into_iter().map(|e| DirEntryInfo { name: e.name, ino: e.ino, kind: e.ftype }).collect()))
    }

    pub(super) fn make(&self, parent: u32, name: &[u8], kind: FileType, perm: u32, owner: Owner) -> FsResult<Attr> {
        self.drain_evictions()?;
        // 20 for the inode, the entry and the parent; 6 more for an inherited ACL's block.
        let ino = self.handle(Self::meta_credits(26), |fs| fs.create_node(parent, name, kind, perm, owner.uid, owner.gid))?;
        self.getattr(ino)
    }

    /// Creates a regular file owned by root.
    pub fn create(&self, parent: u32, name: &[u8], perm: u32) -> FsResult<Attr> {
        self.create_as(parent, name, perm, Owner::ROOT)
    }

    /// Creates a regular file owned by `owner` (the caller's uid and gid; in a setgid
    /// directory the group is the directory's).
    pub fn create_as(&self, parent: u32, name: &[u8], perm: u32, owner: Owner) -> FsResult<Attr> {
        self.make(parent, name, FileType::Regular, perm, owner)
    }

    pub fn mkdir(&self, parent: u32, name: &[u8], perm: u32) -> FsResult<Attr> {
        self.mkdir_as(parent, name, perm, Owner::ROOT)
    }

    /// Creates a directory owned by `owner` (setgid directories: as [`Okeanos::create_as`]).
    pub fn mkdir_as(&self, parent: u32, name: &[u8], perm: u32, owner: Owner) -> FsResult<Attr> {
        self.make(parent, name, FileType::Directory, perm, owner)
    }

    /// Creates a symlink to `target` (at most one block).
    pub fn symlink(&self, parent: u32, name: &[u8], target: &[u8]) -> FsResult<Attr> {
        self.symlink_as(parent, name, target, Owner::ROOT)
    }

    /// Creates a symlink owned by `owner`.
    pub fn symlink_as(&self, parent: u32, name: &[u8], target: &[u8], owner: Owner) -> FsResult<Attr> {
        let bs = self.lock().fs.block_size();
        if target.is_empty() || target.len() > bs.min(4095) {
            return Err(FsError::NameTooLong);
        }
        self.drain_evictions()?;
        let ino = self.handle(Self::meta_credits(28), |fs| {
            let ino = fs.create_node(parent, name, FileType::Symlink, 0o777, owner.uid, owner.gid)?;
            fs.write(ino, 0, target)?;
            Ok(ino)
        })?;
        self.getattr(ino)
    }

    /// Creates a FIFO, socket, or character or block device (`rdev`: Linux's encoding of its
    /// number), owned by `owner`: an inode with no data, as ext4 stores them.
    pub fn mknod_as(&self, parent: u32, name: &[u8], kind: FileType, perm: u32, rdev: u32, owner: Owner) -> FsResult<Attr> {
        if !matches!(kind, FileType::Fifo | FileType::CharDevice | FileType::BlockDevice | FileType::Socket) {
            return Err(FsError::Invalid(format!("mknod makes FIFOs, sockets and devices, not {kind:?}")));
        }
        self.drain_evictions()?;
        let ino = self.handle(Self::meta_credits(20), |fs| {
            let ino = fs.create_node(parent, name, kind, perm, owner.uid, owner.gid)?;
            if matches!(kind, FileType::CharDevice | FileType::BlockDevice) {
                fs.load(ino)?.inode.rdev = rdev;
                fs.store(ino)?;
            }
            Ok(ino)
        })?;
        self.getattr(ino)
    }

    /// Whether directory `dir` has a default POSIX ACL: then a new inode's mode is not umasked
    /// (its ACL limits it instead).
    pub fn has_default_acl(&self, dir: u32) -> FsResult<bool> {
        self.with_fs(|fs| fs.has_default_acl(dir))
    }

    /// The value of extended attribute `name` of `ino` (ENODATA when it has none).
    pub fn getxattr(&self, ino: u32, name: &[u8]) -> FsResult<Vec<u8>> {
        self.with_fs(|fs| fs.get_xattr(ino, name))
    }

    /// The names of `ino`'s extended attributes.
    pub fn listxattr(&self, ino: u32) -> FsResult<Vec<Vec<u8>>> {
        self.with_fs(|fs| {
            let mut names: Vec<Vec<u8>> = fs.xattrs(ino)?.entries.into_iter().map(|(n, _)| n).collect();
            if fs.load(ino)?.inode.flags & crate::format::inode::FLAG_DURABLE != 0 {
                names.push(crate::fs::xattr::DURABLE_XATTR.to_vec());
                names.sort();
            }
            Ok(names)
        })
    }

    /// Makes regular file `ino` O_DUR, or not (the manylogs paper's O_DUR, section IV-D; the
    /// xattr `user.okeanos.durable` on a mount): its writes are always logged, whatever the
    /// content policy, and never written home for age; a checkpoint for space (the logs
    /// filling), a forced one (`okeanos checkpoint`) and unmount still write them, and a
    /// truncate or unlink drops them without writing anything home. Persistent (an inode flag).
    pub fn set_durable(&self, ino: u32, durable: bool) -> FsResult<()> {
        self.drain_evictions()?;
        self.handle_on(ino, Self::xattr_credits, |fs| fs.set_durable(ino, durable))
    }

    /// Whether `ino` is O_DUR.
    pub fn is_durable(&self, ino: u32) -> FsResult<bool> {
        self.with_fs(|fs| Ok(fs.load(ino)?.inode.flags & crate::format::inode::FLAG_DURABLE != 0))
    }

    /// Sets extended attribute `name` of `ino` (one atomic handle, journaled as metadata).
    pub fn setxattr(&self, ino: u32, name: &[u8], value: &[u8], mode: crate::fs::xattr::SetMode) -> FsResult<()> {
        self.drain_evictions()?;
        if name == crate::fs::acl::ACCESS {
            return self.handle(Self::xattr_credits, |fs| fs.set_access_acl(ino, value, mode));
        }
        self.handle(Self::xattr_credits, |fs| fs.set_xattr(ino, name, Some(value), mode))
    }

    /// Removes extended attribute `name` of `ino` (ENODATA when there is none).
    pub fn removexattr(&self, ino: u32, name: &[u8]) -> FsResult<()> {
        self.drain_evictions()?;
        self.handle(Self::xattr_credits, |fs| fs.set_xattr(ino, name, None, crate::fs::xattr::SetMode::Any))
    }

    pub fn readlink(&self, ino: u32) -> FsResult<Vec<u8>> {
        self.with_fs(|fs| {
            if !fs.load(ino)?.inode.is_symlink() {
                return Err(FsError::Invalid("not a symbolic link".into()));
            }
            fs.read(ino, 0, 4096)
        })
    }

    pub fn link(&self, ino: u32, new_parent: u32, new_name: &[u8]) -> FsResult<Attr> {
        self.drain_evictions()?;
        self.handle(Self::meta_credits(16), |fs| fs.link(ino, new_parent, new_name))?;
        self.getattr(ino)
    }

    pub fn unlink(&self, parent: u32, name: &[u8]) -> FsResult<()> {
        self.drain_evictions()?;
        let gone = self.handle(Self::meta_credits(12), |fs| fs.unlink(parent, name))?;
        if let Some(ino) = gone {
            self.release_if_unused(ino)?;
        }
        Ok(())
    }

    /// Blocks owned by directory `name` in `parent` (0 if it is not a directory): removing
    /// it frees them all. An empty directory may still own blocks from entries it once held.
    pub(super) fn dir_blocks(fs: &mut Fs, parent: u32, name: &[u8]) -> FsResult<u64> {
        match fs.lookup_entry(parent, name)? {
            Some((ino, FileType::Directory)) => {
                let mi = fs.load(ino)?;
                Ok(mi.owned_blocks())
            }
            _ => Ok(0),
        }
    }

    pub fn rmdir(&self, parent: u32, name: &[u8]) -> FsResult<()> {
        self.drain_evictions()?;
        self.handle(
            |fs| {
                let blocks = Self::dir_blocks(fs, parent, name)?;
                Ok(Credits { blocks: 12 + Self::alloc_credits(fs, blocks), revokes: blocks })
            },
            |fs| fs.rmdir(parent, name),
        )
    }

    pub fn rename(&self, parent: u32, name: &[u8], new_parent: u32, new_name: &[u8]) -> FsResult<()> {
        self.rename_with(parent, name, new_parent, new_name, false)
    }

    /// rename(2) with RENAME_NOREPLACE: EEXIST if `new_name` exists, checked in the same
    /// handle as the rename (no other operation can create it in between).
    pub fn rename_noreplace(&self, parent: u32, name: &[u8], new_parent: u32, new_name: &[u8]) -> FsResult<()> {
        self.rename_with(parent, name, new_parent, new_name, true)
    }

    /// renameat2 with RENAME_EXCHANGE: `name` and `new_name` swap what they name, atomically.
    pub fn rename_exchange(&self, parent: u32, name: &[u8], new_parent: u32, new_name: &[u8]) -> FsResult<()> {
        self.drain_evictions()?;
        self.handle(Self::meta_credits(28), |fs| fs.exchange(parent, name, new_parent, new_name))
    }

    pub(super) fn rename_with(&self, parent: u32, name: &[u8], new_parent: u32, new_name: &[u8], noreplace: bool) -> FsResult<()> {
        self.drain_evictions()?;
        let gone = self.handle(
            |fs| {
                let blocks = Self::dir_blocks(fs, new_parent, new_name)?;
                Ok(Credits { blocks: 28 + Self::alloc_credits(fs, blocks), revokes: blocks })
            },
            |fs| {
                if noreplace && fs.lookup_entry(new_parent, new_name)?.is_some() {
                    return Err(FsError::Exists);
                }
                fs.rename(parent, name, new_parent, new_name)
            },
        )?;
        if let Some(ino) = gone {
            self.release_if_unused(ino)?;
        }
        Ok(())
    }

    pub fn setattr(&self, ino: u32, set: &SetAttr) -> FsResult<Attr> {
        self.drain_evictions()?;
        self.handle_on(ino, Self::meta_credits(4), |fs| fs.setattr(ino, set))?;
        self.getattr(ino)
    }
}

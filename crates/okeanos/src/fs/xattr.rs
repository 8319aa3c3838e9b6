//! Extended attributes: each inode's in one metadata block (`format::xattr`), found through the
//! inode's `xattr_block`, journaled like any other metadata block under every policy. The
//! block is allocated with the first attribute and freed with the last (or with the inode).

use crate::format::inode::FLAG_DURABLE;
use crate::ids::HomeBlock;
use super::{Fs, FsError, FsResult};
use crate::format::xattr::{XattrBlock, XATTR_NAME_MAX};

/// How `set_xattr` treats an existing attribute (setxattr(2)'s flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetMode {
    /// Create or replace.
    Any,
    /// Fail with EEXIST if it exists (XATTR_CREATE).
    Create,
    /// Fail with ENODATA if it does not (XATTR_REPLACE).
    Replace,
}

/// Namespaces a name may be in (as Linux: anything else is EOPNOTSUPP; here EINVAL).
fn check_xattr_name(name: &[u8]) -> FsResult<()> {
    if name.is_empty() || name.len() > XATTR_NAME_MAX {
        return Err(if name.is_empty() { FsError::Invalid("empty attribute name".into()) } else { FsError::NameTooLong });
    }
    let known = [b"user.".as_slice(), b"trusted.", b"security.", b"system."];
    if !known.iter().any(|p| name.starts_with(p) && name.len() > p.len()) {
        return Err(FsError::Invalid(format!("attribute {:?} is in no known namespace", String::from_utf8_lossy(name))));
    }
    Ok(())
}

/// The attribute that reads and sets a file's O_DUR flag (kept in the inode's flags, not in
/// the attribute block).
pub const DURABLE_XATTR: &[u8] = b"user.okeanos.durable";

impl Fs<'_> {
    /// Sets or clears the O_DUR flag of regular file `ino` (manylogs paper, section IV-D).
    pub fn set_durable(&mut self, ino: u32, durable: bool) -> FsResult<()> {
        let now = self.now_ns;
        let mi = self.load(ino)?;
        if !mi.inode.is_reg() {
            return Err(FsError::Invalid("only a regular file can be O_DUR".into()));
        }
        if durable {
            mi.inode.flags |= FLAG_DURABLE;
        } else {
            mi.inode.flags &= !FLAG_DURABLE;
        }
        mi.inode.ctime_ns = now;
        self.store(ino)?;
        self.st.touch(ino, false);
        Ok(())
    }

    /// The attributes of `ino` (empty when it has none).
    pub fn xattrs(&mut self, ino: u32) -> FsResult<XattrBlock> {
        let blk = self.load(ino)?.inode.xattr_block;
        if blk == HomeBlock::NONE {
            return Ok(XattrBlock { owner: ino, entries: Vec::new() });
        }
        if !self.is_data_block(blk) {
            return Err(FsError::Corrupt(format!("inode {ino}: attribute block {blk} is outside the data area")));
        }
        let data = self.block(blk, crate::cache::BufKind::Meta)?;
        XattrBlock::decode(ino, data).map_err(|e| FsError::Corrupt(format!("inode {ino}: {e}")))
    }

    pub fn get_xattr(&mut self, ino: u32, name: &[u8]) -> FsResult<Vec<u8>> {
        check_xattr_name(name)?;
        if name == DURABLE_XATTR {
            let durable = self.load(ino)?.inode.flags & FLAG_DURABLE != 0;
            return if durable { Ok(b"1".to_vec()) } else { Err(FsError::NoAttribute) };
        }
        self.xattrs(ino)?.entries.into_iter().find(|(n, _)| n == name).map(|(_, v)| v).ok_or(FsError::NoAttribute)
    }

    /// Sets (or, with `value` None, removes) attribute `name` of `ino`.
    pub fn set_xattr(&mut self, ino: u32, name: &[u8], value: Option<&[u8]>, mode: SetMode) -> FsResult<()> {
        check_xattr_name(name)?;
        if name == DURABLE_XATTR {
            let now = self.load(ino)?.inode.flags & FLAG_DURABLE != 0;
            let want = match value {
                None if !now => return Err(FsError::NoAttribute),
                None => false,
                Some(b"1") | Some(b"1\n") | Some(b"true") | Some(b"on") => true,
                Some(b"0") | Some(b"0\n") | Some(b"false") | Some(b"off") => false,
                Some(v) => return Err(FsError::Invalid(format!("user.okeanos.durable takes 1 or 0, not {:?}", String::from_utf8_lossy(v)))),
            };
            match (mode, now) {
                (SetMode::Create, true) if value.is_some() => return Err(FsError::Exists),
                (SetMode::Replace, false) if value.is_some() => return Err(FsError::NoAttribute),
                _ => {}
            }
            return self.set_durable(ino, want);
        }
        if value.is_some_and(|v| v.len() > u16::MAX as usize) {
            return Err(FsError::ValueTooBig);
        }
        let mut x = self.xattrs(ino)?;
        let pos = x.entries.iter().position(|(n, _)| n == name);
        match (pos, value, mode) {
            (Some(_), Some(_), SetMode::Create) => return Err(FsError::Exists),
            (None, Some(_), SetMode::Replace) | (None, None, _) => return Err(FsError::NoAttribute),
            (Some(i), None, _) => {
                x.entries.remove(i);
            }
            (Some(i), Some(v), _) => x.entries[i].1 = v.to_vec(),
            (None, Some(v), _) => {
                x.entries.push((name.to_vec(), v.to_vec()));
                x.entries.sort();
            }
        }
        let bs = self.bs();
        let blk = self.load(ino)?.inode.xattr_block;
        if x.entries.is_empty() {
            if blk != HomeBlock::NONE {
                self.free_block(blk)?;
                self.load(ino)?.inode.xattr_block = HomeBlock::NONE;
            }
        } else {
            let enc = x.encode(bs).ok_or(FsError::NoSpace)?;
            if blk == HomeBlock::NONE {
                let goal = self.load(ino)?.extents().first().map_or(HomeBlock::NONE, |e| e.physical);
                let b = self.alloc_block(goal)?;
                self.meta_new(b).copy_from_slice(&enc);
                self.load(ino)?.inode.xattr_block = b;
            } else {
                self.meta_mut(blk)?.copy_from_slice(&enc);
            }
        }
        let now = self.now_ns;
        self.load(ino)?.inode.ctime_ns = now;
        self.store(ino)?;
        self.st.touch(ino, true);
        Ok(())
    }
}

//! Extended attributes: each inode's in one metadata block (`format::xattr`), found through the
//! inode's `xattr_block`, journaled like any other metadata block under every policy. The
//! block is allocated with the first attribute and freed with the last (or with the inode).

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

impl Fs<'_> {
    /// The attributes of `ino` (empty when it has none).
    pub fn xattrs(&mut self, ino: u32) -> FsResult<XattrBlock> {
        let blk = self.load(ino)?.inode.xattr_block;
        if blk == 0 {
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
        self.xattrs(ino)?.entries.into_iter().find(|(n, _)| n == name).map(|(_, v)| v).ok_or(FsError::NoAttribute)
    }

    /// Sets (or, with `value` None, removes) attribute `name` of `ino`.
    pub fn set_xattr(&mut self, ino: u32, name: &[u8], value: Option<&[u8]>, mode: SetMode) -> FsResult<()> {
        check_xattr_name(name)?;
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
            if blk != 0 {
                self.free_block(blk)?;
                self.load(ino)?.inode.xattr_block = 0;
            }
        } else {
            let enc = x.encode(bs).ok_or(FsError::NoSpace)?;
            if blk == 0 {
                let goal = self.load(ino)?.extents.first().map_or(0, |e| e.physical);
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

//! POSIX ACLs kept as the `system.posix_acl_access` and `system.posix_acl_default` extended
//! attributes, in Linux's xattr encoding (version 2; entries of tag u16, perm u16, id u32), with
//! the two rules a file system must apply itself (POSIX.1e draft 17, as Linux's
//! `posix_acl_create` and `posix_acl_chmod`):
//! - a new inode in a directory with a default ACL gets that ACL as its access ACL, each of
//!   the owner, mask (or group) and other entries limited by the mode asked for, and the mode
//!   made from the result (the umask is not applied); a new directory also inherits the
//!   default ACL;
//! - chmod rewrites the owner, mask (or group) and other entries of the access ACL.

use super::xattr::SetMode;
use super::{Fs, FsError, FsResult};

pub const ACCESS: &[u8] = b"system.posix_acl_access";
pub const DEFAULT: &[u8] = b"system.posix_acl_default";
const VERSION: u32 = 2;
const USER_OBJ: u16 = 0x01;
const GROUP_OBJ: u16 = 0x04;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;

/// A decoded ACL: (tag, perm, id) entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acl(pub Vec<(u16, u16, u32)>);

impl Acl {
    pub fn decode(b: &[u8]) -> FsResult<Acl> {
        if b.len() < 4 || (b.len() - 4) % 8 != 0 || u32::from_le_bytes(b[0..4].try_into().expect("4 bytes")) != VERSION {
            return Err(FsError::Invalid("not a POSIX ACL (version 2)".into()));
        }
        Ok(Acl(b[4..].chunks(8).map(|e| (u16::from_le_bytes([e[0], e[1]]), u16::from_le_bytes([e[2], e[3]]), u32::from_le_bytes(e[4..8].try_into().expect("4 bytes")))).collect()))
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = VERSION.to_le_bytes().to_vec();
        for &(t, p, id) in &self.0 {
            b.extend_from_slice(&t.to_le_bytes());
            b.extend_from_slice(&p.to_le_bytes());
            b.extend_from_slice(&id.to_le_bytes());
        }
        b
    }

    /// Only owner, group and other: the mode says it all (no attribute is kept).
    pub fn is_minimal(&self) -> bool {
        self.0.iter().all(|e| matches!(e.0, USER_OBJ | GROUP_OBJ | OTHER))
    }

    /// The permission bits this ACL means (owner entry, mask or else group entry, other
    /// entry); an ACL without the three required entries, or with named entries but no mask,
    /// is invalid (EINVAL, as Linux's posix_acl_valid).
    pub fn mode_bits(&self) -> FsResult<u32> {
        let find = |tag: u16| self.0.iter().find(|e| e.0 == tag).map(|e| e.1 as u32 & 7);
        let named = self.0.iter().any(|e| matches!(e.0, 0x02 | 0x08));
        let (Some(u), Some(g), Some(o)) = (find(USER_OBJ), find(GROUP_OBJ), find(OTHER)) else {
            return Err(FsError::Invalid("an access ACL needs owner, group and other entries".into()));
        };
        let m = find(MASK);
        if named && m.is_none() {
            return Err(FsError::Invalid("an ACL with named entries needs a mask entry".into()));
        }
        Ok(u << 6 | m.unwrap_or(g) << 3 | o)
    }

    /// Sets (`Some`) or limits the owner, mask-or-group and other entries from `mode`'s
    /// permission bits; returns the permission bits the ACL now means.
    fn apply_mode(&mut self, mode: u32, limit: bool) -> u32 {
        let has_mask = self.0.iter().any(|e| e.0 == MASK);
        let mut out = 0u32;
        for e in self.0.iter_mut() {
            let (shift, hit) = match e.0 {
                USER_OBJ => (6, true),
                MASK => (3, true),
                GROUP_OBJ if !has_mask => (3, true),
                OTHER => (0, true),
                _ => (0, false),
            };
            if hit {
                let m = ((mode >> shift) & 7) as u16;
                e.1 = if limit { e.1 & m } else { m };
                out |= (e.1 as u32 & 7) << shift;
            }
        }
        out
    }
}

impl Fs<'_> {
    fn acl(&mut self, ino: u32, name: &[u8]) -> FsResult<Option<Acl>> {
        match self.get_xattr(ino, name) {
            Ok(v) => Acl::decode(&v).map(Some),
            Err(FsError::NoAttribute) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether directory `dir` has a default ACL (then a new inode's mode is not umasked).
    pub fn has_default_acl(&mut self, dir: u32) -> FsResult<bool> {
        Ok(self.acl(dir, DEFAULT)?.is_some())
    }

    /// Applies `parent`'s default ACL to the just-created `ino` (see the module's rules).
    pub fn inherit_acl(&mut self, parent: u32, ino: u32, is_dir: bool) -> FsResult<()> {
        let Some(default) = self.acl(parent, DEFAULT)? else { return Ok(()) };
        if is_dir {
            self.set_xattr(ino, DEFAULT, Some(&default.encode()), SetMode::Any)?;
        }
        let mut access = default;
        let mode = self.load(ino)?.inode.mode;
        let perm = access.apply_mode(mode, true);
        {
            let i = &mut self.load(ino)?.inode;
            i.mode = (i.mode & !0o777) | perm;
        }
        self.store(ino)?;
        if !access.is_minimal() {
            self.set_xattr(ino, ACCESS, Some(&access.encode()), SetMode::Any)?;
        }
        Ok(())
    }

    /// Sets the access ACL of `ino` (setfacl, or cp -p through fsetxattr), keeping the mode in
    /// step as Linux's posix_acl_update_mode and ext4 do: an ACL the mode can say alone (owner,
    /// group and other entries only) becomes the mode and no attribute is kept; otherwise the
    /// mode's owner, group and other bits take the owner, mask and other entries. With FUSE's
    /// POSIX ACL support the kernel leaves this to the file system.
    pub fn set_access_acl(&mut self, ino: u32, value: &[u8], mode: SetMode) -> FsResult<()> {
        let acl = Acl::decode(value)?;
        let perm = acl.mode_bits()?;
        let exists = self.acl(ino, ACCESS)?.is_some();
        match mode {
            SetMode::Create if exists => return Err(FsError::Exists),
            SetMode::Replace if !exists => return Err(FsError::NoAttribute),
            _ => {}
        }
        let now = self.now_ns;
        {
            let i = &mut self.load(ino)?.inode;
            i.mode = (i.mode & !0o777) | perm;
            i.ctime_ns = now;
        }
        self.store(ino)?;
        if acl.is_minimal() {
            if exists {
                self.set_xattr(ino, ACCESS, None, SetMode::Any)?;
            }
            Ok(())
        } else {
            self.set_xattr(ino, ACCESS, Some(value), SetMode::Any)
        }
    }

    /// After a mode change: the access ACL's owner, mask-or-group and other entries follow it.
    pub fn chmod_acl(&mut self, ino: u32, mode: u32) -> FsResult<()> {
        if let Some(mut a) = self.acl(ino, ACCESS)? {
            a.apply_mode(mode, false);
            self.set_xattr(ino, ACCESS, Some(&a.encode()), SetMode::Any)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(entries: &[(u16, u16, u32)]) -> Acl {
        Acl(entries.to_vec())
    }

    #[test]
    fn creation_limits_by_mode_and_chmod_rewrites() {
        // user::rwx user:1000:rwx group::r-x mask::rwx other::r-x
        let d = acl(&[(USER_OBJ, 7, u32::MAX), (0x02, 7, 1000), (GROUP_OBJ, 5, u32::MAX), (MASK, 7, u32::MAX), (OTHER, 5, u32::MAX)]);
        assert_eq!(Acl::decode(&d.encode()).unwrap(), d);
        let mut a = d.clone();
        // open(..., 0640): owner rw, mask r, other none.
        assert_eq!(a.apply_mode(0o640, true), 0o640);
        assert_eq!(a.0, [(USER_OBJ, 6, u32::MAX), (0x02, 7, 1000), (GROUP_OBJ, 5, u32::MAX), (MASK, 4, u32::MAX), (OTHER, 0, u32::MAX)]);
        assert!(!a.is_minimal());
        // chmod 0750 sets them.
        assert_eq!(a.apply_mode(0o750, false), 0o750);
        assert_eq!(a.0[3], (MASK, 5, u32::MAX));
        // Without a mask the group entry takes the group bits.
        let mut m = acl(&[(USER_OBJ, 7, 0), (GROUP_OBJ, 7, 0), (OTHER, 7, 0)]);
        assert_eq!(m.apply_mode(0o751, true), 0o751);
        assert!(m.is_minimal());
        assert!(Acl::decode(&[1, 0, 0, 0]).is_err() && Acl::decode(&[2, 0, 0, 0, 1]).is_err());
    }

    #[test]
    fn the_mode_an_acl_means() {
        // user::rw- group::r-- other::r--: 0644, minimal.
        let a = acl(&[(USER_OBJ, 6, 0), (GROUP_OBJ, 4, 0), (OTHER, 4, 0)]);
        assert_eq!(a.mode_bits().unwrap(), 0o644);
        // With a named user and a mask, the group bits are the mask's.
        let b = acl(&[(USER_OBJ, 7, 0), (0x02, 7, 1000), (GROUP_OBJ, 4, 0), (MASK, 5, 0), (OTHER, 0, 0)]);
        assert_eq!(b.mode_bits().unwrap(), 0o750);
        assert!(acl(&[(USER_OBJ, 7, 0), (0x02, 7, 1000), (GROUP_OBJ, 4, 0), (OTHER, 0, 0)]).mode_bits().is_err(), "named entry without a mask");
        assert!(acl(&[(USER_OBJ, 7, 0), (OTHER, 0, 0)]).mode_bits().is_err(), "no group entry");
    }
}

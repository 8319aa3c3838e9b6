//! Directories: the in-memory index of a directory's entries and the blocks that hold them.
//! Directory blocks are metadata, logged whole under every content policy.

use super::{Fs, FsError, FsResult};
use crate::ids::HomeBlock;
use crate::cache::BufKind;
use crate::format::dir::{DirBlock, DirEntry, FileType, DIR_HEADER, MAX_NAME};
use crate::det::HashMap;

#[derive(Debug, Clone, Default)]
pub struct DirIndex {
    /// name -> (inode, type, index of the directory block holding it)
    pub names: HashMap<Vec<u8>, (u32, FileType, usize)>,
    pub blocks: Vec<DirBlock>,
}

/// Checks a name for a directory entry.
pub fn check_name(name: &[u8]) -> FsResult<()> {
    if name.len() > MAX_NAME {
        return Err(FsError::NameTooLong);
    }
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0) {
        return Err(FsError::Invalid(format!("bad file name {:?}", String::from_utf8_lossy(name))));
    }
    Ok(())
}

impl<'a> Fs<'a> {
    /// The index of directory `dir`, loaded on first use.
    pub fn dir(&mut self, dir: u32) -> FsResult<&mut DirIndex> {
        if !self.st.dirs.contains_key(&dir) {
            let idx = self.read_dir_blocks(dir)?;
            self.st.dirs.insert(dir, idx);
        }
        Ok(self.st.dirs.get_mut(&dir).expect("just loaded"))
    }

    fn read_dir_blocks(&mut self, dir: u32) -> FsResult<DirIndex> {
        let mi = self.load(dir)?;
        if !mi.inode.is_dir() {
            return Err(FsError::NotDir);
        }
        let mi = mi.clone();
        let bs = self.bs() as u64;
        if mi.inode.size % bs != 0 {
            return Err(FsError::Corrupt(format!("directory {dir} has size {} not a multiple of the block size", mi.inode.size)));
        }
        let nblocks = (mi.inode.size / bs) as u32;
        let mut idx = DirIndex::default();
        for fb in 0..nblocks {
            let phys = mi.bmap(fb).ok_or_else(|| FsError::Corrupt(format!("directory {dir} has a hole at block {fb}")))?;
            let db = DirBlock::decode(self.block(phys, BufKind::Meta)?)?;
            if db.owner != dir {
                return Err(FsError::Corrupt(format!("directory block {phys} belongs to {} not {dir}", db.owner)));
            }
            for e in &db.entries {
                if idx.names.insert(e.name.clone(), (e.ino, e.ftype, fb as usize)).is_some() {
                    return Err(FsError::Corrupt(format!("directory {dir} holds {:?} twice", String::from_utf8_lossy(&e.name))));
                }
            }
            idx.blocks.push(db);
        }
        Ok(idx)
    }

    /// A name longer than any entry can hold is ENAMETOOLONG, never "not found" (POSIX), for
    /// every call that looks a name up (stat, unlink, rmdir, rename, link, ...).
    pub fn lookup_entry(&mut self, dir: u32, name: &[u8]) -> FsResult<Option<(u32, FileType)>> {
        if name.len() > MAX_NAME {
            return Err(FsError::NameTooLong);
        }
        Ok(self.dir(dir)?.names.get(name).map(|&(i, t, _)| (i, t)))
    }

    /// Writes directory block `k` of `dir` from the index.
    fn store_dir_block(&mut self, dir: u32, k: usize) -> FsResult<()> {
        let phys = self.load(dir)?.bmap(k as u32).expect("directory block mapped");
        let db = self.st.dirs[&dir].blocks[k].clone();
        let data = self.meta_mut(phys)?;
        db.encode(data);
        Ok(())
    }

    /// Adds an entry; may grow the directory by one block. The caller checked the name.
    pub fn add_entry(&mut self, dir: u32, name: &[u8], ino: u32, ftype: FileType) -> FsResult<()> {
        let bs = self.bs();
        let entry = DirEntry { ino, ftype, name: name.to_vec() };
        let len = entry.encoded_len();
        let idx = self.dir(dir)?;
        assert!(!idx.names.contains_key(name), "caller checked the name is free");
        let slot = idx.blocks.iter().position(|b| b.fits(bs, len));
        let k = match slot {
            Some(k) => k,
            None => {
                let k = idx.blocks.len();
                let goal = self.load(dir)?.goal_for(k as u32).unwrap_or(HomeBlock::NONE);
                let goal = if goal == HomeBlock::NONE { self.group_data_start((dir - 1) / self.st.sb.inodes_per_group) } else { goal };
                let phys = self.alloc_block(goal)?;
                self.meta_new(phys);
                let mi = self.load(dir)?;
                mi.map(k as u32, phys);
                mi.inode.size = (k as u64 + 1) * bs as u64;
                self.store(dir)?;
                self.dir(dir)?.blocks.push(DirBlock { owner: dir, entries: Vec::new() });
                k
            }
        };
        let idx = self.dir(dir)?;
        idx.blocks[k].entries.push(entry);
        idx.names.insert(name.to_vec(), (ino, ftype, k));
        debug_assert!(DIR_HEADER + idx.blocks[k].used_bytes() <= bs);
        self.store_dir_block(dir, k)
    }

    /// Removes an entry; returns the inode it named.
    pub fn remove_entry(&mut self, dir: u32, name: &[u8]) -> FsResult<u32> {
        let idx = self.dir(dir)?;
        let (ino, _, k) = idx.names.remove(name).ok_or(FsError::NotFound)?;
        idx.blocks[k].entries.retain(|e| e.name != name);
        self.store_dir_block(dir, k)?;
        Ok(ino)
    }

    /// Points an existing entry at another inode (rename over an existing name).
    pub fn replace_entry(&mut self, dir: u32, name: &[u8], ino: u32, ftype: FileType) -> FsResult<()> {
        let idx = self.dir(dir)?;
        let (_, _, k) = *idx.names.get(name).ok_or(FsError::NotFound)?;
        idx.names.insert(name.to_vec(), (ino, ftype, k));
        for e in idx.blocks[k].entries.iter_mut().filter(|e| e.name == name) {
            e.ino = ino;
            e.ftype = ftype;
        }
        self.store_dir_block(dir, k)
    }

    /// Entries of `dir` in on-disk order.
    pub fn list(&mut self, dir: u32) -> FsResult<Vec<DirEntry>> {
        Ok(self.dir(dir)?.blocks.iter().flat_map(|b| b.entries.iter().cloned()).collect())
    }

    pub fn dir_is_empty(&mut self, dir: u32) -> FsResult<bool> {
        Ok(self.dir(dir)?.names.is_empty())
    }
}

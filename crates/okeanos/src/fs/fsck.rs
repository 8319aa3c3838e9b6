//! fsck: checks every structure of an unmounted file system and reports each problem.
//!
//! Checked: the superblock and group descriptors (checksums, geometry), the journal superblock
//! (and whether the journal needs recovery), both bitmaps of every group against their
//! checksums and against what the tree actually uses, every reachable inode (checksum, extents
//! inside the data area, extent chain, no block owned twice, size against mapped blocks), every
//! directory block, link counts, directory parents, the orphan list, the free counts, and
//! inode-table slots in use that nothing reaches.

use crate::ids::{DevBlock, HomeBlock, Tid};
use super::{Fs, FsState};
use crate::cache::BufKind;
use crate::device::Device;
use crate::format::bitmap_crc;
use crate::format::dir::FileType;
use crate::journal::content::DataMode;
use crate::journal::{Journal, JournalConfig};
use crate::runtime::Devices;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

#[derive(Debug, Clone, Default)]
pub struct FsckReport {
    pub problems: Vec<String>,
    pub files: u64,
    pub directories: u64,
    pub symlinks: u64,
    pub orphans: u64,
    pub blocks_used: u64,
    pub inodes_used: u64,
    pub journal: String,
    /// Why nothing could be checked (no readable file system, no readable journal): an
    /// operational error rather than a problem found (e2fsck's exit code 8). Also in `problems`.
    pub unreadable: Option<String>,
    /// Why the superblock forbids a read-write mount (the ERRORS state, an unknown state); also
    /// listed in `problems`.
    pub error_state: Option<String>,
}

impl FsckReport {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }

    /// Whether the only problem is the error state: every structure checked out, so the state
    /// can be cleared ([`crate::inspect::clear_errors`]).
    pub fn only_error_state(&self) -> bool {
        self.error_state.is_some() && self.problems.len() == 1
    }
}

struct Problems<'a> {
    out: &'a mut Vec<String>,
    per_kind: HashMap<&'static str, usize>,
}

impl Problems<'_> {
    fn add(&mut self, kind: &'static str, msg: String) {
        let n = self.per_kind.entry(kind).or_insert(0);
        *n += 1;
        if *n <= 25 {
            self.out.push(msg);
        } else if *n == 26 {
            self.out.push(format!("... more problems of kind '{kind}' omitted"));
        }
    }
}

fn bit(map: &[u8], i: usize) -> bool {
    map[i / 8] & (1 << (i % 8)) != 0
}

/// Checks the file system on `dev` (with its external journal device, if any).
pub fn fsck(dev: Arc<dyn Device>, journal: Option<Arc<dyn Device>>) -> FsckReport {
    let mut report = FsckReport::default();
    let (sb, gdt) = match crate::runtime::open::read_meta(dev.as_ref()) {
        Ok(x) => x,
        Err(e) => {
            let why = format!("cannot read the file system: {e}");
            report.problems.push(why.clone());
            report.unreadable = Some(why);
            return report;
        }
    };
    if let Some(why) = crate::runtime::open::error_state(&sb) {
        report.problems.push(format!("superblock: {why}"));
        report.error_state = Some(why);
    }
    let devs = Devices::new(dev.clone(), journal, sb.block_size as usize);
    let (region, jsb) = match crate::runtime::open::open_journal(&sb, &devs) {
        Ok(x) => x,
        Err(e) => {
            let why = format!("journal: {e}");
            report.problems.push(why.clone());
            report.unreadable = Some(why);
            return report;
        }
    };
    let js = crate::runtime::placement::journal_state(&sb, &devs, &jsb);
    if let Some(p) = &js.problem {
        report.problems.push(p.clone());
    } else if js.needs_recovery {
        report.problems.push(format!("journal needs recovery ({}): mount the file system or run `okeanos recover`", js.summary));
    }
    report.journal = js.summary;
    let bs = sb.block_size as usize;
    let cfg = JournalConfig::new(region.ring_len(), bs);
    let journal = Journal::new(cfg, DataMode::Ordered.policy(), Box::new(crate::journal::placement::Ring::new(region, jsb)), Tid::new(1));
    let mut st = FsState::new(sb.clone(), gdt.clone(), journal, 1 << 16, Some("fsck".into()));
    let mut fs = Fs { st: &mut st, dev: dev.as_ref(), now_ns: 0 };
    let mut p = Problems { out: &mut report.problems, per_kind: HashMap::new() };

    // Bitmaps against their checksums.
    let mut bmaps = Vec::new();
    let mut imaps = Vec::new();
    for (g, gd) in gdt.iter().enumerate() {
        for (which, blk, want, into) in [("block", gd.block_bitmap, gd.block_bitmap_crc, &mut bmaps), ("inode", gd.inode_bitmap, gd.inode_bitmap_crc, &mut imaps)] {
            let mut b = vec![0u8; bs];
            if let Err(e) = dev.read_at(DevBlock::home(blk).byte(bs as u64), &mut b) {
                p.add("io", format!("group {g}: cannot read the {which} bitmap: {e}"));
            } else if bitmap_crc(g as u32, &b) != want {
                p.add("bitmap-crc", format!("group {g}: {which} bitmap fails its checksum"));
            }
            into.push(b);
        }
    }

    // Walk the tree.
    let root = sb.root_ino;
    let mut refs: BTreeMap<u32, u32> = BTreeMap::new();
    let mut kinds: HashMap<u32, FileType> = HashMap::new();
    let mut subdirs: HashMap<u32, u32> = HashMap::new();
    let mut queue = VecDeque::from([root]);
    kinds.insert(root, FileType::Directory);
    let mut seen_dirs = HashSet::from([root]);
    while let Some(d) = queue.pop_front() {
        let entries = match fs.list(d) {
            Ok(e) => e,
            Err(e) => {
                p.add("dir", format!("directory {d}: {e}"));
                continue;
            }
        };
        for e in entries {
            let name = String::from_utf8_lossy(&e.name).into_owned();
            if e.ino == 0 || e.ino > sb.inode_count {
                p.add("entry", format!("directory {d}: entry {name:?} names inode {} out of range", e.ino));
                continue;
            }
            *refs.entry(e.ino).or_insert(0) += 1;
            kinds.insert(e.ino, e.ftype);
            let inode = match fs.load(e.ino) {
                Ok(mi) => mi.inode.clone(),
                Err(err) => {
                    p.add("inode", format!("inode {} ({name:?} in directory {d}): {err}", e.ino));
                    continue;
                }
            };
            if FileType::from_mode(inode.mode) != Some(e.ftype) {
                p.add("entry", format!("directory {d}: entry {name:?} says {:?} but inode {} is mode {:o}", e.ftype, e.ino, inode.mode));
            }
            if e.ftype == FileType::Directory {
                *subdirs.entry(d).or_insert(0) += 1;
                if inode.parent != d {
                    p.add("parent", format!("directory inode {} ({name:?}) records parent {} but lives in {d}", e.ino, inode.parent));
                }
                if !seen_dirs.insert(e.ino) {
                    p.add("dir", format!("directory inode {} is reachable twice", e.ino));
                    continue;
                }
                queue.push_back(e.ino);
            }
        }
    }
    let orphans = match fs.orphans() {
        Ok(o) => o,
        Err(e) => {
            p.add("orphan", format!("orphan list: {e}"));
            Vec::new()
        }
    };
    report.orphans = orphans.len() as u64;

    // Inodes: links, extents, block ownership.
    let mut owner: HashMap<HomeBlock, u32> = HashMap::new();
    let mut used_inodes: HashSet<u32> = HashSet::from([root]);
    let mut all: Vec<u32> = vec![root];
    all.extend(refs.keys().copied());
    all.extend(orphans.iter().copied());
    all.sort_unstable();
    all.dedup();
    let bsu = bs as u64;
    for ino in all {
        used_inodes.insert(ino);
        let mi = match fs.load(ino) {
            Ok(mi) => mi.clone(),
            Err(_) => continue, // reported during the walk
        };
        let i = &mi.inode;
        let on_orphan_list = orphans.contains(&ino);
        if i.is_dir() {
            report.directories += 1;
            // A directory removed while held (docs/JOURNALING.md, "Removed while held") has
            // no links until it is freed.
            let want = if on_orphan_list { 0 } else { 2 + subdirs.get(&ino).copied().unwrap_or(0) };
            if i.nlink != want {
                p.add("nlink", format!("directory {ino}: link count {} should be {want}", i.nlink));
            }
        } else {
            if i.is_symlink() {
                report.symlinks += 1;
            } else {
                report.files += 1;
            }
            let want = refs.get(&ino).copied().unwrap_or(0);
            if i.nlink != want {
                p.add("nlink", format!("inode {ino}: link count {} but {want} directory entries", i.nlink));
            }
            let mapped_end = mi.extents().last().map_or(0, |e| e.end() as u64);
            if mapped_end > i.size.div_ceil(bsu) && i.flags & crate::format::inode::FLAG_EOFBLOCKS == 0 {
                p.add("size", format!("inode {ino}: blocks mapped up to {mapped_end} beyond its size {}", i.size));
            }
        }
        if i.nlink == 0 && !on_orphan_list {
            p.add("orphan", format!("inode {ino} has no links and is not on the orphan list"));
        }
        if on_orphan_list && i.nlink != 0 {
            p.add("orphan", format!("inode {ino} is on the orphan list with {} links", i.nlink));
        }
        if i.xattr_block != HomeBlock::NONE {
            if let Err(e) = fs.xattrs(ino) {
                p.add("xattr", format!("inode {ino}: {e}"));
            }
        }
        let xattr = (i.xattr_block != HomeBlock::NONE).then_some(i.xattr_block);
        let blocks = mi.extents().iter().flat_map(|e| (0..e.len as u64).map(move |k| e.physical + k)).chain(mi.chain.iter().copied()).chain(xattr);
        for b in blocks {
            if let Some(prev) = owner.insert(b, ino) {
                p.add("dup", format!("block {b} is owned by inodes {prev} and {ino}"));
            }
        }
    }

    // Bitmaps and counts against the tree; directories removed while held count as
    // directories until they are freed.
    let orphan_dirs: HashSet<u32> = orphans.iter().copied().filter(|&o| fs.load(o).is_ok_and(|m| m.inode.is_dir())).collect();
    let ipg = sb.inodes_per_group as usize;
    let meta = 2 + sb.inode_table_blocks() as u64 + sb.log_area_blocks as u64;
    let mut free_blocks_total = 0;
    for g in 0..sb.group_count {
        let gi = g as usize;
        let start = HomeBlock::new(sb.first_group_block + g as u64 * sb.blocks_per_group as u64);
        let len = sb.blocks_in_group(g);
        let mut free = 0u32;
        for i in 0..(bs * 8) as u64 {
            let b = start + i;
            let expect = i < meta || i >= len || owner.contains_key(&b);
            let have = bit(&bmaps[gi], i as usize);
            if !have {
                free += 1;
            }
            if expect != have {
                if have {
                    p.add("bitmap", format!("block {b} is marked used but nothing owns it"));
                } else {
                    p.add("bitmap", format!("block {b} is in use but marked free"));
                }
            }
        }
        free_blocks_total += free as u64;
        if gdt[gi].free_blocks != free {
            p.add("count", format!("group {g}: {} free blocks recorded, bitmap has {free}", gdt[gi].free_blocks));
        }
        let mut ifree = 0u32;
        let mut dirs = 0u32;
        for i in 0..bs * 8 {
            let ino = (g as usize * ipg + i + 1) as u32;
            let expect = i >= ipg || used_inodes.contains(&ino);
            let have = bit(&imaps[gi], i);
            if i < ipg && !have {
                ifree += 1;
            }
            if i < ipg && used_inodes.contains(&ino) && (kinds.get(&ino) == Some(&FileType::Directory) || orphan_dirs.contains(&ino)) {
                dirs += 1;
            }
            if expect != have {
                p.add("bitmap", format!("inode {ino} is {} in the bitmap but {}", if have { "used" } else { "free" }, if expect { "in use" } else { "unreachable" }));
            }
        }
        if gdt[gi].free_inodes != ifree {
            p.add("count", format!("group {g}: {} free inodes recorded, bitmap has {ifree}", gdt[gi].free_inodes));
        }
        if gdt[gi].used_dirs != dirs {
            p.add("count", format!("group {g}: {} directories recorded, found {dirs}", gdt[gi].used_dirs));
        }
        // Slots in the inode table that claim to be in use but nothing reaches.
        for i in 0..ipg {
            let ino = (g as usize * ipg + i + 1) as u32;
            if used_inodes.contains(&ino) {
                continue;
            }
            let (blk, off) = match fs.inode_location(ino) {
                Ok(x) => x,
                Err(_) => continue,
            };
            let slot = match fs.block(blk, BufKind::Meta) {
                Ok(b) => b[off..off + crate::format::inode::INODE_SIZE].to_vec(),
                Err(e) => {
                    p.add("io", format!("inode table block {blk}: {e}"));
                    continue;
                }
            };
            match crate::format::Inode::decode(ino, &slot) {
                Ok(i) if i.is_free() => {}
                Ok(_) => p.add("inode", format!("inode {ino} is in use in its table but unreachable")),
                Err(e) => p.add("inode", format!("free inode slot {ino}: {e}")),
            }
        }
    }
    report.blocks_used = sb.block_count - free_blocks_total.min(sb.block_count);
    report.inodes_used = used_inodes.len() as u64;
    drop(p);
    report
}

//! Formatting: lays out the superblock, group descriptors, bitmaps, inode tables, the root
//! directory and the journal superblock, writing them straight to the device(s).

use crate::ids::{DevBlock, HomeBlock, LogPos, Tid};
use crate::device::{Device, DeviceError};
use crate::format::group::GD_SIZE;
use crate::format::inode::{Inode, INODE_SIZE, S_IFDIR};
use crate::format::journal::{jfeature, JournalSuperblock, JOURNAL_VERSION};
use crate::format::superblock::{compat, incompat, state, JournalLocation, SB_VERSION};
use crate::format::{bitmap_crc, GroupDesc, Superblock};

/// The smallest journal: its largest transaction (a quarter) must hold the biggest handle.
pub const MIN_JOURNAL_BLOCKS: u64 = 256;

/// Options of `mkfs`.
#[derive(Debug, Clone)]
pub struct MkfsOptions {
    pub block_size: u32,
    /// Internal journal size in blocks; 0 (the default) sizes it from the device as mke2fs
    /// does ([`default_journal_blocks`]: 32 MiB for 1 GiB of 4 KiB blocks, at most 128 MiB), the
    /// same default for the library and `okeanos mkfs`. Ignored for an external journal (its
    /// device's size) and manylogs (the log table's room).
    pub journal_blocks: u64,
    pub external_journal: bool,
    /// Bytes of file system per inode.
    pub bytes_per_inode: u64,
    /// Blocks reserved per group for scattered logs (manylogs); 0 by default. With
    /// `manylogs` and 0: a tenth of the group (the paper's 10 MB per 100 MB).
    pub log_area_blocks: u32,
    /// Blocks per group (at most 8 per byte of a block, the bitmap's reach); None: that most,
    /// or for manylogs 100 MB of blocks if fewer (the paper's GroupSize).
    pub blocks_per_group: Option<u32>,
    /// The journal is many small logs, one in every group's log area (manylogs); the journal
    /// region then only holds the log table, and `journal_blocks` is ignored.
    pub manylogs: bool,
    pub label: String,
    /// Keep the journal on this journal server (host:port); the internal journal becomes its
    /// local fallback (docs/REMOTE.md).
    pub remote_server: Option<String>,
    /// Keep the journal in non-volatile memory at this path (the nvm placement, UBJ); the NVM
    /// itself is formatted by [`format_nvm`]. The internal journal stays, unused.
    pub nvm_path: Option<String>,
    /// Write the whole journal ring (zeros) instead of its first block only, as mke2fs does
    /// unless `lazy_journal_init`: on an image file or a loop device over a sparse file the
    /// host then allocates the ring's space now, so that a commit overwrites allocated blocks
    /// and its flush (an fdatasync of the file) has no allocation of the host's to commit.
    /// Off by default here, for memory and crash-recording devices; `okeanos mkfs`,
    /// [`crate::Okeanos::mkfs_file`] and the benchmark's targets turn it on. Manylogs' logs
    /// (a tenth of the device) are not written; its log table is, as always.
    pub zero_journal: bool,
}

impl Default for MkfsOptions {
    fn default() -> Self {
        MkfsOptions { block_size: 4096, journal_blocks: 0, external_journal: false, bytes_per_inode: 16384, log_area_blocks: 0, blocks_per_group: None, manylogs: false, label: String::new(), remote_server: None, nvm_path: None, zero_journal: false }
    }
}

/// The fewest NVM slots for blocks of `block_size`: a quarter of them (the largest
/// transaction) must hold the largest handle, half a transaction of blocks plus a tombstone
/// per revoke record one handle may write.
pub fn min_nvm_slots(block_size: u32) -> u64 {
    8 * crate::format::journal::RevokeBlock::capacity(block_size as usize) as u64
}

/// Refuses an NVM region too small for the journal, naming the size it needs.
pub fn check_nvm_size(nvm: &dyn crate::nvm::Nvm, block_size: u32) -> Result<(), MkfsError> {
    use crate::format::nvm as nf;
    let min = min_nvm_slots(block_size);
    let slots = nf::NvmHeader::layout(nvm.len(), block_size, [0; 16]).map_or(0, |h| h.slots);
    if slots < min {
        let need = nf::TABLE_AT + 4096 + min * (block_size as u64 + nf::ENTRY_SIZE);
        return Err(MkfsError::Invalid(format!("{} ({} bytes) holds {slots} slots of {block_size} bytes; the NVM journal needs at least {min} ({} MiB)", nvm.name(), nvm.len(), need.div_ceil(1 << 20))));
    }
    Ok(())
}

/// Formats `nvm` as the NVM journal of the file system `sb` describes: header, a zero commit
/// word and an empty slot table, durably.
pub fn format_nvm(nvm: &dyn crate::nvm::Nvm, sb: &Superblock) -> Result<crate::format::nvm::NvmHeader, MkfsError> {
    use crate::format::nvm as nf;
    check_nvm_size(nvm, sb.block_size)?;
    let h = nf::NvmHeader::layout(nvm.len(), sb.block_size, sb.uuid).map_err(|e| MkfsError::Invalid(e.to_string()))?;
    let zeros = vec![0u8; 1 << 16];
    let table_end = nf::TABLE_AT + h.slots * nf::ENTRY_SIZE;
    let mut at = nf::TABLE_AT;
    while at < table_end {
        let n = (table_end - at).min(zeros.len() as u64);
        nvm.store(at, &zeros[..n as usize])?;
        nvm.flush(at, n)?;
        at += n;
    }
    nvm.store(nf::COMMIT_WORD_AT, &nf::commit_word(Tid::ZERO))?;
    nvm.flush(nf::COMMIT_WORD_AT, 8)?;
    nvm.fence()?;
    // The header last: an NVM without one is not a journal yet.
    nvm.store(0, &h.encode())?;
    nvm.flush(0, 64)?;
    nvm.fence()?;
    Ok(h)
}

/// Debug prints the sentence (as Display), so that `fn main() -> Result<(), Box<dyn Error>>`
/// ends with a message a person can read rather than a structure dump.
#[derive(thiserror::Error)]
pub enum MkfsError {
    #[error("{0}")]
    Device(#[from] DeviceError),
    #[error("invalid mkfs options: {0}")]
    Invalid(String),
}

impl std::fmt::Debug for MkfsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

pub use crate::ids::new_uuid;

fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// The journal mkfs gives a device of `dev_blocks` blocks when none is asked for: mke2fs's
/// scale (ext2fs_default_journal_size), capped at 32,768 blocks (128 MiB of 4 KiB blocks), so
/// that small devices keep most of their space for files.
pub fn default_journal_blocks(dev_blocks: u64) -> u64 {
    match dev_blocks {
        0..2048 => MIN_JOURNAL_BLOCKS,
        2048..32768 => 1024,
        32768..262_144 => 4096,
        262_144..524_288 => 8192,
        524_288..4_194_304 => 16384,
        _ => 32768,
    }
}

/// Computes the superblock for a device of `dev_bytes`.
pub fn plan(dev_bytes: u64, o: &MkfsOptions, journal_dev_bytes: Option<u64>) -> Result<Superblock, MkfsError> {
    let bs = o.block_size;
    if !(1024..=65536).contains(&bs) || !bs.is_power_of_two() {
        return Err(MkfsError::Invalid(format!("block size {bs} must be a power of two from 1024 to 65536")));
    }
    let block_count = dev_bytes / bs as u64;
    let most = bs * 8;
    let bpg = match o.blocks_per_group {
        Some(g) if g > most || g < 256 => return Err(MkfsError::Invalid(format!("{g} blocks per group: give 256 to {most} (a block's bitmap reach) for {bs}-byte blocks"))),
        Some(g) => g,
        None if o.manylogs => most.min((100_000_000 / bs as u64) as u32),
        None => most,
    };
    let ipb = bs / INODE_SIZE as u32;
    let mut o = o.clone();
    if o.manylogs {
        if o.external_journal || o.remote_server.is_some() || o.nvm_path.is_some() {
            return Err(MkfsError::Invalid("manylogs keeps its logs in the file system's groups: leave out the journal device, server or NVM".into()));
        }
        if o.log_area_blocks == 0 {
            o.log_area_blocks = (bpg / 10).max(MIN_JOURNAL_BLOCKS as u32);
        }
        if (o.log_area_blocks as u64) < MIN_JOURNAL_BLOCKS || o.log_area_blocks as u64 > bpg as u64 / 2 {
            return Err(MkfsError::Invalid(format!("logs of {} blocks: give at least {MIN_JOURNAL_BLOCKS} blocks and at most half a group ({} blocks)", o.log_area_blocks, bpg / 2)));
        }
        // The journal region holds the journal superblock, two copies of the log table and two
        // of the map of logged blocks, each with room for every log block (at most
        // `MAP_MOST`; a snapshot writes home what does not fit).
        use crate::format::logtable::{LogMap, LogTable, MAP_MOST};
        let groups_most = block_count.div_ceil(bpg as u64) + 1;
        let entries = (groups_most * o.log_area_blocks as u64).min(MAP_MOST) as usize;
        let map_blocks = LogMap::bytes(groups_most as usize, entries).div_ceil(bs as usize) as u64;
        o.journal_blocks = (1 + 2 * LogTable::blocks_per_copy(groups_most, bs as usize) + 2 * map_blocks).max(MIN_JOURNAL_BLOCKS);
    }
    let o = &o;
    let journal_blocks = if o.external_journal {
        journal_dev_bytes.ok_or_else(|| MkfsError::Invalid("an external journal needs a journal device".into()))? / bs as u64
    } else if o.journal_blocks == 0 {
        default_journal_blocks(block_count)
    } else {
        o.journal_blocks
    };
    if journal_blocks < MIN_JOURNAL_BLOCKS {
        return Err(MkfsError::Invalid(format!("journal of {journal_blocks} blocks is too small (at least {MIN_JOURNAL_BLOCKS})")));
    }
    if let Some(s) = &o.remote_server {
        if o.external_journal {
            return Err(MkfsError::Invalid("a remote journal falls back to the internal journal: leave out the journal device".into()));
        }
        if s.is_empty() || s.len() > crate::format::superblock::REMOTE_SERVER_LEN || !s.contains(':') {
            return Err(MkfsError::Invalid(format!("journal server {s:?}: give host:port (or nats:// URLs, comma-separated), at most {} bytes", crate::format::superblock::REMOTE_SERVER_LEN)));
        }
        if crate::remote::jetstream::is_nats(s) && s.split(',').any(|u| !crate::remote::jetstream::is_nats(u.trim())) {
            return Err(MkfsError::Invalid(format!("JetStream servers {s:?}: every one a nats:// or tls:// URL")));
        }
    }
    if let Some(p) = &o.nvm_path {
        if o.external_journal || o.remote_server.is_some() {
            return Err(MkfsError::Invalid("an NVM journal excludes an external or remote journal".into()));
        }
        if p.is_empty() || p.len() > crate::format::superblock::REMOTE_SERVER_LEN {
            return Err(MkfsError::Invalid(format!("NVM path {p:?}: give a path of 1 to {} bytes", crate::format::superblock::REMOTE_SERVER_LEN)));
        }
    }
    if o.bytes_per_inode < 1024 {
        return Err(MkfsError::Invalid(format!("{} bytes per inode is below the smallest (1024)", o.bytes_per_inode)));
    }
    let internal_journal = if o.external_journal { 0 } else { journal_blocks };
    let mut groups = 1u64;
    let (mut gdt_blocks, mut first_group);
    loop {
        gdt_blocks = (groups * GD_SIZE as u64).div_ceil(bs as u64);
        first_group = 1 + gdt_blocks + internal_journal;
        let g = block_count.saturating_sub(first_group).div_ceil(bpg as u64).max(1);
        if g == groups {
            break;
        }
        groups = g;
    }
    let ipg_raw = (bpg as u64 * bs as u64 / o.bytes_per_inode).clamp(ipb as u64 * 4, bs as u64 * 8);
    let ipg = (ipg_raw as u32 / ipb * ipb).max(ipb);
    let meta = 2 + (ipg / ipb) as u64 + o.log_area_blocks as u64;
    let last_len = block_count.saturating_sub(first_group + (groups - 1) * bpg as u64);
    if last_len < meta + 16 {
        if groups == 1 {
            let room = block_count.saturating_sub(1 + gdt_blocks + meta + 16);
            let hint = if o.external_journal || room < MIN_JOURNAL_BLOCKS {
                format!("the device needs at least {} bytes", (1 + gdt_blocks + meta + 16 + internal_journal.max(MIN_JOURNAL_BLOCKS * !o.external_journal as u64)) * bs as u64)
            } else {
                format!("give a smaller journal (--journal-size {}K or less) or a larger device", room * bs as u64 / 1024)
            };
            return Err(MkfsError::Invalid(format!(
                "device of {dev_bytes} bytes is too small for a {journal_blocks}-block journal and one block group: {hint}"
            )));
        }
        groups -= 1;
    }
    if o.manylogs && groups * o.log_area_blocks as u64 >= u32::MAX as u64 {
        // The log table counts the durable transactions past its floor in 32 bits, and each
        // takes at least a block of some log (FORMAT.md, "Manylogs log table").
        return Err(MkfsError::Invalid(format!(
            "{groups} logs of {} blocks hold {} blocks or more in all, more than the log table can count: give larger groups, smaller logs or a smaller device",
            o.log_area_blocks,
            u32::MAX
        )));
    }
    let block_count = block_count.min(first_group + groups * bpg as u64);
    let mut label = [0u8; 32];
    let lb = o.label.as_bytes();
    if lb.len() > 32 {
        return Err(MkfsError::Invalid("label longer than 32 bytes".into()));
    }
    label[..lb.len()].copy_from_slice(lb);
    let uuid = new_uuid();
    let sb = Superblock {
        version: SB_VERSION,
        feature_compat: if o.log_area_blocks > 0 { compat::LOG_AREA } else { 0 },
        feature_incompat: if o.external_journal { incompat::EXTERNAL_JOURNAL } else { 0 }
            | if o.remote_server.is_some() { incompat::REMOTE_JOURNAL } else { 0 }
            | if o.nvm_path.is_some() { incompat::NVM_JOURNAL } else { 0 }
            | if o.manylogs { incompat::MANYLOGS } else { 0 },
        feature_ro_compat: 0,
        block_size: bs,
        block_count,
        inode_count: groups as u32 * ipg,
        blocks_per_group: bpg,
        inodes_per_group: ipg,
        group_count: groups as u32,
        first_group_block: first_group,
        gdt_start: 1,
        gdt_blocks: gdt_blocks as u32,
        inode_size: INODE_SIZE as u32,
        log_area_blocks: o.log_area_blocks,
        journal: if o.external_journal {
            JournalLocation::External { uuid: new_uuid(), blocks: journal_blocks }
        } else {
            JournalLocation::Internal { start: 1 + gdt_blocks, blocks: journal_blocks }
        },
        uuid,
        root_ino: 1,
        orphan_head: 0,
        state: state::CLEAN,
        mount_count: 0,
        mkfs_time_ns: now_ns(),
        last_mount_ns: 0,
        label,
        lifetime: Default::default(),
        error: Default::default(),
        remote: o.remote_server.as_ref().map(|s| crate::format::superblock::RemoteRecord { server: s.clone() }),
        nvm: o.nvm_path.as_ref().map(|p| crate::format::superblock::NvmRecord { path: p.clone() }),
    };
    sb.validate().map_err(|e| MkfsError::Invalid(e.to_string()))?;
    Ok(sb)
}

/// Formats `dev` (and `journal_dev` for an external journal). Returns the superblock.
pub fn mkfs(dev: &dyn Device, journal_dev: Option<&dyn Device>, o: &MkfsOptions) -> Result<Superblock, MkfsError> {
    if o.external_journal != journal_dev.is_some() {
        return Err(MkfsError::Invalid("pass a journal device exactly when the journal is external".into()));
    }
    let sb = plan(dev.len_bytes(), o, journal_dev.map(|d| d.len_bytes()))?;
    let bs = sb.block_size as usize;
    let bsu = bs as u64;
    let ipb = bs / INODE_SIZE;
    let itb = sb.inode_table_blocks() as u64;
    // Inode tables are zeroed in writes of up to 1 MiB (one a block made mkfs of a 256 GiB
    // loop device with O_DIRECT take 45 s).
    let zero_blocks = itb.clamp(1, ((1usize << 20) / bs).max(1) as u64);
    let zero = vec![0u8; zero_blocks as usize * bs];
    let mut gdt = Vec::new();
    for g in 0..sb.group_count {
        let start = sb.first_group_block + g as u64 * sb.blocks_per_group as u64;
        let len = sb.blocks_in_group(g);
        let meta = 2 + itb + sb.log_area_blocks as u64;
        let mut bbm = vec![0u8; bs];
        for i in (0..meta).chain(len..bs as u64 * 8) {
            bbm[(i / 8) as usize] |= 1 << (i % 8);
        }
        let mut ibm = vec![0u8; bs];
        for i in sb.inodes_per_group as usize..bs * 8 {
            ibm[i / 8] |= 1 << (i % 8);
        }
        let mut free_inodes = sb.inodes_per_group;
        let mut used_dirs = 0;
        if g == 0 {
            ibm[0] |= 1; // the root directory, inode 1
            free_inodes -= 1;
            used_dirs = 1;
        }
        let mut k = 0;
        while k < itb {
            let n = (itb - k).min(zero_blocks);
            dev.write_at((start + 2 + k) * bsu, &zero[..n as usize * bs])?;
            k += n;
        }
        dev.write_at(start * bsu, &bbm)?;
        dev.write_at((start + 1) * bsu, &ibm)?;
        gdt.push(GroupDesc {
            block_bitmap: HomeBlock::new(start),
            inode_bitmap: HomeBlock::new(start + 1),
            inode_table: HomeBlock::new(start + 2),
            log_area_start: if sb.log_area_blocks > 0 { start + 2 + itb } else { 0 },
            log_area_blocks: sb.log_area_blocks,
            free_blocks: (len - meta) as u32,
            free_inodes,
            used_dirs,
            block_bitmap_crc: bitmap_crc(g, &bbm),
            inode_bitmap_crc: bitmap_crc(g, &ibm),
        });
    }
    let mut table = vec![0u8; sb.gdt_blocks as usize * bs];
    for (g, gd) in gdt.iter().enumerate() {
        gd.encode(g as u32, &mut table[g * GD_SIZE..(g + 1) * GD_SIZE]);
    }
    dev.write_at(sb.gdt_start * bsu, &table)?;

    let now = sb.mkfs_time_ns;
    let root = Inode { mode: S_IFDIR | 0o755, nlink: 2, atime_ns: now, mtime_ns: now, ctime_ns: now, parent: 1, generation: 1, ..Inode::default() };
    let mut itable = vec![0u8; bs];
    root.encode(1, &mut itable[..INODE_SIZE]);
    debug_assert!(ipb >= 1);
    dev.write_at(DevBlock::home(gdt[0].inode_table).byte(bsu), &itable)?;

    let (jdev, jbase, jblocks, juuid) = match (sb.journal, journal_dev) {
        (JournalLocation::Internal { start, blocks }, _) => (dev, start, blocks, new_uuid()),
        (JournalLocation::External { uuid, blocks }, Some(j)) => (j, 0, blocks, uuid),
        (JournalLocation::External { .. }, None) => unreachable!("checked above"),
    };
    let jsb = JournalSuperblock {
        version: JOURNAL_VERSION,
        features: jfeature::TX_CHECKSUM | jfeature::MULTIWRITE | jfeature::FAST_COMMIT | jfeature::FAST_COMMIT_SPAN | jfeature::FAST_COMMIT_COMPACT | jfeature::FAST_COMMIT_NOTES | jfeature::FAST_COMMIT_SHORT_NOTES | jfeature::IN_PLACE_TAGS,
        block_size: sb.block_size,
        total_blocks: jblocks,
        first: LogPos::new(1),
        sequence: Tid::new(1),
        start: LogPos::ZERO,
        uuid: juuid,
        fs_uuid: sb.uuid,
        errno: 0,
        pipeline: 0,
        remote: Default::default(),
    };
    let mut jb = vec![0u8; bs];
    jsb.encode(&mut jb);
    jdev.write_at(jbase * bsu, &jb)?;
    // The placement's own initial state: a ring's first block cleared, or manylogs' table.
    crate::runtime::placement::format(jdev, &sb, jbase, jblocks, o.zero_journal)?;
    if let Some(j) = journal_dev {
        j.flush()?;
    }
    let mut b0 = vec![0u8; bs];
    sb.encode(&mut b0);
    dev.write_at(0, &b0)?;
    dev.flush()?;
    Ok(sb)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemDevice;

    /// Logs that together hold more blocks than the log table can count durable transactions
    /// in (32 bits) are refused at mkfs, with what to change, rather than failing an assertion
    /// when a table is written.
    #[test]
    fn manylogs_beyond_what_the_log_table_counts_are_refused() {
        let o = MkfsOptions { manylogs: true, ..Default::default() };
        let ok = plan(1 << 40, &o, None).expect("1 TiB of groups with a tenth in logs");
        assert!(ok.manylogs());
        match plan(200 << 40, &o, None) {
            Err(MkfsError::Invalid(m)) => assert!(m.contains("more than the log table can count"), "{m}"),
            other => panic!("200 TiB of manylogs must be refused: {:?}", other.map(|sb| sb.group_count)),
        }
    }

    /// `zero_journal` writes every block of the ring (an image file's space for it is then
    /// allocated); without it only the first log block is cleared, and an old journal's
    /// blocks past it stay as they were.
    #[test]
    fn zero_journal_writes_the_whole_ring() {
        for zero_journal in [false, true] {
            let dev = MemDevice::from_bytes(vec![0xA5; 64 << 20]);
            let o = MkfsOptions { journal_blocks: 1024, zero_journal, ..Default::default() };
            let sb = mkfs(&dev, None, &o).unwrap();
            let JournalLocation::Internal { start, blocks } = sb.journal else { panic!("an internal journal") };
            let mut b = vec![0u8; 4096];
            let mut zeroed = 0;
            for k in 1..blocks {
                dev.read_at((start + k) * 4096, &mut b).unwrap();
                if b.iter().all(|&x| x == 0) {
                    zeroed += 1;
                }
            }
            assert_eq!(zeroed, if zero_journal { blocks - 1 } else { 1 }, "zero_journal={zero_journal}");
        }
    }
}

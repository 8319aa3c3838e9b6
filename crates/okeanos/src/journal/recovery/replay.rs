//! Passes 2 and 3: the revoke table from the committed transactions' revoke blocks, and the
//! replay plan (each block's newest unrevoked copy and the records after it), with a snapshot's
//! map where the placement keeps one.

use crate::ids::{DevBlock, HomeBlock};
use super::*;

/// Pass 2: the revoke blocks to read, with the tid of their transaction.
pub fn revoke_reads(txs: &[ScannedTx]) -> Vec<(LogRegion, LogPos, Tid)> {
    txs.iter().flat_map(|t| t.revoke_blocks.iter().map(move |&p| (t.region, p, t.tid))).collect()
}

/// Pass 2: adds one revoke block to the table.
pub fn revoke_feed(table: &mut RevokeTable, tid: Tid, block: &[u8]) -> Result<(), FormatError> {
    let r = RevokeBlock::decode(block)?;
    for b in r.blocks {
        table.add(b, tid);
    }
    Ok(())
}

/// Pass 3 with a snapshot's map (manylogs; docs/JOURNALING.md, "The map on disk"): every
/// change up to the snapshot's home tid is at its final location or in a mapped block, and the
/// scanned transactions all follow it. A mapped block is written home from its log unless a
/// scanned transaction revoked it (freed since: its copy must not return) or logged it whole
/// (the newer copy wins); records on it replay over the mapped copy, not over home, which
/// holds an older version.
///
/// Returns the plan and the mapped blocks no scanned transaction touched: they stay logged
/// (the paper keeps data under the MTL, section III-E), and the placement's recovered table
/// names them again.
pub fn with_map(mut plan: Vec<ReplayBlock>, mapped: &[LoggedBlock], revoked: &RevokeTable) -> (Vec<ReplayBlock>, Vec<LoggedBlock>) {
    if mapped.is_empty() {
        return (plan, Vec::new());
    }
    let at: HashMap<HomeBlock, usize> = plan.iter().enumerate().map(|(k, r)| (r.fs_block, k)).collect();
    let mut kept = Vec::new();
    for m in mapped {
        if revoked.is_revoked(m.block, m.tid) {
            continue;
        }
        match at.get(&m.block) {
            Some(&k) if plan[k].base == ReplayBase::Disk => plan[k].base = ReplayBase::Mapped { block: DevBlock::new(m.at), hash: m.hash },
            Some(_) => {}
            None => kept.push(*m),
        }
    }
    (plan, kept)
}

/// Where replay of one block starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayBase {
    /// The block's current contents at its final location.
    Disk,
    /// A zeroed block (the block was allocated by a transaction whose records follow).
    Zero,
    /// A whole logged copy at a log position.
    Journal { dev: crate::journal::plan::DevId, block: DevBlock, escaped: bool },
    /// A block a snapshot's map names (manylogs): the copy at device block `block` of the
    /// file-system device, checked against the journal tag's data hash.
    Mapped { block: DevBlock, hash: u32 },
    /// A frozen copy in a slot of non-volatile memory (nvm): `slot`'s data at byte `at`,
    /// checked against the slot entry's data CRC. A mismatch is damage recovery refuses to
    /// hide: the copy is the only committed version.
    Nvm { slot: u64, at: u64, crc: u32 },
}

/// Replay of one block: start from `base`, apply the records in order, write the result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayBlock {
    pub fs_block: HomeBlock,
    pub base: ReplayBase,
    pub patches: Vec<Patch>,
    pub kind: BlockKind,
}

/// One change replay makes to a block, in transaction order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Patch {
    /// A record: these bytes at this offset.
    Bytes(u16, Vec<u8>),
    /// An inode note: inode `ino`, whose slot begins at `at`, gets this size, mtime and ctime,
    /// and its checksum recomputed (docs/FORMAT.md, "Inode notes").
    Inode { at: u16, ino: u32, size: u64, time_ns: i64 },
}

impl Patch {
    /// Applies it to `block`, which holds the whole block; `stale_crc` (the `note_stale_crc`
    /// canary only) leaves an inode's old checksum.
    pub fn apply(&self, block: &mut [u8], stale_crc: bool) {
        match self {
            Patch::Bytes(offset, bytes) => {
                let at = *offset as usize;
                block[at..at + bytes.len()].copy_from_slice(bytes);
            }
            Patch::Inode { at, ino, size, time_ns } => {
                let slot = &mut block[*at as usize..*at as usize + crate::format::inode::INODE_SIZE];
                let crc: [u8; 4] = [slot[0], slot[1], slot[2], slot[3]];
                crate::format::inode::apply_note(*ino, slot, *size, *time_ns);
                if stale_crc {
                    slot[..4].copy_from_slice(&crc);
                }
            }
        }
    }
}

impl ReplayBlock {
    /// Applies the patches to `block` (its base), in transaction order. Then every inode slot a
    /// note touched gets its checksum recomputed over its final bytes: a note's checksum is
    /// over the slot as replay has it at the note, and when the base is newer than the note
    /// (a checkpoint wrote a later committed version home while the note's transaction was
    /// still in the log) that slot holds bytes of later transactions too. Every other byte a
    /// patch writes is absolute, so the final slot is the newest committed inode and its
    /// checksum the one computed here; a later record that left a checksum byte unchanged
    /// would otherwise keep the note's. (Found by the crash fuzzer, seed 5000700.)
    /// `stale_crc` (the `note_stale_crc` canary only) leaves the old checksums.
    pub fn apply_patches(&self, block: &mut [u8], stale_crc: bool) {
        let mut noted: Vec<(u16, u32)> = Vec::new();
        for p in &self.patches {
            p.apply(block, stale_crc);
            if let Patch::Inode { at, ino, .. } = p {
                if !noted.contains(&(*at, *ino)) {
                    noted.push((*at, *ino));
                }
            }
        }
        if stale_crc {
            return;
        }
        for (at, ino) in noted {
            crate::format::inode::reseal(ino, &mut block[at as usize..at as usize + crate::format::inode::INODE_SIZE]);
        }
    }
}

/// Pass 3: for every block, its newest unrevoked whole copy (or its final location, or
/// zeros when a record says the block was freshly allocated) and the records after it, in
/// transaction order. A record only covers what its transaction changed, so replay needs the
/// block as the previous transactions left it: every transaction's changes are either in the
/// log or were checkpointed before the tail passed it (docs/JOURNALING.md).
pub fn replay_plan(txs: &[ScannedTx], revoked: &RevokeTable) -> Vec<ReplayBlock> {
    let mut plan: HashMap<HomeBlock, ReplayBlock> = HashMap::default();
    for t in txs {
        for item in &t.items {
            let tag = item.tag();
            // Written home under the commit's flush, nothing in the log: the block at home is
            // the base of what later transactions log of it.
            if matches!(item, ScanItem::InPlace { .. }) || revoked.is_revoked(tag.fs_block, t.tid) {
                continue;
            }
            let kind = if tag.is_metadata() { BlockKind::FinalMeta } else { BlockKind::FinalData };
            let e = plan.entry(tag.fs_block).or_insert(ReplayBlock { fs_block: tag.fs_block, base: ReplayBase::Disk, patches: Vec::new(), kind });
            e.kind = kind;
            match item {
                ScanItem::Full { pos, tag } => {
                    e.base = ReplayBase::Journal { dev: t.region.dev(), block: t.region.device_block(*pos), escaped: tag.flags & jf::tag_flags::ESCAPED != 0 };
                    e.patches.clear();
                }
                ScanItem::Record { tag, bytes } => {
                    if tag.flags & jf::tag_flags::FRESH != 0 {
                        e.base = ReplayBase::Zero;
                        e.patches.clear();
                    }
                    e.patches.push(Patch::Bytes(tag.offset, bytes.clone()));
                }
                ScanItem::Note { tag, note, time_ns } => e.patches.push(Patch::Inode { at: tag.offset, ino: note.ino, size: note.size, time_ns: *time_ns }),
                ScanItem::InPlace { .. } => unreachable!("skipped above"),
            }
        }
    }
    let mut v: Vec<ReplayBlock> = plan.into_values().collect();
    v.sort_by_key(|c| c.fs_block);
    v
}

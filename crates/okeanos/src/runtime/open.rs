//! Opening a file system's devices: the superblock and group descriptors, the error state
//! that decides whether a read-write mount is allowed, and the journal's location and
//! superblock. Shared by the engine (mount), fsck and offline inspection, below all three.

use crate::ids::HomeBlock;
use super::Devices;
use crate::device::Device;
use crate::format::journal::JournalSuperblock;
use crate::format::superblock::{state, JournalLocation};
use crate::format::{GroupDesc, Superblock};
use crate::error::{FsError, FsResult};
use crate::journal::placement::LogRegion;

/// Reads and validates the superblock and group descriptors.
pub fn read_meta(dev: &dyn Device) -> FsResult<(Superblock, Vec<GroupDesc>)> {
    if dev.len_bytes() < 4096 {
        return Err(FsError::Corrupt(format!("{} is too small to hold a file system ({} bytes)", dev.name(), dev.len_bytes())));
    }
    let mut s0 = vec![0u8; 512];
    dev.read_at(0, &mut s0)?;
    let sb = match Superblock::decode(&s0) {
        Ok(sb) => sb,
        Err(e) => {
            // An external journal given where the file system was expected: say so.
            if let Ok(j) = crate::format::journal::JournalSuperblock::decode(&s0) {
                let uuid: String = j.fs_uuid.iter().map(|b| format!("{b:02x}")).collect();
                return Err(FsError::Invalid(format!(
                    "{} is the external journal of file system {uuid}, not a file system: give that file system's image, with --journal {}",
                    dev.name(),
                    dev.name()
                )));
            }
            return Err(e.into());
        }
    };
    let bs = sb.block_size as u64;
    if dev.len_bytes() < sb.block_count * bs {
        return Err(FsError::Corrupt(format!(
            "{} holds {} bytes but the file system needs {} (truncated image?)",
            dev.name(),
            dev.len_bytes(),
            sb.block_count * bs
        )));
    }
    let mut table = vec![0u8; sb.gdt_blocks as usize * bs as usize];
    dev.read_at(sb.gdt_start * bs, &mut table)?;
    let mut gdt = Vec::with_capacity(sb.group_count as usize);
    for g in 0..sb.group_count {
        let at = g as usize * crate::format::group::GD_SIZE;
        let gd = GroupDesc::decode(g, &table[at..at + crate::format::group::GD_SIZE])?;
        let start = HomeBlock::new(sb.first_group_block + g as u64 * sb.blocks_per_group as u64);
        if gd.block_bitmap != start || gd.inode_bitmap != start + 1 || gd.inode_table != start + 2 {
            return Err(FsError::Corrupt(format!("group {g} descriptor points at the wrong blocks")));
        }
        gdt.push(gd);
    }
    Ok((sb, gdt))
}

/// Why a file system must not be mounted read-write, from its superblock state.
pub fn error_state(sb: &Superblock) -> Option<String> {
    if !state::is_known(sb.state) {
        return Some(format!("the superblock has an unknown state {:#x}", sb.state));
    }
    if sb.state & state::ERRORS == 0 {
        return None;
    }
    let e = &sb.error;
    Some(if e.tid != crate::ids::Tid::ZERO {
        format!(
            "journal recovery found transaction {} damaged; {} committed transaction{} after it {} not replayed, so changes acknowledged after transaction {} are lost",
            e.tid,
            e.following,
            if e.following == 1 { "" } else { "s" },
            if e.following == 1 { "was" } else { "were" },
            e.tid.saturating_sub(1)
        )
    } else {
        "the file system is marked as having errors".to_string()
    })
}

/// Locates the journal of `sb` and reads its superblock.
pub fn open_journal(sb: &Superblock, devs: &Devices) -> FsResult<(LogRegion, JournalSuperblock)> {
    let bs = sb.block_size as u64;
    let region = match sb.journal {
        JournalLocation::Internal { start, blocks } => LogRegion::internal(start, blocks),
        JournalLocation::External { blocks, .. } => {
            let j = devs.journal.as_ref().ok_or_else(|| FsError::Invalid("this file system has an external journal: name it (`--journal FILE` to the okeanos command, `-o journal_path=FILE` to mount and the library)".into()))?;
            if j.len_bytes() < blocks * bs {
                return Err(FsError::Corrupt(format!("journal device {} is smaller than the journal ({blocks} blocks)", j.name())));
            }
            LogRegion::external(blocks)
        }
    };
    if matches!(sb.journal, JournalLocation::Internal { .. }) && devs.journal.is_some() {
        return Err(FsError::Invalid("this file system has an internal journal: leave out --journal (journal_path=)".into()));
    }
    let mut b = vec![0u8; bs as usize];
    devs.get(region.dev()).read_at(region.device_block(region.superblock()).byte(bs), &mut b)?;
    let jsb = JournalSuperblock::decode(&b)?;
    if jsb.fs_uuid != sb.uuid {
        return Err(FsError::Invalid("the journal belongs to another file system (uuid mismatch)".into()));
    }
    if let JournalLocation::External { uuid, .. } = sb.journal {
        if jsb.uuid != uuid {
            return Err(FsError::Invalid("the external journal's uuid is not the one the file system names".into()));
        }
    }
    if jsb.block_size != sb.block_size || jsb.total_blocks != region.total {
        return Err(FsError::Corrupt("journal superblock disagrees with the file system on block size or length".into()));
    }
    Ok((region, jsb))
}


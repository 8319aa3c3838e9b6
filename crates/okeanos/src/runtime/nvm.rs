//! The nvm placement at run time: carrying out a plan's NVM operations, and recovery of the
//! slot table at mount (the decisions are `journal::placement::nvm::analyze`'s).

use super::Devices;
use crate::device::DeviceError;
use crate::format::nvm::{self as nf, NvmHeader, SlotState};
use crate::journal::plan::NvmOp;
use crate::nvm::Nvm;
use crate::stats::{RecoveryReport, Stats};

/// Carries out NVM operations in order.
pub fn execute(devs: &Devices, ops: &[NvmOp], stats: &Stats) -> Result<(), DeviceError> {
    let nvm = devs.nvm.as_ref().ok_or_else(|| DeviceError::Io { device: "nvm".into(), op: "store", offset: 0, message: "this mount has no NVM".into() })?;
    for op in ops {
        match op {
            NvmOp::Store { at, data, .. } => {
                nvm.store(*at, data.as_slice())?;
                stats.on_nvm_store(data.as_slice().len());
            }
            NvmOp::Flush { at, len } => nvm.flush(*at, *len)?,
            NvmOp::Fence => {
                nvm.fence()?;
                stats.on_nvm_fence();
            }
        }
    }
    Ok(())
}

/// Reads and checks the header of `nvm` against the file system's uuid and block size.
pub fn open_header(nvm: &dyn Nvm, fs_uuid: [u8; 16], block_size: u32) -> Result<NvmHeader, crate::fs::FsError> {
    let mut b = [0u8; 64];
    nvm.load(0, &mut b)?;
    let h = NvmHeader::decode(&b, nvm.len()).map_err(|e| crate::fs::FsError::Corrupt(format!("{}: {e}", nvm.name())))?;
    if h.fs_uuid != fs_uuid {
        return Err(crate::fs::FsError::Invalid(format!("{} is the NVM journal of another file system (uuid mismatch)", nvm.name())));
    }
    if h.block_size != block_size {
        return Err(crate::fs::FsError::Corrupt(format!("{}: block size {} differs from the file system's {block_size}", nvm.name(), h.block_size)));
    }
    Ok(h)
}

/// Recovers an nvm journal: writes each block's newest committed frozen copy home, flushes,
/// then empties the table in two fenced steps (outranked entries first). With `read_only`,
/// writes go to the (overlay) file-system device only and the table is left as it is.
/// Returns the report (None when nothing was committed and not yet home) and the next tid.
pub fn recover(devs: &Devices, h: &NvmHeader, fs_blocks: u64, read_only: bool, stats: &Stats, now_ns: &dyn Fn() -> u64) -> Result<(Option<RecoveryReport>, u64), crate::fs::FsError> {
    let nvm = devs.nvm.as_ref().expect("an nvm journal has its NVM");
    let t0 = now_ns();
    let mut word = [0u8; 8];
    nvm.load(nf::COMMIT_WORD_AT, &mut word)?;
    let commit_word = u64::from_le_bytes(word);
    let mut table = vec![0u8; (h.slots * nf::ENTRY_SIZE) as usize];
    nvm.load(nf::TABLE_AT, &mut table)?;
    let r = crate::journal::placement::nvm::analyze(h, commit_word, &table, fs_blocks).map_err(|e| crate::fs::FsError::Corrupt(format!("{}: {e}", nvm.name())))?;
    let t1 = now_ns();
    let bs = h.block_size as usize;
    let mut data = vec![0u8; bs];
    for &(block, slot, crc) in &r.replay {
        nvm.load(h.data_at(slot), &mut data)?;
        if nf::data_crc(block, &data) != crc {
            return Err(crate::fs::FsError::Corrupt(format!(
                "{}: slot {slot} holds the newest committed copy of block {block} but its data fails its checksum (damaged NVM); refusing to mount rather than lose it silently",
                nvm.name()
            )));
        }
        devs.fs.write_at(block * bs as u64, &data)?;
        stats.on_write(crate::journal::plan::BlockKind::FinalMeta, bs);
    }
    if !r.replay.is_empty() {
        devs.fs.flush()?;
    }
    if !read_only {
        for step in [&r.free_first, &r.free_then] {
            if step.is_empty() {
                continue;
            }
            for &slot in step {
                let at = h.entry_at(slot) + nf::STATE_AT;
                nvm.store(at, &nf::state_word(SlotState::Free))?;
                nvm.flush(at, 8)?;
            }
            nvm.fence()?;
        }
    }
    let t2 = now_ns();
    let next_tid = r.next_tid.max(1);
    let needed = r.frozen > 0 || r.tombstones > 0 || r.uncommitted > 0 || r.invalid > 0;
    let report = needed.then(|| RecoveryReport {
        transactions: 0,
        first_tid: 0,
        last_tid: commit_word,
        blocks_scanned: 0,
        revoke_records: r.tombstones,
        blocks_replayed: r.replay.len() as u64,
        end_reason: format!(
            "nvm slot table: {} slots, commit word {commit_word}: {} frozen written home, {} clean, {} tombstones, {} above the commit word dropped, {} torn",
            r.slots_scanned, r.frozen, r.clean, r.tombstones, r.uncommitted, r.invalid
        ),
        damage: None,
        blocks_probed: 0,
        next_tid,
        scan_ns: t1 - t0,
        revoke_ns: 0,
        replay_ns: t2 - t1,
        nvm_slots_scanned: r.slots_scanned,
    });
    Ok((report, next_tid))
}

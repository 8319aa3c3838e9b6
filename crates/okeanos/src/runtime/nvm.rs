//! The nvm placement at run time: carrying out a plan's NVM operations, and reading the header
//! and the slot table (recovery's decisions are `journal::placement::nvm::analyze`'s, its
//! copies written home by `runtime::recover` like any placement's).

use super::Devices;
use crate::ids::Tid;
use crate::device::DeviceError;
use crate::format::nvm::{self as nf, NvmHeader};
use crate::journal::plan::NvmOp;
use crate::nvm::Nvm;
use crate::stats::Stats;

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
pub fn open_header(nvm: &dyn Nvm, fs_uuid: [u8; 16], block_size: u32) -> Result<NvmHeader, crate::error::FsError> {
    let mut b = [0u8; 64];
    nvm.load(0, &mut b)?;
    let h = NvmHeader::decode(&b, nvm.len()).map_err(|e| crate::error::FsError::Corrupt(format!("{}: {e}", nvm.name())))?;
    if h.fs_uuid != fs_uuid {
        return Err(crate::error::FsError::Invalid(format!("{} is the NVM journal of another file system (uuid mismatch)", nvm.name())));
    }
    if h.block_size != block_size {
        return Err(crate::error::FsError::Corrupt(format!("{}: block size {} differs from the file system's {block_size}", nvm.name(), h.block_size)));
    }
    Ok(h)
}

/// Reads the commit word and the slot table, as recovery and inspection decide from them.
pub fn read_table(nvm: &dyn Nvm, h: &NvmHeader) -> Result<(Tid, Vec<u8>), DeviceError> {
    let mut word = [0u8; 8];
    nvm.load(nf::COMMIT_WORD_AT, &mut word)?;
    let mut table = vec![0u8; (h.slots * nf::ENTRY_SIZE) as usize];
    nvm.load(nf::TABLE_AT, &mut table)?;
    Ok((Tid::new(u64::from_le_bytes(word)), table))
}

/// An nvm journal's table as an inspecting command reads it.
pub struct InspectedTable {
    pub nvm: crate::nvm::MappedNvm,
    pub header: NvmHeader,
    pub commit_word: Tid,
    pub analysis: crate::journal::placement::nvm::TableRecovery,
}

/// Opens the NVM at `path` read-only (a shared lock: it fails, naming the holder, while a mount
/// has it) and reads and analyses its table as recovery would, writing nothing. The flag says
/// whether the error is damage (a bad header or table) rather than an NVM that cannot be opened.
pub fn inspect_table(path: &str, fs_uuid: [u8; 16], block_size: u32, fs_blocks: u64) -> Result<InspectedTable, (crate::error::FsError, bool)> {
    use crate::error::FsError;
    let nvm = crate::nvm::MappedNvm::open(std::path::Path::new(path), false).map_err(|e| (FsError::Io(format!("the NVM journal {path}: {e}")), false))?;
    let header = open_header(&nvm, fs_uuid, block_size).map_err(|e| (e, true))?;
    let (commit_word, table) = read_table(&nvm, &header).map_err(|e| (e.into(), true))?;
    let analysis = crate::journal::placement::nvm::analyze(&header, commit_word, &table, fs_blocks).map_err(|e| (FsError::Corrupt(format!("{path}: {e}")), true))?;
    Ok(InspectedTable { nvm, header, commit_word, analysis })
}

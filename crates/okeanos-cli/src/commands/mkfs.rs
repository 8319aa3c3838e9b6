//! `okeanos mkfs`: format an image file, a block device or an NVM-journal pair, sized and laid
//! out as the options say (the journal's placement among them).

use crate::*;

#[allow(clippy::too_many_arguments)]
pub(crate) fn mkfs(
    image: &Path,
    size: Option<&str>,
    block_size: u32,
    journal_size: Option<&str>,
    journal_device: Option<&Path>,
    remote_server: Option<String>,
    bytes_per_inode: u64,
    log_area_blocks: u32,
    label: String,
    force: bool,
    // Manylogs, with its group size if given.
    manylogs: Option<Option<u32>>,
    lazy_journal_init: bool,
) -> Result<ExitCode, String> {
    let created: Vec<PathBuf> = [Some(image), journal_device].into_iter().flatten().filter(|p| !p.exists()).map(Path::to_path_buf).collect();
    let made = (|| {
        let dev = prepare(image, size, force)?;
        let journal_blocks = match journal_size {
            Some(j) => parse_size(j)? / block_size.max(1) as u64,
            None => okeanos::fs::mkfs::default_journal_blocks(dev.len_bytes() / block_size.max(1) as u64),
        };
        let jdev = match journal_device {
            Some(j) => Some(prepare(j, Some(&format!("{}", journal_blocks * block_size as u64)), force)?),
            None => None,
        };
        let opts = MkfsOptions {
            block_size,
            journal_blocks,
            external_journal: jdev.is_some(),
            bytes_per_inode,
            log_area_blocks,
            blocks_per_group: manylogs.flatten(),
            manylogs: manylogs.is_some(),
            label,
            remote_server: remote_server.clone(),
            nvm_path: None,
            zero_journal: !lazy_journal_init,
        };
        let sb = Okeanos::mkfs(dev.as_ref(), jdev.as_deref(), &opts).map_err(|e| e.to_string())?;
        Ok::<_, String>((sb, jdev.is_some()))
    })();
    let (sb, external) = match made {
        Ok(x) => x,
        Err(e) => {
            // Leave nothing behind that this command created.
            for p in &created {
                let _ = std::fs::remove_file(p);
            }
            return Err(e);
        }
    };
    let jblocks = match sb.journal {
        JournalLocation::Internal { blocks, .. } | JournalLocation::External { blocks, .. } => blocks,
    };
    if let Some(r) = &sb.remote {
        outln!("{}: journal on the server {}, falling back to the internal journal of {} blocks", image.display(), r.server, jblocks);
    }
    if sb.manylogs() {
        let mib = |b: u64| b as f64 * sb.block_size as f64 / (1 << 20) as f64;
        outln!(
            "{}: {} blocks of {} bytes, {} inodes, manylogs: {} of {} blocks ({:.1} MiB), one in every group of {} blocks ({:.1} MiB)",
            image.display(),
            sb.block_count,
            sb.block_size,
            sb.inode_count,
            plural(sb.group_count as u64, "log", "logs"),
            sb.log_area_blocks,
            mib(sb.log_area_blocks as u64),
            sb.blocks_per_group,
            mib(sb.blocks_per_group as u64)
        );
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{}: {} blocks of {} bytes, {}, {} inodes, {} journal of {} blocks ({} MiB)",
        image.display(),
        sb.block_count,
        sb.block_size,
        plural(sb.group_count as u64, "group", "groups"),
        sb.inode_count,
        if external { "external" } else { "internal" },
        jblocks,
        jblocks * sb.block_size as u64 >> 20
    );
    Ok(ExitCode::SUCCESS)
}

/// `mkfs --journal nvm`: the image with an unused minimal internal journal, and the NVM (a
/// DAX device used as it is, or a file created with `nvm_bytes`) formatted as its journal.
#[allow(clippy::too_many_arguments)]
pub(crate) fn mkfs_nvm(image: &Path, size: Option<&str>, block_size: u32, journal_size: Option<&str>, nvm: &Path, nvm_bytes: u64, bytes_per_inode: u64, log_area_blocks: u32, label: String, force: bool) -> Result<ExitCode, String> {
    use std::os::unix::fs::FileTypeExt;
    let created: Vec<PathBuf> = [image, nvm].into_iter().filter(|p| !p.exists()).map(Path::to_path_buf).collect();
    let made = (|| {
        let dev = prepare(image, size, force)?;
        let journal_blocks = parse_size(journal_size.unwrap_or("1M"))? / block_size.max(1) as u64;
        let device = std::fs::metadata(nvm).map(|m| m.file_type().is_block_device() || m.file_type().is_char_device()).unwrap_or(false);
        let region = if device {
            okeanos::nvm::MappedNvm::open(nvm, true)
        } else {
            if nvm.exists() && !force {
                return Err(format!("{} exists: give --force to overwrite it", nvm.display()));
            }
            okeanos::nvm::MappedNvm::create(nvm, nvm_bytes, true)
        }
        .map_err(|e| e.to_string())?;
        let path = std::fs::canonicalize(nvm).map_err(|e| format!("{}: {e}", nvm.display()))?;
        let opts = MkfsOptions { block_size, journal_blocks, bytes_per_inode, log_area_blocks, label, nvm_path: Some(path.display().to_string()), ..Default::default() };
        let sb = Okeanos::mkfs_nvm(dev.as_ref(), &region, &opts).map_err(|e| e.to_string())?;
        use okeanos::nvm::Nvm;
        Ok::<_, String>((sb, path, region.len(), region.durability()))
    })();
    let (sb, path, len, durability) = match made {
        Ok(x) => x,
        Err(e) => {
            for p in &created {
                let _ = std::fs::remove_file(p);
            }
            return Err(e);
        }
    };
    let h = okeanos::format::nvm::NvmHeader::layout(len, sb.block_size, sb.uuid).map_err(|e| e.to_string())?;
    outln!(
        "{}: {} blocks of {} bytes, {}, {} inodes, journal in NVM {} ({} MiB, {} slots; durable against {})",
        image.display(),
        sb.block_count,
        sb.block_size,
        plural(sb.group_count as u64, "group", "groups"),
        sb.inode_count,
        path.display(),
        len >> 20,
        h.slots,
        durability.describe()
    );
    Ok(ExitCode::SUCCESS)
}

/// Opens `path` for mkfs: creates a file of `size` if missing; refuses to overwrite an
/// existing Okeanos file system without `force`.
fn prepare(path: &Path, size: Option<&str>, force: bool) -> Result<Arc<dyn Device>, String> {
    if path.exists() {
        let dev = FileDevice::open(path).map_err(|e| e.to_string())?;
        if !force {
            let mut b = vec![0u8; 512];
            if dev.len_bytes() >= 512 && dev.read_at(0, &mut b).is_ok()
                && (okeanos::format::Superblock::decode(&b).is_ok() || okeanos::format::journal::JournalSuperblock::decode(&b).is_ok()) {
                    return Err(format!("{} already holds an Okeanos file system or journal; use --force to overwrite it", path.display()));
                }
        }
        if let Some(s) = size {
            let want = parse_size(s)?;
            let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
            if meta.is_file() && meta.len() != want {
                drop(dev);
                let f = std::fs::OpenOptions::new().write(true).open(path).map_err(|e| e.to_string())?;
                f.set_len(want).map_err(|e| e.to_string())?;
                return Ok(Arc::new(FileDevice::open(path).map_err(|e| e.to_string())?));
            }
        }
        return Ok(Arc::new(dev));
    }
    let size = size.ok_or_else(|| format!("{} does not exist: give --size to create it", path.display()))?;
    let bytes = parse_size(size)?;
    Ok(Arc::new(FileDevice::create(path, bytes, false).map_err(|e| e.to_string())?))
}

//! Opening the journal at mount: the placement opened once (`runtime::placement`), recovery
//! of whatever it names (into an in-memory overlay for a read-only mount), and the
//! transaction limits the mount runs with. The rest of mounting (superblock, the journal
//! thread, orphans) is in `mount.rs`.

use crate::ids::Tid;
use crate::clock::Clock;
use crate::device::Device;
use crate::format::journal::JournalSuperblock;
use crate::format::Superblock;
use crate::fs::{FsError, FsResult};
use crate::journal::placement::LogRegion;
use crate::journal::{Journal, JournalConfig};
use crate::options::MountOptions;
use crate::runtime::placement;
use crate::runtime::{self, Devices};
use crate::stats::Stats;
use std::sync::Arc;

/// Opens the placement as the last mount left it (a remote journal is taken over first,
/// docs/REMOTE.md) and recovers whatever needs it (into an in-memory overlay for a read-only
/// mount). Returns the placement, moved on past recovery, and the next tid.
pub(super) fn recover(devs: &mut Devices, sb: &Superblock, region: LogRegion, jsb: &JournalSuperblock, opts: &MountOptions, stats: &Stats, clock: &dyn Clock) -> FsResult<(placement::Opened, Tid)> {
    let mut opened = placement::open(devs, sb, region, jsb, opts, clock, false)?;
    let mut next_tid = opened.floor;
    if !opened.placement().recovery().is_empty() {
        if opts.read_only {
            // Recover in memory, write nothing: the overlays keep the replayed blocks and
            // serve every later read of this mount.
            devs.fs = Arc::new(crate::device::OverlayDevice::new(devs.fs.clone()));
            devs.journal = devs.journal.take().map(|j| Arc::new(crate::device::OverlayDevice::new(j)) as Arc<dyn Device>);
        }
        let now = || clock.now_ns();
        if let Some((mut report, tid)) = runtime::recover(devs, opened.placement(), crate::journal::recovery::FsBounds::of(sb), stats, &now, clock.wall_ns(), &opts.faults)? {
            report.scan_ns += opened.remote.as_ref().map_or(0, |o| o.fetch_ns);
            next_tid = tid;
            *stats.recovery.lock().unwrap_or_else(|e| e.into_inner()) = Some(report);
        }
    }
    devs.remote_log = None;
    Ok((opened, next_tid))
}

/// The journal the mount runs with, after recovery: the placement as recovery left it
/// ([`placement::Opened::run`]), and the transaction limits.
pub(super) fn journal(devs: &mut Devices, sb: &Superblock, opened: placement::Opened, opts: &MountOptions, next_tid: Tid) -> FsResult<Journal> {
    let mut content = opts.content().map_err(FsError::Invalid)?;
    let (fast_commit_blocks, fast_commit_compact, fast_commit_notes, short_notes) = (opened.fast_commit_blocks, opened.fast_commit_compact, opened.fast_commit_notes, opened.fast_commit_short_notes);
    let in_place_tags = opened.in_place_tags;
    let (placement, capacity) = opened.run(devs, sb, opts, next_tid)?;
    // The placement's defaults, where the mount gave no option.
    let defaults = placement.defaults();
    if content.logged_write_size.is_none() {
        content.logged_write_size = defaults.logged_write_size;
    }
    let smallest = crate::fs::mkfs::MIN_JOURNAL_BLOCKS - 1;
    if capacity < smallest {
        return Err(FsError::Invalid(format!(
            "the journal ({}) holds {capacity} blocks, less than the smallest journal ({smallest}); give the journal server a larger --quota",
            placement.name()
        )));
    }
    let mut cfg = JournalConfig::new(capacity, sb.block_size as usize);
    if let Some(m) = opts.max_tx_blocks {
        let max = capacity / 2;
        if m > max {
            return Err(FsError::Invalid(format!("max_tx_blocks={m} is more than half of this journal ({max} blocks)")));
        }
        cfg.max_tx_blocks = m;
    }
    cfg.lazy_checkpoint = opts.lazy_checkpoint;
    let background = opts.dirty_background_bytes.unwrap_or(defaults.dirty_background_bytes);
    cfg.dirty_background_blocks = usize::try_from(background / sb.block_size as u64).unwrap_or(usize::MAX);
    cfg.datasync_in_place = opts.datasync_in_place;
    // A placement that stores the committed blocks whole (nvm) writes no journal blocks: its
    // commits have no form to choose.
    let images_only = placement.parking().is_some_and(|p| p.wants_images());
    cfg.fast_commit_blocks = if opts.fast_commit && !images_only { fast_commit_blocks.min(opts.fast_commit_blocks) } else { 0 };
    cfg.fast_commit_compact = fast_commit_compact;
    cfg.inode_notes = (fast_commit_notes && cfg.fast_commit_blocks > 0).then(|| crate::format::inode::InodeTables::of(sb));
    cfg.short_notes = short_notes;
    // Only the newest transaction can be torn when commits are one at a time: with pipelined
    // commits a later one may commit beside an earlier one's flush.
    cfg.in_place_tags = in_place_tags && opts.in_place_tags && opts.pipeline_depth() == 0;
    // `fresh_blocks=auto`: new whole blocks in place where that costs neither a seek nor a
    // second flush (docs/JOURNALING.md, "New blocks in place"); logged elsewhere.
    if opts.fresh_in_place.is_none() && content.mode == crate::DataMode::Wasteless && cfg.in_place_tags && opts.fs_seeks.or_else(|| devs.fs.seeks()) == Some(false) {
        content.fresh_in_place = true;
    }
    cfg.faults = opts.faults.clone();
    let journal = Journal::new(cfg, content.policy(), placement, next_tid);
    Ok(journal)
}

/// What a mount reports when recovery fails, by kind: a device held by another opener stays
/// "in use", a missing one "unavailable", a corrupt structure "corrupt"; the rest is an I/O
/// error. The message keeps recovery's own words.
impl From<runtime::RecoveryError> for FsError {
    fn from(e: runtime::RecoveryError) -> Self {
        match &e {
            runtime::RecoveryError::Device(crate::device::DeviceError::InUse { .. }) => FsError::InUse(e.to_string()),
            runtime::RecoveryError::Device(crate::device::DeviceError::Open { .. }) => FsError::Unavailable(e.to_string()),
            runtime::RecoveryError::Format(_) | runtime::RecoveryError::Damaged(_) => FsError::Corrupt(e.to_string()),
            runtime::RecoveryError::Device(_) => FsError::Io(e.to_string()),
        }
    }
}

//! Opening the journal at mount: taking a remote journal over, recovering every log the
//! placement names (into an in-memory overlay for a read-only mount), returning a host that
//! fell back to its server, and choosing the placement and transaction limits the mount runs
//! with. The rest of mounting (superblock, the journal thread, orphans) is in `mount.rs`.

use crate::clock::Clock;
use crate::device::Device;
use crate::format::journal::{JournalSuperblock, RemoteState};
use crate::format::Superblock;
use crate::fs::{FsError, FsResult};
use crate::journal::placement::{LogRegion, Placement, Remote, Ring};
use crate::journal::plan::DevId;
use crate::journal::{Journal, JournalConfig};
use crate::options::MountOptions;
use crate::runtime::{self, Devices};
use crate::stats::Stats;
use std::sync::{Arc, Mutex};

/// Takes a remote journal over (docs/REMOTE.md) and recovers whatever needs it. Returns the
/// next tid and the remote journal, if connected.
pub(super) fn recover(devs: &mut Devices, sb: &Superblock, region: LogRegion, jsb: &JournalSuperblock, opts: &MountOptions, stats: &Stats, clock: &dyn Clock) -> FsResult<(u64, Option<runtime::remote::Opened>)> {
    let mut next_tid = jsb.sequence.max(1);
    if let Some(rec) = &sb.nvm {
        // The nvm placement (UBJ): recovery reads its slot table, not a log.
        let nvm: Arc<dyn crate::nvm::Nvm> = match (&opts.nvm, &opts.nvm_path) {
            (Some(h), _) => h.0.clone(),
            (None, p) => {
                let path = p.clone().unwrap_or_else(|| rec.path.clone().into());
                Arc::new(crate::nvm::MappedNvm::open(&path, !opts.read_only).map_err(|e| FsError::Io(format!("the NVM journal {}: {e} (give another path with nvm=)", path.display())))?)
            }
        };
        // A timed emulation of the disks (device_model=) times the NVM as persistent memory.
        let nvm: Arc<dyn crate::nvm::Nvm> = match &opts.device_model {
            Some(_) => Arc::new(crate::nvm::TimedNvm::new(nvm, crate::models::preset("nvm").map_err(FsError::Invalid)?)),
            None => nvm,
        };
        devs.nvm = Some(nvm.clone());
        let h = runtime::nvm::open_header(nvm.as_ref(), sb.uuid, sb.block_size)?;
        if opts.read_only {
            devs.fs = Arc::new(crate::device::OverlayDevice::new(devs.fs.clone()));
        }
        let now = || clock.now_ns();
        let (report, tid) = runtime::nvm::recover(devs, &h, sb.block_count, opts.read_only, stats, &now)?;
        if let Some(r) = report {
            *stats.recovery.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
        }
        return Ok((next_tid.max(tid), None));
    }
    if sb.manylogs() {
        // Manylogs: the log table says where each log's live transactions begin.
        let recovering = runtime::open::open_manylogs(sb, devs)?;
        next_tid = next_tid.max(recovering.floor());
        if !recovering.recovery().is_empty() {
            if opts.read_only {
                devs.fs = Arc::new(crate::device::OverlayDevice::new(devs.fs.clone()));
            }
            let now = || clock.now_ns();
            if let Some((report, tid)) = runtime::recover(devs, &recovering, sb.block_count, stats, &now, clock.wall_ns())? {
                next_tid = tid;
                *stats.recovery.lock().unwrap_or_else(|e| e.into_inner()) = Some(report);
            }
        }
        return Ok((next_tid, None));
    }
    // A remote journal: connect, take it over, read its log back (docs/REMOTE.md). After
    // a clean unmount the server holds nothing (it was trimmed): read-only use needs no
    // server then.
    let remote = match &sb.remote {
        Some(_) if !jsb.remote.local && !(opts.read_only && jsb.start == 0) => {
            let record = remote_state_writer(devs, region, jsb);
            Some(runtime::remote::open(sb, jsb, opts, devs, &|| clock.now_ns(), record)?)
        }
        _ => None,
    };
    let recovering: Box<dyn Placement> = match &remote {
        Some(o) => Box::new(Remote::new(Ring::new(region, JournalSuperblock { remote: RemoteState { epoch: o.epoch, ..jsb.remote }, ..jsb.clone() }), o.capacity, o.fetched)),
        None => Box::new(Ring::new(region, jsb.clone())),
    };
    if !recovering.recovery().is_empty() {
        if opts.read_only {
            // Recover in memory, write nothing: the overlays keep the replayed blocks and
            // serve every later read of this mount.
            devs.fs = Arc::new(crate::device::OverlayDevice::new(devs.fs.clone()));
            devs.journal = devs.journal.take().map(|j| Arc::new(crate::device::OverlayDevice::new(j)) as Arc<dyn Device>);
        }
        let now = || clock.now_ns();
        if let Some((mut report, tid)) = runtime::recover(devs, recovering.as_ref(), sb.block_count, stats, &now, clock.wall_ns())? {
            report.scan_ns += remote.as_ref().map_or(0, |o| o.fetch_ns);
            next_tid = tid;
            *stats.recovery.lock().unwrap_or_else(|e| e.into_inner()) = Some(report);
        }
    }
    devs.remote_log = None;
    Ok((next_tid, remote))
}

/// The journal the mount runs with, after recovery (`jsb` read again): back to the server if
/// the host fell back and it answers, the placement, the transaction limits.
pub(super) fn journal(devs: &mut Devices, sb: &Superblock, region: LogRegion, jsb: JournalSuperblock, opts: &MountOptions, next_tid: u64, remote: Option<runtime::remote::Opened>) -> FsResult<Journal> {
    let mut content = opts.content().map_err(FsError::Invalid)?;
    let mut jsb = jsb;
    let mut remote = remote;
    if sb.remote.is_some() && jsb.remote.local && jsb.start == 0 && !opts.read_only {
        // Fell back earlier and the local journal is empty now: return to the server if
        // it answers; stay local if not.
        let record = remote_state_writer(devs, region, &jsb);
        if let Ok(o) = runtime::remote::reopen(sb, &jsb, opts, devs, next_tid, record) {
            jsb.remote = RemoteState { local: false, epoch: o.epoch, upto: 0 };
            remote = Some(o);
        }
    }
    if matches!(content.mode, crate::journal::content::DataMode::Wasteless | crate::journal::content::DataMode::Selective) {
        // Multiwrite records need the journal feature; the mount writes the journal
        // superblock (with the flag) before the first commit.
        jsb.features |= crate::format::journal::jfeature::MULTIWRITE;
    }
    if sb.remote.is_some() && !opts.read_only {
        // A host that fell back (now or later) reconnects with this when it returns.
        devs.reconnect = Some(runtime::remote::reconnector(sb, &jsb, opts)?);
        if devs.link.is_none() {
            devs.link = Some(Arc::new(Mutex::new(Box::new(crate::remote::NotConnected) as Box<dyn crate::remote::Link>)));
        }
    }
    let placement: Box<dyn Placement> = match (&remote, &sb.remote) {
        _ if sb.manylogs() => {
            let mut m = runtime::open::open_manylogs(sb, devs)?;
            m.fault_reuse_before_table = opts.faults.manylogs_reuse_early;
            m.fault_keep_first_position = opts.faults.manylogs_keep_first_position;
            m.fault_swap_unreserved = opts.faults.manylogs_swap_unreserved;
            m.fault_snapshot_unhomed = opts.faults.manylogs_snapshot_unhomed;
            Box::new(m)
        }
        _ if sb.nvm.is_some() => {
            let nvm = devs.nvm.as_ref().expect("opened by recover");
            let mut p = crate::journal::placement::NvmSlots::new(runtime::nvm::open_header(nvm.as_ref(), sb.uuid, sb.block_size)?);
            p.fault_no_fence_before_commit_word = opts.faults.nvm_no_fence;
            p.fault_free_before_commit = opts.faults.nvm_free_early;
            Box::new(p)
        }
        (Some(o), _) => {
            let mut r = Remote::new(Ring::new(region, jsb), o.capacity, None);
            r.fault_skip_append = opts.faults.skip_remote_append;
            Box::new(r)
        }
        // Fell back and the server did not answer at mount: local until it does.
        (None, Some(_)) if jsb.remote.local && !opts.read_only => Box::new(Remote::new(Ring::new(region, jsb), region.ring_len(), None)),
        _ => Box::new(Ring::new(region, jsb)),
    };
    // The placement's defaults, where the mount gave no option.
    let defaults = placement.defaults();
    if content.logged_write_size.is_none() {
        content.logged_write_size = defaults.logged_write_size;
    }
    // Transactions must fit the internal ring too: a remote journal falls back to it.
    let capacity = if sb.remote.is_some() { placement.capacity().min(region.ring_len()) } else { placement.capacity() };
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
    cfg.fault_skip_commit_flush = opts.faults.skip_commit_flush;
    cfg.lazy_checkpoint = opts.lazy_checkpoint;
    let background = opts.dirty_background_bytes.unwrap_or(defaults.dirty_background_bytes);
    cfg.dirty_background_blocks = usize::try_from(background / sb.block_size as u64).unwrap_or(usize::MAX);
    cfg.fault_early_unwritten = opts.faults.early_unwritten;
    cfg.fault_ordered_after_commit = opts.faults.ordered_after_commit;
    cfg.datasync_in_place = opts.datasync_in_place;
    cfg.fault_datasync_no_flush = opts.faults.datasync_no_flush;
    let journal = Journal::new(cfg, content.policy(), placement, next_tid);
    Ok(journal)
}

/// Writes the local journal superblock with another remote state, durably (before the step
/// on the server that depends on it). Used only while mounting, before the journal exists.
pub(super) fn remote_state_writer(devs: &Devices, region: crate::journal::placement::LogRegion, jsb: &JournalSuperblock) -> impl FnMut(RemoteState) -> FsResult<()> {
    let log_dev: Arc<dyn Device> = if region.dev() == DevId::Journal { devs.journal.clone().expect("checked by open_journal") } else { devs.fs.clone() };
    let at = region.device_block(0) * jsb.block_size as u64;
    let base = jsb.clone();
    move |state| {
        let mut b = vec![0u8; base.block_size as usize];
        JournalSuperblock { remote: state, ..base.clone() }.encode(&mut b);
        log_dev.write_at(at, &b)?;
        log_dev.flush()?;
        Ok(())
    }
}

/// What a mount reports when recovery fails, by kind: a device held by another opener stays
/// "in use", a missing one "unavailable", a corrupt structure "corrupt"; the rest is an I/O
/// error. The message keeps recovery's own words.
impl From<runtime::RecoveryError> for FsError {
    fn from(e: runtime::RecoveryError) -> Self {
        match &e {
            runtime::RecoveryError::Device(crate::device::DeviceError::InUse { .. }) => FsError::InUse(e.to_string()),
            runtime::RecoveryError::Device(crate::device::DeviceError::Open { .. }) => FsError::Unavailable(e.to_string()),
            runtime::RecoveryError::Format(_) => FsError::Corrupt(e.to_string()),
            runtime::RecoveryError::Device(_) => FsError::Io(e.to_string()),
        }
    }
}

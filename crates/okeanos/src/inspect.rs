//! Offline inspection and repair of an unmounted file system: journal dump, recovery, and a
//! summary of the superblock and free space. Used by the `okeanos` command.

use crate::ids::{HomeBlock, Tid};
use crate::device::Device;
use crate::format::journal::{JournalSuperblock, RevokeBlock};
use crate::format::Superblock;
use crate::fs::FsError;
use crate::journal::placement::{LogRegion, Ring};
use crate::journal::recovery::ScannedTx;
use crate::clock::Clock;
use crate::runtime::placement::JournalKind;
use crate::runtime::{self, Devices};
use crate::stats::{RecoveryReport, Stats};
use std::sync::Arc;

/// The journal as recovery would see it.
#[derive(Debug, Clone)]
pub struct JournalDump {
    pub region: LogRegion,
    pub jsb: JournalSuperblock,
    pub transactions: Vec<ScannedTx>,
    /// Revoked blocks of each transaction, in the same order.
    pub revoked: Vec<Vec<HomeBlock>>,
    pub end_reason: String,
    /// A damaged transaction with committed ones after it, as recovery's probe finds it.
    pub damage: Option<crate::journal::recovery::Damage>,
    /// What the journal is (every placement alike).
    pub state: JournalState,
}

pub use crate::runtime::placement::{journal_state, JournalState};

fn open(dev: &Arc<dyn Device>, journal: Option<Arc<dyn Device>>) -> Result<(Superblock, Devices, LogRegion, JournalSuperblock), FsError> {
    let (sb, _) = crate::runtime::open::read_meta(dev.as_ref())?;
    let devs = Devices::new(dev.clone(), journal, sb.block_size as usize);
    let (region, jsb) = crate::runtime::open::open_journal(&sb, &devs)?;
    Ok((sb, devs, region, jsb))
}

/// Reads the committed transactions in the journal. A clean journal has none; with
/// `from_start`, the scan starts at the first log block with the journal's next sequence
/// anyway (showing what a clean journal would replay: normally nothing).
pub fn dump_journal(dev: Arc<dyn Device>, journal: Option<Arc<dyn Device>>) -> Result<JournalDump, FsError> {
    let (sb, devs, region, jsb) = open(&dev, journal)?;
    let bs = sb.block_size as u64;
    let state = journal_state(&sb, &devs, &jsb);
    if let JournalKind::Manylogs = JournalKind::of(&sb) {
        return dump_manylogs(&sb, &devs, region, jsb, state);
    }
    let Some(start) = Ring::new(region, jsb.clone()).scan_start() else {
        return Ok(JournalDump { region, jsb, end_reason: "journal is clean".into(), transactions: Vec::new(), revoked: Vec::new(), damage: None, state });
    };
    let mut log = runtime::LogReader::new(&devs, region);
    let (scan, probe) = runtime::scan_log(&mut log, &start, crate::journal::recovery::FsBounds::of(&sb), bs as usize, &Default::default())?;
    let damage = probe.and_then(|p| p.damage);
    let mut revoked = Vec::new();
    for t in &scan.txs {
        let mut v = Vec::new();
        for &pos in &t.revoke_blocks {
            v.extend(RevokeBlock::decode(log.read(pos)?)?.blocks);
        }
        revoked.push(v);
    }
    Ok(JournalDump { region, jsb, end_reason: scan.end_reason.clone(), transactions: scan.txs, revoked, damage, state })
}

/// The manylogs journal: every log scanned from its snapshot position (its recorded tail for a
/// table without a map), merged by tid. The blocks the map names are not listed.
fn dump_manylogs(sb: &Superblock, devs: &Devices, region: LogRegion, jsb: JournalSuperblock, state: JournalState) -> Result<JournalDump, FsError> {
    use crate::journal::placement::Placement;
    let placement = crate::runtime::placement::open_manylogs(sb, devs)?;
    let recovery = placement.recovery();
    let starts = recovery.logs();
    if starts.is_empty() {
        let kept = placement.snapshots().map_or(0, |s| s.recovered_kept().len());
        let end_reason = if kept == 0 { "log table is clean".to_string() } else { format!("log table written by recovery: nothing to replay, {kept} data blocks kept in their logs") };
        return Ok(JournalDump { region, jsb, end_reason, transactions: Vec::new(), revoked: Vec::new(), damage: None, state });
    }
    let (mut txs, mut log_damage) = (Vec::new(), Vec::new());
    for start in starts {
        let mut log = runtime::LogReader::new(devs, start.region);
        let (mut scan, probe) = runtime::scan_log(&mut log, start, crate::journal::recovery::FsBounds::of(&sb), sb.block_size as usize, &Default::default())?;
        let rec = start.interleaved.expect("manylogs logs are interleaved");
        log_damage.extend(probe.and_then(|p| p.damage).into_iter().chain(crate::journal::recovery::short_of_table(start, rec, &scan)));
        txs.append(&mut scan.txs);
    }
    let (txs, damage) = crate::journal::recovery::merge_interleaved(txs, starts[0].interleaved.map_or(starts[0].tid, |i| i.floor), log_damage, starts[0].interleaved.map_or(Tid::ZERO, |i| i.swept));
    let mut revoked = Vec::new();
    for t in &txs {
        let mut log = runtime::LogReader::new(devs, t.region);
        let mut v = Vec::new();
        for &pos in &t.revoke_blocks {
            v.extend(RevokeBlock::decode(log.read(pos)?)?.blocks);
        }
        revoked.push(v);
    }
    let end_reason = format!("{} logs scanned from their snapshot positions, {} blocks in the map", starts.len(), placement.snapshots().map_or(0, |s| s.recovery_map().len()));
    Ok(JournalDump { region, jsb, end_reason, transactions: txs, revoked, damage, state })
}

/// Replays the journal if it needs it (as mount would), leaving the file system unmounted and
/// its journal clean. `None` if the journal was already clean.
pub fn recover_image(dev: Arc<dyn Device>, journal: Option<Arc<dyn Device>>) -> Result<Option<RecoveryReport>, FsError> {
    let (sb, mut devs, region, jsb) = open(&dev, journal)?;
    let clock = crate::clock::SystemClock::default();
    let opts = crate::options::MountOptions::default();
    let mut opened = crate::runtime::placement::open(&mut devs, &sb, region, &jsb, &opts, &clock, true)?;
    if opened.placement().recovery().is_empty() {
        return Ok(None);
    }
    let now = || clock.now_ns();
    let Some((report, _)) = runtime::recover(&devs, opened.placement(), crate::journal::recovery::FsBounds::of(&sb), &Stats::new(sb.block_size as usize), &now, clock.wall_ns(), &Default::default())? else {
        return Ok(None);
    };
    // Unmounted with a clean journal: the superblock says so (keeping an ERRORS state that
    // recovery set or found). Replay may have rewritten block 0, so read it again.
    let mut b = vec![0u8; sb.block_size as usize];
    dev.read_at(0, &mut b)?;
    let mut sb = Superblock::decode(&b)?;
    if sb.state & !crate::format::superblock::state::ERRORS == crate::format::superblock::state::MOUNTED {
        sb.state = crate::format::superblock::state::CLEAN | (sb.state & crate::format::superblock::state::ERRORS);
        sb.encode(&mut b);
        dev.write_at(0, &b)?;
        dev.flush()?;
    }
    Ok(Some(report))
}

/// Why the file system must not be mounted read-write (the ERRORS state or an unknown state),
/// or None.
pub fn error_state(dev: &dyn Device) -> Result<Option<String>, FsError> {
    let (sb, _) = crate::runtime::open::read_meta(dev)?;
    Ok(crate::runtime::open::error_state(&sb))
}

/// Clears the ERRORS state and error record after fsck found the file system consistent (e2fsck
/// does the same once it has checked or repaired everything); the superblock is written and
/// flushed. Refuses while the journal still needs recovery.
pub fn clear_errors(dev: Arc<dyn Device>, journal: Option<Arc<dyn Device>>) -> Result<(), FsError> {
    let (mut sb, devs, _, jsb) = open(&dev, journal)?;
    if !jsb.is_clean() {
        return Err(FsError::Invalid("the journal still needs recovery".into()));
    }
    sb.state = crate::format::superblock::state::CLEAN;
    sb.error = Default::default();
    let mut b = vec![0u8; sb.block_size as usize];
    devs.fs.read_at(0, &mut b)?;
    sb.encode(&mut b);
    devs.fs.write_at(0, &b)?;
    devs.fs.flush()?;
    Ok(())
}

/// The journal features before and after [`tune_journal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuned {
    pub before: u32,
    pub after: u32,
}

/// Turns journal features on (`enable`) and off (`disable`) on an unmounted file system whose
/// journal has nothing to replay, as tune2fs -O does for ext4: the forms of commit in
/// [`jfeature::TUNABLE`] only (docs/FORMAT.md, "Journal features"). Recovery tells each form
/// apart by its block, and a clean journal holds no transaction to replay, so the next mount
/// simply writes the forms the journal superblock now allows; turning a feature off lets a
/// binary that does not know it mount the image again. The journal superblock is rewritten in
/// place (checksummed, one block) and flushed; nothing else is touched. Refused: a feature
/// outside TUNABLE, a set of features a journal may not have, a journal that needs recovery,
/// cannot be read, or was aborted (run `okeanos recover` or `okeanos fsck` first).
///
/// [`jfeature::TUNABLE`]: crate::format::journal::jfeature::TUNABLE
pub fn tune_journal(dev: Arc<dyn Device>, journal: Option<Arc<dyn Device>>, enable: u32, disable: u32) -> Result<Tuned, FsError> {
    use crate::format::journal::jfeature;
    let (sb, devs, region, jsb) = open(&dev, journal)?;
    let not_tunable = (enable | disable) & !jfeature::TUNABLE;
    if not_tunable != 0 {
        let names = jfeature::names(not_tunable);
        let what = if names.is_empty() { format!("{not_tunable:#x}") } else { names.join(", ") };
        return Err(FsError::Invalid(format!("{what}: not a feature that can be changed on an existing journal (these can: {})", jfeature::names(jfeature::TUNABLE).join(", "))));
    }
    if enable & disable != 0 {
        return Err(FsError::Invalid(format!("{}: both turned on and off", jfeature::names(enable & disable).join(", "))));
    }
    let after = (jsb.features | enable) & !disable;
    if let Some(why) = jfeature::inconsistent(after) {
        return Err(FsError::Invalid(why.into()));
    }
    let state = journal_state(&sb, &devs, &jsb);
    if let Some(p) = &state.problem {
        return Err(FsError::Invalid(format!("the journal cannot be read ({p}): run `okeanos fsck` first")));
    }
    if state.needs_recovery {
        return Err(FsError::Invalid("the journal needs recovery: run `okeanos recover` (or mount it once) first".into()));
    }
    if jsb.errno != 0 {
        return Err(FsError::Invalid(format!("the journal was aborted (error {}): run `okeanos fsck` first", jsb.errno)));
    }
    let tuned = Tuned { before: jsb.features, after };
    if after == jsb.features {
        return Ok(tuned);
    }
    let bs = sb.block_size as u64;
    let at = region.device_block(region.superblock()).byte(bs);
    let jdev = devs.get(region.dev());
    let mut b = vec![0u8; bs as usize];
    jdev.read_at(at, &mut b)?;
    // Written as read, but for the features: the block is decoded again so that a superblock
    // that changed since `open` (it cannot under the lock) is never overwritten with old fields.
    let mut now = JournalSuperblock::decode(&b)?;
    if now != jsb {
        return Err(FsError::Invalid("the journal superblock changed while it was being tuned: is the image in use?".into()));
    }
    now.features = after;
    now.encode(&mut b);
    jdev.write_at(at, &b)?;
    jdev.flush()?;
    Ok(tuned)
}

/// The superblock, the group descriptors, the journal superblock and the journal's state of an
/// unmounted file system.
pub fn describe(dev: Arc<dyn Device>, journal: Option<Arc<dyn Device>>) -> Result<(Superblock, Vec<crate::format::GroupDesc>, JournalSuperblock, JournalState), FsError> {
    let (sb, gdt) = crate::runtime::open::read_meta(dev.as_ref())?;
    let (_, devs, _, jsb) = open(&dev, journal)?;
    let state = journal_state(&sb, &devs, &jsb);
    Ok((sb, gdt, jsb, state))
}

/// What an nvm journal's table holds, as recovery would read it (nothing is written).
#[derive(Debug)]
pub struct NvmTable {
    pub path: String,
    pub header: crate::format::nvm::NvmHeader,
    pub commit_word: Tid,
    pub durability: crate::nvm::Durability,
    pub analysis: crate::journal::placement::nvm::TableRecovery,
}

/// Reads the slot table of the nvm journal of the file system on `dev`, if it has one. Fails
/// (naming the holder) while a mount has it open.
pub fn nvm_table(dev: &Arc<dyn Device>) -> Result<Option<NvmTable>, FsError> {
    use crate::nvm::Nvm;
    let (sb, _) = crate::runtime::open::read_meta(dev.as_ref())?;
    let JournalKind::Nvm(rec) = JournalKind::of(&sb) else { return Ok(None) };
    let t = runtime::nvm::inspect_table(&rec.path, sb.uuid, sb.block_size, sb.block_count).map_err(|(e, _)| e)?;
    Ok(Some(NvmTable { path: rec.path.clone(), header: t.header, commit_word: t.commit_word, durability: t.nvm.durability(), analysis: t.analysis }))
}

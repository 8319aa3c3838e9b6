//! Opening a placement from the superblock and the devices: the one place that tells the
//! journal's kinds apart (docs/DESIGN.md, section 5). Everything else (the mount, recovery,
//! fsck, inspection) asks the placement it gets here.
//!
//! A mount opens its placement once, as the last mount left it ([`open`]); recovery asks it
//! what to recover and moves it on ([`Placement::recovered`]); then it becomes the journal's
//! ([`Opened::run`]). An offline tool opens it the same way without reaching outside the image.

use crate::ids::DevBlock;
use super::Devices;
use crate::clock::Clock;
use crate::device::Device;
use crate::format::journal::{JournalSuperblock, RemoteState};
use crate::format::superblock::{NvmRecord, RemoteRecord};
use crate::format::Superblock;
use crate::error::{FsError, FsResult};
use crate::journal::content::DataMode;
use crate::journal::placement::{LogRegion, NvmSlots, Placement, Remote, Ring};
use crate::journal::plan::DevId;
use crate::journal::transaction::Tid;
use crate::options::MountOptions;
use std::sync::{Arc, Mutex};

/// Where the superblock says the journal lives.
#[derive(Debug, Clone, Copy)]
pub enum JournalKind<'a> {
    /// A ring in the file system (`internal`) or on a device of its own (`external`).
    Ring,
    /// A journal server, with the internal ring as its fallback.
    Remote(&'a RemoteRecord),
    /// A small log in every block group.
    Manylogs,
    /// A slot table in non-volatile memory (UBJ).
    Nvm(&'a NvmRecord),
}

impl JournalKind<'_> {
    /// The journal kind of `sb`.
    pub fn of(sb: &Superblock) -> JournalKind<'_> {
        if let Some(n) = &sb.nvm {
            JournalKind::Nvm(n)
        } else if sb.manylogs() {
            JournalKind::Manylogs
        } else if let Some(r) = &sb.remote {
            JournalKind::Remote(r)
        } else {
            JournalKind::Ring
        }
    }

    /// Whether recovery reads and writes only the image's own devices, so that it can run
    /// into an in-memory overlay (not an nvm journal's memory, not a server).
    pub fn recovers_in_image(&self) -> bool {
        matches!(self, JournalKind::Ring | JournalKind::Manylogs)
    }
}

/// A placement opened, of its kind: what the mount turns into the journal's placement once
/// recovery is done ([`Opened::run`]).
enum Kinded {
    Ring(Ring),
    Remote(Remote),
    Manylogs(crate::journal::placement::Manylogs),
    Nvm(NvmSlots),
}

/// A placement opened as the last mount left it, and what the mount needs beside it.
pub struct Opened {
    placement: Kinded,
    region: LogRegion,
    /// The tid the journal continues with, at least, before recovery.
    pub floor: Tid,
    /// The connection to the journal server (a remote journal taken over for recovery).
    pub remote: Option<super::remote::Opened>,
    /// The most blocks a fast commit may span in this journal
    /// ([`crate::format::journal::JournalSuperblock::fast_commit_blocks`]).
    pub fast_commit_blocks: usize,
    /// Whether its fast commits may carry compact tags
    /// ([`crate::format::journal::JournalSuperblock::fast_commit_compact`]).
    pub fast_commit_compact: bool,
    /// Whether its fast commits may carry inode notes
    /// ([`crate::format::journal::JournalSuperblock::fast_commit_notes`]).
    pub fast_commit_notes: bool,
    /// Whether those notes may be short
    /// ([`crate::format::journal::JournalSuperblock::fast_commit_short_notes`]).
    pub fast_commit_short_notes: bool,
    /// Whether its commits may name new blocks written beside them by in-place tags: the
    /// journal has the IN_PLACE_TAGS feature and is a ring (internal or external), whose
    /// recovery reads home blocks on the devices it scans beside
    /// ([`crate::format::journal::JournalSuperblock::in_place_tags`]).
    pub in_place_tags: bool,
}

/// Writes what a new file system's journal holds after its superblock (mkfs), on `jdev` from
/// block `jbase` (the journal superblock's): a ring's first log block cleared, so that an old
/// journal's leftovers never even look plausible (or all `jblocks`, so that an image file
/// allocates the ring, with `zero_all`); the manylogs placement's log table, every log empty.
/// A remote or nvm journal keeps the internal ring as its fallback (nvm: unused), formatted
/// as a ring's; the NVM itself is formatted by `fs::mkfs::format_nvm`.
pub fn format(jdev: &dyn Device, sb: &Superblock, jbase: u64, jblocks: u64, zero_all: bool) -> Result<(), crate::device::DeviceError> {
    let bs = sb.block_size as u64;
    match JournalKind::of(sb) {
        JournalKind::Manylogs => {
            let table = crate::journal::placement::manylogs::formatted(sb.group_count, sb.log_area_blocks, sb.uuid, bs as usize);
            jdev.write_at((jbase + 1) * bs, &table)
        }
        JournalKind::Ring | JournalKind::Remote(_) | JournalKind::Nvm(_) => {
            // Zeroes in writes of at most 1 MiB.
            let count = if zero_all { jblocks - 1 } else { 1 };
            let per = ((1u64 << 20) / bs).max(1);
            let chunk = vec![0u8; (per.min(count) * bs) as usize];
            let mut done = 0;
            while done < count {
                let n = per.min(count - done);
                jdev.write_at((jbase + 1 + done) * bs, &chunk[..(n * bs) as usize])?;
                done += n;
            }
            Ok(())
        }
    }
}

/// Opens the placement of the file system `sb`, whose journal region is `region` (superblock
/// `jsb`), as the last mount left it: recovery asks it what to recover
/// ([`Placement::recovery`]), and [`Opened::run`] makes it the journal's. Opening an nvm
/// journal's memory sets `devs.nvm`; taking a remote journal over connects to its server and
/// reads its log back. `offline` (recovery of an unmounted image): nothing outside the image
/// but an nvm journal's memory is reached, and a journal whose transactions are on a server is
/// refused.
pub fn open(devs: &mut Devices, sb: &Superblock, region: LogRegion, jsb: &JournalSuperblock, opts: &MountOptions, clock: &dyn Clock, offline: bool) -> FsResult<Opened> {
    let mut floor = jsb.sequence.max(Tid::new(1));
    let mut remote = None;
    let placement = match JournalKind::of(sb) {
        JournalKind::Nvm(rec) => {
            let nvm = open_nvm(rec, opts)?;
            devs.nvm = Some(nvm.clone());
            let h = super::nvm::open_header(nvm.as_ref(), sb.uuid, sb.block_size)?;
            // Recovery's decisions come from the commit word and the table, read now.
            let t0 = clock.now_ns();
            let (word, table) = super::nvm::read_table(nvm.as_ref(), &h)?;
            let mut p = NvmSlots::recovering(h, word, &table, sb.block_count, floor, opts.read_only).map_err(|e| FsError::Corrupt(format!("{}: {e}", nvm.name())))?;
            floor = p.floor();
            p = p.read_in(clock.now_ns() - t0);
            p.faults = opts.faults.clone();
            Kinded::Nvm(p)
        }
        JournalKind::Manylogs => {
            let mut m = open_manylogs(sb, devs)?;
            floor = floor.max(m.floor());
            m.faults = opts.faults.clone();
            Kinded::Manylogs(m)
        }
        JournalKind::Remote(rec) if offline && !jsb.remote.local && !jsb.is_clean() => {
            return Err(FsError::Invalid(format!(
                "this file system's journal is on the journal server {}: mount it (okeanos mount, or the library) to recover from the server",
                rec.server
            )))
        }
        // After a clean unmount the server holds nothing (it was trimmed): read-only use needs
        // no server then.
        JournalKind::Remote(_) if !offline && !jsb.remote.local && !(opts.read_only && jsb.is_clean()) => {
            let record = remote_state_writer(devs, region, jsb);
            let o = super::remote::open(sb, jsb, opts, devs, &|| clock.now_ns(), record)?;
            let ring = Ring::new(region, JournalSuperblock { remote: RemoteState { epoch: o.epoch, ..jsb.remote }, ..jsb.clone() });
            let mut r = Remote::new(ring, o.capacity, o.fetched);
            r.faults.skip_remote_append = opts.faults.skip_remote_append;
            remote = Some(o);
            Kinded::Remote(r)
        }
        // Fell back: its ring is the journal, until the mount reaches the server again.
        JournalKind::Remote(_) if !offline && jsb.remote.local && !opts.read_only => Kinded::Remote(Remote::new(Ring::new(region, jsb.clone()), region.ring_len(), None)),
        JournalKind::Remote(_) | JournalKind::Ring => Kinded::Ring(Ring::new(region, jsb.clone())),
    };
    let in_place_tags = jsb.in_place_tags() && matches!(placement, Kinded::Ring(_));
    Ok(Opened { placement, region, floor, remote, fast_commit_blocks: jsb.fast_commit_blocks(), fast_commit_compact: jsb.fast_commit_compact(), fast_commit_notes: jsb.fast_commit_notes(), fast_commit_short_notes: jsb.fast_commit_short_notes(), in_place_tags })
}

impl Opened {
    /// The placement, for recovery to ask and move on ([`Placement::recovered`]).
    pub fn placement(&mut self) -> &mut dyn Placement {
        match &mut self.placement {
            Kinded::Ring(p) => p,
            Kinded::Remote(p) => p,
            Kinded::Manylogs(p) => p,
            Kinded::Nvm(p) => p,
        }
    }

    /// After recovery: the placement the journal runs with from `next_tid`, and the most
    /// blocks it can take at once (a remote journal's must fit its fallback ring too). A host
    /// that fell back returns to its server now if its ring is empty and the server answers.
    pub fn run(self, devs: &mut Devices, sb: &Superblock, opts: &MountOptions, next_tid: Tid) -> FsResult<(Box<dyn Placement>, u64)> {
        // Multiwrite records need the journal feature; the mount writes the journal superblock
        // (with the flag) before the first commit.
        let multiwrite = if matches!(opts.content().map_err(FsError::Invalid)?.mode, DataMode::Wasteless | DataMode::Selective) { crate::format::journal::jfeature::MULTIWRITE } else { 0 };
        let region = self.region;
        let placement: Box<dyn Placement> = match self.placement {
            Kinded::Ring(mut r) => {
                r.add_features(multiwrite);
                Box::new(r)
            }
            // Fell back, and the mount turned read-only (errors=remount-ro): the ring alone.
            Kinded::Remote(r) if r.is_local() && opts.read_only => {
                let mut ring = r.into_ring();
                ring.add_features(multiwrite);
                Box::new(ring)
            }
            Kinded::Remote(mut r) => {
                if r.is_local() && r.ring().is_empty() && r.ring().superblock().is_clean() && !opts.read_only {
                    let jsb = r.ring().superblock().clone();
                    let record = remote_state_writer(devs, region, &jsb);
                    if let Ok(o) = super::remote::reopen(sb, &jsb, opts, devs, next_tid, record) {
                        r.rejoined(o.epoch, o.capacity);
                        r.faults.skip_remote_append = opts.faults.skip_remote_append;
                    }
                }
                r.ring_mut().add_features(multiwrite);
                if !opts.read_only {
                    // A host that fell back (now or later) reconnects with this when it returns.
                    devs.reconnect = Some(super::remote::reconnector(sb, r.ring().superblock(), opts)?);
                    if devs.link.is_none() {
                        devs.link = Some(Arc::new(Mutex::new(Box::new(crate::remote::NotConnected) as Box<dyn crate::remote::Link>)));
                    }
                }
                Box::new(r)
            }
            Kinded::Manylogs(m) => Box::new(m),
            Kinded::Nvm(p) => Box::new(p),
        };
        let capacity = match JournalKind::of(sb) {
            JournalKind::Remote(_) => placement.capacity().min(region.ring_len()),
            _ => placement.capacity(),
        };
        Ok((placement, capacity))
    }
}

/// What the journal of an unmounted file system is and whether it needs recovery: one account
/// that every read-only command (`stat`, `journal dump`, `fsck`) gives alike, for every
/// placement.
#[derive(Debug, Clone, serde::Serialize)]
pub struct JournalState {
    /// `internal`, `external`, `manylogs` or `nvm`.
    pub kind: String,
    /// One line: the placement, its size, its state and the next transaction.
    pub summary: String,
    pub needs_recovery: bool,
    pub next_tid: Tid,
    /// Why the journal cannot be read, where it cannot.
    pub problem: Option<String>,
    /// A remote journal: its server and where this host stands with it.
    pub remote: Option<RemoteJournal>,
}

/// A remote journal as the journal superblock records it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RemoteJournal {
    /// The server (`host:port`, or the NATS URLs of a JetStream journal).
    pub server: String,
    /// The host's epoch with the server (a newer host fences older ones).
    pub epoch: u64,
    /// The host fell back to its internal journal after transaction `upto`.
    pub fallen_back: bool,
    pub upto: Tid,
}

impl RemoteJournal {
    /// One line for people.
    pub fn describe(&self) -> String {
        if self.fallen_back {
            format!("{} (epoch {}): fell back to the internal journal after transaction {}; returns at the next mount that reaches the server", self.server, self.epoch, self.upto)
        } else {
            format!("{} (epoch {}), the internal journal is its fallback", self.server, self.epoch)
        }
    }
}

/// Describes the journal of the file system whose superblock is `sb` (see [`JournalState`]).
pub fn journal_state(sb: &Superblock, devs: &Devices, jsb: &JournalSuperblock) -> JournalState {
    use crate::format::superblock::JournalLocation;
    let ring = |kind: &str, blocks: u64| {
        let needs = !jsb.is_clean();
        let state = if needs { format!("needs recovery from block {}, transaction {}", jsb.start, jsb.sequence) } else { format!("clean, next transaction {}", jsb.sequence) };
        JournalState { kind: kind.into(), summary: format!("{kind}, {blocks} blocks, {state}"), needs_recovery: needs, next_tid: jsb.sequence, problem: None, remote: None }
    };
    let kind = JournalKind::of(sb);
    if let JournalKind::Manylogs = kind {
        return match open_manylogs(sb, devs) {
            Ok(m) => {
                let needs = !m.recovery().is_empty();
                let kept = m.snapshots().map_or(0, |s| s.recovered_kept().len());
                let state = match (needs, kept) {
                    (true, _) => format!("needs recovery from transaction {}", m.floor()),
                    (false, 0) => format!("clean, next transaction {}", m.floor()),
                    (false, k) => format!("recovered, {k} data blocks kept in their logs, next transaction {}", m.floor()),
                };
                JournalState { kind: "manylogs".into(), summary: format!("manylogs, {} logs of {} blocks, {state}", sb.group_count, sb.log_area_blocks), needs_recovery: needs, next_tid: m.floor(), problem: None, remote: None }
            }
            Err(e) => JournalState { kind: "manylogs".into(), summary: format!("manylogs, log table unreadable: {e}"), needs_recovery: false, next_tid: Tid::ZERO, problem: Some(format!("manylogs log table: {e}")), remote: None },
        };
    }
    if let JournalKind::Nvm(n) = kind {
        // The placement over the table as it is (read-only, under a shared lock): recovery has
        // something to do when it names frozen copies, tombstones, entries of a commit that did
        // not complete, or torn entries. An NVM that cannot be opened (in use by a mount, or
        // not on this machine) is described, not judged; a damaged header or table is a problem.
        return match super::nvm::inspect_table(&n.path, sb.uuid, sb.block_size, sb.block_count) {
            Ok(t) => {
                let (needs, next) = (t.analysis.needs_recovery(), jsb.sequence.max(Tid::new(1)).max(t.analysis.next_tid.max(Tid::new(1))));
                let state = if needs { format!("needs recovery, next transaction {next}") } else { format!("clean, next transaction {next}") };
                JournalState { kind: "nvm".into(), summary: format!("nvm, in {}, {state}", n.path), needs_recovery: needs, next_tid: next, problem: None, remote: None }
            }
            Err((e, damaged)) => JournalState {
                kind: "nvm".into(),
                summary: format!("nvm, in {} (its table not read: {e})", n.path),
                needs_recovery: false,
                next_tid: jsb.sequence,
                problem: damaged.then(|| format!("nvm journal: {e}")),
                remote: None,
            },
        };
    }
    let mut state = match sb.journal {
        JournalLocation::Internal { blocks, .. } => ring("internal", blocks),
        JournalLocation::External { blocks, .. } => ring("external", blocks),
    };
    if let JournalKind::Remote(r) = kind {
        state.remote = Some(RemoteJournal { server: r.server.clone(), epoch: jsb.remote.epoch, fallen_back: jsb.remote.local, upto: jsb.remote.upto });
    }
    state
}

/// The NVM region an nvm journal's superblock record names, or the one the mount gives; timed
/// as persistent memory when the mount emulates its disks (`device_model=`).
fn open_nvm(rec: &NvmRecord, opts: &MountOptions) -> FsResult<Arc<dyn crate::nvm::Nvm>> {
    let nvm: Arc<dyn crate::nvm::Nvm> = match (&opts.nvm, &opts.nvm_path) {
        (Some(h), _) => h.0.clone(),
        (None, p) => {
            let path = p.clone().unwrap_or_else(|| rec.path.clone().into());
            Arc::new(crate::nvm::MappedNvm::open(&path, !opts.read_only).map_err(|e| FsError::Io(format!("the NVM journal {}: {e} (give another path with nvm=)", path.display())))?)
        }
    };
    Ok(match &opts.device_model {
        Some(_) => Arc::new(crate::nvm::TimedNvm::new(nvm, crate::models::preset("nvm").map_err(FsError::Invalid)?)),
        None => nvm,
    })
}

/// The manylogs placement of `sb` from the newest valid copy of its log table.
pub fn open_manylogs(sb: &Superblock, devs: &Devices) -> FsResult<crate::journal::placement::Manylogs> {
    use crate::journal::placement::manylogs::{read_table, refuse_fallback, sweep_after_fallback, Geometry};
    let geo = Geometry::of(sb);
    let mut read = |b| devs.read_block(DevId::Fs, DevBlock::new(b));
    let table = read_table(&geo, &mut read)?;
    let swept = sweep_after_fallback(&geo, &table, sb.mkfs_time_ns, &mut read)?;
    if let Some(why) = refuse_fallback(&table, swept) {
        return Err(FsError::Corrupt(why));
    }
    Ok(crate::journal::placement::Manylogs::new(geo, table).with_swept(swept))
}

/// Writes the local journal superblock with another remote state, durably (before the step
/// on the server that depends on it). Used only while mounting, before the journal exists.
pub fn remote_state_writer(devs: &Devices, region: LogRegion, jsb: &JournalSuperblock) -> impl FnMut(RemoteState) -> FsResult<()> {
    let log_dev: Arc<dyn Device> = if region.dev() == DevId::Journal { devs.journal.clone().expect("checked by open_journal") } else { devs.fs.clone() };
    let at = region.device_block(region.superblock()).byte(jsb.block_size as u64);
    let base = jsb.clone();
    move |state| {
        let mut b = vec![0u8; base.block_size as usize];
        JournalSuperblock { remote: state, ..base.clone() }.encode(&mut b);
        log_dev.write_at(at, &b)?;
        log_dev.flush()?;
        Ok(())
    }
}

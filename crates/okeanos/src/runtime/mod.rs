//! The real runtime: executes the journal's I/O plans on devices and drives recovery's passes
//! with device reads. This and the engine's journal thread are the only places where the
//! journaling core's decisions meet real I/O.

pub mod nvm;
pub mod open;
pub mod placement;
pub mod remote;

use crate::ids::{DevBlock, HomeBlock, LogPos, Tid};
use crate::device::{Device, DeviceError, Gather};
use crate::remote::client::RemoteError;
use crate::format::journal as jf;
use crate::journal::placement::{LogRegion, Placement, Recovery, TableReplay};
use crate::journal::plan::{DevId, IoCopy, IoPlan, IoWrite, RemoteOp};
use crate::format::superblock::{state, ErrorRecord, Superblock};
use crate::journal::recovery::{self, Damage, FsBounds, Probe, ReplayBase, ReplayBlock, Scan};
use crate::journal::revoke::RevokeTable;
use crate::stats::{RecoveryReport, Stats};
use std::sync::Arc;

/// The devices of one file system.
#[derive(Clone)]
pub struct Devices {
    pub fs: Arc<dyn Device>,
    /// An external journal device, if any.
    pub journal: Option<Arc<dyn Device>>,
    pub block_size: usize,
    /// The connection to the journal server of a remote journal.
    pub link: Option<Arc<std::sync::Mutex<Box<dyn crate::remote::Link>>>>,
    /// Connects anew with a given epoch (a remote journal's return after a fallback).
    pub reconnect: Option<Arc<crate::remote::ReconnectFn>>,
    /// A remote journal's log read back for recovery (in memory).
    pub remote_log: Option<Arc<dyn Device>>,
    /// A read-only mount recovers a remote journal in memory: nothing is sent to the server.
    pub remote_read_only: bool,
    /// The non-volatile memory of an nvm journal.
    pub nvm: Option<Arc<dyn crate::nvm::Nvm>>,
    /// `short_writes=`: commit blocks are written as the sectors that hold them on devices
    /// that take short writes: always (`on`), never (`off`), or where the device does not
    /// seek (None, `auto`: a spinning disk pays a revolution for the hole a short write leaves
    /// before the next commit).
    pub short_writes: Option<bool>,
}

impl Devices {
    pub fn new(fs: Arc<dyn Device>, journal: Option<Arc<dyn Device>>, block_size: usize) -> Self {
        Devices { fs, journal, block_size, link: None, reconnect: None, remote_log: None, remote_read_only: false, nvm: None, short_writes: None }
    }

    /// Whether commit blocks are written short on device `id` (see [`Devices::short_writes`]).
    pub fn writes_short(&self, id: DevId) -> bool {
        writes_short(self.short_writes, self.get(id))
    }

    pub fn get(&self, id: DevId) -> &dyn Device {
        match (id, &self.journal, &self.remote_log) {
            (DevId::Journal, Some(j), _) => j.as_ref(),
            (DevId::RemoteLog, _, Some(r)) => r.as_ref(),
            (DevId::RemoteLog, _, None) => panic!("a remote log is read only after it was fetched"),
            _ => self.fs.as_ref(),
        }
    }

    /// Carries out a stage's operations on the journal server: every append is sent before the
    /// first acknowledgement is awaited (several in flight), then trims.
    fn remote(&self, ops: &[RemoteOp], stats: &Stats) -> Result<(), DeviceError> {
        if ops.is_empty() || self.remote_read_only {
            return Ok(());
        }
        let link = self.link.as_ref().ok_or_else(|| DeviceError::Remote(RemoteError::Network { addr: "(none)".into(), message: "not connected".into() }))?;
        let mut c = link.lock().unwrap_or_else(|e| e.into_inner());
        for op in ops {
            if let RemoteOp::Reconnect { epoch } = op {
                let connect = self.reconnect.as_ref().ok_or_else(|| DeviceError::Remote(RemoteError::Network { addr: "(none)".into(), message: "no way to reconnect".into() }))?;
                *c = connect(*epoch).map_err(DeviceError::Remote)?;
            }
        }
        for op in ops {
            if let RemoteOp::Fence { epoch } = op {
                c.fence(*epoch).map_err(DeviceError::Remote)?;
            }
        }
        let bs = self.block_size as u32;
        let mut appends = 0;
        for op in ops {
            if let RemoteOp::Append { tid, blocks } = op {
                let mut data = Vec::with_capacity(blocks.len() * self.block_size);
                for (b, kind) in blocks {
                    data.extend_from_slice(b);
                    // Journal bytes wherever the journal is: counted as sent.
                    stats.on_write(*kind, b.len());
                }
                stats.on_remote(data.len());
                c.send_append(tid.get(), bs, data).map_err(DeviceError::Remote)?;
                appends += 1;
            }
        }
        for _ in 0..appends {
            c.wait_ack().map_err(DeviceError::Remote)?;
        }
        for op in ops {
            if let RemoteOp::Trim { upto } = op {
                c.trim(upto.get()).map_err(DeviceError::Remote)?;
            }
        }
        Ok(())
    }

    pub(crate) fn read_block(&self, id: DevId, block: DevBlock) -> Result<Vec<u8>, DeviceError> {
        let mut b = vec![0u8; self.block_size];
        self.get(id).read_at(block.byte(self.block_size as u64), &mut b)?;
        Ok(b)
    }
}

/// Largest run of contiguous blocks issued as one device write.
const MAX_RUN_BLOCKS: usize = 256;

/// Executes a plan stage by stage: the writes of a stage, then its flushes (each distinct
/// device once). The first error stops the plan. Within a stage, writes are unordered until
/// its flush (the crash model allows any subset to land), so they are sorted by device and
/// block, each run of contiguous blocks becomes one write — a commit's journal blocks one
/// sequential I/O instead of one per block — and a device's runs are submitted together
/// ([`Device::write_batch`]: scattered ordered data and checkpoint blocks in flight at once
/// on a block device, not one pwrite at a time).
pub fn execute(plan: &IoPlan, devs: &Devices, stats: &Stats) -> Result<(), DeviceError> {
    execute_yielding(plan, devs, stats, &mut || {})
}

/// [`execute`], calling `between` before every stage after the first: a checkpoint beside
/// commits lets the commit in flight have the device between its slices (as Linux throttles
/// background writeback while synchronous writes wait).
pub fn execute_yielding(plan: &IoPlan, devs: &Devices, stats: &Stats, between: &mut dyn FnMut()) -> Result<(), DeviceError> {
    run(plan, devs, stats, between, None, false)
}

/// [`execute`] without the last stage's flush, for a step whose flush a flusher thread issues
/// once every write of the plan completed (an fdatasync step on the checkpoint lane).
pub fn execute_without_last_flush(plan: &IoPlan, devs: &Devices, stats: &Stats) -> Result<(), DeviceError> {
    run(plan, devs, stats, &mut || {}, None, true)
}

/// [`execute`] for the commit lane: its time, on `now` (the mount's clock), is counted in
/// `stats` as the lane's writes and flushes ([`LaneTimes`](crate::stats::LaneTimes)). With
/// `skip_last_flush`, the last stage's flush is left out (a pipelined commit: the caller issues
/// it with [`flush`] once the lane is free, after every write of the plan completed).
pub fn execute_lane(plan: &IoPlan, devs: &Devices, stats: &Stats, now: &dyn Fn() -> u64, skip_last_flush: bool) -> Result<(), DeviceError> {
    let t0 = now();
    let mut flush_ns = 0;
    let res = run(plan, devs, stats, &mut || {}, Some((now, &mut flush_ns)), skip_last_flush);
    let total = now().saturating_sub(t0);
    stats.on_lane(crate::stats::LanePhase::Flush, flush_ns.min(total));
    stats.on_lane(crate::stats::LanePhase::Write, total.saturating_sub(flush_ns));
    res
}

/// Flushes each distinct device of `ids` once: every write completed before the call is
/// durable when it returns.
pub fn flush(ids: &[DevId], devs: &Devices) -> Result<(), DeviceError> {
    let mut flushed: Vec<*const ()> = Vec::new();
    for &d in ids {
        let dev = devs.get(d);
        let key = dev as *const dyn Device as *const ();
        if !flushed.contains(&key) {
            dev.flush()?;
            flushed.push(key);
        }
    }
    Ok(())
}

fn run(plan: &IoPlan, devs: &Devices, stats: &Stats, between: &mut dyn FnMut(), mut timed: Option<(&dyn Fn() -> u64, &mut u64)>, skip_last_flush: bool) -> Result<(), DeviceError> {
    let bs = devs.block_size as u64;
    for (i, stage) in plan.stages.iter().enumerate() {
        if i > 0 {
            between();
        }
        let copied;
        let writes: &[IoWrite] = if stage.copies.is_empty() {
            &stage.writes
        } else {
            copied = read_copies(&stage.copies, devs, stats)?.into_iter().chain(stage.writes.iter().cloned()).collect::<Vec<_>>();
            &copied
        };
        let mut order: Vec<usize> = (0..writes.len()).collect();
        // Stable: two writes of one block keep their order, the later one landing last.
        order.sort_by_key(|&i| (writes[i].dev as u8, writes[i].block));
        // Runs: (first index into `order`, end), and the bytes of each run of several blocks.
        let mut runs: Vec<(usize, usize)> = Vec::new();
        let mut k = 0;
        while k < order.len() {
            let first = &writes[order[k]];
            let mut end = k + 1;
            while end < order.len() && end - k < MAX_RUN_BLOCKS {
                let (prev, next) = (&writes[order[end - 1]], &writes[order[end]]);
                if next.dev != first.dev || next.block.get() != prev.block.get() + 1 {
                    break;
                }
                end += 1;
            }
            for &i in &order[k..end] {
                assert_eq!(writes[i].data.len() as u64, bs, "plans write whole blocks");
            }
            runs.push((k, end));
            k = end;
        }
        // Bytes written of each write: whole blocks, but a commit block that ends its run goes
        // to a device that takes short writes as only the sectors that hold it.
        let mut lens: Vec<usize> = writes.iter().map(|w| w.data.len()).collect();
        // Each run's blocks as pieces of one write, in order (not joined: the device copies
        // them once if it must, docs/BENCHMARKS.md, "Runs written as pieces").
        let mut pieces: Vec<&[u8]> = Vec::with_capacity(order.len());
        let mut spans: Vec<(usize, usize)> = Vec::with_capacity(runs.len());
        for &(k, end) in &runs {
            let from = pieces.len();
            pieces.extend(order[k..end].iter().map(|&i| writes[i].data.as_slice()));
            let last = order[end - 1];
            let keep = writes[last].written_len();
            if keep < lens[last] && devs.writes_short(writes[order[k]].dev) {
                let p = pieces.last_mut().expect("a run has a block");
                *p = &p[..keep];
                lens[last] = keep;
            }
            spans.push((from, pieces.len()));
        }
        // Two writes of one block in one stage must land in order: they never share a batch.
        let mut batch: Vec<Gather<'_>> = Vec::new();
        let mut batch_dev = None;
        let mut last_block = None;
        for (&(k, end), &(from, to)) in runs.iter().zip(&spans) {
            let first = &writes[order[k]];
            let repeat = batch_dev == Some(first.dev) && last_block == Some(first.block);
            if batch_dev != Some(first.dev) || repeat {
                if let Some(d) = batch_dev {
                    devs.get(d).write_batch(&batch)?;
                }
                batch.clear();
                batch_dev = Some(first.dev);
            }
            batch.push(Gather { offset: first.block.byte(bs), pieces: &pieces[from..to] });
            last_block = Some(writes[order[end - 1]].block);
        }
        if let Some(d) = batch_dev {
            devs.get(d).write_batch(&batch)?;
        }
        for (w, len) in writes.iter().zip(lens) {
            stats.on_write(w.kind, len);
        }
        devs.remote(&stage.remote, stats)?;
        if !stage.nvm.is_empty() {
            nvm::execute(devs, &stage.nvm, stats)?;
        }
        if skip_last_flush && i + 1 == plan.stages.len() {
            break;
        }
        let t0 = timed.as_ref().map(|(now, _)| now());
        flush(&stage.flush, devs)?;
        if let (Some(t0), Some((now, flush_ns))) = (t0, timed.as_mut()) {
            **flush_ns += now().saturating_sub(t0);
        }
    }
    Ok(())
}

/// Whether commit blocks are written short on `d` under `short_writes=` `policy` (None: auto).
/// The simulator asks it too, to charge its disks what the runtime wrote.
pub fn writes_short(policy: Option<bool>, d: &dyn Device) -> bool {
    match policy {
        Some(false) => false,
        Some(true) => d.short_writes(),
        None => d.short_writes() && d.seeks() != Some(true),
    }
}

/// Reads the sources of a stage's copies (by [`copy_reads`]: sorted, copies near each other on
/// a device in one read), checks each against its hash and returns the writes that put them
/// at their destinations, in the order of their sources (two copies to one block: the later
/// source lands last).
fn read_copies(copies: &[IoCopy], devs: &Devices, stats: &Stats) -> Result<Vec<IoWrite>, DeviceError> {
    let bs = devs.block_size as u64;
    let at: Vec<Option<(DevId, u64)>> = copies.iter().map(|c| Some((c.from.0, c.from.1.get()))).collect();
    let read = read_places(devs, &at)?;
    stats.on_log_read(read.len() as u64);
    read.into_iter()
        .map(|(i, data)| {
            let c = &copies[i];
            if !c.check.matches(&data) {
                return Err(DeviceError::Io {
                    device: format!("{:?}", c.from.0),
                    op: "read",
                    offset: c.from.1.byte(bs),
                    message: format!("the logged copy of block {} does not match its journal checksum", c.to.1),
                });
            }
            Ok(IoWrite { dev: c.to.0, block: c.to.1, data: Arc::new(data), kind: c.kind })
        })
        .collect()
}

/// The first of `checks` (blocks written in place, with their tags' hashes) whose block at
/// home does not match, if any.
fn unwritten_in_place(devs: &Devices, checks: &[(crate::ids::HomeBlock, u32)]) -> Result<Option<crate::ids::HomeBlock>, DeviceError> {
    let bs = devs.block_size;
    let mut buf = vec![0u8; bs];
    for &(b, hash) in checks {
        devs.fs.read_at(DevBlock::home(b).byte(bs as u64), &mut buf)?;
        if crate::format::journal::data_hash(b, 0, &buf) != hash {
            return Ok(Some(b));
        }
    }
    Ok(None)
}

/// Log blocks one read of the scan and probe passes fetches (1 MiB of 4 KiB blocks).
const READ_AHEAD_BLOCKS: u64 = 256;

/// Pass 1 over one log: the scan from where `start` says, and the probe after it if the scan
/// stopped on a failure.
pub fn scan_log(log: &mut LogReader, start: &crate::journal::placement::RecoveryStart, fs: FsBounds, block_size: usize, faults: &crate::faults::Faults) -> Result<(Scan, Option<Probe>), DeviceError> {
    let mut scan = Scan::new(start, fs);
    scan.verify_fast_commits = !faults.fast_commit_unchecked;
    while let Some(pos) = scan.next_read() {
        scan.feed(log.read(pos)?);
    }
    let mut probe = Probe::after(&scan, block_size);
    if let Some(p) = probe.as_mut() {
        while let Some(pos) = p.next_read() {
            p.feed(log.read(pos)?);
        }
    }
    Ok((scan, probe))
}

/// Reads log blocks for the passes that walk the log in order (scan, probe, revoke): one device
/// read per window of `READ_AHEAD_BLOCKS` instead of one per block.
pub struct LogReader<'a> {
    devs: &'a Devices,
    region: LogRegion,
    buf: Vec<u8>,
    /// Log position of the first buffered block, and how many are buffered.
    first: u64,
    count: u64,
}

impl<'a> LogReader<'a> {
    pub fn new(devs: &'a Devices, region: LogRegion) -> Self {
        LogReader { devs, region, buf: Vec::new(), first: 0, count: 0 }
    }

    /// The block at log position `pos`.
    pub fn read(&mut self, at: LogPos) -> Result<&[u8], DeviceError> {
        let bs = self.devs.block_size;
        let pos = at.get();
        if pos < self.first || pos >= self.first + self.count {
            // The window never wraps: it ends at the end of the journal.
            let n = READ_AHEAD_BLOCKS.min(self.region.total - pos);
            self.buf.resize(n as usize * bs, 0);
            self.devs.get(self.region.dev()).read_at(self.region.device_block(at).byte(bs as u64), &mut self.buf)?;
            self.first = pos;
            self.count = n;
        }
        let at = (pos - self.first) as usize * bs;
        Ok(&self.buf[at..at + bs])
    }
}

/// Why recovery failed.
#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    #[error("journal recovery: {0}")]
    Device(#[from] DeviceError),
    #[error("journal recovery: corrupt revoke block or superblock: {0}")]
    Format(#[from] crate::format::FormatError),
    /// A copy that must be replayed fails its check (an nvm slot's data).
    #[error("journal recovery: {0}")]
    Damaged(String),
}

/// Recovers what the placement says needs it ([`Placement::recovery`]) and marks it recovered.
/// Returns the report and the tid for the next transaction, or None when nothing needed
/// recovery. Safe to run again after a crash at any point inside it.
pub fn recover(
    devs: &Devices,
    placement: &mut dyn Placement,
    fs: FsBounds,
    stats: &Stats,
    now_ns: &dyn Fn() -> u64,
    wall_ns: i64,
    faults: &crate::faults::Faults,
) -> Result<Option<(RecoveryReport, Tid)>, RecoveryError> {
    match placement.recovery() {
        Recovery::Logs(starts) if starts.is_empty() => Ok(None),
        Recovery::Logs(starts) => recover_logs(devs, placement, starts, fs, stats, now_ns, wall_ns, faults),
        Recovery::Table(table) => recover_table(devs, placement, table, stats, now_ns),
    }
}

/// A table's recovery (nvm): the copies it decided are written home and flushed, then its
/// recovered stage marks the table empty. The table was read when the placement was opened
/// (`read_ns` of the report's scan time).
fn recover_table(devs: &Devices, placement: &mut dyn Placement, t: TableReplay, stats: &Stats, now_ns: &dyn Fn() -> u64) -> Result<Option<(RecoveryReport, Tid)>, RecoveryError> {
    let t1 = now_ns();
    let copies: Vec<ReplayBlock> = t
        .copies
        .iter()
        .map(|c| ReplayBlock { fs_block: c.block, base: ReplayBase::Nvm { slot: c.slot, at: c.at, crc: c.crc }, patches: Vec::new(), kind: crate::journal::plan::BlockKind::FinalMeta })
        .collect();
    replay(devs, &copies, stats, &Default::default())?;
    let mut finish = IoPlan::default();
    placement.recovered_stage(t.next_tid).push_to(&mut finish);
    execute(&finish, devs, stats)?;
    placement.recovered(t.next_tid, &[]);
    let t2 = now_ns();
    Ok(t.report.then(|| {
        let report = RecoveryReport {
            transactions: 0,
            first_tid: Tid::ZERO,
            last_tid: t.last_tid,
            blocks_scanned: 0,
            revoke_records: t.tombstones,
            blocks_replayed: copies.len() as u64,
            end_reason: t.summary.clone(),
            damage: None,
            blocks_probed: 0,
            next_tid: t.next_tid,
            scan_ns: t.read_ns,
            revoke_ns: 0,
            replay_ns: t2 - t1,
            nvm_slots_scanned: t.slots_scanned,
        };
        (report, t.next_tid)
    }))
}

/// The three passes of recovery over the placement's logs (scan, revokes, replay), then its
/// recovered stage.
fn recover_logs(
    devs: &Devices,
    placement: &mut dyn Placement,
    starts: Vec<crate::journal::placement::RecoveryStart>,
    fs: FsBounds,
    stats: &Stats,
    now_ns: &dyn Fn() -> u64,
    wall_ns: i64,
    faults: &crate::faults::Faults,
) -> Result<Option<(RecoveryReport, Tid)>, RecoveryError> {
    let t0 = now_ns();
    let (mut txs, mut damage, mut next_tid) = (Vec::new(), None, Tid::ZERO);
    let (mut scanned, mut probed, mut end_reason, mut first_tid) = (0, 0, String::new(), None);
    let mut readers: Vec<LogReader> = starts.iter().map(|s| LogReader::new(devs, s.region)).collect();
    let interleaved = starts.iter().any(|s| s.interleaved.is_some());
    let mapped = placement.snapshots().map_or_else(Vec::new, |s| s.recovery_map());
    let mut log_damage: Vec<Damage> = Vec::new();
    for (start, log) in starts.iter().zip(readers.iter_mut()) {
        next_tid = next_tid.max(start.tid_bound);
        // Consecutive logs form one sequence: after damage, later logs build on what was
        // lost and are not scanned (only their tid bounds count). Interleaved logs are all
        // scanned, and merged below.
        if damage.is_some() && !interleaved {
            continue;
        }
        let (mut scan, probe) = scan_log(log, start, fs, devs.block_size, faults)?;
        next_tid = next_tid.max(recovery::next_tid(&scan, probe.as_ref(), start));
        scanned += scan.blocks_read;
        probed += probe.as_ref().map_or(0, |p| p.blocks_read);
        first_tid.get_or_insert(scan.first_tid);
        end_reason = scan.end_reason.clone();
        let found = probe.as_ref().and_then(|p| p.damage.clone());
        match start.interleaved {
            None => damage = found,
            Some(rec) => log_damage.extend(found.into_iter().chain(recovery::short_of_table(start, rec, &scan))),
        }
        txs.append(&mut scan.txs);
    }
    if interleaved {
        let floor = starts[0].interleaved.map_or(starts[0].tid, |i| i.floor);
        let (kept, d) = recovery::merge_interleaved(txs, floor, log_damage, starts[0].interleaved.map_or(Tid::ZERO, |i| i.swept));
        txs = kept;
        damage = d;
        first_tid = Some(floor);
        end_reason = format!("{} logs scanned from their snapshot positions ({scanned} blocks), {} transactions from tid {floor}, {} blocks from the map", starts.len(), txs.len(), mapped.len());
    }
    // The newest transaction's in-place blocks (docs/FORMAT.md, "In-place tags"): written
    // beside its commit under one flush, so a crash before that flush completed may have kept
    // the commit and lost a block. Only the newest can be so torn (a later commit's writes
    // wait for the flush; after damage, later commits show it completed).
    if damage.is_none() && !faults.in_place_unchecked {
        if let Some(last) = txs.last() {
            if let Some(b) = unwritten_in_place(devs, &recovery::in_place_checks(last))? {
                end_reason.push_str(&format!("; transaction {} not replayed: its new block {b}, written in place beside its commit, does not match its tag (the crash came before the commit's flush completed)", last.tid));
                txs.pop();
            }
        }
    }
    let t1 = now_ns();
    let mut table = RevokeTable::default();
    for (region, pos, tid) in recovery::revoke_reads(&txs) {
        let log = readers.iter_mut().find(|r| r.region == region).expect("every transaction comes from one of the logs");
        recovery::revoke_feed(&mut table, tid, log.read(pos)?)?;
    }
    let t2 = now_ns();
    let (copies, kept) = recovery::with_map(recovery::replay_plan(&txs, &table), &mapped, &table);
    if !mapped.is_empty() {
        end_reason.push_str(&format!(", {} of them kept logged", kept.len()));
    }
    let bad = replay(devs, &copies, stats, faults)?;
    if !bad.is_empty() && damage.is_none() {
        // A mapped block that does not match its tag: the file system keeps its older version
        // at home, and the mount says so (ERRORS), as for any damaged log.
        let (b, at) = bad[0];
        damage = Some(recovery::Damage {
            tid: Tid::ZERO,
            pos: None,
            reason: format!("{} mapped block(s) fail their journal checksum, first block {b} at device block {at}", bad.len()),
            following: 0,
            following_tids: (Tid::ZERO, Tid::ZERO),
        });
    }
    if let Some(d) = &damage {
        // Durable before the journal is marked clean: a crash in between finds the same
        // damage again, and never a clean journal without the error state.
        mark_errors(devs, d, wall_ns)?;
    }
    let mut finish = IoPlan::default();
    crate::journal::placement::recovered_keeping(placement, next_tid, &kept).push_to(&mut finish);
    execute(&finish, devs, stats)?;
    placement.recovered(next_tid, &kept);
    let t3 = now_ns();
    let report = RecoveryReport {
        transactions: txs.len() as u64,
        first_tid: first_tid.unwrap_or(Tid::ZERO),
        last_tid: txs.last().map_or(first_tid.unwrap_or(Tid::new(1)).saturating_sub(1), |t| t.tid),
        blocks_scanned: scanned,
        revoke_records: table.len() as u64,
        blocks_replayed: copies.len() as u64,
        end_reason,
        blocks_probed: probed,
        damage,
        next_tid,
        scan_ns: t1 - t0,
        revoke_ns: t2 - t1,
        replay_ns: t3 - t2,
        nvm_slots_scanned: 0,
    };
    Ok(Some((report, next_tid)))
}

/// Sets the ERRORS state and the error record in the superblock, durably.
fn mark_errors(devs: &Devices, damage: &Damage, wall_ns: i64) -> Result<(), RecoveryError> {
    let mut b = devs.read_block(DevId::Fs, DevBlock::new(0))?;
    let mut sb = Superblock::decode(&b)?;
    sb.state |= state::ERRORS;
    sb.error = ErrorRecord { tid: damage.tid, following: damage.following, time_ns: wall_ns };
    sb.encode(&mut b);
    devs.fs.write_at(0, &b)?;
    devs.fs.flush()?;
    Ok(())
}

/// The maximal ranges of `0..n` whose every index satisfies `keep`.
fn spans(n: usize, keep: impl Fn(usize) -> bool) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut k = 0;
    while k < n {
        if !keep(k) {
            k += 1;
            continue;
        }
        let start = k;
        while k < n && keep(k) {
            k += 1;
        }
        out.push(start..k);
    }
    out
}

/// Replay blocks whose logged copies are read ahead together (16 MiB of copies in memory).
const REPLAY_CHUNK_BLOCKS: usize = 4096;

/// Logged copies at most this many blocks apart on their device are read in one request, the
/// blocks between them read and dropped: 64 KiB more to read costs less than another request
/// on a disk that seeks, and little on one that does not.
const COPY_GAP_BLOCKS: u64 = 16;

/// One read of logged copies: `count` blocks of `dev` from `first`, holding the copies of the
/// replay blocks `(index, block offset in the read)`.
#[derive(Debug, PartialEq, Eq)]
struct CopyRead {
    dev: DevId,
    first: u64,
    count: u64,
    copies: Vec<(usize, u64)>,
}

/// The reads that fetch logged copies at `at` (`(device, block)` by replay index; `None` for a
/// block whose base is not a logged copy): sorted by place, copies at most
/// [`COPY_GAP_BLOCKS`] apart joined, no read longer than [`MAX_RUN_BLOCKS`].
fn copy_reads(at: &[Option<(DevId, u64)>]) -> Vec<CopyRead> {
    let mut order: Vec<(DevId, u64, usize)> = at.iter().enumerate().filter_map(|(i, p)| p.map(|(d, b)| (d, b, i))).collect();
    order.sort_unstable_by_key(|&(d, b, i)| (d, b, i));
    let mut out: Vec<CopyRead> = Vec::new();
    for (dev, block, i) in order {
        if let Some(r) = out.last_mut() {
            let last = r.first + r.count - 1;
            if r.dev == dev && block - last <= COPY_GAP_BLOCKS && block - r.first < MAX_RUN_BLOCKS as u64 {
                r.count = block - r.first + 1;
                r.copies.push((i, block - r.first));
                continue;
            }
        }
        out.push(CopyRead { dev, first: block, count: 1, copies: vec![(i, 0)] });
    }
    out
}

/// Reads the blocks at `at` (`(device, block)` by index; `None`: nothing to read there) by
/// [`copy_reads`], and returns each with its index, in the order of their places.
fn read_places(devs: &Devices, at: &[Option<(DevId, u64)>]) -> Result<Vec<(usize, Vec<u8>)>, DeviceError> {
    let bs = devs.block_size;
    let mut out = Vec::with_capacity(at.iter().flatten().count());
    for read in copy_reads(at) {
        let mut buf = vec![0u8; read.count as usize * bs];
        devs.get(read.dev).read_at(DevBlock::new(read.first).byte(bs as u64), &mut buf)?;
        for (i, off) in read.copies {
            let o = off as usize * bs;
            out.push((i, buf[o..o + bs].to_vec()));
        }
    }
    Ok(out)
}

/// Reads the logged copies of `blocks` (journal copies and manylogs' mapped ones), by
/// [`copy_reads`]: a transaction's copies lie together in the log in whatever order their
/// homes are, so read by home they were one request each. Unchecked: each base checks its own.
fn read_logged_copies(devs: &Devices, blocks: &[ReplayBlock]) -> Result<Vec<Option<Vec<u8>>>, DeviceError> {
    let at: Vec<Option<(DevId, u64)>> = blocks
        .iter()
        .map(|r| match r.base {
            ReplayBase::Journal { dev, block, .. } => Some((dev, block.get())),
            ReplayBase::Mapped { block, .. } => Some((DevId::Fs, block.get())),
            _ => None,
        })
        .collect();
    let mut out = vec![None; blocks.len()];
    for (i, data) in read_places(devs, &at)? {
        out[i] = Some(data);
    }
    Ok(out)
}

/// Writes the replayed blocks home. Returns the mapped blocks (and where they were) that
/// failed their check and were left as home has them.
fn replay(devs: &Devices, blocks: &[ReplayBlock], stats: &Stats, faults: &crate::faults::Faults) -> Result<Vec<(HomeBlock, DevBlock)>, RecoveryError> {
    let bs = devs.block_size;
    let mut bad = Vec::new();
    // The plan is in block order: a run of blocks adjacent at home is read (the bases that
    // are at home) and written back as one request each, not one request a block, so that
    // records patching a table's consecutive blocks cost one read and one write of the run
    // where they cost a seek each (docs/JOURNALING.md, "Replay of records").
    // Logged copies are read ahead a chunk of the plan at a time, in the order they lie in the
    // log, not in the plan's home order (docs/JOURNALING.md, "Replay of records").
    for chunk in blocks.chunks(REPLAY_CHUNK_BLOCKS) {
        let mut logged = read_logged_copies(devs, chunk)?;
        let mut i = 0;
        while i < chunk.len() {
            let mut j = i + 1;
            while j < chunk.len() && j - i < MAX_RUN_BLOCKS && chunk[j].fs_block.get() == chunk[j - 1].fs_block.get() + 1 {
                j += 1;
            }
            let run = &chunk[i..j];
            let mut home = vec![None; run.len()];
            for span in spans(run.len(), |k| matches!(run[k].base, ReplayBase::Disk)) {
                let mut buf = vec![0u8; span.len() * bs];
                devs.fs.read_at(DevBlock::home(run[span.start].fs_block).byte(bs as u64), &mut buf)?;
                for (n, block) in buf.chunks_exact(bs).enumerate() {
                    home[span.start + n] = Some(block.to_vec());
                }
            }
            let mut out: Vec<Option<Vec<u8>>> = Vec::with_capacity(run.len());
            for ((r, at_home), copy) in run.iter().zip(home).zip(&mut logged[i..j]) {
                let mut b = match r.base {
                    ReplayBase::Mapped { block, hash } => {
                        let b = copy.take().expect("read ahead with its chunk");
                        if jf::data_hash(r.fs_block, 0, &b) != hash {
                            bad.push((r.fs_block, block));
                            out.push(None);
                            continue;
                        }
                        b
                    }
                    ReplayBase::Journal { escaped, .. } => {
                        let mut b = copy.take().expect("read ahead with its chunk");
                        if escaped {
                            jf::unescape(&mut b);
                        }
                        b
                    }
                    ReplayBase::Nvm { slot, at, crc } => {
                        let nvm = devs.nvm.as_ref().ok_or_else(|| RecoveryError::Damaged("the journal's copies are in NVM, and this mount has none".into()))?;
                        let mut b = vec![0u8; bs];
                        nvm.load(at, &mut b)?;
                        if crate::format::nvm::data_crc(r.fs_block, &b) != crc {
                            return Err(RecoveryError::Damaged(format!(
                                "{}: slot {slot} holds the newest committed copy of block {} but its data fails its checksum (damaged NVM); refusing to mount rather than lose it silently",
                                nvm.name(),
                                r.fs_block
                            )));
                        }
                        b
                    }
                    ReplayBase::Disk => at_home.expect("read with its run"),
                    ReplayBase::Zero => vec![0u8; bs],
                };
                r.apply_patches(&mut b, faults.note_stale_crc);
                out.push(Some(b));
            }
            // Written back in runs of the blocks replayed (a block whose mapped copy failed its
            // hash is left as it is, and splits the run).
            for span in spans(run.len(), |k| out[k].is_some()) {
                let mut buf = Vec::with_capacity(span.len() * bs);
                for (r, b) in run[span.clone()].iter().zip(&out[span.clone()]) {
                    buf.extend_from_slice(b.as_deref().expect("replayed"));
                    stats.on_write(r.kind, bs);
                }
                devs.fs.write_at(DevBlock::home(run[span.start].fs_block).byte(bs as u64), &buf)?;
            }
            i = j;
        }
    }
    if !blocks.is_empty() {
        devs.fs.flush()?;
    }
    Ok(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logged_copies_near_each_other_are_one_read() {
        let j = |b| Some((DevId::Journal, b));
        // Home order (the plan's) against log order: 40, 10, 12, a block at home, 28, a mapped
        // copy on the file-system device, 44.
        let at = [j(40), j(10), j(12), None, j(28), Some((DevId::Fs, 11)), j(44)];
        let reads = copy_reads(&at);
        assert_eq!(
            reads,
            vec![
                CopyRead { dev: DevId::Fs, first: 11, count: 1, copies: vec![(5, 0)] },
                // 12, 28, 40 and 44 are each within 16 blocks of the one before.
                CopyRead { dev: DevId::Journal, first: 10, count: 35, copies: vec![(1, 0), (2, 2), (4, 18), (0, 30), (6, 34)] },
            ]
        );
        // A gap of 17 blocks starts a new read; so does a read reaching MAX_RUN_BLOCKS.
        let reads = copy_reads(&[j(0), j(17)]);
        assert_eq!(reads.len(), 2, "{reads:?}");
        let long: Vec<_> = (0..300).map(|b| j(b * 2)).collect();
        let reads = copy_reads(&long);
        assert!(reads.iter().all(|r| r.count <= MAX_RUN_BLOCKS as u64), "{reads:?}");
        assert_eq!(reads.iter().map(|r| r.copies.len()).sum::<usize>(), 300);
        assert_eq!(reads.len(), 3, "599 blocks in reads of at most 256");
        // Every copy is read, once, at its own offset.
        for r in &reads {
            for &(i, off) in &r.copies {
                assert_eq!(long[i], j(r.first + off));
            }
        }
        assert!(copy_reads(&[None, None]).is_empty());
    }
}

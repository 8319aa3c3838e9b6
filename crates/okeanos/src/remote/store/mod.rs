//! One journal on the server: three files ([`medium`]): `state` (epoch, trim point, which log
//! is active; two slots written in turn) and `log.0`/`log.1` (the appended transactions, in the
//! active one). Byte maps in docs/FORMAT.md, "Journal server storage".
//!
//! An APPEND writes its record at the end of the active log without syncing; the server's
//! syncer makes a group of them durable with one fdatasync per journal and only then are they
//! acknowledged. A power loss can leave the unsynced records of the last group torn, and
//! persisted in any order (a later one whole, an earlier one not). To tell such a torn tail from
//! damage to acknowledged records, every record carries the offset up to which the log was
//! known durable when it was appended, and after each sync the store appends a small marker
//! carrying the new durable end (it becomes durable with the next group, or at shutdown). At
//! open, a record that fails its checks is damage when a later valid record or marker proves
//! its offset was already durable: the journal is refused, rather than losing acknowledged
//! transactions silently. Otherwise it is a torn tail of never-acknowledged records, and the log
//! is cut there. Damage to the very last synced group before any later write cannot be told
//! from a torn tail — the local journal has the same limit for its last transaction
//! (docs/JOURNALING.md).
//!
//! The state is never replaced by rename: each write goes to the slot the previous one did not
//! use (sequence number odd or even), so a torn write leaves the other slot, and at open the
//! valid slot with the higher sequence wins (LMDB's and redb's two meta pages). A TRIM writes
//! the state durably; once the dead prefix of the active log is larger than the live part and
//! [`Store::compact_min`], the live records are copied to the other log, synced, and the state
//! switched to it. Every log incarnation has a generation (in the state) that seeds its records'
//! checksums, so records left in a reused log by an older incarnation never validate.

pub mod medium;

use medium::{DirMedium, Medium, StoreFile};
use std::path::Path;

const STATE_MAGIC: u32 = u32::from_le_bytes(*b"OKJS");
const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"OKJT");
/// Version 2: slotted state, two logs, generation-seeded record checksums. Version 1 (a
/// `state` replaced by rename and one `log`) is refused with a message.
const STATE_VERSION: u32 = 2;
const SLOT_LEN: usize = 64;
/// The two state slots are a page apart, so writing one never rewrites the other's page.
const SLOT_STRIDE: u64 = 4096;
const RECORD_HEADER: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("journal store {0}: {1}")]
    Io(String, std::io::Error),
    #[error("journal store {0} is damaged: {1}")]
    Damaged(String, String),
    #[error("the journal is full: {used} of {quota} bytes held; checkpoint and trim first")]
    Full { used: u64, quota: u64 },
    #[error("append of transaction {tid} out of order: the journal holds up to {last}")]
    Order { tid: u64, last: u64 },
    #[error("epoch {got} is not the journal's epoch {current}: a newer host took it over")]
    Fenced { got: u64, current: u64 },
}

/// Where a held transaction's record is.
#[derive(Debug, Clone, Copy)]
struct Entry {
    tid: u64,
    offset: u64,
    len: u64,
}

/// What the state records (one slot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct State {
    sequence: u64,
    epoch: u64,
    first_tid: u64,
    last_tid: u64,
    active: usize,
    generation: u64,
}

impl State {
    fn encode(&self) -> [u8; SLOT_LEN] {
        let mut b = [0u8; SLOT_LEN];
        b[0..4].copy_from_slice(&STATE_MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&STATE_VERSION.to_le_bytes());
        b[8..16].copy_from_slice(&self.sequence.to_le_bytes());
        b[16..24].copy_from_slice(&self.epoch.to_le_bytes());
        b[24..32].copy_from_slice(&self.first_tid.to_le_bytes());
        b[32..40].copy_from_slice(&self.last_tid.to_le_bytes());
        b[40..48].copy_from_slice(&self.generation.to_le_bytes());
        b[48..52].copy_from_slice(&(self.active as u32).to_le_bytes());
        let crc = crc32c::crc32c(&b[..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// A valid slot, or why not (`Ok(None)`: never written).
    fn decode(b: &[u8]) -> Result<Option<State>, String> {
        if b.iter().all(|&x| x == 0) {
            return Ok(None);
        }
        if u32le(b, 0) != STATE_MAGIC {
            return Err("not an Okeanos journal state".into());
        }
        if crc32c::crc32c(&b[..60]) != u32le(b, 60) {
            return Err("fails its checksum".into());
        }
        if u32le(b, 4) != STATE_VERSION {
            return Err(format!("format version {} (this server reads {STATE_VERSION})", u32le(b, 4)));
        }
        let active = u32le(b, 48) as usize;
        if active > 1 {
            return Err(format!("active log {active}"));
        }
        Ok(Some(State { sequence: u64le(b, 8), epoch: u64le(b, 16), first_tid: u64le(b, 24), last_tid: u64le(b, 32), generation: u64le(b, 40), active }))
    }
}

pub struct Store {
    medium: Box<dyn Medium>,
    /// The state last written (or read at open).
    state: State,
    /// End of the last good record in the active log.
    end: u64,
    pub epoch: u64,
    /// Transactions below this are trimmed.
    pub first_tid: u64,
    /// The newest transaction ever appended (first_tid - 1 when none is held).
    pub last_tid: u64,
    held: std::collections::VecDeque<Entry>,
    pub quota_bytes: u64,
    /// Compaction waits until the dead prefix is at least this large (1 MiB).
    pub compact_min: u64,
    /// Appended since the last sync.
    pub dirty: bool,
    /// Where the log was durable at the last sync (stamped into every record appended after).
    durable_end: u64,
    /// The marker written after the last sync is not durable yet.
    marker_unsynced: bool,
    /// The crash tests' canary: `sync` does not sync (appends are acknowledged before they
    /// are durable). Never set outside tests.
    pub fault_skip_sync: bool,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("at", &self.medium.describe()).field("state", &self.state).field("end", &self.end).finish()
    }
}

/// A record or marker header: magic, block size (0 for a marker), tid, length of the blocks,
/// the durable end when it was written, CRC (seeded with the log's generation) of bytes 0..28
/// and the blocks.
struct Header {
    block_size: u32,
    tid: u64,
    len: u64,
    synced_before: u64,
    crc: u32,
}

impl Header {
    fn encode(generation: u64, block_size: u32, tid: u64, body: &[u8], synced_before: u64) -> [u8; RECORD_HEADER] {
        let mut h = [0u8; RECORD_HEADER];
        h[0..4].copy_from_slice(&RECORD_MAGIC.to_le_bytes());
        h[4..8].copy_from_slice(&block_size.to_le_bytes());
        h[8..16].copy_from_slice(&tid.to_le_bytes());
        h[16..20].copy_from_slice(&(body.len() as u32).to_le_bytes());
        h[20..28].copy_from_slice(&synced_before.to_le_bytes());
        let crc = record_crc(generation, &h, body);
        h[28..32].copy_from_slice(&crc.to_le_bytes());
        h
    }

    fn decode(h: &[u8]) -> Option<Header> {
        (u32le(h, 0) == RECORD_MAGIC).then(|| Header { block_size: u32le(h, 4), tid: u64le(h, 8), len: u32le(h, 16) as u64, synced_before: u64le(h, 20), crc: u32le(h, 28) })
    }

    fn is_marker(&self) -> bool {
        self.block_size == 0 && self.tid == 0 && self.len == 0
    }
}

impl Store {
    /// Opens (or creates) the journal in directory `dir`.
    pub fn open(dir: &Path, quota_bytes: u64) -> Result<Store, StoreError> {
        let io_err = |e| StoreError::Io(dir.display().to_string(), e);
        if dir.join("log").exists() {
            return Err(StoreError::Damaged(
                dir.display().to_string(),
                "made by an older journal server (store format 1); mount each host that used it with that version, unmount it cleanly, then remove the directory".into(),
            ));
        }
        Store::open_on(Box::new(DirMedium::open(dir).map_err(io_err)?), quota_bytes)
    }

    /// Opens (or creates) the journal on `medium`.
    pub fn open_on(mut medium: Box<dyn Medium>, quota_bytes: u64) -> Result<Store, StoreError> {
        let (state, other_invalid) = match read_state(medium.as_ref())? {
            Some(s) => s,
            None => {
                // A new journal: its first state is durable before anything is appended, so a
                // journal with records always has a valid slot.
                for f in [StoreFile::Log(0), StoreFile::Log(1)] {
                    if medium.len(f).map_err(|e| StoreError::Io(medium.describe(), e))? > 0 {
                        return Err(StoreError::Damaged(medium.describe(), "the state is empty but a log is not".into()));
                    }
                }
                let s = State { sequence: 1, epoch: 0, first_tid: 1, last_tid: 0, active: 0, generation: 1 };
                write_slot(medium.as_mut(), &s)?;
                (s, false)
            }
        };
        let mut s = Store {
            medium,
            state,
            end: 0,
            epoch: state.epoch,
            first_tid: state.first_tid,
            last_tid: state.last_tid,
            held: Default::default(),
            quota_bytes,
            compact_min: 1 << 20,
            dirty: false,
            durable_end: 0,
            marker_unsynced: false,
            fault_skip_sync: false,
        };
        let len = s.medium.len(s.log()).map_err(|e| s.io(e))?;
        s.scan(len)?;
        if other_invalid {
            s.check_fallback()?;
        }
        // Whatever survived is made durable now, so records appended from here on may rely on it.
        let log = s.log();
        s.medium.sync(log).map_err(|e| s.io(e))?;
        s.durable_end = s.end;
        Ok(s)
    }

    fn log(&self) -> StoreFile {
        StoreFile::Log(self.state.active)
    }

    fn io(&self, e: std::io::Error) -> StoreError {
        StoreError::Io(self.medium.describe(), e)
    }

    fn damaged(&self, why: String) -> StoreError {
        StoreError::Damaged(self.medium.describe(), why)
    }

    /// Reads every record, keeps the held ones, cuts a torn tail.
    fn scan(&mut self, len: u64) -> Result<(), StoreError> {
        let (log, generation) = (self.log(), self.state.generation);
        let mut at = 0u64;
        let mut prev: Option<u64> = None;
        let mut h = [0u8; RECORD_HEADER];
        let torn = loop {
            if at == len {
                break None;
            }
            if len - at < RECORD_HEADER as u64 || self.medium.read_at(log, at, &mut h).is_err() {
                break Some(format!("a partial record header at byte {at}"));
            }
            let Some(hd) = Header::decode(&h).filter(|hd| (hd.len > 0 || hd.is_marker()) && hd.len <= crate::format::remote::MAX_PAYLOAD as u64 && at + RECORD_HEADER as u64 + hd.len <= len) else {
                break Some(format!("no whole record at byte {at}"));
            };
            let (tid, blen) = (hd.tid, hd.len);
            let mut body = vec![0u8; blen as usize];
            self.medium.read_at(log, at + RECORD_HEADER as u64, &mut body).map_err(|e| self.io(e))?;
            if record_crc(generation, &h, &body) != hd.crc {
                break Some(format!("record of transaction {tid} at byte {at} fails its checksum"));
            }
            if hd.is_marker() {
                at += RECORD_HEADER as u64;
                continue;
            }
            if tid >= self.first_tid {
                // Held transactions are contiguous (a host's tids jump only after its recovery,
                // which trims everything first).
                if let Some(p) = prev.filter(|&p| tid != p + 1) {
                    return Err(self.damaged(format!("transaction {tid} follows {p} at byte {at}")));
                }
                prev = Some(tid);
                self.held.push_back(Entry { tid, offset: at, len: RECORD_HEADER as u64 + blen });
            }
            self.last_tid = self.last_tid.max(tid);
            at += RECORD_HEADER as u64 + blen;
        };
        if let Some(why) = torn {
            // Only never-synced records may be torn: a later record proving this offset was
            // already durable makes it damage.
            if let Some(proof) = self.durable_after(at, len).filter(|&d| d > at) {
                return Err(self.damaged(format!("{why}, in a part of the log that was durable (a later record says so up to byte {proof})")));
            }
            self.medium.truncate(log, at).map_err(|e| self.io(e))?;
            self.medium.sync(log).map_err(|e| self.io(e))?;
        }
        self.end = at;
        Ok(())
    }

    /// The largest durable end that a valid record or marker after `from` carries (a bounded
    /// search of the 64 MiB after it).
    fn durable_after(&self, from: u64, len: u64) -> Option<u64> {
        let mut buf = vec![0u8; (len - from).min(64 << 20) as usize];
        self.medium.read_at(self.log(), from, &mut buf).ok()?;
        let generation = self.state.generation;
        (1..buf.len().saturating_sub(RECORD_HEADER - 1))
            .filter_map(|i| {
                let hd = Header::decode(&buf[i..i + RECORD_HEADER])?;
                let end = i.checked_add(RECORD_HEADER)?.checked_add(hd.len as usize)?;
                (end <= buf.len() && record_crc(generation, &buf[i..i + RECORD_HEADER], &buf[i + RECORD_HEADER..end]) == hd.crc).then_some(hd.synced_before)
            })
            .max()
    }

    /// Bytes of held transactions.
    pub fn used_bytes(&self) -> u64 {
        self.held.iter().map(|e| e.len).sum()
    }

    /// Appends a transaction (not yet durable: see [`Store::sync`]). An append of a held tid
    /// with the same contents is a retry and succeeds without writing.
    pub fn append(&mut self, tid: u64, epoch: u64, block_size: u32, blocks: &[u8]) -> Result<(), StoreError> {
        if epoch != self.epoch {
            return Err(StoreError::Fenced { got: epoch, current: self.epoch });
        }
        if tid <= self.last_tid {
            if let Some(e) = self.held.iter().find(|e| e.tid == tid).copied() {
                let mut body = vec![0u8; (e.len - RECORD_HEADER as u64) as usize];
                self.medium.read_at(self.log(), e.offset + RECORD_HEADER as u64, &mut body).map_err(|e| self.io(e))?;
                if body == blocks {
                    return Ok(());
                }
            }
            return Err(StoreError::Order { tid, last: self.last_tid });
        }
        if !self.held.is_empty() && tid != self.last_tid + 1 {
            return Err(StoreError::Order { tid, last: self.last_tid });
        }
        let len = RECORD_HEADER as u64 + blocks.len() as u64;
        if self.used_bytes() + len > self.quota_bytes {
            return Err(StoreError::Full { used: self.used_bytes(), quota: self.quota_bytes });
        }
        let h = Header::encode(self.state.generation, block_size, tid, blocks, self.durable_end);
        let mut rec = h.to_vec();
        rec.extend_from_slice(blocks);
        let log = self.log();
        self.medium.write_at(log, self.end, &rec).map_err(|e| self.io(e))?;
        self.held.push_back(Entry { tid, offset: self.end, len });
        self.end += len;
        if self.held.len() == 1 {
            // The first transaction after the store was emptied fixes where it starts.
            self.first_tid = tid;
        }
        self.last_tid = tid;
        self.dirty = true;
        Ok(())
    }

    /// Makes every append so far durable (the group commit's fdatasync), then appends the
    /// marker that says so (durable with the next group, or at [`Store::finish`]).
    pub fn sync(&mut self) -> Result<(), StoreError> {
        if self.dirty {
            let log = self.log();
            if !self.fault_skip_sync {
                self.medium.sync(log).map_err(|e| self.io(e))?;
            }
            self.dirty = false;
            self.durable_end = self.end;
            let marker = Header::encode(self.state.generation, 0, 0, &[], self.durable_end);
            self.medium.write_at(log, self.end, &marker).map_err(|e| self.io(e))?;
            self.end += RECORD_HEADER as u64;
            self.marker_unsynced = true;
        }
        Ok(())
    }

    /// At shutdown: everything, the last marker too, durable.
    pub fn finish(&mut self) -> Result<(), StoreError> {
        self.sync()?;
        if self.marker_unsynced {
            let log = self.log();
            self.medium.sync(log).map_err(|e| self.io(e))?;
            self.marker_unsynced = false;
        }
        Ok(())
    }

    /// Drops every transaction up to `upto`, durably.
    pub fn trim(&mut self, upto: u64, epoch: u64) -> Result<(), StoreError> {
        if epoch != self.epoch {
            return Err(StoreError::Fenced { got: epoch, current: self.epoch });
        }
        if upto < self.first_tid {
            return Ok(());
        }
        self.sync()?;
        while self.held.front().is_some_and(|e| e.tid <= upto) {
            self.held.pop_front();
        }
        self.first_tid = upto + 1;
        self.write_state(self.state.active, self.state.generation)?;
        let dead = self.held.front().map_or(self.end, |e| e.offset);
        if dead > self.compact_min && dead > self.end - dead {
            self.compact()?;
        }
        Ok(())
    }

    /// Takes the journal over with a newer epoch, durably; later appends of older epochs fail.
    pub fn fence(&mut self, epoch: u64) -> Result<(), StoreError> {
        if epoch <= self.epoch {
            return Err(StoreError::Fenced { got: epoch, current: self.epoch });
        }
        self.sync()?;
        self.epoch = epoch;
        self.write_state(self.state.active, self.state.generation)
    }

    /// The held transactions from `from` on: (tid, block size, blocks).
    pub fn read_from(&self, from: u64) -> Result<Vec<(u64, u32, Vec<u8>)>, StoreError> {
        let mut out = Vec::new();
        for e in self.held.iter().filter(|e| e.tid >= from) {
            let mut rec = vec![0u8; e.len as usize];
            self.medium.read_at(self.log(), e.offset, &mut rec).map_err(|er| self.io(er))?;
            out.push((e.tid, u32le(&rec, 4), rec.split_off(RECORD_HEADER)));
        }
        Ok(out)
    }

    /// Writes the state to the slot the last write did not use, and syncs it.
    fn write_state(&mut self, active: usize, generation: u64) -> Result<(), StoreError> {
        let s = State { sequence: self.state.sequence + 1, epoch: self.epoch, first_tid: self.first_tid, last_tid: self.last_tid, active, generation };
        write_slot(self.medium.as_mut(), &s)?;
        self.state = s;
        Ok(())
    }

    /// The state fell back to the older slot (the other is invalid). A torn write of the newer
    /// slot is safe: a trim or fence undone, or a compaction's switch undone with the old log
    /// still whole. But a newer slot that was durable and damaged since may have switched to
    /// the other log, and appends after that switch live only there, under the next
    /// generation, with tids beyond every one the active log holds; a compaction that the
    /// crash interrupted holds only copies of the active log's records. So records of the next
    /// generation past the active log's last tid are damage: the journal is refused rather
    /// than served without them.
    fn check_fallback(&self) -> Result<(), StoreError> {
        let other = StoreFile::Log(1 - self.state.active);
        let generation = self.state.generation + 1;
        let len = self.medium.len(other).map_err(|e| self.io(e))?;
        let (mut at, mut newest) = (0u64, None);
        let mut h = [0u8; RECORD_HEADER];
        while len - at >= RECORD_HEADER as u64 && self.medium.read_at(other, at, &mut h).is_ok() {
            let Some(hd) = Header::decode(&h).filter(|hd| hd.len <= crate::format::remote::MAX_PAYLOAD as u64 && at + RECORD_HEADER as u64 + hd.len <= len) else { break };
            let mut body = vec![0u8; hd.len as usize];
            self.medium.read_at(other, at + RECORD_HEADER as u64, &mut body).map_err(|e| self.io(e))?;
            if record_crc(generation, &h, &body) != hd.crc {
                break;
            }
            if !hd.is_marker() {
                newest = Some(hd.tid);
            }
            at += RECORD_HEADER as u64 + hd.len;
        }
        match newest {
            Some(t) if t > self.last_tid => Err(self.damaged(format!(
                "a state slot is damaged and the other, older one is in use; but the log it does not name holds transactions up to {t} of a later compaction, past the {} it knows: serving from the older state would lose them",
                self.last_tid
            ))),
            _ => Ok(()),
        }
    }

    /// Copies the held records into the other log under a new generation, syncs it, then
    /// switches the state to it. The old log is left as it is until the next compaction
    /// empties it to reuse it (its records would not validate under a later generation).
    fn compact(&mut self) -> Result<(), StoreError> {
        let (from, to) = (self.log(), StoreFile::Log(1 - self.state.active));
        let generation = self.state.generation + 1;
        self.medium.truncate(to, 0).map_err(|e| self.io(e))?;
        let mut held = std::collections::VecDeque::new();
        let mut at = 0u64;
        for e in self.held.clone() {
            let mut rec = vec![0u8; e.len as usize];
            self.medium.read_at(from, e.offset, &mut rec).map_err(|er| self.io(er))?;
            let h = Header::encode(generation, u32le(&rec, 4), e.tid, &rec[RECORD_HEADER..], 0);
            rec[..RECORD_HEADER].copy_from_slice(&h);
            self.medium.write_at(to, at, &rec).map_err(|er| self.io(er))?;
            held.push_back(Entry { tid: e.tid, offset: at, len: e.len });
            at += e.len;
        }
        self.medium.sync(to).map_err(|e| self.io(e))?;
        let StoreFile::Log(active) = to else { unreachable!("a log") };
        self.write_state(active, generation)?;
        self.held = held;
        self.end = at;
        self.durable_end = at;
        self.marker_unsynced = false;
        Ok(())
    }
}

fn write_slot(m: &mut dyn Medium, s: &State) -> Result<(), StoreError> {
    let at = (s.sequence % 2) * SLOT_STRIDE;
    let r = m.write_at(StoreFile::State, at, &s.encode()).and_then(|()| m.sync(StoreFile::State));
    r.map_err(|e| StoreError::Io(m.describe(), e))
}

/// The valid slot with the higher sequence, and whether the other slot was written but is
/// invalid (a torn write, or damage); `None` for a new journal (no slot ever written).
fn read_state(m: &dyn Medium) -> Result<Option<(State, bool)>, StoreError> {
    let len = m.len(StoreFile::State).map_err(|e| StoreError::Io(m.describe(), e))?;
    let mut slots = Vec::new();
    let mut why = Vec::new();
    for i in 0..2u64 {
        let at = i * SLOT_STRIDE;
        if at + SLOT_LEN as u64 > len {
            continue;
        }
        let mut b = [0u8; SLOT_LEN];
        m.read_at(StoreFile::State, at, &mut b).map_err(|e| StoreError::Io(m.describe(), e))?;
        match State::decode(&b) {
            Ok(Some(s)) if s.sequence % 2 == i => slots.push(s),
            Ok(Some(s)) => why.push(format!("slot {i} holds sequence {}", s.sequence)),
            Ok(None) => {}
            Err(w) => why.push(format!("slot {i}: {w}")),
        }
    }
    let invalid = !why.is_empty();
    match slots.into_iter().max_by_key(|s| s.sequence) {
        Some(s) => Ok(Some((s, invalid))),
        None if why.is_empty() => Ok(None),
        None => Err(StoreError::Damaged(m.describe(), format!("state file: {}", why.join("; ")))),
    }
}

fn record_crc(generation: u64, h: &[u8], body: &[u8]) -> u32 {
    let seeded = crc32c::crc32c(&generation.to_le_bytes());
    crc32c::crc32c_append(crc32c::crc32c_append(seeded, &h[..28]), body)
}

fn u32le(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64le(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests;

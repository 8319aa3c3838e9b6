//! One journal on the server: a directory holding `state` (epoch and trim point, replaced
//! atomically) and `log` (the appended transactions). Byte maps in docs/FORMAT.md, "Journal
//! server storage".
//!
//! An APPEND writes its record at the end of `log` without syncing; the server's syncer makes a
//! group of them durable with one fdatasync per journal and only then are they acknowledged. A
//! power loss can leave the unsynced records of the last group torn, and persisted in any
//! order (a later one whole, an earlier one not). To tell such a torn tail from damage to
//! acknowledged records, every record carries the offset up to which the log was known durable
//! when it was appended, and after each sync the store appends a small marker carrying the new
//! durable end (it becomes durable with the next group, or at shutdown). At open, a record that
//! fails its checks is damage when a later valid record or marker proves its offset was already
//! durable: the journal is refused, rather than losing acknowledged transactions silently.
//! Otherwise it is a torn tail of never-acknowledged records, and the log is cut there. Damage
//! to the very last synced group before any later write cannot be told from a torn tail — the
//! local journal has the same limit for its last transaction (docs/JOURNALING.md).
//!
//! A TRIM moves the trim point durably; the dead prefix of `log` is compacted away (live records
//! copied to `log.new`, synced, renamed over `log`, the directory synced) once it is larger than
//! the live part and 1 MiB.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

const STATE_MAGIC: u32 = u32::from_le_bytes(*b"OKJS");
const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"OKJT");
const STATE_LEN: usize = 40;
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

#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    log: File,
    /// End of the last good record.
    end: u64,
    pub epoch: u64,
    /// Transactions below this are trimmed.
    pub first_tid: u64,
    /// The newest transaction ever appended (first_tid - 1 when none is held).
    pub last_tid: u64,
    held: std::collections::VecDeque<Entry>,
    pub quota_bytes: u64,
    /// Appended since the last sync.
    pub dirty: bool,
    /// Where the log was durable at the last sync (stamped into every record appended after).
    durable_end: u64,
    /// The marker written after the last sync is not durable yet.
    marker_unsynced: bool,
}

/// A record or marker header: magic, block size (0 for a marker), tid, length of the blocks,
/// the durable end when it was written, CRC of bytes 0..28 and the blocks.
struct Header {
    block_size: u32,
    tid: u64,
    len: u64,
    synced_before: u64,
    crc: u32,
}

impl Header {
    fn encode(block_size: u32, tid: u64, body: &[u8], synced_before: u64) -> [u8; RECORD_HEADER] {
        let mut h = [0u8; RECORD_HEADER];
        h[0..4].copy_from_slice(&RECORD_MAGIC.to_le_bytes());
        h[4..8].copy_from_slice(&block_size.to_le_bytes());
        h[8..16].copy_from_slice(&tid.to_le_bytes());
        h[16..20].copy_from_slice(&(body.len() as u32).to_le_bytes());
        h[20..28].copy_from_slice(&synced_before.to_le_bytes());
        let crc = record_crc(&h, body);
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

fn io(dir: &Path, e: std::io::Error) -> StoreError {
    StoreError::Io(dir.display().to_string(), e)
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

impl Store {
    /// Opens (or creates) the journal in `dir`.
    pub fn open(dir: &Path, quota_bytes: u64) -> Result<Store, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let (epoch, first_tid, last_tid) = read_state(dir)?.unwrap_or((0, 1, 0));
        let mut log = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(dir.join("log")).map_err(|e| io(dir, e))?;
        let len = log.seek(SeekFrom::End(0)).map_err(|e| io(dir, e))?;
        let mut s = Store { dir: dir.to_path_buf(), log, end: 0, epoch, first_tid, last_tid, held: Default::default(), quota_bytes, dirty: false, durable_end: 0, marker_unsynced: false };
        s.scan(len)?;
        // Whatever survived is made durable now, so records appended from here on may rely on it.
        s.log.sync_data().map_err(|e| io(dir, e))?;
        s.durable_end = s.end;
        Ok(s)
    }

    /// Reads every record, keeps the held ones, cuts a torn tail.
    fn scan(&mut self, len: u64) -> Result<(), StoreError> {
        let mut at = 0u64;
        let mut prev: Option<u64> = None;
        let mut h = [0u8; RECORD_HEADER];
        let torn = loop {
            if at == len {
                break None;
            }
            if len - at < RECORD_HEADER as u64 || self.log.read_exact_at(&mut h, at).is_err() {
                break Some(format!("a partial record header at byte {at}"));
            }
            let Some(hd) = Header::decode(&h).filter(|hd| (hd.len > 0 || hd.is_marker()) && hd.len <= crate::format::remote::MAX_PAYLOAD as u64 && at + RECORD_HEADER as u64 + hd.len <= len) else {
                break Some(format!("no whole record at byte {at}"));
            };
            let (tid, blen) = (hd.tid, hd.len);
            let mut body = vec![0u8; blen as usize];
            self.log.read_exact_at(&mut body, at + RECORD_HEADER as u64).map_err(|e| io(&self.dir, e))?;
            if record_crc(&h, &body) != hd.crc {
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
                    return Err(StoreError::Damaged(self.dir.display().to_string(), format!("transaction {tid} follows {p} at byte {at}")));
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
                return Err(StoreError::Damaged(self.dir.display().to_string(), format!("{why}, in a part of the log that was durable (a later record says so up to byte {proof})")));
            }
            self.log.set_len(at).map_err(|e| io(&self.dir, e))?;
            self.log.sync_data().map_err(|e| io(&self.dir, e))?;
        }
        self.end = at;
        Ok(())
    }

    /// The largest durable end that a valid record or marker after `from` carries (a bounded
    /// search of the 64 MiB after it).
    fn durable_after(&self, from: u64, len: u64) -> Option<u64> {
        let mut buf = vec![0u8; (len - from).min(64 << 20) as usize];
        self.log.read_exact_at(&mut buf, from).ok()?;
        (1..buf.len().saturating_sub(RECORD_HEADER - 1))
            .filter_map(|i| {
                let hd = Header::decode(&buf[i..i + RECORD_HEADER])?;
                let end = i.checked_add(RECORD_HEADER)?.checked_add(hd.len as usize)?;
                (end <= buf.len() && record_crc(&buf[i..i + RECORD_HEADER], &buf[i + RECORD_HEADER..end]) == hd.crc).then_some(hd.synced_before)
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
            if let Some(e) = self.held.iter().find(|e| e.tid == tid) {
                let mut body = vec![0u8; (e.len - RECORD_HEADER as u64) as usize];
                self.log.read_exact_at(&mut body, e.offset + RECORD_HEADER as u64).map_err(|e| io(&self.dir, e))?;
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
        let h = Header::encode(block_size, tid, blocks, self.durable_end);
        let mut rec = h.to_vec();
        rec.extend_from_slice(blocks);
        self.log.write_all_at(&rec, self.end).map_err(|e| io(&self.dir, e))?;
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
            self.log.sync_data().map_err(|e| io(&self.dir, e))?;
            self.dirty = false;
            self.durable_end = self.end;
            let marker = Header::encode(0, 0, &[], self.durable_end);
            self.log.write_all_at(&marker, self.end).map_err(|e| io(&self.dir, e))?;
            self.end += RECORD_HEADER as u64;
            self.marker_unsynced = true;
        }
        Ok(())
    }

    /// At shutdown: everything, the last marker too, durable.
    pub fn finish(&mut self) -> Result<(), StoreError> {
        self.sync()?;
        if self.marker_unsynced {
            self.log.sync_data().map_err(|e| io(&self.dir, e))?;
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
        self.write_state()?;
        let dead = self.held.front().map_or(self.end, |e| e.offset);
        if dead > 1 << 20 && dead > self.end - dead {
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
        self.write_state()
    }

    /// The held transactions from `from` on: (tid, block size, blocks).
    pub fn read_from(&self, from: u64) -> Result<Vec<(u64, u32, Vec<u8>)>, StoreError> {
        let mut out = Vec::new();
        for e in self.held.iter().filter(|e| e.tid >= from) {
            let mut rec = vec![0u8; e.len as usize];
            self.log.read_exact_at(&mut rec, e.offset).map_err(|er| io(&self.dir, er))?;
            out.push((e.tid, u32le(&rec, 4), rec.split_off(RECORD_HEADER)));
        }
        Ok(out)
    }

    fn write_state(&self) -> Result<(), StoreError> {
        let mut b = [0u8; STATE_LEN];
        b[0..4].copy_from_slice(&STATE_MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&1u32.to_le_bytes());
        b[8..16].copy_from_slice(&self.epoch.to_le_bytes());
        b[16..24].copy_from_slice(&self.first_tid.to_le_bytes());
        b[24..32].copy_from_slice(&self.last_tid.to_le_bytes());
        let crc = crc32c::crc32c(&b[..32]);
        b[32..36].copy_from_slice(&crc.to_le_bytes());
        let tmp = self.dir.join("state.new");
        let r = (|| {
            let mut f = File::create(&tmp)?;
            f.write_all(&b)?;
            f.sync_all()?;
            std::fs::rename(&tmp, self.dir.join("state"))?;
            sync_dir(&self.dir)
        })();
        r.map_err(|e| io(&self.dir, e))
    }

    /// Rewrites `log` with the held records only.
    fn compact(&mut self) -> Result<(), StoreError> {
        let dir = self.dir.clone();
        let tmp = dir.join("log.new");
        let mut out = File::create(&tmp).map_err(|e| io(&dir, e))?;
        let mut held = std::collections::VecDeque::new();
        let mut at = 0u64;
        for e in &self.held {
            let mut rec = vec![0u8; e.len as usize];
            self.log.read_exact_at(&mut rec, e.offset).map_err(|er| io(&dir, er))?;
            out.write_all(&rec).map_err(|er| io(&dir, er))?;
            held.push_back(Entry { tid: e.tid, offset: at, len: e.len });
            at += e.len;
        }
        out.sync_all().map_err(|e| io(&dir, e))?;
        std::fs::rename(&tmp, dir.join("log")).map_err(|e| io(&dir, e))?;
        sync_dir(&dir).map_err(|e| io(&dir, e))?;
        self.log = OpenOptions::new().read(true).write(true).open(dir.join("log")).map_err(|e| io(&dir, e))?;
        self.held = held;
        self.end = at;
        self.durable_end = at;
        self.marker_unsynced = false;
        Ok(())
    }
}

fn read_state(dir: &Path) -> Result<Option<(u64, u64, u64)>, StoreError> {
    let mut b = Vec::new();
    match File::open(dir.join("state")) {
        Ok(mut f) => f.read_to_end(&mut b).map_err(|e| io(dir, e))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(dir, e)),
    };
    let bad = |why: &str| StoreError::Damaged(dir.display().to_string(), format!("state file: {why}"));
    if b.len() != STATE_LEN || u32le(&b, 0) != STATE_MAGIC {
        return Err(bad("not an Okeanos journal state"));
    }
    if u32le(&b, 4) != 1 {
        return Err(bad("unsupported version"));
    }
    if crc32c::crc32c(&b[..32]) != u32le(&b, 32) {
        return Err(bad("fails its checksum"));
    }
    Ok(Some((u64le(&b, 8), u64le(&b, 16), u64le(&b, 24))))
}

fn record_crc(h: &[u8], body: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&h[..28]), body)
}

fn u32le(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64le(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(tid: u64) -> Vec<u8> {
        (0..4096).map(|i| (tid as usize * 13 + i) as u8).collect()
    }

    fn filled(dir: &Path, n: u64) -> Store {
        let mut s = Store::open(dir, 1 << 30).unwrap();
        for tid in 1..=n {
            s.append(tid, 0, 4096, &blocks(tid)).unwrap();
        }
        s.sync().unwrap();
        s
    }

    #[test]
    fn a_torn_tail_is_cut_at_restart() {
        let d = tempfile::tempdir().unwrap();
        drop(filled(d.path(), 5));
        let log = d.path().join("log");
        let len = std::fs::metadata(&log).unwrap().len();
        // The last record half written (never acknowledged: its sync never ran).
        let f = OpenOptions::new().write(true).open(&log).unwrap();
        f.set_len(len - 1000).unwrap();
        let s = Store::open(d.path(), 1 << 30).unwrap();
        assert_eq!((s.first_tid, s.last_tid), (1, 4));
        assert_eq!(s.read_from(1).unwrap().iter().map(|t| t.0).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
        assert_eq!(std::fs::metadata(&log).unwrap().len(), 4 * (4096 + RECORD_HEADER as u64));
        // And appends continue after it.
        let mut s = s;
        s.append(5, 0, 4096, &blocks(5)).unwrap();
    }

    #[test]
    fn unsynced_records_persisted_out_of_order_are_a_torn_tail() {
        // After a power loss the last, unsynced group may have a later record whole and an
        // earlier one torn: that is not damage (neither was acknowledged).
        let d = tempfile::tempdir().unwrap();
        let mut s = filled(d.path(), 5);
        s.append(6, 0, 4096, &blocks(6)).unwrap();
        s.append(7, 0, 4096, &blocks(7)).unwrap();
        drop(s);
        let log = d.path().join("log");
        let rec = 4096 + RECORD_HEADER;
        let sixth = 5 * rec + RECORD_HEADER; // after five records and the marker of their sync
        let mut bytes = std::fs::read(&log).unwrap();
        bytes[sixth + 2000] ^= 0xff;
        std::fs::write(&log, &bytes).unwrap();
        let s = Store::open(d.path(), 1 << 30).unwrap();
        assert_eq!(s.read_from(0).unwrap().iter().map(|t| t.0).collect::<Vec<_>>(), vec![1, 2, 3, 4, 5]);
        assert_eq!(std::fs::metadata(&log).unwrap().len(), sixth as u64);
    }

    /// Records 1..5 synced together: the marker written after their sync proves record 2 was
    /// durable, so its damage is refused even though nothing was appended after the group.
    #[test]
    fn a_damaged_record_with_good_ones_after_it_is_refused() {
        let d = tempfile::tempdir().unwrap();
        drop(filled(d.path(), 5));
        let log = d.path().join("log");
        let mut bytes = std::fs::read(&log).unwrap();
        bytes[(4096 + RECORD_HEADER) + 100] ^= 1;
        std::fs::write(&log, &bytes).unwrap();
        match Store::open(d.path(), 1 << 30) {
            Err(StoreError::Damaged(_, why)) => assert!(why.contains("fails its checksum"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn trim_compaction_and_fence_survive_a_reopen() {
        let d = tempfile::tempdir().unwrap();
        let mut s = Store::open(d.path(), 1 << 30).unwrap();
        for tid in 1..=400 {
            s.append(tid, 0, 4096, &blocks(tid)).unwrap();
        }
        s.trim(390, 0).unwrap();
        assert!(std::fs::metadata(d.path().join("log")).unwrap().len() < 20 * 4200, "compacted");
        s.fence(4).unwrap();
        drop(s);
        let mut s = Store::open(d.path(), 1 << 30).unwrap();
        assert_eq!((s.epoch, s.first_tid, s.last_tid), (4, 391, 400));
        assert_eq!(s.read_from(0).unwrap().len(), 10);
        assert!(matches!(s.append(401, 0, 4096, &blocks(401)), Err(StoreError::Fenced { .. })));
        s.append(401, 4, 4096, &blocks(401)).unwrap();
        assert!(matches!(s.append(403, 4, 4096, &blocks(403)), Err(StoreError::Order { .. })));
        // After trimming everything, the next tid may jump (a host's recovery does that), and
        // the jump survives a reopen.
        s.trim(401, 4).unwrap();
        s.append(5000, 4, 4096, &blocks(5000)).unwrap();
        s.sync().unwrap();
        drop(s);
        let s = Store::open(d.path(), 1 << 30).unwrap();
        assert_eq!(s.read_from(0).unwrap().iter().map(|t| t.0).collect::<Vec<_>>(), vec![5000]);
    }
}

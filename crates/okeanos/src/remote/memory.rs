//! An in-memory journal server for the crash tests: it keeps appended transactions like the
//! real one, and records when each was acknowledged (and each trim completed) on the clock of
//! a [`CrashRecorder`] — the host's device events — so that a test can build, for every crash
//! point of the host, what the server held durably then: everything acknowledged before, and
//! perhaps the append in flight ("acknowledged or not on a network").
//!
//! [`StoreLink`] instead puts the server's real [`Store`] in process, with no network between:
//! on recorded devices ([`super::store::medium::DeviceMedium`]) its own writes and fdatasyncs
//! join the host's in one crash recording.

use super::client::{RemoteError, ServerJournal};
use super::store::{Store, StoreError};
use super::Link;
use crate::device::CrashRecorder;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

/// What the server did, with the host's event count at each step.
#[derive(Debug, Default, Clone)]
pub struct MemLog {
    pub epoch: u64,
    /// The quota it reports (0: 1 GiB); a small one makes the host checkpoint and trim.
    pub quota_bytes: u64,
    /// Held transactions: tid -> (block size, blocks).
    pub held: BTreeMap<u64, (u32, Vec<u8>)>,
    /// (event count when sent, tid) and (event count when acknowledged, tid).
    pub sends: Vec<(usize, u64)>,
    pub acks: Vec<(usize, u64)>,
    /// (event count when done, up to tid).
    pub trims: Vec<(usize, u64)>,
    /// Every transaction ever appended (trimmed ones too), for building crash states: kept
    /// only by a server with a crash recorder. Without one (the simulator, long runs) it would
    /// hold the run's whole journal traffic in memory: 24 GB before the OOM killer stopped a
    /// `sim postmark --journal remote` of 10,000 transactions.
    pub appended: BTreeMap<u64, (u32, Vec<u8>)>,
    /// The server dies after this many appends.
    pub die_after: Option<usize>,
    /// TRIMs fail as a dead server's would (the server answers everything else).
    pub fail_trims: bool,
}

impl MemLog {
    /// A stand-in that goes away: after this many appends every call fails as a dead server's
    /// would (set in the shared log, so it holds across reconnects).
    pub fn dies_after(appends: usize) -> MemLog {
        MemLog { die_after: Some(appends), ..Default::default() }
    }

    fn dead(&self) -> bool {
        self.die_after.is_some_and(|n| self.sends.len() >= n)
    }

    /// The server's durable contents for a host crash after `events` events: every append
    /// acknowledged by then (and, with `in_flight`, those sent by then but acknowledged later:
    /// written on the server or not), less what trims completed by then dropped.
    pub fn at(&self, events: usize, in_flight: bool) -> MemLog {
        let acked = |t: u64| self.acks.iter().find(|(_, x)| *x == t).map(|(e, _)| *e);
        let mut held: BTreeMap<u64, (u32, Vec<u8>)> = BTreeMap::new();
        for &(sent, t) in &self.sends {
            let durable = acked(t).is_some_and(|e| e <= events);
            let flying = in_flight && sent <= events && !durable;
            if durable || flying {
                held.insert(t, self.appended[&t].clone());
            }
        }
        if let Some(upto) = self.trims.iter().filter(|(e, _)| *e <= events).map(|(_, u)| *u).max() {
            held.retain(|t, _| *t > upto);
        }
        MemLog { epoch: self.epoch, quota_bytes: self.quota_bytes, held, ..Default::default() }
    }
}

pub struct MemServer {
    log: Arc<Mutex<MemLog>>,
    recorder: Option<Arc<CrashRecorder>>,
    pending: VecDeque<u64>,
    /// The canary's server: acknowledges and forgets.
    pub forget: bool,
}

impl MemServer {
    pub fn new(log: Arc<Mutex<MemLog>>, recorder: Option<Arc<CrashRecorder>>) -> Self {
        MemServer { log, recorder, pending: VecDeque::new(), forget: false }
    }

    fn now(&self) -> usize {
        self.recorder.as_ref().map_or(0, |r| r.event_count())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemLog> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Link for MemServer {
    fn journal(&self) -> ServerJournal {
        let l = self.lock();
        let first = l.held.keys().next().copied().unwrap_or(1);
        let last = l.held.keys().next_back().copied().unwrap_or(first - 1);
        let quota_bytes = if l.quota_bytes == 0 { 1 << 30 } else { l.quota_bytes };
        ServerJournal { epoch: l.epoch, first_tid: first, last_tid: last, quota_bytes, used_bytes: 0 }
    }
    fn send_append(&mut self, tid: u64, block_size: u32, blocks: Vec<u8>) -> Result<(), RemoteError> {
        let mut l = self.lock();
        if l.dead() {
            return Err(RemoteError::Network { addr: "memory".into(), message: "connection reset".into() });
        }
        if self.recorder.is_some() {
            l.appended.insert(tid, (block_size, blocks.clone()));
        }
        l.held.insert(tid, (block_size, blocks));
        let now = self.recorder.as_ref().map_or(0, |r| r.event_count());
        l.sends.push((now, tid));
        drop(l);
        self.pending.push_back(tid);
        Ok(())
    }
    fn wait_ack(&mut self) -> Result<u64, RemoteError> {
        let tid = self.pending.pop_front().expect("an append in flight");
        let now = self.now();
        let mut l = self.lock();
        if self.forget {
            l.held.remove(&tid);
        } else {
            l.acks.push((now, tid));
        }
        Ok(tid)
    }
    fn trim(&mut self, upto: u64) -> Result<u64, RemoteError> {
        let now = self.now();
        let mut l = self.lock();
        if l.dead() || l.fail_trims {
            return Err(RemoteError::Network { addr: "memory".into(), message: "connection reset".into() });
        }
        l.held.retain(|t, _| *t > upto);
        l.trims.push((now, upto));
        Ok(upto + 1)
    }
    fn read_from(&mut self, from: u64) -> Result<Vec<(u64, u32, Vec<u8>)>, RemoteError> {
        Ok(self.lock().held.range(from..).map(|(t, (bs, b))| (*t, *bs, b.clone())).collect())
    }
    fn fence(&mut self, epoch: u64) -> Result<u64, RemoteError> {
        let mut l = self.lock();
        l.epoch = epoch;
        Ok(l.held.keys().next_back().copied().unwrap_or(0))
    }
}

/// The journal server's store, called directly: an APPEND writes its record, the wait for its
/// acknowledgement runs the sync round (one fdatasync for every append in flight, as the
/// server's syncer does), and only then returns, exactly as the server acknowledges.
pub struct StoreLink {
    store: Arc<Mutex<Store>>,
    epoch: u64,
    pending: VecDeque<u64>,
}

impl StoreLink {
    pub fn new(store: Arc<Mutex<Store>>, epoch: u64) -> Self {
        StoreLink { store, epoch, pending: VecDeque::new() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn store_error(e: StoreError) -> RemoteError {
    let (addr, message) = ("store".to_string(), e.to_string());
    match e {
        StoreError::Full { .. } => RemoteError::Full { addr, message },
        StoreError::Fenced { .. } => RemoteError::Fenced { addr, message },
        _ => RemoteError::Server { addr, message },
    }
}

impl Link for StoreLink {
    fn journal(&self) -> ServerJournal {
        let s = self.lock();
        ServerJournal { epoch: s.epoch, first_tid: s.first_tid, last_tid: s.last_tid, quota_bytes: s.quota_bytes, used_bytes: s.used_bytes() }
    }
    fn send_append(&mut self, tid: u64, block_size: u32, blocks: Vec<u8>) -> Result<(), RemoteError> {
        let epoch = self.epoch;
        self.lock().append(tid, epoch, block_size, &blocks).map_err(store_error)?;
        self.pending.push_back(tid);
        Ok(())
    }
    fn wait_ack(&mut self) -> Result<u64, RemoteError> {
        let tid = self.pending.pop_front().ok_or_else(|| store_error(StoreError::Order { tid: 0, last: 0 }))?;
        self.lock().sync().map_err(store_error)?;
        Ok(tid)
    }
    fn trim(&mut self, upto: u64) -> Result<u64, RemoteError> {
        let epoch = self.epoch;
        let mut s = self.lock();
        s.trim(upto, epoch).map_err(store_error)?;
        Ok(s.first_tid)
    }
    fn read_from(&mut self, from: u64) -> Result<Vec<(u64, u32, Vec<u8>)>, RemoteError> {
        self.lock().read_from(from).map_err(store_error)
    }
    fn fence(&mut self, epoch: u64) -> Result<u64, RemoteError> {
        let last = {
            let mut s = self.lock();
            s.fence(epoch).map_err(store_error)?;
            s.last_tid
        };
        self.epoch = epoch;
        Ok(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The history of appends is kept for crash states only: a server without a recorder
    /// (the simulator's) holds what is not trimmed, and nothing more.
    #[test]
    fn only_a_recorded_server_keeps_every_append() {
        let run = |recorder: Option<Arc<CrashRecorder>>| {
            let log = Arc::new(Mutex::new(MemLog::default()));
            let mut s = MemServer::new(log.clone(), recorder);
            for tid in 1..=10 {
                s.send_append(tid, 512, vec![tid as u8; 512]).unwrap();
                assert_eq!(s.wait_ack().unwrap(), tid);
            }
            s.trim(8).unwrap();
            let l = log.lock().unwrap();
            assert_eq!(l.held.keys().copied().collect::<Vec<_>>(), vec![9, 10]);
            (l.appended.len(), l.sends.len(), l.trims.len())
        };
        assert_eq!(run(None), (0, 10, 1));
        assert_eq!(run(Some(CrashRecorder::new())), (10, 10, 1));
    }
}

//! Commit: write a transaction's blocks to the log (thesis section 3.2; jbd2 commit.c).
//!
//! The commit closes the running transaction, opens the next one, freezes the contents of
//! every block it owns (an `Arc` clone, copied on the next write) and lays the transaction out
//! in the log:
//!
//! ```text
//!   [revoke ...][descriptor][block ...][descriptor][block ...] ... [commit]
//! ```
//!
//! The commit record carries a CRC over all the blocks before it, so the whole transaction is
//! written in one batch followed by one flush of the log device: a torn or missing block fails
//! the check at recovery and the transaction is discarded whole. Under `ordered` the data
//! blocks are written and flushed first, in a stage of their own; under `writeback` they go in
//! the same batch as the journal blocks.
//!
//! While the commit's I/O is in flight, new handles run in the next transaction: concurrent
//! syncs share that next commit (group commit).

use super::content::DataDisposition;
use super::plan::{BlockKind, DevId, IoPlan, IoWrite};
use super::transaction::{Tid, Transaction, TxState};
use super::{Journal, LoggedTx};
use crate::cache::Cache;
use crate::format::journal::{self as jf, CommitBlock, Descriptor, RevokeBlock, Tag};
use std::sync::Arc;

/// The transaction whose commit I/O is in flight.
#[derive(Debug)]
pub struct Committing {
    pub tx: Transaction,
    pub start: u64,
    pub end: u64,
    /// The frozen contents written to the log.
    pub journaled: Vec<(u64, Arc<Vec<u8>>)>,
}

/// What a commit asks the runtime to do, and what it did, for the counters.
#[derive(Debug)]
pub struct CommitPlan {
    pub tid: Tid,
    pub io: IoPlan,
    pub journal_blocks: u64,
    pub handles: u32,
}

/// What a finished commit released to the allocator.
#[derive(Debug, Default)]
pub struct CommitDone {
    pub tid: Tid,
    pub freed_blocks: Vec<u64>,
    pub freed_inodes: Vec<u32>,
}

impl Journal {
    /// Starts committing the running transaction. `None` if it has no handles.
    pub fn commit_begin(&mut self, cache: &mut Cache, wall_ns: i64) -> Option<CommitPlan> {
        assert!(self.committing.is_none(), "one commit at a time");
        if self.running.is_empty() || self.aborted.is_some() {
            return None;
        }
        let next = Transaction::new(self.running.tid + 1);
        let mut tx = std::mem::replace(&mut self.running, next);
        tx.lock();
        tx.start_commit();
        let size = self.tx_blocks(tx.journaled.len() as u64, tx.revoked.len() as u64);
        assert!(size <= self.free_blocks(), "admission keeps every transaction within free log space");

        let bs = self.cfg.block_size;
        let region = self.cfg.region;
        let log_dev = region.dev();
        let start = self.head;
        let mut w = LogWriter { region, dev: log_dev, pos: start, hash: jf::tx_hash_seed(tx.tid), writes: Vec::with_capacity(size as usize) };

        // Revoke records (jbd2 writes them first as well).
        let revoked: Vec<u64> = tx.revoked.iter().copied().collect();
        for chunk in revoked.chunks(RevokeBlock::capacity(bs)) {
            let mut b = vec![0u8; bs];
            RevokeBlock { tid: tx.tid, blocks: chunk.to_vec() }.encode(&mut b);
            w.push(Arc::new(b), BlockKind::Revoke);
        }

        // Descriptors and the frozen blocks they tag.
        let journaled: Vec<(u64, Arc<Vec<u8>>)> = tx
            .journaled
            .iter()
            .map(|&b| (b, cache.peek(b).expect("a block in a transaction stays cached").data.clone()))
            .collect();
        for group in journaled.chunks(Descriptor::capacity(bs)) {
            let mut tags = Vec::with_capacity(group.len());
            let mut blocks = Vec::with_capacity(group.len());
            for (fs_block, data) in group {
                let mut flags = 0;
                if !tx.journaled_data.contains(fs_block) {
                    flags |= jf::tag_flags::METADATA;
                }
                let logged = if jf::needs_escape(data) {
                    let mut copy = data.as_ref().clone();
                    jf::escape(&mut copy);
                    flags |= jf::tag_flags::ESCAPED;
                    Arc::new(copy)
                } else {
                    data.clone()
                };
                tags.push(Tag { fs_block: *fs_block, flags, data_hash: jf::data_hash(*fs_block, &logged) });
                let kind = if flags & jf::tag_flags::METADATA != 0 { BlockKind::JournalMeta } else { BlockKind::JournalData };
                blocks.push((logged, kind));
            }
            let mut d = vec![0u8; bs];
            Descriptor { tid: tx.tid, tags }.encode(&mut d);
            w.push(Arc::new(d), BlockKind::Descriptor);
            for (data, kind) in blocks {
                w.push(data, kind);
            }
        }

        let block_count = w.writes.len() as u64;
        let mut c = vec![0u8; bs];
        CommitBlock { tid: tx.tid, block_count, tx_hash: w.hash, commit_time_ns: wall_ns, handle_count: tx.handles }.encode(&mut c);
        w.push(Arc::new(c), BlockKind::Commit);
        assert!(w.writes.len() as u64 <= size, "layout within the reserved size");
        let LogWriter { pos, writes: jwrites, .. } = w;

        let data_writes: Vec<IoWrite> = tx
            .final_data
            .iter()
            .map(|&b| IoWrite { dev: DevId::Fs, block: b, data: cache.peek(b).expect("ordered data stays cached").data.clone(), kind: BlockKind::FinalData })
            .collect();
        let mut commit_flush = vec![log_dev];
        if self.cfg.fault_skip_commit_flush {
            commit_flush.clear();
        }
        let mut io = IoPlan::default();
        match self.policy.data_disposition() {
            DataDisposition::FinalBeforeCommit => {
                io.push(data_writes, vec![DevId::Fs]);
                io.push(jwrites, commit_flush);
            }
            DataDisposition::FinalWithCommit => {
                let flush_fs = !data_writes.is_empty() && log_dev != DevId::Fs;
                let mut all = data_writes;
                all.extend(jwrites);
                if flush_fs {
                    commit_flush.insert(0, DevId::Fs);
                }
                io.push(all, commit_flush);
            }
            DataDisposition::Journal => {
                assert!(data_writes.is_empty(), "data journaling writes no data in place at commit");
                io.push(jwrites, commit_flush);
            }
        }

        let journal_blocks = region.distance(start, pos);
        self.head = pos;
        let plan = CommitPlan { tid: tx.tid, io, journal_blocks, handles: tx.handles };
        self.committing = Some(Committing { tx, start, end: pos, journaled });
        Some(plan)
    }

    /// The commit's I/O completed: the transaction is durable. Moves its blocks to the
    /// checkpoint lists and returns what its frees release.
    pub fn commit_finish(&mut self, cache: &mut Cache, now_ns: u64) -> CommitDone {
        let Committing { mut tx, start, end, journaled } = self.committing.take().expect("a commit in flight");
        assert_eq!(tx.state, TxState::Committing, "finishing a transaction that is committing");
        tx.state = TxState::Committed;
        let tid = tx.tid;
        let mut checkpoint = std::collections::BTreeSet::new();
        let logged: Vec<u64> = journaled.iter().map(|(b, _)| *b).collect();
        for (block, frozen) in journaled {
            let buf = cache.get(block).expect("a block in a transaction stays cached");
            if let Some(older) = buf.cp_tid.replace(tid) {
                if let Some(t) = self.log.iter_mut().find(|t| t.tid == older) {
                    t.checkpoint.remove(&block);
                }
            } else {
                buf.cp_since_ns = now_ns;
            }
            buf.cp_data = Some(frozen);
            if buf.tx == Some(tid) {
                buf.tx = None;
            }
            checkpoint.insert(block);
            self.logged_copies.insert(block, tid);
        }
        for &block in &tx.final_data {
            if let Some(buf) = cache.get(block) {
                if buf.tx == Some(tid) {
                    buf.tx = None;
                }
            }
        }
        // Freed blocks: the revoke records are durable now, so older logged copies will not
        // replay, and nothing may write the block in place any more.
        for &block in &tx.freed {
            if let Some(buf) = cache.forget(block) {
                assert!(buf.tx.is_none() || buf.tx == Some(tid), "a freed block is not reused before its free commits");
                if let Some(owner) = buf.cp_tid {
                    if let Some(t) = self.log.iter_mut().find(|t| t.tid == owner) {
                        t.checkpoint.remove(&block);
                    }
                }
            }
            checkpoint.remove(&block);
        }
        self.log.push_back(LoggedTx { tid, state: TxState::Committed, start, end, checkpoint, logged });
        self.committed_tid = tid;
        CommitDone { tid, freed_blocks: std::mem::take(&mut tx.freed), freed_inodes: std::mem::take(&mut tx.freed_inodes) }
    }

    /// The commit's I/O failed: the journal is aborted and nothing commits after it.
    pub fn commit_failed(&mut self, error: String) {
        self.aborted.get_or_insert(error);
    }
}

/// Lays blocks out in the log from a position, chaining the transaction hash.
struct LogWriter {
    region: super::placement::LogRegion,
    dev: DevId,
    pos: u64,
    hash: u64,
    writes: Vec<IoWrite>,
}

impl LogWriter {
    fn push(&mut self, data: Arc<Vec<u8>>, kind: BlockKind) {
        if kind != BlockKind::Commit {
            self.hash = jf::tx_hash_append(self.hash, &data);
        }
        self.writes.push(IoWrite { dev: self.dev, block: self.region.device_block(self.pos), data, kind });
        self.pos = self.region.next(self.pos);
    }
}

//! The buffer cache: one [`Buffer`] per cached device block, with its journaling state.
//!
//! A buffer's live contents are an `Arc<Vec<u8>>`. A commit freezes a buffer by cloning the
//! `Arc` (no copy); a later write through [`Cache::data_mut`] copies only if the frozen version
//! is still shared (`Arc::make_mut`) — jbd2's frozen data, done by reference counting.
//!
//! Journaling state per buffer:
//! - `tx`: the uncommitted transaction that dirtied it last (it must not reach its final
//!   location before that transaction commits, or a crash would expose uncommitted state);
//! - `cp_tid`/`cp_data`: the newest committed version still owed to its final location, and
//!   the committed transaction whose log space waits for that write (checkpoint);
//! - `cp_since_ns`: when it first became owed, for age-based writeback.
//!
//! Clean buffers (no `tx`, no `cp_tid`) are evicted least-recently-used when the cache grows
//! past its capacity.

use crate::journal::content::Sequence;
use crate::journal::transaction::Tid;
use crate::det::HashMap;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufKind {
    Meta,
    Data,
}

#[derive(Debug)]
pub struct Buffer {
    pub data: Arc<Vec<u8>>,
    pub kind: BufKind,
    pub tx: Option<Tid>,
    pub cp_tid: Option<Tid>,
    pub cp_data: Option<Arc<Vec<u8>>>,
    pub cp_since_ns: u64,
    /// Selective journaling: the decision for the block's current update sequence.
    pub seq: Option<Sequence>,
    last_use: u64,
}

impl Buffer {
    pub fn is_clean(&self) -> bool {
        self.tx.is_none() && self.cp_tid.is_none()
    }
}

pub struct Cache {
    map: HashMap<u64, Buffer>,
    capacity: usize,
    tick: u64,
    block_size: usize,
}

impl Cache {
    pub fn new(block_size: usize, capacity: usize) -> Self {
        Cache { map: HashMap::default(), capacity: capacity.max(64), tick: 0, block_size }
    }

    pub fn block_size(&self) -> usize {
        self.block_size
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn get(&mut self, block: u64) -> Option<&mut Buffer> {
        self.tick += 1;
        let t = self.tick;
        self.map.get_mut(&block).map(|b| {
            b.last_use = t;
            b
        })
    }

    pub fn peek(&self, block: u64) -> Option<&Buffer> {
        self.map.get(&block)
    }

    pub fn contains(&self, block: u64) -> bool {
        self.map.contains_key(&block)
    }

    /// Inserts a clean buffer read from (or known to equal) the device.
    pub fn insert(&mut self, block: u64, data: Vec<u8>, kind: BufKind) -> &mut Buffer {
        assert_eq!(data.len(), self.block_size);
        self.tick += 1;
        let buf = Buffer { data: Arc::new(data), kind, tx: None, cp_tid: None, cp_data: None, cp_since_ns: 0, seq: None, last_use: self.tick };
        self.map.insert(block, buf);
        self.map.get_mut(&block).unwrap()
    }

    /// Mutable contents of a cached block (copy-on-write if a commit froze it).
    pub fn data_mut(&mut self, block: u64) -> &mut Vec<u8> {
        let b = self.map.get_mut(&block).expect("data_mut on an uncached block");
        Arc::make_mut(&mut b.data)
    }

    /// Drops a buffer regardless of state (the block was freed and its freeing committed).
    pub fn forget(&mut self, block: u64) -> Option<Buffer> {
        self.map.remove(&block)
    }

    /// Evicts least-recently-used clean buffers until the cache is within capacity.
    pub fn shrink(&mut self) {
        if self.map.len() <= self.capacity {
            return;
        }
        let mut clean: Vec<(u64, u64)> = self.map.iter().filter(|(_, b)| b.is_clean()).map(|(&k, b)| (b.last_use, k)).collect();
        clean.sort_unstable();
        let excess = self.map.len() - self.capacity * 3 / 4;
        for (_, k) in clean.into_iter().take(excess) {
            self.map.remove(&k);
        }
    }

}

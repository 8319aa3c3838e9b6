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
//! past its capacity. Owed buffers cannot be evicted (their space in the journal waits for
//! them), so a cache can hold more than its capacity until a checkpoint writes them home; a
//! scan that could not bring it back within its capacity is not repeated until the cache has
//! grown by another eighth (each scan looks at every buffer: repeated on every write, under
//! the engine's state lock, it stalled 100 writers for whole checkpoints; docs/BENCHMARKS.md).
//! Over an nvm journal a buffer owed to checkpoint whose newest committed version is frozen in
//! NVM may be **parked** as well (UBJ: frozen blocks stay cached, in NVM):
//! its data is dropped from DRAM and its journaling state kept; whoever needs it again loads it
//! from NVM first (`Fs::bread`, and the engine before a checkpoint), and a parked buffer's
//! empty data never passes for contents (any use of it fails loudly).

use crate::ids::{HomeBlock, Tid};
use crate::det::HashMap;
use std::sync::Arc;

/// Selective journaling's decision for a block's update sequence (Okeanos paper section 3):
/// made by the first update after the block last reached its final location, kept until it
/// reaches it again. The cache keeps it with the buffer; the content policies decide it
/// (journal/content/).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sequence {
    Journaled,
    InPlace,
}

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
    /// Parked: the NVM offset of the frozen copy that holds its data (and `cp_data`), or the
    /// log block it was in when parked (manylogs: a swap may move it; the placement's map
    /// says where it is now).
    pub parked: Option<u64>,
    /// A block of an O_DUR file: not written home for age (only for space, or when asked).
    pub durable: bool,
    last_use: u64,
}

impl Buffer {
    pub fn is_clean(&self) -> bool {
        self.tx.is_none() && self.cp_tid.is_none()
    }
}

pub struct Cache {
    map: HashMap<HomeBlock, Buffer>,
    capacity: usize,
    tick: u64,
    block_size: usize,
    parked: usize,
    /// After a shrink that left the cache over its capacity: no new scan until it holds more
    /// resident buffers than this (0: scan whenever over capacity).
    rescan_above: usize,
    /// Shrinks that looked at every buffer (tests count them).
    scans: u64,
    /// Insertions per block, counted modulo [`GENERATIONS`] slots (blocks sharing a slot share
    /// a count): a block read from the device without the state lock is taken only if its
    /// slot's count did not move meanwhile ([`Cache::generation`]).
    generations: Vec<u32>,
    /// Block buffers nothing refers to any more, kept for the next copy-on-write or new block
    /// ([`Cache::recycle`], [`Cache::insert_zeroed`]): an append to a block whose last version
    /// is owed to checkpoint copies it, and the version it replaces is let go at the next
    /// commit; an append of whole blocks fills new buffers while eviction lets go of old ones
    /// a quarter of the cache at a time. Each is a block-sized allocation and free otherwise,
    /// under the state lock, and the allocator gives a freed quarter back to the kernel only
    /// to fault it in again page by page (issue 33: 10% of the samples of 4 KiB appends).
    spare: Vec<Arc<Vec<u8>>>,
}

/// At least this many spare buffers may be kept; more while the cache is under its capacity
/// (the spares and the resident buffers together stay within it).
const SPARE_MAX: usize = 256;

/// Slots of the insertion counts: a collision only makes a read outside the lock read again.
const GENERATIONS: usize = 4096;

impl Cache {
    pub fn new(block_size: usize, capacity: usize) -> Self {
        Cache { map: HashMap::default(), capacity: capacity.max(64), tick: 0, block_size, parked: 0, rescan_above: 0, scans: 0, generations: vec![0; GENERATIONS], spare: Vec::new() }
    }

    /// How many times `block` (or a block sharing its slot) was inserted. A block absent from
    /// the cache whose count is the same at two moments was not cached in between; since the
    /// device's copy of a block only changes by writing a cached buffer, its device contents
    /// did not change either (`Fs::read_via`, reads outside the state lock).
    pub fn generation(&self, block: HomeBlock) -> u32 {
        self.generations[(block.get() % GENERATIONS as u64) as usize]
    }

    fn inserted(&mut self, block: HomeBlock) {
        let g = &mut self.generations[(block.get() % GENERATIONS as u64) as usize];
        *g = g.wrapping_add(1);
    }

    fn resident(&self) -> usize {
        self.map.len() - self.parked
    }

    /// Whether a shrink should scan now: over capacity, and grown since a scan that could not
    /// bring it back within it (forgotten once the cache is within its capacity again).
    fn shrink_due(&mut self) -> bool {
        let r = self.resident();
        if r <= self.capacity {
            self.rescan_above = 0;
            return false;
        }
        r > self.rescan_above
    }

    /// Records how a shrink ended: within capacity, or over it (wait for another eighth).
    fn shrink_done(&mut self) {
        let r = self.resident();
        self.rescan_above = if r > self.capacity { r + self.capacity / 8 } else { 0 };
    }

    /// Shrinks that scanned the whole cache so far.
    pub fn scans(&self) -> u64 {
        self.scans
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

    pub fn get(&mut self, block: HomeBlock) -> Option<&mut Buffer> {
        self.tick += 1;
        let t = self.tick;
        self.map.get_mut(&block).map(|b| {
            b.last_use = t;
            b
        })
    }

    pub fn peek(&self, block: HomeBlock) -> Option<&Buffer> {
        self.map.get(&block)
    }

    pub fn contains(&self, block: HomeBlock) -> bool {
        self.map.contains_key(&block)
    }

    /// Inserts a buffer owed by committed transaction `owner` whose data is not in memory but
    /// at log block `at` (a block a manylogs recovery kept logged): parked from the start.
    pub fn insert_parked(&mut self, block: HomeBlock, at: u64, owner: Tid, kind: BufKind, since_ns: u64) {
        assert!(!self.map.contains_key(&block), "a kept block is cached once");
        self.tick += 1;
        let buf = Buffer { data: Arc::new(Vec::new()), kind, tx: None, cp_tid: Some(owner), cp_data: None, cp_since_ns: since_ns, seq: None, parked: Some(at), durable: false, last_use: self.tick };
        self.inserted(block);
        self.map.insert(block, buf);
        self.parked += 1;
    }

    /// Inserts a clean buffer read from (or known to equal) the device.
    pub fn insert(&mut self, block: HomeBlock, data: Vec<u8>, kind: BufKind) -> &mut Buffer {
        assert_eq!(data.len(), self.block_size);
        self.insert_shared(block, Arc::new(data), kind)
    }

    /// Inserts a buffer of zeros (a new block, or one about to be written whole), made of a
    /// spare buffer when there is one: a block-sized allocation an append otherwise.
    pub fn insert_zeroed(&mut self, block: HomeBlock, kind: BufKind) -> &mut Buffer {
        let data = match self.spare.pop() {
            Some(mut d) => {
                Arc::get_mut(&mut d).expect("spare buffers are not shared").fill(0);
                d
            }
            None => Arc::new(vec![0u8; self.block_size]),
        };
        self.insert_shared(block, data, kind)
    }

    fn insert_shared(&mut self, block: HomeBlock, data: Arc<Vec<u8>>, kind: BufKind) -> &mut Buffer {
        self.tick += 1;
        let buf = Buffer { data, kind, tx: None, cp_tid: None, cp_data: None, cp_since_ns: 0, seq: None, parked: None, durable: false, last_use: self.tick };
        assert!(self.map.get(&block).is_none_or(|b| b.parked.is_none()), "a parked buffer is loaded back, not replaced");
        self.inserted(block);
        self.map.insert(block, buf);
        self.map.get_mut(&block).unwrap()
    }

    /// Mutable contents of a cached block (copy-on-write if a commit froze it, into a spare
    /// buffer when there is one).
    pub fn data_mut(&mut self, block: HomeBlock) -> &mut Vec<u8> {
        let Cache { map, spare, .. } = self;
        let b = map.get_mut(&block).expect("data_mut on an uncached block");
        assert!(b.parked.is_none(), "block {block} is parked: load it from NVM first");
        if Arc::get_mut(&mut b.data).is_none() {
            b.data = match spare.pop() {
                Some(mut copy) => {
                    Arc::get_mut(&mut copy).expect("spare buffers are not shared").copy_from_slice(&b.data);
                    copy
                }
                None => Arc::new(b.data.to_vec()),
            };
        }
        Arc::get_mut(&mut b.data).expect("copied: not shared")
    }

    /// Takes back a block's contents let go by the journal (a committed version replaced by a
    /// newer one, a transaction's differential base): kept for the next copy-on-write if
    /// nothing else refers to it any more, dropped otherwise.
    pub fn recycle(&mut self, mut data: Arc<Vec<u8>>) {
        let room = SPARE_MAX.max(self.capacity.saturating_sub(self.resident()));
        if self.spare.len() < room && Arc::get_mut(&mut data).is_some_and(|d| d.len() == self.block_size) {
            self.spare.push(data);
        }
    }

    /// Drops a buffer regardless of state (the block was freed and its freeing committed).
    pub fn forget(&mut self, block: HomeBlock) -> Option<Buffer> {
        let b = self.map.remove(&block);
        if b.as_ref().is_some_and(|b| b.parked.is_some()) {
            self.parked -= 1;
        }
        b
    }

    /// Where the data of a parked buffer is in NVM.
    pub fn parked_at(&self, block: HomeBlock) -> Option<u64> {
        self.map.get(&block).and_then(|b| b.parked)
    }

    /// Parked buffers: (block, NVM offset).
    pub fn parked_blocks(&self) -> Vec<(HomeBlock, u64)> {
        let mut v: Vec<(HomeBlock, u64)> = self.map.iter().filter_map(|(&k, b)| b.parked.map(|at| (k, at))).collect();
        v.sort_unstable();
        v
    }

    /// Buffers parked now.
    pub fn parked_count(&self) -> usize {
        self.parked
    }

    /// A parked buffer's data, loaded back from NVM: it is the block's newest committed
    /// version, owed to checkpoint as before.
    pub fn unpark(&mut self, block: HomeBlock, data: Vec<u8>) {
        assert_eq!(data.len(), self.block_size);
        let b = self.map.get_mut(&block).expect("unparking a cached buffer");
        assert!(b.parked.take().is_some(), "block {block} is not parked");
        b.data = Arc::new(data);
        b.cp_data = Some(b.data.clone());
        self.parked -= 1;
    }

    /// Evicts every clean buffer (tests: eviction at a moment they choose).
    #[cfg(test)]
    pub fn evict_every_clean(&mut self) {
        self.map.retain(|_, b| !b.is_clean());
    }

    /// Evicts least-recently-used clean buffers until the cache is within capacity.
    pub fn shrink(&mut self) {
        if !self.shrink_due() {
            return;
        }
        self.evict_clean();
        self.shrink_done();
    }

    fn evict_clean(&mut self) {
        self.scans += 1;
        let mut clean: Vec<(u64, HomeBlock)> = self.map.iter().filter(|(_, b)| b.is_clean()).map(|(&k, b)| (b.last_use, k)).collect();
        clean.sort_unstable();
        let excess = self.resident().saturating_sub(self.capacity * 3 / 4);
        for (_, k) in clean.into_iter().take(excess) {
            let b = self.map.remove(&k).expect("listed");
            assert!(b.parked.is_none(), "a clean buffer is never parked");
            self.recycle(b.data);
        }
    }

    /// Evicts least-recently-used clean buffers until the cache is within capacity; if it is
    /// still over, parks least-recently-used owed buffers whose newest committed version
    /// `frozen` says is in NVM (at the offset it returns) and that nothing changed since.
    pub fn shrink_with(&mut self, frozen: &dyn Fn(HomeBlock) -> Option<u64>) {
        if !self.shrink_due() {
            return;
        }
        self.evict_clean();
        self.park_owed(frozen);
        self.shrink_done();
    }

    fn park_owed(&mut self, frozen: &dyn Fn(HomeBlock) -> Option<u64>) {
        if self.resident() <= self.capacity {
            return;
        }
        let mut owed: Vec<(u64, HomeBlock)> = self
            .map
            .iter()
            .filter(|(_, b)| b.tx.is_none() && b.parked.is_none() && b.cp_tid.is_some() && b.cp_data.as_ref().is_some_and(|d| Arc::ptr_eq(d, &b.data)))
            .map(|(&k, b)| (b.last_use, k))
            .collect();
        owed.sort_unstable();
        for (_, k) in owed.into_iter() {
            if self.resident() <= self.capacity * 3 / 4 {
                break;
            }
            let Some(at) = frozen(k) else { continue };
            let b = self.map.get_mut(&k).expect("listed");
            b.parked = Some(at);
            b.data = Arc::new(Vec::new());
            b.cp_data = None;
            self.parked += 1;
        }
    }

}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache full of owed buffers (none can be evicted) scans once, then not again until it
    /// has grown by an eighth of its capacity; once buffers are clean, the next scan evicts.
    #[test]
    fn a_cache_of_owed_buffers_is_not_rescanned_on_every_insert() {
        let mut c = Cache::new(512, 64);
        for b in 0..200u64 {
            let buf = c.insert(HomeBlock::new(b), vec![0; 512], BufKind::Data);
            buf.cp_tid = Some(Tid::new(1));
            c.shrink();
        }
        // Over 64 from the 65th insert: a scan there, then one every 8 more (64 / 8).
        assert!(c.scans() <= 1 + (200 - 65) / 8 + 1, "{} scans for 136 inserts over capacity", c.scans());
        assert!(c.scans() >= 2, "the cache kept growing, so it looked again: {}", c.scans());
        assert_eq!(c.len(), 200, "owed buffers are never evicted");
        for b in 0..200u64 {
            c.get(HomeBlock::new(b)).unwrap().cp_tid = None;
        }
        let before = c.scans();
        for b in 200..216u64 {
            c.insert(HomeBlock::new(b), vec![0; 512], BufKind::Data);
            c.shrink();
        }
        assert!(c.scans() > before, "grown past the mark: scanned again");
        assert!(c.len() <= 64, "clean buffers evicted once scanned: {}", c.len());
    }

    /// A write to a frozen block copies it (into a spare buffer once one was given back) and
    /// leaves the frozen version as it was; only buffers nothing else refers to are kept.
    #[test]
    fn copy_on_write_reuses_only_unshared_buffers() {
        let mut c = Cache::new(512, 64);
        let b = HomeBlock::new(7);
        c.insert(b, vec![1; 512], BufKind::Data);
        let frozen = c.peek(b).unwrap().data.clone();
        c.data_mut(b)[0] = 2;
        assert_eq!(frozen[0], 1, "the frozen version does not see the write");
        assert_eq!(c.peek(b).unwrap().data[..4], [2, 1, 1, 1]);

        // Shared: not kept. Let go of its last other reference: kept, and used by the next copy.
        let live = c.peek(b).unwrap().data.clone();
        c.recycle(live.clone());
        assert!(c.spare.is_empty(), "a buffer the cache still uses is not a spare");
        c.recycle(frozen);
        assert_eq!(c.spare.len(), 1);
        let spare = Arc::as_ptr(&c.spare[0]);
        c.data_mut(b)[1] = 3;
        assert!(std::ptr::eq(Arc::as_ptr(&c.peek(b).unwrap().data), spare), "the copy went into the spare buffer");
        assert_eq!(c.peek(b).unwrap().data[..4], [2, 3, 1, 1], "the copy holds the whole block, then the write");
        assert_eq!(live[..4], [2, 1, 1, 1], "the version it was copied from is untouched");
        assert!(c.spare.is_empty());

        // Unshared: written in place, no copy.
        let at = Arc::as_ptr(&c.peek(b).unwrap().data);
        c.data_mut(b)[2] = 4;
        assert!(std::ptr::eq(Arc::as_ptr(&c.peek(b).unwrap().data), at));

        // Buffers of another size, and more than SPARE_MAX, are dropped.
        c.recycle(Arc::new(vec![0; 100]));
        assert!(c.spare.is_empty());
        for _ in 0..SPARE_MAX + 10 {
            c.recycle(Arc::new(vec![0; 512]));
        }
        assert_eq!(c.spare.len(), SPARE_MAX);
    }

    /// Eviction keeps what it lets go of as spares while the cache is under its capacity, and
    /// a new block's buffer is a spare, zeroed.
    #[test]
    fn evicted_buffers_become_new_blocks() {
        let cap = 1024;
        let mut c = Cache::new(512, cap);
        for i in 0..cap as u64 + 1 {
            c.insert(HomeBlock::new(100 + i), vec![7; 512], BufKind::Data);
        }
        c.shrink();
        let resident = c.resident();
        assert!(resident <= cap * 3 / 4, "evicted to three quarters: {resident}");
        assert_eq!(c.spare.len() + resident, cap, "evicted buffers kept as spares up to the capacity");
        let spare = Arc::as_ptr(c.spare.last().unwrap());
        let b = HomeBlock::new(5);
        c.insert_zeroed(b, BufKind::Data);
        assert!(std::ptr::eq(Arc::as_ptr(&c.peek(b).unwrap().data), spare), "the new block's buffer is the spare");
        assert!(c.peek(b).unwrap().data.iter().all(|&x| x == 0), "and zeroed");
    }
}

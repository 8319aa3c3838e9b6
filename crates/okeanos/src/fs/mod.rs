//! The file system: namespace and file operations over the buffer cache.
//!
//! Every operation runs as one journal handle ([`crate::engine`] opens and closes it) on
//! an [`Fs`] context: the engine's locked state, the device to read missing blocks from, and
//! the time of the operation. Operations check everything that can fail on input (names, types,
//! free space) before they dirty a block, so an expected error leaves no trace; an unexpected
//! one after a block was dirtied (an I/O error on a read, corruption found mid-way) aborts the
//! journal, which keeps the on-disk state at the last commit and turns the file system
//! read-only.

pub mod acl;
pub mod alloc;
pub mod dir;
pub mod durable;
pub mod file;
pub mod fsck;
pub mod inode;
pub mod mkfs;
pub mod namespace;
pub mod overwrites;
pub mod xattr;

use crate::cache::{BufKind, Cache};
use crate::device::Device;
use crate::format::{GroupDesc, Superblock};
use crate::ids::{DevBlock, HomeBlock, Tid};
use crate::journal::Journal;
use crate::det::{HashMap, HashSet};

pub use dir::DirIndex;
pub use inode::MemInode;
pub use overwrites::{OverwriteMap, Overwrites};

pub use crate::error::{FsError, FsResult};

/// What a sync must wait for ([`FsState::sync_need`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatasyncNeed {
    /// Everything is durable.
    Nothing,
    /// The commit of this transaction.
    Commit(Tid),
    /// These overwritten blocks, written in place and flushed (journal/datasync.rs); the
    /// caller asks for them and records the request ([`FsState::in_place_asked`]).
    InPlace(Vec<HomeBlock>),
    /// Nothing overwritten since the file's last in-place request: that request (its ticket),
    /// or the commit of transaction `tid` that holds its blocks, whichever comes first.
    Asked { ticket: u64, tid: Tid },
}

/// Everything the engine keeps under its state lock.
pub struct FsState {
    pub sb: Superblock,
    pub gdt: Vec<GroupDesc>,
    /// The sums of the group descriptors' free blocks and free inodes, kept with them by the
    /// bitmap's one writer (`Fs::flip`): a write asks for them twice, and summing thousands
    /// of groups each time cost a 256 GiB file system 5% of a 4 KiB append's samples.
    pub free_block_total: u64,
    pub free_inode_total: u64,
    pub cache: Cache,
    pub journal: Journal,
    pub inodes: HashMap<u32, MemInode>,
    pub dirs: HashMap<u32, DirIndex>,
    pub open_count: HashMap<u32, u32>,
    /// Blocks of free space set aside for staged appends that may start a new block
    /// (engine/stage.rs): not allocatable by anything else until their stages give them back.
    pub set_aside_blocks: u64,
    /// Blocks and inodes freed by uncommitted transactions: not reusable yet.
    pub pending_free_blocks: HashSet<HomeBlock>,
    pub pending_free_inodes: HashSet<u32>,
    /// The last transaction that changed each inode (fsync) and its data or size (fdatasync).
    pub sync_tid: HashMap<u32, Tid>,
    pub datasync_tid: HashMap<u32, Tid>,
    /// Blocks of each file overwritten in place since its data last needed a commit, with
    /// the transaction that holds them: an fdatasync writes them in place without a commit
    /// (journal/datasync.rs) while that is the running transaction.
    pub overwrites: OverwriteMap,
    /// The durable watermark of each file changed since the mount ([`durable`]).
    pub watermarks: HashMap<u32, durable::Watermark>,
    /// Unlinked inodes whose last handle closed: their blocks are freed by the next operation.
    pub deferred_evict: Vec<u32>,
    /// Inodes some thread is evicting now.
    pub evicting: HashSet<u32>,
    /// Bumped whenever a handle dirties a block; tells whether a failed handle left changes.
    pub dirty_epoch: u64,
    /// Blocks read from the device (cache misses, parked blocks loaded back).
    pub read_misses: u64,
    /// Why the file system turned read-only, if it did.
    pub read_only: Option<String>,
    /// Next allocation goal per group (next-fit).
    pub alloc_cursor: Vec<HomeBlock>,
    /// Per group, its free-block count when a search found no free stretch of 64 blocks there
    /// (alloc.rs): the group is not searched for one again until blocks are freed in it.
    pub stretchless: Vec<Option<u32>>,
    /// Where parked buffers load their data from, if the journal lets the cache park any.
    pub parking: Option<Parking>,
    /// A block-sized buffer for encodings compared against the cache (inode stores): one
    /// allocation for the mount, not one an append.
    pub scratch: Vec<u8>,
}

/// Where a parked buffer's data is (cache.rs): the journal keeps the block's newest committed
/// version addressable there while it is owed to checkpoint.
#[derive(Clone)]
pub enum Parking {
    /// An nvm journal's frozen slot (UBJ): the position is an offset in the NVM.
    Nvm(std::sync::Arc<dyn crate::nvm::Nvm>),
    /// A manylogs log on the file-system device: the position is a device block, checked
    /// against the journal tag's hash when loaded.
    Logs(std::sync::Arc<dyn Device>),
}

/// One operation's view of the state.
pub struct Fs<'a> {
    pub st: &'a mut FsState,
    pub dev: &'a dyn Device,
    /// Wall-clock time of the operation, for timestamps.
    pub now_ns: i64,
}

impl FsState {
    /// Whether the placement parks committed blocks in NVM slots (its capacity is then the
    /// slots, which the statistics report).
    pub fn nvm_parking(&self) -> bool {
        matches!(self.parking, Some(Parking::Nvm(_)))
    }

    /// The state of a file system just mounted (or opened for fsck).
    pub fn new(sb: Superblock, gdt: Vec<GroupDesc>, journal: Journal, cache_blocks: usize, read_only: Option<String>) -> Self {
        let groups = sb.group_count as usize;
        let bs = sb.block_size as usize;
        let free_block_total = gdt.iter().map(|g| g.free_blocks as u64).sum();
        let free_inode_total = gdt.iter().map(|g| g.free_inodes as u64).sum();
        FsState {
            sb,
            gdt,
            free_block_total,
            free_inode_total,
            cache: Cache::new(bs, cache_blocks),
            journal,
            inodes: HashMap::default(),
            dirs: HashMap::default(),
            open_count: HashMap::default(),
            set_aside_blocks: 0,
            pending_free_blocks: HashSet::default(),
            pending_free_inodes: HashSet::default(),
            sync_tid: HashMap::default(),
            datasync_tid: HashMap::default(),
            overwrites: OverwriteMap::default(),
            watermarks: HashMap::default(),
            deferred_evict: Vec::new(),
            evicting: HashSet::default(),
            dirty_epoch: 0,
            read_misses: 0,
            read_only,
            alloc_cursor: vec![HomeBlock::NONE; groups],
            stretchless: vec![None; groups],
            parking: None,
            scratch: Vec::new(),
        }
    }

    /// Loads a parked buffer's data back from where the journal keeps it (nothing if it is
    /// not parked). A logged copy that does not match its tag's hash is an I/O error.
    pub fn unpark(&mut self, block: HomeBlock) -> FsResult<()> {
        let Some(at) = self.cache.parked_at(block) else { return Ok(()) };
        let mut data = vec![0u8; self.block_size()];
        match self.parking.as_ref().expect("only a journal that parks buffers parks them") {
            Parking::Nvm(nvm) => nvm.load(at, &mut data)?,
            Parking::Logs(dev) => {
                // Where the block is now: a log swap may have moved it since it was parked.
                let at = self.journal.frozen_copy(block).unwrap_or(at);
                dev.read_at(DevBlock::new(at).byte(data.len() as u64), &mut data)?;
                let expect = self.journal.frozen_hash(block);
                if expect != Some(crate::format::journal::data_hash(block, 0, &data)) {
                    return Err(FsError::Io(format!("the logged copy of block {block} at device block {at} does not match its journal checksum")));
                }
                self.journal.note_log_read();
            }
        }
        self.read_misses += 1;
        self.cache.unpark(block, data);
        Ok(())
    }

    /// Loads parked buffers back before a checkpoint writes them home from the cache (nvm);
    /// a journal that parks on the file-system device copies them home instead (manylogs).
    pub fn unpark_all(&mut self) -> FsResult<()> {
        if matches!(self.parking, Some(Parking::Logs(_))) {
            return Ok(());
        }
        for (block, _) in self.cache.parked_blocks() {
            self.unpark(block)?;
        }
        Ok(())
    }

    /// Shrinks the cache: clean buffers first, then owed buffers whose newest version the
    /// journal keeps addressable (nvm: frozen in NVM; manylogs: in a log) are parked.
    pub fn shrink_cache(&mut self) {
        let FsState { cache, journal, parking, .. } = self;
        if parking.is_some() {
            cache.shrink_with(&|b| journal.frozen_copy(b));
        } else {
            // Nothing can be parked: skip the scan of owed buffers on every operation.
            cache.shrink();
        }
    }

    pub fn block_size(&self) -> usize {
        self.sb.block_size as usize
    }

    /// Free blocks that may be allocated now.
    pub fn allocatable_blocks(&self) -> u64 {
        debug_assert_eq!(self.free_block_total, self.gdt.iter().map(|g| g.free_blocks as u64).sum::<u64>(), "free block total drifted from the groups'");
        self.free_block_total.saturating_sub(self.pending_free_blocks.len() as u64 + self.set_aside_blocks)
    }

    pub fn allocatable_inodes(&self) -> u64 {
        debug_assert_eq!(self.free_inode_total, self.gdt.iter().map(|g| g.free_inodes as u64).sum::<u64>(), "free inode total drifted from the groups'");
        self.free_inode_total.saturating_sub(self.pending_free_inodes.len() as u64)
    }

    /// Records that the running transaction changed inode `ino` (and its data if `data`).
    pub fn touch(&mut self, ino: u32, data: bool) {
        let tid = self.journal.running_tid();
        self.sync_tid.insert(ino, tid);
        if data {
            self.datasync_tid.insert(ino, tid);
        }
    }

    /// Records that the running transaction changed file `ino` only by overwriting `blocks`
    /// in place (each [`Journal::syncs_in_place`]): fsync still needs a commit (the
    /// timestamps), fdatasync only the blocks. Overwrites of an older transaction still in
    /// flight need its commit.
    ///
    /// [`Journal::syncs_in_place`]: crate::journal::Journal::syncs_in_place
    pub fn touch_overwrite(&mut self, ino: u32, blocks: impl IntoIterator<Item = HomeBlock>) {
        let (tid, committed) = (self.journal.running_tid(), self.journal.committed_tid());
        self.sync_tid.insert(ino, tid);
        let (entry, older) = self.overwrites.running(ino, tid, committed);
        entry.pending.extend(blocks);
        if let Some(older) = older {
            let d = self.datasync_tid.entry(ino).or_insert(Tid::ZERO);
            *d = (*d).max(older);
        }
    }

    /// The caller of [`datasync_need`](Self::datasync_need) asked for the blocks of
    /// [`DatasyncNeed::InPlace`] in place, with `ticket`: the next fdatasync of `ino` asks only
    /// for blocks overwritten after this, and waits for this request if there are none.
    pub fn in_place_asked(&mut self, ino: u32, ticket: u64) {
        if let Some(o) = self.overwrites.get_mut(ino) {
            o.pending.clear();
            o.ticket = ticket;
        }
    }

    /// What a sync of `ino` needs now: fsync (`datasync` false) the commit of the file's last
    /// change, fdatasync ([`datasync_need`](Self::datasync_need)) possibly only its overwrites.
    pub fn sync_need(&self, ino: u32, datasync: bool) -> DatasyncNeed {
        if datasync {
            return self.datasync_need(ino);
        }
        match self.sync_tid.get(&ino).copied().unwrap_or(Tid::ZERO) {
            t if t > self.journal.committed_tid() => DatasyncNeed::Commit(t),
            _ => DatasyncNeed::Nothing,
        }
    }

    /// What an fdatasync of `ino` needs now.
    pub fn datasync_need(&self, ino: u32) -> DatasyncNeed {
        let j = &self.journal;
        let tid = self.datasync_tid.get(&ino).copied().unwrap_or(Tid::ZERO);
        match self.overwrites.live(ino, j.committed_tid()) {
            None if tid > j.committed_tid() => DatasyncNeed::Commit(tid),
            None => DatasyncNeed::Nothing,
            // The block map and size that lead to the blocks are committed, and the blocks
            // are the running transaction's: in place, in the next step (which serves every
            // request waiting when it starts), unless a commit is wanted: that commit goes
            // first and writes the blocks too, so the sync joins it. A commit or a step in
            // flight does not send the sync to a commit: a step writes a few data blocks and
            // flushes once, where an ordered commit writes its metadata blocks and flushes
            // twice (SQLite at 16 processes 1.10-1.50x, pgbench and 16 fio writers faster too,
            // against joining the group commit whenever the journal was busy;
            // docs/BENCHMARKS.md, "Steps under load").
            Some(o) if tid <= j.committed_tid() && o.tid == j.running_tid() && j.aborted().is_none() => {
                if o.pending.is_empty() {
                    // Nothing overwritten since the last request: it covers the file (or,
                    // with no request and no block, nothing was overwritten).
                    if o.ticket == 0 || j.cfg().faults.datasync_asked_not_awaited {
                        DatasyncNeed::Nothing
                    } else {
                        DatasyncNeed::Asked { ticket: o.ticket, tid: o.tid }
                    }
                } else if j.commit_wanted() {
                    DatasyncNeed::Commit(o.tid)
                } else {
                    DatasyncNeed::InPlace(o.pending.iter().copied().collect())
                }
            }
            Some(o) => DatasyncNeed::Commit(tid.max(o.tid)),
        }
    }

    /// Records that the running transaction changed the bytes of file `ino` from `low` on,
    /// taking its size from `old_size` to `new_size` (the durable watermark, [`durable`]).
    pub fn note_bytes(&mut self, ino: u32, low: u64, old_size: u64, new_size: u64) {
        let (tid, committed) = (self.journal.running_tid(), self.journal.committed_tid());
        self.watermarks.entry(ino).or_insert_with(|| durable::Watermark::new(old_size)).note(tid, low, new_size, committed);
    }

    /// The durable watermark of file `ino` now `size` long.
    pub fn durable_len(&mut self, ino: u32, size: u64) -> u64 {
        let committed = self.journal.committed_tid();
        match self.watermarks.get_mut(&ino) {
            Some(w) => {
                let len = w.durable_len(committed).min(size);
                if w.is_settled() && len == size {
                    self.watermarks.remove(&ino);
                }
                len
            }
            None => size,
        }
    }
}

impl<'a> Fs<'a> {
    pub fn bs(&self) -> usize {
        self.st.block_size()
    }

    /// Makes sure `block` is cached, reading it if needed.
    pub fn bread(&mut self, block: HomeBlock, kind: BufKind) -> FsResult<()> {
        if self.st.cache.contains(block) {
            return self.st.unpark(block);
        }
        if block.get() >= self.st.sb.block_count {
            return Err(FsError::Corrupt(format!("block {block} is past the end of the file system")));
        }
        let mut buf = vec![0u8; self.bs()];
        self.dev.read_at(DevBlock::home(block).byte(self.bs() as u64), &mut buf)?;
        self.cache_device_block(block, buf, kind);
        Ok(())
    }

    /// Caches `data`, just read from the device at `block` (a miss).
    pub fn cache_device_block(&mut self, block: HomeBlock, data: Vec<u8>, kind: BufKind) {
        self.st.read_misses += 1;
        // The disk head is there now (manylogs logs the next commit near it).
        self.st.journal.note_position(DevBlock::home(block));
        self.st.cache.insert(block, data, kind);
    }

    /// The cached contents of `block` (read if needed).
    pub fn block(&mut self, block: HomeBlock, kind: BufKind) -> FsResult<&[u8]> {
        self.bread(block, kind)?;
        Ok(&self.st.cache.get(block).expect("just cached").data[..])
    }

    /// Mutable contents of metadata block `block`, logged by the running transaction.
    pub fn meta_mut(&mut self, block: HomeBlock) -> FsResult<&mut Vec<u8>> {
        self.bread(block, BufKind::Meta)?;
        self.st.dirty_epoch += 1;
        self.st.journal.dirty_metadata(&mut self.st.cache, block, false);
        Ok(self.st.cache.data_mut(block))
    }

    /// Mutable contents of a fresh (just allocated) metadata block, zero-filled, without a read.
    pub fn meta_new(&mut self, block: HomeBlock) -> &mut Vec<u8> {
        // A just-allocated block was freed earlier and forgotten with it: never parked.
        debug_assert!(self.st.cache.parked_at(block).is_none());
        if !self.st.cache.contains(block) {
            self.st.cache.insert_zeroed(block, BufKind::Meta);
        }
        self.st.dirty_epoch += 1;
        self.st.journal.dirty_metadata(&mut self.st.cache, block, true);
        let d = self.st.cache.data_mut(block);
        d.fill(0);
        d
    }

    /// Writes `bytes` at `offset` of a file block mapped to `block`. `fresh` blocks are not read
    /// from the device first. `kind` Meta is used for symlink targets.
    /// `call_len`: the size of the write call this piece belongs to (the content policy may
    /// route by it). `durable`: the file is O_DUR (always logged, not checkpointed for age).
    #[allow(clippy::too_many_arguments)]
    pub fn write_file_block(&mut self, block: HomeBlock, offset: usize, bytes: &[u8], call_len: usize, fresh: bool, kind: BufKind, durable: bool) -> FsResult<()> {
        let bs = self.bs();
        assert!(offset + bytes.len() <= bs);
        self.st.unpark(block)?;
        if !self.st.cache.contains(block) {
            if fresh || bytes.len() == bs {
                self.st.cache.insert_zeroed(block, kind);
            } else {
                self.bread(block, kind)?;
            }
        } else if fresh {
            self.st.cache.data_mut(block).fill(0);
        }
        self.st.dirty_epoch += 1;
        match kind {
            BufKind::Meta => self.st.journal.dirty_metadata(&mut self.st.cache, block, fresh),
            BufKind::Data => self.st.journal.dirty_data(&mut self.st.cache, block, offset, bytes.len(), call_len, fresh, durable),
        }
        self.st.cache.data_mut(block)[offset..offset + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }
}

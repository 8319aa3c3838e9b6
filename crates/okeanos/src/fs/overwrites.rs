//! Which blocks each file overwrote in place, for fdatasync without a commit
//! (journal/datasync.rs; docs/JOURNALING.md, "Overwrites").
//!
//! An entry belongs to one transaction. Once that transaction has committed the entry means
//! nothing (its blocks went out with the commit) and reads as absent; such entries are
//! dropped whenever the map has doubled since it was last pruned, so the map holds the files
//! overwritten by the transactions not yet committed plus at most as many stale ones, not
//! every file ever overwritten since the mount.

use crate::det::HashMap;
use crate::ids::{HomeBlock, Tid};
use std::collections::BTreeSet;

/// A file's overwrites in place in one transaction.
#[derive(Debug, Default)]
pub struct Overwrites {
    /// The transaction that holds them.
    pub tid: Tid,
    /// Blocks overwritten since the file's last in-place request: what its next fdatasync
    /// asks for. The blocks asked for before are the last request's to make durable, and a
    /// step writes a block's current version, so a block asked for once and not written
    /// since needs no second request (an fdatasync asking for every overwritten block again
    /// made each step's planning grow with the transaction: under PostgreSQL's WAL, thousands
    /// of blocks looked at per step).
    pub pending: BTreeSet<HomeBlock>,
    /// The ticket of the file's last in-place request in this transaction (0: none).
    pub ticket: u64,
}

/// The overwrites of every file with some in a transaction not yet committed.
#[derive(Debug, Default)]
pub struct OverwriteMap {
    map: HashMap<u32, Overwrites>,
    /// The size at which stale entries are dropped next.
    prune_at: usize,
}

/// Pruning never runs below this many entries.
const PRUNE_FLOOR: usize = 256;

impl OverwriteMap {
    /// The overwrites of `ino` in a transaction after `committed`, if any.
    pub fn live(&self, ino: u32, committed: Tid) -> Option<&Overwrites> {
        self.map.get(&ino).filter(|o| o.tid > committed)
    }

    pub fn get_mut(&mut self, ino: u32) -> Option<&mut Overwrites> {
        self.map.get_mut(&ino)
    }

    /// Forgets `ino` (its inode was freed).
    pub fn remove(&mut self, ino: u32) {
        self.map.remove(&ino);
    }

    /// Entries held, stale ones included.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The entry of `ino` for the running transaction `tid`, started afresh if the file's
    /// entry belonged to an earlier one. Returns with it that earlier transaction when it is
    /// not committed yet (after `committed`): the file's fdatasync then needs its commit.
    pub fn running(&mut self, ino: u32, tid: Tid, committed: Tid) -> (&mut Overwrites, Option<Tid>) {
        if !self.map.contains_key(&ino) && self.map.len() >= self.prune_at {
            self.map.retain(|_, o| o.tid > committed);
            self.prune_at = (self.map.len() * 2).max(PRUNE_FLOOR);
        }
        let entry = self.map.entry(ino).or_insert_with(|| Overwrites { tid, ..Default::default() });
        let mut older = None;
        if entry.tid != tid {
            if entry.tid > committed {
                older = Some(entry.tid);
            }
            *entry = Overwrites { tid, ..Default::default() };
        }
        (entry, older)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_of_committed_transactions_are_dropped_as_the_map_grows() {
        let mut m = OverwriteMap::default();
        // 100,000 files each overwritten once, a transaction committing every 100 of them.
        let mut peak = 0;
        for ino in 0..100_000u32 {
            let tid = Tid::new(1 + u64::from(ino / 100));
            let committed = tid - 1;
            let (o, older) = m.running(ino, tid, committed);
            assert!(older.is_none());
            o.pending.insert(HomeBlock::new(u64::from(ino)));
            peak = peak.max(m.len());
        }
        assert!(peak <= 2 * PRUNE_FLOOR, "the map grew to {peak} entries for 100 live ones");
        // The live entries of the last transaction are all kept.
        for ino in 99_900..100_000u32 {
            assert!(m.live(ino, Tid::new(999)).is_some(), "{ino}");
        }
        assert!(m.live(5, Tid::new(999)).is_none());
    }

    #[test]
    fn an_entry_of_a_transaction_still_committing_is_reported_and_replaced() {
        let mut m = OverwriteMap::default();
        m.running(7, Tid::new(3), Tid::new(1)).0.pending.insert(HomeBlock::new(40));
        // Transaction 3 is committing (committed is 2), 4 runs.
        let (o, older) = m.running(7, Tid::new(4), Tid::new(2));
        assert_eq!(older, Some(Tid::new(3)));
        assert!(o.pending.is_empty() && o.tid == Tid::new(4));
        // Once 4 committed, a write in 5 starts afresh with nothing to wait for.
        let (_, older) = m.running(7, Tid::new(5), Tid::new(4));
        assert_eq!(older, None);
        // Pruning keeps entries of uncommitted transactions: 5 commits while 6 runs.
        for ino in 100..(100 + PRUNE_FLOOR as u32 * 3) {
            m.running(ino, Tid::new(6), Tid::new(4));
        }
        assert!(m.live(7, Tid::new(4)).is_some(), "the entry of transaction 5 was dropped before it committed");
    }
}

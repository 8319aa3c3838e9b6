//! The durable watermark of a file: the longest prefix `[0, L)` whose bytes, as a reader sees
//! them now, the commits so far made durable (docs/EMBEDDING.md, "The durable watermark").
//!
//! Every change of a file's bytes or size notes the lowest offset it changed and the size it
//! left, with the transaction it joined. A transaction commits whole, and in order; so once
//! transaction `t` has committed, the size the file had at the end of `t` is on the journal
//! (or in place) with all the bytes below it that `t` and earlier transactions wrote. Bytes
//! changed by transactions not yet committed are not: the watermark stops below the lowest of
//! them. Pure bookkeeping: the engine calls [`Watermark::note`] from the operations and reads
//! [`Watermark::durable_len`] under its lock; no I/O, no clock.

use crate::journal::transaction::Tid;

/// One file's watermark state: the size at its last committed change, and its changes not yet
/// known committed (one entry per transaction, so at most a few: the running one and those
/// committing).
#[derive(Debug, Clone, Default)]
pub struct Watermark {
    committed_len: u64,
    /// (transaction, lowest byte changed, size after the change), in transaction order.
    pending: Vec<(Tid, u64, u64)>,
}

impl Watermark {
    /// A file first changed since the mount: `size` (what it had before) is its committed size,
    /// read from the image or created empty.
    pub fn new(size: u64) -> Self {
        Watermark { committed_len: size, pending: Vec::new() }
    }

    /// Folds the changes of transactions up to `committed` into the committed size.
    fn settle(&mut self, committed: Tid) {
        let n = self.pending.iter().take_while(|p| p.0 <= committed).count();
        if n > 0 {
            self.committed_len = self.pending[n - 1].2;
            self.pending.drain(..n);
        }
    }

    /// Transaction `tid` changes the bytes from `low` on, leaving the file `size` long.
    pub fn note(&mut self, tid: Tid, low: u64, size: u64, committed: Tid) {
        self.settle(committed);
        match self.pending.last_mut() {
            Some(p) if p.0 == tid => {
                p.1 = p.1.min(low);
                p.2 = size;
            }
            _ => self.pending.push((tid, low, size)),
        }
    }

    /// The durable length, with transactions up to `committed` committed.
    pub fn durable_len(&mut self, committed: Tid) -> u64 {
        self.settle(committed);
        let mut len = self.committed_len;
        for &(_, low, size) in &self.pending {
            len = len.min(low).min(size);
        }
        len
    }

    /// True when nothing is pending: the state is no different from an untracked file's.
    pub fn is_settled(&self) -> bool {
        self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_become_durable_as_their_transactions_commit() {
        let mut w = Watermark::new(100);
        w.note(Tid::new(5), 100, 228, Tid::new(4)); // append 128 B in transaction 5
        assert_eq!(w.durable_len(Tid::new(4)), 100);
        w.note(Tid::new(6), 228, 356, Tid::new(4)); // and another in 6
        assert_eq!(w.durable_len(Tid::new(4)), 100);
        assert_eq!(w.durable_len(Tid::new(5)), 228);
        assert_eq!(w.durable_len(Tid::new(6)), 356);
        assert!(w.is_settled());
    }

    #[test]
    fn an_overwrite_below_the_watermark_pulls_it_down_until_it_commits() {
        let mut w = Watermark::new(4096);
        w.note(Tid::new(3), 10, 4096, Tid::new(2));
        assert_eq!(w.durable_len(Tid::new(2)), 10);
        w.note(Tid::new(3), 4096, 5000, Tid::new(2)); // the same transaction appends too
        assert_eq!(w.durable_len(Tid::new(2)), 10);
        assert_eq!(w.durable_len(Tid::new(3)), 5000);
    }

    #[test]
    fn a_truncate_lowers_the_watermark_at_once_and_a_later_append_waits_for_its_commit() {
        let mut w = Watermark::new(1000);
        w.note(Tid::new(7), 300, 300, Tid::new(6)); // truncate to 300: nothing below changed
        assert_eq!(w.durable_len(Tid::new(6)), 300);
        w.note(Tid::new(8), 300, 400, Tid::new(6));
        assert_eq!(w.durable_len(Tid::new(7)), 300);
        assert_eq!(w.durable_len(Tid::new(8)), 400);
    }
}

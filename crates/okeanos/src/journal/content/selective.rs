//! `selective`: journal only the update sequences that start small (Okeanos paper section 3,
//! Figure 2). The *update sequence* of a block is the series of updates between two transfers
//! of the block to its final location. Its first update decides for all of it:
//! - smaller than the write threshold (default 4096 bytes): the whole sequence is journaled,
//!   as under `wasteless` (records for partial updates, whole blocks for full ones);
//! - otherwise: the whole sequence goes in place with `ordered` semantics (written and flushed
//!   before the commit record).
//! Journaling is never switched on or off part-way through a sequence, so each block is either
//! recovered from the journal (data guarantees) or was written in place before its metadata
//! committed (ordered guarantees). The sequence ends when the block reaches its final location:
//! at checkpoint for a journaled sequence, at the commit that wrote it for an in-place one.

use super::{ContentPolicy, Route, Sequence};

#[derive(Debug, Clone, Copy)]
pub struct Selective {
    pub dmeta: bool,
    pub threshold: usize,
    /// When set, the write call's size decides instead of `threshold`: calls smaller than
    /// this are logged, larger ones go in place (the manylogs paper's LoggedWriteSize, section
    /// IV-C: large writes in place first, the small ones and the metadata logged near them).
    pub logged_write_size: Option<usize>,
}

impl ContentPolicy for Selective {
    fn name(&self) -> String {
        if self.dmeta { "selective+dmeta".into() } else { "selective".into() }
    }
    fn route(&self, seq: Option<Sequence>, len: usize, call_len: usize, block_size: usize, _fresh: bool) -> (Route, Option<Sequence>) {
        // With a logged-write-size the write call decides (every piece of a small call is
        // logged, every piece of a large one goes in place); else the piece's own size.
        let small = match self.logged_write_size {
            Some(l) => call_len < l,
            None => len < self.threshold,
        };
        let seq = seq.unwrap_or(if small { Sequence::Journaled } else { Sequence::InPlace });
        let route = match seq {
            Sequence::Journaled if len < block_size => Route::JournalRecord,
            Sequence::Journaled => Route::JournalFull,
            Sequence::InPlace => Route::FinalBeforeCommit,
        };
        (route, Some(seq))
    }
    fn journals_data(&self) -> bool {
        true
    }
    fn differential_metadata(&self) -> bool {
        self.dmeta
    }
    fn guarantee(&self) -> &'static str {
        "data guarantees for update sequences that start below the write threshold, ordered guarantees for the rest"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_write_call_decides_with_a_logged_write_size() {
        let per_block = Selective { dmeta: false, threshold: 4096, logged_write_size: None };
        let per_call = Selective { logged_write_size: Some(32 << 10), ..per_block };
        // A 4 KiB block of a 4 KiB call: in place by the block rule, logged by the call rule.
        assert_eq!(per_block.route(None, 4096, 4096, 4096, false).1, Some(Sequence::InPlace));
        assert_eq!(per_call.route(None, 4096, 4096, 4096, false).1, Some(Sequence::Journaled));
        // The 100-byte tail of a 64 KiB call: logged by the block rule, in place by the call rule.
        assert_eq!(per_block.route(None, 100, 65536, 4096, false).1, Some(Sequence::Journaled));
        assert_eq!(per_call.route(None, 100, 65536, 4096, false).1, Some(Sequence::InPlace));
        // A sequence keeps its first decision.
        assert_eq!(per_call.route(Some(Sequence::InPlace), 10, 10, 4096, false).1, Some(Sequence::InPlace));
    }
}

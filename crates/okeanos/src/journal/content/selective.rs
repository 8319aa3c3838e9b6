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
}

impl ContentPolicy for Selective {
    fn name(&self) -> String {
        if self.dmeta { "selective+dmeta".into() } else { "selective".into() }
    }
    fn route(&self, seq: Option<Sequence>, len: usize, block_size: usize) -> (Route, Option<Sequence>) {
        let seq = seq.unwrap_or(if len < self.threshold { Sequence::Journaled } else { Sequence::InPlace });
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

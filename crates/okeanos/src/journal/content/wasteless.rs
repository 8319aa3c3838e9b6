//! `wasteless`: data journaling that logs only what changed (Okeanos paper sections 3 and 4;
//! thesis chapters 4 and 5). An update that changes part of a data block becomes a multiwrite
//! record: its bytes go into the transaction's record stream, shared by every stream that
//! commits in that transaction, instead of a whole 4 KiB block. An update that covers a whole
//! block, and metadata, are logged as regular blocks (straight from the cache buffer). With
//! `+dmeta`, metadata blocks are logged as their changed byte ranges too.
//!
//! Guarantees are those of `data`: every synced write recovered whole, each write atomic.

use super::{ContentPolicy, Route, Sequence};

#[derive(Debug, Clone, Copy)]
pub struct Wasteless {
    pub dmeta: bool,
    /// `fresh_blocks=in_place`: a whole block the running transaction allocated is written in
    /// place before the commit, as `ordered` writes data, instead of logged and written again
    /// at checkpoint. Nothing committed refers to such a block, so a crash before the commit
    /// finds it unreferenced and one after finds it written: each write call stays atomic
    /// (docs/JOURNALING.md, "New blocks in place").
    pub fresh_in_place: bool,
}

impl ContentPolicy for Wasteless {
    fn name(&self) -> String {
        if self.dmeta { "wasteless+dmeta".into() } else { "wasteless".into() }
    }
    fn route(&self, _seq: Option<Sequence>, len: usize, _call_len: usize, block_size: usize, fresh: bool) -> (Route, Option<Sequence>) {
        if self.fresh_in_place && fresh && len == block_size {
            (Route::FinalBeforeCommit, None)
        } else if len < block_size {
            (Route::JournalRecord, None)
        } else {
            (Route::JournalFull, None)
        }
    }
    fn journals_data(&self) -> bool {
        true
    }
    fn differential_metadata(&self) -> bool {
        self.dmeta
    }
    /// Its in-place blocks are new ones, and a committed block's later updates are logged.
    fn in_place_beside_commit(&self) -> bool {
        self.fresh_in_place
    }
    fn chooses_new_blocks(&self) -> bool {
        true
    }
    fn guarantee(&self) -> &'static str {
        "every synced write recovered whole; each write call atomic; metadata consistent"
    }
}

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
}

impl ContentPolicy for Wasteless {
    fn name(&self) -> String {
        if self.dmeta { "wasteless+dmeta".into() } else { "wasteless".into() }
    }
    fn route(&self, _seq: Option<Sequence>, len: usize, _call_len: usize, block_size: usize) -> (Route, Option<Sequence>) {
        if len < block_size {
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
    fn guarantee(&self) -> &'static str {
        "every synced write recovered whole; each write call atomic; metadata consistent"
    }
}

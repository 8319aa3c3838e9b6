//! `data`: data and metadata blocks are journaled whole (thesis section 3.1.3) and reach their
//! final locations at checkpoint, so a dirty data block can absorb many writes before it is
//! written in place. Every write call up to the handle size is atomic after a crash.

use super::{ContentPolicy, Route, Sequence};

#[derive(Debug, Clone, Copy)]
pub struct DataJournaling;

impl ContentPolicy for DataJournaling {
    fn name(&self) -> String {
        "data".into()
    }
    fn route(&self, _seq: Option<Sequence>, _len: usize, _call_len: usize, _block_size: usize, _fresh: bool) -> (Route, Option<Sequence>) {
        (Route::JournalFull, None)
    }
    fn journals_data(&self) -> bool {
        true
    }
    fn guarantee(&self) -> &'static str {
        "every synced write recovered whole; each write call atomic; metadata consistent"
    }
}

//! `ordered`: only metadata is journaled, but a transaction's data blocks reach their final
//! location and are flushed before its journal blocks are written (thesis section 3.1.3), so
//! committed metadata never points at stale data.

use super::{ContentPolicy, Route, Sequence};

#[derive(Debug, Clone, Copy)]
pub struct Ordered;

impl ContentPolicy for Ordered {
    fn name(&self) -> String {
        "ordered".into()
    }
    fn route(&self, _seq: Option<Sequence>, _len: usize, _call_len: usize, _block_size: usize, _fresh: bool) -> (Route, Option<Sequence>) {
        (Route::FinalBeforeCommit, None)
    }
    fn journals_data(&self) -> bool {
        false
    }
    fn guarantee(&self) -> &'static str {
        "metadata consistent; committed metadata never exposes stale data; synced data durable"
    }
}

//! `writeback`: only metadata is journaled; file data goes to its final location with the
//! commit, in no order with the commit record (thesis section 3.1.3). After a crash, metadata is
//! consistent, but a file may show stale blocks that were never written with its new size.
//! `fsync` still makes the file's data durable: the commit it waits for writes and flushes it.

use super::{ContentPolicy, Route, Sequence};

#[derive(Debug, Clone, Copy)]
pub struct Writeback;

impl ContentPolicy for Writeback {
    fn name(&self) -> String {
        "writeback".into()
    }
    fn route(&self, _seq: Option<Sequence>, _len: usize, _call_len: usize, _block_size: usize, _fresh: bool) -> (Route, Option<Sequence>) {
        (Route::FinalWithCommit, None)
    }
    fn journals_data(&self) -> bool {
        false
    }
    fn guarantee(&self) -> &'static str {
        "metadata consistent after a crash; synced data durable; unsynced data may be stale"
    }
}

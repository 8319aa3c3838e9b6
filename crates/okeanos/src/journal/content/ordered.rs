//! `ordered`: only metadata is journaled, but a transaction's data blocks reach their final
//! location and are flushed before its journal blocks are written (thesis section 3.1.3), so
//! committed metadata never points at stale data.

use super::{ContentPolicy, DataDisposition};

#[derive(Debug, Clone, Copy)]
pub struct Ordered;

impl ContentPolicy for Ordered {
    fn name(&self) -> &'static str {
        "ordered"
    }
    fn data_disposition(&self) -> DataDisposition {
        DataDisposition::FinalBeforeCommit
    }
    fn guarantee(&self) -> &'static str {
        "metadata consistent; committed metadata never exposes stale data; synced data durable"
    }
}

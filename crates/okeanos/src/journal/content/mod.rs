//! Content policies: *what* goes into the journal (DESIGN.md section 1, first axis).
//!
//! A content policy decides, for every file-data block a handle dirties, whether the block is
//! logged whole, or written to its final location by the commit — before the commit record
//! (ordered) or without ordering (writeback). Metadata is always logged whole. A policy knows
//! nothing of where the journal lives.

mod data;
mod ordered;
mod writeback;

pub use data::DataJournaling;
pub use ordered::Ordered;
pub use writeback::Writeback;

/// What a commit does with a dirty file-data block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataDisposition {
    /// Logged whole in the journal; reaches its final location at checkpoint.
    Journal,
    /// Written to its final location and flushed before the transaction's journal blocks.
    FinalBeforeCommit,
    /// Written to its final location together with the journal blocks, in no order.
    FinalWithCommit,
}

pub trait ContentPolicy: Send + Sync + std::fmt::Debug {
    /// The mount option name (`data=<name>`).
    fn name(&self) -> &'static str;
    fn data_disposition(&self) -> DataDisposition;
    /// The crash guarantee, in one sentence, for docs and `okeanos stat`.
    fn guarantee(&self) -> &'static str;
}

/// The policies selectable at mount time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataMode {
    Writeback,
    Ordered,
    Data,
}

impl DataMode {
    pub const ALL: [DataMode; 3] = [DataMode::Writeback, DataMode::Ordered, DataMode::Data];

    pub fn policy(self) -> Box<dyn ContentPolicy> {
        match self {
            DataMode::Writeback => Box::new(Writeback),
            DataMode::Ordered => Box::new(Ordered),
            DataMode::Data => Box::new(DataJournaling),
        }
    }
    pub fn name(self) -> &'static str {
        self.policy().name()
    }
}

impl std::str::FromStr for DataMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        DataMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown data mode {s:?} (expected one of: writeback, ordered, data)"))
    }
}

impl std::fmt::Display for DataMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

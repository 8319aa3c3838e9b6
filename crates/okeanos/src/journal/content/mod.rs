//! Content policies: *what* goes into the journal (docs/DESIGN.md section 1, first axis).
//!
//! For every update of a file-data block, a content policy picks a [`Route`]: log the whole
//! block, log only the changed bytes as a multiwrite record, or write the block in place
//! with the commit (before the commit record, or in no order with it). Metadata is always
//! logged; a policy may ask for it to be logged as differences ([`ContentPolicy::differential_metadata`]).
//! A policy knows nothing of where the journal lives.

mod data;
mod ordered;
mod selective;
mod wasteless;
mod writeback;

pub use data::DataJournaling;
pub use ordered::Ordered;
pub use selective::Selective;
pub use wasteless::Wasteless;
pub use writeback::Writeback;

/// Where one update of a data block goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Logged whole; reaches its final location at checkpoint.
    JournalFull,
    /// Only the updated bytes are logged, in a multiwrite record.
    JournalRecord,
    /// Written in place and flushed before the transaction's journal blocks.
    FinalBeforeCommit,
    /// Written in place together with the journal blocks, in no order.
    FinalWithCommit,
}

impl Route {
    pub fn is_journal(self) -> bool {
        matches!(self, Route::JournalFull | Route::JournalRecord)
    }
}

/// A block's update sequence (selective journaling's decision), kept with its buffer.
pub use crate::cache::Sequence;

pub trait ContentPolicy: Send + Sync + std::fmt::Debug {
    /// The mount option name (`data=<name>`), with `+dmeta` when metadata is differential.
    fn name(&self) -> String;
    /// Routes an update of `len` bytes to a data block whose current update sequence is `seq`,
    /// part of a write call of `call_len` bytes; returns the route and the block's sequence
    /// afterwards. `fresh`: the block was allocated by the running transaction, so nothing
    /// committed refers to it yet.
    fn route(&self, seq: Option<Sequence>, len: usize, call_len: usize, block_size: usize, fresh: bool) -> (Route, Option<Sequence>);
    /// Whether any data may be logged (for sizing handles).
    fn journals_data(&self) -> bool;
    /// Log metadata blocks as their changed byte ranges rather than whole.
    fn differential_metadata(&self) -> bool {
        false
    }
    /// Whether the blocks this policy writes in place before a commit are all new to it and
    /// reach home again only through later commits: then they may go beside the commit under
    /// its flush, named by in-place tags that recovery checks in the newest transaction
    /// (docs/FORMAT.md, "In-place tags"). Not where committed blocks are overwritten in place
    /// (ordered data, an fdatasync's in-place step): such a write changes a block after its
    /// commit with no later commit to say so.
    fn in_place_beside_commit(&self) -> bool {
        false
    }
    /// Whether `fresh_blocks=` chooses how this policy writes new whole blocks (wasteless).
    fn chooses_new_blocks(&self) -> bool {
        false
    }
    /// The crash guarantee, in one sentence, for docs and `okeanos stat`.
    fn guarantee(&self) -> &'static str;
}

/// The policies selectable at mount time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataMode {
    Writeback,
    Ordered,
    Data,
    Wasteless,
    Selective,
}

/// A content policy with its options: `data=<mode>[+dmeta]`, `write_threshold=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentConfig {
    pub mode: DataMode,
    /// Differential metadata (wasteless and selective only).
    pub dmeta: bool,
    /// Selective: updates smaller than this start a journaled sequence (default 4096).
    pub write_threshold: usize,
    /// Selective: a write call of at least this many bytes goes in place whatever its pieces'
    /// sizes (the manylogs paper's LoggedWriteSize, section IV-C); None: no such rule.
    pub logged_write_size: Option<usize>,
    /// Wasteless: a whole block allocated by the running transaction is written in place
    /// before the commit instead of logged (`fresh_blocks=in_place`; docs/JOURNALING.md,
    /// "New blocks in place").
    pub fresh_in_place: bool,
}

impl Default for ContentConfig {
    fn default() -> Self {
        ContentConfig { mode: DataMode::Ordered, dmeta: false, write_threshold: 4096, logged_write_size: None, fresh_in_place: false }
    }
}

impl ContentConfig {
    pub fn policy(&self) -> Box<dyn ContentPolicy> {
        match self.mode {
            DataMode::Writeback => Box::new(Writeback),
            DataMode::Ordered => Box::new(Ordered),
            DataMode::Data => Box::new(DataJournaling),
            DataMode::Wasteless => Box::new(Wasteless { dmeta: self.dmeta, fresh_in_place: self.fresh_in_place }),
            DataMode::Selective => Box::new(Selective { dmeta: self.dmeta, threshold: self.write_threshold, logged_write_size: self.logged_write_size }),
        }
    }

    /// Parses `mode` or `mode+dmeta`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parts = s.split('+');
        let mode: DataMode = parts.next().unwrap_or("").parse()?;
        let mut c = ContentConfig { mode, ..Default::default() };
        for opt in parts {
            match opt {
                "dmeta" if matches!(mode, DataMode::Wasteless | DataMode::Selective) => c.dmeta = true,
                "dmeta" => return Err(format!("{s:?}: differential metadata (+dmeta) needs data=wasteless or data=selective")),
                _ => return Err(format!("{s:?}: unknown policy option {opt:?} (known: dmeta)")),
            }
        }
        Ok(c)
    }

    pub fn name(&self) -> String {
        self.policy().name()
    }
}

impl DataMode {
    pub const ALL: [DataMode; 5] = [DataMode::Writeback, DataMode::Ordered, DataMode::Data, DataMode::Wasteless, DataMode::Selective];

    pub fn name(self) -> &'static str {
        match self {
            DataMode::Writeback => "writeback",
            DataMode::Ordered => "ordered",
            DataMode::Data => "data",
            DataMode::Wasteless => "wasteless",
            DataMode::Selective => "selective",
        }
    }

    pub fn policy(self) -> Box<dyn ContentPolicy> {
        ContentConfig { mode: self, ..Default::default() }.policy()
    }
}

impl std::str::FromStr for DataMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        DataMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown data mode {s:?} (expected one of: writeback, ordered, data, wasteless, selective)"))
    }
}

impl std::fmt::Display for DataMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

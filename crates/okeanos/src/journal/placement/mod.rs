//! Placements: *where* the journal lives (DESIGN.md section 1, second axis).
//!
//! A placement maps positions of the circular log to device blocks. It takes a committed
//! transaction's blocks, says where they go, gives them back at recovery, and frees space
//! after checkpoint; it does not know which content policy filled them. The `internal` and
//! `external` placements are a fixed circular region on the file-system device or on a
//! device of its own.

mod region;

pub use region::{LogRegion, RegionKind};

//! Deterministic hash maps. The state the journal iterates (cache buffers, inodes, revokes)
//! lives in maps whose iteration order must not depend on a per-process random seed: the
//! simulator promises the same results bit for bit for the same seed (docs/DESIGN.md section 3),
//! and a journal's contents must not change from one run of a workload to the next.

use std::collections::hash_map::DefaultHasher;
use std::hash::BuildHasherDefault;

/// SipHash with fixed keys: the same order in every process.
pub type Fixed = BuildHasherDefault<DefaultHasher>;
pub type HashMap<K, V> = std::collections::HashMap<K, V, Fixed>;
pub type HashSet<K> = std::collections::HashSet<K, Fixed>;

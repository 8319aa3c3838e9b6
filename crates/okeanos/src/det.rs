//! Deterministic hash maps. The state the journal iterates (cache buffers, inodes, revokes)
//! lives in maps whose iteration order must not depend on a per-process random seed: the
//! simulator promises the same results bit for bit for the same seed (docs/DESIGN.md section 3),
//! and a journal's contents must not change from one run of a workload to the next.
//!
//! The keys are numbers the engine chose (block and inode numbers, offsets, tids), so the hash
//! need not resist chosen keys (SipHash with fixed keys, used before, did not either); it must
//! be quick, since an append and its sync look up a few dozen of them (SipHash was 4% of the
//! samples of 100 streams × 128 B), and it must spread keys that differ only in their high
//! bits (block-aligned offsets, packed pairs) over the low bits the table indexes by.

use std::hash::{BuildHasherDefault, Hasher};

/// The engine's hash: words folded in by a multiply, then mixed as a whole (murmur3's 64-bit
/// finalizer), so that every bit of every word reaches the low bits.
#[derive(Default, Clone, Copy)]
pub struct Fold(u64);

const K: u64 = 0x9e37_79b9_7f4a_7c15;

impl Hasher for Fold {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.write_u64(u64::from_le_bytes(c.try_into().expect("eight bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            // The length keeps "ab" and "ab\0" apart.
            self.write_u64(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 56));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.write_u64(i as u64)
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.write_u64(i as u64)
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.write_u64(i as u64)
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64)
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(23) ^ i).wrapping_mul(K);
    }
    #[inline]
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// The same order in every process.
pub type Fixed = BuildHasherDefault<Fold>;
pub type HashMap<K, V> = std::collections::HashMap<K, V, Fixed>;
pub type HashSet<K> = std::collections::HashSet<K, Fixed>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hash};

    fn hash<T: Hash>(t: T) -> u64 {
        Fixed::default().hash_one(t)
    }

    /// Keys that differ only in high bits (block-aligned byte offsets, an inode in the high
    /// half of a packed pair) land in different buckets of a small table: the low bits of
    /// their hashes take every value about equally often.
    #[test]
    fn keys_differing_in_high_bits_spread_over_the_low_bits() {
        for (what, keys) in [
            ("offsets a block apart", (0..4096u64).map(|i| i * 4096).collect::<Vec<_>>()),
            ("the high half of a pair", (0..4096u64).map(|i| i << 32).collect()),
            ("consecutive block numbers", (1_000_000..1_004_096u64).collect()),
        ] {
            let mut buckets = [0u32; 64];
            for k in keys {
                buckets[(hash(k) % 64) as usize] += 1;
            }
            // 64 per bucket on average; a fair hash keeps each within about five deviations.
            assert!(buckets.iter().all(|&n| (24..=104).contains(&n)), "{what}: {buckets:?}");
        }
    }

    #[test]
    fn the_same_key_hashes_alike_and_bytes_of_different_lengths_apart() {
        assert_eq!(hash((7u32, 4096u64)), hash((7u32, 4096u64)));
        assert_ne!(hash((7u32, 4096u64)), hash((4096u32, 7u64)));
        assert_ne!(hash(&b"ab"[..]), hash(&b"ab\0"[..]));
        assert_ne!(hash("name"), hash("nam"));
    }
}

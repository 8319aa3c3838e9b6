//! Reads: blocks missing from the cache are read from the device without the state lock.
//!
//! Under one lock a read that missed the cache held every other operation (writes, syncs,
//! commits' hand-offs) for a device read, and readers that missed ran one at a time: 4 jobs of
//! random 4 KiB reads through the mount made 5,852 reads/s where ext4 made 55,117
//! (docs/BENCHMARKS.md, "Reads through the mount"). A read now takes the lock twice when it
//! misses: once to copy what is cached and note what is not, once to take the copies read
//! meanwhile. A copy is taken only if its block stayed out of the cache throughout (its cache
//! generation did not move): a block's device contents change only by writing a cached buffer
//! home, so a block that was never cached in between was not written either. Any other copy is
//! read again under the lock, as before.

use super::Okeanos;
use crate::det::HashMap;
use crate::ids::{DevBlock, HomeBlock};
use crate::fs::file::Misses;
use crate::fs::FsResult;

/// The longest run of consecutive missing blocks read in one device read (1 MiB of 4 KiB
/// blocks).
const RUN_BLOCKS: usize = 256;

/// Told when a read starts and stops waiting for the device (blocks it missed in the cache),
/// so that a caller serving requests from a pool of threads can lend the waiting thread's
/// place to another (the FUSE front end's spare request threads, okeanos-cli's fuse/spares.rs).
/// Called without the state lock held, once each per read that misses.
pub trait DeviceWait {
    fn begin(&self);
    fn end(&self);
}

/// A [`DeviceWait`] that does nothing.
struct NoWait;
impl DeviceWait for NoWait {
    fn begin(&self) {}
    fn end(&self) {}
}

/// Ends a device wait however the read leaves (an I/O error included).
struct Waiting<'a>(&'a dyn DeviceWait);
impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.end();
    }
}

impl Okeanos {
    /// Reads up to `len` bytes at `off` (fewer at the end of the file).
    /// Blocks missing from the cache are read without the state lock (the module's comment);
    /// a read that misses nothing takes the lock once.
    pub fn read(&self, ino: u32, off: u64, len: usize) -> FsResult<Vec<u8>> {
        self.read_telling(ino, off, len, &NoWait)
    }

    /// [`Okeanos::read`], telling `wait` when the read waits for the device.
    pub fn read_telling(&self, ino: u32, off: u64, len: usize, wait: &dyn DeviceWait) -> FsResult<Vec<u8>> {
        let mut noted = Vec::new();
        let mut bs = 0u64;
        let first = self.with_fs(|fs| {
            bs = fs.bs() as u64;
            fs.read_via(ino, off, len, Misses::Note(&mut noted))
        })?;
        if noted.is_empty() {
            return Ok(first);
        }
        noted.sort_unstable();
        noted.dedup_by_key(|n| n.0);
        let mut read: HashMap<HomeBlock, (u32, Vec<u8>)> = HashMap::default();
        let dev = self.inner.devs.fs.as_ref();
        wait.begin();
        let waiting = Waiting(wait);
        let mut i = 0;
        while i < noted.len() {
            let mut j = i + 1;
            while j < noted.len() && noted[j].0 == noted[j - 1].0 + 1 && j - i < RUN_BLOCKS {
                j += 1;
            }
            let mut buf = vec![0u8; (j - i) * bs as usize];
            dev.read_at(DevBlock::home(noted[i].0).byte(bs), &mut buf)?;
            for (k, chunk) in buf.chunks_exact(bs as usize).enumerate() {
                let (block, generation) = noted[i + k];
                read.insert(block, (generation, chunk.to_vec()));
            }
            i = j;
        }
        drop(waiting);
        self.with_fs(|fs| fs.read_via(ino, off, len, Misses::Use(&mut read)))
    }

}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MountOptions, Okeanos};
    use rand::{Rng, SeedableRng};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    const BS: usize = 4096;

    fn mounted(dir: &std::path::Path) -> Okeanos {
        let img = dir.join("img");
        Okeanos::mkfs_file(&img, 64 << 20, &Default::default()).unwrap();
        Okeanos::open(&img, MountOptions::parse("data=ordered,cache_blocks=64").unwrap()).unwrap()
    }

    /// Fills the 64-block cache with another file's clean blocks, so `ino`'s are evicted.
    fn evict(fs: &Okeanos, ino: u32) {
        fs.checkpoint().unwrap();
        fs.with_fs(|f| Ok(f.st.cache.evict_every_clean())).unwrap();
        let cached = fs.with_fs(|f| Ok((0..8u32).filter(|&k| f.st.inodes.get(&ino).and_then(|i| i.bmap(k)).is_some_and(|p| f.st.cache.contains(p))).count())).unwrap();
        assert_eq!(cached, 0, "the file's blocks were evicted");
    }

    /// A copy read outside the lock is taken only if its block stayed uncached: a block
    /// written, written home and evicted between the two passes is read again, and the read
    /// returns what was written, not the copy.
    #[test]
    fn a_copy_of_a_block_cached_meanwhile_is_not_taken() {
        let dir = tempfile::tempdir().unwrap();
        let fs = mounted(dir.path());
        let big = fs.create_file("/big").unwrap();
        big.write_at(0, &vec![9u8; 200 * BS]).unwrap();
        let a = fs.create_file("/a").unwrap();
        a.write_at(0, &vec![1u8; 8 * BS]).unwrap();
        a.fsync().unwrap();
        evict(&fs, a.ino());
        // The first pass: every block missing, noted with its generation; the copies read
        // "outside the lock" now hold ones.
        let mut noted = Vec::new();
        fs.with_fs(|f| f.read_via(a.ino(), 0, 8 * BS, Misses::Note(&mut noted))).unwrap();
        assert_eq!(noted.len(), 8);
        let copies = |noted: &[(HomeBlock, u32)]| -> HashMap<HomeBlock, (u32, Vec<u8>)> {
            noted
                .iter()
                .map(|&(p, g)| {
                    let mut b = vec![0u8; BS];
                    fs.inner.devs.fs.read_at(DevBlock::home(p).byte(BS as u64), &mut b).unwrap();
                    (p, (g, b))
                })
                .collect()
        };
        let mut stale = copies(&noted);
        // Unchanged: the copies are taken as they are.
        let mut fresh = copies(&noted);
        assert!(fs.with_fs(|f| f.read_via(a.ino(), 0, 8 * BS, Misses::Use(&mut fresh))).unwrap() == vec![1u8; 8 * BS]);
        assert!(fresh.is_empty(), "every copy was taken");
        evict(&fs, a.ino());
        // Meanwhile: overwritten, written home, evicted again.
        a.write_at(0, &vec![2u8; 8 * BS]).unwrap();
        a.fsync().unwrap();
        evict(&fs, a.ino());
        let got = fs.with_fs(|f| f.read_via(a.ino(), 0, 8 * BS, Misses::Use(&mut stale))).unwrap();
        assert!(got == vec![2u8; 8 * BS], "a copy from before the overwrite was taken: {} of {} bytes are ones", got.iter().filter(|&&b| b == 1).count(), got.len());
        fs.unmount().unwrap();
    }

    /// Readers missing the cache beside a writer that overwrites whole blocks with rising
    /// versions, checkpoints and a reader that keeps evicting: every block read is one version
    /// (never torn), and no reader sees a block's version go back.
    #[test]
    fn readers_outside_the_lock_never_see_a_block_go_back() {
        let seed: u64 = std::env::var("OKEANOS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
        println!("seed {seed} (OKEANOS_SEED={seed} repeats it)");
        let dir = tempfile::tempdir().unwrap();
        let fs = mounted(dir.path());
        let big = fs.create_file("/big").unwrap();
        big.write_at(0, &vec![9u8; 200 * BS]).unwrap();
        const FILES: u32 = 4;
        const BLOCKS: u64 = 16;
        let inos: Vec<u32> = (0..FILES)
            .map(|k| {
                let f = fs.create_file(&format!("/f{k}")).unwrap();
                f.write_at(0, &vec![0u8; BLOCKS as usize * BS]).unwrap();
                f.ino()
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
        let mut threads = Vec::new();
        for r in 0..3u64 {
            let (fs, stop, inos) = (fs.clone(), stop.clone(), inos.clone());
            threads.push(std::thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ (r + 1));
                let mut seen = vec![0u32; FILES as usize * BLOCKS as usize];
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) && reads < 200_000 {
                    let f = rng.gen_range(0..FILES) as usize;
                    let first = rng.gen_range(0..BLOCKS);
                    let n = rng.gen_range(1..=BLOCKS - first);
                    let d = fs.read(inos[f], first * BS as u64, n as usize * BS).unwrap();
                    for (k, b) in d.chunks(BS).enumerate() {
                        let v = u32::from_le_bytes(b[..4].try_into().unwrap());
                        assert!(b.chunks(4).all(|w| w == &b[..4]), "seed {seed}: file {f} block {} torn", first as usize + k);
                        let s = &mut seen[f * BLOCKS as usize + first as usize + k];
                        assert!(v >= *s, "seed {seed}: file {f} block {} went back from version {s} to {v}", first as usize + k);
                        *s = v;
                    }
                    reads += 1;
                }
                reads
            }));
        }
        {
            let (fs, stop) = (fs.clone(), stop.clone());
            let big = big.ino();
            threads.push(std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) && n < 100_000 {
                    fs.read(big, (n % 50) * 4 * BS as u64, 4 * BS).unwrap();
                    if n % 8 == 0 {
                        fs.with_fs(|f| Ok(f.st.cache.evict_every_clean())).unwrap();
                    }
                    n += 1;
                }
                n
            }));
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut version = vec![0u32; FILES as usize * BLOCKS as usize];
        let mut writes = 0u64;
        while std::time::Instant::now() < deadline && writes < 50_000 {
            let f = rng.gen_range(0..FILES) as usize;
            let b = rng.gen_range(0..BLOCKS);
            let v = &mut version[f * BLOCKS as usize + b as usize];
            *v += 1;
            let block: Vec<u8> = std::iter::repeat_n(v.to_le_bytes(), BS / 4).flatten().collect();
            fs.write(inos[f], b * BS as u64, &block).unwrap();
            writes += 1;
            if writes % 50 == 0 {
                fs.checkpoint().unwrap();
            }
        }
        stop.store(true, Ordering::Relaxed);
        let reads: Vec<u64> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(writes > 100 && reads.iter().all(|&r| r > 100), "seed {seed}: too little ran to show anything: {writes} writes, {reads:?} reads");
        let misses = fs.with_fs(|f| Ok(f.st.read_misses)).unwrap();
        assert!(misses > 1000, "seed {seed}: the readers missed the cache only {misses} times");
        fs.unmount().unwrap();
    }
}

//! The durable FUSE floor (`examples/null_fuse.rs --keep --log`), the bound that
//! docs/BENCHMARKS.md ("The durable floor over FUSE") sets the mount's SQLite, fio, pgbench
//! and read rows against. A floor that answered a sync without writing its bytes would be a
//! false bound, so its one promise is tested: a sync is answered only once its file's logged
//! bytes are on the log device, and another file's bytes are not written for it.

use super::*;

/// The example's binary, which `cargo test` builds beside the crate's own.
fn null_fuse() -> Option<PathBuf> {
    let exe = Path::new(BIN).parent()?.join("examples").join("null_fuse");
    if exe.exists() {
        Some(exe)
    } else {
        skip("tools", "examples/null_fuse is not built (cargo test builds it)");
        None
    }
}

/// A null_fuse daemon, unmounted and ended when dropped.
struct Floor {
    child: Option<Child>,
    mnt: PathBuf,
}

impl Floor {
    /// Unmounts and returns what the daemon printed (its counts).
    fn finish(mut self) -> String {
        let st = Command::new("fusermount3").arg("-u").arg(&self.mnt).status().unwrap();
        assert!(st.success(), "fusermount3 -u");
        let out = self.child.take().unwrap().wait_with_output().unwrap();
        assert!(out.status.success(), "null_fuse exit {}", out.status);
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("fusermount3").arg("-u").arg("-z").arg(&self.mnt).status();
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Where `record` was logged: the log's bytes hold a 16-byte header (inode as u32, offset as
/// u64, length as u32, little-endian) right before it. Returns (offset, length) from it.
fn logged(log: &[u8], record: &[u8]) -> Option<(u64, u32)> {
    let at = log.windows(record.len()).position(|w| w == record)?;
    let h = &log[at.checked_sub(16)?..at];
    Some((u64::from_le_bytes(h[4..12].try_into().unwrap()), u32::from_le_bytes(h[12..16].try_into().unwrap())))
}

#[test]
fn the_durable_floor_writes_a_synced_files_bytes_before_answering_and_no_others() {
    if !fuse_usable() {
        return;
    }
    let Some(exe) = null_fuse() else { return };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    std::fs::write(&log, vec![0u8; 4 << 20]).unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let child = Command::new(exe).arg(&mnt).arg("2").arg("--keep").arg("--log").arg(&log).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let floor = Floor { child: Some(child), mnt: mnt.clone() };
    let t0 = Instant::now();
    while !mounted(&mnt) {
        assert!(t0.elapsed() < Duration::from_secs(30), "null_fuse did not mount");
        std::thread::sleep(Duration::from_millis(10));
    }

    std::fs::create_dir(mnt.join("d")).unwrap();
    let mut a = std::fs::File::create(mnt.join("d/a")).unwrap();
    let mut b = std::fs::File::create(mnt.join("b")).unwrap();
    a.write_all(b"the first record of a").unwrap();
    b.write_all(b"bytes of b, never synced").unwrap();
    a.sync_data().unwrap();
    let on_disk = std::fs::read(&log).unwrap();
    assert_eq!(logged(&on_disk, b"the first record of a"), Some((0, 21)), "a's synced write is on the log device, behind its header");
    assert_eq!(logged(&on_disk, b"bytes of b, never synced"), None, "b was not synced: its bytes stay in memory");

    a.write_all(b", then a second").unwrap();
    a.sync_data().unwrap();
    let on_disk = std::fs::read(&log).unwrap();
    assert_eq!(logged(&on_disk, b", then a second"), Some((21, 15)));
    // A sync with nothing new to write is answered without a group.
    a.sync_data().unwrap();
    assert_eq!(std::fs::read_to_string(mnt.join("d/a")).unwrap(), "the first record of a, then a second", "--keep reads back what was written");
    drop((a, b));

    let said = floor.finish();
    assert!(said.contains("3 syncs, 2 groups"), "the daemon's counts: {said}");
}

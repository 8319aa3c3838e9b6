//! A loop device works as well as a regular file (needs root and losetup; skipped with a
//! message otherwise). The loop device is always released.

mod common;
use common::*;
use okeanos::{DataMode, Device, FileDevice, MkfsOptions, MountOptions, Okeanos};
use std::process::Command;
use std::sync::Arc;

struct Loop(String);

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

fn attach(file: &std::path::Path) -> Option<Loop> {
    let out = Command::new("losetup").args(["-f", "--show"]).arg(file).output().ok()?;
    if !out.status.success() {
        skip("root", &format!("losetup failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
        return None;
    }
    Some(Loop(String::from_utf8_lossy(&out.stdout).trim().to_string()))
}

#[test]
fn loop_device_works_like_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("backing");
    std::fs::File::create(&backing).unwrap().set_len(64 * MB).unwrap();
    let Some(lo) = attach(&backing) else { return };
    let path = std::path::PathBuf::from(&lo.0);
    let dev = FileDevice::open(&path).unwrap();
    assert_eq!(dev.len_bytes(), 64 * MB, "a block device's length is measured by seeking");
    Okeanos::mkfs(&dev, None, &MkfsOptions { journal_blocks: 2048, ..Default::default() }).unwrap();
    drop(dev);
    let fs = Okeanos::open(&path, MountOptions::default().data(DataMode::Data)).unwrap();
    let f = fs.create_file("/on-a-loop-device").unwrap();
    for k in 0..200 {
        f.append(&record(3, k, 128)).unwrap();
        f.fdatasync().unwrap();
    }
    drop(f);
    let c = fs.counters();
    assert!(c.fs_device.flushes >= c.commits && c.fs_device.bytes_written >= c.journal_bytes);
    fs.unmount().unwrap();
    let dev: Arc<dyn Device> = Arc::new(FileDevice::open(&path).unwrap());
    assert_fsck_clean(dev, None);
    let fs = Okeanos::open(&path, MountOptions::default()).unwrap();
    let want: Vec<u8> = (0..200).flat_map(|k| record(3, k, 128)).collect();
    assert_eq!(fs.read_path("/on-a-loop-device").unwrap(), want);
    fs.unmount().unwrap();
}

/// A test that cannot run here says so; where the test command promised what it needs
/// (OKEANOS_TESTS_REQUIRE names `root` when it runs as root), it fails instead.
fn skip(need: &str, why: &str) {
    if std::env::var("OKEANOS_TESTS_REQUIRE").is_ok_and(|r| r.split(',').any(|x| x == need)) {
        panic!("{why}, but the test command promised {need} (OKEANOS_TESTS_REQUIRE)");
    }
    eprintln!("skipping: {why}");
}

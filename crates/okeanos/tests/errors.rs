//! Bad input gets a clear error and loses nothing: full file system, full journal, corrupt,
//! truncated and foreign images, I/O errors, invalid options.

mod common;
use common::*;
use okeanos::{DataMode, Device, FaultDevice, FsError, MemDevice, MountOptions, Okeanos};
use std::sync::Arc;

#[test]
fn full_file_system_returns_enospc_and_stays_consistent() {
    for mode in DataMode::ALL {
        let dev = mem_fs(8 * MB, 256);
        let fs = mount(&dev, mode);
        let f = fs.create_file("/big").unwrap();
        let chunk = vec![0xabu8; 64 * 1024];
        let mut written = 0u64;
        let err = loop {
            match f.write_at(written, &chunk) {
                Ok(_) => written += chunk.len() as u64,
                Err(e) => break e,
            }
            assert!(written < 64 * MB, "never ran out of space");
        };
        assert_eq!(err, FsError::NoSpace, "{mode}");
        assert_eq!(err.errno(), 28);
        // Creating more files eventually fails the same way, and nothing is lost.
        let mut n = 0;
        while fs.create_file(&format!("/small{n}")).and_then(|f| f.write_at(0, &[1u8; 4096])).is_ok() {
            n += 1;
        }
        f.fsync().unwrap();
        let size = f.len().unwrap();
        drop(f);
        // Freeing space makes the file system usable again.
        fs.remove_path("/big").unwrap();
        fs.create_file("/after").unwrap().write_at(0, &[2u8; 100_000]).unwrap();
        fs.unmount().unwrap();
        assert_fsck_clean(dev.clone(), None);
        let fs = mount(&dev, mode);
        assert_eq!(fs.read_path("/after").unwrap(), vec![2u8; 100_000]);
        assert!(size >= written);
        fs.unmount().unwrap();
    }
}

#[test]
fn writes_larger_than_the_journal_checkpoint_their_way_through() {
    // A 256-block journal (1 MiB) and a 3 MiB write: the write is split into handles, and
    // journal pressure forces checkpoints, never corruption.
    let dev = mem_fs(16 * MB, 256);
    let fs = mount(&dev, DataMode::Data);
    let data: Vec<u8> = (0..3 * MB as usize).map(|i| (i * 7 % 251) as u8).collect();
    let f = fs.create_file("/large").unwrap();
    f.write_at(0, &data).unwrap();
    f.fsync().unwrap();
    f.set_len(1000).unwrap();
    f.write_at(5000, &data[..MB as usize]).unwrap();
    drop(f);
    let c = fs.counters();
    assert!(c.checkpoints > 0 && c.commits > 10, "{c:?}");
    fs.unmount().unwrap();
    assert_fsck_clean(dev.clone(), None);
    let fs = mount(&dev, DataMode::Data);
    let got = fs.read_path("/large").unwrap();
    assert_eq!(&got[..1000], &data[..1000]);
    assert!(got[1000..5000].iter().all(|&b| b == 0));
    assert_eq!(&got[5000..], &data[..MB as usize]);
    fs.unmount().unwrap();
}

fn mount_err(bytes: Vec<u8>) -> String {
    let dev: Arc<dyn Device> = Arc::new(MemDevice::from_bytes(bytes));
    match Okeanos::mount(dev, None, MountOptions::default()) {
        Ok(_) => panic!("a damaged image mounted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn corrupt_truncated_and_foreign_images_are_refused_with_the_reason() {
    let dev = mem_fs(8 * MB, 256);
    let fs = mount(&dev, DataMode::Ordered);
    fs.create_file("/x").unwrap();
    fs.unmount().unwrap();
    let good = dev.snapshot();

    let foreign = vec![0x42u8; 8 * MB as usize];
    assert!(mount_err(foreign).contains("not an Okeanos structure"));
    let mut zeros = good.clone();
    zeros[..4096].fill(0);
    assert!(mount_err(zeros).contains("bad magic"));
    let truncated = good[..4 * MB as usize].to_vec();
    assert!(mount_err(truncated).contains("truncated"));
    let mut flipped = good.clone();
    flipped[40] ^= 1;
    assert!(mount_err(flipped).contains("checksum mismatch"));
    let mut gdt = good.clone();
    gdt[4096 + 10] ^= 1;
    assert!(mount_err(gdt).contains("group descriptor"));
    let mut jsb = good.clone();
    jsb[2 * 4096 + 50] ^= 1;
    assert!(mount_err(jsb).contains("journal superblock"));
    assert!(mount_err(vec![0u8; 1024]).contains("too small"));

    // A corrupt inode table block: mount refuses (root inode), fsck reports it.
    let mut inode = good.clone();
    let sb = okeanos::format::Superblock::decode(&good).unwrap();
    let itable = (sb.first_group_block + 2) as usize * 4096;
    inode[itable + 20] ^= 0xff;
    assert!(mount_err(inode.clone()).contains("inode"));
    let r = okeanos::fsck(Arc::new(MemDevice::from_bytes(inode)), None);
    assert!(!r.is_clean());

    // A corrupt bitmap is caught by fsck and by the allocator, which refuses to use it.
    let mut bitmap = good;
    bitmap[sb.first_group_block as usize * 4096 + 100] ^= 0x10;
    let r = okeanos::fsck(Arc::new(MemDevice::from_bytes(bitmap.clone())), None);
    assert!(r.problems.iter().any(|p| p.contains("bitmap fails its checksum")), "{r:?}");
    let dev: Arc<dyn Device> = Arc::new(MemDevice::from_bytes(bitmap));
    let fs = Okeanos::mount(dev, None, MountOptions::default()).unwrap();
    let err = fs.create_file("/y").unwrap().write_at(0, b"data").unwrap_err();
    assert!(matches!(err, FsError::Corrupt(_)), "{err}");
}

#[test]
fn io_error_turns_the_file_system_read_only() {
    let dev = mem_fs(8 * MB, 256);
    let fault = Arc::new(FaultDevice::new(dev.clone()));
    let fs = Okeanos::mount(fault.clone() as Arc<dyn Device>, None, opts(DataMode::Data)).unwrap();
    let f = fs.create_file("/a").unwrap();
    f.append(b"synced").unwrap();
    f.fsync().unwrap();
    fault.fail_after(0);
    f.append(b"lost").unwrap();
    let err = f.fsync().unwrap_err();
    assert_eq!(err.errno(), 5, "{err}");
    // Every later change is refused, and the reason is reported.
    assert!(matches!(f.append(b"x"), Err(FsError::ReadOnly(_)) | Err(FsError::Io(_))));
    assert!(fs.read_only_reason().unwrap().contains("injected fault"));
    // Reads still work from the cache.
    assert_eq!(f.read_at(0, 6).unwrap(), b"synced");
    drop(f);
    assert!(fs.unmount().is_err());
    // The image recovers to the last acknowledged state.
    let fs = mount(&dev, DataMode::Data);
    assert_eq!(fs.read_path("/a").unwrap(), b"synced");
    fs.unmount().unwrap();
    assert_fsck_clean(dev, None);
}

#[test]
fn invalid_mount_options_are_named() {
    assert!(MountOptions::parse("data=journal").unwrap_err().contains("unknown data mode \"journal\""));
    assert!(MountOptions::parse("data=data,bogus=1").unwrap_err().contains("bogus"));
    assert!(MountOptions::parse("commit=abc").unwrap_err().contains("commit=abc"));
    assert!(MountOptions::parse("errors=panic").unwrap_err().contains("errors=panic"));
    let o = MountOptions::parse("data=writeback,commit=1,ro,journal_checksum").unwrap();
    assert_eq!((o.data, o.commit_interval.as_secs(), o.read_only), (DataMode::Writeback, 1, true));
}

#[test]
fn read_only_mount_refuses_changes() {
    let dev = mem_fs(8 * MB, 256);
    let fs = mount(&dev, DataMode::Ordered);
    fs.create_file("/x").unwrap().write_at(0, b"hello").unwrap();
    fs.unmount().unwrap();
    let before = dev.snapshot();
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, MountOptions::parse("ro").unwrap()).unwrap();
    assert_eq!(fs.read_path("/x").unwrap(), b"hello");
    assert!(matches!(fs.create_file("/y"), Err(FsError::ReadOnly(_))));
    fs.unmount().unwrap();
    assert!(dev.snapshot() == before, "a read-only mount wrote to the device");
}

/// A sync registered without a waiting thread (`fsync_then`, the FUSE server's way) is
/// answered with the I/O error when its commit fails: never left unanswered, never told Ok.
#[test]
fn a_sync_without_a_thread_hears_of_the_failed_commit() {
    let dev = mem_fs(8 * MB, 256);
    let fault = Arc::new(FaultDevice::new(dev.clone()));
    let fs = Okeanos::mount(fault.clone() as Arc<dyn Device>, None, opts(DataMode::Data)).unwrap();
    let f = fs.create_file("/a").unwrap();
    f.append(b"synced").unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let t = tx.clone();
    fs.fsync_then(f.ino(), true, Box::new(move |r| t.send(r).unwrap()));
    assert!(rx.recv_timeout(std::time::Duration::from_secs(20)).unwrap().is_ok());
    fault.fail_after(0);
    f.append(b"lost").unwrap();
    fs.fsync_then(f.ino(), true, Box::new(move |r| tx.send(r).unwrap()));
    let err = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("answered").unwrap_err();
    assert_eq!(err.errno(), 5, "{err}");
    drop(f);
    assert!(fs.unmount().is_err());
    let fs = mount(&dev, DataMode::Data);
    assert_eq!(fs.read_path("/a").unwrap(), b"synced");
    fs.unmount().unwrap();
}

/// A broken invariant inside one operation (here a test fault that panics half-way through a
/// write's handle) stops the journal as jbd2's abort does: that operation fails with a clear
/// error instead of unwinding into the caller, nothing commits after it (its half-done
/// transaction never reaches the disk), the file system turns read-only with the reason, reads
/// go on, and the next mount recovers everything synced before.
#[test]
fn a_broken_invariant_stops_the_journal_and_keeps_what_was_synced() {
    for mode in DataMode::ALL {
        let dev = mem_fs(16 * MB, 512);
        let mut o = opts(mode);
        o.faults.panic_write_len = Some(777);
        let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o).unwrap();
        let f = fs.create_file("/log").unwrap();
        for k in 0..20 {
            f.append(&record(1, k, 100)).unwrap();
            f.fdatasync().unwrap();
        }
        f.append(b"written, never synced").unwrap();
        let err = f.append(&[9u8; 777]).unwrap_err();
        assert!(matches!(&err, FsError::Broken(why) if why.contains("test fault")), "{mode}: {err}");
        assert_eq!(err.errno(), libc::EIO);
        let why = fs.read_only_reason().unwrap_or_else(|| panic!("{mode}: not read-only after a broken invariant"));
        assert!(why.contains("broken invariant"), "{mode}: {why}");
        assert!(matches!(f.append(b"more"), Err(FsError::ReadOnly(_))), "{mode}");
        assert!(f.fdatasync().is_err(), "{mode}: a sync after the stop cannot be acknowledged");
        assert!(fs.create_file("/other").is_err(), "{mode}");
        // Reads still work (the state was not left locked or poisoned).
        assert!(fs.read_path("/log").unwrap().len() >= 2000, "{mode}");
        assert!(fs.clone().unmount().is_err(), "{mode}: an aborted journal is left for recovery, not marked clean");
        drop(f);
        drop(fs);
        let fs = mount(&dev, mode);
        let want: Vec<u8> = (0..20).flat_map(|k| record(1, k, 100)).collect();
        let got = fs.read_path("/log").unwrap();
        assert_eq!(&got[..2000], &want[..], "{mode}: every synced record is back");
        assert!(got.len() <= 2000 + 21, "{mode}: the half-done write did not commit ({} bytes)", got.len());
        fs.unmount().unwrap();
        assert_fsck_clean(dev, None);
    }
}

/// A failed flush is never retried blindly (fsyncgate: after a failed flush the kernel may
/// have dropped the dirty pages, so a retry that succeeds proves nothing). The fault here fails
/// one flush and then lets every later one succeed, so a retry would succeed and be seen: the
/// sync fails, the file system turns read-only, and no flush is attempted after the failed
/// one — not by later syncs, not by unmount. What was synced before recovers at the next mount.
#[test]
fn a_transient_flush_error_is_not_retried() {
    for mode in DataMode::ALL {
        let mem = mem_fs(16 * MB, 256);
        let fault = Arc::new(FaultDevice::new(mem.clone() as Arc<dyn Device>));
        let fs = Okeanos::mount(fault.clone() as Arc<dyn Device>, None, opts(mode)).unwrap();
        let f = fs.create_file("/log").unwrap();
        f.append(b"synced before\n").unwrap();
        f.fsync().unwrap();
        fault.fail_one_flush_after(0);
        f.append(b"the flush of this fails\n").unwrap();
        assert!(f.fsync().is_err(), "{mode}: a failed flush acknowledged a sync");
        let attempts = fault.flush_attempts();
        assert!(fs.read_only_reason().is_some(), "{mode}: not read-only after a failed flush");
        assert!(f.fsync().is_err(), "{mode}: a later sync succeeded after the failed flush (a blind retry)");
        assert!(f.append(b"more").is_err(), "{mode}");
        drop(f);
        let _ = fs.unmount();
        assert_eq!(fault.flush_attempts(), attempts, "{mode}: {} flushes after the failed one", fault.flush_attempts() - attempts);
        let fs = mount(&mem, mode);
        assert!(fs.read_path("/log").unwrap().starts_with(b"synced before\n"), "{mode}");
        fs.unmount().unwrap();
        assert_fsck_clean(mem, None);
    }
}

/// A panic inside a commit's I/O stops the journal whichever thread ran the commit: the
/// syncing thread leading its write group (`commit_leader=on`: the panic is caught there, not
/// passed into the program's thread) or the journal thread (`off`). The sync fails with the
/// reason, the file system turns read-only, and what was synced before recovers.
#[test]
fn a_panic_in_a_commit_stops_the_journal_on_either_thread() {
    for leader in [true, false] {
        let mem = mem_fs(16 * MB, 256);
        let dev = Arc::new(FlushFault::new(mem.clone() as Arc<dyn Device>, true));
        let mut o = opts(DataMode::Wasteless);
        o.commit_leader = leader;
        let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o).unwrap();
        let f = fs.create_file("/log").unwrap();
        f.append(b"synced before\n").unwrap();
        f.fdatasync().unwrap();
        dev.arm();
        f.append(b"its commit panics\n").unwrap();
        let err = f.fdatasync().unwrap_err();
        assert_eq!(err.errno(), libc::EIO, "commit_leader={leader}: {err}");
        let why = fs.read_only_reason().unwrap_or_else(|| panic!("commit_leader={leader}: not read-only after the panic"));
        assert!(why.contains("a bug"), "commit_leader={leader}: {why}");
        assert!(f.fdatasync().is_err(), "commit_leader={leader}: a later sync was acknowledged");
        assert_eq!(f.read_at(0, 14).unwrap(), b"synced before\n");
        drop(f);
        drop(fs);
        let fs = mount(&mem, DataMode::Wasteless);
        assert!(fs.read_path("/log").unwrap().starts_with(b"synced before\n"), "commit_leader={leader}");
        fs.unmount().unwrap();
    }
}

//! The daemon and the tools around it: detached mounts, mount(8) and fstab, bad images, the
//! metrics file, checkpoints and fsck -n on a live mount, broken invariants, the exerciser, and
//! the two transports (FUSE over io_uring, its faults and its fallback to /dev/fuse).

use super::*;

/// The mount point as /proc/self/mountinfo escapes it (space \040, tab \011, newline \012,
/// backslash \134).
fn mountinfo_escape(p: &Path) -> String {
    let mut s = String::new();
    for &b in p.as_os_str().as_encoded_bytes() {
        match b {
            b' ' | b'\t' | b'\n' | b'\\' => s.push_str(&format!("\\{b:03o}")),
            _ => s.push(b as char),
        }
    }
    s
}

#[test]
fn detached_mount_on_a_path_with_spaces_and_a_newline_and_one_mount_per_image() {
    if !fuse_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = image(dir.path());
    let mnt = dir.path().join("my mount\npoint");
    std::fs::create_dir_all(&mnt).unwrap();
    let t0 = Instant::now();
    let out = Command::new(BIN).arg("mount").arg(&img).arg(&mnt).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(t0.elapsed() < Duration::from_secs(20), "the mount took {:?}", t0.elapsed());
    let canon = std::fs::canonicalize(&mnt).unwrap();
    assert!(std::fs::read_to_string("/proc/self/mountinfo").unwrap().contains(&mountinfo_escape(&canon)));
    std::fs::write(mnt.join("f"), b"x").unwrap();
    // A second mount of the same image (elsewhere) is refused at once, naming the holder.
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let out = Command::new(BIN).arg("mount").arg(&img).arg(&other).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("in use by process") && err.contains("mount"), "{err}");
    // So are writes to the mounted image from the command line.
    let out = Command::new(BIN).args(["mkdir"]).arg(&img).arg("/d").output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("in use by"));
    let out = Command::new(BIN).arg("umount").arg(&mnt).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    fsck_clean(&img);
    let out = Command::new(BIN).arg("cat").arg(&img).arg("/f").output().unwrap();
    assert_eq!(out.stdout, b"x");
}

#[test]
fn a_bad_image_fails_the_mount_at_once_with_its_own_message() {
    if !fuse_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("junk.img");
    std::fs::write(&img, vec![0x5au8; 8 << 20]).unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let t0 = Instant::now();
    let out = Command::new(BIN).arg("mount").arg(&img).arg(&mnt).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("not an Okeanos structure"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(60), "the failed mount hung: {:?}", t0.elapsed());
    // Only this mount's own lines: a later failure on the same mount point does not repeat it.
    let out = Command::new(BIN).arg("mount").arg(&img).arg(&mnt).args(["-o", "data=bogus"]).output().unwrap();
    let err2 = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err2.contains("unknown data mode") && !err2.contains("not an Okeanos structure"), "{err2}");
}

/// Waits (bounded) until no daemon holds `img`, then returns `okeanos stat IMG`'s output.
fn settled_stat(img: &Path) -> String {
    let t0 = Instant::now();
    loop {
        let o = Command::new(BIN).arg("stat").arg(img).output().unwrap();
        let s = String::from_utf8_lossy(&o.stdout).into_owned();
        if !s.contains("in use") || t0.elapsed() > Duration::from_secs(60) {
            return s;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// mount(8) and fstab, as Linux users mount: `mount -t fuse.okeanos IMG MNT -o ...` (through
/// /sbin/mount.fuse.okeanos), `umount MNT` (the daemon commits,
/// checkpoints and marks the image clean), and an fstab line with fstab-only options
/// (`mount -T FSTAB MNT`); and the helper called by its own name, as /sbin/mount.fuse.okeanos.
#[test]
fn mount_8_fstab_and_the_mount_helper() {
    if !fuse_usable() || !is_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img.okfs");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    assert!(Command::new(BIN).args(["mkfs", "--size", "64M"]).arg(&img).output().unwrap().status.success());
    // mount(8) runs /sbin/mount.fuse.okeanos (what `okeanos install-helpers` installs): put
    // this build there for the test, and take it away after.
    struct Helper(Option<PathBuf>);
    impl Drop for Helper {
        fn drop(&mut self) {
            if let Some(p) = &self.0 {
                let _ = std::fs::remove_file(p);
            }
        }
    }
    let sbin = Path::new("/sbin/mount.fuse.okeanos");
    let _helper = match std::fs::symlink_metadata(sbin) {
        Ok(_) => {
            eprintln!("skipping: {} exists already (an installed okeanos); not replacing it", sbin.display());
            return;
        }
        Err(_) => {
            std::os::unix::fs::symlink(BIN, sbin).unwrap();
            Helper(Some(sbin.to_path_buf()))
        }
    };
    let path = std::env::var("PATH").unwrap_or_default();
    let o = Command::new("mount").env("PATH", &path).args(["-t", "fuse.okeanos"]).arg(&img).arg(&mnt).args(["-o", "data=wasteless,dmeta"]).output().unwrap();
    assert!(o.status.success(), "mount: {} {}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(mounted(&mnt));
    std::fs::write(mnt.join("a"), b"through mount(8)").unwrap();
    let stat = Command::new(BIN).arg("stat").arg(&mnt).output().unwrap();
    let text = String::from_utf8_lossy(&stat.stdout);
    assert!(text.contains("mode          wasteless+dmeta") && text.contains("syncs"), "{text}");
    // The mount's own line: its transport and request threads.
    assert!(text.lines().any(|l| l.starts_with("fuse          ") && l.contains("request threads") && l.contains("inodes known")), "{text}");
    let prom = std::fs::read_to_string(mnt.join(".okeanos-metrics")).unwrap();
    assert!(prom.contains("# TYPE okeanos_syncs_total counter") && prom.contains("placement=\"internal\""), "{prom}");
    assert!(umount8(&mnt));
    let s = settled_stat(&img);
    assert!(s.contains("clean"), "after umount: {s}");
    // An fstab line with options only mount(8) understands.
    let fstab = dir.path().join("fstab");
    std::fs::write(&fstab, format!("{} {} fuse.okeanos data=wasteless,noauto,nofail,x-systemd.automount,_netdev 0 0\n", img.display(), mnt.display())).unwrap();
    let o = Command::new("mount").env("PATH", &path).arg("-T").arg(&fstab).arg(&mnt).output().unwrap();
    assert!(o.status.success(), "mount from fstab: {}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(mnt.join("a")).unwrap(), b"through mount(8)");
    assert!(umount8(&mnt));
    settled_stat(&img);
    // The helper by its own name (what install-helpers puts in /sbin).
    let helper = dir.path().join("mount.fuse.okeanos");
    std::os::unix::fs::symlink(BIN, &helper).unwrap();
    let o = Command::new(&helper).arg(&img).arg(&mnt).args(["-o", "rw,defaults,data=data"]).output().unwrap();
    assert!(o.status.success(), "helper: {}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(mnt.join("a")).unwrap(), b"through mount(8)");
    let json: serde_json::Value = serde_json::from_slice(&Command::new(BIN).args(["stat", "--json"]).arg(&mnt).output().unwrap().stdout).unwrap();
    assert_eq!(json["mode"], "data");
    assert!(Command::new(BIN).arg("umount").arg(&mnt).status().unwrap().success());
    // A bad option is refused by the helper with mount(8)'s failure status.
    let o = Command::new(&helper).arg(&img).arg(&mnt).args(["-o", "data=bogus"]).output().unwrap();
    assert_eq!(o.status.code(), Some(32), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("bogus"));
}

/// The daemon writes its Prometheus metrics to `metrics_file=` (atomically; again at unmount).
#[test]
fn the_daemon_writes_a_metrics_file() {
    if !fuse_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = small_image(dir.path());
    let prom = dir.path().join("okeanos.prom");
    let m = Mount::new(&img, &dir.path().join("mnt"), &format!("metrics_file={}", prom.display()));
    let mut f = std::fs::OpenOptions::new().create(true).write(true).open(dir.path().join("mnt/x")).unwrap();
    for _ in 0..10 {
        f.write_all(&[1u8; 128]).unwrap();
        f.sync_data().unwrap();
    }
    drop(f);
    m.unmount();
    let text = std::fs::read_to_string(&prom).unwrap();
    let syncs: f64 = text.lines().find_map(|l| l.strip_prefix("okeanos_syncs_total ")).unwrap().parse().unwrap();
    assert!(syncs >= 10.0, "{text}");
}

/// The counters files are read as one snapshot per open: a reader that takes many small
/// read() calls while writers commit gets one whole text each time. They were rendered again
/// at every read, so a reader whose pieces came from renderings of different lengths got
/// broken JSON (a CI run failed on "trailing characters").
#[test]
fn the_counters_files_read_as_one_snapshot_per_open() {
    if !fuse_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = small_image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=wasteless,dmeta");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (stop, path) = (stop.clone(), mnt.join("x"));
        std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && n < 200_000 {
                f.write_all(&[n as u8; 100]).unwrap();
                f.sync_data().unwrap();
                n += 1;
            }
            n
        })
    };
    // 16 bytes a read(): the files are opened for direct I/O, so each is one request.
    let read_small = |name: &str| {
        let mut f = std::fs::File::open(mnt.join(name)).unwrap();
        let (mut text, mut piece) = (Vec::new(), [0u8; 16]);
        loop {
            let n = std::io::Read::read(&mut f, &mut piece).unwrap();
            if n == 0 {
                break text;
            }
            text.extend_from_slice(&piece[..n]);
        }
    };
    let mut syncs_seen = Vec::new();
    for round in 0..150 {
        let json = read_small(".okeanos-stats");
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap_or_else(|e| panic!("round {round}: {e}: {}", String::from_utf8_lossy(&json)));
        syncs_seen.push(v["syncs"].as_u64().unwrap());
        let prom = String::from_utf8(read_small(".okeanos-metrics")).unwrap();
        assert!(prom.ends_with('\n'), "round {round}: {prom}");
        for l in prom.lines().filter(|l| !l.starts_with('#')) {
            let value = l.rsplit(' ').next().unwrap();
            assert!(value.parse::<f64>().is_ok() && l.starts_with("okeanos_"), "round {round}: a torn line {l:?}");
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = writer.join().unwrap();
    assert!(syncs_seen.first() < syncs_seen.last(), "the counters moved while they were read ({written} syncs): {syncs_seen:?}");
    m.unmount();
}

/// `okeanos checkpoint MOUNTPOINT` on a live manylogs mount with `checkpoint=lazy`: the
/// blocks logged by the writes beside it go home now, and the image then needs no replay. And
/// O_DUR set, read and cleared through the xattr `user.okeanos.durable`.
#[test]
fn okeanos_checkpoint_on_a_live_mount() {
    if !fuse_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img.okfs");
    let out = Command::new(BIN).arg("mkfs").arg(&img).args(["--size", "64M", "--journal", "manylogs", "--log-group-size", "8M", "--log-size", "1M"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let m = Mount::new(&img, &dir.path().join("mnt"), "data=data,checkpoint=lazy");
    // O_DUR through the mount: the xattr user.okeanos.durable sets the file's flag.
    let d = std::ffi::CString::new(dir.path().join("mnt/dur").to_str().unwrap()).unwrap();
    std::fs::write(dir.path().join("mnt/dur"), b"x").unwrap();
    let name = c"user.okeanos.durable";
    assert_eq!(unsafe { libc::setxattr(d.as_ptr(), name.as_ptr(), b"1".as_ptr().cast(), 1, 0) }, 0, "{}", std::io::Error::last_os_error());
    let mut v = [0u8; 8];
    assert_eq!(unsafe { libc::getxattr(d.as_ptr(), name.as_ptr(), v.as_mut_ptr().cast(), v.len()) }, 1);
    assert_eq!(v[0], b'1');
    assert_eq!(unsafe { libc::setxattr(d.as_ptr(), name.as_ptr(), b"7".as_ptr().cast(), 1, 0) }, -1, "a bad value is refused");
    assert_eq!(unsafe { libc::removexattr(d.as_ptr(), name.as_ptr()) }, 0);
    assert_eq!(unsafe { libc::getxattr(d.as_ptr(), name.as_ptr(), v.as_mut_ptr().cast(), v.len()) }, -1);
    let mut f = std::fs::OpenOptions::new().create(true).write(true).open(dir.path().join("mnt/x")).unwrap();
    for _ in 0..40 {
        f.write_all(&[7u8; 4096]).unwrap();
        f.sync_data().unwrap();
    }
    let out = Command::new(BIN).arg("checkpoint").arg(dir.path().join("mnt")).arg("--json").output().unwrap();
    assert!(out.status.success(), "checkpoint: {}", String::from_utf8_lossy(&out.stderr));
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(c["blocks"].as_u64().unwrap() >= 40, "{c}");
    assert!(m.stats()["checkpoint"]["blocks"].as_u64().unwrap() >= c["blocks"].as_u64().unwrap(), "the mount's counters saw it");
    drop(f);
    m.unmount();
    fsck_clean(&img);
    // The command on an image (not mounted): nothing is owed after a clean unmount.
    let out = Command::new(BIN).arg("checkpoint").arg(&img).output().unwrap();
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("checkpoint: 0 blocks written home"), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

/// A broken invariant inside one request (a test fault that panics half-way through a write of
/// 777 bytes) does not take the mount down: that write fails with EIO, the journal stops, the
/// mount stays up read-only (reads work, writes get EROFS), `okeanos stat` and the log say why,
/// `okeanos umount` still unmounts, and the next mount recovers every synced record.
#[test]
fn a_broken_invariant_in_a_request_stops_the_journal_not_the_mount() {
    if !fuse_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = small_image(dir.path());
    let mnt = dir.path().join("mnt");
    let log = dir.path().join("daemon.log");
    let mut cmd = Command::new(BIN);
    cmd.env("OKEANOS_TEST_FAULTS", "1").stdout(Stdio::null()).stderr(std::fs::File::create(&log).unwrap());
    let m = Mount::with(cmd, &img, &mnt, "data=selective,fault_panic_write_len=777");
    let mut f = std::fs::OpenOptions::new().append(true).create(true).open(mnt.join("log")).unwrap();
    let mut want = Vec::new();
    for k in 0..50 {
        let rec = format!("record {k:04}\n");
        f.write_all(rec.as_bytes()).unwrap();
        f.sync_data().unwrap();
        want.extend_from_slice(rec.as_bytes());
    }
    let err = f.write_all(&[b'x'; 777]).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    // The mount answers: reads work, writes are refused as on a read-only file system.
    assert_eq!(std::fs::read(mnt.join("log")).unwrap()[..want.len()], want[..]);
    let e = std::fs::write(mnt.join("new"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    let out = Command::new(BIN).arg("stat").arg(&mnt).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("READ-ONLY") && text.contains("broken invariant"), "{text}");
    drop(f);
    let out = Command::new(BIN).arg("umount").arg(&mnt).output().unwrap();
    assert!(out.status.success(), "umount: {}", String::from_utf8_lossy(&out.stderr));
    let mut m = m;
    let status = m.child.take().unwrap().wait().unwrap();
    assert!(!status.success(), "the daemon says the engine could not unmount cleanly");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("journal stopped") && logged.contains("test fault"), "{logged}");
    let m = Mount::new(&img, &mnt, "data=selective");
    assert_eq!(std::fs::read(mnt.join("log")).unwrap()[..want.len()], want[..], "every synced record is back");
    m.unmount();
    fsck_clean(&img);
}

/// `fsck -n` of a healthy image that is mounted and busy: a live journal is not a problem. It
/// says the image is mounted, replays the journal into memory, checks the result and exits 0;
/// fsck without -n refuses the image in use with e2fsck's operational code 8.
#[test]
fn fsck_n_of_a_mounted_image_checks_what_it_can() {
    if !fuse_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = small_image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=wasteless+dmeta,commit=60");
    for k in 0..20 {
        let mut f = std::fs::File::create(mnt.join(format!("f{k}"))).unwrap();
        f.write_all(&vec![k as u8 + 1; 3000]).unwrap();
        f.sync_all().unwrap();
    }
    let o = Command::new(BIN).args(["fsck", "-n"]).arg(&img).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("is mounted") && text.contains("clean") && !text.contains("PROBLEM"), "{text}");
    assert!(text.contains("replayed in memory"), "the journal was live: {text}");
    let o = Command::new(BIN).arg("fsck").arg(&img).output().unwrap();
    assert_eq!(o.status.code(), Some(8), "{}", String::from_utf8_lossy(&o.stderr));
    m.unmount();
    fsck_clean(&img);
}

/// The model-based exerciser (okeanos::exercise) through the mount, with the system calls
/// programs use (pwrite at holes, O_APPEND, ftruncate, every fallocate mode, copy_file_range,
/// mmap writes with msync, rename, link, unlink, fsync), under several policies, direct I/O and
/// the page cache; then unmount, fsck, mount again and the same contents. The seed is printed on
/// failure (`okeanos exercise DIR --seed N --ops N` repeats a run on any directory).
#[test]
fn the_exerciser_through_the_mount() {
    if !fuse_usable() {
        return;
    }
    use okeanos::exercise::{self, DirTarget};
    let seed = std::env::var("OKEANOS_EXERCISE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0xf05e_u64);
    let ops = std::env::var("OKEANOS_EXERCISE_OPS").ok().and_then(|s| s.parse().ok()).unwrap_or(500);
    for (k, opts) in ["data=ordered", "data=data", "data=wasteless+dmeta", "data=selective+dmeta", "data=selective,page_cache"].into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let img = small_image(dir.path());
        let mnt = dir.path().join("mnt");
        let m = Mount::new(&img, &mnt, opts);
        std::fs::create_dir(mnt.join("x")).unwrap();
        let mut t = DirTarget { dir: mnt.join("x") };
        exercise::run(&mut t, seed + k as u64, ops, true).unwrap_or_else(|e| panic!("-o {opts}: {e}"));
        let before = exercise::snapshot(&mut t).unwrap();
        m.unmount();
        fsck_clean(&img);
        let m = Mount::new(&img, &mnt, opts);
        exercise::recheck(&mut t, &before).unwrap_or_else(|e| panic!("-o {opts}, seed {}: {e}", seed + k as u64));
        m.unmount();
    }
}

/// FUSE over io_uring (`transport=io_uring`): every kind of request the front end serves goes
/// through the rings, concurrent syncs group-commit as over /dev/fuse, the counters say which
/// transport the mount uses, and what was written is all there after a clean unmount.
#[test]
fn fuse_over_io_uring_serves_every_request_and_says_so() {
    if !fuse_usable() || !is_root() {
        return;
    }
    let Some(on) = UringOn::new() else { return };
    let dir = tempfile::tempdir().unwrap();
    let img = image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::spawn(Command::new(BIN), &img, &mnt, "data=wasteless,dmeta,transport=io_uring", Some(on));
    let st = m.stats();
    assert_eq!(st["fuse_transport"], "io_uring", "{st}");
    // 32 writers appending 128-byte records with an fdatasync after each.
    synced_writers(&mnt, 32, 50, 118);
    // Names, links, attributes, a large write and its reads in pieces, a sparse region.
    std::fs::create_dir(mnt.join("d")).unwrap();
    std::fs::rename(mnt.join("s0"), mnt.join("d/moved")).unwrap();
    std::os::unix::fs::symlink("moved", mnt.join("d/link")).unwrap();
    assert_eq!(std::fs::read_link(mnt.join("d/link")).unwrap(), Path::new("moved"));
    std::fs::hard_link(mnt.join("s1"), mnt.join("d/hard")).unwrap();
    std::fs::remove_file(mnt.join("s2")).unwrap();
    let big: Vec<u8> = (0..(1u32 << 20)).map(|i| (i * 7 + i / 4096) as u8).collect();
    std::fs::write(mnt.join("big"), &big).unwrap();
    let mut back = Vec::new();
    std::fs::File::open(mnt.join("big")).unwrap().read_to_end(&mut back).unwrap();
    assert!(back == big, "a 1 MiB file read back differs");
    std::fs::File::create(mnt.join("sparse")).unwrap().set_len(1 << 24).unwrap();
    assert_eq!(std::fs::metadata(mnt.join("sparse")).unwrap().len(), 1 << 24);
    let names: std::collections::BTreeSet<String> = std::fs::read_dir(&mnt).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(names.len(), 30 + 3, "{names:?}");
    std::fs::remove_dir(mnt.join("d")).unwrap_err();
    let st = m.stats();
    assert_eq!(st["fuse_transport"], "io_uring", "{st}");
    assert!(st["fuse_ring_requests"].as_u64().unwrap() >= 1600 * 2, "every write and sync went through the rings: {st}");
    assert!(st["syncs_per_commit"].as_f64().unwrap() > 1.5, "syncs still share commits: {st}");
    m.unmount();
    fsck_clean(&img);
    let m = Mount::new(&img, &mnt, "data=wasteless,dmeta");
    for w in 1..32 {
        let name = if w == 2 { continue } else { format!("s{w}") };
        let text = std::fs::read_to_string(mnt.join(&name)).unwrap();
        assert_eq!(text.lines().count(), 50, "{name}");
        assert!(text.lines().enumerate().all(|(k, l)| l.starts_with(&format!("{w:03} {k:04} "))), "{name}");
    }
    assert_eq!(std::fs::read(mnt.join("big")).unwrap(), big);
    assert_eq!(std::fs::read_to_string(mnt.join("d/moved")).unwrap().lines().count(), 50);
    m.unmount();
}

/// Runs `f` (requests on `m`'s mount) for at most `limit`: past it, the daemon is killed,
/// which ends the FUSE connection and fails every request still waiting, and the test fails
/// saying the requests hung.
fn within<T: Send + 'static>(m: &Mount, limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let t = std::thread::spawn(f);
    let t0 = Instant::now();
    while !t.is_finished() && t0.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(20));
    }
    if !t.is_finished() {
        if let Some(c) = &m.child {
            // SAFETY: kill has no memory preconditions.
            unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
        }
        panic!("requests on {} hung for {limit:?}: the daemon was killed", m.mnt.display());
    }
    t.join().unwrap()
}

/// The daemon's standard error, written to `log`.
fn logged_mount(img: &Path, mnt: &Path, log: &Path, hooks: &str, opts: &str, uring: Option<UringOn>) -> Mount {
    let mut cmd = Command::new(BIN);
    cmd.stdout(Stdio::null()).stderr(std::fs::File::create(log).unwrap()).env("OKEANOS_TEST_HOOKS", hooks);
    Mount::spawn(cmd, img, mnt, opts, uring)
}

/// A small image mounted over io_uring with a fault hook, the daemon's log kept.
struct RingFault {
    _dir: tempfile::TempDir,
    img: PathBuf,
    mnt: PathBuf,
    log: PathBuf,
    m: Mount,
}

/// Mounts for a ring-fault test: None where the kernel has no FUSE over io_uring.
fn ring_fault(hooks: &str, opts: &str) -> Option<RingFault> {
    let on = UringOn::new()?;
    let dir = tempfile::tempdir().unwrap();
    let img = small_image(dir.path());
    let mnt = dir.path().join("mnt");
    let log = dir.path().join("daemon.log");
    let m = logged_mount(&img, &mnt, &log, hooks, &format!("{opts},transport=io_uring"), Some(on));
    Some(RingFault { _dir: dir, img, mnt, log, m })
}

/// A queue whose thread cannot start (a test hook fails it) must not leave the kernel holding
/// requests for rings that will never be ready: the daemon tells the kernel to give up on
/// io_uring, requests go through /dev/fuse, and the log and the counters say so.
#[test]
fn a_ring_queue_that_cannot_start_falls_back_to_dev_fuse() {
    if !fuse_usable() || !is_root() {
        return;
    }
    let Some(RingFault { _dir, img, mnt, log, m }) = ring_fault("ring_fail_queue=0", "data=ordered") else { return };
    let at = mnt.clone();
    within(&m, Duration::from_secs(30), move || {
        for k in 0..20 {
            let mut f = std::fs::File::create(at.join(format!("f{k}"))).unwrap();
            f.write_all(b"hello").unwrap();
            f.sync_all().unwrap();
        }
    });
    let st = m.stats();
    assert_eq!((st["fuse_transport"].as_str(), st["fuse_ring_requests"].as_u64()), (Some("/dev/fuse"), Some(0)), "{st}");
    m.unmount();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("falling back to /dev/fuse"), "{text}");
    fsck_clean(&img);
}

/// A ring queue's thread that fails while mounted (a test hook ends every one after 300
/// requests) had taken requests it will never answer: the daemon aborts the connection, so
/// that no program waits forever, and the engine unmounts cleanly. Every record whose
/// fdatasync returned is there after a remount.
#[test]
fn a_ring_queue_that_dies_aborts_the_connection_and_hangs_no_request() {
    if !fuse_usable() || !is_root() {
        return;
    }
    let Some(RingFault { _dir, img, mnt, log, mut m }) = ring_fault("ring_fail_after=300", "data=wasteless,dmeta") else { return };
    let at = mnt.clone();
    let results = within(&m, Duration::from_secs(60), move || {
        let mnt = at;
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let path = mnt.join(format!("w{w}"));
                std::thread::spawn(move || {
                    let mut synced = 0usize;
                    // A writer that starts after the connection died fails at its open: that
                    // error is the one to check, not taken for a run that ended well.
                    let mut f = match std::fs::OpenOptions::new().append(true).create(true).open(path) {
                        Ok(f) => f,
                        Err(e) => return (synced, e.raw_os_error()),
                    };
                    for k in 0..10_000 {
                        let rec = format!("{w} {k:05}\n");
                        if let Err(e) = f.write_all(rec.as_bytes()).and_then(|()| f.sync_data()) {
                            return (synced, e.raw_os_error());
                        }
                        synced += 1;
                    }
                    (synced, None)
                })
            })
            .collect();
        writers.into_iter().map(|t| t.join().unwrap()).collect::<Vec<(usize, Option<i32>)>>()
    });
    for (w, (_, err)) in results.iter().enumerate() {
        // ENOTCONN/ECONNABORTED once the connection is aborted; ECANCELED for a request the
        // kernel was handing to the thread as it ended.
        assert!(matches!(err, Some(libc::ENOTCONN) | Some(libc::ECONNABORTED) | Some(libc::ECANCELED)), "writer {w} ended with {err:?}, not a dead connection");
    }
    let status = m.child.take().unwrap().wait().unwrap();
    // The aborted connection's mount stays until unmounted, whatever the checks below say.
    let _ = Command::new("umount").arg(&mnt).status();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "the engine unmounts cleanly after the abort: {status}; its log:\n{text}");
    assert!(text.contains("aborting the connection") && text.contains("unmounted cleanly"), "{text}");
    fsck_clean(&img);
    let m = Mount::new(&img, &mnt, "data=wasteless,dmeta");
    for (w, (synced, _)) in results.iter().enumerate() {
        let text = std::fs::read_to_string(mnt.join(format!("w{w}"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.len() >= *synced, "w{w}: {} records back, {synced} were synced", lines.len());
        assert!(lines.iter().enumerate().all(|(k, l)| *l == format!("{w} {k:05}")), "w{w}: records out of order or torn");
    }
    m.unmount();
}

/// `transport=io_uring` where the kernel does not offer it (here: the fuse module's switch
/// off): the mount serves through /dev/fuse and says so in one line.
#[test]
fn transport_io_uring_without_the_kernel_uses_dev_fuse_and_says_so() {
    if !fuse_usable() || !is_root() || !Path::new(URING_PARAM).exists() {
        if !Path::new(URING_PARAM).exists() {
            skip("uring", "this kernel has no FUSE over io_uring");
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = small_image(dir.path());
    let mnt = dir.path().join("mnt");
    let log = dir.path().join("daemon.log");
    UringOn::off_during(|| {
        let m = logged_mount(&img, &mnt, &log, "", "data=ordered,transport=io_uring", None);
        std::fs::write(mnt.join("f"), b"hello").unwrap();
        assert_eq!(std::fs::read(mnt.join("f")).unwrap(), b"hello");
        assert_eq!(m.stats()["fuse_transport"], "/dev/fuse");
        m.unmount();
    });
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("io_uring")).collect();
    assert!(lines.len() == 1 && lines[0].contains("enable_uring parameter is off") && lines[0].contains("/dev/fuse"), "{text}");
}

/// The threads reading /dev/fuse: one per CPU by default (at least two), as `threads=` says
/// otherwise; the counters file tells which, and a mount with either serves synced writes.
#[test]
fn request_threads_are_one_per_cpu_unless_given() {
    if !fuse_usable() {
        return;
    }
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 64) as u64;
    for (opts, want) in [("data=wasteless,dmeta", cpus), ("data=wasteless,dmeta,threads=3", 3)] {
        let dir = tempfile::tempdir().unwrap();
        let img = small_image(dir.path());
        let mnt = dir.path().join("mnt");
        let m = Mount::new(&img, &mnt, opts);
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(mnt.join("f")).unwrap();
        for k in 0..20u8 {
            f.write_all(&[k; 100]).unwrap();
            f.sync_data().unwrap();
        }
        drop(f);
        assert_eq!(std::fs::read(mnt.join("f")).unwrap().len(), 2000);
        let st = m.stats();
        assert_eq!(st["fuse_request_threads"].as_u64(), Some(want), "{opts}: {st}");
        m.unmount();
        fsck_clean(&img);
    }
}

/// A read that waits for the device lends its request thread's place to a spare
/// (crates/okeanos-cli/src/fuse/spares.rs): four readers of cold files, each read held 500 ms
/// in its device wait by the `read_delay_ms` hook, all wait at once on a mount with one request
/// thread and three spares, and one at a time with no spares (the canary: it must not reach 4).
#[test]
fn reads_waiting_for_the_device_are_served_by_spare_threads() {
    if !fuse_usable() {
        return;
    }
    for (opts, want) in [("data=ordered,threads=1,spare_threads=3", 4), ("data=ordered,threads=1,spare_threads=0", 1)] {
        let dir = tempfile::tempdir().unwrap();
        let img = small_image(dir.path());
        let mnt = dir.path().join("mnt");
        let m = Mount::new(&img, &mnt, "data=ordered");
        for k in 0..4u8 {
            std::fs::write(mnt.join(format!("f{k}")), vec![k; 8192]).unwrap();
        }
        m.unmount();
        let m = logged_mount(&img, &mnt, &dir.path().join("log"), "read_delay_ms=500", opts, None);
        // Requests that do not wait for the device: threads the pool does not need park.
        for _ in 0..50 {
            drop(std::fs::File::open(mnt.join("f0")).unwrap());
        }
        let paths: Vec<_> = (0..4u8).map(|k| (k, mnt.join(format!("f{k}")))).collect();
        let read = within(&m, Duration::from_secs(60), move || {
            let readers: Vec<_> = paths.into_iter().map(|(k, p)| std::thread::spawn(move || (k, std::fs::read(p).unwrap()))).collect();
            readers.into_iter().map(|t| t.join().unwrap()).collect::<Vec<_>>()
        });
        for (k, d) in read {
            assert_eq!(d, vec![k; 8192], "{opts}: file f{k}");
        }
        let st = m.stats();
        assert_eq!(st["fuse_device_waits_most"].as_u64(), Some(want), "{opts}: {st}");
        assert_eq!(st["fuse_spare_threads"].as_u64(), Some(if want > 1 { 3 } else { 0 }), "{opts}: {st}");
        // The spares were parked by the opens and called by the waits, not back from a park.
        assert!(want == 1 || st["fuse_spare_calls"].as_u64() >= Some(1), "{opts}: {st}");
        m.unmount();
        fsck_clean(&img);
    }
}

/// The counters file says how new whole blocks are written (`new_blocks`, wasteless's
/// `fresh_blocks=` as the mount resolved it; docs/JOURNALING.md, "New blocks in place"), and
/// each form serves whole-block appends that fsck finds clean.
#[test]
fn the_counters_say_how_new_blocks_are_written() {
    if !fuse_usable() {
        return;
    }
    for (opts, want) in [
        ("data=wasteless,dmeta,fresh_blocks=in_place", Some("in place, beside the commit under its flush (in-place tags)")),
        ("data=wasteless,fresh_blocks=in_place,in_place_tags=off", Some("in place, written and flushed before the commit")),
        ("data=wasteless,dmeta,fresh_blocks=journal", Some("logged")),
        ("data=ordered", None),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let img = small_image(dir.path());
        let mnt = dir.path().join("mnt");
        let m = Mount::new(&img, &mnt, opts);
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(mnt.join("f")).unwrap();
        for k in 0..8u8 {
            f.write_all(&[k; 4096]).unwrap();
            f.sync_data().unwrap();
        }
        drop(f);
        let st = m.stats();
        assert_eq!(st["new_blocks"].as_str(), want, "{opts}: {st}");
        let tagged = st["commit_in_place_tagged_blocks"].as_u64().unwrap_or(0);
        assert_eq!(tagged > 0, want.is_some_and(|w| w.contains("in-place tags")), "{opts}: {tagged} blocks beside their commits");
        m.unmount();
        fsck_clean(&img);
        let o = Command::new(BIN).arg("cat").arg(&img).arg("/f").output().unwrap();
        assert_eq!(o.stdout.len(), 8 * 4096, "{opts}");
        assert!(o.stdout.chunks(4096).enumerate().all(|(k, c)| c.iter().all(|&b| b == k as u8)), "{opts}: the appends read back");
    }
}

/// umount(8) of `mnt`, tried again for up to 2 s while the mount is busy: another test's
/// process that forks holds every open file of this one until its child execs.
fn umount8(mnt: &Path) -> bool {
    for _ in 0..20 {
        let out = Command::new("umount").arg(mnt).output().unwrap();
        if out.status.success() {
            return true;
        }
        if !String::from_utf8_lossy(&out.stderr).contains("busy") {
            eprintln!("umount {}: {}", mnt.display(), String::from_utf8_lossy(&out.stderr));
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

//! `okeanos mount` end to end: real programs on a FUSE mount in a temporary directory. Skipped,
//! with a message, where /dev/fuse cannot be opened or fusermount3 is missing (the README's
//! test command installs fuse3, fio, postmark and sqlite3 when it can).

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_okeanos");

/// A test that cannot run here says so; where the test command promised what it needs
/// (OKEANOS_TESTS_REQUIRE names `fuse`, `root` and `tools` when it installed and found them), a
/// skip would hide a test that should have run, so it fails instead.
fn skip(need: &str, why: &str) -> bool {
    if std::env::var("OKEANOS_TESTS_REQUIRE").is_ok_and(|r| r.split(',').any(|x| x == need)) {
        panic!("{why}, but the test command promised {need} (OKEANOS_TESTS_REQUIRE)");
    }
    eprintln!("skipping: {why}");
    true
}

fn fuse_usable() -> bool {
    if std::fs::OpenOptions::new().read(true).write(true).open("/dev/fuse").is_err() {
        return !skip("fuse", "/dev/fuse cannot be opened on this machine");
    }
    if Command::new("fusermount3").arg("-V").output().is_err() {
        return !skip("fuse", "fusermount3 is not installed (apt-get install fuse3)");
    }
    true
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    root || !skip("root", "needs root")
}

fn have(tool: &str) -> bool {
    let ok = Command::new("sh").arg("-c").arg(format!("command -v {tool}")).output().is_ok_and(|o| o.status.success());
    ok || !skip("tools", &format!("{tool} is not installed"))
}

fn mounted(mnt: &Path) -> bool {
    // Canonical without asking the mount itself (which may not answer yet).
    let canon = std::fs::canonicalize(mnt.parent().unwrap()).unwrap().join(mnt.file_name().unwrap());
    std::fs::read_to_string("/proc/self/mountinfo").unwrap().lines().any(|l| l.split(' ').nth(4) == canon.to_str())
}

/// The fuse module's switch for FUSE over io_uring (Linux 6.14 and later).
const URING_PARAM: &str = "/sys/module/fuse/parameters/enable_uring";

/// Who holds the switch on, and what it was before the first of them.
struct ParamUsers {
    users: usize,
    original: Option<String>,
}

static PARAM: std::sync::Mutex<ParamUsers> = std::sync::Mutex::new(ParamUsers { users: 0, original: None });
static PARAM_FREE: std::sync::Condvar = std::sync::Condvar::new();

/// Keeps FUSE over io_uring enabled in the kernel while held (as root); the last holder puts
/// the parameter back as it found it.
struct UringOn;

impl UringOn {
    /// None (after saying why) where this kernel has no FUSE over io_uring or we are not root.
    fn new() -> Option<UringOn> {
        if !std::path::Path::new(URING_PARAM).exists() {
            return (!skip("uring", "this kernel has no FUSE over io_uring (/sys/module/fuse/parameters/enable_uring)")).then_some(UringOn);
        }
        let mut p = PARAM.lock().unwrap_or_else(|e| e.into_inner());
        if p.users == 0 {
            p.original = std::fs::read_to_string(URING_PARAM).ok();
            if std::fs::write(URING_PARAM, "Y").is_err() {
                return (!skip("root", "enabling FUSE over io_uring needs root")).then_some(UringOn);
            }
        }
        p.users += 1;
        Some(UringOn)
    }

    /// Runs `f` with FUSE over io_uring switched off in the kernel (once no one holds it on).
    fn off_during<T>(f: impl FnOnce() -> T) -> T {
        let mut p = PARAM.lock().unwrap_or_else(|e| e.into_inner());
        while p.users > 0 {
            p = PARAM_FREE.wait(p).unwrap_or_else(|e| e.into_inner());
        }
        let original = std::fs::read_to_string(URING_PARAM).unwrap();
        std::fs::write(URING_PARAM, "N").unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        std::fs::write(URING_PARAM, original.trim()).unwrap();
        drop(p);
        r.unwrap_or_else(|e| std::panic::resume_unwind(e))
    }
}

impl Drop for UringOn {
    fn drop(&mut self) {
        let mut p = PARAM.lock().unwrap_or_else(|e| e.into_inner());
        p.users = p.users.saturating_sub(1);
        if p.users == 0 {
            if let Some(o) = p.original.take() {
                let _ = std::fs::write(URING_PARAM, o.trim());
            }
            PARAM_FREE.notify_all();
        }
    }
}

/// The transport every mount of these tests uses: /dev/fuse, or FUSE over io_uring when
/// OKEANOS_TEST_TRANSPORT=io_uring (the test command runs this suite over both).
fn test_transport() -> Option<&'static str> {
    std::env::var("OKEANOS_TEST_TRANSPORT").ok().filter(|t| t == "io_uring").map(|_| "io_uring")
}

/// A foreground daemon serving an image; unmounted (cleanly) when dropped.
struct Mount {
    child: Option<Child>,
    mnt: PathBuf,
    /// FUSE over io_uring kept enabled while this mount lives (`transport=io_uring`).
    _uring: Option<UringOn>,
}

impl Mount {
    fn new(image: &Path, mnt: &Path, opts: &str) -> Mount {
        let mut cmd = Command::new(BIN);
        cmd.stdout(Stdio::null());
        Mount::with(cmd, image, mnt, opts)
    }

    /// A foreground daemon started by `cmd` (its environment and stderr set by the caller).
    fn with(cmd: Command, image: &Path, mnt: &Path, opts: &str) -> Mount {
        let mut opts = opts.to_string();
        let mut uring = None;
        if !opts.contains("transport=") {
            if let Some(t) = test_transport() {
                uring = UringOn::new();
                opts = if opts.is_empty() { format!("transport={t}") } else { format!("{opts},transport={t}") };
            }
        } else if opts.contains("transport=io_uring") {
            uring = UringOn::new();
        }
        Mount::spawn(cmd, image, mnt, &opts, uring)
    }

    /// As `with`, with exactly these options and `uring` held while mounted.
    fn spawn(mut cmd: Command, image: &Path, mnt: &Path, opts: &str, uring: Option<UringOn>) -> Mount {
        std::fs::create_dir_all(mnt).unwrap();
        let child = cmd.arg("mount").arg(image).arg(mnt).args(["-f", "-o", opts]).spawn().unwrap();
        let m = Mount { child: Some(child), mnt: mnt.to_path_buf(), _uring: uring };
        let t0 = Instant::now();
        while !mounted(mnt) {
            assert!(t0.elapsed() < Duration::from_secs(30), "mount did not appear");
            std::thread::sleep(Duration::from_millis(10));
        }
        m
    }

    fn stats(&self) -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(self.mnt.join(".okeanos-stats")).unwrap()).unwrap()
    }

    /// Unmounts with `okeanos umount` and waits for the daemon's clean exit.
    fn unmount(mut self) {
        let out = Command::new(BIN).arg("umount").arg(&self.mnt).output().unwrap();
        assert!(out.status.success(), "umount: {}", String::from_utf8_lossy(&out.stderr));
        let status = self.child.take().unwrap().wait().unwrap();
        assert!(status.success(), "daemon exit {status}");
    }

    fn kill9(mut self) {
        let mut c = self.child.take().unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("fusermount3").arg("-u").arg("-z").arg(&self.mnt).status();
            let _ = c.wait();
        }
    }
}

fn image(dir: &Path) -> PathBuf {
    let img = dir.join("img.okfs");
    let out = Command::new(BIN).arg("mkfs").arg(&img).args(["--size", "512M", "--journal-size", "32M"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    img
}

/// A small image (64 MiB) in `dir`, for the tests that need no room.
fn small_image(dir: &Path) -> PathBuf {
    let img = dir.join("img.okfs");
    let out = Command::new(BIN).args(["mkfs", "--size", "64M"]).arg(&img).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    img
}

fn fsck_clean(img: &Path) {
    let out = Command::new(BIN).arg("fsck").arg(img).output().unwrap();
    assert!(out.status.success(), "fsck: {}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn posix_operations_through_the_mount() {
    if !fuse_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=wasteless+dmeta");
    // The kernel knows the mount as fuse.okeanos (findmnt -t, systemd), as libfuse's mounts.
    let canon = std::fs::canonicalize(&mnt).unwrap();
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let line = info.lines().find(|l| l.split(' ').nth(4) == canon.to_str()).unwrap();
    assert_eq!(line.split(" - ").nth(1).and_then(|r| r.split(' ').next()), Some("fuse.okeanos"), "{line}");
    std::fs::create_dir(mnt.join("logs")).unwrap();
    std::fs::write(mnt.join("logs/a"), b"first").unwrap();
    assert_eq!(std::fs::read(mnt.join("logs/a")).unwrap(), b"first");
    std::fs::rename(mnt.join("logs/a"), mnt.join("b")).unwrap();
    std::os::unix::fs::symlink("b", mnt.join("c")).unwrap();
    assert_eq!(std::fs::read(mnt.join("c")).unwrap(), b"first");
    std::fs::hard_link(mnt.join("b"), mnt.join("d")).unwrap();
    assert_eq!(std::fs::metadata(mnt.join("b")).unwrap().len(), 5);
    // Errors map to their errno.
    assert_eq!(std::fs::create_dir(mnt.join("logs")).unwrap_err().raw_os_error(), Some(libc::EEXIST));
    std::fs::write(mnt.join("logs/x"), b"").unwrap();
    assert_eq!(std::fs::remove_dir(mnt.join("logs")).unwrap_err().raw_os_error(), Some(libc::ENOTEMPTY));
    assert_eq!(std::fs::read(mnt.join("nope")).unwrap_err().raw_os_error(), Some(libc::ENOENT));
    // A FIFO is made (special files are inodes); RENAME_EXCHANGE swaps a file and a directory;
    // an unsupported call (RENAME_WHITEOUT) is refused, not a crash of the daemon.
    let fifo = std::ffi::CString::new(mnt.join("fifo").to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&std::fs::metadata(mnt.join("fifo")).unwrap().file_type()));
    let (b, d) = (std::ffi::CString::new(mnt.join("b").to_str().unwrap()).unwrap(), std::ffi::CString::new(mnt.join("logs").to_str().unwrap()).unwrap());
    assert_eq!(unsafe { libc::renameat2(libc::AT_FDCWD, b.as_ptr(), libc::AT_FDCWD, d.as_ptr(), libc::RENAME_EXCHANGE) }, 0);
    assert!(std::fs::metadata(mnt.join("b")).unwrap().is_dir() && std::fs::read(mnt.join("logs")).unwrap() == b"first");
    assert_eq!(unsafe { libc::renameat2(libc::AT_FDCWD, b.as_ptr(), libc::AT_FDCWD, d.as_ptr(), libc::RENAME_EXCHANGE) }, 0);
    assert_ne!(unsafe { libc::renameat2(libc::AT_FDCWD, b.as_ptr(), libc::AT_FDCWD, d.as_ptr(), libc::RENAME_WHITEOUT) }, 0);
    // RENAME_NOREPLACE: EEXIST over an existing name, an ordinary rename otherwise.
    let (c, e) = (std::ffi::CString::new(mnt.join("c").to_str().unwrap()).unwrap(), std::ffi::CString::new(mnt.join("e").to_str().unwrap()).unwrap());
    assert_eq!(unsafe { libc::renameat2(libc::AT_FDCWD, c.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_NOREPLACE) }, -1);
    assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::EEXIST));
    assert_eq!(unsafe { libc::renameat2(libc::AT_FDCWD, c.as_ptr(), libc::AT_FDCWD, e.as_ptr(), libc::RENAME_NOREPLACE) }, 0);
    std::fs::rename(mnt.join("e"), mnt.join("c")).unwrap();
    // An open file keeps its data after unlink, until the last close.
    let mut f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(mnt.join("tmp")).unwrap();
    f.write_all(&[7u8; 10_000]).unwrap();
    std::fs::remove_file(mnt.join("tmp")).unwrap();
    let mut back = Vec::new();
    use std::io::Seek;
    f.seek(std::io::SeekFrom::Start(0)).unwrap();
    f.read_to_end(&mut back).unwrap();
    assert_eq!(back, vec![7u8; 10_000]);
    drop(f);
    // O_DSYNC writes reach the engine as syncs.
    let before = m.stats()["syncs"].as_u64().unwrap();
    let mut s = std::fs::OpenOptions::new().write(true).create(true).truncate(true).custom_flags(libc::O_DSYNC).open(mnt.join("sync")).unwrap();
    for _ in 0..5 {
        s.write_all(b"0123456789").unwrap();
    }
    assert!(m.stats()["syncs"].as_u64().unwrap() >= before + 5);
    drop(s);
    let names: Vec<String> = std::fs::read_dir(&mnt).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert!(names.contains(&"b".to_string()) && !names.iter().any(|n| n.starts_with(".okeanos")));
    m.unmount();
    fsck_clean(&img);
}

#[test]
fn fio_sixteen_jobs_appending_with_fdatasync() {
    if !fuse_usable() || !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=wasteless");
    let before = m.stats()["syncs"].as_u64().unwrap();
    let out = Command::new("fio")
        .args(["--name=append", "--numjobs=16", "--rw=write", "--bs=1k", "--size=128k", "--fdatasync=1", "--ioengine=sync", "--output-format=json"])
        .arg(format!("--directory={}", mnt.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "fio: {}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let fio_syncs: u64 = v["jobs"].as_array().unwrap().iter().map(|j| j["sync"]["lat_ns"]["N"].as_u64().unwrap_or(0)).sum();
    let writes: u64 = v["jobs"].as_array().unwrap().iter().map(|j| j["write"]["total_ios"].as_u64().unwrap()).sum();
    assert_eq!(writes, 16 * 128);
    let st = m.stats();
    let engine_syncs = st["syncs"].as_u64().unwrap() - before;
    assert!(fio_syncs >= 16 * 127, "fio reported {fio_syncs} syncs");
    assert_eq!(engine_syncs, fio_syncs, "every fdatasync reached the engine");
    assert!(st["syncs_per_commit"].as_f64().unwrap() > 1.0, "concurrent syncs share commits: {}", st["syncs_per_commit"]);
    m.unmount();
    fsck_clean(&img);
}

fn sqlite(db: &Path, sql: &str) -> String {
    let mut c = Command::new("sqlite3").arg(db).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    c.stdin.take().unwrap().write_all(sql.as_bytes()).unwrap();
    let out = c.wait_with_output().unwrap();
    assert!(out.status.success(), "sqlite3: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn sqlite_rollback_and_wal_survive_a_remount() {
    if !fuse_usable() || !have("sqlite3") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=selective+dmeta");
    for mode in ["delete", "wal"] {
        let mut sql = format!("PRAGMA journal_mode={mode};\nCREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);\n");
        for i in 0..300 {
            sql.push_str(&format!("INSERT INTO t(v) VALUES('row {i} {}');\n", "x".repeat(i % 50)));
        }
        sqlite(&mnt.join(format!("{mode}.db")), &sql);
    }
    m.unmount();
    let m = Mount::new(&img, &mnt, "data=selective+dmeta");
    for mode in ["delete", "wal"] {
        let out = sqlite(&mnt.join(format!("{mode}.db")), "PRAGMA integrity_check; SELECT count(*), max(k) FROM t;");
        assert_eq!(out, "ok\n300|300\n", "{mode}");
    }
    m.unmount();
    fsck_clean(&img);
}

#[test]
fn postmark_small() {
    if !fuse_usable() || !have("postmark") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=ordered");
    let mut c = Command::new("postmark").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let cfg = format!("set location {}\nset number 300\nset transactions 1000\nset size 500 20000\nrun\nquit\n", mnt.display());
    c.stdin.take().unwrap().write_all(cfg.as_bytes()).unwrap();
    let out = c.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("transactions"), "postmark: {text}");
    m.unmount();
    fsck_clean(&img);
}

#[test]
fn kill_nine_loses_nothing_acknowledged() {
    if !fuse_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = image(dir.path());
    kill_nine_check(dir.path(), &img, "data=wasteless");
}

/// The same over an nvm journal (UBJ): the daemon killed with commits frozen in the NVM file
/// and nothing of them on the image; recovery writes them home.
#[test]
fn kill_nine_loses_nothing_acknowledged_over_an_nvm_journal() {
    if !fuse_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img.okfs");
    let nvm = dir.path().join("journal.nvm");
    let out = Command::new(BIN).arg("mkfs").arg(&img).args(["--size", "256M", "--journal", "nvm", "--nvm-size", "24M", "--nvm"]).arg(&nvm).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    kill_nine_check(dir.path(), &img, "data=data");
}

/// Writers append and fdatasync until the daemon is SIGKILLed; after recovery every file holds
/// every acknowledged record, whole records only.
fn kill_nine_check(dir: &Path, img: &Path, opts: &str) {
    let img = img.to_path_buf();
    let mnt = dir.join("mnt");
    let m = Mount::new(&img, &mnt, opts);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let total = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let path = mnt.join(format!("w{w}"));
            let (stop, total) = (stop.clone(), total.clone());
            std::thread::spawn(move || {
                let mut acked = 0u64;
                let Ok(mut f) = std::fs::OpenOptions::new().append(true).create(true).open(&path) else { return 0 };
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let rec = format!("writer {w} record {:08}\n", acked);
                    if f.write_all(rec.as_bytes()).is_err() || f.sync_data().is_err() {
                        break;
                    }
                    acked += 1; // the sync returned: this record is acknowledged
                    total.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                acked
            })
        })
        .collect();
    // Killed once the writers have some acknowledged records (waiting for the event, bounded
    // generously, not for a time).
    let t0 = Instant::now();
    while total.load(std::sync::atomic::Ordering::Relaxed) < 200 && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(5));
    }
    m.kill9();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let acked: Vec<u64> = writers.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(acked.iter().sum::<u64>() > 50, "writers made progress: {acked:?}");
    // The mount point is stale now: mount says how to clear it, umount clears it.
    let out = Command::new(BIN).arg("mount").arg(&img).arg(&mnt).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("stale"), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(Command::new(BIN).arg("umount").arg(&mnt).status().unwrap().success());
    // fsck replays the journal, then finds nothing wrong.
    fsck_clean(&img);
    let m = Mount::new(&img, &mnt, opts);
    for (w, &n) in acked.iter().enumerate() {
        // The file is a prefix of what the writer wrote, holding at least every acknowledged
        // record, and ends at a record's end: each write() is one request (direct I/O), so
        // one atomic handle, recovered whole or not at all. (Through the page cache the kernel
        // split a write that crossed into a page it did not hold into one request per page,
        // and the tail could end inside a record.)
        let text = std::fs::read_to_string(mnt.join(format!("w{w}"))).unwrap();
        let expected: String = (0..n + 2).map(|k| format!("writer {w} record {k:08}\n")).collect();
        let acked_len = (0..n).map(|k| format!("writer {w} record {k:08}\n").len()).sum::<usize>();
        assert!(text.len() >= acked_len, "writer {w}: {} bytes after recovery, {acked_len} acknowledged", text.len());
        assert!(expected.starts_with(&text), "writer {w}: recovered file is not a prefix of what was written");
        assert!(text.is_empty() || text.ends_with('\n'), "writer {w}: the recovered file ends inside a record: {:?}", &text[text.len().saturating_sub(40)..]);
    }
    m.unmount();
    fsck_clean(&img);
}

#[test]
fn hundred_writers_share_commits_and_sigterm_unmounts_cleanly() {
    if !fuse_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = image(dir.path());
    let mnt = dir.path().join("mnt");
    let mut m = Mount::new(&img, &mnt, "data=wasteless+dmeta");
    synced_writers(&mnt, 100, 20, 1000);
    // `okeanos stat --json MOUNTPOINT` prints the live counters.
    let out = Command::new(BIN).args(["stat", "--json"]).arg(&mnt).output().unwrap();
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(st["syncs"].as_u64().unwrap() >= 2000);
    assert!(st["syncs_per_commit"].as_f64().unwrap() >= 5.0, "many syncs per commit: {}", st["syncs_per_commit"]);
    // SIGTERM: the daemon unmounts, commits, checkpoints and exits cleanly.
    let child = m.child.take().unwrap();
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = { let mut c = child; c.wait().unwrap() };
    assert!(status.success(), "daemon exit after SIGTERM: {status}");
    assert!(!mounted(&mnt));
    let out = Command::new(BIN).arg("stat").arg(&img).arg("--json").output().unwrap();
    let sb: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((sb["state"].as_str(), sb["journal_clean"].as_bool()), (Some("clean"), Some(true)));
    fsck_clean(&img);
}

/// `writers` threads, each appending `records` lines ("WWW KKKK " and `pad` bytes) to its own
/// file `sW` under `mnt`, with an fdatasync after each.
fn synced_writers(mnt: &Path, writers: usize, records: usize, pad: usize) {
    let threads: Vec<_> = (0..writers)
        .map(|w| {
            let path = mnt.join(format!("s{w}"));
            std::thread::spawn(move || {
                let mut f = std::fs::OpenOptions::new().append(true).create(true).open(path).unwrap();
                for k in 0..records {
                    f.write_all(format!("{w:03} {k:04} {}\n", "r".repeat(pad)).as_bytes()).unwrap();
                    f.sync_data().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

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

/// A non-root user on the mount (allow_other) owns what it creates and can then chmod,
/// truncate, utime and symlink it, as on ext4 (PostgreSQL's initdb needs exactly this); a
/// name longer than 255 bytes is "File name too long", not "No such file".
#[test]
fn a_user_owns_what_it_creates_and_long_names_are_too_long() {
    if !fuse_usable() || !is_root() || !have("setpriv") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = small_image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=wasteless,dmeta,allow_other");
    // The temporary directory must be traversable by the user.
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let public = mnt.join("pub");
    std::fs::create_dir(&public).unwrap();
    std::fs::set_permissions(&public, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let script = "set -e; cd \"$1\"; touch f; chmod 600 f; truncate -s 10 f; touch -d 2020-01-01 f; mkdir d; chmod 700 d; ln -s f l; echo data > d/g";
    let o = Command::new("setpriv").args(["--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script, "sh"]).arg(&public).output().unwrap();
    assert!(o.status.success(), "as uid 65534: {}", String::from_utf8_lossy(&o.stderr));
    use std::os::unix::fs::MetadataExt;
    for (name, size) in [("f", Some(10)), ("d", None), ("d/g", Some(5))] {
        let md = std::fs::metadata(public.join(name)).unwrap();
        assert_eq!((md.uid(), md.gid()), (65534, 65534), "{name}");
        if let Some(s) = size {
            assert_eq!(md.len(), s, "{name}");
        }
    }
    assert_eq!(std::fs::symlink_metadata(public.join("l")).unwrap().uid(), 65534);
    let long = public.join("n".repeat(300));
    for e in [std::fs::metadata(&long).unwrap_err(), std::fs::remove_file(&long).unwrap_err(), std::fs::File::create(&long).unwrap_err()] {
        assert_eq!(e.raw_os_error(), Some(libc::ENAMETOOLONG), "{e}");
    }
    m.unmount();
}

/// mkfifo, mknod (character and block devices with their numbers) and a UNIX socket's bind on
/// the mount make inodes of those types, as on ext4; a FIFO passes data between two
/// processes (the kernel runs the pipe); all survive a remount.
#[test]
fn fifos_devices_and_sockets_on_the_mount() {
    if !fuse_usable() || !is_root() || !have("mkfifo") || !have("mknod") || !have("python3") {
        return;
    }
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let dir = tempfile::tempdir().unwrap();
    let img = small_image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=ordered");
    assert!(Command::new("mkfifo").arg(mnt.join("fifo")).status().unwrap().success());
    assert!(Command::new("mknod").arg(mnt.join("null")).args(["c", "1", "3"]).status().unwrap().success());
    assert!(Command::new("mknod").arg(mnt.join("blk")).args(["b", "7", "200"]).status().unwrap().success());
    let sock = mnt.join("sock");
    assert!(Command::new("python3").args(["-c", "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])"]).arg(&sock).status().unwrap().success());
    // A FIFO carries data from a writer to a reader.
    let fifo = mnt.join("fifo");
    let writer = std::thread::spawn({
        let fifo = fifo.clone();
        move || std::fs::write(fifo, b"through the pipe").unwrap()
    });
    assert_eq!(std::fs::read(&fifo).unwrap(), b"through the pipe");
    writer.join().unwrap();
    m.unmount();
    let m = Mount::new(&img, &mnt, "data=ordered");
    assert!(std::fs::metadata(mnt.join("fifo")).unwrap().file_type().is_fifo());
    let null = std::fs::metadata(mnt.join("null")).unwrap();
    assert!(null.file_type().is_char_device());
    assert_eq!((libc::major(null.rdev()), libc::minor(null.rdev())), (1, 3));
    let blk = std::fs::metadata(mnt.join("blk")).unwrap();
    assert!(blk.file_type().is_block_device());
    assert_eq!((libc::major(blk.rdev()), libc::minor(blk.rdev())), (7, 200));
    assert!(std::fs::metadata(&sock).unwrap().file_type().is_socket());
    std::fs::remove_file(&sock).unwrap();
    m.unmount();
    let o = Command::new(BIN).arg("fsck").arg(&img).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
}

/// One write() that crosses pages reaches the engine as one request, so one atomic handle
/// (direct I/O, the default); with `page_cache` the kernel splits it at the page it does not
/// hold up to date — the behaviour that let a crash keep half of a write.
#[test]
fn a_write_crossing_pages_is_one_atomic_handle() {
    if !fuse_usable() {
        return;
    }
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let img = image(dir.path());
    let mnt = dir.path().join("mnt");
    for (opts, one) in [("data=data", true), ("data=data,page_cache", false)] {
        let m = Mount::new(&img, &mnt, opts);
        let path = mnt.join(format!("f-{one}"));
        let f = std::fs::OpenOptions::new().read(true).write(true).create(true).open(&path).unwrap();
        f.write_all_at(&[1u8; 100], 0).unwrap();
        f.sync_data().unwrap();
        // A fresh open: the kernel holds none of the file's pages.
        drop(f);
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let before = m.stats()["handles"].as_u64().unwrap();
        f.write_all_at(&[2u8; 10_000], 100).unwrap();
        let after = m.stats()["handles"].as_u64().unwrap();
        if one {
            assert_eq!(after - before, 1, "{opts}: one write(), one handle");
        } else {
            assert!(after - before >= 2, "{opts}: the page cache split the write into {} handles", after - before);
        }
        f.sync_data().unwrap();
        drop(f);
        let mut want = vec![1u8; 100];
        want.extend(std::iter::repeat_n(2u8, 10_000));
        assert_eq!(std::fs::read(&path).unwrap(), want, "{opts}");
        m.unmount();
    }
}

/// Files opened read-only are read through the kernel's page cache: rereads do not reach the
/// daemon (`direct_reads` sends every one there). Every write, truncate and punched hole made
/// through another open is seen by the next read once it has returned, while a second reader
/// keeps reading the block being written (docs/MOUNT.md, "Reads"). Each write is held 5 ms in
/// the daemon (a test hook), so that reader refills the pages the kernel dropped before the
/// write with the old bytes. The daemon then drops them after the write; recent kernels do
/// too (Linux's own fix for xfstests generic/209), so on those a daemon that did not would
/// pass as well: the check guards the kernels before that fix.
#[test]
fn read_only_opens_are_cached_and_see_every_write() {
    if !fuse_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = small_image(dir.path());
    let mnt = dir.path().join("mnt");
    for (opts, cached) in [("data=ordered", true), ("data=ordered,direct_reads", false)] {
        let mut cmd = Command::new(BIN);
        cmd.stdout(Stdio::null()).env("OKEANOS_TEST_HOOKS", "write_delay_ms=5");
        let m = Mount::with(cmd, &img, &mnt, opts);
        let path = mnt.join(format!("f-{cached}"));
        let stale = cached_read_coherence(&m, &path, opts, cached);
        assert_eq!(stale, None, "{opts}: a read after a write returned stale bytes");
        m.unmount();
    }
}

/// The checks of [`read_only_opens_are_cached_and_see_every_write`] on a new file at `path`;
/// the first stale read, as (version written, version read), or None.
fn cached_read_coherence(m: &Mount, path: &Path, opts: &str, cached: bool) -> Option<(u8, u8)> {
    use std::os::unix::fs::FileExt;
    use std::os::unix::io::AsRawFd;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    const BS: usize = 4096;
    const BLOCKS: u64 = 16;
    let w = std::fs::OpenOptions::new().read(true).write(true).create(true).open(path).unwrap();
    w.write_all_at(&vec![1u8; BLOCKS as usize * BS], 0).unwrap();
    let r = std::fs::File::open(path).unwrap();
    let mut buf = vec![0u8; BLOCKS as usize * BS];
    let before = m.stats()["fuse_reads"].as_u64().unwrap();
    for _ in 0..100 {
        r.read_exact_at(&mut buf, 0).unwrap();
        assert!(buf.iter().all(|&b| b == 1), "{opts}");
    }
    let served = m.stats()["fuse_reads"].as_u64().unwrap() - before;
    if cached {
        assert!(served <= 20, "{opts}: 100 rereads of 64 KiB made {served} requests");
    } else {
        assert!(served >= 100, "{opts}: 100 reads made only {served} requests");
    }
    let stop = AtomicBool::new(false);
    let target = AtomicU64::new(0);
    let mut stale = None;
    std::thread::scope(|s| {
        s.spawn(|| {
            let r2 = std::fs::File::open(path).unwrap();
            let mut b = vec![0u8; BS];
            let mut k = 0u64;
            while !stop.load(Ordering::Relaxed) && k < 1_000_000 {
                let _ = r2.read_at(&mut b, target.load(Ordering::Relaxed) * BS as u64);
                k += 1;
            }
        });
        let mut b = vec![0u8; BS];
        for v in 2..=100u8 {
            let block = v as u64 % BLOCKS;
            target.store(block, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(1));
            w.write_all_at(&vec![v; BS], block * BS as u64).unwrap();
            r.read_exact_at(&mut b, block * BS as u64).unwrap();
            if b.iter().any(|&x| x != v) {
                stale = Some((v, b[0]));
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    if stale.is_some() {
        return stale;
    }
    // A hole punched and a truncate through the writer: the reader sees both.
    let punched = unsafe { libc::fallocate(w.as_raw_fd(), libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, 0, 2 * BS as i64) };
    assert_eq!(punched, 0, "{opts}: punch hole: {}", std::io::Error::last_os_error());
    r.read_exact_at(&mut buf[..2 * BS], 0).unwrap();
    assert!(buf[..2 * BS].iter().all(|&x| x == 0), "{opts}: the punched range reads as zeros");
    w.set_len(3 * BS as u64).unwrap();
    w.write_all_at(&[7u8; 100], 3 * BS as u64).unwrap();
    let n = r.read_at(&mut buf, 0).unwrap();
    assert_eq!(n, 3 * BS + 100, "{opts}: the reader sees the new size");
    assert!(buf[3 * BS..n].iter().all(|&x| x == 7), "{opts}: and the bytes written after the truncate");
    None
}

/// PostgreSQL on the mount, as its own user (allow_other): initdb, pgbench, then the mount's
/// daemon SIGKILLed under pgbench; the image recovers at the next mount, PostgreSQL replays its
/// WAL and every transaction pgbench saw committed is in pgbench_history. Skipped, with a
/// message, where PostgreSQL is not installed (the test command installs it as root).
#[test]
fn postgresql_initdb_pgbench_and_a_crash_of_the_daemon() {
    if !fuse_usable() || !is_root() || !have("su") {
        return;
    }
    let Some(bin) = std::fs::read_dir("/usr/lib/postgresql").ok().and_then(|d| d.filter_map(|e| e.ok()).map(|e| e.path().join("bin")).find(|b| b.join("initdb").exists())) else {
        skip("tools", "PostgreSQL is not installed (apt-get install postgresql)");
        return;
    };
    if Command::new("id").arg("postgres").output().map_or(true, |o| !o.status.success()) {
        skip("tools", "no postgres user");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let sock = dir.path().join("sock");
    std::fs::create_dir(&sock).unwrap();
    std::fs::set_permissions(&sock, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let img = dir.path().join("img.okfs");
    assert!(Command::new(BIN).args(["mkfs", "--size", "1G"]).arg(&img).output().unwrap().status.success());
    let mnt = dir.path().join("mnt");
    let opts = "data=wasteless,dmeta,allow_other";
    let m = Mount::new(&img, &mnt, opts);
    let data = mnt.join("pg/data");
    std::fs::create_dir(mnt.join("pg")).unwrap();
    assert!(Command::new("chown").args(["postgres:postgres"]).arg(mnt.join("pg")).status().unwrap().success());
    let pg = |cmd: String| Command::new("su").args(["postgres", "-s", "/bin/sh", "-c", &cmd]).output().unwrap();
    let port = 54000 + (std::process::id() % 1000) as u16;
    let conn = format!("-h {} -p {port}", sock.display());
    let o = pg(format!("{}/initdb -D {}", bin.display(), data.display()));
    assert!(o.status.success(), "initdb: {}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let start = || {
        let o = pg(format!("{}/pg_ctl -D {} -l {}/pg.log -o '-k {} -p {port} -c listen_addresses=' -w start", bin.display(), data.display(), sock.display(), sock.display()));
        assert!(o.status.success(), "pg_ctl start: {}\n{}", String::from_utf8_lossy(&o.stderr), std::fs::read_to_string(sock.join("pg.log")).unwrap_or_default());
    };
    start();
    let o = pg(format!("{}/pgbench {conn} -i -s 2 postgres", bin.display()));
    assert!(o.status.success(), "pgbench -i: {}", String::from_utf8_lossy(&o.stderr));
    // pgbench for up to 6 s; the daemon dies after 2.
    let run = {
        let cmd = format!("{}/pgbench {conn} -c 8 -j 2 -T 6 postgres", bin.display());
        std::thread::spawn(move || Command::new("su").args(["postgres", "-s", "/bin/sh", "-c", &cmd]).output().unwrap())
    };
    std::thread::sleep(Duration::from_secs(2));
    m.kill9();
    let out = run.join().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let committed: u64 = text.lines().find_map(|l| l.strip_prefix("number of transactions actually processed: ")).and_then(|v| v.split('/').next()?.trim().parse().ok()).unwrap_or_else(|| panic!("pgbench said: {text}"));
    assert!(committed > 100, "{committed} transactions before the crash");
    // PostgreSQL's processes lost their file system: end them as a power loss would.
    let _ = Command::new("pkill").args(["-9", "-u", "postgres", "-f", &data.display().to_string()]).status();
    std::thread::sleep(Duration::from_millis(500));
    // What a reboot clears: the socket and its lock (a killed postmaster's pid may linger as
    // an unreaped zombie here, which PostgreSQL would take for a live server).
    for f in [format!(".s.PGSQL.{port}"), format!(".s.PGSQL.{port}.lock")] {
        let _ = std::fs::remove_file(sock.join(f));
    }
    assert!(Command::new(BIN).arg("umount").arg(&mnt).status().unwrap().success());
    let m = Mount::new(&img, &mnt, opts);
    assert!(m.stats()["recovery"]["transactions"].as_u64().unwrap_or(0) > 0, "the image recovered from its journal");
    let _ = std::fs::remove_file(data.join("postmaster.pid"));
    start();
    let o = pg(format!("{}/psql {conn} -Atc 'select count(*) from pgbench_history' postgres", bin.display()));
    let rows: u64 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap_or_else(|_| panic!("psql: {}", String::from_utf8_lossy(&o.stderr)));
    assert!(rows >= committed, "{rows} history rows after recovery, pgbench saw {committed} commits");
    let o = pg(format!("{}/pg_ctl -D {} -m fast -w stop", bin.display(), data.display()));
    assert!(o.status.success(), "pg_ctl stop: {}", String::from_utf8_lossy(&o.stderr));
    m.unmount();
    eprintln!("PostgreSQL: {committed} transactions committed before the daemon was killed, {rows} history rows after both recoveries");
}

/// fdatasync after overwrites of a preallocated file through the mount (a PostgreSQL WAL
/// segment's case) under ordered: the default writes the blocks in place and flushes, with no
/// commit, as ext4 does; `datasync=commit` commits each. After the daemon is SIGKILLed right
/// after the last fdatasync, the image holds every overwrite.
#[test]
fn fdatasync_of_overwrites_needs_no_commit() {
    if !fuse_usable() {
        return;
    }
    use std::os::unix::fs::FileExt;
    const N: u64 = 100;
    for (opts, in_place) in [("data=ordered", true), ("data=ordered,datasync=commit", false)] {
        let dir = tempfile::tempdir().unwrap();
        let img = image(dir.path());
        let mnt = dir.path().join("mnt");
        let m = Mount::new(&img, &mnt, opts);
        let path = mnt.join("wal");
        let mut want = vec![0u8; 4 << 20];
        let f = std::fs::OpenOptions::new().read(true).write(true).create(true).open(&path).unwrap();
        f.write_all_at(&want, 0).unwrap();
        f.sync_all().unwrap();
        let before = m.stats();
        for k in 0..N {
            let off = (k * 37 % 512) * 8192;
            let page: Vec<u8> = (0..8192u64).map(|i| (k * 131 + i) as u8 | 1).collect();
            f.write_all_at(&page, off).unwrap();
            f.sync_data().unwrap();
            want[off as usize..][..8192].copy_from_slice(&page);
        }
        let after = m.stats();
        let commits = after["commits"].as_u64().unwrap() - before["commits"].as_u64().unwrap();
        let steps = after["datasyncs_in_place"].as_u64().unwrap() - before["datasyncs_in_place"].as_u64().unwrap();
        assert!(after["datasync_steps"].as_u64().unwrap() >= before["datasync_steps"].as_u64().unwrap() + if in_place { 1 } else { 0 });
        if in_place {
            // The commit interval (5 s) may commit the timestamps once or twice meanwhile.
            assert!(commits <= 3, "{opts}: {commits} commits for {N} fdatasyncs of overwrites");
            // Each served in place, unless a commit of the interval covered it first.
            assert!(steps + commits >= N, "{opts}: {steps} of {N} fdatasyncs served in place, {commits} commits");
        } else {
            assert!(commits >= N, "{opts}: {commits} commits for {N} fdatasyncs");
            assert_eq!(steps, 0, "{opts}");
        }
        drop(f);
        m.kill9();
        assert!(Command::new(BIN).arg("umount").arg(&mnt).status().unwrap().success());
        let m = Mount::new(&img, &mnt, opts);
        assert!(std::fs::read(&path).unwrap() == want, "{opts}: an overwrite synced by fdatasync is missing after the crash");
        m.unmount();
        eprintln!("{opts}: {N} overwrites + fdatasync took {commits} commits and {steps} in-place steps");
    }
}

/// SQLite on the mount, crashed: 8 processes, each committing one-row transactions to its own
/// database in WAL mode with synchronous=FULL and noting (off the mount) how many COMMITs
/// returned, until the mount's daemon is SIGKILLed under them. After the image recovers, each
/// database passes SQLite's integrity check and holds at least the rows its process saw
/// committed — under data journaling with dmeta and under ordered, whose WAL pages are
/// rewritten in place.
#[test]
fn sqlite_commits_survive_a_crash_of_the_daemon() {
    if !fuse_usable() || !have("python3") {
        return;
    }
    const PROCS: usize = 8;
    let work = r#"
import sqlite3, os, sys, time
mnt, progress, procs = sys.argv[1], sys.argv[2], int(sys.argv[3])
for k in range(procs):
    c = sqlite3.connect(os.path.join(mnt, f"db{k}.sqlite"), isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL"); c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)"); c.close()
kids = []
for k in range(procs):
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.path.join(progress, f"p{k}"), os.O_WRONLY | os.O_CREAT, 0o644)
        n, end = 0, time.monotonic() + 30
        try:
            c = sqlite3.connect(os.path.join(mnt, f"db{k}.sqlite"), isolation_level=None)
            c.execute("PRAGMA synchronous=FULL")
            while time.monotonic() < end:
                c.execute("BEGIN"); c.execute("INSERT INTO t(v) VALUES (?)", (os.urandom(100),)); c.execute("COMMIT")
                n += 1
                os.pwrite(fd, n.to_bytes(8, "little"), 0)
        except Exception:
            pass
        os._exit(0)
    kids.append(pid)
for p in kids:
    os.waitpid(p, 0)
"#;
    let check = r#"
import sqlite3, os, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
print(c.execute("PRAGMA integrity_check").fetchone()[0], c.execute("SELECT count(*) FROM t").fetchone()[0])
"#;
    for opts in ["data=wasteless,dmeta", "data=ordered"] {
        let dir = tempfile::tempdir().unwrap();
        let img = image(dir.path());
        let mnt = dir.path().join("mnt");
        let progress = dir.path().join("progress");
        std::fs::create_dir(&progress).unwrap();
        let m = Mount::new(&img, &mnt, opts);
        let mut load = Command::new("python3").args(["-c", work]).arg(&mnt).arg(&progress).arg(PROCS.to_string()).stderr(Stdio::null()).spawn().unwrap();
        let seen = |k: usize| std::fs::read(progress.join(format!("p{k}"))).ok().filter(|b| b.len() == 8).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()));
        // Every process has committed before the crash, and then some more.
        let t = Instant::now();
        while (0..PROCS).any(|k| seen(k) == 0) {
            assert!(t.elapsed() < Duration::from_secs(20), "{opts}: the processes did not start committing");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(1500));
        m.kill9();
        let t = Instant::now();
        while load.try_wait().unwrap().is_none() {
            if t.elapsed() > Duration::from_secs(30) {
                let _ = load.kill();
                panic!("{opts}: SQLite's processes hung on the dead mount");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let committed: Vec<u64> = (0..PROCS).map(seen).collect();
        assert!(Command::new(BIN).arg("umount").arg(&mnt).status().unwrap().success());
        let m = Mount::new(&img, &mnt, opts);
        assert!(m.stats()["recovery"]["transactions"].as_u64().unwrap_or(0) > 0, "{opts}: the image recovered from its journal");
        for (k, &n) in committed.iter().enumerate() {
            let o = Command::new("python3").args(["-c", check]).arg(mnt.join(format!("db{k}.sqlite"))).output().unwrap();
            let out = String::from_utf8_lossy(&o.stdout);
            let (verdict, rows) = out.trim().split_once(' ').unwrap_or_else(|| panic!("{opts}: db{k}: {out} {}", String::from_utf8_lossy(&o.stderr)));
            assert_eq!(verdict, "ok", "{opts}: db{k} integrity");
            let rows: u64 = rows.parse().unwrap();
            assert!(rows >= n, "{opts}: db{k} holds {rows} rows after recovery, its process saw {n} commits");
        }
        m.unmount();
        eprintln!("SQLite under {opts}: {committed:?} commits seen before the daemon was killed, all kept");
    }
}

/// Extended attributes through the mount as programs use them: set, get, list, remove (with
/// XATTR_CREATE/REPLACE and ENODATA), kept across a remount, and copied by `cp -a`.
#[test]
fn extended_attributes_on_the_mount() {
    if !fuse_usable() || !have("python3") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = small_image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=wasteless,dmeta");
    std::fs::write(mnt.join("f"), b"data").unwrap();
    let script = r#"
import os, sys, errno
f = sys.argv[1]
os.setxattr(f, "user.color", b"blue")
os.setxattr(f, "user.color", b"green", os.XATTR_REPLACE)
try:
    os.setxattr(f, "user.color", b"red", os.XATTR_CREATE); sys.exit("CREATE over an existing attribute")
except OSError as e:
    assert e.errno == errno.EEXIST, e
try:
    os.getxattr(f, "user.none"); sys.exit("a missing attribute was found")
except OSError as e:
    assert e.errno == errno.ENODATA, e
os.setxattr(f, "user.tmp", b"x")
os.removexattr(f, "user.tmp")
if os.geteuid() == 0:
    os.setxattr(f, "trusted.t", b"root only")
assert os.getxattr(f, "user.color") == b"green"
print(",".join(sorted(os.listxattr(f))))
"#;
    let o = Command::new("python3").args(["-c", script]).arg(mnt.join("f")).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let names = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(names.contains("user.color") && !names.contains("user.tmp"), "{names}");
    if have("cp") {
        assert!(Command::new("cp").args(["-a"]).arg(mnt.join("f")).arg(mnt.join("copy")).status().unwrap().success());
    }
    m.unmount();
    let m = Mount::new(&img, &mnt, "data=wasteless,dmeta");
    let get = |p: &str| Command::new("python3").args(["-c", "import os,sys; print(os.getxattr(sys.argv[1], 'user.color').decode())"]).arg(mnt.join(p)).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&get("f").stdout).trim(), "green");
    assert_eq!(String::from_utf8_lossy(&get("copy").stdout).trim(), "green", "cp -a kept the attribute");
    m.unmount();
    fsck_clean(&img);
}

/// posix_fallocate on the mount allocates and extends (a database preallocating its log);
/// KEEP_SIZE allocates past the end without growing the file; PUNCH_HOLE frees whole blocks
/// and zeroes partial ones without changing the size; ZERO_RANGE zeroes (and extends without
/// KEEP_SIZE); COLLAPSE_RANGE is refused with EOPNOTSUPP; `fallocate -d` digs holes.
#[test]
fn posix_fallocate_on_the_mount() {
    if !fuse_usable() || !have("python3") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = small_image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=ordered");
    let script = r#"
import os, sys, errno
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"head")
os.posix_fallocate(fd, 0, 1 << 20)
assert os.fstat(fd).st_size == 1 << 20, os.fstat(fd).st_size
assert os.pread(fd, 8, 0) == b"head\0\0\0\0"
try:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    blocks = os.fstat(fd).st_blocks
    r = libc.fallocate(fd, 1, ctypes.c_long(1 << 20), ctypes.c_long(1 << 20))  # FALLOC_FL_KEEP_SIZE
    assert r == 0, ctypes.get_errno()
    st = os.fstat(fd)
    assert st.st_size == 1 << 20 and st.st_blocks >= blocks + 2048, (st.st_size, st.st_blocks, blocks)
    os.pwrite(fd, b"a" * 5 * 4096, 8192)
    blocks = os.fstat(fd).st_blocks
    r = libc.fallocate(fd, 2 | 1, ctypes.c_long(8192 + 100), ctypes.c_long(3 * 4096))  # PUNCH_HOLE | KEEP_SIZE
    assert r == 0, ctypes.get_errno()
    st = os.fstat(fd)
    assert st.st_size == 1 << 20 and st.st_blocks == blocks - 2 * 8, (st.st_size, st.st_blocks, blocks)
    want = b"a" * 100 + b"\0" * 3 * 4096 + b"a" * (2 * 4096 - 100)
    assert os.pread(fd, 5 * 4096, 8192) == want
    r = libc.fallocate(fd, 2, ctypes.c_long(0), ctypes.c_long(4096))  # PUNCH_HOLE alone: Linux refuses it
    assert r != 0 and ctypes.get_errno() == errno.EOPNOTSUPP, (r, ctypes.get_errno())
    r = libc.fallocate(fd, 0x10, ctypes.c_long((1 << 20) - 10), ctypes.c_long(4106))  # ZERO_RANGE, past the end
    assert r == 0, ctypes.get_errno()
    assert os.fstat(fd).st_size == (1 << 20) + 4096
    assert os.pread(fd, 4 * 4096, 8192 + 4 * 4096)[:100] == b"a" * 100
    r = libc.fallocate(fd, 0x10 | 1, ctypes.c_long(8192), ctypes.c_long(4 * 4096 + 50))  # ZERO_RANGE | KEEP_SIZE
    assert r == 0, ctypes.get_errno()
    assert os.pread(fd, 5 * 4096, 8192) == b"\0" * (4 * 4096 + 50) + b"a" * (4096 - 50)
    r = libc.fallocate(fd, 8, ctypes.c_long(0), ctypes.c_long(4096))  # COLLAPSE_RANGE
    assert r != 0 and ctypes.get_errno() == errno.EOPNOTSUPP, (r, ctypes.get_errno())
finally:
    os.close(fd)
"#;
    let o = Command::new("python3").args(["-c", script]).arg(mnt.join("wal")).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    if have("fallocate") {
        // `fallocate -d` finds the zero blocks and punches them out.
        use std::os::unix::fs::MetadataExt;
        let sparse = mnt.join("sparse");
        let mut content = vec![0u8; 64 * 4096];
        content[..4096].fill(1);
        content[40 * 4096..41 * 4096].fill(2);
        std::fs::write(&sparse, &content).unwrap();
        assert_eq!(std::fs::metadata(&sparse).unwrap().blocks(), 64 * 8);
        let o = Command::new("fallocate").arg("-d").arg(&sparse).output().unwrap();
        assert!(o.status.success(), "fallocate -d: {}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(std::fs::metadata(&sparse).unwrap().blocks(), 2 * 8, "only the two non-zero blocks stay");
        assert_eq!(std::fs::read(&sparse).unwrap(), content);
    }
    m.unmount();
    fsck_clean(&img);
}

/// A write by anyone but root clears setuid (and setgid with group execute), as the kernel
/// does for its own file systems; chown clears them too; root's writes keep them. Without
/// this a user could change a world-writable setuid-root file and keep it setuid.
#[test]
fn writes_by_users_clear_setuid_and_setgid() {
    if !fuse_usable() || !is_root() || !have("setpriv") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o755)).unwrap();
    let img = small_image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=ordered,allow_other");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    let f = mnt.join("tool");
    std::fs::write(&f, b"#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&f, PermissionsExt::from_mode(0o6777)).unwrap();
    std::fs::OpenOptions::new().append(true).open(&f).unwrap().write_all(b"# root\n").unwrap();
    assert_eq!(mode(&f), 0o6777, "root's write keeps the bits");
    let o = Command::new("setpriv").args(["--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", "echo evil >> \"$1\"", "sh"]).arg(&f).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(mode(&f), 0o0777, "a user's write cleared setuid and setgid");
    // setgid without group execute stays (it marks mandatory locking, not privilege).
    std::fs::set_permissions(&f, PermissionsExt::from_mode(0o2666)).unwrap();
    let o = Command::new("setpriv").args(["--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", "echo x >> \"$1\"", "sh"]).arg(&f).output().unwrap();
    assert!(o.status.success());
    assert_eq!(mode(&f), 0o2666);
    std::fs::set_permissions(&f, PermissionsExt::from_mode(0o4755)).unwrap();
    std::os::unix::fs::chown(&f, Some(65534), None).unwrap();
    assert_eq!(mode(&f) & 0o6000, 0, "chown cleared setuid");
    m.unmount();
}

/// POSIX ACLs on the mount, enforced by the kernel and kept by the engine: a default ACL
/// passes to new files (limited by the mode asked for, without the umask) and directories; a
/// named user's entry grants what the mode alone would not; chmod rewrites the mask; all of it
/// survives a remount.
#[test]
fn posix_acls_on_the_mount() {
    if !fuse_usable() || !is_root() || !have("setfacl") || !have("getfacl") || !have("setpriv") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o755)).unwrap();
    let img = small_image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=wasteless,dmeta,allow_other");
    let d = mnt.join("d");
    std::fs::create_dir(&d).unwrap();
    std::fs::set_permissions(&d, PermissionsExt::from_mode(0o755)).unwrap();
    let run = |args: &[&str]| {
        let o = Command::new(args[0]).args(&args[1..]).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let ds = d.to_str().unwrap();
    run(&["setfacl", "-m", "u:65534:rwx", "-d", "-m", "u:65534:rwx", ds]);
    run(&["setfacl", "-m", "u:65534:rwx", ds]);
    // Root, umask 077, makes a file: the default ACL applies, not the umask.
    run(&["sh", "-c", &format!("umask 077 && echo root > {ds}/f && mkdir {ds}/sub")]);
    let facl = run(&["getfacl", "-cpn", &format!("{ds}/f")]);
    assert!(facl.contains("user:65534:rwx") && facl.contains("mask::rw-"), "{facl}");
    assert!(run(&["getfacl", "-cpdn", &format!("{ds}/sub")]).contains("user:65534:rwx"), "a new directory inherits the default ACL");
    // The named user may write the file although the mode (0660) would not let it.
    let as_user = |cmd: &str| Command::new("setpriv").args(["--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", cmd]).output().unwrap();
    assert!(as_user(&format!("echo user >> {ds}/f && echo new > {ds}/g")).status.success(), "the ACL grants the user write access");
    // chmod 600: the mask becomes ---, and the user's entry no longer grants anything.
    std::fs::set_permissions(d.join("f"), PermissionsExt::from_mode(0o600)).unwrap();
    assert!(run(&["getfacl", "-cpn", &format!("{ds}/f")]).contains("mask::---"));
    assert!(!as_user(&format!("echo again >> {ds}/f")).status.success(), "chmod took the access away");
    m.unmount();
    let m = Mount::new(&img, &mnt, "data=wasteless,dmeta,allow_other");
    let facl = run(&["getfacl", "-cpn", &format!("{ds}/f")]);
    assert!(facl.contains("user:65534:rwx") && facl.contains("mask::---"), "after a remount: {facl}");
    assert_eq!(std::fs::read_to_string(d.join("f")).unwrap(), "root\nuser\n");
    m.unmount();
    fsck_clean(&img);
}

/// Setting an access ACL keeps the mode in step, as ext4 does: `cp -a` and `cp -p` (which set
/// the mode through system.posix_acl_access) keep 644 and 755 with no ACL left behind (no `+`
/// in ls); `setfacl -m o::r,g::r` on a 600 file makes it 644 and lets another user read it; an
/// ACL with a named user keeps it and sets the group bits from the mask; removing it leaves the
/// mode.
#[test]
fn setting_an_acl_updates_the_mode_as_ext4_does() {
    if !fuse_usable() || !is_root() || !have("setfacl") || !have("getfacl") || !have("setpriv") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o755)).unwrap();
    let img = small_image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=ordered,allow_other");
    std::fs::set_permissions(&mnt, PermissionsExt::from_mode(0o755)).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    let run = |args: &[&str]| {
        let o = Command::new(args[0]).args(&args[1..]).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // A tree outside the mount, copied in with cp -a and cp -p.
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::set_permissions(&src, PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(src.join("f"), b"hello").unwrap();
    std::fs::set_permissions(src.join("f"), PermissionsExt::from_mode(0o644)).unwrap();
    std::fs::write(src.join("x"), b"#!/bin/sh\n").unwrap();
    std::fs::set_permissions(src.join("x"), PermissionsExt::from_mode(0o755)).unwrap();
    run(&["cp", "-a", src.to_str().unwrap(), mnt.join("a").to_str().unwrap()]);
    run(&["cp", "-p", src.join("f").to_str().unwrap(), mnt.join("p").to_str().unwrap()]);
    for (p, want) in [("a", 0o755), ("a/f", 0o644), ("a/x", 0o755), ("p", 0o644)] {
        assert_eq!(mode(&mnt.join(p)), want, "{p}: mode after cp");
        let ls = run(&["ls", "-ld", mnt.join(p).to_str().unwrap()]);
        assert!(!ls.split_whitespace().next().unwrap().ends_with('+'), "{p}: an ACL was left behind: {ls}");
    }
    let as_user = |cmd: &str| Command::new("setpriv").args(["--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", cmd]).output().unwrap();
    let f = mnt.join("secret");
    std::fs::write(&f, b"now public").unwrap();
    std::fs::set_permissions(&f, PermissionsExt::from_mode(0o600)).unwrap();
    assert!(!as_user(&format!("cat {}", f.display())).status.success());
    run(&["setfacl", "-m", "o::r,g::r", f.to_str().unwrap()]);
    assert_eq!(mode(&f), 0o644, "setfacl o::r,g::r on 600");
    let o = as_user(&format!("cat {}", f.display()));
    assert!(o.status.success() && o.stdout == b"now public", "another user reads it: {}", String::from_utf8_lossy(&o.stderr));
    // A named user's entry: the ACL stays, the group bits follow the mask.
    run(&["setfacl", "-m", "u:65534:rw", f.to_str().unwrap()]);
    assert_eq!(mode(&f), 0o664, "mask rw-");
    assert!(run(&["getfacl", "-cpn", f.to_str().unwrap()]).contains("user:65534:rw-"));
    run(&["setfacl", "-b", f.to_str().unwrap()]);
    assert_eq!(mode(&f) & 0o700, 0o600, "removing the ACL leaves the mode's owner bits");
    assert!(!run(&["getfacl", "-cpn", f.to_str().unwrap()]).contains("user:65534"));
    m.unmount();
    fsck_clean(&img);
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
                    let Ok(mut f) = std::fs::OpenOptions::new().append(true).create(true).open(path) else { return (synced, None) };
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
    assert!(status.success(), "the engine unmounts cleanly after the abort: {status}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("aborting the connection") && text.contains("unmounted cleanly"), "{text}");
    let _ = Command::new("umount").arg(&mnt).status();
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

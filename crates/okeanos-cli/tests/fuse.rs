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
            let done = Command::new("fusermount3").arg("-u").arg("-z").arg(&self.mnt).status().is_ok_and(|s| s.success());
            if !done {
                // A mount whose daemon died (a failed test) may refuse fusermount3.
                let _ = Command::new("umount").arg("-l").arg(&self.mnt).stderr(std::process::Stdio::null()).status();
            }
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

// The tests, by subject.
#[path = "fuse/daemon.rs"]
mod daemon;
#[path = "fuse/floor.rs"]
mod floor;
#[path = "fuse/posix.rs"]
mod posix;
#[path = "fuse/programs.rs"]
mod programs;

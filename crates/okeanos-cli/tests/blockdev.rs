//! `okeanos blockdev` with real NBD clients from Debian's packages (nbdinfo, nbdcopy and
//! nbdfuse from libnbd-bin; qemu-io and qemu-img from qemu-utils), the server a real process
//! on 127.0.0.1 that each test starts and stops. What a client flushed survives kill -9 of the
//! server; an ext4 made on the export (through nbdfuse and a loop device) checks clean after it.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_okeanos");

/// Skips a test whose tools are missing, unless the test command promised them
/// (OKEANOS_TESTS_REQUIRE names `tools`, `root` and `fuse` when it installed and found them).
fn skip(need: &str, why: &str) -> bool {
    if std::env::var("OKEANOS_TESTS_REQUIRE").is_ok_and(|r| r.split(',').any(|x| x == need)) {
        panic!("{why}, but the test command promised {need} (OKEANOS_TESTS_REQUIRE)");
    }
    eprintln!("skipped: {why}");
    true
}

fn have(tool: &str) -> bool {
    Command::new("sh").args(["-c", &format!("command -v {tool}")]).stdout(Stdio::null()).status().is_ok_and(|s| s.success())
}

fn tools_missing(tools: &[&str]) -> bool {
    match tools.iter().find(|t| !have(t)) {
        Some(t) => skip("tools", &format!("{t} is not installed (libnbd-bin, qemu-utils)")),
        None => false,
    }
}

fn okeanos(args: &[&str]) -> (bool, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().unwrap_or_else(|e| panic!("{cmd}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{cmd} {args:?} failed: {text}");
    text
}

struct Serve {
    child: Option<Child>,
    uri: String,
}

impl Serve {
    fn start(disk: &Path) -> Serve {
        let mut child = Command::new(BIN).args(["blockdev", "serve"]).arg(disk).args(["--nbd", "127.0.0.1:0"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let uri = line.split_whitespace().find(|w| w.starts_with("nbd://")).unwrap_or_else(|| panic!("no address in {line:?}")).trim_end_matches(';').to_string();
        Serve { child: Some(child), uri: format!("{uri}/") }
    }

    fn kill9(&mut self) {
        let mut c = self.child.take().unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
    }

    /// SIGTERM: the server snapshots its map and says what it served.
    fn stop(&mut self) -> String {
        let mut c = self.child.take().unwrap();
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let st = c.wait().unwrap();
        let mut err = String::new();
        c.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        assert!(st.success(), "{st}: {err}");
        err
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn disk(dir: &Path, size: &str) -> PathBuf {
    let d = dir.join("mlb.img");
    let (ok, out) = okeanos(&["blockdev", "create", d.to_str().unwrap(), "--size", size, "--log-group-size", "4M", "--log-size", "512K", "--logged-write-size", "64K"]);
    assert!(ok, "{out}");
    d
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2654435761).rotate_left(seed as u32) as u8 ^ seed).collect()
}

#[test]
fn create_refuses_what_it_would_destroy_and_bad_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let d = disk(dir.path(), "32M");
    let s = d.to_str().unwrap();
    let (ok, out) = okeanos(&["blockdev", "create", s]);
    assert!(!ok && out.contains("--force"), "{out}");
    let (ok, out) = okeanos(&["blockdev", "create", s, "--force", "--log-group-size", "1M", "--log-size", "2M"]);
    assert!(!ok && out.contains("no room"), "{out}");
    let (ok, out) = okeanos(&["blockdev", "create", dir.path().join("new").to_str().unwrap()]);
    assert!(!ok && out.contains("--size"), "{out}");
    let (ok, out) = okeanos(&["blockdev", "create", s, "--force", "--logged-write-size", "5000"]);
    assert!(!ok && out.contains("multiple of 4096"), "{out}");
    // Not an MLB disk: check says it cannot check (8), stat and serve fail with the reason.
    let plain = dir.path().join("plain");
    std::fs::write(&plain, vec![0u8; 1 << 20]).unwrap();
    let st = Command::new(BIN).args(["blockdev", "check"]).arg(&plain).output().unwrap();
    assert_eq!(st.status.code(), Some(8), "{}", String::from_utf8_lossy(&st.stderr));
    let (ok, out) = okeanos(&["blockdev", "serve", plain.to_str().unwrap(), "--nbd", "127.0.0.1:0"]);
    assert!(!ok && out.contains("not an MLB disk"), "{out}");
    let (ok, out) = okeanos(&["blockdev", "stat", s, "--json"]);
    assert!(ok && out.contains("\"mapped_blocks\": 0"), "{out}");
}

#[test]
fn real_clients_read_back_what_they_wrote_and_what_they_flushed_survives_kill_9() {
    if tools_missing(&["nbdinfo", "nbdcopy", "qemu-io", "qemu-img"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = disk(dir.path(), "64M");
    let mut srv = Serve::start(&d);
    let size: u64 = run("nbdinfo", &["--size", &srv.uri]).trim().parse().unwrap();
    let (_, st) = okeanos(&["blockdev", "stat", d.to_str().unwrap(), "--json"]);
    assert!(st.contains(&format!("\"user_bytes\": {size}")), "nbdinfo's size {size} is the export's: {st}");
    // A sequential copy (large writes, home) and small unaligned writes (logged), flushed.
    let src = dir.path().join("src");
    std::fs::write(&src, pattern(12 << 20, 3)).unwrap();
    run("nbdcopy", &["--flush", src.to_str().unwrap(), &srv.uri]);
    let mut qemu = vec!["-f".to_string(), "raw".to_string()];
    for k in 0..64u64 {
        let at = (k * 7919 * 4096 + k * 333) % (size - 8192);
        qemu.extend(["-c".to_string(), format!("write -P {} {at} {}", 0x40 + k, 100 + k * 37)]);
    }
    qemu.extend(["-c".to_string(), "flush".to_string(), srv.uri.clone()]);
    let q: Vec<&str> = qemu.iter().map(|s| s.as_str()).collect();
    run("qemu-io", &q);
    assert!(run("qemu-img", &["info", &srv.uri]).contains(&format!("{size} bytes")));
    srv.kill9();
    let (ok, out) = okeanos(&["blockdev", "check", d.to_str().unwrap()]);
    assert!(ok && out.contains("clean"), "{out}");
    let mut srv = Serve::start(&d);
    // The copy, except where the small writes landed, and each small write.
    let back = dir.path().join("back");
    run("nbdcopy", &[&srv.uri, back.to_str().unwrap()]);
    let got = std::fs::read(&back).unwrap();
    let mut want = pattern(12 << 20, 3);
    want.resize(size as usize, 0);
    for k in 0..64u64 {
        let at = ((k * 7919 * 4096 + k * 333) % (size - 8192)) as usize;
        want[at..at + 100 + k as usize * 37].fill(0x40 + k as u8);
    }
    assert!(got == want, "the export differs from what the clients wrote and flushed before kill -9");
    let err = srv.stop();
    assert!(err.contains("stopped:"), "{err}");
    let (_, st) = okeanos(&["blockdev", "stat", d.to_str().unwrap()]);
    assert!(st.contains("blocks logged"), "{st}");
    let (ok, out) = okeanos(&["blockdev", "checkpoint", d.to_str().unwrap()]);
    assert!(ok && out.contains("copied home"), "{out}");
    let (_, st) = okeanos(&["blockdev", "stat", d.to_str().unwrap(), "--json"]);
    assert!(st.contains("\"mapped_blocks\": 0"), "{st}");
    let mut srv = Serve::start(&d);
    run("nbdcopy", &[&srv.uri, back.to_str().unwrap()]);
    assert!(std::fs::read(&back).unwrap() == want, "the checkpoint moved blocks home wrong");
    srv.stop();
}

struct Cleanup(Vec<Vec<String>>);
impl Drop for Cleanup {
    fn drop(&mut self) {
        for c in self.0.iter().rev() {
            let _ = Command::new(&c[0]).args(&c[1..]).output();
        }
    }
}

#[test]
fn ext4_made_on_the_export_checks_clean_after_kill_9_of_the_server() {
    if tools_missing(&["nbdfuse", "mkfs.ext4", "e2fsck", "losetup"]) {
        return;
    }
    if unsafe { libc::geteuid() } != 0 {
        skip("root", "loop devices and mount need root");
        return;
    }
    if std::fs::OpenOptions::new().read(true).write(true).open("/dev/fuse").is_err() {
        skip("fuse", "/dev/fuse cannot be opened");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = disk(dir.path(), "128M");
    let fuse_dir = dir.path().join("nbdfuse");
    let mnt = dir.path().join("ext4");
    std::fs::create_dir_all(&fuse_dir).unwrap();
    std::fs::create_dir_all(&mnt).unwrap();
    let mut srv = Serve::start(&d);
    let mut cleanup = Cleanup(Vec::new());
    let attach = |srv: &Serve, cleanup: &mut Cleanup| -> String {
        let mut nbdfuse = Command::new("nbdfuse").arg(&fuse_dir).arg(&srv.uri).spawn().unwrap();
        cleanup.0.push(vec!["fusermount3".into(), "-u".into(), fuse_dir.display().to_string()]);
        let file = fuse_dir.join("nbd");
        for _ in 0..100 {
            if file.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(file.exists(), "nbdfuse did not show the export");
        let _ = nbdfuse.try_wait();
        let lo = run("losetup", &["-f", "--show", file.to_str().unwrap()]).trim().to_string();
        cleanup.0.push(vec!["losetup".into(), "-d".into(), lo.clone()]);
        lo
    };
    let lo = attach(&srv, &mut cleanup);
    run("mkfs.ext4", &["-q", "-F", &lo]);
    run("mount", &[&lo, mnt.to_str().unwrap()]);
    cleanup.0.push(vec!["umount".into(), mnt.display().to_string()]);
    // Small appends each followed by fsync (logged writes), then a larger file.
    let log = mnt.join("log");
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap();
        for i in 0..300 {
            writeln!(f, "record {i:05} of the telemetry stream").unwrap();
            f.sync_data().unwrap();
        }
    }
    std::fs::write(mnt.join("big"), pattern(6 << 20, 9)).unwrap();
    run("sync", &["-f", mnt.to_str().unwrap()]);
    // Everything is synced: kill -9 the server with the file system still mounted.
    srv.kill9();
    for c in std::mem::take(&mut cleanup.0).into_iter().rev() {
        let _ = Command::new(&c[0]).args(&c[1..]).output();
    }
    let srv = Serve::start(&d);
    let lo = attach(&srv, &mut cleanup);
    // ext4 replays its own journal (what its fsyncs committed) at mount; then it must check
    // clean, and hold every synced byte.
    run("mount", &[&lo, mnt.to_str().unwrap()]);
    run("umount", &[mnt.to_str().unwrap()]);
    let fsck = Command::new("e2fsck").args(["-fn", &lo]).output().unwrap();
    assert!(fsck.status.success(), "e2fsck after kill -9: {}", String::from_utf8_lossy(&fsck.stdout));
    run("mount", &["-o", "ro", &lo, mnt.to_str().unwrap()]);
    cleanup.0.push(vec!["umount".into(), mnt.display().to_string()]);
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.lines().count(), 300);
    assert!(text.ends_with("record 00299 of the telemetry stream\n"));
    assert!(std::fs::read(mnt.join("big")).unwrap() == pattern(6 << 20, 9));
    drop(cleanup);
    drop(srv);
    let (ok, out) = okeanos(&["blockdev", "check", d.to_str().unwrap()]);
    assert!(ok && out.contains("clean"), "{out}");
}

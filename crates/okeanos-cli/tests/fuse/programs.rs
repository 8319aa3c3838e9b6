//! Real programs on the mount, and crashes of the daemon under them: fio, SQLite, postmark,
//! PostgreSQL, many synced writers, kill -9, cached reads, fdatasync of overwrites.

use super::*;

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
        // A writer none of whose syncs returned before the kill (starved on a loaded machine)
        // had nothing acknowledged, its file's creation included: the file may be gone.
        let text = match std::fs::read_to_string(mnt.join(format!("w{w}"))) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && n == 0 => {
                eprintln!("writer {w}: nothing acknowledged (all: {acked:?}), and its file is gone");
                continue;
            }
            Err(e) => panic!("writer {w} ({n} records acknowledged, all: {acked:?}): {e}"),
        };
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

//! `okeanos mount` and `okeanos umount`: the FUSE daemon's life.
//!
//! `mount` checks the mount point (a stale mount whose daemon died is named, with the command
//! that clears it), mounts the engine (recovering the journal if the image was not unmounted
//! cleanly) and serves it. Without `-f` it re-runs itself in the foreground as a detached
//! process that logs to a file, and returns once the file system is mounted. SIGTERM and
//! SIGINT unmount cleanly: the FUSE session ends, then the engine commits, checkpoints and
//! marks the image clean. `umount` asks the kernel to unmount and waits for the daemon to
//! finish that clean unmount.

use crate::fuse::{KernelFront, OkeanosFuse};
use fuser::{Config, MountOption};
use okeanos::{MountOptions, Okeanos};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// Logs one line of the daemon: to stderr (the per-mount log file of a detached daemon, or the
/// terminal with -f), and to syslog (the system journal on systemd machines) when the
/// machine has one (/dev/log), tagged `okeanos[PID]` with the mount point.
fn say(msg: &str) {
    eprintln!("okeanos: {msg}");
    static OPENED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let syslog = *OPENED.get_or_init(|| {
        let present = Path::new("/dev/log").exists();
        if present {
            // SAFETY: openlog keeps the pointer: a 'static C string.
            unsafe { libc::openlog(c"okeanos".as_ptr(), libc::LOG_PID, libc::LOG_DAEMON) };
        }
        present
    });
    if syslog {
        if let Ok(c) = std::ffi::CString::new(msg.replace('\0', " ")) {
            // SAFETY: a fixed "%s" format with one valid C string argument.
            unsafe { libc::syslog(libc::LOG_INFO, c"%s".as_ptr(), c.as_ptr()) };
        }
    }
}

/// Options that belong to the FUSE layer rather than the engine.
struct FuseOpts {
    writeback_cache: bool,
    /// Regular files through the kernel's page cache instead of direct I/O (`page_cache`).
    page_cache: bool,
    /// Read-only opens direct too (`direct_reads`), not through the page cache.
    direct_reads: bool,
    allow_other: bool,
    /// Request threads (`threads=N`); None: [`default_request_threads`] over `/dev/fuse`, and
    /// the shape measured for io_uring (eight threads over the queues).
    threads: Option<usize>,
    /// Spare request threads over `/dev/fuse` (`spare_threads=N`, 0 to 64; default
    /// [`SPARE_THREADS`]): parked until a request thread waits for the device (fuse/spares.rs).
    spare_threads: Option<usize>,
    /// FUSE over io_uring where the kernel offers it (`transport=io_uring`), or /dev/fuse only
    /// (`transport=dev`, the default: with a request thread per core it is ahead of io_uring
    /// for SQLite and for many small synced appends, docs/BENCHMARKS.md, "Request threads: one
    /// per core"; "FUSE over io_uring" has the earlier comparisons).
    io_uring: bool,
    /// Write the counters in Prometheus' text format here every 10 s and at unmount (for
    /// node_exporter's textfile collector): `metrics_file=PATH`.
    metrics_file: Option<PathBuf>,
}

/// Request threads over `/dev/fuse` unless `threads=` says: one per CPU the daemon may run
/// on, at least two (so that a thread leading a commit, which waits for its flush, leaves
/// one serving) and at most 64. More threads than cores cost more than they serve: a request
/// then mostly wakes a sleeping thread, where a thread that has just replied finds the next
/// request waiting. On two cores, two threads against eight: fio's 100 synced appenders
/// 1.19-1.36x, SQLite 1.06-1.20x with 16-26% less daemon CPU a transaction (docs/BENCHMARKS.md,
/// "Request threads: one per core").
fn default_request_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 64)
}

/// Spare request threads over `/dev/fuse` unless `spare_threads=` says. A spare serves only
/// while another thread waits for the device, so this bounds the reads that wait at once
/// while the readers stay free: the depth a device queue wants, not a count of cores. Eight
/// keep fio's four jobs of cold random reads and pgbench's eight clients each in a device read.
const SPARE_THREADS: usize = 8;

/// The request threads io_uring's queues share when `threads=` is not given: the shape its
/// comparisons with `/dev/fuse` were measured with (docs/MOUNT.md, "FUSE over io_uring").
const IO_URING_THREADS: usize = 8;

/// Splits `-o` options into engine options and FUSE options.
fn split_options(opts: &str) -> Result<(MountOptions, FuseOpts), String> {
    let mut engine = Vec::new();
    let mut f = FuseOpts { writeback_cache: false, page_cache: false, direct_reads: false, allow_other: false, threads: None, spare_threads: None, io_uring: false, metrics_file: None };
    for item in opts.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match item.split_once('=').map_or((item, None), |(k, v)| (k, Some(v))) {
            ("writeback_cache", None) => f.writeback_cache = true,
            ("page_cache", None) => f.page_cache = true,
            ("direct_reads", None) => f.direct_reads = true,
            ("allow_other", None) => f.allow_other = true,
            ("metrics_file", Some(v)) if !v.is_empty() => f.metrics_file = Some(PathBuf::from(v)),
            ("transport", Some("io_uring")) => f.io_uring = true,
            ("transport", Some("dev")) => f.io_uring = false,
            ("transport", Some(v)) => return Err(format!("transport={v}: use io_uring or dev")),
            ("threads", Some(v)) => f.threads = Some(v.parse().ok().filter(|&n| (1..=64).contains(&n)).ok_or_else(|| format!("threads={v}: use 1 to 64"))?),
            ("spare_threads", Some(v)) => f.spare_threads = Some(v.parse().ok().filter(|&n| n <= 64).ok_or_else(|| format!("spare_threads={v}: use 0 to 64"))?),
            _ => engine.push(item),
        }
    }
    Ok((MountOptions::parse(&engine.join(","))?, f))
}

/// Whether `mnt` is a FUSE mount whose daemon is gone ("Transport endpoint is not connected").
pub fn is_stale(mnt: &Path) -> bool {
    matches!(std::fs::metadata(mnt), Err(e) if e.raw_os_error() == Some(libc::ENOTCONN))
}

/// Undoes the octal escapes of /proc/self/mountinfo (space \040, tab \011, newline \012,
/// backslash \134).
fn unescape_mountinfo(field: &str) -> Vec<u8> {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// Ends the FUSE connection of the mount at `canon` (a canonical path), as
/// `echo 1 > /sys/fs/fuse/connections/N/abort` does: every request waiting on it fails at once
/// and the serving loop returns, so the engine unmounts cleanly. The connection is found in
/// /proc/self/mountinfo, which asks the mount nothing. Without the fuse control file system
/// (and no right to mount it), the daemon exits instead: what it acknowledged is in the journal.
fn abort_connection(canon: &Path) {
    let want = canon.as_os_str().as_encoded_bytes();
    let minor = std::fs::read_to_string("/proc/self/mountinfo").ok().and_then(|m| {
        m.lines().find(|l| l.split(' ').nth(4).is_some_and(|f| unescape_mountinfo(f) == want)).and_then(|l| l.split(' ').nth(2)?.split_once(':')?.1.parse::<u32>().ok())
    });
    let ctl = Path::new("/sys/fs/fuse/connections");
    if let Some(minor) = minor {
        let abort = ctl.join(minor.to_string()).join("abort");
        let dir = c"/sys/fs/fuse/connections";
        // Another process doing the same may unmount the control file system between our
        // look and our write: try again a few times before giving up.
        for _ in 0..3 {
            // SAFETY: NUL-terminated strings that live across the calls.
            let mounted_here = !abort.exists() && unsafe { libc::mount(c"none".as_ptr(), dir.as_ptr(), c"fusectl".as_ptr(), 0, std::ptr::null()) } == 0;
            let aborted = std::fs::write(&abort, "1").is_ok();
            if mounted_here {
                // SAFETY: as above.
                unsafe { libc::umount2(dir.as_ptr(), libc::MNT_DETACH) };
            }
            if aborted {
                say(&format!("aborted FUSE connection {minor} of {}", canon.display()));
                return;
            }
        }
    }
    say("could not abort the FUSE connection; exiting (acknowledged writes are in the journal)");
    std::process::exit(1);
}

pub fn is_mounted(mnt: &Path) -> bool {
    let Ok(canon) = std::fs::canonicalize(mnt) else { return false };
    let want = canon.as_os_str().as_encoded_bytes();
    std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|m| m.lines().any(|l| l.split(' ').nth(4).is_some_and(|f| unescape_mountinfo(f) == want)))
}

/// Files of the daemon of `mnt` in the temporary directory, named after the canonical mount
/// point (so two mount points of the same name never share them): `okeanos-mount-KEY.EXT`.
fn mount_file(mnt: &Path, ext: &str) -> PathBuf {
    let canon = std::fs::canonicalize(mnt).unwrap_or_else(|_| mnt.to_path_buf());
    let key = crc32c::crc32c(canon.as_os_str().as_encoded_bytes());
    std::env::temp_dir().join(format!("okeanos-mount-{key:08x}.{ext}"))
}

/// Where the daemon of `mnt` records its pid.
fn pid_file(mnt: &Path) -> PathBuf {
    mount_file(mnt, "pid")
}

/// The environment variable through which a detached daemon reports "ok" or its error to the
/// command that started it.
const READY_FD: &str = "OKEANOS_READY_FD";

/// Tells the starting command how the mount went (no-op in a plain foreground mount).
fn report_ready(msg: &str) {
    static ONCE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if ONCE.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    if let Some(fd) = std::env::var(READY_FD).ok().and_then(|v| v.parse::<i32>().ok()) {
        let line = format!("{}\n", msg.replace('\n', " "));
        // SAFETY: fd was handed to us by the parent for this purpose; we write and close it once.
        unsafe {
            libc::write(fd, line.as_ptr().cast(), line.len());
            libc::close(fd);
        }
    }
}

pub fn mount(image: &Path, mnt: &Path, options: &str, foreground: bool, log: Option<PathBuf>) -> Result<ExitCode, String> {
    if is_stale(mnt) {
        return Err(format!(
            "{} is a stale Okeanos mount: its daemon is gone. Clear it with `okeanos umount {}` (or `fusermount3 -u {}`), then mount again",
            mnt.display(),
            mnt.display(),
            mnt.display()
        ));
    }
    match std::fs::metadata(mnt) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(format!("mount point {} does not exist (create it with mkdir)", mnt.display())),
        Err(e) => return Err(format!("mount point {}: {e}", mnt.display())),
        Ok(m) if !m.is_dir() => return Err(format!("mount point {} is not a directory", mnt.display())),
        Ok(_) => {}
    }
    if is_mounted(mnt) {
        return Err(format!("{} is already a mount point", mnt.display()));
    }
    let (opts, fopts) = split_options(options)?;
    if !foreground {
        return detach(image, mnt, options, log);
    }
    if let Some(path) = &log {
        redirect_stderr(path)?;
    }
    match serve(image, mnt, opts, fopts) {
        Ok(code) => Ok(code),
        Err(e) => {
            report_ready(&format!("error: {e}"));
            if Path::new("/dev/log").exists() {
                say(&format!("error: {e}"));
            }
            Err(e)
        }
    }
}

/// Mounts the engine and serves it until unmounted.
fn serve(image: &Path, mnt: &Path, opts: MountOptions, fopts: FuseOpts) -> Result<ExitCode, String> {
    let ro = opts.read_only;
    let fs = Okeanos::open(image, opts).map_err(|e| format!("{}: {e}", image.display()))?;
    if let Some(r) = fs.counters().recovery {
        say(&format!("{}: recovered {} transactions ({} blocks) from the journal", image.display(), r.transactions, r.blocks_replayed));
    }
    let mut config = Config::default();
    config.mount_options = vec![MountOption::FSName(format!("okeanos:{}", image.display())), MountOption::Subtype("okeanos".into()), MountOption::DefaultPermissions];
    if ro {
        config.mount_options.push(MountOption::RO);
    }
    if fopts.allow_other {
        config.acl = fuser::SessionACL::All;
    }
    let request_threads = fopts.threads.unwrap_or_else(default_request_threads);
    // io_uring's queues have threads of their own; /dev/fuse then carries little.
    let spares = if fopts.io_uring { 0 } else { fopts.spare_threads.unwrap_or(SPARE_THREADS) };
    let pool = crate::fuse::spares::Spares::new(request_threads, spares);
    config.n_threads = Some(pool.threads());
    config.clone_fd = true;
    let engine = fs.clone();
    let notifier = std::sync::Arc::new(std::sync::OnceLock::new());
    let ring = crate::fuse::ring::RingState::new(fopts.io_uring);
    let ring_state = ring.clone();
    let ops = std::sync::Arc::new(OkeanosFuse::new(fs, fopts.writeback_cache, fopts.page_cache, !fopts.direct_reads, notifier.clone(), ring.clone(), pool));
    let front = KernelFront(ops.clone());
    let source = format!("okeanos:{}", image.display());
    let (session, mut unmount): (_, Box<dyn FnMut() + Send>) = match mount_typed(mnt, &source, ro, fopts.allow_other) {
        Some(fd) => {
            let session = fuser::Session::from_fd(front, fd, config.acl, config.clone()).map_err(|e| format!("mounting {}: {e}", mnt.display()))?;
            let m = mnt.to_path_buf();
            (session, Box::new(move || unmount_typed(&m)))
        }
        None => {
            let mut session = fuser::Session::new(front, mnt, &config).map_err(|e| format!("mounting {}: {e}", mnt.display()))?;
            let mut unmounter = session.unmount_callable();
            (session, Box::new(move || drop(unmounter.unmount())))
        }
    };
    let _ = notifier.set(session.notifier());
    let spare_pool = ops.spares.clone();
    let front_after = ops.clone();
    if fopts.io_uring {
        use std::os::fd::AsFd;
        let fd = session.as_fd().try_clone_to_owned().map_err(|e| format!("mounting {}: {e}", mnt.display()))?;
        let cpus = crate::fuse::ring::possible_cpus();
        let shape = crate::fuse::ring::Shape { threads_per_queue: (fopts.threads.unwrap_or(IO_URING_THREADS) / cpus).max(1), entries: 32, payload: 1 << 20 };
        let canon = std::fs::canonicalize(mnt).unwrap_or_else(|_| mnt.to_path_buf());
        // Every queue thread that fails asks for the abort, often at the same moment: the
        // first does it and the others wait for it. Two at once raced over mounting and
        // unmounting the control file system, and the loser exited the daemon.
        let once = std::sync::Once::new();
        crate::fuse::ring::start(fd, ops, ring, shape, std::sync::Arc::new(move || once.call_once(|| abort_connection(&canon))));
    }
    let _ = std::fs::write(pid_file(mnt), std::process::id().to_string());
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT]).map_err(|e| e.to_string())?;
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            say("signal received, unmounting");
            // Parked spares would keep fuser's join waiting for their park to end.
            spare_pool.close();
            unmount();
        }
    });
    say(&format!("{} mounted on {}", image.display(), mnt.display()));
    report_ready("ok");
    let stop_metrics = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let metrics = fopts.metrics_file.clone().map(|path| {
        let (fs, stop) = (engine.clone(), stop_metrics.clone());
        std::thread::spawn(move || {
            let mut last = Instant::now() - Duration::from_secs(60);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if last.elapsed() >= Duration::from_secs(10) {
                    write_metrics(&path, &OkeanosFuse::metrics_text(&fs));
                    last = Instant::now();
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    });
    let served = session.run();
    ring_state.session_ended();
    front_after.forget_all();
    stop_metrics.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(t) = metrics {
        let _ = t.join();
    }
    let final_metrics = OkeanosFuse::metrics_text(&engine);
    let unmounted = engine.unmount();
    if let Some(path) = &fopts.metrics_file {
        write_metrics(path, &final_metrics);
    }
    let _ = std::fs::remove_file(pid_file(mnt));
    served.map_err(|e| format!("serving {}: {e}", mnt.display()))?;
    unmounted.map_err(|e| format!("unmounting the engine: {e}"))?;
    say(&format!("{} unmounted cleanly", mnt.display()));
    Ok(ExitCode::SUCCESS)
}

/// Mounts /dev/fuse on `mnt` as libfuse does for root, with the type `fuse.okeanos` (fuser's
/// own mount(2) says `fuse`), so that /proc/mounts, `findmnt -t fuse.okeanos` and systemd see
/// an Okeanos mount. None when not root or the kernel refuses: fuser then mounts (through
/// fusermount3, which sets the subtype too).
fn mount_typed(mnt: &Path, source: &str, ro: bool, allow_other: bool) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let dev = std::fs::OpenOptions::new().read(true).write(true).open("/dev/fuse").ok()?;
    let mut data = format!("fd={},rootmode=40000,user_id=0,group_id=0,default_permissions", dev.as_raw_fd());
    if allow_other {
        data.push_str(",allow_other");
    }
    let c = |s: &[u8]| std::ffi::CString::new(s).ok();
    let (src, target, fstype, data) = (c(source.as_bytes())?, c(mnt.as_os_str().as_bytes())?, c(b"fuse.okeanos")?, c(data.as_bytes())?);
    let mut flags = libc::MS_NOSUID | libc::MS_NODEV;
    if ro {
        flags |= libc::MS_RDONLY;
    }
    // SAFETY: valid C strings; the kernel reads them during the call.
    let r = unsafe { libc::mount(src.as_ptr(), target.as_ptr(), fstype.as_ptr(), flags, data.as_ptr().cast()) };
    (r == 0).then(|| OwnedFd::from(dev))
}

/// Unmounts what [`mount_typed`] mounted (the kernel then ends the session).
fn unmount_typed(mnt: &Path) {
    use std::os::unix::ffi::OsStrExt;
    if let Ok(target) = std::ffi::CString::new(mnt.as_os_str().as_bytes()) {
        // SAFETY: a valid C string.
        if unsafe { libc::umount2(target.as_ptr(), 0) } != 0 {
            // Busy: detach it, as umount -l; the session ends when the last user lets go.
            // SAFETY: as above.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// Replaces the metrics file atomically (a reader never sees half of it).
fn write_metrics(path: &Path, text: &str) {
    let tmp = path.with_extension("prom.tmp");
    if let Err(e) = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path)) {
        say(&format!("metrics file {}: {e}", path.display()));
    }
}

fn redirect_stderr(path: &Path) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(|e| format!("log {}: {e}", path.display()))?;
    // SAFETY: dup2 on two valid descriptors; stderr now writes to the log file.
    if unsafe { libc::dup2(f.as_raw_fd(), 2) } < 0 {
        return Err(format!("log {}: {}", path.display(), std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Runs the daemon in the foreground as a detached child and waits until it says it has
/// mounted, or why it could not (a bad image fails at once with its own message).
fn detach(image: &Path, mnt: &Path, options: &str, log: Option<PathBuf>) -> Result<ExitCode, String> {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    use std::os::unix::process::CommandExt;
    let log = log.unwrap_or_else(|| mount_file(mnt, "log"));
    let log_start = std::fs::metadata(&log).map_or(0, |m| m.len());
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills two descriptors; the read end is close-on-exec, the write end is
    // inherited by the daemon, which reports through it.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), 0) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: fds[0] is ours alone from here on.
    let mut ready = unsafe { std::fs::File::from_raw_fd(fds[0]) };
    // SAFETY: mark the read end close-on-exec so the daemon does not hold it.
    unsafe { libc::fcntl(fds[0], libc::F_SETFD, libc::FD_CLOEXEC) };
    let spawned = Command::new(exe)
        .arg("mount")
        .arg(image)
        .arg(mnt)
        .arg("-f")
        .arg("--log")
        .arg(&log)
        .arg("-o")
        .arg(options)
        .env(READY_FD, fds[1].to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
    // SAFETY: the write end now lives in the daemon; close our copy so EOF means it is gone.
    unsafe { libc::close(fds[1]) };
    let mut child = spawned.map_err(|e| e.to_string())?;
    // Bounded: the daemon answers once it has mounted or failed; 60 s at most.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = ready.read_to_string(&mut s);
        let _ = tx.send(s);
    });
    let answer = rx.recv_timeout(Duration::from_secs(60));
    let log_tail = || {
        let all = std::fs::read(&log).unwrap_or_default();
        let mine = String::from_utf8_lossy(all.get(log_start as usize..).unwrap_or(&[])).into_owned();
        mine.lines().rev().take(10).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
    };
    match answer {
        Ok(s) if s.trim() == "ok" => {
            println!("{} mounted on {} (daemon pid {}, log {})", image.display(), mnt.display(), child.id(), log.display());
            Ok(ExitCode::SUCCESS)
        }
        Ok(s) if s.starts_with("error: ") => {
            let _ = child.wait();
            Err(s.trim_start_matches("error: ").trim().to_string())
        }
        Ok(_) => {
            let status = child.wait().map_or_else(|e| e.to_string(), |s| s.to_string());
            Err(format!("the daemon exited ({status}) before mounting; its log ({}):\n{}", log.display(), log_tail()))
        }
        Err(_) => {
            if is_mounted(mnt) {
                return Ok(ExitCode::SUCCESS);
            }
            Err(format!("the daemon did not mount within 60 s (pid {}); its log ({}):\n{}", child.id(), log.display(), log_tail()))
        }
    }
}

/// Whether the daemon `pid` may still hold its device. A zombie's files are closed, but a
/// process's first thread turns zombie as soon as it exits while its other threads, which share
/// its open files, may still be exiting: the device is free only once they are gone too (a
/// mount right after an unmount was refused the device as busy).
fn daemon_running(pid: i32) -> bool {
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat")).map(|s| s.contains(") Z "));
    match zombie {
        Err(_) => false,
        Ok(false) => true,
        Ok(true) => std::fs::read_dir(format!("/proc/{pid}/task")).is_ok_and(|d| d.count() > 1),
    }
}

/// Unmounts `mnt` and waits for its daemon to finish the clean unmount. A stale mount is
/// cleared (lazily) and the user is told the image will recover at its next mount.
pub fn umount(mnt: &Path) -> Result<ExitCode, String> {
    let stale = is_stale(mnt);
    if !stale && !is_mounted(mnt) {
        return Err(if mnt.exists() { format!("{} is not mounted", mnt.display()) } else { format!("{} does not exist", mnt.display()) });
    }
    let pid = std::fs::read_to_string(pid_file(mnt)).ok().and_then(|s| s.trim().parse::<i32>().ok());
    let mut args = vec!["-u"];
    if stale {
        args.push("-z");
    }
    // fusermount3 for an unprivileged mount, umount(8) as root; their messages are kept and
    // shown only when both fail. "Busy" is tried again for up to 2 s: a process that forks
    // holds every open file until its child execs (close-on-exec), a moment in which the
    // mount is busy without anyone using it.
    let said = |o: &std::io::Result<std::process::Output>| o.as_ref().map_or_else(|e| e.to_string(), |o| String::from_utf8_lossy(&o.stderr).lines().next().unwrap_or("").to_string());
    let mut tries = 0;
    loop {
        let fm = Command::new("fusermount3").args(&args).arg(mnt).output();
        if fm.as_ref().is_ok_and(|o| o.status.success()) {
            break;
        }
        let um = Command::new("umount").args(if stale { vec!["-l"] } else { vec![] }).arg(mnt).output();
        if um.as_ref().is_ok_and(|o| o.status.success()) {
            break;
        }
        let why = [said(&um), said(&fm)].into_iter().find(|w| !w.is_empty()).unwrap_or_default();
        tries += 1;
        if !why.contains("busy") || tries >= 20 {
            return Err(format!("could not unmount {}: {why}", mnt.display()));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if stale {
        let _ = std::fs::remove_file(pid_file(mnt));
        println!("cleared the stale mount {}; the image recovers from its journal at the next mount", mnt.display());
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(pid) = pid {
        let deadline = Instant::now() + Duration::from_secs(300);
        while daemon_running(pid) {
            if Instant::now() > deadline {
                return Err(format!("daemon {pid} is still finishing after 300 s"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let _ = std::io::stdout().flush();
    Ok(ExitCode::SUCCESS)
}

/// Prints the counters of a mounted file system: a readable summary, or the JSON the mount
/// serves with `json`.
pub fn stat_mounted(mnt: &Path, json: bool) -> Result<ExitCode, String> {
    let p = mnt.join(crate::fuse::STATS_NAME);
    let s = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e} (is it an Okeanos mount?)", p.display()))?;
    if json {
        print!("{s}");
        return Ok(ExitCode::SUCCESS);
    }
    let v: serde_json::Value = serde_json::from_str(&s).map_err(|e| format!("{}: {e}", p.display()))?;
    print!("{}", summary(&v));
    Ok(ExitCode::SUCCESS)
}

/// `okeanos checkpoint MOUNTPOINT`: opening the mount's hidden checkpoint file runs a
/// checkpoint of everything committed; its contents say what it did (JSON).
pub fn checkpoint_mounted(mnt: &Path, json: bool) -> Result<ExitCode, String> {
    let p = mnt.join(crate::fuse::CHECKPOINT_NAME);
    let s = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e} (is it an Okeanos mount?)", p.display()))?;
    let c: okeanos::stats::CheckpointCounts = serde_json::from_str(&s).map_err(|e| format!("{}: {e}", p.display()))?;
    crate::print_checkpoint(&c, json);
    Ok(ExitCode::SUCCESS)
}

/// Bytes in binary units (as df -h).
pub fn human(b: f64) -> String {
    humansize::format_size(b.max(0.0) as u64, humansize::BINARY)
}

/// Microseconds as µs or ms.
fn dur(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

/// The readable form of a mount's counters.
/// `okeanos stat`'s line on commit sizes: which size of commit held the median handle, and
/// the share of handles in each size that had any. None without commits.
fn commit_sizes_line(v: &serde_json::Value) -> Option<String> {
    let sizes: okeanos::stats::CommitSizes = serde_json::from_value(v.clone()).ok()?;
    let total: u64 = sizes.handles.iter().sum();
    let k = sizes.median_handle_bucket()?;
    let name = |k: usize| match okeanos::stats::CommitSizes::range(k) {
        (1, Some(1)) => "1".to_string(),
        (least, Some(most)) => format!("{least}-{most}"),
        (least, None) => format!("{least}+"),
    };
    let shares: Vec<String> =
        (0..sizes.handles.len()).filter(|&k| sizes.handles[k] > 0).map(|k| format!("{} {:.1}%", name(k), 100.0 * sizes.handles[k] as f64 / total as f64)).collect();
    Some(format!("half the handles went in commits of {} handles or fewer; handles by commit size: {}", name(k), shares.join(", ")))
}

fn summary(v: &serde_json::Value) -> String {
    let n = |k: &str| v[k].as_f64().unwrap_or(0.0);
    let l = &v["sync_latency"];
    let lat = |k: &str| l[k].as_f64().unwrap_or(0.0);
    let payload = n("payload_bytes");
    let per = |b: f64| if payload > 0.0 { format!(" ({:.1} per payload byte)", b / payload) } else { String::new() };
    let mut o = String::new();
    use std::fmt::Write;
    let _ = writeln!(o, "mode          {} — {}", v["mode"].as_str().unwrap_or("?"), v["guarantee"].as_str().unwrap_or(""));
    let _ = writeln!(o, "journal       {}", v["placement"].as_str().unwrap_or("?"));
    if let Some(f) = v["new_blocks"].as_str() {
        let _ = writeln!(o, "new blocks    {f}");
    }
    if let Some(t) = v["fuse_transport"].as_str() {
        let _ = writeln!(
            o,
            "fuse          {t}, {:.0} request threads and {:.0} spares ({:.0} called; at most {:.0} reads waited for the device at once); {:.0} reads served, {:.0} through the rings; {:.0} inodes known to the kernel",
            n("fuse_request_threads"),
            n("fuse_spare_threads"),
            n("fuse_spare_calls"),
            n("fuse_device_waits_most"),
            n("fuse_reads"),
            n("fuse_ring_requests"),
            n("fuse_known_inodes")
        );
    }
    match v["read_only"].as_str() {
        Some(why) => {
            let _ = writeln!(o, "state         READ-ONLY: {why}");
        }
        None => {
            let _ = writeln!(o, "state         read-write");
        }
    }
    let _ = writeln!(o, "syncs         {:.0}, {:.1} per commit; latency p50 {}, p99 {}, p99.9 {}, max {}", n("syncs"), n("syncs_per_commit"), dur(lat("p50_us")), dur(lat("p99_us")), dur(lat("p999_us")), dur(lat("max_us")));
    let _ = writeln!(o, "commits       {:.0} ({:.1} journal blocks each, {:.0} as fast commits, {:.0} of them spans, {:.0} inode notes), checkpoints {:.0}; {:.0} journal steps led by a syncing thread; {:.0} appends staged ({:.0} folds starting a block)", n("commits"), n("journal_blocks_per_commit"), n("fast_commits"), n("fast_spans"), n("inode_notes"), n("checkpoints"), n("led_steps"), n("staged_appends"), n("staged_new_blocks"));
    if let Some(line) = commit_sizes_line(&v["commit_sizes"]) {
        let _ = writeln!(o, "commit sizes  {line}");
    }
    if n("pipelined_flushes") > 0.0 {
        let _ = writeln!(o, "pipeline      {:.0} commits begun beside an earlier commit's flush; {:.0} flushes by flusher threads, {} each", n("pipelined_commits"), n("pipelined_flushes"), dur(n("pipelined_flush_ns") / n("pipelined_flushes") / 1e3));
    }
    let lane = &v["commit_lane"];
    let steps = lane["steps"].as_f64().unwrap_or(0.0);
    if steps > 0.0 {
        let ns = |k: &str| lane[k].as_f64().unwrap_or(0.0);
        let each = |k: &str| dur(ns(k) / steps / 1e3);
        let _ = writeln!(
            o,
            "commit lane   {steps:.0} steps, each: plan {}, write {}, flush {}, finish {}, answer {}, lock waits {}; waited {:.2} s in windows, {:.2} s idle",
            each("plan_ns"),
            each("write_ns"),
            each("flush_ns"),
            each("finish_ns"),
            each("answer_ns"),
            each("lock_ns"),
            ns("window_ns") / 1e9,
            ns("idle_ns") / 1e9
        );
    }
    let adm = &v["admission"];
    let waits: Vec<String> = ["commit", "space", "writeback"]
        .iter()
        .filter_map(|why| {
            let w = &adm[*why];
            let (count, ns) = (w["waits"].as_f64().unwrap_or(0.0), w["ns"].as_f64().unwrap_or(0.0));
            (count > 0.0).then(|| format!("{why} {count:.0} ({:.2} s, {} each)", ns / 1e9, dur(ns / count / 1e3)))
        })
        .collect();
    if !waits.is_empty() {
        let _ = writeln!(o, "admission     operations that waited to start: {}", waits.join(", "));
    }
    let _ = writeln!(o, "written       {} by programs; journal {}{}; final location {}{}", human(payload), human(n("journal_bytes")), per(n("journal_bytes")), human(n("final_bytes")), per(n("final_bytes")));
    for (name, key) in [("fs device", "fs_device"), ("journal dev", "journal_device")] {
        let d = &v[key];
        if d.is_object() {
            let _ = writeln!(o, "{name:<13} {} written in {} writes, {} flushes", human(d["bytes_written"].as_f64().unwrap_or(0.0)), d["writes"].as_u64().unwrap_or(0), d["flushes"].as_u64().unwrap_or(0));
        }
    }
    if let Some(nv) = v["nvm"].as_object() {
        let g = |k: &str| nv.get(k).and_then(|x| x.as_f64()).unwrap_or(0.0);
        let _ = writeln!(o, "nvm           {} ({}, {:.0} slots, {:.0} in use); durable against {}", nv.get("name").and_then(|x| x.as_str()).unwrap_or("?"), human(g("bytes")), g("slots"), g("slots_in_use"), nv.get("durability").and_then(|x| x.as_str()).unwrap_or("?"));
        let _ = writeln!(o, "nvm stores    {} stored, {:.0} fences; {:.0} cached blocks served from NVM", human(n("nvm_bytes")), n("nvm_fences"), g("parked_buffers"));
    }
    if n("remote_bytes") > 0.0 || n("fallbacks") > 0.0 {
        let _ = writeln!(o, "remote        {} sent, {:.0} fallbacks", human(n("remote_bytes")), n("fallbacks"));
    }
    match v["recovery"].as_object() {
        Some(r) => {
            let _ = writeln!(o, "recovery      {} transactions, {} blocks replayed at this mount", r.get("transactions").and_then(|x| x.as_u64()).unwrap_or(0), r.get("blocks_replayed").and_then(|x| x.as_u64()).unwrap_or(0));
        }
        None => {
            let _ = writeln!(o, "recovery      none needed (the image was clean)");
        }
    }
    o
}

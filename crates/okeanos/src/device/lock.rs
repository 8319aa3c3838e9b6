//! One writer at a time: the locks a [`super::FileDevice`] takes on its file for as long as it
//! is open (docs/JOURNALING.md, "Exclusive access").
//!
//! - A device opened for writing takes an exclusive `flock` on the file; opened read-only, a
//!   shared one. `flock` locks belong to the open file description, so a second opener in the
//!   same process conflicts too (POSIX record locks would not), and the kernel drops them when
//!   the last descriptor closes, so a killed holder never leaves a stale lock behind.
//! - A block device opened for writing is also opened with `O_EXCL`, as mount(8) and mkfs do:
//!   the kernel then refuses it while another program holds it exclusively or a kernel file
//!   system is mounted on it.
//! - When the lock is taken, [`holder`] names who has it, from `/proc/locks` (the pid that took
//!   the lock) and that process's command line (for a mount daemon: the mount point).
//!
//! Inspection that must work on a live image (`fsck -n`, `journal dump`, `stat`) opens without a
//! lock and says that the image is in use ([`holder`]).
//!
//! Two hosts sharing one device (a SAN LUN) are not covered: `flock` is local to a kernel. ext4
//! solves that with MMP (a block the mounter rewrites every few seconds, checked by the next
//! mounter after waiting longer than the interval); docs/JOURNALING.md describes how Okeanos
//! would do the same.

use super::DeviceError;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// How many times a busy lock is tried, 10 ms apart, before the opener is refused.
const LOCK_TRIES: u32 = 10;

/// Which lock an opener takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// Readers and writers are refused (a read-write mount, mkfs, recover, fsck that repairs).
    Exclusive,
    /// Other readers are allowed, writers refused (a read-only mount, `cat`, `ls`).
    Shared,
    /// No lock: inspection of a possibly live image.
    None,
}

/// How many times /proc/locks is read for the holder of a busy lock, 10 ms apart.
const HOLDER_LOOKS: usize = 10;

/// Takes `mode` on `file` without waiting. `EWOULDBLOCK` becomes [`DeviceError::InUse`] with
/// the holder named where it can be.
pub(crate) fn lock(file: &File, path: &Path, mode: LockMode) -> Result<(), DeviceError> {
    let op = match mode {
        LockMode::None => return Ok(()),
        LockMode::Exclusive => libc::LOCK_EX,
        LockMode::Shared => libc::LOCK_SH,
    };
    // A lock that is busy is tried again for a moment: a multithreaded program that forks
    // (std::process::Command) lends every open descriptor, and with it the lock of a device
    // just closed, to the child until it execs. A real holder is still there after that.
    let mut tries = 0;
    let e = loop {
        // SAFETY: flock on a descriptor we own; no memory is passed.
        if unsafe { libc::flock(file.as_raw_fd(), op | libc::LOCK_NB) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        tries += 1;
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) || tries >= LOCK_TRIES {
            break e;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let device = path.display().to_string();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        // The lock can be between two holders for a moment (a mount that hands its image to
        // the daemon it starts): /proc/locks then names nobody. Look again a few times.
        let holder = (0..HOLDER_LOOKS)
            .find_map(|k| {
                if k > 0 {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                holder_of(file)
            })
            .unwrap_or_else(|| "another process or another open file of this process".into());
        return Err(DeviceError::InUse { device, holder });
    }
    Err(DeviceError::Io { device, op: "lock", offset: 0, message: e.to_string() })
}

/// Who holds a lock on the file at `path`, if anyone does (`None` also when it cannot tell).
pub fn holder(path: &Path) -> Option<String> {
    let f = File::open(path).ok()?;
    // Probe: a shared lock fails only while somebody holds the exclusive one.
    // SAFETY: flock on a descriptor we own.
    let free = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } == 0;
    if free {
        return None;
    }
    Some(holder_of(&f).unwrap_or_else(|| "another process".into()))
}

/// The process that holds a lock on `file`, from /proc/locks ("1: FLOCK ADVISORY WRITE pid
/// maj:min:ino start end"; the device numbers in hex, the inode in decimal).
fn holder_of(file: &File) -> Option<String> {
    let meta = file.metadata().ok()?;
    let dev = meta.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let want = format!("{major:02x}:{minor:02x}:{}", meta.ino());
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let me = std::process::id();
    for line in locks.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        // "1:" "FLOCK" "ADVISORY" "WRITE" pid dev:ino ...; blocked waiters have "->" first.
        if f.len() < 6 || f[1] == "->" || f[5] != want {
            continue;
        }
        let pid: u32 = f[4].parse().ok()?;
        if pid == me {
            return Some(format!("this process (pid {pid}, another open of the same file)"));
        }
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok().map(|c| {
            c.split(|&b| b == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect::<Vec<_>>().join(" ")
        });
        return Some(match cmd {
            Some(c) if !c.is_empty() => format!("process {pid} ({c})"),
            _ => format!("process {pid}"),
        });
    }
    None
}

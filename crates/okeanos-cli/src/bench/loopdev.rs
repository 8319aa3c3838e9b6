//! Loop devices and kernel file systems for the benchmark: backing files, `losetup`, mkfs,
//! mount, and a guard that unmounts and releases everything when it is dropped — after a
//! normal run, an error, or an interrupt — so a benchmark never leaves a mount or a loop
//! device behind. Device bytes are read from /sys/block/<dev>/stat, the same way for Okeanos
//! on loop devices and for the kernel's file systems.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs a command; its stderr becomes the error.
pub fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd).args(args).output().map_err(|e| format!("{cmd}: {e} (is it installed?)"))?;
    if !out.status.success() {
        return Err(format!("{cmd} {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

pub fn require_root(what: &str) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(format!("{what} needs root (loop devices, mkfs and mount): run it with sudo"));
    }
    Ok(())
}

/// Bytes written and flushes issued by a block device so far (/sys/block/<dev>/stat, the
/// kernel's Documentation/block/stat.rst: field 7 is sectors written, in 512-byte units
/// whatever the device's sector size; field 16 is flush requests completed; fields 12-15 are
/// discards).
pub fn block_stats(dev: &Path) -> Result<(u64, u64), String> {
    let name = dev.file_name().and_then(|n| n.to_str()).ok_or_else(|| format!("{}: not a device path", dev.display()))?;
    let p = format!("/sys/block/{name}/stat");
    let text = std::fs::read_to_string(&p).map_err(|e| format!("{p}: {e}"))?;
    let f: Vec<u64> = text.split_whitespace().map(|x| x.parse().unwrap_or(0)).collect();
    if f.len() < 7 {
        return Err(format!("{p}: unexpected format"));
    }
    Ok((f[6] * 512, f.get(15).copied().unwrap_or(0)))
}

/// Transactions jbd2 committed on a journal device (/proc/fs/jbd2/<dev>*/info, first line).
pub fn jbd2_transactions(dev: &Path) -> Option<u64> {
    let name = dev.file_name()?.to_str()?;
    for e in std::fs::read_dir("/proc/fs/jbd2").ok()?.flatten() {
        let n = e.file_name();
        let n = n.to_string_lossy();
        if n == name || n.starts_with(&format!("{name}-")) {
            let text = std::fs::read_to_string(e.path().join("info")).ok()?;
            return text.split_whitespace().next()?.parse().ok();
        }
    }
    None
}

/// Fast commits ext4 made on file-system device `dev` (/proc/fs/ext4/<dev>/fc_info: the line
/// "N commits"); None without fast commits.
pub fn ext4_fast_commits(dev: &Path) -> Option<u64> {
    let name = dev.file_name()?.to_str()?;
    let text = std::fs::read_to_string(format!("/proc/fs/ext4/{name}/fc_info")).ok()?;
    text.lines().find_map(|l| l.trim().strip_suffix(" commits")?.trim().parse().ok())
}

/// Loop devices over sparse backing files in a temporary directory, and possibly a mounted
/// file system; all released on drop.
pub struct LoopSet {
    pub dir: PathBuf,
    pub fs_dev: PathBuf,
    pub journal_dev: PathBuf,
    pub mountpoint: Option<PathBuf>,
    devices: Vec<PathBuf>,
}

impl LoopSet {
    /// Two loop devices: one of `fs_bytes` for the file system and one of `journal_bytes`
    /// for its external journal or log.
    pub fn new(base: &Path, fs_bytes: u64, journal_bytes: u64) -> Result<LoopSet, String> {
        require_root("a loop-device target")?;
        let dir = base.join(format!("okeanos-bench-{}-{}", std::process::id(), unique()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut set = LoopSet { dir: dir.clone(), fs_dev: PathBuf::new(), journal_dev: PathBuf::new(), mountpoint: None, devices: Vec::new() };
        for (name, bytes) in [("fs.img", fs_bytes), ("journal.img", journal_bytes)] {
            let f = dir.join(name);
            std::fs::File::create(&f).and_then(|h| h.set_len(bytes)).map_err(|e| format!("{}: {e}", f.display()))?;
            let dev = PathBuf::from(run("losetup", &["--find", "--show", f.to_str().unwrap_or_default()])?);
            set.devices.push(dev);
        }
        set.fs_dev = set.devices[0].clone();
        set.journal_dev = set.devices[1].clone();
        Ok(set)
    }

    fn path(p: &Path) -> &str {
        p.to_str().unwrap_or_default()
    }

    /// Makes and mounts a kernel file system: `ext4-journal`, `ext4-ordered`,
    /// `ext4-writeback` (external jbd2 journal), `ext4-fastcommit` (the same with fast commits,
    /// data=ordered: the kernel's best for small fsyncs) or `xfs` (external log).
    pub fn mount_kernel(&mut self, kind: &str) -> Result<PathBuf, String> {
        let (fs, j) = (Self::path(&self.fs_dev).to_string(), Self::path(&self.journal_dev).to_string());
        let mnt = self.dir.join("mnt");
        std::fs::create_dir_all(&mnt).map_err(|e| format!("{}: {e}", mnt.display()))?;
        let m = Self::path(&mnt).to_string();
        match kind {
            "ext4-journal" | "ext4-ordered" | "ext4-writeback" | "ext4-fastcommit" => {
                run("mkfs.ext4", &["-q", "-F", "-O", "journal_dev", "-b", "4096", &j])?;
                let (features, data) = if kind == "ext4-fastcommit" { ("fast_commit", "ordered") } else { ("^fast_commit", &kind[5..]) };
                run("mkfs.ext4", &["-q", "-F", "-b", "4096", "-O", features, "-E", "lazy_itable_init=0,lazy_journal_init=0", "-J", &format!("device={j}"), &fs])?;
                run("mount", &["-t", "ext4", "-o", &format!("data={data}"), &fs, &m])?;
            }
            "xfs" => {
                run("mkfs.xfs", &["-q", "-f", "-l", &format!("logdev={j}"), &fs])?;
                run("mount", &["-t", "xfs", "-o", &format!("logdev={j}"), &fs, &m])?;
            }
            _ => return Err(format!("unknown kernel file system {kind:?}: use ext4-journal, ext4-ordered, ext4-writeback, ext4-fastcommit or xfs")),
        }
        self.mountpoint = Some(mnt.clone());
        Ok(mnt)
    }

    /// Unmounts the kernel file system (its deferred writes happen here).
    pub fn unmount(&mut self) -> Result<(), String> {
        if let Some(m) = self.mountpoint.take() {
            run("umount", &[Self::path(&m)])?;
        }
        Ok(())
    }

    /// (fs bytes written, journal bytes written, flushes) so far.
    pub fn stats(&self) -> Result<(u64, u64, u64), String> {
        let (f, ff) = block_stats(&self.fs_dev)?;
        let (j, jf) = block_stats(&self.journal_dev)?;
        Ok((f, j, ff + jf))
    }
}

impl Drop for LoopSet {
    fn drop(&mut self) {
        if let Some(m) = self.mountpoint.take() {
            if run("umount", &[Self::path(&m)]).is_err() {
                let _ = run("umount", &["-l", Self::path(&m)]);
            }
        }
        for d in self.devices.drain(..).rev() {
            let _ = run("losetup", &["-d", Self::path(&d)]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

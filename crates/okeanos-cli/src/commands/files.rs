//! Files without a mount: `okeanos put`, `cat`, `ls` and `rm` through the library.

use crate::*;

/// Bytes `put` and `cat` move per call.
const CHUNK: usize = 1 << 20;

/// `put` syncs after every this many chunks, so that the data the engine holds until a commit
/// stays bounded too.
const SYNC_CHUNKS: u64 = 8;

/// The buffer cache of `put` and `cat` (the user's `-o cache_blocks=` comes later and wins):
/// with it, the chunks and the sync step, memory stays at a few tens of MiB whatever the file's
/// size (data journaling also holds the blocks it owes to a checkpoint: at most the journal).
pub(crate) const STREAM_CACHE: &str = "cache_blocks=1024";

/// Copies in chunks, syncing every so often so that the engine's dirty data stays bounded too;
/// a failure removes the file it created (nothing half-copied is left under the name).
pub(crate) fn put(img: &ImageArg, source: &Path, dest: &str, options: &str) -> Result<ExitCode, String> {
    use std::io::Read;
    let mut src = std::fs::File::open(source).map_err(|e| format!("{}: {e}", source.display()))?;
    if src.metadata().map_err(|e| format!("{}: {e}", source.display()))?.is_dir() {
        return Err(format!("{} is a directory", source.display()));
    }
    with_mount(img, options, false, |fs| {
        let base = source.file_name().map(|n| n.to_string_lossy().into_owned()).ok_or_else(|| format!("{} has no file name", source.display()))?;
        let into_dir = dest.ends_with('/') || fs.resolve(dest).and_then(|i| fs.getattr(i)).is_ok_and(|a| a.kind == okeanos::format::FileType::Directory);
        let dest = if into_dir { format!("{}/{base}", dest.trim_end_matches('/')) } else { dest.to_string() };
        let existed = fs.resolve(&dest).is_ok();
        let mut copy = || -> Result<(), String> {
            let f = fs.create_file(&dest).map_err(|e| format!("{dest}: {e}"))?;
            let mut buf = vec![0u8; CHUNK];
            let mut off = 0u64;
            loop {
                let n = src.read(&mut buf).map_err(|e| format!("{}: {e}", source.display()))?;
                if n == 0 {
                    break;
                }
                f.write_at(off, &buf[..n]).map_err(|e| format!("{dest}: {e}"))?;
                off += n as u64;
                if off % (SYNC_CHUNKS * CHUNK as u64) < n as u64 {
                    f.fdatasync().map_err(|e| format!("{dest}: {e}"))?;
                }
            }
            f.fsync().map_err(|e| format!("{dest}: {e}"))
        };
        let r = copy();
        if r.is_err() && !existed {
            let _ = fs.remove_path(&dest);
        }
        r
    })?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn cat(fs: &Okeanos, path: &str) -> Result<(), String> {
    use std::io::Write;
    let ino = fs.resolve(path).map_err(|e| format!("{path}: {e}"))?;
    let a = fs.getattr(ino).map_err(|e| format!("{path}: {e}"))?;
    if a.kind == okeanos::format::FileType::Directory {
        return Err(format!("{path}: is a directory"));
    }
    let mut o = std::io::stdout().lock();
    let mut off = 0u64;
    while off < a.size {
        let data = fs.read(ino, off, CHUNK).map_err(|e| format!("{path}: {e}"))?;
        if data.is_empty() {
            break;
        }
        o.write_all(&data).map_err(|e| format!("stdout: {e}"))?;
        off += data.len() as u64;
    }
    o.flush().map_err(|e| format!("stdout: {e}"))
}

pub(crate) fn ls(fs: &Okeanos, path: &str, long: bool) -> Result<(), String> {
    let entries = fs.list_path(path).map_err(|e| format!("{path}: {e}"))?;
    if long {
        outln!("{:<11} {:>5} {:>5} {:>5} {:>12} {:<19} {:>8} NAME", "MODE", "LINKS", "UID", "GID", "SIZE", "MODIFIED (UTC)", "INODE");
    }
    for e in entries {
        let name = String::from_utf8_lossy(&e.name);
        if !long {
            outln!("{name}");
            continue;
        }
        let a = fs.getattr(e.ino).map_err(|e| e.to_string())?;
        let t = match a.kind {
            okeanos::format::FileType::Directory => 'd',
            okeanos::format::FileType::Symlink => 'l',
            okeanos::format::FileType::Regular => '-',
            okeanos::format::FileType::Fifo => 'p',
            okeanos::format::FileType::CharDevice => 'c',
            okeanos::format::FileType::BlockDevice => 'b',
            okeanos::format::FileType::Socket => 's',
        };
        outln!("{t}{:<10} {:>5} {:>5} {:>5} {:>12} {:<19} {:>8} {name}", rwx(a.perm), a.nlink, a.uid, a.gid, a.size, utc(a.mtime_ns), a.ino);
    }
    Ok(())
}

/// "rwxr-xr-x" from permission bits.
fn rwx(perm: u32) -> String {
    (0..9).map(|i| if perm & (1 << (8 - i)) != 0 { ['r', 'w', 'x'][i % 3] } else { '-' }).collect()
}

/// "2026-11-22 16:23:57" from ns since the epoch (UTC; civil-from-days, Howard Hinnant).
fn utc(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

pub(crate) fn rm(fs: &Okeanos, path: &str) -> Result<(), String> {
    if path.trim_matches('/').is_empty() {
        return Err(format!("{path}: cannot remove the root directory"));
    }
    let ino = fs.resolve(path).map_err(|e| format!("{path}: {e}"))?;
    let r = match fs.getattr(ino).map_err(|e| e.to_string())?.kind {
        okeanos::format::FileType::Directory => fs.rmdir_path(path),
        _ => fs.remove_path(path),
    };
    r.map_err(|e| format!("{path}: {e}"))
}

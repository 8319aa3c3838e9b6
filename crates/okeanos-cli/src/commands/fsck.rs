//! `okeanos fsck`: recover the journal, check every structure, and repair what can be
//! repaired; the exit status follows e2fsck's.

use crate::*;

/// fsck's exit codes, as e2fsck's: 0 clean, 1 errors corrected, 4 errors left uncorrected,
/// 8 operational error (nothing could be checked: not an Okeanos image, a missing journal, an
/// image in use without -n).
const FSCK_CORRECTED: u8 = 1;

const FSCK_UNCORRECTED: u8 = 4;

const FSCK_OPERATIONAL: u8 = 8;

pub(crate) fn fsck(img: &ImageArg, no_write: bool) -> Result<ExitCode, String> {
    match fsck_checked(img, no_write) {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("okeanos fsck: {e}");
            Ok(ExitCode::from(FSCK_OPERATIONAL))
        }
    }
}

fn fsck_checked(img: &ImageArg, no_write: bool) -> Result<ExitCode, String> {
    let (mut dev, mut jdev) = if no_write { devices_inspect(img)? } else { devices(img, true).map_err(in_use_hint)? };
    if no_write {
        // A journal that needs recovery (a crashed image, or one mounted now: its journal is
        // live) is replayed into memory, as `ls` and `mount -o ro` do, and what it would give is
        // checked; nothing is written. Not for nvm and remote journals, whose recovery reaches
        // outside the image.
        let mounted = okeanos::device::lock::holder(&img.image);
        if let Some(h) = &mounted {
            outln!("{} is mounted (by {h}): checking what is on disk with its live journal replayed in memory", img.image.display());
        }
        let (sb, _) = okeanos::runtime::open::read_meta(dev.as_ref()).map_err(|e| e.to_string())?;
        if okeanos::runtime::placement::JournalKind::of(&sb).recovers_in_image() {
            let ov: Arc<dyn Device> = Arc::new(okeanos::device::OverlayDevice::new(dev.clone()));
            let jov = jdev.clone().map(|j| Arc::new(okeanos::device::OverlayDevice::new(j)) as Arc<dyn Device>);
            if let Some(r) = okeanos::inspect::recover_image(ov.clone(), jov.clone()).map_err(|e| e.to_string())? {
                let what = if mounted.is_some() { "the live journal" } else { "the journal needs recovery:" };
                outln!("{what} replayed in memory, nothing written ({} transactions, {} blocks)", r.transactions, r.blocks_replayed);
                if let Some(d) = &r.damage {
                    outln!("DAMAGE: {d}");
                }
                (dev, jdev) = (ov, jov);
            }
        }
    } else if let Some(r) = okeanos::inspect::recover_image(dev.clone(), jdev.clone()).map_err(|e| e.to_string())? {
        outln!("journal replayed: {} transactions ({}..={}), {} blocks", r.transactions, r.first_tid, r.last_tid, r.blocks_replayed);
        if let Some(d) = &r.damage {
            outln!("DAMAGE: {d}");
        }
    }
    let r = okeanos::fsck(dev.clone(), jdev.clone());
    if let Some(why) = &r.unreadable {
        return Err(why.clone());
    }
    outln!("journal: {}", r.journal);
    outln!(
        "{}, {}, {}, {}; {} and {} in use",
        plural(r.files, "file", "files"),
        plural(r.directories, "directory", "directories"),
        plural(r.symlinks, "symlink", "symlinks"),
        plural(r.orphans, "orphan", "orphans"),
        plural(r.blocks_used, "block", "blocks"),
        plural(r.inodes_used, "inode", "inodes")
    );
    if !no_write && r.only_error_state() {
        okeanos::inspect::clear_errors(dev, jdev).map_err(|e| e.to_string())?;
        outln!("every structure checks out; cleared the error state ({})", r.error_state.as_deref().unwrap_or(""));
        outln!("the file system may be mounted read-write again");
        return Ok(ExitCode::from(FSCK_CORRECTED));
    }
    for p in &r.problems {
        outln!("PROBLEM: {p}");
    }
    if r.is_clean() {
        outln!("clean");
        return Ok(ExitCode::SUCCESS);
    }
    outln!("{}", plural(r.problems.len() as u64, "problem", "problems"));
    Ok(ExitCode::from(FSCK_UNCORRECTED))
}

//! The crash-test harness shared by the crash tests: a recorded run with the history of each
//! file, the guarantee check of each content policy, and the enumeration of crash states
//! (DESIGN.md section 3).
#![allow(dead_code)]

use okeanos::journal::content::ContentConfig;
use okeanos::{CrashRecorder, DataMode, Device, MemDevice, MountOptions, Okeanos};
use std::collections::HashMap;
use std::sync::Arc;

pub use okeanos::sim::check::History;

pub struct Run {
    pub recorder: Arc<CrashRecorder>,
    pub files: HashMap<String, History>,
    /// The "overwrite" file (data mode atomicity): versions are whole rewrites of one range.
    pub end_events: usize,
    /// Files whose contents writeback need not keep beyond a sync (overwritten in place).
    pub overwritten: Vec<String>,
}

/// Checks the guarantee of `mode` on a recovered file system, for a crash after `k` events.
pub fn check(mode: DataMode, run: &Run, k: usize, fs: &Okeanos) -> Result<(), String> {
    okeanos::sim::check::check(mode, &run.files, &run.overwritten, k, fs)
}

/// Mounts a crash image (recovery), checks the guarantee, unmounts and runs fsck.
pub fn recover_and_check(cfg: ContentConfig, run: &Run, k: usize, image: Vec<u8>) -> Result<(), String> {
    let dev = Arc::new(MemDevice::from_bytes(image));
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, MountOptions::default().content_config(cfg)).map_err(|e| format!("mount: {e}"))?;
    check(cfg.mode, run, k, &fs)?;
    fs.unmount().map_err(|e| format!("unmount: {e}"))?;
    let r = okeanos::fsck(dev, None);
    if !r.is_clean() {
        return Err(format!("fsck: {:?}", r.problems));
    }
    Ok(())
}

/// Crashes in the middle of recovering `image` at every event of that recovery, then recovers
/// again and checks.
pub fn crash_during_recovery(cfg: ContentConfig, run: &Run, k: usize, image: Vec<u8>) -> Result<usize, String> {
    let rec = CrashRecorder::new();
    let dev = Arc::new(rec.device("fs", image));
    let fs = Okeanos::mount(dev as Arc<dyn Device>, None, MountOptions::default().content_config(cfg)).map_err(|e| format!("first recovery: {e}"))?;
    drop(fs);
    let mut n = 0;
    for j in 0..=rec.event_count() {
        for st in rec.states(j, 2, 1, 7) {
            let img = rec.build(&st).remove(0);
            recover_and_check(cfg, run, k, img).map_err(|e| format!("second crash {}: {e}", st.label))?;
            n += 1;
        }
    }
    Ok(n)
}

pub struct Outcome {
    pub states: usize,
    pub violations: Vec<String>,
}

pub fn enumerate(cfg: ContentConfig, run: &Run, max_points: usize, second_crash_every: usize) -> Outcome {
    let events = run.recorder.events();
    let flush_points: Vec<usize> = events.iter().enumerate().filter(|(_, e)| matches!(e, okeanos::device::CrashEvent::Flush { .. })).map(|(i, _)| i + 1).collect();
    let stride = (run.end_events / max_points).max(1);
    let mut points: Vec<usize> = (0..=run.end_events).step_by(stride).collect();
    points.extend(flush_points);
    points.extend(run.files.values().flat_map(|h| h.acks.iter().map(|a| a.0)));
    points.sort_unstable();
    points.dedup();
    let mut out = Outcome { states: 0, violations: Vec::new() };
    for (pi, &k) in points.iter().enumerate() {
        for (si, st) in run.recorder.states(k, 3, 2, k as u64).into_iter().enumerate() {
            let image = run.recorder.build(&st).remove(0);
            out.states += 1;
            let res = if second_crash_every > 0 && si == 1 && pi % second_crash_every == 0 {
                crash_during_recovery(cfg, run, k, image).map(|n| out.states += n)
            } else {
                recover_and_check(cfg, run, k, image)
            };
            if let Err(e) = res {
                out.violations.push(format!("{} {}: {e}", cfg.name(), st.label));
            }
        }
    }
    out
}


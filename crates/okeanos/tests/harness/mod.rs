//! The crash-test harness shared by the crash tests: a recorded run with the history of each
//! file, the guarantee check of each content policy, and the enumeration of crash states
//! (DESIGN.md section 3).
#![allow(dead_code)]

use okeanos::journal::content::ContentConfig;
use okeanos::{CrashRecorder, DataMode, Device, MemDevice, MountOptions, Okeanos};
use std::collections::HashMap;
use std::sync::Arc;

/// One stream file's history: its versions, when each write started (event count), and the
/// fsyncs acknowledged (event count at return, version synced).
#[derive(Default, Clone)]
pub struct History {
    pub created_at: usize,
    pub versions: Vec<(usize, Vec<u8>)>,
    pub acks: Vec<(usize, usize)>,
}

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
    for (name, h) in &run.files {
        let synced = h.acks.iter().filter(|(at, _)| *at <= k).map(|&(_, v)| v).max();
        let content = match fs.resolve(name) {
            Ok(ino) => {
                let size = fs.getattr(ino).map_err(|e| e.to_string())?.size;
                fs.read(ino, 0, size as usize).map_err(|e| format!("{name}: read: {e}"))?
            }
            Err(okeanos::FsError::NotFound) => {
                if synced.is_some() {
                    return Err(format!("{name}: synced but missing after recovery"));
                }
                continue;
            }
            Err(e) => return Err(format!("{name}: {e}")),
        };
        if h.created_at > k {
            return Err(format!("{name}: exists although it was created after the crash point"));
        }
        let s = synced.unwrap_or(0);
        // Versions the recovered file may show: the synced one and any later one begun before
        // the crash.
        let possible: Vec<&Vec<u8>> = h.versions.iter().skip(s).filter(|(at, _)| *at <= k).map(|(_, v)| v).collect();
        let floor = synced.map_or(0, |v| h.versions[v].1.len());
        if content.len() < floor {
            return Err(format!("{name}: {} bytes after recovery, {floor} were synced", content.len()));
        }
        match mode {
            // Data journaling: each write atomic, so the content is exactly one version.
            DataMode::Data | DataMode::Wasteless => {
                if !possible.iter().any(|v| **v == content) {
                    return Err(format!("{name}: {} bytes recovered match no version at or after the synced one", content.len()));
                }
            }
            // No stale data: every byte was written by one of the possible versions (or is a
            // hole's zero), and the size is one of theirs.
            DataMode::Ordered | DataMode::Selective => {
                if !possible.iter().any(|v| v.len() == content.len()) {
                    return Err(format!("{name}: recovered size {} is no version's size", content.len()));
                }
                if let Some(i) = (0..content.len()).find(|&i| content[i] != 0 && !possible.iter().any(|v| v.get(i) == Some(&content[i]))) {
                    return Err(format!("{name}: byte {i} ({}) was never written there", content[i]));
                }
            }
            DataMode::Writeback => {
                let full = &h.versions.last().unwrap().1;
                if !run.overwritten.contains(name) && content[..floor] != full[..floor] {
                    return Err(format!("{name}: synced bytes differ after recovery"));
                }
            }
        }
    }
    Ok(())
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


//! Crash tests: every crash state the model allows (DESIGN.md section 3), recovered and
//! checked against the content policy's guarantee and fsck.
//!
//! A workload runs on recording devices. After each operation the test notes how many device
//! events (writes and flushes) had happened, and after each fsync which file versions it
//! acknowledged. Then, for every event boundary (all flushes, writes sampled), it builds crash
//! states — unflushed writes all kept, all lost, each lost alone, each torn at sector
//! boundaries alone, and seeded mixtures — mounts each (recovery), checks the guarantee, checks
//! fsck, and for some states crashes again at every event of that recovery and recovers again.
//! A canary mount that skips the commit flush must make the checks fail.

mod common;
use common::*;
use okeanos::journal::content::ContentConfig;
use okeanos::{CrashRecorder, DataMode, Device, MemDevice, MountOptions, Okeanos};
use std::collections::HashMap;
use std::sync::Arc;

/// One stream file's history: its versions, when each write started (event count), and the
/// fsyncs acknowledged (event count at return, version synced).
#[derive(Default, Clone)]
struct History {
    created_at: usize,
    versions: Vec<(usize, Vec<u8>)>,
    acks: Vec<(usize, usize)>,
}

struct Run {
    recorder: Arc<CrashRecorder>,
    files: HashMap<String, History>,
    /// The "overwrite" file (data mode atomicity): versions are whole rewrites of one range.
    end_events: usize,
}

const STREAMS: usize = 3;
const OW: &str = "/s/overwritten";

fn workload(cfg: ContentConfig, journal_blocks: u64, ops: usize, skip_flush: bool, seed: u64) -> Run {
    let base = mem_fs(8 * MB, journal_blocks);
    let recorder = CrashRecorder::new();
    let dev = Arc::new(recorder.device("fs", base.snapshot()));
    let mut o = MountOptions::default().content_config(cfg);
    o.fault_skip_commit_flush = skip_flush;
    let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o).unwrap();
    let mut files: HashMap<String, History> = HashMap::new();
    let mut handles = Vec::new();
    fs.mkdir_path("/s").unwrap();
    for s in 0..STREAMS {
        let name = format!("/s/stream{s}");
        let at = recorder.event_count();
        handles.push(fs.create_file(&name).unwrap());
        files.insert(name, History { created_at: at, versions: vec![(at, Vec::new())], acks: vec![] });
    }
    // A file overwritten in place at random offsets (partial and whole blocks).
    let at = recorder.event_count();
    let ow = fs.create_file(OW).unwrap();
    files.insert(OW.to_string(), History { created_at: at, versions: vec![(at, Vec::new())], acks: vec![] });
    let mut rng = seed | 1;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for k in 0..ops {
        let r = next();
        let s = (r % STREAMS as u64) as usize;
        let name = format!("/s/stream{s}");
        match (r >> 8) % 12 {
            // Overwrites at random offsets, partial and whole blocks.
            10 | 11 => {
                let len = [50, 300, 3000, 4096, 5000][((r >> 16) % 5) as usize];
                let off = (r >> 32) % 12_000;
                let data = record(7, k, len);
                let at = recorder.event_count();
                ow.write_at(off, &data).unwrap();
                let h = files.get_mut(OW).unwrap();
                let mut v = h.versions.last().unwrap().1.clone();
                if v.len() < off as usize + len {
                    v.resize(off as usize + len, 0);
                }
                v[off as usize..off as usize + len].copy_from_slice(&data);
                h.versions.push((at, v));
                if (r >> 24) % 3 == 0 {
                    ow.fsync().unwrap();
                    let h = files.get_mut(OW).unwrap();
                    h.acks.push((recorder.event_count(), h.versions.len() - 1));
                }
            }
            // Appends of varied sizes, most followed by an fsync or fdatasync.
            0..=6 => {
                let len = [100, 128, 700, 3000, 4096, 6000][((r >> 16) % 6) as usize];
                let data = record(s, k, len);
                let at = recorder.event_count();
                handles[s].append(&data).unwrap();
                let h = files.get_mut(&name).unwrap();
                let mut v = h.versions.last().unwrap().1.clone();
                v.extend_from_slice(&data);
                h.versions.push((at, v));
                if (r >> 24) % 4 != 0 {
                    if (r >> 26) % 2 == 0 { handles[s].fsync().unwrap() } else { handles[s].fdatasync().unwrap() }
                    let h = files.get_mut(&name).unwrap();
                    h.acks.push((recorder.event_count(), h.versions.len() - 1));
                }
            }
            // Metadata churn beside the streams: create, write, rename, unlink, mkdir/rmdir.
            7 => {
                let f = fs.create_file(&format!("/tmp{k}")).unwrap();
                f.write_at(0, &record(9, k, 5000)).unwrap();
                drop(f);
                fs.rename_path(&format!("/tmp{k}"), &format!("/s/renamed{k}")).unwrap();
            }
            8 => {
                let victims: Vec<String> = fs.list_path("/s").unwrap().into_iter().map(|e| String::from_utf8(e.name).unwrap()).filter(|n| n.starts_with("renamed")).collect();
                if let Some(v) = victims.first() {
                    fs.remove_path(&format!("/s/{v}")).unwrap();
                }
                fs.mkdir_path(&format!("/dir{k}")).unwrap();
                fs.rmdir_path(&format!("/dir{k}")).unwrap();
            }
            _ => {
                let f = fs.create_file("/trunc").unwrap();
                f.write_at(0, &record(8, k, 9000)).unwrap();
                f.set_len((r >> 16) % 9000).unwrap();
                f.fsync().unwrap();
            }
        }
    }
    drop(handles);
    drop(ow);
    fs.sync().unwrap();
    let end_events = recorder.event_count();
    drop(fs);
    Run { recorder, files, end_events }
}

/// Checks the guarantee of `mode` on a recovered file system, for a crash after `k` events.
fn check(mode: DataMode, run: &Run, k: usize, fs: &Okeanos) -> Result<(), String> {
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
                if name != OW && content[..floor] != full[..floor] {
                    return Err(format!("{name}: synced bytes differ after recovery"));
                }
            }
        }
    }
    Ok(())
}

/// Mounts a crash image (recovery), checks the guarantee, unmounts and runs fsck.
fn recover_and_check(cfg: ContentConfig, run: &Run, k: usize, image: Vec<u8>) -> Result<(), String> {
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
fn crash_during_recovery(cfg: ContentConfig, run: &Run, k: usize, image: Vec<u8>) -> Result<usize, String> {
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

struct Outcome {
    states: usize,
    violations: Vec<String>,
}

fn enumerate(cfg: ContentConfig, run: &Run, max_points: usize, second_crash_every: usize) -> Outcome {
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

fn crash_test(policy: &str) {
    let cfg = ContentConfig::parse(policy).unwrap();
    // A 256-block journal wraps many times in this workload, so checkpoints under pressure and
    // stale blocks from earlier passes are part of every run.
    let run = workload(cfg, 256, 120, false, 0x5eed + cfg.mode as u64);
    let events = run.recorder.events().len();
    let out = enumerate(cfg, &run, 250, 25);
    assert!(out.violations.is_empty(), "{} violations in {} crash states, first: {:#?}", out.violations.len(), out.states, &out.violations[..out.violations.len().min(5)]);
    assert!(out.states > 500, "enumerated only {} crash states", out.states);
    eprintln!("{policy}: {} crash states over {events} events, no violation", out.states);
}

#[test]
fn crash_states_writeback() {
    crash_test("writeback");
}

#[test]
fn crash_states_ordered() {
    crash_test("ordered");
}

#[test]
fn crash_states_data() {
    crash_test("data");
}

#[test]
fn crash_states_wasteless() {
    crash_test("wasteless");
}

#[test]
fn crash_states_wasteless_dmeta() {
    crash_test("wasteless+dmeta");
}

#[test]
fn crash_states_selective() {
    crash_test("selective");
}

#[test]
fn crash_states_selective_dmeta() {
    crash_test("selective+dmeta");
}

/// The canary: skipping the flush that makes a commit durable must be caught.
#[test]
fn canary_skipped_commit_flush_is_caught() {
    for policy in ["writeback", "ordered", "data", "wasteless", "selective+dmeta"] {
        let cfg = ContentConfig::parse(policy).unwrap();
        let run = workload(cfg, 256, 40, true, 0xca7 + cfg.mode as u64);
        let out = enumerate(cfg, &run, 60, 0);
        assert!(!out.violations.is_empty(), "{policy}: the crash tests did not notice a missing commit flush ({} states)", out.states);
    }
}

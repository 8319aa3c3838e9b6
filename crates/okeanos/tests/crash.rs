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
mod harness;
use common::*;
use harness::{enumerate, History, Run};
use okeanos::journal::content::ContentConfig;
use okeanos::{CrashRecorder, Device, MountOptions, Okeanos};
use std::collections::HashMap;
use std::sync::Arc;

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
                files.get_mut(&name).unwrap().appended(at, &data);
                if (r >> 24) % 4 != 0 {
                    if (r >> 26) % 2 == 0 { handles[s].fsync().unwrap() } else { handles[s].fdatasync().unwrap() }
                    files.get_mut(&name).unwrap().synced(recorder.event_count());
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
    Run { recorder, files, end_events, overwritten: vec![OW.to_string()] }
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

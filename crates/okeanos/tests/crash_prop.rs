//! Property test: random partial writes over several files under wasteless and selective,
//! with and without differential metadata, recorded and recovered from every crash state at
//! every flush and sync acknowledgement; each recovered file must match the model (exactly one
//! version under wasteless, only ever-written bytes under selective), and fsck must pass.

mod common;
mod harness;
use common::*;
use harness::{enumerate, History, Run};
use okeanos::journal::content::ContentConfig;
use okeanos::{CrashRecorder, Device, MountOptions, Okeanos};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;

const FILES: usize = 4;
const POLICIES: [&str; 4] = ["wasteless", "wasteless+dmeta", "selective", "selective+dmeta"];

#[derive(Debug, Clone)]
enum Op {
    Write { file: usize, off: u32, len: u32, seed: u8 },
    Append { file: usize, len: u32, seed: u8 },
    Fsync { file: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..FILES, 0u32..20_000, 1u32..6000, any::<u8>()).prop_map(|(file, off, len, seed)| Op::Write { file, off, len, seed }),
        3 => (0..FILES, 1u32..3000, any::<u8>()).prop_map(|(file, len, seed)| Op::Append { file, len, seed }),
        3 => (0..FILES).prop_map(|file| Op::Fsync { file }),
    ]
}

fn run_ops(cfg: ContentConfig, ops: &[Op]) -> Run {
    let base = mem_fs(8 * MB, 256);
    let recorder = CrashRecorder::new();
    let dev = Arc::new(recorder.device("fs", base.snapshot()));
    let fs = Okeanos::mount(dev as Arc<dyn Device>, None, MountOptions::default().content_config(cfg)).unwrap();
    let mut files = BTreeMap::new();
    let mut handles = Vec::new();
    for f in 0..FILES {
        let name = format!("/f{f}");
        let at = recorder.event_count();
        handles.push(fs.create_file(&name).unwrap());
        files.insert(name, History::new(at));
    }
    for (k, op) in ops.iter().enumerate() {
        match *op {
            Op::Write { file, len, seed, .. } | Op::Append { file, len, seed } => {
                let name = format!("/f{file}");
                let h = files.get_mut(&name).unwrap();
                let mut v = h.versions.last().unwrap().1.clone();
                let off = match *op {
                    Op::Write { off, .. } => off as usize,
                    _ => v.len(),
                };
                let data = record(seed as usize, k, len as usize);
                let at = recorder.event_count();
                handles[file].write_at(off as u64, &data).unwrap();
                if v.len() < off + data.len() {
                    v.resize(off + data.len(), 0);
                }
                v[off..off + data.len()].copy_from_slice(&data);
                h.versions.push((at, v));
            }
            Op::Fsync { file } => {
                handles[file].fsync().unwrap();
                let h = files.get_mut(&format!("/f{file}")).unwrap();
                h.acks.push((recorder.event_count(), h.versions.len() - 1));
            }
        }
    }
    drop(handles);
    fs.sync().unwrap();
    let end_events = recorder.event_count();
    drop(fs);
    Run { pipelined_commits: 0, dirs_held: 0, staged_appends: 0, staged_new_blocks: 0, commit_in_place_tagged_blocks: 0, recorder, files, end_events, overwritten: vec![], nvm: false, external: false, near_head: None, checkpoint: Default::default(), snapshots: 0, early_writes: 0, datasyncs_in_place: 0, fast_commits: 0, fast_spans: 0, inode_notes: 0, joined_blocks: 0, commit_in_place_blocks: 0, recovery_faults: Default::default() }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, max_shrink_iters: 40, ..ProptestConfig::default() })]
    #[test]
    fn partial_writes_recover_to_the_model(policy in 0usize..POLICIES.len(), ops in proptest::collection::vec(op(), 1..30)) {
        let cfg = ContentConfig::parse(POLICIES[policy]).unwrap();
        let run = run_ops(cfg, &ops);
        let out = enumerate(cfg, &run, 40, 0);
        // At least one crash state at every acknowledged sync, and the run's start and end.
        let acks: usize = run.files.values().map(|h| h.acks.len()).sum();
        prop_assert!(out.states > acks + 1, "{}: only {} crash states for {} acknowledged syncs", POLICIES[policy], out.states, acks);
        prop_assert!(out.violations.is_empty(), "{}: {} violations in {} states, first: {:?}", POLICIES[policy], out.violations.len(), out.states, out.violations.first());
    }
}

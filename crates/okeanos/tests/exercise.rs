//! The model-based exerciser (okeanos::exercise) through the library: random writes at holes,
//! appends, truncates, every fallocate mode, copies, renames, links, unlinks and fsyncs, checked
//! against the model as they go, under every content policy and every placement; then unmount,
//! fsck, remount and the same contents again. The seed is printed on failure; set
//! OKEANOS_EXERCISE_SEED and OKEANOS_EXERCISE_OPS for a longer run (docs/JOURNALING.md).

mod common;
use common::*;
use okeanos::exercise::{self, EngineTarget};
use okeanos::journal::content::ContentConfig;
use okeanos::nvm::{MemNvm, NvmHandle};
use okeanos::remote::memory::{MemLog, MemServer};
use okeanos::remote::{Connector, Link};
use okeanos::{Device, MemDevice, MkfsOptions, MountOptions, Okeanos};
use std::sync::{Arc, Mutex};

const POLICIES: [&str; 7] = ["writeback", "ordered", "data", "wasteless", "wasteless+dmeta", "selective", "selective+dmeta"];

fn seed_and_ops(default_ops: usize) -> (u64, usize) {
    let seed = std::env::var("OKEANOS_EXERCISE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x0ceA_05);
    let ops = std::env::var("OKEANOS_EXERCISE_OPS").ok().and_then(|s| s.parse().ok()).unwrap_or(default_ops);
    (seed, ops)
}

/// One placement: makes a file system and mounts it again as often as asked.
struct Place {
    name: &'static str,
    dev: Arc<MemDevice>,
    journal: Option<Arc<MemDevice>>,
    nvm: Option<Arc<MemNvm>>,
    remote: Option<Arc<Mutex<MemLog>>>,
}

impl Place {
    fn new(name: &'static str) -> Place {
        let dev = Arc::new(MemDevice::new(32 * MB));
        let mut p = Place { name, dev: dev.clone(), journal: None, nvm: None, remote: None };
        let small = MkfsOptions { journal_blocks: 1024, ..Default::default() };
        match name {
            "internal" => drop(Okeanos::mkfs(dev.as_ref(), None, &small).unwrap()),
            "external" => {
                let j = Arc::new(MemDevice::new(8 * MB));
                Okeanos::mkfs(dev.as_ref(), Some(j.as_ref() as &dyn Device), &MkfsOptions { external_journal: true, ..small }).unwrap();
                p.journal = Some(j);
            }
            "manylogs" => {
                Okeanos::mkfs(dev.as_ref(), None, &MkfsOptions { manylogs: true, blocks_per_group: Some(1024), log_area_blocks: 256, ..Default::default() }).unwrap();
            }
            "nvm" => {
                let nvm = Arc::new(MemNvm::new(20 << 20));
                Okeanos::mkfs_nvm(dev.as_ref(), nvm.as_ref(), &MkfsOptions { nvm_path: Some("nvm".into()), ..small }).unwrap();
                p.nvm = Some(nvm);
            }
            "remote" => {
                Okeanos::mkfs(dev.as_ref(), None, &MkfsOptions { remote_server: Some("memory:1".into()), ..small }).unwrap();
                p.remote = Some(Arc::new(Mutex::new(MemLog::default())));
            }
            other => panic!("no placement {other}"),
        }
        p
    }

    fn mount(&self, policy: &str) -> Okeanos {
        let mut o = MountOptions::default().content_config(ContentConfig::parse(policy).unwrap());
        o.nvm = self.nvm.clone().map(|n| NvmHandle(n as Arc<dyn okeanos::nvm::Nvm>));
        if let Some(log) = &self.remote {
            let log = log.clone();
            o.remote_connector = Some(Connector(Arc::new(move |_| Ok(Box::new(MemServer::new(log.clone(), None)) as Box<dyn Link>))));
            o.remote_host = Some("exerciser".into());
        }
        let j = self.journal.clone().map(|j| j as Arc<dyn Device>);
        Okeanos::mount(self.dev.clone() as Arc<dyn Device>, j, o).unwrap_or_else(|e| panic!("{} mount: {e}", self.name))
    }
}

fn exercise_one(place: &'static str, policy: &str, seed: u64, ops: usize) {
    let p = Place::new(place);
    let fs = p.mount(policy);
    fs.mkdir_path("/x").unwrap();
    let mut t = EngineTarget { fs: fs.clone(), dir: "/x".into(), label: format!("{place}, data={policy}") };
    let s = exercise::run(&mut t, seed, ops, false).unwrap_or_else(|e| panic!("{e}\n(repeat: OKEANOS_EXERCISE_SEED={seed} OKEANOS_EXERCISE_OPS={ops})"));
    let before = exercise::snapshot(&mut t).unwrap();
    drop(t);
    fs.unmount().unwrap_or_else(|e| panic!("{place} {policy} seed {seed}: unmount: {e}"));
    let r = okeanos::fsck(p.dev.clone(), p.journal.clone().map(|j| j as Arc<dyn Device>));
    assert!(r.is_clean(), "{place} {policy} seed {seed}: fsck: {:?}", r.problems);
    let fs = p.mount(policy);
    let mut t = EngineTarget { fs: fs.clone(), dir: "/x".into(), label: format!("{place}, data={policy}, remounted") };
    exercise::recheck(&mut t, &before).unwrap_or_else(|e| panic!("{place} {policy} seed {seed}: {e}"));
    drop(t);
    fs.unmount().unwrap();
    assert!(s.checks > 1, "{place} {policy}: the run checked nothing");
}

#[test]
fn every_policy_on_the_internal_journal() {
    let (seed, ops) = seed_and_ops(1500);
    for (k, policy) in POLICIES.iter().enumerate() {
        exercise_one("internal", policy, seed + k as u64, ops);
    }
}

#[test]
fn every_placement() {
    let (seed, ops) = seed_and_ops(800);
    for (k, place) in ["external", "manylogs", "nvm", "remote"].into_iter().enumerate() {
        for (j, policy) in ["ordered", "wasteless+dmeta", "selective"].iter().enumerate() {
            exercise_one(place, policy, seed + 100 * k as u64 + j as u64, ops);
        }
    }
}

//! Documented figures that the code must still produce: quick, deterministic simulator runs
//! compared field by field with the JSON committed under docs/sim/ (scripts/figures.sh
//! regenerates every figure). A change that moves one of these fails here until the document
//! and its JSON move with it, explained in docs/SIMULATION.md.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_okeanos");

/// Fields that measure the machine the simulation ran on, not the simulated system.
const MEASURED_HERE: &[&str] = &["wall_s", "cpu_s"];

/// Runs `okeanos sim ...` with `--json` into a temporary file and compares its runs with the
/// committed file's.
fn same_as_committed(args: &[&str], committed: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let o = Command::new(BIN).args(args).arg("--json").arg(&out).output().unwrap();
    assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/sim/").to_string() + committed;
    let want: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let got: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let (w, g) = (want["runs"].as_array().unwrap(), got["runs"].as_array().unwrap());
    assert_eq!(w.len(), g.len(), "{committed}: {} runs committed, {} now", w.len(), g.len());
    for (i, (a, b)) in w.iter().zip(g).enumerate() {
        for (k, v) in a.as_object().unwrap() {
            if MEASURED_HERE.contains(&k.as_str()) {
                continue;
            }
            assert_eq!(Some(v), b.get(k), "{committed}, run {i}, field {k}: the documented figure moved (rerun scripts/figures.sh and explain the change in docs/SIMULATION.md)");
        }
    }
}

/// The Manylogs paper's Fig. 7 (a checkpoint after lazy logging), seed 1.
#[test]
fn lazy_checkpoint_figure_is_reproduced() {
    same_as_committed(&["sim", "lazy-checkpoint", "--hot-blocks", "32", "--cache-blocks", "2048", "--seed", "1"], "lazy-checkpoint-seed1.json");
}

/// The remote-journaling thesis' Figure 4, the journal on a disk of its own (the checkpoint
/// lane beside commits, batching, the ordered and data paths): Postmark, 10 clients.
#[test]
fn remote_journaling_postmark_external_is_reproduced() {
    same_as_committed(
        &[
            "sim", "postmark", "--journal", "external", "--journal-size", "32M", "--fs-size", "2G", "--modes", "writeback,ordered,data", "--streams", "10", "--size", "512", "--min-file", "500",
            "--max-file", "1000", "--files", "1000", "--transactions", "5000",
        ],
        "remote-postmark-external.json",
    );
}

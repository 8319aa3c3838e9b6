//! `okeanos bench` and `okeanos sim` end to end: the byte counts a benchmark reports are the
//! device layer's own, the JSON has the documented fields, plots are written, the simulator
//! is deterministic, and bad flags get clear errors.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn okeanos(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_okeanos")).args(args).output().expect("run okeanos")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn runs(path: &Path) -> Vec<Value> {
    let v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    v["runs"].as_array().unwrap().clone()
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} missing in {v}"))
}

/// Checks a run's bytes against the devices' own counts and its fields against the issue.
fn check_counts(r: &Value) {
    assert!(r["error"].is_null(), "{}", r["error"]);
    for k in ["mode", "target", "streams", "size", "rate", "duration_s", "payload_bytes", "journal_bytes", "final_bytes", "syncs", "commits", "ops_per_s", "cpu_s"] {
        assert!(!r[k].is_null(), "field {k} missing: {r}");
    }
    for k in ["mean", "p50", "p99", "p999"] {
        assert!(r["sync_latency_us"][k].as_f64().unwrap() > 0.0, "latency {k}: {r}");
    }
    let dev = &r["device"];
    assert_eq!(u(r, "journal_bytes"), u(dev, "journal_written"), "journal bytes vs the journal device's own count: {r}");
    assert_eq!(u(r, "final_bytes"), u(dev, "fs_written"), "final bytes vs the file-system device's own count: {r}");
    let kinds: u64 = r["per_kind"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(kinds, u(r, "journal_bytes") + u(r, "final_bytes"), "per-kind bytes add up: {r}");
    // Unmount writes what was deferred: the totals include the during-run figures.
    assert!(u(r, "journal_bytes") >= u(&r["during"], "journal_bytes") && u(r, "final_bytes") >= u(&r["during"], "final_bytes"));
    assert_eq!(u(r, "payload_bytes"), u(r, "ops") * u(r, "size"));
    assert!(u(r, "syncs") > 0 && u(r, "commits") > 0);
}

#[test]
fn benchmark_byte_counts_equal_the_device_layers_counts() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("runs.json");
    let csv = dir.path().join("runs.csv");
    let plots = dir.path().join("plots");
    let d = dir.path().to_str().unwrap();
    let o = okeanos(&[
        "bench", "multistream", "--target", "engine:external", "--modes", "ordered,data,wasteless+dmeta,selective", "--streams", "1,4", "--size", "300",
        "--duration", "700ms", "--dir", d, "--fs-size", "256M", "--journal-size", "16M", "--quiet",
        "--json", json.to_str().unwrap(), "--csv", csv.to_str().unwrap(), "--plot", plots.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let rs = runs(&json);
    assert_eq!(rs.len(), 8);
    for r in &rs {
        check_counts(r);
        assert_eq!(r["device"]["source"], "engine devices");
        // What the mount chose by itself is in the run: how wasteless wrote new whole blocks
        // (fresh_blocks=auto follows whether the device seeks), nothing for the other modes.
        let nb = r["new_blocks"].as_str();
        if r["mode"] == "wasteless+dmeta" {
            let want = match r["fs_seeks"].as_bool() {
                Some(false) => "in place",
                _ => "logged",
            };
            assert!(nb.is_some_and(|s| s.starts_with(want)), "new_blocks {nb:?} with fs_seeks {}: {r}", r["fs_seeks"]);
        } else {
            assert_eq!(nb, None, "{r}");
        }
    }
    assert_eq!(std::fs::read_to_string(&csv).unwrap().lines().count(), 9, "a header and a row per run");
    for (m, quantity) in [("bytes", "Device bytes per payload byte"), ("journal", "Journal throughput"), ("final", "Final-location throughput"), ("latency", "Sync latency")] {
        for ext in ["png", "svg"] {
            let p = plots.join(format!("multistream-300B-closed-{m}.{ext}"));
            assert!(std::fs::metadata(&p).map(|m| m.len() > 1000).unwrap_or(false), "{} missing or empty", p.display());
        }
        // Each chart is titled by its own quantity (they once shared one title).
        let svg = std::fs::read_to_string(plots.join(format!("multistream-300B-closed-{m}.svg"))).unwrap();
        assert!(svg.contains(quantity), "{m}: the title does not name {quantity:?}");
    }
    let png = std::fs::read(plots.join("multistream-300B-closed-latency.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
}

/// On loop devices the counts must also equal the kernel's own: /sys/block/<dev>/stat.
#[test]
fn on_loop_devices_the_counts_equal_sys_block() {
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 || Command::new("losetup").arg("--version").output().is_err() {
        skip("root", "needs root and losetup");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("runs.json");
    let o = okeanos(&[
        "bench", "multistream", "--target", "engine:loop", "--modes", "data,wasteless", "--streams", "3", "--duration", "500ms", "--dir", dir.path().to_str().unwrap(),
        "--fs-size", "256M", "--journal-size", "16M", "--quiet", "--json", json.to_str().unwrap(),
    ]);
    if !o.status.success() && text(&o).contains("losetup") {
        skip("root", &format!("loop devices unavailable: {}", text(&o)));
        return;
    }
    assert!(o.status.success(), "{}", text(&o));
    for r in runs(&json) {
        check_counts(&r);
        assert_eq!(r["device"]["source"], "/sys/block");
    }
    // engine:manylogs: one loop device holds the logs and the file system, so its count is
    // the journal's and the final bytes together.
    let json = dir.path().join("manylogs.json");
    let o = okeanos(&[
        "bench", "multistream", "--target", "engine:manylogs", "--modes", "data,wasteless", "--streams", "3", "--duration", "500ms", "--dir", dir.path().to_str().unwrap(),
        "--fs-size", "256M", "--journal-size", "16M", "--quiet", "--json", json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    for r in runs(&json) {
        assert!(r["error"].is_null() && r["target"] == "engine:manylogs" && u(&r, "syncs") > 0 && u(&r, "journal_bytes") > 0, "{r}");
        let dev = &r["device"];
        assert_eq!(dev["source"], "/sys/block");
        assert_eq!(u(&r, "journal_bytes") + u(&r, "final_bytes"), u(dev, "fs_written"), "journal and final bytes vs the one device's count: {r}");
        assert_eq!(u(dev, "journal_written"), 0, "{r}");
    }
}

#[test]
fn recovery_and_mixed_report_their_results() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("rec.json");
    let d = dir.path().to_str().unwrap();
    let o = okeanos(&["bench", "recovery", "--modes", "data,wasteless", "--streams", "4", "--records", "20", "--dir", d, "--fs-size", "256M", "--journal-size", "32M", "--quiet", "--json", json.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    for r in runs(&json) {
        assert!(r["error"].is_null(), "{r}");
        assert!(u(&r["extra"], "transactions") >= 1 && u(&r["extra"], "blocks_replayed") >= 1, "{r}");
        assert!(r["extra"]["scan_ms"].as_f64().unwrap() > 0.0);
    }
    let mixed = dir.path().join("mixed.json");
    let o = okeanos(&["bench", "mixed", "--modes", "ordered", "--streams", "2", "--rate", "20/s", "--duration", "500ms", "--file-size", "1M", "--dir", d, "--fs-size", "256M", "--journal-size", "16M", "--quiet", "--json", mixed.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let r = &runs(&mixed)[0];
    assert!(r["extra"]["large_alone_mb_s"].as_f64().unwrap() > 0.0 && r["extra"]["large_share"].as_f64().unwrap() > 0.0, "{r}");
    // A kernel file system cannot be crashed on purpose.
    let o = okeanos(&["bench", "recovery", "--target", "mount:/tmp", "--quiet"]);
    assert!(!o.status.success() && text(&o).contains("cannot be crashed"), "{}", text(&o));
}

#[test]
fn bad_flags_get_clear_errors() {
    for (args, want) in [
        (vec!["bench", "multistream", "--rate", "fast"], "rate"),
        (vec!["bench", "multistream", "--target", "kernel:zfs"], "kernel:ext4-journal"),
        (vec!["bench", "multistream", "--modes", "journal"], "journal"),
        (vec!["bench", "multistream", "--sync", "never"], "fsync or fdatasync"),
        (vec!["bench", "multistream", "--streams", "0"], "--streams"),
        (vec!["bench", "multistream", "--duration", "soon"], "duration"),
        (vec!["bench", "multistream", "--target", "mount:/nonexistent/dir"], "not a directory"),
        (vec!["sim", "multistream", "--model", "floppy"], "unknown device model"),
        (vec!["sim", "multistream", "--journal", "sideways"], "--journal"),
        (vec!["sim"], "give a workload"),
        (vec!["bench", "multistream", "--streams", "1000", "--size", "64M"], "within 1 GiB"),
        (vec!["sim", "multistream", "--fs-size", "1T"], "in memory"),
        (vec!["sim", "postmark", "--min-file", "2M", "--max-file", "1M"], "--min-file"),
    ] {
        let o = okeanos(&args);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(text(&o).contains(want), "{args:?}: {}", text(&o));
    }
}

#[test]
fn the_simulator_is_deterministic_and_its_fuzzer_can_fail() {
    let dir = tempfile::tempdir().unwrap();
    let mut outs = Vec::new();
    for k in 0..2 {
        let json = dir.path().join(format!("sim{k}.json"));
        let o = okeanos(&["sim", "multistream", "--modes", "ordered,wasteless", "--streams", "200", "--rate", "1kbit", "--duration", "10s", "--seed", "5", "--quiet", "--json", json.to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o));
        let mut rs = runs(&json);
        for r in rs.iter_mut() {
            // Wall-clock figures are the only ones that may differ.
            r["wall_s"] = Value::Null;
            r["cpu_s"] = Value::Null;
        }
        outs.push(rs);
    }
    assert_eq!(outs[0], outs[1]);
    assert!(outs[0][0]["sync_latency_us"]["p50"].as_f64().unwrap() > outs[0][1]["sync_latency_us"]["p50"].as_f64().unwrap(), "ordered waits for in-place data writes, wasteless does not");
    let ok = okeanos(&["sim", "--crash-fuzz", "--seed", "100", "--runs", "40", "--points", "5"]);
    assert!(ok.status.success() && text(&ok).contains("0 violations"), "{}", text(&ok));
    let canary = okeanos(&["sim", "--crash-fuzz", "--seed", "100", "--runs", "40", "--points", "5", "--canary"]);
    assert!(!canary.status.success() && text(&canary).contains("reproduce: okeanos sim --crash-fuzz --seed"), "{}", text(&canary));
    // A seed reproduces its run: the same crash states, the same violations, line for line
    // (its crash points were once drawn in a HashMap's order, which differs in every process).
    let violations = |o: &std::process::Output| text(o).lines().filter(|l| l.starts_with("VIOLATION")).map(str::to_string).collect::<Vec<_>>();
    let again = okeanos(&["sim", "--crash-fuzz", "--seed", "100", "--runs", "40", "--points", "5", "--canary"]);
    assert!(!violations(&canary).is_empty());
    assert_eq!(violations(&canary), violations(&again), "the same seeds found other violations");
    // Named placements, nvm and remote among them: every run on it, and the reproduce line
    // names it; a placement without crash states to build is refused.
    for journal in ["nvm", "remote"] {
        let ok = okeanos(&["sim", "--crash-fuzz", "--journal", journal, "--seed", "100", "--runs", "20", "--points", "4"]);
        assert!(ok.status.success() && text(&ok).contains("0 violations") && text(&ok).contains(&format!("runs by journal: {journal} 20")), "{}", text(&ok));
        let canary = okeanos(&["sim", "--crash-fuzz", "--journal", journal, "--seed", "100", "--runs", "40", "--points", "8", "--canary"]);
        assert!(!canary.status.success() && text(&canary).contains(&format!("--journal {journal} --canary")), "{}", text(&canary));
    }
    let dropped = okeanos(&["sim", "--crash-fuzz", "--journal", "dropped"]);
    assert!(!dropped.status.success() && text(&dropped).contains("dropped has nothing to recover"), "{}", text(&dropped));
}

/// Every journal placement in the simulator's experiments: `sim multistream` and `sim postmark`
/// run on each (manylogs used to be refused outside `sim recovery`), label it, and a manylogs
/// disk is not an internal journal under another name.
#[test]
fn every_placement_runs_in_the_simulators_experiments() {
    let dir = tempfile::tempdir().unwrap();
    let mut by_placement = std::collections::BTreeMap::new();
    for (journal, label) in [("external", "+cheetah15k"), ("internal", "sim:cheetah15k"), ("nvm", "+nvm"), ("manylogs", "+manylogs"), ("remote", "+remote("), ("replicated", "+replicated("), ("dropped", "+no journal")] {
        let json = dir.path().join(format!("{journal}.json"));
        let o = okeanos(&["sim", "multistream", "--journal", journal, "--modes", "wasteless", "--streams", "4", "--rate", "closed", "--duration", "300ms", "--quiet", "--json", json.to_str().unwrap()]);
        assert!(o.status.success(), "--journal {journal}: {}", text(&o));
        let r = runs(&json).remove(0);
        assert!(r["error"].is_null() && u(&r, "syncs") > 0, "--journal {journal}: {r}");
        assert!(r["target"].as_str().unwrap().contains(label), "--journal {journal}: {}", r["target"]);
        by_placement.insert(journal, r);
    }
    let key = |r: &Value| (r["syncs"].clone(), r["per_kind"].clone(), r["sync_latency_us"]["p50"].clone());
    assert_ne!(key(&by_placement["manylogs"]), key(&by_placement["internal"]), "manylogs ran as the internal journal");
    let json = dir.path().join("postmark.json");
    let o = okeanos(&["sim", "postmark", "--journal", "manylogs", "--modes", "ordered", "--files", "20", "--transactions", "50", "--quiet", "--json", json.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let r = runs(&json).remove(0);
    assert!(r["error"].is_null() && u(&r, "ops") > 0 && r["target"].as_str().unwrap().ends_with("+manylogs"), "{r}");
    // sim mixed formats its disk itself, before the measured mount: with a log per group too.
    let mixed = |journal: &str| {
        let json = dir.path().join(format!("mixed-{journal}.json"));
        let o = okeanos(&["sim", "mixed", "--journal", journal, "--modes", "ordered", "--streams", "4", "--duration", "300ms", "--quiet", "--json", json.to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o));
        runs(&json).remove(0)
    };
    let (m, i) = (mixed("manylogs"), mixed("internal"));
    assert!(m["error"].is_null() && m["target"].as_str().unwrap().ends_with("+manylogs"), "{m}");
    assert_ne!(key(&m), key(&i), "sim mixed ran manylogs as the internal journal");
    // sim recovery crashes and recovers on each placement: the recovering mount finds the
    // journal where the crashed one left it (the same NVM, the same server's log), and
    // replays every committed record. A remote journal's recovery reads the server's log: it
    // once looked the superblock's server name up in DNS instead.
    for journal in ["external", "internal", "nvm", "manylogs", "remote", "replicated"] {
        let json = dir.path().join(format!("recovery-{journal}.json"));
        let o = okeanos(&["sim", "recovery", "--journal", journal, "--modes", "wasteless", "--streams", "4", "--records", "20", "--fs-size", "256M", "--journal-size", "16M", "--quiet", "--json", json.to_str().unwrap()]);
        assert!(o.status.success(), "sim recovery --journal {journal}: {}", text(&o));
        let r = runs(&json).remove(0);
        let x = &r["extra"];
        assert!(r["error"].is_null() && u(x, "blocks_replayed") > 0 && x["recovery_ms"].as_f64().unwrap() > 0.0, "sim recovery --journal {journal}: {r}");
        if journal != "nvm" {
            assert!(u(x, "transactions") >= 20, "sim recovery --journal {journal}: {r}");
        }
    }
    let json = dir.path().join("recovery-dropped.json");
    let o = okeanos(&["sim", "recovery", "--journal", "dropped", "--modes", "wasteless", "--streams", "4", "--records", "20", "--quiet", "--json", json.to_str().unwrap()]);
    assert!(!o.status.success() && runs(&json)[0]["error"].as_str().unwrap().contains("nothing to recover"), "{}", text(&o));
}

/// Loop devices and mounts whose backing files live under `dir`.
fn leftovers(dir: &Path) -> Vec<String> {
    let d = dir.to_str().unwrap();
    let loops = Command::new("losetup").arg("-a").output().map(|o| String::from_utf8_lossy(&o.stdout).to_string()).unwrap_or_default();
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    loops.lines().chain(mounts.lines()).filter(|l| l.contains(d)).map(str::to_string).collect()
}

/// Whether kernel targets can run here (root, mkfs.ext4, losetup); says why not otherwise.
fn kernel_tools_here() -> bool {
    // SAFETY: no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root || Command::new("mkfs.ext4").arg("-V").output().is_err() || Command::new("losetup").arg("--version").output().is_err() {
        skip("root", "needs root, mkfs.ext4 and losetup");
        return false;
    }
    true
}

/// A kernel target makes ext4 on loop devices, measures, and releases everything — also when
/// interrupted in the middle of a run.
#[test]
fn kernel_targets_release_their_loop_devices_and_mounts() {
    if !kernel_tools_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let json = dir.path().join("k.json");
    let o = okeanos(&["bench", "multistream", "--target", "kernel:ext4-ordered", "--streams", "2", "--duration", "300ms", "--dir", d, "--fs-size", "256M", "--journal-size", "16M", "--quiet", "--json", json.to_str().unwrap()]);
    if !o.status.success() && text(&o).contains("losetup") {
        skip("root", &format!("loop devices unavailable: {}", text(&o)));
        return;
    }
    assert!(o.status.success(), "{}", text(&o));
    let r = &runs(&json)[0];
    assert_eq!(r["mode"], "ext4-ordered");
    assert!(u(r, "journal_bytes") > 0 && u(r, "final_bytes") >= u(r, "payload_bytes"), "{r}");
    assert_eq!(u(r, "journal_bytes"), u(&r["device"], "journal_written"));
    assert!(leftovers(dir.path()).is_empty(), "left behind: {:?}", leftovers(dir.path()));

    // Interrupted mid-run: SIGINT, a clean exit with an error, nothing left behind.
    let child = Command::new(env!("CARGO_BIN_EXE_okeanos"))
        .args(["bench", "multistream", "--target", "kernel:ext4-journal", "--streams", "4", "--duration", "30s", "--dir", d, "--fs-size", "256M", "--journal-size", "16M", "--quiet"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the file system is mounted, then interrupt.
    let t0 = std::time::Instant::now();
    while leftovers(dir.path()).iter().all(|l| !l.contains("/mnt")) && t0.elapsed() < std::time::Duration::from_secs(20) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success() && text(&out).contains("interrupted"), "{}", text(&out));
    assert!(t0.elapsed() < std::time::Duration::from_secs(25), "the run stopped at the interrupt");
    assert!(leftovers(dir.path()).is_empty(), "left behind after SIGINT: {:?}", leftovers(dir.path()));
}

/// The floor line and the kernel's best for small fsyncs: `device:loop` writes each record as
/// one 4 KiB block of a raw loop device and flushes it (so its device bytes are exactly 4 KiB a
/// record and it flushes at least once a sync), and `kernel:ext4-fastcommit` is ext4 with fast
/// commits, counted among its commits.
#[test]
fn the_floor_line_and_ext4_fast_commits_are_measured() {
    if !kernel_tools_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let json = dir.path().join("f.json");
    let o = okeanos(&["bench", "multistream", "--target", "device:loop,kernel:ext4-fastcommit", "--streams", "2", "--size", "100", "--duration", "300ms", "--dir", d, "--fs-size", "256M", "--journal-size", "16M", "--quiet", "--json", json.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let rs = runs(&json);
    let raw = rs.iter().find(|r| r["target"] == "device:loop").expect("a device:loop run");
    assert_eq!(raw["mode"], "raw-4k-write+flush");
    let ops = u(raw, "ops");
    assert!(ops > 0, "{raw}");
    assert_eq!(u(&raw["device"], "fs_written"), ops * 4096, "one 4 KiB block per record: {raw}");
    assert!(u(&raw["device"], "flushes") >= u(raw, "syncs"), "a flush per sync at least: {raw}");
    let fc = rs.iter().find(|r| r["target"] == "kernel:ext4-fastcommit").expect("an ext4-fastcommit run");
    assert_eq!(fc["mode"], "ext4-fastcommit");
    // Every fdatasync of an append commits: with fast commits counted, about one a sync (two
    // streams may share one); without them jbd2 alone would count a handful.
    assert!(u(fc, "commits") * 3 >= u(fc, "syncs"), "fast commits are counted: {fc}");
    assert!(leftovers(dir.path()).is_empty(), "left behind: {:?}", leftovers(dir.path()));
}

/// The JetStream placement's floor line: `device:jetstream` publishes each record as one
/// message of whole 4 KiB blocks to an R3 stream on a 3-node cluster the command starts, and
/// each sync waits for its acknowledgement: one message and 4 KiB a sync, beside the placement
/// itself in the same command.
#[test]
fn the_jetstream_floor_line_is_one_acknowledged_message_a_sync() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let json = dir.path().join("j.json");
    let o = okeanos(&["bench", "multistream", "--target", "device:jetstream,engine:jetstream", "--modes", "wasteless+dmeta", "--streams", "2", "--size", "100", "--duration", "300ms", "--dir", d, "--fs-size", "64M", "--journal-size", "16M", "--quiet", "--json", json.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let rs = runs(&json);
    let floor = rs.iter().find(|r| r["target"] == "device:jetstream").expect("a device:jetstream run");
    assert_eq!(floor["mode"], "r3-append+ack");
    let syncs = u(floor, "syncs");
    assert!(syncs > 0, "{floor}");
    assert_eq!(u(floor, "commits"), syncs, "one message a sync: {floor}");
    assert_eq!(u(floor, "journal_bytes"), syncs * 4096, "a 100-byte record is one 4 KiB message: {floor}");
    let engine = rs.iter().find(|r| r["target"] == "engine:jetstream").expect("an engine:jetstream run");
    assert!(u(engine, "syncs") > 0, "{engine}");
}

/// A test that cannot run here says so; where the test command promised what it needs
/// (OKEANOS_TESTS_REQUIRE names `root` when it runs as root), it fails instead.
fn skip(need: &str, why: &str) {
    if std::env::var("OKEANOS_TESTS_REQUIRE").is_ok_and(|r| r.split(',').any(|x| x == need)) {
        panic!("{why}, but the test command promised {need} (OKEANOS_TESTS_REQUIRE)");
    }
    eprintln!("skipping: {why}");
}

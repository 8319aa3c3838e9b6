//! The okeanos command end to end: exit codes, messages, and that fsck fails on damage.

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_okeanos");

fn okeanos(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_okeanos")).args(args).output().expect("run okeanos")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn mkfs_put_cat_ls_fsck_journal_dump() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let img = img.to_str().unwrap();
    let src = dir.path().join("src.txt");
    std::fs::write(&src, b"stream data\n").unwrap();
    assert!(okeanos(&["mkfs", img, "--size", "64M", "--journal-size", "4M"]).status.success());
    let again = okeanos(&["mkfs", img, "--size", "64M"]);
    assert!(!again.status.success() && text(&again).contains("--force"), "{}", text(&again));
    assert!(okeanos(&["mkdir", img, "/logs"]).status.success());
    assert!(okeanos(&["put", img, src.to_str().unwrap(), "/logs/a", "-o", "data=data"]).status.success());
    let cat = okeanos(&["cat", img, "/logs/a"]);
    assert_eq!(cat.stdout, b"stream data\n");
    let ls = okeanos(&["ls", img, "/logs"]);
    assert_eq!(String::from_utf8_lossy(&ls.stdout), "a\n");
    let fsck = okeanos(&["fsck", img]);
    assert!(fsck.status.success() && text(&fsck).contains("clean"), "{}", text(&fsck));
    let dump = okeanos(&["journal", "dump", img]);
    assert!(dump.status.success() && text(&dump).contains("clean"), "{}", text(&dump));
    let stat = okeanos(&["stat", img, "--json"]);
    assert!(text(&stat).contains("\"commits\""), "{}", text(&stat));
    assert!(okeanos(&["rm", img, "/logs/a"]).status.success());
    assert!(okeanos(&["rm", img, "/logs"]).status.success());
    assert!(okeanos(&["fsck", img]).status.success());
}

#[test]
fn fsck_exits_non_zero_on_damage() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let p = img.to_str().unwrap();
    assert!(okeanos(&["mkfs", p, "--size", "64M", "--journal-size", "4M"]).status.success());
    assert!(okeanos(&["mkdir", p, "/d"]).status.success());
    // Flip a byte in group 0's block bitmap.
    let sb = okeanos::format::Superblock::decode(&std::fs::read(&img).unwrap()[..512]).unwrap();
    let mut bytes = std::fs::read(&img).unwrap();
    bytes[sb.first_group_block as usize * 4096 + 300] ^= 0x20;
    std::fs::write(&img, &bytes).unwrap();
    let fsck = okeanos(&["fsck", p]);
    assert_eq!(fsck.status.code(), Some(4), "{}", text(&fsck));
    assert!(text(&fsck).contains("PROBLEM: group 0: block bitmap fails its checksum"), "{}", text(&fsck));
}

#[test]
fn bad_input_gets_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let p = img.to_str().unwrap();
    for (args, want) in [
        (vec!["mkfs", p, "--size", "1M"], "too small"),
        (vec!["mkfs", p, "--size", "12Q"], "unknown unit"),
        (vec!["mkfs", p, "--size", "64M", "--block-size", "3000"], "power of two"),
        (vec!["mkfs", p, "--size", "64M", "--journal-size", "64K"], "too small"),
        (vec!["cat", "/nonexistent/image", "/x"], "No such file"),
    ] {
        let o = okeanos(&args);
        assert!(!o.status.success() && text(&o).contains(want), "{args:?}: {}", text(&o));
    }
    assert!(!img.exists(), "a failed mkfs leaves no file behind");
    std::fs::write(&img, vec![7u8; 1 << 20]).unwrap();
    let o = okeanos(&["ls", p]);
    assert!(!o.status.success() && text(&o).contains("not an Okeanos structure"), "{}", text(&o));
    assert!(okeanos(&["mkfs", p, "--size", "64M", "--journal-size", "4M"]).status.success());
    let o = okeanos(&["ls", p, "/", "-o", "data=fast"]);
    assert!(text(&o).contains("unknown data mode"), "{}", text(&o));
    let o = okeanos(&["ls", p, "/missing"]);
    assert!(text(&o).contains("no such file or directory"), "{}", text(&o));
}

// ------------------------------------------------------------------------------------------
// Trusting the image from the command line (docs/JOURNALING.md, "Damage, exclusive access and
// read-only recovery").

use okeanos::{MkfsOptions, MountOptions, Okeanos};
use std::path::Path;

fn mkfs(img: &Path) {
    let o = okeanos(&["mkfs", img.to_str().unwrap(), "--size", "32M"]);
    assert!(o.status.success(), "{}", text(&o));
}

fn stat_json(img: &Path) -> serde_json::Value {
    let o = okeanos(&["stat", img.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn assert_image_clean(img: &Path, ctx: &str) {
    let st = stat_json(img);
    assert_eq!((st["state"].as_str(), st["journal_clean"].as_bool()), (Some("clean"), Some(true)), "{ctx}: {st:#}");
    let o = okeanos(&["fsck", img.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{ctx}: {}", text(&o));
}

/// An image whose mount was dropped without unmount after `n` synced files (a crash).
fn crashed_image(dir: &Path, n: usize) -> std::path::PathBuf {
    let img = dir.join("crashed");
    Okeanos::mkfs_file(&img, 32 << 20, &MkfsOptions { journal_blocks: 4096, ..Default::default() }).unwrap();
    let fs = Okeanos::open(&img, MountOptions::default()).unwrap();
    for k in 0..n {
        let f = fs.create_file(&format!("/file{k:05}")).unwrap();
        f.write_at(0, format!("contents of {k}\n").as_bytes()).unwrap();
        f.fsync().unwrap();
    }
    drop(fs);
    img
}

#[test]
fn failed_writes_leave_the_image_clean() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    mkfs(&img);
    let p = img.to_str().unwrap();
    assert!(okeanos(&["mkdir", p, "/d"]).status.success());
    let big = dir.path().join("big");
    std::fs::write(&big, vec![5u8; 40 << 20]).unwrap();
    for (args, want) in [
        (vec!["rm", p, "/missing"], "no such file"),
        (vec!["mkdir", p, "/d"], "file exists"),
        (vec!["put", p, big.to_str().unwrap(), "/big"], "no space"),
        (vec!["rm", p, "/"], "cannot remove the root"),
    ] {
        let o = okeanos(&args);
        assert!(!o.status.success() && text(&o).contains(want), "{args:?}: {}", text(&o));
        assert_image_clean(&img, &format!("{args:?}"));
    }
    // The failed put left nothing half-copied behind.
    assert_eq!(String::from_utf8_lossy(&okeanos(&["ls", p, "/"]).stdout), "d\n");
}

#[test]
fn read_only_commands_work_on_a_crashed_image_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let img = crashed_image(dir.path(), 20);
    let before = std::fs::read(&img).unwrap();
    let p = img.to_str().unwrap();
    assert_eq!(stat_json(&img)["journal_clean"].as_bool(), Some(false));
    let ls = okeanos(&["ls", p, "/"]);
    assert!(ls.status.success(), "{}", text(&ls));
    assert_eq!(String::from_utf8_lossy(&ls.stdout).lines().count(), 20);
    let cat = okeanos(&["cat", p, "/file00019"]);
    assert_eq!(String::from_utf8_lossy(&cat.stdout), "contents of 19\n", "{}", text(&cat));
    let fsck = okeanos(&["fsck", "-n", p]);
    assert!(text(&fsck).contains("needs recovery"), "{}", text(&fsck));
    assert!(std::fs::read(&img).unwrap() == before, "a read-only command wrote to the image");
    // fsck (without -n) recovers, and the result is clean.
    let fsck = okeanos(&["fsck", p]);
    assert_eq!(fsck.status.code(), Some(0), "{}", text(&fsck));
    assert_image_clean(&img, "after fsck");
}

/// `okeanos tune`: lists the journal's features, turns the fast commit forms off and on (the
/// image stays clean and its files readable), refuses a crashed image until it is recovered
/// and a feature it cannot change or does not know, writing nothing when it refuses.
#[test]
fn tune_changes_journal_features_only_on_a_clean_journal() {
    let dir = tempfile::tempdir().unwrap();
    let features = |img: &Path| -> Vec<String> { stat_json(img)["journal_features"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect() };
    let img = crashed_image(dir.path(), 5);
    let p = img.to_str().unwrap();
    let all = ["tx_checksum", "multiwrite", "fast_commit", "fast_commit_span", "fast_commit_compact", "fast_commit_notes", "fast_commit_short_notes", "in_place_tags"];
    assert_eq!(features(&img), all, "mkfs sets every feature");
    let o = okeanos(&["tune", p]);
    assert!(o.status.success() && text(&o).contains("journal features: tx_checksum multiwrite fast_commit fast_commit_span fast_commit_compact fast_commit_notes fast_commit_short_notes in_place_tags"), "{}", text(&o));
    let before = std::fs::read(&img).unwrap();
    for (args, want) in [
        (vec!["tune", p, "--disable", "fast_commit_compact"], "needs recovery"),
        (vec!["tune", p, "--disable", "tx_checksum"], "not a feature that can be changed"),
        (vec!["tune", p, "--enable", "fast_commit_everything"], "no such journal feature"),
        (vec!["tune", p, "--disable", "all"], "no such journal feature"),
    ] {
        let o = okeanos(&args);
        assert!(!o.status.success() && text(&o).contains(want), "{args:?}: {}", text(&o));
        assert!(std::fs::read(&img).unwrap() == before, "{args:?} refused but wrote to the image");
    }
    assert!(okeanos(&["recover", p]).status.success());
    let o = okeanos(&["tune", p, "--disable", "fast_commit_notes"]);
    assert!(!o.status.success() && text(&o).contains("needs fast_commit_notes"), "short notes without notes: {}", text(&o));
    let o = okeanos(&["tune", p, "--disable", "fast_commit,fast_commit_span,fast_commit_compact,fast_commit_notes,fast_commit_short_notes,in_place_tags"]);
    assert!(o.status.success() && text(&o).contains("turned off fast_commit fast_commit_span fast_commit_compact fast_commit_notes fast_commit_short_notes in_place_tags"), "{}", text(&o));
    assert_eq!(features(&img), ["tx_checksum", "multiwrite"]);
    for lone in ["fast_commit_compact", "fast_commit_notes", "fast_commit_short_notes"] {
        let o = okeanos(&["tune", p, "--enable", lone]);
        assert!(!o.status.success() && text(&o).contains("need fast_commit"), "{lone}: {}", text(&o));
    }
    assert_image_clean(&img, "with the fast commit forms off");
    assert_eq!(String::from_utf8_lossy(&okeanos(&["cat", p, "/file00004"]).stdout), "contents of 4\n");
    let o = okeanos(&["tune", p, "--enable", "all"]);
    assert!(o.status.success() && text(&o).contains("turned on fast_commit fast_commit_span fast_commit_compact fast_commit_notes fast_commit_short_notes in_place_tags"), "{}", text(&o));
    assert_eq!(features(&img), all);
    let o = okeanos(&["tune", p, "--enable", "all"]);
    assert!(o.status.success() && text(&o).contains("unchanged"), "{}", text(&o));
    assert_image_clean(&img, "with every feature on again");
}

#[test]
fn a_second_opener_is_refused_with_the_holder_named() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    mkfs(&img);
    let p = img.to_str().unwrap();
    let src = dir.path().join("src");
    std::fs::write(&src, b"x").unwrap();
    let fs = Okeanos::open(&img, MountOptions::default()).unwrap();
    let me = std::process::id().to_string();
    for args in [
        vec!["put", p, src.to_str().unwrap(), "/x"],
        vec!["mkdir", p, "/d"],
        vec!["rm", p, "/d"],
        vec!["fsck", p],
        vec!["recover", p],
        vec!["mkfs", p, "--size", "32M", "--force"],
        vec!["tune", p, "--disable", "fast_commit_compact"],
    ] {
        let o = okeanos(&args);
        assert!(!o.status.success(), "{args:?} ran against a mounted image: {}", text(&o));
        assert!(text(&o).contains("in use by process") && text(&o).contains(&me), "{args:?}: {}", text(&o));
    }
    // Reading commands read a live image, its journal replayed in memory (as debugfs reads a
    // mounted ext4), and say it is mounted.
    let f = fs.create_file("/live").unwrap();
    f.write_at(0, b"synced while mounted\n").unwrap();
    f.fsync().unwrap();
    let o = okeanos(&["ls", p, "/"]);
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout) == "live\n", "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is mounted (by process") && text(&o).contains(&me), "{}", text(&o));
    let o = okeanos(&["cat", p, "/live"]);
    assert!(o.status.success() && o.stdout == b"synced while mounted\n", "{}", text(&o));
    drop(f);
    let o = okeanos(&["fsck", "-n", p]);
    assert!(text(&o).contains("in use by"), "{}", text(&o));
    let o = okeanos(&["stat", p]);
    assert!(o.status.success() && text(&o).contains("in use by"), "{}", text(&o));
    assert!(okeanos(&["journal", "dump", p]).status.success());
    fs.unmount().unwrap();
    assert!(okeanos(&["mkdir", p, "/d"]).status.success());
}

#[test]
fn a_closed_pipe_ends_output_without_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let img = crashed_image(dir.path(), 2500);
    let p = img.to_str().unwrap();
    for args in [vec!["journal", "dump", p], vec!["ls", "-l", p, "/"], vec!["fsck", "-n", p]] {
        let mut c = Command::new(env!("CARGO_BIN_EXE_okeanos")).args(&args).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
        let mut first = [0u8; 16];
        use std::io::Read;
        let read = c.stdout.take().unwrap().read_exact(&mut first);
        // The read end is closed now, as `| head -c 16` closes it.
        let o = c.wait_with_output().unwrap();
        // A command that printed less than that says what it did instead of an unwrap panic.
        assert!(read.is_ok(), "{args:?} printed fewer than 16 bytes ({read:?}): {:?} {}", o.status, String::from_utf8_lossy(&o.stderr));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        // Success, fsck's "problems" (the journal needs recovery), or SIGPIPE: never a panic.
        assert!(matches!(o.status.code(), Some(0) | Some(4) | None), "{args:?}: {:?} {err}", o.status);
    }
}

#[test]
fn damaged_journal_is_reported_and_fsck_clears_it() {
    let dir = tempfile::tempdir().unwrap();
    let img = crashed_image(dir.path(), 6);
    // Damage the descriptor of the third transaction (files are created and synced one per
    // transaction, each starting with a descriptor).
    let dev: std::sync::Arc<dyn okeanos::Device> = std::sync::Arc::new(okeanos::FileDevice::open_unlocked(&img).unwrap());
    let d = okeanos::inspect::dump_journal(dev, None).unwrap();
    assert!(d.transactions.len() >= 6, "{}", d.transactions.len());
    let t = &d.transactions[2];
    let mut bytes = std::fs::read(&img).unwrap();
    bytes[d.region.device_block(t.start).get() as usize * 4096 + 40] ^= 0xff;
    std::fs::write(&img, &bytes).unwrap();
    let p = img.to_str().unwrap();
    let dump = okeanos(&["journal", "dump", p]);
    assert!(text(&dump).contains(&format!("DAMAGE: journal transaction {} ", t.tid)), "{}", text(&dump));
    let o = okeanos(&["mkdir", p, "/new"]);
    assert!(!o.status.success() && text(&o).contains("has errors") && text(&o).contains("okeanos fsck"), "{}", text(&o));
    // Read-only use still works (the state before the damaged transaction).
    let ls = okeanos(&["ls", p, "/"]);
    assert_eq!(String::from_utf8_lossy(&ls.stdout).lines().count(), 2, "{}", text(&ls));
    let st = stat_json(&img);
    assert_eq!((st["errors"].as_bool(), st["error"]["tid"].as_u64()), (Some(true), Some(t.tid.get())), "{st:#}");
    let o = okeanos(&["fsck", p]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("cleared the error state"), "{}", text(&o));
    assert!(okeanos(&["mkdir", p, "/new"]).status.success());
    assert_image_clean(&img, "after fsck cleared the errors");
}

#[test]
fn small_options_and_paths() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let p = img.to_str().unwrap();
    for (args, want) in [
        (vec!["mkfs", p, "--size", "64M", "--bytes-per-inode", "512"], "below the smallest (1024)"),
        (vec!["mkfs", p, "--size", "64M", "--journal-size", "63M"], "--journal-size"),
        (vec!["mkfs", p, "--size", "99999999999999999999"], "too large"),
        (vec!["mkfs", p, "--size", "99999999999T"], "too large"),
        (vec!["mkfs", p, "--size", "12X"], "unknown unit"),
        (vec!["mkfs", p, "--size", "1.5G"], "not a number"),
    ] {
        let o = okeanos(&args);
        assert!(!o.status.success() && text(&o).contains(want), "{args:?}: {}", text(&o));
    }
    // A small device gets a journal that fits it (mke2fs's scale).
    let o = okeanos(&["mkfs", p, "--size", "16M"]);
    assert!(o.status.success() && text(&o).contains("internal journal of 1024 blocks"), "{}", text(&o));
    for (opt, want) in [("max_tx_blocks=8", "below the smallest workable"), ("cache_blocks=99999999999999999999999", "too large")] {
        let o = okeanos(&["mkdir", p, "/d", "-o", opt]);
        assert!(!o.status.success() && text(&o).contains(want), "{opt}: {}", text(&o));
    }
    assert!(okeanos(&["mkdir", p, "/dir"]).status.success());
    let src = dir.path().join("notes.txt");
    std::fs::write(&src, b"n").unwrap();
    assert!(okeanos(&["put", p, src.to_str().unwrap(), "/dir/"]).status.success());
    assert!(okeanos(&["put", p, src.to_str().unwrap(), "/dir"]).status.success());
    assert_eq!(String::from_utf8_lossy(&okeanos(&["ls", p, "/"]).stdout), "dir\n");
    assert_eq!(String::from_utf8_lossy(&okeanos(&["ls", p, "/dir"]).stdout), "notes.txt\n");
    let ls = okeanos(&["ls", "-l", p, "/dir"]);
    let t = String::from_utf8_lossy(&ls.stdout);
    assert!(t.starts_with("MODE") && t.contains("-rw-r--r--") && t.contains(" 20"), "{t}");
    // One problem is one problem: a superblock state this version never writes.
    let mut bytes = std::fs::read(&img).unwrap();
    let mut sb = okeanos::format::Superblock::decode(&bytes[..512]).unwrap();
    sb.state = 0x40;
    sb.encode(&mut bytes[..4096]);
    std::fs::write(&img, &bytes).unwrap();
    let o = okeanos(&["fsck", "-n", p]);
    assert!(text(&o).contains("\n1 problem\n"), "{}", text(&o));
    // fsck proper finds every structure sound and repairs the state.
    assert_eq!(okeanos(&["fsck", p]).status.code(), Some(1));
    assert_eq!(okeanos(&["fsck", p]).status.code(), Some(0));
}

#[test]
fn every_command_takes_the_external_journal_the_same_way() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let j = dir.path().join("journal");
    let (p, jp) = (img.to_str().unwrap(), j.to_str().unwrap());
    let o = okeanos(&["mkfs", p, "--size", "32M", "--journal-device", jp, "--journal-size", "4M"]);
    assert!(o.status.success(), "{}", text(&o));
    let src = dir.path().join("src");
    std::fs::write(&src, b"external\n").unwrap();
    assert!(okeanos(&["put", p, "--journal", jp, src.to_str().unwrap(), "/a"]).status.success());
    assert_eq!(okeanos(&["cat", p, "--journal", jp, "/a"]).stdout, b"external\n");
    assert_eq!(okeanos(&["ls", p, "--journal", jp]).stdout, b"a\n");
    assert!(okeanos(&["stat", p, "--journal", jp]).status.success());
    assert_eq!(okeanos(&["fsck", p, "--journal", jp]).status.code(), Some(0));
    assert!(okeanos(&["journal", "dump", p, "--journal", jp]).status.success());
    let o = okeanos(&["tune", p, "--journal", jp, "--disable", "fast_commit_compact"]);
    assert!(o.status.success() && text(&o).contains("turned off fast_commit_compact"), "{}", text(&o));
    let o = okeanos(&["ls", p]);
    assert!(!o.status.success() && text(&o).contains("external journal"), "{}", text(&o));
}

#[test]
fn every_flag_has_help_text() {
    let top = okeanos(&["--help"]);
    let cmds: Vec<String> = String::from_utf8_lossy(&top.stdout)
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .filter(|c| c != "help")
        .collect();
    assert!(cmds.len() >= 14, "{cmds:?}");
    let mut subs: Vec<Vec<String>> = cmds.iter().map(|c| vec![c.clone()]).collect();
    subs.push(vec!["journal".into(), "dump".into()]);
    for sub in ["multistream", "recovery", "mixed"] {
        subs.push(vec!["bench".into(), sub.into()]);
    }
    for args in subs {
        let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
        a.push("--help");
        let o = okeanos(&a);
        let t = String::from_utf8_lossy(&o.stdout).into_owned();
        let opts: Vec<&str> = t.lines().skip_while(|l| !l.starts_with("Options:")).skip(1).take_while(|l| !l.is_empty()).collect();
        for (i, line) in opts.iter().enumerate().filter(|(_, l)| l.trim_start().starts_with('-')) {
            // "  -o, --options <OPTIONS>  text", or the text on the next, deeper-indented line
            // (clap's layout when some help is long).
            let next_is_help = opts.get(i + 1).is_some_and(|n| n.starts_with("          ") && !n.trim_start().starts_with('-'));
            assert!(line.trim_start().contains("  ") || next_is_help, "{args:?}: option without help text: {line:?}");
        }
        for line in t.lines().skip_while(|l| !l.starts_with("Arguments:")).skip(1).take_while(|l| l.starts_with("  ")) {
            assert!(line.trim_start().contains("  "), "{args:?}: argument without help text: {line:?}");
        }
    }
}

#[test]
fn mkfs_with_a_remote_journal() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let p = img.to_str().unwrap();
    for (args, want) in [
        (vec!["mkfs", p, "--size", "32M", "--journal", "remote"], "--journal-server"),
        (vec!["mkfs", p, "--size", "32M", "--journal-server", "127.0.0.1:7070"], "goes with --journal remote"),
        (vec!["mkfs", p, "--size", "32M", "--journal", "remote", "--journal-server", "no-port"], "host:port"),
        (vec!["mkfs", p, "--size", "32M", "--journal", "sideways"], "use internal, external, remote, jetstream, nvm or manylogs"),
        (vec!["mkfs", p, "--size", "32M", "--journal", "jetstream"], "--jetstream nats://"),
        (vec!["mkfs", p, "--size", "32M", "--jetstream", "nats://127.0.0.1:4222"], "goes with --journal jetstream"),
        (vec!["mkfs", p, "--size", "32M", "--journal", "jetstream", "--jetstream", "127.0.0.1:4222"], "nats://host:port URLs"),
    ] {
        let o = okeanos(&args);
        assert!(!o.status.success() && text(&o).contains(want), "{args:?}: {}", text(&o));
    }
    let o = okeanos(&["mkfs", p, "--size", "32M", "--journal", "remote", "--journal-server", "127.0.0.1:7070"]);
    assert!(o.status.success() && text(&o).contains("journal on the server 127.0.0.1:7070"), "{}", text(&o));
    let o = okeanos(&["stat", p]);
    assert!(text(&o).contains("remote journal  127.0.0.1:7070 (epoch 0)"), "{}", text(&o));
    assert_eq!(stat_json(&img)["remote_server"].as_str(), Some("127.0.0.1:7070"));
    // Nothing listens there: a clean file system is still readable (its server holds nothing),
    // but a read-write mount says why it cannot go on.
    assert!(okeanos(&["ls", p]).status.success());
    let o = okeanos(&["mkdir", p, "/d"]);
    assert!(!o.status.success() && text(&o).contains("cannot be mounted without it"), "{}", text(&o));
    assert!(okeanos(&["fsck", "-n", p]).status.success());
}

/// Completions and the man page come from the CLI itself; install-helpers puts the mount(8)
/// helpers (symlinks to this binary), the completions and the man page under --root.
#[test]
fn completions_man_page_and_install_helpers() {
    let bash = Command::new(BIN).args(["completions", "bash"]).output().unwrap();
    let text = String::from_utf8_lossy(&bash.stdout);
    assert!(bash.status.success() && text.contains("journal-server") && text.contains("mkfs"), "{text}");
    let man = Command::new(BIN).arg("man").output().unwrap();
    assert!(man.status.success() && String::from_utf8_lossy(&man.stdout).contains(".TH okeanos 8"), "the man page is in section 8, where it is installed");
    let root = tempfile::tempdir().unwrap();
    let o = Command::new(BIN).args(["install-helpers", "--root"]).arg(root.path()).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for name in ["mount.fuse.okeanos", "mount.okeanos"] {
        let link = std::fs::read_link(root.path().join("sbin").join(name)).unwrap();
        assert_eq!(link, Path::new("/usr/bin/okeanos"), "{name}: a package links to the installed path, not the build tree");
    }
    for f in ["usr/share/bash-completion/completions/okeanos", "usr/share/zsh/vendor-completions/_okeanos", "usr/share/man/man8/okeanos.8"] {
        assert!(std::fs::metadata(root.path().join(f)).unwrap().len() > 100, "{f}");
    }
    assert_eq!(std::fs::read(root.path().join("usr/share/man/man8/okeanos.8")).unwrap(), man.stdout);
    let o = Command::new(BIN).args(["install-helpers", "--bin", "/opt/okeanos/bin/okeanos", "--root"]).arg(root.path()).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_link(root.path().join("sbin/mount.okeanos")).unwrap(), Path::new("/opt/okeanos/bin/okeanos"));
}

/// `mkfs --journal nvm`: the NVM file made beside the image, used by every command (its path
/// is in the superblock), and what the stat and dump say; bad options are refused clearly
/// and leave nothing behind.
#[test]
fn mkfs_with_an_nvm_journal() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let img = img.to_str().unwrap();
    let nvm = dir.path().join("journal.nvm");
    let nvm = nvm.to_str().unwrap();
    let e = okeanos(&["mkfs", img, "--size", "64M", "--journal", "nvm"]);
    assert!(!e.status.success() && text(&e).contains("--nvm"), "{}", text(&e));
    let e = okeanos(&["mkfs", img, "--size", "64M", "--journal", "nvm", "--nvm", nvm, "--nvm-size", "4M"]);
    assert!(!e.status.success() && text(&e).contains("needs at least"), "{}", text(&e));
    assert!(!std::path::Path::new(img).exists() && !std::path::Path::new(nvm).exists(), "a failed mkfs leaves nothing behind");
    let ok = okeanos(&["mkfs", img, "--size", "64M", "--journal", "nvm", "--nvm", nvm, "--nvm-size", "24M"]);
    assert!(ok.status.success() && text(&ok).contains("journal in NVM"), "{}", text(&ok));
    let src = dir.path().join("src.txt");
    std::fs::write(&src, b"frozen in NVM\n").unwrap();
    assert!(okeanos(&["put", img, src.to_str().unwrap(), "/a", "-o", "data=data"]).status.success());
    assert_eq!(okeanos(&["cat", img, "/a"]).stdout, b"frozen in NVM\n");
    let stat = okeanos(&["stat", img]);
    assert!(text(&stat).contains("journal         nvm") && text(&stat).contains("slots"), "{}", text(&stat));
    let dump = okeanos(&["journal", "dump", img]);
    assert!(dump.status.success() && text(&dump).contains("commit word"), "{}", text(&dump));
    assert!(okeanos(&["fsck", img]).status.success());
    assert_eq!(stat_json(std::path::Path::new(img))["journal_clean"].as_bool(), Some(true), "clean after a clean unmount");
    // A crash with frozen copies in NVM: every read-only command says the journal needs
    // recovery (fsck -n cannot replay an NVM into memory, so it reports it), and fsck recovers.
    let fs = Okeanos::open(std::path::Path::new(img), MountOptions::parse("data=data").unwrap()).unwrap();
    let f = fs.create_file("/b").unwrap();
    f.write_at(0, b"synced, then a crash\n").unwrap();
    f.fsync().unwrap();
    drop(f);
    drop(fs);
    assert_eq!(stat_json(std::path::Path::new(img))["journal_clean"].as_bool(), Some(false), "frozen copies not yet home");
    let dump = okeanos(&["journal", "dump", img]);
    assert!(text(&dump).contains("needs recovery"), "{}", text(&dump));
    let check = okeanos(&["fsck", "-n", img]);
    assert_eq!(check.status.code(), Some(4), "{}", text(&check));
    assert!(text(&check).contains("journal needs recovery"), "{}", text(&check));
    let repair = okeanos(&["fsck", img]);
    assert!(repair.status.success(), "{}", text(&repair));
    assert_image_clean(std::path::Path::new(img), "nvm after fsck recovered it");
    assert_eq!(okeanos(&["cat", img, "/b"]).stdout, b"synced, then a crash\n");
    let e = okeanos(&["mkfs", img, "--size", "64M", "--journal", "internal", "--nvm", nvm]);
    assert!(!e.status.success() && text(&e).contains("--nvm goes with --journal nvm"), "{}", text(&e));
}

#[test]
fn mkfs_manylogs_and_every_command_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let p = img.to_str().unwrap();
    let o = okeanos(&["mkfs", p, "--size", "64M", "--journal", "manylogs", "--log-group-size", "8M", "--log-size", "1M"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("manylogs: 8 logs of 256 blocks"), "{}", text(&o));
    let src = dir.path().join("src");
    std::fs::write(&src, b"near the head\n").unwrap();
    assert!(okeanos(&["put", p, src.to_str().unwrap(), "/a"]).status.success());
    assert_eq!(okeanos(&["cat", p, "/a"]).stdout, b"near the head\n");
    assert_eq!(okeanos(&["fsck", p]).status.code(), Some(0));
    // Every read-only command describes the placement as it is (not as an internal ring).
    let o = okeanos(&["journal", "dump", p]);
    assert!(o.status.success() && text(&o).contains("journal: manylogs, 8 logs of 256 blocks, clean"), "{}", text(&o));
    let o = okeanos(&["stat", p]);
    assert!(o.status.success() && text(&o).contains("manylogs, 8 logs of 256 blocks, clean") && !text(&o).contains("internal"), "{}", text(&o));
    let st = stat_json(&img);
    assert_eq!((st["journal"].as_str(), st["journal_clean"].as_bool()), (Some("manylogs"), Some(true)), "{st:#}");
    assert!(text(&okeanos(&["fsck", p])).contains("manylogs, 8 logs of 256 blocks"));
    // Bad geometry and mixed options are refused with the reason, and leave no file behind.
    for (args, why) in [
        (vec!["--log-size", "100K"], "at least 256 blocks"),
        (vec!["--log-group-size", "1G"], "blocks per group"),
        (vec!["--log-size", "5M", "--log-group-size", "8M"], "at most half a group"),
        (vec!["--journal-size", "4M"], "leave out --journal-size"),
    ] {
        let other = dir.path().join("other");
        let mut a = vec!["mkfs", other.to_str().unwrap(), "--size", "64M", "--journal", "manylogs"];
        a.extend(args);
        let o = okeanos(&a);
        assert!(!o.status.success() && text(&o).contains(why), "{a:?}: {}", text(&o));
        assert!(!other.exists(), "{a:?} left a file");
    }
    let o = okeanos(&["mkfs", dir.path().join("x").to_str().unwrap(), "--size", "64M", "--log-size", "1M"]);
    assert!(!o.status.success() && text(&o).contains("go with --journal manylogs"), "{}", text(&o));
}

/// fsck exits as e2fsck does: 8 when it could check nothing (a random file, a truncated image,
/// a missing external journal, an image in use without -n); and the messages a new user meets
/// name the right thing: an external journal given as the image, `--journal` (not
/// `journal_path=`) for the command, a missing image, a missing mount point, a directory that
/// is not mounted.
#[test]
fn fsck_exit_codes_and_the_messages_a_new_user_meets() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    std::fs::write(d("random"), (0..1u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect::<Vec<u8>>()).unwrap();
    let o = okeanos(&["fsck", &d("random")]);
    assert_eq!(o.status.code(), Some(8), "random file: {}", text(&o));
    assert!(text(&o).contains("not an Okeanos"), "{}", text(&o));
    mkfs(Path::new(&d("img")));
    let bytes = std::fs::read(d("img")).unwrap();
    std::fs::write(d("short"), &bytes[..bytes.len() / 2]).unwrap();
    let o = okeanos(&["fsck", &d("short")]);
    assert_eq!(o.status.code(), Some(8), "truncated image: {}", text(&o));
    assert!(text(&o).contains("truncated"), "{}", text(&o));
    // An external journal.
    let o = okeanos(&["mkfs", &d("ext"), "--size", "32M", "--journal-device", &d("j"), "--journal-size", "4M"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = okeanos(&["fsck", &d("ext")]);
    assert_eq!(o.status.code(), Some(8), "journal not given: {}", text(&o));
    assert!(text(&o).contains("--journal FILE"), "{}", text(&o));
    let o = okeanos(&["fsck", &d("ext"), "--journal", &d("missing")]);
    assert_eq!(o.status.code(), Some(8), "missing journal: {}", text(&o));
    assert!(text(&o).contains("No such file"), "{}", text(&o));
    let src = dir.path().join("src");
    std::fs::write(&src, b"x").unwrap();
    let o = okeanos(&["put", &d("ext"), src.to_str().unwrap(), "/a"]);
    assert!(!o.status.success() && text(&o).contains("--journal FILE"), "{}", text(&o));
    let o = okeanos(&["journal", "dump", &d("j")]);
    assert!(!o.status.success() && text(&o).contains("is the external journal of file system"), "{}", text(&o));
    assert!(!text(&o).contains("bad magic"), "{}", text(&o));
    // A missing image; an image in use without -n.
    let o = okeanos(&["stat", &d("nonexistent")]);
    assert!(!o.status.success() && text(&o).contains("No such file") && !text(&o).contains("I/O error"), "{}", text(&o));
    let fs = Okeanos::open(Path::new(&d("img")), MountOptions::default()).unwrap();
    let o = okeanos(&["fsck", &d("img")]);
    assert_eq!(o.status.code(), Some(8), "in use: {}", text(&o));
    assert!(text(&o).contains("in use by") && text(&o).contains("fsck -n"), "{}", text(&o));
    drop(fs);
    // Mount points.
    let o = okeanos(&["mount", &d("img"), &d("nowhere")]);
    assert!(!o.status.success() && text(&o).contains("does not exist"), "{}", text(&o));
    std::fs::create_dir(d("plain")).unwrap();
    let o = okeanos(&["umount", &d("plain")]);
    assert!(!o.status.success(), "{}", text(&o));
    assert_eq!(text(&o).trim().lines().count(), 1, "one line: {}", text(&o));
    assert!(text(&o).contains("is not mounted"), "{}", text(&o));
}

#[test]
fn sim_trace_replays_a_workload_and_a_trace_file_under_every_scheme() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("w3.json");
    let o = okeanos(&["sim", "trace", "--workload", "w3", "--duration", "60s", "--json", json.to_str().unwrap(), "--plot", dir.path().join("plots").to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("mlb-256 over nologging") && t.contains("mlsmr over slsmr"), "{t}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let runs = v["runs"].as_array().unwrap();
    let schemes: Vec<&str> = runs.iter().map(|r| r["scheme"].as_str().unwrap()).collect();
    assert_eq!(schemes, ["nologging", "mlb-32", "mlb-256", "slsmr", "mlsmr"]);
    for r in runs {
        assert!(r["latency_us"]["mean"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert!(dir.path().join("plots/trace-w3-cdf.png").exists());
    // A trace file in the MSR Cambridge format; a malformed one names its line.
    let csv = dir.path().join("msr.csv");
    let mut lines = String::from("Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n");
    for k in 0..200u64 {
        let kind = if k % 3 == 0 { "Write" } else { "Read" };
        lines.push_str(&format!("{},h,0,{kind},{},{},100\n", 128166372000000000 + k * 200_000, (k * 7919 % 1000) * (1 << 24), 4096 * (1 + k % 4)));
    }
    std::fs::write(&csv, lines).unwrap();
    let o = okeanos(&["sim", "trace", "--trace", csv.to_str().unwrap(), "--schemes", "nologging,mlb-256"]);
    assert!(o.status.success() && text(&o).contains("200 I/Os"), "{}", text(&o));
    std::fs::write(&csv, "1,h,0,Write,0,4096,1\n2,h,0,Trim,0,4096,1\n").unwrap();
    let o = okeanos(&["sim", "trace", "--trace", csv.to_str().unwrap()]);
    assert!(!o.status.success() && text(&o).contains("line 2"), "{}", text(&o));
    let o = okeanos(&["sim", "trace", "--workload", "w9"]);
    assert!(!o.status.success() && text(&o).contains("w1..w5"), "{}", text(&o));
}

/// Inode notes seen from the command line: a crash after synced appends under
/// wasteless+dmeta leaves fast commits whose inode changes are notes; `journal dump` lists
/// each note (its inode, size, times), `recover` replays them, and the file reads whole with
/// the size the note told.
#[test]
fn journal_dump_shows_inode_notes_and_recover_replays_them() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("noted");
    Okeanos::mkfs_file(&img, 32 << 20, &MkfsOptions { journal_blocks: 4096, ..Default::default() }).unwrap();
    let fs = Okeanos::open(&img, MountOptions::parse("data=wasteless+dmeta").unwrap()).unwrap();
    let f = fs.create_file("/log").unwrap();
    f.append(b"first record\n").unwrap();
    f.fsync().unwrap();
    for k in 0..3 {
        f.append(format!("appended record {k}\n").as_bytes()).unwrap();
        f.fsync().unwrap();
    }
    assert!(fs.counters().inode_notes >= 3, "{} notes", fs.counters().inode_notes);
    drop(f);
    drop(fs);
    let p = img.to_str().unwrap();
    let want = "first record\nappended record 0\nappended record 1\nappended record 2\n";
    let dump = text(&okeanos(&["journal", "dump", p]));
    let notes: Vec<&str> = dump.lines().filter(|l| l.trim_start().starts_with("note")).collect();
    assert!(notes.len() >= 3, "{dump}");
    assert!(notes.iter().any(|l| l.contains(&format!("size {}", want.len()))), "the last note tells the whole size: {notes:?}");
    assert!(okeanos(&["recover", p]).status.success());
    assert_eq!(String::from_utf8_lossy(&okeanos(&["cat", p, "/log"]).stdout), want);
    assert_image_clean(&img, "after replaying inode notes");
}

//! The okeanos command end to end: exit codes, messages, and that fsck fails on damage.

use std::process::{Command, Output};

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

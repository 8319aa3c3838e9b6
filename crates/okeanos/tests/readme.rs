//! The README's library example runs as written, twice on the same image (the second run opens
//! what the first made and appends), and its errors are sentences.

#[path = "../examples/readme.rs"]
#[allow(dead_code)]
mod readme;

#[test]
fn the_readme_example_runs_twice() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img.okfs");
    readme::run(&img).unwrap();
    readme::run(&img).unwrap();
    let fs = okeanos::Okeanos::open(&img, okeanos::MountOptions::default()).unwrap();
    assert_eq!(fs.read_path("/tenant-7.log").unwrap(), b"record\nrecord\n");
    fs.unmount().unwrap();
    // A second mkfs of the file is refused with a sentence, in Debug too (what `main` prints).
    let e = okeanos::Okeanos::mkfs_file(&img, 1 << 30, &okeanos::MkfsOptions::default()).unwrap_err();
    let shown = format!("{e:?}");
    assert!(shown.contains("exists already") && !shown.contains("Device(") && !shown.contains("Io {"), "{shown}");
}

//! The C ABI from C: bindings/c/tests/test_okeanos.c, compiled against bindings/c/okeanos.h and
//! linked once with libokeanos.so and once with libokeanos.a, exercises every function and
//! every kind of bad input; then a multithreaded appender is killed with SIGKILL and every
//! record it acknowledged must come back.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// target/<profile>, where cargo put libokeanos.so and libokeanos.a (`cargo build` or
/// `cargo test` of this crate builds them).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    for lib in ["libokeanos.so", "libokeanos.a"] {
        assert!(dir.join(lib).exists(), "{} is missing: build the workspace first (cargo build --workspace)", dir.join(lib).display());
    }
    dir
}

/// Compiles the test program; `static_lib` links libokeanos.a instead of the shared library.
pub fn build(out: &Path, static_lib: bool) -> PathBuf {
    compile(out, "bindings/c/tests/test_okeanos.c", if static_lib { "test_okeanos_static" } else { "test_okeanos" }, static_lib)
}

fn compile(out: &Path, source: &str, name: &str, static_lib: bool) -> PathBuf {
    let repo = repo();
    let lib = lib_dir();
    let exe = out.join(name);
    let mut cc = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
    cc.args(["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-o"]).arg(&exe).arg("-I").arg(repo.join("bindings/c")).arg(repo.join(source));
    if static_lib {
        cc.arg(lib.join("libokeanos.a")).args(["-lpthread", "-ldl", "-lm"]);
    } else {
        cc.arg("-L").arg(&lib).arg("-lokeanos").arg(format!("-Wl,-rpath,{}", lib.display())).arg("-lpthread");
    }
    let st = cc.status().expect("a C compiler (cc)");
    assert!(st.success(), "compiling {source} failed");
    exe
}

fn run(exe: &Path, args: &[&str]) -> String {
    let o = Command::new(exe).args(args).output().unwrap();
    let (so, se) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{} {args:?} failed ({}):\n{so}\n{se}", exe.display(), o.status);
    so.into_owned()
}

#[test]
fn every_function_from_c_with_the_shared_and_the_static_library() {
    let tmp = tempfile::tempdir().unwrap();
    for static_lib in [false, true] {
        let exe = build(tmp.path(), static_lib);
        let work = tmp.path().join(if static_lib { "static" } else { "shared" });
        std::fs::create_dir(&work).unwrap();
        let out = run(&exe, &["all", work.to_str().unwrap()]);
        assert!(out.contains("all checks passed"), "{out}");
    }
}

#[test]
fn a_killed_multithreaded_appender_keeps_every_acknowledged_record() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = build(tmp.path(), false);
    let img = tmp.path().join("kill.img");
    let acks = tmp.path().join("acks");
    for round in 0..3 {
        let _ = std::fs::remove_file(&img);
        run(&exe, &["mkfs", img.to_str().unwrap(), &(64u64 << 20).to_string()]);
        let out = std::fs::File::create(&acks).unwrap();
        let mut child = Command::new(&exe).args(["append", img.to_str().unwrap(), "8"]).stdout(out).stderr(Stdio::inherit()).spawn().unwrap();
        // Let it acknowledge a good number of records, then kill it without warning.
        let t0 = Instant::now();
        while std::fs::metadata(&acks).map_or(0, |m| m.len()) < 20_000 && t0.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(20));
        }
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let _ = child.wait();
        let n = std::fs::read_to_string(&acks).unwrap().lines().filter(|l| l.starts_with("ack ")).count();
        assert!(n > 50, "round {round}: only {n} records were acknowledged before the kill");
        let out = run(&exe, &["verify", img.to_str().unwrap(), acks.to_str().unwrap()]);
        eprintln!("round {round}: killed after {n} acknowledgements; {}", out.trim());
    }
    // The check can fail: a record acknowledged but never written is caught.
    std::fs::write(&acks, "ack 0 0\nack 3 999999\n").unwrap();
    let o = Command::new(&exe).args(["verify", img.to_str().unwrap(), acks.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "verify did not catch a missing record: {}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn the_documented_c_example_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = compile(tmp.path(), "bindings/c/examples/quickstart.c", "quickstart", false);
    let out = run(&exe, &[tmp.path().to_str().unwrap()]);
    assert!(out.contains("durable bytes of /tenant-0.log: tenant=0 temp=21.5"), "{out}");
}

//! Model-based tests: random sequences of file operations run against the engine and against
//! an in-memory model; contents, sizes, link counts and directory listings must agree, across
//! unmounts and remounts (also in another content policy), and fsck must find nothing.

mod common;
use common::*;
use okeanos::{DataMode, FsError, Okeanos};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone)]
enum Op {
    Create { dir: u8, name: u8 },
    Write { file: u8, off: u32, len: u16, seed: u8 },
    Append { file: u8, len: u16, seed: u8 },
    Truncate { file: u8, size: u32 },
    Unlink { file: u8 },
    Mkdir { dir: u8 },
    Rmdir { dir: u8 },
    Rename { file: u8, dir: u8, name: u8 },
    Link { file: u8, dir: u8, name: u8 },
    Fsync { file: u8 },
    Remount { mode: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..4, 0u8..6).prop_map(|(dir, name)| Op::Create { dir, name }),
        5 => (any::<u8>(), 0u32..70_000, 1u16..20_000, any::<u8>()).prop_map(|(file, off, len, seed)| Op::Write { file, off, len, seed }),
        5 => (any::<u8>(), 1u16..5000, any::<u8>()).prop_map(|(file, len, seed)| Op::Append { file, len, seed }),
        2 => (any::<u8>(), 0u32..80_000).prop_map(|(file, size)| Op::Truncate { file, size }),
        2 => any::<u8>().prop_map(|file| Op::Unlink { file }),
        1 => (1u8..4).prop_map(|dir| Op::Mkdir { dir }),
        1 => (1u8..4).prop_map(|dir| Op::Rmdir { dir }),
        2 => (any::<u8>(), 0u8..4, 0u8..6).prop_map(|(file, dir, name)| Op::Rename { file, dir, name }),
        1 => (any::<u8>(), 0u8..4, 0u8..6).prop_map(|(file, dir, name)| Op::Link { file, dir, name }),
        2 => any::<u8>().prop_map(|file| Op::Fsync { file }),
        1 => (0u8..5).prop_map(|mode| Op::Remount { mode }),
    ]
}

fn dir_path(d: u8) -> String {
    if d == 0 { String::new() } else { format!("/d{d}") }
}

/// The model: paths to file ids, file ids to contents; directories.
#[derive(Default)]
struct Model {
    names: BTreeMap<String, usize>,
    files: HashMap<usize, Vec<u8>>,
    dirs: Vec<u8>,
    next: usize,
}

impl Model {
    fn dir_exists(&self, d: u8) -> bool {
        d == 0 || self.dirs.contains(&d)
    }
    fn pick(&self, k: u8) -> Option<String> {
        if self.names.is_empty() {
            return None;
        }
        self.names.keys().nth(k as usize % self.names.len()).cloned()
    }
    fn links(&self, id: usize) -> usize {
        self.names.values().filter(|&&x| x == id).count()
    }
}

fn data(seed: u8, len: usize) -> Vec<u8> {
    record(seed as usize, len, len)
}

fn apply(fs: &mut Okeanos, m: &mut Model, op: &Op, mode: &mut DataMode, dev: &std::sync::Arc<okeanos::MemDevice>) -> Result<(), String> {
    let expect = |ok: bool, r: Result<(), FsError>, what: &str| -> Result<(), String> {
        match (ok, r) {
            (true, Ok(())) | (false, Err(_)) => Ok(()),
            (true, Err(e)) => Err(format!("{what}: engine failed with {e}, model succeeded")),
            (false, Ok(())) => Err(format!("{what}: engine succeeded, model says it must fail")),
        }
    };
    match *op {
        Op::Create { dir, name } => {
            let p = format!("{}/f{name}", dir_path(dir));
            let ok = m.dir_exists(dir);
            let r = fs.create_file(&p).map(|_| ());
            expect(ok, r, &p)?;
            if ok {
                match m.names.get(&p) {
                    Some(&id) => {
                        m.files.insert(id, Vec::new());
                    }
                    None => {
                        m.names.insert(p, m.next);
                        m.files.insert(m.next, Vec::new());
                        m.next += 1;
                    }
                }
            }
        }
        Op::Write { file, off, len, seed } => {
            let Some(p) = m.pick(file) else { return Ok(()) };
            let d = data(seed, len as usize);
            fs.open_file(&p).and_then(|f| f.write_at(off as u64, &d)).map_err(|e| format!("write {p}: {e}"))?;
            let c = m.files.get_mut(&m.names[&p]).unwrap();
            if c.len() < off as usize + d.len() {
                c.resize(off as usize + d.len(), 0);
            }
            c[off as usize..off as usize + d.len()].copy_from_slice(&d);
        }
        Op::Append { file, len, seed } => {
            let Some(p) = m.pick(file) else { return Ok(()) };
            let d = data(seed, len as usize);
            fs.open_file(&p).and_then(|f| f.append(&d)).map_err(|e| format!("append {p}: {e}"))?;
            m.files.get_mut(&m.names[&p]).unwrap().extend_from_slice(&d);
        }
        Op::Truncate { file, size } => {
            let Some(p) = m.pick(file) else { return Ok(()) };
            fs.open_file(&p).and_then(|f| f.set_len(size as u64)).map_err(|e| format!("truncate {p}: {e}"))?;
            m.files.get_mut(&m.names[&p]).unwrap().resize(size as usize, 0);
        }
        Op::Unlink { file } => {
            let Some(p) = m.pick(file) else { return Ok(()) };
            fs.remove_path(&p).map_err(|e| format!("unlink {p}: {e}"))?;
            let id = m.names.remove(&p).unwrap();
            if m.links(id) == 0 {
                m.files.remove(&id);
            }
        }
        Op::Mkdir { dir } => {
            let ok = !m.dir_exists(dir);
            expect(ok, fs.mkdir_path(&dir_path(dir)).map(|_| ()), "mkdir")?;
            if ok {
                m.dirs.push(dir);
            }
        }
        Op::Rmdir { dir } => {
            let prefix = format!("{}/", dir_path(dir));
            let ok = m.dir_exists(dir) && !m.names.keys().any(|k| k.starts_with(&prefix));
            expect(ok, fs.rmdir_path(&dir_path(dir)), "rmdir")?;
            if ok {
                m.dirs.retain(|&d| d != dir);
            }
        }
        Op::Rename { file, dir, name } => {
            let Some(p) = m.pick(file) else { return Ok(()) };
            let q = format!("{}/f{name}", dir_path(dir));
            let ok = m.dir_exists(dir);
            expect(ok, fs.rename_path(&p, &q), &format!("rename {p} {q}"))?;
            // POSIX: renaming a name onto another link of the same file does nothing.
            if ok && m.names.get(&q) != m.names.get(&p) {
                let id = m.names.remove(&p).unwrap();
                if let Some(old) = m.names.insert(q, id) {
                    if old != id && m.links(old) == 0 {
                        m.files.remove(&old);
                    }
                }
            }
        }
        Op::Link { file, dir, name } => {
            let Some(p) = m.pick(file) else { return Ok(()) };
            let q = format!("{}/f{name}", dir_path(dir));
            let ok = m.dir_exists(dir) && !m.names.contains_key(&q);
            let r = fs.resolve(&p).and_then(|ino| fs.link(ino, fs.resolve(&dir_path(dir))?, format!("f{name}").as_bytes()).map(|_| ()));
            expect(ok, r, &format!("link {p} {q}"))?;
            if ok {
                let id = m.names[&p];
                m.names.insert(q, id);
            }
        }
        Op::Fsync { file } => {
            let Some(p) = m.pick(file) else { return Ok(()) };
            fs.open_file(&p).and_then(|f| f.fsync()).map_err(|e| format!("fsync {p}: {e}"))?;
        }
        Op::Remount { mode: k } => {
            let new = DataMode::ALL[k as usize];
            fs.clone().unmount().map_err(|e| format!("unmount: {e}"))?;
            *fs = mount(dev, new);
            *mode = new;
        }
    }
    Ok(())
}

fn compare(fs: &Okeanos, m: &Model) -> Result<(), String> {
    for (p, id) in &m.names {
        let want = &m.files[id];
        let got = fs.read_path(p).map_err(|e| format!("read {p}: {e}"))?;
        if &got != want {
            let first = got.iter().zip(want.iter()).position(|(a, b)| a != b);
            return Err(format!("{p}: {} bytes, model {} bytes, first difference at {first:?}", got.len(), want.len()));
        }
        let nlink = fs.getattr(fs.resolve(p).unwrap()).unwrap().nlink as usize;
        if nlink != m.links(*id) {
            return Err(format!("{p}: nlink {nlink}, model {}", m.links(*id)));
        }
    }
    for d in std::iter::once(0).chain(m.dirs.iter().copied()) {
        let dp = dir_path(d);
        let mut got: Vec<String> = fs.list_path(if dp.is_empty() { "/" } else { &dp }).map_err(|e| e.to_string())?.into_iter().map(|e| String::from_utf8(e.name).unwrap()).collect();
        got.sort();
        let mut want: Vec<String> = m.names.keys().filter_map(|k| k.strip_prefix(&format!("{dp}/")).filter(|r| !r.contains('/')).map(String::from)).collect();
        if d == 0 {
            want.extend(m.dirs.iter().map(|x| format!("d{x}")));
        }
        want.sort();
        if got != want {
            return Err(format!("listing of {dp:?}: {got:?} vs model {want:?}"));
        }
    }
    Ok(())
}

fn run(ops: &[Op], start: DataMode) -> Result<(), String> {
    let dev = mem_fs(16 * MB, 256);
    let mut mode = start;
    let mut fs = mount(&dev, mode);
    let mut m = Model::default();
    for (i, op) in ops.iter().enumerate() {
        apply(&mut fs, &mut m, op, &mut mode, &dev).map_err(|e| format!("op {i} {op:?}: {e}"))?;
        if matches!(op, Op::Remount { .. }) {
            compare(&fs, &m).map_err(|e| format!("after remount at op {i}: {e}"))?;
        }
    }
    compare(&fs, &m)?;
    fs.unmount().map_err(|e| e.to_string())?;
    let r = okeanos::fsck(dev.clone(), None);
    if !r.is_clean() {
        return Err(format!("fsck: {:?}", r.problems));
    }
    let fs = mount(&dev, mode);
    compare(&fs, &m).map_err(|e| format!("after final remount: {e}"))?;
    fs.unmount().map_err(|e| e.to_string())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
    #[test]
    fn engine_matches_model(ops in proptest::collection::vec(op(), 1..120), start in 0usize..5) {
        if let Err(e) = run(&ops, DataMode::ALL[start]) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// A long random workload, then fsck: no problem.
#[test]
fn long_random_workload_passes_fsck() {
    let mut rng = proptest::test_runner::TestRunner::deterministic();
    let ops = proptest::collection::vec(op(), 3000).new_tree(&mut rng).unwrap().current();
    run(&ops, DataMode::Data).unwrap();
}

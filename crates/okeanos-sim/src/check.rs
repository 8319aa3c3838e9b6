//! The crash guarantee of each content policy (docs/DESIGN.md section 3), checked on a recovered
//! file system against the history of what was written and acknowledged. Shared by the crash
//! tests and the simulator's crash fuzzer.

use okeanos::journal::content::DataMode;
use okeanos::{FsError, Okeanos};
use std::collections::BTreeMap;

/// One file's history: its versions (the event count when each write started, and the
/// content after it), when it was created, and the syncs acknowledged (event count at return,
/// version synced).
#[derive(Debug, Default, Clone)]
pub struct History {
    pub created_at: usize,
    pub versions: Vec<(usize, Vec<u8>)>,
    pub acks: Vec<(usize, usize)>,
    /// Every write of the file was below selective journaling's write threshold (each starts
    /// a journaled sequence): under selective it must recover as under data journaling.
    pub journaled: bool,
}

impl History {
    /// A file created (empty) after `at` events.
    pub fn new(at: usize) -> Self {
        History { created_at: at, versions: vec![(at, Vec::new())], acks: Vec::new(), journaled: false }
    }

    /// An append of `data` that started after `at` events.
    pub fn appended(&mut self, at: usize, data: &[u8]) {
        let mut v = self.versions.last().expect("a file has a first version").1.clone();
        v.extend_from_slice(data);
        self.versions.push((at, v));
    }

    /// A sync of the newest version returned after `at` events.
    pub fn synced(&mut self, at: usize) {
        self.acks.push((at, self.versions.len() - 1));
    }
}

/// Checks the guarantee of `mode` on a file system recovered from a crash after `k` device
/// events. `overwritten` names files rewritten in place, whose synced bytes writeback mode
/// need not keep (it may show newer, unsynced bytes there).
pub fn check(mode: DataMode, files: &BTreeMap<String, History>, overwritten: &[String], k: usize, fs: &Okeanos) -> Result<(), String> {
    let mut names: Vec<&String> = files.keys().collect();
    names.sort();
    for name in names {
        let h = &files[name];
        let synced = h.acks.iter().filter(|(at, _)| *at <= k).map(|&(_, v)| v).max();
        let content = match fs.resolve(name) {
            Ok(ino) => {
                let size = fs.getattr(ino).map_err(|e| e.to_string())?.size;
                fs.read(ino, 0, size as usize).map_err(|e| format!("{name}: read: {e}"))?
            }
            Err(FsError::NotFound) => {
                if synced.is_some() {
                    return Err(format!("{name}: synced but missing after recovery"));
                }
                continue;
            }
            Err(e) => return Err(format!("{name}: {e}")),
        };
        if h.created_at > k {
            return Err(format!("{name}: exists although it was created after the crash point"));
        }
        let s = synced.unwrap_or(0);
        // Versions the recovered file may show: the synced one and any later one begun before
        // the crash.
        let possible: Vec<&Vec<u8>> = h.versions.iter().skip(s).filter(|(at, _)| *at <= k).map(|(_, v)| v).collect();
        let floor = synced.map_or(0, |v| h.versions[v].1.len());
        if content.len() < floor {
            return Err(format!("{name}: {} bytes after recovery, {floor} were synced", content.len()));
        }
        match mode {
            // Data journaling: each write atomic, so the content is exactly one version.
            DataMode::Data | DataMode::Wasteless => {
                if !possible.iter().any(|v| **v == content) {
                    return Err(format!("{name}: {} bytes recovered match no version at or after the synced one", content.len()));
                }
            }
            // Selective journals every write of a file whose writes all start sequences below
            // its threshold: such a file recovers as under data journaling.
            DataMode::Selective if h.journaled => {
                if !possible.iter().any(|v| **v == content) {
                    return Err(format!("{name}: {} bytes recovered match no version at or after the synced one (every write of it was journaled)", content.len()));
                }
            }
            // No stale data and no lost data: the size is one of the possible versions', and
            // every byte is what one of them holds at that offset — a zero only where a version
            // has a zero (a hole, a truncate up), never where all of them hold data (a commit
            // that went before its ordered data).
            DataMode::Ordered | DataMode::Selective => {
                if !possible.iter().any(|v| v.len() == content.len()) {
                    return Err(format!("{name}: recovered size {} is no version's size", content.len()));
                }
                if let Some(i) = (0..content.len()).find(|&i| !possible.iter().any(|v| v.get(i) == Some(&content[i]))) {
                    let what = if content[i] == 0 { "a zero where every possible version holds data (written data lost)" } else { "never written there" };
                    return Err(format!("{name}: byte {i} ({}) is {what}", content[i]));
                }
            }
            DataMode::Writeback => {
                let full = &h.versions.last().expect("a file has a first version").1;
                if !overwritten.contains(name) && content[..floor] != full[..floor] {
                    return Err(format!("{name}: synced bytes differ after recovery"));
                }
            }
        }
    }
    Ok(())
}

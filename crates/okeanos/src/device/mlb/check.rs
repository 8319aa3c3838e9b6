//! Checking an MLB disk (`okeanos blockdev check`): every log holds whole records from its
//! tail to its head, one after another, and every entry of the map points at a block of one of
//! them that belongs to the entry's user block.

use super::recover::next_record;
use super::MlbDevice;
use crate::device::{Device, DeviceError};
use crate::format::mlb::{RecordHeader, SECTORS_PER_BLOCK};
use std::collections::HashMap;

/// What `check` found.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct MlbCheck {
    /// Whole records between the logs' tails and heads.
    pub records: u64,
    pub mapped_blocks: u64,
    /// Each thing that is wrong, in words; empty when the disk is consistent.
    pub problems: Vec<String>,
}

impl MlbCheck {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

impl MlbDevice {
    /// Verifies the logs and the map against each other (reads every live record).
    pub fn check(&self) -> Result<MlbCheck, DeviceError> {
        self.poison.check(&self.name())?;
        let st = self.lock_read();
        let mut out = MlbCheck { mapped_blocks: st.map.len() as u64, ..Default::default() };
        // (log, sector of a block) -> the user block a record put there.
        let mut holds: HashMap<(u32, u32), u64> = HashMap::new();
        let ls = self.sb.log_sectors();
        for g in 0..self.sb.groups {
            let l = st.logs[g as usize];
            let mut pos = l.tail;
            let mut prev: Option<RecordHeader> = None;
            for _ in 0..ls {
                if pos >= l.head {
                    break;
                }
                let want = |h: &RecordHeader| match prev {
                    None => h.epoch <= st.epoch,
                    Some(p) => h.log_seq == p.log_seq + 1 && h.epoch >= p.epoch && h.epoch <= st.epoch && h.seq > p.seq,
                };
                let Some(f) = next_record(&*self.inner, &self.sb, g, pos, l.tail, want)? else { break };
                let phys = f.at % ls;
                for i in 0..f.header.blocks as u64 {
                    holds.insert((g, (phys + 1 + i * SECTORS_PER_BLOCK) as u32), f.header.home + i);
                }
                out.records += 1;
                pos = f.at + RecordHeader::sectors(f.header.blocks);
                prev = Some(f.header);
            }
            if pos != l.head {
                out.problems.push(format!("log {g}: whole records run from its tail {} to {pos}, but its head is {}", l.tail, l.head));
            }
            if prev.is_some_and(|p| p.log_seq + 1 != l.next_log_seq) {
                out.problems.push(format!("log {g}: its last record is number {}, but the next is to be {}", prev.unwrap().log_seq, l.next_log_seq));
            }
        }
        let mut live = vec![0u64; self.sb.groups as usize];
        for (&home, loc) in &st.map {
            live[loc.log as usize] += 1;
            match holds.get(&(loc.log, loc.sector)) {
                Some(&h) if h == home => {}
                Some(&h) => out.problems.push(format!("block {home} is mapped to log {} sector {}, which holds block {h}", loc.log, loc.sector)),
                None => out.problems.push(format!("block {home} is mapped to log {} sector {}, where no whole record holds it", loc.log, loc.sector)),
            }
        }
        for (g, l) in st.logs.iter().enumerate() {
            if l.live != live[g] {
                out.problems.push(format!("log {g}: counted {} mapped blocks, the map has {}", l.live, live[g]));
            }
        }
        Ok(out)
    }
}

//! The probe after a failed scan: the torn tail of the log, or damage in its middle (the
//! second decision table of the module notes).

use crate::ids::LogPos;
use super::*;

/// A transaction that failed its checks with committed transactions after it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Damage {
    /// The damaged transaction.
    pub tid: Tid,
    /// Its first log block; none where the damage is not in a log (a mapped block that fails
    /// its checksum, or a transaction missing from every log).
    pub pos: Option<LogPos>,
    /// Why the scan rejected it.
    pub reason: String,
    /// Committed transactions found after it (not replayed).
    pub following: u64,
    /// The first and last of them.
    pub following_tids: (Tid, Tid),
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "journal transaction {}{} is damaged ({}); {} committed transaction{} after it ({}..={}) were not replayed",
            self.tid,
            self.pos.map_or(String::new(), |p| format!(" at log block {p}")),
            self.reason,
            self.following,
            if self.following == 1 { "" } else { "s" },
            self.following_tids.0,
            self.following_tids.1
        )
    }
}

/// Checks a block's header fully (its CRC too): the kind and tid of a valid descriptor,
/// revoke or commit block.
pub(super) fn checked_header(block: &[u8]) -> Option<(JBlockType, Tid)> {
    let (kind, tid) = jf::header(block)?;
    let ok = match kind {
        JBlockType::Descriptor => Descriptor::decode(block).is_ok(),
        JBlockType::Revoke => RevokeBlock::decode(block).is_ok(),
        JBlockType::Commit => CommitBlock::decode(block).is_ok(),
        // A span's first block: its header alone (its hash needs the whole span, which the
        // scan from it reads).
        JBlockType::FastCommit => match jf::FastCommit::first_span(block) {
            Ok(s) if s.blocks > 1 => true,
            Ok(_) => jf::FastCommit::decode(block, true).is_ok(),
            Err(_) => false,
        },
        // A continuation has no check of its own: it counts as a block without a header.
        JBlockType::FastCommitMore | JBlockType::Superblock => false,
    };
    ok.then_some((kind, tid))
}

/// Tells a torn tail from damage after a scan stopped on a failure (the second table of the
/// module notes). Driven like [`Scan`]: [`Probe::next_read`], [`Probe::feed`].
#[derive(Debug)]
pub struct Probe {
    region: LogRegion,
    fs: super::FsBounds,
    multiwrite: bool,
    failed_tid: Tid,
    failed_pos: LogPos,
    /// Commits the crashed mount may have had in flight at once: a committed transaction up to
    /// this many tids past the failed one may have landed while the failed one did not.
    pipeline: u32,
    reason: String,
    pos: LogPos,
    /// Ring positions left to look at.
    left: u64,
    /// Blocks since the last valid header, and the most a whole transaction can have.
    gap: u64,
    max_gap: u64,
    /// A scan from a candidate: its start position.
    sub: Option<(LogPos, Scan)>,
    done: bool,
    pub blocks_read: u64,
    pub damage: Option<Damage>,
    /// The highest tid of a valid header the probe saw.
    pub max_tid_seen: Tid,
}

impl Probe {
    /// The probe after `scan`, or None if the scan did not stop on a failure.
    pub fn after(scan: &Scan, block_size: usize) -> Option<Probe> {
        let start = scan.fail_start?;
        let max_gap = 2 * Descriptor::capacity(block_size) as u64 + 2;
        // Past an interleaved log's recorded end, only transactions newer than everything
        // durable then can be committed ones: older headers there are stale, like lower tids
        // of an earlier pass.
        let failed_tid = match scan.past_end {
            Some((_, min)) if scan.is_past_end(start) => scan.expected.max(min),
            _ => scan.expected,
        };
        Some(Probe {
            region: scan.region,
            fs: scan.fs,
            multiwrite: scan.multiwrite,
            failed_tid,
            failed_pos: start,
            pipeline: scan.pipeline,
            reason: scan.end_reason.clone(),
            // From the failed block itself: it may be a newer transaction's header, or a
            // stale one that ends the log right away.
            pos: start,
            left: scan.region.ring_len(),
            gap: 0,
            max_gap,
            sub: None,
            done: false,
            blocks_read: 0,
            damage: None,
            max_tid_seen: Tid::ZERO,
        })
    }

    pub fn next_read(&self) -> Option<LogPos> {
        if self.done {
            return None;
        }
        match &self.sub {
            Some((_, scan)) => scan.next_read(),
            None => Some(self.pos),
        }
    }

    pub fn feed(&mut self, block: &[u8]) {
        assert!(!self.done, "feed after the probe ended");
        self.blocks_read += 1;
        if let Some((at, mut scan)) = self.sub.take() {
            scan.feed(block);
            return self.after_sub(at, scan);
        }
        match checked_header(block) {
            Some((_, tid)) if tid < self.failed_tid => return self.done = true,
            Some((kind, tid)) => {
                self.max_tid_seen = self.max_tid_seen.max(tid);
                self.gap = 0;
                if tid > self.failed_tid && matches!(kind, JBlockType::Descriptor | JBlockType::Revoke | JBlockType::FastCommit) {
                    let mut scan = Scan::at(self.region, self.fs, self.multiwrite, self.pos, tid);
                    scan.feed(block);
                    return self.after_sub(self.pos, scan);
                }
            }
            None => {
                self.gap += 1;
                if self.gap > self.max_gap {
                    return self.done = true;
                }
            }
        }
        self.advance();
    }

    fn advance(&mut self) {
        self.pos = self.region.next(self.pos);
        self.left -= 1;
        if self.left == 0 {
            self.done = true;
        }
    }

    /// A candidate scan made progress: wait for it, then judge it.
    fn after_sub(&mut self, at: LogPos, scan: Scan) {
        if scan.next_read().is_some() {
            self.sub = Some((at, scan));
            return;
        }
        match (scan.txs.first(), scan.txs.last()) {
            (Some(first), Some(last)) if first.tid.get() <= self.failed_tid.get() + self.pipeline as u64 => {
                // Written while the failed transaction's flush was in flight (pipelined
                // commits): neither was acknowledged, and the log ends at the failed one.
                self.max_tid_seen = self.max_tid_seen.max(last.tid);
                self.done = true;
            }
            (Some(first), Some(last)) => {
                self.max_tid_seen = self.max_tid_seen.max(last.tid);
                self.damage = Some(Damage {
                    tid: self.failed_tid,
                    pos: Some(self.failed_pos),
                    reason: self.reason.clone(),
                    following: scan.txs.len() as u64,
                    following_tids: (first.tid, last.tid),
                });
                self.done = true;
            }
            // Not a committed transaction: look on from the block after the candidate.
            _ => {
                self.pos = at;
                self.advance();
            }
        }
    }
}

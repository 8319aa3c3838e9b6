//! Interleaved logs (manylogs): a log's scan checked against what the log table recorded, the
//! sweep after a fallback to the older table copy, and the merge of every log's transactions by
//! tid (the module notes, "Interleaved logs").

use crate::ids::Tid;
use super::probe::checked_header;
use super::*;

/// An interleaved log (manylogs) whose scan fell short of what the log table recorded as
/// durable, or found another transaction at its tail: committed transactions are missing.
pub fn short_of_table(start: &RecoveryStart, rec: crate::journal::placement::Interleaved, scan: &Scan) -> Option<Damage> {
    let region = start.region;
    let need = region.distance(start.pos, rec.end);
    if need == 0 {
        return None;
    }
    let reached = scan.txs.last().map_or(0, |t| region.distance(start.pos, t.end));
    let first = scan.txs.first().map(|t| t.tid);
    let reason = if first != Some(rec.tail_tid) {
        format!("the log table names transaction {} at position {} of the log at block {}, the scan found {:?} ({})", rec.tail_tid, start.pos, region.base, first, scan.end_reason)
    } else if reached < need {
        format!("the log table records transactions up to position {} of the log at block {}, the scan ended {} blocks short ({})", rec.end, region.base, need - reached, scan.end_reason)
    } else {
        return None;
    };
    Some(Damage { tid: scan.expected_tid(), pos: Some(scan.fail_start.unwrap_or(start.pos)), reason, following: 0, following_tids: (Tid::ZERO, Tid::ZERO) })
}

/// The newest transaction found whole in any of `regions`, trusting no table: every log read
/// from its first position to its last, and each valid descriptor, revoke or fast commit header of a tid
/// above `above` scanned as the start of a transaction. Only transactions committed at or
/// after `since_ns` count (leftovers of a file system made on the device before are older).
/// Used after a fallback to the older copy of the manylogs table (manylogs::sweep_after_fallback).
/// A commit block alone proves nothing: commits are written in one batch with their
/// transaction, so a torn last transaction may leave a valid commit block; a whole transaction
/// was durable.
pub fn sweep_committed<E>(regions: &[LogRegion], fs: super::FsBounds, above: Tid, since_ns: i64, read: &mut dyn FnMut(u64) -> Result<Vec<u8>, E>) -> Result<Option<Tid>, E> {
    let mut newest: Option<Tid> = None;
    for &region in regions {
        for pos in region.positions() {
            let b = read(region.device_block(pos).get())?;
            let Some((kind, tid)) = checked_header(&b) else { continue };
            if tid <= above || newest.is_some_and(|n| tid <= n) || !matches!(kind, JBlockType::Descriptor | JBlockType::Revoke | JBlockType::FastCommit) {
                continue;
            }
            let mut scan = Scan::at(region, fs, true, pos, tid);
            scan.feed(&b);
            while scan.txs.is_empty() {
                let Some(at) = scan.next_read() else { break };
                scan.feed(&read(region.device_block(at).get())?);
            }
            if let Some(t) = scan.txs.first().filter(|t| t.tid == tid && t.commit_time_ns >= since_ns) {
                newest = Some(t.tid);
            }
        }
    }
    Ok(newest)
}

/// Merges the transactions found in interleaved logs (manylogs) into one sequence by tid
/// (the decision table "Interleaved logs" in the module notes). Returns the transactions to
/// replay, the consecutive run from `floor`, and the damage if any transaction is missing.
/// `swept` is the newest whole transaction a sweep of the logs found after a fallback to the
/// older table copy ([`sweep_committed`]; 0: none): at or past the first tid missing from the
/// run, a durable transaction is missing (after a torn table write, recovery finds every
/// whole transaction).
pub fn merge_interleaved(mut txs: Vec<ScannedTx>, floor: Tid, log_damage: Vec<Damage>, swept: Tid) -> (Vec<ScannedTx>, Option<Damage>) {
    txs.sort_by_key(|t| t.tid);
    let run = txs.iter().enumerate().take_while(|(k, t)| t.tid == floor + *k as u64).count();
    let rest = txs.split_off(run);
    let missing = floor + run as u64;
    let unseen = swept >= missing;
    if rest.is_empty() && log_damage.is_empty() && !unseen {
        return (txs, None);
    }
    let mut reason = match rest.first() {
        Some(t) => format!("transaction {missing} is in no log but transaction {} is", t.tid),
        None => String::new(),
    };
    for d in &log_damage {
        if !reason.is_empty() {
            reason.push_str("; ");
        }
        reason.push_str(&d.reason);
    }
    if unseen {
        if !reason.is_empty() {
            reason.push_str("; ");
        }
        reason.push_str(&format!(
            "the newest copy of the log table is damaged, and the logs hold committed transaction {swept}, which recovery from the older copy does not reach (it ends before {missing})"
        ));
    }
    let following = (rest.len() as u64 + log_damage.iter().map(|d| d.following).sum::<u64>()).max(u64::from(unseen));
    let tids = rest.iter().map(|t| t.tid).chain(log_damage.iter().flat_map(|d| [d.following_tids.0, d.following_tids.1])).chain(unseen.then_some(swept)).filter(|&t| t > Tid::ZERO);
    let following_tids = (tids.clone().min().unwrap_or(missing), tids.max().unwrap_or(missing));
    (txs, Some(Damage { tid: missing, pos: log_damage.first().and_then(|d| d.pos), reason, following, following_tids }))
}

//! The counters in Prometheus's text exposition format (version 0.0.4): what a mount's
//! `.okeanos-metrics` file and its `metrics_file=` serve. Metric names and their meaning:
//! docs/OBSERVABILITY.md.

use super::{CommitSizes, Counters, COMMIT_SIZE_BUCKETS};

/// The metric names of [`Counters::prometheus`] with their help text (docs/OBSERVABILITY.md).
pub const METRICS: &[(&str, &str, &str)] = &[
    ("okeanos_syncs_total", "counter", "fsync and fdatasync calls that completed"),
    ("okeanos_commits_total", "counter", "journal transactions committed"),
    ("okeanos_checkpoints_total", "counter", "checkpoints completed"),
    ("okeanos_overlaps_total", "counter", "commits and checkpoints in flight together (the checkpoint thread beside the journal thread)"),
    ("okeanos_led_steps_total", "counter", "journal steps run by a syncing thread leading its write group, not by the journal thread (commit_leader=on)"),
    ("okeanos_staged_appends_total", "counter", "appends staged beside the state lock and folded in by the next thread to take it (stage_appends, on by default)"),
    ("okeanos_staged_new_blocks_total", "counter", "folds of staged appends that started their file's next block, its space set aside when the stage was armed"),
    ("okeanos_pipelined_flushes_total", "counter", "flushes of pipelined commits and fdatasync steps run beside the lanes, by a flusher thread or by the sync that led the commit (commit_pipeline=)"),
    ("okeanos_pipelined_commits_total", "counter", "commits begun while an earlier commit's flush was in flight (commit_pipeline=)"),
    ("okeanos_fast_commits_total", "counter", "commits written as one fast commit, a block or a span (fast_commit=on)"),
    ("okeanos_fast_commit_spans_total", "counter", "fast commits that spanned more than one block (fast_commit_blocks=)"),
    ("okeanos_inode_notes_total", "counter", "inode changes a fast commit told as 12- or 16-byte notes instead of logging their changed bytes under a tag (journal feature fast_commit_notes)"),
    ("okeanos_joined_metadata_blocks_total", "counter", "differential metadata blocks changed in more places than a block's records may be, logged as joined records instead of whole"),
    ("okeanos_commit_in_place_blocks_total", "counter", "data blocks written in place before their commit record (ordered data, selective's in-place sequences, fresh_blocks=in_place)"),
    ("okeanos_commit_in_place_tagged_blocks_total", "counter", "of those, new blocks written beside their commit record under its flush, named by in-place tags"),
    ("okeanos_fallbacks_total", "counter", "times a remote journal fell back to the local journal"),
    ("okeanos_payload_bytes_total", "counter", "bytes written by programs"),
    ("okeanos_journal_bytes_total", "counter", "journal bytes written (or sent to a journal server)"),
    ("okeanos_final_bytes_total", "counter", "bytes written to their final location"),
    ("okeanos_remote_bytes_total", "counter", "journal bytes sent to a journal server or stream"),
    ("okeanos_nvm_bytes_total", "counter", "bytes the nvm journal stored to non-volatile memory"),
    ("okeanos_nvm_fences_total", "counter", "persist fences the nvm journal issued"),
    ("okeanos_checkpoint_blocks_total", "counter", "blocks checkpoints wrote to their final location"),
    ("okeanos_checkpoint_writes_total", "counter", "device writes those took, adjacent blocks merged"),
    ("okeanos_checkpoint_copied_total", "counter", "of those blocks, the ones copied home from a log (manylogs: not in the cache)"),
    ("okeanos_checkpoint_skipped_total", "counter", "logged copies of released transactions that no checkpoint wrote: superseded by a newer copy, or the block freed"),
    ("okeanos_log_reads_total", "counter", "blocks parked in a log read back for a read or a change (manylogs)"),
    ("okeanos_log_swaps_total", "counter", "logs moved whole to an empty log (manylogs log swapping)"),
    ("okeanos_map_snapshots_total", "counter", "periodic snapshots of the manylogs map of logged blocks (snapshot_period=)"),
    ("okeanos_early_writes_total", "counter", "in-place data blocks written before their commit (dirty_background_bytes=, or its backstop)"),
    ("okeanos_datasyncs_in_place_total", "counter", "fdatasyncs of overwrites made durable in place, without a commit (datasync=in_place)"),
    ("okeanos_datasync_steps_total", "counter", "the steps that served them (writes in place and one flush each)"),
    ("okeanos_block_bytes_total", "counter", "bytes written, by kind of block (label kind)"),
    ("okeanos_blocks_total", "counter", "blocks written, by kind (label kind)"),
    ("okeanos_device_bytes_written_total", "counter", "bytes the engine wrote to a device (label device: fs or journal)"),
    ("okeanos_device_flushes_total", "counter", "flushes the engine issued to a device (label device)"),
    ("okeanos_commit_lane_seconds_total", "counter", "where the commit lane's time went (label part: plan, write, flush, finish, answer, lock, window, idle)"),
    ("okeanos_admission_waits_total", "counter", "operations that waited to start, by reason (label reason: commit, space, writeback)"),
    ("okeanos_admission_wait_seconds_total", "counter", "how long they waited, summed over the waiting threads (label reason)"),
    ("okeanos_sync_latency_seconds", "summary", "latency of a sync, from the call to its return"),
    ("okeanos_commit_handles", "histogram", "handles (operations) a commit carried, by commit"),
    ("okeanos_syncs_per_commit", "gauge", "syncs a commit served, on average (group commit)"),
    ("okeanos_recovered_transactions", "gauge", "transactions replayed at this mount"),
    ("okeanos_journal_info", "gauge", "1, with the content policy and where the journal is (labels mode, placement)"),
];

impl Counters {
    /// The counters in the Prometheus text exposition format (version 0.0.4). `mode` and
    /// `placement` become labels of `okeanos_journal_info`.
    pub fn prometheus(&self, mode: &str, placement: &str) -> String {
        use std::fmt::Write;
        let mut o = String::new();
        let help = |o: &mut String, name: &str| {
            if let Some((_, kind, text)) = METRICS.iter().find(|m| m.0 == name) {
                let _ = writeln!(o, "# HELP {name} {text}\n# TYPE {name} {kind}");
            }
        };
        let esc = |v: &str| v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
        for (name, v) in [
            ("okeanos_syncs_total", self.syncs),
            ("okeanos_commits_total", self.commits),
            ("okeanos_checkpoints_total", self.checkpoints),
            ("okeanos_overlaps_total", self.overlaps),
            ("okeanos_led_steps_total", self.led_steps),
            ("okeanos_staged_appends_total", self.staged_appends),
            ("okeanos_staged_new_blocks_total", self.staged_new_blocks),
            ("okeanos_pipelined_flushes_total", self.pipelined_flushes),
            ("okeanos_pipelined_commits_total", self.pipelined_commits),
            ("okeanos_fast_commits_total", self.fast_commits),
            ("okeanos_fast_commit_spans_total", self.fast_spans),
            ("okeanos_inode_notes_total", self.inode_notes),
            ("okeanos_joined_metadata_blocks_total", self.joined_blocks),
            ("okeanos_commit_in_place_blocks_total", self.commit_in_place_blocks),
            ("okeanos_commit_in_place_tagged_blocks_total", self.commit_in_place_tagged_blocks),
            ("okeanos_fallbacks_total", self.fallbacks),
            ("okeanos_payload_bytes_total", self.payload_bytes),
            ("okeanos_journal_bytes_total", self.journal_bytes),
            ("okeanos_final_bytes_total", self.final_bytes),
            ("okeanos_remote_bytes_total", self.remote_bytes),
            ("okeanos_nvm_bytes_total", self.nvm_bytes),
            ("okeanos_nvm_fences_total", self.nvm_fences),
            ("okeanos_checkpoint_blocks_total", self.checkpoint.blocks),
            ("okeanos_checkpoint_writes_total", self.checkpoint.runs),
            ("okeanos_checkpoint_copied_total", self.checkpoint.copied),
            ("okeanos_checkpoint_skipped_total", self.checkpoint.skipped),
            ("okeanos_log_reads_total", self.checkpoint.log_reads),
            ("okeanos_log_swaps_total", self.log_swaps),
            ("okeanos_map_snapshots_total", self.snapshots),
            ("okeanos_early_writes_total", self.early_writes),
            ("okeanos_datasyncs_in_place_total", self.datasyncs_in_place),
            ("okeanos_datasync_steps_total", self.datasync_steps),
        ] {
            help(&mut o, name);
            let _ = writeln!(o, "{name} {v}");
        }
        let kinds = [
            ("descriptor", &self.descriptor),
            ("commit", &self.commit),
            ("revoke", &self.revoke),
            ("multiwrite", &self.multiwrite),
            ("journal_data", &self.journal_data),
            ("journal_meta", &self.journal_meta),
            ("journal_super", &self.journal_super),
            ("final_data", &self.final_data),
            ("final_meta", &self.final_meta),
            ("log_swap", &self.log_swap),
        ];
        help(&mut o, "okeanos_block_bytes_total");
        for (k, c) in kinds {
            let _ = writeln!(o, "okeanos_block_bytes_total{{kind=\"{k}\"}} {}", c.bytes);
        }
        help(&mut o, "okeanos_blocks_total");
        for (k, c) in kinds {
            let _ = writeln!(o, "okeanos_blocks_total{{kind=\"{k}\"}} {}", c.blocks);
        }
        let devices = [("fs", Some(&self.fs_device)), ("journal", self.journal_device.as_ref())];
        help(&mut o, "okeanos_device_bytes_written_total");
        for (d, st) in devices {
            if let Some(st) = st {
                let _ = writeln!(o, "okeanos_device_bytes_written_total{{device=\"{d}\"}} {}", st.bytes_written);
            }
        }
        help(&mut o, "okeanos_device_flushes_total");
        for (d, st) in devices {
            if let Some(st) = st {
                let _ = writeln!(o, "okeanos_device_flushes_total{{device=\"{d}\"}} {}", st.flushes);
            }
        }
        let lane = &self.commit_lane;
        help(&mut o, "okeanos_commit_lane_seconds_total");
        for (part, ns) in lane.parts() {
            let _ = writeln!(o, "okeanos_commit_lane_seconds_total{{part=\"{part}\"}} {}", ns as f64 / 1e9);
        }
        help(&mut o, "okeanos_admission_waits_total");
        for (why, w) in self.admission.parts() {
            let _ = writeln!(o, "okeanos_admission_waits_total{{reason=\"{why}\"}} {}", w.waits);
        }
        help(&mut o, "okeanos_admission_wait_seconds_total");
        for (why, w) in self.admission.parts() {
            let _ = writeln!(o, "okeanos_admission_wait_seconds_total{{reason=\"{why}\"}} {}", w.ns as f64 / 1e9);
        }
        let l = &self.sync_latency;
        help(&mut o, "okeanos_sync_latency_seconds");
        for (q, us) in [("0.5", l.p50_us), ("0.99", l.p99_us), ("0.999", l.p999_us), ("1", l.max_us)] {
            let _ = writeln!(o, "okeanos_sync_latency_seconds{{quantile=\"{q}\"}} {}", us / 1e6);
        }
        let _ = writeln!(o, "okeanos_sync_latency_seconds_sum {}", l.mean_us * l.count as f64 / 1e6);
        let _ = writeln!(o, "okeanos_sync_latency_seconds_count {}", l.count);
        help(&mut o, "okeanos_commit_handles");
        let sizes = &self.commit_sizes;
        let mut below = 0;
        for k in 0..COMMIT_SIZE_BUCKETS - 1 {
            below += sizes.commits[k];
            let _ = writeln!(o, "okeanos_commit_handles_bucket{{le=\"{}\"}} {below}", CommitSizes::range(k).1.unwrap_or(u64::MAX));
        }
        let _ = writeln!(o, "okeanos_commit_handles_bucket{{le=\"+Inf\"}} {}", sizes.commits.iter().sum::<u64>());
        let _ = writeln!(o, "okeanos_commit_handles_sum {}", sizes.handles.iter().sum::<u64>());
        let _ = writeln!(o, "okeanos_commit_handles_count {}", sizes.commits.iter().sum::<u64>());
        help(&mut o, "okeanos_syncs_per_commit");
        let _ = writeln!(o, "okeanos_syncs_per_commit {}", self.syncs_per_commit);
        help(&mut o, "okeanos_recovered_transactions");
        let _ = writeln!(o, "okeanos_recovered_transactions {}", self.recovery.as_ref().map_or(0, |r| r.transactions));
        help(&mut o, "okeanos_journal_info");
        let _ = writeln!(o, "okeanos_journal_info{{mode=\"{}\",placement=\"{}\"}} 1", esc(mode), esc(placement));
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Latency;

    /// Every line is a comment or `name{labels} value` with a number, and every metric has
    /// its HELP and TYPE.
    #[test]
    fn the_prometheus_text_is_well_formed() {
        let mut c = Counters { syncs: 7, commits: 3, ..Default::default() };
        c.sync_latency = Latency { count: 7, mean_us: 100.0, p50_us: 90.0, p99_us: 300.0, p999_us: 400.0, max_us: 500.0 };
        let t = c.prometheus("data=wasteless+dmeta", "remote, \"fallen\" back");
        for line in t.lines() {
            if line.starts_with('#') {
                continue;
            }
            let (name, value) = line.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
            let base = name.split('{').next().unwrap().trim_end_matches("_sum").trim_end_matches("_count").trim_end_matches("_bucket");
            assert!(METRICS.iter().any(|m| m.0 == base), "{base} undocumented");
            assert!(t.contains(&format!("# TYPE {base} ")), "{base} has no TYPE");
        }
        assert!(t.contains("okeanos_syncs_total 7\n"));
        assert!(t.contains("okeanos_sync_latency_seconds{quantile=\"0.99\"} 0.0003\n"));
        assert!(t.contains("placement=\"remote, \\\"fallen\\\" back\""), "{t}");
    }
}

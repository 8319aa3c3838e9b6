//! The canaries, in one place: faults that break one guarantee on purpose, so that the tests
//! that must catch them can be shown to fail. The mount carries them in
//! `MountOptions::faults`; the journal, the placements and the write path read them from the
//! one copy each holds. Nothing else in the engine has a switch of this kind.

/// The canaries: faults that break one guarantee on purpose, so that the crash tests that must
/// catch them can be shown to fail (docs/DESIGN.md, section 3). Test-only: none is accepted by
/// [`MountOptions::parse`] except `fault_panic_write_len`, and that one only with
/// `OKEANOS_TEST_FAULTS=1` in the environment.
#[doc(hidden)]
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// nvm: no fence between the slots and the commit word.
    pub nvm_no_fence: bool,
    /// nvm: older copies freed before the commit point.
    pub nvm_free_early: bool,
    /// remote: no APPEND is sent, so a commit counts as durable without the server.
    pub skip_remote_append: bool,
    /// manylogs: released log space is reused before the log table that records the release.
    pub manylogs_reuse_early: bool,
    /// manylogs: a snapshot keeps data blocks logged that are not whole in any log (records,
    /// escaped copies), so recovery, which reads only past the snapshot, loses them.
    pub manylogs_snapshot_unhomed: bool,
    /// manylogs: a block logged whole again keeps the log position of its first copy, so a
    /// block parked out of the cache loads (and a checkpoint copies home) an older version.
    pub manylogs_keep_first_position: bool,
    /// manylogs: a swap copies into its target log without first recording it reserved.
    pub manylogs_swap_unreserved: bool,
    /// MLB: a snapshot that unmaps blocks (a checkpoint's, a log swap's) is written without
    /// first flushing the home copies or moved records it relies on.
    pub mlb_unmap_early: bool,
    /// MLB: recovery keeps the epoch, so a record it judged lost can be found again by the
    /// next recovery once new records fill the log up to it.
    pub mlb_same_epoch: bool,
    /// Background writeback records its blocks as written without writing them, so commits
    /// leave them out.
    pub early_unwritten: bool,
    /// The in-place fdatasync of overwrites writes them without the flush, so a sync returns
    /// with its data still in the device's cache.
    pub datasync_no_flush: bool,
    /// An fdatasync with nothing overwritten since its file's last in-place request returns
    /// at once instead of waiting for that request, so it may return before the blocks it
    /// asked for are written.
    pub datasync_asked_not_awaited: bool,
    /// The flush that makes a commit durable is skipped (every placement's first canary).
    pub skip_commit_flush: bool,
    /// Ordered data is written after its commit instead of before.
    pub ordered_after_commit: bool,
    /// A pipelined commit's flusher reports the commit durable before its flush instead of
    /// after (`commit_pipeline=`), so a sync returns with its commit in the device's cache.
    pub pipeline_answer_before_flush: bool,
    /// The mount pipelines commits but records no pipeline in the journal superblock, so
    /// recovery takes a pipeline's torn tail for damage in the middle of the log.
    pub pipeline_unrecorded: bool,
    /// Recovery takes a fast commit block on its header alone, checking neither its hash nor
    /// its records' hashes (as the classic commit block's first-sector CRC is trusted), so a
    /// torn fast commit replays stale bytes.
    pub fast_commit_unchecked: bool,
    /// Recovery replays the newest transaction without reading its in-place blocks home
    /// (docs/FORMAT.md, "In-place tags"), so a commit whose new blocks the crash lost is
    /// replayed over blocks never written.
    pub in_place_unchecked: bool,
    /// Recovery replays an inode note's size and times but leaves the inode's old checksum
    /// (docs/FORMAT.md, "Inode notes"), so a replayed inode fails its check.
    pub note_stale_crc: bool,
    /// An fsync of a file with staged appends (`stage_appends=on`) waits for the transaction
    /// before the one holding its newest change, so it may return before that change commits.
    pub stage_sync_early: bool,
    /// A write of exactly this many bytes panics inside its handle, after it changed blocks (a
    /// broken invariant, to test that the journal stops and nothing synced is lost); the
    /// mount's test sets it with `fault_panic_write_len=N`.
    pub panic_write_len: Option<usize>,
}

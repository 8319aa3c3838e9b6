//! Head awareness: which log a commit goes to. The log of the group of the last I/O the
//! journal did not log, if it has room, else the nearest one that has, ahead of the head first
//! (manylogs paper, section III-D), and the count of how near commits landed.

use super::*;

impl Manylogs {
    /// The log the head is at: the group of the last non-logged I/O.
    pub(super) fn head_log(&self) -> usize {
        self.geo.group_of(self.head_block())
    }

    /// The disk block the head is at (the last log written when nothing else is known).
    pub(super) fn head_block(&self) -> u64 {
        self.position.unwrap_or(self.geo.log_starts[self.last_log])
    }

    /// The log with `n` free blocks whose start is nearest the head: within a group, the log
    /// of the group ahead may be nearer than the group's own (logs sit at group starts).
    pub(super) fn choose(&self, n: u64) -> Option<usize> {
        let b = self.head_block();
        let starts = &self.geo.log_starts;
        let dist = |i: usize| starts[i].abs_diff(b);
        // Walk outwards from the first log at or after the head, the nearer side first.
        let mut ahead = starts.partition_point(|&s| s < b);
        let mut behind = ahead;
        loop {
            let pick = match (ahead < starts.len(), behind > 0) {
                (false, false) => return None,
                (true, false) => true,
                (false, true) => false,
                (true, true) => dist(ahead) <= dist(behind - 1),
            };
            let i = if pick {
                ahead += 1;
                ahead - 1
            } else {
                behind -= 1;
                behind
            };
            if self.free_in(i) >= n {
                return Some(i);
            }
        }
    }
}

#!/usr/bin/env bash
# fdatasync after overwrites of allocated blocks (issue 32, item 4) on Okeanos (ordered, with
# the in-place fdatasync and with datasync=commit, and wasteless+dmeta) and ext4
# (data=ordered), all on the same 2 GB loop device, RUNS times
# (default 3): the time per 8 KiB overwrite + fdatasync, and how many journal commits the 200
# syncs made (Okeanos: `okeanos stat`; ext4: /proc/fs/jbd2). Root; a release build.
set -euo pipefail
source "$(dirname "$0")/lib/loop-bench.sh" overwrite-compare
# Runs the workload; $1 is a command printing the commit count so far.
measure() {
    coproc P { python3 "$here/scripts/workloads/overwrite_fdatasync.py" "$W/mnt"; }
    local ready res c0 c1
    read -r ready <&"${P[0]}"
    c0=$($1)
    echo go >&"${P[1]}"
    read -r res <&"${P[0]}"
    wait "$P_PID" 2>/dev/null || true
    c1=$($1)
    echo "$res; journal commits $((c1 - c0))"
}
okeanos_commits() { "$B" stat "$W/mnt" | awk '/^commits/{print $2}'; }
jbd2_commits() { awk '/transactions/{print $1; exit}' "/proc/fs/jbd2/$(basename "$LOOP")-8/info"; }
for r in $(seq 1 "$RUNS"); do
    truncate -s 2G "$W/disk.img"
    LOOP=$(losetup --find --show "$W/disk.img")
    for mode in data=ordered data=ordered,datasync=commit data=wasteless,dmeta; do
        "$B" mkfs --force "$LOOP" >/dev/null
        "$B" mount "$LOOP" "$W/mnt" -o "$mode" >/dev/null
        echo "run $r okeanos $mode: $(measure okeanos_commits)"
        "$B" umount "$W/mnt" >/dev/null
    done
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$LOOP"
    mount "$LOOP" "$W/mnt"
    echo "run $r ext4 ordered: $(measure jbd2_commits)"
    umount "$W/mnt"
    losetup -d "$LOOP"; LOOP=""; rm -f "$W/disk.img"
done

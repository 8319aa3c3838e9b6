#!/usr/bin/env bash
# Reads of one file through the mount against ext4 (data=ordered), both on one 2 GB loop
# device made anew for each run (docs/BENCHMARKS.md, "Reads through the mount"): a SIZE file
# (default 256m) written once, then read with a cold cache (unmounted, the host's caches
# dropped, mounted again) and warm (read again, the page cache kept): sequential 128 KiB reads by one job, random
# 4 KiB reads by four jobs for 5 s. Needs root and fio; prints MB/s and IOPS per target.
#
#   scripts/read-compare.sh [okeanos-mount-options...]     # default: data=ordered
#   FUSE_FLOOR=1 scripts/read-compare.sh ...                # also the FUSE floors, warm only
#
# With FUSE_FLOOR=1 the floors of scripts/lib/loop-bench.sh also run, their files opened
# through the page cache (null_fuse --page-cache, as the mount's read-only opens are): the
# file is written and read once, then read warm. Their files live in the daemon's memory, so
# a cold read has no meaning there and is not made; the warm reads are the kernel's cached
# read path for a FUSE file with no daemon in it, the floor of the mount's warm reads.
set -euo pipefail
source "$(dirname "$0")/lib/loop-bench.sh" read-compare
command -v fio >/dev/null || { apt-get update -qq && apt-get install -y -qq fio >/dev/null; }
SIZE=${SIZE:-256m}
modes=("${@:-data=ordered}")
NULL_ARGS=--page-cache

fio_read() { # rw bs jobs extra...: MB/s for sequential, IOPS for random
    local rw=$1 bs=$2 jobs=$3; shift 3
    fio --name=r --filename="$W/mnt/file" --rw="$rw" --bs="$bs" --numjobs="$jobs" --size="$SIZE" \
        --ioengine=psync --group_reporting --output-format=terse "$@" 2>/dev/null |
        awk -F';' -v rw="$rw" '{ if (rw == "read") printf "%.0f", $7 / 1024; else printf "%.0f", $8 }'
}
cold() { # unmounts, drops every cache (the engine's goes with its daemon), mounts again
    local what=$1
    if [ "$what" = ext4 ]; then umount "$W/mnt"; else "$B" umount "$W/mnt" >/dev/null; fi
    sync; echo 3 > /proc/sys/vm/drop_caches
    if [ "$what" = ext4 ]; then mount "$LOOP" "$W/mnt"; else "$B" mount "$LOOP" "$W/mnt" -o "$what" >/dev/null; fi
}
load() { # what: ext4 or the okeanos mount options
    local what=$1
    fio --name=w --filename="$W/mnt/file" --rw=write --bs=1m --size="$SIZE" --output-format=terse >/dev/null 2>&1
    if [ "$what" = null-fuse ]; then
        fio_read read 128k 1 >/dev/null
        echo "seq 128k MB/s warm $(fio_read read 128k 1 --invalidate=0); rand 4k IOPS warm $(fio_read randread 4k 4 --runtime=5 --time_based --invalidate=0)"
        return
    fi
    cold "$what"
    local sc sw rw rc
    sc=$(fio_read read 128k 1)
    # Warm: fio must not drop the file's cached pages first (--invalidate=0; by default it
    # does, and ext4 then reads through the loop device from its backing file's cache).
    sw=$(fio_read read 128k 1 --invalidate=0)
    rw=$(fio_read randread 4k 4 --runtime=5 --time_based --invalidate=0)
    cold "$what"
    rc=$(fio_read randread 4k 4 --runtime=5 --time_based)
    echo "seq 128k MB/s cold $sc warm $sw; rand 4k IOPS cold $rc warm $rw"
}
compare_runs

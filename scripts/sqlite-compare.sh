#!/usr/bin/env bash
# SQLite on an Okeanos mount against ext4 (data=ordered) in one command, both on loop devices
# of the same size, RUNS times (default 3): PROCS processes (default 16), each committing
# one-row transactions to its own database in WAL mode with synchronous=FULL, for SECONDS
# (default 10). Root; python3 with its sqlite3 module and a release build of okeanos.
# Prints one line per target and run. Releases every loop device and mount it made.
#
#   scripts/sqlite-compare.sh [okeanos mount options...]   (default: data=wasteless,dmeta and data=ordered)
#   FUSE_FLOOR=1 scripts/sqlite-compare.sh ...             (also two FUSE floors: a log on the same device, memory)
#   CPU=1 scripts/sqlite-compare.sh ...                    (also CPU time per transaction)
#   DEV=1 scripts/sqlite-compare.sh ...                    (also the loop device's counters)
set -euo pipefail
source "$(dirname "$0")/lib/loop-bench.sh" sqlite-compare
PROCS=${PROCS:-16}
SECONDS_=${SECONDS_RUN:-10}
modes=("${@:-data=wasteless,dmeta}")
[ $# -eq 0 ] && modes+=(data=ordered)
# With CPU=1 each line also gives the machine's CPU time per transaction and, on a FUSE mount,
# the daemon's share: where the cores go when they bound the rate.
source "$here/scripts/lib/cpu.sh"
# With DEV=1 each line also says what the loop device did during the run (scripts/lib/devstat.sh).
source "$here/scripts/lib/devstat.sh"
load() {
    local s0 t0 out
    if [ "${DEV:-0}" = 1 ] && [ "$1" != null-fuse ]; then
        s0=$(dev_snap "$LOOP"); t0=$(date +%s.%N)
        out=$(DEV=0 load "$@")
        echo "$out; $(dev_report "$s0" "$(dev_snap "$LOOP")" "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {print b - a}')")"
        return
    fi
    [ "${CPU:-0}" = 1 ] || { python3 "$here/scripts/workloads/sqlite_commits.py" "$W/mnt" "$PROCS" "$SECONDS_"; return; }
    local pid="" n b0 b1 d0 d1
    case "$1" in
        ext4) ;;
        null-fuse) pid=$NULLPID ;;
        *) pid=$(pgrep -f "$B mount $LOOP" | head -1 || true) ;;
    esac
    b0=$(busy); d0=$(ticks "$pid")
    out=$(python3 "$here/scripts/workloads/sqlite_commits.py" "$W/mnt" "$PROCS" "$SECONDS_")
    b1=$(busy); d1=$(ticks "$pid")
    n=$(echo "$out" | sed -n 's/.*(\([0-9]*\) commits.*/\1/p')
    echo "$out; CPU $(( (b1 - b0) * 1000000 / HZ / n )) us a transaction, the daemon's $(( (d1 - d0) * 1000000 / HZ / n )) us"
}
compare_runs

#!/usr/bin/env bash
# SQLite on an Okeanos mount against ext4 (data=ordered) in one command, both on loop devices
# of the same size, RUNS times (default 3): PROCS processes (default 16), each committing
# one-row transactions to its own database in WAL mode with synchronous=FULL, for SECONDS
# (default 10). Root; python3 with its sqlite3 module and a release build of okeanos.
# Prints one line per target and run. Releases every loop device and mount it made.
#
#   scripts/sqlite-compare.sh [okeanos mount options...]   (default: data=wasteless,dmeta and data=ordered)
#   FUSE_FLOOR=1 scripts/sqlite-compare.sh ...             (also a FUSE file system in memory: the floor)
set -euo pipefail
source "$(dirname "$0")/lib/loop-bench.sh" sqlite-compare
PROCS=${PROCS:-16}
SECONDS_=${SECONDS_RUN:-10}
modes=("${@:-data=wasteless,dmeta}")
[ $# -eq 0 ] && modes+=(data=ordered)
load() { python3 "$here/scripts/workloads/sqlite_commits.py" "$W/mnt" "$PROCS" "$SECONDS_"; }
compare_runs

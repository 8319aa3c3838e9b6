#!/usr/bin/env bash
# RocksDB on an Okeanos mount against ext4 (data=ordered) in one command, both on loop devices
# of the same size, RUNS times (default 3): RocksDB's own db_bench, fillrandom with sync=1 from
# THREADS threads (default 16) for SECONDS_RUN seconds (default 10), 100-byte values, no
# compression. The threads share one write-ahead log: RocksDB gathers the writers waiting
# at a moment into a write group whose leader appends the group to the log and syncs it once
# (fdatasync; the log file is preallocated with fallocate(KEEP_SIZE)). Memtables stay under
# their 64 MiB flush size, so what is measured is the log. Root; installs rocksdb-tools
# (Debian) when db_bench is missing; a release build of okeanos. Prints one line per target
# and run: operations per second and the mean latency db_bench reports.
#
#   scripts/rocksdb-compare.sh [okeanos mount options...]   (default: data=wasteless,dmeta and data=ordered)
set -euo pipefail
source "$(dirname "$0")/lib/loop-bench.sh" rocksdb-compare
command -v db_bench >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q rocksdb-tools >/dev/null
THREADS=${THREADS:-16}
SECONDS_=${SECONDS_RUN:-10}
modes=("${@:-data=wasteless,dmeta}")
[ $# -eq 0 ] && modes+=(data=ordered)
load() {
    db_bench --benchmarks=fillrandom --sync=1 --threads="$THREADS" --duration="$SECONDS_" \
        --num=100000000 --value_size=100 --compression_type=none --db="$W/mnt/db" 2>&1 |
        awk '/^fillrandom/ { printf "%.0f ops/s, %s us/op mean per thread\n", $5, $3 }'
}
compare_runs

#!/usr/bin/env bash
# pgbench on an Okeanos mount against ext4 (data=ordered, the default), both on the same 2 GB
# loop device (made anew for each target), in one command, RUNS times (default 3). IMAGE=1 adds
# Okeanos on an image file (no loop device), to show what the file costs. Root; needs
# PostgreSQL (apt-get install postgresql) and a release build of okeanos. Prints one line per
# target and run: tps and average latency.
#
#   scripts/pgbench-compare.sh [okeanos mount options...]   (default: data=ordered and data=wasteless,dmeta)
#   CPU=1 scripts/pgbench-compare.sh ...                    (also CPU time per transaction)
#   DEV=1 scripts/pgbench-compare.sh ...                    (also the loop device's counters)
#   FUSE_FLOOR=1 scripts/pgbench-compare.sh ...             (also the durable FUSE floor, below)
#
# FUSE_FLOOR=1 adds, on the same loop device, the floor of a durable file system over FUSE:
# crates/okeanos-cli/examples/null_fuse.rs with `--keep --log`, which keeps files in memory
# and makes each fsync durable with one write of its file's logged bytes and one flush per
# group of syncs, flushed by the leading sync (`log`) and by a thread of its own
# (`log-flusher`), served as the mount is.
set -euo pipefail
RUNS=${RUNS:-3}
modes=("${@:-data=ordered}")
[ $# -eq 0 ] && modes+=(data=wasteless,dmeta)
B=${OKEANOS:-$(cd "$(dirname "$0")/.." && pwd)/target/release/okeanos}
PG=$(ls -d /usr/lib/postgresql/*/bin | tail -1)
W=$(mktemp -d /tmp/pgbench-compare.XXXX)
chmod 755 "$W"
mkdir -p "$W/sock" && chmod 777 "$W/sock"
LOOP=""
source "$(dirname "$0")/lib/null-fuse.sh"
cleanup() {
    su postgres -s /bin/sh -c "$PG/pg_ctl -D $W/mnt/pg/data -m immediate stop" >/dev/null 2>&1 || true
    mountpoint -q "$W/mnt" && { "$B" umount "$W/mnt" >/dev/null 2>&1 || fusermount3 -u "$W/mnt" 2>/dev/null || umount "$W/mnt" || true; }
    [ -n "$NULLPID" ] && kill "$NULLPID" 2>/dev/null || true
    [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null || true
    rm -rf "$W"
}
trap cleanup EXIT
# With CPU=1 each line also gives the machine's CPU time per transaction and, on a FUSE mount,
# the daemon's share.
source "$(dirname "$0")/lib/cpu.sh"
source "$(dirname "$0")/lib/devstat.sh"
bench() { # target label
    mkdir -p "$W/mnt/pg" && chown postgres:postgres "$W/mnt/pg"
    su postgres -s /bin/sh -c "$PG/initdb -D $W/mnt/pg/data" >/dev/null 2>&1
    su postgres -s /bin/sh -c "$PG/pg_ctl -D $W/mnt/pg/data -l $W/sock/pg.log -o '-k $W/sock -p 54399 -c listen_addresses=' -w start" >/dev/null
    su postgres -s /bin/sh -c "$PG/pgbench -h $W/sock -p 54399 -i -s 10 postgres" >/dev/null 2>&1
    local pid="" b0 b1 d0 d1 n cpu="" s0 s1 t0 t1
    case "$1" in
        ext4-ordered) ;;
        null-fuse*) pid=$NULLPID ;;
        *) pid=$(pgrep -f "$B mount" | head -1 || true) ;;
    esac
    b0=$(busy); d0=$(ticks "$pid"); s0=$(dev_snap "$LOOP"); t0=$(date +%s.%N)
    out=$(su postgres -s /bin/sh -c "$PG/pgbench -h $W/sock -p 54399 -c 8 -j 2 -T 10 postgres" 2>&1)
    b1=$(busy); d1=$(ticks "$pid"); s1=$(dev_snap "$LOOP"); t1=$(date +%s.%N)
    if [ "${CPU:-0}" = 1 ]; then
        n=$(echo "$out" | sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p')
        cpu="; CPU $(( (b1 - b0) * 1000000 / HZ / n )) us a transaction, the daemon's $(( (d1 - d0) * 1000000 / HZ / n )) us"
    fi
    [ "${DEV:-0}" = 1 ] && cpu="$cpu; $(dev_report "$s0" "$s1" "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')")"
    echo "run $2 $1: $(echo "$out" | grep -E '^tps' | sed 's/ (without initial connection time)//'), $(echo "$out" | grep 'latency average')$cpu"
    su postgres -s /bin/sh -c "$PG/pg_ctl -D $W/mnt/pg/data -m fast -w stop" >/dev/null
}
for r in $(seq 1 "$RUNS"); do
    mkdir -p "$W/mnt"
    truncate -s 2G "$W/disk.img"
    LOOP=$(losetup --find --show "$W/disk.img")
    mkfs.ext4 -q -E lazy_itable_init=0,lazy_journal_init=0 "$LOOP"
    mount "$LOOP" "$W/mnt"
    bench ext4-ordered "$r"
    umount "$W/mnt"
    for mode in "${modes[@]}"; do
        "$B" mkfs --force "$LOOP" >/dev/null
        "$B" mount "$LOOP" "$W/mnt" -o "$mode,allow_other" >/dev/null
        bench "okeanos-$mode" "$r"
        "$B" umount "$W/mnt" >/dev/null
    done
    if [ "${FUSE_FLOOR:-0}" = 1 ]; then
        for what in log log-flusher; do
            flusher=(); [ "$what" = log-flusher ] && flusher=(--flusher)
            null_fuse_start "$W/mnt" "$W/null.err" --keep --log "$LOOP" "${flusher[@]}"
            bench "null-fuse-$what" "$r"
            null_fuse_stop "$W/mnt"
        done
    fi
    losetup -d "$LOOP"; LOOP=""; rm -f "$W/disk.img"
    if [ "${IMAGE:-0}" = 1 ]; then
        "$B" mkfs "$W/okeanos.img" --size 2G >/dev/null
        "$B" mount "$W/okeanos.img" "$W/mnt" -o "data=wasteless,dmeta,allow_other" >/dev/null
        bench "okeanos-data=wasteless,dmeta-on-an-image-file" "$r"
        "$B" umount "$W/mnt" >/dev/null
        rm -f "$W/okeanos.img"
    fi
done

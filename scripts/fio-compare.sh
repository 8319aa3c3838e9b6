#!/usr/bin/env bash
# The same fio job — N jobs, each appending 1 KiB records to its own file with fdatasync after
# every write — on an Okeanos FUSE mount and on Linux ext4 (data=journal, data=ordered), each on
# loop devices in this run, with device bytes counted by the block layer. Needs root, fio,
# fusermount3 and a release build of okeanos. Releases every loop device and mount it made.
#
#   scripts/fio-compare.sh [jobs] [size-per-job] [okeanos-policy...]
#
# FIO_ARGS adds options to every fio run. fio preallocates each file by default
# (--fallocate=native): on ext4 the writes then overwrite unwritten extents, and most
# fdatasyncs commit no metadata; FIO_ARGS=--fallocate=none makes them appends on every file
# system (docs/BENCHMARKS.md, "fio through the mount").
#
# FUSE_FLOOR=1 adds the floor of a durable file system over FUSE on this machine: the same job
# on crates/okeanos-cli/examples/null_fuse.rs with `--keep --log`, which keeps files in memory
# and makes each fdatasync durable with one write of the bytes logged since the last group and
# one flush, on a loop device of its own; flushed by the sync that leads its group (`log`) and
# by a thread of its own (`log-flusher`), served with the mount's request threads.
set -euo pipefail
jobs=${1:-16}
size=${2:-256k}
shift 2 2>/dev/null || shift $#
policies=("${@:-wasteless+dmeta}")
[ "$(id -u)" = 0 ] || { echo "needs root (loop devices and mount)" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
okeanos="$here/target/release/okeanos"
[ -x "$okeanos" ] || (cd "$here" && cargo build --release -q)
source "$here/scripts/lib/null-fuse.sh"
work=$(mktemp -d)
cleanup() {
    [ -n "$NULLPID" ] && kill "$NULLPID" 2>/dev/null || true
    for m in "$work"/mnt*; do
        mountpoint -q "$m" 2>/dev/null && { "$okeanos" umount "$m" 2>/dev/null || umount "$m" 2>/dev/null || fusermount3 -u -z "$m"; }
    done
    # Every loop device backed by a file of this run (loopdev runs in a subshell, so look them up).
    for f in "$work"/*.img "$work"/*.jnl; do
        [ -e "$f" ] || continue
        for d in $(losetup -j "$f" | cut -d: -f1); do losetup -d "$d" 2>/dev/null || true; done
    done
    rm -rf "$work"
}
trap cleanup EXIT INT TERM
sectors() { awk '{print $7}' "/sys/block/$(basename "$1")/stat"; }
loopdev() { truncate -s "$2" "$work/$1"; losetup -f --show "$work/$1"; }

run_fio() { # label dir devs...
    local label=$1 dir=$2; shift 2
    local before=() after=() i
    sync  # the host's dirty pages from the run before are not this run's to wait for
    for d in "$@"; do before+=("$(sectors "$d")"); done
    fio --name=append --directory="$dir" --numjobs="$jobs" --rw=write --bs=1k --size="$size" \
        --fdatasync=1 --ioengine=sync --group_reporting ${FIO_ARGS:-} --output-format=json > "$work/fio.json"
    sync
    for d in "$@"; do after+=("$(sectors "$d")"); done
    local bytes=()
    for i in "${!before[@]}"; do bytes+=($(( (after[i] - before[i]) * 512 ))); done
    python3 - "$label" "$work/fio.json" "${bytes[@]}" <<'PY'
import json, sys
label, path, *dev = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
j = json.load(open(path))["jobs"][0]
w, s = j["write"], j["sync"]["lat_ns"]
payload = w["io_bytes"]
pct = s.get("percentile", {})
p = lambda q: pct.get(q, 0) / 1e3
parts = " + ".join(f"{b / payload:.2f}" for b in dev)
print(f"| {label} | {w['iops']:.0f} | {p('50.000000'):.0f} | {p('99.000000'):.0f} | {parts} | {sum(dev) / payload:.2f} |")
PY
}

echo "| target | write IOPS | fdatasync p50 (µs) | fdatasync p99 (µs) | device bytes / payload byte (per device) | total |"
echo "|---|---:|---:|---:|---|---:|"
for p in "${policies[@]}"; do
    d=$(loopdev "ok-$p.img" 2G)
    "$okeanos" mkfs "$d" --journal-size 128M --force >/dev/null
    mkdir -p "$work/mnt-ok"
    "$okeanos" mount "$d" "$work/mnt-ok" -o "data=$p,direct_io" >/dev/null
    run_fio "okeanos data=$p (FUSE, internal journal)" "$work/mnt-ok" "$d"
    "$okeanos" umount "$work/mnt-ok"
done
if [ "${FUSE_FLOOR:-0}" = 1 ]; then
    for what in log log-flusher; do
        d=$(loopdev "null-$what.img" 2G)
        mkdir -p "$work/mnt-null"
        flusher=(); [ "$what" = log-flusher ] && flusher=(--flusher)
        null_fuse_start "$work/mnt-null" "$work/null.err" --keep --log "$d" "${flusher[@]}"
        run_fio "FUSE floor: null_fuse $what (memory + a log, a write and a flush a group)" "$work/mnt-null" "$d"
        null_fuse_stop "$work/mnt-null"
    done
fi
for mode in journal ordered; do
    fsd=$(loopdev "ext4-$mode.img" 2G)
    jd=$(loopdev "ext4-$mode.jnl" 256M)
    mkfs.ext4 -q -F -O journal_dev -b 4096 "$jd" >/dev/null
    mkfs.ext4 -q -F -b 4096 -E lazy_itable_init=0,lazy_journal_init=0 -J device="$jd" "$fsd" >/dev/null
    mkdir -p "$work/mnt-$mode"
    mount -o "data=$mode" "$fsd" "$work/mnt-$mode"
    run_fio "ext4 data=$mode (journal + fs device)" "$work/mnt-$mode" "$jd" "$fsd"
    umount "$work/mnt-$mode"
done

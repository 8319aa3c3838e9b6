#!/usr/bin/env bash
# The FUSE floor (issue 32): the same fio job — JOBS jobs, each appending 1 KiB records (BS) to its
# own file with an fdatasync after each — on a null FUSE file system that answers at once
# (crates/okeanos-cli/examples/null_fuse.rs, served as the Okeanos mount is), on an Okeanos
# mount (wasteless+dmeta) on a loop device, and on ext4 (data=ordered) on the same loop device,
# in one command, RUNS times (default 3). For each FUSE target it also prints the daemon's CPU
# time per request pair (write + fdatasync). Root; fio; a release build.
#
#   scripts/fuse-floor.sh [JOBS] [SIZE-PER-JOB]      # defaults: 100 128k
#   THREADS=8 scripts/fuse-floor.sh ...              # request threads of both FUSE daemons
#                                                    # (default: the mount's, one per CPU)
#   BS=128 scripts/fuse-floor.sh ...                 # the size of each append (default 1k)
set -euo pipefail
jobs=${1:-100}
size=${2:-128k}
RUNS=${RUNS:-3}
BS=${BS:-1k}
[ "$(id -u)" = 0 ] || { echo "needs root (loop devices and mount)" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
B="$here/target/release/okeanos"
[ -x "$B" ] || (cd "$here" && cargo build --release --locked -q -p okeanos-cli --bins)
source "$here/scripts/lib/null-fuse.sh"
W=$(mktemp -d /tmp/fuse-floor.XXXX)
LOOP=""
cleanup() {
    mountpoint -q "$W/mnt" 2>/dev/null && { fusermount3 -u "$W/mnt" 2>/dev/null || "$B" umount "$W/mnt" 2>/dev/null || umount "$W/mnt" || true; }
    [ -n "$NULLPID" ] && kill "$NULLPID" 2>/dev/null || true
    [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null || true
    rm -rf "$W"
}
trap cleanup EXIT INT TERM
mkdir -p "$W/mnt"
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
run() { # label [daemon pid]
    local before=0 after=0
    [ -n "${2:-}" ] && before=$(ticks "$2")
    fio --name=append --directory="$W/mnt" --numjobs="$jobs" --rw=write --bs="$BS" --size="$size" --fallocate=none \
        --fdatasync=1 --ioengine=sync --group_reporting --output-format=json > "$W/fio.json"
    [ -n "${2:-}" ] && after=$(ticks "$2")
    python3 - "$1" "$W/fio.json" "$((after - before))" "$(getconf CLK_TCK)" <<'PY'
import json, sys
label, path, ticks, hz = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
j = json.load(open(path))["jobs"][0]
w, s = j["write"], j["sync"]["lat_ns"]
pct = s.get("percentile", {})
cpu = f", daemon {ticks / hz / w['total_ios'] * 1e6:.1f} us CPU per write+fdatasync" if ticks else ""
print(f"{label}: {w['iops']:.0f} IOPS, fdatasync p50 {pct.get('50.000000', 0) / 1e3:.0f} us, p99 {pct.get('99.000000', 0) / 1e3:.0f} us{cpu}")
PY
    rm -f "$W"/mnt/append.* 2>/dev/null || true
}
for r in $(seq 1 "$RUNS"); do
    null_fuse_start "$W/mnt" "$W/null.err" ${THREADS:+"$THREADS"}
    run "run $r null FUSE" "$NULLPID"
    null_fuse_stop "$W/mnt"
    truncate -s 2G "$W/disk.img"
    LOOP=$(losetup --find --show "$W/disk.img")
    "$B" mkfs --force "$LOOP" >/dev/null
    pid=$("$B" mount "$LOOP" "$W/mnt" -o "data=wasteless,dmeta${THREADS:+,threads=$THREADS}" | grep -o 'daemon pid [0-9]*' | awk '{print $3}')
    run "run $r okeanos wasteless+dmeta" "$pid"
    "$B" umount "$W/mnt" >/dev/null
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$LOOP"
    mount "$LOOP" "$W/mnt"
    run "run $r ext4 ordered"
    umount "$W/mnt"
    losetup -d "$LOOP"; LOOP=""; rm -f "$W/disk.img"
done

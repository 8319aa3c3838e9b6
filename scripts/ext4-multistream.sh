#!/usr/bin/env bash
# Runs the multistream workload (N writers, each appending R-byte records to its own file with
# fdatasync after every record) on Linux ext4 with an external journal on its own loop device,
# and prints journal and final-location bytes per append, counted by the block layer
# (/sys/block/<dev>/stat). Needs root. Releases every loop device and mount it made, even when
# interrupted.
#
#   scripts/ext4-multistream.sh <data=journal|data=ordered|data=writeback> [writers] [records] [size]
set -euo pipefail
mode=${1:?usage: $0 data=journal|data=ordered|data=writeback [writers] [records] [size]}
writers=${2:-100}
records=${3:-50}
size=${4:-128}
[ "$(id -u)" = 0 ] || { echo "needs root (loop devices and mount)" >&2; exit 2; }
work=$(mktemp -d)
fsdev="" jdev=""
cleanup() {
    mountpoint -q "$work/mnt" 2>/dev/null && umount "$work/mnt"
    [ -n "$fsdev" ] && losetup -d "$fsdev" 2>/dev/null
    [ -n "$jdev" ] && losetup -d "$jdev" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT INT TERM
truncate -s 2G "$work/fs.img"
truncate -s 256M "$work/journal.img"
fsdev=$(losetup -f --show "$work/fs.img")
jdev=$(losetup -f --show "$work/journal.img")
mkfs.ext4 -q -F -O journal_dev -b 4096 "$jdev"
mkfs.ext4 -q -F -b 4096 -J device="$jdev" "$fsdev"
mkdir "$work/mnt"
mount -o "$mode" "$fsdev" "$work/mnt"
sectors() { awk '{print $7}' "/sys/block/$(basename "$1")/stat"; }
python3 - "$work/mnt" "$writers" "$records" 0 <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for w in range(n):
    open(os.path.join(d, f"stream-{w:05}"), "w").close()
os.sync()
PY
j0=$(sectors "$jdev"); f0=$(sectors "$fsdev")
python3 - "$work/mnt" "$writers" "$records" "$size" <<'PY'
import os, sys, threading
d, n, k, r = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
barrier = threading.Barrier(n)
def writer(w):
    fd = os.open(os.path.join(d, f"stream-{w:05}"), os.O_WRONLY | os.O_APPEND)
    rec = bytes([97 + w % 26]) * r
    barrier.wait()
    for _ in range(k):
        os.write(fd, rec)
        os.fdatasync(fd)
    os.close(fd)
ts = [threading.Thread(target=writer, args=(w,)) for w in range(n)]
[t.start() for t in ts]
[t.join() for t in ts]
PY
j1=$(sectors "$jdev"); f1=$(sectors "$fsdev")
info=$(cat /proc/fs/jbd2/"$(basename "$jdev")"*/info 2>/dev/null || true)
echo "$info" | grep -E "transactions|handles per transaction|blocks per transaction" | sed 's/^/  jbd2: /' || true
umount "$work/mnt"
j2=$(sectors "$jdev"); f2=$(sectors "$fsdev")
appends=$((writers * records))
payload=$((appends * size))
awk -v m="$mode" -v a="$appends" -v p="$payload" -v j1=$(( (j1 - j0) * 512 )) -v f1=$(( (f1 - f0) * 512 )) \
    -v j2=$(( (j2 - j0) * 512 )) -v f2=$(( (f2 - f0) * 512 )) 'BEGIN {
  printf "ext4 %s: %d appends of %d bytes\n", m, a, p / a
  printf "  journal bytes per append        %.0f (with unmount %.0f)\n", j1 / a, j2 / a
  printf "  journal bytes per payload byte  %.2f\n", j1 / p
  printf "  final-location bytes per payload byte %.2f (with unmount %.2f)\n", f1 / p, f2 / p
}'

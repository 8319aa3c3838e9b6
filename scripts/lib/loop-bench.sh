# Shared setup of the comparison scripts that put Okeanos and ext4 on one loop device in turn
# (sourced, not run): root, a release build of okeanos in $B, a work directory $W with the
# mount point $W/mnt, $LOOP for the loop device in use, and a trap that unmounts, releases
# the loop device and removes $W however the script ends. The caller passes its name.
[ "$(id -u)" = 0 ] || { echo "needs root (loop devices and mount)" >&2; exit 2; }
RUNS=${RUNS:-3}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=${OKEANOS:-$here/target/release/okeanos}
[ -x "$B" ] || (cd "$here" && cargo build --release --locked -q -p okeanos-cli)
W=$(mktemp -d "/tmp/$1.XXXX")
LOOP=""
cleanup() {
    mountpoint -q "$W/mnt" 2>/dev/null && { "$B" umount "$W/mnt" >/dev/null 2>&1 || umount "$W/mnt" || true; }
    [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null || true
    rm -rf "$W"
}
trap cleanup EXIT INT TERM
mkdir -p "$W/mnt"

# Runs the caller's `load` function RUNS times on ext4 (data=ordered) and on Okeanos with each
# mount option string of the caller's array `modes`, all on one 2 GB loop device made anew for
# each run; prints one line per target and run. `load` gets the target: `ext4` or the options.
compare_runs() {
    for r in $(seq 1 "$RUNS"); do
        truncate -s 2G "$W/disk.img"
        LOOP=$(losetup --find --show "$W/disk.img")
        mkfs.ext4 -q "$LOOP"
        mount "$LOOP" "$W/mnt"
        echo "run $r ext4-ordered: $(load ext4)"
        umount "$W/mnt"
        for mode in "${modes[@]}"; do
            "$B" mkfs --force "$LOOP" >/dev/null
            "$B" mount "$LOOP" "$W/mnt" -o "$mode" >/dev/null
            echo "run $r okeanos $mode: $(load "$mode")"
            "$B" umount "$W/mnt" >/dev/null
        done
        losetup -d "$LOOP"; LOOP=""; rm -f "$W/disk.img"
    done
}

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

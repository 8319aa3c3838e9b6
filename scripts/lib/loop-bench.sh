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
    mountpoint -q "$W/mnt" 2>/dev/null && { "$B" umount "$W/mnt" >/dev/null 2>&1 || fusermount3 -u "$W/mnt" 2>/dev/null || umount "$W/mnt" || true; }
    [ -n "${NULLPID:-}" ] && kill "$NULLPID" 2>/dev/null || true
    [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null || true
    rm -rf "$W"
}
trap cleanup EXIT INT TERM
mkdir -p "$W/mnt"

# With FUSE_FLOOR=1, each run also loads three FUSE file systems served as the Okeanos mount
# is (crates/okeanos-cli/examples/null_fuse.rs). The first two keep their files in memory and
# log every write's bytes to the run's loop device, making each fsync durable with one write
# and one flush per group of syncs (`--keep --log`, the mount's request threads): run by the
# sync that finds no flush running (`log`, as the mount's write-group leader) or by a thread of
# their own (`log-flusher`). They are the floor of a durable file system over FUSE here: the
# least any design does for a sync. The third keeps its files in memory and answers every
# request at once, fsync included (`--keep`, eight request threads): the floor of the workload
# over FUSE with no device. `load` gets the target `null-fuse`.
source "$here/scripts/lib/null-fuse.sh"
floor_run() {
    local what=$2 args
    case "$what" in
        log) args=(--keep --log "$LOOP") ;;
        log-flusher) args=(--keep --log "$LOOP" --flusher) ;;
        *) args=(8 --keep) ;;
    esac
    # A caller's own options for the floors (read-compare.sh: --page-cache).
    args+=(${NULL_ARGS:-})
    null_fuse_start "$W/mnt" "$W/null.err" "${args[@]}"
    case "$what" in
        log) echo -n "run $1 null-fuse log (memory and a log on the loop device, flushed by the leading sync): $(load null-fuse)" ;;
        log-flusher) echo -n "run $1 null-fuse log-flusher (memory and a log on the loop device, flushed by a thread): $(load null-fuse)" ;;
        *) echo -n "run $1 null-fuse memory (no device, fsync answered at once): $(load null-fuse)" ;;
    esac
    null_fuse_stop "$W/mnt"
    # The log's own count: syncs a group.
    sed -n 's/^null_fuse: \([0-9]* syncs, [0-9]* groups ([0-9.]* syncs a group)\).*/; \1/p' "$W/null.err" | tr -d '\n'
    echo
}

# Runs the caller's `load` function RUNS times on ext4 (data=ordered) and on Okeanos with each
# mount option string of the caller's array `modes`, all on one 2 GB loop device made anew for
# each run; prints one line per target and run. `load` gets the target: `ext4` or the options.
compare_runs() {
    for r in $(seq 1 "$RUNS"); do
        truncate -s 2G "$W/disk.img"
        LOOP=$(losetup --find --show "$W/disk.img")
        # Inode tables and journal written at mkfs, as `okeanos bench` makes its kernel targets:
        # by default ext4 zeroes its inode tables in a kernel thread after the mount, during
        # the run (SQLite on ext4 ran 7-20% slower for it; docs/BENCHMARKS.md).
        mkfs.ext4 -q -E lazy_itable_init=0,lazy_journal_init=0 "$LOOP"
        mount "$LOOP" "$W/mnt"
        echo "run $r ext4-ordered: $(load ext4)"
        umount "$W/mnt"
        for mode in "${modes[@]}"; do
            "$B" mkfs --force "$LOOP" >/dev/null
            "$B" mount "$LOOP" "$W/mnt" -o "$mode" >/dev/null
            echo "run $r okeanos $mode: $(load "$mode")"
            "$B" umount "$W/mnt" >/dev/null
        done
        if [ "${FUSE_FLOOR:-0}" = 1 ]; then floor_run "$r" log; floor_run "$r" log-flusher; fi
        losetup -d "$LOOP"; LOOP=""; rm -f "$W/disk.img"
        [ "${FUSE_FLOOR:-0}" = 1 ] && floor_run "$r" memory
    done
}

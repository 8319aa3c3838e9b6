# The FUSE floors of the comparison scripts (crates/okeanos-cli/examples/null_fuse.rs;
# docs/BENCHMARKS.md, "The FUSE floor" and "The durable floor over FUSE"). Sourced:
#   null_fuse_start MNT ERRFILE [ARGS...]  starts it on MNT with ARGS (built first if missing),
#                                         its stderr in ERRFILE, and waits for the mount; sets
#                                         NULLPID. A floor that did not mount would measure the
#                                         directory beneath it: the script stops instead.
#   null_fuse_stop MNT                    unmounts it and waits for the daemon to end.
# The caller's cleanup kills "$NULLPID" when it is set.
NULL_FUSE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
NULL_FUSE="$NULL_FUSE_ROOT/target/release/examples/null_fuse"
NULLPID=""
null_fuse_start() {
    local mnt=$1 err=$2
    shift 2
    [ -x "$NULL_FUSE" ] || (cd "$NULL_FUSE_ROOT" && cargo build --release --locked -q -p okeanos-cli --example null_fuse)
    "$NULL_FUSE" "$mnt" "$@" 2>"$err" & NULLPID=$!
    for _ in $(seq 1 100); do mountpoint -q "$mnt" && break; sleep 0.05; done
    mountpoint -q "$mnt" || { echo "null_fuse did not mount: $(cat "$err")" >&2; exit 1; }
}
null_fuse_stop() {
    fusermount3 -u "$1" 2>/dev/null || umount "$1" || true
    wait "$NULLPID" 2>/dev/null || true
    NULLPID=""
}

#!/usr/bin/env bash
# The manylogs paper's motivation on a block device: a large sequential reader beside small
# random writes that each wait for a flush, run by fio's NBD engine (libnbd) against
# `okeanos blockdev serve` on one loop device, once exporting it plain (no MLB) and once as an
# MLB disk, alternately, RUNS rounds; each device I/O timed in real time by a disk model
# (MODEL, default sata7200: the loop device's own file is on a disk without seeks, where
# logging near the head cannot gain). Prints the reader's MB/s and the writer's IOPS and
# write+flush latency. Needs root (losetup), fio with its nbd engine and a release build.
# Releases the loop device and stops every server it started.
#
#   scripts/mlb-compare.sh            RUNS=3 RUNTIME=20 MODEL=sata7200 SIZE=8G WBS=4k
#
# MODEL=none serves the loop device untimed (and adds fio on the bare loop device with
# O_DIRECT and fdatasync, the floor without a server).
set -euo pipefail
runs=${RUNS:-3}
runtime=${RUNTIME:-20}
model=${MODEL:-sata7200}
size=${SIZE:-8G}
wbs=${WBS:-4k}
[ "$(id -u)" = 0 ] || { echo "needs root (losetup)" >&2; exit 2; }
fio --enghelp 2>/dev/null | grep -qw nbd || { echo "fio has no nbd engine" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
okeanos="$here/target/release/okeanos"
[ -x "$okeanos" ] || (cd "$here" && cargo build --release -q -p okeanos-cli)
work=$(mktemp -d)
server=
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null || true
    for d in $(losetup -j "$work/disk.img" 2>/dev/null | cut -d: -f1); do losetup -d "$d" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT INT TERM
truncate -s "$size" "$work/disk.img"
loop=$(losetup -f --show "$work/disk.img")
timed=()
[ "$model" != none ] && timed=(--device-model "$model")

job() { # target-options... : reader over the first quarter, writer over the last quarter
    local bytes=$1; shift
    local q=$((bytes / 4 / 1048576 * 1048576))
    cat > "$work/job.fio" <<EOF
[global]
runtime=$runtime
time_based=1
$(printf '%s\n' "$@")
[reader]
rw=read
bs=1M
offset=0
size=$q
[writer]
rw=randwrite
bs=$wbs
offset=$((3 * q))
size=$q
EOF
    fio "$work/job.fio" --output-format=json 2>/dev/null | sed -n '/^{/,$p' > "$work/out.json"
    python3 - "$work/out.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r = next(j for j in d["jobs"] if j["jobname"] == "reader")["read"]
w = next(j for j in d["jobs"] if j["jobname"] == "writer")
lat = lambda ns, p: ns.get("percentile", {}).get(p, 0) / 1e6
# A write's latency and its flush's (fio times the fsync separately).
wp50 = lat(w["write"]["clat_ns"], "50.000000") + lat(w["sync"]["lat_ns"], "50.000000")
wp99 = lat(w["write"]["clat_ns"], "99.000000") + lat(w["sync"]["lat_ns"], "99.000000")
print(f"reader {r['bw'] / 1024:7.1f} MB/s   writer {w['write']['iops']:7.1f} IOPS, write+flush p50 {wp50:7.2f} ms, p99 {wp99:7.2f} ms")
PY
}

serve() { # extra serve options; sets uri and server
    "$okeanos" blockdev serve "$loop" --nbd 127.0.0.1:0 "${timed[@]}" "$@" > "$work/serve.out" 2> "$work/serve.err" &
    server=$!
    for _ in $(seq 1 1200); do grep -q 'nbd://' "$work/serve.out" 2>/dev/null && break; sleep 0.05; done
    grep -q 'nbd://' "$work/serve.out" || { echo "the server did not start: $(cat "$work/serve.err")" >&2; exit 1; }
    uri="$(grep -o 'nbd://[0-9.:]*' "$work/serve.out")/"
}
stop() {
    kill -TERM "$server"; wait "$server" || true; server=
    grep -h "MLB:" "$work/serve.err" | sed 's/^okeanos blockdev: /      /' || true
}

echo "loop device $loop ($size), disk model: $model, $runs rounds of ${runtime}s, writes of $wbs each followed by a flush"
"$okeanos" blockdev create "$loop" --force > /dev/null
export_bytes=$(python3 -c "import json,subprocess;print(json.loads(subprocess.check_output(['$okeanos','blockdev','stat','$loop','--json']))['user_bytes'])")
for r in $(seq 1 "$runs"); do
    echo "round $r"
    if [ "$model" = none ]; then
        printf '  %-8s ' "loop"
        job "$export_bytes" ioengine=psync direct=1 filename="$loop" fdatasync=1
    fi
    serve --plain
    printf '  %-8s ' "plain"
    job "$export_bytes" ioengine=nbd uri="$uri" fsync=1
    stop
    # A fresh MLB disk each round, so that rounds start alike.
    "$okeanos" blockdev create "$loop" --force > /dev/null
    serve
    printf '  %-8s ' "mlb"
    job "$export_bytes" ioengine=nbd uri="$uri" fsync=1
    stop
done

#!/usr/bin/env bash
# The bindings' benchmarks (docs/BENCHMARKS.md, "Bindings"), each a comparison in one command,
# repeated RUNS times (default 3). Needs root (loop devices, ext4) and a built workspace (the
# test profile, as the other benchmarks of BENCHMARKS.md).
#
#   bash scripts/bench-bindings.sh [python|c|group|all] [SECONDS]
#
# python: 64 Python threads append 128 B with fdatasync through the package, against the same
#         program with os.write and os.fdatasync on ext4 data=ordered; each on a loop device of
#         its own (2 GiB, Okeanos with its internal journal, opened O_DIRECT).
# c:      the C ABI (bindings/c/tests/test_okeanos.c bench) against the same program in Rust
#         (crates/okeanos-ffi/examples/appenders.rs), 64 threads, on image files.
# group:  group sync of 100 files with one 128 B record each, against 100 fdatasyncs on ext4.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
secs=${2:-10}
runs=${RUNS:-3}
repo=$PWD
lib=$repo/target/debug
py=$repo/target/python-venv/bin/python
okeanos_bin=$repo/target/debug/okeanos
[ "$(id -u)" = 0 ] || { echo "bench-bindings needs root (loop devices, ext4)" >&2; exit 1; }
[ -x "$okeanos_bin" ] || { echo "build the workspace first: cargo build --workspace --all-targets" >&2; exit 1; }

work=$(mktemp -d /var/tmp/okeanos-bench-bindings.XXXXXX)
cleanup() {
    umount "$work/mnt" 2>/dev/null || true
    # Every loop device over a file of this run (made in subshells: found by their files).
    losetup -a | grep -F "$work/" | cut -d: -f1 | while read -r l; do losetup -d "$l" || true; done
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

release_unused() { # the loop devices of earlier runs (nothing holds them now)
    losetup -a | grep -F "$work/" | cut -d: -f1 | while read -r l; do
        findmnt -rn -S "$l" >/dev/null || losetup -d "$l" 2>/dev/null || true
    done
    rm -f "$work"/ext4-*.img "$work"/okeanos-*.img
}

newloop() { # FILE SIZE -> device
    truncate -s "$2" "$1"
    local d
    losetup --find --show "$1"
}

ext4_ordered() { # a fresh ext4 data=ordered on a loop device, mounted at $work/mnt
    umount "$work/mnt" 2>/dev/null || true
    release_unused
    mkdir -p "$work/mnt"
    local d
    d=$(newloop "$work/ext4-$RANDOM.img" 2G)
    mkfs.ext4 -q -F -b 4096 -E lazy_itable_init=0,lazy_journal_init=0 "$d"
    mount -o data=ordered "$d" "$work/mnt"
}

okeanos_loop() { # a fresh Okeanos on a loop device -> device
    release_unused
    local d
    d=$(newloop "$work/okeanos-$RANDOM.img" 2G)
    "$okeanos_bin" mkfs --force "$d" >/dev/null
    echo "$d"
}

ratio() { # JSON_A JSON_B RUN LABEL
    python3 -c "import json,sys; a,b=json.loads(sys.argv[1]),json.loads(sys.argv[2]); print('run %s: %s %.3f' % (sys.argv[3], sys.argv[4], a['syncs_per_sec']/b['syncs_per_sec']))" "$@"
}

if [ "$what" = python ] || [ "$what" = group ] || [ "$what" = all ]; then
    bash scripts/test-bindings.sh --python-only >/dev/null
fi

if [ "$what" = python ] || [ "$what" = all ]; then
    echo "== 64 Python threads, 128 B + fdatasync, ${secs}s each"
    for i in $(seq "$runs"); do
        d=$(okeanos_loop)
        a=$("$py" bindings/python/bench/appenders.py okeanos "$d" "data=wasteless+dmeta,direct_io" 64 "$secs")
        d=$(okeanos_loop)
        c=$("$py" bindings/python/bench/appenders.py okeanos-durable "$d" "data=wasteless+dmeta,direct_io" 64 "$secs")
        ext4_ordered
        b=$("$py" bindings/python/bench/appenders.py posix "$work/mnt" 64 "$secs")
        echo "run $i: $a"
        echo "run $i: $c"
        echo "run $i: $b"
        ratio "$a" "$b" "$i" "Okeanos (append, fdatasync)/ext4"
        ratio "$c" "$b" "$i" "Okeanos (append(durable=True))/ext4"
    done
fi

if [ "$what" = c ] || [ "$what" = all ]; then
    echo "== C ABI against the Rust library, 64 threads, 128 B + fdatasync, ${secs}s each"
    tmp=$work/c
    mkdir -p "$tmp"
    cc -std=c11 -O2 -I bindings/c -o "$tmp/test_okeanos" bindings/c/tests/test_okeanos.c -L "$lib" -lokeanos -Wl,-rpath,"$lib" -lpthread
    for i in $(seq "$runs"); do
        rm -f "$tmp/c.img" "$tmp/r.img"
        "$tmp/test_okeanos" mkfs "$tmp/c.img" $((2 << 30))
        "$tmp/test_okeanos" mkfs "$tmp/r.img" $((2 << 30))
        # Alternate which goes first, so that a drift of the machine does not favour one, and
        # write back what earlier runs left dirty, so that it does not land on the next one.
        sync
        if [ $((i % 2)) = 1 ]; then
            a=$("$tmp/test_okeanos" bench "$tmp/c.img" "data=wasteless+dmeta" 64 "$secs")
            sync
            b=$("$repo/target/debug/examples/appenders" "$tmp/r.img" "data=wasteless+dmeta" 64 "$secs")
        else
            b=$("$repo/target/debug/examples/appenders" "$tmp/r.img" "data=wasteless+dmeta" 64 "$secs")
            sync
            a=$("$tmp/test_okeanos" bench "$tmp/c.img" "data=wasteless+dmeta" 64 "$secs")
        fi
        echo "run $i: $a"
        echo "run $i: $b"
        ratio "$a" "$b" "$i" "C/Rust"
    done
fi

if [ "$what" = group ] || [ "$what" = all ]; then
    echo "== group sync of 100 files, one 128 B record each, 200 rounds"
    for i in $(seq "$runs"); do
        d=$(okeanos_loop)
        a=$("$py" bindings/python/bench/appenders.py okeanos-group "$d" "data=wasteless+dmeta,direct_io" 100 200)
        ext4_ordered
        b=$("$py" bindings/python/bench/appenders.py posix-group "$work/mnt" 100 200)
        echo "run $i: $a"
        echo "run $i: $b"
    done
fi

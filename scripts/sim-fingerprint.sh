#!/usr/bin/env bash
# The simulator's outputs on fixed seeds, every placement, written to one directory: the proof
# that a refactor changed no behaviour is `diff -r` of two such directories, one made before
# and one after (docs/DESIGN.md, "Changing the engine without changing what it does").
#
#   OKEANOS=target/release/okeanos bash scripts/sim-fingerprint.sh /tmp/before
#   ... refactor, rebuild ...
#   bash scripts/sim-fingerprint.sh /tmp/after && diff -r /tmp/before /tmp/after
#
# Wall-clock and CPU fields (wall_s, cpu_s, "in N s") are dropped: they are the only parts of
# the output that depend on the machine. Everything else (virtual time, bytes per kind, sync
# latencies, crash states and violations) is a function of the code and the seed.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: sim-fingerprint.sh OUTPUT_DIR}
okeanos=${OKEANOS:-target/release/okeanos}
[ -x "$okeanos" ] || { echo "no $okeanos: cargo build --release --locked -p okeanos-cli, or set OKEANOS=" >&2; exit 1; }
mkdir -p "$out"

# JSON runs without the machine-dependent fields, one key per line so that diffs are readable.
strip_json() {
    python3 - "$1" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
def clean(x):
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items() if k not in ("wall_s", "cpu_s", "command")}
    if isinstance(x, list):
        return [clean(v) for v in x]
    return x
json.dump(clean(d), open(sys.argv[1], "w"), indent=1, sort_keys=True)
EOF
}

# A run that fails is part of the fingerprint too: its exit status beside its JSON.
run_json() {
    local name=$1; shift
    local rc=0
    "$okeanos" sim "$@" --json "$out/$name.json" --quiet >/dev/null 2>&1 || rc=$?
    [ -f "$out/$name.json" ] && strip_json "$out/$name.json"
    [ "$rc" = 0 ] || echo "exit $rc" > "$out/$name.exit"
    echo "$name${rc/#0/}" >&2
}

for j in external internal remote replicated nvm manylogs dropped; do
    small=(--fs-size 256M --journal-size 16M)
    run_json "multistream-$j" multistream --journal "$j" "${small[@]}" --streams 1,100 --size 128,4K --duration 200ms --seed 7
    run_json "recovery-$j" recovery --journal "$j" "${small[@]}" --streams 10 --records 50 --seed 7
    run_json "postmark-$j" postmark --journal "$j" "${small[@]}" --streams 4 --files 20 --transactions 300 --seed 7
done
run_json multistream-rate multistream --journal internal --fs-size 256M --journal-size 16M --streams 100 --rate 10kbit --sync-every 4 --duration 500ms --seed 3
run_json iozone iozone --journal manylogs --fs-size 256M --journal-size 16M --file-size 4M --sync-every 16 --seed 5
run_json mixed mixed --journal external --fs-size 1G --journal-size 16M --streams 4 --file-size 1M --seed 5 --duration 300ms
"$okeanos" sim nearhead --rates 0,50 --duration 2s --seed 11 --json "$out/nearhead.json" >/dev/null
strip_json "$out/nearhead.json"
echo nearhead >&2
# The large writer beside small syncs (Fig. 2b): the baselines' in-place data and its early
# writeback, which the runs above do not reach (a change there once moved a figure unnoticed).
"$okeanos" sim nearhead --schemes ordered,selective,manylogs --rates 40 --writer --duration 3s --seed 11 --json "$out/nearhead-writer.json" >/dev/null
strip_json "$out/nearhead-writer.json"
echo nearhead-writer >&2
# Crash fuzzing prints a table; its last summary line carries the wall time.
"$okeanos" sim --crash-fuzz --seed 1 --runs 60 --points 4 | sed -E 's/ in [0-9.]+ s/ in - s/' > "$out/crash-fuzz.txt"
echo crash-fuzz >&2
"$okeanos" sim --crash-fuzz --seed 1 --runs 20 --points 4 --canary | sed -E 's/ in [0-9.]+ s/ in - s/' > "$out/crash-fuzz-canary.txt" || true
echo crash-fuzz-canary >&2
for j in nvm remote replicated; do
    "$okeanos" sim --crash-fuzz --journal $j --seed 1 --runs 40 --points 4 | sed -E 's/ in [0-9.]+ s/ in - s/' > "$out/crash-fuzz-$j.txt"
    "$okeanos" sim --crash-fuzz --journal $j --seed 1 --runs 40 --points 4 --canary | sed -E 's/ in [0-9.]+ s/ in - s/' > "$out/crash-fuzz-$j-canary.txt" || true
    echo "crash-fuzz on $j" >&2
done
echo "written to $out" >&2

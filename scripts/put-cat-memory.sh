#!/usr/bin/env bash
# Peak memory (max RSS) of `okeanos put` and `okeanos cat` of one large file, each measured on
# its own process with GNU time's %M. Usage: scripts/put-cat-memory.sh [MiB] [mount options]
# (docs/JOURNALING.md, "Bounds").
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
okeanos="$here/target/release/okeanos"
[ -x "$okeanos" ] || (cd "$here" && cargo build --release -p okeanos-cli)
command -v /usr/bin/time >/dev/null || { echo "needs GNU time (apt-get install time)" >&2; exit 1; }
mib="${1:-300}"
opts="${2:-}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
head -c "${mib}M" /dev/urandom > "$dir/src"
"$okeanos" mkfs "$dir/img" --size 1G >/dev/null
/usr/bin/time -f "put: max RSS %M KiB" "$okeanos" put "$dir/img" "$dir/src" /big ${opts:+-o "$opts"}
/usr/bin/time -f "cat: max RSS %M KiB" "$okeanos" cat "$dir/img" /big ${opts:+-o "$opts"} > "$dir/back"
cmp "$dir/src" "$dir/back" && echo "cat returned the same ${mib} MiB"

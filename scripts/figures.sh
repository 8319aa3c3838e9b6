#!/usr/bin/env bash
# Regenerates the simulator's documented figures (docs/SIMULATION.md) and their JSON, CSV and
# plots under docs/sim/ from the current code, with the commands the document shows.
#
#   bash scripts/figures.sh --list          # the figures, one name a line
#   bash scripts/figures.sh NAME [NAME...]  # those figures
#   bash scripts/figures.sh all             # every one (hours of CPU on 2 cores: the 1 Kbit/s
#                                           # figure alone simulates 8,000 streams for 60 s)
#
# The simulator is deterministic: a figure that comes out different is a change in the code,
# to be explained in docs/SIMULATION.md before the new JSON is committed. `git diff --stat
# docs/sim` after a run shows what moved. The test command checks a few quick figures against
# the committed JSON (okeanos-cli/tests/figures.rs), so a change that moves one fails until
# the document moves with it.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${OKEANOS_BIN:-target/release/okeanos}
M=ordered,writeback,data,wasteless,selective,wasteless+dmeta
S=docs/sim

fig() {
    case "$1" in
    fig-1kbit) $bin sim multistream --model cheetah15k --flush-tuning thesis --modes $M --streams 100,500,1000,2000,4000,8000 \
        --size 128 --rate 1kbit --duration 60s --json $S/fig-1kbit.json --csv $S/fig-1kbit.csv --plot $S ;;
    fig-10kbit) $bin sim multistream --model cheetah15k --flush-tuning thesis --modes $M --streams 50,100,500,1000,1500 \
        --size 1280 --rate 10kbit --duration 60s --json $S/fig-10kbit.json --csv $S/fig-10kbit.csv --plot $S ;;
    fig-1mbit) $bin sim multistream --model cheetah15k --flush-tuning thesis --modes $M --streams 10,25,50,75,100 \
        --size 128K --rate 1mbit --duration 60s --json $S/fig-1mbit.json --csv $S/fig-1mbit.csv --plot $S ;;
    recovery) $bin sim recovery --model cheetah15k --modes $M --streams 100 --size 125 --records 100 --json $S/recovery.json ;;
    postmark) $bin sim postmark --model cheetah15k --modes ordered,writeback,data,wasteless,selective,wasteless+dmeta \
        --streams 100 --size 128,1K,4K,16K --files 500 --transactions 10000 --json $S/postmark.json ;;
    remote-postmark)
        for j in internal external remote dropped; do
            $bin sim postmark --journal $j --journal-size 32M --fs-size 2G --modes writeback,ordered,data \
                --streams 10 --size 512 --min-file 500 --max-file 1000 --files 1000 --transactions 5000 \
                --json $S/remote-postmark-$j.json
        done ;;
    replicated)
        $bin sim multistream --journal remote --model ssd --server-model ssd --modes wasteless+dmeta --streams 1,100 --size 128 --duration 5s
        $bin sim multistream --journal replicated --model ssd --server-model ssd --modes wasteless+dmeta --streams 1,100 --size 128 --duration 5s
        $bin sim multistream --journal replicated --leader-loss-at 1s --election 2s --model ssd --server-model ssd --modes wasteless+dmeta --streams 1,100 --size 128 --duration 5s ;;
    mixed) $bin sim mixed --model cheetah15k --journal internal --modes ordered,data,wasteless,selective \
        --streams 10,50 --size 4K --rate 10/s --large write --duration 30s --json $S/mixed.json ;;
    nearhead-read) $bin sim nearhead --schemes ordered,data,selective,manylogs --rates 40,80,160,320 \
        --duration 20s --json $S/nearhead-read.json ;;
    nearhead-write) $bin sim nearhead --schemes ordered,data,selective,manylogs --rates 40,80,160,320 --writer \
        --duration 20s --json $S/nearhead-write.json ;;
    nearhead-raid0) $bin sim nearhead --model cheetah15k5-146-raid0x4 --schemes ordered,selective,manylogs \
        --rates 160,320,640,1280 --device-request 2M --duration 20s --json $S/nearhead-raid0.json ;;
    varmail)
        for w in 2 4 8; do
            $bin sim nearhead --schemes ordered,selective,manylogs --varmail 20 --writers $w --duration 20s --json $S/varmail-$w.json
        done ;;
    fileserver)
        for w in 2 4 8; do
            $bin sim nearhead --schemes ordered,selective,manylogs --fileserver 20 --writers $w --duration 20s --json $S/fileserver-$w.json
        done ;;
    commitlog)
        for w in 1 4; do
            $bin sim nearhead --schemes manylogs --commit-log 33ms,1ms --durable --writers $w \
                --request 1M --large-size 3G --duration 20s --json $S/commitlog-${w}db-durable.json
            $bin sim nearhead --schemes ordered,selective --commit-log 33ms,1ms --writers $w \
                --request 1M --large-size 3G --duration 20s --json $S/commitlog-${w}db-baselines.json
        done ;;
    lazy-checkpoint)
        for s in 1 2 3; do
            $bin sim lazy-checkpoint --hot-blocks 32 --cache-blocks 2048 --seed $s --json $S/lazy-checkpoint-seed$s.json
        done ;;
    recovery-manylogs)
        for p in 0 0.25 1; do
            $bin sim recovery --journal manylogs --modes data,wasteless+dmeta,ordered --streams 100 \
                --size 4096 --records 200 --mount-options checkpoint=lazy,snapshot_period=$p
        done ;;
    ubj)
        for j in internal nvm; do
            for m in cheetah15k ssd; do
                $bin sim multistream --modes data --streams 1000 --size 128 --rate 1kbit --duration 20s --journal $j --model $m --fs-size 4G
            done
            $bin sim iozone --modes data --size 4096 --file-size 100M,200M,300M --pattern seq,random --journal $j --model cheetah15k --fs-size 2G
            for t in 5000 10000 20000; do
                $bin sim postmark --buffered --modes data --streams 1 --size 4096 --transactions $t --journal $j --model cheetah15k --fs-size 2G
            done
        done
        $bin sim postmark --flow varmail --modes writeback,data --streams 16 --size 16K --files 1000 --min-file 1K --max-file 32K --transactions 5000 --journal internal --model cheetah15k --fs-size 2G
        $bin sim postmark --flow varmail --modes data --streams 16 --size 16K --files 1000 --min-file 1K --max-file 32K --transactions 5000 --journal nvm --model cheetah15k --fs-size 2G
        for j in internal nvm; do
            # Postmark with an fdatasync per write, and Figure 13's commit periods.
            $bin sim postmark --modes data --streams 1 --size 4096 --transactions 5000 --journal $j --model cheetah15k --fs-size 2G
            for c in 1 5; do
                $bin sim multistream --modes data --streams 100 --size 4096 --rate 10/s --sync-every 10 --duration 30s --journal $j --mount-options commit=$c
            done
        done ;;
    *) echo "no figure named $1 (bash scripts/figures.sh --list)" >&2; return 2 ;;
    esac
}

all=(fig-1kbit fig-10kbit fig-1mbit recovery postmark remote-postmark replicated mixed nearhead-read nearhead-write
    nearhead-raid0 varmail fileserver commitlog lazy-checkpoint recovery-manylogs ubj)

if [ $# -eq 0 ]; then
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
if [ "$1" = --list ]; then
    printf '%s\n' "${all[@]}"
    exit 0
fi
[ -x "$bin" ] || cargo build --release --locked -p okeanos-cli
names=("$@")
[ "$1" = all ] && names=("${all[@]}")
for n in "${names[@]}"; do
    echo "== $n" >&2
    fig "$n"
done

#!/usr/bin/env python3
"""Where a sync's CPU goes, by call path: reads `perf script` output (a profile recorded with
call graphs of `okeanos bench multistream --target engine:loop ...`) on standard input and puts
each sample in the first category its stack matches, in the order below. Prints each
category's share of the process's samples.

    perf record -F 999 -e cpu-clock --call-graph dwarf,16384 -o perf.data \
        target/release/okeanos bench multistream --target engine:loop \
        --modes wasteless+dmeta --streams 100 --size 128 --rate closed --duration 3s
    perf script -i perf.data | python3 scripts/sync-cpu-by-path.py

docs/BENCHMARKS.md ("Where a sync's CPU goes at the end of issue 33") gives a run of it.
The order matters: a sample of a woken sync waiting for the state lock inside a fold is
counted as waiting, not as folding.
"""

import re
import sys

# (category, a test over the stack as one string of function names, innermost first)
CATEGORIES = [
    ("mount, mkfs and unmount (once a run)",
     lambda s: "mkfs" in s or "Okeanos>::unmount" in s or "::recover" in s),
    ("a sync asleep until its commit (the futex wait, the switch out and back)",
     lambda s: "futex_wait" in s and ("fsync_staged" in s or "wait_committed" in s) and "lock_contended" not in s),
    ("the commit's end waking its syncs (one futex wake of every sleeper)",
     lambda s: "futex_wake" in s and ("journal_thread" in s or "Inner::committed" in s or "lead" in s) and "Mutex>::unlock" not in s),
    ("an append waiting for the state lock",
     lambda s: "lock_contended" in s and "write_inner" in s),
    ("anything else waiting for the state lock",
     lambda s: "lock_contended" in s),
    ("letting the state lock go and waking a thread that waits for it",
     lambda s: "futex_wake" in s and "Mutex>::unlock" in s),
    ("folding staged appends into the transaction (under the lock)",
     lambda s: "fold_stages" in s or "Okeanos>::fold" in s),
    ("a slow-path append's own work (under the lock: a block, the inode, the handle)",
     lambda s: "write_inner" in s),
    ("a staged append (beside the lock)",
     lambda s: "try_stage" in s or "paths::File::append" in s),
    ("the commit's I/O system calls",
     lambda s: re.search(r"pwrite|fdatasync|io_uring|pread", s) is not None
     and ("journal_thread" in s or "lead" in s or "flush" in s)),
    ("planning a commit (differences, records, encoding)",
     lambda s: "commit_begin" in s or "plan" in s or "encode" in s),
    ("the rest of the commit lane (finishing, checkpoints, the scheduler)",
     lambda s: "journal_thread" in s or "lead" in s or "carry_out" in s or "checkpoint" in s),
    ("a sync's bookkeeping",
     lambda s: "fsync" in s),
    ("the benchmark's own (latency histogram, clock)",
     lambda s: "bench" in s or "Histogram" in s),
    ("the rest", lambda s: True),
]


def symbol(line):
    """`addr symbol+0xoff (dso)` -> `symbol`."""
    parts = line.split(None, 1)
    s = parts[1] if len(parts) > 1 else parts[0]
    s = re.sub(r" \([^()]*\)$", "", s)
    return re.sub(r"\+0x[0-9a-f]+$", "", s)


def samples(lines):
    block = []
    for line in lines:
        if line.strip():
            block.append(line.strip())
        elif block:
            yield block
            block = []
    if block:
        yield block


def main():
    counts = {name: 0 for name, _ in CATEGORIES}
    total = 0
    for block in samples(sys.stdin):
        # The first line names the thread and the event; the frames follow, innermost first.
        stack = "\n".join(symbol(l) for l in block[1:])
        for name, test in CATEGORIES:
            if test(stack):
                counts[name] += 1
                break
        total += 1
    if total == 0:
        sys.exit("no samples on standard input (perf script output expected)")
    for name, _ in CATEGORIES:
        if counts[name]:
            print(f"{100 * counts[name] / total:5.1f}%  {name}")
    print(f"{total} samples")


if __name__ == "__main__":
    main()

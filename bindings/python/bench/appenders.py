"""Appenders from Python: THREADS threads each append RECORD-byte records to a file of their own
with an fdatasync after each, for SECONDS; or a group sync of FILES files, one record each.
scripts/bench-bindings.sh runs it against Okeanos (the package) and a kernel file system
(os.write + os.fdatasync) in one command, several times (docs/BENCHMARKS.md).

    appenders.py okeanos|okeanos-durable DEVICE_OR_IMAGE MOUNT_OPTIONS THREADS SECONDS
    appenders.py posix DIR THREADS SECONDS
    appenders.py okeanos-group DEVICE_OR_IMAGE MOUNT_OPTIONS FILES ROUNDS
    appenders.py posix-group DIR FILES ROUNDS
"""
import json
import os
import sys
import threading
import time

RECORD = 128


def run_threads(n, seconds, make):
    counts = [0] * n
    start = threading.Barrier(n + 1)
    stop = [False]

    def worker(i):
        append, sync, close = make(i)
        rec = bytes([65 + i % 26]) * (RECORD - 1) + b"\n"
        start.wait()
        c = 0
        while not stop[0]:
            append(rec)
            sync()
            c += 1
        counts[i] = c
        close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop[0] = True
    for t in threads:
        t.join()
    return sum(counts), time.perf_counter() - t0


def main():
    kind = sys.argv[1]
    if kind in ("okeanos", "okeanos-durable"):
        import okeanos

        path, opts, n, secs = sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
        fs = okeanos.FileSystem(okeanos._okeanos.mount(path, opts))

        def make(i):
            f = fs.create(f"/s{i}")
            if kind == "okeanos":
                return f.append, f.fdatasync, f.close
            # append(durable=True): the append and its fdatasync in one call.
            return (lambda b: f.append(b, durable=True)), (lambda: None), f.close

        before = fs.counters()
        syncs, el = run_threads(n, secs, make)
        after = fs.counters()
        fs.unmount()
        out = {"target": "okeanos: " + ("append, fdatasync" if kind == "okeanos" else "append(durable=True)"), "threads": n, "syncs": syncs, "seconds": round(el, 3), "syncs_per_sec": round(syncs / el, 1),
               "commits": after["commits"] - before["commits"]}
    elif kind == "posix":
        d, n, secs = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])

        def make(i):
            fd = os.open(os.path.join(d, f"s{i}"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            return (lambda b: os.write(fd, b)), (lambda: os.fdatasync(fd)), (lambda: os.close(fd))

        syncs, el = run_threads(n, secs, make)
        out = {"target": "kernel (os.write + os.fdatasync)", "threads": n, "syncs": syncs, "seconds": round(el, 3), "syncs_per_sec": round(syncs / el, 1)}
    elif kind == "okeanos-group":
        import okeanos

        path, opts, nfiles, rounds = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
        fs = okeanos.FileSystem(okeanos._okeanos.mount(path, opts))
        files = [fs.create(f"/g{i}") for i in range(nfiles)]
        fs.sync()
        before = fs.counters()
        t0 = time.perf_counter()
        for r in range(rounds):
            for f in files:
                f.append(b"r" * RECORD)
            fs.sync_files(files)
        el = time.perf_counter() - t0
        after = fs.counters()
        for f in files:
            f.close()
        fs.unmount()
        out = {"target": "okeanos sync_files", "files": nfiles, "rounds": rounds, "ms_per_round": round(el / rounds * 1e3, 3),
               "commits_per_round": (after["commits"] - before["commits"]) / rounds,
               "journal_bytes_per_round": (after["journal_bytes"] - before["journal_bytes"]) / rounds}
    elif kind == "posix-group":
        d, nfiles, rounds = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        fds = [os.open(os.path.join(d, f"g{i}"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) for i in range(nfiles)]
        os.sync()
        t0 = time.perf_counter()
        for r in range(rounds):
            for fd in fds:
                os.write(fd, b"r" * RECORD)
            for fd in fds:
                os.fdatasync(fd)
        el = time.perf_counter() - t0
        for fd in fds:
            os.close(fd)
        out = {"target": "kernel: one fdatasync per file", "files": nfiles, "rounds": rounds, "ms_per_round": round(el / rounds * 1e3, 3)}
    else:
        sys.exit(__doc__)
    print(json.dumps(out))


if __name__ == "__main__":
    main()

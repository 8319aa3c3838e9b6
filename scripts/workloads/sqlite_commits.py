"""SQLite commits: P processes, each committing one-row transactions (a 100-byte blob) to its
own database in WAL mode with synchronous=FULL (an fsync of the WAL per commit) for S seconds.
Prints committed transactions per second over all processes.

    python3 sqlite_commits.py DIR PROCESSES SECONDS
"""
import sqlite3, sys, os, time, multiprocessing as mp
def worker(args):
    d, k, secs = args
    path = os.path.join(d, f"db{k}.sqlite")
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL"); c.execute("PRAGMA synchronous=FULL")
    c.execute("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v BLOB)")
    n = 0; t0 = time.monotonic(); end = t0 + secs
    while time.monotonic() < end:
        c.execute("BEGIN"); c.execute("INSERT INTO t(v) VALUES (?)", (os.urandom(100),)); c.execute("COMMIT"); n += 1
    c.close()
    return n, time.monotonic() - t0
if __name__ == "__main__":
    d, procs, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    with mp.Pool(procs) as p:
        r = p.map(worker, [(d, k, secs) for k in range(procs)])
    n = sum(x for x, _ in r); t = max(y for _, y in r)
    print(f"{n/t:.0f} tx/s ({n} commits, {procs} processes, {t:.1f} s)")

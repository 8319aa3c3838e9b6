"""Overwrites of allocated blocks, each followed by fdatasync: writes DIR/pre.dat whole (16 MiB)
and fsyncs it, prints "ready" and waits for a line on stdin (so that the caller can read its
counters), then overwrites 200 scattered 8 KiB pieces with an fdatasync after each and prints
the mean time per overwrite+fdatasync. A PostgreSQL WAL segment or data file is this case.

    python3 overwrite_fdatasync.py DIR
"""
import os
import sys
import time

p = os.path.join(sys.argv[1], "pre.dat")
fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, bytes(16 << 20), 0)
os.fsync(fd)
print("ready", flush=True)
sys.stdin.readline()
buf = os.urandom(8192)
t0 = time.monotonic()
for k in range(200):
    os.pwrite(fd, buf, (k * 37 % 2048) * 8192)
    os.fdatasync(fd)
dt = time.monotonic() - t0
print(f"200 overwrites of 8 KiB + fdatasync: {dt * 1e6 / 200:.0f} us each", flush=True)

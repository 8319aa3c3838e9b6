"""The Python quick start of docs/EMBEDDING.md and the README (tested by tests/test_okeanos.py).

    python3 quickstart.py DIR
"""
import os
import sys
import threading

import okeanos

work = sys.argv[1] if len(sys.argv) > 1 else "."
image = os.path.join(work, "ingest.img")
okeanos.mkfs(image, size=256 << 20)  # an image file with an internal journal

with okeanos.open(image, data="wasteless+dmeta") as fs:
    # Per-tenant logs: append a record, make it durable, go on. Threads share commits.
    def tenant(i):
        with fs.create(f"/tenant-{i}.log") as log:
            for k in range(100):
                log.append(b"tenant=%d seq=%03d temp=21.5\n" % (i, k))
                log.fdatasync()  # durable when this returns

    threads = [threading.Thread(target=tenant, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    # Group sync: one record in each of 8 files, made durable by one commit.
    logs = [fs.create(f"/tenant-{i}.log") for i in range(8)]
    for log in logs:
        log.append(b"checkpoint\n")
    fs.sync_files(logs)

    # A tailing reader reads only what a crash cannot take back.
    with fs.open("/tenant-0.log") as reader:
        safe = reader.durable_len()
        print(f"{safe} bytes of /tenant-0.log are durable; the last line: {reader.read(safe).splitlines()[-1]!r}")
    for log in logs:
        log.close()
    c = fs.counters()
    print(f"{c['syncs']} syncs in {c['commits']} commits")

"""The Python package, through its public API only. Run by scripts/test.sh with pytest."""

import errno
import io
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import okeanos

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


@pytest.fixture
def img(tmp_path):
    path = str(tmp_path / "fs.img")
    okeanos.mkfs(path, size=64 << 20, journal_size="8M")
    return path


def test_files_behave_as_binary_files(img):
    with okeanos.open(img, data="data") as fs:
        with fs.open("/f", "w+") as f:
            assert f.write(b"hello\nworld\n") == 12
            assert f.tell() == 12
            f.seek(0)
            assert f.readline() == b"hello\n"
            assert list(f) == [b"world\n"]
            f.seek(-6, io.SEEK_END)
            assert f.read(5) == b"world"
            f.seek(100)
            f.write(b"!")
            assert f.stat().st_size == 101
            f.seek(6)
            assert f.read(3) == b"wor"
            assert f.truncate(8) == 8
            f.seek(0)
            assert f.read() == b"hello\nwo"
            buf = bytearray(4)
            f.seek(0)
            assert f.readinto(buf) == 4 and buf == b"hell"
            with pytest.raises(OSError) as e:
                f.seek(-1)
            assert e.value.errno == errno.EINVAL
            with pytest.raises(io.UnsupportedOperation):
                f.fileno()
        with fs.open("/f", "rb") as f:
            assert f.read() == b"hello\nwo"
            with pytest.raises(io.UnsupportedOperation):
                f.write(b"x")
        with fs.open("/f", "a") as f:
            f.write(b"++")
            with pytest.raises(io.UnsupportedOperation):
                f.read()
        with fs.open("/f", "r+") as f:
            f.write(b"J")
            assert f.read() == b"ello\nwo++"
        with fs.open("/f", "w") as f:  # truncates
            pass
        assert fs.stat("/f").st_size == 0
        with fs.open("/g", "x") as f:
            f.write(b"new")
        with pytest.raises(FileExistsError):
            fs.open("/g", "x")
        with pytest.raises(ValueError):
            fs.open("/g", "rt")
        with pytest.raises(ValueError):
            fs.open("/g", "q")


def test_create_appends_and_the_namespace_calls(img):
    with okeanos.open(img) as fs:
        fs.mkdir("/logs", 0o750)
        with fs.create("/logs/a.log") as f:
            assert f.append(b"one\n") == 0
            assert f.append(b"two\n") == 4
        with fs.create("/logs/a.log") as f:  # opens the existing file, appending
            f.write(b"three\n")
            f.seek(0)
            assert f.read() == b"one\ntwo\nthree\n"
        st = fs.stat("/logs")
        assert st.is_dir() and st.st_mode & 0o7777 == 0o750
        assert fs.listdir("/logs") == ["a.log"]
        fs.rename("/logs/a.log", "/logs/b.log")
        assert fs.exists("/logs/b.log") and not fs.exists("/logs/a.log")
        fs.truncate("/logs/b.log", 3)
        assert fs.stat("/logs/b.log").st_size == 3
        with pytest.raises(OSError) as e:
            fs.rmdir("/logs")
        assert e.value.errno == errno.ENOTEMPTY
        fs.unlink("/logs/b.log")
        fs.rmdir("/logs")
        assert fs.listdir("/") == []
        c = fs.counters()
        assert c["commits"] >= 0 and "journal_bytes" in c


def test_errors_are_oserror_subclasses_with_errno(img, tmp_path):
    with okeanos.open(img) as fs:
        with pytest.raises(FileNotFoundError) as e:
            fs.open("/missing")
        assert e.value.errno == errno.ENOENT and e.value.filename == "/missing"
        fs.mkdir("/d")
        with pytest.raises(FileExistsError):
            fs.mkdir("/d")
        with pytest.raises(IsADirectoryError):
            fs.open("/d")
        with fs.open("/file", "w"):
            pass
        with pytest.raises(NotADirectoryError):
            fs.open("/file/x")
        with pytest.raises(OSError) as e:
            okeanos.open(img)  # the image's lock: a second open is refused
        assert e.value.errno == errno.EBUSY
    with pytest.raises(ValueError):
        okeanos.open(img, data="sometimes")
    with pytest.raises(ValueError):
        okeanos.open(img, bogus="a,b")
    with pytest.raises(FileNotFoundError):
        okeanos.open(str(tmp_path / "none.img"))
    with pytest.raises(OSError) as e:
        okeanos.mkfs(img, size=64 << 20)
    assert e.value.errno == errno.EINVAL and "exists" in str(e.value)
    with pytest.raises(ValueError):
        okeanos.mkfs(str(tmp_path / "x.img"), size=64 << 20, journal="floppy")
    with pytest.raises(OSError):
        okeanos.mkfs(str(tmp_path / "y.img"), size=64 << 20, colour="blue")
    assert not os.path.exists(tmp_path / "y.img")
    with pytest.raises(TypeError):
        okeanos.open(img, data=b"\xff")  # not a str: refused before anything is mounted


def test_closed_files_and_unmounted_file_systems_raise_valueerror(img):
    fs = okeanos.open(img)
    f = fs.create("/a")
    f.close()
    f.close()  # twice is fine
    for call in (lambda: f.write(b"x"), lambda: f.read(), f.fdatasync, f.durable_len, lambda: f.seek(0)):
        with pytest.raises(ValueError):
            call()
    g = fs.create("/b")
    g.append(b"kept")
    fs.unmount()
    assert not fs.mounted
    with pytest.raises(ValueError):
        g.append(b"x")
    with pytest.raises(ValueError):
        fs.open("/b")
    fs.unmount()  # twice is fine
    with okeanos.open(img) as fs:
        with fs.open("/b") as b:
            assert b.read() == b"kept"
        with pytest.raises(TypeError):
            fs.sync_files([b"not a file"])


def test_durable_watermark_and_a_tailing_reader(img):
    with okeanos.open(img, data="wasteless", commit=60) as fs:
        w = fs.create("/tenant.log")
        r = fs.open("/tenant.log")
        w.append(b"a" * 128)
        assert r.durable_len() == 0
        assert r.wait_durable(128, timeout=0.05) == 0  # nothing commits (commit=60)

        def writer():
            time.sleep(0.05)
            w.append(b"b" * 128)
            w.fdatasync()

        t = threading.Thread(target=writer)
        t.start()
        assert r.wait_durable(256, timeout=30) == 256
        t.join()
        assert r.read(256) == b"a" * 128 + b"b" * 128
        w.write(b"c")
        assert w.durable_len() == 256
        w.close()
        r.close()


def test_group_sync_is_one_commit(img):
    with okeanos.open(img, data="wasteless+dmeta", commit=60) as fs:
        files = [fs.create(f"/t{i}") for i in range(100)]
        fs.sync()
        before = fs.counters()["commits"]
        for i, f in enumerate(files):
            f.append(bytes([i]) * 128)
        fs.sync_files(files)
        assert fs.counters()["commits"] - before == 1
        assert all(f.durable_len() == 128 for f in files)
        other_img = img + ".other"
        okeanos.mkfs(other_img, size=64 << 20)
        with okeanos.open(other_img) as other_fs, other_fs.create("/x") as other:
            with pytest.raises(ValueError):
                fs.sync_files([files[0], other])
        for f in files:
            f.close()


def test_threads_share_commits_because_syncs_release_the_gil(img):
    with okeanos.open(img, data="wasteless+dmeta") as fs:
        per, n = 40, 16

        def appender(i):
            with fs.create(f"/s{i}") as f:
                for k in range(per):
                    f.append(bytes([65 + i]) * 128)
                    f.fdatasync()

        before = fs.counters()
        threads = [threading.Thread(target=appender, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        after = fs.counters()
        syncs, commits = after["syncs"] - before["syncs"], after["commits"] - before["commits"]
        assert syncs == per * n
        # Had a sync held the GIL, every one would wait alone: one commit per sync.
        assert commits < syncs * 0.8, f"{commits} commits for {syncs} syncs"
        for i in range(n):
            assert fs.stat(f"/s{i}").st_size == per * 128


def test_every_local_journal_kind(tmp_path):
    cases = [
        ("external", dict(journal="external", journal_path=str(tmp_path / "j"), journal_size="4M"), dict(journal_path=str(tmp_path / "j"))),
        ("nvm", dict(journal="nvm", nvm=str(tmp_path / "nvm"), nvm_size="32M"), {}),
        ("manylogs", dict(journal="manylogs", group_size="32M"), {}),
    ]
    for name, mk, mnt in cases:
        path = str(tmp_path / f"{name}.img")
        okeanos.mkfs(path, size=256 << 20, **mk)
        with okeanos.open(path, data="data", **mnt) as fs:
            with fs.create("/r") as f:
                f.append(b"x" * 128)
                f.fdatasync()
        with okeanos.open(path, data="data", **mnt) as fs:
            assert fs.stat("/r").st_size == 128, name


APPENDER = textwrap.dedent(
    """
    import sys, threading, okeanos
    fs = okeanos.open(sys.argv[1], data="wasteless+dmeta")
    lock = threading.Lock()
    def run(t):
        f = fs.create(f"/t{t}")
        k = 0
        while True:
            f.append(bytes([65 + t]) * 120 + b"%07d\\n" % k)
            f.fdatasync()
            with lock:
                sys.stdout.write(f"ack {t} {k}\\n")
                sys.stdout.flush()
            k += 1
    for t in range(8):
        threading.Thread(target=run, args=(t,), daemon=True).start()
    threading.Event().wait()
    """
)


def test_a_killed_process_keeps_every_acknowledged_record(img, tmp_path):
    acks = tmp_path / "acks"
    with open(acks, "w") as out:
        p = subprocess.Popen([sys.executable, "-c", APPENDER, img], stdout=out)
        deadline = time.time() + 30
        while os.path.getsize(acks) < 20000 and time.time() < deadline and p.poll() is None:
            time.sleep(0.02)
        p.send_signal(signal.SIGKILL)
        p.wait()
    lines = [l.split() for l in open(acks) if l.startswith("ack ") and l.endswith("\n")]
    assert len(lines) > 100, f"only {len(lines)} acknowledgements"
    with okeanos.open(img) as fs:
        for _, t, k in lines:
            t, k = int(t), int(k)
            with fs.open(f"/t{t}") as f:
                f.seek(k * 128)
                assert f.read(128) == bytes([65 + t]) * 120 + b"%07d\n" % k, f"record {k} of thread {t}"


def test_the_documented_example_runs(tmp_path):
    example = os.path.join(REPO, "bindings", "python", "examples", "quickstart.py")
    out = subprocess.run([sys.executable, example, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "durable" in out.stdout


def python_blocks(doc):
    text = open(os.path.join(REPO, doc)).read()
    blocks, inside, cur = [], False, []
    for line in text.splitlines():
        if line.strip() == "```python":
            inside, cur = True, []
        elif inside and line.strip() == "```":
            inside = False
            blocks.append("\n".join(cur))
        elif inside:
            cur.append(line)
    return blocks


@pytest.mark.parametrize("doc", ["README.md", "docs/EMBEDDING.md", "bindings/python/README.md"])
def test_the_python_blocks_of_the_documents_run(doc, tmp_path):
    blocks = python_blocks(doc)
    assert blocks, f"{doc} has no Python block"
    for code in blocks:
        image = str(tmp_path / "ingest.img")
        if os.path.exists(image):
            os.remove(image)
        exec(compile(code.replace("/tmp/ingest.img", image), doc, "exec"), {})


def test_a_remote_journal_through_the_package(tmp_path):
    """A real journal server on 127.0.0.1 (the okeanos binary of this build)."""
    binary = os.environ.get("OKEANOS_BIN", os.path.join(REPO, "target", "debug", "okeanos"))
    assert os.path.exists(binary), f"{binary} is missing: build the workspace (scripts/test.sh does)"
    server = subprocess.Popen([binary, "journal-server", "--listen", "127.0.0.1:0", "--no-auth", "--dir", str(tmp_path / "journals")],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        addr = server.stdout.readline().split()[4].rstrip(",")
        assert addr.startswith("127.0.0.1:"), addr
        img = str(tmp_path / "remote.img")
        okeanos.mkfs(img, size=64 << 20, journal="remote", journal_server=addr)
        opts = dict(journal_server=addr, remote_host="py-host", remote_ack_timeout=5)
        with okeanos.open(img, data="wasteless", **opts) as fs:
            with fs.create("/r") as f:
                f.append(b"remote\n", durable=True)
                assert f.durable_len() == 7
            assert fs.counters()["remote_bytes"] > 0
        with okeanos.open(img, data="wasteless", **opts) as fs:
            with fs.open("/r") as f:
                assert f.read() == b"remote\n"
    finally:
        server.kill()
        server.wait()


def test_paths_that_are_not_utf8_are_refused(img):
    with okeanos.open(img) as fs:
        bad = b"/\xff".decode("utf-8", "surrogateescape")
        with pytest.raises(UnicodeEncodeError):
            fs.open(bad, "w")
        with pytest.raises(UnicodeEncodeError):
            fs.mkdir(bad)
        assert fs.listdir("/") == []


def test_a_long_wait_ends_on_a_signal(img):
    """wait_durable waits in slices and lets Python handle signals between them."""
    with okeanos.open(img, commit=60) as fs:
        with fs.create("/a") as f:
            f.append(b"x")
            old = signal.signal(signal.SIGALRM, lambda *a: (_ for _ in ()).throw(TimeoutError("alarm")))
            try:
                signal.setitimer(signal.ITIMER_REAL, 0.2)
                t = time.time()
                with pytest.raises(TimeoutError):
                    f.wait_durable(1, timeout=60)
                assert time.time() - t < 10
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)

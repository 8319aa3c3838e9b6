"""Okeanos from Python: a journaling storage engine for many concurrent streams of small
synchronous writes, embedded in the process (no mount, no kernel).

    import okeanos

    okeanos.mkfs("/var/lib/ingest.img", size=1 << 30)
    with okeanos.open("/var/lib/ingest.img", data="wasteless+dmeta") as fs:
        with fs.create("/tenant-7.log") as log:
            log.append(b"t=1 temp=21.5\\n")
            log.fdatasync()                  # durable when this returns

Errors are OSError subclasses with errno (FileNotFoundError, FileExistsError, ...); a closed
file or an unmounted file system raises ValueError, as Python's own files do. Calls that wait
release the GIL: threads that append and sync at once share one commit. The guide is
docs/EMBEDDING.md in the Okeanos repository.
"""

from __future__ import annotations

import io
import json
import os
import stat as _stat
from typing import Any, Dict, Iterable, List, Optional, Union

from . import _okeanos

__version__ = _okeanos.__version__
__all__ = ["mkfs", "open", "FileSystem", "File", "StatResult"]

_JOURNALS = ("internal", "external", "remote", "jetstream", "nvm", "manylogs")


def _options(items: Dict[str, Any]) -> str:
    out = []
    for k, v in items.items():
        if v is None or v is False:
            continue
        if not isinstance(k, str) or not k.isidentifier():
            raise ValueError(f"option name {k!r} is not a word")
        if v is True:
            out.append(k)
            continue
        if isinstance(v, os.PathLike):
            v = os.fspath(v)
        if not isinstance(v, (str, int, float)):
            raise TypeError(f"option {k}: a str or a number, not {type(v).__name__}")
        s = str(v)
        if "," in s or "=" in s:
            raise ValueError(f"option {k}={s!r}: a value cannot hold ',' or '='")
        out.append(f"{k}={s}")
    return ",".join(out)


def mkfs(path: Union[str, os.PathLike], size: int, journal: str = "internal", journal_size: Optional[Union[int, str]] = None, **options: Any) -> None:
    """Creates an image file of `size` bytes at `path` and formats it.

    `journal` is where the journal lives: internal (default), external (give journal_path=),
    remote (journal_server="host:port"), jetstream (journal_server="nats://h:p;nats://h:p"),
    nvm (nvm=path, nvm_size=...) or manylogs (group_size=...). Other keywords are mkfs options
    (block_size, bytes_per_inode, label, lazy_journal_init). Refuses to overwrite a file.
    """
    if journal not in _JOURNALS:
        raise ValueError(f"journal={journal!r}: use one of {', '.join(_JOURNALS)}")
    if not isinstance(size, int) or size <= 0:
        raise ValueError("size must be a positive number of bytes")
    opts = dict(options, journal=journal, journal_size=journal_size)
    _okeanos.mkfs(os.fspath(path), size, _options(opts))


def open(path: Union[str, os.PathLike], data: str = "wasteless+dmeta", commit: Optional[float] = None, **options: Any) -> "FileSystem":
    """Mounts the image at `path`. `data` is the content policy (writeback, ordered, data,
    wasteless, selective, each with +dmeta for the last two); other keywords are the mount
    options of docs/EMBEDDING.md (journal_path=, journal_server=, cache_blocks=, ro=True, ...).
    A second open of a mounted image raises OSError (EBUSY)."""
    opts = dict(options, data=data, commit=commit)
    return FileSystem(_okeanos.mount(os.fspath(path), _options(opts)))


class StatResult:
    """What FileSystem.stat and File.stat return (a subset of os.stat_result)."""

    __slots__ = ("st_ino", "st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_atime_ns", "st_mtime_ns", "st_ctime_ns", "st_blocks")

    def __init__(self, t: tuple) -> None:
        for name, v in zip(self.__slots__, t):
            setattr(self, name, v)

    def __repr__(self) -> str:
        return "StatResult(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__) + ")"

    def is_dir(self) -> bool:
        return _stat.S_ISDIR(self.st_mode)

    def is_file(self) -> bool:
        return _stat.S_ISREG(self.st_mode)


class FileSystem:
    """A mounted image. Usable as a context manager (unmounts at the end)."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw

    def __enter__(self) -> "FileSystem":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.unmount()

    def __repr__(self) -> str:
        return f"<okeanos.FileSystem {self._raw.path!r}{'' if self._raw.mounted else ' unmounted'}>"

    @property
    def mounted(self) -> bool:
        return self._raw.mounted

    def create(self, path: str) -> "File":
        """Creates the file, or opens an existing one, for appending (mode "a+")."""
        return self.open(path, "a+")

    def open(self, path: str, mode: str = "r") -> "File":
        """Opens a regular file. Modes as Python's, binary only: r, r+, w, w+, a, a+, x, x+
        ("b" is accepted and implied)."""
        m = mode.replace("b", "")
        if "t" in m:
            raise ValueError("okeanos files are binary: leave out 't'")
        table = {"r": (True, False, False, False, False, False), "r+": (True, True, False, False, False, False),
                 "w": (False, True, True, False, True, False), "w+": (True, True, True, False, True, False),
                 "a": (False, True, True, False, False, True), "a+": (True, True, True, False, False, True),
                 "x": (False, True, True, True, False, False), "x+": (True, True, True, True, False, False)}
        if m not in table:
            raise ValueError(f"invalid mode: {mode!r}")
        readable, writable, create, exclusive, truncate, append = table[m]
        raw = self._raw.open_file(path, create, exclusive, truncate)
        return File(raw, path, mode, readable, writable, append)

    def mkdir(self, path: str, mode: int = 0o755) -> None:
        self._raw.mkdir(path, mode)

    def rmdir(self, path: str) -> None:
        self._raw.rmdir(path)

    def unlink(self, path: str) -> None:
        self._raw.unlink(path)

    remove = unlink

    def rename(self, src: str, dst: str) -> None:
        self._raw.rename(src, dst)

    def listdir(self, path: str = "/") -> List[str]:
        return self._raw.listdir(path)

    def stat(self, path: str) -> StatResult:
        return StatResult(self._raw.stat(path))

    def exists(self, path: str) -> bool:
        try:
            self._raw.stat(path)
            return True
        except FileNotFoundError:
            return False

    def truncate(self, path: str, size: int) -> None:
        self._raw.truncate(path, size)

    def sync(self) -> None:
        """Commits everything done so far and waits for it."""
        self._raw.sync()

    def sync_files(self, files: Iterable["File"]) -> None:
        """Group sync: makes the files' data durable together, usually in one commit and one
        flush (what a crash during the call keeps: docs/EMBEDDING.md, "Group sync")."""
        raws = []
        for f in files:
            if not isinstance(f, File):
                raise TypeError(f"sync_files takes okeanos.File objects, not {type(f).__name__}")
            raws.append(f._raw)
        self._raw.sync_files(raws)

    def counters(self) -> Dict[str, Any]:
        """The mount's counters: journal bytes by kind, commits, syncs, ..."""
        return json.loads(self._raw.counters_json())

    def unmount(self) -> None:
        """Unmounts cleanly (a second call does nothing). Files still open raise ValueError."""
        self._raw.unmount()

    close = unmount


class File(io.RawIOBase):
    """A regular file on an Okeanos file system, as a binary file object: read, write, seek,
    tell, truncate, readline, iteration, context manager; plus append, fdatasync, fsync,
    durable_len and wait_durable."""

    def __init__(self, raw: Any, path: str, mode: str, readable: bool, writable: bool, append: bool) -> None:
        super().__init__()
        self._raw = raw
        self.name = path
        self.mode = mode
        self._readable = readable
        self._writable = writable
        self._append = append
        self._pos = 0

    def __repr__(self) -> str:
        return f"<okeanos.File {self.name!r} mode={self.mode!r}{' closed' if self.closed else ''}>"

    def _check(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file")

    def readable(self) -> bool:
        self._check()
        return self._readable

    def writable(self) -> bool:
        self._check()
        return self._writable

    def seekable(self) -> bool:
        self._check()
        return True

    def readinto(self, b: Any) -> int:
        self._check()
        if not self._readable:
            raise io.UnsupportedOperation("not readable")
        view = memoryview(b).cast("B")
        data = self._raw.pread(self._pos, len(view))
        view[: len(data)] = data
        self._pos += len(data)
        return len(data)

    def read(self, size: int = -1) -> bytes:
        self._check()
        if not self._readable:
            raise io.UnsupportedOperation("not readable")
        if size is None or size < 0:
            size = max(0, self._raw.size() - self._pos)
        data = self._raw.pread(self._pos, size)
        self._pos += len(data)
        return data

    readall = read

    def write(self, b: Any) -> int:
        """Writes at the position, or at the end in an append mode ("a", "a+")."""
        self._check()
        if not self._writable:
            raise io.UnsupportedOperation("not writable")
        data = bytes(b)
        if self._append:
            at = self._raw.append(data)
            self._pos = at + len(data)
        else:
            self._raw.pwrite(self._pos, data)
            self._pos += len(data)
        return len(data)

    def append(self, b: Any, durable: bool = False) -> int:
        """Appends at the end of the file, atomically with respect to other appenders; returns
        the offset the data begins at. With durable=True it also returns only once the data is
        durable, as append then fdatasync would, in one call (one release of the GIL: the
        fastest way to log a record from many threads)."""
        self._check()
        if not self._writable:
            raise io.UnsupportedOperation("not writable")
        data = bytes(b)
        at = self._raw.append(data, durable)
        self._pos = at + len(data)
        return at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self._raw.size() + offset
        else:
            raise ValueError(f"invalid whence ({whence})")
        if pos < 0:
            raise OSError(22, "Invalid argument: negative seek position")
        self._pos = pos
        return pos

    def tell(self) -> int:
        self._check()
        return self._pos

    def truncate(self, size: Optional[int] = None) -> int:
        self._check()
        if not self._writable:
            raise io.UnsupportedOperation("not writable")
        size = self._pos if size is None else size
        self._raw.set_size(size)
        return size

    def flush(self) -> None:
        # Nothing is buffered here: a write is in the engine when it returns.
        self._check()

    def fsync(self) -> None:
        """The file and everything it depends on durable (fsync(2))."""
        self._check()
        self._raw.fsync()

    def fdatasync(self) -> None:
        """The file's data and size durable (fdatasync(2)); threads share one commit."""
        self._check()
        self._raw.fdatasync()

    def stat(self) -> StatResult:
        self._check()
        return StatResult(self._raw.stat())

    def durable_len(self) -> int:
        """The length of the longest prefix whose bytes, as a read sees them now, the commits
        so far made durable."""
        self._check()
        return self._raw.durable_len()

    def wait_durable(self, offset: int, timeout: Optional[float] = None) -> int:
        """Waits until durable_len() reaches `offset` (or `timeout` seconds pass: then it
        returns less). Does not force a commit: writers' syncs and the commit interval do."""
        self._check()
        return self._raw.wait_durable(offset, 1e9 if timeout is None else timeout)

    def fileno(self) -> int:
        raise io.UnsupportedOperation("an okeanos file has no file descriptor")

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()

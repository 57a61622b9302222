"""Putting a new dataset in place of the old one atomically, and cleaning up after writers
that died: the exchange of two paths, the writers' lock, and recovery.

A writer holds :class:`WriteLock` (``.NAME.lock`` beside the target, ``fcntl.flock``) while it
fills a hidden temporary directory (``.NAME.tmp-*``) and swaps it in with :func:`exchange`
(``renameat2(RENAME_EXCHANGE)``, Linux). Where that is not available the old dataset is first
renamed to ``.NAME.old-PID``; :func:`recover` (a writer, under the lock) and
:func:`recover_unlocked` (a reader finding no dataset) put back one a kill stranded there.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import shutil
import time
from pathlib import Path

from forensics.dataset.schema import META_FILE
from forensics.errors import DatasetError

logger = logging.getLogger(__name__)

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _libc_renameat2():
    # The C library is in the process already: its symbols, not ``find_library("c")``, which
    # runs ``ldconfig -p`` (~2 ms CPU at every start of an ingest, measured).
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_renameat2 = _libc_renameat2()


def exchange(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Swap two paths atomically (``renameat2(RENAME_EXCHANGE)``); False where unsupported."""
    if _renameat2 is None:
        return False
    rc = _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), os.fsdecode(b))


class WriteLock:
    """An advisory exclusive lock on ``.NAME.lock`` beside a dataset (no-op without fcntl)."""

    def __init__(self, target: Path, wait: float = 0.0):
        self.target = target
        self.file = target.with_name(f".{target.name}.lock")
        self.wait = wait
        self._fd: int | None = None

    def acquire(self) -> "WriteLock":
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            return self
        deadline = time.monotonic() + self.wait
        while True:
            fd = os.open(self.file, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
                os.close(fd)
                if time.monotonic() >= deadline:
                    raise DatasetError(
                        "another writer is writing this dataset"
                        + (f" (pid {holder})" if holder else ""), path=str(self.target),
                        hint="wait for it to finish, or write to another -o") from None
                time.sleep(0.05)
                continue
            # The holder unlinks the file on release: a lock taken on a file no longer at
            # the path is not the lock; take it again on the current file.
            try:
                same = os.fstat(fd).st_ino == os.stat(self.file).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.file)  # before unlocking: a waiter then retries on a new file
            os.close(self._fd)  # closing drops the flock
            self._fd = None


def leftovers(target: Path) -> tuple[list[Path], list[Path]]:
    """Temporary directories of earlier writers beside ``target``: (tmp-*, old-*)."""
    parent = target.parent
    if not parent.is_dir():
        return [], []
    tmp, old = [], []
    prefix = f".{target.name}."
    for entry in os.scandir(parent):
        if not entry.name.startswith(prefix):
            continue
        rest = entry.name[len(prefix):]
        if rest.startswith("tmp-"):
            tmp.append(parent / entry.name)
        elif rest.startswith("old-"):
            old.append(parent / entry.name)
    return tmp, old


def recover(target: Path) -> None:
    """Under the lock: put back a dataset stranded by a fallback swap killed between its two
    renames, and remove the temporaries of dead writers."""
    tmp, old = leftovers(target)
    if not os.path.lexists(target) and old:
        keep = max(old, key=lambda p: p.stat().st_mtime)
        if (keep / META_FILE).is_file():
            os.rename(keep, target)
            logger.warning("%s: restored the dataset an interrupted write left at %s", target, keep)
            old.remove(keep)
    for p in tmp + old:
        shutil.rmtree(p, ignore_errors=True)
        logger.info("removed %s (left by an interrupted write)", p)


def recover_unlocked(path: Path) -> None:
    """A reader finding no dataset where an interrupted fallback swap left one: restore it
    when no writer holds the lock."""
    _, old = leftovers(Path(os.path.abspath(path)))
    if not old:
        return
    lock = WriteLock(Path(os.path.abspath(path)))
    try:
        lock.acquire()
    except (DatasetError, OSError):
        return
    try:
        recover(Path(os.path.abspath(path)))
    except OSError:
        pass
    finally:
        lock.release()

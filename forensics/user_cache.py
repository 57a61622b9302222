"""This tool's per-user cache directory (the compiled scanners' object files, numba's cache,
explored paths) and small JSON entries in it, keyed by a digest of everything an entry depends on.

Where, in order (platformdirs' ``user_cache_dir`` convention):

- ``$FORENSICS_CACHE_DIR`` when set (:data:`CACHE_DIR_ENV`);
- Linux and other POSIX: ``$XDG_CACHE_HOME/adp-forensics``, else ``~/.cache/adp-forensics``;
- macOS: ``~/Library/Caches/adp-forensics``; Windows: ``%LOCALAPPDATA%\\adp-forensics\\Cache``.

Nothing is ever written into the installed package (it may be read-only: a container image, a
shared cluster install). A cache that cannot be written (no HOME, a read-only file system) is
not an error: :func:`writable_cache_dir` says None and callers do without; an unreadable,
damaged or unwritable entry (:func:`read_entry`, :func:`write_entry`) is a miss. Entries are
written atomically (a temporary file renamed into place).
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: Environment variable overriding the cache directory.
CACHE_DIR_ENV = "FORENSICS_CACHE_DIR"
APP = "adp-forensics"


def user_cache_dir() -> Path:
    """The cache directory for this user (it may not exist, nor be writable)."""
    given = os.environ.get(CACHE_DIR_ENV)
    if given:
        return Path(given)
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / APP
    if os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / APP / "Cache"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / APP


def writable(directory: Path) -> bool:
    """Whether ``directory`` exists or can be made, and a file can be created in it."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".probe-")
        os.close(fd)
        os.unlink(probe)
    except (OSError, RuntimeError):   # RuntimeError: Path.home() without a home
        return False
    return True


def writable_cache_dir(*parts: str) -> Path | None:
    """``user_cache_dir() / parts...`` when it can be written, else None."""
    try:
        d = user_cache_dir().joinpath(*parts)
    except RuntimeError:              # no HOME and no password entry
        return None
    return d if writable(d) else None


def source_digest(paths: Iterable[Path]) -> str:
    """SHA-256 (hex, 24 digits) of the files' bytes in order: an entry computed by code that
    changed since is never read back."""
    h = hashlib.sha256()
    for p in paths:
        h.update(str(p.name).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:24]


def entry_key(*parts: Any) -> str:
    """A file-name-safe key of ``parts`` (their ``repr``)."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:32]


def read_entry(area: str, key: str) -> Any | None:
    """The JSON value stored under ``area/key``, or None (absent, unreadable or damaged)."""
    try:
        return json.loads((user_cache_dir() / area / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RuntimeError):   # RuntimeError: no home directory
        return None


def write_entry(area: str, key: str, value: Any) -> None:
    """Store ``value`` (JSON) under ``area/key``; silently nothing when it cannot be written."""
    directory = writable_cache_dir(area)
    if directory is None:
        return
    tmp = directory / f".{key}.tmp-{os.getpid()}"
    try:
        tmp.write_text(json.dumps(value), encoding="utf-8")
        os.replace(tmp, directory / f"{key}.json")
    except (OSError, TypeError, ValueError):
        try:
            tmp.unlink()
        except OSError:
            pass


__all__ = ["CACHE_DIR_ENV", "entry_key", "read_entry", "source_digest", "user_cache_dir",
           "writable", "writable_cache_dir", "write_entry"]

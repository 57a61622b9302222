"""The per-user cache directory (``$XDG_CACHE_HOME/forensics``, else ``~/.cache/forensics``) and
small JSON entries in it, keyed by a digest of everything the entry depends on.

A cache is an optimisation only: an unreadable, damaged or unwritable entry is a miss, never an
error. Entries are written atomically (a temporary file renamed into place).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable, Optional


def user_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/forensics`` (``~/.cache/forensics`` when unset)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "forensics"


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


def read_entry(area: str, key: str) -> Optional[Any]:
    """The JSON value stored under ``area/key``, or None (absent, unreadable or damaged)."""
    try:
        return json.loads((user_cache_dir() / area / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_entry(area: str, key: str, value: Any) -> None:
    """Store ``value`` (JSON) under ``area/key``; silently nothing when the directory is
    unwritable."""
    directory = user_cache_dir() / area
    tmp = directory / f".{key}.tmp-{os.getpid()}"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(value), encoding="utf-8")
        os.replace(tmp, directory / f"{key}.json")
    except (OSError, TypeError, ValueError):
        try:
            tmp.unlink()
        except OSError:
            pass


__all__ = ["entry_key", "read_entry", "source_digest", "user_cache_dir", "write_entry"]

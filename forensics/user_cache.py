"""This tool's per-user cache directory (the compiled scanners' object files, numba's cache).

Where, in order (platformdirs' ``user_cache_dir`` convention):

- ``$FORENSICS_CACHE_DIR`` when set (:data:`CACHE_DIR_ENV`);
- Linux and other POSIX: ``$XDG_CACHE_HOME/adp-forensics``, else ``~/.cache/adp-forensics``;
- macOS: ``~/Library/Caches/adp-forensics``; Windows: ``%LOCALAPPDATA%\\adp-forensics\\Cache``.

Nothing is ever written into the installed package (it may be read-only: a container image, a
shared cluster install). A cache that cannot be written (no HOME, a read-only file system) is
not an error: :func:`writable_cache_dir` says None and callers do without.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

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


__all__ = ["CACHE_DIR_ENV", "user_cache_dir", "writable", "writable_cache_dir"]

"""Where the compiled scanners' saved code and numba's own cache are kept.

Both go to the per-user cache directory (:func:`forensics.user_cache.user_cache_dir`:
``$FORENSICS_CACHE_DIR``, else ``$XDG_CACHE_HOME/adp-forensics``, else
``~/.cache/adp-forensics``), never into the installed package, which may be read-only. A
``NUMBA_CACHE_DIR`` the user set is searched first and used for numba's cache. With no writable
cache directory, a compile goes to a temporary directory (removed at exit), and when even that
fails the caller reads with the reference path: never an error. Objects built ahead of use
(:mod:`forensics.readers.prebuild`) are in the package's :data:`PREBUILT_DIR`.
"""
from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

from forensics.user_cache import user_cache_dir, writable, writable_cache_dir

#: Environment variable numba reads for its cache directory; when the user set it, saved objects
#: are looked for (and saved) there first.
CACHE_ENV = "NUMBA_CACHE_DIR"
#: Objects built ahead of use (:mod:`forensics.readers.prebuild`), inside the installed package.
PREBUILT_DIR = Path(__file__).resolve().parent / "_prebuilt"

#: The value :func:`set_numba_cache` gave ``NUMBA_CACHE_DIR`` (numba's cache in the user cache
#: directory), which is not a directory of the user's choosing.
_numba_dir_set: str | None = None


def searched() -> list[Path]:
    """Where saved objects are looked for, in order; they are saved into the first writable."""
    given = os.environ.get(CACHE_ENV)
    dirs = [Path(given)] if given and given != _numba_dir_set else []
    try:
        dirs.append(user_cache_dir() / "native")
    except RuntimeError:     # no home directory at all
        pass
    return dirs


def first_writable() -> Path | None:
    """The first writable directory of :func:`searched` (None: no cache can be written)."""
    for d in searched():
        if writable(d):
            return d
    return None


def user_dir_text() -> str:
    """The user cache directory, for a note (or why there is none)."""
    try:
        return str(user_cache_dir())
    except RuntimeError:
        return "no home directory"


def set_numba_cache() -> None:
    """Point numba's cache at the user cache directory (else a temporary one, removed at exit),
    unless the user chose one: numba would write into the installed package, which may be
    read-only ("cannot cache function ...: no locator available")."""
    global _numba_dir_set
    if os.environ.get(CACHE_ENV):
        return
    d = writable_cache_dir("numba")
    if d is None:
        try:
            d = Path(tempfile.mkdtemp(prefix="forensics-numba-"))
        except OSError:
            return
        atexit.register(shutil.rmtree, str(d), True)
    _numba_dir_set = os.environ[CACHE_ENV] = str(d)
    config = sys.modules.get("numba.core.config")
    if config is not None:          # numba imported already: it read the environment then
        config.CACHE_DIR = str(d)

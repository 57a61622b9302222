"""Fixtures shared by the compiled-reader tests of this folder."""
from __future__ import annotations

import os

import pytest

from forensics import user_cache
from forensics.readers import json_scan, native_scan
from forensics.readers.compiled import builder, cache_dirs


@pytest.fixture
def cold(monkeypatch, tmp_path):
    """A fresh cache directory for the scanners' objects, no scanner loaded in this process,
    background builds recorded (the argv of each ``Popen``, returned) instead of started.
    numba's own cache stays the user's (what the suite compiled already), so a compile here is
    a load from it."""
    numba_dir = os.environ.get(cache_dirs.CACHE_ENV) or str(user_cache.user_cache_dir() / "numba")
    monkeypatch.setenv(cache_dirs.CACHE_ENV, numba_dir)
    monkeypatch.setattr(cache_dirs, "_numba_dir_set", numba_dir)
    monkeypatch.setenv(user_cache.CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(native_scan.PATH_ENV, raising=False)
    monkeypatch.setattr(native_scan, "_kernel", None)
    monkeypatch.setattr(json_scan, "_kernel", None)
    monkeypatch.setattr(builder, "_announced", set())
    started: list[list[str]] = []
    monkeypatch.setattr(builder.subprocess, "Popen", lambda argv, **k: started.append(argv))
    return started

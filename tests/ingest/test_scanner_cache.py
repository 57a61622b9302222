"""The compiled scanners' cache (issue 25 items 1-2): objects in the per-user cache directory
(never in the package), a cold cache starts one background build and reads with the reference
path meanwhile (said in one line), an unwritable cache is no error."""
from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from forensics import user_cache
from forensics.readers import json_scan, native_scan
from forensics.readers.compiled import loader


@pytest.fixture
def cold(monkeypatch, tmp_path):
    """A fresh cache directory for the scanners' objects and no scanner loaded in this
    process; Popen recorded. numba's own cache stays the user's (what the suite compiled
    already), set as this module sets it, so that a compile here is a cache load."""
    numba_dir = os.environ.get(loader.CACHE_ENV) or str(user_cache.user_cache_dir() / "numba")
    monkeypatch.setenv(loader.CACHE_ENV, numba_dir)
    monkeypatch.setattr(loader, "_numba_dir_set", numba_dir)
    monkeypatch.setenv(user_cache.CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(native_scan.PATH_ENV, raising=False)
    monkeypatch.setattr(native_scan, "_kernel", None)
    monkeypatch.setattr(json_scan, "_kernel", None)
    monkeypatch.setattr(loader, "_announced", set())
    started = []
    monkeypatch.setattr(loader.subprocess, "Popen", lambda argv, **k: started.append(argv))
    return started


def test_user_cache_dir_follows_the_convention(monkeypatch, tmp_path):
    monkeypatch.delenv(user_cache.CACHE_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert user_cache.user_cache_dir() == tmp_path / "xdg" / "adp-forensics"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert user_cache.user_cache_dir() == tmp_path / "home" / ".cache" / "adp-forensics"
    monkeypatch.setenv(user_cache.CACHE_DIR_ENV, str(tmp_path / "mine"))
    assert user_cache.user_cache_dir() == tmp_path / "mine"


def test_a_cold_cache_starts_one_background_build_and_says_so(cold, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger=loader.__name__):
        assert not native_scan.enabled(native_scan.MIN_BYTES)
        assert not native_scan.enabled(native_scan.MIN_BYTES)    # no second build
    (argv,) = cold
    stem, module, lock = argv[-3:]
    assert argv[1:3] == ["-m", "forensics.readers.compiled.loader"]
    assert module == "forensics.readers.compiled.scan_kernel"
    assert Path(stem).parent == tmp_path / "cache" / "native" and Path(lock).is_file()
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == 1 and "in the background" in notes[0]
    assert "reference reader" in notes[0]
    # the builder (run here: the kernels are compiled in this process already) saves the
    # object and frees the lock; the next ingest loads it
    assert loader.main([stem, module, lock]) == 0
    assert not Path(lock).exists()
    assert native_scan.enabled(native_scan.MIN_BYTES)
    assert sorted(p.name[len(Path(stem).name):] for p in Path(stem).parent.iterdir()) == [
        ".count.o", ".json", ".scan.o"]


def test_small_inputs_start_no_build(cold):
    assert not native_scan.enabled(native_scan.MIN_BYTES - 1)
    assert not json_scan.enabled(json_scan.MIN_BYTES - 1)
    assert cold == []


def test_an_unwritable_cache_is_no_error(cold, tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory would go")
    monkeypatch.setenv(user_cache.CACHE_DIR_ENV, str(blocker / "cache"))
    with caplog.at_level(logging.WARNING, logger=loader.__name__):
        assert not native_scan.enabled(1 << 40) and not json_scan.enabled(1 << 40)
    assert cold == []
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == 2 and all("no writable cache directory" in n for n in notes)


def test_a_stale_build_lock_is_taken_over(tmp_path):
    lock = tmp_path / "scan-x.building"
    lock.write_text("1")
    assert not loader._take_lock(lock)          # a live build
    old = lock.stat().st_mtime - loader.STALE_BUILD_S - 1
    os.utime(lock, (old, old))
    assert loader._take_lock(lock)              # a builder killed long ago


def test_a_prebuilt_portable_object_in_the_package_is_loaded(cold, tmp_path, monkeypatch):
    """Objects built ahead (python -m forensics.readers.prebuild) under the portable key, in
    the package's _prebuilt directory: a cold user cache loads them and builds nothing. (The
    object saved here is this process's compile, saved under the portable key: what is
    checked is where and under which key the loader looks.)"""
    import llvmlite.binding as llvm

    from forensics.readers.compiled import scan_kernel

    monkeypatch.setattr(loader, "PREBUILT_DIR", tmp_path / "_prebuilt")
    objects, meta = loader._objects(scan_kernel.ENTRY_POINTS)
    key = loader._key(llvm, loader.SCAN, portable=True)
    assert key != loader._key(llvm, loader.SCAN)
    assert loader._save(tmp_path / "_prebuilt" / f"scan-{key}", objects, meta)
    assert native_scan.enabled(native_scan.MIN_BYTES)
    assert cold == []

"""The compiled scanners' cache (issue 25 items 1-2): objects in the per-user cache directory
(never in the package), a cold cache starts one background build and reads with the reference
path meanwhile (said in one line), an unwritable cache is no error, a library saved again
leaves a process that loaded it whole."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from forensics import user_cache
from forensics.readers import json_scan, native_scan
from forensics.readers.compiled import builder, cache_dirs, loader
from forensics.readers.compiled.library import SCAN, object_key, shared_key, shared_stem

#: ``subprocess.Popen`` before the fixtures record builds instead (the linker still runs).
POPEN = subprocess.Popen
REPO = Path(__file__).resolve().parents[2]


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
    with caplog.at_level(logging.WARNING, logger="forensics.readers.compiled"):
        assert not native_scan.enabled(native_scan.MIN_BYTES)
        assert not native_scan.enabled(native_scan.MIN_BYTES)    # no second build
    (argv,) = cold
    stem, module, lock, shared = argv[-4:]
    assert argv[1:3] == ["-m", "forensics.readers.compiled.builder"]
    assert module == "forensics.readers.compiled.scan_kernel"
    assert Path(stem).parent == tmp_path / "cache" / "native" and Path(lock).is_file()
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == 1 and "in the background" in notes[0]
    assert "reference reader" in notes[0]
    # the builder (run here: the kernels are compiled in this process already) saves the
    # object and the shared library linked from it and frees the lock; the next ingest loads
    # the library (with ctypes alone: no LLVM)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(builder.subprocess, "Popen", POPEN)
        assert builder.main([stem, module, lock, shared]) == 0
    assert not Path(lock).exists()
    assert native_scan.enabled(native_scan.MIN_BYTES)
    names = sorted(p.name for p in Path(stem).parent.iterdir())
    object_files = [Path(stem).name + s for s in (".count.o", ".events.o", ".json", ".scan.o")]
    if builder.linker() is None:
        assert names == object_files
    else:
        assert names == sorted(object_files + [Path(shared).name + s for s in (".json", ".so")])
        assert loader._load_shared(Path(shared)) is not None
    assert len(cold) == 1      # no further build


def test_a_shared_library_is_refused_when_damaged_and_not_built_again(cold, tmp_path):
    """The library is checked against its digest before it is loaded; a build that tried to
    make it (made, or found it could not) is not started again for an object that loads."""
    if builder.linker() is None:
        pytest.skip("no C compiler driver to link with")
    from forensics.readers.compiled import scan_kernel

    key = shared_key(SCAN)
    shared = shared_stem(tmp_path / "cache" / "native", SCAN, key)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(builder.subprocess, "Popen", POPEN)
        assert builder._save_shared(shared, scan_kernel.ENTRY_POINTS)
    assert loader._load_shared(shared) is not None
    so = shared.parent / (shared.name + ".so")
    # the damaged copy replaces the file: this process has the library mapped, and cutting
    # that file in place makes its pages past the cut a SIGBUS when ld.so runs its
    # finalisers at exit (a worker dying after its tests passed)
    damaged = shared.parent / "damaged.so"
    damaged.write_bytes(so.read_bytes()[:1000])
    os.replace(damaged, so)
    assert loader._load_shared(shared) is None
    assert builder.shared_tried(SCAN, key)


def test_a_library_saved_again_leaves_a_process_that_loaded_it_whole(tmp_path):
    """Two ingests, one loading the shared library while a build saves it again (here other
    bytes: a short file): the saved file is replaced, never written in place, so the loaded
    copy keeps its pages (cut in place, they are a SIGBUS on its next call or at its exit)."""
    if builder.linker() is None:
        pytest.skip("no C compiler driver to link with")
    from forensics.readers.compiled import scan_kernel

    shared = shared_stem(tmp_path / "cache" / "native", SCAN, shared_key(SCAN))
    assert builder._save_shared(shared, scan_kernel.ENTRY_POINTS)
    code = ("import ctypes, sys\n"
            "from forensics.readers.compiled import loader\n"
            "funcs = loader.entry_points(compile='never')\n"
            "print(funcs is not None and 'llvmlite.binding' not in sys.modules, flush=True)\n"
            "sys.stdin.readline()\n"
            "buf = ctypes.create_string_buffer(b'a\\nb\\nc\\n', 6)\n"
            "print(funcs['count'](ctypes.addressof(buf), 6), flush=True)\n")
    env = dict(os.environ, PYTHONPATH=str(REPO), FORENSICS_CACHE_DIR=str(tmp_path / "cache"))
    env.pop(cache_dirs.CACHE_ENV, None)
    with subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env) as child:
        assert child.stdout.readline() == "True\n"      # loaded with ctypes alone
        so = shared.parent / (shared.name + ".so")
        meta = json.loads((shared.parent / (shared.name + ".json")).read_text())
        assert builder._save(shared, {}, meta, extra=[(".so", so.read_bytes()[:1000])])
        out, err = child.communicate("go\n", timeout=120)
    assert (child.returncode, out) == (0, "3\n"), err      # -7: SIGBUS
    assert loader._load_shared(shared) is None             # what was saved is refused


def test_without_a_c_compiler_no_library_is_made(monkeypatch, tmp_path):
    monkeypatch.setattr(builder, "LINKERS", ())
    monkeypatch.delenv("CC", raising=False)
    from forensics.readers.compiled import scan_kernel

    stem = tmp_path / "scan-so-x"
    assert not builder._save_shared(stem, scan_kernel.ENTRY_POINTS)
    assert list(tmp_path.iterdir()) == []


def test_an_object_from_before_the_shared_library_starts_one_quiet_build(cold, tmp_path, caplog):
    """A cache holding the object files only (a build from before this loader): it is linked
    with llvmlite, and one build that also makes the library starts, unannounced."""
    if builder.linker() is None:
        pytest.skip("no C compiler driver to link with")
    import llvmlite.binding as llvm

    from forensics.readers.compiled import scan_kernel

    objects, meta = builder._objects(scan_kernel.ENTRY_POINTS)
    assert builder._save(tmp_path / "cache" / "native" / f"scan-{object_key(llvm)}", objects, meta)
    with caplog.at_level(logging.WARNING, logger="forensics.readers.compiled"):
        assert native_scan.enabled(native_scan.MIN_BYTES)
    (argv,) = cold
    assert argv[-1] == str(shared_stem(tmp_path / "cache" / "native", SCAN, shared_key(SCAN)))
    assert caplog.records == []


def test_small_inputs_start_no_build(cold):
    assert not native_scan.enabled(native_scan.MIN_BYTES - 1)
    assert not json_scan.enabled(json_scan.MIN_BYTES - 1)
    assert cold == []


def test_an_unwritable_cache_is_no_error(cold, tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory would go")
    monkeypatch.setenv(user_cache.CACHE_DIR_ENV, str(blocker / "cache"))
    with caplog.at_level(logging.WARNING, logger="forensics.readers.compiled"):
        assert not native_scan.enabled(1 << 40) and not json_scan.enabled(1 << 40)
    assert cold == []
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == 2 and all("no writable cache directory" in n for n in notes)


def test_a_stale_build_lock_is_taken_over(tmp_path):
    lock = tmp_path / "scan-x.building"
    lock.write_text("1")
    assert not builder._take_lock(lock)          # a live build
    old = lock.stat().st_mtime - builder.STALE_BUILD_S - 1
    os.utime(lock, (old, old))
    assert builder._take_lock(lock)              # a builder killed long ago


def test_a_prebuilt_portable_object_in_the_package_is_loaded(cold, tmp_path, monkeypatch):
    """Objects built ahead (python -m forensics.readers.prebuild) under the portable key, in
    the package's _prebuilt directory: a cold user cache loads them and builds nothing. (The
    object saved here is this process's compile, saved under the portable key: what is
    checked is where and under which key the loader looks.)"""
    import llvmlite.binding as llvm

    from forensics.readers.compiled import scan_kernel

    monkeypatch.setattr(cache_dirs, "PREBUILT_DIR", tmp_path / "_prebuilt")
    objects, meta = builder._objects(scan_kernel.ENTRY_POINTS)
    key = object_key(llvm, SCAN, portable=True)
    assert key != object_key(llvm, SCAN)
    assert builder._save(tmp_path / "_prebuilt" / f"scan-{key}", objects, meta)
    assert native_scan.enabled(native_scan.MIN_BYTES)
    assert cold == []

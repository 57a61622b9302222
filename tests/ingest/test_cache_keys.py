"""The compiled scanners' code is keyed to every file it is compiled from.

numba's cache keys a function by its own file's stamp only, so a function that takes in
compiled code of another file (inlined, or linked from that file's cache) must be a closure over
a digest of that file (``forensics.readers.compiled.cache_digest``), else an edit of the callee
alone leaves the old code in use. The saved objects and shared libraries are keyed by the
source of ``Library.sources``, which must name the same files. Both are checked here from what
the compiled functions actually call: a new module of compiled helpers that a kernel calls but
no digest or key covers fails these tests.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
import shutil
import types
from pathlib import Path

import pytest

from forensics.readers import json_scan
from forensics.readers.compiled import cache_digest, cache_dirs, library

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba") is None
                                or importlib.util.find_spec("llvmlite") is None,
                                reason="numba or llvmlite not installed")

PACKAGE = "forensics.readers.compiled"
LIBRARIES = {"scan": library.SCAN, "json": json_scan.LIBRARY}


def _python_function(obj) -> types.FunctionType | None:
    """The Python function numba compiles for ``obj`` (a jitted function, a cfunc or an
    intrinsic), else None."""
    from numba.core.ccallback import CFunc
    from numba.core.dispatcher import Dispatcher

    if isinstance(obj, Dispatcher):
        return obj.py_func
    if isinstance(obj, CFunc):
        return obj._pyfunc
    return getattr(obj, "_defn", None) if type(obj).__name__ == "_Intrinsic" else None


def _file(fn: types.FunctionType) -> Path:
    return Path(inspect.getfile(fn)).resolve()


def _callees(fn: types.FunctionType):
    """The compiled functions ``fn`` names (directly, or as an attribute of a module)."""
    for name in fn.__code__.co_names:
        value = fn.__globals__.get(name)
        if isinstance(value, types.ModuleType):
            values = [getattr(value, n, None) for n in fn.__code__.co_names]
        else:
            values = [value]
        for v in values:
            callee = _python_function(v)
            if callee is not None:
                yield callee


def _reached(fn: types.FunctionType) -> set[Path]:
    """The files, other than ``fn``'s own, whose compiled code ``fn`` takes in (transitively)."""
    seen: set[types.FunctionType] = set()
    files: set[Path] = set()
    todo = [fn]
    while todo:
        for callee in _callees(todo.pop()):
            if callee not in seen:
                seen.add(callee)
                files.add(_file(callee))
                todo.append(callee)
    return files - {_file(fn)}


def _kernel_modules() -> list[types.ModuleType]:
    """Every module of the package that compiles with numba, imported with numba's cache where
    the loader keeps it (a load after the first compile on this machine), its entry points made
    (scan_kernel makes them on first use of ``ENTRY_POINTS``)."""
    cache_dirs.set_numba_cache()
    package = importlib.import_module(PACKAGE)
    names = [m.name for m in pkgutil.iter_modules(package.__path__)]
    modules = [importlib.import_module(f"{PACKAGE}.{n}") for n in names
               if "import numba" in (Path(package.__path__[0]) / f"{n}.py").read_text()]
    for module in modules:
        getattr(module, "ENTRY_POINTS", None)
    return modules


def test_the_walk_sees_the_callees_of_another_file():
    """The check's own walk, on functions whose callees are known: json_kernel's frame scanner
    inlines json_tokens (key_at, json_int, ...); the log scanner calls prefix_kernel, which
    inlines byte_tests, and decimal_kernel."""
    from forensics.readers.compiled import json_kernel, scan_kernel

    compiled = Path(json_kernel.__file__).resolve().parent
    assert _reached(json_kernel.frames.py_func) == {compiled / "json_tokens.py"}
    assert _reached(json_kernel.frames_c._pyfunc) == {compiled / "json_tokens.py"}
    assert _reached(json_kernel.count_c._pyfunc) == set()
    assert _reached(scan_kernel.scan.py_func) == {compiled / "prefix_kernel.py",
                                                   compiled / "byte_tests.py",
                                                   compiled / "decimal_kernel.py"}


def test_every_cross_file_caller_is_keyed_to_its_callees_source():
    checked = []
    for module in _kernel_modules():
        for name, value in vars(module).items():
            fn = _python_function(value)
            if fn is None or fn.__module__ != module.__name__:
                continue
            if getattr(value, "targetoptions", {}).get("inline") == "always":
                continue   # inlined by its callers: its own cached code is never run
            reached = _reached(fn)
            if not reached:
                continue
            cells = [c.cell_contents for c in fn.__closure__ or ()]
            covered = [cache_digest.COVERED[c] for c in cells
                       if isinstance(c, int) and c in cache_digest.COVERED]
            assert any(reached <= files for files in covered), (
                f"{module.__name__}.{name} takes in compiled code of "
                f"{sorted(p.name for p in reached)} but closes over no digest of it "
                "(cache_digest.source_digest)")
            checked.append(f"{module.__name__.rpartition('.')[2]}.{name}")
    # the callers of another file's code, as the kernels stand (a walk that found none would
    # check nothing)
    assert {"json_kernel.frames", "stats_kernel.stats", "json_kernel.frames_c",
            "json_kernel.stats_c", "scan_kernel.scan", "scan_kernel.scan_c",
            "scan_kernel.count_c", "prefix_kernel.prefix_shape"} <= set(checked)


def test_a_digest_follows_the_source_of_its_modules(tmp_path):
    path = tmp_path / "callee.py"
    path.write_text("X = 1\n")
    spec = importlib.util.spec_from_file_location("callee", path)
    callee = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(callee)
    first = cache_digest.source_digest((callee,))
    assert cache_digest.source_digest((callee,)) == first
    assert cache_digest.COVERED[first] == {path.resolve()}
    assert cache_digest.source_digest((callee,), b"table 2") != first
    path.write_text("X = 1\n# edited\n")
    assert cache_digest.source_digest((callee,)) != first
    assert 0 <= first < 1 << 63


@pytest.mark.parametrize("stem", sorted(LIBRARIES))
def test_the_saved_code_is_keyed_to_every_file_it_is_compiled_from(stem, tmp_path, monkeypatch):
    """``Library.sources`` names the kernel module and every file whose compiled code its
    entry points take in; an edit of any of them (in a copy of the sources) changes the key of
    the saved object and of the shared library, so the next run loads none saved before."""
    import llvmlite.binding as llvm

    lib = LIBRARIES[stem]
    cache_dirs.set_numba_cache()
    kernel = importlib.import_module(lib.module)
    here = library._HERE
    files = {Path(kernel.__file__).resolve()}
    for cf in kernel.ENTRY_POINTS.values():
        files |= _reached(_python_function(cf))
    sources = {(here / s).resolve() for s in lib.sources}
    assert files <= sources, f"{lib.stem}: not keyed to {sorted(p.name for p in files - sources)}"

    real = library.object_key(llvm, lib), library.shared_key(lib)
    root = here.parents[2]               # the folder holding forensics/
    copy_root = tmp_path.resolve()
    for f in sources:
        (copy_root / f.relative_to(root)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, copy_root / f.relative_to(root))
    monkeypatch.setattr(library, "_HERE", copy_root / here.relative_to(root))
    before = library.object_key(llvm, lib), library.shared_key(lib)
    assert before == real          # the copy keys as the package does
    for f in sorted(files):
        copied = copy_root / f.relative_to(root)
        copied.write_bytes(f.read_bytes() + b"\n# edited\n")
        after = library.object_key(llvm, lib), library.shared_key(lib)
        assert after[0] != before[0], f.name
        assert after[1] != before[1] or before[1] is None, f.name   # None: no /proc/cpuinfo
        shutil.copyfile(f, copied)
    assert (library.object_key(llvm, lib), library.shared_key(lib)) == before

"""The compiled scanners' machine code, kept as object files and loaded with llvmlite alone
(a :class:`Library` each: the log scanner's, :data:`SCAN`, and the JSON Lines scanner's,
``json_scan.LIBRARY``).

Why: numba's own cache still costs ~0.75 s CPU per process (importing numba, then loading
its typing and lowering registries before the first cached call, which imports scipy), a
sixth of the whole ingest of a 500 MB log. The scanner's entry points are ``cfunc``\\s that
need no numba runtime (no allocation, no exception: ``error_model="numpy"``), so their object
code, once compiled, is a plain function to link: this module links it with llvmlite's MCJIT
(~30 ms) and calls it through ctypes (which releases the GIL during the call, as ``nogil``
did). The first run (or a changed kernel, llvmlite or CPU) compiles with numba and saves the
object; when nothing can be saved or loaded, numba's compiled functions are used directly.

The object is keyed by the kernel's source, llvmlite's version and the host CPU (numba
compiles for the host's features). The few symbols numba's wrappers name outside the object
are resolved here: the Python C API from the process; numba's own helpers (GIL, exception
and NRT calls, reached only on error paths the kernel does not have) by small definitions
below. A saved object is checked against its digest first: LLVM crashes on a damaged one.
"""
from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import importlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from forensics.user_cache import user_cache_dir

#: Environment variable numba reads for its cache directory; the object goes there too.
CACHE_ENV = "NUMBA_CACHE_DIR"
_HERE = Path(__file__).resolve().parent
_SOURCES = ("_scan_kernel.py", "native_scan.py")

# Definitions of the symbols numba's cfunc wrappers take from numba's own libraries. The
# wrapper calls them only when the kernel returned an error status (its code has none to
# return): then ``numba_gil_ensure`` sets ``forensics_scan_failed``, which the caller checks
# after every call (``failed()`` of :func:`entry_points`), so such a bug stops the ingest. The
# others do nothing (x86-64 and AArch64 calls tolerate a callee that ignores its arguments).
_STUBS_IR = """
@forensics_scan_failed = global i32 0
declare i32 @PyGILState_Ensure()
declare void @PyGILState_Release(i32)
define void @numba_gil_ensure(ptr %s) {
  store volatile i32 1, ptr @forensics_scan_failed
  %r = call i32 @PyGILState_Ensure()
  store i32 %r, ptr %s
  ret void
}
define void @numba_gil_release(ptr %s) {
  %v = load i32, ptr %s
  call void @PyGILState_Release(i32 %v)
  ret void
}
define ptr @numba_do_raise() {
  ret ptr null
}
define ptr @numba_runtime_build_excinfo_struct() {
  ret ptr null
}
define ptr @numba_unpickle() {
  ret ptr null
}
define void @NRT_Free() {
  ret void
}
define void @NRT_MemInfo_call_dtor() {
  ret void
}
"""
_STUBBED = ("numba_gil_ensure", "numba_gil_release", "numba_do_raise",
            "numba_runtime_build_excinfo_struct", "numba_unpickle", "NRT_Free",
            "NRT_MemInfo_call_dtor")

_I64 = ctypes.c_int64
_PTR = ctypes.c_void_p
#: ctypes prototypes of the entry points (``_scan_kernel.SCAN_SIG`` / ``COUNT_SIG``).
PROTOTYPES = {
    "scan": ctypes.CFUNCTYPE(_I64, _PTR, _I64, _I64, *([_PTR] * 12)),
    "count": ctypes.CFUNCTYPE(_I64, _PTR, _I64),
}



@dataclasses.dataclass(frozen=True)
class Library:
    """A kernel module whose ``ENTRY_POINTS`` (name -> cfunc) are saved and loaded together."""

    stem: str                       # the saved files are ``{stem}-{key}.*``
    module: str                     # imports numba; defines ENTRY_POINTS
    sources: tuple[str, ...]        # files beside this one whose text keys the object
    prototypes: dict[str, Any]      # ctypes prototype of each entry point


#: The log scanner (:mod:`forensics.readers._scan_kernel`).
SCAN = Library("scan", "forensics.readers._scan_kernel", _SOURCES, PROTOTYPES)

#: The MCJIT engines holding loaded code: never dropped (freeing one frees the code that
#: functions handed out still point to).
_engines: list[Any] = []


def _key(llvm: Any, lib: Library = SCAN) -> str:
    import llvmlite

    h = hashlib.sha256()
    for name in lib.sources:
        h.update((_HERE / name).read_bytes())
    h.update(llvmlite.__version__.encode())
    h.update(llvm.get_process_triple().encode())
    h.update(llvm.get_host_cpu_name().encode())
    h.update(llvm.get_host_cpu_features().flatten().encode())
    return h.hexdigest()[:24]


def _cache_dirs() -> list[Path]:
    dirs = [Path(os.environ[CACHE_ENV])] if os.environ.get(CACHE_ENV) else []
    return dirs + [_HERE / "__pycache__", user_cache_dir()]


def entry_points(lib: Library = SCAN) -> dict[str, Any] | None:
    """The entry points of ``lib`` as ctypes functions (``lib.prototypes``) and ``failed()``:
    whether a call returned an error (see ``_STUBS_IR``); None without numba/llvmlite (the
    caller uses the reference path then)."""
    try:
        import llvmlite.binding as llvm
    except ImportError:
        return None
    key = _key(llvm, lib)
    for d in _cache_dirs():
        loaded = _load(llvm, d / f"{lib.stem}-{key}", lib)
        if loaded is not None:
            return loaded
    return _compile(key, lib)


def _file(stem: Path, suffix: str) -> Path:
    return stem.parent / (stem.name + suffix)


def _load(llvm: Any, stem: Path, lib: Library = SCAN) -> dict[str, Any] | None:
    try:
        meta = json.loads(_file(stem, ".json").read_text())
        objects = [_file(stem, f".{name}.o").read_bytes() for name in meta["symbols"]]
    except (OSError, ValueError, KeyError):
        return None
    # LLVM does not survive a damaged object file: each one is checked against its digest
    if [hashlib.sha256(o).hexdigest() for o in objects] != meta.get("sha256"):
        return None
    try:
        process = ctypes.CDLL(None)   # the symbols of the running process (POSIX)
    except (OSError, TypeError):
        return None
    for name in meta["undefined"]:
        if name in _STUBBED:
            continue
        if not hasattr(process, name):   # a symbol only numba could give: use numba
            return None
        llvm.add_symbol(name, ctypes.cast(getattr(process, name), _PTR).value)
    for name in ("PyGILState_Ensure", "PyGILState_Release"):
        llvm.add_symbol(name, ctypes.cast(getattr(ctypes.pythonapi, name), _PTR).value)
    try:   # an older LLVM (typed pointers) or a damaged file: compile with numba instead
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_default_triple().create_target_machine(jit=True)
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(_STUBS_IR), target)
        for obj in objects:
            engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        engine.finalize_object()
    except RuntimeError:
        return None
    funcs = {}
    for name, symbol in meta["symbols"].items():
        addr = engine.get_function_address(symbol)
        if not addr:
            return None
        funcs[name] = lib.prototypes[name](addr)
    _engines.append(engine)
    flag = ctypes.c_int32.from_address(engine.get_global_value_address("forensics_scan_failed"))
    funcs["failed"] = lambda: flag.value != 0
    return funcs


def _compile(key: str, lib: Library = SCAN) -> dict[str, Any] | None:
    """Compile with numba (numba's own cache makes this cheap after the first time), save the
    object for the next processes, and return numba's functions."""
    try:
        ENTRY_POINTS = importlib.import_module(lib.module).ENTRY_POINTS
    except ImportError:
        return None
    funcs: dict[str, Any] = {name: lib.prototypes[name](cf.address)
                             for name, cf in ENTRY_POINTS.items()}
    funcs["failed"] = lambda: False   # numba's wrapper reports an error itself
    try:
        objects, meta = _objects(ENTRY_POINTS)
    except Exception:   # numba internals moved: run from numba's functions, save nothing
        return funcs
    for d in _cache_dirs():
        if _save(d / f"{lib.stem}-{key}", objects, meta):
            break
    return funcs


def _objects(entry: dict[str, Any]) -> tuple[dict[str, bytes], dict[str, Any]]:
    """Each entry point's object file (a cfunc's library holds its callees' code too), and
    what :func:`_load` needs to know of them."""
    undefined: set[str] = set()
    objects = {}
    for name, cf in entry.items():
        lib = cf._library
        # the optimised IR numba keeps for linking (there also when loaded from its cache),
        # emitted by numba's own target machine
        module = lib._get_module_for_linking()
        objects[name] = lib._codegen._tm.emit_object(module)
        undefined |= {f.name for f in module.functions if f.is_declaration}
        undefined |= {g.name for g in module.global_variables if g.is_declaration}
    meta = {"symbols": {name: cf.native_name for name, cf in entry.items()},
            "sha256": [hashlib.sha256(objects[name]).hexdigest() for name in entry],
            "undefined": sorted(u for u in undefined if not u.startswith("llvm."))}
    return objects, meta


def _save(stem: Path, objects: dict[str, bytes], meta: dict[str, Any]) -> bool:
    files = [(f".{name}.o", data) for name, data in objects.items()]
    try:
        stem.parent.mkdir(parents=True, exist_ok=True)
        for suffix, data in [*files, (".json", json.dumps(meta).encode())]:   # json last
            fd, tmp = tempfile.mkstemp(dir=stem.parent, prefix=stem.name, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, _file(stem, suffix))
    except OSError:
        return False
    return True

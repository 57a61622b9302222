"""The compiled scanners' machine code, loaded from what a build saved: a shared library with
``ctypes`` alone, else the object files linked with llvmlite (a
:class:`~forensics.readers.compiled.library.Library` each: the log scanner's,
:data:`~forensics.readers.compiled.library.SCAN`, and the JSON Lines scanner's,
``json_scan.LIBRARY``).

Why: numba's own cache still costs ~0.75 s CPU per process (importing numba, then loading
its typing and lowering registries before the first cached call, which imports scipy), a
sixth of the whole ingest of a 500 MB log. The scanner's entry points are ``cfunc``\\s that
need no numba runtime (no allocation, no exception: ``error_model="numpy"``), so their object
code, once compiled, is a plain function to link: this module links it with llvmlite's MCJIT
(~30 ms) and calls it through ctypes (which releases the GIL during the call, as ``nogil``
did). The first run (or a changed kernel, llvmlite or CPU) compiles with numba and saves the
object (:mod:`~forensics.readers.compiled.builder`, in the background or here); when nothing
can be saved or loaded, numba's compiled functions are used directly. Where the saved code is
looked for: :mod:`~forensics.readers.compiled.cache_dirs`.

Loading without LLVM: importing llvmlite's binding (a 170 MB library) and linking with MCJIT
cost ~0.05 s CPU per process, a tenth of an ingest's start-up (measured). So a build also
links the shared library that ``ctypes`` loads in about a millisecond, keyed by what can be
read without LLVM (``library.shared_key``); it is tried first. Without it (no C compiler, no
``/proc/cpuinfo``, a build from before) the object files are linked with llvmlite, and a
build that makes the library is started in the background when a compiler is there. A saved
file is checked against its digest first: LLVM crashes on a damaged one.

What of numba's internals (and of llvmlite) this needs is pinned by version in
:mod:`forensics.readers.compiled.numba_internals`: with another version installed that lacks
one, a warning names it and the scanner runs from numba's own functions (numba changed) or the
input is read with the reference reader (llvmlite changed).
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from forensics.readers.compiled import builder, cache_dirs, numba_internals
from forensics.readers.compiled.library import (FAILED_FLAG, SCAN, STUBBED, STUBS_IR, Library,
                                                object_key, saved_file, shared_key, shared_stem)

logger = logging.getLogger(__name__)

_PTR = ctypes.c_void_p

#: The MCJIT engines holding loaded code: never dropped (freeing one frees the code that
#: functions handed out still point to).
_engines: list[Any] = []


def entry_points(lib: Library = SCAN, *, compile: str = "here") -> dict[str, Any] | None:
    """The entry points of ``lib`` as ctypes functions (``lib.prototypes``) and ``failed()``:
    whether a call returned an error (see ``library.STUBS_IR``); None without numba/llvmlite,
    or when they cannot be had now (the caller uses the reference path then).

    ``compile``: what to do without a saved object: ``"here"`` compile in this process (a
    one-line note first), ``"background"`` start a builder process and return None,
    ``"never"`` return None."""
    shared = shared_key(lib)
    if shared is not None:
        for d in cache_dirs.searched():
            loaded = _load_shared(shared_stem(d, lib, shared), lib)
            if loaded is not None:
                return loaded
    try:
        import llvmlite.binding as llvm
    except ImportError:
        return None
    gone = numba_internals.llvmlite_missing(llvm)
    if gone:   # nothing saved can be linked: numba's own functions when asked to compile here
        if builder.first_note(lib):
            logger.warning("%s: the saved %s cannot be linked; inputs are read with the "
                           "reference reader", numba_internals.changed("llvmlite", gone),
                           lib.title)
        return builder.compile_and_save(None, lib) if compile == "here" else None
    key = object_key(llvm, lib)
    for d in cache_dirs.searched():
        loaded = _load(llvm, d / f"{lib.stem}-{key}", lib)
        if loaded is not None:
            if (shared is not None and builder.linker() is not None
                    and not builder.shared_tried(lib, shared)):
                # a build from before the shared library: one that makes it, for next time
                builder.build_in_background(lib, key, announce=False)
            return loaded
    # built ahead for any CPU of this architecture (at install or image-build time)
    portable = object_key(llvm, lib, portable=True)
    for d in [*cache_dirs.searched(), cache_dirs.PREBUILT_DIR]:
        loaded = _load(llvm, d / f"{lib.stem}-{portable}", lib)
        if loaded is not None:
            return loaded
    if compile == "background":
        builder.build_in_background(lib, key)
        return None
    if compile != "here":
        return None
    return builder.compile_and_save(key, lib)


def _load_shared(stem: Path, lib: Library = SCAN) -> dict[str, Any] | None:
    """The entry points of the shared library saved at ``stem`` (``.so`` and ``.json``), loaded
    with ``ctypes`` alone; None when there is none or it does not load."""
    try:
        meta = json.loads(saved_file(stem, ".json").read_text())
        data = saved_file(stem, ".so").read_bytes()
        if hashlib.sha256(data).hexdigest() != meta["sha256"]:
            return None
        so = ctypes.CDLL(str(saved_file(stem, ".so")))
        funcs = {name: lib.prototypes[name]((symbol, so))
                 for name, symbol in meta["symbols"].items()}
        flag = ctypes.c_int32.in_dll(so, FAILED_FLAG)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    funcs["failed"] = lambda: flag.value != 0
    return funcs


def _load(llvm: Any, stem: Path, lib: Library = SCAN) -> dict[str, Any] | None:
    """The entry points of the object files saved at ``stem``, linked with llvmlite's MCJIT;
    None when there are none or they do not link."""
    try:
        meta = json.loads(saved_file(stem, ".json").read_text())
        objects = [saved_file(stem, f".{name}.o").read_bytes() for name in meta["symbols"]]
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
        if name in STUBBED:
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
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(STUBS_IR), target)
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
    flag = ctypes.c_int32.from_address(engine.get_global_value_address(FAILED_FLAG))
    funcs["failed"] = lambda: flag.value != 0
    return funcs

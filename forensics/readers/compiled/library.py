"""A compiled library: a kernel module whose entry points are saved and loaded together, the
keys its saved code is filed under, and the stubs linked in with it.

Keys. The object files are keyed by the kernel's source (:attr:`Library.sources`: every file
whose code or tables the compiled code holds), llvmlite's version, the target triple and the
CPU they are compiled for (numba compiles for the host's features; or :data:`PORTABLE_CPU`).
The shared library a build links from them is keyed by what can be read without LLVM
(:func:`host`: the architecture and the CPU's identity and feature flags from
``/proc/cpuinfo``, with the source and llvmlite's version).

Stubs. The few symbols numba's wrappers name outside the object are resolved when it is
linked: the Python C API from the process; numba's own helpers (GIL, exception and NRT calls,
reached only on error paths the kernel does not have) by the small definitions of
:data:`STUBS_IR`.
"""
from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import os
from pathlib import Path
from typing import Any

#: The CPU a portable object is compiled for (numba's ``NUMBA_CPU_NAME``): the baseline of the
#: target triple's architecture, so it loads on any machine of that architecture.
PORTABLE_CPU = "generic"
_HERE = Path(__file__).resolve().parent
#: The files (from this package's folder) whose text keys the log scanner's saved code.
SCAN_SOURCES = ("scan_kernel.py", "byte_tests.py", "decimal_kernel.py", "prefix_kernel.py",
                "event_kernel.py", "../native_scan.py", "../../dataset/log_fields.py")
#: Lines of the first processor's block of ``/proc/cpuinfo`` that identify what code compiled
#: for this CPU may use (x86 and Arm names); the others (clock, core ids) vary between reads.
CPUINFO_KEYS = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags",
                "CPU implementer", "CPU architecture", "CPU variant", "CPU part", "CPU revision",
                "Features", "isa", "uarch")

#: The global the stubs set when a kernel's wrapper reached an error path.
FAILED_FLAG = "forensics_scan_failed"
# Definitions of the symbols numba's cfunc wrappers take from numba's own libraries. The
# wrapper calls them only when the kernel returned an error status (its code has none to
# return): then ``numba_gil_ensure`` sets ``forensics_scan_failed``, which the caller checks
# after every call (``failed()`` of ``loader.entry_points``), so such a bug stops the ingest.
# The others do nothing (x86-64 and AArch64 calls tolerate a callee that ignores its arguments).
STUBS_IR = """
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
#: The symbols :data:`STUBS_IR` defines.
STUBBED = ("numba_gil_ensure", "numba_gil_release", "numba_do_raise",
           "numba_runtime_build_excinfo_struct", "numba_unpickle", "NRT_Free",
           "NRT_MemInfo_call_dtor")

_I64 = ctypes.c_int64
_PTR = ctypes.c_void_p
#: ctypes prototypes of the log scanner's entry points (``scan_kernel.SCAN_SIG`` / ``COUNT_SIG``,
#: ``event_kernel.EVENTS_SIG``).
PROTOTYPES = {
    "scan": ctypes.CFUNCTYPE(_I64, _PTR, _I64, _I64, *([_PTR] * 15)),
    "count": ctypes.CFUNCTYPE(_I64, _PTR, _I64),
    "events": ctypes.CFUNCTYPE(_I64, _PTR, _I64, _I64, _I64, *([_PTR] * 6), _I64, _PTR, _I64,
                               _PTR),
}


@dataclasses.dataclass(frozen=True)
class Library:
    """A kernel module whose ``ENTRY_POINTS`` (name -> cfunc) are saved and loaded together."""

    stem: str                       # the saved files are ``{stem}-{key}.*``
    module: str                     # imports numba; defines ENTRY_POINTS
    sources: tuple[str, ...]        # files (from this one's folder) whose text keys the object
    prototypes: dict[str, Any]      # ctypes prototype of each entry point
    title: str = "compiled scanner"  # what the notes call it
    instead: str = "reads with the reference reader"  # what a run does until it is built


#: The log scanner (:mod:`forensics.readers.compiled.scan_kernel`).
SCAN = Library("scan", "forensics.readers.compiled.scan_kernel", SCAN_SOURCES, PROTOTYPES,
               "log scanner")


def object_key(llvm: Any, lib: Library = SCAN, *, portable: bool = False) -> str:
    """The saved object's key: the kernel's source, llvmlite's version, the target triple and
    the CPU it is compiled for (the host's name and features, or :data:`PORTABLE_CPU`)."""
    import llvmlite

    h = hashlib.sha256()
    for name in lib.sources:
        h.update((_HERE / name).read_bytes())
    h.update(llvmlite.__version__.encode())
    h.update(llvm.get_process_triple().encode())
    if portable:
        h.update(PORTABLE_CPU.encode())
    else:
        h.update(llvm.get_host_cpu_name().encode())
        h.update(llvm.get_host_cpu_features().flatten().encode())
    return h.hexdigest()[:24]


def host() -> str | None:
    """This machine as compiled code depends on it, read without LLVM: the architecture and the
    :data:`CPUINFO_KEYS` lines of the first processor in ``/proc/cpuinfo``; None without that
    file (other systems), where no shared library is used."""
    try:
        with open("/proc/cpuinfo", "rb") as f:
            first = f.read(1 << 16).decode("utf-8", "replace").split("\n\n", 1)[0]
    except OSError:
        return None
    lines = []
    for line in first.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in CPUINFO_KEYS:
            lines.append(f"{name.strip()}={value.strip()}")
    return "\n".join([os.uname().machine, *lines]) if lines else None


def shared_key(lib: Library = SCAN) -> str | None:
    """The shared library's key (:func:`object_key`'s facts, the CPU as :func:`host` reads it);
    None when the host cannot be read."""
    try:   # the package only (~1 ms), for its version: not its binding
        import llvmlite
    except ImportError:
        return None
    machine = host()
    if machine is None:
        return None
    h = hashlib.sha256(b"shared library\n")
    for name in lib.sources:
        h.update((_HERE / name).read_bytes())
    h.update(llvmlite.__version__.encode())
    h.update(machine.encode())
    return h.hexdigest()[:24]


def shared_stem(directory: Path, lib: Library, key: str) -> Path:
    """Where in ``directory`` the shared library of ``key`` is saved (without suffix)."""
    return directory / f"{lib.stem}-so-{key}"


def saved_file(stem: Path, suffix: str) -> Path:
    """The file ``stem`` + ``suffix`` (a suffix such as ``.scan.o``, not ``Path.with_suffix``)."""
    return stem.parent / (stem.name + suffix)

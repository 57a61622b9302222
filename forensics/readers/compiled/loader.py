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

Where: objects and numba's own cache go to the per-user cache directory
(:func:`forensics.user_cache.user_cache_dir`: ``$FORENSICS_CACHE_DIR``, else
``$XDG_CACHE_HOME/adp-forensics``, else ``~/.cache/adp-forensics``), never into the installed
package, which may be read-only. A ``NUMBA_CACHE_DIR`` the user set is searched first and used
for numba's cache. With no writable cache directory, a compile goes to a temporary directory
(removed at exit), and when even that fails the caller reads with the reference path: never an
error.

When: an ingest never stalls on the compile (:func:`entry_points` with
``compile="background"``, what the readers ask for by input size): without a saved object it
starts one builder process (``python -m forensics.readers.compiled.loader``, detached, one per
library and machine at a time: a lock file beside the object), says so in one line, and reads
this input with the reference path; the next ingest loads the object. Asked for explicitly
(``FORENSICS_INGEST_PATH=native``, or :func:`entry_points` with the default ``compile="here"``)
the compile runs in the process, announced by a one-line note first.

Loading without LLVM: importing llvmlite's binding (a 170 MB library) and linking with MCJIT
cost ~0.05 s CPU per process, a tenth of an ingest's start-up (measured). So a build also
emits position-independent objects and links them, with the platform's C compiler driver
(:data:`LINKERS`), into a shared library that ``ctypes`` loads in about a millisecond. It is
keyed by what can be read without LLVM (:func:`_host`: the architecture and the CPU's identity
and feature flags from ``/proc/cpuinfo``, with the source and llvmlite's version) and is tried
first; without it (no C compiler, no ``/proc/cpuinfo``, a build from before) the object files
are linked with llvmlite as before, and a build that makes the library is started in the
background when a compiler is there.

The object is keyed by the kernel's source, llvmlite's version and the host CPU (numba
compiles for the host's features). The few symbols numba's wrappers name outside the object
are resolved here: the Python C API from the process; numba's own helpers (GIL, exception
and NRT calls, reached only on error paths the kernel does not have) by small definitions
below. A saved object is checked against its digest first: LLVM crashes on a damaged one.

What of numba's internals (and of llvmlite) this needs is pinned by version in
:mod:`forensics.readers.compiled.numba_internals`: with another version installed that lacks
one, a warning names it and the scanner runs from numba's own functions (numba changed) or the
input is read with the reference reader (llvmlite changed).
"""
from __future__ import annotations

import atexit
import ctypes
import dataclasses
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from forensics.readers.compiled import numba_internals
from forensics.user_cache import user_cache_dir, writable, writable_cache_dir

logger = logging.getLogger(__name__)

#: Environment variable numba reads for its cache directory; when the user set it, saved objects
#: are looked for (and saved) there first.
CACHE_ENV = "NUMBA_CACHE_DIR"
#: A build lock older than this is taken to be left by a killed builder.
STALE_BUILD_S = 20 * 60
#: The CPU a portable object is compiled for (numba's ``NUMBA_CPU_NAME``): the baseline of the
#: target triple's architecture, so it loads on any machine of that architecture.
PORTABLE_CPU = "generic"
_HERE = Path(__file__).resolve().parent
#: Objects built ahead of use (:mod:`forensics.readers.prebuild`), inside the installed package.
PREBUILT_DIR = _HERE / "_prebuilt"
_SOURCES = ("scan_kernel.py", "byte_tests.py", "decimal_kernel.py", "prefix_kernel.py",
            "../native_scan.py", "../../dataset/log_fields.py")

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

#: C compiler drivers tried, in order, to link a build's objects into a shared library (the
#: ``CC`` environment variable first when set): the driver finds the platform's linker.
LINKERS = ("cc", "gcc", "clang")
#: Lines of the first processor's block of ``/proc/cpuinfo`` that identify what code compiled
#: for this CPU may use (x86 and Arm names); the others (clock, core ids) vary between reads.
CPUINFO_KEYS = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags",
                "CPU implementer", "CPU architecture", "CPU variant", "CPU part", "CPU revision",
                "Features", "isa", "uarch")

_I64 = ctypes.c_int64
_PTR = ctypes.c_void_p
#: ctypes prototypes of the entry points (``scan_kernel.SCAN_SIG`` / ``COUNT_SIG``).
PROTOTYPES = {
    "scan": ctypes.CFUNCTYPE(_I64, _PTR, _I64, _I64, *([_PTR] * 16)),
    "count": ctypes.CFUNCTYPE(_I64, _PTR, _I64),
}



@dataclasses.dataclass(frozen=True)
class Library:
    """A kernel module whose ``ENTRY_POINTS`` (name -> cfunc) are saved and loaded together."""

    stem: str                       # the saved files are ``{stem}-{key}.*``
    module: str                     # imports numba; defines ENTRY_POINTS
    sources: tuple[str, ...]        # files (from this one's folder) whose text keys the object
    prototypes: dict[str, Any]      # ctypes prototype of each entry point
    title: str = "compiled scanner"  # what the notes call it


#: The log scanner (:mod:`forensics.readers.compiled.scan_kernel`).
SCAN = Library("scan", "forensics.readers.compiled.scan_kernel", _SOURCES, PROTOTYPES,
               "log scanner")

#: The MCJIT engines holding loaded code: never dropped (freeing one frees the code that
#: functions handed out still point to).
_engines: list[Any] = []


def _key(llvm: Any, lib: Library = SCAN, *, portable: bool = False) -> str:
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


def _host() -> str | None:
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


def _shared_key(lib: Library = SCAN) -> str | None:
    """The shared library's key (:func:`_key`'s facts, the CPU as :func:`_host` reads it);
    None when the host cannot be read."""
    try:   # the package only (~1 ms), for its version: not its binding
        import llvmlite
    except ImportError:
        return None
    host = _host()
    if host is None:
        return None
    h = hashlib.sha256(b"shared library\n")
    for name in lib.sources:
        h.update((_HERE / name).read_bytes())
    h.update(llvmlite.__version__.encode())
    h.update(host.encode())
    return h.hexdigest()[:24]


def _shared_stem(directory: Path, lib: Library, key: str) -> Path:
    return directory / f"{lib.stem}-so-{key}"


#: The value this module gave ``NUMBA_CACHE_DIR`` (numba's cache in the user cache directory),
#: which is not a directory of the user's choosing.
_numba_dir_set: str | None = None
#: Libraries whose background build this process announced.
_announced: set[str] = set()


def _cache_dirs() -> list[Path]:
    """Where saved objects are looked for, in order; they are saved into the first writable."""
    given = os.environ.get(CACHE_ENV)
    dirs = [Path(given)] if given and given != _numba_dir_set else []
    try:
        dirs.append(user_cache_dir() / "native")
    except RuntimeError:     # no home directory at all
        pass
    return dirs


def entry_points(lib: Library = SCAN, *, compile: str = "here") -> dict[str, Any] | None:
    """The entry points of ``lib`` as ctypes functions (``lib.prototypes``) and ``failed()``:
    whether a call returned an error (see ``_STUBS_IR``); None without numba/llvmlite, or when
    they cannot be had now (the caller uses the reference path then).

    ``compile``: what to do without a saved object: ``"here"`` compile in this process (a
    one-line note first), ``"background"`` start a builder process and return None,
    ``"never"`` return None."""
    shared = _shared_key(lib)
    if shared is not None:
        for d in _cache_dirs():
            loaded = _load_shared(_shared_stem(d, lib, shared), lib)
            if loaded is not None:
                return loaded
    try:
        import llvmlite.binding as llvm
    except ImportError:
        return None
    gone = numba_internals.llvmlite_missing(llvm)
    if gone:   # nothing saved can be linked: numba's own functions when asked to compile here
        if lib.stem not in _announced:
            _announced.add(lib.stem)
            logger.warning("%s: the saved %s cannot be linked; inputs are read with the "
                           "reference reader", numba_internals.changed("llvmlite", gone),
                           lib.title)
        return _compile(None, lib) if compile == "here" else None
    key = _key(llvm, lib)
    for d in _cache_dirs():
        loaded = _load(llvm, d / f"{lib.stem}-{key}", lib)
        if loaded is not None:
            if shared is not None and _linker() is not None and not _shared_tried(lib, shared):
                # a build from before the shared library: one that makes it, for next time
                build_in_background(lib, key, announce=False)
            return loaded
    # built ahead for any CPU of this architecture (at install or image-build time)
    portable = _key(llvm, lib, portable=True)
    for d in [*_cache_dirs(), PREBUILT_DIR]:
        loaded = _load(llvm, d / f"{lib.stem}-{portable}", lib)
        if loaded is not None:
            return loaded
    if compile == "background":
        build_in_background(lib, key)
        return None
    if compile != "here":
        return None
    return _compile(key, lib)


def _build_dir() -> Path | None:
    """The first writable directory of :func:`_cache_dirs` (None: no cache can be written)."""
    for d in _cache_dirs():
        if writable(d):
            return d
    return None


def build_in_background(lib: Library, key: str, *, announce: bool = True) -> bool:
    """Start a detached process compiling ``lib`` and saving its object (and shared library)
    for later processes, unless one is running already; announce it once per process (unless
    ``announce`` is False: this run does not wait for it). False when it cannot be built (no
    numba, no writable cache directory)."""
    if importlib.util.find_spec("numba") is None:
        return False
    d = _build_dir()
    if d is None:
        if lib.stem not in _announced:
            _announced.add(lib.stem)
            logger.warning("no writable cache directory (%s; set %s to choose one): the compiled "
                           "%s cannot be kept, inputs are read with the reference reader",
                           _where(), "FORENSICS_CACHE_DIR", lib.title)
        return False
    stem = d / f"{lib.stem}-{key}"
    lock = _file(stem, ".building")
    if not _take_lock(lock):
        started = False
    else:
        try:
            shared = _shared_key(lib)
            extra = [str(_shared_stem(d, lib, shared))] if shared is not None else []
            subprocess.Popen([sys.executable, "-m", __name__, str(stem), lib.module, str(lock),
                              *extra],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        except OSError:
            lock.unlink(missing_ok=True)
            return False
        started = True
    if announce and lib.stem not in _announced:
        _announced.add(lib.stem)
        logger.warning("%s the %s for this machine in the background (once; about a minute "
                       "of CPU); this run reads with the reference reader, the next ones load "
                       "it", "building" if started else "still building", lib.title)
    return True


def _where() -> str:
    try:
        return str(user_cache_dir())
    except RuntimeError:
        return "no home directory"


def _take_lock(lock: Path) -> bool:
    """Create ``lock`` (False when a live build holds it; a stale one is replaced)."""
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                if time.time() - lock.stat().st_mtime < STALE_BUILD_S:
                    return False
                lock.unlink()
            except OSError:
                return False
            continue
        except OSError:
            return False
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        return True
    return False


def _numba_cache() -> None:
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


def _file(stem: Path, suffix: str) -> Path:
    return stem.parent / (stem.name + suffix)


def _load_shared(stem: Path, lib: Library = SCAN) -> dict[str, Any] | None:
    """The entry points of the shared library saved at ``stem`` (``.so`` and ``.json``), loaded
    with ``ctypes`` alone; None when there is none or it does not load."""
    try:
        meta = json.loads(_file(stem, ".json").read_text())
        data = _file(stem, ".so").read_bytes()
        if hashlib.sha256(data).hexdigest() != meta["sha256"]:
            return None
        so = ctypes.CDLL(str(_file(stem, ".so")))
        funcs = {name: lib.prototypes[name]((symbol, so))
                 for name, symbol in meta["symbols"].items()}
        flag = ctypes.c_int32.in_dll(so, "forensics_scan_failed")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    funcs["failed"] = lambda: flag.value != 0
    return funcs


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


def _compile(key: str | None, lib: Library = SCAN) -> dict[str, Any] | None:
    """Compile with numba (numba's own cache makes this cheap after the first time), save the
    object for the next processes (under ``key``; None: save nothing), and return numba's
    functions."""
    if importlib.util.find_spec("numba") is None:
        return None
    _numba_cache()
    logger.warning("compiling the %s once for this machine (about a minute; later runs load "
                   "it in moments)...", lib.title)
    try:
        ENTRY_POINTS = importlib.import_module(lib.module).ENTRY_POINTS
    except Exception as e:   # no numba, or numba refusing to compile or cache here
        logger.warning("the %s could not be compiled (%s)%s; inputs are read with the reference "
                       "reader", lib.title, e, numba_internals.version_note())
        return None
    funcs: dict[str, Any] = {name: lib.prototypes[name](cf.address)
                             for name, cf in ENTRY_POINTS.items()}
    funcs["failed"] = lambda: False   # numba's wrapper reports an error itself
    if key is None:
        return funcs
    try:
        objects, meta = _objects(ENTRY_POINTS)
    except Exception as e:   # numba internals moved: run from numba's functions, save nothing
        logger.warning("%s: the %s runs from numba's own functions and is not saved (each "
                       "process imports numba)", e, lib.title)
        return funcs
    shared = _shared_key(lib)
    for d in _cache_dirs():
        if _save(d / f"{lib.stem}-{key}", objects, meta):
            if shared is not None:
                _save_shared(_shared_stem(d, lib, shared), ENTRY_POINTS)
            break
    return funcs


def _objects(entry: dict[str, Any]) -> tuple[dict[str, bytes], dict[str, Any]]:
    """Each entry point's object file (a cfunc's library holds its callees' code too), and
    what :func:`_load` needs to know of them. Raises :class:`numba_internals.NumbaChanged` when
    the installed numba lacks what this reads."""
    undefined: set[str] = set()
    objects = {}
    for name, cf in entry.items():
        module, objects[name] = numba_internals.object_code(cf)
        undefined |= {f.name for f in module.functions if f.is_declaration}
        undefined |= {g.name for g in module.global_variables if g.is_declaration}
    meta = {"symbols": {name: cf.native_name for name, cf in entry.items()},
            "sha256": [hashlib.sha256(objects[name]).hexdigest() for name in entry],
            "undefined": sorted(u for u in undefined if not u.startswith("llvm."))}
    return objects, meta


def _linker() -> str | None:
    """The C compiler driver that links shared libraries here (``CC``, else :data:`LINKERS`)."""
    for name in [os.environ.get("CC", ""), *LINKERS]:
        found = shutil.which(name) if name else None
        if found:
            return found
    return None


def _pic_objects(entry: dict[str, Any]) -> dict[str, bytes]:
    """Each entry point's code and the stubs (``_STUBS_IR``) as position-independent objects
    for the CPU numba compiled for (:func:`numba_internals.pic_object_code`)."""
    import llvmlite.binding as llvm

    objects = {name: numba_internals.pic_object_code(cf, llvm) for name, cf in entry.items()}
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = llvm.Target.from_default_triple().create_target_machine(reloc="pic",
                                                                      codemodel="default")
    stubs = llvm.parse_assembly(_STUBS_IR)
    stubs.triple = llvm.get_process_triple()
    objects["stubs"] = machine.emit_object(stubs)
    return objects


def _save_shared(stem: Path, entry: dict[str, Any]) -> bool:
    """Link ``entry``'s code into the shared library :func:`_load_shared` loads (``stem.so``,
    then ``stem.json``). False without a C compiler driver; when emitting or linking fails,
    ``stem.json`` says why (and no build is started for it again, :func:`_shared_tried`)."""
    linker = _linker()
    if linker is None:
        return False
    try:
        objects = _pic_objects(entry)
    except Exception as e:   # numba internals moved: the object files are still there
        _save(stem, {}, {"unlinkable": str(e)})
        return False
    try:
        with tempfile.TemporaryDirectory(prefix="forensics-link-") as tmp:
            paths = []
            for name, data in objects.items():
                paths.append(os.path.join(tmp, f"{name}.o"))
                with open(paths[-1], "wb") as f:
                    f.write(data)
            out = os.path.join(tmp, "lib.so")
            # -Bsymbolic: the library's calls go to its own stubs even in a process where
            # numba's helpers are loaded (numba loads them globally)
            subprocess.run([linker, "-shared", "-Wl,-Bsymbolic", "-o", out, *paths],
                           check=True, timeout=120, stdin=subprocess.DEVNULL,
                           capture_output=True)
            data = Path(out).read_bytes()
            meta = {"symbols": {name: cf.native_name for name, cf in entry.items()},
                    "sha256": hashlib.sha256(data).hexdigest()}
            so = ctypes.CDLL(out)   # it loads and has what the loader looks up
            for symbol in [*meta["symbols"].values(), "forensics_scan_failed"]:
                if not hasattr(so, symbol):
                    raise OSError(f"the linked library lacks {symbol}")
            return _save(stem, {}, meta, extra=[(".so", data)])
    except (OSError, subprocess.SubprocessError) as e:
        _save(stem, {}, {"unlinkable": str(e)[-500:]})
        return False


def _shared_tried(lib: Library, key: str) -> bool:
    """Whether a build made, or found it could not make, the shared library of ``key`` (its
    ``.json`` is there: the library's, or the reason): then none is built again for it."""
    return any(_file(_shared_stem(d, lib, key), ".json").exists() for d in _cache_dirs())


def _save(stem: Path, objects: dict[str, bytes], meta: dict[str, Any],
          extra: list[tuple[str, bytes]] | None = None) -> bool:
    """Write ``objects`` (``stem.NAME.o``), the ``extra`` files (``stem`` + suffix) and, last,
    ``meta`` (``stem.json``), each atomically."""
    files = [(f".{name}.o", data) for name, data in objects.items()] + (extra or [])
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


def prebuild(libraries: list[Library], directory: Path | None = None, *,
             portable: bool = True) -> list[Path]:
    """Compile ``libraries`` now and save their objects (for a container image or a cluster
    install: the first ingest then compiles nothing). ``portable``: for
    :data:`PORTABLE_CPU`, loadable on any machine of this architecture (call it in a process
    that has not imported numba: numba reads the CPU to compile for when imported); else for
    this machine's CPU. ``directory``: default the package's :data:`PREBUILT_DIR` when it can
    be written, else the user cache. Returns the saved objects' stems."""
    import llvmlite.binding as llvm

    if portable:
        if "numba" in sys.modules:
            raise RuntimeError("a portable build needs a process that has not imported numba")
        os.environ["NUMBA_CPU_NAME"] = PORTABLE_CPU
        os.environ["NUMBA_CPU_FEATURES"] = ""
    else:
        _numba_cache()
    if directory is None:
        directory = PREBUILT_DIR if writable(PREBUILT_DIR) else user_cache_dir() / "native"
    if portable:   # numba's cache of host code must not serve a portable compile
        os.environ[CACHE_ENV] = tempfile.mkdtemp(prefix="forensics-numba-portable-")
        atexit.register(shutil.rmtree, os.environ[CACHE_ENV], True)
    stems = []
    for lib in libraries:
        objects, meta = _objects(importlib.import_module(lib.module).ENTRY_POINTS)
        stem = directory / f"{lib.stem}-{_key(llvm, lib, portable=portable)}"
        if not _save(stem, objects, meta):
            raise OSError(f"cannot write {directory}")
        stems.append(stem)
    return stems


def main(argv: list[str]) -> int:
    """The background builder: ``python -m forensics.readers.compiled.loader STEM MODULE LOCK
    [SHARED]`` compiles the kernels of ``MODULE`` and saves their object at ``STEM`` (and,
    given ``SHARED``, links the shared library saved there when a C compiler driver is
    found), then removes ``LOCK``."""
    stem, module, lock = Path(argv[0]), argv[1], Path(argv[2])
    try:
        _numba_cache()
        entry = importlib.import_module(module).ENTRY_POINTS
        objects, meta = _objects(entry)
        if not _save(stem, objects, meta):
            return 1
        if len(argv) > 3:
            _save_shared(Path(argv[3]), entry)
        return 0
    finally:
        lock.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

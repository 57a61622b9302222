"""Compiling a kernel with numba and saving its code for later processes: the object files,
the shared library linked from them, builds ahead of use and the background builder.

When: an ingest never stalls on the compile (``loader.entry_points`` with
``compile="background"``, what the readers ask for by input size): without a saved object it
starts one builder process (``python -m forensics.readers.compiled.builder``, detached, one per
library and machine at a time: a lock file beside the object), says so in one line, and reads
this input with the reference path; the next ingest loads the object. Asked for explicitly
(``FORENSICS_INGEST_PATH=native``, or ``loader.entry_points`` with the default
``compile="here"``) the compile runs in the process (:func:`compile_and_save`), announced by a
one-line note first.

A build also emits position-independent objects and links them, with the platform's C
compiler driver (:data:`LINKERS`), into a shared library that ``ctypes`` loads without LLVM;
without a compiler only the object files are saved. Each file is written atomically, the
``.json`` that describes them last.
"""
from __future__ import annotations

import atexit
import ctypes
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

from forensics.readers.compiled import cache_dirs, numba_internals
from forensics.readers.compiled.library import (FAILED_FLAG, PORTABLE_CPU, STUBS_IR, Library,
                                                object_key, saved_file, shared_key, shared_stem)
from forensics.user_cache import user_cache_dir, writable

logger = logging.getLogger(__name__)

#: A build lock older than this is taken to be left by a killed builder.
STALE_BUILD_S = 20 * 60
#: C compiler drivers tried, in order, to link a build's objects into a shared library (the
#: ``CC`` environment variable first when set): the driver finds the platform's linker.
LINKERS = ("cc", "gcc", "clang")

#: Libraries this process has said something about (one note each).
_announced: set[str] = set()


def first_note(lib: Library) -> bool:
    """Whether nothing was said about ``lib`` yet in this process (then it is now)."""
    if lib.stem in _announced:
        return False
    _announced.add(lib.stem)
    return True


def build_in_background(lib: Library, key: str, *, announce: bool = True) -> bool:
    """Start a detached process compiling ``lib`` and saving its object (and shared library)
    for later processes, unless one is running already; announce it once per process (unless
    ``announce`` is False: this run does not wait for it). False when it cannot be built (no
    numba, no writable cache directory)."""
    if importlib.util.find_spec("numba") is None:
        return False
    d = cache_dirs.first_writable()
    if d is None:
        if first_note(lib):
            logger.warning("no writable cache directory (%s; set %s to choose one): the compiled "
                           "%s cannot be kept, inputs are read with the reference reader",
                           cache_dirs.user_dir_text(), "FORENSICS_CACHE_DIR", lib.title)
        return False
    stem = d / f"{lib.stem}-{key}"
    lock = saved_file(stem, ".building")
    if not _take_lock(lock):
        started = False
    else:
        try:
            shared = shared_key(lib)
            extra = [str(shared_stem(d, lib, shared))] if shared is not None else []
            subprocess.Popen([sys.executable, "-m", __name__, str(stem), lib.module, str(lock),
                              *extra],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        except OSError:
            lock.unlink(missing_ok=True)
            return False
        started = True
    if announce and first_note(lib):
        logger.warning("%s the %s for this machine in the background (once; about a minute "
                       "of CPU); this run %s, the next ones load it",
                       "building" if started else "still building", lib.title, lib.instead)
    return True


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


def compile_and_save(key: str | None, lib: Library) -> dict[str, Any] | None:
    """Compile with numba (numba's own cache makes this cheap after the first time), save the
    object for the next processes (under ``key``; None: save nothing), and return numba's
    functions as ``loader.entry_points`` does; None when numba cannot compile them here."""
    if importlib.util.find_spec("numba") is None:
        return None
    cache_dirs.set_numba_cache()
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
    shared = shared_key(lib)
    for d in cache_dirs.searched():
        if _save(d / f"{lib.stem}-{key}", objects, meta):
            if shared is not None:
                _save_shared(shared_stem(d, lib, shared), ENTRY_POINTS)
            break
    return funcs


def _objects(entry: dict[str, Any]) -> tuple[dict[str, bytes], dict[str, Any]]:
    """Each entry point's object file (a cfunc's library holds its callees' code too), and
    what ``loader`` needs to know of them. Raises :class:`numba_internals.NumbaChanged` when
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


def linker() -> str | None:
    """The C compiler driver that links shared libraries here (``CC``, else :data:`LINKERS`)."""
    for name in [os.environ.get("CC", ""), *LINKERS]:
        found = shutil.which(name) if name else None
        if found:
            return found
    return None


def _pic_objects(entry: dict[str, Any]) -> dict[str, bytes]:
    """Each entry point's code and the stubs (``STUBS_IR``) as position-independent objects
    for the CPU numba compiled for (:func:`numba_internals.pic_object_code`)."""
    import llvmlite.binding as llvm

    objects = {name: numba_internals.pic_object_code(cf, llvm) for name, cf in entry.items()}
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = llvm.Target.from_default_triple().create_target_machine(reloc="pic",
                                                                      codemodel="default")
    stubs = llvm.parse_assembly(STUBS_IR)
    stubs.triple = llvm.get_process_triple()
    objects["stubs"] = machine.emit_object(stubs)
    return objects


def _save_shared(stem: Path, entry: dict[str, Any]) -> bool:
    """Link ``entry``'s code into the shared library the loader loads (``stem.so``, then
    ``stem.json``). False without a C compiler driver; when emitting or linking fails,
    ``stem.json`` says why (and no build is started for it again, :func:`shared_tried`)."""
    driver = linker()
    if driver is None:
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
            subprocess.run([driver, "-shared", "-Wl,-Bsymbolic", "-o", out, *paths],
                           check=True, timeout=120, stdin=subprocess.DEVNULL,
                           capture_output=True)
            data = Path(out).read_bytes()
            meta = {"symbols": {name: cf.native_name for name, cf in entry.items()},
                    "sha256": hashlib.sha256(data).hexdigest()}
            so = ctypes.CDLL(out)   # it loads and has what the loader looks up
            for symbol in [*meta["symbols"].values(), FAILED_FLAG]:
                if not hasattr(so, symbol):
                    raise OSError(f"the linked library lacks {symbol}")
            return _save(stem, {}, meta, extra=[(".so", data)])
    except (OSError, subprocess.SubprocessError) as e:
        _save(stem, {}, {"unlinkable": str(e)[-500:]})
        return False


def shared_tried(lib: Library, key: str) -> bool:
    """Whether a build made, or found it could not make, the shared library of ``key`` (its
    ``.json`` is there: the library's, or the reason): then none is built again for it."""
    return any(saved_file(shared_stem(d, lib, key), ".json").exists()
               for d in cache_dirs.searched())


def _save(stem: Path, objects: dict[str, bytes], meta: dict[str, Any],
          extra: list[tuple[str, bytes]] | None = None) -> bool:
    """Write ``objects`` (``stem.NAME.o``), the ``extra`` files (``stem`` + suffix) and, last,
    ``meta`` (``stem.json``), each atomically: a new file replaces the old, never written in
    place (another process may have the old ``.so`` mapped; cut in place, its pages past the
    cut are a SIGBUS there, at its next call or its exit)."""
    files = [(f".{name}.o", data) for name, data in objects.items()] + (extra or [])
    try:
        stem.parent.mkdir(parents=True, exist_ok=True)
        for suffix, data in [*files, (".json", json.dumps(meta).encode())]:   # json last
            fd, tmp = tempfile.mkstemp(dir=stem.parent, prefix=stem.name, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, saved_file(stem, suffix))
    except OSError:
        return False
    return True


def prebuild(libraries: list[Library], directory: Path | None = None, *,
             portable: bool = True) -> list[Path]:
    """Compile ``libraries`` now and save their objects (for a container image or a cluster
    install: the first ingest then compiles nothing). ``portable``: for
    :data:`PORTABLE_CPU`, loadable on any machine of this architecture (call it in a process
    that has not imported numba: numba reads the CPU to compile for when imported); else for
    this machine's CPU. ``directory``: default the package's ``cache_dirs.PREBUILT_DIR`` when
    it can be written, else the user cache. Returns the saved objects' stems."""
    import llvmlite.binding as llvm

    if portable:
        if "numba" in sys.modules:
            raise RuntimeError("a portable build needs a process that has not imported numba")
        os.environ["NUMBA_CPU_NAME"] = PORTABLE_CPU
        os.environ["NUMBA_CPU_FEATURES"] = ""
    else:
        cache_dirs.set_numba_cache()
    if directory is None:
        directory = (cache_dirs.PREBUILT_DIR if writable(cache_dirs.PREBUILT_DIR)
                     else user_cache_dir() / "native")
    if portable:   # numba's cache of host code must not serve a portable compile
        os.environ[cache_dirs.CACHE_ENV] = tempfile.mkdtemp(prefix="forensics-numba-portable-")
        atexit.register(shutil.rmtree, os.environ[cache_dirs.CACHE_ENV], True)
    stems = []
    for lib in libraries:
        objects, meta = _objects(importlib.import_module(lib.module).ENTRY_POINTS)
        stem = directory / f"{lib.stem}-{object_key(llvm, lib, portable=portable)}"
        if not _save(stem, objects, meta):
            raise OSError(f"cannot write {directory}")
        stems.append(stem)
    return stems


def main(argv: list[str]) -> int:
    """The background builder: ``python -m forensics.readers.compiled.builder STEM MODULE LOCK
    [SHARED]`` compiles the kernels of ``MODULE`` and saves their object at ``STEM`` (and,
    given ``SHARED``, links the shared library saved there when a C compiler driver is
    found), then removes ``LOCK``."""
    stem, module, lock = Path(argv[0]), argv[1], Path(argv[2])
    try:
        cache_dirs.set_numba_cache()
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

"""The compiled frame builder of the replay's windows (``replay.frame_build``), as the pipeline
installs it (``forensics.replay_feed``): built once per machine in the background and loaded
from its saved object, like the ingest scanners (:mod:`forensics.readers.compiled`).

Until it is built (the first replay starts the build), and with ``FORENSICS_FRAMES_PATH=numpy``,
the replay builds its frames with numpy (the same arrays); ``FORENSICS_FRAMES_PATH=native``
compiles it in the process when nothing is saved (tests, benchmarks).
"""
from __future__ import annotations

import ctypes
import os

from forensics.readers.compiled.library import Library
from replay.frame_build import SIGNATURES

#: Environment switch: ``numpy`` never uses the kernel, ``native`` compiles it here if needed.
PATH_ENV = "FORENSICS_FRAMES_PATH"
#: The entry points' ctypes prototypes.
PROTOTYPES = {name: ctypes.CFUNCTYPE(ctypes.c_int64, *(ctypes.c_int64 if c == "i"
                                                       else ctypes.c_void_p for c in spec))
              for name, spec in SIGNATURES.items()}
#: Keyed by the kernel's source and the contract it fills (the replay's side of it).
LIBRARY = Library("frames", "forensics.readers.compiled.frame_kernel",
                  ("frame_kernel.py", "../../../replay/frame_build.py"), PROTOTYPES,
                  "frame builder", "builds the replay's frames with numpy")

_kernel = None


def kernel():
    """The entry points, or None: switched off, or not built when this process first asked (a
    background build is then started), or numba cannot give them. Loaded once per process."""
    global _kernel
    choice = os.environ.get(PATH_ENV)
    if choice == "numpy":
        return None
    if _kernel is None:
        from forensics.readers.compiled import loader

        try:
            # not built: numpy for the rest of this process (the next one loads the build)
            _kernel = loader.entry_points(
                LIBRARY, compile="here" if choice == "native" else "background") or False
        except Exception:   # numba refusing the kernel's options (``_nrt`` is private)
            _kernel = False
    return _kernel or None


def forget() -> None:
    """Load again on the next call (tests switching the path)."""
    global _kernel
    _kernel = None


__all__ = ["LIBRARY", "PATH_ENV", "PROTOTYPES", "forget", "kernel"]

"""Set-up of a process started as one command (``forensics postmortem ...``): costs a short
command-line process pays for nothing, skipped. A program or a test that imports the command
modules is left alone (:func:`started_as`)."""
from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Iterator


def started_as(command: str) -> bool:
    """Whether this process was started as ``forensics COMMAND ...`` (console script or
    ``python -m forensics``)."""
    prog = os.path.basename(sys.argv[0]) if sys.argv else ""
    if prog == "__main__.py":
        prog = os.path.basename(os.path.dirname(sys.argv[0]))
    return prog == "forensics" and sys.argv[1:2] == [command]


def one_blas_thread() -> None:
    """No OpenBLAS thread pool, before numpy is imported: numpy's OpenBLAS starts one thread
    per core at import, which spins for a while (~0.08 s CPU, measured) in a command that does
    no floating-point linear algebra. ``OPENBLAS_NUM_THREADS`` set by the user is kept."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def system_arrow_pool() -> None:
    """Arrow's buffers from the C library's ``malloc`` (its ``system`` pool), before pyarrow is
    imported: an ingest allocates and frees buffers of megabytes per block, and the bundled
    mimalloc handed their pages back and faulted fresh, zeroed ones in again for the next
    block. Measured, ``forensics ingest`` of the 134 MB varied log of benchmarks/ingest.py,
    six paired whole-process rounds (load ~7): 1.36 -> 1.24 s CPU (system time 0.32 -> 0.23 s),
    peak RSS 271 -> 223 MiB; jemalloc in between. ``ARROW_DEFAULT_MEMORY_POOL`` set by the
    user is kept."""
    if "pyarrow" not in sys.modules:
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")


@contextlib.contextmanager
def imports_without_gc() -> Iterator[None]:
    """Import the command's libraries with the cyclic garbage collector off, then move every
    object they made to the permanent generation (``gc.freeze``).

    Importing pandas, pyarrow and numpy makes hundreds of thousands of long-lived objects and
    almost no garbage: the collector ran ~180 times during the bundled post-mortem, ~0.07 s
    CPU, to free ~800 objects (measured). Frozen, later collections no longer walk the
    modules' objects. The collector is on again for the command's own work.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()

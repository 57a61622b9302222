"""The compiled kernels of the big-input readers and their loader.

Contract. A kernel (:mod:`.scan_kernel` for executor logs, :mod:`.json_kernel` for stats and
trace JSON Lines, each with the compiled helpers it inlines: :mod:`.byte_tests`,
:mod:`.prefix_kernel`, :mod:`.decimal_kernel`, :mod:`.json_tokens`) is a set of numba
``cfunc`` entry points over raw pointers: each takes one block of whole lines (bytes) and output arrays its caller allocated,
allocates nothing, raises nothing and runs without the GIL, and returns a status or a count
after filling the arrays with what it read with certainty; whatever it does not take (a line,
or the whole block on a non-zero status) goes to the reference reader, which is its
specification: a row read by a kernel equals the reference reader's row value for value (the
tests in ``tests/ingest`` compare both). The Python side that calls a kernel and turns its
arrays into Arrow rows belongs to its reader (:mod:`forensics.readers.native_scan`,
:mod:`forensics.readers.json_scan`). A build (:mod:`.builder`) compiles a kernel with numba
once per machine and saves its object code in the per-user cache directory (:mod:`.cache_dirs`:
:func:`forensics.user_cache.user_cache_dir`, under ``native/``; or into ``_prebuilt/`` here with
``python -m forensics.readers.prebuild``), keyed by the source of every file its code comes
from, llvmlite's version and the CPU (:mod:`.library`; numba's own cache is keyed to the
callees' source too: :mod:`.cache_digest`); later processes load (:mod:`.loader`) the shared
library a build links from it when a C compiler driver is there (``ctypes`` alone: no LLVM,
~1 ms), else link that object with llvmlite, without importing numba. What the loader takes
from numba's internals is pinned to the versions it was checked against in
:mod:`.numba_internals`. Without numba or llvmlite, with no writable cache directory, while a
build runs in the background, or when an installed numba or llvmlite lacks those internals, the
input is read by the reference reader (or, when a compile in the process was asked for, by
numba's own compiled functions): never an error, the same rows.

Importing this package imports nothing (numba and llvmlite only when a kernel is needed).
"""

"""numba's cache key of a compiled function that takes in compiled code of another file.

numba's cache keys a function by its bytecode, the values it closes over and the stamp of the
file it is defined in, nothing else: a caller keeps its cached code when only a callee in
another file changed, inlined into it or linked from that file's own cache (measured: an edited
callee still ran from the old object). So each such caller is a closure over
:func:`source_digest` of the files it takes code from (a bare ``digest`` statement in its body
keeps the cell), and numba's cache key changes with their source. Importing this module
imports nothing of numba.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from types import ModuleType

#: Each digest :func:`source_digest` returned, with the source files it covers
#: (``tests/ingest/test_cache_keys.py`` checks every cross-file caller holds one covering its
#: callees).
COVERED: dict[int, frozenset[Path]] = {}


def source_digest(modules: tuple[ModuleType, ...], extra: bytes = b"") -> int:
    """``extra`` and the source of ``modules`` as a non-negative int64 (numba closes over it).

    Args:
        modules: the modules whose compiled functions the caller inlines or links.
        extra: what else the caller freezes and numba's key misses (a table's digest).

    Returns:
        The first 63 bits of the SHA-256 of ``extra`` followed by each module's file.
    """
    files = [Path(m.__file__).resolve() for m in modules]
    h = hashlib.sha256(b"".join([extra, *(f.read_bytes() for f in files)]))
    digest = int.from_bytes(h.digest()[:8], "little") >> 1
    COVERED[digest] = frozenset(files)
    return digest

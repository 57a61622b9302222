"""Handing freed memory back to the operating system after, and during, phases that use much.

- glibc keeps the pages of freed ``malloc`` blocks mapped (one arena per thread that
  allocated), so after reading a run's files the process stays as large as the readers were
  though nothing of theirs is live, and the next phase (the replay) adds its own on top.
  ``malloc_trim(0)`` returns them (:func:`trim`): measured after ingesting fleet-1h 32x20000,
  527 -> 314 MiB resident (two reader threads), 473 -> 303 MiB (one).
- Arrow's default pool (mimalloc) keeps one heap per thread and purges freed pages only a
  second later, when that thread allocates again; ``release_unused`` collects the calling
  thread's heap only (:func:`release_arrow`).
- While files are read on two threads, the text blocks (4-10 MB, a new one for every few MB
  read) are allocated between the smaller buffers the writer keeps until a row group is
  written, and the arenas grow with the hours read (:func:`large_blocks_mapped`).

Elsewhere than glibc the glibc parts do nothing. The ingest's reader threads
(``forensics.readers.parallel``) and the replay's window threads (:mod:`replay.streaming`) both
use these, and :func:`usable_cores` to size their thread pools.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

#: ``mallopt`` parameter: requests of at least this many bytes get a mapping of their own.
_M_MMAP_THRESHOLD = -3
#: Mapped-block threshold while files are read on threads (:func:`large_blocks_mapped`).
READING_MMAP_BYTES = 4 << 20
#: ... and after: glibc's own upper bound for its dynamic threshold (what a long process ends
#: at anyway once it has freed one such block).
AFTER_MMAP_BYTES = 32 << 20
#: ``mallopt`` parameter: free memory at the top of a heap beyond this is handed back.
_M_TRIM_THRESHOLD = -1
#: The trim threshold after reading: what glibc's dynamic rule gives with the mapped-block
#: threshold at :data:`AFTER_MMAP_BYTES` (twice it). Setting that threshold ends the rule and
#: left the trim threshold at its 128 KiB default: a replay's freed ``(I, R)`` temporaries
#: (512 KiB a window of 64 ranks) were handed back and faulted in again, op after op (measured
#: on the replay of 64x100k: 560k -> 354k page faults, 0.4 s less system time); the replay
#: still trims between windows past a growth (:class:`TrimPast`).
AFTER_TRIM_BYTES = 2 * AFTER_MMAP_BYTES


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):   # not Linux
        return os.cpu_count() or 1


@functools.cache
def _libc() -> Any:
    try:
        libc = ctypes.CDLL(None)
        libc.malloc_trim, libc.mallopt   # noqa: B018  (glibc only)
        return libc
    except (OSError, AttributeError):
        return None


def trim() -> None:
    """Return the freed heap of every arena to the OS (glibc), else do nothing; and the
    calling thread's freed Arrow pages (:func:`release_arrow`).

    The ingest calls it when the files are read; the replay after each window, whose arrays
    are freed when the next is read: without it the resident size crept up window after
    window (~100 MB over a fleet hour, measured) though nothing was live."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
    release_arrow()


class TrimPast:
    """:func:`trim` once the resident size has grown more than ``growth`` bytes since the last
    trim (the first call trims), else only :func:`release_arrow`: a loop that frees and
    allocates about the same each round (a streamed replay's windows) then reuses its pages
    instead of faulting them in afresh, and its resident size stays within ``growth`` of what
    the last trim left. Where the resident size cannot be read (no ``/proc``), every call trims.

    Measured on fleet-1h 32x100k, the replay alone: trimming after every window faulted 680k
    pages in (3.2 s of system time); the arenas held 40-115 MiB freed between windows."""

    def __init__(self, growth: int):
        self.growth = growth
        self._base: int | None = None

    def __call__(self) -> None:
        rss = resident_bytes()
        if rss is None or self._base is None or rss > self._base + self.growth:
            trim()
            self._base = resident_bytes()
        else:
            release_arrow()


def resident_bytes() -> int | None:
    """This process's resident size (``/proc/self/statm``), or None where there is none."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def release_arrow() -> None:
    """Hand back the pages of Arrow buffers freed on the calling thread's heap, when Arrow's
    pool keeps a heap per thread (mimalloc; the system pool's ``release_unused`` would trim
    every arena, a cost for nothing here: that is :func:`trim`).

    A thread that read or wrote Parquet calls this before it idles or ends. Measured on
    fleet-1h 32x100k: Arrow's arena held 260-290 MiB resident during the replay while 25-60
    MiB were live; with the replay's threads releasing after each window, ~200 MiB."""
    pool = _per_thread_pool()
    if pool is not None:
        pool.release_unused()


@functools.cache
def _per_thread_pool() -> Any:
    """Arrow's default pool when it keeps a heap per thread (mimalloc), else None."""
    pool = pa.default_memory_pool()
    return pool if pool.backend_name == "mimalloc" else None


@contextlib.contextmanager
def large_blocks_mapped() -> Iterator[None]:
    """Blocks of :data:`READING_MMAP_BYTES` or more get mappings of their own meanwhile (glibc
    ``M_MMAP_THRESHOLD``), unmapped when freed, so they never leave holes in the arenas; after,
    the threshold is :data:`AFTER_MMAP_BYTES` (setting it ends glibc's dynamic threshold) and
    the trim threshold :data:`AFTER_TRIM_BYTES`.

    Measured reading fleet-1h on two threads (ingest alone): peak RSS 534 -> 489 MiB at
    32x20k and 609 -> 519 MiB at 32x100k (1.14x -> 1.06x), for ~1-4 s more system time at
    32x100k (fresh pages fault in)."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(_M_MMAP_THRESHOLD, READING_MMAP_BYTES)
    try:
        yield
    finally:
        if libc is not None:
            libc.mallopt(_M_MMAP_THRESHOLD, AFTER_MMAP_BYTES)
            libc.mallopt(_M_TRIM_THRESHOLD, AFTER_TRIM_BYTES)


__all__ = ["AFTER_MMAP_BYTES", "AFTER_TRIM_BYTES", "READING_MMAP_BYTES", "large_blocks_mapped", "release_arrow", "trim",
           "TrimPast", "resident_bytes", "usable_cores"]

"""Where a run's time goes: seconds per named stage, for ``forensics postmortem --timings``.

Two kinds of records, both kept by the one process-wide :data:`CLOCK`:

- a *phase* is a step of the pipeline's main thread (ingest, replay, report); phases follow one
  another, so their wall seconds add up to the run's. Each also has the process's CPU seconds
  while it ran (every thread's: the ingest reads on two threads, the replay decides on two);
- a *stage* is work done on whatever thread does it (reading a JSON file, building a window's
  frames, deciding a window, writing Parquet). Stages overlap across threads, so each adds up
  ``busy`` (wall seconds its threads spent in it) and ``cpu`` (their CPU seconds,
  ``time.thread_time``); a stage's busy seconds can exceed its phase's wall seconds.

A timed block costs two clock reads (about a microsecond): blocks are batches, windows and
files, never lines. Stages are timed where nothing else of theirs is timed (no nesting), so
their CPU seconds add up to what the timed threads spent.

Example:
    >>> with CLOCK.stage("frames"):                          # doctest: +SKIP
    ...     build()
    >>> CLOCK.report()["stages"]["frames"]["cpu"]            # doctest: +SKIP
    0.42
"""
from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


class StageClock:
    """Wall and CPU seconds per phase (main thread) and per stage (any thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._phases: dict[str, list[float]] = {}
        self._stages: dict[str, list[float]] = {}

    def reset(self) -> None:
        """Forget everything timed so far (a new run in the same process)."""
        with self._lock:
            self._phases.clear()
            self._stages.clear()

    def _add(self, table: dict[str, list[float]], name: str, wall: float, cpu: float) -> None:
        with self._lock:
            rec = table.setdefault(name, [0.0, 0.0, 0])
            rec[0] += wall
            rec[1] += cpu
            rec[2] += 1

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time a step of the pipeline: its wall seconds and the process's CPU seconds."""
        w, c = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self._add(self._phases, name, time.perf_counter() - w, time.process_time() - c)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time a block of work on the calling thread: its wall and CPU seconds."""
        w, c = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            self._add(self._stages, name, time.perf_counter() - w, time.thread_time() - c)

    def timed(self, name: str, items: Iterable[T]) -> Iterator[T]:
        """``items`` with the time spent producing each one (``next``) counted to ``name``:
        the reading of a streamed reader, not what its consumer does between items."""
        it = iter(items)
        while True:
            w, c = time.perf_counter(), time.thread_time()
            try:
                item = next(it)
            except StopIteration:
                self._add(self._stages, name, time.perf_counter() - w, time.thread_time() - c)
                return
            self._add(self._stages, name, time.perf_counter() - w, time.thread_time() - c)
            yield item

    def report(self) -> dict:
        """``{"phases": {name: {"wall", "cpu"}}, "stages": {name: {"busy", "cpu", "blocks"}}}``
        in the order first timed, seconds rounded to milliseconds."""
        with self._lock:
            return {
                "phases": {k: {"wall": round(w, 3), "cpu": round(c, 3)}
                           for k, (w, c, _) in self._phases.items()},
                "stages": {k: {"busy": round(w, 3), "cpu": round(c, 3), "blocks": int(n)}
                           for k, (w, c, n) in self._stages.items()},
            }


#: The process's clock: the readers, the frames, the replay and the pipeline time into it.
CLOCK = StageClock()

__all__ = ["CLOCK", "StageClock"]

"""Iteration windows: which stretches of a long run a figure draws, and where the gaps go.

A crash run can last 100k iterations while the story happens in a dozen of them. Figures draw
``±radius`` iterations around each interesting iteration (crash, leaks, skips), merge windows
that touch, and lay the segments side by side on a compressed x axis with a gap between them.

Example (radius 2, interesting iterations 10 and 50, run 0..99)::

    segments  (8, 12) (48, 52)
    x          0..4    7..11        (a gap of 2 columns marks the 35 hidden iterations)
"""
from __future__ import annotations

import dataclasses
from typing import Iterable, Sequence

import numpy as np

#: Iterations drawn either side of an interesting one.
DEFAULT_RADIUS = 12
#: A run no longer than this is drawn whole.
DEFAULT_MAX_FULL = 240
#: At most this many segments are drawn (the earliest interesting iterations win).
DEFAULT_MAX_SEGMENTS = 6
#: Empty x columns between two segments.
GAP_COLUMNS = 2


@dataclasses.dataclass(frozen=True)
class IterWindows:
    """Inclusive iteration segments drawn on one compressed x axis.

    Fields:
        segments: ``(first, last)`` iteration of each drawn stretch, ascending, disjoint.
        hidden: iterations left out before each segment after the first (same length - 1).
    """

    segments: tuple[tuple[int, int], ...]
    hidden: tuple[int, ...] = ()

    @property
    def offsets(self) -> list[int]:
        """x position of each segment's first iteration."""
        out, x = [], 0
        for first, last in self.segments:
            out.append(x)
            x += last - first + 1 + GAP_COLUMNS
        return out

    @property
    def width(self) -> int:
        """Number of x columns (segments plus gaps)."""
        if not self.segments:
            return 0
        return self.offsets[-1] + self.segments[-1][1] - self.segments[-1][0] + 1

    def position(self, iters: Iterable[int]) -> np.ndarray:
        """x position of each iteration, NaN for iterations outside every segment."""
        it = np.asarray(list(iters) if not isinstance(iters, np.ndarray) else iters, dtype=float)
        x = np.full(it.shape, np.nan)
        for (first, last), off in zip(self.segments, self.offsets):
            inside = (it >= first) & (it <= last)
            x[inside] = it[inside] - first + off
        return x

    def contains(self, iters: Iterable[int]) -> np.ndarray:
        return ~np.isnan(self.position(iters))

    def gap_positions(self) -> list[tuple[float, int]]:
        """``(x centre, hidden iterations)`` of each gap, for break markers."""
        out = []
        offs = self.offsets
        for i in range(1, len(self.segments)):
            prev_end = offs[i - 1] + self.segments[i - 1][1] - self.segments[i - 1][0]
            out.append(((prev_end + offs[i]) / 2.0, self.hidden[i - 1]))
        return out

    def ticks(self, per_segment: int = 5) -> tuple[list[float], list[str]]:
        """Tick positions and labels (real iteration numbers) for the compressed axis: round
        numbers (multiples of 1, 2, 5 x 10^k), at most ``per_segment`` per segment."""
        xs, labels = [], []
        for (first, last), off in zip(self.segments, self.offsets):
            step = round_step(last - first, per_segment)
            start = -(-first // step) * step
            for it in range(start, last + 1, step):
                xs.append(float(it - first + off))
                labels.append(str(int(it)))
        return xs, labels


def round_step(span: int, max_ticks: int = 5) -> int:
    """The smallest step in 1, 2, 5, 10, 20, 25, 50, ... giving at most ``max_ticks`` ticks."""
    span = max(int(span), 1)
    k = 1
    while True:
        for m in (1, 2, 5):
            step = m * k
            if span // step + 1 <= max_ticks:
                return step
        k *= 10


def choose_windows(iters: Sequence[int] | np.ndarray, focus: Iterable[int] = (), *,
                   radius: int = DEFAULT_RADIUS, max_full: int = DEFAULT_MAX_FULL,
                   max_segments: int = DEFAULT_MAX_SEGMENTS) -> IterWindows:
    """Pick the segments to draw.

    Args:
        iters: every iteration of the run (any order, duplicates allowed).
        focus: interesting iterations, most important first (crash, leaks, skips); only the
            first ``max_segments`` distinct windows are kept.
        radius: iterations drawn either side of each focus iteration.
        max_full: runs spanning at most this many iterations are drawn whole.
        max_segments: cap on the number of segments.

    Returns:
        The segments; with no focus in a long run, the last ``2 * radius + 1`` iterations
        (callers pass the peak-load iteration as a focus so a clean run shows its busiest part).
    """
    arr = np.asarray(iters, dtype=np.int64)
    if arr.size == 0:
        return IterWindows(())
    lo, hi = int(arr.min()), int(arr.max())
    if hi - lo + 1 <= max_full:
        return IterWindows(((lo, hi),))
    wanted: list[tuple[int, int]] = []
    for f in focus:
        f = int(f)
        if f < lo or f > hi:
            continue
        win = (max(lo, f - radius), min(hi, f + radius))
        if any(a <= f <= b for a, b in wanted):
            continue
        wanted.append(win)
        if len(wanted) >= max_segments:
            break
    if not wanted:
        wanted = [(max(lo, hi - 2 * radius), hi)]
    wanted.sort()
    merged: list[list[int]] = []
    for a, b in wanted:
        if merged and a <= merged[-1][1] + radius:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    segments = tuple((a, b) for a, b in merged)
    hidden = tuple(segments[i][0] - segments[i - 1][1] - 1 for i in range(1, len(segments)))
    return IterWindows(segments, hidden)

"""A dataset summary (:mod:`forensics.dataset.summary`) as plain text for a terminal."""
from __future__ import annotations

from collections import Counter

from forensics.dataset.schema import REFERENCE_TABLES, TABLES
from forensics.dataset.summary import ITER_TABLES, DatasetSummary
from forensics.input_kinds import OTHER_JSON

#: Beside an input of kind ``json`` (:data:`forensics.input_kinds.OTHER_JSON`).
VERBATIM_NOTE = "kept verbatim in unparsed: JSON with no IterationStats key, not read as stats"
#: At most this many inputs are listed by :func:`render_text`.
MAX_LISTED_INPUTS = 10


def compact_ranks(ranks: tuple[int, ...] | list[int]) -> str:
    """Ranks as ranges.

    Example:
        >>> compact_ranks([0, 1, 2, 3, 5, 7, 8])
        '0-3, 5, 7-8'
    """
    parts: list[str] = []
    start = prev = None
    for r in sorted(ranks):
        if start is None:
            start = prev = r
        elif r == prev + 1:
            prev = r
        else:
            parts.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = r
    if start is not None:
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ", ".join(parts)


def human_size(n: int) -> str:
    """Bytes for people: ``1.5 MB``."""
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"  # pragma: no cover


def render_text(s: DatasetSummary) -> str:
    """The summary as plain text for a terminal (fits one screen)."""
    out: list[str] = [f"dataset {s.path} (schema {s.schema_version}, adp-forensics {s.tool_version})"]
    kinds = Counter(k for _, k, _ in s.inputs)
    out.append(f"inputs: {len(s.inputs)} ("
               + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) + ")")
    width = max((len(n) for n, _, _ in s.inputs[:MAX_LISTED_INPUTS]), default=0)
    for name, kind, size in s.inputs[:MAX_LISTED_INPUTS]:
        out.append(f"  {name:<{width}}  {kind:<5}  {human_size(size)}"
                   + (f"  {VERBATIM_NOTE}" if kind == OTHER_JSON else ""))
    if len(s.inputs) > MAX_LISTED_INPUTS:
        out.append(f"  ... and {len(s.inputs) - MAX_LISTED_INPUTS} more")
    for r in s.refused:
        out.append(f"refused: {r}")
    n = len(s.ranks)
    out.append(f"ranks: {compact_ranks(s.ranks) or 'none'} ({n} rank{'' if n == 1 else 's'})")
    for t in ITER_TABLES:
        if t in s.iter_ranges:
            lo, hi = s.iter_ranges[t]
            out.append(f"iter range ({t}): {lo}..{hi}")
    out.append("rows:")
    for t in TABLES:
        if t not in REFERENCE_TABLES:
            out.append(f"  {t:<10} {s.rows.get(t, 0):>10}")
    if s.events_by_kind:
        out.append("events by kind:")
        kw = max(len(k) for k in s.events_by_kind)
        for k, n in s.events_by_kind.items():
            out.append(f"  {k:<{kw}} {n:>8}")
    if s.formats:
        out.append("iteration line formats: " + ", ".join(f"{f} {n}" for f, n in s.formats.items()))
    if s.frames_per_traceback:
        out.append("frames per traceback: " + ", ".join(
            f"{k} ({n} traceback{'' if n == 1 else 's'})" for k, n in s.frames_per_traceback.items()))
    if s.collector_formats:
        out.append("collector formats: " + ", ".join(
            f"{k} {n}" for k, n in s.collector_formats.items()))
    for r in s.runs:
        span = f"iter {r.iter_min}..{r.iter_max}" if r.iter_min is not None else "no frames"
        out.append(f"run {r.run}: build {r.build}, tp {r.tp_size}, {r.frames} frames "
                   f"from {r.ranks} ranks, {span}")
    return "\n".join(out)


__all__ = ["MAX_LISTED_INPUTS", "VERBATIM_NOTE", "compact_ranks", "human_size", "render_text"]

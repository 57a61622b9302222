"""Log times as Arrow timestamps, the text kept where it does not parse.

The times a log line carries are the logger's local clock with no zone: the TRT-LLM Python
logger's ``MM/DD/YYYY-HH:MM:SS``, Python ``logging``'s ``YYYY-MM-DD HH:MM:SS,mmm``, the
iteration line's ``timestamp = YYYY-MM-DD HH:MM:SS`` and a collector's naive ISO time. They
become ``timestamp[us]`` values read as that local clock (no zone is invented). A time that
does not parse (glog's ``MMDD HH:MM:SS.us`` has no year; a zoned RFC 3339 time is not the
logger's clock) stays verbatim in the ``*_text`` column beside it, null where it parsed.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

TYPE = pa.timestamp("us")
_NAIVE_ISO = r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?$"
_NULL = pa.scalar(None, pa.string())


def parse(text: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(times as ``timestamp[us]``, the text where it did not parse, else null).

    Log times repeat (every line of a second, on every rank): each distinct text is parsed
    once (dictionary encoding), then spread back.

    Example:
        >>> t, rest = parse(pa.array(["11/30/2026-12:00:01", "2025-06-28 17:32:17,461", "1130 x"]))
        >>> [str(v) for v in t.to_pylist()], rest.to_pylist()
        (['2026-11-30 12:00:01', '2025-06-28 17:32:17.461000', 'None'], [None, None, '1130 x'])
    """
    text = text.cast(pa.string())
    if len(text) < 64 or text.null_count == len(text):
        return _parse(text)
    enc = pc.dictionary_encode(text)
    times, rest = _parse(enc.dictionary)
    return times.take(enc.indices), rest.take(enc.indices)


def _parse(text: pa.Array) -> tuple[pa.Array, pa.Array]:
    text = text.cast(pa.string())
    if text.null_count == len(text):
        return pa.nulls(len(text), TYPE), pa.nulls(len(text), pa.string())
    times = None
    # whole-second forms first (one strptime each, the common case); the rest by regex
    # (IterationStats JSON prints MM-DD-YYYY HH:MM:SS)
    for fmt in ("%m/%d/%Y-%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S",
                "%m-%d-%Y %H:%M:%S"):
        t = pc.strptime(text, fmt, "us", error_is_null=True)
        times = t if times is None else pc.coalesce(times, t)
        if times.null_count == text.null_count:
            return times, pa.nulls(len(text), pa.string())
    left = pc.and_(pc.is_null(times), pc.fill_null(pc.match_substring_regex(text, _NAIVE_ISO),
                                                   False))
    if pc.any(left).as_py():
        iso = pc.if_else(left, text, _NULL)
        iso = pc.replace_substring(iso, ",", ".")
        iso = pc.replace_substring_regex(iso, r"(\.\d{6})\d+$", r"\1")  # ns -> us
        times = pc.coalesce(times, _cast_each_if_needed(iso))
    rest = pc.if_else(pc.is_valid(times), _NULL, text)
    return times, rest


def _cast_each_if_needed(iso: pa.Array) -> pa.Array:
    """``iso`` cast to timestamps; a value of the right shape but no real time (month 97)
    fails the whole cast, so then each value is cast alone and such a one is null."""
    try:
        return pc.cast(iso, TYPE)
    except pa.ArrowInvalid:
        out = []
        for v in iso:
            try:
                out.append(pc.cast(v, TYPE) if v.is_valid else pa.scalar(None, TYPE))
            except pa.ArrowInvalid:
                out.append(pa.scalar(None, TYPE))
        return pa.array([x.as_py() for x in out], TYPE)


def typed_stats(table: pa.Table) -> pa.Table:
    """A stats readers' table (``schema.STATS_READ``) as the dataset's ``stats``: ``timestamp``
    typed, the text that does not parse in ``timestamp_text``."""
    times, rest = parse(table.column("timestamp").combine_chunks())
    i = table.schema.get_field_index("timestamp")
    return table.set_column(i, "timestamp", times).append_column("timestamp_text", rest)

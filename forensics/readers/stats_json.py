"""Reading iteration-stats JSON (``IterationStats`` dicts) into the ``stats`` table.

Accepted layouts, streamed (memory does not grow with the file):

- a JSON array of objects, compact or pretty-printed across many lines: each object is one row,
  ``line`` its first line, ``line_end`` its last;
- JSON Lines (or objects simply concatenated, pretty-printed or not): one row per object.

Typed columns come from the camelCase keys (``numActiveRequests`` -> ``num_active_requests``,
``inflightBatchingStats.numContextRequests`` -> ``num_context_requests``, ``attentionDpRank`` ->
``rank``, ...; see :data:`TYPED_COLUMNS`). Every *other* numeric field (booleans as 0/1, list items
by index) is kept in the ``fields`` map under its dotted name (``kvCacheStats.usedNumBlocks``);
strings other than ``timestamp`` are not kept in columns (the line range still points at them).

Bad input, decided so that nothing is lost and a corrupt file is never half-believed:

- JSON Lines: a line that is not a JSON object goes to ``unparsed`` verbatim and reading goes on
  (a warning is logged);
- JSON array: a malformed object, or an element that is not an object, raises
  :class:`~forensics.errors.StatsFormatError` naming the file and line;
- the file ends inside an object or an unclosed array (a writer killed mid-dump, or a truncated
  ``.gz``/``.zst``): the complete objects are kept, the incomplete tail lines go to ``unparsed``,
  and one ``input_truncated`` error event (``line`` one past the last line read, a line that
  does not exist, as the log parser does) records it.

Speed: JSON Lines are read in blocks of whole lines, by a compiled byte scanner
(:mod:`forensics.readers.json_scan`) when the input is big enough and the scanner is ready
(``benchmarks/trace_ingest.py`` measures it); any other input, and any block the scanner cannot
reproduce exactly (a bad line, a key order that differs, escapes, ...), goes through the
per-object parser below, the scanner's specification, so rows, line numbers and ``unparsed``
are the same either way. On that path the blocks are views of the reader's buffer (decompressed
into it, never copied out of it).

Line accounting: lines outside every object (``[``, ``]``, blank lines) go to ``unparsed``, so
every line is the ``line`` of a row or inside a row's ``line``..``line_end``. A line that
carries several objects (a compact one-line array) is the line of each of them.
"""
from __future__ import annotations

import codecs
import itertools
import json
import logging
import math
import os
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from forensics.dataset.schema import EVENTS, STATS_READ, UNPARSED
from forensics.errors import InputError, StatsFormatError
from forensics.readers import json_scan
from forensics.readers.event_kinds import INPUT_TRUNCATED
from forensics.readers.json_object_lines import LineBlocks
from forensics.readers.sources import compression_of, content_size, decompressed_chunks, open_raw
from forensics.readers.stats_columns import FLOAT_COLUMNS, INT_BOUNDS, TYPED_COLUMNS, StatsBatch
from forensics.readers.surrogates import escaped
from forensics.readers.zstd_into import ZstdInto

logger = logging.getLogger(__name__)

#: Event kind written when a stats file ends early (the log parser's kind, same line rule).
TRUNCATED_KIND = INPUT_TRUNCATED

CHUNK_CHARS = 1 << 20
READ_BYTES = 1 << 20
#: An object may span at most this many characters before it is declared malformed.
MAX_OBJECT_CHARS = 256 << 20
BATCH_ROWS = 8192
#: Bytes of whole lines per block when the compiled scanner is off (each block goes through
#: the per-object parser).
BLOCK_BYTES = 2 << 20


def _flatten(obj: Any, prefix: str, out: dict[str, Any]) -> None:
    """Numeric leaves (raw int/float/bool) of a dict or list under dotted names, depth first.

    A stack of iterators instead of recursion: any depth ``json`` decodes flattens without a
    ``RecursionError`` (issue 13: 5,000-deep stats JSON aborted the ingest).
    """
    stack = [(prefix, iter(obj.items()) if type(obj) is dict else enumerate(obj))]
    while stack:
        pre, items = stack[-1]
        for k, v in items:
            t = type(v)
            if t is int or t is float or t is bool:
                out[f"{pre}{k}"] = v
            elif t is dict or t is list:
                stack.append((f"{pre}{k}.", iter(v.items()) if t is dict else enumerate(v)))
                break
        else:
            stack.pop()


def _as_float(v: Any) -> float | None:
    try:
        return float(v)
    except OverflowError:  # an int beyond float range: not a statistic anyone wrote
        return None


def flatten_numeric(obj: Any) -> dict[str, float]:
    """Every numeric leaf of a JSON object under its dotted name (bools as 0/1, lists by index).

    Example:
        >>> flatten_numeric({"iter": 3, "kvCacheStats": {"usedNumBlocks": 7}, "mode": "x"})
        {'iter': 3.0, 'kvCacheStats.usedNumBlocks': 7.0}
    """
    raw: dict[str, Any] = {}
    if isinstance(obj, (dict, list)):
        _flatten(obj, "", raw)
    return {k: f for k, v in raw.items() if (f := _as_float(v)) is not None}


def _typed_value(column: str, raw: Any) -> Any:
    """The value for a typed column, or None when ``raw`` does not fit it."""
    t = type(raw)
    if t is float:
        if column in FLOAT_COLUMNS:
            return raw
        if not math.isfinite(raw) or not raw.is_integer():
            return None
        raw = int(raw)
    elif t is not int:
        return None
    elif column in FLOAT_COLUMNS:
        return _as_float(raw)
    bound = INT_BOUNDS.get(column, 2**63 - 1)
    return raw if -bound - 1 <= raw <= bound else None


def stats_row(obj: dict[str, Any]) -> dict[str, Any]:
    """One ``stats`` row (without source/line) from one IterationStats dict.

    Example:
        >>> r = stats_row({"iter": 5, "attentionDpRank": 2, "numActiveRequests": 4,
        ...                "inflightBatchingStats": {"numContextRequests": 1},
        ...                "kvCacheStats": {"usedNumBlocks": 9}})
        >>> r["iter"], r["rank"], r["num_active_requests"], r["num_context_requests"], r["fields"]
        (5, 2, 4, 1, [('kvCacheStats.usedNumBlocks', 9.0)])
    """
    flat: dict[str, Any] = {}
    _flatten(obj, "", flat)
    row: dict[str, Any] = {}
    for key, column in TYPED_COLUMNS.items():
        value = flat.get(key)
        if value is not None:
            value = _typed_value(column, value)
            if value is not None:
                del flat[key]       # typed: not repeated in fields
        row[column] = value
    ts = obj.get("timestamp")
    row["timestamp"] = escaped(ts) if isinstance(ts, str) else None
    row["fields"] = [(escaped(k), f) for k, v in flat.items() if (f := _as_float(v)) is not None]
    return row


class _Rows:
    """Column buffers for the three tables, flushed as typed pyarrow tables."""

    def __init__(self, source: str):
        self.source = source
        self.stats: dict[str, list] = {n: [] for n in STATS_READ.names}
        self.unparsed: dict[str, list] = {n: [] for n in UNPARSED.names}
        self.events: list[dict[str, Any]] = []

    def add_stats(self, line: int, line_end: int, obj: dict) -> None:
        row = stats_row(obj)
        row.update(source=self.source, line=line, line_end=line_end)
        for n, col in self.stats.items():
            col.append(row[n])

    def add_unparsed(self, line: int, text: str) -> None:
        self.unparsed["source"].append(self.source)
        self.unparsed["line"].append(line)
        self.unparsed["text"].append(text[:-1] if text.endswith("\r") else text)

    def add_event(self, line: int, line_end: int, message: str, kind: str = TRUNCATED_KIND) -> None:
        self.events.append({"source": self.source, "line": line, "line_end": line_end,
                            "severity": "E", "kind": kind, "message": message})

    def size(self) -> int:
        return len(self.stats["line"]) + len(self.unparsed["line"]) + len(self.events)

    def flush(self) -> StatsBatch:
        batch = StatsBatch(
            stats=pa.table(self.stats, schema=STATS_READ),
            events=pa.Table.from_pylist(self.events, schema=EVENTS),
            unparsed=pa.table(self.unparsed, schema=UNPARSED),
        )
        for col in (*self.stats.values(), *self.unparsed.values()):
            col.clear()
        self.events = []
        return batch


class _Text:
    """A growing window on the decoded text, with line numbers of positions."""

    def __init__(self, chunks: Iterator[tuple[bytes, int, str | None]],
                 progress: Callable[[int], None] | None, start_line: int = 1):
        self.chunks = chunks
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.progress = progress
        self.buf = ""
        self.eof = False
        self.truncated: str | None = None  # decompression error message
        self._ref_pos = 0
        self._ref_line = start_line
        self.start_line = start_line

    def fill(self) -> bool:
        """Read one more chunk; False at end of input."""
        while not self.eof:
            data, consumed, error = next(self.chunks, (b"", 0, None))
            if self.progress is not None and consumed:
                self.progress(consumed)
            if error is not None:
                self.truncated = error
            end = error is not None or (not data and not consumed)
            chunk = self.decoder.decode(data, final=end)
            if end:
                self.eof = True
            if chunk:
                self.buf += chunk
                return True
        return False

    def line_at(self, pos: int) -> int:
        """1-based line of ``pos``; positions must be asked in non-decreasing order."""
        self._ref_line += self.buf.count("\n", self._ref_pos, pos)
        self._ref_pos = pos
        return self._ref_line

    def trim(self, keep_from: int) -> int:
        """Drop text before ``keep_from`` when worthwhile; returns how much was dropped."""
        if keep_from < CHUNK_CHARS or keep_from < len(self.buf) // 2:
            return 0
        keep_from = min(keep_from, self._ref_pos)
        self.buf = self.buf[keep_from:]
        self._ref_pos -= keep_from
        return keep_from


_WS = " \t\r\n\ufeff"


def read_stats(path: str | os.PathLike, source: str, *,
               progress: Callable[[int], None] | None = None) -> Iterator[StatsBatch]:
    """Stream an iteration-stats JSON file into ``stats`` (and ``unparsed``/``events``) batches.

    Args:
        path: the file (plain, gzip or zstd, sniffed by content).
        source: the name recorded in the ``source`` column.
        progress: called with the on-disk (compressed) bytes consumed since its last call, as
            the log parser does, so a caller can drive a bar whose total is the file size.

    Raises:
        StatsFormatError: a malformed object inside a JSON array (file and line named).
        InputError: the file cannot be opened.
    """
    comp = compression_of(path)
    try:
        raw = open_raw(path)
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", path=source) from None
    with raw:
        native = json_scan.enabled(content_size(path))
        if comp == "zstd":     # decompressed straight into the blocks' buffer
            direct = ZstdInto(path, raw, progress)
            yield from _read(direct.chunks(READ_BYTES), source, None, native, reader=direct)
            return
        chunks = decompressed_chunks(raw, comp, READ_BYTES)
        yield from _read(chunks, source, progress, native, reader=raw if comp is None else None)


def _read(chunks: Iterator[tuple[bytes, int, str | None]], source: str,
          progress: Callable[[int], None] | None, native: bool = False,
          reader: Any = None) -> Iterator[StatsBatch]:
    """JSON Lines in blocks of whole lines (by :mod:`json_scan` when ``native``, else and when
    it declines a block by the per-object parser, :func:`_parse`); anything else, and the tail
    after the last newline, through the per-object parser. ``reader``: the plain file ``chunks`` reads
    (or the :class:`ZstdInto` giving ``chunks``), read straight into the blocks' buffer
    (``chunks`` then reads what the blocks did not)."""

    block_bytes = json_scan.BLOCK_BYTES if native else BLOCK_BYTES
    error: list[str] = []
    done: list[bool] = []

    def data() -> Iterator[bytes]:
        for chunk, consumed, err in chunks:
            if progress is not None and consumed:
                progress(consumed)
            if err is not None:
                error.append(err)         # kept before the chunk is handed on
            if chunk:
                yield chunk
            if err is not None:
                break
        done.append(True)

    # native: blocks lent from the reader's buffer, not copied out of it (3.3 GB at 64 ranks
    # x 100k iterations); a block the scanner declines is copied for the per-object parser
    blocks = LineBlocks(reader=reader, progress=progress, read_bytes=block_bytes, lent=native) \
        if reader is not None else LineBlocks(data())
    line = 1              # the line of the first byte not taken
    layout = None         # "lines" once the first value is an object, else "other"
    declined = b""        # a lent block (taken) that the per-object parser reads from
    while layout != "other":
        if layout is None:
            first = blocks.first_byte()
            if first is not None:
                layout = "lines" if first == ord("{") else "other"
                continue
            if blocks.eof:
                break
            blocks.fill(blocks.available() + 1)
            continue
        blocks.fill(block_bytes)
        if not blocks.available():
            break                          # end of input
        cut = blocks.cut(block_bytes)
        if not cut:
            break              # no newline in a whole block: per-object from here on
        block = blocks.lend(cut) if blocks.lent else blocks.peek(cut)
        batches = _block(block, line, source, native)
        if batches is None:
            if blocks.lent:
                declined = bytes(block)
            break              # an object runs past the block: per-object from here on
        if not blocks.lent:
            blocks.skip(cut)
        line += json_scan.newlines(block) if native else block.count(b"\n")
        yield from batches
    rest = [(b, 0, None) for b in (declined + blocks.rest(),) if b]
    if blocks.eof and getattr(reader, "error", None) is not None:
        error.append(reader.error)
    if error:
        rest.append((b"", 0, error[0]))
    text = _Text(itertools.chain(rest, () if error or done or blocks.eof else chunks), progress,
                 start_line=line)
    yield from _parse(text, _Rows(source), source, array_allowed=layout != "lines")


class _Straddle(Exception):
    """A block's last object continues past the block (a multi-line object)."""


def _block(block: bytes | memoryview, line: int, source: str, native: bool) -> list[StatsBatch] | None:
    """The batches of one block of whole lines starting at ``line``: by :mod:`json_scan` when
    ``native`` and it takes the block, else per object (bad lines to ``unparsed``); None when an
    object continues past the block."""
    fast = json_scan.stats(block, line, source) if native else None
    if fast is not None:
        return [fast]
    text = _Text(iter([(bytes(block), 0, None)]), None, start_line=line)
    try:
        return list(_parse(text, _Rows(source), source, array_allowed=False, final=False))
    except _Straddle:
        return None


def _parse(text: _Text, rows: _Rows, source: str, *, array_allowed: bool = True,
           final: bool = True) -> Iterator[StatsBatch]:
    """The per-object parser from ``text.start_line`` on; ``final=False`` (a block of whole lines
    of a larger file) raises :class:`_Straddle` instead of reporting an incomplete tail."""
    decoder = json.JSONDecoder()
    pos = 0
    covered = text.start_line - 1  # last line covered by a row
    gap_pos = 0          # text after the last row's end (or a skipped bad line) starts here
    gap_at_line_start = True
    depth_array = False  # inside a top-level JSON array
    # array_allowed: only the file's first value may be an array; later '[' is a bad line

    def flush_gap(upto: int, first_line_of_upto: int | None) -> None:
        """Send whole lines between the last covered line and ``upto`` to unparsed."""
        region = text.buf[gap_pos:upto]
        if not gap_at_line_start:
            nl = region.find("\n")
            if nl < 0:
                return
            region = region[nl + 1:]
        parts = region.split("\n")
        if first_line_of_upto is not None:
            parts = parts[:-1]          # the head of the line where the next row starts
        elif parts and parts[-1] == "":
            parts = parts[:-1]          # the file ended with a newline
        for i, part in enumerate(parts):
            rows.add_unparsed(covered + 1 + i, part)

    while True:
        # skip whitespace, reading more as needed
        while True:
            n = len(text.buf)
            while pos < n and text.buf[pos] in _WS:
                pos += 1
            if pos < n or not text.fill():
                break
        if pos >= len(text.buf):
            break
        c = text.buf[pos]
        if depth_array and c == ",":
            pos += 1
            continue
        if depth_array and c == "]":
            depth_array = False
            pos += 1
            continue
        if c == "[" and array_allowed:
            depth_array = True
            array_allowed = False
            pos += 1
            continue
        array_allowed = False
        if c == "{":
            obj, end, error = _decode(decoder, text, pos)
        else:
            obj, end, error = None, pos, ("element is not a JSON object" if depth_array
                                          else "line is not a JSON object")
        if obj is not None:
            start_line = text.line_at(pos)
            end_line = text.line_at(end - 1)
            if start_line > covered + 1:
                flush_gap(pos, start_line)
            rows.add_stats(start_line, end_line, obj)
            covered = max(covered, end_line)
            pos = gap_pos = end
            gap_at_line_start = False
        elif error == "eof":
            break                      # incomplete tail: handled below
        elif depth_array:
            line = text.line_at(min(end, len(text.buf)))
            raise StatsFormatError(f"malformed IterationStats JSON array: {error}", path=source,
                                   line=line, hint="a JSON array must hold complete objects; "
                                   "JSON Lines files keep going past a bad line")
        else:
            # JSON Lines: the bad text up to the end of its line goes to unparsed.
            while text.buf.find("\n", pos) < 0 and text.fill():
                pass
            nl = text.buf.find("\n", pos)
            stop = len(text.buf) if nl < 0 else nl + 1
            bad_line = text.line_at(pos)
            logger.info("%s:%d: not a JSON object (%s); kept in unparsed", source, bad_line, error)
            if bad_line > covered:
                flush_gap(stop, None)
                covered = bad_line
            pos = gap_pos = stop
            gap_at_line_start = nl >= 0
        if rows.size() >= BATCH_ROWS:
            yield rows.flush()
        dropped = text.trim(gap_pos)
        pos -= dropped
        gap_pos -= dropped

    incomplete = pos < len(text.buf) or depth_array
    if incomplete and not final:
        raise _Straddle()
    # An empty text after earlier lines starts after their newline.
    ends_nl = text.buf.endswith("\n") if text.buf else text.start_line > 1
    last_line = text.line_at(len(text.buf)) - (1 if ends_nl else 0)
    flush_gap(len(text.buf), None)   # everything after the last covered line is unparsed
    if text.truncated is not None or incomplete:
        reason = (f"decompression stopped: {text.truncated}" if text.truncated is not None
                  else "the file ends inside a JSON object or array")
        where = last_line + 1   # one past the last line read, as for truncated logs
        rows.add_event(where, where, f"truncated stats input: {reason}; complete objects kept",
                       getattr(text.truncated, "kind", TRUNCATED_KIND))
        logger.warning("%s:%d: %s", source, where, reason)
    if rows.size():
        yield rows.flush()


def _decode(decoder: json.JSONDecoder, text: _Text, pos: int) -> tuple[Any, int, str | None]:
    """Decode the object at ``pos``: (object, end, None), (None, where, message) or (None, pos, "eof")."""
    while True:
        try:
            obj, end = decoder.raw_decode(text.buf, pos)
            return obj, end, None
        except json.JSONDecodeError as e:
            # The decoder stopped at the end of the window: read more unless the object is
            # already absurdly long. A newline after the error means the error is real (JSON
            # strings cannot hold a raw newline, so a cut string has none after it).
            if "\n" not in text.buf[e.pos:] and len(text.buf) - pos < MAX_OBJECT_CHARS:
                if text.fill():
                    continue
                return None, pos, "eof"
            return None, e.pos, e.msg
        except RecursionError:
            return None, pos, "object nested too deeply"


__all__ = ["StatsBatch", "TYPED_COLUMNS", "TRUNCATED_KIND", "flatten_numeric", "stats_row",
           "read_stats"]

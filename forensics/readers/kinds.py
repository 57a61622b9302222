"""What an input is: which files a directory contributes, and which reader each file needs.

Kinds:

- ``log``: an executor text log (anything textual that is not one of the two below);
- ``stats``: iteration-stats JSON, a JSON array of objects or JSON Lines of objects;
- ``trace``: a request-state trace, v1 or v2 (``traces/FORMAT.md``), JSON Lines whose first record is
  ``{"kind": "run", "format": "adp-trace", ...}``.

The kind comes from the decompressed content, never from the name: a ``.txt`` holding JSON Lines
of IterationStats is read as stats. Names matter only when walking a directory (which files to
consider at all, see :func:`recognised`).
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

KINDS = ("log", "stats", "trace")

#: Extensions (before an optional compression suffix) a directory walk picks up.
TEXT_EXTENSIONS = frozenset({".log", ".txt", ".out", ".err", ".stdout", ".stderr",
                             ".json", ".jsonl", ".ndjson"})
#: Compression suffixes allowed after a text extension (``rank0.log.gz``).
COMPRESSION_EXTENSIONS = frozenset({".gz", ".zst", ".zstd"})

#: ``kind`` values of trace records (traces/FORMAT.md).
TRACE_RECORD_KINDS = frozenset({"run", "frame", "note"})

_ARRAY_START = re.compile(r"\[\s*(\{|\]|$)")


def recognised(path: str | os.PathLike) -> bool:
    """True when a directory walk should ingest this file.

    A file is recognised when its name, less one ``.gz``/``.zst``/``.zstd`` suffix, ends with one
    of :data:`TEXT_EXTENSIONS`, and it is not hidden (leading dot). Files named explicitly on the
    command line are always read, whatever their name.

    Example:
        >>> [recognised(n) for n in ("rank0.log.zst", "stats.jsonl", "core.1234", ".x.log")]
        [True, True, False, False]
    """
    name = Path(path).name
    if name.startswith("."):
        return False
    stem, ext = os.path.splitext(name.lower())
    if ext in COMPRESSION_EXTENSIONS:
        ext = os.path.splitext(stem)[1]
    return ext in TEXT_EXTENSIONS


def head_after_nul_run(path: str | os.PathLike, head: bytes) -> bytes:
    """The first bytes after a leading run of NUL bytes (``head`` itself when it has none).

    ``logrotate copytruncate`` leaves a NUL-filled hole (as long as the old log) at the start
    of a log still being written; the text after it is still a log, so the kind is judged on
    that text. A file of NULs only gives ``b"\\0"`` (binary).
    """
    if not head.startswith(b"\0"):
        return head
    from forensics.readers.sources import SNIFF_BYTES, open_binary

    try:
        with open_binary(path) as f:
            while chunk := f.read(1 << 20):
                rest = chunk.lstrip(b"\0")
                if rest:
                    return (rest + f.read(SNIFF_BYTES))[:SNIFF_BYTES]
    except Exception:  # decompression errors: judged on the head as read
        return head
    return b"\0"


def nul_padded_text(head: bytes) -> bool:
    """Text with NUL runs in it (more copytruncate holes): read as a log when ``--kind log``
    says so, although NULs otherwise mark a binary file."""
    from forensics.readers.sources import looks_binary

    rest = head.replace(b"\0", b"")
    return bool(rest) and not looks_binary(rest)


def first_json_object(head_text: str) -> dict | None:
    """The first non-blank line parsed as a JSON object, or None (not JSON, or not an object)."""
    for line in head_text.splitlines():
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):   # nested too deep: the reader says where
            return None
        return value if isinstance(value, dict) else None
    return None


def detect_kind(head_text: str) -> str:
    """The kind of an input from its first decompressed characters.

    - a JSON array whose first element is an object (or an empty array): ``stats``;
    - first non-blank line a JSON object: ``trace`` if it is an adp-trace run record (decided by
      the trace reader's ``is_trace``) or any trace record (``"kind": "frame"``, so the reader
      reports the missing run record), else ``stats``;
    - a Docker json-file record (``{"log": ..., "stream": ..., "time": ...}``): ``log``;
    - anything else: ``log`` (log lines start with ``[MM/DD/...]`` or text, not ``[{``).

    Example:
        >>> detect_kind('[\\n  {"iter": 3, "numActiveRequests": 1}')
        'stats'
        >>> detect_kind('{"kind": "run", "format": "adp-trace", "version": 1}\\n')
        'trace'
        >>> detect_kind('[11/30/2026-10:00:00] [TRT-LLM] [I] iter = 3, ...')
        'log'
    """
    text = head_text.lstrip("\ufeff \t\r\n")
    if text.startswith("[") and _ARRAY_START.match(text):
        return "stats"
    if text.startswith("{"):
        if _is_trace(head_text):
            return "trace"
        first = first_json_object(head_text)
        if first is not None and first.get("kind") in TRACE_RECORD_KINDS:
            return "trace"   # a trace without its run record: the trace reader says so
        if text.startswith('{"log":') or (first is not None and isinstance(first.get("log"), str)
                                          and ("stream" in first or "time" in first)):
            return "log"     # Docker json-file: each record carries one log line
        # A first line that is not a complete JSON object (pretty-printed JSON Lines do not
        # exist) still reads best as stats: the stats reader names the bad line.
        return "stats"
    return "log"


def _is_trace(head_text: str) -> bool:
    try:
        from forensics.readers.trace_v1 import is_trace
    except ImportError:  # pragma: no cover - the trace reader is part of the package
        first = first_json_object(head_text)
        return bool(first) and first.get("kind") == "run" and first.get("format") == "adp-trace"
    try:
        return is_trace(head_text)
    except RecursionError:   # a first line nested too deep is no run record
        return False


__all__ = ["KINDS", "TEXT_EXTENSIONS", "COMPRESSION_EXTENSIONS", "recognised", "detect_kind",
           "head_after_nul_run", "nul_padded_text"]

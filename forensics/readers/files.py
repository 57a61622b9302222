"""One input file: found (:func:`discover`), classified (:func:`classify`) and streamed into a
dataset writer (:func:`ingest_file`), with the cross-file checks of traces (:class:`TraceRuns`).
The serial ingest (:func:`forensics.readers.ingest`), its reader processes and threads
(:mod:`forensics.readers.parallel`) and the ingest on a Dask cluster
(:mod:`forensics.readers.on_cluster`) all go through these."""
from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from forensics.dataset.schema import META_FILE, PARTITION_BY
from forensics.dataset.writer import DatasetWriter
from forensics.errors import BinaryInputError, InputError, TraceFormatError
from forensics.output_dir import MANIFEST
from forensics.readers.frame_keys import FrameKeys
from forensics.readers.kinds import (OTHER_JSON, detect_kind, head_after_nul_run, nul_padded_text,
                                     recognised)
from forensics.readers.meta import InputFingerprint, fingerprint
from forensics.readers.sources import display_name, head_bytes, looks_binary, name_bytes_hex
from forensics.readers.verbatim import read_verbatim
from replay.stage_clock import CLOCK

logger = logging.getLogger(__name__)

PathLike = str | os.PathLike

#: Why JSON that is neither stats nor a trace is not read as stats.
NOT_STATS_REASON = ("JSON whose first object has no IterationStats key (iter, timestamp, "
                    "numActiveRequests, ...): not an iteration-stats file")


@dataclass(frozen=True)
class RefusedInput:
    """An input that was not ingested.

    Attributes:
        name: the path as given.
        reason: why (``no such file or directory``, ``binary file ...``).
    """

    name: str
    reason: str

    def __str__(self) -> str:
        return f"{self.name}: {self.reason}"


@dataclass(frozen=True)
class Candidate:
    path: Path
    name: str
    named: bool = True      # given by the user, not found by a directory walk


def discover(inputs: Iterable[PathLike], *, exclude: PathLike | None = None
             ) -> tuple[list[Candidate], list[RefusedInput], list[str]]:
    """The files to ingest, the refused paths and the skipped names, in a stable order.

    Args:
        inputs: files or directories, in the order given.
        exclude: a directory not to descend into (the output dataset).
    """
    files: list[Candidate] = []
    refused: list[RefusedInput] = []
    skipped: list[str] = []
    seen: set[Path] = set()
    excluded = Path(exclude).resolve() if exclude is not None else None

    def add(path: Path, name: str, named: bool) -> None:
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            files.append(Candidate(path, name, named))

    for inp in inputs:
        path = Path(inp)
        name = display_name(inp)
        if path.is_dir() and (path / META_FILE).is_file():
            refused.append(RefusedInput(name, "is a dataset, not raw input (open it with "
                                              "forensics.load or `forensics summary`)"))
        elif path.is_dir() and (path / MANIFEST).is_file():
            refused.append(RefusedInput(name, "is a report of this tool, not raw input"))
        elif path.is_dir():
            found = False

            def unreadable(e: OSError) -> None:
                # An entry the walk cannot list is refused and reported; the walk goes on.
                where = e.filename if e.filename is not None else inp
                refused.append(RefusedInput(display_name(where),
                                            f"cannot list directory: {e.strerror or e}"))

            for root, dirs, names in os.walk(path, onerror=unreadable):
                root_path = Path(root)
                kept = []
                for d in sorted(dirs):
                    if d.startswith(".") or (excluded is not None
                                             and (root_path / d).resolve() == excluded):
                        continue
                    if _tool_output(root_path / d):
                        # a dataset or a report this tool wrote, wherever its -o was
                        skipped.append(display_name(root_path / d) + os.sep)
                        continue
                    kept.append(d)
                dirs[:] = kept
                for n in sorted(names):
                    child = root_path / n
                    child_name = display_name(child)
                    if recognised(n) and child.is_file():
                        add(child, child_name, False)
                        found = True
                    elif not n.startswith("."):
                        skipped.append(child_name)
            if not found:
                logger.warning("%s: no recognised input file in directory", name)
        elif path.is_file():
            add(path, name, True)
        elif path.exists():
            refused.append(RefusedInput(name, "not a regular file or directory"))
        else:
            refused.append(RefusedInput(name, "no such file or directory"))
    return files, refused, skipped


def _tool_output(directory: Path) -> bool:
    """Whether ``directory`` is an output of this tool: a dataset (``_meta.json``) or a report
    directory (its manifest, :data:`forensics.output_dir.MANIFEST`)."""
    try:
        return (directory / META_FILE).is_file() or (directory / MANIFEST).is_file()
    except OSError:     # not searchable: the walk reports the directory when it lists it
        return False


def check_readable(cand: Candidate) -> None:
    """Refuse a file that cannot be opened (permissions, a vanished entry) before reading."""
    try:
        with open(cand.path, "rb") as f:
            f.read(1)
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", path=cand.name) from None


def classify(path: PathLike, *, kind: str | None = None) -> str:
    """The kind of one file (``log``/``stats``/``trace``); raises for a binary file.

    Raises:
        BinaryInputError: the file is not text.
    """
    head = head_after_nul_run(path, head_bytes(path))
    if looks_binary(head) and not (kind == "log" and nul_padded_text(head)):
        raise BinaryInputError("binary file, not a text log, JSON or trace; refused", path=str(path))
    if kind is not None:
        return kind
    return detect_kind(head.decode("utf-8", errors="replace"))


class TraceRuns:
    """Cross-file checks for traces: per-rank files of one run must agree and not overlap."""

    def __init__(self) -> None:
        self._config: dict[str, tuple[str, str, int]] = {}
        self._keys: dict[str, FrameKeys] = {}   # frame keys of every file of each run
        self._tp: dict[str, int] = {}
        self._current: str | None = None  # run of the trace being read (batches after the first)

    @property
    def current(self) -> str | None:
        """The run of the trace being read (its run record's key), once its first batch was
        checked: every frame and request row of its batches belongs to it."""
        return self._current

    def check(self, tables: Any, source: str) -> None:
        """Check one batch of :func:`~forensics.readers.trace_v1.iter_trace` (the first holds
        the run record; later batches belong to the same run)."""
        if tables.runs.num_rows:
            run = tables.runs.column("run")[0].as_py()
            record = json.loads(tables.runs.column("record_json")[0].as_py())
            record.pop("rank", None)
            config = json.dumps(record, sort_keys=True)
            line = tables.runs.column("line")[0].as_py()
            if run in self._config and self._config[run][0] != config:
                first = self._config[run]
                raise TraceFormatError(
                    f"run record of run {run!r} differs from the one in {first[1]}:{first[2]}",
                    path=source, line=line, hint="per-rank files of one run share one run record")
            self._config.setdefault(run, (config, source, line))
            self._tp.setdefault(run, int(tables.runs.column("tp_size")[0].as_py()))
            self._current = run
        if tables.frames.num_rows == 0 or self._current is None:
            return
        run = self._current
        iters = tables.frames.column("iter").to_numpy(zero_copy_only=False).astype(np.int64)
        ranks = tables.frames.column("rank").to_numpy(zero_copy_only=False).astype(np.int64)
        keys = iters * self._tp[run] + ranks     # ranks < tp_size: the reader checked
        seen = self._keys.setdefault(run, FrameKeys())
        dup = seen.hits(keys)
        if dup.any():
            i = int(np.argmax(dup))
            raise TraceFormatError(
                f"duplicate frame (iter {int(iters[i])}, rank {int(ranks[i])}) of run {run!r}: "
                "another input of this run has it", path=source,
                line=tables.frames.column("line")[i].as_py())
        seen.add(keys)


def _write_file(writer: DatasetWriter, cand: Candidate, kind: str, traces: TraceRuns,
                progress: Callable[[int], None] | None) -> None:
    """Stream one input into the writer."""
    if kind == "log":
        from forensics.readers.executor_log import parse_executor_log

        for batch in CLOCK.timed("log read", parse_executor_log(cand.path, cand.name,
                                                                 progress=progress)):
            with CLOCK.stage("dataset write"):
                writer.write("iterations", batch.iterations)
                writer.write("events", batch.events)
                writer.write("unparsed", batch.unparsed)
                writer.write("traceback_frames", batch.traceback_frames)
    elif kind == "stats":
        from forensics.readers.stats_json import read_stats
        from forensics.readers.timestamps import typed_stats

        for sbatch in CLOCK.timed("stats read", read_stats(cand.path, cand.name,
                                                           progress=progress)):
            with CLOCK.stage("dataset write"):
                writer.write("stats", typed_stats(sbatch.stats))
                writer.write("events", sbatch.events)
                writer.write("unparsed", sbatch.unparsed)
    elif kind == "trace":
        from forensics.readers.trace_v1 import iter_trace

        # Streamed in batches: memory stays flat however long the trace (the writer discards
        # everything if a later line breaks the format).
        for tables in CLOCK.timed("trace read", iter_trace(cand.path, cand.name,
                                                           progress=progress)):
            traces.check(tables, cand.name)
            with CLOCK.stage("dataset write"):
                for name in ("runs", "frames", "requests", "events", "unparsed"):
                    writer.write(name, getattr(tables, name),
                                 part=traces.current if name in PARTITION_BY else None)
    elif kind == OTHER_JSON:
        for unparsed, events in read_verbatim(cand.path, cand.name, progress=progress):
            writer.write("unparsed", unparsed)
            writer.write("events", events)
    else:  # pragma: no cover - kinds are validated before
        raise InputError(f"unknown input kind {kind!r}", path=cand.name)


def ingest_file(writer: DatasetWriter, cand: Candidate, kind: str, traces: TraceRuns,
                 advance: Callable[[int], None] | None, reads: dict) -> InputFingerprint:
    """Stream one input into ``writer``; its fingerprint (of the bytes the reader read)."""
    logger.info("ingesting %s as %s", cand.name, kind)
    _write_file(writer, cand, kind, traces, advance)
    # The bytes the reader actually read, hashed as it read them (a file still
    # growing, or a read stopped by a corrupt block, is described as read).
    digest = reads.get(os.fspath(cand.path))
    fp = (fingerprint(cand.path, cand.name, kind) if digest is None else
          InputFingerprint(cand.name, digest.size, digest.xxh3_128, kind))
    return dataclasses.replace(fp, name_hex=name_bytes_hex(cand.path))


__all__ = ["NOT_STATS_REASON", "Candidate", "RefusedInput", "TraceRuns", "check_readable",
           "classify", "discover", "ingest_file"]

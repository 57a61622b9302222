"""Ingest: executor logs, iteration-stats JSON and request-state traces into one Parquet dataset.

Library entry points:

- :func:`ingest` (``forensics ingest INPUT... -o DATASET``): read every input, write the dataset
  atomically, return an :class:`IngestReport`;
- :func:`as_dataset`: a loaded dataset from a dataset directory or from raw inputs (ingested into
  a cache directory, reused while the inputs are unchanged); what replay and postmortem call.

Inputs are files or directories. A directory contributes every *recognised* file below it,
recursively, in sorted order: a name ending in ``.log .txt .out .err .stdout .stderr .json
.jsonl .ndjson``, optionally followed by ``.gz``/``.zst``/``.zstd`` (see
:func:`forensics.ingest.kinds.recognised`); hidden files and directories and this tool's own
outputs, wherever ``-o`` put them (datasets: ``_meta.json``; report directories: their manifest
``.forensics-output.json``), are skipped and listed in ``skipped``. A file named explicitly is
always read. The kind of each file (``log``, ``stats``, ``trace``) comes from its decompressed
content (:func:`forensics.ingest.kinds.detect_kind`) unless ``kind=`` forces one for all; JSON
that is neither (no IterationStats key in its first object) is refused by a walk, with the
reason, and kept verbatim in ``unparsed`` when named explicitly (kind ``json``).

Bad inputs: a missing path or a binary (non-text) file is refused (listed in
``IngestReport.refused`` and ``_meta.json``) while the others are still ingested; a trace or a
stats JSON array that breaks its format stops the ingest with an error naming the file and line,
and no dataset is written (a half-read trace would mislead a replay).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from forensics import __version__
from forensics.callable_module import make_module_callable
from forensics.dataset.store import META_FILE, Dataset, DatasetWriter
from forensics.errors import DatasetError, InputError, TraceFormatError
from forensics.ingest.frame_keys import FrameKeys
from forensics.ingest.kinds import (KINDS, OTHER_JSON, detect_kind, head_after_nul_run,
                                    nul_padded_text, recognised)
from forensics.ingest.meta import InputFingerprint, fingerprint, identities
from forensics.ingest.sources import (
    display_name,
    head_bytes,
    looks_binary,
    name_bytes_hex,
    recording_reads,
)
from forensics.output_dir import MANIFEST

if TYPE_CHECKING:
    from forensics.report.summary import DatasetSummary

logger = logging.getLogger(__name__)

PathLike = str | os.PathLike

#: Why JSON that is neither stats nor a trace is not read as stats.
NOT_STATS_REASON = ("JSON whose first object has no IterationStats key (iter, timestamp, "
                    "numActiveRequests, ...): not an iteration-stats file")

#: Inputs smaller than this in total ingest in moments: no progress bar.
PROGRESS_MIN_BYTES = 8 << 20


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
class IngestReport:
    """What one ingest did.

    Attributes:
        path: the dataset directory written.
        inputs: fingerprints of the ingested files, in ingest order.
        refused: inputs not ingested (missing or binary); non-empty means exit code 2 in the CLI.
        skipped: files a directory walk passed over (not recognised by name).
        rows: rows written per table.
        summary: the :class:`~forensics.report.summary.DatasetSummary` of the new dataset.
    """

    path: Path
    inputs: tuple[InputFingerprint, ...]
    refused: tuple[RefusedInput, ...] = ()
    skipped: tuple[str, ...] = ()
    rows: Mapping[str, int] = field(default_factory=dict)
    summary: DatasetSummary | None = None

    @property
    def ok(self) -> bool:
        """True when every input was ingested."""
        return not self.refused


@dataclass(frozen=True)
class _Candidate:
    path: Path
    name: str
    named: bool = True      # given by the user, not found by a directory walk


def discover(inputs: Iterable[PathLike], *, exclude: PathLike | None = None
             ) -> tuple[list[_Candidate], list[RefusedInput], list[str]]:
    """The files to ingest, the refused paths and the skipped names, in a stable order.

    Args:
        inputs: files or directories, in the order given.
        exclude: a directory not to descend into (the output dataset).
    """
    files: list[_Candidate] = []
    refused: list[RefusedInput] = []
    skipped: list[str] = []
    seen: set[Path] = set()
    excluded = Path(exclude).resolve() if exclude is not None else None

    def add(path: Path, name: str, named: bool) -> None:
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            files.append(_Candidate(path, name, named))

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


def _check_readable(cand: _Candidate) -> None:
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
    from forensics.errors import BinaryInputError

    head = head_after_nul_run(path, head_bytes(path))
    if looks_binary(head) and not (kind == "log" and nul_padded_text(head)):
        raise BinaryInputError("binary file, not a text log, JSON or trace; refused", path=str(path))
    if kind is not None:
        return kind
    return detect_kind(head.decode("utf-8", errors="replace"))


class _TraceRuns:
    """Cross-file checks for traces: per-rank files of one run must agree and not overlap."""

    def __init__(self) -> None:
        self._config: dict[str, tuple[str, str, int]] = {}
        self._keys: dict[str, FrameKeys] = {}   # frame keys of every file of each run
        self._tp: dict[str, int] = {}
        self._current: str | None = None  # run of the trace being read (batches after the first)

    def check(self, tables: Any, source: str) -> None:
        """Check one batch of :func:`~forensics.ingest.trace_v1.iter_trace` (the first holds
        the run record; later batches belong to the same run)."""
        if tables.runs.num_rows:
            import json

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


def _write_file(writer: DatasetWriter, cand: _Candidate, kind: str, traces: _TraceRuns,
                progress: Callable[[int], None] | None) -> None:
    """Stream one input into the writer."""
    if kind == "log":
        from forensics.ingest.executor_log import parse_executor_log

        for batch in parse_executor_log(cand.path, cand.name, progress=progress):
            writer.write("iterations", batch.iterations)
            writer.write("events", batch.events)
            writer.write("unparsed", batch.unparsed)
            writer.write("traceback_frames", batch.traceback_frames)
    elif kind == "stats":
        from forensics.ingest.stats_json import read_stats

        from forensics.ingest.timestamps import typed_stats

        for sbatch in read_stats(cand.path, cand.name, progress=progress):
            writer.write("stats", typed_stats(sbatch.stats))
            writer.write("events", sbatch.events)
            writer.write("unparsed", sbatch.unparsed)
    elif kind == "trace":
        from forensics.ingest.trace_v1 import iter_trace

        # Streamed in batches: memory stays flat however long the trace (the writer discards
        # everything if a later line breaks the format).
        for tables in iter_trace(cand.path, cand.name, progress=progress):
            traces.check(tables, cand.name)
            for name in ("runs", "frames", "requests", "events", "unparsed"):
                writer.write(name, getattr(tables, name))
    elif kind == OTHER_JSON:
        from forensics.ingest.verbatim import read_verbatim

        for unparsed, events in read_verbatim(cand.path, cand.name, progress=progress):
            writer.write("unparsed", unparsed)
            writer.write("events", events)
    else:  # pragma: no cover - kinds are validated before
        raise InputError(f"unknown input kind {kind!r}", path=cand.name)


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _progress_bar(total: int, n_files: int, quiet: bool):
    """``advance(n_bytes)`` context: a bar on stderr for large inputs when it is a terminal."""
    from forensics.ingest.progress import ingest_progress

    return ingest_progress(total, f"ingest {n_files} file(s)",
                           quiet=quiet or total < PROGRESS_MIN_BYTES)


def _ingest_file(writer: DatasetWriter, cand: _Candidate, kind: str, traces: _TraceRuns,
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


def ingest(inputs: PathLike | Iterable[PathLike], output: PathLike, *, kind: str | None = None,
           quiet: bool = True, jobs: int | None = None, keep_going: bool = False) -> IngestReport:
    """Ingest logs, stats JSON and traces into a new dataset directory (atomically).

    Args:
        inputs: files or directories (see the module docstring for what a directory contributes).
        output: the dataset directory; an existing dataset there is replaced atomically, any
            other non-empty path is refused (so ``-o logs/`` cannot wipe the logs).
        kind: ``"log"``, ``"stats"`` or ``"trace"`` to force one reader for every file.
        quiet: no progress bar (it is also off when stderr is not a terminal).
        jobs: processes reading the files at once (one file each; the dataset is the same);
            1: one file after the other. Default: large inputs of several files are read on
            two threads of this process (``forensics.ingest.parallel.readers`` says why).
        keep_going: a file that breaks its format (a trace or a stats JSON array) is refused
            with the error (file and line) and left out, the other inputs are ingested (what a
            post-mortem wants); default: the error stops the ingest, no dataset is written.

    Returns:
        An :class:`IngestReport`; ``report.refused`` lists missing and binary inputs.

    Raises:
        InputError: nothing could be ingested, or ``kind`` is unknown.
        DatasetError: ``output`` exists and is not a dataset.
        TraceFormatError, StatsFormatError: an input breaks its format (no dataset is written).

    Example:
        >>> report = ingest(["logs/", "stats.jsonl"], "crash.ds")   # doctest: +SKIP
        >>> report.rows["iterations"], [r.name for r in report.refused]  # doctest: +SKIP
    """
    if kind is not None and kind not in KINDS:
        raise InputError(f"unknown kind {kind!r}; choose one of {', '.join(KINDS)}")
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    inputs = list(inputs)
    if not inputs:
        raise InputError("no input given", hint="forensics ingest LOG_OR_DIR... -o DATASET")
    out = Path(output)
    from forensics.output_dir import refuse_input_as_output
    refuse_input_as_output(out, inputs)
    if out.exists() and not (out / META_FILE).is_file() and (not out.is_dir() or any(out.iterdir())):
        raise DatasetError("exists and is not a dataset; refusing to replace it", path=str(out),
                           hint="choose a new output directory (a dataset is replaced atomically)")
    candidates, refused, skipped = discover(inputs, exclude=out)

    plan: list[tuple[_Candidate, str]] = []
    for cand in candidates:
        try:
            _check_readable(cand)
            k = classify(cand.path, kind=kind)
        except InputError as e:
            refused.append(RefusedInput(cand.name, e.message))
            logger.info("refused: %s", e)
            continue
        if k == OTHER_JSON and not cand.named:
            refused.append(RefusedInput(cand.name, NOT_STATS_REASON + " (name the file to keep "
                                                   "it verbatim)"))
            logger.info("refused: %s: %s", cand.name, NOT_STATS_REASON)
            continue
        plan.append((cand, k))
    if not plan:
        listing = "; ".join(str(r) for r in refused) or "no recognised input file"
        missing = refused and all(r.reason == "no such file or directory" for r in refused)
        hint = (f"check the path{'s' if len(refused) > 1 else ''} (relative to {os.getcwd()})"
                if missing else
                "recognised names end in .log .txt .out .err .json .jsonl "
                "(optionally .gz/.zst); name a file explicitly to read it anyway")
        raise InputError(f"nothing to ingest ({listing})", hint=hint)

    total = sum(_size(c.path) for c, _ in plan)
    traces = _TraceRuns()
    fingerprints: list[InputFingerprint] = []
    from forensics.ingest.parallel import readers, write_parallel, write_threaded

    how, n = readers(jobs, [c.path for c, _ in plan])

    def refuse(cand: _Candidate, e: InputError) -> None:
        where = f"line {e.line}: " if e.line is not None else ""
        refused.append(RefusedInput(cand.name, f"{where}{e.message}"))
        logger.warning("not ingested: %s", e)

    on_error = refuse if keep_going else None
    with DatasetWriter(out) as writer, _progress_bar(total, len(plan), quiet) as advance, \
            recording_reads() as reads:
        if how == "processes":
            fingerprints = write_parallel(writer, plan, traces, advance, n, on_error)
        elif how == "threads" or keep_going:
            # each file into a part of its own: one that breaks its format is left out whole
            fingerprints = write_threaded(writer, plan, traces, advance,
                                          n if how == "threads" else 1, on_error)
        else:
            for cand, k in plan:
                fingerprints.append(_ingest_file(writer, cand, k, traces, advance, reads))
        meta = {
            "tool": "adp-forensics",
            "tool_version": __version__,
            "inputs": [fp.to_json() for fp in fingerprints],
            "refused": [{"name": r.name, "reason": r.reason} for r in refused],
            "skipped": list(skipped),
        }
        path = writer.finish(meta)
        rows = dict(writer.rows)
    from forensics.heap import trim
    trim()   # the readers' freed blocks: the caller (a replay) would add its own on top

    from forensics.report.summary import summarize

    summary = summarize(Dataset(path))
    return IngestReport(path=path, inputs=tuple(fingerprints), refused=tuple(refused),
                        skipped=tuple(skipped), rows=rows, summary=summary)


def _cached(cache: Path, inputs: list[PathLike]) -> Dataset | None:
    """The dataset at ``cache`` if its recorded inputs match the current files exactly."""
    if not (cache / META_FILE).is_file():
        return None
    try:
        ds = Dataset(cache)
    except DatasetError:
        return None
    recorded = ds.meta.get("inputs", [])
    if ds.meta.get("tool_version") != __version__ or ds.meta.get("refused"):
        return None
    candidates, refused, _ = discover(inputs, exclude=cache)
    if refused or len(candidates) != len(recorded):
        return None
    by_name = {str(r.get("name")): r for r in recorded}
    current = []
    for c in candidates:
        r = by_name.get(c.name)
        if r is None:
            return None
        try:
            size = os.path.getsize(c.path)
        except OSError:
            return None
        if size != r.get("size"):
            return None  # cheap check first; hash only when sizes agree
        current.append(fingerprint(c.path, c.name, str(r.get("kind"))))
    return ds if identities(current) == identities(recorded) else None


def as_dataset(inputs: PathLike | Iterable[PathLike], *, cache_dir: PathLike | None = None,
               quiet: bool = True, jobs: int | None = None, keep_going: bool = False) -> Dataset:
    """A loaded dataset from a dataset directory or from raw inputs.

    - one input that is a dataset directory (holds ``_meta.json``): loaded as is;
    - otherwise the inputs are ingested into ``cache_dir`` (the dataset directory itself),
      reusing the dataset already there when its recorded inputs (names, sizes, digests) match
      the files now; without ``cache_dir``, into a temporary directory removed when the returned
      dataset is garbage-collected.

    ``jobs``: processes reading the inputs; ``keep_going``: a file breaking its format is
    refused and the others ingested (both as in :func:`ingest`).

    Refused inputs (missing or binary) are logged and listed in ``dataset.meta["refused"]``;
    callers that must not go on without them check that list.

    Raises:
        InputError: nothing could be ingested.
        DatasetError: a dataset directory of an unsupported schema version.

    Example:
        >>> ds = as_dataset(["logs/"], cache_dir="crash.ds")   # doctest: +SKIP
    """
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    inputs = list(inputs)
    if len(inputs) == 1 and (Path(inputs[0]) / META_FILE).is_file():
        return Dataset(inputs[0])
    if cache_dir is not None:
        cache = Path(cache_dir)
        ds = _cached(cache, inputs)
        if ds is not None:
            logger.info("%s: inputs unchanged, reusing the dataset", cache)
            return ds
        report = ingest(inputs, cache, quiet=quiet, jobs=jobs, keep_going=keep_going)
    else:
        tmp = Path(tempfile.mkdtemp(prefix="forensics-ds-"))
        try:
            report = ingest(inputs, tmp / "dataset", quiet=quiet, jobs=jobs, keep_going=keep_going)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        ds = Dataset(report.path)
        weakref.finalize(ds, shutil.rmtree, str(tmp), True)
        _log_refused(report)
        return ds
    _log_refused(report)
    return Dataset(report.path)


def _log_refused(report: IngestReport) -> None:
    for r in report.refused:
        logger.warning("input not ingested: %s", r)


__all__ = ["IngestReport", "RefusedInput", "ingest", "as_dataset", "discover", "classify"]


make_module_callable(__name__, ingest)  # ``forensics.ingest(...)`` after the import, too

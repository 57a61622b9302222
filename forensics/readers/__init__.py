"""Ingest: executor logs, iteration-stats JSON and request-state traces into one Parquet dataset.

Library entry points:

- :func:`ingest` (``forensics ingest INPUT... -o DATASET``): read every input, write the dataset
  atomically, return an :class:`IngestReport`;
- :func:`forensics.readers.dataset_cache.as_dataset`: a loaded dataset (pandas) from a dataset
  directory or from raw inputs (ingested into a cache directory, reused while the inputs are
  unchanged); what replay and postmortem call. It is a module of its own because loading
  imports pandas and an ingest does not (this package reads back what it wrote as Arrow).

Inputs are files or directories. A directory contributes every *recognised* file below it,
recursively, in sorted order: a name ending in ``.log .txt .out .err .stdout .stderr .json
.jsonl .ndjson``, optionally followed by ``.gz``/``.zst``/``.zstd`` (see
:func:`forensics.readers.kinds.recognised`); hidden files and directories and this tool's own
outputs, wherever ``-o`` put them (datasets: ``_meta.json``; report directories: their manifest
``.forensics-output.json``), are skipped and listed in ``skipped``. A file named explicitly is
always read. The kind of each file (``log``, ``stats``, ``trace``) comes from its decompressed
content (:func:`forensics.readers.kinds.detect_kind`) unless ``kind=`` forces one for all; JSON
that is neither (no IterationStats key in its first object) is refused by a walk, with the
reason, and kept verbatim in ``unparsed`` when named explicitly (kind ``json``).

Bad inputs: a missing path or a binary (non-text) file is refused (listed in
``IngestReport.refused`` and ``_meta.json``) while the others are still ingested; a trace or a
stats JSON array that breaks its format stops the ingest with an error naming the file and line,
and no dataset is written (a half-read trace would mislead a replay).
"""
from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from forensics.dataset.schema import META_FILE
from forensics.dataset.tables import ArrowDataset
from forensics.dataset.writer import DatasetWriter
from forensics.dataset.summary import DatasetSummary, summarize
from forensics.errors import DatasetError, InputError
from forensics.output_dir import refuse_input_as_output
from forensics.readers.files import (
    NOT_STATS_REASON,
    Candidate,
    RefusedInput,
    TraceRuns,
    check_readable,
    classify,
    discover,
    ingest_file,
)
from forensics.readers.kinds import KINDS, OTHER_JSON
from forensics.readers.meta import InputFingerprint
from forensics.readers.parallel import readers, write_parallel, write_threaded
from forensics.readers.progress import ingest_progress
from forensics.readers.sources import recording_reads
from forensics.version import __version__
from replay.heap import trim
from replay.stage_clock import CLOCK

logger = logging.getLogger(__name__)

PathLike = str | os.PathLike

#: Inputs smaller than this in total ingest in moments: no progress bar.
PROGRESS_MIN_BYTES = 8 << 20


@dataclass(frozen=True)
class IngestReport:
    """What one ingest did.

    Attributes:
        path: the dataset directory written.
        inputs: fingerprints of the ingested files, in ingest order.
        refused: inputs not ingested (missing or binary); non-empty means exit code 2 in the CLI.
        skipped: files a directory walk passed over (not recognised by name).
        rows: rows written per table.
        summary: the :class:`~forensics.dataset.summary.DatasetSummary` of the new dataset
            (None when ``ingest`` was asked for none).
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


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _progress_bar(total: int, n_files: int, quiet: bool):
    """``advance(n_bytes)`` context: a bar on stderr for large inputs when it is a terminal."""
    return ingest_progress(total, f"ingest {n_files} file(s)",
                           quiet=quiet or total < PROGRESS_MIN_BYTES)


def ingest(inputs: PathLike | Iterable[PathLike], output: PathLike, *, kind: str | None = None,
           quiet: bool = True, jobs: int | None = None, keep_going: bool = False,
           summary: bool = True) -> IngestReport:
    """Ingest logs, stats JSON and traces into a new dataset directory (atomically).

    Args:
        inputs: files or directories (see the module docstring for what a directory contributes).
        output: the dataset directory; an existing dataset there is replaced atomically, any
            other non-empty path is refused (so ``-o logs/`` cannot wipe the logs).
        kind: ``"log"``, ``"stats"`` or ``"trace"`` to force one reader for every file.
        quiet: no progress bar (it is also off when stderr is not a terminal).
        jobs: processes reading the files at once (one file each; the dataset is the same);
            1: one file after the other. Default: large inputs of several files are read on
            two threads of this process (``forensics.readers.parallel.readers`` says why).
        keep_going: a file that breaks its format (a trace or a stats JSON array) is refused
            with the error (file and line) and left out, the other inputs are ingested (what a
            post-mortem wants); default: the error stops the ingest, no dataset is written.
        summary: summarise the new dataset (``report.summary``); False leaves it None, for a
            caller that summarises it later or never (a scan of its tables: ~0.35 s CPU for a
            fleet hour of 32 ranks, measured).

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
    refuse_input_as_output(out, inputs)
    if out.exists() and not (out / META_FILE).is_file() and (not out.is_dir() or any(out.iterdir())):
        raise DatasetError("exists and is not a dataset; refusing to replace it", path=str(out),
                           hint="choose a new output directory (a dataset is replaced atomically)")
    candidates, refused, skipped = discover(inputs, exclude=out)

    plan: list[tuple[Candidate, str]] = []
    for cand in candidates:
        try:
            check_readable(cand)
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
    traces = TraceRuns()
    fingerprints: list[InputFingerprint] = []
    how, n = readers(jobs, [c.path for c, _ in plan])

    def refuse(cand: Candidate, e: InputError) -> None:
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
                fingerprints.append(ingest_file(writer, cand, k, traces, advance, reads))
        meta = {
            "tool": "adp-forensics",
            "tool_version": __version__,
            "inputs": [fp.to_json() for fp in fingerprints],
            "refused": [{"name": r.name, "reason": r.reason} for r in refused],
            "skipped": list(skipped),
        }
        with CLOCK.stage("dataset write"):
            path = writer.finish(meta)
        rows = dict(writer.rows)
    trim()   # the readers' freed blocks: the caller (a replay) would add its own on top

    return IngestReport(path=path, inputs=tuple(fingerprints), refused=tuple(refused),
                        skipped=tuple(skipped), rows=rows,
                        summary=summarize(ArrowDataset(path)) if summary else None)


__all__ = ["IngestReport", "RefusedInput", "classify", "discover", "ingest"]

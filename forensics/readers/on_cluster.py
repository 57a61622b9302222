"""The ingest on a Dask cluster: one task per input file, the parts merged into one dataset
that reads the same as a serial :func:`forensics.readers.ingest` of the same inputs.

- :func:`as_dataset`: :func:`forensics.readers.dataset_cache.as_dataset`, the files ingested on ``client``
  when one is given (``forensics.cluster.connect``);
- :func:`ingest_parallel`: the ingest itself, into a dataset directory.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import types
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from forensics.cluster import Done, map_tasks
from forensics.dataset.schema import META_FILE, REFERENCE_TABLES, TABLES
from forensics.dataset.store import Dataset
from forensics.dataset.tables import ArrowDataset
from forensics.dataset.writer import DatasetWriter
from forensics.errors import InputError
from forensics.readers import ingest
from forensics.readers.dataset_cache import as_dataset as serial
from forensics.readers.dataset_cache import cached_dataset
from forensics.readers.files import NOT_STATS_REASON, RefusedInput, TraceRuns, classify, discover
from forensics.readers.kinds import OTHER_JSON
from forensics.version import __version__

PathLike = str | os.PathLike


def _ingest_one(path: str, part: str) -> str:
    """Task: ingest one input file into its own dataset ``part``; returns the path."""
    return str(ingest([path], part, summary=False).path)


def _merge_parts(parts: list[str], output: str, refused: list[dict], skipped: list[str]) -> str:
    """Task: the per-file datasets ``parts`` (in ingest order) into one dataset at ``output``.

    Rows go through :class:`~forensics.dataset.writer.DatasetWriter` table by table in the order
    a serial ingest writes them, so the result reads the same as ``forensics ingest`` of the
    same inputs; the cross-file trace checks (one run record per run, no frame twice) run as
    they do there.
    """
    traces = TraceRuns()
    inputs: list[dict] = []
    with DatasetWriter(output) as writer:
        for part in parts:
            ds = ArrowDataset(part)
            inputs.extend(ds.meta.get("inputs", []))
            runs, frames = ds.arrow("runs"), ds.arrow("frames")
            if runs.num_rows or frames.num_rows:
                source = str(ds.meta["inputs"][0]["name"]) if ds.meta.get("inputs") else part
                traces.check(types.SimpleNamespace(runs=runs, frames=frames), source)
            for table in TABLES:
                if table not in REFERENCE_TABLES:   # the writer adds those once itself
                    writer.write(table, ds.arrow(table))
        path = writer.finish({"tool": "adp-forensics", "tool_version": __version__,
                              "inputs": inputs, "refused": refused, "skipped": skipped})
    return str(path)


def ingest_parallel(inputs: Sequence[PathLike], output: PathLike, *, client: Any,
                    done: Done | None = None) -> Path:
    """Ingest ``inputs`` into the dataset ``output`` with one task per input file.

    The same files, names and checks as :func:`forensics.readers.ingest` (refused inputs are
    recorded, not fatal); parts are written beside ``output`` (a file system the workers
    share) and removed afterwards.

    Raises:
        InputError: nothing to ingest; TraceFormatError, StatsFormatError: as ``ingest``.
    """
    out = Path(output)
    candidates, refused, skipped = discover(inputs, exclude=out)
    files = []
    for cand in candidates:
        try:
            if classify(cand.path) == OTHER_JSON and not cand.named:
                refused.append(RefusedInput(cand.name, NOT_STATS_REASON))
                continue
            files.append(cand)
        except InputError as e:
            refused.append(RefusedInput(cand.name, e.message))
    if not files:
        listing = "; ".join(str(r) for r in refused) or "no recognised input file"
        raise InputError(f"nothing to ingest ({listing})")
    out.resolve().parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{out.name}.parts-", dir=out.resolve().parent))
    try:
        parts = map_tasks(_ingest_one, [(c.name, str(scratch / f"{i:05d}"))
                                        for i, c in enumerate(files)],
                          client=client, done=done, key="ingest-file")
        rf = [{"name": r.name, "reason": r.reason} for r in refused]
        (path,) = map_tasks(_merge_parts, [(parts, str(out), rf, list(skipped))], client=client,
                            key="merge-dataset")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return Path(path)


def as_dataset(inputs: Sequence[PathLike], *, cache_dir: PathLike | None = None, client: Any = None,
               done: Done | None = None, quiet: bool = True, jobs: int | None = None,
               keep_going: bool = False):
    """:func:`forensics.readers.dataset_cache.as_dataset`, ingesting file by file on ``client`` when given.

    Without a client this is ``forensics.readers.dataset_cache.as_dataset`` (``jobs`` processes reading the
    files; ``keep_going`` as there). With one, a dataset input is
    loaded as is, a ``cache_dir`` holding a dataset of the same inputs is reused, and otherwise
    every file becomes a task (into ``cache_dir``, or a temporary directory removed with the
    returned dataset).
    """
    inputs = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    if client is None or (len(inputs) == 1 and (Path(inputs[0]) / META_FILE).is_file()):
        return serial(inputs, cache_dir=cache_dir, quiet=quiet, jobs=jobs, keep_going=keep_going)
    if cache_dir is not None:
        ds = cached_dataset(Path(cache_dir), inputs)
        if ds is not None:
            return ds
        return Dataset(ingest_parallel(inputs, cache_dir, client=client, done=done))
    tmp = Path(tempfile.mkdtemp(prefix="forensics-ds-"))
    try:
        ds = Dataset(ingest_parallel(inputs, tmp / "dataset", client=client, done=done))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    weakref.finalize(ds, shutil.rmtree, str(tmp), True)
    return ds


__all__ = ["as_dataset", "ingest_parallel"]

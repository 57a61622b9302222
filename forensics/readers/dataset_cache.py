"""Datasets for analysis from a dataset directory or from raw inputs, ingested into a cache
directory and reused while the inputs are unchanged (:func:`as_dataset`): what replay,
postmortem and the notebooks' entry points call.
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
import weakref
from collections.abc import Iterable
from pathlib import Path

from forensics.dataset.schema import META_FILE
from forensics.dataset.store import Dataset
from forensics.errors import DatasetError
from forensics.readers import IngestReport, PathLike, ingest
from forensics.readers.files import discover
from forensics.readers.meta import fingerprint, identities
from forensics.version import __version__

logger = logging.getLogger(__name__)


def cached_dataset(cache: Path, inputs: list[PathLike]) -> Dataset | None:
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
        ds = cached_dataset(cache, inputs)
        if ds is not None:
            logger.info("%s: inputs unchanged, reusing the dataset", cache)
            return ds
        report = ingest(inputs, cache, quiet=quiet, jobs=jobs, keep_going=keep_going,
                        summary=False)
    else:
        tmp = Path(tempfile.mkdtemp(prefix="forensics-ds-"))
        try:
            report = ingest(inputs, tmp / "dataset", quiet=quiet, jobs=jobs, keep_going=keep_going,
                            summary=False)
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

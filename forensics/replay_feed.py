"""The forensics pipeline feeds the replay library: its trace reader and dataset loader.

Importing this module installs them in ``replay.feed`` (the replay imports nothing from
``forensics``; it looks this module up by name when it first needs to read a file).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from replay import feed


def _tables_from_records(records: Iterable[dict], source: str) -> Any:
    from forensics.readers.trace_v1 import tables_from_records
    return tables_from_records(records, source)


def _as_dataset(inputs: Any, cache_dir: Any = None) -> Any:
    from forensics.readers.dataset_cache import as_dataset
    return as_dataset(inputs, cache_dir=cache_dir)


def _frame_kernel() -> Any:
    from forensics.readers.frame_builder import kernel
    return kernel()


feed.install(tables_from_records=_tables_from_records, as_dataset=_as_dataset,
             frame_kernel=_frame_kernel)

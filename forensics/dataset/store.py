"""Loading datasets for analysis: one pandas DataFrame per table (:func:`load`).

:class:`Dataset` is :class:`~forensics.dataset.tables.ArrowDataset` (the tables as Arrow)
with a DataFrame attribute per table, read on first access. This is the module that imports
pandas; writing is :mod:`forensics.dataset.writer`, which an ingest uses without it.
"""
from __future__ import annotations

import os

import pandas as pd
import pyarrow as pa

from forensics.dataset.schema import META_FILE, SCHEMAS, TABLES
from forensics.dataset.tables import ArrowDataset
from forensics.dataset.writer import PANDAS_DTYPES, DatasetWriter

__all__ = ["META_FILE", "Dataset", "DatasetWriter", "load", "to_pandas"]


class Dataset(ArrowDataset):
    """A loaded dataset: one pandas DataFrame attribute per table, read on first access.

    Attributes: ``iterations``, ``events``, ``stats``, ``runs``, ``frames``, ``requests``,
    ``unparsed``, ``states`` (see ``forensics.dataset.schema`` for the columns) and ``meta``
    (``_meta.json``); the Arrow readers of :class:`~forensics.dataset.tables.ArrowDataset`.
    Datasets of the 1.x layout and of 2.0-2.2 are read too, in today's shape.
    """

    def __init__(self, path: str | os.PathLike):
        super().__init__(path)
        self._cache: dict[str, pd.DataFrame] = {}

    def table(self, table: str) -> pd.DataFrame:
        if table not in self._cache:
            self._cache[table] = to_pandas(self.arrow(table))
        return self._cache[table]

    def __getattr__(self, name: str) -> pd.DataFrame:
        if name in SCHEMAS:
            return self.table(name)
        raise AttributeError(name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(TABLES))


#: The nullable pandas dtype of each Arrow type that pandas reads as float64 or object when a
#: column has nulls (:data:`~forensics.dataset.writer.PANDAS_DTYPES`).
_NULLABLE = {arrow: pd.api.types.pandas_dtype(name) for arrow, name in PANDAS_DTYPES.items()}


def to_pandas(table: pa.Table) -> pd.DataFrame:
    """Arrow to pandas keeping integer columns with nulls as nullable integers."""
    return table.to_pandas(types_mapper=_NULLABLE.get, maps_as_pydicts="strict")


def load(path: str | os.PathLike) -> Dataset:
    """Open a dataset written by ``forensics ingest``.

    Example:
        >>> ds = forensics.load("crash.ds")        # doctest: +SKIP
        >>> ds.iterations.groupby("rank").iter.max()  # doctest: +SKIP
    """
    return Dataset(path)

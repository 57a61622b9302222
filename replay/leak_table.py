"""The leaked dummies of a replay as a table: :attr:`ReplayResult.leaks`.

One row per leaked dummy, the fatal one (the dummy on the crashing rank when it crashed) first,
then the others in ledger order: the order of ``explain()``, the report and the pytest plugin.
The same columns, after a leading ``policy``, are :attr:`forensics.Investigation.leaks`.

    dummy          its ledger sequence number (``ReplayResult.ledger["dummy"]``)
    rank           the rank holding it
    role           'context' | 'generation' (the ledger's categories)
    iter_created   the iteration the policy padded it
    iter_skipped   the first fleet-wide skipped iteration it survived
    cause_ranks    ranks whose zero batch made ``can_queue`` False there (a tuple of ints)
    fatal          it was on the crashing rank when the run crashed (at most one row)

The records (:class:`replay.results.Leak`, with each cause rank's request states) are
``ReplayResult.leak_records``, in the same order, row for row.

Example (the NVBug sample under prefix-2026: 22 leaks, the fatal one on rank 2)::

    >>> res.leaks.head(2)                                          # doctest: +SKIP
       dummy  rank        role  iter_created  iter_skipped cause_ranks  fatal
    0    275     2  generation            75            75        (0,)   True
    1    113     3  generation            19            19        (0,)  False
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, ClassVar

import pandas as pd

#: The ``role`` categories (those of the ledger's ``role``).
ROLE_DTYPE = pd.CategoricalDtype(["context", "generation"])
#: Column -> dtype of :attr:`ReplayResult.leaks`, in order (meanings in the module docstring).
LEAK_DTYPES: dict[str, Any] = {
    "dummy": "int64", "rank": "int64", "role": ROLE_DTYPE, "iter_created": "int64",
    "iter_skipped": "int64", "cause_ranks": "object", "fatal": "bool",
}
LEAK_COLUMNS = tuple(LEAK_DTYPES)

_WAS = "res.leaks is a DataFrame now (one row per leaked dummy, the fatal one first)"


def leak_frame(records: Sequence[Any], fatal: Any = None) -> LeakTable:
    """``records`` (``Leak`` objects, in order) as the typed table; ``fatal`` is the record
    marked ``fatal`` (compared by identity), or None."""
    cols = {
        "dummy": pd.array([int(x.dummy) for x in records], dtype="int64"),
        "rank": pd.array([int(x.rank) for x in records], dtype="int64"),
        "role": pd.Categorical([x.role for x in records], dtype=ROLE_DTYPE),
        "iter_created": pd.array([int(x.iter_created) for x in records], dtype="int64"),
        "iter_skipped": pd.array([int(x.iter_skipped) for x in records], dtype="int64"),
        "cause_ranks": pd.Series([tuple(int(c) for c in x.cause_ranks) for x in records],
                                 dtype="object"),
        "fatal": pd.array([x is fatal for x in records], dtype="bool"),
    }
    table = LeakTable({k: (v.to_numpy() if isinstance(v, pd.Series) else v)
                       for k, v in cols.items()}, columns=list(LEAK_COLUMNS))
    object.__setattr__(table, "_leak_records", tuple(records))   # not attrs: those are deep-copied
    return table


class _ColumnName(str):
    """A column name yielded by iterating a :class:`LeakTable`; an attribute it lacks (old code
    doing ``for leak in res.leaks: leak.rank``) is explained."""

    def __getattr__(self, name: str):
        raise AttributeError(f"{name!r}: {_WAS} and iterating it gives its column names; "
                             "for the Leak records iterate res.leak_records, for rows "
                             "res.leaks.itertuples()")


class LeakTable(pd.DataFrame):
    """:attr:`ReplayResult.leaks`: a plain DataFrame for every DataFrame use (derived frames are
    plain ``pd.DataFrame``), with clear errors for the uses of the tuple of records it replaced:
    ``if res.leaks:``, ``res.leaks[0]`` and ``leak.rank`` while iterating; ``.df``,
    ``.to_frame()`` and ``.records`` keep working, with a ``DeprecationWarning``."""

    _metadata: ClassVar[list[str]] = ["_leak_records"]

    def __bool__(self) -> bool:
        raise ValueError(f"the truth value of res.leaks is ambiguous: {_WAS}; test "
                         "`not res.leaks.empty` or `len(res.leaks)`, or use res.leak_records")

    def __getitem__(self, key):
        if isinstance(key, int) and not isinstance(key, bool) and key not in self.columns:
            raise KeyError(f"res.leaks[{key}]: {_WAS}; the record is res.leak_records[{key}], "
                           f"the row res.leaks.iloc[{key}]")
        return super().__getitem__(key)

    def __iter__(self):
        return (_ColumnName(c) if isinstance(c, str) else c for c in super().__iter__())

    def _old(self, what: str, instead: str) -> None:
        warnings.warn(f"res.leaks.{what}: {_WAS}; use {instead}", DeprecationWarning,
                      stacklevel=3)

    @property
    def df(self) -> pd.DataFrame:
        self._old("df", "res.leaks")
        return self

    def to_frame(self) -> pd.DataFrame:
        self._old("to_frame()", "res.leaks")
        return self

    @property
    def records(self) -> tuple:
        self._old("records", "res.leak_records")
        return getattr(self, "_leak_records", ())


__all__ = ["LEAK_COLUMNS", "LEAK_DTYPES", "ROLE_DTYPE", "LeakTable", "leak_frame"]

"""Names in the data: enum-like columns as Arrow dictionaries of names (layout 2.3).

- ``requests.state``: ``forensics.dataset.schema.STATE_NAME`` over the fixed
  :data:`STATE_NAMES` (every ``LlmRequestState`` name, in value order), made from the int codes
  by one table lookup (no per-row Python); the codes stay in ``requests.state_value``.
- ``events.kind``, ``events.severity``, ``iterations.format``: the readers build them as
  strings, the writer stores them as dictionaries of the names present
  (:data:`~forensics.dataset.schema.NAMED_COLUMNS`).

Datasets of layouts 1.x-2.2 hold the codes and plain strings; :func:`upgrade` turns a table read
from one (``SCHEMAS_2_2``) into today's shape.

Example:
    >>> import numpy as np
    >>> state_names(np.array([13, 10, 13], np.int16)).to_pylist()
    ['GENERATION_IN_PROGRESS', 'CONTEXT_INIT', 'GENERATION_IN_PROGRESS']
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from forensics.dataset.schema import NAMED_COLUMNS, SCHEMAS, STATE_NAME
from replay.states import ALL_STATES, STATE_INDEX

#: The dictionary of ``requests.state``: every known state's name, in value order.
STATE_NAMES = pa.array([s.name for s in ALL_STATES], pa.string())

#: Index into :data:`STATE_NAMES` of every int16 value (read through its uint16 view), -1 for
#: a value no state has: one gather per column, no temporary wider than the int8 result.
_LUT = np.full(1 << 16, -1, np.int8)
for _value, _index in STATE_INDEX.items():
    _LUT[np.array(_value, np.int16).view(np.uint16)] = _index


def state_names(codes: np.ndarray | pa.Array | pa.ChunkedArray) -> pa.DictionaryArray:
    """The ``requests.state`` column for int state codes: indices into :data:`STATE_NAMES`.

    A value no known state has (never from the readers, which refuse unknown states) gets a
    name of its own, ``STATE_<value>``, appended to that column's dictionary.
    """
    if isinstance(codes, pa.ChunkedArray):
        codes = codes.combine_chunks()
    if isinstance(codes, pa.Array):
        codes = codes.to_numpy(zero_copy_only=False)
    codes = np.asarray(codes)
    if codes.dtype != np.int16:
        if codes.size and (codes.min() < -(1 << 15) or codes.max() >= 1 << 15):
            raise ValueError("request-state values outside int16")
        codes = codes.astype(np.int16)
    idx = np.take(_LUT, codes.view(np.uint16))     # a third faster than _LUT[...] (measured)
    if not (idx < 0).any():
        # every index is one of STATE_NAMES': from_arrays' bounds check (~0.8 ms a 580 k
        # requests batch of a fleet trace, as much as the gather) has nothing to find
        return pa.DictionaryArray.from_buffers(STATE_NAME, idx.size, [None, pa.py_buffer(idx)],
                                               STATE_NAMES)
    unknown = np.unique(codes[idx < 0])
    if len(STATE_NAMES) + len(unknown) > 127:
        raise ValueError(f"{len(unknown)} unknown request-state values: too many to name")
    for k, u in enumerate(unknown):
        idx[codes == u] = len(STATE_NAMES) + k
    names = pa.concat_arrays([STATE_NAMES, pa.array([f"STATE_{u}" for u in unknown], pa.string())])
    return pa.DictionaryArray.from_arrays(pa.array(idx, pa.int8()), names)


def legacy_columns(table: str, columns: Sequence[str] | None) -> list[str] | None:
    """The columns to read from a 1.x-2.2 dataset for ``columns`` of today's table
    (``requests.state_value`` was ``state``)."""
    if columns is None or table != "requests":
        return None if columns is None else list(columns)
    return list(dict.fromkeys("state" if c == "state_value" else c for c in columns))


def upgrade(table: str, data: pa.Table, columns: Sequence[str] | None = None) -> pa.Table:
    """A table read from a 1.x-2.2 dataset (``SCHEMAS_2_2``, only :func:`legacy_columns` of
    ``columns`` when given) in today's shape: names as dictionaries, state codes in
    ``state_value``; ``columns`` (default: all) in order."""
    target = SCHEMAS[table]
    if table == "requests" and "state" in data.column_names:
        codes = data.column("state")
        at = data.column_names.index("state")
        data = data.set_column(at, target.field("state"), state_names(codes))
        data = data.append_column(target.field("state_value"), codes)
    for c in NAMED_COLUMNS.get(table, ()):
        if c in data.column_names:
            at = data.column_names.index(c)
            data = data.set_column(at, target.field(c), data.column(c).cast(target.field(c).type))
    return data.select(list(columns) if columns is not None else target.names)


__all__ = ["STATE_NAMES", "legacy_columns", "state_names", "upgrade"]

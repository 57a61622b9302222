"""The Arrow schema of the ``frames`` table, the replay's input (one row per (run, iter, rank)).

It lives with the replay library, which imports nothing from ``forensics``;
``forensics.dataset.schema`` re-exports it as part of the dataset layout (a public contract:
changing it bumps ``forensics.dataset.schema.SCHEMA_VERSION``).
"""
from __future__ import annotations

import pyarrow as pa

FRAMES = pa.schema([
    pa.field("run", pa.string(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    pa.field("line", pa.int64(), nullable=False),
    pa.field("iter", pa.int64(), nullable=False),
    pa.field("rank", pa.int32(), nullable=False),
    pa.field("num_requests", pa.int32(), nullable=False),  # len(active_requests), dummies included
    pa.field("num_dummies", pa.int32(), nullable=False),
    pa.field("expected", pa.int64()),                      # recorded decisions, null when absent
    pa.field("padded", pa.bool_()),
    pa.field("scheduled", pa.int64()),
    pa.field("can_queue", pa.bool_()),
    pa.field("alloc_ok", pa.bool_()),                      # false: add_dummy_requests would return None
    pa.field("postpadded", pa.bool_()),                    # dummy appended after scheduling
                                                           # (PR #17379); null: unknown
    pa.field("kv_precheck_ok", pa.bool_()),                # false: _has_adp_dummy_kv_capacity
                                                           # would say the dummy cannot fit
])


__all__ = ["FRAMES"]

"""forensics.dataset.names: request-state codes to names, and 2.1 tables upgraded."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from forensics.dataset.names import legacy_columns, state_names, upgrade
from forensics.dataset.schema import REQUESTS_2_2, SCHEMAS


def test_codes_become_names_over_one_fixed_dictionary():
    """LlmRequestState: 10 CONTEXT_INIT, 13 GENERATION_IN_PROGRESS, -1 DISAGG_TRANS_ERROR."""
    got = state_names(np.array([13, 10, -1, 13], np.int16))
    assert got.to_pylist() == ["GENERATION_IN_PROGRESS", "CONTEXT_INIT", "DISAGG_TRANS_ERROR",
                               "GENERATION_IN_PROGRESS"]
    assert got.type == pa.dictionary(pa.int8(), pa.string())
    assert len(got.dictionary) == 15          # every known state, used or not
    assert state_names(pa.array([14], pa.int16())).to_pylist() == ["GENERATION_TO_COMPLETE"]


def test_a_value_no_state_has_keeps_a_name_of_its_own():
    got = state_names(np.array([13, 99, -5, 99], np.int16))
    assert got.to_pylist() == ["GENERATION_IN_PROGRESS", "STATE_99", "STATE_-5", "STATE_99"]


def test_a_2_1_requests_table_is_upgraded():
    old = pa.table({"run": ["r"], "iter": [3], "rank": [0], "pos": [0], "request_id": [7],
                    "state": [10], "dummy": [False]}, schema=REQUESTS_2_2)
    new = upgrade("requests", old)
    assert new.schema == SCHEMAS["requests"]
    assert new.to_pylist() == [{"run": "r", "iter": 3, "rank": 0, "pos": 0, "request_id": 7,
                                "state": "CONTEXT_INIT", "state_value": 10, "dummy": False}]
    assert legacy_columns("requests", ["state_value", "iter"]) == ["state", "iter"]
    assert upgrade("requests", old.select(["state", "iter"]), ["state_value", "iter"]).to_pylist() \
        == [{"state_value": 10, "iter": 3}]

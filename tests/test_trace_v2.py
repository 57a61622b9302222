"""Trace format v2 (traces/FORMAT.md): the model and the state numbering in the run record."""
from __future__ import annotations

import json

import pytest

import replay
from forensics.errors import TraceFormatError
from forensics.readers.trace_v1 import read_trace, tables_from_records
from replay.states import LEGACY_NUMBERING, RequestState

RUN2 = {"kind": "run", "format": "adp-trace", "version": 2, "tp_size": 1, "pp_size": 1,
        "max_batch_size": 4, "max_num_active_requests": 4, "disaggregated": True,
        "overlap_scheduler": True, "build": "x", "model_arch": "deepseek_v4"}


def states_of(records):
    t = tables_from_records(records, "mem")
    return t.requests.column("state_value").to_pylist()


def test_v2_names_read_whatever_the_numbering():
    frame = {"kind": "frame", "iter": 0, "rank": 0,
             "requests": [{"id": 1, "state": "GENERATION_TO_COMPLETE"}]}
    assert states_of([RUN2, frame]) == [int(RequestState.GENERATION_TO_COMPLETE)]
    assert states_of([dict(RUN2, state_numbering=LEGACY_NUMBERING), frame]) == [14]


def test_v2_integer_states_need_a_declared_numbering(tmp_path):
    frame = {"kind": "frame", "iter": 0, "rank": 0, "requests": [{"id": 1, "state": 14}]}
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(RUN2) + "\n" + json.dumps(frame) + "\n")
    with pytest.raises(TraceFormatError, match=r"t.jsonl:2: .*integer state 14 but the run record "
                                               r"declares no state_numbering"):
        read_trace(p)


def test_the_older_header_numbering_decodes_to_todays_states():
    """The older llmRequest.h: CONTEXT_INIT 2, GENERATION_IN_PROGRESS 4, GENERATION_TO_COMPLETE 5,
    DISAGG_GENERATION_INIT 7, DISAGG_GENERATION_TRANS_IN_PROGRESS 10. Read with today's table,
    7 and 10 would be DISAGG_CONTEXT_WAIT_SCHEDULER and CONTEXT_INIT: silently wrong."""
    frame = {"kind": "frame", "iter": 0, "rank": 0,
             "requests": [{"id": i, "state": v} for i, v in enumerate((2, 4, 5, 7, 10), 1)]}
    got = states_of([dict(RUN2, state_numbering=LEGACY_NUMBERING), frame])
    assert got == [10, 13, 14, 8, 9]
    # The recorder declares the live enum as an object {NAME: int}.
    table = {"CONTEXT_INIT": 2, "GENERATION_TO_COMPLETE": 5, "DISAGG_GENERATION_INIT": 7}
    frame2 = dict(frame, requests=[{"id": 1, "state": 7}, {"id": 2, "state": 5}])
    assert states_of([dict(RUN2, state_numbering=table), frame2]) == [8, 14]


@pytest.mark.parametrize("bad, message", [
    ("context-init-99", "unknown state_numbering"),
    ({"CONTEXT_INIT": 2, "GENERATION_IN_PROGRESS": 2}, "given to two states"),
    ({"NOT_A_STATE": 1}, "unknown state name"),
])
def test_bad_numbering_is_refused_at_the_run_record(tmp_path, bad, message):
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(dict(RUN2, state_numbering=bad)) + "\n")
    with pytest.raises(TraceFormatError, match=rf"t.jsonl:1: run record: .*{message}"):
        read_trace(p)


def test_a_value_outside_the_declared_numbering_is_refused(tmp_path):
    p = tmp_path / "t.jsonl"
    frame = {"kind": "frame", "iter": 0, "rank": 0, "requests": [{"id": 1, "state": 13}]}
    p.write_text(json.dumps(dict(RUN2, state_numbering=LEGACY_NUMBERING)) + "\n"
                 + json.dumps(frame) + "\n")
    with pytest.raises(TraceFormatError, match="t.jsonl:2: .*unknown request state value 13"):
        read_trace(p)


def test_v1_keeps_reading_integers_with_todays_numbering():
    run1 = dict(RUN2, version=1)
    del run1["model_arch"]
    frame = {"kind": "frame", "iter": 0, "rank": 0, "requests": [{"id": 1, "state": 14}]}
    assert states_of([run1, frame]) == [14]
    rf = replay.RunFrames.from_records([run1, frame])
    assert rf.config.model_arch is None


def test_model_arch_reaches_the_replay_and_is_validated(tmp_path):
    frame = {"kind": "frame", "iter": 0, "rank": 0, "requests": [{"id": 1, "state": "GENERATION_TO_COMPLETE"}]}
    rf = replay.RunFrames.from_records([RUN2, frame])
    assert rf.config.model_arch == "deepseek_v4"
    res = replay.run(rf, policy="fix-16279")
    assert res.gated is None and res.verdict_text == "clean"  # inside the gate: padded, no skip
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(dict(RUN2, model_arch=7)) + "\n")
    with pytest.raises(TraceFormatError, match="t.jsonl:1: run record: model_arch must be"):
        read_trace(p)

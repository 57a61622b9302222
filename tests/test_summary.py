"""`summarize` over a dataset written by hand, so every expected number is visible here."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest

from forensics.dataset.schema import SCHEMAS
from forensics.dataset.store import DatasetWriter, load
from forensics.dataset.summary import summarize
from forensics.errors import DatasetError
from forensics.report.summary import compact_ranks, human_size, render_text


def table(name: str, rows: list[dict]) -> pa.Table:
    schema = SCHEMAS[name]
    full = [{f: r.get(f) for f in schema.names} for r in rows]
    return pa.Table.from_pylist(full, schema=schema)


RUN = {"run": "r1", "source": "t0.jsonl", "line": 1, "tp_size": 4, "pp_size": 1,
       "max_batch_size": 8, "max_num_active_requests": 8, "disaggregated": True,
       "overlap_scheduler": True, "encoder_decoder": False, "build": "prefix-2026",
       "record_json": "{}"}


@pytest.fixture
def dataset(tmp_path):
    """Ranks: iterations 0 and 2, events 7 (and one rankless), stats 1, frames 0 and 3.

    iter ranges: iterations 10..12, stats 9..11, frames 4..5. Events: 3 log, 1 adp_assert.
    Formats: V3 twice, V5 once. Run r1 has one run record per rank file (two) and 3 frames from
    2 ranks; run r2 has a run record and no frames.
    """
    with DatasetWriter(tmp_path / "ds") as w:
        w.write("iterations", table("iterations", [
            {"source": "a.log", "line": 1, "rank": 0, "iter": 10, "format": "V3"},
            {"source": "a.log", "line": 2, "rank": 2, "iter": 12, "format": "V5"},
            {"source": "a.log", "line": 3, "rank": None, "iter": 11, "format": "V3"}]))
        w.write("events", table("events", [
            {"source": "a.log", "line": 4, "line_end": 4, "rank": 7, "kind": "log"},
            {"source": "a.log", "line": 5, "line_end": 5, "rank": None, "kind": "log"},
            {"source": "a.log", "line": 6, "line_end": 9, "rank": 0, "kind": "adp_assert"},
            {"source": "a.log", "line": 10, "line_end": 10, "rank": 0, "kind": "log"}]))
        w.write("stats", table("stats", [
            {"source": "s.json", "line": 1, "line_end": 1, "iter": 9, "rank": 1},
            {"source": "s.json", "line": 2, "line_end": 2, "iter": 11, "rank": None}]))
        w.write("runs", table("runs", [RUN, dict(RUN, source="t1.jsonl"),
                                       dict(RUN, run="r2", build=None, tp_size=2)]))
        w.write("frames", table("frames", [
            {"run": "r1", "source": "t0.jsonl", "line": 2, "iter": 4, "rank": 0, "num_requests": 1,
             "num_dummies": 0},
            {"run": "r1", "source": "t1.jsonl", "line": 2, "iter": 4, "rank": 3, "num_requests": 1,
             "num_dummies": 1},
            {"run": "r1", "source": "t0.jsonl", "line": 3, "iter": 5, "rank": 0, "num_requests": 0,
             "num_dummies": 0}]))
        w.finish({"tool_version": "9.9", "inputs": [
            {"name": "a.log", "kind": "log", "size": 1500, "xxh3_128": "x"},
            {"name": "s.json", "kind": "stats", "size": 20, "xxh3_128": "y"}],
            "refused": [{"name": "b.bin", "reason": "binary file"}]})
    return tmp_path / "ds"


def test_summary_numbers(dataset):
    s = summarize(load(dataset))
    assert s.ranks == (0, 1, 2, 3, 7)
    assert s.iter_ranges == {"iterations": (10, 12), "stats": (9, 11), "frames": (4, 5)}
    assert s.rows == {"iterations": 3, "events": 4, "stats": 2, "runs": 3, "frames": 3,
                      "requests": 0, "unparsed": 0, "traceback_frames": 0}
    assert list(s.events_by_kind.items()) == [("log", 3), ("adp_assert", 1)]
    assert s.formats == {"V3": 2, "V5": 1}
    assert [(r.run, r.build, r.tp_size, r.frames, r.ranks, r.iter_min, r.iter_max) for r in s.runs] == [
        ("r1", "prefix-2026", 4, 3, 2, 4, 5), ("r2", None, 2, 0, 0, None, None)]
    assert s.inputs == (("a.log", "log", 1500), ("s.json", "stats", 20))
    assert s.refused == ("b.bin: binary file",)
    assert (s.schema_version, s.tool_version) == ("2.3", "9.9")


def test_summary_by_path_and_json_round_trip(dataset):
    d = summarize(dataset).to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["iter_ranges"]["frames"] == [4, 5]
    assert d["inputs"][0] == {"name": "a.log", "kind": "log", "size": 1500}


def test_render_text(dataset):
    lines = render_text(summarize(dataset)).splitlines()
    assert lines[0] == f"dataset {dataset} (schema 2.3, adp-forensics 9.9)"
    assert lines[1] == "inputs: 2 (log 1, stats 1)"
    assert lines[2] == "  a.log   log    1.5 kB"
    assert lines[3] == "  s.json  stats  20 B"
    assert "refused: b.bin: binary file" in lines
    assert "ranks: 0-3, 7 (5 ranks)" in lines
    assert "iter range (iterations): 10..12" in lines
    assert "  adp_assert        1" in lines
    assert "iteration line formats: V3 2, V5 1" in lines
    assert "run r1: build prefix-2026, tp 4, 3 frames from 2 ranks, iter 4..5" in lines
    assert "run r2: build None, tp 2, 0 frames from 0 ranks, no frames" in lines


def test_empty_dataset(tmp_path):
    with DatasetWriter(tmp_path / "ds") as w:
        w.finish({"inputs": []})
    s = summarize(tmp_path / "ds")
    assert s.ranks == () and s.iter_ranges == {} and s.events_by_kind == {} and s.runs == ()
    assert "ranks: none (0 ranks)" in render_text(s)


def test_not_a_dataset(tmp_path):
    with pytest.raises(DatasetError, match="not a dataset"):
        summarize(tmp_path)


def test_helpers():
    assert compact_ranks([5, 0, 1, 2, 9, 10]) == "0-2, 5, 9-10"
    assert compact_ranks([]) == ""
    assert [human_size(n) for n in (0, 999, 1000, 2_500_000, 3 * 10**9)] == [
        "0 B", "999 B", "1.0 kB", "2.5 MB", "3.0 GB"]

"""Reading request-state traces v1 (traces/FORMAT.md)."""
from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pytest
import zstandard

from forensics.dataset.schema import EVENTS, FRAMES, REQUESTS, RUNS, UNPARSED
from forensics.errors import TraceFormatError
from forensics.readers.trace_v1 import is_trace, read_trace, tables_from_records

RUN = {"kind": "run", "format": "adp-trace", "version": 1, "tp_size": 2, "pp_size": 1,
       "max_batch_size": 8, "max_num_active_requests": 8, "disaggregated": True,
       "overlap_scheduler": True, "build": "prefix-2026"}
F0 = {"kind": "frame", "iter": 7, "rank": 1,
      "requests": [{"id": 17, "state": "GENERATION_TO_COMPLETE"},
                   {"id": 0, "state": 13, "dummy": True},
                   {"id": 18, "state": "LlmRequestState.CONTEXT_INIT"}],
      "expected": 8, "padded": False, "scheduled": 0, "can_queue": False}


def write(tmp_path, lines, name="t.jsonl"):
    p = tmp_path / name
    p.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return p


def test_reads_run_frames_requests_notes_and_blank_lines(tmp_path):
    p = write(tmp_path, [RUN, "", F0, {"kind": "note", "message": "recorder disabled"},
                         {"kind": "future-thing", "x": 1}])
    t = read_trace(p, "t.jsonl")
    assert t.runs.schema.equals(RUNS) and t.frames.schema.equals(FRAMES)
    assert t.requests.schema.equals(REQUESTS) and t.events.schema.equals(EVENTS)
    assert t.unparsed.schema.equals(UNPARSED)
    assert t.run == "t.jsonl"
    run = t.runs.to_pylist()[0]
    assert (run["tp_size"], run["encoder_decoder"], run["line"]) == (2, False, 1)
    assert json.loads(run["record_json"]) == RUN
    fr = t.frames.to_pylist()[0]
    assert (fr["iter"], fr["rank"], fr["line"], fr["num_requests"], fr["num_dummies"]) == (7, 1, 3, 3, 1)
    assert (fr["expected"], fr["padded"], fr["scheduled"], fr["can_queue"], fr["alloc_ok"]) == (8, False, 0, False, None)
    assert [(r["pos"], r["request_id"], r["state_value"], r["dummy"]) for r in t.requests.to_pylist()] == \
        [(0, 17, 14, False), (1, 0, 13, True), (2, 18, 10, False)]
    assert t.requests.column("state").to_pylist() == [
        "GENERATION_TO_COMPLETE", "GENERATION_IN_PROGRESS", "CONTEXT_INIT"]
    ev = t.events.to_pylist()[0]
    assert (ev["kind"], ev["line"], ev["message"]) == ("trace_note", 4, "recorder disabled")
    assert [(u["line"], u["text"]) for u in t.unparsed.to_pylist()] == \
        [(2, ""), (5, json.dumps({"kind": "future-thing", "x": 1}))]


def test_run_id_is_the_run_key(tmp_path):
    t = read_trace(write(tmp_path, [dict(RUN, run_id="job-42"), F0]))
    assert t.run == "job-42"
    assert set(t.frames.column("run").to_pylist()) == {"job-42"}


@pytest.mark.parametrize("compress", ["gz", "zst"])
def test_compressed_traces_are_streamed(tmp_path, compress):
    text = (json.dumps(RUN) + "\n" + json.dumps(F0) + "\n").encode()
    p = tmp_path / f"t.jsonl.{compress}"
    p.write_bytes(gzip.compress(text) if compress == "gz" else zstandard.ZstdCompressor().compress(text))
    t = read_trace(p, "t")
    assert t.frames.num_rows == 1 and t.requests.num_rows == 3


BAD = [
    ("missing run record", [F0], 1, "missing run record"),
    ("format", [dict(RUN, format="other")], 1, "unsupported format"),
    ("version", [dict(RUN, version=3)], 1, "unsupported version"),
    ("run field", [{k: v for k, v in RUN.items() if k != "tp_size"}], 1, "missing required field 'tp_size'"),
    ("frame field", [RUN, {"kind": "frame", "iter": 1, "requests": []}], 2, "missing required field 'rank'"),
    ("request field", [RUN, dict(F0, requests=[{"id": 1}])], 2, "missing required field 'state'"),
    ("state name", [RUN, dict(F0, requests=[{"id": 1, "state": "DONE"}])], 2, "unknown request state"),
    ("state value", [RUN, dict(F0, requests=[{"id": 1, "state": 5}])], 2, "unknown request state value 5"),
    ("rank", [RUN, dict(F0, rank=2)], 2, "rank 2 out of range [0, 2)"),
    ("duplicate", [RUN, F0, dict(F0, requests=[])], 3, "duplicate frame (iter 7, rank 1)"),
    ("not json", [RUN, "{not json"], 2, "not a JSON object"),
    ("not an object", [RUN, "[1, 2]"], 2, "not a JSON object"),
    ("postpadded", [RUN, dict(F0, postpadded=1)], 2, "postpadded must be true or false"),
]


@pytest.mark.parametrize("what,lines,line,message", BAD, ids=[b[0] for b in BAD])
def test_format_errors_name_file_and_line(tmp_path, what, lines, line, message):
    p = write(tmp_path, lines)
    with pytest.raises(TraceFormatError) as ei:
        read_trace(p, "t.jsonl")
    err = ei.value
    assert err.path == str(p) and err.line == line
    assert message in err.message
    assert f"{p}:{line}:" in str(err)


def test_tables_from_records_matches_the_file_reader(tmp_path):
    a = tables_from_records([RUN, F0], "t.jsonl")
    b = read_trace(write(tmp_path, [RUN, F0]), "t.jsonl")
    assert a.frames.equals(b.frames) and a.requests.equals(b.requests)
    with pytest.raises(TraceFormatError) as ei:
        tables_from_records([RUN, dict(F0, rank=-1)], "mem")
    assert (ei.value.path, ei.value.line) == ("mem", 2)


def test_is_trace():
    assert is_trace("\n" + json.dumps(RUN) + "\n")
    assert is_trace(json.dumps(RUN)[:-10])  # a head cut inside the first line
    assert not is_trace('{"kind": "frame"}\n')
    assert not is_trace("[01/01/2026-00:00:00] [TRT-LLM] [I] iter = 1\n")
    assert not is_trace("")


def test_postpadded_is_read_and_null_when_absent(tmp_path):
    t = read_trace(write(tmp_path, [RUN, dict(F0, postpadded=True, alloc_ok=False),
                                    dict(F0, iter=8), dict(F0, iter=9, postpadded=False)]))
    assert t.frames.schema.field("postpadded").type == "bool"
    assert t.frames.column("postpadded").to_pylist() == [True, None, False]
    assert t.frames.column("alloc_ok").to_pylist() == [False, None, None]


def test_a_schema_1_0_dataset_without_postpadded_still_loads(tmp_path):
    """Schema 1.1 only appended ``frames.postpadded``: a 1.0 dataset (the 1.x layout, one
    ``TABLE.parquet`` file per table) reads with it null."""
    import pyarrow.parquet as pq

    import forensics
    from forensics.dataset.schema import SCHEMA_VERSION
    forensics.ingest([write(tmp_path, [RUN, F0])], tmp_path / "ds")
    new = forensics.load(tmp_path / "ds")
    assert new.meta["schema_version"] == SCHEMA_VERSION == "2.3"
    ds_dir = tmp_path / "old"
    ds_dir.mkdir()
    for t in ("iterations", "events", "stats", "runs", "frames", "requests", "unparsed"):
        table = new.arrow(t)
        if t == "requests":   # 1.x: the state's int code in ``state``, no ``state_value``
            table = table.set_column(table.column_names.index("state"), "state",
                                     table.column("state_value")).drop_columns(["state_value"])
        for i, field in enumerate(table.schema):    # 1.x: names as plain strings
            if pa.types.is_dictionary(field.type):
                table = table.set_column(i, field.name, table.column(i).cast(pa.string()))
        pq.write_table(table.drop_columns(["postpadded"]) if t == "frames" else table,
                       ds_dir / f"{t}.parquet")
    (ds_dir / "_meta.json").write_text(json.dumps(dict(new.meta, schema_version="1.0")))
    ds = forensics.load(ds_dir)
    assert ds.arrow("frames").schema.equals(FRAMES)
    assert ds.frames["postpadded"].isna().all() and ds.frames["padded"].tolist() == [False]
    assert ds.requests.equals(new.requests) and len(ds.states) == len(new.states) > 0


# ------------------------------------------------------------------ streaming in batches
def _fleet(n_iters=6, ranks=2):
    """A small run with dummies, notes, blank lines and a record of unknown kind in between."""
    lines = [dict(RUN, tp_size=ranks), ""]
    for it in range(n_iters):
        for r in range(ranks):
            reqs = [{"id": 100 * r + it // 2 + k, "state": "GENERATION_IN_PROGRESS"} for k in range(r + 1)]
            if (it + r) % 3 == 0:
                reqs.append({"id": 0, "state": 13, "dummy": True})
            lines.append({"kind": "frame", "iter": it, "rank": r, "requests": reqs,
                          "expected": 2, "padded": it % 2 == 0})
        if it == 2:
            lines += [{"kind": "note", "message": "hello", "iter": it}, "", {"kind": "later", "v": 1}]
    return lines


@pytest.mark.parametrize("batch_frames", [1, 2, 5, 1000])
def test_batch_boundaries_do_not_change_the_tables(tmp_path, batch_frames):
    import pyarrow as pa

    from forensics.readers.trace_v1 import iter_trace

    p = write(tmp_path, _fleet())
    whole = read_trace(p, "t")
    batches = list(iter_trace(p, "t", batch_frames=batch_frames))
    # 12 frames: one batch per batch_frames frames, plus the (possibly empty) last one.
    assert len(batches) == 12 // batch_frames + 1
    assert [b.runs.num_rows for b in batches] == [1] + [0] * (len(batches) - 1)
    assert all(b.frames.num_rows <= batch_frames for b in batches)
    for name in ("runs", "frames", "requests", "events", "unparsed"):
        got = pa.concat_tables([getattr(b, name) for b in batches])
        assert got.equals(getattr(whole, name)), name
    assert whole.frames.num_rows == 12 and whole.unparsed.column("line").to_pylist() == [2, 10, 11]
    assert whole.requests.column("pos").to_pylist()[:4] == [0, 1, 0, 1]  # rank 0: real + dummy


def test_a_duplicate_in_a_later_batch_names_its_line(tmp_path):
    from forensics.readers.trace_v1 import iter_trace

    lines = _fleet(n_iters=3) + [{"kind": "frame", "iter": 0, "rank": 1, "requests": []}]
    p = write(tmp_path, lines)  # the duplicate of (0, 1) is on the last line
    for batch_frames in (1, 2, 1000):
        with pytest.raises(TraceFormatError) as ei:
            list(iter_trace(p, "t", batch_frames=batch_frames))
        assert ei.value.line == len(lines) and "duplicate frame (iter 0, rank 1)" in ei.value.message


def test_the_first_bad_line_wins_over_a_later_duplicate_and_vice_versa(tmp_path):
    from forensics.readers.trace_v1 import iter_trace

    dup = {"kind": "frame", "iter": 0, "rank": 0, "requests": []}
    bad = {"kind": "frame", "iter": 9, "rank": 0, "requests": [{"id": 1, "state": "NOPE"}]}
    base = _fleet(n_iters=2)  # 4 frames on lines 3..6
    for lines, line, message in (
            (base + [dup, bad], 7, "duplicate frame (iter 0, rank 0)"),
            (base + [bad, dup], 7, "unknown request state"),
            # A duplicate that also has a bad request: the duplicate is reported, as unbatched.
            (base + [dict(dup, requests=bad["requests"])], 7, "duplicate frame"),
            (base + [dup, "{not json"], 7, "duplicate frame")):
        p = write(tmp_path, lines)
        for batch_frames in (1, 3, 1000):
            with pytest.raises(TraceFormatError) as ei:
                list(iter_trace(p, "t", batch_frames=batch_frames))
            assert (ei.value.line, message in ei.value.message) == (line, True), (lines[-2:], batch_frames)
    with pytest.raises(TraceFormatError) as ei:
        tables_from_records([x for x in base if x] + [dup, "not a dict"], "mem")
    assert ei.value.line == 6 and "duplicate frame" in ei.value.message


def test_progress_adds_up_to_the_file_size(tmp_path):
    from forensics.readers.trace_v1 import iter_trace

    text = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in _fleet(40)) + "\n"
    p = tmp_path / "t.jsonl.gz"
    p.write_bytes(gzip.compress(text.encode()))
    seen = []
    n = sum(b.frames.num_rows for b in iter_trace(p, "t", batch_frames=7, progress=seen.append))
    assert n == 80 and sum(seen) == p.stat().st_size and all(x > 0 for x in seen)


def test_ingest_streams_batches_and_catches_a_duplicate_across_rank_files(tmp_path, monkeypatch):
    import functools

    import forensics
    from forensics.readers import trace_v1

    monkeypatch.setattr(trace_v1, "iter_trace", functools.partial(trace_v1.iter_trace, batch_frames=2))
    run = dict(RUN, run_id="job")
    r0 = [run] + [{"kind": "frame", "iter": i, "rank": 0, "requests": [{"id": i, "state": 13}]} for i in range(5)]
    r1 = [run] + [{"kind": "frame", "iter": i, "rank": 1, "requests": []} for i in range(5)]
    d = tmp_path / "in"
    d.mkdir()
    write(d, r0, "rank-0.jsonl")
    write(d, r1, "rank-1.jsonl")
    forensics.ingest([d], tmp_path / "ds")
    ds = forensics.load(tmp_path / "ds")
    assert len(ds.runs) == 2 and len(ds.frames) == 10 and len(ds.requests) == 5
    assert ds.frames["line"].tolist() == [2, 3, 4, 5, 6] * 2
    # rank-2.jsonl repeats (iter 3, rank 0) of rank-0.jsonl on its line 4 (its second batch).
    write(d, [run] + [{"kind": "frame", "iter": i, "rank": 0 if i == 3 else 1, "requests": []}
                      for i in (7, 8, 3)], "rank-2.jsonl")
    with pytest.raises(TraceFormatError) as ei:
        forensics.ingest([d], tmp_path / "ds2")
    assert ei.value.path.endswith("rank-2.jsonl") and ei.value.line == 4
    assert "another input of this run" in ei.value.message
    assert not (tmp_path / "ds2").exists()


def test_run_frames_from_a_dataset_equal_those_from_tables(tmp_path):
    """The column-pruned, batch-read path gives the same arrays (dummies and two runs)."""
    import numpy as np

    import forensics
    from replay.frames import RunFrames

    a = write(tmp_path, [dict(RUN, run_id="a")] + _fleet()[1:], "a.jsonl")
    b = write(tmp_path, [dict(RUN, run_id="b", tp_size=1)]
              + [{"kind": "frame", "iter": i, "rank": 0, "requests": [{"id": 5, "state": 14}]}
                 for i in range(3)], "b.jsonl")
    forensics.ingest([a, b], tmp_path / "ds")
    ds = forensics.load(tmp_path / "ds")
    for run in ("a", "b"):
        got = RunFrames.from_dataset(ds, run)
        want = RunFrames.from_tables(ds.runs, ds.frames, ds.requests, run=run)
        assert got.n_real.shape == (6, 2) if run == "a" else got.n_real.shape == (3, 1)
        for name in ("iters", "n_real", "window_real", "new_real", "recorded_dummies", "rec_padded",
                     "req_frame", "req_id", "req_state", "req_pos", "req_first", "req_offsets", "line"):
            assert np.array_equal(getattr(got, name), getattr(want, name)), (run, name)
    a_frames = RunFrames.from_dataset(ds, "a")
    assert int(a_frames.recorded_dummies.sum()) == 4 and int(a_frames.n_real.sum()) == 18

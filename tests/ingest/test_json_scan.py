"""The compiled JSON Lines scanner (``forensics.readers.json_scan``) against the reference paths.

For stats the reference is the per-object parser (``stats_json._parse``) over the whole text;
for traces it is ``iter_trace`` with the scanner off (the per-frame builder). Every
table must be equal with the scanner forced on (``FORENSICS_INGEST_PATH=native``, small
blocks so a file has many), on the repository's samples, on simulated inputs of both formats
(stats; trace v1 and v2), on hand-written odd lines and on random mutations of real lines.
Also: the scanner really takes the common blocks (else the comparisons prove nothing), its
values are hand-checked, numba missing falls back, and a small input never imports numba.
"""
from __future__ import annotations

import dataclasses
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.dataset.schema import FRAMES
from forensics.errors import TraceFormatError
from forensics.readers import json_scan, stats_json, trace_tables, trace_v1

from .test_line_accounting import SHARED
from .test_trace_scan import _BAD, _ODD_OK

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "traces" / "samples"
STATS_SAMPLES = sorted(SAMPLES.glob("*/stats.jsonl"))
TRACE_SAMPLES = sorted(SAMPLES.glob("*/trace.jsonl"))
_TRACE_FIELDS = [f.name for f in dataclasses.fields(trace_v1.TraceTables)]

pytestmark = pytest.mark.skipif(json_scan.kernel() is None, reason="numba not importable")


@pytest.fixture
def native(monkeypatch):
    """The scanner forced on with small blocks; returns a list recording, per block offered
    to it, whether it took it."""
    monkeypatch.setenv(json_scan.PATH_ENV, "native")
    monkeypatch.setattr(json_scan, "BLOCK_BYTES", 4096)
    monkeypatch.setattr(json_scan, "_TEMPLATE", None)
    taken: list[bool] = []
    real_stats, real_frames = json_scan.stats, json_scan.frames

    def spy(real):
        def run(*a):
            out = real(*a)
            taken.append(out is not None)
            return out
        return run
    monkeypatch.setattr(json_scan, "stats", spy(real_stats))
    monkeypatch.setattr(json_scan, "frames", spy(real_frames))
    return taken


# ------------------------------------------------------------------------------ stats

def _stats_reference(data: bytes) -> list[list[dict]]:
    text = stats_json._Text(iter([(data, len(data), None)]), None)
    batches = list(stats_json._parse(text, stats_json._Rows("s.jsonl"), "s.jsonl"))
    return _stats_rows(batches)


def _stats_rows(batches) -> list[list[dict]]:
    out = []
    for name in ("stats", "events", "unparsed"):
        t = pa.concat_tables([getattr(b, name) for b in batches])
        out.append(t.to_pylist())
    return out


def assert_stats_same(path: Path) -> None:
    got = _stats_rows(list(stats_json.read_stats(path, "s.jsonl")))
    ref = _stats_reference(path.read_bytes())
    for table, a, b in zip(("stats", "events", "unparsed"), got, ref):
        assert len(a) == len(b), table
        for i, (x, y) in enumerate(zip(a, b)):
            assert repr(x) == repr(y), f"{path.name}: {table} row {i}: {x} != {y}"


@pytest.mark.parametrize("path", STATS_SAMPLES, ids=[p.parent.name for p in STATS_SAMPLES])
def test_stats_samples_same_rows(path, native):
    assert_stats_same(path)
    assert native and all(native[:-1])


def _stats_line(i: int, rank: int) -> dict:
    return {"iter": i, "timestamp": f"07-09-2026 11:00:{i % 60:02d}", "iterLatencyMS": 14.28 + i,
            "numActiveRequests": 3, "numQueuedRequests": 0, "maxNumActiveRequests": 16,
            "kvCacheStats": {"maxNumBlocks": 1088, "freeNumBlocks": 1042 - i, "usedNumBlocks": 46},
            "inflightBatchingStats": {"numScheduledRequests": 1, "numContextRequests": 0,
                                      "microBatchId": 0, "avgNumDecodedTokensPerIter": 1.0},
            "attentionDpRank": rank, "hostStepTimeMS": 14.28 / (i + 1)}


_STATS_ODD = [
    '{"timestamp":"t","iter":5,"attentionDpRank":1}',                       # other key order
    '{"iter":6}',                                                           # keys missing
    '{"iter":7,"newKey":3,"kvCacheStats":{"usedNumBlocks":1,"extra":2.5}}',  # keys added
    '{"iter":null,"attentionDpRank":null,"kvCacheStats":null,"timestamp":null}',
    '{"iter":true,"numActiveRequests":false,"flag":true}',
    '{"iter":8.0,"numActiveRequests":2.5,"iterLatencyMS":1e-3,"hostStepTimeMS":-0.0}',
    '{"iter":9,"iterLatencyMS":12345678901234567890.5,"x":0.30000000000000004}',
    '{"iter":10,"iterLatencyMS":1E+400,"x":-1e-400,"y":123456789012345678}',
    '{"iter":1234567890123456789012,"x":1}',                                # huge int
    '{"iter":9007199254740993.0}',                                          # float past 2**53
    '{"iter":9223372036854775808.0,"attentionDpRank":2147483648}',
    '{"iter":11,"timestamp":"caf\u00e9 \u2603"}',                           # unicode
    '{"iter":12,"timestamp":"a\\"b\\u00e9"}',                               # escapes
    '{"iter":13,"timestamp":"tab\there"}',                                  # control char
    '{"iter":14,"iter":15}',                                                # a key twice
    '{"iter":16,"xs":[1,2,{"a":3}]}',                                       # lists
    '{"iter":17,"a.b":1,"a":{"b":2}}',                                      # one dotted name
    '{"iter":18,"kvCacheStats":5}',                                         # number for object
    '{"iter":19,"numActiveRequests":"4"}',                                  # string number
    '{"iter":-0,"numActiveRequests":-5,"x":01}',                            # bad JSON (01)
    '{"iter":20,"x":NaN,"y":Infinity}',                                     # json.loads accepts
    '{"iter":21,"x":1.}',
    '{ "iter" : 22 , "kvCacheStats" : { "usedNumBlocks" : 3 } }',            # whitespace
    '  {"iter":23}  ',
    '{"iter":24}{"iter":25}',                                               # two on a line
    '{"iter":26} trailing',
    '{"iter":27,"x":1,}',                                                   # trailing comma
    '{}',
    '',                                                                     # blank line
    'not json at all',
    '{"iter":28,"kvCacheStats":{"usedNumBlocks":1}',                        # truncated
    '{"iter":29,"inflightBatchingStats":{}}',
    '{"iter":30,"deep":{"a":{"b":{"c":{"d":1}}}}}',
]


def _stats_file(tmp_path: Path, seed: int, odd: list[str], n: int = 300) -> Path:
    rng = random.Random(seed)
    lines = [json.dumps(_stats_line(i, i % 4), separators=(",", ":")) for i in range(n)]
    for text in odd:
        lines.insert(rng.randrange(len(lines) + 1), text)
    path = tmp_path / f"stats-{seed}.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode())
    return path


@pytest.mark.parametrize("seed", range(3))
def test_stats_odd_lines_same_rows(seed, tmp_path, native):
    assert_stats_same(_stats_file(tmp_path, seed, _STATS_ODD))
    assert any(native) and not all(native)


@pytest.mark.parametrize("odd", range(len(_STATS_ODD)))
def test_stats_each_odd_line_same_rows(odd, tmp_path, native):
    assert_stats_same(_stats_file(tmp_path, odd, [_STATS_ODD[odd]], n=60))


def test_stats_crlf_and_last_line_without_newline(tmp_path, native):
    path = tmp_path / "s.jsonl"
    lines = [json.dumps(_stats_line(i, 0)) for i in range(100)]
    path.write_bytes(("\r\n".join(lines)).encode())
    assert_stats_same(path)
    assert any(native)


def test_stats_values_hand_checked(monkeypatch):
    monkeypatch.setattr(json_scan, "_TEMPLATE", None)
    block = (b'{"iter":1,"timestamp":"t1","iterLatencyMS":0.1,"kv":{"a":1,"b":2.5},'
             b'"numActiveRequests":2.5,"f":true,"s":"x","attentionDpRank":3}\n'
             b'{"iter":2.0,"timestamp":null,"iterLatencyMS":3,"kv":{"a":-7e-3,"b":null},'
             b'"numActiveRequests":4,"f":false,"s":5,"attentionDpRank":1.5}\n'
             b'{"iter":3,"iterLatencyMS":2.2250738585072014e-308,"kv":{"a":123456789012345678}}\n')
    got = json_scan.stats(block, 41, "s.jsonl")
    assert got is not None
    rows = got.stats.to_pylist()
    assert [(r["line"], r["line_end"], r["iter"], r["rank"], r["timestamp"]) for r in rows] == \
        [(41, 41, 1, 3, "t1"), (42, 42, 2, None, None), (43, 43, 3, None, None)]
    assert [r["num_active_requests"] for r in rows] == [None, 4, None]
    assert [r["iter_latency_ms"] for r in rows] == [0.1, 3.0, 2.2250738585072014e-308]
    assert rows[0]["fields"] == [("kv.a", 1.0), ("kv.b", 2.5), ("numActiveRequests", 2.5),
                                 ("f", 1.0)]
    assert rows[1]["fields"] == [("kv.a", -0.007), ("f", 0.0), ("s", 5.0),
                                 ("attentionDpRank", 1.5)]
    assert rows[2]["fields"] == [("kv.a", 123456789012345678.0)]


def test_stats_rows_past_the_first_lines_bound(monkeypatch):
    """The row bound comes from the first line's length: a block of shorter lines than that
    is counted and read again, with every row."""
    monkeypatch.setattr(json_scan, "_TEMPLATE", None)
    first = json.dumps(_stats_line(0, 0), separators=(",", ":"))
    block = ("\n".join([first] + [f'{{"iter":{i}}}' for i in range(1, 400)]) + "\n").encode()
    assert len(block) // (len(first) // 2) < 400
    got = json_scan.stats(block, 1, "s.jsonl")
    assert got is not None
    assert got.stats.column("iter").to_pylist() == list(range(400))
    assert got.stats.column("line").to_pylist() == list(range(1, 401))
    assert json_scan.newlines(block) == 400


@pytest.mark.parametrize("text", ["0.1", "1e22", "1e23", "9007199254740993e-5", "5e-324",
                                  "1.7976931348623157e308", "123.456e-7", "0.000001234",
                                  "-0.0", "4.35", "12345678901234567.0", "1e-22", "1e-23"])
def test_stats_floats_exactly_as_python(text, monkeypatch):
    """Clinger's fast path where it is exact, Python's float() on the text elsewhere."""
    monkeypatch.setattr(json_scan, "_TEMPLATE", None)
    got = json_scan.stats(f'{{"iter":1,"x":{text}}}\n'.encode(), 1, "s")
    value = got.stats.to_pylist()[0]["fields"][0][1]
    assert repr(value) == repr(float(text))


@pytest.mark.parametrize("block", [
    b'{"iter":1}\n\n', b'{"iter":1,"s":"a\\"b"}\n', b'{"iter":1,"xs":[1]}\n', b'{"iter":1}',
    b'{"iter":1,"iter":2}\n', b'{"iter":1,"x":NaN}\n', b'{"iter":12345678901234567890}\n',
    b'{"iter":1,"x":"\xff"}\n',
])
def test_stats_blocks_declined(block, monkeypatch):
    monkeypatch.setattr(json_scan, "_TEMPLATE", None)
    assert json_scan.stats(block, 1, "s") is None


# ------------------------------------------------------------------------------ trace

def _trace_tables(path: Path, *, reference: bool, monkeypatch, batch_frames=64):
    with monkeypatch.context() as m:
        if reference:
            m.setenv(json_scan.PATH_ENV, "reference")
        return [[getattr(b, n) for n in _TRACE_FIELDS]
                for b in trace_v1.iter_trace(path, "t.jsonl", batch_frames=batch_frames)]


def assert_trace_same(path: Path, monkeypatch, **kw) -> None:
    got = _trace_tables(path, reference=False, monkeypatch=monkeypatch, **kw)
    ref = _trace_tables(path, reference=True, monkeypatch=monkeypatch, **kw)
    assert len(got) == len(ref)
    for gb, rb in zip(got, ref):
        for name, a, b in zip(_TRACE_FIELDS, gb, rb):
            assert a.schema == b.schema, name
            assert a.equals(b), (path.name, name)


@pytest.mark.parametrize("path", TRACE_SAMPLES, ids=[p.parent.name for p in TRACE_SAMPLES])
def test_trace_samples_same_tables(path, native, monkeypatch):
    assert_trace_same(path, monkeypatch)
    assert native and all(native[:-1])


def _trace_file(tmp_path: Path, seed: int, extra: list[str]) -> Path:
    rng = random.Random(seed)
    lines = TRACE_SAMPLES[2].read_text().splitlines()
    head, frames = lines[:1], lines[1:]
    for text in extra:
        frames.insert(rng.randrange(len(frames) + 1), text)
    path = tmp_path / f"trace-{seed}.jsonl"
    path.write_bytes(("\n".join(head + frames) + "\n").encode())
    return path


_TRACE_ODD = [*_ODD_OK,
              '{"kind":"frame","iter":9200001,"rank":0,"requests":[{"id":-3,"state":"CONTEXT_INIT",'
              '"dummy":false}]}',
              '{ "kind" : "frame" , "iter" : 9200002 , "rank" : 1 , "requests" : [ ] }',
              '{"iter": 9200003, "kind": "frame", "requests": [{"state": "CONTEXT_INIT", "id": 4}],'
              ' "rank": 0, "can_queue": null, "postpadded": true, "scheduled": 3}',
              '{"kind": "frame", "iter": 9200004, "rank": 0, "requests": [], "unknown": 1}',
              '{"kind": "frame", "iter": 9200005, "rank": 0, "requests": [{"id": 5, "state": '
              '"CONTEXT_INIT", "extra": 1}]}',
              '{"kind": "frame", "iter": 9200006, "rank": 0, "requests": [], "iter": 9200007}',
              '  {"kind": "frame", "iter": 9200008, "rank": 0, "requests": []}  ',
              '{"kind": "frame", "iter": 9200009, "rank": 0, "requests": [{"id": 6, "state": '
              '"CONTEXT\\u005fINIT"}]}',
              '{"kind": "note", "message": "caf\u00e9 \u2603"}',
              '']


@pytest.mark.parametrize("seed", range(3))
def test_trace_odd_lines_same_tables(seed, tmp_path, native, monkeypatch):
    assert_trace_same(_trace_file(tmp_path, seed, _TRACE_ODD), monkeypatch, batch_frames=50)
    assert any(native) and not all(native)


@pytest.mark.parametrize("bad", range(len(_BAD)))
def test_trace_bad_line_same_error(bad, tmp_path, native, monkeypatch):
    path = _trace_file(tmp_path, 1000 + bad, [*_ODD_OK[:3], _BAD[bad]])
    with pytest.raises(TraceFormatError) as fast:
        _trace_tables(path, reference=False, monkeypatch=monkeypatch)
    assert any(native)
    with pytest.raises(TraceFormatError) as slow:
        _trace_tables(path, reference=True, monkeypatch=monkeypatch)
    assert (str(fast.value), fast.value.line) == (str(slow.value), slow.value.line)


def test_trace_duplicate_frame_named_at_its_line(tmp_path, native):
    lines = TRACE_SAMPLES[2].read_text().splitlines()
    path = tmp_path / "dup.jsonl"
    path.write_text("\n".join(lines + [lines[5]]) + "\n")
    with pytest.raises(TraceFormatError) as e:
        list(trace_v1.iter_trace(path, batch_frames=100))
    assert all(native[:-1])
    assert e.value.line == len(lines) + 1 and "duplicate frame (iter 1, rank 0)" in str(e.value)


def test_frames_hand_checked():
    """The columns of a block, against hand-worked values."""
    block = (b'{"kind": "frame", "iter": 3, "rank": 1, "requests": [{"id": 7, "state": "CONTEXT_INIT"},'
             b' {"id": -2, "state": "LlmRequestState.GENERATION_IN_PROGRESS", "dummy": true}],'
             b' "padded": false, "scheduled": null}\n'
             b'{"kind":"frame","iter":4,"rank":0,"requests":[],"alloc_ok":true,"expected":0}\r\n')
    c = json_scan.frames(block, 10, 2)
    assert (c.line.tolist(), c.iter.tolist(), c.rank.tolist()) == ([10, 11], [3, 4], [1, 0])
    assert (c.num_requests.tolist(), c.num_dummies.tolist()) == ([2, 0], [1, 0])
    assert (c.req_id.tolist(), c.req_dummy.tolist()) == ([7, -2], [False, True])
    assert c.req_state.tolist() == [10, 13]      # CONTEXT_INIT, GENERATION_IN_PROGRESS
    assert {k: v.to_pylist() for k, v in c.optional.items()} == {
        "expected": [None, 0], "padded": [False, None], "scheduled": [None, None],
        "can_queue": [None, None], "alloc_ok": [None, True], "postpadded": [None, None],
        "kv_precheck_ok": [None, None]}
    assert (c.iter.dtype, c.rank.dtype, c.num_requests.dtype, c.num_dummies.dtype) == (
        np.int64, np.int32, np.int32, np.int32)
    assert (c.req_id.dtype, c.req_state.dtype, c.req_dummy.dtype) == (np.int64, np.int16, np.bool_)
    assert all(v.type == FRAMES.field(k).type for k, v in c.optional.items())


_GOOD = '{"kind": "frame", "iter": 1, "rank": 0, "requests": [{"id": 1, "state": "CONTEXT_INIT"}]}'


@pytest.mark.parametrize("line", [
    "", _GOOD + _GOOD, _GOOD.replace("CONTEXT_INIT", "context_init"),
    _GOOD.replace('"CONTEXT_INIT"', "10"), _GOOD.replace('"frame"', '"note"'),
    _GOOD.replace('"kind": "frame", ', ""), _GOOD.replace('"rank": 0', '"rank": 2'),
    _GOOD.replace('"iter": 1', '"iter": -1'), _GOOD.replace('"iter": 1', '"iter": 1.0'),
    _GOOD.replace('"iter": 1', '"iter": 12345678901234567890'),
    _GOOD.replace("}]}", ', "dummy": null}]}'), _GOOD.replace('{"id": 1, ', '{'),
    _GOOD.replace("]}", '], "x": [1,]}'), _GOOD.replace("]}", '], "expected": true}'),
    _GOOD.replace("]}", '], "padded": 1}'), _GOOD[:-5],
])
def test_frame_blocks_declined(line):
    assert json_scan.frames(f"{_GOOD}\n{_GOOD}\n".encode(), 1, 2) is not None
    assert json_scan.frames(f"{_GOOD}\n{line}\n{_GOOD}\n".encode(), 1, 2) is None


# ------------------------------------------------------------- simulated inputs, mutations

@pytest.fixture(scope="module")
def simulated(tmp_path_factory) -> list[Path]:
    from forensics.simulate import SCENARIOS, simulate
    out = []
    for i, name in enumerate(sorted(SCENARIOS)):
        d = tmp_path_factory.mktemp(name)
        simulate(name, out_dir=d, iters=120, ranks=4 if name == "fleet-1h" else None,
                 write=("trace", "stats"), state_names=bool(i % 2))
        out.extend(sorted(d.glob("*.jsonl")))
    return out


def test_simulated_inputs_same_tables(simulated, native, monkeypatch, tmp_path):
    assert any(p.name.startswith("stats") for p in simulated)
    for path in simulated:
        if path.name.startswith("stats"):
            monkeypatch.setattr(json_scan, "_TEMPLATE", None)
            assert_stats_same(path)
            continue
        assert_trace_same(path, monkeypatch)
        # the same frames under a format v1 run record (the reader takes both versions)
        lines = path.read_text().splitlines()
        run = json.loads(lines[0])
        if run.get("state_numbering") is None:
            run.update(version=1)
            run.pop("model_arch", None)
            v1 = tmp_path / f"v1-{path.parent.name}.jsonl"
            v1.write_text("\n".join([json.dumps(run), *lines[1:]]) + "\n")
            assert_trace_same(v1, monkeypatch)
    assert sum(native) > len(simulated)


_MUTATION_CHARS = list('{}[]":,. -+eE0123456789\\\tnultrfa\u00e9') + ["", "\n"]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(at=st.integers(0, 10_000), ch=st.sampled_from(_MUTATION_CHARS), how=st.sampled_from("rid"),
       seed=st.integers(0, 3))
def test_mutated_stats_line_same_rows(at, ch, how, seed, tmp_path_factory):
    line = json.dumps(_stats_line(seed, seed), separators=(",", ":"))
    i = at % len(line)
    bad = line[:i] + ch + line[i + (how != "i"):] if how != "d" else line[:i] + line[i + 1:]
    d = tmp_path_factory.mktemp("m")
    path = d / "s.jsonl"
    lines = [json.dumps(_stats_line(k, k % 3), separators=(",", ":")) for k in range(20)]
    path.write_bytes(("\n".join(lines[:10] + [bad] + lines[10:]) + "\n").encode())
    env = {json_scan.PATH_ENV: "native"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    json_scan._TEMPLATE = None
    try:
        assert_stats_same(path)
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


@given(at=st.integers(0, 10_000), ch=st.sampled_from(_MUTATION_CHARS), how=st.sampled_from("rid"))
def test_mutated_frame_line_same_outcome(at, ch, how):
    """A frame line mutated anywhere: the scanner takes the block only if the per-frame
    builder reads the same frame from it."""
    line = ('{"kind": "frame", "iter": 12, "rank": 1, "requests": [{"id": 7, "state": '
            '"GENERATION_IN_PROGRESS"}, {"id": 9, "state": "CONTEXT_INIT", "dummy": true}], '
            '"expected": 2, "padded": false}')
    i = at % len(line)
    bad = line[:i] + ch + line[i + (how != "i"):] if how != "d" else line[:i] + line[i + 1:]
    block = f"{line}\n{bad}\n".replace('"iter": 12', '"iter": 11', 1).encode()
    got = json_scan.frames(block, 2, 4)
    if got is None:
        return
    builder = trace_tables.TraceBuilder("t", "t")
    builder.add_line('{"kind": "run", "format": "adp-trace", "version": 2, "tp_size": 4, '
                     '"pp_size": 1, "max_batch_size": 8, "max_num_active_requests": 8, '
                     '"disaggregated": false, "overlap_scheduler": false, "build": "b"}', 1)
    for k, text in enumerate(block.decode().splitlines()):
        builder.add_line(text, 2 + k)
    ref = builder.flush()
    builder2 = trace_tables.TraceBuilder("t", "t")
    builder2.add_line('{"kind": "run", "format": "adp-trace", "version": 2, "tp_size": 4, '
                      '"pp_size": 1, "max_batch_size": 8, "max_num_active_requests": 8, '
                      '"disaggregated": false, "overlap_scheduler": false, "build": "b"}', 1)
    builder2.add_frames(got)
    mine = builder2.flush()
    assert ref.frames.equals(mine.frames) and ref.requests.equals(mine.requests)
    assert ref.unparsed.num_rows == 0 and ref.events.num_rows == 0


# --------------------------------------------------------------------- shared samples

def test_shared_json_lines_same(native, monkeypatch):
    """Any JSON Lines file among the shared samples (none today: they are logs) reads alike."""
    if not SHARED.is_dir():
        pytest.skip("../shared/samples absent")
    paths = sorted((SHARED / "samples").rglob("*.jsonl"))
    if not paths:
        pytest.skip("no JSON Lines among the shared samples")
    for path in paths:
        if trace_v1.is_trace(path.read_text(errors="replace")[:4096]):
            assert_trace_same(path, monkeypatch)
        else:
            assert_stats_same(path)


# ------------------------------------------------------------------- switching paths

def test_without_numba_the_reference_reader_reads(tmp_path):
    stats = _stats_file(tmp_path, 0, [])
    code = ("import sys; sys.modules['numba'] = sys.modules['llvmlite'] = None\n"
            "from forensics.readers import json_scan, stats_json, trace_v1\n"
            "assert json_scan.kernel() is None and not json_scan.enabled(1 << 40)\n"
            "n = sum(b.stats.num_rows for b in stats_json.read_stats(sys.argv[1], 'x'))\n"
            "m = sum(b.frames.num_rows for b in trace_v1.iter_trace(sys.argv[2], 'y'))\n"
            "print(n, m)\n")
    out = subprocess.run([sys.executable, "-c", code, str(stats), str(TRACE_SAMPLES[2])],
                         capture_output=True, text=True, check=False,
                         env=dict(os.environ, PYTHONPATH=str(REPO), FORENSICS_INGEST_PATH="native"))
    assert out.returncode == 0, out.stderr
    frames = trace_v1.read_trace(TRACE_SAMPLES[2]).frames.num_rows
    assert out.stdout.split() == ["300", str(frames)]


def test_a_numba_that_refuses_the_kernels_turns_the_path_off(tmp_path):
    """``_nrt`` is a private numba option: a numba that refuses it (here: njit raises when
    given it) leaves the reference reader, not a failed ingest. No saved object to load (an empty
    cache directory), so the kernels must be compiled."""
    stats = _stats_file(tmp_path, 0, [])
    code = ("import sys, numba\n"
            "from numba.core.errors import UnsupportedError\n"
            "real = numba.njit\n"
            "def njit(*a, **k):\n"
            "    if '_nrt' in k:\n"
            "        raise UnsupportedError('option _nrt')\n"
            "    return real(*a, **k)\n"
            "numba.njit = njit\n"
            "from forensics.readers import json_scan, stats_json\n"
            "from forensics.readers.compiled import cache_dirs\n"
            "cache_dirs.searched = lambda: [__import__('pathlib').Path(sys.argv[2])]\n"
            "assert json_scan.kernel() is None and not json_scan.enabled(1 << 40)\n"
            "print(sum(b.stats.num_rows for b in stats_json.read_stats(sys.argv[1], 'x')))\n")
    out = subprocess.run([sys.executable, "-c", code, str(stats), str(tmp_path)],
                         capture_output=True, text=True, check=False,
                         env=dict(os.environ, PYTHONPATH=str(REPO), FORENSICS_INGEST_PATH="native"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["300"]


def _saved_object(directory: Path) -> Path:
    """The kernels' object files saved into ``directory``; their common stem."""
    import llvmlite.binding as llvm

    from forensics.readers.compiled import builder, cache_dirs
    from forensics.readers.compiled.library import object_key

    cache_dirs.set_numba_cache()   # numba's cache in the user cache: a load after the first
    from forensics.readers.compiled import json_kernel

    objects, meta = builder._objects(json_kernel.ENTRY_POINTS)
    stem = directory / f"{json_scan.LIBRARY.stem}-{object_key(llvm, json_scan.LIBRARY)}"
    assert builder._save(stem, objects, meta)
    return stem


def test_saved_object_runs_without_numba(tmp_path, monkeypatch):
    """The kernels' object file, loaded by llvmlite alone in a process where numba cannot be
    imported, reads stats and trace blocks (every one of them) as the reference paths do."""
    _saved_object(tmp_path / "cache")
    stats = _stats_file(tmp_path, 0, [])
    code = ("import sys; sys.modules['numba'] = None\n"
            "from forensics.readers import json_scan, stats_json, trace_v1\n"
            "from forensics.readers.compiled import loader\n"
            "assert json_scan.kernel() is not None and loader._engines\n"
            "real = json_scan.stats, json_scan.frames\n"
            "took = []\n"
            "def spy(f):\n"
            "    def run(*a):\n"
            "        out = f(*a)\n"
            "        took.append(out is not None)\n"
            "        return out\n"
            "    return run\n"
            "json_scan.stats, json_scan.frames = map(spy, real)\n"
            "s = [b.stats for b in stats_json.read_stats(sys.argv[1], 's.jsonl')]\n"
            "t = [b.frames for b in trace_v1.iter_trace(sys.argv[2], 't.jsonl')]\n"
            "import pyarrow as pa, pickle\n"
            "sys.stdout.buffer.write(pickle.dumps((pa.concat_tables(s).to_pylist(), "
            "pa.concat_tables(t).to_pylist(), took, sys.modules.get('numba') is not None)))\n")
    out = subprocess.run([sys.executable, "-c", code, str(stats), str(TRACE_SAMPLES[2])],
                         capture_output=True, check=False,
                         env=dict(os.environ, PYTHONPATH=str(REPO), FORENSICS_INGEST_PATH="native",
                                  NUMBA_CACHE_DIR=str(tmp_path / "cache"),
                                  FORENSICS_CACHE_DIR=str(tmp_path / "user")))
    assert out.returncode == 0, out.stderr.decode()
    import pickle
    s_rows, t_rows, took, numba_loaded = pickle.loads(out.stdout)
    assert took and all(took) and not numba_loaded
    assert s_rows == _stats_reference(stats.read_bytes())[0]
    ref = _trace_tables(TRACE_SAMPLES[2], reference=True, monkeypatch=monkeypatch,
                        batch_frames=1 << 20)
    assert t_rows == pa.concat_tables([b[_TRACE_FIELDS.index("frames")] for b in ref]).to_pylist()


def test_damaged_object_file_is_not_loaded(tmp_path):
    """A damaged saved object of the JSON kernels is refused by its digest (LLVM would crash)."""
    import llvmlite.binding as llvm

    from forensics.readers.compiled import loader

    stem = _saved_object(tmp_path)
    assert loader._load(llvm, stem, json_scan.LIBRARY) is not None
    obj = stem.parent / (stem.name + ".stats.o")
    obj.write_bytes(obj.read_bytes()[:1000])
    assert loader._load(llvm, stem, json_scan.LIBRARY) is None


def test_small_inputs_never_import_numba(tmp_path):
    code = ("import sys, forensics\n"
            "forensics.ingest(sys.argv[1:3], sys.argv[3])\n"
            "print('numba' in sys.modules or 'llvmlite' in sys.modules)\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop(json_scan.PATH_ENV, None)
    d = SAMPLES / "healthy"
    out = subprocess.run([sys.executable, "-c", code, str(d / "stats.jsonl"),
                          str(d / "trace.jsonl"), str(tmp_path / "ds")],
                         capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split()[-1] == "False"


# the size and environment switch: test_native_scan.test_switch_by_size_and_environment


def test_newline_count_is_kept_per_thread(monkeypatch):
    """Another thread counting its own block does not replace this thread's kept count (a Dask
    worker's threads may read two files at once)."""
    import threading

    if json_scan.kernel() is None:
        pytest.skip("numba absent")
    a, b = b"x\ny\nz\n", b"only one\n"
    assert json_scan.newlines(a) == 3
    other = []
    t = threading.Thread(target=lambda: other.append(json_scan.newlines(b)))
    t.start()
    t.join()
    assert other == [1]

    class NoCounting:
        def __getattr__(self, name):
            raise AssertionError("counted again")

    monkeypatch.setattr(json_scan, "kernel", lambda: NoCounting())
    assert json_scan.newlines(a) == 3      # this thread's count, kept

"""The compiled frame path of the trace reader (``json_scan.frames``) gives exactly the
per-frame builder's tables, batches and errors.

The reference is ``iter_trace`` with the scanner switched off (``FORENSICS_INGEST_PATH=reference``):
the per-frame builder, the scanner's specification, which reads small inputs and every block
the scanner declines. The lists of odd and bad lines are shared with ``test_json_scan``.
"""
from __future__ import annotations

import dataclasses
import gzip
import random
from pathlib import Path

import pytest

from forensics.errors import TraceFormatError
from forensics.readers import json_scan, trace_v1
from forensics.simulate import simulate

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "traces" / "samples").glob("*/trace.jsonl"))
_FIELDS = [f.name for f in dataclasses.fields(trace_v1.TraceTables)]


def _batches(path, monkeypatch, *, fast: bool, batch_frames: int = trace_v1.DEFAULT_BATCH_FRAMES):
    """Every batch of ``iter_trace`` as a list of tables, the compiled path on or off (on: as
    small blocks as the reference's, ``trace_v1.BLOCK_BYTES``)."""
    with monkeypatch.context() as m:
        m.setenv(json_scan.PATH_ENV, "native" if fast else "reference")
        m.setattr(json_scan, "BLOCK_BYTES", trace_v1.BLOCK_BYTES)
        return [[getattr(b, n) for n in _FIELDS]
                for b in trace_v1.iter_trace(path, "t.jsonl", batch_frames=batch_frames)]


def _assert_same(path, monkeypatch, **kw) -> None:
    fast = _batches(path, monkeypatch, fast=True, **kw)
    slow = _batches(path, monkeypatch, fast=False, **kw)
    assert len(fast) == len(slow)
    for fb, sb in zip(fast, slow):
        for name, a, b in zip(_FIELDS, fb, sb):
            assert a.schema == b.schema, name
            assert a.equals(b), name


def _error(path, monkeypatch, *, fast: bool) -> TraceFormatError:
    with pytest.raises(TraceFormatError) as e:
        _batches(path, monkeypatch, fast=fast, batch_frames=64)
    return e.value


def _counting(monkeypatch) -> list[bool]:
    """Record, per block offered to the compiled path (forced on), whether it took it."""
    monkeypatch.setenv(json_scan.PATH_ENV, "native")
    taken: list[bool] = []
    real = json_scan.frames

    def spy(*a):
        out = real(*a)
        taken.append(out is not None)
        return out
    monkeypatch.setattr(json_scan, "frames", spy)
    return taken


@pytest.mark.parametrize("path", SAMPLES, ids=[p.parent.name for p in SAMPLES])
@pytest.mark.parametrize("batch_frames", [trace_v1.DEFAULT_BATCH_FRAMES, 37])
def test_samples_same_tables_and_batches(path, batch_frames, monkeypatch):
    monkeypatch.setattr(trace_v1, "BLOCK_BYTES", 4096)   # many blocks, cuts inside them
    _assert_same(path, monkeypatch, batch_frames=batch_frames)


def test_samples_take_the_compiled_path(monkeypatch):
    taken = _counting(monkeypatch)
    trace_v1.read_trace(SAMPLES[0])
    assert taken and all(taken)


#: Iterations of the fleet run: 32 ranks x 1,100 = 35,200 frames, more than one batch
#: (``trace_v1.DEFAULT_BATCH_FRAMES``), ~31 MB: several blocks of either path.
FLEET_ITERS = 1100


@pytest.fixture(scope="module")
def fleet_trace(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fleet")
    simulate("fleet-1h", out_dir=out, iters=FLEET_ITERS, log_ranks="0")
    return out / "trace.jsonl"


def test_gzip_same_tables(tmp_path, monkeypatch):
    path = tmp_path / "t.jsonl.gz"
    with gzip.open(path, "wb") as f:
        f.write(SAMPLES[2].read_bytes())
    monkeypatch.setattr(trace_v1, "BLOCK_BYTES", 4096)
    _assert_same(path, monkeypatch, batch_frames=100)
    plain = trace_v1.read_trace(SAMPLES[2], "t.jsonl")
    assert trace_v1.read_trace(path, "t.jsonl").requests.equals(plain.requests)


def test_fleet_run_same_tables(fleet_trace, monkeypatch):
    _assert_same(fleet_trace, monkeypatch)
    taken = _counting(monkeypatch)
    t = trace_v1.read_trace(fleet_trace)
    assert len(taken) > 1 and all(taken)
    assert t.frames.num_rows == FLEET_ITERS * 32 > trace_v1.DEFAULT_BATCH_FRAMES


# --- mixed files: good frames of a sample with odd-but-valid and bad lines put in ---------

_ODD_OK = [
    "",                                                       # blank line
    '{"kind": "note", "message": "recorder off", "rank": 1}',
    '{"kind": "mystery", "x": 1}',
    '{"kind": "frame", "iter": 9000001, "rank": 0, "requests": [{"id": 5, "state": 13}]}',
    '{"kind": "frame", "iter": 9000002, "rank": 0, "requests": [{"id": 5, "state": "generation_in_progress"}]}',
    '{"kind": "frame", "iter": 9000003, "rank": 0, "requests": [{"id": 5, "state": " CONTEXT_INIT"}]}',
    '{"kind": "frame", "iter": 9000004, "rank": 1, "requests": [], "padded": null, "expected": null}',
    '{"kind": "frame", "iter": 9000005, "rank": 1, "requests": [{"id": 1, "state": "CONTEXT_INIT", "x": [1]}], "y": {}}\r',
    '{"kind": "frame", "iter": 9000006, "rank": 1, "requests": [{"id": 1, "state": "LlmRequestState.CONTEXT_INIT"}]}',
    '{"kind": "frame", "iter": 9000007, "rank": 1, "requests": [{"id": 1, "state": "CONTEXT_INIT", "dummy": true}], "note": "caf\\u00e9"}',
    '  {"kind": "frame", "iter": 9000008, "rank": 1, "requests": []}',
    # a key given twice: its last value, as json.loads keeps it
    '{"kind": "frame", "iter": 1, "iter": 9000009, "rank": 1, "requests": [{"id": 2, "id": 3, "state": "CONTEXT_INIT"}]}',
    # requests nearly laid out as the scanner's common case ({"id": N, "state": "NAME"}) is
    '{"kind": "frame", "iter": 9000010, "rank": 1, "requests": [{"id": 1234567890123456789, "state": "CONTEXT_INIT"}, '
    '{"id": 0, "state": "CONTEXT_INIT" }, {"id": 7, "state": "GENERATION_IN_PROGRESS", "dummy": false}, '
    '{"id": 8,"state": "CONTEXT_INIT"}, {"id": 9, "state": "GENERATION_COMPLETE"}]}',
]

_BAD = [
    '{"kind": "frame", "iter": 9100001, "rank": 0, "requests": [{"id": 5, "state": "NOT_A_STATE"}]}',
    '{"kind": "frame", "iter": 9100002, "rank": 0, "requests": [{"id": 5, "state": 99}]}',
    '{"kind": "frame", "iter": 9100003, "rank": 99, "requests": []}',
    '{"kind": "frame", "iter": -1, "rank": 0, "requests": []}',
    '{"kind": "frame", "rank": 0, "requests": []}',
    '{"kind": "frame", "iter": 9100004, "rank": 0}',
    '{"kind": "frame", "iter": 9100005, "rank": 0, "requests": {}}',
    '{"kind": "frame", "iter": 9100006, "rank": 0, "requests": [null]}',
    '{"kind": "frame", "iter": 9100007, "rank": 0, "requests": [{"id": 5}]}',
    '{"kind": "frame", "iter": 9100008, "rank": 0, "requests": [{"id": 5, "state": "CONTEXT_INIT", "dummy": null}]}',
    '{"kind": "frame", "iter": 9100009, "rank": 0, "requests": [{"id": 5, "state": "CONTEXT_INIT", "dummy": 1}]}',
    '{"kind": "frame", "iter": 9100010, "rank": 0, "requests": [{"id": 99999999999999999999, "state": "CONTEXT_INIT"}]}',
    '{"kind": "frame", "iter": 9100011.0, "rank": 0, "requests": []}',
    '{"kind": "frame", "iter": 9100012, "rank": true, "requests": []}',
    '{"kind": "frame", "iter": 9100013, "rank": 0, "requests": [], "expected": 1.5}',
    '{"kind": "frame", "iter": 9100014, "rank": 0, "requests": [], "padded": 0}',
    '{"kind": "frame", "iter": 9100016, "rank": 0, "requests": [], "expected": 9223372036854775808}',
    '{"kind": "frame", "iter": 4611686018427387904, "rank": 0, "requests": []}',
    '{"kind": "frame", "iter": 9100015, "rank": 0, "requests": []',
    '{"kind": "frame", "iter": 9100017, "rank": 0, "requests": [{"id": 05, "state": "CONTEXT_INIT"}]}',
    '{"kind": "frame", "iter": 9100018, "rank": 0, "requests": [{"id": 5, "state": "CONTEXT_INIT"]}',
    '{"kind": "run", "format": "adp-trace", "version": 1}',
    '[1, 2]',
    '{"kind": "frame", "iter": 0, "rank": 0, "requests": []}',    # duplicate of the sample's first frame
]


def _mixed(tmp_path, seed: int, extra: list[str]) -> Path:
    rng = random.Random(seed)
    lines = SAMPLES[2].read_text().splitlines()
    head, frames = lines[:1], lines[1:]
    for text in extra:
        frames.insert(rng.randrange(len(frames) + 1), text)
    path = tmp_path / f"mixed-{seed}.jsonl"
    path.write_bytes(("\n".join(head + frames) + "\n").encode())
    return path


@pytest.mark.parametrize("seed", range(4))
def test_odd_but_valid_lines_same_tables(seed, tmp_path, monkeypatch):
    path = _mixed(tmp_path, seed, _ODD_OK)
    monkeypatch.setattr(trace_v1, "BLOCK_BYTES", 2048)
    _assert_same(path, monkeypatch, batch_frames=50)
    t = trace_v1.read_trace(path)
    assert t.unparsed.num_rows == 2 and t.events.num_rows == 1


@pytest.mark.parametrize("bad", range(len(_BAD)))
def test_bad_line_same_error(bad, tmp_path, monkeypatch):
    seed = 1000 + bad
    path = _mixed(tmp_path, seed, [*_ODD_OK[:3], _BAD[bad]])
    monkeypatch.setattr(trace_v1, "BLOCK_BYTES", 2048)
    taken = _counting(monkeypatch)
    fast = _error(path, monkeypatch, fast=True)
    assert any(taken)              # blocks around the bad line did go the compiled way
    slow = _error(path, monkeypatch, fast=False)
    assert (str(fast), fast.line, fast.path) == (str(slow), slow.line, slow.path)
    first_frame = SAMPLES[2].read_text().splitlines()[1]   # the duplicate's earlier twin
    assert path.read_text().splitlines()[fast.line - 1] in (_BAD[bad], first_frame)


def test_duplicate_across_batches_and_compiled_blocks(tmp_path, monkeypatch):
    """A frame repeated far later (other block, other batch) is named at the later line."""
    lines = SAMPLES[2].read_text().splitlines()
    path = tmp_path / "dup.jsonl"
    path.write_text("\n".join(lines + [lines[5]]) + "\n")
    monkeypatch.setattr(trace_v1, "BLOCK_BYTES", 2048)
    taken = _counting(monkeypatch)
    with pytest.raises(TraceFormatError) as e:
        list(trace_v1.iter_trace(path, batch_frames=100))
    assert all(taken[:-1])
    assert e.value.line == len(lines) + 1 and "duplicate frame (iter 1, rank 0)" in str(e.value)


# --- every simulated scenario, states as names and as ints, plain and gzip ----------------

@pytest.fixture(scope="module")
def simulated_traces(tmp_path_factory) -> list[tuple[Path, bool]]:
    from forensics.simulate import SCENARIOS, simulate
    out = []
    for i, name in enumerate(sorted(SCENARIOS)):
        for names in (True, False):
            d = tmp_path_factory.mktemp(f"{name}-{names}")
            simulate(name, out_dir=d, iters=150, ranks=4 if name == "fleet-1h" else None,
                     write=("trace",), state_names=names, compression="gz" if i % 2 else None)
            out.extend((p, names) for p in sorted(d.glob("trace.jsonl*")))
    return out


def test_simulated_scenarios_same_tables(simulated_traces, monkeypatch):
    monkeypatch.setattr(trace_v1, "BLOCK_BYTES", 8192)
    for path, names in simulated_traces:
        _assert_same(path, monkeypatch, batch_frames=500)
        taken = _counting(monkeypatch)
        trace_v1.read_trace(path)
        # int states are the per-frame builder's to read (exact names only when compiled)
        assert taken and (all(taken) if names else not any(taken)), path

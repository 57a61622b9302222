"""A malformed request-state trace is either read or refused with a TraceFormatError naming the
file and line: never a bare exception (KeyError, TypeError, OverflowError, ArrowInvalid...)."""
from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.errors import TraceFormatError
from forensics.readers.trace_v1 import read_trace

RUN = {"kind": "run", "format": "adp-trace", "version": 1, "tp_size": 2, "pp_size": 1,
       "max_batch_size": 4, "max_num_active_requests": 4, "disaggregated": True,
       "overlap_scheduler": True, "build": "prefix-2026"}
NASTY = [None, -1, 2**70, 1.5, "x", "", [], {}, True, "GENERATION_DONE", 99, "13", float("nan")]


def frames(rng: random.Random, n: int) -> list[dict]:
    out = []
    for i in range(n):
        for r in range(2):
            out.append({"kind": "frame", "iter": i, "rank": r,
                        "requests": [{"id": 10 * i + r, "state": rng.choice([8, 13, 14, "CONTEXT_INIT"])}],
                        "expected": 2, "padded": False, "scheduled": 1, "can_queue": True})
    return out


def mutate(rec: dict, rng: random.Random) -> dict:
    rec = json.loads(json.dumps(rec))
    target = rec["requests"][0] if rec.get("requests") and rng.random() < 0.4 else rec
    key = rng.choice(sorted(target))
    if rng.random() < 0.2:
        del target[key]
    else:
        target[key] = rng.choice(NASTY)
    return rec


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 6))
def test_mutated_traces_are_read_or_refused_with_file_and_line(seed, n):
    rng = random.Random(seed)
    recs = [RUN] + frames(rng, n)
    k = rng.randrange(len(recs))
    recs[k] = mutate(recs[k], rng)
    lines = [json.dumps(r) for r in recs]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.jsonl"
        path.write_text("\n".join(lines) + "\n")
        try:
            read_trace(path, "t.jsonl")
        except TraceFormatError as e:
            assert e.path is not None and e.line is not None and 1 <= e.line <= len(lines), str(e)

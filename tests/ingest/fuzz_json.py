"""Mutated JSON Lines inputs (iteration stats and request-state traces) for fuzzing their readers
(the suite's bounded run in ``test_fuzz.py``, long runs in ``benchmarks/fuzz.py``).

A valid file is built, then corrupted the ways real files are: lone surrogate escapes
(``"\\udcff"``, what ``json.dumps`` writes for an undecodable byte) in string values and keys,
and a cut anywhere (a writer killed mid-line), plain or gzip-compressed.
"""
from __future__ import annotations

import gzip
import json
import random

SURROGATES = ["\udcff", "\udc80", "\ud800", "\udfff", "\ud83d"]


def _text(rng: random.Random, base: str) -> str:
    """``base`` with a lone surrogate inserted somewhere, or as it is."""
    if rng.random() < 0.5:
        return base
    at = rng.randrange(len(base) + 1)
    return base[:at] + rng.choice(SURROGATES) + base[at:]


def stats_lines(rng: random.Random, n: int) -> list[str]:
    out = []
    for i in range(n):
        obj = {"iter": i, "timestamp": _text(rng, "07-09-2026 16:18:39"), "iterLatencyMS": 1.5,
               "numActiveRequests": rng.randrange(5), "attentionDpRank": rng.randrange(2),
               "kvCacheStats": {"usedNumBlocks": rng.randrange(9)}}
        if rng.random() < 0.2:
            obj[_text(rng, "extraKey")] = rng.randrange(100)
        out.append(json.dumps(obj))
    return out


def trace_lines(rng: random.Random, n: int) -> list[str]:
    run = {"kind": "run", "format": "adp-trace", "version": 2, "tp_size": 2, "pp_size": 1,
           "max_batch_size": 4, "max_num_active_requests": 4, "disaggregated": False,
           "overlap_scheduler": True, "build": _text(rng, "b"), "run_id": _text(rng, "run-1")}
    out = [json.dumps(run)]
    for i in range(n):
        if rng.random() < 0.1:
            out.append(json.dumps({"kind": "note", "iter": i // 2, "rank": 0,
                                   "message": _text(rng, "a note")}))
        out.append(json.dumps({"kind": "frame", "iter": i // 2, "rank": i % 2,
                               "requests": [{"id": 1, "state": "GENERATION_IN_PROGRESS"}]}))
    return out


def fuzz_json(rng: random.Random, kind: str, n_lines: int = 40) -> tuple[bytes, bool]:
    """A mutated file of ``kind`` (``stats`` or ``trace``) and whether it was cut mid-line.

    The bytes may be gzip-compressed (the readers sniff the content)."""
    lines = (stats_lines if kind == "stats" else trace_lines)(rng, n_lines)
    data = ("\n".join(lines) + "\n").encode()
    cut = False
    if rng.random() < 0.5:
        data = data[:rng.randrange(1, len(data))]
        tail = data[data.rfind(b"\n") + 1:]
        cut = bool(tail.strip()) and not _whole(tail)
    if rng.random() < 0.3:
        data = gzip.compress(data)
    return data, cut


def _whole(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True

"""A minimal witness as a concrete schedule: a v2 trace (traces/FORMAT.md) and its replay.

The search keeps only choice ids in canonical rank order (``replay.explore.search.Found.path``);
:func:`schedule_records` walks that path again, giving every request an id (1, 2, ... in arrival
order; 0 is the dummy's) and every rank a fixed number, and writes one frame per rank and
iteration: the requests at pad entry in list order, the KV outcome's fields. The trace carries
no decision, so ``forensics replay`` recomputes every one of them; :func:`confirm` does exactly
that with the engine and says whether it agrees with the explorer.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from replay.config import RunConfig
from replay.walk import run
from replay.frames import RunFrames
from replay.explore.classes import arrival_state
from replay.explore.mechanisms import KIND_CRASH, KIND_HANG, KIND_LEAK, KIND_WASTE
from replay.explore.search import Found, Search
from replay.states import CURRENT_NUMBERING, RequestState


def run_record(config: RunConfig, build: str) -> dict[str, Any]:
    """The v2 run record of a witness."""
    return {"kind": "run", "format": "adp-trace", "version": 2, "tp_size": config.tp_size,
            "pp_size": config.pp_size, "max_batch_size": config.max_batch_size,
            "max_num_active_requests": config.cap, "disaggregated": config.disaggregated,
            "overlap_scheduler": config.overlap_scheduler, "build": build,
            "model_arch": config.model_arch, "state_numbering": CURRENT_NUMBERING,
            **({"dkv_enabled": True} if config.dkv_enabled else {})}


def schedule_records(search: Search, found: Found, build: str) -> list[dict[str, Any]]:
    """The witness of ``found`` as trace records (run record first, then the frames)."""
    R = found.ranks
    tables = search.tables(R)
    cfg = tables.config
    records: list[dict[str, Any]] = [run_record(cfg, build)]
    conc = list(range(R))                        # canonical position -> concrete rank
    held: list[list[tuple[int, tuple[int, int]]]] = [[] for _ in range(R)]  # (id, token) per rank
    order: list[list[int]] = [[] for _ in range(R)]  # list order of request ids per rank
    next_id = 1
    role = np.zeros(1, np.int64)
    for it, row in enumerate(found.path):
        G = np.array([row], np.int64)
        frames = []
        new_held: list[list[tuple[int, tuple[int, int]]]] = [[] for _ in range(R)]
        for p, choice in enumerate(row):
            q = conc[p]
            move = tables.moves[choice]
            mine = sorted(held[q], key=lambda x: x[1])
            survivors = {rid: (fate, tok[1]) for (rid, tok), fate in zip(mine, move.fates) if fate >= 0}
            arrivals = []
            for cls in move.arrivals:
                arrivals.append((next_id, cls))
                next_id += 1
            order[q] = [rid for rid in order[q] if rid in survivors] + [rid for rid, _ in arrivals]
            states = _frame_states(tables, survivors, arrivals)
            reqs = [{"id": rid, "state": states[rid].name} for rid in order[q]]
            frame = {"kind": "frame", "iter": it, "rank": q, "requests": reqs}
            frame.update(dict(tables.kv[move.kv].frame))
            frames.append(frame)
            after = {rid: a for rid, (c, a) in survivors.items()}
            carried = tables.states[tables.col("state")[choice]][1] > 0
            after.update({rid: int(carried) for rid, _ in arrivals})
            new_held[q] = ([(rid, (c, after[rid])) for rid, (c, _) in survivors.items()]
                           + [(rid, (c, after[rid])) for rid, c in arrivals])
        records.extend(sorted(frames, key=lambda f: f["rank"]))
        if it == len(found.path) - 1:
            break
        outs = search.decide_rows(tables, G, role)
        inp, out, _ = outs[0]
        nxt = search.successors(tables, G, inp, out)[0]
        for p in range(R):
            q = conc[p]
            survives = bool(out.survives[0, p])
            fresh = bool((out.padded | out.postpadded)[0, p]) and not bool(inp.carried[0, p])
            held[q] = [(rid, (c, a if survives and not fresh else 0)) for rid, (c, a) in new_held[q]]
        perm = np.argsort(nxt, kind="stable")
        conc = [conc[int(i)] for i in perm]
        role = np.zeros(1, np.int64)
        for k, (_, _, r) in enumerate(outs):
            role |= r.astype(np.int64) << k
    return records


def _frame_states(tables, survivors, arrivals) -> dict[int, RequestState]:
    """Each request's written state: the arrival state for a new request, the class's
    representative otherwise."""
    dis = tables.config.disaggregated
    out = {}
    for rid, (cls, _a) in survivors.items():
        out[rid] = tables.classes[cls].representative
    for rid, cls in arrivals:
        out[rid] = arrival_state(tables.classes[cls], dis)
    return out


def confirm(records: list[dict], policy: Any, kind: int) -> Optional[bool]:
    """Whether the engine's replay of the trace shows the mechanism (None: it refused the trace)."""
    try:
        result = run(RunFrames.from_records(records), policy=policy)
    except Exception:  # noqa: BLE001 - a trace the replay refuses is reported, not raised
        return None
    crash = result.crash
    leak = bool(result.leak_records)
    if kind in (KIND_LEAK, KIND_WASTE):
        return leak and crash is None
    if kind == KIND_CRASH:
        return crash is not None and crash.kind in ("assert", "hook")
    if kind == KIND_HANG:
        return crash is not None and crash.kind in ("dummy_alloc_none", "hook")
    return crash is not None


__all__ = ["confirm", "run_record", "schedule_records"]

"""Small hand-made request-state traces (traces/FORMAT.md records) for replay tests."""
from __future__ import annotations

DGI = "DISAGG_GENERATION_INIT"
DGT = "DISAGG_GENERATION_TRANS_IN_PROGRESS"
DTC = "DISAGG_GENERATION_TRANS_COMPLETE"
GIP = "GENERATION_IN_PROGRESS"
GTC = "GENERATION_TO_COMPLETE"
DUMMY = {"id": 0, "state": GIP, "dummy": True}


def run_record(tp_size, *, build="prefix-2026", max_batch_size=8, cap=None, pp_size=1,
               disaggregated=True, overlap_scheduler=True, **extra):
    rec = {"kind": "run", "format": "adp-trace", "version": 1, "tp_size": tp_size,
           "pp_size": pp_size, "max_batch_size": max_batch_size,
           "max_num_active_requests": cap if cap is not None else pp_size * max_batch_size,
           "disaggregated": disaggregated, "overlap_scheduler": overlap_scheduler, "build": build}
    rec.update(extra)
    return rec


def frame(it, rank, requests, **decisions):
    """``requests``: list of ``(id, state)`` pairs or ``DUMMY``."""
    reqs = [r if isinstance(r, dict) else {"id": r[0], "state": r[1]} for r in requests]
    return {"kind": "frame", "iter": it, "rank": rank, "requests": reqs, **decisions}


def reqs(ids, state):
    return [(i, state) for i in ids]


def nvbug_records(build="prefix-2026"):
    """The NVBug 6438685 chain, tp 4, max_batch_size 8, cap 8, disaggregated, overlap loop.

    See tests/replay/test_scenarios.py::test_nvbug_chain_prefix for the worked arithmetic.
    """
    return [
        run_record(4, build=build),
        # iter 40: rank 1 waits for KV on 8 requests and is padded (context role).
        frame(40, 0, [(1, GIP)], expected=8, padded=False, scheduled=1, can_queue=True),
        frame(40, 1, reqs(range(101, 109), DGI), expected=8, padded=True, scheduled=1, can_queue=True),
        frame(40, 2, [(21, GIP), (22, GIP)], expected=8, padded=False, scheduled=2, can_queue=True),
        frame(40, 3, reqs((31, 32, 33), GIP), expected=8, padded=False, scheduled=3, can_queue=True),
        # iter 41: ranks 0, 1 wait for KV (padded); rank 2 holds only GENERATION_TO_COMPLETE.
        frame(41, 0, [(51, DGI), (52, DGI)], expected=8, padded=True, scheduled=1, can_queue=False),
        frame(41, 1, reqs(range(101, 109), DGT), expected=8, padded=True, scheduled=1, can_queue=False),
        frame(41, 2, [(17, GTC), (23, GTC)], expected=8, padded=False, scheduled=0, can_queue=False),
        frame(41, 3, reqs((31, 32, 33), GIP), expected=8, padded=False, scheduled=3, can_queue=False),
        # iter 42: the leaked dummies are still there; rank 1 is at the cap plus its dummy.
        frame(42, 0, [(51, DGT), (52, DGT), DUMMY], expected=8, padded=False),
        frame(42, 1, reqs(range(101, 109), DTC) + [DUMMY], expected=8),
        frame(42, 2, [], expected=8, padded=True),
        frame(42, 3, reqs((31, 32, 33), GIP), expected=8, padded=False),
    ]

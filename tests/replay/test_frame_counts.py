"""The per-frame counts of ``RunFrames`` and the first-seen iterations, against straightforward
per-request loops: whatever the request ids (dense, sparse, on several ranks) and states
(known or not), and however the run is cut into windows; built by numpy and by the compiled
frame builder (``replay.frame_build``), which must give the same arrays."""
from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pyarrow as pa
import pytest

from forensics.readers import frame_builder
from replay import frame_build
from replay.config import RunConfig
from replay.first_seen import SeenBefore, first_seen
from replay.frame_schema import FRAMES
from replay.frames import RunFrames
from replay.policy import Predicate
from replay.states import (
    ALL_STATES,
    CONTEXT_ONLY_STATES,
    GENERATION_ONLY_STATES,
    RequestState,
    micro_batch_window,
)

KNOWN = [int(s) for s in ALL_STATES]


def _run(seed: int, ids: str, unknown: bool, R: int = 3, iters: int = 12):
    """Frames and real requests of a random run: ``(frame rows, request rows)``."""
    rng = np.random.default_rng(seed)
    states = KNOWN + ([5, 99, -7] if unknown else [])
    frames, reqs = [], []
    next_id = 1
    held = [[] for _ in range(R)]
    for it in range(100, 100 + iters):
        for r in range(R):
            held[r] = [q for q in held[r] if rng.random() < 0.7]
            for _ in range(int(rng.integers(0, 4))):
                held[r].append(next_id)
                next_id += 1
            frames.append((it, r, len(held[r])))
            for pos, q in enumerate(held[r]):
                rid = {"dense": q, "sparse": q * 1_000_003 - 5,
                       "shared": q % 4}[ids]
                reqs.append((it, r, rid, int(rng.choice(states)), pos))
    return frames, reqs


def _frames_table(rows) -> pa.Table:
    n = len(rows)
    cols = {"run": ["r"] * n, "source": ["s"] * n, "line": list(range(1, n + 1)),
            "iter": [f[0] for f in rows], "rank": [f[1] for f in rows],
            "num_requests": [f[2] for f in rows], "num_dummies": [0] * n}
    return pa.table({f.name: pa.array(cols.get(f.name, [None] * n), f.type) for f in FRAMES},
                    schema=FRAMES)


def _requests(rows) -> tuple[np.ndarray, ...]:
    a = np.array(rows, np.int64).reshape(-1, 5)
    return (a[:, 0].copy(), a[:, 1].astype(np.int32), a[:, 2].copy(), a[:, 3].astype(np.int16),
            a[:, 4].astype(np.int32))


def _member(mask: np.ndarray, state: int) -> bool:
    """``mask[state_index(state)]``: an unknown state reads the mask's last entry (-1)."""
    return bool(mask[KNOWN.index(state)] if state in KNOWN else mask[-1])


@pytest.fixture(params=["numpy", "compiled"])
def frames_path(request, monkeypatch):
    """Frames built by numpy, or by the compiled builder whatever the window's size (compiled
    here when this machine has none saved; skipped where numba cannot compile it)."""
    monkeypatch.setenv(frame_builder.PATH_ENV, "numpy" if request.param == "numpy" else "native")
    monkeypatch.setattr(frame_build, "MIN_ROWS", 0)
    frame_builder.forget()
    if request.param == "compiled" and frame_builder.kernel() is None:
        pytest.skip("numba cannot compile the frame builder here")
    yield request.param
    frame_builder.forget()


@pytest.mark.usefixtures("frames_path")
@pytest.mark.parametrize("ids", ["dense", "sparse", "shared"])
@pytest.mark.parametrize("unknown", [False, True])
@pytest.mark.parametrize("cut", [None, [104, 109]])
def test_counts_equal_a_loop_over_the_requests(ids, unknown, cut):
    frame_rows, req_rows = _run(7, ids, unknown)
    config = RunConfig(tp_size=3, pp_size=1, max_batch_size=4, max_num_active_requests=8,
                       disaggregated=True, overlap_scheduler=False, encoder_decoder=False)
    R, first_iter = 3, 100
    # first seen per (rank, id) over the whole run, new at that iteration except the first
    first: dict = {}
    for it, r, rid, _, _ in req_rows:
        first.setdefault((r, rid), it)
    window = micro_batch_window(False).mask()
    masks = {p: p.mask(config) for p in Predicate}
    edges = [100] + (cut or []) + [112]
    seen = SeenBefore(R)
    got_first = []
    for lo, hi in zip(edges, edges[1:]):
        fr = [f for f in frame_rows if lo <= f[0] < hi]
        rq = [q for q in req_rows if lo <= q[0] < hi]
        rf = RunFrames.from_parts("r", "s", config, _frames_table(fr), _requests(rq),
                                  first_iter=first_iter, seen=seen)
        got_first.append(rf.req_first)
        for i, it in enumerate(range(lo, hi)):
            for r in range(R):
                mine = [q for q in rq if q[0] == it and q[1] == r]
                new = [q for q in mine if first[q[1], q[2]] == it and it != first_iter]
                assert rf.n_real[i, r] == len(mine)
                assert rf.window_real[i, r] == sum(_member(window, q[3]) for q in mine)
                assert rf.new_real[i, r] == len(new)
                assert rf.all_before_ctx[i, r] == (bool(mine) and all(
                    q[3] < int(RequestState.CONTEXT_INIT) for q in mine))
                for p, m in masks.items():
                    assert rf.sched_real(p)[i, r] == sum(_member(m, q[3]) for q in mine), p
                assert rf.max_first_seen[i, r] == max((first[q[1], q[2]] for q in mine),
                                                      default=-1)
        ctx = [int(s) for s in CONTEXT_ONLY_STATES]
        gen = [int(s) for s in GENERATION_ONLY_STATES]
        for i, it in enumerate(range(lo, hi)):
            new = [q for q in rq if q[0] == it and first[q[1], q[2]] == it and it != first_iter]
            assert rf.ctx_arrived[i] == any(q[3] in ctx for q in new)
            assert rf.gen_arrived[i] == any(q[3] in gen for q in new)
    want = [first[q[1], q[2]] for q in req_rows]
    assert np.concatenate(got_first).tolist() == want


@pytest.mark.parametrize("seed", range(5))
def test_first_seen_dense_ids_like_sparse_ones(seed):
    """Dense ids (keyed by their offset) and the same ids spread apart (hashed) give the same
    first-seen iterations, window after window."""
    rng = np.random.default_rng(seed)
    R, n = 4, 400
    rank = rng.integers(0, R, n)
    rid = rng.integers(0, 60, n) * R + rank         # each id on one rank
    it = np.sort(rng.integers(0, 50, n))
    cuts = [0, n // 3, n // 2, n]
    dense, sparse = SeenBefore(R), SeenBefore(R)
    for a, b in zip(cuts, cuts[1:]):
        d = first_seen(rank[a:b], rid[a:b], it[a:b], R, dense)
        s = first_seen(rank[a:b], rid[a:b] * 1_000_003, it[a:b], R, sparse)
        assert d.tolist() == s.tolist()
        assert d.dtype == s.dtype
    whole = first_seen(rank, rid, it, R)
    assert whole.tolist() == [int(it[(rid == x)].min()) for x in rid]


def _fields(rf: RunFrames) -> dict:
    out = {}
    for f in dataclasses.fields(rf):
        v = getattr(rf, f.name)
        out[f.name] = ({k: (a.dtype.str, a.tolist()) for k, a in v.items()} if isinstance(v, dict)
                       else (v.dtype.str, v.shape, v.tolist()) if isinstance(v, np.ndarray) else v)
    return out


def _built(frame_rows, req_rows, cuts, path, monkeypatch, first_iter=100):
    monkeypatch.setenv(frame_builder.PATH_ENV, path)
    frame_builder.forget()
    config = RunConfig(tp_size=3, pp_size=1, max_batch_size=4, max_num_active_requests=8,
                       disaggregated=True, overlap_scheduler=False, encoder_decoder=False)
    seen, out = SeenBefore(3), []
    for lo, hi in itertools.pairwise(cuts):
        fr = [f for f in frame_rows if lo <= f[0] < hi]
        rq = [q for q in req_rows if lo <= q[0] < hi]
        out.append(_fields(RunFrames.from_parts("r", "s", config, _frames_table(fr),
                                                _requests(rq), first_iter=first_iter, seen=seen)))
    return out


@pytest.mark.parametrize("variant", ["plain", "shuffled", "dropped", "wide", "unknown",
                                     "stray rank", "shared"])
def test_compiled_frames_equal_the_numpy_ones(variant, monkeypatch):
    """Every array of every window alike, dtypes included: requests out of frame order, an
    iteration some rank has no frame for (its requests dropped), iterations past int32 (int64
    first-seen), unknown states; and the compiled path is the one taken, except where it
    declines: a request on a rank the run does not have, an id on two ranks."""
    monkeypatch.setattr(frame_build, "MIN_ROWS", 0)
    monkeypatch.setenv(frame_builder.PATH_ENV, "native")
    frame_builder.forget()
    if frame_builder.kernel() is None:
        pytest.skip("numba cannot compile the frame builder here")
    frame_rows, req_rows = _run(3, "shared" if variant == "shared" else "dense",
                                variant == "unknown", iters=30)
    if variant == "stray rank":   # a request row on rank 3 of a 3-rank run, mid-window
        at = next(i for i, q in enumerate(req_rows) if q[0] == 105 and q[1] == 2)
        req_rows[at] = (105, 3, *req_rows[at][2:])
    shift = 2 ** 33 if variant == "wide" else 0
    frame_rows = [(f[0] + shift, *f[1:]) for f in frame_rows]
    req_rows = [(q[0] + shift, *q[1:]) for q in req_rows]
    if variant == "shuffled":   # list positions within a frame, and frames, out of order
        rng = np.random.default_rng(1)
        req_rows = [req_rows[i] for i in rng.permutation(len(req_rows))]
    if variant == "dropped":
        frame_rows = [f for f in frame_rows if (f[0], f[1]) != (107, 1)]
    cuts = [100 + shift, 111 + shift, 130 + shift]
    calls = []
    real = frame_build.build_requests
    monkeypatch.setattr("replay.frames.build_requests",
                        lambda *a, **k: calls.append(real(*a, **k)) or calls[-1])
    compiled = _built(frame_rows, req_rows, cuts, "native", monkeypatch, 100 + shift)
    # per window whether the kernel declined (the stray row is in the first window only)
    declined = {"stray rank": [True, False], "shared": [True, True]}.get(variant, [False, False])
    assert [c is None for c in calls] == declined
    reference = _built(frame_rows, req_rows, cuts, "numpy", monkeypatch, 100 + shift)
    assert all(c is None for c in calls[len(cuts) - 1:])
    assert compiled == reference
    if variant == "wide":
        assert reference[0]["req_first"][0] == "<i8"
    if variant == "dropped":
        assert reference[0]["dropped_iters"] == (107 + shift,)
        assert not (107 + shift) in reference[0]["iters"][2]


@pytest.mark.parametrize("seed", range(4))
def test_seen_before_keyed_like_per_rank(seed):
    """The windows' memory of first-seen iterations gives what a per-(rank, id) dictionary
    gives, with ids that fit its keys, and after an id that does not (negative) sends it to
    per-rank arrays; a rank outside the run is neither looked up nor remembered."""
    rng = np.random.default_rng(seed)
    R = 3
    seen, memo = SeenBefore(R), {}
    for w in range(6):
        n = 40
        rank = rng.integers(-1 if seed == 3 else 0, R + (seed == 3), n)
        rid = rng.integers(0, 30, n) - (50 if w == 4 and seed % 2 else 0)
        first = rng.integers(100 * w, 100 * w + 50, n)
        got = seen.update(rank, rid, first)
        want = []
        for r, q, f in zip(rank.tolist(), rid.tolist(), first.tolist()):
            if not 0 <= r < R:
                want.append(f)
                continue
            want.append(memo.get((r, q), f))
        for r, q, f in zip(rank.tolist(), rid.tolist(), first.tolist()):
            if 0 <= r < R:
                memo.setdefault((r, q), f)
        assert got.tolist() == want

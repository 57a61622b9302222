"""FrameKeys answers membership exactly like a set, in its dense and its sparse form."""
from __future__ import annotations

import random

import numpy as np
import pytest

from forensics.readers import frame_keys
from forensics.readers.frame_keys import FrameKeys


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("start,spread", [(0, 64), (10 ** 12, 2000), (0, 1 << 40)])
def test_hits_match_a_set(seed, start, spread, monkeypatch):
    """Dense keys from 0, dense keys of a trace starting late (some batches below the first
    key), keys far apart (the sorted form)."""
    monkeypatch.setattr(frame_keys, "_DENSE_MIN", 1 << 10)
    rnd = random.Random(seed)
    keys, ref = FrameKeys(), set()
    for _ in range(30):
        batch = np.array(rnd.sample(range(start, start + spread), min(spread, rnd.randint(1, 40))),
                         np.int64)
        hit = keys.hits(batch)
        assert hit.tolist() == [int(k) in ref for k in batch]
        new = batch[~hit]
        keys.add(new)
        ref.update(int(k) for k in new)
    probe = np.array([rnd.randrange(start, start + spread) for _ in range(200)]
                     + [start + spread + 5, max(start - 1, 0)], np.int64)
    assert keys.hits(probe).tolist() == [int(k) in ref for k in probe]
    assert keys.count == len(ref)
    if spread < 1 << 20:
        assert keys.nbytes < 3 * spread               # stayed dense: a byte per key


def test_dense_form_is_a_byte_per_key_and_sparse_keys_switch_form(monkeypatch):
    monkeypatch.setattr(frame_keys, "_DENSE_MIN", 1 << 12)
    keys = FrameKeys()
    keys.add(np.arange(0, 3000, dtype=np.int64))        # 100 iterations x 30 ranks
    assert keys.nbytes < 3000 * 2                       # not 8 bytes per key
    keys.add(np.array([10 ** 15], np.int64))            # one frame of a huge iteration
    assert keys.nbytes == 8 * 3001                      # sorted int64 from here on
    assert keys.hits(np.array([2999, 3000, 10 ** 15], np.int64)).tolist() == [True, False, True]


def test_a_trace_starting_late_stays_dense(monkeypatch):
    monkeypatch.setattr(frame_keys, "_DENSE_MIN", 1 << 12)
    keys = FrameKeys()
    base = 10 ** 6 * 32                                 # from iteration 1,000,000, 32 ranks
    keys.add(np.arange(base, base + 3000, dtype=np.int64))
    keys.add(np.arange(base - 100, base, dtype=np.int64))   # an earlier file of the run
    assert keys.nbytes < 3100 * 2
    assert keys.hits(np.array([base - 101, base - 100, base + 2999, base + 3000],
                              np.int64)).tolist() == [False, True, True, False]

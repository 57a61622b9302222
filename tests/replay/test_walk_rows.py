"""``replay.step.rows_with_any``: the rows holding a True, whether the True cells are few (read
from the cells) or many (a reduction), against a per-row loop."""
from __future__ import annotations

import numpy as np
import pytest

from replay.step import rows_with_any


@pytest.mark.parametrize("share", [0.0, 0.001, 0.02, 0.5, 1.0])
@pytest.mark.parametrize("shape", [(0, 4), (1, 3), (64, 32), (257, 5)])
def test_rows_with_any_equal_a_loop(share, shape):
    rng = np.random.default_rng(int(share * 1000) + shape[0])
    a = rng.random(shape) < share
    want = [i for i in range(shape[0]) if any(a[i])]
    got = rows_with_any(a)
    assert got.tolist() == want
    assert got.dtype == np.intp


def test_rows_with_any_of_a_row_slice():
    """A view of the rows but the last (what the walk passes) reads its own rows only."""
    a = np.zeros((6, 4), bool)
    a[1, 3] = a[5, 0] = True
    assert rows_with_any(a[:-1]).tolist() == [1]

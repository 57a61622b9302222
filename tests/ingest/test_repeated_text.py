"""A text repeated as a string column: the same values whatever was asked before."""
from __future__ import annotations

import pyarrow as pa

from forensics.readers.repeated_text import build, repeated


def test_repeated_gives_n_copies_whatever_was_built_before():
    for n in (3, 1, 7, 0, 5):
        column = repeated("run-é", n)
        assert column.type == pa.string()
        assert column.to_pylist() == ["run-é"] * n
    assert repeated("other", 2).to_pylist() == ["other", "other"]


def test_a_shorter_column_is_a_slice_of_the_kept_one():
    long = repeated("sliced", 1000)
    short = repeated("sliced", 10)
    assert short.buffers()[2].address == long.buffers()[2].address
    assert short.to_pylist() == ["sliced"] * 10


def test_build_matches_pyarrow_repeat():
    assert build("abc", 4).equals(pa.repeat(pa.scalar("abc", pa.string()), 4))

"""The shape check shared by the fast JSON Lines readers (``stats_fast``, ``trace_fast``).

A block goes to their ``msgspec`` decoders only when every line is exactly one ``{...}`` object
with nothing around it (``\\r`` allowed before the newline), the block ends on a newline, it is
valid UTF-8 and it holds no backslash escape; any other block is declined and read by the exact
per-line parser, so errors keep their file and line.
"""
from __future__ import annotations

import numpy as np


class DeclineBlock(Exception):
    """The block needs the exact per-line reader."""


def object_line_ends(block: bytes) -> np.ndarray:
    """Positions of the block's newlines, after checking every line is one ``{...}`` object.

    Raises:
        DeclineBlock: the block is not of that shape.
    """
    if not block.endswith(b"\n") or b"\\" in block:
        raise DeclineBlock()
    if not block.isascii():
        try:
            block.decode("utf-8")
        except UnicodeDecodeError:
            raise DeclineBlock() from None
    b = np.frombuffer(block, np.uint8)
    nl = np.flatnonzero(b == 10)
    starts = np.empty(nl.size, np.int64)
    starts[0] = 0
    starts[1:] = nl[:-1] + 1
    last = nl - 1
    last = last - (b[np.maximum(last, 0)] == 13)
    if (last < starts).any() or not ((b[starts] == 123) & (b[np.maximum(last, 0)] == 125)).all():
        raise DeclineBlock()
    return nl

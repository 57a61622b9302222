"""Integers read out of log text, checked against the column they go to.

Any number can appear in a corrupted or hostile log (``rank=2147483648``, a 20-digit line
number); casting it into an int32/int64 column would abort the whole ingest. A number that
does not fit leaves its column null and stays only in the row's verbatim text.
"""
from __future__ import annotations


def fits(digits: str, bits: int = 64) -> bool:
    """Whether a run of ASCII digits fits a signed integer column of ``bits`` bits.

    Example:
        >>> fits("2147483647", 32), fits("2147483648", 32), fits("9" * 40)
        (True, False, False)
    """
    return len(digits) <= 19 and int(digits) < (1 << (bits - 1))


def as_int(digits: str | None, bits: int = 64) -> int | None:
    """``int(digits)`` when it fits ``bits`` bits, else None."""
    return int(digits) if digits is not None and digits.isdigit() and fits(digits, bits) else None

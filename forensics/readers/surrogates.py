"""Lone UTF-16 surrogates decoded from JSON, kept as the escape the file wrote.

JSON may escape a lone surrogate (``"\\udcff"``: Python's ``json.dumps`` writes one for each
byte a ``surrogateescape`` decode could not place). ``json.loads`` returns it as a Python
``str`` holding the surrogate, which no UTF-8 (Arrow, Parquet, a terminal) can hold. Every string
a reader keeps from a JSON value or key goes through :func:`escaped`: the surrogate becomes the
six characters ``\\udcff`` again, so the value is kept as the file spelt it, and nothing raises.
"""
from __future__ import annotations

from typing import Any


def escaped(text: str) -> str:
    """``text`` with each lone surrogate written as its ``\\uXXXX`` escape (unchanged otherwise).

    Example:
        >>> escaped("run\\udcff-1") == "run\\\\udcff-1"
        True
        >>> escaped("naïve")
        'naïve'
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def escaped_value(value: Any) -> Any:
    """``value`` (a decoded JSON value) with :func:`escaped` applied to every string in it,
    dict keys included; a value without such a string is returned as it is."""
    if isinstance(value, str):
        return escaped(value)
    if isinstance(value, dict):
        return {escaped(k): escaped_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [escaped_value(v) for v in value]
    return value


__all__ = ["escaped", "escaped_value"]

"""Input fingerprints: what a dataset was made from, recorded in ``_meta.json``.

A fingerprint is the input's name as given (normalised), the size and sha256 of the on-disk bytes
the ingest read (hashed while reading, ``sources.recording_reads``: a file still growing is
described as read), and the kind it was read as. No wall-clock time is recorded anywhere, so ingesting the same inputs twice
gives identical tables and an identical ``_meta.json``; the fingerprints also let
``as_dataset`` reuse a cached dataset when its inputs are unchanged.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import asdict, dataclass
from typing import Any, Iterable

from forensics.errors import InputError

HASH_BLOCK = 1 << 20


@dataclass(frozen=True)
class InputFingerprint:
    """One ingested input.

    Attributes:
        name: the path as given, normalised (also the ``source`` column of its rows).
        size: on-disk bytes read (compressed bytes for ``.gz``/``.zst``); the whole file
            unless it grew while read or its reading stopped at a corrupt block.
        sha256: hex digest of those bytes.
        kind: ``log``, ``stats`` or ``trace``.
        name_hex: hex of the path's bytes, only for a name that is not UTF-8.
    """

    name: str
    size: int
    sha256: str
    kind: str
    name_hex: str | None = None  # the name's exact bytes when it is not UTF-8 (``name`` escapes them)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if d["name_hex"] is None:
            del d["name_hex"]
        return d

    @property
    def identity(self) -> tuple[str, int, str]:
        """What must match for a cached dataset to be reused: name, size, sha256."""
        return (self.name, self.size, self.sha256)


def sha256_of(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes, read in blocks."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while block := f.read(HASH_BLOCK):
                h.update(block)
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", path=str(path)) from None
    return h.hexdigest()


def fingerprint(path: str | os.PathLike, name: str, kind: str) -> InputFingerprint:
    """The fingerprint of one input file."""
    try:
        size = os.stat(path).st_size
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", path=name) from None
    return InputFingerprint(name=name, size=size, sha256=sha256_of(path), kind=kind)


def identities(inputs: Iterable[dict[str, Any] | InputFingerprint]) -> list[tuple[str, int, str]]:
    """Sorted (name, size, sha256) of fingerprints or their ``_meta.json`` form."""
    out = []
    for item in inputs:
        if isinstance(item, InputFingerprint):
            out.append(item.identity)
        else:
            out.append((str(item.get("name")), int(item.get("size", -1)), str(item.get("sha256"))))
    return sorted(out)


__all__ = ["InputFingerprint", "sha256_of", "fingerprint", "identities"]

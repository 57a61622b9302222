"""Opening inputs: plain, gzip or zstd, sniffed by magic bytes; binary files refused.

Decompression is streamed so a log of any size is read in bounded memory.
"""
from __future__ import annotations

import gzip
import io
import os
from pathlib import Path
from typing import BinaryIO

from forensics.errors import BinaryInputError, InputError

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
SNIFF_BYTES = 8192


def compression_of(path: str | os.PathLike) -> str | None:
    """``"gzip"``, ``"zstd"`` or None, from the file's first bytes (not its name)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", path=str(path)) from None
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    return None


def open_binary(path: str | os.PathLike) -> BinaryIO:
    """The file's decompressed bytes as a stream (caller closes)."""
    comp = compression_of(path)
    raw = open(path, "rb")
    if comp == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    if comp == "zstd":
        import zstandard
        return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True, closefd=True)
    return raw


def head_bytes(path: str | os.PathLike, n: int = SNIFF_BYTES) -> bytes:
    """The first ``n`` decompressed bytes (empty on a decompression error)."""
    try:
        with open_binary(path) as f:
            return f.read(n)
    except (OSError, EOFError, ValueError):
        return b""
    except Exception:  # zstd errors are not OSError subclasses
        return b""


def looks_binary(head: bytes) -> bool:
    """A NUL byte or mostly non-text bytes in the first block means not a text file."""
    if not head:
        return False
    if b"\x00" in head:
        return True
    text_chars = bytes(range(32, 127)) + b"\n\r\t\f\b\x1b"
    nontext = sum(1 for b in head if b not in text_chars and b < 128)
    return nontext / len(head) > 0.30


def check_text(path: str | os.PathLike) -> None:
    """Raise :class:`BinaryInputError` for a binary (non-text) file."""
    if looks_binary(head_bytes(path)):
        raise BinaryInputError("binary file, not a text log, JSON or trace; refused",
                               path=str(path))


def display_name(path: str | os.PathLike) -> str:
    """The name a source is recorded under: the path as given, normalised."""
    return os.path.normpath(str(path))


__all__ = ["compression_of", "open_binary", "head_bytes", "looks_binary", "check_text",
           "display_name", "Path", "io"]

"""Opening inputs: plain, gzip or zstd, sniffed by magic bytes; binary files detected.

Decompression is streamed so a log of any size is read in bounded memory.
"""
from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterator
from typing import Any, BinaryIO

from forensics.errors import InputError

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


def decompressed_chunks(raw: BinaryIO, comp: str | None, read_bytes: int
                        ) -> Iterator[tuple[bytes, int, str | None]]:
    """Yield (decompressed bytes, compressed bytes consumed, error or None) from an open file.

    Decompression objects rather than :func:`open_binary`'s stream readers: the compressed offset
    is known (for progress), a truncated stream is *detected* (zstd's stream reader ends silently)
    and what was decompressed before a cut or a corrupt block is kept. Concatenated gzip members
    and zstd frames are read in turn; zero padding after the last one is ignored.
    """
    if comp is None:
        while block := raw.read(read_bytes):
            yield block, len(block), None
        return
    if comp == "gzip":
        def make() -> Any:
            return zlib.decompressobj(wbits=31)
    else:
        import zstandard

        def make() -> Any:
            return zstandard.ZstdDecompressor().decompressobj()
    d, fed, offset = make(), False, 0
    while block := raw.read(read_bytes):
        offset += len(block)
        outs, data = [], block
        try:
            while data:
                outs.append(d.decompress(data))
                fed = True
                data = b""
                if d.eof:                  # next gzip member / zstd frame, if any
                    data = d.unused_data
                    d, fed = make(), False
                    if not data.strip(b"\x00"):
                        data = b""         # zero padding after the last member
        except Exception as e:  # zlib.error, zstandard.ZstdError: corrupt input
            yield (b"".join(outs), len(block),
                   f"{comp} stream corrupt near compressed byte {offset}: {e}")
            return
        yield b"".join(outs), len(block), None
    if fed:
        yield b"", 0, f"{comp} stream truncated after {offset} compressed bytes"


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


def display_name(path: str | os.PathLike) -> str:
    """The name a source is recorded under: the path as given, normalised."""
    return os.path.normpath(str(path))


__all__ = ["compression_of", "open_binary", "decompressed_chunks", "head_bytes", "looks_binary",
           "display_name"]

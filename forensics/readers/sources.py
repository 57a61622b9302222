"""Opening inputs: plain, gzip or zstd, sniffed by magic bytes; binary files detected.

Decompression is streamed so a log of any size is read in bounded memory.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import gzip
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from forensics.errors import InputError
from forensics.readers.meta import new_digest

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


@dataclass(frozen=True)
class ReadDigest:
    """What a reader read of one file: its bytes from the start, counted and hashed as read."""

    size: int
    xxh3_128: str


_reads: contextvars.ContextVar[dict[str, ReadDigest] | None] = contextvars.ContextVar(
    "forensics_reads", default=None)


@contextlib.contextmanager
def recording_reads() -> Iterator[dict[str, ReadDigest]]:
    """Within the block, every file opened with :func:`open_raw` is hashed while it is read;
    the dict maps ``os.fspath(path)`` to its :class:`ReadDigest` once the file is closed. So a
    fingerprint describes the bytes actually read (a file still growing, a read stopped by a
    corrupt block), with no second pass over the file."""
    reads: dict[str, ReadDigest] = {}
    token = _reads.set(reads)
    try:
        yield reads
    finally:
        _reads.reset(token)


class _HashingReader:
    """A binary file hashing every byte read through it, sequentially from the start."""

    def __init__(self, f: BinaryIO, key: str, reads: dict[str, ReadDigest]):
        self._f, self._key, self._reads = f, key, reads
        self._h = new_digest()
        self._n = 0
        self.name = f.name

    def read(self, n: int = -1) -> bytes:
        data = self._f.read(n)
        self._h.update(data)
        self._n += len(data)
        return data

    def readinto(self, b) -> int:
        n = self._f.readinto(b)
        if n:
            with memoryview(b) as view, view[:n] as part:
                self._h.update(part)
            self._n += n
        return n

    def tell(self) -> int:
        return self._n

    def close(self) -> None:
        if not self._f.closed:
            self._reads[self._key] = ReadDigest(self._n, self._h.hexdigest())
            self._f.close()

    @property
    def closed(self) -> bool:
        return self._f.closed

    def __enter__(self) -> "_HashingReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_raw(path: str | os.PathLike) -> BinaryIO:
    """Open a file's on-disk bytes for a reader (hashed as read inside :func:`recording_reads`)."""
    f = open(path, "rb")
    reads = _reads.get()
    if reads is None:
        return f
    return _HashingReader(f, os.fspath(path), reads)  # type: ignore[return-value]


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


class DecompressionError(str):
    """Why decompression stopped: the message, with ``kind`` (the event kind,
    ``input_corrupt`` or ``input_truncated``) and ``offset`` (the compressed byte offset)."""

    kind: str
    offset: int

    def __new__(cls, message: str, kind: str, offset: int) -> "DecompressionError":
        self = super().__new__(cls, message)
        self.kind, self.offset = kind, offset
        return self


#: Compressed bytes fed to a decompressor at a time: what is lost when a piece turns out corrupt
#: is then found again byte by byte (:func:`_readable_prefix`).
PIECE_BYTES = 16 << 10
#: Decompressed bytes handed on at a time (at least; one piece's output more at most).
#:
#: Both small enough that a piece's output (~1 MB of zstd JSON) and a chunk stay below the
#: size the ingest's reader threads map afresh (``replay.heap.READING_MMAP_BYTES``): each
#: fresh mapping faults its pages in again. Measured ingesting fleet-1h 32x100k (two reader
#: threads): 64 KiB pieces and 4 MiB chunks 19.5 s user + 4.1 s system CPU, 1.2 M page
#: faults; 16 KiB and 1 MiB 17.6-17.8 s + 1.5-1.7 s, 0.3 M, the same peak RSS.
OUT_BYTES = 1 << 20


def _decompressor_factory(comp: str):
    if comp == "gzip":
        return lambda: zlib.decompressobj(wbits=31)
    import zstandard
    return lambda: zstandard.ZstdDecompressor().decompressobj()


def _readable_prefix(name: Any, make: Any, member_start: int, piece_start: int, piece: bytes
                     ) -> tuple[bytes, int]:
    """After a piece failed: the output a byte-by-byte decompression of that piece gives before
    the error, and the offset of the byte that broke it. The decompressor state before the
    piece is rebuilt by decompressing the member again from its start (``name``: the file)."""
    d = make()
    try:
        with open(name, "rb") as f:
            f.seek(member_start)
            left = piece_start - member_start
            while left > 0:
                block = f.read(min(left, 1 << 20))
                if not block:
                    break
                d.decompress(block)
                left -= len(block)
    except (OSError, TypeError, ValueError):
        return b"", piece_start
    out = []
    for i in range(len(piece)):
        try:
            out.append(d.decompress(piece[i:i + 1]))
        except Exception:
            return b"".join(out), piece_start + i
        if d.eof:
            break
    return b"".join(out), piece_start + len(piece)


def decompressed_chunks(raw: BinaryIO, comp: str | None, read_bytes: int
                        ) -> Iterator[tuple[bytes, int, str | None]]:
    """Yield (decompressed bytes, compressed bytes consumed, error or None) from an open file.

    Decompression objects rather than :func:`open_binary`'s stream readers: the compressed offset
    is known (for progress), a truncated stream is *detected* (zstd's stream reader ends silently)
    and every byte decompressed before a cut or a corrupt block is kept: the input is fed in
    pieces of ``PIECE_BYTES`` and the piece that fails is decompressed again byte by byte. The
    error is a :class:`DecompressionError` (``input_corrupt`` / ``input_truncated`` with the
    compressed byte offset). Concatenated gzip members and zstd frames are read in turn; zero
    padding after the last one is ignored, other trailing bytes are reported as corrupt.
    """
    if comp is None:
        while block := raw.read(read_bytes):
            yield block, len(block), None
        return
    make = _decompressor_factory(comp)
    d, fed, offset = make(), False, 0
    member_start, members = 0, 0
    name = getattr(raw, "name", None)
    while block := raw.read(read_bytes):
        outs: list[bytes] = []
        out_bytes = 0
        block_start = offset
        offset += len(block)
        pos = 0                     # position in block of the next byte to feed
        told = 0                    # bytes of block already reported as consumed
        while pos < len(block):
            if out_bytes >= OUT_BYTES:
                # A megabyte of zstd JSON is ~100 MB of text: handed on in pieces, so a reader
                # never holds a whole block's output (nor its join) at once.
                yield b"".join(outs), pos - told, None
                outs, out_bytes, told = [], 0, pos
            if not fed and members and not block[pos:].strip(b"\x00"):
                break               # zero padding after the last member
            piece = block[pos:pos + PIECE_BYTES]
            piece_start = block_start + pos
            try:
                out = d.decompress(piece)
                outs.append(out)
                out_bytes += len(out)
            except Exception as e:  # zlib.error, zstandard.ZstdError: corrupt input
                kept, at = _readable_prefix(name, make, member_start, piece_start, piece)
                outs.append(kept)
                unit = "member" if comp == "gzip" else "frame"
                what = (f"{comp}: unreadable bytes after the last {unit}" if members and not fed
                        and not kept else f"{comp} stream corrupt")
                yield (b"".join(outs), len(block) - told,
                       DecompressionError(f"{what} at compressed byte {at}: {e}", "input_corrupt", at))
                return
            fed = True
            pos += len(piece)
            if d.eof:                  # next gzip member / zstd frame, if any
                rest = len(d.unused_data)
                pos -= rest
                members += 1
                member_start = block_start + pos
                d, fed = make(), False
        yield b"".join(outs), len(block) - told, None
    if fed:
        yield b"", 0, DecompressionError(f"{comp} stream truncated after {offset} compressed bytes",
                                         "input_truncated", offset)


#: Compressed bytes decompressed to estimate a compressed input's size (:func:`content_size`).
SAMPLE_BYTES = 64 << 10


def content_size(path: str | os.PathLike) -> int:
    """The bytes a reader will read from ``path`` once decompressed: the file's size when it is
    plain; when compressed, its size times the ratio of its first ``SAMPLE_BYTES`` (exact for a
    file no larger than that). An estimate, for choosing a reader by how much text there is: a
    16 MB ``stats.jsonl.zst`` holds ~1.7 GB of JSON.

    The ingest asks up to three times per file (the reading plan, the scanners to load, the
    reader); a compressed file's sample is decompressed once per version of the file."""
    st = os.stat(path)
    comp = compression_of(path)
    if comp is None or st.st_size == 0:
        return st.st_size
    return _estimated_size(os.path.realpath(path), comp, SAMPLE_BYTES,
                           (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev))


@functools.lru_cache(maxsize=256)
def _estimated_size(path: str, comp: str, sample: int, version: tuple) -> int:
    size = version[0]
    out = fed = 0
    with open(path, "rb") as raw:
        for data, consumed, err in decompressed_chunks(raw, comp, sample):
            out += len(data)
            fed += consumed
            if err is not None or fed >= sample:
                break
    return size if not fed else max(size, out * size // fed)


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
    """The name a source is recorded under: the path as given, normalised.

    A name with bytes that are not UTF-8 (Python keeps them as surrogate escapes, which no
    Parquet string or terminal can hold) shows them as ``\\xNN``; :func:`name_bytes_hex`
    records the exact bytes."""
    name = os.path.normpath(os.fsdecode(os.fspath(path)))
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(name).decode("utf-8", "backslashreplace")
    return name


def name_bytes_hex(path: str | os.PathLike) -> str | None:
    """The exact bytes of a path's name, in hex, when :func:`display_name` had to escape them
    (None for a UTF-8 name)."""
    raw = os.fsencode(os.path.normpath(os.fsdecode(os.fspath(path))))
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.hex()
    return None


__all__ = ["DecompressionError", "ReadDigest", "recording_reads", "open_raw", "compression_of",
           "open_binary", "decompressed_chunks", "content_size", "head_bytes", "looks_binary",
           "display_name", "name_bytes_hex"]

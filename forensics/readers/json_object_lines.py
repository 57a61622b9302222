"""The cutting of a JSON Lines stream into blocks of whole lines (:class:`LineBlocks`), which the
stats and trace readers hand to the compiled scanner (:mod:`forensics.readers.json_scan`) or
read object by object.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any


#: Fewest bytes a lent-block reader reads at a time (a line longer than a block is read on
#: this much at a time, not byte by byte).
_LENT_MIN_READ = 64 << 10


class LineBlocks:
    """A stream of bytes as blocks of whole lines, each block a fresh ``bytes`` (or, with
    ``lent``, a view of the buffer: :meth:`lend`): from chunks, or read straight from a file
    (``reader``: an uncompressed input, or :class:`~forensics.readers.zstd_into.ZstdInto`).

    Why: joining chunks into a block and then slicing the block off copied every byte two or
    three times into new multi-MB objects, whose pages were faulted in anew (measured on a
    335 MB stats file: 0.37 s CPU and 80 k page faults for reading and cutting alone). Here
    the bytes go into one buffer of fixed size (grown only for a bigger chunk), read into it
    directly from a plain file, and each block is copied out of it once.
    """

    _NOT_WS = re.compile(rb"[^ \t\r\n]")

    def __init__(self, chunks: Iterator[bytes] | None = None, *, reader: Any = None,
                 progress: Callable[[int], None] | None = None, read_bytes: int = 4 << 20,
                 lent: bool = False):
        self._chunks = chunks
        self._reader = reader         # ``readinto``; ``progress`` gets the bytes it read
        self._progress = progress
        self._read_bytes = read_bytes
        # ``lent``: reads stop near what is wanted and the untaken bytes move to the front
        # before each read, so a block lent from the buffer starts at its (aligned) start
        self.lent = lent and reader is not None
        self._buf = bytearray()
        self._start = 0               # self._buf[self._start:self._end] is not taken yet
        self._end = 0
        self.eof = False

    def available(self) -> int:
        """Bytes read and not taken yet."""
        return self._end - self._start

    def fill(self, want: int) -> None:
        """Read until ``want`` bytes are available or the input ends."""
        while self.available() < want and not self.eof:
            if self._reader is not None:
                size = self._read_bytes
                if self.lent:
                    size = min(size, max(want - self.available(), _LENT_MIN_READ))
                    self._front()
                self._room(size)
                with memoryview(self._buf) as view:
                    n = self._reader.readinto(view[self._end:self._end + size])
                if not n:
                    self.eof = True
                    break
                self._end += n
                if self._progress is not None:
                    self._progress(n)
                continue
            chunk = next(self._chunks, None)
            if chunk is None:
                self.eof = True
                break
            n = len(chunk)
            self._room(n)
            self._buf[self._end:self._end + n] = chunk
            self._end += n

    def _room(self, n: int) -> None:
        """Room for ``n`` more bytes after the last: the untaken bytes moved to the front (the
        buffer grown if need be)."""
        if self._end + n <= len(self._buf):
            return
        rest = self._buf[self._start:self._end]
        if len(rest) + n > len(self._buf):
            self._buf = bytearray(max(2 * len(self._buf), len(rest) + n))
        self._buf[:len(rest)] = rest
        self._start, self._end = 0, len(rest)

    def _front(self) -> None:
        """Move the untaken bytes to the buffer's start (a lent block's tail line: small)."""
        if self._start:
            rest = self._end - self._start
            self._buf[:rest] = self._buf[self._start:self._end]
            self._start, self._end = 0, rest

    def lend(self, n: int) -> memoryview:
        """The next ``n`` bytes, taken, as a view of the buffer (no copy; ``lent`` only): valid
        until the next ``fill``. Its start is the buffer's, 8-byte aligned, when the bytes before
        it were taken by ``lend`` too."""
        view = memoryview(self._buf)[self._start:self._start + n]
        self.skip(n)
        return view

    def first_byte(self) -> int | None:
        """The first available byte that is not JSON whitespace (None: there is none yet)."""
        m = self._NOT_WS.search(self._buf, self._start, self._end)
        return None if m is None else self._buf[m.start()]

    def cut(self, size: int) -> int:
        """The length of the next block: up to its last newline within ``size`` bytes, else to
        the first newline after them; 0 when no newline is available."""
        start, end = self._start, self._end
        limit = min(start + size, end)
        return (self._buf.rfind(b"\n", start, limit) + 1
                or self._buf.find(b"\n", limit, end) + 1 or start) - start

    def peek(self, n: int) -> bytes:
        """The next ``n`` bytes (at most those available), not taken."""
        with memoryview(self._buf) as view:
            return bytes(view[self._start:min(self._start + n, self._end)])

    def skip(self, n: int) -> None:
        """Take ``n`` bytes."""
        self._start = min(self._start + n, self._end)

    def take(self, n: int) -> bytes:
        """The next ``n`` bytes, taken."""
        block = self.peek(n)
        self.skip(n)
        return block

    def rest(self) -> bytes:
        """Every available byte, taken (what was not read is still in the chunk iterator)."""
        return self.take(self.available())

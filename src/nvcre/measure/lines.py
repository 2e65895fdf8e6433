"""Log bytes into lines, each cut at :data:`MAX_LINE_BYTES` (pure; one rule for every reader).

The controllers' pod-log reader and ``nvcrectl analyze``'s file reader both split with
:class:`LineSplitter`, so a line means the same everywhere: at most :data:`MAX_LINE_BYTES` bytes
of it are kept, the rest up to its newline is dropped, and it still counts as one line. Memory
stays bounded by the cap and the chunk being split, whatever the length of a line (a progress bar
that never prints a newline can be hundreds of MB). Lines are decoded as UTF-8, an invalid byte
(or a character the cut split) becoming U+FFFD, and lose their ``\\n`` or ``\\r\\n``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from typing import BinaryIO

MAX_LINE_BYTES = 64 * 1024
"""The longest line kept, in bytes; a longer one is cut here (no log format nvcre reads comes
close: an nccl-tests row is about 120 bytes, a Megatron iteration line about 400)."""
CHUNK_BYTES = 64 * 1024
"""How much of a file :func:`read_lines` reads at a time."""


class LineSplitter:
    """Bytes in, complete lines out, holding at most :data:`MAX_LINE_BYTES` of a line."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._cut = False

    def feed(self, chunk: bytes) -> list[str]:
        """The lines that ``chunk`` completes (a line's start may have come in earlier chunks)."""
        lines: list[str] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            stop = len(chunk) if end < 0 else end
            if not self._cut:
                room = MAX_LINE_BYTES - len(self._buffer)
                self._buffer += chunk[start : min(stop, start + room)]
                self._cut = stop - start > room
            if end < 0:
                return lines
            lines.append(self._take())
            start = end + 1

    def close(self) -> list[str]:
        """The last line when the log does not end with a newline."""
        return [self._take()] if self._buffer or self._cut else []

    def _take(self) -> str:
        line = self._buffer.decode(errors="replace").removesuffix("\r")
        self._buffer.clear()
        self._cut = False
        return line


def split_lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """Every line of a log given as chunks of bytes (see :class:`LineSplitter`)."""
    splitter = LineSplitter()
    for chunk in chunks:
        yield from splitter.feed(chunk)
    yield from splitter.close()


def read_lines(stream: BinaryIO) -> Iterator[str]:
    """Every line of a binary stream (a file, stdin), read :data:`CHUNK_BYTES` at a time."""
    return split_lines(iter(lambda: stream.read(CHUNK_BYTES), b""))


class Tail:
    """The last ``keep`` bytes of the lines added, each ended by a newline as in the log, holding
    little more than that (``keep`` and the last line)."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._lines: deque[bytes] = deque()
        self._size = 0

    def add(self, line: str) -> None:
        data = line.encode(errors="replace") + b"\n"
        self._lines.append(data)
        self._size += len(data)
        while len(self._lines) > 1 and self._size - len(self._lines[0]) >= self.keep:
            self._size -= len(self._lines.popleft())

    def text(self) -> str:
        """The kept bytes, cut on a character boundary (a partial first character is dropped)."""
        return b"".join(self._lines)[-self.keep :].decode(errors="ignore") if self.keep else ""

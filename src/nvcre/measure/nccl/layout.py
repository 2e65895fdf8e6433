"""An nccl-tests table's columns, read from its own header lines, and its rows read by name.

Every layout nccl-tests (and rccl-tests) has printed names its columns in a header line::

    #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
    #       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
    #      bytes             N    type      op     time  algbw  busbw      res     time  algbw  busbw      res

and (usually) a title line above it naming the halves (``out-of-place  in-place``, or
``in-place`` alone for rccl-tests without out-of-place runs). A :class:`Layout` maps each
column by its name; a row is a line that ends with exactly those cells (or with extra unnamed
numeric cells after them), whatever precedes them. Nothing is guessed: a name that means
nothing here is a column whose cells are skipped, and a header without ``size``/``bytes``,
``algbw`` and ``busbw`` is no header.

The one cell nccl-tests may print empty is the reduction op: a collective without one passes
``""`` to ``%6s`` under a ``redop`` header (alltoall, all_gather, broadcast, gather, scatter
until nccl-tests 2.13.x, hypercube to this day), so such a row has every cell but that one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from nvcre.measure.nccl.cells import (
    NOT_AVAILABLE,
    count_value,
    finite,
    is_count,
    is_integer,
    is_number,
    is_word,
    number,
    trailing_count,
)
from nvcre.measure.nccl.events import Point

OUT_OF_PLACE = "out-of-place"
IN_PLACE = "in-place"
HALVES = (OUT_OF_PLACE, IN_PLACE)
_TITLE_WORDS = frozenset({OUT_OF_PLACE, IN_PLACE, "(+", "per-iteration)"})


class Kind(Enum):
    SIZE = "size"
    COUNT = "count"
    WORD = "word"
    ROOT = "root"
    NUMBER = "number"
    ALGBW = "algbw"
    BUSBW = "busbw"
    WRONG = "wrong"
    ERROR = "error"
    TIMESTAMP = "timestamp"
    ANY = "any"


_SIZE, _COUNT, _WORD, _ROOT, _NUMBER, _BANDWIDTH, _WRONG, _ERROR, _TIMESTAMP, _ANY = range(10)
_CODES = {
    Kind.SIZE: _SIZE,
    Kind.COUNT: _COUNT,
    Kind.WORD: _WORD,
    Kind.ROOT: _ROOT,
    Kind.NUMBER: _NUMBER,
    Kind.ALGBW: _BANDWIDTH,
    Kind.BUSBW: _BANDWIDTH,
    Kind.WRONG: _WRONG,
    Kind.ERROR: _ERROR,
    Kind.TIMESTAMP: _TIMESTAMP,
    Kind.ANY: _ANY,
}
_ROW_END = frozenset("0123456789.+-")
"""What a row's last token starts with (a number, or a timestamp's time), unless it is one of
:data:`_ROW_END_WORDS`."""
_ROW_END_WORDS = frozenset({NOT_AVAILABLE, "nan", "inf"})
_OP_NAMES = frozenset({"redop", "op"})
"""The reduction op's column, the one nccl-tests may print empty."""

_KINDS = {
    "size": Kind.SIZE,
    "bytes": Kind.SIZE,
    "count": Kind.COUNT,
    "N": Kind.COUNT,
    "type": Kind.WORD,
    "redop": Kind.WORD,
    "op": Kind.WORD,
    "root": Kind.ROOT,
    "time": Kind.NUMBER,
    "cputime": Kind.NUMBER,
    "copybw": Kind.NUMBER,
    "i_min": Kind.NUMBER,
    "i_max": Kind.NUMBER,
    "i_p99": Kind.NUMBER,
    "i_cv%": Kind.NUMBER,
    "algbw": Kind.ALGBW,
    "busbw": Kind.BUSBW,
    "#wrong": Kind.WRONG,
    "error": Kind.ERROR,
    "res": Kind.ERROR,
    "timestamp": Kind.TIMESTAMP,
}


@dataclass(frozen=True)
class Column:
    name: str
    kind: Kind
    half: int  #: 0 or 1: the half (by position) the column belongs to; -1 for shared columns


@dataclass(frozen=True)
class Layout:
    """The columns of one table and which half (out-of-place / in-place) each belongs to."""

    columns: tuple[Column, ...]
    halves: tuple[str, ...]  #: the name of half 0 (and 1)
    width: int  #: tokens a row has (a timestamp cell is two)
    plan: tuple[tuple[int, int], ...]  #: per column: what its cell must be, and where a value goes
    slots: tuple[int, int]
    """Where (algbw, busbw) of each half are among a row's four values: out-of-place, in-place
    (-1 for a half the table does not print)."""
    blank_op: tuple[tuple[int, int], ...] = ()
    """The plan of a row whose reduction op was printed empty (``%6s`` of ``""``): the header's
    ``redop``/``op`` column left out; empty when the header has no such column."""

    @property
    def names(self) -> str:
        return " ".join(c.name for c in self.columns)

    def to_state(self) -> dict[str, str]:
        """What a later sample needs to read this table's rows (``status.tableLayout``)."""
        return {"columns": self.names, "halves": " ".join(self.halves)}

    @classmethod
    def from_state(cls, state: object) -> Layout | None:
        if not isinstance(state, dict):
            return None
        columns, halves = state.get("columns"), state.get("halves")
        if not isinstance(columns, str) or not isinstance(halves, str):
            return None
        return header(columns.split(), tuple(halves.split()))

    def match(self, tokens: Sequence[str]) -> Point | None:
        """The row these tokens end with, or None: the last ``width`` tokens (any prefix before
        them), else the same cells followed by at most one more half of unnamed numeric cells. A
        table printing only its in-place half gives that half as the out-of-place figures too."""
        count = len(tokens)
        last = tokens[-1] if tokens else ""
        if last[:1] not in _ROW_END and last not in _ROW_END_WORDS:
            return None
        if count >= self.width:
            row = self._cells(tokens, count - self.width, self.plan)
            if row is not None:
                return row
        if self.blank_op and count >= self.width - 1:
            row = self._cells(tokens, count - self.width + 1, self.blank_op)
            if row is not None:
                return row
        for start in range(max(0, count - 2 * self.width), count - self.width):
            extra = tokens[start + self.width :]
            if tokens[start + 1].isdecimal() and all(is_number(t) or t == NOT_AVAILABLE for t in extra):
                row = self._cells(tokens, start, self.plan)
                if row is not None:
                    return row
        return None

    def _cells(self, tokens: Sequence[str], start: int, plan: Sequence[tuple[int, int]]) -> Point | None:
        """The row of ``len(plan)`` cells (a timestamp is two tokens) from ``start`` on, checked
        cell by cell against ``plan``."""
        size = -1
        bandwidth = [0.0, 0.0, 0.0, 0.0]  # algbw, busbw of half 0, then of half 1
        wrong: int | None = None
        max_error: str | None = None
        error_value = 0.0
        at = start
        for code, slot in plan:
            cell = tokens[at]
            at += 1
            if code == _SIZE:
                digits = cell if is_count(cell) else (trailing_count(cell) if at - 1 == start else None)
                if digits is None:
                    return None
                size = int(digits)
            elif code == _COUNT:
                if not (cell.isdecimal() and cell.isascii()):
                    return None
            elif code == _WORD:
                if not is_word(cell):
                    return None
            elif code == _ROOT:
                if not is_integer(cell):
                    return None
            elif code == _NUMBER:
                if number(cell) is None:
                    return None
            elif code == _BANDWIDTH:
                value = number(cell)
                if value is None or not finite(value) or value < 0:
                    return None
                bandwidth[slot] = value
            elif code == _WRONG:
                if cell != NOT_AVAILABLE:
                    counted = count_value(cell)
                    if counted is None:
                        return None
                    wrong = (wrong or 0) + counted
            elif code == _ERROR:
                if cell != NOT_AVAILABLE:
                    value = number(cell)
                    if value is None:
                        return None
                    if max_error is None or value > error_value:
                        max_error, error_value = cell, value
            elif code == _TIMESTAMP:
                at += 1  # date and time: two tokens
        if size < 0:
            return None
        out, inside = self.slots
        if inside < 0:
            return Point(size, bandwidth[out], bandwidth[out + 1], wrong, None, None, max_error)
        alg, bus = (
            (bandwidth[out], bandwidth[out + 1]) if out >= 0 else (bandwidth[inside], bandwidth[inside + 1])
        )
        return Point(size, alg, bus, wrong, bandwidth[inside], bandwidth[inside + 1], max_error)


def header(tokens: Sequence[str], title: Sequence[str] = ()) -> Layout | None:
    """The layout a column-header line names (its tokens; anything before ``size``/``bytes`` is a
    prefix), with ``title`` (the halves a title line named) when it has as many halves."""
    start = next((i for i, t in enumerate(tokens) if t.lstrip("#") in ("size", "bytes")), None)
    if start is None:
        return None
    names = [tokens[start].lstrip("#"), *tokens[start + 1 :]]
    if len(names) < 2 or _KINDS.get(names[1]) is not Kind.COUNT or len(names) > 64:
        return None
    columns: list[Column] = []
    algbw = busbw = 0  # each half has one algbw and one busbw; #wrong/error follow their algbw
    for name in names:
        kind = _KINDS.get(name, Kind.ANY)
        half = -1
        if kind is Kind.ALGBW:
            half, algbw = algbw, algbw + 1
        elif kind is Kind.BUSBW:
            half, busbw = busbw, busbw + 1
        elif kind in (Kind.WRONG, Kind.ERROR):
            half = max(algbw - 1, 0)
        columns.append(Column(name, kind, half))
    halves = algbw
    if halves not in (1, 2) or busbw != halves:
        return None
    if any(c.kind is Kind.TIMESTAMP for c in columns[:-1]):
        return None  # a timestamp cell is two tokens: only ever the last column
    named = tuple(title) if len(title) == halves and len(set(title)) == halves else HALVES[:halves]
    width = len(columns) + sum(1 for c in columns if c.kind is Kind.TIMESTAMP)
    slots = (
        2 * named.index(OUT_OF_PLACE) if OUT_OF_PLACE in named else -1,
        2 * named.index(IN_PLACE) if IN_PLACE in named else -1,
    )
    plan = tuple(_step(c) for c in columns)
    blank_op = tuple(step for step, c in zip(plan, columns, strict=True) if c.name not in _OP_NAMES)
    return Layout(tuple(columns), named, width, plan, slots, blank_op if len(blank_op) < len(plan) else ())


def _step(column: Column) -> tuple[int, int]:
    """A column as (check code, slot): the slot of an algbw/busbw value among a row's four."""
    code = _CODES[column.kind]
    slot = 2 * column.half + (column.kind is Kind.BUSBW) if code == _BANDWIDTH else column.half
    return code, slot


def title(tokens: Sequence[str]) -> tuple[str, ...] | None:
    """The halves a title line names (``out-of-place in-place``, ``in-place``...), in order."""
    first = next((i for i, t in enumerate(tokens) if t.endswith(HALVES)), None)
    if first is None:
        return None
    words = [tokens[first].rpartition("#")[2], *tokens[first + 1 :]]
    if not all(w in _TITLE_WORDS for w in words):
        return None
    return tuple(w for w in words if w in HALVES)

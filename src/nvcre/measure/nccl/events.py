"""What a reader makes of one log line: a data point, or a fact about the run around it.

Readers (:mod:`.reader`) turn lines into these; :class:`~.aggregate.Aggregate` folds them. A
plain ``str`` is a network transport name (``NCCL INFO Using network ...``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from nvcre.measure.nccl.context import Command, Sweep


class Point(NamedTuple):
    """One data row: out-of-place algbw/busbw of one message size (a table printing only its
    in-place half gives those here too), the in-place half when printed, the row's ``#wrong``
    total (None when no cell of it is a number) and its largest old-style ``error`` cell.
    (A named tuple: one is made per row, and cheaply.)"""

    size_bytes: int
    alg_bw: float
    bus_bw: float
    wrong: int | None = None
    in_alg_bw: float | None = None
    in_bus_bw: float | None = None
    max_error: str | None = None


@dataclass(frozen=True)
class TableStart:
    """A column-header line: a new table, with the sweep its ``# nThread`` line announced."""

    columns: str
    sweep: Sweep | None


@dataclass(frozen=True)
class OutOfBounds:
    count: int
    status: str  #: ``OK`` or ``FAILED``


@dataclass(frozen=True)
class AvgBusBandwidth:
    value: str  #: as printed (``%g``)
    failed: bool = False  #: nccl-tests marked it ``FAILED`` (below ``NCCL_TESTS_MIN_BW``)
    line: str = ""  #: the line, cut to its first 300 characters


@dataclass(frozen=True)
class RankSeen:
    rank: int
    host: str | None  #: None where the line names no host (NCCL 1.x's own tests)


@dataclass(frozen=True)
class TestName:
    name: str


@dataclass(frozen=True)
class CommRanks:
    """A communicator's size from ``NCCL INFO ... nranks N``."""

    count: int


@dataclass(frozen=True)
class Failure:
    line: str  #: the line, cut to its first 300 characters


@dataclass(frozen=True)
class HeaderlessRow:
    """A line shaped like a table row where no column header is in force: counted, never read."""


Event = TableStart | OutOfBounds | AvgBusBandwidth | RankSeen | TestName | CommRanks | Failure | HeaderlessRow
Item = Point | str | Event | Sweep | Command | None

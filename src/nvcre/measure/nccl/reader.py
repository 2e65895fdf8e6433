"""Readers: one log line in, one item out (spec 2.2, and nvcre's nccl-tests table reader).

A LogProfile chooses its reader with ``spec.reader``:

* ``NcclTests`` (the built-in ``nccl-bandwidth`` and ``nccl-loopback``): :class:`TableReader`,
  which reads each table from its own header lines (:mod:`.layout`) and everything around it
  (:mod:`.context`). It is stateful: a row is read with the header in force, which a running
  measurement carries from one sample to the next (:meth:`Parser.state`).
* ``Patterns`` (the default): the profile's ``bandwidthResult`` regular expression, as the
  reference reads logs; ``wrongOutOfPlace``/``wrongInPlace`` captures add up ``#wrong``.

Both take the profile's ``networkTransport`` pattern for the transport. A line is handled in time
linear in its length and garbage never raises.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nvcre.measure.nccl import context, events
from nvcre.measure.nccl.aggregate import Aggregate
from nvcre.measure.nccl.cells import count_value, finite, is_count, is_number, is_word, number, trailing_count
from nvcre.measure.nccl.context import AVG_BUS_BANDWIDTH, OUT_OF_BOUNDS, Sweep
from nvcre.measure.nccl.layout import Layout, header, title
from nvcre.measure.profile import CompiledProfile, Match, Pattern, ProfileError, capture_text

BANDWIDTH = "bandwidthResult"
TRANSPORT = "networkTransport"
WRONG_CAPTURES = ("wrongOutOfPlace", "wrongInPlace")
NO_ROWS = "no bandwidth rows recognised"
NCCL_TESTS = "NcclTests"
PATTERNS = "Patterns"
MAX_TABLE_LINE = 4096
"""Longer lines are never table, header or context lines (a real one is under 400 characters
with every prefix); they are only checked for failure markers."""


def strip_kubelet_prefix(line: str) -> str:
    """Drop the ``timestamps=true`` prefix (``2026-02-16T10:00:02.000000000Z `` or an offset zone).

    Spec 2.2: longer than 20 characters, ``-`` at index 4 and ``T`` at index 10 means everything
    up to and including the first space goes; any other line is used as it is.
    """
    if len(line) > 20 and line[4] == "-" and line[10] == "T":
        space = line.find(" ")
        if space >= 0:
            return line[space + 1 :]
    return line


class TableReader:
    """nccl-tests/rccl-tests output, read from its own headers (see :mod:`.layout`)."""

    def __init__(self, resume: Mapping[str, Any] | None = None) -> None:
        self.layout: Layout | None = Layout.from_state(resume) if resume else None
        self.title: tuple[str, ...] = ()
        self.sweep: Sweep | None = None
        self.previous: list[str] = []  #: the tokens of the last line that had any

    def parse(self, line: str) -> events.Item:
        if len(line) > MAX_TABLE_LINE:
            self.previous = []
            return events.Failure(line[: context.FAILURE_LINE_CHARS]) if context.is_failure(line) else None
        tokens = line.split()
        if not tokens:
            return None
        previous, self.previous = self.previous, tokens
        if self.layout is not None:
            point = self.layout.match(tokens)
            if point is not None:
                return point
        if "algbw" in line and "busbw" in line:
            layout = header(tokens, self.title)
            if layout is not None:
                self.layout, self.title, sweep, self.sweep = layout, (), self.sweep, None
                return events.TableStart(layout.names, sweep)
        return self._context(line, tokens, previous)

    def _context(self, line: str, tokens: list[str], previous: list[str]) -> events.Item:
        if "NCCL INFO" in line:  # NCCL's own progress lines: most of a debug log
            ranks = context.nccl_ranks(tokens)
            return events.CommRanks(ranks) if ranks else None
        if "-place" in line:
            halves = title(tokens)
            if halves is not None:
                self.title = halves
                return None
        if OUT_OF_BOUNDS in line:
            found = context.out_of_bounds(line)
            return events.OutOfBounds(*found) if found else None
        if AVG_BUS_BANDWIDTH in line:
            average = context.avg_bus_bandwidth(line)
            return events.AvgBusBandwidth(*average, line[: context.FAILURE_LINE_CHARS]) if average else None
        if "nThread" in line:
            self.sweep = context.sweep(tokens) or self.sweep
            return self.sweep
        if "Reducing" in line:
            reduced = context.reduced_max(tokens)
            if reduced is not None and self.sweep is not None:
                self.sweep = self.sweep.reduced(reduced)
            return None
        if "Rank" in line and "device" in line:
            found_rank = context.rank_line(tokens)
            if found_rank is not None:
                return events.RankSeen(*found_rank)
        if "Collective test" in line:
            name = context.collective_name(line)
            return events.TestName(name) if name else None
        if context.is_failure(line):
            return events.Failure(line[: context.FAILURE_LINE_CHARS])
        if "_perf" in line:
            return context.command(context.unwrapped(previous, tokens))
        if self.layout is None and _row_shaped(tokens):
            return events.HeaderlessRow()
        return None


def _row_shaped(tokens: list[str]) -> bool:
    """Whether the tokens end like an nccl-tests row (size, count, type, then numbers), for the
    count of rows seen without a header; such a row is never read."""
    start = next(
        (
            i
            for i in range(len(tokens) - 2)
            if (is_count(tokens[i]) or trailing_count(tokens[i]))
            and is_count(tokens[i + 1])
            and is_word(tokens[i + 2])
        ),
        None,
    )
    if start is None or not (is_number(tokens[-1]) or tokens[-1] == "N/A"):
        return False
    return sum(1 for t in tokens[start + 3 :] if is_number(t)) >= 4


class Parser:
    """The reader a profile asks for, and its transport pattern (spec 2.2)."""

    def __init__(self, profile: CompiledProfile, resume: Mapping[str, Any] | None = None) -> None:
        self.transport: Pattern | None = profile.pattern(TRANSPORT)
        self.table: TableReader | None = None
        self.bandwidth: Pattern | None = None
        if profile.reader == NCCL_TESTS:
            self.table = TableReader(resume)
            return
        self.bandwidth = profile.pattern(BANDWIDTH)
        if self.bandwidth is None:
            raise ProfileError(
                f"spec.patterns.{BANDWIDTH}: required to measure bandwidth (or spec.reader: {NCCL_TESTS})"
            )

    def aggregate(self) -> Aggregate:
        """An empty aggregate for this reader's items."""
        return Aggregate(tables=self.table is not None)

    def state(self) -> dict[str, str] | None:
        """The table layout in force, for the next provisional sample (None: nothing to carry)."""
        return self.table.layout.to_state() if self.table is not None and self.table.layout else None

    def fold(self, aggregate: Aggregate, lines: Iterable[str]) -> None:
        """Read ``lines`` into ``aggregate``, which also keeps the last few as the log's tail."""
        for line in lines:
            aggregate.add(self.parse_line(line))
            aggregate.remember(strip_kubelet_prefix(line.rstrip("\r\n")))

    def parse_line(self, line: str) -> events.Item:
        """A data point, a fact about the run, a transport name, or None for any other line."""
        content = strip_kubelet_prefix(line.rstrip("\r\n"))
        if self.table is not None:
            item = self.table.parse(content)
            if item is not None:
                return item
        elif self.bandwidth is not None:
            match = self.bandwidth.search(content)
            if match is not None:
                return _point(match)
        if self.transport is not None:
            found = self.transport.search(content)
            if found is not None:
                return capture_text(found, "transport") or None
        return None


def _point(match: Match) -> events.Point | None:
    """Spec 2.2 step 3: a size that is not an int64 or a bandwidth that is not a float skips the row."""
    groups = match.groupdict()
    size = (groups.get("size") or "").strip()
    if not is_count(size):
        return None
    alg, bus = number((groups.get("algBW") or "").strip()), number((groups.get("busBW") or "").strip())
    if alg is None or bus is None or not (finite(alg) and finite(bus)):
        return None
    counts = [count_value((groups.get(name) or "").strip()) for name in WRONG_CAPTURES]
    known = [c for c in counts if c is not None]
    return events.Point(int(size), alg, bus, sum(known) if known else None)

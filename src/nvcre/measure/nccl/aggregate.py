"""Folding a log's items into what a BandwidthMeasurement's status records (spec 2.5; pure).

Per message size the sums of the out-of-place and in-place bandwidths, in first-appearance
order, at most :data:`SIZE_CAP` sizes (constant memory per size; rows of further sizes are only
counted); the tables seen and whether each reached its footer and its last size; the footers,
ranks, hosts, test name and failure lines. :meth:`Aggregate.summary` gives the status fields,
shared by the controller's terminal write and ``nvcrectl analyze nccl``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nvcre.api.v1alpha1.constants import MeasurementReason
from nvcre.measure.nccl.cells import finite, number
from nvcre.measure.nccl.context import FAILURE_LINE_CHARS, Command, Sweep
from nvcre.measure.nccl.events import (
    AvgBusBandwidth,
    CommRanks,
    Failure,
    HeaderlessRow,
    Item,
    OutOfBounds,
    Point,
    RankSeen,
    TableStart,
    TestName,
)

SIZE_CAP = 4096
"""Distinct message sizes kept per measurement; rows of any further size are counted in
``sizesDropped`` (an nccl-tests sweep has about 35; 4,096 results stay far below the API
server's object size limit)."""
HOST_CAP = 4096
FAILURE_LINES_KEPT = 5
TAIL_LINES = 5
"""The log's last non-blank lines a final read keeps (``logTail``)."""
NO_DATA = "Job succeeded but no bandwidth data was parsed; check spec.logProfileRef"


@dataclass(frozen=True)
class SizeResult:
    """One ``status.results`` entry: averages as 2-decimal strings (GB/s)."""

    size_bytes: int
    alg_bw: str
    bus_bw: str
    samples: int
    in_alg_bw: str | None = None
    in_bus_bw: str | None = None
    wrong: int | None = None
    max_error: str | None = None

    def to_status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "sizeBytes": self.size_bytes,
            "algBW": self.alg_bw,
            "busBW": self.bus_bw,
            "samples": self.samples,
        }
        optional = (
            ("inPlaceAlgBW", self.in_alg_bw),
            ("inPlaceBusBW", self.in_bus_bw),
            ("wrong", self.wrong),
            ("maxError", self.max_error),
        )
        out.update((key, value) for key, value in optional if value is not None)
        return out

    @classmethod
    def from_status(cls, entry: Mapping[str, Any]) -> SizeResult:
        wrong = entry.get("wrong")
        return cls(
            int(entry["sizeBytes"]),
            str(entry["algBW"]),
            str(entry["busBW"]),
            int(entry["samples"]),
            _optional_text(entry.get("inPlaceAlgBW")),
            _optional_text(entry.get("inPlaceBusBW")),
            int(wrong) if wrong is not None else None,
            _optional_text(entry.get("maxError")),
        )


def _optional_text(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass
class _Sum:
    alg: float = 0.0
    bus: float = 0.0
    count: int = 0
    in_alg: float = 0.0
    in_bus: float = 0.0
    in_count: int = 0
    wrong: int | None = None
    max_error: str | None = None

    def add(self, point: Point) -> None:
        self.alg += point.alg_bw
        self.bus += point.bus_bw
        self.count += 1
        if point.in_alg_bw is not None and point.in_bus_bw is not None:
            self.in_alg += point.in_alg_bw
            self.in_bus += point.in_bus_bw
            self.in_count += 1
        if point.wrong is not None:
            self.wrong = (self.wrong or 0) + point.wrong
        self.max_error = larger_error(self.max_error, point.max_error)


def larger_error(a: str | None, b: str | None) -> str | None:
    """The larger of two printed ``error`` cells (either may be absent)."""
    if a is None or b is None:
        return a if b is None else b
    return b if (number(b) or 0.0) > (number(a) or 0.0) else a


@dataclass
class _Table:
    """Progress of one table: enough to say whether it was complete, in constant memory."""

    sweep: Sweep | None
    rows: int = 0
    max_size: int = -1
    last_size: int = -1
    footer: bool = False

    def incomplete(self) -> str | None:
        """Why this table is not a complete sweep, or None when it is."""
        if not self.rows:
            return "the table header was printed but no row followed"
        ends = self.sweep.last_sizes() if self.sweep is not None else None
        short = ends is not None and ends[1] is not None and self.max_size <= ends[1]
        if short and ends is not None:
            if self.footer:
                return f"the table ended at {self.max_size} B; the sweep was to reach {ends[0]} B"
            return f"the table stopped at {self.last_size} B before the footer; the sweep was to reach {ends[0]} B"
        if not self.footer:
            return "no footer (# Out of bounds / # Avg bus bandwidth) after the table"
        return None


@dataclass
class Aggregate:
    """Per-size sums in first-appearance order and everything else a log said.

    ``tables`` is True for nvcre's nccl-tests table reader (the completeness, footers, ranks,
    hosts, test and failure fields mean something), False for a profile's own patterns.
    """

    sums: dict[int, _Sum] = field(default_factory=dict)
    transports: set[str] = field(default_factory=set)
    wrong_values: int = 0
    rows: int = 0
    last_size: int = 0
    last_bus_bw: float = 0.0
    lines: int = 0
    dropped: int = 0
    tables: bool = False
    table_count: int = 0
    first_incomplete: str | None = None
    current: _Table | None = None
    collective: str | None = None
    binary: str | None = None
    command: Command | None = None
    sweep: Sweep | None = None
    max_rank: int = -1
    comm_ranks: int = 0
    hosts: set[str] = field(default_factory=set)
    out_of_bounds: tuple[int, str] | None = None
    avg_bus_bandwidth: str | None = None
    failures: int = 0
    failure_lines: list[str] = field(default_factory=list)
    headerless: int = 0
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))

    def remember(self, content: str) -> None:
        """One more line of the log (without its kubelet prefix): the last few that say something
        (not blank, not a bare ``#``) are quoted when the log gave no final data."""
        if any(ch.isalnum() for ch in content):
            self.tail.append(content.strip()[:FAILURE_LINE_CHARS])

    def add(self, item: Item) -> None:
        self.lines += 1
        if isinstance(item, Point):
            self._point(item)
        elif isinstance(item, str):
            if item:
                self.transports.add(item)
        elif item is not None:
            self._event(item)

    def _point(self, point: Point) -> None:
        self.rows += 1
        self.last_size, self.last_bus_bw = point.size_bytes, point.bus_bw
        self.wrong_values += point.wrong or 0
        total = self.sums.get(point.size_bytes)
        if total is None:
            if len(self.sums) >= SIZE_CAP:
                self.dropped += 1
            else:
                total = self.sums[point.size_bytes] = _Sum()
        if total is not None:
            total.add(point)
        if self.current is not None:
            self.current.rows += 1
            self.current.max_size = max(self.current.max_size, point.size_bytes)
            self.current.last_size = point.size_bytes

    def _event(self, item: Item) -> None:
        if isinstance(item, TableStart):
            self._close_table()
            self.table_count += 1
            self.current = _Table(item.sweep)
        elif isinstance(item, OutOfBounds):
            count = item.count + (self.out_of_bounds[0] if self.out_of_bounds else 0)
            failed = item.status == "FAILED" or (
                self.out_of_bounds is not None and self.out_of_bounds[1] == "FAILED"
            )
            self.out_of_bounds = (count, "FAILED" if failed else "OK")
            self._footer()
        elif isinstance(item, AvgBusBandwidth):
            self.avg_bus_bandwidth = item.value
            self._footer()
            if item.failed:  # nccl-tests' own verdict on the average: a failure it logged
                self._event(Failure(item.line))
        elif isinstance(item, RankSeen):
            self.max_rank = max(self.max_rank, item.rank)
            if item.host is not None and len(self.hosts) < HOST_CAP:
                self.hosts.add(item.host)
        elif isinstance(item, TestName):
            self.collective = self.collective or item.name
        elif isinstance(item, Command):
            self.binary = self.binary or item.binary
            self.command = self.command or item
        elif isinstance(item, Sweep):
            self.sweep = item
        elif isinstance(item, CommRanks):
            self.comm_ranks = max(self.comm_ranks, item.count)
        elif isinstance(item, Failure):
            self.failures += 1
            if len(self.failure_lines) < FAILURE_LINES_KEPT:
                self.failure_lines.append(item.line[:FAILURE_LINE_CHARS])
        elif isinstance(item, HeaderlessRow):
            self.headerless += 1

    def _footer(self) -> None:
        if self.current is not None:
            self.current.footer = True

    def _close_table(self) -> None:
        if self.current is not None and self.first_incomplete is None:
            reason = self.current.incomplete()
            if reason is not None:
                self.first_incomplete = (
                    reason if self.table_count == 1 else f"table {self.table_count}: {reason}"
                )

    # -- what the log says -------------------------------------------------------------------

    @property
    def transport(self) -> list[str]:
        return sorted(self.transports)

    def results(self) -> list[SizeResult]:
        return final_results(self)

    @property
    def test(self) -> str | None:
        return self.collective or self.binary

    @property
    def ranks(self) -> int | None:
        """The ranks the log states: its device list (highest rank + 1) or NCCL's communicator
        size; else the launcher's process count x threads x GPUs of a run that started."""
        stated = max(self.max_rank + 1, self.comm_ranks)
        if stated:
            return stated
        started = self.table_count or self.sweep is not None
        if self.command is None or self.command.processes is None or not started:
            return None
        threads, gpus = (
            (self.sweep.threads, self.sweep.gpus) if self.sweep else (self.command.threads, self.command.gpus)
        )
        return self.command.processes * threads * gpus

    def incomplete_reason(self) -> str | None:
        """Why the log is not a complete nccl-tests run, or None when every table is."""
        if self.first_incomplete is not None:
            return self.first_incomplete
        if self.current is not None:
            reason = self.current.incomplete()
            if reason is not None:
                return reason if self.table_count == 1 else f"table {self.table_count}: {reason}"
            return None
        if self.headerless:
            return (
                f"{self.headerless} rows were seen without a table header (nothing names their "
                "columns, so none was read)"
            )
        return "no nccl-tests table header in the log"

    def final_status(self) -> dict[str, Any]:
        """What a final read of the whole log records: the results, transport, wrongValues, the
        lines read, the log's last lines and :meth:`summary` (the controller's terminal write and
        ``nvcrectl analyze nccl`` alike)."""
        return {
            "results": [r.to_status() for r in self.results()],
            "transport": self.transport,
            "wrongValues": self.wrong_values,
            "linesRead": self.lines,
            "logTail": list(self.tail),
            **self.summary(),
        }

    def summary(self) -> dict[str, Any]:
        """The status fields beyond ``results``/``transport``/``wrongValues`` (camelCase; a field
        the log does not state is left out)."""
        out: dict[str, Any] = {"sizesDropped": self.dropped}
        if not self.tables:
            return out
        reason = self.incomplete_reason()
        out.update(
            {
                "test": self.test,
                "ranks": self.ranks,
                "hosts": sorted(self.hosts),
                "avgBusBandwidthGBps": self.avg_bus_bandwidth,
                "outOfBounds": (
                    {"count": self.out_of_bounds[0], "status": self.out_of_bounds[1]}
                    if self.out_of_bounds
                    else None
                ),
                "complete": reason is None,
                "incompleteReason": reason,
                "failureLines": {"count": self.failures, "lines": list(self.failure_lines)},
                "rowsWithoutHeader": self.headerless,
            }
        )
        return {key: value for key, value in out.items() if value is not None}


def read(lines: Iterable[str], parser: Any) -> Aggregate:
    """Fold every line (streamed: nothing but the per-size sums and a few counters is kept)."""
    aggregate: Aggregate = parser.aggregate()
    parser.fold(aggregate, lines)
    return aggregate


def _fixed(value: float) -> str:
    text = f"{value:.2f}"
    return "0.00" if text == "-0.00" else text


def _result(size: int, s: _Sum) -> SizeResult:
    in_alg = _fixed(s.in_alg / s.in_count) if s.in_count else None
    in_bus = _fixed(s.in_bus / s.in_count) if s.in_count else None
    return SizeResult(
        size, _fixed(s.alg / s.count), _fixed(s.bus / s.count), s.count, in_alg, in_bus, s.wrong, s.max_error
    )


def final_results(aggregate: Aggregate) -> list[SizeResult]:
    """Spec 2.5: average = sum / count per size, rounded once, in first-appearance order."""
    return [_result(size, s) for size, s in aggregate.sums.items()]


def _stored(value: str | None) -> float:
    parsed = number(value) if value is not None else None
    return parsed if parsed is not None and finite(parsed) else 0.0


def _merge(old: SizeResult, extra: _Sum) -> SizeResult:
    samples = old.samples + extra.count
    alg = (_stored(old.alg_bw) * old.samples + extra.alg) / samples
    bus = (_stored(old.bus_bw) * old.samples + extra.bus) / samples
    in_alg, in_bus = old.in_alg_bw, old.in_bus_bw
    if extra.in_count:
        weight = old.samples if old.in_alg_bw is not None else 0
        in_alg = _fixed((_stored(old.in_alg_bw) * weight + extra.in_alg) / (weight + extra.in_count))
        in_bus = _fixed((_stored(old.in_bus_bw) * weight + extra.in_bus) / (weight + extra.in_count))
    wrong = old.wrong if extra.wrong is None else (old.wrong or 0) + extra.wrong
    max_error = larger_error(old.max_error, extra.max_error)
    return SizeResult(old.size_bytes, _fixed(alg), _fixed(bus), samples, in_alg, in_bus, wrong, max_error)


def merge_provisional(stored: Sequence[SizeResult], new: Aggregate) -> tuple[list[SizeResult], int]:
    """Spec 2.5 running merge: (stored average x N + new sum) / (N + new count), from the stored
    *rounded* value, re-rounded; new sizes are appended in their order of appearance while fewer
    than :data:`SIZE_CAP` are kept. Also the rows this sample dropped (beyond the cap)."""
    merged: list[SizeResult] = []
    seen: set[int] = set()
    for old in stored:
        seen.add(old.size_bytes)
        extra = new.sums.get(old.size_bytes)
        merged.append(old if extra is None or extra.count == 0 else _merge(old, extra))
    dropped = new.dropped
    for size, s in new.sums.items():
        if size in seen:
            continue
        if len(merged) >= SIZE_CAP:
            dropped += s.count
        else:
            merged.append(_result(size, s))
    return merged, dropped


def peak(results: Sequence[SizeResult]) -> tuple[float, float] | None:
    """(busBandwidthGBps, algBandwidthGBps): the maximum over sizes (not nccl-tests' own average)."""
    if not results:
        return None
    return max(_stored(r.bus_bw) for r in results), max(_stored(r.alg_bw) for r in results)


def union_transport(stored: Iterable[str], new: Iterable[str]) -> list[str]:
    return sorted({*stored, *new})


def final_reason(final: Aggregate, source: str) -> tuple[str, str]:
    """The ``Complete`` (reason, message) of a succeeded Job's final read of ``source`` (the pod,
    ``<namespace>/<pod>``, or the files ``nvcrectl analyze`` read)."""
    if not final.rows:
        return MeasurementReason.NO_DATA_COLLECTED, NO_DATA
    return (
        MeasurementReason.JOB_SUCCEEDED,
        f"Final results from the complete log of {source}: {final.rows} rows, {len(final.sums)} message sizes",
    )

"""nccl-tests logs into a BandwidthMeasurement's status (spec 2.2-2.5; pure, streaming).

:func:`parse_line` turns one log line into a data point or a transport name; :class:`Aggregate`
folds points into per-size sums in first-appearance order (constant memory per message size);
:func:`final_results` rounds each average once (``%.2f``); :func:`merge_provisional` folds a
sample of new lines into stored (rounded) results, the running average of spec 2.5. The
controller, ``nvcrectl analyze nccl`` and the tests all go through :class:`Parser` and
:class:`Aggregate`.

Beyond the reference: ``wrongValues`` totals nccl-tests' ``#wrong`` columns (out-of-place and
in-place; ``N/A`` counts 0) from the optional ``wrongOutOfPlace`` / ``wrongInPlace`` captures.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nvcre.api.v1alpha1.constants import MeasurementReason
from nvcre.measure.profile import CompiledProfile, Match, Pattern, ProfileError, capture_text

BANDWIDTH = "bandwidthResult"
TRANSPORT = "networkTransport"
WRONG_CAPTURES = ("wrongOutOfPlace", "wrongInPlace")
NO_ROWS = "no bandwidth rows recognised"
NO_DATA = "Job succeeded but no bandwidth data was parsed; check spec.logProfileRef"


@dataclass(frozen=True)
class Point:
    """One data row: the out-of-place algbw/busbw of one message size, and its ``#wrong`` total."""

    size_bytes: int
    alg_bw: float
    bus_bw: float
    wrong: int = 0


@dataclass(frozen=True)
class SizeResult:
    """One ``status.results`` entry: averages as 2-decimal strings (GB/s)."""

    size_bytes: int
    alg_bw: str
    bus_bw: str
    samples: int

    def to_status(self) -> dict[str, Any]:
        return {
            "sizeBytes": self.size_bytes,
            "algBW": self.alg_bw,
            "busBW": self.bus_bw,
            "samples": self.samples,
        }

    @classmethod
    def from_status(cls, entry: Mapping[str, Any]) -> SizeResult:
        return cls(int(entry["sizeBytes"]), str(entry["algBW"]), str(entry["busBW"]), int(entry["samples"]))


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


class Parser:
    """The bandwidth patterns of one profile (spec 2.2)."""

    def __init__(self, profile: CompiledProfile) -> None:
        bandwidth = profile.pattern(BANDWIDTH)
        if bandwidth is None:
            raise ProfileError(f"spec.patterns.{BANDWIDTH}: required to measure bandwidth")
        self.bandwidth: Pattern = bandwidth
        self.transport: Pattern | None = profile.pattern(TRANSPORT)

    def parse_line(self, line: str) -> Point | str | None:
        """A data point, a transport name (from ``networkTransport``), or None for any other line."""
        content = strip_kubelet_prefix(line.rstrip("\r\n"))
        match = self.bandwidth.search(content)
        if match is not None:
            return _point(match)
        if self.transport is not None:
            found = self.transport.search(content)
            if found is not None:
                return capture_text(found, "transport") or None
        return None


def _point(match: Match) -> Point | None:
    """Spec 2.2 step 3: a size that is not an int64 or a bandwidth that is not a float skips the row."""
    groups = match.groupdict()
    size = (groups.get("size") or "").strip()
    if not (size.isascii() and size.isdecimal()) or int(size) >= 1 << 63:
        return None
    try:
        alg, bus = float(groups.get("algBW") or ""), float(groups.get("busBW") or "")
    except ValueError:
        return None
    if not (_finite(alg) and _finite(bus)):
        return None
    wrong = 0
    for name in WRONG_CAPTURES:
        text = (groups.get(name) or "").strip()
        wrong += int(text) if text.isascii() and text.isdecimal() else 0
    return Point(int(size), alg, bus, wrong)


def _finite(value: float) -> bool:
    return value == value and abs(value) != float("inf")


@dataclass
class _Sum:
    alg: float = 0.0
    bus: float = 0.0
    count: int = 0


@dataclass
class Aggregate:
    """Per-size sums in first-appearance order, the transports seen and the ``#wrong`` total."""

    sums: dict[int, _Sum] = field(default_factory=dict)
    transports: set[str] = field(default_factory=set)
    wrong_values: int = 0
    rows: int = 0
    lines: int = 0

    def add(self, item: Point | str | None) -> None:
        self.lines += 1
        if isinstance(item, Point):
            total = self.sums.setdefault(item.size_bytes, _Sum())
            total.alg += item.alg_bw
            total.bus += item.bus_bw
            total.count += 1
            self.wrong_values += item.wrong
            self.rows += 1
        elif item:
            self.transports.add(item)

    @property
    def transport(self) -> list[str]:
        return sorted(self.transports)

    def results(self) -> list[SizeResult]:
        return final_results(self)


def read(lines: Iterable[str], parser: Parser) -> Aggregate:
    """Fold every line (streamed: nothing but the per-size sums is kept)."""
    aggregate = Aggregate()
    for line in lines:
        aggregate.add(parser.parse_line(line))
    return aggregate


def _fixed(value: float) -> str:
    text = f"{value:.2f}"
    return "0.00" if text == "-0.00" else text


def final_results(aggregate: Aggregate) -> list[SizeResult]:
    """Spec 2.5: average = sum / count per size, rounded once, in first-appearance order."""
    return [
        SizeResult(size, _fixed(s.alg / s.count), _fixed(s.bus / s.count), s.count)
        for size, s in aggregate.sums.items()
    ]


def _stored(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        return 0.0
    return number if _finite(number) else 0.0


def merge_provisional(stored: Sequence[SizeResult], new: Aggregate) -> list[SizeResult]:
    """Spec 2.5 running merge: (stored average x N + new sum) / (N + new count), from the stored
    *rounded* value, re-rounded; new sizes are appended in their order of appearance."""
    merged: list[SizeResult] = []
    seen: set[int] = set()
    for old in stored:
        seen.add(old.size_bytes)
        extra = new.sums.get(old.size_bytes)
        if extra is None or extra.count == 0:
            merged.append(old)
            continue
        samples = old.samples + extra.count
        alg = (_stored(old.alg_bw) * old.samples + extra.alg) / samples
        bus = (_stored(old.bus_bw) * old.samples + extra.bus) / samples
        merged.append(SizeResult(old.size_bytes, _fixed(alg), _fixed(bus), samples))
    fresh = Aggregate(sums={size: s for size, s in new.sums.items() if size not in seen})
    return merged + final_results(fresh)


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

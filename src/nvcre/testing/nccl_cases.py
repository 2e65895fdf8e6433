"""The expected figures of one real nccl-tests log, and the check every log test runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import yaml

from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.nccl import Aggregate, Parser, SizeResult, peak, read
from nvcre.measure.profile import compile_profile

(_MANIFEST,) = [p for p in builtin_profiles() if p["metadata"]["name"] == "nccl-bandwidth"]
PROFILE = compile_profile(_MANIFEST)

Row = tuple[int, str, str, str | None, str | None, int]  # size, algBW, busBW, in-place algBW, busBW, samples


def status_row(
    size: int, alg: str, bus: str, in_alg: str, in_bus: str, *, samples: int = 1, wrong: int = 0
) -> dict[str, Any]:
    """One size's entry in a BandwidthMeasurement's ``status.results``, as a user reads it."""
    return {
        "sizeBytes": size,
        "algBW": alg,
        "busBW": bus,
        "samples": samples,
        "inPlaceAlgBW": in_alg,
        "inPlaceBusBW": in_bus,
        "wrong": wrong,
    }


class Case(NamedTuple):
    rows: int
    sizes: int
    avg: str | None
    oob: tuple[int, str] | None
    complete: bool
    first: Row | None = None
    last: Row | None = None
    peak: tuple[float, float] | None = None
    failures: int = 0
    test: str | None = None
    ranks: int | None = None
    hosts: int = 0
    transport: tuple[str, ...] = ()
    wrong: int = 0
    headerless: int = 0


_TUPLES = ("oob", "first", "last", "peak", "transport")


def load_cases(path: Path) -> dict[str, Case]:
    """The cases of a YAML file: log file name -> its :class:`Case` fields (lists read as tuples)."""
    found: dict[str, dict[str, Any]] = yaml.safe_load(path.read_text())
    return {name: _case(fields) for name, fields in found.items()}


def _case(fields: dict[str, Any]) -> Case:
    read: dict[str, Any] = {k: tuple(v) if k in _TUPLES and v is not None else v for k, v in fields.items()}
    return Case(**read)


def parse(path: Path) -> Aggregate:
    with open(path, errors="replace") as log:
        return read(log, Parser(PROFILE))


def _row(result: SizeResult) -> Row:
    return (
        result.size_bytes,
        result.alg_bw,
        result.bus_bw,
        result.in_alg_bw,
        result.in_bus_bw,
        result.samples,
    )


def measured(path: Path) -> Case:
    """What the reader makes of the log, in the shape of a :class:`Case`."""
    aggregate = parse(path)
    results = aggregate.results()
    summary: dict[str, Any] = aggregate.summary()
    oob = summary.get("outOfBounds")
    return Case(
        rows=aggregate.rows,
        sizes=len(results),
        avg=summary.get("avgBusBandwidthGBps"),
        oob=(oob["count"], oob["status"]) if oob else None,
        complete=summary["complete"],
        first=_row(results[0]) if results else None,
        last=_row(results[-1]) if results else None,
        peak=peak(results),
        failures=summary["failureLines"]["count"],
        test=summary.get("test"),
        ranks=summary.get("ranks"),
        hosts=len(summary["hosts"]),
        transport=tuple(aggregate.transport),
        wrong=aggregate.wrong_values,
        headerless=summary["rowsWithoutHeader"],
    )


def check(path: Path, case: Case) -> None:
    got = measured(path)
    wrong = {
        field: (getattr(got, field), want)
        for field, want in case._asdict().items()
        if getattr(got, field) != want
    }
    assert not wrong, f"{path.name}: (measured, expected) {wrong}"

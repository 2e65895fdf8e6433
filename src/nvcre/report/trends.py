"""Each failed node's trend over its last results (pure), from its NodeRecord.

For every failed node of the run and every category its record holds, the node's last
:data:`LAST` results of that category, oldest first: when, the measured value of the category's
key (bus bandwidth for NCCL, else step time, else goodput) and the verdict, this run's marked.
Nothing without records (a report without records is the report it was before records existed).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from nvcre.fleet import history as fh
from nvcre.fleet.records import record_node
from nvcre.measure.thresholds import AVG_STEP_TIME, BUS_BANDWIDTH, GOODPUT_RATIO, number

LAST: Final = 10
KEYS: Final = (BUS_BANDWIDTH, AVG_STEP_TIME, GOODPUT_RATIO)
"""The value a trend follows: the first of these the category's results hold."""
UNITS: Final = {BUS_BANDWIDTH: "GB/s", AVG_STEP_TIME: "s", GOODPUT_RATIO: ""}


@dataclass(frozen=True)
class TrendPoint:
    time: str
    """RFC 3339, as the record holds it."""
    value: float | None
    verdict: str
    this_run: bool = False


@dataclass(frozen=True)
class NodeTrend:
    node: str
    category: str
    key: str
    points: tuple[TrendPoint, ...]

    @property
    def unit(self) -> str:
        return UNITS.get(self.key, "")


def _key(results: Sequence[Mapping[str, Any]]) -> str | None:
    for key in KEYS:
        if any(key in (r.get("values") or {}) for r in results):
            return key
    return None


def node_trends(
    records: Sequence[Mapping[str, Any]] | None,
    failed: Iterable[str],
    uids: Collection[str],
    last: int = LAST,
) -> tuple[NodeTrend, ...]:
    """The trends of the ``failed`` nodes (sorted), each category's in the record's order."""
    if not records:
        return ()
    by_name = {record_node(r): r for r in records}
    out = []
    for node in sorted(set(failed)):
        record = by_name.get(node)
        for history in ((record or {}).get("status") or {}).get("categories") or ():
            results = sorted(
                (r for r in history.get("results") or () if fh.when(r) is not None),
                key=lambda r: fh.when(r),  # type: ignore[arg-type, return-value]
            )[-last:]
            key = _key(results)
            if key is None:
                continue
            points = tuple(
                TrendPoint(
                    time=str(r.get("time") or ""),
                    value=number((r.get("values") or {}).get(key)),
                    verdict=str(r.get("verdict") or ""),
                    this_run=fh.of_run(r, uids),
                )
                for r in results
            )
            out.append(NodeTrend(node, str(history.get("name") or ""), key, points))
    return tuple(out)

"""Per-node gauges of the NodeRecords, as pure functions: what ``nvcre-manager``'s ``/metrics``
exports of each node's record, so that a Prometheus keeps its history for as long as it keeps
anything (a record keeps 20 results per category; the gauges, scraped, keep every one).

:func:`node_series` turns one record into its samples (done once per version of the record, on
the informer's events); :func:`samples` adds the one figure that depends on the time of the
scrape, the failures of the last 30 days, which decays as results age (the record's own
``summary.failuresLast30Days`` counts as of its last write). The series are bounded: per node,
one per category and measured key (at most :data:`~nvcre.api.v1alpha1.noderecord.MAX_CATEGORIES`
categories per record, five keys), and one per node for the rest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from nvcre.api.v1alpha1.meta import parse_time
from nvcre.api.v1alpha1.noderecord import FAILED, FAILURE_WINDOW_DAYS, PASSED
from nvcre.fleet.records import record_node
from nvcre.measure.thresholds import number


@dataclass(frozen=True, eq=False)
class Family:
    """One gauge: its name, help text and label names."""

    name: str
    help: str
    labels: tuple[str, ...]


LAST_VALUE: Final = Family(
    "nvcre_node_last_value",
    "The newest value of a measured key (busBandwidthGBps, algBandwidthGBps, goodputRatio, "
    "avgStepTimeSec, avgTFLOPsPerGPU) in a node's results of a category (NodeRecord).",
    ("node", "category", "key"),
)
BASELINE: Final = Family(
    "nvcre_node_baseline_value",
    "A node's baseline of a key in a category: the median of its latest passing results of the "
    "shape of its newest result (NodeRecord summary.baselines).",
    ("node", "category", "key"),
)
LAST_VERDICT: Final = Family(
    "nvcre_node_last_verdict",
    "The verdict of a node's newest result in a category: 1 Passed, 0 Failed.",
    ("node", "category"),
)
LAST_RESULT_TIME: Final = Family(
    "nvcre_node_last_result_timestamp_seconds",
    "When the Workflow of a node's newest result in a category ended (Unix seconds).",
    ("node", "category"),
)
LAST_CERTIFIED: Final = Family(
    "nvcre_node_last_certified_timestamp_seconds",
    "When the Workflow of a node's newest passing result ended, any category (Unix seconds; "
    "NodeRecord summary.lastPassTime).",
    ("node",),
)
FAILURES: Final = Family(
    "nvcre_node_failures_last_30_days",
    "A node's failed results (kept in its NodeRecord) whose Workflow ended within the 30 days "
    "before the scrape, every category.",
    ("node",),
)
CONSECUTIVE_FAILURES: Final = Family(
    "nvcre_node_consecutive_failures",
    "A node's failed results since its newest passing one, every category "
    "(NodeRecord summary.consecutiveFailures).",
    ("node",),
)
VS_BASELINE: Final = Family(
    "nvcre_node_bus_bandwidth_vs_baseline_percent",
    "A node's newest bus bandwidth against its baseline, in percent (negative: slower; "
    "NodeRecord summary.busBandwidthVsBaseline).",
    ("node",),
)
FAMILIES: Final = (
    LAST_VALUE,
    BASELINE,
    LAST_VERDICT,
    LAST_RESULT_TIME,
    LAST_CERTIFIED,
    FAILURES,
    CONSECUTIVE_FAILURES,
    VS_BASELINE,
)
"""Every gauge, in the order they are exported."""

Sample = tuple[Family, tuple[str, ...], float]
"""A gauge, its label values (in the family's order) and its value."""


@dataclass(frozen=True)
class NodeSeries:
    """What one version of a node's record exports."""

    node: str
    samples: tuple[Sample, ...]
    """Every sample but the failures of the last 30 days."""
    failures: tuple[float, ...]
    """When each kept failed result's Workflow ended (Unix seconds), for :data:`FAILURES`."""


def _seconds(text: Any) -> float | None:
    if not text:
        return None
    try:
        return parse_time(str(text)).timestamp()
    except ValueError:
        return None


def node_series(record: Mapping[str, Any]) -> NodeSeries:
    """The samples of one NodeRecord (its results kept oldest first, as the fold writes them)."""
    node = record_node(record)
    status = record.get("status") or {}
    out: list[Sample] = []
    failures: list[float] = []
    for history in status.get("categories") or ():
        category = str(history.get("name") or "")
        results = list(history.get("results") or ())
        if not category or not results:
            continue
        values: dict[str, float] = {}
        for result in reversed(results):  # newest first: the newest result that measured a key
            for key, raw in (result.get("values") or {}).items():
                if key not in values and (value := number(raw)) is not None:
                    values[str(key)] = value
            if result.get("verdict") == FAILED and (when := _seconds(result.get("time"))) is not None:
                failures.append(when)
        out += [(LAST_VALUE, (node, category, key), value) for key, value in sorted(values.items())]
        newest = results[-1]
        verdict = newest.get("verdict")
        if verdict in (PASSED, FAILED):
            out.append((LAST_VERDICT, (node, category), 1.0 if verdict == PASSED else 0.0))
        if (when := _seconds(newest.get("time"))) is not None:
            out.append((LAST_RESULT_TIME, (node, category), when))
    summary = status.get("summary") or {}
    for base in summary.get("baselines") or ():
        value = number(base.get("value"))
        if base.get("category") and base.get("key") and value is not None:
            out.append((BASELINE, (node, str(base["category"]), str(base["key"])), value))
    if (when := _seconds(summary.get("lastPassTime"))) is not None:
        out.append((LAST_CERTIFIED, (node,), when))
    for family, field in (
        (CONSECUTIVE_FAILURES, "consecutiveFailures"),
        (VS_BASELINE, "busBandwidthVsBaseline"),
    ):
        value = number(summary.get(field))
        if value is not None:
            out.append((family, (node,), value))
    return NodeSeries(node, tuple(out), tuple(sorted(failures)))


def window_start(now: datetime) -> float:
    """The first moment (Unix seconds) of the failures window as of ``now``: the
    :data:`~nvcre.api.v1alpha1.noderecord.FAILURE_WINDOW_DAYS` days before it."""
    return (now - timedelta(days=FAILURE_WINDOW_DAYS)).timestamp()


def failures_since(failures: Iterable[float], since: float) -> int:
    """The failed results (their :attr:`NodeSeries.failures`) that ended at ``since`` or later."""
    return sum(1 for t in failures if t >= since)


def exported(series: NodeSeries) -> bool:
    """The node exports anything (a record without results exports nothing)."""
    return bool(series.samples or series.failures)


def samples(series: Iterable[NodeSeries], now: datetime) -> list[Sample]:
    """Every sample of the nodes' ``series`` as of ``now``: theirs, and each node's failures of
    the :func:`window_start` on."""
    since = window_start(now)
    out: list[Sample] = []
    for one in series:
        out += one.samples
        if exported(one):
            out.append((FAILURES, (one.node,), float(failures_since(one.failures, since))))
    return out


def record_samples(records: Iterable[Mapping[str, Any]], now: datetime) -> list[Sample]:
    """The samples of ``records`` as of ``now`` (:func:`node_series` of each, then :func:`samples`)."""
    return samples((node_series(r) for r in records), now)


__all__ = [
    "FAMILIES",
    "Family",
    "NodeSeries",
    "Sample",
    "exported",
    "failures_since",
    "node_series",
    "record_samples",
    "samples",
    "window_start",
]

"""A node's baseline and the regression rule, as pure functions of a NodeRecord's status.

A node's baseline for a measurement is the median of its latest ``count`` passing results of the
same category and shape (the group's node count and the topology domains it spans: a pair across
two network blocks rightly runs slower than a pair inside one). A group that measures more than
``fraction`` worse than a member's baseline (below it for bandwidth, above it for step time)
fails that member with cause ``Regression``, even above every absolute floor. A node with fewer
than ``count`` such results is not judged against its past.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from nvcre.api.v1alpha1.constants import Default
from nvcre.api.v1alpha1.noderecord import PASSED
from nvcre.measure.thresholds import AVG_STEP_TIME, BUS_BANDWIDTH, number

Shape = tuple[int, int]
"""(nodes of the group, topology domains it spans; 0 when unknown)."""


@dataclass(frozen=True)
class Metric:
    """How a measured key reads in a message, and which way is worse."""

    label: str
    unit: str
    higher_is_better: bool


METRICS: Final[Mapping[str, Metric]] = {
    BUS_BANDWIDTH: Metric("busbw", "GB/s", higher_is_better=True),
    AVG_STEP_TIME: Metric("step time", "s", higher_is_better=False),
}
"""The keys judged against a node's own past."""


@dataclass(frozen=True)
class Baseline:
    key: str
    value: float
    """The median of the results it is made of."""
    results: int


@dataclass(frozen=True)
class Settings:
    fraction: float = Default.REGRESSION_FRACTION
    """Worse than the baseline by more than this fails; 0 turns the rule off."""
    count: int = Default.BASELINE_RESULTS
    """Passing results a baseline is made of."""


def settings_of(performance: Mapping[str, Any] | None) -> Settings:
    """``validation.performance``'s ``regressionFraction`` and ``baselineResults``, else the defaults."""
    performance = performance or {}
    fraction = number(performance.get("regressionFraction"))
    count = number(performance.get("baselineResults"))
    return Settings(
        Default.REGRESSION_FRACTION if fraction is None else fraction,
        Default.BASELINE_RESULTS if count is None or count < 1 else int(count),
    )


def shape_of(result: Mapping[str, Any]) -> Shape:
    """A recorded result's shape."""
    return int(result.get("groupSize") or 0), len(result.get("domains") or ())


def _history(status: Mapping[str, Any] | None, category: str) -> list[Mapping[str, Any]]:
    for history in (status or {}).get("categories") or ():
        if history.get("name") == category:
            return list(history.get("results") or ())  # kept oldest first
    return []


def passing_values(results: Iterable[Mapping[str, Any]], shape: Shape, key: str) -> list[float]:
    """``key``'s values in the passing ``results`` of ``shape``, in their order."""
    out = []
    for result in results:
        value = number((result.get("values") or {}).get(key))
        if result.get("verdict") == PASSED and shape_of(result) == shape and value is not None:
            out.append(value)
    return out


def median_of(values: list[float], key: str, count: int) -> Baseline | None:
    """The baseline of the latest ``count`` of ``values``; None with fewer."""
    latest = values[-count:]
    if len(latest) < count or not latest:
        return None
    return Baseline(key, statistics.median(latest), len(latest))


def recent(values: list[float], key: str) -> Baseline | None:
    """The median of up to :data:`Default.BASELINE_RESULTS` latest ``values``, however few (the
    record's summary and the trend it shows); None without any."""
    return median_of(values, key, min(len(values), Default.BASELINE_RESULTS))


def against_earlier(
    before: Iterable[Mapping[str, Any]], result: Mapping[str, Any], key: str
) -> tuple[float, Baseline] | None:
    """``result``'s ``key`` against :func:`recent` of the passing results of its shape ``before``
    it: the change in percent, rounded to 0.1 (-17.5: 17.5 % below), and that baseline; None
    without a value or an earlier passing one."""
    value = number((result.get("values") or {}).get(key))
    base = recent(passing_values(before, shape_of(result), key), key)
    if value is None or base is None or base.value <= 0:
        return None
    return round((value / base.value - 1) * 100, 1), base


def baseline(
    status: Mapping[str, Any] | None, category: str, shape: Shape, key: str, count: int
) -> Baseline | None:
    """The node's baseline for ``key`` in ``category`` and ``shape`` (None: fewer than ``count``)."""
    return median_of(passing_values(_history(status, category), shape, key), key, count)


def worse_by(key: str, value: float, base: float) -> float:
    """How much worse ``value`` is than ``base``, as a fraction of ``base`` (negative: better)."""
    if base <= 0:
        return 0.0
    change = (value - base) / base
    return -change if METRICS[key].higher_is_better else change


def _number(value: float) -> str:
    """Whole GB/s for bandwidths (``467``), four figures for smaller values (``1.234`` s)."""
    return f"{value:.4g}" if abs(value) < 100 else f"{value:.0f}"


def regression_message(key: str, value: float, found: Baseline) -> str:
    """``busbw 401 GB/s, 14 % below this node's baseline 467 GB/s (5 runs)``."""
    metric = METRICS[key]
    direction = "below" if metric.higher_is_better else "above"
    percent = worse_by(key, value, found.value) * 100
    runs = f"{found.results} run{'s' if found.results != 1 else ''}"
    return (
        f"{metric.label} {_number(value)} {metric.unit}, {percent:.0f} % {direction} this node's "
        f"baseline {_number(found.value)} {metric.unit} ({runs})"
    )


@dataclass(frozen=True)
class Regression:
    node: str
    key: str
    message: str


def regressions(
    values: Mapping[str, float],
    records: Mapping[str, Mapping[str, Any] | None],
    category: str,
    shape: Shape,
    settings: Settings,
) -> tuple[list[Regression], bool]:
    """The members of a group that measured ``values`` who regressed against their own baseline,
    by node name, and whether any member had a baseline to be judged against at all.
    ``records``: each member to judge, with its NodeRecord's status (None: no record)."""
    if settings.fraction <= 0:
        return [], False
    found: list[Regression] = []
    judged = False
    for node, status in sorted(records.items()):
        for key in METRICS:
            value = values.get(key)
            base = baseline(status, category, shape, key, settings.count) if value is not None else None
            if base is None or value is None:
                continue
            judged = True
            if worse_by(key, value, base.value) > settings.fraction:
                found.append(Regression(node, key, regression_message(key, value, base)))
                break  # one reason per node
    return found, judged

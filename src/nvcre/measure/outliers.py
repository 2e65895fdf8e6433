"""Outliers against the fleet (beyond the reference, which ships no default thresholds).

Among at least 3 groups of one Workflow iteration that ran the same test on the same shape (the
same number of nodes spanning the same number of topology domains: a group that crosses a network
block or NVLink clique boundary rightly runs slower and is compared only with groups that cross
as many) and left final data, a group whose bus bandwidth is below ``fraction`` x the median of the
*other* groups (its peers), or whose step time is above that median / ``fraction``, is an outlier.
A fraction of 0 turns the rule off. The default, 0.9, finds a NIC at 80 % of its speed (its
groups run about 20 % short) well outside healthy pairs' spread of a few percent; a healthy group
that strays below it is cleared by its isolation re-test. The inputs are frozen measurements, so
the same groups give the same outliers however often (and after however many restarts) they are
computed.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from nvcre.api.v1alpha1.constants import Default, JobReason

MIN_GROUPS: Final = 3


@dataclass(frozen=True)
class Sample:
    """One group's final value."""

    group: str
    peers_key: tuple[object, ...]
    """Groups compare only with groups of the same key (test and shape)."""
    value: float
    judged: bool = True
    """False for a group that already failed: it counts as a peer but is not flagged again."""


@dataclass(frozen=True)
class Outlier:
    group: str
    reason: str
    message: str


def fraction_of(performance: dict[str, object] | None) -> float:
    """``validation.performance.outlierFraction``; 0.9 when unset."""
    value = (performance or {}).get("outlierFraction")
    if value is None:
        return Default.OUTLIER_FRACTION
    try:
        return float(str(value))
    except ValueError:
        return Default.OUTLIER_FRACTION


def shape_of(group: Mapping[str, Any]) -> tuple[int, int]:
    """A Workflow group's shape for comparison: (nodes, topology domains spanned; 0 unknown)."""
    return len(group.get("nodes") or ()), len(group.get("domains") or ())


def _by_peers(samples: Iterable[Sample]) -> list[list[Sample]]:
    sets: dict[tuple[object, ...], list[Sample]] = defaultdict(list)
    for s in samples:
        sets[s.peers_key].append(s)
    return [group for group in sets.values() if len(group) >= MIN_GROUPS]


def compared(samples: Iterable[Sample]) -> frozenset[str]:
    """The groups of judged samples that had enough peers of their key to be compared at all."""
    return frozenset(s.group for peers in _by_peers(samples) for s in peers if s.judged)


def _peer_median(sample: Sample, peers: list[Sample]) -> tuple[float, int]:
    others = [p.value for p in peers if p is not sample]
    return statistics.median(others), len(others)


def _outliers(
    samples: Iterable[Sample],
    fraction: float,
    slow: Callable[[float, float], bool],
    message: Callable[[Sample, float, int], str],
    reason: str,
) -> list[Outlier]:
    """The judged samples ``slow`` against their peers' median (``fraction`` <= 0: none)."""
    if fraction <= 0:
        return []
    out = []
    for peers in _by_peers(samples):
        for s in peers:
            median, count = _peer_median(s, peers)
            if s.judged and slow(s.value, median):
                out.append(Outlier(s.group, reason, message(s, median, count)))
    return sorted(out, key=lambda o: o.group)


def bandwidth_outliers(samples: Iterable[Sample], fraction: float) -> list[Outlier]:
    """Groups whose bus bandwidth (GB/s) is below ``fraction`` of their peers' median."""
    return _outliers(
        samples,
        fraction,
        lambda value, median: value < fraction * median,
        lambda s, median, count: (
            f"bus bandwidth {s.value:.2f} GB/s is below {fraction:g} of the median "
            f"of its {count} peer groups ({median:.2f} GB/s)"
        ),
        JobReason.BANDWIDTH_OUTLIER,
    )


def step_time_outliers(samples: Iterable[Sample], fraction: float) -> list[Outlier]:
    """Groups whose average step time (s) is above their peers' median / ``fraction``."""
    return _outliers(
        samples,
        fraction,
        lambda value, median: value * fraction > median,
        lambda s, median, count: (
            f"step time {s.value:.4f} s is slower than the median of its {count} peer "
            f"groups ({median:.4f} s) by more than the fraction {fraction:g} allows"
        ),
        JobReason.STEP_TIME_OUTLIER,
    )

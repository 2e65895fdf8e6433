"""nvcre's own Prometheus metrics, served on the manager's metrics endpoint."""

from __future__ import annotations

from prometheus_client import Counter

VERDICTS = Counter(
    "nvcre_validation_verdicts_total",
    "Validation verdicts written, by reason (ThresholdsMet, ThresholdViolated, DataCorruption, "
    "BandwidthOutlier, ...) and whether they fail the group.",
    ["reason", "failed"],
)


def count_verdict(reason: str, failed: bool) -> None:
    VERDICTS.labels(reason=reason, failed="true" if failed else "false").inc()

"""The failed-node record: one entry shape wherever a failed node is written.

Systems that act on nvcre's results (NVIDIA NVSentinel's certification monitor, for one) decode
the failed-nodes ConfigMap and match each entry's ``reason`` against the reference's three values:
``HardwareFailureDetected``, ``ThresholdViolation`` and ``WorkloadFailed``. So ``reason`` is always
one of those; nvcre's finer cause (an outlier, a timeout, corrupted data, ...) goes beside it in
the additive ``cause`` field and in ``message``. The same entries are a Job's
``status.failedNodes``. docs/measurements.md tables the mapping.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from nvcre.api.v1alpha1.constants import FailedNodeReason, FailureCause

REASONS: Final = (
    FailedNodeReason.HARDWARE_FAILURE_DETECTED,
    FailedNodeReason.THRESHOLD_VIOLATION,
    FailedNodeReason.WORKLOAD_FAILED,
)
"""The only values ``reason`` takes (the reference's enum)."""

CAUSE_REASONS: Final[Mapping[str, str]] = {
    FailureCause.HARDWARE_FAILURE_DETECTED: FailedNodeReason.HARDWARE_FAILURE_DETECTED,
    FailureCause.THRESHOLD_VIOLATED: FailedNodeReason.THRESHOLD_VIOLATION,
    FailureCause.BELOW_EXPECTED: FailedNodeReason.THRESHOLD_VIOLATION,
    FailureCause.BANDWIDTH_OUTLIER: FailedNodeReason.THRESHOLD_VIOLATION,
    FailureCause.STEP_TIME_OUTLIER: FailedNodeReason.THRESHOLD_VIOLATION,
    FailureCause.REGRESSION: FailedNodeReason.THRESHOLD_VIOLATION,
    FailureCause.UNEXPECTED_TRANSPORT: FailedNodeReason.THRESHOLD_VIOLATION,
    FailureCause.DATA_CORRUPTION: FailedNodeReason.WORKLOAD_FAILED,
    FailureCause.FAILURES_LOGGED: FailedNodeReason.WORKLOAD_FAILED,
    FailureCause.MEASUREMENT_UNAVAILABLE: FailedNodeReason.WORKLOAD_FAILED,
    FailureCause.MEASUREMENT_TIMEOUT: FailedNodeReason.WORKLOAD_FAILED,
    FailureCause.UNKNOWN_THRESHOLD_KEY: FailedNodeReason.WORKLOAD_FAILED,
    FailureCause.INVALID_THRESHOLD_EXPRESSION: FailedNodeReason.WORKLOAD_FAILED,
    FailureCause.WORKLOAD_FAILED: FailedNodeReason.WORKLOAD_FAILED,
    FailureCause.WORKLOAD_STALLED: FailedNodeReason.WORKLOAD_FAILED,
    FailureCause.JOB_TIMED_OUT: FailedNodeReason.WORKLOAD_FAILED,
    FailureCause.JOB_DELETED: FailedNodeReason.WORKLOAD_FAILED,
    FailureCause.CONFIRMED_FAULTY: FailedNodeReason.WORKLOAD_FAILED,
}
"""Every cause nvcre writes, and the reason it is recorded under."""

Entry = dict[str, str]
"""``{"name", "reason", "cause", "message"}``."""


def reason_of(cause: str) -> str:
    """The reference reason a cause is recorded under (``WorkloadFailed`` for one nvcre does not know)."""
    if cause in REASONS:
        return cause
    return CAUSE_REASONS.get(cause, FailedNodeReason.WORKLOAD_FAILED)


def entry(name: str, cause: str, message: str) -> Entry:
    return {"name": name, "reason": reason_of(cause), "cause": cause, "message": message}


def entries(names: Iterable[str], cause: str, message: str) -> list[Entry]:
    return [entry(name, cause, message) for name in names]


def normalise(raw: Mapping[str, Any]) -> Entry:
    """An entry as nvcre writes it today, from any stored form: one written before ``cause``
    existed kept its cause in ``reason`` (``BandwidthOutlier``, ``JobTimedOut``...)."""
    reason = str(raw.get("reason") or "")
    cause = str(raw.get("cause") or reason or FailureCause.WORKLOAD_FAILED)
    return {
        "name": str(raw.get("name") or ""),
        "reason": reason if reason in REASONS else reason_of(cause),
        "cause": cause,
        "message": str(raw.get("message") or ""),
    }


def merge(existing: Iterable[Mapping[str, Any]], new: Iterable[Mapping[str, Any]]) -> list[Entry]:
    """Add entries without removing any; one per (name, reason), the first written wins;
    sorted by name, then reason."""
    merged: dict[tuple[str, str], Entry] = {}
    for raw in (*existing, *new):
        normal = normalise(raw)
        merged.setdefault((normal["name"], normal["reason"]), normal)
    return [merged[key] for key in sorted(merged)]

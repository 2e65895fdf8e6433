"""The early verdict: a running nccl-tests group whose bandwidth has clearly failed (pure).

A pair with a NIC at 30 % runs its sweep about three times longer than its healthy peers, and the
whole certification waits for it. Its verdict is known long before its last sweep: nccl-tests'
``-N`` cycles repeat the sweep, and ``busBandwidthGBps`` (the largest per-size average over all
sweeps) cannot end far above the peaks the sweeps so far reached.

The rule: when each of the last :data:`SWEEPS` complete sweeps peaked so low that the higher of
the peaks, raised by :data:`MARGIN`, still fails the group's ``busBandwidthGBps`` threshold (or,
with none, still misses its expected floor), the Job fails at once with that verdict
(``ThresholdViolated``, cause ``ThresholdViolated`` or ``BelowExpected``) and its workload stops.
A value near the limit, a single bad sweep, a failed run (``flaky``, an NCCL error) or a sweep
in progress never decides early. ``bandwidthMeasurement.earlyVerdict: "Off"`` turns it off.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from nvcre.api.v1alpha1.constants import JobReason
from nvcre.measure import thresholds as th
from nvcre.measure.thresholds import Verdict
from nvcre.measure.verdicts import BANDWIDTH, belongs, floor_violation, floors, job_thresholds

MARGIN: Final = 0.10
"""How far below the limit each sweep's peak must be."""
SWEEPS: Final = 2
"""Complete sweeps that must agree: the second confirms the first."""


def _violation(job: Mapping[str, Any], value: float) -> Verdict | None:
    """The group's ``busBandwidthGBps`` verdict at ``value``: its threshold, else its floor."""
    key = th.BUS_BANDWIDTH
    expression = job_thresholds(job).get(key)
    if expression is not None:
        verdict = th.evaluate({key: expression}, {key: value})
        return verdict if verdict.reason == JobReason.THRESHOLD_VIOLATED else None
    floor = next((f for f in floors(job) if f.key == key), None)
    return floor_violation(floor, value) if floor is not None else None


def _peaks(progress: Mapping[str, Any]) -> list[float]:
    """The peaks of the last :data:`SWEEPS` complete sweeps, or ``[]`` with fewer."""
    peaks = [th.number(p) for p in progress.get("sweepPeaksGBps") or ()][-SWEEPS:]
    found = [p for p in peaks if p is not None]
    return found if len(found) == SWEEPS else []


def early_value(job: Mapping[str, Any], bandwidth: Mapping[str, Any] | None) -> float | None:
    """The ``busBandwidthGBps`` an early verdict fails the Job on (its sweeps' higher peak), or
    None: what a report shows for a Job stopped before its final measurement."""
    if early_failure(job, bandwidth) is None or bandwidth is None:
        return None
    return max(_peaks((bandwidth.get("status") or {}).get("progress") or {}))


def early_failure(job: Mapping[str, Any], bandwidth: Mapping[str, Any] | None) -> Verdict | None:
    """The verdict of a running Job its bandwidth measurement already puts beyond doubt, or None."""
    config = (job.get("spec") or {}).get(BANDWIDTH) or {}
    if not config or config.get("earlyVerdict") == "Off" or bandwidth is None or not belongs(bandwidth, job):
        return None
    progress = (bandwidth.get("status") or {}).get("progress") or {}
    peaks = _peaks(progress)
    if not peaks:
        return None
    measured = max(peaks)
    if _violation(job, measured * (1 + MARGIN)) is None:
        return None
    verdict = _violation(job, measured)
    if verdict is None:  # an expression that fails higher but not at the value: no doubt-free verdict
        return None
    shown = " and ".join(f"{p:.2f}" for p in peaks)
    return Verdict(
        True,
        JobReason.THRESHOLD_VIOLATED,
        f"Early verdict after {int(progress.get('sweeps') or 0)} complete sweeps (peaks {shown} GB/s, "
        f"each more than {MARGIN:.0%} short): {verdict.message}",
        verdict.cause,
    )

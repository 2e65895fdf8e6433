"""A succeeded Job's verdict (its ``ValidationFailed`` condition) from its final measurements.

Order: unknown threshold keys (a configuration error, decided at once); then, as soon as the
bandwidth measurement is final, corrupted results (``DataCorruption``) and an unexpected network
transport (``UnexpectedTransport``), whatever the thresholds say; then the thresholds of spec 4.3,
waiting up to ``measurementTimeout`` after the Job succeeded for values still missing. A Job with
measurements also waits (as long) for each to be terminal, so the data checks always run and the
Workflow's outlier verdict reads only frozen data; with no thresholds it passes with reason
``MeasurementsChecked``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from nvcre import failednodes
from nvcre.api.v1alpha1.constants import (
    Annotation,
    ConditionStatus,
    ConditionType,
    Default,
    JobReason,
    Label,
)
from nvcre.api.v1alpha1.meta import parse_time
from nvcre.conditions import condition_of
from nvcre.durations import format_duration, parse_duration
from nvcre.measure import thresholds as th
from nvcre.measure.thresholds import Verdict

POLL_SECONDS: Final = Default.REQUEUE_SECONDS
"""How often a Job waiting for its measurements looks again (spec 4.3: 15 s)."""


@dataclass(frozen=True)
class Wait:
    """No verdict yet: look again after ``seconds``."""

    seconds: float


def _spec(job: Mapping[str, Any]) -> Mapping[str, Any]:
    spec: Mapping[str, Any] = job.get("spec") or {}
    return spec


def job_thresholds(job: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in (_spec(job).get("thresholds") or {}).items()}


def expects_verdict(job: Mapping[str, Any]) -> bool:
    """A Job judged once it succeeds: it has thresholds or measurements."""
    spec = _spec(job)
    return bool(job_thresholds(job) or spec.get("bandwidthMeasurement") or spec.get("goodputMeasurement"))


def succeeded_at(job: Mapping[str, Any]) -> datetime | None:
    succeeded = condition_of(job, ConditionType.SUCCEEDED)
    if not succeeded or succeeded.get("status") != ConditionStatus.TRUE:
        return None
    try:
        return parse_time(str(succeeded.get("lastTransitionTime")))
    except ValueError:
        return None


def awaiting_verdict(job: Mapping[str, Any]) -> bool:
    """Succeeded, judged, and not judged yet: its group is not finished (spec 4.4)."""
    return (
        succeeded_at(job) is not None
        and expects_verdict(job)
        and condition_of(job, ConditionType.VALIDATION_FAILED) is None
    )


def belongs(measurement: Mapping[str, Any] | None, job: Mapping[str, Any]) -> bool:
    """The measurement was made for this Job, not for an earlier attempt of the same name."""
    if measurement is None:
        return False
    uid = (job.get("metadata") or {}).get("uid")
    meta = measurement.get("metadata") or {}
    recorded = (meta.get("labels") or {}).get(Label.JOB_UID) or (meta.get("annotations") or {}).get(
        Annotation.JOB_UID
    )
    return not uid or not recorded or recorded == uid


def measurement_timeout_ns(job: Mapping[str, Any], default: str = Default.MEASUREMENT_TIMEOUT) -> int:
    """``spec.measurementTimeout``, else ``default``; an unparseable or negative one counts as unset."""
    for text in (_spec(job).get("measurementTimeout"), default):
        if text:
            try:
                ns = parse_duration(str(text))
            except ValueError:
                continue
            if ns >= 0:
                return ns
    return parse_duration(Default.MEASUREMENT_TIMEOUT)


def wrong_values(bandwidth: Mapping[str, Any]) -> int:
    try:
        return int((bandwidth.get("status") or {}).get("wrongValues") or 0)
    except (TypeError, ValueError):
        return 0


def data_corruption(count: int) -> Verdict:
    return Verdict(
        True,
        JobReason.DATA_CORRUPTION,
        f"nccl-tests found {count} wrong values (#wrong columns): the results are corrupted, "
        "whatever the bandwidth",
    )


def unexpected_transport(used: list[str], expected: str) -> Verdict:
    named = f"[{', '.join(used)}]" if used else "no network transport (is NCCL_DEBUG=INFO set?)"
    return Verdict(
        True,
        JobReason.UNEXPECTED_TRANSPORT,
        f"NCCL used {named}, expected [{expected}]",
    )


def data_checks(job: Mapping[str, Any], bandwidth: Mapping[str, Any] | None) -> Verdict | None:
    """``DataCorruption`` or ``UnexpectedTransport`` for a final bandwidth measurement, else None."""
    if bandwidth is None or not th.bandwidth_final(bandwidth):
        return None
    count = wrong_values(bandwidth)
    if count > 0:
        return data_corruption(count)
    expected = str((_spec(job).get("bandwidthMeasurement") or {}).get("expectedTransport") or "")
    if expected:
        used = sorted({str(t) for t in (bandwidth.get("status") or {}).get("transport") or ()})
        if used != [expected]:
            return unexpected_transport(used, expected)
    return None


def checked(job: Mapping[str, Any], bandwidth: Mapping[str, Any] | None) -> Verdict:
    """The pass of a Job with measurements and no thresholds."""
    config = _spec(job).get("bandwidthMeasurement")
    if not config:
        what = "the goodput measurement is final"
    elif not th.bandwidth_final(bandwidth):
        what = "the bandwidth measurement collected no final data"
    else:
        expected = config.get("expectedTransport")
        what = "no corrupted results" + (f", transport [{expected}] as expected" if expected else "")
    return Verdict(False, JobReason.MEASUREMENTS_CHECKED, f"No performance thresholds set; {what}")


def judge(
    job: Mapping[str, Any],
    bandwidth: Mapping[str, Any] | None,
    goodput: Mapping[str, Any] | None,
    now: datetime,
    *,
    default_timeout: str = Default.MEASUREMENT_TIMEOUT,
) -> Verdict | Wait | None:
    """The verdict of a succeeded Job, ``Wait`` while its measurements are pending, or None when
    nothing is judged (not succeeded, or neither thresholds nor a bandwidth measurement)."""
    started = succeeded_at(job)
    if started is None or not expects_verdict(job):
        return None
    bandwidth = bandwidth if belongs(bandwidth, job) else None
    goodput = goodput if belongs(goodput, job) else None
    limits = job_thresholds(job)
    unknown = th.unknown_keys(limits)
    if unknown is not None:
        return unknown
    data = data_checks(job, bandwidth)
    if data is not None:
        return data
    values = th.measured_values(bandwidth, goodput)
    missing = th.missing_keys(limits, values)
    spec = _spec(job)
    pending = (
        bool(missing)
        or (bool(spec.get("bandwidthMeasurement")) and not th.measurement_complete(bandwidth))
        or (bool(spec.get("goodputMeasurement")) and not th.measurement_complete(goodput))
    )
    timeout = measurement_timeout_ns(job, default_timeout)
    if pending:
        left = timeout / 1e9 - (now - started).total_seconds()
        if left >= 0:
            return Wait(min(POLL_SECONDS, left + 0.1))
        if missing:
            return th.timeout_verdict(missing, format_duration(timeout))
    if not limits:
        return checked(job, bandwidth)
    return th.evaluate(limits, values)


def group_nodes(job: Mapping[str, Any]) -> list[str]:
    """The ``group-nodes`` annotation: split on commas, trimmed, deduplicated, sorted."""
    annotation = ((job.get("metadata") or {}).get("annotations") or {}).get(Annotation.GROUP_NODES, "")
    return sorted({n.strip() for n in str(annotation).split(",") if n.strip()})


def failed_nodes(job: Mapping[str, Any], verdict: Verdict) -> list[dict[str, str]] | None:
    """The ``failedNodes`` a failing verdict records (only when the Job names none yet)."""
    if not verdict.failed or ((job.get("status") or {}).get("failedNodes")):
        return None
    return failednodes.entries(group_nodes(job), verdict.reason, verdict.message)

"""What a BandwidthMeasurement's status becomes (spec 2.4-2.5; pure functions of plain data).

Each function returns a :data:`StatusChange`, applied by the shell to the status it writes (again
to a fresh copy after a conflict). A ``Complete`` measurement is frozen: :func:`complete` changes
nothing once ``Complete`` is True, so the first terminal write wins and a replay writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from nvcre.api.v1alpha1.constants import (
    ConditionStatus,
    ConditionType,
    Default,
    Label,
    MeasurementReason,
)
from nvcre.api.v1alpha1.meta import ConditionStatusValue, format_time, parse_time
from nvcre.conditions import (
    find,
    from_status,
    set_condition,
    set_in_status,
    to_status,
)
from nvcre.durations import parse_duration
from nvcre.measure.nccl import Aggregate, SizeResult, merge_provisional, progress, union_transport
from nvcre.objects import StatusChange

RUNNING = "Referenced Job is running, measurement in progress"
PENDING = "Job succeeded; waiting to read its complete log"
JOB_GONE = "Referenced Job no longer exists; "
GONE_NO_DATA = JOB_GONE + "no bandwidth data was parsed"
GONE_PROVISIONAL = JOB_GONE + "results are provisional and are not used for threshold evaluation"
JOB_FAILED = "Referenced Job failed; results are not used for threshold evaluation"
MIN_GRACE_SECONDS = Default.FINAL_READ_GRACE_SECONDS
FINAL_READ_RETRY_SECONDS = 5.0

Status = Mapping[str, Any]


def _seconds(text: str | None, default: float) -> float:
    try:
        value = parse_duration(text) / 1e9 if text else default
    except ValueError:
        return default
    return value if value > 0 else default


def grace_seconds(job: Mapping[str, Any]) -> float:
    """How long a succeeded Job's final read is retried: max(measurementTimeout (5m), 2 minutes)."""
    timeout = _seconds((job.get("spec") or {}).get("measurementTimeout"), 0.0) or _seconds(
        Default.MEASUREMENT_TIMEOUT, 300.0
    )
    return max(timeout, MIN_GRACE_SECONDS)


def is_complete(bm: Mapping[str, Any]) -> bool:
    found = find(from_status(bm.get("status") or {}), ConditionType.COMPLETE)
    return found is not None and found.status == ConditionStatus.TRUE


def seen_job(bm: Mapping[str, Any]) -> bool:
    """Whether the measurement ever saw its Job (then "Job not found" means it is gone for good)."""
    status = bm.get("status") or {}
    labels = (bm.get("metadata") or {}).get("labels") or {}
    measuring = find(from_status(status), ConditionType.MEASURING)
    return bool(labels.get(Label.JOB_UID) or status.get("startTime") or status.get("results") or measuring)


def stored_results(status: Status) -> list[SizeResult]:
    out = []
    for entry in status.get("results") or ():
        try:
            out.append(SizeResult.from_status(entry))
        except (KeyError, TypeError, ValueError):
            continue  # an entry nvcre did not write; the next write drops it
    return out


def pending_since(bm: Mapping[str, Any]) -> datetime | None:
    """When the wait for a readable final log began (``FinalReadPending``), if it did."""
    found = find(from_status(bm.get("status") or {}), ConditionType.MEASURING)
    if (
        found is None
        or found.reason != MeasurementReason.FINAL_READ_PENDING
        or not found.last_transition_time
    ):
        return None
    try:
        return parse_time(found.last_transition_time)
    except ValueError:
        return None


def _measuring(
    status: dict[str, Any], value: ConditionStatusValue, reason: str, message: str, now: datetime
) -> None:
    conds = from_status(status)
    existing = find(conds, ConditionType.MEASURING)
    if reason == MeasurementReason.FINAL_READ_PENDING and existing is not None and existing.reason != reason:
        conds = [c for c in conds if c.type != ConditionType.MEASURING]  # the wait starts now
    to_status(status, set_condition(conds, ConditionType.MEASURING, value, reason, message, None, now))


def _start(status: dict[str, Any], now: datetime) -> None:
    status.setdefault("startTime", format_time(now))


def running(
    aggregate: Aggregate | None,
    cursor: str | None,
    now: datetime,
    layout: Mapping[str, str] | None = None,
    *,
    rows: Sequence[progress.Row] | None = None,
) -> StatusChange:
    """A provisional sample: fold the new lines' rows into the stored (rounded) results, keep
    the table ``layout`` in force (the next sample reads its rows with it) and, after a read
    that succeeded (``rows``: the new rows it found, maybe none), the run's progress."""

    def change(status: dict[str, Any]) -> None:
        _start(status, now)
        if rows is not None:
            status["progress"] = progress.advance(status.get("progress"), rows, now)
        if aggregate is not None:
            if aggregate.sums or aggregate.dropped:
                merged, dropped = merge_provisional(stored_results(status), aggregate)
                status["results"] = [r.to_status() for r in merged]
                status["sizesDropped"] = int(status.get("sizesDropped") or 0) + dropped
            if aggregate.transports:
                status["transport"] = union_transport(status.get("transport") or (), aggregate.transports)
            status["wrongValues"] = int(status.get("wrongValues") or 0) + aggregate.wrong_values
        if layout:
            status["tableLayout"] = dict(layout)
        if cursor:
            status["lastSampleTime"] = cursor
        _measuring(status, ConditionStatus.TRUE, MeasurementReason.JOB_RUNNING, RUNNING, now)

    return change


def waiting(reason: str, message: str, now: datetime) -> StatusChange:
    """``Measuring=False`` while it cannot go on: ``FinalReadPending`` or ``LogProfileNotFound``."""

    def change(status: dict[str, Any]) -> None:
        _start(status, now)
        _measuring(status, ConditionStatus.FALSE, reason, message, now)

    return change


def complete(
    reason: str, message: str, completion_time: str, final: Aggregate | None, now: datetime
) -> StatusChange:
    """The single terminal write: results replaced by ``final`` (when read) with everything else
    the log said (:meth:`Aggregate.summary`: test, ranks, footers, completeness, failure lines...),
    transport unioned, wrongValues, completionTime, and ``Measuring=False`` / ``Complete=True``
    with one reason and message. A no-op once ``Complete`` is True."""

    def change(status: dict[str, Any]) -> None:
        if is_complete({"status": status}):
            return
        _start(status, now)
        status.pop("tableLayout", None)
        if final is not None:
            seen = union_transport(status.get("transport") or (), final.transports)
            status.update(final.final_status(), transport=seen)
        status.setdefault("wrongValues", 0)
        status["completionTime"] = completion_time
        _measuring(status, ConditionStatus.FALSE, reason, message, now)
        set_in_status(status, ConditionType.COMPLETE, ConditionStatus.TRUE, reason, message, None, now)

    return change


def gone_message(bm: Mapping[str, Any]) -> str:
    return GONE_PROVISIONAL if (bm.get("status") or {}).get("results") else GONE_NO_DATA


def unreadable_message(grace: float, error: str) -> str:
    return f"Job succeeded but its complete log could not be read within {grace:.0f}s: {error}"

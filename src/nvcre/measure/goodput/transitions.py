"""The GoodputMeasurement's conditions around the status transitions (spec 3.5; pure).

Each function returns the whole next status from the live one, so a write retried after a 409
applies it again to the fresh object. The terminal status is a function of the status before it,
the last read and the Job alone (its conditions are stamped with the Job's terminal time), so a
replay produces the same bytes; once ``Complete`` is True nothing changes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from nvcre.api.v1alpha1.constants import ConditionStatus, ConditionType, MeasurementReason
from nvcre.api.v1alpha1.meta import Condition, format_time
from nvcre.conditions import from_status, is_true, set_condition, to_status
from nvcre.measure.goodput.parser import Window
from nvcre.measure.goodput.sampling import Outcome, Status, finish, no_data, observe

RUNNING_MESSAGE = "Referenced Job is running, measurement in progress"
COMPLETE_MESSAGES = {
    MeasurementReason.JOB_SUCCEEDED: "Referenced Job completed successfully",
    MeasurementReason.JOB_FAILED: "Referenced Job failed",
    MeasurementReason.NO_DATA_COLLECTED: "Job succeeded but no goodput was computed; check spec.logProfileRef",
}


def _with(status: Status, conds: list[Condition]) -> Status:
    to_status(status, conds)
    return status


def complete(status: Mapping[str, Any]) -> bool:
    return is_true(from_status(status), ConditionType.COMPLETE)


def running(
    status: Mapping[str, Any],
    window: Window | None,
    *,
    now: datetime,
    log_interval: int,
    generation: int | None,
) -> Status:
    """After a read while the Job runs: the new metrics, ``Measuring`` True ``JobRunning``."""
    out = observe(status, window, now=now, log_interval=log_interval) if window is not None else dict(status)
    out.setdefault("startTime", format_time(now))
    conds = set_condition(
        from_status(out),
        ConditionType.MEASURING,
        ConditionStatus.TRUE,
        MeasurementReason.JOB_RUNNING,
        RUNNING_MESSAGE,
        generation,
        now,
    )
    return _with(out, conds)


def profile_missing(
    status: Mapping[str, Any], message: str, *, now: datetime, generation: int | None
) -> Status:
    """``Measuring`` False ``LogProfileNotFound`` (not terminal: the profile may come later)."""
    conds = set_condition(
        from_status(status),
        ConditionType.MEASURING,
        ConditionStatus.FALSE,
        MeasurementReason.LOG_PROFILE_NOT_FOUND,
        message,
        generation,
        now,
    )
    return _with(dict(status), conds)


def terminal(
    status: Mapping[str, Any],
    window: Window | None,
    outcome: Outcome,
    *,
    anchor: datetime,
    terminated: datetime | None,
    log_interval: int,
    generation: int | None,
) -> Status:
    """The one terminal write: the last read (entries after ``anchor`` already dropped), the
    terminal metrics, ``completionTime``, ``Measuring`` False and ``Complete`` True."""
    if complete(status):
        return dict(status)
    out = dict(status)
    if window is not None:
        out = observe(out, window, now=anchor, log_interval=log_interval, final=True)
    out = finish(out, outcome, anchor=anchor, terminated=terminated)
    if outcome == "Failed":
        reason = MeasurementReason.JOB_FAILED
    elif no_data(out):
        reason = MeasurementReason.NO_DATA_COLLECTED
    else:
        reason = MeasurementReason.JOB_SUCCEEDED
    conds = set_condition(
        from_status(out),
        ConditionType.MEASURING,
        "False",
        reason,
        "Measurement completed",
        generation,
        anchor,
    )
    conds = set_condition(
        conds, ConditionType.COMPLETE, "True", reason, COMPLETE_MESSAGES[reason], generation, anchor
    )
    return _with(out, conds)

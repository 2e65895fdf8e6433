"""Checkpoint restarts that count once, whatever crashes or conflicts happen meanwhile (pure).

A restart is recorded before anything is done: one status write increments ``restartCount``,
clears ``workloadStartTime``, records the replaced workload's UID in ``workloadRef.uid`` and sets
``InProgress`` reason ``WorkloadRestarting``. That pair (the reason while ``workloadRef`` is still
set) is the marker that a restart is under way; every later pass carries it on (delete the
replaced workload, wait until it is gone, reset the GoodputMeasurement, create the new workload)
and never counts again. The write itself is idempotent: applied again to a fresh copy after a
409, or by a pass that finds the marker, it changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from nvcre.api.v1alpha1.constants import ConditionStatus, ConditionType, JobReason
from nvcre.api.v1alpha1.meta import format_time
from nvcre.conditions import condition_of
from nvcre.health.restart import sample_interval
from nvcre.objects import Obj, StatusChange

DEFAULT_RESTART_REQUEUE_SECONDS = 30.0


def restarting(status: Mapping[str, Any]) -> bool:
    """A restart is recorded and not yet finished (its new workload not created)."""
    if not status.get("workloadRef"):
        return False
    in_progress = condition_of({"status": status}, ConditionType.IN_PROGRESS) or {}
    return in_progress.get("status") == ConditionStatus.TRUE and in_progress.get("reason") == (
        JobReason.WORKLOAD_RESTARTING
    )


def record(workload_uid: str | None) -> StatusChange:
    """The intent write's status change; a no-op on a status that already records the restart."""

    def change(status: dict[str, Any]) -> None:
        if restarting(status):
            return
        status["restartCount"] = int(status.get("restartCount") or 0) + 1
        status.pop("workloadStartTime", None)
        ref = status.get("workloadRef") or {}
        if workload_uid:
            ref["uid"] = workload_uid
        status["workloadRef"] = ref

    return change


def replaced(status: Mapping[str, Any], workload: Obj) -> bool:
    """``workload`` (the live object holding the workload name) is the one a restart replaces."""
    uid = (status.get("workloadRef") or {}).get("uid")
    return uid is not None and workload["metadata"].get("uid") == uid


def reset_goodput(now: datetime) -> StatusChange:
    """The GoodputMeasurement starts over: no step, no stall clock from before the restart."""

    def change(status: dict[str, Any]) -> None:
        for key in ("lastStepTimestamp", "avgStepTimeSec", "applicationStartTime"):
            status.pop(key, None)
        status["startTime"] = format_time(now)

    return change


def requeue_after(job_spec: Mapping[str, Any]) -> float:
    """2x the GoodputMeasurement sample interval, 30 s without one (spec 8.5)."""
    if (job_spec.get("goodputMeasurement") or {}).get("sampleInterval"):
        return 2 * sample_interval(job_spec)
    return DEFAULT_RESTART_REQUEUE_SECONDS

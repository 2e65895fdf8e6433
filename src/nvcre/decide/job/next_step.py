"""What a Job does next, given its workload: the phase -> action table of spec 8.4 (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nvcre.api.v1alpha1.constants import Default, JobReason
from nvcre.api.v1alpha1.meta import format_time, parse_time
from nvcre.health.restart import bandwidth_stalled, restart_eligible, restart_message, stalled
from nvcre.health.scheduling import unschedulable
from nvcre.measure.early import early_failure
from nvcre.objects import Obj, StatusChange
from nvcre.workload import trainjob

REQUEUE = Default.REQUEUE_SECONDS
DEFAULT_SCHEDULING_GRACE_SECONDS = 300


@dataclass(frozen=True)
class Progress:
    """``InProgress`` with this reason and message, ``change`` in the same write; look again later."""

    reason: str
    message: str
    change: StatusChange | None
    requeue: float


@dataclass(frozen=True)
class Succeed:
    message: str


@dataclass(frozen=True)
class Fail:
    message: str
    reason: str = JobReason.WORKLOAD_FAILED
    cause: str = ""
    """The failed nodes' cause when it is not ``reason`` (an early miss of the expected floor)."""
    verdict: bool = False
    """An early verdict: also the Job's ``ValidationFailed`` condition, like a final one."""


@dataclass(frozen=True)
class Restart:
    """Start the workload again from its checkpoint (see :mod:`.restart`)."""

    message: str
    workload_uid: str | None
    """The workload being replaced (None when it is already gone)."""


Decision = Progress | Succeed | Fail | Restart


def _restart_or(job: Obj, goodput: Obj | None, workload: Obj | None, otherwise: Fail) -> Decision:
    if restart_eligible(job["spec"], job.get("status") or {}, goodput):
        uid = (workload or {}).get("metadata", {}).get("uid")
        return Restart(restart_message(job["spec"], job.get("status") or {}), uid)
    return otherwise


def follow(
    job: Obj,
    workload: Obj | None,
    goodput: Obj | None,
    pods: list[Obj],
    now: datetime,
    bandwidth: Obj | None = None,
) -> Decision:
    """The next step of a Job whose workload exists (``workload``: its live state, None when gone;
    ``goodput``/``bandwidth``: its measurements, whose progress tells a stalled run, or a
    bandwidth verdict already beyond doubt)."""
    name = job["status"]["workloadRef"]["name"]
    if workload is None:
        return _restart_or(job, goodput, None, Fail(f"Workload TrainJob/{name} was deleted"))
    phase = trainjob.status(workload)
    if phase.phase == "Failed":
        detail = f" failed: {phase.message}" if phase.message else " has failed"
        return _restart_or(job, goodput, workload, Fail(f"Workload TrainJob/{name}{detail}"))
    if phase.phase == "Succeeded":
        detail = f": {phase.message}" if phase.message else " successfully"
        return Succeed(f"Workload TrainJob/{name} completed{detail}")
    if phase.phase == "Pending":
        detail = f": {phase.message}" if phase.message else ""
        return Progress(
            JobReason.WORKLOAD_PENDING, f"Workload TrainJob/{name} is pending{detail}", None, REQUEUE
        )
    why = stalled(job, goodput, now) or bandwidth_stalled(job, bandwidth)
    if why is not None:
        return _restart_or(job, goodput, workload, Fail(why, JobReason.WORKLOAD_STALLED))
    early = early_failure(job, bandwidth)
    if early is not None:
        return Fail(early.message, early.reason, early.cause, verdict=True)
    return running(job, name, pods, now)


def running(job: Obj, name: str, pods: list[Obj], now: datetime) -> Progress:
    """Running, or blocked by unschedulable pods (which starts no workload clock)."""
    blocked = unschedulable(pods)
    stamp = format_time(now)
    if blocked is None:

        def mark_running(status: dict[str, Any]) -> None:
            status.setdefault("workloadStartTime", stamp)
            if status.pop("schedulingBlockedSince", None):
                status["schedulingResumedTime"] = stamp

        return Progress(
            JobReason.WORKLOAD_RUNNING, f"Workload TrainJob/{name} is running", mark_running, REQUEUE
        )
    since = (job.get("status") or {}).get("schedulingBlockedSince") or stamp
    grace = job["spec"].get("schedulingStallGraceSeconds") or DEFAULT_SCHEDULING_GRACE_SECONDS
    waited = (now - parse_time(since)).total_seconds()
    where = f"pod {blocked.pod}: {blocked.message}"
    if waited >= grace:
        reason, message = (
            JobReason.WORKLOAD_SCHEDULING_BLOCKED,
            f"Workload TrainJob/{name} cannot be scheduled: {where}",
        )
    else:
        reason, message = JobReason.WORKLOAD_PENDING, f"Workload TrainJob/{name} is pending: {where}"

    def mark_blocked(status: dict[str, Any]) -> None:
        status.setdefault("schedulingBlockedSince", since)
        status.pop("workloadStartTime", None)  # a workload that cannot be placed is not running

    return Progress(reason, message, mark_blocked, min(REQUEUE, max(grace - waited, 0.05)))

"""What becomes of a group whose Job ended or vanished: retried, ``Failed`` or ``Succeeded``,
and the failed-nodes entries it leaves (spec/controllers.md 5.3-5.5, 5.8).

A group that ends ``Failed`` records every one of its nodes: the entries its Job reported
(``status.failedNodes``), and for each node the Job did not name, one entry saying why the group
failed. So every node of every group ends in exactly one of the two result lists (see
:func:`nvcre.orchestration.iterations.succeeded_nodes`). A retried attempt records nothing: the
attempt that ends the group decides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nvcre import failednodes
from nvcre.api.v1alpha1.constants import ConditionType, FailureCause, JobReason, WorkflowReason
from nvcre.api.v1alpha1.meta import parse_time
from nvcre.api.v1alpha1.workflow import GroupPhase
from nvcre.conditions import condition_of, condition_true
from nvcre.durations import parse_duration

TERMINAL_FOR_WORKFLOW = (ConditionType.HARDWARE_FAILED, ConditionType.FAILED, ConditionType.SUCCEEDED)
"""A hardware failure ends the group although the Job's own trio may still say InProgress."""
FAILURES = (ConditionType.FAILED, ConditionType.HARDWARE_FAILED, ConditionType.VALIDATION_FAILED)

Entry = failednodes.Entry


def job_terminal(job: Mapping[str, Any]) -> bool:
    return any(condition_true(job, t) for t in TERMINAL_FOR_WORKFLOW)


def job_failed(job: Mapping[str, Any]) -> bool:
    return any(condition_true(job, t) for t in FAILURES)


def timed_out(job: Mapping[str, Any]) -> bool:
    failed = condition_of(job, ConditionType.FAILED) or {}
    return failed.get("reason") == WorkflowReason.JOB_TIMED_OUT


def time_left(
    timeout_per_job: str | None, job: Mapping[str, Any], group_start: str | None, now: datetime
) -> float | None:
    """Seconds until the Job exceeds ``timeoutPerJob`` (negative once it has); None when no
    clock runs: no (valid) timeout, or a workload created but never seen running (pending,
    suspended by a queue, unschedulable)."""
    if not timeout_per_job:
        return None
    try:
        seconds = parse_duration(str(timeout_per_job)) / 1e9
    except ValueError:
        return None
    status = job.get("status") or {}
    if status.get("workloadStartTime"):
        started = parse_time(status["workloadStartTime"])
    elif status.get("workloadRef"):
        return None
    elif group_start:
        started = parse_time(group_start)
    else:
        return None
    return seconds - (now - started).total_seconds()


def hung(job: Mapping[str, Any]) -> bool:
    """The workload stopped making progress: it stalled, or ran past ``timeoutPerJob``."""
    failed = condition_of(job, ConditionType.FAILED) or {}
    return failed.get("reason") in (WorkflowReason.JOB_TIMED_OUT, JobReason.WORKLOAD_STALLED)


def may_be_transient(job: Mapping[str, Any]) -> bool:
    """The workload failed on its own: no hardware report, no measured threshold miss, no hang
    (a stall or a timeout, which a run again would wait out once more): running it again may pass."""
    return (
        condition_true(job, ConditionType.FAILED)
        and not condition_true(job, ConditionType.HARDWARE_FAILED)
        and not condition_true(job, ConditionType.VALIDATION_FAILED)
        and not hung(job)
    )


@dataclass(frozen=True)
class Completion:
    """The decision for a group whose attempt ended; ``Pending`` means "run it again"."""

    phase: GroupPhase
    failed_nodes: tuple[Entry, ...] = ()

    @property
    def retry(self) -> bool:
        return self.phase == "Pending"


def _every_node(
    nodes: Sequence[str], reported: Sequence[Mapping[str, Any]], cause: str, message: str
) -> tuple[Entry, ...]:
    entries = [failednodes.normalise(e) for e in reported]
    named = {e["name"] for e in entries}
    entries += failednodes.entries([n for n in nodes if n not in named], cause, message)
    return tuple(entries)


def failure_of(job: Mapping[str, Any]) -> tuple[str, str]:
    """(cause, message) for the nodes the Job did not name: the reason of the condition that
    failed it (a verdict's ``ThresholdViolated``, a ``WorkloadStalled``...); a hardware report
    names its own nodes, so the rest of the group is failed with the workload."""
    for cond_type in FAILURES:
        if condition_true(job, cond_type):
            cond = condition_of(job, cond_type) or {}
            reason = str(cond.get("reason") or "")
            known = reason in failednodes.CAUSE_REASONS and cond_type != ConditionType.HARDWARE_FAILED
            return (reason if known else FailureCause.WORKLOAD_FAILED), str(cond.get("message") or cond_type)
    return FailureCause.WORKLOAD_FAILED, "failed"


def complete(group: Mapping[str, Any], job: Mapping[str, Any], retry_limit: int) -> Completion:
    """A terminal Job's group: retried while retries are left (never after a timeout), else
    ``Failed`` with an entry for each of its nodes, or ``Succeeded``."""
    if not job_failed(job):
        return Completion("Succeeded")
    if not timed_out(job) and int(group.get("retries") or 0) < retry_limit:
        return Completion("Pending")
    nodes = list(group.get("nodes") or ())
    reported = (job.get("status") or {}).get("failedNodes") or ()
    return Completion("Failed", _every_node(nodes, reported, *group_failure(job)))


def group_failure(job: Mapping[str, Any]) -> tuple[str, str]:
    """(cause, message) of the nodes of a failed Job's group that the Job did not name."""
    if timed_out(job):
        return FailureCause.JOB_TIMED_OUT, "Job exceeded timeoutPerJob"
    name = (job.get("metadata") or {}).get("name", "")
    cause, why = failure_of(job)
    return cause, f'Job "{name}" failed: {why}'


def vanished(group: Mapping[str, Any], job_name: str) -> Completion:
    """A group whose Job is gone (or going, with no pod left) before it ended: ``Failed``."""
    message = f'Job "{job_name}" was deleted before it finished'
    return Completion(
        "Failed", _every_node(list(group.get("nodes") or ()), (), FailureCause.JOB_DELETED, message)
    )

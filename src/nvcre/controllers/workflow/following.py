"""Following running groups: the timeout, the pod-drain barrier, and carrying out what
:mod:`nvcre.orchestration.completion` decides for a group whose Job ended or vanished.

Every decision is written to the Workflow status before anything irreversible follows from it:
a retry keeps the failed attempt's ``jobRef`` on the now Pending group, and the next launch
deletes that Job (see :mod:`.launching`), so a kill between the two never loses the retry.
"""

from __future__ import annotations

from typing import Any

from nvcre import resources
from nvcre.api.v1alpha1.constants import ConditionType, Default, FailureLogReason, WorkflowReason
from nvcre.controllers import indexes
from nvcre.controllers.children import delete_if_present, get_live
from nvcre.controllers.job import failure_log
from nvcre.controllers.status import now
from nvcre.controllers.workflow import isolating
from nvcre.controllers.workflow.diagnosing import retest_limit
from nvcre.controllers.workflow.launching import clean_group_dependencies
from nvcre.controllers.workflow.state import WorkflowState, timestamp
from nvcre.measure import verdicts
from nvcre.objects import Obj
from nvcre.orchestration.completion import (
    Completion,
    complete,
    job_failed,
    job_terminal,
    time_left,
    vanished,
)
from nvcre.runtime.controller import Result


def _pods_active(state: WorkflowState, job: Obj) -> bool:
    return any(
        (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed") for p in _job_pods(state, job)
    )


def _execution(state: WorkflowState) -> dict[str, Any]:
    return dict(((state.spec.get("orchestration") or {}).get("execution")) or {})


async def _carry_out(state: WorkflowState, group: dict[str, Any], completion: Completion) -> None:
    """Record the group's failed nodes, then its new phase (written by the caller). In diagnose
    mode a failed group blames no node: the diagnosis records the nodes it confirms."""
    if completion.failed_nodes and not state.orchestration.get("diagnose"):
        await isolating.record_or_set_aside(state, group, completion.failed_nodes)
    if completion.retry:
        # The failed attempt's jobRef stays: the launch deletes that Job once this is written.
        group.update(phase="Pending", retries=int(group.get("retries") or 0) + 1)
        group.pop("startTime", None)
        group.pop("completionTime", None)
        return
    await clean_group_dependencies(state, group)
    group.update(phase=completion.phase, completionTime=timestamp())


def _job_pods(state: WorkflowState, job: Obj) -> list[Obj]:
    namespace = job["metadata"]["namespace"]
    return [
        p
        for p in state.caches.pods.by_index(indexes.POD_JOB_INDEX, job["metadata"]["name"])
        if p["metadata"].get("namespace") == namespace
    ]


async def _time_out(state: WorkflowState, job: Obj) -> Obj:
    """Fail the Job ``JobTimedOut`` with its launcher's log tail (read before its workload is
    deleted) as the failure log: how far the run got is the first thing a user asks."""
    ours = await state.ctx.ownership.pods_of(job, _job_pods(state, job))
    entry = await failure_log.collect(state.ctx.client, ours, unfinished=FailureLogReason.TIMEOUT)

    def record(status: dict[str, Any]) -> None:
        status.setdefault("failureLog", entry)

    written = await state.ctx.status.set_exclusive(
        resources.Job,
        job,
        ConditionType.FAILED,
        WorkflowReason.JOB_TIMED_OUT,
        "Job exceeded timeoutPerJob",
        extra=record,
        unless_terminal=True,
    )
    await state.ctx.recorder.warning(job, WorkflowReason.JOB_TIMED_OUT, "Job exceeded timeoutPerJob")
    return written or job


async def follow(state: WorkflowState) -> Result:
    next_look = Default.REQUEUE_SECONDS
    execution = _execution(state)
    for group in state.groups:
        if group.get("phase") != "Running" or not group.get("jobRef"):
            continue
        name = group["jobRef"]["name"]
        job = state.caches.jobs.get(state.namespace, name)
        if job is None and state.caches.created.lagging(state.namespace, name):
            continue  # created a moment ago by this manager: its watch event brings us back
        if job is None or job["metadata"].get("deletionTimestamp") or job_terminal(job):
            # Decisions are taken on the live object: a cache miss is no proof of deletion, and
            # a retried group's cache may still hold the previous attempt's Job of the same name.
            job = await get_live(state.ctx.client, resources.Job, name, state.namespace)
        if job is not None and job["metadata"].get("deletionTimestamp") and _pods_active(state, job):
            continue
        if job is None or job["metadata"].get("deletionTimestamp"):
            await _carry_out(state, group, vanished(group, name))
            group.pop("jobRef", None)
            continue
        if not job_terminal(job):
            left = time_left(execution.get("timeoutPerJob"), job, group.get("startTime"), now())
            if left is None or left > 0:
                next_look = min(next_look, left + 0.1) if left is not None else next_look
                continue
            job = await _time_out(state, job)
        if job_failed(job):
            ref = (job.get("status") or {}).get("workloadRef")
            if ref:  # the Job is kept for the report; its workload goes
                await delete_if_present(
                    state.ctx.client, resources.TrainJob, ref["name"], ref.get("namespace") or state.namespace
                )
            if _pods_active(state, job):
                continue  # the pod-drain barrier: the group stays Running
        elif verdicts.awaiting_verdict(job):
            continue  # succeeded, but its verdict is not written yet: the group stays Running
        limit = (
            retest_limit(job)
            if state.orchestration.get("diagnose")
            else int(execution.get("retryFailedGroups") or 0)
        )
        await _carry_out(state, group, complete(group, job, limit))
    await state.record(ConditionType.IN_PROGRESS, WorkflowReason.JOB_RUNNING, state.running_message())
    return Result(requeue_after=next_look)

"""Following running groups: the pod-drain barrier, and carrying out what
:mod:`nvcre.orchestration.completion` decides for a group whose Job ended or vanished. A Job
times itself out (``timeoutPerJob``) and releases its own workload: the Workflow writes only
its own status and its own children.

Every decision is written to the Workflow status before anything irreversible follows from it:
a retry keeps the failed attempt's ``jobRef`` on the now Pending group, and the next launch
deletes that Job (see :mod:`.launching`), so a kill between the two never loses the retry.
"""

from __future__ import annotations

from typing import Any

from nvcre import resources
from nvcre.api.v1alpha1.constants import ConditionType, Default
from nvcre.controllers import indexes
from nvcre.controllers.children import get_live
from nvcre.controllers.workflow import isolating
from nvcre.controllers.workflow.diagnosing import retest_limit
from nvcre.controllers.workflow.launching import clean_group_dependencies
from nvcre.controllers.workflow.state import WorkflowState
from nvcre.decide import scheduling
from nvcre.measure import verdicts
from nvcre.objects import Obj
from nvcre.orchestration.completion import (
    Completion,
    complete,
    job_failed,
    job_terminal,
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
    group.update(phase=completion.phase, completionTime=state.timestamp())


def _job_pods(state: WorkflowState, job: Obj) -> list[Obj]:
    namespace = job["metadata"]["namespace"]
    return [
        p
        for p in state.caches.pods.by_index(indexes.POD_JOB_INDEX, job["metadata"]["name"])
        if p["metadata"].get("namespace") == namespace
    ]


async def follow(state: WorkflowState) -> Result:
    execution = _execution(state)
    blocked: list[tuple[str, str]] = []
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
            why = scheduling.blocked_message(job)
            if why is not None:
                blocked.append((str(group.get("name") or name), why))
            continue  # its status changes (a watch event) bring us back
        if job_failed(job):
            if _pods_active(state, job):
                continue  # the pod-drain barrier (the Job deletes its workload): the group stays Running
        elif verdicts.awaiting_verdict(job):
            continue  # succeeded, but its verdict is not written yet: the group stays Running
        limit = (
            retest_limit(job)
            if state.orchestration.get("diagnose")
            else int(execution.get("retryFailedGroups") or 0)
        )
        await _carry_out(state, group, complete(group, job, limit))
    await state.record(
        ConditionType.IN_PROGRESS, *scheduling.workflow_in_progress(state.running_message(), blocked)
    )
    return Result(requeue_after=Default.REQUEUE_SECONDS)
